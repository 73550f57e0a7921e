//! An answer from a cache (`http-request cache-use`): the stored head
//! with its `Age` (or `304 Not Modified`), the `http-response` and
//! `http-after-response` rules, the backend's compression, then the body.

use std::sync::Arc;

use sched::Ctx;

use super::{sample_ctx, Stream, H1};
use crate::http1::Method;
use crate::mux::h1::client::dst_of;

impl Stream {
    /// Writes an answer from a cache: the stored head (or `304 Not
    /// Modified` for a conditional request it satisfies) with its `Age`,
    /// through the backend's and the frontend's `http-response` and
    /// `http-after-response` rules as a server's answer would go, then
    /// the body (none for HEAD or 304). A compressed hit's head is edited
    /// after the rules, which see it as stored (HAProxy 2.6 decides on
    /// the compression before its response rules and edits the head in
    /// its compression filter, after them).
    pub(super) fn answer_cached(
        &mut self,
        c: &mut H1,
        ctx: &mut Ctx,
        bi: usize,
        hit: &crate::httpcache::Hit,
    ) {
        self.resp_start = c.wbuf.len();
        {
            let v = c.vars.get_mut();
            v.begin_response();
            v.info.cache_hit = Some(Arc::clone(&hit.cache.name));
        }
        let e = &hit.entry;
        let version = c.head.version;
        let head_req = c.head.method == Method::Head;
        let ka = self.keep_alive;
        // The backend's compression applies to a hit as to a server's
        // answer (HAProxy 2.6's compression filter comes after its cache).
        let comp = if hit.not_modified {
            None
        } else {
            hit_compression(c, bi, e)
        };
        if let Some(Ok(mut v)) = c.vars.cell().map(|v| v.try_borrow_mut()) {
            v.info.res_comp = comp.as_ref().map(|(k, _)| k.name());
        }
        let out = &mut c.wbuf;
        let status = if hit.not_modified { 304 } else { e.status };
        out.extend_from_slice(b"HTTP/1.1 ");
        crate::http1::push_decimal(out, u64::from(status));
        out.push(b' ');
        if hit.not_modified {
            out.extend_from_slice(b"Not Modified");
        } else {
            out.extend_from_slice(&e.reason);
        }
        out.extend_from_slice(b"\r\n");
        for (n, v) in &e.fields {
            out.extend_from_slice(n);
            out.extend_from_slice(b": ");
            out.extend_from_slice(v);
            out.extend_from_slice(b"\r\n");
        }
        out.extend_from_slice(b"Age: ");
        crate::http1::push_decimal(out, crate::httpcache::age_of(e));
        out.extend_from_slice(b"\r\n");
        // (A compressed hit's framing is written after the rules.)
        if comp.is_none() && (!hit.not_modified || e.had_length) {
            // (A 304 says the stored answer's length too when the server
            // gave one, as HAProxy's cache replays its head: RFC 9110
            // §8.6 allows it.)
            out.extend_from_slice(b"Content-Length: ");
            crate::http1::push_decimal(out, e.body.len() as u64);
            out.extend_from_slice(b"\r\n");
        }
        if !ka {
            out.extend_from_slice(b"Connection: close\r\n");
        } else if version == crate::http1::Version::Http10 {
            out.extend_from_slice(b"Connection: keep-alive\r\n");
        }
        out.extend_from_slice(b"\r\n");
        let backend = Arc::clone(&c.fe.backends[bi]);
        let logged = {
            let tr = &c.tr;
            let dst = dst_of(tr, c.dst.as_deref().copied());
            let buf = &c.rbuf[c.rstart..c.rend];
            let sctx = crate::sample::Ctx {
                req: Some(crate::sample::Req {
                    buf,
                    head: &c.head,
                    body: self.body_now.data(&self.body_buf, buf, c.head.head_len),
                }),
                be: Some(&backend.name),
                ..sample_ctx(tr, c.sess.peer, &c.fe.name, &dst, c.vars.cell(), &c.stk)
            };
            let sets = [
                (&backend.http_response[..], &backend.matcher),
                (&c.fe.http_response[..], &c.fe.matcher),
            ];
            crate::rewrite::rewrite_in_place(&sets, &sctx, &mut c.wbuf, self.resp_start)
                .unwrap_or((status, None))
        };
        if let (_, Some(d)) = logged {
            // `http-response deny`: the cached answer is replaced.
            c.wbuf.truncate(self.resp_start);
            let st = self.write_denied(c, &backend, d, self.keep_alive);
            self.local_server = Some("<CACHE>");
            self.finish_request(c, ctx, st, Some(bi), 0);
            return;
        }
        let logged = self.after_response(c, Some(bi), logged.0);
        let cut = comp
            .as_ref()
            .is_some_and(|(k, _)| !add_coding_fields(&mut c.wbuf, self.resp_start, *k));
        if cut {
            // (Not reached: the client then sees a cut answer rather
            // than a wrong one.)
            c.closing = true;
        } else if let Some((_, mut z)) = comp {
            let at = c.wbuf.len();
            if z.write(&e.body, crate::compress::Then::End, &mut c.wbuf)
                .is_ok()
            {
                crate::proxy::count_compressed(&c.fe, Some(&backend), z.totals());
            } else {
                // (Not reached with ebb's encoders; the client then sees
                // a cut body rather than a wrong one.)
                c.wbuf.truncate(at);
                c.closing = true;
            }
        } else if !hit.not_modified && !head_req {
            c.wbuf.extend_from_slice(&e.body);
        }
        if !ka {
            c.closing = true;
        }
        self.local_server = Some("<CACHE>");
        self.finish_after_rules(c, ctx, logged, Some(bi), 0);
    }
}

