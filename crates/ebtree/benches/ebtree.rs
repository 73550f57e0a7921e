//! ebtree micro-benchmarks (`cargo bench -p ebtree`).
//!
//! 1. Scheduler pattern: N entries; take the first and reinsert it at a later
//!    key, as a run queue does (ebtree's own `sched` test): at the insertion
//!    counter (`sched_pattern`), and at a random later key (`random_requeue`).
//!    Against BTreeMap and BinaryHeap doing the same work.
//! 2. Timer pattern: arm timers at random future keys, cancel half of them
//!    before expiry, pop the expired ones in order. Against BTreeMap.
//! 3. Scoped lookup: 100k entries interleaved over 2, 8 and 64 thread masks;
//!    one thread looks for its next entry, with the scope-aware walk and with
//!    a naive walk that steps over foreign entries one by one. The nodes
//!    visited per lookup are printed before criterion's timings.
//! 4. Multi-byte keys (stick-table pattern): 100k IPv4, IPv6 and string keys
//!    (random, as client addresses and cookies are); one lookup of a present
//!    key, and one insert + delete of a fresh key, in ebtree, BTreeMap and
//!    HashMap (std's SipHash, as a stick table keyed by client input needs).

use std::cmp::Reverse;
use std::collections::{BTreeMap, BinaryHeap, HashMap};
use std::hint::black_box;
use std::time::Duration;

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};
use ebtree::{BytesKey, Eb32ScTree, Eb64Tree, EbTree, Key, MbKey, Visits};

/// xorshift64*: cheap deterministic pseudo-random numbers.
struct Rng(u64);
impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }
}

/// Keys for one step of a requeue benchmark: `Counter` is the run queue's
/// case (the task goes back at the insertion counter, after everything
/// queued), `Random` puts it at first + rand(0..n) (a timer-like spread).
#[derive(Clone, Copy)]
enum Spread {
    Counter,
    Random,
}

impl Spread {
    fn name(self) -> &'static str {
        match self {
            Spread::Counter => "sched_pattern",
            Spread::Random => "random_requeue",
        }
    }
    fn initial(self, i: u64, n: u64, r: &mut Rng) -> u64 {
        match self {
            Spread::Counter => i,
            Spread::Random => r.next() % n,
        }
    }
    fn later(self, first: u64, ctr: &mut u64, n: u64, r: &mut Rng) -> u64 {
        *ctr += 1;
        match self {
            Spread::Counter => *ctr,
            Spread::Random => first + r.next() % n,
        }
    }
}

/// Each step takes the first entry and reinserts it at a later key.
fn requeue_bench(c: &mut Criterion, spread: Spread) {
    let mut g = c.benchmark_group(spread.name());
    g.throughput(Throughput::Elements(1));
    for n in [1_000u64, 100_000] {
        g.bench_with_input(BenchmarkId::new("ebtree", n), &n, |b, &n| {
            let mut t = Eb64Tree::with_capacity(n as usize);
            let mut r = Rng(0x9e37_79b9_7f4a_7c15);
            for i in 0..n {
                t.insert(spread.initial(i, n, &mut r), 0u32);
            }
            let mut ctr = n;
            b.iter(|| {
                let h = t.first().unwrap();
                let k = t.key(h).unwrap();
                let v = t.delete(h).unwrap();
                t.insert(spread.later(k, &mut ctr, n, &mut r), v);
            });
            black_box(t.len());
        });
        g.bench_with_input(BenchmarkId::new("ebtree_requeue", n), &n, |b, &n| {
            let mut t = Eb64Tree::with_capacity(n as usize);
            let mut r = Rng(0x9e37_79b9_7f4a_7c15);
            for i in 0..n {
                t.insert(spread.initial(i, n, &mut r), 0u32);
            }
            let mut ctr = n;
            b.iter(|| {
                let h = t.first().unwrap();
                let k = t.key(h).unwrap();
                t.requeue(h, spread.later(k, &mut ctr, n, &mut r));
            });
            black_box(t.len());
        });
        g.bench_with_input(BenchmarkId::new("btreemap", n), &n, |b, &n| {
            // (key, sequence) keeps duplicates apart and FIFO, as ebtree does.
            let mut t = BTreeMap::new();
            let mut r = Rng(0x9e37_79b9_7f4a_7c15);
            let mut seq = 0u64;
            for i in 0..n {
                t.insert((spread.initial(i, n, &mut r), seq), 0u32);
                seq += 1;
            }
            let mut ctr = n;
            b.iter(|| {
                let ((k, _), v) = t.pop_first().unwrap();
                t.insert((spread.later(k, &mut ctr, n, &mut r), seq), v);
                seq += 1;
            });
            black_box(t.len());
        });
        g.bench_with_input(BenchmarkId::new("binaryheap", n), &n, |b, &n| {
            let mut t = BinaryHeap::new();
            let mut r = Rng(0x9e37_79b9_7f4a_7c15);
            let mut seq = 0u64;
            for i in 0..n {
                t.push(Reverse((spread.initial(i, n, &mut r), seq, 0u32)));
                seq += 1;
            }
            let mut ctr = n;
            b.iter(|| {
                let Reverse((k, _, v)) = t.pop().unwrap();
                t.push(Reverse((spread.later(k, &mut ctr, n, &mut r), seq, v)));
                seq += 1;
            });
            black_box(t.len());
        });
    }
    g.finish();
}

