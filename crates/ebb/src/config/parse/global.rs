//! The `global` section: process-wide settings, read into [`Global`].
//!
//! Most keywords take one value, checked against HAProxy's range (or a
//! tighter one where a larger value can only be a typo, said at the
//! line). A few do not land in `Global`: `default-path` sets where later
//! relative file names point, `crt-base`, `ca-base` and the
//! `ssl-default-*` keywords fill [`TlsDefaults`](super::TlsDefaults), which `bind` and `server`
//! lines read when they are parsed (so, as in HAProxy, they must come
//! first), and `setenv` and its kin change the environment the following
//! lines expand. A keyword HAProxy has and ebb does not is refused by name;
//! an unknown one gets a "did you mean".

use std::path::PathBuf;
use std::time::Duration;

use super::bind::{parse_octal_mode, parse_sock_spec};
use super::log::parse_log_target;
use super::rules::parse_var_action;
use super::tls::{server_tls_option, ssl_option};
use super::{DefaultPath, Parser};
use crate::config::types::*;
use crate::config::values::*;
use crate::sample::{Scope, VarAction};

/// Keywords of the `global` section, for "did you mean" hints.
const GLOBAL_KEYWORDS: &[&str] = &[
    "h1-case-adjust",
    "h1-case-adjust-file",
    "nbthread",
    "maxconn",
    "tune.bufsize",
    "setenv",
    "presetenv",
    "cpu-map",
    "tune.ssl.default-dh-param",
    "ssl-dh-param-file",
    "node",
    "description",
    "unsetenv",
    "resetenv",
    "tune.runqueue-depth",
    "tune.sched.low-latency",
    "tune.sched.scope-lookups",
    "tune.heavy-tasklets",
    "tune.ssl.cachesize",
    "tune.ssl.capture-buffer-size",
    "profiling.tasks",
    "hard-stop-after",
    "grace",
    "log",
    "pidfile",
    "stats",
    "server-state-file",
    "server-state-base",
    "daemon",
    "quiet",
    "ssl-load-extra-del-ext",
    "maxsslconn",
    "set-dumpable",
    "strict-limits",
    "zero-warning",
    "external-check",
    "insecure-fork-wanted",
    "insecure-setuid-wanted",
    "ssl-server-verify",
    "default-path",
    "crt-base",
    "ca-base",
    "ssl-default-bind-ciphers",
    "ssl-default-bind-ciphersuites",
    "ssl-default-bind-curves",
    "ssl-default-bind-options",
    "ssl-default-server-ciphers",
    "ssl-default-server-ciphersuites",
    "ssl-default-server-options",
    "chroot",
    "user",
    "group",
    "uid",
    "gid",
    "log-tag",
    "log-send-hostname",
    "tune.maxrewrite",
    "tune.idle-pool.shared",
    "ulimit-n",
    "tune.http.drain-max",
    "tune.http.maxhdr",
    "maxconnrate",
    "maxsessrate",
    "tune.h2.max-concurrent-streams",
    "tune.h2.initial-window-size",
    "tune.h2.header-table-size",
    "tune.h2.max-frame-size",
    "tune.comp.maxlevel",
    "close-spread-time",
    "spread-checks",
    "max-spread-checks",
    "master-worker",
    "set-var",
    "set-var-fmt",
];

/// Whether a `quiet` line was read (also when the configuration is then
/// refused: HAProxy says nothing of the errors either).
static QUIET_SEEN: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

/// Whether some configuration read by this process said `quiet`.
pub fn quiet_seen() -> bool {
    QUIET_SEEN.load(std::sync::atomic::Ordering::Relaxed)
}

/// HAProxy `global` keywords ebb knows of but does not implement: a clearer
/// message than "unknown keyword" for people bringing a haproxy.cfg.
const HAPROXY_GLOBAL_UNSUPPORTED: &[&str] = &["nbproc", "lua-load"];

