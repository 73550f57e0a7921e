//! DNS for `resolvers` sections: the messages, the answers' meaning, and
//! the rules that turn answers into server addresses, with no sockets.
//!
//! HAProxy re-resolves server names while it runs (`server ... resolvers
//! NAME`, `server-template`); ebb will do the same with a UDP socket per
//! `resolvers` section and the queries as tasks on its scheduler, never a
//! blocking `getaddrinfo` on a worker thread. This module is the part that
//! needs no I/O, so it is tested (and fuzzed) on bytes:
//!
//! - [`encode_query`] builds a query (recursion desired, EDNS(0) announcing
//!   `accepted_payload_size`, HAProxy's default 512: RFC 6891's minimum);
//! - [`decode_response`] checks that a datagram answers *that* query (id,
//!   question, response bit; anything else is dropped, as a spoofed or late
//!   answer must be) and extracts its meaning: the status HAProxy's `hold`
//!   keywords name (valid, nx, refused, other; a truncated answer is
//!   "other" over UDP), the addresses found by following the CNAME chain
//!   from the question's name, and for SRV the targets with their priority,
//!   weight and port, addresses taken from the additional section;
//! - [`Holds`] decides whether an invalid status takes a server down:
//!   only when no valid answer came within the status' hold period;
//! - [`assign_srv`] fills `server-template` slots from SRV records, keeping
//!   a slot on the record it already had (no reshuffle of live traffic),
//!   freeing slots whose record has been absent longer than `hold
//!   obsolete`;
//! - [`parse_resolv_conf`] reads `nameserver` lines (`parse-resolv-conf`).

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::time::Duration;

use hickory_proto::op::{Edns, Message, MessageType, OpCode, Query, ResponseCode};
use hickory_proto::rr::{Name, RData, RecordType};

/// What a query asks for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum QType {
    A,
    Aaaa,
    Srv,
}

impl QType {
    fn record_type(self) -> RecordType {
        match self {
            QType::A => RecordType::A,
            QType::Aaaa => RecordType::AAAA,
            QType::Srv => RecordType::SRV,
        }
    }

    /// HAProxy's fallback after an invalid answer: A and AAAA swap, SRV
    /// has none.
    pub fn fallback(self) -> Option<QType> {
        match self {
            QType::A => Some(QType::Aaaa),
            QType::Aaaa => Some(QType::A),
            QType::Srv => None,
        }
    }
}

/// Why a message was refused.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DnsError {
    /// The name is not a valid DNS name (empty label, over 63 bytes a
    /// label or 255 in all, bad characters).
    BadName(String),
    /// The datagram does not parse as a DNS message.
    Malformed,
    /// A query, not a response; or another id, question or opcode: not the
    /// answer to our query (dropped without changing anything).
    NotOurs,
}

/// `hold` keywords' status of an answer.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Status {
    /// NOERROR with at least one usable record.
    Valid,
    /// NXDOMAIN.
    Nx,
    /// REFUSED.
    Refused,
    /// Anything else: SERVFAIL, FORMERR, NOERROR without records, a
    /// truncated UDP answer, a CNAME chain that leads nowhere.
    Other,
}

/// One SRV target.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SrvTarget {
    pub priority: u16,
    pub weight: u16,
    pub port: u16,
    /// Lowercase, without the final dot.
    pub target: String,
    /// Addresses the additional section gave for `target` (may be empty:
    /// the target is then resolved on its own).
    pub addrs: Vec<IpAddr>,
}

/// The meaning of a response to our query.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Response {
    pub status: Status,
    /// The response was truncated (TC bit): over UDP, retry over TCP.
    pub truncated: bool,
    /// A/AAAA answers for the question's name (after CNAMEs), with their
    /// TTLs in seconds.
    pub addrs: Vec<(IpAddr, u32)>,
    /// SRV answers, in the order received.
    pub srv: Vec<SrvTarget>,
    /// The question's name is an alias: a CNAME chain was followed (the
    /// `cname` counter when the answer is valid, `cname_error` when the
    /// chain ends without a record of the type asked).
    pub cname: bool,
    /// NOERROR with an empty answer section (HAProxy's `any_err`).
    pub no_answer: bool,
}

