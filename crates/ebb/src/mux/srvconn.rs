//! What the server sides that carry several exchanges on one connection
//! (HTTP/2: [`super::h2::server`], FastCGI: [`super::fcgi::server`])
//! share: how such a connection counts among its server's connections,
//! its connect's outcome, and its idle life (the server's purge timer
//! closes it, looked at once a second).

use sched::{ticks, Ctx, TaskletId, Tick};

use crate::backend::pool::{IdleTicket, UsedConn};
use crate::backend::ServerRt;
use crate::transport::Transport;

/// How often an idle connection looks whether its server's purge timer
/// closes it.
pub(crate) const IDLE_TICK_MS: u32 = 1000;

/// How a connection counts among its server's: in use while it has
/// exchanges, idle (and safe, as HAProxy lists an idle multiplexed
/// connection) while it has none, neither once closed.
pub(crate) enum ConnCount {
    Used(#[allow(dead_code)] UsedConn),
    Idle(#[allow(dead_code)] IdleTicket),
    Off,
}

impl ConnCount {
    /// Counted in use (out of the idle ones first, as HAProxy takes it
    /// off its list).
    pub(crate) fn take(&mut self, srv: &std::sync::Arc<ServerRt>) {
        if !matches!(self, ConnCount::Used(_)) {
            *self = ConnCount::Off;
            *self = ConnCount::Used(srv.used_conn());
        }
    }

    pub(crate) fn is_used(&self) -> bool {
        matches!(self, ConnCount::Used(_))
    }

    /// The connection has no exchange left: among its server's idle
    /// connections; false when the server takes no more (`pool-max-conn`
    /// reached: HAProxy destroys a connection its idle list refuses).
    pub(crate) fn go_idle(
        &mut self,
        srv: &std::sync::Arc<ServerRt>,
        thread: usize,
        now: Tick,
    ) -> bool {
        *self = ConnCount::Off;
        match srv.idle_ticket(thread, true, now) {
            Some(m) => {
                *self = ConnCount::Idle(m);
                true
            }
            None => false,
        }
    }

    /// An idle connection's look at the purge: whether its server's
    /// timer gave its thread one to close (this one then closes).
    pub(crate) fn purged(&self, srv: &ServerRt, thread: usize) -> bool {
        !matches!(self, ConnCount::Idle(_)) || srv.take_kill(thread, 1) > 0
    }
}

/// Moves a tasklet's timer to `d` when it changed.
pub(crate) fn set_deadline(ctx: &mut Ctx, me: Option<TaskletId>, deadline: &mut Tick, d: Tick) {
    if d != *deadline {
        *deadline = d;
        if let Some(me) = me {
            ctx.tasklet_set_expire(me, d);
        }
    }
}

/// The idle look's next date, a second from now.
pub(crate) fn next_look(ctx: &Ctx) -> Tick {
    ticks::add(ctx.now(), IDLE_TICK_MS)
}

/// The outcome of a connect under way, at an event of its socket (`io`,
/// as the tasklet saw it): `Some(true)` established, `Some(false)`
/// failed, `None` still under way (the readiness is cleared: the next
/// edge says more). (socket2's peer address: a UNIX socket server's
/// too.) A `tfo` socket whose SYN waits for the first write (the kernel
/// has the server's cookie) has no peer yet but is writable: that write
/// completes it.
pub(crate) fn connect_outcome(tr: &Transport, tfo: bool, io: &mut super::Ready) -> Option<bool> {
    if !(io.rd || io.wr || io.hup) {
        return None;
    }
    let tcp = tr.tcp();
    let deferred = tfo && io.wr && !io.hup;
    match (tcp.take_error(), deferred || crate::backend::connected(tcp)) {
        (Ok(None), true) => {
            io.wr = true;
            Some(true)
        }
        (Ok(None), false) if !io.hup => {
            io.rd = false;
            io.wr = false;
            None
        }
        _ => Some(false),
    }
}

/// A thread's multiplexed connections that may take more exchanges.
pub(crate) type Pool<C> = std::cell::RefCell<Vec<std::rc::Rc<std::cell::RefCell<C>>>>;

/// The first connection of `pool` that `takes` accepts (none when the
/// exchange wants a `fresh` one; a connection busy running is skipped).
pub(crate) fn pool_find<C>(
    pool: &Pool<C>,
    fresh: bool,
    takes: impl Fn(&C) -> bool,
) -> Option<std::rc::Rc<std::cell::RefCell<C>>> {
    if fresh {
        return None;
    }
    pool.borrow()
        .iter()
        .find(|c| c.try_borrow().is_ok_and(|c| takes(&c)))
        .cloned()
}

/// Drops from `pool` the connections `dead` says are over (the one
/// running, which calls this, counts as over).
pub(crate) fn pool_prune<C>(pool: &Pool<C>, dead: impl Fn(&C) -> bool) {
    if let Ok(mut p) = pool.try_borrow_mut() {
        p.retain(|c| c.try_borrow().is_ok_and(|c| !dead(&c)));
    }
}

/// Starts a connection's tasklet `task` on its socket `fd`: registered
/// (edge-triggered, both ways), woken at a soft stop.
pub(crate) fn start_tasklet<T: sched::TaskletFn + 'static>(
    ctx: &mut Ctx,
    name: &'static str,
    task: T,
    fd: std::os::fd::RawFd,
) -> std::io::Result<TaskletId> {
    let id = ctx.new_tasklet_obj(name, task);
    if let Err(e) = ctx.register_fd(fd, id, true) {
        ctx.kill_tasklet(id);
        return Err(e);
    }
    ctx.on_stop_tasklet(id);
    Ok(id)
}
