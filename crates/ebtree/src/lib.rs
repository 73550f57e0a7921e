//! # Elastic binary trees
//!
//! The ordered structure under ebb's run queues and wait queues. It follows the
//! idea of Willy Tarreau's ebtree (the tree under HAProxy's scheduler): a binary
//! radix tree over the bits of the key in which **every entry brings exactly one
//! leaf and one internal node**. Inserting an entry therefore never allocates
//! anything beyond the entry itself, and deleting one never rebalances: it only
//! splices two or three links.
//!
//! ## General idea
//!
//! An internal ("node") part splits its subtree on one bit of the key: every key
//! below it agrees on all bits above that bit, keys with the bit clear go left
//! and keys with the bit set go right. Leaves hold the keys. A tree of N
//! entries has N leaves and N-1 internal nodes in use; the node part of one
//! entry stays unused (the one in the root's slot, for the first entry).
//!
//! ```text
//!                     root
//!                      |  (only the left branch of the root is used)
//!                   [B: bit 3]                   node part of entry B
//!                  /          \
//!         [A: bit 1]          (B=12)             B's own leaf is on the right
//!         /        \
//!      (A=1)     [C: bit 0]                      node part of entry C
//!                /       \
//!             (C=2)     (D=3)                    D's node part is unused
//! ```
//!
//! Each entry knows the parent of its leaf part (`leaf_p`) and of its node
//! part (`node_p`). The node part of an entry is always above its own leaf,
//! which is why the key stored in an entry can be used to compare with the
//! prefix shared by its whole subtree.
//!
//! ### Deleting
//!
//! Removing the leaf of entry E frees the internal node P directly above it
//! (E's leaf and its sibling hang from P): the sibling is attached to P's
//! parent. If E's own node part was in use elsewhere, P's node part, now free,
//! takes its place (it is below E's node, so its key shares the right prefix).
//! No other part of the tree moves.
//!
//! ### Duplicates
//!
//! Equal keys are kept. They form a *duplicate subtree* whose internal nodes
//! have a negative bit number; the subtree is filled so that an in-order walk
//! visits the duplicates in insertion order (FIFO), which the run queue relies
//! on to keep tasks of equal priority in the order they were woken:
//!
//! ```text
//!            [X: bit -2]                 dup tree of key 7: X, Y, Z, W
//!           /           \                inserted in that order
//!     [Y: bit -1]     [W: bit -1]
//!      /      \        /      \
//!   (X=7)   (Y=7)   (Z=7)   (W=7)
//! ```
//!
//! ### Scopes
//!
//! The scope-aware variant (`S = u64`) stores a mask on every entry (one bit
//! per thread that may take it) and keeps in every internal node the OR of the
//! masks of its subtree. It is set on insert (ORed along the path) and
//! recomputed upward on delete, so it is always exact, and a walk for a given
//! scope skips every subtree holding nothing for it: a thread finds its next
//! entry in O(depth), however many entries of other threads fill the tree.
//!
//! ### Ticks and wrapping keys
//!
//! Timer keys are wrapping milliseconds. [`EbTree::lookup_ge_wrap`] returns the
//! first entry at or after a key in circular order (wrapping to the smallest
//! key), so a timer tree is scanned from `now - 2^31`, as HAProxy does.
//!
//! ## Memory and handles
//!
//! Entries live in an arena owned by the tree and are addressed by
//! [`Handle`]s (slot index + generation). A handle of a deleted entry is
//! detected as stale; it never reaches another entry that reused the slot.
//! The arena is plain safe Rust: indices instead of pointers.

#![deny(unsafe_op_in_unsafe_fn, clippy::undocumented_unsafe_blocks)]
#![forbid(unsafe_code)]

use std::fmt::Debug;

mod key;
mod prefix;
pub use key::{BytesKey, Key, MbKey};
pub use prefix::PrefixTree;

/// Index of the root pseudo-entry in the arena. Only its left branch is used.
const ROOT: u32 = 0;
/// Branch sides.
const LEFT: usize = 0;
const RIGHT: usize = 1;

/// A link from a node to one of its children: `(index << 1) | is_leaf`.
#[derive(Clone, Copy, PartialEq, Eq)]
struct Down(u32);

impl Down {
    const NIL: Down = Down(u32::MAX);
    #[inline(always)]
    fn leaf(i: u32) -> Down {
        Down((i << 1) | 1)
    }
    #[inline(always)]
    fn node(i: u32) -> Down {
        Down(i << 1)
    }
    #[inline(always)]
    fn is_leaf(self) -> bool {
        self.0 & 1 == 1
    }
    #[inline(always)]
    fn idx(self) -> u32 {
        self.0 >> 1
    }
}

/// A link from a leaf or node part to its parent: `(parent << 1) | side`.
#[derive(Clone, Copy, PartialEq, Eq)]
struct Up(u32);

