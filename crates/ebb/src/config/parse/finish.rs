//! The checks that need the whole configuration, run once every file is
//! read: names that point at other sections (backends, servers, tables,
//! userlists, tracked servers), duplicates (proxy names and ids, servers,
//! tables), options that only make sense together, and the sections' own
//! cross-checks (caches, resolvers, peers...).
//!
//! Each problem is reported at the line it comes from; errors come out
//! sorted by file, then line. Some checks also mark what other lines name
//! (a server a fetch or a `track` names cannot be deleted at run time; a
//! table stick rules use stores the server's id).

use std::sync::Arc;

use super::Parser;
use crate::config::types::*;

fn push_err(errs: &mut Vec<ConfigError>, loc: &Loc, message: String) {
    errs.push(ConfigError {
        loc: loc.clone(),
        message,
    });
}

impl Parser<'_> {
    /// A proxy's FastCGI application and servers: HAProxy's checks
    /// (`cfg_fcgi_apps_postparser`, `fcgi_flt_check`, with their words),
    /// and what ebb's FastCGI side does not do (TLS, PROXY headers,
    /// SOCKS4).
    fn check_fcgi(&self, p: &Proxy, errs: &mut Vec<ConfigError>) {
        let fcgi: Vec<&Server> = p.servers.iter().filter(|s| s.opts.proto_fcgi).collect();
        // A FastCGI check needs the backend's application (HAProxy 2.6
        // accepts one without and crashes at its first check).
        if p.fcgi_app.is_none() && p.http_check.enabled {
            let need = "needs the backend's FastCGI application ('use-fcgi-app')";
            for s in p.servers.iter().filter(|s| {
                s.opts.check && s.opts.check_proto == Some(crate::config::CheckProto::Fcgi)
            }) {
                push_err(
                    errs,
                    &s.loc,
                    format!("server '{}': 'check-proto fcgi' {need}", s.name),
                );
            }
            for r in &p.http_check.rules {
                if let HttpCheckStep::Connect(cc) = &r.step {
                    if cc.proto == Some(crate::config::ConnectProto::Fcgi) {
                        push_err(
                            errs,
                            &r.loc,
                            format!("'http-check connect proto fcgi' {need}"),
                        );
                    }
                }
            }
        }
        if let Some(a) = &p.fcgi_app {
            if !self.fcgi_apps.iter().any(|f| f.name == a.value) {
                push_err(
                    errs,
                    &a.loc,
                    format!("proxy '{}' : fcgi-app '{}' not found.", p.name, a.value),
                );
            } else if p.mode == ProxyMode::Tcp {
                push_err(
                    errs,
                    &a.loc,
                    format!(
                        "proxy '{}': FCGI application cannot be used in non-HTTP mode.",
                        p.name
                    ),
                );
            } else if fcgi.is_empty() {
                push_err(
                    errs,
                    &a.loc,
                    format!(
                        "proxy '{}': FCGI app configured but no FCGI server found.",
                        p.name
                    ),
                );
            }
        }
        for s in fcgi {
            if p.fcgi_app.is_none() {
                push_err(
                    errs,
                    &s.loc,
                    format!(
                        "proxy '{}': FCGI server '{}' has no FCGI app configured.",
                        p.name, s.name
                    ),
                );
                continue;
            }
            let what = if s.opts.ssl {
                Some("'ssl'")
            } else if s.opts.send_proxy > 0 {
                Some("'send-proxy'")
            } else if s.opts.socks4.is_some() {
                Some("'socks4'")
            } else {
                None
            };
            if let Some(what) = what {
                push_err(
                    errs,
                    &s.loc,
                    format!(
                        "server '{}': {what} on a 'proto fcgi' server is not supported by ebb",
                        s.name
                    ),
                );
            }
        }
    }

    /// Cross-checks that need the whole configuration, then the result.
    pub(crate) fn finish(mut self) -> Result<Config, Vec<ConfigError>> {
        self.close_section();
        // `disabled` proxies: parsed and checked line by line, not
        // started (HAProxy skips them past the parse too).
        let mut started = 0;
        let cli_fe_at = self.cli_fe_at.map(|at| {
            self.proxies[..at.min(self.proxies.len())]
                .iter()
                .filter(|p| p.disabled.is_none())
                .count()
        });
        let disabled_ids: Vec<(usize, Option<u32>)> = self
            .proxies
            .iter()
            .filter_map(|p| match p.disabled {
                Some(_) => Some((started, p.id.as_ref().map(|i| i.value))),
                None => {
                    started += 1;
                    None
                }
            })
            .collect();
        let (off, on): (Vec<Proxy>, Vec<Proxy>) = std::mem::take(&mut self.proxies)
            .into_iter()
            .partition(|p| p.disabled.is_some());
        self.proxies = on;
        // What is left of a disabled backend (or listen): its name, mode
        // and id, which frontends may still route to. HAProxy starts such
        // a configuration and, the proxy never set up (no rules, no
        // servers), answers what goes there 503, `SC--`, `<NOSRV>`.
        let stopped: Vec<Proxy> = off
            .iter()
            .filter(|b| b.kind.is_backend())
            .map(|b| {
                let mut s = super::new_proxy(&b.name, ProxyKind::Backend, b.loc.clone());
                s.mode = b.mode;
                s.id = b.id.clone();
                s.disabled = b.disabled.clone();
                s
            })
            .collect();
        self.global.environ = crate::environ::take();
        self.read_h1_case_file();
        // A table that stick rules use stores the server's id and key
        // (HAProxy adds server_id and server_key to it).
        let stick_tables: Vec<String> = self
            .proxies
            .iter()
            .flat_map(|p| {
                p.stick_rules
                    .iter()
                    .map(|r| r.table.clone().unwrap_or_else(|| p.name.clone()))
            })
            .collect();
        let peer_tables = self.peers.iter_mut().flat_map(|s| s.tables.iter_mut());
        for t in self
            .proxies
            .iter_mut()
            .filter_map(|p| p.stick_table.as_mut())
            .chain(peer_tables)
        {
            let store = &mut t.value.store;
            if stick_tables.contains(&t.value.name) {
                for d in [
                    crate::table::DataType::ServerId,
                    crate::table::DataType::ServerKey,
                ] {
                    if !store.contains(&d) {
                        store.push(d);
                    }
                }
            }
        }
        // Servers a fetch names cannot be deleted at run time.
        for (_, name, server, _) in &self.proxy_refs {
            let Some(server) = server else { continue };
            for p in self.proxies.iter_mut().filter(|p| &p.name == name) {
                for s in p.servers.iter_mut().filter(|s| &s.name == server) {
                    s.opts.referenced = true;
                }
            }
        }
        let mut errs: Vec<ConfigError> = Vec::new();
        let err = |errs: &mut Vec<ConfigError>, loc: &Loc, m: String| {
            errs.push(ConfigError {
                loc: loc.clone(),
                message: m,
            })
        };
        // A `use-server` rule names a server of its backend, which then
        // cannot be deleted at run time.
        for p in self.proxies.iter_mut() {
            for r in &p.use_server {
                let UseServerTarget::Name(n) = &r.target else {
                    continue;
                };
                match p.servers.iter_mut().find(|s| &s.name == n) {
                    Some(s) => s.opts.referenced = true,
                    None => err(
                        &mut errs,
                        &r.loc,
                        format!(
                            "unable to find server '{n}' referenced in a 'use-server' rule of {} '{}'",
                            p.kind.name(),
                            p.name
                        ),
                    ),
                }
            }
        }
        for e in resolve_tracks(&mut self.proxies) {
            errs.push(e);
        }
        // HAProxy's LSTCHK_NETADM: a `set-mark` needs the privilege the
        // process would give up with `uid`/`user` (uid 0 changes nothing).
        if self.global.uid.is_some_and(|u| u != 0) {
            if let Some(loc) = self.proxies.iter().find_map(set_mark_rule) {
                errs.push(ConfigError {
                    loc,
                    message: "'set-mark' requires full privileges, so the global 'uid'/'user' cannot be changed (HAProxy: \"Some configuration options require full privileges, so global.uid cannot be changed.\")".to_string(),
                });
            }
        }
        let px = &self.proxies;
        let named = |x: &Proxy| format!("{} '{}'", x.kind.name(), x.name);
        for (i, p) in px.iter().enumerate() {
            // Two proxies may share a name only if their capabilities do not
            // overlap (a frontend and a backend), as in HAProxy.
            if let Some(q) = px[..i].iter().find(|q| {
                q.name == p.name
                    && ((q.kind.is_frontend() && p.kind.is_frontend())
                        || (q.kind.is_backend() && p.kind.is_backend()))
            }) {
                err(
                    &mut errs,
                    &p.loc,
                    format!(
                        "{} has the same name as {} declared at {}",
                        named(p),
                        named(q),
                        q.loc
                    ),
                );
            }
            if let Some(id) = &p.id {
                // Proxy ids are one space, as HAProxy's.
                if let Some(q) = px[..i]
                    .iter()
                    .find(|q| q.id.as_ref().is_some_and(|x| x.value == id.value))
                {
                    err(
                        &mut errs,
                        &id.loc,
                        format!(
                            "{} reuses same custom id as {} (declared at {})",
                            named(p),
                            named(q),
                            q.loc
                        ),
                    );
                }
            }
            if let (Some(src), true) = (&p.source, p.kind.is_backend()) {
                if let Some(s) = p
                    .servers
                    .iter()
                    .find(|s| s.opts.check || s.opts.agent_check)
                {
                    err(
                        &mut errs,
                        &src.loc,
                        format!(
                            "'source' in {} with health checks (server '{}') is not supported yet: ebb's checks would not connect from that address, HAProxy's do",
                            named(p),
                            s.name
                        ),
                    );
                }
            }
            if p.kind.is_frontend() && p.binds.is_empty() && !self.bad_binds.contains(&i) {
                err(
                    &mut errs,
                    &p.loc,
                    format!("{} '{}' has no 'bind' line", p.kind.name(), p.name),
                );
            }
            // A disabled backend is there to route to (see `stopped`).
            let is_backend = |name: &str| {
                px.iter().any(|b| b.kind.is_backend() && b.name == name)
                    || stopped.iter().any(|b| b.name == name)
            };
            let unknown =
                |what: &str, name: &str| format!("'{what}' names unknown backend '{name}'");
            for u in &p.use_backends {
                if u.dynamic.is_none() && !is_backend(&u.backend) {
                    err(&mut errs, &u.loc, unknown("use_backend", &u.backend));
                }
            }
            if p.kind.is_frontend() {
                if let Some(d) = &p.default_backend {
                    if !is_backend(&d.value) {
                        err(&mut errs, &d.loc, unknown("default_backend", &d.value));
                    }
                }
            }
            for (j, s) in p.servers.iter().enumerate() {
                if let Some(f) = p.servers[..j].iter().find(|f| f.name == s.name) {
                    err(
                        &mut errs,
                        &s.loc,
                        format!(
                            "server '{}' is declared twice in backend '{}' (first at {})",
                            s.name, p.name, f.loc
                        ),
                    );
                }
            }
            for s in p
                .servers
                .iter()
                .filter(|s| !s.opts.alpn.is_empty() && !s.opts.ssl && !p.checks_connect_ssl())
            {
                err(
                    &mut errs,
                    &s.loc,
                    format!("server '{}': 'alpn' needs 'ssl'", s.name),
                );
            }
            for s in p
                .servers
                .iter()
                .filter(|s| s.opts.speaks_h2() || s.opts.ws == crate::config::WsProto::H2)
            {
                // HAProxy: the h2 mux is an HTTP one; its health checks
                // use the server's protocol unless `check-proto` says
                // otherwise, and ebb's HTTP checks speak HTTP/1.1 only.
                let why = if p.mode == ProxyMode::Tcp && s.opts.speaks_h2() {
                    Some("'proto h2' needs 'mode http'")
                } else if p.mode == ProxyMode::Tcp {
                    None
                } else if s.opts.send_proxy > 0 {
                    Some("'send-proxy' on a 'proto h2', 'alpn h2' or 'ws h2' server is not supported by ebb")
                } else if s.opts.socks4.is_some() {
                    Some("'socks4' on a 'proto h2', 'alpn h2' or 'ws h2' server is not supported by ebb")
                } else {
                    None
                };
                if let Some(why) = why {
                    err(&mut errs, &s.loc, format!("server '{}': {why}", s.name));
                }
            }
            self.check_fcgi(p, &mut errs);
            for s in p.servers.iter() {
                // HAProxy's alert: the multiplexer must suit the mode.
                let bad = match p.mode {
                    ProxyMode::Tcp if s.opts.proto_fcgi => Some("fcgi"),
                    ProxyMode::Tcp => s.opts.proto_h1.then_some("h1"),
                    _ => s.opts.proto_none.then_some("none"),
                };
                if let Some(m) = bad {
                    err(
                        &mut errs,
                        &s.loc,
                        format!(
                            "proxy '{}' : MUX protocol '{m}' is not usable for server '{}'.",
                            p.name, s.name
                        ),
                    );
                }
            }
            if p.mode == ProxyMode::Tcp {
                for s in p
                    .servers
                    .iter()
                    .filter(|s| s.opts.observe == crate::config::Observe::Layer7)
                {
                    // HAProxy's alert (which leaves the server unobserved).
                    err(
                        &mut errs,
                        &s.loc,
                        format!(
                            "server '{}': 'layer7' can only be used in http proxies.",
                            s.name
                        ),
                    );
                }
                // A tcp session's connect evaluates no sample expression:
                // only a constant name (`str(NAME)`) is taken there.
                for s in p
                    .servers
                    .iter()
                    .filter(|s| s.opts.sni.as_ref().is_some_and(|e| !e.constant()))
                {
                    err(
                        &mut errs,
                        &s.loc,
                        format!(
                            "server '{}': 'sni' with an expression of the session is supported by ebb in 'mode http' only (a constant such as 'str(NAME)' works in 'mode tcp')",
                            s.name
                        ),
                    );
                }
            }
            for s in p.servers.iter().filter(|s| s.opts.check) {
                // HAProxy's alert: the check's protocol must suit its type.
                let http = p.http_check.enabled;
                let bad = match s.opts.check_proto {
                    Some(CheckProto::H1 | CheckProto::H2 | CheckProto::Fcgi) => !http,
                    Some(CheckProto::None) => http,
                    None => false,
                };
                if bad {
                    err(
                        &mut errs,
                        &s.loc,
                        format!(
                            "config: backend '{}': server '{}' uses an incompatible MUX protocol for the selected check type",
                            p.name, s.name
                        ),
                    );
                }
            }
            for s in p
                .servers
                .iter()
                .filter(|s| s.opts.check_alpn.is_some() && !s.opts.ssl && !s.opts.check_ssl)
            {
                err(
                    &mut errs,
                    &s.loc,
                    format!("server '{}': 'check-alpn' needs 'ssl'", s.name),
                );
            }
            if let (Some(sf), Some(s)) = (&p.serve_files, p.servers.first()) {
                err(
                    &mut errs,
                    &sf.loc,
                    format!(
                        "backend '{}' has both 'serve-files' and servers (server '{}' at {})",
                        p.name, s.name, s.loc
                    ),
                );
            }
            let bufsize = self.global.bufsize;
            for e in &p.errorfiles {
                if e.content.len() > bufsize {
                    err(
                        &mut errs,
                        &e.loc,
                        format!(
                            "errorfile '{}' is {} bytes, larger than tune.bufsize ({bufsize})",
                            e.path.display(),
                            e.content.len()
                        ),
                    );
                }
            }
            for r in &p.http_request {
                if let HttpRequestAction::Return(ret) = &r.action {
                    if let ReturnBody::File { path, content } = &ret.body {
                        if content.len() > bufsize {
                            err(
                                &mut errs,
                                &r.loc,
                                format!(
                                    "file '{}' is {} bytes, larger than tune.bufsize ({bufsize})",
                                    path.display(),
                                    content.len()
                                ),
                            );
                        }
                    }
                }
            }
        }
        for (what, name, server, loc) in &self.proxy_refs {
            let found = px.iter().find(|p| {
                &p.name == name
                    && if what.of_frontend() {
                        p.kind.is_frontend()
                    } else {
                        p.kind.is_backend()
                    }
            });
            let msg = match (found, server) {
                (None, _) => Some(format!(
                    "no {} named '{name}'",
                    if what.of_frontend() {
                        "frontend"
                    } else {
                        "backend"
                    }
                )),
                (Some(p), Some(s)) if !p.servers.iter().any(|x| &x.name == s) => {
                    Some(format!("backend '{name}' has no server named '{s}'"))
                }
                _ => None,
            };
            if let Some(m) = msg {
                err(&mut errs, loc, m);
            }
        }
        for (name, loc) in &self.userlist_refs {
            if !self.userlists.iter().any(|u| &u.name == name) {
                err(&mut errs, loc, format!("no userlist named '{name}'"));
            }
        }
        for (name, loc) in &self.table_refs {
            if !px
                .iter()
                .any(|p| &p.name == name && p.stick_table.is_some())
                && !self
                    .peers
                    .iter()
                    .any(|s| s.tables.iter().any(|t| &t.value.name == name))
            {
                err(
                    &mut errs,
                    loc,
                    format!("no stick-table named '{name}' (a table is named after the proxy that declares it)"),
                );
            }
        }
        for (i, p) in px.iter().enumerate() {
            if let Some(t) = &p.stick_table {
                if let Some(q) = px[..i]
                    .iter()
                    .find(|q| q.name == p.name && q.stick_table.is_some())
                {
                    err(
                        &mut errs,
                        &t.loc,
                        format!(
                            "a stick-table named '{}' is already declared by {} '{}'",
                            p.name,
                            q.kind.name(),
                            q.name
                        ),
                    );
                }
            }
        }
        errs.extend(crate::config::cache::check(&self.caches, &self.proxies));
        errs.extend(crate::config::fcgi::check(&mut self.fcgi_apps));
        errs.extend(crate::config::program::check(&self.programs));
        for (loc, m) in crate::config::mailers::resolve(&self.mailers, &mut self.proxies) {
            err(&mut errs, &loc, m);
        }
        errs.extend(crate::config::resolvers::cross_check(
            &self.resolvers,
            &self.proxies,
        ));
        let local_peer = crate::config::peers::local_peer_name(self.global.localpeer.as_deref());
        let px_table_names: Vec<(String, Loc)> = self
            .proxies
            .iter()
            .filter_map(|p| {
                p.stick_table
                    .as_ref()
                    .map(|t| (p.name.clone(), t.loc.clone()))
            })
            .collect();
        let mut tables: Vec<_> = self
            .proxies
            .iter_mut()
            .filter_map(|p| {
                let n = p.name.as_str();
                p.stick_table.as_mut().map(|t| (n, t))
            })
            .collect();
        for (loc, m) in crate::config::peers::check(&self.peers, &mut tables, &local_peer) {
            err(&mut errs, &loc, m);
        }
        for (loc, m) in
            crate::config::peers::check_tables(&mut self.peers, &px_table_names, &local_peer)
        {
            err(&mut errs, &loc, m);
        }
        let mut rings = std::mem::take(&mut self.rings);
        rings.extend(crate::config::ring::take_implicit());
        let targets = self
            .global
            .log
            .iter()
            .chain(self.proxies.iter().flat_map(|p| {
                p.log.iter().filter_map(|l| match l {
                    ProxyLog::Target(t) => Some(t),
                    ProxyLog::Global => None,
                })
            }))
            .chain(self.fcgi_apps.iter().flat_map(|a| {
                a.log_stderr.iter().filter_map(|l| match l {
                    crate::config::FcgiLog::Target(t) => Some(t),
                    crate::config::FcgiLog::Global => None,
                })
            }));
        for t in targets {
            if let LogDest::Ring(name) = &t.dest {
                // `buf0`: HAProxy's built-in ring (the ring module).
                if name != "buf0" && !rings.iter().any(|r| &r.name == name) {
                    err(
                        &mut errs,
                        &t.loc,
                        format!("log server uses unknown ring named '{name}'"),
                    );
                }
            }
        }
        self.errors.extend(errs);
        if self.errors.is_empty() {
            Ok(Config {
                rings,
                global: self.global,
                proxies: self.proxies,
                resolvers: self.resolvers,
                peers: self.peers,
                caches: self.caches,
                fcgi_apps: self.fcgi_apps,
                userlists: self.userlists,
                programs: self.programs,
                stopped,
                disabled_ids,
                cli_fe_at,
                local_peer,
                pat_refs: crate::sample::patref::end(),
            })
        } else {
            // (This parse's pattern references go with it.)
            drop(crate::sample::patref::end());
            // Report in file order, then line order, as a reader expects.
            let order: Vec<Arc<str>> = {
                let mut v: Vec<Arc<str>> = Vec::new();
                for e in &self.errors {
                    if !v.contains(&e.loc.file) {
                        v.push(e.loc.file.clone());
                    }
                }
                v
            };
            let mut errors = self.errors;
            errors.sort_by_key(|e| {
                (
                    order.iter().position(|f| *f == e.loc.file).unwrap_or(0),
                    e.loc.line,
                )
            });
            Err(errors)
        }
    }
}

