//! HTTP response compression: which coding an answer gets, what its head
//! becomes, and the streaming encoders.
//!
//! This is the protocol-free core of `compression algo|type|offload`
//! (HAProxy's keywords; `br` and `zstd` are ebb's additions). It reads
//! header values and bytes and decides; the answer path that calls it owns
//! the sockets and the buffers. The decisions follow HAProxy 2.6's
//! `flt_http_comp` so a migrated configuration compresses the same answers:
//!
//! 1. **Request side** ([`Policy::choose`]): the `Accept-Encoding` values
//!    are read in order; each element's q-value (default 1) is compared
//!    with the best so far and only a *strictly* greater one wins, so among
//!    equal weights the client's first listed coding that ebb offers is
//!    taken. `*` stands for the first configured algorithm. `identity` in
//!    the configured list is taken when nothing else matched. A
//!    `User-Agent` of `Mozilla/4` (old browsers with broken decoders) gets
//!    no compression unless it is MSIE 6 with XP SP2 or MSIE 7 and later.
//! 2. **Response side** ([`Policy::response_allows`]): compressed only if
//!    the response is HTTP/1.1 or later, its status is 200..=203, its
//!    length is known (Content-Length or chunked: never a close-delimited
//!    body), it has no `Content-Encoding`, no `Cache-Control: no-transform`,
//!    at most one valid `ETag`, a `Content-Type` that is not `multipart*`
//!    and, when `compression type` lists types, one of them as a
//!    case-insensitive prefix (no `Content-Type` then means no
//!    compression).
//! 3. **Head edits** ([`weak_etag`], [`CONTENT_ENCODING`]): the length
//!    goes (the body becomes chunked or the stream's own framing), the
//!    coding is named, a strong ETag becomes weak (the bytes differ from
//!    the uncompressed entity's) and `Vary: Accept-Encoding` is added so a
//!    cache keeps the variants apart.
//!
//! Encoders ([`Encoder`]) take input in pieces the caller sizes (that is
//! the per-run budget: a big answer is compressed a piece per scheduler
//! run, never in one go) and append to an output vector; `flush` makes
//! everything given so far decodable (sent when the origin pauses, so a
//! streamed answer is not held back), `finish` ends the stream. The level
//! is `tune.comp.maxlevel` (HAProxy's default 1: compression costs CPU on
//! the one box in front of many servers). At level 1, gzip, deflate and
//! raw-deflate run ebb's own stateless encoder ([`fast`]: one hash probe,
//! fixed Huffman codes, about HAProxy's libslz's trade of ratio for
//! speed); levels 2 to 9 run zlib-rs.

use std::io;

pub mod fast;

/// A content coding ebb can apply.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Coding {
    /// No change to the bytes (HAProxy: "mostly for debugging").
    Identity,
    /// RFC 1952 gzip.
    Gzip,
    /// RFC 1950 zlib-wrapped deflate (`Content-Encoding: deflate`).
    Deflate,
    /// Deflate without the zlib wrapper, sent as `deflate` (what browsers
    /// actually decode; HAProxy's `raw-deflate`).
    RawDeflate,
    /// RFC 7932 brotli (ebb's addition to HAProxy's list).
    Br,
    /// RFC 8878 zstd (ebb's addition to HAProxy's list).
    Zstd,
}

impl Coding {
    /// The name in `compression algo`.
    pub fn parse(name: &str) -> Option<Coding> {
        Some(match name {
            "identity" => Coding::Identity,
            "gzip" => Coding::Gzip,
            "deflate" => Coding::Deflate,
            "raw-deflate" => Coding::RawDeflate,
            "br" => Coding::Br,
            "zstd" => Coding::Zstd,
            _ => return None,
        })
    }

    /// The name in `compression algo` (`res.comp_algo`).
    pub fn name(self) -> &'static str {
        match self {
            Coding::RawDeflate => "raw-deflate",
            c => c.token(),
        }
    }

    /// The `Accept-Encoding` token this coding answers to (and the
    /// `Content-Encoding` value it is sent with; `None` for identity,
    /// which adds no header).
    pub fn token(self) -> &'static str {
        match self {
            Coding::Identity => "identity",
            Coding::Gzip => "gzip",
            Coding::Deflate | Coding::RawDeflate => "deflate",
            Coding::Br => "br",
            Coding::Zstd => "zstd",
        }
    }

    /// The `Content-Encoding` value, or `None` when the bytes are unchanged.
    pub fn content_encoding(self) -> Option<&'static str> {
        match self {
            Coding::Identity => None,
            c => Some(c.token()),
        }
    }
}

/// The header a compressed answer names its coding in.
pub const CONTENT_ENCODING: &str = "content-encoding";

/// What one proxy compresses (`compression algo` / `type` / `offload`).
#[derive(Clone, Debug, Default)]
pub struct Policy {
    /// Configured algorithms, in configuration order (`*` takes the first).
    pub algos: Vec<Coding>,
    /// Content types compressed, lowercased; empty: every type.
    pub types: Vec<String>,
    /// `compression offload`: remove `Accept-Encoding` from the request
    /// forwarded to the server, so only ebb compresses.
    pub offload: bool,
    /// `tune.comp.maxlevel` (HAProxy's default 1).
    pub level: u32,
    /// `compression minsize-res`: answers whose known length is below it
    /// are sent as they are (a coding's header and trailer, 18 bytes for
    /// gzip, can outweigh what it saves). Default 0, HAProxy 2.6's
    /// behaviour: any size; a later HAProxy's keyword and meaning.
    pub min_size: u64,
    /// `compression direction request`: answers are not compressed
    /// (no coding is chosen for them).
    pub request_only: bool,
    /// `compression algo-req` under `direction request|both`: the coding
    /// of request bodies toward the server (see [`request_coding`]).
    pub algo_req: Option<Coding>,
    /// `compression type-req`: request Content-Type prefixes compressed,
    /// lowercased; empty: every type.
    pub types_req: Vec<String>,
}

/// A compressed body costs about this many times a sent byte: the
/// connection counts `input * COST` against its per-run quantum, so a big
/// answer is compressed a slice per scheduler run (as bulk work, after
/// which the connection wakes itself) and cannot stall a loop pass.
pub const COST: usize = 4;

