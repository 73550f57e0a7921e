//! A FastCGI answer (its STDOUT stream: CGI header lines, an empty line,
//! the body) made into the HTTP/1.1 answer a stream reads from a server,
//! socket-free, as HAProxy 2.6 makes it (its FCGI mux, then its
//! `fcgi-app` filter on the response):
//!
//! - the status is the last `Status:` or `Location:` line's: `Status:
//!   CODE REASON` as written (the code its leading digits), `Location:`
//!   `302 Moved Temporarily`, neither `200 OK`;
//! - every `Status` line is left out; `Date` is added when missing;
//! - a body whose length the lines do not give (no `Content-Length`,
//!   not chunked) gets one when the whole answer came before its head
//!   went on (the filter's `Content-Length` of a complete message), else
//!   goes chunked; an HTTP/1.0 request's goes as it comes, to the end
//!   (HAProxy's mux sets the length as known only for HTTP/1.1);
//! - an answer to HEAD, a 204 or a 304 has no body.
//!
//! Refused (the stream answers 502, or cuts an answer under way): lines
//! that do not parse as HTTP field lines, or too large; an answer that
//! ends within its lines; a `Status` without a code, a code below 200
//! (a FastCGI answer is final) or above 599 (HAProxy 2.6.12 passes such
//! a line on as it is: `HTTP/1.1 abc`, `HTTP/1.1 600`); more body than
//! its `Content-Length` says, or a body after a HEAD's answer, a 204 or
//! a 304 (HAProxy's parsing error).

use crate::http1::{
    parse_response_into, push_decimal, BodyFraming, ChunkedEncoder, Limits, Method, ResponseHead,
    Status,
};

/// Why an answer is refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Bad {
    /// The header lines are invalid, too large, or cut by the end.
    Head,
    /// The status code is not that of a final answer ebb can send.
    Code,
    /// Body bytes past the declared length.
    TooMuch,
}

/// What the start line said before the header lines are read: the
/// parser reads the lines of a response.
const PREFIX: &[u8] = b"HTTP/1.1 200 OK\r\n";

#[derive(Debug)]
enum Body {
    /// `Content-Length`: bytes left.
    Len(u64),
    /// Chunked by the application: passed as it comes.
    Chunked,
    /// To the end, chunked by ebb.
    Recode(ChunkedEncoder),
    /// To the end, as it comes (an HTTP/1.0 request's).
    Raw,
    /// No body (a HEAD's answer, a 204, a 304): bytes are an error.
    Drop,
}

#[derive(Debug)]
enum St {
    /// The header lines, as far as they came (after [`PREFIX`]).
    Head(Vec<u8>),
    Body(Body),
}

/// One request's answer, on its way.
#[derive(Debug)]
pub(crate) struct Answer {
    st: St,
    /// The answer ended (the empty STDOUT record, or END_REQUEST).
    ended: bool,
    /// The end was written (the last chunk).
    closed: bool,
    head_req: bool,
    http11: bool,
    limits: Limits,
}

impl Answer {
    /// The answer to a request: `head_req` for HEAD, `http11` for an
    /// HTTP/1.1 one; `limits` bound the header lines as a server's head.
    pub(crate) fn new(head_req: bool, http11: bool, limits: Limits) -> Answer {
        let mut b = Vec::with_capacity(256);
        b.extend_from_slice(PREFIX);
        Answer {
            st: St::Head(b),
            ended: false,
            closed: false,
            head_req,
            http11,
            limits,
        }
    }

    /// Whether the head went out.
    pub(crate) fn head_sent(&self) -> bool {
        matches!(self.st, St::Body(_))
    }

    /// STDOUT bytes. Before the head goes out (see [`Answer::flush`]) they
    /// are kept; after, the body's are written to `out` at once.
    pub(crate) fn stdout(&mut self, data: &[u8], out: &mut Vec<u8>) -> Result<(), Bad> {
        match &mut self.st {
            St::Head(b) => {
                // Bounded: lines past the limit are refused at the flush,
                // body bytes with them are kept up to a buffer's size.
                let cap = self.limits.max_head_bytes + self.limits.buf_size + PREFIX.len();
                if b.len() + data.len() > cap {
                    return Err(Bad::Head);
                }
                b.extend_from_slice(data);
                Ok(())
            }
            St::Body(body) => body_bytes(body, data, out),
        }
    }

