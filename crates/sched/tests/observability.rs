//! Profiling, activity counters and the watchdog: the numbers match the
//! work done; auto mode switches both ways; a stuck callback is reported.

use sched::{
    Config, Ctx, ProfilingMode, Reasons, ReportOpts, Runtime, SortBy, Status, WatchdogReport,
};
use std::io;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

fn config(mode: ProfilingMode) -> Config {
    let mut c = Config::new(1);
    c.watchdog = None;
    c.profiling = mode;
    c
}

fn spin(d: Duration) {
    let t = Instant::now();
    while t.elapsed() < d {
        std::hint::spin_loop();
    }
}

#[test]
fn profiling_and_activity_match_the_work() -> io::Result<()> {
    let rt = Runtime::new(config(ProfilingMode::On))?;
    let h = rt.handle();
    let mut ctx = rt.context(0)?;
    let mut n = 0;
    let a = ctx.new_tasklet("alpha", move |ctx: &mut Ctx, me, _| {
        n += 1;
        spin(Duration::from_micros(20));
        if n < 10 {
            ctx.tasklet_wakeup(me);
        }
        Status::Continue
    });
    let b = ctx.new_task("beta", |_: &mut Ctx, _, _| Status::Continue);
    ctx.tasklet_wakeup(a);
    for _ in 0..5 {
        ctx.wakeup(b, Reasons::MSG);
        ctx.run_until_idle(5)?;
    }
    let rows = h.profiling_rows();
    let get = |name: &str| rows.iter().find(|r| r.name == name).cloned();
    let alpha = get("alpha").ok_or_else(|| io::Error::other("no alpha row"))?;
    let beta = get("beta").ok_or_else(|| io::Error::other("no beta row"))?;
    assert_eq!(alpha.calls, 10);
    assert_eq!(beta.calls, 5);
    assert!(alpha.cpu_ns >= 10 * 20_000, "cpu_tot covers the spins");
    assert!(alpha.cpu_avg() >= 20_000);
    let act = &h.activity()[0];
    assert_eq!(act.ctxsw, 15);
    assert_eq!(act.tasksw, 5);
    assert!(act.loops >= 5);

    let report = h.profiling_report(ReportOpts::default());
    let lines: Vec<&str> = report.lines().collect();
    assert!(
        lines[2].contains("function") && lines[2].contains("lat_avg"),
        "{report}"
    );
    assert!(
        lines[3].trim_start().starts_with("alpha"),
        "sorted by calls: {report}"
    );
    let by_time = h.profiling_report(ReportOpts {
        sort: SortBy::Time,
        limit: Some(1),
    });
    assert_eq!(by_time.lines().count(), 4, "header + one row: {by_time}");
    assert!(by_time.contains("alpha"));
    let act_report = h.activity_report();
    assert!(act_report.contains("ctxsw"), "{act_report}");

    h.reset_profiling();
    assert!(h.profiling_rows().is_empty());
    // Off: nothing recorded.
    h.set_profiling(ProfilingMode::Off);
    ctx.wakeup(b, Reasons::MSG);
    ctx.run_until_idle(5)?;
    assert!(h.profiling_rows().is_empty());
    assert!(!ctx.profiling_active());
    Ok(())
}

#[test]
fn wakeup_latency_is_measured() -> io::Result<()> {
    let rt = Runtime::new(config(ProfilingMode::On))?;
    let h = rt.handle();
    let mut ctx = rt.context(0)?;
    let late = ctx.new_tasklet("late", |_: &mut Ctx, _, _| Status::Continue);
    ctx.run_until_idle(1)?;
    ctx.tasklet_wakeup(late);
    spin(Duration::from_millis(2));
    ctx.run_until_idle(3)?;
    let rows = h.profiling_rows();
    assert_eq!(rows.len(), 1);
    assert!(rows[0].lat_ns >= 2_000_000, "{:?}", rows[0]);
    Ok(())
}

#[test]
fn remote_wakeup_latency_counts_from_the_send() -> io::Result<()> {
    let rt = Runtime::new(config(ProfilingMode::On))?;
    let h = rt.handle();
    let mut ctx = rt.context(0)?;
    let t = ctx.new_tasklet("remote_woken", |_: &mut Ctx, _, _| Status::Continue);
    ctx.run_until_idle(1)?;
    h.wake_tasklet(t); // through the inbox, as from another thread
    spin(Duration::from_millis(2));
    ctx.run_until_idle(3)?;
    let rows = h.profiling_rows();
    assert_eq!(rows.len(), 1);
    assert_eq!(rows[0].calls, 1);
    assert!(rows[0].lat_ns >= 2_000_000, "{:?}", rows[0]);
    Ok(())
}

