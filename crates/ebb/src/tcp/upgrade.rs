//! A tcp stream that becomes HTTP (HAProxy's TCP to HTTP upgrade,
//! configuration.txt section 4): a `mode tcp` frontend's session hands
//! its client connection to the HTTP side, with the bytes it read.
//!
//! ```text
//!   tcp session (content rules on raw bytes)
//!      │ `tcp-request content switch-mode http [proto h1|h2]`
//!      │   (explicit: the backend is chosen after, on the HTTP request)
//!      │ or the chosen backend is `mode http` (implicit)
//!      v
//!   HTTP/2 preface (unless `proto h1`), or `proto h2` ──> mux::h2 (each
//!      │                          HTTP/2 stream runs all the rules again:
//!      │                          HAProxy's destructive upgrade)
//!      v
//!   mux::h1::Conn::adopt: the bytes read are the first request, which
//!   goes on from where the tcp stream was (in-place upgrade: the
//!   frontend's content rules are not run again, its `txn`/`req`
//!   variables stay; after an implicit upgrade the backend stays too)
//! ```
//!
//! After the upgrade the connection is an HTTP one of the tcp frontend:
//! each later request runs the frontend's `tcp-request content` rules
//! (where `switch-mode http` ends the walk as `accept`), its HTTP rules,
//! `use_backend`, then the backend's rules, as HAProxy's streams on an
//! upgraded connection. The timeouts are the HTTP side's (`timeout
//! http-request`, `http-keep-alive`, else `timeout client`); the log line
//! of each request is the frontend's (`option tcplog`, `log-format`),
//! filled from the HTTP exchange.

use std::cell::RefCell;
use std::net::SocketAddr;
use std::rc::Rc;
use std::sync::Arc;
use std::time::SystemTime;

use sched::Ctx;

use crate::proxy::FrontendRt;
use crate::transport::Transport;
use crate::worker::Worker;

/// The HTTP/2 connection preface's first line and blank line, which
/// HAProxy's HTTP/1 parser reads as a request (`req.proto_http` holds).
const PRI: &[u8] = b"PRI * HTTP/2.0\r\n\r\n";

/// What a tcp session hands over.
pub(super) struct Handover {
    pub tr: Transport,
    /// What the session read from the client.
    pub bytes: Vec<u8>,
    pub peer: SocketAddr,
    pub dst: Option<SocketAddr>,
    pub fe: Arc<FrontendRt>,
    pub w: Rc<Worker>,
    pub stk: crate::table::Stk,
    pub vars: Box<RefCell<crate::sample::VarStore>>,
    pub accepted: SystemTime,
    /// The chosen backend, on an implicit upgrade.
    pub backend: Option<usize>,
    /// `switch-mode http proto h1|h2`: `Some(true)` HTTP/2 only,
    /// `Some(false)` HTTP/1 only.
    pub proto: Option<bool>,
}

/// Starts the HTTP side on the session's connection. The connection
/// stays counted on its frontend (and its worker) as the session left it:
/// the HTTP side releases it when it closes.
pub(super) fn start(ctx: &mut Ctx, h: Handover) {
    let Handover {
        tr,
        bytes,
        peer,
        dst,
        fe,
        w,
        stk,
        vars,
        accepted,
        backend,
        proto,
    } = h;
    let h2 = match proto {
        Some(p) => p,
        None => !fe.disable_h2_upgrade && bytes.starts_with(PRI),
    };
    if h2 {
        // Destructive: the tcp stream ends here, unlogged; each HTTP/2
        // stream starts afresh (its `txn` and `req` variables empty).
        let mut v = vars.into_inner();
        v.begin_request();
        v.requests = 0;
        let (fe2, w2) = (Arc::clone(&fe), Rc::clone(&w));
        let r = crate::mux::h2::H2Conn::<crate::stream::Stream>::spawn(
            ctx,
            tr,
            peer,
            dst,
            fe,
            w,
            bytes,
            accepted,
            (stk, RefCell::new(v)),
        );
        if r.is_err() {
            w2.conn_closed(ctx, &fe2);
        }
        return;
    }
    // In place: the first request keeps what the tcp stream set (its
    // `txn`/`req` variables, its accept date).
    let mut vars = vars;
    vars.get_mut().fresh = true;
    let first = crate::mux::h1::client::Upgraded {
        backend: backend.and_then(|b| u32::try_from(b).ok()),
    };
    crate::mux::h1::Conn::<crate::stream::Stream>::adopt(
        ctx,
        tr,
        &bytes,
        peer,
        dst,
        fe,
        w,
        (stk, vars),
        first,
        proto == Some(false),
    );
}
