//! The server side's choice and connection: which server the stream goes
//! to (load balancing, persistence, the server the client's previous
//! request used), an idle connection taken from the pool or the client's
//! own place, a new connection opened (PROXY protocol header, SNI, SOCKS4,
//! HTTP/2 to servers), the server socket handed to the server side's
//! tasklet, and a kept connection parked again after the exchange.

use super::*;

impl Stream {
    /// Asks the farm for a server and acts on the answer.
    pub(super) fn pick_server(&mut self, c: &mut H1, ctx: &mut Ctx) {
        let Some(mut up) = self.up.take() else {
            return;
        };
        let me = match c.me {
            Some(m) => m,
            None => {
                self.up = Some(up);
                return;
            }
        };
        let (ck, force, stay, us, prio) = {
            let v = c.vars.try_borrow();
            let i = v.as_ref().map(|v| &v.info);
            (
                i.and_then(|i| i.ck_direct),
                i.is_some_and(|i| i.ck_force),
                i.is_some_and(|i| i.ck_force_rule),
                i.and_then(|i| i.use_srv),
                crate::backend::Prio::of(i.map_or((0, 0), |i| (i.prio_class, i.prio_offset)), ctx),
            )
        };
        let input = LbInput {
            src: up.lb_src,
            uri: &up.lb_uri,
            hdr: up.lb_hdr.as_deref(),
            post: up.lb_post.as_deref(),
            prio,
        };
        // A `use-server` rule's server takes the request even when down
        // (the rule checked it may); else the cookie's, then the stick
        // table's.
        let (prefer, force, stay) = match us {
            Some((i, st)) => (Some(i), true, st),
            None if ck.is_some() => (ck, force, stay),
            None => match c.stk.prefer_force() {
                Some(st) => (c.stk.prefer(), true, st),
                None => (c.stk.prefer(), force, stay),
            },
        };
        let h = || ctx.handle();
        // The last server is no persistence: its full queue refuses.
        let last = prefer
            .is_none()
            .then(|| self.last_server(&up))
            .flatten()
            .filter(|&i| up.avoid != Some(i));
        let pick = match last {
            Some(i) => up.farm.pick_last(i, me, prio, h),
            None => (up.farm).pick_cookie(prefer, force, stay, &input, up.avoid, me, h),
        };
        match pick {
            Pick::Server(s) => {
                self.up = Some(up);
                self.use_server(c, ctx, s);
            }
            Pick::Queued(w) => {
                if let Some(mut v) = c.vars.try_borrow_mut() {
                    let at = if w.on_backend {
                        &mut v.info.be_queue
                    } else {
                        &mut v.info.srv_queue
                    };
                    *at = w.ahead;
                }
                up.state = UpState::Queued;
                up.waiter = Some(w);
                up.t_queued.get_or_insert(ctx.now());
                up.deadline = ticks::add(ctx.now(), up.timeouts.queue);
                self.up = Some(up);
            }
            Pick::NoServer(_why) => {
                self.up = Some(up);
                self.fail(c, ctx, ExchangeError::no_server());
            }
            Pick::QueueFull(s) => {
                up.refused_by = Some(s);
                self.up = Some(up);
                self.fail(c, ctx, ExchangeError::queue_full());
            }
        }
    }

    /// `option prefer-last-server`: the server of a connection kept
    /// private to this client (HAProxy's connections attached to the
    /// session, the oldest first; a shared idle one is not), when in this
    /// backend and usable, and with `max-keep-alive-queue N` when it has
    /// a free slot or fewer than N streams queued (HAProxy's
    /// assign_server).
    pub(super) fn last_server(&self, up: &Upstream) -> Option<usize> {
        let BackendKind::Servers(sr) = &up.be.kind else {
            return None;
        };
        if !sr.prefer_last {
            return None;
        }
        self.attached.iter().find_map(|a| {
            let s = up.farm.servers.get(a.srv.idx)?;
            let room = || match sr.max_ka_queue {
                None => true,
                Some(n) => {
                    up.farm.has_room(s) || s.queue.lock().map_or(0, |q| q.len()) < n as usize
                }
            };
            (s.uid == a.srv.uid && s.usable() && room()).then_some(s.idx)
        })
    }

