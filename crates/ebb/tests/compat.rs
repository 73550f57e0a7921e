//! HAProxy compatibility at the process's edges: inherited sockets (`fd@N`,
//! systemd's `LISTEN_FDS`), UNIX socket binds, syslog targets, `-D`,
//! `chroot`/`user`, `-cc`, and Debian's stock haproxy.cfg.
//!
//! Sockets are handed to ebb the way VTest and systemd do: a launcher
//! (python3) opens them, leaves them inheritable and execs ebb, so ebb
//! receives open descriptors exactly as from those tools.

mod common;

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpStream, UdpSocket};
use std::os::unix::net::{UnixDatagram, UnixStream};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::Duration;

use common::{get, have, retry_eintr, run_ebb, scratch, EBB};

/// A process started through the launcher; killed on drop.
struct Launched {
    child: Child,
    /// Lines of stdout: the launcher's first (ports), then ebb's.
    lines: mpsc::Receiver<String>,
    stderr: std::sync::Arc<std::sync::Mutex<String>>,
}

impl Launched {
    /// Waits for a stdout line containing `needle`.
    fn wait(&self, needle: &str) -> String {
        loop {
            match self.lines.recv_timeout(Duration::from_secs(30)) {
                Ok(l) if l.contains(needle) => return l,
                Ok(_) => {}
                Err(_) => panic!(
                    "no line with {needle:?}; stderr: {}",
                    self.stderr.lock().unwrap()
                ),
            }
        }
    }
}

impl Drop for Launched {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// An ebb started with `NOTIFY_SOCKET` set to `sock` (systemd's
/// notification socket), its output dropped; killed on drop if the test
/// fails before it exits.
struct Notified(Child);

impl Notified {
    fn start(args: &[&std::ffi::OsStr], dir: &Path, sock: &Path) -> Notified {
        Notified(
            Command::new(EBB)
                .args(args)
                .current_dir(dir)
                .env("NOTIFY_SOCKET", sock)
                .stdin(Stdio::null())
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .spawn()
                .unwrap(),
        )
    }
}

impl Drop for Notified {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Runs a python3 program that prepares descriptors then execs ebb with
/// `args`. The program's own stdout comes first.
fn launch(py: &str, args: &[&str], dir: &Path) -> Launched {
    let mut child = Command::new("python3")
        .arg("-c")
        .arg(py)
        .arg(EBB)
        .args(args)
        .current_dir(dir)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start python3");
    let out = child.stdout.take().unwrap();
    let err = child.stderr.take().unwrap();
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        for l in BufReader::new(out).lines().map_while(Result::ok) {
            let _ = tx.send(l);
        }
    });
    let stderr = std::sync::Arc::new(std::sync::Mutex::new(String::new()));
    let e2 = std::sync::Arc::clone(&stderr);
    std::thread::spawn(move || {
        for l in BufReader::new(err).lines().map_while(Result::ok) {
            let mut s = e2.lock().unwrap();
            s.push_str(&l);
            s.push('\n');
        }
    });
    Launched {
        child,
        lines: rx,
        stderr,
    }
}

/// Opens two listening TCP sockets, exports their numbers as FE and CLI
/// (as VTest does for `fd@${fe}`), prints their ports, execs ebb.
const TWO_SOCKETS: &str = r#"
import os, socket, sys
socks = []
for name in ("FE", "CLI"):
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    s.listen(64)
    os.set_inheritable(s.fileno(), True)
    os.environ[name] = str(s.fileno())
    socks.append(s)
print(socks[0].getsockname()[1], socks[1].getsockname()[1], flush=True)
os.execv(sys.argv[1], sys.argv[1:])
"#;

#[test]
fn inherited_sockets_serve_traffic_and_the_cli_on_every_thread() {
    if !have("python3") {
        eprintln!("python3 missing: cannot hand descriptors to ebb");
        return;
    }
    let d = scratch("fd");
    std::fs::write(
        d.join("ebb.cfg"),
        "global\n    nbthread 3\n    stats socket \"fd@${CLI}\" level admin\n\
         defaults\n    mode http\n    timeout client 10s\n\
         frontend fe\n    bind \"fd@${FE}\"\n    http-request return status 200 content-type text/plain string ok\n",
    )
    .unwrap();
    let l = launch(TWO_SOCKETS, &["-d", "-f", "ebb.cfg"], &d);
    let ports = l.wait(" ");
    let mut it = ports.split(' ').map(|p| p.parse::<u16>().unwrap());
    let (fe, cli) = (it.next().unwrap(), it.next().unwrap());
    let shown = l.wait("listening on fd@");
    assert!(shown.contains(&format!("127.0.0.1:{fe}")), "{shown}");
    l.wait("ebb: ready (3 threads)");
    // Many connections at once: every one is accepted by some thread from
    // the one shared socket.
    let addr: std::net::SocketAddr = ([127, 0, 0, 1], fe).into();
    let hs: Vec<_> = (0..24)
        .map(|_| std::thread::spawn(move || get(addr, "/").status))
        .collect();
    for h in hs {
        assert_eq!(h.join().unwrap(), 200);
    }
    // The CLI on an inherited TCP socket.
    let mut c = TcpStream::connect(("127.0.0.1", cli)).unwrap();
    c.write_all(b"show info\n").unwrap();
    let mut out = String::new();
    c.read_to_string(&mut out).unwrap();
    assert!(out.contains("Nbthread: 3"), "{out}");
}

/// Puts one listening socket on descriptor 3 and sets LISTEN_PID and
/// LISTEN_FDS as systemd's socket activation does.
const SYSTEMD: &str = r#"
import os, socket, sys
s = socket.socket()
s.bind(("127.0.0.1", 0))
s.listen(64)
print(s.getsockname()[1], flush=True)
if s.fileno() != 3:
    os.dup2(s.fileno(), 3)
    s.close()
else:
    s.detach()
os.set_inheritable(3, True)
os.environ["LISTEN_PID"] = str(os.getpid())
os.environ["LISTEN_FDS"] = "1"
os.execv(sys.argv[1], sys.argv[1:])
"#;

#[test]
fn systemd_socket_activation() {
    if !have("python3") {
        eprintln!("python3 missing: cannot hand descriptors to ebb");
        return;
    }
    let d = scratch("sd");
    let cfg = "defaults\n    mode http\n    timeout client 10s\n\
               frontend fe\n    bind fd@FD\n    http-request return status 204\n";
    std::fs::write(d.join("ok.cfg"), cfg.replace("FD", "3")).unwrap();
    std::fs::write(d.join("bad.cfg"), cfg.replace("FD", "4")).unwrap();
    let l = launch(SYSTEMD, &["-f", "ok.cfg"], &d);
    let port: u16 = l.wait("").trim().parse().unwrap();
    l.wait("ebb: ready");
    assert_eq!(get(([127, 0, 0, 1], port).into(), "/").status, 204);
    drop(l);
    // A descriptor systemd did not pass is refused with the range it did.
    let mut l = launch(SYSTEMD, &["-f", "bad.cfg"], &d);
    let st = l.child.wait().unwrap();
    assert_eq!(st.code(), Some(1));
    let err = l.stderr.clone();
    common::wait_until("the systemd message", || {
        err.lock().unwrap().contains("LISTEN_FDS")
    });
    let e = err.lock().unwrap().clone();
    assert!(e.contains("bad.cfg:5: cannot bind"), "{e}");
    assert!(e.contains("systemd passed descriptors 3..3"), "{e}");
}

