//! The statistics every operator view shares: one row per frontend,
//! backend and server (HAProxy's `show stat` model), the CSV of `show stat`
//! and `;csv`, the HTML stats page, and the server actions the CLI and the
//! page's admin form both perform.
//!
//! Rows are read from the atomics of the configuration in force
//! ([`crate::registry::Live::compiled`]); nothing here locks the request
//! path. Rates (sessions and requests per second) are not counted on the
//! request path either: each read of a total is compared with the previous
//! sample of the same total, at least a second old, so a rate is "per
//! second over the last interval between two views".

use std::collections::HashMap;
use std::fmt::Write as _;
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Instant;

use crate::backend::extra::check_code;
use crate::backend::{server_status, Farm, ServerRt, ADMIN_DRAIN, ADMIN_MAINT, ADMIN_READY};
use crate::proxy::{BackendKind, BackendRt, Compiled, FrontendRt};
use crate::serve::{plain, Answer};

/// What a row describes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    Frontend,
    Backend,
    Server,
    /// A listener of a frontend with `option socket-stats`.
    Listener,
}

impl Kind {
    /// HAProxy's `type` column: 0 frontend, 1 backend, 2 server.
    fn code(self) -> u8 {
        match self {
            Kind::Frontend => 0,
            Kind::Backend => 1,
            Kind::Server => 2,
            Kind::Listener => 3,
        }
    }
}

/// One line of statistics.
#[derive(Clone, Debug)]
pub struct Row {
    pub pxname: String,
    pub svname: String,
    pub kind: Kind,
    /// Proxy id (1-based, in configuration order) and server id.
    pub iid: usize,
    pub sid: usize,
    pub qcur: u64,
    pub scur: u64,
    pub slim: Option<u64>,
    pub stot: u64,
    pub bin: u64,
    pub bout: u64,
    pub dreq: u64,
    /// Frontends: requests that could not be read (`ereq`).
    pub ereq: u64,
    pub econ: u64,
    pub eresp: u64,
    pub wretr: u64,
    pub wredis: u64,
    pub status: String,
    pub weight: Option<u64>,
    pub act: Option<u64>,
    pub bck: Option<u64>,
    pub qlimit: Option<u64>,
    /// Servers with `track`: `BACKEND/SERVER` they track.
    pub tracked: Option<String>,
    /// Backends and servers: the longest their own queue has been.
    pub qmax: Option<u64>,
    pub lbtot: Option<u64>,
    pub rate: u64,
    pub rate_max: u64,
    pub check_status: String,
    pub hrsp: [u64; 6],
    pub req_rate: u64,
    pub req_rate_max: u64,
    pub req_tot: Option<u64>,
    pub qtime_out: u64,
    /// Server admin state (servers only).
    pub admin: Option<u8>,
    pub smax: Option<u64>,
    pub chkfail: Option<u64>,
    /// `on-error` actions taken (`hanafail`): servers with `observe`.
    pub hanafail: Option<u64>,
    pub chkdown: Option<u64>,
    pub lastchg: Option<u64>,
    pub downtime: Option<u64>,
    pub check_code: Option<u64>,
    pub check_duration: Option<u64>,
    pub last_chk: String,
    pub check_desc: String,
    /// The proxy's `description` (FRONTEND and BACKEND rows).
    pub desc: Option<String>,
    pub check_rise: Option<u64>,
    pub check_fall: Option<u64>,
    pub check_health: Option<u64>,
    /// The agent check's report (empty / None without an enabled agent).
    pub agent_status: String,
    pub agent_code: Option<u64>,
    pub agent_duration: Option<u64>,
    pub agent_desc: String,
    pub last_agt: String,
    pub agent_rise: Option<u64>,
    pub agent_fall: Option<u64>,
    pub agent_health: Option<u64>,
    pub addr: String,
    pub algo: String,
    pub uweight: Option<u64>,
    /// HAProxy's h2 module, from `h2_open_connections` on:
    /// open connections, open streams, total connections, total streams
    /// (what ebb counts; the frame counters stay empty).
    pub h2: [Option<u64>; 4],
    /// Backends and servers: seconds since the last stream was handed
    /// to a server (`None`: never).
    pub lastsess: Option<u64>,
    /// Backends and servers: connections attempted, and reused.
    pub connect: u64,
    pub reuse: u64,
    /// The proxy's `mode` (`http` or `tcp`).
    pub mode: &'static str,
    /// Servers: `srv_icur` (idle connections now), `src_ilim`
    /// (`pool-max-conn`), `throttle` (slowstart percentage).
    pub icur: Option<u64>,
    pub ilim: Option<u64>,
    pub throttle: Option<u64>,
    /// Backends and servers: the health check's `chkdown` and `lastchg`
    /// of a backend are its own (see [`crate::backend::Farm::note_state`]).
    pub has_servers: bool,
    /// Backends and servers: the queue, connect, response and total
    /// times (ms), and the aborts by the client and by the server.
    pub times: Option<TimeRow>,
    /// Frontends and backends of `mode http`: compressed bytes in, out,
    /// bypassed, and compressed answers.
    pub comp: Option<[u64; 4]>,
    /// Frontends and backends: failed rewrites, internal errors, cache
    /// lookups and hits.
    pub rules: Option<[u64; 4]>,
    /// Frontends: requests the frontend answered itself.
    pub intercepted: Option<u64>,
    /// Frontends: connections and sessions refused by the rules.
    pub denied: Option<(u64, u64)>,
    pub aborts: Option<(u64, u64)>,
}

impl Row {
    fn new(pxname: &str, svname: &str, kind: Kind, iid: usize, sid: usize) -> Row {
        Row {
            pxname: pxname.to_string(),
            svname: svname.to_string(),
            kind,
            iid,
            sid,
            qcur: 0,
            scur: 0,
            slim: None,
            stot: 0,
            bin: 0,
            bout: 0,
            dreq: 0,
            ereq: 0,
            econ: 0,
            eresp: 0,
            wretr: 0,
            wredis: 0,
            status: String::new(),
            weight: None,
            act: None,
            bck: None,
            qlimit: None,
            tracked: None,
            qmax: None,
            lbtot: None,
            rate: 0,
            rate_max: 0,
            check_status: String::new(),
            hrsp: [0; 6],
            req_rate: 0,
            req_rate_max: 0,
            req_tot: None,
            qtime_out: 0,
            admin: None,
            smax: None,
            chkfail: None,
            hanafail: None,
            chkdown: None,
            lastchg: None,
            downtime: None,
            check_code: None,
            check_duration: None,
            last_chk: String::new(),
            check_desc: String::new(),
            desc: None,
            check_rise: None,
            check_fall: None,
            check_health: None,
            agent_status: String::new(),
            agent_code: None,
            agent_duration: None,
            agent_desc: String::new(),
            last_agt: String::new(),
            agent_rise: None,
            agent_fall: None,
            agent_health: None,
            addr: String::new(),
            algo: String::new(),
            uweight: None,
            h2: [None; 4],
            lastsess: None,
            connect: 0,
            reuse: 0,
            mode: "http",
            icur: None,
            ilim: None,
            throttle: None,
            has_servers: false,
            times: None,
            comp: None,
            rules: None,
            intercepted: None,
            denied: None,
            aborts: None,
        }
    }
}

struct Sample {
    at: Instant,
    total: u64,
    rate: u64,
    max: u64,
}

fn samples() -> &'static Mutex<HashMap<String, Sample>> {
    static S: OnceLock<Mutex<HashMap<String, Sample>>> = OnceLock::new();
    S.get_or_init(|| Mutex::new(HashMap::new()))
}

/// The per-second rate of a monotonic total, and its maximum seen.
fn rate(key: String, total: u64) -> (u64, u64) {
    let mut m = samples().lock().unwrap_or_else(|p| p.into_inner());
    let now = Instant::now();
    let s = m.entry(key).or_insert(Sample {
        at: now,
        total,
        rate: 0,
        max: 0,
    });
    let dt = now.duration_since(s.at).as_secs_f64();
    if total < s.total {
        // Counters cleared.
        *s = Sample {
            at: now,
            total,
            rate: 0,
            max: 0,
        };
    } else if dt >= 1.0 {
        s.rate = ((total - s.total) as f64 / dt).round() as u64;
        s.max = s.max.max(s.rate);
        s.at = now;
        s.total = total;
    }
    (s.rate, s.max)
}

/// The highest value of a gauge seen when the statistics were read (the
/// frontend and backend `smax`: their current count is a sum read here).
fn peak(key: String, cur: u64) -> u64 {
    let mut m = samples().lock().unwrap_or_else(|p| p.into_inner());
    let now = Instant::now();
    let s = m.entry(key).or_insert(Sample {
        at: now,
        total: 0,
        rate: 0,
        max: 0,
    });
    s.max = s.max.max(cur);
    s.max
}

/// HAProxy's `algo` column.
fn algo_name(b: &crate::config::Balance) -> &'static str {
    use crate::config::Balance as B;
    match b {
        B::RoundRobin => "roundrobin",
        B::StaticRr => "static-rr",
        B::LeastConn => "leastconn",
        B::First => "first",
        B::Source => "source",
        B::Uri { .. } => "uri",
        B::UrlParam { .. } => "url_param",
        B::Hdr { .. } => "hdr",
        B::Random { .. } => "random",
    }
}

/// The per-second rate of a process-wide total and its maximum seen
/// (`show info`'s rates).
pub fn sampled_rate(key: &str, total: u64) -> (u64, u64) {
    rate(key.to_string(), total)
}

/// Forgets the maxima of rates (`clear counters`).
pub fn clear_maxima() {
    let mut m = samples().lock().unwrap_or_else(|p| p.into_inner());
    for s in m.values_mut() {
        s.max = s.rate;
    }
}

fn ld(a: &std::sync::atomic::AtomicU64) -> u64 {
    a.load(Ordering::Relaxed)
}

