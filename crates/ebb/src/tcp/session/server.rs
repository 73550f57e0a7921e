//! The session's server: the backend's farm picks one (or queues the
//! session), the non-blocking connect (PROXY header, TLS), and on a
//! failure the retries, the turn-around and the redispatch.

use std::rc::Rc;
use std::sync::atomic::Ordering;
use std::sync::Arc;

use sched::{ticks, Ctx, TaskletId};

use super::{Session, St};
use crate::backend::{LbInput, Pick, ServerRt};
use crate::proxy::BackendKind;
use crate::tcp::pipe::SrvTasklet;
use crate::transport::Transport;

/// HAProxy's turn-around before retrying a server that refused: at most
/// one second (and never longer than `timeout connect`).
const TURNAROUND_MS: u32 = 1000;

impl Session {
    /// Routes to backend `bi` and asks for a server.
    pub(super) fn start_backend(&mut self, ctx: &mut Ctx, bi: usize) {
        let be = Arc::clone(&self.fe.backends[bi]);
        let BackendKind::Servers(sr) = &be.kind else {
            self.end_with(b"PR");
            return;
        };
        self.farm = Some(Arc::clone(&sr.farm));
        self.timeouts = sr.timeouts;
        self.tunnel = be.l4.tunnel;
        self.retries_left = sr.farm.retries;
        self.be = Some(be);
        self.pick(ctx);
    }

    pub(super) fn pick(&mut self, ctx: &mut Ctx) {
        let (Some(farm), Some(me)) = (self.farm.clone(), self.me) else {
            return;
        };
        let prio = {
            let v = self.vars.borrow();
            crate::backend::Prio::of((v.info.prio_class, v.info.prio_offset), ctx)
        };
        let input = LbInput {
            src: Some(self.peer.ip()),
            uri: b"",
            hdr: None,
            post: None,
            prio,
        };
        // A `use-server` rule's server takes the session even when down
        // (the rule checked it may), before the stick table's.
        let pick = match self.use_srv {
            Some((i, stay)) => {
                farm.pick_cookie(Some(i), true, stay, &input, self.avoid, me, || ctx.handle())
            }
            None => match self.stk.prefer_force() {
                Some(stay) => farm.pick_cookie(
                    self.stk.prefer(),
                    true,
                    stay,
                    &input,
                    self.avoid,
                    me,
                    || ctx.handle(),
                ),
                None => {
                    farm.pick_sticky(self.stk.prefer(), &input, self.avoid, me, || ctx.handle())
                }
            },
        };
        match pick {
            Pick::Server(s) => self.use_server(ctx, s),
            Pick::Queued(w) => {
                let now = ctx.now();
                // HAProxy's %sq/%bq: how many waited before this one, in
                // the queue it joined (a server's or the backend's).
                let ahead = w.ahead as usize;
                self.queues = if w.on_backend { (0, ahead) } else { (ahead, 0) };
                self.waiter = Some(w);
                self.st = St::Queued;
                self.deadline = ticks::add(now, self.timeouts.queue);
            }
            // A server's full queue is HAProxy's queue error (`SQ`),
            // logged with that server's name.
            Pick::QueueFull(s) => {
                self.refused_by = Some(s);
                self.end_with(b"SQ")
            }
            Pick::NoServer(_) => self.end_with(b"SC"),
        }
    }

    pub(super) fn use_server(&mut self, ctx: &mut Ctx, s: Arc<ServerRt>) {
        self.t_served = Some(ctx.now());
        self.waiter = None;
        s.counters.note_session(ctx.now_ns());
        self.attempt_noted = true;
        self.sess.target.store(s.uid, Ordering::Relaxed);
        // `bc_dst`, `bc_dst_port` in `tcp-response` rules.
        if let Ok(mut v) = self.vars.try_borrow_mut() {
            v.info.srv_addr = s.addr();
        }
        self.server = Some(s);
        self.connect(ctx);
    }

