//! Stick-table tests: definition parsing, HAProxy's rate formula, tracking
//! and references, expiry with `now` as a parameter, the size bound (a
//! property test and 2M keys into `size 1m`).

use super::*;
use proptest::prelude::*;

fn def(words: &str) -> Result<TableDef, DefError> {
    parse_stick_table("t", &words.split_whitespace().collect::<Vec<_>>())
}

#[test]
fn parses_every_key_type_and_store_type() {
    let d = def("type ip size 1m expire 30s store conn_cur,conn_cnt,conn_rate(10s),sess_cnt,sess_rate(1m) store http_req_cnt,http_req_rate(10s),http_err_cnt,http_err_rate(10s),bytes_in_cnt,bytes_in_rate(1s),bytes_out_cnt,bytes_out_rate(1s),gpc0,gpc0_rate(1h),gpt0,server_id,gpc1,gpc1_rate(1m)").unwrap();
    assert_eq!(d.key, KeyType::Ip);
    assert_eq!(d.size, 1 << 20);
    assert_eq!(d.expire, Some(30_000));
    assert!(!d.nopurge);
    assert_eq!(d.store.len(), 19);
    assert_eq!(d.store[18], DataType::Gpc1Rate(60_000));
    // HAProxy's ids (the peers protocol's data bits): gpc1 17, gpc1_rate 18.
    assert_eq!((Data::Gpc1.wire_id(), Data::Gpc1Rate.wire_id()), (17, 18));
    assert_eq!(d.store[2], DataType::ConnRate(10_000));
    assert_eq!(d.store[4], DataType::SessRate(60_000));
    assert_eq!(d.store[14], DataType::Gpc0Rate(3_600_000));
    assert_eq!(def("type ipv6 size 10").unwrap().key, KeyType::Ipv6);
    assert_eq!(def("type integer size 10k").unwrap().size, 10 << 10);
    assert_eq!(
        def("type string size 1").unwrap().key,
        KeyType::String(DEFAULT_KEY_LEN)
    );
    assert_eq!(
        def("type string len 64 size 1 nopurge").unwrap(),
        TableDef {
            name: "t".into(),
            key: KeyType::String(64),
            size: 1,
            expire: None,
            nopurge: true,
            store: vec![],
            peers: None,
            key_size: 65,
            wire_name: None,
            srvkey: Default::default(),
        }
    );
    assert_eq!(
        def("type binary len 8 size 1").unwrap().key,
        KeyType::Binary(8)
    );
}

#[test]
fn refuses_bad_definitions() {
    let e = |w: &str| def(w).unwrap_err().0;
    assert!(e("size 10").contains("missing 'type'"));
    assert!(e("type ip").contains("missing 'size'"));
    assert!(e("type ip size 0").contains("greater than zero"));
    assert!(e("type ip size x").contains("not a number"));
    assert!(e("type mac size 1").contains("unknown table type 'mac'"));
    assert!(e("type string len 0 size 1").contains("1..1024"));
    assert!(e("type ip size 1 expire 10y").contains("unknown time unit"));
    assert!(e("type ip size 1 expire 30d").contains("too large"));
    assert!(e("type ip size 1 store http_req_rate").contains("missing argument"));
    assert!(e("type ip size 1 store gpc0(10s)").contains("unexpected argument"));
    assert!(e("type ip size 1 srvkey ip").contains("unknown server key type 'ip'"));
    assert!(e("type ip size 1 srvkey").contains("'srvkey' expects a value"));
    assert!(e("type ip size 1 store server_key,server_name").contains("stored twice"));
    assert_eq!(
        def("type ip size 1 srvkey addr").unwrap().srvkey,
        SrvKey::Addr
    );
    assert_eq!(def("type ip size 1").unwrap().srvkey, SrvKey::Name);
    assert_eq!(
        def("type ip size 1 store server_name").unwrap().store,
        [DataType::ServerKey]
    );
    // Arrays (HAProxy 2.6's messages).
    assert!(e("type ip size 1 store gpc").contains("missing argument"));
    assert!(e("type ip size 1 store gpc(0)").contains("out of allowed range (1-100)"));
    assert!(e("type ip size 1 store gpt(101)").contains("out of allowed range (1-100)"));
    assert!(e("type ip size 1 store gpc_rate(2)").contains("missing argument"));
    assert!(e("type ip size 1 store gpt(2,10s)").contains("unexpected argument"));
    assert!(e("type ip size 1 store gpt(2),gpt0").contains("'gpt' overrides 'gpt0'"));
    assert!(e("type ip size 1 store gpc1,gpc(2)").contains("'gpc' overrides 'gpc[0/1]'"));
    assert!(e("type ip size 1 store gpc_rate(2,1s),gpc0_rate(1s)").contains("overrides"));
    assert!(e("type ip size 1 store gpc0,gpc0").contains("stored twice"));
    assert!(e("type ip size 1 store conn_rate(0)").contains("above zero"));
    assert!(e("type ip size 1 peers").contains("'peers' expects a value"));
    assert_eq!(
        def("type ip size 1 peers p").unwrap().peers.as_deref(),
        Some("p")
    );
    assert_eq!(def("type string size 1").unwrap().key_size, 32);
    assert_eq!(def("type string len 32 size 1").unwrap().key_size, 33);
    assert_eq!(def("type ipv6 size 1").unwrap().key_size, 16);
    assert!(e("type ip size 1 bogus").contains("unknown stick-table option"));
    assert!(e("type ip size").contains("'size' expects a value"));
}

