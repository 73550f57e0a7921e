//! Rewriting actions of `http-request`, `http-response` and
//! `http-after-response` rules, and the rules' execution in order.
//!
//! HAProxy runs a proxy's rules one after the other, each seeing what the
//! ones before it changed: `set-path /fe%[path]` followed by `replace-path`
//! rewrites the path already prefixed, and `set-var(txn.host) req.hdr(host)`
//! after `replace-value Host ...` stores the replaced value. ebb does the
//! same:
//!
//! - A request is read in place until a rule changes it. A change writes a
//!   new head (request line and every field line, in order) into an owned
//!   buffer and reads it back as the parser cuts a head, so fetches, ACLs,
//!   `use_backend` and the server side read an edited request exactly as
//!   they read a received one. As HAProxy's rules, which edit the message
//!   in place, the edited head need not be one a client may send (no
//!   `Host`, a target that is no path). A change that leaves no head (a
//!   method that is not a token, a target with a space, a head past the
//!   size limits) or that would change how the body is framed is a
//!   *failed rewrite*: the request is answered 500, as HAProxy does in its
//!   default `strict-mode on`.
//! - A response is held as status, reason and a list of fields while its
//!   rules run (conditions and fetches see it through
//!   [`crate::sample::Res::List`]), then written. The framing fields
//!   (`Content-Length`, `Transfer-Encoding`) and `Connection` are ebb's to
//!   write and stay out of the rules' reach; rules naming them are refused
//!   at start. A server's framing field is written where the server put
//!   it, as HAProxy keeps it (`ResHead::framing_at`). That side is the
//!   `response` module (rewrite/response.rs); the request side and the
//!   fields' edits both share are here.
//!
//! Rules run in HAProxy's order: a request's frontend rules, then its
//! backend's; a response's backend rules, then its frontend's, then the
//! `http-after-response` rules (backend, then frontend) on every answer,
//! ebb's own included.

use crate::config::{EditOp, HeaderEdit, HttpRequestAction, HttpResponseAction};
use crate::http1::{parse_request_into, Limits, RequestHead, Status, Version};
use crate::proxy::{ReqRule, RespRule};
use crate::rules::Matcher;
use crate::sample::{Ctx, LogFormat, Req, Res};

pub use crate::config::rewrite::{Re, Rewrite, UriPart};
pub(crate) use crate::sample::map::expand;

pub mod normalize;
mod response;

pub use response::*;

/// `value` replaced by the template when `re` matches it (the whole value
/// is replaced, as HAProxy does); `None` when it does not match.
fn replace_whole(re: &Re, value: &[u8], tpl: &[u8]) -> Option<Vec<u8>> {
    let caps = re.re.captures(value)?;
    let mut out = Vec::with_capacity(tpl.len() + value.len());
    expand(tpl, &caps, &mut out);
    Some(out)
}

/// `replace-value`: each comma-separated value matched on its own, the
/// separators kept; a value replaced loses the spaces around it, as
/// HAProxy's http_replace_header_value replaces them with it (`a, b`
/// gives `a,<b>`), the others keep theirs. A comma inside a quoted string
/// does not separate (`"q,x", y` is two values), as for `hdr()`.
fn replace_values(re: &Re, value: &[u8], tpl: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(value.len() + tpl.len());
    for (k, part) in crate::sample::split_values_untrimmed(value).enumerate() {
        if k > 0 {
            out.push(b',');
        }
        match replace_whole(re, part.trim_ascii(), tpl) {
            Some(r) => out.extend_from_slice(&r),
            None => out.extend_from_slice(part),
        }
    }
    out
}

/// Whether `re` matches a value of a field `name` (each comma-separated
/// value with `each_value`, as [`replace_values`] cuts them): whether a
/// `replace-header` or `replace-value` replaces any.
fn replaces_any(re: &Re, fields: &Fields, name: &str, each_value: bool) -> bool {
    fields
        .iter()
        .filter(|(n, _)| n.eq_ignore_ascii_case(name.as_bytes()))
        .any(|(_, v)| {
            if each_value {
                crate::sample::split_values_untrimmed(v)
                    .any(|p| re.re.captures(p.trim_ascii()).is_some())
            } else {
                re.re.captures(v).is_some()
            }
        })
}

/// Removes CR, LF and NUL (they would end or break a field line).
fn clean(v: &mut Vec<u8>) {
    v.retain(|&c| !matches!(c, b'\r' | b'\n' | 0));
}

/// Owned fields, as rules edit them.
pub type Fields = Vec<(Vec<u8>, Vec<u8>)>;

/// Fields borrowed from a head.
pub type FieldRefs<'b> = Vec<(&'b [u8], &'b [u8])>;

/// The fields as a borrowed list (what `Res::List` reads).
fn borrowed(f: &Fields) -> FieldRefs<'_> {
    f.iter().map(|(n, v)| (&n[..], &v[..])).collect()
}

/// Applies a header edit to `fields`; the value is evaluated before any
/// field is removed (HAProxy's order).
fn apply_edit(e: &HeaderEdit, ctx: &Ctx<'_>, fields: &mut Fields) {
    let mut v = Vec::new();
    if e.op != EditOp::Del {
        e.render_value(ctx, &mut v);
    }
    if e.op != EditOp::Add {
        fields.retain(|(n, _)| !n.eq_ignore_ascii_case(e.name.as_bytes()));
    }
    if e.op != EditOp::Del {
        fields.push((e.name.as_bytes().to_vec(), v));
    }
}

