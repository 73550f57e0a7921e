//! Agent checks (`agent-check`, `agent-port`, `agent-addr`,
//! `agent-inter`, `agent-send`): an auxiliary check beside the health
//! check. Every `agent-inter` (the first date spread with the health
//! checks', see `check::first_dates`) a server's agent task connects to
//! the agent, sends `agent-send`, reads one line ended by CR or LF and
//! applies its words as HAProxy 2.6 does (`tcpcheck_agent_expect_reply`):
//!
//! - `up` / `down` / `stopped` / `fail` set the agent's health (one
//!   level: HAProxy's agent rise and fall are 1), reported `L7OK` or
//!   `L7STS` with `via agent : WORD (text after #)`;
//! - `ready` / `drain` / `maint` set the administrative state;
//! - `NN%` sets the weight relative to the configured one;
//! - `maxconn:N` sets the server's maxconn;
//! - anything else is reported (`agent reports an error : WORD`).
//!
//! A server is UP only while its health check (if any and enabled) and
//! its agent (if enabled) both say so. Failing to reach the agent changes
//! nothing but the agent's report: connectivity is the health check's
//! business.

use std::io::{Read, Write};
use std::net::{IpAddr, SocketAddr};
use std::sync::atomic::{AtomicBool, AtomicU16, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, Weak};
use std::time::{Duration, Instant};

use sched::{ticks, Ctx, Reasons, Status, TaskId};

use super::check::{open, os_text, timed_out, Verdict};
use super::{Farm, ServerRt, ADMIN_DRAIN, ADMIN_MAINT, ADMIN_READY};
use crate::config::{CheckStatus, ServerOptions};

/// A server's agent: its settings (changeable from the CLI) and its last
/// report.
pub struct AgentRt {
    /// `agent-check` was given (HAProxy's `CHK_ST_CONFIGURED`).
    pub configured: bool,
    /// Enabled (`enable|disable agent`).
    pub on: AtomicBool,
    /// The agent's health is at its top (it did not say down).
    pub healthy: AtomicBool,
    /// A check is under way (`agent_status` is then prefixed `* `).
    pub in_progress: AtomicBool,
    pub verdict: Mutex<Verdict>,
    /// Milliseconds the last agent check took; `u64::MAX` before any.
    pub ms: AtomicU64,
    /// `agent-addr` (None: the server's address).
    pub addr: Mutex<Option<IpAddr>>,
    pub port: AtomicU16,
    /// `agent-send`.
    pub send: Mutex<Vec<u8>>,
}

impl AgentRt {
    pub fn new(o: &ServerOptions) -> AgentRt {
        AgentRt {
            configured: o.agent_check,
            on: AtomicBool::new(o.agent_check),
            healthy: AtomicBool::new(true),
            in_progress: AtomicBool::new(false),
            verdict: Mutex::new(Verdict::default()),
            ms: AtomicU64::new(u64::MAX),
            addr: Mutex::new(o.agent_addr.or(o.check_addr)),
            port: AtomicU16::new(o.agent_port.or(o.check_port).unwrap_or(0)),
            send: Mutex::new(o.agent_send.clone()),
        }
    }

    pub fn enabled(&self) -> bool {
        self.configured && self.on.load(Ordering::Relaxed)
    }

    /// HAProxy's `srv_agent_state` bits: configured (2), enabled (4),
    /// agent (16); 0 when not configured.
    pub fn state_bits(&self) -> u32 {
        if !self.configured {
            return 0;
        }
        let mut b = 0x02 | 0x10;
        if self.on.load(Ordering::Relaxed) {
            b |= 0x04;
        }
        if self.in_progress.load(Ordering::Relaxed) {
            b |= 0x01;
        }
        b
    }

    pub fn report(&self) -> Verdict {
        self.verdict.lock().map(|v| v.clone()).unwrap_or_default()
    }

    fn set_report(&self, v: Verdict) {
        if let Ok(mut g) = self.verdict.lock() {
            *g = v;
        }
    }
}

