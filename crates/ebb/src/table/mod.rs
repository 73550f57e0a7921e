//! Stick tables: per-key counters shared by every thread (HAProxy's
//! `stick-table`), without sockets.
//!
//! A table is declared in a proxy section:
//!
//! ```text
//! stick-table type ip|ipv6|integer|string [len N]|binary [len N]
//!             size N [expire T] [nopurge] [store TYPE[,TYPE...]]...
//! ```
//!
//! [`parse_stick_table`] turns the words into a [`TableDef`]; [`Table`]
//! holds the entries. The parts:
//!
//! - **Keys** live in an elastic binary tree of the key's kind (`ebtree`'s
//!   `MbKey<4>`, `MbKey<16>`, `u32`, `BytesKey`), unique per key. Strings are
//!   cut to `len` bytes and binary keys cut or zero-padded to `len` bytes, as
//!   HAProxy stores them ([`Table::key`] builds the key from a sample).
//! - **Data**: only the stored types take room (one slot per `store` type).
//!   Counters are `u64`; rates are [`FreqCtr`]s over the period given in
//!   the type (`http_req_rate(10s)`), read with HAProxy's sliding-window
//!   formula.
//! - **Expiry**: each touch sets the entry's expiry to `now + expire`; the
//!   entries sit in a second tree by expiry tick, and [`Table::expire`]
//!   (given `now`, called by the runtime from a task on the scheduler's
//!   wait queue) removes the expired unreferenced ones and returns the next
//!   tick to wake at. A touch leaves the entry's node where it was (as
//!   HAProxy's does): a node may lag behind its entry's expiry, never lead
//!   it, and the expiry pass or an eviction that reaches a lagging node
//!   moves it to the entry's expiry first. A busy entry thus costs no tree
//!   work per request, only one move per `expire` period. A referenced
//!   (tracked) entry is never removed; an expired one is requeued and
//!   removed when its last reference goes, if still expired.
//! - **Memory** is bounded by `size` entries: creating one in a full table
//!   first evicts the unreferenced entry that expires first (the oldest
//!   touched when there is no `expire`); with `nopurge`, or when every
//!   entry is referenced, creation fails and the caller goes on without
//!   tracking (HAProxy does the same).
//! - **References**: [`Table::track`] returns an [`EntryRef`] and counts a
//!   reference; [`Table::release`] drops it. A stream tracking a key
//!   (`track-sc0`) holds one for its life, so its entry cannot vanish under
//!   it.
//!
//! ## Threads and the lock
//!
//! HAProxy shares a table between threads (a table lock for the trees, an
//! entry lock for data). ebb keeps one `Mutex` per table around both trees
//! and the data. Every operation holds it for one tree descent or one
//! slot access (well under a microsecond, no allocation except when an
//! entry is created, never across I/O or a callback); a stream that tracks
//! an entry keeps its generation-checked handle and later updates go to the
//! slot without a descent. If contention ever shows in profiles, the table
//! splits into shards by key hash, each with its own lock and trees,
//! without changing this API.

pub mod cli;
pub mod dict;
mod freq;
mod store;
mod track;

pub use freq::{FreqCtr, SharedFreqCtr};
pub use store::{Dumped, EntryRef, StKey, Table, WireEntry, WireVal};
pub use track::{http_failure, Pending, Stk, Tables};

use std::fmt;

/// Default `len` of string and binary keys (HAProxy's: 32 bytes).
pub const DEFAULT_KEY_LEN: usize = 32;

/// The key type of a table.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum KeyType {
    /// IPv4 address (IPv6 sources mapped to IPv4 fit; others do not).
    Ip,
    /// IPv6 address (IPv4 sources stored as IPv4-mapped).
    Ipv6,
    /// 32-bit integer (HAProxy's `integer`).
    Integer,
    /// String cut to `len` bytes.
    String(usize),
    /// Binary block cut or zero-padded to `len` bytes.
    Binary(usize),
}

