//! ebb: a web server and load balancer on its own task scheduler.
//!
//! The binary lives in `src/bin/ebb.rs`; this library holds its parts, one
//! module per concern (see shared/DESIGN.md, "Layout").
#![deny(unsafe_code)]

pub mod backend;
pub mod blocking;
pub mod cli;
pub mod config;
pub mod conn;
pub mod http1;
pub mod listener;
pub mod log;
pub mod metrics;
pub mod proxy;
pub mod registry;
pub mod rules;
pub mod sample;
pub mod serve;
pub mod server;
pub mod statefile;
pub mod stats;
pub mod sys;
pub mod tls;
pub mod transport;
pub mod worker;
