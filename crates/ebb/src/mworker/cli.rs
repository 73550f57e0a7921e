//! The master CLI (`-S ADDR[,OPTION,VALUE...]`, ADDR a path, `unix@PATH`,
//! `fd@N`, `ipv4@IP:PORT` or `IP:PORT`), as HAProxy 2.6's: a connection
//! stays open for as many commands as the client sends (until it closes
//! or sends `quit`), each command ended by `;` or a newline (a `\;` stays
//! in its command). The master's own commands are `show proc`, `reload`,
//! `show version`, `show cli level`, `help`; `@N CMD` / `@!PID CMD` send
//! CMD to a worker's CLI (`@1` the current worker, `@2`... older ones, by
//! age; `@0`, `@` or `@master` the master itself), and a prefix alone
//! (`@1`) makes that process the target of the commands that follow.
//! `prompt` toggles interactive mode: after each answer a prompt names
//! the target (`master> `, `PID> `, `+ ` inside a payload). `operator`
//! and `user` lower the session's level (the socket's is `level`, admin
//! by default), `experimental-mode on` and `expert-mode on` turn those
//! modes on; all are passed on to each command a worker runs.
//! Each worker gets a private CLI socket (level admin) in the master's
//! 0700 directory for this.
//!
//! The master's loop (`Master::serve`) polls these connections with its
//! signals and its workers' readiness pipes: each is read and answered
//! without blocking (outside interactive mode, 5 s to send each command,
//! and 5 s without taking any of its answers;
//! commands up to 64 KiB, 64 connections at once, more wait in the listen
//! queue), so a silent client delays neither a reload nor another client.
//! A command sent to a worker (`@N`) is passed on and its answer relayed
//! as it comes (`@1 show events RING -w` streams until the client
//! closes), each step when a socket is ready; the worker has 10 s to start
//! answering. A worker slow or stopped delays only the client that asked
//! it, never the master nor another client. A `reload` is done once the
//! answers before it are out as far as the sockets take them (the re-exec
//! closes every connection).

use std::io::{self, Read, Write};
use std::os::fd::{AsRawFd, RawFd};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant, SystemTime};

use socket2::{Domain, SockAddr, Socket, Type};

use super::{unix_path, Master};
use crate::config::{CliLevel, StatsSocket};

/// A bound master CLI socket.
pub(super) struct McliSocket {
    pub(super) s: Socket,
    /// The socket file it created, if any.
    pub(super) path: Option<PathBuf>,
    pub(super) level: CliLevel,
}

/// Reads one `-S` argument as HAProxy does: the address, then bind
/// options separated by commas (a run of commas counts as one).
pub(super) fn parse_mcli(arg: &str) -> Result<StatsSocket, String> {
    let mut parts = arg.split(',').filter(|p| !p.is_empty());
    let addr = arg.split(',').next().unwrap_or_default();
    parts.next();
    let words: Vec<&str> = parts.collect();
    let mut s = StatsSocket {
        path: addr.to_string(),
        mode: None,
        owner: (None, None),
        level: CliLevel::Admin,
        nice: None,
        expose_fd: false,
        loc: crate::config::Loc {
            file: std::sync::Arc::from("-S"),
            line: 0,
        },
    };
    let unix = unix_path(addr).is_some();
    let mut i = 0;
    while i < words.len() {
        let o = words[i];
        let v = words.get(i + 1).copied();
        // HAProxy names the address and the first option, whichever
        // option is wrong.
        let err = |m: String| format!("'{addr} {}' : '{m}'", words[0]);
        match o {
            "level" => {
                s.level = match v {
                    Some("user") => CliLevel::User,
                    Some("operator") => CliLevel::Operator,
                    Some("admin") => CliLevel::Admin,
                    Some(x) => {
                        return Err(err(format!(
                            "'level' only supports 'user', 'operator', and 'admin' (got '{x}')"
                        )))
                    }
                    None => return Err(err("'level' : missing level".into())),
                }
            }
            "expose-fd" => match v {
                // Accepted as HAProxy does; the master CLI has no
                // `_getsocks`, so it changes nothing there.
                Some("listeners") => s.expose_fd = true,
                Some(x) => {
                    return Err(err(format!(
                        "'expose-fd' only supports 'listeners' (got '{x}')"
                    )))
                }
                None => return Err(err("'expose-fd' : missing value".into())),
            },
            "mode" | "user" | "group" | "uid" | "gid" => {
                let Some(v) = v else {
                    return Err(err(format!("'{o}' : missing value")));
                };
                if !unix {
                    return Err(err(format!(
                        "'{o}' applies to a UNIX socket path only"
                    )));
                }
                if o == "mode" {
                    s.mode = Some(crate::config::parse_octal_mode(v).map_err(|_| {
                        err(format!(
                            "'mode' : missing or invalid mode '{v}' (octal integer expected)"
                        ))
                    })?);
                } else {
                    crate::config::unix_owner_opt(o, v, &mut s.owner).map_err(|e| {
                        if e.starts_with("unknown") {
                            // HAProxy's words.
                            err(format!("'{o}' : unknown {o} name '{v}'"))
                        } else {
                            err(format!("'{o}' : {e}"))
                        }
                    })?;
                }
            }
            "severity-output" | "accept-proxy" | "name" | "id" | "maxconn" | "backlog"
            | "nice" | "process" | "thread" | "ssl" | "crt" | "interface" | "namespace"
            | "transparent" | "v4v6" | "v6only" | "defer-accept" | "tfo" | "mss" => {
                return Err(err(format!(
                    "'{o}' is not supported on the master CLI (ebb takes mode, user, group, uid, gid, level and expose-fd there)"
                )))
            }
            _ => return Err(format!("'{addr} {}' : unknown keyword '{o}'.", words[0])),
        }
        i += 2;
    }
    Ok(s)
}

