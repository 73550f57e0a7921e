//! Section and keyword parsing: lines in, typed [`Config`] out.
//!
//! One [`Parser`] reads every file in order. A section runs from its header
//! to the next header or the end of its file. Each keyword handler returns a
//! message on error; the dispatcher adds `file:line` and carries on with the
//! next line, so one run reports every error. Cross-checks that need the
//! whole configuration (backend names, binds, duplicates) run at the end.

mod bind;
mod checks;
mod finish;
mod global;
mod log;
mod options;
mod reply;
mod rules;
mod server;
mod tls;
mod userlist;

pub use bind::parse_sock_spec;
pub(super) use rules::{is_shared_action, request_scope, shared_action};
pub(super) use server::no_check_port;
pub use server::{agent_addr, parse_dynamic_server};

use std::path::{Path, PathBuf};
use std::sync::Arc;

use super::acl::parse_condition;
use super::lexer::{tokenize, EnvLookup, LinePos};
use super::types::*;
use super::values::*;
use crate::sample::{Expr, LogFormat as LfFormat, Scope};
use bind::parse_bind;
use checks::http_check_kw;
use global::check_node_name;
use log::parse_log_target;
use options::{parse_tcpka_param, proxy_option};
use reply::{errorfile_code, parse_reply, read_errorfile, set_errorfile, static_reply};
use rules::{http_response_kw, parse_http_request, parse_redirect};
use server::{nonzero_time, parse_server_opts, server_kw};
use userlist::userlist_kw;

/// Capabilities, as HAProxy's `PR_CAP_FE` / `PR_CAP_BE`.
const FE: u8 = 1;
const BE: u8 = 2;

/// Where relative file names point (`default-path`, HAProxy 2.4+).
#[derive(Clone, Debug)]
enum DefaultPath {
    /// The process's working directory (HAProxy's default).
    Current,
    /// The directory of the configuration file being read.
    Config,
    /// The parent of that directory.
    Parent,
    /// A fixed directory.
    Origin(PathBuf),
}

/// What the lines being read belong to.
enum Section {
    None,
    Global,
    Defaults {
        name: Option<String>,
    },
    Proxy(usize),
    /// A `resolvers` section (index in `Parser::resolvers`).
    Resolvers(usize),
    /// A `peers` section (index in `Parser::peers`).
    Peers(usize),
    /// A `cache` section (index in `Parser::caches`).
    Cache(usize),
    /// An `http-errors` section (index in `Parser::http_errors`).
    HttpErrors(usize),
    /// A `userlist` section (index in `Parser::userlists`).
    Userlist(usize),
    /// An `fcgi-app` section (index in `Parser::fcgi_apps`).
    FcgiApp(usize),
    /// A `program` section (index in `Parser::programs`).
    Program(usize),
    /// A section ebb does not implement; its header got one error and its
    /// body is skipped (reporting every line would bury the real message).
    Unsupported,
}

/// The part of the parser state keyword handlers may read while a proxy is
/// borrowed mutably.
struct Ctx<'a> {
    loc: &'a Loc,
    default_path: &'a DefaultPath,
    /// `crt-base`, `ca-base`, `ssl-default-bind-*` from `global`.
    tls: &'a TlsDefaults,
    /// Capabilities of the section: FE, BE or both.
    caps: u8,
    defaults: bool,
    /// An anonymous `defaults` section (HAProxy refuses `tcp-request` and
    /// `tcp-response` there).
    anon_defaults: bool,
    section_name: &'static str,
    /// The `http-errors` sections declared so far (`errorfiles NAME`).
    http_errors: &'a [HttpErrorsSection],
    /// A named defaults section (rules are allowed there, HAProxy 2.5+).
    named_defaults: bool,
    /// `expose-experimental-directives` came before in `global`.
    experimental: bool,
}

impl Ctx<'_> {
    /// `http-request`, `http-response`, `http-after-response`: in proxies
    /// and in named defaults sections (whose rules run before those of the
    /// proxies using them, HAProxy 2.5+), not in anonymous ones.
    fn allow_rules(&self, kw: &str) -> Result<(), String> {
        if self.defaults && !self.named_defaults {
            return Err(format!(
                "'{kw}' rules are only allowed in a named defaults section, not an anonymous one"
            ));
        }
        self.allow(kw, FE | BE, true)
    }

    /// Checks that `kw` belongs in this section.
    fn allow(&self, kw: &str, caps: u8, in_defaults: bool) -> Result<(), String> {
        if self.defaults {
            if in_defaults {
                return Ok(());
            }
            return Err(format!("'{kw}' is not allowed in a 'defaults' section"));
        }
        if self.caps & caps == 0 {
            let applies = if caps == FE { "frontends" } else { "backends" };
            return Err(format!(
                "'{kw}' is not allowed in a '{}' section (it applies to {applies})",
                self.section_name
            ));
        }
        Ok(())
    }

    fn resolve(&self, p: &str) -> PathBuf {
        let path = Path::new(p);
        if path.is_absolute() {
            return path.to_path_buf();
        }
        match self.default_path {
            DefaultPath::Current => path.to_path_buf(),
            DefaultPath::Config => Path::new(&*self.loc.file)
                .parent()
                .map(|d| d.join(path))
                .unwrap_or_else(|| path.to_path_buf()),
            DefaultPath::Parent => Path::new(&*self.loc.file)
                .parent()
                .map(|d| d.join("..").join(path))
                .unwrap_or_else(|| Path::new("..").join(path)),
            DefaultPath::Origin(dir) => dir.join(path),
        }
    }
}

/// What `global` sets for the TLS lines that follow it (HAProxy applies
/// these when it parses a `bind ... ssl` line, so they must come first).
#[derive(Default)]
struct TlsDefaults {
    crt_base: Option<PathBuf>,
    ca_base: Option<PathBuf>,
    /// `ssl-default-bind-ciphers`, `-ciphersuites`, `-curves`, `-options`.
    bind: BindSsl,
    /// `ssl-default-server-ciphers`, `-ciphersuites`, `-options`.
    server: ServerTlsPolicy,
}

pub(crate) struct Parser<'e> {
    tls: TlsDefaults,
    /// `expose-experimental-directives` was read (HAProxy refuses its
    /// experimental keywords, `normalize-uri`, without it, before it).
    experimental: bool,
    env: EnvLookup<'e>,
    errors: Vec<ConfigError>,
    global: Global,
    proxies: Vec<Proxy>,
    /// The current anonymous defaults, inherited by the proxies that follow.
    defaults: Proxy,
    named_defaults: Vec<(String, Proxy)>,
    section: Section,
    default_path: DefaultPath,
    /// Proxies (by index) with a `bind` line in error: no "has no bind"
    /// error is added for them, it would only repeat the first one.
    bad_binds: Vec<usize>,
    /// Stick tables the rules name: (table, line), checked at the end.
    table_refs: Vec<(String, Loc)>,
    /// Proxies and servers the count fetches name (`srv_conn(be/s)`...),
    /// checked once every section is read.
    proxy_refs: Vec<(crate::sample::Count, String, Option<String>, Loc)>,
    resolvers: Vec<Resolvers>,
    peers: Vec<super::peers::PeersSection>,
    caches: Vec<CacheSection>,
    http_errors: Vec<HttpErrorsSection>,
    userlists: Vec<crate::sample::auth::Userlist>,
    /// Userlists the fetches name (`http_auth(L)`), checked at the end.
    userlist_refs: Vec<(String, Loc)>,
    /// `fcgi-app` sections (syntax-checked only).
    fcgi_apps: Vec<super::fcgi::FcgiApp>,
    programs: Vec<Program>,
    /// Defaults sections defining `tcp-request`/`tcp-response` rules (by
    /// header line) and the kind of proxy that first used each one.
    rule_defaults: Vec<(Loc, ProxyKind)>,
}

fn new_proxy(name: &str, kind: ProxyKind, loc: Loc) -> Proxy {
    Proxy {
        name: name.to_string(),
        kind,
        loc,
        maxconn: None,
        backlog: None,
        id: None,
        description: None,
        source: None,
        timeouts: Timeouts::default(),
        options: ProxyOptions::default(),
        log: Vec::new(),
        binds: Vec::new(),
        acls: Vec::new(),
        http_request: Vec::new(),
        http_response: Vec::new(),
        http_after_response: Vec::new(),
        log_format: None,
        captures: Vec::new(),
        use_backends: Vec::new(),
        default_backend: None,
        errorfiles: Vec::new(),
        error_replies: Vec::new(),
        stats: Stats::default(),
        balance: Balance::RoundRobin,
        balance_set: false,
        dispatch: None,
        transparent: None,
        hash_type: HashType::default(),
        retries: 3,
        http_reuse: HttpReuse::Safe,
        default_server: ServerOptions::default(),
        servers: Vec::new(),
        serve_files: None,
        monitor_uri: None,
        monitor_fail: Vec::new(),
        http_check: HttpCheck {
            enabled: false,
            send_state: false,
            method: "OPTIONS".to_string(),
            uri: "/".to_string(),
            version: "HTTP/1.0".to_string(),
            headers: Vec::new(),
            body: None,
            uri_lf: false,
            body_lf: false,
            explicit_send: false,
            own: true,
            rules: Vec::new(),
        },
        tcp_check: Default::default(),
        load_server_state: None,
        stick_table: None,
        stick_rules: Vec::new(),
        compression: Compression::default(),
        mode: ProxyMode::Tcp,
        tcp_request: Vec::new(),
        inspect_delay: None,
        tcp_response: Vec::new(),
        res_inspect_delay: None,
        cookie: None,
        persist_rules: Vec::new(),
        use_server: Vec::new(),
        capture_cookie: None,
        unique_id_format: None,
        unique_id_header: None,
    }
}

