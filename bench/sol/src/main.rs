//! `sol` — the speed-of-light server for ebb's side-by-side benchmarks.
//!
//! It answers every HTTP/1.1 request with one canned response and does no parsing at all:
//! it only counts request terminators (`\r\n\r\n`) in the byte stream, so it is the least
//! CPU a server can spend per request on this machine's loopback. Every real server is
//! shown as a percentage of it.
//!
//! Per thread: one listening socket (SO_REUSEPORT when there are several threads), one
//! epoll instance, level-triggered `EPOLLIN` registered once per connection (after a first
//! read right at accept, as the request is usually there already); `EPOLLOUT` is added only
//! while a response could not be written whole (large bodies), and removed again when it
//! has been. Steady state per keep-alive request: one `epoll_wait` event,
//! one `read`, one `write`.
//!
//! Usage: `sol --port PORT [--body BYTES] [--close] [--threads N] [--relay ORIGIN_PORT]`
//!   --body N     body length (default 5, the body "hello"; other sizes are filled with a
//!                letter pattern)
//!   --close      answer with `Connection: close` and close after each response
//!   --threads N  N independent event loops (default 1)
//!   --relay P    be the speed-of-light *relay* instead (the reverse-proxy scenario's bound):
//!                for each client connection open one connection to 127.0.0.1:P and copy
//!                bytes both ways, parsing nothing
//!
//! Requests with bodies are not supported (nothing is parsed); this is a load-test target,
//! not a server.
//!
//! ## The relay
//!
//! Per client: one upstream connection, made at accept (a blocking connect: on loopback the
//! handshake completes inside the call), then both sockets registered once, level-triggered
//! `EPOLLIN`. Bytes read from one side are written at once to the other, from the same
//! buffer; nothing is parsed, nothing is kept. Steady state per keep-alive request: two
//! `epoll_wait` events (request in, answer back), two `read`s and two `write`s, which is the
//! least any proxy must do. Back-pressure: when a write is short, the rest is kept for that
//! side, which is then watched for `EPOLLOUT` while the other side is not read; when the rest
//! is written both go back to `EPOLLIN`. Either side closing or failing closes both.

use std::io;
use std::os::raw::c_int;
use std::process::exit;

const LISTENER: u64 = u64::MAX;
const READ_BUF: usize = 64 * 1024;
const MAX_EVENTS: usize = 256;

struct Args {
    port: u16,
    body: usize,
    close: bool,
    threads: usize,
    relay: Option<u16>,
}

fn usage(msg: &str) -> ! {
    eprintln!("sol: {msg}");
    eprintln!("usage: sol --port PORT [--body BYTES] [--close] [--threads N] [--relay ORIGIN_PORT]");
    exit(2);
}

fn parse_args() -> Args {
    let mut args = Args { port: 0, body: 5, close: false, threads: 1, relay: None };
    let mut it = std::env::args().skip(1);
    while let Some(a) = it.next() {
        let mut num = |name: &str| -> usize {
            it.next()
                .and_then(|v| v.parse().ok())
                .unwrap_or_else(|| usage(&format!("{name} needs a number")))
        };
        match a.as_str() {
            "--port" => args.port = u16::try_from(num("--port")).unwrap_or_else(|_| usage("bad port")),
            "--body" => args.body = num("--body"),
            "--threads" => args.threads = num("--threads").max(1),
            "--close" => args.close = true,
            "--relay" => {
                args.relay = Some(u16::try_from(num("--relay")).unwrap_or_else(|_| usage("bad relay port")))
            }
            "-h" | "--help" => usage("help"),
            other => usage(&format!("unknown argument {other}")),
        }
    }
    if args.port == 0 {
        usage("--port is required");
    }
    args
}

fn response(body_len: usize, close: bool) -> Vec<u8> {
    let mut r = format!(
        "HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: {body_len}\r\n{}\r\n",
        if close { "Connection: close\r\n" } else { "" }
    )
    .into_bytes();
    if body_len == 5 {
        r.extend_from_slice(b"hello");
    } else {
        r.extend((0..body_len).map(|i| b'a' + (i % 26) as u8));
    }
    r
}

fn check(ret: c_int, what: &str) -> c_int {
    if ret < 0 {
        eprintln!("sol: {what}: {}", io::Error::last_os_error());
        exit(1);
    }
    ret
}

