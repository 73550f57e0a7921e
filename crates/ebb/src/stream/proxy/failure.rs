//! When the server side fails: a connect that fails or times out (retried,
//! redispatched, then 503), the layer-7 retries `retry-on` allows, a
//! server that breaks or stays silent (502, 504), the client that leaves
//! or times out, and the answers ebb makes itself in the server's place
//! (errors and `deny` of `http-response` rules).

use super::*;
use crate::rewrite::Stop;

/// Why a server's answer is refused after its head came.
pub(super) enum Refusal {
    /// An `http-response deny` or `redirect` rule.
    Rule(crate::rewrite::Denied),
    /// A rewrite failed in strict mode (500, `IH`).
    Internal,
    /// `option checkcache`: a cacheable answer with the server's cookie
    /// (its status).
    CacheableCookie(u16),
}

/// The statuses HAProxy 2.6 has an error page for (`http_get_status_idx`;
/// another status gets the 500 page).
const HAPROXY_PAGES: &[u16] = &[
    200, 400, 401, 403, 404, 405, 407, 408, 410, 413, 421, 422, 425, 429, 500, 501, 502, 503, 504,
];

impl Stream {
    /// A connect failed or timed out: retry, redispatch, or 503.
    pub(super) fn connect_failed(&mut self, c: &mut H1, ctx: &mut Ctx, timed_out: bool) {
        let Some(mut up) = self.up.take() else {
            return;
        };
        let sni_mismatch = {
            let sd = self.side.borrow();
            sd.sock.as_ref().is_some_and(|t| t.sni_mismatch())
                || sd.h2.as_ref().is_some_and(|p| p.borrow().sni_mismatch)
        };
        if sni_mismatch {
            // A server certificate that does not name the SNI sent: no
            // retry (HAProxy 2.6's rule: the name may be the client's).
            up.retries_left = 0;
        }
        self.drop_server_sock(ctx, &up);
        let farm = Arc::clone(&up.farm);
        if let Some(s) = &up.server {
            observe(s, Seen::L4Err);
        }
        // `retry-on` without `conn-failure`: no connect retry at all.
        if up.retries_left == 0 || !farm.retry_on.has(RetryOn::CONN_FAILURE) {
            // One failed connection for the exchange given up (`econ`,
            // HAProxy's `failed_conns`), not one per attempt.
            if let Some(s) = &up.server {
                s.counters.conn_errors.fetch_add(1, Ordering::Relaxed);
            }
            // The error answer releases the server (and logs its name).
            self.up = Some(up);
            self.fail(c, ctx, ExchangeError::connect(timed_out));
            return;
        }
        up.retries_left -= 1;
        if let Some(s) = &up.server {
            s.counters.retries.fetch_add(1, Ordering::Relaxed);
        }
        // `option redispatch [N]`: this retry goes to another server.
        if farm.redispatch_on(farm.retries.saturating_sub(up.retries_left)) {
            if let Some(s) = up.server.take() {
                s.counters.redispatches.fetch_add(1, Ordering::Relaxed);
                up.avoid = Some(s.idx);
                farm.release(&s);
            }
            self.up = Some(up);
            self.pick_server(c, ctx);
            return;
        }
        if !timed_out {
            // Refused at once: HAProxy waits before the next attempt
            // (`timeout connect`, at most 1 s; its SC_ST_TAR state).
            let at = ticks::add(ctx.now(), up.timeouts.connect.min(1000));
            up.retry_at = Some(at);
            up.deadline = at;
            self.up = Some(up);
            return;
        }
        self.up = Some(up);
        self.connect_new(c, ctx);
    }

