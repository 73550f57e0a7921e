//! The master CLI (`-S ADDR[,mode,OCTAL]`, ADDR a path, `unix@PATH`,
//! `fd@N`, `ipv4@IP:PORT` or `IP:PORT`), as HAProxy's: one line per
//! connection, commands split on `;` (a `\;` stays in its command):
//! `show proc`, `reload`, `help`, `quit`, and `@N CMD` / `@!PID CMD`,
//! CMD sent to a worker's CLI (`@1` the current worker, `@2`... older
//! ones, by age; `@0` or `@master` the master itself). Each worker gets a
//! private CLI socket (level admin) in the master's 0700 directory for
//! this.
//!
//! The master's loop (`Master::serve`) polls these connections with its
//! signals and its workers' readiness pipes: each is read and answered
//! without blocking (5 s to send its line and 5 s to take its answer,
//! lines up to 64 KiB, 64 connections at once, more wait in the listen
//! queue), so a silent client delays neither a reload nor another client.
//! A command sent to a worker (`@N`) is passed on and its answer read on
//! that loop too, each step when the worker's socket is ready (up to 10 s
//! in all): a worker slow or stopped delays only the client that asked it
//! (the rest of its line waits), never the master nor another client. A
//! `reload` is done once the line's answers are out as far
//! as the sockets take them (the re-exec closes every connection).

use std::collections::VecDeque;
use std::io::{self, Read, Write};
use std::os::fd::{AsRawFd, RawFd};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant, SystemTime};

use socket2::{Domain, SockAddr, Socket, Type};

use super::{unix_path, Master};
use crate::config::CliLevel;

/// Binds one `-S` argument; the socket file it created, if any.
pub(super) fn bind_mcli(arg: &str) -> io::Result<(Socket, Option<PathBuf>)> {
    let mut parts = arg.split(',');
    let addr = parts.next().unwrap_or_default();
    let mut mode = None;
    while let Some(o) = parts.next() {
        match (o, parts.next()) {
            ("mode", Some(m)) => {
                mode = Some(u32::from_str_radix(m, 8).map_err(|_| {
                    io::Error::new(io::ErrorKind::InvalidInput, format!("bad mode '{m}'"))
                })?)
            }
            ("level", Some(_)) | ("user", Some(_)) | ("group", Some(_)) => {
                return Err(io::Error::new(
                    io::ErrorKind::InvalidInput,
                    format!("-S option '{o}' is not supported (only 'mode')"),
                ))
            }
            (o, _) => {
                return Err(io::Error::new(
                    io::ErrorKind::InvalidInput,
                    format!("unknown -S option '{o}' (supported: mode)"),
                ))
            }
        }
    }
    if let Some(s) = crate::handover::take_cli(&format!("mcli:{arg}")) {
        return Ok((s, unix_path(addr)));
    }
    let spec = crate::config::StatsSocket {
        path: addr.to_string(),
        mode,
        level: CliLevel::Admin,
        nice: None,
        expose_fd: false,
        loc: crate::config::Loc {
            file: std::sync::Arc::from("-S"),
            line: 0,
        },
    };
    let c = crate::cli::socket::bind(&spec)?;
    Ok((c.listener, c.path))
}

impl Master {
    /// Accepts the clients waiting on master CLI socket `i`, up to the
    /// bound on connections.
    pub(super) fn accept_cli(&mut self, i: usize) {
        while self.conns.len() < MCLI_MAX_CONNS {
            let Ok((s, _)) = self.mcli[i].accept() else {
                return;
            };
            if s.set_nonblocking(true).is_err() {
                continue;
            }
            self.conns.push(CliConn {
                s,
                inp: Vec::new(),
                todo: VecDeque::new(),
                ans: String::new(),
                reload: false,
                fwd: None,
                out: None,
                deadline: Instant::now() + MCLI_TIMEOUT,
                done: false,
            });
            // Its line may be there already.
            let k = self.conns.len() - 1;
            if self.on_cli(k) {
                for c in &mut self.conns {
                    c.flush();
                }
                self.reload();
            }
            self.conns.retain(|c| !c.done);
        }
    }

