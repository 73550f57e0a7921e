//! Static files: from a request target to a file, safely, and the HTTP
//! decisions around it (conditionals, ranges, caching headers).
//!
//! The functions here are deterministic given the file system: they take the
//! request's pieces and the configuration and return what to answer (a
//! [`Resolved`] path, a [`Refusal`], a [`Decision`] on conditionals and
//! ranges). Those that
//! touch the disk (`resolve`, `read_dir_listing`) block, so the server runs
//! them on its blocking pool unless the open-file cache already knows the
//! answer; the event loop itself never calls them.
//!
//! Path safety, in order:
//! 1. the query is cut, the path is percent-decoded **once**;
//! 2. an encoded slash (`%2F`), a NUL byte, a bad escape (`%zz`), a
//!    backslash-free but non-UTF-8 path, or a segment that is not plain
//!    text is refused (404);
//! 3. `.` segments are dropped and `..` pops one segment; popping above the
//!    root is refused (403);
//! 4. the file's canonical path (symlinks resolved) must stay under the
//!    canonical root unless `follow-symlinks on` (403 otherwise).

use std::fs::Metadata;
use std::io;
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// What a `serve-files` backend was configured with (compiled with the
/// configuration, in the runtime).
pub use crate::proxy::FilesConfig;

/// Why a path was refused, with the status it earns.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Refusal {
    /// 400: not a path at all (no leading slash).
    BadRequest,
    /// 403: escapes the root, or a directory that may not be listed.
    Forbidden,
    /// 404: does not exist, or is a path we refuse to map (NUL, `%2F`,
    /// a bad escape).
    NotFound,
}

impl Refusal {
    /// The HTTP status for this refusal.
    pub fn status(self) -> u16 {
        match self {
            Refusal::BadRequest => 400,
            Refusal::Forbidden => 403,
            Refusal::NotFound => 404,
        }
    }
}

/// Decodes and normalises the path of a request target (origin form).
/// Returns the clean path, always starting with `/`, with a trailing `/`
/// kept when the request had one.
///
/// The string comes from this thread's spare (see [`recycle_path`]), so a
/// request whose path is given back allocates nothing here.
pub fn normalize_path(target: &[u8]) -> Result<String, Refusal> {
    let path = path_of(target);
    if path.first() != Some(&b'/') {
        return Err(Refusal::BadRequest);
    }
    let mut out = SPARE_PATH.with(|s| s.take()).into_bytes();
    out.clear();
    if is_clean(path) {
        // Already in the form the decoding gives: copied as it is.
        out.extend_from_slice(path);
    } else {
        normalize_into(path, &mut out)?;
    }
    String::from_utf8(out).map_err(|_| Refusal::NotFound)
}

/// The path of a request target: up to its query or fragment.
fn path_of(target: &[u8]) -> &[u8] {
    match target.iter().position(|&c| c == b'?' || c == b'#') {
        Some(i) => &target[..i],
        None => target,
    }
}

/// When the path of `target` is already its own clean form (what
/// [`normalize_path`] would return, byte for byte: the common case), its
/// length: the clean path is then the first that many bytes of the
/// target, read in place, with no string made.
///
/// One pass over the target with a table of byte classes: the scan ends
/// at the path's end (`?`, `#` or the target's end), so the query is not
/// read, and at the first byte that is not clean. Same answer as
/// [`is_clean`] over [`path_of`] (a property test holds them together,
/// and the clean path to what [`normalize_path`]'s decoding makes).
///
/// Each byte costs one load and one test: a byte stops the scan when its
/// class has a bit of the mask, and the mask after a `/` also holds `/`
/// and `.` (a `//` or a segment starting with a dot is not clean).
pub fn clean_len(target: &[u8]) -> Option<usize> {
    let (&b'/', rest) = target.split_first()? else {
        return None;
    };
    let mut mask = AFTER_SLASH;
    for (i, &c) in rest.iter().enumerate() {
        let k = PATH_CLASS[usize::from(c)];
        if k & mask != 0 {
            return (k & END != 0).then_some(i + 1);
        }
        // `/` (bit 0) sets the slash and dot bits; anything else clears them.
        mask = STOPS | ((k & SLASH) * (SLASH | DOT));
    }
    Some(target.len())
}

