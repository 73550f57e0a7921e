//! `peers`: stick tables shared with other instances (ebb or HAProxy) over
//! HAProxy's peers protocol 2.1 ([`proto`] has the messages).
//!
//! ## Tasks (all on thread 0)
//!
//! - **listener** (a tasklet on the local peer's address): accepts, and
//!   runs each new connection's handshake in a small **hello** task (three
//!   lines, then a status: 200, or HAProxy's refusal codes 300/501-504);
//!   an accepted connection is handed to its peer's task.
//! - **one task per remote peer**: the only owner of that peer's
//!   connection, incoming or outgoing. It connects (at start, then again
//!   5 s after each attempt, as HAProxy's reconnect timeout; 50-2050 ms
//!   after a collision or a silent peer), sends the hello, and once
//!   established: announces each table (definition message) before its
//!   updates, pushes the local updates not yet acknowledged (batched: all
//!   that is waiting when it runs), applies the peer's updates to the
//!   local table (`conn_cur` excepted, as HAProxy), acknowledges them,
//!   teaches everything on a resync request, sends a heartbeat after 3 s
//!   of silence, and drops a connection that said nothing for 5-10 s. A
//!   message that does not parse gets a protocol error message, a log
//!   line and a close; the rest of ebb goes on.
//! - **the section's sync task**: woken by the tables on a local update
//!   (once per batch, [`crate::table::Table::set_sync_waker`]), it wakes
//!   the peer tasks; it also runs the start-up resync: wait 5 s for an old
//!   local process (after `-sf`), then ask one connected peer for a full
//!   resync (another one if it was not up to date itself), give up 5 s
//!   after the last try, as HAProxy.
//!
//! - **the local peer's task**: idle while ebb runs (an old process of
//!   a reload may connect to it and teach the tables; ebb takes that
//!   lesson during its first 5 s after `-sf`/`-st`); once ebb stops, it
//!   waits for the listener to close, connects to the local peer's
//!   address (the new process's by then), teaches every entry and leaves
//!   on the new process's confirm (at most 10 s), as HAProxy's reload.
//!
//! What a peer acknowledged survives reconnections: a new connection
//! pushes from the last acknowledged update, as HAProxy does.

pub mod proto;
mod show;

pub use show::show;

use std::cell::RefCell;
use std::collections::HashMap;
use std::io::{self, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::os::fd::{AsRawFd, RawFd};
use std::rc::Rc;
use std::sync::Arc;

use sched::{ticks, Ctx, Reasons, RuntimeHandle, Status, TaskFn, TaskId, TaskletFn, TaskletId};

use crate::config::{BindSsl, Config, Loc, PeerListen, ServerOptions};
use crate::table::{Table, Tables};
use proto::*;

/// HAProxy's timers (`PEER_RECONNECT_TIMEOUT`, `PEER_HEARTBEAT_TIMEOUT`,
/// `PEER_RESYNC_TIMEOUT`) and its peers frontend's client timeout.
const RECONNECT_MS: u32 = 5000;
const HEARTBEAT_MS: u32 = 3000;
const RESYNC_MS: u32 = 5000;
const HELLO_TIMEOUT_MS: u32 = 5000;
/// Updates sent per table per run, so one peer never holds the thread.
const PUSH_BATCH: usize = 2000;
/// Bytes queued for a peer beyond which nothing more is queued until the
/// socket takes them.
const OUT_MAX: usize = 256 * 1024;

/// Where peers events go (a log line without the prefix).
pub type LogFn = Arc<dyn Fn(String) + Send + Sync>;

/// One peers section that runs: its local peer, its remote peers and the
/// tables that name it.
pub struct PeersRt {
    pub name: String,
    pub local: String,
    pub listen: PeerListen,
    /// Each remote peer: its name, address and TLS options (`ssl`).
    pub remotes: Vec<(String, SocketAddr, Option<ServerOptions>)>,
    pub tables: Vec<Arc<Table>>,
    /// The `bind` line's TLS settings (`bind ... ssl crt FILE`) and its
    /// place, for its errors.
    pub bind_ssl: Option<BindSsl>,
    pub loc: Loc,
    /// The local peer's TLS options: a reload's processes talk so.
    pub local_tls: Option<ServerOptions>,
}

/// The sections to run for a compiled configuration: those not disabled
/// whose local peer is declared (the configuration check refused a table
/// naming one without). A section no table names still listens, as
/// HAProxy's does.
pub fn build(cfg: &Config, tables: &Tables) -> Vec<PeersRt> {
    let mut out = Vec::new();
    for s in &cfg.peers {
        if s.disabled {
            continue;
        }
        let Some(listen) = s.listen_addr(&cfg.local_peer) else {
            continue;
        };
        out.push(PeersRt {
            name: s.name.clone(),
            local: cfg.local_peer.clone(),
            listen,
            remotes: s
                .peers
                .iter()
                .filter(|p| p.name != cfg.local_peer)
                .filter_map(|p| p.addr.map(|a| (p.name.clone(), a, p.tls.clone())))
                .collect(),
            bind_ssl: s.bind_ssl.clone(),
            loc: s.bind.as_ref().map_or(&s.loc, |b| &b.loc).clone(),
            local_tls: s.peer(&cfg.local_peer).and_then(|p| p.tls.clone()),
            tables: tables
                .iter()
                .filter(|t| t.def().peers.as_deref() == Some(s.name.as_str()))
                .cloned()
                .collect(),
        });
    }
    out
}

/// A bound listener of a section, made before `ready` so that a bind
/// error stops the start.
pub struct Bound {
    rt: PeersRt,
    sock: socket2::Socket,
    tls: PeersTls,
    /// The address the listener is bound to (the local peer's, which the
    /// other process of a reload reaches).
    addr: SocketAddr,
}

/// Binds every section's local peer address (SO_REUSEPORT: a new process
/// binds while the old one still listens, as HAProxy's reload does).
pub fn bind(rts: Vec<PeersRt>) -> Result<Vec<Bound>, String> {
    let mut out = Vec::new();
    for rt in rts {
        let s = match rt.listen {
            PeerListen::Addr(a) => (|| -> io::Result<socket2::Socket> {
                let s = socket2::Socket::new(
                    socket2::Domain::for_address(a),
                    socket2::Type::STREAM,
                    None,
                )?;
                s.set_reuse_address(true)?;
                s.set_reuse_port(true)?;
                s.bind(&a.into())?;
                s.listen(64)?;
                s.set_nonblocking(true)?;
                Ok(s)
            })()
            .map_err(|e| format!("peers '{}': cannot bind {a}: {e}", rt.name))?,
            PeerListen::Fd(fd) => {
                let spec = crate::config::SockSpec::Fd(fd);
                let perms = crate::listener::UnixPerms::default();
                crate::listener::bind_spec(&spec, 1, 64, perms)
                    .map_err(|e| format!("peers '{}': fd@{fd}: {e}", rt.name))?
                    .0
                    .remove(0)
            }
        };
        let addr = s
            .local_addr()
            .ok()
            .and_then(|a| a.as_socket())
            .ok_or_else(|| format!("peers '{}': the listener has no IP address", rt.name))?;
        let tls = PeersTls::new(&rt)?;
        out.push(Bound {
            rt,
            sock: s,
            tls,
            addr,
        });
    }
    Ok(out)
}

/// A section's TLS configurations, loaded before the start (a file that
/// does not load stops it).
struct PeersTls {
    /// The `bind ... ssl` line's (the acceptor keeps what the CLI's
    /// certificate commands reach).
    server: Option<(Arc<rustls::ServerConfig>, Arc<crate::tls::TlsAcceptor>)>,
    /// Each remote peer's with `ssl`, in `remotes` order.
    remotes: Vec<Option<Arc<rustls::ClientConfig>>>,
    local: Option<Arc<rustls::ClientConfig>>,
}

impl PeersTls {
    fn new(rt: &PeersRt) -> Result<PeersTls, String> {
        let server = match &rt.bind_ssl {
            Some(ssl) => {
                let a = crate::tls::TlsAcceptor::new(ssl, &rt.loc).map_err(|e| e.to_string())?;
                Some((a.config(), Arc::new(a)))
            }
            None => None,
        };
        let client = |name: &str, o: &Option<ServerOptions>| -> Result<_, String> {
            o.as_ref()
                .map(|o| {
                    crate::tls::client_config_with(o.verify(), o.ca_file.as_deref(), &o.tls)
                        .map_err(|e| format!("peers '{}': peer '{name}': {e}", rt.name))
                })
                .transpose()
        };
        Ok(PeersTls {
            server,
            remotes: rt
                .remotes
                .iter()
                .map(|(n, _, o)| client(n, o))
                .collect::<Result<_, _>>()?,
            local: client(&rt.local, &rt.local_tls)?,
        })
    }
}

impl Bound {
    /// The section's name.
    pub fn name(&self) -> &str {
        &self.rt.name
    }

    /// The address really bound.
    pub fn local_addr(&self) -> Option<SocketAddr> {
        Some(self.addr)
    }
}

/// The start-up resync (HAProxy's `PEERS_F_RESYNC_*` states).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Resync {
    /// Waiting for the old local process to teach us, until the tick.
    FromLocal(u32),
    /// Asking a remote peer, until the tick (when nobody is assigned).
    FromRemote(u32),
    Done,
}

