//! Entry points of the fuzz targets (fuzz/) that reach parts of ebb the
//! library does not export: each takes bytes, does no I/O beyond what
//! its input would make ebb do without a peer, and never panics.

use std::sync::Arc;

/// The `cli` target: lines of `stats socket` commands (see
/// `cli::fuzz`).
pub fn cli(data: &[u8]) -> Option<String> {
    crate::cli::fuzz::run(data)
}

/// Backends with one probe each (and agents) for [`check_reply`].
const CHECK_CONFIG: &str = "
defaults
    mode http
    timeout connect 1s
    timeout server 1s
backend h1
    option httpchk GET /health
    http-check expect status 200-399
    server s 127.0.0.1:1 check
backend h1str
    option httpchk
    http-check send meth GET uri /x ver HTTP/1.1 hdr Host h
    http-check expect string ok
    http-check send-state
    server s 127.0.0.1:1 check
backend h1seq
    option httpchk
    http-check connect
    http-check send meth GET uri /a
    http-check expect rstatus ^2
    http-check set-var(check.v) res.hdr(x-v)
    http-check connect
    http-check send meth GET uri /b hdr x-v %[var(check.v)]
    http-check expect ! rstring err(or)?
    http-check expect hdr name -m beg x-a value -m reg ^[a-z]+$
    http-check expect fhdr name-lf %[var(check.v)] value-lf ok
    http-check expect status 200 comment c
    server s 127.0.0.1:1 check
backend h2
    option httpchk
    http-check send meth GET uri /
    http-check expect status 200
    server s 127.0.0.1:1 check proto h2
backend tcp
    option tcp-check
    tcp-check connect
    tcp-check send PING\\r\\n
    tcp-check expect string +PONG
    tcp-check send-binary 50494e470d0a
    tcp-check expect binary 2b504f4e47 min-recv 5
    tcp-check expect rstring ^[A-Z]+ on-error bad status-code res.payload(0,3)
    tcp-check expect ! rbinary ^FF
    tcp-check expect string x on-success ok
    server s 127.0.0.1:1 check
backend mysql
    mode tcp
    option mysql-check user u
    server s 127.0.0.1:1 check
backend mysql41
    mode tcp
    option mysql-check user u post-41
    server s 127.0.0.1:1 check
backend mysql0
    mode tcp
    option mysql-check
    server s 127.0.0.1:1 check
backend pgsql
    mode tcp
    option pgsql-check user u
    server s 127.0.0.1:1 check
backend redis
    mode tcp
    option redis-check
    server s 127.0.0.1:1 check
backend ldap
    mode tcp
    option ldap-check
    server s 127.0.0.1:1 check
backend smtp
    mode tcp
    option smtpchk EHLO h
    server s 127.0.0.1:1 check
backend spop
    mode tcp
    option spop-check
    server s 127.0.0.1:1 check
backend ssl3
    mode tcp
    option ssl-hello-chk
    server s 127.0.0.1:1 check
backend agents
    server a 127.0.0.1:1 agent-check agent-port 1 weight 10
    server b 127.0.0.1:1 agent-check agent-port 1 check
backend static
    balance static-rr
    server a 127.0.0.1:1 agent-check agent-port 1 weight 20
";

/// The `check_reply` target: every check's reading of a server's answer
/// (HTTP checks over HTTP/1 and HTTP/2, the `tcp-check` matches, the
/// protocol checks' parsers: MySQL, PostgreSQL, Redis, LDAP, SMTP, SPOP,
/// SSLv3; an agent's reply line applied to its server) on the answer
/// `data[1..]`, read in pieces of a size `data[0]` chooses. Returns how
/// many checks ran, or None when the configuration did not compile.
pub fn check_reply(data: &[u8]) -> Option<usize> {
    use crate::backend::agent;
    use crate::proxy::BackendKind;
    thread_local! {
        static C: Option<Arc<crate::proxy::Compiled>> =
            crate::config::parse_str("check_reply.cfg", CHECK_CONFIG)
                .ok()
                .and_then(|c| crate::proxy::compile(&c).ok())
                .map(Arc::new);
    }
    let c = C.with(Clone::clone)?;
    let step = 1 + usize::from(data.first().copied().unwrap_or(0)) * 17;
    let answer = data.get(1..).unwrap_or_default();
    let mut n = 0;
    for be in &c.backends {
        let BackendKind::Servers(sv) = &be.kind else {
            continue;
        };
        if let Some(p) = &sv.probe {
            let h2 = be.name == "h2";
            n += usize::from(
                crate::backend::check::fuzz::run_probe(p, &be.name, h2, answer, step).is_some(),
            );
        }
        // Agents: the reply line as `run_agent` cuts it.
        for s in sv.farm.servers.iter().filter(|s| s.agent.configured) {
            let o = match answer.iter().position(|c| *c == b'\r' || *c == b'\n') {
                Some(i) => agent::Outcome::Line(answer[..i].to_vec()),
                None => agent::Outcome::Incomplete,
            };
            agent::apply(&sv.farm, s, o, std::time::Duration::ZERO);
            n += 1;
        }
    }
    Some(n)
}

/// The `stats_admin` target: the body of a POST to the stats page's admin
/// form, applied to servers of several backends (and the same bytes as
/// the page's URI options and as an `Authorization` value). Returns the
/// form's result code, or None when the target's configuration did not
/// compile.
pub fn stats_admin(data: &[u8]) -> Option<&'static str> {
    use crate::serve::stats;
    const CONFIG: &str = "