/// Binds one `-S` argument.
pub(super) fn bind_mcli(arg: &str) -> io::Result<McliSocket> {
    let spec = parse_mcli(arg).map_err(|e| io::Error::new(io::ErrorKind::InvalidInput, e))?;
    if let Some(s) = crate::handover::take_cli(&format!("mcli:{arg}")) {
        return Ok(McliSocket {
            s,
            path: unix_path(&spec.path),
            level: spec.level,
        });
    }
    let c = crate::cli::socket::bind(&spec)?;
    Ok(McliSocket {
        s: c.listener,
        path: c.path,
        level: spec.level,
    })
}

impl Master {
    /// Accepts the clients waiting on master CLI socket `i`, up to the
    /// bound on connections.
    pub(super) fn accept_cli(&mut self, i: usize) {
        while self.conns.len() < MCLI_MAX_CONNS {
            let Ok((s, _)) = self.mcli[i].s.accept() else {
                return;
            };
            if s.set_nonblocking(true).is_err() {
                continue;
            }
            self.conns.push(CliConn::new(s, self.mcli[i].level));
            // Its commands may be there already.
            let k = self.conns.len() - 1;
            if self.on_cli(k) {
                for c in &mut self.conns {
                    let _ = c.flush();
                }
                self.reload();
            }
            self.conns.retain(|c| !c.done);
        }
    }

    /// Master CLI connection `k` (or the worker its command went to) is
    /// ready: sends what it can of the answers, relays the worker's
    /// answer, reads and runs the client's next commands. True: a
    /// `reload` was asked for (done by the caller once the answers before
    /// it are out).
    pub(super) fn on_cli(&mut self, k: usize) -> bool {
        let failed = self.failed > 0;
        loop {
            let now = Instant::now();
            let c = &mut self.conns[k];
            if c.flush().is_err() {
                // The client is gone: so is its command's connection.
                c.done = true;
                return false;
            }
            if c.closing {
                c.done |= c.unsent() == 0;
                return false;
            }
            c.read_in();
            if c.unsent() >= OUT_HIGH {
                return false;
            }
            if let Some(f) = &mut c.fwd {
                // Payload lines go after their command, as they come.
                while c.payload {
                    let Some(line) = next_line(&mut c.inp) else {
                        break;
                    };
                    f.req.extend_from_slice(line.as_bytes());
                    f.req.push(b'\n');
                    if line.is_empty() {
                        c.payload = false;
                        f.deadline = Some(now + FORWARD_TIMEOUT);
                    } else if c.prompt {
                        // Still in the payload: `+ `.
                        c.out.extend_from_slice(b"+ ");
                    }
                }
                match f.pump(now, &mut c.out) {
                    // Wait for the worker, or for the client's payload,
                    // or for room.
                    Ok(false) => return false,
                    Ok(true) => {
                        c.fwd = None;
                        c.deadline = idle_deadline(c.prompt, now);
                        c.prompt_out(failed);
                        continue;
                    }
                    Err(_) => {
                        c.fwd = None;
                        c.out
                            .extend_from_slice(b"Can't connect to the target CLI!\n");
                        c.closing = true;
                        continue;
                    }
                }
            }
            if let Some(cmd) = c.master_payload.take() {
                // A master command given a payload: the master takes none;
                // its lines are read past, then the command runs.
                let mut end = false;
                while let Some(line) = next_line(&mut c.inp) {
                    if line.is_empty() {
                        end = true;
                        break;
                    }
                    c.prompt_out(failed);
                }
                if !end {
                    c.master_payload = Some(cmd);
                    if c.eof {
                        c.closing = true;
                        continue;
                    }
                    return false;
                }
                if self.answer_master(k, &cmd, failed) {
                    return true;
                }
                continue;
            }
            let Some(cmd) = next_command(&mut c.inp) else {
                if c.eof || c.inp.len() >= MCLI_MAX_LINE {
                    // No more commands (a last one without its end is
                    // dropped, as HAProxy does), or one too long.
                    c.closing = true;
                    continue;
                }
                return false;
            };
            c.deadline = idle_deadline(c.prompt, now);
            if self.run(k, &cmd, failed) {
                return true;
            }
        }
    }

