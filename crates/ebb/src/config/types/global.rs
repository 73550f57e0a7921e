//! The `global` section ([`Global`], with the defaults ebb applies when a
//! line is absent) and its `stats socket` lines.

use std::path::PathBuf;
use std::time::Duration;

use crate::loc::Loc;

use super::log::LogTarget;
use super::server::Verify;
use super::Spanned;

/// The `global` section.
#[derive(Clone, Debug)]
pub struct Global {
    /// `localpeer NAME` (`-L` beats it).
    pub localpeer: Option<String>,
    /// `set-var proc.NAME EXPR` and `set-var-fmt proc.NAME FMT`, in order.
    pub set_vars: Vec<crate::sample::VarAction>,
    /// `setenv`, `presetenv`, `unsetenv`, `resetenv`: the environment as
    /// the configuration left it (applied to the process at start).
    pub environ: crate::environ::Overlay,
    /// `node NAME`: the name `show info` and the stats page give this
    /// instance (default: the host name).
    pub node: Option<String>,
    /// `cpu-map` lines: the CPUs of the process and of each thread.
    pub cpu_map: Option<Box<crate::config::cpumap::CpuMap>>,
    /// `description TEXT`: `show info`'s and the stats page's description.
    pub description: Option<String>,
    /// `nbthread N`; `None`: one per CPU.
    pub nbthread: Option<Spanned<u32>>,
    /// `maxconn N`: process-wide connection limit.
    pub maxconn: Option<u32>,
    /// `tune.bufsize`, in bytes. 16384 is HAProxy's default.
    pub bufsize: usize,
    /// `tune.runqueue-depth`; `None`: the scheduler's default by thread count.
    pub runqueue_depth: Option<u32>,
    /// `tune.sched.low-latency on|off`.
    pub low_latency: bool,
    /// `tune.idle-pool.shared on|off` (default on): a thread may take
    /// another thread's idle server connections.
    pub idle_pool_shared: bool,
    /// `tune.sched.scope-lookups on|off` (ebb's own; default on): `off`
    /// finds shared tasks by the naive walk, for before/after measurements.
    pub scope_lookups: bool,
    /// `tune.heavy-tasklets on|off` (ebb): whether the heavy class is used.
    pub heavy_tasklets: bool,
    /// `tune.ssl.cachesize N`: TLS session-ID cache entries per bind line
    /// (0: no cache); `None`: the TLS layer's default (HAProxy's 20,000).
    pub ssl_cachesize: Option<u32>,
    /// `tune.ssl.capture-buffer-size N` (once only, as in HAProxy): the
    /// ClientHello capture's size. Nothing reads it: the fetches that
    /// read HAProxy's capture are refused (see `sample::fetch::parse`).
    pub ssl_capture_buffer: Option<u32>,
    /// `profiling.tasks on|auto|off`.
    pub profiling_tasks: ProfilingMode,
    /// `hard-stop-after T`.
    pub hard_stop_after: Option<Duration>,
    /// `grace T`: after SIGUSR1, how long the process goes on serving
    /// and accepting as before (only "stopping" shows the stop) before
    /// its soft stop begins; `None` (or `grace 0`): at once.
    pub grace: Option<Duration>,
    /// `log ...` lines, in order.
    pub log: Vec<LogTarget>,
    /// `pidfile PATH`.
    pub pidfile: Option<Spanned<PathBuf>>,
    /// `stats socket ...` lines.
    pub stats_sockets: Vec<StatsSocket>,
    /// `stats timeout T` for CLI connections.
    pub stats_timeout: Option<Duration>,
    /// `server-state-file PATH`.
    pub server_state_file: Option<Spanned<PathBuf>>,
    /// `server-state-base DIR`.
    pub server_state_base: Option<Spanned<PathBuf>>,
    /// `h1-case-adjust FROM TO` lines, then the `h1-case-adjust-file`'s
    /// entries once the configuration is read ([`crate::http1::CaseMap`]).
    pub h1_case: crate::http1::CaseMap,
    /// The last `h1-case-adjust-file PATH` (HAProxy reads only the last).
    pub h1_case_file: Option<Spanned<PathBuf>>,
    /// `daemon`: run in the background (as `-D`; `-d` keeps the foreground).
    pub daemon: bool,
    /// `quiet`: no message on standard error at start or after (as `-q`).
    pub quiet: bool,
    /// `maxsslconn N`: most TLS connections open at once, client and
    /// server sides together (0: no limit).
    pub maxsslconn: u32,
    /// `set-dumpable` (`no set-dumpable` undoes it): after `chroot`,
    /// `user` and `group`, the file-size and core-size limits raised to
    /// unlimited and the process marked dumpable again, so a crash can
    /// leave a core.
    pub set_dumpable: bool,
    /// `strict-limits` (on by default, as in HAProxy 2.6; `no
    /// strict-limits` turns it off): a resource limit that cannot be set
    /// (`ulimit-n`, the descriptors `maxconn` needs, `set-dumpable`'s)
    /// stops the start; off, it is a warning.
    pub strict_limits: bool,
    /// `zero-warning` (or `-dW`): a configuration that gives any warning
    /// at start (or at a reload) is refused.
    pub zero_warning: bool,
    /// `external-check`: backends may run external checks.
    pub external_check: bool,
    /// `insecure-fork-wanted` (`no insecure-fork-wanted` undoes it): ebb
    /// may start processes (external checks) while it serves. Without it
    /// HAProxy 2.6 forbids forks (an `RLIMIT_NPROC` of 0), which binds
    /// only an unprivileged process: ebb then refuses to start external
    /// checks unless it runs as root.
    pub insecure_fork: bool,
    /// `insecure-setuid-wanted` (`no insecure-setuid-wanted` undoes it):
    /// without it ebb sets `PR_SET_NO_NEW_PRIVS` before it serves, as
    /// HAProxy 2.6's workers do, so a command it runs (an external check)
    /// gains no privilege from a setuid or file-capability executable.
    pub insecure_setuid: bool,
    /// `chroot DIR`: entered after binding, before serving.
    pub chroot: Option<Spanned<PathBuf>>,
    /// `user NAME` / `uid N`: the user ebb runs as after binding.
    pub uid: Option<u32>,
    /// `group NAME` / `gid N`: the group ebb runs as after binding.
    pub gid: Option<u32>,
    /// `log-tag NAME`: the syslog tag (default: the program's name).
    pub log_tag: Option<String>,
    /// `log-send-hostname [NAME]`: the host name put in syslog headers.
    pub log_send_hostname: Option<String>,
    /// `tune.maxrewrite N`: buffer room kept free of the request head
    /// (HAProxy's default 1024, at most half of `tune.bufsize`).
    pub maxrewrite: Option<usize>,
    /// `ulimit-n N`: the open-files limit, set at start (default: raised
    /// to what `maxconn` needs).
    pub ulimit_n: Option<u64>,
    /// `tune.http.drain-max SIZE` (ebb's): most bytes of an unread request
    /// body dropped after an early answer (default 16k).
    pub drain_max: Option<u64>,
    /// `tune.http.maxhdr N`: at most N - 1 fields in a request or a
    /// response head (HAProxy counts the start line; default 101).
    pub max_hdr: Option<usize>,
    /// `maxconnrate N` / `maxsessrate N`: most connections / sessions
    /// accepted per second by the process (0: no limit).
    pub max_conn_rate: u32,
    pub max_sess_rate: u32,
    /// `tune.comp.maxlevel N`: the compression level (HAProxy's default 1).
    pub comp_maxlevel: Option<u32>,
    /// `tune.h2.max-concurrent-streams N` (HAProxy's default 100; 0: no
    /// limit).
    pub h2_max_concurrent_streams: Option<u32>,
    /// `tune.h2.initial-window-size N` (default 65535).
    pub h2_initial_window_size: Option<u32>,
    /// `tune.h2.header-table-size N` (default 4096, at most 65536).
    pub h2_header_table_size: Option<u32>,
    /// `tune.h2.max-frame-size N` (16384 to 16777215): the largest frame
    /// ebb announces it receives, at most `tune.bufsize` (the default).
    pub h2_max_frame_size: Option<u32>,
    /// `close-spread-time T|infinite`: how a soft stop spreads the closing
    /// of connections (see the `drain` module).
    pub close_spread: Option<CloseSpread>,
    /// `master-worker` (as `-W`): a master process runs the workers.
    pub master_worker: bool,
    /// `master-worker no-exit-on-failure`: a current worker or program
    /// that fails does not stop the other processes; the master leaves
    /// once none is left.
    pub no_exit_on_failure: bool,
    /// `ssl-server-verify none|required`: the verification of servers
    /// whose line has no `verify` (HAProxy's default: required).
    pub ssl_server_verify: Option<Verify>,
    /// `ssl-load-extra-del-ext`: the files beside a certificate `NAME.crt`
    /// are `NAME.key` and `NAME.ocsp` (else `NAME.crt.key`...).
    pub ssl_load_extra_del_ext: bool,
    /// `spread-checks N` (0..50): each check's next date moves by a random
    /// amount of up to N % of its interval, either way.
    pub spread_checks: Option<u32>,
    /// `max-spread-checks T`: the most the first checks are spread over
    /// at start (None or zero: the smallest check interval).
    pub max_spread_checks: Option<Duration>,
}

