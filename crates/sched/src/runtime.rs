//! # Runtime: threads, configuration, stop
//!
//! A [`Runtime`] is built from a [`Config`] and started with
//! [`Runtime::run`], which spawns `nbthread` threads, runs the init closure
//! on each (it creates that thread's listeners and tasks) and blocks until
//! every thread has left its loop. A [`RuntimeHandle`] (`Send + Sync +
//! Clone`) drives it from anywhere: stop, remote wakeups, reports,
//! profiling mode, isolation.
//!
//! ## Stopping, in order
//!
//! 1. [`RuntimeHandle::stop`] sets *stopping* and notifies every thread.
//! 2. At its next turn each thread wakes every task and tasklet registered
//!    with [`Ctx::on_stop`] with [`Reasons::SIGNAL`] (the server closes its
//!    listeners, then idle connections) and [`Ctx::stopping`] is true.
//! 3. A thread leaves its loop once every registered task of its own has
//!    been freed (or when it has no task at all, stop or not).
//! 4. [`RuntimeHandle::hard_stop`] writes every thread's eventfd at once;
//!    each leaves its loop at its next turn, whatever remains.
//!
//! Tasks still alive when a thread leaves are dropped on that thread.
//!
//! [`Ctx::on_stop`]: crate::Ctx::on_stop
//! [`Ctx::stopping`]: crate::Ctx::stopping
//! [`Reasons::SIGNAL`]: crate::Reasons::SIGNAL

use crate::activity::{self, ActivitySnapshot};
use crate::ctx::Ctx;
use crate::profile::{self, ProfileRow, ProfilingMode, ReportOpts, MAX_NAMES};
use crate::shared::{encode, Shared, MSG_INSTANT, MSG_TASKLET};
use crate::task::{Reasons, Status, TaskFn, TaskId, TaskletId};
use crate::ticks::{Clock, MonotonicClock, Tick};
use crate::watchdog::{self, WatchdogHook};
use std::io;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

/// Default `tune.runqueue-depth` by thread count: HAProxy's figures (1 ->
/// 280, 2 -> 186, 4 -> 140, 8 -> 93, 16 -> 70, 64 -> 35). More threads
/// mean shorter turns, so that a thread's shared work and its inbox are
/// looked at more often. Counts between two figures take the lower one's.
pub fn default_runqueue_depth(nbthread: usize) -> u32 {
    match nbthread {
        0 | 1 => 280,
        2..=3 => 186,
        4..=7 => 140,
        8..=15 => 93,
        16..=63 => 70,
        _ => 35,
    }
}

/// Runtime configuration.
#[derive(Clone)]
pub struct Config {
    /// Number of threads (1..=64: thread masks are u64).
    pub nbthread: usize,
    /// `tune.runqueue-depth`; `None`: [`default_runqueue_depth`].
    pub runqueue_depth: Option<u32>,
    /// `tune.sched.low-latency`.
    pub low_latency: bool,
    /// `tune.sched.scope-lookups` (ebb's own): `true` (the default) finds
    /// a thread's next shared task by the scope-aware walk, O(log n);
    /// `false` by the naive walk over every queued entry, O(n), kept only
    /// to measure the difference (`sq_nodes` in `show activity`).
    pub scope_lookups: bool,
    /// `profiling.tasks`.
    pub profiling: ProfilingMode,
    /// CPU time a callback may run before the watchdog reports it; `None`
    /// disables the watchdog.
    pub watchdog: Option<Duration>,
    /// Called with watchdog reports; `None`: print, abort when fatal.
    pub watchdog_hook: Option<WatchdogHook>,
    /// Time source for ticks.
    pub clock: Arc<dyn Clock>,
    /// Cells of each thread's inbox ring.
    pub inbox_capacity: usize,
}

impl Config {
    /// Defaults for `nbthread` threads: default depth, low-latency off,
    /// profiling off, watchdog at 1 s of CPU (HAProxy's), monotonic clock.
    pub fn new(nbthread: usize) -> Config {
        Config {
            nbthread,
            runqueue_depth: None,
            low_latency: false,
            scope_lookups: true,
            profiling: ProfilingMode::Off,
            watchdog: Some(Duration::from_secs(1)),
            watchdog_hook: None,
            clock: Arc::new(MonotonicClock::new()),
            inbox_capacity: crate::inbox::DEFAULT_CAPACITY,
        }
    }
}

impl std::fmt::Debug for Config {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Config")
            .field("nbthread", &self.nbthread)
            .field("runqueue_depth", &self.runqueue_depth)
            .field("low_latency", &self.low_latency)
            .field("scope_lookups", &self.scope_lookups)
            .field("profiling", &self.profiling)
            .field("watchdog", &self.watchdog)
            .finish()
    }
}

/// A scheduler runtime; see the module documentation.
pub struct Runtime {
    shared: Arc<Shared>,
    config: Config,
}

