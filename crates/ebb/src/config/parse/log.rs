//! `log` lines (in `global`, proxies and `fcgi-app` sections): a target,
//! then `len`, `format`, `sample`, a facility and levels, in that order,
//! as HAProxy reads them.
//!
//! A syslog address is resolved when the line is read, as HAProxy does;
//! a path that is a socket now is syslog, any other path a file (ebb's
//! extension). Targets ebb cannot write to (rings, TCP) are refused.

use std::path::PathBuf;

use crate::config::types::*;

const FACILITIES: &[&str] = &[
    "kern", "user", "mail", "daemon", "auth", "syslog", "lpr", "news", "uucp", "cron", "auth2",
    "ftp", "ntp", "audit", "alert", "cron2", "local0", "local1", "local2", "local3", "local4",
    "local5", "local6", "local7",
];

pub(super) fn log_level(s: &str) -> Option<LogLevel> {
    Some(match s {
        "emerg" => LogLevel::Emerg,
        "alert" => LogLevel::Alert,
        "crit" => LogLevel::Crit,
        "err" => LogLevel::Err,
        "warning" => LogLevel::Warning,
        "notice" => LogLevel::Notice,
        "info" => LogLevel::Info,
        "debug" => LogLevel::Debug,
        _ => return None,
    })
}

/// A syslog address: `HOST[:PORT]` (port 514 when absent), resolved now,
/// as HAProxy does when it reads the line.
fn syslog_addr(t: &str, v6: Option<bool>) -> Result<std::net::SocketAddr, String> {
    use std::net::ToSocketAddrs;
    // No host is any address, no port 514 (`:`, as two unset variables
    // leave `${H}:${P}`), as HAProxy reads them.
    let filled;
    let t = match t.rsplit_once(':') {
        Some((h, p)) if !h.contains(':') && (h.is_empty() || p.is_empty()) => {
            let h = if h.is_empty() { "0.0.0.0" } else { h };
            let p = if p.is_empty() { "514" } else { p };
            filled = format!("{h}:{p}");
            filled.as_str()
        }
        _ => t,
    };
    let with_port = if t.parse::<std::net::Ipv6Addr>().is_ok() {
        format!("[{t}]:514")
    } else if t.starts_with('[') && t.ends_with(']') || !t.contains(':') {
        format!("{t}:514")
    } else {
        t.to_string()
    };
    let addrs = with_port
        .to_socket_addrs()
        .map_err(|e| format!("log target '{t}': cannot resolve: {e}"))?;
    addrs
        .into_iter()
        .find(|a| v6.is_none_or(|six| a.is_ipv6() == six))
        .ok_or_else(|| format!("log target '{t}': no address of the requested family"))
}