#[test]
fn freq_ctr_follows_haproxy_formula() {
    let p = 10_000;
    let mut f = FreqCtr::new(1_000);
    for _ in 0..20 {
        f.add(p, 1_500, 1);
    }
    assert_eq!(f.read(p, 1_500), 20);
    // Next period, a quarter in: 5 new events + 3/4 of the previous 20.
    for _ in 0..5 {
        f.add(p, 13_500, 1);
    }
    assert_eq!(f.read(p, 13_500), 5 + 15);
    // Half-way into the following period, no new event: 5 weighted by 1/2.
    assert_eq!(f.read(p, 26_000), 2);
    // Two whole periods later: nothing.
    assert_eq!(f.read(p, 31_000), 0);
    // Across the u32 wrap of ticks.
    let mut g = FreqCtr::new(u32::MAX - 100);
    g.add(1000, u32::MAX - 50, 4);
    // 501 ms into the period begun at MAX-100: still the current one.
    assert_eq!(g.read(1000, 400), 4);
    // 501 ms into the next one: 4 weighted by 499/1000, rounded down.
    assert_eq!(g.read(1000, 1400), 1);
    // A thread whose clock read a little before the period's start (a
    // skew between threads) adds to the current period, as it reads.
    let mut h = FreqCtr::new(5_000);
    h.add(1000, 5_100, 3);
    h.add(1000, 4_990, 1);
    assert_eq!(h.read(1000, 4_990), 4);
    assert_eq!(h.read(1000, 5_200), 4);
}

#[test]
fn shared_freq_ctr_reads_as_freq_ctr() {
    let s = SharedFreqCtr::default();
    let mut f = FreqCtr::default();
    for (now, inc) in [
        (10, 1),
        (400, 2),
        (1_200, 5),
        (1_900, 1),
        (2_050, 3),
        (5_000, 2),
    ] {
        assert_eq!(s.add(1000, now, inc), f.add(1000, now, inc));
        for at in [now, now + 1, now + 700, now + 1_500, now + 2_500] {
            assert_eq!(s.read(1000, at), f.read(1000, at), "at {at} after {now}");
        }
    }
    // Threads adding at once lose nothing.
    let shared = std::sync::Arc::new(SharedFreqCtr::default());
    let workers: Vec<_> = (0..4)
        .map(|_| {
            let c = shared.clone();
            std::thread::spawn(move || {
                for _ in 0..10_000 {
                    c.add(1000, 500, 1);
                }
            })
        })
        .collect();
    for w in workers {
        let _ = w.join();
    }
    assert_eq!(shared.read(1000, 500), 40_000);
}

fn table(words: &str) -> Table {
    Table::new(def(words).unwrap())
}

