//! Writing answers and their log lines. The stream answers through
//! [`Conn::respond`] and its kin (a head and body into the output
//! buffer, written by [`H1Out`]; one that must close marks the
//! connection `closing`), or
//! [`Conn::error_response`] for ebb's own error pages; an HTTP/2 lane may
//! take a whole answer as it is ([`Conn::take_native`]). Every access-log
//! and error line is built by [`Conn::log_entry`]: the connection's facts
//! around the exchange's.

use sched::{Ctx, Tick};

use crate::http1::{error_page, error_reason, Method, Version};
use crate::mux::h1::out::H1Out;
use crate::stream::msg::{BodySize, Msg, MsgSink, RespHead};

use super::{Conn, Exchange, LogFacts};

impl<S: Exchange + Default + 'static> Conn<S> {
    /// Whether the exchange's access-log line goes out: not the first
    /// one of a tcp stream upgraded in place (an HTTP/1 connection of a
    /// tcp frontend) when its frontend logs HAProxy's default line, which
    /// the stream's start gave already.
    pub(crate) fn logs_exchange(&self) -> bool {
        let l4 = &self.fe.l4;
        let connect_line = l4.tcp_mode && !l4.tcplog && self.fe.log_format.is_none();
        let first_in_place = self.lane_of.is_none() && self.requests() == 1;
        !(connect_line && first_in_place) && self.w.logging(&self.fe)
    }

    /// The one place a log entry is built: the connection's facts (client,
    /// accept date, frontend, connection counts) around the exchange's.
    pub(crate) fn log_entry<'a>(&'a self, f: LogFacts<'a>) -> crate::log::Entry<'a> {
        let [tq, tw, tc, tr, tt] = f.times;
        let l4 = &self.fe.l4;
        // A tcp frontend's upgraded stream (`tcp::upgrade`): its line,
        // `option tcplog`'s or HAProxy's default one.
        let tcp_fmt = (l4.tcp_mode && self.fe.log_format.is_none())
            .then(|| crate::sample::logline::tcplog(!l4.tcplog));
        crate::log::Entry {
            client_cert: self.tr.client_cert(),
            client: self.stream_src(),
            accept: self.sess.accepted(),
            frontend: &self.fe.name,
            backend: f.backend,
            server: f.server,
            tq,
            tw,
            tc,
            tr,
            tt,
            status: f.status,
            bytes: f.bytes,
            bytes_in: self.bytes_in,
            txn: true,
            term: f.term,
            actconn: self.w.actconn(),
            feconn: self.fe.cur_conns(),
            request_line: f.request_line,
            request_date: std::time::SystemTime::now()
                .checked_sub(std::time::Duration::from_millis(tt.max(0) as u64)),
            local: match tcp_fmt {
                Some(_) if !l4.tcplog => self.stream_dst(),
                _ => self.fe.log_local(self.tr.tcp()),
            },
            tls: self.tr.is_tls(),
            cookie_flags: "--",
            h2: self.lane_of.is_some(),
            vars: self.vars.cell(),
            ncaps: self.fe.ncaps(),
            fmt: self.fe.log_format.as_ref().or(tcp_fmt),
            asap: false,
            fc: Some(self.tr.tcp()),
        }
    }

    /// The HTTP/1 size of the answer kept for HTTP/2 frames for the
    /// current request (0 when it was written here).
    pub(crate) fn native_sent(&self) -> u64 {
        self.native.as_deref().map_or(0, |n| n.sent())
    }

    pub(crate) fn elapsed(&self, ctx: &Ctx, since: Option<Tick>) -> i64 {
        match since {
            Some(t) => ctx.now().wrapping_sub(t) as i32 as i64,
            None => 0,
        }
    }

    /// The one output path of this client side: writes an answer to the
    /// current request (`head`), given as messages (a head view, its body
    /// parts, its end), as HTTP/1 into the output buffer ([`H1Out`]). The
    /// framing and the `Connection:` field follow the request's version
    /// and method; the connection closes after the answer when the head
    /// asks to ([`RespHead::close`]) or the framing needs it.
    pub(crate) fn respond(&mut self, head: RespHead<'_>, body: &[&[u8]]) {
        let (version, head_req) = (self.head.version, self.head.method == Method::Head);
        self.respond_to(head, body, version, head_req);
    }

    /// Writes an answer written ahead ([`WholeAnswer`]) to the current
    /// request, when it is what [`Conn::respond`] would write: an HTTP/1.1
    /// request but `HEAD`, on a connection kept alive, not taken by an
    /// HTTP/2 lane's native answer. Returns whether it was written (else
    /// the caller answers through [`Conn::respond`]). `now` is the
    /// scheduler turn's tick: the `Date` is read once per turn (0: read
    /// now, see [`crate::http1::DateCache::get_in_turn`]).
    ///
    /// [`WholeAnswer`]: crate::stream::msg::WholeAnswer
    pub(crate) fn respond_whole(&mut self, a: &crate::stream::msg::WholeAnswer, now: Tick) -> bool {
        if self.closing
            || self.head.version != Version::Http11
            || self.head.method == Method::Head
            || self.native.as_deref().is_some_and(|n| n.armed)
        {
            return false;
        }
        let date = *self.w.date.borrow_mut().get_in_turn(now);
        a.write(&mut self.wbuf, &date);
        true
    }

    /// Writes only the head of an answer to the current request; its body
    /// leaves from [`Conn::body`] (a file, with `sendfile`).
    pub(crate) fn respond_head(&mut self, head: RespHead<'_>) {
        let (version, head_req) = (self.head.version, self.head.method == Method::Head);
        if self.take_native(&head, None, version, head_req) {
            return;
        }
        let mut o = self.out(version, head_req);
        o.put(Msg::Head(head));
        if o.closing() {
            self.closing = true;
        }
    }

    /// [`Conn::respond`] for a request of `version` (`head_req`: a HEAD).
    fn respond_to(&mut self, head: RespHead<'_>, body: &[&[u8]], version: Version, head_req: bool) {
        if self.take_native(&head, Some(body), version, head_req) {
            return;
        }
        let mut o = self.out(version, head_req);
        o.whole(head, body);
        if o.closing() {
            self.closing = true;
        }
    }

    /// An answer armed [`Conn::native`] takes instead of its HTTP/1
    /// bytes (`body` `None`: its head, the body following). Returns
    /// whether it was taken.
    fn take_native(
        &mut self,
        head: &RespHead<'_>,
        body: Option<&[&[u8]]>,
        version: Version,
        head_req: bool,
    ) -> bool {
        let Some(n) = self.native.as_deref_mut().filter(|n| n.armed) else {
            return false;
        };
        if self.wpos != self.wbuf.len() || self.body.is_some() {
            return false;
        }
        let date = *self.w.date.borrow_mut().get();
        use crate::mux::h2::native::Take;
        match n.take(head, body, version, head_req, !self.closing, &date) {
            Take::No => false,
            Take::Keep => true,
            Take::Close => {
                self.closing = true;
                true
            }
        }
    }

    fn out(&mut self, version: Version, head_req: bool) -> H1Out<'_> {
        let date = *self.w.date.borrow_mut().get();
        let keep_alive = !self.closing;
        H1Out::new(&mut self.wbuf, date, version, head_req, keep_alive)
            .with_case(self.fe.h1_case.as_deref())
    }

    /// The answer to a request that could not be read (400, 408): HAProxy
    /// 2.6's raw page there ([`crate::http1::write_parse_error`]), or the
    /// frontend's errorfile; the connection ends after it.
    pub(super) fn parse_error_response(&mut self, status: u16) {
        let native = self.native.as_deref().is_some_and(|n| n.armed);
        if native || self.fe.errorfile(status).is_some() {
            self.error_response(status, false, Version::Http11, false, &[]);
            return;
        }
        let date = *self.w.date.borrow_mut().get();
        let at = self.wbuf.len();
        crate::http1::write_parse_error(&mut self.wbuf, status, &date);
        if let Some(m) = &self.fe.h1_case {
            m.adjust_head(self.wbuf.get_mut(at..).unwrap_or(&mut []));
        }
        self.closing = true;
    }

    /// Writes ebb's error answer for `status` (or the frontend's errorfile
    /// for it): an HTML page naming the status, `Content-Type: text/html`,
    /// `Cache-Control: no-cache`, then `extra` (`Allow` for 405, say).
    pub(crate) fn error_response(
        &mut self,
        status: u16,
        keep_alive: bool,
        version: Version,
        head_req: bool,
        extra: &[(&[u8], &[u8])],
    ) {
        if let Some(f) = self.fe.errorfile(status) {
            // An errorfile is a whole HTTP/1 answer, sent as written; its
            // framing is its own, so the connection ends after it.
            let at = self.wbuf.len();
            self.wbuf.extend_from_slice(f);
            if let Some(m) = &self.fe.h1_case {
                m.adjust_head(self.wbuf.get_mut(at..).unwrap_or(&mut []));
            }
            self.closing = true;
            return;
        }
        let (pre, post) = error_page(status);
        let reason = error_reason(status);
        let len = (pre.len() + reason.len() + post.len()) as u64;
        // The thread's: the answer is written at once.
        let mut fields = self.w.error_fields.take();
        fields.clear();
        // HAProxy 2.6's order (its `http_err_msgs`): the length, then
        // these, `Connection` last.
        fields.push(b"Cache-Control", b"no-cache");
        fields.push(b"Content-Type", b"text/html");
        for (n, v) in extra {
            fields.push(n, v);
        }
        let head = RespHead {
            extra: fields.fields(),
            close: !keep_alive,
            reason: reason.as_bytes(),
            length_at: Some(0),
            ..RespHead::new(status, BodySize::Exact(len))
        };
        let body = [pre.as_bytes(), reason.as_bytes(), post.as_bytes()];
        self.respond_to(head, &body, version, head_req);
        self.w.error_fields.set(fields);
    }
}
