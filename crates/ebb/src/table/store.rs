//! The table: key tree, expiry tree and data, behind one lock (see the
//! module essay in `table/mod.rs`).

use std::collections::BTreeMap;
use std::net::IpAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Mutex, MutexGuard, OnceLock};

use ebtree::{BytesKey, Eb32Tree, EbTree, Handle, MbKey};

use super::{Data, DataType, FreqCtr, KeyType, TableDef, DATA_KINDS};

/// One stored value.
#[derive(Clone, Copy, Debug)]
enum Slot {
    Cnt(u64),
    Rate(FreqCtr),
}

/// An entry's state beside its key.
struct Entry {
    /// Stored data, in the definition's `store` order.
    data: Box<[Slot]>,
    /// Live references (tracking streams).
    refs: u32,
    /// Expiry tick, or the touch sequence when the table has no `expire`.
    exp: u32,
    /// This entry's node in the expiry tree.
    exp_node: Handle,
    /// Its last local update's number (0: none), for the peers.
    upd: u64,
}

/// A key tree of one of the four key kinds.
enum Keys {
    Ip(EbTree<MbKey<4>, Entry>),
    Ipv6(EbTree<MbKey<16>, Entry>),
    Int(EbTree<u32, Entry>),
    Bytes(EbTree<BytesKey, Entry>),
}

/// A key as the table stores it; build one with [`Table::key`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum StKey {
    Ip(MbKey<4>),
    Ipv6(MbKey<16>),
    Int(u32),
    Bytes(BytesKey),
}

/// A `show table` filter: given a reader of an entry's values, whether
/// the entry is shown.
pub type KeepFn<'a> = dyn Fn(&dyn Fn(Data) -> Option<u64>) -> bool + 'a;

/// One entry as `show table` prints it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Dumped {
    /// The entry's slot (printed where HAProxy prints its address).
    pub id: u32,
    pub key: StKey,
    pub refs: u32,
    /// Milliseconds left before expiry (0 without `expire`).
    pub exp: u32,
    /// Stored values in HAProxy's order, rates read at `now`: each type
    /// with its element's index (0 but in arrays).
    pub data: Vec<(DataType, u8, u64)>,
}

/// A reference to an entry (a tracked key). Generation-checked: once the
/// entry is gone, operations through it do nothing.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct EntryRef(Handle);

/// Runs `$body` with `$t` bound to the key tree and `$k` to the key of the
/// same kind (None if the kinds differ).
macro_rules! with_tree {
    ($keys:expr, $key:expr, |$t:ident, $k:ident| $body:expr) => {
        match ($keys, $key) {
            (Keys::Ip($t), StKey::Ip($k)) => $body,
            (Keys::Ipv6($t), StKey::Ipv6($k)) => $body,
            (Keys::Int($t), StKey::Int($k)) => $body,
            (Keys::Bytes($t), StKey::Bytes($k)) => $body,
            _ => None,
        }
    };
}

/// Runs `$body` with `$t` bound to the key tree, whatever its kind.
macro_rules! any_tree {
    ($keys:expr, |$t:ident| $body:expr) => {
        match $keys {
            Keys::Ip($t) => $body,
            Keys::Ipv6($t) => $body,
            Keys::Int($t) => $body,
            Keys::Bytes($t) => $body,
        }
    };
}

struct Inner {
    keys: Keys,
    /// Entries by expiry tick (or touch sequence); value: the key handle.
    exps: Eb32Tree<Handle>,
    /// Touch counter for tables without `expire`.
    seq: u32,
    /// Tables with `peers`: entries by their last local update number
    /// (HAProxy's update tree), and the last number given.
    upd: BTreeMap<u64, Handle>,
    upd_seq: u64,
}

/// What a table shared with peers tells its peers task: a local update
/// is waiting (set once per batch; the task clears it and pushes).
struct SyncHook {
    dirty: AtomicBool,
    wake: OnceLock<Box<dyn Fn() + Send + Sync>>,
}

/// A stored value as the peers protocol carries it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum WireVal {
    Cnt(u64),
    /// A rate: ms since its period began, its count, the previous count.
    Freq(u32, u32, u32),
}

/// An entry as the peers protocol carries it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct WireEntry {
    pub key: StKey,
    /// Milliseconds before expiry.
    pub exp: u32,
    /// Values in HAProxy's type order (an array's elements in a row).
    pub data: Vec<(Data, WireVal)>,
}

/// A stick table. Shared by every thread (`Arc<Table>`); see the module
/// essay for the lock.
pub struct Table {
    def: TableDef,
    /// Where each data kind (its first element) sits in an entry's slots.
    index: [Option<u16>; DATA_KINDS],
    /// Elements of each kind stored (1 but for arrays; 0: not stored).
    elems: [u8; DATA_KINDS],
    /// The period of each rate stored.
    periods: [u32; DATA_KINDS],
    /// Bit `1 << kind` of each data kind stored.
    kinds: u32,
    inner: Mutex<Inner>,
    /// Set for tables with `peers`.
    sync: Option<SyncHook>,
    /// What a tracker's start adds, by `session | http << 1`, reduced to
    /// the types this table stores (see [`Table::track_start`]).
    start: [Box<[(Data, u64)]>; 4],
}

