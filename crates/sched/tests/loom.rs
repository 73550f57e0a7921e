//! loom models of the two lock-free protocols: the MPSC inbox and the
//! sleeping/notified handshake. Built only with `--cfg loom`:
//!
//! ```text
//! RUSTFLAGS="--cfg loom" CARGO_TARGET_DIR=target/loom \
//!     cargo test -p sched --test loom --release
//! ```
//!
//! The library's own `src/inbox.rs` and `src/notify.rs` are compiled here
//! against a `sync` module that maps to loom's atomics and mutex, so the
//! models check the code the runtime runs. The ring and the lanes are
//! shrunk to 2 cells so that the models reach the spill and overflow paths.
#![cfg(loom)]

mod sync {
    pub(crate) use loom::sync::atomic::{fence, AtomicU32, AtomicU64, AtomicUsize, Ordering};
    pub(crate) use loom::sync::Mutex;
}

#[allow(dead_code)]
#[path = "../src/inbox.rs"]
mod inbox;

#[allow(dead_code)]
#[path = "../src/notify.rs"]
mod notify;

use inbox::{Inbox, Msg};
use loom::sync::atomic::{AtomicUsize, Ordering};
use loom::sync::Arc;
use loom::thread;
use notify::SleepState;

fn msg(v: u64) -> Msg {
    Msg { a: v, b: !v }
}

fn model(f: impl Fn() + Sync + Send + 'static) {
    let mut b = loom::model::Builder::new();
    // Three preemptions cover the interleavings of these small models
    // while keeping the run to seconds.
    b.preemption_bound = Some(3);
    b.check(f);
}

/// Two producers, one consumer popping concurrently: every message is
/// received exactly once, with its payload intact.
#[test]
fn inbox_two_producers_exactly_once() {
    model(|| {
        let q = Arc::new(Inbox::new(2));
        let p: Vec<_> = (0..2u64)
            .map(|t| {
                let q = q.clone();
                thread::spawn(move || q.push(msg(t + 1)))
            })
            .collect();
        let mut got = Vec::new();
        if let Some(m) = q.pop() {
            got.push(m);
        }
        for h in p {
            h.join().unwrap();
        }
        while let Some(m) = q.pop() {
            got.push(m);
        }
        got.sort_by_key(|m| m.a);
        assert_eq!(got, vec![msg(1), msg(2)]);
    });
}

/// More messages than cells: the overflow path keeps exactly-once.
#[test]
fn inbox_overflow_exactly_once() {
    model(|| {
        let q = Arc::new(Inbox::new(2));
        let q2 = q.clone();
        let p = thread::spawn(move || {
            q2.push(msg(1));
            q2.push(msg(2));
        });
        q.push(msg(3));
        let mut got = Vec::new();
        if let Some(m) = q.pop() {
            got.push(m);
        }
        p.join().unwrap();
        while let Some(m) = q.pop() {
            got.push(m);
        }
        got.sort_by_key(|m| m.a);
        assert_eq!(got, vec![msg(1), msg(2), msg(3)]);
    });
}

/// A worker's lane (single producer) of 2 cells, 3 messages: the third
/// spills to the shared ring; exactly once, payloads intact, with the
/// owner popping concurrently.
#[test]
fn lane_spsc_exactly_once_with_spill() {
    model(|| {
        let q = Arc::new(Inbox::with_lanes(2, 1, 2));
        let q2 = q.clone();
        let p = thread::spawn(move || {
            let Some(lane) = q2.claim_lane(0) else {
                panic!("lane 0 is free");
            };
            for v in 1..=3 {
                lane.push(msg(v));
            }
        });
        let mut got = Vec::new();
        let mut batch = Vec::new();
        q.pop_batch(&mut batch, 8);
        got.extend(batch.drain(..));
        p.join().unwrap();
        q.pop_batch(&mut batch, 8);
        got.extend(batch.drain(..));
        got.sort_by_key(|m| m.a);
        assert_eq!(got, vec![msg(1), msg(2), msg(3)]);
    });
}

