//! A backend's server list, which servers join (`add server`) and leave
//! (`del server`) while every thread balances over it.
//!
//! The list is append-only storage: slots filled once, and a published
//! length. A reader (every pick) loads the length and reads filled slots:
//! no lock, no reference count touched. The slots live in segments that
//! double in size, allocated when the previous ones are full and never
//! moved, so the list has no fixed room (HAProxy has no limit either but
//! its 32-bit server ids). A server that leaves stays in its slot, marked
//! deleted (never usable, never listed): indexes stay stable, so the
//! per-thread balancing state, queued streams and stick-table entries that
//! hold an index never point at another server. Its *id* (`srv_id`, the
//! `sid` of the stats) is free again: the next `add server` takes the
//! lowest free id, as HAProxy 2.6 does. Each change bumps the farm's
//! generation; a thread rebuilds its balancing state at its next pick when
//! the generation moved.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, OnceLock};

use super::ServerRt;

type Segment = Box<[OnceLock<Arc<ServerRt>>]>;

/// Segments: the first holds `base` slots, each next one twice the
/// previous one's.
const SEGMENTS: usize = 40;

pub struct ServerList {
    base: usize,
    segs: [OnceLock<Segment>; SEGMENTS],
    len: AtomicUsize,
    /// Serializes writers (`add server`).
    writer: Mutex<()>,
}

fn segment(n: usize) -> Segment {
    (0..n).map(|_| OnceLock::new()).collect()
}

impl ServerList {
    pub fn new(servers: Vec<Arc<ServerRt>>) -> ServerList {
        // Room for the configuration's servers and as many added ones
        // before the first new segment.
        let base = (servers.len() * 2).max(16);
        let segs: [OnceLock<Segment>; SEGMENTS] = std::array::from_fn(|_| OnceLock::new());
        let first = segment(base);
        let len = servers.len();
        for (c, s) in first.iter().zip(servers) {
            let _ = c.set(s);
        }
        let _ = segs[0].set(first);
        ServerList {
            base,
            segs,
            len: AtomicUsize::new(len),
            writer: Mutex::new(()),
        }
    }

    /// The segment and the offset in it of index `i`: segment k starts at
    /// base * (2^k - 1).
    fn place(&self, i: usize) -> (usize, usize) {
        let q = i / self.base + 1;
        let k = (usize::BITS - 1 - q.leading_zeros()) as usize;
        let start = self.base * ((1usize << k) - 1);
        (k, i - start)
    }

    fn slot(&self, i: usize) -> Option<&OnceLock<Arc<ServerRt>>> {
        let (k, off) = self.place(i);
        self.segs.get(k)?.get()?.get(off)
    }

    /// Slots in use, deleted servers included (the bound of indexes).
    pub fn len(&self) -> usize {
        self.len.load(Ordering::Acquire)
    }

    pub fn is_empty(&self) -> bool {
        self.iter().next().is_none()
    }

    /// Every server by index, deleted ones included.
    pub fn all(&self) -> impl Iterator<Item = &Arc<ServerRt>> {
        (0..self.len()).filter_map(move |i| self.slot(i).and_then(OnceLock::get))
    }

    /// The servers in service (not deleted), in order.
    pub fn iter(&self) -> Iter<'_> {
        Iter {
            list: self,
            seg: self.segs[0].get().map_or(&[], |s| &s[..]),
            k: 0,
            off: 0,
            left: self.len(),
        }
    }

    /// The server at this index (it may be deleted).
    pub fn get(&self, i: usize) -> Option<&Arc<ServerRt>> {
        if i < self.len() {
            self.slot(i)?.get()
        } else {
            None
        }
    }

    pub fn first(&self) -> Option<&Arc<ServerRt>> {
        self.iter().next()
    }

    /// The lowest server id no server in service has (HAProxy's
    /// `get_next_id()` over the backend's used ids).
    pub fn free_id(&self) -> u32 {
        let mut used: Vec<u32> = self.iter().map(|s| s.id).collect();
        used.sort_unstable();
        let mut id = 1;
        for u in used {
            if u == id {
                id += 1;
            } else if u > id {
                break;
            }
        }
        id
    }

    /// Appends a server made by `make(index, id)`, `id` the lowest free
    /// one; refused when `check` refuses (run under the writer lock, so two
    /// adds of one name cannot both pass it).
    pub fn push(
        &self,
        check: impl FnOnce(&ServerList) -> Result<(), String>,
        make: impl FnOnce(usize, u32) -> Arc<ServerRt>,
    ) -> Result<Arc<ServerRt>, String> {
        let _w = self.writer.lock().unwrap_or_else(|p| p.into_inner());
        check(self)?;
        let i = self.len();
        let (k, off) = self.place(i);
        let seg = self
            .segs
            .get(k)
            .ok_or("No room for another server in this backend.")?
            .get_or_init(|| segment(self.base << k));
        let slot = seg
            .get(off)
            .ok_or("No room for another server in this backend.")?;
        let id = self.free_id();
        let s = make(i, id);
        let _ = slot.set(Arc::clone(&s));
        self.len.store(i + 1, Ordering::Release);
        Ok(s)
    }
}

impl std::ops::Index<usize> for ServerList {
    type Output = Arc<ServerRt>;

