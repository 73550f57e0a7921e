//! Start-up and stop: from a checked configuration to running threads.
//!
//! Order of start-up, each step able to fail with a clear message before
//! any traffic is accepted:
//! 1. compile the configuration ([`crate::proxy::compile`]);
//! 2. bind every listener, one socket per thread (`file:line: cannot bind`);
//! 3. print one `listening on` line per bind and `ebb: ready` (not with `-q`
//!    or `quiet`), so scripts and tests learn the real addresses (port 0
//!    binds an ephemeral port);
//! 4. start the blocking pool, the signal thread and the scheduler threads.
//!
//! Stop: SIGTERM, SIGINT and SIGUSR1 start a graceful stop (listeners
//! close, idle connections close, in-flight requests finish with
//! `Connection: close`); the process exits 0 when the last connection is
//! gone, or when `hard-stop-after` expires (then every thread leaves at
//! once). A second signal during a stop forces the hard stop.

use std::io::{self, Write};
use std::os::fd::AsRawFd;
use std::rc::Rc;
use std::sync::atomic::AtomicU32;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use sched::{ticks, Ctx, Reasons, Runtime, RuntimeHandle, Status, TaskletFn, TaskletId};

use crate::blocking::BlockingPool;
use crate::config::{Config, ConfigError, LogDest, ProfilingMode};
use crate::http1::Limits;
use crate::log::{Ident, Logger, Target};
use crate::proxy::{compile, Compiled, FrontendRt};
use crate::registry::{Live, Process, Sessions};
use crate::tls::TlsAcceptor;
use crate::worker::{Shared, Worker};

/// Accepts per listener wakeup before yielding to other work: HAProxy's
/// `tune.maxaccept` default (64).
const MAX_ACCEPT: usize = 64;

/// Retry delay of a listener paused at a limit when no local connection
/// closes to wake it (the limit may be held by other threads).
const PAUSE_RETRY_MS: u32 = 100;

struct Listener {
    /// Whether accepting stopped at a limit (logged once per pause).
    paused: bool,
    sock: Option<socket2::Socket>,
    fe: Arc<FrontendRt>,
    /// TLS settings of the bind line (`ssl crt ...`).
    tls: Option<Arc<TlsAcceptor>>,
    /// `accept-proxy`, `proto h2` and `name` of the bind line.
    bind: crate::tcp::BindFacts,
    w: Rc<Worker>,
    live: Arc<Live>,
    gen: u64,
}

impl Listener {
    fn spawn_conn(
        &self,
        ctx: &mut Ctx,
        s: socket2::Socket,
        peer: socket2::SockAddr,
        place: Option<crate::listener_stats::Place>,
    ) {
        ctx.count_accepts(1);
        let peer = crate::listener::peer_of(&peer);
        if let Err(e) = crate::tcp::accepted(
            ctx,
            s.into(),
            peer,
            Arc::clone(&self.fe),
            Rc::clone(&self.w),
            self.tls.as_ref().map(|t| t.config()),
            &self.bind,
            place.map(|p| p.accepted()),
        ) {
            self.w.log_error(
                format!(
                    "{}: cannot set up a connection from {peer}: {e}",
                    self.fe.name
                )
                .into_bytes(),
            );
        }
    }

    /// A place on the listener's own counters for the next connection
    /// (`Some(None)`: it keeps none); `None`: its `maxconn` is reached.
    fn place(&self, over: bool) -> Option<Option<crate::listener_stats::Place>> {
        match &self.bind.stats {
            Some(l) => l.reserve(over).map(Some),
            None => Some(None),
        }
    }

    /// Whether the listener's own `maxconn` leaves room.
    fn own_room(&self) -> bool {
        self.bind.stats.as_ref().is_none_or(|l| !l.full())
    }

    /// Notes on the listener's counters whether accepting waits on the
    /// frontend's or the process's limit (`show stat`'s WAITING).
    fn set_limited(&self, on: bool) {
        if let Some(l) = &self.bind.stats {
            l.limited.store(on, std::sync::atomic::Ordering::Relaxed);
        }
    }

    /// Stops accepting at the frontend's or the process's `maxconn`
    /// (logged once per pause; `show stat`'s WAITING meanwhile).
    fn wait_limit(&mut self, ctx: &mut Ctx, me: TaskletId) -> Status {
        if !self.paused {
            let (what, limit) = match self.fe.maxconn {
                Some(m) if self.fe.cur_conns() >= m => ("frontend maxconn", m),
                _ => ("global maxconn", self.w.shared.maxconn),
            };
            self.w.log_error(
                format!(
                    "frontend {}: {what} ({limit}) reached: new connections wait in the backlog",
                    self.fe.name
                )
                .into_bytes(),
            );
        }
        self.set_limited(true);
        self.pause(ctx, me)
    }

    /// Stops accepting until a connection closes (this thread's wake it)
    /// or the retry timer fires (another thread's may have closed).
    fn pause(&mut self, ctx: &mut Ctx, me: TaskletId) -> Status {
        self.paused = true;
        self.w.pause_listener(me);
        ctx.tasklet_set_expire(me, ticks::add(ctx.now(), PAUSE_RETRY_MS));
        Status::Continue
    }
}

/// Accepted sockets are non-blocking and close-on-exec from the start
/// (`accept4`), so a connection costs no `ioctl(FIONBIO)`.
const ACCEPT_FLAGS: i32 = libc::SOCK_NONBLOCK | libc::SOCK_CLOEXEC;

