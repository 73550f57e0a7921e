//! The server's answer on its way to the client: the response head parsed
//! and judged (`http-response` rules, caching, compression, the
//! `Connection:` decision), the body's framing towards the client, the
//! exchange's end (the server connection kept, pooled or closed) and its
//! log line and counters.

use super::*;

impl Stream {
    /// Writes the client's response head from the server's.
    pub(super) fn forward_response_head(&mut self, c: &mut H1, ctx: &mut Ctx) {
        // What the response rules read of the server connection.
        {
            let side = self.side.borrow();
            let info = &mut c.vars.get_mut().info;
            info.srv_local = side.local;
            info.srv_connected = true;
            // An HTTP/2 stream's connection kept it when its handshake
            // ended.
            info.srv_tls = match side.sock.as_ref() {
                Some(sock) => sock.server_tls(),
                None => side.h2.as_ref().and_then(|p| p.borrow().tls.clone()),
            };
        }
        let Some(mut up) = self.up.take() else {
            return;
        };
        let be = Arc::clone(&up.be);
        let fe = Arc::clone(&c.fe);
        c.vars.get_mut().begin_response();
        if !be.l4.res_rules.is_empty() {
            // `tcp-response content` rules run before the response head is
            // analysed (HAProxy): they read no HTTP, see l4rules.
            let tr = &c.tr;
            let dst = dst_of(tr, c.dst.as_deref().copied());
            let cx = crate::sample::Ctx {
                be: Some(&be.name),
                srv: up.server.as_ref().map(|s| s.name.as_str()),
                ..crate::stream::sample_ctx(tr, c.sess.peer, &fe.name, &dst, c.vars.cell(), &c.stk)
            };
            let v = crate::l4rules::run_rules(
                &be.l4.res_rules,
                0,
                &be.matcher,
                &cx,
                false,
                None,
                &mut false,
            );
            match v {
                // HAProxy: nothing reaches the client, logged `PD`, -1.
                Verdict::Reject | Verdict::SilentDrop => {
                    if v == Verdict::SilentDrop {
                        crate::transport::silent_drop(c.tr.tcp());
                        // Nothing more on that socket: no lingering close.
                        c.silent = true;
                        // An abort, counted as a refused request (`dreq`)
                        // of the frontend and the backend (HAProxy's).
                        crate::proxy::count_denied_req(&fe.http, Some(&be));
                    } else {
                        // A reject is a denied response (`dresp`), a
                        // silent-drop an abort (HAProxy's tcp_rules).
                        crate::proxy::count_denied_resp(&fe.http, &be, up.server.as_deref());
                    }
                    up.term = "PD";
                    up.keep_server = false;
                    self.up = Some(up);
                    self.abort_proxy(c, ctx);
                    return;
                }
                // HAProxy: the server connection closes, the client gets
                // a 502 (`SH`).
                Verdict::Close => {
                    self.up = Some(up);
                    self.fail(c, ctx, ExchangeError::closed_before_head(false));
                    return;
                }
                _ => {}
            }
        }
        let n = up.resp.head_len;
        let side = std::rc::Rc::clone(&self.side);
        let mut sd = side.borrow_mut();
        let istart = sd.istart;
        let buf = &sd.ibuf[istart..istart + n];
        if up.resp.status == 101 && !up.upgrade {
            // RFC 9110 §7.8: no switch the client did not ask for
            // (HAProxy 2.6: 502).
            drop(sd);
            up.keep_server = false;
            self.up = Some(up);
            self.fail(c, ctx, ExchangeError::bad_response_head());
            return;
        }
        if let (101, Some(want)) = (up.resp.status, &up.ws_accept) {
            // RFC 6455 §4.2.2: no (or, for a key ebb made, a wrong)
            // `Sec-WebSocket-Accept` is an invalid answer (HAProxy: 502).
            let ok = match (up.resp.header(buf, "sec-websocket-accept"), want) {
                (None, _) => false,
                (Some(got), Some(w)) => got.eq_ignore_ascii_case(w),
                (Some(_), None) => true,
            };
            if !ok {
                drop(sd);
                up.keep_server = false;
                self.up = Some(up);
                self.fail(c, ctx, ExchangeError::bad_response_head());
                return;
            }
        }
        let r = &up.resp;
        up.status = r.status;
        count_head(&up);
        // HAProxy counts the head it parsed (`crate::http1::htx`), not
        // the one written.
        up.bytes_out +=
            crate::http1::htx::head_size(8 + 3 + r.reason.get(buf).len(), buf, &r.headers);
        // The length an HTTP/2 server gave an answer its pipe carries
        // chunked to an HTTP/2 client (`Pipe::length`): it goes on beside
        // the chunks, for the trailers that may follow.
        let mut h2_length = None;
        if let (Some(p), BodyFraming::Chunked) = (&sd.h2, r.framing) {
            // An HTTP/2 server's answer without a length: the pipe's
            // `transfer-encoding: chunked` is ebb's (HTTP/2 has none), not
            // in the head HAProxy parsed; the length it had is.
            h2_length = p.try_borrow().ok().and_then(|p| p.length);
            let length_size = h2_length.map_or(0, |n| {
                b"content-length".len() + n.checked_ilog10().map_or(1, |d| d as usize + 1)
            });
            up.bytes_out = (up.bytes_out + length_size as u64)
                .saturating_sub((b"transfer-encoding".len() + b"chunked".len()) as u64);
        }
        self.resp_start = c.wbuf.len();
        // A 101 to an upgrade, or a 2xx to a CONNECT (RFC 9110 §9.3.6):
        // both connections carry the tunnel's bytes after this head.
        let tunnel = r.tunnel;
        let mut ka = crate::drain::keep_alive(up.client_keep_alive, c.stopping) && !r.force_close;
        if c.head.expect_continue && !up.req_left.done() {
            // The server answered before the body it may never get: the
            // connection ends after the answer (`finish_exchange`), the
            // client is told so.
            ka = false;
        }
        let out = &mut c.wbuf;
        // The server's version goes on, as HAProxy passes it.
        match r.version_raw {
            Some(v) => {
                out.extend_from_slice(v.get(buf));
                out.push(b' ');
            }
            None => out.extend_from_slice(match r.version {
                Version::Http10 => b"HTTP/1.0 ",
                Version::Http11 => b"HTTP/1.1 ",
            }),
        }
        crate::http1::push_decimal(out, u64::from(r.status));
        out.push(b' ');
        out.extend_from_slice(r.reason.get(buf));
        out.extend_from_slice(b"\r\n");
        {
            let tr = &c.tr;
            let dst = dst_of(tr, c.dst.as_deref().copied());
            let cx = crate::sample::Ctx {
                res: Some(crate::sample::Res::H1 { buf, head: r }),
                ..crate::stream::sample_ctx(tr, c.sess.peer, &fe.name, &dst, c.vars.cell(), &c.stk)
            };
            crate::sample::logline::capture_headers(&fe.captures, true, &cx);
        }
        let verdict = match &up.comp_choice {
            Some((p, k)) if !tunnel => compress::verdict_h1(p, *k, buf, r),
            _ => compress::Verdict::AsIs,
        };
        if let Some(s) = &up.server {
            let tr = &c.tr;
            let dst = dst_of(tr, c.dst.as_deref().copied());
            let sctx = crate::sample::Ctx {
                res: Some(crate::sample::Res::H1 { buf, head: r }),
                be: Some(&be.name),
                srv: Some(s.name.as_str()),
                ..crate::stream::sample_ctx(tr, c.sess.peer, &fe.name, &dst, c.vars.cell(), &c.stk)
            };
            c.stk.stick_response(&be.stick, &be.matcher, &sctx, &**s);
        }
        let coding = match verdict {
            compress::Verdict::Compress(k) => Some(k),
            _ => None,
        };
        // HAProxy decides before its response rules (`res.comp`).
        if let Some(Ok(mut v)) = c.vars.cell().map(|v| v.try_borrow_mut()) {
            v.info.res_comp = coding.map(compress::Coding::name);
        }
        // (A compressed answer's ETag is weakened below, after the rules,
        // which see the server's as HAProxy's do: its compression filter
        // edits the head after them, and the cache stores it before.)
        // The ETag the rules left, when they ran (None: the server's).
        let mut rules_etag: Option<Option<Vec<u8>>> = None;
        let sets = [
            (&be.http_response[..], &be.matcher),
            (&fe.http_response[..], &fe.matcher),
            (&be.after_response[..], &be.matcher),
            (&fe.after_response[..], &fe.matcher),
        ];
        // Where the framing field goes in `out` when not after the others.
        let mut framing_pos = None;
        if crate::rewrite::any(&sets)
            || crate::rewrite::cookie_on_response(&fe, &be)
            || be.checkcache
        {
            // Rules run on the response as a list of fields, in order
            // (`crate::rewrite`); the status line is written again after.
            let tr = &c.tr;
            let dst = dst_of(tr, c.dst.as_deref().copied());
            // What arrived of the body (`res.body`): all of it when a
            // `wait-for-body` rule waited.
            let mut decoded = Vec::new();
            let after = sd.ibuf.get(istart + n..sd.iend).unwrap_or(&[]);
            let seen = crate::stream::answer_body_in(after, r.framing, &mut decoded);
            let size = match r.framing {
                BodyFraming::ContentLength(l) => l,
                _ => seen.have,
            };
            let sctx = crate::sample::Ctx {
                be: Some(&be.name),
                srv: up.server.as_ref().map(|s| s.name.as_str()),
                res_body: Some((seen.data(&decoded, after, 0), size)),
                ..crate::stream::sample_ctx(tr, c.sess.peer, &fe.name, &dst, c.vars.cell(), &c.stk)
            };
            // The rules see the server's framing as HAProxy's do: one
            // `Content-Length` (duplicates merged, the length as parsed)
            // when the body has one, the `Transfer-Encoding` fields of a
            // chunked body (its `Content-Length` dropped), in their places.
            // They cannot edit them (refused at start); ebb writes the
            // framing itself where the first one stands after the rules.
            let mut fields = Vec::new();
            let mut length_shown = false;
            for f in &r.headers {
                let name = f.name.get(buf);
                let framing = if eq_nocase(name, b"content-length") {
                    Some(false)
                } else if eq_nocase(name, b"transfer-encoding") {
                    Some(true)
                } else {
                    None
                };
                let value = match (framing, r.framing) {
                    (Some(false), BodyFraming::ContentLength(l)) if !length_shown => {
                        length_shown = true;
                        let mut v = Vec::new();
                        crate::http1::push_decimal(&mut v, l);
                        v
                    }
                    // An answer without a body (to HEAD, a 304) shows the
                    // length it declares.
                    (Some(false), BodyFraming::None) if !length_shown => {
                        let Some(l) = r.declared_length else { continue };
                        length_shown = true;
                        let mut v = Vec::new();
                        crate::http1::push_decimal(&mut v, l);
                        v
                    }
                    (Some(true), BodyFraming::Chunked) => f.value.get(buf).to_vec(),
                    (Some(_), _) => continue,
                    (None, _) if !crate::http1::goes_on(buf, f) => continue,
                    (None, _) => {
                        let mut v = Vec::new();
                        crate::http1::push_forwarded_value(&mut v, name, f.value.get(buf));
                        v
                    }
                };
                fields.push((name.to_vec(), value));
            }
            let mut head =
                crate::rewrite::ResHead::new(r.status, r.reason.get(buf).to_vec(), fields);
            // HAProxy's room for rewrites: the head beside the body bytes
            // that came with it, in `tune.bufsize`.
            head.room(&c.w.limits, n, after.len());
            let srv = up.server.as_deref();
            let has_cookie = |f: &crate::rewrite::Fields| {
                f.iter()
                    .filter(|(n, _)| eq_nocase(n, b"set-cookie") || eq_nocase(n, b"set-cookie2"))
                    .count()
            };
            // (Counted before our own cookie goes in; only `checkcache` asks.)
            let server_cookie = be.checkcache && has_cookie(&head.fields) > 0;
            if let Some(v) = c.vars.cell() {
                crate::rewrite::cookie_response(&fe, &be, srv, up.method, &mut head, v);
            }
            let mut sc = crate::rewrite::StoreCtx {
                method: up.method,
                content_length: match r.framing {
                    BodyFraming::ContentLength(n) => Some(n),
                    BodyFraming::None => Some(0),
                    _ => None,
                },
                pending: None,
            };
            crate::rewrite::run_response_with(&sets, &sctx, &mut head, Some(&mut sc));
            head.take_framing();
            let bh = [&fe.http, &be.http];
            for h in bh {
                h.failed_rewrites
                    .fetch_add(head.failed_rewrites, Ordering::Relaxed);
            }
            let denied = match head.denied.take() {
                Some(d) => Some(Refusal::Rule(d)),
                None if head.internal_error => {
                    for h in bh {
                        h.internal_errors.fetch_add(1, Ordering::Relaxed);
                    }
                    Some(Refusal::Internal)
                }
                None if be.checkcache => {
                    // Our persistence cookie is not the server's; with
                    // `nocache` its insertion made the answer private.
                    let (inserted, nocache) = match (&be.kind, c.vars.cell()) {
                        (crate::proxy::BackendKind::Servers(sr), Some(v)) => (
                            v.try_borrow()
                                .is_ok_and(|v| matches!(v.info.ck_server, b'I' | b'U')),
                            sr.cookie.as_ref().is_some_and(|k| k.nocache),
                        ),
                        _ => (false, false),
                    };
                    let server_cookie =
                        server_cookie || has_cookie(&head.fields) > usize::from(inserted);
                    let safe = matches!(
                        up.method,
                        Method::Get | Method::Head | Method::Options | Method::Trace
                    );
                    let blocked = !(inserted && nocache)
                        && crate::backend::cookie::blocks_cacheable_cookie(
                            safe,
                            head.status,
                            &head.fields,
                            server_cookie,
                        );
                    blocked.then_some(Refusal::CacheableCookie(head.status))
                }
                None => None,
            };
            if let Some(d) = denied {
                out.truncate(self.resp_start);
                drop(sd);
                self.up = Some(up);
                self.deny_response(c, ctx, &be, d);
                return;
            }
            up.store = sc.pending.map(Box::new);
            if coding.is_some() {
                // The compressed answer's ETag is the weak form of the one
                // the rules left (written with the coding's fields).
                let at = head.fields.iter().position(|(n, _)| eq_nocase(n, b"etag"));
                rules_etag = Some(at.map(|i| {
                    if head.framing_at.is_some_and(|f| f > i) {
                        head.framing_at = head.framing_at.map(|f| f - 1);
                    }
                    head.fields.remove(i).1
                }));
            }
            out.truncate(self.resp_start);
            framing_pos = head.write(out);
            up.status = head.status;
        } else {
            // A line the origin wrote as ebb writes it (`name: value`
            // CRLF) is copied as it is, in one piece with the kept lines
            // right before it: a few copies per head, not four per field.
            // Each field's name is classified once (`Kind`): what
            // `forwardable` drops, the framing and the fields skipped.
            let mut run: Option<core::ops::Range<usize>> = None;
            // The framing goes where the server's first framing field
            // was, as HAProxy keeps the fields' order (moved there below):
            // at the first forwarded field from that one on.
            let mut framing_seen = false;
            let mut framing_done = false;
            for f in &r.headers {
                let name = f.name.get(buf);
                let kind = Kind::of(name);
                framing_seen |= matches!(kind, Kind::ContentLength | Kind::TransferEncoding);
                let forwarded = match kind {
                    Kind::Dropped | Kind::TransferEncoding => false,
                    Kind::Connection => crate::http1::connection_goes_on(f.value.get(buf)),
                    _ => true,
                };
                if !forwarded {
                    continue;
                }
                if framing_seen && !framing_done {
                    framing_done = true;
                    if let Some(r) = run.take() {
                        out.extend_from_slice(buf.get(r).unwrap_or(&[]));
                    }
                    framing_pos = Some(out.len());
                }
                if kind == Kind::ContentLength || (coding.is_some() && kind == Kind::Etag) {
                    continue;
                }
                let (start, ve) = (f.name.start as usize, f.value.end as usize);
                let as_written = kind != Kind::Connection
                    && buf.get(f.name.end as usize..f.value.start as usize) == Some(b": ")
                    && buf.get(ve..ve + 2) == Some(b"\r\n");
                if as_written {
                    match &mut run {
                        Some(r) if r.end == start => r.end = ve + 2,
                        _ => {
                            if let Some(r) = run.replace(start..ve + 2) {
                                out.extend_from_slice(buf.get(r).unwrap_or(&[]));
                            }
                        }
                    }
                    continue;
                }
                if let Some(r) = run.take() {
                    out.extend_from_slice(buf.get(r).unwrap_or(&[]));
                }
                out.extend_from_slice(name);
                out.extend_from_slice(b": ");
                crate::http1::push_forwarded_value(out, name, f.value.get(buf));
                out.extend_from_slice(b"\r\n");
            }
            if let Some(r) = run {
                out.extend_from_slice(buf.get(r).unwrap_or(&[]));
            }
            if framing_seen && !framing_done {
                // No field forwarded came after the framing field.
                framing_pos = Some(out.len());
            }
        }
        // Where the compression's fields go, and what HAProxy's head held
        // instead when `option logasap` logged it (before its compression
        // filter edits the head): the server's ETag, and its
        // Content-Length for the `Transfer-Encoding: chunked` written below.
        let comp_fields = out.len();
        let mut held_instead = 0;
        if coding.is_some() {
            let etag = match &rules_etag {
                Some(e) => e.as_deref(),
                None => r.header(buf, "etag"),
            };
            compress::write_h1_fields(out, verdict, etag);
            held_instead += etag.map_or(0, |v| 4 + v.len());
            if let BodyFraming::ContentLength(n) = r.framing {
                held_instead += 14 + n.checked_ilog10().map_or(1, |d| d as usize + 1);
            }
        }
        let comp_fields = comp_fields..out.len();
        let framing_start = out.len();
        let left = if tunnel {
            if r.status == 101 {
                let upg = r.header(buf, "upgrade").map(|v| v.to_vec());
                out.extend_from_slice(b"Connection: upgrade\r\n");
                if let Some(u) = upg {
                    out.extend_from_slice(b"Upgrade: ");
                    out.extend_from_slice(&u);
                    out.extend_from_slice(b"\r\n");
                }
            }
            Left::Done
        } else {
            match r.framing {
                BodyFraming::None => {
                    if up.method == Method::Head || r.status == 304 {
                        // The length declared, as one number (a list of
                        // one length, `16, 16`, too: HAProxy writes `16`).
                        if let Some(n) = r.declared_length {
                            out.extend_from_slice(b"Content-Length: ");
                            crate::http1::push_decimal(out, n);
                            out.extend_from_slice(b"\r\n");
                        }
                    }
                    Left::Done
                }
                BodyFraming::ContentLength(n) => {
                    if coding.is_some() {
                        out.extend_from_slice(b"Transfer-Encoding: chunked\r\n");
                    } else {
                        out.extend_from_slice(b"Content-Length: ");
                        crate::http1::push_decimal(out, n);
                        out.extend_from_slice(b"\r\n");
                    }
                    if n == 0 {
                        Left::Done
                    } else {
                        Left::Len(n)
                    }
                }
                BodyFraming::Chunked => {
                    if up.client_version == Version::Http10 {
                        // HTTP/1.0 cannot read chunked: send the data and
                        // mark the end by closing.
                        up.dechunk = true;
                        ka = false;
                    } else {
                        if let (Some(n), None, true) = (h2_length, coding, c.lane_of.is_some()) {
                            // Read by the HTTP/2 client side only (its
                            // lane): the length, then the chunks.
                            out.extend_from_slice(b"Content-Length: ");
                            crate::http1::push_decimal(out, n);
                            out.extend_from_slice(b"\r\n");
                        }
                        out.extend_from_slice(b"Transfer-Encoding: chunked\r\n");
                    }
                    if up.dechunk || up.skip_body || coding.is_some() {
                        Left::Chunked(Box::new(ChunkedDecoder::answer()))
                    } else {
                        // Passed on chunked (and stored as it goes, if
                        // at all): with canonical chunk sizes, no
                        // extensions and CRLF line ends, as HAProxy
                        // re-frames it (a size written
                        // `0000000000000005`, `100000005` or
                        // `ffffffffffffffff`, or a lone LF, never reaches
                        // a client that might read it otherwise).
                        Left::Recode(Box::new(ChunkedRecoder::answer()))
                    }
                }
                BodyFraming::UntilClose => {
                    ka = false;
                    Left::UntilClose
                }
            }
        };
        if let (Some(at), None, false) = (framing_pos, coding, tunnel) {
            // The framing field written last goes back in its place.
            if let Some(moved) = out.get_mut(at..) {
                moved.rotate_right(moved.len() - (framing_start - at));
            }
        }
        if !r.keep_alive {
            up.keep_server = false;
        }
        if tunnel {
            // Nothing after a tunnel on either connection.
        } else if !ka {
            out.extend_from_slice(b"Connection: close\r\n");
        } else if up.client_version == Version::Http10 || r.version == Version::Http10 {
            // Kept alive: said so to an HTTP/1.0 client, or in an
            // HTTP/1.0 answer.
            out.extend_from_slice(b"Connection: keep-alive\r\n");
        }
        out.extend_from_slice(b"\r\n");
        if let Some(m) = &c.fe.h1_case {
            // `option h1-case-adjust-bogus-client`.
            m.adjust_head(out.get_mut(self.resp_start..).unwrap_or(&mut []));
        }
        if c.fe.logasap {
            // `option logasap`: the line goes now, the head forwarded,
            // with the size HAProxy logs then: the answer it holds.
            let after = sd.ibuf.get(istart + n..sd.iend).unwrap_or(&[]);
            let body = match up.skip_body {
                true => 0,
                false => {
                    crate::stream::answer_body_in(after, up.resp.framing, &mut Vec::new()).have
                }
            };
            let head = c.wbuf.get(self.resp_start..).unwrap_or(&[]);
            let size = match coding {
                None => held_head_size(head, tunnel),
                Some(_) => {
                    // The head without what the compression wrote: its
                    // fields, and the chunked framing it chose.
                    let at = comp_fields.start - self.resp_start;
                    let mut h = head[..at].to_vec();
                    h.extend_from_slice(&head[at + comp_fields.len()..]);
                    let chunked = match up.resp.framing {
                        BodyFraming::ContentLength(_) => 24,
                        _ => 0,
                    };
                    (held_head_size(&h, tunnel) + held_instead as u64).saturating_sub(chunked)
                }
            };
            // `sd` holds the server side: its local address from there
            // (a second borrow of it panics).
            let local = sd.local;
            log_line(c, ctx, &up, size + body, true, local);
            up.logged = true;
        }
        sd.istart += n;
        drop(sd);
        up.head.clear(); // no replay once an answer arrived
        up.client_keep_alive = ka;
        self.keep_alive = ka;
        if tunnel {
            up.state = UpState::Tunnel;
            up.resp_left = Some(Left::Done);
            let t = up.timeouts.tunnel;
            up.deadline = ticks::add(ctx.now(), t);
            self.up = Some(up);
            return;
        }
        if let Some(k) = coding.filter(|_| !up.skip_body) {
            let level = up.comp_choice.as_ref().map_or(1, |p| p.0.level);
            match compress::BodyCompressor::new(k, level) {
                Ok(b) => up.comp = Some(Box::new(b)),
                Err(_) => up.keep_server = false,
            }
        }
        up.resp_left = Some(left);
        self.up = Some(up);
        if matches!(
            self.up.as_ref().and_then(|u| u.resp_left.as_ref()),
            Some(Left::Done)
        ) {
            self.finish_exchange(c, ctx);
        }
    }

