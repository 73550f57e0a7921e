//! PROXY protocol v1 and v2 (HAProxy's `doc/proxy-protocol.txt`), sans-IO.
//!
//! A load balancer in front of ebb (or ebb in front of a server) prepends
//! one header to a TCP connection telling the original source and
//! destination. This module parses it from the first bytes of a connection
//! and encodes it for a server; it does no I/O. `accept-proxy` on `bind`
//! is read by `tcp::pphdr`, `send-proxy[-v2]` on `server` is sent by the
//! server sides of both modes and by checks ([`header_for`]).
//!
//! [`parse`] looks at the bytes received so far and answers:
//! - [`Parsed::Partial`]: the bytes are a prefix of a valid header; read more.
//! - [`Parsed::Done`]`(header, consumed)`: a whole header; the payload starts
//!   at `consumed`.
//! - [`Parsed::Error`]: not a PROXY header, or a malformed one. The caller
//!   closes the connection and logs the reason (HAProxy does the same).
//!
//! Strictness, after the spec:
//! - v1: `PROXY TCP4|TCP6|UNKNOWN ...\r\n`, single spaces, at most 107 bytes
//!   including CRLF (the spec's bound, so a receiver reads one bounded
//!   line); addresses must parse in their family (no leading zeros in IPv4
//!   octets, as Rust's parser and the spec's dotted-quad form require);
//!   ports are 0..65535 in decimal without a leading zero (except `0`);
//!   `UNKNOWN` may be followed by anything up to CRLF, which is ignored.
//! - v2: the 12-byte signature, version 2, command LOCAL (0) or PROXY (1),
//!   family/transport UNSPEC, INET, INET6 or UNIX over STREAM or DGRAM; the
//!   declared length must hold the address block of the family; TLVs must
//!   tile the rest exactly and are kept; a CRC32C TLV, when present, must
//!   match (the spec's "the receiver ... must verify"). With LOCAL, the
//!   address block is skipped (the spec: the receiver must ignore it).

pub mod cip;

use std::net::{Ipv4Addr, Ipv6Addr, SocketAddr, SocketAddrV4, SocketAddrV6};

/// The v2 signature: `\r\n\r\n\0\r\nQUIT\n`.
pub const V2_SIG: [u8; 12] = *b"\r\n\r\n\0\r\nQUIT\n";
/// Longest v1 line, CRLF included (spec section 2.1: 107 bytes, the
/// `PROXY TCP6` line with two full IPv6 addresses and ports).
pub const V1_MAX: usize = 107;
/// Length of the fixed part of a v2 header.
pub const V2_FIXED: usize = 16;
/// Size of each path in a v2 UNIX address block.
const UNIX_PATH: usize = 108;

/// TLV types of the spec (section 2.2.x) that ebb names.
pub mod tlv {
    pub const ALPN: u8 = 0x01;
    pub const AUTHORITY: u8 = 0x02;
    pub const CRC32C: u8 = 0x03;
    pub const NOOP: u8 = 0x04;
    pub const UNIQUE_ID: u8 = 0x05;
    pub const SSL: u8 = 0x20;
    pub const NETNS: u8 = 0x30;
}

/// The command of a header.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Command {
    /// The connection was made by the proxy itself (health check): use the
    /// real connection's addresses. v2 only.
    Local,
    /// Relayed on behalf of a client: the addresses are the client's.
    Proxy,
}

/// Transport of a v2 address block.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Transport {
    Stream,
    Dgram,
}

/// The addresses a header carries.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Addrs {
    /// v1 `UNKNOWN`, v2 UNSPEC, or a v2 LOCAL header: addresses unknown.
    Unknown,
    /// IPv4 (v1 `TCP4`, v2 INET).
    V4 {
        src: SocketAddrV4,
        dst: SocketAddrV4,
        transport: Transport,
    },
    /// IPv6 (v1 `TCP6`, v2 INET6).
    V6 {
        src: SocketAddrV6,
        dst: SocketAddrV6,
        transport: Transport,
    },
    /// v2 UNIX: the paths, up to their first NUL.
    Unix {
        src: Vec<u8>,
        dst: Vec<u8>,
        transport: Transport,
    },
}

