//! # The cross-thread inbox (lock-free MPSC)
//!
//! Every thread owns one [`Inbox`]. Any thread may push into it (a wakeup
//! aimed at a task or tasklet this thread owns); only the owner pops, at the
//! top of each loop turn. No other thread ever touches the owner's trees or
//! lists: the inbox is the only door.
//!
//! ## Lanes: one single-producer ring per sending worker
//!
//! Between the runtime's own threads (the common case: worker A wakes a
//! tasklet of worker B), the inbox of B holds one **lane** per worker: a
//! single-producer single-consumer ring that only A writes and only B
//! reads. A push is two relaxed stores and one release store of `tail`, no
//! read-modify-write at all; the owner reads each lane's `tail` once per
//! drain and publishes `head` once per lane. The producer re-reads `head`
//! only when its cached copy says the lane is full. A worker's identity
//! comes from a thread-local set when its `Ctx` is created, so no caller
//! can name a lane it does not own (lanes are crate-private).
//!
//! ```text
//!   lane[A]: head (B) ........ tail (A)     one per sending worker
//!   lane[C]: head (B) ........ tail (C)
//!   ring   : Vyukov MPSC, for other threads and full lanes
//!   overflow: Mutex<Vec>, for a full ring
//! ```
//!
//! ## The shared ring
//!
//! Threads that are not workers of the runtime (a signal thread, the
//! CLI's), and workers whose lane is full, use a bounded ring of cells
//! after Dmitry Vyukov's bounded MPMC queue, reduced to one consumer:
//!
//! ```text
//!   head (owner only)          tail (producers, CAS)
//!     |                          |
//!   [seq=h+1 | msg][seq=h+2 | msg][seq=t | empty][seq=t+1-cap | old]...
//! ```
//!
//! A producer claims position `t` by CAS on `tail` when the cell's `seq`
//! equals `t`, writes the message words, then publishes with
//! `seq = t + 1` (release). The owner pops position `h` when its cell shows
//! `seq == h + 1` (acquire), reads the message and frees the cell for the
//! next lap with `seq = h + cap` (release). Messages are two `u64` words held
//! in atomics, so the ring needs no `unsafe` and no allocation per message.
//!
//! A full ring does not block or fail: the message goes to an overflow
//! `Mutex<Vec>`, counted by an atomic so that the owner only takes the lock
//! when something is there. The ring is sized (see [`DEFAULT_CAPACITY`]) so
//! that overflow needs a burst of thousands of cross-thread wakeups within
//! one loop turn. Order between a ring message and an overflow message is
//! not kept; wakeups carry no order, only *exactly once*.
//!
//! A producer that claimed a cell but has not yet published it hides the
//! cells behind it until it does. That cannot lose a wakeup: every
//! producer notifies the owner (see [`crate::notify`]) after its own
//! publication, so the owner is woken again once the slow producer is done.

use crate::sync::{AtomicU64, AtomicUsize, Mutex, Ordering};
use crossbeam_utils::CachePadded;

/// Cells per lane: 256 cells of 16 bytes = 4 KiB per (sender, receiver)
/// pair, so 1 MiB in all at 16 threads. A sender's turn runs at most
/// `runqueue-depth` callbacks (<= 280); a burst larger than a lane within
/// one receiver turn spills to the shared ring, which is slower but never
/// loses or blocks.
pub const DEFAULT_LANE_CAPACITY: usize = 256;

/// Cells per inbox ring: 1024 cells of 32 bytes = 32 KiB per thread. A
/// loop turn runs at most `runqueue-depth` (<= 280 by default) entries, so
/// a peer has to wake about 4 turns' worth of this thread's work before
/// spilling to the overflow lock.
pub const DEFAULT_CAPACITY: usize = 1024;

/// One message: two opaque words (the scheduler packs an id and reasons).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Msg {
    /// First word.
    pub a: u64,
    /// Second word.
    pub b: u64,
}

struct Cell {
    /// Lap-tagged sequence number (Vyukov): `pos` = free for position
    /// `pos`, `pos + 1` = holds the message of position `pos`.
    seq: AtomicUsize,
    a: AtomicU64,
    b: AtomicU64,
}

