//! The HTML page: the options after the stats URI, the page itself, the
//! Basic authentication, and the answers the connection code asks for.

use super::*;

// ---------------------------------------------------------------------------
// The HTML page
// ---------------------------------------------------------------------------

/// Options of one view of the page (from the text after the stats URI).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct PageOpts {
    pub csv: bool,
    pub norefresh: bool,
    /// `;up`: only servers that are UP.
    pub up_only: bool,
    /// `;no-maint`: hide servers in maintenance.
    pub no_maint: bool,
    /// `;typed`, `;json`: `show stat`'s typed and JSON outputs.
    pub typed: bool,
    pub json: bool,
    /// `;json-schema` (not served by ebb: answered 501).
    pub schema: bool,
}

/// The result codes of an admin action, carried by the redirect that
/// follows it (`;st=CODE`).
pub const ST_CODES: [&str; 8] = [
    "DENY", "DONE", "ERRP", "EXCD", "NONE", "PART", "UNKN", "IVAL",
];

/// What a request for the page asks: its options, the result code of a
/// previous action (`;st=`), the proxies to show (`scope=`).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct PageReq {
    pub o: PageOpts,
    pub st: Option<&'static str>,
    pub scope: Option<String>,
}

/// Whether `pat` starts at some position of `rest` from which at least
/// `room` bytes remain (HAProxy scans the text after the URI this way).
fn find_in(rest: &[u8], pat: &[u8], room: usize) -> Option<usize> {
    if rest.len() < room {
        return None;
    }
    (0..=rest.len() - room).find(|&i| rest[i..].starts_with(pat))
}

/// Reads the text after the stats URI as HAProxy does: each word
/// (`;up`, `;no-maint`, `;norefresh` when the page refreshes, `;csv`,
/// `;typed`, `;json`, `;json-schema`, `;st=CODE`, `scope=NAME`) is looked
/// for anywhere in it. A scope longer than 20 characters is cut; one with
/// a character other than letters, digits, `_`, `-`, `.` and `:` is
/// dropped.
pub fn parse_page(rest: &[u8], refresh: bool) -> PageReq {
    let has = |w: &[u8]| find_in(rest, w, w.len()).is_some();
    let mut r = PageReq::default();
    r.o.up_only = has(b";up");
    r.o.no_maint = has(b";no-maint");
    r.o.norefresh = refresh && has(b";norefresh");
    r.o.csv = has(b";csv");
    r.o.typed = has(b";typed");
    r.o.json = has(b";json");
    r.o.schema = has(b";json-schema");
    if let Some(i) = find_in(rest, b";st=", 8) {
        let code = &rest[i + 4..i + 8];
        r.st = Some(
            ST_CODES
                .iter()
                .copied()
                .find(|c| c.as_bytes() == code)
                .unwrap_or("UNKN"),
        );
    }
    if let Some(i) = find_in(rest, b"scope=", 8) {
        let v = &rest[i + 6..];
        let end = v
            .iter()
            .position(|c| matches!(c, b';' | b'&' | b' '))
            .unwrap_or(v.len());
        let v = &v[..end.min(20)];
        let ok = v
            .iter()
            .all(|c| c.is_ascii_alphanumeric() || b"_-.:".contains(c));
        if ok && !v.is_empty() {
            r.scope = Some(String::from_utf8_lossy(v).into_owned());
        }
    }
    r
}

/// Whether a proxy is shown under `scope` (a part of its name, compared
/// without case).
pub(super) fn in_scope(scope: Option<&str>, name: &str) -> bool {
    scope.is_none_or(|s| name.to_ascii_lowercase().contains(&s.to_ascii_lowercase()))
}

pub(super) fn esc(s: &str) -> String {
    let mut o = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '<' => o.push_str("&lt;"),
            '>' => o.push_str("&gt;"),
            '&' => o.push_str("&amp;"),
            '"' => o.push_str("&quot;"),
            '\'' => o.push_str("&#39;"),
            c => o.push(c),
        }
    }
    o
}

