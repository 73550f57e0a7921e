//! # File descriptors and the poller
//!
//! Each thread owns an epoll instance. An fd is registered once per
//! connection, edge-triggered, for a tasklet: its epoll data is the fd
//! number and a generation, and the thread's table of fds names the
//! tasklet (its `(slot, generation)`) the events go to, as HAProxy's
//! `fdtab` names an fd's owner. An event for a freed tasklet or for an
//! earlier registration of the same number is a detected no-op; no
//! `epoll_ctl` is needed per request, nor when another tasklet of the
//! thread takes the fd over ([`Ctx::move_fd`]). An fd registered for
//! reading alone may watch writability later ([`Ctx::want_write`], one
//! `EPOLL_CTL_MOD` for the rest of its life). The thread's eventfd is
//! registered with a reserved token; other threads write it to wake this
//! one (see [`crate::notify`]).
//!
//! Before sleeping the thread announces it (the sleeping flag) and then
//! re-checks for work that another thread may have published meanwhile;
//! the poll timeout is 0 if work remains, else until the next timer + 1 ms
//! (`now` is truncated to the ms, so the +1 keeps a timer from being
//! polled for with a 0 timeout), at most [`MAX_POLL_MS`]. Events become
//! tasklet wakeups with [`Reasons::IO`] (urgent class), their bits
//! accumulated for `take_events`.

use super::types::{sf, FdEnt, Place, EFD_TOKEN, FD_LOG_MAX, MAX_POLL_MS};
use super::Ctx;
use crate::activity::Activity;
use crate::shared::mono_ns;
use crate::sys::Events;
use crate::task::{Reasons, TaskletId};
use crate::ticks;
use std::io;
use std::os::fd::RawFd;
use std::sync::atomic::Ordering;

impl Ctx {
    /// Registers `fd` with this thread's epoll, edge-triggered, for the
    /// tasklet `id`: readiness wakes it with [`Reasons::IO`] (urgent class)
    /// and [`Self::take_events`] tells what fired. `write` also watches
    /// writability. Once per connection: no further `epoll_ctl` is needed.
    pub fn register_fd(&mut self, fd: RawFd, id: TaskletId, write: bool) -> io::Result<()> {
        let owner = self.fd_data(id)?;
        let (data, prev) = self.fd_claim(fd, owner, write)?;
        self.epoll.add(fd, data, true, write).inspect_err(|_| {
            // (Registered already: that registration stays as it was.)
            self.fd_restore(fd, prev);
        })
    }

