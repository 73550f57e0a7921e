//! HTTP/2 health checks: an HTTP check's connection to a server that
//! speaks HTTP/2 (`proto h2`, `check-proto h2`, or `h2` chosen by ALPN).
//!
//! The check writes its HTTP/1.x request and reads an HTTP/1.1 answer, as
//! it does with any server; [`H2Wire`] sits between: it drives ebb's
//! HTTP/2 core ([`crate::h2::Connection`] in the client role) over the
//! check's blocking socket, turns the request into HEADERS and DATA with
//! [`ClientSink`] (as `server ... proto h2` traffic does) and the answer's
//! frames back into HTTP/1.1 bytes with [`H1Answer`]. The answer ends
//! with the stream (END_STREAM, a reset, a GOAWAY that leaves the stream
//! out, or a closed connection): the check then reads end of file. HTTP/2
//! has no reason phrase: an `L7STS` failure reports none, as HAProxy's.

use std::io::{self, Read, Write};
use std::time::Instant;

use super::check::{read_translated, Translated, Wire};
use crate::h2::msg::{response_msgs, ClientSink, H1Answer};
use crate::h2::{Config, Connection, Event};
use crate::http1::{parse_request, Limits, Status};
use crate::stream::msg::{BodySize, Msg, MsgSink, ReqHead};

/// A check's HTTP/2 connection, read and written as HTTP/1.x.
pub(super) struct H2Wire {
    inner: Box<dyn Wire>,
    h2: Connection,
    /// `:scheme`: `https` over TLS, else `http`.
    scheme: &'static [u8],
    /// Request bytes written, until the request is complete.
    req: Vec<u8>,
    /// The request's body still to send.
    body: Vec<u8>,
    /// The check's stream, once its head went out.
    id: Option<u32>,
    answer: H1Answer,
    /// Answer bytes as HTTP/1.1, read from `pos` on.
    resp: Vec<u8>,
    pos: usize,
    /// No more answer bytes will come.
    end: bool,
    rbuf: Vec<u8>,
    epoch: Instant,
}

impl H2Wire {
    pub(super) fn new(inner: Box<dyn Wire>, tls: bool) -> H2Wire {
        H2Wire {
            inner,
            h2: Connection::client(Config::default()),
            scheme: if tls { b"https" } else { b"http" },
            req: Vec::new(),
            body: Vec::new(),
            id: None,
            answer: H1Answer {
                chunked: false,
                no_reason: true,
            },
            resp: Vec::new(),
            pos: 0,
            end: false,
            rbuf: Vec::new(),
            epoch: Instant::now(),
        }
    }

    /// The core's clock (ms, never 0).
    fn now(&self) -> u32 {
        (self.epoch.elapsed().as_millis() as u32) | 1
    }

    /// Writes what the core queued.
    fn write_out(&mut self) -> io::Result<()> {
        while !self.h2.output().is_empty() {
            let n = self.inner.write(self.h2.output())?;
            if n == 0 {
                return Err(io::ErrorKind::WriteZero.into());
            }
            self.h2.consume_output(n);
        }
        self.inner.flush()
    }

    /// Sends the request once its head is complete, then its body as
    /// the server's window allows.
    fn send(&mut self) -> io::Result<()> {
        let now = self.now();
        if self.id.is_none() {
            let head = match parse_request(&self.req, &Limits::default()) {
                Ok(Status::Complete(h)) => h,
                Ok(Status::Partial) => return Ok(()),
                Err(_) => return Err(io::Error::other("invalid check request")),
            };
            let view = ReqHead::from_h1(&self.req, &head);
            let body = view.body;
            let mut sink = ClientSink::new(&mut self.h2, self.scheme, now);
            sink.put(Msg::Head(view));
            let Some(id) = sink.id else {
                return Err(io::Error::other("the server refused the stream"));
            };
            self.id = Some(id);
            let rest = &self.req[head.head_len.min(self.req.len())..];
            match body {
                BodySize::Empty => {
                    let _ = self.h2.send_data(id, &[], true, now);
                }
                BodySize::Exact(n) => {
                    let n = (n as usize).min(rest.len());
                    self.body = rest[..n].to_vec();
                }
                BodySize::Unknown => return Err(io::Error::other("chunked check request")),
            }
            self.req.clear();
            if self.body.is_empty() && !matches!(body, BodySize::Empty) {
                let _ = self.h2.send_data(id, &[], true, now);
            }
        }
        if let (Some(id), false) = (self.id, self.body.is_empty()) {
            let sent = self.h2.send_data(id, &self.body, true, now).unwrap_or(0);
            self.body.drain(..sent);
        }
        self.write_out()
    }

    /// Feeds the core what was read; the check's answer goes to `resp`.
    fn process(&mut self) {
        let now = self.now();
        let mut off = 0;
        let mine = self.id;
        let mut taken = 0;
        loop {
            let p = self.h2.recv(&self.rbuf[off..], now);
            off += p.consumed;
            let Some(ev) = p.event else {
                if p.consumed == 0 {
                    break;
                }
                continue;
            };
            let (answer, out, end) = (&mut self.answer, &mut self.resp, &mut self.end);
            let stream_ev = response_msgs(&ev, |id, m| {
                if Some(id) != mine || *end {
                    if let Msg::Data(d) = m {
                        taken += d.len();
                    }
                    return;
                }
                match m {
                    Msg::Head(h) => answer.head(out, &h),
                    Msg::Data(d) => {
                        answer.data(out, d);
                        taken += d.len();
                    }
                    Msg::Trailers(t) => answer.trailers(out, &t),
                    Msg::End => {
                        answer.end(out);
                        *end = true;
                    }
                    Msg::Abort(_) => *end = true,
                }
            });
            match ev {
                _ if stream_ev => {}
                Event::GoAway { last_stream, .. } if mine.is_none_or(|id| id > last_stream) => {
                    self.end = true;
                }
                Event::Closed { .. } => self.end = true,
                _ => {}
            }
            if let Some(id) = mine.filter(|_| taken > 0) {
                self.h2.release(id, std::mem::take(&mut taken));
            }
            if self.end {
                off = self.rbuf.len();
                break;
            }
        }
        self.rbuf.drain(..off);
    }
}

impl Write for H2Wire {
    fn write(&mut self, b: &[u8]) -> io::Result<usize> {
        self.req.extend_from_slice(b);
        Ok(b.len())
    }

    fn flush(&mut self) -> io::Result<()> {
        self.send()
    }
}

impl Translated for H2Wire {
    fn answer(&mut self) -> (&[u8], &mut usize, bool) {
        (&self.resp, &mut self.pos, self.end)
    }

    fn send(&mut self) -> io::Result<()> {
        H2Wire::send(self)
    }

    fn inner(&mut self) -> &mut dyn Wire {
        &mut *self.inner
    }

    fn took(&mut self, bytes: &[u8]) {
        self.rbuf.extend_from_slice(bytes);
        self.process();
    }

    fn closed(&mut self) {
        self.end = true;
    }
}

impl Read for H2Wire {
    fn read(&mut self, out: &mut [u8]) -> io::Result<usize> {
        read_translated(self, out)
    }
}

impl Wire for H2Wire {
    fn h2(&self) -> bool {
        true
    }
}
