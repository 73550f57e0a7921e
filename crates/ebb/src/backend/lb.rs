//! Load-balancing algorithms: a deterministic core that takes a snapshot
//! of the eligible servers (weights, streams in use, whether a slot is
//! free) and the request's keys, and names a server. No sockets, no
//! clocks: the tests drive it directly.
//!
//! - `roundrobin` / `static-rr`: smooth weighted round robin (the
//!   interleaving nginx uses: each pick adds every weight to a running
//!   score and takes the highest, which then pays back the total), so
//!   weights 5:1:1 give `a a b a c a a`, never five `a` in a row. A full
//!   server is skipped; a weight change applies at the next pick.
//! - `leastconn`: fewest streams per unit of weight; ties go round robin.
//! - `first`: the first server (in declaration order) with a free slot.
//! - `source`, `uri`, `hdr(NAME)`: a hash of the key over the weights, so
//!   one key keeps its server while the set of servers does not change.
//!   A full chosen server *binds* the stream: it waits in that server's
//!   queue. `hdr` without the header falls back to round robin.
//! - `random [N]`: N weighted random draws, the one with the fewest streams
//!   wins (power of two choices by default).

use crate::config::Balance;

use super::LbInput;

/// Balancing state kept between picks.
pub struct State {
    /// Smooth round-robin scores, by server index.
    score: Vec<i64>,
    /// Rotation for ties.
    next: usize,
    /// xorshift state for `random`.
    rng: u64,
}