    /// Moves on the commands passed on to workers that wait on no socket
    /// event: one past its deadline (answered so), one whose connection
    /// waits for room in the worker's listen queue. True: a `reload` was
    /// asked for.
    pub(super) fn cli_timers(&mut self) -> bool {
        let now = Instant::now();
        let mut reload = false;
        for k in 0..self.conns.len() {
            let due = |f: &Forward| f.s.is_none() || f.deadline.is_some_and(|d| d <= now);
            if self.conns[k].fwd.as_ref().is_some_and(due) {
                reload |= self.on_cli(k);
            }
        }
        reload
    }

    /// Runs one command of connection `k`, as HAProxy's master CLI proxy:
    /// its own words (a target prefix, `prompt`, `quit`, the levels and
    /// modes), then the master's commands or the worker's. True: a
    /// `reload` was asked for.
    fn run(&mut self, k: usize, cmd: &str, failed: bool) -> bool {
        let words = split_words(cmd);
        let c = &mut self.conns[k];
        let mut target = c.target;
        let mut rest: &[String] = &words;
        if let Some(first) = words.first() {
            let deny = |c: &mut CliConn| {
                c.out.extend_from_slice(b"Permission denied!\n");
                c.closing = true;
            };
            match first.as_str() {
                p if p.starts_with('@') => {
                    let Some(t) = self.prefix_target(p) else {
                        let c = &mut self.conns[k];
                        c.out.extend_from_slice(
                            format!("Can't find the target PID matching the prefix '{p}'\n")
                                .as_bytes(),
                        );
                        c.closing = true;
                        return false;
                    };
                    let c = &mut self.conns[k];
                    if words.len() == 1 {
                        c.target = t;
                        c.prompt_out(failed);
                        return false;
                    }
                    target = t;
                    rest = &words[1..];
                }
                "prompt" => {
                    c.prompt = !c.prompt;
                    c.prompt_out(failed);
                    return false;
                }
                "quit" => {
                    c.closing = true;
                    return false;
                }
                lvl @ ("operator" | "user") => {
                    let want = if lvl == "operator" {
                        CliLevel::Operator
                    } else {
                        CliLevel::User
                    };
                    if c.level < want {
                        deny(c);
                        return false;
                    }
                    c.level = want;
                    c.prompt_out(failed);
                    return false;
                }
                m @ ("experimental-mode" | "expert-mode") => {
                    if c.level < CliLevel::Admin {
                        deny(c);
                        return false;
                    }
                    // As HAProxy: `on` sets it, anything else (or
                    // nothing) clears it.
                    let on = words.get(1).is_some_and(|w| w == "on");
                    if m == "expert-mode" {
                        c.expert = on;
                    } else {
                        c.experimental = on;
                    }
                    c.prompt_out(failed);
                    return false;
                }
                _ => {}
            }
        }
        let line = rest.join(" ");
        let c = &mut self.conns[k];
        let payload = line.ends_with("<<");
        match target {
            None => {
                if payload {
                    c.master_payload = Some(line[..line.len() - 2].trim_end().to_string());
                    c.prompt_out(failed);
                    return false;
                }
                return self.answer_master(k, &line, failed);
            }
            Some(pid) => {
                let Some(w) = self.workers.iter().find(|w| w.pid == pid) else {
                    let c = &mut self.conns[k];
                    c.out
                        .extend_from_slice(b"Can't connect to the target CLI!\n");
                    c.closing = true;
                    return false;
                };
                // The session's level and mode go before the command, on
                // its line (the worker runs one line, then closes), in
                // HAProxy's order: the level first (so experimental mode
                // kept from an admin session is refused at a lower one,
                // `Permission denied` before the answer, as HAProxy's).
                let mut req = String::new();
                match c.level {
                    CliLevel::Admin => {}
                    CliLevel::Operator => req.push_str("operator -;"),
                    CliLevel::User => req.push_str("user -;"),
                }
                if c.expert {
                    req.push_str("expert-mode on -;");
                }
                if c.experimental {
                    req.push_str("experimental-mode on -;");
                }
                req.push_str(&line);
                c.fwd = Some(Forward::new(&w.cli, &req, !payload));
                c.payload = payload;
                if payload {
                    c.prompt_out(failed);
                }
            }
        }
        false
    }