impl Addrs {
    /// Source and destination as socket addresses, for IPv4/IPv6.
    pub fn socket_addrs(&self) -> Option<(SocketAddr, SocketAddr)> {
        match self {
            Addrs::V4 { src, dst, .. } => Some(((*src).into(), (*dst).into())),
            Addrs::V6 { src, dst, .. } => Some(((*src).into(), (*dst).into())),
            _ => None,
        }
    }
}

/// One v2 TLV, kept as received.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Tlv {
    pub kind: u8,
    pub value: Vec<u8>,
}

/// A parsed header.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Header {
    /// 1 or 2.
    pub version: u8,
    pub command: Command,
    pub addrs: Addrs,
    /// v2 TLVs in order (empty for v1).
    pub tlvs: Vec<Tlv>,
}

impl Header {
    /// First TLV of a type.
    pub fn tlv(&self, kind: u8) -> Option<&[u8]> {
        self.tlvs
            .iter()
            .find(|t| t.kind == kind)
            .map(|t| &t.value[..])
    }
}

/// Why a header was refused. Small and `Copy`; `Display` gives a log line.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Error {
    /// The bytes start neither with `PROXY ` nor with the v2 signature.
    NotProxy,
    /// v1: no CRLF within 107 bytes.
    V1TooLong,
    /// v1: a line that is not `PROXY <proto> ...\r\n` as the spec spells it.
    V1Syntax,
    /// v1: an unknown protocol word (not TCP4, TCP6, UNKNOWN).
    V1Protocol,
    /// v1: an address that does not parse in its family.
    V1Address,
    /// v1: a port that is not 0..65535 in plain decimal.
    V1Port,
    /// v2: version nibble other than 2.
    V2Version,
    /// v2: command other than LOCAL or PROXY.
    V2Command,
    /// v2: unknown address family or transport.
    V2Family,
    /// v2: declared length shorter than the family's address block.
    V2Length,
    /// v2: TLVs that do not tile the rest of the header.
    V2Tlv,
    /// v2: the CRC32C TLV does not match.
    V2Checksum,
}

impl std::fmt::Display for Error {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Error::NotProxy => "not a PROXY protocol header",
            Error::V1TooLong => "PROXY v1 line longer than 107 bytes",
            Error::V1Syntax => "malformed PROXY v1 line",
            Error::V1Protocol => "unknown PROXY v1 protocol",
            Error::V1Address => "bad address in PROXY v1 line",
            Error::V1Port => "bad port in PROXY v1 line",
            Error::V2Version => "PROXY v2 header with a version other than 2",
            Error::V2Command => "PROXY v2 header with an unknown command",
            Error::V2Family => "PROXY v2 header with an unknown address family",
            Error::V2Length => "PROXY v2 header too short for its address family",
            Error::V2Tlv => "malformed TLV in PROXY v2 header",
            Error::V2Checksum => "PROXY v2 CRC32C mismatch",
        })
    }
}

impl std::error::Error for Error {}

/// The outcome of [`parse`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Parsed {
    /// A prefix of a possible header: read more bytes.
    Partial,
    /// A whole header and the number of bytes it took.
    Done(Header, usize),
    /// Not a (valid) header: close the connection.
    Error(Error),
}

/// Parses a PROXY v1 or v2 header at the start of `buf`.
pub fn parse(buf: &[u8]) -> Parsed {
    const V1_SIG: &[u8] = b"PROXY ";
    let n = buf.len().min(V2_SIG.len());
    if buf[..n] == V2_SIG[..n] {
        if n < V2_SIG.len() {
            return Parsed::Partial;
        }
        return parse_v2(buf);
    }
    let n = buf.len().min(V1_SIG.len());
    if buf[..n] == V1_SIG[..n] {
        if n < V1_SIG.len() {
            return Parsed::Partial;
        }
        return parse_v1(buf);
    }
    Parsed::Error(Error::NotProxy)
}

