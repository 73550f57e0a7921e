//! Evaluating a compiled fetch on a connection or an exchange: one value
//! (`eval`, written in the scratch buffer when it is a string), or for an
//! ACL every value of a multi-valued fetch in turn (`each`), as HAProxy's
//! fetches report more values while there are.

use std::cell::Cell;
use std::io::Write;

use super::msg::{
    cookies, each_param, found_path, header_ip, next_param, nth_value, split_q, url_query, values,
};
use super::{Fetch, Occ};
use crate::http1::Version;
use crate::sample::{Ctx, Res, Scratch, Val};

/// The user of userlist `list` the request's `Authorization` names, when
/// its credentials are valid.
fn auth_user(
    ctx: &Ctx<'_>,
    list: &str,
) -> Option<(std::sync::Arc<crate::sample::auth::Userlist>, usize)> {
    crate::sample::auth::check(list, &authorization(ctx)?)
}

/// The connection's source (`dst`: destination) address, as `fc_src` and
/// `fc_dst` read it: what `tcp-request connection` rules and a PROXY
/// header left, not what later rules set for the stream.
pub(super) fn fc_addr(ctx: &Ctx<'_>, dst: bool) -> Option<std::net::SocketAddr> {
    let fc = ctx
        .vars
        .and_then(|v| v.try_borrow().ok())
        .and_then(|v| v.fc_addrs);
    Some(match (fc, dst) {
        (Some((src, _)), false) => src,
        (Some((_, Some(d))), true) => d,
        // Not asked at accept: no rule moved `dst`.
        (Some((_, None)) | None, true) => (ctx.dst)()?,
        (None, false) => ctx.src,
    })
}