/// The response facts [`Policy::response_allows`] decides on; the caller
/// fills it from the response head (HTTP/1 or a later mux's).
#[derive(Clone, Copy, Debug, Default)]
pub struct ResponseFacts<'a> {
    /// HTTP/1.1 or later (an HTTP/2 answer counts as later).
    pub http11: bool,
    pub status: u16,
    /// A Content-Length or chunked framing: the body's end is known.
    pub length_known: bool,
    /// Any `Content-Encoding` header present.
    pub content_encoding: bool,
    /// The first `Content-Type` value, if any.
    pub content_type: Option<&'a [u8]>,
    /// Every `Cache-Control` value, joined or one after another.
    pub cache_control: &'a [&'a [u8]],
    /// Every `ETag` value.
    pub etags: &'a [&'a [u8]],
}

impl Policy {
    /// Chooses the coding for a request from its `Accept-Encoding` values
    /// (one per header line, in order) and `User-Agent`; `None`: send the
    /// answer as it is.
    pub fn choose(&self, accept_encoding: &[&[u8]], user_agent: Option<&[u8]>) -> Option<Coding> {
        if self.request_only || self.algos.is_empty() || user_agent.is_some_and(old_mozilla) {
            return None;
        }
        let mut best: Option<(u16, Coding)> = None;
        for value in accept_encoding {
            for element in value.split(|&b| b == b',') {
                let Some((token, q)) = parse_element(element) else {
                    continue;
                };
                if q <= best.map_or(0, |(q, _)| q) {
                    continue;
                }
                let found = if token == b"*" {
                    self.algos.first().copied()
                } else {
                    self.algos
                        .iter()
                        .copied()
                        .find(|c| token.eq_ignore_ascii_case(c.token().as_bytes()))
                };
                if let Some(c) = found {
                    best = Some((q, c));
                }
            }
        }
        match best {
            Some((_, c)) => Some(c),
            None if self.algos.contains(&Coding::Identity) => Some(Coding::Identity),
            None => None,
        }
    }

    /// Whether a response may be compressed (rule 2 of the module essay).
    pub fn response_allows(&self, r: &ResponseFacts<'_>) -> bool {
        if !r.http11 || !(200..=203).contains(&r.status) || !r.length_known {
            return false;
        }
        if r.content_encoding {
            return false;
        }
        if r.cache_control.iter().any(|v| {
            v.split(|&b| b == b',')
                .any(|d| trim(d).eq_ignore_ascii_case(b"no-transform"))
        }) {
            return false;
        }
        match r.etags {
            [] => {}
            [one] if valid_etag(trim(one)) => {}
            _ => return false,
        }
        if r.content_type
            .is_some_and(|ct| starts_with_icase(trim(ct), b"multipart"))
        {
            return false;
        }
        type_listed(&self.types, r.content_type)
    }
}

/// Whether a message's Content-Type is one `compression type` (or
/// `type-req`) lists as a case-insensitive prefix; an empty list takes
/// every message, a list takes none without a Content-Type (HAProxy).
fn type_listed(types: &[String], content_type: Option<&[u8]>) -> bool {
    match content_type {
        Some(ct) => {
            let ct = trim(ct);
            types.is_empty() || types.iter().any(|t| starts_with_icase(ct, t.as_bytes()))
        }
        None => types.is_empty(),
    }
}

/// The coding an HTTP/1 request's body gets toward the server under
/// `compression direction request|both` (HAProxy 2.8's rules): the
/// policy has an `algo-req`, the request is HTTP/1.1 and not HEAD, has no
/// `Content-Encoding`, and its Content-Type is one `type-req` lists (any,
/// without `type-req`). ebb's one addition: only a request with a body is
/// coded (HAProxy 2.8 would turn a bodyless GET into an empty coded
/// stream). Unlike answers, `Accept-Encoding` plays no part: the server's
/// support is the configuration's promise.
pub fn request_coding(
    policy: &Policy,
    buf: &[u8],
    head: &crate::http1::RequestHead,
) -> Option<Coding> {
    use crate::http1::{BodyFraming, Method, Version};
    let coding = policy.algo_req?;
    let has_body = matches!(
        head.framing,
        BodyFraming::Chunked | BodyFraming::ContentLength(1..)
    );
    if !has_body || head.method == Method::Head || head.version != Version::Http11 {
        return None;
    }
    if head.header(buf, "content-encoding").is_some() {
        return None;
    }
    type_listed(&policy.types_req, head.header(buf, "content-type")).then_some(coding)
}

/// The field a coded request body is named by (none for `identity`).
pub fn write_request_fields(out: &mut Vec<u8>, coding: Option<Coding>) {
    if let Some(ce) = coding.and_then(Coding::content_encoding) {
        out.extend_from_slice(b"Content-Encoding: ");
        out.extend_from_slice(ce.as_bytes());
        out.extend_from_slice(b"\r\n");
    }
}

/// A request body compressed on its way to the server: the client's body
/// (a Content-Length or chunked) is read, coded and sent chunked (the
/// coded length is unknown until the end). [`feed`](Self::feed) does
/// not flush: as for answers, the stream flushes what the client sent so
/// far ([`flush`](Self::flush)) only when the client pauses (its bytes
/// ran out and none came for a tick), so a slow upload reaches the
/// server as it comes while a fast one is not cut into flushed pieces at
/// every read. Request trailers are not forwarded (the coded body ends
/// with the last chunk).
pub struct RequestBody {
    coding: Coding,
    comp: BodyCompressor,
    /// Bytes still to read of a Content-Length body; `None`: chunked.
    left: Option<u64>,
    dec: crate::http1::ChunkedDecoder,
}

impl RequestBody {
    /// The coded body of this request when [`request_coding`] picks a
    /// coding (and the encoder starts).
    pub fn for_request(
        policy: &Policy,
        buf: &[u8],
        head: &crate::http1::RequestHead,
    ) -> Option<Box<RequestBody>> {
        let coding = request_coding(policy, buf, head)?;
        let length = match head.framing {
            crate::http1::BodyFraming::ContentLength(n) => Some(n),
            _ => None,
        };
        RequestBody::new(coding, policy.level, length)
            .ok()
            .map(Box::new)
    }

