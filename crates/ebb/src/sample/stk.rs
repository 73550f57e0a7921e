//! The stick-table sample fetches of HAProxy 2.6 (configuration.txt
//! 7.3.3): `sc_*(N[,T])`, `sc0_*([T])`, `sc1_*`, `sc2_*`, `src_*([T])`,
//! `table_avl([T])`, `table_cnt([T])`.
//!
//! What they return, as HAProxy does: an `sc*` fetch of a counter that is
//! not tracked finds nothing (`sc_tracked` says false); a `src_*` fetch of
//! an address with no entry returns 0; a type the table does not store
//! finds nothing when the entry exists. `*_inc_gpc0`, `*_clr_gpc0` and
//! `src_updt_conn_cnt` change the entry (the `src_` ones create it).
//! Without a table argument, `sc*` fetches read the tracked entry's table
//! and `src_*`/`table_*` the table of the proxy whose rules run.
//!
//! Table names are checked when the configuration is loaded: each fetch
//! compiled notes the names it uses ([`take_refs`]), and the parser
//! refuses a name that is no table, with the line that used it.

use std::cell::RefCell;
use std::sync::Arc;

use super::{cast, Ctx, Scratch, Type, Val};
use crate::table::{Data, EntryRef, KeyType, StKey, Table};

/// Whose entry a fetch reads.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Who {
    /// Tracked counter N.
    Sc(usize),
    /// The client's address.
    Src,
    /// The table itself (`table_avl`, `table_cnt`).
    Table,
}

/// What a fetch does with the entry.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Op {
    Get(Data),
    /// A byte counter in KiB (`kbytes_in`, `kbytes_out`).
    KBytes(Data),
    /// `inc_gpc0`/`inc_gpc1`: the counter and its rate.
    IncGpc(Data, Data),
    /// `clr_gpc0`/`clr_gpc1`.
    ClrGpc(Data),
    UpdtConnCnt,
    Tracked,
    Trackers,
    Avl,
    Cnt,
}

/// A compiled stick-table fetch.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StkFetch {
    who: Who,
    op: Op,
    /// The array element an array fetch reads (`sc_get_gpc(I,N)`).
    idx: usize,
    /// `None`: the tracked entry's table (`sc*`) or the rules' proxy's.
    table: Option<String>,
}

/// A read of tracked counter `n`'s own entry: element `idx` of `d`,
/// shifted right by `shift` (10: in KiB). See [`StkFetch::tracked_read`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TrackedRead {
    n: usize,
    d: Data,
    idx: usize,
    shift: u8,
}

impl TrackedRead {
    /// The value for the exchange of `ctx`: None when the counter is not
    /// tracked or its table does not store the type (HAProxy's fetch
    /// finds nothing). No reference is taken on the table.
    #[inline]
    pub fn read(&self, ctx: &Ctx<'_>) -> Option<i64> {
        let stk = ctx.stk?;
        let now = stk.now();
        let v = stk.with_tracked(self.n, |t, e| t.get_at(e, self.d, self.idx, now))??;
        Some(v as i64 >> self.shift)
    }
}

thread_local! {
    /// Table names used by the fetches compiled since the last
    /// [`take_refs`] (`None`: the proxy's own table).
    static REFS: RefCell<Vec<Option<String>>> = const { RefCell::new(Vec::new()) };
}

/// The table names the fetches compiled on this thread since the last
/// call used (the parser calls it after each line).
pub fn take_refs() -> Vec<Option<String>> {
    REFS.with(|r| std::mem::take(&mut *r.borrow_mut()))
}

/// Notes a table name a rule uses (`None`: its proxy's table), for the
/// parser's check.
pub fn note_table_ref(t: Option<String>) {
    REFS.with(|r| r.borrow_mut().push(t));
}

/// The array fetches (`sc_` and `src_` forms only, with the element's
/// index first): `get_gpt`, `get_gpc`, `gpc_rate`, `inc_gpc`, `clr_gpc`.
fn array_op(x: &str) -> Option<Op> {
    Some(match x {
        "get_gpt" => Op::Get(Data::Gpt),
        "get_gpc" => Op::Get(Data::Gpc),
        "gpc_rate" => Op::Get(Data::GpcRate),
        "inc_gpc" => Op::IncGpc(Data::Gpc, Data::GpcRate),
        "clr_gpc" => Op::ClrGpc(Data::Gpc),
        _ => return None,
    })
}

