//! The master CLI (`-S ADDR[,OPTION,VALUE...]`, ADDR a path, `unix@PATH`,
//! `fd@N`, `ipv4@IP:PORT` or `IP:PORT`), as HAProxy 2.6's: a connection
//! stays open for as many commands as the client sends (until it closes
//! or sends `quit`), each command ended by `;` or a newline (a `\;` stays
//! in its command). The master's own commands are `show proc`, `reload`,
//! `show version`, `show cli level`, `show cli sockets`, `help`; any
//! other is answered HAProxy's usage message (`crate::cli::usage`); `@N CMD` / `@!PID CMD` send
//! CMD to a worker's CLI (`@1` the current worker, `@2`... older ones, by
//! age; `@0`, `@` or `@master` the master itself), and a prefix alone
//! (`@1`) makes that process the target of the commands that follow.
//! `prompt` toggles interactive mode: after each answer a prompt names
//! the target (`master> `, `PID> `, `+ ` inside a payload). `operator`
//! and `user` lower the session's level (the socket's is `level`, admin
//! by default), `experimental-mode on` and `expert-mode on` turn those
//! modes on; all are passed on to each command a worker runs.
//! `mcli-debug-mode on` (admin) shows `d` in the prompt and is passed on
//! to the master's own commands only, as HAProxy's; ebb's master has no
//! worker commands for it to open, so its commands stay those above.
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

mod commands;
mod conn;
mod framing;
mod options;
mod prompt;
mod relay;

use std::time::Instant;

pub(super) use conn::{CliConn, MCLI_MAX_CONNS};
pub(super) use options::{bind_mcli, McliSocket};

use super::Master;
use crate::config::CliLevel;
use conn::{MCLI_MAX_LINE, OUT_HIGH};
use framing::{next_command, next_line, split_words};
use prompt::idle_deadline;
use relay::{Forward, FORWARD_TIMEOUT};

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
                m @ ("experimental-mode" | "expert-mode" | "mcli-debug-mode") => {
                    if c.level < CliLevel::Admin {
                        deny(c);
                        return false;
                    }
                    // As HAProxy: `on` sets it, anything else (or
                    // nothing) clears it.
                    let on = words.get(1).is_some_and(|w| w == "on");
                    *match m {
                        "expert-mode" => &mut c.expert,
                        "experimental-mode" => &mut c.experimental,
                        _ => &mut c.debug,
                    } = on;
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
            for on in [c.expert, c.experimental, c.debug] {
                if on {
                    out.push_str("Permission denied\n");
                }
            }
        }
        let reload = self.master_command(cmd, &self.conns[k], &mut out);
        let c = &mut self.conns[k];
        // The refusals before a `reload` go out too, as HAProxy's.
        c.out.extend_from_slice(out.as_bytes());
        if reload {
            return true;
        }
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
}
