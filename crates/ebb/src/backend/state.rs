//! How a server's state changes while ebb runs, and how it is named.
//!
//! Administrative state (`set server ... state`, `enable|disable server`,
//! an agent's word), health checks switched on and off (`enable|disable
//! health|agent`), `track` chains passing maintenance and drain on,
//! `on-marked-down` / `on-marked-up` ending sessions; each change noted on
//! the backend's history, logged as HAProxy logs it, and followed by what
//! the queues need (waiters redispatched, or served by a server back in
//! use: [`super::queue`]). The health checks themselves are in
//! [`super::check`]; this module is what they and the CLI call.

use std::sync::atomic::Ordering;
use std::sync::{Arc, OnceLock};

use super::{check, Farm, ServerRt, ADMIN_DRAIN, ADMIN_MAINT, ADMIN_READY};

/// A server's state as the stats page, the CSV and the metrics name it.
pub fn server_status(s: &ServerRt) -> std::borrow::Cow<'static, str> {
    if s.iadmin.load(Ordering::Relaxed) == ADMIN_MAINT && !s.rmaint.load(Ordering::Relaxed) {
        if let Some(t) = s.tracked.get() {
            return format!("MAINT (via {}/{})", t.backend, t.name).into();
        }
    }
    let own = server_status_own(s);
    // HAProxy's transition states while checks fail or succeed: the
    // failures left before DOWN of `fall` ("UP 2/3", "DRAIN 2/3", "NOLB
    // 2/3"), the
    // successes of `rise` while DOWN ("DOWN 1/2").
    let streak = s.check_streak.load(Ordering::Relaxed);
    let checking = streak > 0 && s.check_on.load(Ordering::Relaxed);
    match own {
        "UP" | "DRAIN" | "NOLB" if checking && s.check_ok.load(Ordering::Relaxed) => {
            let fall = s.opts.fall.max(1);
            format!("{own} {}/{fall}", fall.saturating_sub(streak)).into()
        }
        "DOWN" if checking && !s.check_ok.load(Ordering::Relaxed) => {
            format!("DOWN {streak}/{}", s.opts.rise.max(1)).into()
        }
        _ => own.into(),
    }
}

pub(super) fn server_status_own(s: &ServerRt) -> &'static str {
    let agent = s.agent.enabled();
    match s.admin_state() {
        ADMIN_MAINT => "MAINT",
        _ if s.rmaint.load(Ordering::Relaxed) => "MAINT (resolution)",
        // HAProxy's STOPPING state shows NOLB whatever the drain.
        _ if s.up.load(Ordering::Relaxed) && s.nolb() => "NOLB",
        ADMIN_DRAIN if s.up.load(Ordering::Relaxed) && agent => "DRAIN (agent)",
        ADMIN_DRAIN if s.up.load(Ordering::Relaxed) => "DRAIN",
        _ if !s.up.load(Ordering::Relaxed) && agent && !s.agent.healthy.load(Ordering::Relaxed) => {
            "DOWN (agent)"
        }
        _ if !s.up.load(Ordering::Relaxed) => "DOWN",
        _ if !s.checked() => "no check",
        _ => "UP",
    }
}

/// Ends the sessions whose exchange is with one of the servers named by
/// uid, for a reason (the letter their log gives): installed at start by
/// the layer that keeps the sessions, which the backend does not know.
pub type SessionKiller = Box<dyn Fn(&[u64], u8) + Send + Sync>;

pub(super) static KILLER: OnceLock<SessionKiller> = OnceLock::new();

/// Its server went DOWN with `on-marked-down shutdown-sessions`: `D`.
pub const KILL_DOWN: u8 = b'D';
/// An active server came UP with `on-marked-up shutdown-backup-sessions`
/// while it was on a backup server: `U`.
pub const KILL_UP: u8 = b'U';

/// Installs the [`SessionKiller`] (once, at start).
pub fn set_session_killer(k: SessionKiller) {
    let _ = KILLER.set(k);
}

