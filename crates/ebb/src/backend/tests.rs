//! Slots, queues and hand-over, driven without sockets: waiters are real
//! tasklets of a hand-driven scheduler context.

use super::*;
use crate::config::{Balance, HttpCheck, HttpReuse, ServerOptions};
use sched::{Ctx, Runtime, Status};
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

fn farm(maxconn: &[Option<u32>], maxqueue: Option<u32>, balance: Balance) -> Farm {
    let servers = maxconn
        .iter()
        .enumerate()
        .map(|(i, m)| {
            let opts = ServerOptions {
                maxconn: *m,
                maxqueue,
                ..ServerOptions::default()
            };
            (
                format!("s{i}"),
                Some(format!("127.0.0.1:{}", 9000 + i).parse().unwrap()),
                opts,
                None,
            )
        })
        .collect();
    Farm::new(
        "be".into(),
        servers,
        balance,
        3,
        false,
        HttpReuse::Safe,
        HttpCheck::default(),
    )
}

fn ctx() -> (Runtime, Ctx) {
    let rt = Runtime::new(sched::Config::new(1)).unwrap();
    let c = rt.context(0).unwrap();
    (rt, c)
}

fn tasklet(c: &mut Ctx) -> sched::TaskletId {
    c.new_tasklet("waiter", |_c: &mut Ctx, _id, _why| Status::Continue)
}

#[test]
fn slot_is_handed_to_the_first_waiter_in_order() {
    let (rt, mut c) = ctx();
    let h = rt.handle();
    let f = farm(&[Some(1)], None, Balance::RoundRobin);
    let me = tasklet(&mut c);
    let Pick::Server(s) = f.pick(&LbInput::default(), None, me, || h.clone()) else {
        panic!("first pick should get the slot");
    };
    let w1 = match f.pick(&LbInput::default(), None, me, || h.clone()) {
        Pick::Queued(w) => w,
        _ => panic!("second pick should queue"),
    };
    let w2 = match f.pick(&LbInput::default(), None, me, || h.clone()) {
        Pick::Queued(w) => w,
        _ => panic!("third pick should queue"),
    };
    assert_eq!(f.queued(), 2);
    // Releasing hands the slot over: the count of slots in use stays 1.
    f.release(&s);
    assert!(matches!(w1.current(), WaitState::Assigned(_)));
    assert!(matches!(w2.current(), WaitState::Waiting));
    assert_eq!(s.cur.load(Ordering::Relaxed), 1);
    f.release(&s);
    assert!(matches!(w2.current(), WaitState::Assigned(_)));
    f.release(&s);
    assert_eq!(s.cur.load(Ordering::Relaxed), 0);
    assert_eq!(f.queued(), 0);
}

#[test]
fn cancelled_waiters_are_skipped_and_maxqueue_bounds_a_servers_queue_only() {
    let (rt, mut c) = ctx();
    let h = rt.handle();
    let f = farm(&[Some(1)], Some(1), Balance::RoundRobin);
    let me = tasklet(&mut c);
    let Pick::Server(s) = f.pick(&LbInput::default(), None, me, || h.clone()) else {
        panic!()
    };
    let Pick::Queued(w) = f.pick(&LbInput::default(), None, me, || h.clone()) else {
        panic!()
    };
    // The backend's queue has no bound (HAProxy): queued again.
    let Pick::Queued(w2) = f.pick(&LbInput::default(), None, me, || h.clone()) else {
        panic!()
    };
    // The waiters give up; a release then returns the slot.
    for w in [w, w2] {
        assert!(w.cancel().is_none());
        f.unqueue(&w);
    }
    f.release(&s);
    assert_eq!(s.cur.load(Ordering::Relaxed), 0);
    // A hash binds the stream to its server: that queue's bound refuses.
    let uri = Balance::Uri {
        whole: false,
        len: None,
        depth: None,
        path_only: false,
    };
    let f = farm(&[Some(1)], Some(1), uri);
    let input = LbInput {
        uri: b"/x",
        ..LbInput::default()
    };
    let Pick::Server(_s) = f.pick(&input, None, me, || h.clone()) else {
        panic!()
    };
    let Pick::Queued(w) = f.pick(&input, None, me, || h.clone()) else {
        panic!()
    };
    assert!(matches!(
        f.pick(&input, None, me, || h.clone()),
        Pick::NoServer(_) | Pick::QueueFull(_)
    ));
    assert!(w.cancel().is_none());
    f.unqueue(&w);
}

