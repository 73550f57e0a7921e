//! Request heads: RFC 9113 §8 checks on a decoded header list, and the
//! translation to an HTTP/1.1 head for servers behind ebb.
//!
//! A request that fails any check is *malformed* (§8.1.1): a stream error
//! PROTOCOL_ERROR, never forwarded. The checks:
//! - pseudo-header fields: only `:method`, `:scheme`, `:authority`,
//!   `:path`, each at most once, all before the regular fields (§8.3);
//!   `:method`, `:scheme` and a non-empty `:path` required, except CONNECT
//!   (`:method` and `:authority` only, §8.5); `:path` is `*` only with
//!   OPTIONS, else starts with `/`;
//! - names: not empty, no upper-case letter, no byte outside a token
//!   (§8.2.1: which covers CR, LF, NUL, SP and `:` past the start);
//!   values: no NUL, CR or LF, no leading or trailing SP/HTAB (§8.2.1);
//! - connection-specific fields refused: `connection`, `keep-alive`,
//!   `proxy-connection`, `transfer-encoding`, `upgrade`; `te` other than
//!   `trailers` (§8.2.2);
//! - `content-length`: digits only, repeats must agree; the DATA total is
//!   checked against it by the connection (§8.1.1);
//! - `host` with `:authority` must agree (§8.3.1 SHOULD);
//! - trailers: no pseudo-header fields (§8.1).
//!
//! Response heads (the client role, [`ResponseHead`]) get the same name,
//! value, connection-specific and content-length rules, with `:status`
//! (three digits, not 101, §8.3.2 and §8.6) as their only pseudo-header.

use super::hpack::HeaderList;
use crate::http1::{BodyFraming, HeaderSpan, Limits, Method, Span, TargetForm, Version};

/// How much of the reading of its HTTP/1.1 form
/// [`RequestHead::write_h1_head`] did.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum Written {
    /// Nothing: the HTTP/1 parser is to read the bytes (it would refuse
    /// something in them, and says what).
    Parse,
    /// The request line's method and target spans, and the fields' spans:
    /// the head is to be completed as after a parse
    /// (`http1::complete_request_into`).
    Spans(Span, Span),
    /// The whole `http1::RequestHead`, as the parser and its completion
    /// would have made it.
    Complete,
}

/// Why a head is malformed (all are stream errors PROTOCOL_ERROR).
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum Malformed {
    /// An unknown, repeated, misplaced or response pseudo-header.
    PseudoHeader,
    /// A required pseudo-header missing, or `:path` invalid for the method.
    MissingPseudo,
    /// A name with an upper-case letter or a non-token byte, or empty.
    BadName,
    /// A value with NUL/CR/LF or surrounding whitespace.
    BadValue,
    /// A connection-specific field, or `te` other than `trailers`.
    ConnectionSpecific,
    /// An invalid or conflicting `content-length`.
    ContentLength,
    /// Two `host` fields.
    HostMismatch,
    /// `:method` is not a token: answered 400 before the reset, as
    /// HAProxy does (its reg-test http-messaging/h2_desync_attacks).
    BadMethod,
    /// `:scheme` is not an RFC 3986 scheme (`ALPHA *(ALPHA / DIGIT / "+" /
    /// "-" / ".")`): answered 400 as well.
    BadScheme,
}

impl Malformed {
    /// Whether the stream gets a `400` answer before its reset (the
    /// request's framing was sound; only its request line is not).
    pub fn answered_400(self) -> bool {
        matches!(self, Malformed::BadMethod | Malformed::BadScheme)
    }
}

/// A checked request head: the decoded list plus where its parts are.
#[derive(Clone, Debug, Default)]
pub struct RequestHead {
    /// The fields as decoded (pseudo-headers first).
    pub list: HeaderList,
    method: usize,
    scheme: Option<usize>,
    authority: Option<usize>,
    path: Option<usize>,
    /// `:protocol` (RFC 8441 extended CONNECT).
    protocol: Option<usize>,
    host: Option<usize>,
    /// Index of the first regular field.
    first_regular: usize,
    /// The declared body length.
    pub content_length: Option<u64>,
    /// The size of the field block on the wire (HEADERS and CONTINUATION
    /// payloads, padding excluded), set by the connection.
    pub wire_len: usize,
    /// Set by the connection: this head came in the same bytes as the
    /// request head before it on the connection, on the same HPACK table,
    /// and is that head again, reused without a decoding or checks (so
    /// what the caller made of the one before holds for it).
    pub repeated: bool,
    /// What the checks saw on their way, for the HTTP/1.1 form: every
    /// value is of HTTP/1 field-value bytes (no control byte but HTAB, no
    /// DEL); `content-length` fields; a `te` (`trailers`), a `cookie`,
    /// an `expect: 100-continue` field.
    h1_values: bool,
    /// Whether the request line is written in absolute form
    /// ([`RequestHead::absolute_prefix`]), decided once by the checks.
    absolute: bool,
    lengths: u32,
    te: bool,
    cookie: bool,
    expect_continue: bool,
}

const fn is_tchar(b: u8) -> bool {
    matches!(b, b'!' | b'#' | b'$' | b'%' | b'&' | b'\'' | b'*' | b'+' | b'-' | b'.'
        | b'^' | b'_' | b'`' | b'|' | b'~' | b'0'..=b'9' | b'a'..=b'z')
}

/// [`is_tchar`] for every byte (one load a byte).
static NAME_BYTE: [bool; 256] = {
    let mut t = [false; 256];
    let mut i = 0;
    while i < 256 {
        t[i] = is_tchar(i as u8);
        i += 1;
    }
    t
};

/// §8.2.1 name rule (lower-case tokens only). No early exit: a valid
/// name, the common case, is read whole anyway.
pub fn valid_name(n: &[u8]) -> bool {
    !n.is_empty() && n.iter().fold(true, |ok, &b| ok & NAME_BYTE[usize::from(b)])
}

