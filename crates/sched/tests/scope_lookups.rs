//! Scope-aware shared-queue lookups against the naive walk
//! (`Config::scope_lookups`): the same task is found either way, and the
//! nodes visited per lookup (`sq_nodes / sq_lookups` in `show activity`)
//! stay logarithmic with scope lookups on and grow with the queue when off.

use sched::{Config, Ctx, Reasons, Runtime, Status};
use std::cell::Cell;
use std::io;
use std::rc::Rc;

/// Queues `backlog` shared tasks for thread 1 only, then one for thread 0,
/// and lets thread 0 (driven by hand; thread 1 never runs) take its work.
/// Returns (thread 0's task ran, lookups, nodes visited).
fn run(scoped: bool, backlog: usize) -> io::Result<(bool, u64, u64)> {
    let mut c = Config::new(2);
    c.watchdog = None;
    c.scope_lookups = scoped;
    let rt = Runtime::new(c)?;
    let h = rt.handle();
    for _ in 0..backlog {
        let t = h.new_shared_task("for_thread_1", 0b10, |_: &mut Ctx, _, _| Status::Done);
        h.wake_task(t, Reasons::INIT);
    }
    let mut ctx = rt.context(0)?;
    let ran = Rc::new(Cell::new(false));
    let r2 = ran.clone();
    // Thread 0's own task, local, keeps the loop busy until the shared
    // one ran (it only stops polling for it).
    let mine = ctx.new_shared_task("for_thread_0", 0b01, |ctx: &mut Ctx, _, _| {
        assert_eq!(ctx.thread_id(), 0);
        Status::Done
    });
    let watcher = ctx.new_tasklet("watch", move |ctx: &mut Ctx, _, _| {
        r2.set(!ctx.task_alive(mine));
        Status::Done
    });
    ctx.wakeup(mine, Reasons::INIT);
    ctx.run_until_idle(10)?;
    ctx.tasklet_wakeup(watcher);
    ctx.run_until_idle(2)?;
    let a = h.activity()[0];
    assert_eq!(h.activity()[1].sq_lookups, 0, "thread 1 never ran");
    Ok((ran.get(), a.sq_lookups, a.sq_nodes))
}

#[test]
fn scoped_lookups_visit_few_nodes_naive_ones_the_whole_queue() -> io::Result<()> {
    let backlog = 2_000;
    let (ran_s, look_s, nodes_s) = run(true, backlog)?;
    let (ran_n, look_n, nodes_n) = run(false, backlog)?;
    assert!(ran_s && ran_n, "thread 0's task ran in both modes");
    assert!(
        look_s >= 1 && look_n >= 1,
        "lookups counted: {look_s} {look_n}"
    );
    // 2,001 entries: a tree about 11 levels deep; down and up the side
    // of it is well under 100 nodes per lookup.
    assert!(
        nodes_s <= 100 * look_s,
        "scoped: {nodes_s} nodes in {look_s} lookups"
    );
    // The naive walk examines every entry queued for thread 1 before
    // reaching ours (queued last), at least once.
    assert!(
        nodes_n >= backlog as u64,
        "naive: {nodes_n} nodes in {look_n} lookups"
    );
    Ok(())
}

#[test]
fn the_report_shows_nodes_per_lookup() -> io::Result<()> {
    let mut c = Config::new(1);
    c.watchdog = None;
    let rt = Runtime::new(c)?;
    let h = rt.handle();
    let mut ctx = rt.context(0)?;
    let t = ctx.new_shared_task("s", 0b1, |_: &mut Ctx, _, _| Status::Done);
    ctx.wakeup(t, Reasons::INIT);
    ctx.run_until_idle(5)?;
    let a = h.activity()[0];
    assert!(a.sq_lookups >= 1);
    let r = h.activity_report();
    let line = r
        .lines()
        .find(|l| l.starts_with("sq_avg_nodes:"))
        .unwrap_or_else(|| panic!("no sq_avg_nodes line in\n{r}"));
    assert_eq!(
        line.split_whitespace().nth(1),
        Some(a.sq_avg_nodes().as_str()),
        "{r}"
    );
    assert!(r.contains("sq_lookups:") && r.contains("sq_nodes:"), "{r}");
    Ok(())
}
