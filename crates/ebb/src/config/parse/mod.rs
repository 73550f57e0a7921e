//! Section and keyword parsing: lines in, typed [`Config`] out.
//!
//! One [`Parser`] reads every file in order. A section runs from its header
//! to the next header or the end of its file. Each keyword handler returns a
//! message on error; the dispatcher adds `file:line` and carries on with the
//! next line, so one run reports every error. Cross-checks that need the
//! whole configuration (backend names, binds, duplicates) run at the end.
//!
//! This file holds the walker: the parser's state, section headers (and
//! `defaults` inheritance), the dispatch of each line to its section's
//! handler, the references a line leaves for the end, and the helpers every
//! handler uses ([`Ctx`], [`split_cond`], [`cond_of`], [`arg`]). Handlers
//! live by what they parse: [`global`], [`proxy`] (frontend, backend,
//! listen, defaults) with [`options`], [`server`], [`bind`], [`tls`],
//! [`checks`], [`rules`] and [`reply`]; [`log`] targets; [`userlist`]
//! sections; and [`finish`], the end checks. Resolvers, peers, cache,
//! program, fcgi-app and mailers sections are parsed by their modules
//! beside this one, in `config`: the walker opens them and hands them
//! their lines.

mod bind;
mod checks;
mod finish;
mod global;
mod h1case;
mod log;
mod options;
mod proxy;
mod reply;
mod rules;
mod server;
mod tls;
mod userlist;

pub use bind::{parse_octal_mode, parse_sock_spec, unix_owner_opt};
pub use global::quiet_seen;
pub use proxy::unreachable_rules;
pub(super) use rules::{
    is_shared_action, parse_do_resolve, parse_set_priority, parse_sock_opt, request_scope,
    set_log_level_arg, set_nice_refused, shared_action,
};
pub(super) use server::no_check_port;
pub use server::{agent_addr, parse_dynamic_server};
pub(crate) use tls::{tls_bind_option, TlsOptionsOf};

use std::path::{Path, PathBuf};
use std::sync::Arc;

use super::acl::parse_condition;
use super::lexer::{tokenize, EnvLookup, LinePos};
use super::types::*;
use super::values::*;
use log::parse_log_target;
use proxy::proxy_kw;
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
    /// A `mailers` section (index in `Parser::mailers`).
    Mailers(usize),
    /// A `ring` section (index in `Parser::rings`).
    Ring(usize),
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
    /// How many proxies (`disabled` ones too) were declared before the
    /// first global `stats socket` or `stats timeout` line: where
    /// HAProxy's CLI frontend takes its place in the numbering.
    cli_fe_at: Option<usize>,
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
    /// `fcgi-app` sections.
    fcgi_apps: Vec<super::fcgi::FcgiApp>,
    programs: Vec<Program>,
    /// `mailers` sections, resolved into the proxies at the end.
    mailers: Vec<super::mailers::MailersSection>,
    /// `ring` sections.
    rings: Vec<super::ring::RingSection>,
    /// Defaults sections defining `tcp-request`/`tcp-response` rules (by
    /// header line) and the kind of proxy that first used each one.
    rule_defaults: Vec<(Loc, ProxyKind)>,
}

