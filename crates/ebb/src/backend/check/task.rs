//! The check task of each server: its timer, counting results against
//! `rise` and `fall`, the server's state changes and their logs, and
//! starting the tasks of a farm (and of servers added at run time).

use std::net::SocketAddr;
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex, Weak};
use std::time::{Duration, Instant};

use sched::{ticks, Ctx, Reasons, RuntimeHandle, Status, TaskId};

use super::{
    check_proxy_header, run_check, run_ext, server_state_header, spread, spread_seed, CheckHow,
    CheckTls, ExtServer, Probe, Verdict,
};
use crate::backend::{Farm, ServerRt};
use crate::blocking::Submitter;
use crate::config::CheckStatus;

/// Logs a check event.
/// Where a backend's check events go: the syslog level when not the one
/// its words give (see [`log_event_at`]), and the line.
pub type LogFn = Arc<dyn Fn(Option<u8>, String) + Send + Sync>;

struct Checker {
    srv: Weak<ServerRt>,
    farm: Weak<Farm>,
    probe: Option<Probe>,
    tls: Option<CheckTls>,
    /// See [`CheckHow::ssl_ctx`].
    ssl_ctx: Option<Arc<rustls::ClientConfig>>,
    timeout: Duration,
    /// See [`CheckHow::connect_budget`].
    connect_budget: Option<Duration>,
    pool: Submitter,
    handle: RuntimeHandle,
    result: Arc<Mutex<Option<Verdict>>>,
    in_flight: bool,
    /// Consecutive successes while DOWN / failures while UP.
    streak: u32,
    log: LogFn,
    /// `option log-health-checks`: log each change of the check's status.
    log_checks: bool,
    /// When the check in flight started (its duration is logged).
    started: Instant,
    /// The generator of `spread-checks`.
    rng: u64,
    /// The date of the next check (`ETERNITY` while one runs or before
    /// the first).
    next_at: ticks::Tick,
    /// How long after its start the first check runs (taken by the
    /// first run).
    first: Option<Duration>,
}

impl Checker {
    fn interval(&self, s: &ServerRt) -> Duration {
        let o = &s.opts;
        if !s.check_ok.load(Ordering::Relaxed) {
            if self.streak > 0 {
                o.fastinter.unwrap_or(o.inter)
            } else {
                o.downinter.unwrap_or(o.inter)
            }
        } else if self.streak > 0 {
            o.fastinter.unwrap_or(o.inter)
        } else {
            o.inter
        }
    }

    /// Counts a check's result (`hana`: an `on-error` report, which has
    /// no duration).
    fn apply(&mut self, s: &Arc<ServerRt>, v: Verdict, hana: bool) {
        // The health check's own view (HAProxy's `check.health >= rise`);
        // the server's state also depends on its agent.
        let ok_before = s.check_ok.load(Ordering::Relaxed);
        let changed = match s.check_status.lock() {
            Ok(mut cs) => {
                let changed = cs.st != v.st;
                *cs = v.clone();
                changed
            }
            Err(_) => false,
        };
        let ok = v.passed();
        // HAProxy reports no duration for an `on-error` report.
        let took =
            (!hana).then(|| format!(", check duration: {}ms", self.started.elapsed().as_millis()));
        let took = took.unwrap_or_default();
        // Whether HAProxy's health counter moves: a failure while any
        // health is left, a success while not at full health.
        let moved = match (ok_before, ok) {
            (true, false) | (false, true) => true,
            _ => self.streak > 0,
        };
        // HAProxy counts a failure (`chkfail`) while any health is left:
        // UP, or DOWN with successes toward `rise`.
        let health_left = ok_before || self.streak > 0;
        match (ok_before, ok) {
            (true, true) | (false, false) => self.streak = 0,
            (true, false) => {
                self.streak += 1;
                if self.streak >= s.opts.fall.max(1) {
                    s.check_ok.store(false, Ordering::Relaxed);
                    self.streak = 0;
                }
            }
            (false, true) => {
                self.streak += 1;
                if self.streak >= s.opts.rise.max(1) {
                    s.check_ok.store(true, Ordering::Relaxed);
                    self.streak = 0;
                }
            }
        }
        s.check_streak.store(self.streak, Ordering::Relaxed);
        s.ext.on_check(ok, health_left, health_left);
        if self.log_checks && (changed || moved) {
            self.log_check(s, &v, &took);
        }
        // A server's change of state is logged after the check line that
        // caused it, in HAProxy's order.
        if let Some(f) = self.farm.upgrade() {
            // With `option log-health-checks` the check's own line gave
            // the reason: HAProxy's change of state line has none.
            let log_checks = self.log_checks;
            let why = || match log_checks {
                true => String::new(),
                false => format!("reason: {}{took}", v.reason()),
            };
            if !refresh_up(&f, s, why) && ok && s.check_ok.load(Ordering::Relaxed) {
                // HAProxy's check_notify_stopping (a conditional pass:
                // `disable-on-404`) or check_notify_success (a pass takes
                // a NOLB server back to UP).
                set_stopping(&f, s, v.st == CheckStatus::L7OkC, why);
            }
        }
    }

