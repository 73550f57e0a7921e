//! # The loop and one turn
//!
//! One loop per thread: each turn reads the clock once (`now`), sees a
//! stop, drains the inbox (a bounded batch, so a flood of remote wakeups
//! cannot starve local work), wakes expired timers (at most `depth`
//! each from the local and shared wait queues), runs runnable work by
//! class budgets, accounts the turn, then polls (see `poll`).
//!
//! ## Classes and budgets
//!
//! ```text
//!  max = depth            ((depth + 3) / 4 if niced tasks are queued)
//!  while max > 0 and work:
//!    only urgent entries wait (an I/O wakeup's turn): run them FIFO, up
//!        to max (the budget the split below would give it), and loop
//!    budgets among non-empty classes: ceil(max * w / sum(w)),
//!        w = urgent 64, normal 48, bulk 16, heavy 1
//!    heavy (once per turn): 1 in low-latency mode, else 1 + queued/1024,
//!        or 1 + queued/128 when only heavy work waits
//!    pick tasks from the local and shared run queues into `normal`
//!        (older key first, local on ties) up to normal's budget
//!    run urgent, normal, bulk, heavy, each up to its budget, FIFO
//!        (low-latency: before each entry go back to the highest class
//!         with work and budget; return early to refill when a higher
//!         class has work but no budget left)
//! ```
//!
//! A shared task picked from the shared run queue is represented in the
//! normal list by a stand-in slot (`PROXY`), freed when it runs; the
//! shared queue is searched with the thread's mask (scope-aware lookup).
//!
//! The turn also keeps the sliding average loop time (HAProxy's swrate
//! over `LOOP_AVG_WINDOW` turns) that drives `auto` profiling.

use super::types::{sf, Cb, Place, LOOP_AVG_WINDOW};
use super::Ctx;
use crate::activity::Activity;
use crate::profile::{auto_decide, ProfilingMode};
use crate::shared::{decode, gf, mono_ns, MSG_INSTANT, MSG_TASK};
use crate::task::{Class, TaskId, NB_CLASSES};
use crate::ticks;
use std::io;
use std::sync::atomic::Ordering;

impl Ctx {
    /// Runs the loop until the thread has nothing left, or the stop rules
    /// say it is done (see [`crate::runtime`]).
    pub fn run(&mut self) -> io::Result<()> {
        let r = self.run_inner();
        let rem = self.remote();
        rem.exited.store(true, Ordering::SeqCst);
        rem.harmless.store(true, Ordering::SeqCst);
        rem.sleep.awake();
        r
    }

    pub(super) fn run_inner(&mut self) -> io::Result<()> {
        self.started_ns = mono_ns();
        self.shared.park_at(&self.me, self.tid);
        loop {
            if self.should_exit() {
                return Ok(());
            }
            self.turn(true)?;
        }
    }

    /// Whether the thread is done: hard stop; graceful stop with every
    /// registered task finished; or nothing left at all.
    pub fn should_exit(&self) -> bool {
        if self.shared.hard_stop.load(Ordering::Relaxed) {
            return true;
        }
        if self.stop_seen && self.hooked_live == 0 {
            return true;
        }
        self.live == 0 && self.shared.gq_live.load(Ordering::Relaxed) == 0
    }

    /// One loop turn: inbox, timers, runnable work by class budgets, then a
    /// poll (sleeping until the next timer if `may_sleep` and nothing is
    /// left to run; else a non-blocking poll). Returns the number of
    /// callbacks run.
    pub fn turn(&mut self, may_sleep: bool) -> io::Result<usize> {
        // A turn starts when the poll before it returned (no clock read in
        // between); after a poll that did not sleep, the clock is read.
        self.loop_start_ns = match std::mem::take(&mut self.woke_ns) {
            0 => mono_ns(),
            t => t,
        };
        self.now = self.shared.now_tick_at(self.loop_start_ns);
        self.update_profiling();
        self.shared.park_at(&self.me, self.tid);
        self.check_stop();
        self.drain_inbox();
        self.wake_expired();
        let (ran, exhausted) = self.process_runnable();
        {
            let a = &self.remote().activity;
            Activity::add(&a.loops, 1);
            if ran == 0 {
                Activity::add(&a.empty_rq, 1);
            }
            if exhausted {
                Activity::add(&a.long_rq, 1);
            }
        }
        self.account_loop();
        #[cfg(all(feature = "strict", debug_assertions))]
        self.check_invariants();
        let timeout = if may_sleep { self.sleep_timeout() } else { 0 };
        self.poll(timeout)?;
        Ok(ran)
    }

