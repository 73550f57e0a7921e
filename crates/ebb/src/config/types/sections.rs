//! The small sections beside `global` and the proxies: `program`,
//! `cache`, `resolvers` (with their `nameserver` lines) and the servers'
//! `init-addr` methods they serve.

use std::net::SocketAddr;
use std::time::Duration;

use crate::loc::Loc;

/// A `program NAME` section (HAProxy 2.6 configuration.txt section 3.7):
/// a command the master starts beside its workers.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Program {
    pub name: String,
    /// `command`: the program and its arguments (looked up in `PATH`).
    pub command: Vec<String>,
    /// `user` / `group`, resolved when the configuration is read.
    pub uid: Option<u32>,
    pub gid: Option<u32>,
    /// `[no] option start-on-reload` (on): a reload starts a new instance
    /// (the running one is told to stop); off, the running one is kept.
    pub start_on_reload: bool,
    pub loc: Loc,
}

/// A `nameserver` line of a `resolvers` section.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Nameserver {
    pub name: String,
    pub addr: SocketAddr,
    /// `tcp@`: DNS over TCP (RFC 7766), else over UDP.
    pub tcp: bool,
}

/// A `cache NAME` section (HAProxy's section 6.2; run by
/// the `httpcache` module).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CacheSection {
    pub name: String,
    /// `total-max-size` in megabytes (required, 1 to 4095).
    pub total_max_size_mb: u32,
    /// `max-age` in seconds (60).
    pub max_age: u32,
    /// `max-object-size` in bytes (0: a 256th of the total).
    pub max_object_size: u32,
    /// `process-vary on|off` (off).
    pub process_vary: bool,
    /// `max-secondary-entries` (10).
    pub max_secondary_entries: u32,
    pub loc: Loc,
}

/// A `resolvers NAME` section: where and how server names are resolved
/// while ebb runs (HAProxy's section 5.3.2).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Resolvers {
    pub name: String,
    /// `nameserver NAME [udp@|tcp@]ADDR:PORT`, and those
    /// `parse-resolv-conf` read, in order.
    pub nameservers: Vec<Nameserver>,
    /// `resolve_retries`: queries sent for one resolution before giving up
    /// (3).
    pub resolve_retries: u32,
    /// `timeout resolve`: time between two resolutions of a name whose
    /// last answer was not valid (1 s).
    pub timeout_resolve: Duration,
    /// `timeout retry`: time to wait for an answer before asking again (1 s).
    pub timeout_retry: Duration,
    /// `hold STATUS PERIOD`.
    pub holds: crate::dns::Holds,
    /// `accepted_payload_size` (512, at most 65535).
    pub accepted_payload_size: u16,
    pub loc: Loc,
}

impl Resolvers {
    pub fn new(name: &str, loc: Loc) -> Resolvers {
        Resolvers {
            name: name.to_string(),
            nameservers: Vec::new(),
            resolve_retries: 3,
            timeout_resolve: Duration::from_secs(1),
            timeout_retry: Duration::from_secs(1),
            holds: crate::dns::Holds::default(),
            accepted_payload_size: 512,
            loc,
        }
    }
}

/// One method of `init-addr`: where a server's address comes from at start.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum InitAddr {
    /// The address saved in the server-state file.
    Last,
    /// The system resolver, once, at start.
    Libc,
    /// No address: the server starts in maintenance until resolved.
    None,
    /// This address.
    Ip(std::net::IpAddr),
}