    /// Runs a master command for connection `k`, its answer and the
    /// prompt after it queued. True: `reload`.
    fn answer_master(&mut self, k: usize, cmd: &str, failed: bool) -> bool {
        let mut out = String::new();
        let c = &self.conns[k];
        if c.level < CliLevel::Admin {
            // As HAProxy's master, which passes the modes on to its own
            // commands too: each refused below admin, before the answer.
            for on in [c.expert, c.experimental] {
                if on {
                    out.push_str("Permission denied\n");
                }
            }
        }
        if self.master_command(cmd, self.conns[k].level, &mut out) {
            return true;
        }
        let c = &mut self.conns[k];
        c.out.extend_from_slice(out.as_bytes());
        c.prompt_out(failed);
        false
    }

    /// The process a prefix names: `Some(None)` the master, `Some(pid)` a
    /// worker; `None`: no such process.
    fn prefix_target(&self, p: &str) -> Option<Option<u32>> {
        let t = p.strip_prefix('@').unwrap_or(p);
        if t.is_empty() || t == "master" || t == "0" {
            return Some(None);
        }
        let w = if let Some(pid) = t.strip_prefix('!') {
            pid.parse::<u32>()
                .ok()
                .and_then(|p| self.workers.iter().find(|w| w.pid == p))
        } else {
            t.parse::<usize>()
                .ok()
                .and_then(|n| n.checked_sub(1))
                .and_then(|n| self.by_age().get(n).copied())
                .map(|i| &self.workers[i])
        };
        w.map(|w| Some(w.pid))
    }

