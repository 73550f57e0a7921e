//! Master-worker mode (`-W`, global `master-worker`), as HAProxy's.
//!
//! The master is one small single-threaded process: it binds every
//! listening socket (and `stats socket`), forks a worker that runs the
//! server with those sockets, and waits on a `signalfd`, its master CLI
//! sockets (`-S`) and the readiness pipes of starting workers.
//!
//! Reload (SIGUSR2, SIGHUP, or `reload` on the master CLI): the master
//! re-executes the program file on disk (so a new binary takes over the
//! same way) with the same arguments; the sockets it holds stay open over
//! `exec` ([`crate::handover`]), with its counters and its workers' list in
//! `EBB_MW_STATE`. The new master reads the configuration; kept binds take
//! their socket back, new ones are bound, removed ones closed. It forks a
//! new worker; once that worker says it is ready, every older worker gets
//! SIGUSR1 (graceful stop, bounded by its `hard-stop-after`): the old
//! ones accept until every thread of the new one polls its listeners. A
//! configuration that does not load leaves the running workers alone and
//! counts a failed reload (`show proc`).
//!
//! Stop: SIGTERM, SIGINT or SIGUSR1 to the master is passed to every
//! worker; the master leaves when the last one is gone, with status 130
//! for SIGINT, 0 for SIGTERM and SIGUSR1 (HAProxy's). A current
//! worker that dies on its own takes the master and the others down with
//! its exit status (HAProxy's default).
//!
//! Master CLI (`-S`, the `cli` module): `show proc`, `reload`, and commands passed
//! on to a worker's CLI (`@N CMD`), served on the master's loop without
//! blocking it.

use std::io::{self, Read, Write};
use std::os::fd::{AsRawFd, OwnedFd, RawFd};
use std::os::unix::net::UnixStream;
use std::path::PathBuf;
use std::sync::Mutex;
use std::time::{Duration, Instant, SystemTime};

use socket2::Socket;

use crate::cli::socket::CliSocket;
use crate::config::{CliLevel, Config};
use crate::server::RunOptions;

mod cli;

use cli::{bind_mcli, CliConn, McliSocket, MCLI_MAX_CONNS};

/// Carries the master's counters and workers over a re-exec.
const STATE_ENV: &str = "EBB_MW_STATE";

static READY: Mutex<Option<UnixStream>> = Mutex::new(None);
static WORKER_CLI: Mutex<Option<CliSocket>> = Mutex::new(None);

/// Whether this process is a master re-executed by a reload.
pub fn is_reexec() -> bool {
    std::env::var_os(STATE_ENV).is_some()
}

/// Called by a worker once it serves (every scheduler thread polls its
/// listeners): tells its master, which then stops the older workers.
pub fn worker_ready() {
    let s = READY.lock().unwrap_or_else(|e| e.into_inner()).take();
    if let Some(mut s) = s {
        let _ = s.write_all(b"R");
    }
}

/// The worker's private CLI socket for its master, if forked by one.
pub fn take_worker_cli() -> Option<CliSocket> {
    WORKER_CLI.lock().unwrap_or_else(|e| e.into_inner()).take()
}

/// How the master was started.
pub struct MasterOptions {
    /// The program file and arguments, to re-execute on a reload.
    pub argv: Vec<String>,
    /// `-S` arguments.
    pub mcli: Vec<String>,
    /// Options for the workers (files, debug; pidfile and daemon are the
    /// master's).
    pub run: RunOptions,
}

struct Worker {
    pid: u32,
    /// The master's reload count when it was forked.
    gen: u32,
    started: SystemTime,
    /// Its private CLI socket.
    cli: PathBuf,
    /// Until it is ready: its end of the readiness pipe.
    ready: Option<UnixStream>,
    /// Told to stop (a newer worker took over).
    old: bool,
    /// When it was told to stop (for the master's own `hard-stop-after`
    /// backstop).
    stop_sent: Option<std::time::Instant>,
    killed: bool,
}

