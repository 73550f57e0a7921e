//! A frontend compiled ([`FrontendRt`]): its timeouts with HAProxy's
//! fallbacks, options, rules, `use_backend` choice, log formats and
//! levels, error answers, counters and HTTP/2 limits; what the client
//! side and the stream read on every request.

use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::sync::Arc;

use crate::config::ForwardFor;
use crate::listener_stats::ListenerStats;
use crate::rules::{Cond, Matcher};
use crate::sample::{Ctx, LogFormat};

use super::backends::BackendRt;
use super::counters::HttpCounters;
use super::rules::{Prepared, ReqRule, RespRule};
use super::stats::StatsRt;

/// Timeouts in force on a frontend's connections, in milliseconds.
#[derive(Clone, Copy, Debug)]
pub struct FeTimeouts {
    /// Whole request head must arrive (slowloris): `timeout http-request`,
    /// else `timeout client`.
    pub http_request: u32,
    /// Idle time between requests: `timeout http-keep-alive`, else
    /// `timeout http-request`, else `timeout client` (HAProxy's order).
    pub keep_alive: u32,
    /// Stalled reads and writes: `timeout client`.
    pub client: u32,
    /// How long `http-request tarpit` holds a request: `timeout tarpit`,
    /// else `timeout connect` (HAProxy's rule), else its default.
    pub tarpit: u32,
}

/// Whether an exchange ended abnormally, as HAProxy's `strm_log` judges
/// it for `option dontlog-normal` and `option log-separate-errors`: it was
/// redispatched, or ended on an error (a termination state other than
/// `-` or `L`), or needed a connect retry, or (HTTP) its status is 5xx.
pub fn abnormal(term: &[u8], retried: bool, redispatched: bool, status: Option<u16>) -> bool {
    let cause = term.first().copied().unwrap_or(b'-');
    redispatched
        || !matches!(cause, b'-' | b'L')
        || (cause == b'-' && retried)
        || status.is_some_and(|s| s >= 500)
}

impl FrontendRt {
    /// The local address of a client connection `s` for a log line, when
    /// the frontend's `log-format` reads it (no system call otherwise).
    pub fn log_local(&self, s: &std::net::TcpStream) -> Option<std::net::SocketAddr> {
        [
            &self.log_format,
            &self.log_format_sd,
            &self.error_log_format,
        ]
        .into_iter()
        .flatten()
        .any(|l| l.needs_local())
        .then(|| s.local_addr().ok())
        .flatten()
    }

    /// The log entry of a connection that carried no request (HAProxy's
    /// `sess_build_logline` without a stream): `<BADREQ>`, status 0, `PR`,
    /// no backend nor server, every timer but `tt` -1; `fmt` unset.
    #[allow(clippy::too_many_arguments)]
    pub fn no_request_entry<'a>(
        &'a self,
        client: std::net::SocketAddr,
        accept: std::time::SystemTime,
        tt: i64,
        actconn: u32,
        local: Option<std::net::SocketAddr>,
        tls: bool,
        vars: Option<&'a std::cell::RefCell<crate::sample::VarStore>>,
    ) -> crate::log::Entry<'a> {
        crate::log::Entry {
            client_cert: None,
            client,
            accept,
            frontend: &self.name,
            backend: &self.name,
            server: "<NOSRV>",
            tq: -1,
            tw: -1,
            tc: -1,
            tr: -1,
            tt,
            status: 0,
            bytes: 0,
            bytes_in: 0,
            // No stream: HAProxy's `%ST` 0.
            txn: false,
            term: "PR",
            actconn,
            feconn: self.cur_conns(),
            request_line: b"<BADREQ>",
            request_date: None,
            local,
            tls,
            cookie_flags: "--",
            h2: false,
            vars,
            // No stream, no capture slots: HAProxy prints no `{...}`.
            ncaps: (0, 0),
            fmt: None,
            asap: false,
            // No stream: HAProxy's `fc_rtt`... find none.
            fc: None,
        }
    }

    /// Whether a tcp session is logged as soon as its server connection
    /// is up (HAProxy 2.6's stream.c, for a stream that is not HTTP): under
    /// `option logasap`, or with a `log-format` (and `log-format-sd`)
    /// that reads nothing of the session's end (no LW_BYTES item).
    pub fn tcp_logs_at_connect(&self) -> bool {
        self.l4.logasap
            || self.log_format.as_ref().is_some_and(|f| {
                !f.waits_for_end()
                    && !self
                        .log_format_sd
                        .as_ref()
                        .is_some_and(|sd| sd.waits_for_end())
            })
    }

    /// The RFC 5424 structured data of line `e` (`log-format-sd`), `None`
    /// without one (the `-` of HAProxy's default).
    pub fn log_sd(&self, e: &crate::log::Entry<'_>) -> Option<Vec<u8>> {
        let f = self.log_format_sd.as_ref()?;
        Some(crate::log::format(&crate::log::Entry {
            fmt: Some(f),
            ..*e
        }))
    }

    /// The syslog level of an exchange's line, `None` when it is not
    /// logged: `option dontlog-normal` drops the normal ones, `option
    /// log-separate-errors` sends the abnormal ones at `err` (else `info`).
    pub fn log_level(&self, abnormal: bool) -> Option<u8> {
        match abnormal {
            false if self.dontlog_normal => None,
            true => Some(self.err_level()),
            false => Some(crate::log::LOG_INFO),
        }
    }

    /// The level of a line reporting an error (a bad request, a TLS
    /// handshake that failed...): `err` with `option log-separate-errors`.
    pub fn err_level(&self) -> u8 {
        if self.log_errors {
            crate::log::LOG_ERR
        } else {
            crate::log::LOG_INFO
        }
    }
}

