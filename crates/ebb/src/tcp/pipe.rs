//! The bytes of a tcp-mode session: two sockets, one buffer each way, and
//! the server side's tasklet.
//!
//! ```text
//!            tcp_cli (client socket events)       tcp_srv (server socket events)
//!  client ──read──> c2s ─────────────────────────────────write──> server
//!  client <─write── s2c <─────────────────────────────────read─── server
//! ```
//!
//! Each tasklet takes its own socket's events: `tcp_cli` reads the client
//! into `c2s` and writes `s2c` to the client; `tcp_srv` writes `c2s` to
//! the server and reads the server into `s2c`. What a tasklet read it
//! also writes on to the other socket at once when that one is known
//! writable (HAProxy's I/O callback sends on the opposite side the same
//! way), so a bulk cycle is one tasklet's run, one read and one write;
//! the other side's writable edge, its FIN and its errors stay its own.
//! A tasklet wakes the other only when the other has something new to
//! do: a buffer it drains still holds bytes, a buffer it fills got room
//! after being full, or the end of a direction (FIN) or an error. Back-pressure
//! is the buffer: a full buffer stops reading that side, TCP's window does
//! the rest, so a session costs two buffers whatever it carries.
//!
//! **Half-close.** A FIN read from one side is passed on as `shutdown(WR)`
//! to the other once the buffer towards it is empty; the other direction
//! goes on until its own FIN. The session ends when both directions are
//! closed this way, or at the first error.
//!
//! **Buffers** come from the thread's pool when a direction has bytes to
//! hold and go back as soon as it is empty, so an idle session (say a
//! database connection between queries) holds no buffer.
//!
//! Readiness (`rd`, `wr`) follows the socket's edges and is cleared only
//! when a call comes back short or with `WouldBlock`, as on the HTTP side.
//! The sockets are registered for reading alone (a connecting one for
//! writing too): writability is watched from the first write that blocks
//! on ([`Pipe::watch_blocked`], HAProxy's `fd_want_send`), so the edges
//! of a short session's state changes with nothing to write (its
//! connect's end, the ACK of a FIN) wake nobody. A loopback server's
//! connect is usually complete when `connect` returns: the client's
//! first bytes are sent at once and confirm it ([`Pipe::send_early`]).
//!
//! **Splice** (`option splice-request|splice-response|splice-auto`). A
//! direction may move through a kernel pipe instead of its buffer:
//! `splice(2)` from the reading socket into the pipe, then from the pipe
//! to the writing socket, so its bytes never enter user space. A direction
//! switches once its buffer is empty, both sockets are plain TCP (TLS needs
//! the bytes) and nothing inspects them any more (the content or response
//! rules have decided, a PROXY header is out); `splice-auto` waits until
//! the direction streams: two reads in a row that filled the buffer
//! (HAProxy's "fast streamer"). A splice read that finds no room says
//! `EAGAIN`, as one that finds no data does: as in HAProxy, a reader whose
//! pipe holds bytes then waits until the writer has emptied it. If no pipe
//! can be had (descriptor limit), the direction goes on copying.

use std::io;
use std::net::Shutdown;
use std::os::fd::{AsRawFd, OwnedFd};

use sched::{ticks, Ctx, Reasons, Status, TaskletId, Tick, ETERNITY};

/// The later of two dates, an unset one ignored.
fn later(a: Tick, b: Tick) -> Tick {
    if !ticks::is_set(a) || ticks::is_set(b) && ticks::is_lt(a, b) {
        b
    } else {
        a
    }
}

use crate::transport::Transport;
use crate::worker::Worker;

/// Where buffers come from and go back to (the thread's pool; a plain
/// allocator in unit tests).
pub(super) trait Pool {
    fn get(&self) -> Vec<u8>;
    fn put(&self, b: Vec<u8>);
}

impl Pool for Worker {
    fn get(&self) -> Vec<u8> {
        self.get_buf()
    }
    fn put(&self, b: Vec<u8>) {
        self.put_buf(b)
    }
}

/// Whether a direction moves through a kernel pipe (`option splice-*`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(super) enum SpliceWant {
    /// Copy through the buffer.
    #[default]
    Off,
    /// Splice once the direction streams (`splice-auto`).
    Auto,
    /// Splice as soon as it may (`splice-request`, `splice-response`).
    On,
}

/// A direction's kernel pipe: bytes spliced in and not yet out.
pub(super) struct KPipe {
    r: OwnedFd,
    w: OwnedFd,
    held: usize,
}

impl KPipe {
    fn new((r, w): (OwnedFd, OwnedFd)) -> KPipe {
        crate::sys::count_pipe(true);
        KPipe { r, w, held: 0 }
    }
}

impl Drop for KPipe {
    fn drop(&mut self) {
        crate::sys::count_pipe(false);
    }
}

/// The most one splice read asks for: a pipe's default capacity (16 pages).
const PIPE_CHUNK: usize = 64 * 1024;

/// One direction's bytes, `start..end` of `buf` (empty `buf`: none held),
/// or its kernel pipe once it splices (the buffer stays empty then).
#[derive(Default)]
pub(super) struct Half {
    pub(super) buf: Vec<u8>,
    pub(super) start: usize,
    pub(super) end: usize,
    /// The reader stopped because the buffer was full: wake it on room.
    pub(super) reader_blocked: bool,
    pub(super) splice: SpliceWant,
    pub(super) kp: Option<KPipe>,
    /// Reads in a row that filled the buffer (`splice-auto`'s test).
    full_reads: u8,
    /// When the writer's wait began: bytes came into an empty direction,
    /// or the last write that moved some (HAProxy's write timeout runs
    /// from there while bytes wait; a drained direction re-arms its
    /// reader's timeout from its last write).
    pub(super) wbase: Tick,
}

