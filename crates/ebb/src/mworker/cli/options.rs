//! The `-S` argument: the master CLI's address and bind options.

use std::io;
use std::path::PathBuf;

use socket2::Socket;

use super::super::unix_path;
use crate::config::{CliLevel, StatsSocket};

/// A bound master CLI socket.
pub(in crate::mworker) struct McliSocket {
    pub(in crate::mworker) s: Socket,
    /// The socket file it created, if any.
    pub(in crate::mworker) path: Option<PathBuf>,
    pub(in crate::mworker) level: CliLevel,
}

/// Reads one `-S` argument as HAProxy does: the address, then bind
/// options separated by commas (a run of commas counts as one).
pub(super) fn parse_mcli(arg: &str) -> Result<StatsSocket, String> {
    let mut parts = arg.split(',').filter(|p| !p.is_empty());
    let addr = arg.split(',').next().unwrap_or_default();
    parts.next();
    let words: Vec<&str> = parts.collect();
    let mut s = StatsSocket {
        path: addr.to_string(),
        mode: None,
        owner: (None, None),
        level: CliLevel::Admin,
        nice: None,
        expose_fd: false,
        loc: crate::config::Loc {
            file: std::sync::Arc::from("-S"),
            line: 0,
        },
    };
    let unix = unix_path(addr).is_some();
    let mut i = 0;
    while i < words.len() {
        let o = words[i];
        let v = words.get(i + 1).copied();
        // HAProxy names the address and the first option, whichever
        // option is wrong.
        let err = |m: String| format!("'{addr} {}' : '{m}'", words[0]);
        match o {
            "level" => {
                s.level = match v {
                    Some(x) => CliLevel::from_name(x).ok_or_else(|| {
                        err(format!(
                            "'level' only supports 'user', 'operator', and 'admin' (got '{x}')"
                        ))
                    })?,
                    None => return Err(err("'level' : missing level".into())),
                }
            }
            "expose-fd" => match v {
                // Accepted as HAProxy does; the master CLI has no
                // `_getsocks`, so it changes nothing there.
                Some("listeners") => s.expose_fd = true,
                Some(x) => {
                    return Err(err(format!(
                        "'expose-fd' only supports 'listeners' (got '{x}')"
                    )))
                }
                None => return Err(err("'expose-fd' : missing value".into())),
            },
            "mode" | "user" | "group" | "uid" | "gid" => {
                let Some(v) = v else {
                    return Err(err(format!("'{o}' : missing value")));
                };
                if !unix {
                    return Err(err(format!(
                        "'{o}' applies to a UNIX socket path only"
                    )));
                }
                if o == "mode" {
                    s.mode = Some(crate::config::parse_octal_mode(v).map_err(|_| {
                        err(format!(
                            "'mode' : missing or invalid mode '{v}' (octal integer expected)"
                        ))
                    })?);
                } else {
                    crate::config::unix_owner_opt(o, v, &mut s.owner).map_err(|e| {
                        if e.starts_with("unknown") {
                            // HAProxy's words.
                            err(format!("'{o}' : unknown {o} name '{v}'"))
                        } else {
                            err(format!("'{o}' : {e}"))
                        }
                    })?;
                }
            }
            "severity-output" | "accept-proxy" | "name" | "id" | "maxconn" | "backlog"
            | "nice" | "process" | "thread" | "ssl" | "crt" | "interface" | "namespace"
            | "transparent" | "v4v6" | "v6only" | "defer-accept" | "tfo" | "mss" => {
                return Err(err(format!(
                    "'{o}' is not supported on the master CLI (ebb takes mode, user, group, uid, gid, level and expose-fd there)"
                )))
            }
            _ => return Err(format!("'{addr} {}' : unknown keyword '{o}'.", words[0])),
        }
        i += 2;
    }
    Ok(s)
}

/// Binds one `-S` argument.
pub(in crate::mworker) fn bind_mcli(arg: &str) -> io::Result<McliSocket> {
    let spec = parse_mcli(arg).map_err(|e| io::Error::new(io::ErrorKind::InvalidInput, e))?;
    if let Some(s) = crate::handover::take_cli(&format!("mcli:{arg}")) {
        return Ok(McliSocket {
            s,
            path: unix_path(&spec.path),
            level: spec.level,
        });
    }
    let c = crate::cli::socket::bind(&spec)?;
    Ok(McliSocket {
        s: c.listener,
        path: c.path,
        level: spec.level,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn master_cli_options_are_read_as_haproxy_does() {
        let s = parse_mcli("/x.sock,,mode,600,level,operator,expose-fd,listeners").unwrap();
        assert_eq!(
            (s.mode, s.level, s.expose_fd),
            (Some(0o600), CliLevel::Operator, true)
        );
        assert_eq!(
            parse_mcli("/x.sock,mode,600,level,foo").unwrap_err(),
            "'/x.sock mode' : ''level' only supports 'user', 'operator', and 'admin' (got 'foo')'"
        );
        assert_eq!(
            parse_mcli("/x.sock,foo").unwrap_err(),
            "'/x.sock foo' : unknown keyword 'foo'."
        );
        assert!(parse_mcli("127.0.0.1:1,mode,600").is_err());
        assert_eq!(
            parse_mcli("/x.sock,uid,7,gid,8").unwrap().owner,
            (Some(7), Some(8))
        );
    }
}
