//! Response rules: a response head held as status, reason and fields
//! while the `http-response` and `http-after-response` rules run over it
//! ([`ResHead`], [`run_response_with`]), then written; the same rules
//! over an answer already written (`rewrite_in_place`, ebb's own answers:
//! [`after_local`]); and the reason `set-status` writes when given none
//! (HAProxy's table). The fields' edits are the parent module's, shared
//! with requests.

use super::*;

/// What a response's `cache-store` rules need besides the head, and the
/// answer one of them decided to store.
pub struct StoreCtx {
    pub method: crate::http1::Method,
    /// The body's length when announced.
    pub content_length: Option<u64>,
    pub pending: Option<crate::httpcache::Pending>,
}

/// A response head as rules edit it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ResHead {
    pub status: u16,
    pub reason: Vec<u8>,
    pub fields: Fields,
    /// An `http-response deny`, `redirect`, `return` or `silent-drop`
    /// rule held: the rules stopped there and the answer is to be
    /// replaced (or, for `silent-drop`, dropped with the connection).
    pub denied: Option<Denied>,
    /// The bytes the fields may take (HAProxy's room for rewrites: see
    /// [`ResHead::room`]); None: no bound (an answer ebb wrote itself).
    pub room: Option<usize>,
    /// Rewrites that failed for want of room (HAProxy's `wrew`).
    pub failed_rewrites: u64,
    /// A rewrite failed in strict mode: the rules stopped there and the
    /// answer is replaced by a 500 (HAProxy's internal error).
    pub internal_error: bool,
    /// Where the server's framing field stood among `fields` (which hold
    /// none): the index of the field it came before. HAProxy keeps it in
    /// its place as rules delete fields before it and append theirs after
    /// the last one, so each deletion before it moves it up (`None`: the
    /// framing goes after every field).
    pub framing_at: Option<usize>,
}

/// The `http-response deny`, `redirect`, `return` or `silent-drop` rule
/// that stopped a response's rules.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Denied {
    /// The rule set (0: the backend's, 1: the frontend's) and the rule.
    pub set: usize,
    pub rule: usize,
    /// A `redirect`: its `Location`, evaluated on the response.
    pub location: Option<Vec<u8>>,
    /// Which of those rules it is.
    pub stop: Stop,
}

/// The rule that stopped a response's rules (see [`Denied`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Stop {
    /// `deny`: the rule's answer, counted as a denied response (`PH`).
    Deny,
    /// `redirect`: a local answer (`LH`).
    Redirect,
    /// `return`: a local answer (`LH`).
    Return,
    /// `silent-drop`: no answer, the client's connection dropped.
    SilentDrop,
}

impl ResHead {
    pub fn new(status: u16, reason: Vec<u8>, fields: Fields) -> ResHead {
        ResHead {
            status,
            reason,
            fields,
            denied: None,
            room: None,
            failed_rewrites: 0,
            internal_error: false,
            framing_at: None,
        }
    }

    /// Takes the framing fields (`Content-Length`, `Transfer-Encoding`)
    /// out of a server's answer's fields, which held them while its rules
    /// ran: the framing goes where the first one stood (`framing_at`),
    /// after every field when a rule deleted them all.
    pub fn take_framing(&mut self) {
        let at = self.fields.iter().position(|(n, _)| is_framing(n));
        self.fields.retain(|(n, _)| !is_framing(n));
        self.framing_at = at;
    }

    /// `framing_at` once the fields before it that `gone` names are
    /// deleted.
    fn framing_after(&self, gone: impl Fn(&[u8]) -> bool) -> Option<usize> {
        let at = self.framing_at?;
        let fields = self.fields.get(..at).unwrap_or(&self.fields);
        Some(fields.len() - fields.iter().filter(|(n, _)| gone(n)).count())
    }