/// The first value of the request's `Authorization` field (HAProxy's
/// `http_find_header` without `full`).
pub(super) fn authorization(ctx: &Ctx<'_>) -> Option<Vec<u8>> {
    let mut first = None;
    values(ctx, false, "authorization", false, &mut |v| {
        first = Some(v.to_vec());
        true
    });
    first
}
impl Fetch {
    pub(in crate::sample) fn eval(&self, ctx: &Ctx<'_>, s: &mut Scratch) -> Option<Val> {
        let put = |s: &mut Scratch, b: &[u8]| {
            s.cur.clear();
            s.cur.extend_from_slice(b);
            Some(Val::Str)
        };
        match self {
            Fetch::Stk(f) => f.eval(ctx),
            Fetch::Extra(f) => f.eval(ctx, s),
            Fetch::Conn(f) => f.eval(ctx, s),
            Fetch::Src => Some(Val::Ip(ctx.src_addr().ip())),
            Fetch::SrcPort => Some(Val::Int(ctx.src_addr().port() as i64)),
            Fetch::Dst => Some(Val::Ip(ctx.dst_addr()?.ip())),
            Fetch::DstPort => Some(Val::Int(ctx.dst_addr()?.port() as i64)),
            Fetch::FeName => put(s, ctx.fe.as_bytes()),
            // Before a backend is chosen, HAProxy's stream has the
            // frontend as its backend: `be_name` in an ACL of a
            // frontend's http-request rules is the frontend's name
            // (HAProxy warns that it "will never match"; it does).
            Fetch::BeName => match ctx.be {
                Some(b) => put(s, b.as_bytes()),
                None if ctx.req.is_some() => put(s, ctx.fe.as_bytes()),
                None => None,
            },
            Fetch::SrvName => put(s, ctx.srv?.as_bytes()),
            Fetch::SrvId => {
                ctx.srv?;
                let st = ctx.vars?.try_borrow().ok()?;
                Some(Val::Int(i64::from(st.info.srv_id?)))
            }
            Fetch::CacheHit => {
                let st = ctx.vars?.try_borrow().ok()?;
                Some(Val::Bool(st.info.cache_hit.is_some()))
            }
            Fetch::ResComp(algo) => {
                let st = ctx.vars?.try_borrow().ok()?;
                match (st.info.res_comp, algo) {
                    (c, false) => Some(Val::Bool(c.is_some())),
                    (Some(name), true) => {
                        drop(st);
                        put(s, name.as_bytes())
                    }
                    (None, true) => None,
                }
            }
            Fetch::CacheName => {
                let name = {
                    let st = ctx.vars?.try_borrow().ok()?;
                    st.info.cache_hit.clone()?
                };
                put(s, name.as_bytes())
            }
            Fetch::Method => {
                let r = ctx.req?;
                put(s, r.head.method_span.get(r.buf))?;
                Some(Val::Meth)
            }
            Fetch::Path => {
                let r = ctx.req?;
                let p = found_path(r.head.target.get(r.buf))?;
                put(s, split_q(p).0)
            }
            Fetch::PathQ => {
                let r = ctx.req?;
                put(s, found_path(r.head.target.get(r.buf))?)
            }
            Fetch::UrlParam { name, delim, val } => {
                let q = url_query(ctx, *delim)?;
                let (a, b) = next_param(q, 0, name.as_deref(), *delim)?;
                if *val {
                    return Some(Val::Int(crate::sample::strl2ic(&q[a..b])));
                }
                put(s, &q[a..b])
            }
            Fetch::ReqBody => {
                put(s, ctx.req?.body)?;
                Some(Val::Bin)
            }
            Fetch::ReqBodyLen => Some(Val::Int(ctx.req?.body.len() as i64)),
            Fetch::HttpAuth(l) => {
                // HAProxy: no sample without well-formed Basic credentials.
                let c = crate::sample::auth::credentials(&authorization(ctx)?)?;
                if !matches!(c, crate::sample::auth::Creds::Basic { .. }) {
                    return None;
                }
                Some(Val::Bool(auth_user(ctx, l).is_some()))
            }
            Fetch::HttpAuthBearer(hdr) => {
                let mut first = None;
                let name = hdr.as_deref().unwrap_or("authorization");
                if !values(ctx, false, name, false, &mut |v| {
                    first = Some(v.to_vec());
                    true
                }) {
                    return None;
                }
                let tok = crate::sample::auth::bearer(first.as_deref(), hdr.is_some())?;
                put(s, tok)
            }
            Fetch::HttpAuthType | Fetch::HttpAuthUser => {
                let mut first = None;
                if !values(ctx, false, "authorization", false, &mut |v| {
                    first = Some(v.to_vec());
                    true
                }) {
                    return None;
                }
                let m = crate::sample::auth::method(first.as_deref()?)?;
                match (self, m) {
                    (Fetch::HttpAuthType, crate::sample::auth::Method::Basic(_)) => {
                        put(s, b"Basic")
                    }
                    (Fetch::HttpAuthType, _) => put(s, b"Bearer"),
                    (_, crate::sample::auth::Method::Basic(user)) => put(s, &user),
                    _ => None,
                }
            }
            Fetch::FcgiDocroot => put(s, &crate::sample::fcgi_app(ctx)?.0),
            Fetch::FcgiIndex => put(s, &crate::sample::fcgi_app(ctx)?.1?),
            Fetch::HttpAuthGroup(l) => {
                let (list, i) = auth_user(ctx, l)?;
                put(s, list.users[i].name.as_bytes())
            }
            Fetch::ResBody => {
                put(s, ctx.res_body?.0)?;
                Some(Val::Bin)
            }
            Fetch::ResBodyLen => Some(Val::Int(ctx.res_body?.0.len() as i64)),
            Fetch::ResBodySize => Some(Val::Int(ctx.res_body?.1 as i64)),
            Fetch::ReqBodySize => {
                let r = ctx.req?;
                Some(Val::Int(match r.head.framing {
                    crate::http1::BodyFraming::ContentLength(n) => n as i64,
                    _ => r.body.len() as i64,
                }))
            }
            Fetch::ReqBodyParam(name) => {
                // Declared binary (an ACL needs `-m`), a string when read
                // (HAProxy's smp_fetch_param): a NUL does not end it.
                let body = ctx.req?.body;
                let (a, b) = next_param(body, 0, name.as_deref(), b'&')?;
                put(s, &body[a..b])
            }
            Fetch::FirstReq => {
                let n = ctx.vars?.try_borrow().ok()?.requests;
                Some(Val::Bool(n == 1))
            }
            Fetch::ProtoHttp => {
                if ctx.req.is_some() {
                    return Some(Val::Bool(true));
                }
                // A tcp session whose bytes are not a whole HTTP/1 head
                // (the session waited while one could still come).
                const PRI: &[u8] = b"PRI * HTTP/2.0\r\n\r\n";
                let p = ctx.payload.filter(|p| !p.response)?;
                if p.bytes.len() < PRI.len() && PRI.starts_with(p.bytes) {
                    p.unsure();
                    if p.partial {
                        return None;
                    }
                }
                Some(Val::Bool(p.bytes.starts_with(PRI)))
            }
            Fetch::Query => {
                let r = ctx.req?;
                let q = split_q(r.head.path.get(r.buf)).1?;
                put(s, q)
            }
            Fetch::Url => {
                let r = ctx.req?;
                put(s, r.head.target.get(r.buf))
            }
            // HAProxy's smp_fetch_base: the host, then the path without
            // its query when it starts with `/`; without a host, `path`.
            // HAProxy's `base`: the Host field's first value as sent (not
            // an absolute target's authority), then the path.
            Fetch::Base => {
                let r = ctx.req?;
                let p = found_path(r.head.target.get(r.buf)).map(|p| split_q(p).0);
                s.cur.clear();
                values(ctx, false, "host", false, &mut |v| {
                    s.cur.extend_from_slice(v);
                    true
                });
                if s.cur.is_empty() {
                    return put(s, p?);
                }
                s.cur
                    .extend_from_slice(p.filter(|p| p.starts_with(b"/")).unwrap_or(b""));
                Some(Val::Str)
            }
            Fetch::ReqVer => {
                let r = ctx.req?;
                // An HTTP/2 stream reaches the rules as HTTP/1.1 (its lane);
                // HAProxy says 2.0 for it.
                let h2 = ctx.vars.is_some_and(|v| v.borrow().h2);
                if !h2 {
                    // The digits as received (`HTTP/1.2` is 1.2, read as
                    // 1.1), as HAProxy keeps the line's version.
                    let st = ctx.vars.and_then(|v| v.try_borrow().ok());
                    let ver = st.as_ref().and_then(|st| received_version(&st.req_line));
                    if let Some(v) = ver.and_then(|v| v.strip_prefix(b"HTTP/")) {
                        return put(s, v);
                    }
                }
                put(
                    s,
                    match r.head.version {
                        _ if h2 => b"2.0",
                        Version::Http10 => b"1.0",
                        Version::Http11 => b"1.1",
                    },
                )
            }
            Fetch::Hdr {
                name,
                occ,
                full,
                res,
            } => {
                let n = match occ {
                    Occ::Default => -1,
                    Occ::Nth(n) => *n,
                };
                nth_value(ctx, *res, name, *full, n, s).then_some(Val::Str)
            }
            Fetch::HdrIp { name, occ, res } | Fetch::HdrVal { name, occ, res } => {
                let n = match occ {
                    Occ::Default => -1,
                    Occ::Nth(n) => *n,
                };
                if !nth_value(ctx, *res, name, false, n, s) {
                    return None;
                }
                typed_value(self, &s.cur)
            }
            Fetch::HdrCnt { name, full, res } => {
                let mut c = 0;
                if !values(ctx, *res, name, *full, &mut |_| {
                    c += 1;
                    false
                }) {
                    return None;
                }
                Some(Val::Int(c))
            }
            Fetch::Cook(name, res) | Fetch::CookVal(name, res) => {
                // The last occurrence, as HAProxy's req.cook in a sample
                // (without a name: the first cookie).
                let mut found = false;
                s.cur.clear();
                cookies(ctx, *res, name.as_deref(), &mut |v| {
                    s.cur.clear();
                    s.cur.extend_from_slice(v);
                    found = true;
                    name.is_none()
                });
                if !found {
                    return None;
                }
                match self {
                    Fetch::CookVal(..) => Some(Val::Int(crate::sample::strl2ic(&s.cur))),
                    _ => Some(Val::Str),
                }
            }
            Fetch::CookCnt(name, res) => {
                let mut n = 0;
                if !cookies(ctx, *res, name.as_deref(), &mut |_| {
                    n += 1;
                    false
                }) {
                    return None;
                }
                Some(Val::Int(n))
            }
            Fetch::SslFc => Some(Val::Bool(ctx.tls)),
            Fetch::SslC(f) => f.eval(ctx, s),
            Fetch::SslFcSni => {
                if !ctx.tls {
                    return None;
                }
                put(s, ctx.sni?.as_bytes())
            }
            Fetch::ResVer => {
                let v: &[u8] = match ctx.res? {
                    _ if ctx
                        .vars
                        .is_some_and(|v| v.try_borrow().is_ok_and(|v| v.info.srv_h2)) =>
                    {
                        b"2.0"
                    }
                    Res::H1 { head, .. } if head.version == Version::Http10 => b"1.0",
                    // An answer ebb makes is HTTP/1.1, as HAProxy's.
                    _ => b"1.1",
                };
                put(s, v)
            }
            Fetch::Status => Some(Val::Int(match ctx.res? {
                Res::H1 { head, .. } => head.status as i64,
                Res::List { status, .. } => status as i64,
            })),
            Fetch::Str(v) => put(s, v),
            Fetch::Bin(v) => {
                put(s, v);
                Some(Val::Bin)
            }
            Fetch::Int(i) => Some(Val::Int(*i)),
            Fetch::Addr(a) => Some(Val::Ip(*a)),
            Fetch::Bool(b) => Some(Val::Bool(*b)),
            Fetch::Env(v) => put(s, v.as_ref()?.as_bytes()),
            Fetch::Date(off) => {
                let now = std::time::SystemTime::now()
                    .duration_since(std::time::UNIX_EPOCH)
                    .map(|d| d.as_secs() as i64)
                    .unwrap_or(0);
                Some(Val::Int(now.saturating_add(*off)))
            }
            Fetch::Rand(range) => {
                let r = next_rand();
                let v = match range {
                    // HAProxy: (rand32 * range) >> 32.
                    Some(n) => ((r & 0xffff_ffff) * n) >> 32,
                    None => r & 0xffff_ffff,
                };
                Some(Val::Int(v as i64))
            }
            Fetch::Var(r, default) => {
                let v = ctx.vars.and_then(|v| v.try_borrow_mut().ok()?.get(r, s));
                // HAProxy 2.6: an unset variable gives the default, as a
                // string, when one is given.
                match (v, default) {
                    (None, Some(d)) => put(s, d.as_bytes()),
                    (v, _) => v,
                }
            }
            Fetch::Capture { res, idx } => {
                let st = ctx.vars?.try_borrow().ok()?;
                let slots = if *res { &st.res_caps } else { &st.req_caps };
                let v = slots.get(*idx)?.as_deref()?;
                s.cur.clear();
                s.cur.extend_from_slice(v);
                Some(Val::Str)
            }
            Fetch::Count {
                what: crate::sample::Count::DstConn(_),
                ..
            } => {
                let li = ctx.vars?.try_borrow().ok()?.so_idx;
                let n = crate::sample::count(crate::sample::Count::DstConn(li), ctx.fe, None)?;
                Some(Val::Int(n))
            }
            Fetch::FeDefbe => put(s, crate::sample::default_backend(ctx.fe)?.as_bytes()),
            Fetch::Count {
                what,
                proxy,
                server,
            } => {
                let p = match (what, proxy) {
                    (_, Some(p)) => p.as_str(),
                    (w, None) if w.of_frontend() => ctx.fe,
                    // Before a backend is chosen HAProxy's stream has the
                    // frontend as its backend (see `be_name`).
                    (crate::sample::Count::BeId, None) if ctx.be.is_none() && ctx.req.is_some() => {
                        return Some(Val::Int(crate::sample::count(
                            crate::sample::Count::FeId,
                            ctx.fe,
                            None,
                        )?))
                    }
                    (_, None) => ctx.be?,
                };
                let n = crate::sample::count(*what, p, server.as_deref())?;
                Some(match what {
                    crate::sample::Count::SrvIsUp => Val::Bool(n != 0),
                    _ => Val::Int(n),
                })
            }
            Fetch::CaptureReq(what) => {
                let st = ctx.vars?.try_borrow().ok()?;
                let line = &st.req_line[..];
                let mut parts = line.splitn(3, |&b| b == b' ');
                let (method, target, ver) = (parts.next()?, parts.next()?, parts.next());
                let v: &[u8] = match what {
                    b'm' => method,
                    // From the first slash (no scheme nor authority); none
                    // for `*` or a target without a path (HAProxy's
                    // `http_parse_path`; tests/diff seed 6).
                    b'u' => {
                        let from = if target.starts_with(b"/") {
                            0
                        } else {
                            let after = target.windows(3).position(|w| w == b"://")? + 3;
                            after + target[after..].iter().position(|&b| b == b'/')?
                        };
                        &target[from..]
                    }
                    // HAProxy's flag for 1.1 and up (`HTTP/1.2`, `2.0`).
                    _ => match ver? {
                        [b'H', b'T', b'T', b'P', b'/', a, b'.', b]
                            if *a > b'1' || *a == b'1' && *b >= b'1' =>
                        {
                            b"HTTP/1.1"
                        }
                        _ => b"HTTP/1.0",
                    },
                };
                s.cur.clear();
                s.cur.extend_from_slice(v);
                Some(Val::Str)
            }
            Fetch::CurTimeout { tunnel } => {
                let own = ctx.vars.and_then(|v| {
                    let i = &v.try_borrow().ok()?.info;
                    if *tunnel {
                        i.timeout_tunnel
                    } else {
                        i.timeout_server
                    }
                });
                if let Some(t) = own {
                    return Some(Val::Int(i64::from(t)));
                }
                let what = if *tunnel {
                    crate::sample::Count::BeTunnelTimeout
                } else {
                    crate::sample::Count::BeServerTimeout
                };
                Some(Val::Int(crate::sample::count(what, ctx.be?, None)?))
            }
            Fetch::SoName => {
                let name = ctx.vars?.try_borrow().ok()?.so_name.clone()?;
                put(s, name.as_bytes())
            }
            Fetch::SoId => {
                let st = ctx.vars?.try_borrow().ok()?;
                if st.check.is_some() {
                    return None;
                }
                Some(Val::Int(i64::from(st.so_idx) + 1))
            }
            Fetch::PpTlv(kind) => {
                let st = ctx.vars?.try_borrow().ok()?;
                let t = st
                    .pp_tlvs
                    .as_ref()?
                    .iter()
                    .rev()
                    .find(|t| t.kind == *kind)?;
                put(s, &t.value)
            }
            Fetch::RcvdProxy => {
                let st = ctx.vars?.try_borrow().ok()?;
                Some(Val::Bool(st.pp_tlvs.is_some()))
            }
            Fetch::Stopping => Some(Val::Bool(crate::sys::stopping())),
            // HAProxy's need a stream: none in a connection's context.
            Fetch::Prio { offset } => {
                let st = ctx.vars?.try_borrow().ok()?;
                Some(Val::Int(if *offset {
                    i64::from(st.info.prio_offset)
                } else {
                    i64::from(st.info.prio_class)
                }))
            }
            Fetch::LastRule { line } => {
                let st = ctx.vars?.try_borrow().ok()?;
                let loc = st.info.last_rule.as_ref()?;
                if *line {
                    return Some(Val::Int(i64::from(loc.line)));
                }
                s.cur.clear();
                s.cur.extend_from_slice(loc.file.as_bytes());
                Some(Val::Str)
            }
            // Only an HTTP exchange begins requests (tcp sessions count
            // none).
            Fetch::IsHtx => {
                let st = ctx.vars?.try_borrow().ok()?;
                Some(Val::Bool(st.requests > 0))
            }
            Fetch::WaitEnd => match ctx.payload {
                Some(p) if p.partial => {
                    p.unsure();
                    None
                }
                _ => Some(Val::Bool(true)),
            },
            Fetch::BcSrc { port } => {
                let a = ctx.vars?.try_borrow().ok()?.info.srv_local?.addr()?;
                Some(if *port {
                    Val::Int(i64::from(a.port()))
                } else {
                    Val::Ip(a.ip())
                })
            }
            Fetch::FcAddr { dst, port } => {
                let a = fc_addr(ctx, *dst)?;
                Some(if *port {
                    Val::Int(i64::from(a.port()))
                } else {
                    Val::Ip(a.ip())
                })
            }
            Fetch::UniqueId => {
                let v = crate::sample::unique_id(ctx)?;
                put(s, &v)
            }
            // An HTTP request (no raw bytes under inspection): HAProxy
            // gives the size of its HTX form, "not accurate but kept for
            // backward compatibility": the start line (20 bytes of
            // header, method, URI, version), each field's name and value
            // (Connection without `close`/`keep-alive`), one byte for the
            // end of the head, the body received.
            Fetch::ReqLen if ctx.payload.is_none() => {
                let r = ctx.req?;
                let h = r.head;
                let line = h.method_span.get(r.buf).len() + h.target.get(r.buf).len() + 8;
                let fields: usize = h
                    .headers
                    .iter()
                    .map(|f| {
                        let (n, v) = (f.name.get(r.buf), f.value.get(r.buf));
                        if !n.eq_ignore_ascii_case(b"connection") {
                            return n.len() + v.len();
                        }
                        // HAProxy's parser drops `close` and `keep-alive`
                        // from Connection, and the field when none is left.
                        let mut clean = Vec::new();
                        super::msg::clean_connection(v, &mut clean);
                        match clean.len() {
                            0 => 0,
                            k => n.len() + k,
                        }
                    })
                    .sum();
                Some(Val::Int((20 + line + fields + 1 + r.body.len()) as i64))
            }
            Fetch::ReqLen | Fetch::ResLen => {
                let p = ctx
                    .payload
                    .filter(|p| p.response == matches!(self, Fetch::ResLen))?;
                p.unsure();
                Some(Val::Int(p.bytes.len() as i64))
            }
            Fetch::RdpCookie { name, cnt } => {
                // HAProxy's `fetch_rdp_cookie_name`; an HTTP exchange has
                // no raw bytes: no cookie (a count of 0).
                let Some(p) = ctx.payload.filter(|p| !p.response) else {
                    return cnt.then_some(Val::Int(0));
                };
                match super::msg::rdp_cookie(p.bytes, name.as_deref()) {
                    Err(()) => {
                        p.unsure();
                        None
                    }
                    Ok(v) if *cnt => Some(Val::Int(i64::from(v.is_some()))),
                    Ok(v) => put(s, v?),
                }
            }
            Fetch::ReqSslSni => {
                let p = ctx.payload.filter(|p| !p.response)?;
                if p.hello_partial {
                    p.unsure();
                }
                put(s, p.sni?.as_bytes())
            }
            Fetch::ReqSslAlpn => {
                let p = ctx.payload.filter(|p| !p.response)?;
                match super::msg::hello_alpn(p.bytes) {
                    Ok(names) => put(s, names.first()?),
                    Err(short) => {
                        if short {
                            p.unsure();
                        }
                        None
                    }
                }
            }
            Fetch::ReqSslHelloType => {
                // A handshake record (22) of TLS or SSLv3 (major 3): the
                // type of its first message (HAProxy's check). Fewer bytes
                // that may still become one: not known yet.
                let p = ctx.payload.filter(|p| !p.response)?;
                let b = p.bytes;
                if b.len() < 6 && b.first().is_none_or(|&c| c == 0x16) {
                    p.unsure();
                }
                (b.len() >= 6 && b[0] == 0x16 && b[1] == 3).then(|| Val::Int(b[5] as i64))
            }
            Fetch::ReqPayload(off, len) | Fetch::ResPayload(off, len) => {
                // Not there yet: nothing, and it may come.
                let res = matches!(self, Fetch::ResPayload(..));
                let p = ctx.payload.filter(|p| p.response == res)?;
                let b = p.bytes;
                let end = if *len == 0 {
                    p.unsure();
                    b.len()
                } else {
                    off.checked_add(*len)?
                };
                if end > b.len() {
                    p.unsure();
                }
                let v = b.get(*off..end)?;
                s.cur.clear();
                s.cur.extend_from_slice(v);
                Some(Val::Bin)
            }
            Fetch::Uuid => {
                let a = next_rand();
                let b = next_rand();
                let mut bytes = [0u8; 16];
                bytes[..8].copy_from_slice(&a.to_be_bytes());
                bytes[8..].copy_from_slice(&b.to_be_bytes());
                bytes[6] = (bytes[6] & 0x0f) | 0x40;
                bytes[8] = (bytes[8] & 0x3f) | 0x80;
                s.cur.clear();
                for (i, x) in bytes.iter().enumerate() {
                    if matches!(i, 4 | 6 | 8 | 10) {
                        s.cur.push(b'-');
                    }
                    let _ = write!(s.cur, "{x:02x}");
                }
                Some(Val::Str)
            }
        }
    }