struct Master {
    /// `None`: the configuration did not load at a reload (wait mode:
    /// the running workers stay, a later reload tries again).
    cfg: Option<Config>,
    opts: MasterOptions,
    sigfd: OwnedFd,
    mcli: Vec<McliSocket>,
    /// Master CLI connections being read or answered.
    conns: Vec<CliConn>,
    workers: Vec<Worker>,
    reloads: u32,
    failed: u32,
    started: SystemTime,
    rundir: PathBuf,
    seq: u32,
    stopping: Option<i32>,
    exit_code: Option<i32>,
    /// Files the master created (stats sockets, master CLI paths).
    files: Vec<PathBuf>,
    pidfile: Option<PathBuf>,
    /// `program` sections' processes (see [`crate::program`]).
    programs: Vec<crate::program::Prog>,
}

fn secs(t: SystemTime) -> u64 {
    t.duration_since(SystemTime::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

fn from_secs(s: u64) -> SystemTime {
    SystemTime::UNIX_EPOCH + Duration::from_secs(s)
}

/// The program file to re-execute: `argv[0]` made absolute now (the
/// master never changes directory), or found in `PATH`.
fn program(argv0: &str) -> PathBuf {
    if argv0.contains('/') {
        let p = PathBuf::from(argv0);
        if p.is_absolute() {
            return p;
        }
        return std::env::current_dir().map_or(p.clone(), |d| d.join(&p));
    }
    std::env::var_os("PATH")
        .and_then(|path| {
            std::env::split_paths(&path)
                .map(|d| d.join(argv0))
                .find(|p| p.is_file())
        })
        .unwrap_or_else(|| PathBuf::from(argv0))
}

/// Binds what the configuration listens on (kept sockets from the pool),
/// records it for the workers and the next re-exec. Returns the lines to
/// print and the socket files created.
fn bind_all(cfg: &Config, nbthread: usize) -> Result<(Vec<String>, Vec<PathBuf>), String> {
    let mut binder = crate::handover::Binder::default();
    let mut lines = Vec::new();
    let mut files = Vec::new();
    for fe in cfg.frontends() {
        for b in &fe.binds {
            let backlog = crate::listener::backlog_of(b, fe.backlog);
            for addr in &b.addrs {
                // The worker sets the other options (and warns).
                let (_, real) = binder
                    .tcp(
                        *addr,
                        nbthread,
                        backlog,
                        &crate::listener::Creation::of(b),
                        &mut Vec::new(),
                    )
                    .map_err(|e| format!("{}: cannot bind {addr}: {e}", b.loc))?;
                lines.push(format!("frontend {} on {real}", fe.name));
            }
            for spec in &b.sockets {
                let perms = crate::listener::UnixPerms {
                    mode: b.unix_mode,
                    uid: b.unix_owner.0,
                    gid: b.unix_owner.1,
                };
                let (_, shown) = binder
                    .other(spec, nbthread, backlog, perms)
                    .map_err(|e| format!("{}: cannot bind: {e}", b.loc))?;
                lines.push(format!("frontend {} on {shown}", fe.name));
            }
        }
    }
    for s in &cfg.global.stats_sockets {
        let c = crate::cli::socket::bind(s)
            .map_err(|e| format!("{}: cannot bind stats socket {}: {e}", s.loc, s.path))?;
        crate::handover::remember_cli(&s.path, &c.listener)
            .map_err(|e| format!("{}: {e}", s.loc))?;
        files.extend(c.path.clone().or_else(|| unix_path(&s.path)));
    }
    Ok((lines, files))
}

/// The file of a UNIX socket address as written (`unix@PATH` or a path).
fn unix_path(a: &str) -> Option<PathBuf> {
    let p = a.strip_prefix("unix@").unwrap_or(a);
    (p.starts_with('/') || (!p.contains('@') && !p.contains(':'))).then(|| PathBuf::from(p))
}

/// Runs the master until every worker is gone. Returns the exit status.
pub fn run(cfg: Option<Config>, opts: MasterOptions) -> i32 {
    if let Err(e) = crate::sys::block_signals(&crate::sys::MASTER_SIGNALS) {
        eprintln!("ebb: master: cannot block signals: {e}");
        return 1;
    }
    let sigfd = match crate::sys::signalfd(&crate::sys::MASTER_SIGNALS) {
        Ok(f) => f,
        Err(e) => {
            eprintln!("ebb: master: signalfd: {e}");
            return 1;
        }
    };
    let reexec = std::env::var(STATE_ENV).ok();
    std::env::remove_var(STATE_ENV);
    if let Err(e) = crate::handover::adopt_env() {
        eprintln!("ebb: master: inherited sockets: {e}");
    }
    // The workers' private CLI sockets: a directory only we can enter,
    // created afresh (never one found in place), kept over re-execs.
    let rundir = match reexec.as_deref().and_then(|st| st.split(';').nth(5)) {
        Some(d) if !d.is_empty() => PathBuf::from(d),
        _ => match private_dir() {
            Ok(d) => d,
            Err(e) => {
                eprintln!("ebb: master: cannot create its private directory: {e}");
                return 1;
            }
        },
    };
    let mut m = Master {
        pidfile: opts.run.pidfile.clone().or_else(|| {
            cfg.as_ref()
                .and_then(|c| c.global.pidfile.as_ref().map(|p| p.value.clone()))
        }),
        cfg,
        opts,
        sigfd,
        mcli: Vec::new(),
        conns: Vec::new(),
        workers: Vec::new(),
        reloads: 0,
        failed: 0,
        started: SystemTime::now(),
        rundir,
        seq: 0,
        stopping: None,
        exit_code: None,
        files: Vec::new(),
        programs: Vec::new(),
    };
    if let Some(st) = &reexec {
        m.restore(st);
    }
    for a in m.opts.mcli.clone() {
        match bind_mcli(&a) {
            Ok(s) => {
                let _ = crate::handover::remember_cli(&format!("mcli:{a}"), &s.s);
                m.files.extend(s.path.clone());
                m.mcli.push(s);
            }
            Err(e) => {
                eprintln!("ebb: master CLI -S {a}: {e}");
                if reexec.is_none() {
                    return 1;
                }
            }
        }
    }
    if reexec.is_none() && m.cfg.is_none() {
        return 1;
    }
    let bound = match &m.cfg {
        Some(cfg) => bind_all(cfg, nbthread(cfg)),
        None => Err("ebb: master: the configuration did not load".to_string()),
    };
    match bound {
        Ok((_, files)) => {
            m.files.extend(files);
            crate::handover::finish();
        }
        Err(e) => {
            eprintln!("{e}");
            if reexec.is_none() {
                return 1;
            }
            // A reload whose binds fail: the running workers stay, with
            // every socket they use.
            crate::handover::keep_pool();
            m.failed += 1;
            eprintln!("ebb: master: reload failed, the running workers stay");
            return m.serve();
        }
    }
    if reexec.is_none() && m.opts.run.daemon {
        match crate::sys::fork() {
            Ok(Some(child)) => {
                if let Some(p) = &m.pidfile {
                    if let Err(e) = std::fs::write(p, format!("{child}\n")) {
                        eprintln!("ebb: cannot write pidfile {}: {e}", p.display());
                        return 1;
                    }
                }
                return 0;
            }
            Ok(None) => {
                let _ = crate::sys::setsid();
                let _ = crate::sys::stdio_to_devnull();
            }
            Err(e) => {
                eprintln!("ebb: cannot fork to run in the background: {e}");
                return 1;
            }
        }
    } else if let Some(p) = &m.pidfile {
        if let Err(e) = std::fs::write(p, format!("{}\n", crate::sys::pid())) {
            eprintln!("ebb: cannot write pidfile {}: {e}", p.display());
            return 1;
        }
    }
    m.start_programs(reexec.is_some());
    if let Err(e) = m.spawn() {
        eprintln!("ebb: master: cannot start a worker: {e}");
        if reexec.is_none() {
            // Its programs go too; the master leaves once they have.
            m.stopping = Some(libc::SIGTERM);
            m.exit_code = Some(1);
            m.kill_all(libc::SIGTERM);
            return m.serve();
        }
        m.failed += 1;
    }
    m.serve()
}

/// A new 0700 directory under the temporary directory, with a name no
/// one could have prepared (pid and clock); never an existing one.
fn private_dir() -> io::Result<PathBuf> {
    use std::os::unix::fs::DirBuilderExt;
    let mut last = None;
    for i in 0..16u32 {
        let nonce = SystemTime::now()
            .duration_since(SystemTime::UNIX_EPOCH)
            .map_or(0, |d| d.subsec_nanos())
            ^ i.wrapping_mul(0x9E37_79B9);
        let d = std::env::temp_dir().join(format!("ebb-master-{}-{nonce:08x}", crate::sys::pid()));
        match std::fs::DirBuilder::new().mode(0o700).create(&d) {
            Ok(()) => return Ok(d),
            Err(e) => last = Some(e),
        }
    }
    Err(last.unwrap_or_else(|| io::Error::other("no name left")))
}

fn nbthread(cfg: &Config) -> usize {
    cfg.global
        .nbthread
        .as_ref()
        .map(|n| n.value as usize)
        .unwrap_or_else(|| std::thread::available_parallelism().map_or(1, |n| n.get()))
        .clamp(1, 64)
}

impl Master {
    fn restore(&mut self, st: &str) {
        // reloads;failed;started;seq;pid:gen:start:seq:old,...
        let mut it = st.split(';');
        let mut num = || it.next().and_then(|x| x.parse::<u64>().ok()).unwrap_or(0);
        self.reloads = num() as u32 + 1;
        self.failed = num() as u32;
        self.started = from_secs(num());
        self.seq = num() as u32;
        if let Some(ps) = st.split(';').nth(6) {
            self.programs = crate::program::decode(ps);
        }
        if let Some(ws) = st.split(';').nth(4) {
            for w in ws.split(',').filter(|w| !w.is_empty()) {
                let f: Vec<u64> = w.split(':').filter_map(|x| x.parse().ok()).collect();
                if let [pid, gen, start, seq, old] = f[..] {
                    self.workers.push(Worker {
                        pid: pid as u32,
                        gen: gen as u32,
                        started: from_secs(start),
                        cli: self.rundir.join(format!("w{seq}.sock")),
                        ready: None,
                        old: old != 0,
                        stop_sent: (old != 0).then(std::time::Instant::now),
                        killed: false,
                    });
                }
            }
        }
    }

    fn state(&self) -> String {
        let ws: Vec<String> = self
            .workers
            .iter()
            .map(|w| {
                let seq = w
                    .cli
                    .file_stem()
                    .and_then(|s| s.to_str())
                    .and_then(|s| s.strip_prefix('w'))
                    .unwrap_or("0");
                format!(
                    "{}:{}:{}:{}:{}",
                    w.pid,
                    w.gen,
                    secs(w.started),
                    seq,
                    u8::from(w.old)
                )
            })
            .collect();
        format!(
            "{};{};{};{};{};{};{}",
            self.reloads,
            self.failed,
            secs(self.started),
            self.seq,
            ws.join(","),
            self.rundir.display(),
            crate::program::encode(&self.programs)
        )
    }

    /// Starts the configuration's programs. At a reload (`reexec`), every
    /// program a former master started gets SIGUSR1 and is an old one
    /// (`# old programs` in `show proc`, its exit no failure), and only the
    /// programs with `start-on-reload` get a new instance: what HAProxy
    /// 2.6 does (a program without it keeps running if SIGUSR1 leaves it
    /// alone). New instances are listed before the old ones, as HAProxy's.
    fn start_programs(&mut self, reexec: bool) {
        let Some(cfg) = self.cfg.clone() else {
            return;
        };
        let old = std::mem::take(&mut self.programs);
        for c in &cfg.programs {
            if reexec && !c.start_on_reload {
                continue;
            }
            match crate::program::launch(c) {
                Ok(pid) => {
                    if self.opts.run.debug {
                        eprintln!("ebb: master: program '{}' ({pid}) started", c.name);
                    }
                    self.programs.push(crate::program::Prog {
                        name: c.name.clone(),
                        pid,
                        reloads: 0,
                        started: SystemTime::now(),
                        leaving: false,
                    });
                }
                Err(e) => eprintln!("ebb: master: cannot start program '{}': {e}", c.name),
            }
        }
        for mut p in old {
            let _ = crate::sys::kill(p.pid, libc::SIGUSR1);
            p.leaving = true;
            self.programs.push(p);
        }
    }

    /// Forks a worker with the sockets this master holds.
    fn spawn(&mut self) -> io::Result<()> {
        let Some(cfg) = self.cfg.clone() else {
            return Err(io::Error::other("no configuration loaded"));
        };
        let (ready_w, ready_m) = UnixStream::pair()?;
        self.seq += 1;
        let cli_path = self.rundir.join(format!("w{}.sock", self.seq));
        let _ = std::fs::remove_file(&cli_path);
        let cli = std::os::unix::net::UnixListener::bind(&cli_path)?;
        cli.set_nonblocking(true)?;
        match crate::sys::fork()? {
            None => {
                // The worker: none of the master's own descriptors.
                self.mcli.clear();
                self.conns.clear();
                for w in &mut self.workers {
                    w.ready = None;
                }
                drop(ready_m);
                // systemd hears from the master, not from each worker.
                std::env::remove_var("NOTIFY_SOCKET");
                let _ = crate::sys::parent_death_signal(libc::SIGTERM);
                let _ = crate::sys::unblock_signals(&[libc::SIGUSR2, libc::SIGCHLD]);
                crate::handover::bound_to_pool();
                *READY.lock().unwrap_or_else(|e| e.into_inner()) = Some(ready_w);
                *WORKER_CLI.lock().unwrap_or_else(|e| e.into_inner()) = Some(CliSocket {
                    listener: Socket::from(cli),
                    path: None,
                    level: CliLevel::Admin,
                    nice: crate::cli::socket::DEFAULT_NICE,
                    expose_fd: false,
                });
                let opts = RunOptions {
                    worker: true,
                    // A reload: the running worker may teach its peers
                    // tables to this one (HAProxy's local peer).
                    replaces: !self.workers.is_empty(),
                    daemon: false,
                    pidfile: None,
                    on_ready: Some(worker_ready),
                    worker_cli: Some(take_worker_cli),
                    ..self.opts.run.clone()
                };
                let code = crate::server::run(cfg, opts);
                std::process::exit(code);
            }
            Some(pid) => {
                drop(ready_w);
                drop(cli);
                ready_m.set_nonblocking(true)?;
                self.workers.push(Worker {
                    pid,
                    gen: self.reloads,
                    started: SystemTime::now(),
                    cli: cli_path,
                    ready: Some(ready_m),
                    old: false,
                    stop_sent: None,
                    killed: false,
                });
                if self.opts.run.debug {
                    eprintln!("ebb: master: worker {pid} started");
                }
                Ok(())
            }
        }
    }

    fn serve(mut self) -> i32 {
        loop {
            if self.workers.is_empty() && self.programs.is_empty() {
                // `no-exit-on-failure`: HAProxy's master leaves once no
                // process is left, with the first failure's status.
                if let Some(code) = self.exit_code.or(self.no_exit().then_some(0)) {
                    return self.leave(code);
                }
            }
            let now = Instant::now();
            // A client silent or not reading past its deadline is closed.
            self.conns.retain(|c| !c.expired(now));
            let mut fds: Vec<(RawFd, i16)> = vec![(self.sigfd.as_raw_fd(), libc::POLLIN)];
            // At the bound, new clients wait in the listen queue.
            if self.conns.len() < MCLI_MAX_CONNS {
                fds.extend(self.mcli.iter().map(|s| (s.s.as_raw_fd(), libc::POLLIN)));
            }
            let nm = fds.len();
            // By pid: a signal handled below may reap workers first.
            let mut starting = Vec::new();
            for w in &self.workers {
                if let Some(r) = &w.ready {
                    fds.push((r.as_raw_fd(), libc::POLLIN));
                    starting.push(w.pid);
                }
            }
            let nc = fds.len();
            // Two for each client: its socket and its worker's.
            fds.extend(self.conns.iter().flat_map(CliConn::poll_fds));
            let wait = self
                .conns
                .iter()
                .map(|c| c.wait_ms(now))
                .fold(1000, i32::min);
            let ready = match crate::sys::poll_events(&fds, wait) {
                Ok(r) => r,
                Err(e) => {
                    eprintln!("ebb: master: poll: {e}");
                    std::thread::sleep(Duration::from_millis(100));
                    continue;
                }
            };
            if ready[0] {
                while let Ok(Some(sig)) = crate::sys::read_signal(self.sigfd.as_raw_fd()) {
                    self.on_signal(sig);
                }
            }
            for (k, &pid) in starting.iter().enumerate() {
                if ready[nm + k] {
                    self.on_ready(pid);
                }
            }
            let mut reload = false;
            for k in 0..(ready.len() - nc) / 2 {
                let (me, w) = (nc + 2 * k, nc + 2 * k + 1);
                if ready[me] && fds[me].1 == 0 {
                    // Only its hang-up was waited for.
                    self.conns[k].hung_up();
                } else if ready[me] || ready[w] {
                    reload |= self.on_cli(k);
                }
            }
            reload |= self.cli_timers();
            self.conns.retain(|c| !c.done);
            for (i, _) in ready[1..nm].iter().enumerate().filter(|x| *x.1) {
                self.accept_cli(i);
            }
            if reload {
                // The answers before it go out as far as the sockets
                // take them now: the re-exec closes every connection.
                for c in &mut self.conns {
                    let _ = c.flush();
                }
                self.reload();
            }
            self.reap();
            self.backstop();
        }
    }

    /// An old worker still there a second after `hard-stop-after` (its
    /// own timer should have ended it: it is stuck) is killed. Its
    /// `grace` comes first: a SIGUSR1 starts the timer after it.
    fn backstop(&mut self) {
        let Some(cfg) = self.cfg.as_ref() else {
            return;
        };
        let Some(d) = cfg.global.hard_stop_after else {
            return;
        };
        let d = d + cfg.global.grace.unwrap_or_default();
        for w in &mut self.workers {
            if w.killed {
                continue;
            }
            if w.stop_sent
                .is_some_and(|t| t.elapsed() > d + Duration::from_secs(1))
            {
                eprintln!(
                    "ebb: master: worker {} still there after hard-stop-after: killed",
                    w.pid
                );
                let _ = crate::sys::kill(w.pid, libc::SIGKILL);
                w.killed = true;
            }
        }
    }

    fn leave(&self, code: i32) -> i32 {
        for f in &self.files {
            let _ = std::fs::remove_file(f);
        }
        if let Some(p) = &self.pidfile {
            let _ = std::fs::remove_file(p);
        }
        let _ = std::fs::remove_dir_all(&self.rundir);
        code
    }

    fn on_signal(&mut self, sig: i32) {
        match sig {
            libc::SIGCHLD => self.reap(),
            libc::SIGUSR2 | libc::SIGHUP => self.reload(),
            _ => {
                if self.stopping.is_none() {
                    sd_notify("STOPPING=1");
                    self.stopping = Some(sig);
                    // HAProxy 2.6's master leaves with its current
                    // worker's status unless that is 0 or 143: a
                    // SIGTERM ends it with 0, a SIGINT with 130.
                    self.exit_code = Some(if sig == libc::SIGINT { 130 } else { 0 });
                }
                for w in &mut self.workers {
                    let _ = crate::sys::kill(w.pid, sig);
                    w.stop_sent.get_or_insert_with(std::time::Instant::now);
                }
                for p in &self.programs {
                    let _ = crate::sys::kill(p.pid, sig);
                }
            }
        }
    }

    fn reap(&mut self) {
        while let Some((pid, code)) = crate::sys::reap_child() {
            if let Some(i) = self.programs.iter().position(|p| p.pid == pid) {
                self.program_left(i, code);
                continue;
            }
            let Some(i) = self.workers.iter().position(|w| w.pid == pid) else {
                continue;
            };
            let w = self.workers.remove(i);
            let _ = std::fs::remove_file(&w.cli);
            if self.stopping.is_none() && !w.old && self.no_exit() {
                eprintln!("ebb: master: current worker {pid} exited with code {code}");
                self.note_failure(code);
            } else if self.stopping.is_none() && !w.old {
                eprintln!("ebb: master: current worker {pid} exited with code {code}: stopping");
                self.stopping = Some(libc::SIGTERM);
                self.exit_code = Some(code);
                self.kill_all(libc::SIGTERM);
            } else if self.opts.run.debug {
                eprintln!("ebb: master: worker {pid} left (code {code})");
            }
        }
    }

    /// `master-worker no-exit-on-failure` is set.
    fn no_exit(&self) -> bool {
        self.cfg
            .as_ref()
            .is_some_and(|c| c.global.no_exit_on_failure)
    }

    /// Under `no-exit-on-failure`, a current process's status: the first
    /// other than 0 and 143 is the master's when it leaves (HAProxy's).
    fn note_failure(&mut self, code: i32) {
        if code != 0 && code != 143 && self.exit_code.is_none() {
            self.exit_code = Some(code);
        }
    }

    /// Every worker and program gets `sig`.
    fn kill_all(&self, sig: i32) {
        for pid in self.workers.iter().map(|w| w.pid) {
            let _ = crate::sys::kill(pid, sig);
        }
        for pid in self.programs.iter().map(|p| p.pid) {
            let _ = crate::sys::kill(pid, sig);
        }
    }

    /// A program exited. A current one that failed (a status other than
    /// 0, 130 or 143) stops everything with its status, as HAProxy's
    /// exit-on-failure.
    fn program_left(&mut self, i: usize, code: i32) {
        let p = self.programs.remove(i);
        if p.leaving {
            if self.opts.run.debug {
                eprintln!(
                    "ebb: master: former program '{}' ({}) exited with code {code}",
                    p.name, p.pid
                );
            }
            return;
        }
        eprintln!(
            "ebb: master: current program '{}' ({}) exited with code {code}",
            p.name, p.pid
        );
        if self.no_exit() {
            self.note_failure(code);
        } else if ![0, 130, 143].contains(&code) && self.stopping.is_none() {
            eprintln!("ebb: master: exit-on-failure: stopping every process");
            self.stopping = Some(libc::SIGTERM);
            self.exit_code = Some(code);
            self.kill_all(libc::SIGTERM);
        }
    }

    /// A worker wrote on its readiness pipe (or closed it).
    fn on_ready(&mut self, pid: u32) {
        let Some(i) = self.workers.iter().position(|w| w.pid == pid) else {
            return;
        };
        let mut b = [0u8; 1];
        let got = match self.workers[i].ready.as_mut().map(|r| r.read(&mut b)) {
            Some(Ok(1)) => true,
            Some(Err(e)) if e.kind() == io::ErrorKind::WouldBlock => return,
            _ => false,
        };
        self.workers[i].ready = None;
        if !got {
            return;
        }
        sd_notify(&format!("READY=1\nMAINPID={}", crate::sys::pid()));
        let newest = self.workers[i].pid;
        for w in &mut self.workers {
            if w.pid != newest && !w.old {
                w.old = true;
                w.stop_sent = Some(std::time::Instant::now());
                let _ = crate::sys::kill(w.pid, libc::SIGUSR1);
                if self.opts.run.debug {
                    // One write: the workers share stderr.
                    let line = format!(
                        "ebb: master: worker {newest} serves: old worker {} stops\n",
                        w.pid
                    );
                    let _ = io::stderr().lock().write_all(line.as_bytes());
                }
            }
        }
    }

    /// Re-executes the program file with the same arguments.
    fn reload(&mut self) {
        if self.stopping.is_some() {
            return;
        }
        // A worker still starting is treated as started from here on.
        for w in &mut self.workers {
            w.ready = None;
        }
        let env = match crate::handover::export_env() {
            Ok(e) => e,
            Err(e) => {
                eprintln!("ebb: master: reload: cannot pass the sockets on: {e}");
                self.failed += 1;
                return;
            }
        };
        eprintln!("ebb: master: reloading");
        sd_notify("RELOADING=1");
        use std::os::unix::process::CommandExt;
        let prog = program(&self.opts.argv[0]);
        let err = std::process::Command::new(&prog)
            .arg0(&self.opts.argv[0])
            .args(&self.opts.argv[1..])
            .env(crate::handover::ENV, env)
            .env(STATE_ENV, self.state())
            .exec();
        eprintln!(
            "ebb: master: reload: cannot execute {}: {err}",
            prog.display()
        );
        self.failed += 1;
    }
}

/// Tells systemd (`Type=notify` units, `$NOTIFY_SOCKET`) about the
/// master's state; nothing elsewhere.
fn sd_notify(msg: &str) {
    use std::os::unix::ffi::OsStrExt;
    let Some(path) = std::env::var_os("NOTIFY_SOCKET") else {
        return;
    };
    let Ok(s) = std::os::unix::net::UnixDatagram::unbound() else {
        return;
    };
    let b = path.as_bytes();
    let _ = match b.strip_prefix(b"@") {
        Some(name) => {
            use std::os::linux::net::SocketAddrExt;
            std::os::unix::net::SocketAddr::from_abstract_name(name)
                .and_then(|a| s.send_to_addr(msg.as_bytes(), &a))
        }
        None => s.send_to(msg.as_bytes(), &path),
    };
}
