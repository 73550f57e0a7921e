//! The server-state file: what `show servers state` prints and what
//! `server-state-file` reads back at start and on reload.
//!
//! The format is HAProxy's version 1: a line holding `1`, a `#` header line
//! naming the columns, then one line per server with 25 fields separated
//! by spaces or tabs:
//!
//! ```text
//! 1
//! # be_id be_name srv_id srv_name srv_addr srv_op_state srv_admin_state srv_uweight ...
//! 3 app 1 s1 127.0.0.1 2 0 1 1 12 6 3 4 6 0 0 0 - 8080 - 0 0 - - 0
//! ```
//!
//! ebb restores three things from it: the admin state (`srv_admin_state`:
//! bit 0x01 forced maintenance, 0x08 forced drain), the weight
//! (`srv_uweight`) and the address (`srv_addr` and `srv_port`).
//!
//! **Strict parsing.** The file is parsed once, into a tree keyed by
//! backend then server name. The first line must be the version; a line
//! with the wrong number of fields, a field that does not parse, or a last
//! line cut short (no newline) makes the whole file ignored: a state half
//! applied would be worse than none. The error names the line.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::net::IpAddr;
use std::path::{Path, PathBuf};
use std::sync::atomic::Ordering;

use crate::backend::{Farm, ServerRt, ADMIN_DRAIN, ADMIN_MAINT};

/// The column header of version 1 (HAProxy 2.x order).
pub const HEADER: &str = "# be_id be_name srv_id srv_name srv_addr srv_op_state \
srv_admin_state srv_uweight srv_iweight srv_time_since_last_change srv_check_status \
srv_check_result srv_check_health srv_check_state srv_agent_state bk_f_forced_id \
srv_f_forced_id srv_fqdn srv_port srvrecord srv_use_ssl srv_check_port srv_check_addr \
srv_agent_addr srv_agent_port";

/// Fields per server line in version 1.
pub const FIELDS: usize = 25;

/// `srv_admin_state` bits (HAProxy's `SRV_ADMF_*`).
pub const ADMF_FMAINT: u32 = 0x01;
pub const ADMF_IMAINT: u32 = 0x02;
pub const ADMF_CMAINT: u32 = 0x04;
pub const ADMF_FDRAIN: u32 = 0x08;
pub const ADMF_IDRAIN: u32 = 0x10;
pub const ADMF_RMAINT: u32 = 0x20;
pub const ADMF_HMAINT: u32 = 0x40;

/// One server's saved state.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SrvState {
    pub addr: Option<IpAddr>,
    pub port: Option<u16>,
    pub admin: u32,
    pub weight: u32,
    /// `srv_op_state`: 0 stopped, 1 starting, 2 running, 3 stopping.
    pub op: u32,
    /// `srv_check_health`.
    pub health: u32,
    /// `srv_use_ssl` (-1, 0 or 1), applied to a server whose TLS
    /// settings were prepared (HAProxy's rule).
    pub use_ssl: Option<i8>,
}

impl SrvState {
    /// The admin state ebb applies: maintenance, drain or ready.
    pub fn admin_state(&self) -> u8 {
        // The inherited states (IMAINT, IDRAIN) come back from the tracked
        // server, as HAProxy ignores them in the file.
        if self.admin & (ADMF_FMAINT | ADMF_RMAINT | ADMF_HMAINT) != 0 {
            ADMIN_MAINT
        } else if self.admin & ADMF_FDRAIN != 0 {
            ADMIN_DRAIN
        } else {
            crate::backend::ADMIN_READY
        }
    }
}

/// A parsed state file: backend name -> server name -> state.
pub type Tree = BTreeMap<String, BTreeMap<String, SrvState>>;

/// Why a state file is ignored.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ParseError {
    /// 1-based line number.
    pub line: usize,
    pub reason: String,
}

impl std::fmt::Display for ParseError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "line {}: {}", self.line, self.reason)
    }
}

