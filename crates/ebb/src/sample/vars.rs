//! Variables (configuration.txt 2.8, `set-var`, `var()`): typed values
//! stored by name in one of five scopes with HAProxy's lifetimes:
//!
//! - `proc`: the whole process (all threads; behind a lock, so use it for
//!   rare values);
//! - `sess`: the client connection, across its requests (every stream of
//!   an HTTP/2 connection sees the same ones: [`SessVars`]);
//! - `txn`: one exchange, request and response;
//! - `req`: while the request is processed;
//! - `res`: while the response is processed;
//! - `check`: one run of a health check (`http-check set-var`); elsewhere
//!   nothing is stored there and nothing is read from it, as in HAProxy.
//!
//! Names are interned at configuration load, so a store is a short list of
//! (id, value) whose buffers are kept when a scope is cleared: setting a
//! variable allocates nothing once the connection is warm.

use std::cell::RefCell;
use std::rc::Rc;
use std::sync::Mutex;

use super::{Scratch, Val};

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum VarScope {
    Proc,
    Sess,
    Txn,
    Req,
    Res,
    Check,
}

/// A variable named in the configuration: `scope.name`.
#[derive(Clone, Debug)]
pub struct VarRef {
    pub scope: VarScope,
    id: u32,
    pub text: String,
    /// `set-var(NAME,COND...)`: HAProxy's conditions ([`cond`]), all
    /// required for the variable to be set.
    pub conds: u8,
}

/// The conditions of `set-var(NAME,COND...)`.
pub mod cond {
    /// The variable exists (was set, and not unset since; a `proc`
    /// variable named in the configuration always exists).
    pub const IF_EXISTS: u8 = 1;
    pub const IF_NOT_EXISTS: u8 = 2;
    /// The new value is an empty string or binary (never a scalar).
    pub const IF_EMPTY: u8 = 4;
    /// The new value is not an empty string or binary.
    pub const IF_NOT_EMPTY: u8 = 8;
    /// The variable holds a value.
    pub const IF_SET: u8 = 16;
    pub const IF_NOT_SET: u8 = 32;
    /// Both integers: the current value is greater (less) than the new.
    pub const IF_GT: u8 = 64;
    pub const IF_LT: u8 = 128;

    /// Parses the comma-separated conditions after a variable's name.
    pub fn parse(list: &str) -> Result<u8, String> {
        let mut c = 0;
        for w in list.split(',') {
            c |= match w {
                "ifexists" => IF_EXISTS,
                "ifnotexists" => IF_NOT_EXISTS,
                "ifempty" => IF_EMPTY,
                "ifnotempty" => IF_NOT_EMPTY,
                "ifset" => IF_SET,
                "ifnotset" => IF_NOT_SET,
                "ifgt" => IF_GT,
                "iflt" => IF_LT,
                o => {
                    return Err(format!(
                        "unknown set-var condition '{o}' (ifexists, ifnotexists, ifempty, ifnotempty, ifset, ifnotset, ifgt, iflt)"
                    ))
                }
            };
        }
        Ok(c)
    }
}

impl PartialEq for VarRef {
    fn eq(&self, o: &VarRef) -> bool {
        self.text == o.text && self.conds == o.conds
    }
}
impl Eq for VarRef {}

static NAMES: Mutex<Vec<String>> = Mutex::new(Vec::new());

impl VarRef {
    /// Parses `scope.name` (names: letters, digits, `_`, `.`).
    pub fn parse(text: &str) -> Result<VarRef, String> {
        let Some((scope, name)) = text.split_once('.') else {
            return Err(format!(
                "variable '{text}' needs a scope: proc., sess., txn., req., res. or check."
            ));
        };
        let scope = match scope {
            "proc" => VarScope::Proc,
            "sess" => VarScope::Sess,
            "txn" => VarScope::Txn,
            "req" => VarScope::Req,
            "res" => VarScope::Res,
            "check" => VarScope::Check,
            o => {
                return Err(format!(
                    "unknown variable scope '{o}' (proc, sess, txn, req, res, check)"
                ))
            }
        };
        if name.is_empty()
            || !name
                .bytes()
                .all(|c| c.is_ascii_alphanumeric() || c == b'_' || c == b'.')
        {
            return Err(format!("invalid variable name '{text}'"));
        }
        let mut names = NAMES.lock().unwrap_or_else(|p| p.into_inner());
        let id = match names.iter().position(|n| n == text) {
            Some(i) => i,
            None => {
                names.push(text.to_string());
                names.len() - 1
            }
        } as u32;
        drop(names);
        if scope == VarScope::Proc {
            // HAProxy creates a process-wide variable the configuration
            // names, unset and permanent: it exists from the start.
            PROC.lock()
                .unwrap_or_else(|p| p.into_inner())
                .make_permanent(id);
        }
        Ok(VarRef {
            scope,
            id,
            text: text.to_string(),
            conds: 0,
        })
    }
}

