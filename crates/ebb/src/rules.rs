//! ACL evaluation and the header edits of `http-request` and
//! `http-response` rules, evaluated against one exchange.
//!
//! The configuration holds ACLs as parsed tests; [`Matcher`] compiles them
//! once at start (regular expressions included, so a bad pattern is a
//! `file:line` error before any traffic) and evaluates them on a sample
//! [`Ctx`] (called [`ReqView`] here): the classic criteria (`path_beg`,
//! `hdr(host)`, `src`...) read the request head in place; any other
//! criterion is a sample expression (`crate::sample`) matched by its type
//! (string methods, `-m int` ranges, `-m bool`, `-m ip`). Nothing is copied
//! on the request path except into the sample engine's per-thread scratch
//! buffers.
//!
//! [`HeaderEdit`] is the one header-edit type of request and response
//! rules: `render_value` evaluates its log-format value and makes it safe
//! (no CR, LF or NUL); the `rewrite` module applies edits in rule order.

use regex::bytes::Regex;

use crate::config::{
    Acl, AclRef, AclTest, Condition, ConfigError, EditOp, Fetch, HeaderEdit, MatchMethod, Pattern,
    Proxy,
};
use crate::http1::Version;
use crate::sample::patref::{find_str, How, PatRef};
use crate::sample::{Ctx, Scratch, Val};
use std::sync::Arc;

/// What a condition looks at: the sample context of the exchange (the
/// request head over its buffer, addresses, names).
pub type ReqView<'a> = Ctx<'a>;

/// The path without its query string.
fn path_of<'a>(r: &crate::sample::Req<'a>) -> &'a [u8] {
    // From the target, as the `path` fetch reads it: after a rule edited
    // the head (`set-header`), `path_sub example.com` matched an absolute
    // target's authority through the head's path span (tests/diff seed 6).
    let p = crate::sample::target_path(r.head.target.get(r.buf));
    &p[..crate::sample::find_byte(p, b'?')]
}

impl HeaderEdit {
    /// Appends the field this edit adds (`Name: value\r\n`), if any. The
    /// value is evaluated for `ctx`; bytes that would break the message
    /// (CR, LF, NUL) are dropped from it.
    pub fn write_field(&self, ctx: &Ctx<'_>, out: &mut Vec<u8>) {
        if self.op == EditOp::Del {
            return;
        }
        out.extend_from_slice(self.name.as_bytes());
        out.extend_from_slice(b": ");
        self.render_value(ctx, out);
        out.extend_from_slice(b"\r\n");
    }

    /// Appends the value alone (sanitised as in [`HeaderEdit::write_field`]);
    /// spaces around it are kept, as HAProxy keeps them.
    pub fn render_value(&self, ctx: &Ctx<'_>, out: &mut Vec<u8>) {
        let at = out.len();
        match self.value.as_literal() {
            Some(v) => out.extend_from_slice(v),
            None => self.value.render(ctx, out),
        }
        if out[at..].iter().any(|&c| matches!(c, b'\r' | b'\n' | 0)) {
            let mut i = at;
            out.retain(|&c| {
                let keep = i < at || !matches!(c, b'\r' | b'\n' | 0);
                i += 1;
                keep
            });
        }
    }
}

/// One compiled ACL test.
struct Test {
    fetch: Fetch,
    method: MatchMethod,
    icase: bool,
    patterns: Vec<Pattern>,
    regexes: Vec<Regex>,
    /// `-f FILE` patterns (`crate::sample::patref`).
    files: Vec<Arc<PatRef>>,
    /// The line's own patterns as a reference: once the CLI changed it
    /// (`add acl #ID`...), its entries replace `patterns` and `regexes`.
    inline: Option<Arc<PatRef>>,
}

/// The test's line reference once the CLI changed it (one relaxed load
/// while it has not).
#[inline]
fn live(t: &Test) -> Option<&Arc<PatRef>> {
    t.inline.as_ref().filter(|r| r.changed())
}

/// The references the test reads: its files, and its line's own patterns
/// once changed.
fn refs(t: &Test) -> impl Iterator<Item = &Arc<PatRef>> {
    t.files.iter().chain(live(t))
}

/// The compiled patterns, while they are the line's.
#[inline]
fn statics(t: &Test) -> &[Pattern] {
    if live(t).is_some() {
        &[]
    } else {
        &t.patterns
    }
}

/// The compiled ACLs of one proxy: named ones by index, inline ones kept in
/// the conditions that use them.
pub struct Matcher {
    named: Vec<Vec<Test>>,
}

/// A compiled condition (`if` / `unless` ...).
pub struct Cond {
    unless: bool,
    /// OR of ANDs of (negate, test-set).
    terms: Vec<Vec<(bool, Term)>>,
    /// The condition as one range test of a tracked counter, when it is
    /// one (`if { sc_http_req_rate(0) gt N }`, the usual rate rule): read
    /// and compared without the sample machinery.
    sc: Option<ScTest>,
}

