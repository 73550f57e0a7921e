//! Threads: cross-thread wakeups exactly once under a bounded stress, no
//! lost wakeup to a sleeping thread, isolation, stop, shared tasks.

use sched::{ticks, Config, Ctx, Reasons, Runtime, Status, TaskletId};
use std::io;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicUsize, Ordering};
use std::sync::mpsc;
use std::sync::{Arc, Mutex};
use std::time::Duration;

fn config(n: usize) -> Config {
    let mut c = Config::new(n);
    c.watchdog = None;
    c
}

/// Runs `rt.run(init)` on a helper thread and fails if it does not return
/// within `secs` (a lost wakeup would hang the loop for 60 s).
fn run_bounded<F>(rt: Runtime, secs: u64, init: F) -> io::Result<()>
where
    F: Fn(&mut Ctx) + Send + Sync + 'static,
{
    let (tx, rx) = mpsc::channel();
    let h = rt.handle();
    let j = std::thread::spawn(move || {
        let r = rt.run(init);
        let _ = tx.send(());
        r
    });
    match rx.recv_timeout(Duration::from_secs(secs)) {
        Ok(()) => j
            .join()
            .unwrap_or_else(|_| Err(io::Error::other("runtime panicked"))),
        Err(_) => {
            let report = h.activity_report();
            h.hard_stop();
            Err(io::Error::other(format!(
                "runtime did not finish in time:\n{report}"
            )))
        }
    }
}

#[test]
fn cross_thread_wakeups_exactly_once() -> io::Result<()> {
    // 3 worker threads own 3000 tasklets each; 3 outside threads wake every
    // one of them twice (and some stale ones). Each tasklet counts its runs
    // and ends: every one must run exactly once. 3000 per thread is about
    // three inbox rings, so the overflow path is exercised too.
    const THREADS: usize = 3;
    const PER_THREAD: usize = 3000;
    let mut c = config(THREADS);
    c.inbox_capacity = 1024;
    let rt = Runtime::new(c)?;
    let handle = rt.handle();
    let counts: Arc<Vec<AtomicU32>> = Arc::new(
        (0..THREADS * PER_THREAD)
            .map(|_| AtomicU32::new(0))
            .collect(),
    );
    let ids: Arc<Mutex<Vec<(usize, TaskletId)>>> = Arc::default();
    let ready = Arc::new(AtomicUsize::new(0));
    let (c2, i2, r2) = (counts.clone(), ids.clone(), ready.clone());
    let mut senders = Vec::new();
    for s in 0..3 {
        let (ids, ready, h) = (ids.clone(), ready.clone(), handle.clone());
        senders.push(std::thread::spawn(move || {
            while ready.load(Ordering::SeqCst) < THREADS {
                std::thread::yield_now();
            }
            let v = ids.lock().map(|g| g.clone()).unwrap_or_default();
            for round in 0..2 {
                for (k, (_, id)) in v.iter().enumerate() {
                    if (k + s + round) % 3 != 0 {
                        h.wake_tasklet(*id);
                    } else {
                        h.wake_tasklet_instant(*id);
                    }
                }
            }
        }));
    }
    let res = run_bounded(rt, 30, move |ctx| {
        let mut mine = Vec::new();
        for k in 0..PER_THREAD {
            let n = ctx.thread_id() * PER_THREAD + k;
            let counts = c2.clone();
            let id = ctx.new_tasklet("counted", move |_: &mut Ctx, _, why| {
                assert!(!why.is_empty());
                counts[n].fetch_add(1, Ordering::SeqCst);
                Status::Done
            });
            mine.push((n, id));
        }
        if let Ok(mut g) = i2.lock() {
            g.extend(mine);
        }
        r2.fetch_add(1, Ordering::SeqCst);
    });
    for s in senders {
        let _ = s.join();
    }
    res?;
    let bad: Vec<_> = counts
        .iter()
        .enumerate()
        .filter(|(_, c)| c.load(Ordering::SeqCst) != 1)
        .map(|(i, c)| (i, c.load(Ordering::SeqCst)))
        .collect();
    assert!(
        bad.is_empty(),
        "not run exactly once: {:?}",
        &bad[..bad.len().min(10)]
    );
    let act = handle.activity();
    let received: u64 = act.iter().map(|a| a.xthr_wake).sum();
    assert!(received >= (THREADS * PER_THREAD) as u64);
    Ok(())
}