    /// HAProxy's `option log-health-checks` line: the result, its reason
    /// and the health counter as `a/b UP|DOWN` (successes needed to come
    /// up while DOWN; failures left before going down while UP).
    fn log_check(&self, s: &ServerRt, v: &Verdict, took: &str) {
        let o = &s.opts;
        let (rise, fall) = (o.rise.max(1), o.fall.max(1));
        let up = s.check_ok.load(Ordering::Relaxed);
        let (a, b) = if up {
            (fall.saturating_sub(self.streak), fall)
        } else {
            (self.streak, rise)
        };
        (self.log)(
            None,
            format!(
                "Health check for {}server {}/{} {}, reason: {}{took}, status: {a}/{b} {}.",
                if o.backup { "backup " } else { "" },
                s.backend,
                s.name,
                match v.st {
                    CheckStatus::L7OkC => "conditionally succeeded",
                    st if st.passed() => "succeeded",
                    _ => "failed",
                },
                v.reason(),
                match (up, s.weight.load(Ordering::Relaxed)) {
                    (false, _) => "DOWN",
                    (true, 0) => "DRAIN",
                    _ => "UP",
                }
            ),
        );
    }

    /// `on-error`'s action on a report of `observe` (HAProxy's
    /// health_adjust): a failed check (`fail-check`), one that leaves a
    /// single failure before DOWN (`sudden-death`), DOWN at once
    /// (`mark-down`), or none (`fastinter`); each brings the next check
    /// to `fastinter` if that is sooner.
    fn on_error(&mut self, s: &Arc<ServerRt>, desc: String, now: ticks::Tick) {
        use crate::config::OnError;
        let up = s.check_ok.load(Ordering::Relaxed);
        let fall = s.opts.fall.max(1);
        match s.opts.on_error {
            OnError::FastInter => {}
            e => {
                if up && e == OnError::SuddenDeath {
                    self.streak = self.streak.max(fall.saturating_sub(2));
                } else if up && e == OnError::MarkDown {
                    self.streak = fall - 1;
                }
                self.apply(
                    s,
                    Verdict::new(crate::config::CheckStatus::Hana, desc),
                    true,
                );
            }
        }
        if let Some(f) = s.opts.fastinter {
            let at = ticks::add(now, f.as_millis().min(u32::MAX as u128 / 2) as u32);
            self.next_at = ticks::first(at, self.next_at);
        }
    }

