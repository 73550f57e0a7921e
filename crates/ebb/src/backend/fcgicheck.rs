//! FastCGI health checks: an HTTP check (`option httpchk`) on a `proto
//! fcgi` server goes through FastCGI, as HAProxy 2.6's check takes the
//! server's multiplexer for its default connection.
//!
//! The check writes its HTTP/1.x request and reads an HTTP/1.1 answer, as
//! with any server; [`FcgiWire`] sits between, over the check's blocking
//! socket: the request becomes BEGIN_REQUEST, PARAMS and STDIN
//! ([`crate::fcgi::params`], with the check connection's own
//! addresses for REMOTE_ADDR and SERVER_PORT, and no `set-param` or
//! hidden field: HAProxy runs no filter on a check), the application's
//! STDOUT becomes the answer ([`crate::fcgi::cgi`]), which ends with
//! the request's END_REQUEST (or the connection). A record that is not
//! FastCGI, or an answer that is not CGI, ends the answer where it is:
//! the check then finds no valid answer (`L7RSP`).

use std::io::{self, Read, Write};
use std::sync::Arc;

use super::check::{read_translated, Translated, Wire};
use crate::fcgi::cgi::Answer;
use crate::fcgi::params::{self, App, Meta};
use crate::fcgi::record::{self, Demux, Event};
use crate::http1::{parse_request, Limits, Status};
use crate::stream::msg::{BodySize, ReqHead, Version};

/// The request id of a check (the first of a connection).
const ID: u16 = 1;

/// A check's FastCGI connection, read and written as HTTP/1.x.
pub(super) struct FcgiWire {
    inner: Box<dyn Wire>,
    app: Arc<App>,
    meta: Meta,
    /// Request bytes written, until the request went.
    req: Vec<u8>,
    sent: bool,
    demux: Demux,
    answer: Option<Answer>,
    /// Answer bytes as HTTP/1.1, read from `pos` on.
    resp: Vec<u8>,
    pos: usize,
    /// No more answer bytes will come.
    end: bool,
    rbuf: Vec<u8>,
}

impl FcgiWire {
    /// Over `inner`, the check's connection to a server of `app`;
    /// `local` and `peer` its addresses (REMOTE_ADDR, SERVER_NAME and
    /// SERVER_PORT, as HAProxy takes a check's connection's).
    pub(super) fn new(
        inner: Box<dyn Wire>,
        app: Arc<App>,
        local: Option<std::net::SocketAddr>,
        peer: Option<std::net::SocketAddr>,
    ) -> FcgiWire {
        FcgiWire {
            inner,
            app,
            meta: Meta {
                src: local,
                dst: peer,
                ..Meta::default()
            },
            req: Vec::new(),
            sent: false,
            demux: Demux::default(),
            answer: None,
            resp: Vec::new(),
            pos: 0,
            end: false,
            rbuf: Vec::new(),
        }
    }

    /// Sends the request once its head (and body) are whole.
    fn send(&mut self) -> io::Result<()> {
        if self.sent {
            return Ok(());
        }
        let limits = Limits::default();
        let head = match parse_request(&self.req, &limits) {
            Ok(Status::Complete(h)) => h,
            Ok(Status::Partial) => return Ok(()),
            Err(_) => return Err(io::Error::other("invalid check request")),
        };
        let view = ReqHead::from_h1(&self.req, &head);
        let rest = &self.req[head.head_len.min(self.req.len())..];
        let body = match view.body {
            BodySize::Empty => &rest[..0],
            BodySize::Exact(n) if rest.len() as u64 >= n => &rest[..n as usize],
            BodySize::Exact(_) => return Ok(()),
            BodySize::Unknown => return Err(io::Error::other("chunked check request")),
        };
        let http11 = view.version != Version::Http10;
        let head_req = view.method == crate::http1::Method::Head;
        let ph = params::Head {
            method: head.method_span.get(&self.req),
            uri: head.target.get(&self.req),
            version: if http11 { b"HTTP/1.1" } else { b"HTTP/1.0" },
            fields: head
                .headers
                .iter()
                .map(|f| (f.name.get(&self.req), f.value.get(&self.req)))
                .collect(),
        };
        let pairs = params::build(&self.app, &self.meta, &ph, 0)
            .map_err(|_| io::Error::other("the check request has no FastCGI parameters"))?;
        let mut out = Vec::new();
        record::put_begin_request(&mut out, ID, self.app.keep_conn);
        record::put_params(&mut out, ID, pairs.iter().map(|(n, v)| (&n[..], &v[..])))
            .map_err(|_| io::Error::other("a check parameter too large"))?;
        record::put_stream(&mut out, record::STDIN, ID, body);
        record::put_empty(&mut out, record::STDIN, ID);
        self.answer = Some(Answer::new(head_req, http11, limits));
        self.sent = true;
        self.req.clear();
        self.inner.write_all(&out)?;
        self.inner.flush()
    }

    /// Feeds the demux what was read; the answer goes to `resp`.
    fn process(&mut self) {
        let mut off = 0;
        let Some(a) = self.answer.as_mut() else {
            self.rbuf.clear();
            return;
        };
        let mut broken = false;
        while off < self.rbuf.len() && !self.end {
            let (n, ev) = self.demux.feed(&self.rbuf[off..]);
            off += n;
            match ev {
                Some(Event::Stdout(ID, d)) => broken |= a.stdout(d, &mut self.resp).is_err(),
                Some(Event::StdoutEnd(ID)) => a.end(),
                Some(Event::End { id: ID, .. }) => {
                    a.end();
                    self.end = true;
                }
                Some(Event::Broken) | Some(Event::BadEnd(ID)) | Some(Event::Values(None)) => {
                    broken = true
                }
                Some(_) => {}
                None if n == 0 => break,
                None => {}
            }
            if broken {
                self.end = true;
            }
        }
        self.rbuf.drain(..off);
        let date = crate::http1::DateCache::new().get().to_owned();
        if !broken && a.flush(&date, &mut self.resp).is_err() {
            self.end = true;
        }
    }
}

impl Write for FcgiWire {
    fn write(&mut self, b: &[u8]) -> io::Result<usize> {
        self.req.extend_from_slice(b);
        Ok(b.len())
    }

    fn flush(&mut self) -> io::Result<()> {
        self.send()
    }
}

impl Translated for FcgiWire {
    fn answer(&mut self) -> (&[u8], &mut usize, bool) {
        (&self.resp, &mut self.pos, self.end)
    }

    fn send(&mut self) -> io::Result<()> {
        FcgiWire::send(self)
    }

    fn inner(&mut self) -> &mut dyn Wire {
        &mut *self.inner
    }

    fn took(&mut self, bytes: &[u8]) {
        self.rbuf.extend_from_slice(bytes);
        self.process();
    }

    /// The application's close ends the answer.
    fn closed(&mut self) {
        if let Some(a) = self.answer.as_mut() {
            a.end();
            let date = crate::http1::DateCache::new().get().to_owned();
            let _ = a.flush(&date, &mut self.resp);
        }
        self.end = true;
    }
}

impl Read for FcgiWire {
    fn read(&mut self, out: &mut [u8]) -> io::Result<usize> {
        read_translated(self, out)
    }
}

impl Wire for FcgiWire {
    fn io_timeout(&self, d: std::time::Duration) {
        self.inner.io_timeout(d);
    }
}