/// §8.2.1 value rule (surrounding whitespace included: see
/// [`props::EDGE_WS`] for what a regular field's gets).
pub fn valid_value(v: &[u8]) -> bool {
    value_bits(v) & (BAD_H2 | EDGE_WS) == 0
}

/// [`value_bits`]: the value breaks §8.2.1.
const BAD_H2: u8 = 1;
/// [`value_bits`]: the value holds a byte HTTP/1 refuses in a field value
/// (a control byte but HTAB, or DEL; NUL, CR and LF are both).
const BAD_H1: u8 = 2;
/// [`value_bits`]: the value starts or ends with SP or HTAB (§8.2.1:
/// malformed; a regular field's is trimmed instead, see
/// [`props::EDGE_WS`]).
const EDGE_WS: u8 = 16;

/// The bits ([`BAD_H2`], [`BAD_H1`]) of every byte in a value.
static VALUE_BYTE: [u8; 256] = VALUE_BYTE_C;
/// [`VALUE_BYTE`] for `const fn`s.
const VALUE_BYTE_C: [u8; 256] = {
    let mut t = [0u8; 256];
    let mut i = 0;
    while i < 256 {
        let b = i as u8;
        let h2 = b == 0 || b == b'\r' || b == b'\n';
        let h1 = (b < b' ' && b != b'\t') || b == 0x7f;
        t[i] = ((h2 as u8) * BAD_H2) | ((h1 as u8) * BAD_H1);
        i += 1;
    }
    t
};

/// The rules `v` breaks, as bits ([`BAD_H2`], [`BAD_H1`], [`EDGE_WS`]),
/// in one pass (one load a byte, no early exit).
fn value_bits(v: &[u8]) -> u8 {
    let bad = v
        .iter()
        .fold(0u8, |bad, &b| bad | VALUE_BYTE[usize::from(b)]);
    let ws = matches!(v.first(), Some(b' ' | b'\t')) || matches!(v.last(), Some(b' ' | b'\t'));
    bad | (u8::from(ws) * EDGE_WS)
}

/// What the §8 checks need to know of one field, as bits: computed once
/// per field the decoder yields, and kept with a dynamic table entry (and
/// built into the static table), so that a field sent as an index is not
/// read byte by byte again: its name's kind (`P_KIND`), then facts about
/// its name and value. They depend on the field's bytes alone.
pub mod props {
    /// The low bits: which field it is, for the checks.
    pub const KIND: u16 = 0xf;
    /// A regular field of no interest to the checks.
    pub const OTHER: u16 = 0;
    pub const METHOD: u16 = 1;
    pub const SCHEME: u16 = 2;
    pub const AUTHORITY: u16 = 3;
    pub const PATH: u16 = 4;
    pub const PROTOCOL: u16 = 5;
    /// A name starting with `:` that requests do not have.
    pub const PSEUDO: u16 = 6;
    pub const CONTENT_LENGTH: u16 = 7;
    pub const TE: u16 = 8;
    pub const COOKIE: u16 = 9;
    pub const EXPECT: u16 = 10;
    pub const HOST: u16 = 11;
    /// The name is not a lower-case token (or is empty).
    pub const BAD_NAME: u16 = 1 << 4;
    /// The value breaks §8.2.1: NUL, CR, LF; for a pseudo-header field
    /// also surrounding SP/HTAB.
    pub const BAD_H2: u16 = 1 << 5;
    /// The value holds a byte HTTP/1 refuses in a field value.
    pub const BAD_H1: u16 = 1 << 6;
    /// A connection-specific field (§8.2.2; `te` other than `trailers`).
    pub const CONN_SPECIFIC: u16 = 1 << 7;
    /// Sent "never indexed" (§6.2.3): of the representation, not of the
    /// bytes (never kept in a table).
    pub const NEVER: u16 = 1 << 8;
    /// `:method` that is not a token.
    pub const BAD_METHOD: u16 = 1 << 9;
    /// `:scheme` that is not an RFC 3986 scheme.
    pub const BAD_SCHEME: u16 = 1 << 10;
    /// `:scheme` `http` or `https` (any case).
    pub const WEB_SCHEME: u16 = 1 << 11;
    /// `:authority` an HTTP/1 absolute URI may carry (not empty, no
    /// leading `:`, a valid authority).
    pub const ABS_AUTHORITY: u16 = 1 << 12;
    /// `expect: 100-continue` (any case).
    pub const CONTINUE: u16 = 1 << 13;
    /// `:path` or `:authority` of the bytes an HTTP/1 request target
    /// allows (`http1::valid_target_bytes`).
    pub const TARGET_OK: u16 = 1 << 14;
    /// A regular field's value starts or ends with SP or HTAB: §8.2.1
    /// calls it malformed, HAProxy 2.6 (since its fix of February 2025,
    /// "h2: always trim leading and trailing LWS in header values",
    /// backported to every stable branch) trims it, and so does ebb:
    /// [`crate::h2::hpack::HeaderList`] keeps the value without them, in
    /// requests, responses and trailers alike.
    pub const EDGE_WS: u16 = 1 << 15;
}

const fn const_eq(a: &[u8], b: &[u8]) -> bool {
    if a.len() != b.len() {
        return false;
    }
    let mut i = 0;
    while i < a.len() {
        if a[i] != b[i] {
            return false;
        }
        i += 1;
    }
    true
}

const fn const_eq_ignore_case(a: &[u8], b: &[u8]) -> bool {
    if a.len() != b.len() {
        return false;
    }
    let mut i = 0;
    while i < a.len() {
        if !a[i].eq_ignore_ascii_case(&b[i]) {
            return false;
        }
        i += 1;
    }
    true
}

/// The names the checks tell apart, and their kinds.
const KINDS: [(&[u8], u16); 15] = [
    (b":method", props::METHOD),
    (b":scheme", props::SCHEME),
    (b":authority", props::AUTHORITY),
    (b":path", props::PATH),
    (b":protocol", props::PROTOCOL),
    (b"content-length", props::CONTENT_LENGTH),
    (b"te", props::TE),
    (b"cookie", props::COOKIE),
    (b"expect", props::EXPECT),
    (b"host", props::HOST),
    // Connection-specific (§8.2.2): OTHER, flagged.
    (b"connection", props::CONN_SPECIFIC),
    (b"keep-alive", props::CONN_SPECIFIC),
    (b"proxy-connection", props::CONN_SPECIFIC),
    (b"transfer-encoding", props::CONN_SPECIFIC),
    (b"upgrade", props::CONN_SPECIFIC),
];