    /// Turns until nothing is runnable and no timer is due (never sleeps);
    /// for tests and tools driving a context by hand. Returns the number of
    /// callbacks run. Stops after `max_turns` turns.
    pub fn run_until_idle(&mut self, max_turns: usize) -> io::Result<usize> {
        let mut total = 0;
        for _ in 0..max_turns {
            let ran = self.turn(false)?;
            total += ran;
            if ran == 0 && !self.has_runnable() {
                break;
            }
        }
        Ok(total)
    }

    #[inline]
    pub(super) fn drain_inbox(&mut self) {
        // Most turns find it empty: a look at its heads, no batch.
        if self.remote().inbox.has_msg() {
            self.drain_inbox_batch();
        }
    }

    #[inline(never)]
    fn drain_inbox_batch(&mut self) {
        // Bounded by one ring's worth per turn (plus what overflowed) so
        // that a flood of remote wakeups cannot starve this thread's own
        // work.
        let mut batch = std::mem::take(&mut self.inbox_buf);
        batch.clear();
        let n = self
            .remote()
            .inbox
            .pop_batch(&mut batch, crate::inbox::DEFAULT_CAPACITY) as u64;
        let now32 = if self.prof_active { mono_ns() } else { 0 };
        for &m in &batch {
            let sent = (m.b >> 32) as u32;
            let wake_at = if sent != 0 && now32 != 0 {
                now32.saturating_sub(u64::from((now32 as u32).wrapping_sub(sent)))
            } else {
                0
            };
            let (slot, gen, kind, why) = decode(m);
            if kind & MSG_TASK != 0 {
                let id = TaskId {
                    thread: self.tid as u16,
                    slot,
                    gen,
                };
                if let Some(i) = self.task_idx(id) {
                    self.task_wake_local(i, why);
                    self.backdate_wakeup(i, wake_at);
                }
            } else if let Some(i) = self.tasklet_idx_raw(slot, gen) {
                // Woken from another thread: urgent, whatever is served.
                let s = &mut self.slots[i];
                s.reasons |= why;
                let instant = kind & MSG_INSTANT != 0;
                if s.flags & sf::IN_LIST != 0 {
                    if !instant {
                        continue;
                    }
                    self.list_remove(i);
                }
                if self.prof_active {
                    self.slots[i].wake_ns = mono_ns();
                }
                let class = if self.slots[i].flags & sf::HEAVY != 0 {
                    Class::Heavy
                } else {
                    Class::Urgent
                };
                let place = if instant { Place::Head } else { Place::Tail };
                self.list_link(class, i, place);
                self.backdate_wakeup(i, wake_at);
            }
        }
        self.inbox_buf = batch;
        if n != 0 {
            Activity::add(&self.remote().activity.xthr_wake, n);
        }
    }

    /// Moves a queued entry's wakeup date back to when a remote thread sent
    /// the wakeup (profiling only).
    #[inline]
    pub(super) fn backdate_wakeup(&mut self, i: usize, at: u64) {
        let s = &mut self.slots[i];
        if at != 0 && s.wake_ns != 0 && at < s.wake_ns {
            s.wake_ns = at;
        }
    }

    /// Whether some shared task may be waiting for this thread.
    #[inline]
    pub(super) fn shared_rq_work(&self) -> bool {
        self.shared.gq_rq_threads.load(Ordering::Relaxed) & (1u64 << self.tid) != 0
    }

    pub(super) fn has_runnable(&self) -> bool {
        self.lists.iter().any(|l| l.len != 0) || !self.rq.is_empty() || self.shared_rq_work()
    }