    /// For a body of `length` bytes (`None`: chunked).
    pub fn new(coding: Coding, level: u32, length: Option<u64>) -> io::Result<RequestBody> {
        Ok(RequestBody {
            coding,
            comp: BodyCompressor::new(coding, level)?,
            left: length,
            dec: crate::http1::ChunkedDecoder::default(),
        })
    }

    /// The coding applied.
    pub fn coding(&self) -> Coding {
        self.coding
    }

    /// Reads what of the body `input` holds and appends its coded form to
    /// `out` (ended at the body's end; never flushed). Returns the input
    /// bytes consumed and whether the body is complete (bytes after its
    /// end are left). An error: the chunked framing is broken, or the
    /// encoder failed.
    pub fn feed(&mut self, input: &[u8], out: &mut Vec<u8>) -> io::Result<(usize, bool)> {
        let (used, done) = match &mut self.left {
            Some(n) => {
                let k = (*n).min(input.len() as u64) as usize;
                self.comp.push(&input[..k], out)?;
                *n -= k as u64;
                (k, *n == 0)
            }
            None => {
                let mut pos = 0;
                loop {
                    let d = self.dec.decode(&input[pos..]).map_err(|e| {
                        io::Error::new(io::ErrorKind::InvalidData, format!("{e:?}"))
                    })?;
                    let data = &input[pos..][d.data.clone()];
                    if !data.is_empty() {
                        self.comp.push(data, out)?;
                    }
                    pos += d.consumed;
                    if d.done || d.consumed == 0 || pos == input.len() {
                        break (pos, d.done);
                    }
                }
            }
        };
        if done {
            self.comp.finish(out)?;
        }
        Ok((used, done))
    }

    /// Makes everything fed so far decodable (the client paused).
    pub fn flush(&mut self, out: &mut Vec<u8>) -> io::Result<()> {
        self.comp.flush(out)
    }

    /// Bytes were fed since the last flush.
    pub fn unflushed(&self) -> bool {
        self.comp.unflushed()
    }
}

/// `User-Agent: Mozilla/4...` other than MSIE 6 on XP SP2 (`SV1`) and
/// MSIE 7 and later: HAProxy's list of decoders known to be broken.
fn old_mozilla(ua: &[u8]) -> bool {
    if !ua.starts_with(b"Mozilla/4") {
        return false;
    }
    let Some(at) = find(ua, b"MSIE ") else {
        return true;
    };
    let rest = &ua[at + 5..];
    match rest.first() {
        Some(b'7'..=b'9') => false,
        Some(b'1') if rest.get(1).is_some_and(u8::is_ascii_digit) => false,
        Some(b'6') => find(ua, b"SV1").is_none(),
        _ => true,
    }
}

/// One `Accept-Encoding` element: its coding token and q-value in
/// thousandths (RFC 9110 §12.4.2: at most three decimals, at most 1).
/// `None` for an empty element or a malformed weight (the element is then
/// ignored, as the RFC's list rules allow).
fn parse_element(element: &[u8]) -> Option<(&[u8], u16)> {
    let mut parts = element.split(|&b| b == b';');
    let token = trim(parts.next()?);
    if token.is_empty() || !token.iter().all(|&b| is_tchar(b)) {
        return None;
    }
    let mut q = 1000;
    for param in parts {
        let param = trim(param);
        if param.len() >= 2 && param[..2].eq_ignore_ascii_case(b"q=") {
            q = parse_qvalue(&param[2..])?;
        }
    }
    Some((token, q))
}

/// `qvalue = ( "0" [ "." 0*3DIGIT ] ) / ( "1" [ "." 0*3("0") ] )`, in
/// thousandths.
fn parse_qvalue(s: &[u8]) -> Option<u16> {
    let (int, frac) = match s.iter().position(|&b| b == b'.') {
        Some(i) => (&s[..i], &s[i + 1..]),
        None => (s, &b""[..]),
    };
    if frac.len() > 3 || !frac.iter().all(u8::is_ascii_digit) {
        return None;
    }
    let mut thousandths: u16 = 0;
    for i in 0..3 {
        thousandths = thousandths * 10 + frac.get(i).map_or(0, |d| u16::from(d - b'0'));
    }
    match int {
        b"0" => Some(thousandths),
        b"1" if thousandths == 0 => Some(1000),
        _ => None,
    }
}

/// RFC 9110 §8.8.3: `[W/] DQUOTE *etagc DQUOTE`.
fn valid_etag(v: &[u8]) -> bool {
    let v = v.strip_prefix(b"W/").unwrap_or(v);
    v.len() >= 2
        && v[0] == b'"'
        && v[v.len() - 1] == b'"'
        && v[1..v.len() - 1]
            .iter()
            .all(|&b| b == 0x21 || (0x23..=0x7e).contains(&b) || b >= 0x80)
}

/// The ETag a compressed answer carries: a strong one becomes weak, a weak
/// one is kept. `None` when the value is not a valid entity tag (the
/// response is then not compressed, rule 2).
pub fn weak_etag(v: &[u8]) -> Option<Vec<u8>> {
    let v = trim(v);
    if !valid_etag(v) {
        return None;
    }
    if v.starts_with(b"W/") {
        return Some(v.to_vec());
    }
    let mut w = Vec::with_capacity(v.len() + 2);
    w.extend_from_slice(b"W/");
    w.extend_from_slice(v);
    Some(w)
}

fn is_tchar(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b)
}

fn trim(mut s: &[u8]) -> &[u8] {
    while let [b' ' | b'\t', rest @ ..] = s {
        s = rest;
    }
    while let [rest @ .., b' ' | b'\t'] = s {
        s = rest;
    }
    s
}

fn starts_with_icase(s: &[u8], p: &[u8]) -> bool {
    s.len() >= p.len() && s[..p.len()].eq_ignore_ascii_case(p)
}

fn find(h: &[u8], n: &[u8]) -> Option<usize> {
    h.windows(n.len()).position(|w| w == n)
}

/// Output space added per encoder call: the encoders write into a vector's
/// spare capacity, and 16 KiB is one default buffer (`tune.bufsize`).
const OUT_STEP: usize = 16 * 1024;

/// A streaming encoder for one answer.
pub struct Encoder {
    kind: Kind,
}

