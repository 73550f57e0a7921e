//! The `stats socket` listener and its connections, on the scheduler.
//!
//! The UNIX socket is bound at start-up, before `ebb: ready` (so a script
//! may connect as soon as it reads that line), and served by thread 0. A
//! CLI connection is two scheduler objects: a tasklet registered for the
//! socket's readiness, which only wakes a *task*, and that task, which
//! reads lines, runs the commands and writes the answers (HAProxy's
//! shape: the connection's tasklet wakes the stream's task). The task
//! creates its tasklet on its first run, when it knows its own id, and
//! keeps the tasklet's id to kill it when the connection ends. The task has a
//! negative `nice` (default −1024: HAProxy's figure for its CLI is −64
//! relative to traffic at 0; ebb takes the strongest, since a CLI command
//! is rare and short), so under full load it runs ahead of every queued
//! traffic task and the socket still answers.
//!
//! A connection ends after its first line (non-interactive mode), on
//! `quit`, at EOF, or after `stats timeout` (HAProxy's default: 10 s) of
//! silence. A line ending in `<<` is a command with a payload, HAProxy's
//! framing: the lines after it, up to an empty one, are its payload (all
//! of it within [`MAX_LINE`]), and the command runs then.

use std::io::{self, Read, Write};
use std::os::fd::{AsRawFd, RawFd};
use std::os::unix::fs::{FileTypeExt, PermissionsExt};
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::PathBuf;
use std::sync::Arc;

use sched::{ticks, Ctx, Reasons, Status, TaskFn, TaskId, TaskletFn, TaskletId, ETERNITY};

use crate::config::{CliLevel, StatsSocket};
use crate::registry::Process;

/// The CLI's default nice (see the module documentation).
pub const DEFAULT_NICE: i32 = -1024;

/// HAProxy's default `stats timeout`.
pub const DEFAULT_TIMEOUT_MS: u32 = 10_000;

/// A line longer than this is refused (HAProxy's CLI buffer is 16 KiB; a
/// `;`-separated batch of commands fits many times over).
const MAX_LINE: usize = 64 * 1024;

/// While this much of the answers is unsent, no further line is read or
/// run: a client that sends commands without reading the answers is held
/// by its own socket buffer, not by ebb's memory (each `help` of 5 bytes
/// wrote 3 KiB: 1 MiB of lines grew the connection's buffer by 600 MiB).
const OUT_HIGH: usize = 64 * 1024;

/// A bound CLI socket.
pub struct CliSocket {
    /// A UNIX socket, or any stream socket inherited with `fd@N`.
    pub listener: socket2::Socket,
    /// The socket file ebb created (removed at exit); `None` for `fd@N`.
    pub path: Option<PathBuf>,
    pub level: CliLevel,
    pub nice: i32,
    /// `expose-fd listeners`: `_getsocks` is answered.
    pub expose_fd: bool,
}

