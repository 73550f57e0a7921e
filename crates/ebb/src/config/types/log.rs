//! Where and how logs go: `log` targets (a syslog server, a file
//! descriptor, a ring), their level, format and sampling, and a proxy's
//! `log` setting.

use std::path::PathBuf;

use crate::loc::Loc;

/// Syslog severities, most severe first (RFC 5424 order).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum LogLevel {
    Emerg,
    Alert,
    Crit,
    Err,
    Warning,
    Notice,
    Info,
    Debug,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum LogDest {
    Stdout,
    Stderr,
    /// A path that is not a socket when ebb starts: a file, appended to (an
    /// ebb extension; in HAProxy a path is always a syslog socket).
    File(PathBuf),
    /// `udp@HOST:PORT`, `HOST:PORT` or `HOST` (port 514): syslog over UDP.
    Udp(std::net::SocketAddr),
    /// `unix@PATH`, `/dev/log`: a syslog UNIX datagram socket, addressed by
    /// path on every message (inside a `chroot`, the path in the jail).
    Unix(PathBuf),
    /// `ring@NAME`: a `ring` section's buffer; also the ring HAProxy makes
    /// for a `tcp@HOST:PORT` target (named `ring#N`, see
    /// [`crate::config::ring`]).
    Ring(String),
    /// `fd@N` (N not 1 or 2): a descriptor the process inherited open;
    /// each message written to it whole, never blocking (HAProxy's).
    Fd(i32),
}

/// The syslog header of a log target (`format` on a `log` line).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum LogFormat {
    /// No `format`: HAProxy's default, RFC 3164 without the host name
    /// (`<PRI>Mmm dd hh:mm:ss TAG[PID]: `).
    #[default]
    Local,
    Rfc3164,
    Rfc5424,
    /// `<PRI>` only.
    Priority,
    /// `<LEVEL>` only (no facility).
    Short,
    /// `<LEVEL>` and an ISO 8601 date.
    Timed,
    /// An ISO 8601 date only.
    Iso,
    /// The message alone.
    Raw,
}

impl LogFormat {
    /// The format a `format` word names (a `log` line's, a ring's).
    pub fn from_name(s: &str) -> Option<LogFormat> {
        Some(match s {
            "local" => LogFormat::Local,
            "rfc3164" => LogFormat::Rfc3164,
            "rfc5424" => LogFormat::Rfc5424,
            "priority" => LogFormat::Priority,
            "short" => LogFormat::Short,
            "timed" => LogFormat::Timed,
            "iso" => LogFormat::Iso,
            "raw" => LogFormat::Raw,
            _ => return None,
        })
    }
}

/// `log TARGET [FACILITY [LEVEL [MINLEVEL]]]`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LogTarget {
    pub dest: LogDest,
    pub facility: Option<String>,
    /// Only messages at least this severe are sent.
    pub level: Option<LogLevel>,
    /// More severe messages are sent with this level instead (HAProxy's
    /// `minlevel`).
    pub min_level: Option<LogLevel>,
    pub loc: Loc,
    /// `format F`; without it `Local` (HAProxy's unspecified format: its
    /// header is `local`'s, or `rfc3164`'s when `log-send-hostname`
    /// gives a host, see `format_given`).
    pub format: LogFormat,
    /// The line says `format F`.
    pub format_given: bool,
    /// `len N`: a message with its header is cut to N bytes (HAProxy's
    /// default 1024).
    pub max_len: u32,
    /// `sample RANGES:SIZE`: of every SIZE messages, only those whose
    /// number (1..SIZE) is in one of the ranges are sent.
    pub sample: Option<LogSample>,
}

/// `sample 1,3-4:5`: ranges (inclusive, 1-based, sorted, disjoint) and size.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LogSample {
    pub ranges: Vec<(u32, u32)>,
    pub size: u32,
}

/// A proxy's `log` lines.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ProxyLog {
    /// `log global`: use the global targets.
    Global,
    Target(LogTarget),
}
