//! Counters that every request moves, kept per thread and summed when
//! read (a leaf module: it imports nothing of the crate).
//!
//! A process-wide atomic that each thread adds to at every request makes
//! its cache line travel between the cores at every request: with two
//! threads answering, each `fetch_add` then waits for the line the other
//! core last wrote. [`PerThread`] gives each thread a copy of its own, on
//! lines of its own; a reader (the stats page, `show stat`, `show info`,
//! the Prometheus exporter) adds the copies up, so the totals stay what
//! one shared counter would show. HAProxy 2.6 shares one atomic per
//! counter; this is the usual way to do better.
//!
//! A thread takes a slot the first time it counts; threads past the
//! number of slots share one (still correct: each copy is an atomic, a
//! shared slot is only not a private line).

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::OnceLock;

/// The most slots a [`PerThread`] holds (threads beyond share slots).
const MAX_SLOTS: usize = 64;

/// How many slots each [`PerThread`] holds: one per CPU the process may
/// run on (at most [`MAX_SLOTS`]); worker threads beyond that number
/// could not run at once anyway.
fn slots() -> usize {
    static N: OnceLock<usize> = OnceLock::new();
    *N.get_or_init(|| {
        std::thread::available_parallelism()
            .map_or(1, |n| n.get())
            .clamp(1, MAX_SLOTS)
    })
}

/// This thread's slot (taken at its first count).
#[inline]
fn thread_slot() -> usize {
    static NEXT: AtomicUsize = AtomicUsize::new(0);
    thread_local! {
        static SLOT: std::cell::Cell<usize> = const { std::cell::Cell::new(usize::MAX) };
    }
    SLOT.with(|s| {
        let v = s.get();
        if v != usize::MAX {
            return v;
        }
        let v = NEXT.fetch_add(1, Ordering::Relaxed) % slots();
        s.set(v);
        v
    })
}

/// One copy, on cache lines of its own.
#[repr(align(64))]
#[derive(Default)]
struct Padded<T>(T);

/// A `T` of counters per thread slot (see the module's text).
pub struct PerThread<T> {
    copies: Box<[Padded<T>]>,
}

impl<T: Default> Default for PerThread<T> {
    fn default() -> Self {
        PerThread {
            copies: (0..slots()).map(|_| Padded::default()).collect(),
        }
    }
}

impl<T> PerThread<T> {
    /// The calling thread's copy (the one to count in).
    #[inline]
    pub fn local(&self) -> &T {
        match self.copies.get(thread_slot()) {
            Some(p) => &p.0,
            // Not reached: every one has slots() copies, at least one.
            None => &self.copies[0].0,
        }
    }

    /// Every thread's copy (to add up, or to clear).
    pub fn all(&self) -> impl Iterator<Item = &T> {
        self.copies.iter().map(|p| &p.0)
    }

    /// The sum over the copies of what `f` reads from one.
    pub fn sum(&self, f: impl Fn(&T) -> u64) -> u64 {
        self.all().map(f).fold(0u64, u64::wrapping_add)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::AtomicU64;
    use std::sync::Arc;

    #[test]
    fn copies_add_up_across_threads() {
        let c: Arc<PerThread<AtomicU64>> = Arc::new(PerThread::default());
        let hs: Vec<_> = (0..8)
            .map(|_| {
                let c = Arc::clone(&c);
                std::thread::spawn(move || {
                    for _ in 0..1000 {
                        c.local().fetch_add(1, Ordering::Relaxed);
                    }
                })
            })
            .collect();
        for h in hs {
            h.join().unwrap();
        }
        assert_eq!(c.sum(|a| a.load(Ordering::Relaxed)), 8000);
        for a in c.all() {
            a.store(0, Ordering::Relaxed);
        }
        assert_eq!(c.sum(|a| a.load(Ordering::Relaxed)), 0);
    }

    #[test]
    fn a_copy_has_lines_of_its_own() {
        assert_eq!(std::mem::align_of::<Padded<AtomicU64>>(), 64);
        assert_eq!(std::mem::size_of::<Padded<AtomicU64>>(), 64);
    }
}