    /// The application ended the answer.
    pub(crate) fn end(&mut self) {
        self.ended = true;
    }

    /// Writes to `out` what can go: the head once its lines are whole
    /// (with the body that came with it, and a length when all of it
    /// came), the end of a body ebb chunks once the answer ended. `date`
    /// is the `Date` value added when the lines have none. Returns
    /// whether the answer is complete (written to its end).
    pub(crate) fn flush(&mut self, date: &[u8], out: &mut Vec<u8>) -> Result<bool, Bad> {
        if let St::Head(b) = &mut self.st {
            let buf = std::mem::take(b);
            let mut head = ResponseHead::default();
            let parsed = parse_response_into(&buf, &self.limits, Method::Get, &mut head);
            match parsed {
                Ok(Status::Complete(())) => {}
                Ok(Status::Partial) if !self.ended => {
                    if buf.len() - PREFIX.len() > self.limits.max_head_bytes {
                        return Err(Bad::Head);
                    }
                    self.st = St::Head(buf);
                    return Ok(false);
                }
                _ => return Err(Bad::Head),
            }
            let rest = &buf[head.head_len..];
            let body = self.write_head(&buf, &head, rest.len() as u64, date, out)?;
            self.st = St::Body(body);
            if let St::Body(body) = &mut self.st {
                body_bytes(body, rest, out)?;
            }
        }
        if !self.ended {
            return Ok(false);
        }
        if !self.closed {
            self.closed = true;
            if let St::Body(Body::Recode(e)) = &mut self.st {
                e.finish(out);
            }
        }
        Ok(true)
    }

    /// The HTTP/1.1 head for `head` (parsed from `buf`, behind
    /// [`PREFIX`]); `have`: the body bytes that came with it. Returns how
    /// the body goes.
    fn write_head(
        &self,
        buf: &[u8],
        head: &ResponseHead,
        have: u64,
        date: &[u8],
        out: &mut Vec<u8>,
    ) -> Result<Body, Bad> {
        let mut code = None;
        let mut reason: &[u8] = b"";
        let mut has_date = false;
        for f in &head.headers {
            let (n, v) = (f.name.get(buf), f.value.get(buf));
            if n.eq_ignore_ascii_case(b"status") {
                let (c, r) = status_value(v);
                (code, reason) = (Some(c), r);
            } else if n.eq_ignore_ascii_case(b"location") {
                (code, reason) = (Some(302), b"Moved Temporarily");
            } else if n.eq_ignore_ascii_case(b"date") {
                has_date = true;
            }
        }
        // HAProxy 2.6.12 writes the status as the line had it (`200x`,
        // `abc`, `99`); ebb writes the code, and refuses one it cannot
        // frame.
        let code = match code {
            None => {
                reason = b"OK";
                200
            }
            Some(c) if (200..=599).contains(&c) => c,
            Some(_) => return Err(Bad::Code),
        };
        out.extend_from_slice(b"HTTP/1.1 ");
        push_decimal(out, u64::from(code));
        out.push(b' ');
        out.extend_from_slice(reason);
        out.extend_from_slice(b"\r\n");
        for f in &head.headers {
            let n = f.name.get(buf);
            if n.eq_ignore_ascii_case(b"status") {
                continue;
            }
            out.extend_from_slice(n);
            out.extend_from_slice(b": ");
            out.extend_from_slice(f.value.get(buf));
            out.extend_from_slice(b"\r\n");
        }
        if !has_date {
            out.extend_from_slice(b"Date: ");
            out.extend_from_slice(date);
            out.extend_from_slice(b"\r\n");
        }
        let body = if self.head_req || code == 204 || code == 304 {
            Body::Drop
        } else {
            match head.framing {
                BodyFraming::ContentLength(n) => Body::Len(n),
                BodyFraming::Chunked => Body::Chunked,
                BodyFraming::None => Body::Len(0),
                BodyFraming::UntilClose if !self.http11 => Body::Raw,
                BodyFraming::UntilClose if self.ended => {
                    out.extend_from_slice(b"Content-Length: ");
                    push_decimal(out, have);
                    out.extend_from_slice(b"\r\n");
                    Body::Len(have)
                }
                BodyFraming::UntilClose => {
                    out.extend_from_slice(b"Transfer-Encoding: chunked\r\n");
                    Body::Recode(ChunkedEncoder::new())
                }
            }
        };
        out.extend_from_slice(b"\r\n");
        Ok(body)
    }
}