    /// A layer-7 failure `why` (a [`RetryOn`] bit) before any of the
    /// answer went to the client: when `retry-on` names it and a retry
    /// is left, the server connection closes and the whole request goes
    /// again (HAProxy's do_l7_retry): to the same server on a new
    /// connection, or to another one as `option redispatch` says
    /// ([`Farm::leave_on_retry`]). Counted in the server's `wretr` as
    /// HAProxy counts it (twice when it stays: the retry, then the
    /// attempt on the same server; once and a `wredis` when it leaves).
    /// Returns whether a retry started.
    pub(super) fn l7_retry(&mut self, c: &mut H1, ctx: &mut Ctx, why: u16) -> bool {
        let Some(mut up) = self.up.take() else {
            return false;
        };
        let answered = up.resp_left.is_some();
        if !up.l7 || answered || !up.farm.retry_on.has(why) || up.retries_left == 0 {
            self.up = Some(up);
            return false;
        }
        self.drop_server_sock(ctx, &up);
        up.retries_left -= 1;
        let farm = Arc::clone(&up.farm);
        let k = farm.retries - up.retries_left;
        let (direct, forced) = {
            let v = c.vars.try_borrow();
            let i = v.as_ref().map(|v| &v.info);
            let forced = i.is_some_and(|i| i.ck_force_rule || i.use_srv.is_some_and(|(_, f)| f))
                || c.stk.prefer_force() == Some(true);
            let direct = i.is_some_and(|i| i.ck_direct.is_some() || i.use_srv.is_some())
                || c.stk.prefer().is_some();
            (direct, forced)
        };
        // What the failed attempt learnt of the answer goes.
        up.t_resp = None;
        up.resp_wait = None;
        let Some(s) = up.server.clone() else {
            self.up = Some(up);
            self.pick_server(c, ctx);
            return true;
        };
        s.counters.retries.fetch_add(1, Ordering::Relaxed);
        if farm.leave_on_retry(k, &s, direct, forced) {
            if farm.servers.len() > 1 {
                s.counters.redispatches.fetch_add(1, Ordering::Relaxed);
                up.avoid = Some(s.idx);
            } else {
                s.counters.retries.fetch_add(1, Ordering::Relaxed);
            }
            up.server = None;
            farm.release(&s);
            self.up = Some(up);
            self.pick_server(c, ctx);
            return true;
        }
        s.counters.retries.fetch_add(1, Ordering::Relaxed);
        self.up = Some(up);
        self.connect_new(c, ctx);
        true
    }

    /// An error answer for the client (before any response byte went out).
    pub(super) fn proxy_error(&mut self, c: &mut H1, ctx: &mut Ctx, status: u16) {
        let Some(mut up) = self.up.take() else {
            return;
        };
        if let Some(w) = up.waiter.take() {
            let farm = Arc::clone(&up.farm);
            farm.unqueue(&w);
            if let Some(s) = w.cancel() {
                farm.release(&s);
            }
        }
        self.drop_server_sock(ctx, &up);
        if let Some(s) = up.server.take() {
            up.farm.release(&s);
            // The server tried is named in the log (HAProxy's).
            up.server = Some(s);
        }
        // The client's body may still be on its way: keep the connection
        // only if it was all read.
        let ka = self.keep_alive && up.req_left.done();
        let version = up.client_version;
        let head_req = up.method == Method::Head;
        self.resp_start = c.wbuf.len();
        c.error_response(status, ka, version, head_req, &[]);
        let bi = c.fe.backends.iter().position(|b| Arc::ptr_eq(b, &up.be));
        up.status = self.after_response(c, bi, status);
        let sent = (c.wbuf.len() - self.resp_start) as u64 + c.native_sent();
        self.log_proxy(c, ctx, &up, sent);
        if !up.req_left.done() {
            c.closing = true;
        }
        self.finish_proxy_input(c);
    }