#[test]
fn no_lost_wakeup_to_a_sleeping_thread() -> io::Result<()> {
    // Each round: one worker with one tasklet and no timer (it would sleep
    // 60 s); a remote thread wakes it after a short, varying delay that
    // falls before, during or after the worker's announce-sleep window.
    for round in 0..40u64 {
        let rt = Runtime::new(config(1))?;
        let h = rt.handle();
        let (tx, rx) = mpsc::channel::<TaskletId>();
        let tx = Mutex::new(tx);
        let waker = std::thread::spawn(move || {
            if let Ok(id) = rx.recv() {
                let spin = std::time::Instant::now();
                while spin.elapsed() < Duration::from_micros(round * 13 % 300) {
                    std::hint::spin_loop();
                }
                h.wake_tasklet(id);
            }
        });
        run_bounded(rt, 10, move |ctx| {
            let id = ctx.new_tasklet("sleeper", |_: &mut Ctx, _, _| Status::Done);
            if let Ok(tx) = tx.lock() {
                let _ = tx.send(id);
            }
        })?;
        let _ = waker.join();
    }
    Ok(())
}

#[test]
fn awake_thread_is_not_signalled_needlessly() -> io::Result<()> {
    // Wakeups sent by the worker to itself through the remote path while
    // it is awake must not write its eventfd.
    let rt = Runtime::new(config(1))?;
    let h = rt.handle();
    let h2 = h.clone();
    run_bounded(rt, 10, move |ctx| {
        let h = h2.clone();
        let mut n = 0;
        let id = ctx.new_tasklet("pinger", move |_: &mut Ctx, me, _| {
            n += 1;
            if n == 100 {
                return Status::Done;
            }
            h.wake_tasklet(me);
            Status::Continue
        });
        ctx.tasklet_wakeup(id);
    })?;
    let a = &h.activity()[0];
    assert_eq!(a.xthr_wake, 99);
    assert_eq!(a.wake_signal, 0, "never slept, never signalled");
    Ok(())
}

#[test]
fn isolation_excludes_every_other_thread() -> io::Result<()> {
    const THREADS: usize = 3;
    let rt = Runtime::new(config(THREADS))?;
    let handle = rt.handle();
    // Number of threads currently inside a callback, isolator excluded.
    let inside = Arc::new(AtomicUsize::new(0));
    let isolations = Arc::new(AtomicUsize::new(0));
    let violations = Arc::new(AtomicUsize::new(0));
    let (in2, iso2, vio2, h2) = (
        inside.clone(),
        isolations.clone(),
        violations.clone(),
        handle.clone(),
    );
    let outside = {
        let (inside, violations, isolations, h) = (
            inside.clone(),
            violations.clone(),
            isolations.clone(),
            handle.clone(),
        );
        std::thread::spawn(move || {
            for _ in 0..20 {
                h.isolate(|| {
                    for _ in 0..100 {
                        if inside.load(Ordering::SeqCst) != 0 {
                            violations.fetch_add(1, Ordering::SeqCst);
                        }
                    }
                    isolations.fetch_add(1, Ordering::SeqCst);
                });
                std::thread::sleep(Duration::from_millis(1));
            }
        })
    };
    let res = run_bounded(rt, 30, move |ctx| {
        let (inside, isolations, violations, h) =
            (in2.clone(), iso2.clone(), vio2.clone(), h2.clone());
        let tid = ctx.thread_id();
        let mut runs = 0;
        let mut mine = 0;
        let id = ctx.new_tasklet("busy", move |ctx: &mut Ctx, me, _| {
            runs += 1;
            if tid == 0 && runs % 5 == 0 && mine < 20 {
                mine += 1;
                ctx.isolate(|_| {
                    for _ in 0..100 {
                        if inside.load(Ordering::SeqCst) != 0 {
                            violations.fetch_add(1, Ordering::SeqCst);
                        }
                    }
                    isolations.fetch_add(1, Ordering::SeqCst);
                });
            }
            inside.fetch_add(1, Ordering::SeqCst);
            let t = std::time::Instant::now();
            while t.elapsed() < Duration::from_micros(30) {
                std::hint::spin_loop();
            }
            inside.fetch_sub(1, Ordering::SeqCst);
            if isolations.load(Ordering::SeqCst) >= 40 {
                h.stop();
                return Status::Done;
            }
            ctx.tasklet_wakeup(me);
            Status::Continue
        });
        ctx.on_stop_tasklet(id);
        ctx.tasklet_wakeup(id);
    });
    let _ = outside.join();
    res?;
    assert!(isolations.load(Ordering::SeqCst) >= 40);
    assert_eq!(violations.load(Ordering::SeqCst), 0);
    Ok(())
}

