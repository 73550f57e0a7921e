//! The compiling pass ([`compile_keeping`]): every proxy of the
//! configuration made into its frontend and backend sides, references
//! resolved to indexes, what ebb does not support refused with its
//! `file:line`, and the result ([`Compiled`]) handed to the workers.

use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use crate::backend::Farm;
use crate::config::{Config, ConfigError, HttpConnMode, Loc};
use crate::rules::Matcher;

use super::backends::{BackendKind, BackendRt, FilesConfig, DEFAULT_CONNECT_MS};
use super::counters::HttpCounters;
use super::frontend::{
    h2_config, listener_stats, FeTimeouts, FrontendRt, UseBackendRt, DEFAULT_CLIENT_MS,
    DEFAULT_KEEPALIVE_MS,
};
use super::rules::{compile_req_rules, compile_resp_list, compile_resp_rules, Prepared};
use super::servers::{compile_servers, ext_probe, fullconn_of, load_states};
use super::stats::compile_stats;

static NEXT_BACKEND_ID: AtomicU64 = AtomicU64::new(1);

/// Everything compiled.
pub struct Compiled {
    pub frontends: Vec<Arc<FrontendRt>>,
    pub backends: Vec<Arc<BackendRt>>,
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

pub(super) fn ms(d: Option<Duration>) -> Option<u32> {
    d.map(|d| d.as_millis().clamp(1, u32::MAX as u128 / 2) as u32)
}

pub(super) fn err(loc: &Loc, message: impl Into<String>) -> ConfigError {
    ConfigError {
        loc: loc.clone(),
        message: message.into(),
    }
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
/// from 1, skipping the ids set by `id`, the counter moving one past each
/// proxy (its own `id` or not); the CLI frontend of a global
/// `stats socket` or `stats timeout` line takes one number at its place
/// (HAProxy forces its id to 0 but counts it).
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
    let mut next = 1u32;
    // HAProxy's counter moves one past every proxy, whether it took the
    // next free id or had its own (`a`, `b id 3`, `c` give 1, 3, 4).
    let take = |next: &mut u32, own: Option<u32>| {
        if own.is_none() {
            while forced.contains(next) {
                *next += 1;
            }
        }
        *next += 1;
        own.unwrap_or(*next - 1)
    };
    let mut cli = cfg.cli_fe_at;
    for (at, x) in cfg.proxies.iter().enumerate() {
        // The CLI frontend (a `global` section usually comes first),
        // then the disabled ones declared before this one.
        if cli.is_some_and(|c| c <= at) {
            cli = None;
            next += 1;
        }
        while let Some(d) = off.next_if(|d| d.0 <= at) {
            take(&mut next, d.1);
        }
        let id = take(&mut next, x.id.as_ref().map(|i| i.value));
        if std::ptr::eq(x, p) {
            return id as usize;
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
    crate::tls::set_extra_del_ext(cfg.global.ssl_load_extra_del_ext);
    let mut errors = Vec::new();
    let mut warn = Vec::new();
    let warnings = &mut warn;
    let states = load_states(cfg, warnings);
    // One map for every proxy whose option asks for it.
    let h1_case = (!cfg.global.h1_case.is_empty()).then(|| Arc::new(cfg.global.h1_case.clone()));
    for p in &cfg.proxies {
        warnings.extend(p.misplaced.iter().cloned());
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
            } else {
                // A backend or listen section without servers answers 503
                // until `add server` gives it one (HAProxy accepts it
                // too).
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
                if let Some(name) = &p.fcgi_app {
                    // (The parser checked that it names one.)
                    if let Some(a) = cfg.fcgi_apps.iter().find(|a| a.name == name.value) {
                        let f = super::FcgiRt::compile(a)?;
                        // Its servers' HTTP checks go through FastCGI.
                        if let Some(crate::backend::check::Probe::Http(p)) = &mut sr.probe {
                            p.fcgi = Some(Arc::clone(&f.app));
                        }
                        sr.fcgi = Some(Arc::new(f));
                    }
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
                    // (Its server side's: a listen's backend half reads it
                    // here; before, a listen's option reached its client
                    // side only.)
                    indep_streams: p.options.indep_streams.is_some(),
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
                    compile_resp_rules(p, &matcher, &caches, &tables)?,
                    compile_resp_list(
                        &p.http_after_response,
                        &matcher,
                        &caches,
                        (&p.name, &tables),
                    )?,
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
                checkcache: p.options.checkcache,
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
                restrict_hdr_names: p.restrict_hdr_names(),
                h1_case: h1_case.clone().filter(|_| p.options.h1_case_server),
                accept_invalid: p.options.accept_invalid_resp,
                invalid_rep: Default::default(),
                stopped: p.disabled.is_some(),
                rates: Default::default(),
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
            let http_response = compile_resp_rules(p, &matcher, &caches, &tables)?;
            let after_response = compile_resp_list(
                &p.http_after_response,
                &matcher,
                &caches,
                (&p.name, &tables),
            )?;
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
            // HAProxy 2.6 warns of a log format with nowhere to go.
            let formatted = p.options.httplog
                || p.options.tcplog
                || p.options.httpslog
                || p.log_format.is_some()
                || p.log_format_sd.is_some();
            if formatted && !logs {
                warnings.push(format!(
                    "{}: log format ignored for {} '{}' since it has no log address.",
                    p.loc,
                    p.kind.type_str(),
                    p.name
                ));
            }
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
                rates: Default::default(),
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
                accept_invalid: p.options.accept_invalid_req,
                invalid_req: Default::default(),
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
                restrict_hdr_names: p.restrict_hdr_names(),
                matcher,
                http_request,
                http_response,
                after_response,
                log_format: p.log_format.as_ref().map(|l| l.value.clone()).or_else(|| {
                    p.options
                        .httpslog
                        .then(|| crate::sample::logline::httpslog().clone())
                }),
                log_format_sd: p.log_format_sd.as_ref().map(|l| l.value.clone()),
                error_log_format: p.error_log_format.as_ref().map(|l| l.value.clone()),
                captures: p.captures.clone(),
                txn: crate::config::cookie::FrontTxn::of(p),
                use_backends,
                default_backend,
                own_backend: if p.kind.is_backend() {
                    index(&p.name)
                } else {
                    None
                },
                errorfiles: p
                    .errorfiles
                    .iter()
                    .map(|e| (e.status, e.content.clone()))
                    .collect(),
                error_replies: p
                    .error_replies
                    .iter()
                    .map(|(s, r)| {
                        Prepared::of(r)
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
