//! Listening sockets handed from one process to the next, so a reload or
//! an upgrade never closes a socket a client may be connecting to.
//!
//! Three ways in, one way to bind:
//! - the master of master-worker mode keeps every listening socket and
//!   gives them to each worker it forks, and to itself across a re-exec
//!   (`EBB_INHERIT_FDS`: `KEY=FD` pairs, the descriptors left open over
//!   `exec`);
//! - `-x SOCKET` fetches the sockets of a running ebb (or HAProxy) from its
//!   stats socket (`expose-fd listeners`) with HAProxy's `_getsocks`
//!   exchange: a 4-byte count, then batches of descriptors (SCM_RIGHTS),
//!   each with per-descriptor bytes (namespace length and name, interface
//!   length and name, 4 bytes of options) and a 4-byte acknowledgment from
//!   the receiver after each batch;
//! - [`Binder`] binds a configuration's listeners: a socket of the pool
//!   with the same key is taken (kept binds are never closed), the others
//!   are bound afresh; [`finish`] closes what no line took (removed binds).
//!
//! Keys: `tcp:ADDR#N`, `unix:PATH#N`, `abns:NAME#N`, `fd:N#N`, `cli:PATH#N`,
//! where ADDR is the address as configured (port 0 stays 0, so an ephemeral
//! port is kept across reloads) and N counts earlier lines with the same
//! address. Sockets fetched with `-x` are keyed by their bound address.
//! A TCP key also names what the socket was made with that a later line
//! cannot change on it (`;ns=NAME`, `;if=NAME`, `;foreign`: `namespace`,
//! `interface`, `transparent`), so a socket is only kept by a line that
//! would make it the same, as HAProxy's `sock_find_compatible_fd` matches
//! them; `_getsocks` sends the namespace and interface names with each
//! socket, and `-x` reads them back.

use std::collections::HashMap;
use std::io;
use std::net::{SocketAddr, TcpListener};
use std::os::fd::{AsRawFd, OwnedFd};
use std::sync::Mutex;

use socket2::Socket;

use crate::config::SockSpec;
use crate::listener::{bind_per_thread, bind_spec, Creation, UnixPerms};

/// The environment variable carrying inherited sockets over `exec`.
pub const ENV: &str = "EBB_INHERIT_FDS";

/// Most descriptors in one `_getsocks` message (HAProxy's MAX_SEND_FD).
const MAX_SEND_FD: usize = 253;

/// Whether `_getsocks` handed this process's sockets to another one.
static HANDED_OVER: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

/// Whether another process took this one's sockets (`-x`): their files
/// are then its own and stay at exit.
pub fn handed_over() -> bool {
    HANDED_OVER.load(std::sync::atomic::Ordering::Relaxed)
}

/// Sockets received and not yet taken by a line.
static POOL: Mutex<Vec<(String, Socket)>> = Mutex::new(Vec::new());
/// Every socket this process listens on, by key (duplicates): what a
/// re-exec passes on and what `_getsocks` sends (with its namespace and
/// interface names).
static BOUND: Mutex<Vec<(String, Socket, Names)>> = Mutex::new(Vec::new());

/// A listening socket's namespace and interface names (`namespace`,
/// `interface`), as `_getsocks` sends them.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Names {
    pub ns: Option<String>,
    pub iface: Option<String>,
}

impl Names {
    /// The key's part for these names and the `transparent` (foreign)
    /// flag: empty for a plain socket.
    fn suffix(&self, foreign: bool) -> String {
        let mut k = String::new();
        if let Some(n) = &self.ns {
            k.push_str(&format!(";ns={n}"));
        }
        if let Some(i) = &self.iface {
            k.push_str(&format!(";if={i}"));
        }
        if foreign {
            k.push_str(";foreign");
        }
        k
    }
}

