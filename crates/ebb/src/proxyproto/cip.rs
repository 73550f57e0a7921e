//! NetScaler's Client IP insertion protocol (HAProxy's
//! `doc/netscaler-client-ip-insertion-protocol.txt`), sans-IO: what a
//! NetScaler (Citrix ADC) puts in front of a connection's data to say
//! which client it carries, read by `bind ... accept-netscaler-cip MAGIC`.
//!
//! A header is the magic number both sides agreed on (4 bytes, network
//! order), then either
//! - legacy (NetScaler before 10.5): the length of the rest (4 bytes),
//! - standard: the CIP length (4 bytes), the CIP type (2 bytes, 1), the
//!   length of the rest (2 bytes),
//!
//! then the client's last IP header (IPv4 or IPv6) and TCP header of its
//! handshake, whose source and destination are the connection's. HAProxy
//! 2.6's `conn_recv_netscaler_cip` tells the two forms apart by the byte
//! after the first 8 (an IP version nibble: legacy; 0, the type's first
//! byte: standard), and so does [`parse`]; the header is `8 + length` or
//! `12 + length` bytes, the IP and TCP headers inside it.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};

/// What the bytes received so far say.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Cip {
    /// A prefix of a header: read more.
    Partial,
    /// A whole header of `len` bytes: the client's `src` and `dst`.
    Done {
        len: usize,
        src: SocketAddr,
        dst: SocketAddr,
    },
    /// Not a header this side takes (HAProxy's error texts).
    Error(&'static str),
}

/// HAProxy's CO_ER_CIP_BAD_MAGIC text.
pub const BAD_MAGIC: &str = "Received an invalid NetScaler Client IP magic number";
/// HAProxy's CO_ER_CIP_BAD_PROTO text.
pub const BAD_PROTO: &str = "Received an unhandled protocol in the NetScaler Client IP header";
/// HAProxy's CO_ER_CIP_TRUNCATED text.
pub const TRUNCATED: &str = "Truncated NetScaler Client IP header received";
/// HAProxy's CO_ER_CIP_EMPTY text.
pub const EMPTY: &str = "Connection closed while waiting for NetScaler Client IP header";
/// HAProxy's CO_ER_CIP_TIMEOUT text.
pub const TIMEOUT: &str = "Timeout while waiting for a NetScaler Client IP header";

const IPPROTO_TCP: u8 = 6;

fn be16(b: &[u8], at: usize) -> Option<u16> {
    Some(u16::from_be_bytes(b.get(at..at + 2)?.try_into().ok()?))
}

fn be32(b: &[u8], at: usize) -> Option<u32> {
    Some(u32::from_be_bytes(b.get(at..at + 4)?.try_into().ok()?))
}

/// Parses the header at the start of `buf` for the agreed `magic`.
pub fn parse(buf: &[u8], magic: u32) -> Cip {
    // The magic is known as soon as its 4 bytes are.
    match be32(buf, 0) {
        Some(m) if m != magic => return Cip::Error(BAD_MAGIC),
        Some(_) if buf.len() >= 12 => {}
        _ => return Cip::Partial,
    }
    let (off, len) = if buf[8] & 0xD0 == 0x40 {
        (8, be32(buf, 4).unwrap_or(0) as usize)
    } else if buf[8] == 0 {
        (12, usize::from(be16(buf, 10).unwrap_or(0)))
    } else {
        return Cip::Error(BAD_PROTO);
    };
    let ip = &buf[off..];
    let Some(&first) = ip.first() else {
        return Cip::Partial;
    };
    let (src, dst, tcp) = match first >> 4 {
        4 => {
            if ip.len() < 20 {
                return Cip::Partial;
            }
            if ip[9] != IPPROTO_TCP {
                return Cip::Error(BAD_PROTO);
            }
            let ihl = usize::from(first & 0x0f) * 4;
            let a =
                |at: usize| IpAddr::V4(Ipv4Addr::new(ip[at], ip[at + 1], ip[at + 2], ip[at + 3]));
            (a(12), a(16), ihl)
        }
        6 => {
            if ip.len() < 40 {
                return Cip::Partial;
            }
            if ip[6] != IPPROTO_TCP {
                return Cip::Error(BAD_PROTO);
            }
            let a = |at: usize| {
                let mut o = [0u8; 16];
                o.copy_from_slice(&ip[at..at + 16]);
                IpAddr::V6(Ipv6Addr::from(o))
            };
            (a(8), a(24), 40)
        }
        _ => return Cip::Error(BAD_PROTO),
    };
    // The IP header must hold itself and the TCP ports must be inside
    // the declared length (HAProxy reads them unchecked).
    if tcp < 20 || tcp + 4 > len {
        return Cip::Error(TRUNCATED);
    }
    let (Some(sport), Some(dport)) = (be16(ip, tcp), be16(ip, tcp + 2)) else {
        return Cip::Partial;
    };
    if buf.len() < off + len {
        return Cip::Partial;
    }
    Cip::Done {
        len: off + len,
        src: SocketAddr::new(src, sport),
        dst: SocketAddr::new(dst, dport),
    }
}