#[test]
fn arrays_and_http_fail_types() {
    let d =
        def("type ip size 10 store gpc_rate(3,10s),http_fail_cnt,gpt(2),http_fail_rate(1m),gpc(3)")
            .unwrap();
    assert_eq!(
        d.store,
        vec![
            DataType::GpcRate(3, 10_000),
            DataType::HttpFailCnt,
            DataType::Gpt(2),
            DataType::HttpFailRate(60_000),
            DataType::Gpc(3),
        ]
    );
    // HAProxy's ids: server_key is 19, then http_fail_cnt 20 ... gpc_rate 24.
    assert_eq!(
        [
            Data::Gpc1Rate,
            Data::HttpFailCnt,
            Data::HttpFailRate,
            Data::Gpt,
            Data::Gpc,
            Data::GpcRate
        ]
        .map(|d| d.wire_id()),
        [18, 20, 21, 22, 23, 24]
    );
    assert_eq!(Data::ServerKey.wire_id(), 19);
    assert_eq!(Data::from_wire_id(19), Some(Data::ServerKey));
    assert_eq!(Data::from_wire_id(25), None);
    assert_eq!(Data::from_wire_id(24), Some(Data::GpcRate));
    let t = Table::new(d);
    let k = t.key_ip("192.0.2.1".parse().unwrap()).unwrap();
    let r = t.track(&k, 100).unwrap();
    // Elements are separate; out of range is not stored.
    assert!(t.add_at(r, Data::Gpc, 2, 5, 100));
    assert!(t.add_at(r, Data::GpcRate, 2, 1, 100));
    assert_eq!(t.get_at(r, Data::Gpc, 2, 100), Some(5));
    assert_eq!(t.get_at(r, Data::Gpc, 0, 100), Some(0));
    assert_eq!(t.get_at(r, Data::Gpc, 3, 100), None);
    assert_eq!(t.get_at(r, Data::GpcRate, 2, 200), Some(1));
    assert!(t.set_at(r, Data::Gpt, 1, 9));
    assert_eq!(t.get_at(r, Data::Gpt, 1, 100), Some(9));
    // The legacy types read and write the array's elements (gpc0 = gpc[0],
    // gpc1 = gpc[1], gpt0 = gpt[0]), as HAProxy 2.6.
    assert!(t.add(r, Data::Gpc1, 1, 100));
    assert_eq!(t.get_at(r, Data::Gpc, 1, 100), Some(1));
    assert!(t.set(r, Data::Gpt0, 4));
    assert_eq!(t.get_at(r, Data::Gpt, 0, 100), Some(4));
    assert!(t.stores(Data::Gpc0Rate, 0) && !t.stores(Data::Gpc, 3));
    // show table: every element, numbered before the first '_'.
    let tables = Tables::new(vec![std::sync::Arc::new(t)]);
    let out = cli::show(&tables, "t", &[], 200).unwrap();
    assert!(out.contains(" gpt0=4 gpt1=9 gpc0=0 gpc1=1 gpc2=5 gpc0_rate(10000)=0 gpc1_rate(10000)=0 gpc2_rate(10000)=1"), "{out}");
    assert!(
        out.contains("http_fail_cnt=0 http_fail_rate(60000)=0"),
        "{out}"
    );
}

#[test]
fn track_count_rate_release() {
    let t = table("type ip size 10 expire 10s store http_req_cnt,http_req_rate(10s),conn_cur,gpt0");
    let k = t.key_ip("192.0.2.7".parse().unwrap()).unwrap();
    assert_eq!(
        t.key_ip("::ffff:192.0.2.7".parse().unwrap()),
        Some(k.clone())
    );
    assert_eq!(t.key_ip("2001:db8::1".parse().unwrap()), None);
    assert_eq!(t.key_bytes(b"x"), None);
    let r = t.track(&k, 100).unwrap();
    for i in 0..25 {
        assert!(t.add(r, Data::HttpReqCnt, 1, 100 + i));
        assert!(t.add(r, Data::HttpReqRate, 1, 100 + i));
    }
    // Not stored: ignored, as HAProxy does.
    assert!(t.add(r, Data::Gpc0, 1, 200));
    assert_eq!(t.get(r, Data::Gpc0, 200), None);
    assert_eq!(t.get(r, Data::HttpReqCnt, 200), Some(25));
    assert_eq!(t.get(r, Data::HttpReqRate, 200), Some(25));
    assert!(t.set(r, Data::Gpt0, 7));
    assert_eq!(t.get(r, Data::Gpt0, 200), Some(7));
    t.add(r, Data::ConnCur, 2, 200);
    t.dec(r, Data::ConnCur, 1);
    assert_eq!(t.get(r, Data::ConnCur, 200), Some(1));
    // A second tracker of the same key shares the entry.
    let r2 = t.track(&k, 300).unwrap();
    assert_eq!(r, r2);
    assert_eq!(t.refs(r), Some(2));
    assert_eq!(t.len(), 1);
    t.release(r, 400);
    t.release(r2, 400);
    assert_eq!(t.refs(r), Some(0));
    assert_eq!(t.lookup(&k), Some(r));
    t.validate().unwrap();
}