fn listener(port: u16, reuseport: bool) -> c_int {
    // SAFETY: plain socket syscalls on values we own; every pointer passed points to a live
    // local of the size given beside it.
    unsafe {
        let fd = check(
            libc::socket(libc::AF_INET, libc::SOCK_STREAM | libc::SOCK_NONBLOCK | libc::SOCK_CLOEXEC, 0),
            "socket",
        );
        let one: c_int = 1;
        let optlen = std::mem::size_of::<c_int>() as libc::socklen_t;
        let one_ptr = &one as *const c_int as *const libc::c_void;
        check(libc::setsockopt(fd, libc::SOL_SOCKET, libc::SO_REUSEADDR, one_ptr, optlen), "SO_REUSEADDR");
        if reuseport {
            check(libc::setsockopt(fd, libc::SOL_SOCKET, libc::SO_REUSEPORT, one_ptr, optlen), "SO_REUSEPORT");
        }
        let mut sa: libc::sockaddr_in = std::mem::zeroed();
        sa.sin_family = libc::AF_INET as libc::sa_family_t;
        sa.sin_port = port.to_be();
        sa.sin_addr.s_addr = u32::from_be_bytes([127, 0, 0, 1]).to_be();
        check(
            libc::bind(
                fd,
                &sa as *const libc::sockaddr_in as *const libc::sockaddr,
                std::mem::size_of::<libc::sockaddr_in>() as libc::socklen_t,
            ),
            "bind",
        );
        check(libc::listen(fd, 4096), "listen");
        fd
    }
}

/// What one connection still owes its client.
#[derive(Clone, Copy, Default)]
struct Conn {
    /// How many bytes of "\r\n\r\n" the stream ended with so far (0..=3).
    matched: u8,
    /// Responses owed, the first of them written up to `off`.
    owed: u32,
    off: usize,
    /// Registered with epoll, and with EPOLLOUT too.
    registered: bool,
    want_out: bool,
}

const TERM: &[u8; 4] = b"\r\n\r\n";

/// Counts complete terminators in `data`, carrying a partial match across reads.
fn count_requests(matched: &mut u8, data: &[u8]) -> u32 {
    let mut m = *matched as usize;
    let mut n = 0;
    for &b in data {
        if b == TERM[m] {
            m += 1;
            if m == 4 {
                n += 1;
                m = 0;
            }
        } else {
            // The only self-overlap of "\r\n\r\n" that matters: a '\r' restarts a match.
            m = usize::from(b == b'\r');
        }
    }
    *matched = m as u8;
    n
}

struct Loop {
    ep: c_int,
    conns: Vec<Option<Conn>>,
    resp: &'static [u8],
    close_after: bool,
}

impl Loop {
    fn ctl(&self, op: c_int, fd: c_int, events: u32) -> c_int {
        let mut ev = libc::epoll_event { events, u64: fd as u64 };
        // SAFETY: `ev` is a live local; epoll_ctl copies it.
        unsafe { libc::epoll_ctl(self.ep, op, fd, &mut ev) }
    }

    fn close(&mut self, fd: c_int) {
        self.conns[fd as usize] = None;
        // SAFETY: `fd` is a connection this loop accepted and still owns; closing removes it
        // from the epoll set too.
        unsafe { libc::close(fd) };
    }

    fn accept_all(&mut self, lfd: c_int, buf: &mut [u8]) {
        loop {
            // SAFETY: null address pointers are allowed by accept4.
            let fd = unsafe {
                libc::accept4(lfd, std::ptr::null_mut(), std::ptr::null_mut(), libc::SOCK_NONBLOCK | libc::SOCK_CLOEXEC)
            };
            if fd < 0 {
                return; // EAGAIN, or a transient error (EMFILE, ECONNABORTED): retry on next event
            }
            let one: c_int = 1;
            // SAFETY: `one` is a live c_int and the length given is its size.
            unsafe {
                libc::setsockopt(
                    fd,
                    libc::IPPROTO_TCP,
                    libc::TCP_NODELAY,
                    &one as *const c_int as *const libc::c_void,
                    std::mem::size_of::<c_int>() as libc::socklen_t,
                );
            }
            let i = fd as usize;
            if i >= self.conns.len() {
                self.conns.resize(i + 1024, None);
            }
            self.conns[i] = Some(Conn::default());
            // The request has usually arrived already: answer it before registering, which
            // spares a close-after-response connection its epoll round trip.
            self.handle(fd, buf);
        }
    }

