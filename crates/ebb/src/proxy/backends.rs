//! A backend compiled ([`BackendRt`]): what it does with its requests
//! ([`BackendKind`]: files served, [`FilesConfig`], or servers proxied to,
//! [`ServersRt`]), its rules, counters and server-side timeouts.

use std::sync::Arc;
use std::time::Duration;

use crate::backend::Farm;
use crate::config::ForwardFor;
use crate::rules::{Cond, Matcher};

use super::counters::{H2Counters, HttpCounters};
use super::rules::{ReqRule, RespRule};
use super::stats::StatsRt;

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
    /// `timeout connect` when `timeout check` is set (HAProxy's bound on
    /// a check's connect then).
    pub check_connect_cap: Option<Duration>,
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
    /// `use-fcgi-app`: the application of its `proto fcgi` servers.
    pub fcgi: Option<Arc<super::FcgiRt>>,
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
    /// `option checkcache`: see [`crate::backend::cookie::blocks_cacheable_cookie`].
    pub checkcache: bool,
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
    /// `option accept-invalid-http-response`: an answer the strict parser
    /// refuses is read again as HAProxy's option reads it.
    pub accept_invalid: bool,
    /// The last invalid answer of its servers (`show errors`).
    pub invalid_rep: super::errors::Capture,
    /// A `disabled` backend a frontend routes to (`Config::stopped`): as
    /// HAProxy never sets one up, no analyser of its runs, and a request
    /// routed there is logged without its request time (TR -1).
    pub stopped: bool,
    /// Streams entering it per second (`be_sess_rate`).
    pub rates: super::state::Rates,
}