    /// Runs runnable work by class budgets; returns (entries run, whether
    /// the turn's budget ran out with work left).
    pub(super) fn process_runnable(&mut self) -> (usize, bool) {
        let mut max = if self.niced != 0 || self.shared_niced() {
            // Niced tasks present: shorter turns so that priorities take
            // effect sooner (HAProxy's (depth + 3) / 4).
            self.depth.div_ceil(4)
        } else {
            self.depth
        };
        self.heavy_granted = false;
        let mut done = 0usize;
        let mut drains = 0;
        while max > 0 {
            if self.only_urgent() {
                // Only urgent entries wait (an I/O wakeup's turn): the one
                // active class's budget is all of `max`, which is what the
                // general path below computes; run them FIFO, those that
                // their callbacks wake into urgent included.
                let mut n = 0;
                while n < max {
                    let Some(i) = self.list_pop(Class::Urgent) else {
                        break;
                    };
                    n += 1;
                    self.run_entry(i, Class::Urgent);
                }
                done += n as usize;
                max -= n;
                continue;
            }
            let lens = [
                self.lists[0].len,
                self.lists[1].len,
                self.lists[2].len,
                self.lists[3].len,
            ];
            let tree_work = !self.rq.is_empty() || self.shared_rq_work();
            let active = [
                lens[0] != 0,
                lens[1] != 0 || tree_work,
                lens[2] != 0,
                lens[3] != 0 && !self.heavy_granted,
            ];
            if !active.iter().any(|&a| a) {
                // Wakeups sent through the inbox during this turn (by code
                // that holds only a handle, on this thread too: the
                // server queue's hand-over) run now, not after a poll
                // that would find nothing else to do.
                if drains < 4 && self.remote().inbox.has_msg() {
                    drains += 1;
                    self.drain_inbox();
                    continue;
                }
                break;
            }
            let sum: u32 = Class::ALL
                .iter()
                .filter(|c| active[**c as usize])
                .map(|c| c.weight())
                .sum();
            let mut budgets = [0u32; NB_CLASSES];
            for c in Class::ALL {
                if active[c as usize] {
                    budgets[c as usize] = (max * c.weight()).div_ceil(sum);
                }
            }
            if active[3] {
                let q = lens[3];
                let only_heavy = !active[0] && !active[1] && !active[2];
                budgets[3] = if self.low_latency {
                    1
                } else if only_heavy {
                    // Only handshakes wait: let a backlog drain faster.
                    1 + q / 128
                } else {
                    1 + q / 1024
                };
                self.heavy_granted = true;
            }
            if budgets[1] > lens[1] {
                self.pick_from_trees(budgets[1] - lens[1]);
            }
            let n = self.run_lists(&mut budgets, max);
            done += n as usize;
            max = max.saturating_sub(n);
            if n == 0 {
                break;
            }
        }
        (done, max == 0 && self.has_runnable())
    }

    /// Whether the urgent list is the only place where work waits.
    #[inline]
    fn only_urgent(&self) -> bool {
        self.lists[0].len != 0
            && self.lists[1].len == 0
            && self.lists[2].len == 0
            && self.lists[3].len == 0
            && self.rq.is_empty()
            && !self.shared_rq_work()
    }

    pub(super) fn shared_niced(&self) -> bool {
        // Only looked at when shared tasks are queued.
        self.shared_rq_work() && self.shared.lock_gq().niced != 0
    }