/// Whether a defaults section defines rules (`tcp-request`,
/// `tcp-response`, `http-request`, `http-response`,
/// `http-after-response`; its `inspect-delay`s are plain settings): they
/// run before those of each proxy using it, so HAProxy limits its users
/// ([`Parser::check_rule_defaults`]).
fn has_rules(d: &Proxy) -> bool {
    !d.tcp_request.is_empty()
        || !d.tcp_response.is_empty()
        || !d.http_request.is_empty()
        || !d.http_response.is_empty()
        || !d.http_after_response.is_empty()
}

fn fresh_defaults() -> Proxy {
    new_proxy(
        "",
        ProxyKind::Listen,
        Loc {
            file: Arc::from(""),
            line: 0,
        },
    )
}

/// Keywords of proxy sections, for "did you mean" hints.
const PROXY_KEYWORDS: &[&str] = &[
    "stick-table",
    "stick",
    "mode",
    "timeout",
    "maxconn",
    "option",
    "log",
    "bind",
    "default_backend",
    "use_backend",
    "acl",
    "http-request",
    "redirect",
    "http-response",
    "errorfile",
    "errorfiles",
    "http-error",
    "errorloc",
    "errorloc302",
    "errorloc303",
    "backlog",
    "id",
    "description",
    "source",
    "stats",
    "balance",
    "dispatch",
    "retries",
    "http-reuse",
    "default-server",
    "server",
    "http-check",
    "load-server-state-from-file",
    "serve-files",
    "compression",
    "hash-type",
    "hash-balance-factor",
    "clitcpka-idle",
    "clitcpka-intvl",
    "clitcpka-cnt",
    "srvtcpka-idle",
    "srvtcpka-intvl",
    "srvtcpka-cnt",
    "tcp-request",
    "tcp-response",
    "tcp-check",
    "cookie",
    "unique-id-format",
    "unique-id-header",
    "monitor-uri",
    "monitor",
    "force-persist",
    "ignore-persist",
];

/// HAProxy proxy keywords ebb does not implement.
const HAPROXY_PROXY_UNSUPPORTED: &[&str] = &[
    "fullconn",
    "http-send-name-header",
    "filter",
    "log-format-sd",
    "error-log-format",
    "log-tag",
    "disabled",
    "enabled",
    "rate-limit",
    "email-alert",
    "server-state-file-name",
    "external-check",
    "grace",
    "max-keep-alive-queue",
    "max-session-srv-conns",
];

const UNSUPPORTED_SECTIONS: &[&str] = &[
    "ring",
    "mailers",
    "log-forward",
    "crt-store",
    "traces",
    "acme",
];

impl<'e> Parser<'e> {
    pub(crate) fn new(env: EnvLookup<'e>) -> Self {
        crate::environ::reset();
        Parser {
            env,
            errors: Vec::new(),
            global: Global::default(),
            proxies: Vec::new(),
            defaults: fresh_defaults(),
            named_defaults: Vec::new(),
            rule_defaults: Vec::new(),
            section: Section::None,
            default_path: DefaultPath::Current,
            bad_binds: Vec::new(),
            table_refs: Vec::new(),
            proxy_refs: Vec::new(),
            resolvers: Vec::new(),
            tls: TlsDefaults::default(),
            experimental: false,
            peers: Vec::new(),
            caches: Vec::new(),
            http_errors: Vec::new(),
            userlists: Vec::new(),
            userlist_refs: Vec::new(),
            fcgi_apps: Vec::new(),
            programs: Vec::new(),
        }
    }

    pub(crate) fn error(&mut self, loc: Loc, message: impl Into<String>) {
        self.errors.push(ConfigError {
            loc,
            message: message.into(),
        });
    }

    /// Parses one file's text.
    pub(crate) fn parse_text(&mut self, file: &str, text: &str) {
        let file: Arc<str> = Arc::from(file);
        for (idx, raw) in text.split('\n').enumerate() {
            let line = u32::try_from(idx + 1).unwrap_or(u32::MAX);
            let loc = Loc {
                file: file.clone(),
                line,
            };
            let pos = LinePos { file: &file, line };
            let base = self.env;
            let env = |n: &str| crate::environ::lookup(n, base);
            let words = match tokenize(raw, &env, &pos) {
                Ok(w) => w,
                Err(e) => {
                    self.error(loc, e);
                    continue;
                }
            };
            if words.is_empty() {
                continue;
            }
            let raw = words.iter().any(|w| crate::rawword::has_raw(w));
            let errors = self.errors.len();
            crate::sample::take_raw_claims();
            self.line(&words, loc.clone());
            // Bytes that are not UTF-8 must have gone where the sample
            // engine reads them as bytes.
            let claims = crate::sample::take_raw_claims();
            if raw
                && self.errors.len() == errors
                && words
                    .iter()
                    .any(|w| crate::rawword::has_raw(w) && !claims.iter().any(|c| c == w))
            {
                self.error(
                    loc,
                    "bytes that are not UTF-8 (\\xHH) are only supported in str() arguments and log-format text",
                );
            }
        }
        // Sections end with their file.
        self.close_section();
    }

    fn close_section(&mut self) {
        if let Section::Defaults { name: Some(name) } = &self.section {
            let name = name.clone();
            let d = self.defaults.clone();
            match self.named_defaults.iter_mut().find(|(n, _)| *n == name) {
                Some(slot) => slot.1 = d,
                None => self.named_defaults.push((name, d)),
            }
        }
        self.section = Section::None;
    }