/// A compiled frontend.
pub struct FrontendRt {
    /// HAProxy's proxy id (`iid`): see [`proxy_uuid`].
    pub uuid: usize,
    pub name: String,
    /// `description` (shown on the stats page).
    pub desc: Option<String>,
    /// The name again, shared by every session's registry entry (no
    /// allocation per connection).
    pub name_arc: Arc<str>,
    pub maxconn: Option<u32>,
    /// `rate-limit sessions N`: the frontend's own session rate, and its
    /// limit (0: none); its listeners pause while it is reached.
    pub sess_limit: crate::rate::RateLimit,
    /// Sessions and requests per second (`fe_sess_rate`, `fe_req_rate`).
    pub rates: super::state::Rates,
    pub timeouts: FeTimeouts,
    /// Whether client connections are kept between requests: only
    /// `option httpclose` closes them (`http-server-close` closes the
    /// server side only, as in HAProxy).
    pub keep_alive: bool,
    /// `option http-server-close` or `httpclose` on the frontend: no
    /// server connection is kept after a response, whatever the backend
    /// says (HAProxy: the option in either the frontend or the backend).
    pub server_close: bool,
    /// `option idle-close-on-response` (see [`crate::drain`]).
    pub idle_close_on_response: bool,
    /// `option contstats` (see `tcp::session` and `stream::proxy`).
    pub contstats: bool,
    /// `max-session-srv-conns N` (5 unless set): most idle server
    /// connections private to a client that its stream keeps.
    pub max_session_srv_conns: u32,
    /// `option h1-case-adjust-bogus-client` with a non-empty global
    /// `h1-case-adjust` map: the heads written to HTTP/1 clients get its
    /// names.
    pub h1_case: Option<Arc<crate::http1::CaseMap>>,
    /// `option accept-invalid-http-request`: a request the strict parser
    /// refuses is read again as HAProxy's option reads it.
    pub accept_invalid: bool,
    /// The last invalid request of its clients (`show errors`).
    pub invalid_req: super::errors::Capture,
    /// `option abortonclose` reached this frontend (from its `defaults`
    /// or as a `listen`): HAProxy 2.6 watches a client for its close
    /// while the request is served only when the frontend has it too
    /// (it decides that while the frontend is still the stream's
    /// backend), so a backend's option alone aborts nothing.
    pub abort_on_close: bool,
    /// `option nolinger`: client connections close with a RST (SO_LINGER
    /// 0, set on the listeners), a tcp session's without a FIN first.
    pub nolinger: bool,
    /// `option dontlog-normal`: only exchanges HAProxy deems abnormal
    /// are logged (see [`FrontendRt::log_level`]).
    pub dontlog_normal: bool,
    /// `option log-separate-errors`: abnormal ones at syslog `err`.
    pub log_errors: bool,
    /// `option forwardfor` and `option originalto` of the frontend: as in
    /// HAProxy, the header is added when the frontend or the backend asks
    /// for it (see the stream's proxy path, `stream::proxy`).
    pub forwardfor: Option<ForwardFor>,
    pub originalto: Option<ForwardFor>,
    /// `option disable-h2-upgrade`: no implicit HTTP/2 on HTTP/1 binds.
    pub disable_h2_upgrade: bool,
    /// `option dontlognull` and `option http-ignore-probes`: what becomes
    /// of an HTTP connection that ends before its first request byte.
    pub dontlognull: bool,
    pub ignore_probes: bool,
    /// `option logasap` (see [`crate::config::ProxyOptions::logasap`]).
    pub logasap: bool,
    /// `option http-buffer-request`: the body is waited for before the
    /// frontend's rules (bounded by `timeout http-request`, else the
    /// client's read timeout).
    pub buffer_request: bool,
    /// `timeout client` as configured (`fe_client_timeout`).
    pub client_ms: Option<u32>,
    /// `option http-restrict-req-hdr-names`, after the frontend's rules.
    pub restrict_hdr_names: crate::config::RestrictHdrNames,
    pub matcher: Matcher,
    pub http_request: Vec<ReqRule>,
    pub http_response: Vec<RespRule>,
    /// `http-after-response` rules.
    pub after_response: Vec<RespRule>,
    /// `log-format`; `None`: HAProxy's httplog format.
    pub log_format: Option<crate::sample::logline::LogLine>,
    /// `log-format-sd`: RFC 5424 structured data; `None`: `-`.
    pub log_format_sd: Option<crate::sample::logline::LogLine>,
    /// `error-log-format`: connection-error lines; `None`: ebb's fixed line.
    pub error_log_format: Option<crate::sample::logline::LogLine>,
    /// `capture request|response header` lines, in order.
    pub captures: Vec<crate::sample::logline::CaptureHdr>,
    /// `capture cookie`, `unique-id-format`, `unique-id-header`.
    pub txn: crate::config::cookie::FrontTxn,
    /// `use_backend` rules in order.
    pub use_backends: Vec<UseBackendRt>,
    pub default_backend: Option<usize>,
    /// A `listen` section's own backend (the same proxy in HAProxy: what
    /// its counters count before a backend is chosen).
    pub own_backend: Option<usize>,
    /// Full HTTP responses by status (`errorfile`).
    pub errorfiles: Vec<(u16, Vec<u8>)>,
    /// `http-error` answers built per request, by status.
    pub error_replies: Vec<(u16, Prepared)>,
    /// Whether requests are logged (`log` lines present, globally or here).
    pub log: bool,
    /// Connections open on this frontend, all threads together.
    pub conns: AtomicU32,
    /// The backends `use_backends` and `default_backend` index into.
    pub backends: Vec<Arc<BackendRt>>,
    /// Compression for requests this frontend sends to each backend (by
    /// index): the two proxies' `compression` lines merged.
    pub comp: Vec<Option<Arc<crate::compress::Policy>>>,
    /// The stats page served by this frontend, if any.
    pub stats: Option<Arc<StatsRt>>,
    /// `monitor-uri` and its `monitor fail` conditions.
    pub monitor: Option<(String, Vec<Cond>)>,
    pub http: HttpCounters,
    /// Connections accepted since start (or `clear counters all`).
    pub sessions: AtomicU64,
    /// Every stick table of the configuration (track-sc and the fetches
    /// find theirs by name).
    pub tables: Arc<crate::table::Tables>,
    /// `mode tcp`, `tcp-request` rules, `option tcplog`.
    pub l4: crate::l4rules::TcpRt,
    /// The HTTP/2 limits of this frontend's connections (`tune.h2.*`).
    pub h2: crate::h2::Config,
    /// HTTP/2 connections open now, all threads together.
    pub h2_conns: AtomicU32,
    /// HTTP/2 connections accepted since start.
    pub h2_conns_total: AtomicU64,
    /// HTTP/2 streams started since start.
    pub h2_streams: AtomicU64,
    /// One entry per listener (each address of each `bind` line, in
    /// order) with `option socket-stats`, a bind line's `maxconn`, or
    /// when a `dst_conn` fetch reads them ([`crate::sample::DST_CONN`]);
    /// empty otherwise.
    pub listeners: Vec<Arc<ListenerStats>>,
}

