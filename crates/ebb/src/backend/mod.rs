//! Backends with servers: who they are, how a stream gets one, and how
//! their state changes while ebb runs.
//!
//! The module is split by concern; every public item is re-exported here,
//! so callers name `backend::Farm`, `backend::ServerRt` and so on whatever
//! file holds them:
//!
//! - [`server`]: one server at run time ([`ServerRt`]): its address, its
//!   slots and weight, whether the balancer may use it; the process-wide
//!   registry by uid.
//! - [`counters`]: a server's (and a backend's) statistics counters.
//! - [`farm`]: a backend's set of servers ([`Farm`]) and the pick of one
//!   for a stream (the per-thread balancing slots; the algorithms are in
//!   [`lb`]).
//! - [`queue`]: slots, queues and the hand-over of a freed slot to the
//!   first waiting stream.
//! - [`state`]: administrative and health state changes (the CLI's `set
//!   server`, `enable|disable health`, `track` chains, `on-marked-*`) and
//!   the status the stats name.
//! - [`connect`]: non-blocking connects to a server and their outcome.
//!
//! Health checks ([`check`], [`agent`], [`tcpcheck`]), the idle
//! connection pool ([`pool`]), persistence cookies ([`cookie`]) and
//! servers added at run time ([`dynamic`]) have their own modules.

pub mod agent;
pub mod check;
pub mod connect;
pub mod cookie;
pub mod counters;
pub mod dynamic;
pub mod error;
pub mod extra;
pub mod farm;
pub(crate) mod fcgicheck;
pub mod h2check;
pub mod lb;
pub mod pool;
pub mod queue;
pub mod server;
pub mod socks4;
pub mod state;
pub mod tcpcheck;

pub use connect::*;
pub use counters::*;
pub use farm::*;
pub use queue::*;
pub use server::*;
pub use state::*;

pub use dynamic::ServerList;

#[cfg(test)]
mod tests;