/// Applies a field action (`DelMatching`, `Replace`) to `fields`; returns
/// `false` for actions that are not about fields.
fn apply_fields(r: &Rewrite, ctx: &Ctx<'_>, fields: &mut Fields) -> bool {
    match r {
        Rewrite::DelMatching(m) => fields.retain(|(n, _)| !m.matches(n)),
        Rewrite::Replace {
            name,
            re,
            fmt,
            each_value,
        } => {
            let mut tpl = Vec::new();
            fmt.render(ctx, &mut tpl);
            for (n, v) in fields.iter_mut() {
                if !n.eq_ignore_ascii_case(name.as_bytes()) {
                    continue;
                }
                let new = if *each_value {
                    Some(replace_values(re, v, &tpl))
                } else {
                    replace_whole(re, v, &tpl)
                };
                if let Some(mut new) = new {
                    clean(&mut new);
                    let t = new.trim_ascii().to_vec();
                    *v = t;
                }
            }
        }
        _ => return false,
    }
    true
}

// ---------------------------------------------------------------- requests

/// A request head rewritten by rules: its own buffer, parsed.
#[derive(Debug)]
pub struct Edited {
    pub buf: Vec<u8>,
    pub head: RequestHead,
}

/// A request as the rules see it: the received head until a rule changes
/// it, then the edited one.
pub struct ReqState<'a> {
    orig: Req<'a>,
    pub edited: Option<Box<Edited>>,
    /// The answer a `cache-use` rule found (the exchange is answered from
    /// it unless a later rule decides otherwise).
    pub cache_hit: Option<crate::httpcache::Hit>,
    /// `http-request strict-mode`: a failed rewrite is an error (on, the
    /// default at the start of each proxy's rules) or is ignored (off).
    pub strict: bool,
    /// What the rules run so far did, for the statistics of their proxy
    /// (taken by the caller after each proxy's rules).
    pub counts: RuleCounts,
    /// The `103 Early Hints` answers the `early-hint` rules made, as
    /// HTTP/1 bytes ([`ReqState::take_hints`]).
    hints: Vec<u8>,
    /// The last of `hints` is still open (the rule before was an
    /// `early-hint`: adjacent ones make one answer, as HAProxy groups them).
    hint_open: bool,
    /// The name a `do-resolve` rule asked for: the rules stopped at it
    /// until the answer came, then run it again, which takes the answer.
    pub lookup: Option<std::sync::Arc<crate::resolvers::Lookup>>,
}

pub use crate::proxy::RuleCounts;

/// A rewrite left no valid request (HAProxy: a failed rewrite, 500).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RewriteFailed;

/// A `strict` normalizer found the request's target invalid (HAProxy:
/// 400).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct NormalizeInvalid;

/// A head's fields, owned (what a rebuilt head starts from).
fn fields_of(buf: &[u8], h: &RequestHead) -> Fields {
    h.headers
        .iter()
        .map(|f| (f.name.get(buf).to_vec(), f.value.get(buf).to_vec()))
        .collect()
}

impl<'a> ReqState<'a> {
    pub fn new(orig: Req<'a>) -> ReqState<'a> {
        ReqState {
            orig,
            edited: None,
            cache_hit: None,
            strict: true,
            counts: RuleCounts::default(),
            hints: Vec::new(),
            hint_open: false,
            lookup: None,
        }
    }

    /// An `early-hint` rule's field: in the open 103, or a new one (HAProxy
    /// 2.6: only for a request of version 1.1, which an HTTP/2 one is).
    fn early_hint(&mut self, e: &HeaderEdit, base: &Ctx<'_>) {
        if self.orig.head.version != Version::Http11 {
            return;
        }
        let mut v = Vec::new();
        let ctx = Ctx {
            req: Some(self.req()),
            ..*base
        };
        e.render_value(&ctx, &mut v);
        if !self.hint_open {
            self.hints
                .extend_from_slice(b"HTTP/1.1 103 Early Hints\r\n");
            self.hint_open = true;
        }
        self.hints.extend_from_slice(e.name.as_bytes());
        self.hints.extend_from_slice(b": ");
        self.hints.extend_from_slice(&v);
        self.hints.extend_from_slice(b"\r\n");
    }

    /// Ends the open 103, if any.
    fn close_hint(&mut self) {
        if std::mem::take(&mut self.hint_open) {
            self.hints.extend_from_slice(b"\r\n");
        }
    }

    /// The 103s the rules made so far, for the caller to send before
    /// anything else (after each proxy's rules: a 103 ends with them, or
    /// where they stopped).
    pub fn take_hints(&mut self) -> Vec<u8> {
        self.close_hint();
        std::mem::take(&mut self.hints)
    }

    /// The limits of a rewritten head, HAProxy's room for rewrites: its
    /// buffer (`tune.bufsize`) holds the head and the body bytes that
    /// arrived with it, reads stopping `tune.maxrewrite` short of its end
    /// (the head alone may use that much: `limits.max_head_bytes`); a
    /// rewritten head must fit in the buffer beside those body bytes, else
    /// the rewrite fails.
    fn room(&self, limits: &Limits) -> Limits {
        let head = self.orig.head.head_len;
        // This request's body bytes (not those of a request pipelined
        // after it, which HAProxy keeps out of the message).
        let after = self.orig.buf.len().saturating_sub(head);
        let own = match self.orig.head.framing {
            crate::http1::BodyFraming::None => 0,
            crate::http1::BodyFraming::ContentLength(n) => after.min(n as usize),
            _ => after,
        };
        let arrived = own.max(self.orig.body.len());
        let held = arrived.min(limits.max_head_bytes.saturating_sub(head));
        Limits {
            max_head_bytes: limits.buf_size.saturating_sub(held).max(head),
            ..*limits
        }
    }

    /// Whether `r` is the request as it came: the same head over the same
    /// bytes (no rule has changed it since).
    pub fn is_orig(&self, r: &Req<'_>) -> bool {
        std::ptr::eq(r.head, self.orig.head)
            && std::ptr::eq(r.buf, self.orig.buf)
            && std::ptr::eq(r.body, self.orig.body)
    }

    /// The request as it is now.
    pub fn req(&self) -> Req<'_> {
        match &self.edited {
            Some(e) => Req {
                buf: &e.buf,
                head: &e.head,
                body: self.orig.body,
            },
            None => self.orig,
        }
    }