fn op_of(x: &str, who: Who) -> Option<Op> {
    Some(match x {
        "bytes_in_rate" => Op::Get(Data::BytesInRate),
        "bytes_out_rate" => Op::Get(Data::BytesOutRate),
        "conn_cnt" => Op::Get(Data::ConnCnt),
        "conn_cur" => Op::Get(Data::ConnCur),
        "conn_rate" => Op::Get(Data::ConnRate),
        "get_gpc0" => Op::Get(Data::Gpc0),
        "get_gpt0" => Op::Get(Data::Gpt0),
        "gpc0_rate" => Op::Get(Data::Gpc0Rate),
        "get_gpc1" => Op::Get(Data::Gpc1),
        "gpc1_rate" => Op::Get(Data::Gpc1Rate),
        "http_err_cnt" => Op::Get(Data::HttpErrCnt),
        "http_err_rate" => Op::Get(Data::HttpErrRate),
        "http_req_cnt" => Op::Get(Data::HttpReqCnt),
        "http_req_rate" => Op::Get(Data::HttpReqRate),
        "http_fail_cnt" => Op::Get(Data::HttpFailCnt),
        "http_fail_rate" => Op::Get(Data::HttpFailRate),
        "sess_cnt" => Op::Get(Data::SessCnt),
        "sess_rate" => Op::Get(Data::SessRate),
        "kbytes_in" => Op::KBytes(Data::BytesInCnt),
        "kbytes_out" => Op::KBytes(Data::BytesOutCnt),
        "inc_gpc0" => Op::IncGpc(Data::Gpc0, Data::Gpc0Rate),
        "clr_gpc0" => Op::ClrGpc(Data::Gpc0),
        "inc_gpc1" => Op::IncGpc(Data::Gpc1, Data::Gpc1Rate),
        "clr_gpc1" => Op::ClrGpc(Data::Gpc1),
        "tracked" if matches!(who, Who::Sc(_)) => Op::Tracked,
        "trackers" if matches!(who, Who::Sc(_)) => Op::Trackers,
        "updt_conn_cnt" if who == Who::Src => Op::UpdtConnCnt,
        _ => return None,
    })
}

impl StkFetch {
    /// Compiles `name(args)` if it is a stick-table fetch; `None` if the
    /// name is not one.
    pub fn compile(name: &str, args: &[String]) -> Option<Result<StkFetch, String>> {
        let (who, x, counter_arg) = if let Some(x) = name.strip_prefix("sc_") {
            (Who::Sc(0), x, true)
        } else if let Some(x) = name.strip_prefix("src_") {
            (Who::Src, x, false)
        } else if let Some(rest) = name.strip_prefix("sc") {
            let (n, x) = rest.split_at_checked(1)?;
            let x = x.strip_prefix('_')?;
            let n = match n {
                "0" => 0,
                "1" => 1,
                "2" => 2,
                _ => return None,
            };
            (Who::Sc(n), x, false)
        } else {
            match name {
                "table_avl" => (Who::Table, "avl", false),
                "table_cnt" => (Who::Table, "cnt", false),
                _ => return None,
            }
        };
        let indexed = (counter_arg || who == Who::Src) && array_op(x).is_some();
        let op = match (who, x) {
            (Who::Table, "avl") => Op::Avl,
            (Who::Table, "cnt") => Op::Cnt,
            _ if indexed => array_op(x)?,
            _ => op_of(x, who)?,
        };
        Some(Self::finish(name, who, op, counter_arg, indexed, args))
    }

    fn finish(
        name: &str,
        mut who: Who,
        op: Op,
        counter_arg: bool,
        indexed: bool,
        args: &[String],
    ) -> Result<StkFetch, String> {
        let mut args = args.iter();
        let mut idx = 0;
        if indexed {
            idx = match args.next().map(|a| a.trim().parse::<usize>()) {
                Some(Ok(i)) if i < crate::table::MAX_ARRAY => i,
                Some(_) => {
                    return Err(format!(
                        "fetch '{name}': the array index must be an integer from 0 to {}",
                        crate::table::MAX_ARRAY - 1
                    ))
                }
                None => return Err(format!("fetch '{name}' expects an array index")),
            };
        }
        if counter_arg {
            let n = match args.next().map(|a| a.trim()) {
                Some("0") => 0,
                Some("1") => 1,
                Some("2") => 2,
                Some(a) => {
                    return Err(format!(
                        "fetch '{name}': '{a}' is not a tracked counter number (0, 1 or 2)"
                    ))
                }
                None => return Err(format!("fetch '{name}' expects a counter number (0 to 2)")),
            };
            who = Who::Sc(n);
        }
        let table = args.next().map(|t| t.trim().to_string());
        if table.as_deref() == Some("") {
            return Err(format!("fetch '{name}': empty table name"));
        }
        if args.next().is_some() {
            return Err(format!("fetch '{name}': too many arguments"));
        }
        if table.is_some() || !matches!(who, Who::Sc(_)) {
            REFS.with(|r| r.borrow_mut().push(table.clone()));
        }
        Ok(StkFetch {
            who,
            op,
            idx,
            table,
        })
    }

