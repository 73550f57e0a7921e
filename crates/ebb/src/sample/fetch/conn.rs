//! The connection fetches of HAProxy 2.6 (configuration.txt 7.3.3) that
//! read the sockets themselves: the client connection's `TCP_INFO`
//! (`fc_rtt`, `fc_rttvar`, `fc_unacked`...), whether an address is the
//! system's own (`src_is_local`, `dst_is_local` and their `fc_` forms),
//! the HTTP version each side's connection speaks (`fc_http_major`,
//! `bc_http_major`), and the server connection's peer and error
//! (`bc_dst`, `bc_dst_port`, `bc_err`, `bc_err_str`).
//!
//! HAProxy reads `TCP_INFO` only for a stream: in `tcp-request
//! connection` and `session` rules ([`Ctx::early`]) these give nothing.

use std::os::fd::AsRawFd;

use crate::sample::{Ctx, Scratch, Type, Val};

/// A `TCP_INFO` field.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(in crate::sample) enum Info {
    Rtt,
    Rttvar,
    Unacked,
    Sacked,
    Lost,
    Retrans,
    Fackets,
    Reordering,
}

#[derive(Clone, Debug)]
pub(in crate::sample) enum Conn {
    /// A `TCP_INFO` field of the client connection; `ms`: a time in
    /// milliseconds (rounded), else microseconds.
    TcpInfo(Info, bool),
    /// `src_is_local` (`dst`: `dst_is_local`), of the stream's addresses
    /// or with `fc` the connection's.
    IsLocal { dst: bool, fc: bool },
    /// `fc_http_major`, `bc_http_major` (`back`).
    HttpMajor { back: bool },
    /// `bc_dst`, `bc_dst_port` (`port`).
    BcDst { port: bool },
    /// `bc_err`, `bc_err_str` (`text`).
    BcErr { text: bool },
}

impl Conn {
    /// The fetch named `name`, when it is one of these; `Err` for bad
    /// arguments.
    pub(super) fn compile(name: &str, args: &[String]) -> Option<Result<Conn, String>> {
        let none = |f: Conn| -> Result<Conn, String> {
            if !args.is_empty() {
                return Err(format!("fetch '{name}' takes no argument"));
            }
            Ok(f)
        };
        let info = match name {
            "fc_rtt" => Some(Info::Rtt),
            "fc_rttvar" => Some(Info::Rttvar),
            "fc_unacked" => Some(Info::Unacked),
            "fc_sacked" => Some(Info::Sacked),
            "fc_lost" => Some(Info::Lost),
            "fc_retrans" => Some(Info::Retrans),
            "fc_fackets" => Some(Info::Fackets),
            "fc_reordering" => Some(Info::Reordering),
            _ => None,
        };
        if let Some(i) = info {
            if args.len() > 1 {
                return Some(Err(format!("fetch '{name}' takes at most 1 argument")));
            }
            if matches!(i, Info::Rtt | Info::Rttvar) {
                // HAProxy's val_fc_time_value.
                let ms = match args.first().map(String::as_str) {
                    None | Some("ms") => true,
                    Some("us") => false,
                    Some(o) => {
                        return Some(Err(format!(
                            "fetch '{name}': expects 'us' or 'ms', got '{o}'"
                        )))
                    }
                };
                return Some(Ok(Conn::TcpInfo(i, ms)));
            }
            // A counter: HAProxy takes an argument and ignores it (with a
            // warning), for older configurations' sake.
            return Some(Ok(Conn::TcpInfo(i, false)));
        }
        Some(match name {
            "src_is_local" | "dst_is_local" | "fc_src_is_local" | "fc_dst_is_local" => {
                none(Conn::IsLocal {
                    dst: name.contains("dst"),
                    fc: name.starts_with("fc_"),
                })
            }
            "fc_http_major" => none(Conn::HttpMajor { back: false }),
            "bc_http_major" => none(Conn::HttpMajor { back: true }),
            "bc_dst" | "bc_dst_port" => none(Conn::BcDst {
                port: name.ends_with("_port"),
            }),
            "bc_err" | "bc_err_str" => none(Conn::BcErr {
                text: name.ends_with("_str"),
            }),
            _ => return None,
        })
    }

