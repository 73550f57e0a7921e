//! The compiled layer-4 part of a proxy: `mode`, `tcp-request` rules,
//! `tcp-request inspect-delay`, `option tcplog`; and the checks HAProxy
//! makes on them at start.
//!
//! What HAProxy checks, and ebb with it:
//! - a `tcp-request connection|session` rule runs before any byte is
//!   read, so its condition and action may read only addresses, names,
//!   constants, variables and stick-table counters;
//! - a tcp-mode proxy has no HTTP message: conditions reading HTTP,
//!   `http-request`/`http-response` rules and `serve-files` are refused
//!   there (HAProxy ignores rules with a warning; ebb refuses them); a
//!   stats page (often inherited from `defaults`) is not served, with a
//!   warning, and `errorfile`s are unused, as in HAProxy;
//! - HTTP options inherited from `defaults` that mean nothing in TCP
//!   (`forwardfor`, `httpclose`, `http-server-close`) are ignored with a
//!   warning, as HAProxy does, and `option httplog` falls back to
//!   `option tcplog` (HAProxy's rule and message);
//! - an http frontend cannot use a tcp backend (HAProxy: error), and a tcp
//!   frontend cannot use an http backend in ebb (HAProxy upgrades the
//!   stream to HTTP; ebb does not).
//!
//! Evaluation lives with the connections that use it; this module only
//! compiles.

use std::cell::Cell;
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::sync::Arc;

use crate::config::{
    AclRef, AddrField, Condition, ConfigError, Fetch, HttpRequestAction, Loc, Proxy, ProxyMode,
    TcpAction, TcpRequestRule, TcpWhen,
};
use crate::rules::{Cond, Matcher};
use crate::sample::vars::VarScope;
use crate::sample::{cast, with_scratch, Ctx, Expr, Layer, Type, Val, VarAction};
use crate::table::{Table, Tables};

/// A compiled `tcp-request` rule.
pub struct TcpRuleRt {
    pub act: TcpAction,
    pub cond: Option<Cond>,
    /// Where it is written (`last_rule_file`, `last_rule_line`).
    pub loc: Loc,
    /// A `track-scN`'s table, found at start ([`crate::stick::track_table`]).
    pub table: Option<Arc<Table>>,
}

/// What a walk of `tcp-request` rules decided.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Verdict {
    /// No rule ended the walk: the connection goes on (HAProxy's
    /// default is to accept).
    Continue,
    Accept,
    Reject,
    /// `silent-drop`: reset, not logged.
    SilentDrop,
    /// `tcp-response content close`: the server connection is closed.
    Close,
    /// Rule N does not hold on bytes that may still change: wait for
    /// more, then resume the walk at N (HAProxy's `current_rule`).
    Wait(usize),
    /// `switch-mode http [proto h1|h2]`: the walk ends, and a tcp stream
    /// becomes HTTP (an HTTP one goes on as after `accept`).
    Upgrade(Option<bool>),
}

/// The client's addresses as `set-src`, `set-dst`, `set-src-port` and
/// `set-dst-port` left them: the source, and the destination (`None`:
/// unknown).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Addrs {
    pub src: SocketAddr,
    pub dst: Option<SocketAddr>,
}

/// Runs `rules` from rule `from` for a connection (`ctx.stk`, `ctx.vars`
/// hold its trackers and variables). `session`: the rules are
/// `connection`/`session` ones (their `track-scN` holds the entry for the
/// connection's life) rather than `content`. `may_change` (content
/// rules): set by a fetch whose answer may still change. `expect_proxy`
/// is set by `expect-proxy layer4`.
pub fn run_rules(
    rules: &[TcpRuleRt],
    from: usize,
    m: &Matcher,
    ctx: &Ctx<'_>,
    session: bool,
    may_change: Option<&Cell<bool>>,
    expect_proxy: &mut bool,
) -> Verdict {
    run_rules_addrs(
        rules,
        from,
        m,
        ctx,
        session,
        may_change,
        expect_proxy,
        None,
        None,
    )
}

/// Where a walk that may wait keeps the name a `do-resolve` rule asked
/// for: the walk waits at the rule ([`Verdict::Wait`]) while the answer
/// may still come within the inspection, and takes it when run again.
pub type Resolving = Cell<Option<Arc<crate::resolvers::Lookup>>>;

