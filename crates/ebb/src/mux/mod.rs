//! Muxes: protocols over a connection. A mux turns one protocol's bytes
//! into the messages of `stream::msg` and back, on either side of
//! a stream: the client side (requests in, responses out) and the server
//! side (requests out, responses in).
//!
//! - [`h1`]: HTTP/1.1, both sides (client connections, server connections).
//! - [`h2`]: HTTP/2, the client side, over the socket-free core in
//!   [`crate::h2`]; each stream runs on a lane of the HTTP/1 client side.
//!   Its `server` module is the server side (`server ... proto h2`): the
//!   streams of several exchanges on one connection to a server.
//!
//! A mux owns its sockets' readiness: each socket is registered with the
//! tasklet of the side that owns it, so a server-side event never runs
//! client-side code and vice versa.

pub mod h1;
pub mod h2;

use std::cell::Cell;
use std::rc::Rc;

use sched::{Ctx, Reasons, Status, TaskId, TaskletId, ETERNITY};

/// A connection's timer: a task (tasklets have no timer) that, when it
/// expires, wakes the tasklet named in the returned cell (set once that
/// tasklet exists) with the `timer` reason.
pub(crate) fn timer_task(
    ctx: &mut Ctx,
    name: &'static str,
) -> (TaskId, Rc<Cell<Option<TaskletId>>>) {
    let target: Rc<Cell<Option<TaskletId>>> = Rc::new(Cell::new(None));
    let t2 = Rc::clone(&target);
    let timer = ctx.new_task(name, move |ctx: &mut Ctx, me, _why| {
        ctx.set_expire(me, ETERNITY);
        if let Some(t) = t2.get() {
            ctx.tasklet_wakeup_why(t, Reasons::TIMER);
        }
        Status::Continue
    });
    (timer, target)
}