    /// The type the fetch produces.
    pub fn out_type(&self) -> Type {
        match self.op {
            Op::Tracked => Type::Bool,
            _ => Type::Int,
        }
    }

    /// The fetch as a plain read of a tracked counter's own entry (the
    /// usual rate rule's `sc_http_req_rate(0)`), when it is one.
    pub fn tracked_read(&self) -> Option<TrackedRead> {
        match (self.who, &self.table, self.op) {
            (Who::Sc(n), None, Op::Get(d) | Op::KBytes(d)) => Some(TrackedRead {
                n,
                d,
                idx: self.idx,
                shift: if matches!(self.op, Op::KBytes(_)) {
                    10
                } else {
                    0
                },
            }),
            _ => None,
        }
    }

    /// Evaluates the fetch for an exchange (nothing without trackers).
    pub fn eval(&self, ctx: &Ctx<'_>) -> Option<Val> {
        if let Some(r) = self.tracked_read() {
            return r.read(ctx).map(Val::Int);
        }
        let stk = ctx.stk?;
        let now = stk.now();
        let own = || self.table.as_deref().unwrap_or(ctx.be.unwrap_or(ctx.fe));
        let (table, entry): (Arc<Table>, Option<EntryRef>) = match self.who {
            Who::Sc(n) => {
                let tracked = stk.tracked(n);
                if self.op == Op::Tracked {
                    return Some(Val::Bool(tracked.is_some()));
                }
                let (t, e) = tracked?;
                match &self.table {
                    Some(name) if *name != t.def().name => {
                        let other = Arc::clone(stk.tables().get(name)?);
                        let e2 = t.key_of(e).and_then(|k| other.lookup(&k));
                        (other, e2)
                    }
                    _ => (t, Some(e)),
                }
            }
            Who::Table => {
                let t = stk.tables().get(own())?;
                let used = t.len() as i64;
                return Some(Val::Int(match self.op {
                    Op::Avl => t.def().size as i64 - used,
                    _ => used,
                }));
            }
            Who::Src => {
                let t = Arc::clone(stk.tables().get(own())?);
                let k = t.key_ip(ctx.src_addr().ip())?;
                let creates = matches!(self.op, Op::IncGpc(..) | Op::ClrGpc(_) | Op::UpdtConnCnt);
                let e = if creates {
                    t.get_or_create(&k, now)
                } else {
                    t.lookup(&k)
                };
                (t, e)
            }
        };
        let idx = self.idx;
        let stored = |d: Data| table.stores(d, idx);
        let Some(e) = entry else {
            // No entry: HAProxy returns 0 for reads, nothing for writes.
            return match self.op {
                Op::Get(_) | Op::KBytes(_) | Op::Trackers => Some(Val::Int(0)),
                _ => None,
            };
        };
        let get = |d: Data| table.get_at(e, d, idx, now).map(|v| v as i64);
        let v = match self.op {
            Op::Get(d) => get(d)?,
            Op::KBytes(d) => get(d)? >> 10,
            Op::IncGpc(cnt, rate) => {
                // HAProxy: the rate first, then the counter; the result is
                // the counter, else the rate, else 0 (found either way).
                if !stored(cnt) && !stored(rate) {
                    return Some(Val::Int(0));
                }
                table.add_at(e, rate, idx, 1, now);
                table.add_at(e, cnt, idx, 1, now);
                get(cnt).or_else(|| get(rate)).unwrap_or(0)
            }
            Op::ClrGpc(cnt) => {
                let old = get(cnt)?;
                table.set_at(e, cnt, idx, 0);
                old
            }
            Op::UpdtConnCnt => {
                if !stored(Data::ConnCnt) {
                    return None;
                }
                table.add(e, Data::ConnCnt, 1, now);
                get(Data::ConnCnt)?
            }
            Op::Trackers => table.refs(e)? as i64,
            Op::Tracked | Op::Avl | Op::Cnt => return None,
        };
        Some(Val::Int(v))
    }
}

