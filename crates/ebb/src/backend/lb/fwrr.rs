//! `balance roundrobin` in HAProxy 2.6's order: its "fast weighted round
//! robin", so that a backend sends the same server sequence as HAProxy
//! with the same weights, from the start and after a weight change or a
//! server going down or up.
//!
//! The facts of the algorithm (HAProxy's lb_fwrr.c, written again here):
//! weights are in units of 1/16 (`eweight = weight x 16`). A group (the
//! active servers, or the backups) walks a *window* of `curr_weight`
//! positions (the sum of the weights when the window began), one position
//! per pick. Each server holds its next position `npos`; the server with
//! the lowest next position that is not past the current one is taken,
//! and its next position moves by `total / eweight` (the remainder carried
//! in `rweight`). Servers wait in three ordered sets: `init` (by weight,
//! heaviest first: not yet started in this window), `curr` (by next
//! position) and `next` (beyond the window: they start the next one, by
//! weight). When `curr` has a hole (its first server's position is ahead)
//! the heaviest of `init` is started instead. When both are empty the
//! window ends: `next` becomes `init`. Ties keep insertion order (HAProxy's
//! trees keep duplicates in insertion order).
//!
//! One state per backend, behind the backend's lock (HAProxy takes its
//! write lock for each pick too). Changes of weight or state are seen as
//! the difference between the snapshot of eligible servers the pick gets
//! and the one before, and applied as HAProxy applies them when they
//! happen: servers gone first, then new servers and weight changes, in
//! declaration order.

/// HAProxy's `BE_WEIGHT_SCALE`: effective weights are weights x 16.
const SCALE: i64 = 16;
/// `SRV_EWGHT_MAX`: the highest effective weight (256 x 16).
const EW_MAX: i64 = 256 * SCALE;
/// `SRV_UWGHT_RANGE`: the factor of a position in a `curr` key.
const UW_RANGE: i64 = 256;

/// Which ordered set a server was last queued in (HAProxy's `lb_tree`).
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Tree {
    None,
    Curr,
    /// One of the two sets that take turns as `init` and `next`.
    T0,
    T1,
}

#[derive(Clone, Debug)]
struct Srv {
    backup: bool,
    tree: Tree,
    /// Whether it sits in `tree` now (dequeued servers keep `tree`).
    queued: bool,
    /// Its sort key and insertion stamp while queued.
    key: u32,
    stamp: u64,
    npos: i64,
    lpos: i64,
    rweight: i64,
    /// The effective weight in use (0: not usable).
    eweight: i64,
    /// The pick's snapshot mark (a server absent from it is gone).
    seen: u64,
}

impl Srv {
    fn new(backup: bool) -> Srv {
        Srv {
            backup,
            tree: Tree::None,
            queued: false,
            key: 0,
            stamp: 0,
            npos: 0,
            lpos: 0,
            rweight: 0,
            eweight: 0,
            seen: 0,
        }
    }
}

/// An ordered set: (key, stamp, server), sorted from the highest to the
/// lowest so that the first is popped off the end.
type Set = Vec<(u32, u64, usize)>;

#[derive(Default, Debug)]
struct Group {
    started: bool,
    curr_pos: i64,
    curr_weight: i64,
    next_weight: i64,
    curr: Set,
    t: [Set; 2],
    /// Whether `t[0]` is `init` (then `t[1]` is `next`).
    init_is_t0: bool,
}

impl Group {
    fn init_tree(&self) -> Tree {
        if self.init_is_t0 {
            Tree::T0
        } else {
            Tree::T1
        }
    }

    fn next_tree(&self) -> Tree {
        if self.init_is_t0 {
            Tree::T1
        } else {
            Tree::T0
        }
    }

    fn set(&mut self, t: Tree) -> &mut Set {
        match t {
            Tree::T0 => &mut self.t[0],
            Tree::T1 => &mut self.t[1],
            _ => &mut self.curr,
        }
    }

    fn first(&self, t: Tree) -> Option<usize> {
        let s = match t {
            Tree::T0 => &self.t[0],
            Tree::T1 => &self.t[1],
            _ => &self.curr,
        };
        s.last().map(|e| e.2)
    }
}

/// The round-robin state of one backend.
#[derive(Default, Debug)]
pub struct Fwrr {
    srv: Vec<Srv>,
    groups: [Group; 2],
    stamp: u64,
    mark: u64,
    /// The snapshot the state was last brought to (its group, eligible
    /// servers and weights; `None` before the first): a pick given the
    /// same one has nothing to apply ([`Fwrr::sync`]).
    last: Option<bool>,
    last_elig: Vec<usize>,
    last_weights: Vec<u32>,
}