    /// The answer is complete: keep or close the server connection, give
    /// the slot back (or hand it over), log, and go on with the client.
    pub(super) fn finish_exchange(&mut self, c: &mut H1, ctx: &mut Ctx) {
        let Some(mut up) = self.up.take() else {
            return;
        };
        // A request body still on its way is abandoned with the server
        // connection; the client connection cannot be reused either.
        if let Some(p) = up.store.take() {
            p.finish();
        }
        let req_done = up.req_left.done();
        if !req_done {
            up.keep_server = false;
            c.closing = true;
        }
        if !up.client_keep_alive {
            c.closing = true;
        }
        let keep = up.keep_server && {
            let sd = self.side.borrow();
            sd.out_pending() == 0
                && sd.istart == sd.iend
                && !sd.eof
                && !sd.sock.as_ref().is_some_and(|s| s.has_pending_output())
        };
        let s = up.server.take();
        let sock = match (keep, s.as_ref()) {
            (true, Some(_)) => self.side.borrow_mut().take_sock(),
            _ => None,
        };
        match (sock, s.as_ref()) {
            (Some(st), Some(srv)) if up.farm.reuse == HttpReuse::Never || !shareable(srv) => {
                // Private: stays attached to this client (still registered
                // with the server side's tasklet), unless it already
                // keeps `max-session-srv-conns` idle ones (HAProxy's
                // session_check_idle_conn closes this one then).
                if self.attached.len() >= c.fe.max_session_srv_conns as usize {
                    let _ = ctx.deregister_fd(st.raw_fd());
                } else {
                    if self.attached.is_empty() {
                        self.side.borrow_mut().idle_event = false;
                    }
                    self.attached.push(Attached {
                        _used: srv.used_conn(),
                        srv: Arc::clone(srv),
                        st,
                        key: self.pp_sent.clone(),
                    });
                }
            }
            (Some(st), Some(srv)) => {
                // Idle now, as in HAProxy: parked in the pool, in this
                // client's place, still registered with the server side's
                // tasklet; closed when the pool is full (`pool-max-conn`).
                if let Some(ticket) = srv.idle_ticket(ctx.thread_id(), up.reused, ctx.now()) {
                    // (Kept while other idle connections of this client
                    // may have had the event.)
                    if self.attached.is_empty() {
                        self.side.borrow_mut().idle_event = false;
                    }
                    // The side's tasklet's mark: a close or stray bytes
                    // that reach it later tell whoever takes the
                    // connection to `peek` it.
                    let reg = self.side_task.map(|t| (t, ctx.io_mark(t)));
                    c.w.shared.idle.park(
                        ctx.thread_id(),
                        &mut self.parked,
                        srv,
                        st,
                        ticket,
                        reg,
                        ctx.now(),
                        self.pp_sent.clone(),
                    );
                    // (A client parking again in its own place keeps its
                    // handle: no weak count to change per request.)
                    if let Some(p) = self.parked.as_ref() {
                        let mut sd = self.side.borrow_mut();
                        if !sd.parked.as_ref().is_some_and(|w| p.watched_by(w)) {
                            sd.parked = Some(p.watch());
                        }
                    }
                } else {
                    // Closed as `st` drops: no `EPOLL_CTL_DEL`.
                    ctx.forget_fd(st.raw_fd());
                }
            }
            _ => self.drop_server_sock(ctx, &up),
        }
        let ibuf = {
            let mut sd = self.side.borrow_mut();
            sd.bytes_in = 0;
            std::mem::take(&mut sd.ibuf)
        };
        if !ibuf.is_empty() {
            c.w.put_buf(ibuf);
        }
        if let Some(srv) = &s {
            // What `option contstats` did not count yet (all of it
            // without).
            let (d_in, d_out) = uncounted(c, &up, up.bytes_out);
            srv.counters.bytes_out.fetch_add(d_out, Ordering::Relaxed);
            // The request as HAProxy counts it (what the client sent).
            srv.counters.bytes_in.fetch_add(d_in, Ordering::Relaxed);
            up.farm.release(srv);
        }
        up.server = s;
        self.log_proxy(c, ctx, &up, up.bytes_out);
        self.up_spare = Some(spent(up));
        self.finish_proxy_input(c);
        c.idle_since = ctx.now();
    }