fn sched_pattern(c: &mut Criterion) {
    requeue_bench(c, Spread::Counter);
}

fn random_requeue(c: &mut Criterion) {
    requeue_bench(c, Spread::Random);
}

fn timer_pattern(c: &mut Criterion) {
    // One iteration = 10k timers armed at now + rand(1..10000) ms, half of them
    // cancelled, the rest expired in order while `now` advances.
    const M: u64 = 10_000;
    let mut g = c.benchmark_group("timer_pattern");
    g.throughput(Throughput::Elements(M));
    g.bench_function("ebtree", |b| {
        let mut t = Eb64Tree::with_capacity(M as usize);
        let mut r = Rng(42);
        let mut hs = Vec::with_capacity(M as usize);
        let mut now = 0u64;
        b.iter(|| {
            for i in 0..M {
                hs.push(t.insert(now + 1 + r.next() % 10_000, i));
            }
            for h in hs.iter().step_by(2) {
                t.delete(*h);
            }
            hs.clear();
            while let Some(h) = t.first() {
                now = t.key(h).unwrap();
                black_box(t.delete(h));
            }
        });
    });
    g.bench_function("btreemap", |b| {
        let mut t = BTreeMap::new();
        let mut r = Rng(42);
        let mut ks = Vec::with_capacity(M as usize);
        let mut now = 0u64;
        b.iter(|| {
            for i in 0..M {
                let k = (now + 1 + r.next() % 10_000, i);
                t.insert(k, i);
                ks.push(k);
            }
            for k in ks.iter().step_by(2) {
                t.remove(k);
            }
            ks.clear();
            while let Some(((k, _), v)) = t.pop_first() {
                now = k;
                black_box(v);
            }
        });
    });
    g.finish();
}

/// A tree of `n` entries interleaved over `threads` masks, in the steady
/// state where thread 0 has consumed and requeued all of its entries, which
/// now sit after every other thread's.
fn scoped_tree(n: u32, threads: u32) -> Eb32ScTree<u32> {
    let mut t = Eb32ScTree::with_capacity(n as usize);
    for i in 0..n {
        t.insert(i, 1 << (i % threads), i);
    }
    for next in n..n + n.div_ceil(threads) {
        let h = t.first_in_scope(1).unwrap();
        t.delete(h);
        t.insert(next, 1, next);
    }
    t
}

fn naive_first(t: &Eb32ScTree<u32>, mask: u64, v: &mut u64) -> Option<ebtree::Handle> {
    let mut h = t.first();
    while let Some(x) = h {
        *v += 1;
        if t.scope_of(x).unwrap() & mask != 0 {
            return Some(x);
        }
        h = t.next(x);
    }
    None
}