/// What a pick is given: the eligible servers (indices) with their
/// effective weights in sixteenths (HAProxy's `eweight`: the weight x
/// [`SCALE`], less during a `slowstart`) and free-slot flags, whether they are the backups, and a
/// server to avoid (a redispatch) if another one can be had.
pub struct Snapshot<'a> {
    pub elig: &'a [usize],
    pub weights: &'a [u32],
    pub room: &'a [bool],
    pub backup: bool,
    pub avoid: Option<usize>,
}

impl Fwrr {
    fn g(&mut self, s: usize) -> &mut Group {
        let b = usize::from(self.srv[s].backup);
        &mut self.groups[b]
    }

    fn dequeue(&mut self, s: usize) {
        if !self.srv[s].queued {
            return;
        }
        let (tree, key, stamp) = (self.srv[s].tree, self.srv[s].key, self.srv[s].stamp);
        let set = self.g(s).set(tree);
        if let Ok(at) = set.binary_search_by(|e| (key, stamp).cmp(&(e.0, e.1))) {
            set.remove(at);
        }
        self.srv[s].queued = false;
    }

    fn insert(&mut self, s: usize, tree: Tree, key: u32) {
        self.stamp += 1;
        let stamp = self.stamp;
        let set = self.g(s).set(tree);
        let at = set.partition_point(|e| (e.0, e.1) > (key, stamp));
        set.insert(at, (key, stamp, s));
        let v = &mut self.srv[s];
        v.tree = tree;
        v.queued = true;
        v.key = key;
        v.stamp = stamp;
    }

    /// Into `init` or `next` by weight, heaviest first.
    fn queue_by_weight(&mut self, s: usize, tree: Tree, next_ew: i64) {
        self.insert(s, tree, (EW_MAX - next_ew) as u32);
    }

    /// Queues a server by its next position: in `curr` when it falls in
    /// the window, else in `next` (its position then counted from the next
    /// window's start); out of every set when not usable.
    fn queue(&mut self, s: usize, next_ew: i64) {
        if next_ew <= 0 {
            self.srv[s].tree = Tree::None;
            return;
        }
        let g = self.g(s);
        let (cw, nw, next) = (g.curr_weight, g.next_weight, g.next_tree());
        let npos = self.srv[s].npos;
        if npos >= 2 * cw || npos >= cw + nw {
            self.srv[s].npos -= cw;
            self.queue_by_weight(s, next, next_ew);
        } else {
            let rw = self.srv[s].rweight;
            let key = UW_RANGE * npos + (EW_MAX + rw - next_ew) / SCALE;
            self.insert(s, Tree::Curr, key as u32);
        }
    }

    /// Prepares a server taken out of its set (HAProxy's fwrr_get_srv).
    fn get_srv(&mut self, s: usize) {
        let g = self.g(s);
        let (init, next, cw, cp) = (g.init_tree(), g.next_tree(), g.curr_weight, g.curr_pos);
        let v = &mut self.srv[s];
        if v.tree == init {
            v.npos = 0;
            v.rweight = 0;
        } else if v.tree == next {
            v.npos += cw;
        } else if v.tree == Tree::None {
            v.npos = cp;
        }
    }

    fn down(&mut self, s: usize) {
        let ew = self.srv[s].eweight;
        self.g(s).next_weight -= ew;
        self.dequeue(s);
        let v = &mut self.srv[s];
        v.tree = Tree::None;
        v.eweight = 0;
    }

    fn up(&mut self, s: usize, ew: i64) {
        self.g(s).next_weight += ew;
        self.get_srv(s);
        let g = self.g(s);
        let npos = g.curr_pos + (g.next_weight + g.curr_weight - g.curr_pos) / ew;
        self.srv[s].npos = npos;
        self.queue(s, ew);
        self.srv[s].eweight = ew;
    }

