//! The end of an exchange ebb answered: the `http-after-response`
//! rules, the counters, the trackers, the log line, and the client side
//! on to what follows the head.

use sched::Ctx;

use super::{sample_ctx, Stream, H1};
use crate::mux::h1::client::{dst_of, In, LogFacts};

impl Stream {
    /// A `return` (or `deny` with an answer) of the frontend's rules, or
    /// of backend `be`'s: that backend's `http-after-response` rules run
    /// on it too, and the log names it without a server (HAProxy's).
    pub(super) fn finish_return(
        &mut self,
        c: &mut H1,
        ctx: &mut Ctx,
        status: u16,
        be: Option<usize>,
    ) {
        if be.is_some() {
            self.local_server = Some("<NOSRV>");
        }
        self.finish_request(c, ctx, status, be, 0);
    }

    /// Notes a redirect rule held back for the `http-after-response` rules
    /// as the exchange's last final rule.
    pub(super) fn note_late_rule(&mut self, c: &H1) {
        if let Some(loc) = self.late_rule.take() {
            if let Some(mut v) = c.vars.try_borrow_mut() {
                v.info.last_rule = Some(loc);
            }
        }
    }

    /// The answer is queued: log it and move on to what follows the head.
    pub(super) fn finish_request(
        &mut self,
        c: &mut H1,
        ctx: &mut Ctx,
        status: u16,
        backend: Option<usize>,
        body: u64,
    ) {
        let status = self.after_response(c, backend, status);
        self.finish_after_rules(c, ctx, status, backend, body);
    }

    /// [`Stream::finish_request`] once the caller ran the
    /// `http-after-response` rules (a compressed cache hit: its head is
    /// edited after them).
    pub(super) fn finish_after_rules(
        &mut self,
        c: &mut H1,
        ctx: &mut Ctx,
        status: u16,
        backend: Option<usize>,
        body: u64,
    ) {
        self.note_late_rule(c);
        if status == 101 {
            // An answer of ebb's made a 101 by a rule: no tunnel follows
            // (there is no server), the connection ends after it.
            c.closing = true;
            self.keep_alive = false;
        }
        let be = backend.and_then(|b| c.fe.backends.get(b));
        let sent = (c.wbuf.len() - self.resp_start) as u64 + body + c.native_sent();
        crate::proxy::count_request(&c.fe, be.map(|b| &**b), status, c.bytes_in, sent);
        self.end_exchange(c, ctx, status, backend, sent, None);
    }

    /// Ends an exchange ebb answered itself (`rejected`: a `tcp-request
    /// content` rule refused it, nothing was sent): counters, log line,
    /// and on to what follows the head.
    pub(super) fn end_exchange(
        &mut self,
        c: &mut H1,
        ctx: &mut Ctx,
        status: u16,
        backend: Option<usize>,
        sent: u64,
        // A rule refused the request (logged `PR`): `Some(true)` once the
        // request line is known (http-request rules, a backend's content
        // rules), `Some(false)` before (a frontend's content rules).
        rejected: Option<bool>,
    ) {
        let now = ctx.now();
        let err = backend.is_some() && (400..500).contains(&status);
        c.stk.end(now, err, false, c.bytes_in, sent);
        if !self.quiet && c.logs_exchange() {
            let buf = &c.rbuf[c.rstart..c.rend];
            let line_end = buf
                .iter()
                .position(|&c| c == b'\r' || c == b'\n')
                .unwrap_or(0);
            let tq = c.elapsed(ctx, c.req_start);
            let local = self.local_server.take().unwrap_or("<files>");
            let (bname, server) = match backend.and_then(|b| c.fe.backends.get(b)) {
                Some(b) if rejected.is_none() => (b.name.as_str(), local),
                Some(b) => (b.name.as_str(), "<NOSRV>"),
                None => (c.fe.name.as_str(), "<NOSRV>"),
            };
            // HAProxy's line for a request its rules refused: no timer but
            // Tt, status -1, and "<BADREQ>" when the frontend's content
            // rules refused it (they run before it notes the request). An
            // answer ebb made itself (`L`: return, redirect, auth; `P`: a
            // deny) has no server time (Tr -1); a tarpit's wait is its Tw.
            let local_term = self.local_term.take().unwrap_or("--");
            let (times, term, line) = match rejected {
                None if local_term == "PT" => ([-1, tq, -1, -1, tq], "PT", &buf[..line_end]),
                None if matches!(local_term.as_bytes()[0], b'C' | b'L' | b'P') => {
                    ([tq, -1, -1, -1, tq], local_term, &buf[..line_end])
                }
                None => ([tq, -1, -1, 0, tq], local_term, &buf[..line_end]),
                // `IR`: an upgraded stream routed to a tcp backend.
                Some(true) if local_term == "IR" => ([-1, -1, -1, -1, tq], "IR", &buf[..line_end]),
                Some(true) => ([-1, -1, -1, -1, tq], "PR", &buf[..line_end]),
                Some(false) => ([-1, -1, -1, -1, tq], "PR", &b"<BADREQ>"[..]),
            };
            let entry = c.log_entry(LogFacts {
                backend: bname,
                server,
                times,
                status,
                bytes: sent,
                term,
                request_line: line,
            });
            let ab = crate::proxy::abnormal(term.as_bytes(), false, false, Some(status));
            if let Some(level) = crate::rewrite::exchange_log_level(&c.fe, ab, c.vars.cell()) {
                c.w.log_access_sd(crate::log::format(&entry), c.fe.log_sd(&entry), level);
            }
        }
        c.rstart += c.head.head_len.min(c.rend - c.rstart);
        c.input = c.next_input.take().unwrap_or(In::Head);
        c.req_start = None;
        c.idle_since = now;
    }

    /// Runs the `http-after-response` rules on the answer ebb wrote at
    /// `resp_start` (still all in the buffer); returns the status to log.
    pub(super) fn after_response(
        &mut self,
        c: &mut H1,
        backend: Option<usize>,
        status: u16,
    ) -> u16 {
        if c.wpos > self.resp_start {
            return status;
        }
        let be = backend.and_then(|b| c.fe.backends.get(b));
        // No rule to run: no sample context to build for them.
        if c.fe.after_response.is_empty() && be.is_none_or(|b| b.after_response.is_empty()) {
            return status;
        }
        let tr = &c.tr;
        let dst = dst_of(tr, c.dst.as_deref().copied());
        let sctx = crate::sample::Ctx {
            be: be.map(|b| b.name.as_str()),
            ..sample_ctx(tr, c.sess.peer, &c.fe.name, &dst, c.vars.cell(), &c.stk)
        };
        let be = be.map(|b| &**b);
        crate::rewrite::after_local(&c.fe, be, &sctx, &mut c.wbuf, self.resp_start)
            .unwrap_or(status)
    }
}
