//! What the runtime CLI and the stats page can see of a running ebb: the
//! configuration in force, the scheduler's handle, process-wide counters,
//! and the list of client connections (sessions).
//!
//! **Sessions.** Each thread keeps its own table of the connections it
//! accepted, behind a mutex taken only when a connection opens or closes
//! (never per request: per-request facts are atomics inside the entry). A
//! command that walks every session (`show sess`, `shutdown sessions`)
//! runs under thread isolation and lists only entries whose epoch is older
//! than the command, so a dump is a consistent picture of the sessions that
//! existed when it started, and an interrupted dump leaves nothing behind
//! (it only reads). A session is ended from the CLI (or by a server's
//! `on-marked-down`/`on-marked-up` action) by setting its `kill` reason
//! and waking its tasklet; the connection closes itself on its own
//! thread.

use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, AtomicU16, AtomicU32, AtomicU64, AtomicU8, Ordering};
use std::sync::{Arc, Mutex};
use std::time::SystemTime;

use sched::{RuntimeHandle, TaskletId};

use crate::log::Logger;
use crate::proxy::{Compiled, FrontendRt};

/// Process-wide state, shared by every thread.
pub struct Shared {
    /// Connections open, all frontends and threads together.
    pub actconn: AtomicU32,
    /// Global `maxconn`; `u32::MAX` when unset.
    pub maxconn: u32,
    /// `maxconnrate` and `maxsessrate`: the process's accept rates and
    /// their limits.
    pub conn_rate: crate::rate::RateLimit,
    pub sess_rate: crate::rate::RateLimit,
    pub logger: Logger,
    /// Each frontend's own targets (its `log` lines, with the global ones
    /// where it says `log global`), by frontend name.
    pub fe_loggers: std::collections::HashMap<String, Logger>,
    /// Each backend's own targets, by backend name (its alerts: health
    /// checks, `option checkcache`).
    pub be_loggers: Arc<std::collections::HashMap<String, Logger>>,
    /// Each FastCGI application's `log-stderr` targets (tagged with its
    /// name), by application name.
    pub fcgi_loggers: std::collections::HashMap<String, Arc<Logger>>,
    /// Whether request errors also go to stderr (no `log` target set).
    pub errors_to_stderr: bool,
    /// `-d`: one stderr line per connection accepted and closed.
    pub debug: bool,
    /// Idle server connections, per thread ([`crate::backend::pool`]).
    pub idle: crate::backend::pool::IdlePools,
}

/// The configuration in force. A reload (SIGHUP) compiles a new one and
/// bumps the generation; each listener picks the new frontend up at its
/// next accept, so new connections follow the new rules while the ones
/// already open finish under the rules they started with.
pub struct Live {
    compiled: Mutex<Arc<Compiled>>,
    gen: AtomicU64,
}

impl Live {
    pub fn new(c: Arc<Compiled>) -> Live {
        Live {
            compiled: Mutex::new(c),
            gen: AtomicU64::new(0),
        }
    }

    /// The configuration in force now.
    pub fn compiled(&self) -> Arc<Compiled> {
        Arc::clone(&self.compiled.lock().unwrap_or_else(|p| p.into_inner()))
    }

    /// Puts a new configuration in force.
    pub fn swap(&self, c: Arc<Compiled>) {
        *self.compiled.lock().unwrap_or_else(|p| p.into_inner()) = c;
        self.gen.fetch_add(1, Ordering::Release);
    }

    /// Bumped by every swap.
    pub fn gen(&self) -> u64 {
        self.gen.load(Ordering::Acquire)
    }

    /// The frontend of that name in the configuration in force.
    pub fn frontend(&self, name: &str) -> Option<Arc<FrontendRt>> {
        self.compiled()
            .frontends
            .iter()
            .find(|f| f.name == name)
            .cloned()
    }
}

/// Everything the CLI and the stats page read, shared by all threads.
pub struct Process {
    pub start: SystemTime,
    pub pid: u32,
    pub nbthread: usize,
    pub sessions: Arc<Sessions>,
    pub shared: Arc<Shared>,
    pub live: Arc<Live>,
    pub handle: RuntimeHandle,
}

static PROCESS: std::sync::OnceLock<Arc<Process>> = std::sync::OnceLock::new();

impl Process {
    /// Makes this the process the stats page and the Prometheus exporter
    /// read (set once at start-up; later calls are ignored).
    pub fn set_global(p: &Arc<Process>) {
        let _ = PROCESS.set(Arc::clone(p));
    }

    /// The running process, once start-up has set it.
    pub fn global() -> Option<&'static Arc<Process>> {
        PROCESS.get()
    }
}