fn perr(line: usize, reason: impl Into<String>) -> ParseError {
    ParseError {
        line,
        reason: reason.into(),
    }
}

/// Parses a whole state file (strictly: see the module documentation).
pub fn parse(text: &str) -> Result<Tree, ParseError> {
    let mut tree = Tree::new();
    if text.is_empty() {
        return Err(perr(1, "empty file: the version line is missing"));
    }
    let lines: Vec<&str> = text.split('\n').collect();
    // `split` leaves one empty piece after the final newline; a missing
    // final newline means the last line was cut short.
    let n = lines.len();
    if !text.ends_with('\n') {
        return Err(perr(
            n,
            "truncated line (no newline at the end of the file)",
        ));
    }
    for (i, raw) in lines[..n - 1].iter().enumerate() {
        let no = i + 1;
        let line = raw.strip_suffix('\r').unwrap_or(raw);
        if no == 1 {
            if line.trim_matches([' ', '\t']) != "1" {
                return Err(perr(
                    1,
                    format!("unsupported version line '{line}' (expected 1)"),
                ));
            }
            continue;
        }
        if line.starts_with('#') || line.trim_matches([' ', '\t']).is_empty() {
            continue;
        }
        if line
            .chars()
            .any(|c| c.is_whitespace() && c != ' ' && c != '\t')
        {
            return Err(perr(no, "fields must be separated by spaces or tabs only"));
        }
        let f: Vec<&str> = line.split([' ', '\t']).filter(|s| !s.is_empty()).collect();
        if f.len() != FIELDS {
            return Err(perr(
                no,
                format!("{} fields, version 1 has {FIELDS}", f.len()),
            ));
        }
        let num = |k: usize, what: &str| -> Result<u32, ParseError> {
            f[k].parse::<u32>()
                .map_err(|_| perr(no, format!("{what} '{}' is not a number", f[k])))
        };
        num(0, "be_id")?;
        num(2, "srv_id")?;
        let addr = match f[4] {
            "-" => None,
            a => Some(
                a.parse::<IpAddr>()
                    .map_err(|_| perr(no, format!("srv_addr '{a}' is not an address")))?,
            ),
        };
        let op = num(5, "srv_op_state")?;
        if op > 3 {
            return Err(perr(no, format!("srv_op_state {op} is not 0 to 3")));
        }
        let health = num(12, "srv_check_health")?;
        let admin = num(6, "srv_admin_state")?;
        let weight = num(7, "srv_uweight")?;
        if weight > 256 {
            return Err(perr(no, format!("srv_uweight {weight} is above 256")));
        }
        num(8, "srv_iweight")?;
        let port = match f[18] {
            "-" | "0" => None,
            p => Some(
                p.parse::<u16>()
                    .map_err(|_| perr(no, format!("srv_port '{p}' is not a port")))?,
            ),
        };
        // HAProxy reads the field with strtol: what is no number is 0.
        let use_ssl = Some(f[20].parse::<i8>().unwrap_or(0).clamp(-1, 1));
        let prev = tree.entry(f[1].to_string()).or_default().insert(
            f[3].to_string(),
            SrvState {
                addr,
                port,
                admin,
                weight,
                op,
                health,
                use_ssl,
            },
        );
        if prev.is_some() {
            return Err(perr(no, format!("server {}/{} appears twice", f[1], f[3])));
        }
    }
    Ok(tree)
}

/// The `srv_admin_state` ebb writes for a server.
pub fn admin_bits(s: &ServerRt) -> u32 {
    let rmaint = if s.rmaint.load(Ordering::Relaxed) {
        ADMF_RMAINT
    } else {
        0
    };
    rmaint
        | match s.admin.load(Ordering::Relaxed) {
            ADMIN_MAINT if s.opts.disabled || s.addr().is_none() => ADMF_CMAINT,
            ADMIN_MAINT => ADMF_FMAINT,
            ADMIN_DRAIN => ADMF_FDRAIN,
            _ => 0,
        }
        | match s.iadmin.load(Ordering::Relaxed) {
            ADMIN_MAINT => ADMF_IMAINT,
            ADMIN_DRAIN => ADMF_IDRAIN,
            _ => 0,
        }
}