/// [`clean_len`]'s byte classes, as bits (a plain byte has none).
const SLASH: u8 = 1;
const DOT: u8 = 2;
/// `?` or `#`: the path ends before it.
const END: u8 = 4;
/// Never in a clean path: `%`, NUL, non-ASCII.
const NOT_CLEAN: u8 = 8;
/// What stops the scan anywhere, and right after a `/`.
const STOPS: u8 = END | NOT_CLEAN;
const AFTER_SLASH: u8 = STOPS | SLASH | DOT;

static PATH_CLASS: [u8; 256] = {
    let mut t = [0u8; 256];
    let mut i = 0x80;
    while i < 256 {
        t[i] = NOT_CLEAN;
        i += 1;
    }
    t[0] = NOT_CLEAN;
    t[b'%' as usize] = NOT_CLEAN;
    t[b'/' as usize] = SLASH;
    t[b'.' as usize] = DOT;
    t[b'?' as usize] = END;
    t[b'#' as usize] = END;
    t
};

/// Whether `path` (starting with `/`) is its own normal form, in one pass
/// over it: ASCII without `%` or NUL (nothing to decode, valid text), and
/// no segment that [`normalize_into`] would drop or pop (no `//`, and no
/// segment starting with `.`, which covers `.` and `..`; a dot-file's
/// path takes the longer way, to the same result).
fn is_clean(path: &[u8]) -> bool {
    let mut after_slash = false;
    for &c in path {
        if c == b'%' || c == 0 || !c.is_ascii() || (after_slash && (c == b'/' || c == b'.')) {
            return false;
        }
        after_slash = c == b'/';
    }
    true
}

thread_local! {
    /// A path string given back after use, for the next request.
    static SPARE_PATH: std::cell::Cell<String> = const { std::cell::Cell::new(String::new()) };
}

/// Gives a clean path back once used: the next [`normalize_path`] on this
/// thread writes into it.
pub fn recycle_path(p: String) {
    SPARE_PATH.with(|s| s.set(p));
}

/// Percent-decodes `path` (starting with `/`) segment by segment into
/// `out`, dropping `.` and empty segments and popping one for `..`. Every
/// decoded segment must be UTF-8 without NUL (so the whole path is, even
/// the parts a `..` removes). Refusals rank as when decoding came first:
/// a bad escape or an encoded `/` or NUL (404), then text that is not UTF-8
/// or holds NUL (404), then a `..` above the root (403).
fn normalize_into(path: &[u8], out: &mut Vec<u8>) -> Result<(), Refusal> {
    // A path whose last segment is empty, `.` or `..` names a directory
    // (RFC 3986's dot-segment removal keeps the slash: `/a.txt/.` is
    // `/a.txt/`, never the file `/a.txt`).
    let mut trailing = false;
    let (mut above_root, mut bad_text) = (false, false);
    // A decoded `/` is refused, so the raw slashes are the segments'.
    for raw in path[1..].split(|&c| c == b'/') {
        let start = out.len();
        out.push(b'/');
        // Most segments are plain ASCII text with no escape: copied whole,
        // and valid text as they are.
        if raw.iter().all(|&c| c != b'%' && c != 0 && c.is_ascii()) {
            out.extend_from_slice(raw);
        } else {
            decode_segment(raw, out)?;
            let seg = &out[start + 1..];
            bad_text |= std::str::from_utf8(seg).is_err() || seg.contains(&0);
        }
        trailing = matches!(&out[start + 1..], b"" | b"." | b"..");
        match &out[start + 1..] {
            b"" | b"." => out.truncate(start),
            b".." => {
                out.truncate(start);
                match out.iter().rposition(|&c| c == b'/') {
                    Some(prev) => out.truncate(prev),
                    None => above_root = true,
                }
            }
            _ => {}
        }
    }
    if bad_text {
        return Err(Refusal::NotFound);
    }
    if above_root {
        return Err(Refusal::Forbidden);
    }
    if out.is_empty() || trailing {
        out.push(b'/');
    }
    Ok(())
}