/// Binds a `stats socket` line. A stale socket file (nobody answering on
/// it) is replaced; a live one is an error.
pub fn bind(s: &StatsSocket) -> io::Result<CliSocket> {
    if let Some(listener) = crate::handover::take_cli(&s.path) {
        // Inherited from a master: its file is the master's to remove.
        return Ok(CliSocket {
            listener,
            path: None,
            level: s.level,
            nice: s.nice.unwrap_or(DEFAULT_NICE),
            expose_fd: s.expose_fd,
        });
    }
    if let Some(Ok(spec @ crate::config::SockSpec::Fd(_))) = crate::config::parse_sock_spec(&s.path)
    {
        let (mut socks, _) = crate::listener::bind_spec(&spec, 1, 16, Default::default())?;
        return Ok(CliSocket {
            listener: socks.remove(0),
            path: None,
            level: s.level,
            nice: s.nice.unwrap_or(DEFAULT_NICE),
            expose_fd: s.expose_fd,
        });
    }
    // `ipv4@ADDR:PORT`, `ipv6@...` or `ADDR:PORT`: the CLI on TCP.
    let tcp = ["ipv4@", "ipv6@", "tcp@", "tcp4@", "tcp6@"]
        .iter()
        .find_map(|p| s.path.strip_prefix(p))
        .or_else(|| {
            (!s.path.starts_with('/') && !s.path.contains('@') && s.path.contains(':'))
                .then_some(s.path.as_str())
        });
    if let Some(a) = tcp {
        let addr = crate::config::parse_bind_addrs(a)
            .map_err(|e| io::Error::new(io::ErrorKind::InvalidInput, e))?;
        let [addr] = addr[..] else {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                "a TCP stats socket takes one address and one port",
            ));
        };
        let l = std::net::TcpListener::bind(addr)?;
        l.set_nonblocking(true)?;
        return Ok(CliSocket {
            listener: l.into(),
            path: None,
            level: s.level,
            nice: s.nice.unwrap_or(DEFAULT_NICE),
            expose_fd: s.expose_fd,
        });
    }
    let raw = s.path.strip_prefix("unix@").unwrap_or(&s.path);
    let path = PathBuf::from(raw);
    if let Ok(m) = std::fs::symlink_metadata(&path) {
        if !m.file_type().is_socket() {
            return Err(io::Error::new(
                io::ErrorKind::AlreadyExists,
                "the path exists and is not a socket",
            ));
        }
        if UnixStream::connect(&path).is_ok() {
            return Err(io::Error::new(
                io::ErrorKind::AddrInUse,
                "another process answers on this socket",
            ));
        }
        std::fs::remove_file(&path)?;
    }
    let listener = UnixListener::bind(&path)?;
    listener.set_nonblocking(true)?;
    if let Some(mode) = s.mode {
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(mode))?;
    }
    if s.owner != (None, None) {
        std::os::unix::fs::chown(&path, s.owner.0, s.owner.1)?;
    }
    Ok(CliSocket {
        listener: listener.into(),
        path: Some(path),
        level: s.level,
        nice: s.nice.unwrap_or(DEFAULT_NICE),
        expose_fd: s.expose_fd,
    })
}

struct Acceptor {
    sock: Option<CliSocket>,
    process: Arc<Process>,
    timeout_ms: u32,
}

impl TaskletFn for Acceptor {
    fn run(&mut self, ctx: &mut Ctx, me: TaskletId, why: Reasons) -> Status {
        if why.intersects(Reasons::IO) {
            let _ = ctx.take_events(me);
        }
        let Some(s) = &self.sock else {
            return Status::Done;
        };
        if why.intersects(Reasons::SIGNAL) || ctx.stopping() {
            let _ = ctx.deregister_fd(s.listener.as_raw_fd());
            self.sock = None;
            return Status::Done;
        }
        // A few per wakeup; the rest after other work had its turn.
        for _ in 0..16 {
            match s.listener.accept() {
                Ok((st, _)) => {
                    let _ = spawn(
                        ctx,
                        st.into(),
                        (s.level, s.expose_fd),
                        s.nice,
                        &self.process,
                        self.timeout_ms,
                    );
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Status::Continue,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(_) => return Status::Continue,
            }
        }
        ctx.tasklet_wakeup(me);
        Status::Continue
    }
}

/// Starts serving a bound socket on the calling thread.
pub fn start(
    ctx: &mut Ctx,
    sock: CliSocket,
    process: Arc<Process>,
    timeout_ms: u32,
) -> io::Result<()> {
    let fd = sock.listener.as_raw_fd();
    let id = ctx.new_tasklet_obj(
        "cli_accept",
        Acceptor {
            sock: Some(sock),
            process,
            timeout_ms,
        },
    );
    if let Err(e) = ctx.register_fd(fd, id, false) {
        ctx.kill_tasklet(id);
        return Err(e);
    }
    ctx.on_stop_tasklet(id);
    ctx.tasklet_wakeup(id);
    Ok(())
}

struct CliConn {
    sock: UnixStream,
    fd: RawFd,
    level: CliLevel,
    expose_fd: bool,
    process: Arc<Process>,
    inbuf: Vec<u8>,
    out: Vec<u8>,
    opos: usize,
    interactive: bool,
    /// `experimental-mode on`, `expert-mode on` given on this connection.
    modes: super::Modes,
    closing: bool,
    /// The client has sent all it will (EOF, an error, or too much
    /// unread): the lines read are still run, then the connection ends.
    eof: bool,
    /// The last read stopped at the buffer's bound, not at the socket's
    /// end of data (an edge-triggered socket will not say it again).
    full: bool,
    /// The readiness tasklet, created by the task's first run.
    io: Option<TaskletId>,
    timeout_ms: u32,
    /// A command given with a payload (a line ending in `<<`, HAProxy's
    /// pattern) and the payload's lines so far, until an empty line.
    payload: Option<(String, String)>,
    /// `show events RING -w` running: the ring and the number of the next
    /// message to print.
    watch: Option<(Arc<crate::ring::Ring>, u64)>,
    /// This connection's token in a ring's waiters.
    token: u64,
}

/// Tokens for [`CliConn::token`].
static TOKENS: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(1);

fn spawn(
    ctx: &mut Ctx,
    st: UnixStream,
    (level, expose_fd): (CliLevel, bool),
    nice: i32,
    process: &Arc<Process>,
    timeout_ms: u32,
) -> io::Result<()> {
    st.set_nonblocking(true)?;
    let fd = st.as_raw_fd();
    let conn = CliConn {
        sock: st,
        fd,
        level,
        expose_fd,
        process: Arc::clone(process),
        inbuf: Vec::new(),
        out: Vec::new(),
        opos: 0,
        interactive: false,
        modes: super::Modes::default(),
        closing: false,
        eof: false,
        full: false,
        io: None,
        timeout_ms,
        payload: None,
        watch: None,
        token: TOKENS.fetch_add(1, std::sync::atomic::Ordering::Relaxed),
    };
    let task = ctx.new_task_obj("cli_conn", conn);
    ctx.set_nice(task, nice);
    ctx.set_expire(task, ticks::add(ctx.now(), timeout_ms));
    ctx.wakeup(task, Reasons::INIT);
    Ok(())
}

impl CliConn {
    fn close(&mut self, ctx: &mut Ctx) -> Status {
        if let Some((r, _)) = self.watch.take() {
            r.unwait(self.token);
        }
        let _ = ctx.deregister_fd(self.fd);
        if let Some(io) = self.io.take() {
            ctx.kill_tasklet(io);
        }
        let _ = self.sock.shutdown(std::net::Shutdown::Both);
        Status::Done
    }

