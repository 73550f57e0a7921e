//! A tcp-mode session: the client side's tasklet (`tcp_cli`), which also
//! runs the session's logic (HAProxy's stream for a tcp proxy).
//!
//! ```text
//!   accept ─> Inspect ─(content rules, use_backend)─> pick ─> Queued ─┐
//!                │ reject (PR)                          │             │ slot
//!                v                                      v             v
//!              close            Turnaround <─ retry ─ Connecting <────┘
//!                                    └──────────────────> │ connected
//!                                                         v
//!                                                    Established ─> both FINs / error ─> log, close
//! ```
//!
//! Where each part lives: this file holds the session's state, its
//! start, the state machine's steps and the tasklet's run; then
//! - [`rules`]: the content inspection (`tcp-request content`, the
//!   backend's choice, `use-server`, `stick`) and `tcp-response content`;
//! - [`server`]: the server's choice, the queue, the connect and its
//!   retries;
//! - [`relay`]: the connected session: what starts the relay, and when
//!   it is over;
//! - [`timers`]: the session's timer, with HAProxy's four timers of a
//!   connected stream;
//! - [`end`]: the hand-over to HTTP, the close, the counters and the log
//!   line.
//!
//! Termination codes (the log's `%ts`) are HAProxy's: who ended the
//! session (`C` client, `S` server, `P` proxy, `c`/`s` their timeouts,
//! `-` normal) and in which state (`R` inspecting, `Q` queue, `C`
//! connect, `D` data).

use std::cell::RefCell;
use std::net::SocketAddr;
use std::rc::Rc;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::SystemTime;

use sched::{ticks, Ctx, Reasons, Status, TaskletId, Tick, ETERNITY};

use super::pipe::Pipe;
use crate::backend::{Farm, ServerRt, WaitState, Waiter};
use crate::l4rules::Verdict;
use crate::proxy::{BackendRt, BeTimeouts, FrontendRt};
use crate::transport::Transport;
use crate::worker::Worker;

mod end;
mod relay;
mod rules;
mod server;
mod timers;

