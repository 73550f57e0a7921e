//! ebb: a web server and load balancer on its own task scheduler.
//!
//! The binary lives in `src/bin/ebb.rs`; this library holds its parts, one
//! module per concern (see shared/DESIGN.md, "Layout").
#![deny(unsafe_code)]

pub mod backend;
pub mod blocking;
pub mod cli;
pub mod compress;
pub mod config;
pub mod dns;
pub mod drain;
pub mod h2;
pub mod handover;
pub mod http1;
#[cfg(test)]
mod input_props;
pub mod l4rules;
pub mod listener;
pub mod log;
pub mod mux;
pub mod mworker;
pub mod net;
pub mod proxy;
pub mod proxyproto;
pub mod registry;
pub mod rules;
pub mod sample;
pub mod serve;
pub mod server;
pub mod statefile;
pub mod stream;
pub mod sys;
pub mod table;
pub mod tcp;
pub mod tls;
pub mod tls_policy;
pub mod transport;
pub mod worker;