/// A stored data type; rates carry their period in milliseconds, arrays
/// (HAProxy 2.5+'s `gpt(N)`, `gpc(N)`, `gpc_rate(N,P)`) their number of
/// elements (1 to 100).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum DataType {
    ConnCur,
    ConnCnt,
    ConnRate(u32),
    SessCnt,
    SessRate(u32),
    HttpReqCnt,
    HttpReqRate(u32),
    HttpErrCnt,
    HttpErrRate(u32),
    BytesInCnt,
    BytesInRate(u32),
    BytesOutCnt,
    BytesOutRate(u32),
    Gpc0,
    Gpc0Rate(u32),
    Gpt0,
    ServerId,
    Gpc1,
    Gpc1Rate(u32),
    ServerKey,
    HttpFailCnt,
    HttpFailRate(u32),
    Gpt(u8),
    Gpc(u8),
    GpcRate(u8, u32),
}

/// What an event adds to, naming a data type without its period (and an
/// array type without its size: an element is a `Data` and an index).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Data {
    ConnCur,
    ConnCnt,
    ConnRate,
    SessCnt,
    SessRate,
    HttpReqCnt,
    HttpReqRate,
    HttpErrCnt,
    HttpErrRate,
    BytesInCnt,
    BytesInRate,
    BytesOutCnt,
    BytesOutRate,
    Gpc0,
    Gpc0Rate,
    Gpt0,
    ServerId,
    Gpc1,
    Gpc1Rate,
    ServerKey,
    HttpFailCnt,
    HttpFailRate,
    Gpt,
    Gpc,
    GpcRate,
}

/// The number of [`Data`] kinds.
pub const DATA_KINDS: usize = 25;

/// HAProxy's largest array (`STKTABLE_MAX_DT_ARRAY_SIZE`).
pub const MAX_ARRAY: usize = 100;

impl DataType {
    /// The kind, without the period.
    pub fn data(self) -> Data {
        match self {
            DataType::ConnCur => Data::ConnCur,
            DataType::ConnCnt => Data::ConnCnt,
            DataType::ConnRate(_) => Data::ConnRate,
            DataType::SessCnt => Data::SessCnt,
            DataType::SessRate(_) => Data::SessRate,
            DataType::HttpReqCnt => Data::HttpReqCnt,
            DataType::HttpReqRate(_) => Data::HttpReqRate,
            DataType::HttpErrCnt => Data::HttpErrCnt,
            DataType::HttpErrRate(_) => Data::HttpErrRate,
            DataType::BytesInCnt => Data::BytesInCnt,
            DataType::BytesInRate(_) => Data::BytesInRate,
            DataType::BytesOutCnt => Data::BytesOutCnt,
            DataType::BytesOutRate(_) => Data::BytesOutRate,
            DataType::Gpc0 => Data::Gpc0,
            DataType::Gpc0Rate(_) => Data::Gpc0Rate,
            DataType::Gpt0 => Data::Gpt0,
            DataType::ServerId => Data::ServerId,
            DataType::Gpc1 => Data::Gpc1,
            DataType::Gpc1Rate(_) => Data::Gpc1Rate,
            DataType::ServerKey => Data::ServerKey,
            DataType::HttpFailCnt => Data::HttpFailCnt,
            DataType::HttpFailRate(_) => Data::HttpFailRate,
            DataType::Gpt(_) => Data::Gpt,
            DataType::Gpc(_) => Data::Gpc,
            DataType::GpcRate(..) => Data::GpcRate,
        }
    }

    /// The period of a rate.
    pub fn period(self) -> Option<u32> {
        match self {
            DataType::ConnRate(p)
            | DataType::SessRate(p)
            | DataType::HttpReqRate(p)
            | DataType::HttpErrRate(p)
            | DataType::BytesInRate(p)
            | DataType::BytesOutRate(p)
            | DataType::Gpc0Rate(p)
            | DataType::Gpc1Rate(p)
            | DataType::HttpFailRate(p)
            | DataType::GpcRate(_, p) => Some(p),
            _ => None,
        }
    }

    /// The number of values: an array's size, else 1.
    pub fn elems(self) -> usize {
        match self {
            DataType::Gpt(n) | DataType::Gpc(n) | DataType::GpcRate(n, _) => usize::from(n),
            _ => 1,
        }
    }
}

