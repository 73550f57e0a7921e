//! Scalar values: times, sizes, numbers, switches, addresses, networks.
//! Each returns a message on error; the caller adds `file:line`.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::time::Duration;

/// Largest timer HAProxy accepts: ticks are milliseconds in a wrapping `u32`
/// compared by signed difference, so a delay must stay below 2^31 ms
/// (about 24.8 days).
pub(crate) const MAX_TIMER_MS: u64 = (1 << 31) - 1;

/// Parses a time: digits and an optional unit `us`, `ms`, `s`, `m`, `h`, `d`;
/// milliseconds when there is none (HAProxy's rule, configuration.txt 2.5).
pub(crate) fn parse_time(s: &str) -> Result<Duration, String> {
    parse_time_unit(s, 1_000)
}

/// As [`parse_time`] with the unit used when none is given, in microseconds.
pub(crate) fn parse_time_unit(s: &str, default_us: u64) -> Result<Duration, String> {
    let digits = s.bytes().take_while(u8::is_ascii_digit).count();
    if digits == 0 {
        return Err(format!(
            "invalid time '{s}': expected a number with an optional unit (us, ms, s, m, h, d)"
        ));
    }
    let n: u64 = s[..digits]
        .parse()
        .map_err(|_| format!("time '{s}' is too large"))?;
    let unit_us: u64 = match &s[digits..] {
        "" => default_us,
        "us" => 1,
        "ms" => 1_000,
        "s" => 1_000_000,
        "m" => 60_000_000,
        "h" => 3_600_000_000,
        "d" => 86_400_000_000,
        other => {
            return Err(format!(
                "invalid unit '{other}' in time '{s}' (expected us, ms, s, m, h or d)"
            ))
        }
    };
    let us = n
        .checked_mul(unit_us)
        .ok_or_else(|| format!("time '{s}' is too large"))?;
    if us / 1000 > MAX_TIMER_MS {
        return Err(format!(
            "time '{s}' is too large (the maximum is 2147483647 ms, about 24.8 days)"
        ));
    }
    Ok(Duration::from_micros(us))
}

/// Parses a size in bytes with an optional `k`, `m` or `g` suffix (powers of
/// 1024, as HAProxy's `parse_size_err()`).
pub(crate) fn parse_size(s: &str) -> Result<u64, String> {
    let digits = s.bytes().take_while(u8::is_ascii_digit).count();
    if digits == 0 {
        return Err(format!(
            "invalid size '{s}': expected a number with an optional k, m or g suffix"
        ));
    }
    let n: u64 = s[..digits]
        .parse()
        .map_err(|_| format!("size '{s}' is too large"))?;
    let mult: u64 = match s[digits..].to_ascii_lowercase().as_str() {
        "" => 1,
        "k" => 1 << 10,
        "m" => 1 << 20,
        "g" => 1 << 30,
        other => return Err(format!("invalid suffix '{other}' in size '{s}'")),
    };
    n.checked_mul(mult)
        .ok_or_else(|| format!("size '{s}' is too large"))
}

/// Parses an unsigned integer within `min..=max`.
pub(crate) fn parse_u32_range(what: &str, s: &str, min: u32, max: u32) -> Result<u32, String> {
    if s.is_empty() || !s.bytes().all(|b| b.is_ascii_digit()) {
        return Err(format!("'{what}' expects an integer, got '{s}'"));
    }
    match s.parse::<u64>() {
        Ok(n) if n >= u64::from(min) && n <= u64::from(max) => Ok(n as u32),
        _ => Err(format!("'{what}' value {s} is out of range ({min}..{max})")),
    }
}

/// An unsigned integer as C's `strtoul(s, &end, 0)` reads one where the
/// whole word must be a number: decimal, `0x` hexadecimal or `0` octal.
/// `None` for anything else or above `u32::MAX` (where strtoul would
/// wrap or saturate, ebb refuses).
pub(crate) fn parse_c_uint(s: &str) -> Option<u32> {
    let (digits, radix) = if let Some(h) = s.strip_prefix("0x").or_else(|| s.strip_prefix("0X")) {
        (h, 16)
    } else if s.len() > 1 && s.starts_with('0') {
        (&s[1..], 8)
    } else {
        (s, 10)
    };
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_hexdigit()) {
        return None;
    }
    u32::from_str_radix(digits, radix).ok()
}

