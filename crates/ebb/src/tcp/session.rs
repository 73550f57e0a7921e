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
//! Timers (one per session, the tasklet's own): `tcp-request
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
//! and the session. Activity is read from [`super::pipe::Sock`]'s dates,
//! which the server side's tasklet updates without touching the timer: a
//! timer that fires early just recomputes the date and sleeps again.
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

use super::pipe::{Pipe, SpliceWant, SrvTasklet};
use crate::backend::{Farm, LbInput, Pick, ServerRt, WaitState, Waiter};
use crate::l4rules::{run_rules, run_rules_addrs, Verdict};
use crate::proxy::{BackendKind, BackendRt, BeTimeouts, FrontendRt};
use crate::transport::Transport;
use crate::worker::Worker;

/// HAProxy's turn-around before retrying a server that refused: at most
/// one second (and never longer than `timeout connect`).
const TURNAROUND_MS: u32 = 1000;

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

/// `option contstats`: the longest the counters lag the bytes.
const CONTSTATS_MS: u32 = 5000;

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

    /// Evaluates the content rules and `use_backend` once the inspection
    /// may decide, then the chosen backend's content and `stick` rules.
    /// Returns `None` while it must wait for more bytes, `Err(verdict)`
    /// when a rule refuses the session.
    fn inspect(&mut self, ctx: &mut Ctx) -> Option<Result<Route, Verdict>> {
        let now = ctx.now();
        self.stk.set_now(now);
        let fe = Arc::clone(&self.fe);
        let l4 = &fe.l4;
        let (payload, eof, full) = {
            let p = self.pipe.borrow();
            (p.c2s.data().to_vec(), p.cli.eof, p.c2s.reader_blocked)
        };
        let expired = ticks::is_expired(self.inspect_until, now);
        let hello = crate::tls::hello::sniff(&payload);
        // HAProxy: the content rules run on every new chunk while more may
        // come within the delay; a rule that does not hold on an answer
        // that may still change (`req.len` below a bound, a hello not
        // whole yet) stops the walk and waits, and the walk resumes at
        // that rule. At the delay, the end of the input or a full buffer,
        // they decide on what arrived.
        let partial = l4.inspect_delay > 0 && !eof && !full && !expired;
        let may_change = std::cell::Cell::new(false);
        let sni = match &hello {
            crate::tls::hello::Sniff::Hello(h) => h.sni.clone(),
            _ => None,
        };
        let pay = crate::sample::Payload {
            bytes: &payload,
            sni: sni.as_deref(),
            hello_partial: matches!(hello, crate::tls::hello::Sniff::Need),
            partial,
            may_change: &may_change,
            response: false,
        };
        let from = self.content_pos;
        // HTTP fetches in the rules: the bytes parsed as an HTTP/1 request
        // head, once it is whole (HAProxy parses a tcp stream's request for
        // them); until then, while more may come, the walk waits. A head
        // that is not HTTP, or not whole at the end, gives them nothing.
        let reads_http = l4.reads_http || fe.backends.iter().any(|b| b.l4.reads_http);
        let mut head = crate::http1::RequestHead::default();
        let mut has_head = false;
        if reads_http {
            match crate::http1::parse_request_into(&payload, &self.w.limits, &mut head) {
                Ok(crate::http1::Status::Complete(())) => has_head = true,
                Ok(crate::http1::Status::Partial) if partial => return None,
                _ => {}
            }
        }
        let req = has_head.then_some(crate::sample::Req {
            buf: &payload,
            head: &head,
            body: &[],
        });
        // `set-src`/`set-dst`...: the session's addresses from then on (its
        // log, `balance source`, the PROXY header to the server), kept
        // even when the walk waits.
        let addrs = std::cell::Cell::new(None);
        let use_srv = std::cell::Cell::new(None);
        let r = self.with_ctx(Some(pay), None, req, |sctx| {
            let mut xp = false;
            let v = run_rules_addrs(
                &l4.content_rules,
                from,
                &fe.matcher,
                sctx,
                false,
                Some(&may_change),
                &mut xp,
                Some(&addrs),
            );
            match v {
                Verdict::Wait(i) => return Err(Some(i)),
                Verdict::Reject | Verdict::SilentDrop => {
                    // A refused request (`dreq`) of the frontend.
                    crate::proxy::count_denied_req(&fe.http, None);
                    return Ok(Err(v));
                }
                // `switch-mode http`: HTTP from here, the backend chosen
                // on the request.
                Verdict::Upgrade(proto) => {
                    return Ok(Ok(Route::Http {
                        backend: None,
                        proto,
                    }))
                }
                Verdict::Accept | Verdict::Continue | Verdict::Close => {}
            }
            let moved: Option<crate::l4rules::Addrs> = addrs.get();
            let moved_dst = move || moved.and_then(|a| a.dst);
            let sctx = match moved {
                Some(a) => crate::sample::Ctx {
                    src: a.src,
                    dst: &moved_dst,
                    ..*sctx
                },
                None => *sctx,
            };
            let Some(bi) = fe.choose_backend(&sctx) else {
                return Ok(Err(Verdict::Reject));
            };
            let be = &fe.backends[bi];
            if !be.l4.tcp_mode {
                // An HTTP backend: the stream becomes HTTP, the backend's
                // rules run on the request (HAProxy's implicit upgrade).
                return Ok(Ok(Route::Http {
                    backend: Some(bi),
                    proto: None,
                }));
            }
            let sctx = crate::sample::Ctx {
                be: Some(&be.name),
                ..sctx
            };
            // A backend's own content rules run on the same bytes, once.
            may_change.set(false);
            let v = run_rules_addrs(
                &be.l4.content_rules,
                0,
                &be.matcher,
                &sctx,
                false,
                None,
                &mut xp,
                Some(&addrs),
            );
            if matches!(v, Verdict::Reject | Verdict::SilentDrop) {
                // HAProxy 2.6 counts the frontend's `dreq`, and for a
                // silent-drop the assigned backend's too.
                let chosen = (v == Verdict::SilentDrop).then_some(&**be);
                crate::proxy::count_denied_req(&fe.http, chosen);
                return Ok(Err(v));
            }
            if let BackendKind::Servers(sr) = &be.kind {
                // `use-server` comes before `stick match`.
                use_srv.set(sr.use_server(&be.matcher, &sctx));
                if !be.stick.is_empty() {
                    let farm = &sr.farm;
                    let force = sr.force_persist(&be.matcher, &sctx);
                    let persist = (sr.persist || force).then_some(force);
                    self.stk
                        .stick_request(&be.stick, &be.matcher, &sctx, &farm.servers, persist);
                }
            }
            Ok(Ok(Route::Backend(bi)))
        });
        self.use_srv = use_srv.get();
        if let Some(a) = addrs.get() {
            self.peer = a.src;
            self.dst = a.dst;
        }
        match r {
            Err(Some(i)) => {
                self.content_pos = i;
                None
            }
            Err(None) => Some(Err(Verdict::Reject)),
            Ok(v) => Some(v),
        }
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
        };
        f(&sctx)
    }

    /// Routes to backend `bi` and asks for a server.
    fn start_backend(&mut self, ctx: &mut Ctx, bi: usize) {
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

    fn pick(&mut self, ctx: &mut Ctx) {
        let (Some(farm), Some(me)) = (self.farm.clone(), self.me) else {
            return;
        };
        let input = LbInput {
            src: Some(self.peer.ip()),
            uri: b"",
            hdr: None,
            post: None,
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

    fn use_server(&mut self, ctx: &mut Ctx, s: Arc<ServerRt>) {
        self.t_served = Some(ctx.now());
        self.waiter = None;
        s.counters.note_session(ctx.now_ns());
        self.attempt_noted = true;
        self.sess.target.store(s.uid, Ordering::Relaxed);
        self.server = Some(s);
        self.connect(ctx);
    }

    /// Starts a non-blocking connect to the held server.
    fn connect(&mut self, ctx: &mut Ctx) {
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
            p.srv = super::pipe::Sock {
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
    fn connect_failed(&mut self, ctx: &mut Ctx, timed_out: bool) {
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

    /// Ends the session with a termination code.
    fn end_with(&mut self, code: &[u8; 2]) {
        if self.term == *b"--" {
            self.term = *code;
        }
    }

    fn ended(&self) -> bool {
        self.term != *b"--"
    }

    /// Both directions finished, or a side failed: the code for it.
    fn data_end(&self) -> Option<[u8; 2]> {
        let p = self.pipe.borrow();
        let state = match self.st {
            St::Established => b'D',
            St::Inspect => b'R',
            St::Queued => b'Q',
            _ => b'C',
        };
        if let Some(t) = self.half_term {
            if p.cli.err || p.srv.err || p.cli.done() && p.srv.done() {
                return Some(t);
            }
            return None;
        }
        if p.cli.err {
            return Some([b'C', state]);
        }
        if p.srv.err {
            return Some([b'S', state]);
        }
        if self.st == St::Established && p.cli.done() && p.srv.done() {
            return Some(*b"--");
        }
        None
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
    fn next_timer(&self) -> Tick {
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
    fn on_timer(&mut self, ctx: &mut Ctx) {
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

    /// One run's logic after the I/O: moves the state machine on.
    fn step(&mut self, ctx: &mut Ctx) {
        loop {
            if self.ended() {
                return;
            }
            match self.st {
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
                    if let Some(s) = &self.server {
                        crate::backend::check::observe(s, crate::backend::check::Seen::L4Ok);
                    }
                    self.st = St::Established;
                    // What `ssl_s_*` and `ssl_bc*` read of the server
                    // connection (response rules, the log line).
                    let tls = self
                        .pipe
                        .borrow()
                        .srv
                        .tr
                        .as_ref()
                        .and_then(|t| t.server_tls());
                    if let Ok(mut v) = self.vars.try_borrow_mut() {
                        v.info.srv_tls = tls;
                    }
                    if self.fe.tcp_logs_at_connect() {
                        // `option logasap`, or a format that reads nothing
                        // of the end: the line goes now, with the bytes so
                        // far (none) and the time to the connect.
                        let sent = self.pipe.borrow().srv.bytes_read;
                        self.log(ctx, 0, sent, true);
                        self.logged = true;
                    }
                    self.stick_store();
                    if let Some(be) = self.be.as_ref().filter(|b| !b.l4.res_rules.is_empty()) {
                        // The server's bytes wait for the response rules.
                        let until = ticks::add(ctx.now(), be.l4.res_inspect_delay);
                        self.res_inspect = Some((0, until));
                        self.pipe.borrow_mut().res_hold = true;
                    }
                    {
                        let bits = self.fe.l4.splice | self.be.as_ref().map_or(0, |b| b.l4.splice);
                        let want = |bit: u8| {
                            if bits & bit != 0 {
                                SpliceWant::On
                            } else if bits & crate::config::SPLICE_AUTO != 0 {
                                SpliceWant::Auto
                            } else {
                                SpliceWant::Off
                            }
                        };
                        let mut p = self.pipe.borrow_mut();
                        p.c2s.splice = want(crate::config::SPLICE_REQUEST);
                        p.s2c.splice = want(crate::config::SPLICE_RESPONSE);
                        p.forwarding = true;
                    }
                    // The server side writes what waited in `c2s`, reads
                    // what its connect's edge said is there, passes the
                    // client's FIN; after a connect confirmed by the bytes
                    // sent with it, only what is left of those (its
                    // socket's own edges wake it).
                    let waits = {
                        let p = self.pipe.borrow();
                        !p.sent_early
                            || p.c2s.pending() + p.srv_prefix.len() > 0
                            || p.srv.err
                            || p.cli.eof
                    };
                    if let (true, Some(t)) = (waits, self.srv_task) {
                        ctx.tasklet_wakeup(t);
                    }
                    return;
                }
                St::Turnaround(_) | St::Established => return,
            }
        }
    }

    /// Runs the backend's `tcp-response content` rules on what the server
    /// sent, as HAProxy: each time more arrives, resuming at a rule that
    /// waited, until a rule decides, the server's input ends, the buffer
    /// is full or `tcp-response inspect-delay` expires. No rule deciding
    /// accepts.
    fn inspect_response(&mut self, ctx: &mut Ctx) {
        let Some((from, until)) = self.res_inspect else {
            return;
        };
        let Some(be) = self.be.clone() else { return };
        let now = ctx.now();
        self.stk.set_now(now);
        let (bytes, eof, full) = {
            let p = self.pipe.borrow();
            (p.s2c.data().to_vec(), p.srv.eof, p.s2c.reader_blocked)
        };
        let expired = ticks::is_expired(until, now);
        // As HAProxy: without a delay the rules run at once, on what is
        // there when the server connects (often nothing); with one, on
        // each arrival until it expires.
        let delay = be.l4.res_inspect_delay > 0;
        if bytes.is_empty() && !eof && !expired {
            return;
        }
        let partial = delay && !eof && !full && !expired;
        let may_change = std::cell::Cell::new(false);
        let pay = crate::sample::Payload {
            bytes: &bytes,
            sni: None,
            hello_partial: false,
            partial,
            may_change: &may_change,
            response: true,
        };
        let srv = self.server.as_ref().map(|s| s.name.clone());
        let v = self
            .with_ctx(Some(pay), Some(&be.name), None, |c| {
                let c = crate::sample::Ctx {
                    srv: srv.as_deref(),
                    ..*c
                };
                let mut xp = false;
                Ok(run_rules(
                    &be.l4.res_rules,
                    from,
                    &be.matcher,
                    &c,
                    false,
                    Some(&may_change),
                    &mut xp,
                ))
            })
            .unwrap_or(Verdict::Reject);
        match v {
            Verdict::Wait(i) => {
                self.res_inspect = Some((i, until));
                return;
            }
            Verdict::Reject | Verdict::SilentDrop => {
                self.silent = v == Verdict::SilentDrop;
                if self.silent {
                    // An abort, counted as a refused request (`dreq`) of
                    // the frontend and the backend (HAProxy's silent-drop).
                    crate::proxy::count_denied_req(&self.fe.http, Some(&be));
                } else {
                    // A denied response (`dresp`).
                    crate::proxy::count_denied_resp(&self.fe.http, &be, self.server.as_deref());
                }
                self.end_with(b"PD");
            }
            Verdict::Close => {
                // HAProxy kills the server connection (no lingering) and
                // lets what it sent reach the client.
                let st = {
                    let mut p = self.pipe.borrow_mut();
                    p.srv.used = None;
                    p.srv.tr.take()
                };
                if let Some(st) = st {
                    let _ = ctx.deregister_fd(st.raw_fd());
                    let _ = socket2::SockRef::from(st.tcp())
                        .set_linger(Some(std::time::Duration::ZERO));
                }
                let mut p = self.pipe.borrow_mut();
                p.srv.eof = true;
                p.srv.shut_wr = true;
            }
            // (`switch-mode` is a request rule only.)
            Verdict::Accept | Verdict::Continue | Verdict::Upgrade(_) => {}
        }
        self.res_inspect = None;
        self.pipe.borrow_mut().res_hold = false;
        // The client side writes what waited.
        if let Some(me) = self.me {
            ctx.tasklet_wakeup(me);
        }
    }

    /// The server is connected: the `stick` rules store what they kept
    /// (and the `store-response` patterns) with its id.
    fn stick_store(&mut self) {
        let (Some(be), Some(srv)) = (self.be.clone(), self.server.clone()) else {
            return;
        };
        if be.stick.is_empty() {
            return;
        }
        let _ = self.with_ctx(None, Some(&be.name), None, |c| {
            self.stk.stick_response(&be.stick, &be.matcher, c, &*srv);
            Ok(())
        });
    }

    /// The stream becomes HTTP: the client's connection, what was read
    /// of it, the trackers and variables go to the HTTP side, and this
    /// session ends without a log line (the HTTP side logs each request;
    /// the connection stays counted, the HTTP side releases it).
    fn hand_over(&mut self, ctx: &mut Ctx, backend: Option<usize>, proto: Option<bool>) -> Status {
        let (tr, bytes) = {
            let mut p = self.pipe.borrow_mut();
            (p.cli.tr.take(), p.c2s.data().to_vec())
        };
        let Some(tr) = tr else {
            self.end_with(b"CR");
            return self.close(ctx);
        };
        let _ = ctx.deregister_fd(tr.raw_fd());
        self.pipe.borrow_mut().release(&*self.w);
        self.w.sessions.remove(&self.sess);
        let fresh = crate::table::Stk::new(Arc::clone(&self.fe.tables));
        super::upgrade::start(
            ctx,
            super::upgrade::Handover {
                tr,
                bytes,
                peer: self.peer,
                dst: self.dst,
                fe: Arc::clone(&self.fe),
                w: Rc::clone(&self.w),
                stk: std::mem::replace(&mut self.stk, fresh),
                vars: std::mem::take(&mut self.vars),
                accepted: self.accept_time,
                backend,
                proto,
            },
        );
        Status::Done
    }

    /// Closes everything, logs, and frees the server's slot.
    fn close(&mut self, ctx: &mut Ctx) -> Status {
        if let (Some(w), Some(farm)) = (self.waiter.take(), self.farm.clone()) {
            farm.unqueue(&w);
            if let Some(s) = w.cancel() {
                farm.release(&s);
            }
        }
        {
            let mut p = self.pipe.borrow_mut();
            p.connecting = false;
            p.srv.close();
        }
        if let Some(t) = self.srv_task.take() {
            ctx.kill_tasklet(t);
        }
        let (bytes_in, bytes_out, spliced) = {
            let p = self.pipe.borrow();
            (
                p.cli.bytes_read,
                p.srv.bytes_read,
                p.cli.spliced_out + p.srv.spliced_out,
            )
        };
        if spliced > 0 {
            self.fe
                .http
                .spliced_out
                .fetch_add(spliced, Ordering::Relaxed);
        }
        // What `option contstats` did not count yet (all of it without).
        let (d_in, d_out) = self.count_bytes();
        // The trackers count the session's bytes, then let go.
        self.stk.end(ctx.now(), false, false, d_in, d_out);
        self.note_times(ctx.now());
        // The server's slot goes back before the line is written: HAProxy
        // 2.6 releases it when the server side closes and takes the stream
        // off the backend's count before its final log (process_stream), so
        // a lone session logs `1/1/0/0/0`. (The name stays for the line.)
        if let (Some(s), Some(farm)) = (self.server.as_ref(), self.farm.as_ref()) {
            farm.release(s);
        }
        if !self.silent && !self.logged {
            self.log(ctx, bytes_in, bytes_out, false);
        }
        self.server = None;
        if self.silent {
            let cli = self.pipe.borrow_mut().cli.tr.take();
            if let Some(t) = cli {
                crate::transport::silent_drop(t.tcp());
            }
        } else {
            self.pipe.borrow_mut().cli.close();
        }
        self.pipe.borrow_mut().release(&*self.w);
        self.w.sessions.remove(&self.sess);
        self.w.conn_closed(ctx, &self.fe);
        Status::Done
    }

    /// The backend's and server's time statistics (HAProxy's
    /// stream_update_time_stats for a tcp stream): from the accept, the
    /// wait for a server (rules and queue), the connect, no response
    /// time, the total; no sample when no connection was made.
    /// Adds the bytes that flowed since the last count to the server's,
    /// the frontend's and the backend's counters; returns them (for the
    /// trackers).
    fn count_bytes(&mut self) -> (u64, u64) {
        let (t_in, t_out) = {
            let p = self.pipe.borrow();
            (p.cli.bytes_read, p.srv.bytes_read)
        };
        let d_in = t_in.saturating_sub(self.counted.0);
        let d_out = t_out.saturating_sub(self.counted.1);
        self.counted = (t_in, t_out);
        if d_in == 0 && d_out == 0 {
            return (0, 0);
        }
        if let Some(s) = &self.server {
            s.counters.bytes_in.fetch_add(d_in, Ordering::Relaxed);
            s.counters.bytes_out.fetch_add(d_out, Ordering::Relaxed);
        }
        for c in std::iter::once(&self.fe.http).chain(self.be.as_ref().map(|b| &b.http)) {
            let c = c.local();
            c.bytes_in.fetch_add(d_in, Ordering::Relaxed);
            c.bytes_out.fetch_add(d_out, Ordering::Relaxed);
        }
        (d_in, d_out)
    }

    /// `option contstats`, as HAProxy 2.6: once the backend is known, each
    /// run brings the counters (and the trackers' byte counts) up to date,
    /// and a timer does so every 5 s at least while data flows without
    /// waking the session.
    fn count_continuously(&mut self, now: Tick) {
        if !self.fe.contstats || self.be.is_none() {
            return;
        }
        let (d_in, d_out) = self.count_bytes();
        if d_in != 0 || d_out != 0 {
            self.stk.add_bytes(now, d_in, d_out);
        }
        if self.count_at == ETERNITY || ticks::is_expired(self.count_at, now) {
            self.count_at = ticks::add(now, CONTSTATS_MS);
        }
    }

    fn note_times(&self, now: Tick) {
        let Some(farm) = &self.farm else { return };
        let d = |a: Tick, b: Tick| u64::from(b.wrapping_sub(a)).min(u64::from(u32::MAX >> 1));
        let times = match (self.t_served, self.pipe.borrow().t_conn) {
            (Some(sv), Some(cn)) => {
                Some([d(self.t_accept, sv), d(sv, cn), 0, d(self.t_accept, now)])
            }
            _ => None,
        };
        let server = self.server.as_ref().filter(|s| !s.backend_target);
        for c in server
            .map(|s| &s.counters)
            .into_iter()
            .chain([&farm.counters])
        {
            c.times.note(times);
        }
    }

    /// The session's log line: at its end, or at the connect with `option
    /// logasap` (`asap`: the total time is then the time to the connect,
    /// it and the size written with a `+`, as HAProxy's).
    fn log(&self, ctx: &Ctx, bytes_in: u64, bytes_out: u64, asap: bool) {
        let l4 = &self.fe.l4;
        if !(l4.tcplog || self.fe.log_format.is_some()) || !self.fe.log {
            return;
        }
        if l4.dontlognull && !asap && bytes_in == 0 && bytes_out == 0 && self.term == *b"--" {
            return;
        }
        if !self.w.logging(&self.fe) {
            return;
        }
        // HAProxy's judgement of the session (no status in tcp mode).
        let ab = crate::proxy::abnormal(&self.term, self.retries_done > 0, self.redispatched, None);
        // Then a `set-log-level` of its content rules.
        let Some(level) = crate::rewrite::exchange_log_level(&self.fe, ab, Some(&*self.vars))
        else {
            return;
        };
        let conn = self.pipe.borrow().t_conn;
        let now = conn.filter(|_| asap).unwrap_or_else(|| ctx.now());
        let d = |a: Tick, b: Tick| b.wrapping_sub(a) as i32 as i64;
        // HAProxy 2.6's %Tw is `t_queue - t_request`; a tcp stream has no
        // request date (-1), so it logs the time from the accept to the
        // server slot (the inspection and the queue included), plus one.
        let tw = match self.t_served {
            Some(s) => d(self.t_accept, s) + 1,
            None => -1,
        };
        let tc = match (self.t_served, self.pipe.borrow().t_conn) {
            (Some(s), Some(c)) => d(s, c),
            _ => -1,
        };
        let srv_cur = self
            .server
            .as_ref()
            .map_or(0, |s| s.cur.load(Ordering::Relaxed));
        let be_cur: u32 = self.farm.as_ref().map_or(0, |f| {
            f.servers
                .iter()
                .map(|s| s.cur.load(Ordering::Relaxed))
                .sum()
        });
        // `log-format-sd` renders over the same facts as the line.
        let mut sd = None;
        if self.fe.log_format.is_some() || self.fe.log_format_sd.is_some() {
            // The facts the tcplog line shows, where the format's
            // variables read them.
            if let Ok(mut v) = self.vars.try_borrow_mut() {
                v.info.retries = self.retries_done;
                v.info.redispatched = self.redispatched;
                v.info.be_conns = be_cur;
                v.info.srv_conns = srv_cur;
                v.info.srv_queue = u32::try_from(self.queues.0).unwrap_or(u32::MAX);
                v.info.be_queue = u32::try_from(self.queues.1).unwrap_or(u32::MAX);
                v.info.srv_local = self.pipe.borrow().srv_local;
                // At the session's end HAProxy 2.6 has released the server
                // connection: `ssl_bc*` and `ssl_s_*` find none (at the
                // connect, `option logasap`, they read it).
                if !asap {
                    v.info.srv_tls = None;
                }
            }
            let term = [self.term[0] as char, self.term[1] as char];
            let term: String = term.iter().collect();
            let entry = crate::log::Entry {
                // (The client's transport may be gone by now.)
                client_cert: None,
                client: self.peer,
                accept: self.accept_time,
                frontend: &self.fe.name,
                backend: self.be.as_ref().map_or(self.fe.name.as_str(), |b| &b.name),
                server: (self.server.as_ref().or(self.refused_by.as_ref()))
                    .map_or("<NOSRV>", |s| &s.name),
                tq: -1,
                tw,
                tc,
                tr: -1,
                tt: d(self.t_accept, now),
                status: 0,
                bytes: bytes_out,
                bytes_in,
                txn: false,
                term: &term,
                actconn: self.w.actconn(),
                feconn: self.fe.cur_conns(),
                request_line: b"",
                request_date: None,
                local: self.dst.or_else(|| self.local_addr()),
                tls: self.tls,
                cookie_flags: "--",
                h2: false,
                vars: Some(&*self.vars),
                ncaps: (0, 0),
                fmt: self.fe.log_format.as_ref(),
                asap,
            };
            sd = self.fe.log_sd(&entry);
            if self.fe.log_format.is_some() {
                self.w.log_access_sd(crate::log::format(&entry), sd, level);
                return;
            }
        }
        let line = super::tcplog(&super::TcpLog {
            client: self.peer,
            accept: self.accept_time,
            frontend: &self.fe.name,
            tls: self.tls,
            backend: self.be.as_ref().map_or(self.fe.name.as_str(), |b| &b.name),
            server: (self.server.as_ref().or(self.refused_by.as_ref()))
                .map_or("<NOSRV>", |s| &s.name),
            tw,
            tc,
            tt: d(self.t_accept, now),
            bytes: bytes_out,
            term: self.term,
            actconn: self.w.actconn(),
            feconn: self.fe.cur_conns(),
            beconn: be_cur,
            srvconn: srv_cur,
            retries: self.retries_done,
            redispatched: self.redispatched,
            queues: self.queues,
            asap,
        });
        self.w.log_access_sd(line, sd, level);
    }
}

fn farm_first(f: &Option<Arc<Farm>>) -> Option<Arc<ServerRt>> {
    f.as_ref().and_then(|f| f.servers.first().cloned())
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
