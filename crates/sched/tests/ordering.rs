//! Ordering rules of one thread's scheduler, driven by hand: FIFO, nice,
//! classes and their budgets, the heavy cap, low-latency mode, instant and
//! wakeup-after.

use sched::{Config, Ctx, Reasons, Runtime, Status, TaskId, TaskletId};
use std::cell::RefCell;
use std::io;
use std::rc::Rc;

type Log = Rc<RefCell<Vec<String>>>;

fn runtime(depth: u32, low_latency: bool) -> io::Result<Runtime> {
    let mut c = Config::new(1);
    c.runqueue_depth = Some(depth);
    c.low_latency = low_latency;
    c.watchdog = None;
    Runtime::new(c)
}

fn task(ctx: &mut Ctx, log: &Log, name: &str) -> TaskId {
    let log = log.clone();
    let name = name.to_string();
    ctx.new_task("test_task", move |_: &mut Ctx, _, _| {
        log.borrow_mut().push(name.clone());
        Status::Continue
    })
}

fn tasklet(ctx: &mut Ctx, log: &Log, name: &str) -> TaskletId {
    let log = log.clone();
    let name = name.to_string();
    ctx.new_tasklet("test_tasklet", move |_: &mut Ctx, _, _| {
        log.borrow_mut().push(name.clone());
        Status::Continue
    })
}

fn take(log: &Log) -> Vec<String> {
    std::mem::take(&mut *log.borrow_mut())
}

#[test]
fn fifo_among_equal_priority() -> io::Result<()> {
    let rt = runtime(280, false)?;
    let mut ctx = rt.context(0)?;
    let log = Log::default();
    let ts: Vec<_> = (0..6)
        .map(|i| task(&mut ctx, &log, &format!("t{i}")))
        .collect();
    for &t in &ts {
        ctx.wakeup(t, Reasons::INIT);
    }
    // Waking again while queued changes nothing.
    ctx.wakeup(ts[0], Reasons::MSG);
    let tls: Vec<_> = (0..4)
        .map(|i| tasklet(&mut ctx, &log, &format!("l{i}")))
        .collect();
    for &t in &tls {
        ctx.tasklet_wakeup(t);
    }
    ctx.run_until_idle(10)?;
    // Tasklets woken from outside are urgent: before the tasks.
    assert_eq!(
        take(&log),
        ["l0", "l1", "l2", "l3", "t0", "t1", "t2", "t3", "t4", "t5"]
    );
    Ok(())
}

#[test]
fn nice_moves_tasks() -> io::Result<()> {
    let rt = runtime(280, false)?;
    let mut ctx = rt.context(0)?;
    let log = Log::default();
    let a = task(&mut ctx, &log, "a");
    let b = task(&mut ctx, &log, "b");
    let late = task(&mut ctx, &log, "late");
    let early = task(&mut ctx, &log, "early");
    ctx.set_nice(late, 1024);
    ctx.set_nice(early, -1024);
    ctx.wakeup(late, Reasons::INIT);
    ctx.wakeup(a, Reasons::INIT);
    ctx.wakeup(b, Reasons::INIT);
    ctx.wakeup(early, Reasons::INIT);
    ctx.run_until_idle(10)?;
    assert_eq!(take(&log), ["early", "a", "b", "late"]);
    Ok(())
}

#[test]
fn class_order_and_budgets() -> io::Result<()> {
    // depth 8 with urgent, normal and bulk all non-empty (sum of weights
    // 128): urgent ceil(8*64/128) = 4, normal ceil(8*48/128) = 3,
    // bulk ceil(8*16/128) = 1.
    let rt = runtime(8, false)?;
    let mut ctx = rt.context(0)?;
    let log = Log::default();
    let mut bulk = Vec::new();
    for i in 0..10 {
        let t = tasklet(&mut ctx, &log, &format!("b{i}"));
        ctx.set_self_waking(t, true);
        bulk.push(t);
    }
    for i in 0..10 {
        let t = task(&mut ctx, &log, &format!("t{i}"));
        ctx.wakeup(t, Reasons::INIT);
    }
    for &t in &bulk {
        ctx.tasklet_wakeup(t);
    }
    for i in 0..10 {
        let t = tasklet(&mut ctx, &log, &format!("u{i}"));
        ctx.tasklet_wakeup(t);
    }
    let ran = ctx.turn(false)?;
    assert_eq!(ran, 8);
    assert_eq!(take(&log), ["u0", "u1", "u2", "u3", "t0", "t1", "t2", "b0"]);
    let ran = ctx.turn(false)?;
    assert_eq!(ran, 8);
    assert_eq!(take(&log), ["u4", "u5", "u6", "u7", "t3", "t4", "t5", "b1"]);
    let snap = &rt.handle().activity()[0];
    assert_eq!(snap.long_rq, 2, "both turns used their whole budget");
    Ok(())
}

#[test]
fn self_waking_tasklet_goes_to_bulk() -> io::Result<()> {
    let rt = runtime(280, false)?;
    let mut ctx = rt.context(0)?;
    let log = Log::default();
    let l2 = log.clone();
    let mut n = 0;
    let me = ctx.new_tasklet("selfwake", move |ctx: &mut Ctx, me, _| {
        n += 1;
        l2.borrow_mut().push(format!("s{n}"));
        if n < 3 {
            ctx.tasklet_wakeup(me);
        }
        Status::Continue
    });
    let t = task(&mut ctx, &log, "t");
    let u = tasklet(&mut ctx, &log, "u");
    ctx.tasklet_wakeup(me);
    ctx.wakeup(t, Reasons::INIT);
    ctx.tasklet_wakeup(u);
    ctx.turn(false)?;
    // s1 (urgent) wakes itself: bulk, after the normal class (t).
    assert_eq!(take(&log), ["s1", "u", "t", "s2", "s3"]);
    Ok(())
}