#[test]
fn auto_mode_switches_both_ways() -> io::Result<()> {
    let rt = Runtime::new(config(ProfilingMode::Auto))?;
    let h = rt.handle();
    let mut ctx = rt.context(0)?;
    let busy = ctx.new_tasklet("busy", |ctx: &mut Ctx, me, _| {
        spin(Duration::from_micros(1500));
        ctx.tasklet_wakeup(me);
        Status::Continue
    });
    ctx.tasklet_wakeup(busy);
    assert!(!ctx.profiling_active());
    let mut turns = 0;
    while !ctx.profiling_active() {
        ctx.turn(false)?;
        turns += 1;
        assert!(turns < 300, "auto never turned on");
    }
    assert!(h.profiling_active()[0]);
    // Busy turns are now recorded.
    ctx.turn(false)?;
    assert!(h.profiling_rows().iter().any(|r| r.name == "busy"));
    ctx.kill_tasklet(busy);
    let idle = ctx.new_tasklet("idle", |_: &mut Ctx, _, _| Status::Continue);
    let mut turns = 0;
    while ctx.profiling_active() {
        ctx.tasklet_wakeup(idle);
        ctx.turn(false)?;
        turns += 1;
        assert!(turns < 1000, "auto never turned off");
    }
    assert!(!h.profiling_active()[0]);
    // And back on when busy again.
    ctx.set_avg_loop_us_for_test(1000);
    assert!(ctx.profiling_active());
    Ok(())
}

#[test]
fn watchdog_reports_then_declares_fatal() -> io::Result<()> {
    let reports: Arc<Mutex<Vec<WatchdogReport>>> = Arc::default();
    let r2 = reports.clone();
    let mut c = config(ProfilingMode::Off);
    c.watchdog = Some(Duration::from_millis(40));
    c.watchdog_hook = Some(Arc::new(move |r: &WatchdogReport| {
        if let Ok(mut g) = r2.lock() {
            g.push(r.clone());
        }
    }));
    let rt = Runtime::new(c)?;
    let r3 = reports.clone();
    rt.run(move |ctx| {
        let r4 = r3.clone();
        let t = ctx.new_tasklet("stuck_handshake", move |_: &mut Ctx, _, _| {
            // Spin without returning until the watchdog declared the stall
            // fatal (about 2 limits of CPU), at most 5 s.
            let t0 = Instant::now();
            while t0.elapsed() < Duration::from_secs(5) {
                spin(Duration::from_millis(1));
                if r4.lock().map(|g| g.iter().any(|r| r.fatal)).unwrap_or(true) {
                    break;
                }
            }
            Status::Done
        });
        ctx.tasklet_wakeup(t);
    })?;
    let g = reports.lock().map(|g| g.clone()).unwrap_or_default();
    assert!(g.len() >= 2, "{g:?}");
    assert_eq!(g[0].callback, "stuck_handshake");
    assert_eq!(g[0].thread, 0);
    assert!(!g[0].fatal);
    assert!(g[0].cpu >= Duration::from_millis(40));
    assert!(g[1].fatal, "second expiry without progress is fatal: {g:?}");
    Ok(())
}

#[test]
fn queued_tasks_are_counted_by_name_until_they_run() -> io::Result<()> {
    let rt = Runtime::new(config(ProfilingMode::Off))?;
    let h = rt.handle();
    let mut ctx = rt.context(0)?;
    let ids: Vec<_> = (0..3)
        .map(|_| ctx.new_tasklet("q_tasklet", |_c: &mut Ctx, _id, _why| Status::Continue))
        .collect();
    let t = ctx.new_task("q_task", |_c: &mut Ctx, _id, _why| Status::Continue);
    assert!(h.queued_tasks().is_empty());
    for id in &ids {
        ctx.tasklet_wakeup(*id);
    }
    ctx.wakeup(t, Reasons::OTHER);
    // Waking an already queued entry does not count it twice.
    ctx.tasklet_wakeup(ids[0]);
    let q = h.queued_tasks();
    let count = |name: &str| {
        q.iter()
            .find(|(n, _)| *n == name)
            .map_or(0, |(_, v)| v.iter().sum::<u32>())
    };
    assert_eq!(count("q_tasklet"), 3, "{q:?}");
    assert_eq!(count("q_task"), 1, "{q:?}");
    // Killing a queued one and running the rest empties the counts.
    ctx.kill_tasklet(ids[1]);
    let q = h.queued_tasks();
    assert_eq!(
        q.iter().find(|(n, _)| *n == "q_tasklet").map(|(_, v)| v[0]),
        Some(2)
    );
    ctx.run_until_idle(10)?;
    assert!(h.queued_tasks().is_empty(), "{:?}", h.queued_tasks());
    Ok(())
}