/// Bytes in short units (B, KiB, MiB, GiB).
fn bytes(n: u64) -> String {
    const K: f64 = 1024.0;
    let f = n as f64;
    if f < K {
        format!("{n} B")
    } else if f < K * K {
        format!("{:.1} KiB", f / K)
    } else if f < K * K * K {
        format!("{:.1} MiB", f / K / K)
    } else {
        format!("{:.2} GiB", f / K / K / K)
    }
}

/// What the page header says about the process.
pub struct PageInfo<'a> {
    pub pid: u32,
    pub nbthread: usize,
    pub uptime_s: u64,
    pub conns: u32,
    pub version: Option<&'a str>,
    pub refresh_s: Option<u64>,
    /// The page's own URI (with the current modifiers) for links.
    pub uri: &'a str,
    pub admin: bool,
    /// The result of an admin action just done, shown on top.
    pub notice: Option<&'a str>,
    /// `stats show-node`, `stats show-desc`: shown under the title;
    /// `stats show-legends`: each name's cell tells the mode, id and
    /// address.
    pub node: Option<&'a str>,
    pub desc: Option<&'a str>,
    pub legends: bool,
}

const CSS: &str = "body{font-family:system-ui,Arial,sans-serif;font-size:13px;margin:16px;color:#222}\
h1{font-size:20px;margin:0 0 4px}h2{font-size:15px;margin:18px 0 4px}\
table{border-collapse:collapse;margin-bottom:8px;min-width:60%}\
th,td{border:1px solid #bbb;padding:2px 6px;text-align:right;white-space:nowrap}\
th{background:#20466b;color:#fff;font-weight:600}\
td.n{text-align:left;font-weight:600}\
tr.fe td{background:#eef3f8}tr.be td{background:#dfe8f0;font-weight:600}\
tr.up td.st{background:#b8e6b0}tr.down td.st{background:#f5aaaa}\
tr.maint td.st{background:#b7c9e6}tr.drain td.st{background:#f6d78b}tr.nolb td.st{background:#f0b0f0}\
tr.nocheck td.st{background:#dfeedd}tr.going_down td.st{background:#f0f0a0}tr.going_up td.st{background:#ffd020}td.ck{text-align:left}\
.info{color:#555;margin-bottom:8px}.notice{background:#ffd;border:1px solid #cc9;padding:4px;margin:6px 0}\
.mods a{margin-right:10px}";

