//! The TLS version options `bind` lines, `server` lines and `global`'s
//! `ssl-default-*-options` share (`ssl-min-ver`, `no-tlsv12`,
//! `force-tlsv13`...), and the file names `crt-base` and `ca-base` prefix.
//!
//! ebb speaks TLSv1.2 and TLSv1.3: options that turn older versions off
//! are accepted (they change nothing), options that ask for them are
//! refused, and a set of options that leaves no version is an error where
//! the line that completes it is read.

use std::path::{Path, PathBuf};

use super::Ctx;
use crate::config::types::*;

/// A TLS version name of `ssl-min-ver` / `ssl-max-ver`.
fn tls_version(kw: &str, v: &str) -> Result<TlsVersion, String> {
    match v {
        "TLSv1.2" => Ok(TlsVersion::Tls12),
        "TLSv1.3" => Ok(TlsVersion::Tls13),
        "SSLv3" | "TLSv1.0" | "TLSv1.1" if kw == "ssl-min-ver" => Err(format!(
            "'ssl-min-ver {v}' is not supported: ebb speaks TLSv1.2 and TLSv1.3 only"
        )),
        "SSLv3" | "TLSv1.0" | "TLSv1.1" => Err(format!(
            "'{kw} {v}' leaves no TLS version ebb speaks (TLSv1.2, TLSv1.3)"
        )),
        o => Err(format!(
            "unknown TLS version '{o}' in '{kw}' (expected SSLv3, TLSv1.0, TLSv1.1, TLSv1.2 or TLSv1.3)"
        )),
    }
}

/// The version and order options shared by `bind` lines and
/// `ssl-default-bind-options`. `Ok(Some(n))`: handled, `n` values taken
/// after it; `Ok(None)`: not one of these.
pub(super) fn ssl_option(
    opt: &str,
    next: Option<&str>,
    b: &mut BindSsl,
) -> Result<Option<usize>, String> {
    let value = || next.ok_or_else(|| format!("'{opt}' expects a TLS version"));
    match opt {
        "ssl-min-ver" => b.min_ver = Some(tls_version(opt, value()?)?),
        "ssl-max-ver" => b.max_ver = Some(tls_version(opt, value()?)?),
        // ebb never speaks these: turning them off is already the case.
        "no-sslv3" | "no-tlsv10" | "no-tlsv11" => return Ok(Some(0)),
        "no-tlsv12" => b.no_tls12 = true,
        "no-tlsv13" => b.no_tls13 = true,
        "force-tlsv12" => {
            b.min_ver = Some(TlsVersion::Tls12);
            b.max_ver = Some(TlsVersion::Tls12);
        }
        "force-tlsv13" => {
            b.min_ver = Some(TlsVersion::Tls13);
            b.max_ver = Some(TlsVersion::Tls13);
        }
        "force-sslv3" | "force-tlsv10" | "force-tlsv11" => {
            return Err(format!(
                "'{opt}' is not supported: ebb speaks TLSv1.2 and TLSv1.3 only"
            ))
        }
        "no-tls-tickets" => b.no_tls_tickets = true,
        "prefer-client-ciphers" => b.prefer_client_ciphers = true,
        _ => return Ok(None),
    }
    Ok(Some(match opt {
        "ssl-min-ver" | "ssl-max-ver" => 1,
        _ => 0,
    }))
}

/// Where TLS bind options are read: a `bind` line, or the `[options]` of
/// a `crt-list` line, which HAProxy 2.6 limits to its `ssl_bind_kws`
/// (`alpn`, `ciphers`, `ciphersuites`, `curves`, `ssl-min-ver`,
/// `ssl-max-ver`, `verify`, `ca-file`, `ca-verify-file`, `crl-file`,
/// `no-ca-names`; ebb refuses its `npn`, `ecdhe` and `allow-0rtt`).
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum TlsOptionsOf {
    BindLine,
    CrtListLine,
}

impl TlsOptionsOf {
    fn missing_value(self, kw: &str) -> String {
        match self {
            TlsOptionsOf::BindLine => format!("bind option '{kw}' expects a value"),
            TlsOptionsOf::CrtListLine => format!("'{kw}' expects a value"),
        }
    }
}

