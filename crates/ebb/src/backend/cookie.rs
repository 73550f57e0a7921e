//! Cookie persistence (configuration.txt 4.2 `cookie`, `server ... cookie`)
//! and `capture cookie`, with HAProxy 2.6's meaning.
//!
//! Two hooks, called by the stream:
//!
//! - [`request`], once the backend is known and before a server is
//!   chosen: reads the request's `Cookie` fields, names the server the
//!   persistence cookie designates (the stream prefers it when it may take
//!   traffic), removes the cookie from what the server sees (`insert
//!   indirect`) or strips its prefix (`prefix`), captures `capture cookie`;
//! - [`response`], on the server's response head as a field list: deletes,
//!   rewrites or prefixes the server's own `Set-Cookie`, inserts ebb's
//!   (`insert`), adds `Cache-control: private` (`nocache`), captures.
//!
//! What happened is kept in the exchange's [`TxnInfo`] for the log line's
//! `%tsc` cookie letters (HAProxy's: client side `N`one, `I`nvalid,
//! `D`own, `V`alid, `E`xpired, `O`ld; server side `N`one, `P`rovided,
//! `D`eleted, `I`nserted, `R`ewritten, `U`pdated).

use crate::config::cookie::{CaptureCookie, CookieCfg, CookieMode};
use crate::sample::vars::TxnInfo;

use super::ServerRt;

/// The separator of `prefix` mode (`SRV~value`) and of the dates of
/// `maxidle`/`maxlife` (`SRV|LAST|FIRST`), HAProxy's COOKIE_DELIM and
/// COOKIE_DELIM_DATE.
const DELIM: u8 = b'~';
const DELIM_DATE: u8 = b'|';

const B64: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

/// HAProxy's s30tob64: the low 30 bits as 5 base64 digits, high first.
fn s30tob64(v: u64, out: &mut Vec<u8>) {
    for i in (0..5).rev() {
        out.push(B64[((v >> (6 * i)) & 63) as usize]);
    }
}

/// HAProxy's b64tos30 (`None` on a bad digit).
fn b64tos30(s: &[u8]) -> Option<u64> {
    if s.len() < 5 {
        return None;
    }
    s[..5].iter().try_fold(0u64, |acc, &c| {
        let d = B64.iter().position(|&b| b == c)? as u64;
        Some(acc << 6 | d)
    })
}

/// Splits `a=b; c=d` into trimmed (name, value) pairs with their byte
/// range in the field value.
fn pairs(v: &[u8]) -> impl Iterator<Item = (&[u8], &[u8], std::ops::Range<usize>)> {
    let mut start = 0;
    v.split(|&c| c == b';').map(move |p| {
        let r = start..start + p.len();
        start += p.len() + 1;
        let (n, val) = match p.iter().position(|&c| c == b'=') {
            Some(i) => (&p[..i], &p[i + 1..]),
            None => (p, &p[p.len()..]),
        };
        (n.trim_ascii(), val.trim_ascii(), r)
    })
}

fn capture(cap: &CaptureCookie, slot: &mut Option<Vec<u8>>, n: &[u8], v: &[u8]) {
    if slot.is_none() && n.starts_with(cap.name.as_bytes()) {
        let mut c = Vec::with_capacity(n.len() + 1 + v.len());
        c.extend_from_slice(n);
        c.push(b'=');
        c.extend_from_slice(v);
        c.truncate(cap.len);
        *slot = Some(c);
    }
}

