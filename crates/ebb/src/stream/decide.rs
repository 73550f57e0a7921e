//! The request's analysis: a complete head arrived ([`Stream::answer`]);
//! the frontend's checks (`monitor-uri`, captures, `tcp-request content`
//! rules), its `http-request` rules, the choice of backend, the
//! backend's rules, and what answers the request ([`Act`]), decided
//! before anything is written ([`super::dispatch`] carries it out).

use std::sync::Arc;

use sched::Ctx;

use super::body::{BodyNow, BodyWait};
use super::{sample_ctx, Stream, H1};
use crate::config::HttpRequestAction;
use crate::http1::{Drain, Method, TargetForm};
use crate::mux::h1::client::{dst_of, In};
use crate::proxy::{redirect_location, BackendKind, FrontendRt};
use crate::rules::ReqView;
use crate::serve::files::normalize_path;

/// Where the request's rules go on once its body is there.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Resume {
    /// From the start (a new request).
    Start,
    /// The frontend's `http-request` rules from this one.
    Fe(usize),
    /// Backend `.0` chosen: its `http-request` rules from this one, or
    /// (`None`) its content rules first (its `option
    /// http-buffer-request`).
    Be(usize, Option<usize>),
}

/// What answers a request, decided before anything is written.
pub(super) enum Act {
    /// `monitor-uri`: whether a `monitor fail` condition holds (503).
    Monitor(bool),
    Options,
    /// A CONNECT request to the file server, or from an HTTP/2 client:
    /// 405 (no tunnel opened).
    Connect,
    /// An `http-request return` rule: (the backend's, or the frontend's
    /// when `None`; index).
    Return(Option<usize>, usize, Option<Box<crate::proxy::Evaluated>>),
    /// A server backend, and the request as rules rewrote it (`None`:
    /// unchanged).
    Proxy(usize, Option<Box<crate::rewrite::Edited>>),
    /// A redirect: the location, the code, and the rule (where it is
    /// written).
    /// The location, the code, the rule, its `Set-Cookie` value.
    Redirect(Vec<u8>, u16, Option<crate::config::Loc>, Option<String>),
    /// `http-request deny` (the rule's backend, `None` for the
    /// frontend's; the status).
    Deny(Option<usize>, u16),
    /// `http-request tarpit`: this status after `timeout tarpit` (the
    /// rule's backend, as `Deny`).
    Tarpit(Option<usize>, u16),
    NoBackend,
    /// A file backend: the clean path, or the status refusing it.
    Files(usize, Result<CleanPath, u16>),
    /// A failed rewrite (HAProxy's strict mode): 500.
    Error(u16),
    /// The stats page (`stats uri`); whether `stats admin` allows actions.
    Stats(Arc<crate::proxy::StatsRt>, bool, Option<usize>),
    /// `http-request use-service prometheus-exporter`.
    Service,
    /// An answer from a cache (`http-request cache-use`).
    Cache(usize, Box<crate::httpcache::Hit>),
    /// The rules wait for the request's body first.
    WaitBody(Box<BodyWait>),
    /// The rules wait for a `do-resolve` rule's answer (`lookup`).
    WaitResolve(Box<BodyWait>),
    /// `http-request auth`: 401 with this realm (the rule's backend, or
    /// the frontend's).
    Auth(Option<usize>, String),
    /// A `reject` (true: `silent-drop`) of the frontend's rules (`None`)
    /// or a backend's: the connection closes without an answer; the last
    /// field says whether the log knows the request line (not when the
    /// frontend's `tcp-request content` rules refused it).
    Reject(bool, Option<usize>, bool),
    /// A tcp frontend's upgraded stream routed to this tcp backend: the
    /// connection closes without an answer, logged `IR`.
    TcpBackend(usize),
}

/// Where a file request's clean path is ([`Act::Files`]).
pub(super) enum CleanPath {
    /// The first that many bytes of the head's path: already clean
    /// (`serve::files::clean_len`), read in place.
    Head(usize),
    /// Made by `serve::files::normalize_path`.
    Made(String),
}

