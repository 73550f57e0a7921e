//! FastCGI toward servers (`server ... proto fcgi` in a backend with
//! `use-fcgi-app`), as HAProxy 2.6's FCGI mux.
//!
//! - [`record`]: the FastCGI 1.0 records and name-value pairs, socket-free.

// The records are written before the connection that uses them.
#[allow(dead_code)]
pub(crate) mod record;