fn parse_v1(buf: &[u8]) -> Parsed {
    let window = &buf[..buf.len().min(V1_MAX)];
    let Some(lf) = window.iter().position(|&b| b == b'\n') else {
        return if buf.len() >= V1_MAX {
            Parsed::Error(Error::V1TooLong)
        } else {
            Parsed::Partial
        };
    };
    if lf == 0 || window[lf - 1] != b'\r' {
        return Parsed::Error(Error::V1Syntax);
    }
    let line = &window[6..lf - 1]; // after "PROXY ", before CRLF
    match v1_fields(line) {
        Ok(addrs) => Parsed::Done(
            Header {
                version: 1,
                command: Command::Proxy,
                addrs,
                tlvs: Vec::new(),
            },
            lf + 1,
        ),
        Err(e) => Parsed::Error(e),
    }
}

fn v1_fields(line: &[u8]) -> Result<Addrs, Error> {
    if let Some(rest) = line.strip_prefix(b"UNKNOWN") {
        // Anything may follow after a space; it is ignored.
        return if rest.is_empty() || rest[0] == b' ' {
            if rest.contains(&b'\r') {
                Err(Error::V1Syntax)
            } else {
                Ok(Addrs::Unknown)
            }
        } else {
            Err(Error::V1Protocol)
        };
    }
    let line = std::str::from_utf8(line).map_err(|_| Error::V1Syntax)?;
    let f: Vec<&str> = line.split(' ').collect();
    if f.len() != 5 {
        return Err(if f.first().is_some_and(|p| *p == "TCP4" || *p == "TCP6") {
            Error::V1Syntax
        } else {
            Error::V1Protocol
        });
    }
    let sp = v1_port(f[3])?;
    let dp = v1_port(f[4])?;
    match f[0] {
        "TCP4" => {
            let s: Ipv4Addr = f[1].parse().map_err(|_| Error::V1Address)?;
            let d: Ipv4Addr = f[2].parse().map_err(|_| Error::V1Address)?;
            Ok(Addrs::V4 {
                src: SocketAddrV4::new(s, sp),
                dst: SocketAddrV4::new(d, dp),
                transport: Transport::Stream,
            })
        }
        "TCP6" => {
            let s: Ipv6Addr = f[1].parse().map_err(|_| Error::V1Address)?;
            let d: Ipv6Addr = f[2].parse().map_err(|_| Error::V1Address)?;
            Ok(Addrs::V6 {
                src: SocketAddrV6::new(s, sp, 0, 0),
                dst: SocketAddrV6::new(d, dp, 0, 0),
                transport: Transport::Stream,
            })
        }
        _ => Err(Error::V1Protocol),
    }
}

fn v1_port(s: &str) -> Result<u16, Error> {
    let ok = !s.is_empty()
        && s.len() <= 5
        && s.bytes().all(|b| b.is_ascii_digit())
        && (s == "0" || !s.starts_with('0'));
    if !ok {
        return Err(Error::V1Port);
    }
    s.parse().map_err(|_| Error::V1Port)
}

