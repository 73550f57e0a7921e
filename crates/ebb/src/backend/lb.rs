//! Load-balancing algorithms: a deterministic core that takes a snapshot
//! of the eligible servers (weights, streams in use, whether a slot is
//! free) and the request's keys, and names a server. No sockets, no
//! clocks: the tests drive it directly.
//!
//! - `roundrobin`: HAProxy 2.6's fast weighted round robin ([`fwrr`]), so
//!   the server sequence is HAProxy's (weights 5:1:1 give `a a a b a a
//!   c`), from the start and after a weight change, a slowstart step or a
//!   server going down or up. Its state is one per backend, behind a
//!   short lock each pick takes (as HAProxy's pick takes its lock).
//! - `static-rr`: HAProxy's server map (below) walked in order from a
//!   position all threads share (an atomic, moved by compare-and-swap).
//!   Both skip a full server (a round robin puts it back as if taken).
//! - `leastconn`: HAProxy's key, (streams + 1) / weight; ties go round robin
//!   (from the shared position).
//! - `first`: the first server (in declaration order) with a free slot.
//! - `source`, `uri`, `hdr(NAME)`: HAProxy 2.6's hashing, so a key reaches
//!   the server it reached under HAProxy with the same servers: the same
//!   key (the source address as the XOR of its 32-bit words; the URI up to
//!   `?`, `len`, the `depth`+1-th slash; the header's first value, or its
//!   main domain), the same function (`sdbm`, `djb2`, `wt6`, `crc32`, then
//!   Bob Jenkins' avalanche when asked), and the same lookup: `map-based`
//!   is HAProxy's server map (weights divided by their greatest common
//!   divisor, slots laid out by its weighted-score walk, `hash % total`);
//!   `consistent` is HAProxy's ring of `16 x weight` points per server,
//!   each at `avalanche(id x 4096 + n)`, the closest point winning, with
//!   `hash-balance-factor` skipping servers above their share. A full
//!   chosen server *binds* the stream: it waits in that server's queue.
//!   Without a key (no such header, parameter or path) the pick is
//!   HAProxy's: the map walked as `static-rr`, or the ring's next point.
//! - `random [N]`: N weighted random draws, the one with the fewest streams
//!   wins (power of two choices by default).

mod fwrr;

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;

use crate::config::{Balance, HashFunction, HashType};

use super::LbInput;

/// Balancing state kept between picks, one per thread (see
/// [`super::Farm`]): nothing in it is shared, so picking takes no lock
/// that other threads take. What must be common to every thread (the
/// round-robin positions and state) is in [`Shared`], which the caller
/// passes to [`choose`].
pub struct State {
    /// xorshift state for `random`.
    rng: u64,
    /// `hash-type` of the backend.
    hash: HashType,
    /// Greatest common divisor of the configured weights (HAProxy divides
    /// map-based weights by it).
    gcd: u32,
    /// The map or ring, built for one set of eligible servers and weights.
    table: Option<Table>,
    /// Each server's id (HAProxy's `puid`) by index: `first` takes the
    /// lowest, the consistent ring places points by it. Missing: index + 1.
    ids: Vec<u32>,
}

/// What every thread of a backend shares for balancing.
#[derive(Default)]
pub struct Shared {
    /// `static-rr`'s (and a keyless map-based hash's) position in the
    /// map; a keyless consistent hash's last ring point + 1; `leastconn`'s
    /// tie-breaking start.
    pub rr: AtomicU64,
    /// `roundrobin`'s state.
    fwrr: Mutex<fwrr::Fwrr>,
}

/// The pick's context: whether the eligible servers are the backups (they
/// balance apart from the active ones), and a server to avoid if another
/// one can take the stream (a redispatch).
#[derive(Clone, Copy, Default, Debug)]
pub struct Group {
    pub backup: bool,
    pub avoid: Option<usize>,
}

/// A hash lookup structure and what it was built from.
struct Table {
    elig: Vec<usize>,
    weights: Vec<u32>,
    /// map-based: server index per slot.
    map: Vec<usize>,
    /// consistent: (point, server index), sorted by point.
    ring: Vec<(u32, usize)>,
}

impl State {
    /// `seed` varies the random draws between threads.
    pub fn new(seed: u64) -> State {
        State {
            rng: 0x9e37_79b9_7f4a_7c15 ^ seed.wrapping_mul(0xbf58_476d_1ce4_e5b9),
            hash: HashType::default(),
            gcd: 1,
            table: None,
            ids: Vec::new(),
        }
    }

    /// Sets the servers' ids, by index.
    pub fn set_ids(&mut self, ids: Vec<u32>) {
        self.ids = ids;
        self.table = None;
    }

    fn id_of(&self, i: usize) -> u32 {
        self.ids
            .get(i)
            .copied()
            .unwrap_or_else(|| (i as u32).wrapping_add(1))
    }

