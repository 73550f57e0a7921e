//! `show info`'s values (HAProxy 2.6's fields), for the CLI and the
//! Prometheus exporter's `haproxy_process_*` metrics.

use std::sync::atomic::Ordering;
use std::time::SystemTime;

use crate::registry::Process;

/// Seconds since `start`, and as HAProxy prints an uptime (`0d 0h00m00s`).
pub(crate) fn uptime(start: SystemTime) -> (u64, String) {
    let s = start.elapsed().map(|d| d.as_secs()).unwrap_or(0);
    (
        s,
        format!(
            "{}d {}h{:02}m{:02}s",
            s / 86400,
            (s / 3600) % 24,
            (s / 60) % 60,
            s % 60
        ),
    )
}

/// Every `show info` value ebb has, by field name; the fields it has no
/// such concept for (pools, pipes, SSL rates, peers, compression rates...)
/// are absent and print empty.
pub(crate) fn info_values(p: &Process) -> Vec<(&'static str, String)> {
    let c = p.live.compiled();
    let (up_s, up) = uptime(p.start);
    let req: u64 = c.frontends.iter().map(|f| f.http.requests()).sum();
    let out: u64 = c.frontends.iter().map(|f| f.http.bytes_out()).sum();
    let spliced: u64 = c
        .frontends
        .iter()
        .map(|f| f.http.spliced_out.load(Ordering::Relaxed))
        .sum();
    let act = p.handle.activity();
    let n = act.len().max(1) as u64;
    let idle = 100u64.saturating_sub(act.iter().map(|a| a.cpu_use_pct()).sum::<u64>() / n);
    let maxconn = if p.shared.maxconn == u32::MAX {
        0
    } else {
        p.shared.maxconn
    };
    let cur = p.shared.actconn.load(Ordering::Relaxed);
    let cum = p.sessions.epoch().saturating_sub(1);
    let (conn_rate, conn_max) = super::stats::sampled_rate("info/conns", cum);
    let (out_rate, _) = super::stats::sampled_rate("info/bytes_out", out);
    let ulimit = crate::sys::raise_nofile(0).unwrap_or(0);
    let start = p
        .start
        .duration_since(SystemTime::UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0);
    let version = env!("CARGO_PKG_VERSION");
    let ssl = crate::transport::ssl_conns();
    let mut v = vec![
        ("Name", "ebb".into()),
        ("Version", version.into()),
        ("Nbthread", p.nbthread.to_string()),
        ("Nbproc", "1".into()),
        ("Process_num", "1".into()),
        ("Pid", p.pid.to_string()),
        ("Uptime", up),
        ("Uptime_sec", up_s.to_string()),
        ("Ulimit-n", ulimit.to_string()),
        ("Maxsock", ulimit.to_string()),
        ("Maxconn", maxconn.to_string()),
        ("Hard_maxconn", maxconn.to_string()),
        ("CurrConns", cur.to_string()),
        // Pipes: those tcp sessions splice through (`option splice-*`);
        // ebb keeps no pool of free ones and sets no `maxpipes` limit.
        ("Maxpipes", "0".into()),
        ("PipesUsed", crate::sys::pipes_used().to_string()),
        ("PipesFree", "0".into()),
        ("CumConns", cum.to_string()),
        ("CumReq", req.to_string()),
        ("MaxSslConns", ssl.0.to_string()),
        ("CurrSslConns", ssl.1.to_string()),
        ("CumSslConns", ssl.2.to_string()),
        ("ConnRate", conn_rate.to_string()),
        ("ConnRateLimit", p.shared.conn_rate.limit.to_string()),
        ("MaxConnRate", conn_max.to_string()),
        ("SessRate", conn_rate.to_string()),
        ("SessRateLimit", p.shared.sess_rate.limit.to_string()),
        ("MaxSessRate", conn_max.to_string()),
        ("Idle_pct", idle.to_string()),
        ("node", c.node.clone()),
        ("Stopping", u8::from(crate::drain::stopping()).to_string()),
        ("Jobs", cur.to_string()),
        ("Unstoppable Jobs", "0".into()),
        ("DroppedLogs", crate::log::dropped().to_string()),
        ("TotalBytesOut", out.to_string()),
        ("TotalSplicdedBytesOut", spliced.to_string()),
        ("BytesOutRate", out_rate.to_string()),
        ("Build info", version.into()),
        ("Start_time_sec", start.to_string()),
        ("Tainted", "0".into()),
    ];
    // HAProxy's field exists only when the description is set.
    if let Some(d) = &c.description {
        v.push(("description", d.clone()));
    }
    v
}
