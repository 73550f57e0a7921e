//! The typed configuration the server reads. Every value that the server may
//! have to report about later (a bind that fails, a certificate that does not
//! load, a backend name) keeps the [`Loc`] of the line it came from.
//!
//! The parts, by section: `global`, `sections` (program, cache,
//! resolvers), `proxy` (a proxy's settings), `bind`, `server`, `check`
//! (`http-check`), `rules` (ACLs, conditions, HTTP rules), `tcp`
//! (layer-4 and stick rules) and `log`; the whole ([`Config`]) and its
//! errors are here.

mod bind;
mod check;
mod global;
mod log;
mod proxy;
mod rules;
mod sections;
mod server;
mod tcp;

pub use bind::*;
pub use check::*;
pub use global::*;
pub use log::*;
pub use proxy::*;
pub use rules::*;
pub use sections::*;
pub use server::*;
pub use tcp::*;

use std::fmt;

pub use crate::loc::Loc;

/// A configuration error: `file:line: what is wrong`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ConfigError {
    pub loc: Loc,
    pub message: String,
}

impl fmt::Display for ConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.loc, self.message)
    }
}

impl std::error::Error for ConfigError {}

/// A value with the line it was set on.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Spanned<T> {
    pub value: T,
    pub loc: Loc,
}

/// The whole configuration, in the order of the files.
#[derive(Clone, Debug, Default)]
pub struct Config {
    pub global: Global,
    /// Frontends, backends and listens in declaration order. A `listen` is one
    /// proxy with both capabilities, as in HAProxy.
    pub proxies: Vec<Proxy>,
    /// `resolvers` sections, in declaration order.
    pub resolvers: Vec<Resolvers>,
    /// `peers` sections, in declaration order.
    pub peers: Vec<super::peers::PeersSection>,
    /// `cache` sections, in declaration order.
    pub caches: Vec<CacheSection>,
    /// `fcgi-app` sections, in declaration order.
    pub fcgi_apps: Vec<crate::config::FcgiApp>,
    /// `userlist` sections.
    pub userlists: Vec<crate::sample::auth::Userlist>,
    /// `program` sections, in declaration order (master-worker mode only).
    pub programs: Vec<Program>,
    /// `ring` sections, then the rings of `log tcp@` lines.
    pub rings: Vec<crate::config::ring::RingSection>,
    /// This instance's peer name (`-L`, `localpeer`, or the host name).
    pub local_peer: String,
    /// The `disabled` backends and listens, each reduced to its name, mode
    /// and id: not started, not listed, but frontends route to them (and
    /// get 503 there, as with HAProxy's, which never sets them up).
    pub stopped: Vec<Proxy>,
    /// Each `disabled` proxy, as the number of started proxies declared
    /// before it and its `id` if set: HAProxy numbers them too.
    pub disabled_ids: Vec<(usize, Option<u32>)>,
    /// HAProxy's CLI frontend (`GLOBAL`, made by the first global `stats
    /// socket` or `stats timeout` line) as the number of started proxies
    /// declared before it: it takes the next proxy id there (id 0 for
    /// itself), which shifts the ids of the proxies after it by one.
    pub cli_fe_at: Option<usize>,
    /// The pattern references this configuration made (its pattern files,
    /// its ACL lines' patterns), numbered: the CLI's once it is live
    /// (`crate::sample::patref::install`).
    pub pat_refs: Vec<crate::sample::patref::PatFile>,
}

impl Config {
    /// Every stick table: the proxies' (named after them), then the
    /// `table` lines of the peers sections (named `SECTION/T`).
    pub fn stick_tables(&self) -> impl Iterator<Item = &Spanned<crate::table::TableDef>> {
        self.proxies
            .iter()
            .filter_map(|p| p.stick_table.as_ref())
            .chain(self.peers.iter().flat_map(|s| s.tables.iter()))
    }
}

impl Config {
    /// Proxies that accept connections (`frontend` and `listen`).
    pub fn frontends(&self) -> impl Iterator<Item = &Proxy> {
        self.proxies.iter().filter(|p| p.kind.is_frontend())
    }
    /// Proxies that hold servers or files (`backend` and `listen`).
    pub fn backends(&self) -> impl Iterator<Item = &Proxy> {
        self.proxies.iter().filter(|p| p.kind.is_backend())
    }
    /// The backend (or listen) of that name.
    pub fn backend(&self, name: &str) -> Option<&Proxy> {
        self.backends().find(|p| p.name == name)
    }
    /// The frontend (or listen) of that name.
    pub fn frontend(&self, name: &str) -> Option<&Proxy> {
        self.frontends().find(|p| p.name == name)
    }
}

pub use crate::net::TcpKa;

pub use crate::net::IpNet;

pub use crate::proxyproto::PpV2Options;