    /// Sets the backend's `hash-type`; `conf_weights` are every server's
    /// configured weight, in declaration order.
    pub fn set_hash(&mut self, hash: HashType, conf_weights: &[u32]) {
        self.hash = hash;
        self.gcd = conf_weights
            .iter()
            .copied()
            .filter(|&w| w > 0)
            .reduce(gcd)
            .unwrap_or(1)
            .max(1);
        self.table = None;
    }

    /// The table for these servers and weights, rebuilt when they changed.
    /// `ring`: the consistent ring (else the map).
    fn table(&mut self, elig: &[usize], weights: &[u32], ring: bool) -> &Table {
        let stale = self
            .table
            .as_ref()
            .is_none_or(|t| t.elig != elig || t.weights != weights);
        if stale {
            let mut t = Table {
                elig: elig.to_vec(),
                weights: weights.to_vec(),
                map: Vec::new(),
                ring: Vec::new(),
            };
            if ring {
                let ids: Vec<u32> = elig.iter().map(|&i| self.id_of(i)).collect();
                t.ring = build_ring(elig, &ids, weights);
            } else {
                let ew: Vec<u32> = weights.iter().map(|&w| w.div_ceil(self.gcd)).collect();
                t.map = build_map(elig, &ew);
            }
            self.table = Some(t);
        }
        match &self.table {
            Some(t) => t,
            None => unreachable!("the table was just built"),
        }
    }

    fn rand(&mut self) -> u64 {
        self.rng ^= self.rng << 13;
        self.rng ^= self.rng >> 7;
        self.rng ^= self.rng << 17;
        self.rng
    }
}

/// What the algorithm decided.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Choice {
    /// This server (it had a free slot at the snapshot).
    Server(usize),
    /// This server is the stream's, but full: wait in its queue.
    Bound(usize),
    /// Every eligible server is full: wait in the backend's queue.
    AllFull,
}

fn gcd(mut a: u32, mut b: u32) -> u32 {
    while b != 0 {
        (a, b) = (b, a % b);
    }
    a
}

// The functions are the sample engine's (its converters and `balance`
// hash the same way, HAProxy's `hash_*` functions and `full_hash`).
pub use crate::sample::hash::{crc32, djb2, full_hash as avalanche, sdbm, wt6};

/// A key's hash under a backend's `hash-type` (function, then avalanche).
pub fn hash_key(h: &HashType, data: &[u8]) -> u32 {
    let v = match h.function {
        HashFunction::Sdbm => sdbm(data),
        HashFunction::Djb2 => djb2(data),
        HashFunction::Wt6 => wt6(data),
        HashFunction::Crc32 => crc32(data),
    };
    if h.avalanche {
        avalanche(v)
    } else {
        v
    }
}

/// HAProxy's server map: `tot` slots (the sum of the weights); each slot
/// goes to the server whose running score, raised by its weight, is the
/// highest (declaration order on ties), which then pays `tot` back.
fn build_map(elig: &[usize], ew: &[u32]) -> Vec<usize> {
    let tot: i64 = ew.iter().map(|&w| i64::from(w)).sum();
    if tot <= 0 {
        return Vec::new();
    }
    let mut score = vec![0i64; elig.len()];
    let mut map = Vec::with_capacity(tot as usize);
    for _ in 0..tot {
        let mut best: Option<usize> = None;
        let mut max = 0i64;
        for k in 0..elig.len() {
            if tot == 1 {
                best = Some(k);
                break;
            }
            score[k] += i64::from(ew[k]);
            let v = (score[k] + tot) / tot;
            if best.is_none() || v > max {
                max = v;
                best = Some(k);
            }
        }
        if let Some(b) = best {
            map.push(elig[b]);
            score[b] -= tot;
        }
    }
    map
}

/// `balance url_param NAME`'s key, as HAProxy's get_server_ph finds it:
/// after the URI's first `?`, the value (up to `&`) of the first
/// parameter named exactly `NAME`; none when there is no such parameter.
pub fn url_param_value<'a>(uri: &'a [u8], name: &[u8]) -> Option<&'a [u8]> {
    let q = uri.iter().position(|&b| b == b'?')?;
    uri[q + 1..].split(|&b| b == b'&').find_map(|p| {
        let v = p.strip_prefix(name)?.strip_prefix(b"=")?;
        Some(v)
    })
}

/// The value of parameter `name` in a POST body (HAProxy 2.6's
/// get_server_ph_post, for `balance url_param` when the URL has none):
/// the body as `name=value&...` pairs, the value up to the next `&` or
/// the end. As HAProxy, only the value's first byte is judged: not a
/// token character (RFC 9110 tchar) means the body is not URL-encoded
/// parameters, no value (`None`); a space, tab, CR or LF there gives an
/// empty value.
pub fn post_param_value<'a>(body: &'a [u8], name: &[u8]) -> Option<&'a [u8]> {
    let tchar = crate::http1::tchar;
    let mut rest = body;
    while rest.len() > name.len() {
        if rest[name.len()] == b'=' && rest.starts_with(name) {
            let v = &rest[name.len() + 1..];
            let end = v.iter().position(|&b| b == b'&').unwrap_or(v.len());
            return match v.first() {
                Some(&b) if !tchar(b) && matches!(b, b' ' | b'\t' | b'\r' | b'\n') => Some(&v[..0]),
                Some(&b) if !tchar(b) => None,
                _ => Some(&v[..end]),
            };
        }
        let amp = rest.iter().position(|&b| b == b'&')?;
        rest = &rest[amp + 1..];
    }
    None
}