impl Half {
    /// Bytes in the buffer (what the rules inspect).
    pub(super) fn len(&self) -> usize {
        self.end - self.start
    }

    /// Bytes waiting to be written: the buffer's and the pipe's.
    pub(super) fn pending(&self) -> usize {
        self.len() + self.kp.as_ref().map_or(0, |k| k.held)
    }

    /// Whether a read could add bytes (a released buffer is room; a pipe
    /// is read again once empty).
    fn has_room(&self) -> bool {
        match &self.kp {
            Some(k) => k.held == 0,
            None => self.buf.is_empty() || self.len() < self.buf.len(),
        }
    }

    /// Moves the direction to a kernel pipe when it is wanted and may be
    /// (`may`: both sockets plain, nothing inspects the bytes) and the
    /// buffer is empty. A failed `pipe2` leaves it copying.
    fn maybe_splice(&mut self, may: bool) {
        if self.kp.is_some() || !may || self.len() > 0 {
            return;
        }
        let want = match self.splice {
            SpliceWant::Off => false,
            SpliceWant::Auto => self.full_reads >= 2,
            SpliceWant::On => true,
        };
        if !want {
            return;
        }
        match crate::sys::pipe_nb() {
            Ok(p) => self.kp = Some(KPipe::new(p)),
            Err(_) => self.splice = SpliceWant::Off,
        }
    }

    pub(super) fn data(&self) -> &[u8] {
        if self.buf.is_empty() {
            &[]
        } else {
            &self.buf[self.start..self.end]
        }
    }

    /// Gives the buffer back to the pool when it holds nothing.
    fn release_if_empty(&mut self, w: &dyn Pool) {
        if self.start == self.end && !self.buf.is_empty() {
            w.put(std::mem::take(&mut self.buf));
            self.start = 0;
            self.end = 0;
        }
    }
}

/// One socket of the session and what is known of it.
#[derive(Default)]
pub(super) struct Sock {
    pub(super) tr: Option<Transport>,
    /// A server socket's count among its server's connections in use,
    /// let go with `tr`.
    pub(super) used: Option<crate::backend::pool::UsedConn>,
    pub(super) rd: bool,
    pub(super) wr: bool,
    /// The poller said the peer closed (`EPOLLRDHUP`/`HUP`): a short read
    /// does not mean drained, the FIN waits behind the bytes (and no
    /// further edge will come for it).
    pub(super) hup: bool,
    /// A FIN was read (or the read side failed).
    pub(super) eof: bool,
    /// A read or write failed (reset, broken pipe, TLS error).
    pub(super) err: bool,
    /// The read timeout expired: reading stopped (`eof` set) with no FIN
    /// read, so bytes may wait unread.
    pub(super) rd_expired: bool,
    /// Our FIN was sent.
    pub(super) shut_wr: bool,
    /// Last read that moved bytes (or the accept, the connect).
    pub(super) last_rd: Tick,
    /// Last write that moved bytes (or the accept, the connect): it
    /// refreshes this side's read timeout too unless `indep`.
    pub(super) last_wr: Tick,
    /// `option independent-streams` on this side (the frontend's for the
    /// client, the backend's for the server).
    pub(super) indep: bool,
    /// Bytes read from this socket.
    pub(super) bytes_read: u64,
    /// Bytes written to this socket from a kernel pipe.
    pub(super) spliced_out: u64,
    /// `option nolinger` on this side: closed without a `shutdown`, so
    /// the close (SO_LINGER 0) sends a RST and no FIN.
    pub(super) nolinger: bool,
    /// A server socket of a nolinger backend: the other side's FIN is not
    /// passed on, the socket is closed (a RST) instead, as HAProxy's
    /// silent shutdown of such a server connection.
    pub(super) silent_shut: bool,
    /// The poller watches the socket's writability (see
    /// [`Pipe::watch_blocked`]): a connecting socket, or one a write
    /// found full.
    pub(super) out: bool,
}

impl Sock {
    /// A fresh start of both timeouts (the accept, the connect).
    pub(super) fn touch(&mut self, now: Tick) {
        self.last_rd = now;
        self.last_wr = now;
    }

    /// The read timeout's date of this side (HAProxy's `rex`), `from`
    /// the direction it reads into, `to` the one it writes: never while
    /// its reading is over or while what it sent waits to be written on
    /// (the other side's write timeout runs then); otherwise from its
    /// last read, the last write of what it sent, and, unless
    /// `option independent-streams`, its own last write.
    pub(super) fn read_expiry(&self, from: &Half, to: &Half, held: bool, t: u32) -> Tick {
        if self.eof || self.err || !held && from.pending() > 0 {
            return ETERNITY;
        }
        let mut base = later(self.last_rd, from.wbase);
        if !self.indep {
            base = later(later(base, self.last_wr), to.wbase);
        }
        ticks::add(base, t)
    }

    /// The write timeout's date of this side (HAProxy's `wex`): while
    /// bytes wait for it (`to`, not held back), from when the wait began
    /// or the last write that moved some.
    pub(super) fn write_expiry(&self, to: &Half, held: bool, t: u32) -> Tick {
        if self.shut_wr || self.err || held || to.pending() == 0 {
            return ETERNITY;
        }
        ticks::add(to.wbase, t)
    }

