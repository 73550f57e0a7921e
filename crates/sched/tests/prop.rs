//! Property tests: the scheduler's orderings against a simple reference.

use proptest::prelude::*;
use sched::{Config, Ctx, Reasons, Runtime, Status};
use std::cell::RefCell;
use std::rc::Rc;

const DEPTH: u32 = 1000;

fn runtime() -> Runtime {
    let mut c = Config::new(1);
    c.runqueue_depth = Some(DEPTH);
    c.watchdog = None;
    match Runtime::new(c) {
        Ok(rt) => rt,
        Err(e) => panic!("runtime: {e}"),
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    /// Tasks woken in some order with some nice values run in the order of
    /// `wakeup index + nice * depth` (stable), after every tasklet woken
    /// from outside, which run FIFO by first wakeup (re-wakes of a queued
    /// tasklet change nothing).
    #[test]
    fn orderings_match_the_reference(
        nices in prop::collection::vec(-3i32..=3, 1..40),
        wakes in prop::collection::vec(0usize..10, 0..40),
    ) {
        let rt = runtime();
        let mut ctx = rt.context(0).map_err(|e| TestCaseError::fail(e.to_string()))?;
        let log = Rc::new(RefCell::new(Vec::<String>::new()));
        let tasklets: Vec<_> = (0..10)
            .map(|k| {
                let l = log.clone();
                ctx.new_tasklet("tl", move |_: &mut Ctx, _, _| {
                    l.borrow_mut().push(format!("l{k}"));
                    Status::Continue
                })
            })
            .collect();
        let tasks: Vec<_> = nices
            .iter()
            .enumerate()
            .map(|(i, &n)| {
                let l = log.clone();
                let t = ctx.new_task("t", move |_: &mut Ctx, _, _| {
                    l.borrow_mut().push(format!("t{i}"));
                    Status::Continue
                });
                ctx.set_nice(t, n);
                t
            })
            .collect();
        for (i, &t) in tasks.iter().enumerate() {
            ctx.wakeup(t, Reasons::MSG);
            if let Some(&w) = wakes.get(i) {
                ctx.tasklet_wakeup(tasklets[w]);
            }
        }
        for &w in wakes.iter().skip(tasks.len()) {
            ctx.tasklet_wakeup(tasklets[w]);
        }
        ctx.run_until_idle(10).map_err(|e| TestCaseError::fail(e.to_string()))?;

        let mut want: Vec<String> = Vec::new();
        for &w in &wakes {
            let s = format!("l{w}");
            if !want.contains(&s) {
                want.push(s);
            }
        }
        let mut keyed: Vec<(i64, usize)> = nices
            .iter()
            .enumerate()
            .map(|(i, &n)| (i as i64 + i64::from(n) * i64::from(DEPTH), i))
            .collect();
        keyed.sort();
        want.extend(keyed.iter().map(|(_, i)| format!("t{i}")));
        prop_assert_eq!(&*log.borrow(), &want);
    }
}