impl Stream {
    /// A complete request head is in `head`: decide and queue the answer.
    pub(super) fn answer(&mut self, c: &mut H1, ctx: &mut Ctx) {
        c.sess
            .requests
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        c.fe.rates.note_req();
        // What the client sent, as HAProxy counts it (`crate::http1::htx`): the head
        // now, the body as it is forwarded (`%U`, the stats' `bin`).
        let h = &c.head;
        c.bytes_in = crate::http1::htx::head_size(
            h.method_span.len() + h.target.len() + 8,
            c.rbuf.get(c.rstart..c.rend).unwrap_or_default(),
            &h.headers,
        );
        self.resp_start = c.wbuf.len();
        {
            let v = c.vars.get_mut();
            v.begin_request();
            v.info.accept_date = Some(c.sess.accepted());
            v.info.req_age_ms = c.req_start.map_or(0, |t| ctx.now().wrapping_sub(t));
            // The request line for the `capture.req.*` fetches: the
            // parser took it as `method SP target SP HTTP/1.x` (one space
            // each, as the HTTP/2 side writes it too), so its end is known
            // from the head without a scan for it.
            let buf = &c.rbuf[c.rstart..c.rend];
            let start = c.head.method_span.start as usize;
            let end = (c.head.target.end as usize + b" HTTP/1.1".len()).min(buf.len());
            v.req_line.clear();
            v.req_line
                .extend_from_slice(buf.get(start..end).unwrap_or_default());
        }
        c.stk.begin(ctx.now());
        let mut keep_alive =
            crate::drain::keep_alive(c.head.keep_alive && c.fe.keep_alive, c.stopping);
        // A body we will not read: with `Expect: 100-continue` the client
        // has not sent it yet, so answer and close rather than wait for it;
        // otherwise drop it as it comes, before the next request.
        // A body past `tune.http.drain-max` is not read at all.
        let (drain, drain_keep) = Drain::plan(c.head.framing, c.w.limits.max_drain);
        let mut next = In::Head;
        self.unread_body_close = false;
        match drain {
            Some(_) if c.head.expect_continue => {
                self.unread_body_close = keep_alive;
                keep_alive = false;
            }
            Some(d) => next = In::Discard(Box::new(d)),
            None => {
                if !drain_keep {
                    self.unread_body_close = keep_alive;
                }
                keep_alive &= drain_keep;
            }
        }
        c.next_input = Some(next);
        self.keep_alive = keep_alive;
        self.body_wait_start = ctx.now();
        self.continued = false;
        self.scan_body(c);
        let act = match c.upgraded.take() {
            None => self.decide(c),
            // The first request of a tcp stream that became HTTP goes on
            // where the stream was (`tcp::upgrade`): after the frontend's
            // content rules, or at the backend it chose.
            Some(u) => {
                let at = match u.backend {
                    Some(b) => Resume::Be(b as usize, None),
                    None => Resume::Fe(0),
                };
                self.decide_from(c, at, None)
            }
        };
        self.dispatch(c, ctx, act);
    }

    /// Decides what answers the request in `head` (reading the buffer and
    /// the rules, changing nothing).
    fn decide(&self, c: &H1) -> Act {
        self.decide_from(c, Resume::Start, None)
    }

