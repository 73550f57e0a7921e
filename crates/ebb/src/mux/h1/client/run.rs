//! One run of a connection's tasklet: the readiness its events bring,
//! a stop, a CLI `shutdown session`, its timer ([`Conn::run_inner`]),
//! then [`Conn::pump`], which reads, answers and writes while anything
//! moves; and after it, the poller joined or told to watch writability
//! (only when a write blocked).

use std::io;

use sched::{ticks, Ctx, Reasons, Status, TaskletFn, TaskletId};

use super::{Conn, Exchange, In, RUN_QUANTUM};

impl<S: Exchange + Default + 'static> TaskletFn for Conn<S> {
    fn run(&mut self, ctx: &mut Ctx, me: TaskletId, why: Reasons) -> Status {
        self.me = Some(me);
        self.sent_run = 0;
        if let Some(mux) = self.lane_of {
            // A lane has no socket: every wake-up may bring request bytes
            // or room for the answer.
            self.rd_ready = true;
            self.wr_ready = true;
            let st = self.run_inner(ctx, me, why);
            if st == Status::Continue {
                let dirty = self
                    .tr
                    .lane_pipe()
                    .is_some_and(|p| std::mem::take(&mut p.borrow_mut().dirty));
                if dirty {
                    ctx.tasklet_wakeup(mux);
                }
            }
            return st;
        }
        let st = self.run_inner(ctx, me, why);
        // Writability is watched only once a write blocked (HAProxy's
        // `fd_want_send`): a connection whose answers always leave whole
        // is never woken by its socket's writable edges.
        let blocked = self.has_output() && !self.wr_ready;
        if st == Status::Continue && self.registered && blocked && ctx.want_write(self.fd).is_err()
        {
            // (Only when the poller cannot: out of memory.)
            return self.close(ctx);
        }
        if st == Status::Continue && !self.registered && self.needs_poller() {
            if let Err(e) = ctx.register_fd(self.fd, me, blocked) {
                self.w.log_fe_error(
                    &self.fe,
                    format!(
                        "{}: cannot poll a connection from {}: {e}",
                        self.fe.name, self.sess.peer
                    )
                    .into_bytes(),
                    self.fe.err_level(),
                );
                return self.close(ctx);
            }
            self.registered = true;
        }
        st
    }
}