    fn handle(&mut self, fd: c_int, buf: &mut [u8]) {
        let Some(mut c) = self.conns.get(fd as usize).copied().flatten() else { return };
        // Read what is there; a short read means the socket buffer is drained.
        loop {
            // SAFETY: `buf` is a live, writable buffer of `buf.len()` bytes.
            let r = unsafe { libc::read(fd, buf.as_mut_ptr() as *mut libc::c_void, buf.len()) };
            if r > 0 {
                c.owed += count_requests(&mut c.matched, &buf[..r as usize]);
                if (r as usize) < buf.len() {
                    break;
                }
            } else if r == 0 {
                return self.close(fd);
            } else {
                let e = io::Error::last_os_error().raw_os_error();
                if e == Some(libc::EAGAIN) {
                    break;
                }
                if e == Some(libc::EINTR) {
                    continue;
                }
                return self.close(fd);
            }
        }
        // Write what is owed.
        let resp = self.resp;
        while c.owed > 0 {
            let rest = &resp[c.off..];
            // SAFETY: `rest` is a live slice of a 'static response.
            let w = unsafe { libc::write(fd, rest.as_ptr() as *const libc::c_void, rest.len()) };
            if w > 0 {
                c.off += w as usize;
                if c.off == resp.len() {
                    c.off = 0;
                    c.owed -= 1;
                    if self.close_after {
                        return self.close(fd);
                    }
                }
            } else {
                let e = io::Error::last_os_error().raw_os_error();
                if e == Some(libc::EINTR) {
                    continue;
                }
                if e == Some(libc::EAGAIN) {
                    break;
                }
                return self.close(fd);
            }
        }
        let want_out = c.owed > 0;
        if !c.registered || want_out != c.want_out {
            let ev = libc::EPOLLIN as u32 | if want_out { libc::EPOLLOUT as u32 } else { 0 };
            let op = if c.registered { libc::EPOLL_CTL_MOD } else { libc::EPOLL_CTL_ADD };
            if self.ctl(op, fd, ev) < 0 {
                return self.close(fd);
            }
            c.registered = true;
            c.want_out = want_out;
        }
        self.conns[fd as usize] = Some(c);
    }

    fn run(mut self, lfd: c_int) -> ! {
        let mut buf = vec![0u8; READ_BUF];
        let mut events = vec![libc::epoll_event { events: 0, u64: 0 }; MAX_EVENTS];
        let mut ev = libc::epoll_event { events: libc::EPOLLIN as u32, u64: LISTENER };
        // SAFETY: `ev` is a live local; epoll_ctl copies it.
        check(unsafe { libc::epoll_ctl(self.ep, libc::EPOLL_CTL_ADD, lfd, &mut ev) }, "epoll_ctl listener");
        loop {
            // SAFETY: `events` holds MAX_EVENTS entries, the count we pass.
            let n = unsafe { libc::epoll_wait(self.ep, events.as_mut_ptr(), MAX_EVENTS as c_int, -1) };
            if n < 0 {
                if io::Error::last_os_error().raw_os_error() == Some(libc::EINTR) {
                    continue;
                }
                check(n, "epoll_wait");
            }
            for ev in &events[..n as usize] {
                let token = ev.u64;
                if token == LISTENER {
                    self.accept_all(lfd, &mut buf);
                } else {
                    self.handle(token as c_int, &mut buf);
                }
            }
        }
    }
}

/// One side of a relayed pair: the other side's fd and the bytes still owed to this side.
struct Side {
    peer: c_int,
    /// Bytes read from the peer that this side's socket did not take yet.
    pending: Vec<u8>,
}

struct Relay {
    ep: c_int,
    origin: libc::sockaddr_in,
    sides: Vec<Option<Side>>,
}

fn set_nodelay(fd: c_int) {
    let one: c_int = 1;
    // SAFETY: `one` is a live c_int and the length given is its size.
    unsafe {
        libc::setsockopt(
            fd,
            libc::IPPROTO_TCP,
            libc::TCP_NODELAY,
            &one as *const c_int as *const libc::c_void,
            std::mem::size_of::<c_int>() as libc::socklen_t,
        );
    }
}

impl Relay {
    fn ctl(&self, op: c_int, fd: c_int, events: u32) -> c_int {
        let mut ev = libc::epoll_event { events, u64: fd as u64 };
        // SAFETY: `ev` is a live local; epoll_ctl copies it.
        unsafe { libc::epoll_ctl(self.ep, op, fd, &mut ev) }
    }

    fn close_pair(&mut self, fd: c_int) {
        let peer = self.sides.get(fd as usize).and_then(|s| s.as_ref()).map(|s| s.peer);
        for f in [Some(fd), peer].into_iter().flatten() {
            if let Some(slot) = self.sides.get_mut(f as usize) {
                if slot.take().is_some() {
                    // SAFETY: `f` is a socket this loop opened or accepted and still owns.
                    unsafe { libc::close(f) };
                }
            }
        }
    }