    /// Master CLI connection `k` is ready: reads its line and answers it,
    /// or moves on the command it passed on to a worker, or sends more of
    /// its answer. True: a `reload` was asked for (done by the caller once
    /// the answers are out).
    pub(super) fn on_cli(&mut self, k: usize) -> bool {
        let c = &mut self.conns[k];
        if c.out.is_some() {
            c.flush();
            return false;
        }
        if let Some(f) = &mut c.fwd {
            let Some(ans) = f.step(Instant::now()) else {
                return false;
            };
            c.ans.push_str(&ans);
            c.fwd = None;
            return self.run_line(k);
        }
        let mut b = [0u8; 4096];
        let mut eof = false;
        while !c.inp.contains(&b'\n') {
            match (&c.s).read(&mut b) {
                Ok(0) => {
                    eof = true;
                    break;
                }
                Ok(n) => {
                    c.inp.extend_from_slice(&b[..n]);
                    if c.inp.len() > MCLI_MAX_LINE {
                        // No line in 64 KiB: closed unanswered.
                        c.done = true;
                        return false;
                    }
                }
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
                Err(_) => {
                    c.done = true;
                    return false;
                }
            }
        }
        if !eof && !c.inp.contains(&b'\n') {
            return false;
        }
        let text = String::from_utf8_lossy(&c.inp);
        let text = text.lines().next().unwrap_or("").to_string();
        c.todo = split_commands(&text).into();
        c.inp = Vec::new();
        self.run_line(k)
    }

    /// Moves on the commands passed on to workers that wait on no socket
    /// event: one past its deadline (answered so), one whose connection
    /// waits for room in the worker's listen queue. True: a `reload` was
    /// asked for.
    pub(super) fn cli_timers(&mut self) -> bool {
        let now = Instant::now();
        let mut reload = false;
        for k in 0..self.conns.len() {
            let due = |f: &Forward| f.s.is_none() || f.deadline <= now;
            if self.conns[k].fwd.as_ref().is_some_and(due) {
                reload |= self.on_cli(k);
            }
        }
        reload
    }

    /// Runs the commands of connection `k`'s line in turn, their answers
    /// put together; one passed on to a worker leaves the rest waiting for
    /// its answer (`on_cli` comes back here with it). Once all have run
    /// (or `quit`), the answer goes out. True: the line is answered and
    /// asked for a `reload`.
    fn run_line(&mut self, k: usize) -> bool {
        while let Some(cmd) = self.conns[k].todo.pop_front() {
            let cmd = cmd.trim();
            if cmd.is_empty() {
                continue;
            }
            let mut out = std::mem::take(&mut self.conns[k].ans);
            let next = self.command(cmd, &mut out);
            let c = &mut self.conns[k];
            c.ans = out;
            match next {
                Next::Go => {}
                Next::Reload => c.reload = true,
                Next::Quit => break,
                Next::Forward(mut f) => {
                    if let Some(ans) = f.step(Instant::now()) {
                        c.ans.push_str(&ans);
                        continue;
                    }
                    c.deadline = f.deadline;
                    c.fwd = Some(f);
                    return false;
                }
            }
        }
        let c = &mut self.conns[k];
        c.todo.clear();
        c.out = Some((std::mem::take(&mut c.ans).into_bytes(), 0));
        c.deadline = Instant::now() + MCLI_TIMEOUT;
        c.flush();
        c.reload
    }

    /// Runs one master CLI command, its answer added to `out`, or says
    /// what comes next.
    fn command(&mut self, cmd: &str, out: &mut String) -> Next {
        if let Some(rest) = cmd.strip_prefix('@') {
            let (target, sub) = rest.split_once(' ').unwrap_or((rest, ""));
            if target == "master" || target == "0" {
                return self.command(sub.trim(), out);
            }
            let w = if let Some(pid) = target.strip_prefix('!') {
                pid.parse::<u32>()
                    .ok()
                    .and_then(|p| self.workers.iter().find(|w| w.pid == p))
            } else {
                target
                    .parse::<usize>()
                    .ok()
                    .and_then(|n| n.checked_sub(1))
                    .and_then(|n| self.by_age().get(n).copied())
                    .map(|i| &self.workers[i])
            };
            match w {
                Some(w) => return Next::Forward(Forward::new(&w.cli, sub.trim())),
                None => out.push_str(&format!(
                    "Can't find the target PID matching the prefix '@{target}'\n"
                )),
            }
            return Next::Go;
        }
        match cmd.split_whitespace().collect::<Vec<_>>()[..] {
            ["show", "proc"] => out.push_str(&self.show_proc()),
            ["reload"] => return Next::Reload,
            ["quit"] => return Next::Quit,
            ["help"] | [] => out.push_str(MASTER_HELP),
            _ => {
                out.push_str(&format!("Unknown command: '{cmd}'\n"));
                out.push_str(MASTER_HELP);
            }
        }
        Next::Go
    }