/// `{ FETCH [!]RANGE }` on a tracked counter's read, with the condition's
/// `!` and `unless` folded in: holds when the value is in `lo..=hi`
/// differs from `flip`.
struct ScTest {
    read: crate::sample::TrackedRead,
    lo: i64,
    hi: i64,
    flip: bool,
    inline: Option<Arc<PatRef>>,
}

impl ScTest {
    /// The test for `c`'s terms, when they are one inline integer test of
    /// one range on a tracked counter's read (what `eval` would do through
    /// the sample: the counter's value, an integer, in the range).
    fn of(terms: &[Vec<(bool, Term)>], unless: bool) -> Option<ScTest> {
        let [and] = terms else { return None };
        let [(neg, Term::Inline(t))] = &and[..] else {
            return None;
        };
        let Fetch::Sample(e) = &t.fetch else {
            return None;
        };
        let read = e.stk_alone()?.tracked_read()?;
        let (MatchMethod::Int, true, [Pattern::Int(lo, hi)]) =
            (t.method, t.files.is_empty(), &t.patterns[..])
        else {
            return None;
        };
        Some(ScTest {
            read,
            lo: *lo,
            hi: *hi,
            flip: *neg != unless,
            inline: t.inline.clone(),
        })
    }

    /// Whether the test still is its range (the CLI did not change the
    /// line's patterns).
    fn fresh(&self) -> bool {
        !self.inline.as_ref().is_some_and(|r| r.changed())
    }

    fn holds(&self, r: &Ctx<'_>) -> bool {
        let v = self.read.read(r);
        v.is_some_and(|i| self.lo <= i && i <= self.hi) != self.flip
    }
}

enum Term {
    Named(usize),
    Inline(Test),
}

fn compile_test(t: &AclTest) -> Result<Test, ConfigError> {
    let mut regexes = Vec::new();
    if t.method == MatchMethod::Reg {
        for p in &t.patterns {
            if let Pattern::Str(s) = p {
                let src = if t.ignore_case {
                    format!("(?i){s}")
                } else {
                    s.clone()
                };
                let re = Regex::new(&src).map_err(|e| ConfigError {
                    loc: t.loc.clone(),
                    message: format!("invalid regular expression '{s}': {e}"),
                })?;
                regexes.push(re);
            }
        }
    }
    Ok(Test {
        fetch: t.fetch.clone(),
        method: t.method,
        icase: t.ignore_case,
        patterns: t.patterns.clone(),
        regexes,
        files: t.files.iter().map(|f| Arc::clone(&f.0)).collect(),
        inline: t.inline.as_ref().map(|f| Arc::clone(&f.0)),
    })
}

impl Matcher {
    /// Compiles a proxy's named ACLs.
    pub fn new(acls: &[Acl]) -> Result<Matcher, ConfigError> {
        let mut named = Vec::with_capacity(acls.len());
        for a in acls {
            named.push(a.tests.iter().map(compile_test).collect::<Result<_, _>>()?);
        }
        Ok(Matcher { named })
    }

    /// Compiles the ACLs of a proxy.
    pub fn for_proxy(p: &Proxy) -> Result<Matcher, ConfigError> {
        Matcher::new(&p.acls)
    }

    /// Compiles a condition of a request rule (or `use_backend`...): an
    /// ACL reading the response is refused.
    pub fn cond(&self, c: &Condition) -> Result<Cond, ConfigError> {
        self.cond_at(c, false)
    }

    /// Compiles a condition of a response rule: an ACL reading the request
    /// is refused (HAProxy: it would never match there).
    pub fn cond_response(&self, c: &Condition) -> Result<Cond, ConfigError> {
        self.cond_at(c, true)
    }

    /// [`Matcher::cond_response`] of an optional condition.
    pub fn opt_cond_response(&self, c: Option<&Condition>) -> Result<Option<Cond>, ConfigError> {
        c.map(|c| self.cond_response(c)).transpose()
    }

