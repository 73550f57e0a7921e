//! Measures a stick table's lock under the work of tracked requests: per
//! request what `http-request track-sc0 src` plus a rate rule costs the
//! table (track, the start counters, one rate read, the end counters,
//! release), from 1 and 2 threads, on distinct clients (each thread its
//! own addresses) and on one hot client (every thread the same key).
//!
//!   cargo run --release -p ebb --example stktable_contention [-- OPS]
//!
//! It prints ns per request for each case; two threads on a table whose
//! lock is contended take more than twice the one-thread time per
//! request of each thread.

use std::sync::Arc;
use std::time::Instant;

use ebb::table::{parse_stick_table, Data, StKey, Table};

fn run(t: &Arc<Table>, threads: usize, ops: u32, hot: bool) -> f64 {
    let t0 = Instant::now();
    std::thread::scope(|s| {
        for th in 0..threads {
            let t = Arc::clone(t);
            s.spawn(move || {
                let mut x = 0u32;
                for i in 0..ops {
                    let ip = if hot {
                        1
                    } else {
                        (th as u32) << 24 | (i % 1000)
                    };
                    let now = i / 100 + 1;
                    let k = StKey::Ip(ebtree::MbKey(ip.to_be_bytes()));
                    // As `Stk` does: three locks per request.
                    let start = [
                        (Data::ConnCur, 1),
                        (Data::ConnCnt, 1),
                        (Data::ConnRate, 1),
                        (Data::HttpReqCnt, 1),
                        (Data::HttpReqRate, 1),
                    ];
                    let Some(r) = t.track_add(&k, now, &start) else {
                        continue;
                    };
                    x = x.wrapping_add(t.get(r, Data::HttpReqRate, now).unwrap_or(0) as u32);
                    let end = [(Data::BytesInCnt, 80), (Data::BytesOutCnt, 200)];
                    t.finish(r, &end, true, now);
                }
                std::hint::black_box(x);
            });
        }
    });
    t0.elapsed().as_nanos() as f64 / ops as f64
}

fn main() {
    let ops: u32 = std::env::args()
        .nth(1)
        .and_then(|a| a.parse().ok())
        .unwrap_or(2_000_000);
    let words = "type ip size 1m expire 30s store conn_cur,conn_cnt,conn_rate(10s),http_req_cnt,http_req_rate(10s),bytes_in_cnt,bytes_out_cnt";
    let w: Vec<&str> = words.split_whitespace().collect();
    let Ok(def) = parse_stick_table("t", &w) else {
        eprintln!("bad table definition");
        return;
    };
    println!("ops per thread: {ops}; ns per request (wall time / ops of one thread)");
    for hot in [false, true] {
        for threads in [1, 2] {
            let t = Arc::new(Table::new(def.clone()));
            let ns = run(&t, threads, ops, hot);
            println!(
                "{:<16} threads={threads}: {ns:>7.1} ns/request per thread",
                if hot { "one hot key" } else { "distinct keys" }
            );
        }
    }
}
