//! `resolvers` sections through the real binary, against a scripted DNS
//! server on loopback (`tests/dnsd.py`, Python's standard library only)
//! whose answers the tests rewrite while traffic flows: a server follows
//! its name's address, `server-template` fills and empties slots from SRV
//! records with their weights, `hold` periods keep a server through NX
//! answers and silence, and the CLI moves servers (`set server ... addr`,
//! `fqdn`) under load without a failed request. Where cheap, haproxy 2.6
//! runs the same configuration against the same DNS server and the
//! observable state is compared.

mod common;

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use common::dnsd::Dnsd;
use common::origin::{Mode, Origin};
use common::*;

/// Waits until ebb has logged `needle` `n` times.
fn wait_logged(e: &Ebb, needle: &str, n: usize) {
    wait_until(&format!("{n} x '{needle}'"), || {
        e.stderr
            .lock()
            .unwrap()
            .iter()
            .filter(|l| l.contains(needle))
            .count()
            >= n
    });
}

/// Waits until server `be/srv` has left resolution maintenance `n`
/// times. Its `changed its IP` line comes first (HAProxy's order too):
/// until this line, the server is still in maintenance and a request
/// gets 503 (a request sent right after the address line did).
fn wait_ready(e: &Ebb, srv: &str, n: usize) {
    wait_logged(
        e,
        &format!("Server be/{srv} administratively READY thanks to valid DNS answer"),
        n,
    );
}

fn a_zone(name: &str, ips: &[&str]) -> String {
    let ips: Vec<String> = ips.iter().map(|i| format!("\"{i}\"")).collect();
    format!(
        "{{\"names\": {{\"{name}\": {{\"A\": [{}]}}}}}}",
        ips.join(",")
    )
}

/// haproxy 2.6 on a configuration made for its directory (its stats
/// socket is `admin.sock` there); stopped when dropped.
struct Haproxy {
    child: Child,
    sock: PathBuf,
}

impl Haproxy {
    fn start(name: &str, cfg: impl FnOnce(&Path) -> String) -> Haproxy {
        let dir = scratch(name);
        // haproxy binds no port 0: a free one, on an address no ebb of
        // these tests listens on (haproxy binds with SO_REUSEPORT: on a
        // port an ebb took meanwhile, it would share that ebb's clients).
        let free = std::net::TcpListener::bind("127.0.0.5:0")
            .unwrap()
            .local_addr()
            .unwrap();
        let path = dir.join("h.cfg");
        std::fs::write(&path, cfg(&dir).replace("BIND", &free.to_string())).unwrap();
        let child = Command::new("haproxy")
            .arg("-f")
            .arg(&path)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        Haproxy {
            child,
            sock: dir.join("admin.sock"),
        }
    }
}

impl Drop for Haproxy {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// One origin on 127.0.0.2 and a DNS server that names it `app.test`.
fn origin_and_dns(dir: &Path) -> (Origin, Dnsd) {
    let o = Origin::start_on("127.0.0.2:0", "two", Mode::Ok);
    let dns = Dnsd::start(dir, &a_zone("app.test", &["127.0.0.2"]));
    (o, dns)
}

/// Two origins on 127.0.0.2 and 127.0.0.3 with the same port.
fn two_origins() -> (Origin, Origin, u16) {
    // The second origin binds the port itself: a probe closed before the
    // bind left the port to any other test's listener meanwhile.
    for _ in 0..50 {
        let o2 = Origin::start_on("127.0.0.2:0", "two", Mode::Ok);
        let port = o2.addr.port();
        if let Ok(o3) = Origin::try_start_on(&format!("127.0.0.3:{port}"), "three", Mode::Ok) {
            return (o2, o3, port);
        }
    }
    panic!("no common free port on 127.0.0.2 and 127.0.0.3");
}

fn config(dir: &Path, resolvers: &str, backend: &str) -> String {
    format!(
        "global\n    nbthread 2\n    stats socket {} level admin\n\
         {resolvers}\
         defaults\n    mode http\n    timeout client 10s\n    timeout server 10s\n    timeout connect 2s\n\
         frontend fe\n    bind BIND\n    http-request use-service prometheus-exporter if {{ path /metrics }}\n    default_backend be\n\
         {backend}",
        dir.join("admin.sock").display()
    )
}

fn sock(e: &Ebb, dir: &Path) -> PathBuf {
    let _ = e;
    dir.join("admin.sock")
}

/// The `show servers state` line of one server, split in fields.
fn state(sock: &Path, srv: &str) -> Vec<String> {
    let out = cli_cmd(sock, "show servers state");
    out.lines()
        .map(|l| l.split(' ').map(str::to_string).collect::<Vec<_>>())
        .find(|f| f.len() > 5 && f[3] == srv)
        .unwrap_or_else(|| panic!("no {srv} in {out}"))
}

/// `show stat` column `col` (0-based) of server `srv`.
fn stat(sock: &Path, srv: &str, col: usize) -> String {
    let out = cli_cmd(sock, "show stat");
    out.lines()
        .map(|l| l.split(',').map(str::to_string).collect::<Vec<_>>())
        .find(|f| f.len() > col && f[1] == srv)
        .map(|f| f[col].clone())
        .unwrap_or_else(|| panic!("no {srv} in {out}"))
}

/// Clients sending one request per connection until stopped; counts
/// answers that are not 200.
struct Load {
    stop: Arc<AtomicBool>,
    ok: Arc<AtomicUsize>,
    /// Answers each client got.
    each: Vec<Arc<AtomicUsize>>,
    failed: Arc<Mutex<Vec<String>>>,
    threads: Vec<std::thread::JoinHandle<()>>,
}

impl Load {
    fn start(a: SocketAddr, clients: usize) -> Load {
        let stop = Arc::new(AtomicBool::new(false));
        let ok = Arc::new(AtomicUsize::new(0));
        let failed = Arc::new(Mutex::new(Vec::new()));
        let each: Vec<Arc<AtomicUsize>> = (0..clients).map(|_| Arc::default()).collect();
        let threads = each
            .iter()
            .map(|mine| {
                let (stop, ok, failed) = (stop.clone(), ok.clone(), failed.clone());
                let mine = Arc::clone(mine);
                std::thread::spawn(move || {
                    while !stop.load(Ordering::Relaxed) {
                        match raw(a, b"GET / HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n") {
                            Some(r) if r.status == 200 => {
                                mine.fetch_add(1, Ordering::Relaxed);
                                ok.fetch_add(1, Ordering::Relaxed);
                            }
                            Some(r) => failed.lock().unwrap().push(format!("{}", r.status)),
                            None => failed.lock().unwrap().push("no answer".into()),
                        }
                    }
                })
            })
            .collect();
        Load {
            stop,
            ok,
            each,
            failed,
            threads,
        }
    }

