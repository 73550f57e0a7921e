//! The CLI's `show peers [-] [SECTION]`, in HAProxy 2.6's layout.
//!
//! The peers tasks live on thread 0 and own their state; after each run a
//! peer's task publishes what `show peers` prints into a process-wide
//! snapshot ([`publish`]), which the CLI formats on its own thread
//! ([`show`]). Times are kept as scheduler ticks and printed relative to
//! the CLI's `now`, as HAProxy prints them (`4s`, `<PAST>`, `<NEVER>`).
//!
//! What differs from HAProxy: objects are named by their index (`0x1`)
//! where HAProxy prints an address; HAProxy's internal state words
//! (`flags=`, `appctx:`, `st0=`, `st1=`, `task_calls=`) are not printed,
//! ebb has no such state; there is no dictionary cache (ebb stores no
//! `server_key`), so `show peers dict` prints the same as `show peers`.

use std::cell::Cell;
use std::fmt::Write as _;
use std::net::SocketAddr;
use std::sync::Mutex;
use std::time::SystemTime;

/// A peer's counters, kept across its connections (HAProxy's names).
#[derive(Default)]
pub(super) struct PeerStats {
    /// The last handshake status (`statuscode_str`): NONE, CONN, HSHK,
    /// ESTA, RETR, PROT, VERS, NAME, UNKN.
    pub status: Cell<&'static str>,
    /// When the last handshake succeeded.
    pub hdshk: Cell<Option<u32>>,
    pub tx_hbt: Cell<u32>,
    pub rx_hbt: Cell<u32>,
    pub no_hbt: Cell<u32>,
    pub new_conn: Cell<u32>,
    pub proto_err: Cell<u32>,
    pub coll: Cell<u32>,
}

impl PeerStats {
    pub fn bump(c: &Cell<u32>) {
        c.set(c.get().wrapping_add(1));
    }
}

/// HAProxy's word for a handshake status code.
pub(super) fn status_word(code: u32) -> &'static str {
    match code {
        200 => "ESTA",
        300 => "RETR",
        501 => "PROT",
        502 => "VERS",
        503 => "NAME",
        504 => "UNKN",
        _ => "NONE",
    }
}

/// One shared table as a peer connection sees it.
#[derive(Clone, Debug, Default)]
pub(super) struct TableShow {
    pub local_id: usize,
    pub remote_id: u64,
    pub remote_data: u64,
    pub last_acked: u32,
    pub last_pushed: u32,
    pub last_get: u32,
    pub name: String,
    /// The table's last local update.
    pub update: u32,
    pub refcnt: usize,
}

/// One peer.
#[derive(Clone, Debug)]
pub(super) struct PeerShow {
    pub name: String,
    pub local: bool,
    /// A connection exists.
    pub active: bool,
    pub addr: SocketAddr,
    pub status: &'static str,
    pub hdshk: Option<u32>,
    pub reconnect: Option<u32>,
    pub heartbeat: Option<u32>,
    pub confirm: u32,
    pub counters: [u32; 6],
    /// The connection's source and destination, when connected.
    pub conn: Option<(Option<SocketAddr>, Option<SocketAddr>)>,
    /// The peer's table the last updates received were for, and our
    /// table the last ones sent were for: indexes in `tables`.
    pub remote_table: Option<usize>,
    pub last_local_table: Option<usize>,
    pub tables: Vec<TableShow>,
}

/// One section.
#[derive(Clone, Debug)]
pub(super) struct SectionShow {
    pub name: String,
    pub since: SystemTime,
    pub resync_timeout: Option<u32>,
    pub peers: Vec<PeerShow>,
}

static SNAPSHOT: Mutex<Vec<SectionShow>> = Mutex::new(Vec::new());

fn lock() -> std::sync::MutexGuard<'static, Vec<SectionShow>> {
    SNAPSHOT.lock().unwrap_or_else(|p| p.into_inner())
}

/// Declares a section (at start: every peer with its address).
pub(super) fn declare(s: SectionShow) {
    let mut g = lock();
    g.retain(|x| x.name != s.name);
    g.push(s);
}

/// Replaces peer `idx` of section `section`, and the section's resync
/// timer.
pub(super) fn publish(section: &str, resync: Option<u32>, idx: usize, p: PeerShow) {
    let mut g = lock();
    if let Some(s) = g.iter_mut().find(|s| s.name == section) {
        s.resync_timeout = resync;
        if let Some(slot) = s.peers.get_mut(idx) {
            *slot = p;
        }
    }
}

/// HAProxy's `human_time` of `ms`: at most two non-zero units among d, h,
/// m, s (`1m5s`, `1h5s`), `0s` for nothing.
fn human(ms: u32) -> String {
    let t = ms / 1000;
    let mut out = String::new();
    let mut cnt = 2;
    if t >= 86_400 {
        let _ = write!(out, "{}d", t / 86_400);
        cnt -= 1;
    }
    for (unit, sz, within) in [("h", 3600, 86_400), ("m", 60, 3600)] {
        if cnt > 0 && t % within / sz != 0 {
            let _ = write!(out, "{}{unit}", t % within / sz);
            cnt -= 1;
        }
    }
    if (cnt > 0 && t % 60 != 0) || t == 0 {
        let _ = write!(out, "{}s", t % 60);
    }
    out
}