/// A server stopped serving (DOWN by its checks, its agent or the server
/// it tracks, or into maintenance while it was not DOWN): with
/// `on-marked-down shutdown-sessions` its sessions are killed, logged
/// `D` (HAProxy's srv_shutdown_streams with SF_ERR_DOWN).
pub fn marked_down(s: &ServerRt) {
    if s.opts.on_marked_down {
        if let Some(k) = KILLER.get() {
            k(&[s.uid], KILL_DOWN);
        }
    }
}

/// A server came UP (or left maintenance): an active one with
/// `on-marked-up shutdown-backup-sessions` that may take traffic (not
/// draining, a weight) kills the sessions of its backend's backup
/// servers, logged `U`.
pub fn marked_up(farm: &Farm, s: &ServerRt) {
    if !s.opts.on_marked_up || s.opts.backup || !s.usable() {
        return;
    }
    let backups: Vec<u64> = farm
        .servers
        .iter()
        .filter(|x| x.opts.backup)
        .map(|x| x.uid)
        .collect();
    if let Some(k) = KILLER.get() {
        k(&backups, KILL_UP);
    }
}

/// Sets a server's administrative state (`set server ... state`,
/// `enable|disable server`, an agent's `ready|drain|maint`), with
/// HAProxy's log lines on entering and leaving maintenance.
pub fn set_admin(farm: &Farm, s: &ServerRt, state: u8) -> Result<(), String> {
    if state == ADMIN_READY && !s.has_addr() && s.opts.resolvers.is_none() {
        return Err(format!(
            "Server {}/{} has no address: it stays in maintenance.",
            farm.name, s.name
        ));
    }
    let was = s.usable();
    let in_force = s.admin_state();
    // HAProxy's `srv_was_stopping`: into maintenance from NOLB or DRAIN
    // is a notice, not an alert.
    let was_stopping = (s.up.load(Ordering::Relaxed) && s.nolb()) || in_force == ADMIN_DRAIN;
    let was_maint = s.in_maint();
    // HAProxy's STOPPED before the change: a server its checks (or the
    // server it tracks) hold DOWN.
    let was_down = !s.up.load(Ordering::Relaxed);
    let before = s.admin.swap(state, Ordering::Relaxed);
    if state == ADMIN_MAINT {
        // Maintenance stops the server (HAProxy's STOPPED): it leaves
        // NOLB, and comes back UP.
        s.stopping.store(false, Ordering::Relaxed);
    }
    // Its health first: the trackers that leave maintenance with it
    // read it.
    maint_checks(farm, s, was_maint);
    if was != s.usable() {
        s.ext.changed(s.usable());
        farm.note_state();
    }
    let moved = s.admin_state() != in_force;
    if moved {
        admin_moved(farm, s, in_force);
    }
    // HAProxy's alert on entering maintenance and notice on leaving it;
    // a server already DOWN only says so, as a notice (it leaves no
    // server count behind: it took no traffic).
    if state == ADMIN_MAINT && before != ADMIN_MAINT && was_down && !was_maint {
        check::log_event_at(
            farm,
            Some(crate::log::LOG_NOTICE),
            format!(
                "{}Server {}/{} was DOWN and now enters maintenance.",
                s.backup_word(),
                farm.name,
                s.name
            ),
        );
    } else if state == ADMIN_MAINT && before != ADMIN_MAINT {
        let (act, bck) = farm.usable_counts();
        check::log_event_at(
            farm,
            was_stopping.then_some(crate::log::LOG_NOTICE),
            format!(
                "{}Server {}/{} is going DOWN for maintenance. {act} active and {bck} backup servers left. {} sessions active, 0 requeued, {} remaining in queue.",
                s.backup_word(),
                farm.name,
                s.name,
                s.cur.load(Ordering::Relaxed),
                farm.queued()
            ),
        );
        check::log_if_none_left(farm);
    } else if before == ADMIN_MAINT && state != ADMIN_MAINT {
        // HAProxy names the state it leaves in: DOWN while its agent or
        // the server it tracks says so.
        check::log_event(
            farm,
            format!(
                "{}Server {}/{} is {}/READY (leaving forced maintenance).",
                s.backup_word(),
                farm.name,
                s.name,
                if s.up.load(Ordering::Relaxed) {
                    "UP"
                } else {
                    "DOWN"
                }
            ),
        );
    }
    // Then its trackers, each with its line (HAProxy's order: the server
    // its changes come from first).
    if moved {
        propagate_admin(s);
    }
    if state == ADMIN_READY {
        farm.kick_backend_queue();
    } else {
        farm.redispatch_queue_of(s);
    }
    Ok(())
}