impl Up {
    /// Not linked (a free slot, a deleted entry, or an unused node part).
    const NONE: Up = Up(u32::MAX);
    #[inline(always)]
    fn new(parent: u32, side: usize) -> Up {
        Up((parent << 1) | side as u32)
    }
    #[inline(always)]
    fn idx(self) -> u32 {
        self.0 >> 1
    }
    #[inline(always)]
    fn side(self) -> usize {
        (self.0 & 1) as usize
    }
}

/// What a tree stores as scope for each entry: nothing ([`NoScope`]) or a
/// `u64` thread mask. The empty implementation compiles every scope update
/// away, so plain trees pay nothing for the scoped variant.
pub trait Scope: Copy + Debug + Default + PartialEq {
    /// Whether the tree maintains masks at all.
    const ENABLED: bool;
    /// Union of two masks.
    fn or(self, other: Self) -> Self;
    /// Whether this mask shares a bit with `mask`.
    fn hits(self, mask: u64) -> bool;
    /// Whether `self` holds every bit of `other`.
    fn covers(self, other: Self) -> bool;
}

/// The scope of a plain tree: every entry is visible to every walk.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct NoScope;

impl Scope for NoScope {
    const ENABLED: bool = false;
    #[inline(always)]
    fn or(self, _: Self) -> Self {
        NoScope
    }
    #[inline(always)]
    fn hits(self, _: u64) -> bool {
        true
    }
    #[inline(always)]
    fn covers(self, _: Self) -> bool {
        true
    }
}

impl Scope for u64 {
    const ENABLED: bool = true;
    #[inline(always)]
    fn or(self, other: Self) -> Self {
        self | other
    }
    #[inline(always)]
    fn hits(self, mask: u64) -> bool {
        self & mask != 0
    }
    #[inline(always)]
    fn covers(self, other: Self) -> bool {
        self & other == other
    }
}

/// Names one entry of one tree. Copyable; stale once the entry is deleted.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Handle {
    idx: u32,
    gen: u32,
}

impl Handle {
    /// A handle that names no entry of any tree (a placeholder).
    pub const fn dangling() -> Handle {
        Handle {
            idx: ROOT,
            gen: u32::MAX,
        }
    }

    /// The arena slot, for diagnostics.
    pub fn slot(self) -> u32 {
        self.idx
    }
}

/// One arena slot: the leaf part and the node part of an entry. The fields a
/// descent reads come first; with u64 keys and no scope an entry is 32 bytes,
/// two per cache line. Values live apart (`EbTree::vals`) so that they do not
/// dilute the links in the cache.
#[derive(Clone)]
#[repr(C)]
struct Entry<K, S> {
    /// Children of the node part. INVARIANT: meaningful only while `node_p`
    /// is not NONE (and always for the root). For a free slot, `b[0]` links
    /// the free list.
    b: [Down; 2],
    key: K,
    /// Bit the node part splits on; negative inside a duplicate subtree.
    bit: i32,
    /// Parent of the node part; NONE when the node part is unused.
    node_p: Up,
    /// Parent of the leaf part; NONE when the entry is not in the tree.
    leaf_p: Up,
    /// Bumped on delete so that old handles are recognised as stale.
    gen: u32,
    /// OR of the scopes of every leaf below the node part (exact).
    node_s: S,
    /// This entry's own scope.
    leaf_s: S,
}

/// An elastic binary tree keyed by `K` (`u32` or `u64`), holding a `V` per
/// entry, with optional scope masks `S`.
pub struct EbTree<K: Key, V, S: Scope = NoScope> {
    slots: Vec<Entry<K, S>>,
    /// Values by slot; `Some` exactly for live entries.
    vals: Vec<Option<V>>,
    free: u32,
    len: usize,
    /// Slot of the first entry (leftmost leaf) while the tree is not empty,
    /// so that `first` (the scheduler's hottest call) costs one load.
    first: u32,
}

/// Plain tree keyed by `u32`.
pub type Eb32Tree<V> = EbTree<u32, V, NoScope>;
/// Plain tree keyed by `u64`.
pub type Eb64Tree<V> = EbTree<u64, V, NoScope>;
/// Scope-aware tree keyed by `u32`.
pub type Eb32ScTree<V> = EbTree<u32, V, u64>;
/// Scope-aware tree keyed by `u64`.
pub type Eb64ScTree<V> = EbTree<u64, V, u64>;
/// Tree keyed by fixed-length byte strings (HAProxy's `ebmb`).
pub type EbMbTree<const N: usize, V> = EbTree<MbKey<N>, V, NoScope>;
/// Tree keyed by IPv4 addresses in network order.
pub type EbIpv4Tree<V> = EbMbTree<4, V>;
/// Tree keyed by IPv6 addresses in network order.
pub type EbIpv6Tree<V> = EbMbTree<16, V>;
/// Tree keyed by byte strings of any length (HAProxy's `ebst`, NULs allowed).
pub type EbStTree<V> = EbTree<BytesKey, V, NoScope>;

const FREE_END: u32 = u32::MAX;

