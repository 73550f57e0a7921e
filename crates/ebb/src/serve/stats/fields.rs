//! The rows written out: HAProxy 2.6's field list, and the CSV (`show stat`,
//! `;csv`), typed (`show stat typed`) and JSON (`show stat json`) outputs.

use super::*;

/// HAProxy 2.6's `show stat` fields in order: name, typed-output tags
/// (origin, nature, scope) and type. Position = index; the CSV adds a `-`
/// column between the base fields and the modules' (from `ssl_sess`).
pub const STAT_FIELDS: &[(&str, &str, &str)] = &[
    ("pxname", "KNS", "str"),
    ("svname", "KNS", "str"),
    ("qcur", "MGP", "u32"),
    ("qmax", "MMP", "u32"),
    ("scur", "MGP", "u32"),
    ("smax", "MMP", "u32"),
    ("slim", "CLP", "u32"),
    ("stot", "MCP", "u64"),
    ("bin", "MCP", "u64"),
    ("bout", "MCP", "u64"),
    ("dreq", "MCP", "u64"),
    ("dresp", "MCP", "u64"),
    ("ereq", "MCP", "u64"),
    ("econ", "MCP", "u64"),
    ("eresp", "MCP", "u64"),
    ("wretr", "MCP", "u64"),
    ("wredis", "MCP", "u64"),
    ("status", "SGP", "str"),
    ("weight", "MaS", "u32"),
    ("act", "SGP", "u32"),
    ("bck", "SGP", "u32"),
    ("chkfail", "MCP", "u64"),
    ("chkdown", "MCP", "u64"),
    ("lastchg", "MAP", "u32"),
    ("downtime", "MCP", "u32"),
    ("qlimit", "CLP", "u32"),
    ("pid", "KGP", "u32"),
    ("iid", "KGS", "u32"),
    ("sid", "KGS", "u32"),
    ("throttle", "MaP", "u32"),
    ("lbtot", "MCP", "u64"),
    ("tracked", "KNS", "str"),
    ("type", "CGS", "u32"),
    ("rate", "MRP", "u32"),
    ("rate_lim", "CLP", "u32"),
    ("rate_max", "MMP", "u32"),
    ("check_status", "MOP", "str"),
    ("check_code", "MOP", "u32"),
    ("check_duration", "MDP", "u64"),
    ("hrsp_1xx", "MCP", "u64"),
    ("hrsp_2xx", "MCP", "u64"),
    ("hrsp_3xx", "MCP", "u64"),
    ("hrsp_4xx", "MCP", "u64"),
    ("hrsp_5xx", "MCP", "u64"),
    ("hrsp_other", "MCP", "u64"),
    ("hanafail", "MCP", "u64"),
    ("req_rate", "MRP", "u32"),
    ("req_rate_max", "MMP", "u32"),
    ("req_tot", "MCP", "u64"),
    ("cli_abrt", "MCP", "u64"),
    ("srv_abrt", "MCP", "u64"),
    ("comp_in", "MCP", "u64"),
    ("comp_out", "MCP", "u64"),
    ("comp_byp", "MCP", "u64"),
    ("comp_rsp", "MCP", "u64"),
    ("lastsess", "MAP", "s32"),
    ("last_chk", "MOP", "str"),
    ("last_agt", "MOP", "str"),
    ("qtime", "MaP", "u32"),
    ("ctime", "MaP", "u32"),
    ("rtime", "MaP", "u32"),
    ("ttime", "MaP", "u32"),
    ("agent_status", "MOP", "str"),
    ("agent_code", "MOP", "u32"),
    ("agent_duration", "MDP", "u64"),
    ("check_desc", "MOP", "str"),
    ("agent_desc", "MOP", "str"),
    ("check_rise", "CGS", "u32"),
    ("check_fall", "CGS", "u32"),
    ("check_health", "CGS", "u32"),
    ("agent_rise", "MaS", "u32"),
    ("agent_fall", "MaS", "u32"),
    ("agent_health", "SGS", "u32"),
    ("addr", "CGS", "str"),
    ("cookie", "CGS", "str"),
    ("mode", "CGS", "str"),
    ("algo", "CGS", "str"),
    ("conn_rate", "MRP", "u32"),
    ("conn_rate_max", "MMP", "u32"),
    ("conn_tot", "MCP", "u64"),
    ("intercepted", "MCP", "u64"),
    ("dcon", "MCP", "u64"),
    ("dses", "MCP", "u64"),
    ("wrew", "MCP", "u64"),
    ("connect", "MCP", "u64"),
    ("reuse", "MCP", "u64"),
    ("cache_lookups", "MCP", "u64"),
    ("cache_hits", "MCP", "u64"),
    ("srv_icur", "MGP", "u32"),
    ("src_ilim", "CLP", "u32"),
    ("qtime_max", "MMP", "u32"),
    ("ctime_max", "MMP", "u32"),
    ("rtime_max", "MMP", "u32"),
    ("ttime_max", "MMP", "u32"),
    ("eint", "MCP", "u64"),
    ("idle_conn_cur", "MGP", "u32"),
    ("safe_conn_cur", "MGP", "u32"),
    ("used_conn_cur", "MGP", "u32"),
    ("need_conn_est", "MGP", "u32"),
    ("uweight", "MaS", "u32"),
    ("agg_server_status", "MGP", "u32"),
    ("agg_server_check_status", "MGP", "u32"),
    ("agg_check_status", "MGP", "u32"),
    // The statistics modules' fields (HAProxy's ssl, h2 and h1 modules).
    ("ssl_sess", "MCP", "u64"),
    ("ssl_reused_sess", "MCP", "u64"),
    ("ssl_failed_handshake", "MCP", "u64"),
    ("h2_headers_rcvd", "MCP", "u64"),
    ("h2_data_rcvd", "MCP", "u64"),
    ("h2_settings_rcvd", "MCP", "u64"),
    ("h2_rst_stream_rcvd", "MCP", "u64"),
    ("h2_goaway_rcvd", "MCP", "u64"),
    ("h2_detected_conn_protocol_errors", "MCP", "u64"),
    ("h2_detected_strm_protocol_errors", "MCP", "u64"),
    ("h2_rst_stream_resp", "MCP", "u64"),
    ("h2_goaway_resp", "MCP", "u64"),
    ("h2_open_connections", "MGP", "u64"),
    ("h2_backend_open_streams", "MGP", "u64"),
    ("h2_total_connections", "MCP", "u64"),
    ("h2_backend_total_streams", "MCP", "u64"),
    ("h1_open_connections", "MGP", "u64"),
    ("h1_open_streams", "MGP", "u64"),
    ("h1_total_connections", "MCP", "u64"),
    ("h1_total_streams", "MCP", "u64"),
    ("h1_bytes_in", "MCP", "u64"),
    ("h1_bytes_out", "MCP", "u64"),
    ("h1_spliced_bytes_in", "MCP", "u64"),
    ("h1_spliced_bytes_out", "MCP", "u64"),
];

