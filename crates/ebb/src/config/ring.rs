//! `ring` sections (HAProxy 2.6's section 3.9): named buffers that `log
//! ring@NAME` lines write to, which `show events NAME` prints and which
//! `server` lines forward to syslog servers over TCP.
//!
//! ```text
//! ring NAME
//!     description TEXT        # shown by `show events` (default: NAME)
//!     format FMT              # the header written before each message (raw)
//!     maxlen N                # a message's longest, header included (16384)
//!     size N                  # the buffer's bytes (16384, never less)
//!     timeout connect TIME    # a forwarding connection's connect limit
//!     timeout server TIME     # how long a write may wait
//!     server NAME IP:PORT [log-proto legacy|octet-count]
//! ```
//!
//! HAProxy reads `size` and `maxlen` with `atol()` (`16k` is 16): ebb takes
//! plain numbers only. A `log tcp@HOST:PORT` line gets a ring of its own,
//! as in HAProxy: `ring#N` (N counts such lines in reading order), of the
//! default size, in the line's format, with one server, its description
//! `created from logserver declared into 'FILE' at line L`.

use std::cell::RefCell;
use std::net::SocketAddr;
use std::time::Duration;

use super::types::{Loc, LogFormat};

/// HAProxy's BUFSIZE: a ring's default and smallest size, and the default
/// `maxlen`.
pub const DEFAULT_SIZE: usize = 16_384;

/// A `server` line of a ring.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RingServer {
    pub name: String,
    pub addr: SocketAddr,
    /// `log-proto octet-count`: each message sent as `LEN MSG` (RFC 6587
    /// octet counting); else `legacy`: `MSG\n`.
    pub octet_count: bool,
    pub loc: Loc,
}

/// A `ring` section (or the ring of a `tcp@` log target).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RingSection {
    pub name: String,
    pub loc: Loc,
    pub description: String,
    pub format: LogFormat,
    pub maxlen: usize,
    pub size: usize,
    /// `None`: no limit (HAProxy's eternity).
    pub timeout_connect: Option<Duration>,
    pub timeout_server: Option<Duration>,
    pub servers: Vec<RingServer>,
}

thread_local! {
    /// The rings of `tcp@` targets read so far (the parser runs on one
    /// thread; [`reset`] starts a new count).
    static IMPLICIT: RefCell<Vec<RingSection>> = const { RefCell::new(Vec::new()) };
}

/// Forgets the `tcp@` rings of an earlier parse.
pub(crate) fn reset() {
    IMPLICIT.with(|i| i.borrow_mut().clear());
}

/// The `tcp@` rings read since [`reset`].
pub(crate) fn take_implicit() -> Vec<RingSection> {
    IMPLICIT.with(|i| std::mem::take(&mut *i.borrow_mut()))
}

/// Makes the ring of a `log tcp@ADDR` line; returns its name.
pub(crate) fn implicit(addr: SocketAddr, format: LogFormat, _len: u32, loc: &Loc) -> String {
    IMPLICIT.with(|i| {
        let mut i = i.borrow_mut();
        let name = format!("ring#{}", i.len() + 1);
        i.push(RingSection {
            name: name.clone(),
            loc: loc.clone(),
            description: format!(
                "created from logserver declared into '{}' at line {}",
                loc.file, loc.line
            ),
            format,
            maxlen: DEFAULT_SIZE,
            size: DEFAULT_SIZE,
            timeout_connect: None,
            timeout_server: None,
            servers: vec![RingServer {
                name: name.clone(),
                addr,
                octet_count: false,
                loc: loc.clone(),
            }],
        });
        name
    })
}