impl Data {
    /// HAProxy's name of the type (`show table`, `store`).
    pub fn name(self) -> &'static str {
        match self {
            Data::ConnCur => "conn_cur",
            Data::ConnCnt => "conn_cnt",
            Data::ConnRate => "conn_rate",
            Data::SessCnt => "sess_cnt",
            Data::SessRate => "sess_rate",
            Data::HttpReqCnt => "http_req_cnt",
            Data::HttpReqRate => "http_req_rate",
            Data::HttpErrCnt => "http_err_cnt",
            Data::HttpErrRate => "http_err_rate",
            Data::BytesInCnt => "bytes_in_cnt",
            Data::BytesInRate => "bytes_in_rate",
            Data::BytesOutCnt => "bytes_out_cnt",
            Data::BytesOutRate => "bytes_out_rate",
            Data::Gpc0 => "gpc0",
            Data::Gpc0Rate => "gpc0_rate",
            Data::Gpt0 => "gpt0",
            Data::ServerId => "server_id",
            Data::Gpc1 => "gpc1",
            Data::Gpc1Rate => "gpc1_rate",
            Data::ServerKey => "server_key",
            Data::HttpFailCnt => "http_fail_cnt",
            Data::HttpFailRate => "http_fail_rate",
            Data::Gpt => "gpt",
            Data::Gpc => "gpc",
            Data::GpcRate => "gpc_rate",
        }
    }

    const ALL: [Data; DATA_KINDS] = [
        Data::ConnCur,
        Data::ConnCnt,
        Data::ConnRate,
        Data::SessCnt,
        Data::SessRate,
        Data::HttpReqCnt,
        Data::HttpReqRate,
        Data::HttpErrCnt,
        Data::HttpErrRate,
        Data::BytesInCnt,
        Data::BytesInRate,
        Data::BytesOutCnt,
        Data::BytesOutRate,
        Data::Gpc0,
        Data::Gpc0Rate,
        Data::Gpt0,
        Data::ServerId,
        Data::Gpc1,
        Data::Gpc1Rate,
        Data::ServerKey,
        Data::HttpFailCnt,
        Data::HttpFailRate,
        Data::Gpt,
        Data::Gpc,
        Data::GpcRate,
    ];

    fn is_rate(self) -> bool {
        self.name().ends_with("_rate")
    }

    /// Whether the type is an array (`gpt`, `gpc`, `gpc_rate`).
    pub fn is_array(self) -> bool {
        matches!(self, Data::Gpt | Data::Gpc | Data::GpcRate)
    }

    /// Where HAProxy 2.6 reads a legacy type a table does not store: the
    /// array element that replaces it (`gpc0` is `gpc[0]`, `gpc1` is
    /// `gpc[1]`, `gpt0` is `gpt[0]`, and their rates).
    pub fn fallback(self) -> Option<(Data, usize)> {
        match self {
            Data::Gpc0 => Some((Data::Gpc, 0)),
            Data::Gpc1 => Some((Data::Gpc, 1)),
            Data::Gpc0Rate => Some((Data::GpcRate, 0)),
            Data::Gpc1Rate => Some((Data::GpcRate, 1)),
            Data::Gpt0 => Some((Data::Gpt, 0)),
            _ => None,
        }
    }
}

/// The order in which HAProxy lists an entry's data (its data type ids).
pub const SHOW_ORDER: [Data; DATA_KINDS] = [
    Data::ServerId,
    Data::Gpt0,
    Data::Gpc0,
    Data::Gpc0Rate,
    Data::ConnCnt,
    Data::ConnRate,
    Data::ConnCur,
    Data::SessCnt,
    Data::SessRate,
    Data::HttpReqCnt,
    Data::HttpReqRate,
    Data::HttpErrCnt,
    Data::HttpErrRate,
    Data::BytesInCnt,
    Data::BytesInRate,
    Data::BytesOutCnt,
    Data::BytesOutRate,
    Data::Gpc1,
    Data::Gpc1Rate,
    Data::ServerKey,
    Data::HttpFailCnt,
    Data::HttpFailRate,
    Data::Gpt,
    Data::Gpc,
    Data::GpcRate,
];

impl Data {
    /// HAProxy's id of the type (`STKTABLE_DT_*`, the bit of the peers
    /// protocol's data field).
    pub fn wire_id(self) -> u32 {
        SHOW_ORDER.iter().position(|&d| d == self).unwrap_or(0) as u32
    }

    /// The type of HAProxy id `id`, if ebb stores it.
    pub fn from_wire_id(id: u32) -> Option<Data> {
        SHOW_ORDER.get(id as usize).copied()
    }

    /// Whether the type is a rate (a frequency counter).
    pub fn rate(self) -> bool {
        self.is_rate()
    }