fn scoped_lookup(c: &mut Criterion) {
    const N: u32 = 100_000;
    let mut g = c.benchmark_group("scoped_lookup");
    g.throughput(Throughput::Elements(1));
    for threads in [2u32, 8, 64] {
        let t = scoped_tree(N, threads);
        let mut v = Visits::default();
        let a = t.first_in_scope_counted(1, &mut v).unwrap();
        let mut naive = 0u64;
        let b = naive_first(&t, 1, &mut naive).unwrap();
        assert_eq!(a, b);
        // Walking on through the thread's entries, one next at a time.
        let mut vn = Visits::default();
        let mut h = a;
        let mut steps = 0u64;
        while let Some(x) = t.next_in_scope_counted(h, 1, &mut vn) {
            h = x;
            steps += 1;
        }
        println!(
            "scoped_lookup N={N} threads={threads}: first_in_scope visits {} nodes \
             (bound 2*log2(N)+8 = {}), naive walk visits {naive}; \
             next_in_scope visits {:.1} nodes on average",
            v.0,
            2 * (32 - N.leading_zeros()) + 8,
            vn.0 as f64 / steps.max(1) as f64
        );
        g.bench_with_input(BenchmarkId::new("scoped_first", threads), &t, |b, t| {
            b.iter(|| black_box(t.first_in_scope(black_box(1))));
        });
        g.bench_with_input(BenchmarkId::new("naive_first", threads), &t, |b, t| {
            b.iter(|| {
                let mut v = 0;
                black_box(naive_first(t, black_box(1), &mut v))
            });
        });
        // The scheduler's step: find my next entry, take it, requeue it later.
        g.bench_with_input(
            BenchmarkId::new("scoped_take_requeue", threads),
            &threads,
            |b, &th| {
                let mut t = scoped_tree(N, th);
                let mut next = t.key(t.last().unwrap()).unwrap() + 1;
                b.iter(|| {
                    let h = t.first_in_scope(1).unwrap();
                    t.requeue(h, next);
                    next += 1;
                });
            },
        );
    }
    g.finish();
}

/// Runs the multi-byte group for keys made by `mk` from random numbers.
fn mb_group<K: Key + std::hash::Hash>(c: &mut Criterion, name: &str, mk: impl Fn(u64, u64) -> K) {
    const N: usize = 100_000;
    let mut r = Rng(7);
    let keys: Vec<K> = (0..N).map(|_| mk(r.next(), r.next())).collect();
    let fresh: Vec<K> = (0..N).map(|_| mk(r.next(), r.next())).collect();
    let mut g = c.benchmark_group(name);
    g.throughput(Throughput::Elements(1));
    let mut t = EbTree::<K, u32>::with_capacity(N);
    let mut bt = BTreeMap::new();
    let mut hm = HashMap::with_capacity(N);
    for (i, k) in keys.iter().enumerate() {
        t.insert(k.clone(), i as u32);
        bt.insert(k.clone(), i as u32);
        hm.insert(k.clone(), i as u32);
    }
    let mut i = 0;
    g.bench_function("ebtree_lookup", |b| {
        b.iter(|| {
            i = (i + 7919) % N;
            black_box(t.lookup_ref(&keys[i]))
        })
    });
    g.bench_function("btreemap_lookup", |b| {
        b.iter(|| {
            i = (i + 7919) % N;
            black_box(bt.get(&keys[i]))
        })
    });
    g.bench_function("hashmap_lookup", |b| {
        b.iter(|| {
            i = (i + 7919) % N;
            black_box(hm.get(&keys[i]))
        })
    });
    g.bench_function("ebtree_insert_delete", |b| {
        b.iter(|| {
            i = (i + 7919) % N;
            let h = t.insert(fresh[i].clone(), 0);
            black_box(t.delete(h))
        })
    });
    g.bench_function("btreemap_insert_delete", |b| {
        b.iter(|| {
            i = (i + 7919) % N;
            bt.insert(fresh[i].clone(), 0);
            black_box(bt.remove(&fresh[i]))
        })
    });
    g.bench_function("hashmap_insert_delete", |b| {
        b.iter(|| {
            i = (i + 7919) % N;
            hm.insert(fresh[i].clone(), 0);
            black_box(hm.remove(&fresh[i]))
        })
    });
    g.finish();
}

fn multibyte(c: &mut Criterion) {
    mb_group(c, "mb_ipv4", |a, _| MbKey((a as u32).to_be_bytes()));
    mb_group(c, "mb_ipv6", |a, b| {
        let mut k = [0u8; 16];
        k[..8].copy_from_slice(&a.to_be_bytes());
        k[8..].copy_from_slice(&b.to_be_bytes());
        MbKey(k)
    });
    // Session-cookie-like strings: a shared prefix and 16 hex digits.
    mb_group(c, "mb_string", |a, _| {
        BytesKey(format!("sess-{a:016x}").into_bytes().into_boxed_slice())
    });
}

fn config() -> Criterion {
    Criterion::default()
        .warm_up_time(Duration::from_millis(500))
        .measurement_time(Duration::from_secs(2))
        .sample_size(30)
}

criterion_group! {
    name = benches;
    config = config();
    targets = sched_pattern, random_requeue, timer_pattern, scoped_lookup, multibyte
}
criterion_main!(benches);