/// One TLS option word of a `bind` line or of a `crt-list` line (`of`),
/// with the word after it (`next`), into `b`: the one parser of both.
/// `Ok(Some(n))`: handled, `n` values taken after it; `Ok(None)`: not a
/// TLS option of that line (the caller's own words, or its error).
/// `ca_path`: a `ca-file`/`ca-verify-file`/`crl-file` name after
/// `ca-base`. The certificate words (`crt`, `crt-list`, `key`) are the
/// bind line's own.
pub fn tls_bind_option(
    kw: &str,
    next: Option<&str>,
    of: TlsOptionsOf,
    b: &mut BindSsl,
    ca_path: &dyn Fn(&str) -> PathBuf,
) -> Result<Option<usize>, String> {
    let value = || next.ok_or_else(|| of.missing_value(kw));
    let bind = of == TlsOptionsOf::BindLine;
    match kw {
        "alpn" => b.alpn = crate::config::values::alpn_list(value()?)?,
        "ciphers" => {
            let v = value()?;
            crate::tls_policy::ciphers12(v)?;
            b.ciphers = Some(v.to_string());
        }
        "ciphersuites" => {
            let v = value()?;
            crate::tls_policy::ciphers13(v)?;
            b.ciphersuites = Some(v.to_string());
        }
        "curves" => {
            let v = value()?;
            crate::tls_policy::curves(v)?;
            b.curves = Some(v.to_string());
        }
        "verify" => b.client.verify = ClientVerify::parse(value()?)?,
        "ca-file" => b.client.ca_file = Some(ca_path(value()?)),
        "ca-verify-file" => b.client.ca_verify_file = Some(ca_path(value()?)),
        "crl-file" => b.client.crl_file = Some(ca_path(value()?)),
        "no-ca-names" => {
            b.client.no_ca_names = true;
            return Ok(Some(0));
        }
        "ca-ignore-err" if bind => b.client.ca_ignore_err = ignore_err_list(kw, value()?)?,
        "crt-ignore-err" if bind => b.client.crt_ignore_err = ignore_err_list(kw, value()?)?,
        // The version and order options `ssl-default-bind-options` shares.
        _ if bind => return ssl_option(kw, next, b),
        "ssl-min-ver" => b.min_ver = Some(tls_version(kw, value()?)?),
        "ssl-max-ver" => b.max_ver = Some(tls_version(kw, value()?)?),
        _ => return Ok(None),
    }
    Ok(Some(1))
}

/// The error IDs of `ca-ignore-err` / `crt-ignore-err`: `all`, or a
/// comma list of OpenSSL verify error numbers (1 to 63), as HAProxy 2.6
/// reads them. ebb's verification stops at some errors it cannot look
/// past (a bad signature, a wrong purpose): ignoring those is refused
/// rather than accepting a chain whose other checks were not made.
fn ignore_err_list(kw: &str, v: &str) -> Result<u64, String> {
    if v == "all" {
        return Ok(u64::MAX);
    }
    let mut bits = 0u64;
    for id in v.split(',') {
        let n: i64 = id.trim().parse().unwrap_or(0);
        if !(1..=63).contains(&n) {
            return Err(format!(
                "'{kw}' : ID '{n}' out of range (1..63) in error IDs list '{v}'"
            ));
        }
        if crate::clientcert::NOT_IGNORABLE.contains(&n) {
            return Err(format!(
                "'{kw}' : ignoring error {n} is not supported by ebb: its verification cannot go on past it (use 'all' to accept any certificate)"
            ));
        }
        bits |= 1 << n;
    }
    Ok(bits)
}

/// [`ssl_option`] for `server` lines and `ssl-default-server-options`
/// (no cipher order: the server picks).
pub(super) fn server_tls_option(
    opt: &str,
    next: Option<&str>,
    p: &mut ServerTlsPolicy,
) -> Result<Option<usize>, String> {
    if opt == "prefer-client-ciphers" {
        return Ok(None);
    }
    let mut b = BindSsl {
        min_ver: p.min_ver,
        max_ver: p.max_ver,
        no_tls12: p.no_tls12,
        no_tls13: p.no_tls13,
        no_tls_tickets: p.no_tls_tickets,
        ..BindSsl::default()
    };
    let r = ssl_option(opt, next, &mut b)?;
    p.min_ver = b.min_ver;
    p.max_ver = b.max_ver;
    p.no_tls12 = b.no_tls12;
    p.no_tls13 = b.no_tls13;
    p.no_tls_tickets = b.no_tls_tickets;
    Ok(r)
}

/// `dir` joined with a relative `p` (`crt-base`/`ca-base`), then resolved
/// as every config path.
pub(super) fn with_base(ctx: &Ctx<'_>, base: Option<&PathBuf>, p: &str) -> PathBuf {
    match base {
        Some(b) if !Path::new(p).is_absolute() => ctx.resolve(&b.join(p).to_string_lossy()),
        _ => ctx.resolve(p),
    }
}
