//! ACLs and conditions (configuration.txt, section 7).
//!
//! `acl NAME CRITERION [FLAGS] [VALUES...]` declares a test; several lines
//! with one name are ORed. A condition after `if` or `unless` is a list of
//! ACL references, ANDed when juxtaposed, ORed across `||` or `or`, each
//! optionally negated by `!`; `{ CRITERION [FLAGS] VALUES }` is an anonymous
//! ACL. As in HAProxy, a named ACL must be declared before a rule uses it.

use super::types::{
    Acl, AclRef, AclTest, CondTerm, Condition, Fetch, IpNet, Loc, MatchMethod, Pattern,
};
use super::values::{is_token, parse_ipnet};
use crate::sample::{Expr, Scope, Type};

/// Parses the criterion, flags and values of an ACL (everything after the
/// name in `acl NAME ...`, or inside `{ }`). `-f FILE` adds the patterns
/// of a file, shared with its other users and changed by the CLI's `add
/// acl`/`del acl` (`crate::sample::patref`).
pub(crate) fn parse_acl_test(words: &[String], loc: &Loc) -> Result<AclTest, String> {
    let mut rest = Vec::with_capacity(words.len());
    let mut files = Vec::new();
    let mut as_map = false;
    let mut fixed = None;
    let mut i = 0;
    while i < words.len() {
        let w = &words[i];
        if i > 0 && !w.starts_with('-') {
            rest.extend_from_slice(&words[i..]);
            break;
        }
        if w == "--" {
            rest.extend_from_slice(&words[i..]);
            break;
        }
        if w == "-f" {
            let f = words
                .get(i + 1)
                .ok_or_else(|| "flag '-f' expects a file name".to_string())?;
            files.push((f.clone(), as_map));
            i += 2;
            continue;
        }
        // `-u ID`: the id of the line's own patterns on the CLI.
        if w == "-u" {
            let id = words.get(i + 1).map(String::as_str).unwrap_or("");
            fixed = Some(
                id.parse::<u32>()
                    .map_err(|_| "the argument of -u must be an integer".to_string())?,
            );
            i += 2;
            continue;
        }
        // `-M`: the files named after it are maps, whose keys are the
        // patterns (values ignored).
        if w == "-M" {
            as_map = true;
            i += 1;
            continue;
        }
        rest.push(w.clone());
        if w == "-m" {
            if let Some(m) = words.get(i + 1) {
                rest.push(m.clone());
                i += 1;
            }
        }
        i += 1;
    }
    let mut t = parse_test(&rest, loc)?;
    for (f, map) in files {
        let how = t
            .method
            .file_how()
            .ok_or_else(|| "flag '-f' needs a match method that reads patterns".to_string())?;
        let user = crate::sample::patref::User {
            how,
            icase: t.ignore_case,
            out: None,
            at: format!(
                "{} at file '{}' line {}",
                if map { "map" } else { "acl" },
                loc.file,
                loc.line
            ),
        };
        let r = crate::sample::patref::load(&f, map, user)?;
        for e in r.snapshot().entries.iter() {
            r.check(&e.key, None)
                .map_err(|x| format!("pattern file '{f}': {x}"))?;
        }
        t.files.push(crate::sample::patref::PatFile(r));
    }
    let kw = criterion_kw(words.first().map_or("", String::as_str));
    attach_inline(&mut t, kw, loc, fixed)?;
    Ok(t)
}

/// The keyword `show acl` describes an ACL line's patterns by (HAProxy's
/// `expr->kw`): the criterion without its arguments and converters.
fn criterion_kw(c: &str) -> &str {
    &c[..c.find(['(', ',']).unwrap_or(c.len())]
}

