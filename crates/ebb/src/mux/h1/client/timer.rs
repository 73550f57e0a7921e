//! The connection's timer: the next date it must act by, given its state
//! ([`Conn::next_deadline`]: `timeout http-request`, `client`,
//! `http-keep-alive`, a stop's grace), and what happens when it passes
//! ([`Conn::on_timeout`]: a 408 for a head under way, a plain close for
//! an idle or stalled connection), with the error lines of connections
//! that ended without an exchange.

use sched::{ticks, Ctx, Status, Tick};

use super::{Conn, Exchange, In, LogFacts};

impl<S: Exchange + Default + 'static> Conn<S> {
    /// Whether a keep-alive connection found past its idle timeout has the
    /// client's next request waiting in the socket: sent in time, it is
    /// read and answered rather than closed unanswered when the thread
    /// came to the connection late (a loaded machine; the timer and the
    /// bytes reported in the same turn). Only between requests: the
    /// first request's and a started head's `timeout http-request` still
    /// run from their own start. One `recv(MSG_PEEK)`, only at a timeout.
    pub(super) fn request_waiting(&self) -> bool {
        if self.lane_of.is_some()
            || self.requests() == 0
            || self.req_start.is_some()
            || !matches!(self.input, In::Head)
            || self.has_output()
        {
            return false;
        }
        let mut b = [0u8; 1];
        matches!(self.tr.tcp().peek(&mut b), Ok(n) if n > 0)
    }

    /// The connection's timer fired: 408 for a head that did not arrive in
    /// time, a plain close for an idle or stalled connection.
    pub(super) fn on_timeout(&mut self, ctx: &mut Ctx) -> Status {
        if self.wbuf.capacity() == 0 {
            self.wbuf = self.w.get_wbuf();
        }
        if self.tr.is_handshaking() {
            self.conn_error(format!(
                "{} [{}] {}: SSL handshake timeout{}",
                self.sess.peer,
                self.fe.name,
                self.fe.name,
                self.tr.hello_note()
            ));
            return self.close(ctx);
        }
        if matches!(self.input, In::Head) && !self.has_output() {
            self.unfinished_request(ctx, 408, "cR");
        }
        self.close(ctx)
    }

    /// A connection error before any request (a TLS handshake that failed
    /// or timed out), HAProxy's `session_kill_embryonic` line: the
    /// frontend's `error-log-format` when it has one and logs (with its
    /// `log-format-sd`; no request: status 0, `PR`, `<BADREQ>`), else
    /// `line`.
    pub(super) fn conn_error(&self, line: String) {
        let level = self.fe.err_level();
        let fmt = self.fe.error_log_format.as_ref();
        let Some(fmt) = fmt.filter(|_| self.w.logging(&self.fe)) else {
            self.w.log_fe_error(&self.fe, line.into_bytes(), level);
            return;
        };
        let tt = std::time::SystemTime::now()
            .duration_since(self.sess.accepted())
            .map_or(0, |d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX));
        let mut e = self.log_entry(LogFacts {
            backend: &self.fe.name,
            server: "<NOSRV>",
            times: [-1, -1, -1, -1, tt],
            status: 0,
            bytes: 0,
            term: "PR",
            request_line: b"<BADREQ>",
        });
        e.fmt = Some(fmt);
        // No stream yet: HAProxy's `%ST` 0.
        e.txn = false;
        let sd = self.fe.log_sd(&e);
        self.w.log_access_sd(crate::log::format(&e), sd, level);
    }

    /// A connection that ends before a request came whole, as HAProxy's
    /// HTTP/1 side ends it: with part of a request, `status` (400 when
    /// the client closed, 408 at `timeout http-request`) and a
    /// `<BADREQ>` line (`term`, `CR` or `cR`). A new connection that sent
    /// nothing (a browser's pre-connect, a port probe) ends the same way,
    /// except that `option dontlognull` leaves its line out and `option
    /// http-ignore-probes` its status and line both; one idle between
    /// keep-alive requests, or an HTTP/2 lane, ends silently.
    pub(super) fn unfinished_request(&mut self, ctx: &mut Ctx, status: u16, term: &str) {
        let null = self.rstart == self.rend;
        if self.lane_of.is_some()
            || self.tr.is_handshaking()
            || null && (self.requests() > 0 || self.fe.ignore_probes)
        {
            return;
        }
        if self.wbuf.capacity() == 0 {
            self.wbuf = self.w.get_wbuf();
        }
        self.count_failed_request(status);
        self.parse_error_response(status);
        // To a client that closed only its sending side, the answer gets
        // through; to one gone, the write fails, as HAProxy's.
        let _ = self.flush();
        // A frontend without log targets sends its error lines to stderr
        // (see [`Worker::log_fe_error`]): not a probe's, which carried no
        // request to see.
        if null && (self.fe.dontlognull || !self.w.logging(&self.fe)) {
            return;
        }
        let tt = self.elapsed(ctx, self.req_start.or(Some(self.idle_since)));
        // No request came whole: nothing counted (HAProxy's `%U` 0).
        self.bytes_in = 0;
        let e = self.log_entry(LogFacts {
            backend: &self.fe.name,
            server: "<NOSRV>",
            times: [-1, -1, -1, -1, tt],
            status,
            // No exchange carried bytes (HAProxy's figure too).
            bytes: 0,
            term,
            request_line: b"<BADREQ>",
        });
        let sd = self.fe.log_sd(&e);
        self.w
            .log_fe_error_sd(&self.fe, crate::log::format(&e), sd, self.fe.err_level());
    }

    /// The next date this connection must act by, given its state.
    pub(super) fn next_deadline(&self) -> Tick {
        let t = &self.fe.timeouts;
        if let Some(d) = self.st.as_ref().and_then(|s| s.deadline()) {
            // The server side's own date; the client's applies only while
            // it holds our output back.
            return if self.has_output() {
                ticks::first(d, ticks::add(self.idle_since, t.client))
            } else {
                d
            };
        }
        if self.has_output() || !matches!(self.input, In::Head) {
            return ticks::add(self.idle_since, t.client);
        }
        let d = match self.req_start {
            Some(s) => return ticks::add(s, t.http_request),
            None if self.requests() == 0 => ticks::add(self.idle_since, t.http_request),
            None => ticks::add(self.idle_since, t.keep_alive),
        };
        // Idle during a stop: closed after its grace (crate::drain).
        ticks::first(d, self.stop_deadline())
    }

    /// When a stop closes this connection while it idles (crate::drain).
    pub(super) fn stop_deadline(&self) -> Tick {
        let ico = self.fe.idle_close_on_response;
        crate::drain::idle_deadline(self.stopping, self.idle_since, ico, self.fd as u64)
    }
}