    fn line(&mut self, words: &[String], loc: Loc) {
        let kw = words[0].as_str();
        match kw {
            "global" | "defaults" | "frontend" | "backend" | "listen" | "resolvers" => {
                self.close_section();
                if let Err(e) = self.section_header(words, &loc) {
                    // A header too broken to open its section: skip the body
                    // rather than report each of its lines as out of section.
                    if let Section::None = self.section {
                        self.section = Section::Unsupported;
                    }
                    self.error(loc, e);
                }
                return;
            }
            "peers" => {
                self.close_section();
                self.section = Section::Unsupported;
                match words.get(1) {
                    Some(n) if words.len() == 2 && valid_name(n) => {
                        self.peers
                            .push(super::peers::PeersSection::new(n, loc.clone()));
                        self.section = Section::Peers(self.peers.len() - 1);
                    }
                    Some(n) if words.len() == 2 => {
                        self.error(loc, format!("invalid peers section name '{n}'"))
                    }
                    Some(_) => self.error(loc, "'peers' takes one name"),
                    None => self.error(loc, "'peers' needs a name"),
                }
                return;
            }
            "http-errors" => {
                self.close_section();
                self.section = Section::Unsupported;
                match words {
                    [_, n] if valid_name(n) => {
                        if let Some(o) = self.http_errors.iter().find(|s| &s.name == n) {
                            let m =
                                format!("http-errors section '{n}' already declared at {}", o.loc);
                            self.error(loc, m);
                        } else {
                            self.http_errors.push(HttpErrorsSection {
                                name: n.clone(),
                                files: Vec::new(),
                                loc: loc.clone(),
                            });
                            self.section = Section::HttpErrors(self.http_errors.len() - 1);
                        }
                    }
                    [_, n] => self.error(loc, format!("invalid http-errors section name '{n}'")),
                    _ => self.error(loc, "'http-errors' takes one name"),
                }
                return;
            }
            "userlist" => {
                self.close_section();
                self.section = Section::Unsupported;
                match words {
                    [_, n] if valid_name(n) => {
                        if self.userlists.iter().any(|u| &u.name == n) {
                            self.error(loc, format!("userlist '{n}' already declared"));
                        } else {
                            self.userlists.push(crate::sample::auth::Userlist {
                                name: n.clone(),
                                groups: Vec::new(),
                                users: Vec::new(),
                            });
                            self.section = Section::Userlist(self.userlists.len() - 1);
                        }
                    }
                    [_, n] => self.error(loc, format!("invalid userlist name '{n}'")),
                    _ => self.error(loc, "'userlist' takes one name"),
                }
                return;
            }
            "cache" => {
                self.close_section();
                self.section = Section::Unsupported;
                match super::cache::open(&self.caches, words, &loc) {
                    Ok(c) => {
                        self.caches.push(c);
                        self.section = Section::Cache(self.caches.len() - 1);
                    }
                    Err(e) => self.error(loc, e),
                }
                return;
            }
            "program" => {
                self.close_section();
                self.section = Section::Unsupported;
                match super::program::open(&self.programs, words, &loc) {
                    Ok(p) => {
                        self.programs.push(p);
                        self.section = Section::Program(self.programs.len() - 1);
                    }
                    Err(e) => self.error(loc, e),
                }
                return;
            }
            "fcgi-app" => {
                self.close_section();
                self.section = Section::Unsupported;
                match super::fcgi::open(&self.fcgi_apps, words, &loc) {
                    Ok(a) => {
                        self.fcgi_apps.push(a);
                        self.section = Section::FcgiApp(self.fcgi_apps.len() - 1);
                    }
                    Err(e) => self.error(loc, e),
                }
                return;
            }
            _ if UNSUPPORTED_SECTIONS.contains(&kw) => {
                self.close_section();
                self.section = Section::Unsupported;
                self.error(loc, format!("section '{kw}' is not supported by ebb"));
                return;
            }
            _ => {}
        }
        let _ = crate::sample::take_refs();
        let result = match self.section {
            Section::None => Err(format!(
                "unknown keyword '{kw}' out of section (expected global, defaults, frontend, backend or listen)"
            )),
            Section::Unsupported => Ok(()),
            Section::Global => self.global_kw(words, &loc),
            Section::Resolvers(i) => match self.resolvers.get_mut(i) {
                Some(r) => super::resolvers::resolvers_kw(r, words, &loc),
                None => Ok(()),
            },
            Section::Peers(i) => match self.peers.get_mut(i) {
                Some(s) => super::peers::peers_kw(s, words, &loc),
                None => Ok(()),
            },
            Section::HttpErrors(i) => self.http_errors_kw(i, words, &loc),
            Section::Userlist(i) => match self.userlists.get_mut(i) {
                Some(u) => userlist_kw(u, words),
                None => Ok(()),
            },
            Section::Cache(i) => match self.caches.get_mut(i) {
                Some(c) => super::cache::cache_kw(c, words),
                None => Ok(()),
            },
            Section::Program(i) => match self.programs.get_mut(i) {
                Some(p) => super::program::program_kw(p, words),
                None => Ok(()),
            },
            Section::FcgiApp(i) => match self.fcgi_apps.get_mut(i) {
                Some(a) => {
                    let target = |t: &[String]| parse_log_target(t, &loc).map(|_| ());
                    super::fcgi::fcgi_kw(a, words, &loc, &target)
                }
                None => Ok(()),
            },
            Section::Defaults { ref name } => {
                let named_defaults = name.is_some();
                let ctx = Ctx {
                    loc: &loc,
                    default_path: &self.default_path,
                    tls: &self.tls,
                    caps: FE | BE,
                    defaults: true,
                    anon_defaults: matches!(self.section, Section::Defaults { name: None }),
                    section_name: "defaults",
                    http_errors: &self.http_errors,
                    named_defaults,
                    experimental: self.experimental,
                };
                proxy_kw(&mut self.defaults, &ctx, words)
            }
            Section::Proxy(i) => match self.proxies.get_mut(i) {
                Some(px) => {
                    let caps = match px.kind {
                        ProxyKind::Frontend => FE,
                        ProxyKind::Backend => BE,
                        ProxyKind::Listen => FE | BE,
                    };
                    let ctx = Ctx {
                        loc: &loc,
                        default_path: &self.default_path,
                        tls: &self.tls,
                        caps,
                        defaults: false,
                        anon_defaults: false,
                        section_name: px.kind.name(),
                        http_errors: &self.http_errors,
                        named_defaults: false,
                        experimental: self.experimental,
                    };
                    proxy_kw(px, &ctx, words)
                }
                None => Ok(()),
            },
        };
        let own = match self.section {
            Section::Proxy(i) => self.proxies.get(i).map(|p| p.name.clone()),
            _ => None,
        };
        let in_defaults = matches!(self.section, Section::Defaults { .. });
        let mut result = result;
        for (what, proxy, server) in crate::sample::take_proxy_refs() {
            if in_defaults && proxy.is_none() && server.is_some() && result.is_ok() {
                // HAProxy: a server argument must name its backend there.
                let f = if what == crate::sample::Count::SrvSessRate {
                    "srv_sess_rate"
                } else {
                    "srv_conn"
                };
                result = Err(format!(
                    "in a 'defaults' section, '{f}' must name the server's backend ('backend/{}')",
                    server.as_deref().unwrap_or_default()
                ));
            }
            if let Some(p) = proxy.or_else(|| server.as_ref().and_then(|_| own.clone())) {
                self.proxy_refs.push((what, p, server, loc.clone()));
            }
        }
        for u in crate::sample::auth::take_userlist_refs() {
            self.userlist_refs.push((u, loc.clone()));
        }
        for r in crate::sample::take_refs() {
            if r.is_none() && in_defaults && result.is_ok() {
                // HAProxy resolves it against the defaults section, which
                // has no table.
                result = Err(
                    "a 'defaults' section has no stick table: name one with 'table NAME' (or the fetch's table argument)"
                        .to_string(),
                );
            }
            if let Some(name) = r.or_else(|| own.clone()) {
                self.table_refs.push((name, loc.clone()));
            }
        }
        if let Err(e) = result {
            if let Section::Proxy(i) = self.section {
                if kw == "bind" {
                    self.bad_binds.push(i);
                }
            }
            self.error(loc, e);
        }
    }

    fn section_header(&mut self, words: &[String], loc: &Loc) -> Result<(), String> {
        let kw = words[0].as_str();
        match kw {
            "global" => {
                self.section = Section::Global;
                if words.len() > 1 {
                    return Err("'global' takes no argument".to_string());
                }
                Ok(())
            }
            "resolvers" => {
                let Some(name) = words.get(1).filter(|n| valid_name(n)) else {
                    self.section = Section::Unsupported;
                    return Err("'resolvers' needs a valid name".to_string());
                };
                if words.len() > 2 {
                    self.section = Section::Unsupported;
                    return Err(format!("'resolvers {name}' takes no other argument"));
                }
                if let Some(r) = self.resolvers.iter().find(|r| &r.name == name) {
                    self.section = Section::Unsupported;
                    return Err(format!(
                        "resolvers section '{name}' already declared at {}",
                        r.loc
                    ));
                }
                self.resolvers.push(Resolvers::new(name, loc.clone()));
                self.section = Section::Resolvers(self.resolvers.len() - 1);
                Ok(())
            }
            "defaults" => {
                let mut rest = &words[1..];
                let mut name = None;
                if let Some(n) = rest.first() {
                    if n != "from" {
                        if !valid_name(n) {
                            return Err(format!("invalid defaults name '{n}'"));
                        }
                        name = Some(n.clone());
                        rest = &rest[1..];
                    }
                }
                // Each defaults section starts afresh (or from `from NAME`).
                let base = self.take_from(rest)?;
                if let Some(d) = base.as_ref().filter(|d| has_rules(d)) {
                    return Err(format!(
                        "a defaults section cannot inherit from a defaults section defining rules (defaults section at {})",
                        d.loc
                    ));
                }
                self.defaults = base.unwrap_or_else(fresh_defaults);
                // Health check rules of a section's own start a new set.
                self.defaults.http_check.own = false;
                self.defaults.loc = loc.clone();
                self.section = Section::Defaults { name };
                Ok(())
            }
            _ => {
                let kind = match kw {
                    "frontend" => ProxyKind::Frontend,
                    "backend" => ProxyKind::Backend,
                    _ => ProxyKind::Listen,
                };
                let Some(name) = words.get(1) else {
                    self.section = Section::Unsupported;
                    return Err(format!("'{kw}' needs a name"));
                };
                if !valid_name(name) {
                    self.section = Section::Unsupported;
                    return Err(format!(
                        "invalid {kw} name '{name}' (letters, digits, '-', '_', '.' and ':' only)"
                    ));
                }
                let mut rest = &words[2..];
                // Legacy `listen NAME ADDR:PORT`: the address is a bind line.
                let mut legacy_bind = None;
                if let Some(a) = rest.first() {
                    if a != "from" {
                        legacy_bind = Some(a.clone());
                        rest = &rest[1..];
                    }
                }
                let base = match self.take_from(rest) {
                    Ok(b) => b,
                    Err(e) => {
                        self.section = Section::Unsupported;
                        return Err(e);
                    }
                };
                let mut px = base.unwrap_or_else(|| self.defaults.clone());
                // Health check rules of a section's own start a new set.
                px.http_check.own = false;
                let inherited = self.check_rule_defaults(&px, kind);
                px.name = name.clone();
                px.kind = kind;
                px.loc = loc.clone();
                self.proxies.push(px);
                let idx = self.proxies.len() - 1;
                self.section = Section::Proxy(idx);
                inherited?;
                if let Some(addr) = legacy_bind {
                    if !kind.is_frontend() {
                        return Err(format!("unexpected argument '{addr}' after backend name"));
                    }
                    let addrs = match parse_bind_addrs(&addr) {
                        Ok(a) => a,
                        Err(e) => {
                            self.bad_binds.push(idx);
                            return Err(e);
                        }
                    };
                    if let Some(px) = self.proxies.get_mut(idx) {
                        px.binds.push(Bind {
                            addrs,
                            name: None,
                            nice: 0,
                            v6only: None,
                            ssl: None,
                            loc: loc.clone(),
                            sockets: Vec::new(),
                            unix_mode: None,
                            unix_owner: (None, None),
                            backlog: None,
                            accept_proxy: false,
                            defer_accept: false,
                            proto_h2: false,
                        });
                    }
                }
                Ok(())
            }
        }
    }

