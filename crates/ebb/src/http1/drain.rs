//! Request bodies nobody reads: what is left of a body after an early
//! answer (`http-request return`, a redirect, a deny, a file, an error)
//! and how much of it ebb reads before it gives up on the connection.
//!
//! Reading such a body to its end keeps the connection usable for the next
//! request, but a client declaring `Content-Length: 1000000000000` would
//! then make ebb read (and throw away) a terabyte. So the drain is bounded
//! by `tune.http.drain-max` ([`Limits::max_drain`](super::Limits)):
//!
//! - a `Content-Length` within the bound is read to its end and the
//!   connection stays open;
//! - a larger `Content-Length` is not read at all: the answer says
//!   `Connection: close` and the connection ends once it is written (what
//!   HAProxy 2.6 does, measured: it answers `connection: close` and stops
//!   reading at once);
//! - a chunked body (its size unknown) is read up to the bound; past it,
//!   or on broken framing, the connection ends.

use super::chunked::ChunkedDecoder;
use super::head::BodyFraming;

/// What is left of an unread body.
#[derive(Debug)]
pub struct Drain {
    kind: Kind,
    /// Bytes that may still be read and dropped.
    budget: u64,
}

#[derive(Debug)]
enum Kind {
    Len(u64),
    Chunked(Box<ChunkedDecoder>),
}

/// What [`Drain::feed`] found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DrainStep {
    /// The body goes on; read more.
    More,
    /// The body ended within the bound: the next request follows.
    Done,
    /// The bound is reached or the framing is broken: end the connection.
    Stop,
}

impl Drain {
    /// The drain for a body of `framing` after an early answer, and
    /// whether the connection can stay open after it (`false`: answer with
    /// `Connection: close` and read nothing more). `None`: no body.
    pub fn plan(framing: BodyFraming, max: u64) -> (Option<Drain>, bool) {
        match framing {
            BodyFraming::None | BodyFraming::UntilClose | BodyFraming::ContentLength(0) => {
                (None, true)
            }
            BodyFraming::ContentLength(n) if n > max => (None, false),
            BodyFraming::ContentLength(n) => (
                Some(Drain {
                    kind: Kind::Len(n),
                    budget: max,
                }),
                true,
            ),
            BodyFraming::Chunked => (
                Some(Drain {
                    kind: Kind::Chunked(Box::default()),
                    budget: max,
                }),
                true,
            ),
        }
    }

    /// Drops what of the body `input` holds: returns the bytes consumed
    /// and what comes next. Never consumes more than the budget left.
    pub fn feed(&mut self, input: &[u8]) -> (usize, DrainStep) {
        let room = self.budget.min(input.len() as u64) as usize;
        let input = &input[..room];
        let (n, done) = match &mut self.kind {
            Kind::Len(left) => {
                let n = (*left).min(input.len() as u64);
                *left -= n;
                (n as usize, *left == 0)
            }
            Kind::Chunked(dec) => {
                let mut pos = 0;
                loop {
                    match dec.decode(&input[pos..]) {
                        Ok(d) => {
                            pos += d.consumed;
                            if d.done {
                                break (pos, true);
                            }
                            if d.consumed == 0 {
                                break (pos, false);
                            }
                        }
                        Err(_) => return (input.len(), DrainStep::Stop),
                    }
                }
            }
        };
        self.budget -= n as u64;
        let step = if done {
            DrainStep::Done
        } else if self.budget == 0 {
            DrainStep::Stop
        } else {
            DrainStep::More
        };
        (n, step)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lengths_within_the_bound_are_read_to_their_end() {
        let (d, keep) = Drain::plan(BodyFraming::ContentLength(10), 10);
        assert!(keep);
        let mut d = d.unwrap();
        assert_eq!(d.feed(b"0123"), (4, DrainStep::More));
        // Bytes past the body (the next request) are left alone.
        assert_eq!(d.feed(b"456789GET / "), (6, DrainStep::Done));
    }

    #[test]
    fn larger_lengths_are_not_read() {
        let (d, keep) = Drain::plan(BodyFraming::ContentLength(1_000_000_000_000), 16384);
        assert!(d.is_none());
        assert!(!keep);
        let (d, keep) = Drain::plan(BodyFraming::None, 0);
        assert!(d.is_none() && keep);
    }

    #[test]
    fn chunked_bodies_stop_at_the_bound() {
        let (d, keep) = Drain::plan(BodyFraming::Chunked, 1024);
        assert!(keep);
        let mut d = d.unwrap();
        assert_eq!(d.feed(b"3\r\nabc\r\n0\r\n\r\nGET"), (13, DrainStep::Done));

        let mut d = Drain::plan(BodyFraming::Chunked, 100).0.unwrap();
        let mut chunk = b"100\r\n".to_vec();
        chunk.extend_from_slice(&[b'x'; 256]);
        let (n, step) = d.feed(&chunk);
        assert_eq!((n, step), (100, DrainStep::Stop));
        // Fed a byte at a time, the same bound.
        let mut d = Drain::plan(BodyFraming::Chunked, 100).0.unwrap();
        let mut total = 0;
        for b in &chunk {
            let (n, step) = d.feed(std::slice::from_ref(b));
            total += n;
            if step == DrainStep::Stop {
                break;
            }
            assert_eq!(step, DrainStep::More);
        }
        assert_eq!(total, 100);
    }

    #[test]
    fn broken_chunked_framing_ends_the_connection() {
        let mut d = Drain::plan(BodyFraming::Chunked, 1024).0.unwrap();
        assert_eq!(d.feed(b"zz\r\n").1, DrainStep::Stop);
    }
}
