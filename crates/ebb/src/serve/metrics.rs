//! The Prometheus exporter (`http-request use-service prometheus-exporter`),
//! HAProxy 2.6's "promex": the same `haproxy_*` metric names, types and
//! labels, so dashboards and alerts written for HAProxy work unchanged.
//!
//! - `haproxy_process_*`: the `show info` fields (`show info`, [`super::info`]);
//! - `haproxy_frontend_*`, `haproxy_listener_*` (`option socket-stats`),
//!   `haproxy_backend_*`, `haproxy_server_*`: the `show stat` fields of
//!   the rows [`super::stats::rows`] builds, so the two always agree;
//! - `haproxy_sticktable_size|used`.
//!
//! A field ebb has no value for prints `NaN`, as HAProxy prints an empty
//! field. HTTP-only metrics are left out for `mode tcp` proxies. The
//! query string chooses scopes (`scope=global|frontend|listener|backend|
//! server|sticktable|*`, repeated; an empty value resets them) and
//! `no-maint` leaves servers in maintenance out.
//!
//! ebb's own scheduler and resolver metrics keep the `ebb_` prefix and
//! come with the default scope or `scope=*` only.
//!
//! Every metric is one `# HELP`, one `# TYPE` and its samples, grouped
//! (the format requires a metric's samples to be contiguous); a metric
//! without samples prints nothing.

use std::fmt::Write as _;
use std::sync::atomic::Ordering;

use crate::registry::Process;
use crate::serve::stats::{self, Kind, Row, Val, STAT_FIELDS};
use crate::serve::{plain, Answer};

/// The Content-Type of the exposition format (HAProxy's).
pub const CONTENT_TYPE: &str = "text/plain; version=0.0.4";

struct Metric {
    name: String,
    help: &'static str,
    kind: &'static str,
    samples: Vec<(String, f64)>,
    /// Printed as HAProxy prints its float fields (`%f`: six decimals).
    float: bool,
}

#[derive(Default)]
struct Out {
    metrics: Vec<Metric>,
}

impl Out {
    fn add(&mut self, name: &str, kind: &'static str, help: &'static str, labels: String, v: f64) {
        if let Some(m) = self.metrics.iter_mut().rev().find(|m| m.name == name) {
            m.samples.push((labels, v));
            return;
        }
        self.metrics.push(Metric {
            name: name.to_string(),
            help,
            kind,
            samples: vec![(labels, v)],
            float: false,
        });
    }
    /// A gauge HAProxy prints as a float (`%f`): its times in seconds.
    fn seconds(&mut self, name: &str, help: &'static str, labels: String, v: f64) {
        self.gauge(name, help, labels, v);
        if let Some(m) = self.metrics.last_mut() {
            m.float = true;
        }
    }
    fn gauge(&mut self, name: &str, help: &'static str, labels: String, v: f64) {
        self.add(name, "gauge", help, labels, v);
    }
    fn counter(&mut self, name: &str, help: &'static str, labels: String, v: f64) {
        self.add(name, "counter", help, labels, v);
    }
}

/// Escapes a label value: backslash, double quote and newline.
fn lv(v: &str) -> String {
    let mut o = String::with_capacity(v.len());
    for c in v.chars() {
        match c {
            '\\' => o.push_str("\\\\"),
            '"' => o.push_str("\\\""),
            '\n' => o.push_str("\\n"),
            c => o.push(c),
        }
    }
    o
}

fn labels(kv: &[(&str, &str)]) -> String {
    if kv.is_empty() {
        return String::new();
    }
    let parts: Vec<String> = kv
        .iter()
        .map(|(k, v)| format!("{k}=\"{}\"", lv(v)))
        .collect();
    format!("{{{}}}", parts.join(","))
}

/// The scopes of the query string, each a bit of [`Query`]'s.
const SCOPES: [(&str, u8); 6] = [
    ("global", 1),
    ("frontend", 2),
    ("listener", 4),
    ("backend", 8),
    ("server", 16),
    ("sticktable", 32),
];
const SC_ALL: u8 = 63;

/// A scope's bit.
const fn sc(i: usize) -> u8 {
    SCOPES[i].1
}
const SC_GLOBAL: u8 = sc(0);
const SC_FRONT: u8 = sc(1);
const SC_LI: u8 = sc(2);
const SC_BACK: u8 = sc(3);
const SC_SRV: u8 = sc(4);
const SC_STICK: u8 = sc(5);

/// What the query string asks for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Query {
    scopes: u8,
    no_maint: bool,
    /// ebb's own metrics: with the default scopes or `scope=*`.
    extras: bool,
}

