//! Health checks.
//!
//! Each server with `check` has one **shared task** (it may run on any
//! thread: it lives in the scheduler's shared run and wait queues). On its
//! timer it hands the check itself to a small pool of blocking threads
//! reserved for checks (a TCP connect, and for `option httpchk` one HTTP
//! request and its status line), so a slow or silent server never holds an
//! event loop; the pool's completion wakes the task, which counts
//! successes and failures against `rise` and `fall`, changes the server's
//! state, logs the change with its reason, and sets its next date: `inter`
//! while stable, `fastinter` while the state is in doubt, `downinter`
//! while DOWN. The first dates at start are spread over the interval as
//! HAProxy 2.6 spreads them ([`first_dates`]); until its first check a
//! server is UP with its status `INI`.
//!
//! When a server goes DOWN, the streams waiting in its queue pick another
//! server; when it comes back UP, the backend's waiters are offered its
//! slots and `slowstart` ramps its weight from its UP date.

use std::net::SocketAddr;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

use super::tcpcheck::TcpProbe;
use crate::config::CheckStatus;

mod conn;
mod ext;
pub(crate) mod fuzz;
mod http;
mod observe;
mod task;
#[cfg(test)]
mod tests;

use conn::l4_probe;
pub use conn::{check_proxy_header, CheckHow, CheckMux, CheckTls};
pub(super) use conn::{
    connect_step, open, os_text, read_translated, step_is_tls, timed_out, Connector, Translated,
    Wire,
};
pub use ext::{run_ext, ExtProbe, ExtServer};
pub(super) use http::leading_int;
use http::run_http;
pub use http::{server_state_header, HttpProbe};
pub use observe::{observe, Hana, Seen};
pub(in crate::backend) use task::agent_inter;
pub use task::{
    first_inters, force_health, log_event, log_event_at, log_if_none_left, refresh_up, settle_up,
    start, start_agent, start_server, CheckCtx, Health, LogFn,
};

/// What a check does after its connect: an HTTP exchange (`option
/// httpchk`) or a `tcp-check` sequence (`option tcp-check`, a protocol
/// check); or instead of a connect, a command (`option external-check`).
#[derive(Clone)]
pub enum Probe {
    Http(HttpProbe),
    Tcp(Arc<TcpProbe>),
    Ext(Arc<ExtProbe>),
}

impl Probe {
    /// A connect step has `ssl`: the servers' TLS settings are needed
    /// (see [`CheckHow::ssl_ctx`]).
    pub fn connects_ssl(&self) -> bool {
        match self {
            Probe::Http(p) => p
                .steps
                .iter()
                .any(|s| matches!(s, http::HttpStep::Connect(c) if c.ssl)),
            Probe::Tcp(t) => t.connects_ssl(),
            Probe::Ext(_) => false,
        }
    }
}

/// A check's report, as HAProxy keeps it: the status, the code (HTTP,
/// SMTP, LDAP, MySQL...; reported from `L7OK` on) and the description.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Verdict {
    pub st: CheckStatus,
    pub code: i64,
    pub desc: String,
    /// What the log line says instead of `desc`: a protocol check's
    /// parser reports the server's version or "Success" in the log, then
    /// HAProxy's end of sequence empties the stored description.
    pub note: Option<String>,
}

impl Verdict {
    pub fn new(st: CheckStatus, desc: impl Into<String>) -> Verdict {
        Verdict {
            st,
            code: 0,
            desc: desc.into(),
            note: None,
        }
    }

    pub fn passed(&self) -> bool {
        self.st.passed()
    }

    /// HAProxy's `reason: ...` text (`srv_append_status`): the
    /// description of the status, `, code: N` from `L7OK` on, `, info:
    /// "..."` with the description (non-printable bytes, `<`, `>` and
    /// `"` as `<XX>`).
    pub fn reason(&self) -> String {
        let mut r = self.st.text().to_string();
        if self.st.has_code() {
            r.push_str(&format!(", code: {}", self.code));
        }
        let desc = self.note.as_deref().unwrap_or(&self.desc);
        if !desc.is_empty() {
            r.push_str(", info: \"");
            for b in desc.bytes() {
                if (0x20..0x7f).contains(&b) && !matches!(b, b'<' | b'>' | b'"') {
                    r.push(b as char);
                } else {
                    r.push_str(&format!("<{b:02X}>"));
                }
            }
            r.push('"');
        }
        r
    }
}

