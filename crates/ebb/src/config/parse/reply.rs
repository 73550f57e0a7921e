//! Answers written in the configuration: `errorfile` and the
//! `http-errors` sections, and the replies of `http-request return`,
//! `http-request deny`, `http-response deny` and `http-error` (a status,
//! a content type, `hdr` fields and a body from a string, a file or a
//! log-format string, or an errorfile instead).
//!
//! Files are read when the line is read, as HAProxy does, and an
//! errorfile must hold an HTTP/1.x response (an empty one closes the
//! connection). A later errorfile for a status replaces the earlier one.
//! An `http-error` answer with no log-format part is turned into the
//! bytes of an errorfile here, so it is sent as one.

use std::path::Path;

use super::{arg, Ctx, Parser};
use crate::config::types::*;
use crate::config::values::*;
use crate::sample::{LogFormat as LfFormat, Scope};

impl Parser<'_> {
    /// A line of an `http-errors` section: `errorfile CODE FILE`.
    pub(super) fn http_errors_kw(
        &mut self,
        i: usize,
        w: &[String],
        loc: &Loc,
    ) -> Result<(), String> {
        let [kw, code, file] = w else {
            return match w[0].as_str() {
                "errorfile" => Err("'errorfile' expects CODE FILE".to_string()),
                o => Err(format!(
                    "unknown keyword '{o}' in an http-errors section (supported: errorfile)"
                )),
            };
        };
        if kw != "errorfile" {
            return Err(format!(
                "unknown keyword '{kw}' in an http-errors section (supported: errorfile)"
            ));
        }
        let ctx = Ctx {
            loc,
            default_path: &self.default_path,
            tls: &self.tls,
            caps: 0,
            defaults: false,
            section_name: "http-errors",
            http_errors: &[],
            named_defaults: false,
            anon_defaults: false,
            experimental: false,
        };
        let e = read_errorfile(&ctx, code, file)?;
        if let Some(s) = self.http_errors.get_mut(i) {
            set_errorfile(&mut s.files, e);
        }
        Ok(())
    }
}

/// An errorfile's status code (one HAProxy can answer with).
pub(super) fn errorfile_code(kw: &str, code: &str) -> Result<u16, String> {
    code.parse::<u16>()
        .ok()
        .filter(|c| ERRORFILE_CODES.contains(c))
        .ok_or_else(|| {
            format!(
                "'{kw}' status code '{code}' is not one of {}",
                ERRORFILE_CODES
                    .iter()
                    .map(u16::to_string)
                    .collect::<Vec<_>>()
                    .join(", ")
            )
        })
}

/// `errorfile CODE FILE` (in a proxy or an http-errors section): reads and
/// checks the file.
pub(super) fn read_errorfile(ctx: &Ctx<'_>, code: &str, file: &str) -> Result<ErrorFile, String> {
    let status = errorfile_code("errorfile", code)?;
    let path = ctx.resolve(file);
    let content = read_file(&path)?;
    // An empty file (`errorfile 408 /dev/null`, HAProxy's documented
    // idiom) closes the connection without an answer.
    if !content.is_empty() {
        check_http_response(&content, &path)?;
    }
    Ok(ErrorFile {
        status,
        path,
        content,
        loc: ctx.loc.clone(),
    })
}

/// An `http-error` answer without log-format parts, as the whole HTTP
/// response an errorfile holds (`None` when it has such parts).
pub(super) fn static_reply(r: &ReturnAction) -> Option<Vec<u8>> {
    let body: &[u8] = match &r.body {
        ReturnBody::None => b"",
        ReturnBody::String(s) => s.as_bytes(),
        ReturnBody::File { content, .. } => content,
        ReturnBody::LfString(f) => f.as_literal()?,
        ReturnBody::Errorfile(_) => return None,
    };
    let mut out = format!(
        "HTTP/1.1 {} {}\r\n",
        r.status,
        crate::http1::reason_phrase(r.status)
    )
    .into_bytes();
    // HAProxy's order: the `hdr` fields (none with an empty value), the
    // length, then the type when there is a body.
    for (n, f) in &r.headers {
        let v = f.as_literal()?;
        if v.is_empty() {
            continue;
        }
        out.extend_from_slice(n.as_bytes());
        out.extend_from_slice(b": ");
        out.extend_from_slice(v);
        out.extend_from_slice(b"\r\n");
    }
    out.extend_from_slice(format!("content-length: {}\r\n", body.len()).as_bytes());
    if let (Some(ct), false) = (&r.content_type, body.is_empty()) {
        out.extend_from_slice(format!("content-type: {ct}\r\n").as_bytes());
    }
    out.extend_from_slice(b"\r\n");
    out.extend_from_slice(body);
    Some(out)
}