impl TaskletFn for Listener {
    fn run(&mut self, ctx: &mut Ctx, me: TaskletId, why: Reasons) -> Status {
        if why.intersects(Reasons::IO) {
            let _ = ctx.take_events(me);
        }
        let Some(sock) = &self.sock else {
            return Status::Done;
        };
        if why.intersects(Reasons::SIGNAL) || ctx.stopping() {
            // Connections the kernel already completed are taken and
            // served (their first answer closes them): closing the socket
            // with them in its queue would reset them unanswered; past
            // the listener's `maxconn` too.
            while let Ok((s, peer)) = sock.accept4(ACCEPT_FLAGS) {
                let place = self.place(true).flatten();
                self.spawn_conn(ctx, s, peer, place);
            }
            if let Some(sock) = self.sock.take() {
                let _ = ctx.deregister_fd(sock.as_raw_fd());
            }
            self.set_limited(false);
            return Status::Done;
        }
        let g = self.live.gen();
        if g != self.gen {
            if let Some(fe) = self.live.frontend(&self.fe.name) {
                // The new configuration's statistics of this listener.
                self.bind.stats = fe.listeners.get(self.bind.index).cloned();
                self.fe = fe;
            }
            self.gen = g;
        }
        let fd = sock.as_raw_fd();
        // A TCP listener says how many connections wait: exactly those are
        // taken, with no `accept4` that finds the queue empty (the kernel
        // builds and frees a socket for that one; it was a tenth of a new
        // connection's cost). A connection arriving after the count raises
        // a new edge-triggered event. Other sockets (UNIX) are accepted
        // from until `EAGAIN`.
        let queued = crate::sys::accept_queue_len(fd);
        let batch = queued.map_or(MAX_ACCEPT, |q| (q as usize).min(MAX_ACCEPT));
        if batch == 0 && self.paused && self.w.may_accept(&self.fe) && self.own_room() {
            // Resumed with nothing waiting: the pause is over all the same.
            ctx.tasklet_unqueue(me);
            self.paused = false;
            self.set_limited(false);
        }
        for _ in 0..batch {
            // `maxconnrate`, `maxsessrate`: the listener pauses (the
            // connections wait in the backlog) until the rate allows one
            // more, as HAProxy's.
            let now = ctx.now();
            // `rate-limit sessions` of the frontend likewise.
            let rate_wait = self
                .w
                .shared
                .conn_rate
                .wait_ms(now)
                .or_else(|| self.w.shared.sess_rate.wait_ms(now))
                .or_else(|| self.fe.sess_limit.wait_ms(now));
            if let Some(ms) = rate_wait {
                ctx.tasklet_set_expire(me, ticks::add(now, ms));
                return Status::Continue;
            }
            // The bind line's `maxconn` first, then the frontend's and
            // the process's (HAProxy's order in `listener_accept`).
            let Some(place) = self.place(false) else {
                return self.pause(ctx, me);
            };
            if !self.w.may_accept(&self.fe) {
                // Leave the rest in the kernel's backlog until a slot frees.
                return self.wait_limit(ctx, me);
            }
            if self.paused {
                // Woken by a closing connection: the retry is not needed.
                ctx.tasklet_unqueue(me);
                self.paused = false;
                self.set_limited(false);
            }
            let Some(sock) = &self.sock else {
                return Status::Done;
            };
            match sock.accept4(ACCEPT_FLAGS) {
                Ok((s, peer)) => {
                    self.w.shared.conn_rate.note(ctx.now());
                    self.spawn_conn(ctx, s, peer, place)
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Status::Continue,
                Err(e)
                    if matches!(
                        e.kind(),
                        io::ErrorKind::Interrupted | io::ErrorKind::ConnectionAborted
                    ) => {}
                Err(e) => {
                    // Out of descriptors or memory: back off and retry, the
                    // pending connections wait in the backlog.
                    self.w
                        .log_error(format!("{}: accept failed: {e}", self.fe.name).into_bytes());
                    ctx.tasklet_set_expire(me, ticks::add(ctx.now(), PAUSE_RETRY_MS));
                    return Status::Continue;
                }
            }
        }
        if batch > 0 && !self.w.may_accept(&self.fe) {
            // HAProxy's accept loop meets the frontend's or the process's
            // limit before its next accept: the listener waits (WAITING)
            // until a connection closes, even with none queued yet.
            return self.wait_limit(ctx, me);
        }
        if queued.is_some_and(|q| q as usize <= MAX_ACCEPT) {
            // All that were counted are taken.
            return Status::Continue;
        }
        // More may be waiting: come back after others had their turn.
        ctx.tasklet_wakeup(me);
        Status::Continue
    }
}

/// How ebb was asked to run, beyond the configuration.
#[derive(Debug, Default, Clone)]
pub struct RunOptions {
    /// `-d`: debug messages on stderr.
    pub debug: bool,
    /// `-q` (and no `-V`): no message while starting, errors included.
    pub quiet: bool,
    /// The `-f` files, read again on SIGHUP (none: nothing to reload).
    pub files: Vec<std::path::PathBuf>,
    /// `-p FILE`, overriding the configuration's `pidfile`.
    pub pidfile: Option<std::path::PathBuf>,
    /// `-D` or `daemon` (and no `-d`): fork once everything is bound; the
    /// parent writes the pidfile with the child's pid and exits 0.
    pub daemon: bool,
    /// Forked by a master (master-worker mode): no pidfile of its own.
    pub worker: bool,
    /// `-sf`/`-st PID...`: processes to signal once ready, and the signal.
    pub old_pids: Vec<u32>,
    pub old_signal: i32,
    /// Forked by a master: tells it this worker serves (the master's
    /// `mworker` module sets it; the server does not import its caller).
    pub on_ready: Option<fn()>,
    /// Forked by a master: the worker's private CLI socket for it.
    pub worker_cli: Option<fn() -> Option<crate::cli::socket::CliSocket>>,
    /// Forked by a master's reload: an older worker still runs (the
    /// peers wait for it to teach the tables, as with `-sf`).
    pub replaces: bool,
}

/// A configuration error found at start-up (bind, files), formatted.
fn startup_error(loc: &crate::config::Loc, msg: impl std::fmt::Display) -> ConfigError {
    ConfigError {
        loc: loc.clone(),
        message: msg.to_string(),
    }
}

/// Runs ebb until it stops. Returns the process exit code.
pub fn run(cfg: Config, opts: RunOptions) -> i32 {
    let code = serve(cfg, opts);
    // Log lines still queued toward standard output or error go out
    // before the process ends (never waiting long on a stalled reader).
    crate::log::flush_std(std::time::Duration::from_secs(1));
    code
}

fn serve(cfg: Config, opts: RunOptions) -> i32 {
    // Signals are taken by one thread with sigwait; block them first so
    // every thread started below inherits the mask.
    if let Err(e) = crate::sys::block_signals(&crate::sys::SIGNALS) {
        eprintln!("ebb: cannot block signals: {e}");
        return 1;
    }
    let compiled = match compile(&cfg) {
        Ok(c) => {
            if !opts.quiet {
                for w in &c.warnings {
                    eprintln!("ebb: warning: {w}");
                }
            }
            if cfg.global.zero_warning && !c.warnings.is_empty() {
                if !opts.quiet {
                    eprintln!("ebb: {}", crate::proxy::ZERO_WARNING_ABORT);
                }
                return 1;
            }
            crate::sample::vars::run_global(&cfg.global.set_vars);
            crate::sample::patref::install(&cfg.pat_refs);
            c
        }
        Err(errs) => {
            // One write, so a reader of the pipe gets whole lines.
            if !opts.quiet {
                let _ = io::stderr()
                    .lock()
                    .write_all(format!("{}\n", join_errors(errs)).as_bytes());
            }
            return 1;
        }
    };
    crate::drain::configure(cfg.global.close_spread);
    crate::transport::set_max_ssl_conns(cfg.global.maxsslconn);
    crate::backend::check::set_spread(cfg.global.spread_checks.unwrap_or(0));
    crate::backend::check::set_max_spread(cfg.global.max_spread_checks);
    let nbthread = cfg
        .global
        .nbthread
        .as_ref()
        .map(|n| n.value as usize)
        .unwrap_or_else(|| std::thread::available_parallelism().map_or(1, |n| n.get()))
        .clamp(1, 64);

    // Bind everything before anything runs.
    type Bound = (
        socket2::Socket,
        Arc<FrontendRt>,
        Option<Arc<TlsAcceptor>>,
        crate::tcp::BindFacts,
    );
    let mut per_thread: Vec<Vec<Bound>> = (0..nbthread).map(|_| Vec::new()).collect();
    let mut acceptors: Vec<Arc<TlsAcceptor>> = Vec::new();
    let mut lines = Vec::new();
    let fe_cfgs: Vec<_> = cfg.frontends().collect();
    // Inherited sockets first (crate::handover): a reload never closes a
    // socket it keeps.
    let mut binder = crate::handover::Binder::default();
    for (fe_cfg, fe) in fe_cfgs.iter().zip(&compiled.frontends) {
        let mut first_li = 0;
        for b in &fe_cfg.binds {
            let tls = match &b.ssl {
                Some(ssl) => match TlsAcceptor::new(
                    &crate::config::BindSsl {
                        cache_size: cfg.global.ssl_cachesize,
                        ..ssl.clone()
                    },
                    &b.loc,
                ) {
                    Ok(a) => {
                        let a = Arc::new(a);
                        acceptors.push(Arc::clone(&a));
                        Some(a)
                    }
                    Err(e) => {
                        eprintln!("{e}");
                        return 1;
                    }
                },
                None => None,
            };
            let backlog = crate::listener::backlog_of(b, fe_cfg.backlog);
            let facts = crate::tcp::BindFacts {
                accept_proxy: b.accept_proxy,
                netscaler_cip: b.netscaler_cip,
                h2: b.proto_h2,
                h1: b.proto_h1,
                no_upgrade: b.proto_none,
                name: b.name.as_deref().map(Arc::from),
                stats: None,
                index: 0,
            };
            // `option socket-stats`: each address, then each other
            // socket, is the frontend's next listener.
            let mut li = 0;
            let next_facts = |li: &mut usize| {
                let mut f = facts.clone();
                f.index = *li + first_li;
                f.stats = fe.listeners.get(f.index).cloned();
                *li += 1;
                f
            };
            for addr in &b.addrs {
                let facts = next_facts(&mut li);
                let mut warnings = Vec::new();
                let bound = binder
                    .tcp(
                        *addr,
                        nbthread,
                        backlog,
                        &crate::listener::Creation::of(b),
                        &mut warnings,
                    )
                    .and_then(|(socks, real)| {
                        for (i, s) in socks.iter().enumerate() {
                            let r = socket2::SockRef::from(s);
                            // One warning for the line, not one per thread.
                            let mut w = Vec::new();
                            crate::listener::tcp_options(&r, b, backlog, &mut w)?;
                            if i == 0 {
                                warnings.extend(w);
                            }
                            client_sock_opts(&r, fe_cfg, b.ssl.is_some())?;
                        }
                        Ok((socks, real))
                    });
                if !opts.quiet {
                    for w in warnings {
                        eprintln!("ebb: warning: {}: {w}", b.loc);
                    }
                }
                match bound {
                    Ok((socks, real)) => {
                        lines.push(format!("ebb: frontend {} listening on {}", fe.name, real));
                        for (t, s) in socks.into_iter().enumerate() {
                            let t = t % nbthread;
                            per_thread[t].push((
                                s.into(),
                                Arc::clone(fe),
                                tls.clone(),
                                facts.clone(),
                            ));
                        }
                    }
                    Err(e) => {
                        eprintln!(
                            "{}",
                            startup_error(&b.loc, format!("cannot bind {addr}: {e}"))
                        );
                        return 1;
                    }
                }
            }
            for spec in &b.sockets {
                let facts = next_facts(&mut li);
                let perms = crate::listener::UnixPerms {
                    mode: b.unix_mode,
                    uid: b.unix_owner.0,
                    gid: b.unix_owner.1,
                };
                match binder
                    .other(spec, nbthread, backlog, perms)
                    .and_then(|(socks, shown)| {
                        for s in &socks {
                            let r = socket2::SockRef::from(s);
                            // An inherited `fd@` socket may be TCP.
                            if r.local_addr().is_ok_and(|a| a.as_socket().is_some()) {
                                client_sock_opts(&r, fe_cfg, b.ssl.is_some())?;
                            }
                        }
                        Ok((socks, shown))
                    }) {
                    Ok((socks, shown)) => {
                        lines.push(format!("ebb: frontend {} listening on {shown}", fe.name));
                        for (t, s) in socks.into_iter().enumerate() {
                            per_thread[t].push((s, Arc::clone(fe), tls.clone(), facts.clone()));
                        }
                    }
                    Err(e) => {
                        eprintln!("{}", startup_error(&b.loc, format!("cannot bind: {e}")));
                        return 1;
                    }
                }
            }
            first_li += b.addrs.len() + b.sockets.len();
        }
    }

    let (logger, fe_loggers, be_loggers, fcgi_loggers) = match open_loggers(&cfg) {
        Ok(l) => l,
        Err(e) => {
            eprintln!("{e}");
            return 1;
        }
    };
    let maxconn = cfg.global.maxconn.unwrap_or(u32::MAX);
    let strict = cfg.global.strict_limits;
    if let Some(n) = cfg.global.ulimit_n {
        // HAProxy 2.6's default `strict-limits`: a limit that cannot be
        // raised stops the start; without it, a warning and the most the
        // hard limit allows.
        if let Err(e) = crate::sys::set_nofile(n) {
            let got = crate::sys::raise_nofile(n).unwrap_or(0);
            if strict {
                eprintln!("ebb: cannot raise FD limit to {n}, limit is {got} (ulimit-n): {e}");
                return 1;
            }
            if !opts.quiet {
                eprintln!(
                    "ebb: warning: cannot raise FD limit to {n}, limit is {got} (ulimit-n): {e}"
                );
            }
        }
    } else if let Some(m) = cfg.global.maxconn {
        // Two descriptors per connection leave room for files and logs.
        let got = crate::sys::raise_nofile(u64::from(m) * 2 + 64).unwrap_or(0);
        // HAProxy's own count: two per connection, the listeners, a
        // poller and a wake-up pipe per thread; short of that, HAProxy
        // 2.6 does not start under `strict-limits`.
        let listeners: usize = cfg.frontends().map(|f| f.binds.len()).sum();
        let need = u64::from(m) * 2 + listeners as u64 + 3 * nbthread as u64;
        if got < need {
            if strict {
                eprintln!("ebb: cannot raise FD limit to {need}, limit is {got} (maxconn {m})");
                return 1;
            }
            if !opts.quiet {
                eprintln!(
                    "ebb: warning: cannot raise FD limit to {need}, limit is {got} (maxconn {m})"
                );
            }
        }
    } else {
        let _ = crate::sys::raise_nofile(1 << 20);
    }
    let be_loggers = Arc::new(be_loggers);
    let shared = Arc::new(Shared {
        be_loggers: Arc::clone(&be_loggers),
        fcgi_loggers,
        actconn: AtomicU32::new(0),
        maxconn,
        conn_rate: crate::rate::RateLimit::new(cfg.global.max_conn_rate),
        sess_rate: crate::rate::RateLimit::new(cfg.global.max_sess_rate),
        logger,
        fe_loggers,
        errors_to_stderr: true,
        debug: opts.debug,
        idle: crate::backend::pool::IdlePools::new(nbthread, cfg.global.idle_pool_shared),
    });

    // The CLI sockets are bound before `ready`, so a script may use them
    // as soon as it reads that line.
    let mut cli_socks = Vec::new();
    for s in &cfg.global.stats_sockets {
        match crate::cli::socket::bind(s) {
            Ok(c) => {
                // Handed over by `_getsocks` with the listeners.
                let _ = crate::handover::remember_cli(&s.path, &c.listener);
                cli_socks.push(c)
            }
            Err(e) => {
                eprintln!(
                    "{}",
                    startup_error(&s.loc, format!("cannot bind stats socket {}: {e}", s.path))
                );
                return 1;
            }
        }
    }
    // The peers sections' local addresses, bound before `ready` too.
    let peers_bound = match crate::peers::bind(crate::peers::build(&cfg, &compiled.tables)) {
        Ok(b) => b,
        Err(e) => {
            eprintln!("ebb: {e}");
            return 1;
        }
    };
    for b in &peers_bound {
        if let Some(a) = b.local_addr() {
            lines.push(format!("ebb: peers {} listening on {a}", b.name()));
        }
    }
    let peers_bound = Mutex::new(Some(peers_bound));
    let old_process = !opts.old_pids.is_empty() || opts.replaces;
    // Inherited sockets no line took: binds a reload removed.
    crate::handover::finish();
    let cli_paths: Vec<_> = cli_socks.iter().filter_map(|c| c.path.clone()).collect();
    let cli_timeout = cfg
        .global
        .stats_timeout
        .map_or(crate::cli::socket::DEFAULT_TIMEOUT_MS, |d| {
            d.as_millis().min(u128::from(u32::MAX / 2)) as u32
        });
    let pidfile = opts
        .pidfile
        .clone()
        .or_else(|| cfg.global.pidfile.as_ref().map(|p| p.value.clone()))
        // A worker's pidfile is its master's.
        .filter(|_| !opts.worker);
    // `daemon`/-D: fork now that every socket is bound (so bind errors
    // still reach the terminal and the exit status); the parent writes the
    // child's pid and leaves. No thread runs yet, as fork requires.
    let mut pid_to_write = Some(crate::sys::pid());
    if opts.daemon {
        match crate::sys::fork() {
            Ok(Some(child)) => pid_to_write = Some(child),
            Ok(None) => {
                pid_to_write = None;
                let _ = crate::sys::setsid();
                // Detached: as HAProxy in daemon mode, no terminal and no
                // caller's pipe stays attached (`log stdout` goes nowhere).
                if let Err(e) = crate::sys::stdio_to_devnull() {
                    eprintln!("ebb: cannot detach from the terminal: {e}");
                    return 1;
                }
            }
            Err(e) => {
                eprintln!("ebb: cannot fork to run in the background: {e}");
                return 1;
            }
        }
    }
    if let (Some(p), Some(pid)) = (&pidfile, pid_to_write) {
        if let Err(e) = std::fs::write(p, format!("{pid}\n")) {
            eprintln!("ebb: cannot write pidfile {}: {e}", p.display());
            return 1;
        }
    }
    if opts.daemon && pid_to_write.is_some() {
        // The parent: tell the caller where ebb listens, then leave.
        let mut out = io::stdout().lock();
        for l in &lines {
            let _ = writeln!(out, "{l}");
        }
        let _ = out.flush();
        return 0;
    }
    notify_connect();
    if let Err(e) = enter_jail(&cfg.global) {
        eprintln!("{e}");
        return 1;
    }
    crate::ring::start_forwarders();
    if cfg.global.set_dumpable {
        // HAProxy: each failure stops the start under `strict-limits`
        // (its default), else it is a warning and the process goes on.
        let failed = crate::sys::make_dumpable();
        if strict && !failed.is_empty() {
            for w in &failed {
                eprintln!("ebb: set-dumpable: {w}");
            }
            return 1;
        }
        for w in failed {
            if !opts.quiet {
                eprintln!("ebb: warning: set-dumpable: {w}");
            }
        }
    }
    if !cfg.global.insecure_setuid {
        // HAProxy's workers: no privilege gained by `execve` from here
        // on, for every thread started after (the scheduler's, the
        // checks' pool, which runs external checks); a failure is a
        // warning.
        if let Err(e) = crate::sys::no_new_privs() {
            if !opts.quiet {
                eprintln!(
                    "ebb: warning: failed to disable setuid ({e}); you can silence this warning by adding 'insecure-setuid-wanted' in the 'global' section"
                );
            }
        }
    }

    let mut sc = sched::Config::new(nbthread);
    sc.runqueue_depth = cfg.global.runqueue_depth;
    sc.low_latency = cfg.global.low_latency;
    sc.scope_lookups = cfg.global.scope_lookups;
    sc.profiling = match cfg.global.profiling_tasks {
        ProfilingMode::On => sched::ProfilingMode::On,
        ProfilingMode::Auto => sched::ProfilingMode::Auto,
        ProfilingMode::Off => sched::ProfilingMode::Off,
    };
    let rt = match Runtime::new(sc) {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("ebb: cannot start the scheduler: {e}");
            return 1;
        }
    };
    let pool = match BlockingPool::new(nbthread.clamp(2, 8), 4096) {
        Ok(p) => p,
        Err(e) => {
            eprintln!("ebb: cannot start the blocking pool: {e}");
            return 1;
        }
    };
    let compiled = Arc::new(compiled);
    let live = Arc::new(Live::new(Arc::clone(&compiled)));
    let reload = Reload {
        acceptors: acceptors.clone(),
        files: opts.files.clone(),
        binds: bind_signature(&cfg),
        process: process_signature(&cfg),
        live: Arc::clone(&live),
        checks: (
            pool.submitter(),
            Arc::new(|_b: &str, _lv: Option<u8>, _l: String| {}),
        ),
        handle: rt.handle(),
    };
    // Health checks run on their own small pool, so a silent server never
    // delays a file lookup.
    let check_pool = match BlockingPool::new(2, 1024) {
        Ok(p) => p,
        Err(e) => {
            eprintln!("ebb: cannot start the check pool: {e}");
            return 1;
        }
    };
    let check_log: CheckLog = {
        let shared = Arc::clone(&shared);
        Arc::new(move |backend: &str, at: Option<u8>, line: String| {
            // HAProxy's levels: a server going down is an alert, the rest
            // (coming up, `log-health-checks` lines) notices, unless the
            // event says otherwise.
            let level = if let Some(l) = at {
                l
            } else if line.contains(" has no server available!") {
                crate::log::LOG_EMERG
            } else if line.contains(" is DOWN") || line.contains(" is going DOWN") {
                crate::log::LOG_ALERT
            } else {
                crate::log::LOG_NOTICE
            };
            match be_loggers.get(backend) {
                Some(l) if !l.is_empty() => l.send(level, line.as_bytes()),
                // No target for this backend: the operator still sees it.
                _ if shared.logger.is_empty() => {
                    let _ = io::stderr()
                        .lock()
                        .write_all(format!("ebb: {line}\n").as_bytes());
                }
                _ => {}
            }
        })
    };
    start_checks(&compiled, &check_pool.submitter(), &rt.handle(), &check_log);
    let reload = Reload {
        checks: (check_pool.submitter(), Arc::clone(&check_log)),
        ..reload
    };
    spawn_signal_thread(
        rt.handle(),
        cfg.global.hard_stop_after,
        cfg.global.grace,
        opts.debug,
        reload,
    );

