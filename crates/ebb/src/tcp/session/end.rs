//! How a session ends: handed over to the HTTP side (`switch-mode
//! http`, an HTTP backend), or closed: the server's slot released, the
//! counters (`option contstats` adds them as bytes flow), the time
//! statistics and the log line.

use std::rc::Rc;
use std::sync::atomic::Ordering;
use std::sync::Arc;

use sched::{ticks, Ctx, Status, Tick, ETERNITY};

use super::Session;

/// `option contstats`: the longest the counters lag the bytes.
const CONTSTATS_MS: u32 = 5000;

impl Session {
    /// The stream becomes HTTP: the client's connection, what was read
    /// of it, the trackers and variables go to the HTTP side, and this
    /// session ends without a log line (the HTTP side logs each request;
    /// the connection stays counted, the HTTP side releases it).
    pub(super) fn hand_over(
        &mut self,
        ctx: &mut Ctx,
        backend: Option<usize>,
        proto: Option<bool>,
    ) -> Status {
        let (tr, bytes) = {
            let mut p = self.pipe.borrow_mut();
            (p.cli.tr.take(), p.c2s.data().to_vec())
        };
        let Some(tr) = tr else {
            self.end_with(b"CR");
            return self.close(ctx);
        };
        let _ = ctx.deregister_fd(tr.raw_fd());
        self.pipe.borrow_mut().release(&*self.w);
        self.w.sessions.remove(&self.sess);
        let fresh = crate::table::Stk::new(Arc::clone(&self.fe.tables));
        crate::tcp::upgrade::start(
            ctx,
            crate::tcp::upgrade::Handover {
                tr,
                bytes,
                peer: self.peer,
                dst: self.dst,
                fe: Arc::clone(&self.fe),
                w: Rc::clone(&self.w),
                stk: std::mem::replace(&mut self.stk, fresh),
                vars: std::mem::take(&mut self.vars),
                accepted: self.accept_time,
                backend,
                proto,
            },
        );
        Status::Done
    }

    /// Closes everything, logs, and frees the server's slot.
    pub(super) fn close(&mut self, ctx: &mut Ctx) -> Status {
        if let (Some(w), Some(farm)) = (self.waiter.take(), self.farm.clone()) {
            farm.unqueue(&w);
            if let Some(s) = w.cancel() {
                farm.release(&s);
            }
        }
        {
            let mut p = self.pipe.borrow_mut();
            p.connecting = false;
            p.srv.close();
        }
        if let Some(t) = self.srv_task.take() {
            ctx.kill_tasklet(t);
        }
        let (bytes_in, bytes_out, spliced) = {
            let p = self.pipe.borrow();
            (
                p.cli.bytes_read,
                p.srv.bytes_read,
                p.cli.spliced_out + p.srv.spliced_out,
            )
        };
        if spliced > 0 {
            self.fe
                .http
                .spliced_out
                .fetch_add(spliced, Ordering::Relaxed);
        }
        // What `option contstats` did not count yet (all of it without).
        let (d_in, d_out) = self.count_bytes();
        // The trackers count the session's bytes, then let go.
        self.stk.end(ctx.now(), false, false, d_in, d_out);
        self.note_times(ctx.now());
        // The server's slot goes back before the line is written: HAProxy
        // 2.6 releases it when the server side closes and takes the stream
        // off the backend's count before its final log (process_stream), so
        // a lone session logs `1/1/0/0/0`. (The name stays for the line.)
        if let (Some(s), Some(farm)) = (self.server.as_ref(), self.farm.as_ref()) {
            farm.release(s);
        }
        if !self.silent && !self.logged {
            self.log(ctx, bytes_in, bytes_out, false);
        }
        self.server = None;
        if self.silent {
            let cli = self.pipe.borrow_mut().cli.tr.take();
            if let Some(t) = cli {
                crate::transport::silent_drop(t.tcp());
            }
        } else {
            self.pipe.borrow_mut().cli.close();
        }
        self.pipe.borrow_mut().release(&*self.w);
        self.w.sessions.remove(&self.sess);
        self.w.conn_closed(ctx, &self.fe);
        Status::Done
    }

