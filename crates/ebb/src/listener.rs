//! Listening sockets.
//!
//! Every `bind` line becomes one socket **per thread**, all bound to the same
//! address with `SO_REUSEPORT`, so the kernel spreads new connections over
//! the threads and each thread accepts from its own socket with no lock
//! (DESIGN.md, "Threads and ownership"). A bind on port 0 takes an ephemeral
//! port for the first socket and binds the others to the same port, so a
//! test can start ebb on `127.0.0.1:0` and read the real address from its
//! start-up line.
//!
//! Sockets ebb does not bind by address (`fd@N` inherited, `unix@PATH`,
//! `abns@NAME`) exist once. With several threads, each thread gets a
//! duplicate descriptor of that one socket (`dup`, same open file) and
//! registers it in its own epoll: a new connection wakes every thread, the
//! first to call `accept` takes it, the others get `EAGAIN`. This is
//! HAProxy's choice for a listener shared by threads (one socket, polled by
//! all); the cost is a wakeup per idle thread per connection, which is
//! small next to the connection itself, and no thread is left out.
//!
//! systemd socket activation is `fd@N` too: a unit's sockets arrive as
//! descriptors 3, 4, ... with `LISTEN_PID` (this process) and `LISTEN_FDS`
//! (how many); `bind fd@3` takes the first. When those variables are set
//! for this process, a number outside the passed range is refused.

use std::io;
use std::net::{SocketAddr, TcpListener};
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

use socket2::{Domain, Protocol, SockAddr, Socket, Type};

use crate::config::SockSpec;

/// Backlog of every listening socket. Connections beyond `maxconn` wait
/// here, in the kernel, rather than being accepted and starved; 1024 is
/// HAProxy's default `backlog` when `maxconn` does not set one larger, and
/// the kernel caps it at `net.core.somaxconn` anyway.
pub const DEFAULT_BACKLOG: i32 = 1024;

/// A bind line's listen queue: its `backlog`, else its frontend's, else
/// its `maxconn`, else [`DEFAULT_BACKLOG`] (HAProxy's `listener_backlog`,
/// which takes the frontend's `maxconn` before its 1024: ebb keeps its
/// default there).
pub fn backlog_of(b: &crate::config::Bind, fe_backlog: Option<u32>) -> i32 {
    b.backlog
        .or(fe_backlog)
        .or((b.maxconn > 0).then_some(b.maxconn))
        .map_or(DEFAULT_BACKLOG, |n| i32::try_from(n).unwrap_or(i32::MAX))
}

/// How a TCP listening socket is created: what a bind line sets before
/// `bind()`, on sockets ebb creates only (an inherited socket keeps how
/// it was made, as in HAProxy).
#[derive(Clone, Copy, Debug, Default)]
pub struct Creation<'a> {
    /// `v6only` (true) / `v4v6` (false); `None`: the system's default.
    pub v6only: Option<bool>,
    /// `transparent`.
    pub transparent: bool,
    /// `interface NAME`.
    pub interface: Option<&'a str>,
    /// `namespace NAME`: the socket is made in that network namespace.
    pub namespace: Option<&'a str>,
}