/// Opens a section at its `ring NAME` header.
pub(crate) fn open(known: &[RingSection], w: &[String], loc: &Loc) -> Result<RingSection, String> {
    let name = match w {
        [_] => return Err("missing ring name".into()),
        [_, n] => n,
        _ => return Err("'ring' takes one name".into()),
    };
    if let Some(c) = name
        .chars()
        .find(|c| !(c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.' | ':')))
    {
        return Err(format!(
            "invalid ring name '{name}' (character '{c}' is not permitted)"
        ));
    }
    if matches!(name.as_str(), "buf0" | "stdout" | "stderr")
        || known.iter().any(|r| &r.name == name)
    {
        return Err(format!("sink named '{name}' already exists"));
    }
    Ok(RingSection {
        name: name.clone(),
        loc: loc.clone(),
        description: name.clone(),
        format: LogFormat::Raw,
        maxlen: DEFAULT_SIZE,
        size: DEFAULT_SIZE,
        timeout_connect: None,
        timeout_server: None,
        servers: Vec::new(),
    })
}

/// A plain positive number (`size`, `maxlen`).
fn count(kw: &str, v: Option<&String>) -> Result<usize, String> {
    let v = v.ok_or_else(|| format!("'{kw}' expects a number of bytes"))?;
    v.parse::<usize>()
        .ok()
        .filter(|n| *n > 0 && *n <= 1 << 30)
        .ok_or_else(|| {
            format!("invalid {kw} '{v}' for the ring (a number of bytes, no unit, 1 to 1073741824)")
        })
}

/// One line of a `ring` section.
pub(crate) fn ring_kw(r: &mut RingSection, w: &[String], loc: &Loc) -> Result<(), String> {
    let extra = |n: usize| match w.get(n) {
        Some(x) => Err(format!("'{}': unexpected word '{x}'", w[0])),
        None => Ok(()),
    };
    match w[0].as_str() {
        "description" => {
            let d = w.get(1).filter(|d| !d.is_empty());
            r.description = d.ok_or("missing ring description text")?.clone();
            extra(2)
        }
        "format" => {
            let f = w.get(1).ok_or("'format' expects a log format")?;
            r.format = LogFormat::from_name(f).ok_or_else(|| format!("unknown format '{f}'"))?;
            extra(2)
        }
        "maxlen" => {
            r.maxlen = count("maxlen", w.get(1))?;
            extra(2)
        }
        "size" => {
            // HAProxy only ever grows a ring past its default size.
            r.size = count("size", w.get(1))?.max(DEFAULT_SIZE);
            extra(2)
        }
        "timeout" => {
            let which = w.get(1).map(String::as_str);
            let t = match which {
                Some("connect") | Some("server") => w
                    .get(2)
                    .ok_or_else(|| format!("'timeout {}' expects <time> as argument", w[1]))?,
                Some(o) => {
                    return Err(format!(
                        "'timeout {o}' is not a ring timeout (connect or server)"
                    ))
                }
                None => return Err("'timeout' expects 'connect' or 'server'".into()),
            };
            let d = super::values::parse_time(t)?;
            let d = (!d.is_zero()).then_some(d);
            if which == Some("connect") {
                r.timeout_connect = d;
            } else {
                r.timeout_server = d;
            }
            extra(3)
        }
        "server" => {
            let (name, addr) = match w {
                [_, n, a, ..] => (n, a),
                _ => return Err("'server' expects <name> and <addr>:<port> as arguments".into()),
            };
            if r.servers.iter().any(|s| &s.name == name) {
                return Err(format!("ring '{}' has two servers named '{name}'", r.name));
            }
            let a = addr.strip_prefix("tcp@").unwrap_or(addr);
            let (host, port) =
                super::values::parse_host_port(a).map_err(|e| format!("server '{name}': {e}"))?;
            // Resolved now, as HAProxy does for a ring's server.
            let addr = std::net::ToSocketAddrs::to_socket_addrs(&(host.as_str(), port))
                .ok()
                .and_then(|mut it| it.next())
                .ok_or_else(|| format!("server '{name}': cannot resolve '{host}'"))?;
            let mut octet_count = false;
            let mut i = 3;
            while let Some(k) = w.get(i) {
                match k.as_str() {
                    "log-proto" => {
                        octet_count = match w.get(i + 1).map(String::as_str) {
                            Some("legacy") => false,
                            Some("octet-count") => true,
                            _ => {
                                return Err(
                                    "'log-proto' expects one of 'legacy' or 'octet-count'".into()
                                )
                            }
                        };
                        i += 2;
                    }
                    o => {
                        return Err(format!(
                            "server '{name}': '{o}' is not supported on a ring's server (ebb takes 'log-proto' only)"
                        ))
                    }
                }
            }
            r.servers.push(RingServer {
                name: name.clone(),
                addr,
                octet_count,
                loc: loc.clone(),
            });
            Ok(())
        }
        o => Err(format!("unknown statement '{o}' in ring section")),
    }
}

/// The end of a section: a `maxlen` above the size is the size (HAProxy
/// warns and does so).
pub(crate) fn close(r: &mut RingSection) {
    r.maxlen = r.maxlen.min(r.size);
}
