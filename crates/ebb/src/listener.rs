//! Listening sockets.
//!
//! Every `bind` line becomes one socket **per thread**, all bound to the same
//! address with `SO_REUSEPORT`, so the kernel spreads new connections over
//! the threads and each thread accepts from its own socket with no lock
//! (DESIGN.md, "Threads and ownership"). A bind on port 0 takes an ephemeral
//! port for the first socket and binds the others to the same port, so a
//! test can start ebb on `127.0.0.1:0` and read the real address from its
//! start-up line.

use std::io;
use std::net::{SocketAddr, TcpListener};

use socket2::{Domain, Protocol, Socket, Type};

/// Backlog of every listening socket. Connections beyond `maxconn` wait
/// here, in the kernel, rather than being accepted and starved; 1024 is
/// HAProxy's default `backlog` when `maxconn` does not set one larger, and
/// the kernel caps it at `net.core.somaxconn` anyway.
pub const DEFAULT_BACKLOG: i32 = 1024;

fn one_socket(addr: SocketAddr, backlog: i32) -> io::Result<TcpListener> {
    let domain = Domain::for_address(addr);
    let s = Socket::new(domain, Type::STREAM, Some(Protocol::TCP))?;
    s.set_reuse_address(true)?;
    s.set_reuse_port(true)?;
    if addr.is_ipv6() {
        // `[::]:80` serves IPv6 only; IPv4 needs its own bind, as in HAProxy.
        s.set_only_v6(true)?;
    }
    s.set_nonblocking(true)?;
    s.bind(&addr.into())?;
    s.listen(backlog)?;
    Ok(s.into())
}

/// Binds `n` sockets (one per thread) to `addr`; returns them and the
/// address actually bound (with the real port when `addr` had port 0).
pub fn bind_per_thread(
    addr: SocketAddr,
    n: usize,
    backlog: i32,
) -> io::Result<(Vec<TcpListener>, SocketAddr)> {
    let first = one_socket(addr, backlog)?;
    let real = first.local_addr()?;
    let mut out = Vec::with_capacity(n.max(1));
    out.push(first);
    for _ in 1..n {
        out.push(one_socket(real, backlog)?);
    }
    Ok((out, real))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::{Read, Write};
    use std::net::TcpStream;

    #[test]
    fn port_zero_gives_one_port_for_all_threads() {
        let (ls, real) = bind_per_thread("127.0.0.1:0".parse().unwrap(), 3, 16).unwrap();
        assert_eq!(ls.len(), 3);
        assert_ne!(real.port(), 0);
        for l in &ls {
            assert_eq!(l.local_addr().unwrap(), real);
        }
        // A client connects; one of the sockets has it.
        let mut c = TcpStream::connect(real).unwrap();
        c.write_all(b"x").unwrap();
        let mut got = None;
        for _ in 0..200 {
            for l in &ls {
                if let Ok((s, _)) = l.accept() {
                    got = Some(s);
                }
            }
            if got.is_some() {
                break;
            }
            std::thread::sleep(std::time::Duration::from_millis(5));
        }
        let mut s = got.expect("no listener accepted the connection");
        s.set_nonblocking(false).unwrap();
        let mut b = [0u8; 1];
        s.read_exact(&mut b).unwrap();
        assert_eq!(&b, b"x");
    }

    #[test]
    fn ipv6_loopback_binds_when_available() {
        match bind_per_thread("[::1]:0".parse().unwrap(), 2, 16) {
            Ok((ls, real)) => {
                assert!(real.is_ipv6());
                assert_eq!(ls.len(), 2);
            }
            // A machine without IPv6 on loopback: nothing to check.
            Err(e) => assert_eq!(e.kind(), io::ErrorKind::AddrNotAvailable, "{e}"),
        }
    }
}
