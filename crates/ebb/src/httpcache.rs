//! HAProxy's HTTP cache (`cache` sections, `http-request cache-use`,
//! `http-response cache-store`, `res.cache_hit`, `res.cache_name`, `show
//! cache`): the store, its keys and its rules of what may be kept.
//!
//! What is kept: a complete `200` answer to an HTTP/1.1 `GET`, as the
//! response rules before `cache-store` left its head (status, reason,
//! fields without framing) and its body de-chunked. HAProxy's judgement
//! decides (RFC 7234 as `cache.c` and `http_ana.c` of 2.6 read it):
//! - the request: `Authorization`, `Cache-Control: no-store` and a request
//!   that is not an HTTP/1.1 `GET`/`HEAD` are never stored; `Cache-Control:
//!   no-cache|max-age|max-stale|min-fresh` or `Pragma: no-cache` (without
//!   `Cache-Control`) bypass the cache;
//! - the answer: `Cache-Control: private|no-cache|no-store|max-age=0|
//!   s-maxage=0|no-cache="set-cookie"` or `Pragma: no-cache` forbid it; an
//!   answer needs freshness (`max-age`, `s-maxage`, `Expires`) or a
//!   validator (`ETag`, `Last-Modified`); an `Age` past the answer's own
//!   max age, or one that is not a positive integer, forbids it;
//! - its life: `s-maxage`, else `max-age`, else `Expires` (a bad date is in
//!   the past), capped by the section's `max-age`;
//! - `Vary` (with `process-vary on`): only `accept-encoding` and `referer`
//!   are understood, anything else is not stored. The secondary key holds
//!   a bitmap of the encodings the client accepts (the stored answer's
//!   own coding once stored: a later request matches when it accepts it)
//!   and a CRC-32 of the first `Referer`; at most `max-secondary-entries`
//!   variants per primary key. Without `process-vary on` an answer with
//!   `Vary` is not stored;
//! - a successful (2xx, 3xx) unsafe request (`POST`, `PUT`, `DELETE`...)
//!   removes the stored answer of its URI (RFC 7234 4.4).
//!
//! The primary key is HAProxy's: the SHA-1 of the absolute URI (for an
//! origin-form target, `https://` + `Host` + target), so HTTP/1 and
//! HTTP/2 clients share entries. Its first four bytes (little-endian) key
//! an ebtree, as HAProxy's `eb32` root does; variants with the same key
//! sit in one bucket in insertion order.
//!
//! Threads: a cache is shared by every thread. Its tree is split in 16
//! shards by the key's top bits, each behind a `RwLock`: a hit takes one
//! shard's read lock for the lookup, clones the entry's `Arc` and marks it
//! referenced (an atomic), so readers never wait on each other and there is
//! no process-wide lock on the hit path. A store takes its shard's write
//! lock and the cache's eviction lock (`clock`).
//!
//! Memory: `total-max-size` bounds the bytes of the stored entries (head,
//! body and a fixed overhead per entry, counted as HAProxy counts blocks of
//! 1 KiB). A store that would pass it evicts with the CLOCK algorithm (an
//! approximation of HAProxy's least-recently-used rows): entries are
//! queued in insertion order; one referenced since it was queued gets a
//! second turn, the first one not referenced goes. Expired entries go when
//! a lookup or `show cache` meets them, or when the clock reaches them.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, RwLock, Weak};

use crate::config::CacheSection;
use crate::http1::{Method, Version};

/// HAProxy's cache block: sizes are counted in blocks of this many bytes.
pub const BLOCK: usize = 1024;

/// What an entry costs besides its head and body (HAProxy's
/// `struct cache_entry` and row header are about this size).
const ENTRY_OVERHEAD: usize = 128;

/// HAProxy's cap of an `Age` value (CACHE_ENTRY_MAX_AGE).
const MAX_AGE_VALUE: u64 = 2_147_483_648;

/// Shards of a cache's tree (by the key's top four bits).
const SHARDS: usize = 16;

/// Bits of the vary signature (HAProxy's `vary_header_bit`).
pub const VARY_ACCEPT_ENCODING: u32 = 1;
pub const VARY_REFERER: u32 = 2;

/// Encodings of the accept-encoding bitmap (HAProxy's `vary_encoding`).
mod enc {
    pub const GZIP: u32 = 1 << 0;
    pub const DEFLATE: u32 = 1 << 1;
    pub const BR: u32 = 1 << 2;
    pub const COMPRESS: u32 = 1 << 3;
    pub const AES128GCM: u32 = 1 << 4;
    pub const EXI: u32 = 1 << 5;
    pub const PACK200_GZIP: u32 = 1 << 6;
    pub const ZSTD: u32 = 1 << 7;
    pub const IDENTITY: u32 = 1 << 8;
    pub const STAR: u32 = 1 << 9;
    pub const OTHER: u32 = 1 << 10;
}