    /// Reads what the socket has, until the buffer holds [`MAX_LINE`]
    /// bytes (then `full` is set: more may wait in the socket, read once
    /// these lines have run). Returns false at EOF or error.
    fn read_in(&mut self) -> bool {
        let mut tmp = [0u8; 4096];
        self.full = false;
        loop {
            if self.inbuf.len() >= MAX_LINE {
                self.full = true;
                return true;
            }
            match self.sock.read(&mut tmp) {
                Ok(0) => return false,
                Ok(n) => self.inbuf.extend_from_slice(&tmp[..n]),
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return true,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(_) => return false,
            }
        }
    }

    fn flush(&mut self) -> io::Result<()> {
        while self.opos < self.out.len() {
            match self.sock.write(&self.out[self.opos..]) {
                Ok(0) => return Err(io::ErrorKind::WriteZero.into()),
                Ok(n) => self.opos += n,
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Ok(()),
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(e),
            }
        }
        self.out.clear();
        self.opos = 0;
        Ok(())
    }

    /// The answers not yet sent.
    fn unsent(&self) -> usize {
        self.out.len() - self.opos
    }

    /// `show events -w`: queues the new messages and asks the ring to
    /// wake the task at the next one. As HAProxy 2.6 does, what the client
    /// sends (or its end) stops the command only once a new message has
    /// been printed; the rest of its input is thrown away.
    /// `first`: the command has just started (its first messages are in
    /// its answer).
    fn watch(&mut self, me: TaskId, first: bool) {
        let Some((ring, next)) = self.watch.clone() else {
            return;
        };
        if self.unsent() >= OUT_HIGH {
            return;
        }
        let (msgs, n) = ring.events_from(Some(next), false);
        let news = !msgs.is_empty();
        for m in msgs {
            self.out.extend_from_slice(&m);
            self.out.push(b'\n');
        }
        if (news || first) && (!self.inbuf.is_empty() || self.eof) {
            ring.unwait(self.token);
            self.watch = None;
            self.inbuf.clear();
            self.out.push(b'\n');
            if self.interactive && !self.eof {
                self.out.extend_from_slice(b"> ");
            } else {
                self.closing = true;
            }
            return;
        }
        self.watch = Some((ring.clone(), n));
        let h = self.process.handle.clone();
        ring.wait_after(
            n,
            self.token,
            Box::new(move || h.wake_task(me, Reasons::MSG)),
        );
    }

