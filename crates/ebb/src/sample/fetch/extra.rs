//! More fetches of the request and response (configuration.txt 7.3.2 to
//! 7.3.6), kept apart from `eval` for its size: the hashes of the host and
//! path (`base32`, `url32` and their `+src` forms), the address in an
//! absolute URI (`url_ip`, `url_port`), the head as one block (`req.hdrs`,
//! `req.hdrs_bin`, `req.hdr_names`), the credentials of `Authorization`
//! (`http_auth_type`, `http_auth_user`, `http_auth_pass`), a
//! length-prefixed block of a TCP stream (`payload_lv`), and the process's
//! facts (`hostname`, `thread`, `date_us`).
//!
//! Each is an [`Extra`], which `Fetch` holds as one of its variants, and
//! reads the message as HAProxy 2.6's `http_fetch.c`, `payload.c` and
//! `sample.c` do (its HTX form where that shows: lower-case names, the
//! `Connection` field without `close` and `keep-alive`).

use super::msg::{found_path, split_q, values};
use crate::sample::{Ctx, Scratch, Val};

#[derive(Clone, Debug)]
pub(in crate::sample) enum Extra {
    /// `base32` (`url`: `url32`, the whole path with its query, the Host
    /// field's whole line), with the source address after it (`src`).
    Hash32 {
        url: bool,
        src: bool,
    },
    /// `baseq`: `base` with the query.
    Baseq,
    /// `url_ip`, `url_port` (`port`): the IPv4 address of an absolute
    /// `http://` or `https://` target and its port.
    UrlAddr {
        port: bool,
    },
    /// `req.hdrs`, `res.hdrs` (`res`): the fields as HTTP/1 lines and the
    /// empty line; with `bin`, `req.hdrs_bin`, `res.hdrs_bin`: each name
    /// and value after its length (varint), two empty ones at the end.
    Hdrs {
        res: bool,
        bin: bool,
    },
    /// `req.hdr_names([DELIM])`, `res.hdr_names([DELIM])`.
    HdrNames {
        res: bool,
        delim: u8,
    },
    /// `capture.res.ver`: `HTTP/1.1` or `HTTP/1.0`, once a response came.
    CaptureResVer,
    /// `http_auth_type`, `http_auth_user`, `http_auth_pass`.
    Auth(AuthPart),
    /// `payload_lv(OFF,LEN[,BUF])`, `req.payload_lv`, `res.payload_lv`:
    /// the block whose length is the LEN bytes at OFF (big endian), from
    /// BUF (as HAProxy 2.6 encodes it: `(n << 1) + 1` for a signed,
    /// relative one, else as written; see `payload_lv`), by default just
    /// after the length.
    PayloadLv {
        res: bool,
        len_off: u32,
        len_size: u32,
        buf_off: Option<i64>,
    },
    /// `hostname`, `thread`, `date_us`.
    Hostname,
    Thread,
    DateUs,
    /// `meth(NAME)`: a constant method.
    Meth(Vec<u8>),
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(in crate::sample) enum AuthPart {
    Type,
    User,
    Pass,
}

impl Extra {
    /// The fetch named `name`, when it is one of these; `Err` for bad
    /// arguments. `res`: the rule reads the response (`payload_lv` and
    /// the like read its direction).
    pub(super) fn compile(name: &str, args: &[String], res: bool) -> Option<Result<Extra, String>> {
        let none = |f: Extra| -> Result<Extra, String> {
            if !args.is_empty() {
                return Err(format!("fetch '{name}' takes no argument"));
            }
            Ok(f)
        };
        Some(match name {
            "base32" => none(Extra::Hash32 {
                url: false,
                src: false,
            }),
            "base32+src" => none(Extra::Hash32 {
                url: false,
                src: true,
            }),
            "url32" => none(Extra::Hash32 {
                url: true,
                src: false,
            }),
            "url32+src" => none(Extra::Hash32 {
                url: true,
                src: true,
            }),
            "baseq" => none(Extra::Baseq),
            "url_ip" => none(Extra::UrlAddr { port: false }),
            "url_port" => none(Extra::UrlAddr { port: true }),
            "req.hdrs" | "res.hdrs" | "req.hdrs_bin" | "res.hdrs_bin" => none(Extra::Hdrs {
                res: name.starts_with("res."),
                bin: name.ends_with("_bin"),
            }),
            "req.hdr_names" | "res.hdr_names" => {
                if args.len() > 1 {
                    return Some(Err(format!("fetch '{name}' takes at most 1 argument")));
                }
                // The first byte of the argument (an empty one: a NUL).
                let delim = match args.first() {
                    Some(a) => a.as_bytes().first().copied().unwrap_or(0),
                    None => b',',
                };
                Ok(Extra::HdrNames {
                    res: name.starts_with("res."),
                    delim,
                })
            }
            "capture.res.ver" => none(Extra::CaptureResVer),
            "http_auth_type" => none(Extra::Auth(AuthPart::Type)),
            "http_auth_user" => none(Extra::Auth(AuthPart::User)),
            "http_auth_pass" => none(Extra::Auth(AuthPart::Pass)),
            "payload_lv" | "req.payload_lv" | "res.payload_lv" => {
                let res = match name {
                    "payload_lv" => res,
                    n => n.starts_with("res."),
                };
                payload_lv(name, args, res)
            }
            "hostname" => none(Extra::Hostname),
            "thread" => none(Extra::Thread),
            "date_us" => none(Extra::DateUs),
            "meth" => {
                if args.len() != 1 {
                    return Some(Err(format!("fetch '{name}' expects 1 argument")));
                }
                // HAProxy's check: a method it knows, or a token.
                if !crate::net::is_token(&args[0]) {
                    return Some(Err(format!("fetch '{name}': expects valid method.")));
                }
                Ok(Extra::Meth(args[0].as_bytes().to_vec()))
            }
            _ => return None,
        })
    }

