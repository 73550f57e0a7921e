//! One HTTP/2 connection (RFC 9113 §3-§8), server side ([`Connection::new`])
//! or client side ([`Connection::client`]): bytes in, events out, frames to
//! send in a buffer. No socket, no clock of its own.
//!
//! ```text
//!   let mut c = Connection::new(Config::default());   // queues SETTINGS
//!   loop {
//!       read bytes into buf
//!       loop {
//!           let p = c.recv(&buf[off..], now);  // one frame at most
//!           off += p.consumed;
//!           match p.event { Some(ev) => handle(ev), None if p.consumed == 0 => break, _ => {} }
//!       }
//!       commands: c.send_response / send_data / send_trailers / reset / release
//!       write c.output(); c.consume_output(n)
//!       if c.is_done() && c.output().is_empty() { close }
//!   }
//! ```
//!
//! The client role (ebb talking to a server: `server ... proto h2`, gRPC)
//! is driven the same way: [`Connection::client`] queues the preface and
//! SETTINGS, [`Connection::send_request`] opens a stream (then
//! `send_data`/`send_trailers`), and `recv` reports [`Event::Response`]
//! (interim 1xx ones first, if any), `Data` and `Trailers`. Server push is
//! refused (SETTINGS_ENABLE_PUSH 0). A GOAWAY from the server drops the
//! streams above its last-stream-id (never processed: the caller retries
//! them) and refuses new ones; [`Connection::is_done`] once the rest ended.
//!
//! [`Connection::recv`] handles at most one frame per call so that an
//! [`Event`] can borrow the input (DATA payloads) and the decoded head
//! without copying; frames that need no attention from the caller
//! (SETTINGS, PING, PRIORITY, WINDOW_UPDATE...) are answered in place.
//!
//! # Stream states (§5.1, server side; no push, so no reserved states)
//!
//! ```text
//!   idle --HEADERS--> open --END_STREAM recv--> half-closed(remote)
//!                      |                              | END_STREAM sent
//!                      +--END_STREAM sent--> half-closed(local) --recv ES--> closed
//!   any --RST_STREAM sent or received--> closed
//! ```
//! A closed stream leaves the table; `max_client_id` tells closed from idle.
//! In the client role the same diagram holds with local and remote swapped
//! (the request is sent first); stream ids are odd in both roles, as no
//! server-initiated (pushed) stream is accepted.
//!
//! # Bounds (each has a test in `tests.rs`)
//!
//! | attack | bound ([`Config`] field) | how others bound it |
//! |---|---|---|
//! | more streams than allowed | REFUSED_STREAM past `max_concurrent_streams` (100) | HAProxy `tune.h2.max-concurrent-streams` 100; nginx `http2_max_concurrent_streams` 128 |
//! | rapid reset (CVE-2023-44487) | token bucket over resets received or sent for stream errors (431 included): `reset_burst` 1000, `reset_rate_per_s` 33, then GOAWAY ENHANCE_YOUR_CALM | nghttp2 the same bucket; nginx refuses past 2 x concurrent streams opened per read and 1000 requests per connection; HAProxy 2.6 counts an aborted stream against the concurrent limit until its work ends |
//! | CONTINUATION flood (CVE-2024-27316) | a field block over 2 x `max_header_list_size` bytes or `max_continuations` (128) frames: GOAWAY ENHANCE_YOUR_CALM; never more than that buffered | HAProxy: the whole block must fit one buffer (`tune.bufsize`); nginx: `large_client_header_buffers` |
//! | many fields | more than `max_fields` (2 x `tune.http.maxhdr` - 1, 201) in a field block, pseudo-header fields included: GOAWAY COMPRESSION_ERROR | HAProxy 2.6 the same (its HPACK list holds 2 x `tune.http.maxhdr` entries, the end mark included); nginx: `large_client_header_buffers` |
//! | HPACK bomb, oversized lists | decoded size (§6.5.2) over `max_header_list_size` (16 KiB): copying stops, the table is kept in sync, the stream gets a 431 answer and ends (RST_STREAM NO_ERROR) | RFC 7541 §7.3, RFC 9113 §10.5.1; HAProxy: the decoded list must fit a buffer |
//! | SETTINGS/PING/WINDOW_UPDATE (0 or tiny)/empty DATA/PRIORITY floods | `flood_limit` (1000) such frames without useful work (a new stream or DATA bytes) in between, or `max_pending_control` (1000) answers the peer does not read: GOAWAY ENHANCE_YOUR_CALM; a 0 increment on a stream is a stream error and spends a reset token | RFC 9113 §10.5; nghttp2 `max_outbound_ack` 1000; nginx closes when received bytes / 8 exceed payload bytes + 1 MiB |
//! | zero-window slow reader | no DATA queued beyond the windows nor past `max_output` (64 KiB) unwritten bytes; a stream waiting that way for `stall_timeout_ms` (30 s) is reset CANCEL by [`Connection::tick`] | RFC 9113 §10.5; HAProxy and nginx: `timeout client` / `send_timeout` |
//! | stream-id reuse/regression, even ids | connection error PROTOCOL_ERROR (STREAM_CLOSED for a recently closed id) | §5.1.1 |
//! | frames on closed streams | DATA: stream error STREAM_CLOSED (its bytes still count for the connection window); HEADERS: connection error STREAM_CLOSED | §5.1 |
//! | oversized frames | over `max_frame_size`: connection error FRAME_SIZE_ERROR, payload never buffered | §4.2 |
//! | DATA after END_STREAM | stream error STREAM_CLOSED | §5.1 half-closed (remote) |

use super::frame::{self, flag, kind, setting, ErrorCode, Frame, FrameHeader, H2Error};
use super::hpack::{self, Decoder, Encoder, HuffmanMode};
use super::request::{check_trailers, RequestHead, ResponseHead};

/// The connection's limits. Defaults are HAProxy's where it has one.
#[derive(Copy, Clone, Debug)]
pub struct Config {
    /// SETTINGS_MAX_CONCURRENT_STREAMS: HAProxy's
    /// `tune.h2.max-concurrent-streams` default, 100.
    pub max_concurrent_streams: u32,
    /// SETTINGS_INITIAL_WINDOW_SIZE for the streams the client opens:
    /// HAProxy's `tune.h2.initial-window-size` default, 65535 (RFC value).
    pub initial_window_size: u32,
    /// The connection-level receive window ebb grants (WINDOW_UPDATE on
    /// stream 0: a server sends it when the first DATA frame arrives, a
    /// client with its preface): bounds request body bytes buffered per
    /// connection. 1 MiB.
    pub connection_window: u32,
    /// SETTINGS_HEADER_TABLE_SIZE: HAProxy's `tune.h2.header-table-size`
    /// default, 4096 (RFC value).
    pub header_table_size: u32,
    /// SETTINGS_MAX_FRAME_SIZE: 16384, the RFC's initial value (HAProxy
    /// advertises its buffer size, 16384 by default).
    pub max_frame_size: u32,
    /// SETTINGS_MAX_HEADER_LIST_SIZE: 16384, HAProxy's `tune.bufsize`
    /// default, in which a whole request head must fit.
    pub max_header_list_size: u32,
    /// Most fields (pseudo-header fields included) in one field block;
    /// past it, a connection error COMPRESSION_ERROR. HAProxy 2.6 decodes
    /// a block into a list of 2 x `tune.http.maxhdr` entries, one of them
    /// the end mark: 201 by default (`tune.http.maxhdr` 101).
    pub max_fields: u32,
    /// How long a stream may wait on a zero send window (or a full output
    /// buffer) before it is reset (ms). 30 s, HAProxy's common `timeout
    /// client`.
    pub stall_timeout_ms: u32,
    /// Frames that do no useful work (SETTINGS, PING, PRIORITY,
    /// WINDOW_UPDATE, empty DATA or CONTINUATION, RST_STREAM on a closed
    /// stream, unknown types) allowed in a row; past it GOAWAY
    /// ENHANCE_YOUR_CALM. A new stream or DATA bytes reset the count.
    pub flood_limit: u32,
    /// Control answers (SETTINGS ACK, PING ACK, RST_STREAM) queued while
    /// the peer does not read them; past it GOAWAY ENHANCE_YOUR_CALM.
    pub max_pending_control: u32,
    /// Rapid reset: resets (received, or sent for stream errors) allowed
    /// in a burst.
    pub reset_burst: u32,
    /// Rapid reset: resets per second given back to the burst.
    pub reset_rate_per_s: u32,
    /// CONTINUATION frames allowed in one field block.
    pub max_continuations: u32,
    /// Output bytes past which [`Connection::send_data`] queues no more
    /// DATA until the caller writes some: bounds the memory a client that
    /// opens large windows but does not read can pin. 64 KiB.
    pub max_output: usize,
}