#[test]
fn a_waiter_that_gives_up_after_assignment_gets_the_slot_back() {
    let (rt, mut c) = ctx();
    let h = rt.handle();
    let f = farm(&[Some(1)], None, Balance::RoundRobin);
    let me = tasklet(&mut c);
    let Pick::Server(s) = f.pick(&LbInput::default(), None, me, || h.clone()) else {
        panic!()
    };
    let Pick::Queued(w) = f.pick(&LbInput::default(), None, me, || h.clone()) else {
        panic!()
    };
    f.release(&s);
    // Timed out at the same moment: cancel returns the slot to release.
    let got = w.cancel().expect("slot was assigned");
    f.release(&got);
    assert_eq!(s.cur.load(Ordering::Relaxed), 0);
}

#[test]
fn bound_streams_wait_on_their_server_and_move_when_it_goes_down() {
    let (rt, mut c) = ctx();
    let h = rt.handle();
    let f = farm(&[Some(1), Some(1)], None, Balance::Source);
    let me = tasklet(&mut c);
    let input = LbInput {
        src: Some("10.9.8.7".parse().unwrap()),
        ..LbInput::default()
    };
    let Pick::Server(s) = f.pick(&input, None, me, || h.clone()) else {
        panic!()
    };
    // Same source, server full: bound, waits in that server's queue.
    let Pick::Queued(w) = f.pick(&input, None, me, || h.clone()) else {
        panic!()
    };
    assert_eq!(s.queue.lock().unwrap().len(), 1);
    s.up.store(false, Ordering::Relaxed);
    f.redispatch_queue_of(&s);
    assert!(matches!(w.current(), WaitState::Redispatch));
    // Picking again lands on the other server.
    let Pick::Server(s2) = f.pick(&input, None, me, || h.clone()) else {
        panic!()
    };
    assert_ne!(s2.idx, s.idx);
}

#[test]
fn backups_only_when_all_actives_are_down() {
    let (rt, mut c) = ctx();
    let h = rt.handle();
    let servers = vec![
        (
            "a".to_string(),
            Some("127.0.0.1:1".parse().unwrap()),
            ServerOptions::default(),
            None,
        ),
        (
            "b".to_string(),
            Some("127.0.0.1:2".parse().unwrap()),
            ServerOptions {
                backup: true,
                ..ServerOptions::default()
            },
            None,
        ),
    ];
    let f = Farm::new(
        "be".into(),
        servers,
        Balance::RoundRobin,
        3,
        false,
        HttpReuse::Safe,
        HttpCheck::default(),
    );
    let me = tasklet(&mut c);
    for _ in 0..5 {
        let Pick::Server(s) = f.pick(&LbInput::default(), None, me, || h.clone()) else {
            panic!()
        };
        assert_eq!(s.name, "a");
        f.release(&s);
    }
    f.servers[0].admin.store(ADMIN_MAINT, Ordering::Relaxed);
    let Pick::Server(s) = f.pick(&LbInput::default(), None, me, || h.clone()) else {
        panic!()
    };
    assert_eq!(s.name, "b");
    f.servers[1].up.store(false, Ordering::Relaxed);
    assert!(matches!(
        f.pick(&LbInput::default(), None, me, || h.clone()),
        Pick::NoServer(_) | Pick::QueueFull(_)
    ));
}

/// The slot a pick got, or the one handed to it once queued (spinning:
/// a waiter never served hangs the test).
fn slot_of(p: Pick) -> Arc<ServerRt> {
    match p {
        Pick::Server(s) => s,
        Pick::Queued(w) => loop {
            if let WaitState::Assigned(s) = w.current() {
                break s;
            }
            std::thread::yield_now();
        },
        Pick::NoServer(r) => panic!("{r}"),
        Pick::QueueFull(s) => panic!("{} full", s.name),
    }
}

#[test]
fn no_slot_is_lost_under_concurrent_pick_and_release() {
    // Several threads pick, hold briefly and release on a farm with two
    // slots; every queued waiter must end assigned, and all slots return.
    let rt = Runtime::new(sched::Config::new(1)).unwrap();
    let h = rt.handle();
    let mut c = rt.context(0).unwrap();
    let me = tasklet(&mut c);
    let f = Arc::new(farm(&[Some(1), Some(1)], None, Balance::RoundRobin));
    let mut ths = Vec::new();
    for _ in 0..4 {
        let f = Arc::clone(&f);
        let h = h.clone();
        ths.push(std::thread::spawn(move || {
            for _ in 0..2000 {
                let s = slot_of(f.pick(&LbInput::default(), None, me, || h.clone()));
                f.release(&s);
            }
        }));
    }
    for t in ths {
        t.join().unwrap();
    }
    assert_eq!(
        f.servers
            .iter()
            .map(|s| s.cur.load(Ordering::Relaxed))
            .sum::<u32>(),
        0
    );
    assert_eq!(f.queued(), 0);
}