enum Kind {
    Identity,
    /// Level 1 deflate: ebb's own encoder.
    Fast(fast::FastDeflate),
    Flate(flate2::Compress),
    Br(Box<brotli::enc::encode::BrotliEncoderStateStruct<brotli::enc::StandardAlloc>>),
    Zstd(zstd::stream::raw::Encoder<'static>),
}

#[derive(Clone, Copy, PartialEq)]
enum Step {
    Data,
    Flush,
    Finish,
}

impl Encoder {
    /// An encoder for `coding` at `level` (clamped to what each coding
    /// takes: deflate 0..=9, brotli 0..=11, zstd 1..=19). Deflate at
    /// level 1 is ebb's own fast encoder ([`fast`]), above it zlib-rs.
    pub fn new(coding: Coding, level: u32) -> io::Result<Encoder> {
        let kind = match coding {
            Coding::Identity => Kind::Identity,
            Coding::Gzip if level == 1 => Kind::Fast(fast::FastDeflate::new(fast::Wrap::Gzip)),
            Coding::Deflate if level == 1 => Kind::Fast(fast::FastDeflate::new(fast::Wrap::Zlib)),
            Coding::RawDeflate if level == 1 => Kind::Fast(fast::FastDeflate::new(fast::Wrap::Raw)),
            Coding::Gzip => Kind::Flate(flate2::Compress::new_gzip(
                flate2::Compression::new(level.min(9)),
                15,
            )),
            Coding::Deflate => Kind::Flate(flate2::Compress::new(
                flate2::Compression::new(level.min(9)),
                true,
            )),
            Coding::RawDeflate => Kind::Flate(flate2::Compress::new(
                flate2::Compression::new(level.min(9)),
                false,
            )),
            Coding::Br => {
                use brotli::enc::encode::BrotliEncoderParameter as P;
                let mut s = Box::new(brotli::enc::encode::BrotliEncoderStateStruct::new(
                    brotli::enc::StandardAlloc::default(),
                ));
                s.set_parameter(P::BROTLI_PARAM_QUALITY, level.min(11));
                // A 4 MiB window (lgwin 22, brotli's default) bounds the
                // encoder's memory per answer.
                s.set_parameter(P::BROTLI_PARAM_LGWIN, 22);
                Kind::Br(s)
            }
            Coding::Zstd => {
                let level = i32::try_from(level.clamp(1, 19)).unwrap_or(1);
                Kind::Zstd(zstd::stream::raw::Encoder::new(level)?)
            }
        };
        Ok(Encoder { kind })
    }

    /// Compresses all of `input`, appending what the encoder emits to
    /// `out` (it may keep some back until [`flush`](Self::flush) or
    /// [`finish`](Self::finish)).
    pub fn compress(&mut self, input: &[u8], out: &mut Vec<u8>) -> io::Result<()> {
        self.run(input, out, Step::Data)
    }

    /// Emits everything given so far in decodable form (the stream goes on).
    pub fn flush(&mut self, out: &mut Vec<u8>) -> io::Result<()> {
        self.run(&[], out, Step::Flush)
    }

    /// Ends the stream (trailer, checksum); the encoder takes no more input.
    pub fn finish(&mut self, out: &mut Vec<u8>) -> io::Result<()> {
        self.run(&[], out, Step::Finish)
    }

    fn run(&mut self, mut input: &[u8], out: &mut Vec<u8>, step: Step) -> io::Result<()> {
        match &mut self.kind {
            Kind::Identity => {
                out.extend_from_slice(input);
                Ok(())
            }
            Kind::Fast(f) => {
                match step {
                    Step::Data => f.compress(input, out),
                    Step::Flush => f.flush(out),
                    Step::Finish => f.finish(out),
                }
                Ok(())
            }
            Kind::Flate(c) => {
                use flate2::{FlushCompress, Status};
                let flush = match step {
                    Step::Data => FlushCompress::None,
                    Step::Flush => FlushCompress::Sync,
                    Step::Finish => FlushCompress::Finish,
                };
                loop {
                    out.reserve(OUT_STEP);
                    let before = c.total_in();
                    let status = c
                        .compress_vec(input, out, flush)
                        .map_err(|e| io::Error::other(e.to_string()))?;
                    let used = usize::try_from(c.total_in() - before).unwrap_or(input.len());
                    input = &input[used.min(input.len())..];
                    // zlib's rule: a call that left output space unused has
                    // emitted everything this step asks for.
                    let room_left = out.len() < out.capacity();
                    let done = match step {
                        Step::Data => input.is_empty(),
                        Step::Flush => room_left,
                        Step::Finish => status == Status::StreamEnd,
                    };
                    if done {
                        return Ok(());
                    }
                }
            }
            Kind::Br(s) => {
                use brotli::enc::encode::BrotliEncoderOperation as Op;
                let op = match step {
                    Step::Data => Op::BROTLI_OPERATION_PROCESS,
                    Step::Flush => Op::BROTLI_OPERATION_FLUSH,
                    Step::Finish => Op::BROTLI_OPERATION_FINISH,
                };
                let mut buf = [0u8; 4096];
                let mut avail_in = input.len();
                let mut in_off = 0;
                loop {
                    let mut avail_out = buf.len();
                    let mut out_off = 0;
                    let ok = s.compress_stream(
                        op,
                        &mut avail_in,
                        input,
                        &mut in_off,
                        &mut avail_out,
                        &mut buf,
                        &mut out_off,
                        &mut None,
                        &mut |_, _, _, _| (),
                    );
                    if !ok {
                        return Err(io::Error::other("brotli encoder failed"));
                    }
                    out.extend_from_slice(&buf[..out_off]);
                    let pending = s.has_more_output();
                    let done = match step {
                        Step::Data => avail_in == 0 && !pending,
                        Step::Flush => avail_in == 0 && !pending,
                        Step::Finish => s.is_finished(),
                    };
                    if done {
                        return Ok(());
                    }
                }
            }
            Kind::Zstd(z) => {
                use zstd::stream::raw::{InBuffer, Operation, OutBuffer};
                let mut buf = [0u8; 4096];
                let mut src = InBuffer::around(input);
                loop {
                    let mut dst = OutBuffer::around(&mut buf[..]);
                    let left = match step {
                        Step::Data => {
                            z.run(&mut src, &mut dst)?;
                            usize::from(src.pos() < input.len())
                        }
                        Step::Flush => z.flush(&mut dst)?,
                        Step::Finish => z.finish(&mut dst, true)?,
                    };
                    let n = dst.pos();
                    out.extend_from_slice(&buf[..n]);
                    if left == 0 && (step == Step::Data || n < buf.len()) {
                        return Ok(());
                    }
                }
            }
        }
    }
}

// --- HTTP/1 heads -------------------------------------------------------------

/// Values of every `name` field of a head, in order.
fn values<'b>(buf: &'b [u8], headers: &[crate::http1::HeaderSpan], name: &str) -> Vec<&'b [u8]> {
    headers
        .iter()
        .filter(|h| h.name.get(buf).eq_ignore_ascii_case(name.as_bytes()))
        .map(|h| h.value.get(buf))
        .collect()
}