/// What the tasks of a section share.
struct Section {
    rt: PeersRt,
    peers: Vec<PeerState>,
    resync: Resync,
    /// The peer assigned to teach us (an index in `peers`).
    learning_from: Option<usize>,
    sync_task: Option<TaskId>,
    log: LogFn,
    rng: u64,
    /// The listener still accepts (a stopping process teaches the new one
    /// once its own listener is closed, so the connection reaches it).
    listening: bool,
    /// `bind ... ssl`: accepted connections speak TLS.
    server_tls: Option<(Arc<rustls::ServerConfig>, Arc<crate::tls::TlsAcceptor>)>,
}

/// A peer's state beyond its connection.
struct PeerState {
    name: String,
    addr: SocketAddr,
    task: Option<TaskId>,
    /// A connection accepted for it (not watched), with the bytes read
    /// past the hello in its buffer.
    incoming: Option<Io>,
    /// Its `ssl` options: connections to it speak TLS.
    tls: Option<Arc<rustls::ClientConfig>>,
    /// Per local table: the last update it acknowledged.
    acked: Vec<u64>,
    /// It said it was not up to date itself: not asked again.
    not_up2date: bool,
    /// A connection is established.
    established: bool,
    /// This is the local peer: the old process of a reload teaching us,
    /// or (when we stop) the new process we teach.
    local: bool,
    /// What `show peers` counts.
    stats: show::PeerStats,
}

type Shared = Rc<RefCell<Section>>;

impl Section {
    fn rand(&mut self, below: u32) -> u32 {
        // xorshift64: enough to spread reconnections.
        let mut x = self.rng;
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        self.rng = x;
        (x % u64::from(below.max(1))) as u32
    }

    fn say(&self, msg: String) {
        (self.log)(format!("peers {}: {msg}", self.rt.name));
    }

    /// Picks a connected peer to learn from, if a resync from remote is
    /// due and nobody is assigned.
    fn assign(&mut self, ctx: &mut Ctx) {
        if !matches!(self.resync, Resync::FromRemote(_)) || self.learning_from.is_some() {
            return;
        }
        if let Some(i) = self
            .peers
            .iter()
            .position(|p| p.established && !p.not_up2date && !p.local)
        {
            self.learning_from = Some(i);
            if let Some(t) = self.peers[i].task {
                ctx.wakeup(t, Reasons::MSG);
            }
        }
    }

    fn resync_done(&self) -> bool {
        self.resync == Resync::Done
    }
}

/// Starts the sections on the calling thread (thread 0): listeners, peer
/// tasks, sync tasks. `old_process`: started by `-sf`/`-st`, so an old
/// local process may teach the tables first.
pub fn start(ctx: &mut Ctx, bound: Vec<Bound>, old_process: bool, log: LogFn) {
    let now = ctx.now();
    for b in bound {
        let ntables = b.rt.tables.len();
        let mut peers: Vec<PeerState> =
            b.rt.remotes
                .iter()
                .zip(b.tls.remotes)
                .map(|((n, a, _), tls)| PeerState {
                    name: n.clone(),
                    addr: *a,
                    task: None,
                    incoming: None,
                    tls,
                    acked: vec![0; ntables],
                    not_up2date: false,
                    established: false,
                    local: false,
                    stats: show::PeerStats::default(),
                })
                .collect();
        // The local peer: the other process of a reload, on our address.
        peers.push(PeerState {
            name: b.rt.local.clone(),
            addr: b.addr,
            task: None,
            incoming: None,
            tls: b.tls.local,
            acked: vec![0; ntables],
            not_up2date: false,
            established: false,
            local: true,
            stats: show::PeerStats::default(),
        });
        show::declare(show::SectionShow {
            name: b.rt.name.clone(),
            since: std::time::SystemTime::now(),
            resync_timeout: None,
            peers: peers
                .iter()
                .map(|p| show::PeerShow {
                    name: p.name.clone(),
                    local: p.local,
                    active: false,
                    addr: p.addr,
                    status: "NONE",
                    hdshk: None,
                    reconnect: None,
                    heartbeat: None,
                    confirm: 0,
                    counters: [0; 6],
                    conn: None,
                    remote_table: None,
                    last_local_table: None,
                    tables: Vec::new(),
                })
                .collect(),
        });
        let resync = if old_process {
            Resync::FromLocal(ticks::add(now, RESYNC_MS))
        } else {
            Resync::FromRemote(ticks::add(now, RESYNC_MS))
        };
        let seed = u64::from(crate::sys::pid()) << 32 | u64::from(now) | 1;
        let sec: Shared = Rc::new(RefCell::new(Section {
            rt: b.rt,
            peers,
            resync,
            learning_from: None,
            sync_task: None,
            log: Arc::clone(&log),
            rng: seed,
            listening: true,
            server_tls: b.tls.server,
        }));
        let st = ctx.new_task_obj(
            "peers_sync",
            SyncTask {
                sec: Rc::clone(&sec),
            },
        );
        ctx.on_stop(st);
        sec.borrow_mut().sync_task = Some(st);
        let handle: RuntimeHandle = ctx.handle();
        for t in &sec.borrow().rt.tables {
            let h = handle.clone();
            t.set_sync_waker(Box::new(move || h.wake_task(st, Reasons::MSG)));
        }
        let n = sec.borrow().peers.len();
        for i in 0..n {
            let task = ctx.new_task_obj("peer_conn", PeerTask::new(Rc::clone(&sec), i));
            ctx.on_stop(task);
            sec.borrow_mut().peers[i].task = Some(task);
            ctx.wakeup(task, Reasons::INIT);
        }
        ctx.wakeup(st, Reasons::INIT);
        let fd = b.sock.as_raw_fd();
        let l = ctx.new_tasklet_obj(
            "peers_accept",
            Acceptor {
                sock: Some(b.sock),
                sec,
            },
        );
        if let Err(e) = ctx.register_fd(fd, l, false) {
            (log)(format!("peers: cannot poll the listener: {e}"));
            ctx.kill_tasklet(l);
            continue;
        }
        ctx.on_stop_tasklet(l);
        ctx.tasklet_wakeup(l);
    }
}

