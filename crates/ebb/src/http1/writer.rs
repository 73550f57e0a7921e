//! Response heads written into a reused `Vec<u8>`, the per-thread `Date`
//! cache, reason phrases and ready-made error responses.
//!
//! Nothing here allocates once the output vector has grown to its working
//! size: numbers are formatted on the stack, the Date value is formatted at
//! most once per second per thread ([`DateCache`]), error bodies are static.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use super::error::HttpError;
use super::head::{is_field_value, is_token, BodyFraming, Version};

/// Value of the `Server` field ebb sends.
pub const SERVER: &[u8] = b"ebb";

/// What follows the reason phrase in ebb's response heads: the end of the
/// status line, the `Server` line and the start of the `Date` one.
const SERVER_THEN_DATE: &[u8] = b"\r\nServer: ebb\r\nDate: ";

/// Up to `N` header fields (name, value) on the stack: an answer's own
/// fields, gathered before they are written, without a vector. A field
/// past `N` is dropped (a caller's bug, caught by a debug assertion).
pub struct Fields<'a, const N: usize> {
    list: [(&'a [u8], &'a [u8]); N],
    len: usize,
}

impl<'a, const N: usize> Fields<'a, N> {
    pub fn new() -> Self {
        Fields {
            list: [(&[], &[]); N],
            len: 0,
        }
    }

    pub fn push(&mut self, f: (&'a [u8], &'a [u8])) {
        debug_assert!(self.len < N, "more than {N} fields");
        if let Some(slot) = self.list.get_mut(self.len) {
            *slot = f;
            self.len += 1;
        }
    }

    pub fn iter(&self) -> impl Iterator<Item = &(&'a [u8], &'a [u8])> {
        self.list[..self.len].iter()
    }

    pub fn to_vec(&self) -> Vec<(&'a [u8], &'a [u8])> {
        self.list[..self.len].to_vec()
    }
}

impl<const N: usize> Default for Fields<'_, N> {
    fn default() -> Self {
        Self::new()
    }
}

/// Length of an IMF-fixdate (`Sun, 06 Nov 1994 08:49:37 GMT`).
pub const DATE_LEN: usize = 29;

/// The `Date` value, formatted again only when the second changes.
///
/// One per thread: the hot path reads 29 cached bytes. Time is passed in
/// (`get_at`), so tests decide what "now" is; `get` reads the clock.
#[derive(Clone, Debug)]
pub struct DateCache {
    /// Unix second the cached text is for; u64::MAX before the first use.
    secs: u64,
    /// The instants the cached text holds for, `[from, until)` (that
    /// second): a reading inside them is compared, not converted (the
    /// conversion's checked arithmetic costs more than the rest of `get`).
    from: SystemTime,
    until: SystemTime,
    buf: [u8; DATE_LEN],
    /// The scheduler turn (its tick) whose clock reading the text is for
    /// (0: none), see [`DateCache::get_in_turn`].
    turn: u32,
    /// How many times the text was formatted (for tests and stats).
    formats: u64,
}

impl Default for DateCache {
    fn default() -> Self {
        DateCache::new()
    }
}

/// Last second httpdate can format (9999-12-31T23:59:59Z); it panics past it.
const MAX_DATE_SECS: u64 = 253_402_300_799;

impl DateCache {
    /// An empty cache; the first `get` formats.
    pub const fn new() -> Self {
        DateCache {
            secs: u64::MAX,
            from: UNIX_EPOCH,
            until: UNIX_EPOCH,
            buf: [b' '; DATE_LEN],
            turn: 0,
            formats: 0,
        }
    }

    /// The Date value for the scheduler turn whose tick is `turn`: the
    /// clock is read at the first answer of a turn only, the turn's later
    /// answers take the same text (HAProxy too reads the date once per
    /// loop turn). `turn` 0 (no tick) reads the clock.
    pub fn get_in_turn(&mut self, turn: u32) -> &[u8; DATE_LEN] {
        if turn == 0 || turn != self.turn {
            self.turn = turn;
            return self.get();
        }
        &self.buf
    }