/// At most this many accept-encoding values are read; a request with
/// that many is not keyed (HAProxy's ACCEPT_ENCODING_MAX_ENTRIES).
const ACCEPT_ENCODING_MAX: usize = 16;

/// The secondary key: the accept-encoding bitmap and the `Referer` CRC,
/// each as four little-endian bytes.
pub type SecKey = [u8; 8];

/// Seconds since the epoch (HAProxy's `now.tv_sec`).
pub fn now_secs() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs() as i64)
}

/// One stored answer.
#[derive(Debug)]
pub struct Entry {
    pub hash: [u8; 20],
    /// The `Vary` headers it was stored under (0: none).
    pub sec_sig: u32,
    pub sec_key: SecKey,
    /// Seconds since the epoch: usable while `now < expire`.
    pub expire: i64,
    /// When it was stored, and the origin's `Age` then (the `Age` sent on
    /// a hit adds the two).
    pub stored: i64,
    pub age: u64,
    /// `Last-Modified`, else `Date`, else the storing time (for
    /// `If-Modified-Since`).
    pub last_modified: i64,
    pub etag: Option<Vec<u8>>,
    pub status: u16,
    pub reason: Vec<u8>,
    pub fields: Vec<(Vec<u8>, Vec<u8>)>,
    pub body: Vec<u8>,
    /// The server framed it with a `Content-Length` (not chunked): a 304
    /// made from it says the length, as HAProxy's replayed head does.
    pub had_length: bool,
    /// Bytes counted against `total-max-size`.
    pub size: usize,
    /// Read since the clock last passed (CLOCK's reference bit).
    referenced: AtomicBool,
    /// Out of the tree (its bytes are no longer counted).
    gone: AtomicBool,
}

impl Entry {
    fn live(&self, now: i64) -> bool {
        self.expire > now
    }
}

type Tree = ebtree::EbTree<u32, Vec<Arc<Entry>>>;

/// A `cache` section at run time.
pub struct Cache {
    pub name: Arc<str>,
    pub max_age: u32,
    pub max_object: usize,
    pub total: usize,
    pub process_vary: bool,
    pub max_secondary: u32,
    shards: Vec<RwLock<Tree>>,
    used: AtomicUsize,
    /// Entries in the tree.
    entries: AtomicUsize,
    /// Entries in insertion order for eviction (CLOCK); weak, so an entry
    /// removed from the tree frees its bytes at once.
    clock: Mutex<VecDeque<(u32, Weak<Entry>)>>,
}

impl std::fmt::Debug for Cache {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Cache").field("name", &self.name).finish()
    }
}

fn key_of(hash: &[u8; 20]) -> u32 {
    u32::from_le_bytes([hash[0], hash[1], hash[2], hash[3]])
}

fn shard_of(key: u32) -> usize {
    (key >> 28) as usize % SHARDS
}

impl Cache {
    pub fn new(s: &CacheSection) -> Arc<Cache> {
        let total = s.total_max_size_mb as usize * 1024 * 1024;
        let max_object = if s.max_object_size == 0 {
            // HAProxy: a 256th of the cache by default.
            total >> 8
        } else {
            s.max_object_size as usize
        };
        Arc::new(Cache {
            name: Arc::from(s.name.as_str()),
            max_age: s.max_age,
            max_object,
            total,
            process_vary: s.process_vary,
            max_secondary: s.max_secondary_entries,
            shards: (0..SHARDS).map(|_| RwLock::new(Tree::new())).collect(),
            used: AtomicUsize::new(0),
            entries: AtomicUsize::new(0),
            clock: Mutex::new(VecDeque::new()),
        })
    }

