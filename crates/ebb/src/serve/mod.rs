//! What answers a request when no server is involved: static files (and,
//! with the stream code, fixed responses and redirects).

pub mod cache;
pub mod files;