#[test]
fn graceful_stop_waits_for_registered_tasks() -> io::Result<()> {
    let rt = Runtime::new(config(2))?;
    let h = rt.handle();
    let signalled = Arc::new(AtomicUsize::new(0));
    let s2 = signalled.clone();
    let stopper = {
        let h = h.clone();
        std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(30));
            h.stop();
        })
    };
    run_bounded(rt, 10, move |ctx| {
        // A periodic task not registered for stop: does not hold the stop.
        let p = ctx.new_task("periodic", |ctx: &mut Ctx, me, _| {
            ctx.schedule(me, ticks::add(ctx.now(), 5));
            Status::Continue
        });
        ctx.wakeup(p, Reasons::INIT);
        // A "listener" closing on the stop signal, after one more timer.
        let s = s2.clone();
        let l = ctx.new_task("listener", move |ctx: &mut Ctx, me, why| {
            if why.contains(Reasons::SIGNAL) {
                assert!(ctx.stopping());
                s.fetch_add(1, Ordering::SeqCst);
                ctx.schedule(me, ticks::add(ctx.now(), 3));
                return Status::Continue;
            }
            if why.contains(Reasons::TIMER) && ctx.stopping() {
                return Status::Done;
            }
            Status::Continue
        });
        ctx.on_stop(l);
    })?;
    let _ = stopper.join();
    assert_eq!(signalled.load(Ordering::SeqCst), 2, "one per thread");
    Ok(())
}

#[test]
fn hard_stop_wakes_everyone() -> io::Result<()> {
    let rt = Runtime::new(config(2))?;
    let h = rt.handle();
    let stopper = std::thread::spawn(move || {
        std::thread::sleep(Duration::from_millis(20));
        h.hard_stop();
    });
    run_bounded(rt, 10, |ctx| {
        // Sleeps 60 s between runs, registered for stop and ignoring it.
        let t = ctx.new_task("stubborn", |_: &mut Ctx, _, _| Status::Continue);
        ctx.on_stop(t);
    })?;
    let _ = stopper.join();
    Ok(())
}

#[test]
fn shared_tasks_run_on_their_threads() -> io::Result<()> {
    let rt = Runtime::new(config(2))?;
    let runs = Arc::new(AtomicUsize::new(0));
    let timer_runs = Arc::new(AtomicUsize::new(0));
    let seen = Arc::new([AtomicBool::new(false), AtomicBool::new(false)]);
    let (r2, t2, s2) = (runs.clone(), timer_runs.clone(), seen.clone());
    let h = rt.handle();
    // Created before the threads start: any thread of mask 0b11.
    let id = h.new_shared_task("shared_ping", 0b11, move |ctx: &mut Ctx, me, _| {
        s2[ctx.thread_id()].store(true, Ordering::SeqCst);
        if r2.fetch_add(1, Ordering::SeqCst) + 1 >= 2000 {
            return Status::Done;
        }
        ctx.wakeup(me, Reasons::MSG);
        Status::Continue
    });
    h.wake_task(id, Reasons::INIT);
    // A shared timer task bound to thread 1 only, firing 3 times.
    let only1 = h.new_shared_task("shared_timer", 0b10, move |ctx: &mut Ctx, me, why| {
        assert_eq!(ctx.thread_id(), 1);
        if why.contains(Reasons::TIMER) && t2.fetch_add(1, Ordering::SeqCst) + 1 == 3 {
            return Status::Done;
        }
        ctx.schedule(me, ticks::add(ctx.now(), 2));
        Status::Continue
    });
    h.wake_task(only1, Reasons::INIT);
    run_bounded(rt, 20, |ctx| {
        // Keep each thread busy a little so both pick shared work.
        let mut n = 0;
        let t = ctx.new_tasklet("local", move |ctx: &mut Ctx, me, _| {
            n += 1;
            if n < 500 {
                ctx.tasklet_wakeup(me);
                return Status::Continue;
            }
            Status::Done
        });
        ctx.tasklet_wakeup(t);
    })?;
    assert_eq!(runs.load(Ordering::SeqCst), 2000);
    assert_eq!(timer_runs.load(Ordering::SeqCst), 3);
    assert!(seen[0].load(Ordering::SeqCst) || seen[1].load(Ordering::SeqCst));
    Ok(())
}