    /// [`Stream::decide`] from a point where the rules waited for the
    /// body (`resume`, with what the rules before it left).
    pub(super) fn decide_from(&self, c: &H1, at: Resume, left: Option<Box<BodyWait>>) -> Act {
        let buf = &c.rbuf[c.rstart..c.rend];
        let fe = &c.fe;
        let body = self.body_now;
        let orig = crate::sample::Req {
            buf,
            head: &c.head,
            body: body.data(&self.body_buf, buf, c.head.head_len),
        };
        let mut st = crate::rewrite::ReqState::new(orig);
        if let Some(l) = left {
            let l = *l;
            st.edited = l.edited;
            st.cache_hit = l.cache_hit;
            st.strict = l.strict;
            st.lookup = l.lookup;
        }
        let tr = &c.tr;
        let dst = dst_of(tr, c.dst.as_deref().copied());
        // With the request as it came: the rules read it from this context
        // itself until one changes it (`rewrite::run_request_from`).
        let base = ReqView {
            req: Some(orig),
            ..sample_ctx(tr, c.sess.peer, &fe.name, &dst, c.vars.cell(), &c.stk)
        };
        let wait_here = |at: Resume, time_ms: Option<u32>| {
            Act::WaitBody(Box::new(BodyWait {
                at,
                edited: None,
                cache_hit: None,
                at_least: 0,
                time_ms,
                deadline: 0,
                read_deadline: 0,
                seen: 0,
                strict: true,
                lookup: None,
            }))
        };
        let (fe_from, be_at) = match at {
            Resume::Start => {
                // The request as a sample context, only for a frontend
                // that reads it here (most have none of these).
                if fe.monitor.is_some()
                    || !fe.captures.is_empty()
                    || !fe.l4.content_rules.is_empty()
                {
                    let received = ReqView {
                        req: Some(st.req()),
                        ..base
                    };
                    // `monitor-uri`: before any rule (HAProxy's order). A URI from
                    // `/` is compared with the path, another with the whole target.
                    if let Some((uri, fail)) = &fe.monitor {
                        let target = if uri.starts_with('/') {
                            c.head.path.get(buf)
                        } else {
                            c.head.target.get(buf)
                        };
                        if target == uri.as_bytes() {
                            intercepted(fe);
                            let failed = fail.iter().any(|f| fe.matcher.holds(Some(f), &received));
                            return Act::Monitor(failed);
                        }
                    }
                    crate::sample::logline::capture_headers(&fe.captures, false, &received);
                    // HAProxy runs `tcp-request content` rules before the HTTP ones.
                    if let Some(a) =
                        content_rules(&fe.l4.content_rules, &fe.matcher, &received, None)
                    {
                        return a;
                    }
                }
                // `option http-buffer-request`: the body before the
                // frontend's rules (HAProxy's http_wait_for_request_body,
                // bounded by `timeout http-request`).
                if fe.buffer_request && !body.enough(0) {
                    return wait_here(Resume::Fe(0), Some(fe.timeouts.http_request));
                }
                (0, None)
            }
            Resume::Fe(i) => (i, None),
            Resume::Be(bi, j) => (0, Some((bi, j))),
        };
        let bi = match be_at {
            Some((bi, _)) => bi,
            None => {
                if !no_rule_left(&fe.http_request, fe_from, &mut st) {
                    if let Some(a) = self.request_rules(
                        c,
                        &fe.http_request,
                        &fe.matcher,
                        &base,
                        &mut st,
                        None,
                        fe_from,
                        &body,
                    ) {
                        return a;
                    }
                }
                if let Some(a) = restrict_names(&mut st, fe.restrict_hdr_names, &c.w.limits) {
                    return a;
                }
                // Without stats or `use_backend` rules the default backend
                // takes it: no sample context to build.
                if fe.stats.is_none() && fe.use_backends.is_empty() {
                    let Some(bi) = fe.default_backend else {
                        return Act::NoBackend;
                    };
                    bi
                } else {
                    let view = ReqView {
                        req: Some(st.req()),
                        ..base
                    };
                    if let Some(a) = stats_act(fe.stats.as_ref(), &fe.matcher, &view, None) {
                        // An admin form comes whole before the page reads it.
                        if stats_post_waits(&a, &c.head, &body) {
                            let end = Resume::Fe(fe.http_request.len());
                            return wait_here(end, Some(fe.timeouts.http_request));
                        }
                        intercepted(fe);
                        return a;
                    }
                    let Some(bi) = fe.choose_backend(&view) else {
                        return Act::NoBackend;
                    };
                    bi
                }
            }
        };
        let Some(backend) = c.fe.backends.get(bi) else {
            return Act::NoBackend;
        };
        if be_at.is_none() {
            // The stream enters the backend (HAProxy's `be_sess_rate`).
            backend.rates.note_sess();
        }
        if backend.l4.tcp_mode {
            // A tcp frontend's upgraded stream routed to a tcp backend
            // (`tcp::upgrade`): HAProxy cannot set it and closes the
            // connection without an answer, logged `IR` (an internal
            // error, not a denied request).
            return Act::TcpBackend(bi);
        }
        // The backend's view, made only for the rules that read it (most
        // backends have none: a copy of the whole context saved).
        let be_base = || ReqView {
            be: Some(&backend.name),
            ..base
        };
        let be_from = match be_at {
            Some((_, Some(j))) => j,
            _ => {
                // The backend's `option http-buffer-request` when the
                // frontend did not wait: before the backend's rules.
                if backend.buffer_request
                    && !fe.buffer_request
                    && !body.enough(0)
                    && be_at.is_none()
                {
                    return wait_here(Resume::Be(bi, None), backend.http_request_ms);
                }
                // The backend's content rules, then its own http-request
                // rules, come after the frontend's.
                if !backend.l4.content_rules.is_empty() {
                    let view = ReqView {
                        req: Some(st.req()),
                        ..be_base()
                    };
                    if let Some(a) =
                        content_rules(&backend.l4.content_rules, &backend.matcher, &view, Some(bi))
                    {
                        return a;
                    }
                }
                // The backend's HTTP processing begins: its content
                // rules' trackers count the request (HAProxy's order).
                c.stk.count_backend_request();
                0
            }
        };
        if !no_rule_left(&backend.http_request, be_from, &mut st) {
            if let Some(a) = self.request_rules(
                c,
                &backend.http_request,
                &backend.matcher,
                &be_base(),
                &mut st,
                Some(bi),
                be_from,
                &body,
            ) {
                return a;
            }
        }
        if let Some(a) = restrict_names(&mut st, backend.restrict_hdr_names, &c.w.limits) {
            return a;
        }
        if backend.stats.is_some() {
            let view = ReqView {
                req: Some(st.req()),
                ..be_base()
            };
            if let Some(a) = stats_act(backend.stats.as_ref(), &backend.matcher, &view, Some(bi)) {
                if stats_post_waits(&a, &c.head, &body) {
                    let end = Resume::Be(bi, Some(backend.http_request.len()));
                    return wait_here(end, backend.http_request_ms);
                }
                return a;
            }
        }
        // A `cache-use` rule found the answer: the cache answers instead of
        // the backend (HAProxy's cache applet).
        if let Some(hit) = st.cache_hit.take() {
            return Act::Cache(bi, Box::new(hit));
        }
        match &backend.kind {
            BackendKind::Servers(_) => Act::Proxy(bi, st.edited),
            // `OPTIONS *` goes through the rules and to the servers as any
            // request (HAProxy's); ebb's file server answers it itself.
            BackendKind::Files(_) if c.head.target_form == TargetForm::Asterisk => Act::Options,
            // A CONNECT goes through the rules to the servers as any
            // request (HAProxy's: a 2xx answer makes the exchange a
            // tunnel); the file server opens no tunnel.
            BackendKind::Files(_) if c.head.method == Method::Connect => Act::Connect,
            BackendKind::Files(_) => {
                let r = st.req();
                if !matches!(r.head.method, Method::Get | Method::Head) {
                    return Act::Files(bi, Err(405));
                }
                let target = r.head.path.get(r.buf);
                // The head as received (no rule rewrote it) and its path
                // clean already: read in place by the answer.
                if st.edited.is_none() {
                    if let Some(n) = crate::serve::files::clean_len(target) {
                        return Act::Files(bi, Ok(CleanPath::Head(n)));
                    }
                }
                match normalize_path(target) {
                    Ok(p) => Act::Files(bi, Ok(CleanPath::Made(p))),
                    Err(e) => Act::Files(bi, Err(e.status())),
                }
            }
        }
    }

