//! The peers protocol's messages (HAProxy's "HAProxyS" 2.1), without
//! sockets: encoded integers, the handshake lines, message framing, table
//! definitions and entry updates. Everything that comes from a peer is
//! checked here; a message that does not parse is a [`Malformed`] error
//! (the session then sends a protocol error and closes).
//!
//! Framing: two bytes (class, type); a type with its top bit set (the
//! stick-table messages 0x80-0x86) is followed by an encoded length and
//! that many bytes of data.

use crate::table::{Data, KeyType, StKey, WireEntry, WireVal};

/// The protocol's name and version on the hello line.
pub const PROTO_NAME: &str = "HAProxyS";
pub const MAJOR: u32 = 2;
pub const MINOR: u32 = 1;

/// Handshake status codes.
pub const ST_SUCCESS: u32 = 200;
pub const ST_TRYAGAIN: u32 = 300;
pub const ST_ERRPROTO: u32 = 501;
pub const ST_ERRVERSION: u32 = 502;
pub const ST_ERRHOST: u32 = 503;
pub const ST_ERRPEER: u32 = 504;

/// Message classes.
pub const CLASS_CONTROL: u8 = 0;
pub const CLASS_ERROR: u8 = 1;
pub const CLASS_STKT: u8 = 10;
pub const CLASS_RESERVED: u8 = 255;

/// Control messages.
pub const CTRL_RESYNCREQ: u8 = 0;
pub const CTRL_RESYNCFINISHED: u8 = 1;
pub const CTRL_RESYNCPARTIAL: u8 = 2;
pub const CTRL_RESYNCCONFIRM: u8 = 3;
pub const CTRL_HEARTBEAT: u8 = 4;

/// Error messages.
pub const ERR_PROTO: u8 = 0;
pub const ERR_SIZELIMIT: u8 = 1;

/// Stick-table messages.
pub const STKT_UPDATE: u8 = 0x80;
pub const STKT_INCUPDATE: u8 = 0x81;
pub const STKT_DEFINE: u8 = 0x82;
pub const STKT_SWITCH: u8 = 0x83;
pub const STKT_ACK: u8 = 0x84;
pub const STKT_UPDATE_TIMED: u8 = 0x85;
pub const STKT_INCUPDATE_TIMED: u8 = 0x86;

/// The largest message data ebb takes (HAProxy's bound is its buffer
/// size, 16 kB by default): beyond it the peer gets a size-limit error.
pub const MAX_MSG: usize = 64 * 1024;

/// Key types on the wire.
const KT_SINT: u64 = 2;
const KT_IPV4: u64 = 4;
const KT_IPV6: u64 = 5;
const KT_STR: u64 = 6;
const KT_BIN: u64 = 7;

/// HAProxy's data type ids this decoder knows the shape of (2.6: 0..=24).
const DT_SERVER_KEY: u32 = 19;
const DT_GPT: u32 = 22;
const DT_GPC: u32 = 23;
const DT_GPC_RATE: u32 = 24;
const DT_COUNT: u32 = 25;

/// Entries of a dictionary cache (HAProxy's `PEER_STKT_CACHE_MAX_ENTRIES`).
pub const DICT_CACHE: usize = 128;

/// One session's dictionary caches for `server_key` values (HAProxy's
/// `dcache`): a string is sent once with a cache id (from 1), then the
/// id alone. Both sides start empty with each session.
pub struct DictCache {
    /// What each id we sent stands for (a [`crate::table::dict`] number;
    /// 0: unused), and the slot the next new string takes (round robin).
    tx: [u64; DICT_CACHE],
    tx_next: usize,
    /// What each id the peer sent stands for.
    rx: [u64; DICT_CACHE],
}

impl Default for DictCache {
    fn default() -> DictCache {
        DictCache {
            tx: [0; DICT_CACHE],
            tx_next: 0,
            rx: [0; DICT_CACHE],
        }
    }
}