#[test]
fn entries_expire_on_time_unless_referenced() {
    let t = table("type string len 4 size 100 expire 10s store gpc0");
    let ka = t.key_bytes(b"alpha").unwrap();
    assert_eq!(ka, t.key_bytes(b"alph").unwrap());
    let kb = t.key_bytes(b"beta").unwrap();
    let a = t.track(&ka, 1_000).unwrap();
    let b = t.track(&kb, 5_000).unwrap();
    t.release(a, 1_000);
    // a expires at 11_000, b (still referenced) at 15_000.
    assert_eq!(t.expire(10_999), Some(11_000));
    assert!(t.contains(a));
    assert_eq!(t.expire(11_000), Some(15_000));
    assert!(!t.contains(a));
    assert!(!t.add(a, Data::Gpc0, 1, 11_000));
    // b is referenced: requeued at now + expire instead of removed.
    assert_eq!(t.expire(15_000), Some(25_000));
    assert!(t.contains(b));
    // Its release after that expiry removes it at once.
    t.release(b, 26_000);
    assert!(!t.contains(b));
    assert!(t.is_empty());
    assert_eq!(t.expire(26_000), None);
    t.validate().unwrap();
    // A touch pushes the expiry later.
    let c = t.track(&ka, 30_000).unwrap();
    t.release(c, 30_000);
    t.touch(c, 35_000);
    assert_eq!(t.expire(40_000), Some(45_000));
    assert!(t.contains(c));
}

/// A touch moves no expiry node (HAProxy's way): the node lags behind the
/// entry's expiry until the expiry pass or an eviction reaches it, which
/// then go by the entry's real expiry.
#[test]
fn a_touched_entry_keeps_its_node_until_expiry_or_eviction_reaches_it() {
    let t = table("type integer size 2 expire 10s store http_req_rate(10s)");
    let k = |n| t.key_int(n).unwrap();
    let a = t.track(&k(1), 1_000).unwrap();
    t.release(a, 1_000);
    let b = t.track(&k(2), 2_000).unwrap();
    t.release(b, 2_000);
    // a's node says 11_000, its expiry is now 15_000: b is the oldest.
    let a2 = t
        .track_add(&k(1), 5_000, &[(Data::HttpReqRate, 1)])
        .unwrap();
    assert_eq!(a2, a);
    t.finish(a, &[], true, 5_000);
    t.validate().unwrap();
    let c = t.track(&k(3), 6_000).unwrap();
    assert!(t.contains(a), "touched after b: kept");
    assert!(!t.contains(b), "the least recently touched went");
    t.release(c, 6_000);
    t.touch(c, 9_000);
    t.validate().unwrap();
    // Nothing expires before 15_000 (a's node, moved by the eviction).
    assert_eq!(t.expire(14_999), Some(15_000));
    // a goes at 15_000; c's node (16_000) lags its expiry (19_000).
    assert_eq!(t.expire(16_000), Some(19_000));
    assert!(!t.contains(a));
    assert!(t.contains(c));
    assert_eq!(t.expire(19_000), None);
    assert!(t.is_empty());
    t.validate().unwrap();
}

#[test]
fn full_table_evicts_oldest_unreferenced_or_refuses() {
    let t = table("type integer size 3 expire 1m");
    let k = |n| t.key_int(n).unwrap();
    let r1 = t.track(&k(1), 10).unwrap();
    let r2 = t.track(&k(2), 20).unwrap();
    let r3 = t.track(&k(3), 30).unwrap();
    // Everyone referenced: no room.
    assert_eq!(t.track(&k(4), 40), None);
    t.release(r2, 40);
    t.release(r1, 40);
    // 1 expires first, but 2... both unreferenced: the one expiring first goes.
    let r4 = t.track(&k(4), 50).unwrap();
    assert!(!t.contains(r1));
    assert!(t.contains(r2) && t.contains(r3) && t.contains(r4));
    t.validate().unwrap();
    let np = table("type integer size 1 nopurge");
    let a = np.track(&np.key_int(1).unwrap(), 0).unwrap();
    np.release(a, 0);
    assert_eq!(np.track(&np.key_int(2).unwrap(), 0), None);
    assert!(np.contains(a));
}