    /// For ACLs: every value of a multi-valued fetch (header fetches
    /// without an occurrence, cookies); `None` for single-valued fetches.
    pub(in crate::sample) fn each(
        &self,
        ctx: &Ctx<'_>,
        s: &mut Scratch,
        f: &mut dyn FnMut(Val, &mut Scratch) -> bool,
    ) -> Option<bool> {
        match self {
            // In an ACL: each protocol name in turn.
            Fetch::ReqSslAlpn => {
                let Some(p) = ctx.payload.filter(|p| !p.response) else {
                    return Some(false);
                };
                match super::msg::hello_alpn(p.bytes) {
                    Ok(names) => Some(names.iter().any(|n| {
                        s.cur.clear();
                        s.cur.extend_from_slice(n);
                        f(Val::Str, s)
                    })),
                    Err(short) => {
                        if short {
                            p.unsure();
                        }
                        Some(false)
                    }
                }
            }
            // In an ACL: each group of the authenticated user.
            Fetch::HttpAuthGroup(l) => {
                let Some((list, i)) = auth_user(ctx, l) else {
                    return Some(false);
                };
                Some(list.users[i].groups.iter().any(|g| {
                    s.cur.clear();
                    s.cur.extend_from_slice(g.as_bytes());
                    f(Val::Str, s)
                }))
            }
            Fetch::Hdr {
                name,
                occ: Occ::Default,
                full,
                res,
            } => {
                let mut hit = false;
                values(ctx, *res, name, *full, &mut |v| {
                    s.cur.clear();
                    s.cur.extend_from_slice(v);
                    hit = f(Val::Str, s);
                    hit
                });
                Some(hit)
            }
            Fetch::HdrIp {
                name,
                occ: Occ::Default,
                res,
            }
            | Fetch::HdrVal {
                name,
                occ: Occ::Default,
                res,
            } => {
                let mut hit = false;
                values(ctx, *res, name, false, &mut |v| {
                    if let Some(v) = typed_value(self, v) {
                        hit = f(v, s);
                    }
                    hit
                });
                Some(hit)
            }
            // In an ACL: each parameter of that name (each value after an
            // `=` without a name), as HAProxy's fetch reports more while
            // the query goes on.
            Fetch::UrlParam { name, delim, val } => {
                let Some(q) = url_query(ctx, *delim) else {
                    return Some(false);
                };
                if *val {
                    let f = &mut |_: Val, s: &mut Scratch| {
                        let i = crate::sample::strl2ic(&s.cur);
                        f(Val::Int(i), s)
                    };
                    return Some(each_param(q, name.as_deref(), *delim, s, f));
                }
                Some(each_param(q, name.as_deref(), *delim, s, f))
            }
            Fetch::ReqBodyParam(name) => {
                let Some(body) = ctx.req.map(|r| r.body) else {
                    return Some(false);
                };
                Some(each_param(body, name.as_deref(), b'&', s, f))
            }
            // In an ACL: each value, as HAProxy iterates on them (`_val`:
            // each as an integer).
            Fetch::Cook(name, res) | Fetch::CookVal(name, res) => {
                let int = matches!(self, Fetch::CookVal(..));
                let mut hit = false;
                cookies(ctx, *res, name.as_deref(), &mut |v| {
                    hit = if int {
                        f(Val::Int(crate::sample::strl2ic(v)), s)
                    } else {
                        s.cur.clear();
                        s.cur.extend_from_slice(v);
                        f(Val::Str, s)
                    };
                    hit
                });
                Some(hit)
            }
            _ => None,
        }
    }
}