impl<K: Key, V, S: Scope> Default for EbTree<K, V, S> {
    fn default() -> Self {
        Self::new()
    }
}

impl<K: Key, V, S: Scope> EbTree<K, V, S> {
    /// An empty tree.
    pub fn new() -> Self {
        Self::with_capacity(0)
    }

    /// An empty tree with room for `n` entries before the arena grows.
    pub fn with_capacity(n: usize) -> Self {
        let mut slots = Vec::with_capacity(n + 1);
        slots.push(Entry {
            b: [Down::NIL, Down::NIL],
            node_p: Up::NONE,
            leaf_p: Up::NONE,
            bit: i32::MAX,
            key: K::default(),
            node_s: S::default(),
            leaf_s: S::default(),
            gen: 0,
        });
        let mut vals = Vec::with_capacity(n + 1);
        vals.push(None);
        EbTree {
            slots,
            vals,
            free: FREE_END,
            len: 0,
            first: ROOT,
        }
    }

    /// Number of entries.
    #[inline]
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether the tree holds no entry.
    #[inline]
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Entry slots allocated (live or free for reuse): the tree's memory is
    /// this many entries, however many inserts and deletes it saw.
    #[inline]
    pub fn arena_len(&self) -> usize {
        self.slots.len() - 1
    }

    #[inline(always)]
    fn at(&self, i: u32) -> &Entry<K, S> {
        &self.slots[i as usize]
    }

    #[inline(always)]
    fn at_mut(&mut self, i: u32) -> &mut Entry<K, S> {
        &mut self.slots[i as usize]
    }

    #[inline(always)]
    fn handle(&self, i: u32) -> Handle {
        Handle {
            idx: i,
            gen: self.at(i).gen,
        }
    }

    /// Slot of a live handle, or None if stale.
    #[inline(always)]
    fn live(&self, h: Handle) -> Option<u32> {
        match self.slots.get(h.idx as usize) {
            Some(e) if h.idx != ROOT && e.gen == h.gen && e.leaf_p != Up::NONE => Some(h.idx),
            _ => None,
        }
    }

    /// Whether `h` names an entry still in the tree.
    #[inline]
    pub fn contains(&self, h: Handle) -> bool {
        self.live(h).is_some()
    }

    /// Key of a live entry.
    #[inline]
    pub fn key(&self, h: Handle) -> Option<K> {
        self.live(h).map(|i| self.at(i).key.clone())
    }

    /// Scope of a live entry.
    #[inline]
    pub fn scope_of(&self, h: Handle) -> Option<S> {
        self.live(h).map(|i| self.at(i).leaf_s)
    }

    /// Value of a live entry.
    #[inline]
    pub fn get(&self, h: Handle) -> Option<&V> {
        self.live(h).and_then(|i| self.vals[i as usize].as_ref())
    }

    /// Mutable value of a live entry.
    #[inline]
    pub fn get_mut(&mut self, h: Handle) -> Option<&mut V> {
        match self.live(h) {
            Some(i) => self.vals[i as usize].as_mut(),
            None => None,
        }
    }

    /// Key and value of a live entry.
    #[inline]
    pub fn entry(&self, h: Handle) -> Option<(K, &V)> {
        let i = self.live(h)?;
        self.vals[i as usize]
            .as_ref()
            .map(|v| (self.at(i).key.clone(), v))
    }

    /// Mask of a child link (the leaf's own scope or the node's subtree scope).
    #[inline(always)]
    fn down_scope(&self, d: Down) -> S {
        let e = self.at(d.idx());
        if d.is_leaf() {
            e.leaf_s
        } else {
            e.node_s
        }
    }

    /// Points the parent link of the child `d` at `up`.
    #[inline(always)]
    fn set_up(&mut self, d: Down, up: Up) {
        let e = self.at_mut(d.idx());
        if d.is_leaf() {
            e.leaf_p = up;
        } else {
            e.node_p = up;
        }
    }

    fn alloc(&mut self, key: K, scope: S, val: V) -> u32 {
        if self.free != FREE_END {
            let i = self.free;
            self.free = self.at(i).b[0].0;
            let e = self.at_mut(i);
            e.key = key;
            e.leaf_s = scope;
            e.node_s = scope;
            self.vals[i as usize] = Some(val);
            i
        } else {
            let i = self.slots.len();
            assert!(i < (u32::MAX >> 1) as usize - 1, "ebtree arena full");
            self.slots.push(Entry {
                b: [Down::NIL, Down::NIL],
                node_p: Up::NONE,
                leaf_p: Up::NONE,
                bit: 0,
                key,
                node_s: scope,
                leaf_s: scope,
                gen: 0,
            });
            self.vals.push(Some(val));
            i as u32
        }
    }

    /// Inserts an entry with the given scope and returns its handle. Equal
    /// keys are kept and visited after the ones already present.
    pub fn insert_with_scope(&mut self, key: K, scope: S, val: V) -> Handle {
        let n = self.alloc(key, scope, val);
        self.link(n);
        self.len += 1;
        self.handle(n)
    }

