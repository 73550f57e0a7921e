//! The server actions the CLI (`set server`, `enable|disable server`,
//! `clear counters`) and the page's admin form both perform, and the form's
//! reading.

use super::*;

// ---------------------------------------------------------------------------
// Server actions (CLI `set server`, `enable|disable server`, page admin)
// ---------------------------------------------------------------------------

/// Finds `BACKEND/SERVER` in the configuration in force.
pub fn find_server(c: &Compiled, spec: &str) -> Result<(Arc<Farm>, Arc<ServerRt>), String> {
    let (b, s) = spec
        .split_once('/')
        // HAProxy 2.6's words, here and below.
        .filter(|(b, s)| !b.is_empty() && !s.is_empty())
        .ok_or_else(|| "Require 'backend/server'.".to_string())?;
    find_server2(c, b, s)
}

/// Finds a server by backend and server name.
pub fn find_server2(c: &Compiled, b: &str, s: &str) -> Result<(Arc<Farm>, Arc<ServerRt>), String> {
    let be = c
        .backends
        .iter()
        .find(|x| x.name == b)
        .ok_or_else(|| "No such backend.".to_string())?;
    let BackendKind::Servers(sv) = &be.kind else {
        return Err(format!("Backend '{b}' has no servers (it serves files)."));
    };
    let srv = sv
        .farm
        .servers
        .iter()
        .find(|x| x.name == s)
        .ok_or_else(|| "No such server.".to_string())?;
    Ok((Arc::clone(&sv.farm), Arc::clone(srv)))
}

/// Puts a server in `ready`, `drain` or `maint`. Streams waiting for a
/// server that leaves service pick again; when one comes back, the
/// backend's queue is served.
pub fn set_admin(farm: &Farm, s: &ServerRt, state: u8) -> Result<(), String> {
    crate::backend::set_admin(farm, s, state)
}

/// `set server B/S weight N` (0..=256) or `N%` of the configured weight.
pub fn set_weight(farm: &Farm, s: &ServerRt, arg: &str) -> Result<(), String> {
    let w = if let Some(p) = arg.strip_suffix('%') {
        let p: u64 = p.parse().map_err(|_| format!("Invalid weight '{arg}'."))?;
        // Saturated, not wrapped: a huge percentage is over 256.
        let w = u64::from(s.opts.weight).saturating_mul(p) / 100;
        u32::try_from(w).unwrap_or(u32::MAX)
    } else {
        arg.parse::<u32>()
            .map_err(|_| format!("Invalid weight '{arg}': expected 0..256 or N%."))?
    };
    if w > 256 {
        return Err(format!("Invalid weight '{arg}': at most 256."));
    }
    if farm.static_weights() && w != 0 && w != s.opts.weight {
        return Err(
            "Backend is using a static LB algorithm and only accepts weights '0%' and '100%'."
                .into(),
        );
    }
    s.weight.store(w, Ordering::Relaxed);
    if w == 0 {
        farm.redispatch_queue_of(s);
    } else {
        farm.kick_backend_queue();
    }
    Ok(())
}

/// `set maxconn server B/S N` (0: unlimited).
pub fn set_maxconn(farm: &Farm, s: &ServerRt, arg: &str) -> Result<(), String> {
    let m: u32 = arg
        .parse()
        .map_err(|_| format!("Invalid maxconn '{arg}'."))?;
    s.maxconn.store(m, Ordering::Relaxed);
    farm.kick_backend_queue();
    Ok(())
}

/// Forgets the servers' `smax` (`clear counters`).
pub fn clear_server_maxima(c: &Compiled) {
    for be in &c.backends {
        if let BackendKind::Servers(sv) = &be.kind {
            for s in &sv.farm.servers {
                s.ext
                    .smax
                    .store(s.cur.load(Ordering::Relaxed), Ordering::Relaxed);
                s.counters.times.clear_maxima();
                s.counters.qmax.store(0, Ordering::Relaxed);
            }
            sv.farm.counters.times.clear_maxima();
            sv.farm.counters.qmax.store(0, Ordering::Relaxed);
        }
    }
}

/// Zeroes every counter (`clear counters all`).
pub fn clear_all(c: &Compiled) {
    clear_server_maxima(c);
    for fe in &c.frontends {
        fe.http.clear();
        fe.sessions.store(0, Ordering::Relaxed);
    }
    for be in &c.backends {
        be.http.clear();
        if let BackendKind::Servers(sv) = &be.kind {
            let f = &sv.farm;
            for s in f.servers.iter().map(|s| &s.counters).chain([&f.counters]) {
                for a in [
                    &s.sessions,
                    &s.assigned,
                    &s.lb_picks,
                    &s.heads,
                    &s.bytes_in,
                    &s.bytes_out,
                    &s.conn_errors,
                    &s.resp_errors,
                    &s.denied_resp,
                    &s.retries,
                    &s.redispatches,
                    &s.queued_total,
                    &s.queue_timeouts,
                    &s.connects,
                    &s.reuses,
                    &s.cli_aborts,
                    &s.srv_aborts,
                ]
                .into_iter()
                .chain(&s.hrsp)
                {
                    a.store(0, Ordering::Relaxed);
                }
                s.times.clear();
            }
        }
    }
    clear_samples();
}