    /// The Date value for the current clock.
    pub fn get(&mut self) -> &[u8; DATE_LEN] {
        self.get_at(SystemTime::now())
    }

    /// The Date value for `now`. A clock before 1970 gives the epoch, one
    /// past year 9999 gives its last second (httpdate cannot format either).
    pub fn get_at(&mut self, now: SystemTime) -> &[u8; DATE_LEN] {
        if now >= self.from && now < self.until {
            return &self.buf;
        }
        let secs = now
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| d.as_secs())
            .min(MAX_DATE_SECS);
        if secs != self.secs {
            self.format(secs);
        }
        // The window of that second (none for the clamped ends: their
        // readings are converted each time).
        let start = UNIX_EPOCH + Duration::from_secs(secs);
        match now.duration_since(start) {
            Ok(d) if d.as_secs() == 0 => {
                self.from = start;
                self.until = start + Duration::from_secs(1);
            }
            _ => {
                self.from = UNIX_EPOCH;
                self.until = UNIX_EPOCH;
            }
        }
        &self.buf
    }

    #[cold]
    fn format(&mut self, secs: u64) {
        use std::io::Write;
        let t = UNIX_EPOCH + Duration::from_secs(secs);
        let date = httpdate::HttpDate::from(t);
        let mut w: &mut [u8] = &mut self.buf[..];
        // Always exactly 29 bytes; a failure would leave the old text.
        let _ = write!(w, "{date}");
        self.secs = secs;
        self.formats += 1;
    }

    /// How many times the text was formatted since creation.
    pub fn formats(&self) -> u64 {
        self.formats
    }
}

/// The reason phrase of a status code (RFC 9110 §15 and the IANA
/// registry); "" for unregistered codes (the status line then ends in SP).
pub const fn reason_phrase(status: u16) -> &'static str {
    match status {
        100 => "Continue",
        101 => "Switching Protocols",
        102 => "Processing",
        103 => "Early Hints",
        200 => "OK",
        201 => "Created",
        202 => "Accepted",
        203 => "Non-Authoritative Information",
        204 => "No Content",
        205 => "Reset Content",
        206 => "Partial Content",
        207 => "Multi-Status",
        208 => "Already Reported",
        226 => "IM Used",
        300 => "Multiple Choices",
        301 => "Moved Permanently",
        302 => "Found",
        303 => "See Other",
        304 => "Not Modified",
        305 => "Use Proxy",
        307 => "Temporary Redirect",
        308 => "Permanent Redirect",
        400 => "Bad Request",
        401 => "Unauthorized",
        402 => "Payment Required",
        403 => "Forbidden",
        404 => "Not Found",
        405 => "Method Not Allowed",
        406 => "Not Acceptable",
        407 => "Proxy Authentication Required",
        408 => "Request Timeout",
        409 => "Conflict",
        410 => "Gone",
        411 => "Length Required",
        412 => "Precondition Failed",
        413 => "Content Too Large",
        414 => "URI Too Long",
        415 => "Unsupported Media Type",
        416 => "Range Not Satisfiable",
        417 => "Expectation Failed",
        421 => "Misdirected Request",
        422 => "Unprocessable Content",
        423 => "Locked",
        424 => "Failed Dependency",
        425 => "Too Early",
        426 => "Upgrade Required",
        428 => "Precondition Required",
        429 => "Too Many Requests",
        431 => "Request Header Fields Too Large",
        451 => "Unavailable For Legal Reasons",
        500 => "Internal Server Error",
        501 => "Not Implemented",
        502 => "Bad Gateway",
        503 => "Service Unavailable",
        504 => "Gateway Timeout",
        505 => "HTTP Version Not Supported",
        506 => "Variant Also Negotiates",
        507 => "Insufficient Storage",
        508 => "Loop Detected",
        511 => "Network Authentication Required",
        _ => "",
    }
}