fn lock<T>(m: &'static Mutex<T>) -> std::sync::MutexGuard<'static, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// Adds a received socket to the pool.
pub fn adopt(key: String, sock: Socket) {
    lock(&POOL).push((key, sock));
}

/// Moves every socket this process holds into its pool (a forked worker
/// takes the master's sockets this way).
pub fn bound_to_pool() {
    let b = std::mem::take(&mut *lock(&BOUND));
    lock(&POOL).extend(b.into_iter().map(|(k, s, _)| (k, s)));
}

/// Takes the sockets named in [`ENV`] (a re-executed master), once.
pub fn adopt_env() -> io::Result<()> {
    let Some(v) = std::env::var_os(ENV) else {
        return Ok(());
    };
    std::env::remove_var(ENV);
    let v = v.to_string_lossy().into_owned();
    for item in v.split(';').filter(|s| !s.is_empty()) {
        let Some((k, fd)) = item.rsplit_once('=') else {
            continue;
        };
        let Ok(fd) = fd.parse::<i32>() else { continue };
        let owned = crate::sys::take_inherited_fd(fd)?;
        adopt(unescape(k), Socket::from(owned));
    }
    Ok(())
}

/// What [`ENV`] must hold for a re-executed process to find every socket
/// this one holds; clears close-on-exec on them.
pub fn export_env() -> io::Result<String> {
    let b = lock(&BOUND);
    let mut out = String::new();
    for (k, s, _) in b.iter() {
        crate::sys::set_cloexec(s.as_raw_fd(), false)?;
        out.push_str(&format!("{}={};", escape(k), s.as_raw_fd()));
    }
    Ok(out)
}

fn escape(k: &str) -> String {
    k.replace('%', "%25")
        .replace(';', "%3B")
        .replace('=', "%3D")
}

fn unescape(k: &str) -> String {
    k.replace("%3D", "=")
        .replace("%3B", ";")
        .replace("%25", "%")
}

/// Closes this process's duplicates of its listening sockets (a process
/// that stops: its sockets must not outlive its listeners, or the kernel
/// would queue connections on them that nobody accepts).
pub fn release() {
    lock(&BOUND).clear();
}

/// Keeps every received socket (a reload that failed: the running
/// workers still use them, and the next reload passes them on).
pub fn keep_pool() {
    let p = std::mem::take(&mut *lock(&POOL));
    lock(&BOUND).extend(p.into_iter().map(|(k, s)| (k, s, Names::default())));
}

/// Closes what no line took (binds removed by a reload).
pub fn finish() -> usize {
    let p = std::mem::take(&mut *lock(&POOL));
    p.len()
}

fn take(key: &str) -> Vec<Socket> {
    let mut p = lock(&POOL);
    let mut out = Vec::new();
    let mut i = 0;
    while i < p.len() {
        if p[i].0 == key {
            out.push(p.remove(i).1);
        } else {
            i += 1;
        }
    }
    out
}

fn remember(key: &str, s: &Socket, names: &Names) -> io::Result<()> {
    let d = s.try_clone()?;
    lock(&BOUND).push((key.to_string(), d, names.clone()));
    Ok(())
}

/// Takes an inherited `stats socket` (by its path as written), if any.
pub fn take_cli(path: &str) -> Option<Socket> {
    let mut got = take(&format!("cli:{path}#0"));
    if got.is_empty() {
        // Fetched with -x: keyed by the socket's own path.
        got = take(&format!(
            "unix:{}#0",
            path.strip_prefix("unix@").unwrap_or(path)
        ));
    }
    got.into_iter().next()
}

/// Records a `stats socket` this process bound (a master passes it on).
pub fn remember_cli(path: &str, s: &Socket) -> io::Result<()> {
    remember(&format!("cli:{path}#0"), s, &Names::default())
}

/// Binds a configuration's listeners, taking inherited sockets first.
#[derive(Default)]
pub struct Binder {
    seen: HashMap<String, usize>,
}

impl Binder {
    fn key(&mut self, base: String) -> String {
        let n = self.seen.entry(base.clone()).or_insert(0);
        let k = format!("{base}#{n}");
        *n += 1;
        k
    }

    /// `n` sockets for a TCP address (one per thread), or more when more
    /// were inherited (none is closed: the caller spreads them over its
    /// threads); the address actually bound. `c`: how the line makes a
    /// socket (`v6only`, `transparent`, `interface`, `namespace`), for
    /// sockets bound here; what did not take is added to `warnings`.
    pub fn tcp(
        &mut self,
        addr: SocketAddr,
        n: usize,
        backlog: i32,
        c: &Creation<'_>,
        warnings: &mut Vec<String>,
    ) -> io::Result<(Vec<TcpListener>, SocketAddr)> {
        let names = Names {
            ns: c.namespace.map(String::from),
            iface: c.interface.map(String::from),
        };
        let base = format!("tcp:{addr}{}", names.suffix(c.transparent));
        let key = self.key(base.clone());
        let mut got = take(&key);
        if got.is_empty() && addr.port() != 0 {
            // Fetched with -x: keyed by the address they are bound to.
            got = take(&format!("{base}#0"));
        }
        let (socks, real) = if got.is_empty() {
            bind_per_thread(addr, n, backlog, c, warnings)?
        } else {
            let real = got[0]
                .local_addr()?
                .as_socket()
                .ok_or_else(|| io::Error::other("an inherited socket is not TCP"))?;
            let mut v = Vec::new();
            for s in got {
                s.listen(backlog)?;
                s.set_nonblocking(true)?;
                v.push(TcpListener::from(s));
            }
            if v.len() < n {
                match bind_per_thread(real, n - v.len(), backlog, c, &mut Vec::new()) {
                    Ok((more, _)) => v.extend(more),
                    // Not bound with SO_REUSEPORT by the old process: the
                    // threads share what came (duplicates).
                    Err(_) => {
                        for i in 0..n - v.len() {
                            let d = v[i % v.len()].try_clone()?;
                            v.push(d);
                        }
                    }
                }
            }
            (v, real)
        };
        for s in &socks {
            remember(&key, &Socket::from(s.try_clone()?), &names)?;
        }
        Ok((socks, real))
    }

    /// A socket not bound by address (`fd@N`, `unix@PATH`, `abns@NAME`):
    /// the inherited one if any (duplicated per thread), else bound.
    pub fn other(
        &mut self,
        spec: &SockSpec,
        n: usize,
        backlog: i32,
        perms: UnixPerms,
    ) -> io::Result<(Vec<Socket>, String)> {
        let (base, shown) = match spec {
            SockSpec::Fd(fd) => (format!("fd:{fd}"), format!("fd@{fd}")),
            SockSpec::Unix(p) => (
                format!("unix:{}", p.display()),
                format!("unix@{}", p.display()),
            ),
            SockSpec::Abns(a) => (format!("abns:{a}"), format!("abns@{a}")),
        };
        let key = self.key(base);
        let mut got = take(&key);
        if got.is_empty() {
            got = take(&format!("{}#0", key.rsplit_once('#').map_or("", |x| x.0)));
        }
        let (socks, shown) = match got.into_iter().next() {
            Some(first) => {
                first.listen(backlog)?;
                first.set_nonblocking(true)?;
                let mut v = Vec::with_capacity(n.max(1));
                for _ in 1..n {
                    v.push(first.try_clone()?);
                }
                v.insert(0, first);
                (v, shown)
            }
            None => bind_spec(spec, n, backlog, perms)?,
        };
        remember(&key, &socks[0], &Names::default())?;
        Ok((socks, shown))
    }
}

/// The key a fetched socket is found under, from its bound address (and
/// for TCP the names that came with it, and whether it is foreign).
fn key_of(s: &Socket, names: &Names) -> Option<String> {
    let a = s.local_addr().ok()?;
    if let Some(sa) = a.as_socket() {
        // HAProxy's `sock_inet_is_foreign`: IP_TRANSPARENT or IP_FREEBIND.
        let foreign = if sa.is_ipv6() {
            s.ip_transparent_v6().unwrap_or(false)
        } else {
            s.ip_transparent_v4().unwrap_or(false)
        } || s.freebind_v4().unwrap_or(false);
        return Some(format!("tcp:{sa}{}#0", names.suffix(foreign)));
    }
    if let Some(p) = a.as_pathname() {
        // Bound under a temporary name and renamed (ebb and HAProxy):
        // `PATH.PID.tmp` is PATH.
        let s = p.to_string_lossy();
        let s = match s.strip_suffix(".tmp").and_then(|x| x.rsplit_once('.')) {
            Some((base, pid)) if pid.bytes().all(|c| c.is_ascii_digit()) => base.to_string(),
            _ => s.into_owned(),
        };
        return Some(format!("unix:{s}#0"));
    }
    #[cfg(target_os = "linux")]
    {
        use std::os::linux::net::SocketAddrExt;
        let u = a.as_unix()?;
        let name = u.as_abstract_name()?;
        let end = name.iter().position(|&c| c == 0).unwrap_or(name.len());
        return Some(format!("abns:{}#0", String::from_utf8_lossy(&name[..end])));
    }
    #[allow(unreachable_code)]
    None
}

/// `-x SOCKET`: fetches the listening sockets of the process answering on
/// the stats socket at `path` (`_getsocks`); returns how many came.
pub fn fetch(path: &std::path::Path) -> io::Result<usize> {
    use std::io::{Read, Write};
    let mut s = std::os::unix::net::UnixStream::connect(path)?;
    s.set_read_timeout(Some(std::time::Duration::from_secs(5)))?;
    s.write_all(b"_getsocks\n")?;
    let mut n = [0u8; 4];
    s.read_exact(&mut n)?;
    let total = i32::from_ne_bytes(n);
    if !(0..=65536).contains(&total) {
        return Err(io::Error::other(format!(
            "the old process announced {total} sockets (is it `expose-fd listeners`?)"
        )));
    }
    let total = total as usize;
    let mut fds: Vec<OwnedFd> = Vec::new();
    let mut data = Vec::new();
    let mut buf = vec![0u8; MAX_SEND_FD * (1 + 255 + 1 + 255 + 4)];
    while fds.len() < total {
        let (len, got) = crate::sys::recv_fds(s.as_raw_fd(), &mut buf, MAX_SEND_FD)?;
        if len == 0 && got.is_empty() {
            return Err(io::Error::new(
                io::ErrorKind::UnexpectedEof,
                format!("the old process sent {} of {total} sockets", fds.len()),
            ));
        }
        data.extend_from_slice(&buf[..len]);
        fds.extend(got);
        // The acknowledgment; HAProxy's sender may have closed after its
        // last batch, so a failure here is no error.
        let _ = s.write_all(&0i32.to_ne_bytes());
    }
    if fds.len() != total {
        return Err(io::Error::other("the old process sent too many sockets"));
    }
    let mut count = 0;
    let mut rest = &data[..];
    for fd in fds {
        let sock = Socket::from(fd);
        // Each descriptor's bytes: namespace, interface, 4 bytes of
        // former options (HAProxy's `sock_get_old_sockets`).
        let Some(names) = xfer_names(&mut rest) else {
            return Err(io::Error::other("inconsistency while transferring sockets"));
        };
        // Only listening stream sockets are of use; the rest is dropped.
        if sock.r#type().ok() != Some(socket2::Type::STREAM) {
            continue;
        }
        if let Some(k) = key_of(&sock, &names) {
            adopt(k, sock);
            count += 1;
        }
    }
    Ok(count)
}