/// Adds a compressed answer's fields to the head ebb wrote at
/// `out[start..]` (it ends there, with its blank line) once the response
/// rules ran on it, as HAProxy 2.6's compression filter edits the head
/// after them: the ETag they left goes out weak (its line taken out and
/// written again with `Content-Encoding` and `Vary`), and the body is
/// chunked. False (not reached: ebb wrote the head) when the head is
/// not as expected.
fn add_coding_fields(out: &mut Vec<u8>, start: usize, k: crate::compress::Coding) -> bool {
    if start > out.len() || !out[start..].ends_with(b"\r\n\r\n") {
        return false;
    }
    // Each line after the status line is `name: value` CRLF: ebb wrote
    // them all (the rules write theirs so too).
    let Some(nl) = out[start..].iter().position(|&b| b == b'\n') else {
        return false;
    };
    let mut at = start + nl + 1;
    let mut etag = None;
    for line in out[at..].split_inclusive(|&b| b == b'\n') {
        let line_at = at;
        at += line.len();
        let Some(colon) = line.iter().position(|&b| b == b':') else {
            continue;
        };
        if line[..colon].eq_ignore_ascii_case(b"etag") {
            etag = Some((line_at..at, line[colon + 1..].trim_ascii().to_vec()));
            break;
        }
    }
    let mut fields = Vec::new();
    let v = crate::compress::Verdict::Compress(k);
    crate::compress::write_h1_fields(&mut fields, v, etag.as_ref().map(|(_, v)| &v[..]));
    fields.extend_from_slice(b"Transfer-Encoding: chunked\r\n");
    let end = out.len() - 2;
    out.splice(end..end, fields);
    if let Some((r, _)) = etag {
        out.drain(r);
    }
    true
}

/// The coding a cache hit is sent with under its backend's compression
/// (decided as for a server's answer, [`crate::compress::verdict_stored`]),
/// and its compressor; None: sent as stored.
fn hit_compression(
    c: &H1,
    bi: usize,
    e: &crate::httpcache::Entry,
) -> Option<(
    crate::compress::Coding,
    Box<crate::compress::BodyCompressor>,
)> {
    use crate::compress as z;
    let policy = c.fe.comp.get(bi).cloned().flatten()?;
    let buf = c.rbuf.get(c.rstart..c.rend)?;
    let coding = z::choose_h1(&policy, buf, &c.head)?;
    match z::verdict_stored(&policy, Some(coding), e.status, &e.fields, e.body.len()) {
        z::Verdict::Compress(k) => {
            let enc = z::BodyCompressor::new(k, policy.level).ok()?;
            Some((k, Box::new(enc)))
        }
        z::Verdict::AsIs => None,
    }
}
