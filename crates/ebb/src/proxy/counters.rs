//! The HTTP counters of a frontend or a backend ([`HttpCounters`]: the
//! ones every request moves kept per thread, [`PerRequest`]), counted
//! where a request's answer is complete ([`count_request`]), and the
//! HTTP/2 counters of a backend's `proto h2` servers. Read by the stats
//! page, `show stat` and the Prometheus exporter.

use std::sync::atomic::{AtomicU64, Ordering};

use super::backends::BackendRt;
use super::frontend::FrontendRt;

/// The counters of [`HttpCounters`] that every request moves, one copy
/// per thread ([`crate::per_thread`]): read through
/// [`HttpCounters::requests`] and its siblings, which add the copies up.
#[derive(Default)]
pub struct PerRequest {
    pub requests: AtomicU64,
    /// Responses by status class: 1xx, 2xx, 3xx, 4xx, 5xx, other.
    pub hrsp: [AtomicU64; 6],
    /// Request head bytes received.
    pub bytes_in: AtomicU64,
    /// Response bytes sent (head and body).
    pub bytes_out: AtomicU64,
    /// Frontends: requests answered by the frontend itself (HAProxy's
    /// `intercepted`: `return`, `redirect`, `auth`, `use-service`, the
    /// stats page and `monitor-uri`, from the frontend's rules).
    pub intercepted: AtomicU64,
}

/// HTTP counters of a frontend or a backend (all threads together; read
/// by the stats page, `show stat` and the Prometheus exporter). Counted
/// where a request's answer is complete ([`count_request`]).
#[derive(Default)]
pub struct HttpCounters {
    /// Requests, answers by class, bytes in and out, intercepted: moved
    /// at every request, so each thread counts in its own copy.
    pub per_req: crate::per_thread::PerThread<PerRequest>,
    /// Requests refused by a `deny` rule.
    pub denied: AtomicU64,
    /// Responses refused: an `http-response deny`, `option checkcache`'s
    /// block, a `tcp-response content reject` (HAProxy's `dresp`,
    /// `denied_resp`).
    pub denied_resp: AtomicU64,
    /// Frontends: requests that could not be read (malformed, cut short
    /// by the client, or not whole at `timeout http-request`): HAProxy's
    /// `ereq` (`failed_req`).
    pub failed_req: AtomicU64,
    /// Bytes a tcp session wrote from a kernel pipe (`option splice-*`),
    /// both directions: `show info`'s `TotalSplicdedBytesOut`.
    pub spliced_out: AtomicU64,
    /// Answer bytes given to the compressor, the coded bytes it produced,
    /// and the answers compressed (HAProxy's `comp_in`, `comp_out`,
    /// `comp_rsp`).
    pub comp_in: AtomicU64,
    pub comp_out: AtomicU64,
    pub comp_rsp: AtomicU64,
    /// Failed rewrites by the request rules, requests the rules ended in
    /// an internal error (a failed rewrite in strict mode), and `cache-use`
    /// lookups and hits (HAProxy's `wrew`, `eint`, `cache_lookups`,
    /// `cache_hits`).
    pub failed_rewrites: AtomicU64,
    pub internal_errors: AtomicU64,
    pub cache_lookups: AtomicU64,
    pub cache_hits: AtomicU64,
    /// Frontends: connections and sessions refused by a `tcp-request
    /// connection|session reject` (HAProxy's `dcon`, `dses`; not
    /// `silent-drop`).
    pub denied_conn: AtomicU64,
    pub denied_sess: AtomicU64,
}

impl HttpCounters {
    /// Zeroes every counter (`clear counters all`).
    pub fn clear(&self) {
        for c in self.per_req.all() {
            c.requests.store(0, Ordering::Relaxed);
            for h in &c.hrsp {
                h.store(0, Ordering::Relaxed);
            }
            c.bytes_in.store(0, Ordering::Relaxed);
            c.bytes_out.store(0, Ordering::Relaxed);
            c.intercepted.store(0, Ordering::Relaxed);
        }
        self.denied.store(0, Ordering::Relaxed);
        self.denied_resp.store(0, Ordering::Relaxed);
        self.failed_req.store(0, Ordering::Relaxed);
        self.comp_in.store(0, Ordering::Relaxed);
        self.comp_out.store(0, Ordering::Relaxed);
        self.comp_rsp.store(0, Ordering::Relaxed);
        self.failed_rewrites.store(0, Ordering::Relaxed);
        self.internal_errors.store(0, Ordering::Relaxed);
        self.cache_lookups.store(0, Ordering::Relaxed);
        self.cache_hits.store(0, Ordering::Relaxed);
        self.denied_conn.store(0, Ordering::Relaxed);
        self.denied_sess.store(0, Ordering::Relaxed);
    }

    /// This thread's copy of the per-request counters, to count in.
    #[inline]
    pub fn local(&self) -> &PerRequest {
        self.per_req.local()
    }

