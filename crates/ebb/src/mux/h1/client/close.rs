//! A connection's end. [`Conn::close`] lets the stream know, gives its
//! state back to the pools, and either closes at once ([`Conn::end`]) or,
//! when the client may still be sending, lingers: its sending side shut,
//! it reads and drops what comes ([`Conn::linger_step`]) until the client
//! closes, [`crate::mux::LINGER_MAX_BYTES`] or a time bound.

use sched::{ticks, Ctx, Status};

use crate::transport::Transport;

use super::{Conn, Exchange, In};

impl<S: Exchange + Default + 'static> Conn<S> {
    pub(super) fn close(&mut self, ctx: &mut Ctx) -> Status {
        if self.lingering {
            return self.end(ctx);
        }
        self.with_stream(|st, c| st.client_gone(c, ctx));
        // A clean stream serves the thread's next connection: it goes to
        // the pool, and a warm place this connection held goes back
        // (kept, both would be freed with the connection: two heap blocks
        // allocated and freed per connection).
        self.warm = None;
        self.park_in(false);
        if let Some(mux) = self.lane_of {
            // A lane: its HTTP/2 connection holds the socket and counts
            // the connection; it learns of the end through the pipe.
            self.w.sessions.remove(&self.sess);
            let _ = self.tr.shutdown();
            self.release_buffers();
            ctx.tasklet_wakeup(mux);
            return Status::Done;
        }
        if self.linger_wanted() {
            return self.linger(ctx);
        }
        self.end(ctx)
    }

    /// Whether the client may still send when its connection ends, so
    /// that closing now could reset the answer (see [`Conn::linger`]):
    /// bytes of a request not read to their end (a bad request's rest, a
    /// body ebb did not read, a stream's request under way), requests
    /// pipelined behind the last answer, bytes the socket reported and
    /// nothing read, and every TLS connection (a client answers our
    /// `close_notify` with its own). Not when the client closed already,
    /// nor for `option nolinger` (its close is a reset by design) or a
    /// `silent-drop`, nor during a TLS handshake (a failure or a
    /// timeout: nothing to answer). A request read whole and answered,
    /// its socket drained at the last read (a connection per request),
    /// closes at once: no system call more than the close.
    fn linger_wanted(&self) -> bool {
        if self.silent || self.eof || self.fe.nolinger || self.tr.is_handshaking() {
            return false;
        }
        self.tr.is_tls()
            || self.unread
            || self.rd_ready
            || self.rstart < self.rend
            || !matches!(self.input, In::Head)
            || self.next_input.is_some()
            || self.closing && !matches!(self.head.framing, crate::http1::BodyFraming::None)
    }

    /// A lingering close ([`crate::mux::Linger`], shared with HTTP/2):
    /// the connection ends its side and reads on, dropping what comes,
    /// until the client closes too. Bounded: `timeout client` from the
    /// start (HAProxy's limit for a client half-closed, `timeout
    /// client-fin` being unknown to ebb; not renewed by what comes; an
    /// idle connection's grace during a stop) and
    /// [`crate::mux::LINGER_MAX_BYTES`], past which it closes with what
    /// is left unread (a reset). The connection still counts (`maxconn`,
    /// `show info` CurrConns) until then, as HAProxy counts a connection
    /// until its close, and `show sess` lists it with `state=linger`
    /// (`shutdown session` ends it at once).
    ///
    /// HAProxy 2.6 on the HTTP/1 client side shuts its sending side and
    /// closes at once (`h1_shutw_conn`, then `h1_release`): a byte that
    /// comes after, or sat unread, gets a reset; its only drain,
    /// `conn_ctrl_drain` (two reads of a buffer), is for failed TLS
    /// handshakes and `silent-drop`. So a client that pipelines behind a
    /// `Connection: close` answer, or sends a body an answer refused, can
    /// lose that answer to HAProxy's reset; not to ebb's.
    fn linger(&mut self, ctx: &mut Ctx) -> Status {
        self.sess
            .lingering
            .store(true, std::sync::atomic::Ordering::Relaxed);
        self.lingering = true;
        self.release_buffers();
        self.linger = crate::mux::Linger::start(&mut self.tr, self.wr_shut);
        self.deadline = ticks::add(ctx.now(), self.fe.timeouts.client);
        if let Some(me) = self.me {
            ctx.tasklet_set_expire(me, self.deadline);
        }
        self.linger_step(ctx)
    }

    /// A run of a lingering connection ([`crate::mux::Linger::step`]):
    /// closes at the client's end, the bound, or its date.
    pub(super) fn linger_step(&mut self, ctx: &mut Ctx) -> Status {
        if self.stopping {
            // The process stops: no longer than an idle connection's
            // grace (crate::drain), not a whole `timeout client`.
            let d = ticks::first(
                self.deadline,
                ticks::add(ctx.now(), crate::drain::IDLE_GRACE_MS),
            );
            if d != self.deadline {
                self.deadline = d;
                if let Some(me) = self.me {
                    ctx.tasklet_set_expire(me, d);
                }
            }
        }
        if ticks::is_expired(self.deadline, ctx.now()) {
            return self.end(ctx);
        }
        let (rd, wr) = (&mut self.rd_ready, &mut self.wr_ready);
        if self.linger.step(&mut self.tr, rd, self.rd_hup, wr) {
            return self.end(ctx);
        }
        Status::Continue
    }

    /// The connection's end: out of the registry and the counts, its
    /// buffers back to the pools, its socket closed with its state.
    pub(super) fn end(&mut self, ctx: &mut Ctx) -> Status {
        // No `epoll_ctl(DEL)`: the socket is closed when this tasklet's
        // state is dropped (no other descriptor shares it), which takes it
        // out of the poller; an event in between finds a freed tasklet
        // slot and is ignored.
        self.w.sessions.remove(&self.sess);
        self.w.debug(|| {
            format!(
                "closed {} on frontend {} after {} requests",
                self.sess.peer,
                self.fe.name,
                self.requests()
            )
        });
        // A plain socket is this connection's own descriptor: closing it
        // (when the state drops) sends the FIN, or the RST over unread
        // bytes, as `shutdown` then `close` would, one system call fewer.
        // TLS first sends its `close_notify` (a lingering close did).
        if !self.silent && !self.lingering && !matches!(self.tr, Transport::Plain(_)) {
            let _ = self.tr.shutdown();
        }
        self.release_buffers();
        self.w.conn_closed(ctx, &self.fe);
        Status::Done
    }

    pub(super) fn release_buffers(&mut self) {
        if !self.rbuf.is_empty() {
            self.w.put_buf(std::mem::take(&mut self.rbuf));
            // The head's index points into that buffer: it goes too.
            self.w
                .put_head_index(std::mem::take(&mut self.head.headers));
        }
        self.rstart = 0;
        self.rend = 0;
        if self.wbuf.capacity() > 0 && !self.has_output() {
            self.w.put_wbuf(std::mem::take(&mut self.wbuf));
            self.wpos = 0;
        }
    }
}