#[test]
fn shared_work_for_another_thread_does_not_spin_this_one() -> io::Result<()> {
    let rt = Runtime::new(config(2))?;
    let h = rt.handle();
    let h2 = h.clone();
    // Runnable on thread 1 only, which is busy for 50 ms first.
    let id = h.new_shared_task("for_thread_1", 0b10, move |ctx: &mut Ctx, _, _| {
        assert_eq!(ctx.thread_id(), 1);
        h2.stop();
        Status::Done
    });
    h.wake_task(id, Reasons::INIT);
    run_bounded(rt, 10, |ctx| {
        let t = if ctx.thread_id() == 1 {
            let t = ctx.new_tasklet("busy_first", |_: &mut Ctx, _, why| {
                if why.contains(Reasons::SIGNAL) {
                    return Status::Done;
                }
                let t0 = std::time::Instant::now();
                while t0.elapsed() < Duration::from_millis(50) {
                    std::hint::spin_loop();
                }
                Status::Continue
            });
            ctx.tasklet_wakeup(t);
            t
        } else {
            ctx.new_tasklet("idle", |_: &mut Ctx, _, why| {
                if why.contains(Reasons::SIGNAL) {
                    Status::Done
                } else {
                    Status::Continue
                }
            })
        };
        ctx.on_stop_tasklet(t);
    })?;
    let loops = h.activity()[0].loops;
    assert!(
        loops < 50,
        "thread 0 spun {loops} loops on work it may not take:\n{}",
        h.activity_report()
    );
    Ok(())
}

#[test]
fn isolate_from_a_worker_through_the_handle_and_nested() -> io::Result<()> {
    let rt = Runtime::new(config(2))?;
    let h = rt.handle();
    let done = Arc::new(AtomicUsize::new(0));
    let d2 = done.clone();
    run_bounded(rt, 10, move |ctx| {
        if ctx.thread_id() != 0 {
            return;
        }
        let (h, d) = (h.clone(), d2.clone());
        let t = ctx.new_tasklet("isolator", move |ctx: &mut Ctx, _, _| {
            h.isolate(|| {
                d.fetch_add(1, Ordering::SeqCst);
            });
            ctx.isolate(|ctx| {
                ctx.isolate(|_| {
                    d.fetch_add(1, Ordering::SeqCst);
                })
            });
            Status::Done
        });
        ctx.tasklet_wakeup(t);
    })?;
    assert_eq!(done.load(Ordering::SeqCst), 2);
    Ok(())
}

