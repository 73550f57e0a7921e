//! The tables of a configuration and what one connection tracks in them
//! (HAProxy's `stkctr`s): `track-sc0|1|2`, the counters the exchange's
//! events update, `sc-inc-gpc0` and `sc-set-gpt0`.
//!
//! A connection owns one [`Stk`]. Trackers come in two levels, as in
//! HAProxy: *session* trackers (`tcp-request connection|session
//! track-scN`, held for the connection's life, see
//! [`Stk::track_session`]) and *stream* trackers (`http-request` and
//! `tcp-request content track-scN`, held until the exchange ends, see
//! [`Stk::track`]). A fetch of counter N reads the stream's tracker
//! first, then the session's (HAProxy's `smp_fetch_sc_stkctr`).
//!
//! Events and what they count (each on every tracked entry that stores
//! the type):
//! - tracking starts: `conn_cur` +1, `conn_cnt`, `conn_rate`; for a
//!   session tracker also `sess_cnt`, `sess_rate`; for a stream tracker
//!   in HTTP also `http_req_cnt`, `http_req_rate` (the request being
//!   analysed is counted when tracking starts, as HAProxy does; for a
//!   backend's `tcp-request content` tracker, when the backend's HTTP
//!   rules begin: [`Stk::count_backend_request`]);
//! - a request begins ([`Stk::begin`]): `http_req_cnt`, `http_req_rate`
//!   on the session trackers;
//! - the exchange ends ([`Stk::end`]): `http_err_cnt`, `http_err_rate`
//!   if the request was denied or tarpitted ([`Stk::note_error`]) or a
//!   server answered a 4xx (HAProxy's list; ebb's own `return` answers
//!   do not count, whatever their status), `bytes_in_*`, `bytes_out_*`;
//!   then the stream trackers are released (`conn_cur` -1);
//! - the connection ends (drop): the session trackers are released.

use std::cell::{Cell, RefCell};
use std::sync::Arc;

use super::{Data, EntryRef, StKey, Table};

/// Whether a proxied HTTP exchange counts as a failure in
/// `http_fail_cnt` and `http_fail_rate`, as HAProxy 2.6 defines it: the
/// server answered a 5xx other than 501 and 505, or it failed once
/// connected (an invalid, truncated or missing response head, a body cut,
/// a server timeout: termination states `SH`, `sH`, `SD`, `sD`). `term`
/// is the log's termination state (`--` when nothing failed). Failures
/// before a server connection exists (`SC`, `SQ`: ebb's 503) and the
/// answers ebb makes itself are not counted.
pub fn http_failure(status: u16, term: &str) -> bool {
    match term.as_bytes() {
        [b'S' | b's', b'H' | b'D', ..] => true,
        [b'S' | b's' | b'P', ..] => false,
        _ => (500..600).contains(&status) && status != 501 && status != 505,
    }
}

/// Every stick table of a configuration, by name (a proxy's name).
#[derive(Default)]
pub struct Tables {
    list: Vec<Arc<Table>>,
}

impl Tables {
    pub fn new(list: Vec<Arc<Table>>) -> Tables {
        Tables { list }
    }

    /// The table called `name`.
    pub fn get(&self, name: &str) -> Option<&Arc<Table>> {
        self.list.iter().find(|t| t.def().name == name)
    }

    pub fn iter(&self) -> std::slice::Iter<'_, Arc<Table>> {
        self.list.iter()
    }

    pub fn is_empty(&self) -> bool {
        self.list.is_empty()
    }

    /// Runs every table's expiry at `now`; returns the tick to run again
    /// at (None: no table expires anything). A table with nothing queued
    /// asks to be looked at again `expire` from now: an entry created
    /// after this call expires no sooner than that, so nothing is missed
    /// and no entry is scanned before its time.
    pub fn expire(&self, now: u32) -> Option<u32> {
        let mut next: Option<u32> = None;
        for t in &self.list {
            let Some(e) = t.def().expire else { continue };
            let at = t.expire(now).unwrap_or(now.wrapping_add(e));
            next = Some(match next {
                Some(n) if (n.wrapping_sub(at) as i32) <= 0 => n,
                _ => at,
            });
        }
        next
    }
}

