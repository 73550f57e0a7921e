//! `show info` and `show stat`: the process's and its proxies' figures.

use std::fmt::Write as _;

use sched::ProfilingMode;

use crate::backend::ADMIN_MAINT;
use crate::registry::Process;
use crate::serve::stats;

/// `show stat [{<iid>|<proxy>} <type> <sid>] [typed|json] [desc] [up|no-maint]`.
pub(super) fn show_stat(p: &Process, args: &[&str]) -> Result<String, String> {
    let c = p.live.compiled();
    let (mut typed, mut json, mut up, mut no_maint) = (false, false, false, false);
    let mut pos = Vec::new();
    for a in args {
        match *a {
            "typed" => typed = true,
            "json" => json = true,
            "desc" => return Err("'desc' (field descriptions) is not supported by ebb.".into()),
            "up" => up = true,
            "no-maint" => no_maint = true,
            o => pos.push(o),
        }
    }
    let mut f = stats::Filter::default();
    // As HAProxy: the filter needs all three; fewer are ignored.
    if let [px, ty, sid, ..] = pos.as_slice() {
        if *px != "-1" {
            let exists = c
                .frontends
                .iter()
                .map(|x| (&x.name, x.uuid))
                .chain(c.backends.iter().map(|x| (&x.name, x.uuid)))
                .any(|(n, id)| n == px || id.to_string() == *px);
            if !exists {
                return Err("No such proxy.".into());
            }
            f.proxy = Some(px.to_string());
        }
        let t: i64 = ty.parse().map_err(|_| {
            format!("'{ty}': the type is a number (1 frontends, 2 backends, 4 servers, -1 all).")
        })?;
        f.types = (t != -1).then_some((t & 7) as u32);
        let sid: i64 = sid
            .parse()
            .map_err(|_| format!("'{sid}': the server id is a number (-1 all)."))?;
        f.sid = (sid != -1).then_some(sid.max(0) as usize);
    }
    let rows: Vec<stats::Row> = stats::rows(&c, None)
        .into_iter()
        .filter(|r| f.keep(r))
        .filter(|r| {
            r.kind != stats::Kind::Server
                || !((up && !(r.status == "UP" || r.status == "no check"))
                    || (no_maint && r.admin == Some(ADMIN_MAINT)))
        })
        .collect();
    Ok(if json {
        stats::json(&rows)
    } else if typed {
        stats::typed(&rows)
    } else {
        stats::csv(&rows)
    })
}