/// Percent-decodes one raw segment onto `out`: a bad escape (`%zz`, `%4`,
/// which HAProxy's parser and ebb's let through) is refused (404: no file
/// is named so), as is an encoded `/` or NUL.
fn decode_segment(raw: &[u8], out: &mut Vec<u8>) -> Result<(), Refusal> {
    let mut i = 0;
    while i < raw.len() {
        let c = raw[i];
        if c == b'%' {
            let (Some(h), Some(l)) = (
                raw.get(i + 1).copied().and_then(crate::http1::hex_value),
                raw.get(i + 2).copied().and_then(crate::http1::hex_value),
            ) else {
                return Err(Refusal::NotFound);
            };
            let b = h << 4 | l;
            if b == b'/' || b == 0 {
                return Err(Refusal::NotFound);
            }
            out.push(b);
            i += 3;
        } else {
            out.push(c);
            i += 1;
        }
    }
    Ok(())
}

/// What a clean path maps to on disk.
#[derive(Debug)]
pub enum Resolved {
    /// A regular file to send.
    File { path: PathBuf },
    /// A directory to list (listing is on and no index file exists).
    Listing { path: PathBuf },
    /// A directory asked for without its trailing slash: 301 to `location`.
    AddSlash { location: String },
}

/// Maps a clean path (from [`normalize_path`]) under the root. Blocking.
pub fn resolve(cfg: &FilesConfig, clean: &str) -> Result<Resolved, Refusal> {
    if !cfg.dotfiles && is_hidden(clean) {
        return Err(Refusal::NotFound);
    }
    let rel = clean.trim_start_matches('/');
    let full = cfg.root.join(rel);
    let meta = std::fs::metadata(&full).map_err(map_io)?;
    check_inside(cfg, &full)?;
    if meta.is_dir() {
        if !clean.ends_with('/') {
            return Ok(Resolved::AddSlash {
                location: format!("{}/", encode_path(clean)),
            });
        }
        for idx in &cfg.index {
            let p = full.join(idx);
            if let Ok(m) = std::fs::metadata(&p) {
                if m.is_file() {
                    check_inside(cfg, &p)?;
                    return Ok(Resolved::File { path: p });
                }
            }
        }
        return if cfg.listing {
            Ok(Resolved::Listing { path: full })
        } else {
            Err(Refusal::Forbidden)
        };
    }
    if !meta.is_file() {
        // Devices, sockets, fifos: never served.
        return Err(Refusal::NotFound);
    }
    Ok(Resolved::File { path: full })
}

/// Whether a clean path names a dot-file or goes through a dot-directory
/// (`/.well-known/` excepted, RFC 8615).
pub fn is_hidden(clean: &str) -> bool {
    clean
        .split('/')
        .enumerate()
        .any(|(i, seg)| seg.starts_with('.') && !(i == 1 && seg == ".well-known"))
}

fn map_io(e: io::Error) -> Refusal {
    match e.kind() {
        io::ErrorKind::PermissionDenied => Refusal::Forbidden,
        _ => Refusal::NotFound,
    }
}

/// Refuses a path whose real location (symlinks resolved) leaves the root,
/// unless symlinks may be followed anywhere.
fn check_inside(cfg: &FilesConfig, p: &Path) -> Result<(), Refusal> {
    if cfg.follow_symlinks {
        return Ok(());
    }
    let root = cfg.root.canonicalize().map_err(map_io)?;
    let real = p.canonicalize().map_err(map_io)?;
    if real.starts_with(&root) {
        Ok(())
    } else {
        Err(Refusal::Forbidden)
    }
}

/// Percent-encodes a path for a Location header or a listing link: keeps
/// unreserved characters and `/`, encodes everything else.
pub fn encode_path(p: &str) -> String {
    let mut out = String::with_capacity(p.len());
    for &b in p.as_bytes() {
        if b.is_ascii_alphanumeric() || b"-._~/!$&'()*+,;=:@".contains(&b) {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{:02X}", b));
        }
    }
    out
}

