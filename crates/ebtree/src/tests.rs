//! Unit tests: each operation, duplicates order, wrap-around, deletes of
//! first/middle/last/duplicate heads. The property tests in `tests/` check
//! random sequences against a `BTreeMap` model.

use super::*;

fn keys<V, S: Scope>(t: &EbTree<u32, V, S>) -> Vec<u32> {
    t.iter().map(|(_, k, _)| k).collect()
}

fn vals<V: Copy, S: Scope>(t: &EbTree<u32, V, S>) -> Vec<V> {
    t.iter().map(|(_, _, v)| *v).collect()
}

#[test]
fn empty_tree() {
    let t: Eb32Tree<()> = EbTree::new();
    assert!(t.is_empty());
    assert_eq!(t.first(), None);
    assert_eq!(t.last(), None);
    assert_eq!(t.lookup(3), None);
    assert_eq!(t.lookup_ge(3), None);
    assert_eq!(t.lookup_le(3), None);
    assert_eq!(t.lookup_ge_wrap(3), None);
    t.validate().unwrap();
}

#[test]
fn insert_orders_keys() {
    let mut t = Eb32Tree::new();
    for k in [50u32, 3, 99, 7, 0, u32::MAX, 12, 64, 65, 1] {
        t.insert(k, k);
        t.validate().unwrap();
    }
    assert_eq!(keys(&t), vec![0, 1, 3, 7, 12, 50, 64, 65, 99, u32::MAX]);
    assert_eq!(t.len(), 10);
    assert_eq!(t.key(t.first().unwrap()), Some(0));
    assert_eq!(t.key(t.last().unwrap()), Some(u32::MAX));
}

#[test]
fn next_and_prev_walk_both_ways() {
    let mut t = Eb64Tree::new();
    let ks = [5u64, 1 << 40, 17, 3, 1 << 63, 17, 9];
    for (i, k) in ks.iter().enumerate() {
        t.insert(*k, i);
    }
    let mut fwd = vec![];
    let mut h = t.first();
    while let Some(x) = h {
        fwd.push(t.key(x).unwrap());
        h = t.next(x);
    }
    let mut bwd = vec![];
    let mut h = t.last();
    while let Some(x) = h {
        bwd.push(t.key(x).unwrap());
        h = t.prev(x);
    }
    bwd.reverse();
    assert_eq!(fwd, vec![3, 5, 9, 17, 17, 1 << 40, 1 << 63]);
    assert_eq!(fwd, bwd);
}

#[test]
fn duplicates_are_fifo() {
    let mut t = Eb32Tree::new();
    t.insert(10, 100);
    for i in 0..50u32 {
        t.insert(7, i);
        t.validate().unwrap();
    }
    t.insert(3, 200);
    assert_eq!(
        vals(&t),
        [200]
            .into_iter()
            .chain(0..50)
            .chain([100])
            .collect::<Vec<_>>()
    );
    // lookup returns the oldest duplicate, lookup_le the newest.
    assert_eq!(t.get(t.lookup(7).unwrap()), Some(&0));
    assert_eq!(t.get(t.lookup_ge(4).unwrap()), Some(&0));
    assert_eq!(t.get(t.lookup_le(7).unwrap()), Some(&49));
    assert_eq!(t.get(t.lookup_le(9).unwrap()), Some(&49));
}

#[test]
fn duplicates_stay_fifo_across_deletes() {
    let mut t = Eb32Tree::new();
    let hs: Vec<_> = (0..20u32).map(|i| t.insert(4, i)).collect();
    // Delete every third one, then append more: order must stay by insertion.
    for h in hs.iter().step_by(3) {
        t.delete(*h).unwrap();
        t.validate().unwrap();
    }
    for i in 20..30 {
        t.insert(4, i);
        t.validate().unwrap();
    }
    let expect: Vec<u32> = (0..30).filter(|i| *i >= 20 || i % 3 != 0).collect();
    assert_eq!(vals(&t), expect);
}