    /// Reads once into `h`. Returns whether bytes arrived.
    fn read_into(&mut self, h: &mut Half, w: &dyn Pool, now: Tick) -> bool {
        if !self.rd || self.eof || self.err {
            return false;
        }
        let Some(tr) = self.tr.as_mut() else {
            return false;
        };
        if h.kp.is_some() {
            let fd = tr.raw_fd();
            return self.splice_in(fd, h, now);
        }
        if h.buf.is_empty() {
            h.buf = w.get();
            h.start = 0;
            h.end = 0;
        }
        if h.end == h.buf.len() && h.start > 0 {
            h.buf.copy_within(h.start..h.end, 0);
            h.end -= h.start;
            h.start = 0;
        }
        if h.end == h.buf.len() {
            h.reader_blocked = true;
            return false;
        }
        let room = h.buf.len() - h.end;
        let before = h.end;
        let was_empty = h.len() == 0;
        // A short read clears `rd`; with the close reported, a TLS read
        // that took only records without data reads once more (the
        // client's Finished or a KeyUpdate with its FIN in one segment).
        let r = crate::mux::read_once_with(
            tr,
            &mut h.buf,
            &mut h.end,
            &mut self.rd,
            self.hup,
            &mut self.eof,
        );
        match r {
            Ok(true) => {
                let n = h.end - before;
                self.bytes_read += n as u64;
                self.last_rd = now;
                if was_empty {
                    h.wbase = now;
                }
                h.full_reads = if n == room && room * 2 >= h.buf.len() {
                    h.full_reads.saturating_add(1)
                } else {
                    0
                };
                true
            }
            Ok(false) => {
                h.release_if_empty(w);
                false
            }
            Err(_) => {
                self.eof = true;
                self.err = true;
                false
            }
        }
    }

    /// A failed write: whether to try again (interrupted); otherwise the
    /// socket is marked full (`WouldBlock`) or failed.
    fn write_failed(e: &io::Error, wr: &mut bool, err: &mut bool) -> bool {
        match e.kind() {
            io::ErrorKind::Interrupted => true,
            io::ErrorKind::WouldBlock => {
                *wr = false;
                false
            }
            _ => {
                *err = true;
                false
            }
        }
    }

    /// One splice from this socket (`fd`) into `h`'s pipe. Returns
    /// whether bytes arrived.
    fn splice_in(&mut self, fd: std::os::fd::RawFd, h: &mut Half, now: Tick) -> bool {
        let Some(kp) = h.kp.as_mut() else {
            return false;
        };
        if kp.held >= PIPE_CHUNK {
            h.reader_blocked = true;
            return false;
        }
        loop {
            match crate::sys::splice(fd, kp.w.as_raw_fd(), PIPE_CHUNK - kp.held) {
                Ok(0) => {
                    self.eof = true;
                    return false;
                }
                Ok(n) => {
                    if kp.held == 0 {
                        h.wbase = now;
                    }
                    kp.held += n;
                    self.bytes_read += n as u64;
                    self.last_rd = now;
                    return true;
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                    // No data, or no room in the pipe: the two cannot be
                    // told apart, so a pipe holding bytes is emptied
                    // before the socket is read again.
                    if kp.held > 0 {
                        h.reader_blocked = true;
                    } else {
                        self.rd = false;
                    }
                    return false;
                }
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(_) => {
                    self.eof = true;
                    self.err = true;
                    return false;
                }
            }
        }
    }

    /// Writes what the direction's pipe holds to this socket. Returns
    /// whether bytes left.
    fn splice_out(&mut self, kp: &mut KPipe, now: Tick) -> bool {
        let Some(tr) = self.tr.as_ref() else {
            return false;
        };
        let fd = tr.raw_fd();
        let mut moved = false;
        while kp.held > 0 {
            match crate::sys::splice(kp.r.as_raw_fd(), fd, kp.held) {
                Ok(0) => break,
                Ok(n) => {
                    kp.held -= n.min(kp.held);
                    self.spliced_out += n as u64;
                    self.last_wr = now;
                    moved = true;
                }
                Err(e) => {
                    if !Self::write_failed(&e, &mut self.wr, &mut self.err) {
                        break;
                    }
                }
            }
        }
        moved
    }

    /// Writes `prefix` (a PROXY header, once) and then what `h` holds.
    /// Returns whether bytes left.
    /// `other_eof`: the other side's FIN was read, so `h` holds the last
    /// bytes this side will send: they leave with `MSG_MORE`
    /// ([`Transport::write_last`]) and the FIN [`Sock::shut_if_done`]
    /// passes on right after (or the close) goes in their segment.
    fn write_from(
        &mut self,
        prefix: &mut Vec<u8>,
        h: &mut Half,
        other_eof: bool,
        w: &dyn Pool,
        now: Tick,
    ) -> bool {
        if !self.wr || self.err {
            return false;
        }
        if prefix.is_empty() && h.len() == 0 {
            if let Some(kp) = h.kp.as_mut() {
                let moved = self.splice_out(kp, now);
                if moved {
                    h.wbase = now;
                }
                return moved;
            }
        }
        let Some(tr) = self.tr.as_mut() else {
            return false;
        };
        let mut moved = false;
        if tr.has_pending_output() {
            match tr.flush_pending() {
                Ok(true) => {
                    moved = true;
                    self.last_wr = now;
                }
                Ok(false) => {
                    self.wr = false;
                    return false;
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                    self.wr = false;
                    return false;
                }
                Err(_) => {
                    self.err = true;
                    return false;
                }
            }
        }
        while !prefix.is_empty() || h.len() > 0 {
            let src: &[u8] = if prefix.is_empty() {
                &h.buf[h.start..h.end]
            } else {
                prefix
            };
            let want = src.len();
            let wrote = if other_eof && prefix.is_empty() {
                tr.write_last(&[io::IoSlice::new(src)])
            } else {
                tr.write(src)
            };
            match wrote {
                Ok(n) => {
                    if prefix.is_empty() {
                        h.start += n;
                    } else {
                        prefix.drain(..n);
                    }
                    moved |= n > 0;
                    self.last_wr = now;
                    if n < want {
                        self.wr = false;
                        break;
                    }
                }
                Err(e) => {
                    if !Self::write_failed(&e, &mut self.wr, &mut self.err) {
                        break;
                    }
                }
            }
        }
        if moved {
            h.wbase = now;
        }
        h.release_if_empty(w);
        moved
    }