    /// Links the allocated, unlinked slot `n` (key and scope set) into the tree.
    fn link(&mut self, n: u32) {
        // The key is moved out for the walk (the tree is mutated on the way)
        // and put back after; for byte keys this avoids a copy per insert.
        let key = std::mem::take(&mut self.at_mut(n).key);
        self.link_key(n, &key);
        self.at_mut(n).key = key;
    }

    /// [`Self::link`] with the entry's key held apart; `n`'s own key field
    /// must not be read meanwhile.
    fn link_key(&mut self, n: u32, key: &K) {
        let scope = self.at(n).leaf_s;
        let troot0 = self.at(ROOT).b[LEFT];
        if troot0 == Down::NIL {
            self.at_mut(ROOT).b[LEFT] = Down::leaf(n);
            let e = self.at_mut(n);
            e.leaf_p = Up::new(ROOT, LEFT);
            e.node_p = Up::NONE;
            self.first = n;
            return;
        }
        // Equal keys go after the existing ones, so only a smaller key
        // becomes the new first entry.
        if *key < self.at(self.first).key {
            self.first = n;
        }

        // Walk down to the place where the new entry's node goes: above the
        // first leaf reached, above a duplicate subtree, or above the first
        // node whose prefix differs from the new key.
        let mut parent = ROOT;
        let mut side = LEFT;
        let mut troot = troot0;
        loop {
            let old = troot.idx();
            if troot.is_leaf() {
                break;
            }
            let o = self.at(old);
            if o.bit < 0 || key.differs_above(&o.key, o.bit as u32) {
                break;
            }
            let ob = o.bit as u32;
            if S::ENABLED {
                let e = self.at_mut(old);
                e.node_s = e.node_s.or(scope);
            }
            parent = old;
            side = key.bit(ob);
            troot = self.at(old).b[side];
        }

        let old = troot.idx();
        let old_key = &self.at(old).key;
        let key_ge = *key >= *old_key;
        let bit = if *key == *old_key {
            if !troot.is_leaf() {
                // A duplicate subtree is already there: append to it.
                self.insert_dup(old, n);
                if S::ENABLED {
                    self.scope_or_up(n, scope);
                }
                return;
            }
            // A single equal leaf: the two form a new duplicate subtree.
            -1
        } else {
            key.highest_diff_bit(old_key) as i32
        };

        let up_old;
        let e_b;
        let e_leaf_p;
        if key_ge {
            e_b = [troot, Down::leaf(n)];
            e_leaf_p = Up::new(n, RIGHT);
            up_old = Up::new(n, LEFT);
        } else {
            e_b = [Down::leaf(n), troot];
            e_leaf_p = Up::new(n, LEFT);
            up_old = Up::new(n, RIGHT);
        }
        self.set_up(troot, up_old);
        let sub_s = if S::ENABLED {
            self.down_scope(troot).or(scope)
        } else {
            scope
        };
        let e = self.at_mut(n);
        e.b = e_b;
        e.leaf_p = e_leaf_p;
        e.node_p = Up::new(parent, side);
        e.bit = bit;
        e.node_s = sub_s;
        self.at_mut(parent).b[side] = Down::node(n);
    }

    /// Inserts `n` into the duplicate subtree whose top node part is `sub`,
    /// after every entry already there.
    fn insert_dup(&mut self, mut sub: u32, n: u32) {
        // Find the deepest hole on the right spine of the duplicate subtree.
        let mut head = sub;
        while !self.at(head).b[RIGHT].is_leaf() {
            let last = head;
            head = self.at(head).b[RIGHT].idx();
            if self.at(head).bit > self.at(last).bit + 1 {
                sub = head;
            }
        }
        let scope = self.at(n).leaf_s;
        if self.at(head).bit < -1 {
            // A hole just above the rightmost leaf: the new node goes there.
            let leaf = self.at(head).b[RIGHT].idx();
            self.at_mut(head).b[RIGHT] = Down::node(n);
            let leaf_s = self.at(leaf).leaf_s;
            let lp = self.at(leaf).leaf_p;
            self.at_mut(leaf).leaf_p = Up::new(n, LEFT);
            let e = self.at_mut(n);
            e.bit = -1;
            e.node_p = lp;
            e.leaf_p = Up::new(n, RIGHT);
            e.b = [Down::leaf(leaf), Down::leaf(n)];
            e.node_s = leaf_s.or(scope);
        } else {
            // No hole: the new node goes above `sub`, one level lower in bits.
            let sub_up = self.at(sub).node_p;
            let sub_bit = self.at(sub).bit;
            let sub_s = self.at(sub).node_s;
            self.at_mut(sub_up.idx()).b[sub_up.side()] = Down::node(n);
            self.at_mut(sub).node_p = Up::new(n, LEFT);
            let e = self.at_mut(n);
            e.bit = sub_bit - 1;
            e.node_p = sub_up;
            e.leaf_p = Up::new(n, RIGHT);
            e.b = [Down::node(sub), Down::leaf(n)];
            e.node_s = sub_s.or(scope);
        }
    }