/// Every entry touched a little after it was made (its node lags by less
/// than the gap to the next entry's): an eviction still finds the oldest.
/// (The walk once stepped past nodes it had just moved back into the part
/// already walked, and refused the new entry of a full table: `set table`
/// on a full table answered "Unable to allocate a new entry" where HAProxy
/// evicts.)
#[test]
fn eviction_finds_entries_whose_nodes_lag_a_little() {
    for words in ["type integer size 3 expire 1m", "type integer size 3"] {
        let t = table(words);
        let k = |n| t.key_int(n).unwrap();
        let mut refs = Vec::new();
        for n in 0..3u32 {
            let r = t.track(&k(n), 1_000 * n).unwrap();
            t.release(r, 1_000 * n);
            t.touch(r, 1_000 * n + 10);
            refs.push(r);
        }
        let r = t.track(&k(9), 5_000).expect("evicts one");
        assert!(!t.contains(refs[0]), "{words}: the oldest went");
        assert!(t.contains(refs[1]) && t.contains(refs[2]) && t.contains(r));
        t.validate().unwrap();
    }
}

#[test]
fn binary_keys_are_padded_and_cut() {
    let t = table("type binary len 4 size 10");
    assert_eq!(t.key_bytes(b"ab"), t.key_bytes(b"ab\0\0"));
    assert_eq!(t.key_bytes(b"abcdXYZ"), t.key_bytes(b"abcd"));
    assert_ne!(t.key_bytes(b"ab"), t.key_bytes(b"ab\0\x01"));
    let v6 = table("type ipv6 size 10");
    assert!(v6.key_ip("10.0.0.1".parse().unwrap()).is_some());
    assert_eq!(v6.key_int(1), None);
}

/// 2M distinct keys into `size 1m`: the table never holds (or allocates)
/// more than 1m entries.
#[test]
fn two_million_keys_into_size_1m_stay_bounded() {
    let t = table("type ip size 1m expire 10m store http_req_rate(10s)");
    let size = 1 << 20;
    for i in 0..2_000_000u32 {
        let k = StKey::Ip(ebtree::MbKey(i.to_be_bytes()));
        let r = t.track(&k, i / 1000).unwrap();
        t.add(r, Data::HttpReqRate, 1, i / 1000);
        t.release(r, i / 1000);
    }
    assert_eq!(t.len(), size);
    assert_eq!(t.allocated(), size);
    // The newest keys stayed, the oldest went.
    assert!(t
        .lookup(&StKey::Ip(ebtree::MbKey(1_999_999u32.to_be_bytes())))
        .is_some());
    assert!(t
        .lookup(&StKey::Ip(ebtree::MbKey(0u32.to_be_bytes())))
        .is_none());
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 64, ..ProptestConfig::default() })]

    /// Random tracks, releases and expiry scans: the table never exceeds its
    /// size, no referenced entry disappears, no expired unreferenced entry
    /// survives a scan, and the trees stay consistent.
    #[test]
    fn size_bound_and_expiry(size in 1usize..8, ops in proptest::collection::vec((0u8..4, 0u32..12, 0u32..3000), 1..200)) {
        let t = table(&format!("type integer size {size} expire 1s store gpc0"));
        let mut now = 0u32;
        let mut held: Vec<(ebtree_ref::R, u32)> = vec![];
        for (op, key, dt) in ops {
            now = now.wrapping_add(dt);
            match op {
                0 | 1 => {
                    let k = t.key_int(key).unwrap();
                    if let Some(r) = t.track(&k, now) {
                        held.push((ebtree_ref::R(r), key));
                    } else {
                        // Refused only when full of referenced entries.
                        prop_assert_eq!(t.len(), size);
                    }
                }
                2 if !held.is_empty() => {
                    let (r, _) = held.swap_remove(key as usize % held.len());
                    t.release(r.0, now);
                }
                _ => {
                    t.expire(now);
                    // Whatever is left is referenced or not yet expired: the
                    // next expiry (if any) is after now.
                    if let Some(next) = t.expire(now) {
                        prop_assert!((next.wrapping_sub(now) as i32) > 0);
                    }
                }
            }
            prop_assert!(t.len() <= size);
            prop_assert!(t.allocated() <= size);
            for (r, _) in &held {
                prop_assert!(t.contains(r.0), "a referenced entry vanished");
            }
            if let Err(e) = t.validate() {
                return Err(TestCaseError::fail(e));
            }
        }
    }
}

