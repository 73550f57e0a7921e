//! Prefix trees: network prefixes of fixed-length keys and the longest one
//! matching an address (HAProxy's `ebmb_insert_prefix` /
//! `ebmb_lookup_longest`, used by `map_ip` and ACL subnet matching).
//!
//! A prefix `K/len` is stored in an [`EbMbTree`] under its masked key (the
//! bits below the first `len` cleared), with `len` beside its value. Equal
//! masked keys of different lengths (`10.0.0.0/8` and `10.0.0.0/16`) are
//! duplicates of one key and sit together in the tree.
//!
//! `lookup_longest(a)` tries the prefix lengths present in the tree from the
//! longest down, each with one exact descent for `a` masked to that length,
//! and stops at the first hit: O(L · log n) for L distinct lengths (at most
//! 33 for IPv4, 129 for IPv6; a few in practice). HAProxy's single descent is
//! cleverer; this one is short, safe and checked against a brute-force
//! model by the property tests.

use crate::{EbMbTree, Handle, MbKey};

/// Prefixes of `N`-byte keys, each with a `V`; unique per (prefix, length).
pub struct PrefixTree<const N: usize, V> {
    tree: EbMbTree<N, (u32, V)>,
    /// Number of entries per prefix length (0..=8N).
    lens: Vec<u32>,
}

impl<const N: usize, V> Default for PrefixTree<N, V> {
    fn default() -> Self {
        Self::new()
    }
}

impl<const N: usize, V> PrefixTree<N, V> {
    /// An empty prefix tree.
    pub fn new() -> Self {
        PrefixTree {
            tree: EbMbTree::new(),
            lens: vec![0; 8 * N + 1],
        }
    }

    /// Number of prefixes.
    pub fn len(&self) -> usize {
        self.tree.len()
    }

    /// Whether there is no prefix.
    pub fn is_empty(&self) -> bool {
        self.tree.is_empty()
    }

    /// Inserts `key/len` (`len` is clamped to 8N; the key is masked). If that
    /// prefix is already present, returns `Err((its handle, val))`.
    pub fn insert(&mut self, key: MbKey<N>, len: u32, val: V) -> Result<Handle, (Handle, V)> {
        let len = len.min(8 * N as u32);
        let k = key.masked(len);
        if let Some(h) = self.find(&k, len) {
            return Err((h, val));
        }
        self.lens[len as usize] += 1;
        Ok(self.tree.insert(k, (len, val)))
    }

    /// The entry of exactly `key/len`.
    pub fn lookup_prefix(&self, key: MbKey<N>, len: u32) -> Option<Handle> {
        let len = len.min(8 * N as u32);
        self.find(&key.masked(len), len)
    }

    /// Entry of length `len` among the duplicates of masked key `k`.
    fn find(&self, k: &MbKey<N>, len: u32) -> Option<Handle> {
        let mut h = self.tree.lookup_ref(k);
        while let Some(x) = h {
            let (xk, (xl, _)) = (self.tree.key_ref(x)?, self.tree.get(x)?);
            if xk != k {
                return None;
            }
            if *xl == len {
                return Some(x);
            }
            h = self.tree.next(x);
        }
        None
    }

    /// The longest prefix containing `addr`.
    pub fn lookup_longest(&self, addr: MbKey<N>) -> Option<Handle> {
        for len in (0..self.lens.len()).rev() {
            if self.lens[len] == 0 {
                continue;
            }
            if let Some(h) = self.find(&addr.masked(len as u32), len as u32) {
                return Some(h);
            }
        }
        None
    }

    /// Prefix (masked key, length) of a live entry.
    pub fn prefix(&self, h: Handle) -> Option<(MbKey<N>, u32)> {
        Some((self.tree.key(h)?, self.tree.get(h)?.0))
    }

    /// Value of a live entry.
    pub fn get(&self, h: Handle) -> Option<&V> {
        self.tree.get(h).map(|(_, v)| v)
    }

    /// Mutable value of a live entry.
    pub fn get_mut(&mut self, h: Handle) -> Option<&mut V> {
        self.tree.get_mut(h).map(|(_, v)| v)
    }

    /// Removes a live entry; None for a stale handle.
    pub fn delete(&mut self, h: Handle) -> Option<V> {
        let (len, v) = self.tree.delete(h)?;
        self.lens[len as usize] -= 1;
        Some(v)
    }

    /// Iterates over `(handle, masked key, length, &value)` in key order
    /// (equal keys in insertion order).
    pub fn iter(&self) -> impl Iterator<Item = (Handle, MbKey<N>, u32, &V)> {
        self.tree.iter().map(|(h, k, (l, v))| (h, k, *l, v))
    }

    /// Checks the tree's invariants and the per-length counts.
    pub fn validate(&self) -> Result<(), String> {
        self.tree.validate()?;
        let mut lens = vec![0u32; 8 * N + 1];
        for (_, k, l, _) in self.iter() {
            if k.masked(l) != k {
                return Err(format!("{k:?}/{l} is not masked"));
            }
            lens[l as usize] += 1;
        }
        if lens != self.lens {
            return Err("per-length counts differ from the entries".into());
        }
        Ok(())
    }
}