    fn upstream(&self) -> c_int {
        // SAFETY: plain socket syscalls; the address points to a live sockaddr_in of the size
        // given.
        unsafe {
            let fd = libc::socket(libc::AF_INET, libc::SOCK_STREAM | libc::SOCK_CLOEXEC, 0);
            if fd < 0 {
                return -1;
            }
            let r = libc::connect(
                fd,
                &self.origin as *const libc::sockaddr_in as *const libc::sockaddr,
                std::mem::size_of::<libc::sockaddr_in>() as libc::socklen_t,
            );
            if r < 0 || libc::fcntl(fd, libc::F_SETFL, libc::O_NONBLOCK) < 0 {
                libc::close(fd);
                return -1;
            }
            fd
        }
    }

    fn accept_all(&mut self, lfd: c_int) {
        loop {
            // SAFETY: null address pointers are allowed by accept4.
            let fd = unsafe {
                libc::accept4(lfd, std::ptr::null_mut(), std::ptr::null_mut(), libc::SOCK_NONBLOCK | libc::SOCK_CLOEXEC)
            };
            if fd < 0 {
                return;
            }
            let up = self.upstream();
            if up < 0 {
                // The origin refuses: drop the client rather than serve it nothing.
                // SAFETY: `fd` was just accepted and is owned here.
                unsafe { libc::close(fd) };
                continue;
            }
            set_nodelay(fd);
            set_nodelay(up);
            let hi = fd.max(up) as usize;
            if hi >= self.sides.len() {
                self.sides.resize_with(hi + 1024, || None);
            }
            self.sides[fd as usize] = Some(Side { peer: up, pending: Vec::new() });
            self.sides[up as usize] = Some(Side { peer: fd, pending: Vec::new() });
            let ev = libc::EPOLLIN as u32;
            if self.ctl(libc::EPOLL_CTL_ADD, fd, ev) < 0 || self.ctl(libc::EPOLL_CTL_ADD, up, ev) < 0 {
                self.close_pair(fd);
            }
        }
    }

    /// Writes `data` to `to`; what it does not take is kept as `to`'s pending bytes, and then
    /// `to` is watched for writability while `from` is not read. Returns false on error.
    fn forward(&mut self, from: c_int, to: c_int, data: &[u8]) -> bool {
        let mut off = 0;
        while off < data.len() {
            let rest = &data[off..];
            // SAFETY: `rest` is a live slice.
            let w = unsafe { libc::write(to, rest.as_ptr() as *const libc::c_void, rest.len()) };
            if w > 0 {
                off += w as usize;
                continue;
            }
            let e = io::Error::last_os_error().raw_os_error();
            if e == Some(libc::EINTR) {
                continue;
            }
            if e != Some(libc::EAGAIN) {
                return false;
            }
            if let Some(Some(s)) = self.sides.get_mut(to as usize) {
                s.pending.extend_from_slice(rest);
            }
            return self.rearm(to) && self.rearm(from);
        }
        true
    }

    fn owes(&self, fd: c_int) -> bool {
        self.sides.get(fd as usize).and_then(|s| s.as_ref()).is_some_and(|s| !s.pending.is_empty())
    }

    /// Registers what `fd` waits for: reading unless its peer still owes bytes (back-pressure),
    /// writing while it owes bytes itself.
    fn rearm(&self, fd: c_int) -> bool {
        let Some(Some(s)) = self.sides.get(fd as usize) else { return false };
        let mut ev = 0;
        if !self.owes(s.peer) {
            ev |= libc::EPOLLIN as u32;
        }
        if !s.pending.is_empty() {
            ev |= libc::EPOLLOUT as u32;
        }
        self.ctl(libc::EPOLL_CTL_MOD, fd, ev) == 0
    }

