//! External checks (`option external-check`): each check runs `external-check
//! command` as HAProxy 2.6 does, on the checks' pool of blocking threads
//! (never on an event loop), one process per server at a time.
//!
//! The command gets HAProxy's arguments, `<proxy_address> <proxy_port>
//! <server_address> <server_port>` (the backend's first TCP or UNIX
//! listener, `NOT_USED` for a backend without one or for a UNIX socket's
//! port), and HAProxy's environment instead of ebb's: `PATH` from
//! `external-check path` (empty by default), `HAPROXY_PROXY_NAME`,
//! `_ID`, `_ADDR`, `_PORT`, `HAPROXY_SERVER_NAME`, `_ID`, `_ADDR`,
//! `_PORT`, `_MAXCONN`, `_CURCONN`, `_SSL` and `_PROTO` (a `NOT_USED` is
//! empty there). Exit status 0 is `PROCOK`, any other or a signal
//! `PROCERR` (the code is the exit status, -1 for a signal, 255 when the
//! command cannot be run: HAProxy's child exits with -1). A command still
//! running after `inter` (or `timeout connect` when sooner and `timeout
//! check` is set, HAProxy's bound) gets a SIGTERM and the check is
//! `PROCTOUT`, keeping the last code as HAProxy does; a process that
//! ignores the signal is reaped later without holding a thread. The
//! command inherits ebb's open-files limit, as HAProxy 2.6.12's: its
//! child raises the limit back to the one it started with only where
//! that one was higher, which never happens (neither lowers it, see
//! `sys::set_nofile`).
//!
//! Without global `insecure-fork-wanted` HAProxy 2.6 forbids forks
//! (`RLIMIT_NPROC` 0), which only a privileged process escapes: ebb then
//! starts no command unless it runs as root, and the check is a
//! `SOCKERR` with fork's error, as HAProxy's.

use std::os::fd::AsRawFd;
use std::process::{Child, Command, ExitStatus};
use std::sync::atomic::Ordering;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use super::{os_text, Verdict};
use crate::backend::ServerRt;
use crate::config::CheckStatus;

/// What a backend's external checks run, and what they tell of the
/// backend.
#[derive(Clone, Debug)]
pub struct ExtProbe {
    /// `external-check command`.
    pub command: String,
    /// `external-check path` (the command's `PATH`).
    pub path: String,
    pub proxy_name: String,
    /// HAProxy's proxy id.
    pub proxy_id: String,
    /// The first listener's address and port (`NOT_USED` when none).
    pub proxy_addr: String,
    pub proxy_port: String,
    /// `mode http` (a server's protocol is `h1` or `h2`, else `tcp`).
    pub http: bool,
    /// `timeout connect` when `timeout check` is set: a bound on the
    /// command besides `inter`.
    pub connect_cap: Option<Duration>,
    /// Global `insecure-fork-wanted`.
    pub fork_wanted: bool,
}

impl ExtProbe {
    /// How long the command of a server checked every `inter` may run.
    pub fn budget(&self, inter: Duration) -> Duration {
        match self.connect_cap {
            Some(c) => inter.min(c),
            None => inter,
        }
    }
}

/// What a check tells the command of its server, taken when it starts.
pub struct ExtServer {
    name: String,
    id: String,
    addr: String,
    port: String,
    maxconn: String,
    curconn: String,
    ssl: bool,
    proto: &'static str,
    /// The last check's code: a timeout keeps it (HAProxy's).
    last_code: i64,
}

impl ExtServer {
    pub fn of(p: &ExtProbe, s: &ServerRt) -> ExtServer {
        let (addr, port) = match s.addr() {
            Some(a) => (
                a.ip().to_string(),
                s.port.load(Ordering::Relaxed).to_string(),
            ),
            None => (String::new(), String::new()),
        };
        let proto = match (p.http, s.opts.proto_h2) {
            (false, _) => "tcp",
            (true, true) => "h2",
            (true, false) => "h1",
        };
        ExtServer {
            name: s.name.clone(),
            id: s.id.to_string(),
            addr,
            port,
            maxconn: s.opts.maxconn.unwrap_or(0).to_string(),
            curconn: s.cur.load(Ordering::Relaxed).to_string(),
            ssl: s.opts.ssl,
            proto,
            last_code: s.check_status.lock().map_or(0, |v| v.code),
        }
    }
}