    /// We hold a slot of `s`: reuse a connection to it or connect.
    pub(super) fn use_server(&mut self, c: &mut H1, ctx: &mut Ctx, s: Arc<ServerRt>) {
        let Some(mut up) = self.up.take() else {
            return;
        };
        let now = ctx.now();
        up.t_served = Some(now);
        up.waiter = None;
        s.counters.note_session(ctx.now_ns());
        up.attempt_noted = true;
        // 1. The connection this client already has to that server: kept
        //    private to it, or parked in the pool where no other request
        //    took it. Still registered with the server side's tasklet:
        //    with no event on it since it went idle, it is known open
        //    without a `peek` (a close or stray bytes would have raised
        //    one).
        let mut sock = None;
        let quiet = !std::mem::take(&mut self.side.borrow_mut().idle_event);
        // A connection that began with a PROXY header is reused only for
        // an exchange whose header would be the same (HAProxy keys such
        // connections by it: another unique id is another connection).
        // The same for an SNI that depends on the exchange.
        // And a connection to the client's destination (a server without
        // a port or an address) only for that destination.
        let dst = client_dst(c, &s);
        let key = (s.opts.send_proxy > 0 || dynamic_sni(&s) || dst.is_some()).then(|| {
            let (pp, sni) = conn_params(c, &s, &up);
            conn_key(&pp, sni.as_deref(), dst)
        });
        let same_pp = key.as_ref().is_none_or(|k| *k == self.pp_sent);
        // A websocket on another protocol than the server's other
        // exchanges (`ws`) takes none of their connections.
        let ws_own = up.ws_accept.is_some() && !s.opts.ws_reuse();
        // The client's private connections to other servers (or with
        // another key) stay attached, up to `max-session-srv-conns`, as
        // HAProxy's session keeps them.
        let mine = self
            .attached
            .iter()
            .position(|a| a.srv.uid == s.uid && key.as_ref().is_none_or(|k| *k == a.key))
            .filter(|_| !ws_own);
        if let Some(mut a) = mine.map(|i| self.attached.remove(i)) {
            if quiet || alive(&mut a.st) {
                self.pp_sent = std::mem::take(&mut a.key);
                sock = Some((a.st, true, None));
            } else {
                self.detach_to_pool(c, ctx, a);
            }
        }
        if !quiet && !self.attached.is_empty() {
            // The event may have been another idle connection's: those
            // left are looked at when reused.
            self.side.borrow_mut().idle_event = true;
        }
        if let Some(p) = self.parked.take() {
            if p.server_uid() == s.uid && same_pp && !ws_own {
                if let Some(mut t) = c.w.shared.idle.unpark(&p) {
                    if quiet || alive(&mut t.st) {
                        sock = Some((t.st, true, None));
                    }
                }
                self.parked = Some(p);
            } else {
                // Its connection to another server stays for others.
                release_parked(c, ctx, p);
            }
        }
        // 2. The idle pool, this thread's connections first, as
        //    `http-reuse` allows: `never` keeps connections private,
        //    `safe` sends a client's first request on a connection of its
        //    own (a failure there could not be told apart), `aggressive`
        //    on a safe one (it carried more than one request), `always`
        //    on a safe one, else any.
        use crate::backend::pool::Want;
        let first = c.requests() <= 1;
        let want = match up.farm.reuse {
            HttpReuse::Never => None,
            _ if ws_own => None,
            _ if !first => Some(Want::Any),
            HttpReuse::Safe => None,
            HttpReuse::Aggressive => Some(Want::Safe),
            HttpReuse::Always => Some(Want::SafeFirst),
        };
        if let (None, Some(want), true) = (&sock, want, shareable(&s)) {
            let quiet = |id, mark| ctx.io_mark(id) == Some(mark);
            // One kept for the same header, SNI and destination only.
            let k = key.as_deref().unwrap_or(&[]);
            if let Some(t) = c.w.take_idle(&s, want, k, &quiet) {
                self.pp_sent = k.to_vec();
                // Registered with another client's tasklet until now (on
                // this thread's poller or another's): moved below.
                sock = Some((t.st, false, t.reg));
            }
        }
        up.name_server(&s);
        up.server = Some(Arc::clone(&s));
        c.sess.target.store(s.uid, Ordering::Relaxed);
        match sock {
            Some((st, registered, owner)) => {
                if !registered {
                    // No system call when the last owner was a tasklet of
                    // this thread (the pool's watcher, another client's
                    // server side), one `EPOLL_CTL_MOD` for the queue's
                    // hand-over of a connection, not a delete and an add.
                    // An idle connection is writable: reading is watched
                    // (writability too when it once blocked or connected
                    // on its edge), writability once a write blocks.
                    let fd = st.raw_fd();
                    let ok = self.side_tasklet(c, ctx).is_some_and(|t| match owner {
                        Some(o) => ctx.move_fd(o.thread(), fd, t, false).is_ok(),
                        None => ctx.register_fd(fd, t, false).is_ok(),
                    });
                    if !ok {
                        if let Some(o) = owner {
                            let _ = ctx.deregister_fd_of(o.thread(), fd);
                        }
                        drop(st);
                        self.up = Some(up);
                        self.connect_new(c, ctx);
                        return;
                    }
                }
                {
                    let mut sd = self.side.borrow_mut();
                    sd.install(st, false, now);
                    sd.used = Some(s.used_conn());
                    sd.obuf.clear();
                    sd.obuf.extend_from_slice(&up.head);
                    sd.opos = 0;
                }
                up.reused = true;
                s.counters.reuses.fetch_add(1, Ordering::Relaxed);
                observe(&s, Seen::L4Ok);
                up.state = UpState::Connected;
                up.t_conn = Some(now);
                up.deadline = ticks::add(now, up.timeouts.server);
                self.up = Some(up);
            }
            None => {
                self.up = Some(up);
                self.connect_new(c, ctx);
            }
        }
    }