    /// Runs one proxy's `http-request` rules in order, from rule `from`,
    /// on the request as it is now (`st`: rewriting rules change it,
    /// `crate::rewrite`); the first final action that holds decides the
    /// answer. `be` names the backend whose rules these are (`None`: the
    /// frontend's). A `wait-for-body` rule whose body is not there yet
    /// stops the run: [`Act::WaitBody`] says where to go on.
    #[allow(clippy::too_many_arguments)]
    fn request_rules(
        &self,
        c: &H1,
        rules: &[crate::proxy::ReqRule],
        matcher: &crate::rules::Matcher,
        base: &ReqView<'_>,
        st: &mut crate::rewrite::ReqState<'_>,
        be: Option<usize>,
        from: usize,
        body: &BodyNow,
    ) -> Option<Act> {
        let ready = |w: &crate::config::WaitForBody| body.enough(w.at_least);
        let r =
            crate::rewrite::run_request_from(rules, matcher, base, st, &c.w.limits, from, &ready);
        // HAProxy's counters: cache lookups and hits on the proxy whose
        // rules ran; failed rewrites and internal errors on the frontend,
        // and on the backend once one is assigned.
        let counts = std::mem::take(&mut st.counts);
        let mut made = st.take_hints();
        if !made.is_empty() {
            let mut h = self.hints.take();
            h.append(&mut made);
            self.hints.set(h);
        }
        let bhttp = be.and_then(|b| c.fe.backends.get(b)).map(|b| &b.http);
        match bhttp {
            // Nothing to add: no atomic operation on the shared counters.
            _ if counts == crate::proxy::RuleCounts::default() => {}
            Some(h) => {
                h.note_rules(counts);
                c.fe.http
                    .failed_rewrites
                    .fetch_add(counts.failed_rewrites, std::sync::atomic::Ordering::Relaxed);
            }
            None => c.fe.http.note_rules(counts),
        }
        let i = match r {
            Ok(Some(i)) => i,
            Ok(None) => return None,
            Err(_) => {
                for h in std::iter::once(&c.fe.http).chain(bhttp) {
                    h.internal_errors
                        .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                }
                return Some(Act::Error(500));
            }
        };
        let action = &rules.get(i)?.action;
        if be.is_none()
            && matches!(
                action,
                HttpRequestAction::Return(_)
                    | HttpRequestAction::Redirect(_)
                    | HttpRequestAction::Auth { .. }
                    | HttpRequestAction::UseService(_)
            )
        {
            // Answered by the frontend itself (HAProxy counts it when the
            // stream's backend is still the frontend).
            intercepted(&c.fe);
        }
        Some(match action {
            HttpRequestAction::Return(_) => {
                // Its formats see the request as edited so far.
                let done = rules.get(i)?.prepared.as_ref().and_then(|p| {
                    p.evaluate(|| crate::sample::Ctx {
                        req: Some(st.req()),
                        ..*base
                    })
                });
                base.note_last_rule(&rules.get(i)?.loc);
                Act::Return(be, i, done)
            }
            HttpRequestAction::Redirect(rd) => {
                let r = st.req();
                // The Host field as it came (HAProxy's `redirect scheme`),
                // not an absolute target's authority.
                let host = r.head.header(r.buf, "host");
                let cx = crate::sample::Ctx {
                    req: Some(r),
                    ..*base
                };
                let loc = redirect_location(rd, r.head.target.get(r.buf), host, Some(&cx));
                Act::Redirect(
                    loc,
                    rd.code,
                    rules.get(i).map(|r| r.loc.clone()),
                    rd.cookie.clone(),
                )
            }
            HttpRequestAction::Deny { status } => Act::Deny(be, *status),
            HttpRequestAction::Tarpit { status } => Act::Tarpit(be, *status),
            HttpRequestAction::Auth { realm } => {
                // HAProxy: the realm is the rule's proxy's name by default.
                let r = match (realm, be) {
                    (Some(r), _) => r.clone(),
                    (None, Some(b)) => {
                        c.fe.backends
                            .get(b)
                            .map_or_else(String::new, |b| b.name.clone())
                    }
                    (None, None) => c.fe.name.clone(),
                };
                Act::Auth(be, r)
            }
            HttpRequestAction::WaitForBody(w) => Act::WaitBody(wait_at_rule(be, i, st, Some(w))),
            // The rules wait at this rule for the name it asked for.
            HttpRequestAction::DoResolve(_) => Act::WaitResolve(wait_at_rule(be, i, st, None)),
            HttpRequestAction::Reject => Act::Reject(false, be, true),
            HttpRequestAction::SilentDrop => Act::Reject(true, be, true),
            // A strict normalizer refused the target.
            HttpRequestAction::NormalizeUri(_) => Act::Error(400),
            _ => Act::Service,
        })
    }
}