    /// A server's answer refused (see [`Refusal`]): it is dropped with
    /// its server connection, the rule's answer (or HAProxy's error page)
    /// goes to the client, whose connection goes on when its request was
    /// whole (as HAProxy's); logged `PH` (`IH`) with the server.
    pub(super) fn deny_response(
        &mut self,
        c: &mut H1,
        ctx: &mut Ctx,
        be: &crate::proxy::BackendRt,
        denied: Refusal,
    ) {
        if matches!(&denied, Refusal::Rule(d) if d.stop == Stop::SilentDrop) {
            self.silent_drop_response(c, ctx, be);
            return;
        }
        let Some(mut up) = self.up.take() else {
            return;
        };
        self.drop_server_sock(ctx, &up);
        if let Some(s) = up.server.take() {
            up.farm.release(&s);
            up.server = Some(s);
        }
        up.keep_server = false;
        self.resp_start = c.wbuf.len();
        // The client's connection goes on only if its request was whole.
        let keep = self.keep_alive && up.req_left.done();
        // Each of HAProxy's refusals (a deny or a redirect rule, an
        // internal error, checkcache) ends on its `return_prx_cond`: not
        // a valid answer, no response time (`Tr` -1, side by side).
        up.t_resp = None;
        // A deny (a rule's or checkcache's) is counted on the frontend,
        // the backend and the server (HAProxy's `denied_resp`); neither a
        // redirect nor an internal error is.
        if matches!(&denied, Refusal::Rule(d) if d.stop == Stop::Deny)
            || matches!(denied, Refusal::CacheableCookie(_))
        {
            crate::proxy::count_denied_resp(&c.fe.http, be, up.server.as_deref());
        }
        let status = match denied {
            Refusal::Rule(d) => {
                // A redirect is a local answer (`LH`, as haproxy logs it).
                up.term = if d.stop == Stop::Deny { "PH" } else { "LH" };
                self.write_denied(c, be, d, keep)
            }
            Refusal::CacheableCookie(status) => {
                // HAProxy 2.6's alert, then its deny: the error page of
                // the server's status (500's when it has none), logged
                // with the server's status.
                let srv = up.server.as_ref().map_or("<dispatch>", |s| s.name.as_str());
                let line = format!(
                    "Blocking cacheable cookie in response from instance {}, server {srv}.",
                    be.name
                );
                if let Some(l) = c.w.shared.be_loggers.get(&be.name) {
                    l.send(crate::log::LOG_ALERT, line.as_bytes());
                }
                // Never a panic on a closed stderr (`eprintln!` would).
                let _ = std::io::Write::write_all(
                    &mut std::io::stderr().lock(),
                    format!("[ALERT] {line}\n").as_bytes(),
                );
                up.term = "PH";
                if !keep {
                    self.keep_alive = false;
                    c.closing = true;
                }
                let page = if HAPROXY_PAGES.contains(&status) {
                    status
                } else {
                    500
                };
                let fe = Arc::clone(&c.fe);
                self.error_answer(c, &fe, page, keep, Some(&be.name));
                status
            }
            Refusal::Internal => {
                // A failed rewrite in strict mode: HAProxy's internal
                // error (500, `IH`).
                up.term = "IH";
                if !keep {
                    self.keep_alive = false;
                    c.closing = true;
                }
                let fe = Arc::clone(&c.fe);
                self.error_answer(c, &fe, 500, keep, Some(&be.name));
                500
            }
        };
        let bi = c.fe.backends.iter().position(|b| Arc::ptr_eq(b, &up.be));
        up.status = self.after_response(c, bi, status);
        self.note_late_rule(c);
        // What was sent, after the refused head (and any interim ones):
        // HAProxy counts the server's head it received, then its own
        // answer.
        up.bytes_out += (c.wbuf.len() - self.resp_start) as u64 + c.native_sent();
        self.log_proxy(c, ctx, &up, up.bytes_out);
        self.finish_proxy_input(c);
    }

    /// An `http-response silent-drop` rule held: the client's connection
    /// is dropped without a word (see `transport::silent_drop`), the
    /// server's with it; counted as a denied request of the frontend and
    /// the backend and logged `PR` with the server's status and no
    /// response time, as HAProxy 2.6 (checked side by side).
    fn silent_drop_response(&mut self, c: &mut H1, ctx: &mut Ctx, be: &crate::proxy::BackendRt) {
        let Some(up) = self.up.as_mut() else {
            return;
        };
        crate::transport::silent_drop(c.tr.tcp());
        c.silent = true;
        crate::proxy::count_denied_req(&c.fe.http, Some(be));
        up.term = "PR";
        up.t_resp = None;
        up.keep_server = false;
        self.keep_alive = false;
        self.abort_proxy(c, ctx);
    }

