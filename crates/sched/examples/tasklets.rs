//! Tasklets with no I/O: two threads bounce a ball 100 000 times through
//! cross-thread tasklet wakeups (each thread's lock-free inbox), while a
//! shared task ticks on whichever thread is free; then the profiling and
//! activity reports are printed.
//! Run: `cargo run --release -p sched --example tasklets`

use sched::{Config, Ctx, ProfilingMode, Reasons, ReportOpts, Runtime, Status, TaskletId};
use std::io;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

const BOUNCES: u64 = 100_000;

fn main() -> io::Result<()> {
    let mut cfg = Config::new(2);
    cfg.profiling = ProfilingMode::On;
    let rt = Runtime::new(cfg)?;
    let h = rt.handle();
    // The two players' ids, published by each thread's init.
    let players: Arc<Mutex<[Option<TaskletId>; 2]>> = Arc::default();
    let count = Arc::new(AtomicU64::new(0));
    let shared_ticks = Arc::new(AtomicU64::new(0));
    let st = shared_ticks.clone();
    let ticker = h.new_shared_task("shared_ticker", 0b11, move |ctx: &mut Ctx, me, _| {
        st.fetch_add(1, Ordering::Relaxed);
        let next = sched::ticks::add(ctx.now(), 1);
        ctx.schedule(me, next);
        Status::Continue
    });
    h.wake_task(ticker, Reasons::INIT);
    let (p2, c2, h2) = (players.clone(), count.clone(), h.clone());
    let t0 = std::time::Instant::now();
    rt.run(move |ctx| {
        let me_idx = ctx.thread_id();
        let (players, count, h) = (p2.clone(), c2.clone(), h2.clone());
        let id = ctx.new_tasklet("player", move |ctx: &mut Ctx, _, _| {
            let n = count.fetch_add(1, Ordering::Relaxed) + 1;
            if n >= BOUNCES {
                h.kill_shared_task(ticker);
                h.stop();
                return Status::Done;
            }
            let other = players.lock().ok().and_then(|g| g[1 - me_idx]);
            if let Some(o) = other {
                ctx.tasklet_wakeup(o); // the other thread's: through its inbox
            }
            Status::Continue
        });
        ctx.on_stop_tasklet(id);
        let both = {
            let Ok(mut g) = p2.lock() else { return };
            g[me_idx] = Some(id);
            g[0].is_some() && g[1].is_some()
        };
        if both {
            ctx.tasklet_wakeup(id); // serve
        }
    })?;
    let el = t0.elapsed();
    println!(
        "{} bounces in {:?} ({:.0} cross-thread wakeups/s); shared ticker ran {} times",
        count.load(Ordering::Relaxed),
        el,
        count.load(Ordering::Relaxed) as f64 / el.as_secs_f64(),
        shared_ticks.load(Ordering::Relaxed)
    );
    print!("{}", h.profiling_report(ReportOpts::default()));
    print!("{}", h.activity_report());
    Ok(())
}