    /// Waits until every client got two more answers: each one's request
    /// under way when called has ended, and a later one too.
    fn wait_each_twice(&self) {
        let base: Vec<usize> = self
            .each
            .iter()
            .map(|c| c.load(Ordering::Relaxed))
            .collect();
        wait_until("two answers on every client", || {
            self.each
                .iter()
                .zip(&base)
                .all(|(c, b)| c.load(Ordering::Relaxed) >= b + 2)
        });
    }

    fn wait_ok(&self, more: usize) {
        let base = self.ok.load(Ordering::Relaxed);
        wait_until("requests answered", || {
            self.ok.load(Ordering::Relaxed) >= base + more
        });
    }

    fn finish(self) -> (usize, Vec<String>) {
        self.stop.store(true, Ordering::Relaxed);
        for t in self.threads {
            t.join().unwrap();
        }
        let f = self.failed.lock().unwrap().clone();
        (self.ok.load(Ordering::Relaxed), f)
    }
}

/// After a move from `old` to `new`: requests started before it may still
/// end on `old`; after a few rounds nothing more goes there, `n` more
/// reach `new`, and no request failed.
fn moved_without_loss(load: Load, old: &Origin, new: &Origin, n: usize) {
    // Requests under way at the move may still end on the old address;
    // once each client has had one more, the count there must stay (a
    // total of 20 more answers was not enough: one client's request on
    // the old address could end after 20 of the others').
    load.wait_each_twice();
    let on_old = old.requests.load(Ordering::SeqCst);
    load.wait_ok(n);
    assert_eq!(
        old.requests.load(Ordering::SeqCst),
        on_old,
        "a new connection went to the old address"
    );
    assert!(new.requests.load(Ordering::SeqCst) >= n);
    let (ok, failed) = load.finish();
    assert!(
        failed.is_empty(),
        "{} failed of {ok}: {failed:?}",
        failed.len()
    );
}

#[test]
fn server_follows_its_address_while_traffic_flows() {
    if !have("python3") {
        return;
    }
    let dir = scratch("res-follow");
    let (o2, o3, port) = two_origins();
    let dns = Dnsd::start(&dir, &a_zone("app.test", &["127.0.0.2"]));
    let cfg = config(
        &dir,
        &format!(
            "resolvers dns\n    nameserver ns1 127.0.0.1:{}\n    hold valid 100ms\n    timeout retry 500ms\n",
            dns.port
        ),
        &format!(
            "backend be\n    server s1 app.test:{port} resolvers dns resolve-prefer ipv4 init-addr none\n"
        ),
    );
    let e = Ebb::start(&cfg);
    let sock = sock(&e, &dir);
    // init-addr none: in resolution maintenance until the first answer.
    e.wait_stderr(
        "be/s1 changed its IP from (none) to 127.0.0.2 by dns/ns1",
        Duration::from_secs(30),
    )
    .expect("first address applied");
    wait_ready(&e, "s1", 1);
    let load = Load::start(e.addr(), 4);
    wait_until("traffic on 127.0.0.2", || {
        o2.requests.load(Ordering::SeqCst) > 50
    });
    assert_eq!(o3.requests.load(Ordering::SeqCst), 0);
    dns.set(&a_zone("app.test", &["127.0.0.3"]));
    e.wait_stderr(
        "be/s1 changed its IP from 127.0.0.2 to 127.0.0.3 by dns/ns1",
        Duration::from_secs(30),
    )
    .expect("address change applied");
    moved_without_loss(load, &o2, &o3, 200);
    let st = state(&sock, "s1");
    assert_eq!(st[4], "127.0.0.3");
    assert_eq!(st[17], "app.test", "srv_fqdn");
    assert_eq!(st[18], port.to_string());
    let res = cli_cmd(&sock, "show resolvers");
    assert!(
        res.starts_with("Resolvers section dns\n nameserver ns1:\n  sent:"),
        "{res}"
    );
    let valid: u64 = res
        .lines()
        .find_map(|l| l.trim().strip_prefix("valid:"))
        .and_then(|v| v.trim().parse().ok())
        .unwrap();
    assert!(valid >= 2, "{res}");
    let m = get(e.addr(), "/metrics").text();
    let line = m
        .lines()
        .find(|l| l.starts_with("ebb_resolver_valid_total{resolvers=\"dns\",nameserver=\"ns1\"} "))
        .unwrap_or_else(|| panic!("{m}"));
    assert!(
        line.rsplit(' ')
            .next()
            .and_then(|v| v.parse::<f64>().ok())
            .unwrap()
            >= 2.0
    );
    assert!(cli_cmd(&sock, "show resolvers nope").contains("Can't find that resolvers section"));
}

#[test]
fn hold_keeps_a_server_through_nx_then_maintenance() {
    if !have("python3") {
        return;
    }
    let dir = scratch("res-hold");
    let (o, dns) = origin_and_dns(&dir);
    let port = o.addr.port();
    // The same name through two sections: `long` holds an NX answer for
    // ten minutes, `short` for 100 ms.
    let cfg = config(
        &dir,
        &format!(
            "resolvers long\n    nameserver ns1 127.0.0.1:{p}\n    hold valid 100ms\n    hold nx 600s\n    timeout resolve 100ms\n    timeout retry 500ms\n\
             resolvers short\n    nameserver ns1 127.0.0.1:{p}\n    hold valid 100ms\n    hold nx 100ms\n    timeout resolve 100ms\n    timeout retry 500ms\n",
            p = dns.port
        ),
        &format!(
            "backend be\n    server keep app.test:{port} resolvers long resolve-prefer ipv4 init-addr none\n    server drop app.test:{port} resolvers short resolve-prefer ipv4 init-addr none\n"
        ),
    );
    let e = Ebb::start(&cfg);
    let sock = sock(&e, &dir);
    for s in ["keep", "drop"] {
        e.wait_stderr(
            &format!("be/{s} changed its IP from (none) to 127.0.0.2"),
            Duration::from_secs(30),
        )
        .expect("resolved");
        wait_ready(&e, s, 1);
    }
    assert_eq!(stat(&sock, "keep", 17), "no check");
    dns.set("{\"names\": {}}");
    e.wait_stderr(
        "Server be/drop is going DOWN for maintenance (DNS NX status)",
        Duration::from_secs(30),
    )
    .expect("short hold expired");
    assert_eq!(stat(&sock, "drop", 17), "MAINT (resolution)");
    let st = state(&sock, "drop");
    assert_eq!(
        (st[4].as_str(), st[5].as_str(), st[6].as_str()),
        ("-", "0", "32"),
        "{st:?}"
    );
    // `keep` is within its hold: still in use, still its address.
    assert_eq!(stat(&sock, "keep", 17), "no check");
    assert_eq!(state(&sock, "keep")[4], "127.0.0.2");
    for _ in 0..20 {
        assert_eq!(get(e.addr(), "/").status, 200);
    }
    assert!(!e
        .stderr
        .lock()
        .unwrap()
        .iter()
        .any(|l| l.contains("be/keep is going DOWN")));
    // The name comes back: `drop` resolves again.
    dns.set(&a_zone("app.test", &["127.0.0.2"]));
    wait_logged(
        &e,
        "Server be/drop ('app.test') is UP/READY (resolves again)",
        2,
    );
    assert_eq!(stat(&sock, "drop", 17), "no check");
}

#[test]
fn silence_costs_retries_then_timeout_status() {
    if !have("python3") {
        return;
    }
    let dir = scratch("res-silent");
    let (o, dns) = origin_and_dns(&dir);
    let port = o.addr.port();
    let cfg = config(
        &dir,
        &format!(
            "resolvers dns\n    nameserver ns1 127.0.0.1:{}\n    resolve_retries 3\n    hold valid 100ms\n    hold timeout 100ms\n    timeout resolve 100ms\n    timeout retry 200ms\n",
            dns.port
        ),
        &format!("backend be\n    server s1 app.test:{port} resolvers dns resolve-prefer ipv4 init-addr none\n"),
    );
    let e = Ebb::start(&cfg);
    let sock = sock(&e, &dir);
    e.wait_stderr(
        "changed its IP from (none) to 127.0.0.2",
        Duration::from_secs(30),
    )
    .expect("resolved");
    dns.set("{\"silent\": true, \"names\": {}}");
    e.wait_stderr(
        "Server be/s1 is going DOWN for maintenance (DNS timeout status)",
        Duration::from_secs(30),
    )
    .expect("timeout status after the retries");
    let res = cli_cmd(&sock, "show resolvers dns");
    let field = |n: &str| -> u64 {
        res.lines()
            .find_map(|l| l.trim().strip_prefix(&format!("{n}:")))
            .and_then(|v| v.trim().parse().ok())
            .unwrap()
    };
    // One round of silence: resolve_retries queries, each unanswered.
    assert!(field("timeout") >= 3, "{res}");
    // The DNS server saw them: the preferred type, retried.
    dns.sync();
    assert!(dns.count("app.test A -> silent") >= 3);
    assert!(field("sent") >= field("valid") + 3, "{res}");
    assert_eq!(get(e.addr(), "/").status, 503);
    dns.set(&a_zone("app.test", &["127.0.0.2"]));
    wait_logged(&e, "is UP/READY (resolves again)", 2);
    wait_until("served again", || get(e.addr(), "/").status == 200);
}

const SRV2: &str = r#"{"names": {
  "_http._tcp.svc.test": {"SRV": [[0, 256, PORT, "a.svc.test"], [0, 768, PORT, "b.svc.test"]]},
  "a.svc.test": {"A": ["127.0.0.2"]}, "b.svc.test": {"A": ["127.0.0.3"]}}}"#;

