//! The syslog message header HAProxy writes (its `build_log_header`):
//! priority, date, host, tag and pid, by `log-format`'s kind, and the
//! RFC 5424 structured data. Shared by the log targets (`log`) and the
//! rings (`ring`), which import nothing else of each other.

use std::io::Write;
use std::path::Path;
use std::time::{SystemTime, UNIX_EPOCH};

use crate::calendar::civil_from_days;
use crate::config::LogFormat;

/// Syslog severities as numbers (RFC 5424).
pub const LOG_EMERG: u8 = 0;
pub const LOG_ALERT: u8 = 1;
pub const LOG_ERR: u8 = 3;
pub const LOG_NOTICE: u8 = 5;
pub const LOG_INFO: u8 = 6;

/// What a syslog header says besides the date and priority.
pub struct Ident {
    /// `log-tag` or the program's name.
    pub tag: String,
    /// `log-send-hostname`; `None`: not sent.
    pub host: Option<String>,
}

impl Default for Ident {
    fn default() -> Ident {
        let tag = std::env::args_os()
            .next()
            .and_then(|a| {
                Path::new(&a)
                    .file_name()
                    .map(|n| n.to_string_lossy().into_owned())
            })
            .unwrap_or_else(|| "ebb".to_string());
        Ident { tag, host: None }
    }
}

/// The syslog header HAProxy writes for `format` (log.c, build_log_header).
pub fn header(out: &mut Vec<u8>, f: LogFormat, facility: u8, level: u8, id: &Ident, t: SystemTime) {
    let pri = u32::from(facility) * 8 + u32::from(level);
    match f {
        LogFormat::Local | LogFormat::Rfc3164 | LogFormat::Rfc5424 | LogFormat::Priority => {
            let _ = write!(out, "<{pri}>");
        }
        LogFormat::Short | LogFormat::Timed => {
            let _ = write!(out, "<{level}>");
        }
        LogFormat::Iso | LogFormat::Raw => {}
    }
    let d = t.duration_since(UNIX_EPOCH).unwrap_or_default();
    let secs = d.as_secs() as i64;
    let off = crate::sys::utc_offset(secs);
    let local = secs + i64::from(off);
    let (y, m, day) = civil_from_days(local.div_euclid(86_400));
    let sod = local.rem_euclid(86_400);
    let (hh, mm, ss) = (sod / 3600, sod / 60 % 60, sod % 60);
    match f {
        LogFormat::Local | LogFormat::Rfc3164 => {
            let _ = write!(
                out,
                "{} {:2} {:02}:{:02}:{:02} ",
                crate::calendar::month_abbr(m),
                day,
                hh,
                mm,
                ss
            );
        }
        LogFormat::Rfc5424 | LogFormat::Timed | LogFormat::Iso => {
            if f == LogFormat::Rfc5424 {
                out.extend_from_slice(b"1 ");
            }
            let sign = if off < 0 { '-' } else { '+' };
            let a = off.unsigned_abs();
            let _ = write!(
                out,
                "{y:04}-{m:02}-{day:02}T{hh:02}:{mm:02}:{ss:02}.{:06}{sign}{:02}:{:02} ",
                d.subsec_micros(),
                a / 3600,
                a / 60 % 60
            );
        }
        LogFormat::Priority | LogFormat::Short | LogFormat::Raw => {}
    }
    match f {
        LogFormat::Rfc3164 | LogFormat::Local => {
            if f == LogFormat::Rfc3164 {
                let _ = write!(out, "{} ", id.host.as_deref().unwrap_or("localhost"));
            }
            // The pid is read here, not at start: after `daemon` forks,
            // the child's.
            let _ = write!(out, "{}[{}]: ", id.tag, crate::sys::pid());
        }
        LogFormat::Rfc5424 => {
            // MSGID `-`; the structured data follows ([`structured_data`]).
            let _ = write!(
                out,
                "{} {} {} - ",
                id.host.as_deref().unwrap_or("-"),
                id.tag,
                crate::sys::pid()
            );
        }
        _ => {}
    }
}

/// The structured-data field of an RFC 5424 header and the space after
/// it: `sd` without its trailing spaces, `-` when nothing is left (as
/// HAProxy's `__send_log`).
pub fn structured_data(out: &mut Vec<u8>, sd: Option<&[u8]>) {
    let sd = sd.unwrap_or_default();
    let end = sd.iter().rposition(|&b| b != b' ').map_or(0, |i| i + 1);
    if end == 0 {
        out.push(b'-');
    } else {
        out.extend_from_slice(&sd[..end]);
    }
    out.push(b' ');
}