fn fe_row(i: usize, fe: &FrontendRt) -> Row {
    let mut r = Row::new(&fe.name, "FRONTEND", Kind::Frontend, i, 0);
    r.desc.clone_from(&fe.desc);
    r.mode = if fe.l4.tcp_mode { "tcp" } else { "http" };
    r.scur = u64::from(fe.cur_conns());
    r.slim = fe.maxconn.map(u64::from);
    r.stot = ld(&fe.sessions);
    r.bin = fe.http.bytes_in();
    r.bout = fe.http.bytes_out();
    r.dreq = ld(&fe.http.denied);
    r.ereq = ld(&fe.http.failed_req);
    r.status = "OPEN".into();
    r.smax = Some(peak(format!("fe/{}/c", fe.name), r.scur));
    r.hrsp = fe.http.hrsp();
    let req = fe.http.requests();
    r.req_tot = Some(req);
    r.comp = http_comp(&fe.http);
    r.rules = rule_counts(&fe.http);
    r.intercepted = Some(fe.http.intercepted());
    r.denied = Some((ld(&fe.http.denied_conn), ld(&fe.http.denied_sess)));
    (r.rate, r.rate_max) = rate(format!("fe/{}/s", fe.name), r.stot);
    (r.req_rate, r.req_rate_max) = rate(format!("fe/{}/r", fe.name), req);
    // Open streams are not counted on the client side.
    r.h2 = [
        Some(u64::from(fe.h2_conns.load(Ordering::Relaxed))),
        None,
        Some(ld(&fe.h2_conns_total)),
        Some(ld(&fe.h2_streams)),
    ];
    r
}

fn srv_row(i: usize, farm: &Farm, s: &ServerRt) -> Row {
    let mut r = Row::new(&farm.name, &s.name, Kind::Server, i, s.id as usize);
    let c = &s.counters;
    r.qcur = s.queue.lock().map(|q| q.len() as u64).unwrap_or(0);
    r.scur = u64::from(s.cur.load(Ordering::Relaxed));
    let m = s.maxconn.load(Ordering::Relaxed);
    r.slim = (m > 0).then_some(u64::from(m));
    r.stot = ld(&c.sessions);
    r.lbtot = Some(r.stot);
    r.bin = ld(&c.bytes_in);
    r.bout = ld(&c.bytes_out);
    r.econ = ld(&c.conn_errors);
    r.eresp = ld(&c.resp_errors);
    r.wretr = ld(&c.retries);
    r.wredis = ld(&c.redispatches);
    r.qtime_out = ld(&c.queue_timeouts);
    r.lastsess = c.last_session_age();
    r.connect = ld(&c.connects);
    r.reuse = ld(&c.reuses);
    note_times(&mut r, c);
    // HAProxy counts a server's failed rewrites and internal errors in
    // its response rules (the request's run before a server is chosen);
    // ebb's response rules cannot fail: always 0.
    r.rules = Some([0; 4]);
    for (k, h) in c.hrsp.iter().enumerate() {
        r.hrsp[k] = ld(h);
    }
    r.status = server_status(s).into();
    r.weight = Some(u64::from(s.weight.load(Ordering::Relaxed)));
    r.act = Some(u64::from(!s.opts.backup));
    r.bck = Some(u64::from(s.opts.backup));
    r.qlimit = s.opts.maxqueue.map(u64::from);
    r.tracked = s.tracked.get().map(|t| format!("{}/{}", t.backend, t.name));
    r.admin = Some(s.admin_state());
    (r.rate, r.rate_max) = rate(format!("sv/{}/{}", farm.name, s.name), r.stot);
    r.smax = Some(u64::from(s.ext.smax.load(Ordering::Relaxed)));
    r.uweight = Some(u64::from(s.weight.load(Ordering::Relaxed)));
    r.addr = s.addr().map(|a| a.to_string()).unwrap_or_default();
    r.icur = Some(u64::from(s.idle_count()));
    r.ilim = s.opts.pool_max_conn.map(u64::from);
    if s.opts.slowstart.is_some() && s.usable() {
        let w = u64::from(s.weight.load(Ordering::Relaxed));
        let e = u64::from(s.effective_weight());
        if w > 0 && e < w {
            r.throttle = Some(e * 100 / w);
        }
    }
    let (lastchg, down) = s.ext.ages();
    r.lastchg = Some(lastchg);
    if s.opts.check {
        let v = s.check_status.lock().map(|c| c.clone()).unwrap_or_default();
        let (code, num, desc, last) = check_code(&v);
        r.check_status = code.to_string();
        r.check_code = num;
        r.check_desc = desc.to_string();
        r.last_chk = last;
        let ms = s.ext.check_ms.load(Ordering::Relaxed);
        r.check_duration = (ms != u64::MAX).then_some(ms);
        r.chkfail = Some(ld(&s.ext.chkfail));
        if s.opts.observe != crate::config::Observe::None {
            r.hanafail = Some(ld(&s.hana.failed));
        }
        r.chkdown = Some(ld(&s.ext.chkdown));
        r.downtime = Some(down);
        let (rise, fall) = (u64::from(s.opts.rise.max(1)), u64::from(s.opts.fall.max(1)));
        r.check_rise = Some(rise);
        r.check_fall = Some(fall);
        // HAProxy's running health counter: full (`rise + fall - 1`) less
        // the failures while UP, the successes while DOWN.
        let streak = u64::from(s.check_streak.load(Ordering::Relaxed));
        r.check_health = Some(if s.check_ok.load(Ordering::Relaxed) {
            (rise + fall - 1).saturating_sub(streak)
        } else {
            streak
        });
    }
    let a = &s.agent;
    if a.enabled() {
        // HAProxy's fields of an enabled agent: `* ` marks a check under
        // way; rise and fall are 1.
        let v = a.report();
        let busy = if a.in_progress.load(Ordering::Relaxed) {
            "* "
        } else {
            ""
        };
        r.agent_status = format!("{busy}{}", v.st.short());
        r.agent_code = v.st.has_code().then(|| u64::try_from(v.code).unwrap_or(0));
        let ms = a.ms.load(Ordering::Relaxed);
        r.agent_duration = Some(if ms == u64::MAX { 0 } else { ms });
        r.agent_desc = v.st.text().to_string();
        r.last_agt = v.desc;
        r.agent_rise = Some(1);
        r.agent_fall = Some(1);
        r.agent_health = Some(u64::from(a.healthy.load(Ordering::Relaxed)));
    }
    r
}

/// A listener's row (`option socket-stats`): HAProxy's `sock-N` lines.
fn li_row(i: usize, fe: &FrontendRt, l: &crate::proxy::ListenerStats, global_full: bool) -> Row {
    let mut r = Row::new(&fe.name, &l.name, Kind::Listener, i, l.luid);
    r.mode = if fe.l4.tcp_mode { "tcp" } else { "http" };
    let cur = l.cur.load(Ordering::Relaxed);
    r.scur = u64::from(cur);
    r.smax = Some(u64::from(l.max.load(Ordering::Relaxed)));
    // A listener's limit is its frontend's maxconn (no `maxconn` on
    // bind lines in ebb).
    r.slim = fe.maxconn.map(u64::from);
    r.stot = ld(&l.total);
    // HAProxy's listener states: FULL at its limit, WAITING while held
    // back by a process-wide limit, else OPEN.
    r.status = if fe.maxconn.is_some_and(|m| cur >= m) {
        "FULL"
    } else if global_full {
        "WAITING"
    } else {
        "OPEN"
    }
    .into();
    r
}

/// The compression counters of a frontend or backend (nothing bypasses
/// the compressor in ebb: no `maxcomprate`/`maxcompcpuusage`).
fn http_comp(h: &crate::proxy::HttpCounters) -> Option<[u64; 4]> {
    Some([ld(&h.comp_in), ld(&h.comp_out), 0, ld(&h.comp_rsp)])
}

/// The rules' counters of a frontend or backend.
fn rule_counts(h: &crate::proxy::HttpCounters) -> Option<[u64; 4]> {
    Some([
        ld(&h.failed_rewrites),
        ld(&h.internal_errors),
        ld(&h.cache_lookups),
        ld(&h.cache_hits),
    ])
}

/// A backend's or server's times, in milliseconds.
#[derive(Clone, Debug)]
pub struct TimeRow {
    /// The averages `show stat` prints, over the streams counted while
    /// under 1024.
    pub avg: [u64; 4],
    /// The averages over a full window of 1024 (the exporter's).
    pub avg_full: [u64; 4],
    pub max: [u64; 4],
}

/// A backend's or server's time statistics and aborts.
fn note_times(r: &mut Row, c: &crate::backend::Counters) {
    r.times = Some(TimeRow {
        avg: c.times.averages(false),
        avg_full: c.times.averages(true),
        max: c.times.maxima(),
    });
    r.aborts = Some((ld(&c.cli_aborts), ld(&c.srv_aborts)));
    r.qmax = Some(ld(&c.qmax));
}

