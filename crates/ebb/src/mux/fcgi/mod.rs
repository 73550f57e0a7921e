//! FastCGI toward servers (`server ... proto fcgi` in a backend with
//! `use-fcgi-app`), as HAProxy 2.6's FCGI mux.
//!
//! - [`record`]: the FastCGI 1.0 records and name-value pairs, socket-free.
//! - [`cgi`]: an answer's CGI lines and body made into HTTP/1.1.
//! - [`params`]: a request's PARAMS (CGI/1.1 variables and fields).

// The records are written before the connection that uses them.
#[allow(dead_code)]
pub(crate) mod cgi;
#[allow(dead_code)]
pub(crate) mod params;
#[allow(dead_code)]
pub(crate) mod record;