    /// Starts a non-blocking connect to the held server.
    pub(super) fn connect_new(&mut self, c: &mut H1, ctx: &mut Ctx) {
        let Some(mut up) = self.up.take() else {
            return;
        };
        let Some(s) = up.server.clone() else {
            self.up = Some(up);
            return;
        };
        if !std::mem::take(&mut up.attempt_noted) {
            // Another attempt on the same server: HAProxy counts each.
            s.counters.note_attempt(ctx.now_ns());
        }
        if s.opts.proto_fcgi {
            self.up = Some(up);
            self.connect_fcgi(c, ctx);
            return;
        }
        let route = s.opts.route(up.ws_accept.is_some());
        if route.h2 {
            self.up = Some(up);
            self.connect_h2(c, ctx);
            return;
        }
        let now = ctx.now();
        let client_dst = client_dst(c, &s);
        s.counters.connects.fetch_add(1, Ordering::Relaxed);
        let (pp, sni) = conn_params(c, &s, &up);
        let first = up.retries_left == up.farm.retries;
        match open_transport(&s, client_dst, sni.as_deref(), first, route.alpn) {
            Ok((mut st, socks)) => {
                let fd = st.raw_fd();
                // To a TLS server the PROXY header goes in clear, before
                // the handshake (HAProxy's order).
                let tls = st.is_tls();
                st.send_first(&pp);
                let early = {
                    let mut sd = self.side.borrow_mut();
                    sd.install(st, true, now);
                    sd.used = Some(s.used_conn());
                    sd.socks = socks;
                    sd.obuf.clear();
                    if !pp.is_empty() && !tls {
                        sd.obuf.extend_from_slice(&pp);
                    }
                    // What it is kept for (empty: any request).
                    self.pp_sent = conn_key(&pp, sni.as_deref(), client_dst);
                    sd.obuf.extend_from_slice(&up.head);
                    sd.opos = 0;
                    // Woken at the connect if more request body follows.
                    sd.want_room = !up.req_left.done();
                    // A loopback server's connect is usually complete when
                    // `connect` returns: the request goes at once and
                    // confirms it, and no writable edge is waited for.
                    if loopback(&s, client_dst) {
                        sd.send_early(now)
                    } else {
                        None
                    }
                };
                if early == Some(false) {
                    // Refused (the socket said so to the send): closed
                    // here, retried as a refused connect is (from the
                    // connecting state, which its turn-around needs).
                    drop(self.side.borrow_mut().take_sock());
                    up.connect_started(now);
                    self.up = Some(up);
                    self.connect_failed(c, ctx, false);
                    return;
                }
                // Readiness an earlier socket left (a retry, a reused
                // connection found closed) must not pass for this one's
                // connect, which a writable edge settles
                // (`backend::connect_outcome`). No other socket of this
                // client is registered now: `use_server` took, closed or
                // deregistered its idle ones. Writability is watched
                // while the connect or a write waits for it.
                let write = early.is_none() || !self.side.borrow().wr;
                let registered = self.side_tasklet(c, ctx).is_some_and(|t| {
                    let _ = ctx.take_events(t);
                    ctx.register_fd(fd, t, write).is_ok()
                });
                if !registered {
                    drop(self.side.borrow_mut().take_sock());
                    self.up = Some(up);
                    self.connect_failed(c, ctx, false);
                    return;
                }
                up.reused = false;
                up.connect_started(now);
                self.up = Some(up);
            }
            Err(_) => {
                self.up = Some(up);
                self.connect_failed(c, ctx, false);
            }
        }
    }