    /// Applies a request action (header edit or rewrite) evaluated in
    /// `base` (which has no request: the current one is added here).
    fn apply(
        &mut self,
        act: Act<'_>,
        base: &Ctx<'_>,
        limits: &Limits,
    ) -> Result<(), RewriteFailed> {
        let cur = self.req();
        let ctx = Ctx {
            req: Some(cur),
            ..*base
        };
        let buf = cur.buf;
        let h = cur.head;
        let mut method = h.method_span.get(buf).to_vec();
        let mut target = h.target.get(buf).to_vec();
        let mut fields = fields_of(buf, h);
        // Where the path starts in the target (after scheme and authority),
        // as HAProxy's http_replace_req_path finds it (http_parse_path;
        // the whole target when it finds none).
        let pstart = match crate::sample::target_path(&target) {
            [] => 0,
            p => target.len() - p.len(),
        };
        let pq = target[pstart..].to_vec();
        let qpos = pq.iter().position(|&c| c == b'?');
        let (path, query) = match qpos {
            Some(q) => (&pq[..q], Some(&pq[q + 1..])),
            None => (&pq[..], None),
        };
        let render = |f: &LogFormat| {
            let mut v = Vec::new();
            f.render(&ctx, &mut v);
            v
        };
        // The `Host` a rule sets or rewrites on an absolute-form request
        // is its target's authority too (HAProxy's http_update_authority,
        // from the last field it edited).
        // (A target a rule made may be absolute without ebb's parser
        // taking it for one: `set-uri http://u@n.example/x`, whose user
        // part a client may not send; tests/diff seed 8.)
        let absolute =
            h.target_form == crate::http1::TargetForm::Absolute || has_scheme(h.target.get(buf));
        let sets_host = |n: &str| n.eq_ignore_ascii_case("host") && absolute;
        // A `replace-header`/`replace-value` whose regex matches no
        // `Host` value leaves the target alone (HAProxy updates the
        // authority from a value it replaced only).
        let host_edit = match act {
            Act::Edit(e) => e.op != EditOp::Del && sets_host(&e.name),
            Act::Rewrite(Rewrite::Replace {
                name,
                re,
                each_value,
                ..
            }) => sets_host(name) && replaces_any(re, &fields, name, *each_value),
            _ => false,
        };
        match act {
            Act::Edit(e) => apply_edit(e, &ctx, &mut fields),
            Act::Rewrite(r) => match r {
                Rewrite::SetMethod(f) => method = render(f),
                Rewrite::SetUri { part, fmt } => {
                    let v = render(fmt);
                    target = match part {
                        UriPart::Uri => {
                            update_host(h, &v, &mut fields)?;
                            v
                        }
                        UriPart::PathQ => [&target[..pstart], &v[..]].concat(),
                        UriPart::Path => {
                            let mut t = [&target[..pstart], &v[..]].concat();
                            if let Some(q) = query {
                                t.push(b'?');
                                t.extend_from_slice(q);
                            }
                            t
                        }
                        UriPart::Query => {
                            if query.is_none() && v.is_empty() {
                                target
                            } else {
                                let mut t = [&target[..pstart], path].concat();
                                t.push(b'?');
                                t.extend_from_slice(&v);
                                t
                            }
                        }
                    };
                }
                Rewrite::ReplaceUri { part, re, fmt } => {
                    let tpl = render(fmt);
                    let subject: &[u8] = match part {
                        UriPart::Path => path,
                        UriPart::PathQ => &pq,
                        _ => &target,
                    };
                    // HAProxy's `replace-path`/`replace-pathq` read the
                    // path http_parse_path finds (none in `http://a` or
                    // `foo/bar`), and no rule replaces an empty subject.
                    let no_path =
                        part != &UriPart::Uri && crate::sample::target_path(&target).is_empty();
                    if subject.is_empty() || no_path {
                        return Ok(());
                    }
                    let Some(new) = replace_whole(re, subject, &tpl) else {
                        return Ok(());
                    };
                    target = match part {
                        UriPart::Path => {
                            let mut t = [&target[..pstart], &new[..]].concat();
                            if let Some(q) = query {
                                t.push(b'?');
                                t.extend_from_slice(q);
                            }
                            t
                        }
                        UriPart::PathQ => [&target[..pstart], &new[..]].concat(),
                        _ => new,
                    };
                    if part == &UriPart::Uri {
                        update_host(h, &target, &mut fields)?;
                    }
                }
                other => {
                    if !apply_fields(other, &ctx, &mut fields) {
                        return Ok(());
                    }
                }
            },
        }
        if host_edit {
            let last = fields
                .iter()
                .rev()
                .find(|(n, _)| n.eq_ignore_ascii_case(b"host"));
            if let Some((_, v)) = last {
                if h.host.map(|a| a.get(buf)) != Some(&v[..]) {
                    update_authority(&mut target, &v.clone())?;
                }
            }
        }
        let e = build(&method, &target, h, &fields, limits)?;
        self.edited = Some(Box::new(e));
        Ok(())
    }
}

