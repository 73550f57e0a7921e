//! # Running one entry
//!
//! A callback runs with its box *taken out* of the slot, so that it can
//! borrow the whole [`Ctx`] mutably (create, wake, kill anything,
//! itself included); the box goes back when it returns, or is dropped if
//! the callback returned [`Status::Done`] or killed itself. While it runs
//! the slot is flagged `RUNNING`: a task woken meanwhile is requeued when
//! it returns (`WOKEN_RUN`), a timer set meanwhile is queued then, and a
//! kill only flags it (`KILLED`) for the return to free.
//!
//! A picked shared task runs the same way under the shared queues' lock
//! only to take its callback out and to put it back; its callback runs
//! unlocked. The watchdog and profiling are told which callback runs
//! (by its interned name), so a stuck one is reported by name.

use super::types::{sf, Cb};
use super::Ctx;
use crate::activity::Activity;
use crate::shared::{gf, mono_ns, Shared};
use crate::task::{Class, Reasons, Status, TaskId, TaskletId, SHARED_THREAD};
use std::sync::atomic::Ordering;

impl Ctx {
    /// Runs one entry popped from a class list.
    pub(super) fn run_entry(&mut self, i: usize, class: Class) {
        let prof = self.prof_active;
        let start = if prof { mono_ns() } else { 0 };
        let (why, cb, pidx, wake_ns, gen, flags) = {
            let s = &mut self.slots[i];
            s.flags |= sf::RUNNING;
            let why = std::mem::take(&mut s.reasons);
            let cb = std::mem::replace(&mut s.cb, Cb::None);
            (
                why,
                cb,
                s.prof,
                std::mem::take(&mut s.wake_ns),
                s.gen,
                s.flags,
            )
        };
        let prev_cur = self.current;
        let prev_class = self.current_class;
        self.current = i as u32;
        self.current_class = Some(class);
        {
            let r = self.remote();
            crate::profile::bump(&r.progress, 1);
            r.cur_cb.store(u32::from(pidx), Ordering::Relaxed);
        }
        let mut pidx = pidx;
        let mut lat_from = wake_ns;
        match cb {
            Cb::Task(mut f) => {
                let id = TaskId {
                    thread: self.tid as u16,
                    slot: i as u32,
                    gen,
                };
                let st = f.run(self, id, why);
                self.after_task(i, st, Cb::Task(f));
                Activity::add(&self.remote().activity.tasksw, 1);
            }
            Cb::Tasklet(mut f) => {
                let id = TaskletId {
                    thread: self.tid as u16,
                    slot: i as u32,
                    gen,
                };
                let st = f.run(self, id, why);
                self.after_tasklet(i, st, Cb::Tasklet(f));
            }
            Cb::Proxy(gi, ggen) => {
                debug_assert!(flags & sf::PROXY != 0);
                drop(self.free_slot(i));
                if let Some((p, w)) = self.run_shared(gi, ggen) {
                    pidx = p;
                    lat_from = w;
                }
                Activity::add(&self.remote().activity.tasksw, 1);
            }
            Cb::None => {
                // Cannot happen: a queued live slot always holds its
                // callback. Free it rather than loop on it.
                drop(self.free_slot(i));
            }
        }
        self.current = prev_cur;
        self.current_class = prev_class;
        let r = self.remote();
        crate::profile::bump(&r.progress, 1);
        r.cur_cb.store(u32::MAX, Ordering::Relaxed);
        Activity::add(&r.activity.ctxsw, 1);
        if prof {
            let end = mono_ns();
            let lat = if lat_from != 0 {
                start.saturating_sub(lat_from)
            } else {
                0
            };
            r.prof.record(pidx, end - start, lat);
        }
    }

    pub(super) fn after_task(&mut self, i: usize, st: Status, cb: Cb) {
        let s = &mut self.slots[i];
        s.flags &= !sf::RUNNING;
        if st == Status::Done || s.flags & sf::KILLED != 0 {
            drop(self.free_slot(i));
            drop(cb);
            return;
        }
        s.cb = cb;
        if s.flags & sf::WOKEN_RUN != 0 {
            s.flags &= !sf::WOKEN_RUN;
            self.task_wake_local(i, Reasons::NONE);
        }
        self.queue_local(i);
    }

    pub(super) fn after_tasklet(&mut self, i: usize, st: Status, cb: Cb) {
        let s = &mut self.slots[i];
        s.flags &= !sf::RUNNING;
        if st == Status::Done || s.flags & sf::KILLED != 0 {
            drop(self.free_slot(i));
            drop(cb);
            return;
        }
        s.cb = cb;
        // A timer set by the callback is queued now that it returned.
        self.queue_local(i);
    }

    /// Runs a picked shared task; returns its profile index and wake date.
    pub(super) fn run_shared(&mut self, gi: u32, ggen: u32) -> Option<(u16, u64)> {
        let sh = self.shared.clone();
        let id = TaskId {
            thread: SHARED_THREAD,
            slot: gi,
            gen: ggen,
        };
        let (mut f, why, pidx, wake) = {
            let mut q = sh.lock_gq();
            let i = gi as usize;
            let s = q.slots.get_mut(i)?;
            if s.gen != ggen || s.flags & gf::LIVE == 0 {
                return None;
            }
            s.flags &= !gf::PICKED;
            if s.flags & gf::KILLED != 0 {
                let cb = sh.gq_free_locked(&mut q, i);
                sh.gq_publish(&q, self.now);
                drop(q);
                drop(cb);
                return None;
            }
            s.flags |= gf::RUNNING;
            s.flags &= !gf::WOKEN_RUN;
            let cb = s.cb.take()?;
            (cb, std::mem::take(&mut s.reasons), s.prof, s.wake_ns)
        };
        // The watchdog names the shared task, not its proxy.
        self.remote()
            .cur_cb
            .store(u32::from(pidx), Ordering::Relaxed);
        let st = f.run(self, id, why);
        let mut notify = None;
        let dropped = {
            let mut q = sh.lock_gq();
            let i = gi as usize;
            let s = &mut q.slots[i];
            s.flags &= !gf::RUNNING;
            let dropped = if st == Status::Done || s.flags & gf::KILLED != 0 {
                s.cb = Some(f);
                sh.gq_free_locked(&mut q, i)
            } else {
                s.cb = Some(f);
                if s.flags & gf::WOKEN_RUN != 0 {
                    s.flags &= !gf::WOKEN_RUN;
                    notify = sh.gq_wakeup_locked(&mut q, i, Reasons::NONE, self.prof_active);
                }
                Shared::gq_queue_locked(&mut q, i);
                None
            };
            sh.gq_publish(&q, self.now);
            dropped
        };
        drop(dropped);
        if let Some(m) = notify {
            sh.notify_mask(m);
        }
        Some((pidx, wake))
    }
}