    /// `server ... proto h2`: the exchange goes on a stream of an HTTP/2
    /// connection to the server ([`crate::mux::h2::server`]), one of this
    /// thread's as `http-reuse` allows, else a new one. The request goes
    /// into its pipe as it would go to a socket.
    pub(super) fn connect_h2(&mut self, c: &mut H1, ctx: &mut Ctx) {
        use crate::mux::h2::server::{attach, Hints, Target};
        let Some(up) = self.up.take() else {
            return;
        };
        let Some(s) = up.server.clone() else {
            self.up = Some(up);
            return;
        };
        let websocket = up.ws_accept.is_some();
        let route = s.opts.route(websocket);
        // A websocket on another protocol than the server's other streams:
        // a connection of its own.
        let own = websocket && !s.opts.ws_reuse();
        let reuse = pipe_reuse(c, &up, own);
        // The session: an HTTP/2 client connection for its streams' lanes.
        let owner = c.lane_of.or(c.me);
        // A connection whose SNI depends on the exchange serves only
        // streams that would send the same name.
        let sni = server_sni(c, &s, &up);
        let key = sni.as_deref().map_or(s.uid, |n| {
            use std::hash::{Hash, Hasher};
            let mut h = std::collections::hash_map::DefaultHasher::new();
            n.hash(&mut h);
            s.uid ^ h.finish().rotate_left(17)
        });
        let target = Target {
            key,
            negotiate: route.negotiate,
            // (Still the last attempt's: a replay after a reused
            // connection failed takes a new one.)
            fresh: up.reused,
            limits: c.w.limits,
            counters: Arc::clone(&up.be.h2),
            srv: Arc::clone(&s),
        };
        let r = match self.side_tasklet(c, ctx) {
            Some(t) => {
                let client_dst = client_dst(c, &s);
                let first = up.retries_left == up.farm.retries;
                let hints = Hints {
                    te: up.te_trailers,
                    scheme: up.scheme,
                    h1_client: c.lane_of.is_none(),
                };
                attach(ctx, &target, reuse, owner, t, hints, || {
                    s.counters.connects.fetch_add(1, Ordering::Relaxed);
                    // (`socks4` is refused on an HTTP/2 server.)
                    open_transport(&s, client_dst, sni.as_deref(), first, route.alpn)
                        .map(|(t, _)| t)
                })
            }
            None => Err(io::ErrorKind::NotConnected.into()),
        };
        self.install_pipe(c, ctx, up, &s, r);
    }

