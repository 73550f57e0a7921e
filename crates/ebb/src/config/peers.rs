//! `peers` sections (HAProxy 2.6's section 3.5): the instances that share
//! stick tables over the peers protocol (the `peers` module runs them).
//!
//! ```text
//! peers NAME
//!     peer NAME IP:PORT          # the local one: where to listen
//!     server NAME [IP:PORT]      # 2.x form; the local one has no address...
//!     bind IP:PORT | fd@N        # ...and listens on this line's address
//!                                #    (fd@N: a socket handed over open)
//!     disabled | enabled
//!     table T type ... size N [expire T] [nopurge] [store ...]
//! ```
//!
//! A `table T` line declares a stick table shared with the section's
//! peers, called `SECTION/T` in the configuration (`track-sc0 src table
//! SECTION/T`, `show table SECTION/T`) and `/T` on the peers protocol:
//! HAProxy 2.6 sends what follows the section's name, slash included
//! (checked against it), so such a table meets the same `table` line on
//! the other side, not a proxy's table called `T`.
//!
//! The local peer is the one named as `-L`, else `localpeer`, else the
//! host name. `server`/`peer` and `default-server` lines take the TLS
//! options of a proxy's `server` line (`ssl`, `crt`, `verify`, `ca-file`...),
//! the `bind` line those of a proxy's `bind` line (`ssl crt FILE`...):
//! peers then talk over TLS. Other parameters, `default-bind` and `log`
//! lines are refused with `file:line`.

use std::net::SocketAddr;
use std::sync::OnceLock;

use super::types::{Loc, Spanned};

/// One `peer` (or `server`) line.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PeerDef {
    pub name: String,
    /// Where to reach it (None: a `server` line without address, the
    /// local peer listening on the `bind` line).
    pub addr: Option<SocketAddr>,
    pub loc: Loc,
    /// `ssl` (with the `default-server` line's options): the TLS options
    /// of connections to it.
    pub tls: Option<super::ServerOptions>,
}

/// Where the local peer listens: an address to bind, or a socket the
/// program was handed open (`bind fd@N`, as VTest and systemd pass them).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PeerListen {
    Addr(SocketAddr),
    Fd(i32),
}

/// A `peers` section.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PeersSection {
    pub name: String,
    pub loc: Loc,
    /// `disabled`: no listening, no synchronisation.
    pub disabled: bool,
    pub peers: Vec<PeerDef>,
    /// The `bind` line's address (2.x form).
    pub bind: Option<Spanned<PeerListen>>,
    /// Whether `peer` lines (not `server` lines) were used: HAProxy
    /// refuses `bind` with them.
    pub(crate) old_style: Option<Loc>,
    /// `table` lines: tables shared with this section's peers.
    pub tables: Vec<Spanned<crate::table::TableDef>>,
    /// `bind ... ssl`: the local peer's TLS settings.
    pub bind_ssl: Option<super::BindSsl>,
    /// `default-server`: the options the `server` and `peer` lines after
    /// it start from.
    pub(crate) defaults: super::ServerOptions,
}

impl PeersSection {
    pub fn new(name: &str, loc: Loc) -> PeersSection {
        PeersSection {
            name: name.to_string(),
            loc,
            disabled: false,
            peers: Vec::new(),
            bind: None,
            old_style: None,
            tables: Vec::new(),
            bind_ssl: None,
            defaults: super::ServerOptions::default(),
        }
    }

    /// The peer called `name`.
    pub fn peer(&self, name: &str) -> Option<&PeerDef> {
        self.peers.iter().find(|p| p.name == name)
    }

    /// Where the local peer `local` listens, if it is in this section.
    pub fn listen_addr(&self, local: &str) -> Option<PeerListen> {
        let p = self.peer(local)?;
        p.addr
            .map(PeerListen::Addr)
            .or(self.bind.as_ref().map(|b| b.value))
    }
}

/// `-L NAME` from the command line, which beats `localpeer` (set once by
/// the program before the configuration is read).
static LOCAL_PEER_ARG: OnceLock<String> = OnceLock::new();

/// Records `-L NAME`.
pub fn set_local_peer_arg(name: &str) {
    let _ = LOCAL_PEER_ARG.set(name.to_string());
}

/// The local peer name: `-L`, else `localpeer`, else the host name (as
/// HAProxy).
pub fn local_peer_name(localpeer: Option<&str>) -> String {
    if let Some(n) = LOCAL_PEER_ARG.get() {
        return n.clone();
    }
    if let Some(n) = localpeer {
        return n.to_string();
    }
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .map(|h| h.trim().to_string())
        .unwrap_or_else(|_| "localhost".to_string())
}

fn addr(s: &str) -> Result<SocketAddr, String> {
    if super::values::env_expand(s) == ":" {
        // No host and no port (two unset variables): HAProxy takes it as
        // the any address, port 0, where no peer is ever reached.
        return Ok(SocketAddr::from(([0, 0, 0, 0], 0)));
    }
    let a = super::parse_bind_addrs(s)?;
    match a.as_slice() {
        [one] if one.port() != 0 => Ok(*one),
        [_] => Err(format!("'{s}': a peer address needs a port")),
        _ => Err(format!("'{s}': one address and one port expected")),
    }
}

