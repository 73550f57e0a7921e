//! Unit tests of the configuration parser: pure, no sockets.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use super::lexer::{tokenize, LinePos};
use super::values::{parse_bind_addrs, parse_host_port, parse_ipnet, parse_size, parse_time};
use super::*;

// ---------------------------------------------------------------- helpers

fn no_env(_: &str) -> Option<String> {
    None
}

fn test_env(name: &str) -> Option<String> {
    match name {
        "PORT" => Some("8080".to_string()),
        "HOST" => Some("10.0.0.1".to_string()),
        "WORDS" => Some("a  b c".to_string()),
        "EMPTY" => Some(String::new()),
        _ => None,
    }
}

fn tok(line: &str) -> Result<Vec<String>, String> {
    tokenize(
        line,
        &test_env,
        &LinePos {
            file: "t.cfg",
            line: 7,
        },
    )
}

fn words(line: &str) -> Vec<String> {
    match tok(line) {
        Ok(w) => w,
        Err(e) => panic!("tokenize({line:?}) failed: {e}"),
    }
}

fn parse(text: &str) -> Result<Config, Vec<ConfigError>> {
    parse_str_with_env("t.cfg", text, &test_env)
}

#[track_caller]
fn ok(text: &str) -> Config {
    match parse(text) {
        Ok(c) => c,
        Err(errs) => {
            let msgs: Vec<String> = errs.iter().map(|e| e.to_string()).collect();
            panic!("unexpected errors:\n{}", msgs.join("\n"))
        }
    }
}

#[track_caller]
fn errs(text: &str) -> Vec<String> {
    match parse(text) {
        Ok(_) => panic!("expected errors for:\n{text}"),
        Err(e) => e.iter().map(|e| e.to_string()).collect(),
    }
}

/// Asserts that the only error starts with `prefix` and contains `needle`.
#[track_caller]
fn err1(text: &str, prefix: &str, needle: &str) {
    let e = errs(text);
    assert_eq!(e.len(), 1, "expected one error, got {e:#?}");
    assert!(
        e[0].starts_with(prefix) && e[0].contains(needle),
        "error {:?} should start with {prefix:?} and contain {needle:?}",
        e[0]
    );
}

/// A frontend + backend skeleton around `fe` lines (frontend at line 1).
fn fe(lines: &str) -> String {
    format!("frontend f\n    bind :80\n{lines}\n    default_backend b\nbackend b\n")
}

/// A backend skeleton around `be` lines (backend at line 1).
fn be(lines: &str) -> String {
    format!("backend b\n{lines}\n")
}

static COUNTER: AtomicUsize = AtomicUsize::new(0);

