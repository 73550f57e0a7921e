//! HTTP/1.1 on both sides of a stream.
//!
//! - [`client`]: a client connection (`h1_conn`): reading, parsing,
//!   pipelining, keep-alive, writing; it holds its current stream.
//! - [`out`]: an answer's messages ([`crate::stream::msg`]) as HTTP/1
//!   bytes: the one output path of the client side.
//! - [`server`]: the server side of a proxied exchange (`h1_srv`): the
//!   server socket's own tasklet, connect completion, request bytes out,
//!   response bytes in, and the request head written for a server.
//!
//! The parsers and writers themselves are socket-free, in [`crate::http1`].

pub mod client;
pub(crate) mod out;
pub mod server;

pub(crate) use client::Built;
pub use client::{Conn, Exchange, FileBody, SliceBody};
