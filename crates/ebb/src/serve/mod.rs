//! What answers a request when no server is involved: static files (and,
//! with the stream code, fixed responses and redirects).

pub mod cache;
pub mod files;

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
    let body = format!("{pre}{}{post}", crate::http1::reason_phrase(status));
    Answer {
        status,
        headers: vec![
            ("Content-Type", "text/html".into()),
            ("Cache-Control", "no-cache".into()),
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
