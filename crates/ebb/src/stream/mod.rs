//! A stream: one exchange (HAProxy's `process_stream`), whatever mux
//! carried it.
//!
//! The stream receives a request as protocol-neutral messages from its
//! client side ([`msg`]), runs the frontend's and backend's rules, chooses
//! the answer (a fixed answer, a redirect, a deny, a file, a service, or a
//! backend's server), applies the response rules, and logs the exchange.
//! It knows the message interface, not the protocol that carried it.
//!
//! Today the HTTP/1 client connection drives it; an HTTP/2 mux will open
//! one per H2 stream through the same interface.

pub mod msg;
