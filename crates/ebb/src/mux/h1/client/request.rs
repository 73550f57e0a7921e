//! Reading requests: [`Conn::process`] takes what the input buffer holds,
//! in order (a request head parsed and normalised, then given to the
//! stream; a body being dropped; an HTTP/2 preface), and answers a head
//! that does not parse with its error ([`Conn::bad_request`]), which ends
//! the connection.

use sched::Ctx;

use crate::http1::{
    parse_request_into, parse_request_lax, scheme_normalized, DrainStep, HttpError, Limits,
    Status as PStatus,
};

use super::{Conn, Exchange, In, LogFacts, H2_PREFACE};

impl<S: Exchange + Default + 'static> Conn<S> {
    /// Answers what the input holds, in order. Returns whether anything
    /// was consumed or produced.
    pub(super) fn process(&mut self, ctx: &mut Ctx) -> bool {
        let mut progress = false;
        loop {
            match &mut self.input {
                In::Discard(d) => {
                    let (n, step) = d.feed(&self.rbuf[self.rstart..self.rend]);
                    self.rstart += n;
                    progress |= n > 0;
                    match step {
                        DrainStep::More => return progress,
                        DrainStep::Done => self.input = In::Head,
                        DrainStep::Stop => {
                            // Past `tune.http.drain-max` or broken: the
                            // answer already left; the connection ends.
                            self.closing = true;
                            self.unread = true;
                            self.rstart = self.rend;
                            self.input = In::Head;
                            return true;
                        }
                    }
                }
                In::Stream => {
                    // Step while bytes move (a response head, then its
                    // body), so they leave in one write.
                    let mut moved = self.with_stream(|st, c| st.step(c, ctx)).unwrap_or(false);
                    progress |= moved;
                    while moved && matches!(self.input, In::Stream) {
                        moved = self.with_stream(|st, c| st.step(c, ctx)).unwrap_or(false);
                    }
                    if matches!(self.input, In::Stream) {
                        return progress;
                    }
                }
                In::Head => {
                    if self.closing || self.body.is_some() || self.pending_out() > self.w.bufsize {
                        return progress;
                    }
                    if self.rstart == self.rend {
                        return progress;
                    }
                    if self.requests() == 0
                        && self.lane_of.is_none()
                        && self.rstart == 0
                        && self.rend < H2_PREFACE.len()
                        && H2_PREFACE.starts_with(&self.rbuf[..self.rend])
                    {
                        // Maybe the HTTP/2 preface: wait for all of it.
                        return progress;
                    }
                    if self.req_start.is_none() {
                        self.req_start = Some(ctx.now());
                    }
                    let limits = self.req_limits();
                    let mut r = self.parse_head(&limits, true);
                    if let Ok(PStatus::Complete(())) = r {
                        r = self.normalize_head();
                    }
                    match r {
                        Ok(PStatus::Partial) => return progress,
                        Ok(PStatus::Complete(())) => {
                            if let Some(e) = self.early_body_error() {
                                self.bad_request(ctx, e);
                                return true;
                            }
                            self.unpark();
                            self.with_stream(|st, c| st.start(c, ctx));
                            progress = true;
                        }
                        Err(HttpError::UnsupportedVersion)
                            if self.rbuf[self.rstart..self.rend].starts_with(&H2_PREFACE[..16]) =>
                        {
                            // The HTTP/2 preface where HTTP/2 may not
                            // start (`proto h1`, a later request): a bad
                            // request to HAProxy, not a version it lacks.
                            self.bad_request(ctx, HttpError::BadRequestLine);
                            return true;
                        }
                        Err(e) => {
                            self.bad_request(ctx, e);
                            return true;
                        }
                    }
                }
            }
        }
    }

    /// A chunked body broken in the bytes that came with its head. HAProxy
    /// 2.6's HTTP/1 layer reads those before any stream starts, so there
    /// the request is a bad one (raw 400, `PR`, no server
    /// asked), as a bad head; a chunk that breaks later fails the exchange
    /// (`PH`/`PD`, [`crate::backend::error::ExchangeError::bad_request_body`]).
    /// One decoder pass over those bytes, for chunked requests only.
    fn early_body_error(&self) -> Option<HttpError> {
        if self.lane_of.is_some() || self.head.framing != crate::http1::BodyFraming::Chunked {
            return None;
        }
        let mut rest = self.rbuf.get(self.rstart + self.head.head_len..self.rend)?;
        let mut d = crate::http1::ChunkedDecoder::default();
        while !rest.is_empty() {
            match d.decode(rest) {
                Err(e) => return Some(e),
                Ok(x) if x.done || x.consumed == 0 => break,
                Ok(x) => rest = rest.get(x.consumed..).unwrap_or_default(),
            }
        }
        None
    }

    /// Scheme-based normalization of an absolute-form request (see
    /// [`scheme_normalized`]): the shorter head is written back so that it
    /// ends where the received one did (the body after it stays in place),
    /// and parsed again.
    #[inline]
    pub(super) fn normalize_head(&mut self) -> Result<PStatus<()>, HttpError> {
        // What `scheme_normalized` looks at first, without a call: only an
        // absolute target whose authority ends in a default port changes
        // (most heads, an HTTP/2 one's absolute URI too, do not).
        let buf = self.rbuf.get(self.rstart..self.rend).unwrap_or_default();
        let default_port = self.head.target_form == crate::http1::TargetForm::Absolute
            && self.head.host.is_some_and(|h| {
                matches!(
                    h.get(buf),
                    [.., b':', b'8', b'0'] | [.., b':', b'4', b'4', b'3']
                )
            });
        if !default_port {
            return Ok(PStatus::Complete(()));
        }
        self.normalize_scheme()
    }

    /// [`Conn::normalize_head`] past its first look.
    fn normalize_scheme(&mut self) -> Result<PStatus<()>, HttpError> {
        let old = &self.rbuf[self.rstart..self.rend];
        let Some(new) = scheme_normalized(old, &self.head) else {
            return Ok(PStatus::Complete(()));
        };
        let end = self.rstart + self.head.head_len;
        if let Some(start) = end.checked_sub(new.len()).filter(|&s| s >= self.rstart) {
            self.rbuf[start..end].copy_from_slice(&new);
            self.rstart = start;
        } else {
            // Longer (a `Host` shorter than the host it becomes): the
            // bytes after the head move up, if the buffer has the room.
            let grow = new.len() - self.head.head_len;
            if self.rbuf.len() - self.rend < grow {
                return Err(HttpError::HeadTooLarge);
            }
            self.rbuf.copy_within(end..self.rend, end + grow);
            self.rend += grow;
            self.rbuf[self.rstart..self.rstart + new.len()].copy_from_slice(&new);
        }
        let limits = self.req_limits();
        self.parse_head(&limits, false)
    }

    /// Parses the request head the input starts with. A head the strict
    /// parser refuses is read again as HAProxy 2.6 reads it when the
    /// frontend has `option accept-invalid-http-request` (an HTTP/1
    /// client's only: an HTTP/2 stream's head is ebb's own writing, and
    /// HAProxy's option is for its HTTP/1 parser); one it takes thanks to
    /// a byte only the option lets through is captured for `show errors`
    /// (`capture`: not again when the head is read anew after its scheme
    /// normalization).
    fn parse_head(&mut self, limits: &Limits, capture: bool) -> Result<PStatus<()>, HttpError> {
        let buf = &self.rbuf[self.rstart..self.rend];
        let strict = parse_request_into(buf, limits, &mut self.head);
        let Err(e) = strict else {
            return strict;
        };
        if !self.fe.accept_invalid || self.lane_of.is_some() {
            return Err(e);
        }
        match parse_request_lax(buf, limits, &mut self.head) {
            Ok(PStatus::Complete(err)) => {
                if let (Some(pos), true) = (err, capture) {
                    self.capture_request(pos);
                }
                Ok(PStatus::Complete(()))
            }
            Ok(PStatus::Partial) => Ok(PStatus::Partial),
            Err(_) => Err(e),
        }
    }

    /// Keeps what the input holds from the request's first byte as the
    /// frontend's last invalid request (`show errors`), `pos` the byte at
    /// fault. As HAProxy's HTTP/1 layer captures it, before a stream and
    /// its backend exist: no backend, no server.
    #[cold]
    fn capture_request(&self, pos: usize) {
        let buf = self.rbuf.get(self.rstart..self.rend).unwrap_or_default();
        self.fe.invalid_req.store(
            buf,
            pos,
            self.w.limits.buf_size,
            Some(self.sess.peer),
            None,
            None,
        );
    }

    /// The limits a request head is read with: the thread's, without the
    /// field count on an HTTP/2 lane (its connection bounds the fields as
    /// HAProxy does, `crate::h2::lane_limits`).
    pub(super) fn req_limits(&self) -> crate::http1::Limits {
        match self.lane_of {
            Some(_) => crate::h2::lane_limits(&self.w.limits),
            None => self.w.limits,
        }
    }

    /// A request that could not be read (malformed, cut short, late):
    /// counted as HAProxy counts it, a request (`req_tot`), its status's
    /// class and a failed request (`ereq`).
    pub(super) fn count_failed_request(&self, status: u16) {
        use std::sync::atomic::Ordering::Relaxed;
        let h = &self.fe.http;
        h.failed_req.fetch_add(1, Relaxed);
        let h = h.local();
        h.requests.fetch_add(1, Relaxed);
        let class = usize::from(status / 100).wrapping_sub(1).min(5);
        h.hrsp[class].fetch_add(1, Relaxed);
    }

    /// A request that could not be parsed: its status, a log line, close.
    /// The line is HAProxy 2.6's for a request its HTTP/1 layer refuses
    /// (`<BADREQ>`, the timers -1 but `%Ta`/`%Tt`, `%B` and `%U` 0,
    /// `PR--`): no request was taken, so none is written (the bytes go
    /// to `show errors`, as HAProxy keeps them).
    pub(super) fn bad_request(&mut self, ctx: &mut Ctx, e: HttpError) {
        let status = e.status();
        if self.lane_of.is_none() {
            // HAProxy's HTTP/1 layer keeps the message for `show errors`,
            // with where its parser stopped.
            let buf = self.rbuf.get(self.rstart..self.rend).unwrap_or_default();
            self.capture_request(crate::http1::lax::error_position(buf, false, e));
        }
        self.count_failed_request(status);
        self.parse_error_response(status);
        let tt = self.elapsed(ctx, self.req_start.or(Some(self.idle_since)));
        self.bytes_in = 0;
        let entry = self.log_entry(LogFacts {
            backend: &self.fe.name,
            server: "<NOSRV>",
            times: [-1, -1, -1, -1, tt],
            status,
            bytes: 0,
            term: "PR",
            request_line: b"<BADREQ>",
        });
        let sd = self.fe.log_sd(&entry);
        self.w.log_fe_error_sd(
            &self.fe,
            crate::log::format(&entry),
            sd,
            self.fe.err_level(),
        );
        self.rstart = self.rend;
        self.closing = true;
        // The rest of what the client sent is not read.
        self.unread = true;
        self.req_start = None;
    }
}