    /// Starts a non-blocking connect to the held server.
    pub(super) fn connect(&mut self, ctx: &mut Ctx) {
        let Some(s) = self.server.clone() else {
            return;
        };
        let now = ctx.now();
        if !std::mem::take(&mut self.attempt_noted) {
            s.counters.note_attempt(ctx.now_ns());
        }
        s.counters.connects.fetch_add(1, Ordering::Relaxed);
        let has_data = self.pipe.borrow().c2s.pending() > 0;
        let dest = s.dest(|| self.dst.or_else(|| self.local_addr()));
        let first = self.retries_done == 0;
        let r = crate::backend::connect_server_nb(&s, || dest, has_data, first).and_then(
            |(st, socks)| {
                let tr = match s.tls() {
                    Some(t) => {
                        let name = t.name_for(None, dest);
                        Transport::connect_tls(st, Arc::clone(&t.config), &name)?
                    }
                    None => Transport::plain(st),
                };
                Ok((tr, socks))
            },
        );
        let Ok((mut st, socks)) = r else {
            self.connect_failed(ctx, false);
            return;
        };
        let Some(task) = self.srv_tasklet(ctx) else {
            return;
        };
        // Readiness of an earlier socket of this session (a retry) must not
        // pass for this one's connect.
        let _ = ctx.take_events(task);
        let fd = st.raw_fd();
        let loopback = s.opts.unix.is_none() && dest.is_some_and(|a| a.ip().is_loopback());
        // The PROXY header, with the TLVs of `proxy-v2-options` (the
        // unique id from the frontend's `unique-id-format`, as HAProxy
        // generates it for a tcp stream too).
        let prefix = if s.opts.send_proxy > 0 {
            let o = &s.opts.pp_v2;
            let fmt = self.fe.txn.unique_id.as_ref().filter(|_| o.unique_id);
            self.with_ctx(None, None, None, |sctx| {
                let dst = (sctx.dst)();
                // The id a `unique-id` fetch of the rules made, else now.
                let made = self.vars.borrow().info.unique_id.clone();
                let mut uid = Vec::new();
                match (made, fmt) {
                    (Some(m), Some(_)) => uid = m,
                    (None, Some(f)) => f.render(sctx, &mut uid),
                    _ => {}
                }
                let v = self.vars.borrow();
                Ok(crate::proxyproto::server_header(
                    s.opts.send_proxy,
                    o,
                    dst.map(|d| (self.peer, d)),
                    v.pp_authority(sctx.sni),
                    fmt.map(|_| &uid[..]),
                ))
            })
            .unwrap_or_default()
        } else {
            Vec::new()
        };
        // To a TLS server the PROXY header goes in clear, before the
        // handshake (HAProxy's order).
        let prefix = if st.is_tls() {
            st.send_first(&prefix);
            Vec::new()
        } else {
            prefix
        };
        {
            let mut p = self.pipe.borrow_mut();
            p.srv_local = crate::sample::back_local(st.tcp());
            p.srv = crate::tcp::pipe::Sock {
                tr: Some(st),
                used: Some(s.used_conn()),
                last_rd: now,
                last_wr: now,
                indep: self.be.as_ref().is_some_and(|b| b.l4.indep_streams),
                nolinger: s.opts.sock.nolinger,
                silent_shut: s.opts.sock.nolinger,
                ..Default::default()
            };
            p.connecting = true;
            p.connect_failed = false;
            p.handshaking = false;
            p.socks = socks;
            p.t_conn = None;
            p.sent_early = false;
            p.srv_prefix = prefix;
        }
        // A loopback server's handshake is usually done when `connect`
        // returns: the waiting bytes go at once and confirm it, and the
        // socket needs no writable edge (see [`Pipe::send_early`]).
        let known = loopback && self.pipe.borrow_mut().send_early(&*self.w, now);
        let watch = !known || !self.pipe.borrow().srv.wr;
        self.pipe.borrow_mut().srv.out = watch;
        if ctx.register_fd(fd, task, watch).is_err() {
            let mut p = self.pipe.borrow_mut();
            p.srv.tr = None;
            p.srv.used = None;
            drop(p);
            self.connect_failed(ctx, false);
            return;
        }
        self.st = St::Connecting;
        self.deadline = ticks::add(now, self.timeouts.connect);
    }

    fn srv_tasklet(&mut self, ctx: &mut Ctx) -> Option<TaskletId> {
        if let Some(t) = self.srv_task {
            return Some(t);
        }
        let cli = self.me?;
        let t = ctx.new_tasklet_obj(
            "tcp_srv",
            SrvTasklet {
                pipe: Rc::clone(&self.pipe),
                w: Rc::clone(&self.w),
                cli,
            },
        );
        self.srv_task = Some(t);
        Some(t)
    }

    fn drop_server_sock(&mut self, ctx: &mut Ctx) {
        let st = {
            let mut p = self.pipe.borrow_mut();
            p.connecting = false;
            p.handshaking = false;
            p.srv.used = None;
            p.srv.tr.take()
        };
        if let Some(mut st) = st {
            let _ = ctx.deregister_fd(st.raw_fd());
            if !self.server.as_ref().is_some_and(|s| s.opts.sock.nolinger) {
                let _ = st.shutdown();
            }
        }
    }

    /// A connect failed or timed out: retry (after the turn-around for a
    /// refusal), redispatch on the last retry, or give up (`SC`/`sC`).
    pub(super) fn connect_failed(&mut self, ctx: &mut Ctx, timed_out: bool) {
        let sni_mismatch = {
            let p = self.pipe.borrow();
            p.srv.tr.as_ref().is_some_and(|t| t.sni_mismatch())
        };
        if sni_mismatch {
            // A server certificate that does not name the SNI sent: no
            // retry, logged as all done (HAProxy 2.6's rule).
            self.retries_done += self.retries_left;
            self.retries_left = 0;
        }
        self.drop_server_sock(ctx);
        let Some(farm) = self.farm.clone() else {
            return;
        };
        if let Some(s) = &self.server {
            crate::backend::check::observe(s, crate::backend::check::Seen::L4Err);
        }
        // `retry-on` without `conn-failure`: no connect retry at all.
        let conn_failure = farm.retry_on.has(crate::config::RetryOn::CONN_FAILURE);
        if self.retries_left == 0 || !conn_failure {
            // One failed connection for the session given up (`econ`,
            // HAProxy's `failed_conns`), not one per attempt.
            if let Some(s) = &self.server {
                s.counters.conn_errors.fetch_add(1, Ordering::Relaxed);
            }
            self.end_with(if timed_out { b"sC" } else { b"SC" });
            return;
        }
        self.retries_left -= 1;
        self.retries_done += 1;
        if let Some(s) = &self.server {
            s.counters.retries.fetch_add(1, Ordering::Relaxed);
        }
        if farm.redispatch_on(self.retries_done) {
            if let Some(s) = self.server.take() {
                s.counters.redispatches.fetch_add(1, Ordering::Relaxed);
                self.avoid = Some(s.idx);
                farm.release(&s);
            }
            self.redispatched = true;
            self.pick(ctx);
            return;
        }
        if timed_out {
            self.connect(ctx);
        } else {
            let wait = TURNAROUND_MS.min(self.timeouts.connect.max(1));
            let at = ticks::add(ctx.now(), wait);
            self.st = St::Turnaround(at);
            self.deadline = at;
        }
    }
}