/// The `server` options a peer line takes: its TLS ones (the others
/// concern proxies' servers; HAProxy ignores most of them on a peer).
/// `Some(true)`: one that takes a value.
fn peer_tls_word(w: &str) -> Option<bool> {
    match w {
        "ssl" | "no-ssl" | "no-sslv3" | "no-tlsv10" | "no-tlsv11" | "no-tlsv12" | "no-tlsv13"
        | "force-tlsv12" | "force-tlsv13" | "no-tls-tickets" => Some(false),
        "crt" | "verify" | "ca-file" | "crl-file" | "ciphers" | "ciphersuites" | "verifyhost"
        | "ssl-min-ver" | "ssl-max-ver" => Some(true),
        _ => None,
    }
}

/// Where the options of a `server`/`peer`/`default-server` line start
/// (after its name and address), checked to be TLS options ebb applies to
/// peers.
pub(crate) fn peer_opts_start(w: &[String]) -> Result<usize, String> {
    let kw = w[0].as_str();
    let start = match kw {
        "default-server" => 1,
        // The address is optional on a `server` line (the local peer).
        _ => match w.get(2) {
            Some(a) if peer_tls_word(a).is_none() => 3,
            _ => 2,
        },
    };
    let mut i = start;
    while let Some(o) = w.get(i) {
        match peer_tls_word(o) {
            Some(v) => i += 1 + usize::from(v),
            None => {
                return Err(format!(
                    "'{kw}' parameter '{o}' is not supported by ebb in a peers section (supported: ssl and its TLS options: crt, verify, ca-file, crl-file, ciphers, ciphersuites, verifyhost, ssl-min-ver, ssl-max-ver, no-tls-tickets...)"
                ))
            }
        }
    }
    Ok(start)
}

/// Where the options of a peers section's `bind` line start, checked to
/// be TLS options (`ssl`, `crt`, `crt-list`, `key` and the TLS bind
/// options).
pub(crate) fn bind_opts_check(w: &[String]) -> Result<(), String> {
    let mut i = 2;
    while let Some(o) = w.get(i) {
        let mut scratch = super::BindSsl::default();
        let next = w.get(i + 1).map(String::as_str);
        i += match o.as_str() {
            "ssl" | "strict-sni" => 1,
            "crt" | "crt-list" | "key" => 2,
            _ => match super::tls_bind_option(
                o,
                next,
                super::TlsOptionsOf::BindLine,
                &mut scratch,
                &|p: &str| std::path::PathBuf::from(p),
            )? {
                Some(n) => 1 + n,
                None => {
                    return Err(format!(
                        "'bind' parameter '{o}' is not supported by ebb in a peers section (supported: ssl and its TLS options)"
                    ))
                }
            },
        };
    }
    Ok(())
}

/// One line of a `peers` section.
pub(crate) fn peers_kw(s: &mut PeersSection, w: &[String], loc: &Loc) -> Result<(), String> {
    let kw = w[0].as_str();
    let name_ok = |n: &str| {
        !n.is_empty()
            && n.bytes()
                .all(|c| c.is_ascii_alphanumeric() || b"-_.:".contains(&c))
    };
    match kw {
        "peer" | "server" => {
            let Some(name) = w.get(1) else {
                return Err(format!("'{kw}' needs a peer name"));
            };
            if !name_ok(name) {
                return Err(format!("invalid peer name '{name}'"));
            }
            if let Some(p) = s.peer(name) {
                return Err(format!(
                    "peer '{name}' is already declared in peers section '{}' at {}",
                    s.name, p.loc
                ));
            }
            let a = match (kw, w.get(2)) {
                ("peer", None) => return Err("'peer' needs an address (IP:PORT)".into()),
                (_, Some(a)) => Some(addr(a)?),
                ("server", None) => None,
                _ => None,
            };
            if let Some(x) = w.get(3) {
                return Err(format!(
                    "'{kw}' parameter '{x}' is not supported by ebb in a peers section"
                ));
            }
            if kw == "peer" {
                if let Some(b) = &s.bind {
                    return Err(format!(
                        "'peer' lines cannot be mixed with the 'bind' line at {} (use 'server')",
                        b.loc
                    ));
                }
                s.old_style.get_or_insert_with(|| loc.clone());
            }
            s.peers.push(PeerDef {
                name: name.clone(),
                addr: a,
                loc: loc.clone(),
                tls: None,
            });
            Ok(())
        }
        "bind" => {
            let Some(a) = w.get(1) else {
                return Err("'bind' needs an address (IP:PORT)".into());
            };
            if let Some(x) = w.get(2) {
                return Err(format!(
                    "'bind' parameter '{x}' is not supported by ebb in a peers section"
                ));
            }
            if let Some(o) = &s.old_style {
                return Err(format!(
                    "'bind' is not supported with the 'peer' line at {o} (use 'server')"
                ));
            }
            if let Some(b) = &s.bind {
                return Err(format!("only one 'bind' line (the first is at {})", b.loc));
            }
            let value = match super::parse::parse_sock_spec(a) {
                None => PeerListen::Addr(addr(a)?),
                Some(Ok(super::SockSpec::Fd(n))) => PeerListen::Fd(n),
                Some(Ok(_)) => {
                    return Err(format!(
                        "'bind {a}': a peers section listens on IP:PORT or fd@N only"
                    ))
                }
                Some(Err(e)) => return Err(e),
            };
            s.bind = Some(Spanned {
                value,
                loc: loc.clone(),
            });
            Ok(())
        }
        "disabled" | "enabled" => {
            if w.len() > 1 {
                return Err(format!("'{kw}' takes no argument"));
            }
            s.disabled = kw == "disabled";
            Ok(())
        }
        "table" => {
            let Some(t) = w.get(1) else {
                return Err("'table' needs a table name".into());
            };
            if !name_ok(t) {
                return Err(format!("invalid table name '{t}'"));
            }
            let name = format!("{}/{t}", s.name);
            if let Some(o) = s.tables.iter().find(|x| x.value.name == name) {
                return Err(format!("table '{t}' is already declared at {}", o.loc));
            }
            let words: Vec<&str> = w[2..].iter().map(String::as_str).collect();
            if words.contains(&"peers") {
                return Err(format!(
                    "'table {t}': 'peers' is implied by the peers section '{}'",
                    s.name
                ));
            }
            let mut def = crate::table::parse_stick_table(&name, &words).map_err(|e| e.0)?;
            def.peers = Some(s.name.clone());
            def.wire_name = Some(format!("/{t}"));
            s.tables.push(Spanned {
                value: def,
                loc: loc.clone(),
            });
            Ok(())
        }
        "default-bind" | "log" | "shards" => {
            Err(format!("'{kw}' in a peers section is not supported by ebb"))
        }
        _ => Err(format!("unknown keyword '{kw}' in peers section")),
    }
}