/// A later errorfile for a status replaces the earlier one.
pub(super) fn set_errorfile(list: &mut Vec<ErrorFile>, e: ErrorFile) {
    match list.iter_mut().find(|x| x.status == e.status) {
        Some(x) => *x = e,
        None => list.push(e),
    }
}

/// Reads a file at parse time, with an error naming it.
fn read_file(path: &Path) -> Result<Vec<u8>, String> {
    std::fs::read(path).map_err(|e| format!("cannot read '{}': {e}", path.display()))
}

/// Checks that `bytes` look like an HTTP/1.x response: a status line with a
/// 3-digit code and the blank line ending the headers.
fn check_http_response(bytes: &[u8], path: &Path) -> Result<(), String> {
    let ok_start = (bytes.starts_with(b"HTTP/1.0 ") || bytes.starts_with(b"HTTP/1.1 "))
        && bytes.len() >= 12
        && bytes[9..12].iter().all(u8::is_ascii_digit);
    if !ok_start {
        return Err(format!(
            "'{}' is not an HTTP response (it must start with a status line such as 'HTTP/1.1 503 Service Unavailable')",
            path.display()
        ));
    }
    let has_end =
        bytes.windows(4).any(|x| x == b"\r\n\r\n") || bytes.windows(2).any(|x| x == b"\n\n");
    if !has_end {
        return Err(format!(
            "'{}' has no empty line ending the response headers",
            path.display()
        ));
    }
    Ok(())
}

pub(super) fn parse_return(
    args: &[String],
    ctx: &Ctx<'_>,
    scope: Scope,
) -> Result<ReturnAction, String> {
    parse_reply("http-request return", args, ctx, scope, false)
}