/// The [`props`] bits that follow from a field's name alone: its kind,
/// [`props::BAD_NAME`] (`name_ok`: whether it is a lower-case token), and
/// [`props::CONN_SPECIFIC`] of a connection-specific name. A `const fn`
/// for the static table.
const fn name_props(n: &[u8], name_ok: bool) -> u16 {
    let mut p = props::OTHER;
    let mut i = 0;
    while i < KINDS.len() {
        if const_eq(n, KINDS[i].0) {
            p = KINDS[i].1;
            break;
        }
        i += 1;
    }
    let pseudo = !n.is_empty() && n[0] == b':';
    if p == props::OTHER && pseudo {
        p = props::PSEUDO;
    }
    if !pseudo && !name_ok {
        p |= props::BAD_NAME;
    }
    p
}

/// [`name_props`] of `n` at compile time (the static table's names).
pub(crate) const fn const_name_props(n: &[u8]) -> u16 {
    let mut name_ok = !n.is_empty();
    let mut i = 0;
    while i < n.len() {
        name_ok &= is_tchar(n[i]);
        i += 1;
    }
    name_props(n, name_ok)
}

/// [`name_props`] `np` with the bits of value `v` added, but the parts
/// that need `http1`: `vbits` is the value's [`value_bits`].
const fn value_props(np: u16, v: &[u8], vbits: u8) -> u16 {
    let mut p = np;
    if vbits & BAD_H2 != 0 {
        p |= props::BAD_H2;
    }
    if vbits & EDGE_WS != 0 {
        // A pseudo-header field's value is not trimmed: malformed.
        p |= if matches!(
            np & props::KIND,
            props::METHOD
                | props::SCHEME
                | props::AUTHORITY
                | props::PATH
                | props::PROTOCOL
                | props::PSEUDO
        ) {
            props::BAD_H2
        } else {
            props::EDGE_WS
        };
    }
    if vbits & BAD_H1 != 0 {
        p |= props::BAD_H1;
    }
    match p & props::KIND {
        props::TE if !const_eq(v, b"trailers") => p |= props::CONN_SPECIFIC,
        props::METHOD => {
            let mut ok = !v.is_empty();
            let mut i = 0;
            while i < v.len() {
                ok &= is_tchar(v[i]) || v[i].is_ascii_uppercase();
                i += 1;
            }
            if !ok {
                p |= props::BAD_METHOD;
            }
        }
        props::SCHEME => {
            let mut ok = !v.is_empty() && v[0].is_ascii_alphabetic();
            let mut i = 0;
            while i < v.len() {
                let c = v[i];
                ok &= c.is_ascii_alphanumeric() || matches!(c, b'+' | b'-' | b'.');
                i += 1;
            }
            if !ok {
                p |= props::BAD_SCHEME;
            }
            if const_eq_ignore_case(v, b"http") || const_eq_ignore_case(v, b"https") {
                p |= props::WEB_SCHEME;
            }
        }
        props::EXPECT if const_eq_ignore_case(v, b"100-continue") => p |= props::CONTINUE,
        _ => {}
    }
    p
}

/// [`field_props`] but the parts that need a table or `http1`: `vbits`
/// is the value's [`value_bits`], `name_ok` whether the name is a
/// lower-case token. A `const fn` for the static table.
const fn props_with(n: &[u8], v: &[u8], vbits: u8, name_ok: bool) -> u16 {
    value_props(name_props(n, name_ok), v, vbits)
}

/// [`props_with`] at compile time (the static table's fields).
pub(crate) const fn const_props(n: &[u8], v: &[u8]) -> u16 {
    let mut vbits = 0u8;
    let mut i = 0;
    while i < v.len() {
        vbits |= VALUE_BYTE_C[v[i] as usize];
        i += 1;
    }
    if !v.is_empty() && (matches!(v[0], b' ' | b'\t') || matches!(v[v.len() - 1], b' ' | b'\t')) {
        vbits |= EDGE_WS;
    }
    let mut name_ok = !n.is_empty();
    let mut i = 0;
    while i < n.len() {
        name_ok &= is_tchar(n[i]);
        i += 1;
    }
    // (No static entry is an authority one could use: its value is empty.)
    let mut p = props_with(n, v, vbits, name_ok);
    if matches!(p & props::KIND, props::PATH | props::AUTHORITY) {
        // No static value holds a `%` (whose escapes this would not read).
        let mut ok = true;
        let mut i = 0;
        while i < v.len() {
            ok &= crate::http1::target_byte(v[i]) && v[i] != b'%';
            i += 1;
        }
        if ok {
            p |= props::TARGET_OK;
        }
    }
    p
}

/// The [`props`] of field `n`: `v`.
pub(crate) fn field_props(n: &[u8], v: &[u8]) -> u16 {
    field_props_named(name_props(n, valid_name(n)), v)
}

/// [`TARGET_BYTE`]: a byte `http1::target_byte` refuses.
const NOT_TARGET: u8 = 4;
/// [`TARGET_BYTE`]: `%`, whose escape is checked apart.
const PERCENT: u8 = 8;

/// [`VALUE_BYTE`]'s bits, [`NOT_TARGET`] and [`PERCENT`] of every byte:
/// the value rules and the target's bytes read in one pass (built from
/// the HTTP/1 parser's own `target_byte`).
static TARGET_BYTE: [u8; 256] = {
    let mut t = [0u8; 256];
    let mut i = 0;
    while i < 256 {
        let b = i as u8;
        t[i] = VALUE_BYTE_C[i]
            | (!crate::http1::target_byte(b) as u8 * NOT_TARGET)
            | ((b == b'%') as u8 * PERCENT);
        i += 1;
    }
    t
};