    if !opts.quiet {
        // `-q` / `quiet`: no start-up message either.
        let mut out = io::stdout().lock();
        for l in &lines {
            let _ = writeln!(out, "{l}");
        }
        let _ = writeln!(out, "ebb: ready ({nbthread} threads)");
        let _ = out.flush();
    }
    // The master (or -sf/-st's old processes) hears that this process
    // serves once every scheduler thread polls its listeners, not before
    // the threads start: the old worker keeps accepting until then, so no
    // connection waits in the backlog for a thread that has yet to start.
    let starting = std::sync::atomic::AtomicUsize::new(nbthread);
    let serving = || {
        if let Some(ready) = opts.on_ready {
            ready();
        }
        if !opts.old_pids.is_empty() {
            // -sf / -st: the old processes go once this one serves.
            crate::handover::signal_old(&opts.old_pids, opts.old_signal);
        }
        sd_notify(&format!("READY=1\nMAINPID={}", crate::sys::pid()));
    };

    let sessions = Arc::new(Sessions::new(nbthread));
    let process = Arc::new(Process {
        start: std::time::SystemTime::now(),
        pid: crate::sys::pid(),
        nbthread,
        sessions: Arc::clone(&sessions),
        shared: Arc::clone(&shared),
        live: Arc::clone(&live),
        handle: rt.handle(),
    });
    Process::set_global(&process);
    // `on-marked-down` / `on-marked-up`: a server's state change ends the
    // sessions on it (or on the backup servers) through the registry.
    {
        let (sessions, handle) = (Arc::clone(&sessions), rt.handle());
        crate::backend::set_session_killer(Box::new(move |uids, why| {
            sessions.end_on_servers(uids, why, &handle);
        }));
    }
    // The state fetches (`fe_conn`, `nbsrv`, `srv_is_up`...) and
    // `fe_defbe`: read from the configuration in force.
    let counts_live = Arc::clone(&live);
    crate::sample::set_counts(Box::new(move |what, proxy, server| {
        crate::proxy::state::count(&counts_live.compiled(), what, proxy, server)
    }));
    let defbe_live = Arc::clone(&live);
    crate::sample::set_default_backend(Box::new(move |fe| {
        crate::proxy::state::default_backend(&defbe_live.compiled(), fe)
    }));
    // The `unique-id` fetch: the exchange's frontend's format, from the
    // configuration in force.
    let uid_live = Arc::clone(&live);
    crate::sample::set_unique_id(Box::new(move |fe, ctx| {
        let c = uid_live.compiled();
        let f = c.frontends.iter().find(|f| f.name == fe)?;
        let fmt = f.txn.unique_id.as_ref()?;
        let mut v = Vec::new();
        fmt.render(ctx, &mut v);
        Some(v)
    }));
    // `fcgi.docroot`, `fcgi.index`: the backend's application, from the
    // configuration in force.
    let fcgi_live = Arc::clone(&live);
    crate::sample::set_fcgi_app(Box::new(move |be| {
        let c = fcgi_live.compiled();
        let b = c.backends.iter().find(|b| b.name == be)?;
        let crate::proxy::BackendKind::Servers(sr) = &b.kind else {
            return None;
        };
        let f = sr.fcgi.as_ref()?;
        Some((f.docroot().to_vec(), f.index().map(<[u8]>::to_vec)))
    }));
    let cli_socks = Mutex::new(Some(cli_socks));
    let heavy_tasklets = cfg.global.heavy_tasklets;
    let resolvers_cfg = cfg.resolvers.clone();
    let per_thread = Mutex::new(per_thread.into_iter().map(Some).collect::<Vec<_>>());
    let submitter = pool.submitter();
    let bufsize = cfg.global.bufsize.max(1024);
    crate::sample::BUFSIZE.store(
        u32::try_from(bufsize).unwrap_or(u32::MAX),
        std::sync::atomic::Ordering::Relaxed,
    );
    let limits = Limits {
        // HAProxy keeps `tune.maxrewrite` (default 1024, at most half the
        // buffer) free for rewrites; the head gets the rest.
        max_head_bytes: bufsize
            .saturating_sub(cfg.global.maxrewrite.unwrap_or(1024).min(bufsize / 2))
            .max(1024),
        max_drain: cfg.global.drain_max.unwrap_or(Limits::default().max_drain),
        // `tune.http.maxhdr` counts the start line.
        max_headers: cfg
            .global
            .max_hdr
            .map_or(Limits::default().max_headers, |n| n - 1),
        buf_size: bufsize,
        ..Limits::default()
    };
    // `cpu-map`: the process's CPUs for the threads started from here on,
    // then each scheduler thread's own.
    let cpu_map = cfg.global.cpu_map.clone();
    if let Some(set) = cpu_map.as_ref().and_then(|m| m.for_process()) {
        if let Err(e) = crate::sys::bind_thread_to_cpus(&set) {
            eprintln!("ebb: cpu-map: cannot bind the process to its CPUs: {e}");
        }
    }
    let res = rt.run(|ctx: &mut Ctx| {
        if let Some(set) = cpu_map.as_ref().and_then(|m| m.for_thread(ctx.thread_id())) {
            if let Err(e) = crate::sys::bind_thread_to_cpus(&set) {
                eprintln!(
                    "ebb: cpu-map: cannot bind thread {} to its CPUs: {e}",
                    ctx.thread_id() + 1
                );
            }
        }
        let mine = per_thread
            .lock()
            .ok()
            .and_then(|mut v| v.get_mut(ctx.thread_id()).and_then(Option::take))
            .unwrap_or_default();
        let mut wk = Worker::new(
            bufsize,
            submitter.clone(),
            limits,
            Arc::clone(&shared),
            Arc::clone(&sessions),
        );
        wk.heavy_enabled = heavy_tasklets;
        wk.thread = ctx.thread_id();
        // A server connection a leaving client left in the idle pool stays
        // registered, with this tasklet (no `epoll_ctl`, as HAProxy's idle
        // connections stay subscribed). The poller tells it which fds had
        // an event (a close, stray bytes): it looks at those connections,
        // and a closed one leaves the pool at once, as HAProxy closes an
        // idle connection on its event (it would otherwise count among the
        // server's idle ones, which decide whether the next is kept).
        let pools = Arc::clone(&shared);
        let mut fds = Vec::new();
        let mut dead = Vec::new();
        let watch = ctx.new_tasklet("idle_watch", move |ctx: &mut Ctx, me, _why| {
            let _ = ctx.take_events(me);
            fds.clear();
            let all = !ctx.take_event_fds(me, &mut fds);
            if all || !fds.is_empty() {
                let mark = ctx.io_mark(me);
                pools
                    .idle
                    .check_watched(ctx.thread_id(), me, &fds, all, mark, &mut dead);
                for st in dead.drain(..) {
                    // Closed as it drops: no `EPOLL_CTL_DEL`.
                    ctx.forget_fd(st.raw_fd());
                }
            }
            Status::Continue
        });
        ctx.log_fds(watch);
        wk.idle_watch = Some(watch);
        let w = Rc::new(wk);
        // Idle server connections past their pool-purge-delay are closed
        // once a second.
        let wp = Rc::clone(&w);
        let lv = (ctx.thread_id() == 0).then(|| Arc::clone(&live));
        let purge = ctx.new_task("idle_purge", move |ctx: &mut Ctx, me, _why| {
            if let Some(lv) = &lv {
                // Each server's purge timer (`pool-purge-delay`): which
                // idle connections each thread closes, and the estimate of
                // those it needs, by one thread.
                let now = ctx.now();
                for b in &lv.compiled().backends {
                    if let crate::proxy::BackendKind::Servers(f) = &b.kind {
                        f.farm.servers.iter().for_each(|s| s.purge_timer(now));
                    }
                }
            }
            // (After the timers, which give each thread its share.)
            wp.purge_idle(ctx.now());
            if ctx.stopping() {
                return Status::Done;
            }
            ctx.set_expire(me, ticks::add(ctx.now(), 1000));
            Status::Continue
        });
        ctx.set_expire(purge, ticks::add(ctx.now(), 1000));
        if ctx.thread_id() == 0 {
            // Stick-table expiry: one task on the wait queue, woken at the
            // next entry's expiry (the tables of the running configuration).
            let lv = Arc::clone(&live);
            let exp = ctx.new_task("stktable_expire", move |ctx: &mut Ctx, me, _why| {
                if ctx.stopping() {
                    return Status::Done;
                }
                let now = ctx.now();
                let next = lv.compiled().tables.expire(now);
                // Without an expiring table, look again after a second (a
                // reload may bring one).
                let at = next.unwrap_or_else(|| ticks::add(now, 1000));
                ctx.set_expire(me, if ticks::is_set(at) { at } else { 1 });
                Status::Continue
            });
            ctx.wakeup(exp, Reasons::INIT);
            if let Some(b) = peers_bound.lock().ok().and_then(|mut v| v.take()) {
                let shared = Arc::clone(&shared);
                let log: crate::peers::LogFn = Arc::new(move |line: String| {
                    if shared.logger.is_empty() {
                        let _ = io::stderr()
                            .lock()
                            .write_all(format!("ebb: {line}\n").as_bytes());
                    } else {
                        shared.logger.send(crate::log::LOG_NOTICE, line.as_bytes());
                    }
                });
                crate::peers::start(ctx, b, old_process, log);
            }
            let mut socks = cli_socks.lock().ok().and_then(|mut v| v.take());
            if let (Some(v), Some(w)) = (&mut socks, opts.worker_cli.and_then(|take| take())) {
                // The master CLI's way to this worker (`@1 ...`).
                v.push(w);
            }
            // `resolvers` sections: their tasklets and sockets live here.
            let lv = Arc::clone(&live);
            let farms: crate::resolvers::Farms = Arc::new(move || {
                lv.compiled()
                    .backends
                    .iter()
                    .filter_map(|b| match &b.kind {
                        crate::proxy::BackendKind::Servers(s) => Some(Arc::clone(&s.farm)),
                        _ => None,
                    })
                    .collect()
            });
            let rl = Arc::clone(&check_log);
            let rlog: crate::resolvers::LogFn = Arc::new(move |b: &str, l: String| rl(b, None, l));
            if let Err(e) = crate::resolvers::start(ctx, &resolvers_cfg, farms, rlog) {
                eprintln!("ebb: cannot start the resolvers: {e}");
                ctx.handle().hard_stop();
                return;
            }
            for s in socks.unwrap_or_default() {
                if let Err(e) = crate::cli::socket::start(ctx, s, Arc::clone(&process), cli_timeout)
                {
                    eprintln!("ebb: cannot poll the stats socket: {e}");
                }
            }
        }
        for (sock, fe, tls, bind) in mine {
            let fd = sock.as_raw_fd();
            // Accepted sockets inherit TCP_NODELAY from their listener
            // (Linux copies the option at accept), so no connection pays
            // a `setsockopt` for it. A UNIX socket has no such option.
            let _ = sock.set_tcp_nodelay(true);
            let l = Listener {
                paused: false,
                sock: Some(sock),
                fe,
                tls,
                bind,
                w: Rc::clone(&w),
                live: Arc::clone(&live),
                gen: 0,
            };
            let id = ctx.new_tasklet_obj("listener_accept", l);
            if let Err(e) = ctx.register_fd(fd, id, false) {
                eprintln!("ebb: cannot poll a listener: {e}");
                ctx.handle().hard_stop();
                return;
            }
            ctx.on_stop_tasklet(id);
            ctx.tasklet_wakeup(id);
        }
        if opts.debug {
            // One write: the master and the other workers share stderr.
            let line = format!(
                "ebb: debug: thread {} polls its listeners\n",
                ctx.thread_id() + 1
            );
            let _ = io::stderr().lock().write_all(line.as_bytes());
        }
        if starting.fetch_sub(1, std::sync::atomic::Ordering::AcqRel) == 1 {
            serving();
        }
    });
    drop(pool);
    drop(check_pool);
    if !crate::handover::handed_over() {
        // Sockets passed to a new process (-x) stay its files.
        for p in &cli_paths {
            let _ = std::fs::remove_file(p);
        }
    }
    if let Some(p) = &pidfile {
        // Only our own pid: a new process (-sf) may have written its own.
        let mine = format!("{}\n", crate::sys::pid());
        if std::fs::read_to_string(p).is_ok_and(|c| c == mine) {
            let _ = std::fs::remove_file(p);
        }
    }
    match res {
        Ok(()) => 0,
        Err(e) => {
            eprintln!("ebb: scheduler error: {e}");
            1
        }
    }
}