/// A node name as HAProxy takes it (global `node`, `stats show-node`):
/// letters, digits, '.', '-' and '_', at least one.
pub(super) fn check_node_name(kw: &str, n: &str) -> Result<(), String> {
    let ok = !n.is_empty()
        && n.chars()
            .all(|c| c.is_ascii_alphanumeric() || "-_.".contains(c));
    if !ok {
        return Err(format!(
            "'{kw}' requires a valid node name (letters, digits, '.', '-' and '_'), got '{n}'"
        ));
    }
    Ok(())
}

fn parse_stats_socket(w: &[String], loc: &Loc) -> Result<StatsSocket, String> {
    let Some(path) = w.first() else {
        return Err("'stats socket' expects a path".to_string());
    };
    // A TCP address is checked now, as a bind line's is.
    let tcp = ["ipv4@", "ipv6@", "tcp@", "tcp4@", "tcp6@"]
        .iter()
        .find_map(|p| path.strip_prefix(p))
        .or_else(|| {
            (!path.starts_with('/') && !path.contains('@') && path.contains(':'))
                .then_some(path.as_str())
        });
    if let Some(a) = tcp {
        if parse_bind_addrs(a)?.len() != 1 {
            return Err(format!(
                "'stats socket {path}': a TCP stats socket takes one address and one port"
            ));
        }
    } else if let Some(Err(e)) = parse_sock_spec(path).filter(|_| path.starts_with("fd@")) {
        return Err(e);
    }
    let mut s = StatsSocket {
        path: path.clone(),
        mode: None,
        owner: (None, None),
        level: CliLevel::Operator,
        nice: None,
        expose_fd: false,
        loc: loc.clone(),
    };
    let mut i = 1;
    while i < w.len() {
        let opt = w[i].as_str();
        let arg = w
            .get(i + 1)
            .ok_or_else(|| format!("'{opt}' expects a value"))?;
        match opt {
            "mode" => s.mode = Some(parse_octal_mode(arg)?),
            "level" => {
                s.level = CliLevel::from_name(arg).ok_or_else(|| {
                    format!("unknown level '{arg}' (expected user, operator or admin)")
                })?
            }
            "nice" => s.nice = Some(parse_nice(arg)?),
            "user" | "group" | "uid" | "gid" => {
                if tcp.is_some() {
                    return Err(format!("'{opt}' applies to a UNIX socket path only"));
                }
                super::bind::unix_owner_opt(opt, arg, &mut s.owner)?
            }
            "expose-fd" if arg == "listeners" => s.expose_fd = true,
            "expose-fd" => {
                return Err(format!(
                    "'expose-fd {arg}': only 'expose-fd listeners' exists"
                ))
            }
            o => {
                return Err(format!(
                    "unknown 'stats socket' option '{o}' (supported: mode, user, group, uid, gid, level, nice, expose-fd)"
                ))
            }
        }
        i += 2;
    }
    Ok(s)
}

/// Runs `one` over the option words of a `global` line (`w[1..]`): it
/// says how many following words an option took (`Some(n)`) or that the
/// word is not an option (`None`: refused, naming the supported ones).
fn option_words(
    kw: &str,
    w: &[String],
    supported: &str,
    mut one: impl FnMut(&str, Option<&str>) -> Result<Option<usize>, String>,
) -> Result<(), String> {
    let mut i = 1;
    while i < w.len() {
        let next = w.get(i + 1).map(String::as_str);
        match one(&w[i], next)? {
            Some(n) => i += 1 + n,
            None => {
                return Err(format!(
                    "unknown option '{}' in '{kw}' (supported: {supported})",
                    w[i]
                ))
            }
        }
    }
    Ok(())
}

