//! What the state fetches read of the running proxies: `fe_conn`,
//! `be_conn`, `nbsrv`, `srv_is_up`, `connslots`, `queue`, the session and
//! request rates, the weights... (configuration.txt 7.3.2, HAProxy 2.6's
//! backend.c and frontend.c).
//!
//! The sample engine does not see the proxies: it asks by name
//! ([`crate::sample::Count`]), and the server answers from the
//! configuration in force with [`count`]. Each answer follows HAProxy's
//! own arithmetic, as its fetch functions compute it from their proxy
//! and server structures: which servers count as stopped, the first
//! backup standing for all of them without `option allbackups`, the
//! unsigned sums of `connslots`, the dynamic `maxconn` of `minconn`.
//!
//! The rates (`fe_sess_rate`, `fe_req_rate`, `be_sess_rate`) are
//! HAProxy's sliding one-second counters. Keeping them costs a shared
//! atomic per session or request, which is paid only when a fetch reads
//! them ([`crate::sample::RATES`], set as the configuration compiles).

use std::sync::atomic::Ordering;

use super::{BackendKind, Compiled};
use crate::backend::{Farm, ServerRt, ADMIN_MAINT};
use crate::sample::Count;
use crate::table::SharedFreqCtr;

/// A proxy's sessions and requests per second (see the module's
/// introduction).
#[derive(Default, Debug)]
pub struct Rates {
    sess: SharedFreqCtr,
    req: SharedFreqCtr,
}

/// Milliseconds of the monotonic clock, as the counters count them.
fn now_ms() -> u32 {
    (sched::ticks::mono_now_ns() / 1_000_000) as u32
}

impl Rates {
    /// One more session (a frontend's accepted connection, a stream
    /// entering a backend).
    pub fn note_sess(&self) {
        if crate::sample::RATES.load(Ordering::Relaxed) {
            self.sess.add(1000, now_ms(), 1);
        }
    }

    /// One more HTTP request (a frontend's).
    pub fn note_req(&self) {
        if crate::sample::RATES.load(Ordering::Relaxed) {
            self.req.add(1000, now_ms(), 1);
        }
    }

    pub fn sess(&self) -> u32 {
        self.sess.read(1000, now_ms())
    }

    pub fn req(&self) -> u32 {
        self.req.read(1000, now_ms())
    }
}

/// HAProxy's `cur_state == SRV_ST_STOPPED`: down by its checks, or in
/// maintenance (which stops it), or without an address.
fn stopped(s: &ServerRt) -> bool {
    s.is_deleted()
        || !s.has_addr()
        || s.rmaint.load(Ordering::Relaxed)
        || !s.up.load(Ordering::Relaxed)
        || s.admin_state() == ADMIN_MAINT
}

/// HAProxy's `be_usable_srv`: the usable active servers; without one,
/// the first usable backup stands for them all (1), or every usable
/// backup counts with `option allbackups`.
fn usable_srv(f: &Farm) -> i64 {
    let (act, bck) = f.usable_counts();
    let n = if act > 0 {
        act
    } else if bck > 0 && !f.allbackups {
        1
    } else {
        bck
    };
    n as i64
}

fn queue_len(s: &ServerRt) -> u32 {
    s.queue.lock().map_or(0, |q| q.len() as u32)
}

/// `connslots`: each running server's free slots and free queue places
/// (HAProxy's unsigned arithmetic), -1 when one has no `maxconn` or no
/// `maxqueue`.
fn connslots(f: &Farm) -> i64 {
    let mut n = 0i64;
    for s in f.servers.iter().filter(|s| !stopped(s)) {
        let maxconn = s.maxconn.load(Ordering::Relaxed);
        let maxqueue = s.opts.maxqueue.unwrap_or(0);
        if maxconn == 0 || maxqueue == 0 {
            return -1;
        }
        let cur = s.cur.load(Ordering::Relaxed);
        let free = maxconn
            .wrapping_sub(cur)
            .wrapping_add(maxqueue.wrapping_sub(queue_len(s)));
        n += i64::from(free);
    }
    n
}

