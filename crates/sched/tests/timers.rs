//! Timers with an injected clock: expiry order, lazy and earlier requeue,
//! eternity, the u32 wrap, and the poll timeout.

use sched::{ticks, Config, Ctx, ManualClock, Reasons, Runtime, Status, TaskId, ETERNITY};
use std::cell::RefCell;
use std::io;
use std::rc::Rc;
use std::sync::Arc;

type Log = Rc<RefCell<Vec<(String, sched::Tick, Reasons)>>>;

fn setup(start_ms: u64) -> io::Result<(Runtime, Arc<ManualClock>)> {
    let clock = Arc::new(ManualClock::new(start_ms));
    let mut c = Config::new(1);
    c.clock = clock.clone();
    c.watchdog = None;
    Ok((Runtime::new(c)?, clock))
}

fn timer_task(ctx: &mut Ctx, log: &Log, name: &str) -> TaskId {
    let log = log.clone();
    let name = name.to_string();
    ctx.new_task("timer", move |ctx: &mut Ctx, _, why| {
        log.borrow_mut().push((name.clone(), ctx.now(), why));
        Status::Continue
    })
}

fn names(log: &Log) -> Vec<String> {
    log.borrow_mut().drain(..).map(|e| e.0).collect()
}

#[test]
fn expiry_order() -> io::Result<()> {
    let (rt, clock) = setup(1_000)?;
    let mut ctx = rt.context(0)?;
    ctx.run_until_idle(1)?;
    let log = Log::default();
    let now = ctx.now();
    for (name, d) in [("c", 30), ("a", 10), ("b", 20), ("a2", 10)] {
        let t = timer_task(&mut ctx, &log, name);
        ctx.schedule(t, ticks::add(now, d));
    }
    ctx.run_until_idle(5)?;
    assert!(names(&log).is_empty(), "nothing due yet");
    clock.advance(9);
    ctx.run_until_idle(5)?;
    assert!(names(&log).is_empty(), "1 ms early");
    clock.advance(1);
    ctx.run_until_idle(5)?;
    let l: Vec<_> = log.borrow().clone();
    assert_eq!(l.len(), 2);
    assert!(l
        .iter()
        .all(|e| e.2 == Reasons::TIMER && e.1 == ticks::add(now, 10)));
    assert_eq!(names(&log), ["a", "a2"]);
    clock.advance(100);
    ctx.run_until_idle(5)?;
    assert_eq!(names(&log), ["b", "c"]);
    clock.advance(100);
    ctx.run_until_idle(5)?;
    assert!(names(&log).is_empty(), "a fired timer is consumed");
    Ok(())
}

#[test]
fn lazy_and_earlier_requeue_and_eternity() -> io::Result<()> {
    let (rt, clock) = setup(50_000)?;
    let mut ctx = rt.context(0)?;
    ctx.run_until_idle(1)?;
    let log = Log::default();
    let now = ctx.now();
    let later = timer_task(&mut ctx, &log, "later");
    let earlier = timer_task(&mut ctx, &log, "earlier");
    let never = timer_task(&mut ctx, &log, "never");
    ctx.set_expire(later, ticks::add(now, 10));
    ctx.set_expire(later, ticks::add(now, 50)); // lazy: node stays at +10
    ctx.set_expire(earlier, ticks::add(now, 50));
    ctx.set_expire(earlier, ticks::add(now, 5)); // requeued at once
    ctx.set_expire(never, ticks::add(now, 20));
    ctx.set_expire(never, ETERNITY);
    assert_eq!(ctx.expire(later), ticks::add(now, 50));
    clock.advance(5);
    ctx.run_until_idle(5)?;
    assert_eq!(names(&log), ["earlier"]);
    clock.advance(5); // +10: the lazy node surfaces, is not due, moves
    ctx.run_until_idle(5)?;
    assert!(names(&log).is_empty());
    clock.advance(39);
    ctx.run_until_idle(5)?;
    assert!(names(&log).is_empty());
    clock.advance(1);
    ctx.run_until_idle(5)?;
    assert_eq!(names(&log), ["later"]);
    clock.advance(1_000_000);
    ctx.run_until_idle(5)?;
    assert!(names(&log).is_empty(), "eternity never fires");
    assert!(ctx.task_alive(never));
    Ok(())
}