    fn read(&self, key: u32) -> std::sync::RwLockReadGuard<'_, Tree> {
        self.shards[shard_of(key)]
            .read()
            .unwrap_or_else(|p| p.into_inner())
    }

    fn write(&self, key: u32) -> std::sync::RwLockWriteGuard<'_, Tree> {
        self.shards[shard_of(key)]
            .write()
            .unwrap_or_else(|p| p.into_inner())
    }

    /// Removes `e` from its bucket (under the shard's write lock).
    fn unlink(&self, tree: &mut Tree, key: u32, e: &Arc<Entry>) {
        let Some(h) = tree.lookup(key) else {
            return;
        };
        let empty = match tree.get_mut(h) {
            Some(b) => {
                b.retain(|x| !Arc::ptr_eq(x, e));
                b.is_empty()
            }
            None => false,
        };
        if empty {
            tree.delete(h);
        }
        if !e.gone.swap(true, Ordering::AcqRel) {
            self.used.fetch_sub(e.size, Ordering::AcqRel);
            self.entries.fetch_sub(1, Ordering::AcqRel);
        }
    }

    /// HAProxy's `entry_exist`: the first entry of the key's bucket when
    /// it has this hash; an expired one is removed.
    fn primary(&self, hash: &[u8; 20], now: i64) -> Option<Arc<Entry>> {
        let key = key_of(hash);
        let first = {
            let t = self.read(key);
            let h = t.lookup(key)?;
            t.get(h)?.first()?.clone()
        };
        if first.hash != *hash {
            return None;
        }
        if first.live(now) {
            return Some(first);
        }
        let mut t = self.write(key);
        self.unlink(&mut t, key, &first);
        None
    }

    /// HAProxy's `secondary_entry_exist`: from the first entry on, the
    /// one whose secondary key matches `sec`.
    fn secondary(&self, hash: &[u8; 20], sec: &SecKey, now: i64) -> Option<Arc<Entry>> {
        let key = key_of(hash);
        let found = {
            let t = self.read(key);
            let h = t.lookup(key)?;
            let b = t.get(h)?;
            if b.first()?.sec_sig == 0 {
                return None;
            }
            b.iter().find(|e| sec_cmp(&e.sec_key, sec)).cloned()
        };
        let e = found?;
        if e.live(now) {
            return Some(e);
        }
        let mut t = self.write(key);
        self.unlink(&mut t, key, &e);
        None
    }

    /// Removes the entry of `hash` (a successful unsafe request).
    fn invalidate(&self, hash: &[u8; 20], now: i64) {
        if let Some(e) = self.primary(hash, now) {
            let key = key_of(hash);
            let mut t = self.write(key);
            self.unlink(&mut t, key, &e);
        }
    }

    /// Stores a complete answer (HAProxy's `insert_entry` after the
    /// payload): replaces the entry it would hide, respects
    /// `max-secondary-entries`, and evicts until it fits.
    fn insert(&self, e: Entry) {
        if e.size > self.total {
            return;
        }
        let now = now_secs();
        let key = key_of(&e.hash);
        let e = Arc::new(e);
        {
            let mut t = self.write(key);
            // The entry it replaces: the same primary key, and for a
            // variant the same secondary key.
            let old = t.lookup(key).and_then(|h| t.get(h)).and_then(|b| {
                let first = b.first()?;
                if first.hash != e.hash {
                    return None;
                }
                if e.sec_sig == 0 {
                    return Some(Arc::clone(first));
                }
                b.iter().find(|x| sec_cmp(&x.sec_key, &e.sec_key)).cloned()
            });
            if let Some(o) = old {
                self.unlink(&mut t, key, &o);
            }
            if e.sec_sig != 0 {
                // Expired variants go first; then count.
                let dead: Vec<Arc<Entry>> = t
                    .lookup(key)
                    .and_then(|h| t.get(h))
                    .map(|b| b.iter().filter(|x| !x.live(now)).cloned().collect())
                    .unwrap_or_default();
                for d in &dead {
                    self.unlink(&mut t, key, d);
                }
                let n = t.lookup(key).and_then(|h| t.get(h)).map_or(0, |b| b.len());
                if n >= self.max_secondary as usize {
                    return;
                }
            }
            match t.lookup(key) {
                Some(h) => {
                    if let Some(b) = t.get_mut(h) {
                        b.push(Arc::clone(&e));
                    }
                }
                None => {
                    t.insert(key, vec![Arc::clone(&e)]);
                }
            }
            self.used.fetch_add(e.size, Ordering::AcqRel);
            self.entries.fetch_add(1, Ordering::AcqRel);
        }
        let mut clock = self.clock.lock().unwrap_or_else(|p| p.into_inner());
        clock.push_back((key, Arc::downgrade(&e)));
        self.evict(&mut clock, now);
    }

    /// CLOCK eviction until the cache fits its size.
    fn evict(&self, clock: &mut VecDeque<(u32, Weak<Entry>)>, now: i64) {
        // Each entry gets at most one second turn per pass.
        let mut turns = clock.len() * 2 + 1;
        while self.used.load(Ordering::Acquire) > self.total && turns > 0 {
            turns -= 1;
            let Some((key, w)) = clock.pop_front() else {
                break;
            };
            let Some(e) = w.upgrade() else {
                continue;
            };
            if e.gone.load(Ordering::Acquire) {
                continue;
            }
            if e.live(now) && e.referenced.swap(false, Ordering::AcqRel) {
                clock.push_back((key, w));
                continue;
            }
            let mut t = self.write(key);
            self.unlink(&mut t, key, &e);
        }
        // Entries replaced or expired leave dead slots: compact now and
        // then so the queue stays near the number of live entries.
        if clock.len() > 64 && clock.len() > 2 * self.count() {
            clock.retain(|(_, w)| w.upgrade().is_some_and(|e| !e.gone.load(Ordering::Acquire)));
        }
    }

    fn count(&self) -> usize {
        self.entries.load(Ordering::Acquire)
    }

    /// Bytes stored now.
    pub fn used(&self) -> usize {
        self.used.load(Ordering::Acquire)
    }
}

