//! The stats page and the Prometheus exporter through the real binary:
//! authentication, the `;csv`, `;norefresh`, `;up`, `;no-maint` modifiers
//! (the full suffix compared), admin actions allowed only where `stats
//! admin` says, the page rendered by headless Chromium (its DOM and a
//! screenshot), and the metrics parsed by Python's `prometheus_client`.

mod common;

use std::process::Command;
use std::sync::atomic::Ordering;
use std::time::Duration;

use common::origin::{Gate, Mode, Origin};
use common::*;

/// "admin:s3cret" in base64.
const AUTH: &str = "Basic YWRtaW46czNjcmV0";

fn page_cfg(a: &Origin, b: &Origin, c: &Origin) -> String {
    format!(
        "global\n    nbthread 2\n\
         defaults\n    mode http\n    timeout client 10s\n    timeout server 5s\n    timeout connect 1s\n\
         frontend fe\n    bind BIND\n    acl local src 127.0.0.1\n    acl never src 10.255.255.254\n\
         \x20   stats uri /stats\n    stats refresh 5s\n    stats auth admin:s3cret\n    stats realm ebb-test\n    stats admin if local\n\
         \x20   http-request use-service prometheus-exporter if {{ path /metrics }}\n    default_backend app\n\
         frontend ro\n    bind BIND\n    acl never src 10.255.255.254\n    stats uri /s/\n    stats admin if never\n    default_backend app\n\
         backend app\n    balance roundrobin\n    server a {} check inter 200ms\n    server b {} weight 3\n    server c {} disabled\n",
        a.addr, b.addr, c.addr
    )
}

/// A form POSTed to the page.
fn post(addr: std::net::SocketAddr, path: &str, auth: Option<&str>, body: &str) -> Resp {
    let mut c = Client::connect(addr);
    let a = auth
        .map(|a| format!("Authorization: {a}\r\n"))
        .unwrap_or_default();
    c.send(
        format!(
            "POST {path} HTTP/1.1\r\nHost: t\r\n{a}Content-Type: application/x-www-form-urlencoded\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
            body.len()
        )
        .as_bytes(),
    );
    c.read_resp()
}

fn req(addr: std::net::SocketAddr, path: &str, auth: Option<&str>) -> Resp {
    let mut c = Client::connect(addr);
    let a = auth
        .map(|a| format!("Authorization: {a}\r\n"))
        .unwrap_or_default();
    c.send(format!("GET {path} HTTP/1.1\r\nHost: t\r\n{a}Connection: close\r\n\r\n").as_bytes());
    c.read_resp()
}

#[test]
fn page_auth_modifiers_and_admin() {
    let a = Origin::start("a", Mode::Ok);
    let b = Origin::start("b", Mode::Ok);
    let c = Origin::start("c", Mode::Ok);
    let e = Ebb::start(&page_cfg(&a, &b, &c));
    let (main, ro) = (e.addrs[0], e.addrs[1]);
    for i in 0..8 {
        assert_eq!(get(main, &format!("/p{i}")).status, 200);
    }

    // Basic authentication.
    let r = req(main, "/stats", None);
    assert_eq!(r.status, 401);
    assert_eq!(
        r.header("www-authenticate"),
        Some("Basic realm=\"ebb-test\"")
    );
    let r = req(main, "/stats", Some("Basic YWRtaW46d3Jvbmc="));
    assert_eq!(r.status, 401);

    let r = req(main, "/stats", Some(AUTH));
    assert_eq!(r.status, 200);
    assert!(r.header("content-type").unwrap().starts_with("text/html"));
    let html = r.text();
    assert!(html.contains("<meta http-equiv=\"refresh\" content=\"5\">"));
    for needle in [
        "<h2>frontend fe</h2>",
        "<h2>backend app</h2>",
        ">FRONTEND<",
        ">BACKEND<",
        ">a<",
        ">b<",
        ">c<",
        ">MAINT<",
    ] {
        assert!(html.contains(needle), "{needle} missing");
    }
    // Admin forms, since `stats admin if local` holds for 127.0.0.1.
    assert!(html.contains("<input type=\"checkbox\" name=\"s\" value=\"a\">"));
    assert!(html.contains("<option value=\"maint\">"));

    // Modifiers.
    let r = req(main, "/stats;norefresh", Some(AUTH));
    assert!(!r.text().contains("http-equiv=\"refresh\""));
    let r = req(main, "/stats;csv", Some(AUTH));
    assert_eq!(r.status, 200);
    let csv = r.text();
    assert!(
        csv.starts_with("# pxname,svname,qcur,qmax,scur,smax,slim,stot,"),
        "{csv}"
    );
    let hdr: Vec<&str> = csv
        .lines()
        .next()
        .unwrap()
        .trim_start_matches("# ")
        .split(',')
        .collect();
    let col = |row: &str, name: &str| -> String {
        let i = hdr.iter().position(|h| *h == name).unwrap();
        csv.lines()
            .find(|l| l.starts_with(row))
            .unwrap()
            .split(',')
            .nth(i)
            .unwrap()
            .to_string()
    };
    assert_eq!(
        col("app,a,", "stot"),
        a.requests.load(Ordering::SeqCst).to_string()
    );
    assert_eq!(col("app,b,", "weight"), "3");
    assert_eq!(col("app,c,", "status"), "MAINT");
    assert_eq!(col("app,BACKEND,", "stot"), "8", "{csv}");
    // The frontend also answered the page twice (200) and refused it
    // twice (401).
    assert_eq!(col("fe,FRONTEND,", "hrsp_2xx"), "10");
    assert_eq!(col("fe,FRONTEND,", "hrsp_4xx"), "2");
    // As in HAProxy, the words are looked for anywhere after the URI.
    let r = req(main, "/stats/x;csvx", Some(AUTH));
    assert!(r.text().starts_with("# pxname,"), "{}", r.text());
    let r = req(main, "/stats?scope=APP;csv", Some(AUTH)).text();
    assert!(
        r.contains("\napp,BACKEND,") && !r.contains("\nfe,FRONTEND,"),
        "{r}"
    );
    let up = req(main, "/stats;up;norefresh", Some(AUTH)).text();
    assert!(
        up.contains(">a<") && up.contains(">b<") && !up.contains(">c<"),
        "{up}"
    );
    let nm = req(main, "/stats;no-maint", Some(AUTH)).text();
    assert!(nm.contains(">b<") && !nm.contains(">c<"));

    // Admin form: `hnolb` takes b out of load balancing (NOLB), `hrunn`
    // brings it back (it has no check: a's would end a NOLB at its next
    // pass, as HAProxy's).
    let b_status = || {
        let csv = req(main, "/stats;csv", Some(AUTH)).text();
        let l = csv
            .lines()
            .find(|l| l.starts_with("app,b,"))
            .unwrap_or("")
            .to_string();
        l.split(',').nth(17).unwrap_or("").to_string()
    };
    for (action, want) in [("hnolb", "NOLB"), ("hrunn", "no check")] {
        let r = post(
            main,
            "/stats",
            Some(AUTH),
            &format!("s=b&action={action}&b=app"),
        );
        assert_eq!(r.header("location"), Some("/stats;st=DONE"), "{action}");
        assert_eq!(b_status(), want, "{action}");
    }

    // Admin form: b to maint, then no traffic reaches b.
    let r = post(main, "/stats;up", Some(AUTH), "s=b&action=maint&b=app");
    assert_eq!(r.status, 303);
    assert_eq!(r.header("location"), Some("/stats;st=DONE;up"));
    let r = req(main, "/stats;st=DONE", Some(AUTH));
    assert!(r.text().contains("The action was done."), "{}", r.text());
    let b0 = b.requests.load(Ordering::SeqCst);
    for i in 0..6 {
        assert_eq!(get(main, &format!("/q{i}")).status, 200);
    }
    assert_eq!(b.requests.load(Ordering::SeqCst), b0);
    let r = post(main, "/stats", Some(AUTH), "s=nope&action=ready&b=app");
    assert_eq!(r.header("location"), Some("/stats;st=ERRP"));
    // A GET never acts.
    let r = req(main, "/stats?b=app&s=b&action=ready", Some(AUTH));
    assert_eq!(r.status, 200);
    let r = req(main, "/stats;csv", Some(AUTH)).text();
    assert!(r.contains("\napp,b,") && r.contains(",MAINT,"), "{r}");

    // The other frontend: no auth, admin refused by its condition.
    let r = req(ro, "/s/", None);
    assert_eq!(r.status, 200);
    assert!(!r.text().contains("type=\"checkbox\""));
    let r = post(ro, "/s/", None, "s=b&action=ready&b=app");
    assert_eq!(r.header("location"), Some("/s/;st=DENY"));
    assert_eq!(req(ro, "/s/;csv", None).status, 200);
    // A path past the stats URI is the page too.
    assert!(get(ro, "/s/other").text().contains("<h2>backend app</h2>"));
    let _ = Duration::ZERO;
}