/// An agent's answer line, word by word (the last word of each kind
/// wins; the first unknown word is kept as the error).
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Reply {
    pub health: Option<String>,
    pub admin: Option<String>,
    pub weight: Option<String>,
    pub maxconn: Option<String>,
    pub err: Option<String>,
    /// The text after `#`, blanks skipped.
    pub desc: String,
}

/// Splits an answer line (without its CR/LF) as HAProxy does: words
/// separated by spaces, tabs or commas; a `#` starts the description.
pub fn parse_reply(line: &[u8]) -> Reply {
    // HAProxy reads a C string: a NUL ends it.
    let line = &line[..line.iter().position(|c| *c == 0).unwrap_or(line.len())];
    let text = String::from_utf8_lossy(line);
    let mut r = Reply::default();
    let mut rest: &str = &text;
    loop {
        rest = rest.trim_start_matches([' ', '\t', ',']);
        if rest.is_empty() {
            break;
        }
        if let Some(d) = rest.strip_prefix('#') {
            r.desc = d.trim_start_matches([' ', '\t']).to_string();
            break;
        }
        let end = rest.find([' ', '\t', ',']).unwrap_or(rest.len());
        let word = &rest[..end];
        rest = &rest[end..];
        let lower = word.to_ascii_lowercase();
        match lower.as_str() {
            "up" | "down" | "stopped" | "fail" => r.health = Some(word.to_string()),
            "ready" | "drain" | "maint" => r.admin = Some(lower),
            _ if word.starts_with(|c: char| c.is_ascii_digit()) && word.contains('%') => {
                r.weight = Some(word.to_string())
            }
            _ if lower.starts_with("maxconn:") => r.maxconn = Some(word[8..].to_string()),
            _ => {
                if r.err.is_none() {
                    r.err = Some(word.to_string());
                }
            }
        }
    }
    r
}

/// C's `strtol` on a word: the number and what follows it (None: no
/// digits).
fn strtol(w: &str) -> Option<(i64, &str)> {
    let t = w.trim_start();
    let (neg, digits) = match t.as_bytes().first() {
        Some(b'-') => (true, &t[1..]),
        Some(b'+') => (false, &t[1..]),
        _ => (false, t),
    };
    let n = digits.bytes().take_while(u8::is_ascii_digit).count();
    if n == 0 {
        return None;
    }
    let v = digits[..n]
        .parse::<i64>()
        .unwrap_or(i64::MAX)
        .saturating_mul(if neg { -1 } else { 1 });
    Some((v, &digits[n..]))
}

/// HAProxy's `server_parse_weight_change_request`: `N` (0..256) or `N%`
/// of the configured weight; its messages.
pub fn weight_change(farm: &Farm, s: &ServerRt, w: &str) -> Result<(), &'static str> {
    if w.is_empty() {
        return Err("Require <weight> or <weight%>.\n");
    }
    let Some((mut v, end)) = strtol(w) else {
        return Err("Empty weight string empty or preceded by garbage");
    };
    if end == "%" {
        if v < 0 {
            return Err("Relative weight must be positive.\n");
        }
        v = i64::from(s.opts.weight) * v.min(25600) / 100;
        v = v.min(256);
    } else if !(0..=256).contains(&v) {
        return Err("Absolute weight can only be between 0 and 256 inclusive.\n");
    } else if !end.is_empty() {
        return Err("Trailing garbage in weight string");
    }
    let v = v as u32;
    if v != 0 && v != s.opts.weight && farm.static_weights() {
        return Err(
            "Backend is using a static LB algorithm and only accepts weights '0%' and '100%'.\n",
        );
    }
    s.weight.store(v, Ordering::Relaxed);
    if v == 0 {
        farm.redispatch_queue_of(s);
    } else {
        farm.kick_backend_queue();
    }
    Ok(())
}

/// HAProxy's `server_parse_maxconn_change_request`.
fn maxconn_change(farm: &Farm, s: &ServerRt, m: &str) -> Result<(), &'static str> {
    if m.is_empty() {
        return Err("Require <maxconn>.\n");
    }
    let Some((v, end)) = strtol(m) else {
        return Err("maxconn string empty or preceded by garbage");
    };
    if !end.is_empty() {
        return Err("Trailing garbage in maxconn string");
    }
    s.maxconn.store(
        u32::try_from(v.max(0)).unwrap_or(u32::MAX),
        Ordering::Relaxed,
    );
    farm.kick_backend_queue();
    Ok(())
}