    /// `server ... proto fcgi`: the exchange goes on a FastCGI connection
    /// to the server ([`crate::mux::fcgi::server`]), one of this thread's
    /// with room as `http-reuse` allows, else a new one. The request goes
    /// into its pipe as it would go to a socket, with what the backend's
    /// application rules said of it.
    pub(super) fn connect_fcgi(&mut self, c: &mut H1, ctx: &mut Ctx) {
        use crate::mux::fcgi::server::{attach, Target};
        let Some(up) = self.up.take() else {
            return;
        };
        let (Some(s), BackendKind::Servers(sr)) = (up.server.clone(), &up.be.kind) else {
            self.up = Some(up);
            return;
        };
        let Some(app) = sr.fcgi.as_ref() else {
            // (The configuration has one wherever a server speaks FastCGI.)
            self.up = Some(up);
            self.connect_failed(c, ctx, false);
            return;
        };
        let reuse = pipe_reuse(c, &up, false);
        let owner = c.lane_of.or(c.me);
        let target = Target {
            key: s.uid,
            fresh: up.reused,
            limits: c.w.limits,
            srv: Arc::clone(&s),
            app: Arc::clone(&app.app),
            stderr: c.w.shared.fcgi_loggers.get(app.name()).cloned(),
            abort_wait: up.timeouts.server,
        };
        let meta = up.fcgi.as_deref().cloned().unwrap_or_default();
        let r = match self.side_tasklet(c, ctx) {
            Some(t) => {
                let client_dst = client_dst(c, &s);
                let first = up.retries_left == up.farm.retries;
                attach(ctx, &target, reuse, owner, t, meta, || {
                    s.counters.connects.fetch_add(1, Ordering::Relaxed);
                    // (`ssl`, `socks4` are refused on a FastCGI server.)
                    open_transport(&s, client_dst, None, first, None).map(|(t, _)| t)
                })
            }
            None => Err(io::ErrorKind::NotConnected.into()),
        };
        self.install_pipe(c, ctx, up, &s, r);
    }

    /// The exchange took its place on a multiplexed connection (HTTP/2,
    /// FastCGI), `r` (or failed to: a failed connect): its pipe is
    /// installed on the server side, with the request head; connected at
    /// once on a connection that already is.
    fn install_pipe(
        &mut self,
        c: &mut H1,
        ctx: &mut Ctx,
        mut up: Box<Upstream>,
        s: &Arc<ServerRt>,
        r: io::Result<crate::mux::h2::server::Attached>,
    ) {
        let Ok(a) = r else {
            self.up = Some(up);
            self.connect_failed(c, ctx, false);
            return;
        };
        let now = ctx.now();
        up.reused = a.reused;
        if a.reused {
            s.counters.reuses.fetch_add(1, Ordering::Relaxed);
        }
        let mut sd = self.side.borrow_mut();
        sd.install_h2(a, now);
        sd.obuf.clear();
        sd.obuf.extend_from_slice(&up.head);
        sd.opos = 0;
        sd.want_room = !up.req_left.done();
        if sd.connecting {
            up.connect_started(now);
        } else {
            observe(s, Seen::L4Ok);
            up.state = UpState::Connected;
            up.t_conn = Some(now);
            up.deadline = ticks::add(now, up.timeouts.server);
            sd.send();
        }
        sd.wake_mux(ctx);
        drop(sd);
        self.up = Some(up);
    }

    pub(super) fn drop_server_sock(&mut self, ctx: &mut Ctx, up: &Upstream) {
        self.close_server_sock(ctx, up.farm.sock.nolinger);
    }