    /// Passes the other side's FIN on once nothing is left to write.
    /// `other_done`: the other side is closed both ways without an error,
    /// so this FIN ends the session: when this side's peer has closed too
    /// (its FIN read, nothing left unread), the FIN is left to the close
    /// that follows at once, which sends it (HAProxy closes such a socket
    /// without a `shutdown` either): one system call less per session.
    fn shut_if_done(&mut self, h: &Half, other_eof: bool, other_done: bool) {
        if self.shut_wr || !other_eof || h.pending() > 0 || self.err {
            return;
        }
        if self.silent_shut {
            // Both ways end here: what the server had not read or sent
            // is dropped with the RST.
            self.tr = None;
            self.used = None;
            self.shut_wr = true;
            self.eof = true;
            return;
        }
        let Some(tr) = self.tr.as_mut() else {
            return;
        };
        tr.close_notify();
        if tr.has_pending_output() {
            match tr.flush_pending() {
                Ok(true) => {}
                Ok(false) => return,
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return,
                Err(_) => {
                    self.err = true;
                    return;
                }
            }
        }
        self.shut_wr = true;
        if self.eof && other_done && !self.nolinger && !self.rd_expired {
            return;
        }
        let _ = tr.tcp().shutdown(Shutdown::Write);
    }

    /// Closed both ways without an error (see [`Sock::shut_if_done`]).
    fn clean_done(&self) -> bool {
        !self.err && self.eof && self.shut_wr
    }

    /// Both ways closed: nothing more will move on this socket.
    pub(super) fn done(&self) -> bool {
        self.err || (self.eof && self.shut_wr)
    }

    /// Closes the socket at the session's end. One whose FIN went out (or
    /// was left to this close, which sends it) and whose peer's came in
    /// is just closed: a `shutdown` would only fail
    /// (`ENOTCONN`), and closing the last descriptor of a socket takes it
    /// out of the poller, so no `EPOLL_CTL_DEL` either (ebb never
    /// duplicates a connection's descriptor; an event already fetched
    /// names a freed tasklet generation and is ignored). Any other socket
    /// is shut down both ways first (its FIN, or its TLS `close_notify`).
    pub(super) fn close(&mut self) {
        self.used = None;
        if let Some(mut tr) = self.tr.take() {
            if !(self.nolinger || self.eof && self.shut_wr) {
                let _ = tr.shutdown();
            }
        }
    }
}

/// What the two tasklets share (on one thread: never borrowed twice).
#[derive(Default)]
pub(super) struct Pipe {
    pub(super) cli: Sock,
    pub(super) srv: Sock,
    pub(super) c2s: Half,
    pub(super) s2c: Half,
    /// Bytes for the server before any of `c2s` (a PROXY header).
    pub(super) srv_prefix: Vec<u8>,
    /// The server socket exists and its connect is under way.
    pub(super) connecting: bool,
    pub(super) connect_failed: bool,
    /// The TCP connect (and SOCKS4 handshake) is done and the TLS
    /// handshake under way: still `connecting`, as HAProxy counts it (its
    /// failure is a failed connect, `timeout connect` covers it).
    pub(super) handshaking: bool,
    /// `socks4`: the proxy's handshake, part of the connect.
    pub(super) socks: Option<Box<crate::backend::socks4::Socks4>>,
    /// When the connect completed.
    pub(super) t_conn: Option<Tick>,
    /// The server socket's local address, when something reads it
    /// ([`crate::sample::back_local`]).
    pub(super) srv_local: Option<crate::sample::BackLocal>,
    /// The connect was confirmed by [`Pipe::send_early`] (no edge of the
    /// server socket came since its registration, so the server side has
    /// not run for it).
    pub(super) sent_early: bool,
    /// Bytes may flow to the server (a server is connected and the
    /// content rules have decided).
    pub(super) forwarding: bool,
    /// The server's bytes wait in `s2c` for the `tcp-response` rules.
    pub(super) res_hold: bool,
}

/// What a pass of one side means for the other.
#[derive(Default, Clone, Copy)]
pub(super) struct Moved {
    /// Something moved (run again).
    pub(super) any: bool,
    /// The other side has new work.
    pub(super) wake_other: bool,
    /// This side passed bytes on and its socket may hold more: run it
    /// again (a wakeup, not a loop: see [`Pipe::pass_on`]).
    pub(super) again: bool,
}

impl Pipe {
    /// Both sockets are plain TCP (a kernel pipe can carry their bytes).
    fn both_plain(&self) -> bool {
        let plain = |s: &Sock| s.tr.as_ref().is_some_and(|t| !t.is_tls() && !t.is_lane());
        plain(&self.cli) && plain(&self.srv)
    }

    /// Switches either direction to its kernel pipe when it may.
    fn maybe_splice(&mut self) {
        // (Copying directions, the default, cost one test per pass.)
        let off = |h: &Half| h.splice == SpliceWant::Off || h.kp.is_some();
        if !self.forwarding || self.connecting || off(&self.c2s) && off(&self.s2c) {
            return;
        }
        let plain = self.both_plain();
        self.c2s.maybe_splice(plain && self.srv_prefix.is_empty());
        self.s2c.maybe_splice(plain && !self.res_hold);
    }