/// A stored value (bytes of strings kept in `bytes`).
#[derive(Clone, Debug, Default)]
struct Slot {
    id: u32,
    /// The variable exists (HAProxy's entry in the scope's list).
    exists: bool,
    /// A `proc` variable the configuration names: unset, it still exists.
    permanent: bool,
    set: bool,
    val: Option<Val>,
    bytes: Vec<u8>,
}

/// The variables of one scope.
#[derive(Clone, Default, Debug)]
pub struct Vars {
    slots: Vec<Slot>,
}

impl Vars {
    /// Whether no variable exists or is set.
    fn is_clear(&self) -> bool {
        self.slots.iter().all(|s| !s.exists && !s.set)
    }

    /// Forgets every variable (buffers kept).
    pub fn clear(&mut self) {
        for s in &mut self.slots {
            s.set = false;
            s.exists = s.permanent;
        }
    }

    fn slot(&mut self, id: u32) -> &mut Slot {
        let i = match self.slots.iter().position(|x| x.id == id) {
            Some(i) => i,
            None => {
                self.slots.push(Slot {
                    id,
                    ..Slot::default()
                });
                self.slots.len() - 1
            }
        };
        &mut self.slots[i]
    }

    fn make_permanent(&mut self, id: u32) {
        let slot = self.slot(id);
        slot.permanent = true;
        slot.exists = true;
    }

    /// Stores `v` (bytes in `s.cur`) when the conditions `conds` hold, in
    /// HAProxy's order (`var_set`): existence, then set or not, then the
    /// new value against the old.
    fn set(&mut self, id: u32, v: Val, s: &Scratch, conds: u8) {
        use cond::*;
        let slot = self.slot(id);
        if slot.exists {
            if conds & IF_NOT_EXISTS != 0 {
                return;
            }
        } else {
            if conds & IF_EXISTS != 0 {
                return;
            }
            slot.exists = true;
            slot.set = false;
        }
        if (conds & IF_SET != 0 && !slot.set) || (conds & IF_NOT_SET != 0 && slot.set) {
            return;
        }
        let text = matches!(v, Val::Str | Val::Bin);
        if conds & IF_EMPTY != 0 && (!text || !s.cur.is_empty()) {
            return;
        }
        if conds & IF_NOT_EMPTY != 0 && text && s.cur.is_empty() {
            return;
        }
        if let (true, Some(Val::Int(old)), Val::Int(new)) = (slot.set, slot.val, v) {
            if (conds & IF_GT != 0 && old <= new) || (conds & IF_LT != 0 && old >= new) {
                return;
            }
        }
        slot.set = true;
        slot.val = Some(v);
        slot.bytes.clear();
        if matches!(v, Val::Str | Val::Bin | Val::Meth) {
            slot.bytes.extend_from_slice(&s.cur);
        }
    }

    fn unset(&mut self, id: u32) {
        if let Some(x) = self.slots.iter_mut().find(|x| x.id == id) {
            x.set = false;
            x.exists = x.permanent;
        }
    }

    fn get(&self, id: u32, s: &mut Scratch) -> Option<Val> {
        let x = self.slots.iter().find(|x| x.id == id && x.set)?;
        let v = x.val?;
        if matches!(v, Val::Str | Val::Bin | Val::Meth) {
            s.cur.clear();
            s.cur.extend_from_slice(&x.bytes);
        }
        Some(v)
    }
}