    /// Closes the exchange's server socket; `reset`: with no FIN first,
    /// the close sending a RST (SO_LINGER 0: `option nolinger`, or an
    /// exchange HAProxy ends that way, such as a client's abort).
    pub(super) fn close_server_sock(&mut self, ctx: &mut Ctx, reset: bool) {
        let st = {
            let mut sd = self.side.borrow_mut();
            let st = sd.take_sock();
            sd.wake_mux(ctx);
            st
        };
        if let Some(mut st) = st {
            // Closed below (its only descriptor): no `EPOLL_CTL_DEL`.
            ctx.forget_fd(st.raw_fd());
            // No FIN first: the close (SO_LINGER 0) sends a RST, as
            // HAProxy's silent shutdown.
            if reset {
                let _ = crate::net::set_nolinger(&socket2::SockRef::from(st.tcp()), true);
            } else {
                let _ = st.shutdown();
            }
        }
    }

    /// The server side's tasklet, created at the first need.
    pub(super) fn side_tasklet(&mut self, c: &mut H1, ctx: &mut Ctx) -> Option<sched::TaskletId> {
        if let Some(t) = self.side_task {
            return Some(t);
        }
        let client = c.me?;
        let t = ctx.new_tasklet_obj(
            "h1_srv",
            crate::mux::h1::server::SideTasklet {
                side: std::rc::Rc::clone(&self.side),
                w: std::rc::Rc::clone(&c.w),
                client,
            },
        );
        self.side_task = Some(t);
        Some(t)
    }

    /// Takes in what the server side's tasklet saw of a connect: the
    /// exchange moves on to `Connected` (or to a retry). Returns whether
    /// the state changed.
    pub(in crate::stream) fn sync_side(&mut self, c: &mut H1, ctx: &mut Ctx) -> bool {
        let Some(up) = self.up.as_mut() else {
            return false;
        };
        if up.state != UpState::Connecting || up.retry_at.is_some() {
            return false;
        }
        let (connecting, failed, t_conn) = {
            let mut sd = self.side.borrow_mut();
            sd.refresh_h2_connect(ctx.now());
            (sd.connecting, sd.connect_failed, sd.t_conn)
        };
        if failed {
            self.connect_failed(c, ctx, false);
            return true;
        }
        if connecting {
            return false;
        }
        let t = t_conn.unwrap_or_else(|| ctx.now());
        if let Some(s) = &up.server {
            observe(s, Seen::L4Ok);
        }
        up.state = UpState::Connected;
        up.t_conn = Some(t);
        up.deadline = ticks::add(t, up.timeouts.server);
        true
    }

    /// A private idle server connection closes (its client leaves or
    /// wants another server).
    pub(in crate::stream) fn detach_to_pool(&mut self, _c: &mut H1, ctx: &mut Ctx, a: Attached) {
        // Closed as `a` drops (its only descriptor): no `EPOLL_CTL_DEL`.
        ctx.forget_fd(a.st.raw_fd());
    }

    /// The client leaves: its idle connections close (the private ones)
    /// or stay in the pool for others.
    pub(in crate::stream) fn release_idle(&mut self, c: &mut H1, ctx: &mut Ctx) {
        for a in std::mem::take(&mut self.attached) {
            self.detach_to_pool(c, ctx, a);
        }
        if let Some(p) = self.parked.take() {
            release_parked(c, ctx, p);
        }
    }
}

/// How an exchange may share a multiplexed connection (HTTP/2, FastCGI):
/// the backend's `http-reuse`, the session's first request telling
/// `safe` apart; `own`: a connection of its own whatever it says.
fn pipe_reuse(c: &H1, up: &Upstream, own: bool) -> crate::mux::h2::server::Reuse {
    use crate::mux::h2::server::Reuse;
    match up.farm.reuse {
        _ if own => Reuse::Never,
        HttpReuse::Never => Reuse::Never,
        HttpReuse::Safe => Reuse::Safe {
            first: c.requests() <= 1,
        },
        HttpReuse::Aggressive => Reuse::Aggressive,
        HttpReuse::Always => Reuse::Always,
    }
}