    fn run(&mut self, ctx: &mut Ctx, me: TaskId, _why: Reasons) -> Status {
        let Some(s) = self.srv.upgrade() else {
            return Status::Done; // the configuration it belonged to is gone
        };
        if s.is_deleted() {
            return Status::Done;
        }
        if let Some(d) = self.first.take() {
            // The first check's date (HAProxy spreads them at start).
            self.next_at = ticks::add(ctx.now(), d.as_millis().min(u32::MAX as u128 / 2) as u32);
            if !d.is_zero() {
                ctx.set_expire(me, self.next_at);
                return Status::Continue;
            }
        }
        // Maintenance pauses the check (HAProxy's `CHK_ST_PAUSED`) and
        // resets its health (`backend::maint_checks`): the count starts
        // again from there.
        let on = s.check_on.load(Ordering::Relaxed) && !s.check_paused();
        self.streak = s.check_streak.load(Ordering::Relaxed);
        let report = s.hana.pending.lock().ok().and_then(|mut p| p.take());
        if let Some(desc) = report.filter(|_| on) {
            self.on_error(&s, desc, ctx.now());
            if !self.in_flight && !ticks::is_expired(self.next_at, ctx.now()) {
                // Not the check's date yet: only (maybe) an earlier one.
                ctx.set_expire(me, self.next_at);
                return Status::Continue;
            }
        }
        if self.in_flight {
            let r = self.result.lock().ok().and_then(|mut g| g.take());
            match r {
                Some(r) => {
                    self.in_flight = false;
                    s.ext.check_busy.store(false, Ordering::Relaxed);
                    // `disable health` or maintenance meanwhile: the
                    // result is ignored.
                    if on {
                        self.apply(&s, r, false);
                    }
                }
                None => {
                    // Woken by the timer while the check runs: wait for it.
                    ctx.set_expire(me, ticks::add(ctx.now(), 100));
                    return Status::Continue;
                }
            }
        } else if let Some(addr) = s.addr().filter(|_| on) {
            // `addr` and `port`: the check's own target.
            let addr = SocketAddr::new(
                s.opts.check_addr.unwrap_or(addr.ip()),
                s.opts
                    .check_port
                    .or(s.opts.check_addr_port)
                    .unwrap_or(addr.port()),
            );
            let result = Arc::clone(&self.result);
            let probe = self.probe.clone();
            let tls = self.tls.clone();
            let timeout = self.timeout;
            let handle = self.handle.clone();
            let srv = self.srv.clone();
            let pp = check_proxy_header(&s.opts);
            let mut how = CheckHow::of(&s.opts);
            how.running = s.up.load(Ordering::Relaxed);
            how.connect_budget = self.connect_budget;
            how.ssl_ctx = self.ssl_ctx.clone();
            let farm = self.farm.upgrade();
            let be_name = farm.as_ref().map(|f| f.name.clone()).unwrap_or_default();
            let srv_name = s.name.clone();
            let state = match (&self.probe, &farm) {
                (Some(Probe::Http(p)), Some(f)) if p.send_state => {
                    Some(server_state_header(f, &s, self.streak))
                }
                _ => None,
            };
            let ext = match &self.probe {
                Some(Probe::Ext(e)) => Some((Arc::clone(e), ExtServer::of(e, &s))),
                _ => None,
            };
            let job = move || {
                let t0 = Instant::now();
                let who = (be_name.as_str(), srv_name.as_str(), state.as_deref());
                let r = match &ext {
                    Some((e, x)) => run_ext(e, x, timeout),
                    None => run_check(addr, timeout, probe.as_ref(), tls.as_ref(), &pp, who, how),
                };
                if let Some(s) = srv.upgrade() {
                    s.ext.check_took(t0.elapsed());
                }
                if let Ok(mut g) = result.lock() {
                    *g = Some(r);
                }
                handle.wake_task(me, Reasons::RES);
            };
            if self.pool.submit(job).is_ok() {
                self.in_flight = true;
                self.started = Instant::now();
                // HAProxy's start of a check: under way, and the last
                // report's text cleared until this one's.
                s.ext.check_busy.store(true, Ordering::Relaxed);
                if let Ok(mut cs) = s.check_status.lock() {
                    cs.desc.clear();
                    cs.note = None;
                }
                // A guard date: the job ends within its connect's
                // budget and `timeout`.
                let guard = self.timeout
                    + self.connect_budget.unwrap_or_default()
                    + Duration::from_millis(100);
                ctx.set_expire(me, ticks::add(ctx.now(), guard.as_millis() as u32));
                return Status::Continue;
            }
        }
        // Paused, HAProxy's task wakes every `inter` and starts none.
        let inter = match s.check_paused() {
            true => s.opts.inter,
            false => self.interval(&s),
        };
        let next = spread(inter, &mut self.rng);
        self.next_at = ticks::add(ctx.now(), next.as_millis().min(u32::MAX as u128 / 2) as u32);
        ctx.set_expire(me, self.next_at);
        Status::Continue
    }
}

