//! Between two exchanges. The stream goes back to the thread's pool
//! ([`Conn::park`]) and comes back for the next request
//! ([`Conn::unpark`]); a connection with nothing of an exchange left
//! shrinks to [`Idle`] (the fields that last) until its next run finds
//! it, which [`H1Task`]'s run does around the connection's own.

use std::sync::Arc;

use sched::{Ctx, Reasons, Status, TaskletFn, TaskletId};

use crate::http1::RequestHead;
use crate::worker::Worker;

use super::{Conn, Exchange, H1Task, Idle, In};

impl<S: Exchange + Default + 'static> TaskletFn for H1Task<S> {
    fn run(&mut self, ctx: &mut Ctx, me: TaskletId, why: Reasons) -> Status {
        if let H1Task::Idle(_) = self {
            if let H1Task::Idle(i) = std::mem::replace(self, H1Task::Gone) {
                *self = H1Task::Busy(Conn::from_idle(i));
            }
        }
        let H1Task::Busy(c) = self else {
            return Status::Done;
        };
        let st = c.run(ctx, me, why);
        if st == Status::Continue && c.idle_form() {
            if let H1Task::Busy(c) = std::mem::replace(self, H1Task::Gone) {
                *self = H1Task::Idle(c.into_idle());
            }
        }
        st
    }
}

impl<S: Exchange + Default + 'static> Conn<S> {
    /// Runs `f` on the current stream, which reaches the connection
    /// through its second argument. `None` if the stream is already out
    /// (a call from within the stream's own run).
    pub(super) fn with_stream<R>(&mut self, f: impl FnOnce(&mut S, &mut Self) -> R) -> Option<R> {
        let mut st = self.st.take()?;
        let r = f(&mut st, self);
        self.st = Some(st);
        Some(r)
    }

    /// Takes a stream from the thread's pool for a new exchange, if the
    /// connection's went back there.
    pub(super) fn unpark(&mut self) {
        // Busy again: the thread's place goes back.
        self.warm = None;
        if std::mem::take(&mut self.parked) {
            self.st = Some(S::from_pool(&self.w));
        }
        let w = &self.w;
        self.vars
            .unpark(self.sess.peer, self.pp_dst(), || w.take_vars());
    }

    /// Gives the stream back to the thread's pool between two exchanges,
    /// when it holds nothing of this connection, and the variables' store
    /// likewise (see [`crate::sample::vars::ConnVars`]); unless the thread
    /// lets it keep them (a few idle connections may: see
    /// [`crate::worker::WARM_IDLE_MAX`]).
    pub(super) fn park(&mut self) {
        if self.warm.is_some() {
            return;
        }
        self.park_in(true);
    }

    /// [`Conn::park`]'s work; `warm_ok`: whether the connection may keep
    /// its state in one of the thread's warm places (an idle one, which
    /// may have a next exchange; not a closing one, whose state would be
    /// freed with it while the thread's next connection allocates a new
    /// stream and store).
    pub(super) fn park_in(&mut self, warm_ok: bool) {
        if warm_ok && !self.parked {
            self.warm = Worker::warm_idle(&self.w);
            if self.warm.is_some() {
                return;
            }
        }
        if self.st.as_ref().is_some_and(|s| s.parkable()) {
            if let Some(st) = self.st.take() {
                st.to_pool(&self.w);
                self.parked = true;
            }
        }
        let w = &self.w;
        self.vars.park(self.sess.peer, self.pp_dst(), |v, keep| {
            w.give_vars(v, keep)
        });
    }

    /// Whether nothing of an exchange is left (see [`Idle`]): no stream
    /// (in the pool, not kept in a warm place), no buffer, no output, no
    /// head begun, registered with the poller.
    fn idle_form(&self) -> bool {
        self.warm.is_none()
            && self.upgraded.is_none()
            && self.parked
            && self.st.is_none()
            && self.registered
            && self.lane_of.is_none()
            && !self.heavy
            && !self.closing
            && self.me.is_some()
            && matches!(self.input, In::Head)
            && self.next_input.is_none()
            && self.req_start.is_none()
            && self.rend == 0
            && self.rbuf.is_empty()
            && self.wbuf.capacity() == 0
            && self.head.headers.capacity() == 0
            && self.body.is_none()
            && self.native.is_none()
            && !self.tr.has_pending_output()
            && !self.tr.is_handshaking()
            && !self.lingering
    }

    /// The idle form of a connection [`Conn::idle_form`] found idle.
    fn into_idle(self: Box<Self>) -> Idle {
        let Conn {
            tr,
            fd,
            dst,
            fe,
            w,
            rd_ready,
            rd_hup,
            wr_ready,
            eof,
            silent,
            stopping,
            idle_since,
            deadline,
            me,
            vars,
            stk,
            sess,
            registered,
            h1_only,
            ..
        } = *self;
        let stk_now = stk.now();
        let stk = (!stk.is_clear()).then(|| Box::new(stk));
        let flags = [
            rd_ready, rd_hup, wr_ready, eof, silent, stopping, registered, h1_only,
        ]
        .iter()
        .enumerate()
        .fold(0u8, |f, (i, b)| f | (u8::from(*b) << i));
        Idle {
            tr,
            dst,
            fe,
            w,
            sess,
            vars,
            stk,
            stk_now,
            me: me.unwrap_or(TaskletId::from_local(0, u64::MAX)),
            fd,
            idle_since,
            deadline,
            flags,
        }
    }

    /// The whole state again, for a run of an idle connection: what
    /// lasts from `i`, what an exchange uses as a new connection has it.
    fn from_idle(mut i: Idle) -> Box<Self> {
        let stk = match i.stk.take() {
            Some(s) => *s,
            None => {
                let s = crate::table::Stk::new(Arc::clone(&i.fe.tables));
                s.set_now(i.stk_now);
                s
            }
        };
        Self::with_lasting(i, stk)
    }

    /// A connection's state from what lasts (`i`, its trackers `stk`
    /// apart), between two exchanges.
    pub(super) fn with_lasting(i: Idle, stk: crate::table::Stk) -> Box<Self> {
        let bit = |n: u8| i.flags & (1 << n) != 0;
        Box::new(Conn {
            rd_ready: bit(0),
            rd_hup: bit(1),
            wr_ready: bit(2),
            eof: bit(3),
            silent: bit(4),
            stopping: bit(5),
            registered: bit(6),
            tr: i.tr,
            fd: i.fd,
            heavy: false,
            dst: i.dst,
            fe: i.fe,
            w: i.w,
            rbuf: Vec::new(),
            rstart: 0,
            rend: 0,
            wbuf: Vec::new(),
            wpos: 0,
            body: None,
            input: In::Head,
            // Its header index comes from the thread's pool with the read
            // buffer, and goes back to it while the connection idles.
            head: RequestHead::default(),
            closing: false,
            req_start: None,
            bytes_in: 0,
            idle_since: i.idle_since,
            deadline: i.deadline,
            me: Some(i.me),
            next_input: None,
            vars: i.vars,
            stk,
            sess: i.sess,
            sent_run: 0,
            // The next request takes a stream from the thread's pool.
            st: None,
            parked: true,
            warm: None,
            lane_of: None,
            native: None,
            upgraded: None,
            h1_only: bit(7),
            lingering: false,
            wr_shut: false,
            unread: false,
            linger: crate::mux::Linger::default(),
        })
    }
}