/// The client lets its parked place go: the connection stays in the pool
/// for others, registered with the thread's idle watcher, unless the look
/// `release` gives one an event reached finds it closed.
fn release_parked(c: &mut H1, ctx: &mut Ctx, p: crate::backend::pool::Parked) {
    let watch = c.w.idle_watch;
    let dead =
        c.w.shared
            .idle
            .release(p, |fd, reg, mark| rehome(ctx, watch, fd, reg, mark));
    if let Some(st) = dead {
        // Closed as it drops: no `EPOLL_CTL_DEL`.
        ctx.forget_fd(st.raw_fd());
    }
}

/// Whether another client's request may take an idle connection to `s`:
/// not one to the backend's own target (`dispatch`, `option transparent`:
/// HAProxy keeps a connection to no server private to its client). One
/// that began with a PROXY header, sent an SNI of the exchange or went to
/// the client's destination is taken only by a request that would do the
/// same (the pool's key, HAProxy's connection hash).
pub(super) fn shareable(s: &ServerRt) -> bool {
    !s.backend_target
}

/// Whether a TLS connection to `s` sends an SNI that depends on the
/// exchange (`sni req.hdr(host)`): such a connection is kept for
/// requests that would send the same name (HAProxy keys connections by
/// their SNI), so not shared with other clients.
pub(super) fn dynamic_sni(s: &ServerRt) -> bool {
    s.tls().is_some_and(|t| t.sni_expr.is_some())
}

/// The name a new TLS connection to `s` sends when its `sni` depends on
/// the exchange, evaluated on the request as it goes to the server (after
/// the rules); `None` when `sni` is constant or gives nothing (then the
/// server's own name goes, as [`crate::backend::ServerTls::sni`] says).
pub(super) fn server_sni(c: &H1, s: &ServerRt, up: &Upstream) -> Option<String> {
    let e = s.tls()?.sni_expr.as_ref()?;
    let mut head = crate::http1::RequestHead::default();
    let parsed = matches!(
        crate::http1::parse_request_into(&up.head, &c.w.limits, &mut head),
        Ok(httparse::Status::Complete(()))
    );
    let tr = &c.tr;
    let dst = dst_of(tr, c.dst.as_deref().copied());
    let ctx = crate::sample::Ctx {
        req: parsed.then_some(crate::sample::Req {
            buf: &up.head,
            head: &head,
            body: b"",
        }),
        be: Some(&up.be.name),
        srv: Some(&s.name),
        ..crate::stream::sample_ctx(tr, c.sess.peer, &c.fe.name, &dst, c.vars.cell(), &c.stk)
    };
    let name = String::from_utf8(e.eval_text(&ctx)?).ok()?;
    (!name.is_empty()).then_some(name)
}

/// What a new connection to `s` would begin with for this exchange: its
/// PROXY header (`send-proxy[-v2]`, else empty) and its SNI when `sni`
/// depends on the exchange.
pub(super) fn conn_params(c: &H1, s: &ServerRt, up: &Upstream) -> (Vec<u8>, Option<String>) {
    let pp = if s.opts.send_proxy > 0 {
        pp_header(c, s)
    } else {
        Vec::new()
    };
    (pp, server_sni(c, s, up))
}

/// What keys a connection for reuse by this client's next request (see
/// `pp_sent`): its PROXY header, the SNI it sent and, for a server that
/// takes the client's destination, that destination (HAProxy's connection
/// hash has the three).
pub(super) fn conn_key(pp: &[u8], sni: Option<&str>, dst: Option<SocketAddr>) -> Vec<u8> {
    let mut k = pp.to_vec();
    if let Some(n) = sni {
        k.push(0);
        k.extend_from_slice(n.as_bytes());
    }
    if let Some(d) = dst {
        k.push(1);
        k.extend_from_slice(d.to_string().as_bytes());
    }
    k
}

