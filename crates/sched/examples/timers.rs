//! Timers with no I/O: three periodic tasks on one thread, each firing a
//! few times at its own period, then a one-shot that stops the runtime.
//! Run: `cargo run -p sched --example timers`

use sched::{ticks, Config, Ctx, Reasons, Runtime, Status};
use std::io;

fn main() -> io::Result<()> {
    let rt = Runtime::new(Config::new(1))?;
    let start = std::time::Instant::now();
    rt.run(move |ctx| {
        for (name, period) in [("fast", 7u32), ("medium", 13), ("slow", 29)] {
            let mut fired = 0;
            let t = ctx.new_task("periodic", move |ctx: &mut Ctx, me, why| {
                if why.contains(Reasons::TIMER) {
                    fired += 1;
                    println!(
                        "{:>6} fired #{fired} at {:>3} ms",
                        name,
                        start.elapsed().as_millis()
                    );
                    if fired == 4 {
                        return Status::Done;
                    }
                }
                ctx.schedule(me, ticks::add(ctx.now(), period));
                Status::Continue
            });
            ctx.wakeup(t, Reasons::INIT);
        }
    })?;
    println!("no task left: the loop ended by itself");
    Ok(())
}