/// `show servers conn [BACKEND]` for the given backends (HAProxy's
/// columns: the connections in use now and at most since the last
/// estimate, the estimate of those needed, the idle ones not safe and
/// safe, `pool-max-conn` (-1: none), all idle ones, then by thread).
pub fn dump_conns<'a>(farms: impl Iterator<Item = (usize, &'a Farm)>, nbthread: usize) -> String {
    let mut out = format!(
        "# bkname/svname bkid/svid addr port - purge_delay used_cur used_max need_est unsafe_nb safe_nb idle_lim idle_cur idle_per_thr[{nbthread}]\n"
    );
    for (be_id, farm) in farms {
        for s in &farm.servers {
            let addr = match s.addr() {
                Some(a) if s.opts.unix.is_none() => a.ip().to_string(),
                _ => "-".to_string(),
            };
            let c = s.conn_counts();
            let _ = write!(
                out,
                "{be}/{srv} {be_id}/{sid} {addr} {port} - {purge} {} {} {} {} {} {lim} {}",
                c.used_cur,
                c.used_max,
                c.need_est,
                c.unsafe_nb,
                c.safe_nb,
                c.idle_cur,
                be = farm.name,
                srv = s.name,
                sid = s.id,
                port = s.port.load(Ordering::Relaxed),
                purge = s.opts.pool_purge_delay.as_millis(),
                lim = s.opts.pool_max_conn.map_or(-1, i64::from),
            );
            // (HAProxy keeps no per-thread counts for a server that may
            // keep no idle connection.)
            if s.opts.pool_max_conn != Some(0) {
                for n in s.idle_per_thread(nbthread) {
                    let _ = write!(out, " {n}");
                }
            }
            out.push('\n');
        }
    }
    out
}