impl DictCache {
    /// Appends dictionary value `n` (a [`crate::table::dict`] number, 0
    /// for none) as HAProxy encodes it: 0 for none; else the length of
    /// what follows, then the cache id, and the string (its length, its
    /// bytes) when the peer does not know that id yet.
    fn put(&mut self, out: &mut Vec<u8>, n: u64) {
        let Some(s) = crate::table::dict::get(n) else {
            put_int(out, 0);
            return;
        };
        if let Some(i) = self.tx.iter().position(|&x| x == n) {
            put_int(out, 1);
            put_int(out, i as u64 + 1);
            return;
        }
        let i = self.tx_next;
        self.tx[i] = n;
        self.tx_next = (i + 1) % DICT_CACHE;
        let mut d = Vec::new();
        put_int(&mut d, i as u64 + 1);
        put_int(&mut d, s.len() as u64);
        d.extend_from_slice(s.as_bytes());
        put_int(out, d.len() as u64);
        out.extend_from_slice(&d);
    }

    /// Reads a dictionary value of `len` bytes at `d[*p..]` (`len` was
    /// read already): its [`crate::table::dict`] number (None: no value,
    /// or a string the dictionary cannot keep).
    fn get(&mut self, d: &[u8], p: &mut usize, len: u64) -> Result<Option<u64>, Malformed> {
        let bad = Malformed("dictionary value");
        if len == 0 {
            return Ok(None);
        }
        let len = usize::try_from(len).map_err(|_| bad.clone())?;
        let end = p.checked_add(len).ok_or(bad.clone())?;
        let part = d.get(*p..end).ok_or(bad.clone())?;
        *p = end;
        let mut q = 0;
        let id = get_int(part, &mut q).ok_or(bad.clone())?;
        let slot = usize::try_from(id)
            .ok()
            .filter(|&i| (1..=DICT_CACHE).contains(&i))
            .ok_or(bad.clone())?
            - 1;
        if q == part.len() {
            return Ok(Some(self.rx[slot]).filter(|&n| n != 0));
        }
        let vlen = get_int(part, &mut q).ok_or(bad.clone())?;
        let vlen = usize::try_from(vlen).map_err(|_| bad.clone())?;
        let v = part.get(q..q.saturating_add(vlen)).ok_or(bad)?;
        let n = crate::table::dict::intern(&String::from_utf8_lossy(v));
        self.rx[slot] = n.unwrap_or(0);
        Ok(n)
    }
}

/// A message that does not follow the protocol.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Malformed(pub &'static str);

/// Appends `v` in the protocol's variable-length encoding.
pub fn put_int(out: &mut Vec<u8>, mut v: u64) {
    if v < 240 {
        out.push(v as u8);
        return;
    }
    out.push((v as u8) | 240);
    v = (v - 240) >> 4;
    while v >= 128 {
        out.push((v as u8) | 128);
        v = (v - 128) >> 7;
    }
    out.push(v as u8);
}

/// Reads an encoded integer at `*pos`; None if `buf` ends first or the
/// encoding is longer than a u64 allows.
pub fn get_int(buf: &[u8], pos: &mut usize) -> Option<u64> {
    let mut p = *pos;
    let first = *buf.get(p)?;
    p += 1;
    let mut v = u64::from(first);
    if first >= 240 {
        let mut shift = 4u32;
        loop {
            let b = *buf.get(p)?;
            p += 1;
            if shift > 60 {
                return None;
            }
            v = v.checked_add(u64::from(b).checked_shl(shift)?)?;
            shift += 7;
            if b < 128 {
                break;
            }
        }
    }
    *pos = p;
    Some(v)
}

fn get_u32(buf: &[u8], pos: &mut usize) -> Option<u32> {
    let b = buf.get(*pos..*pos + 4)?;
    *pos += 4;
    Some(u32::from_be_bytes([b[0], b[1], b[2], b[3]]))
}

/// One framed message.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Frame<'a> {
    pub class: u8,
    pub kind: u8,
    /// The data of a stick-table message (empty for the others).
    pub data: &'a [u8],
}