    /// Requests counted, every thread's together.
    pub fn requests(&self) -> u64 {
        self.per_req.sum(|c| c.requests.load(Ordering::Relaxed))
    }

    /// Answers by status class ([`status_class`]), every thread's together.
    pub fn hrsp(&self) -> [u64; 6] {
        std::array::from_fn(|k| self.per_req.sum(|c| c.hrsp[k].load(Ordering::Relaxed)))
    }

    /// Request head bytes received, every thread's together.
    pub fn bytes_in(&self) -> u64 {
        self.per_req.sum(|c| c.bytes_in.load(Ordering::Relaxed))
    }

    /// Response bytes sent, every thread's together.
    pub fn bytes_out(&self) -> u64 {
        self.per_req.sum(|c| c.bytes_out.load(Ordering::Relaxed))
    }

    /// Requests the frontend answered itself, every thread's together.
    pub fn intercepted(&self) -> u64 {
        self.per_req.sum(|c| c.intercepted.load(Ordering::Relaxed))
    }

    /// Adds what a proxy's request rules did.
    pub fn note_rules(&self, n: RuleCounts) {
        self.failed_rewrites
            .fetch_add(n.failed_rewrites, Ordering::Relaxed);
        self.cache_lookups
            .fetch_add(n.cache_lookups, Ordering::Relaxed);
        self.cache_hits.fetch_add(n.cache_hits, Ordering::Relaxed);
    }
}

/// Counters the request rules move (HAProxy's `wrew`, `cache_lookups`,
/// `cache_hits`).
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct RuleCounts {
    pub failed_rewrites: u64,
    pub cache_lookups: u64,
    pub cache_hits: u64,
}

/// Counts a compressed answer's bytes (`totals`: given, produced) on its
/// frontend and backend.
pub fn count_compressed(fe: &FrontendRt, be: Option<&BackendRt>, totals: (u64, u64)) {
    for c in std::iter::once(&fe.http).chain(be.map(|b| &b.http)) {
        c.comp_in.fetch_add(totals.0, Ordering::Relaxed);
        c.comp_out.fetch_add(totals.1, Ordering::Relaxed);
        c.comp_rsp.fetch_add(1, Ordering::Relaxed);
    }
}

/// Counts a refused request on the frontend and, when one was chosen, the
/// backend (HAProxy's `denied_req`, the `dreq` column; the backend's once
/// the stream has one, `SF_BE_ASSIGNED`).
pub fn count_denied_req(fe: &HttpCounters, be: Option<&BackendRt>) {
    fe.denied.fetch_add(1, Ordering::Relaxed);
    if let Some(b) = be {
        b.http.denied.fetch_add(1, Ordering::Relaxed);
    }
}

/// Counts a refused response on the frontend, the backend and the server
/// that sent it (HAProxy's `denied_resp`, the `dresp` column).
pub fn count_denied_resp(
    fe: &HttpCounters,
    be: &BackendRt,
    srv: Option<&crate::backend::ServerRt>,
) {
    fe.denied_resp.fetch_add(1, Ordering::Relaxed);
    be.http.denied_resp.fetch_add(1, Ordering::Relaxed);
    if let Some(s) = srv {
        s.counters.denied_resp.fetch_add(1, Ordering::Relaxed);
    }
}

/// An HTTP status's class: 0 for 1xx ... 4 for 5xx, 5 for the others
/// (the `hrsp_*` counters).
pub fn status_class(status: u16) -> usize {
    match status {
        100..=599 => (status / 100 - 1) as usize,
        _ => 5,
    }
}

/// Counts one answered request on its frontend and (if any) backend.
/// `bytes_in`, `bytes_out`: what the client sent and what it was
/// answered, as HAProxy counts them (`crate::http1::htx`).
pub fn count_request(
    fe: &FrontendRt,
    be: Option<&BackendRt>,
    status: u16,
    bytes_in: u64,
    bytes_out: u64,
) {
    let class = status_class(status);
    for c in std::iter::once(&fe.http).chain(be.map(|b| &b.http)) {
        let c = c.local();
        c.requests.fetch_add(1, Ordering::Relaxed);
        c.hrsp[class].fetch_add(1, Ordering::Relaxed);
        c.bytes_in.fetch_add(bytes_in, Ordering::Relaxed);
        c.bytes_out.fetch_add(bytes_out, Ordering::Relaxed);
    }
}

/// HTTP/2 connections and streams toward servers, all threads together:
/// HAProxy's h2 statistics module on a backend (`h2_open_connections`,
/// `h2_total_connections`, `h2_backend_open_streams`,
/// `h2_backend_total_streams`).
#[derive(Default, Debug)]
pub struct H2Counters {
    pub open_conns: AtomicU64,
    pub total_conns: AtomicU64,
    pub open_streams: AtomicU64,
    pub total_streams: AtomicU64,
}