#[test]
fn server_template_fills_slots_from_srv_with_weights() {
    if !have("python3") {
        return;
    }
    let dir = scratch("res-srv");
    let (o2, o3, port) = two_origins();
    let zone = SRV2.replace("PORT", &port.to_string());
    let dns = Dnsd::start(&dir, &zone);
    let resolvers = format!(
        "resolvers dns\n    nameserver ns1 127.0.0.1:{}\n    hold valid 100ms\n    timeout retry 500ms\n",
        dns.port
    );
    let backend = "backend be\n    balance roundrobin\n    server-template web 3 _http._tcp.svc.test resolvers dns init-addr none\n";
    let cfg = config(&dir, &resolvers, backend);
    let e = Ebb::start(&cfg);
    let sock = sock(&e, &dir);
    wait_until("two slots filled", || {
        e.stderr
            .lock()
            .unwrap()
            .iter()
            .filter(|l| l.contains("administratively READY"))
            .count()
            >= 2
    });
    // Weights 256 and 768 become 1 and 3 (HAProxy 2.6: (w + 255) / 256);
    // the third slot has no record.
    let mut rows: Vec<(String, String, String)> = ["web1", "web2", "web3"]
        .iter()
        .map(|s| (stat(&sock, s, 73), stat(&sock, s, 18), stat(&sock, s, 17)))
        .collect();
    rows.sort();
    let a = |ip: &str| format!("{ip}:{port}");
    assert_eq!(
        rows,
        vec![
            (String::new(), "1".into(), "MAINT (resolution)".into()),
            (a("127.0.0.2"), "1".into(), "no check".into()),
            (a("127.0.0.3"), "3".into(), "no check".into()),
        ]
    );
    // The split follows the weights: smooth round robin over 1 and 3.
    let (b2, b3) = (
        o2.requests.load(Ordering::SeqCst),
        o3.requests.load(Ordering::SeqCst),
    );
    for _ in 0..400 {
        assert_eq!(get(e.addr(), "/").status, 200);
    }
    let (n2, n3) = (
        o2.requests.load(Ordering::SeqCst) - b2,
        o3.requests.load(Ordering::SeqCst) - b3,
    );
    assert_eq!((n2, n3), (100, 300));

    // haproxy 2.6 on the same configuration and DNS server: the same
    // statuses, addresses and weights (slots may be filled in another
    // order).
    if have("haproxy") {
        let h = Haproxy::start("res-srv-ha", |d| config(d, &resolvers, backend));
        let hs = h.sock.clone();
        wait_until("haproxy filled its slots", || {
            hs.exists()
                && std::os::unix::net::UnixStream::connect(&hs).is_ok()
                && cli_cmd(&hs, "show stat").matches("no check").count() == 2
        });
        let mut hrows: Vec<(String, String, String)> = ["web1", "web2", "web3"]
            .iter()
            .map(|s| (stat(&hs, s, 73), stat(&hs, s, 18), stat(&hs, s, 17)))
            .collect();
        hrows.sort();
        drop(h);
        assert_eq!(rows, hrows, "ebb vs haproxy");
    }

    // One record leaves: its slot goes to maintenance (hold obsolete 0).
    dns.set(&zone.replace(&format!(", [0, 768, {port}, \"b.svc.test\"]"), ""));
    wait_until("slot emptied", || {
        cli_cmd(&sock, "show stat")
            .matches("MAINT (resolution)")
            .count()
            == 2
    });
    let b3 = o3.requests.load(Ordering::SeqCst);
    for _ in 0..50 {
        assert_eq!(get(e.addr(), "/").status, 200);
    }
    assert_eq!(
        o3.requests.load(Ordering::SeqCst),
        b3,
        "traffic to a removed record"
    );
    // A new record takes a free slot, through a target resolved on its own
    // (no additional record).
    dns.set(
        &r#"{"names": {
  "_http._tcp.svc.test": {"no_additional": true, "SRV": [[0, 256, PORT, "a.svc.test"], [0, 256, PORT, "c.svc.test"]]},
  "a.svc.test": {"A": ["127.0.0.2"]}, "c.svc.test": {"A": ["127.0.0.3"]}}}"#
            .replace("PORT", &port.to_string()),
    );
    wait_until("new record served", || {
        cli_cmd(&sock, "show servers state").contains(" c.svc.test ")
            && cli_cmd(&sock, "show stat")
                .matches("MAINT (resolution)")
                .count()
                == 1
    });
    wait_until("traffic to the new record", || {
        get(e.addr(), "/").status == 200 && o3.requests.load(Ordering::SeqCst) > b3
    });
}