/// Cuts the next message off `buf`: Ok(Some((frame, bytes used))),
/// Ok(None) if more bytes are needed, Err if the length is malformed or
/// over [`MAX_MSG`].
pub fn next_frame(buf: &[u8]) -> Result<Option<(Frame<'_>, usize)>, Malformed> {
    if buf.len() < 2 {
        return Ok(None);
    }
    let (class, kind) = (buf[0], buf[1]);
    if kind & 0x80 == 0 {
        return Ok(Some((
            Frame {
                class,
                kind,
                data: &[],
            },
            2,
        )));
    }
    let mut pos = 2;
    let Some(len) = get_int(buf, &mut pos) else {
        // At most 5 bytes encode a length the protocol allows.
        if buf.len() >= 2 + 5 {
            return Err(Malformed("message length"));
        }
        return Ok(None);
    };
    if len > MAX_MSG as u64 {
        return Err(Malformed("message too large"));
    }
    let end = pos + len as usize;
    if buf.len() < end {
        return Ok(None);
    }
    Ok(Some((
        Frame {
            class,
            kind,
            data: &buf[pos..end],
        },
        end,
    )))
}

/// Appends a message without data (control, error).
pub fn put_ctrl(out: &mut Vec<u8>, class: u8, kind: u8) {
    out.push(class);
    out.push(kind);
}

fn put_msg(out: &mut Vec<u8>, kind: u8, data: &[u8]) {
    out.push(CLASS_STKT);
    out.push(kind);
    put_int(out, data.len() as u64);
    out.extend_from_slice(data);
}

/// A table as a peer defines it (its "table definition" message).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TableDefMsg {
    /// The sender's id of the table (its switch and ack messages use it).
    pub id: u64,
    pub name: String,
    pub key_type: u64,
    pub key_len: u64,
    /// Bit N: HAProxy's data type N is in each update, in id order.
    pub data: u64,
    /// The entries' lifetime in ms, when sent.
    pub expire: Option<u64>,
    /// Elements of the array types (gpt, gpc, gpc_rate), by id.
    pub nbelem: [u64; DT_COUNT as usize],
}

/// The wire key type of a table's key.
pub fn wire_key_type(k: KeyType) -> u64 {
    match k {
        KeyType::Ip => KT_IPV4,
        KeyType::Ipv6 => KT_IPV6,
        KeyType::Integer => KT_SINT,
        KeyType::String(_) => KT_STR,
        KeyType::Binary(_) => KT_BIN,
    }
}

/// Appends the definition message of local table `id`.
pub fn put_define(out: &mut Vec<u8>, id: u64, def: &crate::table::TableDef) {
    let mut d = Vec::new();
    put_int(&mut d, id);
    put_int(&mut d, def.wire_name().len() as u64);
    d.extend_from_slice(def.wire_name().as_bytes());
    put_int(&mut d, wire_key_type(def.key));
    put_int(&mut d, def.key_size as u64);
    let mut bits = 0u64;
    let mut params = Vec::new();
    let mut types: Vec<_> = def.store.clone();
    types.sort_by_key(|t| t.data().wire_id());
    for t in &types {
        let id = t.data().wire_id();
        bits |= 1 << id;
        // HAProxy 2.6's parameters, each set after its type's id: an
        // array's size, then a rate's period.
        if t.data().is_array() || t.period().is_some() {
            put_int(&mut params, u64::from(id));
        }
        if t.data().is_array() {
            put_int(&mut params, t.elems() as u64);
        }
        if let Some(p) = t.period() {
            put_int(&mut params, u64::from(p));
        }
    }
    put_int(&mut d, bits);
    put_int(&mut d, u64::from(def.expire.unwrap_or(0)));
    d.extend_from_slice(&params);
    put_msg(out, STKT_DEFINE, &d);
}

fn is_freq(id: u32) -> bool {
    matches!(id, 3 | 5 | 8 | 10 | 12 | 14 | 16 | 18 | 21 | DT_GPC_RATE)
}

