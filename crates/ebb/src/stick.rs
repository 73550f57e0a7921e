//! Persistence by stick table (HAProxy's `stick on|match|store-request|
//! store-response`), in a backend:
//!
//! - before the load balancer runs ([`stick_request`]), each `match` (or
//!   `on`) rule whose condition holds looks its pattern up; the first
//!   entry found names the server, which takes the request if it is not
//!   down or in maintenance; a found entry is touched. The server is the
//!   one whose name (`srvkey name`, the default) or address (`srvkey
//!   addr`) the entry's `server_key` holds, else the one whose id its
//!   `server_id` holds (HAProxy's order: a key learned from a peer whose
//!   backend lists its servers in another order still finds the same
//!   server). Each `store-request` (or `on`) rule whose condition holds
//!   keeps its pattern's key, the first such rule per table only;
//! - when the server's response head arrives ([`stick_response`]), the
//!   `store-response` rules add their keys the same way, then every key
//!   kept is stored with the `server_id` and `server_key` of the server
//!   that answered (created or overwritten, as HAProxy does).
//!
//! A server's id is its position in the backend, from 1 (HAProxy's
//! default `id`; ebb has no `id` keyword), or the one `add server` gave.

use std::sync::Arc;

use crate::config::{HttpRequestAction, StickKind};
use crate::rules::{Cond, Matcher};
use crate::sample::{cast, sample_key, with_scratch, Ctx, Expr, Type, Val};
use crate::table::{dict, Data, KeyType, Pending, SrvKey, StKey, Stk, Table, Tables};