/// The server a `track` option names from backend `from`: (proxy index,
/// server index), or HAProxy's alert.
fn track_target(px: &[Proxy], from: usize, spec: &str) -> Result<(usize, usize), String> {
    let (pi, sname) = match spec.rsplit_once('/') {
        Some((pname, sname)) => {
            let pi = px
                .iter()
                .position(|p| p.name == pname && p.kind.is_backend())
                .ok_or_else(|| format!("unable to find required proxy '{pname}' for tracking."))?;
            (pi, sname)
        }
        None => (from, spec),
    };
    let si = px[pi]
        .servers
        .iter()
        .position(|s| s.name == sname)
        .ok_or_else(|| format!("unable to find required server '{sname}' for tracking."))?;
    Ok((pi, si))
}

/// Checks every `track` option as HAProxy does (the tracked server exists,
/// has a check, an agent or a `track` of its own, and the chain does not
/// loop) and marks tracked servers as not deletable.
/// Where a proxy's first `set-mark` rule is written, if it has one.
fn set_mark_rule(p: &Proxy) -> Option<Loc> {
    let mark = |a: &HttpRequestAction| matches!(a, HttpRequestAction::SockOpt(FcSockOpt::Mark(_)));
    let tcp = |r: &TcpRequestRule| matches!(&r.action, TcpAction::Common(a) if mark(a));
    (p.http_request.iter())
        .find(|r| mark(&r.action))
        .map(|r| r.loc.clone())
        .or_else(|| {
            (p.http_response.iter())
                .find(|r| matches!(r.action, HttpResponseAction::SockOpt(FcSockOpt::Mark(_))))
                .map(|r| r.loc.clone())
        })
        .or_else(|| p.tcp_request.iter().find(|r| tcp(r)).map(|r| r.loc.clone()))
        .or_else(|| {
            p.tcp_response
                .iter()
                .find(|r| tcp(r))
                .map(|r| r.loc.clone())
        })
}