/// A frontend's options for its client sockets, set on its TCP listeners
/// (Linux copies them to each socket `accept` returns, so no connection
/// pays a system call for them): `option clitcpka` and `option nolinger`,
/// both also cleared on a listener taken from a previous process; and
/// `option tcp-smart-accept`, whose default is HAProxy's automatic smart
/// accept: on a listener of an HTTP frontend or a TLS bind, `TCP_QUICKACK` off, so that the kernel does not
/// acknowledge a new connection's first request on its own but lets the
/// answer carry the ACK (one segment fewer per connection; an answer
/// slower than the delayed-ACK timer, 40 ms, gets its ACK then), and on
/// in every other case (a listener inherited from a process whose
/// frontend was HTTP). `ssl`: the bind line has `ssl`.
fn client_sock_opts(
    s: &socket2::SockRef<'_>,
    fe: &crate::config::Proxy,
    ssl: bool,
) -> io::Result<()> {
    fe.options.clitcpka.apply(s, true)?;
    crate::net::set_nolinger(s, fe.options.nolinger)?;
    let smart_accept = fe
        .options
        .smart_accept
        .unwrap_or(fe.mode == crate::config::ProxyMode::Http || ssl);
    s.set_tcp_quickack(!smart_accept)
}

/// The global log targets, and each frontend's and backend's (its own
/// lines, plus the global ones where it says `log global`), opened. A
/// backend's targets receive its health-check events, as in HAProxy.
type Loggers = std::collections::HashMap<String, Logger>;
/// The FastCGI applications' `log-stderr` targets, by application name.
type AppLoggers = std::collections::HashMap<String, Arc<Logger>>;