fn is_array(id: u32) -> bool {
    matches!(id, DT_GPT | DT_GPC | DT_GPC_RATE)
}

/// Parses a table definition message.
pub fn parse_define(d: &[u8]) -> Result<TableDefMsg, Malformed> {
    let bad = || Malformed("table definition");
    let mut p = 0;
    let id = get_int(d, &mut p).ok_or_else(bad)?;
    let nlen = get_int(d, &mut p).ok_or_else(bad)? as usize;
    if nlen == 0 || nlen >= d.len().saturating_sub(p) {
        return Err(bad());
    }
    let name = d.get(p..p + nlen).ok_or_else(bad)?;
    let name = String::from_utf8_lossy(name).into_owned();
    p += nlen;
    let key_type = get_int(d, &mut p).ok_or_else(bad)?;
    let key_len = get_int(d, &mut p).ok_or_else(bad)?;
    let data = get_int(d, &mut p).ok_or_else(bad)?;
    let mut m = TableDefMsg {
        id,
        name,
        key_type,
        key_len,
        data,
        expire: None,
        nbelem: [0; DT_COUNT as usize],
    };
    // Older senders stop here; then no array type may be announced.
    if let Some(e) = get_int(d, &mut p) {
        m.expire = Some(e);
        for t in 0..DT_COUNT {
            if data & (1 << t) == 0 || !(is_array(t) || is_freq(t)) {
                continue;
            }
            let ty = get_int(d, &mut p).ok_or(Malformed("data type parameters"))?;
            if ty != u64::from(t) {
                return Err(Malformed("data type parameters out of order"));
            }
            if is_array(t) {
                let n = get_int(d, &mut p).ok_or(Malformed("array size"))?;
                if n == 0 || n > 100 {
                    return Err(Malformed("array size"));
                }
                m.nbelem[t as usize] = n;
            }
            if is_freq(t) {
                get_int(d, &mut p).ok_or(Malformed("period"))?;
            }
        }
    } else if (0..DT_COUNT).any(|t| data & (1 << t) != 0 && is_array(t)) {
        return Err(Malformed("array type without its size"));
    }
    Ok(m)
}

/// Appends a table switch message.
pub fn put_switch(out: &mut Vec<u8>, id: u64) {
    let mut d = Vec::new();
    put_int(&mut d, id);
    put_msg(out, STKT_SWITCH, &d);
}

/// Appends an ack of update `update` of the peer's table `id`.
pub fn put_ack(out: &mut Vec<u8>, id: u64, update: u32) {
    let mut d = Vec::new();
    put_int(&mut d, id);
    d.extend_from_slice(&update.to_be_bytes());
    put_msg(out, STKT_ACK, &d);
}

/// Parses an ack: (the table's id on our side, the update number).
pub fn parse_ack(d: &[u8]) -> Result<(u64, u32), Malformed> {
    let mut p = 0;
    let id = get_int(d, &mut p).ok_or(Malformed("ack"))?;
    let u = get_u32(d, &mut p).ok_or(Malformed("ack"))?;
    Ok((id, u))
}

/// Parses a switch message: the peer's table id.
pub fn parse_switch(d: &[u8]) -> Result<u64, Malformed> {
    get_int(d, &mut 0).ok_or(Malformed("table switch"))
}