mod ebtree_ref {
    /// An entry reference held by the property test.
    #[derive(Debug, Clone, Copy)]
    pub struct R(pub super::EntryRef);
}

/// Evaluates `expr` as a sample for a client at `src`, with `stk`'s
/// trackers, in the rules of proxy `f`.
fn eval_with(stk: &Stk, src: &str, expr: &str) -> Option<String> {
    let e = crate::sample::Expr::parse(expr, crate::sample::Scope::Request { backend: false })
        .unwrap_or_else(|e| panic!("{expr}: {e}"));
    let dst = || None;
    let ctx = crate::sample::Ctx {
        src: format!("{src}:1000").parse().unwrap(),
        fe: "f",
        stk: Some(stk),
        ..crate::sample::Ctx::detached(&dst, None)
    };
    crate::sample::with_scratch(|s| {
        e.eval(&ctx, s).map(|v| {
            let mut out = Vec::new();
            crate::sample::write_text(v, s, &mut out);
            String::from_utf8(out).unwrap()
        })
    })
}

#[test]
fn fetches_and_converters_follow_haproxy() {
    let other = std::sync::Arc::new(Table::new(
        parse_stick_table("o", &["type", "ip", "size", "10", "store", "gpc0"]).unwrap(),
    ));
    let tables = std::sync::Arc::new(Tables::new(vec![
        std::sync::Arc::new(Table::new(
            parse_stick_table(
                "f",
                &[
                    "type",
                    "ip",
                    "size",
                    "10",
                    "expire",
                    "10s",
                    "store",
                    "http_req_cnt,http_req_rate(10s),conn_cur,gpc0",
                ],
            )
            .unwrap(),
        )),
        std::sync::Arc::clone(&other),
    ]));
    let stk = Stk::new(std::sync::Arc::clone(&tables));
    stk.begin(1000);
    let ev = |e: &str| eval_with(&stk, "10.0.0.1", e);
    // Nothing tracked: sc fetches find nothing, src fetches read 0.
    assert_eq!(ev("sc0_tracked"), Some("0".into()));
    assert_eq!(ev("sc_http_req_rate(0)"), None);
    assert_eq!(ev("src_http_req_rate"), Some("0".into()));
    assert_eq!(ev("src,in_table(f)"), Some("0".into()));
    assert_eq!(ev("table_cnt"), Some("0".into()));
    // Track: one connection and one request counted.
    let t = std::sync::Arc::clone(tables.get("f").unwrap());
    let k = t.key_ip("10.0.0.1".parse().unwrap()).unwrap();
    assert!(stk.track(0, &t, &k, true));
    assert_eq!(ev("sc0_tracked"), Some("1".into()));
    assert_eq!(ev("sc_http_req_rate(0)"), Some("1".into()));
    assert_eq!(ev("sc0_conn_cur"), Some("1".into()));
    assert_eq!(ev("sc_trackers(0)"), Some("1".into()));
    assert_eq!(ev("src_http_req_cnt(f)"), Some("1".into()));
    assert_eq!(ev("src,table_http_req_cnt(f)"), Some("1".into()));
    assert_eq!(ev("src,in_table(f)"), Some("1".into()));
    assert_eq!(ev("table_avl(f)"), Some("9".into()));
    // Not stored: nothing, even with an entry.
    assert_eq!(ev("sc0_sess_cnt"), None);
    // gpc0: inc returns the new value, clr the old one.
    assert_eq!(ev("sc_inc_gpc0(0)"), Some("1".into()));
    assert_eq!(ev("sc0_inc_gpc0"), Some("2".into()));
    assert_eq!(ev("sc0_get_gpc0"), Some("2".into()));
    assert_eq!(ev("sc0_clr_gpc0"), Some("2".into()));
    assert_eq!(ev("sc0_get_gpc0"), Some("0".into()));
    // sc fetch with another table: the tracked key looked up there.
    assert_eq!(ev("sc0_get_gpc0(o)"), Some("0".into()));
    assert_eq!(ev("src_inc_gpc0(o)"), Some("1".into()));
    assert_eq!(ev("sc0_get_gpc0(o)"), Some("1".into()));
    // Another client has nothing.
    assert_eq!(
        eval_with(&stk, "10.0.0.2", "src_get_gpc0(f)"),
        Some("0".into())
    );
    // The exchange ends: conn_cur back to 0, the reference dropped.
    stk.end(1100, true, false, 10, 20);
    assert_eq!(ev("sc0_tracked"), Some("0".into()));
    let r = t.lookup(&k).unwrap();
    assert_eq!(t.get(r, Data::ConnCur, 1100), Some(0));
    assert_eq!(t.refs(r), Some(0));
}