/// The handshake through a lane: a lane message published before the
/// waker's check is seen by the sleeper's re-check, or the eventfd is
/// written.
#[test]
fn handshake_through_a_lane() {
    model(|| {
        let q = Arc::new(Inbox::with_lanes(2, 1, 2));
        let sleep = Arc::new(SleepState::new());
        let efd = Arc::new(AtomicUsize::new(0));
        let (q2, s2, e2) = (q.clone(), sleep.clone(), efd.clone());
        let waker = thread::spawn(move || {
            if let Some(lane) = q2.claim_lane(0) {
                lane.push(msg(9));
            }
            if s2.should_notify() {
                e2.fetch_add(1, Ordering::SeqCst);
            }
        });
        sleep.announce_sleep();
        let seen = q.has_msg();
        waker.join().unwrap();
        if !seen {
            assert_eq!(efd.load(Ordering::SeqCst), 1, "lost wakeup");
        }
        assert_eq!(q.pop(), Some(msg(9)));
    });
}

/// One waker, one would-be sleeper: a message is never left behind a
/// sleep without an eventfd write, and an awake thread is never signalled.
#[test]
fn handshake_no_lost_wakeup() {
    model(|| {
        let q = Arc::new(Inbox::new(2));
        let sleep = Arc::new(SleepState::new());
        let efd = Arc::new(AtomicUsize::new(0));
        let (q2, s2, e2) = (q.clone(), sleep.clone(), efd.clone());
        let waker = thread::spawn(move || {
            q2.push(msg(7));
            if s2.should_notify() {
                e2.fetch_add(1, Ordering::SeqCst);
            }
        });
        // The owner's turn: drain, then try to sleep.
        let mut got = q.pop().is_some();
        let mut announced = false;
        let mut slept = false;
        if !got {
            sleep.announce_sleep();
            announced = true;
            if q.has_msg() {
                sleep.awake();
            } else {
                slept = true;
            }
        }
        waker.join().unwrap();
        if slept {
            // Only an eventfd write can end this sleep.
            assert_eq!(efd.load(Ordering::SeqCst), 1, "lost wakeup");
            sleep.awake();
        }
        if !announced {
            assert_eq!(efd.load(Ordering::SeqCst), 0, "awake thread signalled");
        }
        if !got {
            got = q.pop().is_some();
        }
        assert!(got);
    });
}

/// Two wakers of one sleeping thread: exactly one eventfd write.
#[test]
fn handshake_one_write_per_sleep() {
    model(|| {
        let q = Arc::new(Inbox::new(2));
        let sleep = Arc::new(SleepState::new());
        let efd = Arc::new(AtomicUsize::new(0));
        sleep.announce_sleep();
        let wakers: Vec<_> = (0..2u64)
            .map(|t| {
                let (q, s, e) = (q.clone(), sleep.clone(), efd.clone());
                thread::spawn(move || {
                    q.push(msg(t));
                    if s.should_notify() {
                        e.fetch_add(1, Ordering::SeqCst);
                    }
                })
            })
            .collect();
        let early = q.has_msg();
        for w in wakers {
            w.join().unwrap();
        }
        let _ = early;
        assert_eq!(efd.load(Ordering::SeqCst), 1);
        sleep.awake();
        assert!(q.pop().is_some() && q.pop().is_some());
    });
}

/// A NOTIFIED bit left while the thread was awake does not survive into
/// its next sleep: the next waker still writes the eventfd.
#[test]
fn handshake_stale_notified_is_cleared() {
    model(|| {
        let sleep = Arc::new(SleepState::new());
        let efd = Arc::new(AtomicUsize::new(0));
        let q = Arc::new(Inbox::new(2));
        // First sleep, notified, then awake.
        sleep.announce_sleep();
        assert!(sleep.should_notify());
        sleep.awake();
        // Second sleep, racing with a waker.
        let (q2, s2, e2) = (q.clone(), sleep.clone(), efd.clone());
        let w = thread::spawn(move || {
            q2.push(msg(1));
            if s2.should_notify() {
                e2.fetch_add(1, Ordering::SeqCst);
            }
        });
        sleep.announce_sleep();
        let seen = q.has_msg();
        w.join().unwrap();
        if !seen {
            assert_eq!(efd.load(Ordering::SeqCst), 1, "lost wakeup");
        }
    });
}