static PROC: Mutex<Vars> = Mutex::new(Vars { slots: Vec::new() });

/// The `sess` scope of one client connection. A clone shares the values:
/// the streams of an HTTP/2 connection each hold one, so a variable one
/// stream sets is seen by the others, as in HAProxy (its streams point at
/// their session's variables).
#[derive(Clone, Default, Debug)]
pub struct SessVars(Rc<RefCell<Vars>>);

/// The variables an exchange sees (all but `proc`, which is global).
#[derive(Default, Debug)]
pub struct VarStore {
    pub sess: SessVars,
    pub txn: Vars,
    pub req: Vars,
    pub res: Vars,
    /// `check` variables: only a health check's store has them
    /// ([`VarStore::for_check`]).
    pub check: Option<Vars>,
    /// Requests begun on this connection (`http_first_req`).
    pub requests: u64,
    /// The exchanges are HTTP/2 streams (`req.ver` says 2.0).
    pub h2: bool,
    /// The `name` of the bind line the connection came through
    /// (`so_name`).
    pub so_name: Option<std::sync::Arc<str>>,
    /// The position of the connection's listener in its frontend, from 0
    /// (`so_id` is one more).
    pub so_idx: u32,
    /// The TLVs of the PROXY header the connection began with
    /// (`accept-proxy`; empty for v1); `None` without a header
    /// (`fc_rcvd_proxy`, `fc_pp_authority`, `fc_pp_unique_id`).
    pub pp_tlvs: Option<std::sync::Arc<[crate::proxyproto::Tlv]>>,
    /// The connection's addresses before `tcp-request session` (and a
    /// tcp proxy's content) rules change the session's (`fc_src`,
    /// `fc_dst`...); the local one `None` when no such rule could move it.
    pub fc_addrs: Option<(std::net::SocketAddr, Option<std::net::SocketAddr>)>,
    /// The connection's place on its listener's statistics (`option
    /// socket-stats`), released with the connection.
    pub listener: Option<crate::listener_stats::ListenerGuard>,
    /// `capture request|response header` values of the exchange.
    pub req_caps: Vec<Option<Vec<u8>>>,
    pub res_caps: Vec<Option<Vec<u8>>>,
    /// What the exchange learnt for its log line besides the timers.
    pub info: TxnInfo,
    /// When the previous exchange of the connection was logged (`%Ti`
    /// counts the idle time from there).
    pub last_log: Option<std::time::SystemTime>,
    /// The request line as received (`capture.req.method`,
    /// `capture.req.uri`, `capture.req.ver`: readable in response rules
    /// too); kept from one request to the next for its capacity.
    pub req_line: Vec<u8>,
    /// Cleared for the pool and not used since: the next request has
    /// nothing to clear.
    pub(crate) fresh: bool,
}

static REQ_COUNTER: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);

impl TxnInfo {
    /// `%rt`, HAProxy's request counter: a number no other exchange of the
    /// process has (taken from one process-wide counter, only by the
    /// exchanges that ask for it).
    pub fn request_counter(&mut self) -> u64 {
        *self
            .rt
            .get_or_insert_with(|| REQ_COUNTER.fetch_add(1, std::sync::atomic::Ordering::Relaxed))
    }

    /// The request's date: its head's age taken from now.
    pub fn request_date(&self) -> Option<std::time::SystemTime> {
        self.accept_date?;
        std::time::SystemTime::now()
            .checked_sub(std::time::Duration::from_millis(u64::from(self.req_age_ms)))
    }

    /// Notes `loc` as the exchange's last final rule: the one noted
    /// before (in this exchange or the previous one) when it is the same
    /// rule (the usual case), else a copy.
    #[inline]
    pub fn note_last_rule(&mut self, loc: &crate::loc::Loc) {
        let prev = self.last_rule.take().or(self.spare_rule.take());
        self.last_rule = Some(match prev {
            Some(l) if std::sync::Arc::ptr_eq(&l.file, &loc.file) && l.line == loc.line => l,
            _ => loc.clone(),
        });
    }
}