impl<S: Exchange + Default + 'static> Conn<S> {
    fn run_inner(&mut self, ctx: &mut Ctx, me: TaskletId, why: Reasons) -> Status {
        if why.intersects(Reasons::IO) && self.lane_of.is_none() {
            let ev = ctx.take_events(me);
            let (rd, hup, wr) = (&mut self.rd_ready, &mut self.rd_hup, &mut self.wr_ready);
            crate::mux::note_events(ev, rd, hup, wr);
        }
        if why.intersects(Reasons::SIGNAL) || ctx.stopping() {
            self.stopping = true;
            crate::drain::saw_stop(ctx.now());
        }
        match self.sess.kill.load(std::sync::atomic::Ordering::Relaxed) {
            0 => {}
            // `shutdown session` from the CLI: an exchange with a server
            // is ended as HAProxy's (`KH`: a 502 while the answer is
            // awaited), then the connection closes; anything else closes.
            crate::registry::KILL_CLI => {
                if !self.st.as_ref().is_some_and(|s| s.active()) {
                    return self.close(ctx);
                }
                self.sess
                    .kill
                    .store(0, std::sync::atomic::Ordering::Relaxed);
                // (The exchange's end marks the connection closing.)
                self.with_stream(|st, c| st.server_shutdown(c, ctx, crate::registry::KILL_CLI));
            }
            why => {
                // A server's `on-marked-down` / `on-marked-up`: the
                // exchange with it ends (an exchange over by now is left
                // alone, as HAProxy's stream no longer on that server).
                self.sess
                    .kill
                    .store(0, std::sync::atomic::Ordering::Relaxed);
                self.with_stream(|st, c| st.server_shutdown(c, ctx, why));
            }
        }
        if self.lingering {
            return self.linger_step(ctx);
        }
        if why.intersects(Reasons::TIMER) && ticks::is_expired(self.deadline, ctx.now()) {
            let server_side = self
                .with_stream(|st, c| st.on_timer(c, ctx))
                .unwrap_or(false);
            if !server_side && ticks::is_expired(self.next_deadline(), ctx.now()) {
                if !self.request_waiting() {
                    return self.on_timeout(ctx);
                }
                // Read it now, whether or not this run saw its edge.
                self.rd_ready = true;
            }
        }
        let st = self.pump(ctx);
        if self.heavy && st == Status::Continue && !self.tr.is_handshaking() {
            // Handshake done: back to the ordinary classes.
            self.heavy = false;
            ctx.set_heavy(me, false);
        }
        st
    }

    /// Whether the connection, left open by a run, waits on its socket's
    /// events (and must join the poller): output the socket did not take,
    /// or input it wants (a request, its body, a tunnel's bytes, the
    /// client's close under `abortonclose`). A request read whole whose
    /// exchange then waits on its server needs none: the client is
    /// registered only when it next needs reading (the answer given, its
    /// next request awaited) or writing, and a connection per request
    /// answered with `Connection: close` never joins the poller, as in
    /// HAProxy (it subscribes a client only when a read finds nothing).
    fn needs_poller(&self) -> bool {
        if self.lingering || self.has_output() && !self.wr_ready {
            return true;
        }
        match self.input {
            In::Stream => self.st.as_ref().is_none_or(|s| s.watches_client()),
            _ => true,
        }
    }

    /// One pass: read, answer, write, while anything moves.
    fn pump(&mut self, ctx: &mut Ctx) -> Status {
        if self.wbuf.capacity() == 0 {
            self.wbuf = self.w.get_wbuf();
        }
        loop {
            let mut moved = false;
            if self.rd_ready && !self.eof && !self.closing {
                match self.read_in() {
                    Ok(m) if self.requests() == 0 && self.tr.alpn() == Some(b"h2") => {
                        if !self.tr.is_handshaking() && self.lane_of.is_none() {
                            // The client took the `h2` offer.
                            return self.hand_to_h2(ctx);
                        }
                        moved |= m;
                    }
                    Ok(m)
                        if self.requests() == 0
                            && self.lane_of.is_none()
                            && !self.fe.disable_h2_upgrade
                            && !self.h1_only
                            && self.h2_preface() =>
                    {
                        // HAProxy's implicit upgrade: an HTTP/1 connection
                        // whose first bytes are the HTTP/2 preface (prior
                        // knowledge) is served HTTP/2.
                        let _ = m;
                        return self.hand_to_h2(ctx);
                    }
                    Ok(m) => moved |= m,
                    Err(e) => {
                        if self.tr.is_tls() && e.kind() != io::ErrorKind::ConnectionReset {
                            // A TLS failure (plaintext on a TLS port, a bad
                            // or truncated handshake, an alert) is logged.
                            let what = if self.tr.is_handshaking() {
                                "SSL handshake failure"
                            } else {
                                "SSL error"
                            };
                            self.conn_error(format!(
                                "{} [{}] {}: {what}: {e}",
                                self.sess.peer, self.fe.name, self.fe.name
                            ));
                        }
                        return self.close(ctx);
                    }
                }
            }
            moved |= self.process(ctx);
            if self.has_output() && self.wr_ready {
                match self.flush() {
                    Ok(m) => moved |= m,
                    Err(_) => return self.close(ctx),
                }
            }
            if self.sent_run >= RUN_QUANTUM && self.has_output() && self.wr_ready {
                // A large transfer used its share: let the others run and
                // come back at the next turn.
                if let Some(me) = self.me {
                    ctx.tasklet_wakeup(me);
                }
                self.idle_since = ctx.now();
                break;
            }
            if self.has_output() {
                // Progress on the write side counts as activity for the
                // client timeout.
                if moved {
                    self.idle_since = ctx.now();
                }
            } else if self.closing && !self.st.as_ref().is_some_and(|s| s.active()) {
                return self.close(ctx);
            }
            if !moved {
                break;
            }
            if !self.rd_ready
                && matches!(self.input, In::Head)
                && self.rstart == self.rend
                && !self.has_output()
            {
                // Nothing can move in another pass: no read is due (the
                // socket was drained), no request is buffered, nothing
                // waits to be written (a keep-alive answer that left
                // whole: the usual end of a request's run).
                break;
            }
        }
        if self.eof
            && self.rstart == self.rend
            && self.st.as_ref().is_some_and(|s| s.reading_request())
        {
            // The client left before its request was all sent. (Bytes it
            // sent before its close and not yet taken, a body waiting for
            // the server's connect, may still complete the request: they
            // are forwarded first, the close is judged once they are.)
            return self.close(ctx);
        }
        let idle = matches!(self.input, In::Head) && self.rstart == self.rend && !self.has_output();
        if idle {
            let stop_at = self.stop_deadline();
            if self.eof || (stop_at != ticks::ETERNITY && ticks::is_expired(stop_at, ctx.now())) {
                if self.eof && !self.closing {
                    // Closed before any request byte: a probe.
                    self.unfinished_request(ctx, 400, "CR");
                }
                if !self.eof && !self.rd_ready && !self.closing && self.lane_of.is_none() {
                    // The stop's run may come before the poller saw the
                    // client's next request arrive: a close over unread
                    // bytes would reset it unanswered. Look once; a request
                    // that came is answered (with `Connection: close`).
                    if let Ok(true) = self.read_in() {
                        return self.pump(ctx);
                    }
                }
                return self.close(ctx);
            }
            self.release_buffers();
            self.park();
        } else if self.eof && matches!(self.input, In::Head) && !self.has_output() {
            // The client closed in the middle of a head: 400 (it may
            // still read) and a line. Empty lines before a request line
            // are no request (RFC 9112 §2.2: a server ignores them; a
            // client may send a CRLF after a body): a close after them
            // is a quiet one, as HAProxy's.
            let blank = self
                .rbuf
                .get(self.rstart..self.rend)
                .is_some_and(|b| b.iter().all(|&c| c == b'\r' || c == b'\n'));
            if !self.closing && !blank {
                self.unfinished_request(ctx, 400, "CR");
            }
            return self.close(ctx);
        }
        let d = self.next_deadline();
        if d != self.deadline {
            self.deadline = d;
            if let Some(me) = self.me {
                ctx.tasklet_set_expire(me, d);
            }
        }
        Status::Continue
    }
}