/// Appends a timed entry update; with `id` None, an incremental one (the
/// previous number + 1).
pub fn put_update(
    out: &mut Vec<u8>,
    id: Option<u32>,
    e: &WireEntry,
    def: &crate::table::TableDef,
    dict: &mut DictCache,
) {
    let mut d = Vec::new();
    if let Some(id) = id {
        d.extend_from_slice(&id.to_be_bytes());
    }
    d.extend_from_slice(&e.exp.to_be_bytes());
    match (&e.key, def.key) {
        (StKey::Ip(a), _) => d.extend_from_slice(&a.0),
        (StKey::Ipv6(a), _) => d.extend_from_slice(&a.0),
        (StKey::Int(n), _) => d.extend_from_slice(&n.to_be_bytes()),
        (StKey::Bytes(b), KeyType::String(_)) => {
            // A string goes without its padding (HAProxy's strlen); the
            // receiver cuts it to its own length.
            let n = b.0.iter().position(|&c| c == 0).unwrap_or(b.0.len());
            put_int(&mut d, n as u64);
            d.extend_from_slice(&b.0[..n]);
        }
        (StKey::Bytes(b), _) => {
            let mut k = b.0.to_vec();
            k.resize(def.key_size, 0);
            d.extend_from_slice(&k);
        }
    }
    for &(t, v) in &e.data {
        match v {
            WireVal::Cnt(n) if t == Data::ServerKey => dict.put(&mut d, n),
            WireVal::Cnt(n) => put_int(&mut d, n),
            WireVal::Freq(el, cur, prev) => {
                put_int(&mut d, u64::from(el));
                put_int(&mut d, u64::from(cur));
                put_int(&mut d, u64::from(prev));
            }
        }
    }
    put_msg(
        out,
        if id.is_some() {
            STKT_UPDATE_TIMED
        } else {
            STKT_INCUPDATE_TIMED
        },
        &d,
    );
}

/// An update received: its number (None: previous + 1), its expiry
/// (None: untimed), the key bytes and the values ebb stores.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Update {
    pub id: Option<u32>,
    pub exp: Option<u32>,
    pub key: Vec<u8>,
    pub data: Vec<(Data, WireVal)>,
}

/// Parses an update of the peer's table `t` (kind: one of the four
/// update messages).
pub fn parse_update(
    kind: u8,
    d: &[u8],
    t: &TableDefMsg,
    dict: &mut DictCache,
) -> Result<Update, Malformed> {
    let with_id = matches!(kind, STKT_UPDATE | STKT_UPDATE_TIMED);
    let timed = matches!(kind, STKT_UPDATE_TIMED | STKT_INCUPDATE_TIMED);
    let bad = |w| Malformed(w);
    let mut p = 0;
    let id = if with_id {
        Some(get_u32(d, &mut p).ok_or(bad("update id"))?)
    } else {
        None
    };
    let exp = if timed {
        Some(get_u32(d, &mut p).ok_or(bad("update expiry"))?)
    } else {
        None
    };
    let key = match t.key_type {
        KT_STR => {
            let n = get_int(d, &mut p).ok_or(bad("key length"))?;
            let n = usize::try_from(n).map_err(|_| bad("key length"))?;
            let k = d.get(p..p.saturating_add(n)).ok_or(bad("key"))?;
            p += n;
            k.to_vec()
        }
        KT_SINT => {
            let k = d.get(p..p + 4).ok_or(bad("key"))?;
            p += 4;
            k.to_vec()
        }
        _ => {
            let n = usize::try_from(t.key_len).map_err(|_| bad("key length"))?;
            let k = d.get(p..p.saturating_add(n)).ok_or(bad("key"))?;
            p += n;
            k.to_vec()
        }
    };
    let mut data = Vec::new();
    for id in 0..DT_COUNT {
        if t.data & (1 << id) == 0 {
            continue;
        }
        let n = if is_array(id) {
            t.nbelem[id as usize]
        } else {
            1
        };
        for _ in 0..n {
            let v = get_int(d, &mut p).ok_or(bad("value"))?;
            let val = if is_freq(id) {
                let cur = get_int(d, &mut p).ok_or(bad("rate value"))?;
                let prev = get_int(d, &mut p).ok_or(bad("rate value"))?;
                WireVal::Freq(v as u32, cur as u32, prev as u32)
            } else if id == DT_SERVER_KEY {
                match dict.get(d, &mut p, v)? {
                    Some(n) => WireVal::Cnt(n),
                    None => continue,
                }
            } else {
                WireVal::Cnt(v)
            };
            if let Some(dt) = Data::from_wire_id(id) {
                data.push((dt, val));
            }
        }
    }
    Ok(Update { id, exp, key, data })
}