    pub(super) fn log_proxy(&mut self, c: &mut H1, ctx: &mut Ctx, up: &Upstream, bytes: u64) {
        let (d_in, d_out) = uncounted(c, up, bytes);
        crate::proxy::count_request(&c.fe, Some(&up.be), up.status, d_in, d_out);
        if let Some(z) = &up.comp {
            crate::proxy::count_compressed(&c.fe, Some(&up.be), z.totals());
        }
        let err = (400..500).contains(&up.status);
        let fail = crate::table::http_failure(up.status, up.term);
        c.stk.end(ctx.now(), err, fail, d_in, d_out);
        note_stream_stats(up, ctx.now());
        if !up.logged {
            let local = self.side.borrow().local;
            log_line(c, ctx, up, bytes, false, local);
        }
    }
}

/// The server's count of the heads it sent (HAProxy's server `hrsp_*`
/// and `req_tot`, counted as its analyser reads a head, interim ones
/// too, after a `retry-on` status dropped it or not): not for a
/// backend's dispatch target.
pub(super) fn count_head(up: &Upstream) {
    if let Some(s) = up.server.as_ref().filter(|s| !s.backend_target) {
        use std::sync::atomic::Ordering::Relaxed;
        s.counters.hrsp[crate::proxy::status_class(up.resp.status)].fetch_add(1, Relaxed);
        s.counters.heads.fetch_add(1, Relaxed);
    }
}