/// Parses the request target's query string as HAProxy's exporter does:
/// `scope=X` adds a scope (`*` all of them, an empty value none, which a
/// later `scope` may add to again), `no-maint` leaves servers in
/// maintenance out, other parameters are ignored. `None` (a 400): a
/// `scope` without a value, an unknown scope, a second `=` in a
/// parameter or a bad `%` escape.
pub fn parse_query(uri: &[u8]) -> Option<Query> {
    let mut q = Query {
        scopes: 0,
        no_maint: false,
        extras: false,
    };
    let uri = String::from_utf8_lossy(uri);
    let mut any_scope = false;
    if let Some((_, qs)) = uri.split_once('?') {
        let qs = qs.split('#').next().unwrap_or("");
        for param in qs.split('&') {
            if param.is_empty() {
                continue;
            }
            let (k, v) = match param.split_once('=') {
                Some((k, v)) => {
                    if v.contains('=') {
                        return None;
                    }
                    (stats::unpct(k)?, Some(stats::unpct(v)?))
                }
                None => (stats::unpct(param)?, None),
            };
            match k.as_str() {
                "scope" => {
                    any_scope = true;
                    let v = v?;
                    match v.as_str() {
                        "" => {
                            q.scopes = 0;
                            q.extras = false;
                        }
                        v if v.starts_with('*') => {
                            q.scopes = SC_ALL;
                            q.extras = true;
                        }
                        v => q.scopes |= SCOPES.iter().find(|(n, _)| *n == v)?.1,
                    }
                }
                "no-maint" => q.no_maint = true,
                _ => {}
            }
        }
    }
    if !any_scope {
        q.scopes = SC_ALL;
        q.extras = true;
    }
    Some(q)
}

// Which rows a proxy metric is for.
const F: u8 = 1;
const L: u8 = 2;
const B: u8 = 4;
const S: u8 = 8;

