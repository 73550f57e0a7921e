//! What answers a request when no server is involved: static files (and,
//! with the stream code, fixed responses and redirects).

pub mod cache;
pub mod comp;
pub mod files;

/// A complete answer a service gives the stream (the stats page, the
/// metrics): status, headers and body, written by the connection.
pub struct Answer {
    pub status: u16,
    pub headers: Vec<(&'static str, String)>,
    pub body: Vec<u8>,
}

/// A plain-text answer.
pub fn plain(status: u16, msg: &str) -> Answer {
    Answer {
        status,
        headers: vec![("Content-Type", "text/plain; charset=utf-8".into())],
        body: msg.as_bytes().to_vec(),
    }
}