/// Compares secondary keys: the accept-encoding part by HAProxy's bitmap
/// rule (every coding of the stored answer accepted by the new request),
/// the rest byte for byte. `stored` is the entry's key.
fn sec_cmp(stored: &SecKey, new: &SecKey) -> bool {
    let r = u32::from_le_bytes([stored[0], stored[1], stored[2], stored[3]]);
    let n = u32::from_le_bytes([new[0], new[1], new[2], new[3]]);
    if r & enc::OTHER != 0 || r & n != r {
        return false;
    }
    stored[4..] == new[4..]
}

// ------------------------------------------------------------- the request

/// What `cache-use` learnt of a request, kept for `cache-store`.
pub use crate::sample::CacheFacts as ReqFacts;

/// A request as the cache reads it.
pub struct Request<'a> {
    pub method: Method,
    pub version: Version,
    /// The target as sent, and whether it is in absolute form.
    pub target: &'a [u8],
    pub absolute: bool,
    pub fields: &'a [(&'a [u8], &'a [u8])],
}

/// Comma-separated values of every field named `name` (HAProxy's
/// `http_find_header(..., full=0)`), trimmed.
fn values<'a>(
    fields: &'a [(&'a [u8], &'a [u8])],
    name: &'a str,
) -> impl Iterator<Item = &'a [u8]> + 'a {
    fields
        .iter()
        .filter(move |(n, _)| n.eq_ignore_ascii_case(name.as_bytes()))
        .flat_map(|(_, v)| v.split(|&c| c == b','))
        .map(|v| v.trim_ascii())
}

/// The first whole value of `name` (`full=1`).
fn first_line<'a>(fields: &'a [(&'a [u8], &'a [u8])], name: &str) -> Option<&'a [u8]> {
    fields
        .iter()
        .find(|(n, _)| n.eq_ignore_ascii_case(name.as_bytes()))
        .map(|(_, v)| v.trim_ascii())
}

fn starts_with_ci(v: &[u8], p: &str) -> bool {
    v.len() >= p.len() && v[..p.len()].eq_ignore_ascii_case(p.as_bytes())
}

/// HAProxy's `sha1_hosturi`: `None` when the target is empty or an
/// origin-form request has no Host.
fn primary_hash(r: &Request<'_>) -> Option<[u8; 20]> {
    if r.target.is_empty() {
        return None;
    }
    let mut s = Vec::with_capacity(r.target.len() + 64);
    if !r.absolute {
        s.extend_from_slice(b"https://");
        s.extend_from_slice(values(r.fields, "host").next()?);
    }
    s.extend_from_slice(r.target);
    let d = ring::digest::digest(&ring::digest::SHA1_FOR_LEGACY_USE_ONLY, &s);
    let mut out = [0u8; 20];
    out.copy_from_slice(d.as_ref());
    Some(out)
}

/// HAProxy's `http_check_request_for_cacheability`.
fn request_cacheability(f: &mut ReqFacts, fields: &[(&[u8], &[u8])]) {
    if !f.cacheable && f.ignore {
        return;
    }
    let pragma = first_line(fields, "pragma").is_some_and(|v| v.eq_ignore_ascii_case(b"no-cache"));
    if first_line(fields, "authorization").is_some() {
        f.cacheable = false;
        f.cook = false;
        f.ignore = true;
    }
    let mut cc = false;
    for v in values(fields, "cache-control") {
        cc = true;
        if ["max-age", "no-cache", "max-stale", "min-fresh"]
            .iter()
            .any(|p| starts_with_ci(v, p))
        {
            f.ignore = true;
        } else if starts_with_ci(v, "no-store") {
            f.cacheable = false;
            f.cook = false;
        }
    }
    if !cc && pragma {
        f.ignore = true;
    }
}

/// Parses one encoding of `Accept-Encoding` or `Content-Encoding`
/// (HAProxy's `parse_encoding_value`: a known name, then optionally `;`
/// and a weight). Returns its bit and whether its weight is exactly
/// `q=0`; `None` for an unknown or malformed one.
fn parse_encoding(v: &[u8]) -> Option<(u32, bool)> {
    const NAMES: &[(&[u8], u32)] = &[
        (b"aes128gcm", enc::AES128GCM),
        (b"br", enc::BR),
        (b"compress", enc::COMPRESS),
        (b"deflate", enc::DEFLATE),
        (b"exi", enc::EXI),
        (b"gzip", enc::GZIP),
        (b"identity", enc::IDENTITY),
        (b"pack200-gzip", enc::PACK200_GZIP),
        (b"x-gzip", enc::GZIP),
        (b"x-compress", enc::COMPRESS),
        (b"zstd", enc::ZSTD),
        (b"*", enc::STAR),
    ];
    let (bit, rest) = NAMES
        .iter()
        .find(|(n, _)| v.starts_with(n))
        .map(|(n, b)| (*b, &v[n.len()..]))?;
    let rest = rest.trim_ascii_start();
    if rest.is_empty() {
        return Some((bit, false));
    }
    let w = rest.strip_prefix(b";")?.trim_ascii_start();
    Some((bit, w == b"q=0"))
}