/// The request side. `fields` are the request's header fields (name,
/// value), edited in place when the server must not see the cookie as
/// the client sent it; returns whether they changed. `now` is seconds
/// since the epoch.
pub fn request(
    cfg: Option<&CookieCfg>,
    cap: Option<&CaptureCookie>,
    servers: &super::ServerList,
    fields: &mut Vec<(Vec<u8>, Vec<u8>)>,
    info: &mut TxnInfo,
    now: u64,
) -> bool {
    // HAProxy writes the letters for the active modes only (`----` for a
    // cookie the server manages alone).
    if cfg.is_some_and(|c| c.mode != CookieMode::Passive) {
        info.ck_client = b'N';
        info.ck_server = b'N';
    }
    let mut changed = false;
    let mut seen = false;
    for (name, value) in fields.iter_mut() {
        if !name.eq_ignore_ascii_case(b"cookie") {
            continue;
        }
        let mut out: Vec<u8> = Vec::with_capacity(value.len());
        let mut edited = false;
        for (n, v, r) in pairs(value) {
            if let Some(cap) = cap {
                capture(cap, &mut info.cap_cc, n, v);
            }
            let Some(c) = cfg.filter(|c| n == c.name.as_bytes()) else {
                push_pair(&mut out, &value[r]);
                continue;
            };
            // The server's id, and what the server sees of the value.
            let (id, rest) = match c.mode {
                CookieMode::Prefix => match v.iter().position(|&b| b == DELIM) {
                    Some(i) => (&v[..i], Some(&v[i + 1..])),
                    None => (v, None),
                },
                _ => match v.iter().position(|&b| b == DELIM_DATE) {
                    Some(i) => {
                        let dates = &v[i + 1..];
                        if !seen {
                            info.ck_last = b64tos30(dates).map_or(0, |d| d << 2);
                            info.ck_first = dates
                                .iter()
                                .position(|&b| b == DELIM_DATE)
                                .and_then(|j| b64tos30(&dates[j + 1..]))
                                .map_or(0, |d| d << 2);
                        }
                        (&v[..i], None)
                    }
                    None => (v, None),
                },
            };
            if !seen {
                seen = true;
                let mut j = judge(c, servers, id, info, now);
                if info.ck_ignore && matches!(j, b'V' | b'D') {
                    // HAProxy: found, but unused.
                    j = b'U';
                    info.ck_direct = None;
                    info.ck_force = false;
                }
                if c.mode != CookieMode::Passive {
                    info.ck_client = j;
                }
            }
            match (c.mode, rest) {
                (CookieMode::Prefix, Some(rest)) => {
                    // The server gets back the cookie it set.
                    out_sep(&mut out);
                    out.extend_from_slice(n);
                    out.push(b'=');
                    out.extend_from_slice(rest);
                    edited = true;
                }
                (CookieMode::Insert, _) if c.indirect => edited = true,
                _ => push_pair(&mut out, &value[r]),
            }
        }
        if edited {
            *value = out;
            changed = true;
        }
    }
    if changed {
        fields.retain(|(n, v)| !(n.eq_ignore_ascii_case(b"cookie") && v.is_empty()));
    }
    // Forcing applies to the server the cookie named, nothing else.
    if info.ck_direct.is_none() {
        info.ck_force = false;
        info.ck_force_rule = false;
    }
    changed
}

fn out_sep(out: &mut Vec<u8>) {
    if !out.is_empty() {
        out.extend_from_slice(b"; ");
    }
}

fn push_pair(out: &mut Vec<u8>, p: &[u8]) {
    let p = p.trim_ascii();
    if !p.is_empty() {
        out_sep(out);
        out.extend_from_slice(p);
    }
}

/// The client-side letter for a cookie naming `id`, and the server it
/// designates when it may be used.
fn judge(
    c: &CookieCfg,
    servers: &super::ServerList,
    id: &[u8],
    info: &mut TxnInfo,
    now: u64,
) -> u8 {
    // Dates more than a day in the future are refused, as HAProxy does.
    let bad = |d: u64, max: Option<std::time::Duration>| -> bool {
        match max {
            Some(m) if d != 0 => d > now + 86_400 || now.saturating_sub(d) > m.as_secs(),
            _ => false,
        }
    };
    if bad(info.ck_first, c.maxlife) {
        return b'O';
    }
    if bad(info.ck_last, c.maxidle) {
        return b'E';
    }
    let Some(s) = servers
        .iter()
        .find(|s| s.cookie().is_some_and(|v| v.as_bytes() == id))
    else {
        return b'I';
    };
    if s.persist_ok() {
        info.ck_direct = Some(s.idx);
        b'V'
    } else {
        // HAProxy: a down (or maintenance) server takes the request with
        // `option persist` or `force-persist`; else the balancer picks
        // another one.
        if (c.persist || info.ck_force) && s.has_addr() {
            info.ck_direct = Some(s.idx);
            info.ck_force = true;
        }
        b'D'
    }
}