/// The key of an update for a local table of kind `k` (None if it does
/// not fit).
pub fn key_for(t: &crate::table::Table, k: &[u8]) -> Option<StKey> {
    match t.def().key {
        KeyType::Ip => {
            let a: [u8; 4] = k.try_into().ok()?;
            t.key_ip(std::net::IpAddr::from(a))
        }
        KeyType::Ipv6 => {
            let a: [u8; 16] = k.try_into().ok()?;
            t.key_ip(std::net::IpAddr::from(a))
        }
        KeyType::Integer => {
            let a: [u8; 4] = k.try_into().ok()?;
            t.key_int(u32::from_be_bytes(a))
        }
        KeyType::String(_) => {
            let end = k.iter().position(|&c| c == 0).unwrap_or(k.len());
            t.key_bytes(&k[..end])
        }
        KeyType::Binary(_) => t.key_bytes(k),
    }
}

/// The hello a connecting peer sends.
pub fn hello(remote: &str, local: &str, pid: u32) -> String {
    format!("{PROTO_NAME} {MAJOR}.{MINOR}\n{remote}\n{local} {pid} 1\n")
}

/// What the accepting side makes of the three hello lines: the
/// connecting peer's name, or the status code to refuse with.
pub fn check_hello(
    lines: [&str; 3],
    local: &str,
    known: &dyn Fn(&str) -> bool,
) -> Result<String, u32> {
    let Some(v) = lines[0]
        .strip_prefix(PROTO_NAME)
        .and_then(|r| r.strip_prefix(' '))
    else {
        return Err(ST_ERRPROTO);
    };
    let (maj, min) = v.split_once('.').ok_or(ST_ERRVERSION)?;
    match (maj.parse::<u32>(), min.parse::<u32>()) {
        (Ok(MAJOR), Ok(m)) if m <= MINOR => {}
        _ => return Err(ST_ERRVERSION),
    }
    if lines[1] != local {
        return Err(ST_ERRHOST);
    }
    let Some((name, _)) = lines[2].split_once(' ') else {
        return Err(ST_ERRPROTO);
    };
    if !known(name) {
        return Err(ST_ERRPEER);
    }
    Ok(name.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ints_round_trip_at_the_boundaries() {
        // HAProxy's boundaries: 240, 2288, 264432, 33818864.
        for (v, len) in [
            (0u64, 1),
            (239, 1),
            (240, 2),
            (2287, 2),
            (2288, 3),
            (264431, 3),
            (264432, 4),
            (33818863, 4),
            (33818864, 5),
            (u64::MAX, 10),
        ] {
            let mut b = Vec::new();
            put_int(&mut b, v);
            assert_eq!(b.len(), len, "{v}");
            let mut p = 0;
            assert_eq!(get_int(&b, &mut p), Some(v));
            assert_eq!(p, len);
            // Truncated: nothing.
            assert_eq!(get_int(&b[..len - 1], &mut 0), None);
        }
        // A run of continuation bytes never overflows.
        assert_eq!(get_int(&[0xff; 20], &mut 0), None);
    }

    #[test]
    fn frames_wait_for_their_bytes() {
        let mut b = Vec::new();
        put_ack(&mut b, 3, 77);
        for i in 0..b.len() {
            assert_eq!(next_frame(&b[..i]), Ok(None));
        }
        let (f, n) = next_frame(&b).unwrap().unwrap();
        assert_eq!((f.class, f.kind, n), (CLASS_STKT, STKT_ACK, b.len()));
        assert_eq!(parse_ack(f.data), Ok((3, 77)));
        assert!(next_frame(&[10, 0x80, 0xff, 0xff, 0xff, 0xff, 0xff]).is_err());
    }

    #[test]
    fn define_and_update_round_trip() {
        let def = crate::table::parse_stick_table(
            "t",
            &[
                "type",
                "ip",
                "size",
                "10",
                "expire",
                "30s",
                "store",
                "http_req_rate(10s),conn_cur,gpc0",
            ],
        )
        .unwrap();
        let mut b = Vec::new();
        put_define(&mut b, 1, &def);
        let (f, _) = next_frame(&b).unwrap().unwrap();
        let m = parse_define(f.data).unwrap();
        assert_eq!((m.name.as_str(), m.key_type, m.key_len), ("t", 4, 4));
        assert_eq!(m.data, (1 << 2) | (1 << 6) | (1 << 10));
        assert_eq!(m.expire, Some(30_000));
        let e = WireEntry {
            key: StKey::Ip(ebtree::MbKey([10, 0, 0, 1])),
            exp: 29_000,
            data: vec![
                (Data::Gpc0, WireVal::Cnt(5)),
                (Data::ConnCur, WireVal::Cnt(1)),
                (Data::HttpReqRate, WireVal::Freq(300, 7, 2)),
            ],
        };
        let mut b = Vec::new();
        put_update(&mut b, Some(9), &e, &def, &mut DictCache::default());
        let (f, _) = next_frame(&b).unwrap().unwrap();
        let u = parse_update(f.kind, f.data, &m, &mut DictCache::default()).unwrap();
        assert_eq!((u.id, u.exp), (Some(9), Some(29_000)));
        assert_eq!(u.key, vec![10, 0, 0, 1]);
        assert_eq!(u.data, e.data);
        // Cut anywhere: malformed, never a panic.
        for i in 0..f.data.len() {
            assert!(parse_update(f.kind, &f.data[..i], &m, &mut DictCache::default()).is_err());
        }
    }

    #[test]
    fn arrays_travel_as_haproxy_2_6_encodes_them() {
        let def = crate::table::parse_stick_table(
            "t",
            &[
                "type",
                "ip",
                "size",
                "10",
                "store",
                "gpc_rate(2,10s),gpt(3),http_fail_cnt,gpc(2)",
            ],
        )
        .unwrap();
        let mut b = Vec::new();
        put_define(&mut b, 1, &def);
        let (f, _) = next_frame(&b).unwrap().unwrap();
        // The parameters after the expiry, for arrays and rates only, in
        // id order: 22 (gpt) 3, 23 (gpc) 2, 24 (gpc_rate) 2 10000.
        let mut tail = Vec::new();
        for v in [22u64, 3, 23, 2, 24, 2, 10_000] {
            put_int(&mut tail, v);
        }
        assert!(f.data.ends_with(&tail), "{:?}", f.data);
        let m = parse_define(f.data).unwrap();
        assert_eq!(m.data, (1 << 20) | (1 << 22) | (1 << 23) | (1 << 24));
        assert_eq!((m.nbelem[22], m.nbelem[23], m.nbelem[24]), (3, 2, 2));
        let t = crate::table::Table::new(def.clone());
        let k = t.key_ip("10.1.2.3".parse().unwrap()).unwrap();
        let r = t.track(&k, 100).unwrap();
        t.add_at(r, Data::Gpc, 1, 4, 100);
        t.add_at(r, Data::GpcRate, 1, 2, 100);
        t.set_at(r, Data::Gpt, 2, 9);
        t.add(r, Data::HttpFailCnt, 3, 100);
        let e = t.wire_all(150).pop().unwrap();
        let mut b = Vec::new();
        put_update(&mut b, Some(1), &e, &def, &mut DictCache::default());
        let (f, _) = next_frame(&b).unwrap().unwrap();
        let u = parse_update(f.kind, f.data, &m, &mut DictCache::default()).unwrap();
        assert_eq!(u.data, e.data);
        assert_eq!(u.data.len(), 1 + 3 + 2 + 2);
        // Applied on another table: the same values.
        let t2 = crate::table::Table::new(def);
        assert!(t2.apply_remote(&k, u.exp, &u.data, 150));
        let r2 = t2.lookup(&k).unwrap();
        assert_eq!(t2.get_at(r2, Data::Gpc, 1, 150), Some(4));
        assert_eq!(t2.get_at(r2, Data::GpcRate, 1, 150), Some(2));
        assert_eq!(t2.get_at(r2, Data::Gpt, 2, 150), Some(9));
        assert_eq!(t2.get(r2, Data::HttpFailCnt, 150), Some(3));
    }

    #[test]
    fn server_keys_travel_once_then_by_cache_id() {
        let def = crate::table::parse_stick_table(
            "t",
            &["type", "ip", "size", "10", "store", "server_id,server_key"],
        )
        .unwrap();
        let mut b = Vec::new();
        put_define(&mut b, 1, &def);
        let (f, _) = next_frame(&b).unwrap().unwrap();
        let m = parse_define(f.data).unwrap();
        assert_eq!(m.data, (1 << 0) | (1 << 19));
        let t = crate::table::Table::new(def.clone());
        let n = crate::table::dict::intern("srv-proto-a").unwrap();
        for ip in ["10.0.0.1", "10.0.0.2"] {
            let r = t
                .track(&t.key_ip(ip.parse().unwrap()).unwrap(), 100)
                .unwrap();
            t.set(r, Data::ServerId, 3);
            t.set(r, Data::ServerKey, n);
        }
        let (mut tx, mut rx) = (DictCache::default(), DictCache::default());
        let mut sizes = Vec::new();
        for e in t.wire_all(100) {
            let mut b = Vec::new();
            put_update(&mut b, Some(1), &e, &def, &mut tx);
            let (f, _) = next_frame(&b).unwrap().unwrap();
            let u = parse_update(f.kind, f.data, &m, &mut rx).unwrap();
            assert_eq!(u.data, e.data);
            sizes.push(f.data.len());
            // Cut anywhere: malformed, never a panic.
            for i in 0..f.data.len() {
                assert!(parse_update(f.kind, &f.data[..i], &m, &mut DictCache::default()).is_err());
            }
        }
        // The second entry names the string by its cache id alone: the
        // length 1, the id 1 (HAProxy's encoding).
        assert_eq!(sizes[0] - sizes[1], "srv-proto-a".len() + 1);
        // An id the peer never defined carries no key; an id beyond the
        // cache is malformed.
        let mut d = vec![0, 0, 0, 1, 0, 0, 0, 0, 10, 0, 0, 9, 3];
        d.extend([1, 5]);
        let u = parse_update(STKT_UPDATE_TIMED, &d, &m, &mut DictCache::default()).unwrap();
        assert_eq!(u.data, [(Data::ServerId, WireVal::Cnt(3))]);
        let n = d.len();
        d[n - 1] = 129;
        d[n - 2] = 2;
        d.push(0);
        assert!(parse_update(STKT_UPDATE_TIMED, &d, &m, &mut DictCache::default()).is_err());
    }

    #[test]
    fn hello_checks_follow_haproxy_codes() {
        let known = |n: &str| n == "a";
        let ok = ["HAProxyS 2.1", "me", "a 123 1"];
        assert_eq!(check_hello(ok, "me", &known), Ok("a".into()));
        assert_eq!(
            check_hello(["HAProxyS 2.0", "me", "a 1 1"], "me", &known),
            Ok("a".into())
        );
        assert_eq!(
            check_hello(["HTTP/1.1", "me", "a 1 1"], "me", &known),
            Err(501)
        );
        assert_eq!(
            check_hello(["HAProxyS 3.0", "me", "a 1 1"], "me", &known),
            Err(502)
        );
        assert_eq!(
            check_hello(["HAProxyS 2.1", "you", "a 1 1"], "me", &known),
            Err(503)
        );
        assert_eq!(
            check_hello(["HAProxyS 2.1", "me", "b 1 1"], "me", &known),
            Err(504)
        );
        assert_eq!(
            check_hello(["HAProxyS 2.1", "me", "a"], "me", &known),
            Err(501)
        );
    }
}
