//! FastCGI toward servers (`server ... proto fcgi` in a backend with
//! `use-fcgi-app`), as HAProxy 2.6's FCGI mux and `fcgi-app` filter.
//!
//! - [`record`]: the FastCGI 1.0 records and name-value pairs, socket-free.
//! - [`params`]: a request's PARAMS (CGI/1.1 variables and fields).
//! - [`cgi`]: an answer's CGI lines and body made into HTTP/1.1.
//! - [`server`]: the connections (`fcgi_srv`), their requests and
//!   answers, each a stream's [`crate::mux::h2::server::Pipe`].
//!
//! The first three take bytes and give bytes: the connection module is
//! the only one with a socket.

pub(crate) mod cgi;
pub(crate) mod params;
pub(crate) mod record;
pub(crate) mod server;