/// The HTML page.
pub fn html(rows: &[Row], info: &PageInfo<'_>, o: PageOpts) -> String {
    let mut s = String::with_capacity(16 * 1024);
    s.push_str(
        "<!DOCTYPE html>\n<html><head><meta charset=\"utf-8\">\n<title>ebb statistics</title>\n",
    );
    if let (Some(r), false) = (info.refresh_s, o.norefresh) {
        let _ = writeln!(s, "<meta http-equiv=\"refresh\" content=\"{r}\">");
    }
    let _ = writeln!(s, "<style>{CSS}</style></head><body>");
    match info.node {
        Some(n) => {
            let _ = writeln!(s, "<h1>ebb statistics on {}</h1>", esc(n));
        }
        None => s.push_str("<h1>ebb statistics</h1>\n"),
    }
    if let Some(d) = info.desc {
        let _ = writeln!(s, "<div class=\"desc\">{}</div>", esc(d));
    }
    s.push_str("<div class=\"info\">");
    if let Some(v) = info.version {
        let _ = write!(s, "version {} &middot; ", esc(v));
    }
    let _ = writeln!(
        s,
        "pid {} &middot; {} threads &middot; uptime {}s &middot; {} connections</div>",
        info.pid, info.nbthread, info.uptime_s, info.conns
    );
    if let Some(n) = info.notice {
        let _ = writeln!(s, "<div class=\"notice\">{}</div>", esc(n));
    }
    let base = esc(info.uri);
    let _ = writeln!(
        s,
        "<div class=\"mods\"><a href=\"{base};csv\">CSV export</a><a href=\"{base};norefresh\">no refresh</a><a href=\"{base};up\">hide DOWN servers</a><a href=\"{base};no-maint\">hide MAINT servers</a><a href=\"{base}\">all</a></div>"
    );
    let mut cur_px: Option<&str> = None;
    // The admin form of the backend whose table is open (its id).
    let mut form: Option<usize> = None;
    let close = |s: &mut String, form: &mut Option<usize>| {
        s.push_str("</table>\n");
        if let Some(id) = form.take() {
            let _ = writeln!(
                s,
                "<div class=\"admin\">Selected servers: <select name=\"action\">{}</select> <input type=\"hidden\" name=\"b\" value=\"#{id}\"><input type=\"submit\" value=\"Apply\"></div></form>",
                [
                    ("ready", "Set state to READY"),
                    ("drain", "Set state to DRAIN"),
                    ("maint", "Set state to MAINT"),
                    ("dhlth", "Health: disable checks"),
                    ("ehlth", "Health: enable checks"),
                    ("dagent", "Agent: disable checks"),
                    ("eagent", "Agent: enable checks"),
                    ("arunn", "Agent: force UP"),
                    ("adown", "Agent: force DOWN"),
                ]
                .iter()
                .map(|(v, t)| format!("<option value=\"{v}\">{t}</option>"))
                .collect::<String>()
            );
        }
    };
    // Each proxy's `description`, shown under its title (its rows may
    // start with servers, before the BACKEND row that carries it).
    let descs: std::collections::HashMap<&str, &str> = rows
        .iter()
        .filter_map(|r| Some((r.pxname.as_str(), r.desc.as_deref()?)))
        .collect();
    for r in rows {
        if r.kind == Kind::Server {
            let st = r.status.as_str();
            if o.up_only && !(st == "UP" || st.starts_with("UP ") || st == "no check") {
                continue;
            }
            if o.no_maint && r.admin == Some(ADMIN_MAINT) {
                continue;
            }
        }
        if cur_px != Some(r.pxname.as_str()) {
            if cur_px.is_some() {
                close(&mut s, &mut form);
            }
            cur_px = Some(&r.pxname);
            let what = if r.kind == Kind::Frontend {
                "frontend"
            } else {
                "backend"
            };
            let _ = writeln!(s, "<h2>{what} {}</h2>", esc(&r.pxname));
            if let Some(d) = descs.get(r.pxname.as_str()) {
                let _ = writeln!(s, "<p class=\"desc\">{}</p>", esc(d));
            }
            if info.admin && r.kind != Kind::Frontend {
                let _ = writeln!(s, "<form method=\"post\" action=\"{base}\">");
                form = Some(r.iid);
            }
            let _ = writeln!(s, "<table class=\"px\" id=\"px-{}\">", esc(&r.pxname));
            s.push_str("<tr><th>name</th><th>status</th><th>queue</th><th>sessions</th><th>limit</th><th>total</th><th>rate/s</th><th>req/s</th><th>requests</th><th>bytes in</th><th>bytes out</th><th>2xx</th><th>4xx</th><th>5xx</th><th>errors</th><th>weight</th><th>check</th>");
            if info.admin && r.kind != Kind::Frontend {
                s.push_str("<th>admin</th>");
            }
            s.push_str("</tr>\n");
        }
        let class = match (r.kind, r.status.as_str()) {
            (Kind::Frontend | Kind::Listener, _) => "fe up",
            (Kind::Backend, "UP") => "be up",
            (Kind::Backend, _) => "be down",
            (_, "UP") => "srv up",
            (_, st) if st.starts_with("UP ") => "srv up going_down",
            (_, st) if st.starts_with("DOWN ") && !st.starts_with("DOWN (") => "srv down going_up",
            (_, "no check") => "srv nocheck",
            (_, "MAINT") => "srv maint",
            (_, st) if st.starts_with("MAINT (via ") => "srv maint",
            (_, "DRAIN") => "srv drain",
            (_, "NOLB") => "srv nolb",
            (_, st) if st.starts_with("NOLB ") => "srv nolb going_down",
            _ => "srv down",
        };
        let legend = if info.legends {
            let mut t = format!("mode {}", r.mode);
            match r.kind {
                Kind::Server => {
                    let _ = write!(t, ", id {}", r.sid);
                    if !r.addr.is_empty() {
                        let _ = write!(t, ", address {}", r.addr);
                    }
                }
                _ => {
                    let _ = write!(t, ", id {}", r.iid);
                }
            }
            format!(" title=\"{}\"", esc(&t))
        } else {
            String::new()
        };
        let _ = write!(
            s,
            "<tr class=\"{class}\"><td class=\"n\"{legend}>{}</td><td class=\"st\">{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td class=\"ck\" title=\"{}\">{}</td>",
            esc(&r.svname),
            esc(&r.status),
            if r.kind == Kind::Frontend { String::new() } else { r.qcur.to_string() },
            r.scur,
            opt(r.slim),
            r.stot,
            r.rate,
            r.req_rate,
            opt(r.req_tot),
            bytes(r.bin),
            bytes(r.bout),
            r.hrsp[1],
            r.hrsp[3],
            r.hrsp[4],
            r.econ + r.eresp,
            opt(r.weight),
            esc(&r.check_status),
            esc(&short(&r.check_status, 24)),
        );
        if info.admin && r.kind != Kind::Frontend {
            s.push_str("<td>");
            if r.kind == Kind::Server {
                let _ = write!(
                    s,
                    "<input type=\"checkbox\" name=\"s\" value=\"{}\">",
                    esc(&r.svname)
                );
            }
            s.push_str("</td>");
        }
        s.push_str("</tr>\n");
    }
    if cur_px.is_some() {
        close(&mut s, &mut form);
    }
    s.push_str("</body></html>\n");
    s
}

