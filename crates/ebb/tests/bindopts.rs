//! The bind options that shape a listener: `maxconn` (a listener's own
//! limit, the other connections waiting in the kernel's backlog), the
//! TCP socket options `mss`, `tcp-ut`, `tfo`, `transparent`,
//! `interface` and `namespace`, NetScaler's client IP insertion
//! (`accept-netscaler-cip`) and `expose-fd listeners`; each beside
//! HAProxy 2.6 where it can run the same configuration.

mod common;

use std::net::SocketAddr;
use std::path::Path;
use std::process::Command;

use common::*;

/// The listening sockets on `port` (one per thread): `(Recv-Q, Send-Q)`
/// of each, as `ss` shows a listener's (its accept queue and backlog).
fn listen_queues(port: u16) -> Vec<(u64, u64)> {
    let out = Command::new("ss")
        .args(["-Htln", &format!("sport = :{port}")])
        .output()
        .expect("run ss");
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|l| {
            let w: Vec<&str> = l.split_whitespace().collect();
            Some((w.get(1)?.parse().ok()?, w.get(2)?.parse().ok()?))
        })
        .collect()
}

/// A configuration's `global` section (admin socket `sock`, then
/// `global_more` lines) and an http `defaults` section with 30 s client
/// and server timeouts.
fn head(sock: &Path, global_more: &str) -> String {
    format!(
        "global\n    stats socket {} level admin\n{global_more}\
         defaults\n    mode http\n    timeout client 30s\n    timeout server 30s\n    timeout connect 5s\n",
        sock.display()
    )
}

/// A configuration for `-c` checks only: a frontend on 127.0.0.1:19880
/// with `opts` on its bind line.
fn check_cfg(opts: &str) -> String {
    format!(
        "defaults\n    mode http\n    timeout client 1s\n    timeout server 1s\n    timeout connect 1s\n\
         frontend f\n    bind 127.0.0.1:19880 {opts}\n    http-request return status 200\n"
    )
}

fn maxconn_cfg(sock: &Path, bind: &str) -> String {
    head(sock, "    nbthread 2\n")
        + &format!(
            "frontend f\n    option socket-stats\n    bind {bind} maxconn 2 name lim\n\
             \x20   http-request return status 200 content-type text/plain string ok\n"
        )
}

/// One run of the held-connections scenario on a proxy listening on
/// `addr` with admin socket `sock`: the listener row while two
/// connections hold its two places and a third waits in the backlog,
/// and once one of the two closed.
fn held_connections(sock: &Path, addr: SocketAddr) -> Vec<String> {
    let row = || {
        let r = stat_row(sock, "f", "lim");
        ["scur", "smax", "slim", "stot", "status"]
            .map(|k| format!("{k}={}", r.get(k).map_or("", String::as_str)))
            .join(" ")
    };
    let req = b"GET / HTTP/1.1\r\nHost: t\r\n\r\n";
    let mut held: Vec<Client> = (0..2)
        .map(|_| {
            let mut c = Client::connect(addr);
            c.send(req);
            assert_eq!(c.read_resp().status, 200);
            c
        })
        .collect();
    // Connected by the kernel, not accepted: it waits in the backlog.
    let mut third = Client::connect(addr);
    third.send(req);
    wait_until("the third connection in the accept queue", || {
        listen_queues(addr.port()).iter().map(|q| q.0).sum::<u64>() == 1
    });
    // The backlog is the bind's maxconn (no `backlog` set).
    assert!(
        listen_queues(addr.port()).iter().all(|q| q.1 == 2),
        "{:?}",
        listen_queues(addr.port())
    );
    let full = row();
    held.remove(0);
    assert_eq!(third.read_resp().status, 200);
    wait_until("the closed connection's place given back", || {
        stat_row(sock, "f", "lim").get("scur").map(String::as_str) == Some("2")
            && listen_queues(addr.port()).iter().all(|q| q.0 == 0)
    });
    vec![full, row()]
}

/// `bind ... maxconn 2`: two connections at once on the listener, a
/// third waits in the kernel's backlog until one closes; the listener's
/// row shows its limit and FULL meanwhile. Beside haproxy.
#[test]
fn maxconn_holds_connections_beyond_it_in_the_backlog() {
    let (e, sock) = ebb_with_admin("maxconn", maxconn_cfg);
    let ebb = held_connections(&sock, e.addr());
    assert_eq!(
        ebb,
        [
            "scur=2 smax=2 slim=2 stot=2 status=FULL",
            "scur=2 smax=2 slim=2 stot=3 status=FULL"
        ]
    );
    if let Some((h, addr)) = haproxy_beside("maxconn", maxconn_cfg) {
        assert_eq!(held_connections(&h.sock, addr), ebb, "haproxy");
    }
}