    fn handle(&mut self, fd: c_int, events: u32, buf: &mut [u8]) {
        let Some(Some(side)) = self.sides.get(fd as usize) else { return };
        let peer = side.peer;
        if events & libc::EPOLLOUT as u32 != 0 {
            let pending = self.sides[fd as usize].as_mut().map(|s| std::mem::take(&mut s.pending)).unwrap_or_default();
            if !pending.is_empty() {
                // The peer is paused while this side has pending bytes; forward() pauses it
                // again if they do not all go.
                if !self.forward(peer, fd, &pending) {
                    return self.close_pair(fd);
                }
                if !self.owes(fd) && !(self.rearm(fd) && self.rearm(peer)) {
                    return self.close_pair(fd);
                }
            }
        }
        if events & (libc::EPOLLIN | libc::EPOLLHUP | libc::EPOLLERR) as u32 == 0 {
            return;
        }
        // Paused (the peer still owes bytes): leave the data in the kernel.
        if self.owes(peer) {
            return;
        }
        loop {
            // SAFETY: `buf` is a live, writable buffer of `buf.len()` bytes.
            let r = unsafe { libc::read(fd, buf.as_mut_ptr() as *mut libc::c_void, buf.len()) };
            if r > 0 {
                let n = r as usize;
                if !self.forward(fd, peer, &buf[..n]) {
                    return self.close_pair(fd);
                }
                if self.owes(peer) || n < buf.len() {
                    return;
                }
            } else if r == 0 {
                return self.close_pair(fd);
            } else {
                let e = io::Error::last_os_error().raw_os_error();
                if e == Some(libc::EINTR) {
                    continue;
                }
                if e == Some(libc::EAGAIN) {
                    return;
                }
                return self.close_pair(fd);
            }
        }
    }

    fn run(mut self, lfd: c_int) -> ! {
        let mut buf = vec![0u8; READ_BUF];
        let mut events = vec![libc::epoll_event { events: 0, u64: 0 }; MAX_EVENTS];
        let mut ev = libc::epoll_event { events: libc::EPOLLIN as u32, u64: LISTENER };
        // SAFETY: `ev` is a live local; epoll_ctl copies it.
        check(unsafe { libc::epoll_ctl(self.ep, libc::EPOLL_CTL_ADD, lfd, &mut ev) }, "epoll_ctl listener");
        loop {
            // SAFETY: `events` holds MAX_EVENTS entries, the count we pass.
            let n = unsafe { libc::epoll_wait(self.ep, events.as_mut_ptr(), MAX_EVENTS as c_int, -1) };
            if n < 0 {
                if io::Error::last_os_error().raw_os_error() == Some(libc::EINTR) {
                    continue;
                }
                check(n, "epoll_wait");
            }
            for k in 0..n as usize {
                let (token, bits) = (events[k].u64, events[k].events);
                if token == LISTENER {
                    self.accept_all(lfd);
                } else {
                    self.handle(token as c_int, bits, &mut buf);
                }
            }
        }
    }
}

fn main() {
    let args = parse_args();
    if let Some(oport) = args.relay {
        // SAFETY: an all-zero sockaddr_in is a valid value, filled in below.
        let mut origin: libc::sockaddr_in = unsafe { std::mem::zeroed() };
        origin.sin_family = libc::AF_INET as libc::sa_family_t;
        origin.sin_port = oport.to_be();
        origin.sin_addr.s_addr = u32::from_be_bytes([127, 0, 0, 1]).to_be();
        let fds: Vec<c_int> = (0..args.threads).map(|_| listener(args.port, args.threads > 1)).collect();
        let make = || {
            // SAFETY: epoll_create1 takes no pointers.
            let ep = check(unsafe { libc::epoll_create1(libc::EPOLL_CLOEXEC) }, "epoll_create1");
            Relay { ep, origin, sides: Vec::new() }
        };
        for &lfd in &fds[1..] {
            let r = make();
            std::thread::spawn(move || r.run(lfd));
        }
        make().run(fds[0]);
    }
    let resp: &'static [u8] = Box::leak(response(args.body, args.close).into_boxed_slice());
    // Bind every listener before serving, so a bind error exits the process at once.
    let fds: Vec<c_int> = (0..args.threads).map(|_| listener(args.port, args.threads > 1)).collect();
    let make = |resp| {
        // SAFETY: epoll_create1 takes no pointers.
        let ep = check(unsafe { libc::epoll_create1(libc::EPOLL_CLOEXEC) }, "epoll_create1");
        Loop { ep, conns: vec![None; 1024], resp, close_after: args.close }
    };
    for &lfd in &fds[1..] {
        let l = make(resp);
        std::thread::spawn(move || l.run(lfd));
    }
    make(resp).run(fds[0]);
}

#[cfg(test)]
mod tests {
    use super::count_requests;

    #[test]
    fn counts_terminators_across_reads() {
        let mut m = 0;
        assert_eq!(count_requests(&mut m, b"GET / HTTP/1.1\r\nHost: a\r\n\r\nGET / HTTP/1.1\r\n"), 1);
        assert_eq!(count_requests(&mut m, b"\r"), 0);
        assert_eq!(count_requests(&mut m, b"\nGET"), 1);
        assert_eq!(count_requests(&mut m, b" / HTTP/1.1\r\n\r\r\n\r\n"), 1);
        assert_eq!(m, 0);
    }
}