    /// ORs `scope` into every node above the node part of `n`, stopping as
    /// soon as one already covers it (its ancestors then do too).
    fn scope_or_up(&mut self, n: u32, scope: S) {
        let mut up = self.at(n).node_p;
        while up.idx() != ROOT {
            let e = self.at_mut(up.idx());
            if e.node_s.covers(scope) {
                return;
            }
            e.node_s = e.node_s.or(scope);
            up = e.node_p;
        }
    }

    /// Recomputes node masks from node part `x` upward, stopping when one
    /// does not change (the masks above are then still exact).
    fn scope_recompute_up(&mut self, mut x: u32) {
        while x != ROOT {
            let b = self.at(x).b;
            let s = self.down_scope(b[LEFT]).or(self.down_scope(b[RIGHT]));
            let e = self.at_mut(x);
            if e.node_s == s {
                return;
            }
            e.node_s = s;
            x = e.node_p.idx();
        }
    }

    /// Removes a live entry and returns its value; None for a stale handle.
    pub fn delete(&mut self, h: Handle) -> Option<V> {
        let n = self.live(h)?;
        self.unlink(n);
        self.len -= 1;
        let free = self.free;
        let e = self.at_mut(n);
        e.gen = e.gen.wrapping_add(1);
        e.b[0] = Down(free);
        let v = self.vals[n as usize].take();
        self.free = n;
        v
    }

    /// Detaches entry `n` from the tree (ebtree's delete).
    fn unlink(&mut self, n: u32) {
        let lp = self.at(n).leaf_p;
        if n == self.first {
            self.first = self.next_after(lp).unwrap_or(ROOT);
        }
        let pside = lp.side();
        let parent = lp.idx();
        if parent == ROOT {
            // The only entry, just below the root.
            self.at_mut(ROOT).b[LEFT] = Down::NIL;
            let e = self.at_mut(n);
            e.leaf_p = Up::NONE;
            e.node_p = Up::NONE;
            return;
        }

        // Release the parent node: the sibling goes up to the grandparent.
        let sib = self.at(parent).b[1 - pside];
        let gp_up = self.at(parent).node_p;
        self.at_mut(gp_up.idx()).b[gp_up.side()] = sib;
        self.set_up(sib, gp_up);
        self.at_mut(parent).node_p = Up::NONE;
        let mut fix_from = gp_up.idx();

        // If our own node part is still in use, the freed parent node takes
        // its place (it lies below it, so its key has the right prefix).
        let node_p = self.at(n).node_p;
        if node_p != Up::NONE {
            let (b, bit, node_s) = {
                let e = self.at(n);
                (e.b, e.bit, e.node_s)
            };
            {
                let p = self.at_mut(parent);
                p.node_p = node_p;
                p.b = b;
                p.bit = bit;
                p.node_s = node_s;
            }
            self.at_mut(node_p.idx()).b[node_p.side()] = Down::node(parent);
            self.set_up(b[LEFT], Up::new(parent, LEFT));
            self.set_up(b[RIGHT], Up::new(parent, RIGHT));
            if fix_from == n {
                fix_from = parent;
            }
        }
        let e = self.at_mut(n);
        e.leaf_p = Up::NONE;
        e.node_p = Up::NONE;
        if S::ENABLED {
            self.scope_recompute_up(fix_from);
        }
    }

    /// Moves a live entry to a new key, keeping its handle valid. Equivalent
    /// to delete + insert (the entry goes after existing equal keys) but
    /// without touching the arena. Returns false for a stale handle.
    pub fn requeue(&mut self, h: Handle, key: K) -> bool {
        let Some(n) = self.live(h) else {
            return false;
        };
        self.unlink(n);
        self.at_mut(n).key = key;
        if S::ENABLED {
            let s = self.at(n).leaf_s;
            self.at_mut(n).node_s = s;
        }
        self.link(n);
        true
    }

    /// Leftmost leaf below `d`.
    #[inline(always)]
    fn walk_down(&self, mut d: Down, side: usize) -> u32 {
        while !d.is_leaf() {
            d = self.at(d.idx()).b[side];
        }
        d.idx()
    }

    /// Entry with the smallest key (the oldest among equal keys).
    #[inline]
    pub fn first(&self) -> Option<Handle> {
        if self.len == 0 {
            return None;
        }
        Some(self.handle(self.first))
    }

    /// Entry with the largest key (the newest among equal keys).
    #[inline]
    pub fn last(&self) -> Option<Handle> {
        let d = self.at(ROOT).b[LEFT];
        if d == Down::NIL {
            return None;
        }
        Some(self.handle(self.walk_down(d, RIGHT)))
    }

