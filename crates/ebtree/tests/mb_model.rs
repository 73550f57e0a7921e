//! Property tests for multi-byte keys: fixed-length byte keys (IPv4, IPv6),
//! byte strings of any length (NULs included, prefixes of one another) and
//! prefix trees, against a `BTreeMap` model (and a brute-force longest
//! match), validating the whole tree after every step.

use std::collections::BTreeMap;

use ebtree::{BytesKey, EbTree, Handle, Key, MbKey, PrefixTree};
use proptest::prelude::*;

#[derive(Debug, Clone)]
enum Op<K> {
    Insert(K),
    InsertUnique(K),
    Delete(usize),
    Requeue(usize, K),
    Lookup(K),
    LookupGe(K),
    LookupLe(K),
    Walk,
}

fn run<K: Key>(ops: Vec<Op<K>>) -> Result<(), TestCaseError> {
    let mut t: EbTree<K, u32> = EbTree::new();
    // (key, insertion sequence) -> value
    let mut m: BTreeMap<(K, u64), u32> = BTreeMap::new();
    let mut live: Vec<(Handle, K, u64)> = vec![];
    let mut seq = 0u64;
    let mut val = 0u32;
    let first_of = |m: &BTreeMap<(K, u64), u32>, k: &K| {
        m.range((k.clone(), 0)..=(k.clone(), u64::MAX))
            .next()
            .map(|(_, v)| *v)
    };
    for op in ops {
        match op {
            Op::Insert(k) => {
                let h = t.insert(k.clone(), val);
                m.insert((k.clone(), seq), val);
                live.push((h, k, seq));
                seq += 1;
                val += 1;
            }
            Op::InsertUnique(k) => match (t.insert_unique(k.clone(), val), first_of(&m, &k)) {
                (Ok(h), None) => {
                    m.insert((k.clone(), seq), val);
                    live.push((h, k, seq));
                    seq += 1;
                    val += 1;
                }
                (Err((h, v)), Some(old)) => {
                    prop_assert_eq!(v, val);
                    prop_assert_eq!(t.get(h).copied(), Some(old));
                }
                (r, want) => {
                    return Err(TestCaseError::fail(format!(
                        "insert_unique {k:?}: {:?} but model has {want:?}",
                        r.map_err(|e| e.0)
                    )))
                }
            },
            Op::Delete(i) if !live.is_empty() => {
                let (h, k, s) = live.swap_remove(i % live.len());
                let v = m.remove(&(k, s)).unwrap();
                prop_assert_eq!(t.delete(h), Some(v));
                prop_assert_eq!(t.delete(h), None);
            }
            Op::Requeue(i, k) if !live.is_empty() => {
                let i = i % live.len();
                let (h, ok, os) = live[i].clone();
                let v = m.remove(&(ok, os)).unwrap();
                m.insert((k.clone(), seq), v);
                prop_assert!(t.requeue(h, k.clone()));
                prop_assert_eq!(t.key_ref(h), Some(&k));
                live[i] = (h, k, seq);
                seq += 1;
            }
            Op::Lookup(k) => {
                prop_assert_eq!(
                    t.lookup_ref(&k).and_then(|h| t.get(h).copied()),
                    first_of(&m, &k)
                );
            }
            Op::LookupGe(k) => {
                let want = m.range((k.clone(), 0)..).next().map(|(_, v)| *v);
                prop_assert_eq!(t.lookup_ge(k).and_then(|h| t.get(h).copied()), want);
            }
            Op::LookupLe(k) => {
                let want = m
                    .range(..=(k.clone(), u64::MAX))
                    .next_back()
                    .map(|(_, v)| *v);
                prop_assert_eq!(t.lookup_le(k).and_then(|h| t.get(h).copied()), want);
            }
            Op::Walk => {
                let fwd: Vec<(K, u32)> = t.iter().map(|(_, k, v)| (k, *v)).collect();
                let want: Vec<(K, u32)> = m.iter().map(|((k, _), v)| (k.clone(), *v)).collect();
                prop_assert_eq!(&fwd, &want);
                let mut bwd = vec![];
                let mut h = t.last();
                while let Some(x) = h {
                    bwd.push(*t.get(x).unwrap());
                    h = t.prev(x);
                }
                bwd.reverse();
                prop_assert_eq!(bwd, want.iter().map(|(_, v)| *v).collect::<Vec<_>>());
            }
            _ => {}
        }
        prop_assert_eq!(t.len(), m.len());
        if let Err(e) = t.validate() {
            return Err(TestCaseError::fail(e));
        }
    }
    Ok(())
}

fn ops<K: Key + 'static>(
    key: impl Strategy<Value = K> + Clone,
) -> impl Strategy<Value = Vec<Op<K>>> {
    let op = prop_oneof![
        4 => key.clone().prop_map(Op::Insert),
        3 => key.clone().prop_map(Op::InsertUnique),
        3 => any::<usize>().prop_map(Op::Delete),
        2 => (any::<usize>(), key.clone()).prop_map(|(i, k)| Op::Requeue(i, k)),
        2 => key.clone().prop_map(Op::Lookup),
        1 => key.clone().prop_map(Op::LookupGe),
        1 => key.prop_map(Op::LookupLe),
        1 => Just(Op::Walk),
    ];
    proptest::collection::vec(op, 1..300)
}

