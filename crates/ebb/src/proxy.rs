//! The configuration compiled for serving: what every thread reads on the
//! request path, built once at start (and again on reload) and shared
//! read-only through an `Arc`.
//!
//! Compiling checks what the parser cannot know: regular expressions and
//! `lf-string` formats build, server names resolve, what ebb does not
//! support is refused (an error with `file:line`, never a silent no-op),
//! and every backend reference resolves to an index.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use std::net::{SocketAddr, ToSocketAddrs};

use crate::backend::Farm;
use crate::config::HeaderEdit;
use crate::config::{
    Config, ConfigError, ForwardFor, HttpConnMode, HttpRequestAction, HttpResponseAction, Loc,
    Proxy, Redirect, ReturnAction, ReturnBody,
};
use crate::rules::{Cond, Matcher};
use crate::sample::{Ctx, LogFormat, Scope};
use crate::statefile::SrvState;
use crate::stream::msg::FieldBuf;

/// What a `serve-files` backend was configured with.
#[derive(Debug, Clone)]
pub struct FilesConfig {
    /// The document root.
    pub root: std::path::PathBuf,
    /// Index files tried, in order, for a directory.
    pub index: Vec<String>,
    /// Whether a directory without index is listed (else 403).
    pub listing: bool,
    /// Whether symlinks may lead out of the root.
    pub follow_symlinks: bool,
    /// `Cache-Control: max-age=N` when set.
    pub max_age: Option<u32>,
    /// `dotfiles allow`: serve names starting with a dot. By default they
    /// are 404 (`.git/`, `.env`, `.htpasswd` left in a served tree), except
    /// `/.well-known/` (RFC 8615: ACME challenges, security.txt).
    pub dotfiles: bool,
    /// `precompressed ...`: codings whose sibling (`F.gz`, `F.br`,
    /// `F.zst`) is looked up beside each file, in preference order.
    pub precompressed: Vec<crate::compress::Coding>,
}

impl FilesConfig {
    /// The defaults of `serve-files DIR`: `index.html`, no listing, symlinks
    /// confined to the root, no max-age.
    pub fn new(root: impl Into<std::path::PathBuf>) -> Self {
        FilesConfig {
            root: root.into(),
            index: vec!["index.html".to_string()],
            listing: false,
            follow_symlinks: false,
            max_age: None,
            dotfiles: false,
            precompressed: Vec::new(),
        }
    }
}

/// A compiled `http-request` rule.
pub struct ReqRule {
    pub action: HttpRequestAction,
    pub cond: Option<Cond>,
    /// Where it is written (`last_rule_file`, `last_rule_line`).
    pub loc: crate::config::Loc,
    /// For `return`: the answer built once (DESIGN.md: heads of fixed
    /// answers are prepared once).
    pub prepared: Option<Prepared>,
    /// For `cache-use`: the cache it names.
    pub cache: Option<Arc<crate::httpcache::Cache>>,
    /// For `track-scN`: its table, found at start
    /// ([`crate::stick::track_table`]: no lookup by name per request).
    pub table: Option<Arc<crate::table::Table>>,
}

/// Answer fields built once for many answers, as a field list and in
/// both muxes' forms ([`crate::stream::msg::Prepared`]): a served file's
/// own fields, an all-literal `http-request return`. A field that is not
/// valid (a name that is not a token, a value with a control byte) is left
/// out of all three, as the HTTP/1 writer would leave it out.
#[derive(Debug, Default)]
pub struct PreparedFields {
    pub list: FieldBuf,
    h1: Vec<u8>,
    h2: Vec<u8>,
}

impl PreparedFields {
    /// Adds a field (or leaves out an invalid one).
    pub fn push(&mut self, name: &[u8], value: &[u8]) {
        use crate::http1::{is_field_value, is_token};
        if !is_token(name) || !is_field_value(value) {
            return;
        }
        self.list.push(name, value);
        for part in [name, b": ", value, b"\r\n"] {
            self.h1.extend_from_slice(part);
        }
        crate::h2::hpack::Encoder::push_field(&mut self.h2, &name.to_ascii_lowercase(), value);
    }

    /// The fields as a list.
    pub fn fields(&self) -> crate::stream::msg::Fields<'_> {
        self.list.fields()
    }

    /// The fields as a head carries them, prepared.
    pub fn prepared(&self) -> crate::stream::msg::Prepared<'_> {
        crate::stream::msg::Prepared {
            h1: &self.h1,
            h2: &self.h2,
        }
    }
}

/// A fixed answer, its fields checked once: what varies per request is
/// only `Date`, `Connection` (the client side writes them) and what
/// log-format `hdr` values and an `lf-string` body evaluate to.
pub struct Prepared {
    pub status: u16,
    /// The `hdr` fields when all their values are literal.
    pub fields: FieldBuf,
    /// `content-type`, sent after the `hdr` fields and only with a body
    /// (HAProxy's http_reply_to_htx).
    pub content_type: Option<Box<[u8]>>,
    pub body: Vec<u8>,
    /// Whether the status allows a body (not 1xx, 204, 304).
    pub has_body: bool,
    /// `lf-string`: the body, evaluated per request.
    pub body_fmt: Option<LogFormat>,
    /// Every `hdr NAME FMT` field, in the configuration's order, when one
    /// of their values is a log-format string (`fields` is then empty).
    pub dyn_hdrs: Vec<HeaderEdit>,
    /// An answer all literal (no `lf-string`, no `hdr` format): every
    /// field it sends, `content-type` included, built once, so that each
    /// request writes them without a copy in between (`None`: the
    /// answer is rendered per request, [`Prepared::render`]).
    pub literal: Option<PreparedFields>,
    /// Whether `literal` may go out in its prepared forms: none of its
    /// fields is one a mux decides itself (`connection`, `upgrade`,
    /// `content-length`... [`crate::stream::msg::is_framing_field`]),
    /// which the muxes read from the head's added fields instead.
    pub literal_plain: bool,
    /// The whole HTTP/1 answer to a request that keeps its connection,
    /// written once by the stream at the first such answer
    /// (`literal_plain` answers only; `None` inside: it cannot be): see
    /// [`crate::stream::msg::WholeAnswer`].
    pub h1_whole: std::sync::OnceLock<Option<crate::stream::msg::WholeAnswer>>,
}

impl Prepared {
    /// Builds the answer of an `http-request return`; refuses a field that
    /// could not be sent (bad name or value).
    pub fn of(r: &ReturnAction, scope: Scope) -> Result<Prepared, String> {
        use crate::http1::{is_field_value_byte, is_token};
        let sendable =
            |n: &[u8], v: &[u8]| is_token(n) && v.iter().all(|&b| is_field_value_byte(b));
        let body = return_body(r).to_vec();
        let body_fmt = match &r.body {
            ReturnBody::LfString(f) if f.as_literal().is_none() => Some(f.clone()),
            _ => None,
        };
        let has_body = !(r.status < 200 || r.status == 204 || r.status == 304);
        let content_type: Option<Box<[u8]>> = match &r.content_type {
            Some(ct) if !sendable(b"Content-Type", ct.as_bytes()) => {
                return Err(format!("invalid content-type '{ct}'"))
            }
            Some(ct) => Some(ct.as_bytes().into()),
            None => None,
        };
        let mut fields = FieldBuf::default();
        let mut dyn_hdrs = Vec::new();
        for (n, v) in &r.headers {
            let f = LogFormat::parse_http(v, scope).map_err(|e| format!("hdr {n}: {e}"))?;
            match f.as_literal() {
                // HAProxy adds no field whose value is empty.
                Some([]) => {}
                Some(lit) if sendable(n.as_bytes(), lit) => fields.push(n.as_bytes(), lit),
                Some(_) => return Err(format!("invalid header '{n}: {v}'")),
                None if is_token(n.as_bytes()) => {}
                None => return Err(format!("invalid header '{n}: {v}'")),
            }
            dyn_hdrs.push(HeaderEdit {
                op: crate::config::EditOp::Add,
                name: n.clone(),
                value: f,
            });
        }
        // All literal: the fields are built once; else every field is
        // evaluated in order, so literal and evaluated ones keep theirs.
        if dyn_hdrs.iter().all(|e| e.value.as_literal().is_some()) {
            dyn_hdrs.clear();
        } else {
            fields = FieldBuf::default();
        }
        let literal = (dyn_hdrs.is_empty() && body_fmt.is_none()).then(|| {
            // What `render` gives for it, once (every field was checked
            // above: none is left out).
            let mut all = PreparedFields::default();
            for (n, v) in fields.fields().iter() {
                all.push(n, v);
            }
            if let (Some(ct), false) = (content_type.as_deref(), body.is_empty()) {
                all.push(b"Content-Type", ct);
            }
            all
        });
        let literal_plain = literal.as_ref().is_some_and(|l| {
            l.fields()
                .iter()
                .all(|(n, _)| !crate::stream::msg::is_framing_field(n))
        });
        Ok(Prepared {
            status: r.status,
            fields,
            content_type,
            body,
            has_body,
            body_fmt,
            dyn_hdrs,
            literal,
            literal_plain,
            h1_whole: std::sync::OnceLock::new(),
        })
    }