struct SyncTask {
    sec: Shared,
}

impl TaskFn for SyncTask {
    fn run(&mut self, ctx: &mut Ctx, me: TaskId, _why: Reasons) -> Status {
        if ctx.stopping() {
            return Status::Done;
        }
        let now = ctx.now();
        let mut s = self.sec.borrow_mut();
        // Local updates waiting: every established peer pushes them.
        let mut dirty = false;
        for t in &s.rt.tables {
            dirty |= t.take_dirty();
        }
        if dirty {
            for p in &s.peers {
                if let (Some(t), true) = (p.task, p.established) {
                    ctx.wakeup(t, Reasons::MSG);
                }
            }
        }
        match s.resync {
            Resync::FromLocal(at) if ticks::is_expired(at, now) => {
                s.resync = Resync::FromRemote(ticks::add(now, RESYNC_MS));
            }
            _ => {}
        }
        s.assign(ctx);
        if let Resync::FromRemote(at) = s.resync {
            if s.learning_from.is_none() && ticks::is_expired(at, now) {
                s.resync = Resync::Done;
                s.say("no peer taught the tables before the resync timeout: going on with what we have".into());
            }
        }
        let next = match s.resync {
            Resync::FromLocal(at) | Resync::FromRemote(at) => at,
            Resync::Done => ticks::ETERNITY,
        };
        ctx.set_expire(me, next);
        Status::Continue
    }
}

struct Acceptor {
    sock: Option<socket2::Socket>,
    sec: Shared,
}

impl TaskletFn for Acceptor {
    fn run(&mut self, ctx: &mut Ctx, me: TaskletId, why: Reasons) -> Status {
        if why.intersects(Reasons::IO) {
            let _ = ctx.take_events(me);
        }
        let Some(sock) = &self.sock else {
            return Status::Done;
        };
        if why.intersects(Reasons::SIGNAL) || ctx.stopping() {
            let _ = ctx.deregister_fd(sock.as_raw_fd());
            self.sock = None;
            // The local peer's task may now teach the new process.
            let mut s = self.sec.borrow_mut();
            s.listening = false;
            for p in s.peers.iter().filter(|p| p.local) {
                if let Some(t) = p.task {
                    ctx.wakeup(t, Reasons::MSG);
                }
            }
            return Status::Done;
        }
        for _ in 0..16 {
            match sock.accept() {
                Ok((s, _)) => {
                    let st: TcpStream = s.into();
                    if st.set_nonblocking(true).is_err() {
                        continue;
                    }
                    let _ = st.set_nodelay(true);
                    let fd = st.as_raw_fd();
                    let mut io = Io::new(st, fd);
                    if let Some((cfg, _)) = &self.sec.borrow().server_tls {
                        match rustls::ServerConnection::new(Arc::clone(cfg)) {
                            Ok(c) => io.set_tls(c.into()),
                            Err(_) => continue,
                        }
                    }
                    let t = ctx.new_task_obj(
                        "peer_hello",
                        Hello {
                            conn: Some(io),
                            sec: Rc::clone(&self.sec),
                        },
                    );
                    ctx.set_expire(t, ticks::add(ctx.now(), HELLO_TIMEOUT_MS));
                    ctx.wakeup(t, Reasons::INIT);
                }
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(_) => return Status::Continue,
            }
        }
        ctx.tasklet_wakeup(me);
        Status::Continue
    }
}

/// A socket with its buffers and its readiness tasklet.
struct Io {
    sock: TcpStream,
    fd: RawFd,
    io: Option<TaskletId>,
    inbuf: Vec<u8>,
    out: Vec<u8>,
    eof: bool,
    /// The last read stopped at the buffer's bound: more may wait in the
    /// socket (edge-triggered: no new event tells).
    full: bool,
    /// TLS (`ssl` peers): `inbuf` and `out` hold the plain text.
    tls: Option<rustls::Connection>,
}

impl Io {
    fn new(sock: TcpStream, fd: RawFd) -> Io {
        Io {
            sock,
            fd,
            io: None,
            inbuf: Vec::new(),
            out: Vec::new(),
            eof: false,
            full: false,
            tls: None,
        }
    }

    /// Speaks TLS from now on (before anything was sent or read).
    fn set_tls(&mut self, mut c: rustls::Connection) {
        // What the peer task queues is bounded as the plain socket's.
        c.set_buffer_limit(Some(OUT_MAX));
        self.tls = Some(c);
    }

    /// Sends the TLS records waiting. False on a write error.
    fn push_tls(&mut self) -> bool {
        match &mut self.tls {
            Some(tls) => push_records(tls, &mut self.sock),
            None => true,
        }
    }

    /// [`Io::fill`] over TLS: reads records, answers the handshake, and
    /// keeps the plain text.
    fn fill_tls(&mut self) -> bool {
        let mut tmp = [0u8; 16384];
        self.full = false;
        let Some(tls) = &mut self.tls else {
            return true;
        };
        loop {
            loop {
                if self.inbuf.len() >= MAX_MSG * 4 {
                    self.full = true;
                    return self.push_tls();
                }
                match tls.reader().read(&mut tmp) {
                    Ok(0) => {
                        self.eof = true;
                        return self.push_tls();
                    }
                    Ok(n) => self.inbuf.extend_from_slice(&tmp[..n]),
                    Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
                    // Closed without close_notify.
                    Err(e) if e.kind() == io::ErrorKind::UnexpectedEof => {
                        self.eof = true;
                        return self.push_tls();
                    }
                    Err(_) => return false,
                }
            }
            if self.eof {
                return self.push_tls();
            }
            match tls.read_tls(&mut self.sock) {
                Ok(0) => self.eof = true,
                Ok(_) => {}
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return self.push_tls(),
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(_) => return false,
            }
            if tls.process_new_packets().is_err() {
                // (The alert rustls queued goes out.)
                let _ = self.push_tls();
                return false;
            }
        }
    }

    /// Registers the socket for task `me` (once).
    fn watch(&mut self, ctx: &mut Ctx, me: TaskId) -> io::Result<()> {
        if self.io.is_none() {
            let io = ctx.new_tasklet_obj("peer_io", crate::net::WakeTask { task: me });
            self.io = Some(io);
            ctx.register_fd(self.fd, io, true)?;
        }
        Ok(())
    }