    /// Bounds the fields as HAProxy's buffer bounds a server's answer:
    /// the buffer (`limits.buf_size`) holds the head (`head_len` bytes as
    /// received) and the body bytes that came with it (`arrived`), reads
    /// stopping `tune.maxrewrite` short of its end (`limits.max_head_bytes`
    /// from its start); the rewritten head must fit beside those bytes.
    pub fn room(&mut self, limits: &Limits, head_len: usize, arrived: usize) {
        let held = arrived.min(limits.max_head_bytes.saturating_sub(head_len));
        // The head's other bytes: status line, framing fields, end.
        let other = head_len.saturating_sub(fields_len(&self.fields));
        self.room = Some(limits.buf_size.saturating_sub(held).saturating_sub(other));
    }

    /// Writes the status line and the fields (no final empty line);
    /// returns where in `out` the framing field goes, when it does not
    /// go after the fields (see `framing_at`).
    pub fn write(&self, out: &mut Vec<u8>) -> Option<usize> {
        use std::io::Write;
        let _ = write!(out, "HTTP/1.1 {} ", self.status);
        out.extend_from_slice(&self.reason);
        out.extend_from_slice(b"\r\n");
        let mut framing = None;
        for (i, (n, v)) in self.fields.iter().enumerate() {
            if self.framing_at == Some(i) {
                framing = Some(out.len());
            }
            out.extend_from_slice(n);
            out.extend_from_slice(b": ");
            out.extend_from_slice(v);
            out.extend_from_slice(b"\r\n");
        }
        if self.framing_at == Some(self.fields.len()) {
            framing = Some(out.len());
        }
        framing
    }
}

/// Whether a field is one of the message's framing fields, which ebb
/// writes itself.
fn is_framing(name: &[u8]) -> bool {
    name.eq_ignore_ascii_case(b"content-length") || name.eq_ignore_ascii_case(b"transfer-encoding")
}

/// The bytes a list of fields takes in an HTTP/1.1 head.
fn fields_len(fields: &Fields) -> usize {
    fields.iter().map(|(n, v)| n.len() + v.len() + 4).sum()
}

/// A proxy's response rules and the matcher of their conditions.
pub type RuleSet<'a> = (&'a [RespRule], &'a Matcher);

