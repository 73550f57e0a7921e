//! Small network value types shared by the configuration and the sample
//! engine (which must not import each other): IP networks and HTTP tokens,
//! and the socket options proxies ask for (TCP keep-alive, no linger), an
//! I/O error in HAProxy's words; and [`WakeTask`], the readiness tasklet of a
//! task that owns a socket.

use std::net::{IpAddr, Ipv4Addr};

/// An IP network: address and prefix length.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct IpNet {
    pub addr: IpAddr,
    pub prefix: u8,
}

impl IpNet {
    /// Whether `ip` is inside this network, across families as HAProxy's
    /// `pat_match_ip`: an IPv4 address is also `::ffff:a.b.c.d` for an IPv6
    /// network, and an IPv6 address of the forms `::ffff:a.b.c.d`,
    /// `::a.b.c.d` and `2002:aabb:ccdd::` (6to4) is also that IPv4 address
    /// for an IPv4 network.
    pub fn contains(&self, ip: IpAddr) -> bool {
        let ip = match (self.addr, ip) {
            (IpAddr::V4(_), IpAddr::V6(v6)) => {
                let n = u128::from(v6);
                if n >> 32 == 0 || n >> 32 == 0xffff {
                    IpAddr::V4(Ipv4Addr::from(n as u32))
                } else if n >> 112 == 0x2002 {
                    IpAddr::V4(Ipv4Addr::from((n >> 80) as u32))
                } else {
                    return false;
                }
            }
            (IpAddr::V6(_), IpAddr::V4(v4)) => IpAddr::V6(v4.to_ipv6_mapped()),
            _ => ip,
        };
        match (self.addr, ip) {
            (IpAddr::V4(net), IpAddr::V4(a)) => {
                let mask = if self.prefix == 0 {
                    0
                } else {
                    u32::MAX << (32 - u32::from(self.prefix))
                };
                u32::from(net) & mask == u32::from(a) & mask
            }
            (IpAddr::V6(net), IpAddr::V6(a)) => {
                let mask = if self.prefix == 0 {
                    0
                } else {
                    u128::MAX << (128 - u32::from(self.prefix))
                };
                u128::from(net) & mask == u128::from(a) & mask
            }
            _ => false,
        }
    }
}

/// An IP address or network `ADDR[/PREFIX]` (also a dotted IPv4 mask).
pub fn parse_ipnet(s: &str) -> Result<IpNet, String> {
    let (a, p) = match s.split_once('/') {
        Some((a, p)) => (a, Some(p)),
        None => (s, None),
    };
    let addr: IpAddr = a
        .parse()
        .map_err(|_| format!("invalid IP address '{a}' in '{s}'"))?;
    let max: u8 = if addr.is_ipv4() { 32 } else { 128 };
    let prefix = match p {
        None => max,
        Some(p) if p.contains('.') && addr.is_ipv4() => {
            let m: Ipv4Addr = p
                .parse()
                .map_err(|_| format!("invalid network mask '{p}' in '{s}'"))?;
            let m = u32::from(m);
            let ones = m.leading_ones();
            if m.checked_shl(ones).unwrap_or(0) != 0 {
                return Err(format!("non-contiguous network mask '{p}' in '{s}'"));
            }
            ones as u8
        }
        Some(p) => match p.parse::<u8>() {
            Ok(n) if n <= max && p.bytes().all(|b| b.is_ascii_digit()) => n,
            _ => return Err(format!("invalid prefix length '{p}' in '{s}'")),
        },
    };
    Ok(IpNet { addr, prefix })
}

/// An HTTP token (RFC 9110 `tchar`), as for header names and methods.
pub fn is_token(s: &str) -> bool {
    !s.is_empty()
        && s.bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b))
}

/// TCP keep-alive of one side of a proxy (HAProxy's `option clitcpka` or
/// `srvtcpka` and their `-idle`, `-intvl`, `-cnt` keywords): `None`
/// leaves the system's value.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct TcpKa {
    /// SO_KEEPALIVE.
    pub on: bool,
    /// TCP_KEEPIDLE, seconds.
    pub idle: Option<u32>,
    /// TCP_KEEPINTVL, seconds.
    pub intvl: Option<u32>,
    /// TCP_KEEPCNT.
    pub cnt: Option<u32>,
}

impl TcpKa {
    /// Sets these options on a TCP socket (a listener passes them to the
    /// sockets it accepts). `set_off`: also clear SO_KEEPALIVE when off
    /// (a listener inherited from a previous process may have it on).
    pub fn apply(&self, s: &socket2::SockRef<'_>, set_off: bool) -> std::io::Result<()> {
        if !self.on {
            if set_off {
                s.set_keepalive(false)?;
            }
            return Ok(());
        }
        let secs = |v: Option<u32>| v.map(|n| std::time::Duration::from_secs(u64::from(n)));
        let mut ka = socket2::TcpKeepalive::new();
        let mut any = false;
        if let Some(t) = secs(self.idle) {
            ka = ka.with_time(t);
            any = true;
        }
        if let Some(t) = secs(self.intvl) {
            ka = ka.with_interval(t);
            any = true;
        }
        if let Some(n) = self.cnt {
            ka = ka.with_retries(n);
            any = true;
        }
        // `set_tcp_keepalive` sets SO_KEEPALIVE too.
        if any {
            s.set_tcp_keepalive(&ka)
        } else {
            s.set_keepalive(true)
        }
    }
}

/// Sets SO_LINGER on a TCP socket: `nolinger`: 0 (its close sends a RST
/// and drops unsent data, HAProxy's `option nolinger`); otherwise the
/// system's default (off), only written when it is not already.
pub fn set_nolinger(s: &socket2::SockRef<'_>, nolinger: bool) -> std::io::Result<()> {
    if nolinger {
        s.set_linger(Some(std::time::Duration::ZERO))
    } else if s.linger()?.is_some() {
        s.set_linger(None)
    } else {
        Ok(())
    }
}

/// An I/O error as HAProxy words it (`strerror`): the system's text
/// without Rust's ` (os error N)`.
pub fn os_text(e: &std::io::Error) -> String {
    let t = e.to_string();
    match t.rfind(" (os error ") {
        Some(i) if t.ends_with(')') => t[..i].to_string(),
        _ => t,
    }
}

/// The tasklet registered for a task's socket: each readiness event wakes
/// the task (`Reasons::IO`), which does the I/O (peers, CLI connections,
/// email alerts).
pub(crate) struct WakeTask {
    pub task: sched::TaskId,
}

impl sched::TaskletFn for WakeTask {
    fn run(
        &mut self,
        ctx: &mut sched::Ctx,
        me: sched::TaskletId,
        _why: sched::Reasons,
    ) -> sched::Status {
        let _ = ctx.take_events(me);
        ctx.wakeup(self.task, sched::Reasons::IO);
        sched::Status::Continue
    }
}