    /// Runs one of the master's own commands at the session's level, its
    /// answer (ended by an empty line, as the CLI's) added to `out`.
    /// True: `reload`.
    fn master_command(&mut self, cmd: &str, level: CliLevel, out: &mut String) -> bool {
        match cmd.split_whitespace().collect::<Vec<_>>()[..] {
            ["show", "proc"] => out.push_str(&self.show_proc()),
            ["reload"] if level < CliLevel::Operator => out.push_str("Permission denied\n\n"),
            ["reload"] => return true,
            // HAProxy 2.6's master lists none of its sockets here (it
            // has no stats frontend): an empty answer.
            ["show", "cli", "sockets"] => out.push('\n'),
            ["show", "version"] => {
                out.push_str(env!("CARGO_PKG_VERSION"));
                out.push_str("\n\n");
            }
            ["show", "cli", "level"] => {
                out.push_str(match level {
                    CliLevel::Admin => "admin",
                    CliLevel::Operator => "operator",
                    CliLevel::User => "user",
                });
                out.push_str("\n\n");
            }
            ["help", ..] => {
                out.push_str("The following commands are valid at this level:\n");
                out.push_str(MASTER_HELP);
            }
            [] => {
                out.push_str("Unknown command. Please enter one of the following commands only:\n");
                out.push_str(MASTER_HELP);
            }
            _ => {
                out.push_str(
                    "Unknown command, but maybe one of the following ones is a better match:\n",
                );
                out.push_str(MASTER_HELP);
            }
        }
        false
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

/// Outside interactive mode, how long a master CLI client has to send its
/// next command.
const MCLI_TIMEOUT: Duration = Duration::from_secs(5);
/// How long a worker has to take a command passed on to it and start
/// answering.
const FORWARD_TIMEOUT: Duration = Duration::from_secs(10);
/// How often a command passed on to a worker whose listen queue is full
/// tries again to connect.
const CONNECT_RETRY_MS: i32 = 10;
/// Master CLI connections served at once; more wait in the listen queue.
pub(super) const MCLI_MAX_CONNS: usize = 64;
/// The longest command the master CLI reads.
const MCLI_MAX_LINE: usize = 64 * 1024;
/// While this much of a client's answers is unsent, neither its next
/// command nor more of a worker's answer is read.
const OUT_HIGH: usize = 64 * 1024;

/// When a client waiting to send its next command is closed: never in
/// interactive mode (HAProxy's master CLI has no client timeout).
fn idle_deadline(prompt: bool, now: Instant) -> Option<Instant> {
    (!prompt).then(|| now + MCLI_TIMEOUT)
}

/// One master CLI connection: its commands being read, run or passed on,
/// their answers written, never blocking the master's loop.
pub(super) struct CliConn {
    pub(super) s: Socket,
    inp: Vec<u8>,
    /// The client has sent all it will: the commands read still run.
    eof: bool,
    /// The answers, and how much of them is sent.
    out: Vec<u8>,
    sent: usize,
    /// Interactive mode (`prompt`).
    prompt: bool,
    /// The session's level: the socket's, lowered by `operator`/`user`.
    level: CliLevel,
    /// `experimental-mode on`, `expert-mode on`.
    experimental: bool,
    expert: bool,
    /// Where a command without a prefix goes: `None` the master, or a
    /// worker's pid (a prefix alone, `@1`).
    target: Option<u32>,
    /// Its command passed on to a worker, its answer being relayed.
    fwd: Option<Forward>,
    /// That command ended in `<<`: the lines up to an empty one follow it.
    payload: bool,
    /// A master command given a payload, run once its payload is read.
    master_payload: Option<String>,
    /// When it is closed if still silent (`None`: never).
    pub(super) deadline: Option<Instant>,
    /// `quit`, an error or the client's end: closed once the answers are
    /// out.
    closing: bool,
    /// To be closed now.
    pub(super) done: bool,
}

impl CliConn {
    fn new(s: Socket, level: CliLevel) -> CliConn {
        CliConn {
            s,
            inp: Vec::new(),
            eof: false,
            out: Vec::new(),
            sent: 0,
            prompt: false,
            level,
            experimental: false,
            expert: false,
            target: None,
            fwd: None,
            payload: false,
            master_payload: None,
            deadline: idle_deadline(false, Instant::now()),
            closing: false,
            done: false,
        }
    }

    fn unsent(&self) -> usize {
        self.out.len() - self.sent
    }

    /// HAProxy's master prompt, in interactive mode: `+ ` inside a
    /// payload, otherwise the target (`master`, with `[ReloadFailed]`
    /// after a failed reload, or the worker's pid), the modes in brackets
    /// (`x` experimental, `e` expert), then `> `.
    fn prompt_out(&mut self, failed: bool) {
        if !self.prompt {
            return;
        }
        if self.payload || self.master_payload.is_some() {
            self.out.extend_from_slice(b"+ ");
            return;
        }
        let mut p = match self.target {
            None if failed => "master[ReloadFailed]".to_string(),
            None => "master".to_string(),
            Some(pid) => pid.to_string(),
        };
        if self.experimental || self.expert {
            p.push('(');
            if self.experimental {
                p.push('x');
            }
            if self.expert {
                p.push('e');
            }
            p.push(')');
        }
        p.push_str("> ");
        self.out.extend_from_slice(p.as_bytes());
    }

    /// Reads what the client sent, up to the bound on a command.
    fn read_in(&mut self) {
        let mut b = [0u8; 4096];
        while !self.eof && self.inp.len() < MCLI_MAX_LINE {
            match (&self.s).read(&mut b) {
                Ok(0) => self.eof = true,
                Ok(n) => self.inp.extend_from_slice(&b[..n]),
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
                Err(_) => {
                    self.eof = true;
                    self.closing = true;
                }
            }
        }
    }

    /// What the master's loop polls for it: its socket (room for its
    /// answers, or its next bytes; once it has sent its end, only its
    /// hang-up), and the worker's its command waits on (`-1`: none).
    pub(super) fn poll_fds(&self) -> [(RawFd, i16); 2] {
        let me = if self.unsent() > 0 {
            libc::POLLOUT
        } else if self.eof || self.inp.len() >= MCLI_MAX_LINE {
            0
        } else {
            libc::POLLIN
        };
        let w = match &self.fwd {
            Some(f) if self.unsent() < OUT_HIGH => f.s.as_ref().map_or((-1, 0), |s| {
                let ev = if f.sent < f.req.len() {
                    libc::POLLOUT
                } else {
                    libc::POLLIN
                };
                (s.as_raw_fd(), ev)
            }),
            _ => (-1, 0),
        };
        [(self.s.as_raw_fd(), me), w]
    }

    /// How long the master's loop may wait before it must look at it (ms).
    pub(super) fn wait_ms(&self, now: Instant) -> i32 {
        let until = |d: Instant| d.saturating_duration_since(now).as_millis() as i32 + 1;
        match &self.fwd {
            Some(f) if f.s.is_none() => CONNECT_RETRY_MS,
            Some(f) => f.deadline.map_or(i32::MAX, until),
            None => self.deadline.map_or(i32::MAX, until),
        }
    }

    /// Silent (or not reading its answers) past its deadline outside
    /// interactive mode: to be closed. One whose command waits on a worker is answered at the
    /// forward's deadline instead (`Master::cli_timers`).
    pub(super) fn expired(&self, now: Instant) -> bool {
        self.fwd.is_none()
            && self.master_payload.is_none()
            && self.deadline.is_some_and(|d| d <= now)
    }

    /// Its socket hung up (fully closed by the client): to be closed,
    /// with the command it passed on.
    pub(super) fn hung_up(&mut self) {
        self.done = true;
    }

    /// Writes what the socket takes of the answers. `Err`: the client is
    /// gone.
    pub(super) fn flush(&mut self) -> io::Result<()> {
        while self.sent < self.out.len() {
            match (&self.s).write(&self.out[self.sent..]) {
                Ok(0) => return Err(io::ErrorKind::WriteZero.into()),
                Ok(n) => {
                    self.sent += n;
                    // A client reading its answers is not idle.
                    if self.deadline.is_some() {
                        self.deadline = Some(Instant::now() + MCLI_TIMEOUT);
                    }
                }
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Ok(()),
                Err(e) => return Err(e),
            }
        }
        self.out.clear();
        self.sent = 0;
        Ok(())
    }
}

/// The master's commands, as HAProxy 2.6's master CLI lists them.
const MASTER_HELP: &str =
    "  @!<pid>                                 : send a command to the <pid> process
  @<relative pid>                         : send a command to the <relative pid> process
  @master                                 : send a command to the master process
  operator                                : lower the level of the current CLI session to operator
  reload                                  : reload haproxy
  show cli level                          : display the level of the current CLI session
  show cli sockets                        : dump list of cli sockets
  show proc                               : show processes status
  show version                            : show version of the current process
  user                                    : lower the level of the current CLI session to user
  help [<command>]                        : list matching or all commands
  prompt                                  : toggle interactive mode with prompt
  quit                                    : disconnect

";

/// Takes the next command out of `inp`: up to a `;` or a newline that no
/// backslash escapes (the escapes stay, for the worker's CLI to read).
/// `None`: no whole command yet.
fn next_command(inp: &mut Vec<u8>) -> Option<String> {
    let mut i = 0;
    while i < inp.len() {
        match inp[i] {
            b'\\' => i += 2,
            b';' | b'\n' => {
                let cmd: Vec<u8> = inp.drain(..=i).collect();
                let cmd = String::from_utf8_lossy(&cmd[..i]);
                return Some(cmd.trim_end_matches('\r').to_string());
            }
            _ => i += 1,
        }
    }
    None
}

/// Takes the next line out of `inp` (a payload's), without its newline.
fn next_line(inp: &mut Vec<u8>) -> Option<String> {
    let nl = inp.iter().position(|&c| c == b'\n')?;
    let line: Vec<u8> = inp.drain(..=nl).collect();
    Some(
        String::from_utf8_lossy(&line[..nl])
            .trim_end_matches('\r')
            .to_string(),
    )
}

/// A command's words, split on spaces and tabs; a backslash keeps the
/// character after it in the word (and stays, for the worker).
fn split_words(cmd: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut cur = String::new();
    let mut esc = false;
    for c in cmd.chars() {
        if esc {
            esc = false;
            cur.push(c);
        } else if c == '\\' {
            esc = true;
            cur.push(c);
        } else if c == ' ' || c == '\t' {
            if !cur.is_empty() {
                out.push(std::mem::take(&mut cur));
            }
        } else {
            cur.push(c);
        }
    }
    if !cur.is_empty() {
        out.push(cur);
    }
    out
}

/// A command passed on to a worker's CLI, never blocking the master: it
/// connects, sends the command (and its payload as it comes), and relays
/// the answer to its end as it comes, each step as far as the socket
/// goes. The worker has [`FORWARD_TIMEOUT`] to take the command and start
/// answering; an answer under way (`show events RING -w`) has no bound.
struct Forward {
    path: PathBuf,
    /// `None` until connected (the worker's listen queue was full: tried
    /// again).
    s: Option<Socket>,
    req: Vec<u8>,
    sent: usize,
    /// Past it with no answer yet, the command fails (`None`: a payload
    /// is still being read from the client).
    deadline: Option<Instant>,
    /// Some of the answer came.
    answering: bool,
}

impl Forward {
    fn new(path: &Path, cmd: &str, whole: bool) -> Forward {
        Forward {
            path: path.to_path_buf(),
            s: None,
            req: format!("{cmd}\n").into_bytes(),
            sent: 0,
            deadline: whole.then(|| Instant::now() + FORWARD_TIMEOUT),
            answering: false,
        }
    }

    /// Moves it on as far as the sockets go, the answer's bytes added to
    /// `out`. True: the answer is over (the worker closed).
    fn pump(&mut self, now: Instant, out: &mut Vec<u8>) -> io::Result<bool> {
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
                Ok(n) => self.sent += n,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return self.unless_late(now),
                Err(e) => return Err(e),
            }
        }
        let mut b = [0u8; 16384];
        let start = out.len();
        loop {
            if out.len() - start >= OUT_HIGH {
                return Ok(false);
            }
            match (&*s).read(&mut b) {
                Ok(0) => return Ok(true),
                Ok(n) => {
                    out.extend_from_slice(&b[..n]);
                    self.answering = true;
                }
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return self.unless_late(now),
                Err(e) => return Err(e),
            }
        }
    }