defaults
    mode http
backend be
    server s1 127.0.0.1:1 check agent-check agent-port 2
    server s2 127.0.0.1:2
    server s3 127.0.0.1:3 check disabled
backend be2
    server s1 127.0.0.1:4
backend other
    balance static-rr
    server s1 127.0.0.1:5 agent-check agent-port 6
";
    thread_local! {
        static C: std::cell::RefCell<(u32, Option<Arc<crate::proxy::Compiled>>)> =
            const { std::cell::RefCell::new((0, None)) };
    }
    let c = C.with(|c| {
        let mut c = c.borrow_mut();
        // A fresh configuration now and then: the actions change states.
        if c.0 % 64 == 0 || c.1.is_none() {
            c.1 = crate::config::parse_str("stats.cfg", CONFIG)
                .ok()
                .and_then(|cfg| crate::proxy::compile(&cfg).ok())
                .map(Arc::new);
        }
        c.0 = c.0.wrapping_add(1);
        c.1.clone()
    })?;
    let _ = stats::parse_page(data, true);
    let users = [("admin".to_string(), "pw".to_string())];
    let _ = stats::auth_ok(&users, Some(data));
    Some(stats::post_action(&c, data))
}

/// The `fcgi_answer` target: an application's records (`data`, read in
/// pieces whose sizes the first byte chooses), demultiplexed and the
/// STDOUT of request 1 made into an HTTP/1.1 answer, as a FastCGI
/// connection reads them (`mux::fcgi`). Returns the answer's bytes, or
/// `None` where the connection would refuse it. Checks what must hold:
/// nothing panics, a complete answer's head parses as HTTP/1.1.
pub fn fcgi_answer(data: &[u8]) -> Option<Vec<u8>> {
    use crate::fcgi::cgi::Answer;
    use crate::fcgi::record::{Demux, Event};
    let (&cfg, input) = data.split_first()?;
    let step = usize::from(cfg & 0x3f) + 1;
    let mut demux = Demux::new(64);
    let mut answer = Answer::new(cfg & 0x40 != 0, cfg & 0x80 == 0, Default::default());
    let mut out = Vec::new();
    let mut have = Vec::new();
    let mut done = false;
    for piece in input.chunks(step) {
        have.extend_from_slice(piece);
        let mut at = 0;
        loop {
            let (n, ev) = demux.feed(&have[at..]);
            at += n;
            match ev {
                Some(Event::Stdout(1, d)) => answer.stdout(d, &mut out).ok()?,
                Some(Event::StdoutEnd(1)) | Some(Event::End { id: 1, .. }) => answer.end(),
                Some(Event::Broken) | Some(Event::BadEnd(1)) => return None,
                Some(_) => {}
                None if n == 0 => break,
                None => {}
            }
        }
        have.drain(..at);
        done = answer
            .flush(b"Thu, 01 Jan 2026 00:00:00 GMT", &mut out)
            .ok()?;
    }
    if done {
        let limits = crate::http1::Limits::default();
        let parsed = crate::http1::parse_response(&out, &limits, crate::http1::Method::Get);
        assert!(
            matches!(parsed, Ok(crate::http1::Status::Complete(_))),
            "the answer's head does not parse: {:?}",
            String::from_utf8_lossy(&out)
        );
    }
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The checks' configuration compiles (else the target would only
    /// assert).
    #[test]
    fn the_check_configuration_compiles() {
        let c = crate::config::parse_str("check_reply.cfg", CHECK_CONFIG)
            .map_err(|e| format!("{e:?}"))
            .and_then(|c| crate::proxy::compile(&c).map_err(|e| format!("{e:?}")));
        assert!(c.is_ok(), "{:?}", c.err());
    }

    /// Each target's world builds (else the target would only assert).
    #[test]
    fn targets_build_their_worlds() {
        let out = cli(b"\x02show info\nshow stat\nhelp").expect("cli");
        assert!(out.contains("Name: ebb"), "{out}");
        assert!(check_reply(b"\x00HTTP/1.1 200 OK\r\n\r\n").is_some_and(|n| n > 15));
        assert!(stats_admin(b"s=s1&action=drain&b=be").is_some());
    }

    /// `set weight B/S N%` with a percentage whose share of the weight
    /// passes u32, or whose product with it passes u64: refused (the
    /// first was cut to 32 bits, the second overflowed: a panic in a
    /// debug build).
    #[test]
    fn a_huge_relative_weight_is_refused() {
        let out = cli(b"\x02set weight be/s1 72057594037927936%\nget weight be/s1").unwrap();
        assert!(out.contains("Invalid weight"), "{out}");
        assert!(out.contains("10 (initial 10)"), "{out}");
        let out = cli(b"\x02set server be/s1 weight 18446744073709551615%").unwrap();
        assert!(out.contains("Invalid weight"), "{out}");
        // 10 x 42949673460 / 100 is 2^32 + 50: it was cut to 50 and taken.
        let out = cli(b"\x02set weight be/s1 42949673460%\nget weight be/s1").unwrap();
        assert!(out.contains("Invalid weight"), "{out}");
        assert!(out.contains("10 (initial 10)"), "{out}");
        let out = cli(b"\x02set weight be/s1 50%\nget weight be/s1").unwrap();
        assert!(out.contains("5 (initial 10)"), "{out}");
    }
}