/// `close-spread-time`: a window over which a soft stop closes
/// connections, or `infinite`: it closes none itself.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CloseSpread {
    Window(Duration),
    Infinite,
}

/// `-dW` on the command line: `zero-warning` for every parse (a reload's
/// too).
static DASH_DW: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

/// Notes `-dW` (HAProxy's command-line `zero-warning`).
pub fn set_dash_dw() {
    DASH_DW.store(true, std::sync::atomic::Ordering::Relaxed);
}

impl Default for Global {
    fn default() -> Self {
        Global {
            localpeer: None,
            set_vars: Vec::new(),
            environ: Default::default(),
            node: None,
            cpu_map: None,
            description: None,
            nbthread: None,
            maxconn: None,
            bufsize: 16384,
            runqueue_depth: None,
            low_latency: false,
            idle_pool_shared: true,
            scope_lookups: true,
            heavy_tasklets: true,
            ssl_cachesize: None,
            ssl_capture_buffer: None,
            profiling_tasks: ProfilingMode::Auto,
            hard_stop_after: None,
            grace: None,
            log: Vec::new(),
            pidfile: None,
            stats_sockets: Vec::new(),
            stats_timeout: None,
            server_state_file: None,
            server_state_base: None,
            h1_case: Default::default(),
            h1_case_file: None,
            daemon: false,
            quiet: false,
            maxsslconn: 0,
            set_dumpable: false,
            strict_limits: true,
            zero_warning: DASH_DW.load(std::sync::atomic::Ordering::Relaxed),
            external_check: false,
            insecure_fork: false,
            insecure_setuid: false,
            chroot: None,
            uid: None,
            gid: None,
            log_tag: None,
            log_send_hostname: None,
            maxrewrite: None,
            ulimit_n: None,
            drain_max: None,
            max_hdr: None,
            max_conn_rate: 0,
            max_sess_rate: 0,
            h2_max_concurrent_streams: None,
            h2_initial_window_size: None,
            h2_header_table_size: None,
            h2_max_frame_size: None,
            comp_maxlevel: None,
            close_spread: None,
            master_worker: false,
            no_exit_on_failure: false,
            ssl_server_verify: None,
            ssl_load_extra_del_ext: false,
            spread_checks: None,
            max_spread_checks: None,
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ProfilingMode {
    On,
    Auto,
    Off,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum CliLevel {
    User,
    Operator,
    Admin,
}

impl CliLevel {
    /// Its name, as `level` takes it and `show cli level` prints it.
    pub fn name(self) -> &'static str {
        match self {
            CliLevel::User => "user",
            CliLevel::Operator => "operator",
            CliLevel::Admin => "admin",
        }
    }

    /// The level a name gives (`user`, `operator`, `admin`).
    pub fn from_name(name: &str) -> Option<CliLevel> {
        [CliLevel::User, CliLevel::Operator, CliLevel::Admin]
            .into_iter()
            .find(|l| l.name() == name)
    }
}

/// `stats socket PATH [mode OCTAL] [level user|operator|admin]`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StatsSocket {
    /// A UNIX socket path, or `ADDR:PORT` / `ipv4@...` for TCP, as written.
    pub path: String,
    pub mode: Option<u32>,
    /// `user`/`uid` and `group`/`gid`: the socket file's owner and group.
    pub owner: (Option<u32>, Option<u32>),
    /// `operator` when not given (HAProxy's documented default level).
    pub level: CliLevel,
    /// `nice N` (-1024..1024); `None`: the CLI's own default, which should
    /// be better than traffic's so the socket answers under load.
    pub nice: Option<i32>,
    /// `expose-fd listeners`: `_getsocks` hands the listening sockets to
    /// a new process (`-x`).
    pub expose_fd: bool,
    pub loc: Loc,
}
