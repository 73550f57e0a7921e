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

use sched::{Ctx, TaskletId, Tick};

use crate::backend::ServerRt;
use crate::registry::Sessions;
pub use crate::registry::Shared;

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
    /// Variable stores of client connections, likewise (see
    /// [`crate::sample::vars::ConnVars`]).
    vars: FreeList<Box<RefCell<crate::sample::VarStore>>>,
    /// Idle client connections of this thread that kept their stream and
    /// variables (at most [`WARM_IDLE_MAX`]; see [`Worker::warm_idle`]).
    warm: std::cell::Cell<usize>,
    /// The fields of the error answers a client connection builds itself,
    /// reused (the answer is written at once).
    pub(crate) error_fields: std::cell::Cell<crate::stream::msg::FieldBuf>,
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
    /// This thread's index (its idle server connections' list).
    pub thread: usize,
    /// The tasklet this thread's idle server connections stay registered
    /// with once their client left (see [`crate::backend::pool`]).
    pub idle_watch: Option<TaskletId>,
    /// The frontend whose access line comes next: `logging(fe)` sets it,
    /// `log_access` takes it (the two are called in that order).
    log_fe: RefCell<Option<Arc<str>>>,
}

/// A thread's free list of one kind of reusable allocation: `take` pops
/// one or makes a new one, `give` keeps one back while the list holds
/// fewer than [`MAX_FREE_BUFS`] and the caller says it is worth keeping
/// (it was not grown for an unusually large message).
pub(crate) struct FreeList<T> {
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
    pub(crate) fn take(&self, make: impl FnOnce() -> T) -> T {
        let reused = self.free.borrow_mut().pop();
        reused.unwrap_or_else(make)
    }

    pub(crate) fn give(&self, item: T, keep: bool) {
        let mut free = self.free.borrow_mut();
        if keep && free.len() < MAX_FREE_BUFS {
            free.push(item);
        }
    }
}

/// Idle client connections per thread that keep their exchange state (a
/// stream, a variables' store) instead of giving it to the pools: a busy
/// keep-alive connection then skips clearing it and taking it back at
/// every request (HAProxy frees its stream at every transaction end),
/// while thousands of idle connections still hold none. Bounds the memory
/// this costs to this many states per thread, whatever the number of
/// connections. Past it, a connection going idle gives its
/// state to the pools as before: the saving (about 300 instructions per
/// request) is for a thread's first 64 idle connections only.
pub const WARM_IDLE_MAX: usize = 64;

/// One of a thread's [`WARM_IDLE_MAX`] places for an idle connection
/// that keeps its exchange state: given back when dropped (the
/// connection is busy again, or gone).
pub struct WarmPlace(std::rc::Rc<Worker>);

impl Drop for WarmPlace {
    fn drop(&mut self) {
        let w = &self.0.warm;
        w.set(w.get().saturating_sub(1));
    }
}

impl Worker {
    /// A client connection goes idle: a place to keep its exchange state
    /// in, if the thread has one left.
    pub fn warm_idle(w: &std::rc::Rc<Worker>) -> Option<WarmPlace> {
        let n = w.warm.get();
        if n >= WARM_IDLE_MAX {
            return None;
        }
        w.warm.set(n + 1);
        Some(WarmPlace(std::rc::Rc::clone(w)))
    }

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
            vars: FreeList::default(),
            warm: std::cell::Cell::new(0),
            error_fields: Default::default(),
            files: RefCell::new(FileCache::new()),
            pool,
            limits,
            shared,
            sessions,
            heavy_enabled: true,
            paused: RefCell::new(Vec::new()),
            thread: 0,
            idle_watch: None,
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

    /// A cleared variable store for an exchange, from the pool when
    /// possible.
    pub(crate) fn take_vars(&self) -> Box<RefCell<crate::sample::VarStore>> {
        self.vars.take(Box::default)
    }

    /// Gives a cleared variable store back.
    pub(crate) fn give_vars(&self, v: Box<RefCell<crate::sample::VarStore>>, keep: bool) {
        self.vars.give(v, keep);
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

    /// An idle connection to `s` that `want` allows (this thread's own
    /// first), with whether it is safe ([`crate::backend::pool`]).
    pub fn take_idle(
        &self,
        s: &ServerRt,
        want: crate::backend::pool::Want,
        key: &[u8],
        quiet: &dyn Fn(sched::TaskletId, u32) -> bool,
    ) -> Option<crate::backend::pool::Taken> {
        self.shared.idle.take(self.thread, s, want, key, quiet)
    }

    /// Closes the idle connections of this thread's lists that their
    /// servers' purge timers gave it to close; run once a second by the
    /// thread's purge task.
    pub fn purge_idle(&self, now: Tick) -> usize {
        self.shared.idle.purge(self.thread, now)
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

    /// An access line at syslog `level`, to the targets of the frontend
    /// last passed to [`Worker::logging`].
    pub fn log_access(&self, line: Vec<u8>, level: u8) {
        self.log_access_sd(line, None, level);
    }

    /// [`Worker::log_access`] with the line's RFC 5424 structured data
    /// (the frontend's `log-format-sd`, [`FrontendRt::log_sd`]).
    pub fn log_access_sd(&self, line: Vec<u8>, sd: Option<Vec<u8>>, level: u8) {
        let cur = self.log_fe.borrow();
        let sd = sd.as_deref();
        match cur.as_deref().and_then(|n| self.shared.fe_loggers.get(n)) {
            Some(l) => l.send_sd(level, &line, sd),
            None => self.shared.logger.send_sd(level, &line, sd),
        }
    }

    /// A line about one of `fe`'s connections (a request refused or timed
    /// out, a TLS failure): to the frontend's log targets, as its access
    /// lines and as HAProxy sends them; for a frontend that logs nothing,
    /// as [`Worker::log_error_at`].
    pub fn log_fe_error(&self, fe: &FrontendRt, line: Vec<u8>, level: u8) {
        self.log_fe_error_sd(fe, line, None, level);
    }

    /// [`Worker::log_fe_error`] with the line's RFC 5424 structured data.
    pub fn log_fe_error_sd(&self, fe: &FrontendRt, line: Vec<u8>, sd: Option<Vec<u8>>, level: u8) {
        if self.logging(fe) {
            self.log_access_sd(line, sd, level);
        } else if self.shared.logger.is_empty() {
            self.log_error_at(line, level);
        } else {
            self.shared.logger.send_sd(level, &line, sd.as_deref());
        }
    }

    /// A request refused or timed out: to the log, or to stderr when no log
    /// target is configured, so a malformed request never goes unseen.
    pub fn log_error(&self, line: Vec<u8>) {
        self.log_error_at(line, crate::log::LOG_INFO);
    }

    /// [`Worker::log_error`] at syslog `level` (`err` for a frontend with
    /// `option log-separate-errors`).
    pub fn log_error_at(&self, line: Vec<u8>, level: u8) {
        if self.shared.logger.is_empty() {
            if self.shared.errors_to_stderr {
                crate::log::Sink::Stderr.line(line);
            }
        } else {
            self.shared.logger.send(level, &line);
        }
    }
}