/// HAProxy's exporter metrics of the `show stat` fields, in field order:
/// the field, the name after `haproxy_<scope>_`, counter or gauge, the
/// rows it is for, and the help line.
#[rustfmt::skip]
const PROXY_METRICS: &[(&str, &str, bool, u8, &str)] = &[
    ("qcur", "current_queue", false, B | S, "Number of requests waiting in a queue now."),
    ("qmax", "max_queue", false, B | S, "Highest number of queued requests seen."),
    ("scur", "current_sessions", false, F | L | B | S, "Number of sessions open now."),
    ("smax", "max_sessions", false, F | L | B | S, "Highest number of open sessions seen."),
    ("slim", "limit_sessions", false, F | L | B | S, "Configured session limit (maxconn)."),
    ("stot", "sessions_total", true, F | L | B | S, "Sessions handled since start."),
    ("bin", "bytes_in_total", true, F | L | B | S, "Bytes received since start."),
    ("bout", "bytes_out_total", true, F | L | B | S, "Bytes sent since start."),
    ("dreq", "requests_denied_total", true, F | L | B, "Requests refused by a rule since start."),
    ("dresp", "responses_denied_total", true, F | L | B | S, "Responses refused by a rule since start."),
    ("ereq", "request_errors_total", true, F | L, "Invalid or aborted requests since start."),
    ("econ", "connection_errors_total", true, B | S, "Failed connection attempts to a server since start."),
    ("eresp", "response_errors_total", true, B | S, "Invalid or aborted server responses since start."),
    ("wretr", "retry_warnings_total", true, B | S, "Connection retries since start."),
    ("wredis", "redispatch_warnings_total", true, B | S, "Requests sent to another server than the first chosen, since start."),
    ("status", "status", false, F | L | B | S, "The state it is in: 1 for the state label that holds, 0 for the others."),
    ("weight", "weight", false, B | S, "Effective weight."),
    ("act", "active_servers", false, B, "Number of usable active servers."),
    ("bck", "backup_servers", false, B, "Number of usable backup servers."),
    ("chkfail", "check_failures_total", true, S, "Failed health checks while the server was up, since start."),
    ("chkdown", "check_up_down_total", true, B | S, "Transitions to the down state since start."),
    ("lastchg", "check_last_change_seconds", false, B | S, "Seconds since the last change of state."),
    ("downtime", "downtime_seconds_total", true, B | S, "Seconds spent in the down state since start."),
    ("qlimit", "queue_limit", false, S, "Configured queue limit (maxqueue)."),
    ("throttle", "current_throttle", false, S, "Percentage of its weight a server in slow start is given now."),
    ("lbtot", "loadbalanced_total", true, B | S, "Times a server was chosen since start."),
    ("rate_lim", "limit_session_rate", false, F, "Configured limit of new sessions per second."),
    ("rate_max", "max_session_rate", false, F | B | S, "Highest number of new sessions per second seen."),
    ("check_status", "check_status", false, S, "The result of the last health check: 1 for the state label that holds, 0 for the others."),
    ("check_code", "check_code", false, S, "Layer 5-7 code of the last health check, when there is one."),
    ("check_duration", "check_duration_seconds", false, S, "Duration of the last health check, in seconds."),
    ("hrsp_1xx", "http_responses_total", true, F | B | S, "HTTP responses by status class since start."),
    ("hrsp_2xx", "http_responses_total", true, F | B | S, "HTTP responses by status class since start."),
    ("hrsp_3xx", "http_responses_total", true, F | B | S, "HTTP responses by status class since start."),
    ("hrsp_4xx", "http_responses_total", true, F | B | S, "HTTP responses by status class since start."),
    ("hrsp_5xx", "http_responses_total", true, F | B | S, "HTTP responses by status class since start."),
    ("hrsp_other", "http_responses_total", true, F | B | S, "HTTP responses by status class since start."),
    ("req_rate_max", "http_requests_rate_max", false, F, "Highest number of HTTP requests per second seen."),
    ("req_tot", "http_requests_total", true, F | B, "HTTP requests since start."),
    ("cli_abrt", "client_aborts_total", true, B | S, "Transfers aborted by the client since start."),
    ("srv_abrt", "server_aborts_total", true, B | S, "Transfers aborted by the server since start."),
    ("comp_in", "http_comp_bytes_in_total", true, F | B, "Bytes given to the compressor since start."),
    ("comp_out", "http_comp_bytes_out_total", true, F | B, "Bytes the compressor produced since start."),
    ("comp_byp", "http_comp_bytes_bypassed_total", true, F | B, "Bytes that bypassed the compressor since start."),
    ("comp_rsp", "http_comp_responses_total", true, F | B, "HTTP responses compressed since start."),
    ("lastsess", "last_session_seconds", false, B | S, "Seconds since the last session was handed over."),
    ("qtime", "queue_time_average_seconds", false, B | S, "Average time in the queue over the last 1024 requests."),
    ("ctime", "connect_time_average_seconds", false, B | S, "Average connect time over the last 1024 requests."),
    ("rtime", "response_time_average_seconds", false, B | S, "Average response time over the last 1024 requests."),
    ("ttime", "total_time_average_seconds", false, B | S, "Average total time over the last 1024 requests."),
    ("conn_rate_max", "connections_rate_max", false, F, "Highest number of new connections per second seen."),
    ("conn_tot", "connections_total", true, F, "Connections accepted since start."),
    ("intercepted", "intercepted_requests_total", true, F, "Requests answered by the proxy itself since start."),
    ("dcon", "denied_connections_total", true, F | L, "Connections refused by tcp-request connection rules since start."),
    ("dses", "denied_sessions_total", true, F | L, "Sessions refused by tcp-request session rules since start."),
    ("wrew", "failed_header_rewriting_total", true, F | L | B | S, "Failed header rewrites since start."),
    ("connect", "connection_attempts_total", true, B | S, "Connections to servers attempted since start."),
    ("reuse", "connection_reuses_total", true, B | S, "Server connections reused since start."),
    ("cache_lookups", "http_cache_lookups_total", true, F | B, "HTTP cache lookups since start."),
    ("cache_hits", "http_cache_hits_total", true, F | B, "HTTP cache hits since start."),
    ("srv_icur", "idle_connections_current", false, S, "Idle connections to the server now."),
    ("src_ilim", "idle_connections_limit", false, S, "Configured limit of idle connections (pool-max-conn)."),
    ("qtime_max", "max_queue_time_seconds", false, B | S, "Longest time in the queue seen."),
    ("ctime_max", "max_connect_time_seconds", false, B | S, "Longest connect time seen."),
    ("rtime_max", "max_response_time_seconds", false, B | S, "Longest response time seen."),
    ("ttime_max", "max_total_time_seconds", false, B | S, "Longest total time seen."),
    ("eint", "internal_errors_total", true, F | L | B | S, "Internal errors since start."),
    ("idle_conn_cur", "unsafe_idle_connections_current", false, S, "Idle connections not safe to reuse for a first request, now."),
    ("safe_conn_cur", "safe_idle_connections_current", false, S, "Idle connections safe to reuse, now."),
    ("used_conn_cur", "used_connections_current", false, S, "Server connections in use now."),
    ("need_conn_est", "need_connections_current", false, S, "Estimated number of server connections needed."),
    ("uweight", "uweight", false, B | S, "Configured (user) weight."),
    ("agg_server_status", "agg_server_status", false, B, "Number of the backend's servers in each state."),
    ("agg_server_check_status", "agg_server_check_status", false, B, "Number of the backend's servers in each state (deprecated name of agg_server_status)."),
    ("agg_check_status", "agg_check_status", false, B, "Number of the backend's servers by the result of their last health check."),
];

