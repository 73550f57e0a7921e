//! Why a proxied exchange failed, as one typed value.
//!
//! Every failure of an exchange is an [`ExchangeError`]: which side caused
//! it (the client or the server), in which phase (request, queue, connect,
//! response head, data), whether it was a timeout, whether it may be
//! retried on another connection, and the status the client gets (none
//! when the answer already started: then both connections are cut). The
//! two-letter termination code of the access log (HAProxy's, "sC", "SH",
//! "CD"...) is derived from it, never written by hand, so the log, the
//! status and the retry decision cannot disagree.
//!
//! ```text
//!   first letter  C client   c client timeout   S server   s server timeout
//!                 P proxy (an answer refused)   D/U a server went DOWN/UP
//!   second        R request  Q queue  C connect  H response head  D data
//! ```

/// Who caused the failure.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Side {
    Client,
    Server,
    /// Its server went DOWN (`on-marked-down shutdown-sessions`): `D`.
    Down,
    /// An active server came UP while it was on a backup one
    /// (`on-marked-up shutdown-backup-sessions`): `U`.
    Up,
    /// The proxy refused what the server sent (an invalid response
    /// head): `P`, as HAProxy's parser errors.
    Proxy,
    /// Killed from the CLI (`shutdown session`, `shutdown sessions
    /// server`): `K`.
    Killed,
    /// The proxy could not carry out the exchange (HAProxy's internal
    /// error, such as a request a FastCGI server cannot be given): `I`.
    Internal,
}

/// How far the exchange had come.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Phase {
    /// Waiting for a server slot.
    Queue,
    /// Connecting to the server.
    Connect,
    /// Waiting for the response head.
    Head,
    /// Moving the response body (or tunnel bytes).
    Data,
}

/// A failed exchange.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ExchangeError {
    pub side: Side,
    pub phase: Phase,
    pub timeout: bool,
    /// Whether the request may be sent again on another connection: it is
    /// safe to replay (idempotent, no body byte sent) and nothing came back.
    pub retryable: bool,
    /// The error answer for the client; `None` once the answer started.
    pub status: Option<u16>,
}

impl ExchangeError {
    const fn new(side: Side, phase: Phase, timeout: bool, status: Option<u16>) -> Self {
        ExchangeError {
            side,
            phase,
            timeout,
            retryable: false,
            status,
        }
    }

    /// No usable server in the backend: 503.
    pub const fn no_server() -> Self {
        Self::new(Side::Server, Phase::Connect, false, Some(503))
    }

    /// Connects failed (refused, or timed out) and no retry is left: 503.
    pub const fn connect(timeout: bool) -> Self {
        Self::new(Side::Server, Phase::Connect, timeout, Some(503))
    }

    /// `timeout queue` passed before a slot came: 503.
    pub const fn queue_timeout() -> Self {
        Self::new(Side::Server, Phase::Queue, true, Some(503))
    }

    /// The server's own queue was at its `maxqueue` (HAProxy's
    /// `STRM_ET_QUEUE_ERR`): 503, `SQ`.
    pub const fn queue_full() -> Self {
        Self::new(Side::Server, Phase::Queue, false, Some(503))
    }

    /// A broken request body (a bad chunk size, say) once its head went
    /// to the server: 400 if no answer started, else a cut; the proxy's
    /// refusal while it waited for the answer's head or sent its data
    /// (`PH`, `PD`), as HAProxy 2.6 logs it.
    pub const fn bad_request_body(answered: bool) -> Self {
        if answered {
            Self::new(Side::Proxy, Phase::Data, false, None)
        } else {
            Self::new(Side::Proxy, Phase::Head, false, Some(400))
        }
    }

    /// The server closed before a complete response head; `retryable`
    /// when the request may go again on a fresh connection.
    pub const fn closed_before_head(retryable: bool) -> Self {
        let mut e = Self::new(Side::Server, Phase::Head, false, Some(502));
        e.retryable = retryable;
        e
    }