/// A tracked entry.
struct Tracker {
    table: Arc<Table>,
    entry: EntryRef,
    /// Its HTTP request is yet to be counted (see
    /// [`Stk::count_backend_request`]).
    later: bool,
    /// Started by an `http-response` rule, which counted the answer's
    /// error or failure then ([`Stk::track_response`]): the exchange's end
    /// counts neither again.
    counted: bool,
}

/// The keys a stream stores once its server is known (HAProxy keeps up
/// to 8); filled and stored by the `stick` rules.
#[derive(Default)]
pub struct Pending {
    pub(crate) keys: Vec<(Arc<Table>, StKey)>,
}

/// The trackers of one level (`track-sc0` to `sc2`), made at the first
/// one: a connection that tracks nothing holds no room for them.
type Level = RefCell<Option<Box<[Option<Tracker>; 3]>>>;

/// Runs `f` on each tracker of `level`.
fn each(level: &Level, mut f: impl FnMut(&Tracker)) {
    if let Some(l) = level.borrow().as_deref() {
        l.iter().flatten().for_each(&mut f);
    }
}

/// Takes each tracker out of `level` (its room is kept).
fn take_each(level: &Level, mut f: impl FnMut(Tracker)) {
    if let Some(l) = level.borrow_mut().as_deref_mut() {
        l.iter_mut().filter_map(Option::take).for_each(&mut f);
    }
}

/// What a connection tracks, and the date of the exchange under way.
pub struct Stk {
    tables: Arc<Tables>,
    now: Cell<u32>,
    /// The exchange under way was refused (deny, tarpit): an HTTP error.
    err: Cell<bool>,
    /// `stick` rules: the server a `match` found, the keys to store.
    /// (An index in its backend: 32 bits keep the connection's state
    /// small.)
    pub(crate) prefer: Cell<Option<u32>>,
    /// `prefer` must take the request even when down (`option persist`,
    /// `force-persist`: whether by the rule).
    pub(crate) prefer_force: Cell<Option<bool>>,
    pub(crate) pending: RefCell<Pending>,
    sess: Level,
    strm: Level,
    /// The session trackers are another `Stk`'s (see [`Stk::share_session`]):
    /// counted on, never released here.
    sess_shared: bool,
}

fn stop(t: Tracker, now: u32) {
    t.table.finish(t.entry, &[], true, now);
}

impl Stk {
    /// A connection's trackers (none yet) over the configuration's tables.
    pub fn new(tables: Arc<Tables>) -> Stk {
        Stk {
            tables,
            now: Cell::new(0),
            err: Cell::new(false),
            prefer: Cell::new(None),
            prefer_force: Cell::new(None),
            pending: RefCell::default(),
            sess: RefCell::new(None),
            strm: RefCell::new(None),
            sess_shared: false,
        }
    }

    /// The trackers of one stream of a connection that carries several
    /// (an HTTP/2 stream's lane): the connection's session trackers, read
    /// and counted on as HAProxy's streams do, and stream trackers of its
    /// own. The connection's `Stk` holds the session trackers' references
    /// and releases them when the connection ends; it must outlive this one.
    pub fn share_session(&self) -> Stk {
        let mut s = Stk::new(Arc::clone(&self.tables));
        *s.sess.get_mut() = self.sess.borrow().as_deref().map(|l| {
            Box::new(l.each_ref().map(|t| {
                t.as_ref().map(|t| Tracker {
                    table: Arc::clone(&t.table),
                    entry: t.entry,
                    later: false,
                    counted: false,
                })
            }))
        });
        s.sess_shared = true;
        s
    }

    /// Whether nothing is tracked or pending: the trackers of a new
    /// connection, apart from the date (an idle connection then keeps
    /// none, see `mux::h1::client`).
    pub fn is_clear(&self) -> bool {
        !self.err.get()
            && !self.sess_shared
            && self.prefer.get().is_none()
            && self.prefer_force.get().is_none()
            && self.pending.try_borrow().is_ok_and(|p| p.keys.is_empty())
            && self.sess.try_borrow().is_ok_and(|l| l.is_none())
            && self
                .strm
                .try_borrow()
                .is_ok_and(|l| l.as_deref().is_none_or(|l| l.iter().all(Option::is_none)))
    }

    pub fn tables(&self) -> &Tables {
        &self.tables
    }