/// `show info` fields as `haproxy_process_*` metrics: the field, the
/// name, counter or gauge, and the help line.
#[rustfmt::skip]
const GLOBAL_METRICS: &[(&str, &str, bool, &str)] = &[
    ("Nbthread", "nbthread", false, "Number of threads."),
    ("Nbproc", "nbproc", false, "Number of processes."),
    ("Process_num", "relative_process_id", false, "Relative number of this process, from 1."),
    ("Uptime_sec", "uptime_seconds", false, "Seconds since the process started."),
    ("Start_time_sec", "start_time_seconds", false, "Start time of the process, seconds since the Unix epoch."),
    ("Memmax_bytes", "max_memory_bytes", false, "Memory limit of the process, in bytes (0: none)."),
    ("PoolAlloc_bytes", "pool_allocated_bytes", false, "Bytes allocated to memory pools."),
    ("PoolUsed_bytes", "pool_used_bytes", false, "Bytes of memory pools in use."),
    ("PoolFailed", "pool_failures_total", true, "Failed pool allocations since start."),
    ("Ulimit-n", "max_fds", false, "Limit of open file descriptors."),
    ("Maxsock", "max_sockets", false, "Limit of open sockets."),
    ("Maxconn", "max_connections", false, "Limit of concurrent connections."),
    ("Hard_maxconn", "hard_max_connections", false, "Initial limit of concurrent connections."),
    ("CurrConns", "current_connections", false, "Connections open now."),
    ("CumConns", "connections_total", true, "Connections accepted since start."),
    ("CumReq", "requests_total", true, "HTTP requests since start."),
    ("MaxSslConns", "max_ssl_connections", false, "Limit of concurrent TLS connections."),
    ("CurrSslConns", "current_ssl_connections", false, "TLS connections open now."),
    ("CumSslConns", "ssl_connections_total", true, "TLS connections since start."),
    ("Maxpipes", "max_pipes", false, "Limit of pipes."),
    ("PipesUsed", "pipes_used_total", true, "Pipes in use."),
    ("PipesFree", "pipes_free_total", true, "Pipes free."),
    ("ConnRate", "current_connection_rate", false, "Connections accepted over the last second."),
    ("ConnRateLimit", "limit_connection_rate", false, "Configured limit of connections per second."),
    ("MaxConnRate", "max_connection_rate", false, "Highest number of connections per second seen."),
    ("SessRate", "current_session_rate", false, "Sessions created over the last second."),
    ("SessRateLimit", "limit_session_rate", false, "Configured limit of sessions per second."),
    ("MaxSessRate", "max_session_rate", false, "Highest number of sessions per second seen."),
    ("SslRate", "current_ssl_rate", false, "TLS sessions over the last second."),
    ("SslRateLimit", "limit_ssl_rate", false, "Configured limit of TLS sessions per second."),
    ("MaxSslRate", "max_ssl_rate", false, "Highest number of TLS sessions per second seen."),
    ("SslFrontendKeyRate", "current_frontend_ssl_key_rate", false, "Client-side TLS key computations over the last second."),
    ("SslFrontendMaxKeyRate", "max_frontend_ssl_key_rate", false, "Highest client-side TLS key computations per second seen."),
    ("SslFrontendSessionReuse_pct", "frontend_ssl_reuse", false, "Percentage of client-side TLS sessions resumed."),
    ("SslBackendKeyRate", "current_backend_ssl_key_rate", false, "Server-side TLS key computations over the last second."),
    ("SslBackendMaxKeyRate", "max_backend_ssl_key_rate", false, "Highest server-side TLS key computations per second seen."),
    ("SslCacheLookups", "ssl_cache_lookups_total", true, "TLS session cache lookups since start."),
    ("SslCacheMisses", "ssl_cache_misses_total", true, "TLS session cache misses since start."),
    ("CompressBpsIn", "http_comp_bytes_in_total", true, "Bytes given to the compressor."),
    ("CompressBpsOut", "http_comp_bytes_out_total", true, "Bytes the compressor produced."),
    ("CompressBpsRateLim", "limit_http_comp", false, "Configured limit of compression throughput."),
    ("ZlibMemUsage", "current_zlib_memory", false, "Memory used by zlib now."),
    ("MaxZlibMemUsage", "max_zlib_memory", false, "Configured limit of zlib memory."),
    ("Tasks", "current_tasks", false, "Tasks now."),
    ("Run_queue", "current_run_queue", false, "Tasks in the run queue now."),
    ("Idle_pct", "idle_time_percent", false, "Percentage of time the threads were idle."),
    ("Stopping", "stopping", false, "1 while the process is stopping."),
    ("Jobs", "jobs", false, "Active jobs (listeners, sessions, open connections)."),
    ("Unstoppable Jobs", "unstoppable_jobs", false, "Jobs that a soft stop waits for."),
    ("Listeners", "listeners", false, "Listeners."),
    ("ActivePeers", "active_peers", false, "Peers connecting or connected."),
    ("ConnectedPeers", "connected_peers", false, "Peers connected."),
    ("DroppedLogs", "dropped_logs_total", true, "Log messages dropped since start."),
    ("BusyPolling", "busy_polling_enabled", false, "1 when busy polling is on."),
    ("FailedResolutions", "failed_resolutions", true, "Failed DNS resolutions since start."),
    ("TotalBytesOut", "bytes_out_total", true, "Bytes sent since start."),
    ("TotalSplicdedBytesOut", "spliced_bytes_out_total", true, "Bytes sent by splicing since start."),
    ("BytesOutRate", "bytes_out_rate", false, "Bytes sent over the last second."),
    ("CumRecvLogs", "recv_logs_total", true, "Log messages received by log forwarding since start."),
];

