//! The stick-table commands of the runtime socket, with HAProxy 2.6's
//! syntax and output:
//!
//! ```text
//! show table
//! show table NAME [data.TYPE OP VALUE]... | [key KEY]
//! clear table NAME [data.TYPE OP VALUE]... | [key KEY]
//! set table NAME key KEY [data.TYPE VALUE]...
//! ```
//!
//! `OP` is one of eq, ne, lt, le, gt, ge. An entry prints as
//! `0xID: key=KEY use=REFS exp=MS TYPE=V...` in HAProxy's data order, a
//! rate as `TYPE(PERIOD)=V`; `0xID` is the entry's slot where HAProxy
//! prints its address.

use std::fmt::Write;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use super::{Data, Dumped, KeyType, StKey, Table, Tables};

pub(crate) fn key_type_name(k: KeyType) -> &'static str {
    match k {
        KeyType::Ip => "ip",
        KeyType::Ipv6 => "ipv6",
        KeyType::Integer => "integer",
        KeyType::String(_) => "string",
        KeyType::Binary(_) => "binary",
    }
}

fn header(out: &mut String, t: &Table) {
    let d = t.def();
    let _ = writeln!(
        out,
        "# table: {}, type: {}, size:{}, used:{}",
        d.name,
        key_type_name(d.key),
        d.size,
        t.len()
    );
}

/// `show table`: one header line per table, the last declared first (as
/// HAProxy lists them).
pub fn show_all(tables: &Tables) -> String {
    let mut out = String::new();
    for t in tables.iter().rev() {
        header(&mut out, t);
    }
    out
}

/// A key as HAProxy prints it.
pub fn key_text(k: &StKey, kt: KeyType) -> String {
    match k {
        StKey::Ip(a) => Ipv4Addr::from(a.0).to_string(),
        StKey::Ipv6(a) => Ipv6Addr::from(a.0).to_string(),
        StKey::Int(n) => n.to_string(),
        StKey::Bytes(b) => match kt {
            KeyType::Binary(_) => b.0.iter().fold(String::new(), |mut s, c| {
                let _ = write!(s, "{c:02X}");
                s
            }),
            _ => {
                let end = b.0.iter().position(|&c| c == 0).unwrap_or(b.0.len());
                let mut s = String::new();
                // HAProxy's `dump_text`: `\`, space and `=` escaped with a
                // backslash, as are TAB, LF, CR and ESC (`\t` `\n` `\r`
                // `\e`); other bytes outside printable ASCII as `\xHH`.
                for &c in &b.0[..end] {
                    match c {
                        b'\\' | b' ' | b'=' => {
                            s.push('\\');
                            s.push(c as char);
                        }
                        b'\t' => s.push_str("\\t"),
                        b'\n' => s.push_str("\\n"),
                        b'\r' => s.push_str("\\r"),
                        0x1b => s.push_str("\\e"),
                        _ if c.is_ascii_graphic() => s.push(c as char),
                        _ => {
                            let _ = write!(s, "\\x{c:02X}");
                        }
                    }
                }
                s
            }
        },
    }
}

/// A key typed on the CLI, for table `t`.
fn parse_key(t: &Table, text: &str) -> Result<StKey, String> {
    let bad = || "Invalid key".to_string();
    match t.def().key {
        KeyType::Ip => {
            let a: Ipv4Addr = text.parse().map_err(|_| bad())?;
            t.key_ip(IpAddr::V4(a)).ok_or_else(bad)
        }
        KeyType::Ipv6 => {
            // IPv6 text only (HAProxy's inet_pton(AF_INET6)): `1.2.3.4` is
            // refused, `::ffff:1.2.3.4` is the mapped address.
            let a: Ipv6Addr = text.parse().map_err(|_| bad())?;
            t.key_ip(IpAddr::V6(a)).ok_or_else(bad)
        }
        KeyType::Integer => {
            let n: u32 = text.parse().map_err(|_| bad())?;
            t.key_int(n).ok_or_else(bad)
        }
        KeyType::String(_) => t.key_bytes(text.as_bytes()).ok_or_else(bad),
        KeyType::Binary(_) => {
            if text.len() % 2 != 0 {
                return Err(bad());
            }
            let bytes = (0..text.len())
                .step_by(2)
                .map(|i| u8::from_str_radix(text.get(i..i + 2).unwrap_or("x"), 16))
                .collect::<Result<Vec<u8>, _>>()
                .map_err(|_| bad())?;
            t.key_bytes(&bytes).ok_or_else(bad)
        }
    }
}

