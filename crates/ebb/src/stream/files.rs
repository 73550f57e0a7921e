//! A file backend's answer (`serve-files`): the file looked up, its
//! conditions and ranges, a precompressed sibling or compression on the
//! fly, the `http-response` rules on the fields, and the body from
//! memory, the file, or `sendfile`.

use std::sync::Arc;

use sched::Ctx;

use super::msg::{self, BodySize, RespHead};
use super::{sample_ctx, Stream, H1};
use crate::http1::Method;
use crate::mux::h1::client::{dst_of, Body};
use crate::proxy::{BackendKind, FrontendRt};
use crate::serve::cache::Found;
use crate::serve::files::{decide, Conditions, Decision};

/// Bodies up to this size are copied behind their head so pipelined answers
/// leave in one write; larger ones are written from the cached file or sent
/// with `sendfile`.
const COPY_BODY_MAX: usize = 4096;

/// A cached file is a body the client side can send.
impl crate::mux::h1::FileBody for crate::serve::cache::OpenFile {
    fn bytes(&self) -> Option<&[u8]> {
        self.small.as_deref()
    }

    fn file(&self) -> &std::fs::File {
        &self.file
    }
}

/// A file compressed on the fly: the client side asks for it a slice at a
/// time (`serve::comp`).
struct FileSlices {
    file: Arc<crate::serve::cache::OpenFile>,
    pos: u64,
    end: u64,
    comp: Box<crate::compress::BodyCompressor>,
}

impl crate::mux::h1::SliceBody for FileSlices {
    fn next_slice(&mut self, out: &mut Vec<u8>) -> std::io::Result<usize> {
        // A slice costs `compress::COST` times its size of the run's share.
        let n = crate::serve::comp::compress_slice(
            &self.file,
            &mut self.pos,
            self.end,
            &mut self.comp,
            out,
        )?;
        Ok(n * crate::compress::COST)
    }

    fn is_finished(&self) -> bool {
        self.comp.is_finished()
    }
}