/// The listeners of a frontend with `option socket-stats` or a bind line
/// with `maxconn`: each address (then each other socket) of each bind
/// line, numbered from 1. Without either, none: a connection then counts
/// on no listener of its own.
pub(super) fn listener_stats(p: &crate::config::Proxy) -> Vec<Arc<ListenerStats>> {
    let shown = p.options.socket_stats;
    if !shown
        && p.binds.iter().all(|b| b.maxconn == 0)
        && !crate::sample::DST_CONN.load(Ordering::Relaxed)
    {
        return Vec::new();
    }
    let mut out = Vec::new();
    for b in &p.binds {
        for _ in 0..b.addrs.len() + b.sockets.len() {
            let luid = out.len() + 1;
            let name = b.name.clone().unwrap_or_else(|| format!("sock-{luid}"));
            out.push(Arc::new(ListenerStats::new(name, luid, b.maxconn, shown)));
        }
    }
    out
}

/// The HTTP/2 limits from `tune.h2.*` (HAProxy 2.6's keywords; the
/// rest are `h2::Config`'s defaults). `tune.h2.max-concurrent-streams 0`
/// lifts the limit, as in HAProxy.
pub(super) fn h2_config(g: &crate::config::Global) -> crate::h2::Config {
    let mut c = crate::h2::Config::default();
    if let Some(n) = g.h2_max_concurrent_streams {
        c.max_concurrent_streams = if n == 0 { u32::MAX } else { n };
    }
    if let Some(n) = g.h2_initial_window_size {
        c.initial_window_size = n;
    }
    if let Some(n) = g.h2_header_table_size {
        c.header_table_size = n;
    }
    // HAProxy 2.6's HPACK list: 2 x `tune.http.maxhdr` entries, the end
    // mark included.
    if let Some(n) = g.max_hdr {
        c.max_fields = u32::try_from(2 * n - 1).unwrap_or(u32::MAX);
    }
    // HAProxy 2.6: `tune.h2.max-frame-size`, else the buffer size, and
    // never more than a buffer (nor less than the RFC's 16384).
    let buf = u32::try_from(g.bufsize).unwrap_or(u32::MAX);
    c.max_frame_size = g
        .h2_max_frame_size
        .map_or(buf, |n| n.min(buf))
        .clamp(16_384, 16_777_215);
    c
}