    /// Stops watching (before the socket changes owner or closes).
    fn unwatch(&mut self, ctx: &mut Ctx) {
        if let Some(io) = self.io.take() {
            let _ = ctx.deregister_fd(self.fd);
            ctx.kill_tasklet(io);
        }
    }

    /// Reads what is there (at most `MAX_MSG` * 4 buffered). False on a
    /// read error.
    fn fill(&mut self) -> bool {
        if self.tls.is_some() {
            return self.fill_tls();
        }
        let mut tmp = [0u8; 16384];
        self.full = false;
        while self.inbuf.len() < MAX_MSG * 4 {
            match self.sock.read(&mut tmp) {
                Ok(0) => {
                    self.eof = true;
                    return true;
                }
                Ok(n) => self.inbuf.extend_from_slice(&tmp[..n]),
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return true,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(_) => return false,
            }
        }
        self.full = true;
        true
    }

    /// Writes what is queued. False on a write error.
    fn flush(&mut self) -> bool {
        if let Some(tls) = &mut self.tls {
            loop {
                // As much as the TLS buffer takes, then out to the socket.
                let n = match tls.writer().write(&self.out) {
                    Ok(n) => n,
                    Err(_) => return false,
                };
                self.out.drain(..n);
                if !push_records(tls, &mut self.sock) {
                    return false;
                }
                if self.out.is_empty() || n == 0 || tls.wants_write() {
                    return true;
                }
            }
        }
        let mut done = 0;
        while done < self.out.len() {
            match self.sock.write(&self.out[done..]) {
                Ok(0) => return false,
                Ok(n) => done += n,
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(_) => return false,
            }
        }
        self.out.drain(..done);
        true
    }

    /// Takes one `\n`-ended line (without it), if there.
    fn line(&mut self) -> Option<String> {
        let nl = self.inbuf.iter().position(|&c| c == b'\n')?;
        let l: Vec<u8> = self.inbuf.drain(..=nl).collect();
        Some(String::from_utf8_lossy(&l[..l.len() - 1]).into_owned())
    }

    fn close(&mut self, ctx: &mut Ctx) {
        let _ = self.flush();
        if let Some(tls) = &mut self.tls {
            tls.send_close_notify();
            let _ = self.push_tls();
        }
        self.unwatch(ctx);
        let _ = self.sock.shutdown(std::net::Shutdown::Both);
    }
}

/// Sends the TLS records `tls` has waiting on `sock`, until the socket is
/// full. False on a write error.
fn push_records(tls: &mut rustls::Connection, sock: &mut TcpStream) -> bool {
    while tls.wants_write() {
        match tls.write_tls(sock) {
            Ok(0) => return false,
            Ok(_) => {}
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => return true,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(_) => return false,
        }
    }
    true
}

/// The accepting side's handshake.
struct Hello {
    conn: Option<Io>,
    sec: Shared,
}

impl TaskFn for Hello {
    fn run(&mut self, ctx: &mut Ctx, me: TaskId, why: Reasons) -> Status {
        let Some(c) = &mut self.conn else {
            return Status::Done;
        };
        let timed_out =
            why.intersects(Reasons::TIMER) && ticks::is_expired(ctx.expire(me), ctx.now());
        if timed_out || ctx.stopping() || c.watch(ctx, me).is_err() || !c.fill() {
            c.close(ctx);
            return Status::Done;
        }
        let lines: Vec<&[u8]> = c.inbuf.split(|&b| b == b'\n').collect();
        if lines.len() < 4 {
            if c.eof || c.inbuf.len() > 1024 {
                c.close(ctx);
                return Status::Done;
            }
            return Status::Continue;
        }
        let l: Vec<String> = (0..3).filter_map(|_| c.line()).collect();
        let mut s = self.sec.borrow_mut();
        let local = s.rt.local.clone();
        let [l0, l1, l2] = [0, 1, 2].map(|i| l.get(i).map_or("", String::as_str));
        let r = check_hello([l0, l1, l2], &local, &|n: &str| {
            n == local || s.peers.iter().any(|p| p.name == n)
        });
        let code = match &r {
            // The old process of a reload: taken while we wait for it,
            // else "try again later", as HAProxy answers a busy local peer.
            Ok(name) if *name == local => {
                let busy = s.learning_from.is_some()
                    || !matches!(s.resync, Resync::FromLocal(_))
                    || s.peers
                        .iter()
                        .any(|p| p.local && (p.established || p.incoming.is_some()));
                if busy {
                    Err(ST_TRYAGAIN)
                } else {
                    Ok(name.clone())
                }
            }
            Ok(name) => Ok(name.clone()),
            Err(code) => Err(*code),
        };
        match code {
            Ok(name) => {
                let Some(i) = s.peers.iter().position(|p| p.name == name) else {
                    c.close(ctx);
                    return Status::Done;
                };
                let mut io = match self.conn.take() {
                    Some(io) => io,
                    None => return Status::Done,
                };
                io.unwatch(ctx);
                s.peers[i].incoming = Some(io);
                if let Some(t) = s.peers[i].task {
                    ctx.wakeup(t, Reasons::MSG);
                }
                Status::Done
            }
            Err(code) => {
                s.say(format!(
                    "refused a peer connection ({code}): hello {:?}",
                    l.join(" / ")
                ));
                c.out.extend_from_slice(format!("{code}\n").as_bytes());
                c.close(ctx);
                Status::Done
            }
        }
    }
}

/// What a connection is doing.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Phase {
    Connecting,
    WaitStatus,
    Established,
}

/// A table as the peer announced it.
struct RemoteTable {
    def: TableDefMsg,
    /// The local table of the same name, key type and key size.
    local: Option<usize>,
}

/// One connection's protocol state.
struct Conn {
    io: Io,
    phase: Phase,
    remote: HashMap<u64, RemoteTable>,
    /// The peer table the next updates are for.
    cur: Option<u64>,
    /// Per local table: last update received from the peer and last one
    /// acknowledged (on the wire, u32).
    last_get: Vec<u32>,
    last_acked: Vec<u32>,
    /// The remote id of each local table (for acks).
    remote_id: Vec<Option<u64>>,
    /// Per local table: the last update pushed.
    pushed: Vec<u64>,
    /// The table the last updates sent belong to, and the last id sent.
    sent_table: Option<usize>,
    last_id: Option<u32>,
    /// A full resync being taught: entries left, per table the point to
    /// push from after the peer's confirm.
    teach: Option<Teach>,
    /// Resync finished/partial messages to confirm.
    confirm: u32,
    /// A resync request was sent to this peer.
    asked: bool,
    /// Our teaching was confirmed (a stopping process may leave).
    confirmed: bool,
    /// Updates were left for the next run (a full batch).
    more: bool,
    /// A message arrived in the current reconnect period.
    alive: bool,
    check_at: u32,
    last_tx: u32,
    /// The session's `server_key` dictionary caches.
    dict: DictCache,
}

struct Teach {
    left: std::collections::VecDeque<(usize, crate::table::WireEntry)>,
    origin: Vec<u64>,
    finished_sent: bool,
}