    /// Nothing more for now: wait, unless its time is up.
    fn unless_late(&self, now: Instant) -> io::Result<bool> {
        if !self.answering && self.deadline.is_some_and(|d| now >= d) {
            return Err(io::ErrorKind::TimedOut.into());
        }
        Ok(false)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn commands_end_at_unescaped_semicolons_and_newlines() {
        let mut inp = b"@1 add acl f Mon\\ Agent\\;;@1 show acl f\nshow".to_vec();
        assert_eq!(
            next_command(&mut inp).as_deref(),
            Some("@1 add acl f Mon\\ Agent\\;")
        );
        assert_eq!(next_command(&mut inp).as_deref(), Some("@1 show acl f"));
        assert_eq!(next_command(&mut inp), None);
        assert_eq!(inp, b"show");
        assert_eq!(split_words(" @1  a\\ b\tc"), vec!["@1", "a\\ b", "c"]);
    }

    #[test]
    fn master_cli_options_are_read_as_haproxy_does() {
        let s = parse_mcli("/x.sock,,mode,600,level,operator,expose-fd,listeners").unwrap();
        assert_eq!(
            (s.mode, s.level, s.expose_fd),
            (Some(0o600), CliLevel::Operator, true)
        );
        assert_eq!(
            parse_mcli("/x.sock,mode,600,level,foo").unwrap_err(),
            "'/x.sock mode' : ''level' only supports 'user', 'operator', and 'admin' (got 'foo')'"
        );
        assert_eq!(
            parse_mcli("/x.sock,foo").unwrap_err(),
            "'/x.sock foo' : unknown keyword 'foo'."
        );
        assert!(parse_mcli("127.0.0.1:1,mode,600").is_err());
        assert_eq!(
            parse_mcli("/x.sock,uid,7,gid,8").unwrap().owner,
            (Some(7), Some(8))
        );
    }
}