    /// The answer for one request: its fields into `fields` (the `hdr`
    /// fields, then `content-type` when there is a body), and its body
    /// (evaluated into `scratch` for an `lf-string`). `done`: the
    /// log-format parts already evaluated when the rule ran
    /// ([`Prepared::evaluate`]); else they are evaluated now on `ctx`.
    pub fn render<'s>(
        &'s self,
        ctx: &Ctx<'_>,
        done: Option<&Evaluated>,
        fields: &mut FieldBuf,
        scratch: &'s mut Vec<u8>,
    ) -> &'s [u8] {
        fields.extend(self.fields.fields());
        let body: &[u8] = if let Some(d) = done {
            fields.extend(d.fields.fields());
            scratch.clear();
            scratch.extend_from_slice(d.body.as_deref().unwrap_or(&self.body));
            scratch
        } else {
            for e in &self.dyn_hdrs {
                fields.push_nonempty_with(e.name.as_bytes(), |out| e.render_value(ctx, out));
            }
            match &self.body_fmt {
                Some(f) => {
                    scratch.clear();
                    f.render(ctx, scratch);
                    scratch
                }
                None => &self.body,
            }
        };
        if let (Some(ct), false) = (&self.content_type, body.is_empty()) {
            fields.push(b"Content-Type", ct);
        }
        body
    }

    /// What the `hdr` values and the `lf-string` body evaluate to on `ctx`
    /// (HAProxy evaluates them when the rule runs, on the request as the
    /// rules before edited it); `None` when the answer is all literal.
    pub fn evaluate(&self, ctx: &Ctx<'_>) -> Option<Box<Evaluated>> {
        if self.dyn_hdrs.is_empty() && self.body_fmt.is_none() {
            return None;
        }
        let mut fields = FieldBuf::default();
        for e in &self.dyn_hdrs {
            fields.push_nonempty_with(e.name.as_bytes(), |out| e.render_value(ctx, out));
        }
        let body = self.body_fmt.as_ref().map(|f| {
            let mut b = Vec::new();
            f.render(ctx, &mut b);
            b
        });
        Some(Box::new(Evaluated { fields, body }))
    }
}

/// The log-format parts of a [`Prepared`] answer, evaluated.
pub struct Evaluated {
    /// The `hdr NAME FMT` fields.
    pub fields: FieldBuf,
    /// The `lf-string` body.
    pub body: Option<Vec<u8>>,
}

/// A compiled `http-response` rule.
pub struct RespRule {
    pub action: HttpResponseAction,
    pub cond: Option<Cond>,
    /// Where it is written (`last_rule_file`, `last_rule_line`).
    pub loc: crate::config::Loc,
    /// For `deny` with an answer of its own: that answer, built once.
    pub prepared: Option<Prepared>,
    /// For `cache-store`: the cache it names.
    pub cache: Option<Arc<crate::httpcache::Cache>>,
}

/// What a backend does with the requests routed to it.
pub enum BackendKind {
    /// `serve-files DIR`.
    Files(FilesConfig),
    /// `server` lines: the reverse proxy.
    Servers(Box<ServersRt>),
}

/// Timeouts of the server side, in ms.
#[derive(Clone, Copy, Debug)]
pub struct BeTimeouts {
    pub connect: u32,
    pub server: u32,
    pub queue: u32,
    pub tunnel: u32,
}

/// A backend of servers.
pub struct ServersRt {
    pub farm: Arc<Farm>,
    pub probe: Option<crate::backend::check::Probe>,
    pub check_timeout: Option<Duration>,
    /// `option log-health-checks`.
    pub log_checks: bool,
    /// `email-alert`: its servers' changes of state are mailed.
    pub email_alert: crate::config::EmailAlert,
    pub timeouts: BeTimeouts,
    pub forwardfor: Option<ForwardFor>,
    /// `option originalto` of the backend.
    pub originalto: Option<ForwardFor>,
    /// `option httpclose` / `http-server-close` on the backend: no server
    /// connection is kept after a response.
    pub server_close: bool,
    /// `option http-pretend-keepalive`: a request whose server connection
    /// closes after the answer does not say so (`Connection: close`).
    pub pretend_keepalive: bool,
    /// `option httpclose` on the backend: the client connection closes
    /// after the response too.
    pub close: bool,
    /// `option abortonclose`: a client that closes its side while its
    /// request is queued, connecting or waiting for the answer is aborted.
    pub abort_on_close: bool,
    /// `cookie NAME ...`: the persistence cookie.
    pub cookie: Option<crate::config::cookie::CookieCfg>,
    /// `force-persist` (true) / `ignore-persist` (false) rules, compiled
    /// with the backend's matcher.
    pub persist_rules: Vec<(bool, Cond)>,
    /// `use-server` rules, compiled with the backend's matcher.
    pub use_server: Vec<crate::stick::UseServerRt>,
    /// `option persist`.
    pub persist: bool,
    /// `http-send-name-header NAME` (lowercased).
    pub send_name: Option<String>,
    /// `option prefer-last-server` with a balance that does not hash the
    /// request (HAProxy ignores it for those).
    pub prefer_last: bool,
    /// `max-keep-alive-queue N`: `prefer_last` holds only while the
    /// server has a free slot or fewer than N streams queued.
    pub max_ka_queue: Option<u32>,
}

impl ServersRt {
    /// The server the `use-server` rules assign to the exchange of `ctx`
    /// (index in the farm), and whether a `force-persist` rule holds (no
    /// redispatch then). The first `force-persist`/`ignore-persist` rule
    /// that holds decides, as HAProxy's `persist_rules`.
    pub fn use_server(&self, m: &Matcher, ctx: &crate::sample::Ctx<'_>) -> Option<(usize, bool)> {
        if self.use_server.is_empty() {
            return None;
        }
        let force = self.force_persist(m, ctx);
        let i = crate::stick::use_server(
            &self.use_server,
            m,
            ctx,
            &self.farm.servers,
            self.persist || force,
        )?;
        Some((i, force))
    }

    /// Whether the first `force-persist`/`ignore-persist` rule that holds
    /// is a `force-persist` one (HAProxy's SF_FORCE_PRST).
    pub fn force_persist(&self, m: &Matcher, ctx: &crate::sample::Ctx<'_>) -> bool {
        self.persist_rules
            .iter()
            .find(|(_, c)| m.holds(Some(c), ctx))
            .is_some_and(|(f, _)| *f)
    }
}

/// Server-side defaults when the configuration sets none, in ms: connect
/// 5 s (HAProxy's examples), server 60 s (nginx's `proxy_read_timeout`),
/// queue = connect (HAProxy's rule), tunnel = server.
pub const DEFAULT_CONNECT_MS: u32 = 5_000;
pub const DEFAULT_SERVER_MS: u32 = 60_000;

/// The counters of [`HttpCounters`] that every request moves, one copy
/// per thread ([`crate::per_thread`]): read through
/// [`HttpCounters::requests`] and its siblings, which add the copies up.
#[derive(Default)]
pub struct PerRequest {
    pub requests: AtomicU64,
    /// Responses by status class: 1xx, 2xx, 3xx, 4xx, 5xx, other.
    pub hrsp: [AtomicU64; 6],
    /// Request head bytes received.
    pub bytes_in: AtomicU64,
    /// Response bytes sent (head and body).
    pub bytes_out: AtomicU64,
    /// Frontends: requests answered by the frontend itself (HAProxy's
    /// `intercepted`: `return`, `redirect`, `auth`, `use-service`, the
    /// stats page and `monitor-uri`, from the frontend's rules).
    pub intercepted: AtomicU64,
}

/// HTTP counters of a frontend or a backend (all threads together; read
/// by the stats page, `show stat` and the Prometheus exporter). Counted
/// where a request's answer is complete ([`count_request`]).
#[derive(Default)]
pub struct HttpCounters {
    /// Requests, answers by class, bytes in and out, intercepted: moved
    /// at every request, so each thread counts in its own copy.
    pub per_req: crate::per_thread::PerThread<PerRequest>,
    /// Requests refused by a `deny` rule.
    pub denied: AtomicU64,
    /// Frontends: requests that could not be read (malformed, cut short
    /// by the client, or not whole at `timeout http-request`): HAProxy's
    /// `ereq` (`failed_req`).
    pub failed_req: AtomicU64,
    /// Bytes a tcp session wrote from a kernel pipe (`option splice-*`),
    /// both directions: `show info`'s `TotalSplicdedBytesOut`.
    pub spliced_out: AtomicU64,
    /// Answer bytes given to the compressor, the coded bytes it produced,
    /// and the answers compressed (HAProxy's `comp_in`, `comp_out`,
    /// `comp_rsp`).
    pub comp_in: AtomicU64,
    pub comp_out: AtomicU64,
    pub comp_rsp: AtomicU64,
    /// Failed rewrites by the request rules, requests the rules ended in
    /// an internal error (a failed rewrite in strict mode), and `cache-use`
    /// lookups and hits (HAProxy's `wrew`, `eint`, `cache_lookups`,
    /// `cache_hits`).
    pub failed_rewrites: AtomicU64,
    pub internal_errors: AtomicU64,
    pub cache_lookups: AtomicU64,
    pub cache_hits: AtomicU64,
    /// Frontends: connections and sessions refused by a `tcp-request
    /// connection|session reject` (HAProxy's `dcon`, `dses`; not
    /// `silent-drop`).
    pub denied_conn: AtomicU64,
    pub denied_sess: AtomicU64,
}

impl HttpCounters {
    /// Zeroes every counter (`clear counters all`).
    pub fn clear(&self) {
        for c in self.per_req.all() {
            c.requests.store(0, Ordering::Relaxed);
            for h in &c.hrsp {
                h.store(0, Ordering::Relaxed);
            }
            c.bytes_in.store(0, Ordering::Relaxed);
            c.bytes_out.store(0, Ordering::Relaxed);
            c.intercepted.store(0, Ordering::Relaxed);
        }
        self.denied.store(0, Ordering::Relaxed);
        self.failed_req.store(0, Ordering::Relaxed);
        self.comp_in.store(0, Ordering::Relaxed);
        self.comp_out.store(0, Ordering::Relaxed);
        self.comp_rsp.store(0, Ordering::Relaxed);
        self.failed_rewrites.store(0, Ordering::Relaxed);
        self.internal_errors.store(0, Ordering::Relaxed);
        self.cache_lookups.store(0, Ordering::Relaxed);
        self.cache_hits.store(0, Ordering::Relaxed);
        self.denied_conn.store(0, Ordering::Relaxed);
        self.denied_sess.store(0, Ordering::Relaxed);
    }

    /// This thread's copy of the per-request counters, to count in.
    #[inline]
    pub fn local(&self) -> &PerRequest {
        self.per_req.local()
    }

    /// Requests counted, every thread's together.
    pub fn requests(&self) -> u64 {
        self.per_req.sum(|c| c.requests.load(Ordering::Relaxed))
    }