    /// Adds the bytes that flowed since the last count to the server's,
    /// the frontend's and the backend's counters; returns them (for the
    /// trackers).
    fn count_bytes(&mut self) -> (u64, u64) {
        let (t_in, t_out) = {
            let p = self.pipe.borrow();
            (p.cli.bytes_read, p.srv.bytes_read)
        };
        let d_in = t_in.saturating_sub(self.counted.0);
        let d_out = t_out.saturating_sub(self.counted.1);
        self.counted = (t_in, t_out);
        if d_in == 0 && d_out == 0 {
            return (0, 0);
        }
        if let Some(s) = &self.server {
            s.counters.bytes_in.fetch_add(d_in, Ordering::Relaxed);
            s.counters.bytes_out.fetch_add(d_out, Ordering::Relaxed);
        }
        for c in std::iter::once(&self.fe.http).chain(self.be.as_ref().map(|b| &b.http)) {
            let c = c.local();
            c.bytes_in.fetch_add(d_in, Ordering::Relaxed);
            c.bytes_out.fetch_add(d_out, Ordering::Relaxed);
        }
        (d_in, d_out)
    }

    /// `option contstats`, as HAProxy 2.6: once the backend is known, each
    /// run brings the counters (and the trackers' byte counts) up to date,
    /// and a timer does so every 5 s at least while data flows without
    /// waking the session.
    pub(super) fn count_continuously(&mut self, now: Tick) {
        if !self.fe.contstats || self.be.is_none() {
            return;
        }
        let (d_in, d_out) = self.count_bytes();
        if d_in != 0 || d_out != 0 {
            self.stk.add_bytes(now, d_in, d_out);
        }
        if self.count_at == ETERNITY || ticks::is_expired(self.count_at, now) {
            self.count_at = ticks::add(now, CONTSTATS_MS);
        }
    }

    /// The backend's and server's time statistics (HAProxy's
    /// stream_update_time_stats for a tcp stream): from the accept, the
    /// wait for a server (rules and queue), the connect, no response
    /// time, the total; no sample when no connection was made.
    fn note_times(&self, now: Tick) {
        let Some(farm) = &self.farm else { return };
        let d = |a: Tick, b: Tick| u64::from(b.wrapping_sub(a)).min(u64::from(u32::MAX >> 1));
        let times = match (self.t_served, self.pipe.borrow().t_conn) {
            (Some(sv), Some(cn)) => {
                Some([d(self.t_accept, sv), d(sv, cn), 0, d(self.t_accept, now)])
            }
            _ => None,
        };
        let server = self.server.as_ref().filter(|s| !s.backend_target);
        for c in server
            .map(|s| &s.counters)
            .into_iter()
            .chain([&farm.counters])
        {
            c.times.note(times);
        }
    }

