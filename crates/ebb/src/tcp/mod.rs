//! `mode tcp`: bytes pass through between a client and a server, with the
//! backends of HTTP mode (LB algorithms, checks, `maxconn` queues with
//! instant hand-over, retries, redispatch) and no HTTP analysis; plus what
//! every accepted connection goes through first whatever its mode:
//! `tcp-request connection` rules, the PROXY protocol (`accept-proxy`,
//! `expect-proxy layer4`) and `tcp-request session` rules.
//!
//! ```text
//!   listener ── accept ──> tcp-request connection rules (real peer)
//!                              │ reject: closed, not logged (HAProxy)
//!                              v
//!                    accept-proxy? ──> pphdr: read the PROXY header
//!                              │            (bad/missing: close + log)
//!                              v
//!           mode http: mux::h1::Conn      mode tcp: session::Session
//!                                          (tcp_cli + tcp_srv tasklets,
//!                                           bytes in pipe::Pipe)
//! ```
//!
//! A session has two tasklets, one per socket (see [`pipe`]): a readiness
//! change of one socket never runs the other side's code. The client
//! side's tasklet also runs the session's logic ([`session`]): content
//! inspection, backend and server choice, connect and retries, timers,
//! and the log line.
//!
//! A session whose content rules say `switch-mode http`, or that reaches
//! an HTTP backend, hands its connection to the HTTP side ([`upgrade`]).

mod pipe;
mod pphdr;
mod session;
pub mod upgrade;

use std::cell::RefCell;
use std::io::Write as _;
use std::net::{SocketAddr, TcpStream};
use std::rc::Rc;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::SystemTime;

use sched::Ctx;

use crate::l4rules::Verdict;
use crate::proxy::FrontendRt;
use crate::transport::Transport;
use crate::worker::Worker;

/// What a connection carries from its first rules to its mode's code:
/// the trackers (`tcp-request connection|session track-scN`) and the
/// variables (`sess.*`) those rules set.
/// The variables are boxed from the start: they are large, and they move
/// from here into the connection's own state without being copied.
pub struct Early {
    pub stk: crate::table::Stk,
    pub vars: Box<RefCell<crate::sample::VarStore>>,
    /// The destination a `tcp-request connection set-dst|set-dst-port`
    /// gave (kept when no PROXY header replaces it).
    dst: Option<SocketAddr>,
    /// The bind's `proto h1` (HTTP/1 only) and `proto none` (never HTTP).
    pub(crate) h1_only: bool,
    pub(crate) no_upgrade: bool,
}

impl Early {
    fn new(fe: &FrontendRt) -> Early {
        Early {
            stk: crate::table::Stk::new(Arc::clone(&fe.tables)),
            vars: Box::default(),
            dst: None,
            h1_only: false,
            no_upgrade: false,
        }
    }
}

/// What a connection's bind line says about it.
#[derive(Clone, Debug, Default)]
pub struct BindFacts {
    /// `accept-proxy`: a PROXY header comes first.
    pub accept_proxy: bool,
    /// `accept-netscaler-cip MAGIC`: a NetScaler Client IP header comes
    /// first (after the PROXY header if both).
    pub netscaler_cip: Option<u32>,
    /// `proto h2`: HTTP/2 from the first byte.
    pub h2: bool,
    /// `proto h1`: HTTP/1 only (no HTTP/2 on its preface).
    pub h1: bool,
    /// `proto none`: a tcp stream that must not become HTTP.
    pub no_upgrade: bool,
    /// `name`: what `so_name` gives.
    pub name: Option<Arc<str>>,
    /// The listener's counters (`option socket-stats`, `maxconn`).
    pub stats: Option<Arc<crate::proxy::ListenerStats>>,
    /// The listener's position in its frontend (its statistics' after a
    /// reload).
    pub index: usize,
}