    /// Answers by status class ([`status_class`]), every thread's together.
    pub fn hrsp(&self) -> [u64; 6] {
        std::array::from_fn(|k| self.per_req.sum(|c| c.hrsp[k].load(Ordering::Relaxed)))
    }

    /// Request head bytes received, every thread's together.
    pub fn bytes_in(&self) -> u64 {
        self.per_req.sum(|c| c.bytes_in.load(Ordering::Relaxed))
    }

    /// Response bytes sent, every thread's together.
    pub fn bytes_out(&self) -> u64 {
        self.per_req.sum(|c| c.bytes_out.load(Ordering::Relaxed))
    }

    /// Requests the frontend answered itself, every thread's together.
    pub fn intercepted(&self) -> u64 {
        self.per_req.sum(|c| c.intercepted.load(Ordering::Relaxed))
    }

    /// Adds what a proxy's request rules did.
    pub fn note_rules(&self, n: RuleCounts) {
        self.failed_rewrites
            .fetch_add(n.failed_rewrites, Ordering::Relaxed);
        self.cache_lookups
            .fetch_add(n.cache_lookups, Ordering::Relaxed);
        self.cache_hits.fetch_add(n.cache_hits, Ordering::Relaxed);
    }
}

/// Counters the request rules move (HAProxy's `wrew`, `cache_lookups`,
/// `cache_hits`).
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct RuleCounts {
    pub failed_rewrites: u64,
    pub cache_lookups: u64,
    pub cache_hits: u64,
}

/// Counts a compressed answer's bytes (`totals`: given, produced) on its
/// frontend and backend.
pub fn count_compressed(fe: &FrontendRt, be: Option<&BackendRt>, totals: (u64, u64)) {
    for c in std::iter::once(&fe.http).chain(be.map(|b| &b.http)) {
        c.comp_in.fetch_add(totals.0, Ordering::Relaxed);
        c.comp_out.fetch_add(totals.1, Ordering::Relaxed);
        c.comp_rsp.fetch_add(1, Ordering::Relaxed);
    }
}

/// An HTTP status's class: 0 for 1xx ... 4 for 5xx, 5 for the others
/// (the `hrsp_*` counters).
pub fn status_class(status: u16) -> usize {
    match status {
        100..=599 => (status / 100 - 1) as usize,
        _ => 5,
    }
}

/// Counts one answered request on its frontend and (if any) backend.
/// `bytes_in`, `bytes_out`: what the client sent and what it was
/// answered, as HAProxy counts them (`crate::http1::htx`).
pub fn count_request(
    fe: &FrontendRt,
    be: Option<&BackendRt>,
    status: u16,
    bytes_in: u64,
    bytes_out: u64,
) {
    let class = status_class(status);
    for c in std::iter::once(&fe.http).chain(be.map(|b| &b.http)) {
        let c = c.local();
        c.requests.fetch_add(1, Ordering::Relaxed);
        c.hrsp[class].fetch_add(1, Ordering::Relaxed);
        c.bytes_in.fetch_add(bytes_in, Ordering::Relaxed);
        c.bytes_out.fetch_add(bytes_out, Ordering::Relaxed);
    }
}

/// A compiled stats page (`stats uri|refresh|auth|admin|realm`).
pub struct StatsRt {
    pub uri: String,
    pub refresh: Option<Duration>,
    /// `(user, password)` pairs; empty: no authentication.
    pub auth: Vec<(String, String)>,
    pub realm: String,
    pub hide_version: bool,
    /// `stats admin if|unless COND` conditions (any holding allows).
    pub admin: Vec<Cond>,
    /// `stats show-node`, `show-desc` (`Some(None)`: the global value),
    /// `show-legends`.
    pub show_node: Option<Option<String>>,
    pub show_desc: Option<Option<String>>,
    pub show_legends: bool,
}

fn compile_stats(p: &Proxy, m: &Matcher) -> Result<Option<Arc<StatsRt>>, ConfigError> {
    let Some(uri) = p.stats.effective_uri() else {
        return Ok(None);
    };
    let mut admin = Vec::new();
    for c in &p.stats.admin {
        admin.push(m.cond(c)?);
    }
    Ok(Some(Arc::new(StatsRt {
        show_node: p.stats.show_node.clone(),
        show_desc: p.stats.show_desc.clone(),
        show_legends: p.stats.show_legends,
        uri: uri.to_string(),
        refresh: p.stats.refresh,
        auth: p
            .stats
            .auth
            .iter()
            .map(|u| (u.user.clone(), u.password.clone()))
            .collect(),
        realm: p
            .stats
            .realm
            .clone()
            .unwrap_or_else(|| "ebb statistics".to_string()),
        hide_version: p.stats.hide_version,
        admin,
    })))
}

/// A compiled backend.
pub struct BackendRt {
    /// Unique for the life of the process (a reload compiles new ones), so
    /// per-thread caches can key on it across reloads.
    pub id: u64,
    /// HAProxy's proxy id (`iid`, `be_id`): see [`proxy_uuid`].
    pub uuid: usize,
    pub name: String,
    /// `description` (shown on the stats page).
    pub desc: Option<String>,
    pub kind: BackendKind,
    pub matcher: Matcher,
    pub http_request: Vec<ReqRule>,
    pub http_response: Vec<RespRule>,
    /// `http-after-response` rules (empty for a listen section: its
    /// frontend's run).
    pub after_response: Vec<RespRule>,
    /// The stats page served by this backend, if any.
    pub stats: Option<Arc<StatsRt>>,
    pub http: HttpCounters,
    /// `stick` rules (persistence by stick table).
    pub stick: Vec<crate::stick::StickRt>,
    /// `mode tcp`, `tcp-request content` rules.
    pub l4: crate::l4rules::TcpRt,
    /// HTTP/2 toward this backend's `proto h2` servers (shared with the
    /// connections, which may outlive a reload).
    pub h2: Arc<H2Counters>,
    /// `option http-buffer-request` and the backend's `timeout
    /// http-request` in ms (`None`: unset) that bounds that wait.
    pub buffer_request: bool,
    pub http_request_ms: Option<u32>,
    /// `timeout server`, `timeout tunnel` as configured (`None`: unset),
    /// for `be_server_timeout`, `be_tunnel_timeout`.
    pub server_ms: Option<u32>,
    pub tunnel_ms: Option<u32>,
    /// `option http-restrict-req-hdr-names`, after the backend's rules.
    pub restrict_hdr_names: crate::config::RestrictHdrNames,
    /// `option h1-case-adjust-bogus-server` with a non-empty global
    /// `h1-case-adjust` map: the request heads written to HTTP/1 servers
    /// get its names.
    pub h1_case: Option<Arc<crate::http1::CaseMap>>,
    /// A `disabled` backend a frontend routes to (`Config::stopped`): as
    /// HAProxy never sets one up, no analyser of its runs, and a request
    /// routed there is logged without its request time (TR -1).
    pub stopped: bool,
}

/// HTTP/2 connections and streams toward servers, all threads together:
/// HAProxy's h2 statistics module on a backend (`h2_open_connections`,
/// `h2_total_connections`, `h2_backend_open_streams`,
/// `h2_backend_total_streams`).
#[derive(Default, Debug)]
pub struct H2Counters {
    pub open_conns: AtomicU64,
    pub total_conns: AtomicU64,
    pub open_streams: AtomicU64,
    pub total_streams: AtomicU64,
}

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
            ncaps: self.ncaps(),
            fmt: None,
            asap: false,
        }
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
    /// `option socket-stats`: one entry per listener (each address of each
    /// `bind` line, in order); empty without the option.
    pub listeners: Vec<Arc<ListenerStats>>,
}

pub use crate::listener_stats::{ListenerGuard, ListenerStats};

/// The listeners of a frontend with `option socket-stats`: each address
/// (then each other socket) of each bind line, numbered from 1.
fn listener_stats(p: &crate::config::Proxy) -> Vec<Arc<ListenerStats>> {
    if !p.options.socket_stats {
        return Vec::new();
    }
    let mut out = Vec::new();
    for b in &p.binds {
        for _ in 0..b.addrs.len() + b.sockets.len() {
            let luid = out.len() + 1;
            out.push(Arc::new(ListenerStats {
                name: b.name.clone().unwrap_or_else(|| format!("sock-{luid}")),
                luid,
                cur: AtomicU32::new(0),
                max: AtomicU32::new(0),
                total: AtomicU64::new(0),
            }));
        }
    }
    out
}