/// Facts of one exchange the log line reports (HAProxy keeps them in its
/// transaction): persistence cookie flags, captured cookies, the unique
/// id, retries and queue positions.
#[derive(Default, Debug)]
pub struct TxnInfo {
    /// `%tsc`'s two cookie characters (HAProxy's sess_cookie and
    /// sess_set_cookie letters); 0: `-`, the backend has no cookie.
    pub ck_client: u8,
    pub ck_server: u8,
    /// The server (index in its backend) the persistence cookie named,
    /// when it was used to choose the server.
    pub ck_direct: Option<usize>,
    /// `option persist`: `ck_direct` names a down server that must still
    /// take the stream.
    pub ck_force: bool,
    /// The forcing came from a `force-persist` rule: no redispatch then
    /// (HAProxy's SF_FORCE_PRST).
    pub ck_force_rule: bool,
    /// The server (index in its backend) a `use-server` rule assigned,
    /// and whether a `force-persist` rule held (no redispatch then).
    pub use_srv: Option<(usize, bool)>,
    /// `ignore-persist`: the cookie does not choose the server and none is
    /// inserted.
    pub ck_ignore: bool,
    /// `maxidle`/`maxlife` dates read from the cookie (seconds since the
    /// epoch; 0: none).
    pub ck_last: u64,
    pub ck_first: u64,
    /// `capture cookie` values (`%CC`, `%CS`).
    pub cap_cc: Option<Vec<u8>>,
    pub cap_cs: Option<Vec<u8>>,
    /// `unique-id-format`'s value for this exchange.
    pub unique_id: Option<Vec<u8>>,
    /// The connection's accept date, and how old the request was (ms since
    /// its first byte) when its head was complete: the dates log-format
    /// strings give (`%t`, `%Ts`, `%ms`, `%tr`...) outside the log line.
    pub accept_date: Option<std::time::SystemTime>,
    pub req_age_ms: u32,
    /// `%rt`: the exchange's number, taken from the process's counter the
    /// first time something asks for it.
    pub rt: Option<u64>,
    /// `set-log-level`: the level of the exchange's log line, `Some(None)`
    /// for none (`silent`).
    pub log_level: Option<Option<u8>>,
    /// Connection retries made (`%rc`), the backend's and the server's
    /// concurrent streams (`%bc`, `%sc`), and the server's address
    /// (`%si:%sp`).
    pub retries: u32,
    /// The exchange went to another server after failed connects.
    pub redispatched: bool,
    pub be_conns: u32,
    pub srv_conns: u32,
    /// Streams that were ahead of this one in the server's or the
    /// backend's queue when it joined (`%sq`, `%bq`; 0 if it did not wait).
    pub srv_queue: u32,
    pub be_queue: u32,
    pub srv_addr: Option<std::net::SocketAddr>,
    /// The exchange's server connection was set up (`bc_err`: 0 then,
    /// nothing after a failed connect).
    pub srv_connected: bool,
    /// The server connection's local address (`%bi:%bp`, `bc_src`,
    /// `bc_src_port`), known only while [`crate::sample::BACK_LOCAL`].
    pub srv_local: Option<crate::sample::BackLocal>,
    /// The TLS of the exchange's server connection: the certificates the
    /// server presented (`ssl_s_*`) and what the handshake settled
    /// (`ssl_bc*`). `None`: no TLS to the server, or nothing reads it
    /// (kept only when [`crate::sample::SRV_TLS`]).
    pub srv_tls: Option<std::sync::Arc<crate::clientcert::ServerTls>>,
    /// The server's id in its backend (`srv_id`: its position from 1, as
    /// HAProxy numbers servers without an `id`).
    pub srv_id: Option<u32>,
    /// What `http-request cache-use` learnt of the request, for
    /// `http-response cache-store` (the `httpcache` module).
    pub cache: CacheFacts,
    /// The cache that answered (`res.cache_hit`, `res.cache_name`).
    pub cache_hit: Option<std::sync::Arc<str>>,
    /// The server's answer came over HTTP/2 (`res.ver` says 2.0).
    pub srv_h2: bool,
    /// The algorithm compressing the server's answer, decided before the
    /// response rules run (`res.comp`, `res.comp_algo`).
    pub res_comp: Option<&'static str>,
    /// The stream's destination as `http-request set-dst`/`set-dst-port`
    /// left it (`None`: the connection's); the next request starts from
    /// the connection's again, as HAProxy's streams do.
    pub dst: Option<std::net::SocketAddr>,
    /// The stream's source as `http-request set-src`/`set-src-port` left
    /// it (`None`: the connection's), likewise for this request only.
    pub src: Option<std::net::SocketAddr>,
    /// Where the last final rule of the exchange is written
    /// (`last_rule_file`, `last_rule_line`).
    pub last_rule: Option<crate::loc::Loc>,
    /// The previous exchange's `last_rule`, kept so that the same rule
    /// noted again reuses it (see [`TxnInfo::note_last_rule`]): no
    /// reference count moved per request on the configuration's file
    /// name, which every thread's exchanges share. Never read as a rule.
    spare_rule: Option<crate::loc::Loc>,
    /// `http-request disable-l7-retry` held: no layer-7 retry for this
    /// exchange.
    pub no_l7_retry: bool,
    /// `http-request set-timeout server|tunnel`: this exchange's own, in
    /// ms (0: none, as HAProxy's eternity).
    pub timeout_server: Option<u32>,
    pub timeout_tunnel: Option<u32>,
    /// `set-priority-class` (-2047..=2047) and `set-priority-offset`
    /// (ms, -524287..=524287): where the stream waits in a queue
    /// (`prio_class`, `prio_offset`).
    pub prio_class: i16,
    pub prio_offset: i32,
}