fn new_proxy(name: &str, kind: ProxyKind, loc: Loc) -> Proxy {
    Proxy {
        name: name.to_string(),
        kind,
        loc,
        misplaced: Vec::new(),
        maxconn: None,
        backlog: None,
        rate_limit_sessions: 0,
        fullconn: None,
        max_keep_alive_queue: None,
        dynamic_cookie_key: None,
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
        log_format_sd: None,
        error_log_format: None,
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
        retry_on: RetryOn::default(),
        http_reuse: HttpReuse::Safe,
        default_server: ServerOptions::default(),
        servers: Vec::new(),
        serve_files: None,
        monitor_uri: None,
        monitor_fail: Vec::new(),
        http_check: HttpCheck {
            enabled: false,
            send_state: false,
            disable_404: false,
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
        ext_check: Default::default(),
        max_session_srv_conns: None,
        load_server_state: None,
        server_state_file_name: None,
        stick_table: None,
        stick_rules: Vec::new(),
        filters: Vec::new(),
        fcgi_app: None,
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
        send_name_header: None,
        log_tag: None,
        disabled: None,
        email_alert: EmailAlert::default(),
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

/// A syslog level's number (`emerg` 0 ... `debug` 7).
pub(super) fn log_level_num(s: &str) -> Option<u8> {
    log::log_level(s).map(|l| l as u8)
}

const UNSUPPORTED_SECTIONS: &[&str] = &["log-forward", "crt-store", "traces", "acme"];

impl<'e> Parser<'e> {
    pub(crate) fn new(env: EnvLookup<'e>) -> Self {
        crate::environ::reset();
        super::ring::reset();
        crate::sample::patref::begin();
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
            cli_fe_at: None,
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
            mailers: Vec::new(),
            rings: Vec::new(),
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
            let proxy = match self.section {
                Section::Proxy(i) => Some(i),
                _ => None,
            };
            crate::sample::patref::at_line(&file, line, proxy);
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
        if let Section::Ring(i) = self.section {
            if let Some(r) = self.rings.get_mut(i) {
                super::ring::close(r);
            }
        }
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

    /// A section kept in a list (`cache`, `program`, `mailers`, `fcgi-app`) was opened by its
    /// module's `open` (which checked its name against those already declared): keep it and
    /// read the lines that follow into it, or report why not and skip them.
    fn opened<T>(
        &mut self,
        opened: Result<T, String>,
        loc: Loc,
        list: fn(&mut Self) -> &mut Vec<T>,
        section: fn(usize) -> Section,
    ) {
        match opened {
            Ok(s) => {
                let list = list(self);
                list.push(s);
                self.section = section(list.len() - 1);
            }
            Err(e) => {
                self.section = Section::Unsupported;
                self.error(loc, e);
            }
        }
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
                let opened = super::cache::open(&self.caches, words, &loc);
                self.opened(opened, loc, |p| &mut p.caches, Section::Cache);
                return;
            }
            "program" => {
                self.close_section();
                let opened = super::program::open(&self.programs, words, &loc);
                self.opened(opened, loc, |p| &mut p.programs, Section::Program);
                return;
            }
            "mailers" => {
                self.close_section();
                let opened = super::mailers::open(&self.mailers, words, &loc);
                self.opened(opened, loc, |p| &mut p.mailers, Section::Mailers);
                return;
            }
            "ring" => {
                self.close_section();
                let opened = super::ring::open(&self.rings, words, &loc);
                self.opened(opened, loc, |p| &mut p.rings, Section::Ring);
                return;
            }
            "fcgi-app" => {
                self.close_section();
                let opened = super::fcgi::open(&self.fcgi_apps, words, &loc);
                self.opened(opened, loc, |p| &mut p.fcgi_apps, Section::FcgiApp);
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
            Section::Global => {
                let r = self.global_kw(words, &loc);
                if self.cli_fe_at.is_none()
                    && (!self.global.stats_sockets.is_empty() || self.global.stats_timeout.is_some())
                {
                    self.cli_fe_at = Some(self.proxies.len());
                }
                r
            }
            Section::Resolvers(i) => match self.resolvers.get_mut(i) {
                Some(r) => super::resolvers::resolvers_kw(r, words, &loc),
                None => Ok(()),
            },
            Section::Peers(i) => {
                let ctx = Ctx {
                    loc: &loc,
                    default_path: &self.default_path,
                    tls: &self.tls,
                    caps: BE,
                    defaults: false,
                    anon_defaults: false,
                    section_name: "peers",
                    http_errors: &self.http_errors,
                    named_defaults: false,
                    experimental: self.experimental,
                };
                match self.peers.get_mut(i) {
                    Some(s) => peers_line(s, words, &ctx),
                    None => Ok(()),
                }
            }
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
            Section::Mailers(i) => match self.mailers.get_mut(i) {
                Some(m) => super::mailers::mailers_kw(m, words),
                None => Ok(()),
            },
            Section::Ring(i) => match self.rings.get_mut(i) {
                Some(r) => super::ring::ring_kw(r, words, &loc),
                None => Ok(()),
            },
            Section::FcgiApp(i) => match self.fcgi_apps.get_mut(i) {
                Some(a) => {
                    let target = |t: &[String]| parse_log_target(t, &loc);
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
        let (frontend_only, backend_only) = match self.section {
            Section::Proxy(i) => self.proxies.get(i).map_or((false, false), |p| {
                (!p.kind.is_backend(), !p.kind.is_frontend())
            }),
            _ => (false, false),
        };
        let mut result = result;
        for (what, proxy, server) in crate::sample::take_proxy_refs() {
            let (front, per_server) = (what.of_frontend(), what.per_server());
            let wrong_kind = if front { backend_only } else { frontend_only };
            if wrong_kind && !per_server && proxy.is_none() && result.is_ok() {
                // HAProxy resolves it against the proxy, which must be a
                // backend (a frontend) in any rule of a frontend (a
                // backend).
                let kind = if front { "frontend" } else { "backend" };
                result = Err(format!(
                    "proxy '{}', referenced by fetch '{}' without a {kind} name, has no {kind} capability",
                    own.as_deref().unwrap_or_default(),
                    what.name()
                ));
            }
            if in_defaults && proxy.is_none() && server.is_some() && result.is_ok() {
                // HAProxy: a server argument must name its backend there.
                result = Err(format!(
                    "in a 'defaults' section, '{}' must name the server's backend ('backend/{}')",
                    what.name(),
                    server.as_deref().unwrap_or_default()
                ));
            }
            if let Some(p) = proxy.or_else(|| server.as_ref().and_then(|_| own.clone())) {
                self.proxy_refs.push((what, p, server, loc.clone()));
            }
        }
        for sink in crate::sample::take_sink_refs() {
            // HAProxy finds the sink as the line is read: a ring declared
            // further down is not known yet.
            let known = matches!(sink.as_str(), "buf0" | "stdout" | "stderr")
                || self.rings.iter().any(|r| r.name == sink);
            if !known && result.is_ok() {
                result = Err(format!("converter 'debug': No such sink '{sink}'"));
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
                px.misplaced.clear();
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
                            proto_h1: false,
                            proto_none: false,
                            maxconn: 0,
                            tcp: Default::default(),
                            netscaler_cip: None,
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

/// A line of a `peers` section: the TLS options of its `server`, `peer`,
/// `default-server` and `bind` lines read with the proxies' parsers, the
/// rest by [`super::peers::peers_kw`].
fn peers_line(s: &mut super::PeersSection, w: &[String], ctx: &Ctx<'_>) -> Result<(), String> {
    use super::peers::{bind_opts_check, peer_opts_start, peers_kw};
    match w.first().map(String::as_str) {
        Some("default-server") => {
            peer_opts_start(w)?;
            let mut o = s.defaults.clone();
            server::parse_server_opts(&w[1..], &mut o, ctx)?;
            s.defaults = o;
            Ok(())
        }
        Some("server" | "peer") => {
            let start = peer_opts_start(w)?;
            let mut o = s.defaults.clone();
            server::parse_server_opts(&w[start.min(w.len())..], &mut o, ctx)?;
            peers_kw(s, &w[..start.min(w.len())], ctx.loc)?;
            if let Some(p) = s.peers.last_mut() {
                p.tls = o.ssl.then_some(o);
            }
            Ok(())
        }
        Some("bind") if w.len() > 2 => {
            bind_opts_check(w)?;
            let b = bind::parse_bind(&w[1..], ctx)?;
            peers_kw(s, &w[..2], ctx.loc)?;
            s.bind_ssl = b.ssl;
            Ok(())
        }
        _ => peers_kw(s, w, ctx.loc),
    }
}
