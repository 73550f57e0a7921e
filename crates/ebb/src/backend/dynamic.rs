//! A backend's server list, which servers join (`add server`) and leave
//! (`del server`) while every thread balances over it.
//!
//! The list is append-only storage of fixed capacity: slots filled once,
//! and a published length. A reader (every pick) loads the length and
//! reads filled slots: no lock, no reference count touched. A server that
//! leaves stays in its slot, marked deleted (never usable, never listed):
//! indexes stay stable, so the per-thread balancing state, queued streams
//! and stick-table entries that hold an index never point at another
//! server. Each change bumps the farm's generation; a thread rebuilds its
//! balancing state at its next pick when the generation moved.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, OnceLock};

use super::ServerRt;

/// Servers `add server` may add to one backend over the process' life
/// (beyond those of the configuration).
pub const DYNAMIC_ROOM: usize = 1024;

pub struct ServerList {
    slots: Box<[OnceLock<Arc<ServerRt>>]>,
    len: AtomicUsize,
    /// Serializes writers (`add server`).
    writer: Mutex<()>,
}

impl ServerList {
    pub fn new(servers: Vec<Arc<ServerRt>>) -> ServerList {
        let slots: Box<[OnceLock<Arc<ServerRt>>]> = (0..servers.len() + DYNAMIC_ROOM)
            .map(|_| OnceLock::new())
            .collect();
        let len = servers.len();
        for (c, s) in slots.iter().zip(servers) {
            let _ = c.set(s);
        }
        ServerList {
            slots,
            len: AtomicUsize::new(len),
            writer: Mutex::new(()),
        }
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
        self.slots[..self.len()].iter().filter_map(OnceLock::get)
    }

    /// The servers in service (not deleted), in order.
    pub fn iter(&self) -> Iter<'_> {
        Iter(self.slots[..self.len()].iter())
    }

    /// The server at this index (it may be deleted).
    pub fn get(&self, i: usize) -> Option<&Arc<ServerRt>> {
        if i < self.len() {
            self.slots[i].get()
        } else {
            None
        }
    }

    pub fn first(&self) -> Option<&Arc<ServerRt>> {
        self.iter().next()
    }

    /// Appends a server made by `make(index)`; `None` when the list is
    /// full, or `check` refuses (run under the writer lock, so two adds of
    /// one name cannot both pass it).
    pub fn push(
        &self,
        check: impl FnOnce(&ServerList) -> Result<(), String>,
        make: impl FnOnce(usize) -> Arc<ServerRt>,
    ) -> Result<Arc<ServerRt>, String> {
        let _w = self.writer.lock().unwrap_or_else(|p| p.into_inner());
        check(self)?;
        let i = self.len();
        let slot = self.slots.get(i).ok_or_else(|| {
            format!("No room for another server ({DYNAMIC_ROOM} may be added to a backend).")
        })?;
        let s = make(i);
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

/// The servers in service of a [`ServerList`].
pub struct Iter<'a>(std::slice::Iter<'a, OnceLock<Arc<ServerRt>>>);

impl<'a> Iterator for Iter<'a> {
    type Item = &'a Arc<ServerRt>;

    fn next(&mut self) -> Option<&'a Arc<ServerRt>> {
        self.0
            .by_ref()
            .filter_map(OnceLock::get)
            .find(|s| !s.is_deleted())
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
        opts: crate::config::ServerOptions,
        tls: Option<super::ServerTls>,
    ) -> Result<Arc<ServerRt>, String> {
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
            |idx| {
                let s = super::new_server(idx, &self.name, name.to_string(), addr, opts, tls);
                s.admin.store(super::ADMIN_MAINT, Ordering::Relaxed);
                // Checks of a dynamic server start disabled (`enable
                // health`), as in HAProxy.
                s.check_on.store(false, Ordering::Relaxed);
                s.port.store(port, Ordering::Relaxed);
                s
            },
        )?;
        super::register(std::slice::from_ref(&s));
        self.gen.fetch_add(1, Ordering::AcqRel);
        super::check::start_server(self, &s);
        Ok(s)
    }

    /// `del server`: only a server in maintenance with no stream and no
    /// queue (HAProxy's conditions); its idle connections are closed by
    /// the pools' purge.
    pub fn del_server(&self, s: &ServerRt) -> Result<(), String> {
        if s.admin.load(Ordering::Relaxed) != super::ADMIN_MAINT {
            return Err("Only servers in maintenance mode can be deleted.".into());
        }
        let queued = s.queue.lock().map(|q| q.len()).unwrap_or(0);
        if s.cur.load(Ordering::Acquire) > 0 || queued > 0 {
            return Err("Server still has connections attached to it, cannot remove it.".into());
        }
        s.deleted.store(true, Ordering::Release);
        // A stream that took a slot between the test and the mark still
        // ends normally: the server only stops being picked.
        self.gen.fetch_add(1, Ordering::AcqRel);
        Ok(())
    }
}

fn opts_port(a: Option<std::net::SocketAddr>) -> u16 {
    a.map_or(0, |a| a.port())
}