    /// HAProxy's checks on a proxy taking its settings from a defaults
    /// section `d` that defines `tcp-request`/`tcp-response` rules: no
    /// listen section, not frontends and backends both, no connection or
    /// session rules for a backend, no response rules for a frontend.
    fn check_rule_defaults(&mut self, d: &Proxy, kind: ProxyKind) -> Result<(), String> {
        if !has_rules(d) {
            return Ok(());
        }
        let at = &d.loc;
        if kind == ProxyKind::Listen {
            return Err(format!(
                "a listen section cannot inherit from a defaults section defining rules (defaults section at {at})"
            ));
        }
        if let Some((_, k)) = self.rule_defaults.iter().find(|(l, _)| l == at) {
            if *k != kind {
                return Err(format!(
                    "frontends and backends cannot inherit from the same defaults section if it defines rules (defaults section at {at})"
                ));
            }
        }
        let early = d.tcp_request.iter().any(|r| r.when != TcpWhen::Content);
        if kind == ProxyKind::Backend && early {
            return Err(format!(
                "a backend section cannot inherit from a defaults section defining 'tcp-request connection' or 'tcp-request session' rules (defaults section at {at})"
            ));
        }
        if kind == ProxyKind::Frontend && !d.tcp_response.is_empty() {
            return Err(format!(
                "a frontend section cannot inherit from a defaults section defining 'tcp-response content' rules (defaults section at {at})"
            ));
        }
        if !self.rule_defaults.iter().any(|(l, _)| l == at) {
            self.rule_defaults.push((at.clone(), kind));
        }
        Ok(())
    }

    /// Handles an optional `from NAME` at the end of a section header.
    fn take_from(&self, rest: &[String]) -> Result<Option<Proxy>, String> {
        match rest {
            [] => Ok(None),
            [f, name] if f == "from" => self
                .named_defaults
                .iter()
                .find(|(n, _)| n == name)
                .map(|(_, d)| Some(d.clone()))
                .ok_or_else(|| format!("unknown defaults section '{name}' after 'from'")),
            [f] if f == "from" => Err("'from' needs the name of a defaults section".to_string()),
            [x, ..] => Err(format!("unexpected argument '{x}' in section header")),
        }
    }
}

/// Splits rule arguments from a trailing `if|unless COND`.
pub(super) fn split_cond(w: &[String]) -> (&[String], Option<(bool, &[String])>) {
    match w.iter().position(|x| x == "if" || x == "unless") {
        Some(i) => (&w[..i], Some((w[i] == "unless", &w[i + 1..]))),
        None => (w, None),
    }
}

pub(super) fn cond_of(
    c: Option<(bool, &[String])>,
    px: &Proxy,
    loc: &Loc,
) -> Result<Option<Condition>, String> {
    match c {
        None => Ok(None),
        Some((unless, words)) => parse_condition(unless, words, &px.acls, loc).map(Some),
    }
}

/// The value of `kw` at `w[i]`, or an error naming it.
fn arg<'a>(w: &'a [String], i: usize, kw: &str) -> Result<&'a str, String> {
    w.get(i)
        .map(String::as_str)
        .ok_or_else(|| format!("'{kw}' expects an argument"))
}