/// The probe of a backend's checks: `option httpchk`, `option
/// tcp-check` (the last given wins), or none (a plain connect). `tcp-check`
/// rules without `option tcp-check` are refused (HAProxy would not run
/// them).
pub fn probe_for<'a>(
    p: &'a crate::config::Proxy,
    host: &str,
) -> Result<Option<Probe>, (&'a crate::config::Loc, String)> {
    if p.http_check.enabled {
        return HttpProbe::new(&p.http_check, host)
            .map(|h| Some(Probe::Http(h)))
            .map_err(|e| (&p.loc, e));
    }
    if let (Some((name, _)), Some(r)) = (&p.tcp_check.builtin, p.tcp_check.rules.first()) {
        return Err((
            &r.loc,
            format!(
                "'tcp-check' rules in backend '{}' would not run: 'option {name}' has its own sequence",
                p.name
            ),
        ));
    }
    if p.tcp_check.enabled {
        return TcpProbe::new(&p.tcp_check)
            .map(|t| Some(Probe::Tcp(Arc::new(t))))
            .map_err(|e| (&p.loc, e));
    }
    match p.tcp_check.rules.first() {
        Some(r) => Err((
            &r.loc,
            format!(
                "'tcp-check' rules in backend '{}' need 'option tcp-check' (checks would not run them)",
                p.name
            ),
        )),
        None => Ok(None),
    }
}

/// One check, blocking: connect (a PROXY header first when `proxy_hdr`
/// holds one, then a TLS handshake for an `ssl` server), then the probe
/// (an HTTP sequence or a `tcp-check` sequence) within `timeout`.
pub fn run_check(
    addr: SocketAddr,
    timeout: Duration,
    probe: Option<&Probe>,
    tls: Option<&CheckTls>,
    proxy_hdr: &[u8],
    who: (&str, &str, Option<&str>),
    how: CheckHow,
) -> Verdict {
    // A plain connect is the default one.
    let socks = how.socks4.filter(|_| how.via_socks4);
    match probe {
        Some(Probe::Tcp(t)) => {
            super::tcpcheck::run_tcp_check(addr, timeout, t, tls, proxy_hdr, (who.0, who.1), how)
        }
        Some(Probe::Http(p)) => run_http(addr, timeout, p, tls, proxy_hdr, who, how),
        // Run by the check task with its server's details (`run_ext`).
        Some(Probe::Ext(_)) => Verdict::new(CheckStatus::SockErr, "external check"),
        None if tls.is_none() && proxy_hdr.is_empty() && socks.is_none() => {
            match l4_probe(addr, how.connect_budget.unwrap_or(timeout)) {
                Err(v) => v,
                Ok(()) => Verdict::new(CheckStatus::L4Ok, ""),
            }
        }
        None => {
            // (A check that only connects: its connect's bound.)
            let t = how.connect_budget.unwrap_or(timeout);
            match open(addr, Instant::now(), t, tls, proxy_hdr, false, socks) {
                Err(v) => v,
                Ok(_) if tls.is_some() => Verdict::new(CheckStatus::L6Ok, ""),
                Ok(_) => Verdict::new(CheckStatus::L4Ok, ""),
            }
        }
    }
}

/// `max-spread-checks` in milliseconds (0: not set).
static MAX_SPREAD_MS: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);

/// Sets the global `max-spread-checks` (at start and on reload).
pub fn set_max_spread(d: Option<Duration>) {
    let ms = d.map_or(0, |d| d.as_millis().min(u128::from(u32::MAX)) as u64);
    MAX_SPREAD_MS.store(ms, Ordering::Relaxed);
}

/// The intervals that spread the first checks: the smallest of those of
/// at least this much dictates the spread (shorter ones start on their
/// own and do not crowd the others).
const SPREAD_THRESHOLD_MS: u64 = 1000;

