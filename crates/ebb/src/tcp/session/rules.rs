//! The session's rules: the content inspection (`tcp-request content`
//! rules, resumed where they waited, `use_backend`, the chosen backend's
//! content rules, `use-server` and `stick match`), the `tcp-response
//! content` rules on what the server sends, and the `stick` rules'
//! store once the server is known.

use std::sync::Arc;

use sched::{ticks, Ctx};

use super::{Route, Session};
use crate::l4rules::{run_rules, run_rules_addrs, Verdict};
use crate::proxy::BackendKind;

impl Session {
    /// Evaluates the content rules and `use_backend` once the inspection
    /// may decide, then the chosen backend's content and `stick` rules.
    /// Returns `None` while it must wait for more bytes, `Err(verdict)`
    /// when a rule refuses the session.
    pub(super) fn inspect(&mut self, ctx: &mut Ctx) -> Option<Result<Route, Verdict>> {
        let now = ctx.now();
        self.stk.set_now(now);
        let fe = Arc::clone(&self.fe);
        let l4 = &fe.l4;
        let (payload, eof, full) = {
            let p = self.pipe.borrow();
            (p.c2s.data().to_vec(), p.cli.eof, p.c2s.reader_blocked)
        };
        let expired = ticks::is_expired(self.inspect_until, now);
        let hello = crate::tls::hello::sniff(&payload);
        // HAProxy: the content rules run on every new chunk while more may
        // come within the delay; a rule that does not hold on an answer
        // that may still change (`req.len` below a bound, a hello not
        // whole yet) stops the walk and waits, and the walk resumes at
        // that rule. At the delay, the end of the input or a full buffer,
        // they decide on what arrived.
        let partial = l4.inspect_delay > 0 && !eof && !full && !expired;
        let may_change = std::cell::Cell::new(false);
        let sni = match &hello {
            crate::tls::hello::Sniff::Hello(h) => h.sni.clone(),
            _ => None,
        };
        let pay = crate::sample::Payload {
            bytes: &payload,
            sni: sni.as_deref(),
            hello_partial: matches!(hello, crate::tls::hello::Sniff::Need),
            partial,
            may_change: &may_change,
            response: false,
        };
        let from = self.content_pos;
        // HTTP fetches in the rules: the bytes parsed as an HTTP/1 request
        // head, once it is whole (HAProxy parses a tcp stream's request for
        // them); until then, while more may come, the walk waits. A head
        // that is not HTTP, or not whole at the end, gives them nothing.
        let reads_http = l4.reads_http || fe.backends.iter().any(|b| b.l4.reads_http);
        let mut head = crate::http1::RequestHead::default();
        let mut has_head = false;
        if reads_http {
            match crate::http1::parse_request_into(&payload, &self.w.limits, &mut head) {
                Ok(crate::http1::Status::Complete(())) => has_head = true,
                Ok(crate::http1::Status::Partial) if partial => return None,
                _ => {}
            }
        }
        let req = has_head.then_some(crate::sample::Req {
            buf: &payload,
            head: &head,
            body: &[],
        });
        // `set-src`/`set-dst`...: the session's addresses from then on (its
        // log, `balance source`, the PROXY header to the server), kept
        // even when the walk waits.
        let addrs = std::cell::Cell::new(None);
        let use_srv = std::cell::Cell::new(None);
        let r = self.with_ctx(Some(pay), None, req, |sctx| {
            let mut xp = false;
            let v = run_rules_addrs(
                &l4.content_rules,
                from,
                &fe.matcher,
                sctx,
                false,
                Some(&may_change),
                &mut xp,
                Some(&addrs),
                Some(&self.resolving),
            );
            match v {
                Verdict::Wait(i) => return Err(Some(i)),
                Verdict::Reject | Verdict::SilentDrop => {
                    // A refused request (`dreq`) of the frontend.
                    crate::proxy::count_denied_req(&fe.http, None);
                    return Ok(Err(v));
                }
                // `switch-mode http`: HTTP from here, the backend chosen
                // on the request.
                Verdict::Upgrade(proto) => {
                    return Ok(Ok(Route::Http {
                        backend: None,
                        proto,
                    }))
                }
                Verdict::Accept | Verdict::Continue | Verdict::Close => {}
            }
            let moved: Option<crate::l4rules::Addrs> = addrs.get();
            let moved_dst = move || moved.and_then(|a| a.dst);
            let sctx = match moved {
                Some(a) => crate::sample::Ctx {
                    src: a.src,
                    dst: &moved_dst,
                    ..*sctx
                },
                None => *sctx,
            };
            let Some(bi) = fe.choose_backend(&sctx) else {
                return Ok(Err(Verdict::Reject));
            };
            let be = &fe.backends[bi];
            be.rates.note_sess();
            if !be.l4.tcp_mode {
                // An HTTP backend: the stream becomes HTTP, the backend's
                // rules run on the request (HAProxy's implicit upgrade).
                return Ok(Ok(Route::Http {
                    backend: Some(bi),
                    proto: None,
                }));
            }
            let sctx = crate::sample::Ctx {
                be: Some(&be.name),
                ..sctx
            };
            // A backend's own content rules run on the same bytes, once.
            may_change.set(false);
            let v = run_rules_addrs(
                &be.l4.content_rules,
                0,
                &be.matcher,
                &sctx,
                false,
                None,
                &mut xp,
                Some(&addrs),
                None,
            );
            if matches!(v, Verdict::Reject | Verdict::SilentDrop) {
                // HAProxy 2.6 counts the frontend's `dreq`, and for a
                // silent-drop the assigned backend's too.
                let chosen = (v == Verdict::SilentDrop).then_some(&**be);
                crate::proxy::count_denied_req(&fe.http, chosen);
                return Ok(Err(v));
            }
            if let BackendKind::Servers(sr) = &be.kind {
                // `use-server` comes before `stick match`.
                use_srv.set(sr.use_server(&be.matcher, &sctx));
                if !be.stick.is_empty() {
                    let farm = &sr.farm;
                    let force = sr.force_persist(&be.matcher, &sctx);
                    let persist = (sr.persist || force).then_some(force);
                    self.stk
                        .stick_request(&be.stick, &be.matcher, &sctx, &farm.servers, persist);
                }
            }
            Ok(Ok(Route::Backend(bi)))
        });
        self.use_srv = use_srv.get();
        if let Some(a) = addrs.get() {
            self.peer = a.src;
            self.dst = a.dst;
        }
        // A `do-resolve` rule waits for its answer: the resolver wakes
        // the session (at once when the answer came already).
        if let (Some(l), Some(me)) = (self.resolving.take(), self.me) {
            if !l.wake_when_done(ctx.handle(), me) {
                ctx.tasklet_wakeup(me);
            }
            self.resolving.set(Some(l));
        }
        match r {
            Err(Some(i)) => {
                self.content_pos = i;
                None
            }
            Err(None) => Some(Err(Verdict::Reject)),
            Ok(v) => Some(v),
        }
    }

