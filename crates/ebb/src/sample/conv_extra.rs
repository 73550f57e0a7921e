//! More converters (configuration.txt 7.3.1), kept apart from `conv` for
//! its size: those that read the running proxies (`nbsrv`, `srv_queue`)
//! and the text, time and message converters added with them.
//!
//! Each is a variant of [`Extra`], which `conv::Conv` holds as one of its
//! own: compiled from its name and arguments, typed (what it takes, what
//! it gives) and applied to the scratch buffers like the others.

use super::{Count, Ctx, Scratch, Type, Val};

#[derive(Clone, Debug)]
pub(super) enum Extra {
    /// `nbsrv`: the usable servers of the backend the string names.
    Nbsrv,
    /// `srv_queue`: the queue length of the server the string names
    /// (`BACKEND/SERVER`, or `SERVER` in the stream's backend).
    SrvQueue,
    /// `ltrim(CHARS)`, `rtrim(CHARS)` (`right`).
    Trim { chars: Vec<u8>, right: bool },
    /// `cut_crlf`: up to the first CR or LF.
    CutCrlf,
    /// `htonl`: the integer's low 32 bits, big endian.
    Htonl,
    /// `language(LIST[,DEFAULT])`: the language of `;`-separated LIST the
    /// Accept-Language value prefers.
    Language(Vec<u8>, Option<Vec<u8>>),
    /// `protobuf(PATH[,TYPE])`, `ungrpc(PATH[,TYPE])` (`grpc`).
    Protobuf {
        path: Vec<u32>,
        ty: super::protobuf::PbType,
        grpc: bool,
    },
    /// `ltime(FORMAT[,OFFSET])`, `utime(...)` (`local` false): a date in
    /// seconds (its low 55 bits) plus OFFSET, as `strftime` writes it.
    Time {
        fmt: Vec<u8>,
        offset: i64,
        local: bool,
    },
    /// `debug([PREFIX][,SINK])`: the sample, written to a ring or stdout
    /// or stderr, goes on unchanged.
    Debug { prefix: Vec<u8>, sink: String },
}

impl Extra {
    /// The converter named `name`, when it is one of these; `Err` for bad
    /// arguments.
    pub(super) fn compile(name: &str, args: &[String]) -> Option<Result<Extra, String>> {
        let none = |c: Extra| -> Result<Extra, String> {
            if !args.is_empty() {
                return Err(format!("converter '{name}' takes no argument"));
            }
            Ok(c)
        };
        let count = |min: usize, max: usize| -> Result<(), String> {
            if args.len() < min || args.len() > max {
                return Err(format!(
                    "converter '{name}' expects {min} to {max} argument(s), got {}",
                    args.len()
                ));
            }
            Ok(())
        };
        Some((|| match name {
            "nbsrv" => none(Extra::Nbsrv),
            "srv_queue" => none(Extra::SrvQueue),
            // A string argument left out is an empty one (HAProxy's).
            "ltrim" | "rtrim" => {
                count(0, 1)?;
                Ok(Extra::Trim {
                    chars: args
                        .first()
                        .map(|a| a.as_bytes().to_vec())
                        .unwrap_or_default(),
                    right: name == "rtrim",
                })
            }
            "cut_crlf" => none(Extra::CutCrlf),
            "ltime" | "utime" => {
                count(0, 2)?;
                let offset = match super::conv::opt_arg(args, 1) {
                    Some(o) => o
                        .parse::<i64>()
                        .map_err(|_| format!("converter '{name}': '{o}' is not an integer"))?,
                    None => 0,
                };
                Ok(Extra::Time {
                    fmt: args
                        .first()
                        .map(|a| a.as_bytes().to_vec())
                        .unwrap_or_default(),
                    offset,
                    local: name == "ltime",
                })
            }
            "htonl" => none(Extra::Htonl),
            "language" => {
                count(0, 2)?;
                Ok(Extra::Language(
                    args.first()
                        .map(|a| a.as_bytes().to_vec())
                        .unwrap_or_default(),
                    args.get(1).map(|d| d.as_bytes().to_vec()),
                ))
            }
            "protobuf" | "ungrpc" => {
                count(1, 2)?;
                let path = super::protobuf::parse_path(&args[0]).ok_or_else(|| {
                    format!(
                        "converter '{name}': '{}' is not a field number (N[.N...])",
                        args[0]
                    )
                })?;
                let ty = match args.get(1) {
                    None => super::protobuf::PbType::Binary,
                    Some(t) => super::protobuf::PbType::parse(t).ok_or_else(|| {
                        format!("converter '{name}': Wrong protocol buffer type '{t}'")
                    })?,
                };
                Ok(Extra::Protobuf {
                    path,
                    ty,
                    grpc: name == "ungrpc",
                })
            }
            "debug" => {
                count(0, 2)?;
                let sink = args.get(1).cloned().unwrap_or_else(|| "buf0".to_string());
                note_sink(&sink);
                Ok(Extra::Debug {
                    prefix: args
                        .first()
                        .map(|p| p.as_bytes().to_vec())
                        .unwrap_or_default(),
                    sink,
                })
            }
            _ => Err(String::new()),
        })())
        .filter(|r| !matches!(r, Err(e) if e.is_empty()))
    }