    /// The data type called `name` (`data.NAME` on the CLI).
    pub fn by_name(name: &str) -> Option<Data> {
        // `server_name`: HAProxy's former name of `server_key`.
        let name = if name == "server_name" {
            "server_key"
        } else {
            name
        };
        Data::ALL.into_iter().find(|d| d.name() == name)
    }
}

/// A parsed `stick-table` line.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TableDef {
    /// The table's name: its proxy's name, as in HAProxy.
    pub name: String,
    pub key: KeyType,
    /// Maximum number of entries.
    pub size: usize,
    /// Entry lifetime after its last touch, in ms; None: never expire.
    pub expire: Option<u32>,
    /// When full, refuse new entries instead of evicting the oldest.
    pub nopurge: bool,
    /// Stored types in declaration order, each at most once.
    pub store: Vec<DataType>,
    /// `peers NAME`: the peers section that shares this table.
    pub peers: Option<String>,
    /// HAProxy's key size (the table definition's key length on the
    /// peers protocol): 4 for ip and integer, 16 for ipv6, `len + 1` for
    /// a string with `len` (32 without), `len` for binary.
    pub key_size: usize,
    /// The name on the peers protocol when it is not `name`: a `table T`
    /// line of peers section P is called `P/T` locally and `/T` on the
    /// wire (HAProxy 2.6's `nid`, slash included).
    pub wire_name: Option<String>,
    /// `srvkey name|addr`: what `stick` rules store as `server_key`.
    pub srvkey: SrvKey,
}

/// What a table's `server_key` holds (HAProxy's `srvkey`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum SrvKey {
    /// The server's name (the default).
    #[default]
    Name,
    /// The server's address, `IP:PORT` (`IP:+N` for a server without a
    /// port of its own), as HAProxy writes it.
    Addr,
}

impl TableDef {
    /// The name the peers protocol carries.
    pub fn wire_name(&self) -> &str {
        self.wire_name.as_deref().unwrap_or(&self.name)
    }
}

/// Why a `stick-table` line was refused.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DefError(pub String);

impl fmt::Display for DefError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

fn err<T>(s: impl Into<String>) -> Result<T, DefError> {
    Err(DefError(s.into()))
}

/// HAProxy's time syntax: a number with an optional unit (us, ms, s, m, h,
/// d; ms by default), in ms. Periods and expiries fit a u32 (49 days), as
/// ticks do.
fn parse_ms(what: &str, v: &str) -> Result<u32, DefError> {
    let split = v.find(|c: char| !c.is_ascii_digit()).unwrap_or(v.len());
    let (num, unit) = v.split_at(split);
    let n: u64 = match num.parse() {
        Ok(n) => n,
        Err(_) => return err(format!("{what}: '{v}' is not a time")),
    };
    let ms = match unit {
        "us" => n / 1000,
        "" | "ms" => n,
        "s" => n.saturating_mul(1000),
        "m" => n.saturating_mul(60_000),
        "h" => n.saturating_mul(3_600_000),
        "d" => n.saturating_mul(86_400_000),
        _ => return err(format!("{what}: unknown time unit in '{v}'")),
    };
    // Ticks compare wrap-safe up to 2^31 ms (about 24.8 days).
    if ms >= 1 << 31 {
        return err(format!("{what}: '{v}' is too large (at most 24 days)"));
    }
    Ok(ms as u32)
}

/// HAProxy's size syntax: a number with an optional k, m or g suffix
/// (powers of 1024).
fn parse_count(what: &str, v: &str) -> Result<u64, DefError> {
    let (num, mul) = match v.as_bytes().last() {
        Some(b'k' | b'K') => (&v[..v.len() - 1], 1u64 << 10),
        Some(b'm' | b'M') => (&v[..v.len() - 1], 1 << 20),
        Some(b'g' | b'G') => (&v[..v.len() - 1], 1 << 30),
        _ => (v, 1),
    };
    match num.parse::<u64>() {
        Ok(n) if num.bytes().all(|b| b.is_ascii_digit()) => n
            .checked_mul(mul)
            .ok_or_else(|| DefError(format!("{what}: '{v}' is too large"))),
        _ => err(format!("{what}: '{v}' is not a number")),
    }
}