impl ReqState<'_> {
    /// `http-request normalize-uri`: the target's path and query as the
    /// normalizer leaves them. `Err(Some(..))`: a strict normalizer found
    /// the input invalid (400); `Err(None)`: the rewrite failed.
    fn normalize_uri(
        &mut self,
        n: crate::config::Normalizer,
        limits: &Limits,
    ) -> Result<(), Option<NormalizeInvalid>> {
        let cur = self.req();
        let (buf, h) = (cur.buf, cur.head);
        let target = h.target.get(buf);
        let new = match normalize::apply(n, h.path.get(buf)) {
            normalize::Outcome::Same => return Ok(()),
            normalize::Outcome::Invalid => return Err(Some(NormalizeInvalid)),
            normalize::Outcome::New(v) => v,
        };
        let pstart = (h.path.start.saturating_sub(h.target.start) as usize).min(target.len());
        let t = [&target[..pstart], &new[..]].concat();
        let e =
            build(h.method_span.get(buf), &t, h, &fields_of(buf, h), limits).map_err(|_| None)?;
        self.edited = Some(Box::new(e));
        Ok(())
    }

    /// `option http-restrict-req-hdr-names` after a proxy's rules:
    /// `Err(())` when the request must be answered 403 (`reject`); with
    /// `delete`, the fields whose name holds a character other than a
    /// letter, a digit or `-` are removed.
    pub fn restrict_hdr_names(
        &mut self,
        mode: crate::config::RestrictHdrNames,
        limits: &Limits,
    ) -> Result<(), RestrictRefused> {
        use crate::config::RestrictHdrNames as R;
        if mode == R::Preserve {
            return Ok(());
        }
        let cur = self.req();
        let (buf, h) = (cur.buf, cur.head);
        let bad = |n: &[u8]| n.iter().any(|&c| !c.is_ascii_alphanumeric() && c != b'-');
        if !h.headers.iter().any(|f| bad(f.name.get(buf))) {
            return Ok(());
        }
        if mode == R::Reject {
            return Err(RestrictRefused::Forbidden);
        }
        let fields: Fields = h
            .headers
            .iter()
            .filter(|f| !bad(f.name.get(buf)))
            .map(|f| (f.name.get(buf).to_vec(), f.value.get(buf).to_vec()))
            .collect();
        let e = build(
            h.method_span.get(buf),
            h.target.get(buf),
            h,
            &fields,
            limits,
        )
        .map_err(|_| RestrictRefused::Failed)?;
        self.edited = Some(Box::new(e));
        Ok(())
    }
}

/// Why `restrict_hdr_names` stopped a request: refused (403), or the
/// rewrite failed (500).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RestrictRefused {
    Forbidden,
    Failed,
}

/// Writes a request head from its parts and reads it back as the parser
/// would cut it; the body's framing must stay what the received head `h`
/// decided. As HAProxy, which edits its message in place, the head is not
/// held to what a client may send (`Limits::rebuilt`): a value may carry
/// any byte but CR, LF and NUL, the `Host` field may be gone. A method
/// that is no token, a target with a space or a control byte, or a head
/// past the limits fails the rewrite.
fn build(
    method: &[u8],
    target: &[u8],
    h: &RequestHead,
    fields: &Fields,
    limits: &Limits,
) -> Result<Edited, RewriteFailed> {
    let limits = Limits {
        rebuilt: true,
        ..*limits
    };
    let line_ok = crate::http1::is_token(method)
        && !target.is_empty()
        && target.iter().all(|&b| b > b' ' && b != 0x7f);
    let fields_ok = fields.iter().all(|(n, v)| {
        crate::http1::is_token(n) && !v.iter().any(|&c| matches!(c, b'\r' | b'\n' | 0))
    });
    if !line_ok || !fields_ok {
        return Err(RewriteFailed);
    }
    let at = |out: &Vec<u8>| out.len() as u32;
    let mut out = Vec::with_capacity(h.head_len + 64);
    out.extend_from_slice(method);
    let m = crate::http1::Span {
        start: 0,
        end: at(&out),
    };
    out.push(b' ');
    let t0 = at(&out);
    out.extend_from_slice(target);
    let t = crate::http1::Span {
        start: t0,
        end: at(&out),
    };
    out.extend_from_slice(match h.version {
        Version::Http10 => b" HTTP/1.0\r\n",
        Version::Http11 => b" HTTP/1.1\r\n",
    });
    let mut head = RequestHead::default();
    head.headers.clear();
    for (n, v) in fields {
        let n0 = at(&out);
        out.extend_from_slice(n);
        let name = crate::http1::Span {
            start: n0,
            end: at(&out),
        };
        out.extend_from_slice(b": ");
        // The value as the parser cuts it: without spaces and tabs around.
        let ows = |c: &&u8| **c == b' ' || **c == b'\t';
        let lead = v.iter().take_while(ows).count();
        let core = v.len() - lead - v[lead..].iter().rev().take_while(ows).count();
        let v0 = at(&out) + lead as u32;
        out.extend_from_slice(v);
        let value = crate::http1::Span {
            start: v0,
            end: v0 + core as u32,
        };
        out.extend_from_slice(b"\r\n");
        head.headers.push(crate::http1::HeaderSpan { name, value });
    }
    out.extend_from_slice(b"\r\n");
    let len = out.len();
    let done = if fields.len() > limits.max_headers {
        // Past the count, the parser's answer (it counts as HAProxy).
        parse_request_into(&out, &limits, &mut head)
            .map(|st| matches!(st, Status::Complete(())) && head.head_len == len)
    } else {
        crate::http1::complete_request_into(&out, (m, t), h.version, len, &limits, &mut head, true)
            .map(|st| matches!(st, Status::Complete(())))
    };
    if done != Ok(true) {
        return Err(RewriteFailed);
    }
    framing_kept(h, &head)?;
    host_as_written(&out, &mut head);
    Ok(Edited { buf: out, head })
}