impl<'a> Creation<'a> {
    pub fn of(b: &'a crate::config::Bind) -> Creation<'a> {
        Creation {
            v6only: b.v6only,
            transparent: b.tcp.transparent,
            interface: b.tcp.interface.as_deref(),
            namespace: b.tcp.namespace.as_deref(),
        }
    }
}

/// A warning about a listening socket, as HAProxy words it (`cannot ...
/// for [ADDR:PORT]`): the option did not take and the socket serves
/// without it.
fn warn(warnings: &mut Vec<String>, what: String, addr: SocketAddr) {
    let ip = addr.ip();
    warnings.push(format!("{what} for [{ip}:{}]", addr.port()));
}

fn one_socket(
    addr: SocketAddr,
    backlog: i32,
    c: &Creation<'_>,
    warnings: &mut Vec<String>,
) -> io::Result<TcpListener> {
    let domain = Domain::for_address(addr);
    let s = match c.namespace {
        // HAProxy's `my_socketat`: only the socket is made in the
        // namespace (a socket stays in the one it was made in).
        Some(ns) => {
            let path = Path::new(crate::config::NETNS_DIR).join(ns);
            Socket::from(crate::sys::socket_in_netns(
                &path,
                libc::c_int::from(domain),
                libc::SOCK_STREAM,
                libc::IPPROTO_TCP,
            )?)
        }
        None => Socket::new(domain, Type::STREAM, Some(Protocol::TCP))?,
    };
    s.set_reuse_address(true)?;
    s.set_reuse_port(true)?;
    if c.transparent {
        // HAProxy's `sock_inet*_make_foreign`: IP_TRANSPARENT (needs
        // CAP_NET_ADMIN), else IP_FREEBIND (needs nothing).
        let tp = if addr.is_ipv6() {
            s.set_ip_transparent_v6(true)
        } else {
            s.set_ip_transparent_v4(true)
        };
        if tp.is_err() {
            s.set_freebind_v4(true).map_err(|e| {
                io::Error::new(
                    e.kind(),
                    format!(
                        "cannot make receiving socket transparent ({})",
                        crate::net::os_text(&e)
                    ),
                )
            })?;
        }
    }
    if let Some(dev) = c.interface {
        // Not bound to it (not root, no such device): HAProxy warns and
        // serves on every interface.
        if let Err(e) = s.bind_device(Some(dev.as_bytes())) {
            warn(
                warnings,
                format!(
                    "cannot bind receiver to device '{dev}' ({})",
                    crate::net::os_text(&e)
                ),
                addr,
            );
        }
    }
    if let (true, Some(v)) = (addr.is_ipv6(), c.v6only) {
        // `bind ... v6only`: `[::]:80` serves IPv6 only; `v4v6`: IPv4
        // too; neither: the system's default (`net.ipv6.bindv6only`, 0
        // on Linux: both), as HAProxy 2.6.
        s.set_only_v6(v)?;
    }
    s.set_nonblocking(true)?;
    s.bind(&addr.into())?;
    s.listen(backlog)?;
    Ok(s.into())
}

/// Binds `n` sockets (one per thread) to `addr`; returns them and the
/// address actually bound (with the real port when `addr` had port 0).
/// What did not take and was let pass is added to `warnings`.
pub fn bind_per_thread(
    addr: SocketAddr,
    n: usize,
    backlog: i32,
    c: &Creation<'_>,
    warnings: &mut Vec<String>,
) -> io::Result<(Vec<TcpListener>, SocketAddr)> {
    let first = one_socket(addr, backlog, c, warnings)?;
    let real = first.local_addr()?;
    let mut out = Vec::with_capacity(n.max(1));
    out.push(first);
    for _ in 1..n {
        // One warning for the line, not one per thread.
        out.push(one_socket(real, backlog, c, &mut Vec::new())?);
    }
    Ok((out, real))
}

/// The options HAProxy's `tcp_bind_listener` sets on a TCP listener,
/// created or inherited, after it is bound: `mss`, `tcp-ut`, `tfo` (its
/// queue: the listener's backlog) and `defer-accept`. Without an option
/// the socket is reset to the system's, for one inherited from a process
/// that had it. A failure is a warning (the socket serves without it),
/// as in HAProxy, except a `defer-accept` that cannot be enabled.
pub fn tcp_options(
    s: &socket2::SockRef<'_>,
    b: &crate::config::Bind,
    backlog: i32,
    warnings: &mut Vec<String>,
) -> io::Result<()> {
    use std::os::fd::AsRawFd;
    let Some(addr) = s.local_addr()?.as_socket() else {
        return Ok(());
    };
    let fd = s.as_raw_fd();
    let o = &b.tcp;
    match o.mss {
        Some(m) if m > 0 => {
            if s.set_tcp_mss(m as u32).is_err() {
                warn(warnings, format!("cannot set MSS to {m}"), addr);
            }
        }
        // A negative MSS is HAProxy 2.6's "unset" too. A socket
        // inherited with an MSS of its own is given the system's back (0
        // clears it; HAProxy writes the value a fresh socket reports,
        // 536, which would then cap the MSS).
        _ => {
            let _ = s.set_tcp_mss(0);
        }
    }
    let ut = (o.user_timeout_ms > 0)
        .then(|| std::time::Duration::from_millis(u64::from(o.user_timeout_ms)));
    if s.set_tcp_user_timeout(ut).is_err() && ut.is_some() {
        warn(warnings, "cannot set TCP User Timeout".into(), addr);
    }
    match crate::sys::set_defer_accept(fd, i32::from(b.defer_accept)) {
        Err(e) if b.defer_accept => {
            return Err(io::Error::new(
                e.kind(),
                format!("cannot enable defer-accept: {e}"),
            ))
        }
        _ => {}
    }
    if o.tfo {
        if crate::sys::set_tcp_fastopen(fd, backlog).is_err() {
            warn(warnings, "cannot enable TCP_FASTOPEN".into(), addr);
        }
    } else if crate::sys::tcp_fastopen(fd).is_ok_and(|q| q != 0)
        && crate::sys::set_tcp_fastopen(fd, 0).is_err()
    {
        // Only turned off where it is on: a queue is not made for
        // nothing.
        warn(warnings, "cannot disable TCP_FASTOPEN".into(), addr);
    }
    Ok(())
}

/// The descriptors systemd passed to this process (`LISTEN_FDS` when
/// `LISTEN_PID` is this process), as a range of numbers.
pub fn systemd_fds() -> Option<std::ops::Range<i32>> {
    let pid: u32 = std::env::var("LISTEN_PID").ok()?.parse().ok()?;
    if pid != crate::sys::pid() {
        return None;
    }
    let n: i32 = std::env::var("LISTEN_FDS").ok()?.parse().ok()?;
    (n >= 0).then(|| 3..3 + n)
}

/// A socket that is not bound by address: one per thread (duplicates of
/// one socket, see the module documentation), and a name for the
/// `listening on` line.
pub fn bind_spec(
    spec: &SockSpec,
    n: usize,
    backlog: i32,
    perms: UnixPerms,
) -> io::Result<(Vec<Socket>, String)> {
    let (first, name) = match spec {
        SockSpec::Fd(fd) => inherited(*fd, backlog)?,
        SockSpec::Unix(path) => (
            unix_path(path, backlog, perms)?,
            format!("unix@{}", path.display()),
        ),
        SockSpec::Abns(name) => (abns(name, backlog)?, format!("abns@{name}")),
    };
    let mut out = Vec::with_capacity(n.max(1));
    for _ in 1..n {
        out.push(first.try_clone()?);
    }
    out.insert(0, first);
    Ok((out, name))
}

fn inherited(fd: i32, backlog: i32) -> io::Result<(Socket, String)> {
    if let Some(r) = systemd_fds() {
        if !r.contains(&fd) {
            return Err(io::Error::new(
                io::ErrorKind::NotFound,
                format!(
                    "systemd passed descriptors {}..{} (LISTEN_FDS), not {fd}",
                    r.start,
                    r.end - 1
                ),
            ));
        }
    }
    let s = Socket::from(crate::sys::take_inherited_fd(fd)?);
    let kind = match s.r#type() {
        Ok(k) => k,
        Err(e) => {
            // Not ours to close (it may be a terminal or a file).
            let _ = std::os::fd::IntoRawFd::into_raw_fd(s);
            return Err(io::Error::new(
                e.kind(),
                format!("descriptor {fd} is not a socket ({e})"),
            ));
        }
    };
    if kind != Type::STREAM {
        let _ = std::os::fd::IntoRawFd::into_raw_fd(s);
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("descriptor {fd} is not a stream socket"),
        ));
    }
    // listen() again is harmless on a listening socket (it only sets the
    // backlog) and needed on one passed bound but not listening.
    s.listen(backlog)?;
    s.set_nonblocking(true)?;
    let local = s.local_addr()?;
    let shown = match (local.as_socket(), local.as_pathname()) {
        (Some(a), _) => format!("fd@{fd} ({a})"),
        (None, Some(p)) => format!("fd@{fd} (unix@{})", p.display()),
        _ => format!("fd@{fd}"),
    };
    Ok((s, shown))
}