impl Parser<'_> {
    pub(super) fn global_kw(&mut self, w: &[String], loc: &Loc) -> Result<(), String> {
        let kw = w[0].as_str();
        let g = &mut self.global;
        let one = |w: &[String]| -> Result<String, String> {
            match w {
                [_, v] => Ok(v.clone()),
                [k] => Err(format!("'{k}' expects an argument")),
                [k, ..] => Err(format!("'{k}' expects exactly one argument")),
                [] => Err("missing keyword".to_string()),
            }
        };
        match kw {
            "h1-case-adjust" | "h1-case-adjust-file" => super::h1case::global(g, w, loc)?,
            "expose-experimental-directives" => {
                if w.len() > 1 {
                    return Err(format!("'{kw}' takes no argument"));
                }
                self.experimental = true;
            }
            "nbthread" => {
                // Thread masks are 64 bits wide (HAProxy's default MAX_THREADS).
                let n = parse_u32_range(kw, &one(w)?, 1, 64)?;
                g.nbthread = Some(Spanned {
                    value: n,
                    loc: loc.clone(),
                });
            }
            "maxconn" => g.maxconn = Some(parse_u32_range(kw, &one(w)?, 1, u32::MAX)?),
            "tune.bufsize" => {
                let v = one(w)?;
                let n = parse_size(&v)?;
                // Below 1 KiB not even a request line fits; above 1 GiB a
                // per-connection buffer is surely a typo.
                if !(1024..=(1 << 30)).contains(&n) {
                    return Err(format!(
                        "'tune.bufsize' {v} is out of range (1024 bytes to 1g)"
                    ));
                }
                g.bufsize = n as usize;
            }
            "tune.runqueue-depth" => {
                // HAProxy only requires > 0; the cap keeps a typo from
                // making one loop turn effectively unbounded.
                g.runqueue_depth = Some(parse_u32_range(kw, &one(w)?, 1, 1_000_000)?)
            }
            "tune.sched.low-latency" => g.low_latency = parse_on_off(kw, &one(w)?)?,
            "tune.sched.scope-lookups" => g.scope_lookups = parse_on_off(kw, &one(w)?)?,
            "tune.heavy-tasklets" => g.heavy_tasklets = parse_on_off(kw, &one(w)?)?,
            // HAProxy's default is 20,000; the cap bounds memory (about
            // 250 bytes an entry) against a typo.
            "tune.ssl.cachesize" => {
                g.ssl_cachesize = Some(parse_u32_range(kw, &one(w)?, 0, 10_000_000)?)
            }
            // HAProxy: the ClientHello's cipher, extension and curve lists
            // kept for the `ssl_fc_cipherlist_*`, `ssl_fc_extlist_bin`,
            // `ssl_fc_eclist_bin` and `ssl_fc_ecformats_bin` fetches. ebb
            // refuses those fetches by name, so nothing reads the capture
            // and the size has no other effect to give.
            "tune.ssl.capture-buffer-size" => {
                if g.ssl_capture_buffer.is_some() {
                    return Err(format!("'{kw}' is already configured."));
                }
                g.ssl_capture_buffer = Some(parse_u32_range(kw, &one(w)?, 0, i32::MAX as u32)?)
            }
            "profiling.tasks" => {
                g.profiling_tasks = match one(w)?.as_str() {
                    "on" => ProfilingMode::On,
                    "off" => ProfilingMode::Off,
                    "auto" => ProfilingMode::Auto,
                    o => {
                        return Err(format!(
                            "'profiling.tasks' expects 'on', 'auto' or 'off', got '{o}'"
                        ))
                    }
                }
            }
            "hard-stop-after" => g.hard_stop_after = Some(parse_time(&one(w)?)?),
            // HAProxy 2.6: 0 is no grace (its timer is not set).
            "grace" => g.grace = Some(parse_time(&one(w)?)?).filter(|d| !d.is_zero()),
            "close-spread-time" => {
                let v = one(w)?;
                g.close_spread = Some(if v == "infinite" {
                    CloseSpread::Infinite
                } else {
                    CloseSpread::Window(parse_time(&v)?)
                });
            }
            "spread-checks" => {
                let n = parse_u32_range(kw, &one(w)?, 0, 50).map_err(|_| {
                    "'spread-checks' needs a positive value in range 0..50.".to_string()
                })?;
                // HAProxy keeps the first non-zero value and alerts.
                if g.spread_checks.is_some_and(|o| o != 0) {
                    return Err("spread-checks already specified.".into());
                }
                g.spread_checks = Some(n);
            }
            "max-spread-checks" => {
                let v = one(w)?;
                let t = parse_time(&v)?;
                // HAProxy counts in milliseconds: a non-null time under
                // one is refused.
                if t > Duration::ZERO && t < Duration::from_millis(1) {
                    return Err(format!(
                        "timer underflow in argument <{v}> to <{kw}>, minimum non-null value is 1 ms."
                    ));
                }
                g.max_spread_checks = Some(t);
            }
            "master-worker" => match w.get(1).map(String::as_str) {
                None => g.master_worker = true,
                Some("no-exit-on-failure") if w.len() == 2 => {
                    g.master_worker = true;
                    g.no_exit_on_failure = true;
                }
                Some("no-exit-on-failure") => {
                    return Err("'master-worker' cannot handle unexpected argument".into())
                }
                Some(_) => {
                    return Err("'master-worker' only supports 'no-exit-on-failure' option".into())
                }
            },
            "log" => {
                let t = parse_log_target(&w[1..], loc)?;
                g.log.push(t);
            }
            "localpeer" => g.localpeer = Some(one(w)?),
            "set-var" | "set-var-fmt" => {
                // HAProxy 2.5+: a process-wide variable set while the
                // configuration is read, in order (ebb runs them in order
                // at start, before any connection).
                let [_, name, value] = w else {
                    return Err(format!(
                        "'{kw}' requires a process-wide variable name ('proc.<name>') and {}",
                        if kw == "set-var" {
                            "a sample expression"
                        } else {
                            "a format string"
                        }
                    ));
                };
                if !name.starts_with("proc.") {
                    return Err(format!(
                        "'{kw}': cannot set variable '{name}', only scope 'proc' is permitted in the global section"
                    ));
                }
                let a = parse_var_action(
                    "global",
                    &format!("{kw}({name})"),
                    std::slice::from_ref(value),
                    Scope::Request { backend: true },
                )?;
                let free = match &a {
                    VarAction::Set(_, e) => e.context_free(),
                    VarAction::SetFmt(_, f) => f.context_free(),
                    VarAction::Unset(_) => true,
                };
                if !free {
                    return Err(format!(
                        "'{kw} {name}': '{value}' needs a connection or a request, which the global section does not have (only constants, env(), date(), rand(), uuid() and var() may be used here)"
                    ));
                }
                g.set_vars.push(a);
            }
            "pidfile" => {
                g.pidfile = Some(Spanned {
                    value: PathBuf::from(one(w)?),
                    loc: loc.clone(),
                })
            }
            "server-state-file" => {
                g.server_state_file = Some(Spanned {
                    value: PathBuf::from(one(w)?),
                    loc: loc.clone(),
                })
            }
            "server-state-base" => {
                g.server_state_base = Some(Spanned {
                    value: PathBuf::from(one(w)?),
                    loc: loc.clone(),
                })
            }
            // HAProxy: letters, digits, '.', '-' and '_'.
            "node" => {
                let n = one(w)?;
                check_node_name(kw, &n)?;
                g.node = Some(n);
            }
            // HAProxy joins the words with one space.
            "description" => {
                if w.len() < 2 {
                    return Err("'description' expects a string".to_string());
                }
                g.description = Some(w[1..].join(" "));
            }
            "cpu-map" => {
                crate::config::cpumap::line(w, g.cpu_map.get_or_insert_with(Default::default))?
            }
            "setenv" | "presetenv" | "unsetenv" | "resetenv" => {
                crate::environ::keyword(w, self.env)?
            }
            "daemon" => {
                if w.len() > 1 {
                    return Err("'daemon' takes no argument".to_string());
                }
                g.daemon = true;
            }
            "quiet" => {
                if w.len() > 1 {
                    return Err("'quiet' takes no argument".to_string());
                }
                g.quiet = true;
                QUIET_SEEN.store(true, std::sync::atomic::Ordering::Relaxed);
            }
            "ssl-load-extra-del-ext" => {
                if w.len() > 1 {
                    return Err("'ssl-load-extra-del-ext' takes no argument".to_string());
                }
                g.ssl_load_extra_del_ext = true;
            }
            "ssl-server-verify" => {
                g.ssl_server_verify = Some(match one(w)?.as_str() {
                    "none" => Verify::None,
                    "required" => Verify::Required,
                    x => {
                        return Err(format!(
                            "'ssl-server-verify' expects 'none' or 'required', got '{x}'"
                        ))
                    }
                });
            }
            // HAProxy's integer: 0 (the default) for no limit.
            "maxsslconn" => g.maxsslconn = parse_u32_range(kw, &one(w)?, 0, i32::MAX as u32)?,
            "set-dumpable" => {
                if w.len() > 1 {
                    return Err("'set-dumpable' takes no argument".to_string());
                }
                g.set_dumpable = true;
            }
            "strict-limits" | "zero-warning" => {
                if w.len() > 1 {
                    return Err(format!("'{kw}' takes no argument"));
                }
                if kw == "zero-warning" {
                    g.zero_warning = true;
                } else {
                    g.strict_limits = true;
                }
            }
            "no" if w.get(1).is_some_and(|k| k == "strict-limits") => {
                if w.len() > 2 {
                    return Err("'no strict-limits' takes no argument".to_string());
                }
                g.strict_limits = false;
            }
            "external-check" | "insecure-fork-wanted" | "insecure-setuid-wanted" => {
                if w.len() > 1 {
                    return Err(format!("'{kw}' takes no argument"));
                }
                match kw {
                    "external-check" => g.external_check = true,
                    "insecure-setuid-wanted" => g.insecure_setuid = true,
                    _ => g.insecure_fork = true,
                }
            }
            // HAProxy's `no` in `global` (here only for what ebb has of
            // the keywords that take it).
            "no" if w.get(1).is_some_and(|k| k == "set-dumpable") => {
                if w.len() > 2 {
                    return Err("'no set-dumpable' takes no argument".to_string());
                }
                g.set_dumpable = false;
            }
            "no" if w
                .get(1)
                .is_some_and(|k| k == "insecure-fork-wanted" || k == "insecure-setuid-wanted") =>
            {
                if w.len() > 2 {
                    return Err(format!("'no {}' takes no argument", w[1]));
                }
                if w[1] == "insecure-fork-wanted" {
                    g.insecure_fork = false;
                } else {
                    g.insecure_setuid = false;
                }
            }
            "chroot" => {
                g.chroot = Some(Spanned {
                    value: PathBuf::from(one(w)?),
                    loc: loc.clone(),
                })
            }
            "log-tag" => g.log_tag = Some(one(w)?),
            "ulimit-n" => g.ulimit_n = Some(u64::from(parse_u32_range(kw, &one(w)?, 1, u32::MAX)?)),
            "tune.maxrewrite" => {
                g.maxrewrite = Some(parse_u32_range(kw, &one(w)?, 0, 1 << 30)? as usize)
            }
            // HAProxy 2.6 refuses what its `int` reads as negative.
            "tune.h2.max-concurrent-streams" => {
                g.h2_max_concurrent_streams = Some(parse_u32_range(kw, &one(w)?, 0, (1 << 31) - 1)?)
            }
            // RFC 9113 §6.5.2: at most 2^31-1.
            "tune.h2.initial-window-size" => {
                g.h2_initial_window_size = Some(parse_u32_range(kw, &one(w)?, 0, (1 << 31) - 1)?)
            }
            // HAProxy 2.6's range: below the RFC's 4096 is refused.
            "tune.h2.header-table-size" => {
                g.h2_header_table_size = Some(parse_u32_range(kw, &one(w)?, 4096, 65536)?)
            }
            // RFC 9113 §6.5.2, and HAProxy's check.
            "tune.h2.max-frame-size" => {
                g.h2_max_frame_size = Some(parse_u32_range(kw, &one(w)?, 16384, 16_777_215)?)
            }
            // ebb's own: HAProxy has no keyword for it (see http1::Drain).
            "tune.http.drain-max" => {
                let v = one(w)?;
                let n = parse_size(&v)?;
                if n > 1 << 30 {
                    return Err(format!(
                        "'tune.http.drain-max' {v} is out of range (0 to 1g)"
                    ));
                }
                g.drain_max = Some(n);
            }
            // HAProxy's: a number, 0 for no limit.
            "maxconnrate" => g.max_conn_rate = parse_u32_range(kw, &one(w)?, 0, u32::MAX)?,
            "maxsessrate" => g.max_sess_rate = parse_u32_range(kw, &one(w)?, 0, u32::MAX)?,
            "tune.http.maxhdr" => {
                let n = parse_u32_range(kw, &one(w)?, 1, 32767)? as usize;
                // HAProxy's range is 1..=32767. An HTTP/2 head may decode
                // to 2N - 1 fields (HAProxy's HPACK list), all of which
                // ebb's parser must keep.
                let top = (crate::http1::MAX_HEADERS_CAP - 6) / 2;
                if n > top {
                    return Err(format!(
                        "'tune.http.maxhdr' above {top} is not supported by ebb (its parser keeps at most {} fields, room for the {} an HTTP/2 head may then have)",
                        crate::http1::MAX_HEADERS_CAP,
                        2 * top - 1
                    ));
                }
                g.max_hdr = Some(n);
            }
            // HAProxy takes 1..=9 (zlib's levels); brotli and zstd get the
            // same number, clamped to their own range.
            "tune.comp.maxlevel" => g.comp_maxlevel = Some(parse_u32_range(kw, &one(w)?, 1, 9)?),
            "tune.idle-pool.shared" => g.idle_pool_shared = parse_on_off(kw, &one(w)?)?,
            "log-send-hostname" => {
                g.log_send_hostname = Some(match w {
                    [_] => std::fs::read_to_string("/proc/sys/kernel/hostname")
                        .map(|h| h.trim().to_string())
                        .map_err(|e| format!("cannot read the host name: {e}"))?,
                    [_, h] => h.clone(),
                    _ => return Err("'log-send-hostname' expects at most a name".to_string()),
                })
            }
            "uid" => g.uid = Some(parse_u32_range(kw, &one(w)?, 0, u32::MAX)?),
            "gid" => g.gid = Some(parse_u32_range(kw, &one(w)?, 0, u32::MAX)?),
            "user" => {
                let name = one(w)?;
                match crate::sys::user_by_name(&name) {
                    Ok(Some((uid, _))) => g.uid = Some(uid),
                    Ok(None) => return Err(format!("unknown user '{name}'")),
                    Err(e) => return Err(format!("cannot look up user '{name}': {e}")),
                }
            }
            "group" => {
                let name = one(w)?;
                match crate::sys::group_by_name(&name) {
                    Ok(Some(gid)) => g.gid = Some(gid),
                    Ok(None) => return Err(format!("unknown group '{name}'")),
                    Err(e) => return Err(format!("cannot look up group '{name}': {e}")),
                }
            }
            "default-path" => {
                self.default_path =
                    match w.get(1).map(String::as_str) {
                        Some("current") if w.len() == 2 => DefaultPath::Current,
                        Some("config") if w.len() == 2 => DefaultPath::Config,
                        Some("parent") if w.len() == 2 => DefaultPath::Parent,
                        Some("origin") if w.len() == 3 => DefaultPath::Origin(PathBuf::from(&w[2])),
                        _ => return Err(
                            "'default-path' expects 'current', 'config', 'parent' or 'origin DIR'"
                                .to_string(),
                        ),
                    }
            }
            "stats" => match w.get(1).map(String::as_str) {
                Some("socket") => {
                    let s = parse_stats_socket(&w[2..], loc)?;
                    g.stats_sockets.push(s);
                }
                Some("timeout") => match w {
                    [_, _, t] => g.stats_timeout = Some(parse_time(t)?),
                    _ => return Err("'stats timeout' expects a time".to_string()),
                },
                Some(o) => {
                    return Err(format!(
                        "unknown 'stats {o}' in global (supported: stats socket, stats timeout)"
                    ))
                }
                None => return Err("'stats' expects 'socket' or 'timeout'".to_string()),
            },
            "crt-base" => self.tls.crt_base = Some(PathBuf::from(one(w)?)),
            // Both concern DHE key exchanges, which ebb never makes (its TLS
            // library offers ECDHE only; DHE suites in a cipher string match
            // nothing): checked as HAProxy checks them, with no object.
            "tune.ssl.default-dh-param" => {
                let v = one(w)?;
                match v.trim().parse::<i64>() {
                    Ok(n) if n >= 1024 => {}
                    _ => return Err(format!("'{kw}' expects a value >= 1024")),
                }
            }
            "ssl-dh-param-file" => {
                let f = one(w)?;
                let text = std::fs::read_to_string(&f).unwrap_or_default();
                let ok = text
                    .split_once("-----BEGIN DH PARAMETERS-----")
                    .and_then(|(_, rest)| rest.split_once("-----END DH PARAMETERS-----"))
                    .is_some_and(|(b64, _)| {
                        let b: String = b64.split_whitespace().collect();
                        b.len() >= 8
                            && b.bytes()
                                .all(|c| c.is_ascii_alphanumeric() || b"+/=".contains(&c))
                    });
                if !ok {
                    return Err(format!(
                        "'{kw}': unable to load DH parameters from file <{f}>"
                    ));
                }
            }
            "ca-base" => self.tls.ca_base = Some(PathBuf::from(one(w)?)),
            "ssl-default-bind-ciphers" => {
                let v = one(w)?;
                crate::tls_policy::ciphers12(&v)?;
                self.tls.bind.ciphers = Some(v);
            }
            "ssl-default-bind-ciphersuites" => {
                let v = one(w)?;
                crate::tls_policy::ciphers13(&v)?;
                self.tls.bind.ciphersuites = Some(v);
            }
            "ssl-default-bind-curves" => {
                let v = one(w)?;
                crate::tls_policy::curves(&v)?;
                self.tls.bind.curves = Some(v);
            }
            "ssl-default-bind-options" => {
                option_words(
                    kw,
                    w,
                    "ssl-min-ver, ssl-max-ver, no-sslv3, no-tlsv10, no-tlsv11, no-tlsv12, no-tlsv13, force-tlsv12, force-tlsv13, no-tls-tickets, prefer-client-ciphers",
                    |o, next| ssl_option(o, next, &mut self.tls.bind),
                )?;
                if self.tls.bind.versions().is_empty() {
                    return Err("'ssl-default-bind-options' leaves no TLS version ebb speaks (TLSv1.2, TLSv1.3)".to_string());
                }
            }
            "ssl-default-server-ciphers" => {
                let v = one(w)?;
                crate::tls_policy::ciphers12(&v)?;
                self.tls.server.ciphers = Some(v);
            }
            "ssl-default-server-ciphersuites" => {
                let v = one(w)?;
                crate::tls_policy::ciphers13(&v)?;
                self.tls.server.ciphersuites = Some(v);
            }
            "ssl-default-server-options" => {
                option_words(
                    kw,
                    w,
                    "ssl-min-ver, ssl-max-ver, no-sslv3, no-tlsv10, no-tlsv11, no-tlsv12, no-tlsv13, force-tlsv12, force-tlsv13, no-tls-tickets",
                    |o, next| server_tls_option(o, next, &mut self.tls.server),
                )?;
                if self.tls.server.versions().is_empty() {
                    return Err("'ssl-default-server-options' leaves no TLS version ebb speaks (TLSv1.2, TLSv1.3)".to_string());
                }
            }
            _ if HAPROXY_GLOBAL_UNSUPPORTED.contains(&kw) => {
                return Err(format!("HAProxy keyword '{kw}' is not supported by ebb"))
            }
            _ => {
                return Err(format!(
                    "unknown keyword '{kw}' in 'global' section{}",
                    suggest(kw, GLOBAL_KEYWORDS)
                ))
            }
        }
        Ok(())
    }
}
