//! The rules compiled: `http-request` and `http-response` rules
//! ([`ReqRule`], [`RespRule`]) with their conditions, and the answers
//! that are known at start built once ([`Prepared`]: `return`, `deny`,
//! `http-error`, whose log-format parts are evaluated per request); the
//! `redirect` location and `return` body helpers the stream uses.

use std::sync::Arc;

use crate::config::{
    ConfigError, HeaderEdit, HttpRequestAction, HttpResponseAction, Proxy, Redirect, ReturnAction,
    ReturnBody,
};
use crate::rules::{Cond, Matcher};
use crate::sample::{Ctx, LogFormat};
use crate::stream::msg::FieldBuf;

use super::compile::err;

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
    /// [`Prepared::content_type_at`] of `literal` (with `body`), found
    /// once.
    pub literal_length_at: Option<u8>,
    /// The whole HTTP/1 answer to a request that keeps its connection,
    /// written once by the stream at the first such answer
    /// (`literal_plain` answers only; `None` inside: it cannot be): see
    /// [`crate::stream::msg::WholeAnswer`].
    pub h1_whole: std::sync::OnceLock<Option<crate::stream::msg::WholeAnswer>>,
}

impl Prepared {
    /// Builds the answer of an `http-request return`; refuses a field that
    /// could not be sent (bad name or value).
    pub fn of(r: &ReturnAction) -> Result<Prepared, String> {
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
        for (n, f) in &r.headers {
            let v = || String::from_utf8_lossy(f.as_literal().unwrap_or(b"")).into_owned();
            match f.as_literal() {
                // HAProxy adds no field whose value is empty.
                Some([]) => {}
                Some(lit) if sendable(n.as_bytes(), lit) => fields.push(n.as_bytes(), lit),
                Some(_) => return Err(format!("invalid header '{n}: {}'", v())),
                None if is_token(n.as_bytes()) => {}
                None => return Err(format!("invalid header '{n}'")),
            }
            dyn_hdrs.push(HeaderEdit {
                op: crate::config::EditOp::Add,
                name: n.clone(),
                value: f.clone(),
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
        let mut p = Prepared {
            status: r.status,
            fields,
            content_type,
            body,
            has_body,
            body_fmt,
            dyn_hdrs,
            literal,
            literal_plain,
            literal_length_at: None,
            h1_whole: std::sync::OnceLock::new(),
        };
        p.literal_length_at = p
            .literal
            .as_ref()
            .and_then(|l| p.content_type_at(&p.body, l.fields()));
        Ok(p)
    }

    /// Where HAProxy puts the `content-length` of the answer: before the
    /// `content-type` it adds after the `hdr` fields (`fields`, the type
    /// last), when it adds one; counted among the fields a mux writes
    /// (not `connection` and the others it decides itself).
    pub fn content_type_at(
        &self,
        body: &[u8],
        fields: crate::stream::msg::Fields<'_>,
    ) -> Option<u8> {
        if self.content_type.is_none() || body.is_empty() {
            return None;
        }
        let n = fields
            .iter()
            .filter(|(n, _)| !crate::stream::msg::is_framing_field(n))
            .count();
        u8::try_from(n.checked_sub(1)?).ok()
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

    /// What the `hdr` values and the `lf-string` body evaluate to on the
    /// context `ctx` makes (HAProxy evaluates them when the rule runs, on
    /// the request as the rules before edited it); `None` when the answer
    /// is all literal (no context is made then).
    pub fn evaluate<'c>(&self, ctx: impl FnOnce() -> Ctx<'c>) -> Option<Box<Evaluated>> {
        if self.dyn_hdrs.is_empty() && self.body_fmt.is_none() {
            return None;
        }
        let ctx = &ctx();
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
    /// For `track-scN`: its table, found at start.
    pub table: Option<Arc<crate::table::Table>>,
}

/// The cache a `cache-use`/`cache-store` rule names (checked to exist
/// when the configuration was parsed).
fn cache_named(
    caches: &[Arc<crate::httpcache::Cache>],
    n: &str,
) -> Option<Arc<crate::httpcache::Cache>> {
    caches.iter().find(|c| &*c.name == n).cloned()
}

pub(super) fn compile_req_rules(
    p: &Proxy,
    m: &Matcher,
    caches: &[Arc<crate::httpcache::Cache>],
    tables: &crate::table::Tables,
) -> Result<Vec<ReqRule>, ConfigError> {
    let mut out = Vec::new();
    for r in &p.http_request {
        let prepared = match &r.action {
            HttpRequestAction::Return(ret) => Some(Prepared::of(ret).map_err(|e| err(&r.loc, e))?),
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

pub(super) fn compile_resp_rules(
    p: &Proxy,
    m: &Matcher,
    caches: &[Arc<crate::httpcache::Cache>],
    tables: &crate::table::Tables,
) -> Result<Vec<RespRule>, ConfigError> {
    compile_resp_list(&p.http_response, m, caches, (&p.name, tables))
}

/// Compiles response rules; `tables`: the rule's proxy's name and the
/// stick tables, for `track-scN`.
pub(super) fn compile_resp_list(
    rules: &[crate::config::HttpResponseRule],
    m: &Matcher,
    caches: &[Arc<crate::httpcache::Cache>],
    (proxy, tables): (&str, &crate::table::Tables),
) -> Result<Vec<RespRule>, ConfigError> {
    rules
        .iter()
        .map(|r| {
            let prepared = match &r.action {
                HttpResponseAction::Deny(ret) | HttpResponseAction::Return(ret)
                    if !matches!(ret.body, ReturnBody::Errorfile(_)) =>
                {
                    Some(Prepared::of(ret).map_err(|e| err(&r.loc, e))?)
                }
                _ => None,
            };
            let table = match &r.action {
                HttpResponseAction::Stk(a) => {
                    crate::stick::track_table(a, proxy, tables).map_err(|e| err(&r.loc, e))?
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
                table,
            })
        })
        .collect()
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