    /// First leaf after the subtree hanging at `up` (in key order).
    #[inline(always)]
    fn next_after(&self, mut up: Up) -> Option<u32> {
        while up.side() != LEFT {
            up = self.at(up.idx()).node_p;
        }
        let d = self.at(up.idx()).b[RIGHT];
        if d == Down::NIL {
            return None; // came up from the root's left branch
        }
        Some(self.walk_down(d, LEFT))
    }

    /// Last leaf before the subtree hanging at `up`.
    #[inline(always)]
    fn prev_before(&self, mut up: Up) -> Option<u32> {
        while up.side() == LEFT {
            if up.idx() == ROOT {
                return None;
            }
            up = self.at(up.idx()).node_p;
        }
        let d = self.at(up.idx()).b[LEFT];
        Some(self.walk_down(d, RIGHT))
    }

    /// Entry after `h` in key order (FIFO among equal keys).
    #[inline]
    pub fn next(&self, h: Handle) -> Option<Handle> {
        let n = self.live(h)?;
        self.next_after(self.at(n).leaf_p).map(|i| self.handle(i))
    }

    /// Entry before `h` in key order.
    #[inline]
    pub fn prev(&self, h: Handle) -> Option<Handle> {
        let n = self.live(h)?;
        self.prev_before(self.at(n).leaf_p).map(|i| self.handle(i))
    }

    /// First (oldest) entry whose key equals `k`.
    pub fn lookup(&self, k: K) -> Option<Handle> {
        self.lookup_ref(&k)
    }

    /// [`Self::lookup`] with a borrowed key (no copy of a byte key).
    pub fn lookup_ref(&self, k: &K) -> Option<Handle> {
        let i = self.lookup_ge_idx(k)?;
        (self.at(i).key == *k).then(|| self.handle(i))
    }

    /// Key of a live entry, borrowed.
    #[inline]
    pub fn key_ref(&self, h: Handle) -> Option<&K> {
        self.live(h).map(|i| &self.at(i).key)
    }

    /// First entry whose key is `>= k`.
    pub fn lookup_ge(&self, k: K) -> Option<Handle> {
        self.lookup_ge_ref(&k)
    }

    /// [`Self::lookup_ge`] with a borrowed key.
    pub fn lookup_ge_ref(&self, k: &K) -> Option<Handle> {
        self.lookup_ge_idx(k).map(|i| self.handle(i))
    }

    fn lookup_ge_idx(&self, k: &K) -> Option<u32> {
        let mut troot = self.at(ROOT).b[LEFT];
        if troot == Down::NIL {
            return None;
        }
        let up;
        loop {
            let i = troot.idx();
            let e = self.at(i);
            if troot.is_leaf() {
                if e.key >= *k {
                    return Some(i);
                }
                up = e.leaf_p;
                break;
            }
            if e.bit < 0 {
                // Top of a duplicate subtree: all of it or none of it.
                if e.key >= *k {
                    return Some(self.walk_down(troot, LEFT));
                }
                up = e.node_p;
                break;
            }
            let bit = e.bit as u32;
            if k.differs_above(&e.key, bit) {
                if e.key.prefix_gt(k, bit) {
                    return Some(self.walk_down(troot, LEFT));
                }
                up = e.node_p;
                break;
            }
            troot = e.b[k.bit(bit)];
        }
        self.next_after(up)
    }

    /// Last (newest) entry whose key is `<= k`.
    pub fn lookup_le(&self, k: K) -> Option<Handle> {
        self.lookup_le_ref(&k)
    }

    /// [`Self::lookup_le`] with a borrowed key.
    pub fn lookup_le_ref(&self, k: &K) -> Option<Handle> {
        let mut troot = self.at(ROOT).b[LEFT];
        if troot == Down::NIL {
            return None;
        }
        let up;
        loop {
            let i = troot.idx();
            let e = self.at(i);
            if troot.is_leaf() {
                if e.key <= *k {
                    return Some(self.handle(i));
                }
                up = e.leaf_p;
                break;
            }
            if e.bit < 0 {
                if e.key <= *k {
                    return Some(self.handle(self.walk_down(troot, RIGHT)));
                }
                up = e.node_p;
                break;
            }
            let bit = e.bit as u32;
            if k.differs_above(&e.key, bit) {
                if k.prefix_gt(&e.key, bit) {
                    return Some(self.handle(self.walk_down(troot, RIGHT)));
                }
                up = e.node_p;
                break;
            }
            troot = e.b[k.bit(bit)];
        }
        self.prev_before(up).map(|i| self.handle(i))
    }

    /// First entry at or after `k` in circular key order: the first entry
    /// `>= k`, or else the smallest entry. This is how a timer tree keyed by
    /// wrapping ticks is scanned from `now - 2^(BITS-1)`.
    pub fn lookup_ge_wrap(&self, k: K) -> Option<Handle> {
        self.lookup_ge(k).or_else(|| self.first())
    }