fn open_loggers(cfg: &Config) -> Result<(Logger, Loggers, Loggers, AppLoggers), String> {
    crate::ring::install(&cfg.rings);
    let host = cfg.global.log_send_hostname.is_some();
    let open = |t: &crate::config::LogTarget| {
        Target::open(t, host).map_err(|e| {
            let what = match &t.dest {
                LogDest::File(p) | LogDest::Unix(p) => p.display().to_string(),
                LogDest::Udp(a) => a.to_string(),
                LogDest::Stdout => "stdout".into(),
                LogDest::Stderr => "stderr".into(),
                LogDest::Ring(n) => format!("ring@{n}"),
                LogDest::Fd(n) => format!("fd@{n}"),
            };
            startup_error(&t.loc, format!("cannot open log {what}: {e}")).to_string()
        })
    };
    // `log-tag`: the proxy's, else the global one, else the program's
    // name.
    let ident = |tag: Option<&String>| Ident {
        tag: tag
            .or(cfg.global.log_tag.as_ref())
            .cloned()
            .unwrap_or_else(|| Ident::default().tag),
        host: cfg.global.log_send_hostname.clone(),
    };
    let mut global = Vec::new();
    for t in &cfg.global.log {
        global.push(open(t)?);
    }
    let proxy = |p: &crate::config::Proxy| -> Result<Logger, String> {
        let mut v = Vec::new();
        for l in &p.log {
            match l {
                crate::config::ProxyLog::Global => {
                    for t in &cfg.global.log {
                        v.push(open(t)?);
                    }
                }
                crate::config::ProxyLog::Target(t) => v.push(open(t)?),
            }
        }
        Ok(Logger::new(v, ident(p.log_tag.as_ref())))
    };
    let mut per_fe = Loggers::new();
    for f in cfg.frontends() {
        per_fe.insert(f.name.clone(), proxy(f)?);
    }
    let mut per_be = Loggers::new();
    for b in cfg.backends() {
        per_be.insert(b.name.clone(), proxy(b)?);
    }
    // A FastCGI application's error stream: its `log-stderr` targets,
    // tagged with its name (HAProxy's `app_log`).
    let mut fcgi = std::collections::HashMap::new();
    for a in &cfg.fcgi_apps {
        let mut v = Vec::new();
        for l in &a.log_stderr {
            match l {
                crate::config::FcgiLog::Global => {
                    for t in &cfg.global.log {
                        v.push(open(t)?);
                    }
                }
                crate::config::FcgiLog::Target(t) => v.push(open(t)?),
            }
        }
        if !v.is_empty() {
            let id = Ident {
                tag: a.name.clone(),
                host: cfg.global.log_send_hostname.clone(),
            };
            fcgi.insert(a.name.clone(), Arc::new(Logger::new(v, id)));
        }
    }
    Ok((Logger::new(global, ident(None)), per_fe, per_be, fcgi))
}