/// A stick-table converter (`in_table(T)`, `table_X(T)`): looks the
/// input sample up in table T (cast to the table's key type).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StkConv {
    op: Op,
    /// The array element (`table_gpc(I,T)`...).
    idx: usize,
    table: String,
}

impl StkConv {
    /// Compiles `name(args)` if it is a stick-table converter; `None` if
    /// the name is not one.
    pub fn compile(name: &str, args: &[String]) -> Option<Result<StkConv, String>> {
        let array = match name {
            "table_gpt" => Some(Data::Gpt),
            "table_gpc" => Some(Data::Gpc),
            "table_gpc_rate" => Some(Data::GpcRate),
            _ => None,
        };
        if let Some(d) = array {
            return Some(match args {
                [i, t] if !t.trim().is_empty() => match i.trim().parse::<usize>() {
                    Ok(idx) if idx < crate::table::MAX_ARRAY => {
                        let table = t.trim().to_string();
                        REFS.with(|r| r.borrow_mut().push(Some(table.clone())));
                        Ok(StkConv {
                            op: Op::Get(d),
                            idx,
                            table,
                        })
                    }
                    _ => Err(format!(
                        "converter '{name}': the array index must be an integer from 0 to {}",
                        crate::table::MAX_ARRAY - 1
                    )),
                },
                _ => Err(format!(
                    "converter '{name}' expects an array index and a table name"
                )),
            });
        }
        let op = match name {
            "in_table" => Op::Tracked,
            "table_trackers" => Op::Trackers,
            "table_server_id" => Op::Get(Data::ServerId),
            "table_gpt0" => Op::Get(Data::Gpt0),
            "table_gpc0" => Op::Get(Data::Gpc0),
            "table_gpc1" => Op::Get(Data::Gpc1),
            // HAProxy's table_ converters name the counter itself
            // (`table_gpc0`, not `table_get_gpc0`).
            _ if name.starts_with("table_get_") => return None,
            _ => match op_of(name.strip_prefix("table_")?, Who::Src)? {
                o @ (Op::Get(_) | Op::KBytes(_)) => o,
                _ => return None,
            },
        };
        Some(match args {
            [t] if !t.trim().is_empty() => {
                let table = t.trim().to_string();
                REFS.with(|r| r.borrow_mut().push(Some(table.clone())));
                Ok(StkConv { op, idx: 0, table })
            }
            _ => Err(format!("converter '{name}' expects a table name")),
        })
    }

    pub fn out_type(&self) -> Type {
        match self.op {
            Op::Tracked => Type::Bool,
            _ => Type::Int,
        }
    }

    /// Looks the value (its bytes in `s` when a string) up.
    pub fn apply(&self, v: Val, ctx: &Ctx<'_>, s: &mut crate::sample::Scratch) -> Option<Val> {
        let stk = ctx.stk?;
        let t = stk.tables().get(&self.table)?;
        let k = sample_key(t, v, s)?;
        let e = t.lookup(&k);
        if self.op == Op::Tracked {
            return Some(Val::Bool(e.is_some()));
        }
        let Some(e) = e else {
            return Some(Val::Int(0));
        };
        let now = stk.now();
        Some(Val::Int(match self.op {
            Op::Get(d) => t.get_at(e, d, self.idx, now)? as i64,
            Op::KBytes(d) => t.get(e, d, now)? as i64 >> 10,
            Op::Trackers => t.refs(e)? as i64,
            _ => return None,
        }))
    }
}

/// The key of a sample for table `t`, cast to the table's type as HAProxy
/// casts it (an address for `ip`/`ipv6`, an integer, a string or binary
/// block); None when it does not convert or fit (an IPv6 address in an
/// `ip` table).
pub fn sample_key(t: &Table, v: Val, s: &mut Scratch) -> Option<StKey> {
    match t.def().key {
        KeyType::Ip | KeyType::Ipv6 => match cast(v, Type::Ip, s)? {
            Val::Ip(a) => t.key_ip(a),
            _ => None,
        },
        KeyType::Integer => match cast(v, Type::Int, s)? {
            Val::Int(i) => t.key_int(i as u32),
            _ => None,
        },
        KeyType::String(_) => {
            cast(v, Type::Str, s)?;
            t.key_bytes(&s.cur)
        }
        KeyType::Binary(_) => {
            cast(v, Type::Bin, s)?;
            t.key_bytes(&s.cur)
        }
    }
}