/// The exchange's bytes (the request's, and `bytes` of answer) that
/// `option contstats` did not add to the counters yet: all of them
/// without it.
fn uncounted(c: &H1, up: &Upstream, bytes: u64) -> (u64, u64) {
    (
        c.bytes_in.saturating_sub(up.counted.0),
        bytes.saturating_sub(up.counted.1),
    )
}

/// What forwarding a response head does with a field, by its name (one
/// classification per field; the rules' path uses [`forwardable`]).
#[derive(Clone, Copy, PartialEq, Eq)]
enum Kind {
    /// Not forwarded whatever its value (`TE`, `Upgrade`,
    /// `HTTP2-Settings`: see [`forwardable`]).
    Dropped,
    /// Not forwarded; the framing ebb writes takes its place.
    TransferEncoding,
    /// Forwarded with the options ebb does not answer itself, if any.
    Connection,
    /// Its place is the framing's; ebb writes the length itself.
    ContentLength,
    /// Dropped from a compressed answer (a weak one is written).
    Etag,
    Other,
}

impl Kind {
    fn of(name: &[u8]) -> Kind {
        match name.len() {
            2 if eq_nocase(name, b"te") => Kind::Dropped,
            4 if eq_nocase(name, b"etag") => Kind::Etag,
            7 if eq_nocase(name, b"upgrade") => Kind::Dropped,
            10 if eq_nocase(name, b"connection") => Kind::Connection,
            14 if eq_nocase(name, b"content-length") => Kind::ContentLength,
            14 if eq_nocase(name, b"http2-settings") => Kind::Dropped,
            17 if eq_nocase(name, b"transfer-encoding") => Kind::TransferEncoding,
            _ => Kind::Other,
        }
    }
}