/// The answer of `http-request return` or of an `http-request deny` that
/// has one (`deny`: `deny_status` is the status' other name, 403 by
/// default). `kw` names the rule in messages.
pub(super) fn parse_reply(
    kw: &str,
    args: &[String],
    ctx: &Ctx<'_>,
    scope: Scope,
    deny: bool,
) -> Result<ReturnAction, String> {
    let mut r = ReturnAction {
        status: if deny { 403 } else { 200 },
        content_type: None,
        body: ReturnBody::None,
        headers: Vec::new(),
        deny,
    };
    // `errorfile`, `errorfiles` (resolved once the status is known) and
    // `default-errorfiles` send an error answer instead of a built one.
    let mut errors: Option<Option<&str>> = None;
    let mut errorfile: Option<Vec<u8>> = None;
    let mut i = 0;
    while i < args.len() {
        let opt = args[i].as_str();
        if opt == "default-errorfiles" {
            errors = Some(None);
            i += 1;
            continue;
        }
        if opt == "errorfiles" || opt == "errorfile" {
            let v = arg(args, i + 1, opt)
                .map_err(|_| format!("'{kw}' option '{opt}' expects a value"))?;
            if opt == "errorfiles" {
                if !ctx.http_errors.iter().any(|s| s.name == *v) {
                    return Err(format!("'{kw} ... errorfiles {v}': no http-errors section '{v}' declared before this line"));
                }
                errors = Some(Some(v));
            } else {
                let path = ctx.resolve(v);
                let content = read_file(&path)?;
                if !content.is_empty() {
                    check_http_response(&content, &path)?;
                }
                errorfile = Some(content);
                errors = Some(None);
            }
            i += 2;
            continue;
        }
        let opt = if deny && opt == "deny_status" {
            "status"
        } else {
            opt
        };
        let v =
            arg(args, i + 1, opt).map_err(|_| format!("'{kw}' option '{opt}' expects a value"))?;
        let set_body = |r: &mut ReturnAction, b: ReturnBody| -> Result<(), String> {
            if r.body != ReturnBody::None {
                return Err(format!(
                    "'{kw}' accepts only one of string, lf-string, file"
                ));
            }
            r.body = b;
            Ok(())
        };
        match opt {
            "status" => r.status = parse_status(&format!("{kw} status"), v, 200, 599)?,
            "content-type" => r.content_type = Some(header_value(v)?),
            "string" => set_body(&mut r, ReturnBody::String(v.to_string()))?,
            "lf-string" => set_body(
                &mut r,
                ReturnBody::LfString(
                    LfFormat::parse_http(v, scope)
                        .map_err(|e| format!("'{kw}' lf-string: {e}"))?,
                ),
            )?,
            "file" => {
                let path = ctx.resolve(v);
                let content = read_file(&path)?;
                set_body(&mut r, ReturnBody::File { path, content })?;
            }
            // The file's content is a log-format string (an empty file is
            // no body, as for `file`).
            "lf-file" => {
                let path = ctx.resolve(v);
                let content = read_file(&path)?;
                if !content.is_empty() {
                    let text = String::from_utf8(content).map_err(|_| {
                        format!("'{kw}' lf-file '{v}' is not UTF-8 text")
                    })?;
                    let f = LfFormat::parse_http(&text, scope)
                        .map_err(|e| format!("'{kw}' lf-file '{v}': {e}"))?;
                    set_body(&mut r, ReturnBody::LfString(f))?;
                }
            }
            "hdr" => {
                let value = arg(args, i + 2, "hdr")
                    .map_err(|_| "'hdr' expects NAME VALUE".to_string())?;
                let name = header_name(v)?;
                let lower = name.to_ascii_lowercase();
                if matches!(lower.as_str(), "content-length" | "content-type" | "transfer-encoding") {
                    return Err(format!(
                        "header '{name}' cannot be set with 'hdr' (ebb sets it itself)"
                    ));
                }
                let value = header_value(value)?;
                let f = LfFormat::parse_http(&value, scope)
                    .map_err(|e| format!("hdr {name}: {e}"))?;
                r.headers.push((name, f));
                i += 1;
            }
            o => {
                return Err(format!(
                    "unknown '{kw}' option '{o}' (supported: status, content-type, string, lf-string, file, lf-file, hdr, errorfile, errorfiles, default-errorfiles)"
                ))
            }
        }
        i += 2;
    }
    if let Some(from) = errors {
        if r.body != ReturnBody::None || r.content_type.is_some() || !r.headers.is_empty() {
            return Err(format!(
                "'{kw}': errorfile, errorfiles and default-errorfiles exclude content-type, hdr and a body"
            ));
        }
        let raw = match (errorfile, from) {
            (Some(c), _) => Some(c),
            (None, Some(name)) => ctx
                .http_errors
                .iter()
                .find(|s| s.name == name)
                .and_then(|s| s.files.iter().find(|e| e.status == r.status))
                .map(|e| e.content.clone()),
            (None, None) => None,
        };
        r.body = ReturnBody::Errorfile(raw);
        return Ok(r);
    }
    // An empty file is no body (HAProxy's rule: no content-type needed).
    let has_body = match &r.body {
        ReturnBody::None => false,
        ReturnBody::File { content, .. } => !content.is_empty(),
        _ => true,
    };
    if has_body && r.content_type.is_none() {
        return Err(format!("'{kw}' with a body needs a 'content-type'"));
    }
    // HAProxy's meaning: without a payload, 'content-type' is ignored (a
    // dummy answer with only the status is sent).
    if !has_body {
        r.content_type = None;
    }
    if has_body && matches!(r.status, 204 | 304) {
        return Err(format!("status {} must not have a body", r.status));
    }
    Ok(r)
}