fn entry_line(out: &mut String, t: &Table, e: &Dumped) {
    let _ = write!(
        out,
        "0x{:x}: key={} use={} exp={}",
        e.id,
        key_text(&e.key, t.def().key),
        e.refs,
        e.exp
    );
    for (dt, idx, v) in &e.data {
        let name = dt.data().name();
        if dt.data().is_array() {
            // HAProxy numbers an element before the first '_' of the
            // array's name: gpc3, gpc3_rate(P), gpt0.
            let (pfx, sfx) = name.split_at(name.find('_').unwrap_or(name.len()));
            let _ = write!(out, " {pfx}{idx}{sfx}");
        } else {
            out.push(' ');
            out.push_str(name);
        }
        match dt.period() {
            Some(p) => {
                let _ = write!(out, "({p})={v}");
            }
            None if dt.data() == Data::ServerKey => {
                let k = super::dict::get(*v);
                let _ = write!(out, "={}", k.as_deref().unwrap_or("-"));
            }
            None => {
                let _ = write!(out, "={v}");
            }
        }
    }
    out.push('\n');
}

/// A `data.TYPE OP VALUE` filter.
struct Filter {
    data: Data,
    op: fn(i64, i64) -> bool,
    value: i64,
}

impl Filter {
    /// HAProxy reads a stored value as a `long long` and compares it with
    /// the filter's (so `gt -1` holds for every counter).
    fn holds(&self, v: u64) -> bool {
        (self.op)(v as i64, self.value)
    }
}

/// What follows the table name: filters or a key.
enum Select {
    All(Vec<Filter>),
    Key(StKey),
}

/// HAProxy's answers to a malformed `clear table`.
const CLEAR_USAGE: &str =
    "Required arguments: <table> \"data.<store_data_type>\" <operator> <value> or <table> key <key>";
const SHOW_USAGE: &str =
    "Optional argument only supports \"data.<store_data_type>\" <operator> <value> and key <key>";
/// HAProxy's answer to a malformed `set table`.
pub const SET_USAGE: &str =
    "Required arguments: <table> key <key> [data.<store_data_type> <value>]*";

/// What follows the table name. A key that does not parse for this table
/// is "Invalid key", HAProxy's answer for an ipv6 or integer table.
/// `Ok(None)`: an ip table's key that is no address; HAProxy reads it
/// leniently (text as 0.0.0.0, `1.2.3` as 1.2.3.0) and then, holding no
/// such entry, answers nothing; so does ebb (`set table` refuses it).
fn parse_select(t: &Table, args: &[&str], usage: &str) -> Result<Option<Select>, String> {
    match args {
        [] => Ok(Some(Select::All(Vec::new()))),
        ["key"] => Err("Key value expected".into()),
        ["key", k, ..] => match parse_key(t, k) {
            Ok(k) => Ok(Some(Select::Key(k))),
            Err(_) if t.def().key == KeyType::Ip => Ok(None),
            Err(e) => Err(e),
        },
        [d, ..] if d.starts_with("data.") => {
            let mut filters = Vec::new();
            for (i, w) in args.chunks(3).enumerate() {
                let n = i + 1;
                let name = w[0].strip_prefix("data.");
                let data = name
                    .and_then(Data::by_name)
                    .ok_or_else(|| format!("Filter entry #{n}: Unknown data type"))?;
                if !t.def().store.iter().any(|s| s.data() == data) {
                    return Err(format!(
                        "Filter entry #{n}: Data type not stored in this table"
                    ));
                }
                let op: fn(i64, i64) -> bool = match w.get(1).copied() {
                    Some("eq") => |a, b| a == b,
                    Some("ne") => |a, b| a != b,
                    Some("lt") => |a, b| a < b,
                    Some("le") => |a, b| a <= b,
                    Some("gt") => |a, b| a > b,
                    Some("ge") => |a, b| a >= b,
                    _ => {
                        return Err(format!(
                            "Filter entry #{n}: Require and operator among \"eq\", \"ne\", \"le\", \"ge\", \"lt\", \"gt\""
                        ))
                    }
                };
                let value = w.get(2).and_then(|v| v.parse().ok()).ok_or_else(|| {
                    format!("Filter entry #{n}: Require a valid integer value to compare against")
                })?;
                filters.push(Filter { data, op, value });
            }
            Ok(Some(Select::All(filters)))
        }
        _ => Err(usage.into()),
    }
}