    /// Workers, newest first.
    fn by_age(&self) -> Vec<usize> {
        let mut v: Vec<usize> = (0..self.workers.len()).collect();
        v.sort_by_key(|&i| std::cmp::Reverse((self.workers[i].gen, self.workers[i].started)));
        v
    }

    fn show_proc(&self) -> String {
        let up = |t: SystemTime| {
            let s = SystemTime::now()
                .duration_since(t)
                .map_or(0, |d| d.as_secs());
            format!(
                "{}d{:02}h{:02}m{:02}s",
                s / 86400,
                s / 3600 % 24,
                s / 60 % 60,
                s % 60
            )
        };
        let ver = env!("CARGO_PKG_VERSION");
        let mut o = format!(
            "#{:<14} {:<15} {:<15} {:<15} {}\n",
            "<PID>", "<type>", "<reloads>", "<uptime>", "<version>"
        );
        o.push_str(&format!(
            "{:<15} {:<15} {:<15} {:<15} {ver}\n",
            crate::sys::pid(),
            "master",
            format!("{} [failed: {}]", self.reloads, self.failed),
            up(self.started)
        ));
        // The current workers, then the old ones (still finishing), each
        // section in `by_age` order.
        for (title, old) in [("# workers\n", false), ("# old workers\n", true)] {
            o.push_str(title);
            for &i in &self.by_age() {
                let w = &self.workers[i];
                if w.old == old {
                    o.push_str(&format!(
                        "{:<15} {:<15} {:<15} {:<15} {ver}\n",
                        w.pid,
                        "worker",
                        self.reloads - w.gen,
                        up(w.started)
                    ));
                }
            }
        }
        o.push_str(&crate::program::show(&self.programs, &up));
        o.push('\n');
        o
    }
}

/// How long a master CLI client has to send its line, then to take its
/// answer.
const MCLI_TIMEOUT: Duration = Duration::from_secs(5);
/// How long a worker has to take a command passed on to it and answer.
const FORWARD_TIMEOUT: Duration = Duration::from_secs(10);
/// How often a command passed on to a worker whose listen queue is full
/// tries again to connect.
const CONNECT_RETRY_MS: i32 = 10;
/// Master CLI connections served at once; more wait in the listen queue.
pub(super) const MCLI_MAX_CONNS: usize = 64;
/// The longest command line the master CLI reads.
const MCLI_MAX_LINE: usize = 64 * 1024;

/// One master CLI connection: its line being read, then its answer being
/// written, never blocking the master's loop.
pub(super) struct CliConn {
    pub(super) s: Socket,
    inp: Vec<u8>,
    /// The commands of its line not run yet (while one waits on a worker).
    todo: VecDeque<String>,
    /// The answers of those run so far.
    ans: String,
    /// Its line asked for a `reload`.
    reload: bool,
    /// Its command passed on to a worker, waiting for the answer.
    fwd: Option<Forward>,
    /// The answer and how much of it is sent.
    pub(super) out: Option<(Vec<u8>, usize)>,
    pub(super) deadline: Instant,
    /// Answered in full, or failed: to be closed.
    pub(super) done: bool,
}

impl CliConn {
    /// What the master's loop polls for it: its socket (its line, then
    /// room for its answer), or the worker's its command waits on (none
    /// while that one waits to connect).
    pub(super) fn poll_fd(&self) -> (RawFd, bool) {
        match &self.fwd {
            Some(f) => {
                f.s.as_ref()
                    .map_or((-1, false), |s| (s.as_raw_fd(), f.sent < f.req.len()))
            }
            None => (self.s.as_raw_fd(), self.out.is_some()),
        }
    }

    /// How long the master's loop may wait before it must look at it (ms).
    pub(super) fn wait_ms(&self, now: Instant) -> i32 {
        let ms = self.deadline.saturating_duration_since(now).as_millis() as i32 + 1;
        match &self.fwd {
            Some(f) if f.s.is_none() => ms.min(CONNECT_RETRY_MS),
            _ => ms,
        }
    }

    /// Past its deadline and to be closed (silent, or not reading its
    /// answer). One whose command waits on a worker is answered at the
    /// forward's deadline instead (`Master::cli_timers`).
    pub(super) fn expired(&self, now: Instant) -> bool {
        self.fwd.is_none() && self.deadline <= now
    }

    /// Writes what the socket takes of the answer; `done` once all is.
    pub(super) fn flush(&mut self) {
        let Some((out, sent)) = &mut self.out else {
            return;
        };
        while *sent < out.len() {
            match (&self.s).write(&out[*sent..]) {
                Ok(0) => break,
                Ok(n) => *sent += n,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return,
                Err(_) => break,
            }
        }
        self.done = true;
    }
}