#[test]
fn cli_moves_servers_under_load() {
    if !have("python3") {
        return;
    }
    let dir = scratch("res-cli");
    let (o2, o3, port) = two_origins();
    let dns = Dnsd::start(
        &dir,
        r#"{"names": {"one.test": {"A": ["127.0.0.2"]}, "other.test": {"A": ["127.0.0.3"]}}}"#,
    );
    let cfg = config(
        &dir,
        &format!(
            "resolvers dns\n    nameserver ns1 127.0.0.1:{}\n    hold valid 100ms\n",
            dns.port
        ),
        &format!(
            "backend be\n    server s1 one.test:{port} resolvers dns resolve-prefer ipv4\n    server s2 127.0.0.2:{port}\n"
        ),
    );
    let e = Ebb::start(&cfg);
    let sock = sock(&e, &dir);
    let load = Load::start(e.addr(), 4);
    load.wait_ok(100);
    // s2 has no resolvers: `set server addr` moves it for good.
    let out = cli_cmd(
        &sock,
        &format!("set server be/s2 addr 127.0.0.3 port {port}"),
    );
    assert_eq!(
        out,
        "IP changed from '127.0.0.2' to '127.0.0.3', no need to change the port by 'stats socket command'\n\n"
    );
    // s1 resolves another name from now on.
    let out = cli_cmd(&sock, "set server be/s1 fqdn other.test");
    assert_eq!(
        out,
        "be/s1 changed its FQDN from one.test to other.test by 'stats socket command'\n\n"
    );
    e.wait_stderr(
        "be/s1 changed its IP from 127.0.0.2 to 127.0.0.3",
        Duration::from_secs(30),
    )
    .expect("new name resolved");
    moved_without_loss(load, &o2, &o3, 300);
    assert_eq!(state(&sock, "s1")[17], "other.test");
    // Refusals, with HAProxy's texts where it has one.
    assert!(cli_cmd(&sock, "set server be/s2 fqdn x.test").contains("no resolution is configured"));
    assert!(
        cli_cmd(&sock, "set server be/s1 fqdn bad..name").contains("could not update be/s1 FQDN")
    );
    assert!(cli_cmd(&sock, "set server be/s1 addr nope").contains("Invalid addr"));
    assert!(cli_cmd(&sock, "set server be/s1 addr 127.0.0.3 port 0").contains("Invalid port"));
}

