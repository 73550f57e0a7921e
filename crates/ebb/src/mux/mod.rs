//! Muxes: protocols over a connection. A mux turns one protocol's bytes
//! into the messages of `stream::msg` and back, on either side of
//! a stream: the client side (requests in, responses out) and the server
//! side (requests out, responses in).
//!
//! - [`h1`]: HTTP/1.1, both sides (client connections, server connections).
//! - [`h2`]: HTTP/2, the client side, over the socket-free core in
//!   [`crate::h2`]; each stream runs on a lane of the HTTP/1 client side.
//!
//! A mux owns its sockets' readiness: each socket is registered with the
//! tasklet of the side that owns it, so a server-side event never runs
//! client-side code and vice versa.

pub mod h1;
pub mod h2;