/// Gives `t` the reference of the patterns written on its line
/// (`crate::sample::patref::inline`; `fixed`: its `-u ID`).
fn attach_inline(t: &mut AclTest, kw: &str, loc: &Loc, fixed: Option<u32>) -> Result<(), String> {
    let desc = format!("acl '{kw}' file '{}' line {}", loc.file, loc.line);
    let user = t.method.file_how().map(|how| crate::sample::patref::User {
        how,
        icase: t.ignore_case,
        out: None,
        at: format!("acl at file '{}' line {}", loc.file, loc.line),
    });
    let r = crate::sample::patref::inline(desc, &t.keys, user, fixed)?;
    t.inline = Some(crate::sample::patref::PatFile(r));
    Ok(())
}

/// `-m bin` patterns: hex strings, compared with the sample's bytes.
fn bin_patterns(values: &[String], ignore_case: bool) -> Result<Vec<Pattern>, String> {
    if ignore_case {
        return Err("flag '-i' has no meaning for '-m bin'".to_string());
    }
    values
        .iter()
        .map(|v| {
            super::tcpcheck::unhex(v)
                .map(Pattern::Bin)
                .map_err(|e| format!("'-m bin': {e}"))
        })
        .collect()
}

fn parse_test(words: &[String], loc: &Loc) -> Result<AclTest, String> {
    let Some(criterion) = words.first() else {
        return Err("missing ACL criterion".to_string());
    };
    let derived = derived_acl(criterion);
    let parsed = match &derived {
        // The derived ACLs ebb has no classic matcher for (`_len`, and the
        // cookie, base, urlp and response families): their sample fetch
        // with their method, as HAProxy 2.6's http_acl.c declares them.
        Some((text, m, true)) => Ok((sample_criterion(text)?.0, *m)),
        _ => parse_criterion(criterion),
    };
    let (mut fetch, mut method) = match parsed {
        Ok(x) => x,
        // Not one of the classic criteria: any sample expression, matched
        // by the type it produces (HAProxy's default match per fetch).
        Err(legacy) => match sample_criterion(criterion) {
            Ok(x) => x,
            Err(e)
                if legacy.starts_with("unknown ACL criterion")
                    && !e.starts_with("unknown sample fetch") =>
            {
                return Err(format!("ACL criterion '{criterion}': {e}"))
            }
            Err(_) => return Err(legacy),
        },
    };
    let mut ignore_case = false;
    let mut explicit = false;
    let mut i = 1;
    // Flags come first; `--` ends them so a value may start with '-'.
    while let Some(w) = words.get(i) {
        if !w.starts_with('-') {
            break;
        }
        i += 1;
        match w.as_str() {
            "-i" => ignore_case = true,
            // No DNS resolution of patterns: ebb never resolves them (a
            // name where an address is expected is refused).
            "-n" => {}
            "--" => break,
            "-m" => {
                let m = words
                    .get(i)
                    .ok_or_else(|| "flag '-m' expects a match method".to_string())?;
                i += 1;
                explicit = true;
                method = match m.as_str() {
                    "str" => MatchMethod::Str,
                    "beg" => MatchMethod::Beg,
                    "end" => MatchMethod::End,
                    "sub" => MatchMethod::Sub,
                    "dir" => MatchMethod::Dir,
                    "dom" => MatchMethod::Dom,
                    "reg" => MatchMethod::Reg,
                    "found" => MatchMethod::Found,
                    "ip" => MatchMethod::Ip,
                    "int" => MatchMethod::Int,
                    "bool" => MatchMethod::Bool,
                    "bin" => MatchMethod::Bin,
                    "len" => MatchMethod::Len,
                    other => {
                        return Err(format!(
                            "unsupported match method '-m {other}' (supported: str, beg, end, sub, dir, dom, reg, found, ip, int, bool, bin, len)"
                        ))
                    }
                };
            }
            other => return Err(format!("unknown ACL flag '{other}'")),
        }
    }
    let values = &words[i..];
    // HAProxy's `method` keyword matches by method identity only without
    // `-m` (`pat_match_meth`); with one, the method is a string (`method
    // -m str -i post` matches POST).
    if explicit && fetch == Fetch::Method {
        fetch = sample_criterion("method")?.0;
    }
    // A classic string criterion matched as an integer, an address, a
    // boolean or a length: its sample, which HAProxy casts (`c_str2int`,
    // `c_str2addr`) or measures.
    if matches!(
        method,
        MatchMethod::Int | MatchMethod::Ip | MatchMethod::Bool | MatchMethod::Len
    ) && matches!(
        fetch,
        Fetch::Path | Fetch::Url | Fetch::Hdr(_) | Fetch::ReqVer
    ) {
        let text = match &derived {
            Some((text, _, _)) => text.clone(),
            None => criterion.clone(),
        };
        fetch = sample_criterion(&text)?.0;
    }
    let is_ip_fetch = fetch == Fetch::Src;
    if let Fetch::Sample(e) = &fetch {
        if !explicit && !e.has_default_match() {
            return Err(format!(
                "matching method must be specified first (using '-m') when using a sample fetch of this type ('{criterion}')"
            ));
        }
        // HAProxy 2.6's acl.c: a match method whose type the sample
        // cannot be cast to is refused (`sample_casts`: a binary or a
        // method is no integer, a boolean no address).
        let ty = e.out_type();
        let castable = match method {
            // (An IPv4 address is cast to an integer; ebb's address type
            // does not tell HAProxy's IPv4 from its other addresses.)
            MatchMethod::Int | MatchMethod::Bool => {
                matches!(ty, Type::Bool | Type::Int | Type::Str | Type::Ip)
            }
            MatchMethod::Ip => matches!(ty, Type::Int | Type::Ip | Type::Str),
            _ => true,
        };
        if !castable && !e.any_type() {
            return Err(format!(
                "matching method '{}' cannot be used with fetch keyword '{criterion}'",
                match method {
                    MatchMethod::Int => "int",
                    MatchMethod::Bool => "bool",
                    _ => "ip",
                }
            ));
        }
        return sample_test(fetch.clone(), ty, method, ignore_case, values, loc);
    }
    if matches!(method, MatchMethod::Int | MatchMethod::Bool) {
        return Err(format!(
            "'-m {}' cannot be used with '{criterion}'",
            if method == MatchMethod::Int {
                "int"
            } else {
                "bool"
            }
        ));
    }
    if method == MatchMethod::Ip && !is_ip_fetch {
        return Err(format!("'-m ip' cannot be used with '{criterion}'"));
    }
    if is_ip_fetch && method != MatchMethod::Ip && method != MatchMethod::Found {
        return Err(format!("'{criterion}' only supports IP matching"));
    }
    // `-i` on an address is accepted and means nothing, as HAProxy's.
    let ignore_case = ignore_case && !is_ip_fetch;
    let mut patterns = Vec::with_capacity(values.len());
    match method {
        MatchMethod::Found => {
            if !values.is_empty() {
                return Err("match method 'found' takes no value".to_string());
            }
        }
        MatchMethod::Ip => {
            for v in values {
                patterns.push(Pattern::Net(parse_ipnet(v)?));
            }
        }
        MatchMethod::Bin => patterns = bin_patterns(values, ignore_case)?,
        _ => {
            for v in values {
                if fetch == Fetch::Method && method == MatchMethod::Str && !is_token(v) {
                    return Err(format!("invalid HTTP method '{v}'"));
                }
                patterns.push(Pattern::Str(v.clone()));
            }
        }
    }
    if let Fetch::Always(_) = fetch {
        if !patterns.is_empty() {
            return Err(format!("'{criterion}' takes no value"));
        }
    }
    Ok(AclTest {
        fetch,
        method,
        ignore_case,
        patterns,
        files: Vec::new(),
        keys: values.to_vec(),
        inline: None,
        loc: loc.clone(),
    })
}