/// Where the content inspection sends the session.
enum Route {
    /// A tcp backend.
    Backend(usize),
    /// HTTP from now on (see [`super::upgrade`]): `switch-mode http`
    /// (`backend` `None`, `proto` its `proto`), or an HTTP backend.
    Http {
        backend: Option<usize>,
        proto: Option<bool>,
    },
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum St {
    Inspect,
    Queued,
    Connecting,
    /// Waiting before a retry, until the tick.
    Turnaround(Tick),
    Established,
}

pub(super) struct Session {
    pipe: Rc<RefCell<Pipe>>,
    fe: Arc<FrontendRt>,
    w: Rc<Worker>,
    peer: SocketAddr,
    /// The address the client reached: from a PROXY header, else the
    /// socket's own.
    dst: Option<SocketAddr>,
    tls: bool,
    /// The tasklet is flagged heavy while a TLS handshake runs (as the
    /// HTTP side's), so handshakes cannot add up in one loop turn.
    heavy: bool,
    st: St,
    me: Option<TaskletId>,
    srv_task: Option<TaskletId>,
    be: Option<Arc<BackendRt>>,
    farm: Option<Arc<Farm>>,
    timeouts: BeTimeouts,
    /// `timeout tunnel`, when set on the backend.
    tunnel: Option<u32>,
    server: Option<Arc<ServerRt>>,
    /// The server whose full queue refused the session (logged; no slot
    /// of it is held).
    refused_by: Option<Arc<ServerRt>>,
    waiter: Option<Arc<Waiter>>,
    retries_left: u32,
    retries_done: u32,
    redispatched: bool,
    avoid: Option<usize>,
    /// The server a `use-server` rule assigned (index in the backend),
    /// and whether a `force-persist` rule held.
    use_srv: Option<(usize, bool)>,
    /// Ticks: accept, inspection's end, slot obtained,
    /// deadline of the current state.
    t_accept: Tick,
    inspect_until: Tick,
    t_served: Option<Tick>,
    /// `use_server` counted the server's session of the attempt it
    /// starts; a retry's connect counts one more (HAProxy's).
    attempt_noted: bool,
    deadline: Tick,
    /// Queue lengths when this session queued (`%sq/%bq`).
    queues: (usize, usize),
    accept_time: SystemTime,
    vars: Box<RefCell<crate::sample::VarStore>>,
    /// The session's trackers (`tcp-request ... track-scN`).
    stk: crate::table::Stk,
    /// The content rule to resume at (HAProxy's `current_rule`): a rule
    /// that waited for more bytes is evaluated again, those before it
    /// are not run twice.
    content_pos: usize,
    /// The name a `tcp-request content do-resolve` rule waits for.
    resolving: crate::l4rules::Resolving,
    /// `silent-drop`: close with a reset and no log.
    silent: bool,
    /// The log line went out at the connect (`option logasap`).
    logged: bool,
    /// `tcp-response content` inspection under way: the rule to resume
    /// at and the end of `tcp-response inspect-delay`.
    res_inspect: Option<(usize, Tick)>,
    sess: Arc<crate::registry::SessInfo>,
    term: [u8; 2],
    /// The code of a read timeout that half-closed a side (HAProxy keeps
    /// the first error's): the log's when the session ends.
    half_term: Option<[u8; 2]>,
    /// The stream becomes HTTP (see [`Route::Http`]).
    upgrade: Option<(Option<usize>, Option<bool>)>,
    /// `bind ... proto none`: it may not.
    no_upgrade: bool,
    /// Bytes (from the client, from the server) already added to the
    /// counters: `option contstats` adds them as they flow.
    counted: (u64, u64),
    /// `option contstats`: the next date the counters are brought up to
    /// date at the latest (HAProxy's 5 s).
    count_at: Tick,
}

impl Session {
    #[allow(clippy::too_many_arguments)]
    pub(super) fn spawn(
        ctx: &mut Ctx,
        tr: Transport,
        peer: SocketAddr,
        dst: Option<SocketAddr>,
        fe: Arc<FrontendRt>,
        w: Rc<Worker>,
        early: super::Early,
    ) -> std::io::Result<()> {
        let fd = tr.raw_fd();
        let now = ctx.now();
        let tls = tr.is_tls();
        let heavy = tr.is_handshaking() && w.heavy_enabled;
        let sess = w.sessions.add(ctx.thread_id(), peer, Arc::clone(&fe));
        let pipe = Pipe {
            cli: super::pipe::Sock {
                tr: Some(tr),
                rd: true,
                wr: true,
                last_rd: now,
                last_wr: now,
                indep: fe.l4.indep_streams,
                nolinger: fe.nolinger,
                ..Default::default()
            },
            ..Default::default()
        };
        let s = Session {
            pipe: Rc::new(RefCell::new(pipe)),
            inspect_until: ticks::add(now, fe.l4.inspect_delay),
            fe,
            w,
            peer,
            dst,
            tls,
            heavy,
            st: St::Inspect,
            me: None,
            srv_task: None,
            be: None,
            farm: None,
            timeouts: BeTimeouts {
                connect: 0,
                server: 0,
                queue: 0,
                tunnel: 0,
            },
            tunnel: None,
            server: None,
            refused_by: None,
            waiter: None,
            retries_left: 0,
            retries_done: 0,
            redispatched: false,
            avoid: None,
            use_srv: None,
            t_accept: now,
            t_served: None,
            attempt_noted: false,
            deadline: ETERNITY,
            queues: (0, 0),
            accept_time: SystemTime::now(),
            vars: early.vars,
            stk: early.stk,
            content_pos: 0,
            resolving: Default::default(),
            silent: false,
            logged: false,
            res_inspect: None,
            sess: Arc::clone(&sess),
            term: *b"--",
            half_term: None,
            upgrade: None,
            no_upgrade: early.no_upgrade,
            counted: (0, 0),
            count_at: ETERNITY,
        };
        // The dates log-format strings read (`%Ts` in a unique id).
        s.vars.borrow_mut().info.accept_date = Some(s.accept_time);
        s.w.conn_opened(&s.fe);
        s.fe.sessions.fetch_add(1, Ordering::Relaxed);
        if s.fe.log && !s.fe.l4.tcplog && s.fe.log_format.is_none() && s.w.logging(&s.fe) {
            // HAProxy's default TCP log: one line at accept.
            let line = format!(
                "Connect from {} to {} ({}/TCP)",
                s.peer,
                s.dst
                    .or_else(|| s.local_addr())
                    .map_or("-".to_string(), |a| a.to_string()),
                s.fe.name
            );
            s.w.log_access(line.into_bytes(), crate::log::LOG_INFO);
        }
        let name = if tls { "tcp_tls_cli" } else { "tcp_cli" };
        let id = ctx.new_tasklet_obj(name, s);
        sess.set_tasklet(id);
        // Read interest only: writability is watched once a write blocks
        // (see [`Pipe::watch_blocked`]).
        if let Err(e) = ctx.register_fd(fd, id, false) {
            ctx.kill_tasklet(id);
            return Err(e);
        }
        ctx.on_stop_tasklet(id);
        if heavy {
            ctx.set_heavy(id, true);
        }
        ctx.tasklet_wakeup(id);
        Ok(())
    }

