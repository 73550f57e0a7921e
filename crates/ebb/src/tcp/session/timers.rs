//! The session's timer (one per session, the tasklet's own): `tcp-request
//! inspect-delay` and `timeout client` while inspecting, `timeout queue`,
//! `timeout connect`, the retry turn-around, then HAProxy's four timers
//! of a connected stream: each side's read timeout and write timeout,
//! `timeout client` on the client's, `timeout server` on the server's,
//! all replaced by `timeout tunnel` when it is set. A read timeout runs
//! from the side's last read, and from its last write too unless `option
//! independent-streams` (the frontend's for the client, the backend's for
//! the server); it stops while what the side sent waits to be written on.
//! A write timeout runs while bytes wait for the side, from their arrival
//! or the last write that moved some. An expired read timeout half-closes
//! its side (reading stops, its FIN goes on once the other side has
//! everything; the other direction flows on, the first code, `cD` or
//! `sD`, is kept for the log); an expired write timeout aborts the side
//! and the session. Activity is read from [`crate::tcp::pipe::Sock`]'s
//! dates, which the server side's tasklet updates without touching the timer: a
//! timer that fires early just recomputes the date and sleeps again.

use std::rc::Rc;
use std::sync::atomic::Ordering;
use std::sync::Arc;

use sched::{ticks, Ctx, Tick, ETERNITY};

use super::{Session, St};
use crate::backend::{Farm, ServerRt};
use crate::tcp::pipe::Pipe;

impl Session {
    /// HAProxy's four timers of a connected session: the client's read
    /// and the server's write timeout (the request channel's), the
    /// server's read and the client's write timeout (the response's).
    /// `timeout tunnel` replaces the client's and the server's.
    fn data_timers(&self, p: &Pipe) -> [Tick; 4] {
        let (ct, stt) = match self.tunnel {
            Some(t) => (t, t),
            None => (self.client_timeout(), self.timeouts.server),
        };
        // Bytes held back (not forwarded yet, or under the
        // `tcp-response` rules) have no writer waiting.
        let (req_held, res_held) = (!p.forwarding, p.res_hold);
        [
            p.cli.read_expiry(&p.c2s, &p.s2c, req_held, ct),
            p.srv.write_expiry(&p.c2s, req_held, stt),
            p.srv.read_expiry(&p.s2c, &p.c2s, res_held, stt),
            p.cli.write_expiry(&p.s2c, res_held, ct),
        ]
    }

    /// The date the session's timer should fire, and what fires then.
    pub(super) fn next_timer(&self) -> Tick {
        let p = self.pipe.borrow();
        let side = |last: Tick, t: u32, active: bool| {
            if active {
                ticks::add(last, t)
            } else {
                ETERNITY
            }
        };
        match self.st {
            St::Inspect => {
                let c = side(p.cli.last_rd, self.client_timeout(), !p.cli.eof);
                if self.fe.l4.inspect_delay > 0 {
                    ticks::first(c, self.inspect_until)
                } else {
                    c
                }
            }
            St::Queued | St::Connecting | St::Turnaround(_) => self.deadline,
            St::Established => {
                let t = self
                    .data_timers(&p)
                    .into_iter()
                    .fold(ETERNITY, ticks::first);
                match (self.res_inspect, &self.be) {
                    (Some((_, until)), Some(be)) if be.l4.res_inspect_delay > 0 => {
                        ticks::first(t, until)
                    }
                    _ => t,
                }
            }
        }
    }

    /// The timer fired: which timeout, if any, is really due.
    pub(super) fn on_timer(&mut self, ctx: &mut Ctx) {
        let now = ctx.now();
        match self.st {
            St::Inspect => {
                let last = self.pipe.borrow().cli.last_rd;
                if ticks::is_expired(ticks::add(last, self.client_timeout()), now) {
                    self.end_with(b"cR");
                }
            }
            St::Queued if ticks::is_expired(self.deadline, now) => {
                if let (Some(w), Some(farm)) = (self.waiter.take(), self.farm.clone()) {
                    farm.unqueue(&w);
                    if let Some(s) = w.cancel() {
                        farm.release(&s);
                    }
                }
                if let Some(s) = farm_first(&self.farm) {
                    s.counters.queue_timeouts.fetch_add(1, Ordering::Relaxed);
                }
                self.end_with(b"sQ");
            }
            St::Connecting if ticks::is_expired(self.deadline, now) => {
                self.connect_failed(ctx, true)
            }
            St::Turnaround(at) if ticks::is_expired(at, now) => self.connect(ctx),
            St::Established => {
                let [cli_rd, srv_wr, srv_rd, cli_wr] = {
                    let p = self.pipe.borrow();
                    self.data_timers(&p).map(|t| ticks::is_expired(t, now))
                };
                // HAProxy's order: the request's read then write timeout,
                // the response's; the first to fire names the log's code.
                // A read timeout half-closes its side (the other direction
                // flows on, the session ends with both), a write timeout
                // aborts the side it could not write to, and with it the
                // session.
                let pipe = Rc::clone(&self.pipe);
                let mut p = pipe.borrow_mut();
                if cli_rd {
                    p.cli.eof = true;
                    p.cli.rd_expired = true;
                    self.half_close(*b"cD");
                    // The client's FIN goes on to the server.
                    if let Some(t) = self.srv_task {
                        ctx.tasklet_wakeup(t);
                    }
                }
                if srv_wr {
                    p.srv.nolinger = true;
                    p.srv.silent_shut = false;
                    drop(p);
                    let code = self.half_term.unwrap_or(*b"sD");
                    return self.end_with(&code);
                }
                if srv_rd {
                    p.srv.eof = true;
                    p.srv.rd_expired = true;
                    self.half_close(*b"sD");
                }
                if cli_wr {
                    p.cli.nolinger = true;
                    drop(p);
                    let code = self.half_term.unwrap_or(*b"cD");
                    self.end_with(&code);
                }
            }
            _ => {}
        }
    }

    /// A read timeout half-closed a side: its code is kept for the log
    /// (the first one's) and shown by `show sess`.
    fn half_close(&mut self, code: [u8; 2]) {
        if self.half_term.is_none() {
            self.half_term = Some(code);
            self.sess
                .half_term
                .store(u16::from_be_bytes(code), Ordering::Relaxed);
        }
    }
}

fn farm_first(f: &Option<Arc<Farm>>) -> Option<Arc<ServerRt>> {
    f.as_ref().and_then(|f| f.servers.first().cloned())
}