/// HAProxy's `accept_encoding_normalizer`: the bitmap of accepted
/// encodings; `None` for a request with too many values.
fn accept_encoding(fields: &[(&[u8], &[u8])]) -> Option<u32> {
    let mut map = enc::IDENTITY;
    let mut refused = !0u32;
    let mut count = 0;
    for v in values(fields, "accept-encoding") {
        if count >= ACCEPT_ENCODING_MAX {
            break;
        }
        count += 1;
        if v.is_empty() {
            continue;
        }
        let lc = v.to_ascii_lowercase();
        match parse_encoding(&lc) {
            Some((bit, true)) => refused &= !bit,
            Some((bit, false)) => map |= bit,
            None => map |= enc::OTHER,
        }
    }
    if map & enc::STAR != 0 {
        map = !0;
    }
    map &= refused;
    if count == 0 {
        map = !0;
    }
    if count == ACCEPT_ENCODING_MAX {
        return None;
    }
    Some(map)
}

/// HAProxy's `http_request_build_secondary_key` for the headers in
/// `sig`; `None` when a header cannot be keyed.
fn build_sec_key(fields: &[(&[u8], &[u8])], sig: u32) -> Option<SecKey> {
    let mut k = [0u8; 8];
    if sig & VARY_ACCEPT_ENCODING != 0 {
        k[..4].copy_from_slice(&accept_encoding(fields)?.to_le_bytes());
    }
    if sig & VARY_REFERER != 0 {
        if let Some(r) = first_line(fields, "referer") {
            k[4..].copy_from_slice(&crate::sample::hash::crc32(r).to_le_bytes());
        }
    }
    Some(k)
}

/// A hit: the entry, and whether to answer `304 Not Modified`.
pub struct Hit {
    pub entry: Arc<Entry>,
    pub cache: Arc<Cache>,
    pub not_modified: bool,
}

/// `http-request cache-use`: keys the request into `facts` and looks it
/// up. `facts` starts as the exchange's (`cacheable`/`cook` set for safe
/// methods by [`ReqFacts::for_request`]).
pub fn use_cache(cache: &Arc<Cache>, r: &Request<'_>, facts: &mut ReqFacts) -> Option<Hit> {
    facts.http11 = r.version == Version::Http11;
    if !facts.http11 || !matches!(r.method, Method::Get | Method::Head) {
        facts.ignore = true;
    }
    request_cacheability(facts, r.fields);
    facts.hash = Some(primary_hash(r)?);
    let hash = facts.hash?;
    if facts.ignore {
        return None;
    }
    let now = now_secs();
    match cache.primary(&hash, now) {
        Some(first) => {
            let entry = if first.sec_sig != 0 {
                let k = build_sec_key(r.fields, first.sec_sig)?;
                facts.sec = Some(k);
                cache.secondary(&hash, &k, now)?
            } else {
                first
            };
            entry.referenced.store(true, Ordering::Relaxed);
            let not_modified = not_modified(&entry, r.fields);
            Some(Hit {
                entry,
                cache: Arc::clone(cache),
                not_modified,
            })
        }
        None => {
            if cache.process_vary {
                facts.sec = build_sec_key(r.fields, !0);
            }
            None
        }
    }
}

impl ReqFacts {
    /// The flags a request starts with (HAProxy sets TX_CACHEABLE and
    /// TX_CACHE_COOK for GET, HEAD, OPTIONS and TRACE).
    pub fn for_request(m: Method) -> ReqFacts {
        let safe = matches!(
            m,
            Method::Get | Method::Head | Method::Options | Method::Trace
        );
        ReqFacts {
            cacheable: safe,
            cook: safe,
            ..ReqFacts::default()
        }
    }
}

/// Seconds since the epoch of an HTTP date (the three forms of RFC 9110).
fn http_date(v: &[u8]) -> Option<i64> {
    let s = std::str::from_utf8(v).ok()?;
    let t = httpdate::parse_http_date(s.trim()).ok()?;
    let d = t.duration_since(std::time::UNIX_EPOCH).ok()?;
    Some(d.as_secs() as i64)
}

/// HAProxy's `http_compare_etags` (weak comparison).
fn etags_match(a: &[u8], b: &[u8]) -> bool {
    let strip = |t: &[u8]| -> Option<Vec<u8>> {
        let t = t.strip_prefix(b"W/").unwrap_or(t);
        (t.len() >= 2 && t[0] == b'"' && t[t.len() - 1] == b'"').then(|| t.to_vec())
    };
    matches!((strip(a), strip(b)), (Some(x), Some(y)) if x == y)
}