    /// The date rules and fetches of the current exchange use.
    pub fn now(&self) -> u32 {
        self.now.get()
    }

    pub fn set_now(&self, now: u32) {
        self.now.set(now);
    }

    /// A request begins at `now`: counts it on the session trackers.
    pub fn begin(&self, now: u32) {
        self.now.set(now);
        each(&self.sess, |t| {
            let adds = [(Data::HttpReqCnt, 1), (Data::HttpReqRate, 1)];
            t.table.add_many(t.entry, &adds, now);
            t.table.touch(t.entry, now);
        });
    }

    /// `track-scN KEY [table T]` of a stream (`http-request`, `tcp-request
    /// content`): tracks `key` in `table` unless counter `n` is already
    /// tracked by this stream (HAProxy then ignores the rule). `http`:
    /// the stream carries an HTTP request, counted now. False when the
    /// table is full of entries it may not evict (nothing is tracked).
    pub fn track(&self, n: usize, table: &Arc<Table>, key: &StKey, http: bool) -> bool {
        self.track_in(&self.strm, n, table, || Some(key.clone()), false, http)
    }

    /// [`Stk::track`] (or [`Stk::track_session`] when `session`) with the
    /// key made by `key` only when counter `n` is free (HAProxy makes no
    /// key for a counter already tracked). `later`: a backend's
    /// `tcp-request content` rule on an HTTP stream, whose request is
    /// counted when the backend's HTTP rules begin
    /// ([`Stk::count_backend_request`]). False when nothing is tracked.
    pub fn track_with(
        &self,
        n: usize,
        table: &Arc<Table>,
        session: bool,
        (http, later): (bool, bool),
        key: impl FnOnce() -> Option<StKey>,
    ) -> bool {
        // (A session's count is added by `count_session`, not here.)
        let level = if session { &self.sess } else { &self.strm };
        self.track_in(level, n, table, key, later, http)
    }

    /// `http-response track-scN`: [`Stk::track_with`] for the stream's
    /// HTTP request, and the answer's `status` (as the response rules
    /// see it) counted at once, as HAProxy's `http_action_track_sc` does
    /// it: an error for a 4xx, a failure for a 5xx other than 501 and
    /// 505 (the counting of the answer's arrival, done before these
    /// rules, missed it). Nothing when counter `n` is tracked already.
    pub fn track_response(
        &self,
        n: usize,
        table: &Arc<Table>,
        status: u16,
        key: impl FnOnce() -> Option<StKey>,
    ) {
        let taken = |l: &Level| {
            l.borrow()
                .as_deref()
                .and_then(|l| l.get(n))
                .is_some_and(Option::is_some)
        };
        if taken(&self.strm) || !self.track_in(&self.strm, n, table, key, false, true) {
            return;
        }
        let e = u64::from((400..500).contains(&status));
        let f = u64::from((500..600).contains(&status) && status != 501 && status != 505);
        let now = self.now.get();
        if let Some(Some(t)) = self
            .strm
            .borrow_mut()
            .as_deref_mut()
            .and_then(|l| l.get_mut(n))
        {
            t.counted = true;
            if e + f > 0 {
                let adds = [
                    (Data::HttpErrCnt, e),
                    (Data::HttpErrRate, e),
                    (Data::HttpFailCnt, f),
                    (Data::HttpFailRate, f),
                ];
                t.table.add_many(t.entry, &adds, now);
            }
        }
    }

    /// The backend's HTTP processing of the request begins (before its
    /// `http-request` rules): counts the request (`http_req_cnt`,
    /// `http_req_rate`) on the stream trackers its `tcp-request content`
    /// rules started, as HAProxy 2.6 counts the backend's trackers
    /// (`stream_inc_be_http_req_ctr`, once per request).
    pub fn count_backend_request(&self) {
        let now = self.now.get();
        if let Some(l) = self.strm.borrow_mut().as_deref_mut() {
            for t in l.iter_mut().flatten().filter(|t| t.later) {
                t.later = false;
                let adds = [(Data::HttpReqCnt, 1), (Data::HttpReqRate, 1)];
                t.table.add_many(t.entry, &adds, now);
            }
        }
    }