    /// What it reads: the request, the response, or neither.
    pub(super) fn reads_response(&self) -> Option<bool> {
        match self {
            Extra::Hash32 { .. } | Extra::Baseq | Extra::UrlAddr { .. } | Extra::Auth(_) => {
                Some(false)
            }
            Extra::Hdrs { res, .. } | Extra::HdrNames { res, .. } => Some(*res),
            Extra::PayloadLv { res, .. } => Some(*res),
            _ => None,
        }
    }

    /// Whether it reads an HTTP message (else raw bytes or nothing).
    pub(super) fn layer(&self) -> super::Layer {
        match self {
            Extra::Hostname | Extra::Thread | Extra::DateUs | Extra::Meth(_) => super::Layer::L4,
            Extra::PayloadLv { .. } => super::Layer::Payload,
            _ => super::Layer::Http,
        }
    }

    pub(super) fn out_type(&self) -> crate::sample::Type {
        use crate::sample::Type;
        match self {
            Extra::Hash32 { src: false, .. }
            | Extra::Thread
            | Extra::DateUs
            | Extra::UrlAddr { port: true } => Type::Int,
            Extra::Hash32 { src: true, .. } | Extra::PayloadLv { .. } => Type::Bin,
            Extra::Hdrs { bin: true, .. } => Type::Bin,
            Extra::UrlAddr { port: false } => Type::Ip,
            Extra::Meth(_) => Type::Meth,
            _ => Type::Str,
        }
    }