impl State {
    pub fn new(n: usize) -> State {
        State {
            score: vec![0; n],
            next: 0,
            rng: 0x9e37_79b9_7f4a_7c15,
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

/// FNV-1a, 64-bit: stable across runs and platforms (a hash-based
/// algorithm must map a key to the same server after a restart).
pub fn hash(data: &[u8]) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for &b in data {
        h ^= u64::from(b);
        h = h.wrapping_mul(0x0000_0100_0000_01b3);
    }
    h
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

fn smooth_rr(st: &mut State, elig: &[usize], weights: &[u32], room: &[bool]) -> Choice {
    let total: i64 = elig
        .iter()
        .zip(weights)
        .zip(room)
        .filter(|(_, &r)| r)
        .map(|((_, &w), _)| i64::from(w.max(1)))
        .sum();
    if total == 0 {
        return Choice::AllFull;
    }
    let mut best: Option<usize> = None;
    for (k, &i) in elig.iter().enumerate() {
        if !room[k] {
            continue;
        }
        if st.score.len() <= i {
            st.score.resize(i + 1, 0);
        }
        st.score[i] += i64::from(weights[k].max(1));
        if best.is_none_or(|b| st.score[i] > st.score[b]) {
            best = Some(i);
        }
    }
    match best {
        Some(b) => {
            st.score[b] -= total;
            Choice::Server(b)
        }
        None => Choice::AllFull,
    }
}

/// Picks among `elig` (server indices) given each one's weight, streams in
/// use and free-slot flag (parallel slices).
pub fn choose(
    balance: &Balance,
    st: &mut State,
    elig: &[usize],
    weights: &[u32],
    cur: &[u32],
    room: &[bool],
    input: &LbInput<'_>,
) -> Choice {
    if elig.is_empty() {
        return Choice::AllFull;
    }
    let bound = |i: usize, k: usize| {
        if room[k] {
            Choice::Server(i)
        } else {
            Choice::Bound(i)
        }
    };
    let hashed = |h: u64| {
        let i = by_weight(h, elig, weights);
        let k = elig.iter().position(|&x| x == i).unwrap_or(0);
        bound(i, k)
    };
    match balance {
        Balance::RoundRobin | Balance::StaticRr => smooth_rr(st, elig, weights, room),
        Balance::LeastConn => {
            // Lowest cur/weight, compared as cur_a * w_b < cur_b * w_a.
            let n = elig.len();
            let mut best: Option<usize> = None;
            for off in 0..n {
                let k = (st.next + off) % n;
                if !room[k] {
                    continue;
                }
                best = match best {
                    None => Some(k),
                    Some(b) => {
                        let lhs = u64::from(cur[k]) * u64::from(weights[b].max(1));
                        let rhs = u64::from(cur[b]) * u64::from(weights[k].max(1));
                        Some(if lhs < rhs { k } else { b })
                    }
                };
            }
            st.next = st.next.wrapping_add(1);
            match best {
                Some(k) => Choice::Server(elig[k]),
                None => Choice::AllFull,
            }
        }
        Balance::First => match room.iter().position(|&r| r) {
            Some(k) => Choice::Server(elig[k]),
            None => Choice::AllFull,
        },
        Balance::Source => match input.src {
            Some(std::net::IpAddr::V4(a)) => hashed(hash(&a.octets())),
            Some(std::net::IpAddr::V6(a)) => hashed(hash(&a.octets())),
            None => smooth_rr(st, elig, weights, room),
        },
        Balance::Uri { whole, len, depth } => {
            let mut u = input.uri;
            if !whole {
                if let Some(q) = u.iter().position(|&c| c == b'?') {
                    u = &u[..q];
                }
            }
            if let Some(d) = depth {
                // Keep the first `d` directory levels.
                let mut slashes = 0;
                if let Some(cut) = u.iter().enumerate().position(|(i, &c)| {
                    if c == b'/' && i > 0 {
                        slashes += 1;
                    }
                    slashes >= *d && c == b'/' && i > 0
                }) {
                    u = &u[..cut];
                }
            }
            if let Some(l) = len {
                u = &u[..u.len().min(*l as usize)];
            }
            hashed(hash(u))
        }
        Balance::Hdr {
            use_domain_only, ..
        } => match input.hdr {
            Some(v) => {
                let v = if *use_domain_only { domain_part(v) } else { v };
                let lower: Vec<u8> = v.iter().map(|c| c.to_ascii_lowercase()).collect();
                hashed(hash(&lower))
            }
            None => smooth_rr(st, elig, weights, room),
        },
        Balance::Random { draws } => {
            let mut best: Option<usize> = None;
            let total: u64 = weights.iter().map(|&w| u64::from(w.max(1))).sum();
            for _ in 0..(*draws).max(1) {
                let i = by_weight(st.rand() % total.max(1), elig, weights);
                let k = elig.iter().position(|&x| x == i).unwrap_or(0);
                if !room[k] {
                    continue;
                }
                best = match best {
                    Some(b) if cur[b] <= cur[k] => Some(b),
                    _ => Some(k),
                };
            }
            match best {
                Some(k) => Choice::Server(elig[k]),
                // Every draw was full: any free one, else wait.
                None => match room.iter().position(|&r| r) {
                    Some(k) => Choice::Server(elig[k]),
                    None => Choice::AllFull,
                },
            }
        }
    }
}

/// `use_domain_only`: the most significant label before the TLD
/// (`www.example.com` -> `example`), as HAProxy hashes it.
fn domain_part(v: &[u8]) -> &[u8] {
    let host = v.split(|&c| c == b':').next().unwrap_or(v);
    let labels: Vec<&[u8]> = host.split(|&c| c == b'.').collect();
    if labels.len() >= 2 {
        labels[labels.len() - 2]
    } else {
        host
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(b: &Balance, weights: &[u32], n: usize) -> Vec<usize> {
        let elig: Vec<usize> = (0..weights.len()).collect();
        let mut st = State::new(weights.len());
        let cur = vec![0; weights.len()];
        let room = vec![true; weights.len()];
        (0..n)
            .map(
                |_| match choose(b, &mut st, &elig, weights, &cur, &room, &LbInput::default()) {
                    Choice::Server(i) => i,
                    c => panic!("{c:?}"),
                },
            )
            .collect()
    }

    #[test]
    fn smooth_round_robin_interleaves_by_weight() {
        let seq = run(&Balance::RoundRobin, &[5, 1, 1], 7);
        assert_eq!(seq, vec![0, 0, 1, 0, 2, 0, 0]);
        let seq = run(&Balance::RoundRobin, &[3, 2, 1], 600);
        let count = |i| seq.iter().filter(|&&x| x == i).count();
        assert_eq!((count(0), count(1), count(2)), (300, 200, 100));
        // Never more than two picks of the heaviest in a row for 3:2:1.
        let runs = seq.windows(3).filter(|w| w.iter().all(|&x| x == 0)).count();
        assert_eq!(runs, 0);
    }

    #[test]
    fn full_servers_are_skipped_and_all_full_waits() {
        let mut st = State::new(3);
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
    fn leastconn_weighs_streams() {
        let mut st = State::new(3);
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
        let mut st = State::new(4);
        let elig = [0, 1, 2, 3];
        let input = LbInput {
            src: Some("10.0.0.7".parse().unwrap()),
            uri: b"/a/b/c?x=1",
            hdr: Some(b"www.Example.com"),
        };
        for b in [
            Balance::Source,
            Balance::Uri {
                whole: false,
                len: None,
                depth: None,
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
        };
        let other = LbInput {
            uri: b"/a/b/c?y=2",
            ..input
        };
        assert_eq!(
            choose(&b, &mut st, &elig, &[1; 4], &[0; 4], &[true; 4], &input),
            choose(&b, &mut st, &elig, &[1; 4], &[0; 4], &[true; 4], &other)
        );
    }

    #[test]
    fn random_prefers_the_less_loaded_of_its_draws() {
        let mut st = State::new(2);
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
    fn domain_only() {
        assert_eq!(domain_part(b"www.example.com:8080"), b"example");
        assert_eq!(domain_part(b"localhost"), b"localhost");
    }
}
