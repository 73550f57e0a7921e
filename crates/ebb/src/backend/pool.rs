//! Idle HTTP/1 server connections, shared by the threads of the process
//! as HAProxy 2.6 shares them (`tune.idle-pool.shared on`, its default).
//!
//! Each thread has its own list per server, behind a lock only another
//! thread looking for a connection takes (with `try_lock`, skipping a
//! busy list): a thread uses its own idle connections first and takes
//! one of another thread only when its own list has none that fits.
//!
//! Every idle connection of a server holds an [`IdleTicket`], counted in
//! [`ServerRt::idle_conns`] against its `pool-max-conn`: those in the
//! lists and those kept for their client's next request (a stream's
//! attached connection). A connection that finds the pool full is closed,
//! as HAProxy closes one its server's idle list refuses.
//!
//! A connection is *safe* once it carried a request after its first one
//! (it proved the server keeps connections open): `http-reuse aggressive`
//! and `always` send a client's first request over safe ones first.

use std::collections::HashMap;
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex, MutexGuard};

use sched::{ticks, Tick};

use super::ServerRt;
use crate::transport::{Movable, Transport};

/// Idle connections a thread keeps per server when `pool-max-conn` is
/// not set: a bound on the descriptors an unlimited setting could pin.
const DEFAULT_THREAD_MAX: usize = 1024;

/// One idle connection counted in its server's pool.
pub struct IdleTicket(Arc<ServerRt>);

impl Drop for IdleTicket {
    fn drop(&mut self) {
        self.0.idle_conns.fetch_sub(1, Ordering::AcqRel);
    }
}

impl ServerRt {
    /// A place in the server's idle pool, or `None` when `pool-max-conn`
    /// idle connections are there already.
    pub fn idle_ticket(self: &Arc<Self>) -> Option<IdleTicket> {
        let max = self.opts.pool_max_conn.unwrap_or(u32::MAX);
        self.idle_conns
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |n| {
                (n < max).then_some(n + 1)
            })
            .ok()
            .map(|_| IdleTicket(Arc::clone(self)))
    }

    /// Idle connections to this server now (all threads, with those kept
    /// for their clients).
    pub fn idle_count(&self) -> u32 {
        self.idle_conns.load(Ordering::Acquire)
    }
}

/// Which idle connections a request may take (`http-reuse`, and whether
/// it is its client's first request).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Want {
    /// Any, the not yet safe ones first (they are kept from first
    /// requests): a later request.
    Any,
    /// Safe ones only (`aggressive`, a first request).
    Safe,
    /// Safe ones, else any (`always`, a first request).
    SafeFirst,
}

struct Entry {
    conn: Movable,
    since: Tick,
    /// The server's `pool-purge-delay` in ms.
    purge: u32,
    safe: bool,
    /// Holds the server's count until the entry leaves the pool.
    _ticket: IdleTicket,
}

type Lists = HashMap<u64, Vec<Entry>>;

/// The idle lists of every thread.
pub struct IdlePools {
    threads: Box<[Mutex<Lists>]>,
    /// `tune.idle-pool.shared`: a thread may take another's connections.
    shared: bool,
}

impl IdlePools {
    pub fn new(nbthread: usize, shared: bool) -> IdlePools {
        IdlePools {
            threads: (0..nbthread.max(1))
                .map(|_| Mutex::new(HashMap::new()))
                .collect(),
            shared,
        }
    }