/// [`run_rules`] where `set-src`/`set-dst`/`set-src-port`/`set-dst-port`
/// may run: the rules after one see the new addresses (as HAProxy's, which
/// rewrite the connection's), and `addrs` receives the last ones for the
/// caller to keep (it must, even when the walk waits or refuses: the rules
/// before are not run again). `resolving`: a `do-resolve` rule may wait
/// for its answer (see [`Resolving`]); without it, or once the
/// inspection must decide, the rule takes only an answer there already
/// (HAProxy's `ACT_OPT_FINAL`).
#[allow(clippy::too_many_arguments)]
pub fn run_rules_addrs(
    rules: &[TcpRuleRt],
    from: usize,
    m: &Matcher,
    ctx: &Ctx<'_>,
    session: bool,
    may_change: Option<&Cell<bool>>,
    expect_proxy: &mut bool,
    addrs: Option<&Cell<Option<Addrs>>>,
    resolving: Option<&Resolving>,
) -> Verdict {
    let cur: Cell<Option<Addrs>> = Cell::new(None);
    let dstf = || match cur.get() {
        Some(a) => a.dst,
        None => (ctx.dst)(),
    };
    for (i, r) in rules.iter().enumerate().skip(from) {
        let moved;
        let ctx = match cur.get() {
            Some(a) => {
                moved = Ctx {
                    src: a.src,
                    dst: &dstf,
                    ..*ctx
                };
                &moved
            }
            None => ctx,
        };
        if let Some(c) = may_change {
            c.set(false);
        }
        // While content is inspected, a condition whose answer may still
        // change (HAProxy's ACL_TEST_MISS) makes the walk wait here.
        // Without a way to wait, the rule decides on what arrived.
        let holds = match m.holds_or_miss(r.cond.as_ref(), ctx) {
            None if may_change.is_some() => return Verdict::Wait(i),
            None => m.holds(r.cond.as_ref(), ctx),
            Some(h) => h,
        };
        if !holds {
            continue;
        }
        if !session
            && matches!(
                r.act,
                TcpAction::Accept
                    | TcpAction::Reject
                    | TcpAction::SilentDrop
                    | TcpAction::Close
                    | TcpAction::SwitchMode(_)
            )
        {
            // A content rule that ends the walk: the stream's last
            // final rule (HAProxy records none for connection and
            // session rules, which run before any stream).
            ctx.note_last_rule(&r.loc);
        }
        match &r.act {
            TcpAction::Accept => return Verdict::Accept,
            TcpAction::Reject => return Verdict::Reject,
            TcpAction::SilentDrop => return Verdict::SilentDrop,
            TcpAction::Close => return Verdict::Close,
            TcpAction::SwitchMode(p) => return Verdict::Upgrade(*p),
            TcpAction::ExpectProxy => *expect_proxy = true,
            // An HTTP stream's content rule (no caller keeping the
            // connection's): the request's addresses, as `http-request`.
            TcpAction::SetAddr(f, e) if addrs.is_none() && !session => {
                set_stream_addr(*f, e, ctx);
            }
            TcpAction::SetAddr(f, e) => {
                let was = Addrs {
                    src: ctx.src,
                    dst: (ctx.dst)(),
                };
                if let Some(a) = set_addr(*f, e, ctx, was) {
                    cur.set(Some(a));
                    if let Some(out) = addrs {
                        out.set(Some(a));
                    }
                }
            }
            TcpAction::Common(HttpRequestAction::DoResolve(d)) => {
                if do_resolve(d, ctx, resolving) {
                    return Verdict::Wait(i);
                }
            }
            TcpAction::Common(a) => run_common(a, r.table.as_ref(), ctx, session),
        }
    }
    Verdict::Continue
}

/// `set-src`, `set-dst`, `set-src-port` or `set-dst-port` on an HTTP
/// request's stream (HAProxy's `s->scf` addresses): this request's
/// fetches, log line, forwarded fields and PROXY header see them, the
/// connection's (`fc_src`...) stay, and the next request starts from the
/// connection's again.
pub(crate) fn set_stream_addr(f: AddrField, e: &Expr, ctx: &Ctx<'_>) {
    let now = Addrs {
        src: ctx.src_addr(),
        dst: ctx.dst_addr(),
    };
    let (Some(set), Some(vars)) = (set_addr(f, e, ctx, now), ctx.vars) else {
        return;
    };
    if let Ok(mut v) = vars.try_borrow_mut() {
        if matches!(f, AddrField::Src | AddrField::SrcPort) {
            v.info.src = Some(set.src);
        } else {
            v.info.dst = set.dst;
        }
    }
}

/// What `set-src`, `set-dst`, `set-src-port` or `set-dst-port` make of
/// the addresses `a`, as HAProxy 2.6's actions: an address keeps the
/// port (and takes the family of the new address); a port is cut to 16
/// bits; a destination port on an unknown destination gives 0.0.0.0. A
/// sample that does not convert changes nothing.
pub(crate) fn set_addr(f: AddrField, e: &Expr, ctx: &Ctx<'_>, a: Addrs) -> Option<Addrs> {
    let want = match f {
        AddrField::Src | AddrField::Dst => Type::Ip,
        AddrField::SrcPort | AddrField::DstPort => Type::Int,
    };
    let v = with_scratch(|s| e.eval(ctx, s).and_then(|v| cast(v, want, s)))?;
    let dst_port = a.dst.map_or(0, |d| d.port());
    let dst_ip = a.dst.map_or(IpAddr::V4(Ipv4Addr::UNSPECIFIED), |d| d.ip());
    Some(match (f, v) {
        (AddrField::Src, Val::Ip(ip)) => Addrs {
            src: SocketAddr::new(ip, a.src.port()),
            ..a
        },
        (AddrField::Dst, Val::Ip(ip)) => Addrs {
            dst: Some(SocketAddr::new(ip, dst_port)),
            ..a
        },
        (AddrField::SrcPort, Val::Int(p)) => Addrs {
            src: SocketAddr::new(a.src.ip(), p as u16),
            ..a
        },
        (AddrField::DstPort, Val::Int(p)) => Addrs {
            dst: Some(SocketAddr::new(dst_ip, p as u16)),
            ..a
        },
        _ => return None,
    })
}

/// `tcp-request content do-resolve`: true when the walk is to wait at the
/// rule for the answer (HAProxy yields while the inspection may go on;
/// once it must decide, the rule gives up the answer still to come).
fn do_resolve(d: &crate::config::DoResolve, ctx: &Ctx<'_>, resolving: Option<&Resolving>) -> bool {
    use crate::resolvers::lookup;
    let may_wait = resolving.is_some() && ctx.payload.as_ref().is_some_and(|p| p.partial);
    let asked = match resolving.and_then(Cell::take) {
        Some(l) if l.result().is_some() => {
            lookup::end(d, &l, ctx);
            return false;
        }
        Some(l) => l,
        None => match lookup::start(d, ctx) {
            Some(l) => l,
            None => return false,
        },
    };
    match resolving {
        Some(c) if may_wait => {
            c.set(Some(asked));
            true
        }
        _ => false,
    }
}

