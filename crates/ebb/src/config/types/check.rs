//! `http-check` rules: the health-check request sent and the answers
//! expected (`expect`, `connect`, `send`).

use crate::loc::Loc;

/// `http-check expect [!] status|rstatus|string|rstring PATTERN`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ExpectKind {
    /// Inclusive ranges, e.g. `200`, `200-399`, `200,204`.
    Status(Vec<(u16, u16)>),
    RStatus(String),
    String(String),
    RString(String),
    /// `string-lf FMT`: a log-format pattern rendered at each check.
    StringLf(String),
    /// `hdr|fhdr name [-m M] NAME [value [-m M] VALUE]`: a header whose
    /// name matches (case-insensitively) and, if given, one of whose
    /// values matches (`hdr`: each comma-separated value; `fhdr`: the
    /// whole value).
    Hdr {
        full: bool,
        name: HdrMatch,
        value: Option<HdrMatch>,
    },
}

/// How `http-check expect hdr` compares a header name or value (`-m`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum HdrMatch {
    Str(String),
    Beg(String),
    End(String),
    Sub(String),
    Reg(String),
    /// `name-lf` / `value-lf`: the pattern of the match inside (never
    /// `Reg`) is a log-format string, rendered at each check.
    Fmt(Box<HdrMatch>),
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct HttpExpect {
    pub negate: bool,
    pub kind: ExpectKind,
    pub loc: Loc,
    /// `min-recv N` (None: -1, HAProxy's default).
    pub min_recv: Option<usize>,
    /// `ok-status`, L7OK by default.
    pub ok_status: crate::config::CheckStatus,
    /// `error-status`; None: HAProxy's default for the match (L7STS for
    /// status and header matches, L7RSP for the body).
    pub error_status: Option<crate::config::CheckStatus>,
    /// `tout-status`, L7TOUT by default.
    pub tout_status: crate::config::CheckStatus,
    /// `on-success FMT`, `on-error FMT`: log-format strings, the
    /// check's report when the rule is the last that passed, or fails.
    pub on_success: Option<String>,
    pub on_error: Option<String>,
    /// `status-code EXPR`: the check's code instead of the HTTP status.
    pub status_code: Option<String>,
}

/// A check's `connect` step (`tcp-check connect`, `http-check connect`).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct CheckConnect {
    /// `default`: the server's check settings (its PROXY header and TLS).
    pub default: bool,
    pub port: Option<u16>,
    pub addr: Option<std::net::IpAddr>,
    pub send_proxy: bool,
    /// `linger`: close with a reset rather than a FIN.
    pub linger: bool,
    /// `via-socks4`: through the server's `socks4` proxy, if it has one.
    pub via_socks4: bool,
    /// `ssl`: TLS with the server's TLS settings (its `verify`,
    /// `ca-file`, `crt`, versions, ciphers, `alpn`), whether or not the
    /// server has `ssl`.
    pub ssl: bool,
    /// `sni NAME`: the name sent in the TLS handshake (and checked
    /// against the certificate with `verify required`).
    pub sni: Option<String>,
    /// `alpn LIST`: the protocols offered in the TLS handshake.
    pub alpn: Option<Vec<String>>,
    /// `proto NAME`: the protocol spoken on the connection.
    pub proto: Option<ConnectProto>,
}

/// A connect step's `proto`: `none` (tcp-check: raw bytes), `h1`, `h2`,
/// `fcgi` (http-check; FastCGI with the backend's application).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ConnectProto {
    None,
    H1,
    H2,
    Fcgi,
}

/// One step of an HTTP check's sequence.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum HttpCheckStep {
    /// `http-check comment MSG`: the comment of the rule that follows.
    Comment,
    /// `http-check connect [default] [port N] [addr IP] [send-proxy]
    /// [linger]`.
    Connect(CheckConnect),
    /// `http-check send ...`: None for the first, which is the section's
    /// request (`option httpchk` merged with it); later ones carry their
    /// own.
    Send(Option<HttpSend>),
    Expect(HttpExpect),
    /// `http-check set-var(VAR) EXPR`, `set-var-fmt(VAR) FMT`,
    /// `unset-var(VAR)`: run when the sequence reaches them.
    Var(crate::sample::VarAction),
}

/// A request of a later `http-check send` (HAProxy's defaults: OPTIONS,
/// `/`, HTTP/1.0).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct HttpSend {
    pub method: String,
    pub uri: String,
    pub version: String,
    /// Values are log-format strings (HAProxy's); one that renders
    /// empty is not sent.
    pub headers: Vec<(String, String)>,
    pub body: Option<String>,
    /// `uri-lf`, `body-lf`: the URI, the body are log-format strings.
    pub uri_lf: bool,
    pub body_lf: bool,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct HttpCheckRule {
    pub step: HttpCheckStep,
    pub comment: Option<String>,
    pub loc: Loc,
}

/// HTTP health checks: `option httpchk` and `http-check expect`.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct HttpCheck {
    /// `option httpchk` given: checks are HTTP, not TCP connects.
    pub enabled: bool,
    /// `OPTIONS` by default (HAProxy's).
    pub method: String,
    /// `/` by default.
    pub uri: String,
    /// `HTTP/1.0` by default.
    pub version: String,
    /// `http-check send ... hdr NAME VALUE` headers, in order.
    pub headers: Vec<(String, String)>,
    /// `http-check send ... body STR`.
    pub body: Option<String>,
    /// The first send's `uri-lf`, `body-lf`.
    pub uri_lf: bool,
    pub body_lf: bool,
    /// An `http-check send` line is in this section's rules.
    pub explicit_send: bool,
    /// The rules are this section's own, not inherited from `defaults`:
    /// HAProxy starts a new rule set at a section's first `option
    /// httpchk` or `http-check` line.
    pub own: bool,
    /// The `http-check connect|send|expect|comment` rules in order.
    pub rules: Vec<HttpCheckRule>,
    /// `http-check send-state`: each request carries the server's state
    /// (`X-Haproxy-Server-State`). A proxy option, not a rule: kept when
    /// a section starts its own rules.
    pub send_state: bool,
    /// `http-check disable-on-404`: a 404 to a check of a server that is
    /// not DOWN passes conditionally (`L7OKC`) and takes the server out
    /// of load balancing (NOLB). A proxy option too.
    pub disable_404: bool,
}

impl HttpCheck {
    /// Starts this section's own rules (dropping inherited ones) if it
    /// has not yet.
    pub fn own_rules(&mut self) {
        if !self.own {
            *self = HttpCheck {
                enabled: self.enabled,
                send_state: self.send_state,
                disable_404: self.disable_404,
                method: "OPTIONS".into(),
                uri: "/".into(),
                version: "HTTP/1.0".into(),
                own: true,
                ..HttpCheck::default()
            };
        }
    }
}