    /// The server closed or reset before a complete answer head.
    pub(super) fn server_broke(&mut self, c: &mut H1, ctx: &mut Ctx) -> bool {
        let Some(up) = self.up.take() else {
            return false;
        };
        let sd = self.side.borrow();
        let nothing_back = up.resp_left.is_none() && sd.iend == 0 && up.t_resp.is_none();
        // An HTTP/2 server's fault (its protocol error, a reset other than
        // REFUSED_STREAM) is not the race of a reused connection the
        // server closed as idle: 502, as HAProxy 2.6.
        let server_fault = sd.h2.as_ref().is_some_and(|p| p.borrow().no_replay);
        // A FastCGI exchange its connection refused (see `Pipe::fault`).
        let fcgi_fault = sd.h2.as_ref().and_then(|p| p.borrow().fault);
        let refused_late = sd.h2.as_ref().is_some_and(|p| p.borrow().refused_late);
        let errored =
            sd.errored || sd.broken || sd.h2.as_ref().is_some_and(|p| p.borrow().conn_error);
        drop(sd);
        if let Some(st) = fcgi_fault {
            let e = match st {
                500 => ExchangeError::internal(),
                400 => ExchangeError::bad_request_body(false),
                _ => ExchangeError::bad_response_head(),
            };
            if st == 502 {
                if let Some(s) = &up.server {
                    s.counters.resp_errors.fetch_add(1, Ordering::Relaxed);
                }
            }
            self.up = Some(up);
            self.fail(c, ctx, e);
            return true;
        }
        if refused_late && nothing_back && !up.body_sent {
            // An HTTP/2 server's TLS refused the connection after our
            // side of the handshake (TLS 1.3's alert refusing the client
            // certificate): a failed connect, as HAProxy 2.6 takes it
            // (retried, redispatched, 503 `SC` with no connect time).
            let mut up = up;
            up.state = UpState::Connecting;
            up.t_conn = None;
            self.up = Some(up);
            self.connect_failed(c, ctx, false);
            return true;
        }
        let replayable = up.method.is_idempotent() && !up.body_sent && !server_fault;
        let e = ExchangeError::closed_before_head(up.reused && nothing_back && replayable);
        if e.retryable {
            // A kept connection the server had closed: send again on a
            // fresh one, without counting a retry.
            self.drop_server_sock(ctx, &up);
            self.up = Some(up);
            self.connect_new(c, ctx);
            return true;
        }
        // `retry-on empty-response`: no complete head came back (HAProxy
        // judges a head cut short by the close the same way).
        self.up = Some(up);
        if self.l7_retry(c, ctx, RetryOn::EMPTY_RESPONSE) {
            return true;
        }
        if let Some(s) = self.up.as_ref().and_then(|u| u.server.as_ref()) {
            // An error (not a close) is counted twice, as HAProxy 2.6's
            // process_stream and http_wait_for_response each count it
            // (measured: `eresp` 2 for one 502 `SH` on a TLS alert).
            let n = if errored { 2 } else { 1 };
            s.counters.resp_errors.fetch_add(n, Ordering::Relaxed);
            observe(s, Seen::BrokenPipe);
        }
        self.fail(c, ctx, e);
        true
    }

    /// Ends a failed exchange: the error answer if none started, else
    /// both connections cut; the log line carries the error's code.
    pub(super) fn fail(&mut self, c: &mut H1, ctx: &mut Ctx, e: ExchangeError) {
        if let Some(up) = self.up.as_mut() {
            up.term = e.term();
            up.keep_server = false;
        }
        if e.resets_server() {
            self.close_server_sock(ctx, true);
        }
        match e.status {
            Some(status) => self.proxy_error(c, ctx, status),
            None => self.abort_proxy(c, ctx),
        }
    }

    /// A failure after the answer started, or a broken request: cut both.
    pub(super) fn abort_proxy(&mut self, c: &mut H1, ctx: &mut Ctx) {
        let Some(mut up) = self.up.take() else {
            return;
        };
        self.drop_server_sock(ctx, &up);
        if let Some(w) = up.waiter.take() {
            let farm = Arc::clone(&up.farm);
            farm.unqueue(&w);
            if let Some(s) = w.cancel() {
                farm.release(&s);
            }
        }
        if let Some(s) = up.server.take() {
            up.farm.release(&s);
            up.server = Some(s);
        }
        let ibuf = std::mem::take(&mut self.side.borrow_mut().ibuf);
        if !ibuf.is_empty() {
            c.w.put_buf(ibuf);
        }
        let bytes = up.bytes_out;
        self.log_proxy(c, ctx, &up, bytes);
        c.closing = true;
        self.finish_proxy_input(c);
    }

