//! What one thread shares among its connections: the `Date` cache, a pool
//! of I/O buffers, the open-file cache, connection accounting and the
//! listeners paused at `maxconn`.
//!
//! A [`Worker`] lives in an `Rc` on its thread; connections and listeners
//! of that thread hold clones. Nothing here is touched by another thread
//! except through the atomics of [`Shared`].

use std::cell::RefCell;
use std::sync::atomic::Ordering;
use std::sync::Arc;

use std::collections::HashMap;

use sched::{ticks, Ctx, TaskletId, Tick};

use crate::backend::ServerRt;
use crate::registry::Sessions;
pub use crate::registry::Shared;
use crate::transport::Transport;

use crate::blocking::Submitter;
use crate::http1::{DateCache, Limits};
use crate::proxy::FrontendRt;
use crate::serve::cache::FileCache;

/// Buffers kept per thread for reuse; more are freed. 256 buffers of the
/// default 16 KiB is 4 MiB per thread, enough for that many connections
/// moving data at once without touching the allocator.
const MAX_FREE_BUFS: usize = 256;

/// Fields a pooled header index has room for before it grows.
const HEAD_FIELDS: usize = 16;

/// One thread's shared state.
pub struct Worker {
    pub date: RefCell<DateCache>,
    pub bufsize: usize,
    /// Read buffers (length `bufsize`) for reuse.
    bufs: FreeList<Vec<u8>>,
    /// Output vectors (length 0, capacity `bufsize`) for reuse.
    wbufs: FreeList<Vec<u8>>,
    /// Header indexes of request heads, kept while their connections idle.
    heads: FreeList<Vec<crate::http1::HeaderSpan>>,
    pub files: RefCell<FileCache>,
    pub pool: Submitter,
    pub limits: Limits,
    pub shared: Arc<Shared>,
    /// Every thread's connections, for the CLI.
    pub sessions: Arc<Sessions>,
    /// `tune.heavy-tasklets`: whether TLS handshakes run as heavy tasklets.
    pub heavy_enabled: bool,
    /// Listeners of this thread that stopped accepting at a limit.
    paused: RefCell<Vec<TaskletId>>,
    /// Idle server connections of this thread, by server uid: (socket,
    /// idle since), newest last.
    idle: RefCell<HashMap<u64, Vec<Idle>>>,
    /// The frontend whose access line comes next: `logging(fe)` sets it,
    /// `log_access` takes it (the two are called in that order).
    log_fe: RefCell<Option<Arc<str>>>,
}

/// An idle server connection: the socket, since when, and its server's
/// `pool-purge-delay` in ms.
type Idle = (Transport, Tick, u32);

/// Idle connections kept per server and thread when `pool-max-conn` is not
/// set: enough for the concurrency one thread drives on this machine size,
/// and a bound on the descriptors an unlimited setting could pin.
const DEFAULT_POOL_MAX: usize = 1024;

/// A thread's free list of one kind of reusable allocation: `take` pops
/// one or makes a new one, `give` keeps one back while the list holds
/// fewer than [`MAX_FREE_BUFS`] and the caller says it is worth keeping
/// (it was not grown for an unusually large message).
struct FreeList<T> {
    free: RefCell<Vec<T>>,
}

impl<T> Default for FreeList<T> {
    fn default() -> Self {
        FreeList {
            free: RefCell::new(Vec::new()),
        }
    }
}

impl<T> FreeList<T> {
    fn take(&self, make: impl FnOnce() -> T) -> T {
        let reused = self.free.borrow_mut().pop();
        reused.unwrap_or_else(make)
    }

    fn give(&self, item: T, keep: bool) {
        let mut free = self.free.borrow_mut();
        if keep && free.len() < MAX_FREE_BUFS {
            free.push(item);
        }
    }
}

impl Worker {
    pub fn new(
        bufsize: usize,
        pool: Submitter,
        limits: Limits,
        shared: Arc<Shared>,
        sessions: Arc<Sessions>,
    ) -> Worker {
        Worker {
            date: RefCell::new(DateCache::new()),
            bufsize,
            bufs: FreeList::default(),
            wbufs: FreeList::default(),
            heads: FreeList::default(),
            files: RefCell::new(FileCache::new()),
            pool,
            limits,
            shared,
            sessions,
            heavy_enabled: true,
            paused: RefCell::new(Vec::new()),
            idle: RefCell::new(HashMap::new()),
            log_fe: RefCell::new(None),
        }
    }

    /// A zeroed buffer of `bufsize` bytes, from the pool when possible.
    pub fn get_buf(&self) -> Vec<u8> {
        self.bufs.take(|| vec![0; self.bufsize])
    }

    /// Gives a buffer back.
    pub fn put_buf(&self, b: Vec<u8>) {
        let keep = b.len() == self.bufsize;
        self.bufs.give(b, keep);
    }

    /// An empty output vector with room for a buffer's worth.
    pub fn get_wbuf(&self) -> Vec<u8> {
        self.wbufs.take(|| Vec::with_capacity(self.bufsize))
    }

    /// Gives an output vector back (one that grew far past a buffer, for
    /// a large answer, is freed instead).
    pub fn put_wbuf(&self, mut b: Vec<u8>) {
        let keep = b.capacity() <= 4 * self.bufsize;
        b.clear();
        self.wbufs.give(b, keep);
    }