#[test]
fn configuration_errors_name_their_line() {
    let dir = scratch("res-cfg");
    let check = |body: &str, want: &str| {
        let p = dir.join("c.cfg");
        std::fs::write(&p, body).unwrap();
        let (code, out, err) = run_ebb(&["-c", "-f", p.to_str().unwrap()], &dir);
        assert_ne!(code, 0, "{body}");
        let all = format!("{out}{err}");
        assert!(all.contains(want), "{body}\n---\n{all}");
    };
    let be = "defaults\n    mode http\nfrontend fe\n    bind 127.0.0.1:0\n    default_backend be\nbackend be\n";
    check(
        &format!("resolvers dns\n    nameserver a tcp6@127.0.0.1:53\n{be}"),
        "c.cfg:2: nameserver 'tcp6@127.0.0.1:53': the address is not of the family",
    );
    check(
        &format!("resolvers dns\n    nameserver a 127.0.0.1\n{be}"),
        "c.cfg:2: nameserver '127.0.0.1': missing port",
    );
    check(
        &format!("resolvers dns\n    nameserver a 127.0.0.1:53\n    hold sometimes 1s\n{be}"),
        "c.cfg:3: unknown hold status 'sometimes'",
    );
    check(
        &format!(
            "resolvers dns\n    nameserver a 127.0.0.1:53\n    accepted_payload_size 100\n{be}"
        ),
        "c.cfg:3:",
    );
    check(
        &format!("resolvers dns\n{be}"),
        "c.cfg:1: resolvers 'dns' has no nameserver",
    );
    check(
        &format!("{be}    server s a.test:80 resolvers nope\n"),
        "c.cfg:7: server be/s: no resolvers section named 'nope'",
    );
    check(
        &format!("{be}    server-template s 2 _http._tcp.x.test\n"),
        "c.cfg:7: server be/s1: the SRV name '_http._tcp.x.test' needs 'resolvers NAME'",
    );
    check(
        &format!("resolvers dns\n    nameserver a 127.0.0.1:53\n{be}    server s a.test:80 resolvers dns resolve-net 10.0.0.0/8,nope\n"),
        "c.cfg:9: 'resolve-net' invalid network 'nope'.",
    );
    check(
        &format!("{be}    server s 127.0.0.1 check\n"),
        "c.cfg:7: server 's' has neither service port nor check port",
    );
    check(
        &format!("{be}    server s a.invalid:80 init-addr libc\n"),
        "c.cfg:7: server s: could not resolve address 'a.invalid'",
    );
}