/// Fields before the modules' (the CSV's `-` column sits there).
const BASE_FIELDS: usize = 103;

/// The CSV header's names, `-` included.
pub fn csv_columns() -> Vec<&'static str> {
    let mut v: Vec<&str> = STAT_FIELDS[..BASE_FIELDS].iter().map(|f| f.0).collect();
    v.push("-");
    v.extend(STAT_FIELDS[BASE_FIELDS..].iter().map(|f| f.0));
    v
}

pub(super) fn opt(v: Option<u64>) -> String {
    v.map(|v| v.to_string()).unwrap_or_default()
}

/// Keeps a CSV field on one field: commas and line breaks become spaces.
fn csv_field(s: &str) -> String {
    s.replace([',', '\n', '\r'], " ")
}

/// One field's value: `None` prints empty (no such concept in ebb, or
/// not for this kind of row, as HAProxy leaves it empty).
#[derive(Clone, Debug, PartialEq)]
pub enum Val {
    U(u64),
    /// A signed value (`lastsess`: -1 when there was no session).
    I(i64),
    Str(String),
}

impl std::fmt::Display for Val {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Val::U(v) => write!(f, "{v}"),
            Val::I(v) => write!(f, "{v}"),
            Val::Str(v) => f.write_str(v),
        }
    }
}