/// HAProxy's `should_send_notmodified_response`.
fn not_modified(e: &Entry, fields: &[(&[u8], &[u8])]) -> bool {
    let mut inm = false;
    for v in values(fields, "if-none-match") {
        inm = true;
        if v == b"*" {
            return true;
        }
        let Some(et) = &e.etag else {
            break;
        };
        if etags_match(et, v) {
            return true;
        }
    }
    if inm {
        return false;
    }
    match first_line(fields, "if-modified-since").and_then(http_date) {
        Some(ims) => e.last_modified <= ims,
        None => false,
    }
}

// ------------------------------------------------------------ the response

/// An answer being stored: its head now, its body as it passes.
pub struct Pending {
    cache: Arc<Cache>,
    entry: Entry,
}

impl Pending {
    /// Adds body bytes; `false` once the object is too big (dropped).
    pub fn push(&mut self, data: &[u8]) -> bool {
        self.entry.body.extend_from_slice(data);
        self.entry.size += data.len();
        self.entry.size <= self.cache.max_object + ENTRY_OVERHEAD
    }

    /// The answer is complete: store it.
    pub fn finish(self) {
        let c = Arc::clone(&self.cache);
        c.insert(self.entry);
    }
}

/// HAProxy's `directive_value`: the value of `word=` at the start of a
/// Cache-Control element.
fn directive<'a>(v: &'a [u8], word: &str) -> Option<&'a [u8]> {
    if !starts_with_ci(v, word) {
        return None;
    }
    v[word.len()..].strip_prefix(b"=")
}

/// strtol's reading of a directive's value (an optional quote, digits);
/// `None` when negative or without digits.
fn directive_number(v: &[u8]) -> Option<i64> {
    let v = v.strip_prefix(b"\"").unwrap_or(v);
    let (neg, v) = match v.first() {
        Some(b'-') => (true, &v[1..]),
        Some(b'+') => (false, &v[1..]),
        _ => (false, v),
    };
    let n = v.iter().take_while(|c| c.is_ascii_digit()).count();
    if n == 0 || neg {
        return None;
    }
    std::str::from_utf8(&v[..n])
        .ok()?
        .parse::<i64>()
        .ok()
        .or(Some(i64::MAX))
}

/// HAProxy's `http_calc_maxage`: the entry's life (capped by the cache's
/// `max-age`) and the answer's own max age.
fn max_age(cache: &Cache, fields: &[(&[u8], &[u8])], now: i64) -> (i64, i64) {
    let mut smaxage = -1i64;
    let mut maxage = -1i64;
    for v in values(fields, "cache-control") {
        if let Some(x) = directive(v, "s-maxage") {
            match directive_number(x) {
                Some(n) => smaxage = n,
                None => return (-1, 0),
            }
        }
        if let Some(x) = directive(v, "max-age") {
            match directive_number(x) {
                Some(n) => maxage = n,
                None => return (-1, 0),
            }
        }
    }
    let mut expires = -1i64;
    if maxage == -1 && smaxage == -1 {
        if let Some(v) = first_line(fields, "expires") {
            expires = match http_date(v) {
                Some(t) if t >= now => t - now,
                _ => 0,
            };
        }
    }
    let cap = i64::from(cache.max_age);
    if smaxage > 0 {
        return (smaxage.min(cap), smaxage);
    }
    if maxage > 0 {
        return (maxage.min(cap), maxage);
    }
    if expires >= 0 {
        return (expires.min(cap), expires);
    }
    (cap, 0)
}

/// HAProxy's `http_check_response_for_cacheability` on the flags.
fn response_cacheability(f: &mut ReqFacts, fields: &[(&[u8], &[u8])]) {
    if first_line(fields, "pragma").is_some_and(|v| v.eq_ignore_ascii_case(b"no-cache")) {
        f.cacheable = false;
        f.cook = false;
        return;
    }
    let mut fresh = false;
    for v in values(fields, "cache-control") {
        let is = |w: &str| v.eq_ignore_ascii_case(w.as_bytes());
        if is("public") {
            f.cacheable = true;
            f.cook = true;
        } else if is("private")
            || is("no-cache")
            || is("no-store")
            || is("max-age=0")
            || is("s-maxage=0")
        {
            f.cacheable = false;
            f.cook = false;
        } else if starts_with_ci(v, "no-cache=\"set-cookie") {
            f.cook = false;
        } else if starts_with_ci(v, "s-maxage") || starts_with_ci(v, "max-age") {
            fresh = true;
        }
    }
    if !fresh {
        fresh = first_line(fields, "expires").is_some();
    }
    let validator = !fresh
        && (first_line(fields, "etag").is_some() || first_line(fields, "last-modified").is_some());
    if !fresh && !validator {
        f.ignore = true;
    }
}