/// `enable|disable health|agent BACKEND/NAME` (the CLI's and the stats
/// page's admin action).
pub fn check_switch(s: &ServerRt, on: bool, agent: bool) -> Result<String, String> {
    if agent {
        // HAProxy: enabling needs `agent-check`; disabling never fails.
        // Neither changes the server's state by itself.
        if on && !s.agent.configured {
            return Err("Agent was not configured on this server, cannot enable.\n".into());
        }
        s.agent.on.store(on, Ordering::Relaxed);
        return Ok(String::new());
    }
    if on && !s.opts.check {
        return Err("Health check was not configured on this server, cannot enable.\n".into());
    }
    // Only the check stops or resumes: the server keeps its state, a
    // DOWN one stays DOWN (HAProxy 2.6's cli_parse_disable_health clears
    // the check's flag and nothing else, whatever its manual says).
    s.check_on.store(on, Ordering::Relaxed);
    Ok(String::new())
}

impl ServerRt {
    /// What HAProxy's lines of a server's state changes start with:
    /// `Backup ` for a backup server.
    pub fn backup_word(&self) -> &'static str {
        if self.opts.backup {
            "Backup "
        } else {
            ""
        }
    }

    /// The administrative state in force: its own or the one inherited
    /// from the server it tracks, the stronger (maintenance over drain).
    pub fn admin_state(&self) -> u8 {
        self.admin
            .load(Ordering::Relaxed)
            .max(self.iadmin.load(Ordering::Relaxed))
    }

    /// Whether the state comes from the tracked server only (HAProxy's
    /// "via"): the inherited state is stronger than its own.
    pub fn admin_via(&self) -> Option<&Arc<ServerRt>> {
        let own = self.admin.load(Ordering::Relaxed);
        (self.iadmin.load(Ordering::Relaxed) > own)
            .then(|| self.tracked.get())
            .flatten()
    }

    /// The servers tracking this one (those still there).
    pub fn tracker_list(&self) -> Vec<(Arc<Farm>, Arc<ServerRt>)> {
        let l = self.trackers.lock().unwrap_or_else(|p| p.into_inner());
        l.iter()
            .filter_map(|(f, s)| Some((f.upgrade()?, s.upgrade()?)))
            .collect()
    }

    /// Whether it is in maintenance: forced, inherited from the server it
    /// tracks, or for want of an address (HAProxy's `SRV_ADMF_MAINT`).
    pub fn in_maint(&self) -> bool {
        self.admin_state() == ADMIN_MAINT || self.rmaint.load(Ordering::Relaxed)
    }

    /// Whether its health check is paused: enabled, but the server is in
    /// maintenance (HAProxy's `CHK_ST_PAUSED`: no check runs, the stats
    /// show none of its fields).
    pub fn check_paused(&self) -> bool {
        self.opts.check && self.check_on.load(Ordering::Relaxed) && self.in_maint()
    }

    /// Whether it or the server at the end of its `track` chain runs
    /// health checks.
    pub fn checked(&self) -> bool {
        self.opts.check || self.tracked.get().is_some_and(|t| t.checked())
    }
}

/// Makes `s` (of `farm`) track `t`: it takes its health, maintenance and
/// drain from now on, starting with the current ones.
pub fn link_track(farm: &Arc<Farm>, s: &Arc<ServerRt>, t: &Arc<ServerRt>) {
    if s.tracked.set(Arc::clone(t)).is_err() {
        return;
    }
    // The newest tracker first, as HAProxy links them (and so passes
    // changes on).
    t.trackers
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .insert(0, (Arc::downgrade(farm), Arc::downgrade(s)));
}