/// `TARGET [len N] [format F] [FACILITY [LEVEL [MINLEVEL]]]`.
pub(super) fn parse_log_target(w: &[String], loc: &Loc) -> Result<LogTarget, String> {
    // An address: environment variables expanded, quoted or not (HAProxy's
    // `str2sa_range()`).
    let expanded = w
        .first()
        .map(|t| crate::config::values::env_expand(t).into_owned());
    let Some(target) = expanded.as_ref() else {
        return Err(
            "'log' expects a target (stdout, stderr, udp@HOST:PORT, unix@PATH, /dev/log or a file)"
                .to_string(),
        );
    };
    let t = target.as_str();
    let mut tcp_addr = None;
    let dest = if t == "stdout" || t == "fd@1" {
        LogDest::Stdout
    } else if t == "stderr" || t == "fd@2" {
        LogDest::Stderr
    } else if let Some(p) = t.strip_prefix("unix@") {
        if p.is_empty() {
            return Err("'unix@' expects a path".to_string());
        }
        LogDest::Unix(PathBuf::from(p))
    } else if t == "/dev/log" {
        LogDest::Unix(PathBuf::from(t))
    } else if t.starts_with('/') {
        // A socket now: syslog; anything else: a file (ebb's extension).
        match std::fs::symlink_metadata(t) {
            Ok(m) if std::os::unix::fs::FileTypeExt::is_socket(&m.file_type()) => {
                LogDest::Unix(PathBuf::from(t))
            }
            _ => LogDest::File(PathBuf::from(t)),
        }
    } else if let Some(a) = t.strip_prefix("udp@") {
        LogDest::Udp(syslog_addr(a, None)?)
    } else if let Some(a) = t.strip_prefix("udp4@").or_else(|| t.strip_prefix("ipv4@")) {
        LogDest::Udp(syslog_addr(a, Some(false))?)
    } else if let Some(a) = t.strip_prefix("udp6@").or_else(|| t.strip_prefix("ipv6@")) {
        LogDest::Udp(syslog_addr(a, Some(true))?)
    } else if let Some(r) = t.strip_prefix("ring@") {
        if r.is_empty() {
            return Err("'ring@' expects a ring name".to_string());
        }
        LogDest::Ring(r.to_string())
    } else if let Some((a, v6)) = t
        .strip_prefix("tcp@")
        .map(|a| (a, None))
        .or_else(|| t.strip_prefix("tcp4@").map(|a| (a, Some(false))))
        .or_else(|| t.strip_prefix("tcp6@").map(|a| (a, Some(true))))
    {
        // HAProxy 2.6 sends to a stream server through a ring of its own
        // (`ring#N`, N counting such lines), finished once the line is
        // read (its format is the ring's).
        tcp_addr = Some(syslog_addr(a, v6)?);
        LogDest::Ring(String::new())
    } else if let Some(n) = t.strip_prefix("fd@") {
        LogDest::Fd(n.parse::<i32>().ok().filter(|n| *n >= 0).ok_or_else(|| {
            // HAProxy's words.
            format!("log : file descriptor '{n}' is not a valid integer in '{t}'")
        })?)
    } else if t.contains('@') {
        return Err(format!("log target '{t}': unknown address family"));
    } else {
        LogDest::Udp(syslog_addr(t, None)?)
    };
    let mut i = 1;
    let mut max_len = 1024;
    if w.get(i).map(String::as_str) == Some("len") {
        let v = w.get(i + 1).ok_or("'len' expects a length")?;
        max_len = v
            .parse::<u32>()
            .ok()
            .filter(|n| (80..=65535).contains(n))
            .ok_or_else(|| format!("invalid log length '{v}', must be between 80 and 65535"))?;
        i += 2;
    }
    let mut format = LogFormat::Local;
    let format_given = w.get(i).map(String::as_str) == Some("format");
    if format_given {
        format = match w.get(i + 1).map(String::as_str) {
            Some(f) => {
                LogFormat::from_name(f).ok_or_else(|| format!("unknown log format '{f}'"))?
            }
            None => return Err("'format' expects a log format".to_string()),
        };
        i += 2;
    }
    let mut sample = None;
    if w.get(i).map(String::as_str) == Some("sample") {
        let v = w.get(i + 1).ok_or("'sample' expects RANGES:SIZE")?;
        sample = Some(parse_log_sample(v)?);
        i += 2;
    }
    let mut facility = None;
    if let Some(f) = w.get(i) {
        if FACILITIES.contains(&f.as_str()) {
            facility = Some(f.clone());
            i += 1;
        }
    }
    let mut levels = Vec::new();
    for l in &w[i.min(w.len())..] {
        match log_level(l) {
            Some(lv) => levels.push(lv),
            None => return Err(format!("unknown log facility or level '{l}'")),
        }
    }
    if levels.len() > 2 {
        return Err("too many log levels (at most LEVEL and MINLEVEL)".to_string());
    }
    let dest = match tcp_addr {
        Some(a) => LogDest::Ring(crate::config::ring::implicit(a, format, max_len, loc)),
        None => dest,
    };
    Ok(LogTarget {
        dest,
        facility,
        level: levels.first().copied(),
        min_level: levels.get(1).copied(),
        loc: loc.clone(),
        format,
        format_given,
        max_len,
        sample,
    })
}

/// `RANGES:SIZE` of `log ... sample`: `1,3-4:5`.
fn parse_log_sample(v: &str) -> Result<LogSample, String> {
    let (ranges, size) = v
        .split_once(':')
        .ok_or_else(|| format!("missing sample size in '{v}' (RANGES:SIZE)"))?;
    let num = |x: &str| -> Result<u32, String> {
        x.parse::<u32>()
            .ok()
            .filter(|n| *n > 0)
            .ok_or_else(|| format!("invalid sample range '{x}' in '{v}'"))
    };
    let mut rs = Vec::new();
    for r in ranges.split(',') {
        let (lo, hi) = match r.split_once('-') {
            Some((a, b)) => (num(a)?, num(b)?),
            None => (num(r)?, num(r)?),
        };
        if lo > hi {
            return Err(format!("invalid sample range '{r}' in '{v}'"));
        }
        if rs.iter().any(|&(a, b)| lo <= b && a <= hi) {
            return Err(format!("sample range '{r}' overlaps another in '{v}'"));
        }
        rs.push((lo, hi));
    }
    rs.sort_unstable();
    let size: u32 = size
        .parse()
        .ok()
        .filter(|n| *n > 0)
        .ok_or_else(|| format!("wrong sample size '{size}' in '{v}'"))?;
    let max = rs.iter().map(|r| r.1).max().unwrap_or(0);
    if size < max {
        return Err(format!(
            "sample size {size} should be greater or equal to {max}, the largest range end"
        ));
    }
    Ok(LogSample { ranges: rs, size })
}