/// The size HAProxy logs for an answer's head under `option logasap`:
/// the head as it holds it then (HTX), after the response rules: 20 for
/// the status line's record, its three parts, each field's name and
/// value, and 1 for the end of the head. `head`: the head as written to
/// the client, whose `Connection: close|keep-alive` ebb adds itself
/// (HAProxy drops the server's `close`/`keep-alive`, keeps its other
/// options; a tunnel's `upgrade` it keeps).
fn held_head_size(head: &[u8], tunnel: bool) -> u64 {
    // Each line with its CR (the last LF's piece is empty); a status
    // line's parts are its length but two spaces and the CR, a field's
    // its length but ": " and the CR.
    let Some(end) = head.windows(4).position(|w| w == b"\r\n\r\n") else {
        return 0;
    };
    let mut lines = head[..end + 2].split(|&b| b == b'\n');
    let start = lines.next().unwrap_or_default();
    let mut size = 20 + start.len().saturating_sub(3) + 1;
    for l in lines {
        // ebb's own `Connection: close|keep-alive` (a forwarded Connection
        // field names neither).
        let own = l.len() > 11 && l[..11].eq_ignore_ascii_case(b"connection:") && {
            let v = l[11..].trim_ascii();
            v.eq_ignore_ascii_case(b"close") || v.eq_ignore_ascii_case(b"keep-alive")
        };
        if !own || tunnel {
            size += l.len().saturating_sub(3);
        }
    }
    size as u64
}