fn dns_name(name: &str) -> Result<Name, DnsError> {
    let bad = || DnsError::BadName(name.to_string());
    let trimmed = name.strip_suffix('.').unwrap_or(name);
    if trimmed.is_empty()
        || trimmed.len() > 253
        || trimmed
            .split('.')
            .any(|l| l.is_empty() || l.len() > 63 || !l.bytes().all(name_byte))
    {
        return Err(bad());
    }
    let mut n = Name::from_ascii(trimmed).map_err(|_| bad())?;
    n.set_fqdn(true);
    Ok(n)
}

/// Letters, digits, `-` and `_` (SRV names: `_http._tcp.example.org`).
fn name_byte(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b == b'-' || b == b'_'
}

/// A query for `name`, type `qtype`, id `id`, announcing `payload` bytes
/// through EDNS(0) when it is above 512.
pub fn encode_query(id: u16, name: &str, qtype: QType, payload: u16) -> Result<Vec<u8>, DnsError> {
    let mut m = Message::new(id, MessageType::Query, OpCode::Query);
    m.metadata.recursion_desired = true;
    m.add_query(Query::query(dns_name(name)?, qtype.record_type()));
    if payload > 512 {
        let mut e = Edns::new();
        e.set_max_payload(payload);
        m.set_edns(e);
    }
    m.to_vec().map_err(|_| DnsError::Malformed)
}

/// Reads a datagram that should answer the query (`id`, `name`, `qtype`).
pub fn decode_response(
    bytes: &[u8],
    id: u16,
    name: &str,
    qtype: QType,
) -> Result<Response, DnsError> {
    let want = dns_name(name)?;
    let m = Message::from_vec(bytes).map_err(|_| DnsError::Malformed)?;
    let md = &m.metadata;
    if md.message_type != MessageType::Response || md.id != id || md.op_code != OpCode::Query {
        return Err(DnsError::NotOurs);
    }
    match m.queries.as_slice() {
        [q] if q.query_type() == qtype.record_type() && *q.name() == want => {}
        _ => return Err(DnsError::NotOurs),
    }
    let truncated = md.truncation;
    let mut r = Response {
        status: Status::Other,
        truncated,
        addrs: Vec::new(),
        srv: Vec::new(),
        cname: false,
        no_answer: false,
    };
    match md.response_code {
        ResponseCode::NoError => {}
        ResponseCode::NXDomain => {
            r.status = Status::Nx;
            return Ok(r);
        }
        ResponseCode::Refused => {
            r.status = Status::Refused;
            return Ok(r);
        }
        _ => return Ok(r),
    }
    r.no_answer = m.answers.is_empty();
    // Follow the CNAME chain from the question's name (bounded: a loop
    // or a chain longer than the answer section ends it).
    let mut owner = want;
    for _ in 0..=m.answers.len() {
        let next = m.answers.iter().find_map(|rec| match &rec.data {
            RData::CNAME(c) if rec.name == owner => Some(c.0.clone()),
            _ => None,
        });
        match next {
            Some(n) => {
                owner = n;
                r.cname = true;
            }
            None => break,
        }
    }
    for rec in &m.answers {
        if rec.name != owner {
            continue;
        }
        match (&rec.data, qtype) {
            (RData::A(a), QType::A) => r.addrs.push((IpAddr::V4(a.0), rec.ttl)),
            (RData::AAAA(a), QType::Aaaa) => r.addrs.push((IpAddr::V6(a.0), rec.ttl)),
            (RData::SRV(s), QType::Srv) => {
                let target = s
                    .target
                    .to_ascii()
                    .trim_end_matches('.')
                    .to_ascii_lowercase();
                // RFC 2782: a target of "." means the service is not
                // available at this name.
                if target.is_empty() {
                    continue;
                }
                let addrs = m
                    .additionals
                    .iter()
                    .filter(|a| a.name == s.target)
                    .filter_map(|a| match &a.data {
                        RData::A(x) => Some(IpAddr::V4(x.0)),
                        RData::AAAA(x) => Some(IpAddr::V6(x.0)),
                        _ => None,
                    })
                    .collect();
                r.srv.push(SrvTarget {
                    priority: s.priority,
                    weight: s.weight,
                    port: s.port,
                    target,
                    addrs,
                });
            }
            _ => {}
        }
    }
    if !truncated && (!r.addrs.is_empty() || !r.srv.is_empty()) {
        r.status = Status::Valid;
    }
    Ok(r)
}

/// A `resolvers` section's `hold` periods (HAProxy's defaults: valid 10 s,
/// obsolete 0 s, every other status 30 s).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Holds {
    pub valid: Duration,
    pub obsolete: Duration,
    pub nx: Duration,
    pub refused: Duration,
    pub timeout: Duration,
    pub other: Duration,
}