/// Counts the pixels of an RGB colour in a PNG (decoded by the system
/// Python: zlib and the five PNG filters, no imaging library needed).
fn count_color(png: &std::path::Path, rgb: (u8, u8, u8)) -> usize {
    let script = r#"
import sys, zlib, struct
d = open(sys.argv[1], 'rb').read()
assert d[:8] == b'\x89PNG\r\n\x1a\n'
i = 8; idat = b''; w = h = 0
while i < len(d):
    n, t = struct.unpack('>I4s', d[i:i+8]); body = d[i+8:i+8+n]; i += 12 + n
    if t == b'IHDR': w, h, depth, ctype = struct.unpack('>IIBB', body[:10])
    elif t == b'IDAT': idat += body
bpp = {2: 3, 6: 4}[ctype]
raw = zlib.decompress(idat); stride = w * bpp; prev = bytearray(stride); out = 0
tr, tg, tb = int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4]); p = 0
for y in range(h):
    f = raw[p]; line = bytearray(raw[p+1:p+1+stride]); p += 1 + stride
    for x in range(stride):
        a = line[x-bpp] if x >= bpp else 0; b = prev[x]; c = prev[x-bpp] if x >= bpp else 0
        if f == 1: line[x] = (line[x] + a) & 255
        elif f == 2: line[x] = (line[x] + b) & 255
        elif f == 3: line[x] = (line[x] + (a + b) // 2) & 255
        elif f == 4:
            pa, pb, pc = abs(b - c), abs(a - c), abs(a + b - 2 * c)
            pr = a if pa <= pb and pa <= pc else (b if pb <= pc else c)
            line[x] = (line[x] + pr) & 255
    for x in range(0, stride, bpp):
        if abs(line[x]-tr) < 8 and abs(line[x+1]-tg) < 8 and abs(line[x+2]-tb) < 8: out += 1
    prev = line
print(out)
"#;
    let o = Command::new("python3")
        .args(["-c", script, png.to_str().unwrap()])
        .args([rgb.0.to_string(), rgb.1.to_string(), rgb.2.to_string()])
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    String::from_utf8_lossy(&o.stdout).trim().parse().unwrap()
}

#[test]
fn page_renders_in_headless_chromium() {
    let Some(bin) = chromium() else {
        eprintln!("SKIP page_renders_in_headless_chromium: chromium is not installed (Debian: apt-get install chromium)");
        return;
    };
    let a = Origin::start("a", Mode::Ok);
    let b = Origin::start("b", Mode::Ok);
    let c = Origin::start("c", Mode::Ok);
    let e = Ebb::start(&page_cfg(&a, &b, &c));
    let ro = e.addrs[1];
    for i in 0..5 {
        let _ = get(ro, &format!("/x{i}"));
    }
    let dir = scratch("chromium");
    let url = format!("http://{ro}/s/;norefresh");

    let o = chromium_cmd(bin, &dir.join("p1"))
        .arg("--dump-dom")
        .arg(&url)
        .output()
        .unwrap();
    let dom = String::from_utf8_lossy(&o.stdout);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    // The browser's DOM: two tables (frontend ro, backend app) with their
    // rows, parsed by Chromium's own HTML parser.
    assert_eq!(dom.matches("<table").count(), 3, "{dom}"); // fe, ro, app
    assert!(
        dom.contains("<tbody>"),
        "Chromium adds tbody to parsed tables: {dom}"
    );
    for row in [
        "<td class=\"n\">a</td>",
        "<td class=\"n\">b</td>",
        "<td class=\"n\">c</td>",
        "<td class=\"n\">BACKEND</td>",
    ] {
        assert!(dom.contains(row), "{row} not in {dom}");
    }
    assert!(dom.contains("<td class=\"st\">MAINT</td>"));

    let png = dir.join("stats.png");
    let o = chromium_cmd(bin, &dir.join("p2"))
        .arg(format!("--screenshot={}", png.display()))
        .arg("--window-size=1200,700")
        .arg(&url)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let data = std::fs::read(&png).unwrap();
    assert!(data.starts_with(b"\x89PNG\r\n\x1a\n"));
    assert!(
        data.len() > 10_000,
        "a blank page compresses far smaller: {} bytes",
        data.len()
    );
    // The tables' header rows are drawn in their blue (#20466b): three
    // header rows of at least 600 px x 15 px each.
    let blue = count_color(&png, (0x20, 0x46, 0x6b));
    assert!(blue > 3 * 600 * 15, "header blue pixels: {blue}");
    // And the MAINT cell's colour (#b7c9e6) is there.
    assert!(count_color(&png, (0xb7, 0xc9, 0xe6)) > 100);
    let _ = std::fs::remove_dir_all(&dir);
}

/// A Python with `prometheus_client` (the system one has it from the
/// Debian package even when another `python3` comes first on PATH).
fn python_with_prometheus() -> Option<&'static str> {
    ["python3", "/usr/bin/python3"].into_iter().find(|p| {
        Command::new(p)
            .args(["-c", "import prometheus_client.parser"])
            .output()
            .map(|o| o.status.success())
            .unwrap_or(false)
    })
}