    /// Iterates over `(handle, key, &value)` in key order.
    pub fn iter(&self) -> Iter<'_, K, V, S> {
        Iter {
            tree: self,
            cur: self.first().map(|h| h.idx),
        }
    }

    /// Removes and returns the first entry.
    pub fn pop_first(&mut self) -> Option<(K, V)> {
        let h = self.first()?;
        let k = self.at(h.idx).key.clone();
        self.delete(h).map(|v| (k, v))
    }

    /// Checks every structural invariant; returns a description of the first
    /// one broken. Used by the tests after every operation.
    pub fn validate(&self) -> Result<(), String> {
        let d = self.at(ROOT).b[LEFT];
        if d == Down::NIL {
            return if self.len == 0 {
                Ok(())
            } else {
                Err(format!("empty root but len {}", self.len))
            };
        }
        if self.walk_down(d, LEFT) != self.first {
            return Err("cached first entry is not the leftmost leaf".into());
        }
        let mut leaves = 0usize;
        let mut nodes = 0usize;
        self.validate_sub(d, Up::new(ROOT, LEFT), &mut leaves, &mut nodes)?;
        if leaves != self.len {
            return Err(format!("{} leaves but len {}", leaves, self.len));
        }
        if nodes + 1 != leaves {
            return Err(format!("{} nodes for {} leaves", nodes, leaves));
        }
        // In-order keys must be non-decreasing.
        let mut prev: Option<K> = None;
        let mut count = 0;
        for (_, k, _) in self.iter() {
            if let Some(p) = &prev {
                if k < *p {
                    return Err(format!("order broken: {:?} after {:?}", k, p));
                }
            }
            prev = Some(k);
            count += 1;
        }
        if count != self.len {
            return Err(format!("walk saw {} of {}", count, self.len));
        }
        Ok(())
    }

    /// Validates the subtree at `d` whose parent link must be `up`; returns
    /// (min key, max key, scope union).
    fn validate_sub(
        &self,
        d: Down,
        up: Up,
        leaves: &mut usize,
        nodes: &mut usize,
    ) -> Result<(K, K, S), String> {
        let i = d.idx();
        let e = self.slots.get(i as usize).ok_or("link out of arena")?;
        if d.is_leaf() {
            if e.leaf_p != up {
                return Err(format!("leaf {} has a wrong parent link", i));
            }
            if self.vals[i as usize].is_none() {
                return Err(format!("leaf {} has no value", i));
            }
            *leaves += 1;
            return Ok((e.key.clone(), e.key.clone(), e.leaf_s));
        }
        if e.node_p != up {
            return Err(format!("node {} has a wrong parent link", i));
        }
        *nodes += 1;
        let (lmin, lmax, ls) = self.validate_sub(e.b[LEFT], Up::new(i, LEFT), leaves, nodes)?;
        let (rmin, rmax, rs) = self.validate_sub(e.b[RIGHT], Up::new(i, RIGHT), leaves, nodes)?;
        if e.bit < 0 {
            if lmin != lmax || lmax != rmin || rmin != rmax || lmin != e.key {
                return Err(format!("dup node {} holds different keys", i));
            }
            for c in e.b {
                if !c.is_leaf() && self.at(c.idx()).bit >= 0 {
                    return Err(format!("dup node {} has a non-dup child", i));
                }
            }
        } else {
            let bit = e.bit as u32;
            if bit >= K::BITS {
                return Err(format!("node {} bit {} out of range", i, bit));
            }
            for k in [&lmin, &lmax] {
                if k.bit(bit) != 0 || k.differs_above(&e.key, bit) {
                    return Err(format!("node {} left key {:?} misplaced", i, k));
                }
            }
            for k in [&rmin, &rmax] {
                if k.bit(bit) != 1 || k.differs_above(&e.key, bit) {
                    return Err(format!("node {} right key {:?} misplaced", i, k));
                }
            }
            for c in e.b {
                if !c.is_leaf() {
                    let cb = self.at(c.idx()).bit;
                    if cb >= 0 && cb as u32 >= bit {
                        return Err(format!("node {} child bit {} not below {}", i, cb, bit));
                    }
                }
            }
        }
        // The entry's leaf must be below its node part.
        let mut x = e.leaf_p;
        loop {
            if x.idx() == i {
                break;
            }
            if x.idx() == ROOT || x == Up::NONE {
                return Err(format!("node {} is not above its own leaf", i));
            }
            x = self.at(x.idx()).node_p;
        }
        let s = ls.or(rs);
        if e.node_s != s {
            return Err(format!(
                "node {} scope {:?} differs from subtree {:?}",
                i, e.node_s, s
            ));
        }
        Ok((lmin, rmax, s))
    }
}

impl<K: Key, V> EbTree<K, V, NoScope> {
    /// Inserts `key` with `val`; returns the entry's handle.
    #[inline]
    pub fn insert(&mut self, key: K, val: V) -> Handle {
        self.insert_with_scope(key, NoScope, val)
    }