impl Runtime {
    /// Builds the runtime (eventfds, shared queues); threads start in
    /// [`Self::run`].
    pub fn new(config: Config) -> io::Result<Runtime> {
        if config.nbthread == 0 || config.nbthread > 64 {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                "nbthread must be within 1..=64",
            ));
        }
        let depth = config
            .runqueue_depth
            .unwrap_or_else(|| default_runqueue_depth(config.nbthread))
            .max(1);
        let mut shared = Shared::new(
            config.nbthread,
            depth,
            config.low_latency,
            config.clock.clone(),
            config.profiling,
            config.inbox_capacity,
        )?;
        shared.scope_lookups = config.scope_lookups;
        Ok(Runtime {
            shared: Arc::new(shared),
            config,
        })
    }

    /// A handle to stop and observe the runtime from any thread.
    pub fn handle(&self) -> RuntimeHandle {
        RuntimeHandle {
            shared: self.shared.clone(),
        }
    }

    /// The effective run-queue depth.
    pub fn runqueue_depth(&self) -> u32 {
        self.shared.depth
    }

    /// A context for thread number `tid`, driven by hand on the calling
    /// thread ([`Ctx::turn`], [`Ctx::run_until_idle`], [`Ctx::run`]): for
    /// tests, tools and single-threaded embedding. One per thread number.
    pub fn context(&self, tid: usize) -> io::Result<Ctx> {
        if tid >= self.config.nbthread {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                "thread number out of range",
            ));
        }
        Ctx::new(self.shared.clone(), tid)
    }

    /// Starts `nbthread` threads, runs `init` on each, then each thread's
    /// loop; returns when every thread has left its loop (see the stop
    /// rules), with the first error any thread met.
    pub fn run<F>(&self, init: F) -> io::Result<()>
    where
        F: Fn(&mut Ctx) + Send + Sync,
    {
        let done = Arc::new(AtomicBool::new(false));
        let init = &init;
        let res = std::thread::scope(|s| {
            let wd = self.config.watchdog.map(|limit| {
                let sh = self.shared.clone();
                let hook = self
                    .config
                    .watchdog_hook
                    .clone()
                    .unwrap_or_else(|| Arc::new(watchdog::default_hook));
                let done = done.clone();
                std::thread::Builder::new()
                    .name("sched-watchdog".into())
                    .spawn_scoped(s, move || watchdog::run(sh, limit, hook, done))
            });
            let mut joins = Vec::new();
            for tid in 0..self.config.nbthread {
                let sh = self.shared.clone();
                let j = std::thread::Builder::new()
                    .name(format!("sched-{}", tid))
                    .spawn_scoped(s, move || -> io::Result<()> {
                        let mut ctx = Ctx::new(sh, tid)?;
                        init(&mut ctx);
                        ctx.run()
                    })?;
                joins.push(j);
            }
            let mut first_err = None;
            for j in joins {
                let r = match j.join() {
                    Ok(r) => r,
                    Err(_) => Err(io::Error::other("a scheduler thread panicked")),
                };
                if let Err(e) = r {
                    // One thread failing stops the others.
                    self.shared.hard_stop();
                    first_err.get_or_insert(e);
                }
            }
            done.store(true, Ordering::Release);
            if let Some(Ok(w)) = wd {
                w.thread().unpark();
                let _ = w.join();
            }
            match first_err {
                Some(e) => Err(e),
                None => Ok(()),
            }
        });
        res
    }
}

/// Drives a runtime from any thread: `Send + Sync + Clone`.
#[derive(Clone)]
pub struct RuntimeHandle {
    pub(crate) shared: Arc<Shared>,
}

impl std::fmt::Debug for RuntimeHandle {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RuntimeHandle")
            .field("nbthread", &self.shared.nbthread())
            .finish()
    }
}

impl RuntimeHandle {
    /// Number of threads.
    pub fn nbthread(&self) -> usize {
        self.shared.nbthread()
    }

    /// The current tick of the runtime's clock.
    pub fn now(&self) -> Tick {
        self.shared.now_tick()
    }

    /// Requests a graceful stop (see the module documentation).
    pub fn stop(&self) {
        self.shared.stop();
    }

    /// Requests a hard stop: every thread is woken at once and leaves.
    pub fn hard_stop(&self) {
        self.shared.hard_stop();
    }

    /// Whether a stop was requested.
    pub fn stopping(&self) -> bool {
        self.shared.stopping.load(Ordering::Relaxed)
    }

    /// Wakes a task (thread-bound: through its owner's inbox; shared:
    /// through the shared run queue). Stale ids are detected no-ops.
    pub fn wake_task(&self, id: TaskId, why: Reasons) {
        self.shared.wake_task(id, why);
    }