    /// Moves up to `n` tasks from the local and shared run queues to the
    /// tail of the normal list, older key first (local on ties).
    pub(super) fn pick_from_trees(&mut self, n: u32) {
        let lstart = self.rq_ticks.wrapping_sub(ticks::TICK_HALF);
        let mask = 1u64 << self.tid;
        let sh = self.shared.clone();
        let mut gq = if self.shared_rq_work() {
            Some(sh.lock_gq())
        } else {
            None
        };
        let gstart = gq
            .as_ref()
            .map(|q| q.rq_ticks.wrapping_sub(ticks::TICK_HALF))
            .unwrap_or(0);
        let scoped = self.shared.scope_lookups;
        let (mut lookups, mut nodes) = (0u64, 0u64);
        let mut picked = 0;
        while picked < n {
            let l = self
                .rq
                .lookup_ge_wrap(lstart)
                .and_then(|h| self.rq.key(h).map(|k| (h, k)));
            let g = gq.as_ref().and_then(|q| {
                lookups += 1;
                q.rq_lookup(gstart, mask, scoped, &mut nodes)
                    .and_then(|h| q.rq.key(h).map(|k| (h, k)))
            });
            let take_local = match (l, g) {
                (None, None) => break,
                (Some(_), None) => true,
                (None, Some(_)) => false,
                // Keys from two counters: the older (wrap-safe) wins.
                (Some((_, lk)), Some((_, gk))) => {
                    (lk.wrapping_sub(lstart)) <= (gk.wrapping_sub(gstart))
                }
            };
            if take_local {
                let Some((h, _)) = l else { break };
                let Some(i) = self.rq.delete(h) else { break };
                let i = i as usize;
                self.slots[i].rq = None;
                self.count_queued(i, false);
                if self.slots[i].nice != 0 {
                    self.niced = self.niced.saturating_sub(1);
                }
                self.list_link(Class::Normal, i, Place::Tail);
            } else {
                let (Some((h, _)), Some(q)) = (g, gq.as_mut()) else {
                    break;
                };
                let Some(gi) = q.rq.delete(h) else { break };
                let gmask = q.slots[gi as usize].mask;
                q.rq_account(gmask, false);
                let s = &mut q.slots[gi as usize];
                s.rq = None;
                s.flags |= gf::PICKED;
                let gen = s.gen;
                if s.nice != 0 {
                    q.niced = q.niced.saturating_sub(1);
                }
                let i = self.alloc(sf::LIVE | sf::TASK | sf::PROXY, 0, Cb::Proxy(gi, gen));
                self.list_link(Class::Normal, i, Place::Tail);
            }
            picked += 1;
        }
        if let Some(q) = gq {
            sh.gq_publish(&q, self.now);
        }
        if lookups != 0 {
            let a = &self.remote().activity;
            Activity::add(&a.sq_lookups, lookups);
            Activity::add(&a.sq_nodes, nodes);
        }
    }

    /// Runs entries from the class lists within `budgets`, at most `max`;
    /// returns how many ran.
    pub(super) fn run_lists(&mut self, budgets: &mut [u32; NB_CLASSES], max: u32) -> u32 {
        let mut done = 0;
        let mut c = 0usize;
        while c < NB_CLASSES && done < max {
            if self.low_latency {
                // Go back to the highest class with work and budget; if a
                // higher class has work but no budget, return to refill.
                let back = (0..c)
                    .find(|&hc| self.lists[hc].len != 0 || (hc == 1 && !self.rq.is_empty()))
                    .map(|hc| (hc, budgets[hc] != 0 && self.lists[hc].len != 0));
                match back {
                    Some((hc, true)) => c = hc,
                    Some((_, false)) if done != 0 => return done,
                    _ => {}
                }
            }
            if budgets[c] == 0 {
                c += 1;
                continue;
            }
            let class = Class::ALL[c];
            let Some(i) = self.list_pop(class) else {
                c += 1;
                continue;
            };
            budgets[c] -= 1;
            done += 1;
            if class == Class::Heavy {
                Activity::add(&self.remote().activity.heavy, 1);
            }
            self.run_entry(i, class);
        }
        done
    }

    /// Updates the average loop time and the `auto` profiling decision.
    pub(super) fn account_loop(&mut self) {
        let now_ns = mono_ns();
        self.turn_end_ns = now_ns;
        let us = now_ns.saturating_sub(self.loop_start_ns) / 1000;
        // Sliding average over LOOP_AVG_WINDOW turns (HAProxy's swrate).
        self.loop_sum = self.loop_sum - self.loop_sum / LOOP_AVG_WINDOW + us;
        let avg = self.loop_sum / LOOP_AVG_WINDOW;
        let r = self.remote();
        r.activity.avg_loop_us.store(avg, Ordering::Relaxed);
        r.activity
            .total_ns
            .store(now_ns - self.started_ns, Ordering::Relaxed);
    }

    pub(super) fn update_profiling(&mut self) {
        let mode = ProfilingMode::from_u8(self.shared.profiling.load(Ordering::Relaxed));
        let avg = self.loop_sum / LOOP_AVG_WINDOW;
        self.prof_active = match mode {
            ProfilingMode::Off => false,
            ProfilingMode::On => true,
            ProfilingMode::Auto => auto_decide(self.prof_active, avg),
        };
        self.remote()
            .prof
            .active
            .store(u8::from(self.prof_active), Ordering::Relaxed);
    }

    /// Test hook: forces the average loop time (µs) seen by `auto`.
    #[doc(hidden)]
    pub fn set_avg_loop_us_for_test(&mut self, us: u64) {
        self.loop_sum = us * LOOP_AVG_WINDOW;
        self.update_profiling();
    }
}