    fn local_addr(&self) -> Option<SocketAddr> {
        let p = self.pipe.borrow();
        p.cli
            .tr
            .as_ref()
            .and_then(|t| crate::sys::original_dst(t.tcp()))
    }

    fn client_timeout(&self) -> u32 {
        self.fe.timeouts.client
    }

    /// Runs `f` with the session's sample context (`payload`: the request
    /// bytes under inspection; `be`: the backend's name). `Err(None)` when
    /// the client socket is gone.
    fn with_ctx<R>(
        &self,
        payload: Option<crate::sample::Payload<'_>>,
        be: Option<&str>,
        req: Option<crate::sample::Req<'_>>,
        f: impl FnOnce(&crate::sample::Ctx<'_>) -> Result<R, Option<usize>>,
    ) -> Result<R, Option<usize>> {
        let dst = self.dst;
        let local = move || dst;
        let p = self.pipe.borrow();
        let Some(tr) = p.cli.tr.as_ref() else {
            return Err(None);
        };
        let local_sock = || tr.tcp().local_addr().ok();
        let dstf: &dyn Fn() -> Option<SocketAddr> = if self.dst.is_some() {
            &local
        } else {
            &local_sock
        };
        let sctx = crate::sample::Ctx {
            src: self.peer,
            dst: dstf,
            fe: &self.fe.name,
            be,
            srv: None,
            tls: tr.is_tls(),
            sni: tr.sni(),
            client_cert: tr.client_cert(),
            req,
            res: None,
            vars: Some(&*self.vars),
            stk: Some(&self.stk),
            payload,
            res_body: None,
            fc: Some(tr.tcp()),
            early: false,
        };
        f(&sctx)
    }

    /// Ends the session with a termination code.
    /// The client's TLS handshake is under way and may still complete.
    fn cli_handshaking(&self) -> bool {
        let p = self.pipe.borrow();
        !p.cli.err && !p.cli.eof && p.cli.tr.as_ref().is_some_and(|t| t.is_handshaking())
    }

    fn end_with(&mut self, code: &[u8; 2]) {
        if self.term == *b"--" {
            self.term = *code;
        }
    }

    fn ended(&self) -> bool {
        self.term != *b"--"
    }

    /// One run's logic after the I/O: moves the state machine on.
    fn step(&mut self, ctx: &mut Ctx) {
        loop {
            if self.ended() {
                return;
            }
            match self.st {
                // HAProxy starts a TLS frontend's stream once the
                // handshake is done: its rules, and the end of a frontend
                // without a backend (PR), wait for it (a client that
                // fails, closes or stalls it ends as before).
                St::Inspect if self.cli_handshaking() => return,
                St::Inspect => match self.inspect(ctx) {
                    None => return,
                    Some(Err(v)) => {
                        self.silent = v == Verdict::SilentDrop;
                        self.end_with(b"PR");
                        return;
                    }
                    Some(Ok(Route::Backend(bi))) => self.start_backend(ctx, bi),
                    // `bind ... proto none`: HAProxy aborts the stream
                    // (a failed rule, or a backend it cannot set).
                    Some(Ok(Route::Http { backend, .. })) if self.no_upgrade => {
                        // (Logged with the backend it could not set.)
                        self.be = backend.and_then(|b| self.fe.backends.get(b)).cloned();
                        self.end_with(if backend.is_some() { b"RR" } else { b"PR" });
                        return;
                    }
                    Some(Ok(Route::Http { backend, proto })) => {
                        self.upgrade = Some((backend, proto));
                        return;
                    }
                },
                St::Queued => {
                    let Some(w) = self.waiter.clone() else {
                        return;
                    };
                    match w.current() {
                        WaitState::Assigned(s) => self.use_server(ctx, s),
                        WaitState::Redispatch => {
                            self.waiter = None;
                            self.pick(ctx);
                        }
                        WaitState::Waiting | WaitState::Cancelled => return,
                    }
                }
                St::Connecting => {
                    let (connecting, failed) = {
                        let p = self.pipe.borrow();
                        (p.connecting, p.connect_failed)
                    };
                    if failed {
                        self.connect_failed(ctx, false);
                        continue;
                    }
                    if connecting {
                        return;
                    }
                    self.establish(ctx);
                    return;
                }
                St::Turnaround(_) | St::Established => return,
            }
        }
    }
}

impl sched::TaskletFn for Session {
    fn run(&mut self, ctx: &mut Ctx, me: TaskletId, why: Reasons) -> Status {
        self.me = Some(me);
        {
            let mut p = self.pipe.borrow_mut();
            // Events are taken whatever woke us: an edge that came while
            // we were already queued by the other side is still ours.
            {
                let ev = ctx.take_events(me);
                if ev.readable() || ev.hup_or_err() {
                    p.cli.rd = true;
                }
                p.cli.hup |= ev.hup_or_err();
                if ev.writable() || ev.hup_or_err() {
                    p.cli.wr = true;
                }
            }
        }
        let kill = self.sess.kill.load(Ordering::Relaxed);
        if kill != 0 {
            // `shutdown session` from the CLI (`K`), a server's
            // `on-marked-down` (`D`) or `on-marked-up` (`U`): HAProxy 2.6
            // logs an established session it kills `K-` (`D-`, `U-`;
            // checked by hand).
            let state = match self.st {
                St::Established => b'-',
                St::Inspect => b'R',
                St::Queued => b'Q',
                _ => b'C',
            };
            self.end_with(&[kill, state]);
            return self.close(ctx);
        }
        if why.intersects(Reasons::TIMER) {
            self.on_timer(ctx);
        }
        let m = self.pipe.borrow_mut().client_pass(&*self.w, ctx.now());
        if self.heavy
            && !self
                .pipe
                .borrow()
                .cli
                .tr
                .as_ref()
                .is_some_and(|t| t.is_handshaking())
        {
            self.heavy = false;
            ctx.set_heavy(me, false);
        }
        if m.wake_other && self.st == St::Established {
            if let Some(t) = self.srv_task {
                ctx.tasklet_wakeup(t);
            }
        }
        if m.again {
            ctx.tasklet_wakeup(me);
        }
        self.step(ctx);
        if let Some((backend, proto)) = self.upgrade.take() {
            if !self.ended() {
                return self.hand_over(ctx, backend, proto);
            }
        }
        if self.res_inspect.is_some() && !self.ended() {
            self.inspect_response(ctx);
        }
        if !self.ended() {
            if let Some(code) = self.data_end() {
                self.term = code;
                if code == *b"--" {
                    return self.close(ctx);
                }
            }
        }
        if self.ended() {
            return self.close(ctx);
        }
        self.count_continuously(ctx.now());
        self.pipe.borrow_mut().watch_blocked(ctx);
        ctx.tasklet_set_expire(me, ticks::first(self.next_timer(), self.count_at));
        Status::Continue
    }
}
