//! The connected session: the bytes relayed both ways (by the two
//! tasklets over [`crate::tcp::pipe::Pipe`]), from the connect to both
//! directions finished or a side failed.

use sched::{ticks, Ctx};

use super::{Session, St};
use crate::tcp::pipe::SpliceWant;

impl Session {
    /// The server is connected: the relay begins. What the rules and the
    /// log read of the server connection is noted, the `stick` rules
    /// store, the server's bytes wait for the `tcp-response` rules (when
    /// there are some), splicing is chosen, and the server side is woken
    /// for what waited.
    pub(super) fn establish(&mut self, ctx: &mut Ctx) {
        if let Some(s) = &self.server {
            crate::backend::check::observe(s, crate::backend::check::Seen::L4Ok);
        }
        self.st = St::Established;
        // What `ssl_s_*` and `ssl_bc*` read of the server
        // connection (response rules, the log line).
        let tls = self
            .pipe
            .borrow()
            .srv
            .tr
            .as_ref()
            .and_then(|t| t.server_tls());
        if let Ok(mut v) = self.vars.try_borrow_mut() {
            v.info.srv_tls = tls;
        }
        if self.fe.tcp_logs_at_connect() {
            // `option logasap`, or a format that reads nothing
            // of the end: the line goes now, with the bytes so
            // far (none) and the time to the connect.
            let sent = self.pipe.borrow().srv.bytes_read;
            self.log(ctx, 0, sent, true);
            self.logged = true;
        }
        self.stick_store();
        if let Some(be) = self.be.as_ref().filter(|b| !b.l4.res_rules.is_empty()) {
            // The server's bytes wait for the response rules.
            let until = ticks::add(ctx.now(), be.l4.res_inspect_delay);
            self.res_inspect = Some((0, until));
            self.pipe.borrow_mut().res_hold = true;
        }
        {
            let bits = self.fe.l4.splice | self.be.as_ref().map_or(0, |b| b.l4.splice);
            let want = |bit: u8| {
                if bits & bit != 0 {
                    SpliceWant::On
                } else if bits & crate::config::SPLICE_AUTO != 0 {
                    SpliceWant::Auto
                } else {
                    SpliceWant::Off
                }
            };
            let mut p = self.pipe.borrow_mut();
            p.c2s.splice = want(crate::config::SPLICE_REQUEST);
            p.s2c.splice = want(crate::config::SPLICE_RESPONSE);
            p.forwarding = true;
        }
        // The server side writes what waited in `c2s`, reads
        // what its connect's edge said is there, passes the
        // client's FIN; after a connect confirmed by the bytes
        // sent with it, only what is left of those (its
        // socket's own edges wake it).
        let waits = {
            let p = self.pipe.borrow();
            !p.sent_early || p.c2s.pending() + p.srv_prefix.len() > 0 || p.srv.err || p.cli.eof
        };
        if let (true, Some(t)) = (waits, self.srv_task) {
            ctx.tasklet_wakeup(t);
        }
    }

    /// Both directions finished, or a side failed: the code for it.
    pub(super) fn data_end(&self) -> Option<[u8; 2]> {
        let p = self.pipe.borrow();
        let state = match self.st {
            St::Established => b'D',
            St::Inspect => b'R',
            St::Queued => b'Q',
            _ => b'C',
        };
        if let Some(t) = self.half_term {
            if p.cli.err || p.srv.err || p.cli.done() && p.srv.done() {
                return Some(t);
            }
            return None;
        }
        if p.cli.err {
            return Some([b'C', state]);
        }
        if p.srv.err {
            return Some([b'S', state]);
        }
        if self.st == St::Established && p.cli.done() && p.srv.done() {
            return Some(*b"--");
        }
        None
    }
}