/// HAProxy's cache flags and keys of a transaction (`txn->cache_hash`,
/// `cache_secondary_hash`, TX_CACHEABLE, TX_CACHE_COOK, TX_CACHE_IGNORE).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct CacheFacts {
    /// The primary key (SHA-1 of the URI), once computed.
    pub hash: Option<[u8; 20]>,
    /// The secondary key, when it could be built (TX_CACHE_HAS_SEC_KEY).
    pub sec: Option<[u8; 8]>,
    pub cacheable: bool,
    pub cook: bool,
    pub ignore: bool,
    /// The request is HTTP/1.1.
    pub http11: bool,
}

/// What of a connection's variables lasts from one exchange to the next
/// when their store went back to the thread's pool between the two (see
/// [`ConnVars`]).
#[derive(Clone, Copy, Debug, Default)]
pub struct Kept {
    requests: u64,
    last_log: Option<std::time::SystemTime>,
    /// `fc_addrs` was set (to the connection's own addresses).
    fc_addrs: bool,
}

/// Stores bigger than this (variables' and captures' bytes) are freed
/// rather than pooled.
const POOLED_BYTES_MAX: usize = 16 * 1024;

/// A client connection's variables ([`VarStore`]): in a store of their
/// own while an exchange is under way; while the connection idles, when
/// nothing lasts in them but the request count, the last log's date and
/// the connection's addresses (no session-scope variable, no PROXY TLVs,
/// no bind name, no listener statistics), the store goes back to the
/// thread's pool and only those stay ([`Kept`]): HAProxy's split between
/// a small session and the pooled stream's state.
#[derive(Debug, Default)]
pub struct ConnVars {
    live: Option<Box<RefCell<VarStore>>>,
    kept: Kept,
    /// What the connection's start left in the store (a bind name, PROXY
    /// TLVs, listener statistics, other addresses, an HTTP/2 session)
    /// lasts: it never goes to the pool. Known from the first idle
    /// moment on (those facts do not change after the start).
    pinned: Option<bool>,
}

impl ConnVars {
    /// The variables of a new connection (from its `tcp-request
    /// connection|session` rules).
    pub fn new(store: Box<RefCell<VarStore>>) -> ConnVars {
        ConnVars {
            live: Some(store),
            kept: Kept::default(),
            pinned: None,
        }
    }

    /// The store, while it is not in the pool.
    pub fn cell(&self) -> Option<&RefCell<VarStore>> {
        self.live.as_deref()
    }