/// Every field of a row, by position in [`STAT_FIELDS`].
pub fn values(r: &Row) -> Vec<Option<Val>> {
    let mut v: Vec<Option<Val>> = vec![None; STAT_FIELDS.len()];
    let fe = r.kind == Kind::Frontend;
    let be = r.kind == Kind::Backend;
    let sv = r.kind == Kind::Server;
    let u = |x: u64| Some(Val::U(x));
    let st = |x: &str| Some(Val::Str(x.to_string()));
    v[0] = st(&r.pxname);
    v[1] = st(&r.svname);
    if r.kind == Kind::Listener {
        // What ebb counts per listener; the other counters of HAProxy's
        // listener rows (bytes, denials, errors) stay empty.
        v[4] = u(r.scur);
        v[5] = r.smax.map(Val::U);
        v[6] = r.slim.map(Val::U);
        v[7] = u(r.stot);
        v[17] = st(&r.status);
        v[26] = u(1);
        v[27] = u(r.iid as u64);
        v[28] = u(r.sid as u64);
        v[32] = u(3);
        v[75] = st(r.mode);
        return v;
    }
    if !fe {
        v[2] = u(r.qcur);
        v[3] = r.qmax.map(Val::U);
    }
    v[4] = u(r.scur);
    v[5] = r.smax.map(Val::U);
    v[6] = r.slim.map(Val::U);
    v[7] = u(r.stot);
    v[8] = u(r.bin);
    v[9] = u(r.bout);
    if !sv {
        v[10] = u(r.dreq);
    }
    v[11] = u(r.dresp);
    if fe {
        v[12] = u(r.ereq);
    } else {
        v[13] = u(r.econ);
        v[14] = u(r.eresp);
        v[15] = u(r.wretr);
        v[16] = u(r.wredis);
    }
    v[17] = st(&r.status);
    v[18] = r.weight.map(Val::U);
    v[19] = r.act.map(Val::U);
    v[20] = r.bck.map(Val::U);
    v[21] = r.chkfail.map(Val::U);
    v[45] = r.hanafail.map(Val::U);
    v[22] = r.chkdown.map(Val::U);
    v[23] = r.lastchg.map(Val::U);
    v[24] = r.downtime.map(Val::U);
    v[25] = r.qlimit.map(Val::U);
    v[26] = u(1);
    v[27] = u(r.iid as u64);
    v[28] = u(r.sid as u64);
    v[30] = r.lbtot.map(Val::U);
    v[31] = r.tracked.as_deref().and_then(st);
    v[32] = u(u64::from(r.kind.code()));
    v[33] = u(r.rate);
    if fe {
        v[34] = u(r.rate_lim);
    }
    v[35] = u(r.rate_max);
    if !r.check_status.is_empty() || r.check_code.is_some() {
        v[36] = st(&r.check_status);
    }
    v[37] = r.check_code.map(Val::U);
    v[38] = r.check_duration.map(Val::U);
    // HTTP response classes: frontends and backends always; servers of
    // an http backend (HAProxy's).
    if !sv || r.mode == "http" {
        for k in 0..6 {
            v[39 + k] = u(r.hrsp[k]);
        }
    }
    if fe {
        v[46] = u(r.req_rate);
        v[47] = u(r.req_rate_max);
        // Every accepted connection is a session in ebb: HAProxy's
        // connection columns are the session ones.
        v[77] = u(r.rate);
        v[78] = u(r.rate_max);
        v[79] = u(r.stot);
    }
    // (A server's: of an http backend only, as its `hrsp_*`.)
    if !sv || r.mode == "http" {
        v[48] = r.req_tot.map(Val::U);
    }
    if be || sv {
        v[84] = u(r.connect);
        v[85] = u(r.reuse);
        // HAProxy's -1: no session yet.
        v[55] = Some(r.lastsess.map_or(Val::I(-1), |a| Val::I(a as i64)));
    }
    if !r.last_chk.is_empty() {
        v[56] = st(&r.last_chk);
    }
    if r.agent_rise.is_some() {
        v[57] = st(&r.last_agt);
        v[62] = st(&r.agent_status);
        v[63] = r.agent_code.map(Val::U);
        v[64] = r.agent_duration.map(Val::U);
        v[66] = st(&r.agent_desc);
        v[70] = r.agent_rise.map(Val::U);
        v[71] = r.agent_fall.map(Val::U);
        v[72] = r.agent_health.map(Val::U);
    }
    if !r.check_desc.is_empty() {
        v[65] = st(&r.check_desc);
    }
    v[67] = r.check_rise.map(Val::U);
    v[68] = r.check_fall.map(Val::U);
    v[69] = r.check_health.map(Val::U);
    if !r.addr.is_empty() {
        v[73] = st(&r.addr);
    }
    if !r.cookie.is_empty() {
        v[74] = st(&r.cookie);
    }
    v[75] = st(r.mode);
    if !r.algo.is_empty() {
        v[76] = st(&r.algo);
    }
    if sv || be {
        v[99] = r.uweight.map(Val::U);
    }
    if let Some(t) = &r.times {
        for k in 0..4 {
            // qtime..ttime, qtime_max..ttime_max.
            v[58 + k] = u(t.avg[k]);
            v[90 + k] = u(t.max[k]);
        }
    }
    if let Some(comp) = r.comp {
        // comp_in, comp_out, comp_byp, comp_rsp.
        for (k, n) in comp.into_iter().enumerate() {
            v[51 + k] = u(n);
        }
    }
    v[80] = r.intercepted.map(Val::U);
    if let Some((conn, sess)) = r.denied {
        v[81] = u(conn);
        v[82] = u(sess);
    }
    if let Some([wrew, eint, lookups, hits]) = r.rules {
        v[83] = u(wrew);
        v[94] = u(eint);
        // Caches are a frontend's or a backend's.
        if !sv {
            v[86] = u(lookups);
            v[87] = u(hits);
        }
    }
    v[3] = r.qmax.map(Val::U);
    if let Some((cli, srv)) = r.aborts {
        v[49] = u(cli);
        v[50] = u(srv);
    }
    if sv {
        v[29] = r.throttle.map(Val::U);
        v[88] = r.icur.map(Val::U);
        v[89] = r.ilim.map(Val::U);
        if let Some(c) = r.conns {
            v[95] = Some(Val::U(u64::from(c.unsafe_nb)));
            v[96] = Some(Val::U(u64::from(c.safe_nb)));
            v[97] = Some(Val::U(u64::from(c.used_cur)));
            v[98] = Some(Val::U(u64::from(c.need_est)));
        }
    }
    // `h2_open_connections` is the 13th field of the modules' (after the
    // ssl module's three and nine h2 frame counters).
    for (k, x) in r.h2.iter().enumerate() {
        v[BASE_FIELDS + 12 + k] = x.map(Val::U);
    }
    v
}

