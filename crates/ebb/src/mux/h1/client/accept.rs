//! A client connection's start: an accepted socket, or a tcp stream
//! upgraded in place, made into a [`Conn`] and its tasklet ([`H1Task`]),
//! its timer armed and a first run queued (the poller comes later: see
//! [`Conn::needs_poller`]). [`Conn::make`] builds the state every kind of
//! client side starts from, HTTP/2 lanes included.

use std::io;
use std::net::{SocketAddr, TcpStream};
use std::os::fd::{AsRawFd, RawFd};
use std::sync::Arc;

use sched::{ticks, Ctx, TaskletId};

use crate::proxy::FrontendRt;
use crate::transport::Transport;
use crate::worker::Worker;

use super::{Conn, Exchange, H1Task, Idle, Upgraded};

impl<S: Exchange + Default + 'static> Conn<S> {
    /// Takes an accepted socket: makes its tasklet, arms the tasklet's
    /// timer and queues a first run (the socket joins the poller when a run
    /// leaves the connection open).
    #[allow(clippy::too_many_arguments)]
    pub fn spawn(
        ctx: &mut Ctx,
        sock: TcpStream,
        peer: SocketAddr,
        dst: Option<SocketAddr>,
        fe: Arc<FrontendRt>,
        w: std::rc::Rc<Worker>,
        tls: Option<Arc<rustls::ServerConfig>>,
        // Trackers and variables of the `tcp-request connection|session` rules.
        early: Option<(
            crate::table::Stk,
            Box<std::cell::RefCell<crate::sample::VarStore>>,
        )>,
        // `bind ... proto h1`.
        h1_only: bool,
    ) -> io::Result<()> {
        // Non-blocking (SOCK_NONBLOCK) and TCP_NODELAY from the listener:
        // no system call here.
        let fd = sock.as_raw_fd();
        let tr = Transport::accept(sock, tls)?;
        let mut conn = Self::make(ctx, tr, fd, peer, dst, fe, w, early);
        conn.h1_only = h1_only;
        conn.w.conn_opened(&conn.fe);
        conn.w.debug(|| {
            format!(
                "thread {} accepted {} on frontend {}{}",
                ctx.thread_id(),
                conn.sess.peer,
                conn.fe.name,
                if conn.tr.is_tls() { " (TLS)" } else { "" }
            )
        });
        conn.fe
            .sessions
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        Self::launch(ctx, conn);
        Ok(())
    }

    /// Takes the client connection of a tcp stream that becomes HTTP/1
    /// (`tcp::upgrade`): its session counted it on the frontend already;
    /// `pre`, the bytes it read, is the start of the first request, which
    /// begins where `first` says.
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn adopt(
        ctx: &mut Ctx,
        tr: Transport,
        pre: &[u8],
        peer: SocketAddr,
        dst: Option<SocketAddr>,
        fe: Arc<FrontendRt>,
        w: std::rc::Rc<Worker>,
        early: (
            crate::table::Stk,
            Box<std::cell::RefCell<crate::sample::VarStore>>,
        ),
        first: Upgraded,
        h1_only: bool,
    ) {
        let fd = tr.raw_fd();
        let mut conn = Self::make(ctx, tr, fd, peer, dst, fe, w, Some(early));
        if !pre.is_empty() {
            let mut buf = conn.w.get_buf();
            if buf.len() < pre.len() {
                buf.resize(pre.len(), 0);
            }
            buf[..pre.len()].copy_from_slice(pre);
            conn.rbuf = buf;
            conn.rend = pre.len();
        }
        conn.h1_only = h1_only;
        conn.upgraded = Some(first);
        Self::launch(ctx, conn);
    }

    /// Gives a new connection its tasklet and queues its first run.
    fn launch(ctx: &mut Ctx, conn: Box<Self>) {
        // TLS connections get their own profiling name, so `show profiling`
        // tells handshake-heavy work from cleartext work.
        let name = if conn.tr.is_tls() {
            "h1_tls_conn"
        } else {
            "h1_conn"
        };
        let (first_deadline, heavy) = (conn.deadline, conn.heavy);
        let sess2 = Arc::clone(&conn.sess);
        let id = ctx.new_tasklet_boxed(name, Box::new(H1Task::Busy(conn)));
        sess2.set_tasklet(id);
        // Registered with the poller at the end of its first run that
        // leaves it open (see `registered`).
        ctx.on_stop_tasklet(id);
        ctx.tasklet_set_expire(id, first_deadline);
        if heavy {
            // A TLS handshake is expensive: at most a few per loop turn,
            // so it cannot add its cost to everyone's latency.
            ctx.set_heavy(id, true);
        }
        ctx.tasklet_wakeup(id);
    }

    /// The connection's state, its first deadline in `deadline` (the
    /// caller arms the tasklet's timer with it). Built in its box, which
    /// the tasklet holds while the connection is busy.
    #[allow(clippy::too_many_arguments)]
    pub(super) fn make(
        ctx: &mut Ctx,
        tr: Transport,
        fd: RawFd,
        peer: SocketAddr,
        dst: Option<SocketAddr>,
        fe: Arc<FrontendRt>,
        w: std::rc::Rc<Worker>,
        early: Option<(
            crate::table::Stk,
            Box<std::cell::RefCell<crate::sample::VarStore>>,
        )>,
    ) -> Box<Self> {
        let now = ctx.now();
        let first_deadline = ticks::add(now, fe.timeouts.http_request);
        let sess = w.sessions.add(ctx.thread_id(), peer, Arc::clone(&fe));
        let heavy = tr.is_handshaking() && w.heavy_enabled;
        let (stk, vars) = early.unwrap_or_else(|| {
            (
                crate::table::Stk::new(Arc::clone(&fe.tables)),
                Default::default(),
            )
        });
        let lasting = Idle {
            tr,
            dst: dst.map(Box::new),
            fe,
            w,
            sess,
            vars: crate::sample::vars::ConnVars::new(vars),
            stk: None,
            stk_now: 0,
            // Set at the first run.
            me: TaskletId::from_local(0, u64::MAX),
            fd,
            idle_since: now,
            deadline: first_deadline,
            // Ready to read and write; not registered with the poller.
            flags: 0b101,
        };
        let mut c = Self::with_lasting(lasting, stk);
        c.heavy = heavy;
        c.me = None;
        c
    }
}