impl Default for Config {
    fn default() -> Self {
        Config {
            max_concurrent_streams: 100,
            initial_window_size: frame::DEFAULT_WINDOW,
            connection_window: 1 << 20,
            header_table_size: hpack::DEFAULT_TABLE_SIZE as u32,
            max_frame_size: frame::MIN_MAX_FRAME_SIZE,
            max_header_list_size: 16_384,
            max_fields: 2 * 101 - 1,
            stall_timeout_ms: 30_000,
            flood_limit: FLOOD_LIMIT,
            max_pending_control: MAX_PENDING_CONTROL,
            reset_burst: RESET_BURST,
            reset_rate_per_s: RESET_RATE_PER_S,
            max_continuations: MAX_CONTINUATIONS,
            max_output: 64 * 1024,
        }
    }
}

/// Default of [`Config::flood_limit`] (see the module doc).
pub const FLOOD_LIMIT: u32 = 1000;
/// Default of [`Config::max_pending_control`] (nghttp2's `max_outbound_ack`).
pub const MAX_PENDING_CONTROL: u32 = 1000;
/// Default of [`Config::reset_burst`] (nghttp2's default).
pub const RESET_BURST: u32 = 1000;
/// Default of [`Config::reset_rate_per_s`] (nghttp2's default).
pub const RESET_RATE_PER_S: u32 = 33;
/// Default of [`Config::max_continuations`].
pub const MAX_CONTINUATIONS: u32 = 128;

/// What the caller must act on.
#[derive(Debug)]
pub enum Event<'a> {
    /// A new request (the head checked by RFC 9113 §8).
    Request {
        /// Stream id.
        id: u32,
        /// The head.
        head: &'a RequestHead,
        /// No body follows.
        end_stream: bool,
    },
    /// A response head (client role): interim (1xx, more heads follow) or
    /// final. Checked by RFC 9113 §8.3.2.
    Response {
        /// Stream id.
        id: u32,
        /// The head.
        head: &'a ResponseHead,
        /// No body follows.
        end_stream: bool,
    },
    /// Body bytes (of the request, or in the client role of the
    /// response). Call [`Connection::release`] once they are
    /// consumed so the client may send more.
    Data {
        /// Stream id.
        id: u32,
        /// Payload (padding removed), borrowed from the input.
        data: &'a [u8],
        /// Last bytes of the body.
        end_stream: bool,
    },
    /// Trailers ending the request (checked by §8.1).
    Trailers {
        /// Stream id.
        id: u32,
        /// The fields.
        fields: &'a hpack::HeaderList,
    },
    /// The stream ended abnormally: the client reset it, or ebb reset it
    /// for a stream error (already sent). Drop its exchange.
    Reset {
        /// Stream id.
        id: u32,
        /// The code sent or received.
        code: ErrorCode,
        /// Whether the client sent it.
        remote: bool,
    },
    /// A send window opened: stream `id`'s, or with id 0 the connection's
    /// or every stream's (a larger SETTINGS_INITIAL_WINDOW_SIZE): retry
    /// pending DATA.
    WindowOpened {
        /// Stream id or 0.
        id: u32,
    },
    /// The client sent GOAWAY: no stream above `last_stream` will be
    /// answered by it... (for a server: the client is going away).
    GoAway {
        /// Its last stream id.
        last_stream: u32,
        /// Its code.
        code: ErrorCode,
    },
    /// A connection error: GOAWAY is queued; write the output and close.
    Closed {
        /// The code sent.
        code: ErrorCode,
    },
}

/// The result of one [`Connection::recv`] call.
#[derive(Debug)]
pub struct Progress<'a> {
    /// Input bytes consumed (0 with no event: more bytes are needed).
    pub consumed: usize,
    /// What happened, if anything needs the caller.
    pub event: Option<Event<'a>>,
}

/// Why a command was refused.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum SendError {
    /// No such stream (closed, reset or never opened).
    NoStream,
    /// The stream's sending side is already ended, or its head not sent,
    /// or the command is not one of this role.
    BadState,
    /// Client role: the server's SETTINGS_MAX_CONCURRENT_STREAMS streams
    /// are open; retry when one ends.
    Busy,
    /// Client role: a GOAWAY was sent or received (or stream ids ran out):
    /// open a new connection.
    GoingAway,
}

/// Which end of the connection this is.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum Role {
    /// Accepts streams (ebb facing clients).
    Server,
    /// Opens streams (ebb facing servers).
    Client,
}

#[derive(Copy, Clone, Debug, PartialEq, Eq)]
enum State {
    /// Waiting for the 24-byte client preface.
    Preface,
    /// Preface seen; the first frame must be SETTINGS (§3.4).
    FirstSettings,
    /// Normal operation.
    Open,
    /// A connection error was sent: nothing more is read.
    Closed,
}

#[derive(Debug)]
struct Stream {
    id: u32,
    /// The client has sent END_STREAM (half-closed remote).
    remote_done: bool,
    /// ebb has sent END_STREAM (half-closed local).
    local_done: bool,
    /// ebb has sent the response head.
    head_sent: bool,
    /// The request head was seen (a later HEADERS is trailers).
    send_window: i64,
    recv_window: i64,
    /// Bytes delivered and released, not yet returned by WINDOW_UPDATE.
    unacked: u32,
    /// Client role: the final response head arrived (a later HEADERS is
    /// trailers).
    final_head: bool,
    /// Client role: a HEAD request, whose response has no body whatever
    /// its content-length says.
    head_request: bool,
    content_length: Option<u64>,
    received: u64,
    /// Since when DATA waits on a zero window (tick), if it does.
    blocked_since: Option<u32>,
}

/// A pending field block (HEADERS then CONTINUATIONs).
#[derive(Copy, Clone, Debug)]
struct Pending {
    id: u32,
    end_stream: bool,
    frames: u32,
    /// A new request (else trailers, or a block ebb only decodes).
    kind: BlockKind,
}

#[derive(Copy, Clone, Debug, PartialEq, Eq)]
enum BlockKind {
    Request,
    /// Client role: a response head.
    Response,
    Trailers,
    /// Client role: a head for a stream ebb reset; decoded for the HPACK
    /// state only.
    Ignore,
    /// Decode for HPACK state, then reset the stream with this code.
    Refuse(ErrorCode),
}

/// One HTTP/2 connection, either role.
#[derive(Debug)]
pub struct Connection {
    cfg: Config,
    role: Role,
    state: State,
    /// The peer's preface and first SETTINGS came ([`Connection::started`]).
    spoke: bool,
    streams: Vec<Stream>,
    /// Where in `streams` the last stream looked up by id was: the calls
    /// for one stream come in a row (its head, its data, its end), so
    /// checking there first spares walking up to
    /// `max-concurrent-streams` entries each time. Only a hint: checked
    /// against the id, and stale after a removal.
    hint: std::cell::Cell<usize>,
    /// Highest stream id the client opened (§5.1.1), in either role.
    max_client_id: u32,
    /// Client role: the id the next request gets.
    next_id: u32,
    /// The peer's SETTINGS_MAX_CONCURRENT_STREAMS.
    peer_max_streams: u32,
    /// The peer sent SETTINGS_ENABLE_CONNECT_PROTOCOL 1 (RFC 8441).
    peer_ext_connect: bool,
    /// A GOAWAY received: its last-stream-id.
    peer_goaway: Option<u32>,
    response: ResponseHead,
    decoder: Decoder,
    encoder: Encoder,
    head: RequestHead,
    /// The field block `head` was decoded from, when that decoding left
    /// the dynamic table as it was (indexed fields and literals not
    /// indexed only): the same bytes on the same table decode to the same
    /// list, so `head` (and its checks' verdict, `last_checked`) is
    /// reused as is. Clients send a connection's requests this way
    /// (h2load, browsers for a page's assets).
    last_block: Vec<u8>,
    /// The table's generation `last_block` was decoded on; the verdict of
    /// `head.check()` on it (None: no block to reuse).
    last_gen: u64,
    last_checked: Option<Result<(), super::request::Malformed>>,
    trailers: hpack::HeaderList,
    block: Vec<u8>,
    pending: Option<Pending>,
    out: Vec<u8>,
    scratch: Vec<u8>,
    /// The fields of the head being encoded ([`HeadEncoder`]).
    fields: Vec<u8>,
    // Peer settings.
    peer_initial_window: u32,
    peer_max_frame: u32,
    // Connection windows.
    send_window: i64,
    recv_window: i64,
    unacked: u32,
    /// A server's connection-window enlargement, sent with the first DATA
    /// frame's arrival rather than in the preface: a client that reads
    /// SETTINGS then expects the SETTINGS acknowledgement (VTest, as
    /// HAProxy behaves) finds nothing in between, and a client that never
    /// uploads never needs it.
    grant: u32,
    /// Our SETTINGS acknowledged: our initial window applies.
    settings_acked: bool,
    // Flood accounting.
    idle_frames: u32,
    pending_control: u32,
    reset_tokens: u32,
    reset_refill_at: Option<u32>,
    /// GOAWAY sent: (last stream id, final) — final once the second one
    /// of a graceful shutdown (or an error's) is out.
    goaway: Option<(u32, bool)>,
    /// Streams closed recently, and whether ebb reset them (then DATA still
    /// in flight is ignored, §5.1); tells a closed stream (STREAM_CLOSED)
    /// from an id regression (PROTOCOL_ERROR, §5.1.1).
    recent: [(u32, bool); 32],
    recent_pos: usize,
    /// The highest id `recent` took: a stream above it is not there.
    recent_max: u32,
    /// Server role: ebb's SETTINGS, held until the client's preface came
    /// (HAProxy 2.6 answers the preface; bytes that are not one get no
    /// frame at all).
    preface_reply: Vec<u8>,
}