#[test]
fn remote_task_wakeup_carries_reasons_and_kill_shared_while_running() -> io::Result<()> {
    let rt = Runtime::new(config(2))?;
    let h = rt.handle();
    let got = Arc::new(Mutex::new(Vec::<Reasons>::new()));
    let task_id: Arc<Mutex<Option<sched::TaskId>>> = Arc::default();
    let dropped = Arc::new(AtomicBool::new(false));
    // A shared task that kills itself through the handle while running:
    // freed (state dropped) when it returns, and never runs again.
    struct Guard(Arc<AtomicBool>);
    impl Drop for Guard {
        fn drop(&mut self) {
            self.0.store(true, Ordering::SeqCst);
        }
    }
    let g = Guard(dropped.clone());
    let h3 = h.clone();
    let runs = Arc::new(AtomicUsize::new(0));
    let r3 = runs.clone();
    let shared = h.new_shared_task("self_killer", 0b11, move |ctx: &mut Ctx, me, _| {
        let _ = &g;
        r3.fetch_add(1, Ordering::SeqCst);
        h3.kill_shared_task(me);
        ctx.wakeup(me, Reasons::MSG); // ignored: killed
        Status::Continue
    });
    h.wake_task(shared, Reasons::INIT);
    let (g2, t2) = (got.clone(), task_id.clone());
    run_bounded(rt, 10, move |ctx| {
        if ctx.thread_id() == 0 {
            let g = g2.clone();
            let t = ctx.new_task("receiver", move |_: &mut Ctx, _, why| {
                if let Ok(mut v) = g.lock() {
                    v.push(why);
                }
                Status::Done
            });
            if let Ok(mut s) = t2.lock() {
                *s = Some(t);
            }
        } else {
            let t2 = t2.clone();
            let s = ctx.new_tasklet("sender", move |ctx: &mut Ctx, me, _| {
                let id = t2.lock().ok().and_then(|g| *g);
                match id {
                    Some(id) => {
                        ctx.wakeup(id, Reasons::MSG | Reasons::RES);
                        Status::Done
                    }
                    None => {
                        ctx.tasklet_wakeup(me);
                        Status::Continue
                    }
                }
            });
            ctx.tasklet_wakeup(s);
        }
    })?;
    assert_eq!(
        *got.lock().map_err(|_| io::Error::other("poison"))?,
        [Reasons::MSG | Reasons::RES]
    );
    assert_eq!(runs.load(Ordering::SeqCst), 1);
    assert!(dropped.load(Ordering::SeqCst));
    Ok(())
}

#[test]
fn worker_to_worker_wakeups_exactly_once() -> io::Result<()> {
    // Workers wake each other's tasklets through their lanes, in chunks
    // of 300 per run (more than a lane holds, so the shared ring takes the
    // spill), twice each. Every tasklet runs exactly once.
    const THREADS: usize = 3;
    const PER_THREAD: usize = 2000;
    let rt = Runtime::new(config(THREADS))?;
    let counts: Arc<Vec<AtomicU32>> = Arc::new(
        (0..THREADS * PER_THREAD)
            .map(|_| AtomicU32::new(0))
            .collect(),
    );
    let ids: Arc<Mutex<Vec<(usize, TaskletId)>>> = Arc::default();
    let ready = Arc::new(AtomicUsize::new(0));
    let (c2, i2, r2) = (counts.clone(), ids.clone(), ready.clone());
    run_bounded(rt, 30, move |ctx| {
        let me = ctx.thread_id();
        let mut mine = Vec::new();
        for k in 0..PER_THREAD {
            let n = me * PER_THREAD + k;
            let counts = c2.clone();
            let id = ctx.new_tasklet("target", move |_: &mut Ctx, _, _| {
                counts[n].fetch_add(1, Ordering::SeqCst);
                Status::Done
            });
            mine.push((me, id));
        }
        if let Ok(mut g) = i2.lock() {
            g.extend(mine);
        }
        r2.fetch_add(1, Ordering::SeqCst);
        let (ids, ready) = (i2.clone(), r2.clone());
        let mut todo: Vec<TaskletId> = Vec::new();
        let mut loaded = false;
        let sender = ctx.new_tasklet("sender", move |ctx: &mut Ctx, s, _| {
            if !loaded {
                if ready.load(Ordering::SeqCst) < THREADS {
                    ctx.tasklet_wakeup(s);
                    return Status::Continue;
                }
                let all = ids.lock().map(|g| g.clone()).unwrap_or_default();
                let others: Vec<TaskletId> = all
                    .iter()
                    .filter(|(t, _)| *t != me)
                    .map(|(_, id)| *id)
                    .collect();
                todo = others.iter().chain(others.iter()).copied().collect();
                loaded = true;
            }
            for id in todo.drain(..todo.len().min(300)) {
                ctx.tasklet_wakeup(id);
            }
            if todo.is_empty() {
                return Status::Done;
            }
            ctx.tasklet_wakeup(s);
            Status::Continue
        });
        ctx.tasklet_wakeup(sender);
    })?;
    let bad = counts
        .iter()
        .filter(|c| c.load(Ordering::SeqCst) != 1)
        .count();
    assert_eq!(bad, 0, "tasklets not run exactly once");
    Ok(())
}