    pub(super) fn eval(&self, ctx: &Ctx<'_>, s: &mut Scratch) -> Option<Val> {
        s.cur.clear();
        match self {
            Extra::Hash32 { url, src } => {
                let h = hash32(ctx, *url)?;
                if !*src {
                    return Some(Val::Int(i64::from(h)));
                }
                s.cur.extend_from_slice(&h.to_be_bytes());
                match ctx.src_addr().ip() {
                    std::net::IpAddr::V4(a) => s.cur.extend_from_slice(&a.octets()),
                    std::net::IpAddr::V6(a) => s.cur.extend_from_slice(&a.octets()),
                }
                Some(Val::Bin)
            }
            Extra::Baseq => {
                // HAProxy's smp_fetch_base with the query: the Host
                // field's first value, then the path when it starts with
                // '/'; without a Host (or an empty one), `pathq`.
                let r = ctx.req?;
                let p = found_path(r.head.target.get(r.buf));
                values(ctx, false, "host", false, &mut |v| {
                    s.cur.extend_from_slice(v);
                    true
                });
                if s.cur.is_empty() {
                    s.cur.extend_from_slice(p?);
                    return Some(Val::Str);
                }
                s.cur
                    .extend_from_slice(p.filter(|p| p.starts_with(b"/")).unwrap_or(b""));
                Some(Val::Str)
            }
            Extra::UrlAddr { port } => {
                let r = ctx.req?;
                let (ip, p) = url_ipv4(r.head.target.get(r.buf))?;
                Some(if *port {
                    Val::Int(i64::from(p))
                } else {
                    Val::Ip(std::net::IpAddr::V4(ip))
                })
            }
            Extra::Hdrs { res, bin } => {
                let mut out = std::mem::take(&mut s.cur);
                let found = htx_fields(ctx, *res, &mut |n, v| {
                    if *bin {
                        varint(n.len() as u64, &mut out);
                        out.extend(n.iter().map(u8::to_ascii_lowercase));
                        varint(v.len() as u64, &mut out);
                        out.extend_from_slice(v);
                    } else {
                        out.extend(n.iter().map(u8::to_ascii_lowercase));
                        out.extend_from_slice(b": ");
                        out.extend_from_slice(v);
                        out.extend_from_slice(b"\r\n");
                    }
                });
                if *bin {
                    out.extend_from_slice(&[0, 0]);
                } else {
                    out.extend_from_slice(b"\r\n");
                }
                s.cur = out;
                found?;
                Some(if *bin { Val::Bin } else { Val::Str })
            }
            Extra::HdrNames { res, delim } => {
                let mut out = std::mem::take(&mut s.cur);
                let found = htx_fields(ctx, *res, &mut |n, _| {
                    if !out.is_empty() {
                        out.push(*delim);
                    }
                    out.extend(n.iter().map(u8::to_ascii_lowercase));
                });
                s.cur = out;
                found?;
                Some(Val::Str)
            }
            Extra::CaptureResVer => {
                // HAProxy's flag for 1.1 and up: an HTTP/2 server's answer
                // and one ebb makes are 1.1 too.
                let v: &[u8] = match ctx.res? {
                    crate::sample::Res::H1 { head, .. }
                        if head.version == crate::http1::Version::Http10 =>
                    {
                        b"HTTP/1.0"
                    }
                    _ => b"HTTP/1.1",
                };
                s.cur.extend_from_slice(v);
                Some(Val::Str)
            }
            Extra::Auth(part) => {
                let v = super::eval::authorization(ctx)?;
                match (crate::sample::auth::credentials(&v)?, part) {
                    (crate::sample::auth::Creds::Basic { .. }, AuthPart::Type) => {
                        s.cur.extend_from_slice(b"Basic")
                    }
                    (crate::sample::auth::Creds::Bearer, AuthPart::Type) => {
                        s.cur.extend_from_slice(b"Bearer")
                    }
                    (crate::sample::auth::Creds::Basic { user, .. }, AuthPart::User) => {
                        s.cur.extend_from_slice(&user)
                    }
                    (crate::sample::auth::Creds::Basic { pass, .. }, AuthPart::Pass) => {
                        s.cur.extend_from_slice(&pass)
                    }
                    _ => return None,
                }
                Some(Val::Str)
            }
            Extra::PayloadLv {
                res,
                len_off,
                len_size,
                buf_off,
            } => {
                let p = ctx.payload.filter(|p| p.response == *res)?;
                let b = p.bytes;
                let short = || {
                    p.unsure();
                    None
                };
                let (off, size) = (*len_off, *len_size);
                if u64::from(off) + u64::from(size) > b.len() as u64 {
                    return short();
                }
                // HAProxy's unsigned 32-bit arithmetic throughout.
                let len = b[off as usize..(off + size) as usize]
                    .iter()
                    .fold(0u32, |n, &c| n.wrapping_shl(8).wrapping_add(u32::from(c)));
                let mut at = off.wrapping_add(size);
                if let Some(o) = buf_off {
                    if o & 1 == 1 {
                        at = at.wrapping_add((o >> 1) as u32);
                    } else {
                        at = (o >> 1) as u32;
                    }
                }
                let max = crate::sample::BUFSIZE.load(std::sync::atomic::Ordering::Relaxed);
                if len == 0 || len > max || at.wrapping_add(len) > max {
                    // Will never match: no waiting.
                    return None;
                }
                let end = at as usize + len as usize;
                if end > b.len() {
                    return short();
                }
                s.cur.extend_from_slice(&b[at as usize..end]);
                Some(Val::Bin)
            }
            Extra::Hostname => {
                s.cur
                    .extend_from_slice(crate::sample::hostname().as_bytes());
                Some(Val::Str)
            }
            Extra::Thread => Some(Val::Int(sched::worker_thread().unwrap_or(0) as i64)),
            Extra::DateUs => {
                let us = std::time::SystemTime::now()
                    .duration_since(std::time::UNIX_EPOCH)
                    .map_or(0, |d| d.subsec_micros());
                Some(Val::Int(i64::from(us)))
            }
            Extra::Meth(m) => {
                s.cur.extend_from_slice(m);
                Some(Val::Meth)
            }
        }
    }
}

/// `payload_lv`'s arguments, checked as HAProxy's `val_payload_lv`.
fn payload_lv(name: &str, args: &[String], res: bool) -> Result<Extra, String> {
    if !(2..=3).contains(&args.len()) {
        return Err(format!(
            "fetch '{name}' expects 2 to 3 argument(s), got {}",
            args.len()
        ));
    }
    let int = |what: &str, a: &str| {
        a.parse::<i64>()
            .map_err(|_| format!("fetch '{name}' {what}: '{a}' is not an integer"))
    };
    let off = int("offset", &args[0])?;
    let size = int("length", &args[1])?;
    if off < 0 {
        return Err(format!("fetch '{name}': payload offset1 must be positive"));
    }
    // HAProxy refuses 0 only; a negative length reads past its buffer.
    if size <= 0 {
        return Err(format!("fetch '{name}': payload length must be > 0"));
    }
    let (off, size) = match (u32::try_from(off), u32::try_from(size)) {
        (Ok(o), Ok(s)) => (o, s),
        _ => return Err(format!("fetch '{name}': offset or length out of range")),
    };
    let buf_off = match args.get(2).filter(|a| !a.is_empty()) {
        None => None,
        Some(a) => {
            let relative = a.starts_with(['+', '-']);
            let i = a
                .parse::<i64>()
                .map_err(|_| format!("fetch '{name}': payload offset2 is not a number"))?;
            if i64::from(off) + i64::from(size) + i < 0 {
                return Err(format!("fetch '{name}': payload offset2 too negative"));
            }
            // HAProxy 2.6 encodes a relative offset `(n << 1) + 1` and
            // keeps an absolute one as written, which its fetch then
            // reads as encoded too: an even absolute offset counts half,
            // an odd one is relative (half of it, rounded down).
            Some(if relative {
                i.wrapping_shl(1).wrapping_add(1)
            } else {
                i
            })
        }
    };
    Ok(Extra::PayloadLv {
        res,
        len_off: off,
        len_size: size,
        buf_off,
    })
}

/// HAProxy's `base32` (`url`: `url32`) hash: SDBM over the Host field's
/// first value (`url32`: its whole line), then over the path up to its
/// query (`url32`: with it) when it starts with '/', each byte signed as
/// a C `char`, then the full avalanche.
fn hash32(ctx: &Ctx<'_>, url: bool) -> Option<u32> {
    let r = ctx.req?;
    let step = |h: u32, c: u8| -> u32 {
        (c as i8 as i32 as u32)
            .wrapping_add(h << 6)
            .wrapping_add(h << 16)
            .wrapping_sub(h)
    };
    let mut h = 0u32;
    values(ctx, false, "host", url, &mut |v| {
        h = v.iter().fold(h, |h, &c| step(h, c));
        true
    });
    if let Some(p) = found_path(r.head.target.get(r.buf)) {
        let p = if url { p } else { split_q(p).0 };
        if p.starts_with(b"/") {
            h = p.iter().fold(h, |h, &c| step(h, c));
        }
    }
    Some(crate::hash::full_hash(h))
}

/// HAProxy's `url2sa` at run time on a request target: after the first
/// `://`, whose scheme is `http` or `https` (any case), an IPv4 address
/// (`url2ipv4`: four dotted numbers up to 255, up to the first byte that
/// is neither a digit nor a dot) and an optional `:PORT` (its digits,
/// modulo 65536); an IPv6 address or a name gives none.
fn url_ipv4(t: &[u8]) -> Option<(std::net::Ipv4Addr, u16)> {
    let sep = t.windows(3).position(|w| w == b"://")?;
    let scheme = t[..sep]
        .iter()
        .fold(0u64, |n, &c| n.wrapping_shl(8).wrapping_add(u64::from(c)))
        | 0x2020_2020_2020_2020;
    let default = match scheme {
        0x2020_2020_6874_7470 => 80u32,
        0x2020_2068_7474_7073 => 443,
        _ => return None,
    };
    let rest = &t[sep + 3..];
    // `url2ipv4` reads as `buf2ip` does.
    let (ip, used) = match crate::sample::ipv4_prefix(rest)? {
        (std::net::IpAddr::V4(ip), used) => (ip, used),
        _ => return None,
    };
    let mut port = default;
    if rest.get(used) == Some(&b':') {
        port = rest[used + 1..]
            .iter()
            .take_while(|c| c.is_ascii_digit())
            .fold(0u32, |n, &c| {
                n.wrapping_mul(10).wrapping_add(u32::from(c - b'0'))
            });
    }
    Some((ip, port as u16))
}

/// Calls `f` on each field of the request's (`res`: the response's) head
/// as HAProxy's HTX holds it: a request's `Connection` field without its
/// `close` and `keep-alive` tokens (not at all when none is left).
/// `None` when the message is not there.
fn htx_fields(ctx: &Ctx<'_>, res: bool, f: &mut dyn FnMut(&[u8], &[u8])) -> Option<()> {
    let mut clean = Vec::new();
    crate::sample::each_field(ctx, res, &mut |n, v| {
        if !res && n.eq_ignore_ascii_case(b"connection") {
            clean.clear();
            super::msg::clean_connection(v, &mut clean);
            if !clean.is_empty() {
                f(n, &clean);
            }
            return false;
        }
        f(n, v);
        false
    })
    .then_some(())
}

/// HAProxy's `encode_varint` (the SPOE's).
fn varint(mut i: u64, out: &mut Vec<u8>) {
    if i < 240 {
        out.push(i as u8);
        return;
    }
    out.push(i as u8 | 240);
    i = (i - 240) >> 4;
    while i >= 128 {
        out.push(i as u8 | 128);
        i = (i - 128) >> 7;
    }
    out.push(i as u8);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn url_ipv4_reads_absolute_http_targets_only() {
        let ip = |t: &str| url_ipv4(t.as_bytes());
        assert_eq!(ip("http://1.2.3.4/x"), Some(([1, 2, 3, 4].into(), 80)));
        assert_eq!(
            ip("HTTPS://1.2.3.4:8443/x"),
            Some(([1, 2, 3, 4].into(), 8443))
        );
        assert_eq!(
            ip("http://1.2.3.4:70000"),
            Some(([1, 2, 3, 4].into(), 4464))
        );
        assert_eq!(ip("http://1.2.3.4:x"), Some(([1, 2, 3, 4].into(), 0)));
        assert_eq!(ip("ftp://1.2.3.4/"), None);
        assert_eq!(ip("http://h.example/"), None);
        assert_eq!(ip("http://[::1]/"), None);
        assert_eq!(ip("http://1.2.3/"), None);
        assert_eq!(ip("http://1.2.3.4.5/"), None);
        assert_eq!(ip("http://1.2.3.256/"), None);
        assert_eq!(ip("/p"), None);
    }

    #[test]
    fn varints_as_the_spoe_writes_them() {
        let v = |i: u64| {
            let mut o = Vec::new();
            varint(i, &mut o);
            o
        };
        assert_eq!(v(0), [0]);
        assert_eq!(v(239), [239]);
        assert_eq!(v(240), [240, 0]);
        assert_eq!(v(2287), [255, 127]);
        assert_eq!(v(2288), [240, 128, 0]);
    }
}