fn html_escape(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '&' => out.push_str("&amp;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c => out.push(c),
        }
    }
    out
}

/// An HTML listing of a directory (names sorted, directories with a
/// trailing slash, hidden files included as nginx's autoindex does not: we
/// skip names starting with a dot). Blocking.
pub fn read_dir_listing(dir: &Path, clean: &str) -> io::Result<String> {
    let mut names: Vec<(String, bool, u64)> = Vec::new();
    for ent in std::fs::read_dir(dir)? {
        let ent = ent?;
        let name = ent.file_name().to_string_lossy().into_owned();
        if name.starts_with('.') {
            continue;
        }
        let (is_dir, len) = match ent.metadata() {
            Ok(m) => (m.is_dir(), m.len()),
            Err(_) => continue,
        };
        names.push((name, is_dir, len));
    }
    names.sort();
    let title = html_escape(clean);
    let mut body = format!(
        "<!DOCTYPE html>\n<html><head><meta charset=\"utf-8\"><title>Index of {t}</title></head>\n\
         <body><h1>Index of {t}</h1><hr><pre>\n",
        t = title
    );
    if clean != "/" {
        body.push_str("<a href=\"../\">../</a>\n");
    }
    for (name, is_dir, len) in names {
        let slash = if is_dir { "/" } else { "" };
        let href = format!("{}{}", encode_path(&name), slash);
        let size = if is_dir {
            "-".to_string()
        } else {
            len.to_string()
        };
        body.push_str(&format!(
            "<a href=\"{}\">{}{}</a> {:>width$}\n",
            html_escape(&href),
            html_escape(&name),
            slash,
            size,
            width = 60usize
                .saturating_sub(name.chars().count() + slash.len())
                .max(1)
                + size.len()
        ));
    }
    body.push_str("</pre><hr></body></html>\n");
    Ok(body)
}

/// Content-Type for a file name, from its extension.
pub fn content_type(path: &Path) -> String {
    let mime = mime_guess::from_path(path).first_or_octet_stream();
    let s = mime.essence_str();
    if s.starts_with("text/") || s == "application/javascript" || s == "application/json" {
        format!("{}; charset=utf-8", s)
    } else {
        s.to_string()
    }
}

/// The validators of a file: a strong ETag from mtime and size (the form
/// nginx uses, `"<mtime hex>-<size hex>"`), and its modification time in
/// whole seconds.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Validators {
    pub etag: String,
    /// `mtime` as the `Last-Modified` value (formatted once, at open).
    pub last_modified: String,
    pub mtime: SystemTime,
    pub len: u64,
}

impl Validators {
    /// Validators of a file's metadata.
    pub fn of(meta: &Metadata) -> Validators {
        let mtime = meta.modified().unwrap_or(UNIX_EPOCH);
        let secs = mtime
            .duration_since(UNIX_EPOCH)
            .map(|d| d.as_secs())
            .unwrap_or(0);
        let mtime = UNIX_EPOCH + Duration::from_secs(secs);
        Validators {
            etag: format!("\"{:x}-{:x}\"", secs, meta.len()),
            last_modified: httpdate::fmt_http_date(mtime),
            mtime,
            len: meta.len(),
        }
    }
}

/// The request headers that steer a file answer.
#[derive(Debug, Default, Clone, Copy)]
pub struct Conditions<'a> {
    pub if_none_match: Option<&'a str>,
    pub if_modified_since: Option<&'a str>,
    pub if_range: Option<&'a str>,
    pub range: Option<&'a str>,
}