const SHUTDOWN_PING: [u8; 8] = *b"ebb-shut";

impl Connection {
    /// A server connection; ebb's SETTINGS are queued in the output at once
    /// (§3.4: the server preface may be sent before the client's arrives),
    /// the connection window's WINDOW_UPDATE with the first DATA frame.
    pub fn new(cfg: Config) -> Connection {
        Connection::with_role(cfg, Role::Server)
    }

    /// A client connection: the preface, SETTINGS (push disabled) and the
    /// connection window's WINDOW_UPDATE are queued at once (§3.4: the
    /// client may send requests before the server's SETTINGS arrive);
    /// the server's first frame must be SETTINGS. `max_concurrent_streams`
    /// is not used: the server's own setting bounds the streams ebb opens.
    pub fn client(cfg: Config) -> Connection {
        Connection::with_role(cfg, Role::Client)
    }

    /// This connection's role.
    pub fn role(&self) -> Role {
        self.role
    }

    fn with_role(cfg: Config, role: Role) -> Connection {
        let mut c = Connection {
            cfg,
            role,
            state: match role {
                Role::Server => State::Preface,
                Role::Client => State::FirstSettings,
            },
            spoke: false,
            streams: Vec::new(),
            hint: std::cell::Cell::new(0),
            max_client_id: 0,
            next_id: 1,
            peer_max_streams: u32::MAX,
            peer_ext_connect: false,
            peer_goaway: None,
            response: ResponseHead::default(),
            decoder: Decoder::new(cfg.header_table_size as usize),
            encoder: Encoder::new(hpack::DEFAULT_TABLE_SIZE, HuffmanMode::Shorter),
            head: RequestHead::default(),
            last_block: Vec::new(),
            last_gen: 0,
            last_checked: None,
            trailers: hpack::HeaderList::default(),
            block: Vec::new(),
            pending: None,
            out: Vec::with_capacity(1024),
            scratch: Vec::new(),
            fields: Vec::new(),
            peer_initial_window: frame::DEFAULT_WINDOW,
            peer_max_frame: frame::MIN_MAX_FRAME_SIZE,
            send_window: i64::from(frame::DEFAULT_WINDOW),
            recv_window: i64::from(frame::DEFAULT_WINDOW),
            grant: 0,
            unacked: 0,
            settings_acked: false,
            idle_frames: 0,
            pending_control: 0,
            reset_tokens: cfg.reset_burst,
            reset_refill_at: None,
            goaway: None,
            recent: [(0, false); 32],
            recent_pos: 0,
            recent_max: 0,
            preface_reply: Vec::new(),
        };
        c.decoder.set_max_fields(cfg.max_fields as usize);
        let mut params = match role {
            // No limit (`tune.h2.max-concurrent-streams 0`): no setting,
            // as HAProxy 2.6 sends none (RFC 9113 §6.5.2: unlimited).
            Role::Server if cfg.max_concurrent_streams == u32::MAX => Vec::new(),
            Role::Server => vec![(setting::MAX_CONCURRENT_STREAMS, cfg.max_concurrent_streams)],
            Role::Client => {
                c.out.extend_from_slice(frame::PREFACE);
                vec![(setting::ENABLE_PUSH, 0)]
            }
        };
        // RFC 8441 §3: extended CONNECT (WebSocket over HTTP/2) taken, as
        // HAProxy announces it on both sides.
        params.push((setting::ENABLE_CONNECT_PROTOCOL, 1));
        params.push((setting::MAX_HEADER_LIST_SIZE, cfg.max_header_list_size));
        if cfg.initial_window_size != frame::DEFAULT_WINDOW {
            params.push((setting::INITIAL_WINDOW_SIZE, cfg.initial_window_size));
        }
        if cfg.header_table_size != hpack::DEFAULT_TABLE_SIZE as u32 {
            params.push((setting::HEADER_TABLE_SIZE, cfg.header_table_size));
        }
        if cfg.max_frame_size != frame::MIN_MAX_FRAME_SIZE {
            params.push((setting::MAX_FRAME_SIZE, cfg.max_frame_size));
        }
        match role {
            Role::Server => frame::write_settings(&mut c.preface_reply, &params),
            Role::Client => frame::write_settings(&mut c.out, &params),
        }
        if cfg.connection_window > frame::DEFAULT_WINDOW {
            let inc = cfg.connection_window - frame::DEFAULT_WINDOW;
            // Server role: with the first DATA frame; client role: after
            // the acknowledgement of the server's SETTINGS (a server may
            // expect that acknowledgement as the frame after its SETTINGS,
            // VTest's do; HAProxy sends no frame in between either).
            c.grant = inc;
        }
        c
    }

    /// Bytes to write to the client.
    pub fn output(&self) -> &[u8] {
        &self.out
    }

    /// `n` bytes of [`Connection::output`] were written.
    pub fn consume_output(&mut self, n: usize) {
        let n = n.min(self.out.len());
        self.out.drain(..n);
        if self.out.is_empty() {
            self.pending_control = 0;
        }
    }

    /// Whether the connection is over: a connection error or GOAWAY was
    /// sent (or, client role, received) and no stream remains. Close once
    /// the output is written.
    pub fn is_done(&self) -> bool {
        let away = self.goaway.is_some_and(|(_, fin)| fin)
            || (self.role == Role::Client && self.peer_goaway.is_some());
        self.state == State::Closed || (away && self.streams.is_empty())
    }

    /// The last-stream-id a GOAWAY of ours carries: the highest stream the
    /// peer opened (none in the client role, push being refused).
    fn goaway_last(&self) -> u32 {
        match self.role {
            Role::Server => self.max_client_id,
            Role::Client => 0,
        }
    }

    /// Number of open streams.
    pub fn open_streams(&self) -> usize {
        self.streams.len()
    }

    /// Whether the peer's preface and first SETTINGS frame came (a server
    /// connection: the client spoke HTTP/2), even if it then failed.
    pub fn started(&self) -> bool {
        self.spoke
    }

    /// Server role: the connection ended before the client's preface
    /// came (its first bytes were not one, or a stop or timeout came
    /// first), so nothing was sent (no SETTINGS, no GOAWAY: HAProxy 2.6
    /// sends none before the preface either): it closes at once.
    pub fn closed_unspoken(&self) -> bool {
        self.state == State::Closed && !self.preface_reply.is_empty()
    }

    /// Whether the peer sent SETTINGS_ENABLE_CONNECT_PROTOCOL 1 (RFC 8441):
    /// a server that takes extended CONNECT (`:protocol`). `None` until
    /// its first SETTINGS arrived.
    pub fn peer_ext_connect(&self) -> Option<bool> {
        (self.state != State::FirstSettings && self.state != State::Preface)
            .then_some(self.peer_ext_connect)
    }

    /// Client role: the server's SETTINGS_MAX_CONCURRENT_STREAMS
    /// (`u32::MAX` until it says).
    pub fn peer_max_streams(&self) -> u32 {
        self.peer_max_streams
    }

    /// A GOAWAY was sent or received: no new stream may open.
    pub fn going_away(&self) -> bool {
        self.goaway.is_some() || self.peer_goaway.is_some() || self.state == State::Closed
    }

    /// The highest stream id the client opened.
    pub fn last_stream_id(&self) -> u32 {
        self.max_client_id
    }

    /// The position of stream `id` in `streams` (see `hint`).
    fn index_of(&self, id: u32) -> Option<usize> {
        let h = self.hint.get();
        if self.streams.get(h).is_some_and(|s| s.id == id) {
            return Some(h);
        }
        let i = self.streams.iter().position(|s| s.id == id)?;
        self.hint.set(i);
        Some(i)
    }

