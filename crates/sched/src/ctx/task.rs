//! # Tasks
//!
//! A task has a priority (nice), a timer and a thread binding: this thread
//! (its state need not be `Send`) or any thread of a mask (a *shared* task,
//! whose state must be `Send`, kept in the shared queues under their lock).
//!
//! Waking a local task inserts it in the run-queue tree with key
//! `rq_ticks + nice * depth` (a wrapping insertion counter, so FIFO among
//! equal nice; a negative nice jumps ahead by that many turns' worth of
//! wakeups, HAProxy's formula). The tree is read from `rq_ticks - 2^31` in
//! circular order (see `turn`). Waking a task already queued only ORs the
//! reason in; waking a running task records the reason and requeues it
//! when the callback returns. A task of another thread is woken through
//! its owner's inbox, a shared one under the shared queues' lock.

use super::types::{sf, Cb};
use super::Ctx;
use crate::shared::{gf, mono_ns, GSlot, Shared};
use crate::task::{Reasons, Status, TaskFn, TaskId, SHARED_THREAD};
use crate::ticks::ETERNITY;
use std::sync::atomic::Ordering;

impl Ctx {
    /// Creates a task bound to this thread from a closure (not queued, no
    /// timer).
    pub fn new_task<F>(&mut self, name: &'static str, f: F) -> TaskId
    where
        F: FnMut(&mut Ctx, TaskId, Reasons) -> Status + 'static,
    {
        self.new_task_obj(name, f)
    }

    /// Creates a task bound to this thread from any [`TaskFn`].
    pub fn new_task_obj(&mut self, name: &'static str, f: impl TaskFn) -> TaskId {
        let prof = self.intern(name);
        let i = self.alloc(sf::LIVE | sf::TASK, prof, Cb::Task(Box::new(f)));
        TaskId {
            thread: self.tid as u16,
            slot: i as u32,
            gen: self.slots[i].gen,
        }
    }

    /// Creates a task that may run on any thread of `mask` (bit n = thread
    /// n; bits beyond the runtime's threads are ignored). Its state must be
    /// `Send`. It lives in the shared queues, under their lock.
    pub fn new_shared_task<F>(&mut self, name: &'static str, mask: u64, f: F) -> TaskId
    where
        F: FnMut(&mut Ctx, TaskId, Reasons) -> Status + Send + 'static,
    {
        self.new_shared_task_obj(name, mask, f)
    }

    /// Creates a shared task from any `TaskFn + Send`.
    pub fn new_shared_task_obj(
        &mut self,
        name: &'static str,
        mask: u64,
        f: impl TaskFn + Send,
    ) -> TaskId {
        let prof = self.intern(name);
        new_shared_task(&self.shared, prof, mask, Box::new(f))
    }

    /// Whether `id` names a live task (of this thread, or shared).
    pub fn task_alive(&self, id: TaskId) -> bool {
        if id.is_shared() {
            return self.shared.lock_gq().idx(id).is_some();
        }
        self.task_idx(id).is_some()
    }

    /// Sets a task's nice value (clamped to -1024..=1024); applies at its
    /// next wakeup.
    pub fn set_nice(&mut self, id: TaskId, nice: i32) {
        let n = nice.clamp(-1024, 1024) as i16;
        if id.is_shared() {
            let mut q = self.shared.lock_gq();
            if let Some(i) = q.idx(id) {
                q.slots[i].nice = n;
            }
        } else if let Some(i) = self.task_idx(id) {
            self.slots[i].nice = n;
        }
    }

    /// Wakes a task with `why` (any thread's or shared). Queued: the reason
    /// is ORed in. Running: requeued when its callback returns.
    pub fn wakeup(&mut self, id: TaskId, why: Reasons) {
        if id.thread as usize == self.tid {
            if let Some(i) = self.task_idx(id) {
                self.task_wake_local(i, why);
            }
        } else {
            self.shared.wake_task(id, why);
        }
    }

    pub(super) fn task_wake_local(&mut self, i: usize, why: Reasons) {
        let depth = self.depth;
        let s = &mut self.slots[i];
        s.reasons |= why;
        if s.flags & sf::RUNNING != 0 {
            s.flags |= sf::WOKEN_RUN;
            return;
        }
        if s.rq.is_some() || s.flags & sf::IN_LIST != 0 {
            return;
        }
        if self.prof_active {
            s.wake_ns = mono_ns();
        }
        let mut key = self.rq_ticks;
        self.rq_ticks = self.rq_ticks.wrapping_add(1);
        if s.nice != 0 {
            // HAProxy: a niced task moves by nice * runqueue-depth positions.
            key = key.wrapping_add((i32::from(s.nice) * depth as i32) as u32);
            self.niced += 1;
        }
        let h = self.rq.insert(key, i as u32);
        self.slots[i].rq = Some(h);
        self.count_queued(i, true);
    }

    /// Kills a task: freed now, or when its callback returns if running.
    /// Shared tasks held by another thread are freed by that thread.
    pub fn kill(&mut self, id: TaskId) {
        if id.is_shared() {
            kill_shared(&self.shared, id);
            return;
        }
        if let Some(i) = self.task_idx(id) {
            if self.slots[i].flags & sf::RUNNING != 0 {
                self.slots[i].flags |= sf::KILLED;
            } else {
                drop(self.free_slot(i));
            }
        }
    }
}

/// Creates a shared task (any thread, or the runtime handle).
pub(crate) fn new_shared_task(
    sh: &Shared,
    prof: u16,
    mask: u64,
    f: Box<dyn TaskFn + Send>,
) -> TaskId {
    let all = if sh.nbthread() >= 64 {
        u64::MAX
    } else {
        (1u64 << sh.nbthread()) - 1
    };
    let mask = if mask & all == 0 { all } else { mask & all };
    let mut q = sh.lock_gq();
    let slot = GSlot {
        gen: 0,
        flags: gf::LIVE,
        mask,
        prof,
        nice: 0,
        reasons: Reasons::NONE,
        expire: ETERNITY,
        rq: None,
        wq: None,
        wake_ns: 0,
        cb: Some(f),
    };
    let i = match q.free.pop() {
        Some(i) => {
            let gen = q.slots[i as usize].gen;
            q.slots[i as usize] = GSlot { gen, ..slot };
            i as usize
        }
        None => {
            q.slots.push(slot);
            q.slots.len() - 1
        }
    };
    sh.gq_live.fetch_add(1, Ordering::SeqCst);
    TaskId {
        thread: SHARED_THREAD,
        slot: i as u32,
        gen: q.slots[i].gen,
    }
}

/// Kills a shared task from any thread.
pub(crate) fn kill_shared(sh: &Shared, id: TaskId) {
    let now = sh.now_tick();
    let cb = {
        let mut q = sh.lock_gq();
        let Some(i) = q.idx(id) else {
            return;
        };
        if q.slots[i].flags & (gf::RUNNING | gf::PICKED) != 0 {
            q.slots[i].flags |= gf::KILLED;
            None
        } else {
            let cb = sh.gq_free_locked(&mut q, i);
            sh.gq_publish(&q, now);
            cb
        }
    };
    drop(cb);
}