/// `be_conn_free`: the free slots, under their dynamic `maxconn`, of the
/// servers the load balancer may pick: the usable active ones, else the
/// first usable backup (every one with `option allbackups`); -1 when one
/// of them has no `maxconn`.
fn be_conn_free(f: &Farm) -> i64 {
    let (act, _) = f.usable_counts();
    let first_backup = f
        .servers
        .iter()
        .find(|s| s.opts.backup && s.usable())
        .map(|s| s.idx);
    let mut n = 0i64;
    for s in f.servers.iter().filter(|s| !stopped(s) && s.usable()) {
        if s.opts.backup && (act > 0 || (Some(s.idx) != first_backup && !f.allbackups)) {
            continue;
        }
        if s.maxconn.load(Ordering::Relaxed) == 0 {
            return -1;
        }
        let max = f.limit(s);
        let cur = s.cur.load(Ordering::Relaxed);
        n += i64::from(max.saturating_sub(cur));
    }
    n
}

/// `srv_*` of one server.
fn server_count(what: Count, f: &Farm, s: &ServerRt) -> i64 {
    match what {
        Count::SrvConn => i64::from(s.cur.load(Ordering::Relaxed)),
        Count::SrvSessRate => i64::from(s.counters.sess_rate()),
        // Not in maintenance, and not down by its health check (a server
        // without one is up).
        Count::SrvIsUp => i64::from(
            s.admin_state() != ADMIN_MAINT
                && !s.rmaint.load(Ordering::Relaxed)
                && (!s.opts.check || s.up.load(Ordering::Relaxed)),
        ),
        Count::SrvConnFree => {
            if s.maxconn.load(Ordering::Relaxed) == 0 {
                return -1;
            }
            i64::from(f.limit(s).saturating_sub(s.cur.load(Ordering::Relaxed)))
        }
        Count::SrvQueue => i64::from(queue_len(s)),
        Count::SrvWeight => i64::from(if f.static_weights() {
            s.weight.load(Ordering::Relaxed)
        } else {
            s.effective_weight()
        }),
        Count::SrvIweight => i64::from(s.opts.weight),
        Count::SrvUweight => i64::from(s.weight.load(Ordering::Relaxed)),
        _ => 0,
    }
}

/// Answers a [`Count`] for the proxy named `proxy` (and the server named
/// `server`) in the configuration in force; `None` when there is no
/// such proxy or server.
pub fn count(c: &Compiled, what: Count, proxy: &str, server: Option<&str>) -> Option<i64> {
    if what.of_frontend() {
        let fe = c.frontends.iter().find(|f| f.name == proxy)?;
        return Some(match what {
            Count::FeConn => i64::from(fe.cur_conns()),
            Count::FeClientTimeout => i64::from(fe.client_ms.unwrap_or(0)),
            Count::FeId => i64::try_from(fe.uuid).ok()?,
            Count::FeSessRate => i64::from(fe.rates.sess()),
            Count::FeReqRate => i64::from(fe.rates.req()),
            Count::DstConn(li) => {
                let l = fe.listeners.get(li as usize)?;
                i64::from(l.cur.load(Ordering::Relaxed))
            }
            _ => return None,
        });
    }
    let be = c.backends.iter().find(|b| b.name == proxy)?;
    match what {
        Count::BeId => return i64::try_from(be.uuid).ok(),
        Count::BeServerTimeout => return Some(i64::from(be.server_ms.unwrap_or(0))),
        Count::BeTunnelTimeout => return Some(i64::from(be.tunnel_ms.unwrap_or(0))),
        Count::BeSessRate => return Some(i64::from(be.rates.sess())),
        _ => {}
    }
    let BackendKind::Servers(sv) = &be.kind else {
        // No server: nothing usable, queued or free.
        return Some(0);
    };
    let f = &sv.farm;
    if let Some(name) = server {
        let s = f
            .servers
            .iter()
            .find(|s| s.name == name && !s.is_deleted())?;
        return Some(server_count(what, f, s));
    }
    Some(match what {
        Count::BeConn => f
            .servers
            .iter()
            .map(|s| i64::from(s.cur.load(Ordering::Relaxed)))
            .sum(),
        Count::Nbsrv => usable_srv(f),
        Count::Connslots => connslots(f),
        Count::Queue => f.queued() as i64,
        Count::AvgQueue => {
            let (pend, n) = (f.queued() as i64, usable_srv(f));
            if n > 0 {
                (pend + n - 1) / n
            } else {
                pend * 2
            }
        }
        Count::BeConnFree => be_conn_free(f),
        _ => return None,
    })
}

/// `fe_defbe`: the name of frontend `fe`'s `default_backend`.
pub fn default_backend(c: &Compiled, fe: &str) -> Option<String> {
    let fe = c.frontends.iter().find(|f| f.name == fe)?;
    let b = fe.backends.get(fe.default_backend?)?;
    Some(b.name.clone())
}