    fn cond_at(&self, c: &Condition, response: bool) -> Result<Cond, ConfigError> {
        let wrong = |t: &Test| match &t.fetch {
            Fetch::Path | Fetch::Url | Fetch::Method | Fetch::Hdr(_) | Fetch::ReqVer => response,
            Fetch::Sample(e) => e.reads_response().is_some_and(|r| r != response),
            Fetch::Src | Fetch::Always(_) => false,
        };
        let refuse = |what: &str| ConfigError {
            loc: c.loc.clone(),
            message: format!(
                "{what} reads the {}, which a{} rule does not see (it would never match)",
                if response { "request" } else { "response" },
                if response { " response" } else { " request" }
            ),
        };
        let mut terms = Vec::with_capacity(c.terms.len());
        for and in &c.terms {
            let mut v = Vec::with_capacity(and.len());
            for t in and {
                let term = match &t.acl {
                    AclRef::Named { index, name } => {
                        let Some(tests) = self.named.get(*index) else {
                            return Err(ConfigError {
                                loc: c.loc.clone(),
                                message: format!("unknown ACL '{name}'"),
                            });
                        };
                        if tests.iter().any(wrong) {
                            return Err(refuse(&format!("ACL '{name}'")));
                        }
                        Term::Named(*index)
                    }
                    AclRef::Inline(test) => {
                        let t = compile_test(test)?;
                        if wrong(&t) {
                            return Err(refuse("this condition"));
                        }
                        Term::Inline(t)
                    }
                };
                v.push((t.negate, term));
            }
            terms.push(v);
        }
        Ok(Cond {
            unless: c.unless,
            sc: ScTest::of(&terms, c.unless),
            terms,
        })
    }

    /// Compiles an optional condition; `None` always holds.
    pub fn opt_cond(&self, c: Option<&Condition>) -> Result<Option<Cond>, ConfigError> {
        c.map(|c| self.cond(c)).transpose()
    }

    /// Evaluates a condition with HAProxy's three answers while content
    /// is inspected: `None` (ACL_TEST_MISS) when a test that failed read a
    /// sample that more bytes may change and the condition's answer hangs
    /// on it; a rule then waits. `None` as the condition holds.
    pub fn holds_or_miss(&self, c: Option<&Cond>, r: &Ctx<'_>) -> Option<bool> {
        let Some(c) = c else {
            return Some(true);
        };
        let mut any = Tri::Fail;
        for and in &c.terms {
            let mut all = Tri::Pass;
            for (neg, term) in and {
                let v = match term {
                    Term::Named(i) => {
                        let mut acc = Tri::Fail;
                        for t in &self.named[*i] {
                            acc = acc.or(eval3(t, r));
                            if acc == Tri::Pass {
                                break;
                            }
                        }
                        acc
                    }
                    Term::Inline(t) => eval3(t, r),
                };
                all = all.and(if *neg { v.not() } else { v });
                if all == Tri::Fail {
                    break;
                }
            }
            any = any.or(all);
            if any == Tri::Pass {
                break;
            }
        }
        match if c.unless { any.not() } else { any } {
            Tri::Pass => Some(true),
            Tri::Fail => Some(false),
            Tri::Miss => None,
        }
    }

    /// Evaluates a condition on a request; `None` holds.
    pub fn holds(&self, c: Option<&Cond>, r: &Ctx<'_>) -> bool {
        let Some(c) = c else {
            return true;
        };
        if let Some(t) = c.sc.as_ref().filter(|t| t.fresh()) {
            return t.holds(r);
        }
        if let [and] = &c.terms[..] {
            if let [(neg, Term::Inline(t))] = &and[..] {
                // One inline test (`if { ... }`), the usual condition.
                return (eval(t, r) != *neg) != c.unless;
            }
        }
        let any = c.terms.iter().any(|and| {
            and.iter().all(|(neg, term)| {
                let v = match term {
                    Term::Named(i) => self.named[*i].iter().any(|t| eval(t, r)),
                    Term::Inline(t) => eval(t, r),
                };
                v != *neg
            })
        });
        any != c.unless
    }
}

fn eq_bytes(a: &[u8], b: &[u8], icase: bool) -> bool {
    if icase {
        a.eq_ignore_ascii_case(b)
    } else {
        a == b
    }
}

fn starts(s: &[u8], p: &[u8], icase: bool) -> bool {
    s.len() >= p.len() && eq_bytes(&s[..p.len()], p, icase)
}

fn ends(s: &[u8], p: &[u8], icase: bool) -> bool {
    s.len() >= p.len() && eq_bytes(&s[s.len() - p.len()..], p, icase)
}

fn contains(s: &[u8], p: &[u8], icase: bool) -> bool {
    p.is_empty() || (s.len() >= p.len() && s.windows(p.len()).any(|w| eq_bytes(w, p, icase)))
}

pub(crate) use crate::sample::map::word;