fn parse_v2(buf: &[u8]) -> Parsed {
    if buf.len() < 13 {
        return Parsed::Partial;
    }
    let ver_cmd = buf[12];
    if ver_cmd >> 4 != 2 {
        return Parsed::Error(Error::V2Version);
    }
    let command = match ver_cmd & 0xf {
        0 => Command::Local,
        1 => Command::Proxy,
        _ => return Parsed::Error(Error::V2Command),
    };
    if buf.len() < 14 {
        return Parsed::Partial;
    }
    let fam = buf[13];
    let transport = match fam & 0xf {
        0 => None,
        1 => Some(Transport::Stream),
        2 => Some(Transport::Dgram),
        _ => return Parsed::Error(Error::V2Family),
    };
    let addr_len = match (fam >> 4, transport) {
        (0, None) => 0,
        (1, Some(_)) => 12,
        (2, Some(_)) => 36,
        (3, Some(_)) => 2 * UNIX_PATH,
        _ => return Parsed::Error(Error::V2Family),
    };
    if buf.len() < V2_FIXED {
        return Parsed::Partial;
    }
    let len = u16::from_be_bytes([buf[14], buf[15]]) as usize;
    if len < addr_len {
        return Parsed::Error(Error::V2Length);
    }
    let total = V2_FIXED + len;
    if buf.len() < total {
        return Parsed::Partial;
    }
    let a = &buf[V2_FIXED..V2_FIXED + addr_len];
    let addrs = match (command, transport) {
        (Command::Local, _) | (_, None) => Addrs::Unknown,
        (Command::Proxy, Some(transport)) => match fam >> 4 {
            1 => Addrs::V4 {
                src: SocketAddrV4::new(
                    Ipv4Addr::new(a[0], a[1], a[2], a[3]),
                    u16::from_be_bytes([a[8], a[9]]),
                ),
                dst: SocketAddrV4::new(
                    Ipv4Addr::new(a[4], a[5], a[6], a[7]),
                    u16::from_be_bytes([a[10], a[11]]),
                ),
                transport,
            },
            2 => {
                let ip = |o: usize| {
                    let mut b = [0u8; 16];
                    b.copy_from_slice(&a[o..o + 16]);
                    Ipv6Addr::from(b)
                };
                Addrs::V6 {
                    src: SocketAddrV6::new(ip(0), u16::from_be_bytes([a[32], a[33]]), 0, 0),
                    dst: SocketAddrV6::new(ip(16), u16::from_be_bytes([a[34], a[35]]), 0, 0),
                    transport,
                }
            }
            _ => {
                let path = |p: &[u8]| {
                    let end = p.iter().position(|&b| b == 0).unwrap_or(p.len());
                    p[..end].to_vec()
                };
                Addrs::Unix {
                    src: path(&a[..UNIX_PATH]),
                    dst: path(&a[UNIX_PATH..]),
                    transport,
                }
            }
        },
    };
    // TLVs tile the rest of the header.
    let mut tlvs = Vec::new();
    let mut crc_at = None;
    let mut p = V2_FIXED + addr_len;
    while p < total {
        if total - p < 3 {
            return Parsed::Error(Error::V2Tlv);
        }
        let kind = buf[p];
        let l = u16::from_be_bytes([buf[p + 1], buf[p + 2]]) as usize;
        if total - p - 3 < l {
            return Parsed::Error(Error::V2Tlv);
        }
        if kind == tlv::CRC32C {
            if l != 4 || crc_at.is_some() {
                return Parsed::Error(Error::V2Tlv);
            }
            crc_at = Some(p + 3);
        }
        // HAProxy's limits: an authority of at most 255 bytes
        // (PP2_AUTHORITY_MAX), a unique id of at most 128 (UNIQUEID_LEN).
        if (kind == tlv::AUTHORITY && l > 255) || (kind == tlv::UNIQUE_ID && l > 128) {
            return Parsed::Error(Error::V2Tlv);
        }
        tlvs.push(Tlv {
            kind,
            value: buf[p + 3..p + 3 + l].to_vec(),
        });
        p += 3 + l;
    }
    if let Some(at) = crc_at {
        let want = u32::from_be_bytes([buf[at], buf[at + 1], buf[at + 2], buf[at + 3]]);
        let got = crc32c_with_hole(&buf[..total], at);
        if got != want {
            return Parsed::Error(Error::V2Checksum);
        }
    }
    Parsed::Done(
        Header {
            version: 2,
            command,
            addrs,
            tlvs,
        },
        total,
    )
}