/// A `track-scN`, `sc-*` or variable action of a `tcp-request` rule
/// (`table`: a `track-scN`'s, see [`crate::stick::track_table`]).
fn run_common(a: &HttpRequestAction, table: Option<&Arc<Table>>, ctx: &Ctx<'_>, session: bool) {
    match a {
        HttpRequestAction::TrackSc { n, key, .. } => {
            // An HTTP frontend's content rules run before HAProxy counts
            // the request (`http_wait_for_request`), so their entries
            // count it; a backend's run after, and HAProxy counts it on
            // their entries when the backend's HTTP rules begin.
            let http = !session && ctx.req.is_some();
            let counts = (http && ctx.be.is_none(), http && ctx.be.is_some());
            if let Some(t) = table {
                crate::stick::track_sc(*n, key, t, ctx, session, counts);
            }
        }
        HttpRequestAction::Var(v) => v.run(ctx),
        HttpRequestAction::Capture(c) => c.run(ctx),
        HttpRequestAction::SetLogLevel(l) => crate::sample::set_log_level(ctx, *l),
        HttpRequestAction::SockOpt(o) => set_fc_opt(*o, ctx),
        HttpRequestAction::SetPriority { offset, expr } => set_priority(*offset, expr, ctx),
        other => {
            crate::stick::run_http_action(other, ctx);
        }
    }
}

/// `set-mark` / `set-tos` on the client connection's socket (HAProxy's
/// `conn_set_mark`, `conn_set_tos`: a failure changes nothing).
pub(crate) fn set_fc_opt(o: crate::config::FcSockOpt, ctx: &Ctx<'_>) {
    let Some(fc) = ctx.fc else {
        return;
    };
    let s = socket2::SockRef::from(fc);
    let _ = match o {
        crate::config::FcSockOpt::Mark(m) => s.set_mark(m),
        crate::config::FcSockOpt::Tos(t) => {
            let t = t as u32;
            match fc.local_addr() {
                // An IPv4 client of an IPv6 socket (v4-mapped) takes
                // IP_TOS, as in HAProxy.
                Ok(SocketAddr::V6(a)) if a.ip().to_ipv4_mapped().is_none() => {
                    match fc.peer_addr() {
                        Ok(SocketAddr::V6(p)) if p.ip().to_ipv4_mapped().is_some() => {
                            s.set_tos_v4(t)
                        }
                        _ => s.set_tclass_v6(t),
                    }
                }
                _ => s.set_tos_v4(t),
            }
        }
    };
}

/// `set-priority-class` / `set-priority-offset`: the expression's integer,
/// held within HAProxy's bounds (-2047..=2047 and -524287..=524287 ms), is
/// where the stream will wait in a queue; no value, no change.
pub(crate) fn set_priority(offset: bool, e: &Expr, ctx: &Ctx<'_>) {
    let Some(v) = e.eval_int(ctx) else {
        return;
    };
    let Some(mut vars) = ctx.vars.and_then(|v| v.try_borrow_mut().ok()) else {
        return;
    };
    if offset {
        vars.info.prio_offset = v.clamp(-0x7ffff, 0x7ffff) as i32;
    } else {
        vars.info.prio_class = v.clamp(-0x7ff, 0x7ff) as i16;
    }
}

/// Why a content rule of an http-mode proxy may not read raw bytes.
fn raw_bytes_in_http(p: &Proxy, kw: &str) -> String {
    format!(
        "proxy '{}' is in 'mode http': ebb runs its '{kw}' rules once on the parsed message head, so fetches of raw bytes ('req.len', 'req.payload', 'res.len', 'req.ssl_*', ...) are not supported there (use HTTP fetches)",
        p.name
    )
}

/// The layer-4 part of a compiled proxy.
#[derive(Default)]
pub struct TcpRt {
    /// `mode tcp`.
    pub tcp_mode: bool,
    pub conn_rules: Vec<TcpRuleRt>,
    /// `tcp-request session` rules.
    pub sess_rules: Vec<TcpRuleRt>,
    pub content_rules: Vec<TcpRuleRt>,
    /// `tcp-request inspect-delay`, ms; 0: content rules run on what the
    /// first read brought (HAProxy: without a delay they run at once).
    pub inspect_delay: u32,
    /// Some content rule or `use_backend` reads the request's bytes
    /// (`req.len`, `req.payload`, `req.ssl_*`), for `show`-style reports;
    /// waiting is decided per rule at run time (HAProxy's may-change).
    pub reads_payload: bool,
    /// A tcp proxy's content rule reads HTTP (`url`, `path`, `hdr`...):
    /// its session parses the bytes under inspection as an HTTP/1 request
    /// head (HAProxy parses a tcp stream's request on the fly for them).
    pub reads_http: bool,
    /// `option tcplog` (or `option httplog` in a tcp proxy).
    pub tcplog: bool,
    pub dontlognull: bool,
    /// `option logasap`: the line goes when the server connection is
    /// established.
    pub logasap: bool,
    /// `tcp-response content` rules (a tcp backend's).
    pub res_rules: Vec<TcpRuleRt>,
    /// `tcp-response inspect-delay`, ms.
    pub res_inspect_delay: u32,
    /// `timeout tunnel` when set (ms): it replaces `timeout client` and
    /// `timeout server` once a tcp session is connected.
    pub tunnel: Option<u32>,
    /// `option splice-*` bits (`config::SPLICE_*`); a session splices a
    /// direction that its frontend or its backend asks for, as HAProxy.
    pub splice: u8,
    /// A tcp frontend with a `switch-mode http` rule (HAProxy's
    /// `PR_O_HTTP_UPG`): its HTTP directives apply once a stream is HTTP.
    pub http_upg: bool,
    /// `option independent-streams`: data written to this proxy's side
    /// (the client for a frontend, the server for a backend) does not
    /// refresh that side's read timeout.
    pub indep_streams: bool,
}

/// `timeout tunnel` of a proxy, in ms.
pub fn tunnel_ms(p: &Proxy) -> Option<u32> {
    p.timeouts
        .tunnel
        .map(|d| d.as_millis().clamp(1, u32::MAX as u128 / 2) as u32)
}