/// A listener without `maxconn` shows 0 as its limit (not its
/// frontend's), as HAProxy's rows do; bad values are refused.
#[test]
fn maxconn_values() {
    let cfg = |sock: &Path, bind: &str| {
        head(sock, "")
            + &format!(
                "frontend f\n    maxconn 5\n    option socket-stats\n    bind {bind} maxconn 0\n\
                 \x20   http-request return status 200\n"
            )
    };
    let pick = |sock: &Path| {
        let r = stat_row(sock, "f", "sock-1");
        (r["slim"].clone(), r["status"].clone())
    };
    let (_e, sock) = ebb_with_admin("maxconn0", cfg);
    let ebb = pick(&sock);
    assert_eq!(ebb, ("0".to_string(), "OPEN".to_string()));
    if let Some((h, _)) = haproxy_beside("maxconn0", cfg) {
        assert_eq!(pick(&h.sock), ebb, "haproxy");
    }
    let d = scratch("maxconn-bad");
    for (v, what) in [
        ("-1", "'maxconn' expects an integer"),
        ("", "expects a value"),
    ] {
        let text = check_cfg(&format!("maxconn {v}"));
        assert_refused(&d, "bad.cfg", &text, what, true);
    }
}

/// A frontend at its own `maxconn`: the listener a connection waits on
/// shows WAITING (HAProxy's LI_LIMITED), the idle one stays OPEN, and
/// neither is FULL (no bind line has a `maxconn`); the listener that
/// took the waiting connection, filling the frontend again, waits on
/// until a connection closes. Beside haproxy.
#[test]
fn a_full_frontend_leaves_its_listener_waiting() {
    let cfg = |sock: &Path, bind: &str| {
        let bind2 = if bind == "BIND" {
            "BIND".to_string()
        } else {
            format!("127.0.0.1:{}", free_port())
        };
        head(sock, "")
            + &format!(
                "frontend f\n    maxconn 1\n    option socket-stats\n    bind {bind}\n    bind {bind2}\n\
                 \x20   http-request return status 200\n"
            )
    };
    let run = |sock: &Path, addr: SocketAddr| {
        let mut a = Client::connect(addr);
        a.send(b"GET / HTTP/1.1\r\nHost: t\r\n\r\n");
        assert_eq!(a.read_resp().status, 200);
        let mut b = Client::connect(addr);
        b.send(b"GET / HTTP/1.1\r\nHost: t\r\n\r\n");
        let st = |l: &str| stat_row(sock, "f", l)["status"].clone();
        wait_until("the listener waiting", || st("sock-1") == "WAITING");
        let seen = (st("sock-1"), st("sock-2"));
        drop(a);
        assert_eq!(b.read_resp().status, 200);
        // Full again with the second: still waiting; open once it left.
        let again = st("sock-1");
        drop(b);
        wait_until("the listener open again", || st("sock-1") == "OPEN");
        (seen.0, seen.1, again)
    };
    let (e, sock) = ebb_with_admin("fewait", cfg);
    let ebb = run(&sock, e.addr());
    assert_eq!(ebb, ("WAITING".into(), "OPEN".into(), "WAITING".into()));
    if let Some((h, addr)) = haproxy_beside("fewait", cfg) {
        assert_eq!(run(&h.sock, addr), ebb, "haproxy");
    }
}

/// Per listening socket of process `pid`: its port, then `TCP_MAXSEG`,
/// `TCP_USER_TIMEOUT`, `TCP_FASTOPEN` (the queue), `IP_TRANSPARENT`,
/// `IP_FREEBIND` and `SO_BINDTODEVICE` ("-": none); per accepted
/// connection (`conn` first): its local port and `TCP_USER_TIMEOUT`.
/// None when they cannot be read.
fn sock_opts(pid: u32) -> Option<Vec<String>> {
    let mut v = proc_sockets(
        pid,
        r#"t = socket.IPPROTO_TCP
        if p is not None:
            print("conn", l[1], s.getsockopt(t, 18))
            continue
        o = [s.getsockopt(t, socket.TCP_MAXSEG), s.getsockopt(t, 18), s.getsockopt(t, 23),
             s.getsockopt(socket.SOL_IP, 19), s.getsockopt(socket.SOL_IP, 15)]
        dev = s.getsockopt(socket.SOL_SOCKET, 25, 16).rstrip(b"\0").decode() or "-"
        print(l[1], " ".join(map(str, o)), dev)"#,
    )?;
    v.sort();
    v.dedup();
    Some(v)
}