    /// The client side's pass: read the client into `c2s`, write `s2c`
    /// to it, pass the server's FIN on; then pass what it read on to the
    /// server at once (see [`Pipe::pass_on`]).
    pub(super) fn client_pass(&mut self, w: &dyn Pool, now: Tick) -> Moved {
        let mut m = Moved::default();
        let c2s_was_empty = self.c2s.pending() == 0;
        let mut c2s_new = false;
        // The client's FIN came in this pass.
        let mut fin = false;
        loop {
            self.maybe_splice();
            let eof_before = self.cli.eof;
            let s2c_was_full = std::mem::take(&mut self.s2c.reader_blocked);
            let got = self.cli.read_into(&mut self.c2s, w, now);
            let sent = !self.res_hold
                && self
                    .cli
                    .write_from(&mut Vec::new(), &mut self.s2c, self.srv.eof, w, now);
            if !self.res_hold {
                let srv_done = self.srv.clean_done();
                self.cli.shut_if_done(&self.s2c, self.srv.eof, srv_done);
            }
            if s2c_was_full && self.s2c.has_room() {
                m.wake_other = true;
            } else if s2c_was_full {
                self.s2c.reader_blocked = true;
            }
            c2s_new |= got && c2s_was_empty;
            if self.cli.err {
                m.wake_other = true;
            } else if self.cli.eof != eof_before {
                fin = true;
            }
            if !(got || sent) {
                break;
            }
            m.any = true;
        }
        if self.forwarding && !self.connecting && self.srv.tr.is_some() {
            let err_before = self.srv.err;
            let Pipe {
                srv,
                c2s,
                srv_prefix,
                cli,
                ..
            } = self;
            if Self::pass_on(srv, srv_prefix, c2s, cli, w, now) {
                m.any = true;
                m.again = true;
            }
            m.wake_other |= self.srv.err != err_before;
            if fin && self.srv_prefix.is_empty() {
                // The client's FIN goes on to the server from here once
                // nothing is left before it, as its bytes do (HAProxy
                // shuts the other side from the same stream): the server
                // side need not run for it.
                let cli_done = self.cli.clean_done();
                let Pipe { srv, c2s, cli, .. } = self;
                srv.shut_if_done(c2s, cli.eof, cli_done);
                fin = !srv.shut_wr && !srv.err;
            }
        }
        m.wake_other |= fin;
        // The server side has bytes to write only if some are left.
        m.wake_other |= c2s_new && self.c2s.pending() + self.srv_prefix.len() > 0;
        m
    }

    /// The server side's pass: complete a connect, write the PROXY header
    /// and `c2s` to the server, read it into `s2c`, pass the client's FIN
    /// on; then pass what it read on to the client at once (see
    /// [`Pipe::pass_on`]).
    pub(super) fn server_pass(&mut self, w: &dyn Pool, now: Tick) -> Moved {
        let mut m = Moved::default();
        if self.srv.tr.is_none() {
            return m;
        }
        if self.connecting {
            match self.check_connect(now) {
                None => return m,
                Some(false) => {
                    m.wake_other = true;
                    return m;
                }
                Some(true) => m.wake_other = true,
            }
        }
        if !self.forwarding {
            return m;
        }
        let s2c_was_empty = self.s2c.pending() == 0;
        let mut s2c_new = false;
        loop {
            self.maybe_splice();
            let eof_before = self.srv.eof;
            let shut_before = self.srv.shut_wr;
            let c2s_was_full = std::mem::take(&mut self.c2s.reader_blocked);
            let sent =
                self.srv
                    .write_from(&mut self.srv_prefix, &mut self.c2s, self.cli.eof, w, now);
            let got = self.srv.read_into(&mut self.s2c, w, now);
            let cli_done = self.cli.clean_done();
            self.srv.shut_if_done(&self.c2s, self.cli.eof, cli_done);
            if c2s_was_full && self.c2s.has_room() {
                m.wake_other = true;
            } else if c2s_was_full {
                self.c2s.reader_blocked = true;
            }
            if self.res_hold {
                // Held bytes are inspected again on each arrival.
                m.wake_other |= got;
            } else {
                s2c_new |= got && s2c_was_empty;
            }
            if self.srv.eof != eof_before || self.srv.shut_wr != shut_before || self.srv.err {
                m.wake_other = true;
            }
            if !(got || sent) {
                break;
            }
            m.any = true;
        }
        if !self.res_hold && self.cli.tr.is_some() {
            let err_before = self.cli.err;
            let Pipe { cli, s2c, srv, .. } = self;
            if Self::pass_on(cli, &mut Vec::new(), s2c, srv, w, now) {
                m.any = true;
                m.again = true;
            }
            m.wake_other |= self.cli.err != err_before;
        }
        // The client side has bytes to write only if some are left.
        m.wake_other |= s2c_new && self.s2c.pending() > 0;
        m
    }

