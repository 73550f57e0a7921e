//! Property tests: random sequences of inserts, deletes, requeues, lookups and
//! scoped lookups on an ebtree and on a `BTreeMap<(key, seq), _>` model; every
//! result is compared and the structure (including the scope masks, which
//! must cover their subtree) is validated after every step.

use std::collections::BTreeMap;

use ebtree::{EbTree, Handle, Key};
use proptest::prelude::*;

#[derive(Debug, Clone)]
enum Op<K> {
    Insert(K, u64),
    Delete(usize),
    Requeue(usize, K),
    Lookup(K),
    LookupGe(K),
    LookupLe(K),
    LookupGeWrap(K),
    Walk(usize),
    FirstInScope(u64),
    NextInScope(usize, u64),
    LookupGeInScope(K, u64),
}

/// The model: entries ordered by (key, insertion sequence).
struct Model<K: Key + Copy> {
    map: BTreeMap<(K, u64), (u32, u64)>, // -> (value, scope)
    live: Vec<(Handle, K, u64)>,         // handle, key, seq
    seq: u64,
}

impl<K: Key + Copy> Model<K> {
    fn val_of(&self, pos: Option<&(K, u64)>) -> Option<u32> {
        pos.map(|p| self.map[p].0)
    }
    fn first_where(&self, lo: Option<K>, scope: u64) -> Option<u32> {
        self.map
            .iter()
            .filter(|((k, _), (_, s))| lo.is_none_or(|lo| *k >= lo) && s & scope != 0)
            .map(|(_, (v, _))| *v)
            .next()
    }
}

fn run<K: Key + Copy>(ops: Vec<Op<K>>, small: impl Fn(K) -> K) -> Result<(), TestCaseError> {
    let mut t: EbTree<K, u32, u64> = EbTree::new();
    let mut m = Model::<K> {
        map: BTreeMap::new(),
        live: vec![],
        seq: 0,
    };
    let mut next_val = 0u32;
    for op in ops {
        match op {
            Op::Insert(k, s) => {
                let k = small(k);
                let s = s | 1 << (s % 64); // never an empty scope
                let h = t.insert(k, s, next_val);
                m.map.insert((k, m.seq), (next_val, s));
                m.live.push((h, k, m.seq));
                m.seq += 1;
                next_val += 1;
            }
            Op::Delete(i) if !m.live.is_empty() => {
                let (h, k, seq) = m.live.swap_remove(i % m.live.len());
                let (v, _) = m.map.remove(&(k, seq)).unwrap();
                prop_assert_eq!(t.delete(h), Some(v));
                prop_assert_eq!(t.delete(h), None);
            }
            Op::Requeue(i, k) if !m.live.is_empty() => {
                let k = small(k);
                let i = i % m.live.len();
                let (h, ok, oseq) = m.live[i];
                let e = m.map.remove(&(ok, oseq)).unwrap();
                m.map.insert((k, m.seq), e);
                m.live[i] = (h, k, m.seq);
                m.seq += 1;
                prop_assert!(t.requeue(h, k));
            }
            Op::Lookup(k) => {
                let k = small(k);
                let want = m.val_of(m.map.range((k, 0)..=(k, u64::MAX)).map(|(p, _)| p).next());
                prop_assert_eq!(t.lookup(k).and_then(|h| t.get(h).copied()), want);
            }
            Op::LookupGe(k) => {
                let k = small(k);
                let want = m.val_of(m.map.range((k, 0)..).map(|(p, _)| p).next());
                prop_assert_eq!(t.lookup_ge(k).and_then(|h| t.get(h).copied()), want);
            }
            Op::LookupLe(k) => {
                let k = small(k);
                let want = m.val_of(m.map.range(..=(k, u64::MAX)).map(|(p, _)| p).next_back());
                prop_assert_eq!(t.lookup_le(k).and_then(|h| t.get(h).copied()), want);
            }
            Op::LookupGeWrap(k) => {
                let k = small(k);
                let want = m.val_of(
                    m.map
                        .range((k, 0)..)
                        .map(|(p, _)| p)
                        .next()
                        .or_else(|| m.map.keys().next()),
                );
                prop_assert_eq!(t.lookup_ge_wrap(k).and_then(|h| t.get(h).copied()), want);
            }
            Op::Walk(steps) => {
                // Forward from first, backward from last, both match the model.
                let fwd: Vec<u32> = t.iter().map(|(_, _, v)| *v).collect();
                let want: Vec<u32> = m.map.values().map(|(v, _)| *v).collect();
                prop_assert_eq!(&fwd, &want);
                let mut bwd = vec![];
                let mut h = t.last();
                while let Some(x) = h {
                    bwd.push(*t.get(x).unwrap());
                    h = t.prev(x);
                    if bwd.len() > steps + want.len() {
                        break;
                    }
                }
                bwd.reverse();
                prop_assert_eq!(bwd, want);
            }
            Op::FirstInScope(s) => {
                let want = m.first_where(None, s);
                prop_assert_eq!(t.first_in_scope(s).and_then(|h| t.get(h).copied()), want);
            }
            Op::NextInScope(i, s) if !m.live.is_empty() => {
                let (h, k, seq) = m.live[i % m.live.len()];
                let want = m
                    .map
                    .range((k, seq + 1)..)
                    .find(|(_, (_, es))| es & s != 0)
                    .map(|(_, (v, _))| *v);
                prop_assert_eq!(t.next_in_scope(h, s).and_then(|h| t.get(h).copied()), want);
            }
            Op::LookupGeInScope(k, s) => {
                let k = small(k);
                let want = m.first_where(Some(k), s);
                prop_assert_eq!(
                    t.lookup_ge_in_scope(k, s).and_then(|h| t.get(h).copied()),
                    want
                );
            }
            _ => {}
        }
        prop_assert_eq!(t.len(), m.map.len());
        if let Err(e) = t.validate() {
            return Err(TestCaseError::fail(e));
        }
    }
    Ok(())
}