fn resolve_tracks(px: &mut [Proxy]) -> Vec<ConfigError> {
    let mut errs = Vec::new();
    let mut marks = Vec::new();
    for (pi, p) in px.iter().enumerate() {
        for s in &p.servers {
            let Some(spec) = &s.opts.track else { continue };
            let mut e = |m: String| {
                errs.push(ConfigError {
                    loc: s.loc.clone(),
                    message: m,
                })
            };
            let (ti, tj) = match track_target(px, pi, spec) {
                Ok(t) => t,
                Err(m) => {
                    e(m);
                    continue;
                }
            };
            let t = &px[ti].servers[tj];
            let tname = format!("{}/{}", px[ti].name, t.name);
            if !t.opts.check && !t.opts.agent_check && t.opts.track.is_none() {
                e(format!(
                    "unable to use {tname} for tracking as it does not have any check nor agent enabled."
                ));
                continue;
            }
            // HAProxy: across backends, both have `disable-on-404` or
            // neither (NOLB passes down the tracking chain).
            if ti != pi && p.http_check.disable_404 != px[ti].http_check.disable_404 {
                e(format!(
                    "unable to use {tname} for tracking: disable-on-404 option inconsistency."
                ));
                continue;
            }
            // Follow the chain from the tracked server: it must not come
            // back to this one.
            let me = (pi, p.servers.iter().position(|x| std::ptr::eq(x, s)));
            let mut at = (ti, tj);
            let mut looped = None;
            for _ in 0..=px.iter().map(|p| p.servers.len()).sum::<usize>() {
                if (at.0, Some(at.1)) == me {
                    looped = Some(at);
                    break;
                }
                let Some(next) = &px[at.0].servers[at.1].opts.track else {
                    break;
                };
                match track_target(px, at.0, next) {
                    Ok(n) => at = n,
                    Err(_) => break,
                }
            }
            if let Some((li, lj)) = looped {
                e(format!(
                    "unable to track {tname} as it belongs to a tracking chain looping back to {}/{}.",
                    px[li].name, px[li].servers[lj].name
                ));
                continue;
            }
            marks.push((ti, tj));
        }
    }
    for (i, j) in marks {
        px[i].servers[j].opts.referenced = true;
    }
    errs
}