/// One client connection as the CLI sees it.
///
/// Every connection holds one for its whole life, idle or not: it stays
/// small (issue 12). Its id is also its epoch (the value of the
/// registry's counter when it was created).
pub struct SessInfo {
    pub id: u64,
    pub thread: u16,
    /// Its place in its thread's table.
    slot: u32,
    /// Its connection's tasklet ([`TaskletId::local_bits`]; `NO_TASKLET`
    /// until it is known): see [`SessInfo::tasklet`].
    tasklet: AtomicU64,
    pub peer: SocketAddr,
    /// Its frontend (see [`SessInfo::frontend`]).
    fe: Arc<FrontendRt>,
    /// When it was accepted, in ns since the Unix epoch (see
    /// [`SessInfo::accepted`]): 8 bytes where a `SystemTime` takes 16.
    accepted_ns: u64,
    pub requests: AtomicU64,
    /// uid of the server of the exchange in progress, if proxied (0:
    /// none); [`crate::backend::server_by_uid`] names it. An atomic: the
    /// stream sets it twice per proxied request.
    pub target: AtomicU64,
    /// Why the connection must end at its next run (0: it need not): the
    /// letter its log gives, [`KILL_CLI`] (`shutdown session`),
    /// [`crate::backend::KILL_DOWN`] or [`crate::backend::KILL_UP`] (see
    /// [`SessInfo::end`]).
    pub kill: AtomicU8,
    /// The connection is in its lingering close (its answers are out, it
    /// reads and drops the client's last bytes until the client's end:
    /// the muxes' `Linger`); `show sess` says `state=linger`.
    pub lingering: AtomicBool,
    /// A tcp session one of whose sides' read timeout half-closed it: the
    /// code it will log (`cD`, `sD`, two bytes; 0: none); `show sess`
    /// says `term=cD` while the other direction flows on.
    pub half_term: AtomicU16,
}

/// `shutdown session(s)` from the CLI: logged `K`.
pub const KILL_CLI: u8 = b'K';

/// [`SessInfo::tasklet`] not set yet.
const NO_TASKLET: u64 = u64::MAX;

impl SessInfo {
    /// The name of its frontend.
    pub fn frontend(&self) -> &str {
        &self.fe.name
    }

    /// When it was accepted.
    pub fn accepted(&self) -> SystemTime {
        SystemTime::UNIX_EPOCH + std::time::Duration::from_nanos(self.accepted_ns)
    }

    /// The connection's tasklet, once it is known.
    pub fn tasklet(&self) -> Option<TaskletId> {
        let bits = self.tasklet.load(Ordering::Acquire);
        (bits != NO_TASKLET).then(|| TaskletId::from_local(self.thread, bits))
    }

    /// Asks the connection to end, for `why` (the first reason asked
    /// stays), and wakes it.
    pub fn end(&self, why: u8, handle: &RuntimeHandle) {
        let _ = self
            .kill
            .compare_exchange(0, why, Ordering::Relaxed, Ordering::Relaxed);
        if let Some(t) = self.tasklet() {
            handle.wake_tasklet(t);
        }
    }

    /// Names the connection's tasklet (of this session's thread).
    pub fn set_tasklet(&self, id: TaskletId) {
        self.tasklet.store(id.local_bits(), Ordering::Release);
    }
}

/// One thread's sessions: a slab (a word per connection; a closed
/// connection's place is reused), walked in id order by the CLI only.
#[derive(Default)]
struct Table {
    slots: Vec<Option<Arc<SessInfo>>>,
    /// Places free for reuse.
    free: Vec<u32>,
}

/// Every thread's session table.
pub struct Sessions {
    threads: Vec<Mutex<Table>>,
    next_id: AtomicU64,
}

impl Sessions {
    pub fn new(nbthread: usize) -> Sessions {
        Sessions {
            threads: (0..nbthread.max(1))
                .map(|_| Mutex::new(Table::default()))
                .collect(),
            next_id: AtomicU64::new(1),
        }
    }

    /// Registers a new connection of `thread`.
    pub fn add(&self, thread: usize, peer: SocketAddr, fe: Arc<FrontendRt>) -> Arc<SessInfo> {
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        let make = |slot| {
            Arc::new(SessInfo {
                id,
                thread: u16::try_from(thread).unwrap_or(u16::MAX),
                slot,
                tasklet: AtomicU64::new(NO_TASKLET),
                peer,
                fe,
                accepted_ns: SystemTime::now()
                    .duration_since(SystemTime::UNIX_EPOCH)
                    .map_or(0, |d| u64::try_from(d.as_nanos()).unwrap_or(u64::MAX)),
                requests: AtomicU64::new(0),
                target: AtomicU64::new(0),
                kill: AtomicU8::new(0),
                lingering: AtomicBool::new(false),
                half_term: AtomicU16::new(0),
            })
        };
        let Some(t) = self.threads.get(thread) else {
            return make(u32::MAX);
        };
        let mut t = t.lock().unwrap_or_else(|p| p.into_inner());
        let slot = match t.free.pop() {
            Some(i) => i,
            None => {
                t.slots.push(None);
                u32::try_from(t.slots.len() - 1).unwrap_or(u32::MAX)
            }
        };
        let s = make(slot);
        if let Some(place) = t.slots.get_mut(slot as usize) {
            *place = Some(Arc::clone(&s));
        }
        s
    }