impl Stream {
    /// Writes the answer for a file lookup's result.
    pub(super) fn answer_found(&mut self, c: &mut H1, ctx: &mut Ctx, bi: usize, found: Found) {
        // The answer starts here: the output may have been written out
        // (and the buffer emptied) while the file was looked up.
        self.resp_start = c.wbuf.len();
        c.vars.get_mut().begin_response();
        let version = c.head.version;
        let head_req = c.head.method == Method::Head;
        let keep_alive = self.keep_alive;
        let f = match found {
            Found::Refused(r) => {
                let st = r.status();
                c.error_response(st, keep_alive, version, head_req, &[]);
                self.finish_request(c, ctx, st, Some(bi), 0);
                return;
            }
            Found::AddSlash(loc) => {
                self.fields.clear();
                self.reply(c, 301, &[(b"Location", loc.as_bytes())], b"");
                self.finish_request(c, ctx, 301, Some(bi), 0);
                return;
            }
            Found::Listing(html) => {
                let ct: &[u8] = b"text/html; charset=utf-8";
                let coded = {
                    let buf = &c.rbuf[c.rstart..c.rend];
                    let policy = c.fe.comp.get(bi).and_then(|p| p.as_deref());
                    crate::serve::comp::whole_body(policy, buf, &c.head, ct, html.as_bytes())
                };
                self.fields.clear();
                self.fields.push(b"Content-Type", ct);
                let body = match &coded {
                    Some((ce, b)) => {
                        self.fields.push(b"Content-Encoding", ce.as_bytes());
                        self.fields.push(b"Vary", b"Accept-Encoding");
                        b.as_slice()
                    }
                    None => html.as_bytes(),
                };
                self.reply(c, 200, &[], body);
                self.finish_request(c, ctx, 200, Some(bi), 0);
                return;
            }
            Found::File(f) => f,
        };
        // A precompressed sibling, or compression on the fly (serve::comp).
        let plan = {
            let buf = &c.rbuf[c.rstart..c.rend];
            let policy = c.fe.comp.get(bi).and_then(|p| p.as_deref());
            crate::serve::comp::plan_file(f, policy, buf, &c.head)
        };
        let f = Arc::clone(&plan.file);
        let v = &f.validators;
        let decision = {
            let buf = &c.rbuf[c.rstart..c.rend];
            decide(&Conditions::of_request(buf, &c.head.headers), v)
        };
        let backend = Arc::clone(&c.fe.backends[bi]);
        let max_age = match &backend.kind {
            BackendKind::Files(c) => c.max_age,
            BackendKind::Servers(_) => None,
        };
        let (status, range) = match decision {
            Decision::Full => (200, Some((0, v.len))),
            Decision::Partial { start, end } => (206, Some((start, end + 1))),
            Decision::NotModified => (304, None),
            Decision::Unsatisfiable => (416, None),
        };
        let mut cr = String::new();
        let logged;
        let compress = plan.compress.filter(|_| status == 200);
        let weak = compress.and_then(|_| crate::compress::weak_etag(v.etag.as_bytes()));
        let coding = plan.sibling.or(compress).and_then(|c| c.content_encoding());
        let rules = !backend.http_response.is_empty() || !c.fe.http_response.is_empty();
        // The file's own fields as its cache entry holds them ready, when
        // they go out as they are: no rule to see them, no weak ETag, not
        // a 416 (which has none).
        let own = (!rules && compress.is_none() && status != 416 && f.fields.max_age == max_age)
            .then_some(&f.fields);
        let cc = max_age
            .filter(|_| own.is_none())
            .map(|a| format!("max-age={a}"));
        // The common answer (the file's own fields alone, whole or 304, no
        // rule): no field list to build.
        let bare = own.is_some()
            && coding.is_none()
            && !plan.vary
            && matches!(decision, Decision::Full | Decision::NotModified);
        if bare {
            self.fields.clear();
            logged = status;
        } else {
            let mut hdrs = crate::http1::Fields::<8>::new();
            if status != 416 {
                if own.is_none() {
                    hdrs.push((b"Content-Type", f.content_type.as_bytes()));
                    hdrs.push((b"Last-Modified", v.last_modified.as_bytes()));
                    hdrs.push((b"ETag", weak.as_deref().unwrap_or(v.etag.as_bytes())));
                    if compress.is_none() {
                        hdrs.push((b"Accept-Ranges", b"bytes"));
                    }
                    if let Some(cc) = &cc {
                        hdrs.push((b"Cache-Control", cc.as_bytes()));
                    }
                }
                if let Some(ce) = coding {
                    hdrs.push((b"Content-Encoding", ce.as_bytes()));
                }
                if plan.vary {
                    hdrs.push((b"Vary", b"Accept-Encoding"));
                }
            }
            match decision {
                Decision::Partial { start, end } => {
                    cr = format!("bytes {start}-{end}/{}", v.len);
                }
                Decision::Unsatisfiable => cr = format!("bytes */{}", v.len),
                _ => {}
            }
            if !cr.is_empty() {
                hdrs.push((b"Content-Range", cr.as_bytes()));
            }
            // No response rule: the fields go out as they are.
            let edited = rules.then(|| {
                let tr = &c.tr;
                let dst = dst_of(tr, c.dst.as_deref().copied());
                let sctx = crate::sample::Ctx {
                    be: Some(&backend.name),
                    ..sample_ctx(tr, c.sess.peer, &c.fe.name, &dst, c.vars.cell(), &c.stk)
                };
                apply_edits(&c.fe, &backend, hdrs.to_vec(), status, &sctx)
            });
            if let Some((_, _, Some(d))) = edited {
                // `http-response deny`: an answer of its own instead.
                self.resp_start = c.wbuf.len();
                let st = self.write_denied(c, &backend, d, self.keep_alive);
                self.finish_request(c, ctx, st, Some(bi), 0);
                return;
            }
            logged = edited.as_ref().map_or(status, |e| e.1);
            self.fields.clear();
            match &edited {
                Some((fields, _, _)) => {
                    for (n, val) in fields {
                        self.fields.push(n, val);
                    }
                }
                None => {
                    for (n, val) in hdrs.iter() {
                        self.fields.push(n, val);
                    }
                }
            }
        }
        // The body's size follows the file's status (a 304 has none); the
        // rules' status is the one sent and logged. A compressed body is
        // produced chunked by its slices (`serve::comp`), so its size is
        // unknown (compression is for HTTP/1.1 clients only).
        let size = match range {
            Some(_) if compress.is_some() => BodySize::Unknown,
            Some((s, e)) => BodySize::Exact(e - s),
            None => BodySize::Empty,
        };
        let head = RespHead {
            fields: own.map_or(msg::Fields::EMPTY, |o| o.list.fields()),
            pre: own.map(|o| o.prepared()),
            extra: self.fields.fields(),
            close: !keep_alive,
            ..RespHead::new(logged, size)
        };
        c.respond_head(head);
        let mut body_len = 0;
        // Made (and boxed at once: the compressor is large, not moved
        // about) only when a body goes out compressed.
        let comp = match (range, head_req, compress) {
            (Some(_), false, Some(k)) => {
                let level =
                    c.fe.comp
                        .get(bi)
                        .and_then(|p| p.as_ref())
                        .map_or(1, |p| p.level);
                crate::compress::BodyCompressor::new(k, level)
                    .ok()
                    .map(Box::new)
            }
            _ => None,
        };
        if let (Some((s, e)), Some(comp)) = (range, comp) {
            c.body = Some(Body::Slices(Box::new(FileSlices {
                file: Arc::clone(&f),
                pos: s,
                end: e,
                comp,
            })));
        } else if let (Some((s, e)), false) = (range, head_req) {
            body_len = e - s;
            if let Some(data) = &f.small {
                let (s, e) = (s as usize, (e as usize).min(data.len()));
                // A head the HTTP/2 connection took: it sends the body
                // from the file's bytes, not through the output buffer.
                let native = c.native_answer().is_some_and(|a| a.follows > 0);
                if e - s <= COPY_BODY_MAX && !native {
                    // Counted in the output buffer's growth, not again.
                    body_len = 0;
                    c.wbuf.extend_from_slice(&data[s..e]);
                } else {
                    c.body = Some(Body::Mem {
                        file: Arc::clone(&f) as Arc<dyn crate::mux::h1::FileBody>,
                        pos: s,
                        end: e,
                    });
                }
            } else if e > s {
                c.body = Some(Body::Sendfile {
                    file: Arc::clone(&f) as Arc<dyn crate::mux::h1::FileBody>,
                    off: s,
                    end: e,
                });
            }
        }
        self.finish_request(c, ctx, logged, Some(bi), body_len);
    }
}

/// Runs the `http-response` rules (the backend's, then the frontend's, as
/// HAProxy orders them) on the fields of a file answer ebb builds itself;
/// returns the fields and the status they leave.
fn apply_edits(
    fe: &FrontendRt,
    be: &crate::proxy::BackendRt,
    hdrs: Vec<(&[u8], &[u8])>,
    status: u16,
    ctx: &crate::sample::Ctx<'_>,
) -> (crate::rewrite::Fields, u16, Option<crate::rewrite::Denied>) {
    let mut head = crate::rewrite::ResHead::new(
        status,
        Vec::new(),
        hdrs.into_iter()
            .map(|(n, v)| (n.to_vec(), v.to_vec()))
            .collect(),
    );
    let sets = [
        (&be.http_response[..], &be.matcher),
        (&fe.http_response[..], &fe.matcher),
    ];
    crate::rewrite::run_response(&sets, ctx, &mut head);
    (head.fields, head.status, head.denied)
}