fn be_row(i: usize, be: &BackendRt) -> Row {
    let mut r = Row::new(&be.name, "BACKEND", Kind::Backend, i, 0);
    r.desc.clone_from(&be.desc);
    r.mode = if be.l4.tcp_mode { "tcp" } else { "http" };
    let h = &be.h2;
    r.h2 = [
        Some(ld(&h.open_conns)),
        Some(ld(&h.open_streams)),
        Some(ld(&h.total_conns)),
        Some(ld(&h.total_streams)),
    ];
    r.bout = be.http.bytes_out();
    r.bin = be.http.bytes_in();
    let req = be.http.requests();
    r.req_tot = Some(req);
    r.comp = http_comp(&be.http);
    r.rules = rule_counts(&be.http);
    r.hrsp = be.http.hrsp();
    match &be.kind {
        BackendKind::Servers(sv) => {
            let f = &sv.farm;
            r.qcur = f.queued() as u64;
            let mut w = 0;
            let (mut act, mut bck) = (0, 0);
            for s in &f.servers {
                let c = &s.counters;
                r.scur += u64::from(s.cur.load(Ordering::Relaxed));
                r.stot += ld(&c.sessions);
                r.econ += ld(&c.conn_errors);
                r.eresp += ld(&c.resp_errors);
                r.wretr += ld(&c.retries);
                r.wredis += ld(&c.redispatches);
                r.qtime_out += ld(&c.queue_timeouts);
                r.connect += ld(&c.connects);
                r.reuse += ld(&c.reuses);
                if let Some(a) = c.last_session_age() {
                    r.lastsess = Some(r.lastsess.map_or(a, |b| b.min(a)));
                }
                if s.usable() {
                    if s.opts.backup {
                        bck += 1;
                    } else {
                        act += 1;
                        w += u64::from(s.weight.load(Ordering::Relaxed));
                    }
                }
            }
            r.qtime_out += ld(&f.counters.queue_timeouts);
            note_times(&mut r, &f.counters);
            let (lastchg, down) = f.be_ext.ages();
            r.lastchg = Some(lastchg);
            r.chkdown = Some(ld(&f.be_ext.chkdown));
            if !f.servers.is_empty() {
                r.has_servers = true;
                r.downtime = Some(down);
            }
            r.smax = Some(peak(format!("be/{}/c", be.name), r.scur));
            r.algo = algo_name(&f.balance).to_string();
            r.uweight = Some(w);
            r.weight = Some(w);
            r.act = Some(act);
            r.bck = Some(bck);
            r.lbtot = Some(r.stot);
            r.status = if act + bck > 0 { "UP" } else { "DOWN" }.into();
        }
        BackendKind::Files(_) => {
            r.qmax = Some(0);
            r.stot = req;
            r.status = "UP".into();
        }
    }
    (r.rate, r.rate_max) = rate(format!("be/{}/s", be.name), r.stot);
    (r.req_rate, r.req_rate_max) = rate(format!("be/{}/r", be.name), req);
    r
}

/// Every row: each frontend, then each backend's servers and the backend
/// itself (HAProxy's order). `only` limits to one proxy name.
pub fn rows(c: &Compiled, only: Option<&str>) -> Vec<Row> {
    let mut out = Vec::new();
    let keep = |n: &str| only.is_none_or(|o| o == n);
    let global_full = crate::registry::Process::global()
        .is_some_and(|p| p.shared.actconn.load(Ordering::Relaxed) >= p.shared.maxconn);
    for fe in &c.frontends {
        if keep(&fe.name) {
            out.push(fe_row(fe.uuid, fe));
            for l in &fe.listeners {
                out.push(li_row(fe.uuid, fe, l, global_full));
            }
        }
    }
    for be in &c.backends {
        if !keep(&be.name) {
            continue;
        }
        if let BackendKind::Servers(sv) = &be.kind {
            for s in &sv.farm.servers {
                let mut r = srv_row(be.uuid, &sv.farm, s);
                r.mode = if be.l4.tcp_mode { "tcp" } else { "http" };
                out.push(r);
            }
        }
        out.push(be_row(be.uuid, be));
    }
    for b in &c.bare_backends {
        if keep(&b.name) {
            let mut r = Row::new(&b.name, "BACKEND", Kind::Backend, b.uuid, 0);
            r.mode = if b.tcp_mode { "tcp" } else { "http" };
            r.status = "UP".into();
            r.qmax = Some(0);
            r.req_tot = Some(0);
            r.smax = Some(0);
            r.weight = Some(0);
            r.uweight = Some(0);
            r.act = Some(0);
            r.bck = Some(0);
            r.lbtot = Some(0);
            r.chkdown = Some(0);
            // Nothing passes through it: zero times, aborts, compression.
            r.times = Some(TimeRow {
                avg: [0; 4],
                avg_full: [0; 4],
                max: [0; 4],
            });
            r.aborts = Some((0, 0));
            r.qmax = Some(0);
            r.comp = Some([0; 4]);
            r.rules = Some([0; 4]);
            // Nothing changes its state: the last change is the start.
            r.lastchg = crate::registry::Process::global()
                .and_then(|p| p.start.elapsed().ok())
                .map(|d| d.as_secs());
            out.push(r);
        }
    }
    out
}

/// HAProxy 2.6's `show stat` fields in order: name, typed-output tags
/// (origin, nature, scope) and type. Position = index; the CSV adds a `-`
/// column between the base fields and the modules' (from `ssl_sess`).
pub const STAT_FIELDS: &[(&str, &str, &str)] = &[
    ("pxname", "KNS", "str"),
    ("svname", "KNS", "str"),
    ("qcur", "MGP", "u32"),
    ("qmax", "MMP", "u32"),
    ("scur", "MGP", "u32"),
    ("smax", "MMP", "u32"),
    ("slim", "CLP", "u32"),
    ("stot", "MCP", "u64"),
    ("bin", "MCP", "u64"),
    ("bout", "MCP", "u64"),
    ("dreq", "MCP", "u64"),
    ("dresp", "MCP", "u64"),
    ("ereq", "MCP", "u64"),
    ("econ", "MCP", "u64"),
    ("eresp", "MCP", "u64"),
    ("wretr", "MCP", "u64"),
    ("wredis", "MCP", "u64"),
    ("status", "SGP", "str"),
    ("weight", "MaS", "u32"),
    ("act", "SGP", "u32"),
    ("bck", "SGP", "u32"),
    ("chkfail", "MCP", "u64"),
    ("chkdown", "MCP", "u64"),
    ("lastchg", "MAP", "u32"),
    ("downtime", "MCP", "u32"),
    ("qlimit", "CLP", "u32"),
    ("pid", "KGP", "u32"),
    ("iid", "KGS", "u32"),
    ("sid", "KGS", "u32"),
    ("throttle", "MaP", "u32"),
    ("lbtot", "MCP", "u64"),
    ("tracked", "KNS", "str"),
    ("type", "CGS", "u32"),
    ("rate", "MRP", "u32"),
    ("rate_lim", "CLP", "u32"),
    ("rate_max", "MMP", "u32"),
    ("check_status", "MOP", "str"),
    ("check_code", "MOP", "u32"),
    ("check_duration", "MDP", "u64"),
    ("hrsp_1xx", "MCP", "u64"),
    ("hrsp_2xx", "MCP", "u64"),
    ("hrsp_3xx", "MCP", "u64"),
    ("hrsp_4xx", "MCP", "u64"),
    ("hrsp_5xx", "MCP", "u64"),
    ("hrsp_other", "MCP", "u64"),
    ("hanafail", "MCP", "u64"),
    ("req_rate", "MRP", "u32"),
    ("req_rate_max", "MMP", "u32"),
    ("req_tot", "MCP", "u64"),
    ("cli_abrt", "MCP", "u64"),
    ("srv_abrt", "MCP", "u64"),
    ("comp_in", "MCP", "u64"),
    ("comp_out", "MCP", "u64"),
    ("comp_byp", "MCP", "u64"),
    ("comp_rsp", "MCP", "u64"),
    ("lastsess", "MAP", "s32"),
    ("last_chk", "MOP", "str"),
    ("last_agt", "MOP", "str"),
    ("qtime", "MaP", "u32"),
    ("ctime", "MaP", "u32"),
    ("rtime", "MaP", "u32"),
    ("ttime", "MaP", "u32"),
    ("agent_status", "MOP", "str"),
    ("agent_code", "MOP", "u32"),
    ("agent_duration", "MDP", "u64"),
    ("check_desc", "MOP", "str"),
    ("agent_desc", "MOP", "str"),
    ("check_rise", "CGS", "u32"),
    ("check_fall", "CGS", "u32"),
    ("check_health", "CGS", "u32"),
    ("agent_rise", "MaS", "u32"),
    ("agent_fall", "MaS", "u32"),
    ("agent_health", "SGS", "u32"),
    ("addr", "CGS", "str"),
    ("cookie", "CGS", "str"),
    ("mode", "CGS", "str"),
    ("algo", "CGS", "str"),
    ("conn_rate", "MRP", "u32"),
    ("conn_rate_max", "MMP", "u32"),
    ("conn_tot", "MCP", "u64"),
    ("intercepted", "MCP", "u64"),
    ("dcon", "MCP", "u64"),
    ("dses", "MCP", "u64"),
    ("wrew", "MCP", "u64"),
    ("connect", "MCP", "u64"),
    ("reuse", "MCP", "u64"),
    ("cache_lookups", "MCP", "u64"),
    ("cache_hits", "MCP", "u64"),
    ("srv_icur", "MGP", "u32"),
    ("src_ilim", "CLP", "u32"),
    ("qtime_max", "MMP", "u32"),
    ("ctime_max", "MMP", "u32"),
    ("rtime_max", "MMP", "u32"),
    ("ttime_max", "MMP", "u32"),
    ("eint", "MCP", "u64"),
    ("idle_conn_cur", "MGP", "u32"),
    ("safe_conn_cur", "MGP", "u32"),
    ("used_conn_cur", "MGP", "u32"),
    ("need_conn_est", "MGP", "u32"),
    ("uweight", "MaS", "u32"),
    ("agg_server_status", "MGP", "u32"),
    ("agg_server_check_status", "MGP", "u32"),
    ("agg_check_status", "MGP", "u32"),
    // The statistics modules' fields (HAProxy's ssl, h2 and h1 modules).
    ("ssl_sess", "MCP", "u64"),
    ("ssl_reused_sess", "MCP", "u64"),
    ("ssl_failed_handshake", "MCP", "u64"),
    ("h2_headers_rcvd", "MCP", "u64"),
    ("h2_data_rcvd", "MCP", "u64"),
    ("h2_settings_rcvd", "MCP", "u64"),
    ("h2_rst_stream_rcvd", "MCP", "u64"),
    ("h2_goaway_rcvd", "MCP", "u64"),
    ("h2_detected_conn_protocol_errors", "MCP", "u64"),
    ("h2_detected_strm_protocol_errors", "MCP", "u64"),
    ("h2_rst_stream_resp", "MCP", "u64"),
    ("h2_goaway_resp", "MCP", "u64"),
    ("h2_open_connections", "MGP", "u64"),
    ("h2_backend_open_streams", "MGP", "u64"),
    ("h2_total_connections", "MCP", "u64"),
    ("h2_backend_total_streams", "MCP", "u64"),
    ("h1_open_connections", "MGP", "u64"),
    ("h1_open_streams", "MGP", "u64"),
    ("h1_total_connections", "MCP", "u64"),
    ("h1_total_streams", "MCP", "u64"),
    ("h1_bytes_in", "MCP", "u64"),
    ("h1_bytes_out", "MCP", "u64"),
    ("h1_spliced_bytes_in", "MCP", "u64"),
    ("h1_spliced_bytes_out", "MCP", "u64"),
];