/// HAProxy's `http_check_vary_header`: the signature, `None` when a
/// `Vary` value is not understood.
fn vary_signature(fields: &[(&[u8], &[u8])]) -> Option<u32> {
    let mut sig = 0;
    for v in values(fields, "vary") {
        if v.eq_ignore_ascii_case(b"accept-encoding") {
            sig |= VARY_ACCEPT_ENCODING;
        } else if v.eq_ignore_ascii_case(b"referer") {
            sig |= VARY_REFERER;
        } else {
            return None;
        }
    }
    Some(sig)
}

/// What `cache-store` needs of the exchange.
pub struct StoreInput<'a> {
    pub method: Method,
    /// The answer came from a cache (never stored again).
    pub from_cache: bool,
    pub facts: ReqFacts,
    pub status: u16,
    pub reason: &'a [u8],
    /// The answer's fields as the rules left them (no framing fields).
    pub fields: &'a [(Vec<u8>, Vec<u8>)],
    /// The body's length when the server announced it.
    pub content_length: Option<u64>,
}

/// `http-response cache-store`: whether (and how) to store this answer
/// (HAProxy's `http_action_store_cache`). A successful unsafe request
/// invalidates the URI's entry here.
pub fn store(cache: &Arc<Cache>, i: &StoreInput<'_>) -> Option<Pending> {
    if i.from_cache || !i.facts.http11 {
        return None;
    }
    let now = now_secs();
    if i.method != Method::Get {
        let safe = matches!(
            i.method,
            Method::Options | Method::Head | Method::Trace | Method::Get
        );
        if (200..400).contains(&i.status) && !safe {
            if let Some(h) = &i.facts.hash {
                cache.invalidate(h, now);
            }
        }
        return None;
    }
    let hash = i.facts.hash?;
    if i.status != 200 {
        return None;
    }
    let refs: Vec<(&[u8], &[u8])> = i.fields.iter().map(|(n, v)| (&n[..], &v[..])).collect();
    let fields = &refs[..];
    let head_size: usize = i
        .fields
        .iter()
        .map(|(n, v)| n.len() + v.len() + 4)
        .sum::<usize>()
        + i.reason.len()
        + 16;
    if let Some(n) = i.content_length {
        if head_size as u64 + n > cache.max_object as u64 {
            return None;
        }
    }
    let mut sec = [0u8; 8];
    let sig = if cache.process_vary {
        let sig = vary_signature(fields)?;
        if sig != 0 {
            sec = i.facts.sec?;
            // Keep only the parts of the headers the answer varies on.
            if sig & VARY_ACCEPT_ENCODING == 0 {
                sec[..4].fill(0);
            }
            if sig & VARY_REFERER == 0 {
                sec[4..].fill(0);
            }
        }
        sig
    } else {
        if first_line(fields, "vary").is_some() {
            return None;
        }
        0
    };
    let mut f = i.facts;
    response_cacheability(&mut f, fields);
    if !f.cacheable || !f.cook || f.ignore {
        return None;
    }
    let (life, own) = max_age(cache, fields, now);
    let mut age = 0;
    if let Some(v) = first_line(fields, "age") {
        let n = std::str::from_utf8(v).ok()?.parse::<i64>().ok()?;
        if n <= 0 {
            return None;
        }
        age = (n as u64).min(MAX_AGE_VALUE);
        if age as i64 > own {
            return None;
        }
    }
    let last_modified = first_line(fields, "last-modified")
        .and_then(http_date)
        .filter(|&t| t != 0)
        .or_else(|| first_line(fields, "date").and_then(http_date))
        .filter(|&t| t != 0)
        .unwrap_or(now);
    let etag = i
        .fields
        .iter()
        .find(|(n, _)| n.eq_ignore_ascii_case(b"etag"))
        .map(|(_, v)| v.clone());
    if sig != 0 {
        // The stored answer's own codings replace the request's bitmap.
        let mut map = 0;
        for v in values(fields, "content-encoding") {
            map |= parse_encoding(v)?.0;
        }
        if map == 0 {
            map = enc::IDENTITY;
        }
        sec[..4].copy_from_slice(&u32::to_le_bytes(map));
    }
    let stored_fields: Vec<(Vec<u8>, Vec<u8>)> = i
        .fields
        .iter()
        .filter(|(n, _)| !n.eq_ignore_ascii_case(b"age"))
        .cloned()
        .collect();
    Some(Pending {
        cache: Arc::clone(cache),
        entry: Entry {
            hash,
            sec_sig: sig,
            sec_key: sec,
            expire: now + life,
            stored: now,
            age,
            last_modified,
            etag,
            status: i.status,
            reason: i.reason.to_vec(),
            fields: stored_fields,
            body: Vec::new(),
            had_length: i.content_length.is_some(),
            size: head_size + ENTRY_OVERHEAD,
            referenced: AtomicBool::new(false),
            gone: AtomicBool::new(false),
        },
    })
}