/// The first `n` characters of a long text, with an ellipsis.
fn short(s: &str, n: usize) -> String {
    if s.chars().count() <= n {
        return s.to_string();
    }
    let mut o: String = s.chars().take(n).collect();
    o.push('\u{2026}');
    o
}

/// Decodes a percent-encoded query value (`+` is a space).
pub fn unpct(v: &str) -> Option<String> {
    let b = v.as_bytes();
    let mut o = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        match b[i] {
            b'%' => {
                // Exactly two hex digits (`from_str_radix` alone would
                // also take a sign: `%+1`).
                let h = b.get(i + 1..i + 3)?;
                if !h.iter().all(u8::is_ascii_hexdigit) {
                    return None;
                }
                o.push(u8::from_str_radix(std::str::from_utf8(h).ok()?, 16).ok()?);
                i += 3;
            }
            b'+' => {
                o.push(b' ');
                i += 1;
            }
            c => {
                o.push(c);
                i += 1;
            }
        }
    }
    String::from_utf8(o).ok()
}

/// Decodes standard base64 (for `Authorization: Basic`).
pub use crate::base64::decode as base64_decode;

/// Whether an `Authorization` header value names a user of the page.
pub fn auth_ok(users: &[(String, String)], header: Option<&[u8]>) -> bool {
    if users.is_empty() {
        return true;
    }
    let Some(h) = header.and_then(|h| std::str::from_utf8(h).ok()) else {
        return false;
    };
    let Some((scheme, cred)) = h.trim().split_once(' ') else {
        return false;
    };
    if !scheme.eq_ignore_ascii_case("basic") {
        return false;
    }
    let Some(dec) = base64_decode(cred.trim()).and_then(|d| String::from_utf8(d).ok()) else {
        return false;
    };
    let Some((u, p)) = dec.split_once(':') else {
        return false;
    };
    users.iter().any(|(uu, pp)| uu == u && pp == p)
}

// ---------------------------------------------------------------------------
// HTTP answers (the hooks of the connection code call these)
// ---------------------------------------------------------------------------

/// The redirect after a posted admin form: to the page with the result
/// code and the options in force (HAProxy's 303).
fn redirect_after_post(st: &crate::proxy::StatsRt, r: &PageReq, code: &str) -> Answer {
    let mut loc = format!("{};st={code}", st.uri);
    if r.o.up_only {
        loc.push_str(";up");
    }
    if r.o.norefresh {
        loc.push_str(";norefresh");
    }
    if let Some(sc) = &r.scope {
        let _ = write!(loc, "?scope={sc}");
    }
    Answer {
        status: 303,
        headers: vec![
            ("Cache-Control", "no-cache".into()),
            ("Content-Type", "text/plain".into()),
            ("Location", loc),
        ],
        body: Vec::new(),
    }
}