    fn has_stream(&self, id: u32) -> bool {
        self.index_of(id).is_some()
    }

    fn stream(&mut self, id: u32) -> Option<&mut Stream> {
        let i = self.index_of(id)?;
        self.streams.get_mut(i)
    }

    fn remove(&mut self, id: u32) {
        if let Some(i) = self.index_of(id) {
            self.streams.swap_remove(i);
            self.remember(id, false);
        }
    }

    fn remember(&mut self, id: u32, reset_by_us: bool) {
        // (Streams mostly end in the order they began: a new highest id
        // needs no search.)
        if id <= self.recent_max {
            if let Some(e) = self.recent.iter_mut().find(|e| e.0 == id) {
                e.1 |= reset_by_us;
                return;
            }
        }
        self.recent_max = self.recent_max.max(id);
        self.recent[self.recent_pos] = (id, reset_by_us);
        self.recent_pos = (self.recent_pos + 1) % self.recent.len();
    }

    fn recently_closed(&self, id: u32) -> Option<bool> {
        self.recent
            .iter()
            .find(|e| e.0 == id && id != 0)
            .map(|e| e.1)
    }

    /// Forgets stream `id` once both sides ended it; after a GOAWAY, the
    /// last stream gone sends the final one.
    fn close_if_done(&mut self, id: u32) {
        if self
            .stream(id)
            .is_some_and(|s| s.local_done && s.remote_done)
        {
            self.remove(id);
        }
        if self.goaway.is_some() && self.streams.is_empty() {
            self.final_goaway();
        }
    }

    fn control_queued(&mut self) -> Result<(), H2Error> {
        self.pending_control += 1;
        if self.pending_control > self.cfg.max_pending_control {
            return Err(H2Error::Connection(ErrorCode::ENHANCE_YOUR_CALM));
        }
        Ok(())
    }

    fn idle_frame(&mut self) -> Result<(), H2Error> {
        self.idle_frames += 1;
        if self.idle_frames > self.cfg.flood_limit {
            return Err(H2Error::Connection(ErrorCode::ENHANCE_YOUR_CALM));
        }
        Ok(())
    }

    /// A reset (sent or received) spends a token; refilled with time.
    fn spend_reset(&mut self, now: u32) -> Result<(), H2Error> {
        match self.reset_refill_at {
            None => self.reset_refill_at = Some(now),
            Some(t) => {
                let elapsed = now.wrapping_sub(t);
                if (elapsed as i32) > 0 {
                    let add = u64::from(elapsed) * u64::from(self.cfg.reset_rate_per_s) / 1000;
                    if add > 0 {
                        self.reset_tokens = (u64::from(self.reset_tokens) + add)
                            .min(u64::from(self.cfg.reset_burst))
                            as u32;
                        self.reset_refill_at = Some(now);
                    }
                }
            }
        }
        if self.reset_tokens == 0 {
            return Err(H2Error::Connection(ErrorCode::ENHANCE_YOUR_CALM));
        }
        self.reset_tokens -= 1;
        Ok(())
    }

    /// Sends RST_STREAM for a stream error and forgets the stream.
    fn stream_error(&mut self, id: u32, code: ErrorCode, now: u32) -> Result<(), H2Error> {
        self.spend_reset(now)?;
        frame::write_rst(&mut self.out, id, code);
        self.control_queued()?;
        self.remove(id);
        self.remember(id, true);
        Ok(())
    }