/// A single-producer, single-consumer ring: one sending worker's lane.
struct Lane {
    /// Next position to write. INVARIANT: only the lane's producer stores.
    tail: CachePadded<AtomicUsize>,
    /// Next position to read. INVARIANT: only the owner stores.
    head: CachePadded<AtomicUsize>,
    /// The producer's last view of `head` (producer only).
    head_cache: CachePadded<AtomicUsize>,
    a: Box<[AtomicU64]>,
    b: Box<[AtomicU64]>,
    mask: usize,
    /// Held by a [`LaneProducer`] (public API); the runtime's own pushes
    /// do not use it (their single producer is the worker itself).
    claimed: AtomicUsize,
}

impl Lane {
    fn new(cap: usize) -> Lane {
        let cap = cap.max(2).next_power_of_two();
        Lane {
            tail: CachePadded::new(AtomicUsize::new(0)),
            head: CachePadded::new(AtomicUsize::new(0)),
            head_cache: CachePadded::new(AtomicUsize::new(0)),
            a: (0..cap).map(|_| AtomicU64::new(0)).collect(),
            b: (0..cap).map(|_| AtomicU64::new(0)).collect(),
            mask: cap - 1,
            claimed: AtomicUsize::new(0),
        }
    }

    /// Owner: takes one message.
    fn pop_one(&self) -> Option<Msg> {
        let h = self.head.load(Ordering::Relaxed);
        if self.tail.load(Ordering::Acquire) == h {
            return None;
        }
        let i = h & self.mask;
        let m = Msg {
            a: self.a[i].load(Ordering::Relaxed),
            b: self.b[i].load(Ordering::Relaxed),
        };
        self.head.store(h.wrapping_add(1), Ordering::Release);
        Some(m)
    }

    /// Producer: appends `m` unless the lane is full (returns false).
    #[inline]
    fn push(&self, m: Msg) -> bool {
        let t = self.tail.load(Ordering::Relaxed);
        let cap = self.mask + 1;
        if t.wrapping_sub(self.head_cache.load(Ordering::Relaxed)) >= cap {
            let h = self.head.load(Ordering::Acquire);
            self.head_cache.store(h, Ordering::Relaxed);
            if t.wrapping_sub(h) >= cap {
                return false;
            }
        }
        let i = t & self.mask;
        self.a[i].store(m.a, Ordering::Relaxed);
        self.b[i].store(m.b, Ordering::Relaxed);
        self.tail.store(t.wrapping_add(1), Ordering::Release);
        true
    }

    /// Owner: moves up to `max` messages to `out`.
    #[inline]
    fn drain(&self, out: &mut Vec<Msg>, max: usize) -> usize {
        let h = self.head.load(Ordering::Relaxed);
        let t = self.tail.load(Ordering::Acquire);
        let n = t.wrapping_sub(h).min(max);
        for k in 0..n {
            let i = h.wrapping_add(k) & self.mask;
            out.push(Msg {
                a: self.a[i].load(Ordering::Relaxed),
                b: self.b[i].load(Ordering::Relaxed),
            });
        }
        if n != 0 {
            // Release: the reads above happen before the producer reuses
            // these cells (it loads `head` with acquire).
            self.head.store(h.wrapping_add(n), Ordering::Release);
        }
        n
    }

    fn has_msg(&self) -> bool {
        self.tail.load(Ordering::SeqCst) != self.head.load(Ordering::Relaxed)
    }
}

/// A multi-producer, single-consumer queue of [`Msg`].
pub struct Inbox {
    /// One SPSC lane per sending worker (may be empty).
    lanes: Box<[Lane]>,
    cells: Box<[Cell]>,
    mask: usize,
    /// Next position to claim (producers). Padded apart from `head` so
    /// that producers and the owner do not bounce one cache line.
    tail: CachePadded<AtomicUsize>,
    /// Next position to pop. INVARIANT: only the owner thread touches it
    /// (an atomic only so that the type is `Sync` without `unsafe`).
    head: CachePadded<AtomicUsize>,
    /// Number of messages in `overflow`, read without the lock.
    overflow_len: AtomicUsize,
    overflow: Mutex<Vec<Msg>>,
}