/// One descriptor's bytes of a `_getsocks` answer, taken off the front
/// of `rest`: a length and a namespace name, a length and an interface
/// name, 4 bytes no longer used. `None`: cut short.
fn xfer_names(rest: &mut &[u8]) -> Option<Names> {
    let name = |r: &mut &[u8]| -> Option<Option<String>> {
        let (&n, tail) = r.split_first()?;
        let (v, tail) = tail.split_at_checked(usize::from(n))?;
        *r = tail;
        Some((n > 0).then(|| String::from_utf8_lossy(v).into_owned()))
    };
    let ns = name(rest)?;
    let iface = name(rest)?;
    *rest = rest.get(4..)?;
    Some(Names { ns, iface })
}

/// The bytes `_getsocks` sends with a descriptor (see [`xfer_names`]).
fn xfer_bytes(n: &Names, out: &mut Vec<u8>) {
    for v in [&n.ns, &n.iface] {
        let b = v.as_deref().unwrap_or("").as_bytes();
        // Names were checked at parse time (a path component, an
        // interface of 15 bytes at most); a longer one is cut as a byte
        // count can say.
        let b = &b[..b.len().min(255)];
        out.push(b.len() as u8);
        out.extend_from_slice(b);
    }
    out.extend_from_slice(&[0; 4]);
}

