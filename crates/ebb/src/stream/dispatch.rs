//! Carrying out the answer the analysis chose ([`Act`]): the answers ebb
//! makes itself at once (auth, monitor, redirect, deny, reject...), the
//! work that answers later (a page or a tarpit built by a task, a file
//! looked up on the blocking pool), the cache, or a server
//! ([`super::proxy`]).

use std::rc::Rc;
use std::sync::{Arc, Mutex};

use sched::{Ctx, Reasons, Status};

use super::decide::{Act, CleanPath};
use super::reply::redirect_fields;
use super::{Stream, Wait, H1};
use crate::config::HttpRequestAction;
use crate::http1::{BodyFraming, Method, CONNECT_ALLOW};
use crate::mux::h1::client::In;
use crate::proxy::{BackendKind, FrontendRt};
use crate::serve::cache::lookup_blocking;
use crate::serve::Service;

impl Stream {
    /// Carries out the answer [`Stream::decide`] chose, with the
    /// frontend the stream holds for its connection ([`Stream::fe_held`]).
    pub(super) fn dispatch(&mut self, c: &mut H1, ctx: &mut Ctx, act: Act) {
        let hints = self.hints.get_mut();
        if !hints.is_empty() {
            // `http-request early-hint`: the 103s go first.
            let at = c.wbuf.len();
            c.wbuf.append(hints);
            if let Some(m) = &c.fe.h1_case {
                m.adjust_heads(c.wbuf.get_mut(at..).unwrap_or(&mut []));
            }
        }
        let fe = match self.fe_held.take() {
            Some(f) if Arc::ptr_eq(&f, &c.fe) => f,
            _ => Arc::clone(&c.fe),
        };
        self.dispatch_with(c, ctx, act, &fe);
        self.fe_held = Some(fe);
    }