/// HAProxy's server states of the `status` metrics.
const SRV_STATES: [&str; 5] = ["DOWN", "UP", "MAINT", "DRAIN", "NOLB"];
/// HAProxy's listener states.
const LI_STATES: [&str; 3] = ["WAITING", "OPEN", "FULL"];
/// The health check results `haproxy_server_check_status` lists (every
/// HAProxy check status of a finished check that passed or failed).
const CHECK_STATES: [&str; 16] = [
    "HANA", "SOCKERR", "L4OK", "L4TOUT", "L4CON", "L6OK", "L6TOUT", "L6RSP", "L7TOUT", "L7RSP",
    "L7OK", "L7OKC", "L7STS", "PROCERR", "PROCTOUT", "PROCOK",
];

/// A server row's state among [`SRV_STATES`].
fn srv_state(r: &Row) -> &'static str {
    let st = r.status.as_str();
    if st.starts_with("MAINT") {
        "MAINT"
    } else if st.starts_with("DRAIN") {
        "DRAIN"
    } else if st.starts_with("DOWN") {
        "DOWN"
    } else if st.starts_with("NOLB") {
        "NOLB"
    } else {
        "UP"
    }
}

fn num(v: &Option<Val>) -> f64 {
    match v {
        Some(Val::U(x)) => *x as f64,
        Some(Val::I(x)) => *x as f64,
        _ => f64::NAN,
    }
}

fn field(name: &str) -> usize {
    STAT_FIELDS
        .iter()
        .position(|f| f.0 == name)
        .unwrap_or(usize::MAX)
}

/// The `haproxy_process_*` metrics.
fn global_metrics(o: &mut Out, p: &Process) {
    let info = super::info::info_values(p);
    for (fname, name, counter, help) in GLOBAL_METRICS {
        let v = info
            .iter()
            .find(|(n, _)| n == fname)
            .and_then(|(_, v)| v.parse::<f64>().ok())
            .unwrap_or(f64::NAN);
        let name = format!("haproxy_process_{name}");
        o.add(&name, kind(*counter), help, String::new(), v);
    }
    o.gauge(
        "haproxy_process_build_info",
        "Build information: the version label.",
        labels(&[("version", env!("CARGO_PKG_VERSION"))]),
        1.0,
    );
}

fn kind(counter: bool) -> &'static str {
    if counter {
        "counter"
    } else {
        "gauge"
    }
}