/// HAProxy 2.6's `show info` fields in order, with typed tags and type.
const INFO_FIELDS: &[(&str, &str, &str)] = &[
    ("Name", "POS", "str"),
    ("Version", "POS", "str"),
    ("Release_date", "POS", "str"),
    ("Nbthread", "CGS", "u32"),
    ("Nbproc", "CGS", "u32"),
    ("Process_num", "KGP", "u32"),
    ("Pid", "SGP", "u32"),
    ("Uptime", "MDP", "str"),
    ("Uptime_sec", "MDP", "u32"),
    ("Memmax_MB", "CLP", "u32"),
    ("PoolAlloc_MB", "MGP", "u32"),
    ("PoolUsed_MB", "MGP", "u32"),
    ("PoolFailed", "MCP", "u32"),
    ("Ulimit-n", "CLP", "u32"),
    ("Maxsock", "CLP", "u32"),
    ("Maxconn", "CLP", "u32"),
    ("Hard_maxconn", "CLP", "u32"),
    ("CurrConns", "MGP", "u32"),
    ("CumConns", "MCP", "u32"),
    ("CumReq", "MCP", "u32"),
    ("MaxSslConns", "MMP", "u32"),
    ("CurrSslConns", "MGP", "u32"),
    ("CumSslConns", "MCP", "u32"),
    ("Maxpipes", "CLP", "u32"),
    ("PipesUsed", "MGP", "u32"),
    ("PipesFree", "MGP", "u32"),
    ("ConnRate", "MRP", "u32"),
    ("ConnRateLimit", "CLP", "u32"),
    ("MaxConnRate", "MMP", "u32"),
    ("SessRate", "MRP", "u32"),
    ("SessRateLimit", "CLP", "u32"),
    ("MaxSessRate", "MRP", "u32"),
    ("SslRate", "MRP", "u32"),
    ("SslRateLimit", "CLP", "u32"),
    ("MaxSslRate", "MMP", "u32"),
    ("SslFrontendKeyRate", "MGP", "u32"),
    ("SslFrontendMaxKeyRate", "MMP", "u32"),
    ("SslFrontendSessionReuse_pct", "MGP", "u32"),
    ("SslBackendKeyRate", "MRP", "u32"),
    ("SslBackendMaxKeyRate", "MMP", "u32"),
    ("SslCacheLookups", "MCP", "u32"),
    ("SslCacheMisses", "MCP", "u32"),
    ("CompressBpsIn", "MRP", "u32"),
    ("CompressBpsOut", "MRP", "u32"),
    ("CompressBpsRateLim", "CLP", "u32"),
    ("Tasks", "MGP", "u32"),
    ("Run_queue", "MGP", "u32"),
    ("Idle_pct", "MaP", "u32"),
    ("node", "COS", "str"),
    ("description", "COS", "str"),
    ("Stopping", "MGP", "u32"),
    ("Jobs", "MGP", "u32"),
    ("Unstoppable Jobs", "MGP", "u32"),
    ("Listeners", "MGP", "u32"),
    ("ActivePeers", "MGP", "u32"),
    ("ConnectedPeers", "MGP", "u32"),
    ("DroppedLogs", "MGP", "u32"),
    ("BusyPolling", "MGP", "u32"),
    ("FailedResolutions", "MGP", "u32"),
    ("TotalBytesOut", "MGP", "u64"),
    ("TotalSplicdedBytesOut", "MGP", "u64"),
    ("BytesOutRate", "MRP", "u64"),
    ("DebugCommandsIssued", "MGP", "u32"),
    ("CumRecvLogs", "MCP", "u32"),
    ("Build info", "POS", "str"),
    ("Memmax_bytes", "CLP", "u32"),
    ("PoolAlloc_bytes", "MGP", "u64"),
    ("PoolUsed_bytes", "MGP", "u64"),
    ("Start_time_sec", "MDP", "u32"),
    ("Tainted", "SGP", "str"),
];

/// `show info [typed|json]`: HAProxy's fields in its order, then ebb's own
/// (sessions, frontends, backends, profiling mode) in the plain form.
pub(super) fn show_info(p: &Process, form: &str) -> String {
    let vals = crate::serve::info::info_values(p);
    let get = |k: &str| vals.iter().find(|(n, _)| *n == k).map(|(_, v)| v.as_str());
    let mut s = String::new();
    match form {
        "typed" => {
            for (i, (name, tags, ty)) in INFO_FIELDS.iter().enumerate() {
                if let Some(v) = get(name) {
                    let _ = writeln!(s, "{i}.{name}.1:{tags}:{ty}:{v}");
                }
            }
        }
        "json" => {
            let mut items = Vec::new();
            for (i, (name, tags, ty)) in INFO_FIELDS.iter().enumerate() {
                if let Some(v) = get(name) {
                    let val = if *ty == "str" {
                        stats::Val::Str(v.to_string())
                    } else {
                        stats::Val::U(v.parse().unwrap_or(0))
                    };
                    items.push(format!(
                        "{{\"field\":{{\"pos\":{i},\"name\":{}}},\"processNum\":1,\"tags\":{},\"value\":{}}}",
                        stats::json_str(name),
                        stats::json_tags(tags),
                        stats::json_val(ty, &val)
                    ));
                }
            }
            let _ = writeln!(s, "[{}]", items.join(","));
        }
        _ => {
            for (name, _, _) in INFO_FIELDS {
                // HAProxy prints a description only when one is set.
                if *name == "description" && get(name).is_none() {
                    continue;
                }
                let _ = writeln!(s, "{name}: {}", get(name).unwrap_or(""));
            }
            let c = p.live.compiled();
            let _ = writeln!(s, "Sessions: {}", p.sessions.len());
            let _ = writeln!(s, "Frontends: {}", c.frontends.len());
            let _ = writeln!(s, "Backends: {}", c.backends.len());
            let mode = match p.handle.profiling_mode() {
                ProfilingMode::On => "on",
                ProfilingMode::Auto => "auto",
                ProfilingMode::Off => "off",
            };
            let _ = writeln!(s, "Profiling: {mode}");
        }
    }
    s
}
