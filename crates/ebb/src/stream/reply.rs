//! The answers ebb writes itself: small replies, prepared answers
//! (`http-request return`, `http-error`), the frontend's error answers,
//! and the answer of an `http-response deny` or `redirect` in place of a
//! refused one.

use std::sync::Arc;

use sched::Tick;

use super::msg::{BodySize, RespHead};
use super::{sample_ctx, Stream, H1};
use crate::http1::Method;
use crate::mux::h1::client::dst_of;
use crate::proxy::FrontendRt;
use crate::rules::ReqView;

impl Stream {
    /// A small answer the stream makes itself (fixed answers, redirects,
    /// pages): the fields already in `self.fields`, then `hdrs`, then the
    /// body, through the client side's one output path.
    pub(super) fn reply(&mut self, c: &mut H1, status: u16, hdrs: &[(&[u8], &[u8])], body: &[u8]) {
        self.reply_at(c, status, hdrs, body, None);
    }

    /// [`Stream::reply`] with the `Content-Length` before the field
    /// `length_at` ([`RespHead::length_at`]).
    pub(super) fn reply_at(
        &mut self,
        c: &mut H1,
        status: u16,
        hdrs: &[(&[u8], &[u8])],
        body: &[u8],
        length_at: Option<u8>,
    ) {
        for (n, v) in hdrs {
            self.fields.push(n, v);
        }
        let size = match body.len() {
            0 => BodySize::Empty,
            n => BodySize::Exact(n as u64),
        };
        let head = RespHead {
            extra: self.fields.fields(),
            close: !self.keep_alive,
            length_at,
            ..RespHead::new(status, size)
        };
        c.respond(head, &[body]);
    }

    /// Writes a prepared answer (`http-request return`, an `http-error`
    /// reply) through the client side's one output path, with what
    /// `lf-string` / `hdr` evaluate to for this request, and `extra`
    /// fields after its own.
    #[allow(clippy::too_many_arguments)]
    pub(super) fn answer_prepared(
        &mut self,
        c: &mut H1,
        fe: &FrontendRt,
        p: &crate::proxy::Prepared,
        keep_alive: bool,
        be: Option<&str>,
        extra: &[(&[u8], &[u8])],
    ) {
        self.answer_done(c, fe, p, None, keep_alive, be, extra, 0);
    }

    /// [`Stream::answer_prepared`] with the formats already evaluated
    /// (`done`) when the rule ran; `now` is the scheduler turn's tick (0
    /// when unknown), for the `Date` of a whole literal answer.
    #[allow(clippy::too_many_arguments)]
    pub(super) fn answer_done(
        &mut self,
        c: &mut H1,
        fe: &FrontendRt,
        p: &crate::proxy::Prepared,
        done: Option<&crate::proxy::Evaluated>,
        keep_alive: bool,
        be: Option<&str>,
        extra: &[(&[u8], &[u8])],
        now: Tick,
    ) {
        if let (None, Some(lit), true) = (done, &p.literal, extra.is_empty()) {
            // All literal: an HTTP/1.1 request kept alive takes the whole
            // answer written ahead (the same bytes: `WholeAnswer`), made
            // at the first one.
            // HAProxy's `content-length` goes before the `content-type`
            // it adds last (when it adds one).
            let length_at = p.literal_length_at;
            if keep_alive && p.literal_plain {
                let whole = p.h1_whole.get_or_init(|| {
                    let head = RespHead {
                        fields: lit.fields(),
                        pre: Some(lit.prepared()),
                        length_at,
                        ..RespHead::new(p.status, BodySize::Exact(p.body.len() as u64))
                    };
                    crate::mux::h1::out::whole_answer(head, &[&p.body])
                });
                if let Some(w) = whole {
                    if c.respond_whole(w, now) {
                        return;
                    }
                }
            }
            // Else its fields and body as they were built; the
            // muxes copy the fields' prepared forms unless one of them is
            // a field a mux decides on (then read from the added ones).
            let base = RespHead::new(p.status, BodySize::Exact(p.body.len() as u64));
            let head = if p.literal_plain {
                RespHead {
                    fields: lit.fields(),
                    pre: Some(lit.prepared()),
                    close: !keep_alive,
                    length_at,
                    ..base
                }
            } else {
                RespHead {
                    extra: lit.fields(),
                    close: !keep_alive,
                    length_at,
                    ..base
                }
            };
            c.respond(head, &[&p.body]);
            return;
        }
        self.fields.clear();
        let mut scratch = std::mem::take(&mut self.scratch);
        let body = {
            let tr = &c.tr;
            let dst = dst_of(tr, c.dst.as_deref().copied());
            let buf = &c.rbuf[c.rstart..c.rend];
            let cx = ReqView {
                req: Some(crate::sample::Req {
                    buf,
                    head: &c.head,
                    body: self.body_now.data(&self.body_buf, buf, c.head.head_len),
                }),
                be,
                ..sample_ctx(tr, c.sess.peer, &fe.name, &dst, c.vars.cell(), &c.stk)
            };
            p.render(&cx, done, &mut self.fields, &mut scratch)
        };
        let length_at = p.content_type_at(body, self.fields.fields());
        for (n, v) in extra {
            self.fields.push(n, v);
        }
        let head = RespHead {
            extra: self.fields.fields(),
            close: !keep_alive,
            length_at,
            ..RespHead::new(p.status, BodySize::Exact(body.len() as u64))
        };
        c.respond(head, &[body]);
        self.scratch = scratch;
    }