#[test]
fn no_waiter_is_stranded_by_a_release_that_skips_the_locks() {
    // One slot, released without a hold while others queue: a release
    // that finds both queues empty gives the slot back without their
    // locks (`Farm::release`), and a stream queuing at that moment, on
    // the server (a sticky pick) or on the backend, must still be handed
    // a slot (a stranded waiter would spin here forever).
    let rt = Runtime::new(sched::Config::new(1)).unwrap();
    let h = rt.handle();
    let mut c = rt.context(0).unwrap();
    let me = tasklet(&mut c);
    let f = Arc::new(farm(&[Some(1)], None, Balance::RoundRobin));
    let ths: Vec<_> = (0..6)
        .map(|t| {
            let f = Arc::clone(&f);
            let h = h.clone();
            std::thread::spawn(move || {
                for i in 0..5000 {
                    let input = LbInput::default();
                    let p = if (i + t) % 2 == 0 {
                        f.pick_sticky(Some(0), &input, None, me, || h.clone())
                    } else {
                        f.pick(&input, None, me, || h.clone())
                    };
                    f.release(&slot_of(p));
                }
            })
        })
        .collect();
    for t in ths {
        t.join().unwrap();
    }
    assert_eq!(f.servers[0].cur.load(Ordering::Relaxed), 0);
    assert_eq!(f.queued(), 0);
    assert_eq!(f.servers[0].waiting.load(Ordering::Relaxed), 0);
    assert_eq!(f.waiting.load(Ordering::Relaxed), 0);
}

#[test]
fn picks_from_many_threads_keep_round_robin_weights_exactly() {
    // Every thread has its own balancing state, but the position in the
    // order is one atomic: 4 threads x 601 picks over weights 3:2:1 (order
    // a b a c b a) are 400 whole periods and the first 4 picks of one more
    // (a b a c), whatever the interleaving. Positions kept per thread
    // would give each thread's extra pick to a: 1204/800/400.
    let (rt, mut c) = ctx();
    let h = rt.handle();
    let me = tasklet(&mut c);
    let servers = [3u32, 2, 1]
        .iter()
        .enumerate()
        .map(|(i, &weight)| {
            let opts = ServerOptions {
                weight,
                ..ServerOptions::default()
            };
            let addr = format!("127.0.0.1:{}", 9000 + i).parse().unwrap();
            (format!("s{i}"), Some(addr), opts, None)
        })
        .collect();
    let f = Farm::new(
        "be".into(),
        servers,
        Balance::RoundRobin,
        3,
        false,
        HttpReuse::Safe,
        HttpCheck::default(),
    );
    let counts = std::thread::scope(|sc| {
        let joins: Vec<_> = (0..4)
            .map(|_| {
                sc.spawn(|| {
                    let mut n = [0usize; 3];
                    for _ in 0..601 {
                        let Pick::Server(s) = f.pick(&LbInput::default(), None, me, || h.clone())
                        else {
                            panic!("no maxconn: every pick gets a server");
                        };
                        n[s.idx] += 1;
                        f.release(&s);
                    }
                    n
                })
            })
            .collect();
        joins.into_iter().fold([0usize; 3], |mut acc, j| {
            let n = j.join().unwrap();
            (0..3).for_each(|k| acc[k] += n[k]);
            acc
        })
    });
    assert_eq!(counts, [1202, 801, 401]);
}

#[test]
fn atomic_instant_keeps_times_before_and_after_its_origin() {
    let now = Instant::now();
    let a = AtomicInstant::new(now.checked_sub(Duration::from_secs(5)).unwrap_or(now));
    assert!(a.elapsed() >= Duration::from_secs(4));
    a.set(Instant::now());
    assert!(a.elapsed() < Duration::from_secs(4));
    a.set(Instant::now() + Duration::from_secs(60));
    assert_eq!(a.elapsed(), Duration::ZERO);
}