/// `show servers state [BACKEND]` for the given backends (with their
/// 1-based ids as HAProxy numbers proxies).
pub fn dump<'a>(farms: impl Iterator<Item = (usize, &'a Farm)>) -> String {
    let mut out = String::from("1\n");
    out.push_str(HEADER);
    out.push('\n');
    for (be_id, farm) in farms {
        for s in &farm.servers {
            let up = s.up.load(Ordering::Relaxed);
            let (addr, port) = match s.addr() {
                Some(a) => (a.ip().to_string(), a.port().to_string()),
                None => ("-".to_string(), s.port.load(Ordering::Relaxed).to_string()),
            };
            let since = s.ext.ages().0;
            let fqdn = s.fqdn.lock().ok().and_then(|g| g.clone());
            let host = s.hostname.lock().ok().and_then(|g| g.clone());
            let checked = s.opts.check;
            let (code, result) = if checked {
                let v = s.check_status.lock().map(|c| c.clone()).unwrap_or_default();
                // HAProxy's CHK_RES_*: unknown, neutral, failed, passed,
                // conditionally passed.
                let result = match v.st {
                    crate::config::CheckStatus::Ini => 0,
                    crate::config::CheckStatus::Checked => 1,
                    crate::config::CheckStatus::L7OkC => 4,
                    st if st.passed() => 3,
                    _ => 2,
                };
                (v.st.num(), result)
            } else {
                // HAProxy: an unchecked server's check stays at INI.
                (1, 0)
            };
            let maint = s.admin_state() == ADMIN_MAINT;
            let starting = up
                && s.opts.slowstart.is_some()
                && s.effective_weight() < s.weight.load(Ordering::Relaxed);
            let _ = writeln!(
                out,
                "{be_id} {be} {sid} {srv} {addr} {op} {adm} {uw} {iw} {since} {code} {result} {ch} {cst} {ast} 0 0 {fqdn} {port} {srvrec} {ssl} 0 - {aaddr} {aport}",
                be = farm.name,
                sid = s.id,
                srv = s.name,
                fqdn = match (&fqdn, &host) {
                    (Some(f), _) if !f.starts_with('_') => f.as_str(),
                    (_, Some(h)) => h.as_str(),
                    _ => "-",
                },
                srvrec = match &fqdn {
                    Some(f) if f.starts_with('_') => f.as_str(),
                    _ => "-",
                },
                // In maintenance a server is stopped (HAProxy's op state 0).
                // NOLB is HAProxy's STOPPING, 3.
                op = match (up && !s.rmaint.load(Ordering::Relaxed) && !maint, starting) {
                    (false, _) => 0,
                    (true, _) if s.nolb() => 3,
                    (true, true) => 1,
                    (true, false) => 2,
                },
                adm = admin_bits(s),
                uw = s.weight.load(Ordering::Relaxed),
                iw = s.opts.weight,
                ch = {
                    // HAProxy's health counter: `rise` at start (and
                    // without checks), full (`rise + fall - 1`) less the
                    // failures while UP, the successes while DOWN.
                    let (rise, fall) = (s.opts.rise.max(1), s.opts.fall.max(1));
                    let streak = s.check_streak.load(Ordering::Relaxed);
                    match (checked, s.check_ok.load(Ordering::Relaxed)) {
                        // Unchecked: what `set server health` forced.
                        (false, _) => s.unchecked_health.load(Ordering::Relaxed),
                        (true, true) => (rise + fall - 1).saturating_sub(streak),
                        (true, false) => streak,
                    }
                },
                // Check state bits: configured (2) and enabled (4).
                // (enabled: `enable|disable health`; a server added at
                // run time starts with 2, as in HAProxy).
                // Running checks are paused (8) in maintenance.
                // A check under way adds 1 (HAProxy's CHK_ST_INPROGRESS).
                cst = match (checked, s.check_on.load(Ordering::Relaxed)) {
                    (false, _) => 0,
                    (true, true) if maint => 14,
                    (true, true) => 6,
                    (true, false) => 2,
                } | u32::from(checked && s.ext.check_busy.load(Ordering::Relaxed)),
                ssl = s.use_ssl.load(Ordering::Relaxed),
                ast = s.agent.state_bits(),
                aaddr = s
                    .agent
                    .addr
                    .lock()
                    .ok()
                    .and_then(|g| *g)
                    .map_or("-".to_string(), |a| a.to_string()),
                aport = s.agent.port.load(Ordering::Relaxed),
            );
        }
    }
    out
}

/// Reads and parses a state file.
pub fn load(path: &Path) -> Result<Tree, String> {
    let text = std::fs::read(path).map_err(|e| format!("cannot read {}: {e}", path.display()))?;
    let text = String::from_utf8(text)
        .map_err(|_| format!("{}: not UTF-8 text: ignored", path.display()))?;
    parse(&text).map_err(|e| format!("{}: {e}: the whole file is ignored", path.display()))
}

/// Where a backend's state comes from: the global file, or for `local`
/// the file named after the backend under `server-state-base`.
pub fn global_path(file: Option<&Path>, base: Option<&Path>) -> Option<PathBuf> {
    let f = file?;
    Some(match base {
        Some(b) if f.is_relative() => b.join(f),
        _ => f.to_path_buf(),
    })
}

/// The saved address of a server, when it differs from the configured one
/// and is usable (port from the file, else the configured one).
pub fn saved_addr(
    st: &SrvState,
    configured: Option<std::net::SocketAddr>,
) -> Option<std::net::SocketAddr> {
    let ip = st.addr?;
    let port = st.port.or(configured.map(|a| a.port()))?;
    Some(std::net::SocketAddr::new(ip, port))
}