/// Appends `n` in decimal, formatted on the stack.
pub fn push_decimal(out: &mut Vec<u8>, n: u64) {
    let mut digits = [0u8; 20];
    out.extend_from_slice(decimal(n, &mut digits));
}

/// `00` to `99`, two bytes each: two digits per division.
static DIGIT_PAIRS: [u8; 200] = {
    let mut t = [0u8; 200];
    let mut i = 0;
    while i < 100 {
        t[2 * i] = b'0' + (i / 10) as u8;
        t[2 * i + 1] = b'0' + (i % 10) as u8;
        i += 1;
    }
    t
};

/// Decimal digits of `n` on the stack, two at a time.
pub(crate) fn decimal(n: u64, buf: &mut [u8; 20]) -> &[u8] {
    let mut i = buf.len();
    let mut n = n;
    // At most 20 digits: nine pairs leave n below 100, the 20 bytes hold
    // the last one or two.
    while n >= 100 {
        let d = (n % 100) as usize * 2;
        n /= 100;
        i -= 2;
        buf[i..i + 2].copy_from_slice(&DIGIT_PAIRS[d..d + 2]);
    }
    if n >= 10 {
        let d = n as usize * 2;
        i -= 2;
        buf[i..i + 2].copy_from_slice(&DIGIT_PAIRS[d..d + 2]);
    } else {
        i -= 1;
        buf[i] = b'0' + n as u8;
    }
    &buf[i..]
}

/// Writes one response head into `out` (appending: several pipelined
/// responses may share one output buffer).
///
/// ```text
/// let mut w = ResponseWriter::new(&mut out, 200, date.get());
/// w.header(b"Content-Type", b"text/html")?;
/// w.finish(BodyFraming::ContentLength(len), keep_alive, req.version);
/// ```
///
/// Output order: status line, `Server`, `Date`, the caller's fields, the
/// framing field, `Connection` when needed, the empty line.
pub struct ResponseWriter<'a> {
    out: &'a mut Vec<u8>,
}

impl<'a> ResponseWriter<'a> {
    /// Starts a head: status line, `Server: ebb`, `Date`. A status outside
    /// 100..=999 is written as 500 (a caller bug must not put a malformed
    /// status line on the wire).
    pub fn new(out: &'a mut Vec<u8>, status: u16, date: &[u8]) -> Self {
        Self::with_reason(out, status, b"", date)
    }

    /// As [`ResponseWriter::new`], with `reason` for the reason phrase
    /// (ebb's error pages: [`error_reason`]); an empty one, or one with
    /// a byte a reason may not hold, is the status's [`reason_phrase`].
    pub fn with_reason(out: &'a mut Vec<u8>, status: u16, reason: &[u8], date: &[u8]) -> Self {
        let (status, reason) = if (100..=999).contains(&status) {
            (status, reason)
        } else {
            (500, &b""[..])
        };
        let reason = if reason.is_empty() || !is_field_value(reason) {
            reason_phrase(status).as_bytes()
        } else {
            reason
        };
        // The status line's start in one piece, the constant lines
        // between the reason and the date in another.
        let mut line = *b"HTTP/1.1 200 ";
        line[9] = b'0' + (status / 100) as u8;
        line[10] = b'0' + (status / 10 % 10) as u8;
        line[11] = b'0' + (status % 10) as u8;
        out.extend_from_slice(&line);
        out.extend_from_slice(reason);
        out.extend_from_slice(SERVER_THEN_DATE);
        out.extend_from_slice(date);
        out.extend_from_slice(b"\r\n");
        ResponseWriter { out }
    }

    /// Adds a field line. Refuses (writes nothing) a name that is not a
    /// token or a value with CR, LF, NUL or another control byte, so no
    /// configured or forwarded value can split the response.
    pub fn header(&mut self, name: &[u8], value: &[u8]) -> Result<(), HttpError> {
        if !is_token(name) {
            return Err(HttpError::BadHeaderName);
        }
        if !is_field_value(value) {
            return Err(HttpError::BadHeaderValue);
        }
        self.out.extend_from_slice(name);
        self.out.extend_from_slice(b": ");
        self.out.extend_from_slice(value);
        self.out.extend_from_slice(b"\r\n");
        Ok(())
    }