/// The coding an HTTP/1 request's answer may get under `policy`, decided
/// when the request arrives (its head is gone by the time the answer
/// does). `None`: the answer goes as it is. Never for HEAD (no body),
/// for a request with `Range` (ranges count in the uncompressed bytes),
/// or for an HTTP/1.0 client (the coded length is unknown until the end,
/// and 1.0 cannot read chunked).
pub fn choose_h1(policy: &Policy, buf: &[u8], head: &crate::http1::RequestHead) -> Option<Coding> {
    use crate::http1::{Method, Version};
    if head.method == Method::Head || head.version != Version::Http11 {
        return None;
    }
    if head.header(buf, "range").is_some() {
        return None;
    }
    choose_any_h1(policy, buf, head)
}

/// [`Policy::choose`] on an HTTP/1 request's `Accept-Encoding` lines and
/// `User-Agent`, whatever the request (see [`choose_h1`] for the rules an
/// on-the-fly compression adds).
pub fn choose_any_h1(
    policy: &Policy,
    buf: &[u8],
    head: &crate::http1::RequestHead,
) -> Option<Coding> {
    let ae = values(buf, &head.headers, "accept-encoding");
    policy.choose(&ae, head.header(buf, "user-agent"))
}

/// What to do with an answer, decided from its head.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Verdict {
    /// Sent as it is, head untouched (HAProxy 2.6 adds no `Vary` to an
    /// answer it does not compress: its reg-test `compression/vary.vtc`).
    AsIs,
    /// Compress with this coding: drop the length, name the coding, weaken
    /// the ETag, add Vary.
    Compress(Coding),
}

/// The verdict for an HTTP/1 response head under `policy` for a request
/// that chose `coding` (see [`choose_h1`]).
pub fn verdict_h1(
    policy: &Policy,
    coding: Option<Coding>,
    buf: &[u8],
    r: &crate::http1::ResponseHead,
) -> Verdict {
    use crate::http1::{BodyFraming, Version};
    let length_known = match r.framing {
        // (An empty body is left alone: there is nothing to code.)
        BodyFraming::ContentLength(n) => n > 0 && n >= policy.min_size,
        BodyFraming::Chunked => true,
        _ => false,
    };
    let cc = values(buf, &r.headers, "cache-control");
    let etags = values(buf, &r.headers, "etag");
    let facts = ResponseFacts {
        http11: r.version != Version::Http10,
        status: r.status,
        length_known,
        content_encoding: r.header(buf, "content-encoding").is_some(),
        content_type: r.header(buf, "content-type"),
        cache_control: &cc,
        etags: &etags,
    };
    decide(policy, coding, &facts)
}

/// The verdict for a stored answer (a cache hit: its status, fields and
/// body length, HTTP/1.1) under `policy` for a request that chose
/// `coding`, as [`verdict_h1`] judges a server's head.
pub fn verdict_stored(
    policy: &Policy,
    coding: Option<Coding>,
    status: u16,
    fields: &[(Vec<u8>, Vec<u8>)],
    body_len: usize,
) -> Verdict {
    let all = |name: &[u8]| -> Vec<&[u8]> {
        fields
            .iter()
            .filter(|(n, _)| n.eq_ignore_ascii_case(name))
            .map(|(_, v)| &v[..])
            .collect()
    };
    let (cc, etags) = (all(b"cache-control"), all(b"etag"));
    let facts = ResponseFacts {
        http11: true,
        status,
        length_known: body_len > 0 && body_len as u64 >= policy.min_size,
        content_encoding: !all(b"content-encoding").is_empty(),
        content_type: all(b"content-type").first().copied(),
        cache_control: &cc,
        etags: &etags,
    };
    decide(policy, coding, &facts)
}

/// The verdict from response facts (for answers ebb builds itself).
///
/// `identity` chosen (configured, and nothing else the client accepts) is
/// a coding like the others, as in HAProxy 2.6: the bytes pass unchanged
/// but the answer is re-framed chunked, its ETag weakened and `Vary`
/// added; only `Content-Encoding` is left out (reg-test
/// `compression/basic.vtc`, client c3).
pub fn decide(policy: &Policy, coding: Option<Coding>, facts: &ResponseFacts<'_>) -> Verdict {
    if policy.algos.is_empty() || !policy.response_allows(facts) {
        return Verdict::AsIs;
    }
    match coding {
        Some(c) => Verdict::Compress(c),
        None => Verdict::AsIs,
    }
}

/// Writes the fields a verdict adds to an HTTP/1 head: for a compressed
/// answer `Content-Encoding`, the weak form of `etag` (the caller left the
/// original out) and `Vary: Accept-Encoding`.
pub fn write_h1_fields(out: &mut Vec<u8>, v: Verdict, etag: Option<&[u8]>) {
    if let Verdict::Compress(c) = v {
        if let Some(ce) = c.content_encoding() {
            out.extend_from_slice(b"Content-Encoding: ");
            out.extend_from_slice(ce.as_bytes());
            out.extend_from_slice(b"\r\n");
        }
        if let Some(w) = etag.and_then(weak_etag) {
            out.extend_from_slice(b"ETag: ");
            out.extend_from_slice(&w);
            out.extend_from_slice(b"\r\n");
        }
        out.extend_from_slice(b"Vary: Accept-Encoding\r\n");
    }
}

/// What a [`BodyCompressor::write`] ends with.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Then {
    /// More input follows; the encoder may hold some back.
    More,
    /// Everything given so far leaves in decodable form (the origin
    /// paused).
    Flush,
    /// The body ends: the encoder's trailer and the last chunk.
    End,
}