    /// A response head that is not valid HTTP: 502, `PH` (HAProxy's:
    /// the proxy refused the answer, whether or not retries were tried).
    pub const fn bad_response_head() -> Self {
        Self::new(Side::Proxy, Phase::Head, false, Some(502))
    }

    /// The request could not be made into what the server speaks (a
    /// FastCGI request whose path does not decode, or has no path): 500,
    /// `IH`, as HAProxy 2.6's processing error.
    pub const fn internal() -> Self {
        Self::new(Side::Internal, Phase::Head, false, Some(500))
    }

    /// The response body was cut or malformed: the client is cut too.
    pub const fn body_cut() -> Self {
        Self::new(Side::Server, Phase::Data, false, None)
    }

    /// `timeout server` (or `timeout tunnel`) passed: 504 before the
    /// answer, a cut after.
    pub const fn server_timeout(answered: bool) -> Self {
        if answered {
            Self::new(Side::Server, Phase::Data, true, None)
        } else {
            Self::new(Side::Server, Phase::Head, true, Some(504))
        }
    }

    /// The response's body a rule waited for did not come in time
    /// (`http-response wait-for-body`): 504, `sD`.
    pub const fn body_wait_timeout() -> Self {
        Self::new(Side::Server, Phase::Data, true, Some(504))
    }

    /// `option abortonclose`: the client closed its side while its
    /// request waited in the queue (`CQ`), for a connection (`CC`) or for
    /// the response head (`CH`). Only the last is answered: a 400, as
    /// HAProxy 2.6's (a client that only shut its sending side reads it).
    pub const fn client_abort(phase: Phase) -> Self {
        let status = if matches!(phase, Phase::Head) {
            Some(400)
        } else {
            None
        };
        Self::new(Side::Client, phase, false, status)
    }

    /// A server's state change ended the exchange (`up`: an active server
    /// came UP, else its own went DOWN): 503 while connecting, 502 before
    /// the answer, a cut after.
    pub const fn server_shutdown(up: bool, phase: Phase) -> Self {
        let status = match phase {
            Phase::Queue | Phase::Connect => Some(503),
            Phase::Head => Some(502),
            Phase::Data => None,
        };
        Self::new(if up { Side::Up } else { Side::Down }, phase, false, status)
    }

    /// `shutdown session(s)` from the CLI ended the exchange: as HAProxy
    /// 2.6, a 502 while the answer is awaited (`KH`), a 503 before the
    /// server has the request, a cut after the answer started.
    pub const fn killed(phase: Phase) -> Self {
        let status = match phase {
            Phase::Queue | Phase::Connect => Some(503),
            Phase::Head => Some(502),
            Phase::Data => None,
        };
        Self::new(Side::Killed, phase, false, status)
    }

    /// The client went away during the exchange.
    pub const fn client_gone() -> Self {
        Self::new(Side::Client, Phase::Data, false, None)
    }

    /// Whether the server connection is reset (closed with SO_LINGER 0:
    /// a RST, no FIN) rather than shut down: HAProxy 2.6 closes it so
    /// (`SC_FL_NOLINGER`) when the server fails or times out after the
    /// connect, when its answer is refused, and when a client's abort
    /// (`option abortonclose`) ends the wait for the answer.
    pub const fn resets_server(&self) -> bool {
        match self.side {
            Side::Server | Side::Proxy => matches!(self.phase, Phase::Head | Phase::Data),
            Side::Client => matches!(self.phase, Phase::Head),
            Side::Down | Side::Up | Side::Killed | Side::Internal => false,
        }
    }

