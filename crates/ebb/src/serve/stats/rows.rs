//! The rows: one per frontend, listener, backend and server, read from the
//! atomics of the configuration in force, with the rates sampled between
//! two views, and the `show stat` filter that picks among them.

use super::*;

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
    pub(super) fn code(self) -> u8 {
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
    /// Responses refused (`dresp`).
    pub dresp: u64,
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
    /// Frontends: `rate-limit sessions` (0: none).
    pub rate_lim: u64,
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
    /// A server's persistence cookie value, a backend's cookie name.
    pub cookie: String,
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
    /// Servers: `idle_conn_cur`, `safe_conn_cur`, `used_conn_cur`,
    /// `need_conn_est`.
    pub conns: Option<crate::backend::pool::ConnCounts>,
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
    pub(super) fn new(pxname: &str, svname: &str, kind: Kind, iid: usize, sid: usize) -> Row {
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
            dresp: 0,
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
            rate_lim: 0,
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
            cookie: String::new(),
            algo: String::new(),
            uweight: None,
            h2: [None; 4],
            lastsess: None,
            connect: 0,
            reuse: 0,
            mode: "http",
            icur: None,
            ilim: None,
            conns: None,
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

/// Forgets every sampled rate and maximum (`clear counters all`).
pub(super) fn clear_samples() {
    samples().lock().unwrap_or_else(|p| p.into_inner()).clear();
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
    r.rate_lim = u64::from(fe.sess_limit.limit);
    r.stot = ld(&fe.sessions);
    r.bin = fe.http.bytes_in();
    r.bout = fe.http.bytes_out();
    r.dreq = ld(&fe.http.denied);
    r.dresp = ld(&fe.http.denied_resp);
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
    r.lbtot = Some(ld(&c.lb_picks));
    r.bin = ld(&c.bytes_in);
    r.bout = ld(&c.bytes_out);
    r.econ = ld(&c.conn_errors);
    r.eresp = ld(&c.resp_errors);
    r.dresp = ld(&c.denied_resp);
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
    r.req_tot = Some(ld(&c.heads));
    r.status = server_status(s).into();
    // The effective weight, ramped during a `slowstart` (HAProxy's
    // `cur_eweight`; `uweight` is the configured one).
    r.weight = Some(u64::from(if s.usable() {
        s.effective_weight()
    } else {
        s.weight.load(Ordering::Relaxed)
    }));
    r.act = Some(u64::from(!s.opts.backup));
    r.bck = Some(u64::from(s.opts.backup));
    r.qlimit = s.opts.maxqueue.map(u64::from);
    r.tracked = s.tracked.get().map(|t| format!("{}/{}", t.backend, t.name));
    r.admin = Some(s.admin_state());
    (r.rate, r.rate_max) = rate(format!("sv/{}/{}", farm.name, s.name), r.stot);
    r.smax = Some(u64::from(s.ext.smax.load(Ordering::Relaxed)));
    r.uweight = Some(u64::from(s.weight.load(Ordering::Relaxed)));
    r.addr = if s.opts.unix.is_some() {
        // HAProxy's word for a UNIX socket (a path or abstract).
        "unix".to_string()
    } else {
        s.addr().map(|a| a.to_string()).unwrap_or_default()
    };
    r.cookie = s.cookie().map(|c| c.into_owned()).unwrap_or_default();
    r.icur = Some(u64::from(s.idle_count()));
    r.conns = Some(s.conn_counts());
    r.ilim = s.opts.pool_max_conn.map(u64::from);
    if s.opts.slowstart.is_some() && s.usable() {
        // HAProxy's `server_throttle_rate`: the share of the weight the
        // ramp gives, in percent, from its sixteenths (`(100 e + 15) /
        // (16 w)`).
        let w = u64::from(s.weight.load(Ordering::Relaxed));
        let e = u64::from(s.eweight16());
        if w > 0 && e < 16 * w {
            r.throttle = Some((100 * e + 15) / (16 * w));
        }
    }
    let (lastchg, down) = s.ext.ages();
    r.lastchg = Some(lastchg);
    // HAProxy shows the counters of an enabled check, and its status,
    // bounds and health only while it runs (not paused in maintenance).
    let check_on = s.opts.check && s.check_on.load(Ordering::Relaxed);
    if check_on {
        r.chkfail = Some(ld(&s.ext.chkfail));
        r.chkdown = Some(ld(&s.ext.chkdown));
        r.downtime = Some(down);
    }
    if s.opts.observe != crate::config::Observe::None {
        r.hanafail = Some(ld(&s.hana.failed));
    }
    if check_on && !s.check_paused() {
        let v = s.check_status.lock().map(|c| c.clone()).unwrap_or_default();
        let (code, num, desc, last) = check_code(&v);
        // HAProxy's `* ` marks a check under way.
        r.check_status = match s.ext.check_busy.load(Ordering::Relaxed) {
            true => format!("* {code}"),
            false => code.to_string(),
        };
        r.check_code = num;
        r.check_desc = desc.to_string();
        r.last_chk = last;
        let ms = s.ext.check_ms.load(Ordering::Relaxed);
        r.check_duration = (ms != u64::MAX).then_some(ms);
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
    r.dresp = ld(&be.http.denied_resp);
    r.dreq = ld(&be.http.denied);
    match &be.kind {
        BackendKind::Servers(sv) => {
            let f = &sv.farm;
            // The backend's own queue (HAProxy's `px->queue.length`):
            // its servers' queues are on their rows.
            r.qcur = f.queue.lock().map_or(0, |q| q.len() as u64);
            // The active servers' weights: effective (ramped during a
            // `slowstart`), and as configured.
            let (mut w, mut uw) = (0, 0);
            let (mut act, mut bck) = (0, 0);
            for s in &f.servers {
                let c = &s.counters;
                r.scur += u64::from(s.cur.load(Ordering::Relaxed));
                r.stot += ld(&c.assigned);
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
                        w += u64::from(s.effective_weight());
                        uw += u64::from(s.weight.load(Ordering::Relaxed));
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
            r.cookie = sv
                .cookie
                .as_ref()
                .map(|c| c.name.clone())
                .unwrap_or_default();
            r.uweight = Some(uw);
            r.weight = Some(w);
            r.act = Some(act);
            r.bck = Some(bck);
            // HAProxy's backend `cum_lbconn` counts with its servers'.
            r.lbtot = Some(f.servers.iter().map(|s| ld(&s.counters.lb_picks)).sum());
            // HAProxy's rule: UP with a usable server, or with no server
            // at all (a backend of rules or of a stick table alone).
            let up = act + bck > 0 || f.servers.is_empty();
            r.status = if up { "UP" } else { "DOWN" }.into();
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
            for l in fe.listeners.iter().filter(|_| fe.socket_stats) {
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
    out
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