/// The rules of proxy `be` (`None`: the frontend's) stopped at rule `i`
/// to wait: for the body (`body`: its `wait-for-body`), or for a
/// `do-resolve` rule's answer; what they left in `st` goes with the wait.
fn wait_at_rule(
    be: Option<usize>,
    i: usize,
    st: &mut crate::rewrite::ReqState<'_>,
    body: Option<&crate::config::WaitForBody>,
) -> Box<BodyWait> {
    Box::new(BodyWait {
        at: match be {
            Some(b) => Resume::Be(b, Some(i)),
            None => Resume::Fe(i),
        },
        edited: st.edited.take(),
        cache_hit: st.cache_hit.take(),
        at_least: body.map_or(0, |w| w.at_least),
        time_ms: body.map(|w| w.time_ms),
        deadline: 0,
        read_deadline: 0,
        seen: 0,
        strict: st.strict,
        lookup: st.lookup.take(),
    })
}

/// Whether a proxy's `http-request` rules from `from` on are none (most
/// proxies have none): then a run would only reset the mode, as it does
/// when a proxy's rules start, and add no counter; done here, with no
/// call.
#[inline(always)]
fn no_rule_left(
    rules: &[crate::proxy::ReqRule],
    from: usize,
    st: &mut crate::rewrite::ReqState<'_>,
) -> bool {
    if from < rules.len() || st.counts != crate::proxy::RuleCounts::default() {
        return false;
    }
    if from == 0 {
        st.strict = true;
    }
    true
}