    fn conn_error(&mut self, code: ErrorCode) -> Event<'static> {
        if self.state != State::Closed {
            let last = self.goaway_last();
            frame::write_goaway(&mut self.out, last, code);
            self.state = State::Closed;
            self.goaway = Some((last, true));
            self.streams.clear();
        }
        Event::Closed { code }
    }

    /// Reads at most one frame from `input`. See the module doc.
    pub fn recv<'a>(&'a mut self, input: &'a [u8], now: u32) -> Progress<'a> {
        match self.recv_inner(input, now) {
            Ok((consumed, ev)) => Progress {
                consumed,
                event: ev.map(|e| e.into_event(self, input)),
            },
            Err((consumed, H2Error::Connection(code))) => Progress {
                consumed,
                event: Some(self.conn_error(code)),
            },
            Err((consumed, H2Error::Stream(id, code))) => {
                let had = self.has_stream(id);
                match self.stream_error(id, code, now) {
                    Ok(()) if had => Progress {
                        consumed,
                        event: Some(Event::Reset {
                            id,
                            code,
                            remote: false,
                        }),
                    },
                    Ok(()) => Progress {
                        consumed,
                        event: None,
                    },
                    Err(H2Error::Connection(c)) | Err(H2Error::Stream(_, c)) => Progress {
                        consumed,
                        event: Some(self.conn_error(c)),
                    },
                }
            }
        }
    }

    #[allow(clippy::type_complexity)]
    fn recv_inner(
        &mut self,
        input: &[u8],
        now: u32,
    ) -> Result<(usize, Option<Ev>), (usize, H2Error)> {
        match self.state {
            State::Closed => return Ok((input.len(), None)),
            State::Preface => {
                let n = input.len().min(frame::PREFACE.len());
                if input[..n] != frame::PREFACE[..n] {
                    // Closed first: no GOAWAY (HAProxy sends none before
                    // the preface); the SETTINGS stay unsent.
                    self.state = State::Closed;
                    return Err((input.len(), H2Error::Connection(ErrorCode::PROTOCOL_ERROR)));
                }
                if n < frame::PREFACE.len() {
                    return Ok((0, None));
                }
                self.state = State::FirstSettings;
                // ebb's SETTINGS first, before anything queued meanwhile.
                let reply = std::mem::take(&mut self.preface_reply);
                self.out.splice(0..0, reply);
                return Ok((n, None));
            }
            _ => {}
        }
        let Some(h) = FrameHeader::parse(input) else {
            return Ok((0, None));
        };
        if let Err(e) = frame::check_size(&h, self.cfg.max_frame_size) {
            return Err((input.len(), e));
        }
        let total = frame::HEADER_LEN + h.len as usize;
        if input.len() < total {
            return Ok((0, None));
        }
        let payload = &input[frame::HEADER_LEN..total];
        let r = self.on_frame(&h, payload, now);
        match r {
            Ok(ev) => Ok((total, ev)),
            Err(e) => Err((total, e)),
        }
    }

    fn on_frame(
        &mut self,
        h: &FrameHeader,
        payload: &[u8],
        now: u32,
    ) -> Result<Option<Ev>, H2Error> {
        if self.state == State::FirstSettings {
            if h.kind != kind::SETTINGS || h.has(flag::ACK) {
                return Err(H2Error::Connection(ErrorCode::PROTOCOL_ERROR));
            }
            self.state = State::Open;
            self.spoke = true;
        }
        // §6.10: while a field block is open only its CONTINUATIONs may come.
        if let Some(p) = self.pending {
            if h.kind != kind::CONTINUATION || h.stream != p.id {
                return Err(H2Error::Connection(ErrorCode::PROTOCOL_ERROR));
            }
        }
        let f = frame::parse(h, payload)?;
        match f {
            Frame::Data {
                stream,
                data,
                flow_len,
                end_stream,
            } => self.on_data(stream, data, flow_len, end_stream, payload, now),
            Frame::Headers {
                stream,
                fragment,
                end_stream,
                end_headers,
                priority,
            } => {
                let self_dep = priority.is_some_and(|p| p.dependency == stream);
                self.on_headers(stream, fragment, end_stream, end_headers, self_dep, now)
            }
            Frame::Continuation {
                stream,
                fragment,
                end_headers,
            } => {
                let Some(mut p) = self.pending else {
                    // §6.10: CONTINUATION without a preceding open block.
                    return Err(H2Error::Connection(ErrorCode::PROTOCOL_ERROR));
                };
                debug_assert_eq!(p.id, stream);
                p.frames += 1;
                if fragment.is_empty() {
                    self.idle_frame()?;
                }
                if p.frames > self.cfg.max_continuations
                    || self.block.len() + fragment.len()
                        > 2 * self.cfg.max_header_list_size as usize
                {
                    return Err(H2Error::Connection(ErrorCode::ENHANCE_YOUR_CALM));
                }
                self.block.extend_from_slice(fragment);
                self.pending = Some(p);
                if end_headers {
                    self.pending = None;
                    return self.end_block(p, now);
                }
                Ok(None)
            }
            Frame::Priority { stream, .. } => {
                // §5.3.2: accepted and ignored. Counts as an idle frame.
                let _ = stream;
                self.idle_frame()?;
                Ok(None)
            }
            Frame::RstStream { stream, code } => {
                if stream > self.max_client_id || stream % 2 == 0 && stream > 0 {
                    // §6.4: RST_STREAM on an idle stream.
                    return Err(H2Error::Connection(ErrorCode::PROTOCOL_ERROR));
                }
                if self.has_stream(stream) {
                    self.spend_reset(now)?;
                    self.remove(stream);
                    return Ok(Some(Ev::Reset(stream, code)));
                }
                self.idle_frame()?;
                Ok(None)
            }
            Frame::Settings { ack, params } => {
                if ack {
                    if !self.settings_acked {
                        self.settings_acked = true;
                    }
                    self.idle_frame()?;
                    return Ok(None);
                }
                let opened = self.apply_settings(params)?;
                frame::write_settings_ack(&mut self.out);
                if self.role == Role::Client && self.grant > 0 {
                    frame::write_window_update(&mut self.out, 0, self.grant);
                    self.recv_window += i64::from(self.grant);
                    self.grant = 0;
                }
                self.control_queued()?;
                self.idle_frame()?;
                // A larger initial window opens every stream's window.
                Ok(opened.then_some(Ev::Window(0)))
            }
            Frame::PushPromise { .. } => {
                // §8.4: a client cannot push; ebb as a client disabled push
                // (§6.6: then PUSH_PROMISE is a PROTOCOL_ERROR).
                Err(H2Error::Connection(ErrorCode::PROTOCOL_ERROR))
            }
            Frame::Ping { ack, data } => {
                self.idle_frame()?;
                if ack {
                    if data == SHUTDOWN_PING {
                        self.final_goaway();
                    }
                    return Ok(None);
                }
                frame::write_ping(&mut self.out, true, data);
                self.control_queued()?;
                Ok(None)
            }
            Frame::GoAway {
                last_stream, code, ..
            } => {
                if self.role == Role::Client {
                    // §6.8: streams above `last_stream` were not processed
                    // and may be retried; no new stream is opened.
                    self.peer_goaway =
                        Some(self.peer_goaway.map_or(last_stream, |l| l.min(last_stream)));
                    let gone: Vec<u32> = self
                        .streams
                        .iter()
                        .map(|s| s.id)
                        .filter(|&id| id > last_stream)
                        .collect();
                    for id in gone {
                        self.remove(id);
                        self.remember(id, true);
                    }
                }
                Ok(Some(Ev::GoAway(last_stream, code)))
            }
            Frame::WindowUpdate { stream, increment } => self.on_window_update(stream, increment),
            Frame::Unknown => {
                self.idle_frame()?;
                Ok(None)
            }
        }
    }

    /// Applies the client's SETTINGS; true when stream windows grew.
    fn apply_settings(&mut self, params: &[u8]) -> Result<bool, H2Error> {
        let mut opened = false;
        for (id, v) in frame::settings_iter(params) {
            match id {
                setting::HEADER_TABLE_SIZE => self.encoder.set_max_table_size(v as usize),
                setting::INITIAL_WINDOW_SIZE => {
                    // §6.9.2: the change applies to every stream's window.
                    let delta = i64::from(v) - i64::from(self.peer_initial_window);
                    self.peer_initial_window = v;
                    opened |= delta > 0 && !self.streams.is_empty();
                    for s in self.streams.iter_mut() {
                        s.send_window += delta;
                        if s.send_window > i64::from(frame::MAX_WINDOW) {
                            return Err(H2Error::Connection(ErrorCode::FLOW_CONTROL_ERROR));
                        }
                    }
                }
                setting::MAX_FRAME_SIZE => self.peer_max_frame = v,
                setting::MAX_CONCURRENT_STREAMS => self.peer_max_streams = v,
                // RFC 8441 §3: 0 or 1, else a connection error.
                setting::ENABLE_CONNECT_PROTOCOL => {
                    if v > 1 {
                        return Err(H2Error::Connection(ErrorCode::PROTOCOL_ERROR));
                    }
                    self.peer_ext_connect = v == 1;
                }
                // §6.5.2: a server must not enable push.
                setting::ENABLE_PUSH if self.role == Role::Client && v != 0 => {
                    return Err(H2Error::Connection(ErrorCode::PROTOCOL_ERROR));
                }
                _ => {}
            }
        }
        Ok(opened)
    }

    fn on_window_update(&mut self, stream: u32, inc: u32) -> Result<Option<Ev>, H2Error> {
        self.idle_frame()?;
        if stream == 0 {
            self.send_window += i64::from(inc);
            if self.send_window > i64::from(frame::MAX_WINDOW) {
                return Err(H2Error::Connection(ErrorCode::FLOW_CONTROL_ERROR));
            }
            return Ok(Some(Ev::Window(0)));
        }
        if stream > self.max_client_id || stream % 2 == 0 {
            // §6.9 / §5.1: WINDOW_UPDATE on an idle stream.
            return Err(H2Error::Connection(ErrorCode::PROTOCOL_ERROR));
        }
        let Some(s) = self.stream(stream) else {
            // Closed: §6.9 says ignore.
            return Ok(None);
        };
        s.send_window += i64::from(inc);
        if s.send_window > i64::from(frame::MAX_WINDOW) {
            return Err(H2Error::Stream(stream, ErrorCode::FLOW_CONTROL_ERROR));
        }
        Ok(Some(Ev::Window(stream)))
    }

    fn on_data(
        &mut self,
        id: u32,
        data: &[u8],
        flow_len: u32,
        end_stream: bool,
        payload: &[u8],
        now: u32,
    ) -> Result<Option<Ev>, H2Error> {
        let _ = now;
        if id > self.max_client_id || id % 2 == 0 {
            // §5.1: DATA on an idle stream.
            return Err(H2Error::Connection(ErrorCode::PROTOCOL_ERROR));
        }
        if self.grant > 0 {
            frame::write_window_update(&mut self.out, 0, self.grant);
            self.recv_window += i64::from(self.grant);
            self.grant = 0;
        }
        // Connection flow control counts every DATA frame (§6.9).
        self.recv_window -= i64::from(flow_len);
        if self.recv_window < 0 {
            return Err(H2Error::Connection(ErrorCode::FLOW_CONTROL_ERROR));
        }
        if data.is_empty() && !end_stream {
            self.idle_frame()?;
        }
        let slack = if self.settings_acked {
            0
        } else {
            i64::from(frame::DEFAULT_WINDOW.saturating_sub(self.cfg.initial_window_size))
        };
        let Some(i) = self.index_of(id) else {
            // Closed stream: give the connection window back at once.
            self.unacked += flow_len;
            self.flush_conn_window();
            if self.recently_closed(id) == Some(true) {
                return Ok(None);
            }
            return Err(H2Error::Stream(id, ErrorCode::STREAM_CLOSED));
        };
        if self.streams[i].remote_done {
            // §5.1 half-closed (remote).
            self.unacked += flow_len;
            self.flush_conn_window();
            return Err(H2Error::Stream(id, ErrorCode::STREAM_CLOSED));
        }
        if !self.streams[i].final_head && self.role == Role::Client {
            // §8.1: DATA before the response head.
            return Err(H2Error::Stream(id, ErrorCode::PROTOCOL_ERROR));
        }
        let pad = flow_len - data.len() as u32;
        let s = &mut self.streams[i];
        s.recv_window -= i64::from(flow_len);
        if s.recv_window + slack < 0 {
            return Err(H2Error::Stream(id, ErrorCode::FLOW_CONTROL_ERROR));
        }
        s.received += data.len() as u64;
        // Padding is released at once (it is nobody's to consume).
        s.unacked += pad;
        let over = s.content_length.is_some_and(|cl| s.received > cl);
        let short = end_stream && s.content_length.is_some_and(|cl| s.received != cl);
        if over || short {
            // §8.1.1: content-length mismatch is malformed.
            self.unacked += flow_len;
            self.flush_conn_window();
            return Err(H2Error::Stream(id, ErrorCode::PROTOCOL_ERROR));
        }
        if end_stream {
            s.remote_done = true;
        }
        self.unacked += pad;
        if !data.is_empty() {
            self.idle_frames = 0;
        }
        if end_stream {
            self.close_if_done(id);
        }
        // `data` follows the pad length byte when the frame is padded.
        let off = usize::from(payload.len() > data.len());
        Ok(Some(Ev::Data {
            id,
            off: frame::HEADER_LEN + off,
            len: data.len(),
            end_stream,
        }))
    }

    fn on_headers(
        &mut self,
        id: u32,
        fragment: &[u8],
        end_stream: bool,
        end_headers: bool,
        self_dep: bool,
        now: u32,
    ) -> Result<Option<Ev>, H2Error> {
        if id % 2 == 0 {
            return Err(H2Error::Connection(ErrorCode::PROTOCOL_ERROR)); // §5.1.1
        }
        let kind = match self.role {
            Role::Server => self.server_block_kind(id, self_dep)?,
            Role::Client => self.client_block_kind(id)?,
        };
        if fragment.len() > 2 * self.cfg.max_header_list_size as usize {
            return Err(H2Error::Connection(ErrorCode::ENHANCE_YOUR_CALM));
        }
        self.block.clear();
        self.block.extend_from_slice(fragment);
        let p = Pending {
            id,
            end_stream,
            frames: 1,
            kind,
        };
        if !end_headers {
            self.pending = Some(p);
            return Ok(None);
        }
        self.end_block(p, now)
    }

    /// What a HEADERS on stream `id` (odd) is to a client role: a response
    /// head or trailers of an open stream, or a late head for a stream ebb
    /// reset (decoded and dropped).
    fn client_block_kind(&mut self, id: u32) -> Result<BlockKind, H2Error> {
        if let Some(s) = self.stream(id) {
            if s.remote_done {
                return Err(H2Error::Connection(ErrorCode::STREAM_CLOSED));
            }
            return Ok(if s.final_head {
                BlockKind::Trailers
            } else {
                BlockKind::Response
            });
        }
        if id > self.max_client_id {
            // §5.1: HEADERS on a stream ebb never opened.
            return Err(H2Error::Connection(ErrorCode::PROTOCOL_ERROR));
        }
        // Ended normally by both sides: §5.1 STREAM_CLOSED. Reset by ebb,
        // or forgotten: the answer may have been in flight (§5.1 closed).
        match self.recently_closed(id) {
            Some(false) => Err(H2Error::Connection(ErrorCode::STREAM_CLOSED)),
            _ => Ok(BlockKind::Ignore),
        }
    }

    /// What a HEADERS on stream `id` (odd) is to a server role.
    fn server_block_kind(&mut self, id: u32, self_dep: bool) -> Result<BlockKind, H2Error> {
        let kind = if let Some(s) = self.stream(id) {
            if s.remote_done {
                // §5.1: HEADERS on half-closed (remote). The block must
                // still be decoded, so make it a connection error.
                return Err(H2Error::Connection(ErrorCode::STREAM_CLOSED));
            }
            BlockKind::Trailers
        } else if id <= self.max_client_id {
            // A stream known closed (§5.1: STREAM_CLOSED), else an id that
            // goes back (§5.1.1: PROTOCOL_ERROR). Either way a connection
            // error: the block cannot be decoded for a stream that is gone.
            return Err(H2Error::Connection(match self.recently_closed(id) {
                Some(_) => ErrorCode::STREAM_CLOSED,
                None => ErrorCode::PROTOCOL_ERROR,
            }));
        } else {
            self.max_client_id = id;
            if self_dep {
                // §5.3.1: a stream depending on itself; decoded, then reset.
                BlockKind::Refuse(ErrorCode::PROTOCOL_ERROR)
            } else if self.goaway.is_some_and(|(last, _)| id > last) {
                // §6.8: past the last-stream-id of a GOAWAY sent.
                BlockKind::Refuse(ErrorCode::REFUSED_STREAM)
            } else if self.streams.len() >= self.cfg.max_concurrent_streams as usize {
                // §5.1.2: REFUSED_STREAM lets the client retry.
                BlockKind::Refuse(ErrorCode::REFUSED_STREAM)
            } else {
                BlockKind::Request
            }
        };
        Ok(kind)
    }

    fn end_block(&mut self, p: Pending, now: u32) -> Result<Option<Ev>, H2Error> {
        let max_list = self.cfg.max_header_list_size as usize;
        let id = p.id;
        match p.kind {
            BlockKind::Ignore => {
                self.decoder
                    .decode(&self.block, max_list, &mut self.trailers)
                    .map_err(|_| H2Error::Connection(ErrorCode::COMPRESSION_ERROR))?;
                Ok(None)
            }
            BlockKind::Response => self.end_response(p),
            BlockKind::Refuse(code) => {
                self.decoder
                    .decode(&self.block, max_list, &mut self.trailers)
                    .map_err(|_| H2Error::Connection(ErrorCode::COMPRESSION_ERROR))?;
                self.stream_error(id, code, now)?;
                Ok(None)
            }
            BlockKind::Trailers => {
                self.decoder
                    .decode(&self.block, max_list, &mut self.trailers)
                    .map_err(|_| H2Error::Connection(ErrorCode::COMPRESSION_ERROR))?;
                if !p.end_stream {
                    // §8.1: a trailer section must end the stream.
                    return Err(H2Error::Stream(id, ErrorCode::PROTOCOL_ERROR));
                }
                if self.trailers.too_large || check_trailers(&self.trailers).is_err() {
                    return Err(H2Error::Stream(id, ErrorCode::PROTOCOL_ERROR));
                }
                let Some(s) = self.stream(id) else {
                    return Ok(None);
                };
                if s.content_length.is_some_and(|cl| s.received != cl) {
                    return Err(H2Error::Stream(id, ErrorCode::PROTOCOL_ERROR));
                }
                s.remote_done = true;
                self.close_if_done(id);
                Ok(Some(Ev::Trailers(id)))
            }
            BlockKind::Request => {
                let gen = self.decoder.table().generation();
                let reuse = self
                    .last_checked
                    .filter(|_| self.last_gen == gen && self.block == self.last_block);
                self.head.repeated = reuse.is_some();
                let (too_large, checked) = match reuse {
                    // The list, its size and the checks' findings as they
                    // were (not too large: that is never kept).
                    Some(checked) => (false, checked),
                    None => {
                        self.last_checked = None;
                        self.decoder
                            .decode(&self.block, max_list, &mut self.head.list)
                            .map_err(|_| H2Error::Connection(ErrorCode::COMPRESSION_ERROR))?;
                        let too_large = self.head.list.too_large;
                        let checked = self.head.check();
                        self.head.wire_len = self.block.len();
                        if !too_large && self.decoder.table().generation() == gen {
                            std::mem::swap(&mut self.last_block, &mut self.block);
                            self.last_gen = gen;
                            self.last_checked = Some(checked);
                        }
                        (too_large, checked)
                    }
                };
                // The stream exists from here (an error resets it).
                self.streams.push(Stream {
                    id,
                    remote_done: p.end_stream,
                    local_done: false,
                    head_sent: false,
                    send_window: i64::from(self.peer_initial_window),
                    recv_window: i64::from(self.cfg.initial_window_size),
                    unacked: 0,
                    final_head: false,
                    head_request: false,
                    content_length: None,
                    received: 0,
                    blocked_since: None,
                });
                self.idle_frames = 0;
                if too_large {
                    // RFC 9113 §10.5.1: the list is over
                    // SETTINGS_MAX_HEADER_LIST_SIZE. ebb refuses it with a
                    // 431 answer (as HTTP/1 does) and ends the stream. The
                    // reset counts against the rapid-reset budget: a
                    // client cannot make ebb answer and reset for free.
                    self.spend_reset(now)?;
                    self.send_response(id, 431, &[], true).ok();
                    let _ = self.reset(id, ErrorCode::NO_ERROR, now);
                    return Ok(None);
                }
                if let Err(m) = checked {
                    if m.answered_400() {
                        // As the 431 above: an answer, then the end of
                        // the stream, paid from the reset budget.
                        self.spend_reset(now)?;
                        self.send_response(id, 400, &[], true).ok();
                        let _ = self.reset(id, ErrorCode::NO_ERROR, now);
                        return Ok(None);
                    }
                    return Err(H2Error::Stream(id, ErrorCode::PROTOCOL_ERROR));
                }
                let cl = self.head.content_length;
                if p.end_stream && cl.is_some_and(|c| c != 0) {
                    return Err(H2Error::Stream(id, ErrorCode::PROTOCOL_ERROR));
                }
                if let Some(s) = self.stream(id) {
                    s.content_length = cl;
                }
                Ok(Some(Ev::Request(id, p.end_stream)))
            }
        }
    }

    /// A response head decoded (client role).
    fn end_response(&mut self, p: Pending) -> Result<Option<Ev>, H2Error> {
        let id = p.id;
        self.decoder
            .decode(
                &self.block,
                self.cfg.max_header_list_size as usize,
                &mut self.response.list,
            )
            .map_err(|_| H2Error::Connection(ErrorCode::COMPRESSION_ERROR))?;
        // An oversized head cannot be passed on: the stream fails.
        if self.response.list.too_large || self.response.check().is_err() {
            return Err(H2Error::Stream(id, ErrorCode::PROTOCOL_ERROR));
        }
        let interim = self.response.interim();
        let status = self.response.status;
        let cl = self.response.content_length;
        let Some(s) = self.stream(id) else {
            return Ok(None);
        };
        if interim {
            // §8.1: an interim head never ends the stream.
            if p.end_stream {
                return Err(H2Error::Stream(id, ErrorCode::PROTOCOL_ERROR));
            }
            return Ok(Some(Ev::Response(id, false)));
        }
        s.final_head = true;
        // No body for HEAD, 204 and 304 (RFC 9110 §6.4.1), whatever
        // content-length says; else DATA must match it.
        s.content_length = if s.head_request || status == 204 || status == 304 {
            None
        } else {
            cl
        };
        if p.end_stream && s.content_length.is_some_and(|c| c != 0) {
            return Err(H2Error::Stream(id, ErrorCode::PROTOCOL_ERROR));
        }
        s.remote_done = p.end_stream;
        self.idle_frames = 0;
        if p.end_stream {
            self.close_if_done(id);
        }
        Ok(Some(Ev::Response(id, p.end_stream)))
    }

    fn flush_conn_window(&mut self) {
        // Return window once half of it is used (fewer WINDOW_UPDATEs).
        if self.unacked >= self.cfg.connection_window.max(frame::DEFAULT_WINDOW) / 2 {
            frame::write_window_update(&mut self.out, 0, self.unacked);
            self.recv_window += i64::from(self.unacked);
            self.unacked = 0;
        }
    }

    // --- commands -------------------------------------------------------------

    /// The caller consumed `n` body bytes of stream `id` (or the stream is
    /// gone): grant them back to the client, the connection's batched per
    /// half window; the stream's at once, even after its END_STREAM, as
    /// HAProxy grants each DATA frame it takes (a client may wait for
    /// that WINDOW_UPDATE before reading the answer: VTest's `rxwinup`,
    /// reg-test http-messaging/h2_to_h1).
    pub fn release(&mut self, id: u32, n: usize) {
        let n = u32::try_from(n).unwrap_or(u32::MAX);
        self.unacked = self.unacked.saturating_add(n);
        self.flush_conn_window();
        let mut wu = None;
        if let Some(s) = self.stream(id) {
            s.unacked = s.unacked.saturating_add(n);
            if s.unacked > 0 {
                wu = Some(s.unacked);
                s.recv_window += i64::from(s.unacked);
                s.unacked = 0;
            }
        }
        if let Some(inc) = wu {
            frame::write_window_update(&mut self.out, id, inc);
        }
    }

    /// Sends the response head of stream `id`: `:status` then `fields`
    /// (connection-specific fields must not be given).
    pub fn send_response(
        &mut self,
        id: u32,
        status: u16,
        fields: &[(&[u8], &[u8])],
        end_stream: bool,
    ) -> Result<(), SendError> {
        self.send_response_with(id, status, end_stream, |h| {
            for (n, v) in fields {
                h.field(n, v);
            }
        })
    }

    /// [`Connection::send_response`] with the fields given by `fill`
    /// (names are lower-cased as HTTP/2 requires): no list to build.
    pub fn send_response_with(
        &mut self,
        id: u32,
        status: u16,
        end_stream: bool,
        fill: impl FnOnce(&mut HeadEncoder<'_>),
    ) -> Result<(), SendError> {
        if self.role != Role::Server {
            return Err(SendError::BadState);
        }
        let s = self.stream(id).ok_or(SendError::NoStream)?;
        if s.head_sent || s.local_done {
            return Err(SendError::BadState);
        }
        s.head_sent = true;
        let st = status_record(status);
        self.write_head(id, end_stream, |h| {
            h.list.extend_from_slice(&st);
            fill(h);
        });
        if end_stream {
            self.end_local(id);
        }
        Ok(())
    }

    /// Sends an interim answer (`100 Continue`, `103 Early Hints`) on
    /// stream `id` before its final one: a HEADERS frame without
    /// END_STREAM (RFC 9113 §8.1 allows any number of them before the
    /// final head; 101 has no place in HTTP/2).
    pub fn send_interim_with(
        &mut self,
        id: u32,
        status: u16,
        fill: impl FnOnce(&mut HeadEncoder<'_>),
    ) -> Result<(), SendError> {
        if self.role != Role::Server || !(100..200).contains(&status) || status == 101 {
            return Err(SendError::BadState);
        }
        let s = self.stream(id).ok_or(SendError::NoStream)?;
        if s.head_sent || s.local_done {
            return Err(SendError::BadState);
        }
        let st = status_record(status);
        self.write_head(id, false, |h| {
            h.list.extend_from_slice(&st);
            fill(h);
        });
        Ok(())
    }

    /// Sends trailers, ending stream `id`.
    pub fn send_trailers(&mut self, id: u32, fields: &[(&[u8], &[u8])]) -> Result<(), SendError> {
        self.send_trailers_with(id, |h| {
            for (n, v) in fields {
                h.field(n, v);
            }
        })
    }

    /// [`Connection::send_trailers`] with the fields given by `fill`.
    pub fn send_trailers_with(
        &mut self,
        id: u32,
        fill: impl FnOnce(&mut HeadEncoder<'_>),
    ) -> Result<(), SendError> {
        let s = self.stream(id).ok_or(SendError::NoStream)?;
        if !s.head_sent || s.local_done {
            return Err(SendError::BadState);
        }
        self.write_head(id, true, fill);
        self.end_local(id);
        Ok(())
    }

    /// Encodes the fields `fill` gives into one field block and queues it
    /// as HEADERS (+ CONTINUATION) on stream `id`; true if `:method` was
    /// `HEAD`.
    fn write_head(
        &mut self,
        id: u32,
        end_stream: bool,
        fill: impl FnOnce(&mut HeadEncoder<'_>),
    ) -> bool {
        let mut block = std::mem::take(&mut self.scratch);
        block.clear();
        self.fields.clear();
        let mut h = HeadEncoder {
            list: &mut self.fields,
            head_request: false,
        };
        fill(&mut h);
        let head_request = h.head_request;
        self.encoder.encode_fields(&self.fields, &mut block);
        frame::write_headers(
            &mut self.out,
            id,
            &block,
            end_stream,
            self.peer_max_frame as usize,
        );
        self.scratch = block;
        head_request
    }

    fn end_local(&mut self, id: u32) {
        if let Some(s) = self.stream(id) {
            s.local_done = true;
        }
        self.close_if_done(id);
    }

    /// Client role: opens a stream with a request head; returns its id.
    /// `fields` are the pseudo-header fields (`:method`, `:scheme`,
    /// `:authority`, `:path`) then the regular ones, without
    /// connection-specific fields (the caller builds them by §8.3.1).
    /// Then `send_data` and `send_trailers` as a server does.
    pub fn send_request(
        &mut self,
        fields: &[(&[u8], &[u8])],
        end_stream: bool,
    ) -> Result<u32, SendError> {
        self.send_request_with(end_stream, |h| {
            for (n, v) in fields {
                h.field(n, v);
            }
        })
    }

    /// [`Connection::send_request`] with the fields given by `fill`.
    pub fn send_request_with(
        &mut self,
        end_stream: bool,
        fill: impl FnOnce(&mut HeadEncoder<'_>),
    ) -> Result<u32, SendError> {
        if self.role != Role::Client || self.state == State::Closed {
            return Err(SendError::BadState);
        }
        if self.goaway.is_some() || self.peer_goaway.is_some() || self.next_id > frame::MAX_WINDOW {
            return Err(SendError::GoingAway);
        }
        if self.streams.len() >= self.peer_max_streams as usize {
            return Err(SendError::Busy);
        }
        let id = self.next_id;
        self.next_id += 2;
        self.max_client_id = id;
        let head_request = self.write_head(id, end_stream, fill);
        self.streams.push(Stream {
            id,
            remote_done: false,
            local_done: end_stream,
            head_sent: true,
            send_window: i64::from(self.peer_initial_window),
            recv_window: i64::from(self.cfg.initial_window_size),
            unacked: 0,
            final_head: false,
            head_request,
            content_length: None,
            received: 0,
            blocked_since: None,
        });
        self.idle_frames = 0;
        Ok(id)
    }

    /// Bytes [`Connection::send_data`] would take on stream `id` now:
    /// the smaller of its windows and the room left under
    /// [`Config::max_output`].
    pub fn send_room(&self, id: u32) -> usize {
        let room = self.cfg.max_output.saturating_sub(self.out.len());
        (self.send_window(id).max(0) as usize).min(room)
    }

    /// Sends as much of `data` on stream `id` as the windows allow, in
    /// DATA frames of at most the client's max frame size; returns the
    /// bytes taken. `end_stream` applies only if all of `data` was taken.
    /// 0 with data left: wait for [`Event::WindowOpened`], or, when the
    /// output holds [`Config::max_output`] bytes, for it to be written.
    pub fn send_data(
        &mut self,
        id: u32,
        data: &[u8],
        end_stream: bool,
        now: u32,
    ) -> Result<usize, SendError> {
        let conn_window = self.send_window;
        let max_frame = self.peer_max_frame as usize;
        let room = self.cfg.max_output.saturating_sub(self.out.len());
        let i = self.index_of(id).ok_or(SendError::NoStream)?;
        let s = &mut self.streams[i];
        if !s.head_sent || s.local_done {
            return Err(SendError::BadState);
        }
        let allowed = conn_window.min(s.send_window).max(0) as usize;
        let n = data.len().min(allowed).min(room);
        let mut sent = 0;
        while sent < n {
            let c = (n - sent).min(max_frame);
            let last = sent + c == data.len();
            frame::write_data(&mut self.out, id, &data[sent..sent + c], last && end_stream);
            sent += c;
        }
        if n == data.len() && end_stream && data.is_empty() {
            frame::write_data(&mut self.out, id, &[], true);
        }
        s.send_window -= n as i64;
        // The wait counts from the last progress: a slow reader that
        // takes some bytes is not a stalled one.
        s.blocked_since = if n == data.len() {
            None
        } else if n > 0 {
            Some(now)
        } else {
            s.blocked_since.or(Some(now))
        };
        self.send_window -= n as i64;
        if n > 0 {
            self.idle_frames = 0;
        }
        if n == data.len() && end_stream {
            self.end_local(id);
        }
        Ok(n)
    }

    /// Resets stream `id` with `code` (e.g. CANCEL when its exchange was
    /// aborted, INTERNAL_ERROR when a server failed mid-body).
    pub fn reset(&mut self, id: u32, code: ErrorCode, now: u32) -> Result<(), SendError> {
        if !self.has_stream(id) {
            return Err(SendError::NoStream);
        }
        let _ = now;
        frame::write_rst(&mut self.out, id, code);
        self.remove(id);
        self.remember(id, true);
        self.close_if_done(id);
        Ok(())
    }

    /// Client role: gives up a request before its HEADERS go out the way
    /// HAProxy 2.6 does when the server cannot take it (an upgrade to a
    /// server without RFC 8441): the next stream id is spent on a
    /// RST_STREAM with `code`. RFC 9113 §6.4 does not allow RST_STREAM on
    /// an idle stream; a strict server may end the connection for it (its
    /// caller stops sharing the connection).
    pub fn reset_unopened(&mut self, code: ErrorCode) {
        if self.role != Role::Client || self.next_id > frame::MAX_WINDOW {
            return;
        }
        let id = self.next_id;
        self.next_id += 2;
        frame::write_rst(&mut self.out, id, code);
    }

    /// Starts a graceful shutdown (§6.8): GOAWAY with the largest id and a
    /// PING; when the PING's ACK comes back (every stream the client had
    /// sent is then known), a second GOAWAY with the real last id. Streams
    /// below it finish; new ones are refused. Then [`Connection::is_done`].
    /// Client role: GOAWAY (last-stream-id 0: no pushed stream) at once;
    /// the streams open finish, no new one is opened.
    pub fn shutdown(&mut self) {
        if self.goaway.is_some() || self.state == State::Closed {
            return;
        }
        if self.state == State::Preface {
            self.state = State::Closed;
            return;
        }
        if self.role == Role::Client {
            frame::write_goaway(&mut self.out, 0, ErrorCode::NO_ERROR);
            self.goaway = Some((0, true));
            return;
        }
        frame::write_goaway(&mut self.out, frame::MAX_WINDOW, ErrorCode::NO_ERROR);
        frame::write_ping(&mut self.out, false, SHUTDOWN_PING);
        self.goaway = Some((frame::MAX_WINDOW, false));
    }

    /// Ends the connection without the PING round trip (an idle
    /// connection past its timeout, RFC 9113 §6.8): GOAWAY with the real
    /// last-stream-id at once; streams still open finish, then
    /// [`Connection::is_done`].
    pub fn goaway_now(&mut self) {
        if self.state == State::Closed || matches!(self.goaway, Some((_, true))) {
            return;
        }
        if self.state == State::Preface {
            self.state = State::Closed;
            return;
        }
        let last = self.goaway_last();
        frame::write_goaway(&mut self.out, last, ErrorCode::NO_ERROR);
        self.goaway = Some((last, true));
    }

    fn final_goaway(&mut self) {
        if let Some((_, false)) = self.goaway {
            let last = self.goaway_last();
            frame::write_goaway(&mut self.out, last, ErrorCode::NO_ERROR);
            self.goaway = Some((last, true));
        }
    }

    /// Timers: resets streams stalled on a zero window for longer than
    /// `stall_timeout_ms`; returns the ids reset (for the caller to drop).
    pub fn tick(&mut self, now: u32, reset: &mut Vec<u32>) {
        let limit = self.cfg.stall_timeout_ms;
        for s in &self.streams {
            if let Some(t) = s.blocked_since {
                if now.wrapping_sub(t) >= limit {
                    reset.push(s.id);
                }
            }
        }
        for &id in reset.iter() {
            let _ = self.reset(id, ErrorCode::CANCEL, now);
        }
    }

    /// Client role, tests: the next request gets stream id `next` (odd).
    #[cfg(test)]
    pub(super) fn skip_ids_for_test(&mut self, next: u32) {
        self.next_id = next;
        self.max_client_id = next - 2;
    }

    /// The smallest of the connection's and stream `id`'s send windows.
    pub fn send_window(&self, id: u32) -> i64 {
        let s = self.index_of(id).map(|i| &self.streams[i]);
        s.map_or(0, |s| s.send_window.min(self.send_window))
    }
}

/// `:status` with room for its three digits, as a record of
/// [`Encoder::push_field`]'s list (name length 7, value length 3).
pub(super) const STATUS_RECORD: [u8; 16] = *b"\x07\x00\x03\x00\x00\x00:status000";

/// `:status` as a whole record of the field list, of a fixed size: one
/// copy rather than [`Encoder::push_field`]'s three (`status` taken into
/// 100..=999).
fn status_record(status: u16) -> [u8; 16] {
    let mut st = STATUS_RECORD;
    let status = status.clamp(100, 999);
    st[13] = b'0' + (status / 100) as u8;
    st[14] = b'0' + (status / 10 % 10) as u8;
    st[15] = b'0' + (status % 10) as u8;
    st
}

/// Encodes the fields of one head being sent (see
/// [`Connection::send_response_with`]).
pub struct HeadEncoder<'e> {
    /// The fields, as [`Encoder::push_field`] lists them: encoded as one
    /// block once all are in ([`Encoder::encode_fields`]).
    list: &'e mut Vec<u8>,
    head_request: bool,
}

impl HeadEncoder<'_> {
    /// Adds a field; an upper-case name is lower-cased (RFC 9113 §8.2.1).
    pub fn field(&mut self, name: &[u8], value: &[u8]) {
        self.head_request |= name == b":method" && value == b"HEAD";
        let at = self.list.len() + 6;
        Encoder::push_field(self.list, name, value);
        if name.iter().any(u8::is_ascii_uppercase) {
            if let Some(n) = self.list.get_mut(at..at + name.len()) {
                n.make_ascii_lowercase();
            }
        }
    }

    /// Adds the fields of `list`, built with [`Encoder::push_field`] and
    /// lower-case names (a response's fields gathered beforehand): one
    /// copy of the list, no field by field.
    pub fn fields_list(&mut self, list: &[u8]) {
        self.list.extend_from_slice(list);
    }
}

/// An event before it borrows anything.
enum Ev {
    Request(u32, bool),
    Response(u32, bool),
    Data {
        id: u32,
        off: usize,
        len: usize,
        end_stream: bool,
    },
    Trailers(u32),
    Reset(u32, ErrorCode),
    Window(u32),
    GoAway(u32, ErrorCode),
}

impl Ev {
    fn into_event<'a>(self, c: &'a Connection, input: &'a [u8]) -> Event<'a> {
        match self {
            Ev::Request(id, end_stream) => Event::Request {
                id,
                head: &c.head,
                end_stream,
            },
            Ev::Response(id, end_stream) => Event::Response {
                id,
                head: &c.response,
                end_stream,
            },
            Ev::Data {
                id,
                off,
                len,
                end_stream,
            } => Event::Data {
                id,
                data: &input[off..off + len],
                end_stream,
            },
            Ev::Trailers(id) => Event::Trailers {
                id,
                fields: &c.trailers,
            },
            Ev::Reset(id, code) => Event::Reset {
                id,
                code,
                remote: true,
            },
            Ev::Window(id) => Event::WindowOpened { id },
            Ev::GoAway(last_stream, code) => Event::GoAway { last_stream, code },
        }
    }
}