impl super::Farm {
    /// The CLI's `enable|disable dynamic-cookie backend B` (HAProxy 2.6):
    /// on, each server without `cookie VALUE` gets the value its address
    /// and the key give (none without a key); off, those servers lose
    /// their value (no persistence to them by cookie until it is on
    /// again).
    pub fn set_dynamic_cookies(&self, on: bool) {
        let key = {
            let mut d = self.dyncookie.lock().unwrap_or_else(|p| p.into_inner());
            d.on = on;
            d.key.clone()
        };
        for s in self.servers.iter() {
            if s.opts.cookie.is_some() {
                continue;
            }
            *s.dyn_key.lock().unwrap_or_else(|p| p.into_inner()) = key.clone().filter(|_| on);
            let mut v = s.dyn_cookie.lock().unwrap_or_else(|p| p.into_inner());
            match (&key, on) {
                (_, false) => *v = None,
                (Some(k), true) => *v = super::dyn_cookie(k, s.addr()),
                (None, true) => {}
            }
        }
    }

    /// The CLI's `set dynamic-cookie-key backend B KEY`: while dynamic
    /// cookies are on, each server without `cookie VALUE` takes the value
    /// the new key gives.
    pub fn set_dynamic_cookie_key(&self, key: &str) {
        let on = {
            let mut d = self.dyncookie.lock().unwrap_or_else(|p| p.into_inner());
            d.key = Some(key.to_string());
            d.on
        };
        if on {
            self.set_dynamic_cookies(true);
        }
    }

    /// A server added at run time follows the backend's dynamic cookies:
    /// a later `set server ... addr` derives its value (HAProxy 2.6's
    /// `add server` itself gives it none).
    pub(super) fn adopt_dynamic_cookie(&self, s: &super::ServerRt) {
        let d = self.dyncookie.lock().unwrap_or_else(|p| p.into_inner());
        if d.on && s.opts.cookie.is_none() {
            *s.dyn_key.lock().unwrap_or_else(|p| p.into_inner()) = d.key.clone();
        }
    }

    /// [`super::Farm::pick_sticky`] for the server a persistence cookie
    /// designates: with `force` (`option persist`) it takes the stream
    /// even when down, unless it is the server to avoid (`option
    /// redispatch` after failed connects); with `stay` (`force-persist`)
    /// even then, as HAProxy does not redispatch such a request.
    #[allow(clippy::too_many_arguments)]
    pub fn pick_cookie(
        &self,
        prefer: Option<usize>,
        force: bool,
        stay: bool,
        input: &super::LbInput<'_>,
        avoid: Option<usize>,
        me: sched::TaskletId,
        handle: impl FnOnce() -> sched::RuntimeHandle,
    ) -> super::Pick {
        match prefer {
            Some(i)
                if force
                    && (stay || avoid != Some(i))
                    && self.servers.get(i).is_some_and(|s| s.has_addr()) =>
            {
                self.pick_direct(i, stay, input, me, handle)
            }
            _ => self.pick_sticky(prefer, input, avoid, me, handle),
        }
    }
}

/// What the response side needs to know of the exchange.
pub struct RespFacts {
    /// The request was a POST (`postonly`).
    pub post: bool,
    /// A shared cache could store the answer (`nocache`, [`cacheable`]).
    pub cacheable: bool,
    /// Seconds since the epoch.
    pub now: u64,
}