    /// The session's log line: at its end, or at the connect with `option
    /// logasap` (`asap`: the total time is then the time to the connect,
    /// it and the size written with a `+`, as HAProxy's).
    pub(super) fn log(&self, ctx: &Ctx, bytes_in: u64, bytes_out: u64, asap: bool) {
        let l4 = &self.fe.l4;
        if !(l4.tcplog || self.fe.log_format.is_some()) || !self.fe.log {
            return;
        }
        if l4.dontlognull && !asap && bytes_in == 0 && bytes_out == 0 && self.term == *b"--" {
            return;
        }
        if !self.w.logging(&self.fe) {
            return;
        }
        // HAProxy's judgement of the session (no status in tcp mode).
        let ab = crate::proxy::abnormal(&self.term, self.retries_done > 0, self.redispatched, None);
        // Then a `set-log-level` of its content rules.
        let Some(level) = crate::rewrite::exchange_log_level(&self.fe, ab, Some(&*self.vars))
        else {
            return;
        };
        let conn = self.pipe.borrow().t_conn;
        let now = conn.filter(|_| asap).unwrap_or_else(|| ctx.now());
        let d = |a: Tick, b: Tick| b.wrapping_sub(a) as i32 as i64;
        // HAProxy 2.6's %Tw is `t_queue - t_request`; a tcp stream has no
        // request date (-1), so it logs the time from the accept to the
        // server slot (the inspection and the queue included), plus one.
        let tw = match self.t_served {
            Some(s) => d(self.t_accept, s) + 1,
            None => -1,
        };
        let tc = match (self.t_served, self.pipe.borrow().t_conn) {
            (Some(s), Some(c)) => d(s, c),
            _ => -1,
        };
        let srv_cur = self
            .server
            .as_ref()
            .map_or(0, |s| s.cur.load(Ordering::Relaxed));
        let be_cur: u32 = self.farm.as_ref().map_or(0, |f| {
            f.servers
                .iter()
                .map(|s| s.cur.load(Ordering::Relaxed))
                .sum()
        });
        // `log-format-sd` renders over the same facts as the line.
        let mut sd = None;
        if self.fe.log_format.is_some() || self.fe.log_format_sd.is_some() {
            // The facts the tcplog line shows, where the format's
            // variables read them.
            if let Ok(mut v) = self.vars.try_borrow_mut() {
                v.info.retries = self.retries_done;
                v.info.redispatched = self.redispatched;
                v.info.be_conns = be_cur;
                v.info.srv_conns = srv_cur;
                v.info.srv_queue = u32::try_from(self.queues.0).unwrap_or(u32::MAX);
                v.info.be_queue = u32::try_from(self.queues.1).unwrap_or(u32::MAX);
                v.info.srv_local = self.pipe.borrow().srv_local;
                v.info.srv_connected = tc >= 0;
                // At the session's end HAProxy 2.6 has released the server
                // connection: `ssl_bc*` and `ssl_s_*` find none (at the
                // connect, `option logasap`, they read it).
                if !asap {
                    v.info.srv_tls = None;
                }
            }
            let term = [self.term[0] as char, self.term[1] as char];
            let term: String = term.iter().collect();
            let entry = crate::log::Entry {
                // (The client's transport may be gone by now.)
                client_cert: None,
                client: self.peer,
                accept: self.accept_time,
                frontend: &self.fe.name,
                backend: self.be.as_ref().map_or(self.fe.name.as_str(), |b| &b.name),
                server: (self.server.as_ref().or(self.refused_by.as_ref()))
                    .map_or("<NOSRV>", |s| &s.name),
                tq: -1,
                tw,
                tc,
                tr: -1,
                tt: d(self.t_accept, now),
                status: 0,
                bytes: bytes_out,
                bytes_in,
                txn: false,
                term: &term,
                actconn: self.w.actconn(),
                feconn: self.fe.cur_conns(),
                request_line: b"",
                request_date: None,
                local: self.dst.or_else(|| self.local_addr()),
                tls: self.tls,
                cookie_flags: "--",
                h2: false,
                vars: Some(&*self.vars),
                ncaps: (0, 0),
                fmt: self.fe.log_format.as_ref(),
                asap,
                // (Closed by now, or about to be.)
                fc: None,
            };
            sd = self.fe.log_sd(&entry);
            if self.fe.log_format.is_some() {
                self.w.log_access_sd(crate::log::format(&entry), sd, level);
                return;
            }
        }
        let line = crate::tcp::tcplog(&crate::tcp::TcpLog {
            client: self.peer,
            accept: self.accept_time,
            frontend: &self.fe.name,
            tls: self.tls,
            backend: self.be.as_ref().map_or(self.fe.name.as_str(), |b| &b.name),
            server: (self.server.as_ref().or(self.refused_by.as_ref()))
                .map_or("<NOSRV>", |s| &s.name),
            tw,
            tc,
            tt: d(self.t_accept, now),
            bytes: bytes_out,
            term: self.term,
            actconn: self.w.actconn(),
            feconn: self.fe.cur_conns(),
            beconn: be_cur,
            srvconn: srv_cur,
            retries: self.retries_done,
            redispatched: self.redispatched,
            queues: self.queues,
            asap,
        });
        self.w.log_access_sd(line, sd, level);
    }
}