/// Logs an event of a farm's servers where its checks log (the
/// backend's log targets).
pub fn log_event(farm: &Farm, line: String) {
    log_event_at(farm, None, line);
}

/// [`log_event`] at syslog level `level` when given: a server going DOWN
/// (or into maintenance) from NOLB or DRAIN is a notice in HAProxy 2.6
/// (`srv_was_stopping`), not the alert its words would make it.
pub fn log_event_at(farm: &Farm, level: Option<u8>, line: String) {
    if let Some(cx) = farm.check_ctx.get() {
        (cx.log)(level, line);
    }
}

/// Sets a server's operational state from its checks, as HAProxy's
/// `check_notify_*`: UP while its health check (when configured and
/// enabled) and its agent (when enabled) both say so. A change is logged
/// with `why` (`reason: ..., check duration: ...` or `changed from CLI`)
/// and moves the queues. Returns whether the state changed.
pub fn refresh_up(farm: &Farm, s: &ServerRt, why: impl FnOnce() -> String) -> bool {
    // In maintenance checks change nothing (HAProxy's srv_set_running
    // and srv_set_stopped): leaving it settles the state.
    if s.in_maint() {
        return false;
    }
    let up = views_up(s);
    // HAProxy's `srv_was_stopping`: DOWN from NOLB or DRAIN is a notice.
    let was_stopping = s.nolb() || s.admin_state() == crate::backend::ADMIN_DRAIN;
    let was = s.up.swap(up, Ordering::AcqRel);
    if was == up {
        return false;
    }
    // Its trackers follow, down the chains, once its own change is done.
    struct Follow<'a>(&'a ServerRt);
    impl Drop for Follow<'_> {
        fn drop(&mut self) {
            for (f, t) in self.0.tracker_list() {
                refresh_up(&f, &t, || format!("via {}/{}", self.0.backend, self.0.name));
            }
        }
    }
    let _follow = Follow(s);
    s.ext.on_check(true, was, up);
    farm.note_state();
    let why = reason_words(why());
    if up {
        s.up_since.set(Instant::now());
        let before = queued(s);
        farm.kick_backend_queue();
        let (act, bck) = farm.usable_counts();
        let now = queued(s);
        log_event(
            farm,
            format!(
                "{}Server {}/{} is UP{why}. {act} active and {bck} backup servers online.{} {} sessions requeued, {now} total in queue.",
                s.backup_word(),
                s.backend,
                s.name,
                on_backup(act, bck),
                now.saturating_sub(before),
            ),
        );
        crate::backend::marked_up(farm, s);
    } else {
        // DOWN ends NOLB (HAProxy's STOPPING goes to STOPPED).
        s.stopping.store(false, Ordering::Relaxed);
        crate::backend::marked_down(s);
        let moved = queued(s);
        farm.redispatch_queue_of(s);
        let (act, bck) = farm.usable_counts();
        log_event_at(
            farm,
            was_stopping.then_some(crate::log::LOG_NOTICE),
            format!(
                "{}Server {}/{} is DOWN{why}. {act} active and {bck} backup servers left.{} {} sessions active, {moved} requeued, {} remaining in queue.",
                s.backup_word(),
                s.backend,
                s.name,
                on_backup(act, bck),
                s.cur.load(Ordering::Relaxed),
                queued(s),
            ),
        );
        log_if_none_left(farm);
    }
    true
}