/// systemd's notification socket (`Type=notify` units), connected before
/// `chroot` so the jail does not hide it; `None` when `$NOTIFY_SOCKET` is
/// unset or unreachable.
static NOTIFY: std::sync::OnceLock<Option<std::os::unix::net::UnixDatagram>> =
    std::sync::OnceLock::new();

fn notify_connect() {
    NOTIFY.get_or_init(|| {
        use std::os::unix::ffi::OsStrExt;
        let path = std::env::var_os("NOTIFY_SOCKET")?;
        let s = std::os::unix::net::UnixDatagram::unbound().ok()?;
        let b = path.as_bytes();
        let r = match b.strip_prefix(b"@") {
            Some(name) => {
                use std::os::linux::net::SocketAddrExt;
                std::os::unix::net::SocketAddr::from_abstract_name(name)
                    .and_then(|a| s.connect_addr(&a))
            }
            None => s.connect(&path),
        };
        r.ok().map(|()| s)
    });
}

/// Tells systemd about a change of state (`READY=1`, `RELOADING=1`,
/// `STOPPING=1`); nothing outside a `Type=notify` unit.
fn sd_notify(msg: &str) {
    if let Some(Some(s)) = NOTIFY.get() {
        let _ = s.send(msg.as_bytes());
    }
}