impl Teach {
    /// A lesson of every entry of `tables` at `now`; pushing resumes at
    /// `origin` once the peer confirms.
    fn all(tables: &[Arc<Table>], now: u32, origin: Vec<u64>) -> Teach {
        let mut left = std::collections::VecDeque::new();
        for (i, t) in tables.iter().enumerate() {
            for e in t.wire_all(now) {
                left.push_back((i, e));
            }
        }
        Teach {
            left,
            origin,
            finished_sent: false,
        }
    }
}

struct PeerTask {
    sec: Shared,
    idx: usize,
    conn: Option<Conn>,
    /// When to try again without a connection.
    retry_at: u32,
    /// Stopping: the date to give up teaching the new process, and
    /// whether a connection was tried.
    stop_deadline: u32,
    stop_tried: bool,
}

impl PeerTask {
    fn new(sec: Shared, idx: usize) -> PeerTask {
        PeerTask {
            sec,
            idx,
            conn: None,
            retry_at: ticks::ETERNITY,
            stop_deadline: ticks::ETERNITY,
            stop_tried: false,
        }
    }

    fn new_conn(&self, io: Io, phase: Phase, now: u32) -> Conn {
        let n = self.sec.borrow().rt.tables.len();
        Conn {
            io,
            phase,
            remote: HashMap::new(),
            cur: None,
            last_get: vec![0; n],
            last_acked: vec![0; n],
            remote_id: vec![None; n],
            pushed: vec![0; n],
            sent_table: None,
            last_id: None,
            teach: None,
            confirm: 0,
            asked: false,
            confirmed: false,
            more: false,
            alive: false,
            check_at: ticks::add(now, RECONNECT_MS),
            last_tx: now,
            dict: DictCache::default(),
        }
    }

    /// Drops the connection; the next try comes at `retry_in` ms.
    fn drop_conn(&mut self, ctx: &mut Ctx, retry_in: u32, why: Option<String>) {
        let now = ctx.now();
        if let Some(mut c) = self.conn.take() {
            c.io.close(ctx);
            let mut s = self.sec.borrow_mut();
            let was = s.peers[self.idx].established;
            s.peers[self.idx].established = false;
            if let Some(w) = why {
                let n = s.peers[self.idx].name.clone();
                s.say(format!("peer {n}: {w}"));
            } else if was {
                let n = s.peers[self.idx].name.clone();
                s.say(format!("peer {n}: connection closed"));
            }
            if s.learning_from == Some(self.idx) {
                // The lesson broke: another peer (or this one again) later.
                s.learning_from = None;
                if let Resync::FromRemote(_) = s.resync {
                    s.resync = Resync::FromRemote(ticks::add(now, RESYNC_MS));
                }
                if let Some(t) = s.sync_task {
                    ctx.wakeup(t, Reasons::MSG);
                }
            }
        }
        if ticks::is_expired(self.retry_at, now) || !ticks::is_set(self.retry_at) {
            self.retry_at = ticks::add(now, retry_in);
        }
    }

    /// Starts an outgoing connection.
    fn connect(&mut self, ctx: &mut Ctx, me: TaskId) {
        let now = ctx.now();
        self.retry_at = ticks::add(now, RECONNECT_MS);
        let addr = self.sec.borrow().peers[self.idx].addr;
        let s = (|| -> io::Result<TcpStream> {
            let s = socket2::Socket::new(
                socket2::Domain::for_address(addr),
                socket2::Type::STREAM,
                None,
            )?;
            s.set_nonblocking(true)?;
            let _ = s.set_tcp_nodelay(true);
            match s.connect(&addr.into()) {
                Ok(()) => {}
                Err(e) if e.raw_os_error() == Some(libc::EINPROGRESS) => {}
                Err(e) => return Err(e),
            }
            Ok(s.into())
        })();
        let Ok(s) = s else { return };
        let tls = self.sec.borrow().peers[self.idx].tls.clone();
        let fd = s.as_raw_fd();
        let mut io = Io::new(s, fd);
        if let Some(cfg) = tls {
            // No SNI: an address, as HAProxy's peers send none.
            let name = rustls::pki_types::ServerName::IpAddress(addr.ip().into());
            match rustls::ClientConnection::new(cfg, name) {
                Ok(c) => io.set_tls(c.into()),
                Err(_) => return,
            }
        }
        {
            let sec = self.sec.borrow();
            let st = &sec.peers[self.idx].stats;
            show::PeerStats::bump(&st.new_conn);
            st.status.set("CONN");
        }
        let mut c = self.new_conn(io, Phase::Connecting, now);
        if c.io.watch(ctx, me).is_err() {
            c.io.close(ctx);
            return;
        }
        self.conn = Some(c);
    }

    /// The connection just reached the established state.
    fn established(&mut self, ctx: &mut Ctx) {
        let now = ctx.now();
        let mut s = self.sec.borrow_mut();
        let idx = self.idx;
        s.peers[idx].established = true;
        s.peers[idx].stats.status.set("ESTA");
        s.peers[idx].stats.hdshk.set(Some(now));
        let acked = s.peers[idx].acked.clone();
        let name = s.peers[idx].name.clone();
        s.say(format!("peer {name}: connection established"));
        if let Some(c) = &mut self.conn {
            c.phase = Phase::Established;
            c.pushed = acked;
            c.check_at = ticks::add(now, RECONNECT_MS);
            c.last_tx = now;
            if s.peers[idx].local {
                c.asked = true;
                if ctx.stopping() {
                    // We stop: teach the new process everything.
                    c.teach = Some(Teach::all(&s.rt.tables, now, vec![0; s.rt.tables.len()]));
                } else {
                    // The old process teaches us without being asked.
                    s.learning_from = Some(idx);
                }
            }
        }
        s.assign(ctx);
    }

    /// Handles the messages read; Err: close with that reason.
    fn read_msgs(&mut self, ctx: &mut Ctx) -> Result<(), String> {
        let now = ctx.now();
        let Some(c) = &mut self.conn else {
            return Ok(());
        };
        let mut used = 0;
        loop {
            let f = match next_frame(&c.io.inbuf[used..]) {
                Ok(Some(f)) => f,
                Ok(None) => break,
                Err(Malformed(w)) => {
                    show::PeerStats::bump(&self.sec.borrow().peers[self.idx].stats.proto_err);
                    if w == "message too large" {
                        put_ctrl(&mut c.io.out, CLASS_ERROR, ERR_SIZELIMIT);
                    } else {
                        put_ctrl(&mut c.io.out, CLASS_ERROR, ERR_PROTO);
                    }
                    return Err(format!("protocol error ({w}): closing"));
                }
            };
            let (frame, n) = f;
            let (class, kind) = (frame.class, frame.kind);
            let data = frame.data.to_vec();
            used += n;
            c.alive = true;
            let r = handle_msg(&self.sec, self.idx, c, class, kind, &data, now, ctx);
            if let Err(w) = r {
                show::PeerStats::bump(&self.sec.borrow().peers[self.idx].stats.proto_err);
                put_ctrl(&mut c.io.out, CLASS_ERROR, ERR_PROTO);
                return Err(format!("protocol error ({w}): closing"));
            }
            if class == CLASS_ERROR {
                return Err(format!("the peer reported an error ({kind}): closing"));
            }
        }
        c.io.inbuf.drain(..used);
        Ok(())
    }