/// The CSV of `show stat` and `;csv`.
pub fn csv(rows: &[Row]) -> String {
    let mut s = String::from("# ");
    s.push_str(&csv_columns().join(","));
    s.push_str(",\n");
    for r in rows {
        let vals = values(r);
        for (i, x) in vals.iter().enumerate() {
            if i == BASE_FIELDS {
                s.push_str("-,");
            }
            if let Some(x) = x {
                s.push_str(&csv_field(&x.to_string()));
            }
            s.push(',');
        }
        s.push('\n');
    }
    s
}

fn obj_letter(k: Kind) -> char {
    match k {
        Kind::Frontend => 'F',
        Kind::Backend => 'B',
        Kind::Server => 'S',
        Kind::Listener => 'L',
    }
}

/// `show stat typed`: one line per non-empty field,
/// `F|B|S.iid.sid.pos.name.1:tags:type:value`.
pub fn typed(rows: &[Row]) -> String {
    let mut s = String::new();
    for r in rows {
        for (i, x) in values(r).into_iter().enumerate() {
            let Some(x) = x else { continue };
            let (name, tags, ty) = STAT_FIELDS[i];
            let _ = writeln!(
                s,
                "{}.{}.{}.{i}.{name}.1:{tags}:{ty}:{}",
                obj_letter(r.kind),
                r.iid,
                r.sid,
                x.to_string().replace('\n', " ")
            );
        }
        s.push('\n');
    }
    s
}

