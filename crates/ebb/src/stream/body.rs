//! The request's body, for the rules that read it (`req.body`, `option
//! http-buffer-request`, `http-request wait-for-body`): what of it is in
//! the client's buffer ([`BodyNow`]), and the wait for it (HAProxy's
//! http_wait_for_msg_body): `100 Continue`, its deadlines, and the rules
//! going on where they stopped once it came ([`BodyWait`]).

use std::sync::Arc;

use sched::{Ctx, Tick};

use super::decide::{Act, Resume};
use super::{Stream, Wait, H1};
use crate::http1::BodyFraming;
use crate::mux::h1::client::In;

/// A request whose rules wait for its body: where they go on, what the
/// rules before left, and until when they wait (HAProxy's
/// http_wait_for_msg_body).
pub(super) struct BodyWait {
    pub(super) at: Resume,
    pub(super) edited: Option<Box<crate::rewrite::Edited>>,
    pub(super) cache_hit: Option<crate::httpcache::Hit>,
    /// Enough once this many bytes arrived (0: the whole body).
    pub(super) at_least: u64,
    /// The bound on the wait (`time`, `timeout http-request`); `None`:
    /// only the client's read timeout.
    pub(super) time_ms: Option<u32>,
    pub(super) deadline: Tick,
    /// `timeout client` since the last byte read.
    pub(super) read_deadline: Tick,
    /// Bytes in the buffer when last looked at.
    pub(super) seen: usize,
    /// `http-request strict-mode` as the rules before left it.
    pub(super) strict: bool,
    /// A `do-resolve` rule's name asked for (the rules wait for its
    /// answer, not for the body: [`Act::WaitResolve`](super::decide::Act)).
    pub(super) lookup: Option<std::sync::Arc<crate::resolvers::Lookup>>,
}

/// What of a message's body framed by `framing` is in `after` (the bytes
/// after its head): a chunked body is de-chunked into `decoded`. A
/// broken chunked body counts as complete: the forwarding path answers
/// it.
pub(super) fn body_in(after: &[u8], framing: BodyFraming, decoded: &mut Vec<u8>) -> BodyNow {
    body_of(
        after,
        framing,
        decoded,
        crate::http1::ChunkedDecoder::default(),
    )
}

/// [`body_in`] for an answer's body (its chunked lines may end with a
/// lone LF: [`crate::http1::ChunkedDecoder::answer`]).
pub(super) fn answer_body_in(after: &[u8], framing: BodyFraming, decoded: &mut Vec<u8>) -> BodyNow {
    body_of(
        after,
        framing,
        decoded,
        crate::http1::ChunkedDecoder::answer(),
    )
}

fn body_of(
    after: &[u8],
    framing: BodyFraming,
    decoded: &mut Vec<u8>,
    mut d: crate::http1::ChunkedDecoder,
) -> BodyNow {
    let mut b = BodyNow::default();
    match framing {
        BodyFraming::ContentLength(n) => {
            b.have = n.min(after.len() as u64);
            b.complete = b.have >= n;
        }
        BodyFraming::Chunked => {
            decoded.clear();
            b.complete = d
                .decode_to_vec(after, decoded)
                .map_or(true, |(_, done)| done);
            b.have = decoded.len() as u64;
            b.decoded = true;
        }
        BodyFraming::None => b.complete = true,
        // Complete when the sender closes (the caller knows).
        BodyFraming::UntilClose => b.have = after.len() as u64,
    }
    b
}

/// What of a message's body is in its buffer.
#[derive(Clone, Copy, Debug, Default)]
pub(super) struct BodyNow {
    /// All of it (or the message has none).
    pub(super) complete: bool,
    /// The buffer is full: no more can come before some leaves.
    pub(super) full: bool,
    /// The sender closed its side.
    pub(super) closed: bool,
    /// Body bytes there (de-chunked).
    pub(super) have: u64,
    /// The bytes are in a buffer of their own (a chunked body,
    /// de-chunked), not in the read buffer after the head.
    pub(super) decoded: bool,
}

impl BodyNow {
    /// Whether a wait for the body (`at_least` bytes of it, 0: all) is
    /// over.
    pub(super) fn enough(&self, at_least: u64) -> bool {
        self.complete || self.full || self.closed || (at_least > 0 && self.have >= at_least)
    }

