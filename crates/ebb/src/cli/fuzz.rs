//! The `cli` fuzz target's entry point: lines of commands run as a
//! `stats socket` connection runs them (each line read lossily as UTF-8,
//! its end trimmed), against a process whose configuration has servers,
//! agents, maps, ACL files, stick tables, a cache and resolvers, at the
//! level the first byte chooses. Never panics; the answers are returned.

use std::sync::atomic::AtomicU32;
use std::sync::Arc;

use crate::config::CliLevel;
use crate::registry::{Live, Process, Sessions, Shared};

fn config(dir: &std::path::Path) -> String {
    let d = dir.display();
    format!(
        "
resolvers dns
    nameserver n 127.0.0.1:1
cache c
    total-max-size 1
frontend fe
    mode http
    bind 127.0.0.1:1
    acl blocked path -f {d}/paths.acl
    http-request set-header x-m %[req.hdr(host),map({d}/hosts.map,none)]
    http-request track-sc0 src table st
    http-request cache-use c
    default_backend be
backend be
    mode http
    balance roundrobin
    server s1 127.0.0.1:1 check weight 10
    server s2 127.0.0.1:2 agent-check agent-port 3 agent-send hi
    server s3 127.0.0.1:3 check disabled
    server d1 name.invalid:80 resolvers dns init-addr none
backend stat
    balance static-rr
    server s1 127.0.0.1:1
backend st
    stick-table type ip size 10 expire 10s store gpc0,gpt0,conn_cnt,http_req_rate(10s)
backend ss
    stick-table type string len 8 size 10 store server_id,bytes_in_cnt
"
    )
}

struct World {
    process: Process,
}

fn world() -> Option<World> {
    let dir = std::env::temp_dir().join(format!("ebb-fuzz-cli-{}", std::process::id()));
    std::fs::create_dir_all(&dir).ok()?;
    std::fs::write(dir.join("paths.acl"), "/admin\n/private/\n").ok()?;
    std::fs::write(dir.join("hosts.map"), "a.example 1\nb.example 2\n").ok()?;
    let cfg = crate::config::parse_str("cli.cfg", &config(&dir)).ok();
    let compiled = cfg.and_then(|c| crate::proxy::compile(&c).ok());
    // The files are read: nothing is left behind in the temp dir.
    let _ = std::fs::remove_dir_all(&dir);
    let compiled = Arc::new(compiled?);
    let rt = sched::Runtime::new(sched::Config::new(1)).ok()?;
    let sessions = Arc::new(Sessions::new(1));
    if let Some(fe) = compiled.frontends.first() {
        sessions.add(0, ([127, 0, 0, 1], 4000).into(), Arc::clone(fe));
    }
    let process = Process {
        start: std::time::SystemTime::now(),
        pid: std::process::id(),
        nbthread: 1,
        sessions,
        shared: Arc::new(Shared {
            actconn: AtomicU32::new(0),
            maxconn: 100,
            conn_rate: crate::rate::RateLimit::new(0),
            sess_rate: crate::rate::RateLimit::new(0),
            logger: Default::default(),
            fe_loggers: Default::default(),
            be_loggers: Default::default(),
            fcgi_loggers: Default::default(),
            errors_to_stderr: false,
            debug: false,
            idle: crate::backend::pool::IdlePools::new(1, false),
        }),
        live: Arc::new(Live::new(compiled)),
        handle: rt.handle(),
    };
    Some(World { process })
}

/// Runs the lines of `data[1..]` at the level `data[0]` chooses (a fresh
/// process every 64 runs, so `add server` and `set var` cannot pile up);
/// returns the answers, or None when the process could not be built.
pub fn run(data: &[u8]) -> Option<String> {
    thread_local! {
        static W: std::cell::RefCell<(u32, Option<World>)> = const { std::cell::RefCell::new((0, None)) };
    }
    W.with(|w| {
        let mut w = w.borrow_mut();
        if w.0 % 64 == 0 || w.1.is_none() {
            w.1 = world();
        }
        w.0 = w.0.wrapping_add(1);
        let p = &w.1.as_ref()?.process;
        let first = data.first().copied().unwrap_or(2);
        let mut level = match first % 3 {
            0 => CliLevel::User,
            1 => CliLevel::Operator,
            _ => CliLevel::Admin,
        };
        let mut modes = super::Modes {
            experimental: first & 0x80 != 0,
            expert: first & 0x40 != 0,
        };
        let mut out = String::new();
        for raw in data.get(1..).unwrap_or_default().split(|c| *c == b'\n') {
            let line = String::from_utf8_lossy(raw);
            let line = line.trim_end_matches(['\n', '\r']);
            let r = super::execute_line(p, &mut level, line, &mut modes, &mut |f| f());
            out.push_str(&r.text);
        }
        Some(out)
    })
}