/// A criterion that is a sample expression: its default match method by
/// the type it produces (boolean: bool, integer: int, address: ip,
/// otherwise exact string).
fn sample_criterion(c: &str) -> Result<(Fetch, MatchMethod), String> {
    // An ACL may read the request or the response; where it is used is
    // checked when the condition is compiled (`rules::Matcher`).
    let e = match Expr::parse(c, Scope::Request { backend: true }) {
        Err(e) if e.contains("reads the response") || e.contains("server-side connection") => {
            Expr::parse(c, Scope::Response)?
        }
        r => r?,
    };
    let m = match e.out_type() {
        Type::Bool => MatchMethod::Bool,
        Type::Int => MatchMethod::Int,
        Type::Ip => MatchMethod::Ip,
        _ => MatchMethod::Str,
    };
    Ok((Fetch::Sample(Box::new(e)), m))
}

/// The patterns of a sample-expression ACL, checked against its method.
fn sample_test(
    fetch: Fetch,
    ty: Type,
    method: MatchMethod,
    ignore_case: bool,
    values: &[String],
    loc: &Loc,
) -> Result<AclTest, String> {
    let mut patterns = Vec::new();
    let mut keys = Vec::new();
    match method {
        MatchMethod::Found | MatchMethod::Bool => {
            if let Some(v) = values.first() {
                return Err(format!("unexpected value '{v}': this match takes no value"));
            }
        }
        MatchMethod::Int | MatchMethod::Len => {
            // HAProxy 2.6's acl.c: an operator (`eq`, `ge`, `gt`, `le`,
            // `lt`) holds for every value after it; a value holding `:`
            // or `-` is a range as written, whatever the operator (`lt
            // -1` is `-1`, the range up to 1), another is rewritten as a
            // range from the operator.
            let mut op = "eq";
            for v in values {
                let v = v.as_str();
                if matches!(v, "eq" | "ge" | "gt" | "le" | "lt") {
                    op = v;
                    continue;
                }
                let range = if v.contains([':', '-']) || op == "eq" {
                    v.to_string()
                } else {
                    let n = crate::sample::patref::strl2llrc(v.as_bytes()).ok_or_else(|| {
                        format!("'{v}' is neither a number nor a supported operator")
                    })?;
                    match op {
                        "ge" => format!("{n}:"),
                        "gt" => format!("{}:", n.wrapping_add(1)),
                        "le" => format!(":{n}"),
                        _ => format!(":{}", n.wrapping_sub(1)),
                    }
                };
                let (lo, hi) = crate::sample::patref::int_range(&range)
                    .ok_or_else(|| format!("'{range}' is not an integer nor a range"))?;
                patterns.push(Pattern::Int(lo, hi));
                keys.push(range);
            }
        }
        MatchMethod::Ip => {
            for v in values {
                patterns.push(Pattern::Net(parse_ipnet(v)?));
            }
            keys = values.to_vec();
        }
        MatchMethod::Bin => {
            patterns = bin_patterns(values, ignore_case)?;
            keys = values.to_vec();
        }
        _ => {
            for v in values {
                patterns.push(Pattern::Str(v.clone()));
            }
            keys = values.to_vec();
        }
    }
    // `-i` on an integer, a boolean or an address is accepted and means
    // nothing, as HAProxy's.
    let ignore_case = ignore_case
        && !matches!(
            method,
            MatchMethod::Int | MatchMethod::Bool | MatchMethod::Ip | MatchMethod::Len
        );
    let _ = ty;
    Ok(AclTest {
        fetch,
        method,
        ignore_case,
        patterns,
        files: Vec::new(),
        keys,
        inline: None,
        loc: loc.clone(),
    })
}