/// The response side: `fields` are the response's header fields, `srv`
/// the server that answered.
pub fn response(
    cfg: Option<&CookieCfg>,
    cap: Option<&CaptureCookie>,
    srv: Option<&ServerRt>,
    r: &RespFacts,
    fields: &mut Vec<(Vec<u8>, Vec<u8>)>,
    info: &mut TxnInfo,
) {
    let now = r.now;
    let mut found = false;
    let srv_cookie = srv.and_then(|s| s.cookie());
    let srv_cookie = srv_cookie.as_deref();
    let mut i = 0;
    while i < fields.len() {
        let (name, value) = &mut fields[i];
        if !name.eq_ignore_ascii_case(b"set-cookie") {
            i += 1;
            continue;
        }
        let (n, v, r) = match pairs(value).next() {
            Some((n, v, r)) => (n.to_vec(), v.to_vec(), r),
            None => {
                i += 1;
                continue;
            }
        };
        if let Some(cap) = cap {
            capture(cap, &mut info.cap_cs, &n, &v);
        }
        let Some(c) = cfg.filter(|c| n == c.name.as_bytes()) else {
            i += 1;
            continue;
        };
        found = true;
        if c.mode != CookieMode::Passive {
            info.ck_server = b'P';
        }
        if c.preserve {
            // The server's own cookie is left as it is.
        } else if (srv.is_some() && c.mode == CookieMode::Insert)
            || (info.ck_direct.is_some() && c.indirect)
        {
            fields.remove(i);
            info.ck_server = b'D';
            continue;
        } else if let (Some(id), CookieMode::Rewrite | CookieMode::Prefix) = (srv_cookie, c.mode) {
            let mut nv = Vec::with_capacity(value.len() + id.len() + 1);
            nv.extend_from_slice(&n);
            nv.push(b'=');
            nv.extend_from_slice(id.as_bytes());
            if c.mode == CookieMode::Prefix {
                nv.push(DELIM);
                nv.extend_from_slice(&v);
            }
            nv.extend_from_slice(&value[r.end..]);
            *value = nv;
            info.ck_server = b'R';
        }
        i += 1;
    }
    let Some(c) = cfg.filter(|c| c.mode == CookieMode::Insert) else {
        return;
    };
    let Some(s) = srv else {
        return;
    };
    // HAProxy's condition: not when the server set the cookie and
    // `preserve` keeps it; when the client did not come by the cookie, or
    // the cookie's dates must be set, refreshed or dropped; POST only
    // with `postonly`.
    let direct = info.ck_direct == Some(s.idx);
    let dates = (c.maxidle.is_some() || info.ck_last != 0)
        && (info.ck_last == 0 || info.ck_last < now)
        || (c.maxlife.is_some() && info.ck_first == 0)
        || (c.maxlife.is_none() && info.ck_first != 0);
    if (found && c.preserve) || (direct && !dates) || (c.postonly && !r.post) || info.ck_ignore {
        return;
    }
    let mut v = Vec::with_capacity(64);
    v.extend_from_slice(c.name.as_bytes());
    v.push(b'=');
    let own = s.cookie();
    match own.as_deref() {
        // A server without a cookie value asks the client to forget it.
        None => v.extend_from_slice(b"; Expires=Thu, 01-Jan-1970 00:00:01 GMT; path=/"),
        Some(id) => {
            v.extend_from_slice(id.as_bytes());
            if c.maxidle.is_some() || c.maxlife.is_some() {
                v.push(DELIM_DATE);
                s30tob64((now + 3) >> 2, &mut v);
                if c.maxlife.is_some() {
                    v.push(DELIM_DATE);
                    let first = if info.ck_first != 0 {
                        info.ck_first >> 2
                    } else {
                        (now + 3) >> 2
                    };
                    s30tob64(first, &mut v);
                }
            }
            v.extend_from_slice(b"; path=/");
        }
    }
    for d in &c.domains {
        v.extend_from_slice(b"; domain=");
        v.extend_from_slice(d.as_bytes());
    }
    if c.httponly {
        v.extend_from_slice(b"; HttpOnly");
    }
    if c.secure {
        v.extend_from_slice(b"; Secure");
    }
    for a in &c.attrs {
        v.extend_from_slice(b"; ");
        v.extend_from_slice(a.as_bytes());
    }
    fields.push((b"Set-Cookie".to_vec(), v));
    info.ck_server = if own.is_some() && direct { b'U' } else { b'I' };
    if c.nocache && r.cacheable {
        fields.push((b"Cache-control".to_vec(), b"private".to_vec()));
    }
}