/// One scope's metrics of the `show stat` rows (`only`: their kind).
fn proxy_metrics(o: &mut Out, rows: &[(Row, Vec<Option<Val>>)], only: Kind, q: Query) {
    let (bit, prefix) = match only {
        Kind::Frontend => (F, "haproxy_frontend_"),
        Kind::Listener => (L, "haproxy_listener_"),
        Kind::Backend => (B, "haproxy_backend_"),
        Kind::Server => (S, "haproxy_server_"),
    };
    for (fname, suffix, counter, which, help) in PROXY_METRICS {
        if which & bit == 0 {
            continue;
        }
        let name = format!("{prefix}{suffix}");
        let idx = field(fname);
        let http_only = matches!(
            *fname,
            "req_rate_max"
                | "req_tot"
                | "intercepted"
                | "cache_lookups"
                | "cache_hits"
                | "comp_in"
                | "comp_out"
                | "comp_byp"
                | "comp_rsp"
        ) || fname.starts_with("hrsp_");
        for (r, vals) in rows {
            if r.kind != only {
                continue;
            }
            if http_only && r.mode != "http" {
                continue;
            }
            if only == Kind::Server && q.no_maint && r.admin == Some(crate::backend::ADMIN_MAINT) {
                continue;
            }
            let mut l: Vec<(&str, &str)> = vec![("proxy", &r.pxname)];
            match only {
                Kind::Listener => l.push(("listener", &r.svname)),
                Kind::Server => l.push(("server", &r.svname)),
                _ => {}
            }
            let v = vals.get(idx).cloned().flatten();
            match *fname {
                "status" => {
                    let (states, cur): (&[&str], &str) = match only {
                        Kind::Frontend => (&["DOWN", "UP"], "UP"),
                        Kind::Backend => (
                            &["DOWN", "UP"],
                            if !r.has_servers || r.status == "UP" {
                                "UP"
                            } else {
                                "DOWN"
                            },
                        ),
                        Kind::Listener => (&LI_STATES, r.status.as_str()),
                        Kind::Server => (&SRV_STATES, srv_state(r)),
                    };
                    per_state(o, &name, help, &l, states, |st| {
                        f64::from(u8::from(st == cur))
                    });
                    continue;
                }
                "agg_server_status" | "agg_server_check_status" => {
                    if !r.has_servers {
                        continue;
                    }
                    let servers = || {
                        rows.iter()
                            .filter(|(s, _)| s.kind == Kind::Server && s.pxname == r.pxname)
                    };
                    per_state(o, &name, help, &l, &SRV_STATES, |st| {
                        servers().filter(|(s, _)| srv_state(s) == st).count() as f64
                    });
                    continue;
                }
                "agg_check_status" => {
                    if !r.has_servers {
                        continue;
                    }
                    per_state(o, &name, help, &l, &CHECK_STATES, |st| {
                        rows.iter()
                            .filter(|(s, _)| {
                                s.kind == Kind::Server
                                    && s.pxname == r.pxname
                                    && s.check_rise.is_some()
                                    && s.check_status.trim_start_matches("* ") == st
                            })
                            .count() as f64
                    });
                    continue;
                }
                "check_status" => {
                    if r.check_rise.is_none() {
                        continue;
                    }
                    let cur = r.check_status.trim_start_matches("* ");
                    per_state(o, &name, help, &l, &CHECK_STATES, |st| {
                        f64::from(u8::from(st == cur))
                    });
                    continue;
                }
                "check_code" => {
                    if r.check_rise.is_none() {
                        continue;
                    }
                    o.gauge(&name, help, labels(&l), r.check_code.unwrap_or(0) as f64);
                    continue;
                }
                "check_duration" => {
                    let Some(ms) = r.check_duration else { continue };
                    o.seconds(&name, help, labels(&l), ms as f64 / 1000.0);
                    continue;
                }
                // Milliseconds in the statistics, seconds here (HAProxy's
                // floats); the averages over a full window of 1024, as
                // HAProxy 2.6's exporter computes them.
                "qtime" | "ctime" | "rtime" | "ttime" => {
                    let k = ["qtime", "ctime", "rtime", "ttime"]
                        .iter()
                        .position(|f| f == fname)
                        .unwrap_or(0);
                    let ms = r.times.as_ref().map_or(f64::NAN, |t| t.avg_full[k] as f64);
                    o.seconds(&name, help, labels(&l), ms / 1000.0);
                    continue;
                }
                "qtime_max" | "ctime_max" | "rtime_max" | "ttime_max" => {
                    o.seconds(&name, help, labels(&l), num(&v) / 1000.0);
                    continue;
                }
                f if f.starts_with("hrsp_") => {
                    l.push(("code", &f[5..]));
                }
                _ => {}
            }
            o.add(&name, kind(*counter), help, labels(&l), num(&v));
        }
    }
}

/// One gauge sample per state, the `state` label after `l`'s.
fn per_state(
    o: &mut Out,
    name: &str,
    help: &'static str,
    l: &[(&str, &str)],
    states: &[&str],
    value: impl Fn(&str) -> f64,
) {
    for st in states {
        let mut l2 = l.to_vec();
        l2.push(("state", st));
        o.gauge(name, help, labels(&l2), value(st));
    }
}

/// The `haproxy_sticktable_*` metrics.
fn table_metrics(o: &mut Out, c: &crate::proxy::Compiled) {
    for t in c.tables.iter().rev() {
        let d = t.def();
        if d.size == 0 {
            continue;
        }
        let l = labels(&[
            ("name", &d.name),
            ("type", crate::table::cli::key_type_name(d.key)),
        ]);
        o.gauge(
            "haproxy_sticktable_size",
            "Configured size of the stick table.",
            l.clone(),
            d.size as f64,
        );
        o.gauge(
            "haproxy_sticktable_used",
            "Entries in the stick table now.",
            l,
            t.len() as f64,
        );
    }
}

/// Renders the metrics a query asks for.
pub fn render(p: &Process, q: Query) -> String {
    let mut o = Out::default();
    let c = p.live.compiled();
    if q.scopes & SC_GLOBAL != 0 {
        global_metrics(&mut o, p);
    }
    if q.scopes & (SC_FRONT | SC_LI | SC_BACK | SC_SRV) != 0 {
        let rows: Vec<(Row, Vec<Option<Val>>)> = stats::rows(&c, None)
            .into_iter()
            .map(|r| {
                let v = stats::values(&r);
                (r, v)
            })
            .collect();
        for (sc, k) in [
            (SC_FRONT, Kind::Frontend),
            (SC_LI, Kind::Listener),
            (SC_BACK, Kind::Backend),
            (SC_SRV, Kind::Server),
        ] {
            if q.scopes & sc != 0 {
                proxy_metrics(&mut o, &rows, k, q);
            }
        }
    }
    if q.scopes & SC_STICK != 0 {
        table_metrics(&mut o, &c);
    }
    if q.extras {
        ebb_metrics(&mut o, p);
    }
    let mut s = String::with_capacity(32 * 1024);
    for m in &o.metrics {
        let _ = writeln!(s, "# HELP {} {}", m.name, m.help);
        let _ = writeln!(s, "# TYPE {} {}", m.name, m.kind);
        for (l, v) in &m.samples {
            if m.float && v.is_finite() {
                let _ = writeln!(s, "{}{} {v:.6}", m.name, l);
            } else {
                let _ = writeln!(s, "{}{} {}", m.name, l, fmt_value(*v));
            }
        }
    }
    s
}