/// A timer date relative to `now`: `<NEVER>`, `<PAST>` or what is left.
fn until(t: Option<u32>, now: u32) -> String {
    match t {
        None => "<NEVER>".into(),
        Some(t) if (t.wrapping_sub(now) as i32) <= 0 => "<PAST>".into(),
        Some(t) => human(t.wrapping_sub(now)),
    }
}

fn date(t: SystemTime) -> String {
    let mut b = Vec::new();
    crate::log::fmt_date(t, &mut b);
    // fmt_date gives dd/Mon/yyyy:hh:mm:ss.mmm; HAProxy prints seconds.
    let s = String::from_utf8_lossy(&b).into_owned();
    s.split('.').next().unwrap_or("").to_string()
}

/// `show peers [dict|-] [SECTION]` at `now`.
pub fn show(args: &[&str], now: u32) -> Result<String, String> {
    let args = match args {
        ["dict" | "-", rest @ ..] => rest,
        r => r,
    };
    let g = lock();
    let want = args.first().copied();
    if let Some(w) = want {
        if !g.iter().any(|s| s.name == w) {
            return Err("No such peers".into());
        }
    }
    let mut out = String::new();
    for (si, s) in g.iter().enumerate() {
        if want.is_some_and(|w| w != s.name) {
            continue;
        }
        if !out.is_empty() {
            out.push('\n');
        }
        let _ = writeln!(
            out,
            "0x{:x}: [{}] id={} disabled=0 resync_timeout={}",
            si + 1,
            date(s.since),
            s.name,
            until(s.resync_timeout, now)
        );
        // HAProxy lists the peers from the last declared.
        for (pi, p) in s.peers.iter().enumerate().rev() {
            peer(&mut out, pi, p, now);
        }
    }
    Ok(out)
}

fn peer(out: &mut String, pi: usize, p: &PeerShow, now: u32) {
    let _ = writeln!(
        out,
        "  0x{:x}: id={}({},{}) addr={} last_status={} last_hdshk={}",
        pi + 1,
        p.name,
        if p.local { "local" } else { "remote" },
        if p.active { "active" } else { "inactive" },
        p.addr,
        p.status,
        p.hdshk
            .map_or("<NEVER>".into(), |t| human(now.wrapping_sub(t)))
    );
    let [tx, rx, no, nc, pe, co] = p.counters;
    let _ = write!(
        out,
        "        reconnect={} heartbeat={} confirm={} tx_hbt={tx} rx_hbt={rx} no_hbt={no} new_conn={nc} proto_err={pe} coll={co}",
        until(p.reconnect, now),
        until(p.heartbeat, now),
        p.confirm
    );
    if let Some((src, dst)) = p.conn {
        let _ = write!(out, "\n        xprt=RAW");
        if let Some(a) = src {
            let _ = write!(out, " src={a}");
        }
        if let Some(a) = dst {
            let _ = write!(out, " addr={a}");
        }
    }
    let table_line = |out: &mut String, what: &str, t: &TableShow| {
        let _ = write!(
            out,
            "\n        {what}:0x{:x} id={} local_id={} remote_id={}",
            t.local_id, t.name, t.local_id, t.remote_id
        );
    };
    if let Some(t) = p.remote_table.and_then(|i| p.tables.get(i)) {
        table_line(out, "remote_table", t);
    }
    if let Some(t) = p.last_local_table.and_then(|i| p.tables.get(i)) {
        table_line(out, "last_local_table", t);
    }
    if !p.tables.is_empty() {
        out.push_str("\n        shared tables:");
        for t in &p.tables {
            let _ = write!(
                out,
                "\n          0x{:x} local_id={} remote_id={} remote_data=0x{:x}\n              last_acked={} last_pushed={} last_get={} teaching_origin=0 update=0\n              table:0x{:x} id={} update={} localupdate={} commitupdate={} refcnt={}",
                t.local_id,
                t.local_id,
                t.remote_id,
                t.remote_data,
                t.last_acked,
                t.last_pushed,
                t.last_get,
                t.local_id,
                t.name,
                t.update,
                t.update,
                t.update,
                t.refcnt
            );
        }
        out.push_str("\n        Dictionary cache not dumped (use \"show peers dict\")");
    }
    out.push('\n');
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn human_times_as_haproxy() {
        assert_eq!(human(0), "0s");
        assert_eq!(human(4_200), "4s");
        assert_eq!(human(65_000), "1m5s");
        assert_eq!(human(3_600_000 + 5_000), "1h5s");
        assert_eq!(human(90_061_000), "1d1h");
        assert_eq!(until(None, 5), "<NEVER>");
        assert_eq!(until(Some(4), 5), "<PAST>");
        assert_eq!(until(Some(2_005), 5), "2s");
    }
}