/// IPv4-like keys clustered in a few /24s so that they share long prefixes.
fn ipv4() -> impl Strategy<Value = MbKey<4>> + Clone {
    prop_oneof![
        any::<[u8; 4]>().prop_map(MbKey),
        (0u8..3, any::<u8>()).prop_map(|(n, h)| MbKey([10, 0, n, h % 8])),
    ]
}

fn ipv6() -> impl Strategy<Value = MbKey<16>> + Clone {
    prop_oneof![
        any::<[u8; 16]>().prop_map(MbKey),
        (0u8..4, 0u8..4).prop_map(|(a, b)| {
            let mut k = [0u8; 16];
            k[0] = 0x20;
            k[1] = 0x01;
            k[7] = a;
            k[15] = b;
            MbKey(k)
        }),
    ]
}

/// Short strings over a tiny alphabet with NULs: many prefixes of each other.
fn bytes() -> impl Strategy<Value = BytesKey> + Clone {
    prop_oneof![
        proptest::collection::vec(prop_oneof![Just(0u8), Just(b'a'), Just(0xff)], 0..5),
        proptest::collection::vec(any::<u8>(), 0..40),
    ]
    .prop_map(|v| BytesKey(v.into_boxed_slice()))
}

#[derive(Debug, Clone)]
enum POp {
    Insert([u8; 4], u32),
    Delete(usize),
    Longest([u8; 4]),
    Exact([u8; 4], u32),
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

    #[test]
    fn ipv4_keys(o in ops(ipv4())) {
        run(o)?;
    }

    #[test]
    fn ipv6_keys(o in ops(ipv6())) {
        run(o)?;
    }

    #[test]
    fn byte_string_keys(o in ops(bytes())) {
        run(o)?;
    }

    /// Prefix tree against a brute-force list of (prefix, len, value).
    #[test]
    fn prefixes_longest_match(o in proptest::collection::vec(prop_oneof![
        3 => (any::<[u8; 4]>(), 0u32..=33).prop_map(|(k, l)| POp::Insert([10, k[1] % 2, k[2] % 4, k[3]], l)),
        1 => (any::<[u8; 4]>(), 0u32..=32).prop_map(|(k, l)| POp::Insert(k, l)),
        2 => any::<usize>().prop_map(POp::Delete),
        3 => any::<[u8; 4]>().prop_map(|k| POp::Longest([10, k[1] % 2, k[2] % 4, k[3]])),
        1 => any::<[u8; 4]>().prop_map(POp::Longest),
        1 => (any::<[u8; 4]>(), 0u32..=32).prop_map(|(k, l)| POp::Exact([10, 0, k[2] % 4, k[3]], l)),
    ], 1..200)) {
        let mut t = PrefixTree::<4, u32>::new();
        let mut model: Vec<(u32, u32, u32, Handle)> = vec![]; // net, len, val, handle
        let net = |k: [u8; 4], l: u32| if l == 0 { 0 } else { u32::from_be_bytes(k) & (u32::MAX << (32 - l)) };
        let mut val = 0;
        for op in o {
            match op {
                POp::Insert(k, l) => {
                    let lc = l.min(32);
                    let n = net(k, lc);
                    let dup = model.iter().find(|e| e.0 == n && e.1 == lc).map(|e| e.3);
                    match t.insert(MbKey(k), l, val) {
                        Ok(h) => { prop_assert!(dup.is_none()); model.push((n, lc, val, h)); }
                        Err((h, v)) => { prop_assert_eq!(Some(h), dup); prop_assert_eq!(v, val); }
                    }
                    val += 1;
                }
                POp::Delete(i) if !model.is_empty() => {
                    let e = model.swap_remove(i % model.len());
                    prop_assert_eq!(t.delete(e.3), Some(e.2));
                }
                POp::Longest(a) => {
                    let a32 = u32::from_be_bytes(a);
                    let want = model.iter().filter(|e| net(a, e.1) == e.0).max_by_key(|e| e.1).map(|e| e.2);
                    let got = t.lookup_longest(MbKey(a)).and_then(|h| t.get(h).copied());
                    prop_assert_eq!(got, want, "addr {:08x}", a32);
                }
                POp::Exact(k, l) => {
                    let n = net(k, l);
                    let want = model.iter().find(|e| e.0 == n && e.1 == l).map(|e| e.2);
                    prop_assert_eq!(t.lookup_prefix(MbKey(k), l).and_then(|h| t.get(h).copied()), want);
                }
                _ => {}
            }
            prop_assert_eq!(t.len(), model.len());
            if let Err(e) = t.validate() {
                return Err(TestCaseError::fail(e));
            }
        }
    }
}