/// CRC32C (Castagnoli, reflected polynomial 0x82F63B78) of `data` with the
/// four bytes at `hole` read as zeros, as the spec computes the checksum.
fn crc32c_with_hole(data: &[u8], hole: usize) -> u32 {
    let bytes = data
        .iter()
        .enumerate()
        .map(|(i, &b)| if (hole..hole + 4).contains(&i) { 0 } else { b });
    crate::hash::crc32_reflected(crate::hash::CASTAGNOLI, bytes)
}

/// The header a server with `send-proxy` (`version` 1) or
/// `send-proxy-v2` (2) receives first: the client's source and the
/// address it reached; with no addresses (a health check), v1 `UNKNOWN`
/// and a v2 LOCAL command, as HAProxy sends. A v4/v6 mix is sent as IPv6
/// with the IPv4 address mapped (HAProxy does the same).
pub fn header_for(version: u8, addrs: Option<(SocketAddr, SocketAddr)>) -> Vec<u8> {
    let six = |a: SocketAddr| match a {
        SocketAddr::V4(v) => SocketAddrV6::new(v.ip().to_ipv6_mapped(), v.port(), 0, 0),
        SocketAddr::V6(v) => v,
    };
    let (command, addrs) = match addrs {
        None => (Command::Local, Addrs::Unknown),
        Some((SocketAddr::V4(src), SocketAddr::V4(dst))) => (
            Command::Proxy,
            Addrs::V4 {
                src,
                dst,
                transport: Transport::Stream,
            },
        ),
        Some((src, dst)) => (
            Command::Proxy,
            Addrs::V6 {
                src: six(src),
                dst: six(dst),
                transport: Transport::Stream,
            },
        ),
    };
    let h = Header {
        version,
        command,
        addrs,
        tlvs: Vec::new(),
    };
    if version == 2 {
        // No TLV: the header always fits.
        encode_v2(&h, false).unwrap_or_default()
    } else {
        encode_v1(&h)
    }
}

/// A v2 header for a client (`addrs`) with `tlvs`, and a CRC32C TLV when
/// `crc` (`proxy-v2-options`); without the TLVs if they would not fit.
pub fn header_v2_with(
    addrs: Option<(SocketAddr, SocketAddr)>,
    tlvs: Vec<Tlv>,
    crc: bool,
) -> Vec<u8> {
    let plain = header_for(2, addrs);
    let Parsed::Done(mut h, _) = parse(&plain) else {
        return plain;
    };
    h.tlvs = tlvs;
    encode_v2(&h, crc).unwrap_or(plain)
}

/// The header a `send-proxy[-v2]` server receives for a client: `header_for`,
/// with the TLVs of its `proxy-v2-options` in HAProxy's order (AUTHORITY:
/// `authority`, UNIQUE_ID: `unique_id`, empty when the stream has none).
pub fn server_header(
    version: u8,
    o: &PpV2Options,
    addrs: Option<(SocketAddr, SocketAddr)>,
    authority: Option<&[u8]>,
    unique_id: Option<&[u8]>,
) -> Vec<u8> {
    if version != 2 || !o.any() {
        return header_for(version, addrs);
    }
    let mut tlvs = Vec::new();
    if let (true, Some(a)) = (o.authority, authority) {
        tlvs.push(Tlv {
            kind: tlv::AUTHORITY,
            value: a.to_vec(),
        });
    }
    if o.unique_id {
        tlvs.push(Tlv {
            kind: tlv::UNIQUE_ID,
            value: unique_id.unwrap_or_default().to_vec(),
        });
    }
    header_v2_with(addrs, tlvs, o.crc32c)
}

/// Encodes a v1 line. `Addrs::Unix` has no v1 form and is sent as
/// `UNKNOWN`, as is a LOCAL command; a mixed v4/v6 pair cannot occur.
pub fn encode_v1(h: &Header) -> Vec<u8> {
    let line = match (&h.command, &h.addrs) {
        (Command::Proxy, Addrs::V4 { src, dst, .. }) => format!(
            "PROXY TCP4 {} {} {} {}\r\n",
            src.ip(),
            dst.ip(),
            src.port(),
            dst.port()
        ),
        (Command::Proxy, Addrs::V6 { src, dst, .. }) => format!(
            "PROXY TCP6 {} {} {} {}\r\n",
            src.ip(),
            dst.ip(),
            src.port(),
            dst.port()
        ),
        _ => "PROXY UNKNOWN\r\n".to_string(),
    };
    line.into_bytes()
}