#[test]
fn lookups_ge_le_exact() {
    let mut t = Eb32Tree::new();
    for k in [10u32, 20, 30, 40] {
        t.insert(k, ());
    }
    let k = |h: Option<Handle>| h.and_then(|h| t.key(h));
    assert_eq!(k(t.lookup(20)), Some(20));
    assert_eq!(k(t.lookup(21)), None);
    assert_eq!(k(t.lookup_ge(0)), Some(10));
    assert_eq!(k(t.lookup_ge(21)), Some(30));
    assert_eq!(k(t.lookup_ge(40)), Some(40));
    assert_eq!(k(t.lookup_ge(41)), None);
    assert_eq!(k(t.lookup_le(9)), None);
    assert_eq!(k(t.lookup_le(10)), Some(10));
    assert_eq!(k(t.lookup_le(39)), Some(30));
    assert_eq!(k(t.lookup_le(u32::MAX)), Some(40));
}

#[test]
fn wrap_lookup_scans_ticks_across_the_u32_boundary() {
    // Timers armed just before the wrap and just after it.
    let now = u32::MAX - 5;
    let mut t = Eb32Tree::new();
    for d in [10u32, 1, 3, 20] {
        t.insert(now.wrapping_add(d), d);
    }
    // Keys: MAX-4 (1), MAX-2 (3), 4 (10), 14 (20). Scan from now - 2^31.
    let start = now.wrapping_sub(1 << 31);
    let mut order = vec![];
    let mut h = t.lookup_ge_wrap(start);
    for _ in 0..t.len() {
        let x = h.unwrap();
        order.push(*t.get(x).unwrap());
        h = t.next(x).or_else(|| t.first());
    }
    assert_eq!(order, vec![1, 3, 10, 20]);
    // Past the largest key, the wrap lookup goes back to the smallest.
    assert_eq!(t.get(t.lookup_ge_wrap(u32::MAX).unwrap()), Some(&10));
    assert_eq!(t.get(t.lookup_ge_wrap(u32::MAX - 3).unwrap()), Some(&3));
}

#[test]
fn delete_first_middle_last_and_dup_heads() {
    let mut t = Eb32Tree::new();
    let a = t.insert(1, 'a');
    let b = t.insert(5, 'b');
    let c1 = t.insert(9, 'c');
    let c2 = t.insert(9, 'd');
    let c3 = t.insert(9, 'e');
    let d = t.insert(13, 'f');
    assert_eq!(t.delete(a), Some('a')); // first
    t.validate().unwrap();
    assert_eq!(t.delete(d), Some('f')); // last
    t.validate().unwrap();
    assert_eq!(t.delete(c1), Some('c')); // head of a dup list
    t.validate().unwrap();
    assert_eq!(vals(&t), vec!['b', 'd', 'e']);
    assert_eq!(t.delete(c2), Some('d')); // new head
    assert_eq!(t.delete(b), Some('b')); // middle
    t.validate().unwrap();
    assert_eq!(vals(&t), vec!['e']);
    assert_eq!(t.delete(c3), Some('e'));
    assert!(t.is_empty());
    t.validate().unwrap();
}

#[test]
fn stale_handles_are_detected() {
    let mut t = Eb32Tree::new();
    let a = t.insert(1, 1);
    assert_eq!(t.delete(a), Some(1));
    assert_eq!(t.delete(a), None);
    // The slot is reused by the next insert; the old handle stays stale.
    let b = t.insert(2, 2);
    assert_eq!(a.slot(), b.slot());
    assert_eq!(t.get(a), None);
    assert_eq!(t.next(a), None);
    assert!(!t.requeue(a, 9));
    assert_eq!(t.get(b), Some(&2));
}