/// The environment the command gets, in HAProxy's order.
fn environment<'a>(p: &'a ExtProbe, s: &'a ExtServer) -> [(&'static str, &'a str); 13] {
    let used = |v: &'a str| if v == "NOT_USED" { "" } else { v };
    [
        ("PATH", &p.path),
        ("HAPROXY_PROXY_NAME", &p.proxy_name),
        ("HAPROXY_PROXY_ID", &p.proxy_id),
        ("HAPROXY_PROXY_ADDR", used(&p.proxy_addr)),
        ("HAPROXY_PROXY_PORT", used(&p.proxy_port)),
        ("HAPROXY_SERVER_NAME", &s.name),
        ("HAPROXY_SERVER_ID", &s.id),
        ("HAPROXY_SERVER_ADDR", &s.addr),
        ("HAPROXY_SERVER_PORT", &s.port),
        ("HAPROXY_SERVER_MAXCONN", &s.maxconn),
        ("HAPROXY_SERVER_CURCONN", &s.curconn),
        ("HAPROXY_SERVER_SSL", if s.ssl { "1" } else { "0" }),
        ("HAPROXY_SERVER_PROTO", s.proto),
    ]
}

/// Commands that outlived their check and ignored its SIGTERM: reaped
/// when they end, at the start of a later check.
static LOST: Mutex<Vec<Child>> = Mutex::new(Vec::new());

fn reap_lost() {
    if let Ok(mut l) = LOST.lock() {
        l.retain_mut(|c| matches!(c.try_wait(), Ok(None)));
    }
}

/// Runs one external check, blocking (on the checks' pool), at most
/// `budget`.
pub fn run_ext(p: &ExtProbe, s: &ExtServer, budget: Duration) -> Verdict {
    reap_lost();
    if !p.fork_wanted && crate::sys::euid() != 0 {
        // HAProxy's fork under `RLIMIT_NPROC` 0.
        let e = std::io::Error::from_raw_os_error(libc::EAGAIN);
        return Verdict::new(CheckStatus::SockErr, os_text(&e));
    }
    let start = Instant::now();
    let mut cmd = Command::new(&p.command);
    cmd.args([&p.proxy_addr, &p.proxy_port, &s.addr, &s.port])
        .env_clear()
        .envs(environment(p, s));
    let mut child = match cmd.spawn() {
        Ok(c) => c,
        // The process could not be made (HAProxy's failed fork).
        Err(e) if matches!(e.raw_os_error(), Some(libc::EAGAIN | libc::ENOMEM)) => {
            return Verdict::new(CheckStatus::SockErr, os_text(&e));
        }
        // The command could not be run: HAProxy's child exits with -1.
        Err(_) => return coded(CheckStatus::ProcErr, 255),
    };
    let pidfd = crate::sys::pidfd_open(child.id());
    loop {
        match child.try_wait() {
            Ok(Some(st)) => return ended(st),
            Ok(None) => {}
            Err(e) => return Verdict::new(CheckStatus::SockErr, os_text(&e)),
        }
        let left = budget.saturating_sub(start.elapsed());
        if left.is_zero() {
            break;
        }
        match &pidfd {
            Ok(fd) => {
                let ms = left.as_millis().clamp(1, i32::MAX as u128) as i32;
                let _ = crate::sys::poll_readable(&[fd.as_raw_fd()], ms);
            }
            Err(_) => std::thread::sleep(left.min(Duration::from_millis(10))),
        }
    }
    // HAProxy's end of a command that took too long: SIGTERM, and the
    // process is reaped whenever it ends.
    let _ = crate::sys::kill(child.id(), libc::SIGTERM);
    if !matches!(child.try_wait(), Ok(Some(_))) {
        if let Ok(mut l) = LOST.lock() {
            l.push(child);
        }
    }
    coded(CheckStatus::ProcTout, s.last_code)
}

fn coded(st: CheckStatus, code: i64) -> Verdict {
    let mut v = Verdict::new(st, "");
    v.code = code;
    v
}

/// The verdict of a command that ended.
fn ended(st: ExitStatus) -> Verdict {
    match st.code() {
        Some(0) => coded(CheckStatus::ProcOk, 0),
        Some(c) => coded(CheckStatus::ProcErr, i64::from(c)),
        None => coded(CheckStatus::ProcErr, -1),
    }
}