/// The administrative state in force of `s` changed from `before`: into
/// maintenance while not DOWN ends its sessions, out of it may end the
/// backup servers' (`on-marked-down`, `on-marked-up`).
pub(super) fn admin_moved(farm: &Farm, s: &ServerRt, before: u8) {
    let now = s.admin_state();
    if now == ADMIN_MAINT && before != ADMIN_MAINT && s.up.load(Ordering::Relaxed) {
        marked_down(s);
    } else if before == ADMIN_MAINT && now != ADMIN_MAINT {
        marked_up(farm, s);
    }
}

/// The maintenance of `s` (of `farm`) began or ended (`was`: before), as
/// HAProxy's srv_update_status: its health check pauses at health 0 (the
/// server stops; checks change nothing meanwhile, see
/// [`check::refresh_up`]) and resumes at health `rise`, one failure from
/// DOWN (`UP 1/3`), its next check at its usual date. Leaving, the
/// server's state is its views' again, without a line of its own (the
/// line leaving maintenance names it).
pub(crate) fn maint_checks(farm: &Farm, s: &ServerRt, was: bool) {
    let now = s.in_maint();
    if was == now {
        return;
    }
    if s.opts.check && s.check_on.load(Ordering::Relaxed) {
        let (ok, streak) = match now {
            true => (false, 0),
            false => (true, s.opts.fall.max(1) - 1),
        };
        s.check_ok.store(ok, Ordering::Relaxed);
        s.check_streak.store(streak, Ordering::Relaxed);
    } else if !s.opts.check && !now {
        // Unchecked, a server leaving maintenance is UP (HAProxy's
        // `srv_update_status`), whatever `set server health` forced.
        s.check_ok.store(true, Ordering::Relaxed);
    }
    if !now {
        check::settle_up(farm, s);
    }
}

/// Passes a tracked server's administrative state in force on to its
/// trackers, down the chains (HAProxy's `srv_set_admin_flag` on the
/// inherited flags), with their state changes noted and logged.
pub fn propagate_admin(s: &ServerRt) {
    let st = s.admin_state();
    for (f, t) in s.tracker_list() {
        let was = t.usable();
        let before = t.admin_state();
        let was_maint = t.in_maint();
        let was_down = !t.up.load(Ordering::Relaxed);
        t.iadmin.store(st, Ordering::Relaxed);
        if t.admin_state() == before {
            continue;
        }
        maint_checks(&f, &t, was_maint);
        if was != t.usable() {
            t.ext.changed(t.usable());
            f.note_state();
        }
        admin_moved(&f, &t, before);
        // HAProxy's lines (its `srv_append_status` names the tracked
        // server after the event, without parentheses).
        if t.admin_state() == ADMIN_MAINT && was_down && !was_maint {
            check::log_event_at(
                &f,
                Some(crate::log::LOG_NOTICE),
                format!(
                    "{}Server {}/{} was DOWN and now enters maintenance via {}/{}.",
                    t.backup_word(),
                    f.name,
                    t.name,
                    s.backend,
                    s.name
                ),
            );
            f.redispatch_queue_of(&t);
        } else if t.admin_state() == ADMIN_MAINT {
            let (act, bck) = f.usable_counts();
            check::log_event(
                &f,
                format!(
                    "{}Server {}/{} is going DOWN for maintenance via {}/{}. {act} active and {bck} backup servers left. {} sessions active, 0 requeued, {} remaining in queue.",
                    t.backup_word(),
                    f.name,
                    t.name,
                    s.backend,
                    s.name,
                    t.cur.load(Ordering::Relaxed),
                    f.queued()
                ),
            );
            check::log_if_none_left(&f);
            f.redispatch_queue_of(&t);
        } else if before == ADMIN_MAINT {
            check::log_event(
                &f,
                format!(
                    "{}Server {}/{} is UP/READY (leaving maintenance).",
                    t.backup_word(),
                    f.name,
                    t.name
                ),
            );
            f.kick_backend_queue();
        }
        propagate_admin(&t);
    }
}

/// The starting state of the servers tracking `s`, down the chains:
/// its maintenance or drain, and its health.
pub fn start_trackers(s: &ServerRt) {
    for (_, t) in s.tracker_list() {
        t.iadmin.store(s.admin_state(), Ordering::Relaxed);
        if !s.up.load(Ordering::Relaxed) {
            t.up.store(false, Ordering::Relaxed);
        }
        start_trackers(&t);
    }
}