    /// The body bytes there: in the read buffer `buf` after the head, or
    /// de-chunked in the stream's buffer.
    pub(super) fn data<'a>(&self, decoded: &'a [u8], buf: &'a [u8], head_len: usize) -> &'a [u8] {
        if self.decoded {
            return decoded;
        }
        let from = head_len.min(buf.len());
        let to = from.saturating_add(self.have as usize).min(buf.len());
        &buf[from..to]
    }
}

impl Stream {
    /// Looks at what of the request's body is in the read buffer
    /// ([`BodyNow`]); a chunked body is de-chunked into `body_buf`.
    pub(super) fn scan_body(&mut self, c: &H1) {
        let buf = &c.rbuf[c.rstart..c.rend];
        let after = buf.get(c.head.head_len..).unwrap_or(&[]);
        let mut b = body_in(after, c.head.framing, &mut self.body_buf);
        b.closed = c.eof;
        b.full = !c.rbuf.is_empty() && c.rend - c.rstart >= c.rbuf.len();
        self.body_now = b;
    }

    /// The rules wait for the body (`Act::WaitBody`): HAProxy's
    /// http_wait_for_msg_body. An `Expect: 100-continue` client is told
    /// to send it.
    pub(super) fn wait_body(&mut self, c: &mut H1, ctx: &mut Ctx, mut w: Box<BodyWait>) {
        let now = ctx.now();
        w.deadline = match w.time_ms {
            Some(t) => sched::ticks::add(self.body_wait_start, t),
            None => sched::ticks::ETERNITY,
        };
        w.read_deadline = sched::ticks::add(now, c.fe.timeouts.client);
        w.seen = c.rend - c.rstart;
        if c.head.expect_continue && !self.continued && self.body_now.have == 0 {
            // HAProxy's http_handle_expect_hdr: the client is told to send
            // its body, and `Expect` is not forwarded (the server would
            // answer 100 again).
            c.wbuf.extend_from_slice(b"HTTP/1.1 100 Continue\r\n\r\n");
            self.continued = true;
            self.resp_start = c.wbuf.len();
        }
        c.input = In::Stream;
        self.wait = Wait::Body(w);
    }

    /// More of the body may have come: go on with the rules once enough
    /// is there (or the client closed, or the buffer is full).
    pub(super) fn body_step(&mut self, c: &mut H1, ctx: &mut Ctx, mut w: Box<BodyWait>) -> bool {
        let n = c.rend - c.rstart;
        if n != w.seen {
            w.seen = n;
            w.read_deadline = sched::ticks::add(ctx.now(), c.fe.timeouts.client);
        }
        self.scan_body(c);
        if !self.body_now.enough(w.at_least) {
            self.wait = Wait::Body(w);
            return false;
        }
        let at = w.at;
        let act = self.decide_from(c, at, Some(w));
        if let (true, Act::Proxy(bi, _)) = (self.body_now.closed, &act) {
            // The client left before its whole request came: no server is
            // asked (HAProxy logs the backend, no server, `CR`).
            let bi = *bi;
            self.keep_alive = false;
            c.closing = true;
            self.local_server = Some("<NOSRV>");
            self.local_term = Some("CR");
            let be = c.fe.backends.get(bi).cloned();
            crate::proxy::count_request(&c.fe, be.as_deref(), 0, c.bytes_in, 0);
            self.end_exchange(c, ctx, 0, Some(bi), 0, None);
            return true;
        }
        self.dispatch(c, ctx, act);
        true
    }

    /// The body did not come in time: 408 and close (HAProxy's
    /// `cD` termination, the request counted as failed).
    pub(super) fn body_timeout(&mut self, c: &mut H1, ctx: &mut Ctx, at: Resume) {
        let fe = Arc::clone(&c.fe);
        let bi = match at {
            Resume::Be(b, _) => Some(b),
            _ => None,
        };
        let be_name = bi.and_then(|b| fe.backends.get(b)).map(|b| b.name.clone());
        self.keep_alive = false;
        c.closing = true;
        self.resp_start = c.wbuf.len();
        self.error_answer(c, &fe, 408, false, be_name.as_deref());
        self.local_server = Some("<NOSRV>");
        self.local_term = Some("cD");
        self.finish_request(c, ctx, 408, bi, 0);
    }
}