/// Fields before the modules' (the CSV's `-` column sits there).
const BASE_FIELDS: usize = 103;

/// The CSV header's names, `-` included.
pub fn csv_columns() -> Vec<&'static str> {
    let mut v: Vec<&str> = STAT_FIELDS[..BASE_FIELDS].iter().map(|f| f.0).collect();
    v.push("-");
    v.extend(STAT_FIELDS[BASE_FIELDS..].iter().map(|f| f.0));
    v
}

fn opt(v: Option<u64>) -> String {
    v.map(|v| v.to_string()).unwrap_or_default()
}

/// Keeps a CSV field on one field: commas and line breaks become spaces.
fn csv_field(s: &str) -> String {
    s.replace([',', '\n', '\r'], " ")
}

/// One field's value: `None` prints empty (no such concept in ebb, or
/// not for this kind of row, as HAProxy leaves it empty).
#[derive(Clone, Debug, PartialEq)]
pub enum Val {
    U(u64),
    /// A signed value (`lastsess`: -1 when there was no session).
    I(i64),
    Str(String),
}

impl std::fmt::Display for Val {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Val::U(v) => write!(f, "{v}"),
            Val::I(v) => write!(f, "{v}"),
            Val::Str(v) => f.write_str(v),
        }
    }
}

/// Every field of a row, by position in [`STAT_FIELDS`].
pub fn values(r: &Row) -> Vec<Option<Val>> {
    let mut v: Vec<Option<Val>> = vec![None; STAT_FIELDS.len()];
    let fe = r.kind == Kind::Frontend;
    let be = r.kind == Kind::Backend;
    let sv = r.kind == Kind::Server;
    let u = |x: u64| Some(Val::U(x));
    let st = |x: &str| Some(Val::Str(x.to_string()));
    v[0] = st(&r.pxname);
    v[1] = st(&r.svname);
    if r.kind == Kind::Listener {
        // What ebb counts per listener; the other counters of HAProxy's
        // listener rows (bytes, denials, errors) stay empty.
        v[4] = u(r.scur);
        v[5] = r.smax.map(Val::U);
        v[6] = r.slim.map(Val::U);
        v[7] = u(r.stot);
        v[17] = st(&r.status);
        v[26] = u(1);
        v[27] = u(r.iid as u64);
        v[28] = u(r.sid as u64);
        v[32] = u(3);
        v[75] = st(r.mode);
        return v;
    }
    if !fe {
        v[2] = u(r.qcur);
        v[3] = r.qmax.map(Val::U);
    }
    v[4] = u(r.scur);
    v[5] = r.smax.map(Val::U);
    v[6] = r.slim.map(Val::U);
    v[7] = u(r.stot);
    v[8] = u(r.bin);
    v[9] = u(r.bout);
    if !sv {
        v[10] = u(r.dreq);
    }
    v[11] = u(0);
    if fe {
        v[12] = u(r.ereq);
    } else {
        v[13] = u(r.econ);
        v[14] = u(r.eresp);
        v[15] = u(r.wretr);
        v[16] = u(r.wredis);
    }
    v[17] = st(&r.status);
    v[18] = r.weight.map(Val::U);
    v[19] = r.act.map(Val::U);
    v[20] = r.bck.map(Val::U);
    v[21] = r.chkfail.map(Val::U);
    v[45] = r.hanafail.map(Val::U);
    v[22] = r.chkdown.map(Val::U);
    v[23] = r.lastchg.map(Val::U);
    v[24] = r.downtime.map(Val::U);
    v[25] = r.qlimit.map(Val::U);
    v[26] = u(1);
    v[27] = u(r.iid as u64);
    v[28] = u(r.sid as u64);
    v[30] = r.lbtot.map(Val::U);
    v[31] = r.tracked.as_deref().and_then(st);
    v[32] = u(u64::from(r.kind.code()));
    v[33] = u(r.rate);
    if fe {
        v[34] = u(0);
    }
    v[35] = u(r.rate_max);
    if !r.check_status.is_empty() || r.check_code.is_some() {
        v[36] = st(&r.check_status);
    }
    v[37] = r.check_code.map(Val::U);
    v[38] = r.check_duration.map(Val::U);
    // HTTP response classes: frontends and backends always; servers of
    // an http backend (HAProxy's).
    if !sv || r.mode == "http" {
        for k in 0..6 {
            v[39 + k] = u(r.hrsp[k]);
        }
    }
    if fe {
        v[46] = u(r.req_rate);
        v[47] = u(r.req_rate_max);
        // Every accepted connection is a session in ebb: HAProxy's
        // connection columns are the session ones.
        v[77] = u(r.rate);
        v[78] = u(r.rate_max);
        v[79] = u(r.stot);
    }
    v[48] = r.req_tot.map(Val::U);
    if be || sv {
        v[84] = u(r.connect);
        v[85] = u(r.reuse);
        // HAProxy's -1: no session yet.
        v[55] = Some(r.lastsess.map_or(Val::I(-1), |a| Val::I(a as i64)));
    }
    if !r.last_chk.is_empty() {
        v[56] = st(&r.last_chk);
    }
    if r.agent_rise.is_some() {
        v[57] = st(&r.last_agt);
        v[62] = st(&r.agent_status);
        v[63] = r.agent_code.map(Val::U);
        v[64] = r.agent_duration.map(Val::U);
        v[66] = st(&r.agent_desc);
        v[70] = r.agent_rise.map(Val::U);
        v[71] = r.agent_fall.map(Val::U);
        v[72] = r.agent_health.map(Val::U);
    }
    if !r.check_desc.is_empty() {
        v[65] = st(&r.check_desc);
    }
    v[67] = r.check_rise.map(Val::U);
    v[68] = r.check_fall.map(Val::U);
    v[69] = r.check_health.map(Val::U);
    if !r.addr.is_empty() {
        v[73] = st(&r.addr);
    }
    v[75] = st(r.mode);
    if !r.algo.is_empty() {
        v[76] = st(&r.algo);
    }
    if sv || be {
        v[99] = r.uweight.map(Val::U);
    }
    if let Some(t) = &r.times {
        for k in 0..4 {
            // qtime..ttime, qtime_max..ttime_max.
            v[58 + k] = u(t.avg[k]);
            v[90 + k] = u(t.max[k]);
        }
    }
    if let Some(comp) = r.comp {
        // comp_in, comp_out, comp_byp, comp_rsp.
        for (k, n) in comp.into_iter().enumerate() {
            v[51 + k] = u(n);
        }
    }
    v[80] = r.intercepted.map(Val::U);
    if let Some((conn, sess)) = r.denied {
        v[81] = u(conn);
        v[82] = u(sess);
    }
    if let Some([wrew, eint, lookups, hits]) = r.rules {
        v[83] = u(wrew);
        v[94] = u(eint);
        // Caches are a frontend's or a backend's.
        if !sv {
            v[86] = u(lookups);
            v[87] = u(hits);
        }
    }
    v[3] = r.qmax.map(Val::U);
    if let Some((cli, srv)) = r.aborts {
        v[49] = u(cli);
        v[50] = u(srv);
    }
    if sv {
        v[29] = r.throttle.map(Val::U);
        v[88] = r.icur.map(Val::U);
        v[89] = r.ilim.map(Val::U);
    }
    // `h2_open_connections` is the 13th field of the modules' (after the
    // ssl module's three and nine h2 frame counters).
    for (k, x) in r.h2.iter().enumerate() {
        v[BASE_FIELDS + 12 + k] = x.map(Val::U);
    }
    v
}

/// The CSV of `show stat` and `;csv`.
pub fn csv(rows: &[Row]) -> String {
    let mut s = String::from("# ");
    s.push_str(&csv_columns().join(","));
    s.push_str(",\n");
    for r in rows {
        let vals = values(r);
        for (i, x) in vals.iter().enumerate() {
            if i == BASE_FIELDS {
                s.push_str("-,");
            }
            if let Some(x) = x {
                s.push_str(&csv_field(&x.to_string()));
            }
            s.push(',');
        }
        s.push('\n');
    }
    s
}

fn obj_letter(k: Kind) -> char {
    match k {
        Kind::Frontend => 'F',
        Kind::Backend => 'B',
        Kind::Server => 'S',
        Kind::Listener => 'L',
    }
}

/// `show stat typed`: one line per non-empty field,
/// `F|B|S.iid.sid.pos.name.1:tags:type:value`.
pub fn typed(rows: &[Row]) -> String {
    let mut s = String::new();
    for r in rows {
        for (i, x) in values(r).into_iter().enumerate() {
            let Some(x) = x else { continue };
            let (name, tags, ty) = STAT_FIELDS[i];
            let _ = writeln!(
                s,
                "{}.{}.{}.{i}.{name}.1:{tags}:{ty}:{}",
                obj_letter(r.kind),
                r.iid,
                r.sid,
                x.to_string().replace('\n', " ")
            );
        }
        s.push('\n');
    }
    s
}