#[test]
fn requeue_keeps_the_handle() {
    let mut t = Eb32Tree::new();
    let a = t.insert(1, 'a');
    t.insert(5, 'b');
    t.insert(7, 'c');
    assert!(t.requeue(a, 6));
    t.validate().unwrap();
    assert_eq!(vals(&t), vec!['b', 'a', 'c']);
    assert_eq!(t.key(a), Some(6));
    // Requeue at an equal key goes after the existing one.
    assert!(t.requeue(a, 7));
    assert_eq!(vals(&t), vec!['b', 'c', 'a']);
}

#[test]
fn pop_first_drains_in_order() {
    let mut t = Eb64Tree::new();
    for k in [9u64, 2, 2, 7, 0] {
        t.insert(k, k);
    }
    let mut out = vec![];
    while let Some((k, _)) = t.pop_first() {
        out.push(k);
        t.validate().unwrap();
    }
    assert_eq!(out, vec![0, 2, 2, 7, 9]);
}

#[test]
fn scoped_walks_skip_other_scopes() {
    let mut t = Eb32ScTree::new();
    for i in 0..64u32 {
        t.insert(i, 1 << (i % 4), i);
        t.validate().unwrap();
    }
    let mut seen = vec![];
    let mut h = t.first_in_scope(0b100);
    while let Some(x) = h {
        seen.push(*t.get(x).unwrap());
        h = t.next_in_scope(x, 0b100);
    }
    assert_eq!(seen, (0..64).filter(|i| i % 4 == 2).collect::<Vec<_>>());
    assert_eq!(t.key(t.lookup_ge_in_scope(11, 0b1).unwrap()), Some(12));
    assert_eq!(
        t.key(t.lookup_ge_in_scope(62, 0b1).unwrap_or(t.first().unwrap())),
        Some(0)
    );
    assert_eq!(t.key(t.lookup_ge_wrap_in_scope(62, 0b10).unwrap()), Some(1));
    assert_eq!(t.first_in_scope(1 << 40), None);
}

#[test]
fn scope_masks_shrink_after_deletes() {
    let mut t = Eb32ScTree::new();
    let hs: Vec<_> = (0..32u32).map(|i| t.insert(i, 1 << (i % 2), i)).collect();
    // Remove every entry of scope 1: no walk may find one, and no node may
    // still claim one (validate checks the masks are exact).
    for h in hs.iter().step_by(2) {
        t.delete(*h);
        t.validate().unwrap();
    }
    assert_eq!(t.first_in_scope(1), None);
    let mut v = Visits::default();
    assert!(t.first_in_scope_counted(2, &mut v).is_some());
    assert!(v.0 <= 2 * 5 + 8, "visited {}", v.0);
}

#[test]
fn scoped_duplicates_keep_fifo() {
    let mut t = Eb64ScTree::new();
    for i in 0..40u32 {
        t.insert(77, if i % 3 == 0 { 0b01 } else { 0b10 }, i);
        t.validate().unwrap();
    }
    let mut seen = vec![];
    let mut h = t.first_in_scope(0b01);
    while let Some(x) = h {
        seen.push(*t.get(x).unwrap());
        h = t.next_in_scope(x, 0b01);
    }
    assert_eq!(seen, (0..40).filter(|i| i % 3 == 0).collect::<Vec<_>>());
}

#[test]
fn scoped_lookup_visits_stay_logarithmic() {
    // 64k entries interleaved over 8 threads; thread 0's entries all moved to
    // the end, as when one thread consumes while the others' work waits.
    let n = 1u32 << 16;
    let mut t = Eb32ScTree::with_capacity(n as usize);
    for i in 0..n {
        t.insert(i, 1 << (i % 8), i);
    }
    for next in n..n + n / 8 {
        let h = t.first_in_scope(1).unwrap();
        t.delete(h);
        t.insert(next, 1, next);
    }
    t.validate().unwrap();
    let mut v = Visits::default();
    let h = t.first_in_scope_counted(1, &mut v).unwrap();
    assert_eq!(t.key(h), Some(n));
    assert!(v.0 <= 2 * 16 + 8, "visited {}", v.0);
}