    /// A deadline of the server side passed.
    pub(in crate::stream) fn proxy_timeout(&mut self, c: &mut H1, ctx: &mut Ctx) {
        let Some(state) = self.up.as_ref().map(|u| u.state) else {
            return;
        };
        match state {
            UpState::Queued => {
                if let Some(up) = self.up.as_mut() {
                    if let Some(s) = up.server.as_ref() {
                        s.counters.queue_timeouts.fetch_add(1, Ordering::Relaxed);
                    }
                    up.farm
                        .counters
                        .queue_timeouts
                        .fetch_add(1, Ordering::Relaxed);
                }
                self.fail(c, ctx, ExchangeError::queue_timeout());
            }
            UpState::Connecting => {
                if let Some(up) = self.up.as_mut().filter(|u| u.retry_at.is_some()) {
                    // The turn-around is over: the next attempt.
                    up.retry_at = None;
                    self.connect_new(c, ctx);
                    return;
                }
                let now = ctx.now();
                if let Some(up) = self
                    .up
                    .as_mut()
                    .filter(|u| !ticks::is_expired(u.connect_by, now))
                {
                    // Woken at `timeout server` from the connect's start
                    // (shorter than `timeout connect`) and the connect is
                    // not done: its own timeout goes on.
                    up.deadline = up.connect_by;
                    return;
                }
                self.connect_failed(c, ctx, true)
            }
            UpState::Connected => {
                let now = ctx.now();
                let waited = self.up.as_ref().and_then(|u| u.resp_wait);
                if waited.is_some_and(|t| ticks::is_expired(t, now)) {
                    self.fail(c, ctx, ExchangeError::body_wait_timeout());
                    return;
                }
                let started = self.up.as_ref().is_some_and(|u| u.resp_left.is_some());
                if !started && self.request_stuck() {
                    // The server took none of the request bytes waiting
                    // for it (a full socket, a closed HTTP/2 window) for
                    // `timeout server`: HAProxy 2.6's write timeout of the
                    // request, in its data phase: both connections cut,
                    // no answer, logged -1 `sD`.
                    self.fail(c, ctx, ExchangeError::server_timeout(true));
                    return;
                }
                if let Some(s) = self.up.as_ref().and_then(|u| u.server.as_ref()) {
                    if !started {
                        observe(s, Seen::ReadTimeout);
                    }
                }
                if !started && self.l7_retry(c, ctx, RetryOn::RESPONSE_TIMEOUT) {
                    return;
                }
                self.fail(c, ctx, ExchangeError::server_timeout(started));
            }
            UpState::Tunnel => self.fail(c, ctx, ExchangeError::server_timeout(true)),
        }
    }

    /// Request bytes wait for the server to take them: in the server
    /// side's output, or in its HTTP/2 stream's pipe (the window shut).
    fn request_stuck(&self) -> bool {
        let sd = self.side.borrow();
        sd.out_pending() > 0 || sd.h2.as_ref().is_some_and(|p| !p.borrow().req.is_empty())
    }

    /// A server's `on-marked-down` / `on-marked-up` action ends the
    /// exchange with it (`why`: b'D' or b'U'): a 503 while connecting, a
    /// 502 before the answer (the client connection goes on, as HAProxy
    /// 2.6's, when its request was whole), else both cut; logged `DC`,
    /// `DH`, `DD` (`U`...) as HAProxy's.
    pub(in crate::stream) fn proxy_shutdown(&mut self, c: &mut H1, ctx: &mut Ctx, why: u8) {
        use crate::backend::error::Phase;
        // A connect the server side's tasklet completed counts as done.
        self.sync_side(c, ctx);
        let killed = why == crate::registry::KILL_CLI;
        if killed {
            // `shutdown session(s)`: whatever the exchange's state, it
            // ends with HAProxy's `K` and the client connection closes.
            c.closing = true;
        }
        let Some(up) = self.up.as_ref().filter(|u| killed || u.server.is_some()) else {
            return;
        };
        let phase = match up.state {
            UpState::Queued if killed => Phase::Queue,
            // Not on the server yet (HAProxy redistributes its queue).
            UpState::Queued => return,
            UpState::Connecting => Phase::Connect,
            UpState::Connected if up.resp_left.is_none() => Phase::Head,
            UpState::Connected | UpState::Tunnel => Phase::Data,
        };
        let e = if killed {
            ExchangeError::killed(phase)
        } else {
            ExchangeError::server_shutdown(why == crate::backend::KILL_UP, phase)
        };
        if let (Some(pipe), Phase::Connect | Phase::Head) = (c.tr.lane_pipe(), phase) {
            // An HTTP/2 client's stream is reset REFUSED_STREAM, no
            // answer (HAProxy's), the line logged with the status it
            // would have had.
            pipe.borrow_mut().refused = true;
            if let Some(up) = self.up.as_mut() {
                up.term = e.term();
                up.status = e.status.unwrap_or(up.status);
            }
            self.abort_proxy(c, ctx);
            return;
        }
        self.fail(c, ctx, e);
    }

    /// The client went away in the middle of an exchange.
    pub(in crate::stream) fn proxy_client_gone(&mut self, c: &mut H1, ctx: &mut Ctx) {
        self.fail(c, ctx, ExchangeError::client_gone());
    }
}