/// A body's bytes, as its framing says.
fn body_bytes(body: &mut Body, data: &[u8], out: &mut Vec<u8>) -> Result<(), Bad> {
    match body {
        Body::Len(left) => {
            if data.len() as u64 > *left {
                return Err(Bad::TooMuch);
            }
            *left -= data.len() as u64;
            out.extend_from_slice(data);
        }
        Body::Chunked | Body::Raw => out.extend_from_slice(data),
        Body::Recode(e) => {
            if !data.is_empty() {
                e.write(out, data);
            }
        }
        Body::Drop if !data.is_empty() => return Err(Bad::TooMuch),
        Body::Drop => {}
    }
    Ok(())
}

/// A `Status` line's value as HAProxy reads it (`http_parse_status_val`):
/// blanks, the status (token bytes), blanks, the reason (the rest); the
/// code is the number the status's leading digits make (0 without).
fn status_value(v: &[u8]) -> (u16, &[u8]) {
    let blank = |b: &u8| *b == b' ' || *b == b'\t';
    let v = &v[v.iter().take_while(|b| blank(b)).count()..];
    let n = v.iter().take_while(|&&b| crate::http1::tchar(b)).count();
    let (status, rest) = v.split_at(n);
    let reason = &rest[rest.iter().take_while(|b| blank(b)).count()..];
    let code = super::record::leading_u32(status);
    (u16::try_from(code).unwrap_or(u16::MAX), reason)
}

#[cfg(test)]
mod tests {
    use super::*;

    const DATE: &[u8] = b"Sun, 06 Nov 1994 08:49:37 GMT";

    /// The HTTP/1.1 bytes of an answer given in `pieces`, each followed by
    /// a flush; `end` after the last.
    fn run(pieces: &[&[u8]], end: bool, head_req: bool) -> Result<String, Bad> {
        run_v(pieces, end, head_req, true)
    }

    fn run_v(pieces: &[&[u8]], end: bool, head_req: bool, h11: bool) -> Result<String, Bad> {
        let mut a = Answer::new(head_req, h11, Limits::default());
        let mut out = Vec::new();
        for (i, p) in pieces.iter().enumerate() {
            a.stdout(p, &mut out)?;
            if end && i == pieces.len() - 1 {
                a.end();
            }
            a.flush(DATE, &mut out)?;
        }
        if pieces.is_empty() && end {
            a.end();
            a.flush(DATE, &mut out)?;
        }
        Ok(String::from_utf8(out).unwrap())
    }

    #[test]
    fn a_whole_answer_gets_a_length_and_a_date() {
        assert_eq!(
            run(&[b"Content-Type: text/html\r\n\r\nhello"], true, false).unwrap(),
            "HTTP/1.1 200 OK\r\nContent-Type: text/html\r\nDate: Sun, 06 Nov 1994 08:49:37 GMT\r\nContent-Length: 5\r\n\r\nhello"
        );
        // Bare LFs, as php-cgi may write them.
        assert_eq!(
            run(&[b"X-A: 1\nDate: d\n\n"], true, false).unwrap(),
            "HTTP/1.1 200 OK\r\nX-A: 1\r\nDate: d\r\nContent-Length: 0\r\n\r\n"
        );
    }

    #[test]
    fn an_answer_under_way_goes_chunked() {
        assert_eq!(
            run(&[b"X: y\r\n\r\nab", b"cd", b""], true, false).unwrap(),
            "HTTP/1.1 200 OK\r\nX: y\r\nDate: Sun, 06 Nov 1994 08:49:37 GMT\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nab\r\n2\r\ncd\r\n0\r\n\r\n"
        );
        // HTTP/1.0: to the end, as it comes.
        assert_eq!(
            run_v(&[b"X: y\r\n\r\nab", b"cd"], true, false, false).unwrap(),
            "HTTP/1.1 200 OK\r\nX: y\r\nDate: Sun, 06 Nov 1994 08:49:37 GMT\r\n\r\nabcd"
        );
        // The lines in pieces.
        assert_eq!(
            run(&[b"X:", b" y\r", b"\n", b"\r\n"], true, false).unwrap(),
            "HTTP/1.1 200 OK\r\nX: y\r\nDate: Sun, 06 Nov 1994 08:49:37 GMT\r\nContent-Length: 0\r\n\r\n"
        );
    }