fn err(loc: &Loc, message: impl Into<String>) -> ConfigError {
    ConfigError {
        loc: loc.clone(),
        message: message.into(),
    }
}

/// The deepest layer a condition reads.
pub fn cond_layer(p: &Proxy, c: &Condition) -> Layer {
    let test_layer = |f: &Fetch| match f {
        Fetch::Src | Fetch::Always(_) => Layer::L4,
        Fetch::Sample(e) => e.layer(),
        _ => Layer::Http,
    };
    c.terms
        .iter()
        .flatten()
        .map(|t| match &t.acl {
            AclRef::Inline(test) => test_layer(&test.fetch),
            AclRef::Named { index, .. } => p
                .acls
                .get(*index)
                .map(|a| a.tests.iter().map(|t| test_layer(&t.fetch)).max())
                .unwrap_or(None)
                .unwrap_or(Layer::L4),
        })
        .max()
        .unwrap_or(Layer::L4)
}

/// The expressions an action evaluates.
fn action_exprs(a: &TcpAction) -> Vec<&Expr> {
    match a {
        TcpAction::Common(HttpRequestAction::TrackSc { key, .. }) => vec![&**key],
        TcpAction::Common(HttpRequestAction::ScSetGpt0(_, e)) => vec![&**e],
        TcpAction::Common(HttpRequestAction::ScSetGpt { expr, .. }) => vec![&**expr],
        TcpAction::SetAddr(_, e) => vec![&**e],
        TcpAction::Common(HttpRequestAction::Var(VarAction::Set(_, e))) => vec![&**e],
        TcpAction::Common(HttpRequestAction::Capture(c)) => vec![&*c.expr],
        _ => Vec::new(),
    }
}

/// Whether a condition has a fetch `hit` says yes to.
fn cond_any(p: &Proxy, c: &Condition, hit: impl Fn(&Fetch) -> bool) -> bool {
    c.terms.iter().flatten().any(|t| match &t.acl {
        AclRef::Inline(test) => hit(&test.fetch),
        AclRef::Named { index, .. } => p
            .acls
            .get(*index)
            .is_some_and(|a| a.tests.iter().any(|t| hit(&t.fetch))),
    })
}

/// Whether a condition reads what the handshake settled (`ssl_fc_sni`,
/// `ssl_fc_protocol`...), the client certificate (`ssl_c_*`,
/// `ssl_fc_has_crt`) or the one served (`ssl_f_*`): known after it.
fn cond_reads_sni(p: &Proxy, c: &Condition) -> bool {
    cond_any(p, c, |f| {
        matches!(f, Fetch::Sample(e) if ["ssl_fc_", "ssl_c_", "ssl_f_"]
            .iter()
            .any(|n| e.text().starts_with(n)))
    })
}

/// Whether a rule reads the raw bytes of the message (`req.len`,
/// `res.payload`, ...) in its condition or its action.
fn reads_raw(p: &Proxy, r: &TcpRequestRule) -> bool {
    let fmt_raw = matches!(&r.action,
        TcpAction::Common(HttpRequestAction::Var(VarAction::SetFmt(_, f))) if f.layer() == Layer::Payload);
    fmt_raw
        || action_exprs(&r.action)
            .iter()
            .any(|e| e.layer() == Layer::Payload)
        || r.cond.as_ref().is_some_and(|c| {
            cond_any(
                p,
                c,
                |f| matches!(f, Fetch::Sample(e) if e.layer() == Layer::Payload),
            )
        })
}

fn compile_rule(
    p: &Proxy,
    m: &Matcher,
    r: &TcpRequestRule,
    tcp: bool,
    tables: &Tables,
) -> Result<TcpRuleRt, ConfigError> {
    let early = r.when != TcpWhen::Content;
    let which = match r.when {
        TcpWhen::Connection => "connection",
        TcpWhen::Session => "session",
        TcpWhen::Content => "content",
    };
    let exprs = action_exprs(&r.action);
    let mut layer = exprs.iter().map(|e| e.layer()).max().unwrap_or(Layer::L4);
    if let TcpAction::Common(HttpRequestAction::Var(VarAction::SetFmt(_, f))) = &r.action {
        layer = layer.max(f.layer());
    }
    if let Some(c) = &r.cond {
        layer = layer.max(cond_layer(p, c));
        if r.when == TcpWhen::Session && cond_reads_sni(p, c) {
            return Err(err(
                &r.loc,
                "'tcp-request session' rules run before ebb's TLS handshake: 'ssl_fc_sni' and the client certificate ('ssl_c_*', 'ssl_fc_has_crt') are not known there (use 'tcp-request content' rules)",
            ));
        }
    }
    if early && layer > Layer::L4 {
        return Err(err(
            &r.loc,
            format!("'tcp-request {which}' runs before any byte is read: its condition and action may only use addresses, names, counters and variables (use 'tcp-request content' with 'tcp-request inspect-delay')"),
        ));
    }
    if !tcp && reads_raw(p, r) {
        return Err(err(&r.loc, raw_bytes_in_http(p, "tcp-request content")));
    }
    if let TcpAction::Common(HttpRequestAction::Capture(_)) = &r.action {
        // The slot is the frontend's, shown by `%hr` in an HTTP log line;
        // ebb's tcp sessions log `option tcplog`'s fixed line only.
        if tcp {
            return Err(err(
                &r.loc,
                format!("proxy '{}' is in 'mode tcp': 'tcp-request content capture' is supported in 'mode http' only (ebb's tcp log line has no captures)", p.name),
            ));
        }
        if !p.kind.is_frontend() {
            return Err(err(
                &r.loc,
                format!("'tcp-request content capture': proxy '{}' has no frontend capability (captures are a frontend's)", p.name),
            ));
        }
    }
    if let TcpAction::Common(HttpRequestAction::Var(v)) = &r.action {
        let (VarAction::Set(vr, _) | VarAction::SetFmt(vr, _) | VarAction::Unset(vr)) = v;
        if early && !matches!(vr.scope, VarScope::Proc | VarScope::Sess) {
            return Err(err(
                &r.loc,
                format!("'tcp-request {which}' rules run before any transaction exists: only 'sess' and 'proc' variables can be set there (HAProxy drops the others)"),
            ));
        }
        if matches!(vr.scope, VarScope::Res) {
            return Err(err(
                &r.loc,
                "'res' variables cannot be set by 'tcp-request' rules",
            ));
        }
    }
    let table = match &r.action {
        TcpAction::Common(a) => {
            crate::stick::track_table(a, &p.name, tables).map_err(|e| err(&r.loc, e))?
        }
        _ => None,
    };
    Ok(TcpRuleRt {
        act: r.action.clone(),
        cond: m.opt_cond(r.cond.as_ref())?,
        loc: r.loc.clone(),
        table,
    })
}