/// What one agent check brought back.
#[derive(Debug)]
pub enum Outcome {
    /// Connect, send or read failed: the report (no health change).
    Failed(Verdict),
    /// The connection closed before a CR or LF.
    Incomplete,
    /// The answer line, without its end.
    Line(Vec<u8>),
}

/// One agent check, blocking: connect, send `send`, read a line, within
/// `timeout`; with `connect_budget` (under `timeout check`, as HAProxy
/// 2.6's tcpcheck_eval_connect bounds an agent's connect as a health
/// check's: `agent-inter`, or `timeout connect` when sooner), the connect
/// within that budget, and `timeout` from the moment it is up.
pub fn run_agent(
    addr: SocketAddr,
    timeout: Duration,
    connect_budget: Option<Duration>,
    send: &[u8],
) -> Outcome {
    let t0 = Instant::now();
    let mut s = match open(
        addr,
        t0,
        connect_budget.unwrap_or(timeout),
        None,
        &[],
        false,
        None,
    ) {
        Ok(s) => s,
        Err(v) => return Outcome::Failed(v),
    };
    let start = match connect_budget {
        Some(_) => {
            s.io_timeout(timeout);
            Instant::now()
        }
        None => t0,
    };
    if !send.is_empty() {
        if let Err(e) = s.write_all(send).and_then(|()| s.flush()) {
            return Outcome::Failed(Verdict::new(CheckStatus::SockErr, os_text(&e)));
        }
    }
    let mut buf = Vec::new();
    let mut tmp = [0u8; 1024];
    loop {
        if let Some(i) = buf.iter().position(|c| *c == b'\r' || *c == b'\n') {
            buf.truncate(i);
            return Outcome::Line(buf);
        }
        if buf.len() >= 16 * 1024 {
            return Outcome::Incomplete;
        }
        if start.elapsed() > timeout {
            return Outcome::Failed(Verdict::new(CheckStatus::L7Tout, ""));
        }
        match s.read(&mut tmp) {
            Ok(0) => return Outcome::Incomplete,
            Ok(n) => buf.extend_from_slice(&tmp[..n]),
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) if timed_out(&e) => {
                return Outcome::Failed(Verdict::new(CheckStatus::L7Tout, ""))
            }
            // An error after some data (a reset that followed the answer,
            // as an agent that closes without reading what it was sent
            // makes): HAProxy judges the data, here a line without its
            // end.
            Err(_) if !buf.is_empty() => return Outcome::Incomplete,
            Err(e) => return Outcome::Failed(Verdict::new(CheckStatus::SockErr, os_text(&e))),
        }
    }
}

/// Applies an agent check's outcome to its server (HAProxy's
/// `tcpcheck_agent_expect_reply`, `set_server_check_status` and the
/// `check_notify_*` that follow).
pub fn apply(farm: &Farm, s: &ServerRt, out: Outcome, took: Duration) -> Verdict {
    let a = &s.agent;
    let v = match out {
        Outcome::Failed(v) => v,
        Outcome::Incomplete => {
            let prev = a.report().st;
            Verdict::new(prev, "Ignoring incomplete line from agent")
        }
        Outcome::Line(l) => answer(farm, s, &parse_reply(&l)),
    };
    a.ms.store(
        took.as_millis().min(u128::from(u32::MAX)) as u64,
        Ordering::Relaxed,
    );
    a.set_report(v.clone());
    v
}