impl Default for Holds {
    fn default() -> Holds {
        let s30 = Duration::from_secs(30);
        Holds {
            valid: Duration::from_secs(10),
            obsolete: Duration::ZERO,
            nx: s30,
            refused: s30,
            timeout: s30,
            other: s30,
        }
    }
}

/// An invalid outcome of a resolution (a status, or no answer at all).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Failure {
    Nx,
    Refused,
    Timeout,
    Other,
}

impl Holds {
    /// Whether a server whose last valid answer came `since_valid` ago
    /// (`None`: never) goes DOWN on `failure`: only when no valid answer
    /// came within that failure's hold period.
    pub fn takes_down(&self, failure: Failure, since_valid: Option<Duration>) -> bool {
        let hold = match failure {
            Failure::Nx => self.nx,
            Failure::Refused => self.refused,
            Failure::Timeout => self.timeout,
            Failure::Other => self.other,
        };
        since_valid.is_none_or(|d| d > hold)
    }

    /// Sets `hold STATUS PERIOD` (a line of a `resolvers` section).
    pub fn set(&mut self, status: &str, period: Duration) -> Result<(), String> {
        let slot = match status {
            "valid" => &mut self.valid,
            "obsolete" => &mut self.obsolete,
            "nx" => &mut self.nx,
            "refused" => &mut self.refused,
            "timeout" => &mut self.timeout,
            "other" => &mut self.other,
            o => {
                return Err(format!(
                    "unknown hold status '{o}' (expected nx, refused, timeout, other, valid or obsolete)"
                ))
            }
        };
        *slot = period;
        Ok(())
    }
}

impl From<Status> for Option<Failure> {
    fn from(s: Status) -> Option<Failure> {
        match s {
            Status::Valid => None,
            Status::Nx => Some(Failure::Nx),
            Status::Refused => Some(Failure::Refused),
            Status::Other => Some(Failure::Other),
        }
    }
}

/// A `server-template` slot's SRV record and when it was last seen.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Slot {
    pub record: SrvTarget,
    /// Age of the last answer that listed it.
    pub unseen: Duration,
}

/// Fills `server-template` slots from an SRV answer: a slot keeps its
/// record while the answer still lists it (same target and port; priority,
/// weight and addresses are refreshed), a record absent for longer than
/// `obsolete` frees its slot, and new records take free slots in answer
/// order. `elapsed` is the time since the previous answer. Returns whether
/// anything changed.
pub fn assign_srv(
    slots: &mut [Option<Slot>],
    answer: &[SrvTarget],
    elapsed: Duration,
    obsolete: Duration,
) -> bool {
    let mut changed = false;
    let same = |a: &SrvTarget, b: &SrvTarget| a.target == b.target && a.port == b.port;
    let mut placed = vec![false; answer.len()];
    for slot in slots.iter_mut() {
        let Some(s) = slot else { continue };
        match answer.iter().position(|r| same(r, &s.record)) {
            Some(i) if !placed[i] => {
                placed[i] = true;
                if s.record != answer[i] || s.unseen != Duration::ZERO {
                    changed |= s.record != answer[i];
                    s.record = answer[i].clone();
                    s.unseen = Duration::ZERO;
                }
            }
            _ => {
                s.unseen += elapsed;
                if s.unseen > obsolete {
                    *slot = None;
                    changed = true;
                }
            }
        }
    }
    for (i, r) in answer.iter().enumerate() {
        if placed[i] {
            continue;
        }
        if let Some(free) = slots.iter_mut().find(|s| s.is_none()) {
            *free = Some(Slot {
                record: r.clone(),
                unseen: Duration::ZERO,
            });
            changed = true;
        }
    }
    changed
}

/// The name servers of a resolv.conf (`nameserver ADDR` lines, port 53),
/// in order; other lines, comments and unparsable addresses are skipped as
/// the C library skips them.
pub fn parse_resolv_conf(text: &str) -> Vec<SocketAddr> {
    text.lines()
        .filter_map(|l| {
            let l = l.split(['#', ';']).next().unwrap_or("");
            let mut w = l.split_whitespace();
            if w.next() != Some("nameserver") {
                return None;
            }
            let a = w.next()?;
            // A scoped IPv6 address (fe80::1%eth0) keeps only the address.
            let a = a.split('%').next().unwrap_or(a);
            let ip: IpAddr = a.parse().ok()?;
            Some(SocketAddr::new(ip, 53))
        })
        .collect()
}