    /// Whether it takes any type and gives it on unchanged (`debug`).
    pub(super) fn any_type(&self) -> bool {
        matches!(self, Extra::Debug { .. })
    }

    pub(super) fn in_type(&self) -> Type {
        match self {
            Extra::Htonl | Extra::Time { .. } => Type::Int,
            Extra::Protobuf { .. } => Type::Bin,
            _ => Type::Str,
        }
    }

    pub(super) fn out_type(&self, input: Type) -> Type {
        match self {
            Extra::Nbsrv | Extra::SrvQueue => Type::Int,
            Extra::Htonl | Extra::Protobuf { .. } => Type::Bin,
            Extra::Debug { .. } => input,
            _ => Type::Str,
        }
    }

    /// Applies it to `v`, already cast to [`Extra::in_type`] (but for
    /// [`Extra::any_type`]'s).
    pub(super) fn apply(&self, v: Val, ctx: &Ctx<'_>, s: &mut Scratch) -> Option<Val> {
        match self {
            Extra::Trim { chars, right } => {
                let n = if *right {
                    s.cur.iter().rev().take_while(|c| chars.contains(c)).count()
                } else {
                    s.cur.iter().take_while(|c| chars.contains(c)).count()
                };
                if *right {
                    s.cur.truncate(s.cur.len() - n);
                } else {
                    s.cur.drain(..n);
                }
                Some(Val::Str)
            }
            Extra::CutCrlf => {
                if let Some(i) = s.cur.iter().position(|&c| c == b'\r' || c == b'\n') {
                    s.cur.truncate(i);
                }
                Some(Val::Str)
            }
            Extra::Time { fmt, offset, local } => {
                let Val::Int(i) = v else { return None };
                // HAProxy masks the date to 55 bits, then adds the offset.
                let t = (i & 0x007f_ffff_ffff_ffff).wrapping_add(*offset);
                s.cur.clear();
                super::strftime::strftime(fmt, &super::strftime::Tm::at(t, *local), &mut s.cur);
                // strftime writes nothing when the text does not fit its
                // buffer (HAProxy's: a buffer's size).
                let max = super::BUFSIZE.load(std::sync::atomic::Ordering::Relaxed) as usize;
                if s.cur.len() >= max {
                    s.cur.clear();
                }
                Some(Val::Str)
            }
            Extra::Htonl => {
                let Val::Int(i) = v else { return None };
                s.cur.clear();
                s.cur.extend_from_slice(&(i as u32).to_be_bytes());
                Some(Val::Bin)
            }
            Extra::Language(list, default) => {
                // An empty language found is no language (the default).
                let r = preferred_language(&s.cur, list).filter(|r| !r.is_empty());
                let got = match (r, default) {
                    (Some(r), _) => list[r].to_vec(),
                    (None, Some(d)) => d.clone(),
                    (None, None) => Vec::new(),
                };
                if got.is_empty() {
                    return None;
                }
                s.cur = got;
                Some(Val::Str)
            }
            Extra::Protobuf { path, ty, grpc } => {
                use super::protobuf::{lookup, ungrpc, Found};
                let found = if *grpc {
                    ungrpc(&s.cur, path, *ty)
                } else {
                    let (mut pos, mut len) = (0, s.cur.len());
                    lookup(&s.cur, path, *ty, &mut pos, &mut len)
                };
                match found? {
                    Found::Int(i) => Some(Val::Int(i)),
                    Found::Bytes(r) => {
                        s.cur.truncate(r.end);
                        s.cur.drain(..r.start);
                        Some(Val::Bin)
                    }
                }
            }
            Extra::Debug { prefix, sink } => {
                debug(v, prefix, sink, s);
                Some(v)
            }
            // HAProxy's sample_conv_nbsrv, sample_conv_srv_queue: the
            // names looked up at each call (no such proxy or server: no
            // sample).
            Extra::Nbsrv => {
                let name = std::str::from_utf8(&s.cur).ok()?;
                super::count(Count::Nbsrv, name, None).map(Val::Int)
            }
            Extra::SrvQueue => {
                let text = std::str::from_utf8(&s.cur).ok()?;
                let (be, srv) = match text.split_once('/') {
                    Some((b, srv)) => (b, srv),
                    None => (ctx.be?, text),
                };
                super::count(Count::SrvQueue, be, Some(srv)).map(Val::Int)
            }
        }
    }
}