/// `option http-restrict-req-hdr-names` after a proxy's rules: the
/// answer when the request stops there (403 for `reject`, as HAProxy's
/// deny; 500 when the edited request is no longer valid).
fn restrict_names(
    st: &mut crate::rewrite::ReqState<'_>,
    mode: crate::config::RestrictHdrNames,
    limits: &crate::http1::Limits,
) -> Option<Act> {
    match st.restrict_hdr_names(mode, limits) {
        Ok(()) => None,
        Err(crate::rewrite::RestrictRefused::Forbidden) => Some(Act::Deny(None, 403)),
        Err(crate::rewrite::RestrictRefused::Failed) => Some(Act::Error(500)),
    }
}

/// Runs `tcp-request content` rules on a parsed request (HAProxy: in an
/// HTTP proxy they see the whole head at once, so they never wait): a
/// `reject` or `silent-drop` closes the connection without an answer.
fn content_rules(
    rules: &[crate::l4rules::TcpRuleRt],
    m: &crate::rules::Matcher,
    view: &ReqView<'_>,
    be: Option<usize>,
) -> Option<Act> {
    if rules.is_empty() {
        return None;
    }
    match crate::l4rules::run_rules(rules, 0, m, view, false, None, &mut false) {
        crate::l4rules::Verdict::Reject => Some(Act::Reject(false, be, be.is_some())),
        crate::l4rules::Verdict::SilentDrop => Some(Act::Reject(true, be, be.is_some())),
        _ => None,
    }
}

/// Whether the stats page's act must wait for the rest of a POST's body
/// (an admin form, read only when `stats admin` allows it).
fn stats_post_waits(a: &Act, head: &crate::http1::RequestHead, body: &BodyNow) -> bool {
    matches!(a, Act::Stats(_, true, _)) && head.method == Method::Post && !body.enough(0)
}

/// Counts a request the frontend answered itself.
fn intercepted(fe: &FrontendRt) {
    fe.http
        .local()
        .intercepted
        .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
}

/// The stats page's act when the request is for it.
fn stats_act(
    st: Option<&Arc<crate::proxy::StatsRt>>,
    m: &crate::rules::Matcher,
    view: &ReqView<'_>,
    be: Option<usize>,
) -> Option<Act> {
    let st = st?;
    let req = view.req?;
    let method_ok = matches!(req.head.method, Method::Get | Method::Head | Method::Post);
    if !crate::serve::is_stats_page(st, req.head.path.get(req.buf), method_ok) {
        return None;
    }
    let admin = st.admin.iter().any(|c| m.holds(Some(c), view));
    Some(Act::Stats(Arc::clone(st), admin, be))
}