/// Whether a `tcp-request` rule's condition or action reads HTTP.
fn rule_reads_http(p: &Proxy, r: &TcpRequestRule) -> bool {
    let mut layer = action_exprs(&r.action)
        .iter()
        .map(|e| e.layer())
        .max()
        .unwrap_or(Layer::L4);
    if let TcpAction::Common(HttpRequestAction::Var(VarAction::SetFmt(_, f))) = &r.action {
        layer = layer.max(f.layer());
    }
    if let Some(c) = &r.cond {
        layer = layer.max(cond_layer(p, c));
    }
    layer == Layer::Http
}

/// The `tcp-response` part of a proxy (a backend's, or a listen
/// section's backend side): its rules and inspect delay.
pub fn response_part(p: &Proxy, m: &Matcher) -> Result<TcpRt, ConfigError> {
    let tcp = p.mode == ProxyMode::Tcp;
    let mut rt = TcpRt::default();
    for r in &p.tcp_response {
        let layer = r.cond.as_ref().map_or(Layer::L4, |c| cond_layer(p, c)).max(
            action_exprs(&r.action)
                .iter()
                .map(|e| e.layer())
                .max()
                .unwrap_or(Layer::L4),
        );
        if tcp && layer == Layer::Http {
            return Err(err(
                &r.loc,
                format!(
                    "proxy '{}' is in 'mode tcp': this rule reads HTTP, which a tcp-mode proxy never parses",
                    p.name
                ),
            ));
        }
        if !tcp && layer > Layer::L4 {
            return Err(err(
                &r.loc,
                format!(
                    "proxy '{}' is in 'mode http': HAProxy runs 'tcp-response content' rules there before the response head is parsed, so HTTP and payload fetches never match in them; ebb refuses them (use 'http-response' rules)",
                    p.name
                ),
            ));
        }
        rt.res_rules.push(TcpRuleRt {
            act: r.action.clone(),
            cond: m.opt_cond_response(r.cond.as_ref())?,
            loc: r.loc.clone(),
            // (`tcp-response` rules do not track.)
            table: None,
        });
    }
    rt.res_inspect_delay = p
        .res_inspect_delay
        .map(|d| d.as_millis().min(u32::MAX as u128 / 2) as u32)
        .unwrap_or(0);
    Ok(rt)
}