/// ebb's own metrics (`ebb_` prefix): the resolvers' nameservers and the
/// scheduler's threads and callbacks.
fn ebb_metrics(o: &mut Out, p: &Process) {
    let c = p.live.compiled();
    // HAProxy's h2 statistics module (its field names; HAProxy 2.6's
    // exporter has no module metrics).
    let ld = |a: &std::sync::atomic::AtomicU64| a.load(Ordering::Relaxed) as f64;
    for fe in &c.frontends {
        let l = labels(&[("proxy", &fe.name)]);
        o.gauge(
            "ebb_frontend_h2_open_connections",
            "HTTP/2 client connections open now.",
            l.clone(),
            f64::from(fe.h2_conns.load(Ordering::Relaxed)),
        );
        o.counter(
            "ebb_frontend_h2_total_connections",
            "HTTP/2 client connections since start.",
            l.clone(),
            ld(&fe.h2_conns_total),
        );
        o.counter(
            "ebb_frontend_h2_backend_total_streams",
            "HTTP/2 streams clients opened since start.",
            l,
            ld(&fe.h2_streams),
        );
    }
    for be in &c.backends {
        let l = labels(&[("proxy", &be.name)]);
        let h = &be.h2;
        o.gauge(
            "ebb_backend_h2_open_connections",
            "HTTP/2 connections to the backend's servers open now.",
            l.clone(),
            ld(&h.open_conns),
        );
        o.counter(
            "ebb_backend_h2_total_connections",
            "HTTP/2 connections to the backend's servers since start.",
            l.clone(),
            ld(&h.total_conns),
        );
        o.gauge(
            "ebb_backend_h2_backend_open_streams",
            "HTTP/2 streams to the backend's servers open now.",
            l.clone(),
            ld(&h.open_streams),
        );
        o.counter(
            "ebb_backend_h2_backend_total_streams",
            "HTTP/2 streams to the backend's servers since start.",
            l,
            ld(&h.total_streams),
        );
    }
    // `resolvers` sections: each nameserver's counters (`show resolvers`).
    for sec in crate::resolvers::sections() {
        for (ns, c) in sec.cfg.nameservers.iter().zip(&sec.ns) {
            let l = labels(&[("resolvers", &sec.cfg.name), ("nameserver", &ns.name)]);
            for (field, v) in c.fields() {
                let (name, help) = resolver_metric(field);
                o.counter(name, help, l.clone(), v as f64);
            }
        }
    }

    for (t, a) in p.handle.activity().iter().enumerate() {
        let ts = t.to_string();
        let l = labels(&[("thread", &ts)]);
        o.counter(
            "ebb_sched_loops_total",
            "Scheduler loop turns.",
            l.clone(),
            a.loops as f64,
        );
        o.counter(
            "ebb_sched_context_switches_total",
            "Task and tasklet callbacks run.",
            l.clone(),
            a.ctxsw as f64,
        );
        o.counter(
            "ebb_sched_tasks_run_total",
            "Task callbacks run.",
            l.clone(),
            a.tasksw as f64,
        );
        o.counter(
            "ebb_sched_timer_wakeups_total",
            "Tasks woken by their timer.",
            l.clone(),
            a.wake_tasks as f64,
        );
        o.counter(
            "ebb_sched_poll_events_total",
            "fd events dispatched.",
            l.clone(),
            a.poll_events as f64,
        );
        o.counter(
            "ebb_sched_cross_thread_wakeups_total",
            "Wakeups received from other threads.",
            l.clone(),
            a.xthr_wake as f64,
        );
        o.counter(
            "ebb_sched_accepts_total",
            "Connections accepted by the thread.",
            l.clone(),
            a.accepts as f64,
        );
        o.counter(
            "ebb_sched_idle_seconds_total",
            "Time spent sleeping in the poller.",
            l.clone(),
            a.idle_ns as f64 / 1e9,
        );
        o.gauge(
            "ebb_sched_avg_loop_seconds",
            "Sliding average of the loop time, excluding sleep.",
            l.clone(),
            a.avg_loop_us as f64 / 1e6,
        );
        o.gauge(
            "ebb_sched_cpu_use_ratio",
            "Share of time not spent sleeping (0..1).",
            l.clone(),
            a.cpu_use_pct() as f64 / 100.0,
        );
    }
    for r in p.handle.profiling_rows() {
        let l = labels(&[("function", r.name)]);
        o.counter(
            "ebb_sched_profile_calls_total",
            "Calls per callback (while profiling is on).",
            l.clone(),
            r.calls as f64,
        );
        o.counter(
            "ebb_sched_profile_cpu_seconds_total",
            "CPU time per callback (while profiling is on).",
            l.clone(),
            r.cpu_ns as f64 / 1e9,
        );
        o.counter(
            "ebb_sched_profile_latency_seconds_total",
            "Wakeup-to-run latency per callback (while profiling is on).",
            l,
            r.lat_ns as f64 / 1e9,
        );
    }
}