/// The `Age` to send with a hit.
pub fn age_of(e: &Entry) -> u64 {
    let held = (now_secs() - e.stored).max(0) as u64;
    (held + e.age).min(MAX_AGE_VALUE)
}

/// `show cache`: each cache and its live entries in key order.
pub fn show(caches: &[Arc<Cache>]) -> String {
    use std::fmt::Write;
    let mut out = String::new();
    let now = now_secs();
    for c in caches {
        let avail = c.total.saturating_sub(c.used()) / BLOCK;
        let p = Arc::as_ptr(c) as usize;
        let _ = writeln!(
            out,
            "{p:#x}: {} (shctx:{p:#x}, available blocks:{avail})",
            c.name
        );
        let mut dead = Vec::new();
        for s in &c.shards {
            let t = s.read().unwrap_or_else(|p| p.into_inner());
            for (_, key, bucket) in t.iter() {
                for e in bucket {
                    if !e.live(now) {
                        dead.push((key, Arc::clone(e)));
                        continue;
                    }
                    let _ = write!(out, "{:#x} hash:{key} vary:0x", Arc::as_ptr(e) as usize);
                    for b in e.sec_key {
                        let _ = write!(out, "{b:02x}");
                    }
                    let _ = writeln!(
                        out,
                        " size:{} ({} blocks), refcount:{}, expire:{}",
                        e.size,
                        e.size.div_ceil(BLOCK),
                        Arc::strong_count(e) - 1,
                        e.expire - now
                    );
                }
            }
        }
        for (key, e) in dead {
            let mut t = c.write(key);
            c.unlink(&mut t, key, &e);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn f<'a>(v: &'a [(&'a str, &'a str)]) -> Vec<(&'a [u8], &'a [u8])> {
        v.iter()
            .map(|(n, v)| (n.as_bytes(), v.as_bytes()))
            .collect()
    }

    #[test]
    fn accept_encoding_bitmaps_follow_haproxy() {
        assert_eq!(accept_encoding(&f(&[])), Some(!0));
        assert_eq!(
            accept_encoding(&f(&[("Accept-Encoding", "")])),
            Some(enc::IDENTITY)
        );
        assert_eq!(
            accept_encoding(&f(&[("Accept-Encoding", "GZIP  ; q=0.8, first")])),
            Some(enc::IDENTITY | enc::GZIP | enc::OTHER)
        );
        let m = accept_encoding(&f(&[("Accept-Encoding", "gzip;q=0, deflate,*;q=0")])).unwrap();
        assert_eq!(m, enc::IDENTITY | enc::DEFLATE);
        let many = "a1,a2,a3,a4,a5,a6,a7,a8,a9,a10,a11,a12,a13,a14,a15,a16,a17";
        assert_eq!(accept_encoding(&f(&[("Accept-Encoding", many)])), None);
    }

    #[test]
    fn secondary_keys_compare_by_accepted_coding() {
        let mut stored = [0u8; 8];
        stored[..4].copy_from_slice(&enc::GZIP.to_le_bytes());
        let mut req = [0u8; 8];
        req[..4].copy_from_slice(&(enc::GZIP | enc::IDENTITY).to_le_bytes());
        assert!(sec_cmp(&stored, &req));
        req[..4].copy_from_slice(&(enc::BR | enc::IDENTITY).to_le_bytes());
        assert!(!sec_cmp(&stored, &req));
    }

    #[test]
    fn etags_compare_weakly() {
        assert!(etags_match(b"\"etag\"", b"W/\"etag\""));
        assert!(!etags_match(b"\"etag\"", b"\"other\""));
        assert!(!etags_match(b"etag", b"etag"));
    }

    #[test]
    fn max_age_prefers_s_maxage_then_max_age_then_expires() {
        let c = Cache::new(&CacheSection {
            name: "c".into(),
            total_max_size_mb: 1,
            max_age: 20,
            max_object_size: 0,
            process_vary: false,
            max_secondary_entries: 10,
            loc: crate::config::Loc {
                file: Arc::from("t"),
                line: 1,
            },
        });
        let now = 1_000_000;
        assert_eq!(
            max_age(&c, &f(&[("Cache-Control", "max-age=5, s-maxage=50")]), now),
            (20, 50)
        );
        assert_eq!(
            max_age(&c, &f(&[("Cache-Control", "max-age=5")]), now),
            (5, 5)
        );
        assert_eq!(max_age(&c, &f(&[("Expires", "garbage")]), now), (0, 0));
        assert_eq!(
            max_age(&c, &f(&[("Cache-Control", "max-age=x")]), now).0,
            -1
        );
        assert_eq!(max_age(&c, &f(&[]), now), (20, 0));
    }
}