/// The exchange's access-log line: at its end, or when the response head
/// was forwarded with `option logasap` (`asap`: the size and the times
/// are then those so far, written with a `+`).
pub(super) fn log_line(
    c: &H1,
    ctx: &Ctx,
    up: &Upstream,
    bytes: u64,
    asap: bool,
    local: Option<crate::sample::BackLocal>,
) {
    if !c.logs_exchange() {
        return;
    }
    if let Some(v) = c.vars.cell() {
        if let Ok(mut v) = v.try_borrow_mut() {
            v.info.srv_local = local;
        }
    }
    let now = ctx.now();
    let d = |a: Tick, b: Tick| b.wrapping_sub(a) as i32 as i64;
    let tq = match up.be.stopped {
        true => -1,
        false => d(up.t0, up.t_start),
    };
    let tw = match up.t_served {
        Some(sv) => d(up.t_start, sv),
        None => -1,
    };
    let tc = match (up.t_served, up.t_conn) {
        (Some(sv), Some(c)) => d(sv, c),
        _ => -1,
    };
    if let Some(Ok(mut v)) = c.vars.cell().map(|v| v.try_borrow_mut()) {
        v.info.srv_connected = up.t_conn.is_some();
    }
    let tr = match (up.t_conn, up.t_resp) {
        (Some(c), Some(r)) => d(c, r),
        _ => -1,
    };
    let tt = d(up.t0, now);
    let (srv, left, redisp) = (up.server.as_deref(), up.retries_left, up.avoid.is_some());
    if let Some(v) = c.vars.cell() {
        crate::rewrite::note_for_log(v, &up.farm, srv, left, redisp);
    }
    let server =
        (up.server.as_ref().or(up.refused_by.as_ref())).map_or("<NOSRV>", |s| s.name.as_str());
    let mut entry = c.log_entry(LogFacts {
        backend: &up.be.name,
        server,
        times: [tq, tw, tc, tr, tt],
        status: up.status,
        bytes,
        term: up.term,
        request_line: &up.req_line,
    });
    entry.asap = asap;
    let retried = up.retries_left != up.farm.retries;
    let ab = crate::proxy::abnormal(up.term.as_bytes(), retried, redisp, Some(up.status));
    if let Some(level) = crate::rewrite::exchange_log_level(&c.fe, ab, c.vars.cell()) {
        c.w.log_access_sd(crate::log::format(&entry), c.fe.log_sd(&entry), level);
    }
}