thread_local! {
    static SINKS: std::cell::RefCell<Vec<String>> = const { std::cell::RefCell::new(Vec::new()) };
}

fn note_sink(name: &str) {
    SINKS.with(|r| r.borrow_mut().push(name.to_string()));
}

/// The sinks the `debug` converters compiled on this thread since the
/// last call name, for the parser's check (HAProxy's: `buf0`, `stdout`,
/// `stderr` or a `ring` section declared above the line).
pub fn take_sink_refs() -> Vec<String> {
    SINKS.with(|r| std::mem::take(&mut *r.borrow_mut()))
}

/// `debug`: `[debug] PREFIX: type=TYPE <VALUE>` (its bytes that do not
/// print as `.`) to the sink, as HAProxy's `sample_conv_debug` writes it:
/// a ring's line in its format, a raw line on stdout or stderr.
fn debug(v: Val, prefix: &[u8], sink: &str, s: &Scratch) {
    let mut line = b"[debug] ".to_vec();
    line.extend_from_slice(prefix);
    line.extend_from_slice(b": type=");
    line.extend_from_slice(super::vars::type_name(v).as_bytes());
    line.extend_from_slice(b" <");
    let mut text = Vec::new();
    super::write_text(v, s, &mut text);
    line.extend(
        text.iter()
            .map(|&c| if (0x20..0x7f).contains(&c) { c } else { b'.' }),
    );
    line.push(b'>');
    match sink {
        "stdout" | "stderr" => {
            use std::io::Write;
            line.push(b'\n');
            let _ = if sink == "stdout" {
                std::io::stdout().lock().write_all(&line)
            } else {
                std::io::stderr().lock().write_all(&line)
            };
        }
        ring => super::ring_write(ring, &line),
    }
}