impl<'a> Conditions<'a> {
    /// The four fields from a request's `headers` (spans into `buf`) in
    /// one pass: the first field of each name counts, and a value that is
    /// not UTF-8 counts as absent (as a lookup by name would find them).
    pub fn of_request(buf: &'a [u8], headers: &[crate::http1::HeaderSpan]) -> Conditions<'a> {
        let mut c = Conditions::default();
        let mut seen = [false; 4];
        for h in headers {
            let name = h.name.get(buf);
            let (i, want, slot): (usize, &[u8], _) = match name.len() {
                5 => (0, b"range", &mut c.range),
                8 => (1, b"if-range", &mut c.if_range),
                13 => (2, b"if-none-match", &mut c.if_none_match),
                17 => (3, b"if-modified-since", &mut c.if_modified_since),
                _ => continue,
            };
            if !seen[i] && name.eq_ignore_ascii_case(want) {
                seen[i] = true;
                *slot = std::str::from_utf8(h.value.get(buf)).ok();
            }
        }
        c
    }
}

/// What to answer for a file.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Decision {
    /// 200 with the whole file.
    Full,
    /// 206 with bytes `start..=end`.
    Partial { start: u64, end: u64 },
    /// 304: the client's copy is current.
    NotModified,
    /// 416: no satisfiable range (`Content-Range: bytes */len`).
    Unsatisfiable,
}

/// Whether an `If-None-Match` list matches an ETag (weak comparison, as RFC
/// 9110 §13.1.2 requires for this header).
fn etag_matches(list: &str, etag: &str) -> bool {
    let bare = etag.trim_start_matches("W/");
    list.split(',')
        .map(str::trim)
        .any(|t| t == "*" || t.trim_start_matches("W/") == bare)
}

/// Applies RFC 9110 §13.2.2's order: If-None-Match (then If-Modified-Since
/// only when it is absent), then Range with If-Range.
pub fn decide(c: &Conditions<'_>, v: &Validators) -> Decision {
    if let Some(inm) = c.if_none_match {
        if etag_matches(inm, &v.etag) {
            return Decision::NotModified;
        }
    } else if let Some(ims) = c.if_modified_since {
        if let Ok(t) = httpdate::parse_http_date(ims.trim()) {
            if v.mtime <= t {
                return Decision::NotModified;
            }
        }
    }
    let Some(range) = c.range else {
        return Decision::Full;
    };
    if let Some(ir) = c.if_range {
        let ir = ir.trim();
        let fresh = if ir.starts_with('"') {
            ir == v.etag // strong comparison only
        } else {
            httpdate::parse_http_date(ir)
                .map(|t| t == v.mtime)
                .unwrap_or(false)
        };
        if !fresh {
            return Decision::Full;
        }
    }
    parse_range(range, v.len)
}

/// Parses a `Range` header against a length. Only one range is honoured;
/// a list or an unknown unit gets the full file (servers may ignore Range).
pub fn parse_range(h: &str, len: u64) -> Decision {
    let Some(spec) = h.trim().strip_prefix("bytes=") else {
        return Decision::Full;
    };
    if spec.contains(',') {
        return Decision::Full;
    }
    let Some((a, b)) = spec.trim().split_once('-') else {
        return Decision::Full;
    };
    let (a, b) = (a.trim(), b.trim());
    let digits = |s: &str| !s.is_empty() && s.bytes().all(|c| c.is_ascii_digit());
    if a.is_empty() {
        // Suffix range: the last N bytes.
        if !digits(b) {
            return Decision::Full;
        }
        let n: u64 = b.parse().unwrap_or(u64::MAX);
        if n == 0 || len == 0 {
            return Decision::Unsatisfiable;
        }
        let n = n.min(len);
        return Decision::Partial {
            start: len - n,
            end: len - 1,
        };
    }
    if !digits(a) || !(b.is_empty() || digits(b)) {
        return Decision::Full;
    }
    let Ok(start) = a.parse::<u64>() else {
        return Decision::Unsatisfiable;
    };
    if start >= len {
        return Decision::Unsatisfiable;
    }
    let end = if b.is_empty() {
        len - 1
    } else {
        match b.parse::<u64>() {
            Ok(e) if e >= start => e.min(len - 1),
            Ok(_) => return Decision::Full, // invalid range: ignore it
            Err(_) => len - 1,
        }
    };
    Decision::Partial { start, end }
}

#[cfg(test)]
mod tests;