/// A JSON string literal.
pub fn json_str(v: &str) -> String {
    let mut o = String::with_capacity(v.len() + 2);
    o.push('"');
    for c in v.chars() {
        match c {
            '"' => o.push_str("\\\""),
            '\\' => o.push_str("\\\\"),
            c if (c as u32) < 0x20 => {
                let _ = write!(o, "\\u{:04x}", c as u32);
            }
            c => o.push(c),
        }
    }
    o.push('"');
    o
}

/// The long names of the typed tags, for JSON.
pub fn json_tags(tags: &str) -> String {
    let b = tags.as_bytes();
    let origin = match b.first() {
        Some(b'M') => "Metric",
        Some(b'S') => "Status",
        Some(b'K') => "Key",
        Some(b'C') => "Config",
        Some(b'P') => "Product",
        _ => "Unknown",
    };
    let nature = match b.get(1) {
        Some(b'A') => "Age",
        Some(b'a') => "Avg",
        Some(b'C') => "Counter",
        Some(b'D') => "Duration",
        Some(b'G') => "Gauge",
        Some(b'L') => "Limit",
        Some(b'M') => "Max",
        Some(b'N') => "Name",
        Some(b'O') => "Output",
        Some(b'R') => "Rate",
        Some(b'T') => "Time",
        _ => "Unknown",
    };
    let scope = match b.get(2) {
        Some(b'P') => "Process",
        Some(b'S') => "Service",
        Some(b's') => "System",
        Some(b'C') => "Cluster",
        _ => "Unknown",
    };
    format!("{{\"origin\":\"{origin}\",\"nature\":\"{nature}\",\"scope\":\"{scope}\"}}")
}

/// A typed value as JSON (`{"type":..,"value":..}`).
pub fn json_val(ty: &str, x: &Val) -> String {
    match x {
        Val::Str(v) => format!("{{\"type\":\"str\",\"value\":{}}}", json_str(v)),
        other => format!("{{\"type\":\"{ty}\",\"value\":{other}}}"),
    }
}

/// `show stat json`: an array of rows, each an array of field objects.
pub fn json(rows: &[Row]) -> String {
    let mut out = Vec::new();
    for r in rows {
        let obj = match r.kind {
            Kind::Frontend => "Frontend",
            Kind::Backend => "Backend",
            Kind::Server => "Server",
            Kind::Listener => "Listener",
        };
        let mut fields = Vec::new();
        for (i, x) in values(r).into_iter().enumerate() {
            let Some(x) = x else { continue };
            let (name, tags, ty) = STAT_FIELDS[i];
            fields.push(format!(
                "{{\"objType\":\"{obj}\",\"proxyId\":{},\"id\":{},\"field\":{{\"pos\":{i},\"name\":\"{name}\"}},\"processNum\":1,\"tags\":{},\"value\":{}}}",
                r.iid,
                r.sid,
                json_tags(tags),
                json_val(ty, &x)
            ));
        }
        out.push(format!("[{}]", fields.join(",")));
    }
    format!("[{}]\n", out.join(","))
}