    /// The access log's termination code.
    pub fn term(&self) -> &'static str {
        use Phase::*;
        match (self.side, self.timeout, self.phase) {
            (Side::Client, false, Queue) => "CQ",
            (Side::Client, false, Connect) => "CC",
            (Side::Client, false, Head) => "CH",
            (Side::Client, false, Data) => "CD",
            (Side::Client, true, Queue) => "cQ",
            (Side::Client, true, Connect) => "cC",
            (Side::Client, true, Head) => "cH",
            (Side::Client, true, Data) => "cD",
            (Side::Server, false, Queue) => "SQ",
            (Side::Server, false, Connect) => "SC",
            (Side::Server, false, Head) => "SH",
            (Side::Server, false, Data) => "SD",
            (Side::Server, true, Queue) => "sQ",
            (Side::Server, true, Connect) => "sC",
            (Side::Server, true, Head) => "sH",
            (Side::Server, true, Data) => "sD",
            (Side::Down, _, Queue) => "DQ",
            (Side::Down, _, Connect) => "DC",
            (Side::Down, _, Head) => "DH",
            (Side::Down, _, Data) => "DD",
            (Side::Killed, _, Queue) => "KQ",
            (Side::Killed, _, Connect) => "KC",
            (Side::Killed, _, Head) => "KH",
            (Side::Killed, _, Data) => "KD",
            (Side::Up, _, Queue) => "UQ",
            (Side::Up, _, Connect) => "UC",
            (Side::Up, _, Head) => "UH",
            (Side::Up, _, Data) => "UD",
            (Side::Internal, _, Queue) => "IQ",
            (Side::Internal, _, Connect) => "IC",
            (Side::Internal, _, Head) => "IH",
            (Side::Internal, _, Data) => "ID",
            (Side::Proxy, _, Queue) => "PQ",
            (Side::Proxy, _, Connect) => "PC",
            (Side::Proxy, _, Head) => "PH",
            (Side::Proxy, _, Data) => "PD",
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn codes_follow_haproxy() {
        assert_eq!(ExchangeError::no_server().term(), "SC");
        assert_eq!(ExchangeError::connect(false).term(), "SC");
        assert_eq!(ExchangeError::connect(true).term(), "sC");
        assert_eq!(ExchangeError::queue_timeout().term(), "sQ");
        assert_eq!(ExchangeError::bad_request_body(false).term(), "PH");
        assert_eq!(ExchangeError::bad_request_body(true).term(), "PD");
        assert_eq!(ExchangeError::closed_before_head(false).term(), "SH");
        assert_eq!(ExchangeError::bad_response_head().term(), "PH");
        assert_eq!(ExchangeError::body_cut().term(), "SD");
        assert_eq!(ExchangeError::server_timeout(false).term(), "sH");
        assert_eq!(ExchangeError::server_timeout(true).term(), "sD");
        assert_eq!(ExchangeError::client_gone().term(), "CD");
        assert_eq!(
            ExchangeError::server_shutdown(false, Phase::Head).term(),
            "DH"
        );
        assert_eq!(
            ExchangeError::server_shutdown(false, Phase::Data).term(),
            "DD"
        );
        assert_eq!(
            ExchangeError::server_shutdown(true, Phase::Data).term(),
            "UD"
        );
        assert_eq!(
            ExchangeError::server_shutdown(true, Phase::Head).status,
            Some(502)
        );
    }

    #[test]
    fn status_only_before_the_answer() {
        assert_eq!(ExchangeError::server_timeout(false).status, Some(504));
        assert_eq!(ExchangeError::server_timeout(true).status, None);
        assert_eq!(ExchangeError::bad_request_body(false).status, Some(400));
        assert_eq!(ExchangeError::bad_request_body(true).status, None);
        assert_eq!(ExchangeError::body_cut().status, None);
        assert_eq!(ExchangeError::client_gone().status, None);
        for e in [
            ExchangeError::no_server(),
            ExchangeError::connect(true),
            ExchangeError::queue_timeout(),
        ] {
            assert_eq!(e.status, Some(503));
            assert!(!e.retryable);
        }
        assert!(ExchangeError::closed_before_head(true).retryable);
    }
}