/// Answers `_getsocks` on the CLI connection `sock` (blocking, with a
/// timeout): every listening socket this process holds, with HAProxy's
/// per-descriptor bytes (its namespace and interface names, no options).
pub fn serve_getsocks(sock: &std::os::unix::net::UnixStream) -> io::Result<()> {
    use std::io::Read;
    // Duplicates: a stop may release BOUND while they are on their way.
    let dups: Vec<(OwnedFd, Names)> = lock(&BOUND)
        .iter()
        .filter_map(|(_, s, n)| s.try_clone().ok().map(|d| (OwnedFd::from(d), n.clone())))
        .collect();
    HANDED_OVER.store(true, std::sync::atomic::Ordering::Relaxed);
    sock.set_nonblocking(false)?;
    sock.set_read_timeout(Some(std::time::Duration::from_secs(1)))?;
    sock.set_write_timeout(Some(std::time::Duration::from_secs(1)))?;
    let raw = sock.as_raw_fd();
    crate::sys::send_fds(raw, &(dups.len() as i32).to_ne_bytes(), &[])?;
    let mut r = sock;
    for chunk in dups.chunks(MAX_SEND_FD) {
        let ids: Vec<_> = chunk.iter().map(|f| f.0.as_raw_fd()).collect();
        let mut data = Vec::new();
        for (_, n) in chunk {
            xfer_bytes(n, &mut data);
        }
        crate::sys::send_fds(raw, &data, &ids)?;
        let mut ack = [0u8; 4];
        r.read_exact(&mut ack)?;
    }
    Ok(())
}