/// An absolute target a rule left beside a `Host` that is not its
/// authority (`replace-path` gluing the path to the authority,
/// `set-pathq http://n/z` on an origin request) or without `Host` (`del-header
/// host`): HAProxy sends the line and the fields as they are, while an
/// absolute target's authority is otherwise the host ebb sends (`Host`
/// written from it, or added, RFC 9112 §3.2.2). Such a head is taken as a
/// target sent whole, as one that is no path (`Limits::rebuilt`; the
/// `path` fetch still reads the target as HAProxy does), and its `Host`
/// field as the host.
fn host_as_written(buf: &[u8], head: &mut RequestHead) {
    if head.target_form != crate::http1::TargetForm::Absolute {
        return;
    }
    let auth = head.host.map(|a| a.get(buf));
    let other = head
        .headers
        .iter()
        .find(|f| f.name.get(buf).eq_ignore_ascii_case(b"host") && Some(f.value.get(buf)) != auth);
    let none = !head
        .headers
        .iter()
        .any(|f| f.name.get(buf).eq_ignore_ascii_case(b"host"));
    if other.is_some() || none {
        head.target_form = crate::http1::TargetForm::Origin;
        head.path = head.target;
        head.host = other.map(|f| f.value);
    }
}

/// Whether a target starts with a scheme and `://` (an absolute URI, as
/// HAProxy's URI parser tells one).
fn has_scheme(t: &[u8]) -> bool {
    let n = t
        .iter()
        .position(|&c| !(c.is_ascii_alphanumeric() || matches!(c, b'+' | b'-' | b'.')))
        .unwrap_or(t.len());
    n > 0 && t[0].is_ascii_alphabetic() && t[n..].starts_with(b"://")
}

/// HAProxy's http_update_authority: a `Host` a rule set on a request with
/// an absolute target becomes the target's authority (the user part
/// kept); an empty authority fails the rewrite.
fn update_authority(target: &mut Vec<u8>, host: &[u8]) -> Result<(), RewriteFailed> {
    let Some(s) = target.windows(3).position(|w| w == b"://") else {
        return Err(RewriteFailed);
    };
    let start = s + 3;
    let end = start
        + target[start..]
            .iter()
            .position(|&c| c == b'/')
            .unwrap_or(target.len() - start);
    let from = target[start..end]
        .iter()
        .rposition(|&c| c == b'@')
        .map_or(start, |i| start + i + 1);
    if from == end {
        return Err(RewriteFailed);
    }
    target.splice(from..end, host.iter().copied());
    Ok(())
}

/// After `set-uri` or `replace-uri` (HAProxy's http_update_host): a new
/// target that is empty, `*` or starts with `/` leaves the fields alone;
/// any other gives every `Host` field the target's authority: the whole
/// target for CONNECT, else what follows `scheme://` (or the start, when
/// there is no scheme) up to the first `/`, without the user part up to
/// an `@` (`set-uri foo/bar` sends `Host: foo`). An empty authority
/// fails the rewrite. `set-path` and the other partial rewrites keep
/// `Host` as it is.
fn update_host(h: &RequestHead, target: &[u8], fields: &mut Fields) -> Result<(), RewriteFailed> {
    if target.is_empty() || matches!(target[0], b'/' | b'*') {
        return Ok(());
    }
    let auth: &[u8] = if h.method == crate::http1::Method::Connect {
        target
    } else {
        // HAProxy's http_parse_scheme: a letter, then letters, digits,
        // `+`, `-`, `.`, then `://`; else no scheme.
        let rest = target[1..]
            .iter()
            .position(|&c| !(c.is_ascii_alphanumeric() || matches!(c, b'+' | b'-' | b'.')))
            .map(|i| &target[i + 1..])
            .filter(|r| target[0].is_ascii_alphabetic() && r.starts_with(b"://"))
            .map_or(target, |r| &r[3..]);
        let a = &rest[..rest.iter().position(|&c| c == b'/').unwrap_or(rest.len())];
        let from = a.iter().rposition(|&c| c == b'@').map_or(0, |i| i + 1);
        &a[from..]
    };
    if auth.is_empty() {
        return Err(RewriteFailed);
    }
    for (n, v) in fields.iter_mut() {
        if n.eq_ignore_ascii_case(b"host") {
            *v = auth.to_vec();
        }
    }
    Ok(())
}

/// The body's framing was decided by the received head: a rule may not
/// change it (the server would read the body differently).
fn framing_kept(h: &RequestHead, head: &RequestHead) -> Result<(), RewriteFailed> {
    if head.framing != h.framing || head.expect_continue != h.expect_continue {
        return Err(RewriteFailed);
    }
    Ok(())
}

/// Seconds since the epoch (cookie dates).
fn now_secs() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

