//! A command passed on to a worker's CLI and its answer relayed.

use std::io::{self, Read, Write};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use socket2::{Domain, SockAddr, Socket, Type};

use super::conn::OUT_HIGH;

/// How long a worker has to take a command passed on to it and start
/// answering.
pub(super) const FORWARD_TIMEOUT: Duration = Duration::from_secs(10);
/// How often a command passed on to a worker whose listen queue is full
/// tries again to connect.
pub(super) const CONNECT_RETRY_MS: i32 = 10;

/// A command passed on to a worker's CLI, never blocking the master: it
/// connects, sends the command (and its payload as it comes), and relays
/// the answer to its end as it comes, each step as far as the socket
/// goes. The worker has [`FORWARD_TIMEOUT`] to take the command and start
/// answering; an answer under way (`show events RING -w`) has no bound.
pub(super) struct Forward {
    pub(super) path: PathBuf,
    /// `None` until connected (the worker's listen queue was full: tried
    /// again).
    pub(super) s: Option<Socket>,
    pub(super) req: Vec<u8>,
    pub(super) sent: usize,
    /// Past it with no answer yet, the command fails (`None`: a payload
    /// is still being read from the client).
    pub(super) deadline: Option<Instant>,
    /// Some of the answer came.
    pub(super) answering: bool,
}

impl Forward {
    pub(super) fn new(path: &Path, cmd: &str, whole: bool) -> Forward {
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
    pub(super) fn pump(&mut self, now: Instant, out: &mut Vec<u8>) -> io::Result<bool> {
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
