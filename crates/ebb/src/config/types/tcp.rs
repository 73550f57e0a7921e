//! The layer-4 rules of a proxy: `tcp-request` and `tcp-response` rules
//! with their actions, and `stick` rules.

use crate::loc::Loc;

use super::rules::{Condition, HttpRequestAction};

/// When a `tcp-request` rule runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum TcpWhen {
    /// `connection`: at accept, before any byte is read (and before a
    /// PROXY header).
    Connection,
    /// `session`: once the connection is a session (after the PROXY
    /// header), before any byte of content.
    Session,
    /// `content`: on the request's first bytes, within `inspect-delay`.
    Content,
}

/// What a `tcp-request` rule does.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum TcpAction {
    Accept,
    Reject,
    /// `silent-drop`: the connection is reset and forgotten (no log).
    SilentDrop,
    /// `close` (`tcp-response content`): the server connection is closed
    /// at once; what it sent still reaches the client.
    Close,
    /// `expect-proxy layer4` (connection rules): a PROXY header must come
    /// first, as with `accept-proxy` on the bind.
    ExpectProxy,
    /// `set-src EXPR`, `set-dst EXPR`, `set-src-port EXPR`,
    /// `set-dst-port EXPR`: the client's address as the rest of the
    /// connection (or session) sees it.
    SetAddr(AddrField, Box<crate::sample::Expr>),
    /// An action shared with `http-request`: `track-scN`, `sc-inc-gpc0`,
    /// `sc-set-gpt0`, `set-var`, `set-var-fmt`, `unset-var`.
    Common(HttpRequestAction),
    /// `switch-mode http [proto h1|h2]` (content rules of a frontend): the
    /// tcp stream becomes HTTP (`None`: HTTP/1, or HTTP/2 on its preface;
    /// `Some(true)`: HTTP/2 only; `Some(false)`: HTTP/1 only). On a stream
    /// that is HTTP already it ends the walk as `accept`.
    SwitchMode(Option<bool>),
}

/// Which part of the client's addresses a `set-*` action changes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AddrField {
    Src,
    Dst,
    SrcPort,
    DstPort,
}

impl AddrField {
    /// The action's name.
    pub fn name(self) -> &'static str {
        match self {
            AddrField::Src => "set-src",
            AddrField::Dst => "set-dst",
            AddrField::SrcPort => "set-src-port",
            AddrField::DstPort => "set-dst-port",
        }
    }
}

/// `tcp-request connection|session|content ACTION [if|unless COND]`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TcpRequestRule {
    pub when: TcpWhen,
    pub action: TcpAction,
    pub cond: Option<Condition>,
    pub loc: Loc,
}

/// What a `stick` rule does.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum StickKind {
    /// `stick on`: match, then store the request's pattern.
    On,
    Match,
    StoreRequest,
    StoreResponse,
}

/// `stick on|match|store-request|store-response PATTERN [table T] [if|unless COND]`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StickRule {
    pub kind: StickKind,
    pub pattern: crate::sample::Expr,
    /// `None`: the backend's own table.
    pub table: Option<String>,
    pub cond: Option<Condition>,
    pub loc: Loc,
}