/// The exchange's last steps before its request goes to a server of the
/// backend `sr`, once its rules ran: the unique id (`unique-id-format`,
/// sent in `unique-id-header`), then the persistence cookie and `capture
/// cookie` (`crate::backend::cookie`). `ctx` holds the request as it is
/// now; returns that request edited when its head changed. The server the
/// cookie designates is left in the exchange's `TxnInfo::ck_direct`.
pub fn before_server(
    fe: &crate::proxy::FrontendRt,
    be: &crate::proxy::BackendRt,
    ctx: &Ctx<'_>,
    limits: &Limits,
) -> Option<Box<Edited>> {
    let crate::proxy::BackendKind::Servers(sr) = &be.kind else {
        return None;
    };
    let t = &fe.txn;
    if t.unique_id.is_none() && sr.cookie.is_none() && t.capture_cookie.is_none() {
        return None;
    }
    let req = ctx.req?;
    let store = ctx.vars?;
    // Made by a `unique-id` fetch of the rules already, else now.
    let uid = t.unique_id.as_ref().map(|f| {
        let made = store
            .try_borrow()
            .ok()
            .and_then(|st| st.info.unique_id.clone());
        made.unwrap_or_else(|| {
            let mut v = Vec::new();
            f.render(ctx, &mut v);
            v
        })
    });
    let h = req.head;
    let mut fields: Fields = h
        .headers
        .iter()
        .map(|f| (f.name.get(req.buf).to_vec(), f.value.get(req.buf).to_vec()))
        .collect();
    let mut changed = false;
    // The first `force-persist` / `ignore-persist` rule that holds.
    let persist = sr
        .persist_rules
        .iter()
        .find(|(_, c)| be.matcher.holds(Some(c), ctx));
    let mut st = store.try_borrow_mut().ok()?;
    match persist {
        Some((true, _)) => {
            st.info.ck_force = true;
            st.info.ck_force_rule = true;
        }
        Some((false, _)) => st.info.ck_ignore = true,
        None => {}
    }
    if let Some(v) = uid {
        if let Some(name) = &t.unique_id_header {
            fields.push((name.as_bytes().to_vec(), v.clone()));
            changed = true;
        }
        st.info.unique_id = Some(v);
    }
    changed |= crate::backend::cookie::request(
        sr.cookie.as_ref(),
        t.capture_cookie.as_ref(),
        &sr.farm.servers,
        &mut fields,
        &mut st.info,
        now_secs(),
    );
    drop(st);
    if !changed {
        return None;
    }
    build(
        h.method_span.get(req.buf),
        h.target.get(req.buf),
        h,
        &fields,
        limits,
    )
    .ok()
    .map(Box::new)
}

/// The persistence cookie and `capture cookie` on a response head from
/// server `srv` (`crate::backend::cookie::response`), before the
/// response rules run; notes the server's id and address for `srv_id`,
/// `bc_dst`. `get_or_head` and `post` describe the request.
pub fn cookie_response(
    fe: &crate::proxy::FrontendRt,
    be: &crate::proxy::BackendRt,
    srv: Option<&crate::backend::ServerRt>,
    method: crate::http1::Method,
    head: &mut ResHead,
    vars: &std::cell::RefCell<crate::sample::VarStore>,
) {
    use crate::http1::Method;
    if let (Some(s), Ok(mut v)) = (srv, vars.try_borrow_mut()) {
        v.info.srv_id = Some(s.id);
        // `bc_dst`, `bc_dst_port` in the response rules.
        v.info.srv_addr = s.addr();
    }
    let crate::proxy::BackendKind::Servers(sr) = &be.kind else {
        return;
    };
    if !cookie_on_response(fe, be) {
        return;
    }
    let safe = matches!(
        method,
        Method::Get | Method::Head | Method::Options | Method::Trace
    );
    let cacheable = crate::backend::cookie::cacheability(safe, head.status, &head.fields).0;
    if let Ok(mut st) = vars.try_borrow_mut() {
        // The persistence cookie's edits delete `Set-Cookie` fields and
        // append: the framing's place follows the deletions before it.
        let before: Vec<Vec<u8>> = match head.framing_at {
            Some(at) => head
                .fields
                .iter()
                .take(at)
                .map(|(n, _)| n.clone())
                .collect(),
            None => Vec::new(),
        };
        crate::backend::cookie::response(
            sr.cookie.as_ref(),
            fe.txn.capture_cookie.as_ref(),
            srv,
            &crate::backend::cookie::RespFacts {
                post: method == Method::Post,
                cacheable,
                now: now_secs(),
            },
            &mut head.fields,
            &mut st.info,
        );
        if head.framing_at.is_some() {
            let mut kept = 0;
            for n in &before {
                if head
                    .fields
                    .get(kept)
                    .is_some_and(|(m, _)| m.eq_ignore_ascii_case(n))
                {
                    kept += 1;
                }
            }
            head.framing_at = Some(kept);
        }
    }
}

/// Notes for the log line what the backend knew at the exchange's end:
/// `%bc` (streams on the backend), `%sc` (on the server; HAProxy counts
/// them once this exchange gave its slot back, as here), `%rc` (retries: `retries` less those left), `%si:%sp`.
pub fn note_for_log(
    vars: &std::cell::RefCell<crate::sample::VarStore>,
    farm: &crate::backend::Farm,
    srv: Option<&crate::backend::ServerRt>,
    retries_left: u32,
    redispatched: bool,
) {
    use std::sync::atomic::Ordering::Relaxed;
    let queued =
        |q: &std::sync::Mutex<crate::backend::WaitQueue>| q.lock().map_or(0, |q| q.len() as u32);
    let be: u32 = farm
        .servers
        .iter()
        .map(|s| s.cur.load(Relaxed) + queued(&s.queue))
        .sum::<u32>()
        + queued(&farm.queue);
    if let Ok(mut v) = vars.try_borrow_mut() {
        let i = &mut v.info;
        i.be_conns = be;
        i.srv_conns = srv.map_or(0, |s| s.cur.load(Relaxed));
        i.retries = farm.retries.saturating_sub(retries_left);
        // After `force-persist` the same server is tried again instead.
        i.redispatched = redispatched && !i.ck_force_rule;
        i.srv_addr = srv.and_then(|s| s.addr());
        i.srv_id = srv.map(|s| s.id);
    }
}

/// Whether responses of this exchange go through [`cookie_response`].
pub fn cookie_on_response(fe: &crate::proxy::FrontendRt, be: &crate::proxy::BackendRt) -> bool {
    fe.txn.capture_cookie.is_some()
        || matches!(&be.kind, crate::proxy::BackendKind::Servers(sr) if sr.cookie.is_some())
}

