//! A listener's own statistics (`option socket-stats`), held by each
//! connection accepted through it. A leaf module: `proxy` builds them,
//! `sample`'s per-connection store holds the guard, neither imports the
//! other for it.

use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::sync::Arc;

/// The statistics of one listener (`option socket-stats`): HAProxy's
/// `sock-N` rows of `show stat` and its `haproxy_listener_*` metrics.
#[derive(Debug)]
pub struct ListenerStats {
    /// The bind line's `name`, else `sock-N` (N: the listener's id).
    pub name: String,
    /// The listener's id in its frontend, from 1.
    pub luid: usize,
    /// Connections accepted through it and open now.
    pub cur: AtomicU32,
    /// The highest `cur` seen.
    pub max: AtomicU32,
    /// Connections accepted since start.
    pub total: AtomicU64,
}

impl ListenerStats {
    /// Counts a connection accepted through the listener; the connection
    /// holds the guard and the count drops when it is gone.
    pub fn accepted(self: &Arc<Self>) -> ListenerGuard {
        let n = self.cur.fetch_add(1, Ordering::Relaxed) + 1;
        self.max.fetch_max(n, Ordering::Relaxed);
        self.total.fetch_add(1, Ordering::Relaxed);
        ListenerGuard(Arc::clone(self))
    }
}

/// A connection open on a listener with statistics (see
/// [`ListenerStats::accepted`]).
#[derive(Debug)]
pub struct ListenerGuard(Arc<ListenerStats>);

impl Drop for ListenerGuard {
    fn drop(&mut self) {
        self.0.cur.fetch_sub(1, Ordering::Relaxed);
    }
}
