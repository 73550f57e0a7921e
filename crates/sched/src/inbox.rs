//! # The cross-thread inbox (lock-free MPSC)
//!
//! Every thread owns one [`Inbox`]. Any thread may push into it (a wakeup
//! aimed at a task or tasklet this thread owns); only the owner pops, at the
//! top of each loop turn. No other thread ever touches the owner's trees or
//! lists: the inbox is the only door.
//!
//! ## Structure
//!
//! A bounded ring of cells after Dmitry Vyukov's bounded MPMC queue, reduced
//! to one consumer:
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

/// A multi-producer, single-consumer queue of [`Msg`].
pub struct Inbox {
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
    /// two, at least 2).
    pub fn new(cap: usize) -> Inbox {
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
            cells,
            mask: cap - 1,
            tail: CachePadded::new(AtomicUsize::new(0)),
            head: CachePadded::new(AtomicUsize::new(0)),
            overflow_len: AtomicUsize::new(0),
            overflow: Mutex::new(Vec::new()),
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

    /// Takes the oldest published message; owner thread only.
    pub fn pop(&self) -> Option<Msg> {
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