/// `chroot`, then `group`/`user`: after binding (a port below 1024 needs
/// root), before serving, as HAProxy does.
fn enter_jail(g: &crate::config::Global) -> Result<(), String> {
    if let Some(dir) = &g.chroot {
        std::os::unix::fs::chroot(&dir.value)
            .and_then(|()| std::env::set_current_dir("/"))
            .map_err(|e| {
                startup_error(
                    &dir.loc,
                    format!("cannot chroot to {}: {e}", dir.value.display()),
                )
                .to_string()
            })?;
    }
    crate::sys::drop_privileges(g.uid, g.gid).map_err(|e| {
        format!(
            "ebb: cannot switch to uid {:?} gid {:?} ('user'/'group'): {e}",
            g.uid, g.gid
        )
    })
}

/// What a reload needs: the files to read again, the binds in force (a
/// reload cannot move listeners: that needs a restart) and where to put
/// the new configuration.
struct Reload {
    /// TLS acceptors whose certificate files are read again.
    acceptors: Vec<Arc<TlsAcceptor>>,
    files: Vec<std::path::PathBuf>,
    binds: Vec<BindSignature>,
    /// What is set up once at start (log targets, stats sockets, jail,
    /// user, limits): a change needs a restart.
    process: String,
    live: Arc<Live>,
    checks: (crate::blocking::Submitter, CheckLog),
    handle: RuntimeHandle,
}

/// Where health-check events go: (backend name, message).
type CheckLog = Arc<dyn Fn(&str, Option<u8>, String) + Send + Sync>;

/// Starts the health checks of every server backend.
fn start_checks(
    c: &Compiled,
    pool: &crate::blocking::Submitter,
    handle: &RuntimeHandle,
    log: &CheckLog,
) {
    use crate::backend::check::{first_dates, first_inters};
    // HAProxy spreads the first checks of every server of every proxy:
    // their dates come from all of them, in configuration order.
    let farms: Vec<_> = c
        .backends
        .iter()
        .filter_map(|b| match &b.kind {
            crate::proxy::BackendKind::Servers(s) => Some((b, s, first_inters(&s.farm))),
            _ => None,
        })
        .collect();
    let all: Vec<_> = farms.iter().flat_map(|f| f.2.iter().copied()).collect();
    let mut dates = first_dates(&all).into_iter();
    for (b, s, inters) in &farms {
        let first: Vec<_> = dates.by_ref().take(inters.len()).collect();
        let (f, name) = (Arc::clone(log), b.name.clone());
        let log: crate::backend::check::LogFn =
            Arc::new(move |lv: Option<u8>, l: String| f(&name, lv, l));
        let log = crate::mailers::wrap(log, crate::mailers::Alerts::new(&s.email_alert, handle));
        crate::backend::check::start(
            &s.farm,
            s.probe.clone(),
            s.check_timeout,
            s.check_connect_cap,
            pool,
            handle,
            log,
            s.log_checks,
            &first,
        );
    }
}

/// The settings applied once at start, without their line numbers (a
/// reload that only moves lines is not a change).
fn process_signature(cfg: &Config) -> String {
    let g = &cfg.global;
    let strip = |t: &crate::config::LogTarget| {
        let mut t = t.clone();
        t.loc.line = 0;
        t.loc.file = std::sync::Arc::from("");
        t
    };
    let proxies: Vec<_> = cfg
        .proxies
        .iter()
        .map(|p| {
            let logs: Vec<_> = p
                .log
                .iter()
                .map(|l| match l {
                    crate::config::ProxyLog::Global => None,
                    crate::config::ProxyLog::Target(t) => Some(strip(t)),
                })
                .collect();
            (p.name.clone(), p.kind.name(), logs, p.log_tag.clone())
        })
        .collect();
    let sockets: Vec<_> = g
        .stats_sockets
        .iter()
        .map(|s| (s.path.clone(), s.mode, s.level, s.nice))
        .collect();
    format!(
        "{:?}",
        (
            g.log.iter().map(strip).collect::<Vec<_>>(),
            proxies,
            sockets,
            g.chroot.as_ref().map(|c| c.value.clone()),
            (g.uid, g.gid, g.daemon, g.ulimit_n),
            (&g.log_tag, &g.log_send_hostname),
            cfg.resolvers
                .iter()
                .map(|r| {
                    let mut r = r.clone();
                    r.loc.line = 0;
                    r
                })
                .collect::<Vec<_>>(),
            peers_signature(cfg),
            // The rings, without line numbers (a ring's messages and its
            // forwarders live as long as the process).
            cfg.rings
                .iter()
                .map(|r| {
                    let mut r = r.clone();
                    r.loc.line = 0;
                    for s in &mut r.servers {
                        s.loc.line = 0;
                    }
                    r
                })
                .collect::<Vec<_>>(),
        )
    )
}