    /// `track-scN` of a session (`tcp-request connection|session`): held
    /// until the connection ends; counts a connection (the session is
    /// counted by [`Stk::count_session`]).
    pub fn track_session(&self, n: usize, table: &Arc<Table>, key: &StKey) -> bool {
        self.track_in(&self.sess, n, table, || Some(key.clone()), false, false)
    }

    /// The connection became a session (its `tcp-request connection` and
    /// `session` rules let it through): `sess_cnt`, `sess_rate` on the
    /// session trackers held now (HAProxy's `session_count_new`).
    pub fn count_session(&self) {
        let now = self.now.get();
        each(&self.sess, |t| {
            t.table
                .add_many(t.entry, &[(Data::SessCnt, 1), (Data::SessRate, 1)], now);
        });
    }

    fn track_in(
        &self,
        level: &Level,
        n: usize,
        table: &Arc<Table>,
        key: impl FnOnce() -> Option<StKey>,
        later: bool,
        http: bool,
    ) -> bool {
        if n >= 3 {
            return false;
        }
        let mut l = level.borrow_mut();
        let Some(slot) = l
            .get_or_insert_with(|| Box::new([None, None, None]))
            .get_mut(n)
        else {
            return false;
        };
        if slot.is_some() {
            return true;
        }
        let Some(key) = key() else {
            return false;
        };
        let now = self.now.get();
        let Some(entry) = table.track_start(&key, now, false, http) else {
            return false;
        };
        *slot = Some(Tracker {
            table: Arc::clone(table),
            entry,
            later,
            counted: false,
        });
        true
    }

    /// The table and entry counter `n` reads: the stream's, else the
    /// session's.
    pub fn tracked(&self, n: usize) -> Option<(Arc<Table>, EntryRef)> {
        let pick = |l: &Level| {
            l.borrow()
                .as_deref()
                .and_then(|l| l.get(n))
                .and_then(|t| t.as_ref().map(|t| (Arc::clone(&t.table), t.entry)))
        };
        pick(&self.strm).or_else(|| pick(&self.sess))
    }