#[test]
fn bind_on_a_unix_socket_path() {
    use std::os::unix::fs::PermissionsExt;
    let d = scratch("unix");
    let sock = d.join("web.sock");
    // A stale file where the socket goes is replaced.
    std::fs::write(&sock, b"stale").unwrap();
    // As root, the socket's owner is set too (HAProxy's `user`/`group`).
    let root = String::from_utf8_lossy(&Command::new("id").arg("-u").output().unwrap().stdout)
        .trim()
        == "0";
    let owner = if root {
        " user nobody group nogroup"
    } else {
        ""
    };
    let cfg = format!(
        "global\n    nbthread 2\ndefaults\n    mode http\n    timeout client 10s\n\
         frontend fe\n    bind unix@{} mode 600{owner} backlog 32\n    http-request return status 200 content-type text/plain string unix-ok\n",
        sock.display()
    );
    std::fs::write(d.join("ebb.cfg"), cfg).unwrap();
    let l = launch(
        "import os, sys\nos.execv(sys.argv[1], sys.argv[1:])\n",
        &["-f", "ebb.cfg"],
        &d,
    );
    let shown = l.wait("listening on unix@");
    assert!(shown.ends_with("web.sock"), "{shown}");
    l.wait("ebb: ready");
    let md = std::fs::metadata(&sock).unwrap();
    assert_eq!(md.permissions().mode() & 0o777, 0o600);
    if root {
        use std::os::unix::fs::MetadataExt;
        assert_eq!(
            (md.uid(), md.gid()),
            (65534, 65534),
            "user nobody group nogroup"
        );
    }
    for _ in 0..4 {
        let mut s = UnixStream::connect(&sock).unwrap();
        s.write_all(b"GET / HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
            .unwrap();
        let mut out = String::new();
        s.read_to_string(&mut out).unwrap();
        assert!(out.starts_with("HTTP/1.1 200"), "{out}");
        assert!(out.ends_with("unix-ok"), "{out}");
    }
    if have("curl") {
        let o = Command::new("curl")
            .args(["-s", "--unix-socket", sock.to_str().unwrap(), "http://x/"])
            .output()
            .unwrap();
        assert_eq!(String::from_utf8_lossy(&o.stdout), "unix-ok");
    }
}

/// Receives one datagram (the test fails after 30 s without one).
fn recv_udp(s: &UdpSocket) -> String {
    let mut b = [0u8; 4096];
    let n = retry_eintr(|| s.recv(&mut b)).expect("no syslog datagram");
    String::from_utf8_lossy(&b[..n]).into_owned()
}

fn recv_unix(s: &UnixDatagram) -> String {
    let mut b = [0u8; 4096];
    let n = retry_eintr(|| s.recv(&mut b)).expect("no syslog datagram");
    String::from_utf8_lossy(&b[..n]).into_owned()
}

#[test]
fn syslog_over_udp_and_a_unix_datagram_socket() {
    let d = scratch("syslog");
    let udp = UdpSocket::bind("127.0.0.1:0").unwrap();
    udp.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
    let own = UdpSocket::bind("127.0.0.1:0").unwrap();
    own.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
    let upath = d.join("log.sock");
    let unix = UnixDatagram::bind(&upath).unwrap();
    unix.set_read_timeout(Some(Duration::from_secs(30)))
        .unwrap();
    let cfg = format!(
        "global\n    log {} local0\n    log unix@{} format rfc5424 local1 info\n    log-tag web\n\
         defaults\n    mode http\n    timeout client 10s\n\
         frontend a\n    bind BIND\n    log global\n    http-request return status 200\n\
         frontend b\n    bind BIND\n    log udp@{} len 120 format short daemon\n    http-request return status 201\n",
        udp.local_addr().unwrap(),
        upath.display(),
        own.local_addr().unwrap()
    );
    let e = common::Ebb::start(&cfg);
    let pid = e.pid();
    assert_eq!(get(e.addrs[0], "/to-a").status, 200);
    let l = recv_udp(&udp);
    // HAProxy's default header: <PRI>Mmm dd hh:mm:ss TAG[PID]: , local0.info
    assert!(l.starts_with("<134>"), "{l}");
    assert!(l.contains(&format!(" web[{pid}]: ")), "{l}");
    assert!(l.ends_with("\"GET /to-a HTTP/1.1\"\n"), "{l}");
    assert!(l.contains(" a a/<NOSRV> "), "{l}");
    let l = recv_unix(&unix);
    // RFC 5424: <PRI>1 TIMESTAMP HOST TAG PID MSGID SD MSG, local1.info
    assert!(l.starts_with("<142>1 "), "{l}");
    assert!(l.contains(&format!(" - web {pid} - - ")), "{l}");
    assert!(l.ends_with("\"GET /to-a HTTP/1.1\"\n"), "{l}");
    // Frontend b has its own target only: nothing reaches the global ones.
    assert_eq!(get(e.addrs[1], "/to-b").status, 201);
    let l = recv_udp(&own);
    assert!(l.starts_with("<6>"), "{l}");
    assert!(l.contains(" b b/<NOSRV> "), "{l}");
    assert!(l.len() <= 121, "len 120 plus the newline: {l}");
    // A second request to a proves b's line did not go there (it would
    // be ahead of this one's). The line is sent once the answer is out:
    // the wait for it keeps its 30 s (a loaded machine can take more than
    // the former 300 ms).
    assert_eq!(get(e.addrs[0], "/again").status, 200);
    let l = recv_udp(&udp);
    assert!(
        l.contains("/again"),
        "b's line reached the global target: {l}"
    );
}

#[test]
fn daemon_mode_forks_and_writes_the_child_pid() {
    let d = scratch("daemon");
    std::fs::write(
        d.join("ebb.cfg"),
        "global\n    daemon\ndefaults\n    mode http\n    timeout client 10s\n\
         frontend fe\n    bind 127.0.0.1:0\n    http-request return status 200\n",
    )
    .unwrap();
    let pidfile = d.join("ebb.pid");
    // Pipes: the daemon must not keep them open, or this read would never
    // end (as `$(ebb -D ...)` in a script would hang).
    let o = Command::new(EBB)
        .args(["-f", "ebb.cfg", "-p", pidfile.to_str().unwrap()])
        .current_dir(&d)
        .stdin(Stdio::null())
        .output()
        .unwrap();
    // The parent prints where ebb listens and exits 0; the child goes on.
    assert_eq!(o.status.code(), Some(0));
    let text = String::from_utf8_lossy(&o.stdout).into_owned();
    let addr: std::net::SocketAddr = text
        .lines()
        .find_map(|l| l.split(" listening on ").nth(1))
        .expect("no listening line")
        .parse()
        .unwrap();
    let pid: i32 = std::fs::read_to_string(&pidfile)
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    let alive = Path::new(&format!("/proc/{pid}")).exists();
    assert!(alive, "the pidfile's process is not running");
    let fd1 = std::fs::read_link(format!("/proc/{pid}/fd/1")).unwrap();
    assert_eq!(fd1, Path::new("/dev/null"));
    // The child serves (it may still be starting its threads: retry, up
    // to a minute on a loaded machine).
    let mut ok = false;
    for _ in 0..3000 {
        if let Ok(mut s) = TcpStream::connect(addr) {
            let _ = s.write_all(b"GET / HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n");
            let mut r = String::new();
            let _ = s.read_to_string(&mut r);
            if r.starts_with("HTTP/1.1 200") {
                ok = true;
                break;
            }
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let _ = Command::new("kill").arg(pid.to_string()).status();
    assert!(ok, "the daemon did not answer");
    // -d keeps the foreground even with `daemon`.
    let mut e = common::Ebb::start_args(&["-d", "-f", "ebb.cfg"], d.clone());
    assert_eq!(get(e.addr(), "/").status, 200);
    e.signal("TERM");
    assert_eq!(e.wait_exit(Duration::from_secs(30)), Some(0));
}

#[test]
fn chroot_and_user_apply_after_binding() {
    if !have("id")
        || String::from_utf8_lossy(&Command::new("id").arg("-u").output().unwrap().stdout).trim()
            != "0"
    {
        eprintln!("not root: chroot and user switching cannot be tried");
        return;
    }
    let d = scratch("jail");
    let jail = d.join("jail");
    std::fs::create_dir_all(&jail).unwrap();
    std::fs::write(
        d.join("ebb.cfg"),
        format!(
            "global\n    chroot {}\n    user nobody\n    group nogroup\n\
             defaults\n    mode http\n    timeout client 10s\n\
             frontend fe\n    bind BIND\n    http-request return status 200\n",
            jail.display()
        )
        .replace("BIND", "127.0.0.1:0"),
    )
    .unwrap();
    let e = common::Ebb::start_args(&["-f", "ebb.cfg"], d.clone());
    assert_eq!(get(e.addr(), "/").status, 200);
    let status = std::fs::read_to_string(format!("/proc/{}/status", e.pid())).unwrap();
    let uid = status.lines().find(|l| l.starts_with("Uid:")).unwrap();
    assert!(
        uid.split_whitespace().skip(1).all(|u| u == "65534"),
        "{uid}"
    );
    let gid = status.lines().find(|l| l.starts_with("Gid:")).unwrap();
    assert!(
        gid.split_whitespace().skip(1).all(|g| g == "65534"),
        "{gid}"
    );
    let root = std::fs::read_link(format!("/proc/{}/root", e.pid())).unwrap();
    assert_eq!(root, jail);
}

#[test]
fn condition_checks_as_haproxy() {
    let d = scratch("cc");
    let cc = |e: &str| run_ebb(&["-cc", e], &d).0;
    assert_eq!(cc("version_atleast(2.5-dev0)"), 0);
    assert_eq!(cc("version_atleast(1024)"), 1);
    assert_eq!(cc("feature(OPENSSL) || !feature(OPENSSL)"), 0);
    assert_eq!(cc("streq(a,\"a)"), 2);
    // A master CLI without master-worker mode is refused, not ignored.
    let (code, _, err) = run_ebb(&["-S", "/tmp/x.sock", "-f", "x.cfg"], &d);
    assert_eq!(code, 1);
    assert!(err.contains("needs master-worker mode"), "{err}");
}

#[test]
fn debian_stock_config_passes_the_check() {
    let stock = Path::new("/etc/haproxy/haproxy.cfg");
    let Ok(text) = std::fs::read_to_string(stock) else {
        eprintln!("no /etc/haproxy/haproxy.cfg (install haproxy): nothing to check");
        return;
    };
    let d = scratch("stock");
    // The TLS defaults are another part's work; everything else stays.
    let mut cfg: String = text
        .lines()
        .filter(|l| {
            let w = l.split_whitespace().next().unwrap_or("");
            !(w == "ca-base" || w == "crt-base" || w.starts_with("ssl-default-"))
        })
        .map(|l| format!("{l}\n"))
        .collect();
    cfg.push_str("frontend fe\n\tbind :8080\n\tdefault_backend be\nbackend be\n\tserver s1 127.0.0.1:8000 check\n");
    std::fs::write(d.join("haproxy.cfg"), &cfg).unwrap();
    let (code, out, err) = run_ebb(&["-c", "-f", "haproxy.cfg"], &d);
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("Configuration file is valid"), "{out}");
    // HAProxy agrees on the same text.
    if have("haproxy") {
        let o = Command::new("haproxy")
            .args(["-c", "-f", "haproxy.cfg"])
            .current_dir(&d)
            .output()
            .unwrap();
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    }
    // And it serves as shipped (as root, as the package runs it): daemon,
    // chroot /var/lib/haproxy, user and group haproxy, the admin socket.
    let root = String::from_utf8_lossy(&Command::new("id").arg("-u").output().unwrap().stdout)
        .trim()
        == "0";
    if root && Path::new("/var/lib/haproxy").is_dir() && Path::new("/run/haproxy").is_dir() {
        let serve = cfg.replace(
            "frontend fe\n\tbind :8080\n\tdefault_backend be\n",
            "frontend fe\n\tbind 127.0.0.1:0\n\thttp-request return status 200 content-type text/plain string stock-ok\n",
        );
        std::fs::write(d.join("serve.cfg"), serve).unwrap();
        let pidfile = d.join("stock.pid");
        let o = Command::new(EBB)
            .args(["-f", "serve.cfg", "-p", pidfile.to_str().unwrap()])
            .current_dir(&d)
            .stdin(Stdio::null())
            .output()
            .unwrap();
        assert_eq!(
            o.status.code(),
            Some(0),
            "{}",
            String::from_utf8_lossy(&o.stderr)
        );
        let text = String::from_utf8_lossy(&o.stdout).into_owned();
        let addr: std::net::SocketAddr = text
            .lines()
            .find_map(|l| l.split(" listening on ").nth(1))
            .expect("no listening line")
            .parse()
            .unwrap();
        let pid = std::fs::read_to_string(&pidfile)
            .unwrap()
            .trim()
            .to_string();
        let mut body = String::new();
        // Until it serves (up to a minute on a loaded machine).
        for _ in 0..3000 {
            if let Ok(mut s) = TcpStream::connect(addr) {
                let _ = s.write_all(b"GET / HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n");
                let _ = s.read_to_string(&mut body);
                if body.ends_with("stock-ok") {
                    break;
                }
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        let jail = std::fs::read_link(format!("/proc/{pid}/root")).ok();
        let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
        let cli = UnixStream::connect("/run/haproxy/admin.sock").and_then(|mut c| {
            c.write_all(b"show info\n")?;
            let mut out = String::new();
            c.read_to_string(&mut out)?;
            Ok(out)
        });
        let _ = Command::new("kill").arg(&pid).status();
        assert!(body.ends_with("stock-ok"), "{body}");
        assert_eq!(jail.as_deref(), Some(Path::new("/var/lib/haproxy")));
        let uid = status.lines().find(|l| l.starts_with("Uid:")).unwrap_or("");
        assert!(!uid.split_whitespace().skip(1).any(|u| u == "0"), "{uid}");
        assert!(
            cli.unwrap().contains("Pid: "),
            "the admin socket does not answer"
        );
    }
    // send-proxy is applied; its SSL variant (TLVs ebb does not send) is
    // refused clearly.
    std::fs::write(
        d.join("sp.cfg"),
        cfg.replace("127.0.0.1:8000 check", "127.0.0.1:8000 send-proxy"),
    )
    .unwrap();
    let (code, _, err) = run_ebb(&["-c", "-f", "sp.cfg"], &d);
    assert_eq!(code, 0, "{err}");
    std::fs::write(
        d.join("sp2.cfg"),
        cfg.replace("127.0.0.1:8000 check", "127.0.0.1:8000 send-proxy-v2-ssl"),
    )
    .unwrap();
    let (code, _, err) = run_ebb(&["-c", "-f", "sp2.cfg"], &d);
    assert_eq!(code, 1);
    assert!(
        err.contains("'send-proxy-v2-ssl' is not supported"),
        "{err}"
    );
}

#[test]
fn log_health_checks_reports_each_status_change() {
    let udp = UdpSocket::bind("127.0.0.1:0").unwrap();
    udp.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
    // A port nothing listens on, below the ephemeral range (a port
    // released from `:0` could become ebb's own listener).
    let dead = std::net::SocketAddr::from(([127, 0, 0, 1], common::free_port()));
    let cfg = format!(
        "global\n    log {} format raw daemon\n\
         defaults\n    mode http\n    log global\n    timeout client 10s\n\
         frontend fe\n    bind BIND\n    default_backend be\n\
         backend be\n    option log-health-checks\n    server s1 {dead} check inter 100ms fall 2 rise 1\n",
        udp.local_addr().unwrap()
    );
    let _e = common::Ebb::start(&cfg);
    let mut seen = Vec::new();
    while !seen.iter().any(|l: &String| l.contains("is DOWN")) {
        seen.push(recv_udp(&udp));
    }
    // A server starts at health `rise` (HAProxy's start, `UP 1/2` in the
    // stats): its first failure is reported with the counter at 0 and
    // takes it DOWN at once; the check line comes before the change of
    // state, as in HAProxy (whose lines for this file are the same).
    let first = seen
        .iter()
        .position(|l| l.starts_with("Health check for server be/s1 failed, reason: "))
        .unwrap_or_else(|| panic!("no check line in {seen:?}"));
    let n = seen.len();
    assert_eq!(first, n - 2, "{seen:?}");
    assert!(seen[first].contains(", check duration: "), "{seen:?}");
    assert!(
        seen[first].trim_end().ends_with("ms, status: 0/1 DOWN."),
        "{seen:?}"
    );
    // The check's line gave the reason: the change's line has none.
    assert_eq!(
        seen[n - 1].trim_end(),
        "Server be/s1 is DOWN. 0 active and 0 backup servers left. 0 sessions active, 0 requeued, 0 remaining in queue.",
        "{seen:?}"
    );
    assert!(seen[n - 1].starts_with("Server be/s1 is DOWN"), "{seen:?}");
}

#[test]
fn a_directory_of_cfg_files_is_read_in_name_order() {
    let d = scratch("cfgdir");
    let c = d.join("conf.d");
    std::fs::create_dir_all(&c).unwrap();
    // `defaults` in the first file apply to the proxies of the second.
    std::fs::write(
        c.join("10-defaults.cfg"),
        "defaults\n    mode http\n    timeout client 5s\n",
    )
    .unwrap();
    std::fs::write(
        c.join("20-site.cfg"),
        "frontend f\n    bind 127.0.0.1:0\n    default_backend b\nbackend b\n    server s 127.0.0.1:9\n",
    )
    .unwrap();
    // Not a .cfg file: not read.
    std::fs::write(c.join("notes.txt"), "this is not configuration\n").unwrap();
    let (code, out, err) = run_ebb(&["-c", "-f", "conf.d"], &d);
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("valid"), "{out}");
    std::fs::write(c.join("30-bad.cfg"), "frontend g\n    bogus\n").unwrap();
    let (code, _, err) = run_ebb(&["-c", "-f", "conf.d"], &d);
    assert_eq!(code, 1);
    assert!(err.contains("30-bad.cfg:2: "), "{err}");
}

#[test]
fn an_empty_errorfile_closes_without_an_answer() {
    let e = common::Ebb::start(
        "defaults\n    mode http\n    timeout client 10s\n    errorfile 408 /dev/null\n\
         frontend fe\n    bind BIND\n    http-request deny deny_status 408 if { path /quiet }\n\
         http-request return status 200\n",
    );
    let mut s = TcpStream::connect(e.addr()).unwrap();
    s.write_all(b"GET /quiet HTTP/1.1\r\nHost: x\r\n\r\n")
        .unwrap();
    let mut out = Vec::new();
    s.read_to_end(&mut out).unwrap();
    assert!(out.is_empty(), "{}", String::from_utf8_lossy(&out));
    assert_eq!(get(e.addr(), "/").status, 200);
}

#[test]
fn stats_socket_on_tcp() {
    // A free port below the ephemeral range, for ebb to bind.
    let port = common::free_port();
    let e = common::Ebb::start(&format!(
        "global\n    stats socket ipv4@127.0.0.1:{port} level admin\n\
         defaults\n    mode http\n    timeout client 10s\n\
         frontend fe\n    bind BIND\n    http-request return status 200\n"
    ));
    let mut c = TcpStream::connect(("127.0.0.1", port)).unwrap();
    c.write_all(b"show info\n").unwrap();
    let mut out = String::new();
    c.read_to_string(&mut out).unwrap();
    assert!(out.contains(&format!("Pid: {}", e.pid())), "{out}");
}

/// The `Max open files` (soft, hard) of `prog` started under a soft
/// limit of `soft` (None: the test's own) on `cfg` (its port `port`), once
/// it answers; None when it ended instead.
fn open_files_of(prog: &str, soft: Option<u32>, cfg: &str, port: u16) -> Option<(String, String)> {
    let d = scratch("ulimit-n");
    std::fs::write(d.join("u.cfg"), cfg).unwrap();
    let lim = soft.map_or(String::new(), |n| format!("ulimit -Sn {n}; "));
    let mut child = Command::new("sh")
        .args(["-c", &format!("{lim}exec \"$0\" -db -f u.cfg"), prog])
        .current_dir(&d)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    // An answer, not a connect: the socket is bound before the limit is
    // set.
    let up = common::came_within(Duration::from_secs(30), || {
        matches!(child.try_wait(), Ok(Some(_)))
            || TcpStream::connect(("127.0.0.1", port)).is_ok_and(|s| {
                let mut c = common::Client::from_stream(s);
                c.send(b"GET / HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n");
                c.read_resp_opt(false).is_some_and(|r| r.status == 200)
            })
    });
    let limits = std::fs::read_to_string(format!("/proc/{}/limits", child.id()));
    let alive = matches!(child.try_wait(), Ok(None));
    let _ = child.kill();
    let _ = child.wait();
    if !up || !alive {
        return None;
    }
    let limits = limits.ok()?;
    let line = limits.lines().find(|l| l.starts_with("Max open files"))?;
    let v: Vec<_> = line.split_whitespace().collect();
    Some((v[3].to_string(), v[4].to_string()))
}

/// `ulimit-n N` as HAProxy 2.6.12: the soft limit becomes N and the hard
/// one stays at least what the process started with, only when that
/// raises them (a process started with more keeps it: nothing is
/// lowered); a limit that cannot be raised refuses the start (HAProxy's
/// default `strict-limits`). (ebb set both to N, lowering them, and went
/// on with a warning.) Beside haproxy.
#[test]
fn ulimit_n_raises_the_open_files_limit_as_haproxy() {
    let own = std::fs::read_to_string("/proc/self/limits").unwrap();
    let line = own
        .lines()
        .find(|l| l.starts_with("Max open files"))
        .unwrap();
    let v: Vec<String> = line.split_whitespace().map(String::from).collect();
    let (soft, hard) = (v[3].clone(), v[4].clone());
    let Ok(hard_n) = hard.parse::<u64>() else {
        println!("no hard open-files limit: skipped");
        return;
    };
    if soft.parse::<u64>().ok() != Some(hard_n) || hard_n < 4000 {
        println!("open files {soft}/{hard}: skipped");
        return;
    }
    let mut progs = vec![EBB];
    if have("haproxy") {
        progs.push("haproxy");
    }
    for prog in progs {
        let port = common::free_port();
        let cfg = |n: u64| {
            format!(
                "global\n    maxconn 100\n    ulimit-n {n}\ndefaults\n    mode http\n    timeout client 10s\n\
                 frontend fe\n    bind 127.0.0.1:{port}\n    http-request return status 200\n"
            )
        };
        // Raised from a soft limit of 1000: N, the hard limit kept.
        let got = open_files_of(prog, Some(1000), &cfg(3000), port);
        assert_eq!(got, Some(("3000".to_string(), hard.clone())), "{prog}");
        // Started with more: kept.
        let got = open_files_of(prog, None, &cfg(3000), port);
        assert_eq!(got, Some((soft.clone(), hard.clone())), "{prog}");
        // Past the hard limit (unless privileged): not started.
        if !own_capability_sys_resource() {
            let got = open_files_of(prog, None, &cfg(hard_n + 1000), port);
            assert_eq!(got, None, "{prog}");
        }
    }
}

/// Whether this process may raise its hard limits (`CAP_SYS_RESOURCE` in
/// its effective set).
fn own_capability_sys_resource() -> bool {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    status
        .lines()
        .find_map(|l| l.strip_prefix("CapEff:"))
        .and_then(|v| u64::from_str_radix(v.trim(), 16).ok())
        .is_some_and(|caps| caps & (1 << 24) != 0)
}

#[test]
fn systemd_notify_ready_reloading_stopping() {
    let d = scratch("notify");
    let sock = d.join("notify.sock");
    let n = UnixDatagram::bind(&sock).unwrap();
    n.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
    std::fs::write(
        d.join("ebb.cfg"),
        "defaults\n    mode http\n    timeout client 10s\n\
         frontend fe\n    bind 127.0.0.1:0\n    http-request return status 200\n",
    )
    .unwrap();
    let mut child = Notified::start(&["-f".as_ref(), "ebb.cfg".as_ref()], &d, &sock);
    let pid = child.0.id();
    let ready = recv_unix(&n);
    assert_eq!(ready, format!("READY=1\nMAINPID={pid}"));
    let _ = Command::new("kill")
        .args(["-HUP", &pid.to_string()])
        .status();
    assert_eq!(recv_unix(&n), "RELOADING=1");
    assert_eq!(recv_unix(&n), "READY=1");
    let _ = Command::new("kill").arg(pid.to_string()).status();
    assert_eq!(recv_unix(&n), "STOPPING=1");
    assert_eq!(child.0.wait().unwrap().code(), Some(0));
}

#[test]
fn reload_refuses_what_only_a_restart_applies() {
    let cfg = "global\n    log stderr format raw daemon\n\
               defaults\n    mode http\n    timeout client 10s\n\
               frontend fe\n    bind BIND\n    http-request return status 200\n";
    let e = common::Ebb::start(cfg);
    let path = e.dir.join("ebb.cfg");
    // Lines moved only: not a change; the reload goes through.
    let text = std::fs::read_to_string(&path).unwrap();
    std::fs::write(&path, format!("# moved\n{text}")).unwrap();
    e.signal("HUP");
    e.wait_stderr("configuration reloaded", Duration::from_secs(30))
        .expect("a reload that moves lines is refused");
    // Another log target: refused, the running one stays.
    std::fs::write(
        &path,
        text.replace("format raw daemon", "format raw local0"),
    )
    .unwrap();
    e.signal("HUP");
    let l = e
        .wait_stderr("needs a restart", Duration::from_secs(30))
        .expect("a changed log target was taken silently");
    assert!(l.contains("log targets"), "{l}");
    assert_eq!(get(e.addr(), "/").status, 200);
}

/// `monitor-uri`: answered 200 before any rule (the path of an
/// absolute-form target counts, case matters), 503 when a `monitor fail`
/// condition holds, never logged, as HAProxy 2.6 does.
#[test]
fn monitor_uri_answers_before_rules_and_is_not_logged() {
    let udp = UdpSocket::bind("127.0.0.1:0").unwrap();
    udp.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
    let cfg = format!(
        "global\n    log {} format raw daemon\n\
         defaults\n    mode http\n    log global\n    timeout client 10s\n\
         frontend fe\n    bind BIND\n    monitor-uri /health\n    monitor fail if {{ req.hdr(x-fail) -m found }}\n    http-request deny\n",
        udp.local_addr().unwrap()
    );
    let e = common::Ebb::start(&cfg);
    let a = e.addr();
    let r = get(a, "/health");
    assert_eq!(r.status, 200);
    assert!(r.text().contains("Service ready."), "{}", r.text());
    let r = common::raw(
        a,
        b"GET http://www.haproxy.org/health HTTP/1.1\r\nHost: www.haproxy.org\r\nConnection: close\r\n\r\n",
    )
    .unwrap();
    assert_eq!(r.status, 200);
    let r = common::raw(
        a,
        b"GET /health HTTP/1.1\r\nHost: t\r\nX-Fail: 1\r\nConnection: close\r\n\r\n",
    )
    .unwrap();
    assert_eq!(r.status, 503);
    // Another path goes through the rules (denied) and is logged; the
    // monitor requests before it were not.
    assert_eq!(get(a, "/hEAlth").status, 403);
    let line = recv_udp(&udp);
    assert!(line.contains("GET /hEAlth"), "{line}");
    // `monitor fail` needs a condition; `monitor-uri` has no place in a
    // backend.
    let d = scratch("monitor-bad");
    for bad in [
        "frontend fe\n    bind 127.0.0.1:0\n    monitor fail\n",
        "backend be\n    monitor-uri /x\n",
    ] {
        std::fs::write(d.join("m.cfg"), format!("defaults\n    mode http\n{bad}")).unwrap();
        let (code, _, err) = run_ebb(&["-c", "-f", "m.cfg"], &d);
        assert_eq!(code, 1, "{bad}: {err}");
        assert!(err.contains("m.cfg:"), "{err}");
    }
}

/// `http-request return`'s fields come in HAProxy's order: the `hdr`
/// fields as written (literal and log-format ones interleaved, none with
/// an empty value), then `content-type` only when there is a body. Side
/// by side with haproxy; `content-length` is left out of the comparison
/// (HAProxy writes it before the type, ebb's writer after every field).
#[test]
fn return_fields_in_haproxys_order() {
    let cfg = |bind: &str| {
        format!(
            "defaults\n    mode http\n    timeout client 30s\n    timeout server 30s\n    timeout connect 5s\n\
             frontend fe\n    bind {bind}\n\
             \x20   http-request return status 200 content-type text/plain hdr x-a 1 hdr x-b \"%[path]\" hdr x-c 3 hdr x-empty \"%[req.hdr(nothere)]\" lf-string \"%[req.hdr(x-body)]\"\n"
        )
    };
    let port = common::free_port();
    let ebb = common::Ebb::start(&cfg("127.0.0.1:0"));
    let hap = common::haproxy_with("return-order-hap", &cfg(&format!("127.0.0.1:{port}")));
    let names = |a: std::net::SocketAddr, body: bool| {
        let req = if body {
            "GET /p HTTP/1.1\r\nHost: h\r\nX-Body: hi\r\nConnection: close\r\n\r\n"
        } else {
            "GET /p HTTP/1.1\r\nHost: h\r\nConnection: close\r\n\r\n"
        };
        let r = common::raw(a, req.as_bytes()).expect("an answer");
        assert_eq!(r.status, 200);
        r.headers
            .iter()
            .map(|(n, _)| n.to_ascii_lowercase())
            .filter(|n| !["date", "connection", "server", "content-length"].contains(&n.as_str()))
            .collect::<Vec<_>>()
            .join(",")
    };
    for body in [true, false] {
        let want = if body {
            "x-a,x-b,x-c,content-type"
        } else {
            "x-a,x-b,x-c"
        };
        assert_eq!(names(ebb.addr(), body), want, "ebb, body {body}");
        if hap.is_some() {
            let h: std::net::SocketAddr = format!("127.0.0.1:{port}").parse().unwrap();
            assert_eq!(names(h, body), want, "haproxy, body {body}");
        }
    }
}

/// `fcgi-app` sections: read and checked as HAProxy checks them (their
/// use by a backend: `tests/fcgi.rs`). HAProxy's `-c` agrees on the texts
/// both accept or refuse.
#[test]
fn fcgi_app_sections_are_checked() {
    let d = scratch("fcgi");
    // Each text ends with a listener, which `haproxy -c` wants.
    let check = |name: &str, text: &str| {
        let text = format!("{text}frontend fe\n    mode http\n    bind 127.0.0.1:8080\n    default_backend be\nbackend be\n    mode http\n    server s 127.0.0.1:8000\n");
        std::fs::write(d.join(name), text).unwrap();
        let (code, _, err) = run_ebb(&["-c", "-f", name], &d);
        let hap = have("haproxy").then(|| {
            Command::new("haproxy")
                .args(["-c", "-q", "-f", name])
                .current_dir(&d)
                .status()
                .unwrap()
                .success()
        });
        (code, err, hap)
    };
    let unused = "defaults\n    mode http\nfcgi-app php\n    docroot /var/www\n    index index.php\n\
         \x20   path-info ^(/.+\\.php)(/.*)?$\n    acl local src 127.0.0.1\n\
         \x20   set-param REDIRECT_STATUS 200 if local\n    pass-header Authorization unless { path /x }\n\
         \x20   no option keep-conn\n    option mpxs-conns\n    option max-reqs 10\n\
         \x20   option get-values\n    log-stderr global\n\
         \x20   set-param UNUSED %[parsed_only_when_used]\n";
    // (HAProxy parses a set-param value only for a backend using the
    // application: an unknown fetch in an unused one passes.)
    let (code, err, hap) = check("unused.cfg", unused);
    assert_eq!(code, 0, "{err}");
    assert_ne!(hap, Some(false), "haproxy refuses the unused section");
    // Syntax errors, each with its line (HAProxy refuses each too).
    for (bad, needle) in [
        ("    docroot\n", "4: 'docroot' expects <path>"),
        (
            "    option max-reqs 0\n",
            "4: option 'max-reqs' expects a strictly positive",
        ),
        ("    option nosuch\n", "4: unknown option 'nosuch'"),
        (
            "    frobnicate 1\n",
            "4: unknown keyword 'frobnicate' in 'fcgi-app'",
        ),
        (
            "    set-param X\n",
            "4: 'set-param' expects <name> and <value>",
        ),
        (
            "    pass-header X if undeclared\n",
            "4: ACL 'undeclared' is not declared",
        ),
        ("    path-info ^(\n", "4: invalid regular expression"),
    ] {
        let text = format!("defaults\n    mode http\nfcgi-app a\n{bad}    docroot /x\n");
        let (code, err, hap) = check("bad.cfg", &text);
        assert_eq!(code, 1, "{bad}: accepted");
        assert!(err.contains(&format!("bad.cfg:{needle}")), "{bad}: {err}");
        assert_ne!(hap, Some(true), "haproxy accepts {bad}");
    }
    // A section without a document root (HAProxy: "no docroot configured").
    let (code, err, hap) = check("nodoc.cfg", "fcgi-app a\n    index i.php\n");
    assert_eq!(code, 1);
    assert!(
        err.contains("nodoc.cfg:1: fcgi-app 'a': no docroot configured"),
        "{err}"
    );
    assert_ne!(hap, Some(true));
    // Used by a backend, its values are parsed: an unknown fetch is
    // refused then, by both.
    let used = "defaults\n    mode http\nbackend be2\n    use-fcgi-app php\n\
         \x20   server s 127.0.0.1:9000 proto fcgi\nfcgi-app php\n    docroot /var/www\n\
         \x20   set-param UNUSED %[parsed_only_when_used]\n";
    let (code, err, hap) = check("used.cfg", used);
    assert_eq!(code, 1);
    assert!(err.contains("used.cfg:8: "), "{err}");
    assert!(err.contains("parsed_only_when_used"), "{err}");
    assert_ne!(
        hap,
        Some(true),
        "haproxy accepts an unknown fetch in a used fcgi-app"
    );
    // And a configuration with an unused section serves.
    let o = common::origin::Origin::start("o", common::origin::Mode::Ok);
    let e = common::Ebb::start(&format!(
        "defaults\n    mode http\nfrontend fe\n    bind BIND\n    default_backend be\nbackend be\n    server s {}\nfcgi-app php\n    docroot /var/www\n",
        o.addr
    ));
    assert_eq!(get(e.addr(), "/").status, 200);
}

/// HAProxy's `internal.htx.*` fetches read its HTX buffer, which ebb does
/// not have: refused at start with that reason, in an ACL and in an
/// expression (HAProxy accepts both).
#[test]
fn internal_htx_fetches_are_refused_with_their_reason() {
    let d = scratch("htx");
    for (rule, needle) in [
        (
            "http-request deny if { internal.htx.has_eom -m bool }",
            "ACL criterion 'internal.htx.has_eom': sample fetch 'internal.htx.has_eom' is not supported by ebb: it reads HAProxy's internal HTX message",
        ),
        (
            "http-request set-header x %[internal.htx_blk.type(head)]",
            "'http-request set-header x': sample fetch 'internal.htx_blk.type' is not supported by ebb",
        ),
    ] {
        let text = format!(
            "defaults\n    mode http\n    timeout client 5s\n    timeout server 5s\n    timeout connect 5s\n\
             frontend fe\n    bind 127.0.0.1:8080\n    {rule}\n    default_backend be\n\
             backend be\n    server s 127.0.0.1:8000\n"
        );
        std::fs::write(d.join("h.cfg"), &text).unwrap();
        let (code, _, err) = run_ebb(&["-c", "-f", "h.cfg"], &d);
        assert_eq!(code, 1, "{rule}");
        assert!(err.contains(&format!("h.cfg:8: {needle}")), "{err}");
        if have("haproxy") {
            let ok = Command::new("haproxy")
                .args(["-c", "-q", "-f", "h.cfg"])
                .current_dir(&d)
                .status()
                .unwrap()
                .success();
            assert!(ok, "haproxy refuses {rule}");
        }
    }
}

/// `setenv`, `presetenv`, `unsetenv` and `resetenv` change the environment
/// the lines after them read (`"${NAME}"` and the `env()` fetch), side by
/// side with haproxy.
#[test]
fn environment_keywords_apply_to_the_lines_after_them() {
    let cfg = |bind: &str, reset: bool| {
        let reset = if reset {
            "    resetenv EBB_T_A PATH\n"
        } else {
            ""
        };
        format!(
            "global\n    setenv EBB_T_A alpha\n    presetenv EBB_T_A beta\n    presetenv EBB_T_B bravo\n\
             \x20   setenv EBB_T_C charlie\n    unsetenv EBB_T_C\n{reset}\
             defaults\n    mode http\n    timeout client 30s\n    timeout server 30s\n    timeout connect 5s\n\
             frontend fe\n    bind {bind}\n\
             \x20   http-request return status 200 content-type text/plain lf-string \"a=${{EBB_T_A}} b=%[env(EBB_T_B)] c=${{EBB_T_C}}. path=%[env(PATH),length,bool]\"\n"
        )
    };
    for (reset, want) in [
        (false, "a=alpha b=bravo c=. path=1"),
        (true, "a=alpha b= c=. path=1"),
    ] {
        let ebb = common::Ebb::start(&cfg("BIND", reset));
        assert_eq!(
            String::from_utf8_lossy(&common::get(ebb.addr(), "/").body),
            want,
            "ebb"
        );
        let port = common::free_port();
        let name = format!("environ-hap-{reset}");
        if let Some(_h) = common::haproxy_with(&name, &cfg(&format!("127.0.0.1:{port}"), reset)) {
            let a: std::net::SocketAddr = format!("127.0.0.1:{port}").parse().unwrap();
            assert_eq!(
                String::from_utf8_lossy(&common::get(a, "/").body),
                want,
                "haproxy"
            );
        }
    }
}

/// `node` and `description` name the instance in `show info` (the host
/// name when no `node` is set; no description field when none is set),
/// side by side with haproxy; a `node` outside HAProxy's characters is
/// refused.
#[test]
fn node_and_description_in_show_info() {
    let pick = |info: &str| -> Vec<String> {
        info.lines()
            .filter(|l| l.starts_with("node:") || l.starts_with("description:"))
            .map(String::from)
            .collect()
    };
    let host = std::fs::read_to_string("/proc/sys/kernel/hostname")
        .unwrap()
        .trim()
        .to_string();
    for (extra, want) in [
        (
            "    node web-1_a.b\n    description front   tier \"two words\"\n",
            vec![
                "node: web-1_a.b".to_string(),
                "description: front tier two words".to_string(),
            ],
        ),
        ("", vec![format!("node: {host}")]),
    ] {
        let rest = format!(
            "{extra}defaults\n    mode http\n    timeout client 30s\n    timeout server 30s\n    timeout connect 5s\n\
             frontend fe\n    bind BIND\n    http-request return status 200\n"
        );
        let d = scratch("node-desc");
        let sock = d.join("e.sock");
        let e = common::Ebb::start(&format!(
            "global\n    stats socket {} level admin\n{rest}",
            sock.display()
        ));
        assert_eq!(pick(&common::cli_cmd(&sock, "show info")), want, "ebb");
        drop(e);
        let port = common::free_port();
        let hrest = rest.replace("BIND", &format!("127.0.0.1:{port}"));
        if let Some(h) = common::haproxy_with("node-desc-hap", &hrest) {
            assert_eq!(
                pick(&common::cli_cmd(&h.sock, "show info")),
                want,
                "haproxy"
            );
        }
    }
    let d = scratch("node-bad");
    std::fs::write(
        d.join("n.cfg"),
        "global\n    node web/1\nfrontend fe\n    bind 127.0.0.1:8080\n",
    )
    .unwrap();
    let (code, _, err) = run_ebb(&["-c", "-f", "n.cfg"], &d);
    assert!(code != 0 && err.contains("n.cfg:2: 'node'"), "{err}");
}

/// `tune.ssl.default-dh-param` and `ssl-dh-param-file` (in Mozilla's
/// generated HAProxy configurations) are checked as haproxy checks them:
/// the size at least 1024, the file a PEM of DH parameters.
#[test]
fn dh_parameters_are_checked_as_haproxy() {
    let d = scratch("dhparam");
    let pem = Command::new("openssl")
        .args([
            "genpkey",
            "-genparam",
            "-algorithm",
            "DH",
            "-pkeyopt",
            "dh_param:ffdhe2048",
        ])
        .output()
        .unwrap();
    assert!(pem.status.success());
    std::fs::write(d.join("dh.pem"), &pem.stdout).unwrap();
    std::fs::write(
        d.join("bad.pem"),
        "-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n",
    )
    .unwrap();
    for (global, ok) in [
        (
            "    tune.ssl.default-dh-param 2048\n    ssl-dh-param-file dh.pem\n",
            true,
        ),
        ("    tune.ssl.default-dh-param 512\n", false),
        ("    tune.ssl.default-dh-param\n", false),
        ("    ssl-dh-param-file missing.pem\n", false),
        ("    ssl-dh-param-file bad.pem\n", false),
    ] {
        let text = format!("global\n{global}frontend fe\n    mode http\n    bind 127.0.0.1:8080\n    http-request return status 200\n");
        std::fs::write(d.join("t.cfg"), text).unwrap();
        let (code, _, err) = run_ebb(&["-c", "-f", "t.cfg"], &d);
        assert_eq!(code == 0, ok, "ebb on {global}: {err}");
        if !ok {
            assert!(err.contains("t.cfg:"), "{err}");
        }
        if have("haproxy") {
            let st = Command::new("haproxy")
                .args(["-c", "-q", "-f", "t.cfg"])
                .current_dir(&d)
                .status()
                .unwrap();
            assert_eq!(st.success(), ok, "haproxy on {global}");
        }
    }
}

/// The CPUs each thread of `pid` may run on, by thread name.
fn thread_cpus(pid: u32) -> Vec<(String, String)> {
    let mut v = Vec::new();
    for t in std::fs::read_dir(format!("/proc/{pid}/task"))
        .unwrap()
        .flatten()
    {
        let st = std::fs::read_to_string(t.path().join("status")).unwrap_or_default();
        let field = |k: &str| {
            st.lines()
                .find_map(|l| l.strip_prefix(k))
                .map(|v| v.trim().to_string())
                .unwrap_or_default()
        };
        v.push((field("Name:"), field("Cpus_allowed_list:")));
    }
    v.sort();
    v
}

/// `cpu-map auto:1/1-2 0-1` puts thread 1 on CPU 0 and thread 2 on CPU 1,
/// as haproxy does (on a machine with at least two CPUs).
#[test]
fn cpu_map_binds_each_thread() {
    let online = std::fs::read_to_string("/sys/devices/system/cpu/online").unwrap_or_default();
    if !(online.trim() == "0-1" || online.trim().starts_with("0-")) {
        println!("fewer than 2 CPUs online ({online}): nothing to check");
        return;
    }
    let rest = |bind: &str| {
        format!(
            "global\n    nbthread 2\n    cpu-map auto:1/1-2 0-1\n\
             defaults\n    mode http\n    timeout client 30s\n    timeout server 30s\n    timeout connect 5s\n\
             frontend fe\n    bind {bind}\n    http-request return status 200\n"
        )
    };
    let e = common::Ebb::start(&rest("BIND"));
    assert_eq!(get(e.addr(), "/").status, 200);
    let sched = || -> Vec<String> {
        thread_cpus(e.pid())
            .into_iter()
            .filter(|(n, _)| n.starts_with("sched-") && n != "sched-watchdog")
            .map(|(_, c)| c)
            .collect()
    };
    // Each thread binds itself as it starts: wait for both to have.
    common::wait_until("ebb's threads bound", || sched() == ["0", "1"]);
    let port = common::free_port();
    if let Some(h) = common::haproxy_with("cpumap-hap", &rest(&format!("127.0.0.1:{port}"))) {
        let cpus = || -> Vec<String> {
            let mut c: Vec<String> = thread_cpus(h.pid()).into_iter().map(|(_, c)| c).collect();
            c.sort();
            c
        };
        common::wait_until("haproxy's threads bound", || cpus() == ["0", "1"]);
    }
}

/// The command-line flags of HAProxy's systemd unit and Docker image:
/// `-c -q` says nothing (its status tells), `-V` cancels `-q`, `-C DIR`
/// reads relative paths from DIR; side by side with haproxy. Then `-Ws
/// -db` (the Docker image's `-W -db`): a master in the foreground despite
/// `daemon`, telling systemd it is ready, serving, and stopping on TERM.
#[test]
fn quiet_chdir_and_the_systemd_and_docker_flags() {
    let d = scratch("qflags");
    std::fs::create_dir_all(d.join("conf")).unwrap();
    let port = common::free_port();
    std::fs::write(
        d.join("conf/ok.cfg"),
        format!("global\n    daemon\ndefaults\n    mode http\n    timeout client 10s\n    timeout server 10s\n    timeout connect 5s\n\
         frontend fe\n    bind 127.0.0.1:{port}\n    http-request return status 200\n"),
    )
    .unwrap();
    std::fs::write(d.join("conf/bad.cfg"), "frontend fe\n    bogus line\n").unwrap();
    let run = |prog: &str, args: &[&str]| {
        let o = Command::new(prog)
            .args(args)
            .current_dir(&d)
            .output()
            .unwrap();
        (
            o.status.code().unwrap_or(-1),
            format!(
                "{}{}",
                String::from_utf8_lossy(&o.stdout),
                String::from_utf8_lossy(&o.stderr)
            ),
        )
    };
    let mut progs = vec![EBB];
    if have("haproxy") {
        progs.push("haproxy");
    }
    for p in progs {
        assert_eq!(
            run(p, &["-c", "-q", "-f", "conf/ok.cfg"]),
            (0, String::new()),
            "{p}"
        );
        assert_eq!(
            run(p, &["-Ws", "-c", "-q", "-f", "conf/ok.cfg"]),
            (0, String::new()),
            "{p}"
        );
        assert_eq!(
            run(p, &["-c", "-q", "-f", "conf/bad.cfg"]),
            (1, String::new()),
            "{p}"
        );
        let (code, out) = run(p, &["-c", "-q", "-V", "-f", "conf/bad.cfg"]);
        assert!(code == 1 && out.contains("bogus"), "{p}: {out}");
        let (code, _) = run(p, &["-C", "conf", "-c", "-q", "-f", "ok.cfg"]);
        assert_eq!(code, 0, "{p} -C");
    }
    // -Ws -db: the master stays in the foreground (the configuration says
    // `daemon`) and notifies.
    let sock = d.join("notify.sock");
    let n = UnixDatagram::bind(&sock).unwrap();
    n.set_read_timeout(Some(Duration::from_secs(60))).unwrap();
    let cli = d.join("m.sock");
    let args = ["-Ws", "-db", "-f", "conf/ok.cfg", "-S"].map(std::ffi::OsStr::new);
    let mut child = Notified::start(&[&args[..], &[cli.as_os_str()]].concat(), &d, &sock);
    let pid = child.0.id();
    assert_eq!(recv_unix(&n), format!("READY=1\nMAINPID={pid}"));
    assert!(child.0.try_wait().unwrap().is_none(), "the master stays");
    let a: std::net::SocketAddr = format!("127.0.0.1:{port}").parse().unwrap();
    assert_eq!(get(a, "/").status, 200);
    let procs = common::cli_cmd(&cli, "show proc");
    assert!(procs.contains("worker"), "{procs}");
    let _ = Command::new("kill").arg(pid.to_string()).status();
    // HAProxy 2.6's status for a master stopped by SIGTERM: 0.
    assert_eq!(child.0.wait().unwrap().code(), Some(0));
}

/// The date and counter aliases in header values and `unique-id-format`
/// (HAProxy's documented `%{+X}o %ci:%cp_%fi:%fp_%Ts_%rt:%pid` and the
/// `X-Request-Start: t=%Ts%ms` recipe), side by side with haproxy: same
/// shapes, dates of now, a new `%rt` for each request.
#[test]
fn date_and_counter_aliases_in_headers_and_unique_ids() {
    let o = common::origin::Origin::start("o", common::origin::Mode::Ok);
    let cfg = |bind: &str| {
        format!(
            "defaults\n    mode http\n    timeout client 30s\n    timeout server 30s\n    timeout connect 5s\n\
             frontend fe\n    bind {bind}\n\
             \x20   unique-id-format %{{+X}}o\\ %ci:%cp_%fi:%fp_%Ts_%rt:%pid\n\
             \x20   unique-id-header X-Unique-ID\n\
             \x20   http-request set-header X-Request-Start t=%Ts%ms\n\
             \x20   http-request set-header X-Dates \"%t|%tr|%T|%trg|%rt\"\n\
             \x20   default_backend be\n\
             backend be\n    server s {}\n",
            o.addr
        )
    };
    let uid = regex::Regex::new(
        r"^(?i:X-Unique-ID): 7F000001:[0-9A-F]{4}_7F000001:[0-9A-F]{4}_([0-9A-F]{8})_([0-9A-F]{4,8}):[0-9A-F]{4,}$",
    )
    .unwrap();
    let start = regex::Regex::new(r"^(?i:X-Request-Start): t=(\d{10})(\d{3})$").unwrap();
    let local = r"\d{2}/[A-Z][a-z]{2}/\d{4}:\d{2}:\d{2}:\d{2}";
    let dates = regex::Regex::new(&format!(
        r"^(?i:X-Dates): {local}\.\d{{3}}\|{local}\.\d{{3}}\|{local} \+0000\|{local} \+0000\|(\d+)$"
    ))
    .unwrap();
    let check = |who: &str, addr: std::net::SocketAddr| {
        let before = o.heads.lock().unwrap().len();
        let mut c = common::Client::connect(addr);
        for _ in 0..2 {
            c.send(b"GET /d HTTP/1.1\r\nHost: h\r\n\r\n");
            assert_eq!(c.read_resp().status, 200, "{who}");
        }
        let heads = o.heads.lock().unwrap()[before..].to_vec();
        assert_eq!(heads.len(), 2, "{who}");
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_secs();
        let mut counters = Vec::new();
        for h in &heads {
            let line = |re: &regex::Regex| {
                h.lines()
                    .find_map(|l| {
                        re.captures(l)
                            .map(|c| (1..c.len()).map(|i| c[i].to_string()).collect::<Vec<_>>())
                    })
                    .unwrap_or_else(|| panic!("{who}: no match for {re} in {h}"))
            };
            let u = line(&uid);
            let ts = u64::from_str_radix(&u[0], 16).unwrap();
            assert!(ts.abs_diff(now) < 120, "{who}: {h}");
            let s = line(&start);
            assert_eq!(s[0].parse::<u64>().unwrap(), ts, "{who}: {h}");
            let d = line(&dates);
            counters.push((
                u64::from_str_radix(&u[1], 16).unwrap(),
                d[0].parse::<u64>().unwrap(),
            ));
        }
        // One number per request, the same wherever it is read.
        assert_eq!(counters[0].0, counters[0].1, "{who}: {heads:?}");
        assert_ne!(counters[0].0, counters[1].0, "{who}: {heads:?}");
    };
    let e = common::Ebb::start(&cfg("BIND"));
    check("ebb", e.addr());
    let port = common::free_port();
    if let Some(_h) = common::haproxy_with("dates-hap", &cfg(&format!("127.0.0.1:{port}"))) {
        check("haproxy", format!("127.0.0.1:{port}").parse().unwrap());
    }
}

/// The part of an RFC 5424 line after its MSGID: the structured data and
/// the message (`<PRI>1 TIMESTAMP HOST TAG PID MSGID ` cut off).
fn after_msgid(l: &str) -> String {
    l.splitn(7, ' ').nth(6).unwrap_or_default().to_string()
}

/// `log-format-sd` fills the structured data of `rfc5424` lines only, as
/// HAProxy 2.6 writes it (beside Debian's haproxy when installed).
#[test]
fn log_format_sd_beside_haproxy() {
    let cfg = |first: &str, bind: &str, rfc: &UdpSocket, plain: &UdpSocket| {
        format!(
            "global\n{first}defaults\n    mode http\n    timeout client 10s\n    timeout connect 5s\n    timeout server 10s\n\
             frontend fe\n    bind {bind}\n    option httplog\n    log udp@{} format rfc5424 local0\n    log udp@{} local0\n\
             \x20   log-format-sd [ex@1234\\ status=\\\"%ST\\\"\\ fe=\\\"%f\\\"]\\ \\ \n\
             \x20   http-request return status 200\n",
            rfc.local_addr().unwrap(),
            plain.local_addr().unwrap(),
        )
    };
    let udp = || {
        let s = UdpSocket::bind("127.0.0.1:0").unwrap();
        s.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
        s
    };
    let (rfc, plain) = (udp(), udp());
    let e = common::Ebb::start(&cfg("", "BIND", &rfc, &plain));
    assert_eq!(get(e.addrs[0], "/sd").status, 200);
    let want = "[ex@1234 status=\"200\" fe=\"fe\"] ";
    let l = recv_udp(&rfc);
    assert!(after_msgid(&l).starts_with(want), "{l}");
    assert!(l.ends_with("\"GET /sd HTTP/1.1\"\n"), "{l}");
    // Not in the other format's line.
    let l = recv_udp(&plain);
    assert!(!l.contains("ex@1234"), "{l}");
    // Without `log-format-sd`: `-`.
    let cfg_plain = cfg("", "BIND", &rfc, &plain).replace("log-format-sd", "#");
    let e2 = common::Ebb::start(&cfg_plain);
    assert_eq!(get(e2.addrs[0], "/nosd").status, 200);
    let l = recv_udp(&rfc);
    assert!(after_msgid(&l).starts_with("- "), "{l}");
    let _ = recv_udp(&plain);
    drop((e, e2));
    let (hrfc, hplain) = (udp(), udp());
    let Some((_h, addr)) = common::haproxy_beside("logsd", |sock, bind| {
        let first = format!("    stats socket {} level admin\n", sock.display());
        cfg(&first, bind, &hrfc, &hplain)
    }) else {
        return;
    };
    assert_eq!(get(addr, "/sd").status, 200);
    let l = recv_udp(&hrfc);
    assert!(after_msgid(&l).starts_with(want), "haproxy: {l}");
    let l = recv_udp(&hplain);
    assert!(!l.contains("ex@1234"), "haproxy: {l}");
}

/// The log-format flag `+E` writes a `\` before each `"`, `\` and `]` of a
/// field, after the `#XX` encoding of the request line and captures (which
/// leaves them no `"` of their own), and leaves `+Q`'s quotes as they are:
/// the line Debian's haproxy 2.6 writes for the same request.
#[test]
fn log_format_escape_flag_beside_haproxy() {
    let cfg = |first: &str, bind: &str, log: &UdpSocket| {
        format!(
            "global\n{first}defaults\n    mode http\n    timeout client 10s\n    timeout connect 5s\n    timeout server 10s\n\
             frontend fe\n    bind {bind}\n    log udp@{} format raw local0\n    capture request header x len 50\n\
             \x20   log-format \"A=%{{+E}}[capture.req.hdr(0)] B=%{{+E,+Q}}[var(txn.y)] C=%{{+E}}r E=%{{+E}}hr G=%{{+E,+Q}}b H=%{{+E}}[var(txn.none)] I=%{{-E}}r\"\n\
             \x20   http-request set-var(txn.y) req.hdr(y)\n    http-request return status 200\n",
            log.local_addr().unwrap(),
        )
    };
    let udp = || {
        let s = UdpSocket::bind("127.0.0.1:0").unwrap();
        s.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
        s
    };
    let req: &[u8] = b"GET /p\"a]\\q?x HTTP/1.1\r\nhost: a\r\nx: a\"b\\c]d\r\ny: \"]\r\n\r\n";
    let want = "A=a\\\"b\\\\c\\]d B=\"\\\"\\]\" C=GET /p#22a\\]\\\\q?x HTTP/1.1 E={a#22b\\\\c\\]d} G=\"fe\" H=- I=GET /p#22a]\\q?x HTTP/1.1\n";
    let log = udp();
    let e = common::Ebb::start(&cfg("", "BIND", &log));
    assert_eq!(common::raw(e.addrs[0], req).map(|r| r.status), Some(200));
    assert_eq!(recv_udp(&log), want);
    drop(e);
    let hlog = udp();
    let Some((_h, addr)) = common::haproxy_beside("logesc", |sock, bind| {
        let first = format!("    stats socket {} level admin\n", sock.display());
        cfg(&first, bind, &hlog)
    }) else {
        return;
    };
    assert_eq!(common::raw(addr, req).map(|r| r.status), Some(200));
    assert_eq!(recv_udp(&hlog), want, "haproxy");
}

/// Starts ebb, then haproxy when installed, on one configuration (`bind
/// BIND {bind_extra}`, the frontend's `fe_lines`, one rfc5424 target),
/// sends `send` on a connection to each and checks that the line after
/// the MSGID is `want` for both.
fn error_line_beside(name: &str, bind_extra: &str, fe_lines: &str, want: &str) {
    let cfg = |first: &str, bind: &str, rfc: &UdpSocket| {
        format!(
            "global\n{first}defaults\n    mode http\n    timeout client 10s\n    timeout connect 5s\n    timeout server 10s\n\
             frontend fe\n    bind {bind} {bind_extra}\n    log udp@{} format rfc5424 local0\n{fe_lines}\
             \x20   http-request return status 200\n",
            rfc.local_addr().unwrap(),
        )
    };
    let udp = || {
        let s = UdpSocket::bind("127.0.0.1:0").unwrap();
        s.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
        s
    };
    // Plaintext HTTP: not a TLS hello, not a PROXY header.
    let send = |a: std::net::SocketAddr| {
        let mut c = TcpStream::connect(a).unwrap();
        c.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
        c.write_all(b"GET / HTTP/1.1\r\nhost: x\r\n\r\n").unwrap();
        let mut b = Vec::new();
        let _ = c.read_to_end(&mut b);
    };
    let rfc = udp();
    let e = common::Ebb::start(&cfg("", "BIND", &rfc));
    send(e.addrs[0]);
    let l = recv_udp(&rfc);
    assert_eq!(after_msgid(&l), want, "{l}");
    drop(e);
    let hrfc = udp();
    let Some((_h, addr)) = common::haproxy_beside(name, |sock, bind| {
        let first = format!("    stats socket {} level admin\n", sock.display());
        cfg(&first, bind, &hrfc)
    }) else {
        return;
    };
    send(addr);
    let l = recv_udp(&hrfc);
    assert_eq!(after_msgid(&l), want, "haproxy: {l}");
}

/// `error-log-format` gives the line of a connection that failed before
/// any request (plaintext on a TLS port), with the structured data, as
/// HAProxy 2.6 (beside Debian's haproxy when installed).
#[test]
fn error_log_format_beside_haproxy() {
    let d = scratch("errlogfmt");
    let ck = rcgen::generate_simple_self_signed(vec!["localhost".to_string()]).unwrap();
    let pem = d.join("both.pem");
    std::fs::write(
        &pem,
        format!("{}{}", ck.cert.pem(), ck.key_pair.serialize_pem()),
    )
    .unwrap();
    // `%ST`: 0, no transaction carried the connection.
    error_line_beside(
        "errlogfmt",
        &format!("ssl crt {}", pem.display()),
        "    error-log-format \"%ci conn-error %f %tsc %r %B %U %ST\"\n    log-format-sd [ex@1\\ fe=\\\"%f\\\"]\n",
        "[ex@1 fe=\"fe\"] 127.0.0.1 conn-error fe PR-- <BADREQ> 0 0 0\n",
    );
}

/// `error-log-format` also gives the line of a connection whose PROXY
/// header is bad (`accept-proxy`), as HAProxy 2.6 (beside Debian's haproxy
/// when installed).
#[test]
fn error_log_format_for_a_bad_proxy_header_beside_haproxy() {
    error_line_beside(
        "errlogpp",
        "accept-proxy",
        "    error-log-format \"%ci conn-error %f %tsc %r\"\n",
        "- 127.0.0.1 conn-error fe PR-- <BADREQ>\n",
    );
}