/// What the page says after an action (`;st=CODE`).
fn st_notice(code: &str) -> &'static str {
    match code {
        "DONE" => "The action was done.",
        "NONE" => "Nothing changed.",
        "PART" => "The action was done on some of the servers only (unknown or duplicated names, or an action ebb does not do).",
        "ERRP" => "The action was not done: unknown action, backend or servers, or an action ebb does not do.",
        "EXCD" => "The action was not done: the form was too large.",
        "DENY" => "The action was denied.",
        "IVAL" => "The request was invalid.",
        _ => "Unexpected result.",
    }
}

/// Answers a request for the stats page: `path` is the request target
/// (path and query), `authz` the `Authorization` header, `admin` whether a
/// `stats admin` condition holds for the request, `post` the body of a
/// POST (an admin form).
pub fn page(
    st: &crate::proxy::StatsRt,
    path: &[u8],
    authz: Option<&[u8]>,
    admin: bool,
    post: Option<&[u8]>,
) -> Answer {
    if !auth_ok(&st.auth, authz) {
        let mut a = plain(
            401,
            "401 Unauthorized: this page needs a user and a password.\n",
        );
        a.headers.push((
            "WWW-Authenticate",
            format!("Basic realm=\"{}\"", st.realm.replace(['"', '\\'], "")),
        ));
        return a;
    }
    let Some(p) = crate::registry::Process::global() else {
        return plain(
            503,
            "503 Service Unavailable: statistics are not ready yet.\n",
        );
    };
    let rest = path.get(st.uri.len()..).unwrap_or_default();
    let r = parse_page(rest, st.refresh.is_some());
    let c = p.live.compiled();
    if let Some(body) = post {
        let code = if admin { post_action(&c, body) } else { "DENY" };
        return redirect_after_post(st, &r, code);
    }
    let o = r.o;
    if o.schema {
        return plain(
            501,
            "501 Not Implemented: ebb does not serve the JSON schema.\n",
        );
    }
    let mut rows = rows(&c, None);
    rows.retain(|x| in_scope(r.scope.as_deref(), &x.pxname));
    let text = |ct: &str, body: String| Answer {
        status: 200,
        headers: vec![
            ("Content-Type", ct.into()),
            ("Cache-Control", "no-cache".into()),
        ],
        body: body.into_bytes(),
    };
    // HAProxy's order: the last of csv, typed, json in its scan wins.
    if o.json {
        return text("application/json", json(&rows));
    }
    if o.typed {
        return text("text/plain", typed(&rows));
    }
    if o.csv {
        return text("text/plain; charset=utf-8", csv(&rows));
    }
    // Links keep the options in force.
    let mut uri_now = st.uri.clone();
    for (on, w) in [
        (o.up_only, ";up"),
        (o.no_maint, ";no-maint"),
        (o.norefresh, ";norefresh"),
    ] {
        if on {
            uri_now.push_str(w);
        }
    }
    let notice = r.st.map(st_notice);
    let info = PageInfo {
        pid: p.pid,
        nbthread: p.nbthread,
        uptime_s: p.start.elapsed().map(|d| d.as_secs()).unwrap_or(0),
        conns: p.shared.actconn.load(Ordering::Relaxed),
        version: (!st.hide_version).then_some(env!("CARGO_PKG_VERSION")),
        refresh_s: st.refresh.map(|d| d.as_secs().max(1)),
        uri: &uri_now,
        admin,
        notice,
        node: st
            .show_node
            .as_ref()
            .map(|n| n.as_deref().unwrap_or(&c.node)),
        desc: st
            .show_desc
            .as_ref()
            .and_then(|d| d.as_deref().or(c.description.as_deref())),
        legends: st.show_legends,
    };
    text("text/html; charset=utf-8", html(&rows, &info, o))
}

/// Whether a request is for this stats page: a GET, HEAD or POST whose
/// target starts with the stats URI (HAProxy's test: whatever follows is
/// read by the page).
pub fn is_page(st: &crate::proxy::StatsRt, path: &[u8], method_ok: bool) -> bool {
    method_ok && path.starts_with(st.uri.as_bytes())
}