/// Compiles a proxy's layer-4 part, with HAProxy's start-time checks.
/// `warnings` receives what HAProxy warns about and ignores.
pub fn compile(
    p: &Proxy,
    m: &Matcher,
    tables: &Tables,
    warnings: &mut Vec<String>,
) -> Result<TcpRt, ConfigError> {
    let tcp = p.mode == ProxyMode::Tcp;
    let mut rt = TcpRt {
        tcp_mode: tcp,
        inspect_delay: p
            .inspect_delay
            .map(|d| d.as_millis().min(u32::MAX as u128 / 2) as u32)
            .unwrap_or(0),
        tcplog: p.options.tcplog || (tcp && p.options.httplog),
        dontlognull: p.options.dontlognull,
        logasap: p.options.logasap,
        tunnel: tunnel_ms(p),
        splice: if tcp { p.options.splice } else { 0 },
        indep_streams: p.options.indep_streams.is_some(),
        ..TcpRt::default()
    };
    // A bind line's `proto` is a multiplexer of the proxy's mode
    // (HAProxy: "MUX protocol ... is not usable for 'bind ...'").
    for b in &p.binds {
        let proto = match (tcp, b.proto_h1, b.proto_h2, b.proto_none) {
            (true, true, _, _) => "h1",
            (true, _, true, _) => "h2",
            (false, _, _, true) => "none",
            _ => continue,
        };
        return Err(err(
            &b.loc,
            format!(
                "{} '{}': MUX protocol '{proto}' is not usable for 'bind' in 'mode {}'",
                p.kind.name(),
                p.name,
                if tcp { "tcp" } else { "http" }
            ),
        ));
    }
    for r in &p.tcp_request {
        let c = compile_rule(p, m, r, tcp, tables)?;
        rt.http_upg |= tcp && matches!(r.action, TcpAction::SwitchMode(_));
        match r.when {
            TcpWhen::Content => {
                // HTTP fetches in a tcp proxy's content rules: the request
                // head is parsed from the bytes under inspection.
                rt.reads_http |= tcp && rule_reads_http(p, r);
                rt.reads_payload |= r
                    .cond
                    .as_ref()
                    .is_some_and(|c| cond_layer(p, c) == Layer::Payload)
                    || action_exprs(&r.action)
                        .iter()
                        .any(|e| e.layer() == Layer::Payload);
                rt.content_rules.push(c);
            }
            TcpWhen::Session => rt.sess_rules.push(c),
            TcpWhen::Connection => rt.conn_rules.push(c),
        }
    }
    if rt.http_upg && p.default_backend.is_none() && p.use_backends.is_empty() {
        if let Some(srv) = p.servers.first() {
            // HAProxy warns, and closes every stream the rule upgrades.
            return Err(err(
                &srv.loc,
                format!("proxy '{}': 'switch-mode http' configured for a tcp proxy with no backend: incoming connections upgraded to HTTP cannot be routed to its tcp servers (HAProxy warns and closes them; use a 'mode http' backend)", p.name),
            ));
        }
    }
    let res = response_part(p, m)?;
    rt.res_rules = res.res_rules;
    rt.res_inspect_delay = res.res_inspect_delay;
    if !tcp {
        if let Some(loc) = &p.options.splice_loc {
            return Err(err(
                loc,
                format!(
                    "proxy '{}' is in 'mode http': 'option splice-auto|splice-request|splice-response' is supported in 'mode tcp' only by ebb (its HTTP path copies bodies; a splice option set in 'defaults' applies here too)",
                    p.name
                ),
            ));
        }
        return Ok(rt);
    }
    // What a tcp-mode section may not hold.
    let refuse = |what: &str, loc: &Loc| {
        Err(err(
            loc,
            format!(
                "proxy '{}' is in 'mode tcp': {what} needs 'mode http'",
                p.name
            ),
        ))
    };
    // With `switch-mode http`, the HTTP rules apply to the streams once
    // HTTP (HAProxy's "conditionally evaluated if the HTTP upgrade is
    // performed").
    if let Some(r) = p.http_request.first().filter(|_| !rt.http_upg) {
        return refuse("'http-request' (or 'redirect')", &r.loc);
    }
    if let Some(r) = p.http_response.first().filter(|_| !rt.http_upg) {
        return refuse("'http-response'", &r.loc);
    }
    if p.serve_files.is_some() {
        return refuse("'serve-files'", &p.loc);
    }
    // A tcp session is logged with the format at its end, as HAProxy
    // does; HAProxy refuses its HTTP variables there.
    let formats = [&p.log_format, &p.log_format_sd, &p.error_log_format];
    for f in formats
        .into_iter()
        .flatten()
        .filter(|_| p.kind.is_frontend())
    {
        if let Some(why) = f.value.tcp_refusal() {
            return Err(err(
                &f.loc,
                format!("proxy '{}' is in 'mode tcp': {why}", p.name),
            ));
        }
    }
    if p.stats.effective_uri().is_some() {
        warnings.push(format!(
            "{}: the stats page of proxy '{}' is not served as it requires HTTP mode.",
            p.loc, p.name
        ));
    }
    for u in &p.use_backends {
        let http = u
            .cond
            .as_ref()
            .is_some_and(|c| cond_layer(p, c) == Layer::Http);
        if http && rt.http_upg {
            // Parsed from the bytes in a tcp stream (HAProxy parses them
            // on the fly), read from the request once HTTP.
            rt.reads_http = true;
        } else if http {
            return Err(err(
                &u.loc,
                format!(
                    "proxy '{}' is in 'mode tcp': this condition reads HTTP, which a tcp-mode proxy never parses",
                    p.name
                ),
            ));
        }
        if u.cond
            .as_ref()
            .is_some_and(|c| cond_layer(p, c) == Layer::Payload)
        {
            rt.reads_payload = true;
        }
    }
    if p.kind.is_frontend() && p.options.httplog && !p.options.tcplog {
        warnings.push(format!(
            "{}: 'option httplog' not usable with proxy '{}' (needs 'mode http'). Falling back to 'option tcplog'.",
            p.loc, p.name
        ));
    }
    for (set, o) in [
        (p.options.forwardfor.is_some(), "forwardfor"),
        (p.options.originalto.is_some(), "originalto"),
    ] {
        if set {
            warnings.push(format!(
                "{}: 'option {o}' ignored for proxy '{}' as it requires HTTP mode.",
                p.loc, p.name
            ));
        }
    }
    if p.options.conn_mode != crate::config::HttpConnMode::KeepAlive {
        warnings.push(format!(
            "{}: 'option httpclose'/'http-server-close' ignored for proxy '{}' as it requires HTTP mode.",
            p.loc, p.name
        ));
    }
    Ok(rt)
}

/// The balance algorithm a backend runs: in a tcp backend, the layer-7
/// hashes (`uri`, `hdr`) fall back to round robin with a warning, as in
/// HAProxy ("Layer 7 hash not possible ... Falling back to round robin").
pub fn balance_for_mode(p: &Proxy, warnings: &mut Vec<String>) -> crate::config::Balance {
    use crate::config::Balance;
    match &p.balance {
        Balance::Uri { .. } | Balance::UrlParam { .. } | Balance::Hdr { .. }
            if p.mode == ProxyMode::Tcp =>
        {
            warnings.push(format!(
                "{}: Layer 7 hash not possible for backend '{}' (needs 'mode http'). Falling back to round robin.",
                p.loc, p.name
            ));
            Balance::RoundRobin
        }
        b => b.clone(),
    }
}