impl Inbox {
    /// An inbox whose ring holds `cap` messages (rounded up to a power of
    /// two, at least 2), with no lanes.
    pub fn new(cap: usize) -> Inbox {
        Self::with_lanes(cap, 0, 0)
    }

    /// An inbox with a shared ring of `cap` cells and `lanes` single-producer
    /// lanes of `lane_cap` cells each.
    pub fn with_lanes(cap: usize, lanes: usize, lane_cap: usize) -> Inbox {
        let mut q = Self::ring_only(cap);
        q.lanes = (0..lanes).map(|_| Lane::new(lane_cap)).collect();
        q
    }

    fn ring_only(cap: usize) -> Inbox {
        let cap = cap.max(2).next_power_of_two();
        let cells = (0..cap)
            .map(|i| Cell {
                seq: AtomicUsize::new(i),
                a: AtomicU64::new(0),
                b: AtomicU64::new(0),
            })
            .collect::<Vec<_>>()
            .into_boxed_slice();
        Inbox {
            lanes: Box::new([]),
            cells,
            mask: cap - 1,
            tail: CachePadded::new(AtomicUsize::new(0)),
            head: CachePadded::new(AtomicUsize::new(0)),
            overflow_len: AtomicUsize::new(0),
            overflow: Mutex::new(Vec::new()),
        }
    }

    /// Appends a message through lane `lane`. INVARIANT (the caller's): only
    /// one thread ever pushes through a given lane; the runtime uses the
    /// sending worker's own number. A full or missing lane falls back to
    /// [`Self::push`].
    pub(crate) fn push_lane(&self, lane: usize, m: Msg) {
        match self.lanes.get(lane) {
            Some(l) if l.push(m) => {}
            _ => self.push(m),
        }
    }

    /// Appends a message; any thread. Never blocks on the ring; takes the
    /// overflow lock only when the ring is full.
    pub fn push(&self, m: Msg) {
        let mut pos = self.tail.load(Ordering::Relaxed);
        loop {
            let cell = &self.cells[pos & self.mask];
            let seq = cell.seq.load(Ordering::Acquire);
            let dif = seq.wrapping_sub(pos) as isize;
            if dif == 0 {
                match self.tail.compare_exchange_weak(
                    pos,
                    pos.wrapping_add(1),
                    Ordering::Relaxed,
                    Ordering::Relaxed,
                ) {
                    Ok(_) => {
                        cell.a.store(m.a, Ordering::Relaxed);
                        cell.b.store(m.b, Ordering::Relaxed);
                        cell.seq.store(pos.wrapping_add(1), Ordering::Release);
                        return;
                    }
                    Err(p) => pos = p,
                }
            } else if dif < 0 {
                // The cell still holds last lap's message: the ring is full.
                self.push_overflow(m);
                return;
            } else {
                pos = self.tail.load(Ordering::Relaxed);
            }
        }
    }

    #[cold]
    #[inline(never)]
    fn push_overflow(&self, m: Msg) {
        let mut v = match self.overflow.lock() {
            Ok(g) => g,
            Err(p) => p.into_inner(),
        };
        v.push(m);
        self.overflow_len.fetch_add(1, Ordering::Release);
    }

