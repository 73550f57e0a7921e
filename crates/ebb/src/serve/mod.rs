//! Services: what answers a request when no server is involved. A stream
//! reaches them here and nowhere else; the muxes and connections import
//! none of them.
//!
//! - static files: [`files`] (paths, conditions, ranges) over the
//!   thread's open-file cache and the blocking pool ([`cache`]);
//! - whole answers built off the I/O path: the stats page ([`stats`]) and
//!   the Prometheus exporter ([`metrics`]), behind [`Service`];
//! - fixed answers and redirects are prepared with the configuration
//!   (`http-request return|redirect`, in the runtime) and written by the
//!   stream.

pub mod cache;
pub mod comp;
pub mod files;
pub(crate) mod info;
pub mod metrics;
pub mod stats;

pub use stats::is_page as is_stats_page;

/// A service that builds a whole answer for a stream. The stream runs it
/// in a task at the best nice (it may walk every proxy and server) and
/// sends the [`Answer`] when it is ready.
pub enum Service {
    /// The stats page (`stats uri`): the request's path and
    /// `Authorization` value, and whether `stats admin` allows actions.
    Stats {
        rt: std::sync::Arc<crate::proxy::StatsRt>,
        path: Vec<u8>,
        authz: Option<Vec<u8>>,
        admin: bool,
        /// A POST's body (the admin form).
        post: Option<Vec<u8>>,
    },
    /// `http-request use-service prometheus-exporter`: the request's
    /// target (its query string selects the metrics).
    Prometheus { uri: Vec<u8> },
}

impl Service {
    /// Builds the answer.
    pub fn answer(self) -> Answer {
        match self {
            Service::Stats {
                rt,
                path,
                authz,
                admin,
                post,
            } => stats::page(&rt, &path, authz.as_deref(), admin, post.as_deref()),
            Service::Prometheus { uri } => metrics::answer(&uri),
        }
    }
}

/// A complete answer a service gives the stream (the stats page, the
/// metrics): status, headers and body, written by the connection.
pub struct Answer {
    pub status: u16,
    pub headers: Vec<(&'static str, String)>,
    pub body: Vec<u8>,
}

/// ebb's error page for `status` as an answer (a `tarpit` gives it when
/// its delay ends).
pub fn error(status: u16) -> Answer {
    let (pre, post) = crate::http1::error_page(status);
    let body = format!("{pre}{}{post}", crate::http1::error_reason(status));
    Answer {
        status,
        // HAProxy 2.6's order (the stream puts the length first).
        headers: vec![
            ("Cache-Control", "no-cache".into()),
            ("Content-Type", "text/html".into()),
        ],
        body: body.into_bytes(),
    }
}

/// A plain-text answer.
pub fn plain(status: u16, msg: &str) -> Answer {
    Answer {
        status,
        headers: vec![("Content-Type", "text/plain; charset=utf-8".into())],
        body: msg.as_bytes().to_vec(),
    }
}