/// Takes a server that is UP out of load balancing (`on`: HAProxy's
/// srv_set_stopping, state `NOLB`) or back in (srv_set_running from
/// STOPPING), with HAProxy's line: `Server B/S is stopping` or `is UP`,
/// `why` (the check's reason, empty when `option log-health-checks` gave
/// it), the servers left online and what moved. Its queue is dispatched
/// again on the way out (as a draining server's); the backend's is
/// offered its slots on the way back. Trackers follow (their state reads
/// the tracked server's), each with its own line `via B/S`. Returns
/// whether the state changed.
pub fn set_stopping(farm: &Farm, s: &ServerRt, on: bool, why: impl FnOnce() -> String) -> bool {
    if s.in_maint() || !s.up.load(Ordering::Relaxed) {
        return false;
    }
    let before = s.nolb();
    s.stopping.store(on, Ordering::Relaxed);
    if s.nolb() == before {
        return false;
    }
    stopping_moved(farm, s, &why());
    true
}

/// What `set server B/S health` (and the stats page's `hrunn`, `hnolb`,
/// `hdown`) forces.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Health {
    Up,
    Stopping,
    Down,
}

/// Forces a server's health as HAProxy 2.6's `set server B/S health
/// up|stopping|down`: the check's health to full (up, stopping) or 0
/// (down), and the state to UP, NOLB or DOWN with HAProxy's line and
/// `why` as its reason (`changed from CLI`). Not on a tracking server.
/// A server without `check` as well: `down` holds until `up`,
/// `stopping` or the end of a maintenance (HAProxy's `srv_set_stopped`,
/// nothing checks it again).
pub fn force_health(farm: &Farm, s: &ServerRt, h: Health, why: &str) -> Result<(), String> {
    if s.tracked.get().is_some() {
        return Err("cannot change health on a tracking server.".into());
    }
    s.check_streak.store(0, Ordering::Relaxed);
    let full = s.opts.rise.max(1) + s.opts.fall.max(1) - 1;
    let health = if h == Health::Down { 0 } else { full };
    s.unchecked_health.store(health, Ordering::Relaxed);
    s.check_ok.store(h != Health::Down, Ordering::Relaxed);
    let why = || why.to_string();
    match h {
        Health::Up => {
            if !refresh_up(farm, s, why) {
                set_stopping(farm, s, false, why);
            }
        }
        Health::Down => {
            refresh_up(farm, s, why);
        }
        Health::Stopping if s.up.load(Ordering::Relaxed) => {
            set_stopping(farm, s, true, why);
        }
        Health::Stopping => {
            // From DOWN straight to NOLB: HAProxy logs `is stopping`.
            s.stopping.store(true, Ordering::Relaxed);
            settle_up(farm, s);
            if s.up.load(Ordering::Relaxed) && !s.in_maint() {
                stopping_moved(farm, s, &why());
            }
        }
    }
    Ok(())
}