/// [`field_props`] of a field whose name's [`name_props`] are `np`
/// (known from the static table: the name is not read again).
pub(crate) fn field_props_named(np: u16, v: &[u8]) -> u16 {
    if !matches!(np & props::KIND, props::PATH | props::AUTHORITY) {
        return value_props(np, v, value_bits(v));
    }
    // `:path` or `:authority`: [`value_bits`] and
    // `http1::valid_target_bytes` in one pass (the escapes, if any, are
    // read again by the latter).
    let bits = v
        .iter()
        .fold(0u8, |bad, &b| bad | TARGET_BYTE[usize::from(b)]);
    let ws = matches!(v.first(), Some(b' ' | b'\t')) || matches!(v.last(), Some(b' ' | b'\t'));
    let vbits = (bits & (BAD_H2 | BAD_H1)) | (u8::from(ws) * EDGE_WS);
    let mut p = value_props(np, v, vbits);
    if p & props::KIND == props::AUTHORITY
        && !v.is_empty()
        && v[0] != b':'
        && crate::http1::is_valid_authority(v, false)
    {
        p |= props::ABS_AUTHORITY;
    }
    let target_ok =
        bits & NOT_TARGET == 0 && (bits & PERCENT == 0 || crate::http1::valid_target_bytes(v));
    if target_ok {
        p |= props::TARGET_OK;
    }
    p
}

pub(crate) fn parse_cl(v: &[u8]) -> Option<u64> {
    if v.is_empty() || v.len() > 19 || !v.iter().all(u8::is_ascii_digit) {
        return None;
    }
    v.iter().try_fold(0u64, |a, &d| {
        a.checked_mul(10)?.checked_add(u64::from(d - b'0'))
    })
}

/// A `content-length` value that is a list of one length, repeated or
/// not (`5`, `5, 5`, `5,5`): that length; empty members, a member that is
/// not digits or two lengths are `None`.
pub(crate) fn parse_cl_list(v: &[u8]) -> Option<u64> {
    let mut cl = None;
    for m in v.split(|&b| b == b',') {
        let n = parse_cl(m.trim_ascii())?;
        if cl.is_some_and(|c| c != n) {
            return None;
        }
        cl = Some(n);
    }
    cl
}

/// §8.2.2 connection-specific fields.
pub fn connection_specific(name: &[u8], value: &[u8]) -> bool {
    match name {
        b"connection" | b"keep-alive" | b"proxy-connection" | b"transfer-encoding" | b"upgrade" => {
            true
        }
        b"te" => value != b"trailers",
        _ => false,
    }
}

impl RequestHead {
    /// Checks `self.list` (just decoded) and records where its parts are.
    pub fn check(&mut self) -> Result<(), Malformed> {
        self.method = usize::MAX;
        self.scheme = None;
        self.authority = None;
        self.path = None;
        self.protocol = None;
        self.host = None;
        self.content_length = None;
        self.first_regular = self.list.len();
        self.lengths = 0;
        self.te = false;
        self.cookie = false;
        self.expect_continue = false;
        self.absolute = false;
        // Each field's name and value were read once, as the decoder gave
        // them (or when they entered its table): their facts are bits.
        let mut seen = 0u16;
        let mut regular = false;
        for (i, &p) in self.list.props().iter().enumerate() {
            let kind = p & props::KIND;
            let slot = match kind {
                props::METHOD => {
                    if regular || self.method != usize::MAX {
                        return Err(Malformed::PseudoHeader);
                    }
                    self.method = i;
                    continue;
                }
                props::SCHEME => &mut self.scheme,
                props::AUTHORITY => &mut self.authority,
                props::PATH => &mut self.path,
                props::PROTOCOL => &mut self.protocol,
                props::PSEUDO => return Err(Malformed::PseudoHeader),
                _ => {
                    if !regular {
                        regular = true;
                        self.first_regular = i;
                    }
                    if p & props::BAD_NAME != 0 {
                        return Err(Malformed::BadName);
                    }
                    if p & props::BAD_H2 != 0 {
                        return Err(Malformed::BadValue);
                    }
                    if p & props::CONN_SPECIFIC != 0 {
                        return Err(Malformed::ConnectionSpecific);
                    }
                    seen |= p;
                    match kind {
                        props::CONTENT_LENGTH => {
                            let v = self.list.value(i);
                            let cl = parse_cl(v).ok_or(Malformed::ContentLength)?;
                            if self.content_length.is_some_and(|c| c != cl) {
                                return Err(Malformed::ContentLength);
                            }
                            self.content_length = Some(cl);
                            self.lengths += 1;
                        }
                        props::TE => self.te = true,
                        props::COOKIE => self.cookie = true,
                        props::EXPECT => self.expect_continue |= p & props::CONTINUE != 0,
                        props::HOST => {
                            if self.host.is_some() {
                                return Err(Malformed::HostMismatch);
                            }
                            self.host = Some(i);
                        }
                        _ => {}
                    }
                    continue;
                }
            };
            if regular || slot.is_some() {
                return Err(Malformed::PseudoHeader);
            }
            *slot = Some(i);
            if p & props::BAD_H2 != 0 {
                return Err(Malformed::BadValue);
            }
            seen |= p;
        }
        if self.method == usize::MAX {
            return Err(Malformed::MissingPseudo);
        }
        if self.list.props()[self.method] & props::BAD_METHOD != 0 {
            return Err(Malformed::BadMethod);
        }
        let method = self.list.value(self.method);
        if method == b"CONNECT" && self.protocol.is_some() {
            // RFC 8441 §4: an extended CONNECT carries `:scheme`, `:path`
            // and `:authority` as other requests do.
            let (Some(_), Some(p), Some(_)) = (self.scheme, self.path, self.authority) else {
                return Err(Malformed::MissingPseudo);
            };
            if self.list.value(p).first() != Some(&b'/') {
                return Err(Malformed::MissingPseudo);
            }
        } else if method == b"CONNECT" {
            if self.scheme.is_some() || self.path.is_some() || self.authority.is_none() {
                return Err(Malformed::MissingPseudo);
            }
        } else if self.protocol.is_some() {
            // `:protocol` only with CONNECT (RFC 8441 §4).
            return Err(Malformed::PseudoHeader);
        } else {
            let (Some(_), Some(p)) = (self.scheme, self.path) else {
                return Err(Malformed::MissingPseudo);
            };
            let path = self.list.value(p);
            let ok = path.first() == Some(&b'/') || (path == b"*" && method == b"OPTIONS");
            if !ok {
                return Err(Malformed::MissingPseudo);
            }
        }
        if let Some(s) = self.scheme {
            if self.list.props()[s] & props::BAD_SCHEME != 0 {
                return Err(Malformed::BadScheme);
            }
        }
        // A `host` that differs from `:authority` is ignored: the
        // authority names the target (§8.3.1), and the server gets it as
        // its `host` (HAProxy does the same).
        self.h1_values = seen & props::BAD_H1 == 0;
        // (A valid authority has no `@`: no userinfo.)
        let ps = self.list.props();
        self.absolute = match (self.scheme, self.authority) {
            (Some(s), Some(a)) => {
                ps[s] & props::WEB_SCHEME != 0 && ps[a] & props::ABS_AUTHORITY != 0
            }
            _ => false,
        };
        Ok(())
    }