fn sockopt_cfg(sock: &Path, binds: [&str; 2]) -> String {
    head(sock, "    nbthread 1\n")
        + &format!(
            "frontend f\n    bind {} mss 1000 tcp-ut 3s tfo interface lo transparent backlog 64\n\
             \x20   bind {} mss -1000 tcp-ut 500us\n    http-request return status 200\n",
            binds[0], binds[1]
        )
}

/// The MSS a client connected to `a` was given (the listener's, less
/// the TCP options both sides use), after one exchange.
fn client_mss(a: SocketAddr) -> u32 {
    let mut c = Client::connect(a);
    c.send(b"GET / HTTP/1.1\r\nHost: t\r\n\r\n");
    assert_eq!(c.read_resp().status, 200);
    socket2::SockRef::from(&c.s).tcp_mss().unwrap()
}

/// `mss`, `tcp-ut`, `tfo`, `interface` and `transparent` as the listening
/// sockets hold them (`getsockopt` on the proxy's own descriptors), the
/// same in ebb as in haproxy: the MSS the line gives (a negative one is
/// not applied, as by HAProxy 2.6), the user timeout (inherited by the
/// accepted connections; part of a millisecond rounded up), fast open with the backlog as its queue, the
/// device and IP_TRANSPARENT (the tests run as root); a client's MSS
/// shows the one advertised.
#[test]
fn tcp_socket_options_as_haproxy_sets_them() {
    if !as_root() {
        eprintln!("SKIP: interface and transparent need root");
        return;
    }
    let run = |hap: bool| -> Option<(Vec<String>, [u32; 2])> {
        let (_keep, pid, addrs) = start_two("sockopts", hap, sockopt_cfg)?;
        let mss = [client_mss(addrs[0]), client_mss(addrs[1])];
        // A connection held open on the first: its user timeout.
        let mut c = Client::connect(addrs[0]);
        c.send(b"GET / HTTP/1.1\r\nHost: t\r\n\r\n");
        assert_eq!(c.read_resp().status, 200);
        let ports = [addrs[0].port().to_string(), addrs[1].port().to_string()];
        let mut opts: Vec<String> = sock_opts(pid)?
            .into_iter()
            .map(|l| {
                // Ports as the line's place: the two runs differ there.
                l.replace(&ports[0], "P0").replace(&ports[1], "P1")
            })
            .collect();
        // ebb keeps a duplicate of each listener (for a re-exec).
        opts.sort();
        opts.dedup();
        Some((opts, mss))
    };
    let Some((ebb, mss)) = run(false) else { return };
    assert_eq!(
        ebb,
        ["P0 1000 3000 64 1 0 lo", "P1 536 1 0 0 0 -", "conn P0 3000",],
        "ebb"
    );
    // The client's MSS: the 1000 advertised, less 12 bytes of
    // timestamps; the system's on loopback for the other.
    assert!(mss[0] <= 1000 && mss[1] > 1000, "{mss:?}");
    if let Some(h) = run(true) {
        assert_eq!(h, (ebb, mss), "haproxy");
    }
}

/// A named network namespace (`ip netns add`, root only) with its
/// loopback up, removed when dropped; None where it cannot be made.
struct Netns(String);

impl Netns {
    fn new(sysctls: &[&str]) -> Option<Netns> {
        static SEQ: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
        if !as_root() || !have("ip") {
            eprintln!("SKIP: named network namespaces need root and iproute2");
            return None;
        }
        let n = SEQ.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let ns = Netns(format!("ebb-bo-{}-{n}", std::process::id()));
        let ok = |c: &mut Command| c.status().is_ok_and(|s| s.success());
        if !ok(Command::new("ip").args(["netns", "add", &ns.0])) {
            eprintln!("SKIP: ip netns add is not allowed here");
            return None;
        }
        let mut setup = vec!["ip link set lo up".to_string()];
        setup.extend(sysctls.iter().map(|s| format!("sysctl -qw {s}")));
        for cmd in setup {
            let argv: Vec<&str> = cmd.split(' ').collect();
            assert!(ok(&mut ns.cmd(&argv)), "in {}: {cmd}", ns.0);
        }
        Some(ns)
    }