/// Parses one `store` type: `NAME`, `NAME(PERIOD)` for a rate,
/// `NAME(N)` for an array, `gpc_rate(N,PERIOD)`.
fn parse_data_type(s: &str) -> Result<DataType, DefError> {
    let (name, arg) = match s.find('(') {
        Some(i) if s.ends_with(')') => (&s[..i], Some(&s[i + 1..s.len() - 1])),
        Some(_) => return err(format!("store: malformed data type '{s}'")),
        None => (s, None),
    };
    let Some(d) = Data::by_name(name) else {
        return err(format!(
            "store: data type '{name}' is not supported by ebb (supported: {})",
            Data::ALL.map(|d| d.name()).join(", ")
        ));
    };
    // HAProxy's messages: a missing or unexpected argument, an array size
    // out of 1..100.
    let (nb, period) = if d.is_array() {
        let Some(a) = arg else {
            return err(format!("store: missing argument to store option '{name}'"));
        };
        let (n, rest) = match a.split_once(',') {
            Some((n, r)) => (n, Some(r)),
            None => (a, None),
        };
        let nb = match n.trim().parse::<usize>() {
            Ok(n) if (1..=MAX_ARRAY).contains(&n) => n as u8,
            _ => {
                return err(format!(
                    "store: array size is out of allowed range (1-{MAX_ARRAY}) for store option '{name}'"
                ))
            }
        };
        (nb, rest)
    } else {
        (1, arg)
    };
    let p = match (d.is_rate(), period) {
        (true, Some(p)) => {
            let ms = parse_ms(&format!("store {name}"), p.trim())?;
            if ms == 0 {
                return err(format!("store: {name} needs a period above zero"));
            }
            ms
        }
        (true, None) => return err(format!("store: missing argument to store option '{name}'")),
        (false, Some(_)) => {
            return err(format!(
                "store: unexpected argument to store option '{name}'"
            ))
        }
        (false, None) => 0,
    };
    Ok(match d {
        Data::ConnCur => DataType::ConnCur,
        Data::ConnCnt => DataType::ConnCnt,
        Data::ConnRate => DataType::ConnRate(p),
        Data::SessCnt => DataType::SessCnt,
        Data::SessRate => DataType::SessRate(p),
        Data::HttpReqCnt => DataType::HttpReqCnt,
        Data::HttpReqRate => DataType::HttpReqRate(p),
        Data::HttpErrCnt => DataType::HttpErrCnt,
        Data::HttpErrRate => DataType::HttpErrRate(p),
        Data::BytesInCnt => DataType::BytesInCnt,
        Data::BytesInRate => DataType::BytesInRate(p),
        Data::BytesOutCnt => DataType::BytesOutCnt,
        Data::BytesOutRate => DataType::BytesOutRate(p),
        Data::Gpc0 => DataType::Gpc0,
        Data::Gpc0Rate => DataType::Gpc0Rate(p),
        Data::Gpt0 => DataType::Gpt0,
        Data::ServerId => DataType::ServerId,
        Data::Gpc1 => DataType::Gpc1,
        Data::Gpc1Rate => DataType::Gpc1Rate(p),
        Data::ServerKey => DataType::ServerKey,
        Data::HttpFailCnt => DataType::HttpFailCnt,
        Data::HttpFailRate => DataType::HttpFailRate(p),
        Data::Gpt => DataType::Gpt(nb),
        Data::Gpc => DataType::Gpc(nb),
        Data::GpcRate => DataType::GpcRate(nb, p),
    })
}

/// The types of a `store` list: split on the commas outside parentheses
/// (`gpc_rate(4,10s),gpc(4)`).
fn split_store(v: &str) -> Vec<&str> {
    let mut out = Vec::new();
    let (mut depth, mut start) = (0i32, 0);
    for (i, c) in v.char_indices() {
        match c {
            '(' => depth += 1,
            ')' => depth -= 1,
            ',' if depth <= 0 => {
                out.push(&v[start..i]);
                start = i + 1;
            }
            _ => {}
        }
    }
    out.push(&v[start..]);
    out
}