fn proxy_kw(px: &mut Proxy, ctx: &Ctx<'_>, words: &[String]) -> Result<(), String> {
    let (no, w) = if words[0] == "no" {
        if words.len() < 2 {
            return Err("'no' expects a keyword".to_string());
        }
        (true, &words[1..])
    } else {
        (false, words)
    };
    let kw = w[0].as_str();
    if no && kw != "option" && kw != "log" {
        return Err(format!("'no {kw}' is not supported"));
    }
    let loc = ctx.loc;
    match kw {
        "mode" => {
            ctx.allow(kw, FE | BE, true)?;
            match arg(w, 1, kw)? {
                "http" | "tcp" if w.len() > 2 => {
                    return Err("'mode' expects exactly one argument".to_string())
                }
                "http" => px.mode = ProxyMode::Http,
                "tcp" => px.mode = ProxyMode::Tcp,
                m => return Err(format!("unknown mode '{m}' (expected http or tcp)")),
            }
        }
        "timeout" => {
            let which = arg(w, 1, kw)?;
            let caps = match which {
                "client" => FE,
                "server" | "connect" | "queue" | "tunnel" | "check" => BE,
                "http-request" | "http-keep-alive" | "tarpit" => FE | BE,
                o => {
                    return Err(format!(
                        "unknown timeout '{o}' (supported: client, server, connect, http-request, http-keep-alive, queue, tunnel, check, tarpit)"
                    ))
                }
            };
            ctx.allow(&format!("timeout {which}"), caps, true)?;
            let v = arg(w, 2, &format!("timeout {which}"))?;
            if w.len() > 3 {
                return Err(format!("'timeout {which}' expects exactly one argument"));
            }
            let d = parse_time(v)?;
            // A zero timeout means "none", as in HAProxy.
            let d = if d.is_zero() { None } else { Some(d) };
            let t = &mut px.timeouts;
            match which {
                "client" => t.client = d,
                "server" => t.server = d,
                "connect" => t.connect = d,
                "queue" => t.queue = d,
                "tunnel" => t.tunnel = d,
                "check" => t.check = d,
                "http-request" => t.http_request = d,
                "tarpit" => t.tarpit = d,
                _ => t.http_keep_alive = d,
            }
        }
        "maxconn" => {
            ctx.allow(kw, FE, true)?;
            if w.len() != 2 {
                return Err("'maxconn' expects exactly one argument".to_string());
            }
            px.maxconn = Some(parse_u32_range(kw, &w[1], 1, u32::MAX)?);
        }
        "option" => proxy_option(px, ctx, no, w)?,
        "log" => {
            ctx.allow(kw, FE | BE, true)?;
            if no {
                if w.len() > 1 {
                    return Err("'no log' takes no argument".to_string());
                }
                px.log.clear();
            } else if w.get(1).map(String::as_str) == Some("global") {
                if w.len() > 2 {
                    return Err("'log global' takes no argument".to_string());
                }
                px.log.push(ProxyLog::Global);
            } else {
                px.log
                    .push(ProxyLog::Target(parse_log_target(&w[1..], loc)?));
            }
        }
        "bind" => {
            ctx.allow(kw, FE, false)?;
            let b = parse_bind(&w[1..], ctx)?;
            px.binds.push(b);
        }
        "default_backend" => {
            ctx.allow(kw, FE, true)?;
            if w.len() != 2 {
                return Err("'default_backend' expects a backend name".to_string());
            }
            px.default_backend = Some(Spanned {
                value: w[1].clone(),
                loc: loc.clone(),
            });
        }
        "use-fcgi-app" => {
            return Err(
                "'use-fcgi-app' is not supported: ebb has no FastCGI client (fcgi-app sections are only syntax-checked)"
                    .to_string(),
            )
        }
        "use_backend" => {
            ctx.allow(kw, FE, false)?;
            let (args, c) = split_cond(&w[1..]);
            let name = match args {
                [n] => n.clone(),
                [] => return Err("'use_backend' expects a backend name".to_string()),
                _ => {
                    return Err(
                        "'use_backend' expects a backend name then 'if' or 'unless'".to_string()
                    )
                }
            };
            // HAProxy: a name with a log-format sequence is dynamic.
            let dynamic = if name.contains('%') {
                Some(LfFormat::parse(&name, Scope::Request { backend: false })?)
            } else {
                None
            };
            let cond = cond_of(c, px, loc)?;
            px.use_backends.push(UseBackend {
                backend: name,
                dynamic,
                cond,
                loc: loc.clone(),
            });
        }
        "acl" => {
            ctx.allow(kw, FE | BE, false)?;
            let name = arg(w, 1, kw)?;
            super::acl::declare(&mut px.acls, name, &w[2..], loc)?;
        }
        "tcp-request" | "tcp-response" => {
            let which = w.get(1).map_or("", String::as_str);
            let caps = match (kw, which) {
                ("tcp-response", _) => BE,
                (_, "connection" | "session") => FE,
                _ => FE | BE,
            };
            // HAProxy 2.5+: in named defaults sections only; the rules
            // run before the inheriting proxy's own.
            ctx.allow(kw, caps, true)?;
            if ctx.anon_defaults {
                return Err(format!(
                    "'{kw} {which}' is not allowed in anonymous 'defaults' sections (name the section, as HAProxy requires)"
                ));
            }
            if kw == "tcp-request" {
                super::tcpreq::parse(px, &w[1..], loc)?;
            } else {
                super::tcpreq::parse_response(px, &w[1..], loc)?;
            }
        }
        "http-request" => {
            ctx.allow_rules(kw)?;
            let rule = parse_http_request(px, ctx, &w[1..])?;
            px.http_request.push(rule);
        }
        "redirect" => {
            ctx.allow(kw, FE | BE, false)?;
            let (args, c) = split_cond(&w[1..]);
            let r = parse_redirect(args, request_scope(px))?;
            let cond = cond_of(c, px, loc)?;
            px.http_request.push(HttpRequestRule {
                action: HttpRequestAction::Redirect(r),
                cond,
                loc: loc.clone(),
            });
        }
        "cookie" => {
            ctx.allow(kw, BE, true)?;
            px.cookie = Some(super::cookie::parse(&w[1..])?);
        }
        "use-server" => {
            ctx.allow(kw, BE, false)?;
            let Some(name) = w.get(1).filter(|n| !n.is_empty()) else {
                return Err("'use-server' expects a server name".to_string());
            };
            let (args, c) = split_cond(&w[2..]);
            if !args.is_empty() || c.is_none() {
                return Err(
                    "'use-server' requires either 'if' or 'unless' followed by a condition"
                        .to_string(),
                );
            }
            let cond =
                cond_of(c, px, ctx.loc)?.ok_or("'use-server' needs a condition".to_string())?;
            // A name with `%` is a log-format string (HAProxy keeps a
            // string that is text only as a plain name).
            let scope = crate::sample::Scope::Request { backend: true };
            let f = crate::sample::LogFormat::parse(name, scope)?;
            let target = match f.as_text() {
                Some(t) => UseServerTarget::Name(t),
                None => UseServerTarget::Format(f),
            };
            px.use_server.push(UseServer {
                target,
                cond,
                loc: ctx.loc.clone(),
            });
        }
        "force-persist" | "ignore-persist" => {
            // HAProxy evaluates the backend's rules only.
            ctx.allow(kw, BE, false)?;
            let (args, c) = split_cond(&w[1..]);
            if !args.is_empty() || c.is_none() {
                return Err(format!("'{kw}' expects 'if' or 'unless' and a condition"));
            }
            let cond =
                cond_of(c, px, ctx.loc)?.ok_or_else(|| format!("'{kw}' needs a condition"))?;
            px.persist_rules.push((kw == "force-persist", cond));
        }
        "unique-id-format" => {
            ctx.allow(kw, FE, true)?;
            let [_, f] = w else {
                return Err("'unique-id-format' expects one format string (quote it)".to_string());
            };
            let scope = crate::sample::Scope::Request { backend: false };
            px.unique_id_format = Some(crate::sample::LogFormat::parse(f, scope)?);
        }
        "monitor-uri" => {
            ctx.allow(kw, FE, true)?;
            let [_, u] = w else {
                return Err("'monitor-uri' expects an URI".to_string());
            };
            px.monitor_uri = Some(u.clone());
        }
        "monitor" => {
            ctx.allow(kw, FE, false)?;
            let (args, c) = split_cond(&w[1..]);
            if args != ["fail"] || c.is_none() {
                return Err(
                    "'monitor' expects 'fail' followed by 'if' or 'unless' and a condition"
                        .to_string(),
                );
            }
            let cond = cond_of(c, px, ctx.loc)?.ok_or("'monitor fail' needs a condition")?;
            px.monitor_fail.push(cond);
        }
        "unique-id-header" => {
            ctx.allow(kw, FE, true)?;
            let [_, h] = w else {
                return Err("'unique-id-header' expects a header name".to_string());
            };
            if !crate::net::is_token(h) {
                return Err(format!("'unique-id-header': invalid header name '{h}'"));
            }
            px.unique_id_header = Some(h.clone());
        }
        "log-format" => {
            ctx.allow(kw, FE, true)?;
            let [_, f] = w else {
                return Err("'log-format' expects one format string (quote it)".to_string());
            };
            let l = crate::sample::logline::LogLine::parse(f)?;
            px.log_format = Some(Spanned {
                value: l,
                loc: loc.clone(),
            });
        }
        "capture" => {
            ctx.allow(kw, FE, false)?;
            let (response, name, len) = match &w[1..] {
                [side, h, name, l, n] if h == "header" && l == "len" => {
                    let response = match side.as_str() {
                        "request" => false,
                        "response" => true,
                        o => {
                            return Err(format!(
                                "'capture {o}': expected 'capture request header' or 'capture response header'"
                            ))
                        }
                    };
                    (
                        response,
                        name,
                        parse_u32_range("capture len", n, 1, 65_536)?,
                    )
                }
                [c, name, l, n] if c == "cookie" && l == "len" => {
                    if px.capture_cookie.is_some() {
                        return Err("only one 'capture cookie' is allowed per frontend".to_string());
                    }
                    px.capture_cookie = Some(super::cookie::CaptureCookie {
                        name: name.clone(),
                        len: parse_u32_range("capture cookie len", n, 1, 65_536)? as usize,
                    });
                    return Ok(());
                }
                _ => return Err(
                    "'capture' expects 'request header NAME len N' or 'response header NAME len N'"
                        .to_string(),
                ),
            };
            if !crate::net::is_token(name) {
                return Err(format!("'capture': invalid header name '{name}'"));
            }
            px.captures.push(crate::sample::logline::CaptureHdr {
                response,
                name: Some(name.to_ascii_lowercase()),
                len: len as usize,
            });
        }
        "declare" => {
            ctx.allow(kw, FE, false)?;
            let [_, c, side, l, n] = w else {
                return Err("'declare' expects 'capture request|response len N'".to_string());
            };
            if c != "capture" || l != "len" {
                return Err("'declare' expects 'capture request|response len N'".to_string());
            }
            let response = match side.as_str() {
                "request" => false,
                "response" => true,
                o => {
                    return Err(format!(
                        "'declare capture {o}': expected request or response"
                    ))
                }
            };
            px.captures.push(crate::sample::logline::CaptureHdr {
                response,
                name: None,
                len: parse_u32_range("declare capture len", n, 1, 65_536)? as usize,
            });
        }
        "http-response" | "http-after-response" => http_response_kw(px, ctx, kw, w)?,
        "errorfile" => {
            ctx.allow(kw, FE | BE, true)?;
            let [_, code, file] = w else {
                return Err("'errorfile' expects CODE FILE".to_string());
            };
            let e = read_errorfile(ctx, code, file)?;
            px.error_replies.retain(|(s, _)| *s != e.status);
            set_errorfile(&mut px.errorfiles, e);
        }
        "http-error" => {
            ctx.allow(kw, FE | BE, true)?;
            if w.get(1).map(String::as_str) != Some("status") {
                return Err("'http-error' expects 'status CODE' first".to_string());
            }
            let code = arg(w, 2, "http-error status")?;
            let status = errorfile_code("http-error", code)?;
            let r = parse_reply("http-error", &w[1..], ctx, request_scope(px), false)?;
            px.error_replies.retain(|(s, _)| *s != status);
            match &r.body {
                ReturnBody::Errorfile(Some(raw)) => set_errorfile(
                    &mut px.errorfiles,
                    ErrorFile {
                        status,
                        path: PathBuf::new(),
                        content: raw.clone(),
                        loc: ctx.loc.clone(),
                    },
                ),
                // The proxy's errorfile for the status goes: ebb's page.
                ReturnBody::Errorfile(None) => px.errorfiles.retain(|e| e.status != status),
                _ => match static_reply(&r) {
                    Some(raw) => set_errorfile(
                        &mut px.errorfiles,
                        ErrorFile {
                            status,
                            path: PathBuf::new(),
                            content: raw,
                            loc: ctx.loc.clone(),
                        },
                    ),
                    None => {
                        px.errorfiles.retain(|e| e.status != status);
                        px.error_replies.push((status, r));
                    }
                },
            }
        }
        "source" => {
            ctx.allow(kw, BE, true)?;
            let Some(a) = w.get(1) else {
                return Err("'source' expects <addr>[:<port>] as argument".to_string());
            };
            match w.get(2).map(String::as_str) {
                None => {}
                Some("usesrc") => {
                    return Err("'source ... usesrc' (connecting from the client's or another foreign address) is not supported by ebb".to_string())
                }
                Some("interface") => {
                    return Err("'source ... interface' is not supported by ebb".to_string())
                }
                Some(x) => return Err(format!("unexpected argument '{x}' after 'source {a}'")),
            }
            if a.rsplit(':').next().is_some_and(|p| p.contains('-')) {
                return Err(format!(
                    "'source {a}': port ranges are not supported by ebb"
                ));
            }
            let (host, port) = parse_server_addr(a)?;
            let ip: std::net::IpAddr = host
                .trim_start_matches('[')
                .trim_end_matches(']')
                .parse()
                .map_err(|_| format!("'source' expects an IP address, not '{host}'"))?;
            px.source = Some(Spanned {
                value: std::net::SocketAddr::new(ip, port),
                loc: ctx.loc.clone(),
            });
        }
        "backlog" => {
            ctx.allow(kw, FE, true)?;
            let [_, n] = w else {
                return Err("'backlog' expects an integer argument".to_string());
            };
            // 0: the default, as HAProxy's unset value.
            let n: u32 = n
                .parse()
                .ok()
                .filter(|n| i32::try_from(*n).is_ok())
                .ok_or_else(|| format!("'backlog' expects an integer argument, not '{n}'"))?;
            px.backlog = (n > 0).then_some(n);
        }
        "id" => {
            if ctx.defaults {
                return Err("'id' not allowed in 'defaults' section".to_string());
            }
            let [_, n] = w else {
                return Err("'id' expects an integer argument".to_string());
            };
            let n: u32 = n
                .parse()
                .ok()
                .filter(|n| *n > 0 && i32::try_from(*n).is_ok())
                .ok_or_else(|| format!("custom id has to be > 0 (not '{n}')"))?;
            px.id = Some(Spanned {
                value: n,
                loc: ctx.loc.clone(),
            });
        }
        "description" => {
            if ctx.defaults {
                return Err("'description' not allowed in 'defaults' section".to_string());
            }
            if w.len() < 2 {
                return Err("'description' expects a string argument".to_string());
            }
            // HAProxy joins the words with one space.
            px.description = Some(w[1..].join(" "));
        }
        "errorloc" | "errorloc302" | "errorloc303" => {
            ctx.allow(kw, FE | BE, true)?;
            let [_, code, url] = w else {
                return Err(format!("'{kw}' expects <status_code> and <url> as arguments"));
            };
            let status = errorfile_code(kw, code)?;
            if url.is_empty() || url.bytes().any(|b| b.is_ascii_control()) {
                return Err(format!(
                    "'{kw}': the URL must be a non-empty field value without control characters"
                ));
            }
            // HAProxy's answer (http_htx.c): a redirect with no body and
            // no caching, in place of the status ebb would send.
            let what = if kw == "errorloc303" {
                "303 See Other"
            } else {
                "302 Found"
            };
            let content = format!(
                "HTTP/1.1 {what}\r\nCache-Control: no-cache\r\nContent-length: 0\r\nLocation: {url}\r\n\r\n"
            );
            px.error_replies.retain(|(s, _)| *s != status);
            set_errorfile(
                &mut px.errorfiles,
                ErrorFile {
                    status,
                    path: PathBuf::new(),
                    content: content.into_bytes(),
                    loc: ctx.loc.clone(),
                },
            );
        }
        "errorfiles" => {
            ctx.allow(kw, FE | BE, true)?;
            let Some(name) = w.get(1) else {
                return Err("'errorfiles' expects the name of an http-errors section".to_string());
            };
            let Some(sec) = ctx.http_errors.iter().find(|s| &s.name == name) else {
                return Err(format!(
                    "'errorfiles {name}': no http-errors section '{name}' declared before this line"
                ));
            };
            let mut codes = Vec::new();
            for c in &w[2..] {
                codes.push(errorfile_code("errorfiles", c)?);
            }
            for e in &sec.files {
                if codes.is_empty() || codes.contains(&e.status) {
                    px.error_replies.retain(|(s, _)| *s != e.status);
                    set_errorfile(&mut px.errorfiles, e.clone());
                }
            }
        }
        "stats" => parse_stats(px, ctx, w)?,
        "balance" => {
            ctx.allow(kw, BE, true)?;
            px.balance = parse_balance(&w[1..])?;
            px.balance_set = true;
        }
        "dispatch" => {
            if ctx.defaults {
                return Err("'dispatch' is not allowed in a 'defaults' section".to_string());
            }
            ctx.allow(kw, BE, false)?;
            let [_, a] = w else {
                return Err("'dispatch' expects exactly one argument: ADDR:PORT".to_string());
            };
            px.dispatch = Some(Spanned {
                value: super::values::parse_host_port(a)?,
                loc: ctx.loc.clone(),
            });
        }
        "hash-type" => {
            ctx.allow(kw, BE, true)?;
            let bf = px.hash_type.balance_factor;
            px.hash_type = parse_hash_type(&w[1..])?;
            px.hash_type.balance_factor = bf;
        }
        "hash-balance-factor" => {
            ctx.allow(kw, BE, true)?;
            let n = arg(w, 1, "hash-balance-factor")?;
            let f: u32 = n
                .parse()
                .map_err(|_| format!("'hash-balance-factor' expects a number, not '{n}'"))?;
            if f != 0 && f <= 100 {
                return Err("'hash-balance-factor' must be 0 or greater than 100.".to_string());
            }
            if let Some(x) = w.get(2) {
                return Err(format!(
                    "unexpected argument '{x}' after 'hash-balance-factor'"
                ));
            }
            px.hash_type.balance_factor = f;
        }
        "retries" => {
            ctx.allow(kw, BE, true)?;
            if w.len() != 2 {
                return Err("'retries' expects exactly one argument".to_string());
            }
            // HAProxy accepts any count; more than 100 is surely a mistake.
            px.retries = parse_u32_range(kw, &w[1], 0, 100)?;
        }
        "http-reuse" => {
            ctx.allow(kw, BE, true)?;
            px.http_reuse = match w {
                [_, m] => match m.as_str() {
                    "never" => HttpReuse::Never,
                    "safe" => HttpReuse::Safe,
                    "aggressive" => HttpReuse::Aggressive,
                    "always" => HttpReuse::Always,
                    o => {
                        return Err(format!(
                            "unknown 'http-reuse' mode '{o}' (expected never, safe, aggressive or always)"
                        ))
                    }
                },
                _ => return Err("'http-reuse' expects exactly one argument".to_string()),
            };
        }
        "default-server" => {
            ctx.allow(kw, BE, true)?;
            parse_server_opts(&w[1..], &mut px.default_server, ctx)?;
            if px.default_server.id.take().is_some() {
                // HAProxy's keyword table: `id` is not for default-server.
                return Err("'id' option is not accepted in default-server sections (HAProxy's alert)".into());
            }
        }
        "server" => server_kw(px, ctx, kw, w)?,
        "server-template" => {
            ctx.allow(kw, BE, false)?;
            let mut opts = px.default_server.clone();
            parse_server_opts(w.get(4..).unwrap_or(&[]), &mut opts, ctx)?;
            let slots = super::resolvers::server_template(w, opts, loc)?;
            for s in &slots {
                if px.servers.iter().any(|x| x.name == s.name) {
                    return Err(format!(
                        "server-template: server '{}' already exists",
                        s.name
                    ));
                }
            }
            px.servers.extend(slots);
        }
        "tcp-check" => {
            ctx.allow(kw, BE, true)?;
            super::tcpcheck::parse(&mut px.tcp_check, &w[1..], loc)?;
        }
        "http-check" => {
            ctx.allow(kw, BE, true)?;
            http_check_kw(px, w, loc)?;
        }
        "load-server-state-from-file" => {
            ctx.allow(kw, BE, true)?;
            let v = match w {
                [_, m] => match m.as_str() {
                    "global" => LoadServerState::Global,
                    "local" => LoadServerState::Local,
                    "none" => LoadServerState::None,
                    o => {
                        return Err(format!(
                            "'load-server-state-from-file' expects global, local or none, got '{o}'"
                        ))
                    }
                },
                _ => {
                    return Err(
                        "'load-server-state-from-file' expects global, local or none".to_string(),
                    )
                }
            };
            px.load_server_state = Some(Spanned {
                value: v,
                loc: loc.clone(),
            });
        }
        "stick-table" => {
            ctx.allow(kw, FE | BE, false)?;
            let words: Vec<&str> = w[1..].iter().map(String::as_str).collect();
            let def = crate::table::parse_stick_table(&px.name, &words).map_err(|e| e.0)?;
            if let Some(t) = &px.stick_table {
                return Err(format!(
                    "only one 'stick-table' per proxy (the first is at {})",
                    t.loc
                ));
            }
            px.stick_table = Some(Spanned {
                value: def,
                loc: ctx.loc.clone(),
            });
        }
        "stick" => {
            ctx.allow(kw, BE, false)?;
            let (args, c) = split_cond(&w[1..]);
            let kind = match args.first().map(String::as_str) {
                Some("on") => StickKind::On,
                Some("match") => StickKind::Match,
                Some("store-request") => StickKind::StoreRequest,
                Some("store-response") => StickKind::StoreResponse,
                _ => {
                    return Err(
                        "'stick' expects on, match, store-request or store-response".to_string()
                    )
                }
            };
            let (pat, table) = match &args[1..] {
                [p] => (p, None),
                [p, t, name] if t == "table" => (p, Some(name.clone())),
                _ => {
                    return Err(format!(
                        "'stick {}' expects a pattern and an optional 'table NAME'",
                        args[0]
                    ))
                }
            };
            let scope = if kind == StickKind::StoreResponse {
                Scope::Response
            } else {
                Scope::Request { backend: true }
            };
            let pattern =
                Expr::parse(pat, scope).map_err(|e| format!("'stick {}': {e}", args[0]))?;
            crate::sample::note_table_ref(table.clone());
            let cond = cond_of(c, px, ctx.loc)?;
            px.stick_rules.push(StickRule {
                kind,
                pattern,
                table,
                cond,
                loc: ctx.loc.clone(),
            });
        }
        "compression" => {
            ctx.allow(kw, FE | BE, true)?;
            parse_compression(&mut px.compression, ctx, &w[1..])?;
        }
        "clitcpka-idle" | "clitcpka-intvl" | "clitcpka-cnt" | "srvtcpka-idle"
        | "srvtcpka-intvl" | "srvtcpka-cnt" => {
            let cli = kw.starts_with("cli");
            ctx.allow(kw, if cli { FE } else { BE }, true)?;
            let [_, v] = w else {
                return Err(format!("'{kw}' expects one value"));
            };
            let ka = if cli {
                &mut px.options.clitcpka
            } else {
                &mut px.options.srvtcpka
            };
            parse_tcpka_param(ka, &kw[9..], kw, v)?;
        }
        "serve-files" => {
            ctx.allow(kw, BE, false)?;
            px.serve_files = Some(parse_serve_files(&w[1..], ctx)?);
        }
        _ if HAPROXY_PROXY_UNSUPPORTED.contains(&kw) => {
            return Err(format!("HAProxy keyword '{kw}' is not supported by ebb"))
        }
        _ => {
            return Err(format!(
                "unknown keyword '{kw}' in '{}' section{}",
                ctx.section_name,
                suggest(kw, PROXY_KEYWORDS)
            ))
        }
    }
    Ok(())
}