/// `add server` / `del server` while clients keep coming: a new server
/// starts in maintenance, takes traffic once enabled, leaves only from
/// maintenance and without connections, and no request fails meanwhile.
/// haproxy 2.6 gives the same answers to the same commands.
#[test]
fn runtime_servers_added_and_deleted_under_load() {
    let dir = scratch("dyn");
    let (o2, o3, port) = two_origins();
    let gate = common::origin::Gate::default();
    let og = Origin::start_on("127.0.0.2:0", "gated", Mode::Gate(gate.clone()));
    let backends = format!(
        "backend be\n    balance roundrobin\n    server s1 127.0.0.2:{port}\n\
         backend gated\n    balance leastconn\n\
         backend st\n    balance source\n    server s1 127.0.0.2:{port}\n\
         backend tb\n    mode tcp\n    balance roundrobin\n"
    );
    let cfg = config(&dir, "", &backends).replace(
        "    default_backend be\n",
        "    use_backend gated if { path_beg /g }\n    default_backend be\n",
    );
    let e = Ebb::start(&cfg);
    let sock = sock(&e, &dir);

    // Answers that must be HAProxy's, compared with haproxy itself below.
    let refusals = [
        format!("add server st/s2 127.0.0.3:{port}"),
        format!("add server be/s1 127.0.0.3:{port}"),
        format!("add server be/x 127.0.0.3:{port} cookie c"),
        format!("add server be/x 127.0.0.3:{port} resolvers dns"),
        // The h2 mux is an HTTP one: refused in a tcp backend.
        format!("add server tb/x 127.0.0.3:{port} proto h2"),
        "add server be/x".to_string(),
        "del server be/s1".to_string(),
        "enable health be/s1".to_string(),
        "enable agent be/s1".to_string(),
    ];
    let ebb_answers: Vec<String> = refusals.iter().map(|c| cli_cmd(&sock, c)).collect();
    if have("haproxy") {
        let h = Haproxy::start("dyn-ha", |d| config(d, "", &backends));
        let hs = h.sock.clone();
        wait_until("haproxy up", || {
            std::os::unix::net::UnixStream::connect(&hs).is_ok()
        });
        let ha: Vec<String> = refusals.iter().map(|c| cli_cmd(&hs, c)).collect();
        drop(h);
        for ((c, a), b) in refusals.iter().zip(&ebb_answers).zip(&ha) {
            assert_eq!(a.trim_end(), b.trim_end(), "{c}: ebb vs haproxy");
        }
    }
    assert!(
        ebb_answers[0].contains("dynamic load balancing"),
        "{}",
        ebb_answers[0]
    );
    // HAProxy's refusal of a track on a server without checks (see
    // dynsrv.rs for the others, beside haproxy).
    assert!(cli_cmd(
        &sock,
        &format!("add server be/x 127.0.0.3:{port} track be/s1")
    )
    .contains("unable to use be/s1 for tracking as it does not have any check nor agent enabled."));

    let load = Load::start(e.addr(), 4);
    load.wait_ok(100);
    // A new server: registered in maintenance, no traffic yet.
    assert_eq!(
        cli_cmd(
            &sock,
            &format!("add server be/s2 127.0.0.3:{port} weight 2 check inter 100ms")
        ),
        "New server registered.\n\n"
    );
    assert_eq!(stat(&sock, "s2", 17), "MAINT");
    let st = state(&sock, "s2");
    assert_eq!(
        (st[4].as_str(), st[6].as_str(), st[7].as_str()),
        ("127.0.0.3", "1", "2")
    );
    // Its check is configured, not enabled (HAProxy's check state 2).
    assert_eq!(st[13], "2");
    load.wait_ok(100);
    assert_eq!(o3.requests.load(Ordering::SeqCst), 0);
    // In service: every thread picks it from its next request.
    assert_eq!(cli_cmd(&sock, "enable server be/s2"), "\n");
    assert_eq!(cli_cmd(&sock, "enable health be/s2"), "\n");
    // Configured and enabled (6), plus 1 while a check is under way
    // (HAProxy's CHK_ST_INPROGRESS: the first one may have started).
    let cst = state(&sock, "s2")[13].clone();
    assert!(cst == "6" || cst == "7", "{cst}");
    wait_until("traffic to s2", || o3.requests.load(Ordering::SeqCst) > 100);
    wait_until("s2 checked", || stat(&sock, "s2", 36) == "L4OK");
    assert_eq!(
        cli_cmd(&sock, "del server be/s2"),
        "Only servers in maintenance mode can be deleted.\n"
    );
    // Out: maintenance, then delete once its last stream ended.
    assert_eq!(cli_cmd(&sock, "disable server be/s2"), "\n");
    wait_until("s2 deleted", || {
        cli_cmd(&sock, "del server be/s2") == "Server deleted.\n"
    });
    let on_s2 = o3.requests.load(Ordering::SeqCst);
    load.wait_ok(200);
    assert_eq!(
        o3.requests.load(Ordering::SeqCst),
        on_s2,
        "traffic to a deleted server"
    );
    assert!(!cli_cmd(&sock, "show stat").contains("be,s2,"));
    assert!(!cli_cmd(&sock, "show servers state be").contains(" s2 "));
    assert_eq!(
        cli_cmd(&sock, "disable server be/s2"),
        "No such server.\n\n"
    );
    // The name is free again.
    assert_eq!(
        cli_cmd(&sock, &format!("add server be/s2 127.0.0.3:{port}")),
        "New server registered.\n\n"
    );
    let (ok, failed) = load.finish();
    assert!(
        failed.is_empty(),
        "{} failed of {ok}: {failed:?}",
        failed.len()
    );
    assert!(o2.requests.load(Ordering::SeqCst) > 0);

    // A server with a stream under way cannot be deleted.
    assert_eq!(
        cli_cmd(&sock, &format!("add server gated/g1 {}", og.addr)),
        "New server registered.\n\n"
    );
    assert_eq!(cli_cmd(&sock, "enable server gated/g1"), "\n");
    let a = e.addr();
    let pending = std::thread::spawn(move || get(a, "/g").status);
    wait_until("request held", || og.busy.load(Ordering::SeqCst) == 1);
    assert_eq!(cli_cmd(&sock, "disable server gated/g1"), "\n");
    assert_eq!(
        cli_cmd(&sock, "del server gated/g1"),
        "Server still has connections attached to it, cannot remove it.\n"
    );
    gate.open();
    assert_eq!(pending.join().unwrap(), 200);
    wait_until("g1 deleted", || {
        cli_cmd(&sock, "del server gated/g1") == "Server deleted.\n"
    });
    assert_eq!(get(e.addr(), "/g").status, 503);
}

/// A reload (SIGHUP) makes new server objects: within `hold valid` they
/// take the cached answer at once, without a query (`timeout resolve` of
/// ten minutes here: nothing else would give them an address).
#[test]
fn a_reload_gives_new_servers_the_cached_answer() {
    if !have("python3") {
        return;
    }
    let dir = scratch("res-reload");
    let (o, dns) = origin_and_dns(&dir);
    let port = o.addr.port();
    let cfg = config(
        &dir,
        &format!(
            "resolvers dns\n    nameserver ns1 127.0.0.1:{}\n    hold valid 600s\n    timeout resolve 600s\n",
            dns.port
        ),
        &format!(
            "backend be\n    server s1 app.test:{port} resolvers dns resolve-prefer ipv4 init-addr none\n"
        ),
    );
    let e = Ebb::start(&cfg);
    let sock = sock(&e, &dir);
    wait_logged(&e, "be/s1 changed its IP from (none) to 127.0.0.2", 1);
    wait_ready(&e, "s1", 1);
    assert_eq!(get(e.addr(), "/").status, 200);
    dns.sync();
    let queries = dns.count("app.test");
    e.signal("HUP");
    wait_logged(&e, "be/s1 changed its IP from (none) to 127.0.0.2", 2);
    wait_ready(&e, "s1", 2);
    assert_eq!(state(&sock, "s1")[4], "127.0.0.2");
    assert_eq!(get(e.addr(), "/").status, 200);
    dns.sync();
    assert_eq!(dns.count("app.test"), queries, "the cache served");
}