    /// Queues what there is to send.
    fn write_msgs(&mut self, ctx: &mut Ctx) {
        let now = ctx.now();
        let Some(c) = &mut self.conn else { return };
        let s = self.sec.borrow();
        let start_len = c.io.out.len();
        c.more = false;
        // A resync request to the peer assigned to teach us.
        if s.learning_from == Some(self.idx) && !c.asked {
            put_ctrl(&mut c.io.out, CLASS_CONTROL, CTRL_RESYNCREQ);
            c.asked = true;
        }
        for (i, t) in s.rt.tables.iter().enumerate() {
            // Acks of what we received.
            if c.last_get[i] != c.last_acked[i] {
                if let Some(rid) = c.remote_id[i] {
                    put_ack(&mut c.io.out, rid, c.last_get[i]);
                }
                c.last_acked[i] = c.last_get[i];
            }
            // Local updates, unless this peer teaches us right now.
            if c.teach.is_none()
                && c.io.out.len() < OUT_MAX
                && s.learning_from != Some(self.idx)
                && !s.peers[self.idx].local
                && c.pushed[i] < t.local_update()
            {
                let ups = t.updates_after(c.pushed[i], PUSH_BATCH, now);
                c.more |= ups.len() == PUSH_BATCH;
                for (n, e) in &ups {
                    if c.sent_table != Some(i) {
                        put_define(&mut c.io.out, i as u64 + 1, t.def());
                        c.sent_table = Some(i);
                        c.last_id = None;
                    }
                    let id = *n as u32;
                    let inc = c.last_id.is_some_and(|l| l.wrapping_add(1) == id);
                    put_update(&mut c.io.out, (!inc).then_some(id), e, t.def(), &mut c.dict);
                    c.last_id = Some(id);
                    c.pushed[i] = *n;
                }
            }
        }
        // A full resync being taught.
        if let Some(teach) = c.teach.as_mut().filter(|_| c.io.out.len() < OUT_MAX) {
            let mut sent = 0;
            while let Some((i, e)) = teach.left.pop_front() {
                let Some(t) = s.rt.tables.get(i) else {
                    continue;
                };
                if c.sent_table != Some(i) {
                    put_define(&mut c.io.out, i as u64 + 1, t.def());
                    c.sent_table = Some(i);
                }
                let id = t.local_update() as u32;
                put_update(&mut c.io.out, Some(id), &e, t.def(), &mut c.dict);
                c.last_id = Some(id);
                sent += 1;
                if sent >= PUSH_BATCH {
                    break;
                }
            }
            if teach.left.is_empty() && !teach.finished_sent {
                // Finished when we are up to date ourselves, else partial.
                let k = if s.resync_done() {
                    CTRL_RESYNCFINISHED
                } else {
                    CTRL_RESYNCPARTIAL
                };
                put_ctrl(&mut c.io.out, CLASS_CONTROL, k);
                teach.finished_sent = true;
            }
        }
        while c.confirm > 0 {
            put_ctrl(&mut c.io.out, CLASS_CONTROL, CTRL_RESYNCCONFIRM);
            c.confirm -= 1;
        }
        if c.io.out.len() > start_len {
            c.last_tx = now;
        } else if ticks::is_expired(ticks::add(c.last_tx, HEARTBEAT_MS), now) {
            put_ctrl(&mut c.io.out, CLASS_CONTROL, CTRL_HEARTBEAT);
            show::PeerStats::bump(&s.peers[self.idx].stats.tx_hbt);
            c.last_tx = now;
        }
    }
}

/// Handles one message of an established connection.
#[allow(clippy::too_many_arguments)]
fn handle_msg(
    sec: &Shared,
    idx: usize,
    c: &mut Conn,
    class: u8,
    kind: u8,
    data: &[u8],
    now: u32,
    ctx: &mut Ctx,
) -> Result<(), &'static str> {
    match (class, kind) {
        (CLASS_CONTROL, CTRL_RESYNCREQ) => {
            let s = sec.borrow();
            c.teach = Some(Teach::all(&s.rt.tables, now, s.peers[idx].acked.clone()));
        }
        (CLASS_CONTROL, CTRL_RESYNCFINISHED | CTRL_RESYNCPARTIAL) => {
            let mut s = sec.borrow_mut();
            if s.learning_from == Some(idx) {
                s.learning_from = None;
                let name = s.peers[idx].name.clone();
                if kind == CTRL_RESYNCFINISHED {
                    s.resync = Resync::Done;
                    s.say(format!("peer {name}: tables learned (resync finished)"));
                } else {
                    s.peers[idx].not_up2date = true;
                    s.resync = Resync::FromRemote(ticks::add(now, RESYNC_MS));
                    s.say(format!("peer {name}: partial resync, asking another peer"));
                    if let Some(t) = s.sync_task {
                        ctx.wakeup(t, Reasons::MSG);
                    }
                }
            }
            c.confirm += 1;
        }
        (CLASS_CONTROL, CTRL_RESYNCCONFIRM) => {
            if let Some(t) = c.teach.take() {
                c.confirmed = true;
                // Back to pushing from where the peer had acknowledged.
                c.pushed = t.origin;
            }
        }
        (CLASS_CONTROL, CTRL_HEARTBEAT) => {
            show::PeerStats::bump(&sec.borrow().peers[idx].stats.rx_hbt);
        }
        (CLASS_CONTROL, _) => {}
        (CLASS_ERROR, _) => {}
        (CLASS_STKT, STKT_DEFINE) => {
            let d = parse_define(data).map_err(|m| m.0)?;
            let s = sec.borrow();
            let local = s.rt.tables.iter().position(|t| {
                t.def().wire_name() == d.name
                    && wire_key_type(t.def().key) == d.key_type
                    && t.def().key_size as u64 == d.key_len
            });
            // A table id reused for another table forgets the old one.
            for (i, r) in c.remote_id.iter_mut().enumerate() {
                if *r == Some(d.id) && Some(i) != local {
                    *r = None;
                }
            }
            if let Some(i) = local {
                c.remote_id[i] = Some(d.id);
            }
            c.cur = Some(d.id);
            c.remote.insert(d.id, RemoteTable { def: d, local });
        }
        (CLASS_STKT, STKT_SWITCH) => {
            let id = parse_switch(data).map_err(|m| m.0)?;
            c.cur = c.remote.contains_key(&id).then_some(id);
        }
        (CLASS_STKT, STKT_ACK) => {
            let (id, u) = parse_ack(data).map_err(|m| m.0)?;
            if c.teach.is_none() {
                let mut s = sec.borrow_mut();
                let i = id.wrapping_sub(1) as usize;
                if let Some(t) = s.rt.tables.get(i) {
                    let cur = t.local_update();
                    let back = u64::from((cur as u32).wrapping_sub(u));
                    if back <= cur {
                        s.peers[idx].acked[i] = cur - back;
                    }
                }
            }
        }
        (CLASS_STKT, STKT_UPDATE | STKT_INCUPDATE | STKT_UPDATE_TIMED | STKT_INCUPDATE_TIMED) => {
            let Some(rt) = c.cur.and_then(|id| c.remote.get(&id)) else {
                return Ok(());
            };
            let u = parse_update(kind, data, &rt.def, &mut c.dict).map_err(|m| m.0)?;
            let Some(i) = rt.local else { return Ok(()) };
            c.last_get[i] = match u.id {
                Some(id) => id,
                None => c.last_get[i].wrapping_add(1),
            };
            let s = sec.borrow();
            if let Some(t) = s.rt.tables.get(i) {
                if let Some(k) = key_for(t, &u.key) {
                    t.apply_remote(&k, u.exp, &u.data, now);
                }
            }
        }
        (CLASS_STKT, _) => {}
        (CLASS_RESERVED, _) => return Err("reserved message class"),
        _ => {}
    }
    Ok(())
}