/// The `http-request` rules after an unconditional final one (return,
/// redirect, deny, allow, use-service...) of the same section: they never
/// run. HAProxy 2.6 warns at each (cfgparse-listen.c: "previous '...'
/// action is final and has no condition attached, further entries are
/// NOOP") and keeps them; ebb does the same (a warning at start).
pub fn unreachable_rules(px: &Proxy) -> Vec<String> {
    let is_final = |r: &HttpRequestRule| {
        r.cond.is_none()
            && !matches!(
                r.action,
                HttpRequestAction::Header(_)
                    | HttpRequestAction::Var(_)
                    | HttpRequestAction::TrackSc { .. }
                    | HttpRequestAction::ScIncGpc0(_)
                    | HttpRequestAction::ScIncGpc1(_)
                    | HttpRequestAction::ScSetGpt0(..)
                    | HttpRequestAction::ScIncGpc { .. }
                    | HttpRequestAction::ScSetGpt { .. }
                    | HttpRequestAction::Rewrite(_)
                    | HttpRequestAction::Capture(_)
                    | HttpRequestAction::WaitForBody(_)
                    | HttpRequestAction::SetTimeout { .. }
                    | HttpRequestAction::StrictMode(_)
                    | HttpRequestAction::SetAddr(..)
                    | HttpRequestAction::NormalizeUri(_)
            )
    };
    let Some(first) = px.http_request.iter().position(is_final) else {
        return Vec::new();
    };
    let f = &px.http_request[first];
    px.http_request[first + 1..]
        .iter()
        .map(|r| {
            format!(
                "{}: previous 'http-request' action at {} is final and has no condition attached, further entries are NOOP",
                r.loc, f.loc
            )
        })
        .collect()
}