/// Logs and applies a change of [`ServerRt::nolb`] of `s` (and its
/// trackers', down the chains, which follow it).
fn stopping_moved(farm: &Farm, s: &ServerRt, why: &str) {
    s.ext.touched();
    farm.note_state();
    let why = reason_words(why.to_string());
    let now = s.nolb();
    let before = queued(s);
    let moved = if now {
        farm.redispatch_queue_of(s);
        before.saturating_sub(queued(s))
    } else {
        farm.kick_backend_queue();
        queued(s).saturating_sub(before)
    };
    let (act, bck) = farm.usable_counts();
    log_event(
        farm,
        format!(
            "{}Server {}/{} is {}{why}. {act} active and {bck} backup servers online.{} {moved} sessions requeued, {} total in queue.",
            s.backup_word(),
            s.backend,
            s.name,
            if now { "stopping" } else { "UP" },
            on_backup(act, bck),
            queued(s),
        ),
    );
    if now {
        log_if_none_left(farm);
    } else {
        crate::backend::marked_up(farm, s);
    }
    for (f, t) in s.tracker_list() {
        if !t.in_maint() && t.up.load(Ordering::Relaxed) && !t.stopping.load(Ordering::Relaxed) {
            stopping_moved(&f, &t, &format!("via {}/{}", s.backend, s.name));
        }
    }
}

/// A change of state line's reason in HAProxy's wording: `, reason: ...`,
/// ` via B/S` for a tracker, or nothing (the check's own line said it).
fn reason_words(w: String) -> String {
    match w {
        w if w.is_empty() => w,
        w if w.starts_with("via ") => format!(" {w}"),
        w => format!(", {w}"),
    }
}

/// The streams waiting in a server's own queue.
fn queued(s: &ServerRt) -> usize {
    s.queue.lock().map_or(0, |q| q.len())
}

/// Whether a server's views say UP: its health check (when configured
/// and enabled), its agent (when enabled), and the server it tracks
/// (HAProxy's tracking server goes down with it and comes up with it).
fn views_up(s: &ServerRt) -> bool {
    // (Without `check`, `check_ok` is what `set server health` forced.)
    let check =
        (s.opts.check && !s.check_on.load(Ordering::Relaxed)) || s.check_ok.load(Ordering::Relaxed);
    let agent = !s.agent.enabled() || s.agent.healthy.load(Ordering::Relaxed);
    let tracked = s.tracked.get().is_none_or(|t| t.up.load(Ordering::Relaxed));
    check && agent && tracked
}

/// Sets the state of a server that left maintenance from its views,
/// without a line of its own (the line of leaving maintenance names the
/// state); its trackers out of maintenance follow, with theirs.
pub fn settle_up(farm: &Farm, s: &ServerRt) {
    let up = views_up(s);
    if s.up.swap(up, Ordering::AcqRel) == up {
        return;
    }
    if up {
        s.up_since.set(Instant::now());
    }
    farm.note_state();
    for (f, t) in s.tracker_list() {
        refresh_up(&f, &t, || format!("via {}/{}", s.backend, s.name));
    }
}

/// HAProxy's note when only backup servers are left.
fn on_backup(act: usize, bck: usize) -> &'static str {
    match (act, bck) {
        (0, 1..) => " Running on backup.",
        _ => "",
    }
}

/// HAProxy's alert when a backend's last usable server leaves.
pub fn log_if_none_left(farm: &Farm) {
    if !farm.servers.iter().any(|x| x.usable()) {
        log_event(
            farm,
            format!("backend {} has no server available!", farm.name),
        );
    }
}

/// What checks of a farm need, kept for servers added at run time.
pub struct CheckCtx {
    probe: Option<Probe>,
    pub(in crate::backend) timeout: Option<Duration>,
    /// `timeout connect`, when `timeout check` is set too (see
    /// [`CheckHow::connect_budget`]).
    pub(in crate::backend) connect_cap: Option<Duration>,
    pub(in crate::backend) pool: Submitter,
    pub(in crate::backend) handle: RuntimeHandle,
    pub(in crate::backend) log: LogFn,
    pub(in crate::backend) log_checks: bool,
}

