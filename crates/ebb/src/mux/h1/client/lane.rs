//! The HTTP/2 lane entry. An HTTP/2 stream runs on a lane: this same
//! client side over a [`Transport::Lane`] instead of a socket, as its own
//! tasklet (`h2_stream`, [`LaneTask`]) sharing its state with its HTTP/2
//! connection, which may also run an exchange inline
//! ([`Conn::start_inline`]: a head it already wrote, parsed or not) and
//! take its answer without the lane's pipe. And the way out to HTTP/2:
//! the ALPN choice or the HTTP/2 preface on an HTTP/1 bind hands the
//! transport and the bytes read to an HTTP/2 connection
//! ([`Conn::hand_to_h2`]).

use std::cell::RefCell;
use std::net::SocketAddr;
use std::rc::Rc;
use std::sync::Arc;

use sched::{Ctx, Reasons, Status, TaskletFn, TaskletId};

use crate::http1::{Status as PStatus, Version};
use crate::proxy::FrontendRt;
use crate::transport::Transport;
use crate::worker::Worker;

use super::{Body, Built, Conn, Exchange, In, H2_PREFACE};

impl<S: Exchange + Default + 'static> Conn<S> {
    /// Starts a lane of the HTTP/2 connection whose tasklet is `mux`: an
    /// HTTP/1 client side over `tr` (a [`Transport::Lane`]) running one
    /// stream per HTTP/2 stream, one after the other. Returns its tasklet.
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn spawn_lane(
        ctx: &mut Ctx,
        tr: Transport,
        peer: SocketAddr,
        dst: Option<SocketAddr>,
        fe: Arc<FrontendRt>,
        w: std::rc::Rc<Worker>,
        mux: TaskletId,
        session: (
            crate::table::Stk,
            std::cell::RefCell<crate::sample::VarStore>,
        ),
    ) -> (TaskletId, Rc<RefCell<Self>>) {
        let session = (session.0, Box::new(session.1));
        let mut conn = Self::make(ctx, tr, -1, peer, dst, fe, w, Some(session));
        conn.lane_of = Some(mux);
        let first_deadline = conn.deadline;
        let sess = std::sync::Arc::clone(&conn.sess);
        // Shared with the HTTP/2 connection, which runs the start of its
        // streams on it inline (`start_inline`).
        let shared = Rc::new(RefCell::new(*conn));
        let id = ctx.new_tasklet_obj("h2_stream", LaneTask(Rc::clone(&shared)));
        sess.set_tasklet(id);
        ctx.on_stop_tasklet(id);
        ctx.tasklet_set_expire(id, first_deadline);
        (id, shared)
    }

    /// The HTTP/2 connection starts its stream on this lane inline: `head`
    /// is the request's head (a request without body), the lane's tasklet
    /// `me`. The stream's rules run and its answer is chosen now; a whole
    /// answer given at once is kept in [`Conn::native`] (not written as
    /// HTTP/1), anything else (a wait, bytes written as they are) stays
    /// for the lane's tasklet. Returns false, having done nothing, when
    /// the lane cannot take it this way (the caller writes `head` into its
    /// pipe instead).
    ///
    /// `built`: what the HTTP/2 side read of the head as it wrote it
    /// (`h2::RequestHead::write_h1_head`): nothing (parsed here), its
    /// request line's and fields' spans (completed without a parse), or the
    /// whole head.
    pub(crate) fn start_inline(
        &mut self,
        ctx: &mut Ctx,
        me: TaskletId,
        head: &[u8],
        built: Built<'_>,
    ) -> bool {
        if !matches!(self.input, In::Head)
            || self.rstart != self.rend
            || self.has_output()
            || self.closing
            || self.eof
        {
            return false;
        }
        if self.rbuf.is_empty() {
            self.rbuf = self.w.get_buf();
        }
        if head.len() > self.rbuf.len() {
            return false;
        }
        if self.head.headers.capacity() == 0 {
            self.head.headers = self.w.get_head_index();
        }
        if self.wbuf.capacity() == 0 {
            self.wbuf = self.w.get_wbuf();
        }
        self.me = Some(me);
        if ctx.stopping() {
            self.stopping = true;
        }
        self.rbuf[..head.len()].copy_from_slice(head);
        self.rstart = 0;
        self.rend = head.len();
        self.native.get_or_insert_with(Default::default).arm();
        match built {
            Built::Parse => {
                self.process(ctx);
            }
            Built::Spans(line, fields) => {
                self.head.headers.clear();
                self.head.headers.extend_from_slice(fields);
                self.start_built(ctx, Some(line));
            }
            Built::Head(h) => {
                self.head.assign(h);
                self.start_built(ctx, None);
            }
        }
        if let Some(n) = self.native.as_deref_mut() {
            n.armed = false;
        }
        true
    }

    /// [`Conn::process`] for a head in the buffer whose syntax is known:
    /// its fields' spans in `self.head`, completed as after a parse
    /// (`line`: the request line's spans), or (`None`) the whole head;
    /// then started.
    fn start_built(
        &mut self,
        ctx: &mut Ctx,
        line: Option<(crate::http1::Span, crate::http1::Span)>,
    ) {
        if self.req_start.is_none() {
            self.req_start = Some(ctx.now());
        }
        let mut r = match line {
            Some(line) => crate::http1::complete_request_into(
                &self.rbuf[self.rstart..self.rend],
                line,
                Version::Http11,
                self.rend - self.rstart,
                &self.req_limits(),
                &mut self.head,
                false,
            ),
            None => Ok(PStatus::Complete(())),
        };
        if let Ok(PStatus::Complete(())) = r {
            r = self.normalize_head();
        }
        match r {
            Ok(PStatus::Complete(())) => {
                // The lane's stream and variables may be in the thread's
                // pools since its last stream (as after a parse).
                self.unpark();
                self.with_stream(|st, c| st.start(c, ctx));
            }
            // A whole head is never partial; the parser says why not.
            Ok(PStatus::Partial) => {
                self.process(ctx);
            }
            Err(e) => self.bad_request(ctx, e),
        }
    }

    /// The answer [`Conn::start_inline`] kept, if one was.
    pub(crate) fn native_answer(&self) -> Option<&crate::mux::h2::native::Captured> {
        self.native.as_deref().filter(|n| n.done)
    }

    /// The answer's body bytes, when they are all of what remains to
    /// write: in the output buffer, or a file's held in memory with
    /// nothing before them (a small file's after its head was taken by
    /// [`Conn::native`]).
    pub(crate) fn pending_body(&self) -> Option<&[u8]> {
        if !matches!(self.input, In::Head) || self.rstart != self.rend {
            return None;
        }
        match &self.body {
            None => Some(&self.wbuf[self.wpos..]),
            Some(Body::Mem { file, pos, end }) if self.wpos == self.wbuf.len() => {
                file.bytes().and_then(|b| b.get(*pos..*end))
            }
            Some(_) => None,
        }
    }

    /// The output was sent by other means (the HTTP/2 connection took it).
    pub(crate) fn drop_output(&mut self) {
        self.wbuf.clear();
        self.wpos = 0;
        self.body = None;
    }

    /// Whether the exchange started inline is over on this side (its
    /// answer given whole, nothing left to write or wait for).
    pub(crate) fn inline_done(&self) -> bool {
        matches!(self.input, In::Head) && self.rstart == self.rend && !self.has_output()
    }

    /// After an exchange run inline: the lane idles (its buffers go back
    /// to the pool) and its timer follows its state, as at the end of a
    /// run of its own. `hold`: the buffers stay for now, as the next
    /// stream of the same batch of frames is likely to start here at
    /// once (the caller settles it again, not holding, when the batch
    /// ends).
    pub(crate) fn settle_inline(&mut self, ctx: &mut Ctx, hold: bool) {
        if let Some(n) = self.native.as_deref_mut() {
            n.done = false;
        }
        if hold {
            return;
        }
        if self.inline_done() {
            // Idle again, as at the end of a run of its own: buffers,
            // stream and variables go back to the thread's pools.
            self.release_buffers();
            self.park();
        }
        let d = self.next_deadline();
        if d != self.deadline {
            self.deadline = d;
            if let Some(me) = self.me {
                ctx.tasklet_set_expire(me, d);
            }
        }
    }

    /// Whether the first bytes read are the HTTP/2 connection preface
    /// (RFC 9113 §3.4), whole.
    pub(super) fn h2_preface(&self) -> bool {
        self.rstart == 0
            && self
                .rbuf
                .get(..self.rend)
                .is_some_and(|b| b.starts_with(H2_PREFACE))
    }

    /// The TLS handshake chose `h2` (ALPN), or the client sent the HTTP/2
    /// preface on an HTTP/1 bind: hands the transport and the
    /// bytes already read to an HTTP/2 connection, and this tasklet ends.
    pub(super) fn hand_to_h2(&mut self, ctx: &mut Ctx) -> Status {
        let Ok(dup) = self.tr.tcp().try_clone() else {
            return self.close(ctx);
        };
        let placeholder = Transport::Lane(Box::new(crate::transport::LaneEnd {
            pipe: Default::default(),
            sock: std::rc::Rc::new(dup),
            tls: false,
            sni: None,
            alpn: None,
            client: None,
        }));
        let tr = std::mem::replace(&mut self.tr, placeholder);
        if std::mem::take(&mut self.registered) {
            let _ = ctx.deregister_fd(self.fd);
        }
        self.w.sessions.remove(&self.sess);
        let early = self
            .rbuf
            .get(self.rstart..self.rend)
            .unwrap_or(&[])
            .to_vec();
        self.rstart = self.rend;
        self.release_buffers();
        let fe = Arc::clone(&self.fe);
        let w = std::rc::Rc::clone(&self.w);
        let fresh = crate::table::Stk::new(Arc::clone(&self.fe.tables));
        let session = (
            std::mem::replace(&mut self.stk, fresh),
            std::cell::RefCell::new(
                std::mem::take(&mut self.vars).into_store(self.sess.peer, self.pp_dst()),
            ),
        );
        let started = crate::mux::h2::H2Conn::<S>::spawn(
            ctx,
            tr,
            self.sess.peer,
            self.pp_dst(),
            fe,
            w,
            early,
            self.sess.accepted(),
            session,
        );
        if started.is_err() {
            self.w.conn_closed(ctx, &self.fe);
        }
        Status::Done
    }
}

/// The tasklet of a lane (`h2_stream`): its client side, shared with its
/// HTTP/2 connection.
struct LaneTask<S>(Rc<RefCell<Conn<S>>>);

impl<S: Exchange + Default + 'static> TaskletFn for LaneTask<S> {
    fn run(&mut self, ctx: &mut Ctx, me: TaskletId, why: Reasons) -> Status {
        match self.0.try_borrow_mut() {
            Ok(mut c) => c.run(ctx, me, why),
            Err(_) => {
                // Never while its HTTP/2 connection runs it inline (one
                // thread, no nesting); if it were, run again.
                ctx.tasklet_wakeup(me);
                Status::Continue
            }
        }
    }
}