#[test]
fn byte_strings_with_nuls_and_prefixes_are_distinct_and_ordered() {
    let mut t = EbStTree::new();
    let ks: [&[u8]; 7] = [b"a\0", b"a", b"", b"ab", b"\0", b"a\0\0", b"b"];
    for (i, k) in ks.iter().enumerate() {
        t.insert(BytesKey::from(*k), i);
        t.validate().unwrap();
    }
    let got: Vec<Vec<u8>> = t.iter().map(|(_, k, _)| k.0.to_vec()).collect();
    let mut want: Vec<Vec<u8>> = ks.iter().map(|k| k.to_vec()).collect();
    want.sort();
    assert_eq!(got, want);
    assert_eq!(
        t.get(t.lookup_ref(&BytesKey::from(&b"a"[..])).unwrap()),
        Some(&1)
    );
    assert_eq!(
        t.get(t.lookup_ref(&BytesKey::from(&b"a\0"[..])).unwrap()),
        Some(&0)
    );
    assert_eq!(t.lookup_ref(&BytesKey::from(&b"a\0\0\0"[..])), None);
}

#[test]
fn ipv4_keys_in_network_order_and_unique_insert() {
    let mut t = EbIpv4Tree::new();
    for a in [[10, 0, 0, 1], [192, 168, 1, 1], [10, 0, 0, 0], [1, 2, 3, 4]] {
        t.insert_unique(MbKey(a), ()).unwrap();
        t.validate().unwrap();
    }
    let (h, ()) = t.insert_unique(MbKey([10, 0, 0, 1]), ()).unwrap_err();
    assert_eq!(t.key(h), Some(MbKey([10, 0, 0, 1])));
    let order: Vec<[u8; 4]> = t.iter().map(|(_, k, _)| k.0).collect();
    assert_eq!(
        order,
        vec![[1, 2, 3, 4], [10, 0, 0, 0], [10, 0, 0, 1], [192, 168, 1, 1]]
    );
    assert_eq!(MbKey([10, 1, 255, 7]).masked(12), MbKey([10, 0, 0, 0]));
    assert_eq!(MbKey([10, 1, 255, 7]).masked(23), MbKey([10, 1, 254, 0]));
    assert_eq!(MbKey([10, 1, 255, 7]).masked(0), MbKey([0, 0, 0, 0]));
}

#[test]
fn prefix_tree_longest_match() {
    let mut p = PrefixTree::<4, &str>::new();
    p.insert(MbKey([10, 0, 0, 0]), 8, "ten").unwrap();
    p.insert(MbKey([10, 0, 0, 0]), 16, "ten-zero").unwrap();
    p.insert(MbKey([10, 0, 3, 9]), 24, "ten-zero-three")
        .unwrap();
    p.insert(MbKey([0, 0, 0, 0]), 0, "default").unwrap();
    assert!(p.insert(MbKey([10, 9, 9, 9]), 8, "again").is_err());
    p.validate().unwrap();
    fn at(p: &PrefixTree<4, &'static str>, a: [u8; 4]) -> Option<&'static str> {
        p.get(p.lookup_longest(MbKey(a))?).copied()
    }
    assert_eq!(at(&p, [10, 0, 3, 200]), Some("ten-zero-three"));
    assert_eq!(at(&p, [10, 0, 4, 1]), Some("ten-zero"));
    assert_eq!(at(&p, [10, 7, 0, 1]), Some("ten"));
    assert_eq!(at(&p, [11, 0, 0, 1]), Some("default"));
    let h = p.lookup_prefix(MbKey([10, 0, 99, 1]), 16).unwrap();
    assert_eq!(p.delete(h), Some("ten-zero"));
    assert_eq!(at(&p, [10, 0, 4, 1]), Some("ten"));
    p.validate().unwrap();
}