/// HAProxy's consistent-hash ring: `16 x weight` points per server, point
/// `n` of the server of id `id` (its `id N`, else numbered as HAProxy
/// numbers them) at `avalanche(id * 4096 + n)`.
fn build_ring(elig: &[usize], ids: &[u32], weights: &[u32]) -> Vec<(u32, usize)> {
    let mut ring = Vec::new();
    for ((&i, &id), &w) in elig.iter().zip(ids).zip(weights) {
        for n in 0..w.saturating_mul(16) {
            ring.push((avalanche(id.wrapping_mul(4096).wrapping_add(n)), i));
        }
    }
    // Stable: equal points keep insertion order, as the tree's duplicates.
    ring.sort_by_key(|&(k, _)| k);
    ring
}

/// The slot of the ring a hash lands on: the closest point, the one
/// before on a tie of distances.
fn ring_slot(ring: &[(u32, usize)], h: u32) -> usize {
    let next = ring.partition_point(|&(k, _)| k < h);
    let next = if next == ring.len() { 0 } else { next };
    let prev = if next == 0 { ring.len() - 1 } else { next - 1 };
    let dp = h.wrapping_sub(ring[prev].0);
    let dn = ring[next].0.wrapping_sub(h);
    if dp <= dn {
        prev
    } else {
        next
    }
}

/// `hash-balance-factor`: whether server `k` (of `elig`) is under its
/// share of the streams in use, counting the one about to start.
fn under_share(factor: u32, k: usize, weights: &[u32], cur: &[u32]) -> bool {
    let ew = |x: usize| u64::from(weights[x]) * 16;
    let tot: u64 = (0..weights.len()).map(ew).sum::<u64>().max(1);
    let served: u64 = cur.iter().map(|&c| u64::from(c)).sum();
    let slots_tot = ((served + 1) * u64::from(factor)).div_ceil(100);
    let per = slots_tot / tot;
    let rem = slots_tot % tot;
    let cum: u64 = (0..k).map(ew).sum();
    let mut slots = ew(k) * per;
    slots += ((cum + ew(k)) * rem) / tot - (cum * rem) / tot;
    u64::from(cur[k]) < slots.max(1)
}

/// The server a hash names under the backend's `hash-type`.
fn hashed(
    st: &mut State,
    h: u32,
    elig: &[usize],
    weights: &[u32],
    cur: &[u32],
    room: &[bool],
) -> Choice {
    let factor = st.hash.balance_factor;
    let consistent = st.hash.consistent;
    let t = st.table(elig, weights, consistent);
    let i = if consistent {
        if t.ring.is_empty() {
            return Choice::AllFull;
        }
        let mut slot = ring_slot(&t.ring, h);
        if factor > 0 {
            for _ in 0..t.ring.len() {
                let i = t.ring[slot].1;
                let k = elig.iter().position(|&x| x == i).unwrap_or(0);
                if under_share(factor, k, weights, cur) {
                    break;
                }
                slot = (slot + 1) % t.ring.len();
            }
        }
        t.ring[slot].1
    } else {
        if t.map.is_empty() {
            return Choice::AllFull;
        }
        t.map[h as usize % t.map.len()]
    };
    let k = elig.iter().position(|&x| x == i).unwrap_or(0);
    if room[k] {
        Choice::Server(i)
    } else {
        Choice::Bound(i)
    }
}

/// The key of `balance source`: the address's 32-bit words XORed.
fn source_key(a: std::net::IpAddr) -> u32 {
    match a {
        std::net::IpAddr::V4(a) => u32::from_be_bytes(a.octets()),
        std::net::IpAddr::V6(a) => a
            .octets()
            .chunks_exact(4)
            .fold(0, |h, w| h ^ u32::from_be_bytes([w[0], w[1], w[2], w[3]])),
    }
}

/// The part of the URI `balance uri` hashes: up to `len` bytes, stopping
/// at the `depth`+1-th slash and, unless `whole`, at `?`.
fn uri_key(u: &[u8], whole: bool, len: Option<u32>, depth: Option<u32>) -> &[u8] {
    let u = match len {
        Some(l) => &u[..u.len().min(l as usize)],
        None => u,
    };
    let stop = depth.map(|d| d.saturating_add(1));
    let mut slashes = 0;
    for (i, &c) in u.iter().enumerate() {
        if c == b'/' {
            slashes += 1;
            if Some(slashes) == stop {
                return &u[..i];
            }
        } else if c == b'?' && !whole {
            return &u[..i];
        }
    }
    u
}