/// The first date of each check, after HAProxy 2.6's start of checks.
/// `inters` holds every check task in configuration order (a server's
/// health check, then its agent), each with the interval it starts with;
/// the check at position `i` of `n` first runs `i / n` of the way
/// through the larger of its own interval and the smallest interval of
/// at least a second, that bounded by `max-spread-checks`. No random
/// part: `spread-checks` moves only the later dates (2.6 applies it from
/// the second check on).
pub fn first_dates(inters: &[Duration]) -> Vec<Duration> {
    first_dates_within(inters, MAX_SPREAD_MS.load(Ordering::Relaxed))
}

/// [`first_dates`] with `max-spread-checks` `cap` ms (0: none).
fn first_dates_within(inters: &[Duration], cap: u64) -> Vec<Duration> {
    let ms = |d: &Duration| d.as_millis().min(u128::from(u32::MAX)) as u64;
    let min = inters
        .iter()
        .map(ms)
        .filter(|m| *m >= SPREAD_THRESHOLD_MS)
        .min()
        .unwrap_or(0);
    let n = inters.len() as u64;
    inters
        .iter()
        .enumerate()
        .map(|(i, d)| first_date(min, ms(d), cap, i as u64, n))
        .collect()
}

/// The first date of a check added at run time: one interval (bounded by
/// `max-spread-checks`) from now, as HAProxy starts a dynamic server's.
pub fn first_date_alone(inter: Duration) -> Duration {
    let ms = inter.as_millis().min(u128::from(u32::MAX)) as u64;
    first_date(0, ms, MAX_SPREAD_MS.load(Ordering::Relaxed), 1, 1)
}

/// `pos / n` of the larger of `min` and `own` (ms), bounded by `cap` (0:
/// none).
fn first_date(min: u64, own: u64, cap: u64, pos: u64, n: u64) -> Duration {
    let mut d = min.max(own);
    if cap > 0 {
        d = d.min(cap);
    }
    Duration::from_millis(d * pos / n.max(1))
}

/// `spread-checks`: the share (0..50 %) of its interval by which each
/// check's next date moves at random, either way.
static SPREAD: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);

/// Sets the global `spread-checks` (at start).
pub fn set_spread(pct: u32) {
    SPREAD.store(pct.min(50), Ordering::Relaxed);
}

/// A check task's generator for [`spread`]: distinct per server.
pub fn spread_seed(uid: u64) -> u64 {
    let t = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.subsec_nanos() as u64);
    (uid.wrapping_mul(0x9E37_79B9_7F4A_7C15) ^ t) | 1
}

/// `d`, moved by `spread-checks`: HAProxy's next check date, the interval
/// plus a random amount between -N % and +N % of it.
pub fn spread(d: Duration, rng: &mut u64) -> Duration {
    spread_by(d, SPREAD.load(Ordering::Relaxed), rng)
}

/// [`spread`] by `pct` %.
fn spread_by(d: Duration, pct: u32, rng: &mut u64) -> Duration {
    let pct = u64::from(pct);
    if pct == 0 {
        return d;
    }
    let ms = d.as_millis().min(u128::from(u32::MAX)) as u64;
    let span = ms * pct / 100;
    *rng ^= *rng << 13;
    *rng ^= *rng >> 7;
    *rng ^= *rng << 17;
    Duration::from_millis(ms - span + *rng % (2 * span + 1))
}

/// The TLS settings of a server's `connect ssl` check steps (HAProxy's
/// server SSL context, which such a rule makes it prepare for every
/// server of the backend): its own with `ssl`, else built from its TLS
/// options (`verify`, `ca-file`, `crt`, versions, ciphers) and `alpn`.
pub fn connect_ssl_ctx(
    o: &crate::config::ServerOptions,
    own: Option<&super::ServerTls>,
) -> Result<std::sync::Arc<rustls::ClientConfig>, String> {
    if let Some(t) = own {
        return Ok(std::sync::Arc::clone(&t.config));
    }
    let mut config = crate::tls::client_config_with(o.verify(), o.ca_file.as_deref(), &o.tls)?;
    if !o.alpn.is_empty() {
        let mut c = (*config).clone();
        c.alpn_protocols = o.alpn.iter().map(|p| p.as_bytes().to_vec()).collect();
        config = std::sync::Arc::new(c);
    }
    Ok(config)
}