/// Takes an accepted connection: runs the frontend's `tcp-request
/// connection` rules on the real peer, then reads a PROXY header
/// (`accept-proxy`, or `expect-proxy layer4`) or starts the connection
/// in the frontend's mode. `place`: the connection's place on its
/// listener's counters (`option socket-stats`, the bind's `maxconn`),
/// taken before it was accepted.
#[allow(clippy::too_many_arguments)]
pub fn accepted(
    ctx: &mut Ctx,
    sock: TcpStream,
    peer: SocketAddr,
    fe: Arc<FrontendRt>,
    w: Rc<Worker>,
    tls: Option<Arc<rustls::ServerConfig>>,
    bind: &BindFacts,
    place: Option<crate::listener_stats::ListenerGuard>,
) -> std::io::Result<()> {
    let (accept_proxy, h2) = (bind.accept_proxy, bind.h2);
    let mut early = Early::new(&fe);
    early.h1_only = bind.h1;
    early.no_upgrade = bind.no_upgrade;
    early.vars.get_mut().so_name = bind.name.clone();
    early.vars.get_mut().so_idx = u32::try_from(bind.index).unwrap_or(u32::MAX);
    // The connection counts on its listener until it is gone, whatever
    // the rules below decide (HAProxy counts at accept).
    early.vars.get_mut().listener = place;
    let mut expect_proxy = false;
    let mut peer = peer;
    if !fe.l4.conn_rules.is_empty() {
        early.stk.set_now(ctx.now());
        let dst = sock.local_addr().ok();
        let (v, addrs) = run_early(
            &fe,
            &fe.l4.conn_rules,
            &early,
            &sock,
            peer,
            dst,
            false,
            &mut expect_proxy,
        );
        // `set-src`/`set-dst`: the connection's addresses from now on; a
        // PROXY header then gives the session others (`fc_src` stays).
        if let Some(a) = addrs {
            peer = a.src;
            early.dst = a.dst.filter(|d| Some(*d) != dst);
        }
        if refused(v, &sock) {
            if v == Verdict::Reject {
                fe.http.denied_conn.fetch_add(1, Ordering::Relaxed);
            } else {
                // HAProxy counts a silent-drop as a refused request.
                crate::proxy::count_denied_req(&fe.http, None);
            }
            return Ok(());
        }
    }
    // A session (HAProxy's count for `maxsessrate`): the connection
    // passed its `tcp-request connection` rules.
    w.shared.sess_rate.note(ctx.now());
    fe.sess_limit.note(ctx.now());
    fe.rates.note_sess();
    if accept_proxy || expect_proxy || bind.netscaler_cip.is_some() {
        let hdrs = pphdr::Headers {
            proxy: accept_proxy || expect_proxy,
            cip: bind.netscaler_cip,
        };
        return pphdr::spawn(ctx, sock, peer, fe, w, tls, early, h2, hdrs);
    }
    let dst = early.dst;
    start(ctx, sock, peer, dst, fe, w, tls, early, h2)
}

/// Starts a connection in its frontend's mode, with the client's
/// addresses (from a PROXY header when `dst` is set), once its
/// `tcp-request session` rules let it through; `h2`: HTTP/2 from the
/// first byte (`bind ... proto h2`).
#[allow(clippy::too_many_arguments)]
fn start(
    ctx: &mut Ctx,
    sock: TcpStream,
    peer: SocketAddr,
    dst: Option<SocketAddr>,
    fe: Arc<FrontendRt>,
    w: Rc<Worker>,
    tls: Option<Arc<rustls::ServerConfig>>,
    early: Early,
    h2: bool,
) -> std::io::Result<()> {
    let (mut peer, mut dst) = (peer, dst);
    // The connection's addresses (`fc_src`...), before rules that change
    // only the session's: the local one asked for only when such a rule
    // may change `dst` (otherwise `dst` stays the connection's).
    let mut early = early;
    let may_move =
        !fe.l4.sess_rules.is_empty() || (fe.l4.tcp_mode && !fe.l4.content_rules.is_empty());
    let fc_dst = if may_move {
        dst.or_else(|| sock.local_addr().ok())
    } else {
        dst
    };
    // (Already set after a PROXY header: the socket's.)
    let v = early.vars.get_mut();
    if v.fc_addrs.is_none() {
        v.fc_addrs = Some((peer, fc_dst));
    }
    if !fe.l4.sess_rules.is_empty() {
        early.stk.set_now(ctx.now());
        let d = fc_dst;
        let (v, addrs) = run_early(
            &fe,
            &fe.l4.sess_rules,
            &early,
            &sock,
            peer,
            d,
            tls.is_some(),
            &mut false,
        );
        if let Some(a) = addrs {
            peer = a.src;
            if a.dst != d {
                dst = a.dst;
            }
        }
        if refused(v, &sock) {
            if v == Verdict::Reject {
                fe.http.denied_sess.fetch_add(1, Ordering::Relaxed);
            } else {
                // HAProxy counts a silent-drop as a refused request.
                crate::proxy::count_denied_req(&fe.http, None);
            }
            return Ok(());
        }
    }
    early.stk.set_now(ctx.now());
    early.stk.count_session();
    if h2 && !fe.l4.tcp_mode {
        return crate::mux::h2::H2Conn::<crate::stream::Stream>::accept(
            ctx,
            sock,
            peer,
            dst,
            fe,
            w,
            tls,
            (early.stk, *early.vars),
        );
    }
    if !fe.l4.tcp_mode {
        return crate::mux::h1::Conn::<crate::stream::Stream>::spawn(
            ctx,
            sock,
            peer,
            dst,
            fe,
            w,
            tls,
            Some((early.stk, early.vars)),
            early.h1_only,
        );
    }
    // Non-blocking (SOCK_NONBLOCK) and TCP_NODELAY from the listener.
    let tr = Transport::accept(sock, tls)?;
    session::Session::spawn(ctx, tr, peer, dst, fe, w, early)
}

/// Whether a verdict refuses the connection: HAProxy closes a rejected
/// connection at once and does not log it; `silent-drop` drops it.
fn refused(v: Verdict, sock: &TcpStream) -> bool {
    match v {
        Verdict::Reject => true,
        Verdict::SilentDrop => {
            crate::transport::silent_drop(sock);
            true
        }
        _ => false,
    }
}