/// `on` / `off`.
pub(crate) fn parse_on_off(what: &str, s: &str) -> Result<bool, String> {
    match s {
        "on" => Ok(true),
        "off" => Ok(false),
        _ => Err(format!("'{what}' expects 'on' or 'off', got '{s}'")),
    }
}

fn parse_port(port: &str, what: &str) -> Result<u16, String> {
    if port.is_empty() {
        return Err(format!("missing port in {what}"));
    }
    if !port.bytes().all(|b| b.is_ascii_digit()) {
        return Err(format!("invalid port '{port}' in {what}"));
    }
    match port.parse::<u32>() {
        Ok(p) if (1..=65535).contains(&p) => Ok(p as u16),
        _ => Err(format!("port '{port}' out of range (1..65535) in {what}")),
    }
}

/// Splits `HOST:PORT`, `[V6]:PORT` or `V6:PORT` (the last colon separates
/// the port, as HAProxy's `str2sa_range()`); strips `ipv4@` / `ipv6@`.
/// Returns the host (without brackets) and the port text.
fn split_host_port(addr: &str) -> Result<(String, String, Option<bool>), String> {
    let mut family: Option<bool> = None; // Some(true) = v4 forced, Some(false) = v6
    let mut a = addr;
    if let Some(rest) = a.strip_prefix("ipv4@") {
        family = Some(true);
        a = rest;
    } else if let Some(rest) = a.strip_prefix("ipv6@") {
        family = Some(false);
        a = rest;
    } else if let Some(at) = a.find('@') {
        return Err(format!(
            "address family '{}' is not supported in '{addr}' (only ipv4@ and ipv6@)",
            &a[..at + 1]
        ));
    }
    if let Some(rest) = a.strip_prefix('[') {
        let close = rest
            .find(']')
            .ok_or_else(|| format!("missing ']' in address '{addr}'"))?;
        let host = &rest[..close];
        let after = &rest[close + 1..];
        let port = after
            .strip_prefix(':')
            .ok_or_else(|| format!("missing port in address '{addr}'"))?;
        return Ok((host.to_string(), port.to_string(), family));
    }
    match a.rfind(':') {
        Some(i) => Ok((a[..i].to_string(), a[i + 1..].to_string(), family)),
        None => Err(format!(
            "missing port in address '{addr}' (expected ADDR:PORT)"
        )),
    }
}

/// A DNS name or IP literal, checked for plausible characters only.
fn valid_hostname(h: &str) -> bool {
    !h.is_empty()
        && h.len() <= 253
        && h.bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'.' || b == b'_')
}

/// An address word with its environment variables expanded, as
/// HAProxy's `str2sa_range()` does whether the word was quoted or not:
/// `$NAME` or `${NAME}` (letters, digits, `_`), unset ones giving nothing.
pub(crate) fn env_expand(s: &str) -> std::borrow::Cow<'_, str> {
    if !s.contains('$') {
        return std::borrow::Cow::Borrowed(s);
    }
    let mut out = String::with_capacity(s.len());
    let mut rest = s;
    while let Some(at) = rest.find('$') {
        out.push_str(&rest[..at]);
        let after = &rest[at + 1..];
        let braced = after.starts_with('{');
        let name_at = usize::from(braced);
        let name_len = after[name_at..]
            .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
            .unwrap_or(after.len() - name_at);
        let name = &after[name_at..name_at + name_len];
        if let Some(v) = crate::environ::get(name) {
            out.push_str(&v);
        }
        let mut next = name_at + name_len;
        if braced && after[next..].starts_with('}') {
            next += 1;
        }
        rest = &after[next..];
    }
    out.push_str(rest);
    std::borrow::Cow::Owned(out)
}

/// A server address: host (name or IP, not resolved) and port (its
/// environment variables expanded: [`env_expand`]).
pub(crate) fn parse_host_port(addr: &str) -> Result<(String, u16), String> {
    host_port(&env_expand(addr))
}