/// A fresh temporary directory for this test.
fn tmpdir() -> PathBuf {
    let n = COUNTER.fetch_add(1, Ordering::Relaxed);
    let d = std::env::temp_dir().join(format!("ebb-config-test-{}-{n}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

fn write(dir: &Path, name: &str, content: &[u8]) -> PathBuf {
    let p = dir.join(name);
    std::fs::write(&p, content).unwrap();
    p
}

fn proxy<'a>(c: &'a Config, name: &str) -> &'a Proxy {
    c.proxies.iter().find(|p| p.name == name).unwrap()
}

// ---------------------------------------------------------------- tokenizer

#[test]
fn tokenizer_splits_on_spaces_and_tabs() {
    assert_eq!(
        words("  bind\t:80   name  x "),
        ["bind", ":80", "name", "x"]
    );
    assert!(words("").is_empty());
    assert!(words("   \t ").is_empty());
}

#[test]
fn tokenizer_comments() {
    assert_eq!(words("bind :80 # a comment"), ["bind", ":80"]);
    assert_eq!(words("bind :80#x"), ["bind", ":80"]);
    assert!(words("# only a comment").is_empty());
    assert_eq!(
        words("a \"#not\" '#either' \\#nor"),
        ["a", "#not", "#either", "#nor"]
    );
}

#[test]
fn tokenizer_quotes() {
    assert_eq!(words("string \"hello world\""), ["string", "hello world"]);
    assert_eq!(words("string 'hello world'"), ["string", "hello world"]);
    assert_eq!(words("a\"b c\"'d e'f"), ["ab cd ef"]);
    assert_eq!(words("\"it's\" 'say \"hi\"'"), ["it's", "say \"hi\""]);
    assert_eq!(words("x \"\" y"), ["x", "", "y"]);
    assert_eq!(words("x ''"), ["x", ""]);
}

#[test]
fn tokenizer_escapes() {
    assert_eq!(words("a\\ b"), ["a b"]);
    assert_eq!(words("a\\\\b"), ["a\\b"]);
    assert_eq!(words("\\\"q\\'"), ["\"q'"]);
    assert_eq!(words("\"t\\tn\\nr\\r\""), ["t\tn\nr\r"]);
    assert_eq!(words("\\x41\\x62"), ["Ab"]);
    // Unknown escapes are kept, so regexes survive.
    assert_eq!(words("^/(\\d+)\\1"), ["^/(\\d+)\\1"]);
    // Nothing is interpreted inside single quotes.
    assert_eq!(words("'a\\ b\\x41'"), ["a\\ b\\x41"]);
    // Escaped quote inside double quotes.
    assert_eq!(words("\"a\\\"b\""), ["a\"b"]);
}

#[test]
fn tokenizer_escape_errors() {
    assert!(tok("\\xZZ").unwrap_err().contains("hexadecimal"));
    assert!(tok("\\x4").unwrap_err().contains("hexadecimal"));
    // Bytes that are not UTF-8 are carried, and given back as bytes; a
    // configuration may not hold the characters that carry them.
    let w = tok("a\\xffb\\xE0\\x80c\\xC3\\xA9").unwrap();
    assert_eq!(w.len(), 1);
    assert!(crate::rawword::has_raw(&w[0]));
    assert_eq!(
        crate::rawword::word_bytes(w[0].as_bytes()),
        b"a\xffb\xe0\x80c\xc3\xa9".to_vec()
    );
    assert!(!crate::rawword::has_raw(&tok("\\xC3\\xA9").unwrap()[0]));
    assert!(tok("a\u{10FFE0}").unwrap_err().contains("reserved"));
}

#[test]
fn tokenizer_unterminated_quotes() {
    assert!(tok("a \"b c")
        .unwrap_err()
        .contains("unmatched quote at position 3"));
    assert!(tok("a 'b c").unwrap_err().contains("unmatched quote"));
    // A quote inside the other kind does not count.
    assert_eq!(words("\"it's\""), ["it's"]);
}

#[test]
fn tokenizer_env_vars_in_double_quotes_only() {
    assert_eq!(words("bind \":${PORT}\""), ["bind", ":8080"]);
    assert_eq!(words("bind \":$PORT\""), ["bind", ":8080"]);
    assert_eq!(words("x \"$HOST:$PORT\""), ["x", "10.0.0.1:8080"]);
    // Not expanded outside double quotes.
    assert_eq!(words("x ${PORT} '${PORT}'"), ["x", "${PORT}", "${PORT}"]);
    // Unset variables expand to nothing; defaults apply when unset.
    assert_eq!(words("x \"a${NOPE}b\""), ["x", "ab"]);
    assert_eq!(
        words("x \"${NOPE-dflt}\" \"${PORT-dflt}\""),
        ["x", "dflt", "8080"]
    );
    // An escaped dollar stays a dollar.
    assert_eq!(words("x \"\\$PORT\""), ["x", "$PORT"]);
    // Word expansion.
    assert_eq!(words("x \"${WORDS[*]}\""), ["x", "a", "b", "c"]);
    // Pseudo-variables.
    assert_eq!(words("x \"${.LINE}\" \"$.FILE\""), ["x", "7", "t.cfg"]);
    // Errors.
    assert!(tok("x \"${PORT\"").unwrap_err().contains("unmatched brace"));
    assert!(tok("x \"$1\"").unwrap_err().contains("variable name"));
    assert!(tok("x \"${.NOPE}\"")
        .unwrap_err()
        .contains("pseudo-variable"));
}

#[test]
fn tokenizer_stops_at_cr() {
    assert_eq!(words("bind :80\r"), ["bind", ":80"]);
}

#[test]
fn crlf_files_parse() {
    let c = ok("frontend f\r\n  bind :80\r\n  default_backend b\r\nbackend b\r\n");
    assert_eq!(c.proxies.len(), 2);
}

// ---------------------------------------------------------------- values

#[test]
fn time_units() {
    assert_eq!(parse_time("100").unwrap(), Duration::from_millis(100));
    assert_eq!(parse_time("250us").unwrap(), Duration::from_micros(250));
    assert_eq!(parse_time("5ms").unwrap(), Duration::from_millis(5));
    assert_eq!(parse_time("30s").unwrap(), Duration::from_secs(30));
    assert_eq!(parse_time("2m").unwrap(), Duration::from_secs(120));
    assert_eq!(parse_time("1h").unwrap(), Duration::from_secs(3600));
    assert_eq!(parse_time("1d").unwrap(), Duration::from_secs(86400));
    assert!(parse_time("").is_err());
    assert!(parse_time("s").is_err());
    assert!(parse_time("10x").unwrap_err().contains("invalid unit"));
    assert!(parse_time("-1s").is_err());
    assert!(parse_time("25d").unwrap_err().contains("too large"));
    assert!(parse_time("99999999999999999999999").is_err());
    assert!(parse_time("24d").is_ok());
}

#[test]
fn sizes() {
    assert_eq!(parse_size("16384").unwrap(), 16384);
    assert_eq!(parse_size("16k").unwrap(), 16384);
    assert_eq!(parse_size("1M").unwrap(), 1 << 20);
    assert_eq!(parse_size("2g").unwrap(), 2 << 30);
    assert!(parse_size("1t").is_err());
    assert!(parse_size("k").is_err());
}

#[test]
fn bind_addresses() {
    let a = |s: &str| parse_bind_addrs(s).unwrap();
    let sa = |s: &str| s.parse::<SocketAddr>().unwrap();
    assert_eq!(a(":80"), [sa("0.0.0.0:80")]);
    assert_eq!(a("*:80"), [sa("0.0.0.0:80")]);
    assert_eq!(a("1.2.3.4:80"), [sa("1.2.3.4:80")]);
    assert_eq!(a("[::1]:80"), [sa("[::1]:80")]);
    assert_eq!(a(":::80"), [sa("[::]:80")]);
    assert_eq!(a("::1:8080"), [sa("[::1]:8080")]);
    assert_eq!(a("ipv6@:80"), [sa("[::]:80")]);
    assert_eq!(a("ipv4@127.0.0.1:80"), [sa("127.0.0.1:80")]);
    assert_eq!(a("localhost:80"), [sa("127.0.0.1:80")]);
    assert_eq!(a(":80,:443"), [sa("0.0.0.0:80"), sa("0.0.0.0:443")]);
    assert_eq!(
        a("127.0.0.1:8000-8002"),
        [
            sa("127.0.0.1:8000"),
            sa("127.0.0.1:8001"),
            sa("127.0.0.1:8002")
        ]
    );
    assert!(parse_bind_addrs("1.2.3.4")
        .unwrap_err()
        .contains("missing port"));
    // Port 0 asks the kernel for an ephemeral port.
    assert_eq!(
        parse_bind_addrs("127.0.0.1:0").unwrap(),
        vec![sa("127.0.0.1:0")]
    );
    assert!(parse_bind_addrs(":65536").is_err());
    assert!(parse_bind_addrs(":http").is_err());
    assert!(parse_bind_addrs("example.com:80").is_err());
    assert!(parse_bind_addrs("unix@/tmp/x").is_err());
    assert!(parse_bind_addrs("[::1:80").is_err());
    assert!(parse_bind_addrs(":1-65535")
        .unwrap_err()
        .contains("too many ports"));
    assert!(parse_bind_addrs(":90-80").is_err());
    assert!(parse_bind_addrs("ipv4@::1:80").is_err());
}

#[test]
fn server_addresses() {
    assert_eq!(
        parse_host_port("10.0.0.1:80").unwrap(),
        ("10.0.0.1".into(), 80)
    );
    assert_eq!(
        parse_host_port("app.local:8080").unwrap(),
        ("app.local".into(), 8080)
    );
    assert_eq!(parse_host_port("[::1]:80").unwrap(), ("::1".into(), 80));
    assert_eq!(
        parse_host_port("fe80::1:443").unwrap(),
        ("fe80::1".into(), 443)
    );
    assert!(parse_host_port("10.0.0.1")
        .unwrap_err()
        .contains("missing port"));
    assert!(parse_host_port(":80").unwrap_err().contains("missing host"));
    assert!(parse_host_port("a b:80").is_err());
    assert!(parse_host_port("h:+1").unwrap_err().contains("offset"));
}

#[test]
fn ip_networks() {
    let n = parse_ipnet("10.0.0.0/8").unwrap();
    assert_eq!(n.prefix, 8);
    assert!(n.contains("10.1.2.3".parse().unwrap()));
    assert!(!n.contains("11.1.2.3".parse().unwrap()));
    assert!(n.contains("::ffff:10.0.0.1".parse().unwrap()));
    assert_eq!(parse_ipnet("192.168.0.0/255.255.0.0").unwrap().prefix, 16);
    assert!(parse_ipnet("1.2.3.4/255.0.255.0").is_err());
    assert_eq!(parse_ipnet("::1").unwrap().prefix, 128);
    assert!(parse_ipnet("2001:db8::/32")
        .unwrap()
        .contains("2001:db8::5".parse().unwrap()));
    assert!(parse_ipnet("0.0.0.0/0")
        .unwrap()
        .contains("8.8.8.8".parse().unwrap()));
    assert!(parse_ipnet("1.2.3.4/33").is_err());
    assert!(parse_ipnet("nope").is_err());
}

// ---------------------------------------------------------------- global

#[test]
fn global_grace() {
    let g = ok("global\n    grace 2500\n").global;
    assert_eq!(g.grace, Some(Duration::from_millis(2500)));
    assert_eq!(ok("global\n    grace 0\n").global.grace, None);
}

#[test]
fn global_keywords() {
    let c = ok("global
    nbthread 4
    maxconn 5000
    tune.bufsize 32k
    tune.runqueue-depth 200
    tune.sched.low-latency on
    tune.heavy-tasklets off
    profiling.tasks on
    hard-stop-after 30s
    log stdout format raw local0 info
    log stderr err
    log /var/log/ebb.log daemon notice debug
    pidfile /run/ebb.pid
    stats socket /run/ebb.sock mode 660 level admin nice -100
    stats socket 127.0.0.1:9999
    stats timeout 10s
    server-state-file /var/lib/ebb/state
    server-state-base /var/lib/ebb
    daemon
");
    let g = &c.global;
    assert_eq!(g.nbthread.as_ref().unwrap().value, 4);
    assert_eq!(g.nbthread.as_ref().unwrap().loc.line, 2);
    assert_eq!(g.maxconn, Some(5000));
    assert_eq!(g.bufsize, 32768);
    assert_eq!(g.runqueue_depth, Some(200));
    assert!(g.low_latency);
    assert!(!g.heavy_tasklets);
    assert_eq!(g.profiling_tasks, ProfilingMode::On);
    assert_eq!(g.hard_stop_after, Some(Duration::from_secs(30)));
    assert_eq!(g.log.len(), 3);
    assert_eq!(g.log[0].dest, LogDest::Stdout);
    assert_eq!(g.log[0].facility.as_deref(), Some("local0"));
    assert_eq!(g.log[0].level, Some(LogLevel::Info));
    assert_eq!(g.log[1].dest, LogDest::Stderr);
    assert_eq!(g.log[1].facility, None);
    assert_eq!(g.log[1].level, Some(LogLevel::Err));
    assert_eq!(g.log[2].dest, LogDest::File("/var/log/ebb.log".into()));
    assert_eq!(g.log[2].min_level, Some(LogLevel::Debug));
    assert_eq!(
        g.pidfile.as_ref().unwrap().value,
        PathBuf::from("/run/ebb.pid")
    );
    assert_eq!(g.stats_sockets.len(), 2);
    assert_eq!(g.stats_sockets[0].path, "/run/ebb.sock");
    assert_eq!(g.stats_sockets[0].mode, Some(0o660));
    assert_eq!(g.stats_sockets[0].level, CliLevel::Admin);
    assert_eq!(g.stats_sockets[0].loc.line, 14);
    assert_eq!(g.stats_sockets[0].nice, Some(-100));
    assert_eq!(g.stats_sockets[1].level, CliLevel::Operator);
    assert_eq!(g.stats_sockets[1].nice, None);
    assert_eq!(g.stats_timeout, Some(Duration::from_secs(10)));
    assert_eq!(
        g.server_state_file.as_ref().unwrap().value,
        PathBuf::from("/var/lib/ebb/state")
    );
    assert!(g.server_state_base.is_some());
    assert!(g.daemon);
}

#[test]
fn global_defaults() {
    let g = ok("global\n").global;
    assert_eq!(g.bufsize, 16384);
    assert!(g.heavy_tasklets);
    assert!(!g.low_latency);
    assert_eq!(g.profiling_tasks, ProfilingMode::Auto);
    assert!(g.nbthread.is_none());
}

#[test]
fn global_errors() {
    let cases: &[(&str, &str)] = &[
        ("nbthread 0", "out of range"),
        ("nbthread 65", "out of range"),
        ("nbthread x", "expects an integer"),
        ("nbthread", "expects an argument"),
        ("nbthread 1 2", "exactly one"),
        ("maxconn -1", "expects an integer"),
        ("tune.bufsize 100", "out of range"),
        ("tune.bufsize 2g", "out of range"),
        ("tune.bufsize 16q", "invalid suffix"),
        ("tune.runqueue-depth 0", "out of range"),
        ("tune.sched.low-latency yes", "'on' or 'off'"),
        ("tune.heavy-tasklets maybe", "'on' or 'off'"),
        ("profiling.tasks sometimes", "on', 'auto' or 'off'"),
        ("hard-stop-after forever", "invalid time"),
        ("log ring@buf local0", "unknown ring named 'buf'"),
        ("log ring@ local0", "expects a ring name"),
        (
            "log fd@x local0",
            "file descriptor 'x' is not a valid integer in 'fd@x'",
        ),
        ("log stdout format json local0", "unknown log format 'json'"),
        ("log stdout len 10 local0", "between 80 and 65535"),
        ("log stdout sample 1:0 local0", "wrong sample size"),
        ("log stdout sample 1-3,2:5 local0", "overlaps"),
        ("log stdout sample 1,7:5 local0", "greater or equal to 7"),
        ("log stdout sample 3-1:5 local0", "invalid sample range"),
        ("log stdout sample 1,3 local0", "missing sample size"),
        ("log foo@x local0", "unknown address family"),
        ("user no-such-user-here", "unknown user"),
        ("group no-such-group-here", "unknown group"),
        ("log stdout local0 loud", "unknown log facility or level"),
        ("log", "expects a target"),
        ("stats socket /x mode 999", "octal"),
        ("stats socket /x level root", "unknown level"),
        (
            "stats socket /x expose-fd everything",
            "only 'expose-fd listeners' exists",
        ),
        ("stats socket", "expects a path"),
        ("stats socket 127.0.0.1:1-3", "one address and one port"),
        ("stats socket ipv4@1.2.3:99", "invalid bind address"),
        ("stats socket fd@x", "expects a file descriptor number"),
        ("stats bogus", "unknown 'stats bogus'"),
        ("daemon now", "takes no argument"),
        ("nbproc 2", "HAProxy keyword 'nbproc' is not supported"),
        (
            "frobnicate",
            "unknown keyword 'frobnicate' in 'global' section",
        ),
        (
            "nbthreads 2",
            "unknown keyword 'nbthreads' in 'global' section (did you mean 'nbthread'?)",
        ),
        ("stats socket /x nice 2000", "out of range (-1024..1024)"),
    ];
    for (line, needle) in cases {
        err1(&format!("global\n    {line}\n"), "t.cfg:2: ", needle);
    }
}

#[test]
fn scope_lookups_knob() {
    assert!(ok("global\n").global.scope_lookups, "on by default");
    let g = ok("global\n    tune.sched.scope-lookups off\n").global;
    assert!(!g.scope_lookups);
    let g = ok("global\n    tune.sched.scope-lookups on\n").global;
    assert!(g.scope_lookups);
    for (line, needle) in [
        ("tune.sched.scope-lookups maybe", "'on' or 'off'"),
        ("tune.sched.scope-lookups", "expects"),
        ("tune.sched.scope-lookups on off", "exactly one"),
    ] {
        err1(&format!("global\n    {line}\n"), "t.cfg:2: ", needle);
    }
}

// ---------------------------------------------------------------- sections

#[test]
fn keyword_out_of_section() {
    err1("bind :80\n", "t.cfg:1: ", "out of section");
}

#[test]
fn unsupported_section_reports_once() {
    let e = errs("log-forward L\n    dgram-bind :514\n    log global\nglobal\n    bogus\n");
    assert_eq!(e.len(), 2, "{e:#?}");
    assert!(e[0].starts_with("t.cfg:1: section 'log-forward' is not supported"));
    assert!(e[1].starts_with("t.cfg:5: unknown keyword 'bogus'"));
}

#[test]
fn ring_sections_and_tcp_targets() {
    let c = ok("ring r\n    description \"My ring\"\n    format rfc5424\n    maxlen 99999\n    size 1000\n\
    timeout connect 2s\n    timeout server 0\n    server s 127.0.0.1:6514 log-proto octet-count\n\
global\n    log ring@r local0\n    log tcp@127.0.0.1:1514 format short local1\n    log tcp@127.0.0.1 local2\n    log ring@buf0 local3\n");
    assert_eq!(c.rings.len(), 3);
    let r = &c.rings[0];
    assert_eq!((r.name.as_str(), r.description.as_str()), ("r", "My ring"));
    assert_eq!(r.format, LogFormat::Rfc5424);
    // Never smaller than HAProxy's BUFSIZE; maxlen at most the size.
    assert_eq!((r.size, r.maxlen), (16_384, 16_384));
    assert_eq!(r.timeout_connect, Some(std::time::Duration::from_secs(2)));
    assert_eq!(r.timeout_server, None);
    assert!(r.servers[0].octet_count);
    assert_eq!(c.global.log[0].dest, LogDest::Ring("r".into()));
    assert_eq!(c.global.log[1].dest, LogDest::Ring("ring#1".into()));
    let t = &c.rings[1];
    assert_eq!(t.format, LogFormat::Short);
    assert_eq!(
        t.description,
        "created from logserver declared into 't.cfg' at line 11"
    );
    assert_eq!(t.servers[0].addr, "127.0.0.1:1514".parse().unwrap());
    assert!(!t.servers[0].octet_count);
    assert_eq!(c.rings[2].servers[0].addr, "127.0.0.1:514".parse().unwrap());
    for (text, want) in [
        ("ring\n", "missing ring name"),
        ("ring a/b\n", "character '/' is not permitted"),
        ("ring buf0\n", "sink named 'buf0' already exists"),
        ("ring a\nring a\n", "sink named 'a' already exists"),
        ("ring a\n    size 16k\n", "no unit"),
        ("ring a\n    maxlen 0\n", "invalid maxlen"),
        ("ring a\n    format json\n", "unknown format 'json'"),
        ("ring a\n    description\n", "missing ring description"),
        ("ring a\n    timeout client 1s\n", "not a ring timeout"),
        (
            "ring a\n    server s 127.0.0.1:1 ssl\n",
            "'ssl' is not supported on a ring's server",
        ),
        (
            "ring a\n    server s 127.0.0.1:1 log-proto rfc\n",
            "'legacy' or 'octet-count'",
        ),
        ("ring a\n    bogus\n", "unknown statement 'bogus'"),
    ] {
        let e = errs(text);
        assert!(e.iter().any(|m| m.contains(want)), "{text}: {e:#?}");
    }
}

#[test]
fn mailers_and_email_alerts() {
    let c = ok(
        "mailers m\n    mailer a 127.0.0.1:25\n    mailer b 127.0.0.2:2525\n    timeout mail 3s\n\
defaults\n    email-alert mailers m\n    email-alert from x@y\n\
backend b\n    email-alert to z@y\n    email-alert level info\n    server s 127.0.0.1:80\n",
    );
    let e = &c.proxies[0].email_alert;
    assert_eq!(e.from.as_deref(), Some("x@y"));
    assert_eq!(e.to.as_deref(), Some("z@y"));
    assert_eq!(e.level, 6);
    assert_eq!(
        e.targets,
        vec![
            "127.0.0.1:25".parse().unwrap(),
            "127.0.0.2:2525".parse().unwrap()
        ]
    );
    assert_eq!(e.timeout, std::time::Duration::from_secs(3));
    // Without `to`: HAProxy warns and sends nothing.
    let c = ok("mailers m\n    mailer a 127.0.0.1:25\nbackend b\n    email-alert mailers m\n    email-alert from x@y\n    server s 127.0.0.1:80\n");
    assert!(c.proxies[0].email_alert.targets.is_empty());
    assert!(crate::config::mailers::ignored(&c.proxies[0]).is_some());
    err1(
        "backend b\n    email-alert mailers m\n    email-alert from x@y\n    email-alert to z@y\n    server s 127.0.0.1:80\n",
        "t.cfg:1: ",
        "unable to find mailers 'm'",
    );
    err1("mailers m\n    mailer a 127.0.0.1\n", "t.cfg:2: ", "port");
    err1(
        "backend b\n    email-alert level x\n",
        "t.cfg:2: ",
        "unknown log level 'x'",
    );
}

#[test]
fn proxy_grace_is_refused_as_haproxy_2_6_refuses_it() {
    err1(
        "backend b\n    grace 1s\n",
        "t.cfg:2: ",
        "the 'grace' keyword is not supported any more since HAProxy version 2.5",
    );
}

#[test]
fn section_header_errors() {
    err1("frontend\n", "t.cfg:1: ", "needs a name");
    err1("backend a/b\n", "t.cfg:1: ", "invalid backend name");
    err1("backend b 1.2.3.4:80\n", "t.cfg:1: ", "unexpected argument");
    err1("global x\n", "t.cfg:1: ", "takes no argument");
    err1(
        "backend b from nothere\n",
        "t.cfg:1: ",
        "unknown defaults section 'nothere'",
    );
}

#[test]
fn broken_section_header_does_not_cascade() {
    err1(
        "defaults bad/name\n    timeout client 1s\n    mode http\n",
        "t.cfg:1: ",
        "invalid defaults name",
    );
    err1(
        "defaults a b c\n    timeout client 1s\n",
        "t.cfg:1: ",
        "unexpected argument 'b'",
    );
}

#[test]
fn collects_all_errors_in_order() {
    let e = errs(
        "global
    nbthread zero
    bogus 1
frontend f
    bind :80
    timeout client forever
    option nope
    default_backend b
backend b
    server s1 10.0.0.1:65536
",
    );
    assert_eq!(e.len(), 5, "{e:#?}");
    assert!(e[0].starts_with("t.cfg:2: "));
    assert!(e[1].starts_with("t.cfg:3: unknown keyword 'bogus'"));
    assert!(e[2].starts_with("t.cfg:6: invalid time"));
    assert!(e[3].starts_with("t.cfg:7: unknown option 'nope'"));
    assert!(
        e[4].starts_with("t.cfg:10: port '65536' out of range"),
        "{e:#?}"
    );
}

#[test]
fn unterminated_quote_is_a_line_error() {
    let e = errs("frontend f\n    bind :80\n    http-request return string \"oops\n    default_backend b\nbackend b\n");
    assert_eq!(e.len(), 1, "{e:#?}");
    assert!(e[0].starts_with("t.cfg:3: unmatched quote"));
}

// ---------------------------------------------------------------- proxies

#[test]
fn frontend_basics() {
    let c = ok("frontend web
    bind :80 name plain
    bind 127.0.0.1:8443 name tls ssl crt /etc/ebb/a.pem crt /etc/ebb/b.pem key /etc/ebb/a.key alpn http/1.1,x-test ssl-min-ver TLSv1.3
    bind [::1]:80 v6only
    mode http
    maxconn 1000
    timeout client 30s
    timeout http-request 5s
    timeout http-keep-alive 2s
    option httplog
    option dontlognull
    option forwardfor except 127.0.0.0/8 header X-Real-IP if-none
    log global
    default_backend app
backend app
    server s1 10.0.0.1:80
");
    let f = proxy(&c, "web");
    assert_eq!(f.kind, ProxyKind::Frontend);
    assert_eq!(f.loc.line, 1);
    assert_eq!(f.binds.len(), 3);
    assert_eq!(f.binds[0].name.as_deref(), Some("plain"));
    assert_eq!((f.binds[0].v6only, f.binds[2].v6only), (None, Some(true)));
    // `nice` on a bind line: refused (no per-connection priority).
    err1(
        "frontend f\n    bind :80 nice -10\n",
        "t.cfg:2:",
        "bind option 'nice' is not supported yet",
    );
    assert_eq!(f.binds[0].loc.line, 2);
    assert!(f.binds[0].ssl.is_none());
    let ssl = f.binds[1].ssl.as_ref().unwrap();
    assert_eq!(
        ssl.crts,
        [
            PathBuf::from("/etc/ebb/a.pem"),
            PathBuf::from("/etc/ebb/b.pem")
        ]
    );
    assert_eq!(ssl.key, Some(PathBuf::from("/etc/ebb/a.key")));
    assert_eq!(ssl.alpn, ["http/1.1", "x-test"]);
    assert_eq!(ssl.min_ver, Some(TlsVersion::Tls13));
    assert_eq!(
        f.binds[2].addrs,
        ["[::1]:80".parse::<SocketAddr>().unwrap()]
    );
    assert_eq!(f.maxconn, Some(1000));
    assert_eq!(f.timeouts.client, Some(Duration::from_secs(30)));
    assert_eq!(f.timeouts.http_request, Some(Duration::from_secs(5)));
    assert_eq!(f.timeouts.http_keep_alive, Some(Duration::from_secs(2)));
    assert!(f.options.httplog && f.options.dontlognull);
    let ff = f.options.forwardfor.as_ref().unwrap();
    assert_eq!(ff.header, "x-real-ip");
    assert!(ff.if_none);
    assert_eq!(ff.except.unwrap().prefix, 8);
    assert_eq!(f.log, [ProxyLog::Global]);
    let d = f.default_backend.as_ref().unwrap();
    assert_eq!((d.value.as_str(), d.loc.line), ("app", 14));
    assert_eq!(c.frontends().count(), 1);
    assert_eq!(c.backends().count(), 1);
    assert!(c.backend("app").is_some());
    assert!(c.frontend("web").is_some());
    assert!(c.backend("web").is_none());
}

#[test]
fn bind_errors() {
    let b = |opts: &str| format!("frontend f\n    bind {opts}\n");
    err1(&b(""), "t.cfg:2: ", "expects an address");
    err1(&b(":80 ssl"), "t.cfg:2: ", "needs at least one 'crt FILE'");
    err1(&b(":80 crt /x.pem"), "t.cfg:2: ", "need 'ssl'");
    err1(
        &b(":80 ssl crt /x.pem ssl-min-ver TLSv1.0"),
        "t.cfg:2: ",
        "TLSv1.2 and TLSv1.3 only",
    );
    err1(
        &b(":80 ssl crt /x.pem ssl-min-ver TLS9"),
        "t.cfg:2: ",
        "unknown TLS version",
    );
    err1(&b(":80 ssl crt"), "t.cfg:2: ", "expects a value");
    err1(
        &b(":80 nice 1025"),
        "t.cfg:2: ",
        "out of range (-1024..1024)",
    );
    err1(&b(":80 nice"), "t.cfg:2: ", "expects a value");
    err1(&b(":80 ssl crt /x alpn h2,,x"), "t.cfg:2: ", "invalid ALPN");
    err1(
        &b("fd@x"),
        "t.cfg:2: ",
        "'fd@' expects a file descriptor number",
    );
    err1(&b("sockpair@3"), "t.cfg:2: ", "not supported yet");
    err1(&b("udp@:514"), "t.cfg:2: ", "UDP is not supported");
    err1(&b(":80 mode 600"), "t.cfg:2: ", "UNIX socket path only");
    err1(&b("/tmp/s mode 999"), "t.cfg:2: ", "octal");
    err1(&b(":80 user nobody"), "t.cfg:2: ", "UNIX socket path only");
    err1(
        &b("/tmp/s user no-such-user-here"),
        "t.cfg:2: ",
        "unknown user",
    );
    err1(&b(":80 backlog 0"), "t.cfg:2: ", "out of range");
}

#[test]
fn bind_sockets_other_than_tcp() {
    let c = ok("frontend f
    bind fd@3
    bind unix@/run/a.sock mode 660 uid 7 group root backlog 64
    bind /run/b.sock
    bind abns@name
    default_backend b
backend b
");
    let f = c.frontend("f").unwrap();
    let s: Vec<_> = f.binds.iter().map(|b| b.sockets.clone()).collect();
    assert_eq!(
        s,
        vec![
            vec![SockSpec::Fd(3)],
            vec![SockSpec::Unix("/run/a.sock".into())],
            vec![SockSpec::Unix("/run/b.sock".into())],
            vec![SockSpec::Abns("name".into())],
        ]
    );
    assert!(f.binds.iter().all(|b| b.addrs.is_empty()));
    assert_eq!(f.binds[1].unix_mode, Some(0o660));
    assert_eq!(f.binds[1].unix_owner, (Some(7), Some(0)));
    assert_eq!(f.binds[1].backlog, Some(64));
}

#[test]
fn log_targets_syslog() {
    let c = ok("global
    log 127.0.0.1:5514 local0
    log udp@127.0.0.1 len 2048 format rfc5424 daemon info err
    log unix@/run/log.sock format short local7
    log /dev/log local0
    log stderr format raw daemon
    log stdout sample 4,1-2:5 local0
    log-tag web
    log-send-hostname h1
    chroot /var/empty
    uid 0
    gid 0
    user root
");
    let g = &c.global;
    assert_eq!(
        g.log[0].dest,
        LogDest::Udp("127.0.0.1:5514".parse().unwrap())
    );
    assert_eq!(g.log[0].format, LogFormat::Local);
    assert_eq!(g.log[0].max_len, 1024);
    assert_eq!(
        g.log[1].dest,
        LogDest::Udp("127.0.0.1:514".parse().unwrap())
    );
    assert_eq!(g.log[1].format, LogFormat::Rfc5424);
    assert_eq!(g.log[1].max_len, 2048);
    assert_eq!(g.log[1].level, Some(LogLevel::Info));
    assert_eq!(g.log[1].min_level, Some(LogLevel::Err));
    assert_eq!(g.log[2].dest, LogDest::Unix("/run/log.sock".into()));
    assert_eq!(g.log[2].format, LogFormat::Short);
    assert_eq!(g.log[3].dest, LogDest::Unix("/dev/log".into()));
    assert_eq!(g.log[4].format, LogFormat::Raw);
    assert_eq!(
        g.log[5].sample,
        Some(LogSample {
            ranges: vec![(1, 2), (4, 4)],
            size: 5
        })
    );
    assert_eq!(g.log_tag.as_deref(), Some("web"));
    assert_eq!(g.log_send_hostname.as_deref(), Some("h1"));
    assert_eq!(
        g.chroot.as_ref().unwrap().value,
        PathBuf::from("/var/empty")
    );
    assert_eq!((g.uid, g.gid), (Some(0), Some(0)));
}

#[test]
fn tune_keywords_honoured_or_refused() {
    let g =
        ok("global\n    tune.maxrewrite 128\n    tune.idle-pool.shared off\n    ulimit-n 4096\n")
            .global;
    assert_eq!(g.maxrewrite, Some(128));
    assert_eq!(g.ulimit_n, Some(4096));
    assert!(!g.idle_pool_shared);
    assert!(
        ok("global\n    tune.idle-pool.shared on\n")
            .global
            .idle_pool_shared
    );
    assert!(ok("global\n").global.idle_pool_shared);
}

/// HTTP/2 is served: `alpn h2,...` and `proto h2` are accepted (and
/// `proto h1`, `proto none`), other `proto` values refused; the
/// `tune.h2.*` keywords take HAProxy's ranges.
#[test]
fn http2_binds_and_tune_h2() {
    let b = |opts: &str| format!("frontend f\n    bind {opts}\n");
    let tail = "    default_backend b\nbackend b\n    server s 127.0.0.1:80\n";
    let c = ok(&format!("frontend f\n    bind :80 proto h2\n{tail}"));
    assert!(c.frontends().next().unwrap().binds[0].proto_h2);
    let c = ok(&format!("frontend f\n    bind :80\n{tail}"));
    assert!(!c.frontends().next().unwrap().binds[0].proto_h2);
    let c = ok(&format!("frontend f\n    bind :80 proto h1\n{tail}"));
    assert!(c.frontends().next().unwrap().binds[0].proto_h1);
    err1(
        &b(":80 proto fcgi"),
        "t.cfg:2: ",
        "'proto fcgi' is not supported",
    );
    let c = ok(&format!(
        "global\n    tune.h2.max-concurrent-streams 0\n    tune.h2.initial-window-size 1048576\n    tune.h2.header-table-size 65536\nfrontend f\n    bind :80\n{tail}"
    ));
    assert_eq!(c.global.h2_max_concurrent_streams, Some(0));
    assert_eq!(c.global.h2_initial_window_size, Some(1 << 20));
    assert_eq!(c.global.h2_header_table_size, Some(65536));
    // HAProxy 2.6's ranges: 4096 to 65536, and no more streams than its
    // `int` holds.
    for bad in [
        "header-table-size 65537",
        "header-table-size 4095",
        "max-concurrent-streams 2147483648",
    ] {
        err1(
            &format!("global\n    tune.h2.{bad}\n"),
            "t.cfg:2: ",
            "out of range",
        );
    }
    err1(
        "global\n    tune.h2.initial-window-size 2147483648\n",
        "t.cfg:2: ",
        "out of range",
    );
}

#[test]
fn mode_tcp_and_its_keywords() {
    let c = ok("defaults tcp\n    mode tcp\n    tcp-request inspect-delay 5s\nlisten l\n    bind :80 accept-proxy\n    option tcplog\n    tcp-request connection reject if { src 10.0.0.0/8 }\n    tcp-request content accept if { req.ssl_hello_type 1 }\n    tcp-request content reject\n    server s 1.2.3.4:80 send-proxy-v2 check-send-proxy\n");
    let l = c.frontends().next().unwrap();
    assert_eq!(l.mode, ProxyMode::Tcp);
    assert_eq!(l.inspect_delay, Some(Duration::from_secs(5)));
    assert!(l.binds[0].accept_proxy && l.options.tcplog);
    assert_eq!(l.tcp_request.len(), 3);
    assert_eq!(
        (l.tcp_request[0].when, &l.tcp_request[0].action),
        (TcpWhen::Connection, &TcpAction::Reject)
    );
    assert_eq!(
        (l.tcp_request[1].when, &l.tcp_request[1].action),
        (TcpWhen::Content, &TcpAction::Accept)
    );
    assert!(l.tcp_request[2].cond.is_none());
    assert_eq!(l.servers[0].opts.send_proxy, 2);
    assert!(l.servers[0].opts.check_send_proxy);
    err1(
        "defaults\n    mode health\n",
        "t.cfg:2: ",
        "unknown mode 'health' (expected http or tcp)",
    );
    err1("defaults\n    mode tcp http\n", "t.cfg:2: ", "exactly one");
    err1(
        &be("    tcp-request connection accept"),
        "t.cfg:2: ",
        "'tcp-request' is not allowed in a 'backend' section",
    );
    err1(
        &be("    tcp-request content do-resolve(txn.ip,r) src"),
        "t.cfg:2: ",
        "Can't find resolvers section 'r' for do-resolve action",
    );
    err1(
        &be("    tcp-request content frobnicate"),
        "t.cfg:2: ",
        "(supported actions: accept, reject, silent-drop",
    );
    err1(
        &be("    tcp-request content capture src"),
        "t.cfg:2: ",
        "expects SAMPLE len N",
    );
    err1(
        "frontend f\n    bind :80\n    tcp-request connection capture src len 4\n",
        "t.cfg:3: ",
        "is not supported by ebb",
    );
    err1(
        &be("    tcp-request content accept when x"),
        "t.cfg:2: ",
        "unexpected 'when' after 'tcp-request content accept'",
    );
    err1(
        &be("    tcp-request session accept"),
        "t.cfg:2: ",
        "'tcp-request' is not allowed in a 'backend' section",
    );
    err1(
        "frontend f\n    bind :80\n    tcp-request content expect-proxy layer4\n",
        "t.cfg:3: ",
        "only valid in 'tcp-request connection'",
    );
    err1(
        "frontend f\n    bind :80\n    tcp-request connection track-sc3 src\n",
        "t.cfg:3: ",
        "track-sc0, track-sc1 and track-sc2",
    );
    err1(
        "frontend f\n    bind :80\n    tcp-response content accept\n",
        "t.cfg:3: ",
        "'tcp-response' is not allowed in a 'frontend' section",
    );
    err1(
        &be("    tcp-response content track-sc0 src"),
        "t.cfg:2: ",
        "(supported actions: accept, reject, close",
    );
    // Every action of HAProxy's list that ebb has.
    let c = ok("frontend f\n    mode tcp\n    bind :80\n    stick-table type ip size 1k store gpc0,gpt0,conn_rate(10s)\n    tcp-request connection expect-proxy layer4 if { src 10.0.0.0/8 }\n    tcp-request connection track-sc0 src\n    tcp-request connection sc-inc-gpc0(0)\n    tcp-request connection set-var(sess.x) src\n    tcp-request session sc-set-gpt0(0) 7\n    tcp-request session silent-drop if { sc0_conn_rate gt 100 }\n    tcp-request content track-sc1 src table f\n    tcp-request content unset-var(sess.x)\n    default_backend b\nbackend b\n    mode tcp\n    server s 127.0.0.1:1\n");
    let f = c.frontends().next().unwrap();
    assert_eq!(f.tcp_request.len(), 8);
    assert_eq!(f.tcp_request[0].action, TcpAction::ExpectProxy);
    assert_eq!(f.tcp_request[4].when, TcpWhen::Session);
    err1(
        &be("    tcp-request inspect-delay"),
        "t.cfg:2: ",
        "expects one time value",
    );
    err1(
        "defaults\n    tcp-request content accept\n",
        "t.cfg:2: ",
        "not allowed in anonymous 'defaults' sections",
    );
}

/// `tcp-request`/`tcp-response` in named defaults sections (HAProxy 2.5+):
/// the rules come before the proxy's own, and HAProxy's misuses are
/// refused with its reasons (reg-test startup/default_rules, h4 to h14).
#[test]
fn tcp_rules_in_named_defaults() {
    let c = ok("defaults front\n    mode http\n    tcp-request connection accept\n    tcp-request inspect-delay 5s\n    tcp-request content set-var(txn.a) str(d)\ndefaults back\n    mode http\n    tcp-request content accept\n    tcp-response inspect-delay 1s\n    tcp-response content accept\nfrontend f from front\n    bind :80\n    tcp-request connection reject\n    tcp-request content reject\n    default_backend b\nfrontend g from front\n    bind :81\n    default_backend b\nbackend b from back\n    tcp-response content reject\n");
    let f = c.frontends().next().unwrap();
    let order: Vec<(TcpWhen, u32)> = f.tcp_request.iter().map(|r| (r.when, r.loc.line)).collect();
    assert_eq!(
        order,
        [
            (TcpWhen::Connection, 3),
            (TcpWhen::Content, 5),
            (TcpWhen::Connection, 13),
            (TcpWhen::Content, 14)
        ]
    );
    assert_eq!(f.inspect_delay, Some(Duration::from_secs(5)));
    let b = c.backends().find(|b| b.name == "b").unwrap();
    assert_eq!(b.tcp_response.len(), 2);
    assert_eq!(b.res_inspect_delay, Some(Duration::from_secs(1)));
    for (cfg, line, msg) in [
        ("defaults\n    tcp-request connection accept\n", 2, "anonymous"),
        ("defaults\n    tcp-request session accept\n", 2, "anonymous"),
        ("defaults\n    tcp-request inspect-delay 5s\n", 2, "anonymous"),
        ("defaults\n    tcp-response content accept\n", 2, "anonymous"),
        (
            "defaults d\n    tcp-response content accept\ndefaults from d\n    mode tcp\n",
            3,
            "cannot inherit from a defaults section defining rules",
        ),
        (
            "defaults d\n    tcp-request content accept\nlisten l from d\n    bind :80\n    server s 127.0.0.1:1\n",
            3,
            "a listen section cannot inherit",
        ),
        (
            "defaults d\n    tcp-request content accept\nfrontend f from d\n    bind :80\n    default_backend b\nbackend b from d\n    server s 127.0.0.1:1\n",
            6,
            "frontends and backends cannot inherit from the same defaults section",
        ),
        (
            "defaults d\n    tcp-request session accept\nbackend b from d\n    server s 127.0.0.1:1\n",
            3,
            "a backend section cannot inherit",
        ),
        (
            "defaults d\n    tcp-response content accept\nfrontend f\n    bind :80\n",
            3,
            "a frontend section cannot inherit",
        ),
        (
            "defaults d\n    tcp-request content track-sc0 src\n",
            2,
            "has no stick table",
        ),
    ] {
        err1(cfg, &format!("t.cfg:{line}: "), msg);
    }
    // Named tables are fine in defaults.
    ok("backend t\n    stick-table type ip size 1k\ndefaults d\n    tcp-request content track-sc0 src table t\nfrontend f from d\n    bind :80\n    default_backend t\n");
}

#[test]
fn timeouts_all_kinds() {
    let c = ok("defaults
    timeout client 1s
    timeout server 2s
    timeout connect 3s
    timeout http-request 4s
    timeout http-keep-alive 5s
    timeout queue 6s
    timeout tunnel 1h
    timeout check 7s
backend b
");
    let t = &proxy(&c, "b").timeouts;
    assert_eq!(t.client, Some(Duration::from_secs(1)));
    assert_eq!(t.server, Some(Duration::from_secs(2)));
    assert_eq!(t.connect, Some(Duration::from_secs(3)));
    assert_eq!(t.http_request, Some(Duration::from_secs(4)));
    assert_eq!(t.http_keep_alive, Some(Duration::from_secs(5)));
    assert_eq!(t.queue, Some(Duration::from_secs(6)));
    assert_eq!(t.tunnel, Some(Duration::from_secs(3600)));
    assert_eq!(t.check, Some(Duration::from_secs(7)));
    // Zero means none.
    let c = ok("backend b\n    timeout server 0\n");
    assert_eq!(proxy(&c, "b").timeouts.server, None);
}

#[test]
fn timeout_errors() {
    err1(
        "defaults\n    timeout client-fin 1s\n",
        "t.cfg:2: ",
        "unknown timeout",
    );
    err1(
        "defaults\n    timeout client\n",
        "t.cfg:2: ",
        "expects an argument",
    );
    err1(
        "defaults\n    timeout client 1s 2s\n",
        "t.cfg:2: ",
        "exactly one",
    );
    err1(
        "defaults\n    timeout client 100y\n",
        "t.cfg:2: ",
        "invalid unit",
    );
    err1(
        &be("    timeout client 1s"),
        "t.cfg:2: ",
        "not allowed in a 'backend' section",
    );
    err1(
        &fe("    timeout server 1s"),
        "t.cfg:3: ",
        "not allowed in a 'frontend' section",
    );
}

#[test]
fn keyword_capabilities() {
    err1(
        &be("    bind :80"),
        "t.cfg:2: ",
        "'bind' is not allowed in a 'backend' section",
    );
    err1(
        &fe("    server s 1.2.3.4:80"),
        "t.cfg:3: ",
        "'server' is not allowed in a 'frontend'",
    );
    err1(
        &fe("    balance leastconn"),
        "t.cfg:3: ",
        "'balance' is not allowed",
    );
    err1(
        &be("    default_backend x"),
        "t.cfg:2: ",
        "'default_backend' is not allowed",
    );
    err1(
        &be("    use_backend x"),
        "t.cfg:2: ",
        "'use_backend' is not allowed",
    );
    err1(
        &be("    maxconn 10"),
        "t.cfg:2: ",
        "'maxconn' is not allowed",
    );
    err1(
        "defaults\n    bind :80\n",
        "t.cfg:2: ",
        "'bind' is not allowed in a 'defaults' section",
    );
    err1(
        "defaults\n    acl a path /\n",
        "t.cfg:2: ",
        "not allowed in a 'defaults'",
    );
    err1(
        "defaults\n    server s 1.2.3.4:80\n",
        "t.cfg:2: ",
        "not allowed in a 'defaults'",
    );
    err1(
        "defaults\n    http-request deny\n",
        "t.cfg:2: ",
        "only allowed in a named defaults section",
    );
    err1(
        "defaults\n    stats admin if TRUE\n",
        "t.cfg:2: ",
        "not allowed in a 'defaults'",
    );
    err1(
        &fe("    option redispatch"),
        "t.cfg:3: ",
        "'option redispatch' is not allowed",
    );
    err1(
        &be("    option httplog"),
        "t.cfg:2: ",
        "'option httplog' is not allowed",
    );
    err1(
        &be("    frobnicate"),
        "t.cfg:2: ",
        "unknown keyword 'frobnicate' in 'backend' section",
    );
    err1(
        &be("    sever s 1.2.3.4:80"),
        "t.cfg:2: ",
        "(did you mean 'server'?)",
    );
    err1(
        &be("    dynamic-cookie-key"),
        "t.cfg:2: ",
        "'dynamic-cookie-key' expects <secret_key> as argument.",
    );
    err1(
        &be("    option tcplog"),
        "t.cfg:2: ",
        "'option tcplog' is not allowed in a 'backend' section",
    );
    err1(
        &be("    option redispach"),
        "t.cfg:2: ",
        "(did you mean 'redispatch'?)",
    );
    err1(&be("    zzzzzzzz"), "t.cfg:2: ", "section");
    assert!(!errs(&be("    zzzzzzzz"))[0].contains("did you mean"));
}

#[test]
fn options_and_no_options() {
    let c = ok("defaults
    option httpclose
    option redispatch
    option httplog
    option dontlognull
frontend f
    bind :80
    no option httpclose
    no option httplog
    default_backend b
backend b
    no option redispatch
listen l
    bind :81
    option http-server-close
");
    assert_eq!(proxy(&c, "f").options.conn_mode, HttpConnMode::KeepAlive);
    assert!(!proxy(&c, "f").options.httplog);
    assert!(proxy(&c, "f").options.dontlognull);
    assert_eq!(proxy(&c, "b").options.conn_mode, HttpConnMode::Close);
    assert!(!proxy(&c, "b").options.redispatch);
    assert!(proxy(&c, "l").options.redispatch);
    assert_eq!(proxy(&c, "l").options.conn_mode, HttpConnMode::ServerClose);
    err1(
        "defaults\n    no option forwardfor\n",
        "t.cfg:2: ",
        "not supported",
    );
    err1(
        "defaults\n    no option httpchk\n",
        "t.cfg:2: ",
        "not supported",
    );
    err1(
        "defaults\n    no timeout client\n",
        "t.cfg:2: ",
        "'no timeout' is not supported",
    );
    err1("defaults\n    no\n", "t.cfg:2: ", "expects a keyword");
    err1(
        "defaults\n    option redispatch now\n",
        "t.cfg:2: ",
        "expects an integer interval",
    );
    err1(
        "defaults\n    option redispatch 1 2\n",
        "t.cfg:2: ",
        "at most one argument",
    );
    err1(
        "defaults\n    option forwardfor except\n",
        "t.cfg:2: ",
        "expects an argument",
    );
    err1(
        "defaults\n    option forwardfor bogus\n",
        "t.cfg:2: ",
        "unknown 'option forwardfor'",
    );
    err1("defaults\n    option\n", "t.cfg:2: ", "expects an argument");
}

#[test]
fn httpchk_forms() {
    let hc = |args: &str| {
        let c = ok(&be(&format!("    option httpchk {args}")));
        proxy(&c, "b").http_check.clone()
    };
    let h = hc("");
    assert!(h.enabled);
    assert_eq!(
        (h.method.as_str(), h.uri.as_str(), h.version.as_str()),
        ("OPTIONS", "/", "HTTP/1.0")
    );
    let h = hc("/health");
    assert_eq!((h.method.as_str(), h.uri.as_str()), ("OPTIONS", "/health"));
    let h = hc("GET /health");
    assert_eq!((h.method.as_str(), h.uri.as_str()), ("GET", "/health"));
    let h = hc("HEAD /h HTTP/1.1");
    assert_eq!(h.version, "HTTP/1.1");
    err1(
        &be("    option httpchk GET /a HTTP/1.1 x"),
        "t.cfg:2: ",
        "at most",
    );
    err1(
        &be("    option httpchk GET health"),
        "t.cfg:2: ",
        "must start with '/'",
    );
    assert!(!ok(&be("")).proxies[0].http_check.enabled);
}

/// `option httpchk` and `http-check send` merge as in HAProxy 2.6 (the
/// reg-test checks/http-check-send): within a section the send line keeps
/// the option's method, URI and version and replaces its headers; a
/// section's own line drops what `defaults` gave.
#[test]
fn http_check_send_merges_with_option_httpchk() {
    let c = ok("defaults\n    option httpchk GET /status HTTP/1.1\\r\\nHdr:\\ gone\n    http-check send hdr Host h body test\nbackend inherits\n    server s 127.0.0.1:1 check\nbackend own\n    http-check send hdr Host other\n    server s 127.0.0.1:1 check\nbackend reset\n    option httpchk\n    server s 127.0.0.1:1 check\n");
    let h = &proxy(&c, "inherits").http_check;
    assert_eq!(
        (h.method.as_str(), h.uri.as_str(), h.version.as_str()),
        ("GET", "/status", "HTTP/1.1")
    );
    assert_eq!(h.headers, vec![("Host".to_string(), "h".to_string())]);
    assert_eq!(h.body.as_deref(), Some("test"));
    let h = &proxy(&c, "own").http_check;
    assert_eq!(
        (h.method.as_str(), h.uri.as_str(), h.version.as_str()),
        ("OPTIONS", "/", "HTTP/1.0")
    );
    assert_eq!(h.headers, vec![("Host".to_string(), "other".to_string())]);
    assert_eq!(h.body, None);
    let h = &proxy(&c, "reset").http_check;
    assert!(h.enabled && h.headers.is_empty() && h.body.is_none());
    assert_eq!(h.method, "OPTIONS");
}

#[test]
fn http_check_expect() {
    let ex = |args: &str| {
        let c = ok(&be(&format!(
            "    option httpchk\n    http-check expect {args}"
        )));
        let rules = proxy(&c, "b").http_check.rules.clone();
        match rules.last().map(|r| &r.step) {
            Some(HttpCheckStep::Expect(e)) => e.clone(),
            o => panic!("{o:?}"),
        }
    };
    assert_eq!(ex("status 200").kind, ExpectKind::Status(vec![(200, 200)]));
    assert_eq!(
        ex("status 200-399,404").kind,
        ExpectKind::Status(vec![(200, 399), (404, 404)])
    );
    assert_eq!(ex("rstatus ^2").kind, ExpectKind::RStatus("^2".into()));
    assert_eq!(ex("string OK").kind, ExpectKind::String("OK".into()));
    let e = ex("! string fail");
    assert!(e.negate);
    assert_eq!(e.loc.line, 3);
    let e = ex("min-recv 10 error-status L7RSP !hdr name -m beg \"X-A\" value -m reg \"^v[0-9]\"");
    assert!(e.negate);
    assert_eq!(e.min_recv, Some(10));
    assert_eq!(e.error_status, Some(crate::config::CheckStatus::L7Rsp));
    assert_eq!(
        e.kind,
        ExpectKind::Hdr {
            full: false,
            name: HdrMatch::Beg("X-A".into()),
            value: Some(HdrMatch::Reg("^v[0-9]".into()))
        }
    );
    assert_eq!(
        ex("fhdr name x-b").kind,
        ExpectKind::Hdr {
            full: true,
            name: HdrMatch::Str("x-b".into()),
            value: None
        }
    );
    assert_eq!(
        ex("hdr name-lf -m beg \"%[var(check.x)]\" value-lf \"%[be_name]\"").kind,
        ExpectKind::Hdr {
            full: false,
            name: HdrMatch::Fmt(Box::new(HdrMatch::Beg("%[var(check.x)]".into()))),
            value: Some(HdrMatch::Fmt(Box::new(HdrMatch::Str("%[be_name]".into()))))
        }
    );
    err1(
        &be("    http-check expect hdr name-lf -m reg \"%[var(check.x)]\""),
        "t.cfg:2: ",
        "log-format string is not supported with a regex matching method",
    );
    err1(
        &be("    http-check set-var(txn.x) str(a)"),
        "t.cfg:2: ",
        "the scopes allowed for http-check are proc, sess and check",
    );
    err1(
        &be("    http-check expect hdr name-lf \"%[path]\""),
        "t.cfg:2: ",
        "reads the request",
    );
    err1(
        &be("    http-check expect hdr name x -m foo y"),
        "t.cfg:2: ",
        "unexpected argument '-m'",
    );
    // Several sends and expects: a sequence; a connect must come first.
    let c = ok(&be(
        "    option httpchk\n    http-check connect\n    http-check send meth GET uri /a\n    http-check expect status 200\n    http-check comment second\n    http-check connect port 8080 linger\n    http-check send uri /b ver HTTP/1.1\n    http-check expect string ok",
    ));
    let r = &proxy(&c, "b").http_check.rules;
    assert_eq!(r.len(), 7, "{r:?}");
    assert!(matches!(r[1].step, HttpCheckStep::Send(None)));
    assert!(matches!(
        &r[4].step,
        HttpCheckStep::Connect(CheckConnect {
            port: Some(8080),
            linger: true,
            ..
        })
    ));
    assert!(
        matches!(&r[5].step, HttpCheckStep::Send(Some(q)) if q.uri == "/b" && q.method == "OPTIONS")
    );
    err1(
        &be("    option httpchk\n    http-check send uri /a\n    http-check connect"),
        "t.cfg:4: ",
        "first step MUST also be a 'connect'",
    );
    err1(
        &be("    http-check expect status 99"),
        "t.cfg:2: ",
        "invalid status code",
    );
    err1(
        &be("    http-check expect status 300-200"),
        "t.cfg:2: ",
        "invalid status range",
    );
    err1(
        &be("    http-check expect header x"),
        "t.cfg:2: ",
        "unknown 'http-check expect'",
    );
    err1(
        &be("    http-check expect status"),
        "t.cfg:2: ",
        "expects an argument",
    );
    err1(
        &be("    http-check send body-lf %[nope]"),
        "t.cfg:2: ",
        "'http-check send body-lf': unknown sample fetch 'nope'",
    );
    err1(
        &be("    http-check send uri-lf %[path]"),
        "t.cfg:2: ",
        "reads the request",
    );
    err1(
        &be("    http-check send hdr x %[src,nope]"),
        "t.cfg:2: ",
        "unknown converter 'nope'",
    );
    err1(
        &be("    http-check send meth"),
        "t.cfg:2: ",
        "expects a value",
    );
    err1(
        &be("    http-check send uri health"),
        "t.cfg:2: ",
        "must start with '/'",
    );
    err1(
        &be("    http-check send hdr Host"),
        "t.cfg:2: ",
        "expects NAME VALUE",
    );
    err1(
        &be("    option httpchk\n    http-check connect proto fcgi"),
        "t.cfg:3: ",
        "'http-check connect proto fcgi' needs the backend's FastCGI application",
    );
    err1(
        &be("    http-check"),
        "t.cfg:2: ",
        "expects comment, connect, disable-on-404, send, send-state, expect, set-var or unset-var",
    );
}

#[test]
fn http_check_send() {
    let c = ok(&be(
        "    http-check send meth GET uri /health ver HTTP/1.1 hdr Host app.local hdr X-Check 1
    http-check expect status 200",
    ));
    let h = &c.proxies[0].http_check;
    assert!(h.enabled);
    assert_eq!(
        (h.method.as_str(), h.uri.as_str(), h.version.as_str()),
        ("GET", "/health", "HTTP/1.1")
    );
    assert_eq!(
        h.headers,
        [
            ("Host".to_string(), "app.local".to_string()),
            ("X-Check".to_string(), "1".to_string())
        ]
    );
}

// ---------------------------------------------------------------- defaults

#[test]
fn defaults_are_inherited() {
    let c = ok("defaults
    timeout client 10s
    timeout server 20s
    option forwardfor
    balance leastconn
    retries 5
    http-reuse always
    default-server inter 5s fall 5
    log global
    maxconn 100
frontend f
    bind :80
    default_backend b
backend b
    server s 1.2.3.4:80
");
    let f = proxy(&c, "f");
    assert_eq!(f.timeouts.client, Some(Duration::from_secs(10)));
    assert!(f.options.forwardfor.is_some());
    assert_eq!(f.maxconn, Some(100));
    assert_eq!(f.log, [ProxyLog::Global]);
    let b = proxy(&c, "b");
    assert_eq!(b.timeouts.server, Some(Duration::from_secs(20)));
    assert_eq!(b.balance, Balance::LeastConn);
    assert_eq!(b.retries, 5);
    assert_eq!(b.http_reuse, HttpReuse::Always);
    assert_eq!(b.servers[0].opts.inter, Duration::from_secs(5));
    assert_eq!(b.servers[0].opts.fall, 5);
    assert_eq!(b.servers[0].opts.rise, 2);
}

#[test]
fn defaults_section_resets() {
    let c = ok("defaults
    timeout client 10s
    balance leastconn
backend a
defaults
    timeout server 1s
backend b
");
    let a = proxy(&c, "a");
    assert_eq!(a.timeouts.client, Some(Duration::from_secs(10)));
    assert_eq!(a.balance, Balance::LeastConn);
    let b = proxy(&c, "b");
    assert_eq!(b.timeouts.client, None, "the second defaults starts afresh");
    assert_eq!(b.balance, Balance::RoundRobin);
    assert_eq!(b.timeouts.server, Some(Duration::from_secs(1)));
}

#[test]
fn proxy_overrides_defaults_without_changing_them() {
    let c = ok("defaults
    timeout connect 5s
backend a
    timeout connect 1s
backend b
");
    assert_eq!(
        proxy(&c, "a").timeouts.connect,
        Some(Duration::from_secs(1))
    );
    assert_eq!(
        proxy(&c, "b").timeouts.connect,
        Some(Duration::from_secs(5))
    );
}

#[test]
fn named_defaults_and_from() {
    let c = ok("defaults slow
    timeout server 60s
defaults fast
    timeout server 1s
backend a from slow
backend b
defaults from slow
    retries 1
backend c
");
    assert_eq!(
        proxy(&c, "a").timeouts.server,
        Some(Duration::from_secs(60))
    );
    assert_eq!(proxy(&c, "b").timeouts.server, Some(Duration::from_secs(1)));
    assert_eq!(
        proxy(&c, "c").timeouts.server,
        Some(Duration::from_secs(60))
    );
    assert_eq!(proxy(&c, "c").retries, 1);
    err1("backend a from\n", "t.cfg:1: ", "'from' needs");
}

#[test]
fn defaults_carry_across_files_but_sections_do_not() {
    let d = tmpdir();
    let a = write(&d, "a.cfg", b"defaults\n    timeout client 7s\n");
    let b = write(
        &d,
        "b.cfg",
        b"frontend f\n    bind :80\n    default_backend b\nbackend b\n",
    );
    let c = parse_files(&[a.clone(), b.clone()]).unwrap();
    assert_eq!(proxy(&c, "f").timeouts.client, Some(Duration::from_secs(7)));

    // A keyword at the top of a file is out of section even if the previous
    // file ended inside one.
    let c2 = write(&d, "c.cfg", b"backend x\n");
    let d2 = write(&d, "d.cfg", b"    server s 1.2.3.4:80\n");
    let e = parse_files(&[c2, d2.clone()]).unwrap_err();
    assert_eq!(e.len(), 1);
    assert_eq!(
        e[0].to_string(),
        format!(
            "{}:1: unknown keyword 'server' out of section (expected global, defaults, frontend, backend or listen)",
            d2.display()
        )
    );
}

#[test]
fn multiple_files_errors_name_their_file() {
    let d = tmpdir();
    let a = write(&d, "a.cfg", b"global\n    bogus\n");
    let b = write(&d, "b.cfg", b"\n\nglobal\n    nbthread 0\n");
    let e = parse_files(&[a.clone(), b.clone()]).unwrap_err();
    assert_eq!(e.len(), 2);
    assert!(e[0]
        .to_string()
        .starts_with(&format!("{}:2: ", a.display())));
    assert!(e[1]
        .to_string()
        .starts_with(&format!("{}:4: ", b.display())));
}

#[test]
fn missing_and_non_utf8_files() {
    let d = tmpdir();
    let missing = d.join("nope.cfg");
    let e = parse_files(std::slice::from_ref(&missing)).unwrap_err();
    assert!(e[0].to_string().starts_with(&format!(
        "{}: cannot read configuration file",
        missing.display()
    )));
    let bad = write(&d, "bad.cfg", b"global\n\n    log \xff\n");
    let e = parse_files(std::slice::from_ref(&bad)).unwrap_err();
    assert_eq!(
        e[0].to_string(),
        format!("{}:3: invalid UTF-8", bad.display())
    );
}

// ---------------------------------------------------------------- listen

#[test]
fn listen_is_frontend_and_backend() {
    let c = ok("listen web
    bind :80
    balance roundrobin
    server s1 10.0.0.1:80 check
    server s2 10.0.0.2:80 check
");
    let l = proxy(&c, "web");
    assert_eq!(l.kind, ProxyKind::Listen);
    assert!(l.kind.is_frontend() && l.kind.is_backend());
    assert_eq!(c.frontends().count(), 1);
    assert_eq!(c.backends().count(), 1);
    assert_eq!(l.servers.len(), 2);
    // A listen may be used as a backend by others.
    ok("frontend f\n    bind :81\n    default_backend web\nlisten web\n    bind :80\n");
    // Legacy address on the header line.
    let c = ok("listen old 127.0.0.1:8000\n");
    assert_eq!(proxy(&c, "old").binds[0].addrs[0].port(), 8000);
    err1("listen l\n", "t.cfg:1: ", "listen 'l' has no 'bind' line");
}

#[test]
fn frontend_and_backend_may_share_a_name() {
    ok("frontend app\n    bind :80\n    default_backend app\nbackend app\n");
}

// ---------------------------------------------------------------- servers

#[test]
fn servers_and_default_server() {
    let c = ok("backend b
    default-server check inter 3s fall 4 rise 1 maxconn 50 ssl verify none
    server a 10.0.0.1:80 weight 10 maxqueue 20 backup
    server b [::1]:8080 no-check no-ssl weight 0 disabled
    server c app.internal:443 fastinter 500ms downinter 10s slowstart 30s ca-file /ca.pem sni str(api.example.com) pool-max-conn 8 pool-purge-delay 1s verify required
    server d ::1:81 pool-max-conn -1
");
    let b = proxy(&c, "b");
    let s = &b.servers;
    assert_eq!(s.len(), 4);
    assert_eq!(
        (s[0].name.as_str(), s[0].host.as_str(), s[0].port),
        ("a", "10.0.0.1", 80)
    );
    assert_eq!(s[0].loc.line, 3);
    assert_eq!(s[0].opts.weight, 10);
    assert_eq!(s[0].opts.maxqueue, Some(20));
    assert!(s[0].opts.backup && s[0].opts.check && s[0].opts.ssl);
    assert_eq!(s[0].opts.maxconn, Some(50));
    assert_eq!(s[0].opts.inter, Duration::from_secs(3));
    assert_eq!((s[0].opts.rise, s[0].opts.fall), (1, 4));
    assert_eq!(s[0].opts.verify, Some(Verify::None));
    assert_eq!((s[1].host.as_str(), s[1].port), ("::1", 8080));
    assert!(!s[1].opts.check && !s[1].opts.ssl && s[1].opts.disabled);
    assert_eq!(s[1].opts.weight, 0);
    assert_eq!(s[2].host, "app.internal");
    assert_eq!(s[2].opts.fastinter, Some(Duration::from_millis(500)));
    assert_eq!(s[2].opts.downinter, Some(Duration::from_secs(10)));
    assert_eq!(s[2].opts.slowstart, Some(Duration::from_secs(30)));
    assert_eq!(s[2].opts.ca_file, Some(PathBuf::from("/ca.pem")));
    assert_eq!(
        s[2].opts.sni.as_ref().map(|e| e.text()),
        Some("str(api.example.com)")
    );
    assert_eq!(s[2].opts.pool_max_conn, Some(8));
    assert_eq!(s[2].opts.pool_purge_delay, Duration::from_secs(1));
    assert_eq!(s[2].opts.verify, Some(Verify::Required));
    assert_eq!(s[3].opts.pool_max_conn, None);
    assert_eq!(b.default_server.maxconn, Some(50));
}

#[test]
fn server_defaults_are_haproxys() {
    let c = ok(&be("    server s 1.2.3.4:80"));
    let o = &c.proxies[0].servers[0].opts;
    assert_eq!(o.weight, 1);
    assert_eq!(o.inter, Duration::from_secs(2));
    assert_eq!((o.rise, o.fall), (2, 3));
    assert!(!o.check && !o.backup && !o.disabled && !o.ssl);
    assert_eq!(o.max_reuse, None);
}

#[test]
fn max_reuse_values() {
    let c = ok(&be(
        "    default-server max-reuse 3\n    server a 1.2.3.4:80\n    server b 1.2.3.4:80 max-reuse 0\n    server c 1.2.3.4:80 max-reuse -5",
    ));
    let s = &c.proxies[0].servers;
    assert_eq!(s[0].opts.max_reuse, Some(3));
    assert_eq!(s[1].opts.max_reuse, Some(0));
    assert_eq!(s[2].opts.max_reuse, None);
    err1(
        &be("    server a 1.2.3.4:80 max-reuse lots"),
        "t.cfg:2:",
        "'max-reuse' expects an integer",
    );
}

#[test]
fn server_errors() {
    let s = |l: &str| be(&format!("    {l}"));
    err1(&s("server"), "t.cfg:2: ", "expects an argument");
    err1(&s("server s"), "t.cfg:2: ", "needs an address");
    // No port: the client's destination port (HAProxy's), so no check.
    err1(
        &s("server s 1.2.3.4 check"),
        "t.cfg:2: ",
        "server 's' has neither service port nor check port",
    );
    // Without an address (0.0.0.0, `::`, none), HAProxy asks for no port:
    // the check goes to port 0 and fails.
    for a in ["0.0.0.0", ":", "[::]"] {
        assert!(parse_str("t.cfg", &be(&format!("    server s {a} check"))).is_ok());
    }
    // Port 0 is none too (HAProxy's `str2sa_range` gives 0 either way).
    for a in [
        "1.2.3.4",
        "1.2.3.4:",
        "1.2.3.4:0",
        "[::1]",
        "ipv4@1.2.3.4",
        "app.test",
    ] {
        let c = parse_str("t.cfg", &be(&format!("    server s {a}"))).unwrap();
        let s = &c.backends().next().unwrap().servers[0];
        assert_eq!(s.port, 0, "{a}");
        assert!(s.opts.map_ports, "{a}");
    }
    let c = parse_str("t.cfg", &be("    server s 1.2.3.4:80")).unwrap();
    assert!(!c.backends().next().unwrap().servers[0].opts.map_ports);
    err1(&s("server s 1.2.3.4:65536"), "t.cfg:2: ", "out of range");
    err1(
        &s("server s/x 1.2.3.4:80"),
        "t.cfg:2: ",
        "invalid server name",
    );
    err1(
        &s("server s 1.2.3.4:80 weight 257"),
        "t.cfg:2: ",
        "out of range (0..256)",
    );
    err1(
        &s("server s 1.2.3.4:80 weight"),
        "t.cfg:2: ",
        "expects a value",
    );
    err1(
        &s("server s 1.2.3.4:80 rise 0"),
        "t.cfg:2: ",
        "out of range",
    );
    err1(
        &s("server s 1.2.3.4:80 inter 0"),
        "t.cfg:2: ",
        "greater than zero",
    );
    err1(
        &s("server s 1.2.3.4:80 verify maybe"),
        "t.cfg:2: ",
        "'none' or 'required'",
    );
    err1(
        &s("server s 1.2.3.4:80 cookie"),
        "t.cfg:2: ",
        "server option 'cookie' expects a value",
    );
    for o in ["send-proxy-v2-ssl", "send-proxy-v2-ssl-cn"] {
        err1(
            &s(&format!("server s 1.2.3.4:80 {o}")),
            "t.cfg:2: ",
            &format!("server option '{o}' is not supported"),
        );
    }
    err1(
        &s("default-server bogus 1"),
        "t.cfg:2: ",
        "unknown server option 'bogus'",
    );
    err1(
        "backend b\n    server s 1.2.3.4:80\n    server s 1.2.3.5:80\n",
        "t.cfg:3: ",
        "server 's' is declared twice in backend 'b' (first at t.cfg:2)",
    );
}

#[test]
fn balance_algorithms() {
    let bal = |a: &str| {
        let c = ok(&be(&format!("    balance {a}")));
        c.proxies[0].balance.clone()
    };
    assert_eq!(bal("roundrobin"), Balance::RoundRobin);
    assert_eq!(bal("static-rr"), Balance::StaticRr);
    assert_eq!(bal("leastconn"), Balance::LeastConn);
    assert_eq!(bal("first"), Balance::First);
    assert_eq!(bal("source"), Balance::Source);
    assert_eq!(bal("random"), Balance::Random { draws: 2 });
    assert_eq!(bal("random 3"), Balance::Random { draws: 3 });
    assert_eq!(
        bal("uri"),
        Balance::Uri {
            whole: false,
            len: None,
            depth: None,
            path_only: false,
        }
    );
    assert_eq!(
        bal("uri whole len 10 depth 2 path-only"),
        Balance::Uri {
            whole: true,
            len: Some(10),
            depth: Some(2),
            path_only: true,
        }
    );
    assert_eq!(
        bal("hdr(Host)"),
        Balance::Hdr {
            name: "host".into(),
            use_domain_only: false
        }
    );
    assert_eq!(
        bal("hdr(host) use_domain_only"),
        Balance::Hdr {
            name: "host".into(),
            use_domain_only: true
        }
    );
    // `check_post` and its old `max_wait` are accepted (HAProxy 2.6
    // looks in a POST's body in any case).
    assert_eq!(
        bal("url_param x check_post 64"),
        Balance::UrlParam { name: "x".into() }
    );
    err1(
        &be("    balance url_param x other"),
        "t.cfg:2: ",
        "'balance url_param' only accepts 'check_post' modifier (got 'other').",
    );
    err1(
        &be("    balance roundrobin x"),
        "t.cfg:2: ",
        "unexpected argument",
    );
    err1(&be("    balance"), "t.cfg:2: ", "expects an algorithm");
    err1(&be("    balance random 0"), "t.cfg:2: ", "out of range");
    err1(
        &be("    balance uri len"),
        "t.cfg:2: ",
        "expects an argument",
    );
}

#[test]
fn backend_misc() {
    let c = ok(&be(
        "    retries 0\n    http-reuse never\n    load-server-state-from-file local",
    ));
    let b = &c.proxies[0];
    assert_eq!(b.retries, 0);
    assert_eq!(b.http_reuse, HttpReuse::Never);
    assert_eq!(
        b.load_server_state.as_ref().unwrap().value,
        LoadServerState::Local
    );
    assert_eq!(b.load_server_state.as_ref().unwrap().loc.line, 4);
    for (m, v) in [
        ("safe", HttpReuse::Safe),
        ("aggressive", HttpReuse::Aggressive),
    ] {
        assert_eq!(
            ok(&be(&format!("    http-reuse {m}"))).proxies[0].http_reuse,
            v
        );
    }
    err1(&be("    retries 101"), "t.cfg:2: ", "out of range");
    err1(
        &be("    http-reuse sometimes"),
        "t.cfg:2: ",
        "unknown 'http-reuse' mode",
    );
    err1(
        &be("    load-server-state-from-file all"),
        "t.cfg:2: ",
        "global, local or none",
    );
}

// ---------------------------------------------------------------- serve-files

#[test]
fn serve_files() {
    let c = ok(&be("    serve-files /srv/www index index.htm index default.html listing on follow-symlinks on max-age 600"));
    let sf = c.proxies[0].serve_files.as_ref().unwrap();
    assert_eq!(sf.root, PathBuf::from("/srv/www"));
    assert_eq!(sf.index, ["index.htm", "default.html"]);
    assert!(sf.listing && sf.follow_symlinks);
    assert_eq!(sf.max_age, Some(600));
    assert_eq!(sf.loc.line, 2);
    let c = ok(&be("    serve-files /srv/www max-age 1h"));
    let sf = c.proxies[0].serve_files.as_ref().unwrap();
    assert_eq!(sf.index, ["index.html"]);
    assert!(!sf.listing && !sf.follow_symlinks);
    assert_eq!(sf.max_age, Some(3600));
    err1(&be("    serve-files"), "t.cfg:2: ", "expects a directory");
    err1(
        &be("    serve-files /x listing maybe"),
        "t.cfg:2: ",
        "'on' or 'off'",
    );
    err1(
        &be("    serve-files /x index"),
        "t.cfg:2: ",
        "expects a value",
    );
    err1(
        &be("    serve-files /x index a/b"),
        "t.cfg:2: ",
        "invalid index",
    );
    err1(
        &be("    serve-files /x gzip on"),
        "t.cfg:2: ",
        "unknown 'serve-files' option",
    );
    err1(
        &fe("    serve-files /x"),
        "t.cfg:3: ",
        "not allowed in a 'frontend'",
    );
    err1(
        "backend b\n    server s 1.2.3.4:80\n    serve-files /x\n",
        "t.cfg:3: ",
        "both 'serve-files' and servers",
    );
}

// ---------------------------------------------------------------- ACLs

#[test]
fn acl_criteria() {
    let c = ok(&fe("    acl a path /x /y
    acl b path_beg -i /api
    acl c path_end .css
    acl d path_dir img
    acl e hdr(Host) -i example.com
    acl f hdr_beg(host) -i www.
    acl g hdr_end(host) .org
    acl h method GET HEAD
    acl i src 10.0.0.0/8 ::1
    acl j path_reg ^/u/[0-9]+$
    acl k hdr(x-api-key) -m found
    acl l path -m beg /static
    acl m url_beg /a
    acl n path_sub -- -x
    acl o req.ver 1.0
    acl p always_true
    acl a path /z"));
    let f = proxy(&c, "f");
    let t = |name: &str| f.acl(name).unwrap().tests[0].clone();
    assert_eq!(
        f.acl("a").unwrap().tests.len(),
        2,
        "same name lines are ORed"
    );
    assert_eq!(t("a").fetch, Fetch::Path);
    assert_eq!(t("a").method, MatchMethod::Str);
    assert_eq!(
        t("a").patterns,
        [Pattern::Str("/x".into()), Pattern::Str("/y".into())]
    );
    assert_eq!(t("a").loc.line, 3);
    assert_eq!(
        (t("b").method, t("b").ignore_case),
        (MatchMethod::Beg, true)
    );
    assert_eq!(t("c").method, MatchMethod::End);
    assert_eq!(t("d").method, MatchMethod::Dir);
    assert_eq!(t("e").fetch, Fetch::Hdr("host".into()));
    assert!(t("e").ignore_case);
    assert_eq!(
        (t("f").fetch, t("f").method),
        (Fetch::Hdr("host".into()), MatchMethod::Beg)
    );
    assert_eq!(t("g").method, MatchMethod::End);
    assert_eq!(t("h").fetch, Fetch::Method);
    assert_eq!(t("h").patterns.len(), 2);
    assert_eq!(t("i").fetch, Fetch::Src);
    assert_eq!(t("i").method, MatchMethod::Ip);
    assert!(matches!(t("i").patterns[0], Pattern::Net(n) if n.prefix == 8));
    assert_eq!(t("j").method, MatchMethod::Reg);
    assert_eq!(t("j").patterns, [Pattern::Str("^/u/[0-9]+$".into())]);
    assert_eq!(t("k").method, MatchMethod::Found);
    assert!(t("k").patterns.is_empty());
    assert_eq!(t("l").method, MatchMethod::Beg);
    assert_eq!(t("m").fetch, Fetch::Url);
    assert_eq!(t("n").patterns, [Pattern::Str("-x".into())]);
    assert_eq!(t("o").fetch, Fetch::ReqVer);
    assert_eq!(t("p").fetch, Fetch::Always(true));
}

#[test]
fn acl_errors() {
    let a = |l: &str| fe(&format!("    {l}"));
    err1(&a("acl"), "t.cfg:3: ", "expects an argument");
    err1(&a("acl x"), "t.cfg:3: ", "missing ACL criterion");
    err1(&a("acl x/y path /"), "t.cfg:3: ", "invalid ACL name");
    err1(
        &a("acl x cookiez(a) b"),
        "t.cfg:3: ",
        "unknown ACL criterion 'cookiez'",
    );
    // (`hdr` without a name is HAProxy's: it finds nothing.)
    err1(&a("acl x hdr(host"), "t.cfg:3: ", "missing ')'");
    err1(&a("acl x hdr_beg(host,1) a"), "t.cfg:3: ", "occurrence");
    err1(&a("acl x path(a) b"), "t.cfg:3: ", "takes no argument");
    err1(&a("acl x path -z /"), "t.cfg:3: ", "unknown ACL flag '-z'");
    err1(
        &a("acl x path -f /nonexistent/file"),
        "t.cfg:3: ",
        "cannot read file",
    );
    err1(
        &a("acl x path -m found -f /dev/null"),
        "t.cfg:3: ",
        "needs a match method",
    );
    err1(&a("acl x path -m"), "t.cfg:3: ", "expects a match method");
    // HAProxy has no default match for a binary, a method or a
    // variable's value read as is (checked side by side with haproxy -c).
    for acl in [
        "acl x var(txn.a) foo",
        "acl x var(txn.a),set-var(txn.b) foo",
        "acl x req.body foo",
        "acl x req.payload(0,3) abc",
    ] {
        err1(
            &a(acl),
            "t.cfg:3: ",
            "matching method must be specified first",
        );
    }
    for acl in [
        "acl x var(txn.a),lower foo",
        "acl x var(txn.a) -m str foo",
        "acl x var(txn.a) -m found",
        "acl x req.body -m bin 41",
        "acl x str(a) foo",
    ] {
        assert!(parse_str("t.cfg", &a(acl)).is_ok(), "{acl}");
    }
    err1(
        &a("acl x path -m foo 3"),
        "t.cfg:3: ",
        "unsupported match method",
    );
    // A string criterion is cast or measured, as HAProxy 2.6 does.
    for acl in [
        "acl x path -m len 3",
        "acl x path -m int 3",
        "acl x hdr(x) -m ip 10.0.0.1",
        "acl x path_len 3",
        "acl x cook_len(a) gt 3",
    ] {
        assert!(parse_str("t.cfg", &a(acl)).is_ok(), "{acl}");
    }
    err1(
        &a("acl x method -m int 3"),
        "t.cfg:3: ",
        "cannot be used with",
    );
    // A sample that cannot be cast to the method's type (HAProxy 2.6's
    // sample_casts): a binary or a method is no integer, a boolean no
    // address; a string is cast, a variable's type is known at run time.
    for acl in [
        "acl x req.hdr(x-e),b64dec -m int le 4",
        "acl x req.hdr(x-e),b64dec -m bool",
        "acl x req.hdr(x-e),sha1 -m ip 10.0.0.1",
    ] {
        err1(&a(acl), "t.cfg:3: ", "cannot be used with fetch keyword");
    }
    for acl in [
        "acl x req.hdr(x-e),lower -m int le 4",
        "acl x req.hdr(x-e),lower -m ip 10.0.0.1",
        "acl x var(txn.v) -m int 3",
        "acl x req.hdr(x-e),b64dec -m found",
        "acl x src,ipmask(24) -m int 1",
    ] {
        assert!(parse_str("t.cfg", &a(acl)).is_ok(), "{acl}");
    }
    // HAProxy 2.6 has no `req.hdr_beg` (nor _end, _sub...).
    err1(
        &a("acl x req.hdr_beg(host) x"),
        "t.cfg:3: ",
        "unknown ACL criterion",
    );
    err1(
        &a("acl x nope_fetch 3"),
        "t.cfg:3: ",
        "unknown ACL criterion",
    );
    err1(
        &a("acl x req.hdr_cnt(host) x"),
        "t.cfg:3: ",
        "not an integer",
    );
    err1(&a("acl x ssl_fc 1"), "t.cfg:3: ", "takes no value");
    err1(
        &a("acl x path,nope"),
        "t.cfg:3: ",
        "unknown converter 'nope'",
    );
    assert!(parse_str("t.cfg", &a("acl x path -m ip 1.2.3.4")).is_ok());
    err1(&a("acl x src 1.2.3.999"), "t.cfg:3: ", "invalid IP address");
    // `-i` on an address, an integer or a boolean means nothing (HAProxy
    // accepts it).
    for acl in [
        "acl x src -i 1.2.3.4",
        "acl x int(1) -i 1",
        "acl x ssl_fc -i",
    ] {
        assert!(parse_str("t.cfg", &a(acl)).is_ok(), "{acl}");
    }
    err1(&a("acl x src -m beg 1"), "t.cfg:3: ", "only supports IP");
    err1(&a("acl x method G(T"), "t.cfg:3: ", "invalid HTTP method");
    err1(&a("acl x path -m found /x"), "t.cfg:3: ", "takes no value");
    err1(&a("acl x always_true 1"), "t.cfg:3: ", "takes no value");
}

#[test]
fn conditions() {
    let c = ok(&fe("    acl a path /a
    acl b path /b
    acl c path /c
    use_backend b if a b || !c or { path_beg /x } !{ method POST } ! a
    use_backend b unless a
    use_backend b if !a
    use_backend b if METH_GET LOCALHOST TRUE
    use_backend b"));
    let f = proxy(&c, "f");
    let u = &f.use_backends;
    assert_eq!(u.len(), 5);
    let c0 = u[0].cond.as_ref().unwrap();
    assert!(!c0.unless);
    assert_eq!(c0.loc.line, 6);
    assert_eq!(c0.terms.len(), 3);
    assert_eq!(c0.terms[0].len(), 2);
    assert_eq!(
        c0.terms[0][1],
        CondTerm {
            negate: false,
            acl: AclRef::Named {
                name: "b".into(),
                index: 1
            }
        }
    );
    assert!(c0.terms[1][0].negate);
    assert_eq!(c0.terms[2].len(), 3);
    assert!(matches!(&c0.terms[2][0].acl, AclRef::Inline(t) if t.method == MatchMethod::Beg));
    assert!(c0.terms[2][1].negate);
    assert!(c0.terms[2][2].negate, "'! a' negates a");
    assert!(u[1].cond.as_ref().unwrap().unless);
    assert!(u[2].cond.as_ref().unwrap().terms[0][0].negate);
    let pre = &u[3].cond.as_ref().unwrap().terms[0];
    assert!(
        matches!(&pre[0].acl, AclRef::Inline(t) if t.fetch == Fetch::Method && t.patterns.len() == 2)
    );
    assert!(matches!(&pre[1].acl, AclRef::Inline(t) if t.fetch == Fetch::Src));
    assert!(matches!(&pre[2].acl, AclRef::Inline(t) if t.fetch == Fetch::Always(true)));
    assert!(u[4].cond.is_none());
    assert_eq!(u[4].loc.line, 10);
}

#[test]
fn condition_errors() {
    let r = |l: &str| fe(&format!("    acl a path /a\n    {l}"));
    err1(
        &r("use_backend b if"),
        "t.cfg:4: ",
        "missing condition after 'if'",
    );
    err1(
        &r("use_backend b unless"),
        "t.cfg:4: ",
        "missing condition after 'unless'",
    );
    err1(
        &r("use_backend b if nope"),
        "t.cfg:4: ",
        "ACL 'nope' is not declared",
    );
    err1(&r("use_backend b if a ||"), "t.cfg:4: ", "ends with");
    err1(
        &r("use_backend b if || a"),
        "t.cfg:4: ",
        "missing ACL before '||'",
    );
    err1(&r("use_backend b if a !"), "t.cfg:4: ", "'!' at the end");
    err1(&r("use_backend b if { path /x"), "t.cfg:4: ", "missing '}'");
    err1(&r("use_backend b if a }"), "t.cfg:4: ", "unexpected '}'");
    err1(
        &r("use_backend b if { }"),
        "t.cfg:4: ",
        "missing ACL criterion",
    );
    err1(
        &r("use_backend b if ! || a"),
        "t.cfg:4: ",
        "'!' before '||'",
    );
    err1(&r("use_backend b a"), "t.cfg:4: ", "then 'if' or 'unless'");
    err1(&r("use_backend"), "t.cfg:4: ", "expects a backend name");
    err1(
        &r("use_backend be_%[req.hdr(host),nope]"),
        "t.cfg:4: ",
        "unknown converter 'nope'",
    );
    err1(&r("use_backend %[be_name]"), "t.cfg:4: ", "needs a backend");
    // HAProxy's rule: declared before use.
    err1(
        &fe("    use_backend b if late\n    acl late path /"),
        "t.cfg:3: ",
        "ACL 'late' is not declared",
    );
}

// ---------------------------------------------------------------- http-request

#[test]
fn http_request_return() {
    let d = tmpdir();
    let body = write(&d, "body.json", b"{\"ok\":true}");
    let c = ok(&fe(&format!(
        "    http-request return status 200 content-type text/plain string \"hello world\" hdr X-A 1 hdr X-B \"two words\" if {{ path /hi }}
    http-request return status 503 content-type application/json file {} if {{ path /j }}
    http-request return status 204 if {{ path /nothing }}
    http-request return content-type text/plain lf-string \"%[path]\"",
        body.display()
    )));
    let r = &proxy(&c, "f").http_request;
    let HttpRequestAction::Return(a) = &r[0].action else {
        panic!()
    };
    assert_eq!(a.status, 200);
    assert_eq!(a.content_type.as_deref(), Some("text/plain"));
    assert_eq!(a.body, ReturnBody::String("hello world".into()));
    let hdrs: Vec<(&str, Option<&[u8]>)> = a
        .headers
        .iter()
        .map(|(n, f)| (n.as_str(), f.as_literal()))
        .collect();
    assert_eq!(
        hdrs,
        [("X-A", Some(&b"1"[..])), ("X-B", Some(&b"two words"[..]))]
    );
    assert!(r[0].cond.is_some());
    assert_eq!(r[0].loc.line, 3);
    let HttpRequestAction::Return(a) = &r[1].action else {
        panic!()
    };
    assert_eq!(a.status, 503);
    assert!(matches!(&a.body, ReturnBody::File { content, .. } if content == b"{\"ok\":true}"));
    let HttpRequestAction::Return(a) = &r[2].action else {
        panic!()
    };
    assert_eq!((a.status, &a.body), (204, &ReturnBody::None));
    let HttpRequestAction::Return(a) = &r[3].action else {
        panic!()
    };
    assert_eq!(a.status, 200);
    let ReturnBody::LfString(f) = &a.body else {
        panic!("{:?}", a.body)
    };
    assert_eq!(f.text(), "%[path]");
}

#[test]
fn http_request_return_errors() {
    let r = |l: &str| fe(&format!("    http-request return {l}"));
    err1(&r("status 99"), "t.cfg:3: ", "invalid status code");
    err1(&r("status 600"), "t.cfg:3: ", "invalid status code");
    err1(&r("status abc"), "t.cfg:3: ", "invalid status code");
    err1(&r("status"), "t.cfg:3: ", "expects a value");
    err1(&r("string hi"), "t.cfg:3: ", "needs a 'content-type'");
    // HAProxy ignores 'content-type' on an answer without payload (its
    // reg-test sample_fetches/ubase64 relies on it).
    ok(&r("content-type text/plain"));
    err1(
        &r("status 204 content-type text/plain string x"),
        "t.cfg:3: ",
        "must not have a body",
    );
    err1(
        &r("content-type a/b string x string y"),
        "t.cfg:3: ",
        "only one of",
    );
    err1(
        &r("content-type a/b file /definitely/not/here"),
        "t.cfg:3: ",
        "cannot read '/definitely/not/here'",
    );
    err1(
        &r("hdr Content-Length 5"),
        "t.cfg:3: ",
        "cannot be set with 'hdr'",
    );
    err1(&r("hdr X-A"), "t.cfg:3: ", "expects NAME VALUE");
    err1(&r("hdr \"bad name\" v"), "t.cfg:3: ", "invalid header name");
    err1(&r("hdr X-A \"a\\r\\nb\""), "t.cfg:3: ", "invalid character");
    err1(
        &r("errorfiles x"),
        "t.cfg:3: ",
        "no http-errors section 'x'",
    );
}

#[test]
fn http_request_other_actions() {
    let c = ok(&fe("    acl blocked src 10.0.0.0/8
    http-request deny if blocked
    http-request deny deny_status 429 if { path_beg /slow }
    http-request allow if { path /ok }
    http-request redirect location https://example.com/ code 301 if { path /old }
    http-request redirect prefix /v2 drop-query append-slash if { path_beg /v1 }
    http-request redirect scheme https if !{ hdr(x-forwarded-proto) https }
    http-request set-header X-Forwarded-Proto https
    http-request add-header Via \"1.1 ebb\"
    http-request del-header X-Secret
    http-request use-service prometheus-exporter if { path /metrics }
    redirect prefix /legacy code 308 if { path_beg /old/ }"));
    let r: Vec<&HttpRequestAction> = proxy(&c, "f")
        .http_request
        .iter()
        .map(|r| &r.action)
        .collect();
    assert_eq!(r[0], &HttpRequestAction::Deny { status: 403 });
    assert_eq!(r[1], &HttpRequestAction::Deny { status: 429 });
    assert_eq!(r[2], &HttpRequestAction::Allow);
    assert_eq!(
        r[3],
        &HttpRequestAction::Redirect(Redirect {
            kind: RedirectKind::Location,
            target: "https://example.com/".into(),
            fmt: None,
            code: 301,
            drop_query: false,
            append_slash: false,
            cookie: None,
            late: false,
            ignore_empty: false,
        })
    );
    let HttpRequestAction::Redirect(rd) = r[4] else {
        panic!()
    };
    assert_eq!(
        (rd.kind, rd.code, rd.drop_query, rd.append_slash),
        (RedirectKind::Prefix, 302, true, true)
    );
    let HttpRequestAction::Redirect(rd) = r[5] else {
        panic!()
    };
    assert_eq!(rd.kind, RedirectKind::Scheme);
    assert_eq!(
        r[6],
        &HttpRequestAction::Header(HeaderEdit {
            op: EditOp::Set,
            name: "X-Forwarded-Proto".into(),
            value: lf("https")
        })
    );
    assert_eq!(
        r[7],
        &HttpRequestAction::Header(HeaderEdit {
            op: EditOp::Add,
            name: "Via".into(),
            value: lf("1.1 ebb")
        })
    );
    assert_eq!(
        r[8],
        &HttpRequestAction::Header(HeaderEdit {
            op: EditOp::Del,
            name: "X-Secret".into(),
            value: lf("")
        })
    );
    assert_eq!(
        r[9],
        &HttpRequestAction::UseService(Service::PrometheusExporter)
    );
    let HttpRequestAction::Redirect(rd) = r[10] else {
        panic!()
    };
    assert_eq!(rd.code, 308);
}

#[test]
fn redirect_cookies_take_haproxys_attributes() {
    let c = ok(&fe("    redirect location /a set-cookie S=1
    http-request redirect prefix /p clear-cookie U= code 301
    redirect location /c set-cookie A=1 clear-cookie B"));
    let cookies: Vec<Option<&str>> = proxy(&c, "f")
        .http_request
        .iter()
        .map(|r| match &r.action {
            HttpRequestAction::Redirect(rd) => rd.cookie.as_deref(),
            _ => None,
        })
        .collect();
    // HAProxy 2.6's: the last of the two options wins.
    assert_eq!(
        cookies,
        [
            // The `http-request` rule before the `redirect` lines.
            Some("U=; path=/; Max-Age=0;"),
            Some("S=1; path=/;"),
            Some("B; path=/; Max-Age=0;")
        ]
    );
}

#[test]
fn http_request_errors() {
    let r = |l: &str| fe(&format!("    http-request {l}"));
    err1(&r(""), "t.cfg:3: ", "expects an argument");
    err1(&r("tarpit x"), "t.cfg:3: ", "unexpected 'x'");
    err1(
        &r("deny deny_status 42"),
        "t.cfg:3: ",
        "invalid status code",
    );
    err1(
        &r("deny bogus"),
        "t.cfg:3: ",
        "'http-request deny' option 'bogus' expects a value",
    );
    err1(&r("allow now"), "t.cfg:3: ", "unexpected 'now'");
    // Redirect targets are log-format strings, checked at start.
    ok(&r("redirect location /x?from=%[path]"));
    err1(
        &r("redirect location /x?from=%[nope]"),
        "t.cfg:3: ",
        "unknown sample fetch 'nope'",
    );
    err1(
        &r("redirect"),
        "t.cfg:3: ",
        "expects a type: location, prefix or scheme",
    );
    err1(
        &r("redirect elsewhere /x"),
        "t.cfg:3: ",
        "unknown redirect option 'elsewhere'",
    );
    err1(&r("redirect location"), "t.cfg:3: ", "expects an argument");
    err1(
        &r("redirect location /x code 200"),
        "t.cfg:3: ",
        "invalid redirect code",
    );
    err1(
        &r("redirect location /x set-cookie"),
        "t.cfg:3: ",
        "'set-cookie' expects an argument",
    );
    err1(
        &r("redirect location /x clear-cookie \"\""),
        "t.cfg:3: ",
        "'clear-cookie' expects an argument",
    );
    err1(
        &r("redirect location /x set-cookies a=b"),
        "t.cfg:3: ",
        "unknown redirect option",
    );
    err1(&r("set-header X-A"), "t.cfg:3: ", "expects NAME VALUE");
    err1(&r("set-header X-A b c"), "t.cfg:3: ", "expects NAME VALUE");
    err1(&r("set-header X:A b"), "t.cfg:3: ", "invalid header name");
    err1(&r("del-header"), "t.cfg:3: ", "expects NAME");
    err1(&r("use-service lua.hello"), "t.cfg:3: ", "unknown service");
    err1(&r("use-service"), "t.cfg:3: ", "expects a service name");
    err1(
        &r("deny if nope"),
        "t.cfg:3: ",
        "ACL 'nope' is not declared",
    );
}

#[test]
fn http_response_rules() {
    let c = ok(&fe("    http-response set-header X-Frame-Options DENY
    http-response add-header X-A b if { path /a }
    http-response del-header Server"));
    let r = &proxy(&c, "f").http_response;
    assert_eq!(r.len(), 3);
    assert_eq!(
        r[0].action,
        HttpResponseAction::Header(HeaderEdit {
            op: EditOp::Set,
            name: "X-Frame-Options".into(),
            value: lf("DENY")
        })
    );
    assert!(r[1].cond.is_some());
    assert_eq!(
        r[2].action,
        HttpResponseAction::Header(HeaderEdit {
            op: EditOp::Del,
            name: "Server".into(),
            value: lf("")
        })
    );
    err1(
        &fe("    http-response frobnicate"),
        "t.cfg:3: ",
        "unknown 'http-response' action 'frobnicate'",
    );
    err1(
        &fe("    http-response deny deny_status 1000"),
        "t.cfg:3: ",
        "deny_status",
    );
    err1(
        &fe("    http-response set-header X"),
        "t.cfg:3: ",
        "expects NAME VALUE",
    );
    err1(
        &fe("    http-response del-header"),
        "t.cfg:3: ",
        "expects NAME",
    );
}

// ---------------------------------------------------------------- errorfile

#[test]
fn errorfiles() {
    let d = tmpdir();
    let good = write(
        &d,
        "503.http",
        b"HTTP/1.1 503 Service Unavailable\r\nContent-Type: text/plain\r\n\r\nbusy\n",
    );
    let good2 = write(&d, "404.http", b"HTTP/1.0 404 Not Found\n\nnope\n");
    let c = ok(&format!(
        "defaults\n    errorfile 503 {}\nbackend b\n    errorfile 404 {}\n",
        good.display(),
        good2.display()
    ));
    let b = proxy(&c, "b");
    assert_eq!(b.errorfiles.len(), 2, "inherited + own");
    let e = b.errorfile(503).unwrap();
    assert!(e.content.ends_with(b"busy\n"));
    assert_eq!(e.loc.line, 2);
    assert_eq!(b.errorfile(404).unwrap().loc.line, 4);
    // A later line for the same code replaces the earlier one.
    let c = ok(&format!(
        "backend b\n    errorfile 503 {}\n    errorfile 503 {}\n",
        good.display(),
        good.display()
    ));
    assert_eq!(c.proxies[0].errorfiles.len(), 1);
    assert_eq!(c.proxies[0].errorfiles[0].loc.line, 3);

    // HAProxy's documented idiom: an empty file closes without answering.
    let c = ok("defaults\n    errorfile 408 /dev/null\nbackend b\n");
    assert_eq!(proxy(&c, "b").errorfile(408).unwrap().content, b"");

    let bad = write(&d, "bad.http", b"<html>oops</html>");
    let nohdr = write(&d, "nohdr.http", b"HTTP/1.1 503 X\r\nA: b\r\n");
    err1(
        &be(&format!("    errorfile 503 {}", bad.display())),
        "t.cfg:2: ",
        "is not an HTTP response",
    );
    err1(
        &be(&format!("    errorfile 503 {}", nohdr.display())),
        "t.cfg:2: ",
        "no empty line",
    );
    err1(
        &be("    errorfile 503 /no/such/file"),
        "t.cfg:2: ",
        "cannot read '/no/such/file'",
    );
    err1(
        &be(&format!("    errorfile 418 {}", good.display())),
        "t.cfg:2: ",
        "is not one of",
    );
    err1(&be("    errorfile 503"), "t.cfg:2: ", "expects CODE FILE");
    // Larger than tune.bufsize.
    let mut big = b"HTTP/1.1 503 X\r\n\r\n".to_vec();
    big.resize(2000, b'x');
    let big = write(&d, "big.http", &big);
    err1(
        &format!(
            "global\n    tune.bufsize 1024\nbackend b\n    errorfile 503 {}\n",
            big.display()
        ),
        "t.cfg:4: ",
        "larger than tune.bufsize",
    );
}

#[test]
fn default_path_config_resolves_relative_files() {
    let d = tmpdir();
    write(&d, "503.http", b"HTTP/1.1 503 X\r\n\r\n");
    write(&d, "body.txt", b"hi");
    let cfg = write(
        &d,
        "ebb.cfg",
        b"global\n    default-path config\nfrontend f\n    bind :80\n    http-request return content-type text/plain file body.txt\n    errorfile 503 503.http\n    default_backend b\nbackend b\n    serve-files www\n",
    );
    let c = parse_files(&[cfg]).unwrap();
    assert_eq!(
        proxy(&c, "b").serve_files.as_ref().unwrap().root,
        d.join("www")
    );
    assert_eq!(proxy(&c, "f").errorfiles[0].path, d.join("503.http"));
    let c = ok("global\n    default-path origin /etc/ebb\nbackend b\n    serve-files www\n");
    assert_eq!(
        c.proxies[0].serve_files.as_ref().unwrap().root,
        PathBuf::from("/etc/ebb/www")
    );
    err1(
        "global\n    default-path elsewhere\n",
        "t.cfg:2: ",
        "'default-path' expects",
    );
    err1(
        "global\n    default-path origin\n",
        "t.cfg:2: ",
        "'default-path' expects",
    );
    let c = ok("global\n    default-path parent\nbackend b\n    serve-files www\n");
    assert_eq!(
        c.proxies[0].serve_files.as_ref().unwrap().root,
        PathBuf::from("../www")
    );
    // The policy carries over to the next file, relative to that file.
    let sub = d.join("sub");
    std::fs::create_dir_all(&sub).unwrap();
    let a = write(&d, "a.cfg", b"global\n    default-path config\n");
    let b = write(&sub, "b.cfg", b"backend b\n    serve-files www\n");
    let c = parse_files(&[a, b]).unwrap();
    assert_eq!(
        c.proxies[0].serve_files.as_ref().unwrap().root,
        sub.join("www")
    );
}

// ---------------------------------------------------------------- stats, log

#[test]
fn stats_keywords() {
    let c = ok("listen stats
    bind :8404
    acl local src 127.0.0.1
    stats uri /stats
    stats refresh 10s
    stats auth admin:s3cr:et
    stats auth ops:x
    stats realm Ebb
    stats hide-version
    stats admin if local
");
    let s = &proxy(&c, "stats").stats;
    assert!(s.enabled);
    assert_eq!(s.uri.as_ref().unwrap().value, "/stats");
    assert_eq!(s.uri.as_ref().unwrap().loc.line, 4);
    assert_eq!(s.effective_uri(), Some("/stats"));
    assert_eq!(s.refresh, Some(Duration::from_secs(10)));
    assert_eq!(s.auth.len(), 2);
    assert_eq!(
        (s.auth[0].user.as_str(), s.auth[0].password.as_str()),
        ("admin", "s3cr:et")
    );
    assert_eq!(s.realm.as_deref(), Some("Ebb"));
    assert!(s.hide_version);
    assert_eq!(s.admin.len(), 1);
    let c = ok(&be("    stats enable"));
    assert_eq!(c.proxies[0].stats.effective_uri(), Some("/haproxy?stats"));
    assert_eq!(ok(&be("")).proxies[0].stats.effective_uri(), None);
    // Inherited from defaults.
    let c = ok("defaults\n    stats uri /s\nbackend b\n");
    assert_eq!(c.proxies[0].stats.effective_uri(), Some("/s"));

    err1(
        &be("    stats uri stats"),
        "t.cfg:2: ",
        "must start with '/'",
    );
    err1(&be("    stats auth admin"), "t.cfg:2: ", "USER:PASSWORD");
    err1(&be("    stats auth :x"), "t.cfg:2: ", "user name");
    err1(
        &be("    stats admin"),
        "t.cfg:2: ",
        "expects 'if' or 'unless'",
    );
    err1(&be("    stats admin now"), "t.cfg:2: ", "unexpected 'now'");
    err1(&be("    stats refresh 0"), "t.cfg:2: ", "greater than zero");
    err1(
        &be("    stats show-legends now"),
        "t.cfg:2: ",
        "takes no argument",
    );
    err1(
        &be("    stats show-node a/b"),
        "t.cfg:2: ",
        "valid node name",
    );
    err1(
        &be("    stats show-bogus"),
        "t.cfg:2: ",
        "unknown 'stats show-bogus'",
    );
    err1(&be("    stats"), "t.cfg:2: ", "expects an argument");
    err1(
        &be("    stats enable now"),
        "t.cfg:2: ",
        "takes no argument",
    );
}

#[test]
fn proxy_log() {
    let c = ok(
        "defaults\n    log global\nbackend a\n    log stderr local0 err\nbackend b\n    no log\n",
    );
    assert_eq!(proxy(&c, "a").log.len(), 2);
    assert!(matches!(&proxy(&c, "a").log[1], ProxyLog::Target(t) if t.dest == LogDest::Stderr));
    assert!(proxy(&c, "b").log.is_empty());
    err1(&be("    log global now"), "t.cfg:2: ", "takes no argument");
    err1(&be("    no log x"), "t.cfg:2: ", "takes no argument");
}

// ---------------------------------------------------------------- cross-checks

#[test]
fn unknown_backends() {
    err1(
        "frontend f\n    bind :80\n    use_backend nope if TRUE\n    default_backend b\nbackend b\n",
        "t.cfg:3: ",
        "'use_backend' names unknown backend 'nope'",
    );
    err1(
        "frontend f\n    bind :80\n    default_backend nope\n",
        "t.cfg:3: ",
        "'default_backend' names unknown backend 'nope'",
    );
    // A frontend is not a backend.
    err1(
        "frontend f\n    bind :80\n    default_backend g\nfrontend g\n    bind :81\n",
        "t.cfg:3: ",
        "unknown backend 'g'",
    );
    // default_backend from defaults points at its defaults line.
    err1(
        "defaults\n    default_backend gone\nfrontend f\n    bind :80\n",
        "t.cfg:2: ",
        "unknown backend 'gone'",
    );
    // ...but backends do not care about an inherited default_backend.
    ok("defaults\n    default_backend b\nbackend b\n");
}

#[test]
fn frontend_without_bind() {
    err1(
        "frontend f\n    default_backend b\nbackend b\n",
        "t.cfg:1: ",
        "frontend 'f' has no 'bind' line",
    );
}

#[test]
fn duplicate_proxies() {
    err1(
        "backend b\nbackend b\n",
        "t.cfg:2: ",
        "backend 'b' has the same name as backend 'b' declared at t.cfg:1",
    );
    err1(
        "listen x\n    bind :80\nfrontend x\n    bind :81\n",
        "t.cfg:3: ",
        "frontend 'x' has the same name as listen 'x' declared at t.cfg:1",
    );
}

// ---------------------------------------------------------------- examples

#[test]
fn examples_parse() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples");
    for name in ["static-site.cfg", "mixed.cfg"] {
        let p = root.join(name);
        if let Err(e) = parse_files(std::slice::from_ref(&p)) {
            let msgs: Vec<String> = e.iter().map(|e| e.to_string()).collect();
            panic!("{} does not parse:\n{}", p.display(), msgs.join("\n"));
        }
    }
    let c = parse_files(&[root.join("mixed.cfg")]).unwrap();
    let main = c.frontend("main").unwrap();
    assert!(main
        .http_request
        .iter()
        .any(|r| matches!(r.action, HttpRequestAction::Return(_))));
    assert!(main
        .http_request
        .iter()
        .any(|r| matches!(r.action, HttpRequestAction::Redirect(_))));
    assert!(c.backend("static").unwrap().serve_files.is_some());
    assert!(c.backend("site").unwrap().serve_files.is_some());
}

#[test]
fn env_vars_in_config() {
    let c = ok("frontend f\n    bind \"${HOST}:${PORT}\"\n    default_backend b\nbackend b\n    server s \"${NOPE-127.0.0.1}:80\"\n");
    assert_eq!(
        c.proxies[0].binds[0].addrs,
        ["10.0.0.1:8080".parse::<SocketAddr>().unwrap()]
    );
    assert_eq!(c.proxies[1].servers[0].host, "127.0.0.1");
    // An empty value leaves an empty (quoted) word, not a missing one.
    err1(
        "frontend f\n    bind \"$EMPTY\"\n",
        "t.cfg:2: ",
        "empty address",
    );
}

#[test]
fn real_env_is_used_by_parse_str() {
    // parse_str reads the process environment; an unset variable expands to
    // nothing, so the default applies.
    let c = parse_str(
        "x.cfg",
        "backend b\n    server s \"${EBB_TEST_SURELY_UNSET_VAR-10.9.8.7}:80\"\n",
    )
    .unwrap();
    assert_eq!(c.proxies[0].servers[0].host, "10.9.8.7");
    let _ = no_env("x");
}

// ---------------------------------------------------------------- robustness

mod fuzz {
    use super::super::parse_str_with_env;
    use proptest::prelude::*;

    const KEYWORDS: &[&str] = &[
        "global",
        "defaults",
        "frontend f",
        "backend b",
        "listen l",
        "bind",
        ":80",
        "server",
        "acl",
        "if",
        "unless",
        "{",
        "}",
        "!",
        "||",
        "http-request",
        "return",
        "redirect",
        "use_backend",
        "default_backend",
        "timeout",
        "client",
        "option",
        "stats",
        "\"",
        "'",
        "\\",
        "#",
        "$",
        "${",
        "}",
        "hdr(host)",
        "path_beg",
        "status",
        "1s",
        "-i",
        "weight",
        "serve-files",
        "errorfile",
        "no",
        "log",
        "balance",
        "\n",
        " ",
        "\t",
        "\\x",
        "0",
    ];

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(2000))]

        #[test]
        fn quote_round_trips(s in "\\PC*|[ '\"#$\\\\\r\n\t{}a-z]{0,40}") {
            let q = super::super::quote(&s);
            let w = super::super::lexer::tokenize(&q, &|_| Some("X".into()), &super::super::lexer::LinePos { file: "f", line: 1 });
            prop_assert_eq!(w, Ok(vec![s]));
        }

        #[test]
        fn arbitrary_text_never_panics(s in "\\PC{0,300}") {
            let _ = parse_str_with_env("fuzz.cfg", &s, &|_| None);
        }

        #[test]
        fn keyword_soup_never_panics(parts in proptest::collection::vec(0..KEYWORDS.len(), 0..80)) {
            let s: String = parts.iter().map(|&i| KEYWORDS[i]).collect::<Vec<_>>().join(" ");
            let _ = parse_str_with_env("fuzz.cfg", &s, &|v| if v == "X" { Some("a b".into()) } else { None });
        }

        #[test]
        fn errors_always_have_a_line(s in "(frontend f|backend b|global|bind|server s|acl|[a-z :/\"'#{}!]){0,40}") {
            if let Err(errs) = parse_str_with_env("fuzz.cfg", &s.replace('|', "\n"), &|_| None) {
                for e in errs {
                    prop_assert!(e.to_string().starts_with("fuzz.cfg:"));
                }
            }
        }
    }
}

#[test]
fn rules_after_an_unconditional_final_rule_are_warnings() {
    // HAProxy 2.6 accepts them with a warning ("previous 'http-request'
    // action is final and has no condition attached, further entries are
    // NOOP"): so does ebb, one warning per rule that never runs.
    let c = ok(&fe(
        "    http-request deny\n    http-request return status 200\n    http-request allow",
    ));
    let w = unreachable_rules(&c.proxies[0]);
    assert_eq!(w.len(), 2, "{w:?}");
    assert!(
        w[0].starts_with("t.cfg:4: previous 'http-request' action at t.cfg:3 is final"),
        "{w:?}"
    );
    assert!(w[1].starts_with("t.cfg:5: "), "{w:?}");
    let c = ok(&fe(
        "    http-request redirect scheme https\n    redirect prefix /x\n    redirect prefix /y",
    ));
    // `redirect` lines are another list, run after the `http-request`
    // rules: HAProxy 2.6.12 warns of none of them.
    assert!(unreachable_rules(&c.proxies[0]).is_empty());
    // Header rules do not end the evaluation; conditional rules neither.
    let c = ok(&fe("    http-request set-header X-A b
    http-request deny if { path /x }
    http-request use-service prometheus-exporter unless { path /y }
    http-request return status 200"));
    assert!(unreachable_rules(&c.proxies[0]).is_empty());
}

#[test]
fn return_with_an_empty_file_needs_no_content_type() {
    let d = tmpdir();
    let empty = write(&d, "empty", b"");
    let c = ok(&fe(&format!(
        "    http-request return status 200 file {}",
        empty.display()
    )));
    let HttpRequestAction::Return(r) = &c.proxies[0].http_request[0].action else {
        panic!()
    };
    assert!(matches!(&r.body, ReturnBody::File { content, .. } if content.is_empty()));
    // `default-errorfiles`: the proxy's own error answer for the status.
    let c = ok(&fe("    http-request return status 503 default-errorfiles"));
    let HttpRequestAction::Return(r) = &c.proxies[0].http_request[0].action else {
        panic!()
    };
    assert!(matches!(&r.body, ReturnBody::Errorfile(None)));
}

/// A configuration that HAProxy 2.6 accepts (`haproxy -c` says valid) and
/// that uses only what ebb implements must parse as is.
#[test]
fn haproxy_compatible_sample() {
    let c = ok(r#"global
    log stdout format raw local0 info
    stats socket /tmp/x.sock mode 600 level admin nice -10
    profiling.tasks auto
defaults
    mode http
    timeout client 1s
    timeout server 1s
    timeout connect 1s
frontend main
    bind :18080 name http
    bind :::18081 v6only
    bind [::1]:18082
    bind ::1:18083
    acl is_api path_beg /api/
    acl a path /a
    acl b path /b
    http-request deny if a b || !a or { path_beg /x } !{ method POST } ! a
    http-request deny if a !b
    http-request return status 204 hdr Cache-Control no-store if { path /ping }
    http-request return status 200 content-type text/plain string "ok" if { path /healthz }
    http-request redirect prefix /static code 302 drop-query append-slash if { path_beg /files/ }
    use_backend app if is_api || { hdr_beg(host) -i api. }
    use_backend app if METH_GET LOCALHOST TRUE HTTP_1.1
    default_backend app
backend app
    balance random 3
    option httpchk GET /health
    http-check expect status 200-399
    server app1 127.0.0.1:9001 check weight 10 maxconn 100 pool-max-conn -1 pool-purge-delay 1s
    server app2 [::1]:9002 check no-check
listen stats
    bind 127.0.0.1:18404
    stats uri /stats
    stats admin if LOCALHOST
"#);
    let main = c.frontend("main").unwrap();
    assert_eq!(main.binds.len(), 4);
    assert_eq!(
        main.binds[3].addrs[0],
        "[::1]:18083".parse::<SocketAddr>().unwrap()
    );
    let d = main.http_request[0].cond.as_ref().unwrap();
    assert_eq!(d.terms.len(), 3);
    assert_eq!(d.terms[2].len(), 3);
    assert!(d.terms[2][1].negate);
}

#[test]
fn quote_makes_any_string_one_word() {
    for s in [
        "",
        "plain",
        "a b",
        "it's",
        "\"${HOME}\"",
        "#x",
        "a\\b",
        "l1\nl2\r",
        "'",
    ] {
        let text = format!("backend b\n    serve-files {}\n", quote(s));
        let c = parse_str_with_env("q.cfg", &text, &|_| Some("BAD".into()));
        match (s, c) {
            ("", Ok(c)) => assert_eq!(
                c.proxies[0].serve_files.as_ref().unwrap().root,
                PathBuf::from("")
            ),
            (_, Ok(c)) => assert_eq!(
                c.proxies[0].serve_files.as_ref().unwrap().root,
                PathBuf::from(s)
            ),
            (_, Err(e)) => panic!("{s:?}: {e:?}"),
        }
    }
}

#[test]
fn tls_policy_keywords_defaults_and_errors() {
    let c = ok("global\n    crt-base /certs\n    ca-base /cas\n    ssl-default-bind-ciphers HIGH:!aRSA\n    ssl-default-bind-ciphersuites TLS_AES_128_GCM_SHA256\n    ssl-default-bind-curves X25519:P-256\n    ssl-default-bind-options ssl-min-ver TLSv1.2 no-tls-tickets prefer-client-ciphers no-tlsv13\nfrontend f\n    bind :443 ssl crt a.pem crt-list l.txt crt /abs.pem ciphers ECDHE-RSA-AES128-GCM-SHA256\n    http-request return status 200\nbackend b\n    server s 127.0.0.1:1 ssl ca-file ca.pem\n");
    let f = c.frontends().next().expect("frontend");
    let s = f.binds[0].ssl.as_ref().expect("ssl");
    assert_eq!(
        s.crts,
        [PathBuf::from("/certs/a.pem"), PathBuf::from("/abs.pem")]
    );
    assert_eq!(s.crt_lists, [(1, PathBuf::from("/certs/l.txt"))]);
    assert_eq!(s.crt_base, PathBuf::from("/certs"));
    // The line's own setting wins; the defaults fill the rest.
    assert_eq!(s.ciphers.as_deref(), Some("ECDHE-RSA-AES128-GCM-SHA256"));
    assert_eq!(s.ciphersuites.as_deref(), Some("TLS_AES_128_GCM_SHA256"));
    assert_eq!(s.curves.as_deref(), Some("X25519:P-256"));
    assert!(s.no_tls_tickets && s.prefer_client_ciphers && s.no_tls13);
    assert_eq!(s.versions(), [TlsVersion::Tls12]);
    // force-tlsv13 on the line against no-tlsv13 from the defaults: none.
    let e = errs("global\n    ssl-default-bind-options no-tlsv13\nfrontend f\n    bind :444 ssl crt b.pem force-tlsv13\n");
    assert!(
        e[0].starts_with("t.cfg:4: ") && e[0].contains("leave no version"),
        "{e:?}"
    );
    let b = c.backends().next().expect("backend");
    assert_eq!(
        b.servers[0].opts.ca_file,
        Some(PathBuf::from("/cas/ca.pem"))
    );
    let g = |l: &str| format!("global\n    {l}\n");
    err1(
        &g("ssl-default-bind-ciphers DHE-RSA-AES128-SHA"),
        "t.cfg:2: ",
        "no TLSv1.2 cipher that ebb implements",
    );
    err1(
        &g("ssl-default-bind-ciphersuites TLS_AES_128_CCM_SHA256"),
        "t.cfg:2: ",
        "no TLSv1.3 cipher suite",
    );
    err1(
        &g("ssl-default-bind-curves P-256:bogus"),
        "t.cfg:2: ",
        "unknown curve 'bogus'",
    );
    err1(
        &g("ssl-default-bind-options ssl-min-ver TLSv1.1"),
        "t.cfg:2: ",
        "TLSv1.2 and TLSv1.3 only",
    );
    err1(
        &g("ssl-default-bind-options no-tlsv12 no-tlsv13"),
        "t.cfg:2: ",
        "leaves no TLS version",
    );
    err1(
        &g("ssl-default-bind-options strict-sni"),
        "t.cfg:2: ",
        "unknown option 'strict-sni'",
    );
    err1(
        &g("ssl-default-server-ciphers MEDIUM"),
        "t.cfg:2: ",
        "no TLSv1.2 cipher",
    );
    err1(
        &g("ssl-default-server-options prefer-client-ciphers"),
        "t.cfg:2: ",
        "unknown option",
    );
    let c = ok("global\n    ssl-default-server-ciphers ECDHE-RSA-AES128-GCM-SHA256\n    ssl-default-server-options force-tlsv12 no-tls-tickets\nbackend b\n    server s 127.0.0.1:1 ssl verify none ciphersuites TLS_AES_128_GCM_SHA256\n    server p 127.0.0.1:2\n");
    let b = c.backends().next().expect("backend");
    let t = &b.servers[0].opts.tls;
    assert_eq!(t.ciphers.as_deref(), Some("ECDHE-RSA-AES128-GCM-SHA256"));
    assert_eq!(t.ciphersuites.as_deref(), Some("TLS_AES_128_GCM_SHA256"));
    assert!(t.no_tls_tickets);
    assert_eq!(t.versions(), [TlsVersion::Tls12]);
    // Not an `ssl` server: the defaults fill its settings too, as
    // HAProxy's (a `tcp-check connect ssl` or `check-ssl` uses them).
    let p = &b.servers[1].opts.tls;
    assert_eq!(p.ciphers.as_deref(), Some("ECDHE-RSA-AES128-GCM-SHA256"));
    assert!(p.no_tls_tickets);
    assert_eq!(p.versions(), [TlsVersion::Tls12]);
    err1(
        &be("server s 127.0.0.1:1 ssl ssl-max-ver TLSv1.1"),
        "t.cfg:",
        "leaves no TLS version",
    );
    let b = |opts: &str| format!("frontend f\n    bind {opts}\n");
    err1(
        &b(":80 ssl crt /x.pem force-tlsv11"),
        "t.cfg:2: ",
        "TLSv1.2 and TLSv1.3 only",
    );
    err1(
        &b(":80 ssl crt /x.pem ssl-max-ver TLSv1.1"),
        "t.cfg:2: ",
        "leaves no TLS version",
    );
    err1(
        &b(":80 ssl crt /x.pem ciphers MEDIUM"),
        "t.cfg:2: ",
        "no TLSv1.2 cipher",
    );
    err1(&b(":80 ciphers HIGH"), "t.cfg:2: ", "need 'ssl'");
    err1(&b(":80 prefer-client-ciphers"), "t.cfg:2: ", "need 'ssl'");
}

#[test]
fn hash_type_and_balance_factor() {
    let ht = |l: &str| ok(&be(l)).proxies[0].hash_type;
    assert_eq!(ht("    balance uri"), HashType::default());
    let c = ht("    hash-type consistent");
    assert!(c.consistent && c.avalanche && c.function == HashFunction::Sdbm);
    let c = ht("    hash-type consistent djb2");
    assert!(c.consistent && !c.avalanche && c.function == HashFunction::Djb2);
    let c = ht("    hash-type map-based wt6 avalanche");
    assert!(!c.consistent && c.avalanche && c.function == HashFunction::Wt6);
    assert_eq!(ht("    hash-balance-factor 150").balance_factor, 150);
    err1(
        &be("    hash-type map-based none"),
        "t.cfg:2: ",
        "unexpected 'none'",
    );
    err1(&be("    hash-type ring"), "t.cfg:2: ", "unknown method");
    err1(
        &be("    hash-balance-factor 50"),
        "t.cfg:2: ",
        "greater than 100",
    );
}

#[test]
fn stick_tables_and_their_rules() {
    let c = parse(&(fe("    stick-table type ip size 1m expire 10s store http_req_rate(10s),gpc0\n    http-request track-sc0 src\n    http-request track-sc1 req.hdr(host) table st\n    http-request sc-inc-gpc0(0)\n    http-request sc-set-gpt0(1) int(3)\n    http-request tarpit deny_status 429 if { sc_http_req_rate(0) gt 20 }\n    http-request deny if { src_get_gpc0(st) gt 1 } || { sc0_conn_cur gt 5 } || { table_cnt lt 0 }") + "backend st\n    stick-table type string len 64 size 1k store gpc0\n")).unwrap();
    let f = c.frontend("f").unwrap();
    let t = &f.stick_table.as_ref().unwrap().value;
    assert_eq!((t.name.as_str(), t.size), ("f", 1 << 20));
    assert!(matches!(
        &f.http_request[1].action,
        HttpRequestAction::TrackSc { n: 1, table: Some(t), .. } if t == "st"
    ));
    assert!(matches!(
        f.http_request[4].action,
        HttpRequestAction::Tarpit { status: 429 }
    ));
    // A table-only backend is a backend.
    assert!(c
        .backends()
        .any(|b| b.name == "st" && b.stick_table.is_some()));
    // A wrong table gets its own error at its line.
    err1(
        &be("    stick-table type ip size 1m store http_req_rate"),
        "t.cfg:2: ",
        "missing argument to store option 'http_req_rate'",
    );
    err1(
        &be("    stick-table type mac size 1"),
        "t.cfg:2: ",
        "unknown table type 'mac'",
    );
    err1(
        &be("    stick-table type ip size 1 peers p"),
        "t.cfg:2: ",
        "unknown peers section 'p'",
    );
    err1(
        "defaults\n    stick-table type ip size 1\n",
        "t.cfg:2: ",
        "not allowed in a 'defaults' section",
    );
    err1(
        &be("    stick-table type ip size 1\n    stick-table type ip size 2"),
        "t.cfg:3: ",
        "only one 'stick-table' per proxy",
    );
    // Stick rules: in backends, on a table that then stores server_id.
    let c = parse(&be(
        "    stick-table type ip size 10\n    stick on src\n    stick store-response res.hdr(x-ip)",
    ))
    .unwrap();
    let b = c.backends().next().unwrap();
    assert_eq!(b.stick_rules.len(), 2);
    assert!(b
        .stick_table
        .as_ref()
        .unwrap()
        .value
        .store
        .contains(&crate::table::DataType::ServerId));
    // use-server: a server of the backend (then not deletable), a
    // log-format name, a condition required.
    let c = parse(&be(
        "    use-server s2 if { path /a }\n    use-server %[req.hdr(x)] unless { path /b }\n    server s1 127.0.0.1:1\n    server s2 127.0.0.1:2",
    ))
    .unwrap();
    let b = c.backends().next().unwrap();
    assert_eq!(b.use_server.len(), 2);
    assert!(matches!(&b.use_server[0].target, UseServerTarget::Name(n) if n == "s2"));
    assert!(matches!(
        &b.use_server[1].target,
        UseServerTarget::Format(_)
    ));
    assert!(b.servers[1].opts.referenced && !b.servers[0].opts.referenced);
    err1(
        &be("    use-server s9 if { path /a }\n    server s1 127.0.0.1:1"),
        "t.cfg:2: ",
        "unable to find server 's9' referenced in a 'use-server' rule",
    );
    err1(
        &be("    use-server s1\n    server s1 127.0.0.1:1"),
        "t.cfg:2: ",
        "requires either 'if' or 'unless'",
    );
    err1(
        &fe("    use-server s1 if TRUE"),
        "t.cfg:3: ",
        "not allowed in a 'frontend' section",
    );
    err1(
        &fe("    stick on src"),
        "t.cfg:3: ",
        "not allowed in a 'frontend' section",
    );
    err1(
        &be("    stick-table type ip size 10\n    stick bogus src"),
        "t.cfg:3: ",
        "expects on, match",
    );
    err1(
        &be("    stick match src table nope"),
        "t.cfg:2: ",
        "no stick-table named 'nope'",
    );
    err1(
        &be("    stick-table type ip size 10\n    stick match res.hdr(x)"),
        "t.cfg:3: ",
        "reads the response",
    );
    // Rules naming no table, or a proxy without one, are refused at their line.
    err1(
        &fe("    http-request track-sc0 src"),
        "t.cfg:3: ",
        "no stick-table named 'f'",
    );
    err1(
        &fe("    http-request track-sc0 src table nope"),
        "t.cfg:3: ",
        "no stick-table named 'nope'",
    );
    err1(
        &fe("    http-request deny if { src_http_req_rate(nope) gt 1 }"),
        "t.cfg:3: ",
        "no stick-table named 'nope'",
    );
    err1(
        &fe("    http-request deny if { src_conn_cur gt 1 }"),
        "t.cfg:3: ",
        "no stick-table named 'f'",
    );
    err1(
        &fe("    http-request track-sc3 src"),
        "t.cfg:3: ",
        "track-sc0, track-sc1 and track-sc2",
    );
    err1(
        &fe("    http-request sc-inc-gpc0(5)"),
        "t.cfg:3: ",
        "sc-inc-gpc0(0)",
    );
    err1(
        &fe("    http-request deny if { sc_http_req_rate(4) gt 1 }"),
        "t.cfg:3: ",
        "not a tracked counter",
    );
    err1(
        &fe("    http-request sc-set-gpt0(0) req.hdr(x),bogus"),
        "t.cfg:3: ",
        "bogus",
    );
}

/// A literal log-format string (compares by its text).
fn lf(s: &str) -> crate::sample::LogFormat {
    crate::sample::LogFormat::parse(s, crate::sample::Scope::Response).unwrap()
}

#[test]
fn log_format_values_are_checked_at_start() {
    // The live defect: a sample in a header value must be evaluated, so
    // whatever ebb cannot evaluate is refused with file:line.
    ok(&fe("    http-request set-header X-Real-IP %[src]"));
    ok(&fe(
        "    http-request set-header X \"%[req.hdr(host),lower,field(1,:)] %ci:%cp\"",
    ));
    ok(&fe(
        "    http-response set-header X %[status]/%[res.hdr(server)]",
    ));
    err1(
        &fe("    http-request set-header X %[nope]"),
        "t.cfg:3: ",
        "unknown sample fetch 'nope'",
    );
    err1(
        &fe("    http-request add-header X %[src,nope]"),
        "t.cfg:3: ",
        "unknown converter 'nope'",
    );
    err1(
        &fe("    http-request set-header X %[src"),
        "t.cfg:3: ",
        "missing ']'",
    );
    err1(
        &fe("    http-request set-header X %[str(a),add(b)]"),
        "t.cfg:3: ",
        "expects an integer or a variable name",
    );
    err1(
        &fe("    http-request set-header X %[method,ipmask(8)]"),
        "t.cfg:3: ",
        "cannot be applied",
    );
    err1(
        &fe("    http-request set-header X %[status]"),
        "t.cfg:3: ",
        "reads the response",
    );
    err1(
        &fe("    http-request set-header X %[be_name]"),
        "t.cfg:3: ",
        "needs a backend",
    );
    err1(
        &fe("    http-response set-header X %[path]"),
        "t.cfg:3: ",
        "reads the request",
    );
    err1(
        &fe("    http-response set-header X %HM"),
        "t.cfg:3: ",
        "reads the request",
    );
    err1(
        &fe("    http-request set-header X %Tq"),
        "t.cfg:3: ",
        "'%Tq' is not supported",
    );
    err1(&fe("    http-request set-header X 5%"), "t.cfg:3: ", "'%%'");
    err1(
        &fe("    http-request return status 200 content-type text/plain lf-string %[nope]"),
        "t.cfg:3: ",
        "unknown sample fetch",
    );
    err1(
        &fe("    http-request return status 200 content-type text/plain string x hdr X %[nope]"),
        "t.cfg:3: ",
        "unknown sample fetch",
    );
}

#[test]
fn soft_stop_and_master_worker_keywords() {
    let c = ok("global\n    close-spread-time 5s\n    master-worker\n");
    assert_eq!(
        c.global.close_spread,
        Some(CloseSpread::Window(Duration::from_secs(5)))
    );
    assert!(c.global.master_worker);
    let c = ok("global\n    close-spread-time infinite\n");
    assert_eq!(c.global.close_spread, Some(CloseSpread::Infinite));
    err1(
        "global\n    close-spread-time soon\n",
        "t.cfg:2: ",
        "invalid time",
    );
    let c = ok("global\n    master-worker no-exit-on-failure\n");
    assert!(c.global.master_worker && c.global.no_exit_on_failure);
    err1(
        "global\n    master-worker exit\n",
        "t.cfg:2: ",
        "only supports 'no-exit-on-failure'",
    );
    let c = ok("global\n    stats socket /x level admin expose-fd listeners\n");
    assert!(c.global.stats_sockets[0].expose_fd);
    // The socket file's owner and group, by name or number.
    let c = ok("global\n    stats socket /x user root group root\n");
    assert_eq!(c.global.stats_sockets[0].owner, (Some(0), Some(0)));
    let c = ok("global\n    stats socket /x uid 7 gid 8\n");
    assert_eq!(c.global.stats_sockets[0].owner, (Some(7), Some(8)));
    err1(
        "global\n    stats socket 127.0.0.1:9999 uid 7\n",
        "t.cfg:2: ",
        "'uid' applies to a UNIX socket path only",
    );
    let c = ok(&fe("    option idle-close-on-response"));
    assert!(c.proxies[0].options.idle_close_on_response);
    err1(
        &be("    option idle-close-on-response"),
        "t.cfg:2: ",
        "idle-close-on-response",
    );
    let c = ok(&fe("    option socket-stats"));
    assert!(c.proxies[0].options.socket_stats);
    let c = ok(&fe("    option socket-stats\n    no option socket-stats"));
    assert!(!c.proxies[0].options.socket_stats);
    err1(&be("    option socket-stats"), "t.cfg:2: ", "socket-stats");
}

#[test]
fn peers_sections() {
    let g = "global\n    localpeer me\n";
    let c = ok(&format!(
        "{g}peers p\n    peer me 127.0.0.1:1000\n    peer other 127.0.0.1:1001\n{}",
        be("    stick-table type ip size 1 peers p")
    ));
    assert_eq!(c.local_peer, "me");
    let s = &c.peers[0];
    assert_eq!(
        s.listen_addr("me"),
        Some(PeerListen::Addr("127.0.0.1:1000".parse().unwrap()))
    );
    assert_eq!(s.peers[1].name, "other");
    assert_eq!(
        c.proxies[0]
            .stick_table
            .as_ref()
            .unwrap()
            .value
            .peers
            .as_deref(),
        Some("p")
    );
    // 2.x form: server lines and a bind line for the local one.
    let c = ok(&format!(
        "{g}peers p\n    bind 127.0.0.1:1000\n    server me\n    server other 127.0.0.1:1001\n"
    ));
    assert_eq!(
        c.peers[0].listen_addr("me"),
        Some(PeerListen::Addr("127.0.0.1:1000".parse().unwrap()))
    );
    // A socket handed over open (VTest's `bind "fd@${A}"`).
    let c = ok(&format!(
        "{g}peers p\n    bind fd@7\n    server me\n    server other 127.0.0.1:1001\n"
    ));
    assert_eq!(c.peers[0].listen_addr("me"), Some(PeerListen::Fd(7)));
    for (bind, err) in [
        ("unix@/tmp/x", "listens on IP:PORT or fd@N only"),
        ("fd@x", "expects a file descriptor number"),
    ] {
        let e = errs(&format!("{g}peers p\n    bind {bind}\n    server me\n"));
        assert!(e[0].starts_with("t.cfg:4: ") && e[0].contains(err), "{e:?}");
    }
    // A disabled section silently unshares its tables (HAProxy).
    let c = ok(&format!(
        "{g}peers p\n    disabled\n    peer me 127.0.0.1:1000\n{}",
        be("    stick-table type ip size 1 peers p")
    ));
    assert_eq!(c.proxies[0].stick_table.as_ref().unwrap().value.peers, None);
    // The local peer must be in a section a table names.
    err1(
        &format!(
            "{g}peers p\n    peer x 127.0.0.1:1000\n{}",
            be("    stick-table type ip size 1 peers p")
        ),
        "t.cfg:6: ",
        "unable to find local peer 'me' in peers section 'p'",
    );
    err1(
        &format!("{g}peers p\n    peer x\n"),
        "t.cfg:4: ",
        "needs an address",
    );
    err1(
        &format!("{g}peers p\n    peer x 127.0.0.1:1 check\n"),
        "t.cfg:4: ",
        "'peer' parameter 'check' is not supported by ebb in a peers section",
    );
    err1(
        &format!("{g}peers p\n    default-server ssl weight 2\n"),
        "t.cfg:4: ",
        "'default-server' parameter 'weight' is not supported",
    );
    err1(
        &format!("{g}peers p\n    bind 127.0.0.1:1 ssl crt /x.pem accept-proxy\n"),
        "t.cfg:4: ",
        "'bind' parameter 'accept-proxy' is not supported",
    );
    // TLS: `default-server` options for the `server` lines after it, the
    // local peer's `bind ... ssl`.
    let c = ok(&format!(
        "{g}peers p\n    server other 127.0.0.1:1001\n    default-server ssl verify none crt /x.pem\n    bind 127.0.0.1:1000 ssl crt /y.pem\n    server me\n    server third 127.0.0.1:1002 no-ssl\n    server fourth 127.0.0.1:1003 ca-file /ca.pem verify required\n"
    ));
    let s = &c.peers[0];
    assert!(s.peers[0].tls.is_none(), "before default-server");
    let me = s.peers[1].tls.as_ref().unwrap();
    assert_eq!(me.verify, Some(Verify::None));
    assert_eq!(me.tls.crt, Some(PathBuf::from("/x.pem")));
    assert!(s.peers[2].tls.is_none(), "no-ssl");
    let fourth = s.peers[3].tls.as_ref().unwrap();
    assert_eq!(fourth.verify, Some(Verify::Required));
    assert_eq!(fourth.ca_file, Some(PathBuf::from("/ca.pem")));
    assert_eq!(
        s.bind_ssl.as_ref().unwrap().crts,
        vec![PathBuf::from("/y.pem")]
    );
    // `table` lines: `p/t` locally, `/t` on the wire (HAProxy 2.6).
    let c = ok(&format!(
        "{g}peers p\n    peer me 127.0.0.1:1000\n    table t type ip size 1 store gpc(2)\n"
    ));
    let t = &c.peers[0].tables[0].value;
    assert_eq!((t.name.as_str(), t.wire_name()), ("p/t", "/t"));
    assert_eq!(t.peers.as_deref(), Some("p"));
    assert_eq!(c.stick_tables().count(), 1);
    err1(
        &format!("{g}peers p\n    peer x 127.0.0.1:1\n    table t type ip size 1\n"),
        "t.cfg:5: ",
        "unable to find local peer 'me' in peers section 'p'",
    );
    err1(
        &format!("{g}peers p\n    peer me 127.0.0.1:1\n    table t type ip size 1 peers p\n"),
        "t.cfg:5: ",
        "'peers' is implied",
    );
    err1(
        &format!("{g}peers p\n    peer me 127.0.0.1:1\n    table t type ip size 1\n    table t type ip size 2\n"),
        "t.cfg:6: ",
        "already declared",
    );
    err1(
        &format!("{g}peers p\n    peer me 127.0.0.1:1\n    table t type ip\n"),
        "t.cfg:5: ",
        "missing 'size'",
    );
    err1(
        &format!("{g}peers p\n    peer me 127.0.0.1:1\n    peer me 127.0.0.1:2\n"),
        "t.cfg:5: ",
        "already declared",
    );
    err1(
        &format!("{g}peers p\n    peer me 127.0.0.1:1\n    bind 127.0.0.1:2\n"),
        "t.cfg:5: ",
        "not supported with the 'peer' line",
    );
    err1(
        &format!("{g}peers p\n    server me\n"),
        "t.cfg:4: ",
        "has no address",
    );
    err1(
        &format!("{g}peers p\n    bogus\n"),
        "t.cfg:4: ",
        "unknown keyword 'bogus' in peers section",
    );
}

#[test]
fn global_set_var_is_context_free_and_proc_only() {
    let c = ok("global\n    set-var proc.a int(1)\n    set-var-fmt proc.b \"x%[var(proc.a)]\"\n");
    assert_eq!(c.global.set_vars.len(), 2);
    err1(
        "global\n    set-var txn.a int(1)\n",
        "t.cfg:2: ",
        "only scope 'proc'",
    );
    // HAProxy: "fetch method 'src' ... none of which is available here".
    err1(
        "global\n    set-var proc.a src\n",
        "t.cfg:2: ",
        "needs a connection",
    );
    err1(
        "global\n    set-var-fmt proc.a \"%ci\"\n",
        "t.cfg:2: ",
        "needs a connection",
    );
    err1(
        "global\n    set-var proc.a\n",
        "t.cfg:2: ",
        "requires a process-wide variable",
    );
}

#[test]
fn count_fetches_name_existing_proxies() {
    // startup/default_rules h15 and h17: in a defaults section a server
    // argument names its backend.
    ok("defaults d\n    mode http\n    http-request set-header x %[srv_conn(b/s)]\nbackend b from d\n    server s 127.0.0.1:80\n");
    err1(
        "defaults d\n    mode http\n    http-request set-header x %[srv_conn(s)]\nbackend b from d\n    server s 127.0.0.1:80\n",
        "t.cfg:3: ",
        "must name the server's backend",
    );
    err1(
        &be("    http-request set-header x %[srv_conn(nope)]\n    server s 127.0.0.1:80"),
        "t.cfg:2: ",
        "backend 'b' has no server named 'nope'",
    );
    err1(
        &fe("    http-request set-header x %[be_conn(zz)]"),
        "t.cfg:3: ",
        "no backend named 'zz'",
    );
}

/// `sni` is a sample expression (a bare name is refused, as HAProxy's
/// "unknown fetch method"); in a tcp backend only a constant one;
/// `check-sni` and `verifyhost` take names.
#[test]
fn server_sni_is_an_expression() {
    let http = "defaults\n    mode http\nbackend b\n";
    let c = parse_str(
        "t.cfg",
        &format!("{http}    server s 1.2.3.4:443 ssl sni req.hdr(host) check-sni c.test verifyhost v.test\n"),
    )
    .unwrap();
    let s = &c.backends().next().unwrap().servers[0];
    assert_eq!(s.opts.sni.as_ref().map(|e| e.text()), Some("req.hdr(host)"));
    assert!(!s.opts.sni.as_ref().unwrap().constant());
    assert_eq!(s.opts.check_sni.as_deref(), Some("c.test"));
    assert_eq!(s.opts.tls.verify_host.as_deref(), Some("v.test"));
    let e = errs(&format!(
        "{http}    server s 1.2.3.4:443 ssl sni api.example.com\n"
    ));
    assert!(
        e.iter()
            .any(|l| l.starts_with("t.cfg:4") && l.contains("sni expression")),
        "{e:?}"
    );
    let e =
        errs("defaults\n    mode tcp\nbackend b\n    server s 1.2.3.4:443 ssl sni req.ssl_sni\n");
    assert!(
        e.iter()
            .any(|l| l.starts_with("t.cfg:4") && l.contains("'mode http' only")),
        "{e:?}"
    );
    assert!(parse_str(
        "t.cfg",
        "defaults\n    mode tcp\nbackend b\n    server s 1.2.3.4:443 ssl sni str(a.test)\n"
    )
    .is_ok());
    let e = errs(&format!(
        "{http}    server s 1.2.3.4:443 ssl verifyhost bad..name\n"
    ));
    assert!(e.iter().any(|l| l.contains("verifyhost")), "{e:?}");
}

#[test]
fn retry_on() {
    // Default: conn-failure; a line replaces what was set (defaults too).
    let c = ok("defaults\n    retry-on 503 empty-response\nbackend d\nbackend b\n    retry-on none\nlisten l\n    bind :80\n    retry-on all-retryable-errors\n");
    let d = proxy(&c, "d").retry_on;
    assert!(d.status(503) && d.has(RetryOn::EMPTY_RESPONSE) && d.l7());
    assert!(!d.has(RetryOn::CONN_FAILURE) && !d.status(502));
    assert_eq!(proxy(&c, "b").retry_on, RetryOn(0));
    let l = proxy(&c, "l").retry_on;
    for s in [500, 502, 503, 504] {
        assert!(l.status(s), "{s}");
    }
    for s in [401, 403, 404, 408, 425, 501] {
        assert!(!l.status(s), "{s}");
    }
    for b in [
        RetryOn::CONN_FAILURE,
        RetryOn::EMPTY_RESPONSE,
        RetryOn::JUNK_RESPONSE,
        RetryOn::RESPONSE_TIMEOUT,
        RetryOn::ZERO_RTT,
    ] {
        assert!(l.has(b));
    }
    let b = ok(&be("    server s 127.0.0.1:1")).proxies[0].retry_on;
    assert_eq!(b, RetryOn(RetryOn::CONN_FAILURE));
    assert!(!b.l7());
    let k = ok(&be("    retry-on 401 403 404 408 425 501 conn-failure junk-response response-timeout 0rtt-rejected")).proxies[0].retry_on;
    assert!(k.status(401) && k.status(425) && k.status(501) && !k.status(500));
    err1(&be("    retry-on"), "t.cfg:2: ", "at least one keyword");
    err1(
        &be("    retry-on none 503"),
        "t.cfg:2: ",
        "'none' is only usable alone",
    );
    err1(
        &be("    retry-on 505"),
        "t.cfg:2: ",
        "unknown keyword '505'",
    );
    err1(
        &fe("    retry-on 503"),
        "t.cfg:3: ",
        "not allowed in a 'frontend'",
    );
    // The action takes no argument.
    let c = ok(&fe("    http-request disable-l7-retry if { method POST }"));
    assert_eq!(
        proxy(&c, "f").http_request[0].action,
        HttpRequestAction::DisableL7Retry
    );
    err1(
        &fe("    http-request disable-l7-retry now"),
        "t.cfg:3: ",
        "unexpected 'now'",
    );
}

/// `rate-limit sessions N`: HAProxy's integer reading (decimal, `0x`
/// hexadecimal, `0` octal), inherited from `defaults`, refused where it
/// means nothing (a backend) and for any kind but `sessions`.
#[test]
fn rate_limit_sessions() {
    let c = ok("defaults\n  rate-limit sessions 0x10\nfrontend f\n  bind :80\nfrontend g\n  rate-limit sessions 010\n  bind :81\nlisten l\n  rate-limit sessions 7\n  bind :82\n");
    let lim: Vec<u32> = c.proxies.iter().map(|p| p.rate_limit_sessions).collect();
    assert_eq!(lim, [16, 8, 7]);
    err1(
        "frontend f\n  rate-limit conns 5\n  bind :80\n",
        "t.cfg:2: ",
        "only supports 'sessions' (got 'conns')",
    );
    err1(
        "frontend f\n  rate-limit sessions\n  bind :80\n",
        "t.cfg:2: ",
        "expects an integer value",
    );
    err1(
        "frontend f\n  rate-limit sessions 5x\n  bind :80\n",
        "t.cfg:2: ",
        "not an integer",
    );
    err1(
        "backend b\n  rate-limit sessions 5\n",
        "t.cfg:2: ",
        "not allowed in a 'backend' section",
    );
}

/// `quiet` and `[no] set-dumpable` in `global`, without arguments.
#[test]
fn quiet_and_set_dumpable() {
    let c = ok("global\n  quiet\n  set-dumpable\n");
    assert!(c.global.quiet && c.global.set_dumpable);
    let c = ok("global\n  set-dumpable\n  no set-dumpable\n");
    assert!(!c.global.set_dumpable && !c.global.quiet);
    err1("global\n  quiet 1\n", "t.cfg:2: ", "takes no argument");
    err1(
        "global\n  set-dumpable yes\n",
        "t.cfg:2: ",
        "takes no argument",
    );
    err1("global\n  no daemon\n", "t.cfg:2: ", "unknown keyword 'no'");
}

/// `option http-pretend-keepalive` (backends) and `option http-no-delay`
/// (both sides), with their `no` forms.
#[test]
fn pretend_keepalive_and_no_delay() {
    let c = ok("defaults\n  option http-pretend-keepalive\n  option http-no-delay\nbackend b\n  server s 127.0.0.1:1\nbackend c\n  no option http-pretend-keepalive\n  no option http-no-delay\n  server s 127.0.0.1:1\n");
    let o: Vec<(bool, bool)> = c
        .proxies
        .iter()
        .map(|p| (p.options.pretend_keepalive, p.options.http_no_delay))
        .collect();
    assert_eq!(o, [(true, true), (false, false)]);
    err1(
        "frontend f\n  bind :80\n  option http-pretend-keepalive\n",
        "t.cfg:3: ",
        "not allowed in a 'frontend' section",
    );
    err1(
        "backend b\n  option http-no-delay 1\n  server s 127.0.0.1:1\n",
        "t.cfg:2: ",
        "unexpected argument '1'",
    );
}

/// `ssl-server-verify none|required`, `maxsslconn N`.
#[test]
fn ssl_server_verify_values() {
    assert_eq!(ok("global\n  maxsslconn 3\n").global.maxsslconn, 3);
    err1(
        "global\n  maxsslconn x\n",
        "t.cfg:2: ",
        "expects an integer",
    );
    assert_eq!(
        ok("global\n  ssl-server-verify none\n")
            .global
            .ssl_server_verify,
        Some(Verify::None)
    );
    assert_eq!(ok("global\n").global.ssl_server_verify, None);
    err1(
        "global\n  ssl-server-verify maybe\n",
        "t.cfg:2: ",
        "expects 'none' or 'required'",
    );
    err1(
        "global\n  ssl-server-verify\n",
        "t.cfg:2: ",
        "expects an argument",
    );
}

/// `server-state-file-name`: backends only, at most one argument.
#[test]
fn server_state_file_name() {
    let c = ok("backend b\n  server-state-file-name\n  server s 127.0.0.1:1\nbackend c\n  server-state-file-name /x/y\n  server s 127.0.0.1:1\n");
    let n: Vec<_> = c
        .proxies
        .iter()
        .map(|p| p.server_state_file_name.as_deref())
        .collect();
    assert_eq!(n, [Some("b"), Some("/x/y")]);
    err1(
        "defaults\n  server-state-file-name x\n",
        "t.cfg:2: ",
        "not allowed in a 'defaults' section",
    );
    err1(
        "backend b\n  server-state-file-name x y\n  server s 127.0.0.1:1\n",
        "t.cfg:2: ",
        "at most one argument",
    );
}

/// `fullconn` (backends, defaults) and the server option `minconn`.
#[test]
fn fullconn_and_minconn() {
    let c = ok("defaults\n  fullconn 30\nbackend b\n  server s 127.0.0.1:1 minconn 2 maxconn 10\nbackend c\n  fullconn 0\n  server s 127.0.0.1:1\n");
    assert_eq!(c.proxies[0].fullconn, Some(30));
    assert_eq!(c.proxies[1].fullconn, None);
    assert_eq!(c.proxies[0].servers[0].opts.minconn, Some(2));
    err1(
        "frontend f\n  bind :80\n  fullconn 5\n",
        "t.cfg:3: ",
        "not allowed in a 'frontend' section",
    );
    err1(
        "backend b\n  fullconn\n  server s 127.0.0.1:1\n",
        "t.cfg:2: ",
        "expects an integer argument",
    );
}

#[test]
fn log_format_sd_and_error_log_format() {
    let c = ok(&format!(
        "defaults\n    log-format-sd [x@1\\ a=\\\"%ST\\\"]\n    error-log-format \"%ci %f\"\n{}",
        fe("")
    ));
    let f = c.frontends().next().unwrap();
    assert!(f.log_format_sd.is_some() && f.error_log_format.is_some());
    err1(
        &fe("    log-format-sd a b"),
        "t.cfg:3: ",
        "expects one format string",
    );
    err1(
        &fe("    error-log-format %[nope]"),
        "t.cfg:3: ",
        "unknown sample fetch 'nope'",
    );
    err1(&be("    log-format-sd x"), "t.cfg:2: ", "not allowed");
    err1(&be("    error-log-format x"), "t.cfg:2: ", "not allowed");
}

/// `external-check`, `[no] insecure-fork-wanted`, `[no]
/// insecure-setuid-wanted` in `global`; `option
/// external-check` is the check until another check option follows (the
/// last wins, HAProxy's `PR_O2_CHK_ANY`); `max-session-srv-conns` in
/// frontends only.
#[test]
fn external_check_and_session_conns_keywords() {
    let c = ok("global\n  external-check\n  insecure-fork-wanted\n  no insecure-fork-wanted\n");
    assert!(c.global.external_check && !c.global.insecure_fork);
    assert!(!c.global.insecure_setuid);
    let c = ok("global\n  insecure-setuid-wanted\n");
    assert!(c.global.insecure_setuid);
    let c = ok("global\n  insecure-setuid-wanted\n  no insecure-setuid-wanted\n");
    assert!(!c.global.insecure_setuid);
    err1(
        "global\n  insecure-setuid-wanted yes\n",
        "t.cfg:2: ",
        "takes no argument",
    );
    let c = ok("backend b\n  option httpchk\n  option external-check\n  external-check command /bin/true\n  external-check path /bin\n");
    let p = proxy(&c, "b");
    assert!(p.ext_check.enabled.is_some() && !p.http_check.enabled);
    assert_eq!(
        p.ext_check.command.as_ref().map(|c| c.value.as_str()),
        Some("/bin/true")
    );
    assert_eq!(
        p.ext_check.path.as_ref().map(|c| c.value.as_str()),
        Some("/bin")
    );
    let c = ok("backend b\n  option external-check\n  option tcp-check\n");
    assert!(proxy(&c, "b").ext_check.enabled.is_none());
    err1(
        "backend b\n  external-check cmd x\n",
        "t.cfg:2: ",
        "only supports 'command' and 'path'",
    );
    err1(
        "backend b\n  external-check path\n",
        "t.cfg:2: ",
        "missing argument after 'path'",
    );
    err1(
        "backend b\n  option external-check x\n",
        "t.cfg:2: ",
        "unexpected argument",
    );
    err1(
        "frontend f\n  bind :80\n  option external-check\n",
        "t.cfg:3: ",
        "not allowed",
    );
    let c = ok("defaults\n  max-session-srv-conns 3\nfrontend f\n  bind :80\n");
    assert_eq!(proxy(&c, "f").max_session_srv_conns, Some(3));
    err1(
        "backend b\n  max-session-srv-conns 3\n",
        "t.cfg:2: ",
        "not allowed",
    );
    err1(
        "frontend f\n  bind :80\n  max-session-srv-conns x\n",
        "t.cfg:3: ",
        "non-negative integer",
    );
}

#[test]
fn server_routes_as_haproxys_mux_choice() {
    let o = |ssl: bool, alpn: &[&str], h2: bool, h1: bool, ws: WsProto| ServerOptions {
        ssl,
        alpn: alpn.iter().map(|a| a.to_string()).collect(),
        proto_h2: h2,
        proto_h1: h1,
        ws,
        ..ServerOptions::default()
    };
    let r = |h2, negotiate, alpn| Route {
        h2,
        negotiate,
        alpn,
    };
    use WsProto::*;
    // Not a websocket: `proto`, else ALPN with `ssl`, else HTTP/1.1 (an
    // `alpn` without `ssl` is only for `connect ssl` check steps).
    assert_eq!(
        o(false, &[], false, false, H2).route(false),
        r(false, false, None)
    );
    assert_eq!(
        o(false, &["h2"], false, false, Auto).route(false),
        r(false, false, None)
    );
    assert_eq!(
        o(true, &["h2"], false, false, Auto).route(false),
        r(true, true, None)
    );
    assert_eq!(
        o(true, &["h2"], false, true, Auto).route(false),
        r(false, false, None)
    );
    // Websockets.
    assert_eq!(
        o(false, &[], false, false, H2).route(true),
        r(true, false, None)
    );
    assert_eq!(
        o(false, &[], true, false, H1).route(true),
        r(false, false, None)
    );
    let both = ["h2", "http/1.1"];
    assert_eq!(
        o(true, &both, false, false, Auto).route(true),
        r(false, true, Some("http/1.1"))
    );
    assert_eq!(
        o(true, &["h2"], false, false, Auto).route(true),
        r(true, true, None)
    );
    assert_eq!(
        o(true, &both, false, false, H2).route(true),
        r(true, true, Some("h2"))
    );
    assert_eq!(
        o(true, &both, true, false, H1).route(true),
        r(false, false, Some("http/1.1"))
    );
    // Reuse by a websocket (HAProxy's srv_check_reuse_ws).
    assert!(o(false, &[], false, false, Auto).ws_reuse());
    assert!(!o(false, &[], false, false, H2).ws_reuse());
    assert!(o(false, &[], true, false, H2).ws_reuse());
    assert!(!o(true, &both, false, false, Auto).ws_reuse());
    assert!(o(true, &["http/1.1"], false, false, H1).ws_reuse());
}