/// A header for `src` and `dst` as a NetScaler sends it (`legacy`: the
/// form before 10.5), with `magic` (tests and fuzzing build them).
pub fn encode(magic: u32, legacy: bool, src: SocketAddr, dst: SocketAddr) -> Vec<u8> {
    let mut ip = Vec::new();
    match (src.ip(), dst.ip()) {
        (IpAddr::V4(s), IpAddr::V4(d)) => {
            ip.extend_from_slice(&[0x45, 0, 0, 40, 0, 0, 0x40, 0, 64, IPPROTO_TCP, 0, 0]);
            ip.extend_from_slice(&s.octets());
            ip.extend_from_slice(&d.octets());
        }
        (s, d) => {
            let v6 = |a: IpAddr| match a {
                IpAddr::V4(v) => v.to_ipv6_mapped(),
                IpAddr::V6(v) => v,
            };
            ip.extend_from_slice(&[0x60, 0, 0, 0, 0, 20, IPPROTO_TCP, 64]);
            ip.extend_from_slice(&v6(s).octets());
            ip.extend_from_slice(&v6(d).octets());
        }
    }
    // The TCP header of the client's handshake ACK: ports, then 16 bytes
    // (sequence numbers, data offset 5, ACK, window, no options).
    ip.extend_from_slice(&src.port().to_be_bytes());
    ip.extend_from_slice(&dst.port().to_be_bytes());
    ip.extend_from_slice(&[0, 0, 0, 1, 0, 0, 0, 1, 0x50, 0x10, 0xff, 0xff, 0, 0, 0, 0]);
    let mut out = magic.to_be_bytes().to_vec();
    if legacy {
        out.extend_from_slice(&(ip.len() as u32).to_be_bytes());
    } else {
        out.extend_from_slice(&((12 + ip.len()) as u32).to_be_bytes());
        out.extend_from_slice(&1u16.to_be_bytes());
        out.extend_from_slice(&(ip.len() as u16).to_be_bytes());
    }
    out.extend_from_slice(&ip);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn both_forms_and_both_families() {
        let src: SocketAddr = "192.0.2.7:40000".parse().unwrap();
        let dst: SocketAddr = "198.51.100.1:443".parse().unwrap();
        let s6: SocketAddr = "[2001:db8::7]:40000".parse().unwrap();
        let d6: SocketAddr = "[2001:db8::1]:443".parse().unwrap();
        for legacy in [true, false] {
            for (s, d) in [(src, dst), (s6, d6)] {
                let mut h = encode(0x1234, legacy, s, d);
                let n = h.len();
                h.extend_from_slice(b"GET / HTTP/1.1\r\n");
                assert_eq!(
                    parse(&h, 0x1234),
                    Cip::Done {
                        len: n,
                        src: s,
                        dst: d
                    }
                );
                // Every prefix is a header yet to come.
                for i in 4..n {
                    assert_eq!(parse(&h[..i], 0x1234), Cip::Partial, "{legacy} {i}");
                }
                assert_eq!(parse(&h, 0x1235), Cip::Error(BAD_MAGIC));
            }
        }
    }

    #[test]
    fn what_is_refused() {
        let src: SocketAddr = "192.0.2.7:40000".parse().unwrap();
        let dst: SocketAddr = "198.51.100.1:443".parse().unwrap();
        // UDP inside.
        let mut h = encode(7, true, src, dst);
        h[8 + 9] = 17;
        assert_eq!(parse(&h, 7), Cip::Error(BAD_PROTO));
        // Neither an IP version nor a type's first byte after 8 bytes.
        let mut h = encode(7, false, src, dst);
        h[8] = 0x80;
        assert_eq!(parse(&h, 7), Cip::Error(BAD_PROTO));
        // A length too short to hold the TCP ports.
        let mut h = encode(7, false, src, dst);
        h[10..12].copy_from_slice(&10u16.to_be_bytes());
        assert_eq!(parse(&h, 7), Cip::Error(TRUNCATED));
        // An IP header length beyond the data.
        let mut h = encode(7, true, src, dst);
        h[8] = 0x4f;
        assert_eq!(parse(&h, 7), Cip::Error(TRUNCATED));
        assert_eq!(parse(b"\0\0\0\x07", 7), Cip::Partial);
        assert_eq!(parse(b"\0\0\0\x08", 7), Cip::Error(BAD_MAGIC));
    }
}
