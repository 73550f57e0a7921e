//! Tasklets with a timer, on an injected clock: firing with the timer
//! reason, coexistence with wakeups, lazy and earlier requeue, cancelling,
//! re-arming from the callback, kill with a timer pending, the u32 wrap
//! and the poll timeout.

use sched::{ticks, Config, Ctx, ManualClock, Reasons, Runtime, Status, TaskletId, Tick};
use std::cell::RefCell;
use std::io;
use std::rc::Rc;
use std::sync::Arc;

type Log = Rc<RefCell<Vec<(&'static str, Tick, Reasons)>>>;

fn setup(start_ms: u64) -> io::Result<(Runtime, Arc<ManualClock>)> {
    let clock = Arc::new(ManualClock::new(start_ms));
    let mut c = Config::new(1);
    c.clock = clock.clone();
    c.watchdog = None;
    Ok((Runtime::new(c)?, clock))
}

/// A tasklet that logs each run (name, date, reasons).
fn logger(ctx: &mut Ctx, log: &Log, name: &'static str) -> TaskletId {
    let log = log.clone();
    ctx.new_tasklet("tl_timer", move |ctx: &mut Ctx, _, why| {
        log.borrow_mut().push((name, ctx.now(), why));
        Status::Continue
    })
}

fn take(log: &Log) -> Vec<(&'static str, Tick, Reasons)> {
    log.borrow_mut().drain(..).collect()
}

#[test]
fn fires_once_with_the_timer_reason() -> io::Result<()> {
    let (rt, clock) = setup(1_000)?;
    let mut ctx = rt.context(0)?;
    ctx.run_until_idle(1)?;
    let log = Log::default();
    let now = ctx.now();
    let t = logger(&mut ctx, &log, "t");
    ctx.tasklet_set_expire(t, ticks::add(now, 10));
    assert_eq!(ctx.tasklet_expire(t), ticks::add(now, 10));
    assert!(!ctx.tasklet_queued(t), "a timer does not queue the tasklet");
    clock.advance(9);
    ctx.run_until_idle(5)?;
    assert!(take(&log).is_empty(), "1 ms early");
    clock.advance(1);
    ctx.run_until_idle(5)?;
    assert_eq!(take(&log), [("t", ticks::add(now, 10), Reasons::TIMER)]);
    assert_eq!(ctx.tasklet_expire(t), sched::ETERNITY, "consumed");
    clock.advance(1_000);
    ctx.run_until_idle(5)?;
    assert!(take(&log).is_empty(), "a fired timer fires once");
    assert!(ctx.tasklet_alive(t));
    Ok(())
}

#[test]
fn wakeups_and_the_timer_coexist() -> io::Result<()> {
    let (rt, clock) = setup(5_000)?;
    let mut ctx = rt.context(0)?;
    ctx.run_until_idle(1)?;
    let log = Log::default();
    let now = ctx.now();
    let t = logger(&mut ctx, &log, "t");
    ctx.tasklet_set_expire(t, ticks::add(now, 20));
    // A wakeup runs it at once and leaves the timer where it is.
    ctx.tasklet_wakeup_why(t, Reasons::MSG);
    ctx.run_until_idle(5)?;
    assert_eq!(take(&log), [("t", now, Reasons::MSG)]);
    assert_eq!(ctx.tasklet_expire(t), ticks::add(now, 20));
    clock.advance(20);
    ctx.run_until_idle(5)?;
    assert_eq!(take(&log), [("t", ticks::add(now, 20), Reasons::TIMER)]);
    // Queued when the timer fires: one run with both reasons.
    let now = ctx.now();
    ctx.tasklet_set_expire(t, ticks::add(now, 5));
    clock.advance(5);
    ctx.tasklet_wakeup_why(t, Reasons::IO);
    ctx.run_until_idle(5)?;
    assert_eq!(
        take(&log),
        [("t", ticks::add(now, 5), Reasons::IO | Reasons::TIMER)]
    );
    Ok(())
}

#[test]
fn lazy_and_earlier_requeue_and_cancel() -> io::Result<()> {
    let (rt, clock) = setup(50_000)?;
    let mut ctx = rt.context(0)?;
    ctx.run_until_idle(1)?;
    let log = Log::default();
    let now = ctx.now();
    let later = logger(&mut ctx, &log, "later");
    let earlier = logger(&mut ctx, &log, "earlier");
    let never = logger(&mut ctx, &log, "never");
    let cancelled = logger(&mut ctx, &log, "cancelled");
    let sched_keeps = logger(&mut ctx, &log, "schedule");
    ctx.tasklet_set_expire(later, ticks::add(now, 10));
    ctx.tasklet_set_expire(later, ticks::add(now, 50)); // lazy: node stays at +10
    ctx.tasklet_set_expire(earlier, ticks::add(now, 50));
    ctx.tasklet_set_expire(earlier, ticks::add(now, 5)); // requeued at once
    ctx.tasklet_set_expire(never, ticks::add(now, 20));
    ctx.tasklet_set_expire(never, sched::ETERNITY); // dropped at its scan
    ctx.tasklet_set_expire(cancelled, ticks::add(now, 7));
    ctx.tasklet_unqueue(cancelled); // node removed now
    ctx.tasklet_schedule(sched_keeps, ticks::add(now, 30));
    ctx.tasklet_schedule(sched_keeps, ticks::add(now, 40)); // keeps the earlier
    assert_eq!(ctx.tasklet_expire(sched_keeps), ticks::add(now, 30));
    clock.advance(5);
    ctx.run_until_idle(5)?;
    assert_eq!(
        take(&log),
        [("earlier", ticks::add(now, 5), Reasons::TIMER)]
    );
    clock.advance(10); // +15: the lazy node at +10 surfaces, is requeued
    ctx.run_until_idle(5)?;
    assert!(
        take(&log).is_empty(),
        "moved later: not fired at the old date"
    );
    assert_eq!(ctx.tasklet_expire(later), ticks::add(now, 50));
    clock.advance(15); // +30
    ctx.run_until_idle(5)?;
    assert_eq!(
        take(&log),
        [("schedule", ticks::add(now, 30), Reasons::TIMER)]
    );
    clock.advance(20); // +50
    ctx.run_until_idle(5)?;
    assert_eq!(take(&log), [("later", ticks::add(now, 50), Reasons::TIMER)]);
    clock.advance(1_000);
    ctx.run_until_idle(5)?;
    assert!(take(&log).is_empty(), "eternity and unqueue never fire");
    Ok(())
}

#[test]
fn rearming_from_the_callback_and_ending() -> io::Result<()> {
    let (rt, clock) = setup(7)?;
    let mut ctx = rt.context(0)?;
    ctx.run_until_idle(1)?;
    let fired = Rc::new(RefCell::new(Vec::new()));
    let f2 = fired.clone();
    let t = ctx.new_tasklet("periodic", move |ctx: &mut Ctx, me, why| {
        assert_eq!(why, Reasons::TIMER);
        f2.borrow_mut().push(ctx.now());
        if f2.borrow().len() == 3 {
            return Status::Done;
        }
        // Set while running: queued when the callback returns.
        ctx.tasklet_set_expire(me, ticks::add(ctx.now(), 10));
        assert_eq!(ctx.tasklet_expire(me), ticks::add(ctx.now(), 10));
        Status::Continue
    });
    let start = ctx.now();
    ctx.tasklet_schedule(t, ticks::add(start, 10));
    for _ in 0..45 {
        clock.advance(1);
        ctx.run_until_idle(3)?;
    }
    let want: Vec<_> = [10, 20, 30].iter().map(|d| ticks::add(start, *d)).collect();
    assert_eq!(*fired.borrow(), want);
    assert!(!ctx.tasklet_alive(t), "Status::Done freed it");
    assert_eq!(ctx.tasklet_expire(t), sched::ETERNITY, "stale id");
    Ok(())
}

#[test]
fn killed_with_a_timer_pending() -> io::Result<()> {
    let (rt, clock) = setup(300)?;
    let mut ctx = rt.context(0)?;
    ctx.run_until_idle(1)?;
    let log = Log::default();
    let now = ctx.now();
    let keep = logger(&mut ctx, &log, "keep");
    let gone = logger(&mut ctx, &log, "gone");
    ctx.tasklet_set_expire(gone, ticks::add(now, 3));
    ctx.tasklet_set_expire(keep, ticks::add(now, 100));
    assert_eq!(ctx.poll_timeout(), 4, "next timer + 1 ms");
    ctx.kill_tasklet(gone);
    assert_eq!(ctx.poll_timeout(), 101, "the killed tasklet's node left");
    // A new tasklet may reuse the slot: the old timer must not fire it.
    let reuse = logger(&mut ctx, &log, "reuse");
    clock.advance(10);
    ctx.run_until_idle(5)?;
    assert!(take(&log).is_empty());
    ctx.tasklet_set_expire(gone, ticks::add(ctx.now(), 1)); // stale: no-op
    assert_eq!(ctx.tasklet_expire(reuse), sched::ETERNITY);
    clock.advance(100);
    ctx.run_until_idle(5)?;
    assert_eq!(take(&log), [("keep", ticks::add(now, 110), Reasons::TIMER)]);
    Ok(())
}

#[test]
fn fires_across_the_wrap() -> io::Result<()> {
    // Start 5 ms before the u32 tick wraps; the timer is due 10 ms later.
    let (rt, clock) = setup(u64::from(u32::MAX) - 5)?;
    let mut ctx = rt.context(0)?;
    ctx.run_until_idle(1)?;
    let log = Log::default();
    let now = ctx.now();
    let t = logger(&mut ctx, &log, "t");
    let when = ticks::add(now, 10);
    assert!(when < now, "the date wrapped");
    ctx.tasklet_set_expire(t, when);
    clock.advance(9);
    ctx.run_until_idle(3)?;
    assert!(take(&log).is_empty());
    clock.advance(1);
    ctx.run_until_idle(3)?;
    assert_eq!(take(&log), [("t", when, Reasons::TIMER)]);
    Ok(())
}

#[test]
fn heavy_tasklet_timer_runs_in_the_heavy_class() -> io::Result<()> {
    // Two heavy tasklets due at once: one heavy run per turn, the timer
    // reason respected (the flag decides the class, not the reason).
    let (rt, clock) = setup(10)?;
    let mut ctx = rt.context(0)?;
    ctx.run_until_idle(1)?;
    let log = Log::default();
    let now = ctx.now();
    let a = logger(&mut ctx, &log, "a");
    let b = logger(&mut ctx, &log, "b");
    for t in [a, b] {
        ctx.set_heavy(t, true);
        ctx.tasklet_set_expire(t, ticks::add(now, 1));
    }
    clock.advance(1);
    assert_eq!(ctx.turn(false)?, 1, "one heavy callback per turn");
    assert_eq!(ctx.turn(false)?, 1);
    let l = take(&log);
    assert_eq!(l.len(), 2);
    assert!(l.iter().all(|e| e.2 == Reasons::TIMER));
    Ok(())
}
