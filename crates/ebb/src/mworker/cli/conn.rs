//! One master CLI connection: what it read, what it owes, its session
//! (level, modes, target), never blocking the master's loop.

use std::io::{self, Read, Write};
use std::os::fd::{AsRawFd, RawFd};
use std::time::{Duration, Instant};

use socket2::Socket;

use super::prompt::idle_deadline;
use super::relay::{Forward, CONNECT_RETRY_MS};
use crate::config::CliLevel;

/// Outside interactive mode, how long a master CLI client has to send its
/// next command.
pub(super) const MCLI_TIMEOUT: Duration = Duration::from_secs(5);
/// Master CLI connections served at once; more wait in the listen queue.
pub(in crate::mworker) const MCLI_MAX_CONNS: usize = 64;
/// The longest command the master CLI reads.
pub(super) const MCLI_MAX_LINE: usize = 64 * 1024;
/// While this much of a client's answers is unsent, neither its next
/// command nor more of a worker's answer is read.
pub(super) const OUT_HIGH: usize = 64 * 1024;

/// One master CLI connection: its commands being read, run or passed on,
/// their answers written, never blocking the master's loop.
pub(in crate::mworker) struct CliConn {
    pub(in crate::mworker) s: Socket,
    pub(super) inp: Vec<u8>,
    /// The client has sent all it will: the commands read still run.
    pub(super) eof: bool,
    /// The answers, and how much of them is sent.
    pub(super) out: Vec<u8>,
    pub(super) sent: usize,
    /// Interactive mode (`prompt`).
    pub(super) prompt: bool,
    /// The session's level: the socket's, lowered by `operator`/`user`.
    pub(super) level: CliLevel,
    /// `experimental-mode on`, `expert-mode on`.
    pub(super) experimental: bool,
    pub(super) expert: bool,
    /// `mcli-debug-mode on`.
    pub(super) debug: bool,
    /// Where a command without a prefix goes: `None` the master, or a
    /// worker's pid (a prefix alone, `@1`).
    pub(super) target: Option<u32>,
    /// Its command passed on to a worker, its answer being relayed.
    pub(super) fwd: Option<Forward>,
    /// That command ended in `<<`: the lines up to an empty one follow it.
    pub(super) payload: bool,
    /// A master command given a payload, run once its payload is read.
    pub(super) master_payload: Option<String>,
    /// When it is closed if still silent (`None`: never).
    pub(super) deadline: Option<Instant>,
    /// `quit`, an error or the client's end: closed once the answers are
    /// out.
    pub(super) closing: bool,
    /// To be closed now.
    pub(in crate::mworker) done: bool,
}

impl CliConn {
    pub(super) fn new(s: Socket, level: CliLevel) -> CliConn {
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
            debug: false,
            target: None,
            fwd: None,
            payload: false,
            master_payload: None,
            deadline: idle_deadline(false, Instant::now()),
            closing: false,
            done: false,
        }
    }

    pub(super) fn unsent(&self) -> usize {
        self.out.len() - self.sent
    }

    /// Reads what the client sent, up to the bound on a command.
    pub(super) fn read_in(&mut self) {
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
    pub(in crate::mworker) fn poll_fds(&self) -> [(RawFd, i16); 2] {
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
    pub(in crate::mworker) fn wait_ms(&self, now: Instant) -> i32 {
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
    pub(in crate::mworker) fn expired(&self, now: Instant) -> bool {
        self.fwd.is_none()
            && self.master_payload.is_none()
            && self.deadline.is_some_and(|d| d <= now)
    }

    /// Its socket hung up (fully closed by the client): to be closed,
    /// with the command it passed on.
    pub(in crate::mworker) fn hung_up(&mut self) {
        self.done = true;
    }

    /// Writes what the socket takes of the answers. `Err`: the client is
    /// gone.
    pub(in crate::mworker) fn flush(&mut self) -> io::Result<()> {
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