/// The words of an answer, applied: admin state first, then weight and
/// maxconn, then health. Returns the agent's report.
fn answer(farm: &Farm, s: &ServerRt, r: &Reply) -> Verdict {
    if let Some(adm) = &r.admin {
        let st = match adm.as_str() {
            "drain" => ADMIN_DRAIN,
            "maint" => ADMIN_MAINT,
            _ => ADMIN_READY,
        };
        let _ = super::set_admin(farm, s, st);
    }
    let mut wrn: Option<&str> = None;
    if let Some(w) = &r.weight {
        if let Err(m) = weight_change(farm, s, w) {
            wrn = Some(m);
        }
    }
    if let Some(m) = &r.maxconn {
        if let Err(m) = maxconn_change(farm, s, m) {
            if wrn.is_none() {
                wrn = Some(m);
            }
        }
    }
    let err = r.err.as_deref();
    if let Some(hs) = &r.health {
        let up = hs.eq_ignore_ascii_case("up");
        s.agent.healthy.store(up, Ordering::Relaxed);
        let st = if up {
            CheckStatus::L7Ok
        } else {
            CheckStatus::L7Sts
        };
        let mut msg = r.desc.as_str();
        if msg.is_empty() || up {
            if let Some(e) = err {
                msg = e;
            } else if let Some(w) = wrn {
                msg = w;
            }
        }
        let desc = if msg.is_empty() {
            format!("via agent : {hs}")
        } else {
            format!("via agent : {hs} ({msg})")
        };
        return Verdict::new(st, desc);
    }
    if let Some(e) = err {
        return Verdict::new(
            CheckStatus::Checked,
            format!("agent reports an error : {e}"),
        );
    }
    if let Some(w) = wrn {
        return Verdict::new(CheckStatus::Checked, format!("agent warns : {w}"));
    }
    Verdict::new(CheckStatus::Checked, "")
}

/// `set server B/S agent up|down`.
pub fn force(farm: &Farm, s: &ServerRt, up: bool) -> Result<String, String> {
    if !s.agent.enabled() {
        return Err("agent checks are not enabled on this server.\n".into());
    }
    s.agent.healthy.store(up, Ordering::Relaxed);
    super::check::refresh_up(farm, s, || "changed from CLI".to_string());
    Ok(String::new())
}

/// `set server B/S agent-addr ADDR [port P]` and `agent-port P`: HAProxy
/// answers a problem as a warning and changes nothing then.
pub fn set_addr_port(s: &ServerRt, addr: Option<&str>, port: Option<&str>) -> String {
    if !s.agent.enabled() {
        return "agent checks are not enabled on this server".into();
    }
    let ip = match addr {
        Some(a) => match crate::config::agent_addr(a) {
            Ok(ip) => Some(ip),
            Err(_) => return format!("invalid addr '{a}'"),
        },
        None => None,
    };
    let p = match port {
        Some(p) => match p.trim().parse::<i64>() {
            Err(_) => return "provided port is not an integer".into(),
            Ok(n) if !(0..=65535).contains(&n) => return "provided port is invalid".into(),
            Ok(n) => Some(n as u16),
        },
        None => None,
    };
    if let Some(ip) = ip {
        if let Ok(mut g) = s.agent.addr.lock() {
            *g = Some(ip);
        }
    }
    if let Some(p) = p {
        s.agent.port.store(p, Ordering::Relaxed);
    }
    String::new()
}

/// `set server B/S agent-send STRING`.
pub fn set_send(s: &ServerRt, v: &str) -> Result<String, String> {
    if !s.agent.enabled() {
        return Err("agent checks are not enabled on this server.\n".into());
    }
    if let Ok(mut g) = s.agent.send.lock() {
        *g = v.as_bytes().to_vec();
    }
    Ok(String::new())
}

/// A server's agent task: a shared task that hands each check to the
/// checks' blocking pool, as the health check does.
struct AgentTask {
    srv: Weak<ServerRt>,
    farm: Weak<Farm>,
    timeout: Option<Duration>,
    /// `timeout connect`, when `timeout check` is set too.
    connect_cap: Option<Duration>,
    pool: crate::blocking::Submitter,
    handle: sched::RuntimeHandle,
    result: Arc<Mutex<Option<(Outcome, Duration)>>>,
    in_flight: bool,
    log: super::check::LogFn,
    log_checks: bool,
    /// The generator of `spread-checks`.
    rng: u64,
    /// How long after its start the first check runs (taken by the
    /// first run).
    first: Option<Duration>,
}