fn host_port(addr: &str) -> Result<(String, u16), String> {
    let (host, port, family) = split_host_port(addr)?;
    if port.starts_with('+') || port.starts_with('-') {
        return Err(format!("port offsets are not supported in '{addr}'"));
    }
    let port = parse_port(&port, &format!("address '{addr}'"))?;
    if host.contains(':') {
        host.parse::<Ipv6Addr>()
            .map_err(|_| format!("invalid IPv6 address '{host}' in '{addr}'"))?;
        if family == Some(true) {
            return Err(format!("'{host}' is not an IPv4 address"));
        }
        return Ok((host, port));
    }
    if host.is_empty() || host == "*" {
        return Err(format!("missing host in server address '{addr}'"));
    }
    if !valid_hostname(&host) {
        return Err(format!("invalid host name '{host}' in '{addr}'"));
    }
    if family == Some(false) && host.parse::<Ipv4Addr>().is_ok() {
        return Err(format!("'{host}' is not an IPv6 address"));
    }
    Ok((host, port))
}

/// A server address whose port may be missing (`10.0.0.1`, `10.0.0.1:`,
/// `[::1]`, `name`): HAProxy then connects to the port the client
/// connected to. Returns the host and the port, 0 when missing.
pub(crate) fn parse_server_addr(addr: &str) -> Result<(String, u16), String> {
    let addr = &*env_expand(addr);
    // No host is the any address (HAProxy's): connections go to the
    // address the client connected to.
    let any;
    let addr = if addr.starts_with(':') && !addr.starts_with("::") {
        any = format!("0.0.0.0{addr}");
        any.as_str()
    } else {
        addr
    };
    let bare = addr
        .strip_prefix("ipv4@")
        .or_else(|| addr.strip_prefix("ipv6@"))
        .unwrap_or(addr);
    let no_port = if bare.starts_with('[') {
        bare.ends_with(']') || bare.ends_with("]:")
    } else {
        // One colon at most, last: `IP:`; none: `IP`. More colons are an
        // IPv6 address whose last group is the port, as HAProxy reads it.
        let colons = bare.matches(':').count();
        colons == 0 || (colons == 1 && bare.ends_with(':'))
    };
    // Port 0 is no port (HAProxy's `str2sa_range` gives 0 either way).
    let zero = addr
        .rsplit_once(':')
        .filter(|(_, p)| !p.is_empty() && p.bytes().all(|b| b == b'0'));
    if let (false, Some((h, _))) = (no_port, zero) {
        let (host, _) = host_port(&format!("{h}:1"))?;
        return Ok((host, 0));
    }
    if !no_port {
        return host_port(addr);
    }
    let a = addr.strip_suffix(':').unwrap_or(addr);
    let (host, _) = host_port(&format!("{a}:1"))?;
    Ok((host, 0))
}

/// Largest number of ports one bind line may expand to, so a typo such as
/// `1-65535` cannot make the server open tens of thousands of sockets.
const MAX_BIND_PORTS: usize = 1024;

/// A bind address list: `ADDR:PORT[,ADDR:PORT...]`, each port possibly a
/// range `LOW-HIGH`. An empty host or `*` is 0.0.0.0, `::` is the IPv6 any
/// address, `localhost` is 127.0.0.1.
pub fn parse_bind_addrs(list: &str) -> Result<Vec<SocketAddr>, String> {
    let list = &*env_expand(list);
    let mut out = Vec::new();
    for item in list.split(',') {
        if item.is_empty() {
            return Err(format!("empty address in '{list}'"));
        }
        let (host, port, family) = split_host_port(item)?;
        let ip: IpAddr = match host.as_str() {
            "" | "*" => {
                if family == Some(false) {
                    IpAddr::V6(Ipv6Addr::UNSPECIFIED)
                } else {
                    IpAddr::V4(Ipv4Addr::UNSPECIFIED)
                }
            }
            "localhost" => IpAddr::V4(Ipv4Addr::LOCALHOST),
            h => h.parse::<IpAddr>().map_err(|_| {
                format!("invalid bind address '{h}' in '{item}' (an IP address is expected)")
            })?,
        };
        match (family, ip) {
            (Some(true), IpAddr::V6(_)) => {
                return Err(format!("'{host}' is not an IPv4 address"));
            }
            (Some(false), IpAddr::V4(_)) if !host.is_empty() && host != "*" => {
                return Err(format!("'{host}' is not an IPv6 address"));
            }
            _ => {}
        }
        let what = format!("bind address '{item}'");
        let (lo, hi) = match port.split_once('-') {
            Some((a, b)) if !a.is_empty() => (parse_port(a, &what)?, parse_port(b, &what)?),
            // Port 0: an ephemeral port chosen by the kernel (ebb prints
            // the real address at start; tests rely on it).
            _ if port == "0" => (0, 0),
            _ => {
                let p = parse_port(&port, &what)?;
                (p, p)
            }
        };
        if lo > hi {
            return Err(format!("invalid port range '{port}' in '{item}'"));
        }
        if out.len() + usize::from(hi - lo) + 1 > MAX_BIND_PORTS {
            return Err(format!(
                "too many ports in '{list}' (at most {MAX_BIND_PORTS} per bind line)"
            ));
        }
        for p in lo..=hi {
            out.push(SocketAddr::new(ip, p));
        }
    }
    Ok(out)
}