/// A JSON string literal.
pub fn json_str(v: &str) -> String {
    let mut o = String::with_capacity(v.len() + 2);
    o.push('"');
    for c in v.chars() {
        match c {
            '"' => o.push_str("\\\""),
            '\\' => o.push_str("\\\\"),
            c if (c as u32) < 0x20 => {
                let _ = write!(o, "\\u{:04x}", c as u32);
            }
            c => o.push(c),
        }
    }
    o.push('"');
    o
}

/// The long names of the typed tags, for JSON.
pub fn json_tags(tags: &str) -> String {
    let b = tags.as_bytes();
    let origin = match b.first() {
        Some(b'M') => "Metric",
        Some(b'S') => "Status",
        Some(b'K') => "Key",
        Some(b'C') => "Config",
        Some(b'P') => "Product",
        _ => "Unknown",
    };
    let nature = match b.get(1) {
        Some(b'A') => "Age",
        Some(b'a') => "Avg",
        Some(b'C') => "Counter",
        Some(b'D') => "Duration",
        Some(b'G') => "Gauge",
        Some(b'L') => "Limit",
        Some(b'M') => "Max",
        Some(b'N') => "Name",
        Some(b'O') => "Output",
        Some(b'R') => "Rate",
        Some(b'T') => "Time",
        _ => "Unknown",
    };
    let scope = match b.get(2) {
        Some(b'P') => "Process",
        Some(b'S') => "Service",
        Some(b's') => "System",
        Some(b'C') => "Cluster",
        _ => "Unknown",
    };
    format!("{{\"origin\":\"{origin}\",\"nature\":\"{nature}\",\"scope\":\"{scope}\"}}")
}

/// A typed value as JSON (`{"type":..,"value":..}`).
pub fn json_val(ty: &str, x: &Val) -> String {
    match x {
        Val::Str(v) => format!("{{\"type\":\"str\",\"value\":{}}}", json_str(v)),
        other => format!("{{\"type\":\"{ty}\",\"value\":{other}}}"),
    }
}

/// `show stat json`: an array of rows, each an array of field objects.
pub fn json(rows: &[Row]) -> String {
    let mut out = Vec::new();
    for r in rows {
        let obj = match r.kind {
            Kind::Frontend => "Frontend",
            Kind::Backend => "Backend",
            Kind::Server => "Server",
            Kind::Listener => "Listener",
        };
        let mut fields = Vec::new();
        for (i, x) in values(r).into_iter().enumerate() {
            let Some(x) = x else { continue };
            let (name, tags, ty) = STAT_FIELDS[i];
            fields.push(format!(
                "{{\"objType\":\"{obj}\",\"proxyId\":{},\"id\":{},\"field\":{{\"pos\":{i},\"name\":\"{name}\"}},\"processNum\":1,\"tags\":{},\"value\":{}}}",
                r.iid,
                r.sid,
                json_tags(tags),
                json_val(ty, &x)
            ));
        }
        out.push(format!("[{}]", fields.join(",")));
    }
    format!("[{}]\n", out.join(","))
}

/// `show stat` filter: proxy (`-1` all, an id or a name), types (bits:
/// 1 frontends, 2 backends, 4 servers; `-1` all) and server id (`-1` all).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Filter {
    pub proxy: Option<String>,
    pub types: Option<u32>,
    pub sid: Option<usize>,
}

impl Filter {
    /// Whether a row passes.
    pub fn keep(&self, r: &Row) -> bool {
        if let Some(p) = &self.proxy {
            if *p != r.pxname && *p != r.iid.to_string() {
                return false;
            }
        }
        if let Some(t) = self.types {
            let bit = match r.kind {
                Kind::Frontend => 1,
                Kind::Backend => 2,
                Kind::Server => 4,
                Kind::Listener => 8,
            };
            if t & bit == 0 {
                return false;
            }
        }
        match self.sid {
            Some(id) if r.kind == Kind::Server => r.sid == id,
            _ => true,
        }
    }
}

// ---------------------------------------------------------------------------
// Server actions (CLI `set server`, `enable|disable server`, page admin)
// ---------------------------------------------------------------------------

/// Finds `BACKEND/SERVER` in the configuration in force.
pub fn find_server(c: &Compiled, spec: &str) -> Result<(Arc<Farm>, Arc<ServerRt>), String> {
    let (b, s) = spec
        .split_once('/')
        .ok_or_else(|| format!("'{spec}': expected BACKEND/SERVER"))?;
    find_server2(c, b, s)
}

/// Finds a server by backend and server name.
pub fn find_server2(c: &Compiled, b: &str, s: &str) -> Result<(Arc<Farm>, Arc<ServerRt>), String> {
    let be = c
        .backends
        .iter()
        .find(|x| x.name == b)
        .ok_or_else(|| format!("No such backend '{b}'."))?;
    let BackendKind::Servers(sv) = &be.kind else {
        return Err(format!("Backend '{b}' has no servers (it serves files)."));
    };
    let srv = sv
        .farm
        .servers
        .iter()
        .find(|x| x.name == s)
        .ok_or_else(|| format!("No such server '{s}' in backend '{b}'."))?;
    Ok((Arc::clone(&sv.farm), Arc::clone(srv)))
}

/// Puts a server in `ready`, `drain` or `maint`. Streams waiting for a
/// server that leaves service pick again; when one comes back, the
/// backend's queue is served.
pub fn set_admin(farm: &Farm, s: &ServerRt, state: u8) -> Result<(), String> {
    crate::backend::set_admin(farm, s, state)
}

/// `set server B/S weight N` (0..=256) or `N%` of the configured weight.
pub fn set_weight(farm: &Farm, s: &ServerRt, arg: &str) -> Result<(), String> {
    let w = if let Some(p) = arg.strip_suffix('%') {
        let p: u64 = p.parse().map_err(|_| format!("Invalid weight '{arg}'."))?;
        (u64::from(s.opts.weight) * p / 100) as u32
    } else {
        arg.parse::<u32>()
            .map_err(|_| format!("Invalid weight '{arg}': expected 0..256 or N%."))?
    };
    if w > 256 {
        return Err(format!("Invalid weight '{arg}': at most 256."));
    }
    if farm.static_weights() && w != 0 && w != s.opts.weight {
        return Err(
            "Backend is using a static LB algorithm and only accepts weights '0%' and '100%'."
                .into(),
        );
    }
    s.weight.store(w, Ordering::Relaxed);
    if w == 0 {
        farm.redispatch_queue_of(s);
    } else {
        farm.kick_backend_queue();
    }
    Ok(())
}

/// `set maxconn server B/S N` (0: unlimited).
pub fn set_maxconn(farm: &Farm, s: &ServerRt, arg: &str) -> Result<(), String> {
    let m: u32 = arg
        .parse()
        .map_err(|_| format!("Invalid maxconn '{arg}'."))?;
    s.maxconn.store(m, Ordering::Relaxed);
    farm.kick_backend_queue();
    Ok(())
}

/// Forgets the servers' `smax` (`clear counters`).
pub fn clear_server_maxima(c: &Compiled) {
    for be in &c.backends {
        if let BackendKind::Servers(sv) = &be.kind {
            for s in &sv.farm.servers {
                s.ext
                    .smax
                    .store(s.cur.load(Ordering::Relaxed), Ordering::Relaxed);
                s.counters.times.clear_maxima();
                s.counters.qmax.store(0, Ordering::Relaxed);
            }
            sv.farm.counters.times.clear_maxima();
            sv.farm.counters.qmax.store(0, Ordering::Relaxed);
        }
    }
}

/// Zeroes every counter (`clear counters all`).
pub fn clear_all(c: &Compiled) {
    clear_server_maxima(c);
    for fe in &c.frontends {
        fe.http.clear();
        fe.sessions.store(0, Ordering::Relaxed);
    }
    for be in &c.backends {
        be.http.clear();
        if let BackendKind::Servers(sv) = &be.kind {
            let f = &sv.farm;
            for s in f.servers.iter().map(|s| &s.counters).chain([&f.counters]) {
                for a in [
                    &s.sessions,
                    &s.bytes_in,
                    &s.bytes_out,
                    &s.conn_errors,
                    &s.resp_errors,
                    &s.retries,
                    &s.redispatches,
                    &s.queued_total,
                    &s.queue_timeouts,
                    &s.connects,
                    &s.reuses,
                    &s.cli_aborts,
                    &s.srv_aborts,
                ]
                .into_iter()
                .chain(&s.hrsp)
                {
                    a.store(0, Ordering::Relaxed);
                }
                s.times.clear();
            }
        }
    }
    samples().lock().unwrap_or_else(|p| p.into_inner()).clear();
}

// ---------------------------------------------------------------------------
// The HTML page
// ---------------------------------------------------------------------------

/// Options of one view of the page (from the text after the stats URI).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct PageOpts {
    pub csv: bool,
    pub norefresh: bool,
    /// `;up`: only servers that are UP.
    pub up_only: bool,
    /// `;no-maint`: hide servers in maintenance.
    pub no_maint: bool,
    /// `;typed`, `;json`: `show stat`'s typed and JSON outputs.
    pub typed: bool,
    pub json: bool,
    /// `;json-schema` (not served by ebb: answered 501).
    pub schema: bool,
}

/// The result codes of an admin action, carried by the redirect that
/// follows it (`;st=CODE`).
pub const ST_CODES: [&str; 8] = [
    "DENY", "DONE", "ERRP", "EXCD", "NONE", "PART", "UNKN", "IVAL",
];

/// What a request for the page asks: its options, the result code of a
/// previous action (`;st=`), the proxies to show (`scope=`).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct PageReq {
    pub o: PageOpts,
    pub st: Option<&'static str>,
    pub scope: Option<String>,
}