impl AgentTask {
    fn run(&mut self, ctx: &mut Ctx, me: TaskId) -> Status {
        let (Some(s), Some(farm)) = (self.srv.upgrade(), self.farm.upgrade()) else {
            return Status::Done;
        };
        if s.is_deleted() {
            return Status::Done;
        }
        if let Some(d) = self.first.take().filter(|d| !d.is_zero()) {
            // The first check's date (HAProxy spreads them at start).
            let ms = d.as_millis().min(u32::MAX as u128 / 2) as u32;
            ctx.set_expire(me, ticks::add(ctx.now(), ms));
            return Status::Continue;
        }
        let inter = super::check::agent_inter(&s);
        let timeout = self.timeout.unwrap_or(inter).max(Duration::from_millis(10));
        // HAProxy: `agent-inter`, or `timeout connect` when sooner (both
        // only with `timeout check`).
        let budget = self.timeout.map(|_| {
            let inter = inter.max(Duration::from_millis(10));
            self.connect_cap.map_or(inter, |c| c.min(inter))
        });
        if self.in_flight {
            let r = self.result.lock().ok().and_then(|mut g| g.take());
            let Some((out, took)) = r else {
                ctx.set_expire(me, ticks::add(ctx.now(), 100));
                return Status::Continue;
            };
            self.in_flight = false;
            s.agent.in_progress.store(false, Ordering::Relaxed);
            // Disabled meanwhile: the whole answer is ignored (HAProxy).
            if s.agent.enabled() {
                let before = s.agent.report().st;
                let was_healthy = s.agent.healthy.load(Ordering::Relaxed);
                let v = apply(&farm, &s, out, took);
                let healthy = s.agent.healthy.load(Ordering::Relaxed);
                if self.log_checks && (v.st != before || was_healthy != healthy) {
                    (self.log)(
                        None,
                        format!(
                        "Agent check for {}server {}/{} {}, reason: {}, check duration: {}ms, status: 1/1 {}.",
                        if s.opts.backup { "backup " } else { "" },
                        s.backend,
                        s.name,
                        if v.passed() { "succeeded" } else { "failed" },
                        v.reason(),
                        took.as_millis(),
                        match (healthy, s.weight.load(Ordering::Relaxed)) {
                            (false, _) => "DOWN",
                            (true, 0) => "DRAIN",
                            _ => "UP",
                        }
                    ));
                }
                // Only a health word moves the server (HAProxy: a failure
                // to reach the agent is not the agent saying down).
                if matches!(v.st, CheckStatus::L7Ok | CheckStatus::L7Sts) {
                    let took = took.as_millis();
                    super::check::refresh_up(&farm, &s, || {
                        format!("reason: {}, check duration: {took}ms", v.reason())
                    });
                }
            }
        } else if s.agent.enabled() {
            let ip = s
                .agent
                .addr
                .lock()
                .ok()
                .and_then(|g| *g)
                .or_else(|| s.addr().map(|a| a.ip()));
            let port = s.agent.port.load(Ordering::Relaxed);
            if let Some(ip) = ip {
                let addr = SocketAddr::new(ip, port);
                let send = s.agent.send.lock().map(|g| g.clone()).unwrap_or_default();
                let result = Arc::clone(&self.result);
                let handle = self.handle.clone();
                let job = move || {
                    let t0 = Instant::now();
                    let r = run_agent(addr, timeout, budget, &send);
                    if let Ok(mut g) = result.lock() {
                        *g = Some((r, t0.elapsed()));
                    }
                    handle.wake_task(me, Reasons::RES);
                };
                if self.pool.submit(job).is_ok() {
                    self.in_flight = true;
                    s.agent.in_progress.store(true, Ordering::Relaxed);
                    // HAProxy's start of a check clears the last report's
                    // text (`last_agt` is empty while one runs).
                    if let Ok(mut v) = s.agent.verdict.lock() {
                        v.desc.clear();
                    }
                    let guard = timeout + budget.unwrap_or_default() + Duration::from_millis(100);
                    ctx.set_expire(me, ticks::add(ctx.now(), guard.as_millis() as u32));
                    return Status::Continue;
                }
            }
        }
        let next = super::check::spread(inter, &mut self.rng);
        ctx.set_expire(
            me,
            ticks::add(ctx.now(), next.as_millis().min(u32::MAX as u128 / 2) as u32),
        );
        Status::Continue
    }
}