/// What a tracker's start counts (adding 0 changes nothing: one list);
/// each table keeps the part it stores ([`Table::track_start`]).
fn start_counts(session: bool, http: bool) -> [(Data, u64); 7] {
    let (s, h) = (u64::from(session), u64::from(http));
    [
        (Data::ConnCur, 1),
        (Data::ConnCnt, 1),
        (Data::ConnRate, 1),
        (Data::SessCnt, s),
        (Data::SessRate, s),
        (Data::HttpReqCnt, h),
        (Data::HttpReqRate, h),
    ]
}

/// The mask of data kinds [`Table::stores_any`] takes.
pub const fn kinds_mask(kinds: &[Data]) -> u32 {
    let mut m = 0;
    let mut i = 0;
    while i < kinds.len() {
        m |= 1u32 << (kinds[i] as u32);
        i += 1;
    }
    m
}

/// Wrap-safe "a is before or at b" on ticks.
fn tick_le(a: u32, b: u32) -> bool {
    (b.wrapping_sub(a) as i32) >= 0
}

impl Table {
    /// An empty table for a definition.
    pub fn new(def: TableDef) -> Table {
        let mut index = [None; DATA_KINDS];
        let mut elems = [0; DATA_KINDS];
        let mut periods = [0; DATA_KINDS];
        let mut at = 0u16;
        for d in &def.store {
            let k = d.data() as usize;
            index[k] = Some(at);
            elems[k] = d.elems() as u8;
            periods[k] = d.period().unwrap_or(0);
            at += d.elems() as u16;
        }
        let keys = match def.key {
            KeyType::Ip => Keys::Ip(EbTree::new()),
            KeyType::Ipv6 => Keys::Ipv6(EbTree::new()),
            KeyType::Integer => Keys::Int(EbTree::new()),
            KeyType::String(_) | KeyType::Binary(_) => Keys::Bytes(EbTree::new()),
        };
        let start = std::array::from_fn(|i| {
            start_counts(i & 1 != 0, i & 2 != 0)
                .into_iter()
                .filter(|&(d, n)| n != 0 && index[d as usize].is_some())
                .collect()
        });
        let kinds = def
            .store
            .iter()
            .fold(0, |m, d| m | 1u32 << (d.data() as u32));
        let sync = def.peers.as_ref().map(|_| SyncHook {
            dirty: AtomicBool::new(false),
            wake: OnceLock::new(),
        });
        Table {
            def,
            index,
            elems,
            periods,
            kinds,
            inner: Mutex::new(Inner {
                keys,
                exps: Eb32Tree::new(),
                seq: 0,
                upd: BTreeMap::new(),
                upd_seq: 0,
            }),
            sync,
            start,
        }
    }

    /// The definition.
    pub fn def(&self) -> &TableDef {
        &self.def
    }