    /// `:method`.
    #[inline]
    pub fn method(&self) -> &[u8] {
        self.list.value(self.method)
    }

    /// `:scheme` (absent for CONNECT).
    #[inline]
    pub fn scheme(&self) -> Option<&[u8]> {
        self.scheme.map(|i| self.list.value(i))
    }

    /// `:path` (absent for CONNECT).
    #[inline]
    pub fn path(&self) -> Option<&[u8]> {
        self.path.map(|i| self.list.value(i))
    }

    /// `:protocol` of an extended CONNECT (RFC 8441): the stream is a
    /// tunnel for this protocol once the answer is 2xx.
    pub fn protocol(&self) -> Option<&[u8]> {
        self.protocol.map(|i| self.list.value(i))
    }

    /// `:authority`, else the `host` field.
    #[inline]
    pub fn authority(&self) -> Option<&[u8]> {
        self.authority.or(self.host).map(|i| self.list.value(i))
    }

    /// `(:scheme, :authority)` when the request line is written in
    /// absolute form: both present, the scheme `http` or `https` (any
    /// case), the authority one an HTTP/1 absolute URI may carry (else the
    /// origin form, as before).
    #[inline]
    fn absolute_prefix(&self) -> Option<(&[u8], &[u8])> {
        if !self.absolute {
            return None;
        }
        let (s, a) = (self.scheme?, self.authority?);
        Some((self.list.value(s), self.list.value(a)))
    }

    /// Whether the target [`RequestHead::write_h1`] writes is of the
    /// bytes HTTP/1 allows in one, from what the decoder found of its
    /// parts: `:path`, after `scheme://` (`http` or `https`) and the
    /// authority in absolute form. A `%` escape cannot straddle two parts
    /// (`:path` starts with `/` or is `*`, the scheme has none). `None`
    /// for a target of another form (CONNECT's authority).
    fn target_ok(&self) -> Option<bool> {
        let ps = self.list.props();
        let path = self.path?;
        let path_ok = ps[path] & props::TARGET_OK != 0;
        if !self.absolute {
            return Some(path_ok);
        }
        let auth_ok = self
            .authority
            .is_some_and(|a| ps[a] & props::TARGET_OK != 0);
        Some(auth_ok && (path_ok || self.list.value(path) == b"*"))
    }

    /// Whether a `te` field (`trailers`, the only one allowed) came.
    pub fn te(&self) -> bool {
        self.te
    }