/// Starts the agent task of a server with `agent-check`, its first check
/// `first` from now.
pub fn start_server(
    farm: &Arc<Farm>,
    s: &Arc<ServerRt>,
    cx: &super::check::CheckCtx,
    first: Duration,
) -> Option<TaskId> {
    if !s.agent.configured {
        return None;
    }
    let mut t = AgentTask {
        srv: Arc::downgrade(s),
        farm: Arc::downgrade(farm),
        timeout: cx.timeout,
        connect_cap: cx.connect_cap,
        pool: cx.pool.clone(),
        handle: cx.handle.clone(),
        result: Arc::new(Mutex::new(None)),
        in_flight: false,
        log: Arc::clone(&cx.log),
        log_checks: cx.log_checks,
        rng: super::check::spread_seed(s.uid),
        first: Some(first),
    };
    let id = cx
        .handle
        .new_shared_task("agent_check", u64::MAX, move |ctx: &mut Ctx, me, _why| {
            t.run(ctx, me)
        });
    cx.handle.wake_task(id, Reasons::INIT);
    Some(id)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn replies_split_as_haproxy() {
        let r = parse_reply(b"75%,maxconn:30,maint,down");
        assert_eq!(r.weight.as_deref(), Some("75%"));
        assert_eq!(r.maxconn.as_deref(), Some("30"));
        assert_eq!(r.admin.as_deref(), Some("maint"));
        assert_eq!(r.health.as_deref(), Some("down"));
        let r = parse_reply(b" \tUP drain 50% bogus other # going away  ");
        assert_eq!(r.health.as_deref(), Some("UP"));
        assert_eq!(r.admin.as_deref(), Some("drain"));
        assert_eq!(r.err.as_deref(), Some("bogus"));
        assert_eq!(r.desc, "going away  ");
        // The last of a kind wins.
        assert_eq!(parse_reply(b"down up").health.as_deref(), Some("up"));
        assert_eq!(parse_reply(b"ready\0down").health, None);
        assert_eq!(parse_reply(b"").health, None);
    }

    #[test]
    fn strtol_as_c() {
        assert_eq!(strtol("50%"), Some((50, "%")));
        assert_eq!(strtol("-3"), Some((-3, "")));
        assert_eq!(strtol("x1"), None);
        assert_eq!(strtol("12ab"), Some((12, "ab")));
    }

    #[test]
    fn agents_over_real_sockets() {
        use std::net::TcpListener;
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = l.local_addr().unwrap();
        std::thread::spawn(move || {
            let answers: [&[u8]; 3] = [b"up 50%\r\n", b"drain", b"up"];
            for (i, (mut c, a)) in l.incoming().flatten().zip(answers).enumerate() {
                if i == 2 {
                    // Answers without reading what came: its close resets
                    // the connection after the (incomplete) answer.
                    c.write_all(a).unwrap();
                    std::thread::sleep(Duration::from_millis(300));
                    continue;
                }
                let mut b = [0u8; 16];
                let n = c.read(&mut b).unwrap();
                assert_eq!(&b[..n], b"hi\n");
                c.write_all(a).unwrap();
            }
        });
        let t = Duration::from_secs(5);
        match run_agent(addr, t, None, b"hi\n") {
            Outcome::Line(l) => assert_eq!(l, b"up 50%"),
            o => panic!("{o:?}"),
        }
        assert!(matches!(
            run_agent(addr, t, None, b"hi\n"),
            Outcome::Incomplete
        ));
        // A reset after the data: the data is judged (HAProxy's rule).
        let o = run_agent(addr, t, None, b"hi\n");
        assert!(matches!(o, Outcome::Incomplete), "{o:?}");
    }
}