/// Runs connection or session rules; with the addresses their
/// `set-src`/`set-dst`... left, if any ran.
#[allow(clippy::too_many_arguments)]
fn run_early(
    fe: &FrontendRt,
    rules: &[crate::l4rules::TcpRuleRt],
    early: &Early,
    sock: &TcpStream,
    peer: SocketAddr,
    dst: Option<SocketAddr>,
    tls: bool,
    expect_proxy: &mut bool,
) -> (Verdict, Option<crate::l4rules::Addrs>) {
    let dst = move || dst;
    let ctx = crate::sample::Ctx {
        src: peer,
        dst: &dst,
        fe: &fe.name,
        be: None,
        srv: None,
        tls,
        sni: None,
        client_cert: None,
        req: None,
        res: None,
        vars: Some(&early.vars),
        stk: Some(&early.stk),
        payload: None,
        res_body: None,
        fc: Some(sock),
        early: true,
    };
    let addrs = std::cell::Cell::new(None);
    let v = crate::l4rules::run_rules_addrs(
        rules,
        0,
        &fe.matcher,
        &ctx,
        true,
        None,
        expect_proxy,
        Some(&addrs),
        None,
    );
    (v, addrs.get())
}

/// The pieces of a `tcplog` line.
pub struct TcpLog<'a> {
    pub client: SocketAddr,
    pub accept: SystemTime,
    pub frontend: &'a str,
    /// TLS on the client side (`%ft` gets a `~`).
    pub tls: bool,
    pub backend: &'a str,
    pub server: &'a str,
    pub tw: i64,
    pub tc: i64,
    pub tt: i64,
    /// Bytes from the server to the client (`%B`).
    pub bytes: u64,
    pub term: [u8; 2],
    pub actconn: u32,
    pub feconn: u32,
    pub beconn: u32,
    pub srvconn: u32,
    pub retries: u32,
    /// The retries ended on another server (`%rc` gets a `+`).
    pub redispatched: bool,
    /// Server and backend queue lengths when the session queued.
    pub queues: (usize, usize),
    /// Logged at the connect (`option logasap`): `+` before the total
    /// time and the size.
    pub asap: bool,
}

/// HAProxy's `option tcplog` line:
/// `%ci:%cp [%t] %ft %b/%s %Tw/%Tc/%Tt %B %ts %ac/%fc/%bc/%sc/%rc %sq/%bq`.
pub fn tcplog(e: &TcpLog<'_>) -> Vec<u8> {
    let mut out = Vec::with_capacity(160);
    let plus = if e.asap { "+" } else { "" };
    let _ = write!(out, "{}:{} [", e.client.ip(), e.client.port());
    crate::log::fmt_date(e.accept, &mut out);
    let _ = write!(
        out,
        "] {}{} {}/{} {}/{}/{}{} {}{} {}{} {}/{}/{}/{}/{}{} {}/{}",
        e.frontend,
        if e.tls { "~" } else { "" },
        e.backend,
        e.server,
        e.tw,
        e.tc,
        plus,
        e.tt,
        plus,
        e.bytes,
        e.term[0] as char,
        e.term[1] as char,
        e.actconn,
        e.feconn,
        e.beconn,
        e.srvconn,
        if e.redispatched { "+" } else { "" },
        e.retries,
        e.queues.0,
        e.queues.1,
    );
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tcplog_has_haproxys_layout() {
        let l = tcplog(&TcpLog {
            client: "10.0.1.2:33313".parse().unwrap(),
            accept: std::time::UNIX_EPOCH + std::time::Duration::from_millis(1_233_922_371_443),
            frontend: "fnt",
            tls: false,
            backend: "bck",
            server: "srv1",
            tw: 0,
            tc: 0,
            tt: 5007,
            bytes: 212,
            term: *b"--",
            actconn: 0,
            feconn: 0,
            beconn: 0,
            srvconn: 0,
            retries: 3,
            redispatched: false,
            queues: (0, 0),
            asap: false,
        });
        // configuration.txt 8.2.2's example, less the syslog header.
        assert_eq!(
            String::from_utf8(l).unwrap(),
            "10.0.1.2:33313 [06/Feb/2009:12:12:51.443] fnt bck/srv1 0/0/5007 212 -- 0/0/0/0/3 0/0"
        );
        let l = tcplog(&TcpLog {
            client: "[::1]:80".parse().unwrap(),
            accept: std::time::UNIX_EPOCH,
            frontend: "f",
            tls: true,
            backend: "f",
            server: "<NOSRV>",
            tw: -1,
            tc: -1,
            tt: 3,
            bytes: 0,
            term: *b"PR",
            actconn: 1,
            feconn: 1,
            beconn: 0,
            srvconn: 0,
            retries: 1,
            redispatched: true,
            queues: (0, 2),
            asap: false,
        });
        assert_eq!(
            String::from_utf8(l).unwrap(),
            "::1:80 [01/Jan/1970:00:00:00.000] f~ f/<NOSRV> -1/-1/3 0 PR 1/1/0/0/+1 0/2"
        );
    }
}
