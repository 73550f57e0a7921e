//! FastCGI's bytes, socket-free (HAProxy 2.6's FCGI mux and `fcgi-app`
//! filter): what the connections toward servers (the muxes' fcgi
//! part) and the health checks over FastCGI (the backend's) both speak.
//!
//! - [`record`]: the FastCGI 1.0 records and name-value pairs.
//! - [`params`]: a request's PARAMS (CGI/1.1 variables and fields).
//! - [`cgi`]: an answer's CGI lines and body made into HTTP/1.1.
//!
//! Each takes bytes and gives bytes; neither imports the muxes nor the
//! backend, which both use them.

pub(crate) mod cgi;
pub(crate) mod params;
pub(crate) mod record;