fn match_str(t: &Test, s: &[u8]) -> bool {
    if let Some(how) = t
        .method
        .file_how()
        .filter(|h| !matches!(h, How::Ip | How::Int))
    {
        if refs(t).any(|f| find_str(&f.snapshot(), how, t.icase, s).is_some()) {
            return true;
        }
    }
    match t.method {
        MatchMethod::Found => true,
        MatchMethod::Reg if live(t).is_some() => false,
        MatchMethod::Reg => t.regexes.iter().any(|re| re.is_match(s)),
        MatchMethod::Bin => match live(t) {
            // (Hex text, read as `-m bin` reads its patterns.)
            Some(r) => r.snapshot().entries.iter().any(|e| {
                crate::config::unhex_bytes(e.key.as_bytes()).is_some_and(|b| b.as_slice() == s)
            }),
            None => t
                .patterns
                .iter()
                .any(|p| matches!(p, Pattern::Bin(b) if b.as_slice() == s)),
        },
        MatchMethod::Len => int_in(t, len_i64(s)),
        MatchMethod::Ip | MatchMethod::Int | MatchMethod::Bool => false,
        m => statics(t).iter().any(|p| {
            let Pattern::Str(p) = p else {
                return false;
            };
            let p = p.as_bytes();
            match m {
                MatchMethod::Str => eq_bytes(s, p, t.icase),
                MatchMethod::Beg => starts(s, p, t.icase),
                MatchMethod::End => ends(s, p, t.icase),
                MatchMethod::Sub => contains(s, p, t.icase),
                MatchMethod::Dir => word(s, p, b"/?", t.icase),
                MatchMethod::Dom => word(s, p, b"/?.:", t.icase),
                _ => false,
            }
        }),
    }
}

/// HAProxy's `method` match: a pattern spelling one of its well-known
/// methods (`GET`, case as written) is that method and matches it alone,
/// whatever `-i`; any other pattern matches only a method HAProxy does not
/// know, compared as a string (`-i` applies).
fn method_matches(t: &Test, m: &[u8]) -> bool {
    const KNOWN: [&[u8]; 8] = [
        b"OPTIONS", b"GET", b"HEAD", b"POST", b"PUT", b"DELETE", b"TRACE", b"CONNECT",
    ];
    let known = KNOWN.contains(&m);
    let one = |p: &[u8]| {
        if KNOWN.contains(&p) {
            p == m
        } else {
            !known && eq_bytes(m, p, t.icase)
        }
    };
    if let Some(r) = live(t) {
        return r.snapshot().entries.iter().any(|e| one(e.key.as_bytes()));
    }
    t.patterns.iter().any(|p| match p {
        Pattern::Str(p) => one(p.as_bytes()),
        _ => false,
    })
}

/// HAProxy's ACL results: FAIL, MISS (failed, but may change with more
/// data) and PASS, in that order; `and`/`or`/`not` as its bitwise
/// combinations.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
enum Tri {
    Fail,
    Miss,
    Pass,
}

impl Tri {
    fn and(self, o: Tri) -> Tri {
        Ord::min(self, o)
    }
    fn or(self, o: Tri) -> Tri {
        Ord::max(self, o)
    }
    fn not(self) -> Tri {
        match self {
            Tri::Fail => Tri::Pass,
            Tri::Pass => Tri::Fail,
            Tri::Miss => Tri::Miss,
        }
    }
}

/// One test with its MISS: a failed test whose samples said they may
/// change (the payload's flag, noted for this test alone and then added
/// to what the caller had).
fn eval3(t: &Test, r: &Ctx<'_>) -> Tri {
    let flag = r.payload.map(|p| p.may_change);
    let before = flag.map(|c| c.replace(false));
    let pass = eval(t, r);
    let changed = flag.is_some_and(std::cell::Cell::get);
    if let (Some(c), Some(b)) = (flag, before) {
        c.set(b || changed);
    }
    if pass {
        Tri::Pass
    } else if changed {
        Tri::Miss
    } else {
        Tri::Fail
    }
}

fn eval(t: &Test, r: &Ctx<'_>) -> bool {
    if let Fetch::Always(b) = &t.fetch {
        return *b;
    }
    if let Fetch::Sample(e) = &t.fetch {
        if let Some(k) = e.stk_alone() {
            // A counter read (`sc_http_req_rate(0) gt N`): one value.
            return k
                .eval(r)
                .is_some_and(|v| match_val(t, v, &Scratch::default()));
        }
        return e.any(r, &mut |v, s| match_val(t, v, s));
    }
    if let Fetch::Src = &t.fetch {
        return match t.method {
            MatchMethod::Found => true,
            _ => {
                let ip = r.src_addr().ip();
                file_ip(t, ip)
                    || statics(t).iter().any(|p| match p {
                        Pattern::Net(n) => n.contains(ip),
                        _ => false,
                    })
            }
        };
    }
    let Some(q) = &r.req else {
        return false;
    };
    match &t.fetch {
        // No path (`*`, an absolute target without one, a target a
        // rewrite left without a slash): no sample, as HAProxy's `path`
        // (`path_reg .*` does not match; tests/diff seed 7).
        Fetch::Path => match path_of(q) {
            [] => false,
            p => match_str(t, p),
        },
        Fetch::Url => match_str(t, q.head.target.get(q.buf)),
        Fetch::Method if t.method == MatchMethod::Str && t.files.is_empty() => {
            method_matches(t, q.head.method_span.get(q.buf))
        }
        Fetch::Method => match_str(t, q.head.method_span.get(q.buf)),
        Fetch::ReqVer => match_str(
            t,
            match q.head.version {
                Version::Http10 => b"1.0",
                Version::Http11 => b"1.1",
            },
        ),
        Fetch::Hdr(name) => {
            // Each comma-separated value of each occurrence, as hdr() does.
            q.head
                .headers
                .iter()
                .filter(|h| h.name.get(q.buf).eq_ignore_ascii_case(name.as_bytes()))
                .flat_map(|h| crate::sample::split_values(h.value.get(q.buf)))
                .any(|v| match_str(t, v))
        }
        Fetch::Always(_) | Fetch::Sample(_) | Fetch::Src => false,
    }
}