/// Whether a response may be stored by a shared cache, as HAProxy 2.6
/// judges it for `nocache` and `option checkcache` (its TX_CACHEABLE),
/// and whether its cookies may be (TX_CACHE_COOK). `safe`: a GET, HEAD,
/// OPTIONS or TRACE request. Checked side by side with Debian's haproxy
/// 2.6.12, which, unlike 2.6.0's source, also takes an answer with
/// neither freshness (`max-age`, `s-maxage`, `Expires`) nor validator
/// (`ETag`, `Last-Modified`) as not cacheable; a `Set-Cookie` changes
/// nothing here (a `nocache` cookie makes a cacheable answer private).
pub fn cacheability(safe: bool, status: u16, fields: &[(Vec<u8>, Vec<u8>)]) -> (bool, bool) {
    fn named<'a>(
        fields: &'a [(Vec<u8>, Vec<u8>)],
        n: &'a [u8],
    ) -> impl Iterator<Item = &'a (Vec<u8>, Vec<u8>)> {
        fields
            .iter()
            .filter(move |(f, _)| f.eq_ignore_ascii_case(n))
    }
    let listed = matches!(
        status,
        200 | 203 | 204 | 206 | 300 | 301 | 404 | 405 | 410 | 414 | 501
    );
    // The first Pragma field only, its whole value.
    let pragma = named(fields, b"pragma")
        .next()
        .is_some_and(|(_, v)| v.trim_ascii().eq_ignore_ascii_case(b"no-cache"));
    if !listed || pragma {
        return (false, false);
    }
    let (mut cacheable, mut cook, mut fresh) = (safe, safe, false);
    for (_, v) in named(fields, b"cache-control") {
        for d in v.split(|&c| c == b',') {
            let d = d.trim_ascii().to_ascii_lowercase();
            match &d[..] {
                b"public" => (cacheable, cook) = (true, true),
                b"private" | b"no-cache" | b"no-store" | b"max-age=0" | b"s-maxage=0" => {
                    (cacheable, cook) = (false, false)
                }
                d if d.starts_with(b"no-cache=\"set-cookie") => cook = false,
                d if d.starts_with(b"s-maxage") || d.starts_with(b"max-age") => fresh = true,
                _ => {}
            }
        }
    }
    let known = |n: &[u8]| named(fields, n).next().is_some();
    let valid = fresh || known(b"expires") || known(b"etag") || known(b"last-modified");
    (cacheable && valid, cook)
}

/// `option checkcache`: whether HAProxy 2.6 blocks this answer as a
/// cacheable response carrying a cookie (its TX_CACHEABLE, TX_CACHE_COOK
/// and TX_SCK_PRESENT all set; see [`cacheability`]). `server_cookie`:
/// the server's answer carried `Set-Cookie` or `Set-Cookie2`.
pub fn blocks_cacheable_cookie(
    safe: bool,
    status: u16,
    fields: &[(Vec<u8>, Vec<u8>)],
    server_cookie: bool,
) -> bool {
    server_cookie && cacheability(safe, status, fields) == (true, true)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dates_round_trip_as_haproxy_encodes_them() {
        let mut v = Vec::new();
        s30tob64(0x3fff_ffff, &mut v);
        assert_eq!(v, b"/////");
        v.clear();
        s30tob64(1, &mut v);
        assert_eq!(v, b"AAAAB");
        assert_eq!(b64tos30(b"AAAAB"), Some(1));
        assert_eq!(b64tos30(b"AA!AB"), None);
    }

    #[test]
    fn pairs_keep_their_ranges() {
        let v = b"a=1; b = 2;c";
        let p: Vec<_> = pairs(v)
            .map(|(n, v, r)| (n.to_vec(), v.to_vec(), r))
            .collect();
        assert_eq!(p[0], (b"a".to_vec(), b"1".to_vec(), 0..3));
        assert_eq!(p[1], (b"b".to_vec(), b"2".to_vec(), 4..10));
        assert_eq!(p[2], (b"c".to_vec(), b"".to_vec(), 11..12));
    }
}
