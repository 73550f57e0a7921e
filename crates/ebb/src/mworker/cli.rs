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
//! A command sent to a worker (`@N`) waits for that worker's answer (up
//! to 10 s). A `reload` is done once the line's answers are out as far
//! as the sockets take them (the re-exec closes every connection).

use std::io::{self, Read, Write};
use std::os::unix::net::UnixStream;
use std::path::PathBuf;
use std::time::{Duration, Instant, SystemTime};

use socket2::Socket;

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
    /// or sends more of its answer. True: a `reload` was asked for (done
    /// by the caller once the answers are out).
    pub(super) fn on_cli(&mut self, k: usize) -> bool {
        let c = &mut self.conns[k];
        if c.out.is_some() {
            c.flush();
            return false;
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
        let mut out = String::new();
        let mut reload = false;
        for cmd in split_commands(&text) {
            let cmd = cmd.trim();
            if cmd.is_empty() {
                continue;
            }
            match self.command(cmd, &mut out) {
                Some(true) => reload = true,
                Some(false) => {}
                None => break,
            }
        }
        let c = &mut self.conns[k];
        c.inp = Vec::new();
        c.out = Some((out.into_bytes(), 0));
        c.deadline = Instant::now() + MCLI_TIMEOUT;
        c.flush();
        reload
    }

    /// Runs one master CLI command; `Some(true)`: reload after answering;
    /// `None`: stop (quit).
    fn command(&mut self, cmd: &str, out: &mut String) -> Option<bool> {
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
                Some(w) => out.push_str(&forward(&w.cli, sub.trim())),
                None => out.push_str(&format!(
                    "Can't find the target PID matching the prefix '@{target}'\n"
                )),
            }
            return Some(false);
        }
        match cmd.split_whitespace().collect::<Vec<_>>()[..] {
            ["show", "proc"] => out.push_str(&self.show_proc()),
            ["reload"] => return Some(true),
            ["quit"] => return None,
            ["help"] | [] => out.push_str(MASTER_HELP),
            _ => {
                out.push_str(&format!("Unknown command: '{cmd}'\n"));
                out.push_str(MASTER_HELP);
            }
        }
        Some(false)
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
        o.push_str("# workers\n");
        for &i in &self.by_age() {
            let w = &self.workers[i];
            if !w.old {
                o.push_str(&format!(
                    "{:<15} {:<15} {:<15} {:<15} {ver}\n",
                    w.pid,
                    "worker",
                    self.reloads - w.gen,
                    up(w.started)
                ));
            }
        }
        o.push_str("# old workers\n");
        for &i in &self.by_age() {
            let w = &self.workers[i];
            if w.old {
                o.push_str(&format!(
                    "{:<15} {:<15} {:<15} {:<15} {ver}\n",
                    w.pid,
                    "worker",
                    self.reloads - w.gen,
                    up(w.started)
                ));
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
/// Master CLI connections served at once; more wait in the listen queue.
pub(super) const MCLI_MAX_CONNS: usize = 64;
/// The longest command line the master CLI reads.
const MCLI_MAX_LINE: usize = 64 * 1024;

/// One master CLI connection: its line being read, then its answer being
/// written, never blocking the master's loop.
pub(super) struct CliConn {
    pub(super) s: Socket,
    inp: Vec<u8>,
    /// The answer and how much of it is sent.
    pub(super) out: Option<(Vec<u8>, usize)>,
    pub(super) deadline: Instant,
    /// Answered in full, or failed: to be closed.
    pub(super) done: bool,
}

impl CliConn {
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

/// Sends one command to a worker's CLI; its whole answer.
fn forward(path: &std::path::Path, cmd: &str) -> String {
    let r = (|| -> io::Result<String> {
        let mut s = UnixStream::connect(path)?;
        s.set_read_timeout(Some(Duration::from_secs(10)))?;
        s.write_all(format!("{cmd}\n").as_bytes())?;
        let _ = s.shutdown(std::net::Shutdown::Write);
        let mut out = String::new();
        s.read_to_string(&mut out)?;
        Ok(out)
    })();
    r.unwrap_or_else(|e| format!("Can't reach the worker: {e}\n"))
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