#[test]
fn prometheus_metrics_parse_with_prometheus_client() {
    let a = Origin::start("a", Mode::Ok);
    let b = Origin::start("b", Mode::Ok);
    let c = Origin::start("c", Mode::Ok);
    let e = Ebb::start(&page_cfg(&a, &b, &c));
    let main = e.addrs[0];
    for i in 0..12 {
        assert_eq!(get(main, &format!("/m{i}")).status, 200);
    }
    assert_eq!(get(main, "/stats").status, 401);
    let r = get(main, "/metrics");
    assert_eq!(r.status, 200);
    assert_eq!(r.header("content-type"), Some("text/plain; version=0.0.4"));
    let text = r.text();
    // Checks without Python: the format's basics.
    assert!(text.contains("# TYPE haproxy_frontend_http_requests_total counter\n"));
    assert!(text.contains("haproxy_server_status{proxy=\"app\",server=\"c\",state=\"MAINT\"} 1\n"));
    // A server without a check has no check metrics but NaN counters.
    assert!(text.contains("haproxy_server_check_failures_total{proxy=\"app\",server=\"b\"} NaN\n"));
    assert!(text.contains("haproxy_server_check_failures_total{proxy=\"app\",server=\"a\"} 0\n"));
    assert!(!text.contains("haproxy_server_check_status{proxy=\"app\",server=\"b\""));

    let Some(py) = python_with_prometheus() else {
        eprintln!("SKIP prometheus_client parse: no Python with prometheus_client (Debian: apt-get install python3-prometheus-client)");
        return;
    };
    let script = r#"
import sys, json
from prometheus_client.parser import text_string_to_metric_families
fams = {}
for f in text_string_to_metric_families(sys.stdin.read()):
    fams[f.name] = {'type': f.type, 'samples': [[s.name, s.labels, s.value] for s in f.samples]}
print(json.dumps(fams))
"#;
    let mut child = Command::new(py)
        .args(["-c", script])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    {
        use std::io::Write;
        child
            .stdin
            .take()
            .unwrap()
            .write_all(text.as_bytes())
            .unwrap();
    }
    let o = child.wait_with_output().unwrap();
    assert!(
        o.status.success(),
        "parser refused the output: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    let out = String::from_utf8_lossy(&o.stdout).to_string();
    // Families (the parser strips `_total` from counter family names).
    for fam in [
        "\"haproxy_process_uptime_seconds\": {\"type\": \"gauge\"",
        "\"haproxy_frontend_http_requests\": {\"type\": \"counter\"",
        "\"haproxy_backend_sessions\": {\"type\": \"counter\"",
        "\"haproxy_server_current_sessions\": {\"type\": \"gauge\"",
        "\"haproxy_server_check_status\": {\"type\": \"gauge\"",
        "\"ebb_sched_loops\": {\"type\": \"counter\"",
    ] {
        assert!(out.contains(fam), "{fam} not in {out}");
    }
    // Values: 12 proxied requests answered 2xx, and one 401 for the page.
    assert!(
        out.contains(
            "[\"haproxy_backend_http_responses_total\", {\"proxy\": \"app\", \"code\": \"2xx\"}, 12.0]"
        ),
        "{out}"
    );
    assert!(
        out.contains(
            "[\"haproxy_frontend_http_responses_total\", {\"proxy\": \"fe\", \"code\": \"4xx\"}, 1.0]"
        ),
        "{out}"
    );
    let served = a.requests.load(Ordering::SeqCst);
    assert!(out.contains(&format!("[\"haproxy_server_sessions_total\", {{\"proxy\": \"app\", \"server\": \"a\"}}, {served}.0]")), "{out}");
    // Each server counts the responses it gave, by class.
    assert!(out.contains(&format!("[\"haproxy_server_http_responses_total\", {{\"proxy\": \"app\", \"server\": \"a\", \"code\": \"2xx\"}}, {served}.0]")), "{out}");
}

/// One configuration for ebb and HAProxy: listeners with statistics,
/// HTTP and TCP proxies, a backend with a stick table, a checked server,
/// a server in maintenance, a listen section without servers. `{fe}`...:
/// the bind addresses.
fn promex_cfg(binds: [&str; 3], a: &Origin, b: &Origin) -> String {
    format!(
        "defaults\n    mode http\n    timeout client 10s\n    timeout server 5s\n    timeout connect 1s\n    option socket-stats\n\
         listen stats\n    bind {}\n    http-request use-service prometheus-exporter if {{ path /metrics }}\n\
         frontend fe\n    bind {}\n    default_backend be\n\
         frontend tfe\n    mode tcp\n    bind {}\n    default_backend tbe\n\
         backend be\n    stick-table type ip size 1m expire 10s store http_req_rate(10s)\n\
         \x20   server s1 {a}\n    server s2 {b} check inter 100ms maxqueue 10 maxconn 12 pool-max-conn 42\n    server s3 {a} disabled\n\
         backend tbe\n    mode tcp\n    server t1 {a}\n",
        binds[0],
        binds[1],
        binds[2],
        a = a.addr,
        b = b.addr
    )
}

/// The series of an exposition: (name, labels) with `build_info`'s
/// version left out (the two programs differ there by design), and the
/// TYPE of each name.
type Series = std::collections::BTreeSet<(String, Vec<(String, String)>)>;

fn series(text: &str) -> (Series, std::collections::BTreeMap<String, String>) {
    let mut out = Series::new();
    let mut types = std::collections::BTreeMap::new();
    for l in text.lines() {
        if let Some(t) = l.strip_prefix("# TYPE ") {
            let (n, ty) = t.split_once(' ').unwrap();
            types.insert(n.to_string(), ty.to_string());
            continue;
        }
        if l.starts_with('#') || l.is_empty() {
            continue;
        }
        let end = l.find(['{', ' ']).unwrap();
        let name = l[..end].to_string();
        let mut labels = Vec::new();
        if l[end..].starts_with('{') {
            let body = &l[end + 1..l.rfind('}').unwrap()];
            let mut rest = body;
            while let Some((k, v)) = rest.split_once("=\"") {
                let close = v.find('"').unwrap();
                let k = k.trim_start_matches(',').to_string();
                let val = if name == "haproxy_process_build_info" {
                    String::new()
                } else {
                    v[..close].to_string()
                };
                labels.push((k, val));
                rest = &v[close + 1..];
            }
        }
        labels.sort();
        out.insert((name, labels));
    }
    (out, types)
}

#[test]
fn prometheus_metric_names_and_labels_are_haproxys() {
    let a = Origin::start("a", Mode::Ok);
    let b = Origin::start("b", Mode::Ok);
    let e = Ebb::start(&promex_cfg(["BIND", "BIND", "BIND"], &a, &b));
    let metrics = |addr: std::net::SocketAddr, q: &str| {
        // A chunked body comes decoded.
        let r = get(addr, &format!("/metrics{q}"));
        (r.status, r.text())
    };
    // Traffic on both, so every kind of series exists.
    assert_eq!(get(e.addrs[1], "/x").status, 200);
    // The check's duration is reported once a check ended.
    let done = "haproxy_server_check_duration_seconds{proxy=\"be\",server=\"s2\"}";
    wait_until("ebb's first check", || {
        metrics(e.addrs[0], "").1.contains(done)
    });
    let (st, all) = metrics(e.addrs[0], "");
    assert_eq!(st, 200);
    // ebb's values where HAProxy's are known: NaN without a check, a
    // maxqueue, a maxconn, a pool-max-conn; the states of every object.
    for line in [
        "haproxy_server_check_failures_total{proxy=\"be\",server=\"s1\"} NaN\n",
        "haproxy_server_queue_limit{proxy=\"be\",server=\"s2\"} 10\n",
        "haproxy_server_limit_sessions{proxy=\"be\",server=\"s1\"} NaN\n",
        "haproxy_server_idle_connections_limit{proxy=\"be\",server=\"s2\"} 42\n",
        "haproxy_backend_downtime_seconds_total{proxy=\"stats\"} NaN\n",
        "haproxy_backend_downtime_seconds_total{proxy=\"be\"} 0\n",
        "haproxy_server_status{proxy=\"be\",server=\"s3\",state=\"MAINT\"} 1\n",
        "haproxy_server_check_status{proxy=\"be\",server=\"s2\",state=\"L4OK\"} 1\n",
        "haproxy_listener_status{proxy=\"fe\",listener=\"sock-1\",state=\"OPEN\"} 1\n",
        "haproxy_listener_sessions_total{proxy=\"fe\",listener=\"sock-1\"} 1\n",
        "haproxy_backend_agg_server_status{proxy=\"be\",state=\"UP\"} 2\n",
        "haproxy_sticktable_size{name=\"be\",type=\"ip\"} 1048576\n",
        // Seconds since a stream was last handed over: -1 never.
        "haproxy_server_last_session_seconds{proxy=\"be\",server=\"s3\"} -1\n",
    ] {
        assert!(all.contains(line), "{line} not in:\n{all}");
    }
    let age = all
        .lines()
        .find_map(|l| l.strip_prefix("haproxy_backend_last_session_seconds{proxy=\"be\"} "))
        .and_then(|v| v.parse::<i64>().ok());
    assert!(age.is_some_and(|a| a >= 0), "{age:?}");
    // Each stream to a server either connects or reuses a connection.
    let mut k = Client::connect(e.addrs[1]);
    for p in ["/k1", "/k2"] {
        k.send(format!("GET {p} HTTP/1.1\r\nHost: h\r\n\r\n").as_bytes());
        assert_eq!(k.read_resp().status, 200);
    }
    let text = metrics(e.addrs[0], "?scope=backend").1;
    let be_val = |name: &str| {
        text.lines()
            .find_map(|l| l.strip_prefix(&format!("{name}{{proxy=\"be\"}} ")))
            .and_then(|v| v.parse::<u64>().ok())
            .unwrap_or_else(|| panic!("{name} not in {text}"))
    };
    let (connects, reuses) = (
        be_val("haproxy_backend_connection_attempts_total"),
        be_val("haproxy_backend_connection_reuses_total"),
    );
    assert!(
        connects >= 1 && connects + reuses == 3,
        "{connects} {reuses}"
    );
    // No HTTP metrics for the TCP proxies.
    assert!(!all.contains("haproxy_frontend_http_requests_total{proxy=\"tfe\"}"));
    assert!(!all.contains("haproxy_backend_http_responses_total{proxy=\"tbe\""));
    // The query string.
    assert_eq!(metrics(e.addrs[0], "?scope").0, 400);
    assert_eq!(metrics(e.addrs[0], "?scope=nothing").0, 400);
    assert_eq!(metrics(e.addrs[0], "?scope=").1, "");
    assert_eq!(metrics(e.addrs[0], "?scope=*&scope=").1, "");
    let only_srv = metrics(e.addrs[0], "?scope=&scope=server&no-maint").1;
    assert!(only_srv.contains("haproxy_server_status{proxy=\"be\",server=\"s2\""));
    assert!(!only_srv.contains("server=\"s3\""));
    assert!(!only_srv.contains("haproxy_backend_") && !only_srv.contains("ebb_"));

    let ports = [free_port(), free_port(), free_port()];
    let hb: Vec<String> = ports.iter().map(|p| format!("127.0.0.1:{p}")).collect();
    let Some(_h) = haproxy_with("promex", &promex_cfg([&hb[0], &hb[1], &hb[2]], &a, &b)) else {
        return;
    };
    let hs: std::net::SocketAddr = hb[0].parse().unwrap();
    let hf: std::net::SocketAddr = hb[1].parse().unwrap();
    wait_until("haproxy's listener", || {
        std::net::TcpStream::connect(hf).is_ok()
    });
    assert_eq!(get(hf, "/x").status, 200);
    wait_until("haproxy's first check", || metrics(hs, "").1.contains(done));
    for q in [
        "",
        "?scope=*",
        "?scope=global",
        "?scope=frontend",
        "?scope=listener",
        "?scope=backend",
        "?scope=server",
        "?scope=sticktable",
        "?scope=frontend&scope=backend",
        "?scope=server&no-maint",
        "?scope=",
    ] {
        let (hst, htext) = metrics(hs, q);
        let (est, etext) = metrics(e.addrs[0], q);
        assert_eq!((hst, est), (200, 200), "{q}");
        let (hset, htypes) = series(&htext);
        let (mut eset, etypes) = series(&etext);
        // ebb's own metrics come with the default scope and `*` only.
        let extras = q.is_empty() || q == "?scope=*";
        let ebb_own = eset.iter().filter(|(n, _)| n.starts_with("ebb_")).count();
        assert_eq!(ebb_own > 0, extras, "{q}");
        eset.retain(|(n, _)| !n.starts_with("ebb_"));
        let missing: Vec<_> = hset.difference(&eset).collect();
        let more: Vec<_> = eset.difference(&hset).collect();
        assert!(
            missing.is_empty() && more.is_empty(),
            "{q}: only HAProxy has {missing:?}; only ebb has {more:?}"
        );
        for (n, t) in &htypes {
            assert_eq!(etypes.get(n), Some(t), "{q}: the type of {n}");
        }
    }
}

/// `show stat`'s listener rows (type 3): `pxname,svname` of each.
fn listener_rows(csv: &str) -> Vec<String> {
    csv.lines()
        .filter(|l| l.split(',').nth(32) == Some("3"))
        .map(|l| l.split(',').take(2).collect::<Vec<_>>().join(","))
        .collect()
}

fn socket_stats_cfg(sock: &std::path::Path, binds: [&str; 3], a: &Origin) -> String {
    format!(
        "global\n    stats socket {} level admin\n\
         defaults\n    mode http\n    timeout client 10s\n    timeout server 5s\n    timeout connect 1s\n\
         listen stats\n    bind {}\n    http-request use-service prometheus-exporter if {{ path /metrics }}\n\
         frontend fe\n    option socket-stats\n    bind {}\n    bind {} name web2\n    default_backend be\n\
         backend be\n    server s1 {}\n",
        sock.display(),
        binds[0],
        binds[1],
        binds[2],
        a.addr
    )
}

#[test]
fn socket_stats_listeners_and_backend_state_history() {
    let a = Origin::start("a", Mode::Ok);
    let d = scratch("sockstats");
    let sock = d.join("admin.sock");
    let e = Ebb::start(&socket_stats_cfg(&sock, ["BIND", "BIND", "BIND"], &a));
    let (stats, l1, l2) = (e.addrs[0], e.addrs[1], e.addrs[2]);
    let metrics = || get(stats, "/metrics?scope=listener&scope=backend").text();
    let has = |line: &str| metrics().contains(line);

    // A connection counts on its listener while it is open.
    let mut c = Client::connect(l1);
    c.send(b"GET /a HTTP/1.1\r\nHost: h\r\n\r\n");
    assert_eq!(c.read_resp().status, 200);
    assert!(has(
        "haproxy_listener_current_sessions{proxy=\"fe\",listener=\"sock-1\"} 1\n"
    ));
    assert!(has(
        "haproxy_listener_sessions_total{proxy=\"fe\",listener=\"sock-1\"} 1\n"
    ));
    assert!(has(
        "haproxy_listener_current_sessions{proxy=\"fe\",listener=\"web2\"} 0\n"
    ));
    assert_eq!(get(l2, "/b").status, 200);
    assert!(has(
        "haproxy_listener_sessions_total{proxy=\"fe\",listener=\"web2\"} 1\n"
    ));
    drop(c);
    wait_until("the listener's count to drop", || {
        has("haproxy_listener_current_sessions{proxy=\"fe\",listener=\"sock-1\"} 0\n")
    });
    assert!(has(
        "haproxy_listener_max_sessions{proxy=\"fe\",listener=\"sock-1\"} 1\n"
    ));
    assert!(has(
        "haproxy_listener_status{proxy=\"fe\",listener=\"sock-1\",state=\"OPEN\"} 1\n"
    ));
    // The frontend without the option has no listener rows.
    assert!(!metrics().contains("proxy=\"stats\",listener"));
    let rows = listener_rows(&cli_cmd(&sock, "show stat"));
    assert_eq!(rows, ["fe,sock-1", "fe,web2"]);

    // The backend goes down with its last server, and up again.
    assert!(has("haproxy_backend_check_up_down_total{proxy=\"be\"} 0\n"));
    cli_cmd(&sock, "disable server be/s1");
    assert!(has(
        "haproxy_backend_status{proxy=\"be\",state=\"DOWN\"} 1\n"
    ));
    assert!(has("haproxy_backend_check_up_down_total{proxy=\"be\"} 1\n"));
    assert!(has(
        "haproxy_backend_agg_server_status{proxy=\"be\",state=\"MAINT\"} 1\n"
    ));
    cli_cmd(&sock, "enable server be/s1");
    assert!(has("haproxy_backend_status{proxy=\"be\",state=\"UP\"} 1\n"));
    assert!(has("haproxy_backend_check_up_down_total{proxy=\"be\"} 1\n"));

    // A reload starts new counters, which the listeners then count on.
    e.signal("HUP");
    assert!(e
        .wait_stderr("configuration reloaded", Duration::from_secs(20))
        .is_some());
    assert!(has(
        "haproxy_listener_sessions_total{proxy=\"fe\",listener=\"sock-1\"} 0\n"
    ));
    assert_eq!(get(l1, "/c").status, 200);
    assert!(has(
        "haproxy_listener_sessions_total{proxy=\"fe\",listener=\"sock-1\"} 1\n"
    ));

    // HAProxy lists the same listener rows.
    let hd = scratch("sockstats-h");
    let hsock = hd.join("h.sock");
    let ports = [free_port(), free_port(), free_port()];
    let hb: Vec<String> = ports.iter().map(|p| format!("127.0.0.1:{p}")).collect();
    let cfg = socket_stats_cfg(&hsock, [&hb[0], &hb[1], &hb[2]], &a);
    let rest = cfg.split_once("level admin\n").unwrap().1;
    let Some(h) = haproxy_with("sockstats", rest) else {
        return;
    };
    assert_eq!(listener_rows(&cli_cmd(&h.sock, "show stat")), rows);
}

/// A test server on loopback: `f` handles each connection in turn, which
/// closes after it.
fn serve_each(f: impl Fn(&mut std::net::TcpStream) + Send + 'static) -> std::net::SocketAddr {
    let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = l.local_addr().unwrap();
    std::thread::spawn(move || {
        for s in l.incoming() {
            let Ok(mut s) = s else { return };
            f(&mut s);
        }
    });
    addr
}

/// An origin that answers a head announcing 100 bytes, sends 3 and
/// closes (the server aborts while the body passes: `SD`).
fn cutting_origin() -> std::net::SocketAddr {
    use std::io::Write;
    serve_each(|s| {
        let mut buf = [0u8; 4096];
        let mut got = Vec::new();
        while !got.windows(4).any(|w| w == b"\r\n\r\n") {
            match s.read_retry(&mut buf) {
                Ok(0) | Err(_) => break,
                Ok(n) => got.extend_from_slice(&buf[..n]),
            }
        }
        let _ = s.write_all(b"HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\nabc");
    })
}

/// A frontend sending `/slow` to a server answering after 300 ms and
/// `/cut` to one closing mid-body, and the exporter.
fn times_cfg(bind: &str, metrics: &str, slow: &Origin, cut: std::net::SocketAddr) -> String {
    format!(
        "defaults\n    mode http\n    timeout client 10s\n    timeout server 10s\n    timeout connect 5s\n\
         frontend stats\n    bind {metrics}\n    http-request use-service prometheus-exporter\n\
         frontend fe\n    bind {bind}\n    use_backend cut if {{ path /cut }}\n    default_backend slow\n\
         backend slow\n    server s {}\n\
         backend cut\n    server c {cut}\n",
        slow.addr
    )
}

/// The exporter's time averages and maxima and the aborts: what HAProxy
/// prints (floats with six decimals), where ebb used to print NaN.
fn check_times(name: &str, text: &str) {
    let val = |metric: &str| -> String {
        text.lines()
            .find_map(|l| l.strip_prefix(&format!("{metric} ")))
            .unwrap_or_else(|| panic!("{name}: {metric} not in:\n{text}"))
            .to_string()
    };
    // The averages are over a window of 1024 streams even after one
    // (HAProxy 2.6's exporter): 300 ms once is 0.001 s; the maxima are
    // the 300 ms.
    let secs = |m: &str| -> f64 {
        let v = val(m);
        let (_, frac) = v.split_once('.').unwrap_or(("", ""));
        assert_eq!(frac.len(), 6, "{name}: {m} {v}");
        v.parse().unwrap()
    };
    let (avg, max, short) = (0.001..0.03, 0.3..30.0, 0.0..0.3);
    for (m, range) in [
        (
            "haproxy_backend_response_time_average_seconds{proxy=\"slow\"}",
            &avg,
        ),
        (
            "haproxy_server_response_time_average_seconds{proxy=\"slow\",server=\"s\"}",
            &avg,
        ),
        (
            "haproxy_backend_total_time_average_seconds{proxy=\"slow\"}",
            &avg,
        ),
        (
            "haproxy_backend_max_response_time_seconds{proxy=\"slow\"}",
            &max,
        ),
        (
            "haproxy_server_max_response_time_seconds{proxy=\"slow\",server=\"s\"}",
            &max,
        ),
        (
            "haproxy_server_max_total_time_seconds{proxy=\"slow\",server=\"s\"}",
            &max,
        ),
        (
            "haproxy_backend_queue_time_average_seconds{proxy=\"slow\"}",
            &short,
        ),
        (
            "haproxy_server_max_queue_time_seconds{proxy=\"slow\",server=\"s\"}",
            &short,
        ),
        (
            "haproxy_backend_connect_time_average_seconds{proxy=\"slow\"}",
            &short,
        ),
    ] {
        let s = secs(m);
        assert!(range.contains(&s), "{name}: {m} {s}");
    }
    for (m, want) in [
        ("haproxy_backend_server_aborts_total{proxy=\"cut\"}", "1"),
        (
            "haproxy_server_server_aborts_total{proxy=\"cut\",server=\"c\"}",
            "1",
        ),
        ("haproxy_backend_client_aborts_total{proxy=\"cut\"}", "0"),
        ("haproxy_backend_server_aborts_total{proxy=\"slow\"}", "0"),
        (
            "haproxy_server_client_aborts_total{proxy=\"slow\",server=\"s\"}",
            "0",
        ),
    ] {
        assert_eq!(val(m), want, "{name}: {m}");
    }
}

/// Exercises the two backends through `fe`, then reads the exporter.
fn times_seen(fe: std::net::SocketAddr, metrics: std::net::SocketAddr) -> String {
    assert_eq!(get(fe, "/slow").status, 200);
    // The answer is cut: the client sees the head, then the close.
    let mut c = Client::connect(fe);
    c.send(b"GET /cut HTTP/1.1\r\nHost: t\r\n\r\n");
    let _ = c.read_resp_opt(false);
    let srv_abort = "haproxy_backend_server_aborts_total{proxy=\"cut\"} 1\n";
    // HAProxy adds a stream's times when the stream is freed, which may
    // come after the next exchange's counters: both are waited for.
    let slow_zero = "haproxy_backend_response_time_average_seconds{proxy=\"slow\"} 0.000000\n";
    let mut text = String::new();
    wait_until("the cut exchange and the slow one's times counted", || {
        text = String::from_utf8_lossy(&get(metrics, "/metrics").body).into_owned();
        text.contains(srv_abort) && !text.contains(slow_zero)
    });
    text
}

#[test]
fn prometheus_time_averages_and_aborts_have_values() {
    let slow = Origin::start("slow", Mode::Slow(Duration::from_millis(300)));
    let cut = cutting_origin();
    let e = Ebb::start(&times_cfg("BIND", "BIND", &slow, cut));
    // Listeners come in configuration order: the exporter first.
    check_times("ebb", &times_seen(e.addrs[1], e.addrs[0]));
    on_haproxy_exporter(
        "promex-times",
        |b, m| times_cfg(b, m, &slow, cut),
        |fe, m| check_times("haproxy", &times_seen(fe, m)),
    );
}

/// Runs `run` on HAProxy (when installed) started on the configuration
/// `cfg` makes for a frontend and an exporter address, once it listens.
fn on_haproxy_exporter(
    name: &str,
    cfg: impl Fn(&str, &str) -> String,
    run: impl FnOnce(std::net::SocketAddr, std::net::SocketAddr),
) {
    let (fe, m): (std::net::SocketAddr, std::net::SocketAddr) = (
        format!("127.0.0.1:{}", free_port()).parse().unwrap(),
        format!("127.0.0.1:{}", free_port()).parse().unwrap(),
    );
    if let Some(_h) = haproxy_with(name, &cfg(&fe.to_string(), &m.to_string())) {
        // Its listeners are all bound before it serves: the exporter's
        // answering says the frontend's is there too, and the tests' own
        // frontend takes no probe connection (HAProxy counts one as a
        // failed request).
        wait_until("haproxy's listener", || {
            std::net::TcpStream::connect(m).is_ok()
        });
        run(fe, m);
    }
}

/// A frontend compressing what `be` answers (`origin`), and the exporter.
fn comp_cfg(bind: &str, metrics: &str, origin: &Origin) -> String {
    format!(
        "defaults\n    mode http\n    timeout client 10s\n    timeout server 10s\n    timeout connect 5s\n\
         frontend stats\n    bind {metrics}\n    http-request use-service prometheus-exporter\n\
         frontend fe\n    bind {bind}\n    default_backend be\n\
         backend be\n    compression algo gzip\n    server o {}\n",
        origin.addr
    )
}

/// Two answers compressed, one not (no Accept-Encoding): the exporter's
/// compression counters of the frontend and the backend.
fn comp_seen(fe: std::net::SocketAddr, metrics: std::net::SocketAddr) -> Vec<(String, u64)> {
    for gz in [true, true, false] {
        let mut c = Client::connect(fe);
        let ae = if gz { "Accept-Encoding: gzip\r\n" } else { "" };
        c.send(format!("GET /abc HTTP/1.1\r\nHost: t\r\n{ae}Connection: close\r\n\r\n").as_bytes());
        let r = c.read_resp();
        assert_eq!(r.status, 200);
        assert_eq!(r.header("content-encoding").is_some(), gz);
    }
    let text = String::from_utf8_lossy(&get(metrics, "/metrics").body).into_owned();
    let mut out = Vec::new();
    for scope in ["frontend", "backend"] {
        let px = if scope == "frontend" { "fe" } else { "be" };
        for m in ["in", "out", "bypassed"] {
            let name = format!("haproxy_{scope}_http_comp_bytes_{m}_total{{proxy=\"{px}\"}}");
            out.push((name.clone(), metric_u64(&text, &name)));
        }
        let name = format!("haproxy_{scope}_http_comp_responses_total{{proxy=\"{px}\"}}");
        out.push((name.clone(), metric_u64(&text, &name)));
    }
    out
}

/// The exporter's `haproxy_frontend_NAME{proxy="fe"}` values.
fn fe_values<const N: usize>(metrics: std::net::SocketAddr, names: [&str; N]) -> [u64; N] {
    let text = String::from_utf8_lossy(&get(metrics, "/metrics").body).into_owned();
    names.map(|n| metric_u64(&text, &format!("haproxy_frontend_{n}{{proxy=\"fe\"}}")))
}

fn metric_u64(text: &str, name: &str) -> u64 {
    text.lines()
        .find_map(|l| l.strip_prefix(&format!("{name} ")))
        .and_then(|v| v.parse().ok())
        .unwrap_or_else(|| panic!("{name} not a number in:\n{text}"))
}

#[test]
fn prometheus_compression_counters_have_values() {
    let o = Origin::start("o", Mode::Ok);
    // What the origin answers to GET /abc.
    let body_len = "o /abc".len() as u64;
    let check = |name: &str, seen: &[(String, u64)]| {
        for (m, v) in seen {
            let ok = if m.contains("bytes_in") {
                *v == 2 * body_len
            } else if m.contains("bytes_out") {
                *v > 0
            } else if m.contains("bypassed") {
                *v == 0
            } else {
                *v == 2
            };
            assert!(ok, "{name}: {m} {v}");
        }
    };
    let e = Ebb::start(&comp_cfg("BIND", "BIND", &o));
    check("ebb", &comp_seen(e.addrs[1], e.addrs[0]));
    on_haproxy_exporter(
        "promex-comp",
        |b, m| comp_cfg(b, m, &o),
        |fe, m| check("haproxy", &comp_seen(fe, m)),
    );
}

/// A frontend with a cache in front of `be`, and the exporter; `rules`
/// go first in the frontend.
fn cache_cfg(bind: &str, metrics: &str, origin: &Origin, rules: &str) -> String {
    format!(
        "defaults\n    mode http\n    timeout client 10s\n    timeout server 10s\n    timeout connect 5s\n\
         cache c\n    total-max-size 4\n    max-age 60\n\
         frontend stats\n    bind {metrics}\n    http-request use-service prometheus-exporter\n\
         frontend fe\n    bind {bind}\n{rules}    http-request cache-use c\n    http-response cache-store c\n    default_backend be\n\
         backend be\n    http-request set-method \"B AD\" if {{ path_beg /be }}\n    http-response set-header cache-control max-age=60\n    server o {}\n",
        origin.addr
    )
}

/// Three GETs of one path: a lookup each, two hits (the first answer is
/// stored).
fn cache_seen(fe: std::net::SocketAddr, metrics: std::net::SocketAddr) -> [u64; 2] {
    for _ in 0..3 {
        assert_eq!(get(fe, "/a").status, 200);
    }
    fe_values(
        metrics,
        ["http_cache_lookups_total", "http_cache_hits_total"],
    )
}

#[test]
fn prometheus_cache_and_rewrite_counters_have_values() {
    let o = Origin::start("o", Mode::Ok);
    let e = Ebb::start(&cache_cfg("BIND", "BIND", &o, ""));
    assert_eq!(cache_seen(e.addrs[1], e.addrs[0]), [3, 2]);
    on_haproxy_exporter(
        "promex-cache",
        |b, m| cache_cfg(b, m, &o, ""),
        |fe, m| assert_eq!(cache_seen(fe, m), [3, 2], "haproxy"),
    );
    // Failed rewrites: a rewrite leaving no valid request (ebb's 500 in
    // strict mode, an internal error; ignored when off), counted on the
    // frontend, and on the backend for the backend's rule.
    let rules = "    http-request strict-mode off if { path_beg /lax }\n    http-request set-method \"B AD\" if { path_beg /lax } || { path_beg /strict }\n";
    let e = Ebb::start(&cache_cfg("BIND", "BIND", &o, rules));
    for (path, status) in [("/strict", 500), ("/lax", 200), ("/be", 500)] {
        assert_eq!(get(e.addrs[1], path).status, status, "{path}");
    }
    let text = String::from_utf8_lossy(&get(e.addrs[0], "/metrics").body).into_owned();
    for (m, want) in [
        (
            "haproxy_frontend_failed_header_rewriting_total{proxy=\"fe\"}",
            3,
        ),
        ("haproxy_frontend_internal_errors_total{proxy=\"fe\"}", 2),
        (
            "haproxy_backend_failed_header_rewriting_total{proxy=\"be\"}",
            1,
        ),
        ("haproxy_backend_internal_errors_total{proxy=\"be\"}", 1),
        // A server's count its response rules (HAProxy's): none fail.
        (
            "haproxy_server_failed_header_rewriting_total{proxy=\"be\",server=\"o\"}",
            0,
        ),
        (
            "haproxy_server_internal_errors_total{proxy=\"be\",server=\"o\"}",
            0,
        ),
    ] {
        assert_eq!(metric_u64(&text, m), want, "{m}");
    }
}

/// A `mode tcp` proxy to a server that answers 300 ms after the client's
/// bytes and closes, and the exporter.
fn tcp_times_cfg(bind: &str, metrics: &str, server: std::net::SocketAddr) -> String {
    format!(
        "defaults\n    timeout client 10s\n    timeout server 10s\n    timeout connect 5s\n\
         frontend stats\n    mode http\n    bind {metrics}\n    http-request use-service prometheus-exporter\n\
         listen t\n    mode tcp\n    bind {bind}\n    server s {server}\n"
    )
}

fn tcp_times_seen(fe: std::net::SocketAddr, metrics: std::net::SocketAddr) -> [f64; 2] {
    use std::io::{Read, Write};
    let mut c = std::net::TcpStream::connect(fe).unwrap();
    c.write_all(b"ping").unwrap();
    let mut got = Vec::new();
    let _ = c.read_to_end(&mut got);
    assert_eq!(got, b"pong");
    // The client closes its side too: the session ends.
    drop(c);
    let name = "haproxy_backend_max_total_time_seconds{proxy=\"t\"}";
    let text_of = || String::from_utf8_lossy(&get(metrics, "/metrics").body).into_owned();
    // The session ends in the proxy just after the client closed.
    let mut text = text_of();
    wait_until("the session counted", || {
        text = text_of();
        text.lines()
            .find_map(|l| l.strip_prefix(&format!("{name} ")))
            .is_some_and(|v| v != "0.000000")
    });
    let secs = |m: &str| -> f64 {
        text.lines()
            .find_map(|l| l.strip_prefix(&format!("{m} ")))
            .and_then(|v| v.parse().ok())
            .unwrap_or_else(|| panic!("{m} not a number in:\n{text}"))
    };
    [
        secs(name),
        secs("haproxy_server_total_time_average_seconds{proxy=\"t\",server=\"s\"}"),
    ]
}

#[test]
fn prometheus_tcp_session_times_have_values() {
    use std::io::{Read, Write};
    let server = serve_each(|s| {
        let mut b = [0u8; 4];
        let _ = s.read_exact(&mut b);
        std::thread::sleep(Duration::from_millis(300));
        let _ = s.write_all(b"pong");
    });
    let check = |name: &str, [max, avg]: [f64; 2]| {
        assert!((0.3..30.0).contains(&max), "{name}: max {max}");
        // Over a window of 1024 sessions (HAProxy 2.6's exporter).
        assert!((0.001..0.03).contains(&avg), "{name}: avg {avg}");
    };
    let e = Ebb::start(&tcp_times_cfg("BIND", "BIND", server));
    check("ebb", tcp_times_seen(e.addrs[1], e.addrs[0]));
    on_haproxy_exporter(
        "promex-tcp-times",
        |b, m| tcp_times_cfg(b, m, server),
        |fe, m| check("haproxy", tcp_times_seen(fe, m)),
    );
}

/// A frontend answering some requests itself, the others going to
/// `origin`; and the exporter.
fn intercept_cfg(bind: &str, metrics: &str, origin: &Origin) -> String {
    format!(
        "defaults\n    mode http\n    timeout client 10s\n    timeout server 10s\n    timeout connect 5s\n\
         frontend stats\n    bind {metrics}\n    http-request use-service prometheus-exporter\n\
         frontend fe\n    bind {bind}\n    monitor-uri /mon\n\
         \x20   http-request return status 200 if {{ path /ret }}\n\
         \x20   http-request redirect location /x if {{ path /r }}\n    default_backend be\n\
         backend be\n    http-request return status 201 if {{ path /bret }}\n    server o {}\n",
        origin.addr
    )
}

/// The frontends' `intercepted_requests_total` after a `return`, a
/// `redirect` and `monitor-uri` in the frontend, a backend's `return`
/// and a proxied request: (fe, the exporter's own frontend).
fn intercept_seen(fe: std::net::SocketAddr, metrics: std::net::SocketAddr) -> (u64, u64) {
    for (path, status) in [
        ("/ret", 200),
        ("/r", 302),
        ("/mon", 200),
        ("/bret", 201),
        ("/x", 200),
    ] {
        assert_eq!(get(fe, path).status, status, "{path}");
    }
    let text = String::from_utf8_lossy(&get(metrics, "/metrics").body).into_owned();
    (
        metric_u64(
            &text,
            "haproxy_frontend_intercepted_requests_total{proxy=\"fe\"}",
        ),
        metric_u64(
            &text,
            "haproxy_frontend_intercepted_requests_total{proxy=\"stats\"}",
        ),
    )
}

#[test]
fn prometheus_intercepted_requests_have_values() {
    let o = Origin::start("o", Mode::Ok);
    let e = Ebb::start(&intercept_cfg("BIND", "BIND", &o));
    // The exporter's request counts itself, as HAProxy's.
    assert_eq!(intercept_seen(e.addrs[1], e.addrs[0]), (3, 1));
    on_haproxy_exporter(
        "promex-intercepted",
        |b, m| intercept_cfg(b, m, &o),
        |fe, m| assert_eq!(intercept_seen(fe, m), (3, 1), "haproxy"),
    );
}

/// A frontend refusing 127.0.0.2 by a connection rule and 127.0.0.3 by a
/// session rule, and the exporter.
fn denied_cfg(bind: &str, metrics: &str) -> String {
    format!(
        "defaults\n    mode http\n    timeout client 10s\n    timeout server 10s\n    timeout connect 5s\n\
         frontend stats\n    bind {metrics}\n    http-request use-service prometheus-exporter\n\
         frontend fe\n    bind {bind}\n\
         \x20   tcp-request connection reject if {{ src 127.0.0.2 }}\n\
         \x20   tcp-request session reject if {{ src 127.0.0.3 }}\n\
         \x20   http-request return status 200\n"
    )
}

/// One refused connection from each source, one served: the frontend's
/// (denied connections, denied sessions).
fn denied_seen(fe: std::net::SocketAddr, metrics: std::net::SocketAddr) -> (u64, u64) {
    for src in ["127.0.0.2", "127.0.0.3"] {
        let mut c = connect_from(src, fe);
        // A close, or a reset (HAProxy's).
        let mut b = [0u8; 16];
        let r = c.s.read_retry(&mut b);
        assert!(
            matches!(&r, Ok(0))
                || matches!(&r, Err(e) if e.kind() == std::io::ErrorKind::ConnectionReset),
            "{src} refused by {fe}: {r:?}"
        );
    }
    assert_eq!(get(fe, "/").status, 200);
    let [conn, sess] = fe_values(
        metrics,
        ["denied_connections_total", "denied_sessions_total"],
    );
    (conn, sess)
}

#[test]
fn prometheus_denied_connections_and_sessions_have_values() {
    let e = Ebb::start(&denied_cfg("BIND", "BIND"));
    assert_eq!(denied_seen(e.addrs[1], e.addrs[0]), (1, 1));
    on_haproxy_exporter("promex-denied", denied_cfg, |fe, m| {
        assert_eq!(denied_seen(fe, m), (1, 1), "haproxy")
    });
}

/// A backend whose one server takes one request at a time, and the
/// exporter.
fn queue_cfg(bind: &str, metrics: &str, origin: &Origin) -> String {
    format!(
        "defaults\n    mode http\n    timeout client 30s\n    timeout server 30s\n    timeout connect 5s\n    timeout queue 30s\n\
         frontend stats\n    bind {metrics}\n    http-request use-service prometheus-exporter\n\
         frontend fe\n    bind {bind}\n    default_backend be\n\
         backend be\n    server s {} maxconn 1\n",
        origin.addr
    )
}

/// Two requests at once on a gated origin: the second waits in the
/// backend's queue until the gate opens. The (backend, server)
/// `max_queue` after.
fn queue_seen(fe: std::net::SocketAddr, metrics: std::net::SocketAddr, gate: &Gate) -> [u64; 2] {
    let clients: Vec<_> = (0..2)
        .map(|_| std::thread::spawn(move || get(fe, "/q").status))
        .collect();
    let text = || String::from_utf8_lossy(&get(metrics, "/metrics").body).into_owned();
    wait_until("a request queued", || {
        text().contains("haproxy_backend_current_queue{proxy=\"be\"} 1\n")
    });
    gate.open();
    for c in clients {
        assert_eq!(c.join().unwrap(), 200);
    }
    let t = text();
    [
        metric_u64(&t, "haproxy_backend_max_queue{proxy=\"be\"}"),
        metric_u64(&t, "haproxy_server_max_queue{proxy=\"be\",server=\"s\"}"),
    ]
}

#[test]
fn prometheus_max_queue_has_values() {
    let gate = Gate::default();
    let o = Origin::start("o", Mode::Gate(gate.clone()));
    let e = Ebb::start(&queue_cfg("BIND", "BIND", &o));
    // Queued on the backend (any server may serve it), not on the server.
    assert_eq!(queue_seen(e.addrs[1], e.addrs[0], &gate), [1, 0]);
    let hgate = Gate::default();
    let h = Origin::start("h", Mode::Gate(hgate.clone()));
    on_haproxy_exporter(
        "promex-queue",
        |b, m| queue_cfg(b, m, &h),
        |fe, m| assert_eq!(queue_seen(fe, m, &hgate), [1, 0], "haproxy"),
    );
}

fn qmax_cfg(sock: &std::path::Path, bind: &str, srv: std::net::SocketAddr) -> String {
    format!(
        "global\n    stats socket {} level admin\n\
         defaults\n    mode tcp\n    timeout client 10s\n    timeout server 10s\n    timeout connect 1s\n    timeout queue 10s\n\
         frontend fe\n    bind {bind}\n    default_backend be\n\
         backend be\n    balance source\n    server s {srv} maxconn 1\n\
         backend idle\n    server s {srv}\n",
        sock.display()
    )
}

/// The `qmax` of `show stat` (the longest a server's or backend's own queue
/// has been) on the live socket: `0` before anything waited, as HAProxy
/// prints it; a hashed backend queues on its server.
fn qmax_run(sock: &std::path::Path, fe: std::net::SocketAddr) -> Vec<String> {
    let col = |be: &str, sv: &str| stat_row(sock, be, sv)["qmax"].clone();
    let mut seen = vec![col("be", "s"), col("be", "BACKEND"), col("idle", "s")];
    let first = std::net::TcpStream::connect(fe).unwrap();
    wait_until("the first connection on the server", || {
        stat_row(sock, "be", "s")["scur"] == "1"
    });
    let second = std::net::TcpStream::connect(fe).unwrap();
    wait_until("the second connection in the server's queue", || {
        stat_row(sock, "be", "s")["qcur"] == "1"
    });
    seen.extend([col("be", "s"), col("be", "BACKEND")]);
    drop((first, second));
    seen
}

#[test]
fn qmax_is_the_longest_queue_seen() {
    // The server accepts and never answers: a slot stays taken.
    let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let srv = l.local_addr().unwrap();
    std::thread::spawn(move || {
        let mut held = Vec::new();
        for s in l.incoming().map_while(Result::ok) {
            held.push(s);
        }
    });
    let (e, sock) = ebb_with_admin("qmax", |k, b| qmax_cfg(k, b, srv));
    let got = qmax_run(&sock, e.addr());
    assert_eq!(got, ["0", "0", "0", "1", "0"]);

    let Some((h, fe)) = haproxy_beside("qmax", |k, b| qmax_cfg(k, b, srv)) else {
        return;
    };
    assert_eq!(qmax_run(&h.sock, fe), got);
}

fn form_cfg(sock: &std::path::Path, bind: &str, srv: std::net::SocketAddr) -> String {
    format!(
        "global\n    stats socket {} level admin\n\
         defaults\n    mode http\n    timeout client 10s\n    timeout server 5s\n    timeout connect 1s\n\
         frontend fe1\n    bind {bind}\n    stats enable\n    stats refresh 5s\n    stats uri /\n    stats admin if TRUE\n\
         backend b1\n    server srv1 {srv}\n    server srv2 {srv}\n    server srv3 {srv}\n\
         backend b2\n    server srv1 {srv}\n    server srv2 {srv}\n",
        sock.display()
    )
}

/// The POSTs of HAProxy's `webstats-scope-and-post-change` reg-test and
/// a few more: what each answers (status, `Location`), what a scoped CSV
/// holds, and the servers' states after.
fn form_run(addr: std::net::SocketAddr, sock: &std::path::Path) -> Vec<String> {
    let mut seen = Vec::new();
    let csv = req(addr, "/?;csv;scope=b1", None).text();
    let names: Vec<&str> = csv
        .lines()
        .skip(1)
        .map(|l| l.split(',').take(2).collect::<Vec<_>>())
        .map(|v| if v[0] == "b1" { "b1" } else { "other" })
        .collect();
    seen.push(names.join(" "));
    for (path, body) in [
        ("/?scope=b2", "s=srv1&s=srv2&s=srv3&action=maint&b=%233"),
        ("/", "s=srv2&action=drain&b=%233"),
        ("/", "s=srv1&action=maint&b=%234"),
        ("/;up;norefresh", "s=srv1&s=nope&action=ready&b=b2"),
        ("/", "s=srv1&action=bogus&b=b2"),
        ("/", "s=srv1&action=ready&b=nope"),
        ("/", "action=ready&b=b2"),
    ] {
        let r = post(addr, path, None, body);
        seen.push(format!("{} {:?}", r.status, r.header("location")));
    }
    let show = cli_cmd(sock, "show stat");
    for l in show
        .lines()
        .filter(|l| l.starts_with("b1,") || l.starts_with("b2,"))
    {
        let f: Vec<&str> = l.split(',').collect();
        seen.push(format!("{},{},{}", f[0], f[1], f[17]));
    }
    seen
}

#[test]
fn admin_form_and_scope_as_haproxy() {
    let a = Origin::start("a", Mode::Ok);
    let (e, sock) = ebb_with_admin("statsform", |k, b| form_cfg(k, b, a.addr));
    let ours = form_run(e.addr(), &sock);
    assert_eq!(ours[0], "b1 b1 b1 b1", "{ours:?}");
    assert_eq!(ours[1], "303 Some(\"/;st=DONE?scope=b2\")");
    assert!(ours.contains(&"b1,srv2,DRAIN".to_string()), "{ours:?}");
    assert!(
        ours.contains(&"b2,srv1,READY".to_string())
            || ours.contains(&"b2,srv1,no check".to_string()),
        "{ours:?}"
    );

    let Some((h, hap)) = haproxy_beside("statsform", |k, b| form_cfg(k, b, a.addr)) else {
        return;
    };
    assert_eq!(form_run(hap, &h.sock), ours, "haproxy (left), ebb (right)");
}

/// `stats show-node [NAME]`, `stats show-desc [TEXT]` (the global `node`
/// and `description` when no argument) and `stats show-legends`: the page
/// names the node, shows the description and tells each row's mode and
/// id; haproxy's page shows the same node and description.
#[test]
fn page_shows_node_description_and_legends() {
    let cfg = |bind: &str, extra: &str| {
        format!(
            "global\n    node gnode-1\n    description the global text\n\
             defaults\n    mode http\n    timeout client 30s\n    timeout server 30s\n    timeout connect 5s\n\
             frontend fe\n    bind {bind}\n    stats enable\n    stats uri /st\n{extra}"
        )
    };
    for (extra, node, desc) in [
        (
            "    stats show-node\n    stats show-desc\n",
            "gnode-1",
            "the global text",
        ),
        (
            "    stats show-node web.2\n    stats show-desc front door\n",
            "web.2",
            "front door",
        ),
    ] {
        let e = Ebb::start(&cfg("BIND", &format!("{extra}    stats show-legends\n")));
        let page = String::from_utf8(get(e.addr(), "/st").body).unwrap();
        assert!(page.contains(&format!("on {node}</h1>")), "{page}");
        assert!(page.contains(desc), "{page}");
        assert!(page.contains("title=\"mode http, id "), "{page}");
        let port = common::free_port();
        if let Some(_h) =
            common::haproxy_with("showdesc-hap", &cfg(&format!("127.0.0.1:{port}"), extra))
        {
            let a: std::net::SocketAddr = format!("127.0.0.1:{port}").parse().unwrap();
            let hp = String::from_utf8_lossy(&get(a, "/st").body).into_owned();
            assert!(hp.contains(node) && hp.contains(desc), "haproxy: {hp}");
        }
    }
    // Without the options, neither appears.
    let e = Ebb::start(&cfg("BIND", ""));
    let page = String::from_utf8(get(e.addr(), "/st").body).unwrap();
    assert!(
        !page.contains("gnode-1")
            && !page.contains("the global text")
            && !page.contains("title=\"mode")
    );
}

/// A frontend answering every request itself, and the exporter.
fn failed_cfg(bind: &str, metrics: &str) -> String {
    format!(
        "defaults\n    mode http\n    timeout client 10s\n    timeout http-request 10s\n\
         frontend stats\n    bind {metrics}\n    http-request use-service prometheus-exporter\n\
         frontend fe\n    bind {bind}\n    http-request return status 200\n"
    )
}

/// A malformed request (400), part of one then the client's close, a
/// connection closed with nothing sent, then a good request: the
/// frontend's failed requests, requests and 4xx answers, once the three
/// failures are counted.
fn failed_seen(fe: std::net::SocketAddr, metrics: std::net::SocketAddr) -> [u64; 3] {
    use std::io::{Read, Write};
    let mut c = std::net::TcpStream::connect(fe).unwrap();
    c.write_all(b"GET / HTTP/1.1\r\nHost: a\r\nno colon here\r\n\r\n")
        .unwrap();
    let mut got = Vec::new();
    let _ = c.read_to_end(&mut got);
    assert!(got.starts_with(b"HTTP/1.1 400"), "{got:?}");
    let mut c = std::net::TcpStream::connect(fe).unwrap();
    c.write_all(b"GET /par").unwrap();
    drop(c);
    drop(std::net::TcpStream::connect(fe).unwrap());
    assert_eq!(get(fe, "/").status, 200);
    let names = [
        "request_errors_total",
        "http_requests_total",
        "http_responses_total{proxy=\"fe\",code=\"4xx\"}",
    ];
    let mut seen = [0; 3];
    wait_until("three failed requests counted", || {
        let text = String::from_utf8_lossy(&get(metrics, "/metrics").body).into_owned();
        seen = [
            metric_u64(&text, "haproxy_frontend_request_errors_total{proxy=\"fe\"}"),
            metric_u64(&text, "haproxy_frontend_http_requests_total{proxy=\"fe\"}"),
            metric_u64(&text, &format!("haproxy_frontend_{}", names[2])),
        ];
        seen[0] >= 3
    });
    seen
}

#[test]
fn failed_requests_are_counted_as_haproxy_counts_them() {
    // HAProxy's `ereq`: a malformed request, one cut short by the client
    // and a connection closed before its first byte (a probe: not with
    // `option http-ignore-probes`) are each a request, a 4xx answer and a
    // failed request.
    let e = Ebb::start(&failed_cfg("BIND", "BIND"));
    assert_eq!(failed_seen(e.addrs[1], e.addrs[0]), [3, 4, 3]);
    on_haproxy_exporter("promex-failed", failed_cfg, |fe, m| {
        assert_eq!(failed_seen(fe, m), [3, 4, 3], "haproxy")
    });
}

/// A frontend of two threads answering `/a` with a 200 and anything else
/// with a 404 itself, and its admin socket.
fn threads_cfg(sock: &std::path::Path, bind: &str) -> String {
    format!(
        "global\n    stats socket {} level admin\n    nbthread 2\n\
         defaults\n    mode http\n    timeout client 10s\n    timeout server 10s\n    timeout connect 5s\n\
         frontend fe\n    bind {bind}\n\
         \x20   http-request return status 200 content-type text/plain string \"hello\" if {{ path /a }}\n\
         \x20   http-request return status 404 content-type text/plain string \"none\"\n",
        sock.display()
    )
}

/// One answer read whole from `s` (its head and `Content-Length` body):
/// its status and its length in bytes.
fn raw_answer(s: &mut std::net::TcpStream, buf: &mut Vec<u8>) -> (u16, usize) {
    let mut chunk = [0u8; 4096];
    loop {
        if let Some(end) = buf.windows(4).position(|w| w == b"\r\n\r\n").map(|i| i + 4) {
            let head = String::from_utf8_lossy(&buf[..end]).to_ascii_lowercase();
            let len: usize = head
                .lines()
                .find_map(|l| l.strip_prefix("content-length:"))
                .map_or(0, |v| v.trim().parse().unwrap());
            if buf.len() >= end + len {
                let status = head[9..12].parse().unwrap();
                buf.drain(..end + len);
                return (status, end + len);
            }
        }
        let n = s.read_retry(&mut chunk).unwrap();
        assert!(n > 0, "closed before a whole answer");
        buf.extend_from_slice(&chunk[..n]);
    }
}

/// Runs 8 keep-alive clients at once on `fe`, 25 requests each (`/a` and
/// `/b` in turn: 13 and 12); returns the request bytes sent and answer bytes read.
fn threads_load(fe: std::net::SocketAddr) -> (usize, usize) {
    use std::io::Write;
    let hs: Vec<_> = (0..8)
        .map(|_| {
            std::thread::spawn(move || {
                let mut s = std::net::TcpStream::connect(fe).unwrap();
                s.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
                let (mut sent, mut got, mut buf) = (0, 0, Vec::new());
                for i in 0..25 {
                    let path = if i % 2 == 0 { "/a" } else { "/b" };
                    let req = format!("GET {path} HTTP/1.1\r\nHost: h\r\n\r\n");
                    s.write_all(req.as_bytes()).unwrap();
                    sent += req.len();
                    let (st, n) = raw_answer(&mut s, &mut buf);
                    assert_eq!(st, if i % 2 == 0 { 200 } else { 404 });
                    got += n;
                }
                (sent, got)
            })
        })
        .collect();
    hs.into_iter()
        .map(|h| h.join().unwrap())
        .fold((0, 0), |a, b| (a.0 + b.0, a.1 + b.1))
}

/// The frontend row's columns `cols` of `show stat`.
fn fe_cols<const N: usize>(sock: &std::path::Path, cols: [&str; N]) -> [u64; N] {
    let row = stat_row(sock, "fe", "FRONTEND");
    cols.map(|c| row.get(c).and_then(|v| v.parse().ok()).unwrap_or(u64::MAX))
}

/// The per-request counters (requests, answers by class, bytes, requests
/// the frontend answered itself) are kept per thread and added up when
/// read: with two threads answering at once, `show stat`, `show info` and
/// the exporter's figures are every request's, and `clear counters all`
/// zeroes them; HAProxy shows the same counts.
#[test]
fn per_request_counters_of_two_threads_add_up() {
    let (e, sock) = ebb_with_admin("thrcount", threads_cfg);
    let (_, got) = threads_load(e.addrs[0]);
    let cols = ["req_tot", "hrsp_2xx", "hrsp_4xx", "intercepted"];
    assert_eq!(fe_cols(&sock, cols), [200, 104, 96, 200]);
    // Each request as HAProxy counts it (`tests/logbytes.rs`): 20 +
    // "GET" "/a" "HTTP/1.1" + "Host" "h" + 1.
    assert_eq!(fe_cols(&sock, ["bin", "bout"]), [200 * 39, got as u64]);
    let info = cli_cmd(&sock, "show info");
    assert!(info.contains("\nCumReq: 200\n"), "{info}");
    cli_cmd(&sock, "clear counters all");
    assert_eq!(fe_cols(&sock, cols), [0; 4]);
    assert_eq!(fe_cols(&sock, ["bin", "bout"]), [0, 0]);
    // HAProxy counts the same requests and answers.
    let Some((h, bind)) = haproxy_beside("thrcount", threads_cfg) else {
        return;
    };
    threads_load(bind);
    // HAProxy counts an answer when its stream ends, which may be after
    // the client read it: its last counts are waited for.
    let mut last = [0; 4];
    let counted = came_within(Duration::from_secs(20), || {
        last = fe_cols(&h.sock, cols);
        last == [200, 104, 96, 200]
    });
    assert!(counted, "haproxy: {last:?}");
}