    /// Claims lane `lane` for the calling thread: the returned producer is
    /// the lane's only writer until dropped. `None` if the lane does not
    /// exist or is held.
    pub fn claim_lane(&self, lane: usize) -> Option<LaneProducer<'_>> {
        let l = self.lanes.get(lane)?;
        l.claimed
            .compare_exchange(0, 1, Ordering::Acquire, Ordering::Relaxed)
            .ok()?;
        Some(LaneProducer { inbox: self, lane })
    }

    /// Takes one message (lanes first, then the ring, then the overflow);
    /// owner thread only.
    pub fn pop(&self) -> Option<Msg> {
        for l in self.lanes.iter() {
            if let Some(m) = l.pop_one() {
                return Some(m);
            }
        }
        let pos = self.head.load(Ordering::Relaxed);
        let cell = &self.cells[pos & self.mask];
        if cell.seq.load(Ordering::Acquire) == pos.wrapping_add(1) {
            let m = Msg {
                a: cell.a.load(Ordering::Relaxed),
                b: cell.b.load(Ordering::Relaxed),
            };
            cell.seq
                .store(pos.wrapping_add(self.mask + 1), Ordering::Release);
            self.head.store(pos.wrapping_add(1), Ordering::Relaxed);
            return Some(m);
        }
        if self.overflow_len.load(Ordering::Acquire) != 0 {
            return self.pop_overflow();
        }
        None
    }

    #[cold]
    #[inline(never)]
    fn pop_overflow(&self) -> Option<Msg> {
        let mut v = match self.overflow.lock() {
            Ok(g) => g,
            Err(p) => p.into_inner(),
        };
        let m = v.pop();
        if m.is_some() {
            self.overflow_len.fetch_sub(1, Ordering::Release);
        }
        m
    }

    /// Pops up to `max` messages into `out` (owner thread only): the ring's
    /// published messages, then, if the ring ran dry and something
    /// overflowed, the whole overflow at once (one lock for the batch).
    /// Returns how many were added.
    pub fn pop_batch(&self, out: &mut Vec<Msg>, max: usize) -> usize {
        let start = out.len();
        for l in self.lanes.iter() {
            let room = max - (out.len() - start);
            if room == 0 {
                break;
            }
            l.drain(out, room);
        }
        let mut pos = self.head.load(Ordering::Relaxed);
        while out.len() - start < max {
            let cell = &self.cells[pos & self.mask];
            if cell.seq.load(Ordering::Acquire) != pos.wrapping_add(1) {
                break;
            }
            out.push(Msg {
                a: cell.a.load(Ordering::Relaxed),
                b: cell.b.load(Ordering::Relaxed),
            });
            cell.seq
                .store(pos.wrapping_add(self.mask + 1), Ordering::Release);
            pos = pos.wrapping_add(1);
        }
        self.head.store(pos, Ordering::Relaxed);
        if out.len() - start < max && self.overflow_len.load(Ordering::Acquire) != 0 {
            self.pop_overflow_all(out);
        }
        out.len() - start
    }

    #[cold]
    #[inline(never)]
    fn pop_overflow_all(&self, out: &mut Vec<Msg>) {
        let mut v = match self.overflow.lock() {
            Ok(g) => g,
            Err(p) => p.into_inner(),
        };
        let n = v.len();
        out.append(&mut v);
        self.overflow_len.fetch_sub(n, Ordering::Release);
    }

    /// Whether a message is ready to pop; owner thread only. Used for the
    /// re-check after announcing sleep, after a `SeqCst` fence.
    pub fn has_msg(&self) -> bool {
        let pos = self.head.load(Ordering::Relaxed);
        let cell = &self.cells[pos & self.mask];
        cell.seq.load(Ordering::SeqCst) == pos.wrapping_add(1)
            || self.overflow_len.load(Ordering::SeqCst) != 0
            || self.lanes.iter().any(Lane::has_msg)
    }
}

/// The single writer of one lane of an [`Inbox`], until dropped.
pub struct LaneProducer<'a> {
    inbox: &'a Inbox,
    lane: usize,
}

impl LaneProducer<'_> {
    /// Appends a message through the lane (the shared ring if it is full).
    #[inline]
    pub fn push(&self, m: Msg) {
        self.inbox.push_lane(self.lane, m);
    }
}

impl Drop for LaneProducer<'_> {
    fn drop(&mut self) {
        if let Some(l) = self.inbox.lanes.get(self.lane) {
            l.claimed.store(0, Ordering::Release);
        }
    }
}

impl std::fmt::Debug for Inbox {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Inbox")
            .field("cap", &(self.mask + 1))
            .field("head", &self.head.load(Ordering::Relaxed))
            .field("tail", &self.tail.load(Ordering::Relaxed))
            .finish()
    }
}