impl TaskFn for PeerTask {
    fn run(&mut self, ctx: &mut Ctx, me: TaskId, why: Reasons) -> Status {
        let mut st = self.step(ctx, me, why);
        // Stopping, the one try to teach the new process failed (refused,
        // reset, no answer): nobody to teach, leave now rather than at the
        // reconnect date the failure set (HAProxy's process can die then).
        if ctx.stopping() && self.stop_tried && self.conn.is_none() {
            st = Status::Done;
        }
        self.publish();
        st
    }
}

impl PeerTask {
    /// Publishes what `show peers` prints of this peer.
    fn publish(&self) {
        let s = self.sec.borrow();
        let Some(p) = s.peers.get(self.idx) else {
            return;
        };
        let c = self.conn.as_ref();
        let established = c.is_some_and(|c| c.phase == Phase::Established);
        let tables: Vec<show::TableShow> =
            s.rt.tables
                .iter()
                .enumerate()
                .map(|(i, t)| {
                    let rid = c.and_then(|c| c.remote_id.get(i).copied().flatten());
                    show::TableShow {
                        local_id: i + 1,
                        remote_id: rid.unwrap_or(0),
                        remote_data: c
                            .zip(rid)
                            .and_then(|(c, r)| c.remote.get(&r))
                            .map_or(0, |r| r.def.data),
                        // What we acknowledged of its updates, as HAProxy.
                        last_acked: c.and_then(|c| c.last_acked.get(i)).copied().unwrap_or(0),
                        last_pushed: c.and_then(|c| c.pushed.get(i)).copied().unwrap_or(0) as u32,
                        last_get: c.and_then(|c| c.last_get.get(i)).copied().unwrap_or(0),
                        name: t.def().name.clone(),
                        update: t.local_update() as u32,
                        refcnt: 1,
                    }
                })
                .collect();
        let st = &p.stats;
        let view = show::PeerShow {
            name: p.name.clone(),
            local: p.local,
            active: c.is_some(),
            addr: p.addr,
            status: match st.status.get() {
                "" => "NONE",
                w => w,
            },
            hdshk: st.hdshk.get(),
            reconnect: match c {
                Some(c) if established => Some(c.check_at),
                _ => ticks::is_set(self.retry_at).then_some(self.retry_at),
            },
            heartbeat: c
                .filter(|_| established)
                .map(|c| ticks::add(c.last_tx, HEARTBEAT_MS)),
            confirm: c.map_or(0, |c| c.confirm),
            counters: [
                st.tx_hbt.get(),
                st.rx_hbt.get(),
                st.no_hbt.get(),
                st.new_conn.get(),
                st.proto_err.get(),
                st.coll.get(),
            ],
            conn: c.map(|c| (c.io.sock.local_addr().ok(), c.io.sock.peer_addr().ok())),
            remote_table: c
                .and_then(|c| c.cur.and_then(|id| c.remote.get(&id)))
                .and_then(|r| r.local),
            last_local_table: c.and_then(|c| c.sent_table),
            tables,
        };
        let resync = match s.resync {
            Resync::FromLocal(t) | Resync::FromRemote(t) => Some(t),
            Resync::Done => None,
        };
        show::publish(&s.rt.name, resync, self.idx, view);
    }