    /// Writes what one side just read to the other side's socket (`to`)
    /// from the reader's own run, as HAProxy's I/O callback sends on the
    /// opposite side at once: a bulk cycle then runs one tasklet (one
    /// read, one write) instead of waking the writer's. Once per run: the
    /// reader, whose bytes it freed room for, runs again when `again`
    /// says so (its socket may hold more) rather than loop here, so other
    /// tasks get their turn between buffers. Not towards an HTTP/2 lane
    /// (its writer wakes its connection), and nothing when `to` is not
    /// known writable: its writable edge wakes its own side then.
    /// Returns whether bytes left and the reader may read again.
    fn pass_on(
        to: &mut Sock,
        prefix: &mut Vec<u8>,
        h: &mut Half,
        from: &Sock,
        w: &dyn Pool,
        now: Tick,
    ) -> bool {
        if !to.wr || to.err || to.tr.as_ref().is_none_or(Transport::is_lane) {
            return false;
        }
        if !to.write_from(prefix, h, from.eof, w, now) {
            return false;
        }
        if h.has_room() {
            // The reader is the caller: it goes on by `again`.
            h.reader_blocked = false;
        }
        from.rd && !from.eof && !from.err
    }

    /// Completes a connect once the socket says so: `Some(ok)` when the
    /// outcome is known.
    fn check_connect(&mut self, now: Tick) -> Option<bool> {
        let st = self.srv.tr.as_ref()?;
        if !(self.srv.rd || self.srv.wr) {
            return None;
        }
        if self.handshaking {
            return self.check_handshake(now);
        }
        let tls = st.is_tls();
        // (The session drops any event bits left from an earlier socket
        // before connecting.)
        match crate::backend::connect_outcome_reset(
            st.tcp(),
            &mut self.socks,
            self.srv.wr,
            self.srv.hup,
        ) {
            // TCP is up: a TLS server's handshake completes the connect
            // (a reset meanwhile fails it).
            Some(Ok(true)) | Some(Err(_)) if tls => self.check_handshake(now),
            // Established, then reset by the server before we saw it:
            // connected, and the server side has failed (`SD`).
            Some(Err(crate::backend::Reset)) => {
                self.connecting = false;
                self.t_conn = Some(now);
                self.srv.err = true;
                self.srv.eof = true;
                self.srv.touch(now);
                Some(true)
            }
            Some(Ok(true)) => {
                self.connecting = false;
                self.t_conn = Some(now);
                self.srv.wr = true;
                self.srv.touch(now);
                Some(true)
            }
            None => {
                self.srv.rd = false;
                self.srv.wr = false;
                None
            }
            Some(Ok(false)) => {
                self.connecting = false;
                self.connect_failed = true;
                Some(false)
            }
        }
    }

    /// The TLS handshake of a server connection whose TCP connect is done:
    /// its end is the connect's (`Some(ok)`), `None` while it waits for
    /// the socket.
    fn check_handshake(&mut self, now: Tick) -> Option<bool> {
        let r = crate::backend::handshake_outcome(self.srv.tr.as_mut()?);
        self.handshaking = r.is_none();
        self.connecting = r.is_none();
        self.connect_failed = r == Some(false);
        // Waiting: for an edge. Done: records past the handshake may wait
        // in rustls or the socket, the next read looks.
        self.srv.rd = r == Some(true);
        self.srv.wr = r == Some(true);
        if r == Some(true) {
            self.t_conn = Some(now);
            self.srv.touch(now);
        }
        r
    }

    /// Sends what waits in `c2s` on a connect just started, when the
    /// kernel may have completed it within `connect` (a loopback server:
    /// the handshake runs in the calling thread's softirq): bytes that
    /// leave confirm the connect, so no writable edge is waited for (and
    /// the socket is registered for reading alone). `EAGAIN` (not
    /// established yet) leaves it to the edge; a reset says the server
    /// accepted then cut (see [`crate::backend::connect_outcome_reset`]);
    /// any other error is a failed connect. Plain sockets without a
    /// PROXY header or a SOCKS4 handshake only. Returns whether the
    /// outcome is known.
    pub(super) fn send_early(&mut self, w: &dyn Pool, now: Tick) -> bool {
        let h = &mut self.c2s;
        if !self.connecting || h.len() == 0 || !self.srv_prefix.is_empty() || self.socks.is_some() {
            return false;
        }
        let Some(tr) = self.srv.tr.as_mut().filter(|t| !t.is_tls() && !t.is_lane()) else {
            return false;
        };
        let src = &h.buf[h.start..h.end];
        use crate::transport::Early;
        let want = src.len();
        match tr.send_early(src, self.cli.eof) {
            Early::Sent(n) => {
                h.start += n;
                self.srv.wr = n == want;
                self.srv.last_wr = now;
                h.wbase = now;
                h.release_if_empty(w);
            }
            Early::Failed(e)
                if matches!(e.raw_os_error(), Some(libc::ECONNRESET | libc::EPIPE)) =>
            {
                self.srv.err = true;
                self.srv.eof = true;
            }
            Early::Blocked => return false,
            Early::Failed(_) => {
                self.connecting = false;
                self.connect_failed = true;
                return true;
            }
        }
        self.connecting = false;
        self.t_conn = Some(now);
        self.sent_early = true;
        true
    }

    /// Has the poller watch the writability of each socket whose last
    /// write blocked (HAProxy's `fd_want_send`): the sockets are
    /// registered for reading alone, so a short session is not woken by
    /// edges with nothing to write (its connect's end when the bytes left
    /// already, the ACK of its FIN). Once watched, a socket stays so.
    pub(super) fn watch_blocked(&mut self, ctx: &mut Ctx) {
        for s in [&mut self.cli, &mut self.srv] {
            if s.wr || s.out || s.err {
                continue;
            }
            let Some(tr) = s.tr.as_ref() else { continue };
            s.out = true;
            if ctx.want_write(tr.raw_fd()).is_err() {
                s.err = true;
            }
        }
    }