/// The path of a request target, from its first `/` (`path-only`): an
/// origin form as it is, an absolute form without its scheme and
/// authority; `None` for one with no path (`*`, `host:port`,
/// `http://host`), as HAProxy's `http_get_path`.
fn path_of(u: &[u8]) -> Option<&[u8]> {
    if u.first() == Some(&b'/') {
        return Some(u);
    }
    let after = u.windows(3).position(|w| w == b"://")? + 3;
    let p = u[after..].iter().position(|&c| c == b'/')?;
    Some(&u[after + p..])
}

/// The value `balance hdr` hashes: the header's first comma-separated
/// value without surrounding blanks.
fn hdr_value(v: &[u8]) -> &[u8] {
    let v = v.split(|&c| c == b',').next().unwrap_or(v);
    let start = v
        .iter()
        .position(|c| !c.is_ascii_whitespace())
        .unwrap_or(v.len());
    let end = v
        .iter()
        .rposition(|c| !c.is_ascii_whitespace())
        .map_or(start, |e| e + 1);
    &v[start..end]
}

/// Maps a hash onto servers in proportion to their weights.
fn by_weight(h: u64, elig: &[usize], weights: &[u32]) -> usize {
    let total: u64 = weights.iter().map(|&w| u64::from(w.max(1))).sum();
    let mut x = h % total.max(1);
    for (k, &w) in weights.iter().enumerate() {
        let w = u64::from(w.max(1));
        if x < w {
            return elig[k];
        }
        x -= w;
    }
    elig[elig.len() - 1]
}

/// A round robin on a table, the shared position walked ([`walk_rr`]):
/// HAProxy's `static-rr` (and a keyless map-based hash) on the server
/// map, or a keyless pick under a consistent hash (HAProxy's
/// chash_get_next_server) on the ring (`ring`), the point after the last
/// one taken. The position is reset when past the table's end (it
/// shrank).
fn table_rr(
    st: &mut State,
    elig: &[usize],
    weights: &[u32],
    room: &[bool],
    grp: Group,
    rr: &AtomicU64,
    ring: bool,
) -> Choice {
    let t = st.table(elig, weights, ring);
    if ring {
        walk_rr(t.ring.len(), |k| t.ring[k].1, elig, room, grp.avoid, rr)
    } else {
        walk_rr(t.map.len(), |k| t.map[k], elig, room, grp.avoid, rr)
    }
}

/// The walk both table round robins share, over `n` entries (`server(k)`:
/// the server at entry `k`): from the shared position `rr` (one past the
/// entry last taken; 0, or past the end: the first entry), the first
/// server with room that is not the one to avoid; else the last entry
/// seen of the one to avoid, if it has room (HAProxy's map_get_server_rr
/// and chash_get_next_server both remember the last). The position then
/// moves one past the entry taken, unless another thread moved it first
/// (then the walk starts again from there).
fn walk_rr(
    n: usize,
    server: impl Fn(usize) -> usize,
    elig: &[usize],
    room: &[bool],
    avoid: Option<usize>,
    rr: &AtomicU64,
) -> Choice {
    if n == 0 {
        return Choice::AllFull;
    }
    let free = |i: usize| elig.iter().position(|&x| x == i).is_some_and(|k| room[k]);
    let mut at = rr.load(Ordering::Relaxed);
    loop {
        let start = if at as usize >= n { 0 } else { at as usize };
        let mut idx = start;
        let mut avoided: Option<(usize, usize)> = None;
        let mut found: Option<(usize, usize)> = None;
        loop {
            let i = server(idx);
            idx += 1;
            if free(i) {
                if Some(i) != avoid {
                    found = Some((i, idx));
                    break;
                }
                avoided = Some((i, idx));
            }
            if idx == n {
                idx = 0;
            }
            if idx == start {
                break;
            }
        }
        let Some((i, next)) = found.or(avoided) else {
            return Choice::AllFull;
        };
        match rr.compare_exchange_weak(at, next as u64, Ordering::Relaxed, Ordering::Relaxed) {
            Ok(_) => return Choice::Server(i),
            Err(now) => at = now,
        }
    }
}

/// `roundrobin`: HAProxy's fast weighted round robin on the backend's
/// shared state; `weights` are effective weights in sixteenths
/// ([`crate::backend::ServerRt::eweight16`], HAProxy's `cur_eweight`).
fn fwrr_pick(elig: &[usize], weights: &[u32], room: &[bool], grp: Group, sh: &Shared) -> Choice {
    let mut f = sh.fwrr.lock().unwrap_or_else(|p| p.into_inner());
    let snap = fwrr::Snapshot {
        elig,
        weights,
        room,
        backup: grp.backup,
        avoid: grp.avoid,
    };
    match f.pick(&snap) {
        Some(i) => Choice::Server(i),
        None => Choice::AllFull,
    }
}

/// The pick without a key of a hashing algorithm (HAProxy's round robin
/// on its hash structure).
fn keyless(
    st: &mut State,
    elig: &[usize],
    weights: &[u32],
    room: &[bool],
    grp: Group,
    rr: &AtomicU64,
) -> Choice {
    let ring = st.hash.consistent;
    table_rr(st, elig, weights, room, grp, rr, ring)
}