/// `-sf`/`-st PID...`: signals the old processes once this one is ready.
pub fn signal_old(pids: &[u32], sig: i32) {
    for &p in pids {
        if let Err(e) = crate::sys::kill(p, sig) {
            eprintln!("ebb: cannot signal old process {p}: {e}");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_escape_their_separators() {
        let k = "unix:/a;b=c%d#0";
        assert_eq!(unescape(&escape(k)), k);
        assert!(!escape(k).contains(';'));
        assert!(!escape(k).contains('='));
    }

    #[test]
    fn getsocks_bytes_carry_the_names_back() {
        let n = Names {
            ns: Some("blue".into()),
            iface: Some("lo".into()),
        };
        let mut b = Vec::new();
        xfer_bytes(&n, &mut b);
        xfer_bytes(&Names::default(), &mut b);
        assert_eq!(&b[..12], b"\x04blue\x02lo\0\0\0\0");
        let mut r = &b[..];
        assert_eq!(xfer_names(&mut r), Some(n));
        assert_eq!(xfer_names(&mut r), Some(Names::default()));
        assert!(r.is_empty());
        assert_eq!(xfer_names(&mut &b"\x05ab"[..]), None);
        assert_eq!(Names::default().suffix(true), ";foreign");
    }

    #[test]
    fn a_line_counts_earlier_lines_with_the_same_address() {
        let mut b = Binder::default();
        assert_eq!(b.key("tcp:127.0.0.1:0".into()), "tcp:127.0.0.1:0#0");
        assert_eq!(b.key("tcp:127.0.0.1:0".into()), "tcp:127.0.0.1:0#1");
        assert_eq!(b.key("tcp:127.0.0.1:80".into()), "tcp:127.0.0.1:80#0");
    }

    #[test]
    fn an_inherited_socket_is_taken_and_kept_open() {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let a = l.local_addr().unwrap();
        adopt(format!("tcp:{a}#0"), Socket::from(l));
        let mut b = Binder::default();
        let (socks, real) = b
            .tcp(a, 2, 16, &Creation::default(), &mut Vec::new())
            .unwrap();
        assert_eq!(real, a);
        // One inherited, one more bound beside it (SO_REUSEPORT).
        assert_eq!(socks.len(), 2);
        let _c = std::net::TcpStream::connect(a).unwrap();
    }
}