/// Binds a UNIX stream socket at `path`: bound under a temporary name,
/// given its mode, then renamed over `path`, so a client never sees a
/// half-set-up socket and a stale file from an earlier run is replaced
/// (HAProxy does the same).
/// Mode and owner given to a UNIX socket file (`mode`, `user`/`uid`,
/// `group`/`gid` on the bind line); `None`: left as created.
#[derive(Clone, Copy, Debug, Default)]
pub struct UnixPerms {
    pub mode: Option<u32>,
    pub uid: Option<u32>,
    pub gid: Option<u32>,
}

fn unix_path(path: &Path, backlog: i32, perms: UnixPerms) -> io::Result<Socket> {
    let mut tmp = path.as_os_str().to_owned();
    tmp.push(format!(".{}.tmp", crate::sys::pid()));
    let tmp = PathBuf::from(tmp);
    let _ = std::fs::remove_file(&tmp);
    let s = Socket::new(Domain::UNIX, Type::STREAM, None)?;
    s.bind(&SockAddr::unix(&tmp)?)?;
    let done = (|| {
        if perms.uid.is_some() || perms.gid.is_some() {
            std::os::unix::fs::chown(&tmp, perms.uid, perms.gid)?;
        }
        if let Some(m) = perms.mode {
            std::fs::set_permissions(&tmp, std::fs::Permissions::from_mode(m))?;
        }
        s.listen(backlog)?;
        s.set_nonblocking(true)?;
        std::fs::rename(&tmp, path)
    })();
    if let Err(e) = done {
        let _ = std::fs::remove_file(&tmp);
        return Err(e);
    }
    Ok(s)
}