#[test]
fn heavy_cap_per_turn() -> io::Result<()> {
    let rt = runtime(280, false)?;
    let mut ctx = rt.context(0)?;
    let log = Log::default();
    for i in 0..5 {
        let t = tasklet(&mut ctx, &log, &format!("h{i}"));
        ctx.set_heavy(t, true);
        ctx.tasklet_wakeup(t);
    }
    for i in 0..3 {
        let t = tasklet(&mut ctx, &log, &format!("u{i}"));
        ctx.tasklet_wakeup(t);
    }
    assert_eq!(ctx.turn(false)?, 4);
    assert_eq!(take(&log), ["u0", "u1", "u2", "h0"]);
    // Only heavy work left: 1 + 4/128 = 1 per turn.
    assert_eq!(ctx.turn(false)?, 1);
    assert_eq!(take(&log), ["h1"]);
    // A backlog of 300 handshakes alone drains 1 + 300/128 = 3 per turn.
    for i in 0..300 {
        let t = tasklet(&mut ctx, &log, &format!("x{i}"));
        ctx.set_heavy(t, true);
        ctx.tasklet_wakeup(t);
    }
    ctx.run_until_idle(1)?;
    take(&log);
    assert_eq!(ctx.turn(false)?, 3);
    Ok(())
}

#[test]
fn heavy_cap_low_latency_is_one() -> io::Result<()> {
    let rt = runtime(280, true)?;
    let mut ctx = rt.context(0)?;
    let log = Log::default();
    for i in 0..300 {
        let t = tasklet(&mut ctx, &log, &format!("h{i}"));
        ctx.set_heavy(t, true);
        ctx.tasklet_wakeup(t);
    }
    assert_eq!(ctx.turn(false)?, 1);
    assert_eq!(ctx.turn(false)?, 1);
    Ok(())
}

/// Bulk tasklets each wake a task: in low-latency mode the scheduler goes
/// back to the newly runnable normal work after each bulk entry.
fn bulk_waking_tasks(low_latency: bool) -> io::Result<Vec<String>> {
    let rt = runtime(280, low_latency)?;
    let mut ctx = rt.context(0)?;
    let log = Log::default();
    for i in 0..3 {
        let t = task(&mut ctx, &log, &format!("t{i}"));
        let l2 = log.clone();
        let b = ctx.new_tasklet("bulk", move |ctx: &mut Ctx, _, _| {
            l2.borrow_mut().push(format!("b{i}"));
            ctx.wakeup(t, Reasons::MSG);
            Status::Done
        });
        ctx.set_self_waking(b, true);
        ctx.tasklet_wakeup(b);
    }
    ctx.turn(false)?;
    Ok(take(&log))
}

#[test]
fn low_latency_returns_to_higher_classes() -> io::Result<()> {
    assert_eq!(
        bulk_waking_tasks(false)?,
        ["b0", "b1", "b2", "t0", "t1", "t2"]
    );
    assert_eq!(
        bulk_waking_tasks(true)?,
        ["b0", "t0", "b1", "t1", "b2", "t2"]
    );
    Ok(())
}

#[test]
fn instant_wakeup_runs_next_and_wakeup_after_keeps_order() -> io::Result<()> {
    let rt = runtime(280, false)?;
    let mut ctx = rt.context(0)?;
    let log = Log::default();
    let d = tasklet(&mut ctx, &log, "d");
    let x = tasklet(&mut ctx, &log, "x");
    let y = tasklet(&mut ctx, &log, "y");
    let l2 = log.clone();
    let a = ctx.new_tasklet("a", move |ctx: &mut Ctx, _, _| {
        l2.borrow_mut().push("a".into());
        ctx.tasklet_wakeup_instant(d);
        Status::Continue
    });
    let b = tasklet(&mut ctx, &log, "b");
    let l3 = log.clone();
    let c = ctx.new_tasklet("c", move |ctx: &mut Ctx, _, _| {
        l3.borrow_mut().push("c".into());
        let w = ctx.tasklet_wakeup_after(None, x);
        ctx.tasklet_wakeup_after(w, y);
        Status::Continue
    });
    let e = tasklet(&mut ctx, &log, "e");
    for t in [a, b, c, e] {
        ctx.tasklet_wakeup(t);
    }
    ctx.run_until_idle(10)?;
    assert_eq!(take(&log), ["a", "d", "b", "c", "x", "y", "e"]);
    // Outside callbacks, an instant wakeup goes ahead of queued urgent work.
    ctx.tasklet_wakeup(b);
    ctx.tasklet_wakeup_instant(d);
    ctx.run_until_idle(10)?;
    assert_eq!(take(&log), ["d", "b"]);
    Ok(())
}

#[test]
fn niced_tasks_shorten_the_turn() -> io::Result<()> {
    let rt = runtime(40, false)?;
    let mut ctx = rt.context(0)?;
    let log = Log::default();
    for i in 0..50 {
        let t = task(&mut ctx, &log, &format!("t{i}"));
        if i == 0 {
            ctx.set_nice(t, 10);
        }
        ctx.wakeup(t, Reasons::INIT);
    }
    // (40 + 3) / 4 = 10 entries while a niced task is queued.
    assert_eq!(ctx.turn(false)?, 10);
    Ok(())
}