/// The error for a frontend using a backend of another mode, if any.
pub fn mode_mismatch(fe: &Proxy, be: &Proxy, loc: &Loc) -> Option<ConfigError> {
    match (fe.mode, be.mode) {
        (ProxyMode::Http, ProxyMode::Tcp) => Some(err(
            loc,
            format!(
                "frontend '{}' (mode http) cannot use backend '{}' (mode tcp)",
                fe.name, be.name
            ),
        )),
        // A tcp stream reaching an HTTP backend becomes HTTP (`tcp::upgrade`).
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    /// The first compile error of a configuration, as printed.
    fn compile_err(cfg: &str) -> String {
        let c = crate::config::parse_str("t.cfg", cfg).unwrap();
        match crate::proxy::compile(&c) {
            Ok(_) => panic!("compiled"),
            Err(e) => e[0].to_string(),
        }
    }

    fn compiles(cfg: &str) -> crate::proxy::Compiled {
        let c = crate::config::parse_str("t.cfg", cfg).unwrap();
        match crate::proxy::compile(&c) {
            Ok(c) => c,
            Err(e) => panic!("{}", e[0]),
        }
    }

    #[test]
    fn modes_must_match_across_use_backend() {
        let e = compile_err(
            "frontend f\n    mode http\n    bind :80\n    default_backend b\nbackend b\n    mode tcp\n    server s 127.0.0.1:1\n",
        );
        assert!(
            e.starts_with("t.cfg:4: ")
                && e.contains("(mode http) cannot use backend 'b' (mode tcp)"),
            "{e}"
        );
        // A tcp frontend may use an HTTP backend (the stream upgrades).
        compiles(
            "frontend f\n    mode tcp\n    bind :80\n    use_backend b if TRUE\nbackend b\n    server s 127.0.0.1:1\n    mode http\n",
        );
    }

    #[test]
    fn switch_mode_lets_a_tcp_frontend_hold_http_rules() {
        let e = compile_err(
            "frontend f\n    mode tcp\n    bind :80\n    http-request deny\n    default_backend b\nbackend b\n    server s 127.0.0.1:1\n",
        );
        assert!(e.starts_with("t.cfg:4: "), "{e}");
        let c = compiles(
            "frontend f\n    mode tcp\n    bind :80\n    tcp-request content switch-mode http proto h2 if HTTP\n    http-request deny\n    use_backend b if { path /x }\n    default_backend b\nbackend b\n    mode http\n    server s 127.0.0.1:1\n",
        );
        let l4 = &c.frontends[0].l4;
        assert!(l4.http_upg && l4.reads_http); // A listen section with only its own tcp servers: refused (HAProxy
                                               // warns, then closes every upgraded stream).
        let e = compile_err(
            "listen l\n    mode tcp\n    bind :80\n    tcp-request content switch-mode http\n    server s 127.0.0.1:1\n",
        );
        assert!(
            e.starts_with("t.cfg:5: ") && e.contains("no backend"),
            "{e}"
        );
    }

    #[test]
    fn counters_and_actions_at_each_level() {
        // Counters are known at accept: connection rules may read them.
        let c = compiles(
            "frontend f\n    bind :80\n    stick-table type ip size 1k store conn_rate(10s)\n    tcp-request connection track-sc0 src\n    tcp-request connection reject if { sc0_conn_rate gt 10 }\n    tcp-request session set-var(sess.n) sc0_conn_rate\n    default_backend b\nbackend b\n    server s 127.0.0.1:1\n",
        );
        assert_eq!(c.frontends[0].l4.conn_rules.len(), 2);
        assert_eq!(c.frontends[0].l4.sess_rules.len(), 1);
        // A key read from the payload needs content rules.
        let e = compile_err(
            "listen l\n    mode tcp\n    bind :80\n    stick-table type string len 32 size 1k\n    tcp-request connection track-sc0 req.ssl_sni\n    server s 127.0.0.1:1\n",
        );
        assert!(
            e.starts_with("t.cfg:5: ") && e.contains("before any byte"),
            "{e}"
        );
        // No transaction exists at connection time.
        let e = compile_err(
            "listen l\n    mode tcp\n    bind :80\n    tcp-request connection set-var(txn.x) src\n    server s 127.0.0.1:1\n",
        );
        assert!(
            e.starts_with("t.cfg:4: ") && e.contains("'sess' and 'proc'"),
            "{e}"
        );
        // An HTTP key in a tcp proxy: its sessions parse the request.
        let c = compiles(
            "listen l\n    mode tcp\n    bind :80\n    stick-table type string len 32 size 1k\n    tcp-request content track-sc0 hdr(host)\n    server s 127.0.0.1:1\n",
        );
        assert!(c.frontends[0].l4.reads_http);
        // ssl_fc_sni is not known before ebb's handshake.
        let e = compile_err(
            "frontend f\n    bind :80\n    tcp-request session reject if { ssl_fc_sni -m found }\n    default_backend b\nbackend b\n    server s 127.0.0.1:1\n",
        );
        assert!(
            e.starts_with("t.cfg:3: ") && e.contains("ssl_fc_sni"),
            "{e}"
        );
        // Nor is the client's certificate.
        let e = compile_err(
            "frontend f\n    bind :80\n    tcp-request session reject unless { ssl_c_verify 0 }\n    default_backend b\nbackend b\n    server s 127.0.0.1:1\n",
        );
        assert!(e.starts_with("t.cfg:3: ") && e.contains("ssl_c_"), "{e}");
        // A response rule reading the request would never match.
        let e = compile_err(
            "listen l\n    mode tcp\n    bind :80\n    tcp-response content reject if { req.len gt 0 }\n    server s 127.0.0.1:1\n",
        );
        assert!(
            e.starts_with("t.cfg:4: ") && e.contains("reads the request"),
            "{e}"
        );
        // Stick rules in a tcp backend compile.
        let c = compiles(
            "listen l\n    mode tcp\n    bind :80\n    stick-table type ip size 1k\n    stick on src\n    server s 127.0.0.1:1\n",
        );
        assert_eq!(c.backends[0].stick.len(), 1);
    }

    #[test]
    fn rules_read_only_what_their_layer_has() {
        let e = compile_err(
            "listen l\n    mode tcp\n    bind :80\n    tcp-request connection reject if { req.len gt 0 }\n    server s 127.0.0.1:1\n",
        );
        assert!(
            e.starts_with("t.cfg:4: ") && e.contains("before any byte is read"),
            "{e}"
        );
        let c = compiles(
            "listen l\n    mode tcp\n    bind :80\n    acl p path /x\n    tcp-request content reject if p\n    server s 127.0.0.1:1\n",
        );
        assert!(c.frontends[0].l4.reads_http);
        // `use_backend` on HTTP in a tcp proxy stays refused.
        let e = compile_err(
            "frontend f\n    mode tcp\n    bind :80\n    use_backend b if { path /x }\nbackend b\n    mode tcp\n    server s 127.0.0.1:1\n",
        );
        assert!(
            e.starts_with("t.cfg:4: ") && e.contains("reads HTTP"),
            "{e}"
        );
        let e = compile_err(
            "listen l\n    mode tcp\n    bind :80\n    http-request deny\n    server s 127.0.0.1:1\n",
        );
        assert!(
            e.starts_with("t.cfg:4: ") && e.contains("needs 'mode http'"),
            "{e}"
        );
        // In mode http, content rules run once on the parsed head: raw
        // bytes are refused there; response rules read no HTTP (HAProxy
        // runs them before the head is analysed).
        let c = compiles(
            "frontend f\n    bind :80\n    tcp-request content reject if { path /x }\n    default_backend b\n    mode http\nbackend b\n    tcp-request content accept if { hdr(host) a }\n    tcp-response content reject if { var(txn.x) -m found }\n    server s 127.0.0.1:1\n    mode http\n",
        );
        assert_eq!(c.frontends[0].l4.content_rules.len(), 1);
        assert_eq!(c.backends[0].l4.content_rules.len(), 1);
        assert_eq!(c.backends[0].l4.res_rules.len(), 1);
        let e = compile_err(
            "frontend f\n    bind :80\n    tcp-request content reject if { path /x } || { req.len gt 3 }\n    default_backend b\n    mode http\nbackend b\n    server s 127.0.0.1:1\n    mode http\n",
        );
        assert!(
            e.starts_with("t.cfg:3: ") && e.contains("'mode http'"),
            "{e}"
        );
        // A capture slot is a frontend's, logged in HTTP only.
        let c = compiles(
            "frontend f\n    bind :80\n    tcp-request content capture req.hdr(host) len 8\n    default_backend b\n    mode http\nbackend b\n    server s 127.0.0.1:1\n    mode http\n",
        );
        assert_eq!(c.frontends[0].l4.content_rules.len(), 1);
        let e = compile_err(
            "listen l\n    mode tcp\n    bind :80\n    tcp-request content capture src len 8\n    server s 127.0.0.1:1\n",
        );
        assert!(
            e.starts_with("t.cfg:4: ") && e.contains("'mode http' only"),
            "{e}"
        );
        let e = compile_err(
            "frontend f\n    bind :80\n    default_backend b\n    mode http\nbackend b\n    tcp-request content capture src len 8\n    server s 127.0.0.1:1\n    mode http\n",
        );
        assert!(
            e.starts_with("t.cfg:6: ") && e.contains("no frontend capability"),
            "{e}"
        );
        let e = compile_err(
            "frontend f\n    bind :80\n    default_backend b\n    mode http\nbackend b\n    tcp-response content reject if { res.hdr(x) -m found }\n    server s 127.0.0.1:1\n    mode http\n",
        );
        assert!(
            e.starts_with("t.cfg:6: ") && e.contains("before the response head"),
            "{e}"
        );
        // Connection rules work in HTTP mode too; SNI routing compiles.
        let c = compiles(
            "frontend f\n    mode tcp\n    bind :443\n    tcp-request inspect-delay 5s\n    tcp-request connection accept if { src 127.0.0.1 }\n    use_backend a if { req.ssl_sni -i a.example }\n    default_backend b\nbackend a\n    mode tcp\n    server s 127.0.0.1:1\nbackend b\n    mode tcp\n    timeout tunnel 1h\n    server s 127.0.0.1:2\n",
        );
        let f = &c.frontends[0];
        assert!(f.l4.tcp_mode && f.l4.reads_payload && f.l4.inspect_delay == 5000);
        assert_eq!(f.l4.conn_rules.len(), 1);
        assert_eq!(c.backends[1].l4.tunnel, Some(3_600_000));
        assert_eq!(c.backends[0].l4.tunnel, None);
    }

    #[test]
    fn log_format_in_a_tcp_proxy_refuses_http_variables() {
        compiles(
            "defaults\n    mode tcp\n    log-format \"%ci %b %ts %B\"\nlisten l\n    bind :80\n    server s 127.0.0.1:1\n",
        );
        let e = compile_err(
            "defaults\n    mode tcp\n    log-format \"%ci %b %HU\"\nlisten l\n    bind :80\n    server s 127.0.0.1:1\n",
        );
        assert!(
            e.starts_with("t.cfg:3: ") && e.contains("'%HU' is reserved for HTTP mode"),
            "{e}"
        );
        let e = compile_err(
            "defaults\n    mode tcp\n    log-format \"%[res.hdr(server)]\"\nlisten l\n    bind :80\n    server s 127.0.0.1:1\n",
        );
        assert!(e.contains("reads HTTP"), "{e}");
        // A backend writes no log line of its own: a log-format it
        // inherits is unused in HAProxy too.
        compiles(
            "defaults fmt\n    mode http\n    log-format \"%ci %b\"\nfrontend f\n    bind :80\n    default_backend b\nbackend b\n    server s 127.0.0.1:1\ndefaults\nfrontend t\n    mode tcp\n    bind :81\n    option tcplog\n    default_backend tb\nbackend tb from fmt\n    mode tcp\n    server s 127.0.0.1:1\n",
        );
    }

    #[test]
    fn http_options_inherited_by_a_tcp_proxy_warn_as_haproxy_does() {
        let c = compiles(
            "defaults\n    mode http\n    option httplog\n    option forwardfor\nlisten l\n    mode tcp\n    bind :80\n    server s 127.0.0.1:1\n",
        );
        assert!(c.frontends[0].l4.tcplog, "httplog falls back to tcplog");
        assert!(c
            .warnings
            .iter()
            .any(|w| w.contains("Falling back to 'option tcplog'")));
        assert!(c
            .warnings
            .iter()
            .any(|w| w.contains("'option forwardfor' ignored")));
    }
}
