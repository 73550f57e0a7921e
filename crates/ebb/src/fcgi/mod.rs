//! FastCGI 1.0, socket-free (as [`crate::http1`] and [`crate::h2`] are
//! for HTTP): bytes in, bytes out, fuzzed. The connections that speak it
//! to servers are `mux::fcgi`'s, the health checks that do
//! `backend::fcgicheck`'s (this module imports neither).
//!
//! - [`record`]: the records and name-value pairs; [`record::Demux`],
//!   the reader of an application's records.
//! - [`params`]: a request's PARAMS (the CGI/1.1 variables and its
//!   fields), as HAProxy 2.6 writes them.
//! - [`cgi`]: an application's answer (CGI lines, body) made into the
//!   HTTP/1.1 answer a stream reads.

pub(crate) mod cgi;
pub(crate) mod params;
pub(crate) mod record;