enum Act<'r> {
    Edit(&'r HeaderEdit),
    Rewrite(&'r Rewrite),
}

/// Runs one proxy's `http-request` rules on `st` in order. Returns the
/// index of the first final rule that holds (return, redirect, deny,
/// use-service), `None` when the rules ran out or `allow` stopped them.
/// `base` is the exchange's context without request.
#[cfg(test)]
pub fn run_request(
    rules: &[ReqRule],
    m: &Matcher,
    base: &Ctx<'_>,
    st: &mut ReqState<'_>,
    limits: &Limits,
) -> Result<Option<usize>, RewriteFailed> {
    run_request_from(rules, m, base, st, limits, 0, &|_| true)
}

/// Whether a redirect with `ignore-empty` has a log-format location that
/// gives nothing on this request (then the rule is skipped).
fn redirect_is_empty<'a>(rd: &crate::config::Redirect, ctx: impl FnOnce() -> Ctx<'a>) -> bool {
    let (true, crate::config::RedirectKind::Location, Some(f)) =
        (rd.ignore_empty, rd.kind, &rd.fmt)
    else {
        return false;
    };
    let mut out = Vec::new();
    f.render(&ctx(), &mut out);
    out.is_empty()
}

/// [`run_request`] from rule `from` on (the rules before it ran already).
/// A `wait-for-body` rule that holds stops the run (its index is
/// returned) unless `body_ready` says the body it asks for is there.
pub fn run_request_from(
    rules: &[ReqRule],
    m: &Matcher,
    base: &Ctx<'_>,
    st: &mut ReqState<'_>,
    limits: &Limits,
    from: usize,
    body_ready: &dyn Fn(&crate::config::WaitForBody) -> bool,
) -> Result<Option<usize>, RewriteFailed> {
    if from == 0 {
        // HAProxy resets the mode when a proxy's rules start.
        st.strict = true;
    }
    if from >= rules.len() {
        return Ok(None);
    }
    let room = st.room(limits);
    let limits = &room;
    // The rules' context: made once, made again only after an action that
    // changed the request (`fresh = None` before it does).
    let mut fresh: Option<Ctx<'_>> = None;
    // `base` itself while it holds the request as it is (its caller gave
    // it the request, no rule has changed it yet): no copy of the context.
    let mut base_now = st.edited.is_none() && base.req.is_some_and(|r| st.is_orig(&r));
    macro_rules! cur_ctx {
        () => {
            if base_now {
                base
            } else {
                &*fresh.get_or_insert_with(|| Ctx {
                    req: Some(st.req()),
                    ..*base
                })
            }
        };
    }
    for (i, rule) in rules.iter().enumerate().skip(from) {
        if st.hint_open && !matches!(rule.action, HttpRequestAction::EarlyHint(_)) {
            // The rules after an `early-hint` one: its 103 is complete.
            fresh = None;
            base_now = false;
            st.close_hint();
        }
        if let Some(c) = &rule.cond {
            let ctx = cur_ctx!();
            if !m.holds(Some(c), ctx) {
                continue;
            }
        }
        if matches!(
            rule.action,
            HttpRequestAction::UseService(_)
                | HttpRequestAction::Deny { .. }
                | HttpRequestAction::Auth { .. }
                | HttpRequestAction::Allow
                | HttpRequestAction::Tarpit { .. }
                | HttpRequestAction::Reject
                | HttpRequestAction::SilentDrop
        ) {
            // (A redirect is noted once its answer went through the
            // `http-after-response` rules, a `return` once its answer is
            // made: its formats see the rule before, as HAProxy's; see
            // `stream`.)
            base.note_last_rule(&rule.loc);
        }
        match &rule.action {
            // `ignore-empty`: a location whose format gives nothing skips
            // the rule (HAProxy 2.6's `http_apply_redirect_rule`).
            HttpRequestAction::Redirect(rd) if redirect_is_empty(rd, || *cur_ctx!()) => continue,
            HttpRequestAction::Return(_)
            | HttpRequestAction::UseService(_)
            | HttpRequestAction::Redirect(_)
            | HttpRequestAction::Deny { .. }
            | HttpRequestAction::Auth { .. } => return Ok(Some(i)),
            HttpRequestAction::Allow => return Ok(None),
            HttpRequestAction::SetLogLevel(l) => set_log_level(base, *l),
            HttpRequestAction::Var(v) => {
                let ctx = cur_ctx!();
                v.run(ctx);
            }
            HttpRequestAction::Capture(c) => {
                let ctx = cur_ctx!();
                c.run(ctx);
            }
            HttpRequestAction::Tarpit { .. }
            | HttpRequestAction::Reject
            | HttpRequestAction::SilentDrop => return Ok(Some(i)),
            HttpRequestAction::TrackSc { n, key, .. } => {
                if let Some(t) = &rule.table {
                    let ctx = cur_ctx!();
                    crate::stick::track_sc(*n, key, t, ctx, false, (true, false));
                }
            }
            a @ (HttpRequestAction::ScIncGpc0(_)
            | HttpRequestAction::ScIncGpc1(_)
            | HttpRequestAction::ScSetGpt0(..)
            | HttpRequestAction::ScIncGpc { .. }
            | HttpRequestAction::ScSetGpt { .. }) => {
                let ctx = cur_ctx!();
                crate::stick::run_http_action(a, ctx);
            }
            HttpRequestAction::EarlyHint(e) => {
                fresh = None;
                base_now = false;
                st.early_hint(e, base);
            }
            HttpRequestAction::Header(e) => {
                fresh = None;
                base_now = false;
                if st.apply(Act::Edit(e), base, limits).is_err() {
                    st.counts.failed_rewrites += 1;
                    if st.strict {
                        base.note_last_rule(&rule.loc);
                        return Err(RewriteFailed);
                    }
                }
            }
            HttpRequestAction::Rewrite(r) => {
                fresh = None;
                base_now = false;
                if st.apply(Act::Rewrite(r), base, limits).is_err() {
                    st.counts.failed_rewrites += 1;
                    if st.strict {
                        base.note_last_rule(&rule.loc);
                        return Err(RewriteFailed);
                    }
                }
            }
            HttpRequestAction::StrictMode(on) => {
                fresh = None;
                base_now = false;
                st.strict = *on;
            }
            HttpRequestAction::SockOpt(o) => crate::l4rules::set_fc_opt(*o, base),
            HttpRequestAction::PatEdit(e) => {
                let ctx = cur_ctx!();
                e.run(ctx);
            }
            // No early data: the handshake is over (see the action).
            HttpRequestAction::WaitForHandshake => {}
            HttpRequestAction::DoResolve(d) => {
                // (The context is made again: it borrows the request.)
                fresh = None;
                let waited = st.lookup.take();
                let ctx = cur_ctx!();
                let asked = match waited {
                    // Back at the rule with the answer.
                    Some(l) => {
                        crate::resolvers::lookup::end(d, &l, ctx);
                        None
                    }
                    None => crate::resolvers::lookup::start(d, ctx),
                };
                if let Some(l) = asked {
                    st.lookup = Some(l);
                    return Ok(Some(i));
                }
            }
            HttpRequestAction::SetPriority { offset, expr } => {
                let ctx = cur_ctx!();
                crate::l4rules::set_priority(*offset, expr, ctx);
            }
            HttpRequestAction::DisableL7Retry => {
                if let Some(mut v) = base.vars.and_then(|v| v.try_borrow_mut().ok()) {
                    v.info.no_l7_retry = true;
                }
            }
            HttpRequestAction::NormalizeUri(n) => {
                fresh = None;
                base_now = false;
                match st.normalize_uri(*n, limits) {
                    Ok(()) => {}
                    // HAProxy's ACT_RET_INV: a bad request, whatever the mode
                    // (the caller answers 400).
                    Err(Some(NormalizeInvalid)) => {
                        base.note_last_rule(&rule.loc);
                        return Ok(Some(i));
                    }
                    Err(None) if st.strict => {
                        base.note_last_rule(&rule.loc);
                        return Err(RewriteFailed);
                    }
                    Err(None) => {}
                }
            }
            HttpRequestAction::CacheUse(_) => {
                if let Some(cache) = &rule.cache {
                    fresh = None;
                    base_now = false;
                    cache_use(cache, base, st);
                }
            }
            HttpRequestAction::SetAddr(f, e) => {
                let ctx = cur_ctx!();
                crate::l4rules::set_stream_addr(*f, e, ctx);
            }
            HttpRequestAction::WaitForBody(w) => {
                if !body_ready(w) {
                    return Ok(Some(i));
                }
            }
            HttpRequestAction::SetTimeout { tunnel, value } => {
                let ms = match value {
                    crate::config::TimeoutValue::Ms(m) => Some(*m),
                    crate::config::TimeoutValue::Expr(e) => {
                        let ctx = Ctx {
                            req: Some(st.req()),
                            ..*base
                        };
                        // HAProxy: no value, no change; 0 or less is no
                        // timeout at all.
                        e.eval_int(&ctx)
                            .map(|v| u32::try_from(v.clamp(0, i64::from(i32::MAX))).unwrap_or(0))
                    }
                };
                if let (Some(ms), Some(Ok(mut v))) = (ms, base.vars.map(|v| v.try_borrow_mut())) {
                    if *tunnel {
                        v.info.timeout_tunnel = Some(ms);
                    } else {
                        v.info.timeout_server = Some(ms);
                    }
                }
            }
        }
    }
    Ok(None)
}