/// Checks the `table` lines of the sections once the whole configuration
/// is read, as HAProxy 2.6: a table name must not be the name of a
/// proxy's table (`proxy_tables`: names and lines), and the section must
/// hold the local peer `local`. Tables of a `disabled` section are not
/// shared.
pub(crate) fn check_tables(
    sections: &mut [PeersSection],
    proxy_tables: &[(String, Loc)],
    local: &str,
) -> Vec<(Loc, String)> {
    let mut errs = Vec::new();
    for s in sections.iter_mut() {
        let has_local = s.peer(local).is_some();
        for t in &mut s.tables {
            let short = t.value.wire_name().trim_start_matches('/').to_string();
            if let Some((_, at)) = proxy_tables.iter().find(|(n, _)| *n == short) {
                errs.push((
                    t.loc.clone(),
                    format!("stick-table name '{short}' conflicts with the table declared at {at}"),
                ));
            }
            if s.disabled {
                t.value.peers = None;
            } else if !has_local {
                errs.push((
                    t.loc.clone(),
                    format!(
                        "table '{short}': unable to find local peer '{local}' in peers section '{}' (the local peer is named by -L, 'localpeer' or the host name)",
                        s.name
                    ),
                ));
            }
        }
    }
    errs
}

/// Checks the sections against the tables that name them, once the whole
/// configuration is read; `local` is the local peer name. Tables of a
/// `disabled` section lose their `peers` (HAProxy disables them silently).
pub(crate) fn check(
    sections: &[PeersSection],
    tables: &mut [(&str, &mut Spanned<crate::table::TableDef>)],
    local: &str,
) -> Vec<(Loc, String)> {
    let mut errs = Vec::new();
    for (i, s) in sections.iter().enumerate() {
        if let Some(q) = sections[..i].iter().find(|q| q.name == s.name) {
            errs.push((
                s.loc.clone(),
                format!(
                    "peers section '{}' is already declared at {}",
                    s.name, q.loc
                ),
            ));
        }
        if let Some(p) = s.peer(local) {
            if p.addr.is_none() && s.bind.is_none() {
                errs.push((
                    p.loc.clone(),
                    format!("local peer '{local}' has no address: give one or add a 'bind' line"),
                ));
            }
        }
        for p in &s.peers {
            if p.name != local && p.addr.is_none() {
                errs.push((
                    p.loc.clone(),
                    format!("remote peer '{}' needs an address (IP:PORT)", p.name),
                ));
            }
        }
    }
    for (proxy, t) in tables.iter_mut() {
        let Some(name) = t.value.peers.clone() else {
            continue;
        };
        match sections.iter().find(|s| s.name == name) {
            None => errs.push((
                t.loc.clone(),
                format!("stick-table of '{proxy}': unknown peers section '{name}'"),
            )),
            Some(s) if s.disabled => t.value.peers = None,
            Some(s) if s.peer(local).is_none() => errs.push((
                t.loc.clone(),
                format!(
                    "stick-table of '{proxy}': unable to find local peer '{local}' in peers section '{name}' (the local peer is named by -L, 'localpeer' or the host name)"
                ),
            )),
            Some(_) => {}
        }
    }
    errs
}