/// A sample value: integers without a fraction, others as Rust prints
/// them (both are valid Go `ParseFloat` input, which Prometheus uses).
fn fmt_value(v: f64) -> String {
    if v.fract() == 0.0 && v.abs() < 1e15 {
        format!("{}", v as i64)
    } else {
        format!("{v}")
    }
}

/// Answers `http-request use-service prometheus-exporter` for the request
/// target `uri`: 400 for a query string HAProxy refuses.
pub fn answer(uri: &[u8]) -> Answer {
    let Some(p) = crate::registry::Process::global() else {
        return plain(503, "503 Service Unavailable: metrics are not ready yet.\n");
    };
    let Some(q) = parse_query(uri) else {
        return crate::serve::error(400);
    };
    Answer {
        status: 200,
        headers: vec![
            ("Cache-Control", "no-cache".into()),
            ("Content-Type", CONTENT_TYPE.into()),
        ],
        body: render(p, q).into_bytes(),
    }
}

/// The metric of a nameserver counter (`show resolvers` names).
fn resolver_metric(field: &str) -> (&'static str, &'static str) {
    match field {
        "sent" => ("ebb_resolver_sent_total", "DNS queries sent."),
        "snd_error" => (
            "ebb_resolver_send_errors_total",
            "DNS queries that could not be sent.",
        ),
        "valid" => ("ebb_resolver_valid_total", "Valid DNS answers."),
        "update" => (
            "ebb_resolver_updates_total",
            "Valid answers that changed a server.",
        ),
        "cname" => ("ebb_resolver_cname_total", "Valid answers through a CNAME."),
        "cname_error" => (
            "ebb_resolver_cname_errors_total",
            "CNAME chains that led nowhere.",
        ),
        "any_err" => (
            "ebb_resolver_errors_total",
            "NOERROR answers with an empty answer section.",
        ),
        "nx" => ("ebb_resolver_nx_total", "NXDOMAIN answers."),
        "timeout" => ("ebb_resolver_timeouts_total", "Queries left unanswered."),
        "refused" => ("ebb_resolver_refused_total", "REFUSED answers."),
        "other" => (
            "ebb_resolver_other_errors_total",
            "Other errors (SERVFAIL, no record of the type asked).",
        ),
        "invalid" => (
            "ebb_resolver_invalid_total",
            "Messages that are not DNS answers.",
        ),
        "too_big" => (
            "ebb_resolver_too_big_total",
            "Answers over the accepted payload size.",
        ),
        "truncated" => ("ebb_resolver_truncated_total", "Truncated answers."),
        _ => (
            "ebb_resolver_outdated_total",
            "Answers to no query in flight (late or foreign).",
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn label_escaping_and_values() {
        assert_eq!(labels(&[("a", "x\"y\\z\n")]), "{a=\"x\\\"y\\\\z\\n\"}");
        assert_eq!(labels(&[]), "");
        assert_eq!(fmt_value(3.0), "3");
        assert_eq!(fmt_value(0.25), "0.25");
        assert_eq!(fmt_value(f64::NAN), "NaN");
    }

    #[test]
    fn query_scopes_as_haproxy() {
        let q = |u: &str| parse_query(u.as_bytes());
        let all = q("/metrics").unwrap();
        assert_eq!(
            (all.scopes, all.extras, all.no_maint),
            (SC_ALL, true, false)
        );
        let s = q("/metrics?scope=server").unwrap();
        assert_eq!((s.scopes, s.extras), (SC_SRV, false));
        let fb = q("/metrics?scope=frontend&scope=backend").unwrap();
        assert_eq!(fb.scopes, SC_FRONT | SC_BACK);
        assert_eq!(q("/metrics?scope=*&scope=").unwrap().scopes, 0);
        let g = q("/metrics?scope=&scope=global").unwrap();
        assert_eq!((g.scopes, g.extras), (SC_GLOBAL, false));
        assert_eq!(q("/metrics?scope=%2A").unwrap().scopes, SC_ALL);
        assert!(q("/metrics?scope=server&no-maint").unwrap().no_maint);
        assert_eq!(
            q("/metrics?other=1&scope=sticktable#x").unwrap().scopes,
            SC_STICK
        );
        assert_eq!(q("/metrics?x=1").unwrap().scopes, SC_ALL);
        for bad in ["?scope", "?scope=bogus", "?scope=a=b", "?scope=%zz"] {
            assert!(q(&format!("/metrics{bad}")).is_none(), "{bad}");
        }
    }
}