    /// Whether it reads the server connection (not there before the
    /// response: refused in request rules, as HAProxy refuses them).
    pub(super) fn reads_server_conn(&self) -> bool {
        matches!(
            self,
            Conn::HttpMajor { back: true } | Conn::BcDst { .. } | Conn::BcErr { .. }
        )
    }

    pub(super) fn out_type(&self) -> Type {
        match self {
            Conn::IsLocal { .. } => Type::Bool,
            Conn::BcErr { text: true } => Type::Str,
            // HAProxy declares `bc_dst` an integer (it gives an address).
            _ => Type::Int,
        }
    }

    pub(super) fn eval(&self, ctx: &Ctx<'_>, s: &mut Scratch) -> Option<Val> {
        match self {
            Conn::TcpInfo(which, ms) => {
                if ctx.early {
                    return None;
                }
                let i = crate::sys::conn_tcp_info(ctx.fc?.as_raw_fd())?;
                let v = match which {
                    Info::Rtt => i.rtt,
                    Info::Rttvar => i.rttvar,
                    Info::Unacked => i.unacked,
                    Info::Sacked => i.sacked,
                    Info::Lost => i.lost,
                    Info::Retrans => i.retrans,
                    Info::Fackets => i.fackets,
                    Info::Reordering => i.reordering,
                };
                let v = i64::from(v);
                Some(Val::Int(if *ms { (v + 500) / 1000 } else { v }))
            }
            Conn::IsLocal { dst, fc } => {
                let a = match (dst, fc) {
                    (false, false) => ctx.src_addr(),
                    (true, false) => ctx.dst_addr()?,
                    (d, true) => super::eval::fc_addr(ctx, *d)?,
                };
                is_local(a.ip()).map(Val::Bool)
            }
            Conn::HttpMajor { back: false } => {
                // A tcp session's connection has no HTTP mux.
                let st = ctx.vars?.try_borrow().ok()?;
                if st.requests == 0 {
                    return None;
                }
                Some(Val::Int(if st.h2 { 2 } else { 1 }))
            }
            Conn::HttpMajor { back: true } => {
                ctx.srv?;
                let st = ctx.vars?.try_borrow().ok()?;
                if st.requests == 0 {
                    return None;
                }
                Some(Val::Int(if st.info.srv_h2 { 2 } else { 1 }))
            }
            Conn::BcDst { port } => {
                ctx.srv?;
                let a = ctx.vars?.try_borrow().ok()?.info.srv_addr?;
                Some(if *port {
                    Val::Int(i64::from(a.port()))
                } else {
                    Val::Ip(a.ip())
                })
            }
            // A server connection that was set up has no error (HAProxy's
            // `CO_ER_NONE`, "Success"); one that failed is gone from the
            // stream, and so is the sample.
            Conn::BcErr { text } => {
                ctx.srv?;
                if !ctx.vars?.try_borrow().ok()?.info.srv_connected {
                    return None;
                }
                if *text {
                    s.cur.clear();
                    s.cur.extend_from_slice(b"Success");
                    return Some(Val::Str);
                }
                Some(Val::Int(0))
            }
        }
    }
}

/// HAProxy's `addr_is_local`: the address can be bound on this system (a
/// UDP socket bound to it, port 0, can connect to it); `None` when the
/// kernel answers something else than "not available".
fn is_local(ip: std::net::IpAddr) -> Option<bool> {
    let a = std::net::SocketAddr::new(ip, 0);
    match std::net::UdpSocket::bind(a) {
        Ok(u) => Some(u.connect(a).is_ok()),
        Err(e) if e.kind() == std::io::ErrorKind::AddrNotAvailable => Some(false),
        Err(_) => None,
    }
}