/// HAProxy's SRV_EWGHT_MAX: the largest weight (256) in sixteenths.
const LC_EWGHT_MAX: u64 = 256 * 16;

/// Picks among `elig` (server indices) given each one's weight, streams in
/// use and free-slot flag (parallel slices). `sh` is the backend's
/// state common to every thread.
#[allow(clippy::too_many_arguments)]
pub fn choose(
    balance: &Balance,
    st: &mut State,
    elig: &[usize],
    weights: &[u32],
    cur: &[u32],
    room: &[bool],
    input: &LbInput<'_>,
    sh: &Shared,
    grp: Group,
) -> Choice {
    if elig.is_empty() {
        return Choice::AllFull;
    }
    let rr = &sh.rr;
    match balance {
        Balance::RoundRobin => fwrr_pick(elig, weights, room, grp, sh),
        Balance::StaticRr => table_rr(st, elig, weights, room, grp, rr, false),
        Balance::LeastConn => {
            // HAProxy 2.6's key (lb_fwlc.c): 0 for a server with no
            // stream, else (streams + 1) x SRV_EWGHT_MAX / its weight in
            // sixteenths, in whole units; the lowest wins, ties round
            // robin.
            let key = |k: usize| -> u64 {
                match u64::from(cur[k]) {
                    0 => 0,
                    n => (n + 1) * LC_EWGHT_MAX / u64::from(weights[k].max(1)),
                }
            };
            let n = elig.len();
            let start = rr.fetch_add(1, Ordering::Relaxed) as usize;
            let mut best: Option<(usize, u64)> = None;
            for off in 0..n {
                let k = start.wrapping_add(off) % n;
                if !room[k] {
                    continue;
                }
                let kk = key(k);
                if best.is_none_or(|(_, b)| kk < b) {
                    best = Some((k, kk));
                }
            }
            let best = best.map(|(k, _)| k);
            match best {
                Some(k) => Choice::Server(elig[k]),
                None => Choice::AllFull,
            }
        }
        // The server of lowest id with room (HAProxy's order).
        Balance::First => match (0..elig.len())
            .filter(|&k| room[k])
            .min_by_key(|&k| st.id_of(elig[k]))
        {
            Some(k) => Choice::Server(elig[k]),
            None => Choice::AllFull,
        },
        Balance::Source => match input.src {
            Some(a) => {
                let mut h = source_key(a);
                if st.hash.avalanche {
                    h = avalanche(h);
                }
                hashed(st, h, elig, weights, cur, room)
            }
            None => keyless(st, elig, weights, room, grp, rr),
        },
        Balance::Uri {
            whole,
            len,
            depth,
            path_only,
        } => {
            let uri = if *path_only {
                path_of(input.uri)
            } else {
                Some(input.uri)
            };
            match uri {
                Some(u) => {
                    let h = hash_key(&st.hash, uri_key(u, *whole, *len, *depth));
                    hashed(st, h, elig, weights, cur, room)
                }
                // No path to hash (`*`, an authority form): round robin,
                // as HAProxy.
                None => keyless(st, elig, weights, room, grp, rr),
            }
        }
        Balance::UrlParam { name } => match url_param_value(input.uri, name.as_bytes())
            .or_else(|| post_param_value(input.post?, name.as_bytes()))
        {
            Some(v) => {
                let h = hash_key(&st.hash, v);
                hashed(st, h, elig, weights, cur, room)
            }
            None => keyless(st, elig, weights, room, grp, rr),
        },
        Balance::Hdr {
            use_domain_only, ..
        } => match input.hdr {
            Some(v) => {
                let v = hdr_value(v);
                let v = if *use_domain_only { domain_part(v) } else { v };
                let h = hash_key(&st.hash, v);
                hashed(st, h, elig, weights, cur, room)
            }
            None => keyless(st, elig, weights, room, grp, rr),
        },
        Balance::Random { draws } => {
            // HAProxy's get_server_rnd: of the draws, the one serving
            // fewer streams for its weight (the later draw on a tie);
            // when that one is full or has streams queued, the stream
            // waits in the backend's queue.
            let mut best: Option<usize> = None;
            let total: u64 = weights.iter().map(|&w| u64::from(w.max(1))).sum();
            for _ in 0..(*draws).max(1) {
                let i = by_weight(st.rand() % total.max(1), elig, weights);
                let k = elig.iter().position(|&x| x == i).unwrap_or(0);
                let load = |x: usize, by: usize| u64::from(cur[x]) * u64::from(weights[by].max(1));
                best = match best {
                    Some(b) if b != k && load(k, b) > load(b, k) => Some(b),
                    _ => Some(k),
                };
            }
            match best {
                Some(k) if room[k] => Choice::Server(elig[k]),
                _ => Choice::AllFull,
            }
        }
    }
}