const MASTER_HELP: &str = "The following commands are valid at this level:\n  help           : this message\n  quit           : leave the master CLI\n  show proc      : show the master and the workers\n  reload         : reload the configuration and start a new worker\n  @N CMD         : send CMD to the Nth worker (1: the current one)\n  @!PID CMD      : send CMD to the worker with this pid\n  @master CMD    : run CMD on the master\n";

/// Splits a line on `;` not escaped by a backslash (the escapes stay, for
/// the worker's CLI to read).
fn split_commands(line: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut cur = String::new();
    let mut esc = false;
    for c in line.chars() {
        if esc {
            esc = false;
            cur.push(c);
        } else if c == '\\' {
            esc = true;
            cur.push(c);
        } else if c == ';' {
            out.push(std::mem::take(&mut cur));
        } else {
            cur.push(c);
        }
    }
    out.push(cur);
    out
}

/// What a master CLI command leaves to do.
enum Next {
    /// The next command.
    Go,
    /// The next command; a `reload` once the line is answered.
    Reload,
    /// No more commands (`quit`): the answer goes out.
    Quit,
    /// Wait for a worker's answer to this command.
    Forward(Forward),
}

/// A command passed on to a worker's CLI, never blocking the master: it
/// connects, sends the command (then shuts its side), and reads the
/// answer to its end, each step as far as the socket goes, by
/// [`FORWARD_TIMEOUT`].
struct Forward {
    path: PathBuf,
    /// `None` until connected (the worker's listen queue was full: tried
    /// again).
    s: Option<Socket>,
    req: Vec<u8>,
    sent: usize,
    ans: Vec<u8>,
    deadline: Instant,
}

impl Forward {
    fn new(path: &Path, cmd: &str) -> Forward {
        Forward {
            path: path.to_path_buf(),
            s: None,
            req: format!("{cmd}\n").into_bytes(),
            sent: 0,
            ans: Vec::new(),
            deadline: Instant::now() + FORWARD_TIMEOUT,
        }
    }

    /// Moves it on as far as the socket goes. `Some`: over, with what goes
    /// into the client's answer (the worker's whole answer, or why there
    /// is none).
    fn step(&mut self, now: Instant) -> Option<String> {
        match self.advance(now) {
            Ok(false) => None,
            Ok(true) => Some(
                String::from_utf8(std::mem::take(&mut self.ans)).unwrap_or_else(|_| {
                    "Can't reach the worker: stream did not contain valid UTF-8\n".to_string()
                }),
            ),
            Err(e) => Some(format!("Can't reach the worker: {e}\n")),
        }
    }

    /// True: the answer is read to its end; `false`: wait for the socket.
    fn advance(&mut self, now: Instant) -> io::Result<bool> {
        if self.s.is_none() {
            let s = Socket::new(Domain::UNIX, Type::STREAM, None)?;
            s.set_nonblocking(true)?;
            match s.connect(&SockAddr::unix(&self.path)?) {
                Ok(()) => self.s = Some(s),
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return self.unless_late(now),
                Err(e) => return Err(e),
            }
        }
        let Some(s) = &self.s else {
            return Ok(false);
        };
        while self.sent < self.req.len() {
            match (&*s).write(&self.req[self.sent..]) {
                Ok(0) => return Err(io::ErrorKind::WriteZero.into()),
                Ok(n) => {
                    self.sent += n;
                    if self.sent == self.req.len() {
                        let _ = s.shutdown(std::net::Shutdown::Write);
                    }
                }
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return self.unless_late(now),
                Err(e) => return Err(e),
            }
        }
        let mut b = [0u8; 4096];
        loop {
            match (&*s).read(&mut b) {
                Ok(0) => return Ok(true),
                Ok(n) => self.ans.extend_from_slice(&b[..n]),
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return self.unless_late(now),
                Err(e) => return Err(e),
            }
        }
    }

    /// Nothing more for now: wait, unless its time is up.
    fn unless_late(&self, now: Instant) -> io::Result<bool> {
        if now >= self.deadline {
            return Err(io::ErrorKind::TimedOut.into());
        }
        Ok(false)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn commands_split_on_unescaped_semicolons() {
        assert_eq!(
            split_commands("@1 add acl f Mon\\ Agent\\;;@1 show acl f"),
            vec!["@1 add acl f Mon\\ Agent\\;", "@1 show acl f"]
        );
        assert_eq!(split_commands("show proc"), vec!["show proc"]);
    }
}