    /// Reads the store, unless it is in the pool or borrowed.
    pub fn try_borrow(&self) -> Option<std::cell::Ref<'_, VarStore>> {
        self.live.as_ref()?.try_borrow().ok()
    }

    /// Changes the store, unless it is in the pool or borrowed.
    pub fn try_borrow_mut(&self) -> Option<std::cell::RefMut<'_, VarStore>> {
        self.live.as_ref()?.try_borrow_mut().ok()
    }

    /// The store, for an exchange: the connection takes it back from the
    /// pool ([`ConnVars::unpark`]) as soon as a request's bytes arrive, so
    /// a new one is made here only if that was missed.
    pub fn get_mut(&mut self) -> &mut VarStore {
        self.live.get_or_insert_with(Box::default).get_mut()
    }

    /// Whether the store is in the pool.
    pub fn parked(&self) -> bool {
        self.live.is_none()
    }

    /// Gives the store back to the pool (`give`, with whether it is worth
    /// keeping) when nothing in it lasts but what [`Kept`] keeps; `peer`
    /// and `dst` are the connection's addresses.
    pub fn park(
        &mut self,
        peer: std::net::SocketAddr,
        dst: Option<std::net::SocketAddr>,
        give: impl FnOnce(Box<RefCell<VarStore>>, bool),
    ) {
        let Some(live) = self.live.as_mut() else {
            return;
        };
        let v = live.get_mut();
        let pinned = *self.pinned.get_or_insert_with(|| {
            v.h2 || v.so_name.is_some()
                || v.so_idx != 0
                || v.pp_tlvs.is_some()
                || v.listener.is_some()
                || v.fc_addrs.is_some_and(|a| a != (peer, dst))
        });
        if pinned || Rc::strong_count(&v.sess.0) > 1 || !v.sess.0.borrow().is_clear() {
            return;
        }
        self.kept = Kept {
            requests: v.requests,
            last_log: v.last_log,
            fc_addrs: v.fc_addrs.is_some(),
        };
        let keep = v.recycle();
        if let Some(b) = self.live.take() {
            give(b, keep);
        }
    }

    /// Takes a store back from the pool (`take`) for the connection's
    /// next exchange, if its own went there.
    pub fn unpark(
        &mut self,
        peer: std::net::SocketAddr,
        dst: Option<std::net::SocketAddr>,
        take: impl FnOnce() -> Box<RefCell<VarStore>>,
    ) {
        if self.live.is_some() {
            return;
        }
        let mut b = take();
        let v = b.get_mut();
        v.requests = self.kept.requests;
        v.last_log = self.kept.last_log;
        v.fc_addrs = self.kept.fc_addrs.then_some((peer, dst));
        self.live = Some(b);
    }

    /// The store, out of the connection (its session goes on elsewhere:
    /// an HTTP/2 connection).
    pub fn into_store(
        mut self,
        peer: std::net::SocketAddr,
        dst: Option<std::net::SocketAddr>,
    ) -> VarStore {
        self.unpark(peer, dst, Box::default);
        self.live.take().map(|b| b.into_inner()).unwrap_or_default()
    }
}

impl VarStore {
    /// Clears a store that [`ConnVars::park`] found holding nothing that
    /// lasts, for the thread's pool: what a new connection's store holds,
    /// buffers kept. Returns whether it is worth keeping (no buffer grew
    /// for unusually large values).
    fn recycle(&mut self) -> bool {
        // Every field is named: a new one must be considered here.
        let VarStore {
            sess,
            txn,
            req,
            res,
            requests,
            // Clear, false and `None` (see `park`).
            h2: _,
            so_name: _,
            so_idx: _,
            pp_tlvs: _,
            listener: _,
            fc_addrs,
            req_caps,
            res_caps,
            info,
            last_log,
            req_line,
            check,
            fresh,
        } = self;
        *fresh = true;
        txn.clear();
        req.clear();
        res.clear();
        *requests = 0;
        *fc_addrs = None;
        req_caps.clear();
        res_caps.clear();
        *info = TxnInfo::default();
        *last_log = None;
        req_line.clear();
        *check = None;
        let bytes = |v: &Vars| v.slots.iter().map(|s| s.bytes.capacity()).sum::<usize>();
        let sess_bytes = bytes(&sess.0.borrow());
        sess_bytes + bytes(txn) + bytes(req) + bytes(res) + req_line.capacity() <= POOLED_BYTES_MAX
    }