    /// The regular fields, in order.
    pub fn fields(&self) -> impl Iterator<Item = (&[u8], &[u8])> + '_ {
        (self.first_regular..self.list.len()).map(|i| self.list.get(i))
    }

    /// The index in `list` of the first regular field (the pseudo-header
    /// fields come before it).
    pub fn first_regular(&self) -> usize {
        self.first_regular
    }

    /// Writes the HTTP/1.1 request head a server behind ebb gets (RFC 9113
    /// §8.3.1): `METHOD SP path SP HTTP/1.1`, `host` from `:authority`
    /// (a `host` field is not repeated; empty when there is neither), the regular fields in order with
    /// the cookie crumbs joined by `"; "` into one `cookie` line (§8.2.3),
    /// `extra` fields (the mux's framing: `content-length` or
    /// `transfer-encoding: chunked`), then the empty line. `te: trailers` is
    /// dropped (hop-by-hop in HTTP/1.1).
    pub fn write_h1(&self, extra: &[(&[u8], &[u8])], out: &mut Vec<u8>) {
        self.write_h1_spans(extra, out, None);
    }

    /// [`RequestHead::write_h1`], also giving where the request line's
    /// method and target are in `out` and, into `fields` (cleared), each
    /// field line's name and value: the head as the HTTP/1 parser would
    /// cut it, without a parse (`http1::complete_request_into`). `None`
    /// when the parser would refuse what was written (a byte HTTP/1 does
    /// not allow in a method, target, name or value, more fields than
    /// `max_fields`): the caller parses it then, for the parser's answer.
    pub fn write_h1_spans(
        &self,
        extra: &[(&[u8], &[u8])],
        out: &mut Vec<u8>,
        fields: Option<(&mut Vec<HeaderSpan>, usize)>,
    ) -> Option<(Span, Span)> {
        let (method, target, ok) = self.write_h1_lines(extra, out, fields);
        (ok && self.line_ok(&out[target.range()])).then_some((method, target))
    }

    /// What the HTTP/1 parser allows in a request line: a token (which
    /// the checks made sure of), and a target of visible ASCII or bytes
    /// above it.
    fn line_ok(&self, target: &[u8]) -> bool {
        crate::http1::is_token(self.method())
            && target
                .iter()
                .fold(true, |ok, &b| ok & (b > b' ') & (b != 0x7f))
    }

    /// [`RequestHead::write_h1_lines`] for the usual head, in fewer steps:
    /// a request line of a `:path`, no field added (`extra`) or made
    /// (upgrade, cookie crumbs joined), no `host` or `te` field left out,
    /// so that the regular fields are one run of lines in the list, of
    /// values the checks vouch for. The bytes are those the general
    /// writing gives (unit test), appended to `out` in one reservation,
    /// the field spans pushed in one. `None` for any other head.
    pub(super) fn write_h1_usual(
        &self,
        extra: &[(&[u8], &[u8])],
        out: &mut Vec<u8>,
        fields: &mut Option<(&mut Vec<HeaderSpan>, usize)>,
    ) -> Option<(Span, Span, bool)> {
        if !extra.is_empty()
            || self.protocol.is_some()
            || self.cookie
            || self.te
            || self.host.is_some()
            || !self.h1_values
        {
            return None;
        }
        // (CONNECT has no `:path`.)
        let path = self.path()?;
        let method = self.method();
        // The target: `:path`, or `scheme://authority[path]` (as the
        // general writing: no `*` after an authority).
        let (scheme, sep, auth_in, path): (&[u8], &[u8], &[u8], &[u8]) =
            match self.absolute_prefix() {
                Some((s, a)) if path == b"*" => (s, b"://", a, b""),
                Some((s, a)) => (s, b"://", a, path),
                None => (b"", b"", b"", path),
            };
        // No `host` field: the authority or nothing.
        let auth = self.authority().unwrap_or(b"");
        let recs = self.list.fields().get(self.first_regular..).unwrap_or(&[]);
        let lines = match (recs.first(), recs.last()) {
            (Some(a), Some(b)) => {
                let to = (b.value.end as usize).checked_add(2)?;
                self.list.bytes().get(a.name.start as usize..to)?
            }
            _ => &[],
        };
        // A local vector: its length and capacity stay in registers.
        let mut v = std::mem::take(out);
        let base = v.len();
        v.reserve(
            method.len()
                + 1
                + scheme.len()
                + sep.len()
                + auth_in.len()
                + path.len()
                + USUAL_HOST.len()
                + auth.len()
                + 2
                + lines.len()
                + 2,
        );
        v.extend_from_slice(method);
        let method_end = v.len();
        v.push(b' ');
        v.extend_from_slice(scheme);
        v.extend_from_slice(sep);
        v.extend_from_slice(auth_in);
        v.extend_from_slice(path);
        let target_end = v.len();
        v.extend_from_slice(USUAL_HOST);
        let host_at = v.len();
        v.extend_from_slice(auth);
        let host_end = v.len();
        v.extend_from_slice(b"\r\n");
        let lines_at = v.len();
        v.extend_from_slice(lines);
        v.extend_from_slice(b"\r\n");
        *out = v;
        let span = |a: usize, b: usize| Span {
            start: a as u32,
            end: b as u32,
        };
        let mut ok = true;
        if let Some((f, max)) = fields.as_mut() {
            f.clear();
            // `host`, then the regular fields: as many as the bound.
            ok = recs.len() < *max;
            f.reserve(recs.len() + 1);
            f.push(HeaderSpan {
                name: span(host_at - 6, host_at - 2),
                value: span(host_at, host_end),
            });
            // The records, moved to where the lines are in `out`.
            let shift = (lines_at as u32).wrapping_sub(recs.first().map_or(0, |r| r.name.start));
            let moved = |s: Span| Span {
                start: s.start.wrapping_add(shift),
                end: s.end.wrapping_add(shift),
            };
            f.extend(recs.iter().map(|r| HeaderSpan {
                name: moved(r.name),
                value: moved(r.value),
            }));
        }
        Some((span(base, method_end), span(method_end + 1, target_end), ok))
    }

    /// The writing of [`RequestHead::write_h1_spans`]: the method's and
    /// target's spans, and whether every field line is one the parser
    /// takes as written.
    fn write_h1_lines(
        &self,
        extra: &[(&[u8], &[u8])],
        out: &mut Vec<u8>,
        mut fields: Option<(&mut Vec<HeaderSpan>, usize)>,
    ) -> (Span, Span, bool) {
        match self.write_h1_usual(extra, out, &mut fields) {
            Some(r) => r,
            None => self.write_h1_general(extra, out, fields),
        }
    }

    /// [`RequestHead::write_h1_lines`] for any head.
    pub(super) fn write_h1_general(
        &self,
        extra: &[(&[u8], &[u8])],
        out: &mut Vec<u8>,
        mut fields: Option<(&mut Vec<HeaderSpan>, usize)>,
    ) -> (Span, Span, bool) {
        let at = |out: &Vec<u8>| out.len() as u32;
        let mut ok = true;
        let fields = &mut fields;
        if let Some((f, _)) = fields.as_mut() {
            f.clear();
        }
        // An extended CONNECT is HTTP/1.1's upgrade (RFC 8441 §5, as
        // HAProxy translates it): `GET`, `connection: upgrade`, `upgrade:`
        // the protocol.
        let upgrade = self.protocol();
        let method_start = at(out);
        out.extend_from_slice(if upgrade.is_some() {
            b"GET"
        } else {
            self.method()
        });
        let method = Span {
            start: method_start,
            end: at(out),
        };
        out.push(b' ');
        let target_start = at(out);
        match (self.path(), self.absolute_prefix()) {
            (Some(p), Some((scheme, auth))) => {
                // HAProxy's internal form of an HTTP/2 request with
                // `:authority` and an http(s) scheme: the absolute URI
                // (its logs, `url` and `capture.req.uri` show it); the
                // stream sends it in origin form to HTTP/1 servers.
                out.extend_from_slice(scheme);
                out.extend_from_slice(b"://");
                out.extend_from_slice(auth);
                if p != b"*" {
                    out.extend_from_slice(p);
                }
            }
            (Some(p), None) => out.extend_from_slice(p),
            (None, _) => out.extend_from_slice(self.authority().unwrap_or(b"")),
        }
        let target = Span {
            start: target_start,
            end: at(out),
        };
        out.extend_from_slice(b" HTTP/1.1\r\n");
        // Without `:authority` or `host` (RFC 9113 §8.3.1 allows it), an
        // empty `host` (RFC 9112 §3.2: what HTTP/1.1 sends when the target
        // has no authority).
        // Names and values the checks vouch for: lower-case tokens, values
        // without surrounding whitespace (§8.2.1), here of HTTP/1 bytes.
        let known = self.h1_values;
        let auth = self.authority().unwrap_or(b"");
        ok &= field_line(out, fields, known, b"host", |o| o.extend_from_slice(auth));
        // The fields but `host`, `te` and `cookie`, in order; with values
        // the checks vouch for, each run of them in one copy: the list
        // keeps its fields as their lines, side by side.
        let (recs, ps, bytes) = (self.list.fields(), self.list.props(), self.list.bytes());
        let kept =
            |i: usize| !matches!(ps[i] & props::KIND, props::HOST | props::TE | props::COOKIE);
        let mut i = self.first_regular;
        while i < recs.len() {
            if !kept(i) {
                i += 1;
                continue;
            }
            let mut j = i + 1;
            while j < recs.len() && kept(j) {
                j += 1;
            }
            let from = recs[i].name.start as usize;
            let to = recs[j - 1].value.end as usize + 2;
            match bytes.get(from..to).filter(|_| known) {
                Some(lines) => {
                    // The records, moved to where the lines are in `out`.
                    let shift = (out.len() as u32).wrapping_sub(from as u32);
                    out.extend_from_slice(lines);
                    if let Some((f, max)) = fields.as_mut() {
                        for r in &recs[i..j] {
                            ok &= f.len() < *max;
                            f.push(HeaderSpan {
                                name: Span {
                                    start: r.name.start.wrapping_add(shift),
                                    end: r.name.end.wrapping_add(shift),
                                },
                                value: Span {
                                    start: r.value.start.wrapping_add(shift),
                                    end: r.value.end.wrapping_add(shift),
                                },
                            });
                        }
                    }
                }
                None => {
                    for k in i..j {
                        let (n, v) = self.list.get(k);
                        ok &= field_line(out, fields, known, n, |o| o.extend_from_slice(v));
                    }
                }
            }
            i = j;
        }
        if self.cookie {
            // The crumbs joined by "; " on one line (§8.2.3); an empty
            // crumb may leave whitespace at an end: checked.
            ok &= field_line(out, fields, false, b"cookie", |o| {
                let mut first = true;
                for (n, v) in self.fields() {
                    if n == b"cookie" {
                        if !first {
                            o.extend_from_slice(b"; ");
                        }
                        first = false;
                        o.extend_from_slice(v);
                    }
                }
            });
        }
        if let Some(p) = upgrade {
            ok &= field_line(out, fields, false, b"connection", |o| {
                o.extend_from_slice(b"upgrade")
            });
            ok &= field_line(out, fields, false, b"upgrade", |o| o.extend_from_slice(p));
        }
        for (n, v) in extra {
            ok &= field_line(out, fields, false, n, |o| o.extend_from_slice(v));
        }
        out.extend_from_slice(b"\r\n");
        (method, target, ok)
    }
}