#[test]
fn an_address_changes_under_concurrent_readers() {
    // Readers never see a torn address: only one of the two written.
    let a: SocketAddr = "10.1.2.3:80".parse().unwrap();
    let b: SocketAddr = "[2001:db8::1:2:3]:8443".parse().unwrap();
    let cell = Arc::new(AtomicAddr::new(Some(a)));
    let stop = Arc::new(AtomicBool::new(false));
    let reads = Arc::new(AtomicU64::new(0));
    let readers: Vec<_> = (0..2)
        .map(|_| {
            let (cell, stop, reads) = (Arc::clone(&cell), Arc::clone(&stop), Arc::clone(&reads));
            std::thread::spawn(move || {
                while !stop.load(Ordering::Relaxed) {
                    let got = cell.get();
                    assert!(got == Some(a) || got == Some(b) || got.is_none(), "{got:?}");
                    reads.fetch_add(1, Ordering::Relaxed);
                }
            })
        })
        .collect();
    // Writes go on until the readers have read a good many times.
    let mut i = 0u64;
    while reads.load(Ordering::Relaxed) < 200_000 || i < 20_000 {
        cell.set(match i % 3 {
            0 => Some(b),
            1 => None,
            _ => Some(a),
        });
        i += 1;
    }
    cell.set(Some(a));
    stop.store(true, Ordering::Relaxed);
    for r in readers {
        r.join().unwrap();
    }
    assert_eq!(cell.get(), Some(a));
}

#[test]
fn servers_join_and_leave_and_picks_follow() {
    let (_rt, mut c) = ctx();
    let me = c.new_tasklet("t", |_c: &mut Ctx, _id, _w| Status::Continue);
    let f = Arc::new(farm(&[None], None, Balance::RoundRobin));
    let addr = Some("127.0.0.1:9100".parse().unwrap());
    let s = f
        .add_server("dyn", addr, ServerOptions::default(), None)
        .unwrap();
    assert_eq!(s.idx, 1);
    assert!(f
        .add_server("dyn", addr, ServerOptions::default(), None)
        .is_err());
    // Added in maintenance: not picked until enabled.
    let pick = |f: &Farm| match f.pick(&LbInput::default(), None, me, || c.handle()) {
        Pick::Server(s) => {
            f.release(&s);
            s.name.clone()
        }
        _ => String::new(),
    };
    assert!((0..4).all(|_| pick(&f) == "s0"));
    s.admin.store(ADMIN_READY, Ordering::Relaxed);
    let names: Vec<String> = (0..4).map(|_| pick(&f)).collect();
    assert_eq!(names.iter().filter(|n| *n == "dyn").count(), 2, "{names:?}");
    assert!(f.del_server(&s).is_err(), "in service");
    s.admin.store(ADMIN_MAINT, Ordering::Relaxed);
    f.del_server(&s).unwrap();
    assert!((0..4).all(|_| pick(&f) == "s0"));
    assert_eq!(f.servers.iter().count(), 1);
    assert_eq!(f.servers.all().count(), 2);
    // The name is free again; the index is new, the id the deleted one's
    // (HAProxy 2.6 takes the lowest free id).
    assert_eq!((s.idx, s.id), (1, 2));
    let s2 = f
        .add_server("dyn", addr, ServerOptions::default(), None)
        .unwrap();
    assert_eq!((s2.idx, s2.id), (2, 2));
    // No fixed room: segments are added as the list grows, and every
    // server stays where it was.
    for i in 0..3000 {
        let s = f
            .add_server(&format!("m{i}"), addr, ServerOptions::default(), None)
            .unwrap();
        assert_eq!((s.idx, s.id), (3 + i, 3 + i as u32));
    }
    assert_eq!(f.servers.len(), 3003);
    assert_eq!(f.servers.iter().count(), 3002);
    for (i, s) in f.servers.all().enumerate() {
        assert_eq!(s.idx, i);
        assert!(std::ptr::eq(&**s, &*f.servers[i]));
    }
    assert_eq!(f.servers.get(3002).map(|s| s.name.as_str()), Some("m2999"));
    assert!(f.servers.get(3003).is_none());
}

