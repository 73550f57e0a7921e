//! Small network value types shared by the configuration and the sample
//! engine (which must not import each other): IP networks and HTTP tokens.

use std::net::{IpAddr, Ipv4Addr};

/// An IP network: address and prefix length.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct IpNet {
    pub addr: IpAddr,
    pub prefix: u8,
}

impl IpNet {
    /// Whether `ip` is inside this network (an IPv4 network never contains
    /// an IPv6 address and vice versa, except v4-mapped addresses).
    pub fn contains(&self, ip: IpAddr) -> bool {
        let ip = match ip {
            IpAddr::V6(v6) => match v6.to_ipv4_mapped() {
                Some(v4) if self.addr.is_ipv4() => IpAddr::V4(v4),
                _ => ip,
            },
            v4 => v4,
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
