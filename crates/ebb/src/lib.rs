//! ebb: a web server and load balancer on its own task scheduler.
//!
//! The binary lives in `src/bin/ebb.rs`; this library holds its parts, one
//! module per concern (see shared/DESIGN.md, "Layout").
#![deny(unsafe_code)]

pub(crate) mod backend;
pub(crate) mod base64;
pub(crate) mod blocking;
pub(crate) mod calendar;
pub(crate) mod cli;
pub mod clientcert;
pub mod compress;
pub mod config;
pub mod dns;
pub mod drain;
pub mod environ;
pub(crate) mod fcgi;
#[doc(hidden)]
pub mod fuzzing;
pub mod h2;
pub mod handover;
pub mod hash;
pub mod http1;
pub mod httpcache;
#[cfg(test)]
mod input_props;
pub mod l4rules;
pub(crate) mod listener;
pub mod listener_stats;
pub mod loc;
pub(crate) mod log;
pub mod mailers;
pub(crate) mod mux;
pub mod mworker;
pub(crate) mod net;
pub mod peers;
pub mod per_thread;
pub mod program;
pub mod proxy;
pub mod proxyproto;
pub(crate) mod rate;
pub(crate) mod rawword;
pub(crate) mod registry;
pub mod resolvers;
pub(crate) mod rewrite;
pub mod ring;
pub(crate) mod rules;
pub mod sample;
pub(crate) mod serve;
pub mod server;
pub mod statefile;
pub mod stick;
pub mod stream;
pub(crate) mod sys;
pub(crate) mod syslog;
pub mod table;
pub mod tcp;
pub mod tls;
pub(crate) mod tls_policy;
pub mod transport;
pub(crate) mod worker;
