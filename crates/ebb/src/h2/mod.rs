//! HTTP/2 (RFC 9113) and HPACK (RFC 7541): the socket-free protocol core the
//! HTTP/2 mux drives. Bytes in, events out; time is a parameter.
//!
//! - [`frame`]: frame headers, every frame type parsed and written, each
//!   frame-level error mapped to the RFC's connection or stream error.
//! - [`hpack`]: the header compression, decoder and encoder, with dynamic
//!   table and Huffman code, bounded against decompression bombs.
//! - [`conn`]: a connection, server or client side: preface, SETTINGS, PING,
//!   GOAWAY, RST_STREAM, flow control both ways, CONTINUATION, trailers,
//!   stream states, and the bounds against the known HTTP/2 attacks (the
//!   table in its doc).
//! - [`msg`]: H2 events to the stream layer's messages and back (the
//!   sinks a `mux/h2` gives its streams).
//! - [`request`]: RFC 9113 §8 checks of request heads and the translation
//!   to an HTTP/1.1 head; checks of response heads for the client role.
//!
//! `mux/h2` drives this core on client connections (ALPN `h2`,
//! `bind ... proto h2`); the client role is not wired to servers yet.

pub mod conn;
pub mod frame;
pub mod hpack;
pub mod msg;
pub mod request;

#[cfg(test)]
mod client_tests;
#[cfg(test)]
mod msg_tests;
#[cfg(test)]
mod tests;

pub use conn::{Config, Connection, Event, HeadEncoder, Progress, Role, SendError};
pub use frame::{ErrorCode, H2Error};
pub use request::{Malformed, RequestHead, ResponseHead, Written};

/// The limits the HTTP/1 form of an HTTP/2 request head is read with
/// (by the mux and by the lane that serves its stream): `limits` without
/// its field count. HAProxy 2.6 counts `tune.http.maxhdr` only in its
/// HTTP/1 parser; an HTTP/2 head is bounded by its HPACK list instead
/// (2 x `tune.http.maxhdr` - 1 fields, [`Config::max_fields`]), which
/// the connection enforces. Marked as a lane's (`h2_lane`).
pub fn lane_limits(limits: &crate::http1::Limits) -> crate::http1::Limits {
    crate::http1::Limits {
        max_headers: crate::http1::MAX_HEADERS_CAP,
        h2_lane: true,
        ..*limits
    }
}