    /// A command run inside the namespace.
    fn cmd(&self, argv: &[&str]) -> Command {
        let mut c = Command::new("ip");
        c.args(["netns", "exec", &self.0]).args(argv);
        c
    }

    /// The status of a GET of `/` on `addr` from inside the namespace
    /// (curl's `000`: no answer).
    fn status_of(&self, addr: &str) -> String {
        let url = format!("http://{addr}/");
        let w = "%{http_code}";
        self.out(&[
            "curl",
            "-s",
            "-o",
            "/dev/null",
            "-w",
            w,
            "--max-time",
            "10",
            &url,
        ])
    }

    /// What a command run inside the namespace printed (stdout, trimmed).
    fn out(&self, argv: &[&str]) -> String {
        let o = self.cmd(argv).output().expect("ip netns exec");
        String::from_utf8_lossy(&o.stdout).trim().to_string()
    }
}

impl Drop for Netns {
    fn drop(&mut self) {
        let _ = Command::new("ip").args(["netns", "del", &self.0]).status();
    }
}

/// Starts ebb, and haproxy beside it when installed (`hap`), on the
/// configuration `cfg(socket, binds)` with two bind addresses: the admin
/// socket's process kept alive, its pid and the two addresses.
fn start_two(
    name: &str,
    hap: bool,
    cfg: impl Fn(&Path, [&str; 2]) -> String,
) -> Option<(Box<dyn std::any::Any>, u32, Vec<SocketAddr>)> {
    let sock = scratch(name).join("admin.sock");
    if hap {
        let binds = [0, 1].map(|_| format!("127.0.0.1:{}", free_port()));
        let text = cfg(&sock, [&binds[0], &binds[1]]);
        let h = haproxy_with(name, text.split_once("level admin\n")?.1)?;
        let addrs = binds.iter().map(|b| b.parse().unwrap()).collect();
        let pid = h.pid();
        Some((Box::new(h), pid, addrs))
    } else {
        let e = Ebb::start(&cfg(&sock, ["BIND", "BIND"]));
        let (pid, addrs) = (e.pid(), e.addrs.clone());
        Some((Box::new(e), pid, addrs))
    }
}

/// A client inside a namespace: a request sent with its SYN when the
/// kernel allows (`MSG_FASTOPEN`); prints the status and whether the
/// server took the SYN's data (TCPI_OPT_SYN_DATA of the client's
/// TCP_INFO).
const TFO_CLIENT: &str = r#"
import socket, struct, sys
s = socket.socket()
s.settimeout(20)
s.sendto(b"GET / HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n", socket.MSG_FASTOPEN,
         ("127.0.0.1", int(sys.argv[1])))
data = b""
while True:
    x = s.recv(4096)
    if not x:
        break
    data += x
info = s.getsockopt(socket.IPPROTO_TCP, socket.TCP_INFO, 104)
print(data.split(b" ")[1].decode(), 1 if struct.unpack_from("B", info, 5)[0] & 0x20 else 0)
"#;

/// `namespace NAME` and `tfo`: the listeners are made in the named
/// namespace (nothing listens on their ports outside it), and a client
/// there whose kernel sends data in the SYN without a cookie
/// (`net.ipv4.tcp_fastopen` 0x207, the namespace's own) has it taken by
/// the `tfo` listener only. Beside haproxy.
#[test]
fn namespace_and_tfo() {
    let Some(ns) = Netns::new(&["net.ipv4.tcp_fastopen=519"]) else {
        return;
    };
    let cfg = |sock: &Path, binds: [&str; 2]| {
        head(sock, "")
            + &format!(
                "frontend f\n    bind {} namespace {n} tfo\n    bind {} namespace {n}\n\
                 \x20   http-request return status 200\n",
                binds[0],
                binds[1],
                n = ns.0
            )
    };
    let run = |hap: bool| -> Option<Vec<String>> {
        let (_keep, _pid, addrs) = start_two("netns", hap, cfg)?;
        let mut seen = Vec::new();
        for a in &addrs {
            let port = a.port().to_string();
            // Listening inside, not outside.
            let ss = |out: String| out.lines().count();
            let inside = ns.out(&["ss", "-Htln", &format!("sport = :{port}")]);
            let outside = Command::new("ss")
                .args(["-Htln", &format!("sport = :{port}")])
                .output()
                .unwrap();
            assert_eq!(ss(String::from_utf8_lossy(&outside.stdout).into_owned()), 0);
            assert!(ss(inside) >= 1);
            seen.push(ns.out(&["python3", "-c", TFO_CLIENT, &port]));
        }
        Some(seen)
    };
    let ebb = run(false).unwrap();
    assert_eq!(ebb, ["200 1", "200 0"]);
    if let Some(h) = run(true) {
        assert_eq!(h, ebb, "haproxy");
    }
}