    /// [`Stream::dispatch`]'s work, `fe` being the connection's frontend.
    fn dispatch_with(&mut self, c: &mut H1, ctx: &mut Ctx, act: Act, fe: &Arc<FrontendRt>) {
        let keep_alive = self.keep_alive;
        let version = c.head.version;
        let head_req = c.head.method == Method::Head;
        match act {
            Act::WaitBody(w) => self.wait_body(c, ctx, w),
            Act::WaitResolve(w) => {
                // Woken by the resolver once the answer is there (at once
                // when it came already).
                let waits = match (&w.lookup, c.me) {
                    (Some(l), Some(me)) => l.wake_when_done(ctx.handle(), me),
                    _ => false,
                };
                c.input = In::Stream;
                self.wait = Wait::Resolve(w);
                if !waits {
                    if let Some(me) = c.me {
                        ctx.tasklet_wakeup(me);
                    }
                }
            }
            Act::Auth(bi, realm) => {
                // HAProxy's http_action_auth: the proxy's 401 answer with
                // `WWW-Authenticate`, the connection kept; an HTTP error
                // for the trackers, logged `LR`.
                c.stk.note_error();
                let v = format!("Basic realm=\"{}\"", realm.replace(['"', '\\'], ""));
                let hdr: [(&[u8], &[u8]); 1] = [(b"WWW-Authenticate", v.as_bytes())];
                match fe.error_replies.iter().find(|(s, _)| *s == 401) {
                    Some((_, p)) => {
                        let be_name = bi.and_then(|b| fe.backends.get(b)).map(|b| b.name.clone());
                        self.answer_prepared(c, fe, p, keep_alive, be_name.as_deref(), &hdr);
                    }
                    None => match fe.errorfile(401) {
                        // Sent as written, the field added after its
                        // status line (HAProxy adds it to the answer).
                        Some(raw) => {
                            let at = raw
                                .windows(2)
                                .position(|w| w == b"\r\n")
                                .map_or(raw.len(), |p| p + 2);
                            c.wbuf.extend_from_slice(&raw[..at]);
                            c.wbuf.extend_from_slice(b"WWW-Authenticate: ");
                            c.wbuf.extend_from_slice(v.as_bytes());
                            c.wbuf.extend_from_slice(b"\r\n");
                            c.wbuf.extend_from_slice(&raw[at..]);
                            c.closing = true;
                        }
                        None => c.error_response(401, keep_alive, version, head_req, &hdr),
                    },
                }
                self.local_term = Some("LR");
                self.finish_request(c, ctx, 401, bi, 0);
            }
            Act::Monitor(failed) => {
                // Not logged: HAProxy's monitor requests never are.
                if failed {
                    c.error_response(503, keep_alive, version, head_req, &[]);
                } else {
                    self.fields.clear();
                    self.reply(
                        c,
                        200,
                        &[(b"Content-Type", b"text/html")],
                        b"<html><body><h1>200 OK</h1>\nService ready.\n</body></html>\n",
                    );
                }
                self.quiet = true;
                self.finish_request(c, ctx, if failed { 503 } else { 200 }, None, 0);
                self.quiet = false;
            }
            Act::Options => {
                self.fields.clear();
                self.reply(c, 200, &[(b"Allow", b"GET, HEAD, OPTIONS")], b"");
                self.finish_request(c, ctx, 200, None, 0);
            }
            Act::Return(be, i, done) => {
                let be_arc = be.and_then(|b| c.fe.backends.get(b).cloned());
                let rules = match &be_arc {
                    Some(b) => &b.http_request,
                    None => &fe.http_request,
                };
                let Some(p) = rules.get(i).and_then(|r| r.prepared.as_ref()) else {
                    return;
                };
                let reply = match rules.get(i).map(|r| &r.action) {
                    Some(HttpRequestAction::Return(r)) => r,
                    _ => return,
                };
                if reply.deny {
                    // A deny with its own answer: counted; the connection
                    // goes on when the exchange allows, as HAProxy's.
                    c.stk.note_error();
                    count_denied_req(fe, be);
                }
                let be_name = be_arc.as_ref().map(|b| b.name.as_str());
                if let crate::config::ReturnBody::Errorfile(raw) = &reply.body {
                    let st = p.status;
                    match raw {
                        // Sent as written: its framing is its own.
                        Some(bytes) => {
                            c.wbuf.extend_from_slice(bytes);
                            c.closing = true;
                        }
                        None => self.error_answer(c, fe, st, keep_alive, be_name),
                    }
                    self.local_term = Some("LR");
                    self.finish_return(c, ctx, st, be);
                    return;
                }
                let now = ctx.now();
                self.answer_done(c, fe, p, done.as_deref(), keep_alive, be_name, &[], now);
                let st = p.status;
                self.local_term = Some("LR");
                self.finish_return(c, ctx, st, be);
            }
            Act::Connect => {
                // The file server opens no tunnel: CONNECT is refused.
                let allow: &[(&[u8], &[u8])] = &[(b"Allow", CONNECT_ALLOW)];
                c.error_response(405, keep_alive, version, head_req, allow);
                self.finish_request(c, ctx, 405, None, 0);
            }
            Act::Redirect(loc, code, rule, cookie) => {
                self.late_rule = rule;
                // HAProxy 2.6 closes after a redirect answering a request
                // with a body (its rules run before the body is read:
                // `Connection: close`, http_apply_redirect_rule).
                if c.head.framing != BodyFraming::None {
                    self.keep_alive = false;
                    c.closing = true;
                }
                self.fields.clear();
                let (f, n) = redirect_fields(code, &loc, cookie.as_deref());
                self.reply_at(c, code, &f[..n], b"", Some(0));
                self.local_term = Some("LR");
                self.finish_request(c, ctx, code, None, 0);
            }
            act @ (Act::Stats(..) | Act::Service) => {
                // The page is built by a task at the best nice: tasks join
                // the normal class, whose share of each turn is kept even
                // when I/O floods the urgent one, and a nice of -1024 puts
                // it before every other task; so the stats answer under
                // full load (HAProxy runs its stats applet niced the same
                // way).
                let svc = match act {
                    Act::Stats(rt, admin, be) => {
                        // A backend's page: its `http-after-response`
                        // rules run on it and the log names it.
                        self.page_backend = be;
                        let buf = &c.rbuf[c.rstart..c.rend];
                        let post = (c.head.method == Method::Post).then(|| {
                            self.body_now
                                .data(&self.body_buf, buf, c.head.head_len)
                                .to_vec()
                        });
                        Service::Stats {
                            rt,
                            path: c.head.path.get(buf).to_vec(),
                            authz: c.head.header(buf, "authorization").map(|v| v.to_vec()),
                            admin,
                            post,
                        }
                    }
                    _ => {
                        let buf = &c.rbuf[c.rstart..c.rend];
                        Service::Prometheus {
                            uri: c.head.path.get(buf).to_vec(),
                        }
                    }
                };
                let mut job = Some(svc);
                let slot = Rc::new(std::cell::RefCell::new(None));
                let s2 = Rc::clone(&slot);
                let me = c.me;
                let t = ctx.new_task("stats_page", move |ctx: &mut Ctx, _id, _why| {
                    if let Some(j) = job.take() {
                        *s2.borrow_mut() = Some(j.answer());
                    }
                    if let Some(me) = me {
                        ctx.tasklet_wakeup(me);
                    }
                    Status::Done
                });
                ctx.set_nice(t, -1024);
                ctx.wakeup(t, Reasons::INIT);
                c.input = In::Stream;
                self.wait = Wait::Page(slot);
            }
            Act::Error(st) => {
                c.error_response(st, false, version, head_req, &[]);
                self.finish_request(c, ctx, st, None, 0);
            }
            Act::Deny(be, st) => {
                c.stk.note_error();
                count_denied_req(fe, be);
                // HAProxy keeps the connection when the exchange allows,
                // and logs the refusal `PR` (the proxy's condition).
                let be_name = be
                    .and_then(|b| c.fe.backends.get(b))
                    .map(|b| b.name.clone());
                self.error_answer(c, fe, st, keep_alive, be_name.as_deref());
                self.local_term = Some("PR");
                self.finish_return(c, ctx, st, be);
            }
            Act::Tarpit(be, st) => {
                // HAProxy counts a tarpit as a denied request, holds it
                // `timeout tarpit`, then answers and reads nothing more
                // (it leaves the connection to its timeout; ebb closes).
                c.stk.note_error();
                count_denied_req(fe, be);
                self.keep_alive = false;
                // Logged `PT` once answered, the wait as its Tw.
                self.local_term = Some("PT");
                if be.is_some() {
                    self.page_backend = be;
                }
                let slot = Rc::new(std::cell::RefCell::new(None));
                let (s2, me) = (Rc::clone(&slot), c.me);
                let t = ctx.new_task("tarpit", move |ctx: &mut Ctx, _id, _why| {
                    *s2.borrow_mut() = Some(crate::serve::error(st));
                    if let Some(me) = me {
                        ctx.tasklet_wakeup(me);
                    }
                    Status::Done
                });
                ctx.set_expire(t, sched::ticks::add(ctx.now(), fe.timeouts.tarpit));
                c.input = In::Stream;
                self.wait = Wait::Page(slot);
            }
            Act::Reject(silent, bi, line) => {
                // HAProxy counts it as a denied request and logs it with
                // `PR` and no status; nothing is sent. (Its reject counts
                // on the stream's backend even before one is chosen: the
                // proxy itself, a `listen` section's own backend row.)
                count_denied_req(fe, bi.or(fe.own_backend));
                if silent {
                    crate::transport::silent_drop(c.tr.tcp());
                    c.silent = true;
                }
                self.keep_alive = false;
                c.closing = true;
                self.end_exchange(c, ctx, 0, bi, 0, Some(line));
            }
            Act::TcpBackend(bi) => {
                self.keep_alive = false;
                c.closing = true;
                self.local_term = Some("IR");
                self.end_exchange(c, ctx, 0, Some(bi), 0, Some(true));
            }
            Act::NoBackend => {
                c.error_response(503, keep_alive, version, head_req, &[]);
                self.finish_request(c, ctx, 503, None, 0);
            }
            Act::Files(bi, Err(st)) => {
                let extra: &[(&[u8], &[u8])] = if st == 405 {
                    &[(b"Allow", b"GET, HEAD")]
                } else {
                    &[]
                };
                c.error_response(st, keep_alive, version, head_req, extra);
                self.finish_request(c, ctx, st, Some(bi), 0);
            }
            Act::Proxy(bi, edited) => {
                self.start_proxy(c, ctx, bi, edited);
            }
            Act::Cache(bi, hit) => self.answer_cached(c, ctx, bi, &hit),
            Act::Files(bi, Ok(path)) => {
                let now = ctx.now();
                let bid = c.fe.backends.get(bi).map_or(0, |b| b.id);
                let buf = &c.rbuf[c.rstart..c.rend];
                let clean: &[u8] = match &path {
                    CleanPath::Head(n) => c.head.path.get(buf).get(..*n).unwrap_or_default(),
                    CleanPath::Made(p) => p.as_bytes(),
                };
                let hit = c.w.files.borrow_mut().get(bid, clean, now);
                if let Some(found) = hit {
                    if let CleanPath::Made(p) = path {
                        crate::serve::files::recycle_path(p);
                    }
                    self.answer_found(c, ctx, bi, found);
                    return;
                }
                let clean = match path {
                    CleanPath::Made(p) => p,
                    // (Clean is ASCII: always text.)
                    CleanPath::Head(_) => String::from_utf8(clean.to_vec()).unwrap_or_default(),
                };
                if clean.is_empty() {
                    // (Not reached: a clean path starts with `/`.)
                    c.error_response(404, keep_alive, version, head_req, &[]);
                    self.finish_request(c, ctx, 404, Some(bi), 0);
                    return;
                }
                // Off to the blocking pool; the head stays in the buffer
                // until the answer is written.
                let BackendKind::Files(cfg) = &c.fe.backends[bi].kind else {
                    return;
                };
                let slot = Arc::new(Mutex::new(None));
                let s2 = Arc::clone(&slot);
                let cfg = cfg.clone();
                let c2 = clean.clone();
                let handle = ctx.handle();
                let me = c.me;
                let job = move || {
                    let f = lookup_blocking(&cfg, &c2);
                    *s2.lock().unwrap_or_else(|p| p.into_inner()) = Some(f);
                    if let Some(me) = me {
                        handle.wake_tasklet(me);
                    }
                };
                if c.w.pool.submit(job).is_err() {
                    c.error_response(503, keep_alive, version, head_req, &[]);
                    self.finish_request(c, ctx, 503, Some(bi), 0);
                    return;
                }
                self.wait_backend = bi;
                self.wait_clean = clean;
                c.input = In::Stream;
                self.wait = Wait::Disk(slot);
            }
        }
    }
}

/// [`crate::proxy::count_denied_req`] with the backend by its index in
/// `fe` (a backend's rules refused the request: it was chosen).
fn count_denied_req(fe: &FrontendRt, be: Option<usize>) {
    let be = be.and_then(|b| fe.backends.get(b));
    crate::proxy::count_denied_req(&fe.http, be.map(|b| &**b));
}