    /// Adds writability to the events `fd`'s registration watches (one
    /// `EPOLL_CTL_MOD`; nothing when it watches them already): HAProxy's
    /// `fd_want_send`. An fd may be registered for reading alone and
    /// watch writability only once a write would block, so an fd that
    /// is always writable (a short exchange's) is not reported at every
    /// change of its state (connect done, FIN acknowledged) with nothing
    /// to write. Readiness already there is reported at once (the
    /// modification re-arms the edge), so a write that blocked just
    /// before loses no edge. It stays watched until the fd is
    /// deregistered or closed.
    pub fn want_write(&mut self, fd: RawFd) -> io::Result<()> {
        let Some(e) = usize::try_from(fd).ok().and_then(|i| self.fds.get_mut(i)) else {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                "not registered",
            ));
        };
        if e.owner == FdEnt::NONE {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                "not registered",
            ));
        }
        if e.rw {
            return Ok(());
        }
        let data = (fd as u64) << 32 | u64::from(e.gen);
        self.epoll.modify(fd, data, true, true)?;
        e.rw = true;
        Ok(())
    }

    /// A new generation of `fd`'s entry, owned by `owner`: the epoll data
    /// to register it with, and the entry it replaced.
    fn fd_claim(&mut self, fd: RawFd, owner: u64, rw: bool) -> io::Result<(u64, FdEnt)> {
        let i = usize::try_from(fd)
            .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "not an fd"))?;
        if i >= self.fds.len() {
            self.fds.resize(i + 1, FdEnt::FREE);
        }
        let e = &mut self.fds[i];
        let prev = *e;
        *e = FdEnt {
            gen: prev.gen.wrapping_add(1),
            rw,
            owner,
        };
        Ok(((i as u64) << 32 | u64::from(e.gen), prev))
    }

    fn fd_restore(&mut self, fd: RawFd, prev: FdEnt) {
        if let Some(e) = usize::try_from(fd).ok().and_then(|i| self.fds.get_mut(i)) {
            *e = prev;
        }
    }

    /// Forgets `fd`'s owner (its registration is being removed).
    fn fd_forget(&mut self, fd: RawFd) {
        if let Some(e) = usize::try_from(fd).ok().and_then(|i| self.fds.get_mut(i)) {
            e.owner = FdEnt::NONE;
        }
    }

    /// The epoll data naming this thread's live tasklet `id`.
    fn fd_data(&self, id: TaskletId) -> io::Result<u64> {
        if self.tasklet_idx(id).is_none() {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                "not a live tasklet of this thread",
            ));
        }
        Ok((u64::from(id.slot) << 32) | u64::from(id.gen))
    }

    /// Forgets `fd`'s registration with no system call, for a caller
    /// that closes `fd` next and holds the socket's only descriptor: the
    /// close takes it out of the epoll set, as [`Self::deregister_fd`]'s
    /// `EPOLL_CTL_DEL` would. An event this thread already took for it
    /// still wakes its tasklet, which must tolerate that.
    pub fn forget_fd(&mut self, fd: RawFd) {
        self.fd_forget(fd);
    }

    /// Removes `fd` from this thread's epoll (before closing it).
    pub fn deregister_fd(&mut self, fd: RawFd) -> io::Result<()> {
        self.fd_forget(fd);
        self.epoll.delete(fd)
    }

    /// Removes `fd` from thread `thread`'s epoll: this thread takes over an
    /// fd another thread registered (an idle connection it leaves). The
    /// caller holds the fd open, so the number names that socket. That
    /// thread may still see one event already queued for it: its tasklet
    /// must tolerate a wakeup for an fd it gave up.
    pub fn deregister_fd_of(&mut self, thread: usize, fd: RawFd) -> io::Result<()> {
        if thread == self.tid {
            return self.deregister_fd(fd);
        }
        let Some(r) = self.shared.threads.get(thread) else {
            return Ok(());
        };
        let epfd = r.epfd.lock().unwrap_or_else(|p| p.into_inner());
        if *epfd < 0 {
            // That thread has no poller (any more): nothing to remove.
            return Ok(());
        }
        crate::sys::epoll_delete(*epfd, fd)
    }

    /// Hands `fd`, registered by thread `from` (an idle connection
    /// another tasklet left), to this thread's tasklet `id`, as
    /// [`Self::deregister_fd_of`] then [`Self::register_fd`] would. When
    /// `from` is this thread and the fd is registered here for at least
    /// what `write` asks (`false`: reading, whether or not writability is
    /// watched too, as [`Self::want_write`] may have added it), its entry
    /// in the thread's table names `id` from now on: no system call, and
    /// no readiness is reported again (the caller knows the socket's
    /// state: an idle connection, writable, nothing to read), but every
    /// later event goes to `id`. An event this thread already took for
    /// the old tasklet stays its own, which tolerates wakeups for an fd
    /// it gave up. Otherwise one `EPOLL_CTL_MOD` re-points the
    /// registration (pending readiness then wakes `id`).
    pub fn move_fd(
        &mut self,
        from: usize,
        fd: RawFd,
        id: TaskletId,
        write: bool,
    ) -> io::Result<()> {
        if from != self.tid {
            // Gone from there already (that poller closed) is no error.
            let _ = self.deregister_fd_of(from, fd);
            return self.register_fd(fd, id, write);
        }
        let owner = self.fd_data(id)?;
        let known = usize::try_from(fd).ok().and_then(|i| self.fds.get_mut(i));
        if let Some(e) = known.filter(|e| e.owner != FdEnt::NONE && (e.rw || !write)) {
            e.owner = owner;
            return Ok(());
        }
        let (data, prev) = self.fd_claim(fd, owner, write)?;
        self.epoll.modify(fd, data, true, write).inspect_err(|_| {
            self.fd_restore(fd, prev);
        })
    }

    /// The poll timeout for this turn: 0 if work remains, else until the
    /// next timer + 1 ms (`now` is truncated to the ms, so the +1 keeps a
    /// timer from being polled for with a 0 timeout), at most
    /// [`MAX_POLL_MS`].
    pub fn poll_timeout(&self) -> i32 {
        if self.remote().inbox.has_msg() {
            return 0;
        }
        self.sleep_timeout()
    }

    /// [`Self::poll_timeout`] without the look at the inbox: the turn's
    /// own, since its poll looks there anyway once the sleep is announced
    /// (`work_arrived`) and then does not sleep.
    pub(super) fn sleep_timeout(&self) -> i32 {
        if self.has_runnable() {
            return 0;
        }
        if self.should_exit() {
            return 0;
        }
        // The local queue's lower bound: a timer deleted or moved later
        // since costs one early wakeup, never a late one.
        let next = ticks::first(self.wq_low, self.shared.gq_wq_next.load(Ordering::Relaxed));
        match ticks::remain(self.now, next) {
            None => MAX_POLL_MS as i32,
            Some(0) => 0,
            Some(ms) => ms.saturating_add(1).min(MAX_POLL_MS) as i32,
        }
    }

    /// Whether another thread published work for us (re-check after
    /// announcing sleep; the announce's fence orders these loads).
    pub(super) fn work_arrived(&self) -> bool {
        self.remote().inbox.has_msg()
            || self.shared.gq_rq_threads.load(Ordering::SeqCst) & (1u64 << self.tid) != 0
            || (self.shared.stopping.load(Ordering::SeqCst) && !self.stop_seen)
            || self.shared.hard_stop.load(Ordering::SeqCst)
            || self.shared.isolating.load(Ordering::SeqCst) != 0
    }

    pub(super) fn poll(&mut self, mut timeout: i32) -> io::Result<()> {
        let mut announced = false;
        if timeout != 0 {
            self.me.sleep.announce_sleep();
            announced = true;
            if self.work_arrived() {
                timeout = 0;
            }
        }
        // The turn's accounting just read the clock: that is the start.
        let t0 = self.turn_end_ns;
        let r = &*self.me;
        r.harmless.store(true, Ordering::SeqCst);
        let res = self.epoll.wait(&mut self.events, timeout);
        self.shared.park_at(r, self.tid);
        if announced {
            r.sleep.awake();
        }
        if timeout != 0 {
            let end = mono_ns();
            Activity::add(&r.activity.idle_ns, end.saturating_sub(t0));
            self.woke_ns = end;
        }
        let n = res?;
        let mut fd_events = 0u64;
        for k in 0..n {
            let ev = self.events[k];
            let data = ev.u64;
            let bits = ev.events;
            if data == EFD_TOKEN {
                self.me.efd.drain()?;
                Activity::add(&self.me.activity.wake_signal, 1);
                continue;
            }
            fd_events += 1;
            let (fd, fd_gen) = ((data >> 32) as usize, data as u32);
            let owner = match self.fds.get(fd) {
                Some(e) if e.gen == fd_gen => e.owner,
                // An earlier registration of that number.
                _ => continue,
            };
            let (slot, gen) = ((owner >> 32) as u32, owner as u32);
            if let Some(i) = self.tasklet_idx_raw(slot, gen) {
                let sl = &mut self.slots[i];
                sl.events |= Events::from_epoll(bits);
                sl.io_seq = sl.io_seq.wrapping_add(1);
                if sl.flags & sf::FD_LOG != 0 {
                    if self.fd_log.len() < FD_LOG_MAX {
                        self.fd_log.push((i as u32, fd as RawFd));
                    } else {
                        self.fd_log_lost = true;
                    }
                }
                // Outside any callback: joins urgent.
                self.tasklet_wake_local(i, Reasons::IO, Place::Tail);
            }
        }
        let r = &*self.me;
        if fd_events != 0 {
            Activity::add(&r.activity.poll_io, 1);
            Activity::add(&r.activity.poll_events, fd_events);
        } else {
            Activity::add(&r.activity.poll_exp, 1);
        }
        Ok(())
    }
}