/// Length of an abstract socket name as HAProxy binds it: the whole of
/// `sun_path` after the leading NUL, zero-padded, so HAProxy and ebb
/// reach each other's `abns@` sockets.
pub(crate) const ABNS_LEN: usize = 107;

fn abns(name: &str, backlog: i32) -> io::Result<Socket> {
    use std::os::linux::net::SocketAddrExt;
    let mut padded = name.as_bytes().to_vec();
    padded.resize(ABNS_LEN, 0);
    let addr = std::os::unix::net::SocketAddr::from_abstract_name(&padded)?;
    let l = std::os::unix::net::UnixListener::bind_addr(&addr)?;
    let s = Socket::from(l);
    s.listen(backlog)?;
    s.set_nonblocking(true)?;
    Ok(s)
}

/// The peer of an accepted connection as an IP address; `0.0.0.0:0` for a
/// UNIX socket client, which has none.
pub fn peer_of(a: &SockAddr) -> SocketAddr {
    a.as_socket()
        .unwrap_or_else(|| SocketAddr::from(([0, 0, 0, 0], 0)))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::{Read, Write};
    use std::net::TcpStream;
    use std::os::unix::fs::MetadataExt;

    #[test]
    fn port_zero_gives_one_port_for_all_threads() {
        let (ls, real) = bind_per_thread(
            "127.0.0.1:0".parse().unwrap(),
            3,
            16,
            &Creation::default(),
            &mut Vec::new(),
        )
        .unwrap();
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
        match bind_per_thread(
            "[::1]:0".parse().unwrap(),
            2,
            16,
            &Creation::default(),
            &mut Vec::new(),
        ) {
            Ok((ls, real)) => {
                assert!(real.is_ipv6());
                assert_eq!(ls.len(), 2);
            }
            // A machine without IPv6 on loopback: nothing to check.
            Err(e) => assert_eq!(e.kind(), io::ErrorKind::AddrNotAvailable, "{e}"),
        }
    }

    #[test]
    fn unix_path_replaces_a_stale_file_and_sets_the_mode() {
        let dir = std::env::temp_dir().join(format!("ebb-listener-{}", std::process::id()));
        let _ = std::fs::create_dir_all(&dir);
        let p = dir.join("s.sock");
        std::fs::write(&p, b"stale").unwrap();
        let own = std::fs::metadata(&dir).unwrap();
        let (ls, name) = bind_spec(
            &SockSpec::Unix(p.clone()),
            2,
            16,
            UnixPerms {
                mode: Some(0o600),
                // The test's own ids: allowed to any user.
                uid: Some(own.uid()),
                gid: Some(own.gid()),
            },
        )
        .unwrap();
        assert_eq!(ls.len(), 2);
        assert_eq!(name, format!("unix@{}", p.display()));
        let md = std::fs::metadata(&p).unwrap();
        assert_eq!(md.permissions().mode() & 0o777, 0o600);
        assert_eq!((md.uid(), md.gid()), (own.uid(), own.gid()));
        let mut c = std::os::unix::net::UnixStream::connect(&p).unwrap();
        c.write_all(b"y").unwrap();
        // The duplicate accepts from the same socket.
        let mut got = None;
        for _ in 0..200 {
            if let Ok((s, a)) = ls[1].accept() {
                assert_eq!(peer_of(&a), SocketAddr::from(([0, 0, 0, 0], 0)));
                got = Some(s);
                break;
            }
            std::thread::sleep(std::time::Duration::from_millis(5));
        }
        let s = got.expect("no accept");
        let mut s = std::os::unix::net::UnixStream::from(s);
        s.set_nonblocking(false).unwrap();
        let mut b = [0u8; 1];
        s.read_exact(&mut b).unwrap();
        assert_eq!(&b, b"y");
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn abns_is_reachable_by_its_padded_name() {
        use std::os::linux::net::SocketAddrExt;
        let name = format!("ebb-test-{}", std::process::id());
        let (ls, shown) =
            bind_spec(&SockSpec::Abns(name.clone()), 1, 16, UnixPerms::default()).unwrap();
        assert_eq!(shown, format!("abns@{name}"));
        let mut padded = name.into_bytes();
        padded.resize(ABNS_LEN, 0);
        let a = std::os::unix::net::SocketAddr::from_abstract_name(&padded).unwrap();
        let _c = std::os::unix::net::UnixStream::connect_addr(&a).unwrap();
        drop(ls);
    }

    #[test]
    fn a_closed_descriptor_is_refused() {
        // 100000 is far above any descriptor this test process has open.
        let e = bind_spec(&SockSpec::Fd(100_000), 1, 16, UnixPerms::default()).unwrap_err();
        assert_eq!(e.raw_os_error(), Some(libc::EBADF), "{e}");
    }

    #[test]
    fn a_descriptor_that_is_no_socket_is_refused_and_left_open() {
        use std::os::fd::AsRawFd;
        let p = std::env::temp_dir().join(format!("ebb-notsock-{}", std::process::id()));
        let mut f = std::fs::File::create(&p).unwrap();
        let e = bind_spec(&SockSpec::Fd(f.as_raw_fd()), 1, 16, UnixPerms::default()).unwrap_err();
        assert!(e.to_string().contains("is not a socket"), "{e}");
        // Still open: the refusal did not close what it does not own.
        f.write_all(b"still open").unwrap();
        drop(f);
        assert_eq!(std::fs::read(&p).unwrap(), b"still open");
        let _ = std::fs::remove_file(&p);
    }
}