    /// Forgets a closed connection.
    pub fn remove(&self, s: &SessInfo) {
        if let Some(t) = self.threads.get(usize::from(s.thread)) {
            let mut t = t.lock().unwrap_or_else(|p| p.into_inner());
            let mine = t
                .slots
                .get(s.slot as usize)
                .is_some_and(|p| p.as_ref().is_some_and(|p| p.id == s.id));
            if mine {
                t.slots[s.slot as usize] = None;
                t.free.push(s.slot);
            }
        }
    }

    /// The epoch a walk starts at: it lists sessions created before it.
    pub fn epoch(&self) -> u64 {
        self.next_id.load(Ordering::Relaxed)
    }

    /// The sessions that existed at `epoch`, thread by thread, in id order.
    pub fn snapshot(&self, epoch: u64) -> Vec<Arc<SessInfo>> {
        let mut out = Vec::new();
        for t in &self.threads {
            let m = t.lock().unwrap_or_else(|p| p.into_inner());
            let from = out.len();
            out.extend(m.slots.iter().flatten().filter(|s| s.id < epoch).cloned());
            out[from..].sort_unstable_by_key(|s| s.id);
        }
        out
    }

    /// Finds a session by id.
    pub fn get(&self, id: u64) -> Option<Arc<SessInfo>> {
        self.threads.iter().find_map(|t| {
            let m = t.lock().unwrap_or_else(|p| p.into_inner());
            m.slots.iter().flatten().find(|s| s.id == id).cloned()
        })
    }

    /// Ends the sessions whose exchange in progress is with one of the
    /// servers `uids` (HAProxy's `srv_shutdown_streams`), for `why`.
    pub fn end_on_servers(&self, uids: &[u64], why: u8, handle: &RuntimeHandle) {
        for s in self.snapshot(self.epoch()) {
            let t = s.target.load(Ordering::Relaxed);
            if t != 0 && uids.contains(&t) {
                s.end(why, handle);
            }
        }
    }

    /// Number of sessions now.
    pub fn len(&self) -> usize {
        self.threads
            .iter()
            .map(|t| t.lock().map(|m| m.slots.len() - m.free.len()).unwrap_or(0))
            .sum()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn frontend() -> Arc<FrontendRt> {
        let text = "defaults\n mode http\nfrontend fe\n bind :8080\n";
        let cfg = crate::config::parse_str("t.cfg", text).unwrap_or_else(|e| panic!("{e:?}"));
        let c = crate::proxy::compile(&cfg).unwrap_or_else(|e| panic!("{e:?}"));
        Arc::clone(&c.frontends[0])
    }

    #[test]
    fn snapshots_follow_the_epoch() {
        let fe = frontend();
        let s = Sessions::new(2);
        let a = s.add(0, "127.0.0.1:1".parse().unwrap(), Arc::clone(&fe));
        let b = s.add(1, "127.0.0.1:2".parse().unwrap(), Arc::clone(&fe));
        let e = s.epoch();
        let c = s.add(0, "127.0.0.1:3".parse().unwrap(), Arc::clone(&fe));
        let ids: Vec<u64> = s.snapshot(e).iter().map(|x| x.id).collect();
        assert_eq!(ids, vec![a.id, b.id]);
        assert_eq!(s.len(), 3);
        s.remove(&b);
        assert!(s.get(b.id).is_none());
        assert!(s.get(c.id).is_some());
        assert_eq!(s.snapshot(s.epoch()).len(), 2);
        // `b`'s place is reused; a walk still lists by id.
        let d = s.add(1, "127.0.0.1:4".parse().unwrap(), Arc::clone(&fe));
        let ids: Vec<u64> = s.snapshot(s.epoch()).iter().map(|x| x.id).collect();
        assert_eq!(ids, vec![a.id, c.id, d.id]);
        assert_eq!(s.len(), 3);
        s.remove(&a);
        s.remove(&a);
        assert_eq!(s.len(), 2);
        assert!(s.get(d.id).is_some());
        assert_eq!(d.frontend(), "fe");
        let age = SystemTime::now().duration_since(d.accepted());
        assert!(age.as_ref().is_ok_and(|a| a.as_secs() < 3600), "{age:?}");
    }
}