#[test]
fn time_averages_follow_haproxys_sliding_window() {
    let t = TimeStats::default();
    // Nothing yet: zero everywhere.
    assert_eq!(t.averages(false), [0; 4]);
    // Under 1024 streams `show stat` divides by the streams counted (one
    // without a sample counts too); the exporter by 1024, rounded up.
    t.note(Some([0, 2, 300, 302]));
    t.note(Some([0, 4, 100, 104]));
    t.note(None);
    assert_eq!(t.averages(false), [0, 2, 134, 136]);
    assert_eq!(t.averages(true), [0, 1, 1, 1]);
    assert_eq!(t.maxima(), [0, 4, 300, 302]);
    // Past 1024, each sample takes the place of an average one: a long
    // run of one value converges on it.
    for _ in 0..20_000 {
        t.note(Some([1, 1, 50, 60]));
    }
    let a = t.averages(false);
    assert_eq!(a, t.averages(true));
    assert!(
        (49..=51).contains(&a[2]) && (59..=61).contains(&a[3]),
        "{a:?}"
    );
    t.clear_maxima();
    assert_eq!(t.maxima(), [0; 4]);
    t.clear();
    assert_eq!(t.averages(false), [0; 4]);
}

#[test]
fn a_connect_is_settled_by_its_writable_edge_or_asked_after_a_hang_up() {
    let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let s = connect_nb(l.local_addr().unwrap()).unwrap();
    let mut socks = None;
    let until = std::time::Instant::now() + std::time::Duration::from_secs(10);
    // No edge yet, or a read edge alone: the socket is asked, and until
    // the kernel established it the connect goes on.
    while !connected(&s) {
        assert_eq!(connect_outcome(&s, &mut socks, false, false), None);
        assert!(std::time::Instant::now() < until, "connect never completed");
        std::thread::yield_now();
    }
    // Established: the poller's writable edge settles it (no question to
    // the socket); asked without an edge, it says the same.
    assert_eq!(connect_outcome(&s, &mut socks, true, false), Some(true));
    assert_eq!(connect_outcome(&s, &mut socks, false, false), Some(true));

    // Refused: the poller says writable with a hang-up and an error;
    // `SO_ERROR` tells (a port nothing listens on any more).
    let addr = l.local_addr().unwrap();
    drop((l, s));
    let Ok(s) = connect_nb(addr) else {
        return; // refused at once: nothing for an event to settle
    };
    loop {
        match connect_outcome(&s, &mut socks, true, true) {
            Some(ok) => {
                assert!(!ok, "a refused connect is a failure");
                break;
            }
            None => {
                assert!(std::time::Instant::now() < until, "no refusal seen");
                std::thread::yield_now();
            }
        }
    }
}

#[test]
fn server_list_walks_every_segment_in_order() {
    // 1 server: segments of 16, 32, 64 slots; 70 servers span three.
    let f = farm(&[None], None, Balance::RoundRobin);
    for n in 1..70 {
        let add = |idx, id| {
            let o = ServerOptions::default();
            new_server(idx, id, "be", format!("s{n}"), None, o, None)
        };
        f.servers.push(|_| Ok(()), add).unwrap();
    }
    let gone = [0, 15, 16, 47, 48, 69];
    for i in gone {
        f.servers[i].deleted.store(true, Ordering::Release);
    }
    let got: Vec<usize> = f.servers.iter().map(|s| s.idx).collect();
    let want: Vec<usize> = (0..70).filter(|i| !gone.contains(i)).collect();
    assert_eq!(got, want);
    assert_eq!(f.servers.all().count(), 70);
}

#[test]
fn one_eligible_server_takes_or_queues_under_every_algorithm() {
    let (rt, mut c) = ctx();
    let h = rt.handle();
    for b in [
        Balance::RoundRobin,
        Balance::StaticRr,
        Balance::LeastConn,
        Balance::First,
        Balance::Random { draws: 2 },
    ] {
        // The second server is in maintenance: one eligible, maxconn 1.
        let f = farm(&[Some(1), Some(1)], None, b);
        f.servers[1].admin.store(ADMIN_MAINT, Ordering::Relaxed);
        let t = tasklet(&mut c);
        let s = match f.pick(&LbInput::default(), None, t, || h.clone()) {
            Pick::Server(s) => s,
            _ => panic!("the free server takes the first stream"),
        };
        assert_eq!(s.idx, 0);
        let t2 = tasklet(&mut c);
        let w = match f.pick(&LbInput::default(), None, t2, || h.clone()) {
            Pick::Queued(w) => w,
            _ => panic!("a full server makes the stream wait"),
        };
        assert!(w.on_backend, "it waits in the backend's queue");
        f.release(&s);
        assert!(matches!(w.current(), WaitState::Assigned(ref x) if x.idx == 0));
    }
}
