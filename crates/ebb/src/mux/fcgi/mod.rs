//! FastCGI toward servers (`server ... proto fcgi` in a backend with
//! `use-fcgi-app`), as HAProxy 2.6's FCGI mux and `fcgi-app` filter.
//!
//! - [`server`]: the connections (`fcgi_srv`), their requests and
//!   answers, each a stream's [`crate::mux::h2::server::Pipe`].
//!
//! What it speaks, socket-free, is [`crate::fcgi`]'s.

pub(crate) mod server;