fn ops<K: Key + Copy + Arbitrary + 'static>() -> impl Strategy<Value = Vec<Op<K>>> {
    let scope = prop_oneof![Just(1u64), Just(2), Just(3), Just(1 << 63), any::<u64>()];
    let op = prop_oneof![
        6 => (any::<K>(), scope.clone()).prop_map(|(k, s)| Op::Insert(k, s)),
        3 => any::<usize>().prop_map(Op::Delete),
        2 => (any::<usize>(), any::<K>()).prop_map(|(i, k)| Op::Requeue(i, k)),
        1 => any::<K>().prop_map(Op::Lookup),
        1 => any::<K>().prop_map(Op::LookupGe),
        1 => any::<K>().prop_map(Op::LookupLe),
        1 => any::<K>().prop_map(Op::LookupGeWrap),
        1 => (0usize..4).prop_map(Op::Walk),
        1 => scope.clone().prop_map(Op::FirstInScope),
        1 => (any::<usize>(), scope.clone()).prop_map(|(i, s)| Op::NextInScope(i, s)),
        1 => (any::<K>(), scope).prop_map(|(k, s)| Op::LookupGeInScope(k, s)),
    ];
    proptest::collection::vec(op, 1..300)
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

    /// Keys from a tiny range: many duplicates and deep duplicate subtrees.
    #[test]
    fn u32_small_keys(o in ops::<u32>()) {
        run(o, |k| k % 8)?;
    }

    /// Keys around the u32 wrap point.
    #[test]
    fn u32_near_wrap(o in ops::<u32>()) {
        run(o, |k| (k % 64).wrapping_sub(32))?;
    }

    /// Full-range u32 keys.
    #[test]
    fn u32_any(o in ops::<u32>()) {
        run(o, |k| k)?;
    }

    /// u64 keys, full range and clustered on high bits.
    #[test]
    fn u64_mixed(o in ops::<u64>()) {
        run(o, |k| if k & 1 == 0 { k } else { (k % 16) << 60 })?;
    }
}