/// Counts the exchange's times and aborts on its backend and server
/// (HAProxy's stream_update_time_stats and `cli_abrt`/`srv_abrt`): the
/// queue, connect, response and total times when a server answered; the
/// aborts HAProxy's HTTP analysers count: by the client while a body
/// passed (`CD`) or while waiting for the answer (`CH`, with `option
/// abortonclose`), by the server while a body passed (`SD`; a close
/// before the answer's head is a failed response, not an abort).
pub(super) fn note_stream_stats(up: &Upstream, now: Tick) {
    let d = |a: Tick, b: Tick| u64::from(b.wrapping_sub(a)).min(u64::from(u32::MAX >> 1));
    let times = match (up.t_served, up.t_conn, up.t_resp) {
        (Some(sv), Some(cn), Some(rs)) => {
            Some([d(up.t_start, sv), d(sv, cn), d(cn, rs), d(up.t0, now)])
        }
        _ => None,
    };
    let abort = match up.term {
        "CD" | "CH" => Some(true),
        "SD" => Some(false),
        _ => None,
    };
    let server = up.server.as_ref().filter(|s| !s.backend_target);
    for c in server
        .map(|s| &s.counters)
        .into_iter()
        .chain([&up.farm.counters])
    {
        c.times.note(times);
        match abort {
            Some(true) => c
                .cli_aborts
                .fetch_add(1, std::sync::atomic::Ordering::Relaxed),
            Some(false) => c
                .srv_aborts
                .fetch_add(1, std::sync::atomic::Ordering::Relaxed),
            None => 0,
        };
    }
}