    fn reweight(&mut self, s: usize, ew: i64) {
        let old = self.srv[s].eweight;
        let g = self.g(s);
        g.next_weight = g.next_weight - old + ew;
        let init = g.init_tree();
        let tree = self.srv[s].tree;
        if tree == init {
            self.dequeue(s);
            self.queue_by_weight(s, init, ew);
        } else if tree == Tree::None {
            self.dequeue(s);
            self.get_srv(s);
            let g = self.g(s);
            let npos = g.curr_pos + (g.next_weight + g.curr_weight - g.curr_pos) / ew;
            self.srv[s].npos = npos;
            self.queue(s, ew);
        } else {
            self.get_srv(s);
            let g = self.g(s);
            let (nw, cp) = (g.next_weight, g.curr_pos);
            let v = &mut self.srv[s];
            let prev = v.npos;
            let step = nw / ew;
            v.npos = (v.lpos + step).min(prev);
            v.rweight = 0;
            if v.npos < cp + 2 {
                v.npos = cp + step;
            }
            self.dequeue(s);
            self.queue(s, ew);
        }
        self.srv[s].eweight = ew;
    }

    /// Brings the state to the snapshot's servers and weights. The usual
    /// pick sees the servers and weights of the one before: then nothing
    /// changed and nothing is walked (only `sync_all` changes weights,
    /// groups and the set of servers in a window, so a snapshot equal to
    /// the last one applied would apply nothing).
    fn sync(&mut self, snap: &Snapshot<'_>) {
        if self.last == Some(snap.backup)
            && self.last_elig == snap.elig
            && self.last_weights == snap.weights
        {
            return;
        }
        self.sync_all(snap);
        self.last = Some(snap.backup);
        self.last_elig.clear();
        self.last_elig.extend_from_slice(snap.elig);
        self.last_weights.clear();
        self.last_weights.extend_from_slice(snap.weights);
    }

    /// [`Fwrr::sync`]'s work: servers gone first, then new servers and
    /// weight changes, as HAProxy applies them.
    fn sync_all(&mut self, snap: &Snapshot<'_>) {
        let top = snap.elig.iter().copied().max().unwrap_or(0);
        if self.srv.len() <= top {
            self.srv.resize(top + 1, Srv::new(snap.backup));
        }
        self.mark += 1;
        let mark = self.mark;
        for &i in snap.elig {
            self.srv[i].seen = mark;
        }
        let b = usize::from(snap.backup);
        if !self.groups[b].started {
            // HAProxy's start: every usable server in `init`, by weight
            // (declaration order on ties), the window the sum of them.
            let g = &mut self.groups[b];
            *g = Group {
                started: true,
                init_is_t0: true,
                ..Group::default()
            };
            let mut tot = 0;
            for (k, &i) in snap.elig.iter().enumerate() {
                let ew = i64::from(snap.weights[k]);
                let v = &mut self.srv[i];
                *v = Srv::new(snap.backup);
                v.seen = mark;
                if ew > 0 {
                    v.eweight = ew;
                    tot += ew;
                    self.queue_by_weight(i, Tree::T0, ew);
                }
            }
            let g = &mut self.groups[b];
            g.curr_pos = tot;
            g.curr_weight = tot;
            g.next_weight = tot;
            return;
        }
        for i in 0..self.srv.len() {
            let v = &self.srv[i];
            if v.backup == snap.backup && v.eweight > 0 && v.seen != mark {
                self.down(i);
            }
        }
        for (k, &i) in snap.elig.iter().enumerate() {
            let ew = i64::from(snap.weights[k]);
            if self.srv[i].backup != snap.backup {
                // A server moved between groups (added again as the
                // other kind): out of the old one first.
                if self.srv[i].eweight > 0 {
                    self.down(i);
                }
                self.srv[i].backup = snap.backup;
            }
            let old = self.srv[i].eweight;
            if ew == old {
                continue;
            }
            if ew == 0 {
                self.down(i);
            } else if old == 0 {
                self.up(i, ew);
            } else {
                self.reweight(i, ew);
            }
        }
    }

    /// The first server of `curr` if its turn has come, else the heaviest
    /// not started yet, else the first of `curr` anyway (None: empty).
    fn group_first(&mut self, b: usize) -> Option<usize> {
        let g = &self.groups[b];
        let s1 = g.first(Tree::Curr);
        if let Some(s) = s1 {
            if self.srv[s].eweight > 0 && self.srv[s].npos <= g.curr_pos {
                return Some(s);
            }
        }
        if let Some(s) = g.first(g.init_tree()) {
            if self.srv[s].eweight > 0 {
                self.srv[s].npos = 0;
                self.srv[s].rweight = 0;
                return Some(s);
            }
        }
        s1
    }