/// A server a stick-table entry names, as the backend looks it up.
#[derive(Clone, Copy, Debug)]
pub enum Named<'a> {
    /// Its `server_id`.
    Id(u64),
    /// Its name (`server_key` of a `srvkey name` table).
    Name(&'a str),
    /// Its address as HAProxy writes it (`server_key` of `srvkey addr`).
    Addr(&'a str),
}

/// What the `stick` rules ask of a backend's servers.
pub trait StickFarm {
    /// The index of the server an entry names.
    fn find(&self, n: Named<'_>) -> Option<usize>;
    /// Whether server `i` may take a persistent request.
    fn usable(&self, i: usize) -> bool;
}

/// The server that answered, as the `stick` rules store it.
pub trait StickServer {
    /// Its `server_id`.
    fn id(&self) -> u32;
    /// Its `server_key` in a table of that `srvkey` (None: it has none,
    /// as a server without an address has no `addr` key).
    fn key(&self, k: SrvKey) -> Option<String>;
}

/// A compiled `stick` rule.
pub struct StickRt {
    pub kind: StickKind,
    pub pattern: Expr,
    pub table: Arc<Table>,
    pub cond: Option<Cond>,
}

const MAX_STORES: usize = 8;

/// What a `use-server` rule names.
pub enum UseTarget {
    /// The server at this index of the backend.
    Server(usize),
    /// The server this log-format string's value names.
    Format(crate::sample::LogFormat),
}

/// A compiled `use-server` rule.
pub struct UseServerRt {
    pub target: UseTarget,
    pub cond: Cond,
}

/// HAProxy's `use-server` rules on the exchange of `ctx`: the first rule
/// whose condition holds and whose server is not down or in maintenance
/// (or may take the request anyway: `persist`, for `option persist` or a
/// `force-persist` rule that holds) assigns its server; a rule naming a
/// down server lets the next ones try. A log-format string naming no
/// server of the backend ends the evaluation, as in HAProxy.
pub fn use_server(
    rules: &[UseServerRt],
    m: &Matcher,
    ctx: &Ctx<'_>,
    farm: &dyn StickFarm,
    persist: bool,
) -> Option<usize> {
    for r in rules {
        if !m.holds(Some(&r.cond), ctx) {
            continue;
        }
        let i = match &r.target {
            UseTarget::Server(i) => *i,
            UseTarget::Format(f) => {
                let mut v = Vec::new();
                f.render(ctx, &mut v);
                let name = std::str::from_utf8(&v).ok()?;
                farm.find(Named::Name(name))?
            }
        };
        if persist || farm.usable(i) {
            return Some(i);
        }
    }
    None
}

fn key_of(r: &StickRt, ctx: &Ctx<'_>) -> Option<StKey> {
    with_scratch(|s| {
        r.pattern
            .eval(ctx, s)
            .and_then(|v| sample_key(&r.table, v, s))
    })
}

fn keep(p: &mut Pending, r: &StickRt, ctx: &Ctx<'_>) {
    if p.keys.len() >= MAX_STORES || p.keys.iter().any(|(t, _)| Arc::ptr_eq(t, &r.table)) {
        return;
    }
    if let Some(k) = key_of(r, ctx) {
        p.keys.push((Arc::clone(&r.table), k));
    }
}

/// The server entry `e` of `t` names in `farm` (HAProxy's
/// `sticking_rule_find_target`): by `server_key`, else by `server_id`.
fn target(t: &Table, e: crate::table::EntryRef, now: u32, farm: &dyn StickFarm) -> Option<usize> {
    let key = t.get(e, Data::ServerKey, now).and_then(dict::get);
    if let Some(k) = key {
        let n = match t.def().srvkey {
            SrvKey::Name => Named::Name(&k),
            SrvKey::Addr => Named::Addr(&k),
        };
        if let Some(i) = farm.find(n) {
            return Some(i);
        }
    }
    let id = t.get(e, Data::ServerId, now).unwrap_or(0);
    farm.find(Named::Id(id))
}

/// Runs the request-side rules of a backend: returns the server index a
/// `match` found (if any) and keeps the `store-request` keys in `p`.
/// `persist`: `option persist` or a `force-persist` rule holds (`Some`,
/// with whether it is the rule): the server found takes the request even
/// when down or in maintenance, as in HAProxy.
pub fn stick_request(
    rules: &[StickRt],
    m: &Matcher,
    ctx: &Ctx<'_>,
    now: u32,
    p: &mut Pending,
    farm: &dyn StickFarm,
    persist: Option<bool>,
) -> Option<usize> {
    p.keys.clear();
    let mut found = None;
    for r in rules {
        if r.kind == StickKind::StoreResponse {
            continue;
        }
        let stores = matches!(r.kind, StickKind::On | StickKind::StoreRequest);
        // Only the first store rule of each table applies.
        if stores && p.keys.iter().any(|(t, _)| Arc::ptr_eq(t, &r.table)) {
            continue;
        }
        if !m.holds(r.cond.as_ref(), ctx) {
            continue;
        }
        if matches!(r.kind, StickKind::On | StickKind::Match) {
            if let Some(k) = key_of(r, ctx) {
                if let Some(e) = r.table.lookup(&k) {
                    if found.is_none() {
                        // The entry names one server; a down one is not
                        // replaced by another the entry could name.
                        found = target(&r.table, e, now, farm)
                            .filter(|&i| persist.is_some() || farm.usable(i));
                    }
                    r.table.touch(e, now);
                }
            }
        }
        if stores {
            keep(p, r, ctx);
        }
    }
    found
}

/// Runs the `store-response` rules on a response head, then stores every
/// kept key with server `srv`.
pub fn stick_response(
    rules: &[StickRt],
    m: &Matcher,
    ctx: &Ctx<'_>,
    now: u32,
    p: &mut Pending,
    srv: &dyn StickServer,
) {
    for r in rules.iter().filter(|r| r.kind == StickKind::StoreResponse) {
        if p.keys.iter().any(|(t, _)| Arc::ptr_eq(t, &r.table)) {
            continue;
        }
        if m.holds(r.cond.as_ref(), ctx) {
            keep(p, r, ctx);
        }
    }
    for (t, k) in p.keys.drain(..) {
        if let Some(e) = t.get_or_create(&k, now) {
            t.set(e, Data::ServerId, u64::from(srv.id()));
            // A key the dictionary cannot keep (or a server without an
            // address under `srvkey addr`) leaves the entry's key as it
            // was, as HAProxy does.
            if let Some(n) = srv.key(t.def().srvkey).and_then(|s| dict::intern(&s)) {
                t.set(e, Data::ServerKey, n);
            }
        }
    }
}

/// `stick` rules on a connection's trackers.
impl Stk {
    /// A backend's request-side `stick` rules for the exchange of `ctx`
    /// (see the module doc). [`Stk::prefer`] then names the server found.
    pub fn stick_request(
        &self,
        rules: &[StickRt],
        m: &Matcher,
        ctx: &Ctx<'_>,
        farm: &dyn StickFarm,
        persist: Option<bool>,
    ) {
        let mut p = self.pending.borrow_mut();
        let t = stick_request(rules, m, ctx, self.now(), &mut p, farm, persist);
        self.prefer.set(t.and_then(|i| u32::try_from(i).ok()));
        self.prefer_force.set(t.and(persist));
    }

    /// Whether the server [`Stk::prefer`] names must take the request even
    /// when down (`Some`), and whether without redispatch (a
    /// `force-persist` rule).
    pub fn prefer_force(&self) -> Option<bool> {
        self.prefer_force.get()
    }

    /// The server (index in its backend) the `stick match` rules chose.
    pub fn prefer(&self) -> Option<usize> {
        self.prefer.get().map(|i| i as usize)
    }

    /// The `store-response` rules on a response head of server `srv`,
    /// then the stores.
    pub fn stick_response(
        &self,
        rules: &[StickRt],
        m: &Matcher,
        ctx: &Ctx<'_>,
        srv: &dyn StickServer,
    ) {
        let mut p = self.pending.borrow_mut();
        stick_response(rules, m, ctx, self.now(), &mut p, srv);
        self.prefer.set(None);
        self.prefer_force.set(None);
    }
}

/// The key a `track-scN KEY` rule tracks in table `t` (None: no sample,
/// or one that makes no key of the table's type). `src` alone, the usual
/// key, is made from the address at once (what its sample would give:
/// `sample_key` casts an address to an address).
pub fn track_key(t: &Table, key: &Expr, ctx: &Ctx<'_>) -> Option<StKey> {
    if key.is_src() && matches!(t.def().key, KeyType::Ip | KeyType::Ipv6) {
        return t.key_ip(ctx.src_addr().ip());
    }
    with_scratch(|s| key.eval(ctx, s).and_then(|v| sample_key(t, v, s)))
}

/// The table a `track-scN KEY [table T]` rule of proxy `proxy` tracks
/// in, found when the configuration is compiled (no lookup by name per
/// request): T, else the proxy's own table (HAProxy 2.6: "the stick-table
/// declared in the current proxy", the backend's for a backend's rule, the
/// frontend's for a frontend's). None for any other action; an error
/// naming the missing table.
pub fn track_table(
    a: &HttpRequestAction,
    proxy: &str,
    tables: &Tables,
) -> Result<Option<Arc<Table>>, String> {
    let HttpRequestAction::TrackSc { table, .. } = a else {
        return Ok(None);
    };
    let name = table.as_deref().unwrap_or(proxy);
    match tables.get(name) {
        Some(t) => Ok(Some(Arc::clone(t))),
        None => Err(format!("no stick-table named '{name}'")),
    }
}

/// `track-scN KEY` in table `t` (the rule's, see [`track_table`]) for the
/// exchange of `ctx`, unless counter `n` is tracked already (HAProxy then
/// skips the rule before making the key). `counts`: the stream's HTTP
/// request is counted now, or when the backend's HTTP rules begin (see
/// [`Stk::track_with`]); `session`: a `tcp-request connection|session`
/// rule, held for the connection.
pub fn track_sc(
    n: usize,
    key: &Expr,
    t: &Arc<Table>,
    ctx: &Ctx<'_>,
    session: bool,
    counts: (bool, bool),
) {
    if let Some(stk) = ctx.stk {
        stk.track_with(n, t, session, counts, || track_key(t, key, ctx));
    }
}

/// `http-response track-scN KEY` in table `t` for the exchange of `ctx`,
/// whose answer has `status` (see [`crate::table::Stk::track_response`]).
pub fn track_sc_response(n: usize, key: &Expr, t: &Arc<Table>, ctx: &Ctx<'_>, status: u16) {
    if let Some(stk) = ctx.stk {
        stk.track_response(n, t, status, || track_key(t, key, ctx));
    }
}

/// Runs the stick-table action of an `http-request` rule (`sc-inc-gpc0`,
/// `sc-set-gpt0`...) for the exchange of `ctx`; false if the action is
/// not one of them (`track-scN` runs with its table, see [`track_sc`]).
pub fn run_http_action(a: &HttpRequestAction, ctx: &Ctx<'_>) -> bool {
    let stk = ctx.stk;
    match a {
        HttpRequestAction::ScIncGpc0(n) => {
            if let Some(stk) = stk {
                stk.inc_gpc0(*n);
            }
        }
        HttpRequestAction::ScIncGpc1(n) => {
            if let Some(stk) = stk {
                stk.inc_gpc1(*n);
            }
        }
        HttpRequestAction::ScIncGpc { idx, n } => {
            if let Some(stk) = stk {
                stk.inc_gpc_at(*idx, *n);
            }
        }
        HttpRequestAction::ScSetGpt0(n, e) | HttpRequestAction::ScSetGpt { n, expr: e, .. } => {
            let (idx, d) = match a {
                HttpRequestAction::ScSetGpt { idx, .. } => (*idx, Data::Gpt),
                _ => (0, Data::Gpt0),
            };
            let v = with_scratch(|s| e.eval(ctx, s).and_then(|v| cast(v, Type::Int, s)));
            if let (Some(stk), Some(Val::Int(i))) = (stk, v) {
                // gpt is an array of unsigned 32-bit tags in HAProxy; it
                // stores the low 32 bits of the value.
                stk.set_gpt_at(idx, *n, d, u64::from(i as u32));
            }
        }
        _ => return false,
    }
    true
}