/// A header value as `hdr_ip` (an address, none when it is not one) or
/// `hdr_val` (an integer) reads it.
fn typed_value(f: &Fetch, v: &[u8]) -> Option<Val> {
    match f {
        Fetch::HdrIp { .. } => header_ip(v).map(Val::Ip),
        _ => Some(Val::Int(crate::sample::strl2ic(v))),
    }
}

thread_local! {
    static RNG: Cell<u64> = const { Cell::new(0) };
}

/// A per-thread xorshift64* generator seeded from the clock and the
/// thread: `rand` and `uuid` need spread, not cryptographic strength
/// (HAProxy uses a non-cryptographic generator too).
fn next_rand() -> u64 {
    RNG.with(|c| {
        let mut x = c.get();
        if x == 0 {
            let t = std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map(|d| d.as_nanos() as u64)
                .unwrap_or(0x9e37_79b9_7f4a_7c15);
            let local = 0u8;
            x = t ^ (&local as *const u8 as u64).rotate_left(32) | 1;
        }
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        c.set(x);
        x.wrapping_mul(0x2545_f491_4f6c_dd1d)
    })
}

/// The version of a request line as received (`M T V`): its last word.
fn received_version(line: &[u8]) -> Option<&[u8]> {
    let mut parts = line.splitn(3, |&b| b == b' ');
    parts.next()?;
    parts.next()?;
    parts.next().filter(|v| !v.is_empty())
}