/// `show table NAME ...` at `now`.
pub fn show(tables: &Tables, name: &str, args: &[&str], now: u32) -> Result<String, String> {
    let t = tables.get(name).ok_or("No such table")?;
    let Some(sel) = parse_select(t, args, SHOW_USAGE)? else {
        return Ok(String::new());
    };
    let mut out = String::new();
    header(&mut out, t);
    let rows = match &sel {
        Select::Key(k) => t.dump(now, Some(k), &|_| true),
        Select::All(f) => t.dump(now, None, &|read| {
            f.iter().all(|f| read(f.data).is_some_and(|v| f.holds(v)))
        }),
    };
    if rows.is_empty() && matches!(sel, Select::Key(_)) {
        // HAProxy answers nothing for a key it does not hold.
        return Ok(String::new());
    }
    for e in &rows {
        entry_line(&mut out, t, e);
    }
    Ok(out)
}

/// `clear table NAME ...`: removes the unreferenced entries selected.
pub fn clear(tables: &Tables, name: &str, args: &[&str], now: u32) -> Result<String, String> {
    let t = tables.get(name).ok_or("No such table")?;
    let Some(sel) = parse_select(t, args, CLEAR_USAGE)? else {
        return Ok(String::new());
    };
    match sel {
        Select::All(f) if f.is_empty() => {
            t.clear();
        }
        Select::Key(k) => {
            if let Some(r) = t.lookup(&k) {
                t.remove(r);
            }
        }
        Select::All(f) => {
            let rows = t.dump(now, None, &|read| {
                f.iter().all(|f| read(f.data).is_some_and(|v| f.holds(v)))
            });
            for e in rows {
                if let Some(r) = t.lookup(&e.key) {
                    t.remove(r);
                }
            }
        }
    }
    Ok(String::new())
}

/// `set table NAME key KEY [data.TYPE VALUE]...`: creates the entry if
/// needed and sets the values (a rate counts VALUE events from now).
pub fn set(tables: &Tables, name: &str, args: &[&str], now: u32) -> Result<String, String> {
    let t = tables.get(name).ok_or("No such table")?;
    // `set table NAME` alone: HAProxy 2.6 runs it as a dump that removes
    // every unreferenced entry (its clear); ebb refuses it.
    let (k, rest) = match args {
        ["key"] => return Err("Key value expected".into()),
        ["key", k, rest @ ..] => (parse_key(t, k)?, rest),
        _ => return Err(SET_USAGE.into()),
    };
    // The entry is made first, then each value set in turn; a bad pair
    // stops there with its error (HAProxy's order: what came before it
    // stays).
    let r = t
        .get_or_create(&k, now)
        .ok_or("Unable to allocate a new entry")?;
    t.touch(r, now);
    for w in rest.chunks(2) {
        let Some(name) = w[0].strip_prefix("data.") else {
            return Err("\"data.<type>\" followed by a value expected".into());
        };
        let Some(v) = w.get(1) else {
            return Err("Require a valid integer value to store".into());
        };
        let data = Data::by_name(name).ok_or("Unknown data type")?;
        if !t.def().store.iter().any(|s| s.data() == data) {
            return Err("Data type not stored in this table".into());
        }
        // HAProxy's `long long`, stored in the type's width: -1 in a
        // 32-bit counter reads 4294967295.
        let v: i64 = v
            .parse()
            .map_err(|_| "Require a valid integer value to store")?;
        let v = match data {
            Data::BytesInCnt | Data::BytesOutCnt => v as u64,
            _ => u64::from(v as u32),
        };
        // HAProxy takes a number for `server_key` and sets nothing.
        if data != Data::ServerKey {
            t.set_data(r, data, v, now);
        }
    }
    Ok(String::new())
}