/// HAProxy 2.6's derived ACL keywords (http_acl.c): `FAMILY[_SUFFIX][(ARGS)]`
/// as the sample expression it reads and its match method, and whether
/// ebb reads it through that sample (every `_len`, and the families
/// without a classic matcher) rather than `parse_criterion`.
fn derived_acl(c: &str) -> Option<(String, MatchMethod, bool)> {
    let (name, args) = match c.find('(') {
        Some(open) => (&c[..open], &c[open..]),
        None => (c, ""),
    };
    let (family, suffix) = match name.rfind('_') {
        Some(u) if !matches!(&name[u..], "_ver") => (&name[..u], &name[u..]),
        _ => (name, ""),
    };
    let method = match suffix {
        "" => MatchMethod::Str,
        "_beg" => MatchMethod::Beg,
        "_dir" => MatchMethod::Dir,
        "_dom" => MatchMethod::Dom,
        "_end" => MatchMethod::End,
        "_len" => MatchMethod::Len,
        "_reg" => MatchMethod::Reg,
        "_sub" => MatchMethod::Sub,
        _ => return None,
    };
    let (fetch, classic) = match family {
        "base" => ("base", false),
        "cook" => ("req.cook", false),
        "hdr" => ("req.hdr", true),
        "path" => ("path", true),
        "scook" => ("res.cook", false),
        "shdr" => ("res.hdr", false),
        "url" => ("url", true),
        "urlp" => ("urlp", false),
        _ => return None,
    };
    Some((
        format!("{fetch}{args}"),
        method,
        !classic || method == MatchMethod::Len,
    ))
}