impl RequestHead {
    /// [`RequestHead::write_h1_spans`] into `out` (emptied first), the
    /// field spans in `head.headers`; then, for a plain request (an origin
    /// or absolute target, no upgrade, no framing field added), the rest
    /// of `head` filled from what the §8 checks of this head already
    /// proved, as `http1::complete_request_into` would fill it from the
    /// bytes: no bare LF (no value holds CR or LF), one `host` line (the
    /// one written), no `transfer-encoding`, `connection` or `upgrade`
    /// (connection-specific, refused), the declared length. What the
    /// checks do not cover is done here as there: the target's bytes, the
    /// `host` of an origin-form target, the limits, a repeated
    /// `content-length` (refused by HTTP/1: left to the completion).
    pub fn write_h1_head(
        &self,
        extra: &[(&[u8], &[u8])],
        out: &mut Vec<u8>,
        limits: &Limits,
        head: &mut crate::http1::RequestHead,
    ) -> Written {
        out.clear();
        let max = limits.max_headers.min(crate::http1::MAX_HEADERS_CAP);
        let (method, target, ok) = self.write_h1_lines(extra, out, Some((&mut head.headers, max)));
        // A target of the bytes HTTP/1 allows in one (visible ASCII) has
        // the request line the parser takes (the method is a token).
        let t = &out[target.range()];
        let strict = self
            .target_ok()
            .unwrap_or_else(|| crate::http1::valid_target_bytes(t));
        if !ok || !(strict || self.line_ok(t)) {
            return Written::Parse;
        }
        match strict.then(|| self.fill_h1(extra, out, (method, target), limits, head)) {
            Some(Some(())) => Written::Complete,
            _ => Written::Spans(method, target),
        }
    }