/// The peers sections and the tables shared with peers, without line
/// numbers: the peers runtime keeps them from the start.
fn peers_signature(cfg: &Config) -> String {
    let sections: Vec<_> = cfg
        .peers
        .iter()
        .map(|s| {
            let peers: Vec<_> = s.peers.iter().map(|p| (&p.name, p.addr)).collect();
            (&s.name, s.disabled, peers, s.bind.as_ref().map(|b| b.value))
        })
        .collect();
    let tables: Vec<_> = cfg
        .stick_tables()
        .filter(|t| t.value.peers.is_some())
        .map(|t| &t.value)
        .collect();
    format!("{:?}", (&cfg.local_peer, sections, tables))
}

/// A frontend's name, its TCP addresses and its other sockets.
type BindSignature = (
    String,
    Vec<std::net::SocketAddr>,
    Vec<crate::config::SockSpec>,
);

fn bind_signature(cfg: &Config) -> Vec<BindSignature> {
    cfg.frontends()
        .map(|f| {
            let mut a: Vec<_> = f
                .binds
                .iter()
                .flat_map(|b| b.addrs.iter().copied())
                .collect();
            a.sort();
            let mut o: Vec<_> = f.binds.iter().flat_map(|b| b.sockets.clone()).collect();
            o.sort();
            (f.name.clone(), a, o)
        })
        .collect()
}

impl Reload {
    /// Reads and compiles the files again; swaps the configuration in on
    /// success. On any error the running configuration stays.
    fn run(&self) -> Result<(), String> {
        // Certificates first: a bad file keeps the old certificate.
        let mut cert_errors = Vec::new();
        for a in &self.acceptors {
            if let Err(e) = a.reload() {
                cert_errors.push(e.to_string());
            }
        }
        if !cert_errors.is_empty() {
            return Err(cert_errors.join("\n"));
        }
        if self.files.is_empty() {
            return Err("ebb runs without a configuration file: nothing to reload".into());
        }
        let cfg = crate::config::parse_files(&self.files).map_err(join_errors)?;
        let old = self.live.compiled();
        let compiled =
            crate::proxy::compile_keeping(&cfg, Some(&old.tables)).map_err(join_errors)?;
        if process_signature(&cfg) != self.process {
            return Err(
                "log targets, ring sections, stats sockets, chroot, user, group, daemon, ulimit-n, resolvers sections, peers sections or shared stick tables changed: that needs a restart"
                    .into(),
            );
        }
        if bind_signature(&cfg) != self.binds {
            return Err("frontends or bind lines changed: that needs a restart".into());
        }
        for w in &compiled.warnings {
            eprintln!("ebb: warning: {w}");
        }
        if cfg.global.zero_warning && !compiled.warnings.is_empty() {
            return Err(crate::proxy::ZERO_WARNING_ABORT.into());
        }
        crate::sample::vars::run_global(&cfg.global.set_vars);
        // The files read again by this parse, and the ACL lines' patterns:
        // the CLI's from now on (changes made to the old ones are gone, as
        // with HAProxy's reload).
        crate::sample::patref::install(&cfg.pat_refs);
        crate::backend::check::set_spread(cfg.global.spread_checks.unwrap_or(0));
        crate::transport::set_max_ssl_conns(cfg.global.maxsslconn);
        crate::backend::check::set_max_spread(cfg.global.max_spread_checks);
        start_checks(&compiled, &self.checks.0, &self.handle, &self.checks.1);
        self.live.swap(Arc::new(compiled));
        // The new servers' names: resolved (or served from the cache) now.
        crate::resolvers::kick();
        Ok(())
    }
}

fn join_errors(errs: Vec<ConfigError>) -> String {
    errs.iter()
        .map(|e| e.to_string())
        .collect::<Vec<_>>()
        .join("\n")
}

/// The soft stop proper: listeners close, connections drain (bounded by
/// `hard-stop-after`, counted from here).
fn soft_stop(h: &RuntimeHandle, hard_stop_after: Option<Duration>) {
    crate::drain::begin();
    crate::handover::release();
    h.stop();
    if let Some(d) = hard_stop_after {
        let h2 = h.clone();
        let _ = std::thread::Builder::new()
            .name("ebb-hard-stop".into())
            .spawn(move || {
                std::thread::sleep(d);
                eprintln!("ebb: hard-stop-after expired: hard stop");
                h2.hard_stop();
            });
    }
}

fn spawn_signal_thread(
    h: RuntimeHandle,
    hard_stop_after: Option<Duration>,
    grace: Option<Duration>,
    debug: bool,
    reload: Reload,
) {
    let r = std::thread::Builder::new()
        .name("ebb-signals".into())
        .spawn(move || {
            let mut stopping = false;
            loop {
                let sig = match crate::sys::wait_signal(&crate::sys::SIGNALS) {
                    Ok(s) => s,
                    Err(_) => return,
                };
                if sig == libc::SIGHUP {
                    sd_notify("RELOADING=1");
                    let r = reload.run();
                    sd_notify("READY=1");
                    match r {
                        Ok(()) => eprintln!("ebb: SIGHUP: configuration reloaded"),
                        Err(e) => eprintln!(
                            "ebb: SIGHUP: reload failed, the running configuration stays:\n{e}"
                        ),
                    }
                    continue;
                }
                if stopping {
                    eprintln!("ebb: second stop signal: hard stop");
                    h.hard_stop();
                    return;
                }
                stopping = true;
                if debug {
                    eprintln!("ebb: signal {sig}: graceful stop");
                }
                sd_notify("STOPPING=1");
                crate::drain::announce();
                // `grace` delays the soft stop of SIGUSR1 (HAProxy's
                // soft-stop signal; its SIGTERM and SIGINT stop at once):
                // meanwhile listeners accept and connections keep alive
                // as before, and `hard-stop-after` has not started.
                match grace.filter(|_| sig == libc::SIGUSR1) {
                    Some(g) => {
                        eprintln!("ebb: scheduling a soft-stop in {} ms", g.as_millis());
                        let h2 = h.clone();
                        let r =
                            std::thread::Builder::new()
                                .name("ebb-grace".into())
                                .spawn(move || {
                                    std::thread::sleep(g);
                                    eprintln!(
                                        "ebb: grace period expired, proceeding with soft-stop now"
                                    );
                                    soft_stop(&h2, hard_stop_after);
                                });
                        if r.is_err() {
                            eprintln!("ebb: cannot start the grace timer: stopping now");
                            soft_stop(&h, hard_stop_after);
                        }
                    }
                    None => soft_stop(&h, hard_stop_after),
                }
            }
        });
    if let Err(e) = r {
        eprintln!("ebb: cannot start the signal thread: {e}");
    }
}

/// The configuration used when ebb runs without one: serve `root` on
/// `bind`, log requests to stdout.
pub fn default_config_text(root: &std::path::Path, bind: &str) -> String {
    let root = crate::config::quote(&root.display().to_string());
    let bind = crate::config::quote(bind);
    format!(
        "global\n    log stdout format raw daemon\n\
         defaults\n    mode http\n    log global\n    timeout client 60s\n    timeout http-request 10s\n    timeout http-keep-alive 75s\n\
         frontend web\n    bind {bind}\n    default_backend files\n\
         backend files\n    serve-files {root} listing on\n"
    )
}