    fn update_position(&mut self, b: usize, s: usize) {
        let (cp, nw) = (self.groups[b].curr_pos, self.groups[b].next_weight);
        let v = &mut self.srv[s];
        let ew = v.eweight;
        if ew <= 0 {
            return;
        }
        if v.npos == 0 {
            v.npos = cp;
        }
        v.lpos = v.npos;
        v.npos += nw / ew;
        v.rweight += nw % ew;
        if v.rweight >= ew {
            v.rweight -= ew;
            v.npos += 1;
        }
    }

    /// Picks the next server (an index of `snap.elig`'s servers), or None
    /// when every one is full (the stream then waits). Full servers met
    /// on the way are put back as if they had been taken.
    pub fn pick(&mut self, snap: &Snapshot<'_>) -> Option<usize> {
        self.sync(snap);
        let b = usize::from(snap.backup);
        let room = |s: usize| {
            snap.elig
                .iter()
                .position(|&i| i == s)
                .is_some_and(|k| snap.room[k])
        };
        let mut switched = false;
        let mut avoided: Option<usize> = None;
        // Servers taken out but passed over, the last one first.
        let mut passed: [usize; 8] = [0; 8];
        let mut more: Vec<usize> = Vec::new();
        let mut n = 0usize;
        let mut chosen: Option<usize> = None;
        let mut requeue_only = false;
        loop {
            let g = &mut self.groups[b];
            if g.curr_weight == 0 {
                g.curr_pos = g.next_weight;
                g.curr_weight = g.next_weight;
            }
            let s = loop {
                if let Some(s) = self.group_first(b) {
                    break Some(s);
                }
                if switched {
                    break None;
                }
                switched = true;
                let g = &mut self.groups[b];
                g.init_is_t0 = !g.init_is_t0;
                g.curr_weight = g.next_weight;
                g.curr_pos = g.curr_weight;
            };
            let Some(s) = s else {
                match avoided {
                    Some(a) => chosen = Some(a),
                    None => requeue_only = true,
                }
                break;
            };
            self.update_position(b, s);
            self.dequeue(s);
            self.groups[b].curr_pos += 1;
            if room(s) {
                if Some(s) != snap.avoid || avoided.is_some() {
                    chosen = Some(s);
                    break;
                }
                avoided = Some(s);
            }
            if n < passed.len() {
                passed[n] = s;
            } else {
                more.push(s);
            }
            n += 1;
        }
        if !requeue_only {
            if let Some(s) = chosen {
                let ew = self.srv[s].eweight;
                self.queue(s, ew);
            }
        }
        let init = self.groups[b].init_tree();
        for k in (0..n).rev() {
            let f = if k < passed.len() {
                passed[k]
            } else {
                more[k - passed.len()]
            };
            if Some(f) == chosen {
                continue;
            }
            let ew = self.srv[f].eweight;
            if switched {
                self.queue_by_weight(f, init, ew);
            } else {
                self.queue(f, ew);
            }
        }
        chosen
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn seq(weights: &[u32], n: usize) -> String {
        let elig: Vec<usize> = (0..weights.len()).collect();
        let room = vec![true; weights.len()];
        let sixteenths: Vec<u32> = weights.iter().map(|w| w * 16).collect();
        let mut f = Fwrr::default();
        (0..n)
            .map(|_| {
                let snap = Snapshot {
                    elig: &elig,
                    weights: &sixteenths,
                    room: &room,
                    backup: false,
                    avoid: None,
                };
                (b'a' + f.pick(&snap).unwrap() as u8) as char
            })
            .collect()
    }

    /// Sequences HAProxy 2.6.12 sends (nbthread 1, one request at a time).
    #[test]
    fn orders_are_haproxys() {
        let cases: &[(&[u32], &str)] = &[
            (&[5, 1, 1], "aaabaacaaabaacaaabaac"),
            (&[1, 3], "bbbabbbabbbabbbabbbabbbabbbabbbabbbabbba"),
            (&[3, 2, 1], "abacababacababacababacababacababacababac"),
            (&[2, 3, 4], "cbcabccbacbcabccbacbcabccbacbcabccbacbca"),
            (&[1, 1, 1, 1], "abcdabcdabcdabcdabcdabcdabcdabcdabcdabcd"),
            (&[7, 3], "aaabaabaabaaabaabaabaaabaabaabaaabaabaab"),
            (&[10, 1, 1, 5], "aadabadaadaadacadaadabadaadaadacadaadaba"),
            (&[4, 4, 1], "ababababcababababcababababcababababcabab"),
            (&[256, 1], "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"),
        ];
        for (w, want) in cases {
            assert_eq!(seq(w, want.len()), *want, "weights {w:?}");
        }
    }
}