/// Maps a criterion (`path_beg`, `hdr_end(host)`, ...) to a fetch and its
/// default match method.
fn parse_criterion(c: &str) -> Result<(Fetch, MatchMethod), String> {
    let (name, arg) = match c.find('(') {
        Some(open) => {
            let Some(inner) = c[open + 1..].strip_suffix(')') else {
                return Err(format!("missing ')' in ACL criterion '{c}'"));
            };
            (&c[..open], Some(inner))
        }
        None => (c, None),
    };
    let suffix_method = |s: &str| -> Option<MatchMethod> {
        Some(match s {
            "" => MatchMethod::Str,
            "_beg" => MatchMethod::Beg,
            "_end" => MatchMethod::End,
            "_sub" => MatchMethod::Sub,
            "_dir" => MatchMethod::Dir,
            "_dom" => MatchMethod::Dom,
            "_reg" => MatchMethod::Reg,
            _ => return None,
        })
    };
    let no_arg = |f: Fetch, m: MatchMethod| -> Result<(Fetch, MatchMethod), String> {
        if arg.is_some() {
            Err(format!("ACL criterion '{name}' takes no argument"))
        } else {
            Ok((f, m))
        }
    };
    for (prefix, fetch) in [("path", Fetch::Path), ("url", Fetch::Url)] {
        if let Some(rest) = name.strip_prefix(prefix) {
            if let Some(m) = suffix_method(rest) {
                return no_arg(fetch, m);
            }
        }
    }
    for prefix in ["req.hdr", "hdr"] {
        if let Some(rest) = name.strip_prefix(prefix) {
            // HAProxy 2.6 has `req.hdr` but no `req.hdr_beg` and the like
            // (unknown fetch).
            if prefix == "req.hdr" && !rest.is_empty() {
                continue;
            }
            if let Some(m) = suffix_method(rest) {
                // No name: every header's values, as HAProxy's `hdr()`.
                let Some(arg) = arg else {
                    return Ok((sample_criterion("req.hdr")?.0, m));
                };
                if arg.contains(',') {
                    return Err(format!(
                        "header occurrence in '{c}' is not supported; use {name}(NAME)"
                    ));
                }
                if !is_token(arg) {
                    return Err(format!("invalid header name '{arg}' in '{c}'"));
                }
                return Ok((Fetch::Hdr(arg.to_ascii_lowercase()), m));
            }
        }
    }
    match name {
        "method" => no_arg(Fetch::Method, MatchMethod::Str),
        "src" => no_arg(Fetch::Src, MatchMethod::Ip),
        "req.ver" | "req_ver" => no_arg(Fetch::ReqVer, MatchMethod::Str),
        "always_true" => no_arg(Fetch::Always(true), MatchMethod::Found),
        "always_false" => no_arg(Fetch::Always(false), MatchMethod::Found),
        _ => Err(format!(
            "unknown ACL criterion '{name}' (supported: path, path_beg, path_end, path_sub, path_dir, path_dom, path_reg, url and its _beg/_end/_sub/_dir/_dom/_reg forms, hdr(NAME) and its _beg/_end/_sub/_dir/_dom/_reg forms, method, src, req.ver, always_true, always_false)"
        )),
    }
}