/// Finds the backend of an admin form: `#ID` or a name.
fn form_backend(c: &Compiled, b: &str) -> Option<Arc<Farm>> {
    let be = match b.strip_prefix('#') {
        Some(id) => {
            let id: usize = id.parse().ok()?;
            c.backends.iter().find(|x| x.uuid == id)?
        }
        None => {
            let mut named = c.backends.iter().filter(|x| x.name == b);
            let be = named.next()?;
            if named.next().is_some() {
                return None; // ambiguous
            }
            be
        }
    };
    match &be.kind {
        BackendKind::Servers(sv) => Some(Arc::clone(&sv.farm)),
        BackendKind::Files(_) => None,
    }
}

/// Does one action of the page's admin form on server `s`: `Some(true)`
/// when it changed it, `Some(false)` when the action does not apply to it
/// (not counted, as HAProxy), `None` when it is unknown or ebb cannot do
/// it.
fn form_action(farm: &Farm, s: &ServerRt, action: &str) -> Option<bool> {
    let admin = s.admin.load(Ordering::Relaxed);
    let set = |st: u8| set_admin(farm, s, st).is_ok();
    Some(match action {
        "ready" => set(ADMIN_READY),
        "drain" => set(ADMIN_DRAIN),
        "maint" => set(ADMIN_MAINT),
        "disable" => admin != ADMIN_MAINT && set(ADMIN_MAINT),
        "enable" => admin == ADMIN_MAINT && set(ADMIN_READY),
        "stop" => admin != ADMIN_DRAIN && set(ADMIN_DRAIN),
        "start" => admin == ADMIN_DRAIN && set(ADMIN_READY),
        "dhlth" | "ehlth" => {
            if !s.opts.check {
                return Some(false);
            }
            crate::backend::check_switch(s, action == "ehlth", false).is_ok()
        }
        "dagent" | "eagent" => {
            if !s.agent.configured {
                return Some(false);
            }
            crate::backend::check_switch(s, action == "eagent", true).is_ok()
        }
        "hrunn" | "hnolb" | "hdown" => {
            // HAProxy passes over a tracking server (not counted).
            use crate::backend::check::{force_health, Health};
            let h = match action {
                "hrunn" => Health::Up,
                "hnolb" => Health::Stopping,
                _ => Health::Down,
            };
            if s.tracked.get().is_some() || (h == Health::Down && !s.opts.check) {
                return Some(false);
            }
            force_health(farm, s, h, "changed from Web interface").is_ok()
        }
        "arunn" | "adown" => {
            if !s.agent.enabled() {
                return Some(false);
            }
            crate::backend::agent::force(farm, s, action == "arunn").is_ok()
        }
        _ => return None,
    })
}

/// The words of a posted admin form, read last to first as HAProxy
/// does: the last `b` and `action` given, every `s`; reading stops at a
/// word that does not decode.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct FormWords {
    pub b: Option<String>,
    pub action: Option<String>,
    pub servers: Vec<String>,
}

/// Splits a posted admin form into its words.
pub fn post_form_words(body: &[u8]) -> FormWords {
    let body = String::from_utf8_lossy(body);
    let mut w = FormWords::default();
    for kv in body.split('&').rev() {
        let (k, v) = kv.split_once('=').unwrap_or((kv, ""));
        let (Some(k), Some(v)) = (unpct(k), unpct(v)) else {
            break;
        };
        match k.as_str() {
            "b" if w.b.is_none() => w.b = Some(v),
            "action" if w.action.is_none() => w.action = Some(v),
            "s" => w.servers.push(v),
            _ => {}
        }
    }
    w
}

/// Runs the admin form posted to the page (`s=SERVER&...&action=A&b=B`:
/// every `s` is a server of that backend) and returns the result code
/// for the redirect.
pub fn post_action(c: &Compiled, body: &[u8]) -> &'static str {
    const KNOWN: [&str; 17] = [
        "ready", "drain", "maint", "shutdown", "dhlth", "ehlth", "hrunn", "hnolb", "hdown",
        "dagent", "eagent", "arunn", "adown", "disable", "enable", "stop", "start",
    ];
    let w = post_form_words(body);
    if w.action.as_deref().is_some_and(|a| !KNOWN.contains(&a)) {
        return "ERRP";
    }
    let farm = match &w.b {
        Some(b) => match form_backend(c, b) {
            Some(f) => Some(f),
            None => return "ERRP",
        },
        None => None,
    };
    let (servers, action) = (w.servers, w.action);
    let (Some(farm), Some(action)) = (farm, action) else {
        return "NONE";
    };
    let (mut total, mut altered) = (0, 0);
    for name in &servers {
        let found = farm
            .servers
            .iter()
            .find(|x| &x.name == name && !x.is_deleted());
        let Some(s) = found else {
            total += 1;
            continue;
        };
        match form_action(&farm, s, &action) {
            Some(true) => {
                total += 1;
                altered += 1;
            }
            Some(false) => {}
            // An action ebb does not do: the server is not altered.
            None => total += 1,
        }
    }
    if total == 0 {
        "NONE"
    } else if altered == 0 {
        "ERRP"
    } else if altered == total {
        "DONE"
    } else {
        "PART"
    }
}