/// `interface NAME`: a listener bound to another interface (a bridge
/// with nothing on it) takes no
/// connection that came over the loopback (refused), one bound to `lo`
/// does; `transparent`: a listener binds an address that is not the
/// machine's (192.0.2.1, a documentation address, in a namespace of its
/// own that reaches nothing), which fails without it. Beside haproxy.
#[test]
fn interface_and_transparent() {
    let Some(ns) = Netns::new(&[]) else { return };
    let bridge = ns
        .cmd(&["ip", "link", "add", "d0", "type", "bridge"])
        .status();
    assert!(bridge.unwrap().success(), "ip link add d0 type bridge");
    let foreign = format!("192.0.2.1:{}", free_port());
    let cfg = |sock: &Path, binds: [&str; 2]| {
        head(sock, "")
            + &format!(
                "frontend f\n    bind {} namespace {n} interface d0\n    bind {} namespace {n} interface lo\n\
                 \x20   bind {foreign} namespace {n} transparent\n    http-request return status 200\n",
                binds[0],
                binds[1],
                n = ns.0
            )
    };
    let curl = |a: &SocketAddr| ns.status_of(&a.to_string());
    let run = |hap: bool| -> Option<Vec<String>> {
        let (_keep, _pid, addrs) = start_two("iface", hap, cfg)?;
        Some(vec![curl(&addrs[0]), curl(&addrs[1])])
    };
    let ebb = run(false).unwrap();
    // 000: curl's code for a refused connection.
    assert_eq!(ebb, ["000", "200"]);
    if let Some(h) = run(true) {
        assert_eq!(h, ebb, "haproxy");
    }
    // Without `transparent` the foreign address does not bind.
    let d = scratch("notransp");
    let text = format!(
        "defaults\n    mode http\n    timeout client 1s\n    timeout server 1s\n    timeout connect 1s\n\
         frontend f\n    bind {foreign} namespace {}\n    http-request return status 200\n",
        ns.0
    );
    std::fs::write(d.join("t.cfg"), &text).unwrap();
    let (rc, _, err) = run_ebb(&["-f", "t.cfg"], &d);
    assert_ne!(rc, 0);
    assert!(err.contains("t.cfg:7: cannot bind 192.0.2.1"), "{err}");
}

/// Bad values of the socket options are refused as by HAProxy; an
/// interface that cannot be bound to is a warning, the listener serving
/// on every interface (HAProxy's ERR_WARN).
#[test]
fn socket_option_values() {
    let d = scratch("sockopt-bad");
    for (opt, what) in [
        (
            "mss 0",
            "'mss' : expects an MSS with and absolute value between 1 and 65535",
        ),
        ("mss 65536", "between 1 and 65535"),
        ("mss -70000", "between 1 and 65535"),
        (
            "tcp-ut -1",
            "'tcp-ut' : expects a positive delay in milliseconds",
        ),
        (
            "namespace ebb-no-such-namespace",
            "Cannot open namespace 'ebb-no-such-namespace'.",
        ),
        ("interface", "bind option 'interface' expects a value"),
    ] {
        let text = check_cfg(opt);
        assert_refused(&d, "bad.cfg", &text, what, true);
    }
    let e = Ebb::start(
        "frontend f\n    mode http\n    bind BIND interface ebbnosuchdev mss 1000\n    http-request return status 200\n",
    );
    let w = e
        .wait_stderr("ebbnosuchdev", std::time::Duration::from_secs(30))
        .unwrap();
    assert!(
        w.ends_with(
            ":3: cannot bind receiver to device 'ebbnosuchdev' (No such device) for [127.0.0.1:0]"
        ),
        "{w}"
    );
    assert_eq!(get(e.addr(), "/").status, 200);
}