/// HAProxy's predefined ACLs (configuration.txt 7.4) that make sense here.
fn predefined(name: &str, loc: &Loc) -> Option<AclTest> {
    let s = |v: &[&str]| v.iter().map(|x| Pattern::Str(x.to_string())).collect();
    let t = |fetch, method, patterns: Vec<Pattern>| AclTest {
        fetch,
        method,
        ignore_case: false,
        keys: patterns
            .iter()
            .map(|p| match p {
                Pattern::Str(s) => s.clone(),
                _ => String::new(),
            })
            .collect(),
        patterns,
        files: Vec::new(),
        inline: None,
        loc: loc.clone(),
    };
    let meth = |v: &[&str]| t(Fetch::Method, MatchMethod::Str, s(v));
    let words = |v: &[&str]| v.iter().map(|x| x.to_string()).collect::<Vec<_>>();
    Some(match name {
        "TRUE" => t(Fetch::Always(true), MatchMethod::Found, vec![]),
        "HTTP" => t(
            sample_criterion("req.proto_http").ok()?.0,
            MatchMethod::Bool,
            vec![],
        ),
        "FALSE" => t(Fetch::Always(false), MatchMethod::Found, vec![]),
        "HTTP_CONTENT" => {
            parse_test(&words(&["req.hdr_val(content-length)", "gt", "0"]), loc).ok()?
        }
        "REQ_CONTENT" => parse_test(&words(&["req.len", "gt", "0"]), loc).ok()?,
        "RDP_COOKIE" => parse_test(&words(&["req.rdp_cookie_cnt", "gt", "0"]), loc).ok()?,
        "WAIT_END" => t(
            sample_criterion("wait_end").ok()?.0,
            MatchMethod::Bool,
            vec![],
        ),
        "HTTP_1.0" => t(Fetch::ReqVer, MatchMethod::Str, s(&["1.0"])),
        "HTTP_1.1" => t(Fetch::ReqVer, MatchMethod::Str, s(&["1.1"])),
        "HTTP_URL_ABS" => t(Fetch::Url, MatchMethod::Reg, s(&["^[^/:]*://"])),
        "HTTP_URL_SLASH" => t(Fetch::Url, MatchMethod::Beg, s(&["/"])),
        "HTTP_URL_STAR" => t(Fetch::Url, MatchMethod::Str, s(&["*"])),
        "LOCALHOST" => AclTest {
            keys: vec!["127.0.0.1/8".to_string(), "::1".to_string()],
            ..t(
                Fetch::Src,
                MatchMethod::Ip,
                vec![
                    Pattern::Net(IpNet {
                        addr: std::net::Ipv4Addr::new(127, 0, 0, 0).into(),
                        prefix: 8,
                    }),
                    Pattern::Net(IpNet {
                        addr: std::net::Ipv6Addr::LOCALHOST.into(),
                        prefix: 128,
                    }),
                ],
            )
        },
        "METH_CONNECT" => meth(&["CONNECT"]),
        "METH_DELETE" => meth(&["DELETE"]),
        "METH_GET" => meth(&["GET", "HEAD"]),
        "METH_HEAD" => meth(&["HEAD"]),
        "METH_OPTIONS" => meth(&["OPTIONS"]),
        "METH_POST" => meth(&["POST"]),
        "METH_PUT" => meth(&["PUT"]),
        "METH_TRACE" => meth(&["TRACE"]),
        _ => return None,
    })
}

/// `acl NAME CRITERION...`: a new ACL in `acls`, or one more test ORed
/// into the one of that name.
pub(crate) fn declare(
    acls: &mut Vec<Acl>,
    name: &str,
    words: &[String],
    loc: &Loc,
) -> Result<(), String> {
    if !super::values::valid_name(name) {
        return Err(format!(
            "invalid ACL name '{name}' (letters, digits, '-', '_', '.' and ':' only)"
        ));
    }
    let test = parse_acl_test(words, loc)?;
    match acls.iter_mut().find(|a| a.name == name) {
        Some(a) => a.tests.push(test),
        None => acls.push(Acl {
            name: name.to_string(),
            tests: vec![test],
            loc: loc.clone(),
        }),
    }
    Ok(())
}