    /// Gives both buffers back and closes the pipes.
    pub(super) fn release(&mut self, w: &dyn Pool) {
        for h in [&mut self.c2s, &mut self.s2c] {
            if !h.buf.is_empty() {
                w.put(std::mem::take(&mut h.buf));
            }
            h.start = 0;
            h.end = 0;
            h.kp = None;
        }
    }
}

/// The server side's tasklet: one per session, created at its first
/// connect; every server socket of the session is registered with it.
pub(super) struct SrvTasklet {
    pub(super) pipe: std::rc::Rc<std::cell::RefCell<Pipe>>,
    pub(super) w: std::rc::Rc<Worker>,
    /// The session's (client side's) tasklet.
    pub(super) cli: TaskletId,
}

impl sched::TaskletFn for SrvTasklet {
    fn run(&mut self, ctx: &mut Ctx, me: TaskletId, _why: Reasons) -> Status {
        let mut p = self.pipe.borrow_mut();
        // Events are taken whatever woke us: an edge that came while we
        // were already queued by the other side is still ours.
        {
            let ev = ctx.take_events(me);
            if ev.readable() || ev.hup_or_err() {
                p.srv.rd = true;
            }
            p.srv.hup |= ev.hup_or_err();
            if ev.writable() || ev.hup_or_err() {
                p.srv.wr = true;
            }
        }
        let m = p.server_pass(&*self.w, ctx.now());
        p.watch_blocked(ctx);
        drop(p);
        if m.wake_other {
            ctx.tasklet_wakeup(self.cli);
        }
        if m.again {
            ctx.tasklet_wakeup(me);
        }
        Status::Continue
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::{Read, Write};
    use std::net::{TcpListener, TcpStream};

    /// 64-byte buffers, so a kilobyte cycles through back-pressure.
    struct Small;
    impl Pool for Small {
        fn get(&self) -> Vec<u8> {
            vec![0; 64]
        }
        fn put(&self, _b: Vec<u8>) {}
    }

    fn worker() -> Small {
        Small
    }

    /// A connected pair: (our non-blocking end, the peer).
    fn pair() -> (Transport, TcpStream) {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let c = TcpStream::connect(l.local_addr().unwrap()).unwrap();
        c.set_nonblocking(true).unwrap();
        let (s, _) = l.accept().unwrap();
        (Transport::plain(c), s)
    }

    /// A pipe between two connected pairs: (the pipe, its client peer,
    /// its server peer).
    fn piped() -> (Pipe, TcpStream, TcpStream) {
        let (c, client) = pair();
        let (s, server) = pair();
        let mut p = Pipe::default();
        p.cli.tr = Some(c);
        p.srv.tr = Some(s);
        (p, client, server)
    }

    /// Runs both passes until neither moves (loopback delivers at once).
    fn settle(p: &mut Pipe, w: &dyn Pool) {
        for _ in 0..64 {
            p.cli.rd = true;
            p.cli.wr = true;
            p.srv.rd = true;
            p.srv.wr = true;
            let a = p.client_pass(w, 1);
            let b = p.server_pass(w, 1);
            if !a.any && !b.any {
                return;
            }
        }
    }

    /// Runs both passes until `peer` has read `n` bytes, then once more
    /// (what those bytes' arrival leads to); returns the bytes.
    fn settle_until(p: &mut Pipe, w: &dyn Pool, peer: &mut TcpStream, n: usize) -> Vec<u8> {
        let mut got = Vec::new();
        let mut tmp = [0u8; 64];
        while got.len() < n {
            settle(p, w);
            if let Ok(k) = peer.read(&mut tmp) {
                got.extend_from_slice(&tmp[..k]);
            }
        }
        settle(p, w);
        got
    }

    #[test]
    fn bytes_cross_both_ways_with_the_prefix_first_and_fins_pass_on() {
        let w = worker();
        let (mut p, mut client, mut server) = piped();
        p.forwarding = true;
        p.srv_prefix = b"PROXY UNKNOWN\r\n".to_vec();
        // More than one 64-byte buffer each way: back-pressure cycles.
        let up: Vec<u8> = (0..1000u32).map(|i| i as u8).collect();
        client.write_all(&up).unwrap();
        client.shutdown(Shutdown::Write).unwrap();
        let mut got = Vec::new();
        server
            .set_read_timeout(Some(std::time::Duration::from_millis(50)))
            .unwrap();
        let mut tmp = [0u8; 4096];
        while got.len() < 15 + up.len() {
            settle(&mut p, &w);
            if let Ok(n) = server.read(&mut tmp) {
                got.extend_from_slice(&tmp[..n]);
            }
        }
        assert_eq!(&got[..15], b"PROXY UNKNOWN\r\n");
        assert_eq!(&got[15..], &up[..]);
        settle(&mut p, &w);
        assert!(p.srv.shut_wr, "the client's FIN reached the server");
        assert_eq!(server.read(&mut tmp).unwrap(), 0);
        // The other way still works after the half-close.
        server.write_all(b"answer").unwrap();
        server.shutdown(Shutdown::Write).unwrap();
        client
            .set_read_timeout(Some(std::time::Duration::from_millis(50)))
            .unwrap();
        assert_eq!(settle_until(&mut p, &w, &mut client, 6), b"answer");
        assert!(p.cli.done() && p.srv.done());
        // The server's FIN ended the session: it goes out with the close
        // the session then makes.
        p.srv.close();
        p.cli.close();
        client.set_read_timeout(None).unwrap();
        assert_eq!(client.read(&mut tmp).unwrap(), 0);
        assert!(
            p.c2s.buf.is_empty() && p.s2c.buf.is_empty(),
            "buffers went back"
        );
    }

    #[test]
    fn the_last_fin_goes_out_with_the_close() {
        let w = worker();
        let (mut p, mut client, mut server) = piped();
        p.forwarding = true;
        // The client closes first: its FIN is passed on by a shutdown, the
        // session goes on the other way.
        client.shutdown(Shutdown::Write).unwrap();
        settle(&mut p, &w);
        assert!(p.srv.shut_wr);
        let mut tmp = [0u8; 16];
        assert_eq!(
            server.read(&mut tmp).unwrap(),
            0,
            "the FIN reached the server"
        );
        // The server answers and closes: that FIN ends the session, so it
        // waits for the close instead of a shutdown of its own.
        server.write_all(b"bye").unwrap();
        server.shutdown(Shutdown::Write).unwrap();
        client.set_nonblocking(true).unwrap();
        assert_eq!(settle_until(&mut p, &w, &mut client, 3), b"bye");
        assert!(p.cli.done() && p.srv.done(), "the session is over");
        assert!(
            client.read(&mut tmp).is_err(),
            "no FIN before the close (no shutdown call)"
        );
        p.srv.close();
        p.cli.close();
        client.set_nonblocking(false).unwrap();
        assert_eq!(client.read(&mut tmp).unwrap(), 0, "a FIN, not a reset");
    }

    #[test]
    fn a_spliced_direction_keeps_order_back_pressure_and_the_fin() {
        let w = worker();
        let (mut p, mut client, mut server) = piped();
        // 100 bytes copied before forwarding (the rules' inspection),
        // then the direction splices once its buffer is empty.
        client.write_all(&[1u8; 100]).unwrap();
        settle(&mut p, &w);
        assert!(p.c2s.kp.is_none());
        p.c2s.splice = SpliceWant::On;
        p.s2c.splice = SpliceWant::Auto;
        p.forwarding = true;
        // 1 MiB through a 64 KiB pipe: the reader must wait for room.
        let up: Vec<u8> = (0..1usize << 20).map(|i| (i % 251) as u8).collect();
        let mut writer = client.try_clone().unwrap();
        let data = up.clone();
        let t = std::thread::spawn(move || {
            writer.write_all(&data).unwrap();
            writer.shutdown(Shutdown::Write).unwrap();
        });
        server.set_nonblocking(true).unwrap();
        let mut got = Vec::new();
        let mut tmp = vec![0u8; 1 << 16];
        loop {
            settle(&mut p, &w);
            match server.read(&mut tmp) {
                Ok(0) => break,
                Ok(n) => got.extend_from_slice(&tmp[..n]),
                Err(_) => std::thread::yield_now(),
            }
        }
        t.join().unwrap();
        assert!(p.c2s.kp.is_some(), "the direction spliced");
        assert_eq!(&got[..100], &[1u8; 100][..]);
        assert_eq!(&got[100..], &up[..], "order kept");
        // What the 64-byte buffer held was copied, the rest spliced.
        let spliced = p.srv.spliced_out as usize;
        assert!(spliced >= up.len() && spliced < up.len() + 100, "{spliced}");
        assert!(p.srv.shut_wr, "the FIN passed on after the pipe emptied");
        // The other way: auto waits for reads that fill the buffer, so a
        // few bytes are copied.
        server.set_nonblocking(false).unwrap();
        server.write_all(b"short").unwrap();
        let mut back = [0u8; 5];
        client
            .set_read_timeout(Some(std::time::Duration::from_millis(50)))
            .unwrap();
        let mut n = 0;
        while n < 5 {
            settle(&mut p, &w);
            if let Ok(k) = client.read(&mut back[n..]) {
                n += k;
            }
        }
        assert_eq!(&back, b"short");
        assert!(p.s2c.kp.is_none(), "not streaming: copied");
        p.release(&w);
        assert!(p.c2s.kp.is_none(), "pipes closed");
    }

    #[test]
    fn nothing_moves_to_the_server_before_forwarding() {
        let w = worker();
        let (mut p, mut client, mut server) = piped();
        client.write_all(b"hello").unwrap();
        settle(&mut p, &w);
        assert_eq!(p.c2s.data(), b"hello");
        server.set_nonblocking(true).unwrap();
        let mut tmp = [0u8; 16];
        assert!(server.read(&mut tmp).is_err(), "held back");
        p.forwarding = true;
        settle(&mut p, &w);
        server.set_nonblocking(false).unwrap();
        server.read_exact(&mut tmp[..5]).unwrap();
        assert_eq!(&tmp[..5], b"hello");
    }

    #[test]
    fn a_drained_buffer_wakes_the_blocked_reader_and_a_hup_is_read_to_the_fin() {
        let w = worker();
        let (mut p, mut client, mut server) = piped();
        p.forwarding = true;
        client.write_all(&[7u8; 200]).unwrap();
        p.cli.rd = true;
        p.client_pass(&w, 1);
        assert!(p.c2s.reader_blocked, "64-byte buffer full");
        p.srv.wr = true;
        // The server side empties it (and gives the buffer back): the
        // client side must be told, or the session stalls.
        let m = p.server_pass(&w, 2);
        assert!(p.c2s.buf.is_empty());
        assert!(m.wake_other);
        // Bytes and a FIN behind them, reported as one edge with HUP.
        server.write_all(b"tail").unwrap();
        // Loopback delivers both before `shutdown` returns.
        server.shutdown(Shutdown::Write).unwrap();
        p.srv.rd = true;
        p.srv.hup = true;
        p.server_pass(&w, 3);
        assert!(p.srv.eof, "the FIN was read without another edge");
        assert_eq!(p.s2c.data(), b"tail");
    }
}