    /// Adds field lines already checked as [`ResponseWriter::header`]
    /// checks them (`Name: value` CRLF each), as they are.
    pub fn checked_lines(&mut self, lines: &[u8]) {
        self.out.extend_from_slice(lines);
    }

    /// Adds a field whose value is a number.
    pub fn header_u64(&mut self, name: &[u8], value: u64) -> Result<(), HttpError> {
        let mut digits = [0u8; 20];
        self.header(name, decimal(value, &mut digits))
    }

    /// Ends the head. `body` picks the framing field: `ContentLength(n)`
    /// writes `Content-Length: n`, `Chunked` writes `Transfer-Encoding:
    /// chunked` (never use it for an HTTP/1.0 client: send `UntilClose`),
    /// `UntilClose` writes none and forces `Connection: close`, `None`
    /// writes none (1xx, 204, 304; a HEAD answer passes the length GET
    /// would have had instead). `Connection: close` is written when the
    /// connection will close, `Connection: keep-alive` when it stays open
    /// for an HTTP/1.0 client, nothing otherwise.
    /// Ends a head that carries its own `Connection` (a 101's `upgrade`):
    /// no framing field, no `Connection` decision, the empty line.
    pub fn finish_bare(self) {
        self.out.extend_from_slice(b"\r\n");
    }

    pub fn finish(self, body: BodyFraming, keep_alive: bool, request_version: Version) {
        let mut keep_alive = keep_alive;
        match body {
            BodyFraming::ContentLength(n) => {
                let mut digits = [0u8; 20];
                self.out.extend_from_slice(b"Content-Length: ");
                self.out.extend_from_slice(decimal(n, &mut digits));
                self.out.extend_from_slice(b"\r\n");
            }
            BodyFraming::Chunked => {
                self.out
                    .extend_from_slice(b"Transfer-Encoding: chunked\r\n");
            }
            BodyFraming::UntilClose => keep_alive = false,
            BodyFraming::None => {}
        }
        if !keep_alive {
            self.out.extend_from_slice(b"Connection: close\r\n");
        } else if request_version == Version::Http10 {
            self.out.extend_from_slice(b"Connection: keep-alive\r\n");
        }
        self.out.extend_from_slice(b"\r\n");
    }
}

macro_rules! error_bodies {
    ($($code:literal => $text:literal,)*) => {
        /// The HTML body of ebb's error response for `status`, with a
        /// `{reason}` placeholder for the reason phrase.
        const fn error_template(status: u16) -> &'static str {
            match status {
                $($code => concat!(
                    "<html><body><h1>", stringify!($code), " ",
                    "{reason}", "</h1>\n", $text, "\n</body></html>\n"
                ),)*
                _ => "<html><body><h1>Error</h1>\n</body></html>\n",
            }
        }
    };
}

// HAProxy 2.6's texts (its `http_err_msgs`) for the statuses it makes
// itself, `501`'s stray leading dot included; ebb's own for the others.
error_bodies! {
    200 => "Service ready.",
    400 => "Your browser sent an invalid request.",
    401 => "You need a valid user and password to access this content.",
    403 => "Request forbidden by administrative rules.",
    404 => "The resource could not be found.",
    405 => "A request was made of a resource using a request method not supported by that resource",
    407 => "You need a valid user and password to access this content.",
    408 => "Your browser didn't send a complete request in time.",
    410 => "The resource is no longer available and will not be available again.",
    413 => "The request entity exceeds the maximum allowed.",
    414 => "The requested URL is too long.",
    416 => "The requested range is not satisfiable.",
    421 => "Request sent to a non-authoritative server.",
    422 => "The server cannot process the contained instructions.",
    425 => "Your browser sent early data.",
    429 => "You have sent too many requests in a given amount of time.",
    431 => "The request header fields are too large.",
    500 => "An internal server error occurred.",
    501 => ".The server does not support the functionality required to fulfill the request.",
    502 => "The server returned an invalid or incomplete response.",
    503 => "No server is available to handle this request.",
    504 => "The server didn't respond in time.",
    505 => "The HTTP version of the request is not supported.",
}