fn file_ip(t: &Test, ip: std::net::IpAddr) -> bool {
    refs(t).any(|f| {
        f.snapshot()
            .nets()
            .iter()
            .any(|n| n.as_ref().is_some_and(|n| n.contains(ip)))
    })
}

/// Whether `i` is in one of the test's integer ranges (patterns or
/// `-f` files).
fn int_in(t: &Test, i: i64) -> bool {
    refs(t).any(|f| {
        f.snapshot()
            .ints()
            .iter()
            .any(|r| r.is_some_and(|(lo, hi)| lo <= i && i <= hi))
    }) || statics(t)
        .iter()
        .any(|p| matches!(p, Pattern::Int(lo, hi) if *lo <= i && i <= *hi))
}

fn len_i64(s: &[u8]) -> i64 {
    i64::try_from(s.len()).unwrap_or(i64::MAX)
}

/// Matches one value of a sample-expression ACL.
fn match_val(t: &Test, v: Val, s: &Scratch) -> bool {
    match t.method {
        MatchMethod::Found => true,
        MatchMethod::Bool => match v {
            Val::Bool(b) => b,
            Val::Int(i) => i != 0,
            // HAProxy casts a string as to an integer; a binary value or
            // a method has no cast to either (no match).
            Val::Str => crate::sample::str_to_int(&s.cur).is_some_and(|i| i != 0),
            Val::Bin | Val::Meth | Val::Ip(_) => false,
        },
        MatchMethod::Int => {
            let i = match v {
                Val::Bool(b) => b as i64,
                Val::Int(i) => i,
                Val::Str => match crate::sample::str_to_int(&s.cur) {
                    Some(i) => i,
                    None => return false,
                },
                // An IPv4 address is its 32-bit integer (c_ip2int).
                Val::Ip(std::net::IpAddr::V4(a)) => i64::from(u32::from(a)),
                Val::Bin | Val::Meth | Val::Ip(_) => return false,
            };
            int_in(t, i)
        }
        // HAProxy's `pat_match_len`: the length of the sample cast to a
        // string (a binary value up to its first NUL, `c_bin2str`).
        MatchMethod::Len => match v {
            Val::Str | Val::Meth => int_in(t, len_i64(&s.cur)),
            Val::Bin => {
                let end = s.cur.iter().position(|&c| c == 0).unwrap_or(s.cur.len());
                int_in(t, len_i64(&s.cur[..end]))
            }
            other => {
                let mut text = Vec::new();
                crate::sample::write_text(other, s, &mut text);
                int_in(t, len_i64(&text))
            }
        },
        MatchMethod::Ip => {
            let ip = match v {
                Val::Ip(ip) => ip,
                // HAProxy's c_str2addr (`10.0.0.1:80` is 10.0.0.1).
                Val::Str => match crate::sample::str_to_addr(&s.cur) {
                    Some(ip) => ip,
                    None => return false,
                },
                // HAProxy's cast: the integer's low 32 bits as an IPv4
                // address (`hex2i` of a SOCKS4 request's address bytes).
                Val::Int(i) => std::net::IpAddr::V4((i as u32).into()),
                _ => return false,
            };
            file_ip(t, ip)
                || statics(t)
                    .iter()
                    .any(|p| matches!(p, Pattern::Net(n) if n.contains(ip)))
        }
        _ => match v {
            Val::Str | Val::Bin | Val::Meth => match_str(t, &s.cur),
            other => {
                let mut text = Vec::new();
                crate::sample::write_text(other, s, &mut text);
                match_str(t, &text)
            }
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::parse_str;
    use crate::http1::{parse_request, Limits, Status};

    fn with_req<R>(raw: &str, f: impl FnOnce(&ReqView<'_>) -> R) -> R {
        let buf = raw.as_bytes();
        let Status::Complete(head) = parse_request(buf, &Limits::default()).unwrap() else {
            panic!("partial");
        };
        let dst = || None;
        let v = Ctx {
            src: "10.1.2.3:1234".parse().unwrap(),
            dst: &dst,
            fe: "f",
            be: None,
            srv: None,
            tls: false,
            sni: None,
            client_cert: None,
            fc: None,
            early: false,
            req: Some(crate::sample::Req {
                buf,
                head: &head,
                body: b"",
            }),
            res: None,
            vars: None,
            stk: None,
            payload: None,
            res_body: None,
        };
        f(&v)
    }

    /// Evaluates the condition of the proxy's first `use_backend` line.
    fn check(acls: &str, cond: &str, raw: &str) -> bool {
        let text = format!(
            "defaults\n mode http\nfrontend f\n bind :8080\n{acls}\n use_backend b if {cond}\nbackend b\n serve-files /tmp\n"
        );
        let cfg = parse_str("t.cfg", &text).unwrap_or_else(|e| panic!("{e:?}"));
        let fe = cfg.frontend("f").unwrap();
        let m = Matcher::for_proxy(fe).unwrap();
        let c = m.cond(fe.use_backends[0].cond.as_ref().unwrap()).unwrap();
        with_req(raw, |v| m.holds(Some(&c), v))
    }

    const GET: &str =
        "GET /img/logo.PNG?x=1 HTTP/1.1\r\nHost: www.Example.com\r\nX-A: one, two\r\n\r\n";

    /// `-m bin`: hex patterns equal to the sample's bytes (the whole of
    /// them, as HAProxy's `pat_match_bin`).
    #[test]
    fn binary_match() {
        assert!(check(
            "",
            "{ req.hdr(host),lower -m bin 7777772E6578616D706C652E636F6D }",
            GET
        ));
        assert!(check("", "{ path -m bin 2F696D672F6C6F676F2E504E47 }", GET));
        assert!(!check("", "{ path -m bin 2F696D67 }", GET));
        for bad in ["{ path -m bin 6G }", "{ path -i -m bin 41 }"] {
            let text = format!(
                "defaults\n mode http\nfrontend f\n bind :8080\n use_backend b if {bad}\nbackend b\n serve-files /tmp\n"
            );
            assert!(parse_str("t.cfg", &text).is_err(), "{bad}");
        }
    }

    /// `-m len` and the derived `_len` ACLs (HAProxy's `pat_match_len`,
    /// ranges and operators as `-m int`), the derived families read
    /// through their sample, and string criteria cast to an integer, an
    /// address or a boolean (`c_str2int`, `c_str2addr`).
    #[test]
    fn lengths_and_casts() {
        let req = "GET /ab/c?x=12&y=a HTTP/1.1\r\nHost: h.com\r\nX-N: 42z\r\nX-IP: 10.1.2.3\r\nCookie: a=xyz\r\n\r\n";
        for (acl, want) in [
            ("{ path_len 5 }", true),
            ("{ path_len lt 5 }", false),
            ("{ path -m len 4:6 }", true),
            ("{ url_len ge 14 }", true),
            ("{ base_len 10 }", true),
            ("{ hdr_len(host) 5 }", true),
            ("{ cook_len(a) 3 }", true),
            ("{ urlp_len(x) 2 }", true),
            ("{ method -m len 3 }", true),
            ("{ int(-12) -m len 3 }", true),
            ("{ cook_beg(a) xy }", true),
            ("{ base_end /ab/c }", true),
            ("{ urlp_beg(y) b }", false),
            ("{ hdr(x-n) -m int 42 }", true),
            ("{ hdr(x-n) -m bool }", true),
            ("{ hdr(x-ip) -m ip 10.0.0.0/8 }", true),
            ("{ path -m ip 10.0.0.0/8 }", false),
            // No digit: `read_int64` gives 0.
            ("{ path -m int 0 }", true),
        ] {
            assert_eq!(check("", acl, req), want, "{acl}");
        }
    }

    /// HAProxy's `method` patterns: a well-known method spelled as such
    /// matches that method only (`-i` or not); other patterns match only
    /// methods HAProxy does not know.
    #[test]
    fn method_patterns() {
        let patch = "patch /x HTTP/1.1\r\nHost: a\r\n\r\n";
        assert!(check(" acl m method GET", "m", GET));
        assert!(!check(" acl m method -i get", "m", GET));
        assert!(!check(" acl m method get", "m", GET));
        assert!(check(" acl m method -i PATCH", "m", patch));
        assert!(!check(" acl m method PATCH", "m", patch));
        assert!(!check(" acl m method -i GET", "m", patch));
        assert!(check(" acl m method -m beg G", "m", GET));
        // With `-m`, the method is a string.
        assert!(check(" acl m method -m str -i get", "m", GET));
        assert!(!check(" acl m method -m str get", "m", GET));
    }

    /// `be_conn` without a name in any rule of a frontend: refused, as
    /// HAProxy 2.6 (the frontend has no backend capability).
    #[test]
    fn be_conn_needs_a_backend() {
        let cfg = |sect: &str, rule: &str| {
            format!(
                "defaults\n mode http\n{sect} f\n bind :8080\n {rule}\n default_backend b\nbackend b\n serve-files /tmp\n"
            )
        };
        for rule in [
            "http-response set-header x %[be_conn]",
            "tcp-request content accept if { be_conn gt 0 }",
        ] {
            let e = parse_str("t.cfg", &cfg("frontend", rule)).err();
            assert!(
                format!("{e:?}").contains("no backend capability"),
                "{rule}: {e:?}"
            );
            assert!(parse_str("t.cfg", &cfg("listen", rule)).is_ok(), "{rule}");
        }
        let named = cfg("frontend", "http-response set-header x %[be_conn(b)]");
        assert!(parse_str("t.cfg", &named).is_ok());
    }

    /// IP patterns across families, as HAProxy's `pat_match_ip`.
    #[test]
    fn ip_across_families() {
        let req = |ip: &str| format!("GET / HTTP/1.1\r\nHost: a\r\nX-IP: {ip}\r\n\r\n");
        assert!(check(
            " acl a hdr_ip(x-ip) ::ffff:192.168.1.77",
            "a",
            &req("192.168.1.77")
        ));
        assert!(check(
            " acl a hdr_ip(x-ip) ::ffff:192.168.0.0/112",
            "a",
            &req("192.168.1.77")
        ));
        assert!(check(
            " acl a hdr_ip(x-ip) 10.0.0.0/8",
            "a",
            &req("::ffff:10.1.2.3")
        ));
        assert!(check(
            " acl a hdr_ip(x-ip) 10.0.0.0/8",
            "a",
            &req("::10.1.2.3")
        ));
        assert!(check(
            " acl a hdr_ip(x-ip) 10.0.0.0/8",
            "a",
            &req("2002:a01:203::1")
        ));
        assert!(!check(
            " acl a hdr_ip(x-ip) 10.0.0.0/8",
            "a",
            &req("2001:a01:203::1")
        ));
        assert!(!check(
            " acl a hdr_ip(x-ip) 2001:db8::/32",
            "a",
            &req("10.1.2.3")
        ));
        // `-n` (no DNS resolution of patterns) changes nothing here.
        assert!(check(" acl a src -n 10.1.2.3", "a", GET));
    }

    #[test]
    fn path_methods() {
        assert!(check(" acl a path /img/logo.PNG", "a", GET));
        assert!(!check(" acl a path /img/logo.png", "a", GET));
        assert!(check(" acl a path -i /img/logo.png", "a", GET));
        assert!(check(" acl a path_beg /img/", "a", GET));
        assert!(check(" acl a path_end -i .png", "a", GET));
        assert!(!check(" acl a path_end .png", "a", GET));
        assert!(check(" acl a path_sub logo", "a", GET));
        assert!(check(" acl a path_dir img", "a", GET));
        assert!(!check(" acl a path_dir im", "a", GET));
        assert!(check(" acl a path_reg ^/img/[a-z]+\\.PNG$", "a", GET));
        assert!(check(" acl a url_end x=1", "a", GET));
    }

    #[test]
    fn headers_methods_src_and_logic() {
        assert!(check(" acl h hdr(host) -i www.example.com", "h", GET));
        assert!(!check(" acl h hdr(host) www.example.com", "h", GET));
        assert!(check(" acl h hdr_dom(host) -i example", "h", GET));
        assert!(check(" acl x hdr(x-a) two", "x", GET));
        assert!(check(" acl m method GET HEAD", "m", GET));
        assert!(!check(" acl m method POST", "m", GET));
        assert!(check(" acl s src 10.0.0.0/8", "s", GET));
        assert!(!check(" acl s src 192.168.0.0/16", "s", GET));
        assert!(check(
            " acl m method POST\n acl p path_beg /img",
            "m || p",
            GET
        ));
        assert!(!check(
            " acl m method POST\n acl p path_beg /img",
            "m p",
            GET
        ));
        assert!(check(
            " acl m method POST\n acl p path_beg /img",
            "!m p",
            GET
        ));
        assert!(check("", "{ path_beg /img }", GET));
        assert!(check(
            " acl a path_beg /img\n acl a path_beg /css",
            "a",
            GET
        ));
    }

    #[test]
    fn sample_expression_acls() {
        let get = "GET /A/b?x=1 HTTP/1.1\r\nHost: www.Example.com\r\nX-N: 1\r\nX-N: 2\r\nCookie: s=abc; t=2\r\n\r\n";
        // Integers: default match is int, with operators and ranges.
        assert!(check(" acl n req.hdr_cnt(x-n) gt 1", "n", get));
        assert!(!check(" acl n req.hdr_cnt(x-n) gt 2", "n", get));
        assert!(check(" acl n req.hdr_cnt(x-n) 1:3", "n", get));
        assert!(check(" acl n req.hdr_cnt(x-n) eq 2", "n", get));
        assert!(check(" acl n req.hdr_cnt(x-n) le 2", "n", get));
        assert!(!check(" acl n req.hdr_cnt(x-n) lt 2", "n", get));
        assert!(check(" acl n req.hdr_cnt(x-n) 5 2", "n", get));
        // hdr_val: each value as an integer.
        assert!(check(" acl n hdr_val(x-n) 1", "n", get));
        assert!(check(" acl n req.hdr_val(x-n) gt 1", "n", get));
        assert!(!check(" acl n hdr_val(x-n) gt 2", "n", get));
        assert!(!check(" acl n hdr_val(x-n,2) 1", "n", get));
        // Booleans.
        assert!(!check(" acl t ssl_fc", "t", get));
        assert!(check(" acl t ssl_fc", "!t", get));
        assert!(check(" acl t bool(1)", "t", get));
        // Strings through converters, and -m on them.
        assert!(check(" acl p path,lower /a/b", "p", get));
        assert!(check(" acl p path,lower -m beg /a/", "p", get));
        assert!(check(" acl c req.cook(s) abc", "c", get));
        assert!(check(" acl c cook(t) -m int 2", "c", get));
        assert!(check(
            " acl h req.hdr(host),lower -m end .example.com",
            "h",
            get
        ));
        // Every value of a header in an ACL, as HAProxy does.
        assert!(check(" acl h req.hdr(x-n) 1", "h", get));
        assert!(check(" acl h req.hdr(x-n) 2", "h", get));
        assert!(!check(" acl h req.hdr(x-n,1) 2", "h", get));
        // Addresses.
        assert!(check(" acl s src,ipmask(8) 10.0.0.0", "s", get));
        assert!(check(" acl s str(10.9.9.9) -m ip 10.0.0.0/8", "s", get));
        assert!(check(" acl q query -m sub x=", "q", get));
        assert!(check(" acl l path,length 4", "l", get));
        // A missing sample never matches.
        assert!(!check(" acl m req.hdr(nope) -m found", "m", get));
        assert!(check(" acl m req.hdr(host) -m found", "m", get));
    }

    #[test]
    fn header_edit_values_are_sanitised() {
        let e = HeaderEdit {
            op: EditOp::Set,
            name: "X".into(),
            value: crate::sample::LogFormat::parse(
                "%[str(YQ0KYgBj),b64dec] ",
                crate::sample::Scope::Response,
            )
            .unwrap(),
        };
        let dst = || None;
        let head = crate::http1::RequestHead::default();
        let c = Ctx {
            src: "10.1.2.3:1234".parse().unwrap(),
            dst: &dst,
            fe: "f",
            be: None,
            srv: None,
            tls: false,
            sni: None,
            client_cert: None,
            fc: None,
            early: false,
            req: Some(crate::sample::Req {
                buf: b"",
                head: &head,
                body: b"",
            }),
            res: None,
            vars: None,
            stk: None,
            payload: None,
            res_body: None,
        };
        let mut out = Vec::new();
        e.write_field(&c, &mut out);
        // "a\r\nb\0c" decoded: the binary value ends at its NUL (HAProxy's
        // cast to a string), CR and LF dropped, the trailing space kept (as
        // HAProxy sends it).
        assert_eq!(out, b"X: ab \r\n");
    }

    #[test]
    fn acls_are_checked_against_where_they_are_used() {
        let text = "defaults\n mode http\nfrontend f\n bind :8080\n acl st status 200\n acl p path /a\n use_backend b if st\nbackend b\n serve-files /tmp\n";
        let cfg = parse_str("t.cfg", text).unwrap();
        let fe = cfg.frontend("f").unwrap();
        let m = Matcher::for_proxy(fe).unwrap();
        let c = fe.use_backends[0].cond.as_ref().unwrap();
        let e = m.cond(c).err().unwrap();
        assert!(
            e.message.contains("ACL 'st' reads the response"),
            "{}",
            e.message
        );
        assert!(m.cond_response(c).is_ok());
        let p = Condition {
            terms: vec![vec![crate::config::CondTerm {
                negate: false,
                acl: AclRef::Named {
                    name: "p".into(),
                    index: 1,
                },
            }]],
            ..c.clone()
        };
        assert!(m.cond(&p).is_ok());
        let e = m.cond_response(&p).err().unwrap();
        assert!(e.message.contains("reads the request"), "{}", e.message);
    }

    #[test]
    fn word_matching() {
        assert!(word(b"/a/img/b", b"/img/", b"/", false));
        assert!(word(b"img", b"img", b"/", false));
        assert!(!word(b"/images", b"img", b"/", false));
        assert!(word(b"www.example.com", b"example", b"/.", false));
        assert!(!word(b"x", b"/", b"/", false));
        // HAProxy 2.6: `?` ends a directory, `:` a domain label too.
        assert!(word(b"/a?x=1", b"/a", b"/?", false));
        assert!(word(b"example.com:8080", b"com", b"/?.:", false));
    }
}