/// A `show resolvers` counter of one section's first nameserver.
fn counter(sock: &Path, section: &str, field: &str) -> u64 {
    let res = cli_cmd(sock, &format!("show resolvers {section}"));
    res.lines()
        .find_map(|l| l.trim().strip_prefix(&format!("{field}:")))
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or_else(|| panic!("no {field} in {res}"))
}

/// Forty addresses, the one on loopback last: an answer of 700 bytes,
/// more than the 512 of a default `accepted_payload_size`.
fn big_zone(port_note: &str) -> String {
    let mut ips: Vec<String> = (1..40).map(|i| format!("\"10.0.0.{i}\"")).collect();
    ips.push("\"127.0.0.2\"".into());
    format!(
        r#"{{"note": "{port_note}", "names": {{
  "big.test": {{"A": [{}]}},
  "tc.test": {{"A": ["127.0.0.2"], "tc": true}},
  "www.test": {{"CNAME": "app.test"}},
  "app.test": {{"A": ["127.0.0.2"]}},
  "dead.test": {{"CNAME": "nowhere.test"}}}}}}"#,
        ips.join(",")
    )
}

/// `nameserver tcp@`: queries over TCP (RFC 7766 framing, several on one
/// connection) get answers UDP cannot carry: a 700-byte answer (too big
/// for a 512-byte UDP section: dropped and counted `too_big`, HAProxy's
/// rule) and one a UDP server truncates (counted `truncated`). Aliases
/// count `cname`, an alias to nothing `cname_error`. `resolve-net` picks
/// the loopback address among forty. haproxy 2.6 on the same
/// configuration and DNS server gives the same addresses and counts.
#[test]
fn tcp_nameservers_big_answers_aliases_and_resolve_net() {
    if !have("python3") {
        return;
    }
    let dir = scratch("res-tcp");
    let (o, dns) = origin_and_dns(&dir);
    dns.set(&big_zone("v1"));
    let port = o.addr.port();
    let resolvers = format!(
        "resolvers tcpdns\n    nameserver ns1 tcp@127.0.0.1:{p}\n    accepted_payload_size 8192\n    hold valid 100ms\n    timeout resolve 200ms\n    timeout retry 1s\n\
         resolvers udpdns\n    nameserver ns1 127.0.0.1:{p}\n    hold valid 100ms\n    timeout resolve 200ms\n    timeout retry 1s\n",
        p = dns.port
    );
    let opts = "resolve-prefer ipv4 init-addr none";
    let backends = format!(
        "backend be\n    balance roundrobin\n\
         \x20   server big big.test:{port} resolvers tcpdns {opts} resolve-net 127.0.0.0/8\n\
         \x20   server www www.test:{port} resolvers tcpdns {opts}\n\
         \x20   server tc tc.test:{port} resolvers tcpdns {opts}\n\
         backend other\n\
         \x20   server ubig big.test:{port} resolvers udpdns {opts}\n\
         \x20   server utc tc.test:{port} resolvers udpdns {opts}\n\
         \x20   server dead dead.test:{port} resolvers udpdns {opts}\n"
    );
    let cfg = config(&dir, &resolvers, &backends);
    let e = Ebb::start(&cfg);
    let sock = sock(&e, &dir);
    for s in ["big", "www", "tc"] {
        e.wait_stderr(
            &format!("be/{s} changed its IP from (none) to 127.0.0.2 by tcpdns/ns1"),
            Duration::from_secs(30),
        )
        .unwrap_or_else(|| panic!("{s} resolved over TCP"));
        wait_ready(&e, s, 1);
    }
    dns.sync();
    assert!(dns.count("big.test A -> rcode 0, 40 answers (tcp)") >= 1);
    wait_until("UDP answers refused", || {
        counter(&sock, "udpdns", "too_big") >= 1
            && counter(&sock, "udpdns", "truncated") >= 1
            && counter(&sock, "udpdns", "cname_error") >= 1
    });
    // Over UDP neither name got an address.
    for s in ["ubig", "utc", "dead"] {
        assert_eq!(state(&sock, s)[4], "-", "{s}");
    }
    wait_until("more rounds over TCP", || {
        counter(&sock, "tcpdns", "valid") >= 6 && counter(&sock, "tcpdns", "cname") >= 2
    });
    assert_eq!(counter(&sock, "tcpdns", "too_big"), 0);
    assert_eq!(counter(&sock, "tcpdns", "truncated"), 0);
    for _ in 0..30 {
        assert_eq!(get(e.addr(), "/").status, 200);
    }
    let m = get(e.addr(), "/metrics").text();
    assert!(
        m.lines().any(|l| l
            .starts_with("ebb_resolver_too_big_total{resolvers=\"udpdns\",nameserver=\"ns1\"} ")
            && !l.ends_with(" 0")),
        "{m}"
    );
    // The alias' target moves: followed over TCP too.
    dns.set(&big_zone("v2").replace(
        "\"app.test\": {\"A\": [\"127.0.0.2\"]}",
        "\"app.test\": {\"A\": [\"127.0.0.3\"]}",
    ));
    e.wait_stderr(
        "be/www changed its IP from 127.0.0.2 to 127.0.0.3 by tcpdns/ns1",
        Duration::from_secs(30),
    )
    .expect("new alias followed");

    if have("haproxy") {
        dns.set(&big_zone("v3"));
        let h = Haproxy::start("res-tcp-ha", |d| config(d, &resolvers, &backends));
        let hs = h.sock.clone();
        wait_until("haproxy resolved and refused the same", || {
            hs.exists()
                && std::os::unix::net::UnixStream::connect(&hs).is_ok()
                && ["big", "www", "tc"]
                    .iter()
                    .all(|s| state(&hs, s)[4] == "127.0.0.2")
                && counter(&hs, "udpdns", "too_big") >= 1
                && counter(&hs, "udpdns", "truncated") >= 1
                && counter(&hs, "udpdns", "cname_error") >= 1
        });
        for s in ["ubig", "utc", "dead"] {
            assert_eq!(state(&hs, s)[4], "-", "haproxy {s}");
        }
    }
}