    /// The authority a `proxy-v2-options authority` header passes on: the
    /// client's own PROXY header's, else the SNI it sent (`sni`).
    pub fn pp_authority<'a>(&'a self, sni: Option<&'a str>) -> Option<&'a [u8]> {
        self.pp_tlvs
            .as_ref()
            .and_then(|t| {
                t.iter()
                    .rev()
                    .find(|t| t.kind == crate::proxyproto::tlv::AUTHORITY)
            })
            .map(|t| &t.value[..])
            .or_else(|| sni.map(str::as_bytes))
    }

    /// The variables of one health check run: `check` and `sess` start
    /// empty with it.
    pub fn for_check() -> VarStore {
        VarStore {
            check: Some(Vars::default()),
            ..VarStore::default()
        }
    }

    /// A new request on the connection: `txn`, `req` and `res` start empty.
    pub fn begin_request(&mut self) {
        self.requests += 1;
        if std::mem::take(&mut self.fresh) {
            return;
        }
        self.req_caps.clear();
        self.res_caps.clear();
        self.txn.clear();
        let spare = self.info.last_rule.take().or(self.info.spare_rule.take());
        self.info = TxnInfo::default();
        self.info.spare_rule = spare;
        self.req.clear();
        self.res.clear();
    }

    /// The response is being processed: `req` variables are gone.
    pub fn begin_response(&mut self) {
        self.req.clear();
        self.res.clear();
    }

    /// Runs `f` on the variables of scope `s` (`sess`: the connection's
    /// shared ones; `proc`: the process's, under their lock).
    fn with_scope<T>(&mut self, s: VarScope, f: impl FnOnce(&mut Vars) -> T) -> T {
        match s {
            VarScope::Sess => f(&mut self.sess.0.borrow_mut()),
            VarScope::Txn => f(&mut self.txn),
            VarScope::Req => f(&mut self.req),
            VarScope::Res => f(&mut self.res),
            // Outside a check: a scope that stores nothing.
            VarScope::Check => match &mut self.check {
                Some(v) => f(v),
                None => f(&mut Vars::default()),
            },
            VarScope::Proc => f(&mut PROC.lock().unwrap_or_else(|p| p.into_inner())),
        }
    }

    /// Stores `v` (bytes in `s.cur`) if `r`'s conditions hold.
    pub fn set(&mut self, r: &VarRef, v: Val, s: &Scratch) {
        self.with_scope(r.scope, |vars| vars.set(r.id, v, s, r.conds));
    }

    pub fn unset(&mut self, r: &VarRef) {
        self.with_scope(r.scope, |vars| vars.unset(r.id));
    }

    /// Reads a variable into `s.cur`; `None` when unset.
    pub fn get(&mut self, r: &VarRef, s: &mut Scratch) -> Option<Val> {
        self.with_scope(r.scope, |vars| vars.get(r.id, s))
    }
}

/// `set-var`, `set-var-fmt`, `unset-var` of `http-request` and
/// `http-response` rules.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum VarAction {
    Set(VarRef, Box<super::Expr>),
    SetFmt(VarRef, super::LogFormat),
    Unset(VarRef),
}

impl VarAction {
    /// Runs the action for `ctx` (a context without variables does
    /// nothing).
    pub fn run(&self, ctx: &super::Ctx<'_>) {
        let Some(store) = ctx.vars else {
            return;
        };
        match self {
            VarAction::Set(r, e) => {
                super::with_scratch(|s| {
                    // An expression that yields nothing leaves the
                    // variable as it was (HAProxy's rule).
                    if let Some(v) = e.eval(ctx, s) {
                        if let Ok(mut st) = store.try_borrow_mut() {
                            st.set(r, v, s);
                        }
                    }
                });
            }
            VarAction::SetFmt(r, f) => super::with_name_buf(|buf| {
                f.render(ctx, buf);
                let mut s = Scratch::default();
                std::mem::swap(&mut s.cur, buf);
                if let Ok(mut st) = store.try_borrow_mut() {
                    st.set(r, Val::Str, &s);
                }
                std::mem::swap(&mut s.cur, buf);
            }),
            VarAction::Unset(r) => {
                if let Ok(mut st) = store.try_borrow_mut() {
                    st.unset(r);
                }
            }
        }
    }
}