fn cip_cfg(sock: &Path, binds: [&str; 2]) -> String {
    head(sock, "    log stdout format raw local0\n")
        + &format!(
            "frontend f\n    log global\n    bind {} accept-netscaler-cip 1234\n\
             \x20   bind {} accept-proxy accept-netscaler-cip 1234\n\
             \x20   http-request return status 200 content-type text/plain lf-string \"%[src]:%[src_port] %[dst]:%[dst_port] %[fc_src]\"\n",
            binds[0], binds[1]
        )
}

/// What a proxy answers to `first` then a request on a new connection to
/// `a`: the answer's body, or "closed" when it closed without one.
fn cip_exchange(a: SocketAddr, first: &[u8]) -> String {
    let mut c = std::net::TcpStream::connect(a).unwrap();
    c.set_read_timeout(Some(std::time::Duration::from_secs(20)))
        .unwrap();
    let mut m = first.to_vec();
    m.extend_from_slice(b"GET / HTTP/1.1\r\nHost: h\r\nConnection: close\r\n\r\n");
    use std::io::{Read, Write};
    let _ = c.write_all(&m);
    let mut out = Vec::new();
    let _ = c.read_to_end(&mut out);
    let t = String::from_utf8_lossy(&out);
    match t.split_once("\r\n\r\n") {
        Some((_, body)) => body.to_string(),
        None => "closed".to_string(),
    }
}

/// `accept-netscaler-cip MAGIC`: the legacy and the standard form, over
/// IPv4 and IPv6, give the session the client's addresses (`src`,
/// `dst`; `fc_src` stays the socket's); a wrong magic or a header
/// carrying UDP closes the connection, logged; with `accept-proxy` on the
/// same line the NetScaler header comes first, then the PROXY header,
/// whose addresses win (HAProxy's handshake order). Beside haproxy.
#[test]
fn netscaler_client_ip_insertion() {
    use ebb::proxyproto::cip::encode;
    let s4: SocketAddr = "192.0.2.7:40000".parse().unwrap();
    let d4: SocketAddr = "198.51.100.1:443".parse().unwrap();
    let s6: SocketAddr = "[2001:db8::7]:40001".parse().unwrap();
    let d6: SocketAddr = "[2001:db8::1]:8443".parse().unwrap();
    let mut udp = encode(1234, false, s4, d4);
    udp[12 + 9] = 17;
    let mut pp = encode(1234, true, s6, d6);
    pp.extend_from_slice(b"PROXY TCP4 203.0.113.9 198.51.100.9 6000 80\r\n");
    let run = |hap: bool| -> Option<(Vec<String>, Option<String>)> {
        let (keep, _pid, addrs) = start_two("cip", hap, cip_cfg)?;
        let seen = vec![
            cip_exchange(addrs[0], &encode(1234, true, s4, d4)),
            cip_exchange(addrs[0], &encode(1234, false, s4, d4)),
            cip_exchange(addrs[0], &encode(1234, false, s6, d6)),
            cip_exchange(addrs[0], &encode(1235, false, s4, d4)),
            cip_exchange(addrs[0], &udp),
            cip_exchange(addrs[1], &pp),
        ];
        let logged = keep.downcast_ref::<Ebb>().map(|e| {
            e.wait_stdout("NetScaler", std::time::Duration::from_secs(30))
                .unwrap_or_default()
        });
        Some((seen, logged))
    };
    let (ebb, logged) = run(false).unwrap();
    assert_eq!(
        ebb,
        [
            "192.0.2.7:40000 198.51.100.1:443 127.0.0.1",
            "192.0.2.7:40000 198.51.100.1:443 127.0.0.1",
            "2001:db8::7:40001 2001:db8::1:8443 127.0.0.1",
            "closed",
            "closed",
            "203.0.113.9:6000 198.51.100.9:80 127.0.0.1",
        ]
    );
    let l = logged.unwrap();
    assert!(
        l.contains("Received an invalid NetScaler Client IP magic number: connection closed (accept-netscaler-cip)"),
        "{l}"
    );
    if let Some((h, _)) = run(true) {
        assert_eq!(h, ebb, "haproxy");
    }
}

/// A process killed when dropped.
struct Proc(std::process::Child);