    /// The server at index `i` (indexes come from the list itself; one
    /// past the end is a bug, as with a slice).
    fn index(&self, i: usize) -> &Arc<ServerRt> {
        match self.get(i) {
            Some(s) => s,
            None => panic!("server index {i} out of range"),
        }
    }
}

/// The servers in service of a [`ServerList`]: a walk through the
/// segments in order (no index arithmetic per server).
pub struct Iter<'a> {
    list: &'a ServerList,
    /// The segment being walked (number `k`), and the next slot in it.
    seg: &'a [OnceLock<Arc<ServerRt>>],
    k: usize,
    off: usize,
    /// Slots not yet walked, up to the length read at the start.
    left: usize,
}

impl<'a> Iterator for Iter<'a> {
    type Item = &'a Arc<ServerRt>;

    fn next(&mut self) -> Option<&'a Arc<ServerRt>> {
        while self.left > 0 {
            if self.off == self.seg.len() {
                self.k += 1;
                self.seg = self
                    .list
                    .segs
                    .get(self.k)
                    .and_then(OnceLock::get)
                    .map_or(&[], |s| &s[..]);
                self.off = 0;
                if self.seg.is_empty() {
                    return None;
                }
            }
            let c = &self.seg[self.off];
            self.off += 1;
            self.left -= 1;
            match c.get() {
                Some(s) if !s.is_deleted() => return Some(s),
                _ => {}
            }
        }
        None
    }
}

impl<'a> IntoIterator for &'a ServerList {
    type Item = &'a Arc<ServerRt>;
    type IntoIter = Iter<'a>;

    fn into_iter(self) -> Iter<'a> {
        self.iter()
    }
}

impl super::Farm {
    /// Whether servers may be added: HAProxy wants a dynamic algorithm
    /// (not `static-rr`, not map-based hashing).
    pub fn dynamic_ok(&self) -> bool {
        !matches!(self.balance, crate::config::Balance::StaticRr) && !self.static_weights()
    }

    /// `add server`: a new server, in maintenance (HAProxy's rule: `enable
    /// server` puts it in service), visible to every thread at its next
    /// pick.
    pub fn add_server(
        self: &Arc<Self>,
        name: &str,
        addr: Option<std::net::SocketAddr>,
        mut opts: crate::config::ServerOptions,
        tls: Option<super::ServerTls>,
    ) -> Result<Arc<ServerRt>, String> {
        opts.sock = self.sock;
        if !self.dynamic_ok() {
            return Err(
                "Backend must use a dynamic load balancing to support dynamic servers.".into(),
            );
        }
        let port = opts_port(addr);
        let s = self.servers.push(
            |l| {
                if l.iter().any(|s| s.name == name) {
                    Err("Already exists a server with the same name in backend.".into())
                } else {
                    Ok(())
                }
            },
            |idx, id| {
                let s = super::new_server(idx, id, &self.name, name.to_string(), addr, opts, tls);
                s.admin.store(super::ADMIN_MAINT, Ordering::Relaxed);
                // Checks of a dynamic server start disabled (`enable
                // health`), as in HAProxy.
                s.check_on.store(false, Ordering::Relaxed);
                s.agent.on.store(false, Ordering::Relaxed);
                s.port.store(port, Ordering::Relaxed);
                s
            },
        )?;
        self.adopt_dynamic_cookie(&s);
        super::register(std::slice::from_ref(&s));
        self.gen.fetch_add(1, Ordering::AcqRel);
        super::check::start_server(self, &s);
        super::check::start_agent(self, &s);
        Ok(s)
    }

    /// `del server`: only a server in maintenance with no stream and no
    /// queue (HAProxy's conditions); its idle connections are closed by
    /// the pools' purge.
    pub fn del_server(&self, s: &ServerRt) -> Result<(), String> {
        if s.opts.referenced || s.pinned.load(Ordering::Relaxed) {
            return Err("This server cannot be removed at runtime due to other configuration elements pointing to it.".into());
        }
        if s.admin_state() != super::ADMIN_MAINT {
            return Err("Only servers in maintenance mode can be deleted.".into());
        }
        let queued = s.queue.lock().map(|q| q.len()).unwrap_or(0);
        if s.cur.load(Ordering::Acquire) > 0 || queued > 0 {
            return Err("Server still has connections attached to it, cannot remove it.".into());
        }
        s.deleted.store(true, Ordering::Release);
        // Its certificate is no longer in use by it (`show ssl cert`).
        if let Some(c) = s.tls_ctx.as_ref().and_then(|t| t.cert.as_ref()) {
            c.release();
        }
        // A tracking server leaves its tracked server's list (HAProxy's
        // `release_server_track`).
        if let Some(t) = s.tracked.get() {
            t.trackers
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .retain(|(_, x)| x.upgrade().is_some_and(|x| !std::ptr::eq(&*x, s)));
        }
        // A stream that took a slot between the test and the mark still
        // ends normally: the server only stops being picked.
        self.gen.fetch_add(1, Ordering::AcqRel);
        Ok(())
    }
}

fn opts_port(a: Option<std::net::SocketAddr>) -> u16 {
    a.map_or(0, |a| a.port())
}