/// `use_domain_only`: the label before the last dot (`www.example.com`
/// -> `example`), the whole value when it has no dot, as HAProxy hashes it.
fn domain_part(v: &[u8]) -> &[u8] {
    let Some(end) = v.iter().rposition(|&c| c == b'.') else {
        return v;
    };
    let start = v[..end]
        .iter()
        .rposition(|&c| c == b'.')
        .map_or(0, |s| s + 1);
    &v[start..end]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn post_param_values_as_haproxy_reads_them() {
        fn v(b: &[u8]) -> Option<&[u8]> {
            post_param_value(b, b"id")
        }
        assert_eq!(v(b"id=7&x=1"), Some(&b"7"[..]));
        assert_eq!(v(b"a=1&id=user-9"), Some(&b"user-9"[..]));
        assert_eq!(v(b"a=1&xid=3&id=4"), Some(&b"4"[..]));
        // Only the first byte is judged: a non-token byte means no form.
        assert_eq!(v(b"id=<b>"), None);
        assert_eq!(v(b"id=a<b>&c"), Some(&b"a<b>"[..]));
        // A space first: an empty value.
        assert_eq!(v(b"id= 5"), Some(&b""[..]));
        assert_eq!(v(b"id=&b=1"), Some(&b""[..]));
        // The name must be followed by `=` and more than its own length.
        assert_eq!(v(b"id"), None);
        assert_eq!(v(b"id="), Some(&b""[..]));
        assert_eq!(v(b"idx=1"), None);
        assert_eq!(v(b""), None);
    }

    /// One pick with a fresh round-robin position.
    fn choose(
        b: &Balance,
        st: &mut State,
        elig: &[usize],
        weights: &[u32],
        cur: &[u32],
        room: &[bool],
        input: &LbInput<'_>,
    ) -> Choice {
        super::choose(
            b,
            st,
            elig,
            weights,
            cur,
            room,
            input,
            &Shared::default(),
            Group::default(),
        )
    }

    /// The servers (as letters) a backend sends `n` requests to, one at a
    /// time, with `weights`, then after each step's change: `(picks,
    /// weights)` (weight 0: the server is down), `|` between steps.
    fn script(b: &Balance, weights: &[u32], steps: &[(usize, &[u32])], n: usize) -> String {
        let mut st = State::new(0);
        st.set_hash(HashType::default(), weights);
        let sh = Shared::default();
        let mut out = String::new();
        let mut w: Vec<u32> = weights.to_vec();
        let last = [(n, weights)];
        for (k, (count, next)) in steps.iter().chain(last.iter()).enumerate() {
            for _ in 0..*count {
                let elig: Vec<usize> = (0..w.len()).filter(|&i| w[i] > 0).collect();
                // (Round robin takes HAProxy's sixteenths of a weight.)
                let scale = if matches!(b, Balance::RoundRobin) {
                    16
                } else {
                    1
                };
                let ws: Vec<u32> = elig.iter().map(|&i| w[i] * scale).collect();
                let cur = vec![0; elig.len()];
                let room = vec![true; elig.len()];
                let input = LbInput::default();
                let c = super::choose(
                    b,
                    &mut st,
                    &elig,
                    &ws,
                    &cur,
                    &room,
                    &input,
                    &sh,
                    Group::default(),
                );
                match c {
                    Choice::Server(i) => out.push((b'a' + i as u8) as char),
                    c => panic!("{c:?}"),
                }
            }
            if k < steps.len() {
                out.push('|');
                w = next.to_vec();
            }
        }
        out
    }

    /// Server sequences of HAProxy 2.6.12 (nbthread 1, one request at a
    /// time; changes by `set weight`, `disable server`, `enable server`).
    #[test]
    fn round_robin_orders_are_haproxys() {
        // (weights, changes, picks after the last one, roundrobin's
        // sequence, static-rr's).
        type Case<'a> = (&'a [u32], &'a [(usize, &'a [u32])], usize, &'a str, &'a str);
        let down_up: &[(usize, &[u32])] = &[(5, &[3, 0, 1]), (5, &[3, 2, 1])];
        let one_by_one: &[(usize, &[u32])] = &[
            (2, &[0, 1, 1]),
            (2, &[0, 1, 0]),
            (2, &[1, 1, 0]),
            (2, &[1, 1, 1]),
        ];
        let cases: &[Case<'_>] = &[
            (&[5, 1, 1], &[], 7, "aaabaac", "aaabaac"),
            (&[10, 2, 2], &[], 14, "aaabaacaaabaac", "aaabaacaaabaac"),
            (&[3, 2, 1], &[], 12, "abacababacab", "aababcaababc"),
            (
                &[10, 1, 1, 5],
                &[],
                17,
                "aadabadaadaadacad",
                "aabdaadaacdaadaad",
            ),
            (
                &[3, 2, 1],
                down_up,
                12,
                "abaca|aaaca|abacbaabacba",
                "aabab|aaaca|ababcaababca",
            ),
            (
                &[1, 1, 1],
                one_by_one,
                10,
                "ab|cb|bb|ab|abcabcabca",
                "ab|bc|bb|ba|bcabcabcab",
            ),
        ];
        for (w, steps, n, rr, srr) in cases {
            let got = script(&Balance::RoundRobin, w, steps, *n);
            assert_eq!(got, *rr, "roundrobin {w:?} {steps:?}");
            let got = script(&Balance::StaticRr, w, steps, *n);
            assert_eq!(got, *srr, "static-rr {w:?} {steps:?}");
        }
        // roundrobin's weight changes (static-rr refuses them).
        let got = script(&Balance::RoundRobin, &[3, 1, 1], &[(4, &[1, 1, 1])], 12);
        assert_eq!(got, "aaba|cbacbacbacba");
        let changes: &[(usize, &[u32])] = &[(3, &[2, 2, 1]), (6, &[2, 2, 4])];
        let got = script(&Balance::RoundRobin, &[2, 5, 1], changes, 12);
        assert_eq!(got, "bba|cbabca|bcacbcacbcac");
    }

    #[test]
    fn full_servers_are_skipped_and_all_full_waits() {
        let mut st = State::new(0);
        let elig = [0, 1, 2];
        let c = choose(
            &Balance::RoundRobin,
            &mut st,
            &elig,
            &[1, 1, 1],
            &[0; 3],
            &[false, true, false],
            &LbInput::default(),
        );
        assert_eq!(c, Choice::Server(1));
        let c = choose(
            &Balance::RoundRobin,
            &mut st,
            &elig,
            &[1, 1, 1],
            &[0; 3],
            &[false; 3],
            &LbInput::default(),
        );
        assert_eq!(c, Choice::AllFull);
        let c = choose(
            &Balance::First,
            &mut st,
            &elig,
            &[1, 1, 1],
            &[0; 3],
            &[false, false, true],
            &LbInput::default(),
        );
        assert_eq!(c, Choice::Server(2));
    }

    #[test]
    fn leastconn_counts_the_next_stream_as_haproxy() {
        // Weights 1 and 3 (in sixteenths) with 1 and 4 streams: 1/1 is
        // less than 4/3, but HAProxy compares 2 x 4096 / 16 = 512 with
        // 5 x 4096 / 48 = 426: the second.
        let mut st = State::new(0);
        let c = choose(
            &Balance::LeastConn,
            &mut st,
            &[0, 1],
            &[16, 48],
            &[1, 4],
            &[true; 2],
            &LbInput::default(),
        );
        assert_eq!(c, Choice::Server(1));
    }

    #[test]
    fn leastconn_weighs_streams() {
        let mut st = State::new(0);
        let elig = [0, 1, 2];
        let c = choose(
            &Balance::LeastConn,
            &mut st,
            &elig,
            &[1, 1, 1],
            &[5, 2, 7],
            &[true; 3],
            &LbInput::default(),
        );
        assert_eq!(c, Choice::Server(1));
        // 6 streams on weight 4 beat 2 streams on weight 1.
        let c = choose(
            &Balance::LeastConn,
            &mut st,
            &elig,
            &[4, 1, 1],
            &[6, 2, 3],
            &[true; 3],
            &LbInput::default(),
        );
        assert_eq!(c, Choice::Server(0));
    }

    #[test]
    fn hashes_are_sticky_and_bind_when_full() {
        let mut st = State::new(0);
        let elig = [0, 1, 2, 3];
        let input = LbInput {
            src: Some("10.0.0.7".parse().unwrap()),
            uri: b"/a/b/c?x=1",
            hdr: Some(b"www.Example.com"),
            post: None,
            prio: Default::default(),
        };
        for b in [
            Balance::Source,
            Balance::Uri {
                whole: false,
                len: None,
                depth: None,
                path_only: false,
            },
            Balance::Hdr {
                name: "host".into(),
                use_domain_only: false,
            },
        ] {
            let first = choose(&b, &mut st, &elig, &[1; 4], &[0; 4], &[true; 4], &input);
            for _ in 0..10 {
                assert_eq!(
                    choose(&b, &mut st, &elig, &[1; 4], &[0; 4], &[true; 4], &input),
                    first
                );
            }
            let Choice::Server(i) = first else { panic!() };
            let mut room = [true; 4];
            room[i] = false;
            assert_eq!(
                choose(&b, &mut st, &elig, &[1; 4], &[0; 4], &room, &input),
                Choice::Bound(i)
            );
        }
        // The query string does not count unless `whole`.
        let b = Balance::Uri {
            whole: false,
            len: None,
            depth: None,
            path_only: false,
        };
        let other = LbInput {
            uri: b"/a/b/c?y=2",
            ..input
        };
        assert_eq!(
            choose(&b, &mut st, &elig, &[1; 4], &[0; 4], &[true; 4], &input),
            choose(&b, &mut st, &elig, &[1; 4], &[0; 4], &[true; 4], &other)
        );
        // `path-only`: an absolute URI hashes as its path; without it, the
        // scheme and authority count (HAProxy's reg-test
        // balance/balance-uri-path-only).
        let abs = LbInput {
            uri: b"http://127.0.0.1/a/b/c",
            ..input
        };
        let pick = |b: &Balance, st: &mut State, i: &LbInput| {
            choose(b, st, &elig, &[1; 4], &[0; 4], &[true; 4], i)
        };
        let po = Balance::Uri {
            whole: false,
            len: None,
            depth: None,
            path_only: true,
        };
        assert_eq!(pick(&po, &mut st, &abs), pick(&b, &mut st, &input));
        assert_eq!(pick(&po, &mut st, &input), pick(&b, &mut st, &input));
        let first = pick(&b, &mut st, &abs);
        let differs = (0..8).any(|i| {
            let u = format!("http://h{i}.example/a/b/c");
            pick(
                &b,
                &mut st,
                &LbInput {
                    uri: u.as_bytes(),
                    ..input
                },
            ) != first
        });
        assert!(differs, "the authority counts without path-only");
    }

    #[test]
    fn path_of_skips_scheme_and_authority() {
        assert_eq!(path_of(b"/p?q"), Some(&b"/p?q"[..]));
        assert_eq!(path_of(b"https://h:8/x/y"), Some(&b"/x/y"[..]));
        assert_eq!(path_of(b"http://h"), None);
        assert_eq!(path_of(b"*"), None);
        assert_eq!(path_of(b"h:443"), None);
    }

    #[test]
    fn random_prefers_the_less_loaded_of_its_draws() {
        let mut st = State::new(0);
        let mut zero = 0;
        for _ in 0..200 {
            if let Choice::Server(0) = choose(
                &Balance::Random { draws: 2 },
                &mut st,
                &[0, 1],
                &[1, 1],
                &[0, 50],
                &[true, true],
                &LbInput::default(),
            ) {
                zero += 1;
            }
        }
        // Server 1 wins only when both draws land on it (about 1 in 4).
        assert!(zero > 120, "{zero}");
    }

    #[test]
    fn hash_functions() {
        assert_eq!(crc32(b"123456789"), 0xcbf4_3926);
        assert_eq!(djb2(b""), 5381);
        assert_eq!(djb2(b"a"), 5381 * 33 + 97);
        assert_eq!(sdbm(b"a"), 97);
        assert_eq!(sdbm(b"ab"), 98 + (97 << 6) + (97 << 16) - 97);
        assert_ne!(wt6(b"a"), wt6(b"b"));
        assert_eq!(avalanche(0), avalanche(0));
        assert_ne!(avalanche(1), avalanche(2));
    }

    #[test]
    fn map_lays_out_weights_in_declaration_order() {
        // Weights 1:2: three slots; ties go to the first declared.
        assert_eq!(build_map(&[0, 1], &[1, 2]), vec![0, 1, 1]);
        assert_eq!(build_map(&[4], &[1]), vec![4]);
        let m = build_map(&[0, 1, 2], &[3, 2, 1]);
        assert_eq!(m.len(), 6);
        assert_eq!(m.iter().filter(|&&x| x == 0).count(), 3);
        // gcd: weights 2:4 map as 1:2.
        let mut st = State::new(0);
        st.set_hash(HashType::default(), &[2, 4]);
        assert_eq!(st.table(&[0, 1], &[2, 4], false).map.len(), 3);
    }

    #[test]
    fn ring_has_sixteen_points_per_weight_and_balance_factor_spreads() {
        let ring = build_ring(&[0, 1], &[1, 2], &[1, 3]);
        assert_eq!(ring.len(), 64);
        assert!(ring.windows(2).all(|w| w[0].0 <= w[1].0));
        let h = HashType {
            consistent: true,
            avalanche: true,
            balance_factor: 125,
            ..HashType::default()
        };
        let mut st = State::new(0);
        st.set_hash(h, &[1, 1]);
        let input = LbInput {
            uri: b"/same",
            ..LbInput::default()
        };
        let b = Balance::Uri {
            whole: false,
            len: None,
            depth: None,
            path_only: false,
        };
        let first = choose(&b, &mut st, &[0, 1], &[1, 1], &[0, 0], &[true; 2], &input);
        let Choice::Server(i) = first else { panic!() };
        // The first choice is loaded far above its share: the other wins.
        let mut cur = [0, 0];
        cur[i] = 10;
        let c = choose(&b, &mut st, &[0, 1], &[1, 1], &cur, &[true; 2], &input);
        assert_eq!(c, Choice::Server(1 - i));
    }

    #[test]
    fn keys_are_haproxys() {
        assert_eq!(uri_key(b"/a/b/c?x", false, None, None), b"/a/b/c");
        assert_eq!(uri_key(b"/a/b/c?x", true, None, None), b"/a/b/c?x");
        assert_eq!(uri_key(b"/a/b/c", false, None, Some(2)), b"/a/b");
        assert_eq!(uri_key(b"/a/b/c", false, Some(3), None), b"/a/");
        assert_eq!(hdr_value(b"  v1 , v2"), b"v1");
        assert_eq!(source_key("10.0.0.1".parse().unwrap()), 0x0a00_0001);
    }

    #[test]
    fn domain_only() {
        assert_eq!(domain_part(b"www.example.com:8080"), b"example");
        assert_eq!(domain_part(b"localhost"), b"localhost");
    }
}