/// Whether `pat` starts at some position of `rest` from which at least
/// `room` bytes remain (HAProxy scans the text after the URI this way).
fn find_in(rest: &[u8], pat: &[u8], room: usize) -> Option<usize> {
    if rest.len() < room {
        return None;
    }
    (0..=rest.len() - room).find(|&i| rest[i..].starts_with(pat))
}

/// Reads the text after the stats URI as HAProxy does: each word
/// (`;up`, `;no-maint`, `;norefresh` when the page refreshes, `;csv`,
/// `;typed`, `;json`, `;json-schema`, `;st=CODE`, `scope=NAME`) is looked
/// for anywhere in it. A scope longer than 20 characters is cut; one with
/// a character other than letters, digits, `_`, `-`, `.` and `:` is
/// dropped.
pub fn parse_page(rest: &[u8], refresh: bool) -> PageReq {
    let has = |w: &[u8]| find_in(rest, w, w.len()).is_some();
    let mut r = PageReq::default();
    r.o.up_only = has(b";up");
    r.o.no_maint = has(b";no-maint");
    r.o.norefresh = refresh && has(b";norefresh");
    r.o.csv = has(b";csv");
    r.o.typed = has(b";typed");
    r.o.json = has(b";json");
    r.o.schema = has(b";json-schema");
    if let Some(i) = find_in(rest, b";st=", 8) {
        let code = &rest[i + 4..i + 8];
        r.st = Some(
            ST_CODES
                .iter()
                .copied()
                .find(|c| c.as_bytes() == code)
                .unwrap_or("UNKN"),
        );
    }
    if let Some(i) = find_in(rest, b"scope=", 8) {
        let v = &rest[i + 6..];
        let end = v
            .iter()
            .position(|c| matches!(c, b';' | b'&' | b' '))
            .unwrap_or(v.len());
        let v = &v[..end.min(20)];
        let ok = v
            .iter()
            .all(|c| c.is_ascii_alphanumeric() || b"_-.:".contains(c));
        if ok && !v.is_empty() {
            r.scope = Some(String::from_utf8_lossy(v).into_owned());
        }
    }
    r
}

/// Whether a proxy is shown under `scope` (a part of its name, compared
/// without case).
fn in_scope(scope: Option<&str>, name: &str) -> bool {
    scope.is_none_or(|s| name.to_ascii_lowercase().contains(&s.to_ascii_lowercase()))
}

fn esc(s: &str) -> String {
    let mut o = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '<' => o.push_str("&lt;"),
            '>' => o.push_str("&gt;"),
            '&' => o.push_str("&amp;"),
            '"' => o.push_str("&quot;"),
            '\'' => o.push_str("&#39;"),
            c => o.push(c),
        }
    }
    o
}

/// Bytes in short units (B, KiB, MiB, GiB).
fn bytes(n: u64) -> String {
    const K: f64 = 1024.0;
    let f = n as f64;
    if f < K {
        format!("{n} B")
    } else if f < K * K {
        format!("{:.1} KiB", f / K)
    } else if f < K * K * K {
        format!("{:.1} MiB", f / K / K)
    } else {
        format!("{:.2} GiB", f / K / K / K)
    }
}

/// What the page header says about the process.
pub struct PageInfo<'a> {
    pub pid: u32,
    pub nbthread: usize,
    pub uptime_s: u64,
    pub conns: u32,
    pub version: Option<&'a str>,
    pub refresh_s: Option<u64>,
    /// The page's own URI (with the current modifiers) for links.
    pub uri: &'a str,
    pub admin: bool,
    /// The result of an admin action just done, shown on top.
    pub notice: Option<&'a str>,
    /// `stats show-node`, `stats show-desc`: shown under the title;
    /// `stats show-legends`: each name's cell tells the mode, id and
    /// address.
    pub node: Option<&'a str>,
    pub desc: Option<&'a str>,
    pub legends: bool,
}

const CSS: &str = "body{font-family:system-ui,Arial,sans-serif;font-size:13px;margin:16px;color:#222}\
h1{font-size:20px;margin:0 0 4px}h2{font-size:15px;margin:18px 0 4px}\
table{border-collapse:collapse;margin-bottom:8px;min-width:60%}\
th,td{border:1px solid #bbb;padding:2px 6px;text-align:right;white-space:nowrap}\
th{background:#20466b;color:#fff;font-weight:600}\
td.n{text-align:left;font-weight:600}\
tr.fe td{background:#eef3f8}tr.be td{background:#dfe8f0;font-weight:600}\
tr.up td.st{background:#b8e6b0}tr.down td.st{background:#f5aaaa}\
tr.maint td.st{background:#b7c9e6}tr.drain td.st{background:#f6d78b}\
tr.nocheck td.st{background:#dfeedd}tr.going_down td.st{background:#f0f0a0}tr.going_up td.st{background:#ffd020}td.ck{text-align:left}\
.info{color:#555;margin-bottom:8px}.notice{background:#ffd;border:1px solid #cc9;padding:4px;margin:6px 0}\
.mods a{margin-right:10px}";

/// The HTML page.
pub fn html(rows: &[Row], info: &PageInfo<'_>, o: PageOpts) -> String {
    let mut s = String::with_capacity(16 * 1024);
    s.push_str(
        "<!DOCTYPE html>\n<html><head><meta charset=\"utf-8\">\n<title>ebb statistics</title>\n",
    );
    if let (Some(r), false) = (info.refresh_s, o.norefresh) {
        let _ = writeln!(s, "<meta http-equiv=\"refresh\" content=\"{r}\">");
    }
    let _ = writeln!(s, "<style>{CSS}</style></head><body>");
    match info.node {
        Some(n) => {
            let _ = writeln!(s, "<h1>ebb statistics on {}</h1>", esc(n));
        }
        None => s.push_str("<h1>ebb statistics</h1>\n"),
    }
    if let Some(d) = info.desc {
        let _ = writeln!(s, "<div class=\"desc\">{}</div>", esc(d));
    }
    s.push_str("<div class=\"info\">");
    if let Some(v) = info.version {
        let _ = write!(s, "version {} &middot; ", esc(v));
    }
    let _ = writeln!(
        s,
        "pid {} &middot; {} threads &middot; uptime {}s &middot; {} connections</div>",
        info.pid, info.nbthread, info.uptime_s, info.conns
    );
    if let Some(n) = info.notice {
        let _ = writeln!(s, "<div class=\"notice\">{}</div>", esc(n));
    }
    let base = esc(info.uri);
    let _ = writeln!(
        s,
        "<div class=\"mods\"><a href=\"{base};csv\">CSV export</a><a href=\"{base};norefresh\">no refresh</a><a href=\"{base};up\">hide DOWN servers</a><a href=\"{base};no-maint\">hide MAINT servers</a><a href=\"{base}\">all</a></div>"
    );
    let mut cur_px: Option<&str> = None;
    // The admin form of the backend whose table is open (its id).
    let mut form: Option<usize> = None;
    let close = |s: &mut String, form: &mut Option<usize>| {
        s.push_str("</table>\n");
        if let Some(id) = form.take() {
            let _ = writeln!(
                s,
                "<div class=\"admin\">Selected servers: <select name=\"action\">{}</select> <input type=\"hidden\" name=\"b\" value=\"#{id}\"><input type=\"submit\" value=\"Apply\"></div></form>",
                [
                    ("ready", "Set state to READY"),
                    ("drain", "Set state to DRAIN"),
                    ("maint", "Set state to MAINT"),
                    ("dhlth", "Health: disable checks"),
                    ("ehlth", "Health: enable checks"),
                    ("dagent", "Agent: disable checks"),
                    ("eagent", "Agent: enable checks"),
                    ("arunn", "Agent: force UP"),
                    ("adown", "Agent: force DOWN"),
                ]
                .iter()
                .map(|(v, t)| format!("<option value=\"{v}\">{t}</option>"))
                .collect::<String>()
            );
        }
    };
    // Each proxy's `description`, shown under its title (its rows may
    // start with servers, before the BACKEND row that carries it).
    let descs: std::collections::HashMap<&str, &str> = rows
        .iter()
        .filter_map(|r| Some((r.pxname.as_str(), r.desc.as_deref()?)))
        .collect();
    for r in rows {
        if r.kind == Kind::Server {
            let st = r.status.as_str();
            if o.up_only && !(st == "UP" || st.starts_with("UP ") || st == "no check") {
                continue;
            }
            if o.no_maint && r.admin == Some(ADMIN_MAINT) {
                continue;
            }
        }
        if cur_px != Some(r.pxname.as_str()) {
            if cur_px.is_some() {
                close(&mut s, &mut form);
            }
            cur_px = Some(&r.pxname);
            let what = if r.kind == Kind::Frontend {
                "frontend"
            } else {
                "backend"
            };
            let _ = writeln!(s, "<h2>{what} {}</h2>", esc(&r.pxname));
            if let Some(d) = descs.get(r.pxname.as_str()) {
                let _ = writeln!(s, "<p class=\"desc\">{}</p>", esc(d));
            }
            if info.admin && r.kind != Kind::Frontend {
                let _ = writeln!(s, "<form method=\"post\" action=\"{base}\">");
                form = Some(r.iid);
            }
            let _ = writeln!(s, "<table class=\"px\" id=\"px-{}\">", esc(&r.pxname));
            s.push_str("<tr><th>name</th><th>status</th><th>queue</th><th>sessions</th><th>limit</th><th>total</th><th>rate/s</th><th>req/s</th><th>requests</th><th>bytes in</th><th>bytes out</th><th>2xx</th><th>4xx</th><th>5xx</th><th>errors</th><th>weight</th><th>check</th>");
            if info.admin && r.kind != Kind::Frontend {
                s.push_str("<th>admin</th>");
            }
            s.push_str("</tr>\n");
        }
        let class = match (r.kind, r.status.as_str()) {
            (Kind::Frontend | Kind::Listener, _) => "fe up",
            (Kind::Backend, "UP") => "be up",
            (Kind::Backend, _) => "be down",
            (_, "UP") => "srv up",
            (_, st) if st.starts_with("UP ") => "srv up going_down",
            (_, st) if st.starts_with("DOWN ") && !st.starts_with("DOWN (") => "srv down going_up",
            (_, "no check") => "srv nocheck",
            (_, "MAINT") => "srv maint",
            (_, st) if st.starts_with("MAINT (via ") => "srv maint",
            (_, "DRAIN") => "srv drain",
            _ => "srv down",
        };
        let legend = if info.legends {
            let mut t = format!("mode {}", r.mode);
            match r.kind {
                Kind::Server => {
                    let _ = write!(t, ", id {}", r.sid);
                    if !r.addr.is_empty() {
                        let _ = write!(t, ", address {}", r.addr);
                    }
                }
                _ => {
                    let _ = write!(t, ", id {}", r.iid);
                }
            }
            format!(" title=\"{}\"", esc(&t))
        } else {
            String::new()
        };
        let _ = write!(
            s,
            "<tr class=\"{class}\"><td class=\"n\"{legend}>{}</td><td class=\"st\">{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td class=\"ck\" title=\"{}\">{}</td>",
            esc(&r.svname),
            esc(&r.status),
            if r.kind == Kind::Frontend { String::new() } else { r.qcur.to_string() },
            r.scur,
            opt(r.slim),
            r.stot,
            r.rate,
            r.req_rate,
            opt(r.req_tot),
            bytes(r.bin),
            bytes(r.bout),
            r.hrsp[1],
            r.hrsp[3],
            r.hrsp[4],
            r.econ + r.eresp,
            opt(r.weight),
            esc(&r.check_status),
            esc(&short(&r.check_status, 24)),
        );
        if info.admin && r.kind != Kind::Frontend {
            s.push_str("<td>");
            if r.kind == Kind::Server {
                let _ = write!(
                    s,
                    "<input type=\"checkbox\" name=\"s\" value=\"{}\">",
                    esc(&r.svname)
                );
            }
            s.push_str("</td>");
        }
        s.push_str("</tr>\n");
    }
    if cur_px.is_some() {
        close(&mut s, &mut form);
    }
    s.push_str("</body></html>\n");
    s
}