/// HAProxy's `sample_conv_q_preferred` on an Accept-Language value `al`:
/// the range of `list` (its `;`-separated languages) with the best q
/// value, the first at 1 ending the search; `None` when none matches.
fn preferred_language(al: &[u8], list: &[u8]) -> Option<std::ops::Range<usize>> {
    // C's isspace.
    let sp = |c: u8| matches!(c, b' ' | b'\t' | b'\n' | 0x0b | 0x0c | b'\r');
    let at = |i: usize| al.get(i).copied().unwrap_or(0);
    let (mut i, end) = (0usize, al.len());
    let mut best_q = 0;
    let mut best = None;
    loop {
        while i < end && sp(al[i]) {
            i += 1;
        }
        if i >= end {
            break;
        }
        let token = i;
        while i < end && al[i] != b';' && al[i] != b',' && !sp(al[i]) {
            i += 1;
        }
        // The language of the list the token names, if any.
        let hit = if i == token {
            None
        } else {
            let t = &al[token..i];
            let mut w = 0;
            let mut found = None;
            for (j, &c) in list.iter().chain(std::iter::once(&0)).enumerate() {
                if c == b';' || c == 0 {
                    if range_match(t, &list[w..j]) {
                        found = Some(w..j);
                        break;
                    }
                    w = j + 1;
                }
            }
            found
        };
        if let Some(r) = hit {
            let mut q = 1000;
            // The q value after `;q=` (spaces allowed around each part);
            // anything else: 1000, the end of the part read best effort.
            'q: {
                while i < end && sp(al[i]) {
                    i += 1;
                }
                if i >= end || al[i] == b',' {
                    break 'q;
                }
                if al[i] != b';' {
                    // Not a value: to the next comma, unranked.
                    q = -1;
                    break 'q;
                }
                i += 1;
                for want in [b'q', b'='] {
                    while i < end && sp(al[i]) {
                        i += 1;
                    }
                    if i >= end || al[i] != want {
                        break 'q;
                    }
                    i += 1;
                }
                while i < end && sp(al[i]) {
                    i += 1;
                }
                if i >= end {
                    break 'q;
                }
                // HAProxy's http_parse_qvalue (it reads on past a
                // character that is not the expected one).
                let digit = |c: u8| c.is_ascii_digit();
                if digit(at(i)) {
                    q = i32::from(at(i) - b'0') * 1000;
                    i += 1;
                    let dot = at(i) == b'.';
                    i += 1;
                    if dot {
                        for m in [100, 10, 1] {
                            if !digit(at(i)) {
                                break;
                            }
                            q += i32::from(at(i) - b'0') * m;
                            i += 1;
                        }
                    }
                }
                q = q.min(1000);
            }
            if q > best_q {
                best = Some(r);
                if q >= 1000 {
                    break;
                }
                best_q = q;
            }
        }
        while i < end && al[i] != b',' {
            i += 1;
        }
        if i >= end {
            break;
        }
        i += 1;
    }
    best
}

/// HAProxy's `http_language_range_match`: `range` names `tag`, whole or
/// up to a `-` of the range after all of the tag.
fn range_match(range: &[u8], tag: &[u8]) -> bool {
    let mut t = 0;
    for &c in range {
        if c == b'-' && t == tag.len() {
            return true;
        }
        if t == tag.len() || c != tag[t] {
            return false;
        }
        t += 1;
    }
    t == tag.len()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn accept_language_as_haproxy_prefers() {
        let p = |al: &str, list: &str| {
            preferred_language(al.as_bytes(), list.as_bytes())
                .map(|r| String::from_utf8(list.as_bytes()[r].to_vec()).unwrap())
        };
        assert_eq!(p("fr;q=0.5, en", "en;fr").as_deref(), Some("en"));
        assert_eq!(p("fr;q=0.5, en;q=0.4", "en;fr").as_deref(), Some("fr"));
        assert_eq!(p("en-US", "en;fr").as_deref(), Some("en"));
        assert_eq!(p("en", "en-US;fr").as_deref(), None);
        assert_eq!(p("de, fr-CH", "en;fr-CH").as_deref(), Some("fr-CH"));
        assert_eq!(p("fr;q=0", "fr").as_deref(), None);
        assert_eq!(p("*", "en").as_deref(), None);
    }
}