/// Encodes a v2 header with its TLVs; with `crc`, appends a CRC32C TLV
/// (any CRC32C TLV already in `h.tlvs` is left out). Returns None when the
/// TLVs do not fit the 16-bit length field.
pub fn encode_v2(h: &Header, crc: bool) -> Option<Vec<u8>> {
    let mut out = Vec::with_capacity(64);
    out.extend_from_slice(&V2_SIG);
    out.push(
        0x20 | match h.command {
            Command::Local => 0,
            Command::Proxy => 1,
        },
    );
    let tr = |t: &Transport| match t {
        Transport::Stream => 1u8,
        Transport::Dgram => 2,
    };
    let (fam, block): (u8, Vec<u8>) = match &h.addrs {
        Addrs::Unknown => (0, vec![]),
        Addrs::V4 {
            src,
            dst,
            transport,
        } => {
            let mut b = Vec::with_capacity(12);
            b.extend_from_slice(&src.ip().octets());
            b.extend_from_slice(&dst.ip().octets());
            b.extend_from_slice(&src.port().to_be_bytes());
            b.extend_from_slice(&dst.port().to_be_bytes());
            (0x10 | tr(transport), b)
        }
        Addrs::V6 {
            src,
            dst,
            transport,
        } => {
            let mut b = Vec::with_capacity(36);
            b.extend_from_slice(&src.ip().octets());
            b.extend_from_slice(&dst.ip().octets());
            b.extend_from_slice(&src.port().to_be_bytes());
            b.extend_from_slice(&dst.port().to_be_bytes());
            (0x20 | tr(transport), b)
        }
        Addrs::Unix {
            src,
            dst,
            transport,
        } => {
            if src.len() > UNIX_PATH || dst.len() > UNIX_PATH {
                return None;
            }
            let mut b = vec![0u8; 2 * UNIX_PATH];
            b[..src.len()].copy_from_slice(src);
            b[UNIX_PATH..UNIX_PATH + dst.len()].copy_from_slice(dst);
            (0x30 | tr(transport), b)
        }
    };
    out.push(fam);
    out.extend_from_slice(&[0, 0]); // length, set below
    out.extend_from_slice(&block);
    for t in h.tlvs.iter().filter(|t| t.kind != tlv::CRC32C) {
        let l = u16::try_from(t.value.len()).ok()?;
        out.push(t.kind);
        out.extend_from_slice(&l.to_be_bytes());
        out.extend_from_slice(&t.value);
    }
    let crc_at = if crc {
        out.extend_from_slice(&[tlv::CRC32C, 0, 4, 0, 0, 0, 0]);
        Some(out.len() - 4)
    } else {
        None
    };
    let len = u16::try_from(out.len() - V2_FIXED).ok()?;
    out[14..16].copy_from_slice(&len.to_be_bytes());
    if let Some(at) = crc_at {
        let c = crc32c_with_hole(&out, at);
        out[at..at + 4].copy_from_slice(&c.to_be_bytes());
    }
    Some(out)
}

#[cfg(test)]
mod tests;

/// `proxy-v2-options authority,crc32c,unique-id`: a `send-proxy-v2`
/// header's CRC32C, the client's authority (from its own PROXY header,
/// else its TLS SNI) and the stream's unique id (`unique-id-format`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct PpV2Options {
    pub authority: bool,
    pub crc32c: bool,
    pub unique_id: bool,
}

impl PpV2Options {
    pub fn any(&self) -> bool {
        self.authority || self.crc32c || self.unique_id
    }
}