    fn lines(&mut self, ctx: &mut Ctx) {
        while !self.closing && self.watch.is_none() && self.unsent() < OUT_HIGH {
            let Some(nl) = self.inbuf.iter().position(|&c| c == b'\n') else {
                if self.inbuf.len() >= MAX_LINE {
                    self.out.extend_from_slice(b"Line too long.\n\n");
                    self.closing = true;
                }
                return;
            };
            let raw: Vec<u8> = self.inbuf.drain(..=nl).collect();
            let line = String::from_utf8_lossy(&raw);
            let line = line.trim_end_matches(['\n', '\r']);
            if line == "_getsocks" && self.expose_fd {
                // HAProxy's socket transfer (crate::handover); the
                // connection ends with it.
                if let Err(e) = crate::handover::serve_getsocks(&self.sock) {
                    eprintln!("ebb: _getsocks: {e}");
                }
                let _ = self.sock.set_nonblocking(true);
                self.closing = true;
                return;
            }
            let r = match self.payload.take() {
                // The payload's lines, up to the empty one that ends it.
                Some((cmd, mut body)) if !line.is_empty() => {
                    if cmd.len() + body.len() + line.len() >= MAX_LINE {
                        self.out.extend_from_slice(b"Line too long.\n\n");
                        self.closing = true;
                        return;
                    }
                    body.push_str(line);
                    body.push('\n');
                    self.payload = Some((cmd, body));
                    continue;
                }
                Some((cmd, body)) => super::execute_payload(self.level, &cmd, &body),
                None if line.ends_with("<<") => {
                    self.payload = Some((line[..line.len() - 2].to_string(), String::new()));
                    continue;
                }
                None => {
                    let process = Arc::clone(&self.process);
                    let mut modes = self.modes;
                    let r = super::execute_line(
                        &process,
                        &mut self.level,
                        line,
                        &mut modes,
                        &mut |f| {
                            ctx.isolate(|_| f());
                        },
                    );
                    self.modes = modes;
                    r
                }
            };
            self.out.extend_from_slice(r.text.as_bytes());
            if let Some(t) = r.timeout_ms {
                self.timeout_ms = t;
            }
            if r.prompt_toggles % 2 == 1 {
                self.interactive = !self.interactive;
            }
            if let Some((name, next)) = r.watch {
                if let Some(ring) = crate::ring::find(&name) {
                    self.watch = Some((ring, next));
                    return;
                }
            }
            if r.quit || !self.interactive {
                self.closing = true;
                return;
            }
            self.out.extend_from_slice(b"> ");
        }
    }
}

impl TaskFn for CliConn {
    fn run(&mut self, ctx: &mut Ctx, me: TaskId, why: Reasons) -> Status {
        if why.intersects(Reasons::TIMER) && ticks::is_expired(ctx.expire(me), ctx.now()) {
            return self.close(ctx);
        }
        if ctx.stopping() {
            return self.close(ctx);
        }
        if self.io.is_none() {
            let io = ctx.new_tasklet_obj("cli_io", crate::net::WakeTask { task: me });
            self.io = Some(io);
            if ctx.register_fd(self.fd, io, true).is_err() {
                return self.close(ctx);
            }
        }
        loop {
            if !self.closing && self.unsent() < OUT_HIGH {
                if !self.eof && !self.read_in() {
                    self.eof = true;
                    if !self.inbuf.is_empty() && !self.inbuf.ends_with(b"\n") {
                        // A last command without its newline still runs.
                        self.inbuf.push(b'\n');
                    }
                }
                if self.watch.is_some() {
                    self.watch(me, false);
                } else {
                    self.lines(ctx);
                    if self.watch.is_some() {
                        self.watch(me, true);
                    }
                }
                if self.watch.is_none() && self.eof && !self.inbuf.contains(&b'\n') {
                    self.closing = true;
                }
            }
            if self.flush().is_err() {
                return self.close(ctx);
            }
            if self.closing && self.out.is_empty() {
                return self.close(ctx);
            }
            // All sent and more to read or run: go on; otherwise wait for
            // the socket (readable, or writable again), or for the ring
            // (`show events -w`).
            if self.closing || !self.out.is_empty() || self.watch.is_some() {
                break;
            }
            if !self.eof && !self.full && !self.inbuf.contains(&b'\n') {
                break;
            }
        }
        ctx.set_expire(
            me,
            if self.timeout_ms == 0 || self.watch.is_some() {
                ETERNITY
            } else {
                ticks::add(ctx.now(), self.timeout_ms)
            },
        );
        Status::Continue
    }
}
