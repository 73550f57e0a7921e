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
//! Usage: `sol --port PORT [--body BYTES] [--close] [--threads N]`
//!   --body N     body length (default 5, the body "hello"; other sizes are filled with a
//!                letter pattern)
//!   --close      answer with `Connection: close` and close after each response
//!   --threads N  N independent event loops (default 1)
//!
//! Requests with bodies are not supported (nothing is parsed); this is a load-test target,
//! not a server.

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
}

fn usage(msg: &str) -> ! {
    eprintln!("sol: {msg}");
    eprintln!("usage: sol --port PORT [--body BYTES] [--close] [--threads N]");
    exit(2);
}

fn parse_args() -> Args {
    let mut args = Args { port: 0, body: 5, close: false, threads: 1 };
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

fn main() {
    let args = parse_args();
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
