//! A listener's own counters, held by each connection accepted through
//! it: the statistics of `option socket-stats` and the limit of the bind
//! line's `maxconn`. A leaf module: `proxy` builds them, the accepting
//! listener takes a place before it accepts, `sample`'s per-connection
//! store holds the guard, none imports another for it.
//!
//! A place is taken before `accept4`, with a compare-and-swap against
//! the limit, as HAProxy's `listener_accept` raises `nbconn`: the threads
//! each accept from their own socket of the same listener, and two of
//! them racing for the last place cannot both take it.

use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};
use std::sync::Arc;

/// The counters of one listener (each address, each other socket of a
/// bind line): HAProxy's `sock-N` rows of `show stat`, its
/// `haproxy_listener_*` metrics, and its `maxconn`.
#[derive(Debug)]
pub struct ListenerStats {
    /// The bind line's `name`, else `sock-N` (N: the listener's id).
    pub name: String,
    /// The listener's id in its frontend, from 1.
    pub luid: usize,
    /// The bind line's `maxconn` (0: none).
    pub maxconn: u32,
    /// Whether `show stat` and the exporter show the listener (`option
    /// socket-stats`); without it the counters only keep `maxconn`.
    pub shown: bool,
    /// Connections accepted through it and open now (and places taken
    /// for connections being accepted).
    pub cur: AtomicU32,
    /// The highest `cur` seen.
    pub max: AtomicU32,
    /// Connections accepted since start.
    pub total: AtomicU64,
    /// Whether accepting waits on a limit that is not the listener's own
    /// (the frontend's or the process's `maxconn`): HAProxy's WAITING.
    pub limited: AtomicBool,
}

impl ListenerStats {
    pub fn new(name: String, luid: usize, maxconn: u32, shown: bool) -> ListenerStats {
        ListenerStats {
            name,
            luid,
            maxconn,
            shown,
            cur: AtomicU32::new(0),
            max: AtomicU32::new(0),
            total: AtomicU64::new(0),
            limited: AtomicBool::new(false),
        }
    }

    /// Whether the listener is at its `maxconn` (HAProxy's FULL).
    pub fn full(&self) -> bool {
        self.maxconn != 0 && self.cur.load(Ordering::Relaxed) >= self.maxconn
    }

    /// Takes a place for a connection about to be accepted; `None` when
    /// `maxconn` places are taken (the connection stays in the backlog)
    /// and `over` is false. `over`: a place even beyond the limit (a
    /// stopping listener takes what the kernel already queued).
    pub fn reserve(self: &Arc<Self>, over: bool) -> Option<Place> {
        let mut cur = self.cur.load(Ordering::Relaxed);
        loop {
            if !over && self.maxconn != 0 && cur >= self.maxconn {
                return None;
            }
            match self
                .cur
                .compare_exchange_weak(cur, cur + 1, Ordering::Relaxed, Ordering::Relaxed)
            {
                Ok(_) => return Some(Place(ListenerGuard(Arc::clone(self)), cur + 1)),
                Err(now) => cur = now,
            }
        }
    }
}

/// A place taken on a listener before `accept4`: given back when dropped
/// (nothing was waiting), or turned into the connection's guard.
#[derive(Debug)]
pub struct Place(ListenerGuard, u32);

impl Place {
    /// The place's connection was accepted: it counts, and holds the
    /// place until it is gone.
    pub fn accepted(self) -> ListenerGuard {
        let l = &(self.0).0;
        l.max.fetch_max(self.1, Ordering::Relaxed);
        l.total.fetch_add(1, Ordering::Relaxed);
        self.0
    }
}

/// A connection open on a listener (see [`ListenerStats::reserve`]).
#[derive(Debug)]
pub struct ListenerGuard(Arc<ListenerStats>);

impl Drop for ListenerGuard {
    fn drop(&mut self) {
        self.0.cur.fetch_sub(1, Ordering::Relaxed);
    }
}