impl Drop for Proc {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// The inodes of the sockets listening on `port` inside `ns`.
fn listen_inodes(ns: &Netns, port: u16) -> Vec<String> {
    let mut v: Vec<String> = ns
        .out(&["ss", "-Htlne", &format!("sport = :{port}")])
        .split_whitespace()
        .filter_map(|w| w.strip_prefix("ino:").map(String::from))
        .collect();
    v.sort();
    v
}

/// `expose-fd listeners` on a stats socket and `-x`, with sockets made
/// in a namespace and bound to an interface: `_getsocks` sends their
/// namespace and interface names and the new process matches them, so
/// the very socket (its inode) passes from haproxy to ebb and back from
/// ebb to haproxy, and serves throughout.
#[test]
fn getsocks_hands_namespaced_sockets_over_both_ways() {
    if !have("haproxy") {
        eprintln!("SKIP: haproxy is not installed");
        return;
    }
    let Some(ns) = Netns::new(&[]) else { return };
    let d = scratch("getsocks");
    let port = free_port();
    let cfg = |sock: &Path| {
        format!(
            "global\n    stats socket {} level admin expose-fd listeners\n    nbthread 1\n\
             defaults\n    mode http\n    timeout client 30s\n    timeout server 30s\n    timeout connect 5s\n\
             frontend f\n    bind 127.0.0.1:{port} namespace {} interface lo\n    http-request return status 200\n",
            sock.display(),
            ns.0
        )
    };
    let (hsock, esock) = (d.join("h.sock"), d.join("e.sock"));
    std::fs::write(d.join("h.cfg"), cfg(&hsock)).unwrap();
    std::fs::write(d.join("e.cfg"), cfg(&esock)).unwrap();
    let get = || ns.status_of(&format!("127.0.0.1:{port}"));
    let haproxy = |args: &[&str]| {
        let c = Command::new("haproxy")
            .args(["-db", "-f", d.join("h.cfg").to_str().unwrap()])
            .args(args)
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .unwrap();
        let p = Proc(c);
        wait_until("haproxy's socket", || {
            std::os::unix::net::UnixStream::connect(&hsock).is_ok()
                && cli_cmd(&hsock, "show info").contains(&format!("Pid: {}", p.0.id()))
        });
        p
    };
    // haproxy first, then ebb takes its socket.
    let mut h = haproxy(&[]);
    wait_until("haproxy serving", || get() == "200");
    let ino = listen_inodes(&ns, port);
    assert_eq!(ino.len(), 1, "{ino:?}");
    let hpid = h.0.id().to_string();
    let e = Ebb::start_args(
        &[
            "-x",
            hsock.to_str().unwrap(),
            "-sf",
            &hpid,
            "-f",
            d.join("e.cfg").to_str().unwrap(),
        ],
        d.clone(),
    );
    wait_until("haproxy gone", || h.0.try_wait().is_ok_and(|s| s.is_some()));
    assert_eq!(get(), "200");
    assert_eq!(
        listen_inodes(&ns, port),
        ino,
        "ebb made a socket of its own"
    );
    // Then haproxy takes it back from ebb.
    let epid = e.pid().to_string();
    let _h2 = haproxy(&["-x", esock.to_str().unwrap(), "-sf", &epid]);
    let mut e = e;
    assert!(e.wait_exit(std::time::Duration::from_secs(30)).is_some());
    assert_eq!(get(), "200");
    assert_eq!(
        listen_inodes(&ns, port),
        ino,
        "haproxy made a socket of its own"
    );
}

/// `expose-fd listeners` on a proxy's bind line: taken, as HAProxy 2.6
/// takes it (it means nothing there: only a stats socket answers
/// `_getsocks`); any other value refused in HAProxy's words.
#[test]
fn expose_fd_on_a_bind_line() {
    let d = scratch("exposefd");
    let text = |v: &str| check_cfg(&format!("expose-fd {v}"));
    std::fs::write(d.join("ok.cfg"), text("listeners")).unwrap();
    let (rc, _, err) = run_ebb(&["-c", "-f", "ok.cfg"], &d);
    assert_eq!(rc, 0, "{err}");
    assert!(!haproxy_refuses(&d.join("ok.cfg")).unwrap_or(false));
    assert_refused(
        &d,
        "bad.cfg",
        &text("all"),
        "'expose-fd' only supports 'listeners' (got 'all')",
        true,
    );
}