/// Applies a saved admin state and weight to a running server.
pub fn apply(s: &ServerRt, st: &SrvState) {
    if s.addr().is_some() && !s.opts.disabled {
        s.admin.store(st.admin_state(), Ordering::Relaxed);
    }
    s.weight.store(st.weight, Ordering::Relaxed);
    if let Some(u) = st.use_ssl.filter(|_| s.tls_ctx.is_some()) {
        s.use_ssl.store(u, Ordering::Relaxed);
    }
}

/// Applies a saved operational state as HAProxy 2.6 does at start
/// (`srv_state_srv_update`): stopped (DOWN, health 0) and stopping
/// (NOLB, health kept between `rise` and `rise + fall - 2`, else
/// `rise`; with `fall 1`, which has no NOLB, DOWN); running and
/// starting leave the server as it starts. Returns HAProxy's line for the change, a warning.
pub fn apply_op(farm: &Farm, s: &ServerRt, st: &SrvState) -> Option<String> {
    let (rise, fall) = (s.opts.rise.max(1), s.opts.fall.max(1));
    let down = match st.op {
        0 => true,
        3 => fall == 1,
        _ => return None,
    };
    let health = if down {
        0
    } else if st.health < rise || st.health > rise + fall - 2 {
        rise
    } else {
        st.health
    };
    s.unchecked_health.store(health, Ordering::Relaxed);
    s.check_ok.store(!down, Ordering::Relaxed);
    s.check_streak.store(0, Ordering::Relaxed);
    if down {
        s.up.store(false, Ordering::Relaxed);
    } else {
        s.stopping.store(true, Ordering::Relaxed);
    }
    let (act, bck) = farm.usable_counts();
    let head = format!(
        "{}Server {}/{} is {}, changed from server-state after a reload.",
        s.backup_word(),
        farm.name,
        s.name,
        if down { "DOWN" } else { "stopping" }
    );
    Some(if down {
        format!("{head} {act} active and {bck} backup servers left. 0 sessions active, 0 requeued, 0 remaining in queue.")
    } else {
        format!("{head} {act} active and {bck} backup servers online. 0 sessions requeued, 0 total in queue.")
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn line(be: &str, srv: &str, addr: &str, admin: u32, w: u32) -> String {
        format!("1 {be} 1 {srv} {addr} 2 {admin} {w} 1 0 1 0 0 0 0 0 0 - 8080 - 0 0 - - 0\n")
    }

    #[test]
    fn parses_a_good_file() {
        let t = format!(
            "1\n{HEADER}\n{}{}\n",
            line("app", "s1", "127.0.0.1", 1, 3),
            line("app", "s2", "10.0.0.2", 8, 0)
        );
        let tree = parse(&t).unwrap();
        let s1 = &tree["app"]["s1"];
        assert_eq!(s1.admin_state(), ADMIN_MAINT);
        assert_eq!(s1.weight, 3);
        assert_eq!(s1.port, Some(8080));
        assert_eq!(tree["app"]["s2"].admin_state(), ADMIN_DRAIN);
    }

    #[test]
    fn tabs_are_separators() {
        let t = format!("1\n{}", line("a", "b", "::1", 0, 1).replace(' ', "\t"));
        assert!(parse(&t).is_ok());
    }

    #[test]
    fn strict_errors_name_the_line() {
        assert_eq!(parse("").unwrap_err().line, 1);
        assert_eq!(parse("2\n").unwrap_err().line, 1);
        let ok = line("a", "b", "127.0.0.1", 0, 1);
        // Wrong field count on line 3.
        let t = format!("1\n{ok}1 a 2 c 127.0.0.1 2 0 1\n");
        let e = parse(&t).unwrap_err();
        assert_eq!(e.line, 3, "{e}");
        assert!(e.reason.contains("8 fields"), "{e}");
        // Last line without its newline: truncated.
        let t = format!("1\n{ok}{}", ok.trim_end());
        assert_eq!(parse(&t).unwrap_err().line, 3);
        // A vertical tab is not a separator.
        let t = format!("1\n{}", ok.replacen(' ', "\x0b", 1));
        assert_eq!(parse(&t).unwrap_err().line, 2);
        // Not a number, not an address.
        let t = format!("1\n{}", line("a", "b", "nope", 0, 1));
        assert!(parse(&t).unwrap_err().reason.contains("srv_addr"));
        let t = format!("1\n{}", line("a", "b", "127.0.0.1", 0, 999));
        assert!(parse(&t).unwrap_err().reason.contains("256"));
        // Duplicates.
        let t = format!("1\n{ok}{ok}");
        assert_eq!(parse(&t).unwrap_err().line, 3);
    }

    #[test]
    fn dump_then_parse_round_trip() {
        let cfg =
            "backend app\n server s1 127.0.0.1:8001 weight 4\n server s2 [::1]:8002 weight 4\n";
        let c = crate::proxy::compile(&crate::config::parse_str("t.cfg", cfg).unwrap()).unwrap();
        let crate::proxy::BackendKind::Servers(sv) = &c.backends[0].kind else {
            panic!("not a server backend");
        };
        let farm = &sv.farm;
        farm.servers[0].admin.store(ADMIN_MAINT, Ordering::Relaxed);
        farm.servers[1].weight.store(9, Ordering::Relaxed);
        let text = dump(std::iter::once((3, &**farm)));
        let tree = parse(&text).unwrap();
        let s1 = &tree["app"]["s1"];
        assert_eq!(
            (s1.admin_state(), s1.weight, s1.port),
            (ADMIN_MAINT, 4, Some(8001))
        );
        let s2 = &tree["app"]["s2"];
        assert_eq!(s2.weight, 9);
        assert_eq!(saved_addr(s2, None), Some("[::1]:8002".parse().unwrap()));
        // Applying it to a fresh farm restores state and weight.
        apply(&farm.servers[1], s1);
        assert_eq!(farm.servers[1].admin.load(Ordering::Relaxed), ADMIN_MAINT);
        assert_eq!(farm.servers[1].weight.load(Ordering::Relaxed), 4);
    }

    proptest::proptest! {
        /// Any input: no panic, and an error names a line that exists.
        #[test]
        fn never_panics(text in "[0-9a-z #\t\n:.\\-]{0,300}") {
            if let Err(e) = parse(&text) {
                proptest::prop_assert!(e.line >= 1 && e.line <= text.split('\n').count().max(1));
            }
        }

        /// A good file with one line cut anywhere is refused, naming that
        /// line (or an earlier one), never applied in part.
        #[test]
        fn a_cut_line_is_found(cut in 0usize..60, which in 0usize..3) {
            let lines: Vec<String> = (0..3).map(|i| line("be", &format!("s{i}"), "10.0.0.1", 0, 1)).collect();
            let l = &lines[which];
            let cut = cut.min(l.len() - 2);
            let mut text = String::from("1\n");
            for (i, x) in lines.iter().enumerate() {
                if i == which {
                    text.push_str(&l[..cut]);
                    text.push('\n');
                } else {
                    text.push_str(x);
                }
            }
            match parse(&text) {
                Ok(t) => {
                    // Only a cut that leaves the line empty is harmless.
                    proptest::prop_assert!(l[..cut].trim().is_empty());
                    proptest::prop_assert_eq!(t["be"].len(), 2);
                }
                Err(e) => proptest::prop_assert_eq!(e.line, which + 2),
            }
        }
    }

    #[test]
    fn paths() {
        assert_eq!(
            global_path(Some(Path::new("s")), Some(Path::new("/b"))),
            Some(PathBuf::from("/b/s"))
        );
        assert_eq!(
            global_path(Some(Path::new("/a/s")), Some(Path::new("/b"))),
            Some(PathBuf::from("/a/s"))
        );
        assert_eq!(global_path(None, Some(Path::new("/b"))), None);
    }
}