/// Compresses one answer's body into chunked framing (RFC 9112 §7.1), a
/// slice at a time: each [`write`](Self::write) emits what the encoder
/// gave as one chunk (the encoder writes straight after a chunk-size
/// field sized for its worst case, filled in afterwards: no copy), and
/// its end the last chunk.
pub struct BodyCompressor {
    enc: Encoder,
    finished: bool,
    /// Input was given since the last flush.
    unflushed: bool,
    /// Bytes given and coded bytes produced (chunk framing left out):
    /// HAProxy's `comp_in` and `comp_out`.
    bytes_in: u64,
    bytes_out: u64,
}

impl BodyCompressor {
    pub fn new(coding: Coding, level: u32) -> io::Result<BodyCompressor> {
        Ok(BodyCompressor {
            enc: Encoder::new(coding, level)?,
            finished: false,
            unflushed: false,
            bytes_in: 0,
            bytes_out: 0,
        })
    }

    /// Bytes given so far, and coded bytes produced.
    pub fn totals(&self) -> (u64, u64) {
        (self.bytes_in, self.bytes_out)
    }

    /// Compresses `input`, appending a chunk to `out` when the encoder
    /// emitted bytes.
    pub fn push(&mut self, input: &[u8], out: &mut Vec<u8>) -> io::Result<()> {
        self.write(input, Then::More, out)
    }

    /// Makes everything pushed so far decodable (the origin paused).
    pub fn flush(&mut self, out: &mut Vec<u8>) -> io::Result<()> {
        self.write(&[], Then::Flush, out)
    }

    /// Ends the body: the encoder's trailer and the last chunk.
    pub fn finish(&mut self, out: &mut Vec<u8>) -> io::Result<()> {
        self.write(&[], Then::End, out)
    }

    /// Compresses `input`, then flushes or ends as `then` says, all in one
    /// chunk appended to `out` (none when the encoder emitted nothing).
    pub fn write(&mut self, input: &[u8], then: Then, out: &mut Vec<u8>) -> io::Result<()> {
        if self.finished {
            return Ok(());
        }
        // Deflate's worst case (stored blocks) plus a trailer; a bigger
        // chunk (another encoder's buffered bytes) widens the field.
        let width = hex_digits(input.len() + input.len() / 8 + 1024);
        let mark = out.len();
        out.resize(mark + width + 2, b'0');
        let start = out.len();
        self.enc.compress(input, out)?;
        match then {
            Then::More => {}
            Then::Flush => self.enc.flush(out)?,
            Then::End => self.enc.finish(out)?,
        }
        let n = out.len() - start;
        self.bytes_in += input.len() as u64;
        self.bytes_out += n as u64;
        if n == 0 {
            out.truncate(mark);
        } else {
            let need = hex_digits(n);
            let width = if need > width {
                out.splice(mark..mark, std::iter::repeat_n(b'0', need - width))
                    .for_each(drop);
                need
            } else {
                width
            };
            let mut v = n;
            for slot in out[mark..mark + width].iter_mut().rev() {
                *slot = b"0123456789abcdef"[v & 0xf];
                v >>= 4;
            }
            out[mark + width..mark + width + 2].copy_from_slice(b"\r\n");
            out.extend_from_slice(crate::http1::CHUNK_END);
        }
        if then == Then::End {
            out.extend_from_slice(crate::http1::LAST_CHUNK);
            self.finished = true;
        }
        self.unflushed = then == Then::More && (self.unflushed || !input.is_empty());
        Ok(())
    }

    pub fn is_finished(&self) -> bool {
        self.finished
    }

    /// Whether input was given since the last flush (a flush would send
    /// something the client is waiting for).
    pub fn unflushed(&self) -> bool {
        self.unflushed
    }
}

/// Hex digits of `n` (at least one).
fn hex_digits(n: usize) -> usize {
    ((usize::BITS - n.leading_zeros()).div_ceil(4) as usize).max(1)
}

/// Compresses a whole small body at once (a fixed answer): the coded
/// bytes, to send with their Content-Length.
pub fn compress_all(coding: Coding, level: u32, body: &[u8]) -> io::Result<Vec<u8>> {
    let mut e = Encoder::new(coding, level)?;
    let mut out = Vec::with_capacity(body.len() / 2 + 64);
    e.compress(body, &mut out)?;
    e.finish(&mut out)?;
    Ok(out)
}