/// Runs the `global` section's `set-var`/`set-var-fmt` lines in order
/// (their expressions are context free: checked at load).
pub fn run_global(actions: &[VarAction]) {
    let store = std::cell::RefCell::new(VarStore::default());
    let ctx = super::Ctx::detached(&|| None, Some(&store));
    for a in actions {
        a.run(&ctx);
    }
}

/// HAProxy's name of a value's type (`smp_to_type`), as the CLI's `get
/// var` shows it.
pub(super) fn type_name(v: Val) -> &'static str {
    match v {
        Val::Bool(_) => "bool",
        Val::Int(_) => "sint",
        Val::Ip(std::net::IpAddr::V4(_)) => "ipv4",
        Val::Ip(std::net::IpAddr::V6(_)) => "ipv6",
        Val::Str => "str",
        Val::Bin => "bin",
        Val::Meth => "meth",
    }
}

/// The CLI's `get var NAME`: `NAME: type=T value=<V>` (no newline, as
/// HAProxy answers) for a process-wide variable that is set, its value as text with the bytes that do not
/// print shown as `.`; `Err` carries HAProxy's message otherwise.
pub fn cli_get(name: &str) -> Result<String, String> {
    let not_found = || "Variable not found.\n".to_string();
    if !name.starts_with("proc.") {
        return Err(not_found());
    }
    let id = {
        let names = NAMES.lock().unwrap_or_else(|p| p.into_inner());
        names.iter().position(|n| n == name).ok_or_else(not_found)? as u32
    };
    let mut s = Scratch::default();
    let v = PROC
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .get(id, &mut s)
        .ok_or_else(not_found)?;
    let mut text = Vec::new();
    super::write_text(v, &s, &mut text);
    let shown: String = text
        .iter()
        .map(|&c| {
            if (0x20..0x7f).contains(&c) {
                c as char
            } else {
                '.'
            }
        })
        .collect();
    Ok(format!("{name}: type={} value=<{shown}>", type_name(v)))
}

/// The CLI's `set var NAME [expr|fmt] VALUE` (`args` after `set var`):
/// sets a process-wide variable from a context-free expression or
/// log-format string, as the `global` section's `set-var` does.
pub fn cli_set(args: &[String]) -> Result<(), String> {
    let Some(name) = args.first().filter(|n| !n.is_empty()) else {
        return Err("Missing process-wide variable identifier.\n".into());
    };
    let Some(first) = args.get(1).filter(|a| !a.is_empty()) else {
        return Err("Missing either 'expr', 'fmt' or expression.\n".into());
    };
    let (fmt, value) = match args.get(2) {
        Some(v) => match first.as_str() {
            "fmt" => (true, v),
            "expr" => (false, v),
            o => {
                return Err(format!(
                    "'set var': arg type must be either 'expr' or 'fmt' but got '{o}'.\n"
                ))
            }
        },
        None => (false, first),
    };
    let r = VarRef::parse(name).map_err(|e| format!("'set var': {e}.\n"))?;
    if r.scope != VarScope::Proc {
        return Err(format!(
            "'set var': cannot set variable '{name}', only scope 'proc' is permitted here.\n"
        ));
    }
    let scope = super::Scope::Request { backend: true };
    let action = if fmt {
        let f = super::LogFormat::parse(value, scope).map_err(|e| format!("'set var': {e}.\n"))?;
        if !f.context_free() {
            return Err(format!(
                "'set var': '{value}' needs a connection or a request, which the CLI does not have.\n"
            ));
        }
        VarAction::SetFmt(r, f)
    } else {
        let e = super::Expr::parse(value, scope).map_err(|e| format!("'set var': {e}.\n"))?;
        if !e.context_free() {
            return Err(format!(
                "'set var': '{value}' needs a connection or a request, which the CLI does not have.\n"
            ));
        }
        VarAction::Set(r, Box::new(e))
    };
    run_global(std::slice::from_ref(&action));
    Ok(())
}