/// Runs response rule sets in order on `head`. `base` is the exchange's
/// context (request, names...) without response.
pub fn run_response(sets: &[RuleSet<'_>], base: &Ctx<'_>, head: &mut ResHead) {
    run_response_with(sets, base, head, None);
}

/// [`run_response`] on an answer from a server: `cache-store` rules may
/// store it (`store`). On answers ebb builds itself they do nothing.
pub fn run_response_with(
    sets: &[RuleSet<'_>],
    base: &Ctx<'_>,
    head: &mut ResHead,
    mut store: Option<&mut StoreCtx>,
) {
    for (si, (rules, m)) in sets.iter().enumerate() {
        // HAProxy resets the mode when a proxy's rules start.
        let mut strict = true;
        for (ri, rule) in rules.iter().enumerate() {
            let list = borrowed(&head.fields);
            let ctx = Ctx {
                res: Some(Res::List {
                    status: head.status,
                    hdrs: &list,
                }),
                ..*base
            };
            if !m.holds(rule.cond.as_ref(), &ctx) {
                continue;
            }
            let mut fields = head.fields.clone();
            match &rule.action {
                // The rest of this proxy's list is skipped.
                HttpResponseAction::Allow => {
                    base.note_last_rule(&rule.loc);
                    break;
                }
                HttpResponseAction::Var(v) => {
                    v.run(&ctx);
                    continue;
                }
                HttpResponseAction::SetLogLevel(l) => {
                    set_log_level(&ctx, *l);
                    continue;
                }
                HttpResponseAction::Capture(c) => {
                    c.run(&ctx);
                    continue;
                }
                HttpResponseAction::CacheStore(_) => {
                    if let (Some(sc), Some(cache)) = (store.as_deref_mut(), &rule.cache) {
                        let (facts, from_cache) = base
                            .vars
                            .and_then(|v| v.try_borrow().ok())
                            .map(|v| (v.info.cache, v.info.cache_hit.is_some()))
                            .unwrap_or_default();
                        let input = crate::httpcache::StoreInput {
                            method: sc.method,
                            from_cache,
                            facts,
                            status: head.status,
                            reason: &head.reason,
                            fields: &head
                                .fields
                                .iter()
                                .filter(|(n, _)| !is_framing(n))
                                .cloned()
                                .collect::<Vec<_>>(),
                            content_length: sc.content_length,
                        };
                        if let Some(p) = crate::httpcache::store(cache, &input) {
                            sc.pending = Some(p);
                        }
                    }
                    continue;
                }
                // The body was waited for before these rules ran (see
                // `stream::proxy`).
                HttpResponseAction::WaitForBody(_) => continue,
                HttpResponseAction::StrictMode(on) => {
                    strict = *on;
                    continue;
                }
                HttpResponseAction::SockOpt(o) => {
                    crate::l4rules::set_fc_opt(*o, &ctx);
                    continue;
                }
                HttpResponseAction::PatEdit(e) => {
                    e.run(&ctx);
                    continue;
                }
                // Nothing more runs: the caller sends the deny's answer
                // (and notes the rule once it is made, see `stream`).
                HttpResponseAction::Deny(_) | HttpResponseAction::Return(_) => {
                    let stop = match rule.action {
                        HttpResponseAction::Deny(_) => Stop::Deny,
                        _ => Stop::Return,
                    };
                    head.denied = Some(Denied {
                        set: si,
                        rule: ri,
                        location: None,
                        stop,
                    });
                    return;
                }
                HttpResponseAction::SilentDrop => {
                    base.note_last_rule(&rule.loc);
                    head.denied = Some(Denied {
                        set: si,
                        rule: ri,
                        location: None,
                        stop: Stop::SilentDrop,
                    });
                    return;
                }
                HttpResponseAction::Stk(a) => {
                    match (&**a, &rule.table) {
                        (HttpRequestAction::TrackSc { n, key, .. }, Some(t)) => {
                            crate::stick::track_sc_response(*n, key, t, &ctx, head.status);
                        }
                        (a, _) => {
                            crate::stick::run_http_action(a, &ctx);
                        }
                    }
                    continue;
                }
                // HAProxy: the server's answer is dropped for a redirect
                // (`location` only), evaluated on that answer; noted as
                // the last rule after the `http-after-response` rules.
                HttpResponseAction::Redirect(rd) => {
                    let location = crate::proxy::redirect_location(rd, b"", None, Some(&ctx));
                    if location.is_empty() && rd.ignore_empty && rd.fmt.is_some() {
                        continue;
                    }
                    head.denied = Some(Denied {
                        set: si,
                        rule: ri,
                        location: Some(location),
                        stop: Stop::Redirect,
                    });
                    return;
                }
                HttpResponseAction::Header(e) => apply_edit(e, &ctx, &mut fields),
                HttpResponseAction::Rewrite(Rewrite::SetStatus { code, reason }) => {
                    let r = match reason {
                        Some(r) => r.as_bytes().to_vec(),
                        None => set_status_reason(*code).as_bytes().to_vec(),
                    };
                    drop(list);
                    head.status = *code;
                    head.reason = r;
                    continue;
                }
                HttpResponseAction::Rewrite(r) => {
                    apply_fields(r, &ctx, &mut fields);
                }
            }
            // The fields the rule deleted before the framing's place.
            let framing_at = head.framing_after(|n| match &rule.action {
                HttpResponseAction::Header(e) => {
                    e.op != EditOp::Add && n.eq_ignore_ascii_case(e.name.as_bytes())
                }
                HttpResponseAction::Rewrite(Rewrite::DelMatching(m)) => m.matches(n),
                _ => false,
            });
            drop(list);
            if head.room.is_some_and(|r| fields_len(&fields) > r) {
                // No room left in the buffer: the rewrite fails (ignored
                // with `strict-mode off`).
                head.failed_rewrites += 1;
                if strict {
                    base.note_last_rule(&rule.loc);
                    head.internal_error = true;
                    return;
                }
                continue;
            }
            head.fields = fields;
            head.framing_at = framing_at;
        }
    }
}

/// Whether the response rules of `sets` would do anything.
pub fn any(sets: &[RuleSet<'_>]) -> bool {
    sets.iter().any(|(r, _)| !r.is_empty())
}

/// The fields of a parsed response as an owned list, but its
/// `Connection` fields, kept aside; the framing fields are in the list,
/// as the rules see them (see [`ResHead::take_framing`]).
pub fn split_fields<'b>(
    buf: &'b [u8],
    headers: &[crate::http1::HeaderSpan],
) -> (Fields, FieldRefs<'b>) {
    let mut edit = Vec::new();
    let mut keep = Vec::new();
    for f in headers {
        let n = f.name.get(buf);
        let v = f.value.get(buf);
        if n.eq_ignore_ascii_case(b"connection") {
            keep.push((n, v));
        } else {
            edit.push((n.to_vec(), v.to_vec()));
        }
    }
    (edit, keep)
}

/// Runs `sets` on a response ebb wrote itself into `out[start..]` (an
/// error, a `return`, a redirect, a file, the stats page): parses its
/// head, runs the rules, and writes the head again in place. An answer
/// whose head does not parse (a hand-written errorfile) is left as is.
pub fn rewrite_in_place(
    sets: &[RuleSet<'_>],
    base: &Ctx<'_>,
    out: &mut Vec<u8>,
    start: usize,
) -> Option<(u16, Option<Denied>)> {
    if !any(sets) || start > out.len() {
        return None;
    }
    let limits = Limits {
        max_head_bytes: 1 << 20,
        ..Limits::default()
    };
    let parsed = crate::http1::parse_response(&out[start..], &limits, crate::http1::Method::Get);
    let Ok(Status::Complete(h)) = parsed else {
        return None;
    };
    let buf = &out[start..start + h.head_len];
    let (fields, keep) = split_fields(buf, &h.headers);
    let framing: Fields = fields
        .iter()
        .filter(|(n, _)| is_framing(n))
        .cloned()
        .collect();
    let mut head = ResHead::new(h.status, h.reason.get(buf).to_vec(), fields);
    run_response(sets, base, &mut head);
    if let Some(d) = head.denied {
        return Some((head.status, Some(d)));
    }
    head.take_framing();
    let mut new = Vec::with_capacity(h.head_len + 64);
    // ebb's own answer: its framing stays where it stood among the
    // fields (HAProxy's place too), after them when the rules took it.
    let at = head.write(&mut new).unwrap_or(new.len());
    let mut lines = Vec::new();
    for (n, v) in &framing {
        lines.extend_from_slice(n);
        lines.extend_from_slice(b": ");
        lines.extend_from_slice(v);
        lines.extend_from_slice(b"\r\n");
    }
    // Made a 101 with an `upgrade` field: a switching answer, sent as
    // HAProxy sends it (`connection: upgrade`, no length; the connection
    // ends after it, see the stream's `finish_request`).
    let switching = head.status == 101
        && head
            .fields
            .iter()
            .any(|(n, _)| n.eq_ignore_ascii_case(b"upgrade"));
    if switching {
        new.extend_from_slice(b"connection: upgrade\r\n");
    } else {
        new.splice(at..at, lines);
    }
    for (n, v) in keep.into_iter().filter(|_| !switching) {
        new.extend_from_slice(n);
        new.extend_from_slice(b": ");
        new.extend_from_slice(v);
        new.extend_from_slice(b"\r\n");
    }
    new.extend_from_slice(b"\r\n");
    out.splice(start..start + h.head_len, new);
    Some((head.status, None))
}

/// The `http-after-response` rules (the backend's, then the frontend's) on
/// an answer ebb wrote itself at `out[start..]`; returns the status they
/// leave when they ran.
pub fn after_local(
    fe: &crate::proxy::FrontendRt,
    be: Option<&crate::proxy::BackendRt>,
    base: &Ctx<'_>,
    out: &mut Vec<u8>,
    start: usize,
) -> Option<u16> {
    let none: &[RespRule] = &[];
    let sets = [
        be.map_or((none, &fe.matcher), |b| (&b.after_response[..], &b.matcher)),
        (&fe.after_response[..], &fe.matcher),
    ];
    rewrite_in_place(&sets, base, out, start).map(|r| r.0)
}

/// The reason `set-status` writes when given none: HAProxy's own table
/// (http_get_reason), which words some codes its own way ("Moved
/// Temporarily", "Gateway Time-out") and names the class of a code it
/// does not list ("Success" for 299).
fn set_status_reason(code: u16) -> &'static str {
    if let Ok(i) = HAPROXY_REASONS.binary_search_by_key(&code, |&(c, _)| c) {
        return HAPROXY_REASONS[i].1;
    }
    match code {
        100..=199 => "Informational",
        200..=299 => "Success",
        300..=399 => "Redirection",
        400..=499 => "Client Error",
        500..=599 => "Server Error",
        _ => "Other",
    }
}

/// HAProxy's reason phrases, by code (sorted).
const HAPROXY_REASONS: [(u16, &str); 68] = [
    (100, "Continue"),
    (101, "Switching Protocols"),
    (102, "Processing"),
    (200, "OK"),
    (201, "Created"),
    (202, "Accepted"),
    (203, "Non-Authoritative Information"),
    (204, "No Content"),
    (205, "Reset Content"),
    (206, "Partial Content"),
    (207, "Multi-Status"),
    (210, "Content Different"),
    (226, "IM Used"),
    (300, "Multiple Choices"),
    (301, "Moved Permanently"),
    (302, "Moved Temporarily"),
    (303, "See Other"),
    (304, "Not Modified"),
    (305, "Use Proxy"),
    (307, "Temporary Redirect"),
    (308, "Permanent Redirect"),
    (310, "Too many Redirects"),
    (400, "Bad Request"),
    (401, "Unauthorized"),
    (402, "Payment Required"),
    (403, "Forbidden"),
    (404, "Not Found"),
    (405, "Method Not Allowed"),
    (406, "Not Acceptable"),
    (407, "Proxy Authentication Required"),
    (408, "Request Time-out"),
    (409, "Conflict"),
    (410, "Gone"),
    (411, "Length Required"),
    (412, "Precondition Failed"),
    (413, "Request Entity Too Large"),
    (414, "Request-URI Too Long"),
    (415, "Unsupported Media Type"),
    (416, "Requested range unsatisfiable"),
    (417, "Expectation failed"),
    (418, "I'm a teapot"),
    (421, "Misdirected Request"),
    (422, "Unprocessable Content"),
    (423, "Locked"),
    (424, "Method failure"),
    (425, "Too Early"),
    (426, "Upgrade Required"),
    (428, "Precondition Required"),
    (429, "Too Many Requests"),
    (431, "Request Header Fields Too Large"),
    (449, "Retry With"),
    (450, "Blocked by Windows Parental Controls"),
    (451, "Unavailable For Legal Reasons"),
    (456, "Unrecoverable Error"),
    (499, "client has closed connection"),
    (500, "Internal Server Error"),
    (501, "Not Implemented"),
    (502, "Bad Gateway or Proxy Error"),
    (503, "Service Unavailable"),
    (504, "Gateway Time-out"),
    (505, "HTTP Version not supported"),
    (506, "Variant also negotiate"),
    (507, "Insufficient storage"),
    (508, "Loop detected"),
    (509, "Bandwidth Limit Exceeded"),
    (510, "Not extended"),
    (511, "Network authentication required"),
    (520, "Web server is returning an unknown error"),
];