/// A whole chunked body holding one gzip stream, decoded (for tests).
#[cfg(test)]
pub(crate) fn gunzip_chunked(body: &[u8]) -> Vec<u8> {
    use std::io::Read;
    let mut dec = crate::http1::ChunkedDecoder::default();
    let mut coded = Vec::new();
    assert!(
        dec.decode_to_vec(body, &mut coded).unwrap().1,
        "a whole chunked body"
    );
    let mut plain = Vec::new();
    flate2::read::GzDecoder::new(&coded[..])
        .read_to_end(&mut plain)
        .unwrap();
    plain
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Read;

    fn policy(algos: &[Coding], types: &[&str]) -> Policy {
        Policy {
            algos: algos.to_vec(),
            types: types.iter().map(|t| t.to_ascii_lowercase()).collect(),
            offload: false,
            level: 1,
            min_size: 0,
            ..Policy::default()
        }
    }

    #[test]
    fn client_order_and_weights_decide_as_haproxy() {
        use Coding::*;
        let p = policy(&[Br, Gzip], &[]);
        // Equal weights: the client's first listed coding we offer.
        assert_eq!(p.choose(&[b"gzip, deflate, br"], None), Some(Gzip));
        assert_eq!(p.choose(&[b"br, gzip"], None), Some(Br));
        // A strictly higher weight wins wherever it stands.
        assert_eq!(p.choose(&[b"gzip;q=0.5, br;q=0.8"], None), Some(Br));
        assert_eq!(p.choose(&[b"gzip;q=0.5", b"br;q=0.4"], None), Some(Gzip));
        // q=0 means "not acceptable".
        assert_eq!(p.choose(&[b"gzip;q=0, br;q=0"], None), None);
        // `*` is the first configured algorithm.
        assert_eq!(p.choose(&[b"*"], None), Some(Br));
        // Nothing we offer, no identity configured: as is.
        assert_eq!(p.choose(&[b"compress"], None), None);
        assert_eq!(p.choose(&[], None), None);
        // Identity configured: chosen when nothing else matched.
        let p = policy(&[Gzip, Identity], &[]);
        assert_eq!(p.choose(&[b"br"], None), Some(Identity));
        // Tokens are case-insensitive; spaces around parameters allowed.
        let p = policy(&[Gzip], &[]);
        assert_eq!(p.choose(&[b"GZIP ; q=1.0"], None), Some(Gzip));
        // Malformed weights make the element ignored, not the header.
        assert_eq!(p.choose(&[b"gzip;q=2, gzip;q=0.3"], None), Some(Gzip));
        assert_eq!(p.choose(&[b"gzip;q=0.1234"], None), None);
        // raw-deflate answers to "deflate".
        let p = policy(&[RawDeflate], &[]);
        assert_eq!(p.choose(&[b"deflate"], None), Some(RawDeflate));
    }

    #[test]
    fn old_browsers_get_no_compression() {
        let p = policy(&[Coding::Gzip], &[]);
        let ae: &[&[u8]] = &[b"gzip"];
        assert_eq!(p.choose(ae, Some(b"Mozilla/4.0 (compatible)")), None);
        assert_eq!(
            p.choose(
                ae,
                Some(b"Mozilla/4.0 (compatible; MSIE 6.0; Windows NT 5.1)")
            ),
            None
        );
        assert_eq!(
            p.choose(
                ae,
                Some(b"Mozilla/4.0 (compatible; MSIE 6.0; Windows NT 5.1; SV1)")
            ),
            Some(Coding::Gzip)
        );
        assert_eq!(
            p.choose(ae, Some(b"Mozilla/4.0 (compatible; MSIE 7.0)")),
            Some(Coding::Gzip)
        );
        assert_eq!(
            p.choose(ae, Some(b"Mozilla/4.0 (compatible; MSIE 10.0)")),
            Some(Coding::Gzip)
        );
        assert_eq!(p.choose(ae, Some(b"Mozilla/5.0 (X11)")), Some(Coding::Gzip));
        assert_eq!(p.choose(ae, Some(b"curl/8")), Some(Coding::Gzip));
    }

    #[test]
    fn response_rules() {
        let p = policy(&[Coding::Gzip], &["text/html", "application/json"]);
        let ok = ResponseFacts {
            http11: true,
            status: 200,
            length_known: true,
            content_type: Some(b"text/html; charset=utf-8"),
            ..ResponseFacts::default()
        };
        assert!(p.response_allows(&ok));
        for status in [201, 202, 203] {
            assert!(p.response_allows(&ResponseFacts { status, ..ok }));
        }
        for status in [204, 206, 301, 304, 404, 500] {
            assert!(!p.response_allows(&ResponseFacts { status, ..ok }));
        }
        assert!(!p.response_allows(&ResponseFacts {
            http11: false,
            ..ok
        }));
        assert!(!p.response_allows(&ResponseFacts {
            length_known: false,
            ..ok
        }));
        assert!(!p.response_allows(&ResponseFacts {
            content_encoding: true,
            ..ok
        }));
        assert!(!p.response_allows(&ResponseFacts {
            cache_control: &[b"public", b"max-age=3, No-Transform"],
            ..ok
        }));
        assert!(p.response_allows(&ResponseFacts {
            cache_control: &[b"public, max-age=3"],
            ..ok
        }));
        assert!(p.response_allows(&ResponseFacts {
            etags: &[b"\"abc\""],
            ..ok
        }));
        assert!(!p.response_allows(&ResponseFacts {
            etags: &[b"\"abc\"", b"\"def\""],
            ..ok
        }));
        assert!(!p.response_allows(&ResponseFacts {
            etags: &[b"abc"],
            ..ok
        }));
        // Types: prefix match, case-insensitive; multipart never.
        assert!(p.response_allows(&ResponseFacts {
            content_type: Some(b"Application/JSON"),
            ..ok
        }));
        assert!(!p.response_allows(&ResponseFacts {
            content_type: Some(b"image/png"),
            ..ok
        }));
        assert!(!p.response_allows(&ResponseFacts {
            content_type: None,
            ..ok
        }));
        let any = policy(&[Coding::Gzip], &[]);
        assert!(any.response_allows(&ResponseFacts {
            content_type: None,
            ..ok
        }));
        assert!(!any.response_allows(&ResponseFacts {
            content_type: Some(b"multipart/byteranges; boundary=x"),
            ..ok
        }));
    }

    #[test]
    fn etags_become_weak() {
        assert_eq!(weak_etag(b"\"x1\"").as_deref(), Some(&b"W/\"x1\""[..]));
        assert_eq!(weak_etag(b" W/\"x1\"").as_deref(), Some(&b"W/\"x1\""[..]));
        assert_eq!(weak_etag(b"x1"), None);
        assert_eq!(weak_etag(b"\"a\"b\""), None);
    }

    fn text(n: usize) -> Vec<u8> {
        (0..n)
            .map(|i| b"the quick brown fox jumps over the lazy dog "[i % 44])
            .collect()
    }

    fn decode(c: Coding, data: &[u8]) -> Vec<u8> {
        let mut out = Vec::new();
        match c {
            Coding::Identity => out.extend_from_slice(data),
            Coding::Gzip => {
                flate2::read::GzDecoder::new(data)
                    .read_to_end(&mut out)
                    .unwrap();
            }
            Coding::Deflate => {
                flate2::read::ZlibDecoder::new(data)
                    .read_to_end(&mut out)
                    .unwrap();
            }
            Coding::RawDeflate => {
                flate2::read::DeflateDecoder::new(data)
                    .read_to_end(&mut out)
                    .unwrap();
            }
            Coding::Br => {
                brotli::Decompressor::new(data, 4096)
                    .read_to_end(&mut out)
                    .unwrap();
            }
            Coding::Zstd => out = zstd::stream::decode_all(data).unwrap(),
        }
        out
    }

    const ALL: [Coding; 6] = [
        Coding::Identity,
        Coding::Gzip,
        Coding::Deflate,
        Coding::RawDeflate,
        Coding::Br,
        Coding::Zstd,
    ];

    #[test]
    fn every_coding_round_trips_in_pieces() {
        for c in ALL {
            for n in [0, 1, 100, 70_000, 1 << 20] {
                let input = text(n);
                let mut e = Encoder::new(c, 1).unwrap();
                let mut out = Vec::new();
                for piece in input.chunks(5_000) {
                    e.compress(piece, &mut out).unwrap();
                }
                e.finish(&mut out).unwrap();
                assert_eq!(decode(c, &out), input, "{c:?} {n}");
                if n >= 70_000 && c != Coding::Identity {
                    assert!(out.len() < n / 5, "{c:?} {n}: {} bytes", out.len());
                }
            }
        }
    }

    #[test]
    fn flush_makes_everything_so_far_decodable() {
        // After a flush, a streaming decoder yields every byte given so far
        // (a streamed answer is never held back by the encoder).
        for c in [Coding::Gzip, Coding::Deflate, Coding::RawDeflate] {
            let mut e = Encoder::new(c, 1).unwrap();
            let mut out = Vec::new();
            e.compress(b"hello, ", &mut out).unwrap();
            e.flush(&mut out).unwrap();
            let mut d = flate2::Decompress::new_with_window_bits(c == Coding::Deflate, 15);
            if c == Coding::Gzip {
                d = flate2::Decompress::new_gzip(15);
            }
            let mut plain = Vec::with_capacity(64);
            d.decompress_vec(&out, &mut plain, flate2::FlushDecompress::Sync)
                .unwrap();
            assert_eq!(plain, b"hello, ", "{c:?}");
            // The stream goes on after a flush.
            e.compress(b"world", &mut out).unwrap();
            e.finish(&mut out).unwrap();
            assert_eq!(decode(c, &out), b"hello, world");
        }
        for c in [Coding::Br, Coding::Zstd] {
            let mut e = Encoder::new(c, 1).unwrap();
            let mut out = Vec::new();
            e.compress(b"hello, ", &mut out).unwrap();
            e.flush(&mut out).unwrap();
            let mut plain = vec![0u8; 7];
            match c {
                Coding::Br => brotli::Decompressor::new(&out[..], 4096)
                    .read_exact(&mut plain)
                    .unwrap(),
                _ => zstd::stream::read::Decoder::new(&out[..])
                    .unwrap()
                    .read_exact(&mut plain)
                    .unwrap(),
            }
            assert_eq!(plain, b"hello, ", "{c:?}");
            e.compress(b"world", &mut out).unwrap();
            e.finish(&mut out).unwrap();
            assert_eq!(decode(c, &out), b"hello, world");
        }
    }

    #[test]
    fn body_compressor_writes_chunks_that_decode_to_the_input() {
        let input = text(100_000);
        for c in [Coding::Gzip, Coding::Br, Coding::Zstd] {
            let mut b = BodyCompressor::new(c, 1).unwrap();
            let mut out = Vec::new();
            for piece in input.chunks(7_000) {
                b.push(piece, &mut out).unwrap();
            }
            b.finish(&mut out).unwrap();
            b.finish(&mut out).unwrap(); // once only
            assert!(b.is_finished());
            let mut dec = crate::http1::ChunkedDecoder::default();
            let mut coded = Vec::new();
            let (n, done) = dec.decode_to_vec(&out, &mut coded).unwrap();
            assert!(done && n == out.len(), "{c:?}");
            assert_eq!(decode(c, &coded), input, "{c:?}");
        }
        let all = compress_all(Coding::Gzip, 1, &input).unwrap();
        assert_eq!(decode(Coding::Gzip, &all), input);
    }

    #[test]
    fn names() {
        for c in ALL {
            let name = match c {
                Coding::RawDeflate => "raw-deflate",
                c => c.token(),
            };
            assert_eq!(Coding::parse(name), Some(c));
        }
        assert_eq!(Coding::parse("lzma"), None);
        assert_eq!(Coding::Identity.content_encoding(), None);
        assert_eq!(Coding::RawDeflate.content_encoding(), Some("deflate"));
    }

    #[test]
    fn qvalues() {
        assert_eq!(parse_qvalue(b"0"), Some(0));
        assert_eq!(parse_qvalue(b"0.5"), Some(500));
        assert_eq!(parse_qvalue(b"0.123"), Some(123));
        assert_eq!(parse_qvalue(b"1"), Some(1000));
        assert_eq!(parse_qvalue(b"1.000"), Some(1000));
        assert_eq!(parse_qvalue(b"1.001"), None);
        assert_eq!(parse_qvalue(b"0.1234"), None);
        assert_eq!(parse_qvalue(b""), None);
        assert_eq!(parse_qvalue(b"0.x"), None);
    }

    #[test]
    fn a_request_body_is_coded_whatever_its_framing_and_pieces() {
        let plain: Vec<u8> = (0..50_000u32)
            .map(|i| b"request body "[i as usize % 13])
            .collect();
        let mut chunked = Vec::new();
        for c in plain.chunks(7_000) {
            chunked.extend_from_slice(format!("{:x}\r\n", c.len()).as_bytes());
            chunked.extend_from_slice(c);
            chunked.extend_from_slice(b"\r\n");
        }
        chunked.extend_from_slice(b"0\r\nx-t: 1\r\n\r\nNEXT");
        for (input, length) in [(&plain[..], Some(plain.len() as u64)), (&chunked[..], None)] {
            for piece in [1usize, 997, 1 << 20] {
                let mut rb = RequestBody::new(Coding::Gzip, 1, length).unwrap();
                let (mut pos, mut out, mut done) = (0, Vec::new(), false);
                while !done {
                    let end = (pos + piece).min(input.len());
                    let (n, d) = rb.feed(&input[pos..end], &mut out).unwrap();
                    pos += n;
                    done = d;
                }
                // The bytes after the body's end are left for the next request.
                assert_eq!(
                    &input[pos..],
                    if length.is_some() { &b""[..] } else { b"NEXT" }
                );
                assert_eq!(gunzip_chunked(&out), plain, "piece {piece}");
            }
        }
        // Broken chunked framing is an error, not a guess.
        let mut rb = RequestBody::new(Coding::Gzip, 1, None).unwrap();
        assert!(rb.feed(b"zz\r\n", &mut Vec::new()).is_err());
    }
}