    #[test]
    fn status_and_location_as_haproxy() {
        let first = |s: &[u8]| {
            let out = run(&[s], true, false).unwrap();
            out.lines().next().unwrap().to_string()
        };
        assert_eq!(
            first(b"Status: 404 Not Found\r\n\r\n"),
            "HTTP/1.1 404 Not Found"
        );
        assert_eq!(first(b"Status:  404\r\n\r\n"), "HTTP/1.1 404 ");
        assert_eq!(
            first(b"Location: /x\r\n\r\n"),
            "HTTP/1.1 302 Moved Temporarily"
        );
        // The last one wins.
        assert_eq!(
            first(b"Status: 301 Moved\r\nLocation: /x\r\n\r\n"),
            "HTTP/1.1 302 Moved Temporarily"
        );
        assert_eq!(
            first(b"Location: /x\r\nStatus: 301 Moved\r\n\r\n"),
            "HTTP/1.1 301 Moved"
        );
        assert_eq!(run(&[b"Status: abc\r\n\r\n"], true, false), Err(Bad::Code));
        assert_eq!(
            first(b"Status: abc\r\nLocation: /\r\n\r\n"),
            "HTTP/1.1 302 Moved Temporarily"
        );
        let out = run(
            &[b"Status: 500 E\r\nstatus: 501 F\r\nX: 1\r\n\r\n"],
            true,
            false,
        )
        .unwrap();
        assert!(out.starts_with("HTTP/1.1 501 F\r\nX: 1\r\nDate"), "{out}");
        assert_eq!(run(&[b"Status: 103\r\n\r\n"], true, false), Err(Bad::Code));
        assert_eq!(run(&[b"Status: 600\r\n\r\n"], true, false), Err(Bad::Code));
        assert_eq!(
            run(&[b"Status: 99999\r\n\r\n"], true, false),
            Err(Bad::Code)
        );
    }

    #[test]
    fn declared_framing_passes_and_bodyless_answers_drop() {
        assert_eq!(
            run(&[b"Content-Length: 3\r\n\r\nab", b"c"], true, false).unwrap(),
            "HTTP/1.1 200 OK\r\nContent-Length: 3\r\nDate: Sun, 06 Nov 1994 08:49:37 GMT\r\n\r\nabc"
        );
        assert_eq!(
            run(&[b"Content-Length: 3\r\n\r\nab", b"cd"], true, false),
            Err(Bad::TooMuch)
        );
        assert_eq!(
            run(&[b"Transfer-Encoding: chunked\r\n\r\n1\r\na\r\n", b"0\r\n\r\n"], true, false)
                .unwrap(),
            "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nDate: Sun, 06 Nov 1994 08:49:37 GMT\r\n\r\n1\r\na\r\n0\r\n\r\n"
        );
        assert_eq!(
            run(&[b"Content-Length: 9\r\n\r\n"], true, true).unwrap(),
            "HTTP/1.1 200 OK\r\nContent-Length: 9\r\nDate: Sun, 06 Nov 1994 08:49:37 GMT\r\n\r\n"
        );
        assert_eq!(
            run(&[b"Status: 304\r\n\r\n", b""], true, false).unwrap(),
            "HTTP/1.1 304 \r\nDate: Sun, 06 Nov 1994 08:49:37 GMT\r\n\r\n"
        );
        assert_eq!(
            run(&[b"Content-Length: 9\r\n\r\nbody"], true, true),
            Err(Bad::TooMuch)
        );
    }

    #[test]
    fn bad_lines_and_cut_answers_are_refused() {
        assert_eq!(run(&[b"Bad Name: 1\r\n\r\n"], true, false), Err(Bad::Head));
        assert_eq!(run(&[b"X: 1\r\n"], true, false), Err(Bad::Head));
        assert_eq!(run(&[], true, false), Err(Bad::Head));
        assert_eq!(run(&[b"X: 1\r\n"], false, false).unwrap(), "");
        let big = vec![b'a'; 20_000];
        let mut line = b"X: ".to_vec();
        line.extend_from_slice(&big);
        assert_eq!(run(&[&line], false, false), Err(Bad::Head));
        let mut a = Answer::new(false, true, Limits::default());
        let mut out = Vec::new();
        assert_eq!(a.stdout(&vec![b'a'; 40_000], &mut out), Err(Bad::Head));
    }
}