/// Parses the words after `stick-table` for the table of proxy `name`.
pub fn parse_stick_table(name: &str, w: &[&str]) -> Result<TableDef, DefError> {
    let mut key = None;
    let mut size = None;
    let mut expire = None;
    let mut nopurge = false;
    let mut store: Vec<DataType> = Vec::new();
    let mut peers = None;
    let mut key_size = 0;
    let mut srvkey = SrvKey::Name;
    let mut i = 0;
    let val = |i: usize, kw: &str| {
        w.get(i + 1)
            .copied()
            .ok_or_else(|| DefError(format!("'{kw}' expects a value")))
    };
    while i < w.len() {
        match w[i] {
            "type" => {
                let t = val(i, "type")?;
                i += 2;
                let mut len = || -> Result<(usize, bool), DefError> {
                    if w.get(i) == Some(&"len") {
                        let v = val(i, "len")?;
                        i += 2;
                        match v.parse::<usize>() {
                            // HAProxy's bound: a key fits one buffer; ebb takes
                            // at most 1024 bytes, far beyond common use.
                            Ok(n) if (1..=1024).contains(&n) => Ok((n, true)),
                            _ => err(format!("'len {v}': expected 1..1024")),
                        }
                    } else {
                        Ok((DEFAULT_KEY_LEN, false))
                    }
                };
                key = Some(match t {
                    "ip" => {
                        key_size = 4;
                        KeyType::Ip
                    }
                    "ipv6" => {
                        key_size = 16;
                        KeyType::Ipv6
                    }
                    "integer" => {
                        key_size = 4;
                        KeyType::Integer
                    }
                    "string" => {
                        let (n, given) = len()?;
                        // HAProxy counts the string's NUL when `len` is given.
                        key_size = if given { n + 1 } else { n };
                        KeyType::String(n)
                    }
                    "binary" => {
                        let (n, _) = len()?;
                        key_size = n;
                        KeyType::Binary(n)
                    }
                    o => {
                        return err(format!(
                        "unknown table type '{o}' (expected ip, ipv6, integer, string or binary)"
                    ))
                    }
                });
                continue;
            }
            "size" => {
                let n = parse_count("size", val(i, "size")?)?;
                if n == 0 {
                    return err("'size' must be greater than zero");
                }
                size = Some(usize::try_from(n).map_err(|_| DefError("size too large".into()))?);
            }
            "expire" => expire = Some(parse_ms("expire", val(i, "expire")?)?),
            "nopurge" => {
                nopurge = true;
                i += 1;
                continue;
            }
            "store" => {
                for s in split_store(val(i, "store")?) {
                    let d = parse_data_type(s)?;
                    if store.iter().any(|x| x.data() == d.data()) {
                        return err(format!(
                            "store: data type '{}' is stored twice",
                            d.data().name()
                        ));
                    }
                    store.push(d);
                }
            }
            "peers" => {
                let v = val(i, "peers")?;
                if peers.is_some() {
                    return err("'peers' is given twice");
                }
                peers = Some(v.to_string());
            }
            "srvkey" => {
                srvkey = match val(i, "srvkey")? {
                    "name" => SrvKey::Name,
                    "addr" => SrvKey::Addr,
                    o => return err(format!("unknown server key type '{o}'")),
                };
            }
            "write-to" | "recv-only" => {
                return err(format!(
                    "stick-table option '{}' is not supported by ebb",
                    w[i]
                ))
            }
            o => return err(format!("unknown stick-table option '{o}'")),
        }
        i += 2;
    }
    // HAProxy 2.6: the arrays replace the legacy types, never beside them.
    let has = |d: Data| store.iter().any(|x| x.data() == d);
    if has(Data::Gpt) && has(Data::Gpt0) {
        return err("simultaneous usage of 'gpt' and 'gpt0' in a same table is not permitted as 'gpt' overrides 'gpt0'");
    }
    if has(Data::Gpc) && (has(Data::Gpc0) || has(Data::Gpc1)) {
        return err("simultaneous usage of 'gpc' and 'gpc[0/1]' in a same table is not permitted as 'gpc' overrides 'gpc[0/1]'");
    }
    if has(Data::GpcRate) && (has(Data::Gpc0Rate) || has(Data::Gpc1Rate)) {
        return err("simultaneous usage of 'gpc_rate' and 'gpc[0/1]_rate' in a same table is not permitted as 'gpc_rate' overrides 'gpc[0/1]_rate'");
    }
    let Some(key) = key else {
        return err("stick-table: missing 'type'");
    };
    let Some(size) = size else {
        return err("stick-table: missing 'size'");
    };
    Ok(TableDef {
        name: name.to_string(),
        key,
        size,
        expire,
        nopurge,
        store,
        peers,
        key_size,
        wire_name: None,
        srvkey,
    })
}

#[cfg(test)]
mod tests;