/// `hash-type map-based|consistent [sdbm|djb2|wt6|crc32] [avalanche]`.
/// `consistent` without a function means sdbm with avalanche (HAProxy's
/// rule); HAProxy 2.6 knows no `none` function, nor does ebb.
fn parse_hash_type(w: &[String]) -> Result<HashType, String> {
    let mut h = HashType::default();
    match w.first().map(String::as_str) {
        Some("map-based") => {}
        Some("consistent") => {
            h.consistent = true;
            h.avalanche = w.len() == 1;
        }
        Some(o) => {
            return Err(format!(
                "'hash-type': unknown method '{o}' (expected map-based or consistent)"
            ))
        }
        None => return Err("'hash-type' expects map-based or consistent".to_string()),
    }
    let mut rest = &w[1..];
    if let Some(f) = rest.first() {
        let func = match f.as_str() {
            "sdbm" => Some(HashFunction::Sdbm),
            "djb2" => Some(HashFunction::Djb2),
            "wt6" => Some(HashFunction::Wt6),
            "crc32" => Some(HashFunction::Crc32),
            _ => None,
        };
        if let Some(func) = func {
            h.function = func;
            rest = &rest[1..];
        }
    }
    match rest {
        [] => {}
        [a] if a == "avalanche" => h.avalanche = true,
        [x, ..] => {
            return Err(format!(
                "'hash-type': unexpected '{x}' (functions: sdbm, djb2, wt6, crc32; modifier: avalanche)"
            ))
        }
    }
    Ok(h)
}

fn parse_balance(w: &[String]) -> Result<Balance, String> {
    let Some(algo) = w.first() else {
        return Err("'balance' expects an algorithm".to_string());
    };
    let rest = &w[1..];
    let no_more = |b: Balance| -> Result<Balance, String> {
        match rest.first() {
            Some(x) => Err(format!("unexpected argument '{x}' after 'balance {algo}'")),
            None => Ok(b),
        }
    };
    if let Some(inner) = algo.strip_prefix("hdr(").and_then(|s| s.strip_suffix(')')) {
        if !is_token(inner) {
            return Err(format!("invalid header name '{inner}' in 'balance {algo}'"));
        }
        let use_domain_only = match rest {
            [] => false,
            [x] if x == "use_domain_only" => true,
            _ => {
                return Err(format!(
                    "'balance {algo}' accepts only 'use_domain_only' after it"
                ))
            }
        };
        return Ok(Balance::Hdr {
            name: inner.to_ascii_lowercase(),
            use_domain_only,
        });
    }
    match algo.as_str() {
        "roundrobin" => no_more(Balance::RoundRobin),
        "static-rr" => no_more(Balance::StaticRr),
        "leastconn" => no_more(Balance::LeastConn),
        "first" => no_more(Balance::First),
        "source" => no_more(Balance::Source),
        "random" => match rest {
            [] => Ok(Balance::Random { draws: 2 }),
            [n] => Ok(Balance::Random {
                // Beyond a few draws the choice is plain least-loaded;
                // 100 only catches typos.
                draws: parse_u32_range("balance random", n, 1, 100)?,
            }),
            _ => Err("'balance random' accepts at most a number of draws".to_string()),
        },
        "uri" => {
            let (mut whole, mut len, mut depth, mut path_only) = (false, None, None, false);
            let mut i = 0;
            while i < rest.len() {
                match rest[i].as_str() {
                    "whole" => whole = true,
                    "path-only" => path_only = true,
                    "len" => {
                        len = Some(parse_u32_range("len", arg(rest, i + 1, "len")?, 1, u32::MAX)?);
                        i += 1;
                    }
                    "depth" => {
                        depth = Some(parse_u32_range("depth", arg(rest, i + 1, "depth")?, 1, u32::MAX)?);
                        i += 1;
                    }
                    x => {
                        return Err(format!(
                            "unknown 'balance uri' argument '{x}' (supported: whole, len N, depth N, path-only)"
                        ))
                    }
                }
                i += 1;
            }
            Ok(Balance::Uri {
                whole,
                len,
                depth,
                path_only,
            })
        }
        "url_param" => match rest {
            [name] => Ok(Balance::UrlParam { name: name.to_string() }),
            [_, opt, ..] if opt == "check_post" => Err(
                "'balance url_param NAME check_post' is not supported by ebb (it does not hash request bodies)"
                    .to_string(),
            ),
            [] => Err("'balance url_param' requires an URL parameter name.".to_string()),
            _ => Err("'balance url_param' only accepts check_post modifier.".to_string()),
        },
        o => Err(format!(
            "unknown balance algorithm '{o}' (supported: roundrobin, static-rr, leastconn, first, source, uri, url_param NAME, hdr(NAME), random)"
        )),
    }
}