/// The first `n` characters of a long text, with an ellipsis.
fn short(s: &str, n: usize) -> String {
    if s.chars().count() <= n {
        return s.to_string();
    }
    let mut o: String = s.chars().take(n).collect();
    o.push('\u{2026}');
    o
}

/// Decodes a percent-encoded query value (`+` is a space).
pub fn unpct(v: &str) -> Option<String> {
    let b = v.as_bytes();
    let mut o = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        match b[i] {
            b'%' => {
                // Exactly two hex digits (`from_str_radix` alone would
                // also take a sign: `%+1`).
                let h = b.get(i + 1..i + 3)?;
                if !h.iter().all(u8::is_ascii_hexdigit) {
                    return None;
                }
                o.push(u8::from_str_radix(std::str::from_utf8(h).ok()?, 16).ok()?);
                i += 3;
            }
            b'+' => {
                o.push(b' ');
                i += 1;
            }
            c => {
                o.push(c);
                i += 1;
            }
        }
    }
    String::from_utf8(o).ok()
}

/// Finds the backend of an admin form: `#ID` or a name.
fn form_backend(c: &Compiled, b: &str) -> Option<Arc<Farm>> {
    let be = match b.strip_prefix('#') {
        Some(id) => {
            let id: usize = id.parse().ok()?;
            c.backends.iter().find(|x| x.uuid == id)?
        }
        None => {
            let mut named = c.backends.iter().filter(|x| x.name == b);
            let be = named.next()?;
            if named.next().is_some() {
                return None; // ambiguous
            }
            be
        }
    };
    match &be.kind {
        BackendKind::Servers(sv) => Some(Arc::clone(&sv.farm)),
        BackendKind::Files(_) => None,
    }
}

/// Does one action of the page's admin form on server `s`: `Some(true)`
/// when it changed it, `Some(false)` when the action does not apply to it
/// (not counted, as HAProxy), `None` when it is unknown or ebb cannot do
/// it.
fn form_action(farm: &Farm, s: &ServerRt, action: &str) -> Option<bool> {
    let admin = s.admin.load(Ordering::Relaxed);
    let set = |st: u8| set_admin(farm, s, st).is_ok();
    Some(match action {
        "ready" => set(ADMIN_READY),
        "drain" => set(ADMIN_DRAIN),
        "maint" => set(ADMIN_MAINT),
        "disable" => admin != ADMIN_MAINT && set(ADMIN_MAINT),
        "enable" => admin == ADMIN_MAINT && set(ADMIN_READY),
        "stop" => admin != ADMIN_DRAIN && set(ADMIN_DRAIN),
        "start" => admin == ADMIN_DRAIN && set(ADMIN_READY),
        "dhlth" | "ehlth" => {
            if !s.opts.check {
                return Some(false);
            }
            crate::backend::check_switch(farm, s, action == "ehlth", false).is_ok()
        }
        "dagent" | "eagent" => {
            if !s.agent.configured {
                return Some(false);
            }
            crate::backend::check_switch(farm, s, action == "eagent", true).is_ok()
        }
        "arunn" | "adown" => {
            if !s.agent.enabled() {
                return Some(false);
            }
            crate::backend::agent::force(farm, s, action == "arunn").is_ok()
        }
        _ => return None,
    })
}

/// The words of a posted admin form, read last to first as HAProxy
/// does: the last `b` and `action` given, every `s`; reading stops at a
/// word that does not decode.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct FormWords {
    pub b: Option<String>,
    pub action: Option<String>,
    pub servers: Vec<String>,
}

/// Splits a posted admin form into its words.
pub fn post_form_words(body: &[u8]) -> FormWords {
    let body = String::from_utf8_lossy(body);
    let mut w = FormWords::default();
    for kv in body.split('&').rev() {
        let (k, v) = kv.split_once('=').unwrap_or((kv, ""));
        let (Some(k), Some(v)) = (unpct(k), unpct(v)) else {
            break;
        };
        match k.as_str() {
            "b" if w.b.is_none() => w.b = Some(v),
            "action" if w.action.is_none() => w.action = Some(v),
            "s" => w.servers.push(v),
            _ => {}
        }
    }
    w
}

/// Runs the admin form posted to the page (`s=SERVER&...&action=A&b=B`:
/// every `s` is a server of that backend) and returns the result code
/// for the redirect.
pub fn post_action(c: &Compiled, body: &[u8]) -> &'static str {
    const KNOWN: [&str; 17] = [
        "ready", "drain", "maint", "shutdown", "dhlth", "ehlth", "hrunn", "hnolb", "hdown",
        "dagent", "eagent", "arunn", "adown", "disable", "enable", "stop", "start",
    ];
    let w = post_form_words(body);
    if w.action.as_deref().is_some_and(|a| !KNOWN.contains(&a)) {
        return "ERRP";
    }
    let farm = match &w.b {
        Some(b) => match form_backend(c, b) {
            Some(f) => Some(f),
            None => return "ERRP",
        },
        None => None,
    };
    let (servers, action) = (w.servers, w.action);
    let (Some(farm), Some(action)) = (farm, action) else {
        return "NONE";
    };
    let (mut total, mut altered) = (0, 0);
    for name in &servers {
        let found = farm
            .servers
            .iter()
            .find(|x| &x.name == name && !x.is_deleted());
        let Some(s) = found else {
            total += 1;
            continue;
        };
        match form_action(&farm, s, &action) {
            Some(true) => {
                total += 1;
                altered += 1;
            }
            Some(false) => {}
            // An action ebb does not do: the server is not altered.
            None => total += 1,
        }
    }
    if total == 0 {
        "NONE"
    } else if altered == 0 {
        "ERRP"
    } else if altered == total {
        "DONE"
    } else {
        "PART"
    }
}

/// Decodes standard base64 (for `Authorization: Basic`).
pub fn base64_decode(s: &str) -> Option<Vec<u8>> {
    let mut out = Vec::with_capacity(s.len() * 3 / 4);
    let mut acc = 0u32;
    let mut bits = 0;
    for c in s.bytes() {
        let v = match c {
            b'A'..=b'Z' => c - b'A',
            b'a'..=b'z' => c - b'a' + 26,
            b'0'..=b'9' => c - b'0' + 52,
            b'+' => 62,
            b'/' => 63,
            b'=' => break,
            _ => return None,
        };
        acc = (acc << 6) | u32::from(v);
        bits += 6;
        if bits >= 8 {
            bits -= 8;
            out.push((acc >> bits) as u8);
        }
    }
    Some(out)
}

/// Whether an `Authorization` header value names a user of the page.
pub fn auth_ok(users: &[(String, String)], header: Option<&[u8]>) -> bool {
    if users.is_empty() {
        return true;
    }
    let Some(h) = header.and_then(|h| std::str::from_utf8(h).ok()) else {
        return false;
    };
    let Some((scheme, cred)) = h.trim().split_once(' ') else {
        return false;
    };
    if !scheme.eq_ignore_ascii_case("basic") {
        return false;
    }
    let Some(dec) = base64_decode(cred.trim()).and_then(|d| String::from_utf8(d).ok()) else {
        return false;
    };
    let Some((u, p)) = dec.split_once(':') else {
        return false;
    };
    users.iter().any(|(uu, pp)| uu == u && pp == p)
}

// ---------------------------------------------------------------------------
// HTTP answers (the hooks of the connection code call these)
// ---------------------------------------------------------------------------

/// The redirect after a posted admin form: to the page with the result
/// code and the options in force (HAProxy's 303).
fn redirect_after_post(st: &crate::proxy::StatsRt, r: &PageReq, code: &str) -> Answer {
    let mut loc = format!("{};st={code}", st.uri);
    if r.o.up_only {
        loc.push_str(";up");
    }
    if r.o.norefresh {
        loc.push_str(";norefresh");
    }
    if let Some(sc) = &r.scope {
        let _ = write!(loc, "?scope={sc}");
    }
    Answer {
        status: 303,
        headers: vec![
            ("Cache-Control", "no-cache".into()),
            ("Content-Type", "text/plain".into()),
            ("Location", loc),
        ],
        body: Vec::new(),
    }
}