/// `add server` without a port (connections go to the port the client
/// connected to), server ids used again after `del server`, and no fixed
/// room for added servers; haproxy 2.6 answers the same and numbers the
/// same.
#[test]
fn runtime_servers_without_port_reused_ids_and_no_room_limit() {
    let dir = scratch("dyn-port");
    let backends = "backend be\n    balance roundrobin\n    server s1 127.0.0.9:1 disabled\n";
    let e = Ebb::start(&config(&dir, "", backends));
    let sock = sock(&e, &dir);
    // The origin listens on 127.0.0.2 at ebb's own port.
    let o = Origin::start_on(&format!("127.0.0.2:{}", e.addr().port()), "np", Mode::Ok);
    let cmds = [
        "add server be/np 127.0.0.2 check",
        "add server be/np 127.0.0.2",
        "add server be/s2 127.0.0.3:81",
        "add server be/s3 127.0.0.3:82",
        "del server be/s2",
        "add server be/s4 127.0.0.3:83",
        "add server be/s5 127.0.0.3:",
    ];
    let run = |sock: &Path| -> (Vec<String>, Vec<(String, String, String)>) {
        let answers = cmds
            .iter()
            .map(|c| {
                if c.starts_with("del ") {
                    cli_cmd(sock, &c.replace("del", "disable"));
                }
                cli_cmd(sock, c).trim_end().to_string()
            })
            .collect();
        let ids = ["s1", "np", "s3", "s4", "s5"]
            .iter()
            .map(|s| {
                let st = state(sock, s);
                (st[3].clone(), st[2].clone(), st[18].clone())
            })
            .collect();
        (answers, ids)
    };
    let (answers, ids) = run(&sock);
    assert_eq!(
        answers[0],
        "config: backend 'be': server 'np' has neither service port nor check port nor tcp_check rule 'connect' with port information."
    );
    assert_eq!(answers[1], "New server registered.");
    let id = |s: &str| ids.iter().find(|x| x.0 == s).unwrap().1.clone();
    // s2 had id 3, deleted: s4 takes it.
    assert_eq!(
        ["s1", "np", "s3", "s4", "s5"].map(id),
        ["1", "2", "4", "3", "5"]
    );
    assert_eq!(ids[1].2, "0", "no port of its own");
    if have("haproxy") {
        let h = Haproxy::start("dyn-port-ha", |d| config(d, "", backends));
        let hs = h.sock.clone();
        wait_until("haproxy up", || {
            std::os::unix::net::UnixStream::connect(&hs).is_ok()
        });
        let (ha, hids) = run(&hs);
        drop(h);
        assert_eq!(answers, ha, "ebb vs haproxy");
        assert_eq!(ids, hids, "ebb vs haproxy");
    }
    // In service: each request goes to 127.0.0.2 at the port the client
    // connected to.
    assert_eq!(cli_cmd(&sock, "enable server be/np"), "\n");
    for _ in 0..10 {
        assert_eq!(get(e.addr(), "/").status, 200);
    }
    assert_eq!(o.requests.load(Ordering::SeqCst), 10);
    // A port of its own moves it.
    let o2 = Origin::start_on("127.0.0.2:0", "own", Mode::Ok);
    cli_cmd(
        &sock,
        &format!("set server be/np addr 127.0.0.2 port {}", o2.addr.port()),
    );
    assert_eq!(get(e.addr(), "/").status, 200);
    assert_eq!(o2.requests.load(Ordering::SeqCst), 1);
    assert_eq!(o.requests.load(Ordering::SeqCst), 10);

    // Past the 1024 servers an earlier ebb had room for; the last one is
    // the origin's, and takes traffic once the others are out.
    for i in 0..1100 {
        let a = if i == 1099 {
            o2.addr.to_string()
        } else {
            format!("127.0.0.3:{}", 1000 + i)
        };
        assert_eq!(
            cli_cmd(&sock, &format!("add server be/m{i} {a}")),
            "New server registered.\n\n",
            "m{i}"
        );
    }
    assert_eq!(state(&sock, "m1099")[2], "1105");
    assert_eq!(cli_cmd(&sock, "disable server be/np"), "\n");
    assert_eq!(cli_cmd(&sock, "enable server be/m1099"), "\n");
    for _ in 0..5 {
        assert_eq!(get(e.addr(), "/").status, 200);
    }
    assert_eq!(o2.requests.load(Ordering::SeqCst), 6);
    assert_eq!(stat(&sock, "m1099", 17), "no check");
}