/// `http-request cache-use`: keys the request for a later `cache-store`
/// (in the exchange's `TxnInfo`) and notes a hit in `st`.
fn cache_use(
    cache: &std::sync::Arc<crate::httpcache::Cache>,
    base: &Ctx<'_>,
    st: &mut ReqState<'_>,
) {
    use crate::httpcache as hc;
    let r = st.req();
    let fields: Vec<(&[u8], &[u8])> = r
        .head
        .headers
        .iter()
        .map(|f| (f.name.get(r.buf), f.value.get(r.buf)))
        .collect();
    let req = hc::Request {
        method: r.head.method,
        version: r.head.version,
        target: r.head.target.get(r.buf),
        absolute: r.head.target_form == crate::http1::TargetForm::Absolute,
        fields: &fields,
    };
    let mut facts = hc::ReqFacts::for_request(r.head.method);
    let hit = hc::use_cache(cache, &req, &mut facts);
    // HAProxy counts a lookup once the request is hashed and cacheable.
    if facts.hash.is_some() && !facts.ignore {
        st.counts.cache_lookups += 1;
    }
    if hit.is_some() {
        st.counts.cache_hits += 1;
    }
    if let Some(Ok(mut v)) = base.vars.map(|v| v.try_borrow_mut()) {
        v.info.cache = facts;
    }
    if st.cache_hit.is_none() {
        st.cache_hit = hit;
    }
}

#[cfg(test)]
mod tests;

pub(crate) use crate::sample::set_log_level;

/// The level of an exchange's log line, if it is logged: the frontend's
/// judgement first (`option dontlog-normal` drops a normal one, `option
/// log-separate-errors` sends an abnormal one at `err`), then a
/// `set-log-level` of its rules (HAProxy's `strm_log` order).
pub fn exchange_log_level(
    fe: &crate::proxy::FrontendRt,
    abnormal: bool,
    vars: Option<&std::cell::RefCell<crate::sample::VarStore>>,
) -> Option<u8> {
    let lv = fe.log_level(abnormal)?;
    match vars
        .and_then(|v| v.try_borrow().ok())
        .and_then(|s| s.info.log_level)
    {
        Some(over) => over,
        None => Some(lv),
    }
}