/// What the page says after an action (`;st=CODE`).
fn st_notice(code: &str) -> &'static str {
    match code {
        "DONE" => "The action was done.",
        "NONE" => "Nothing changed.",
        "PART" => "The action was done on some of the servers only (unknown or duplicated names, or an action ebb does not do).",
        "ERRP" => "The action was not done: unknown action, backend or servers, or an action ebb does not do.",
        "EXCD" => "The action was not done: the form was too large.",
        "DENY" => "The action was denied.",
        "IVAL" => "The request was invalid.",
        _ => "Unexpected result.",
    }
}

/// Answers a request for the stats page: `path` is the request target
/// (path and query), `authz` the `Authorization` header, `admin` whether a
/// `stats admin` condition holds for the request, `post` the body of a
/// POST (an admin form).
pub fn page(
    st: &crate::proxy::StatsRt,
    path: &[u8],
    authz: Option<&[u8]>,
    admin: bool,
    post: Option<&[u8]>,
) -> Answer {
    if !auth_ok(&st.auth, authz) {
        let mut a = plain(
            401,
            "401 Unauthorized: this page needs a user and a password.\n",
        );
        a.headers.push((
            "WWW-Authenticate",
            format!("Basic realm=\"{}\"", st.realm.replace(['"', '\\'], "")),
        ));
        return a;
    }
    let Some(p) = crate::registry::Process::global() else {
        return plain(
            503,
            "503 Service Unavailable: statistics are not ready yet.\n",
        );
    };
    let rest = path.get(st.uri.len()..).unwrap_or_default();
    let r = parse_page(rest, st.refresh.is_some());
    let c = p.live.compiled();
    if let Some(body) = post {
        let code = if admin { post_action(&c, body) } else { "DENY" };
        return redirect_after_post(st, &r, code);
    }
    let o = r.o;
    if o.schema {
        return plain(
            501,
            "501 Not Implemented: ebb does not serve the JSON schema.\n",
        );
    }
    let mut rows = rows(&c, None);
    rows.retain(|x| in_scope(r.scope.as_deref(), &x.pxname));
    let text = |ct: &str, body: String| Answer {
        status: 200,
        headers: vec![
            ("Content-Type", ct.into()),
            ("Cache-Control", "no-cache".into()),
        ],
        body: body.into_bytes(),
    };
    // HAProxy's order: the last of csv, typed, json in its scan wins.
    if o.json {
        return text("application/json", json(&rows));
    }
    if o.typed {
        return text("text/plain", typed(&rows));
    }
    if o.csv {
        return text("text/plain; charset=utf-8", csv(&rows));
    }
    // Links keep the options in force.
    let mut uri_now = st.uri.clone();
    for (on, w) in [
        (o.up_only, ";up"),
        (o.no_maint, ";no-maint"),
        (o.norefresh, ";norefresh"),
    ] {
        if on {
            uri_now.push_str(w);
        }
    }
    let notice = r.st.map(st_notice);
    let info = PageInfo {
        pid: p.pid,
        nbthread: p.nbthread,
        uptime_s: p.start.elapsed().map(|d| d.as_secs()).unwrap_or(0),
        conns: p.shared.actconn.load(Ordering::Relaxed),
        version: (!st.hide_version).then_some(env!("CARGO_PKG_VERSION")),
        refresh_s: st.refresh.map(|d| d.as_secs().max(1)),
        uri: &uri_now,
        admin,
        notice,
        node: st
            .show_node
            .as_ref()
            .map(|n| n.as_deref().unwrap_or(&c.node)),
        desc: st
            .show_desc
            .as_ref()
            .and_then(|d| d.as_deref().or(c.description.as_deref())),
        legends: st.show_legends,
    };
    text("text/html; charset=utf-8", html(&rows, &info, o))
}

/// Whether a request is for this stats page: a GET, HEAD or POST whose
/// target starts with the stats URI (HAProxy's test: whatever follows is
/// read by the page).
pub fn is_page(st: &crate::proxy::StatsRt, path: &[u8], method_ok: bool) -> bool {
    method_ok && path.starts_with(st.uri.as_bytes())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn words_are_found_anywhere_after_the_uri() {
        let r = parse_page(b"", true);
        assert_eq!(r, PageReq::default());
        let r = parse_page(b";csv;norefresh", true);
        assert!(r.o.csv && r.o.norefresh);
        // `;norefresh` only counts when the page refreshes.
        assert!(!parse_page(b";norefresh", false).o.norefresh);
        let r = parse_page(b"/x;upx?y;no-maint", true);
        assert!(r.o.up_only && r.o.no_maint);
        let r = parse_page(b"?;csv;scope=b1", true);
        assert!(r.o.csv);
        assert_eq!(r.scope.as_deref(), Some("b1"));
        // Cut at `&`, `;` or a space; dropped with a bad character; at
        // least two characters must follow `scope=`.
        assert_eq!(
            parse_page(b"?scope=be&x=1", true).scope.as_deref(),
            Some("be")
        );
        assert_eq!(parse_page(b"?scope=b<1;", true).scope, None);
        assert_eq!(parse_page(b"?scope=b", true).scope, None);
        let long = parse_page(b"?scope=abcdefghijklmnopqrstuvwxyz", true);
        assert_eq!(long.scope.as_deref(), Some("abcdefghijklmnopqrst"));
        assert_eq!(parse_page(b";st=DONE", true).st, Some("DONE"));
        assert_eq!(parse_page(b";st=WHAT", true).st, Some("UNKN"));
        assert_eq!(parse_page(b";st=DON", true).st, None);
        let r = parse_page(b";json-schema", true);
        assert!(r.o.json && r.o.schema);
        assert!(in_scope(Some("B1"), "b1x"));
        assert!(!in_scope(Some("b2"), "b1"));
        assert!(in_scope(None, "any"));
    }

    #[test]
    fn which_requests_are_the_page() {
        let st = |uri: &str| crate::proxy::StatsRt {
            uri: uri.into(),
            refresh: None,
            auth: Vec::new(),
            realm: String::new(),
            hide_version: false,
            admin: Vec::new(),
            show_node: None,
            show_desc: None,
            show_legends: false,
        };
        let s = st("/stats");
        for p in ["/stats", "/stats;csv", "/statsx", "/stats/x", "/stats?b=x"] {
            assert!(is_page(&s, p.as_bytes(), true), "{p}");
        }
        assert!(!is_page(&s, b"/stats", false));
        for p in ["/other", "/stat"] {
            assert!(!is_page(&s, p.as_bytes(), true), "{p}");
        }
        let d = st("/haproxy?stats");
        assert!(is_page(&d, b"/haproxy?stats;csv", true));
        assert!(!is_page(&d, b"/haproxy?other", true));
    }

    #[test]
    fn basic_auth() {
        // "admin:s3cret"
        let users = vec![("admin".to_string(), "s3cret".to_string())];
        assert!(auth_ok(&users, Some(b"Basic YWRtaW46czNjcmV0")));
        assert!(!auth_ok(&users, Some(b"Basic YWRtaW46d3Jvbmc=")));
        assert!(!auth_ok(&users, None));
        assert!(!auth_ok(&users, Some(b"Bearer x")));
        assert!(auth_ok(&[], None));
        assert_eq!(base64_decode("aGk=").unwrap(), b"hi");
        assert!(base64_decode("a*b").is_none());
    }

    #[test]
    fn check_codes_are_haproxys() {
        use crate::backend::check::Verdict;
        use crate::config::CheckStatus;
        assert_eq!(check_code(&Verdict::default()).0, "INI");
        let c = check_code(&Verdict::new(CheckStatus::L4Con, "Connection refused"));
        assert_eq!(
            c,
            (
                "L4CON",
                None,
                "Layer4 connection problem",
                "Connection refused".into()
            )
        );
        let mut v = Verdict::new(CheckStatus::L7Sts, "Service Unavailable");
        v.code = 503;
        assert_eq!(check_code(&v).1, Some(503));
        assert_eq!(check_code(&Verdict::new(CheckStatus::L7Ok, "")).1, Some(0));
    }

    #[test]
    fn columns_filters_and_typed() {
        let cols = csv_columns();
        assert_eq!(cols.len(), 128);
        assert_eq!(cols[103], "-");
        assert_eq!(cols[36], "check_status");
        let mut r = Row::new("be", "s1", Kind::Server, 3, 2);
        r.status = "UP".into();
        r.check_status = "L7OK".into();
        let out = csv(std::slice::from_ref(&r));
        let line = out.lines().nth(1).unwrap();
        assert_eq!(line.matches(',').count(), 128);
        let f = Filter {
            proxy: Some("3".into()),
            types: Some(4),
            sid: Some(2),
        };
        assert!(f.keep(&r));
        assert!(!Filter {
            sid: Some(1),
            ..f.clone()
        }
        .keep(&r));
        assert!(!Filter {
            types: Some(3),
            ..f.clone()
        }
        .keep(&r));
        assert!(Filter {
            proxy: Some("be".into()),
            ..f
        }
        .keep(&r));
        let t = typed(&[r]);
        assert!(t.contains("S.3.2.36.check_status.1:MOP:str:L7OK\n"), "{t}");
        assert!(t.contains("S.3.2.26.pid.1:KGP:u32:1\n"), "{t}");
    }

    #[test]
    fn escapes_and_decodes() {
        assert_eq!(esc("<a&\"'>"), "&lt;a&amp;&quot;&#39;&gt;");
        assert_eq!(unpct("a%2Fb+c").unwrap(), "a/b c");
        assert!(unpct("%G1").is_none());
    }
}