/// The PROXY header a connection to `s` begins with for the exchange under
/// way (`send-proxy[-v2]` and `proxy-v2-options`).
pub(super) fn pp_header(c: &H1, s: &ServerRt) -> Vec<u8> {
    // The stream's addresses (after `http-request set-src`/`set-dst`), as
    // HAProxy's PROXY header to a server carries.
    let addrs = c.stream_dst().map(|d| (c.stream_src(), d));
    let v = c.vars.try_borrow();
    crate::proxyproto::server_header(
        s.opts.send_proxy,
        &s.opts.pp_v2,
        addrs,
        match &v {
            Some(v) => v.pp_authority(c.tr.sni()),
            None => c.tr.sni().map(str::as_bytes),
        },
        v.as_ref().and_then(|v| v.info.unique_id.as_deref()),
    )
}

/// The address the client connected to, asked of the socket only for a
/// server without a port of its own (it takes the client's) and for
/// `option transparent` (it goes there).
pub(super) fn client_dst(c: &H1, s: &ServerRt) -> Option<SocketAddr> {
    if s.follows_client_dst() || (s.backend_target && s.addr().is_none()) {
        // The stream's: as an `http-request set-dst[-port]` left it.
        c.stream_dst()
    } else {
        None
    }
}

/// Whether a new connection to `s` goes to a loopback address, whose
/// handshake the kernel completes within `connect` (see
/// [`crate::mux::h1::server::ServerSide::send_early`]).
fn loopback(s: &ServerRt, client_dst: Option<SocketAddr>) -> bool {
    s.opts.unix.is_none() && s.dest(|| client_dst).is_some_and(|a| a.ip().is_loopback())
}

/// A connect to `s` under way, and its SOCKS4 handshake if any.
pub(super) type Opened = (Transport, Option<Box<crate::backend::socks4::Socks4>>);

pub(super) fn open_transport(
    s: &ServerRt,
    client_dst: Option<SocketAddr>,
    sni: Option<&str>,
    first: bool,
    alpn: Option<&str>,
) -> io::Result<Opened> {
    // A server without a port takes the port the client connected to.
    // The request is written as soon as the socket connects.
    let (st, socks) = crate::backend::connect_server_nb(s, || s.dest(|| client_dst), true, first)?;
    let tr = match s.tls() {
        // TLS to the server: the handshake starts once connected (and
        // the SOCKS4 handshake done); the request written meanwhile waits
        // in rustls' buffer.
        Some(t) => {
            let name = t.name_for(sni, s.dest(|| client_dst));
            let config = match alpn {
                // A websocket's own offer (`ws`): the server's settings
                // but for ALPN.
                Some(p) => {
                    let mut c = (*t.config).clone();
                    c.alpn_protocols = vec![p.as_bytes().to_vec()];
                    Arc::new(c)
                }
                None => Arc::clone(&t.config),
            };
            Transport::connect_tls(st, config, &name)?
        }
        None => Transport::plain(st),
    };
    Ok((tr, socks))
}

/// A parked connection whose client leaves: its registration passes from
/// the client's tasklet `reg` to the thread's idle watcher `watch` (no
/// system call), with the watcher's mark when `reg` saw no event since
/// the connection was parked (its `mark`), else none (the taker peeks).
/// Without a watcher the registration is removed.
pub(super) fn rehome(
    ctx: &mut Ctx,
    watch: Option<TaskletId>,
    fd: std::os::fd::RawFd,
    reg: TaskletId,
    mark: Option<u32>,
) -> Option<(TaskletId, Option<u32>)> {
    let quiet = mark.is_some_and(|m| ctx.io_mark(reg) == Some(m));
    if let Some(w) = watch {
        if ctx.move_fd(reg.thread(), fd, w, false).is_ok() {
            return Some((w, if quiet { ctx.io_mark(w) } else { None }));
        }
    }
    let _ = ctx.deregister_fd(fd);
    None
}