    /// Writes the answer of the `http-response deny`, `return` or
    /// `redirect` rule at `denied` (set 0: the backend's rules, 1: the
    /// frontend's) in place of the one refused, and closes after it when
    /// the exchange does not allow more (HAProxy's http_reply_and_close);
    /// drops the client's connection for `silent-drop`. Returns its
    /// status.
    pub(super) fn write_denied(
        &mut self,
        c: &mut H1,
        be: &crate::proxy::BackendRt,
        denied: crate::rewrite::Denied,
        keep_alive: bool,
    ) -> u16 {
        let fe = Arc::clone(&c.fe);
        // The server's answer is replaced by ebb's (HTTP/1.1: `res.ver`).
        if let Some(mut v) = c.vars.try_borrow_mut() {
            v.info.srv_h2 = false;
        }
        let rules = if denied.set == 0 {
            &be.http_response
        } else {
            &fe.http_response
        };
        let Some(rule) = rules.get(denied.rule) else {
            return 0;
        };
        if let (crate::config::HttpResponseAction::Redirect(rd), Some(loc)) =
            (&rule.action, &denied.location)
        {
            // As HAProxy's answer: the code, the location, no body.
            self.late_rule = Some(rule.loc.clone());
            if !keep_alive {
                self.keep_alive = false;
                c.closing = true;
            }
            self.fields.clear();
            let (f, n) = redirect_fields(rd.code, loc, rd.cookie.as_deref());
            self.reply_at(c, rd.code, &f[..n], b"", Some(0));
            return rd.code;
        }
        let ret = match &rule.action {
            crate::config::HttpResponseAction::Deny(ret)
            | crate::config::HttpResponseAction::Return(ret) => ret,
            crate::config::HttpResponseAction::SilentDrop => {
                // An answer of ebb's own (a file, a cache hit): nothing of
                // it goes, the client's connection is dropped.
                c.wbuf.truncate(self.resp_start);
                crate::transport::silent_drop(c.tr.tcp());
                c.silent = true;
                crate::proxy::count_denied_req(&fe.http, Some(be));
                self.local_term = Some("PR");
                self.keep_alive = false;
                c.closing = true;
                return 0;
            }
            _ => return 0,
        };
        // HAProxy keeps the client's connection after the answer when the
        // exchange allows it; an errorfile's bytes are sent as written
        // (their framing is their own): the connection closes after them.
        let raw = matches!(ret.body, crate::config::ReturnBody::Errorfile(Some(_)));
        let keep_alive = keep_alive && !raw;
        if !keep_alive {
            self.keep_alive = false;
            c.closing = true;
        }
        match (&ret.body, &rule.prepared) {
            (crate::config::ReturnBody::Errorfile(Some(raw)), _) => {
                c.wbuf.extend_from_slice(raw);
            }
            (_, Some(p)) => self.answer_prepared(c, &fe, p, keep_alive, Some(&be.name), &[]),
            _ => self.error_answer(c, &fe, ret.status, keep_alive, Some(&be.name)),
        }
        // Noted once its answer is made, as HAProxy's.
        if let Some(mut v) = c.vars.try_borrow_mut() {
            v.info.note_last_rule(&rule.loc);
        }
        ret.status
    }

    /// The frontend's error answer for `status`: its `http-error` reply,
    /// its errorfile, or ebb's page.
    pub(super) fn error_answer(
        &mut self,
        c: &mut H1,
        fe: &FrontendRt,
        status: u16,
        keep_alive: bool,
        be: Option<&str>,
    ) {
        match fe.error_replies.iter().find(|(s, _)| *s == status) {
            Some((_, p)) => self.answer_prepared(c, fe, p, keep_alive, be, &[]),
            None => {
                let (version, head_req) = (c.head.version, c.head.method == Method::Head);
                c.error_response(status, keep_alive, version, head_req, &[]);
            }
        }
    }
}

/// A field's name and value.
type Field<'a> = (&'a [u8], &'a [u8]);

/// A redirect's fields, as HAProxy 2.6's http_apply_redirect_rule: the
/// location, and `Cache-Control: no-cache` for the codes a cache may not
/// keep on their own (302, 303, 307; not 301 nor 308), then the rule's
/// `Set-Cookie` (`set-cookie`, `clear-cookie`).
/// Returns the fields and how many of them go.
pub(super) fn redirect_fields<'a>(
    code: u16,
    loc: &'a [u8],
    cookie: Option<&'a str>,
) -> ([Field<'a>; 3], usize) {
    let mut f: [Field<'a>; 3] = [(b"Location", loc), (b"", b""), (b"", b"")];
    let mut n = 1;
    if matches!(code, 302 | 303 | 307) {
        f[n] = (b"Cache-Control", b"no-cache");
        n += 1;
    }
    if let Some(c) = cookie {
        f[n] = (b"Set-Cookie", c.as_bytes());
        n += 1;
    }
    (f, n)
}