    /// The completion of [`RequestHead::write_h1_head`], for a target of
    /// valid bytes (`http1::valid_target_bytes`); `None` when it cannot
    /// vouch for the result (the caller completes the head then).
    fn fill_h1(
        &self,
        extra: &[(&[u8], &[u8])],
        buf: &[u8],
        (method, target): (Span, Span),
        limits: &Limits,
        head: &mut crate::http1::RequestHead,
    ) -> Option<()> {
        // Only `te: trailers` added (no framing field, no upgrade).
        if self.protocol.is_some() || extra.iter().any(|&(n, _)| n != b"te") {
            return None;
        }
        // Not CONNECT (authority form): it has no `:path`.
        self.path()?;
        let t = target.get(buf);
        let max_head = limits.max_head_bytes.min(u32::MAX as usize);
        if t.len() > limits.max_uri || buf.len() > max_head {
            return None;
        }
        // The `host` line is the first one written.
        let host = head.headers.first()?.value;
        // The target is `:path` (origin form: it starts with `/`, or is
        // `*`) or the absolute URI `write_h1_spans` chose.
        let (form, authority, path_span) = match (t.first(), self.scheme()) {
            (Some(b'/'), _) => {
                if !crate::http1::is_valid_authority(host.get(buf), false) {
                    return None;
                }
                (TargetForm::Origin, None, target)
            }
            (Some(b'*'), _) | (_, None) => return None,
            // `scheme://authority[path]`: the authority is the `host`
            // value and was checked as one (it holds no `/` nor `?`).
            (_, Some(scheme)) => {
                let from = scheme.len() + 3;
                let to = from + host.len();
                let path = target.sub(to, t.len());
                (TargetForm::Absolute, Some(target.sub(from, to)), path)
            }
        };
        if self.lengths > 1 {
            return None;
        }
        head.method = Method::from_bytes(method.get(buf));
        head.method_span = method;
        head.target = target;
        head.target_form = form;
        head.path = path_span;
        head.version = Version::Http11;
        head.head_len = buf.len();
        head.framing = match self.content_length {
            None | Some(0) => BodyFraming::None,
            Some(n) => BodyFraming::ContentLength(n),
        };
        head.keep_alive = true;
        head.expect_continue = self.expect_continue;
        head.host = Some(authority.unwrap_or(host));
        head.upgrade = None;
        Some(())
    }
}

/// What follows the target in the usual head
/// ([`RequestHead::write_h1_usual`]): the version, then the `host` line's
/// name.
const USUAL_HOST: &[u8] = b" HTTP/1.1\r\nhost: ";

/// Appends the field line `name: value` (`value` writes it) to `out`,
/// noting its spans in `fields` (when given, with its bound). Returns
/// whether the HTTP/1 parser would take the line as written: a token
/// name, a value of field-value bytes without surrounding whitespace
/// (taken as so when `known`), no more fields than the bound.
fn field_line(
    out: &mut Vec<u8>,
    fields: &mut Option<(&mut Vec<HeaderSpan>, usize)>,
    known: bool,
    name: &[u8],
    value: impl FnOnce(&mut Vec<u8>),
) -> bool {
    let name_start = out.len() as u32;
    out.extend_from_slice(name);
    let name_span = Span {
        start: name_start,
        end: out.len() as u32,
    };
    out.extend_from_slice(b": ");
    let value_start = out.len() as u32;
    value(out);
    let value_span = Span {
        start: value_start,
        end: out.len() as u32,
    };
    out.extend_from_slice(b"\r\n");
    let Some((f, max)) = fields.as_mut() else {
        return true;
    };
    let v = &out[value_span.range()];
    let ok = f.len() < *max
        && (known
            || crate::http1::is_token(name)
                && crate::http1::is_field_value(v)
                && !matches!(v.first(), Some(b' ' | b'\t'))
                && !matches!(v.last(), Some(b' ' | b'\t')));
    f.push(HeaderSpan {
        name: name_span,
        value: value_span,
    });
    ok
}

/// Checks a trailer section (§8.1: no pseudo-header fields; §8.2 rules).
pub fn check_trailers(list: &HeaderList) -> Result<(), Malformed> {
    for (n, v) in list.iter() {
        if n.first() == Some(&b':') {
            return Err(Malformed::PseudoHeader);
        }
        check_regular(n, v)?;
    }
    Ok(())
}

/// §8.2 rules for a regular field: name, value, not connection-specific.
/// Gives the value's [`value_bits`] (none but [`BAD_H1`] when it passes).
fn check_regular(n: &[u8], v: &[u8]) -> Result<u8, Malformed> {
    if !valid_name(n) {
        return Err(Malformed::BadName);
    }
    let bits = value_bits(v);
    if bits & BAD_H2 != 0 {
        return Err(Malformed::BadValue);
    }
    if connection_specific(n, v) {
        return Err(Malformed::ConnectionSpecific);
    }
    Ok(bits)
}

/// A checked response head (the client role): `:status` and the fields.
#[derive(Clone, Debug, Default)]
pub struct ResponseHead {
    /// The fields as decoded (`:status` first).
    pub list: HeaderList,
    /// `:status`.
    pub status: u16,
    /// The declared body length.
    pub content_length: Option<u64>,
}

impl ResponseHead {
    /// Checks `self.list` (just decoded): one `:status` of three digits,
    /// first, not 101; then regular fields by the rules of requests.
    pub fn check(&mut self) -> Result<(), Malformed> {
        self.status = 0;
        self.content_length = None;
        for (i, (n, v)) in self.list.iter().enumerate() {
            if n.first() == Some(&b':') {
                if n != b":status" || i != 0 {
                    return Err(Malformed::PseudoHeader);
                }
                if v.len() != 3 || !v.iter().all(u8::is_ascii_digit) || v[0] == b'0' {
                    return Err(Malformed::BadValue);
                }
                self.status = v.iter().fold(0, |a, &d| a * 10 + u16::from(d - b'0'));
                if self.status == 101 {
                    // §8.6: no Upgrade in HTTP/2.
                    return Err(Malformed::ConnectionSpecific);
                }
                continue;
            }
            check_regular(n, v)?;
            if n == b"content-length" {
                // An answer's list of one value (`5, 5`) is that value, as
                // in an HTTP/1 answer and as HAProxy 2.6 takes it (RFC 9110
                // §8.6); a request's is refused (`RequestHead`).
                let cl = parse_cl_list(v).ok_or(Malformed::ContentLength)?;
                if self.content_length.is_some_and(|c| c != cl) {
                    return Err(Malformed::ContentLength);
                }
                self.content_length = Some(cl);
            }
        }
        if self.status == 0 {
            return Err(Malformed::MissingPseudo);
        }
        Ok(())
    }

    /// Whether this is an interim (1xx) response.
    pub fn interim(&self) -> bool {
        self.status < 200
    }

    /// The regular fields, in order.
    pub fn fields(&self) -> impl Iterator<Item = (&[u8], &[u8])> + '_ {
        self.list.iter().filter(|(n, _)| n.first() != Some(&b':'))
    }
}