/// The interval each check task of a farm starts with, in the order
/// [`start`] starts them (a server's health check, then its agent): for
/// [`super::first_dates`]. The health check's is HAProxy's at health
/// `rise`: `inter` when `fall` is 1 (full health already), else
/// `fastinter` (in doubt); a `disabled` server's, at health 0, is
/// `downinter`. An agent starts at full health: `agent-inter`.
pub fn first_inters(farm: &Farm) -> Vec<Duration> {
    farm.servers
        .iter()
        .flat_map(|s| {
            let check = s.opts.check.then(|| start_inter(s));
            let agent = s.agent.configured.then(|| agent_inter(s));
            check.into_iter().chain(agent)
        })
        .collect()
}

/// A health check's interval at start (see [`first_inters`]).
fn start_inter(s: &ServerRt) -> Duration {
    let o = &s.opts;
    if o.disabled {
        o.downinter.unwrap_or(o.inter)
    } else if o.fall.max(1) == 1 {
        o.inter
    } else {
        o.fastinter.unwrap_or(o.inter)
    }
}

/// An agent's interval.
pub(in crate::backend) fn agent_inter(s: &ServerRt) -> Duration {
    s.opts.agent_inter.max(Duration::from_millis(1))
}

/// Starts the checks of a farm's servers that have `check` or
/// `agent-check`, each first at its date in `first` (as many as
/// [`first_inters`] gives, in its order; missing ones: at once). Returns
/// the tasks (for tests and stats).
#[allow(clippy::too_many_arguments)]
pub fn start(
    farm: &Arc<Farm>,
    probe: Option<Probe>,
    timeout: Option<Duration>,
    connect_cap: Option<Duration>,
    pool: &Submitter,
    handle: &RuntimeHandle,
    log: LogFn,
    log_checks: bool,
    first: &[Duration],
) -> Vec<TaskId> {
    let _ = farm.check_ctx.set(CheckCtx {
        probe,
        timeout,
        connect_cap,
        pool: pool.clone(),
        handle: handle.clone(),
        log,
        log_checks,
    });
    let mut dates = first.iter().copied();
    let mut next = || dates.next().unwrap_or_default();
    let mut tasks = Vec::new();
    for s in farm.servers.iter() {
        if s.opts.check {
            tasks.extend(start_server_after(farm, s, next()));
        }
        if s.agent.configured {
            let cx = farm.check_ctx.get();
            let first = next();
            tasks.extend(cx.and_then(|cx| crate::backend::agent::start_server(farm, s, cx, first)));
        }
    }
    tasks
}

/// Starts the agent task of a server with `agent-check` added at run
/// time: its first check one `agent-inter` later, as HAProxy's.
pub fn start_agent(farm: &Arc<Farm>, s: &Arc<ServerRt>) -> Option<TaskId> {
    let first = super::first_date_alone(agent_inter(s));
    crate::backend::agent::start_server(farm, s, farm.check_ctx.get()?, first)
}

/// The TLS of a server's checks: its own (`ssl`), or with `check-ssl`
/// a client built from its TLS options (checked at start by
/// `proxy::server_tls`). HAProxy's checks send `check-sni`, never the
/// traffic's `sni`; else no name: the check's address, which rustls does
/// not send (and whose certificate names `verify required` checks only
/// against `verifyhost`).
fn check_ssl(s: &ServerRt) -> Option<crate::backend::ServerTls> {
    let o = &s.opts;
    let ip = o.check_addr.or(s.addr().map(|a| a.ip()));
    let ip = ip.unwrap_or(std::net::IpAddr::V4(std::net::Ipv4Addr::UNSPECIFIED));
    let sni = o.check_sni.clone().unwrap_or_else(|| ip.to_string());
    // HAProxy's `init_srv_check`: a check on the traffic's own target
    // speaks as the traffic does, one with its own `port` or `addr`, or a
    // server's added on the CLI, only with `check-ssl`.
    let own_target = o.check_port.is_some() || o.check_addr.is_some();
    let inherits = !o.dynamic && !own_target;
    let config = match s.tls_ctx.as_ref() {
        Some(t) if o.check_ssl || (inherits && s.tls().is_some()) => Arc::clone(&t.config),
        None if o.check_ssl => {
            crate::tls::client_config_with(o.verify(), o.ca_file.as_deref(), &o.tls).ok()?
        }
        _ => return None,
    };
    Some(crate::backend::ServerTls {
        config,
        sni,
        sni_expr: None,
        cert: None,
    })
}