/// The addresses of `addrs` a server may take under `resolve-prefer`: the
/// preferred family if any, else the other.
pub fn preferred(addrs: &[(IpAddr, u32)], prefer_v6: bool) -> Option<IpAddr> {
    let v6 = |ip: &IpAddr| ip.is_ipv6();
    addrs
        .iter()
        .map(|(ip, _)| *ip)
        .find(|ip| v6(ip) == prefer_v6)
        .or_else(|| addrs.first().map(|(ip, _)| *ip))
}

/// The unspecified address of a family, for slots without an answer.
pub fn unspecified(v6: bool) -> IpAddr {
    if v6 {
        IpAddr::V6(Ipv6Addr::UNSPECIFIED)
    } else {
        IpAddr::V4(Ipv4Addr::UNSPECIFIED)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use hickory_proto::rr::rdata::{A, AAAA, CNAME, SRV};
    use hickory_proto::rr::Record;

    fn name(s: &str) -> Name {
        dns_name(s).unwrap()
    }

    /// A response to `query` built with the same library, as a name server
    /// would send it.
    fn answer(query: &[u8], f: impl FnOnce(&mut Message)) -> Vec<u8> {
        let q = Message::from_vec(query).unwrap();
        let mut m = Message::new(q.metadata.id, MessageType::Response, OpCode::Query);
        m.metadata.recursion_desired = true;
        m.metadata.recursion_available = true;
        for x in q.queries {
            m.add_query(x);
        }
        f(&mut m);
        m.to_vec().unwrap()
    }

    #[test]
    fn queries_are_well_formed() {
        let q = encode_query(0x1234, "www.Example.org", QType::A, 512).unwrap();
        let m = Message::from_vec(&q).unwrap();
        assert_eq!(m.metadata.id, 0x1234);
        assert!(m.metadata.recursion_desired);
        assert_eq!(m.metadata.message_type, MessageType::Query);
        assert_eq!(m.queries.len(), 1);
        assert_eq!(m.queries[0].query_type(), RecordType::A);
        assert_eq!(*m.queries[0].name(), name("www.example.org"));
        assert!(m.edns.is_none(), "512 needs no EDNS");
        let q = encode_query(1, "_http._tcp.example.org.", QType::Srv, 4096).unwrap();
        let m = Message::from_vec(&q).unwrap();
        assert_eq!(m.queries[0].query_type(), RecordType::SRV);
        assert_eq!(m.max_payload(), 4096);
        for bad in ["", ".", "a..b", "bad name", &"x".repeat(64), "a/b"] {
            assert!(
                matches!(
                    encode_query(1, bad, QType::A, 512),
                    Err(DnsError::BadName(_))
                ),
                "{bad:?}"
            );
        }
    }

    #[test]
    fn addresses_follow_cnames_and_type() {
        let q = encode_query(7, "www.example.org", QType::A, 512).unwrap();
        let r = answer(&q, |m| {
            m.add_answer(Record::from_rdata(
                name("www.example.org"),
                300,
                RData::CNAME(CNAME(name("web.example.net"))),
            ));
            m.add_answer(Record::from_rdata(
                name("web.example.net"),
                60,
                RData::A(A(Ipv4Addr::new(192, 0, 2, 7))),
            ));
            // Not on the chain: ignored.
            m.add_answer(Record::from_rdata(
                name("other.example.net"),
                60,
                RData::A(A(Ipv4Addr::new(192, 0, 2, 99))),
            ));
            // Another type than asked: ignored.
            m.add_answer(Record::from_rdata(
                name("web.example.net"),
                60,
                RData::AAAA(AAAA(Ipv6Addr::LOCALHOST)),
            ));
        });
        let d = decode_response(&r, 7, "www.example.org", QType::A).unwrap();
        assert_eq!(d.status, Status::Valid);
        assert!(d.cname);
        assert_eq!(d.addrs, vec![(IpAddr::V4(Ipv4Addr::new(192, 0, 2, 7)), 60)]);
        // A chain that ends on a CNAME: an error, through a CNAME.
        let r = answer(&q, |m| {
            m.add_answer(Record::from_rdata(
                name("www.example.org"),
                300,
                RData::CNAME(CNAME(name("web.example.net"))),
            ));
        });
        let d = decode_response(&r, 7, "www.example.org", QType::A).unwrap();
        assert_eq!(d.status, Status::Other);
        assert!(d.cname && d.addrs.is_empty());
        // No alias: not counted as one.
        let r = answer(&q, |m| {
            m.add_answer(Record::from_rdata(
                name("www.example.org"),
                60,
                RData::A(A(Ipv4Addr::new(192, 0, 2, 8))),
            ));
        });
        assert!(
            !decode_response(&r, 7, "www.example.org", QType::A)
                .unwrap()
                .cname
        );
    }

    #[test]
    fn answers_to_other_queries_are_not_ours() {
        let q = encode_query(7, "a.example", QType::A, 512).unwrap();
        let r = answer(&q, |_| {});
        assert_eq!(
            decode_response(&r, 8, "a.example", QType::A),
            Err(DnsError::NotOurs)
        );
        assert_eq!(
            decode_response(&r, 7, "b.example", QType::A),
            Err(DnsError::NotOurs)
        );
        assert_eq!(
            decode_response(&r, 7, "a.example", QType::Aaaa),
            Err(DnsError::NotOurs)
        );
        // Our own query echoed back is not an answer.
        assert_eq!(
            decode_response(&q, 7, "a.example", QType::A),
            Err(DnsError::NotOurs)
        );
        // The question's case does not matter (0x20 encoding).
        assert!(decode_response(&r, 7, "A.EXAMPLE", QType::A).is_ok());
        for junk in [&[][..], &[0u8; 5][..], &r[..r.len() - 3]] {
            assert!(decode_response(junk, 7, "a.example", QType::A).is_err());
        }
    }

    #[test]
    fn statuses() {
        let q = encode_query(9, "a.example", QType::A, 512).unwrap();
        let with = |code: ResponseCode| {
            let r = answer(&q, |m| m.metadata.response_code = code);
            decode_response(&r, 9, "a.example", QType::A)
                .unwrap()
                .status
        };
        assert_eq!(with(ResponseCode::NXDomain), Status::Nx);
        assert_eq!(with(ResponseCode::Refused), Status::Refused);
        assert_eq!(with(ResponseCode::ServFail), Status::Other);
        // NOERROR without a record of the type asked: other.
        assert_eq!(with(ResponseCode::NoError), Status::Other);
        // Truncated: not valid over UDP even with records.
        let r = answer(&q, |m| {
            m.metadata.truncation = true;
            m.add_answer(Record::from_rdata(
                name("a.example"),
                5,
                RData::A(A(Ipv4Addr::LOCALHOST)),
            ));
        });
        let d = decode_response(&r, 9, "a.example", QType::A).unwrap();
        assert!(d.truncated);
        assert_eq!(d.status, Status::Other);
    }

    #[test]
    fn srv_targets_with_additional_addresses() {
        let q = encode_query(3, "_http._tcp.example.org", QType::Srv, 4096).unwrap();
        let r = answer(&q, |m| {
            for (t, w, p) in [("a.example.org", 10, 8080), ("b.example.org", 30, 8081)] {
                m.add_answer(Record::from_rdata(
                    name("_http._tcp.example.org"),
                    30,
                    RData::SRV(SRV::new(1, w, p, name(t))),
                ));
            }
            m.add_answer(Record::from_rdata(
                name("_http._tcp.example.org"),
                30,
                RData::SRV(SRV::new(1, 0, 1, Name::root())),
            ));
            m.add_additional(Record::from_rdata(
                name("a.example.org"),
                30,
                RData::A(A(Ipv4Addr::new(192, 0, 2, 1))),
            ));
        });
        let d = decode_response(&r, 3, "_http._tcp.example.org", QType::Srv).unwrap();
        assert_eq!(d.status, Status::Valid);
        assert_eq!(d.srv.len(), 2, "the '.' target means no service there");
        assert_eq!(d.srv[0].target, "a.example.org");
        assert_eq!((d.srv[0].weight, d.srv[0].port), (10, 8080));
        assert_eq!(
            d.srv[0].addrs,
            vec![IpAddr::V4(Ipv4Addr::new(192, 0, 2, 1))]
        );
        assert_eq!(d.srv[1].target, "b.example.org");
        assert!(d.srv[1].addrs.is_empty());
    }

    #[test]
    fn holds_keep_a_server_up_within_their_period() {
        let h = Holds::default();
        let s = Duration::from_secs;
        assert!(!h.takes_down(Failure::Nx, Some(s(10))));
        assert!(h.takes_down(Failure::Nx, Some(s(31))));
        assert!(h.takes_down(Failure::Timeout, None));
        let mut h = h;
        h.set("nx", s(1)).unwrap();
        assert!(h.takes_down(Failure::Nx, Some(s(2))));
        assert!(!h.takes_down(Failure::Other, Some(s(2))));
        assert!(h.set("bogus", s(1)).is_err());
        assert_eq!(Option::<Failure>::from(Status::Valid), None);
        assert_eq!(Option::<Failure>::from(Status::Nx), Some(Failure::Nx));
    }

    fn srv(t: &str, port: u16, weight: u16) -> SrvTarget {
        SrvTarget {
            priority: 1,
            weight,
            port,
            target: t.to_string(),
            addrs: Vec::new(),
        }
    }

    #[test]
    fn template_slots_stay_put() {
        let s = Duration::from_secs;
        let mut slots: Vec<Option<Slot>> = vec![None; 3];
        assert!(assign_srv(
            &mut slots,
            &[srv("a", 80, 1), srv("b", 80, 1)],
            s(0),
            s(5)
        ));
        let names = |slots: &[Option<Slot>]| -> Vec<String> {
            slots
                .iter()
                .map(|x| x.as_ref().map_or("-".into(), |x| x.record.target.clone()))
                .collect()
        };
        assert_eq!(names(&slots), ["a", "b", "-"]);
        // Same records, another order: nothing moves, nothing changes.
        assert!(!assign_srv(
            &mut slots,
            &[srv("b", 80, 1), srv("a", 80, 1)],
            s(1),
            s(5)
        ));
        // A weight change is a change, in place.
        assert!(assign_srv(
            &mut slots,
            &[srv("b", 80, 5), srv("a", 80, 1)],
            s(1),
            s(5)
        ));
        assert_eq!(slots[1].as_ref().unwrap().record.weight, 5);
        // "a" gone: kept until obsolete, then freed; "c" takes a free slot.
        assert!(assign_srv(
            &mut slots,
            &[srv("b", 80, 5), srv("c", 80, 1)],
            s(3),
            s(5)
        ));
        assert_eq!(names(&slots), ["a", "b", "c"]);
        assert!(assign_srv(
            &mut slots,
            &[srv("b", 80, 5), srv("c", 80, 1)],
            s(3),
            s(5)
        ));
        assert_eq!(names(&slots), ["-", "b", "c"]);
        // More records than slots: the extra ones wait.
        let many: Vec<_> = ["b", "c", "d", "e"].iter().map(|t| srv(t, 80, 1)).collect();
        assert!(assign_srv(&mut slots, &many, s(1), s(5)));
        assert_eq!(names(&slots), ["d", "b", "c"]);
        // Another port is another record.
        assert!(assign_srv(&mut slots, &[srv("b", 81, 1)], s(10), s(5)));
        assert_eq!(names(&slots), ["b", "-", "-"]);
    }

    #[test]
    fn resolv_conf() {
        let t = "# comment\nsearch example.org\nnameserver 192.0.2.53\nnameserver ::1 # local\nnameserver fe80::1%eth0\nnameserver bogus\noptions ndots:2\n";
        let ns = parse_resolv_conf(t);
        assert_eq!(
            ns,
            vec![
                "192.0.2.53:53".parse().unwrap(),
                "[::1]:53".parse().unwrap(),
                "[fe80::1]:53".parse().unwrap(),
            ]
        );
    }

    #[test]
    fn family_preference() {
        let v4 = (IpAddr::V4(Ipv4Addr::LOCALHOST), 1);
        let v6 = (IpAddr::V6(Ipv6Addr::LOCALHOST), 1);
        assert_eq!(preferred(&[v4, v6], true), Some(v6.0));
        assert_eq!(preferred(&[v4, v6], false), Some(v4.0));
        assert_eq!(preferred(&[v4], true), Some(v4.0));
        assert_eq!(preferred(&[], true), None);
        assert!(unspecified(true).is_unspecified());
    }

    #[test]
    fn fallbacks() {
        assert_eq!(QType::A.fallback(), Some(QType::Aaaa));
        assert_eq!(QType::Aaaa.fallback(), Some(QType::A));
        assert_eq!(QType::Srv.fallback(), None);
    }
}