    /// Runs the backend's `tcp-response content` rules on what the server
    /// sent, as HAProxy: each time more arrives, resuming at a rule that
    /// waited, until a rule decides, the server's input ends, the buffer
    /// is full or `tcp-response inspect-delay` expires. No rule deciding
    /// accepts.
    pub(super) fn inspect_response(&mut self, ctx: &mut Ctx) {
        let Some((from, until)) = self.res_inspect else {
            return;
        };
        let Some(be) = self.be.clone() else { return };
        let now = ctx.now();
        self.stk.set_now(now);
        let (bytes, eof, full) = {
            let p = self.pipe.borrow();
            (p.s2c.data().to_vec(), p.srv.eof, p.s2c.reader_blocked)
        };
        let expired = ticks::is_expired(until, now);
        // As HAProxy: without a delay the rules run at once, on what is
        // there when the server connects (often nothing); with one, on
        // each arrival until it expires.
        let delay = be.l4.res_inspect_delay > 0;
        if bytes.is_empty() && !eof && !expired {
            return;
        }
        let partial = delay && !eof && !full && !expired;
        let may_change = std::cell::Cell::new(false);
        let pay = crate::sample::Payload {
            bytes: &bytes,
            sni: None,
            hello_partial: false,
            partial,
            may_change: &may_change,
            response: true,
        };
        let srv = self.server.as_ref().map(|s| s.name.clone());
        let v = self
            .with_ctx(Some(pay), Some(&be.name), None, |c| {
                let c = crate::sample::Ctx {
                    srv: srv.as_deref(),
                    ..*c
                };
                let mut xp = false;
                Ok(run_rules(
                    &be.l4.res_rules,
                    from,
                    &be.matcher,
                    &c,
                    false,
                    Some(&may_change),
                    &mut xp,
                ))
            })
            .unwrap_or(Verdict::Reject);
        match v {
            Verdict::Wait(i) => {
                self.res_inspect = Some((i, until));
                return;
            }
            Verdict::Reject | Verdict::SilentDrop => {
                self.silent = v == Verdict::SilentDrop;
                if self.silent {
                    // An abort, counted as a refused request (`dreq`) of
                    // the frontend and the backend (HAProxy's silent-drop).
                    crate::proxy::count_denied_req(&self.fe.http, Some(&be));
                } else {
                    // A denied response (`dresp`).
                    crate::proxy::count_denied_resp(&self.fe.http, &be, self.server.as_deref());
                }
                self.end_with(b"PD");
            }
            Verdict::Close => {
                // HAProxy kills the server connection (no lingering) and
                // lets what it sent reach the client.
                let st = {
                    let mut p = self.pipe.borrow_mut();
                    p.srv.used = None;
                    p.srv.tr.take()
                };
                if let Some(st) = st {
                    let _ = ctx.deregister_fd(st.raw_fd());
                    let _ = socket2::SockRef::from(st.tcp())
                        .set_linger(Some(std::time::Duration::ZERO));
                }
                let mut p = self.pipe.borrow_mut();
                p.srv.eof = true;
                p.srv.shut_wr = true;
            }
            // (`switch-mode` is a request rule only.)
            Verdict::Accept | Verdict::Continue | Verdict::Upgrade(_) => {}
        }
        self.res_inspect = None;
        self.pipe.borrow_mut().res_hold = false;
        // The client side writes what waited.
        if let Some(me) = self.me {
            ctx.tasklet_wakeup(me);
        }
    }

    /// The server is connected: the `stick` rules store what they kept
    /// (and the `store-response` patterns) with its id.
    pub(super) fn stick_store(&mut self) {
        let (Some(be), Some(srv)) = (self.be.clone(), self.server.clone()) else {
            return;
        };
        if be.stick.is_empty() {
            return;
        }
        let _ = self.with_ctx(None, Some(&be.name), None, |c| {
            self.stk.stick_response(&be.stick, &be.matcher, c, &*srv);
            Ok(())
        });
    }
}