/// Parses the words after `if` / `unless`. Named ACLs resolve against
/// `acls`, the ones declared so far in the proxy.
pub(crate) fn parse_condition(
    unless: bool,
    words: &[String],
    acls: &[Acl],
    loc: &Loc,
) -> Result<Condition, String> {
    let kw = if unless { "unless" } else { "if" };
    if words.is_empty() {
        return Err(format!("missing condition after '{kw}'"));
    }
    let mut terms: Vec<Vec<CondTerm>> = vec![Vec::new()];
    let mut negate = false;
    let mut i = 0;
    while i < words.len() {
        let w = words[i].as_str();
        i += 1;
        match w {
            "||" | "or" => {
                if negate {
                    return Err(format!("'!' before '{w}' in condition"));
                }
                match terms.last() {
                    Some(t) if !t.is_empty() => terms.push(Vec::new()),
                    _ => return Err(format!("missing ACL before '{w}' in condition")),
                }
            }
            "!" => negate = !negate,
            "{" | "!{" => {
                if w == "!{" {
                    negate = !negate;
                }
                let start = i;
                while i < words.len() && words[i] != "}" {
                    i += 1;
                }
                if i >= words.len() {
                    return Err("missing '}' closing an anonymous ACL".to_string());
                }
                let test = parse_acl_test(&words[start..i], loc)?;
                i += 1;
                push_term(&mut terms, negate, AclRef::Inline(test));
                negate = false;
            }
            "}" => return Err("unexpected '}' in condition".to_string()),
            _ => {
                let (neg2, name) = match w.strip_prefix('!') {
                    Some(n) => (true, n),
                    None => (false, w),
                };
                let negate_now = negate ^ neg2;
                let acl = if let Some(index) = acls.iter().position(|a| a.name == name) {
                    AclRef::Named {
                        name: name.to_string(),
                        index,
                    }
                } else if let Some(mut test) = predefined(name, loc) {
                    // HAProxy makes it once per proxy, at its first use.
                    let kw = predefined_kw(name);
                    let r = crate::sample::patref::predefined(name, || {
                        attach_inline(&mut test, kw, loc, None)?;
                        test.inline
                            .take()
                            .map(|f| f.0)
                            .ok_or_else(|| "no reference".to_string())
                    })?;
                    test.inline = Some(crate::sample::patref::PatFile(r));
                    AclRef::Inline(test)
                } else {
                    return Err(format!(
                        "ACL '{name}' is not declared (ACLs must be declared before the rule that uses them)"
                    ));
                };
                push_term(&mut terms, negate_now, acl);
                negate = false;
            }
        }
    }
    if negate {
        return Err("'!' at the end of the condition".to_string());
    }
    if terms.last().is_some_and(|t| t.is_empty()) {
        return Err("condition ends with '||' / 'or'".to_string());
    }
    Ok(Condition {
        unless,
        terms,
        loc: loc.clone(),
    })
}

/// The keyword of predefined ACL `name` (HAProxy's `default_acl_list`).
fn predefined_kw(name: &str) -> &'static str {
    match name {
        "TRUE" => "always_true",
        "FALSE" => "always_false",
        "LOCALHOST" => "src",
        "HTTP" => "req.proto_http",
        "HTTP_1.0" | "HTTP_1.1" => "req.ver",
        "HTTP_URL_ABS" => "url_reg",
        "HTTP_URL_SLASH" => "url_beg",
        "HTTP_URL_STAR" => "url",
        "HTTP_CONTENT" => "req.hdr_val",
        "RDP_COOKIE" => "req.rdp_cookie_cnt",
        "REQ_CONTENT" => "req.len",
        "WAIT_END" => "wait_end",
        _ => "method",
    }
}

fn push_term(terms: &mut [Vec<CondTerm>], negate: bool, acl: AclRef) {
    if let Some(last) = terms.last_mut() {
        last.push(CondTerm { negate, acl });
    }
}