/// The HTTP/2 limits from `tune.h2.*` (HAProxy 2.6's keywords; the
/// rest are `h2::Config`'s defaults). `tune.h2.max-concurrent-streams 0`
/// lifts the limit, as in HAProxy.
fn h2_config(g: &crate::config::Global) -> crate::h2::Config {
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

static NEXT_BACKEND_ID: AtomicU64 = AtomicU64::new(1);

/// Everything compiled.
pub struct Compiled {
    pub frontends: Vec<Arc<FrontendRt>>,
    pub backends: Vec<Arc<BackendRt>>,
    /// The backend side of proxies that have no backend at run time (a
    /// `listen` without servers, a `backend` holding only a stick table):
    /// HAProxy still reports them as backends (`show stat`, metrics).
    pub bare_backends: Vec<BareBackend>,
    /// The stick tables, new and empty at each start or reload (as in
    /// HAProxy, whose new process starts with empty tables unless peers
    /// teach it).
    pub tables: Arc<crate::table::Tables>,
    /// The `cache` sections (new and empty at each start or reload, as
    /// HAProxy's).
    pub caches: Vec<Arc<crate::httpcache::Cache>>,
    /// Things that do not stop ebb but need saying (a server name that did
    /// not resolve).
    pub warnings: Vec<String>,
    /// `node` (else the host name) and `description` of the global
    /// section, for `show info` and the stats page.
    pub node: String,
    pub description: Option<String>,
}

/// A backend without servers nor run-time state (see
/// [`Compiled::bare_backends`]).
#[derive(Debug)]
pub struct BareBackend {
    pub uuid: usize,
    pub name: String,
    pub tcp_mode: bool,
}

/// Reads the server-state files the backends ask for
/// (`load-server-state-from-file global|local`), each once; a file that
/// does not parse is ignored whole, with a warning naming the line.
fn load_states(
    cfg: &Config,
    warnings: &mut Vec<String>,
) -> BTreeMap<String, BTreeMap<String, SrvState>> {
    use crate::config::LoadServerState as L;
    let base = cfg
        .global
        .server_state_base
        .as_ref()
        .map(|b| b.value.as_path());
    let file = cfg
        .global
        .server_state_file
        .as_ref()
        .map(|f| f.value.as_path());
    let mut global: Option<crate::statefile::Tree> = None;
    let mut out = BTreeMap::new();
    let read = |path: &std::path::Path, warnings: &mut Vec<String>| -> crate::statefile::Tree {
        match std::fs::metadata(path) {
            // No file yet (first start): nothing to restore, nothing to say.
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Default::default(),
            _ => {}
        }
        match crate::statefile::load(path) {
            Ok(t) => t,
            Err(e) => {
                warnings.push(format!("server-state: {e}"));
                Default::default()
            }
        }
    };
    for p in cfg.backends() {
        let mode = p.load_server_state.as_ref().map(|m| m.value);
        let tree = match mode {
            Some(L::Global) => {
                let Some(path) = crate::statefile::global_path(file, base) else {
                    warnings.push(format!(
                        "{}: 'load-server-state-from-file global' without a 'server-state-file' in global",
                        p.load_server_state.as_ref().map_or_else(String::new, |m| m.loc.to_string())
                    ));
                    continue;
                };
                if global.is_none() {
                    global = Some(read(&path, warnings));
                }
                global.as_ref().and_then(|g| g.get(&p.name).cloned())
            }
            Some(L::Local) => {
                // `server-state-file-name`, else the backend's name; an
                // absolute path as is, else under `server-state-base`.
                let name = p.server_state_file_name.as_deref().unwrap_or(&p.name);
                let path = match base {
                    Some(b) if !name.starts_with('/') => b.join(name),
                    _ => std::path::PathBuf::from(name),
                };
                read(&path, warnings).remove(&p.name)
            }
            Some(L::None) | None => None,
        };
        if let Some(t) = tree {
            out.insert(p.name.clone(), t);
        }
    }
    if let Some(g) = &global {
        for be in g.keys() {
            if !cfg.backends().any(|p| &p.name == be) {
                warnings.push(format!(
                    "server-state: backend {be} is in the state file but no longer in the configuration"
                ));
            }
        }
    }
    out
}

/// TLS towards a server with `ssl` (its client configuration and SNI).
pub fn server_tls(
    o: &crate::config::ServerOptions,
) -> Result<Option<crate::backend::ServerTls>, String> {
    if !o.ssl {
        if o.check_ssl {
            // The checks' TLS (built when they start): its errors now.
            crate::tls::client_config_with(o.verify(), o.ca_file.as_deref(), &o.tls)?;
        }
        return Ok(None);
    }
    let mut config = crate::tls::client_config_with(o.verify(), o.ca_file.as_deref(), &o.tls)
        .map_err(|e| e.to_string())?;
    if !o.alpn.is_empty() {
        let mut c = (*config).clone();
        c.alpn_protocols = o.alpn.iter().map(|p| p.as_bytes().to_vec()).collect();
        config = Arc::new(c);
    }
    // A constant `sni` (`str(NAME)`) is one name for every connection
    // (and the idle pool shares them); any other is evaluated per
    // connection, on the request as sent.
    let (sni, sni_expr) = match &o.sni {
        Some(e) if e.constant() => {
            let text = e.constant_text().unwrap_or_default();
            let name =
                String::from_utf8(text).map_err(|_| "'sni' is not valid UTF-8".to_string())?;
            (name, None)
        }
        Some(e) => (String::new(), Some(e.clone())),
        None => (String::new(), None),
    };
    Ok(Some(crate::backend::ServerTls {
        config,
        sni,
        sni_expr,
    }))
}

/// A server's address at start by its `init-addr` methods, the first that
/// gives one; `none` gives none (the server waits for its resolvers, or
/// stays in maintenance); none of them working is an error (HAProxy's).
fn init_addr(
    s: &crate::config::Server,
    methods: &[crate::config::InitAddr],
    saved: Option<&SrvState>,
) -> Result<Option<SocketAddr>, ConfigError> {
    use crate::config::InitAddr as M;
    let literal = s.host.parse::<std::net::IpAddr>().ok();
    if let Some(ip) = literal {
        return Ok(Some(SocketAddr::new(ip, s.port)));
    }
    for m in methods {
        let a = match m {
            M::Last => saved.and_then(|st| crate::statefile::saved_addr(st, None)),
            M::Libc if !s.srv => resolve(&s.host, s.port),
            M::Libc => None,
            M::None => return Ok(None),
            M::Ip(ip) => Some(SocketAddr::new(*ip, s.port)),
        };
        if a.is_some() {
            return Ok(a);
        }
    }
    Err(err(
        &s.loc,
        format!(
            "server {}: could not resolve address '{}' with init-addr",
            s.name, s.host
        ),
    ))
}

/// Resolves `host:port` once (at start or reload).
fn resolve(host: &str, port: u16) -> Option<SocketAddr> {
    if let Ok(ip) = host.parse::<std::net::IpAddr>() {
        return Some(SocketAddr::new(ip, port));
    }
    (host, port).to_socket_addrs().ok()?.next()
}

/// `dispatch ADDR:PORT` or `option transparent`, as HAProxy 2.6 takes
/// them: with a `balance` line, `dispatch` is ignored (a warning) and
/// `option transparent` refused; without, every connection of the backend
/// goes there (`dispatch` wins over `option transparent`). A backend that
/// also has servers sends HAProxy's cookie-persistent requests to them and
/// the rest there: ebb refuses that mix.
fn backend_target(
    p: &Proxy,
    warnings: &mut Vec<String>,
) -> Result<Option<Arc<crate::backend::ServerRt>>, ConfigError> {
    let (dispatch, transparent) = (p.dispatch.as_ref(), p.transparent.as_ref());
    if p.balance_set {
        if let Some(loc) = transparent {
            return Err(err(
                loc,
                format!(
                    "proxy '{}' cannot use both transparent and balance mode",
                    p.name
                ),
            ));
        }
        if let Some(d) = dispatch {
            warnings.push(format!(
                "{}: dispatch address of proxy '{}' will be ignored in balance mode",
                d.loc, p.name
            ));
        }
        return Ok(None);
    }
    let loc = match (dispatch, transparent) {
        (Some(d), _) => &d.loc,
        (None, Some(l)) => l,
        (None, None) => return Ok(None),
    };
    if !p.servers.is_empty() {
        return Err(err(
            loc,
            format!(
                "'{}' in proxy '{}' which has servers is not supported by ebb (HAProxy would send only cookie-persistent requests to the servers)",
                if dispatch.is_some() { "dispatch" } else { "option transparent" },
                p.name
            ),
        ));
    }
    let addr =
        match dispatch {
            Some(d) => {
                let (host, port) = &d.value;
                Some(resolve(host, *port).ok_or_else(|| {
                    err(&d.loc, format!("dispatch: cannot resolve address '{host}'"))
                })?)
            }
            None => None,
        };
    Ok(Some(crate::backend::backend_target(
        &p.name,
        addr,
        srv_sock(p),
    )))
}

/// A backend's options for its server sockets.
fn srv_sock(p: &Proxy) -> crate::config::SrvSock {
    crate::config::SrvSock {
        tcpka: p.options.srvtcpka,
        nolinger: p.options.nolinger,
        smart_connect: p.options.smart_connect,
        source: p.source.as_ref().map(|s| s.value),
    }
}

/// A backend's `fullconn`: its own, else HAProxy's default, a tenth of
/// the `maxconn` of the frontends that route to it (`default_backend`,
/// or a `use_backend` naming it, each frontend once; a listen without
/// `default_backend` counts for itself), at least 1. A frontend without
/// `maxconn` has the global one; where neither is set HAProxy's default
/// follows its file descriptor limit, so a server with a `minconn` below
/// its `maxconn` there is refused (its limit would be another's).
fn fullconn_of(cfg: &Config, p: &Proxy) -> Result<u32, ConfigError> {
    if let Some(n) = p.fullconn {
        return Ok(n);
    }
    let mut total: u64 = 0;
    let mut unknown = None;
    for fe in cfg.frontends() {
        let reaches = match &fe.default_backend {
            Some(d) => d.value == p.name,
            None => fe.kind == crate::config::ProxyKind::Listen && fe.name == p.name,
        } || fe.use_backends.iter().any(|u| {
            u.dynamic.is_none()
                && u.backend == p.name
                && fe
                    .default_backend
                    .as_ref()
                    .is_none_or(|d| d.value != p.name)
        });
        if reaches {
            match fe.maxconn.or(cfg.global.maxconn) {
                Some(m) => total += u64::from(m),
                None => unknown = unknown.or(Some(&fe.name)),
            }
        }
    }
    let dynamic = p.servers.iter().find(|s| {
        s.opts
            .minconn
            .is_some_and(|mi| s.opts.maxconn.is_some_and(|ma| mi < ma))
    });
    if let (Some(fe), Some(s)) = (unknown, dynamic) {
        return Err(err(
            &s.loc,
            format!(
                "server {}/{}: 'minconn' below 'maxconn' needs the backend's 'fullconn', or a 'maxconn' on frontend '{fe}' (or in global): HAProxy's default there follows its file descriptor limit",
                p.name, s.name
            ),
        ));
    }
    Ok(u32::try_from(total.div_ceil(10)).unwrap_or(u32::MAX).max(1))
}

fn compile_servers(
    p: &Proxy,
    state: Option<&BTreeMap<String, SrvState>>,
    fullconn: u32,
    warnings: &mut Vec<String>,
) -> Result<ServersRt, ConfigError> {
    let mut list = Vec::with_capacity(p.servers.len());
    for s in &p.servers {
        let tls =
            server_tls(&s.opts).map_err(|e| err(&s.loc, format!("server {}: {e}", s.name)))?;
        let saved = state.and_then(|m| m.get(&s.name));
        let addr = match &s.opts.init_addr {
            // An abstract UNIX socket has no IP address.
            _ if s.opts.abns.is_some() => None,
            // HAProxy's default `last,libc` (libc: once, here, at start).
            None => {
                let mut addr = if s.srv {
                    None
                } else {
                    resolve(&s.host, s.port)
                };
                if let Some(st) = saved {
                    // An address changed at run time survives the restart.
                    if let Some(a) = crate::statefile::saved_addr(st, addr) {
                        addr = Some(a);
                    }
                }
                addr
            }
            Some(methods) => init_addr(s, methods, saved)?,
        };
        if addr.is_none() && s.opts.resolvers.is_none() && s.opts.abns.is_none() {
            warnings.push(format!(
                "{}: server {}/{}: cannot resolve '{}': the server stays in maintenance",
                s.loc, p.name, s.name, s.host
            ));
        }
        let mut opts = s.opts.clone();
        opts.sock = srv_sock(p);
        list.push((s.name.clone(), addr, opts, tls));
    }
    let host = p
        .servers
        .first()
        .map(|s| s.host.clone())
        .unwrap_or_default();
    let probe = crate::backend::check::probe_for(p, &host).map_err(|(l, e)| err(l, e))?;
    if p.hash_type.balance_factor > 0 && matches!(p.balance, crate::config::Balance::Random { .. })
    {
        return Err(err(
            &p.loc,
            "'hash-balance-factor' with 'balance random' is not supported by ebb (its random is not HAProxy's consistent-hash random)".to_string(),
        ));
    }
    let mut farm = Farm::new(
        p.name.clone(),
        list,
        crate::l4rules::balance_for_mode(p, warnings),
        p.retries,
        p.options.redispatch,
        p.http_reuse,
        p.http_check.clone(),
    );
    farm.redispatch_after = p.options.redispatch_after;
    farm.retry_on = p.retry_on;
    farm.target = backend_target(p, warnings)?;
    farm.sock = srv_sock(p);
    farm.allbackups = p.options.allbackups;
    farm.fullconn = fullconn;
    farm.set_hash(p.hash_type);
    for (rt, s) in farm.servers.iter().zip(&p.servers) {
        rt.port.store(s.port, std::sync::atomic::Ordering::Relaxed);
        if s.opts.resolvers.is_some() && s.host.parse::<std::net::IpAddr>().is_err() {
            if let Ok(mut g) = rt.fqdn.lock() {
                *g = Some(s.host.clone());
            }
        }
    }
    if let Some(m) = state {
        for s in &farm.servers {
            if let Some(st) = m.get(&s.name) {
                crate::statefile::apply(s, st);
            }
        }
        for name in m.keys() {
            if !farm.servers.iter().any(|s| &s.name == name) {
                warnings.push(format!(
                    "server-state: server {}/{name} is in the state file but no longer in the configuration",
                    p.name
                ));
            }
        }
    }
    let t = &p.timeouts;
    let connect = ms(t.connect).unwrap_or(DEFAULT_CONNECT_MS);
    let server = ms(t.server).unwrap_or(DEFAULT_SERVER_MS);
    Ok(ServersRt {
        farm: Arc::new(farm),
        probe,
        check_timeout: t.check,
        log_checks: p.options.log_health_checks,
        email_alert: p.email_alert.clone(),
        timeouts: BeTimeouts {
            connect,
            server,
            queue: ms(t.queue).unwrap_or(connect),
            tunnel: ms(t.tunnel).unwrap_or(server),
        },
        forwardfor: p.options.forwardfor.clone(),
        originalto: p.options.originalto.clone(),
        server_close: p.options.conn_mode != HttpConnMode::KeepAlive,
        pretend_keepalive: p.options.pretend_keepalive,
        close: p.options.conn_mode == HttpConnMode::Close,
        abort_on_close: p.options.abortonclose,
        cookie: p.cookie.clone().map(|mut c| {
            c.persist = p.options.persist;
            c
        }),
        persist_rules: Vec::new(),
        use_server: Vec::new(),
        persist: p.options.persist,
        send_name: p.send_name_header.clone(),
        max_ka_queue: p.max_keep_alive_queue,
        prefer_last: p.options.prefer_last_server
            && !matches!(
                p.balance,
                crate::config::Balance::Source
                    | crate::config::Balance::Uri { .. }
                    | crate::config::Balance::UrlParam { .. }
                    | crate::config::Balance::Hdr { .. }
            ),
    })
}

/// Default timeouts when a configuration sets none, in ms. HAProxy refuses
/// to guess and warns; a web server must not keep idle connections
/// forever, so ebb uses nginx's defaults: 60 s for client reads/writes and
/// the request head, 75 s keep-alive idle.
pub const DEFAULT_CLIENT_MS: u32 = 60_000;
pub const DEFAULT_KEEPALIVE_MS: u32 = 75_000;

fn ms(d: Option<Duration>) -> Option<u32> {
    d.map(|d| d.as_millis().clamp(1, u32::MAX as u128 / 2) as u32)
}

/// The external checks of backend `p` (`option external-check`), checked
/// as HAProxy 2.6 checks them at start: the global `external-check` and
/// a command are needed, a command without a '/' first needs
/// `external-check path`; without `insecure-fork-wanted` a warning says
/// they will likely fail. `external-check command|path` without the
/// option are ignored with HAProxy's warning.
fn ext_probe(
    cfg: &Config,
    p: &Proxy,
    warnings: &mut Vec<String>,
) -> Result<Option<crate::backend::check::Probe>, ConfigError> {
    let e = &p.ext_check;
    let Some(on) = &e.enabled else {
        for (kw, v) in [("command", &e.command), ("path", &e.path)] {
            if let Some(v) = v {
                warnings.push(format!(
                    "{}: 'external-check {kw}' will be ignored for backend '{}' (requires 'option external-check')",
                    v.loc, p.name
                ));
            }
        }
        return Ok(None);
    };
    if !cfg.global.external_check {
        return Err(err(
            on,
            format!(
                "Proxy '{}' : 'option external-check' unable to find required 'global.external-check'",
                p.name
            ),
        ));
    }
    let Some(command) = &e.command else {
        return Err(err(
            on,
            format!(
                "Proxy '{}' : 'option external-check' unable to find required 'external-check command'",
                p.name
            ),
        ));
    };
    if !command.value.starts_with('/') && e.path.is_none() {
        return Err(err(
            &command.loc,
            format!(
                "Proxy '{}': 'external-check command' does not have a leading '/' and 'external-check path' is not set",
                p.name
            ),
        ));
    }
    if !cfg.global.insecure_fork {
        warnings.push(format!(
            "{on}: Proxy '{}' : 'insecure-fork-wanted' not enabled in the global section, 'option external-check' will likely fail (ebb starts the command only as root without it)",
            p.name
        ));
    }
    // HAProxy's first TCP or UNIX listener of the proxy.
    let (addr, port) = p
        .binds
        .iter()
        .find_map(|b| match b.addrs.first() {
            Some(a) => Some((a.ip().to_string(), a.port().to_string())),
            None => b.sockets.iter().find_map(|s| match s {
                crate::config::SockSpec::Unix(path) => {
                    Some((path.display().to_string(), "NOT_USED".to_string()))
                }
                crate::config::SockSpec::Abns(_) => Some((String::new(), "NOT_USED".to_string())),
                crate::config::SockSpec::Fd(_) => None,
            }),
        })
        .unwrap_or_else(|| ("NOT_USED".to_string(), "NOT_USED".to_string()));
    let t = &p.timeouts;
    Ok(Some(crate::backend::check::Probe::Ext(Arc::new(
        crate::backend::check::ExtProbe {
            command: command.value.clone(),
            path: e.path.as_ref().map(|v| v.value.clone()).unwrap_or_default(),
            proxy_name: p.name.clone(),
            proxy_id: proxy_uuid(cfg, p).to_string(),
            proxy_addr: addr,
            proxy_port: port,
            http: p.mode == crate::config::ProxyMode::Http,
            connect_cap: t.check.and(t.connect),
            fork_wanted: cfg.global.insecure_fork,
        },
    ))))
}

fn err(loc: &Loc, message: impl Into<String>) -> ConfigError {
    ConfigError {
        loc: loc.clone(),
        message: message.into(),
    }
}

/// The cache a `cache-use`/`cache-store` rule names (checked to exist
/// when the configuration was parsed).
fn cache_named(
    caches: &[Arc<crate::httpcache::Cache>],
    n: &str,
) -> Option<Arc<crate::httpcache::Cache>> {
    caches.iter().find(|c| &*c.name == n).cloned()
}

fn compile_req_rules(
    p: &Proxy,
    m: &Matcher,
    caches: &[Arc<crate::httpcache::Cache>],
    tables: &crate::table::Tables,
) -> Result<Vec<ReqRule>, ConfigError> {
    let mut out = Vec::new();
    let scope = Scope::Request {
        backend: p.kind.is_backend(),
    };
    for r in &p.http_request {
        let prepared = match &r.action {
            HttpRequestAction::Return(ret) => {
                Some(Prepared::of(ret, scope).map_err(|e| err(&r.loc, e))?)
            }
            _ => None,
        };
        let cache = match &r.action {
            HttpRequestAction::CacheUse(n) => cache_named(caches, n),
            _ => None,
        };
        let table =
            crate::stick::track_table(&r.action, &p.name, tables).map_err(|e| err(&r.loc, e))?;
        out.push(ReqRule {
            action: r.action.clone(),
            cond: m.opt_cond(r.cond.as_ref())?,
            loc: r.loc.clone(),
            prepared,
            cache,
            table,
        });
    }
    Ok(out)
}

fn compile_resp_rules(
    p: &Proxy,
    m: &Matcher,
    caches: &[Arc<crate::httpcache::Cache>],
) -> Result<Vec<RespRule>, ConfigError> {
    compile_resp_list(&p.http_response, m, caches)
}

fn compile_resp_list(
    rules: &[crate::config::HttpResponseRule],
    m: &Matcher,
    caches: &[Arc<crate::httpcache::Cache>],
) -> Result<Vec<RespRule>, ConfigError> {
    rules
        .iter()
        .map(|r| {
            let prepared = match &r.action {
                HttpResponseAction::Deny(ret) if !matches!(ret.body, ReturnBody::Errorfile(_)) => {
                    Some(Prepared::of(ret, Scope::Response).map_err(|e| err(&r.loc, e))?)
                }
                _ => None,
            };
            Ok(RespRule {
                action: r.action.clone(),
                cond: m.opt_cond_response(r.cond.as_ref())?,
                loc: r.loc.clone(),
                prepared,
                cache: match &r.action {
                    HttpResponseAction::CacheStore(n) => cache_named(caches, n),
                    _ => None,
                },
            })
        })
        .collect()
}

/// Compiles a parsed configuration; returns every error found.
pub fn compile(cfg: &Config) -> Result<Compiled, Vec<ConfigError>> {
    compile_keeping(cfg, None)
}

/// [`compile`], keeping the tables of `prev` (the running configuration)
/// that are shared with peers and declared the same: a reload keeps
/// their entries, as HAProxy's old process teaches them to the new one.
/// The id HAProxy gives a proxy: its `id` line, else the next free id
/// in configuration order (frontends, backends and listens together),
/// from 2 (HAProxy's CLI proxy is 1), skipping the ids set by `id`.
pub fn proxy_uuid(cfg: &Config, p: &crate::config::Proxy) -> usize {
    if let Some(id) = &p.id {
        return id.value as usize;
    }
    // The `disabled` proxies count, as in HAProxy (a proxy disabled for
    // a while does not renumber the others): at their places in the
    // files, between the proxies started.
    let forced: std::collections::HashSet<u32> = cfg
        .proxies
        .iter()
        .filter_map(|x| x.id.as_ref().map(|i| i.value))
        .chain(cfg.disabled_ids.iter().filter_map(|d| d.1))
        .collect();
    let mut off = cfg.disabled_ids.iter().peekable();
    let mut next = 2u32;
    let take = |next: &mut u32| {
        while forced.contains(next) {
            *next += 1;
        }
        *next += 1;
        *next - 1
    };
    for (at, x) in cfg.proxies.iter().enumerate() {
        // The disabled ones declared before this one.
        while let Some(d) = off.next_if(|d| d.0 <= at) {
            if d.1.is_none() {
                take(&mut next);
            }
        }
        if x.id.is_none() {
            let id = take(&mut next);
            if std::ptr::eq(x, p) {
                return id as usize;
            }
        }
    }
    0
}

pub fn compile_keeping(
    cfg: &Config,
    prev: Option<&crate::table::Tables>,
) -> Result<Compiled, Vec<ConfigError>> {
    crate::sample::auth::install(&cfg.userlists);
    crate::config::set_server_verify_default(&cfg.global);
    let mut errors = Vec::new();
    let mut warn = Vec::new();
    let warnings = &mut warn;
    let states = load_states(cfg, warnings);
    // One map for every proxy whose option asks for it.
    let h1_case = (!cfg.global.h1_case.is_empty()).then(|| Arc::new(cfg.global.h1_case.clone()));
    for p in &cfg.proxies {
        warnings.extend(crate::config::unreachable_rules(p));
        warnings.extend(crate::config::mailers::ignored(p));
    }
    let tables = Arc::new(crate::table::Tables::new(
        cfg.stick_tables()
            .map(|t| {
                prev.and_then(|old| old.get(&t.value.name))
                    .filter(|o| t.value.peers.is_some() && *o.def() == t.value)
                    .cloned()
                    .unwrap_or_else(|| Arc::new(crate::table::Table::new(t.value.clone())))
            })
            .collect(),
    ));
    let caches: Vec<Arc<crate::httpcache::Cache>> = cfg
        .caches
        .iter()
        .map(crate::httpcache::Cache::new)
        .collect();
    let mut backends = Vec::new();
    let mut bare_backends = Vec::new();
    let mut names = Vec::new();
    let mut be_comp = Vec::new();
    // The disabled backends frontends may route to come last, in the
    // frontends' lists only (see `Config::stopped`).
    let mut stopped = Vec::new();
    let live = cfg.backends().count();
    for (at, p) in cfg.backends().chain(&cfg.stopped).enumerate() {
        let r = (|| -> Result<BackendRt, ConfigError> {
            let kind = if let Some(sf) = &p.serve_files {
                let mut fc = FilesConfig::new(sf.root.clone());
                fc.index = sf.index.clone();
                fc.listing = sf.listing;
                fc.follow_symlinks = sf.follow_symlinks;
                fc.dotfiles = sf.dotfiles;
                fc.max_age = sf.max_age;
                fc.precompressed = sf.precompressed.clone();
                BackendKind::Files(fc)
            } else if !p.servers.is_empty() || p.dispatch.is_some() || p.transparent.is_some() {
                BackendKind::Servers(Box::new(compile_servers(
                    p,
                    states.get(&p.name),
                    fullconn_of(cfg, p)?,
                    warnings,
                )?))
            } else if p.kind.is_frontend() {
                // A listen section without servers or files: a frontend
                // only. (A backend holding a stick table and no server is
                // a backend like any: frontends may route to it, its rules
                // answer, as HAProxy's.)
                return Err(err(&p.loc, "__frontend_only__"));
            } else {
                // A backend without servers answers 503 until `add server`
                // gives it one (HAProxy accepts it too).
                BackendKind::Servers(Box::new(compile_servers(
                    p,
                    states.get(&p.name),
                    fullconn_of(cfg, p)?,
                    warnings,
                )?))
            };
            let matcher = Matcher::for_proxy(p)?;
            let mut kind = kind;
            let ext = ext_probe(cfg, p, warnings)?;
            if let BackendKind::Servers(sr) = &mut kind {
                if ext.is_some() {
                    sr.probe = ext;
                }
                for (force, c) in &p.persist_rules {
                    sr.persist_rules.push((*force, matcher.cond(c)?));
                }
                for r in &p.use_server {
                    let target = match &r.target {
                        crate::config::UseServerTarget::Name(n) => {
                            let i =
                                p.servers.iter().position(|s| &s.name == n).ok_or_else(|| {
                                    err(&r.loc, format!("no server '{n}' in '{}'", p.name))
                                })?;
                            crate::stick::UseTarget::Server(i)
                        }
                        crate::config::UseServerTarget::Format(f) => {
                            crate::stick::UseTarget::Format(f.clone())
                        }
                    };
                    sr.use_server.push(crate::stick::UseServerRt {
                        target,
                        cond: matcher.cond(&r.cond)?,
                    });
                }
            }
            // A listen section's layer-4 part is compiled (and warned
            // about) once, as its frontend's.
            let l4 = if p.kind.is_frontend() {
                crate::l4rules::TcpRt {
                    tcp_mode: p.mode == crate::config::ProxyMode::Tcp,
                    tunnel: crate::l4rules::tunnel_ms(p),
                    splice: if p.mode == crate::config::ProxyMode::Tcp {
                        p.options.splice
                    } else {
                        0
                    },
                    ..crate::l4rules::response_part(p, &matcher)?
                }
            } else {
                crate::l4rules::compile(p, &matcher, &tables, warnings)?
            };
            // A listen section's rules run once, as its frontend's.
            let (http_request, http_response, after_response) = if p.kind.is_frontend() {
                (Vec::new(), Vec::new(), Vec::new())
            } else {
                (
                    compile_req_rules(p, &matcher, &caches, &tables)?,
                    compile_resp_rules(p, &matcher, &caches)?,
                    compile_resp_list(&p.http_after_response, &matcher, &caches)?,
                )
            };
            let mut stick = Vec::new();
            for r in &p.stick_rules {
                let name = r.table.as_deref().unwrap_or(&p.name);
                let table = tables
                    .get(name)
                    .ok_or_else(|| err(&r.loc, format!("no stick-table named '{name}'")))?;
                stick.push(crate::stick::StickRt {
                    kind: r.kind,
                    pattern: r.pattern.clone(),
                    table: Arc::clone(table),
                    cond: matcher.opt_cond(r.cond.as_ref())?,
                });
            }
            Ok(BackendRt {
                stick,
                stats: if p.kind.is_frontend() {
                    None
                } else {
                    compile_stats(p, &matcher)?
                },
                http: HttpCounters::default(),
                http_request,
                id: NEXT_BACKEND_ID.fetch_add(1, Ordering::Relaxed),
                uuid: proxy_uuid(cfg, p),
                desc: p.description.clone(),
                name: p.name.clone(),
                kind,
                matcher,
                http_response,
                l4,
                after_response,
                h2: Arc::default(),
                buffer_request: p.options.buffer_request,
                http_request_ms: ms(p.timeouts.http_request),
                server_ms: ms(p.timeouts.server),
                tunnel_ms: ms(p.timeouts.tunnel),
                restrict_hdr_names: p.options.restrict_hdr_names,
                h1_case: h1_case.clone().filter(|_| p.options.h1_case_server),
                stopped: p.disabled.is_some(),
            })
        })();
        match r {
            Ok(b) => {
                be_comp.push(&p.compression);
                names.push(p.name.clone());
                match at < live {
                    true => backends.push(Arc::new(b)),
                    false => stopped.push(Arc::new(b)),
                }
            }
            Err(e) if e.message == "__frontend_only__" => bare_backends.push(BareBackend {
                uuid: proxy_uuid(cfg, p),
                name: p.name.clone(),
                tcp_mode: p.mode == crate::config::ProxyMode::Tcp,
            }),
            Err(e) => errors.push(e),
        }
    }
    link_tracks(cfg, &backends);
    let index = |name: &str| names.iter().position(|n| n == name);
    let global_log = !cfg.global.log.is_empty();
    let mut frontends = Vec::new();
    for p in cfg.frontends() {
        let r = (|| -> Result<FrontendRt, ConfigError> {
            let matcher = Matcher::for_proxy(p)?;
            let l4 = crate::l4rules::compile(p, &matcher, &tables, warnings)?;
            let http_request = compile_req_rules(p, &matcher, &caches, &tables)?;
            let http_response = compile_resp_rules(p, &matcher, &caches)?;
            let after_response = compile_resp_list(&p.http_after_response, &matcher, &caches)?;
            let stats = compile_stats(p, &matcher)?;
            let be_cfg = |name: &str| cfg.backends().chain(&cfg.stopped).find(|b| b.name == name);
            let mut use_backends = Vec::new();
            for u in &p.use_backends {
                let i = match &u.dynamic {
                    Some(_) => 0,
                    None => index(&u.backend)
                        .ok_or_else(|| err(&u.loc, format!("unknown backend '{}'", u.backend)))?,
                };
                if let Some(e) =
                    be_cfg(&u.backend).and_then(|b| crate::l4rules::mode_mismatch(p, b, &u.loc))
                {
                    return Err(e);
                }
                use_backends.push(UseBackendRt {
                    index: i,
                    dynamic: u.dynamic.clone(),
                    cond: matcher.opt_cond(u.cond.as_ref())?,
                });
            }
            if let Some(d) = &p.default_backend {
                if let Some(e) =
                    be_cfg(&d.value).and_then(|b| crate::l4rules::mode_mismatch(p, b, &d.loc))
                {
                    return Err(e);
                }
            }
            let default_backend = match &p.default_backend {
                Some(d) => Some(
                    index(&d.value)
                        .ok_or_else(|| err(&d.loc, format!("unknown backend '{}'", d.value)))?,
                ),
                // A listen section is its own default backend.
                None if p.kind.is_backend() => index(&p.name),
                None => None,
            };
            let t = &p.timeouts;
            let client = ms(t.client).unwrap_or(DEFAULT_CLIENT_MS);
            let head_ms = ms(t.http_request).unwrap_or(client);
            let keep_alive = ms(t.http_keep_alive)
                .or(ms(t.http_request))
                .unwrap_or(DEFAULT_KEEPALIVE_MS.max(client));
            let logs = global_log && !p.log.is_empty()
                || p.log
                    .iter()
                    .any(|l| matches!(l, crate::config::ProxyLog::Target(_)));
            let monitor = match &p.monitor_uri {
                Some(u) => Some((
                    u.clone(),
                    p.monitor_fail
                        .iter()
                        .map(|c| matcher.cond(c))
                        .collect::<Result<Vec<_>, _>>()?,
                )),
                None => None,
            };
            Ok(FrontendRt {
                uuid: proxy_uuid(cfg, p),
                name: p.name.clone(),
                desc: p.description.clone(),
                name_arc: Arc::from(p.name.as_str()),
                maxconn: p.maxconn,
                sess_limit: crate::rate::RateLimit::new(p.rate_limit_sessions),
                timeouts: FeTimeouts {
                    http_request: head_ms,
                    keep_alive,
                    client,
                    tarpit: ms(t.tarpit).or(ms(t.connect)).unwrap_or(DEFAULT_CONNECT_MS),
                },
                keep_alive: p.options.conn_mode != HttpConnMode::Close,
                server_close: p.options.conn_mode != HttpConnMode::KeepAlive,
                idle_close_on_response: p.options.idle_close_on_response,
                contstats: p.options.contstats,
                max_session_srv_conns: p.max_session_srv_conns.unwrap_or(5),
                h1_case: h1_case.clone().filter(|_| p.options.h1_case_client),
                abort_on_close: p.options.abortonclose,
                nolinger: p.options.nolinger,
                dontlog_normal: p.options.dontlog_normal,
                log_errors: p.options.log_separate_errors,
                forwardfor: p.options.forwardfor.clone(),
                originalto: p.options.originalto.clone(),
                disable_h2_upgrade: p.options.disable_h2_upgrade,
                dontlognull: p.options.dontlognull,
                ignore_probes: p.options.http_ignore_probes,
                logasap: p.options.logasap,
                buffer_request: p.options.buffer_request,
                client_ms: ms(p.timeouts.client),
                restrict_hdr_names: p.options.restrict_hdr_names,
                matcher,
                http_request,
                http_response,
                after_response,
                log_format: p.log_format.as_ref().map(|l| l.value.clone()),
                log_format_sd: p.log_format_sd.as_ref().map(|l| l.value.clone()),
                error_log_format: p.error_log_format.as_ref().map(|l| l.value.clone()),
                captures: p.captures.clone(),
                txn: crate::config::cookie::FrontTxn::of(p),
                use_backends,
                default_backend,
                errorfiles: p
                    .errorfiles
                    .iter()
                    .map(|e| (e.status, e.content.clone()))
                    .collect(),
                error_replies: p
                    .error_replies
                    .iter()
                    .map(|(s, r)| {
                        let scope = Scope::Request { backend: false };
                        Prepared::of(r, scope)
                            .map(|pr| (*s, pr))
                            .map_err(|e| err(&p.loc, e))
                    })
                    .collect::<Result<_, _>>()?,
                log: logs,
                conns: AtomicU32::new(0),
                backends: backends.iter().chain(&stopped).cloned().collect(),
                comp: be_comp
                    .iter()
                    .map(|b| {
                        let level = cfg.global.comp_maxlevel.unwrap_or(1);
                        merged_compression(&p.compression, b, level).map(Arc::new)
                    })
                    .collect(),
                stats,
                monitor,
                http: HttpCounters::default(),
                sessions: AtomicU64::new(0),
                tables: Arc::clone(&tables),
                l4,
                h2: h2_config(&cfg.global),
                h2_conns: AtomicU32::new(0),
                h2_conns_total: AtomicU64::new(0),
                h2_streams: AtomicU64::new(0),
                listeners: listener_stats(p),
            })
        })();
        match r {
            Ok(f) => frontends.push(Arc::new(f)),
            Err(e) => errors.push(e),
        }
    }
    if errors.is_empty() {
        Ok(Compiled {
            frontends,
            backends,
            bare_backends,
            tables,
            caches,
            warnings: warn,
            // HAProxy's default `node`: the machine's name.
            node: cfg
                .global
                .node
                .clone()
                .unwrap_or_else(|| crate::sample::hostname().to_string()),
            description: cfg.global.description.clone(),
        })
    } else {
        Err(errors)
    }
}

/// The Location of a redirect for a request's target and host; `ctx`
/// (the request's) evaluates a log-format target.
pub fn redirect_location(
    r: &Redirect,
    target: &[u8],
    host: Option<&[u8]>,
    ctx: Option<&crate::sample::Ctx<'_>>,
) -> Vec<u8> {
    let path_q = crate::sample::target_path(target);
    // The path with its query unless `drop-query`.
    let path = match path_q.iter().position(|&c| c == b'?') {
        Some(i) if r.drop_query => &path_q[..i],
        _ => path_q,
    };
    let mut target = Vec::new();
    match (&r.fmt, ctx) {
        (Some(f), Some(c)) => f.render(c, &mut target),
        _ => target.extend_from_slice(r.target.as_bytes()),
    }
    let mut out = Vec::with_capacity(target.len() + path_q.len() + 16);
    match r.kind {
        crate::config::RedirectKind::Location => {
            out.extend_from_slice(&target);
            return out;
        }
        // HAProxy's rule: the prefix as written (a trailing '/' kept),
        // except exactly "/", which inserts nothing (checked side by side).
        crate::config::RedirectKind::Prefix => {
            if target != b"/" {
                out.extend_from_slice(&target);
            }
        }
        crate::config::RedirectKind::Scheme => {
            out.extend_from_slice(&target);
            out.extend_from_slice(b"://");
            // No Host: nothing between "://" and the path, as HAProxy.
            out.extend_from_slice(host.unwrap_or(b""));
        }
    }
    out.extend_from_slice(if path.is_empty() { b"/" } else { path });
    // HAProxy 2.6 appends the slash to the location it built, query
    // included: `/p?n=1` gives `/p?n=1/` (its documentation pairs
    // `append-slash` with `drop-query`).
    if r.append_slash && !out.is_empty() && !out.ends_with(b"/") {
        out.push(b'/');
    }
    out
}

/// The answer of an `http-request return`: status, content type, body.
pub fn return_body(r: &ReturnAction) -> &[u8] {
    match &r.body {
        ReturnBody::None => b"",
        ReturnBody::String(s) => s.as_bytes(),
        ReturnBody::LfString(f) => f.as_literal().unwrap_or(b""),
        ReturnBody::File { content, .. } => content,
        ReturnBody::Errorfile(_) => b"",
    }
}

/// One proxy's `compression` settings merged with another's as HAProxy
/// merges a frontend's with its backend's: the backend's `algo` list wins
/// when it has one, likewise `type`, `algo-req` and `type-req`; `offload`
/// in either holds; the directions add up (HAProxy ORs the two proxies'
/// flags). `None` when nothing is to be done (no algorithm and no
/// offload for answers, no `algo-req` for requests).
/// (Here, not in `compress`: the codec knows no configuration.)
/// `minsize-res` likewise (the backend's when it sets one).
pub fn merged_compression(
    fe: &crate::config::Compression,
    be: &crate::config::Compression,
    level: u32,
) -> Option<crate::compress::Policy> {
    fn pick<T: Clone>(b: &[T], f: &[T]) -> Vec<T> {
        if b.is_empty() { f } else { b }.to_vec()
    }
    let ((fq, fs), (bq, bs)) = (fe.directions(), be.directions());
    let (req, res) = (fq || bq, fs || bs);
    let algos = if res {
        pick(&be.algos, &fe.algos)
    } else {
        Vec::new()
    };
    // (HAProxy strips Accept-Encoding only while choosing an answer's
    // coding, which it does only for the response direction.)
    let offload = res && (fe.offload || be.offload);
    let algo_req = be.algo_req.or(fe.algo_req).filter(|_| req);
    if algos.is_empty() && !offload && algo_req.is_none() {
        return None;
    }
    Some(crate::compress::Policy {
        algos,
        types: pick(&be.types, &fe.types),
        offload,
        level,
        min_size: be.minsize_res.or(fe.minsize_res).unwrap_or(0),
        request_only: !res,
        algo_req,
        types_req: pick(&be.types_req, &fe.types_req),
    })
}

/// Links each `track` server to the server it tracks (the configuration
/// checked that it exists), then gives the trackers their starting
/// state, down the chains.
fn link_tracks(cfg: &Config, backends: &[Arc<BackendRt>]) {
    let farm_of = |name: &str| {
        backends.iter().find_map(|b| match &b.kind {
            BackendKind::Servers(sr) if b.name == name => Some(Arc::clone(&sr.farm)),
            _ => None,
        })
    };
    let mut roots = Vec::new();
    for p in cfg.backends() {
        let Some(farm) = farm_of(&p.name) else {
            continue;
        };
        for s in &p.servers {
            let Some(spec) = &s.opts.track else { continue };
            let (bname, sname) = spec.rsplit_once('/').unwrap_or((&p.name, spec));
            let Some(tf) = farm_of(bname) else { continue };
            let find = |f: &Farm, n: &str| f.servers.iter().find(|x| x.name == n).cloned();
            if let (Some(me), Some(t)) = (find(&farm, &s.name), find(&tf, sname)) {
                crate::backend::link_track(&farm, &me, &t);
                roots.push(t);
            }
        }
    }
    for r in roots.iter().filter(|r| r.tracked.get().is_none()) {
        crate::backend::start_trackers(r);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::{parse_str, RedirectKind};

    fn redirect(
        kind: RedirectKind,
        target: &str,
        drop_query: bool,
        append_slash: bool,
    ) -> Redirect {
        Redirect {
            kind,
            target: target.into(),
            fmt: None,
            code: 302,
            drop_query,
            append_slash,
            cookie: None,
            late: false,
        }
    }

    #[test]
    fn a_prepared_answer_keeps_checked_fields_and_refuses_unsendable_ones() {
        let scope = Scope::Request { backend: false };
        let ret = |headers: &[(&str, &str)]| ReturnAction {
            status: 200,
            content_type: Some("text/plain".into()),
            body: ReturnBody::String("hi".into()),
            headers: headers
                .iter()
                .map(|(n, v)| (n.to_string(), v.to_string()))
                .collect(),
            deny: false,
        };
        // All literal: built once; the type is kept apart (it follows the
        // `hdr` fields, and only with a body).
        let p = Prepared::of(&ret(&[("X-A", "1"), ("X-B", "")]), scope).unwrap();
        let fields: Vec<_> = p.fields.fields().iter().collect();
        assert_eq!(fields, [(&b"X-A"[..], &b"1"[..])]);
        assert!(p.dyn_hdrs.is_empty());
        assert_eq!(p.content_type.as_deref(), Some(&b"text/plain"[..]));
        assert_eq!(p.body, b"hi");
        // One log-format value: every field is evaluated, in order.
        let p = Prepared::of(&ret(&[("X-A", "1"), ("X-Src", "%[src]")]), scope).unwrap();
        assert!(p.fields.fields().is_empty());
        let names: Vec<_> = p.dyn_hdrs.iter().map(|e| e.name.as_str()).collect();
        assert_eq!(names, ["X-A", "X-Src"]);
        // A name that is not a token could split the answer: refused at
        // start, whether its value is literal or a log-format string (the
        // latter used to be written as it was, per request).
        assert!(Prepared::of(&ret(&[("X A", "1")]), scope).is_err());
        assert!(Prepared::of(&ret(&[("X A", "%[src]")]), scope).is_err());
    }

    #[test]
    fn redirect_locations() {
        let loc = redirect(RedirectKind::Location, "https://x/", false, false);
        assert_eq!(redirect_location(&loc, b"/a?b", None, None), b"https://x/");
        let pre = redirect(RedirectKind::Prefix, "https://new.example", false, false);
        assert_eq!(
            redirect_location(&pre, b"/a?b=1", None, None),
            b"https://new.example/a?b=1"
        );
        let pre = redirect(RedirectKind::Prefix, "/v2/", true, true);
        assert_eq!(redirect_location(&pre, b"/a?b=1", None, None), b"/v2//a/");
        let root = redirect(RedirectKind::Prefix, "/", false, false);
        assert_eq!(redirect_location(&root, b"/a", None, None), b"/a");
        let sch = redirect(RedirectKind::Scheme, "https", false, false);
        assert_eq!(
            redirect_location(&sch, b"/p?q", Some(b"h.example:8080"), None),
            b"https://h.example:8080/p?q"
        );
        // HAProxy 2.6: the slash goes after the query; no Host, no host.
        let pre = redirect(RedirectKind::Prefix, "/pre", false, true);
        assert_eq!(
            redirect_location(&pre, b"/p?n=12", None, None),
            b"/pre/p?n=12/"
        );
        let sch = redirect(RedirectKind::Scheme, "https", false, true);
        assert_eq!(
            redirect_location(&sch, b"/p?n=1", None, None),
            b"https:///p?n=1/"
        );
        // The path of an absolute target (HAProxy's http_parse_path).
        let pre = redirect(RedirectKind::Prefix, "/pre", false, false);
        assert_eq!(
            redirect_location(&pre, b"http://u@n:81/x?y", None, None),
            b"/pre/x?y"
        );
        assert_eq!(redirect_location(&pre, b"http://n", None, None), b"/pre/");
        assert_eq!(redirect_location(&pre, b"foo/bar", None, None), b"/pre/");
    }

    #[test]
    fn compile_resolves_backends_and_refuses_what_is_not_supported() {
        let ok = "defaults\n mode http\nfrontend f\n bind :8080\n acl s path_beg /s\n use_backend b if s\n default_backend b\nbackend b\n serve-files /tmp\n";
        let c = compile(&parse_str("ok.cfg", ok).unwrap()).unwrap();
        assert_eq!(c.frontends.len(), 1);
        assert_eq!(c.frontends[0].default_backend, Some(0));
        assert_eq!(c.frontends[0].timeouts.client, DEFAULT_CLIENT_MS);

        let srv = "defaults\n mode http\nfrontend f\n bind :8080\n default_backend b\nbackend b\n server s1 127.0.0.1:9 ssl ca-file /nonexistent/ca.pem\n";
        let e = compile(&parse_str("srv.cfg", srv).unwrap()).err().unwrap();
        assert!(
            e[0].to_string().starts_with("srv.cfg:7: server s1:"),
            "{}",
            e[0]
        );

        let lf = "frontend f\n mode http\n bind :8080\n http-request return status 200 content-type text/plain lf-string \"%[path]\"\n";
        assert!(compile(&parse_str("lf.cfg", lf).unwrap()).is_ok());
        let lf = "frontend f\n mode http\n bind :8080\n http-request return status 200 content-type text/plain lf-string \"%[nope]\"\n";
        let e = parse_str("lf.cfg", lf).err().unwrap();
        assert!(e[0].to_string().starts_with("lf.cfg:4:"), "{}", e[0]);
    }

    #[test]
    fn timeouts_follow_haproxy_fallbacks() {
        let t = "defaults\n timeout client 5s\n timeout http-request 2s\nfrontend f\n bind :8080\n";
        let c = compile(&parse_str("t.cfg", t).unwrap()).unwrap();
        let to = c.frontends[0].timeouts;
        assert_eq!(
            (to.client, to.http_request, to.keep_alive),
            (5000, 2000, 2000)
        );
    }

    #[test]
    fn a_backend_list_wins_over_its_frontend() {
        use crate::compress::Coding::{self, *};
        use crate::config::Compression as C;
        let t = |v: &[&str]| v.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        let c = |algos: &[Coding], types: &[&str], offload, min: Option<u64>| C {
            algos: algos.to_vec(),
            types: t(types),
            offload,
            minsize_res: min,
            ..C::default()
        };
        let fe = c(&[Gzip], &["text/"], false, Some(9));
        let p = merged_compression(&fe, &c(&[Br], &[], false, None), 1).unwrap();
        assert_eq!(
            (p.algos, p.types, p.offload, p.min_size),
            (vec![Br], t(&["text/"]), false, 9)
        );
        let p = merged_compression(&fe, &c(&[], &["a/b"], true, Some(5)), 1).unwrap();
        assert_eq!(
            (p.algos, p.types, p.offload, p.min_size),
            (vec![Gzip], t(&["a/b"]), true, 5)
        );
        assert!(merged_compression(&c(&[], &["x"], false, None), &C::default(), 1).is_none());
    }

    #[test]
    fn directions_add_up_across_frontend_and_backend() {
        use crate::compress::Coding::*;
        use crate::config::Compression as C;
        let req_only = C {
            algos: vec![Gzip],
            algo_req: Some(Br),
            direction: Some((true, false)),
            offload: true,
            ..C::default()
        };
        // Requests only: no answer coding, no offload, the request coding.
        let p = merged_compression(&req_only, &C::default(), 1).unwrap();
        assert!(p.request_only && p.algos.is_empty() && !p.offload);
        assert_eq!(p.algo_req, Some(Br));
        // A backend with any compression line adds the response side
        // (HAProxy ORs the directions of both proxies).
        let be = C {
            types: vec!["text/".into()],
            ..C::default()
        };
        let p = merged_compression(&req_only, &be, 1).unwrap();
        assert!(!p.request_only && p.offload);
        assert_eq!((p.algos, p.algo_req), (vec![Gzip], Some(Br)));
        // `algo-req` without the request direction does nothing.
        let res_only = C {
            algo_req: Some(Gzip),
            ..C::default()
        };
        assert!(merged_compression(&res_only, &C::default(), 1).is_none());
    }
}