    /// Wakes a tasklet through its owner's inbox (it joins urgent).
    pub fn wake_tasklet(&self, id: TaskletId) {
        self.shared.send(
            id.thread as usize,
            encode(id.slot, id.gen, MSG_TASKLET, Reasons::OTHER),
        );
    }

    /// Wakes a tasklet so that it runs next on its owner thread.
    pub fn wake_tasklet_instant(&self, id: TaskletId) {
        self.shared.send(
            id.thread as usize,
            encode(id.slot, id.gen, MSG_TASKLET | MSG_INSTANT, Reasons::OTHER),
        );
    }

    /// Creates a shared task from outside the workers.
    pub fn new_shared_task<F>(&self, name: &'static str, mask: u64, f: F) -> TaskId
    where
        F: FnMut(&mut Ctx, TaskId, Reasons) -> Status + Send + 'static,
    {
        self.new_shared_task_obj(name, mask, f)
    }

    /// Creates a shared task from any `TaskFn + Send`.
    pub fn new_shared_task_obj(
        &self,
        name: &'static str,
        mask: u64,
        f: impl TaskFn + Send,
    ) -> TaskId {
        let prof = self.shared.registry.intern(name);
        crate::ctx::new_shared_task(&self.shared, prof, mask, Box::new(f))
    }

    /// Kills a shared task from outside the workers.
    pub fn kill_shared_task(&self, id: TaskId) {
        crate::ctx::kill_shared(&self.shared, id);
    }

    /// Runs `f` while every worker thread (other than the caller, if it is
    /// one) is parked at a safe point. Nested calls run `f` directly.
    pub fn isolate<R>(&self, f: impl FnOnce() -> R) -> R {
        self.shared.isolate(None, f)
    }

    /// Sets the profiling mode at run time (threads apply it at their next
    /// turn).
    pub fn set_profiling(&self, mode: ProfilingMode) {
        self.shared.profiling.store(mode.to_u8(), Ordering::Relaxed);
    }

    /// The configured profiling mode.
    pub fn profiling_mode(&self) -> ProfilingMode {
        ProfilingMode::from_u8(self.shared.profiling.load(Ordering::Relaxed))
    }

    /// Which threads record profiling data at the moment.
    pub fn profiling_active(&self) -> Vec<bool> {
        self.shared
            .threads
            .iter()
            .map(|r| r.prof.active.load(Ordering::Relaxed) != 0)
            .collect()
    }

    /// Zeroes every thread's profiling counters.
    pub fn reset_profiling(&self) {
        for r in self.shared.threads.iter() {
            r.prof.reset();
        }
    }

    /// Profiling totals per callback name over all threads (unsorted;
    /// names never called are left out).
    pub fn profiling_rows(&self) -> Vec<ProfileRow> {
        let names = self.shared.registry.names();
        let mut rows = Vec::new();
        for (i, name) in names.iter().enumerate().take(MAX_NAMES) {
            let mut row = ProfileRow {
                name,
                calls: 0,
                cpu_ns: 0,
                lat_ns: 0,
            };
            for r in self.shared.threads.iter() {
                let (c, t, l) = r.prof.read(i);
                row.calls += c;
                row.cpu_ns += t;
                row.lat_ns += l;
            }
            if row.calls != 0 {
                rows.push(row);
            }
        }
        rows
    }

    /// Tasks and tasklets queued to run now, by callback name: (name,
    /// count per thread). Exact when called under [`Self::isolate`] (every
    /// other thread parked between two turns), a close picture otherwise.
    pub fn queued_tasks(&self) -> Vec<(&'static str, Vec<u32>)> {
        let names = self.shared.registry.names();
        let n = self.shared.threads.len();
        let mut rows: Vec<(&'static str, Vec<u32>)> = Vec::new();
        for (t, r) in self.shared.threads.iter().enumerate() {
            for (i, c) in r.prof.queued_counts() {
                let Some(name) = names.get(i).copied() else {
                    continue;
                };
                match rows.iter_mut().find(|(nm, _)| *nm == name) {
                    Some((_, v)) => v[t] += c,
                    None => {
                        let mut v = vec![0; n];
                        v[t] = c;
                        rows.push((name, v));
                    }
                }
            }
        }
        rows.sort_by_key(|r| std::cmp::Reverse(r.1.iter().sum::<u32>()));
        rows
    }

    /// The `show profiling` text.
    pub fn profiling_report(&self, opts: ReportOpts) -> String {
        profile::format_report(self.profiling_mode(), self.profiling_rows(), opts)
    }

    /// Every thread's activity counters.
    pub fn activity(&self) -> Vec<ActivitySnapshot> {
        self.shared
            .threads
            .iter()
            .map(|r| r.activity.snapshot())
            .collect()
    }

    /// The `show activity` text.
    pub fn activity_report(&self) -> String {
        activity::format_report(&self.activity())
    }
}