/// Starts the check task of one server with `check` added at run time
/// (once the farm's checks started): its first check one interval later,
/// as HAProxy's.
pub fn start_server(farm: &Arc<Farm>, s: &Arc<ServerRt>) -> Option<TaskId> {
    start_server_after(farm, s, super::first_date_alone(start_inter(s)))
}

/// Starts the check task of one server with `check`, its first check
/// `first` from now.
fn start_server_after(farm: &Arc<Farm>, s: &Arc<ServerRt>, first: Duration) -> Option<TaskId> {
    let cx = farm.check_ctx.get()?;
    // A server without an address yet (resolvers, `set server ... addr`)
    // is checked once it has one.
    if !s.opts.check {
        return None;
    }
    // HAProxy bounds a check by `timeout check`, else by `inter`; an
    // external check's command by `inter` (and `timeout connect`, see
    // `ExtProbe::budget`).
    let t = match &cx.probe {
        Some(Probe::Ext(e)) => e.budget(s.opts.inter),
        _ => cx.timeout.unwrap_or(s.opts.inter),
    };
    let t = t.max(Duration::from_millis(10));
    // HAProxy starts a checked server UP with its health at `rise`, as
    // if `fall - 1` checks had failed ("UP 1/3"): the first failure takes
    // it DOWN, the first success to full health.
    // One in maintenance (`disabled`, a state file) starts paused at
    // health 0.
    if s.check_paused() {
        s.check_ok.store(false, Ordering::Relaxed);
    }
    let start_streak = match s.check_ok.load(Ordering::Relaxed) {
        true => s.opts.fall.max(1) - 1,
        false => 0,
    };
    s.check_streak.store(start_streak, Ordering::Relaxed);
    let mut c = Checker {
        srv: Arc::downgrade(s),
        farm: Arc::downgrade(farm),
        probe: cx.probe.clone(),
        tls: check_ssl(s).as_ref().map(|t| {
            // `check-alpn`: the checks' own ALPN list.
            let cfg = match &s.opts.check_alpn {
                Some(list) => {
                    let mut c = (*t.config).clone();
                    c.alpn_protocols = list.iter().map(|p| p.as_bytes().to_vec()).collect();
                    Arc::new(c)
                }
                None => Arc::clone(&t.config),
            };
            (cfg, t.sni.clone())
        }),
        ssl_ctx: match &cx.probe {
            Some(p) if p.connects_ssl() => super::connect_ssl_ctx(&s.opts, s.tls_ctx.as_ref()).ok(),
            _ => None,
        },
        timeout: t,
        // HAProxy: `inter`, or `timeout connect` when sooner (both only
        // with `timeout check`).
        connect_budget: cx.timeout.map(|_| {
            let inter = s.opts.inter.max(Duration::from_millis(10));
            cx.connect_cap.map_or(inter, |c| c.min(inter))
        }),
        pool: cx.pool.clone(),
        handle: cx.handle.clone(),
        result: Arc::new(Mutex::new(None)),
        in_flight: false,
        streak: start_streak,
        log: Arc::clone(&cx.log),
        log_checks: cx.log_checks,
        started: Instant::now(),
        rng: spread_seed(s.uid),
        next_at: ticks::ETERNITY,
        first: Some(first),
    };
    let id = cx
        .handle
        .new_shared_task("health_check", u64::MAX, move |ctx: &mut Ctx, me, why| {
            c.run(ctx, me, why)
        });
    // `observe` reports to this task.
    let _ = s.hana.task.set((cx.handle.clone(), id));
    cx.handle.wake_task(id, Reasons::INIT);
    Some(id)
}