/// The reason phrase of ebb's error page for `status`, in its status line
/// and its title: HAProxy 2.6's where its own page says another than the
/// registry (`400 Bad request`, `407 Unauthorized`, `408 Request
/// Time-out`, `413 Payload Too Large`, `504 Gateway Time-out`).
pub const fn error_reason(status: u16) -> &'static str {
    match status {
        400 => "Bad request",
        407 => "Unauthorized",
        408 => "Request Time-out",
        413 => "Payload Too Large",
        504 => "Gateway Time-out",
        _ => reason_phrase(status),
    }
}

/// The HTML body of ebb's error page for `status`, split around its reason
/// phrase: (before, after). The page is `before + error_reason + after`,
/// all static, so an error response costs no formatting.
pub fn error_page(status: u16) -> (&'static str, &'static str) {
    let body = error_template(status);
    match body.find("{reason}") {
        Some(p) => (&body[..p], &body[p + "{reason}".len()..]),
        None => (body, ""),
    }
}

/// Writes the answer to a request that could not be read (a malformed
/// head, 400; a head not whole in time, 408), as HAProxy 2.6 sends its
/// raw `http_err_msgs` there: `Connection: close` before `Content-Type`
/// (its other answers, [`write_error_response`], put `Connection` last).
pub fn write_parse_error(out: &mut Vec<u8>, status: u16, date: &[u8]) {
    let (pre, post) = error_page(status);
    let reason = error_reason(status);
    let len = pre.len() + reason.len() + post.len();
    let mut w = ResponseWriter::with_reason(out, status, reason.as_bytes(), date);
    let _ = w.header_u64(b"Content-Length", len as u64);
    let _ = w.header(b"Cache-Control", b"no-cache");
    let _ = w.header(b"Connection", b"close");
    let _ = w.header(b"Content-Type", b"text/html");
    // Kept alive as HTTP/1.1 says nothing more: the close is written.
    w.finish(BodyFraming::None, true, Version::Http11);
    out.extend_from_slice(pre.as_bytes());
    out.extend_from_slice(reason.as_bytes());
    out.extend_from_slice(post.as_bytes());
}

/// Writes a complete error response: the head (`Content-Length`,
/// `Cache-Control: no-cache`, `Content-Type: text/html`, as HAProxy's,
/// `Connection: close` unless `keep_alive`) and a short HTML page naming the status. `extra` fields
/// (e.g. `Allow` for 405, `Content-Range` for 416) go after the fixed ones;
/// invalid ones are skipped. With `head_request`, the body is left out but
/// its length still announced (RFC 9110 §9.3.2). `version` is the
/// request's (HTTP/1.0 needs an explicit keep-alive).
pub fn write_error_response(
    out: &mut Vec<u8>,
    status: u16,
    date: &[u8],
    keep_alive: bool,
    version: Version,
    head_request: bool,
    extra: &[(&[u8], &[u8])],
) {
    let (pre, post) = error_page(status);
    let reason = error_reason(status);
    let len = pre.len() + reason.len() + post.len();
    let mut w = ResponseWriter::with_reason(out, status, reason.as_bytes(), date);
    // HAProxy 2.6's order (its `http_err_msgs`), `Connection` last.
    let _ = w.header_u64(b"Content-Length", len as u64);
    let _ = w.header(b"Cache-Control", b"no-cache");
    let _ = w.header(b"Content-Type", b"text/html");
    for (n, v) in extra {
        let _ = w.header(n, v);
    }
    w.finish(BodyFraming::None, keep_alive, version);
    if !head_request {
        out.extend_from_slice(pre.as_bytes());
        out.extend_from_slice(reason.as_bytes());
        out.extend_from_slice(post.as_bytes());
    }
}