    fn lock(&self) -> MutexGuard<'_, Inner> {
        // A panic while holding the lock leaves consistent trees (every
        // mutation completes before returning), so a poisoned lock is used.
        self.inner.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Whether the table stores any of the data kinds of `mask` (bit
    /// `1 << kind` each; see [`kinds_mask`]): adding to the others changes
    /// nothing, so a caller may then skip its adds.
    pub fn stores_any(&self, mask: u32) -> bool {
        self.kinds & mask != 0
    }

    /// Number of entries.
    pub fn len(&self) -> usize {
        any_tree!(&self.lock().keys, |t| t.len())
    }

    /// Whether the table is empty.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Entry slots allocated by the key tree (live or free for reuse): the
    /// memory bound, at most `size`.
    pub fn allocated(&self) -> usize {
        any_tree!(&self.lock().keys, |t| t.arena_len())
    }

    /// Key of an IP address for this table: `ip` takes IPv4 and
    /// IPv4-mapped IPv6 addresses; `ipv6` takes both (IPv4 as mapped).
    pub fn key_ip(&self, a: IpAddr) -> Option<StKey> {
        match (self.def.key, a) {
            (KeyType::Ip, IpAddr::V4(v4)) => Some(StKey::Ip(MbKey(v4.octets()))),
            (KeyType::Ip, IpAddr::V6(v6)) => {
                v6.to_ipv4_mapped().map(|v4| StKey::Ip(MbKey(v4.octets())))
            }
            (KeyType::Ipv6, a) => {
                let v6 = match a {
                    IpAddr::V4(v4) => v4.to_ipv6_mapped(),
                    IpAddr::V6(v6) => v6,
                };
                Some(StKey::Ipv6(MbKey(v6.octets())))
            }
            _ => None,
        }
    }

    /// Key of an integer (`integer` tables; HAProxy keeps 32 bits).
    pub fn key_int(&self, n: u32) -> Option<StKey> {
        (self.def.key == KeyType::Integer).then_some(StKey::Int(n))
    }

    /// Key of bytes: cut to `len` for `string`, cut or zero-padded to `len`
    /// for `binary`.
    pub fn key_bytes(&self, b: &[u8]) -> Option<StKey> {
        match self.def.key {
            KeyType::String(len) => Some(StKey::Bytes(BytesKey::from(&b[..b.len().min(len)]))),
            KeyType::Binary(len) => {
                let mut v = b[..b.len().min(len)].to_vec();
                v.resize(len, 0);
                Some(StKey::Bytes(BytesKey(v.into_boxed_slice())))
            }
            _ => None,
        }
    }

    /// The expiry key of a touch at `now`.
    fn exp_at(&self, inner: &mut Inner, now: u32) -> u32 {
        match self.def.expire {
            Some(e) => now.wrapping_add(e),
            None => {
                inner.seq = inner.seq.wrapping_add(1);
                inner.seq
            }
        }
    }

    fn new_data(&self, now: u32) -> Box<[Slot]> {
        self.def
            .store
            .iter()
            .flat_map(|d| {
                let s = match d.period() {
                    Some(_) => Slot::Rate(FreqCtr::new(now)),
                    None => Slot::Cnt(0),
                };
                std::iter::repeat_n(s, d.elems())
            })
            .collect()
    }

    /// Finds or creates the entry of `key`, takes a reference on it and
    /// refreshes its expiry. None when the key is of the wrong kind or the
    /// table is full of entries it may not evict.
    // One macro body serves Copy keys (addresses, integers) and byte keys.
    #[allow(clippy::clone_on_copy)]
    pub fn track(&self, key: &StKey, now: u32) -> Option<EntryRef> {
        self.track_in(&mut self.lock(), key, now, &[])
    }

    /// [`Self::track`], then adds `adds` to the entry, under one lock
    /// (a stream starting to track: its connection and request counted).
    pub fn track_add(&self, key: &StKey, now: u32, adds: &[(Data, u64)]) -> Option<EntryRef> {
        self.track_in(&mut self.lock(), key, now, adds)
    }

    /// A tracker starts on `key` ([`Self::track_add`] with what a start
    /// counts: the connection, and the session or the HTTP request when
    /// `session` or `http`), adding only the types this table stores.
    pub fn track_start(
        &self,
        key: &StKey,
        now: u32,
        session: bool,
        http: bool,
    ) -> Option<EntryRef> {
        let adds = &self.start[usize::from(session) | usize::from(http) << 1];
        self.track_add(key, now, adds)
    }

    /// A tracker's end under one lock and one entry access: adds `adds`,
    /// takes one from `conn_cur` if `dec_cur`, refreshes the expiry, drops
    /// the reference (an entry whose last reference goes after its expiry
    /// is removed at once).
    pub fn finish(&self, r: EntryRef, adds: &[(Data, u64)], dec_cur: bool, now: u32) {
        let mut g = self.lock();
        let inner = &mut *g;
        let exp = self.exp_at(inner, now);
        let cur = if dec_cur {
            self.index[Data::ConnCur as usize]
        } else {
            None
        };
        let gone = any_tree!(&mut inner.keys, |t| t.get_mut(r.0).map(|e| {
            self.add_to(e, adds, now);
            if let Some(i) = cur {
                if let Slot::Cnt(c) = &mut e.data[i as usize] {
                    *c = c.saturating_sub(1);
                }
            }
            e.exp = exp;
            e.refs = e.refs.saturating_sub(1);
            (e.refs == 0 && self.def.expire.is_some() && tick_le(e.exp, now)).then_some(e.exp_node)
        }));
        let Some(gone) = gone else { return };
        self.mark(inner, r.0);
        if let Some(node) = gone {
            inner.exps.delete(node);
            Self::delete_entry(inner, r.0);
        }
    }

    /// Finds or creates the entry of `key`, takes a reference, sets its
    /// expiry and adds `adds` to it (one entry access). The expiry tree is not touched for an entry found: its
    /// node stays where it was and [`Self::expire`] or an eviction moves
    /// it when they reach it (HAProxy's touch does the same), so a touch
    /// is one descent of the key tree.
    #[allow(clippy::clone_on_copy)]
    fn track_in(
        &self,
        inner: &mut Inner,
        key: &StKey,
        now: u32,
        adds: &[(Data, u64)],
    ) -> Option<EntryRef> {
        let exp = self.exp_at(inner, now);
        if let Some(h) = with_tree!(&mut inner.keys, key, |t, k| t.lookup_ref(k)) {
            any_tree!(&mut inner.keys, |t| {
                let e = t.get_mut(h)?;
                e.refs += 1;
                e.exp = exp;
                self.add_to(e, adds, now);
                Some(())
            })?;
            self.mark(inner, h);
            return Some(EntryRef(h));
        }
        let len = any_tree!(&inner.keys, |t| t.len());
        if len >= self.def.size && (self.def.nopurge || !Self::evict_one(inner)) {
            return None;
        }
        let node = inner.exps.insert(exp, Handle::dangling());
        let mut entry = Entry {
            data: self.new_data(now),
            refs: 1,
            exp,
            exp_node: node,
            upd: 0,
        };
        self.add_to(&mut entry, adds, now);
        let h = with_tree!(&mut inner.keys, key, |t, k| Some(
            t.insert(k.clone(), entry)
        ));
        match h {
            Some(h) => {
                if let Some(v) = inner.exps.get_mut(node) {
                    *v = h;
                }
                self.mark(inner, h);
                Some(EntryRef(h))
            }
            None => {
                inner.exps.delete(node);
                None
            }
        }
    }

    /// The entry expiry node `x` stands for, when the node lags behind the
    /// entry's expiry (the entry was touched since the node was placed):
    /// the node moves to the entry's expiry and true is returned.
    fn catch_up(inner: &mut Inner, x: Handle) -> bool {
        let (Some(key), Some(&h)) = (inner.exps.key(x), inner.exps.get(x)) else {
            return false;
        };
        let exp = any_tree!(&inner.keys, |t| t.get(h).map(|e| e.exp));
        match exp {
            Some(exp) if exp != key => inner.exps.requeue(x, exp),
            _ => false,
        }
    }

    /// Removes the unreferenced entry that expires first; false if every
    /// entry is referenced. Walks in expiry order, skipping referenced
    /// ones; a node that lags behind its entry's expiry moves there first
    /// (it comes up again in its place: a move never goes back past the
    /// nodes already walked, and one that lands just before the next node
    /// is walked next).
    fn evict_one(inner: &mut Inner) -> bool {
        let mut n = inner.exps.first();
        while let Some(x) = n {
            let next = inner.exps.next(x);
            if Self::catch_up(inner, x) {
                n = if inner.exps.next(x) == next {
                    Some(x)
                } else {
                    next
                };
                continue;
            }
            let Some(&h) = inner.exps.get(x) else {
                return false;
            };
            let refs = any_tree!(&inner.keys, |t| t.get(h).map(|e| e.refs));
            if refs == Some(0) {
                inner.exps.delete(x);
                Self::delete_entry(inner, h);
                return true;
            }
            n = next;
        }
        false
    }

    /// Drops a reference taken by [`Self::track`]. An entry whose last
    /// reference goes after its expiry is removed at once.
    pub fn release(&self, r: EntryRef, now: u32) {
        self.release_in(&mut self.lock(), r, now)
    }

    fn release_in(&self, inner: &mut Inner, r: EntryRef, now: u32) {
        let gone = any_tree!(&mut inner.keys, |t| {
            match t.get_mut(r.0) {
                Some(e) => {
                    e.refs = e.refs.saturating_sub(1);
                    (e.refs == 0 && self.def.expire.is_some() && tick_le(e.exp, now))
                        .then_some(e.exp_node)
                }
                None => None,
            }
        });
        if let Some(node) = gone {
            inner.exps.delete(node);
            Self::delete_entry(inner, r.0);
        }
    }

    /// The entry of `key`, if any (no reference taken, no expiry refresh).
    pub fn lookup(&self, key: &StKey) -> Option<EntryRef> {
        let g = self.lock();
        with_tree!(&g.keys, key, |t, k| t.lookup_ref(k)).map(EntryRef)
    }

    /// Whether the entry still exists.
    pub fn contains(&self, r: EntryRef) -> bool {
        any_tree!(&self.lock().keys, |t| t.contains(r.0))
    }

    /// References held on an entry.
    pub fn refs(&self, r: EntryRef) -> Option<u32> {
        any_tree!(&self.lock().keys, |t| t.get(r.0).map(|e| e.refs))
    }

    /// Adds `n` to a stored counter or rate at `now` (a no-op for a type
    /// the table does not store, as in HAProxy); `ConnCur` may go down with
    /// [`Self::dec`]. `Gpt0` and `ServerId` are set with [`Self::set`].
    /// Returns false for a stale reference.
    pub fn add(&self, r: EntryRef, d: Data, n: u64, now: u32) -> bool {
        self.add_at(r, d, 0, n, now)
    }

    /// [`Self::add`] on element `idx` of an array type (0 for the others).
    pub fn add_at(&self, r: EntryRef, d: Data, idx: usize, n: u64, now: u32) -> bool {
        let Some((_, k)) = self.slot_of(d, idx) else {
            return self.contains(r);
        };
        self.with_slot(r, d, idx, |s| match s {
            Slot::Cnt(c) => *c = c.saturating_add(n),
            Slot::Rate(f) => {
                f.add(self.periods[k as usize], now, n.min(u32::MAX as u64) as u32);
            }
        })
    }

    /// Adds to several stored types at once (one lock for all; the types
    /// the table does not store are skipped). False for a stale reference.
    pub fn add_many(&self, r: EntryRef, adds: &[(Data, u64)], now: u32) -> bool {
        self.adds_in(&mut self.lock(), r, adds, now)
    }

    fn adds_in(&self, inner: &mut Inner, r: EntryRef, adds: &[(Data, u64)], now: u32) -> bool {
        any_tree!(&mut inner.keys, |t| match t.get_mut(r.0) {
            Some(e) => {
                self.add_to(e, adds, now);
                true
            }
            None => false,
        }) && {
            self.mark(inner, r.0);
            true
        }
    }

    /// Adds `adds` to an entry's stored types (0 changes nothing: a rate
    /// is not turned for it, as HAProxy updates a counter only with
    /// something to add).
    #[inline]
    fn add_to(&self, e: &mut Entry, adds: &[(Data, u64)], now: u32) {
        for &(d, n) in adds {
            if n == 0 {
                continue;
            }
            let Some(i) = self.index[d as usize] else {
                continue;
            };
            match &mut e.data[i as usize] {
                Slot::Cnt(c) => *c = c.saturating_add(n),
                Slot::Rate(f) => {
                    if let Some(p) = self.period(d) {
                        f.add(p, now, n.min(u32::MAX as u64) as u32);
                    }
                }
            }
        }
    }

    /// Subtracts `n` from a counter (conn_cur when a tracked connection ends).
    pub fn dec(&self, r: EntryRef, d: Data, n: u64) -> bool {
        self.with_slot(r, d, 0, |s| {
            if let Slot::Cnt(c) = s {
                *c = c.saturating_sub(n)
            }
        })
    }

    /// Sets a counter (gpt0, server_id, or `set table` on the CLI).
    pub fn set(&self, r: EntryRef, d: Data, v: u64) -> bool {
        self.set_at(r, d, 0, v)
    }

    /// [`Self::set`] on element `idx` of an array type.
    pub fn set_at(&self, r: EntryRef, d: Data, idx: usize, v: u64) -> bool {
        self.with_slot(r, d, idx, |s| {
            if let Slot::Cnt(c) = s {
                *c = v
            }
        })
    }

    /// Reads a stored type at `now`: the counter, or the rate over its
    /// period. None if not stored or the reference is stale.
    pub fn get(&self, r: EntryRef, d: Data, now: u32) -> Option<u64> {
        self.get_at(r, d, 0, now)
    }

    /// [`Self::get`] of element `idx` of an array type.
    pub fn get_at(&self, r: EntryRef, d: Data, idx: usize, now: u32) -> Option<u64> {
        let (i, k) = self.slot_of(d, idx)?;
        let g = self.lock();
        any_tree!(&g.keys, |t| t.get(r.0).map(|e| match e.data[i] {
            Slot::Cnt(c) => c,
            Slot::Rate(f) => f.read(self.periods[k as usize], now) as u64,
        }))
    }

    /// Whether element `idx` of `d` is stored, directly or (for the
    /// legacy `gpc0`, `gpc1`, `gpt0` and their rates) as the array element
    /// that replaces it, as HAProxy 2.6's fetches and actions read them.
    pub fn stores(&self, d: Data, idx: usize) -> bool {
        self.slot_of(d, idx).is_some()
    }

    /// The slot of element `idx` of `d`, and the kind it belongs to
    /// (`d`, or the array a legacy type falls back on).
    fn slot_of(&self, d: Data, idx: usize) -> Option<(usize, Data)> {
        if let Some(i) = self.index[d as usize] {
            return (idx < usize::from(self.elems[d as usize]))
                .then_some((usize::from(i) + idx, d));
        }
        let (a, j) = d.fallback()?;
        if idx != 0 {
            return None;
        }
        let i = self.index[a as usize]?;
        (j < usize::from(self.elems[a as usize])).then_some((usize::from(i) + j, a))
    }

    /// Refreshes an entry's expiry to `now + expire` (HAProxy touches an
    /// entry on every update through a tracking stream).
    pub fn touch(&self, r: EntryRef, now: u32) -> bool {
        self.touch_in(&mut self.lock(), r, now)
    }

    fn touch_in(&self, inner: &mut Inner, r: EntryRef, now: u32) -> bool {
        let exp = self.exp_at(inner, now);
        let found = any_tree!(&mut inner.keys, |t| t.get_mut(r.0).map(|e| e.exp = exp));
        if found.is_some() {
            self.mark(inner, r.0);
        }
        found.is_some()
    }

    fn period(&self, d: Data) -> Option<u32> {
        self.index[d as usize]?;
        let p = self.periods[d as usize];
        (p != 0).then_some(p)
    }

    fn with_slot(&self, r: EntryRef, d: Data, idx: usize, f: impl FnOnce(&mut Slot)) -> bool {
        let Some((i, _)) = self.slot_of(d, idx) else {
            return self.contains(r);
        };
        let mut g = self.lock();
        let ok = any_tree!(&mut g.keys, |t| match t.get_mut(r.0) {
            Some(e) => {
                f(&mut e.data[i]);
                true
            }
            None => false,
        });
        if ok {
            self.mark(&mut g, r.0);
        }
        ok
    }

    /// Removes the expired unreferenced entries at `now` and returns the
    /// tick of the next expiry (None: nothing to wait for). Expired entries
    /// still referenced are requeued at `now + expire`; their release
    /// removes them. The runtime calls this from a task queued at the
    /// returned tick.
    pub fn expire(&self, now: u32) -> Option<u32> {
        let expire = self.def.expire?;
        let mut g = self.lock();
        let inner = &mut *g;
        // Scan from now - 2^31 in circular order, as timer trees are.
        let start = now.wrapping_sub(1 << 31);
        while let Some(x) = inner.exps.lookup_ge_wrap(start) {
            let exp = inner.exps.key(x)?;
            if !tick_le(exp, now) {
                return Some(exp);
            }
            if Self::catch_up(inner, x) {
                continue;
            }
            let h = *inner.exps.get(x)?;
            let refs = any_tree!(&inner.keys, |t| t.get(h).map(|e| e.refs));
            if refs.unwrap_or(0) > 0 {
                let later = now.wrapping_add(expire);
                any_tree!(&mut inner.keys, |t| if let Some(e) = t.get_mut(h) {
                    e.exp = later;
                });
                inner.exps.requeue(x, later);
            } else {
                inner.exps.delete(x);
                Self::delete_entry(inner, h);
            }
        }
        None
    }

    /// Deletes an entry if unreferenced (`clear table ... key K`); returns
    /// whether it was removed.
    pub fn remove(&self, r: EntryRef) -> bool {
        let mut g = self.lock();
        let inner = &mut *g;
        let node = any_tree!(&inner.keys, |t| t
            .get(r.0)
            .and_then(|e| (e.refs == 0).then_some(e.exp_node)));
        match node {
            Some(n) => {
                inner.exps.delete(n);
                Self::delete_entry(inner, r.0);
                true
            }
            None => false,
        }
    }

    /// The key of an entry (to look it up in another table).
    // One macro body serves Copy keys and byte keys.
    #[allow(clippy::clone_on_copy)]
    pub fn key_of(&self, r: EntryRef) -> Option<StKey> {
        let g = self.lock();
        match &g.keys {
            Keys::Ip(t) => t.key_ref(r.0).map(|k| StKey::Ip(k.clone())),
            Keys::Ipv6(t) => t.key_ref(r.0).map(|k| StKey::Ipv6(k.clone())),
            Keys::Int(t) => t.key_ref(r.0).map(|k| StKey::Int(*k)),
            Keys::Bytes(t) => t.key_ref(r.0).map(|k| StKey::Bytes(k.clone())),
        }
    }

    /// Finds or creates the entry of `key` without taking a reference
    /// (`set table`, `src_inc_gpc0`), refreshing its expiry. None when full
    /// of entries it may not evict.
    pub fn get_or_create(&self, key: &StKey, now: u32) -> Option<EntryRef> {
        let r = self.track(key, now)?;
        let mut g = self.lock();
        any_tree!(&mut g.keys, |t| if let Some(e) = t.get_mut(r.0) {
            e.refs = e.refs.saturating_sub(1);
        });
        Some(r)
    }

    /// Sets a stored type to `v` (`set table`): a counter takes the value,
    /// a rate counts `v` events in a period starting now. False if the
    /// type is not stored or the reference is stale.
    pub fn set_data(&self, r: EntryRef, d: Data, v: u64, now: u32) -> bool {
        if self.index[d as usize].is_none() {
            return false;
        }
        self.with_slot(r, d, 0, |s| match s {
            Slot::Cnt(c) => *c = v,
            Slot::Rate(f) => f.set(now, v.min(u32::MAX as u64) as u32),
        })
    }

    /// Deletes an entry from the key tree and the update list (the
    /// caller removes its expiry node).
    fn delete_entry(inner: &mut Inner, h: Handle) {
        if let Some(e) = any_tree!(&mut inner.keys, |t| t.delete(h)) {
            if e.upd != 0 {
                inner.upd.remove(&e.upd);
            }
        }
    }

    /// A local change to entry `h`: for a table shared with peers, the
    /// entry takes the next update number and the peers task is told
    /// (once per batch).
    #[inline(always)]
    fn mark(&self, inner: &mut Inner, h: Handle) {
        if let Some(sync) = &self.sync {
            self.mark_shared(sync, inner, h);
        }
    }

    fn mark_shared(&self, sync: &SyncHook, inner: &mut Inner, h: Handle) {
        let Some(e) = any_tree!(&mut inner.keys, |t| t.get_mut(h)) else {
            return;
        };
        if e.upd != 0 {
            inner.upd.remove(&e.upd);
        }
        inner.upd_seq += 1;
        e.upd = inner.upd_seq;
        inner.upd.insert(inner.upd_seq, h);
        if !sync.dirty.swap(true, Ordering::AcqRel) {
            if let Some(w) = sync.wake.get() {
                w();
            }
        }
    }

    /// Sets what a local update of this table (shared with peers) calls,
    /// once per batch: the peers task's wakeup. False if already set or
    /// the table has no `peers`.
    pub fn set_sync_waker(&self, f: Box<dyn Fn() + Send + Sync>) -> bool {
        self.sync.as_ref().is_some_and(|s| s.wake.set(f).is_ok())
    }

    /// Takes the "local updates waiting" flag (the peers task, before it
    /// pushes).
    pub fn take_dirty(&self) -> bool {
        self.sync
            .as_ref()
            .is_some_and(|s| s.dirty.swap(false, Ordering::AcqRel))
    }

    /// The number of the last local update (0: none yet).
    pub fn local_update(&self) -> u64 {
        self.lock().upd_seq
    }

    fn wire_of(&self, e: &Entry, key: StKey, now: u32) -> WireEntry {
        let data = super::SHOW_ORDER
            .iter()
            .flat_map(|&d| {
                let (i, n) = match self.index[d as usize] {
                    Some(i) => (usize::from(i), usize::from(self.elems[d as usize])),
                    None => (0, 0),
                };
                e.data[i..i + n].iter().map(move |s| {
                    (
                        d,
                        match *s {
                            Slot::Cnt(c) => WireVal::Cnt(c),
                            Slot::Rate(f) => {
                                let (a, b, c) = f.to_wire(now);
                                WireVal::Freq(a, b, c)
                            }
                        },
                    )
                })
            })
            .collect();
        let exp = match self.def.expire {
            Some(_) => (e.exp.wrapping_sub(now) as i32).max(0) as u32,
            None => 0,
        };
        WireEntry { key, exp, data }
    }

    /// The entries updated locally after update `after`, in update order,
    /// at most `max`, each with its update number.
    // One macro body serves Copy keys and byte keys.
    #[allow(clippy::clone_on_copy)]
    pub fn updates_after(&self, after: u64, max: usize, now: u32) -> Vec<(u64, WireEntry)> {
        let g = self.lock();
        let mut out = Vec::new();
        for (&n, &h) in g.upd.range(after.saturating_add(1)..) {
            if out.len() >= max {
                break;
            }
            macro_rules! one {
                ($t:expr, $wrap:expr) => {
                    if let (Some(k), Some(e)) = ($t.key_ref(h), $t.get(h)) {
                        out.push((n, self.wire_of(e, $wrap(k.clone()), now)));
                    }
                };
            }
            match &g.keys {
                Keys::Ip(t) => one!(t, StKey::Ip),
                Keys::Ipv6(t) => one!(t, StKey::Ipv6),
                Keys::Int(t) => one!(t, StKey::Int),
                Keys::Bytes(t) => one!(t, StKey::Bytes),
            }
        }
        out
    }

    /// Every entry, in key order (a full resync taught to a peer).
    pub fn wire_all(&self, now: u32) -> Vec<WireEntry> {
        let g = self.lock();
        let mut out = Vec::new();
        macro_rules! all {
            ($t:expr, $wrap:expr) => {
                for (_, k, e) in $t.iter() {
                    out.push(self.wire_of(e, $wrap(k), now));
                }
            };
        }
        match &g.keys {
            Keys::Ip(t) => all!(t, StKey::Ip),
            Keys::Ipv6(t) => all!(t, StKey::Ipv6),
            Keys::Int(t) => all!(t, StKey::Int),
            Keys::Bytes(t) => all!(t, StKey::Bytes),
        }
        out
    }

    /// Applies an entry learned from a peer at `now`: creates it if
    /// needed, overwrites the values it carries that this table stores
    /// (never `conn_cur`, which stays local, as in HAProxy), and sets its
    /// expiry to `exp` ms from now (the table's `expire` when None). Not
    /// a local update: nothing is pushed back. False when the key is of
    /// the wrong kind or the table is full.
    pub fn apply_remote(
        &self,
        key: &StKey,
        exp: Option<u32>,
        data: &[(Data, WireVal)],
        now: u32,
    ) -> bool {
        let mut g = self.lock();
        let inner = &mut *g;
        let existing = with_tree!(&inner.keys, key, |t, k| t.lookup_ref(k));
        let h = match existing {
            Some(h) => h,
            None => {
                let Some(r) = self.create_unmarked(inner, key, now) else {
                    return false;
                };
                r
            }
        };
        // An array's elements come in a row: the n-th of a kind is element
        // n (those beyond the local array's size are dropped, as HAProxy).
        let mut seen = [0usize; DATA_KINDS];
        let slots: Vec<Option<(usize, bool)>> = data
            .iter()
            .map(|&(d, _)| {
                let k = d as usize;
                let idx = seen[k];
                seen[k] += 1;
                let i = self.index[k]?;
                (idx < usize::from(self.elems[k]))
                    .then_some((usize::from(i) + idx, self.periods[k] != 0))
            })
            .collect();
        let exp_at = match (exp, self.def.expire) {
            (Some(ms), Some(_)) => now.wrapping_add(ms.min((1 << 31) - 1)),
            (None, Some(e)) => now.wrapping_add(e),
            (_, None) => {
                inner.seq = inner.seq.wrapping_add(1);
                inner.seq
            }
        };
        let node = any_tree!(&mut inner.keys, |t| t.get_mut(h).map(|e| {
            for (&(d, v), slot) in data.iter().zip(&slots) {
                if d == Data::ConnCur {
                    continue;
                }
                let Some((i, rate)) = *slot else {
                    continue;
                };
                match (&mut e.data[i], v) {
                    (Slot::Cnt(c), WireVal::Cnt(n)) => *c = n,
                    (Slot::Rate(f), WireVal::Freq(el, cur, prev)) if rate => {
                        *f = super::FreqCtr::from_wire(now, el, cur, prev)
                    }
                    _ => {}
                }
            }
            e.exp = exp_at;
            e.exp_node
        }));
        match node {
            Some(n) => inner.exps.requeue(n, exp_at),
            None => false,
        }
    }

    /// Creates the entry of `key` without a reference or a local update
    /// mark (an entry learned from a peer). Evicts as [`Self::track`].
    // One macro body serves Copy keys and byte keys.
    #[allow(clippy::clone_on_copy)]
    fn create_unmarked(&self, inner: &mut Inner, key: &StKey, now: u32) -> Option<Handle> {
        let len = any_tree!(&inner.keys, |t| t.len());
        if len >= self.def.size && (self.def.nopurge || !Self::evict_one(inner)) {
            return None;
        }
        let exp = self.exp_at(inner, now);
        let node = inner.exps.insert(exp, Handle::dangling());
        let entry = Entry {
            data: self.new_data(now),
            refs: 0,
            exp,
            exp_node: node,
            upd: 0,
        };
        match with_tree!(&mut inner.keys, key, |t, k| Some(
            t.insert(k.clone(), entry)
        )) {
            Some(h) => {
                if let Some(v) = inner.exps.get_mut(node) {
                    *v = h;
                }
                Some(h)
            }
            None => {
                inner.exps.delete(node);
                None
            }
        }
    }

    /// Removes every unreferenced entry (`clear table NAME`); referenced
    /// ones stay, as in HAProxy. Returns how many went.
    pub fn clear(&self) -> usize {
        let mut g = self.lock();
        let inner = &mut *g;
        let gone: Vec<(Handle, Handle)> = any_tree!(&inner.keys, |t| t
            .iter()
            .filter(|(_, _, e)| e.refs == 0)
            .map(|(h, _, e)| (h, e.exp_node))
            .collect());
        for (h, node) in &gone {
            inner.exps.delete(*node);
            Self::delete_entry(inner, *h);
        }
        gone.len()
    }

    /// The entries for `show table`, in key order: those passing `keep`
    /// (given a reader of the entry's values at `now`), at most `max`.
    // One macro body serves Copy keys and byte keys.
    #[allow(clippy::clone_on_copy)]
    pub fn dump(&self, now: u32, only: Option<&StKey>, keep: &KeepFn<'_>) -> Vec<Dumped> {
        let g = self.lock();
        let mut out = Vec::new();
        let mut one = |h: Handle, key: StKey, e: &Entry| {
            let read_at = |d: Data, idx: usize| -> Option<u64> {
                let i = usize::from(self.index[d as usize]?) + idx;
                Some(match e.data[i] {
                    Slot::Cnt(c) => c,
                    Slot::Rate(f) => f.read(self.periods[d as usize], now) as u64,
                })
            };
            // A `show table` filter reads `server_key` (a string) as 0,
            // as HAProxy does.
            let read = |d: Data| {
                if d == Data::ServerKey {
                    self.index[d as usize].map(|_| 0)
                } else {
                    read_at(d, 0)
                }
            };
            if !keep(&read) {
                return;
            }
            let data = super::SHOW_ORDER
                .iter()
                .filter_map(|&d| self.def.store.iter().find(|x| x.data() == d))
                .flat_map(|dt| {
                    (0..dt.elems())
                        .filter_map(move |i| Some((*dt, i as u8, read_at(dt.data(), i)?)))
                })
                .collect();
            let exp = match self.def.expire {
                Some(_) => (e.exp.wrapping_sub(now) as i32).max(0) as u32,
                None => 0,
            };
            out.push(Dumped {
                id: h.slot(),
                key,
                refs: e.refs,
                exp,
                data,
            });
        };
        macro_rules! walk {
            ($t:expr, $wrap:expr) => {
                match only {
                    Some(k) => {
                        if let Some(h) = with_tree!(&g.keys, k, |t, k| t.lookup_ref(k)) {
                            if let (Some(kk), Some(e)) = ($t.key_ref(h), $t.get(h)) {
                                one(h, $wrap(kk.clone()), e);
                            }
                        }
                    }
                    None => {
                        for (h, k, e) in $t.iter() {
                            one(h, $wrap(k), e);
                        }
                    }
                }
            };
        }
        match &g.keys {
            Keys::Ip(t) => walk!(t, StKey::Ip),
            Keys::Ipv6(t) => walk!(t, StKey::Ipv6),
            Keys::Int(t) => walk!(t, StKey::Int),
            Keys::Bytes(t) => walk!(t, StKey::Bytes),
        }
        out
    }

    /// Checks both trees and their cross links (tests).
    pub fn validate(&self) -> Result<(), String> {
        let g = self.lock();
        g.exps.validate()?;
        any_tree!(&g.keys, |t| {
            t.validate()?;
            if t.len() != g.exps.len() {
                return Err(format!(
                    "{} keys but {} expiry nodes",
                    t.len(),
                    g.exps.len()
                ));
            }
            if t.len() > self.def.size {
                return Err(format!(
                    "{} entries in a table of size {}",
                    t.len(),
                    self.def.size
                ));
            }
            for (h, _, e) in t.iter() {
                if g.exps.get(e.exp_node) != Some(&h) {
                    return Err("expiry node does not point back".into());
                }
                // A node may lag behind its entry's expiry, never lead it.
                if !g.exps.key(e.exp_node).is_some_and(|k| tick_le(k, e.exp)) {
                    return Err("expiry node after the entry's expiry".into());
                }
            }
            Ok(())
        })
    }
}