    fn step(&mut self, ctx: &mut Ctx, me: TaskId, _why: Reasons) -> Status {
        let now = ctx.now();
        let local = self.sec.borrow().peers[self.idx].local;
        if ctx.stopping() {
            // A stopping process teaches its tables to the new one on the
            // local peer's address (HAProxy's reload), for at most 10 s.
            if !ticks::is_set(self.stop_deadline) {
                self.stop_deadline = ticks::add(now, 2 * RECONNECT_MS);
            }
            let done = self.conn.as_ref().is_some_and(|c| c.confirmed)
                || (self.stop_tried && self.conn.is_none())
                || ticks::is_expired(self.stop_deadline, now)
                || self.sec.borrow().rt.tables.is_empty();
            if !local || done {
                if let Some(mut c) = self.conn.take() {
                    c.io.close(ctx);
                }
                return Status::Done;
            }
            if self.sec.borrow().listening {
                ctx.set_expire(me, self.stop_deadline);
                return Status::Continue;
            }
            if self.conn.is_none() {
                self.stop_tried = true;
                self.retry_at = ticks::ETERNITY;
                self.connect(ctx, me);
                if self.conn.is_none() {
                    return Status::Done;
                }
            }
        } else if local && self.conn.is_none() {
            // The local peer is never connected to while we run.
            self.retry_at = ticks::ETERNITY;
        }
        // A connection accepted for this peer replaces ours (HAProxy's
        // rule; ours then retries after a random delay).
        let incoming = self.sec.borrow_mut().peers[self.idx].incoming.take();
        if let Some(mut io) = incoming {
            {
                let s = self.sec.borrow();
                show::PeerStats::bump(&s.peers[self.idx].stats.new_conn);
                if self.conn.is_some() {
                    show::PeerStats::bump(&s.peers[self.idx].stats.coll);
                }
            }
            if self.conn.is_some() {
                // Ours retries after a random 50-2050 ms from now, whatever
                // date its connect had set (HAProxy sets the reconnect
                // date so): two peers that connected to each other at once
                // each keep the other's connection and so close both; the
                // random delays part them on the next try.
                let d = 50 + self.sec.borrow_mut().rand(2000);
                self.drop_conn(ctx, d, None);
                self.retry_at = ticks::add(now, d);
            }
            io.out
                .extend_from_slice(format!("{ST_SUCCESS}\n").as_bytes());
            let c = self.new_conn(io, Phase::Established, now);
            self.conn = Some(c);
            if let Some(c) = &mut self.conn {
                if c.io.watch(ctx, me).is_err() {
                    self.drop_conn(ctx, RECONNECT_MS, None);
                }
            }
            if self.conn.is_some() {
                self.established(ctx);
            }
        }
        if self.conn.is_none() {
            if local && self.sec.borrow().peers[self.idx].incoming.is_none() {
                return Status::Continue;
            }
            if !ticks::is_set(self.retry_at) || ticks::is_expired(self.retry_at, now) {
                self.connect(ctx, me);
            }
            if self.conn.is_none() {
                ctx.set_expire(me, self.retry_at);
                return Status::Continue;
            }
        }
        let Some(c) = &mut self.conn else {
            return Status::Continue;
        };
        if c.phase == Phase::Connecting {
            match c.io.sock.take_error() {
                Ok(None) if c.io.sock.peer_addr().is_ok() => {
                    let s = self.sec.borrow();
                    let h = hello(&s.peers[self.idx].name, &s.rt.local, crate::sys::pid());
                    c.io.out.extend_from_slice(h.as_bytes());
                    c.phase = Phase::WaitStatus;
                    s.peers[self.idx].stats.status.set("HSHK");
                }
                Ok(None) => {
                    // Still connecting; give up at the reconnect date.
                    if ticks::is_expired(self.retry_at, now) {
                        self.drop_conn(ctx, 0, None);
                        ctx.set_expire(me, ticks::add(now, 1));
                        return Status::Continue;
                    }
                    ctx.set_expire(me, self.retry_at);
                    return Status::Continue;
                }
                _ => {
                    self.drop_conn(ctx, RECONNECT_MS, None);
                    ctx.set_expire(me, self.retry_at);
                    return Status::Continue;
                }
            }
        }
        let Some(c) = &mut self.conn else {
            return Status::Continue;
        };
        if !c.io.fill() {
            self.drop_conn(ctx, RECONNECT_MS, None);
            ctx.set_expire(me, self.retry_at);
            return Status::Continue;
        }
        if c.phase == Phase::WaitStatus {
            if let Some(l) = c.io.line() {
                let code: u32 = l.trim().parse().unwrap_or(0);
                self.sec.borrow().peers[self.idx]
                    .stats
                    .status
                    .set(show::status_word(code));
                if code == ST_SUCCESS {
                    self.established(ctx);
                } else {
                    self.drop_conn(
                        ctx,
                        RECONNECT_MS,
                        Some(format!("refused our connection with status {l:?}")),
                    );
                    ctx.set_expire(me, self.retry_at);
                    return Status::Continue;
                }
            } else if c.io.eof || c.io.inbuf.len() > 64 {
                self.drop_conn(ctx, RECONNECT_MS, None);
                ctx.set_expire(me, self.retry_at);
                return Status::Continue;
            }
        }
        let established = self
            .conn
            .as_ref()
            .is_some_and(|c| c.phase == Phase::Established);
        if established {
            if let Err(why) = self.read_msgs(ctx) {
                self.drop_conn(ctx, RECONNECT_MS, Some(why));
                ctx.set_expire(me, self.retry_at);
                return Status::Continue;
            }
            // Silent for a whole reconnect period after a first one: gone.
            if let Some(c) = &mut self.conn {
                if ticks::is_expired(c.check_at, now) {
                    if c.alive {
                        c.alive = false;
                        c.check_at = ticks::add(now, RECONNECT_MS);
                    } else {
                        show::PeerStats::bump(&self.sec.borrow().peers[self.idx].stats.no_hbt);
                        let d = 50 + self.sec.borrow_mut().rand(2000);
                        self.drop_conn(ctx, d, Some("no message for too long: closing".into()));
                        ctx.set_expire(me, self.retry_at);
                        return Status::Continue;
                    }
                }
            }
            self.write_msgs(ctx);
        }
        let Some(c) = &mut self.conn else {
            return Status::Continue;
        };
        let eof = c.io.eof;
        if !c.io.flush() || eof {
            self.drop_conn(ctx, RECONNECT_MS, None);
            ctx.set_expire(me, self.retry_at);
            return Status::Continue;
        }
        // More to teach or push: run again soon; else wake for the next
        // heartbeat or liveness check.
        let more = c.teach.as_ref().is_some_and(|t| !t.left.is_empty()) || c.more || c.io.full;
        // Unless the socket is full: its writability wakes us.
        if more && c.io.out.len() < OUT_MAX {
            ctx.wakeup(me, Reasons::OTHER);
        }
        let next = match c.phase {
            Phase::Established => ticks::first(c.check_at, ticks::add(c.last_tx, HEARTBEAT_MS)),
            // The handshake has until the reconnect date (set at connect):
            // a peer that accepts and never answers is left then, not
            // polled in a loop.
            _ if ticks::is_expired(self.retry_at, now) => {
                self.drop_conn(ctx, RECONNECT_MS, Some("no answer to our hello".into()));
                self.retry_at
            }
            _ => self.retry_at,
        };
        ctx.set_expire(me, next);
        Status::Continue
    }
}

/// Decodes a stream of peer messages as an established session would and
/// applies the updates to tables of every key type (the fuzz target's
/// entry point): never panics; returns how many messages were understood.
pub fn fuzz_messages(data: &[u8]) -> usize {
    let store = "conn_cnt,conn_cur,conn_rate(10s),http_req_cnt,http_req_rate(10s),gpc0,gpt0,server_id,server_key,bytes_in_cnt";
    let tables: Vec<Table> = [
        &["type", "ip"][..],
        &["type", "ipv6"],
        &["type", "integer"],
        &["type", "string", "len", "8"],
        &["type", "binary", "len", "8"],
    ]
    .iter()
    .filter_map(|k| {
        let mut w = k.to_vec();
        w.extend(["size", "4", "expire", "10s", "store", store, "peers", "p"]);
        crate::table::parse_stick_table("t", &w)
            .ok()
            .map(Table::new)
    })
    .collect();
    let mut n = 0;
    let mut rest = data;
    let mut cur: Option<TableDefMsg> = None;
    let mut dict = DictCache::default();
    while let Ok(Some((f, used))) = next_frame(rest) {
        match (f.class, f.kind) {
            (CLASS_STKT, STKT_DEFINE) => cur = parse_define(f.data).ok(),
            (CLASS_STKT, STKT_ACK) => {
                let _ = parse_ack(f.data);
            }
            (CLASS_STKT, STKT_SWITCH) => {
                let _ = parse_switch(f.data);
            }
            (CLASS_STKT, k) if (STKT_UPDATE..=STKT_INCUPDATE_TIMED).contains(&k) => {
                if let Some(t) = &cur {
                    if let Ok(u) = parse_update(k, f.data, t, &mut dict) {
                        for tb in tables
                            .iter()
                            .filter(|x| wire_key_type(x.def().key) == t.key_type)
                        {
                            if let Some(key) = key_for(tb, &u.key) {
                                tb.apply_remote(&key, u.exp, &u.data, n as u32);
                                let _ = tb.expire(n as u32 * 1000);
                            }
                        }
                    }
                }
            }
            _ => {}
        }
        n += 1;
        rest = &rest[used..];
    }
    for t in &tables {
        assert!(t.validate().is_ok(), "table trees out of shape");
        for e in t.wire_all(0) {
            let mut out = Vec::new();
            put_update(&mut out, Some(1), &e, t.def(), &mut dict);
        }
    }
    n
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_decoder_survives_every_mutation_of_a_real_stream() {
        let seed = include_bytes!("../../../../fuzz/seeds/peers/define-update");
        assert_eq!(super::fuzz_messages(seed), 4);
        // Every byte changed to a few values, every cut: no panic.
        for i in 0..seed.len() {
            for v in [0u8, 1, 0x7f, 0x80, 0xf0, 0xff] {
                let mut m = seed.to_vec();
                m[i] = v;
                super::fuzz_messages(&m);
            }
            super::fuzz_messages(&seed[..i]);
        }
    }
}