pub(crate) use crate::net::{is_token, parse_ipnet};

/// A header name, returned unchanged if valid.
pub(crate) fn header_name(s: &str) -> Result<String, String> {
    if is_token(s) {
        Ok(s.to_string())
    } else {
        Err(format!("invalid header name '{s}'"))
    }
}

/// A header value must not contain CR, LF or NUL (they would split the
/// message or be rejected by clients).
pub(crate) fn header_value(s: &str) -> Result<String, String> {
    if s.bytes().any(|b| b == b'\r' || b == b'\n' || b == 0) {
        Err(format!(
            "invalid character (CR, LF or NUL) in header value '{}'",
            s.escape_debug()
        ))
    } else {
        Ok(s.to_string())
    }
}

/// An `alpn` list (bind lines and crt-list lines). A client that takes
/// `h2` is served HTTP/2 (`mux::h2`).
pub(crate) fn alpn_list(v: &str) -> Result<Vec<String>, String> {
    let list: Vec<String> = v.split(',').map(str::to_string).collect();
    if list.iter().any(|p| p.is_empty() || p.len() > 255) {
        return Err(format!("invalid ALPN list '{v}'"));
    }
    Ok(list)
}

/// Proxy, server and ACL names: HAProxy allows letters, digits, `-`, `_`,
/// `.` and `:`.
pub(crate) fn valid_name(s: &str) -> bool {
    !s.is_empty()
        && s.bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.' | b':'))
}

/// Status codes HAProxy accepts for `errorfile` (its `http_err_codes`).
pub(crate) const ERRORFILE_CODES: &[u16] = &[
    200, 400, 401, 403, 404, 405, 407, 408, 410, 413, 425, 429, 500, 501, 502, 503, 504,
];

/// A status code within `lo..=hi`.
pub(crate) fn parse_status(what: &str, s: &str, lo: u16, hi: u16) -> Result<u16, String> {
    match s.parse::<u16>() {
        Ok(n) if (lo..=hi).contains(&n) && s.len() == 3 => Ok(n),
        _ => Err(format!(
            "invalid status code '{s}' for '{what}' (expected {lo}..{hi})"
        )),
    }
}

/// Task priority, as HAProxy's `nice`: -1024 (first) to 1024 (last).
pub(crate) fn parse_nice(s: &str) -> Result<i32, String> {
    match s.parse::<i32>() {
        Ok(n) if (-1024..=1024).contains(&n) => Ok(n),
        _ => Err(format!("'nice' value '{s}' is out of range (-1024..1024)")),
    }
}

/// Edit distance, for "did you mean" hints on unknown keywords.
fn distance(a: &str, b: &str) -> usize {
    let b: Vec<char> = b.chars().collect();
    let mut prev: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.chars().enumerate() {
        let mut cur = vec![i + 1; b.len() + 1];
        for (j, cb) in b.iter().enumerate() {
            let sub = prev[j] + usize::from(ca != *cb);
            cur[j + 1] = sub.min(prev[j + 1] + 1).min(cur[j] + 1);
        }
        prev = cur;
    }
    prev[b.len()]
}

/// `" (did you mean 'X'?)"` when a known word is close to `word`.
pub(crate) fn suggest(word: &str, known: &[&str]) -> String {
    // Long inputs cannot be typos of short keywords; skip the quadratic work.
    if word.len() > 64 {
        return String::new();
    }
    let best = known
        .iter()
        .map(|k| (distance(word, k), *k))
        .min_by_key(|(d, _)| *d);
    match best {
        Some((d, k)) if d > 0 && d <= 2.max(word.len() / 4) && d < word.len() => {
            format!(" (did you mean '{k}'?)")
        }
        _ => String::new(),
    }
}