#[test]
fn array_and_fail_fetches_follow_haproxy() {
    let tables = std::sync::Arc::new(Tables::new(vec![std::sync::Arc::new(Table::new(
        parse_stick_table(
            "f",
            &[
                "type",
                "ip",
                "size",
                "10",
                "store",
                "gpc(2),gpc_rate(2,10s),gpt(3),http_fail_cnt,http_fail_rate(10s)",
            ],
        )
        .unwrap(),
    ))]));
    let stk = Stk::new(std::sync::Arc::clone(&tables));
    stk.begin(1000);
    let ev = |e: &str| eval_with(&stk, "10.0.0.2", e);
    // No entry: src reads 0; nothing tracked: sc finds nothing.
    assert_eq!(ev("src_get_gpc(1)"), Some("0".into()));
    assert_eq!(ev("sc_get_gpc(1,0)"), None);
    let t = std::sync::Arc::clone(tables.get("f").unwrap());
    let k = t.key_ip("10.0.0.2".parse().unwrap()).unwrap();
    assert!(stk.track(0, &t, &k, true));
    // sc-inc-gpc(1,0) twice, sc-set-gpt(2,0).
    stk.inc_gpc_at(1, 0);
    stk.inc_gpc_at(1, 0);
    stk.set_gpt_at(2, 0, Data::Gpt, 7);
    assert_eq!(ev("sc_get_gpc(1,0)"), Some("2".into()));
    assert_eq!(ev("sc_gpc_rate(1,0)"), Some("2".into()));
    assert_eq!(ev("sc_get_gpc(0,0)"), Some("0".into()));
    assert_eq!(ev("src_get_gpc(1)"), Some("2".into()));
    assert_eq!(ev("sc_get_gpt(2,0)"), Some("7".into()));
    assert_eq!(ev("src,table_gpt(2,f)"), Some("7".into()));
    assert_eq!(ev("src,table_gpc_rate(1,f)"), Some("2".into()));
    // The legacy fetches fall back on the arrays.
    assert_eq!(ev("sc0_get_gpc1"), Some("2".into()));
    assert_eq!(ev("sc0_get_gpt0"), Some("0".into()));
    // Beyond the array: not found.
    assert_eq!(ev("sc_get_gpt(3,0)"), None);
    assert_eq!(ev("sc_inc_gpc(1,0)"), Some("3".into()));
    assert_eq!(ev("src_clr_gpc(1)"), Some("3".into()));
    assert_eq!(ev("sc_get_gpc(1,0)"), Some("0".into()));
    // http_fail: one failed exchange counted at its end.
    assert_eq!(ev("sc0_http_fail_cnt"), Some("0".into()));
    stk.end(1100, false, true, 10, 10);
    assert!(stk.track(0, &t, &k, true));
    assert_eq!(ev("sc0_http_fail_cnt"), Some("1".into()));
    assert_eq!(ev("sc_http_fail_rate(0)"), Some("1".into()));
    assert_eq!(ev("src_http_fail_cnt"), Some("1".into()));
    assert_eq!(ev("src,table_http_fail_cnt(f)"), Some("1".into()));
    // What counts as a failure (HAProxy 2.6).
    assert!(http_failure(500, "--") && http_failure(503, "--"));
    assert!(!http_failure(501, "--") && !http_failure(505, "--") && !http_failure(404, "--"));
    assert!(http_failure(502, "SH") && http_failure(504, "sH") && http_failure(200, "SD"));
    assert!(!http_failure(503, "SC") && !http_failure(503, "sQ") && !http_failure(200, "CD"));
}