    fn lists(&self, thread: usize) -> Option<MutexGuard<'_, Lists>> {
        let m = self.threads.get(thread)?;
        Some(m.lock().unwrap_or_else(|p| p.into_inner()))
    }

    /// Keeps an idle connection to `s` (whose place `ticket` holds) in
    /// `thread`'s list. A lane is not kept.
    pub fn put(
        &self,
        thread: usize,
        s: &ServerRt,
        st: Transport,
        safe: bool,
        ticket: IdleTicket,
        now: Tick,
    ) {
        let Some(conn) = st.into_movable() else {
            return;
        };
        let Some(mut lists) = self.lists(thread) else {
            return;
        };
        let list = lists.entry(s.uid).or_default();
        if s.opts.pool_max_conn.is_none() && list.len() >= DEFAULT_THREAD_MAX {
            list.remove(0);
        }
        list.push(Entry {
            conn,
            since: now,
            purge: purge_ms(s),
            safe,
            _ticket: ticket,
        });
    }

    /// An open idle connection to `s` that `want` allows, with whether it
    /// is safe: `thread`'s own first, then (pool shared) another
    /// thread's. Closed or expired ones found on the way are dropped.
    pub fn take(
        &self,
        thread: usize,
        s: &ServerRt,
        want: Want,
        now: Tick,
    ) -> Option<(Transport, bool)> {
        let classes: &[Class] = match want {
            Want::Any => &[Class::Any],
            Want::Safe => &[Class::Safe],
            Want::SafeFirst => &[Class::Safe, Class::Any],
        };
        for &class in classes {
            if let Some(found) = self.take_class(thread, s, class, now) {
                return Some(found);
            }
        }
        None
    }

    fn take_class(
        &self,
        thread: usize,
        s: &ServerRt,
        class: Class,
        now: Tick,
    ) -> Option<(Transport, bool)> {
        // Its own list, locked (only another thread looking competes).
        while let Some(e) = self
            .lists(thread)
            .and_then(|mut l| pop(&mut l, s, class, now))
        {
            if let Some(found) = usable(e, s) {
                return Some(found);
            }
        }
        if !self.shared || s.idle_count() == 0 {
            return None;
        }
        let n = self.threads.len();
        for i in (1..n).map(|k| (thread + k) % n) {
            let Some(m) = self.threads.get(i) else {
                continue;
            };
            loop {
                // A list in use by its thread is skipped, never waited for.
                let e = match m.try_lock() {
                    Ok(mut l) => pop(&mut l, s, class, now),
                    Err(_) => None,
                };
                let Some(e) = e else {
                    break;
                };
                if let Some(found) = usable(e, s) {
                    return Some(found);
                }
            }
        }
        None
    }

    /// Closes `thread`'s idle connections older than their server's
    /// `pool-purge-delay` (its purge task runs this once a second).
    pub fn purge(&self, thread: usize, now: Tick) -> usize {
        let Some(mut lists) = self.lists(thread) else {
            return 0;
        };
        let mut n = 0;
        for list in lists.values_mut() {
            let before = list.len();
            list.retain(|e| !expired(e, now));
            n += before - list.len();
        }
        lists.retain(|_, l| !l.is_empty());
        n
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Class {
    /// Not yet safe ones first, then safe ones.
    Any,
    Safe,
}

fn purge_ms(s: &ServerRt) -> u32 {
    s.opts
        .pool_purge_delay
        .as_millis()
        .min(u32::MAX as u128 / 2) as u32
}

fn expired(e: &Entry, now: Tick) -> bool {
    ticks::is_expired(ticks::add(e.since, e.purge), now)
}

/// Takes the newest entry for `s` of `class` out of a list (expired ones
/// of that server are dropped first).
fn pop(lists: &mut Lists, s: &ServerRt, class: Class, now: Tick) -> Option<Entry> {
    let list = lists.get_mut(&s.uid)?;
    list.retain(|e| !expired(e, now));
    let pick = |safe: bool| list.iter().rposition(|e| e.safe == safe);
    let at = match class {
        Class::Safe => pick(true),
        Class::Any => pick(false).or_else(|| pick(true)),
    }?;
    Some(list.remove(at))
}

/// The connection of an entry taken from a list, if it is still open and
/// still goes to the server's address (its ticket is given back).
fn usable(e: Entry, s: &ServerRt) -> Option<(Transport, bool)> {
    let mut st = Transport::from(e.conn);
    (super::alive(&mut st) && s.still_there(&st)).then_some((st, e.safe))
}