/// A compiled `use_backend` rule.
pub struct UseBackendRt {
    /// Index into the frontend's backends; unused when `dynamic`.
    pub index: usize,
    /// A log-format name, evaluated per request.
    pub dynamic: Option<LogFormat>,
    pub cond: Option<Cond>,
}

impl FrontendRt {
    /// The backend the `use_backend` rules choose for a request, else the
    /// default backend. A dynamic name that names no backend makes its
    /// rule not apply (HAProxy goes on with the next rule).
    pub fn choose_backend(&self, ctx: &Ctx<'_>) -> Option<usize> {
        for u in &self.use_backends {
            if !self.matcher.holds(u.cond.as_ref(), ctx) {
                continue;
            }
            let Some(f) = &u.dynamic else {
                return Some(u.index);
            };
            let found = crate::sample::with_name_buf(|name| {
                f.render(ctx, name);
                self.backends
                    .iter()
                    .position(|b| b.name.as_bytes() == name.as_slice())
            });
            if found.is_some() {
                return found;
            }
        }
        self.default_backend
    }

    /// How many request and response header captures are configured.
    pub fn ncaps(&self) -> (usize, usize) {
        let res = self.captures.iter().filter(|c| c.response).count();
        (self.captures.len() - res, res)
    }

    /// Connections open now.
    pub fn cur_conns(&self) -> u32 {
        self.conns.load(Ordering::Relaxed)
    }

    /// The errorfile for a status.
    pub fn errorfile(&self, status: u16) -> Option<&[u8]> {
        self.errorfiles
            .iter()
            .find(|(s, _)| *s == status)
            .map(|(_, b)| b.as_slice())
    }
}

/// Default timeouts when a configuration sets none, in ms. HAProxy refuses
/// to guess and warns; a web server must not keep idle connections
/// forever, so ebb uses nginx's defaults: 60 s for client reads/writes and
/// the request head, 75 s keep-alive idle.
pub const DEFAULT_CLIENT_MS: u32 = 60_000;
pub const DEFAULT_KEEPALIVE_MS: u32 = 75_000;