/// `http-response wait-for-body` (HAProxy's http_wait_for_msg_body on the
/// response): whether the response head just parsed may go on to the
/// rules, because no such rule of the backend or the frontend holds on it,
/// or the body those that hold wait for is there (all of it, their
/// `at-least` bytes, a full buffer, or the server's close). Starts the
/// wait's clock at the first call (`Upstream::resp_wait`). The conditions
/// are evaluated on the response as received.
pub(super) fn response_body_ready(c: &H1, now: Tick, up: &mut Upstream, sd: &ServerSide) -> bool {
    let fe = &c.fe;
    let be = &up.be;
    let sets = [
        (&be.http_response[..], &be.matcher),
        (&fe.http_response[..], &fe.matcher),
    ];
    let waits = || {
        sets.iter().flat_map(|(rules, m)| {
            rules.iter().filter_map(move |r| match &r.action {
                crate::config::HttpResponseAction::WaitForBody(w) => Some((r, *m, *w)),
                _ => None,
            })
        })
    };
    if waits().next().is_none() {
        return true;
    }
    let n = up.resp.head_len;
    let buf = sd.ibuf.get(sd.istart..sd.iend).unwrap_or(&[]);
    let head = buf.get(..n).unwrap_or(&[]);
    let after = buf.get(n..).unwrap_or(&[]);
    let mut decoded = Vec::new();
    let mut b = crate::stream::answer_body_in(after, up.resp.framing, &mut decoded);
    b.closed = sd.eof;
    b.full = !sd.ibuf.is_empty() && sd.iend - sd.istart >= sd.ibuf.len();
    let tr = &c.tr;
    let dst = dst_of(tr, c.dst.as_deref().copied());
    let cx = crate::sample::Ctx {
        res: Some(crate::sample::Res::H1 {
            buf: head,
            head: &up.resp,
        }),
        be: Some(&be.name),
        srv: up.server.as_ref().map(|s| s.name.as_str()),
        ..crate::stream::sample_ctx(tr, c.sess.peer, &fe.name, &dst, c.vars.cell(), &c.stk)
    };
    let pending = waits().find(|(r, m, w)| !b.enough(w.at_least) && m.holds(r.cond.as_ref(), &cx));
    let Some((_, _, w)) = pending else {
        return true;
    };
    let until = *up
        .resp_wait
        .get_or_insert_with(|| ticks::add(now, w.time_ms));
    up.deadline = ticks::first(up.deadline, until);
    false
}