    /// Inserts `key` with `val` unless an entry with an equal key exists
    /// (HAProxy's unique trees): `Ok(new handle)`, or `Err((existing handle,
    /// val))` giving the value back.
    pub fn insert_unique(&mut self, key: K, val: V) -> Result<Handle, (Handle, V)> {
        match self.lookup_ref(&key) {
            Some(h) => Err((h, val)),
            None => Ok(self.insert_with_scope(key, NoScope, val)),
        }
    }
}

/// Walks counted in nodes visited, for the benchmarks' figures.
#[derive(Default, Debug, Clone, Copy)]
pub struct Visits(pub u64);

impl<K: Key, V> EbTree<K, V, u64> {
    /// Inserts `key` with `val`, visible to the walks of every scope that
    /// shares a bit with `scope` (one bit per thread).
    #[inline]
    pub fn insert(&mut self, key: K, scope: u64, val: V) -> Handle {
        self.insert_with_scope(key, scope, val)
    }

    /// Leftmost leaf of scope `mask` below `d`, whose mask must hit `mask`.
    #[inline(always)]
    fn walk_down_scoped(&self, mut d: Down, mask: u64, v: &mut Visits) -> u32 {
        while !d.is_leaf() {
            v.0 += 1;
            let b = self.at(d.idx()).b;
            d = if self.down_scope(b[LEFT]).hits(mask) {
                b[LEFT]
            } else {
                b[RIGHT]
            };
        }
        v.0 += 1;
        d.idx()
    }

    /// First leaf of scope `mask` after the subtree hanging at `up`.
    fn next_after_scoped(&self, mut up: Up, mask: u64, v: &mut Visits) -> Option<u32> {
        loop {
            while up.side() != LEFT {
                v.0 += 1;
                up = self.at(up.idx()).node_p;
            }
            let d = self.at(up.idx()).b[RIGHT];
            if d == Down::NIL {
                return None;
            }
            v.0 += 1;
            if self.down_scope(d).hits(mask) {
                return Some(self.walk_down_scoped(d, mask, v));
            }
            // Nothing for us on the right: keep climbing.
            up = self.at(up.idx()).node_p;
        }
    }

    /// First (oldest) entry whose scope shares a bit with `mask`.
    pub fn first_in_scope(&self, mask: u64) -> Option<Handle> {
        self.first_in_scope_counted(mask, &mut Visits::default())
    }

    /// [`Self::first_in_scope`], adding the nodes it visited to `v`.
    pub fn first_in_scope_counted(&self, mask: u64, v: &mut Visits) -> Option<Handle> {
        let d = self.at(ROOT).b[LEFT];
        if d == Down::NIL || !self.down_scope(d).hits(mask) {
            return None;
        }
        Some(self.handle(self.walk_down_scoped(d, mask, v)))
    }

    /// Next entry after `h` whose scope shares a bit with `mask`.
    pub fn next_in_scope(&self, h: Handle, mask: u64) -> Option<Handle> {
        self.next_in_scope_counted(h, mask, &mut Visits::default())
    }

    /// [`Self::next_in_scope`], adding the nodes it visited to `v`.
    pub fn next_in_scope_counted(&self, h: Handle, mask: u64, v: &mut Visits) -> Option<Handle> {
        let n = self.live(h)?;
        self.next_after_scoped(self.at(n).leaf_p, mask, v)
            .map(|i| self.handle(i))
    }

    /// First entry with key `>= k` whose scope shares a bit with `mask`.
    pub fn lookup_ge_in_scope(&self, k: K, mask: u64) -> Option<Handle> {
        let mut v = Visits::default();
        let i = self.lookup_ge_idx(&k)?;
        if self.at(i).leaf_s.hits(mask) {
            return Some(self.handle(i));
        }
        self.next_after_scoped(self.at(i).leaf_p, mask, &mut v)
            .map(|i| self.handle(i))
    }

    /// Circular variant of [`Self::lookup_ge_in_scope`]: wraps to the first
    /// entry of the scope when none is `>= k`.
    pub fn lookup_ge_wrap_in_scope(&self, k: K, mask: u64) -> Option<Handle> {
        self.lookup_ge_in_scope(k, mask)
            .or_else(|| self.first_in_scope(mask))
    }
}

/// In-order iterator over a tree.
pub struct Iter<'a, K: Key, V, S: Scope> {
    tree: &'a EbTree<K, V, S>,
    cur: Option<u32>,
}

impl<'a, K: Key, V, S: Scope> Iterator for Iter<'a, K, V, S> {
    type Item = (Handle, K, &'a V);
    fn next(&mut self) -> Option<Self::Item> {
        let i = self.cur?;
        let t = self.tree;
        let e = t.at(i);
        self.cur = t.next_after(e.leaf_p);
        t.vals[i as usize]
            .as_ref()
            .map(|v| (t.handle(i), e.key.clone(), v))
    }
}

impl<K: Key, V: Debug, S: Scope> Debug for EbTree<K, V, S> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_list()
            .entries(self.iter().map(|(_, k, v)| (k, v)))
            .finish()
    }
}

#[cfg(test)]
mod tests;
