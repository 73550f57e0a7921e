//! FastCGI toward servers (`server ... proto fcgi` in a backend with
//! `use-fcgi-app`), as HAProxy 2.6's FCGI mux and `fcgi-app` filter.
//!
//! - [`server`]: the connections (`fcgi_srv`), their requests and
//!   answers, each a stream's [`crate::mux::h2::server::Pipe`].
//!
//! The records, the PARAMS and the CGI answer are socket-free and live
//! below the muxes (`crate::fcgi`), which the backend's FastCGI health
//! checks use too; they are re-exported here for the connection module.

pub(crate) use crate::fcgi::{cgi, params, record};
pub(crate) mod server;