    /// An empty header index with room for a typical request's fields.
    pub fn get_head_index(&self) -> Vec<crate::http1::HeaderSpan> {
        self.heads.take(|| Vec::with_capacity(HEAD_FIELDS))
    }

    /// Gives a header index back (one grown for a request with many
    /// fields is freed instead).
    pub fn put_head_index(&self, mut h: Vec<crate::http1::HeaderSpan>) {
        let keep = h.capacity() <= 4 * HEAD_FIELDS;
        h.clear();
        self.heads.give(h, keep);
    }

    /// Whether a frontend may accept one more connection now.
    pub fn may_accept(&self, fe: &FrontendRt) -> bool {
        self.shared.actconn.load(Ordering::Relaxed) < self.shared.maxconn
            && fe
                .maxconn
                .is_none_or(|m| fe.conns.load(Ordering::Relaxed) < m)
    }

    /// Remembers a listener that stopped at a limit, to wake it when a
    /// connection of this thread closes.
    pub fn pause_listener(&self, id: TaskletId) {
        let mut p = self.paused.borrow_mut();
        if !p.contains(&id) {
            p.push(id);
        }
    }

    /// A `-d` debug line on stderr.
    pub fn debug(&self, line: impl FnOnce() -> String) {
        if self.shared.debug {
            eprintln!("ebb: debug: {}", line());
        }
    }

    pub fn conn_opened(&self, fe: &FrontendRt) {
        self.shared.actconn.fetch_add(1, Ordering::Relaxed);
        fe.conns.fetch_add(1, Ordering::Relaxed);
    }

    pub fn conn_closed(&self, ctx: &mut Ctx, fe: &FrontendRt) {
        self.shared.actconn.fetch_sub(1, Ordering::Relaxed);
        fe.conns.fetch_sub(1, Ordering::Relaxed);
        for id in self.paused.borrow_mut().drain(..) {
            ctx.tasklet_wakeup(id);
        }
    }

    /// An idle connection to `s` that is still open, newest first; closed
    /// ones found on the way are dropped.
    pub fn take_idle(&self, s: &ServerRt, now: Tick) -> Option<Transport> {
        let mut idle = self.idle.borrow_mut();
        let list = idle.get_mut(&s.uid)?;
        let purge = s
            .opts
            .pool_purge_delay
            .as_millis()
            .min(u32::MAX as u128 / 2) as u32;
        while let Some((mut st, since, _)) = list.pop() {
            if ticks::is_expired(ticks::add(since, purge), now) {
                continue;
            }
            if crate::backend::alive(&mut st) && s.still_there(&st) {
                return Some(st);
            }
        }
        None
    }

    /// Keeps an idle connection to `s` for a later request.
    pub fn put_idle(&self, s: &ServerRt, st: Transport, now: Tick) {
        let max = s
            .opts
            .pool_max_conn
            .map_or(DEFAULT_POOL_MAX, |m| m as usize);
        if max == 0 || !s.still_there(&st) {
            return;
        }
        let mut idle = self.idle.borrow_mut();
        let list = idle.entry(s.uid).or_default();
        if list.len() >= max {
            list.remove(0);
        }
        let purge = s
            .opts
            .pool_purge_delay
            .as_millis()
            .min(u32::MAX as u128 / 2) as u32;
        list.push((st, now, purge));
    }

    /// Closes idle connections older than their server's
    /// `pool-purge-delay`; run periodically by the thread's purge task.
    pub fn purge_idle(&self, now: Tick) -> usize {
        let mut n = 0;
        let mut idle = self.idle.borrow_mut();
        for list in idle.values_mut() {
            let before = list.len();
            list.retain(|(_, since, d)| !ticks::is_expired(ticks::add(*since, *d), now));
            n += before - list.len();
        }
        idle.retain(|_, l| !l.is_empty());
        n
    }

    pub fn actconn(&self) -> u32 {
        self.shared.actconn.load(Ordering::Relaxed)
    }

    /// Whether this frontend's requests are logged.
    pub fn logging(&self, fe: &FrontendRt) -> bool {
        if !fe.log {
            // No lookup by name for a frontend that logs nothing.
            return false;
        }
        match self.shared.fe_loggers.get(fe.name.as_str()) {
            Some(l) if fe.log && !l.is_empty() => {
                let mut cur = self.log_fe.borrow_mut();
                if cur.as_deref() != Some(fe.name.as_str()) {
                    *cur = Some(Arc::from(fe.name.as_str()));
                }
                true
            }
            _ => false,
        }
    }

    /// An access line, to the targets of the frontend last passed to
    /// [`Worker::logging`].
    pub fn log_access(&self, line: Vec<u8>) {
        let cur = self.log_fe.borrow();
        match cur.as_deref().and_then(|n| self.shared.fe_loggers.get(n)) {
            Some(l) => l.line(line),
            None => self.shared.logger.line(line),
        }
    }

    /// A request refused or timed out: to the log, or to stderr when no log
    /// target is configured, so a malformed request never goes unseen.
    pub fn log_error(&self, line: Vec<u8>) {
        if self.shared.logger.is_empty() {
            if self.shared.errors_to_stderr {
                crate::log::Sink::Stderr.line(line);
            }
        } else {
            self.shared.logger.line(line);
        }
    }
}