#[test]
fn fires_across_the_wrap() -> io::Result<()> {
    // 5 ms before the u32 tick wraps.
    let (rt, clock) = setup(u64::from(u32::MAX) - 5)?;
    let mut ctx = rt.context(0)?;
    ctx.run_until_idle(1)?;
    let now = ctx.now();
    assert_eq!(now, u32::MAX - 5);
    let log = Log::default();
    let a = timer_task(&mut ctx, &log, "a"); // before the wrap
    let b = timer_task(&mut ctx, &log, "b"); // after it
    let c = timer_task(&mut ctx, &log, "c");
    ctx.schedule(c, ticks::add(now, 20));
    ctx.schedule(b, ticks::add(now, 10));
    ctx.schedule(a, ticks::add(now, 3));
    assert!(ctx.expire(b) < ctx.expire(a), "b's key wrapped past 0");
    clock.advance(3);
    ctx.run_until_idle(5)?;
    assert_eq!(names(&log), ["a"]);
    clock.advance(6); // tick 3: past the wrap, b (tick 4) not yet due
    ctx.run_until_idle(5)?;
    assert!(names(&log).is_empty());
    clock.advance(1);
    ctx.run_until_idle(5)?;
    assert_eq!(names(&log), ["b"]);
    clock.advance(10);
    ctx.run_until_idle(5)?;
    assert_eq!(names(&log), ["c"]);
    Ok(())
}

#[test]
fn rearming_from_the_callback() -> io::Result<()> {
    let (rt, clock) = setup(7)?;
    let mut ctx = rt.context(0)?;
    ctx.run_until_idle(1)?;
    let fired = Rc::new(RefCell::new(Vec::new()));
    let f2 = fired.clone();
    let t = ctx.new_task("periodic", move |ctx: &mut Ctx, me, why| {
        assert_eq!(why, Reasons::TIMER);
        f2.borrow_mut().push(ctx.now());
        let next = ticks::add(ctx.now(), 10);
        ctx.schedule(me, next);
        Status::Continue
    });
    let start = ctx.now();
    ctx.schedule(t, ticks::add(start, 10));
    for _ in 0..35 {
        clock.advance(1);
        ctx.run_until_idle(3)?;
    }
    let want: Vec<_> = [10, 20, 30].iter().map(|d| ticks::add(start, *d)).collect();
    assert_eq!(*fired.borrow(), want);
    Ok(())
}

#[test]
fn poll_timeout_follows_timers() -> io::Result<()> {
    let (rt, clock) = setup(100)?;
    let mut ctx = rt.context(0)?;
    ctx.run_until_idle(1)?;
    let log = Log::default();
    assert_eq!(ctx.poll_timeout(), 0, "no task left: the loop exits");
    let t = timer_task(&mut ctx, &log, "t");
    assert_eq!(ctx.poll_timeout(), sched::MAX_POLL_MS as i32);
    ctx.schedule(t, ticks::add(ctx.now(), 100_000));
    assert_eq!(ctx.poll_timeout(), 60_000, "capped at 60 s");
    ctx.schedule(t, ticks::add(ctx.now(), 10));
    assert_eq!(ctx.poll_timeout(), 11, "rounded up by 1 ms");
    ctx.wakeup(t, Reasons::MSG);
    assert_eq!(ctx.poll_timeout(), 0, "work remains");
    ctx.run_until_idle(3)?;
    clock.advance(10);
    ctx.turn(false)?; // reads the new now; fires the timer
    assert_eq!(names(&log), ["t", "t"]);
    Ok(())
}

#[test]
fn real_clock_sleep_until_timer() -> io::Result<()> {
    // The real loop with the default clock: a 1-thread runtime whose
    // task fires 3 times 2 ms apart, then ends (the thread then exits).
    let mut c = Config::new(1);
    c.watchdog = None;
    let rt = Runtime::new(c)?;
    let count = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let c2 = count.clone();
    rt.run(move |ctx| {
        let c3 = c2.clone();
        let t = ctx.new_task("tick", move |ctx: &mut Ctx, me, why| {
            if !why.contains(Reasons::TIMER) {
                ctx.schedule(me, ticks::add(ctx.now(), 2));
                return Status::Continue;
            }
            if c3.fetch_add(1, std::sync::atomic::Ordering::SeqCst) == 2 {
                return Status::Done;
            }
            ctx.schedule(me, ticks::add(ctx.now(), 2));
            Status::Continue
        });
        ctx.wakeup(t, Reasons::INIT);
    })?;
    assert_eq!(count.load(std::sync::atomic::Ordering::SeqCst), 3);
    Ok(())
}