    /// Runs `f` on the table and entry counter `n` reads (as
    /// [`Stk::tracked`], without taking a reference on the table); None
    /// when the counter is not tracked. `f` must not track or release.
    pub fn with_tracked<R>(&self, n: usize, f: impl FnOnce(&Table, EntryRef) -> R) -> Option<R> {
        fn at(l: &Level, n: usize) -> Option<std::cell::Ref<'_, Tracker>> {
            std::cell::Ref::filter_map(l.borrow(), |l| {
                l.as_deref().and_then(|l| l.get(n)).and_then(Option::as_ref)
            })
            .ok()
        }
        let t = at(&self.strm, n).or_else(|| at(&self.sess, n))?;
        Some(f(&t.table, t.entry))
    }

    /// Whether anything is tracked at either level.
    pub fn any(&self) -> bool {
        let any = |l: &Level| {
            l.borrow()
                .as_deref()
                .is_some_and(|l| l.iter().any(Option::is_some))
        };
        any(&self.strm) || any(&self.sess)
    }

    /// The exchange under way is refused by a rule (`deny`, `tarpit`):
    /// [`Stk::end`] counts it as an HTTP error.
    pub fn note_error(&self) {
        self.err.set(true);
    }

    /// Bytes that flowed at `now` (`option contstats`): added to every
    /// tracker's byte counts and rates, nothing released.
    pub fn add_bytes(&self, now: u32, bytes_in: u64, bytes_out: u64) {
        if self.sess.borrow().is_none() && self.strm.borrow().is_none() {
            return;
        }
        const BYTES: u32 = super::store::kinds_mask(&[
            Data::BytesInCnt,
            Data::BytesInRate,
            Data::BytesOutCnt,
            Data::BytesOutRate,
        ]);
        let adds = [
            (Data::BytesInCnt, bytes_in),
            (Data::BytesInRate, bytes_in),
            (Data::BytesOutCnt, bytes_out),
            (Data::BytesOutRate, bytes_out),
        ];
        let add = |t: &Tracker| {
            if t.table.stores_any(BYTES) {
                t.table.add_many(t.entry, &adds, now);
            }
        };
        each(&self.sess, &add);
        each(&self.strm, &add);
    }

    /// The exchange ended at `now`: counts its error (refused, or a
    /// server's 4xx), its failure (`fail`: HAProxy's `http_fail_*`, see
    /// [`http_failure`]) and bytes on every tracker, then releases the
    /// stream's.
    pub fn end(&self, now: u32, server_4xx: bool, fail: bool, bytes_in: u64, bytes_out: u64) {
        self.now.set(now);
        let server_4xx = self.err.replace(false) || server_4xx;
        if self.sess.borrow().is_none() && self.strm.borrow().is_none() {
            // Nothing tracked (the common case): nothing to count.
            return;
        }
        // The kinds added below: a table storing none of them is only
        // released.
        const END: u32 = super::store::kinds_mask(&[
            Data::HttpErrCnt,
            Data::HttpErrRate,
            Data::HttpFailCnt,
            Data::HttpFailRate,
            Data::BytesInCnt,
            Data::BytesInRate,
            Data::BytesOutCnt,
            Data::BytesOutRate,
        ]);
        let e = u64::from(server_4xx);
        let f = u64::from(fail);
        // Made only for a table that stores one of them (a rate limit's
        // table usually stores none).
        let adds = || {
            [
                (Data::HttpErrCnt, e),
                (Data::HttpErrRate, e),
                (Data::HttpFailCnt, f),
                (Data::HttpFailRate, f),
                (Data::BytesInCnt, bytes_in),
                (Data::BytesInRate, bytes_in),
                (Data::BytesOutCnt, bytes_out),
                (Data::BytesOutRate, bytes_out),
            ]
        };
        each(&self.sess, |t| {
            if t.table.stores_any(END) {
                t.table.add_many(t.entry, &adds(), now);
            }
        });
        take_each(&self.strm, |t| {
            if t.table.stores_any(END) {
                let mut adds = adds();
                if t.counted {
                    // (Its error and failure were counted when it began.)
                    for a in &mut adds[..4] {
                        a.1 = 0;
                    }
                }
                t.table.finish(t.entry, &adds, true, now)
            } else {
                t.table.finish(t.entry, &[], true, now)
            }
        });
    }

    /// `sc-inc-gpc0(N)`: increments gpc0 and gpc0_rate of counter N.
    pub fn inc_gpc0(&self, n: usize) {
        self.inc_gpc(n, Data::Gpc0, Data::Gpc0Rate);
    }

    /// `sc-inc-gpc1(N)`: increments gpc1 and gpc1_rate of counter N.
    pub fn inc_gpc1(&self, n: usize) {
        self.inc_gpc(n, Data::Gpc1, Data::Gpc1Rate);
    }

    /// `sc-inc-gpc(I,N)`: increments element I of the gpc and gpc_rate
    /// arrays of counter N (nothing when neither stores it).
    pub fn inc_gpc_at(&self, idx: usize, n: usize) {
        self.inc_gpc_idx(n, Data::Gpc, Data::GpcRate, idx);
    }

    fn inc_gpc(&self, n: usize, cnt: Data, rate: Data) {
        self.inc_gpc_idx(n, cnt, rate, 0);
    }

    fn inc_gpc_idx(&self, n: usize, cnt: Data, rate: Data, idx: usize) {
        if let Some((t, e)) = self.tracked(n) {
            let now = self.now.get();
            // The rate first, then the counter, as HAProxy.
            t.add_at(e, rate, idx, 1, now);
            t.add_at(e, cnt, idx, 1, now);
        }
    }

    /// `sc-set-gpt0(N) V`.
    pub fn set_gpt0(&self, n: usize, v: u64) {
        self.set_gpt_at(0, n, Data::Gpt0, v);
    }

    /// `sc-set-gpt(I,N) V`: element I of the gpt array of counter N
    /// (`d`: `Gpt`, or `Gpt0`, which falls back on `gpt[0]`).
    pub fn set_gpt_at(&self, idx: usize, n: usize, d: Data, v: u64) {
        if let Some((t, e)) = self.tracked(n) {
            t.set_at(e, d, idx, v);
        }
    }
}

impl Drop for Stk {
    fn drop(&mut self) {
        let now = self.now.get();
        let levels: &[&Level] = if self.sess_shared {
            &[&self.strm]
        } else {
            &[&self.strm, &self.sess]
        };
        for level in levels {
            take_each(level, |t| stop(t, now));
        }
    }
}