fn parse_stats(px: &mut Proxy, ctx: &Ctx<'_>, w: &[String]) -> Result<(), String> {
    let sub = arg(w, 1, "stats")?;
    let kw = format!("stats {sub}");
    ctx.allow(&kw, FE | BE, sub != "admin")?;
    let loc = ctx.loc;
    let one = || -> Result<&str, String> {
        match w {
            [_, _, v] => Ok(v.as_str()),
            _ => Err(format!("'{kw}' expects exactly one argument")),
        }
    };
    let st = &mut px.stats;
    match sub {
        "enable" => {
            if w.len() > 2 {
                return Err("'stats enable' takes no argument".to_string());
            }
        }
        "uri" => {
            let u = one()?;
            if !u.starts_with('/') {
                return Err(format!("'stats uri' must start with '/', got '{u}'"));
            }
            st.uri = Some(Spanned {
                value: u.to_string(),
                loc: loc.clone(),
            });
        }
        "refresh" => st.refresh = Some(nonzero_time(&kw, one()?)?),
        "realm" => st.realm = Some(one()?.to_string()),
        "hide-version" => {
            if w.len() > 2 {
                return Err("'stats hide-version' takes no argument".to_string());
            }
            st.hide_version = true;
        }
        "show-legends" => {
            if w.len() > 2 {
                return Err("'stats show-legends' takes no argument".to_string());
            }
            st.show_legends = true;
        }
        // HAProxy: the node name with the characters of the global `node`;
        // the description is every word after, joined by spaces.
        "show-node" => {
            let name = match w {
                [_, _] => None,
                [_, _, n] => {
                    check_node_name("stats show-node", n)?;
                    Some(n.clone())
                }
                _ => return Err("'stats show-node' expects at most a name".to_string()),
            };
            st.show_node = Some(name);
        }
        "show-desc" => {
            st.show_desc = Some((w.len() > 2).then(|| w[2..].join(" ")));
        }
        "auth" => {
            let v = one()?;
            let Some((user, password)) = v.split_once(':') else {
                return Err(format!("'stats auth' expects USER:PASSWORD, got '{v}'"));
            };
            if user.is_empty() {
                return Err("'stats auth' needs a user name before ':'".to_string());
            }
            st.auth.push(StatsUser {
                user: user.to_string(),
                password: password.to_string(),
            });
        }
        "admin" => {
            let (args, c) = split_cond(&w[2..]);
            if let Some(x) = args.first() {
                return Err(format!("unexpected '{x}': 'stats admin' expects 'if' or 'unless'"));
            }
            let Some(c) = c else {
                return Err("'stats admin' expects 'if' or 'unless' and a condition".to_string());
            };
            let cond = parse_condition(c.0, c.1, &px.acls, loc)?;
            px.stats.admin.push(cond);
        }
        o => {
            return Err(format!(
                "unknown 'stats {o}' (supported: enable, uri, refresh, auth, admin, realm, hide-version, show-node, show-desc, show-legends)"
            ))
        }
    }
    px.stats.enabled = true;
    Ok(())
}

/// `compression algo|algo-res NAME...`, `compression type|type-res
/// TYPE...` (each line adds to the list, as in HAProxy), `compression
/// offload`, and HAProxy 2.8's request side: `algo-req NAME`, `type-req
/// TYPE...`, `direction request|response|both` (HAProxy 2.6 has none of
/// these three; ebb follows 2.8's documented meaning).
fn parse_compression(c: &mut Compression, ctx: &Ctx<'_>, w: &[String]) -> Result<(), String> {
    use crate::compress::Coding;
    let algo = |name: &String| {
        Coding::parse(name).ok_or_else(|| {
            format!(
                "unknown compression algorithm '{name}' (supported: identity, gzip, deflate, raw-deflate, br, zstd)"
            )
        })
    };
    let kw = w.first().map_or("", String::as_str);
    match kw {
        "algo" | "algo-res" => {
            if w.len() < 2 {
                return Err(format!("'compression {kw}' expects at least one algorithm"));
            }
            for name in &w[1..] {
                let c2 = algo(name)?;
                if !c.algos.contains(&c2) {
                    c.algos.push(c2);
                }
            }
            if c.algos.contains(&Coding::Deflate) && c.algos.contains(&Coding::RawDeflate) {
                // Both answer to the token "deflate": one would never run.
                return Err(format!(
                    "'compression {kw}' cannot take both 'deflate' and 'raw-deflate' (both answer to 'deflate')"
                ));
            }
        }
        "algo-req" => {
            let [_, name] = w else {
                return Err("'compression algo-req' expects exactly one algorithm".to_string());
            };
            c.algo_req = Some(algo(name)?);
        }
        "type" | "type-res" | "type-req" => {
            if w.len() < 2 {
                return Err(format!("'compression {kw}' expects at least one MIME type"));
            }
            let list = if kw == "type-req" {
                &mut c.types_req
            } else {
                &mut c.types
            };
            list.extend(w[1..].iter().map(|t| t.to_ascii_lowercase()));
        }
        "direction" => {
            c.direction = Some(match w.get(1..).unwrap_or_default() {
                [d] if d == "request" => (true, false),
                [d] if d == "response" => (false, true),
                [d] if d == "both" => (true, true),
                _ => {
                    return Err(
                        "'compression direction' expects 'request', 'response', or 'both'"
                            .to_string(),
                    )
                }
            });
        }
        "offload" => {
            if w.len() > 1 {
                return Err("'compression offload' takes no argument".to_string());
            }
            if ctx.defaults {
                // HAProxy warns and ignores it there; ebb refuses.
                return Err(
                    "'compression offload' is not allowed in a 'defaults' section (HAProxy ignores it there)"
                        .to_string(),
                );
            }
            c.offload = true;
        }
        "minsize-res" => {
            let [_, v] = w else {
                return Err("'compression minsize-res' expects a size".to_string());
            };
            c.minsize_res = Some(parse_size(v)?);
        }
        "" => {
            return Err(
                "'compression' expects algo, algo-req, type, type-req, direction or offload"
                    .to_string(),
            )
        }
        o => {
            return Err(format!(
                "unknown 'compression {o}' (supported: algo, algo-res, algo-req, type, type-res, type-req, direction, offload, minsize-res)"
            ))
        }
    }
    Ok(())
}

fn parse_serve_files(w: &[String], ctx: &Ctx<'_>) -> Result<ServeFiles, String> {
    let Some(dir) = w.first() else {
        return Err("'serve-files' expects a directory".to_string());
    };
    let mut sf = ServeFiles {
        root: ctx.resolve(dir),
        index: vec!["index.html".to_string()],
        listing: false,
        follow_symlinks: false,
        max_age: None,
        loc: ctx.loc.clone(),
        dotfiles: false,
        precompressed: Vec::new(),
    };
    let mut custom_index = false;
    let mut i = 1;
    while i < w.len() {
        let opt = w[i].as_str();
        if opt == "precompressed" {
            // Codings up to the next option or the end of the line.
            i += 1;
            while let Some(name) = w.get(i) {
                use crate::compress::Coding;
                match Coding::parse(name) {
                    Some(c @ (Coding::Gzip | Coding::Br | Coding::Zstd)) => {
                        if !sf.precompressed.contains(&c) {
                            sf.precompressed.push(c);
                        }
                    }
                    _ if SERVE_FILES_OPTIONS.contains(&name.as_str()) => break,
                    _ => {
                        return Err(format!(
                            "'precompressed' takes gzip, br and zstd (the .gz, .br and .zst siblings), got '{name}'"
                        ))
                    }
                }
                i += 1;
            }
            if sf.precompressed.is_empty() {
                return Err("'precompressed' expects gzip, br or zstd".to_string());
            }
            continue;
        }
        let v = w
            .get(i + 1)
            .map(String::as_str)
            .ok_or_else(|| format!("'serve-files' option '{opt}' expects a value"))?;
        match opt {
            "index" => {
                if v.is_empty() || v.contains('/') {
                    return Err(format!("invalid index file name '{v}'"));
                }
                if !custom_index {
                    sf.index.clear();
                    custom_index = true;
                }
                sf.index.push(v.to_string());
            }
            "listing" => sf.listing = parse_on_off("listing", v)?,
            "dotfiles" => {
                sf.dotfiles = match v {
                    "allow" => true,
                    "deny" => false,
                    _ => return Err(format!("'dotfiles' expects 'allow' or 'deny', got '{v}'")),
                }
            }
            "follow-symlinks" => sf.follow_symlinks = parse_on_off("follow-symlinks", v)?,
            "max-age" => {
                // Seconds, as in Cache-Control; a unit may be given.
                let d = if v.bytes().all(|b| b.is_ascii_digit()) {
                    parse_time_unit(v, 1_000_000)?
                } else {
                    parse_time(v)?
                };
                let secs = u32::try_from(d.as_secs())
                    .map_err(|_| format!("'max-age' {v} is too large"))?;
                sf.max_age = Some(secs);
            }
            o => {
                return Err(format!(
                    "unknown 'serve-files' option '{o}' (supported: index, listing, dotfiles, follow-symlinks, max-age, precompressed)"
                ))
            }
        }
        i += 2;
    }
    Ok(sf)
}

const SERVE_FILES_OPTIONS: &[&str] = &[
    "index",
    "listing",
    "dotfiles",
    "follow-symlinks",
    "max-age",
    "precompressed",
];
