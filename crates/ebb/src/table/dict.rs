//! The server keys a table's `server_key` holds (HAProxy's
//! `server_key_dict`): each distinct string is kept once, process-wide,
//! and an entry stores its number (from 1; 0: no key), so the entry's
//! data stay plain numbers.
//!
//! Strings are never forgotten: the set is bounded by [`MAX_KEYS`]; past
//! it, a new string is not stored (the entry keeps its `server_id` only,
//! which `stick match` then uses, as HAProxy does when its dictionary
//! cannot allocate). Server names and addresses are few; only keys
//! learned from peers or many `set server ... addr` could reach it.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, OnceLock};

/// The most distinct keys kept.
pub const MAX_KEYS: usize = 1 << 16;

#[derive(Default)]
struct Dict {
    by_str: HashMap<Arc<str>, u64>,
    strs: Vec<Arc<str>>,
}

fn dict() -> &'static Mutex<Dict> {
    static D: OnceLock<Mutex<Dict>> = OnceLock::new();
    D.get_or_init(Default::default)
}

fn lock() -> std::sync::MutexGuard<'static, Dict> {
    dict().lock().unwrap_or_else(|p| p.into_inner())
}

/// The number of `s` (kept from now on); None when the set is full.
pub fn intern(s: &str) -> Option<u64> {
    let mut d = lock();
    if let Some(&n) = d.by_str.get(s) {
        return Some(n);
    }
    if d.strs.len() >= MAX_KEYS {
        return None;
    }
    let a: Arc<str> = Arc::from(s);
    d.strs.push(Arc::clone(&a));
    let n = d.strs.len() as u64;
    d.by_str.insert(a, n);
    Some(n)
}

/// The string of number `n` (None for 0 or an unknown number).
pub fn get(n: u64) -> Option<Arc<str>> {
    let i = usize::try_from(n).ok()?.checked_sub(1)?;
    lock().strs.get(i).cloned()
}

#[cfg(test)]
mod tests {
    #[test]
    fn a_string_keeps_its_number() {
        let a = super::intern("srv-a").unwrap();
        let b = super::intern("srv-b").unwrap();
        assert_ne!(a, b);
        assert_eq!(super::intern("srv-a"), Some(a));
        assert_eq!(super::get(a).as_deref(), Some("srv-a"));
        assert_eq!(super::get(0), None);
    }
}
