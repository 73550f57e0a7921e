//! The HTTP/2 frame layer (RFC 9113 §4 and §6): one frame header and
//! payload in, a typed [`Frame`] borrowing the payload out, or the error the
//! RFC names for it; and writers for every frame ebb sends.
//!
//! Every frame-level check is here, with the RFC's choice between a
//! connection error and a stream error (§5.4). What needs connection state
//! (stream states, flow-control windows, CONTINUATION sequencing) is in
//! `conn.rs`.

use core::fmt;

/// The length of a frame header (§4.1).
pub const HEADER_LEN: usize = 9;
/// The connection preface a client sends first (§3.4).
pub const PREFACE: &[u8; 24] = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";
/// SETTINGS_MAX_FRAME_SIZE's initial and smallest value (§6.5.2).
pub const MIN_MAX_FRAME_SIZE: u32 = 16_384;
/// SETTINGS_MAX_FRAME_SIZE's largest value (§6.5.2).
pub const MAX_MAX_FRAME_SIZE: u32 = (1 << 24) - 1;
/// The largest flow-control window (§6.9.1).
pub const MAX_WINDOW: u32 = (1 << 31) - 1;
/// The initial flow-control window of the connection and of streams (§6.9.2).
pub const DEFAULT_WINDOW: u32 = 65_535;

/// Frame types (§6; §5.5 says unknown types are ignored).
pub mod kind {
    /// DATA
    pub const DATA: u8 = 0x0;
    /// HEADERS
    pub const HEADERS: u8 = 0x1;
    /// PRIORITY (deprecated by RFC 9113 §5.3.2, still parsed)
    pub const PRIORITY: u8 = 0x2;
    /// RST_STREAM
    pub const RST_STREAM: u8 = 0x3;
    /// SETTINGS
    pub const SETTINGS: u8 = 0x4;
    /// PUSH_PROMISE
    pub const PUSH_PROMISE: u8 = 0x5;
    /// PING
    pub const PING: u8 = 0x6;
    /// GOAWAY
    pub const GOAWAY: u8 = 0x7;
    /// WINDOW_UPDATE
    pub const WINDOW_UPDATE: u8 = 0x8;
    /// CONTINUATION
    pub const CONTINUATION: u8 = 0x9;
}

/// Frame flags (§6).
pub mod flag {
    /// DATA, HEADERS: the last frame the sender sends on the stream.
    pub const END_STREAM: u8 = 0x1;
    /// SETTINGS, PING: an acknowledgement.
    pub const ACK: u8 = 0x1;
    /// HEADERS, PUSH_PROMISE, CONTINUATION: the field block ends here.
    pub const END_HEADERS: u8 = 0x4;
    /// DATA, HEADERS, PUSH_PROMISE: a pad length byte and padding.
    pub const PADDED: u8 = 0x8;
    /// HEADERS: a priority block (5 bytes) before the fragment.
    pub const PRIORITY: u8 = 0x20;
}

/// SETTINGS identifiers (§6.5.2).
pub mod setting {
    /// SETTINGS_HEADER_TABLE_SIZE
    pub const HEADER_TABLE_SIZE: u16 = 0x1;
    /// SETTINGS_ENABLE_PUSH
    pub const ENABLE_PUSH: u16 = 0x2;
    /// SETTINGS_MAX_CONCURRENT_STREAMS
    pub const MAX_CONCURRENT_STREAMS: u16 = 0x3;
    /// SETTINGS_INITIAL_WINDOW_SIZE
    pub const INITIAL_WINDOW_SIZE: u16 = 0x4;
    /// SETTINGS_MAX_FRAME_SIZE
    pub const MAX_FRAME_SIZE: u16 = 0x5;
    /// SETTINGS_MAX_HEADER_LIST_SIZE
    pub const MAX_HEADER_LIST_SIZE: u16 = 0x6;
    /// SETTINGS_ENABLE_CONNECT_PROTOCOL (RFC 8441 §3)
    pub const ENABLE_CONNECT_PROTOCOL: u16 = 0x8;
}

/// Error codes (§7).
#[derive(Copy, Clone, PartialEq, Eq, Hash)]
pub struct ErrorCode(pub u32);

impl ErrorCode {
    /// Graceful shutdown or no error.
    pub const NO_ERROR: ErrorCode = ErrorCode(0x0);
    /// An unspecific protocol error.
    pub const PROTOCOL_ERROR: ErrorCode = ErrorCode(0x1);
    /// An unexpected internal error.
    pub const INTERNAL_ERROR: ErrorCode = ErrorCode(0x2);
    /// The peer violated flow control.
    pub const FLOW_CONTROL_ERROR: ErrorCode = ErrorCode(0x3);
    /// SETTINGS not acknowledged in time.
    pub const SETTINGS_TIMEOUT: ErrorCode = ErrorCode(0x4);
    /// A frame on a half-closed or closed stream.
    pub const STREAM_CLOSED: ErrorCode = ErrorCode(0x5);
    /// A frame of invalid size.
    pub const FRAME_SIZE_ERROR: ErrorCode = ErrorCode(0x6);
    /// The stream was refused before any processing.
    pub const REFUSED_STREAM: ErrorCode = ErrorCode(0x7);
    /// The stream is no longer needed.
    pub const CANCEL: ErrorCode = ErrorCode(0x8);
    /// The field-compression context cannot be maintained.
    pub const COMPRESSION_ERROR: ErrorCode = ErrorCode(0x9);
    /// A CONNECT tunnel failed.
    pub const CONNECT_ERROR: ErrorCode = ErrorCode(0xa);
    /// The peer behaves in a way that may generate excessive load.
    pub const ENHANCE_YOUR_CALM: ErrorCode = ErrorCode(0xb);
    /// The transport does not meet security requirements.
    pub const INADEQUATE_SECURITY: ErrorCode = ErrorCode(0xc);
    /// Use HTTP/1.1 for this request.
    pub const HTTP_1_1_REQUIRED: ErrorCode = ErrorCode(0xd);

    /// The RFC's name (unknown codes: "UNKNOWN").
    pub const fn name(self) -> &'static str {
        match self.0 {
            0x0 => "NO_ERROR",
            0x1 => "PROTOCOL_ERROR",
            0x2 => "INTERNAL_ERROR",
            0x3 => "FLOW_CONTROL_ERROR",
            0x4 => "SETTINGS_TIMEOUT",
            0x5 => "STREAM_CLOSED",
            0x6 => "FRAME_SIZE_ERROR",
            0x7 => "REFUSED_STREAM",
            0x8 => "CANCEL",
            0x9 => "COMPRESSION_ERROR",
            0xa => "CONNECT_ERROR",
            0xb => "ENHANCE_YOUR_CALM",
            0xc => "INADEQUATE_SECURITY",
            0xd => "HTTP_1_1_REQUIRED",
            _ => "UNKNOWN",
        }
    }
}

impl fmt::Debug for ErrorCode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}(0x{:x})", self.name(), self.0)
    }
}

/// An error as RFC 9113 §5.4 classes it.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum H2Error {
    /// Ends the connection with GOAWAY (§5.4.1).
    Connection(ErrorCode),
    /// Ends one stream with RST_STREAM (§5.4.2).
    Stream(u32, ErrorCode),
}

/// A frame header (§4.1).
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub struct FrameHeader {
    /// Payload length.
    pub len: u32,
    /// Frame type.
    pub kind: u8,
    /// Flags.
    pub flags: u8,
    /// Stream identifier (the reserved bit cleared, §4.1).
    pub stream: u32,
}

impl FrameHeader {
    /// Reads a header from the first 9 bytes of `b`, if there are 9.
    pub fn parse(b: &[u8]) -> Option<FrameHeader> {
        let h = b.get(..HEADER_LEN)?;
        Some(FrameHeader {
            len: u32::from_be_bytes([0, h[0], h[1], h[2]]),
            kind: h[3],
            flags: h[4],
            stream: u32::from_be_bytes([h[5], h[6], h[7], h[8]]) & MAX_WINDOW,
        })
    }

    /// Whether flag `f` is set.
    pub fn has(&self, f: u8) -> bool {
        self.flags & f != 0
    }
}

/// Priority information of HEADERS or PRIORITY (§5.3.2: parsed, then
/// ignored, as RFC 9113 allows).
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub struct Priority {
    /// The stream depended on.
    pub dependency: u32,
    /// Whether the dependency is exclusive.
    pub exclusive: bool,
    /// Weight minus one.
    pub weight: u8,
}

/// A parsed frame, borrowing its payload.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum Frame<'a> {
    /// DATA (§6.1): `data` without padding; `flow_len` is what counts
    /// against flow control (the whole payload, padding included).
    Data {
        /// Stream.
        stream: u32,
        /// Payload without padding.
        data: &'a [u8],
        /// The whole payload length (flow control counts it, §6.9.1).
        flow_len: u32,
        /// END_STREAM.
        end_stream: bool,
    },
    /// HEADERS (§6.2): the field block fragment without padding/priority.
    Headers {
        /// Stream.
        stream: u32,
        /// Field block fragment.
        fragment: &'a [u8],
        /// END_STREAM.
        end_stream: bool,
        /// END_HEADERS.
        end_headers: bool,
        /// The PRIORITY flag's block, if set.
        priority: Option<Priority>,
    },
    /// PRIORITY (§6.3).
    Priority {
        /// Stream.
        stream: u32,
        /// Its priority.
        priority: Priority,
    },
    /// RST_STREAM (§6.4).
    RstStream {
        /// Stream.
        stream: u32,
        /// Error code.
        code: ErrorCode,
    },
    /// SETTINGS (§6.5); `params` holds 6-byte entries, already checked.
    Settings {
        /// ACK flag.
        ack: bool,
        /// The parameters (use [`settings_iter`]).
        params: &'a [u8],
    },
    /// PUSH_PROMISE (§6.6): a client must not send one (§8.4).
    PushPromise {
        /// Stream.
        stream: u32,
    },
    /// PING (§6.7).
    Ping {
        /// ACK flag.
        ack: bool,
        /// Opaque data.
        data: [u8; 8],
    },
    /// GOAWAY (§6.8).
    GoAway {
        /// Last stream the sender may have processed.
        last_stream: u32,
        /// Error code.
        code: ErrorCode,
        /// Debug data.
        debug: &'a [u8],
    },
    /// WINDOW_UPDATE (§6.9).
    WindowUpdate {
        /// Stream (0: connection).
        stream: u32,
        /// Increment, 1..=2^31-1.
        increment: u32,
    },
    /// CONTINUATION (§6.10).
    Continuation {
        /// Stream.
        stream: u32,
        /// Field block fragment.
        fragment: &'a [u8],
        /// END_HEADERS.
        end_headers: bool,
    },
    /// A frame of unknown type: ignored (§5.5).
    Unknown,
}

/// (identifier, value) pairs of a checked SETTINGS payload.
pub fn settings_iter(params: &[u8]) -> impl Iterator<Item = (u16, u32)> + '_ {
    params.chunks_exact(6).map(|c| {
        (
            u16::from_be_bytes([c[0], c[1]]),
            u32::from_be_bytes([c[2], c[3], c[4], c[5]]),
        )
    })
}

fn conn(code: ErrorCode) -> H2Error {
    H2Error::Connection(code)
}

/// Removes padding (§6.1): the pad length byte and that many bytes at the
/// end. Padding as long as the payload or longer is PROTOCOL_ERROR.
fn unpad<'a>(h: &FrameHeader, p: &'a [u8]) -> Result<(&'a [u8], usize), H2Error> {
    if !h.has(flag::PADDED) {
        return Ok((p, 0));
    }
    let (&pad, rest) = p.split_first().ok_or(conn(ErrorCode::FRAME_SIZE_ERROR))?;
    let pad = usize::from(pad);
    if pad > rest.len() {
        return Err(conn(ErrorCode::PROTOCOL_ERROR));
    }
    Ok((&rest[..rest.len() - pad], 1))
}

fn priority(b: &[u8]) -> Priority {
    let d = u32::from_be_bytes([b[0], b[1], b[2], b[3]]);
    Priority {
        dependency: d & MAX_WINDOW,
        exclusive: d & !MAX_WINDOW != 0,
        weight: b[4],
    }
}

/// Parses a frame whose header is `h` and payload `p` (`p.len() ==
/// h.len`). The caller has checked `h.len` against its
/// SETTINGS_MAX_FRAME_SIZE (see [`check_size`]).
pub fn parse<'a>(h: &FrameHeader, p: &'a [u8]) -> Result<Frame<'a>, H2Error> {
    let sid = h.stream;
    match h.kind {
        kind::DATA => {
            if sid == 0 {
                return Err(conn(ErrorCode::PROTOCOL_ERROR)); // §6.1
            }
            let (data, _) = unpad(h, p)?;
            Ok(Frame::Data {
                stream: sid,
                data,
                flow_len: h.len,
                end_stream: h.has(flag::END_STREAM),
            })
        }
        kind::HEADERS => {
            if sid == 0 {
                return Err(conn(ErrorCode::PROTOCOL_ERROR)); // §6.2
            }
            let (mut frag, _) = unpad(h, p)?;
            let mut prio = None;
            if h.has(flag::PRIORITY) {
                if frag.len() < 5 {
                    return Err(conn(ErrorCode::FRAME_SIZE_ERROR));
                }
                // A dependency on itself (§5.3.1) is a stream error the
                // connection raises after decoding the block (HPACK state).
                prio = Some(priority(frag));
                frag = &frag[5..];
            }
            Ok(Frame::Headers {
                stream: sid,
                fragment: frag,
                end_stream: h.has(flag::END_STREAM),
                end_headers: h.has(flag::END_HEADERS),
                priority: prio,
            })
        }
        kind::PRIORITY => {
            if sid == 0 {
                return Err(conn(ErrorCode::PROTOCOL_ERROR)); // §6.3
            }
            if p.len() != 5 {
                return Err(H2Error::Stream(sid, ErrorCode::FRAME_SIZE_ERROR));
            }
            let pr = priority(p);
            if pr.dependency == sid {
                return Err(H2Error::Stream(sid, ErrorCode::PROTOCOL_ERROR));
            }
            Ok(Frame::Priority {
                stream: sid,
                priority: pr,
            })
        }
        kind::RST_STREAM => {
            if sid == 0 {
                return Err(conn(ErrorCode::PROTOCOL_ERROR)); // §6.4
            }
            if p.len() != 4 {
                return Err(conn(ErrorCode::FRAME_SIZE_ERROR));
            }
            Ok(Frame::RstStream {
                stream: sid,
                code: ErrorCode(u32::from_be_bytes([p[0], p[1], p[2], p[3]])),
            })
        }
        kind::SETTINGS => {
            if sid != 0 {
                return Err(conn(ErrorCode::PROTOCOL_ERROR)); // §6.5
            }
            let ack = h.has(flag::ACK);
            if ack && !p.is_empty() {
                return Err(conn(ErrorCode::FRAME_SIZE_ERROR));
            }
            if p.len() % 6 != 0 {
                return Err(conn(ErrorCode::FRAME_SIZE_ERROR));
            }
            for (id, v) in settings_iter(p) {
                match id {
                    setting::ENABLE_PUSH if v > 1 => {
                        return Err(conn(ErrorCode::PROTOCOL_ERROR));
                    }
                    setting::INITIAL_WINDOW_SIZE if v > MAX_WINDOW => {
                        return Err(conn(ErrorCode::FLOW_CONTROL_ERROR));
                    }
                    setting::MAX_FRAME_SIZE
                        if !(MIN_MAX_FRAME_SIZE..=MAX_MAX_FRAME_SIZE).contains(&v) =>
                    {
                        return Err(conn(ErrorCode::PROTOCOL_ERROR));
                    }
                    _ => {}
                }
            }
            Ok(Frame::Settings { ack, params: p })
        }
        kind::PUSH_PROMISE => {
            if sid == 0 {
                return Err(conn(ErrorCode::PROTOCOL_ERROR));
            }
            Ok(Frame::PushPromise { stream: sid })
        }
        kind::PING => {
            if sid != 0 {
                return Err(conn(ErrorCode::PROTOCOL_ERROR)); // §6.7
            }
            let data: [u8; 8] = p
                .try_into()
                .map_err(|_| conn(ErrorCode::FRAME_SIZE_ERROR))?;
            Ok(Frame::Ping {
                ack: h.has(flag::ACK),
                data,
            })
        }
        kind::GOAWAY => {
            if sid != 0 {
                return Err(conn(ErrorCode::PROTOCOL_ERROR)); // §6.8
            }
            if p.len() < 8 {
                return Err(conn(ErrorCode::FRAME_SIZE_ERROR));
            }
            Ok(Frame::GoAway {
                last_stream: u32::from_be_bytes([p[0], p[1], p[2], p[3]]) & MAX_WINDOW,
                code: ErrorCode(u32::from_be_bytes([p[4], p[5], p[6], p[7]])),
                debug: &p[8..],
            })
        }
        kind::WINDOW_UPDATE => {
            if p.len() != 4 {
                return Err(conn(ErrorCode::FRAME_SIZE_ERROR)); // §6.9
            }
            let inc = u32::from_be_bytes([p[0], p[1], p[2], p[3]]) & MAX_WINDOW;
            if inc == 0 {
                return Err(if sid == 0 {
                    conn(ErrorCode::PROTOCOL_ERROR)
                } else {
                    H2Error::Stream(sid, ErrorCode::PROTOCOL_ERROR)
                });
            }
            Ok(Frame::WindowUpdate {
                stream: sid,
                increment: inc,
            })
        }
        kind::CONTINUATION => {
            if sid == 0 {
                return Err(conn(ErrorCode::PROTOCOL_ERROR)); // §6.10
            }
            Ok(Frame::Continuation {
                stream: sid,
                fragment: p,
                end_headers: h.has(flag::END_HEADERS),
            })
        }
        _ => Ok(Frame::Unknown),
    }
}

/// §4.2: a frame longer than ebb's SETTINGS_MAX_FRAME_SIZE is
/// FRAME_SIZE_ERROR. ebb makes it a connection error for every frame type
/// (the RFC requires that for frames that carry a field block or change
/// connection state, and allows it for the rest): the payload is not read.
pub fn check_size(h: &FrameHeader, max_frame_size: u32) -> Result<(), H2Error> {
    if h.len > max_frame_size {
        return Err(conn(ErrorCode::FRAME_SIZE_ERROR));
    }
    Ok(())
}

// --- writers -----------------------------------------------------------------

/// Appends a frame header.
pub fn write_header(out: &mut Vec<u8>, len: usize, kind: u8, flags: u8, stream: u32) {
    let l = (len as u32).to_be_bytes();
    out.extend_from_slice(&[l[1], l[2], l[3], kind, flags]);
    out.extend_from_slice(&(stream & MAX_WINDOW).to_be_bytes());
}

/// Appends a SETTINGS frame with `params`.
pub fn write_settings(out: &mut Vec<u8>, params: &[(u16, u32)]) {
    write_header(out, params.len() * 6, kind::SETTINGS, 0, 0);
    for &(id, v) in params {
        out.extend_from_slice(&id.to_be_bytes());
        out.extend_from_slice(&v.to_be_bytes());
    }
}

/// Appends a SETTINGS acknowledgement.
pub fn write_settings_ack(out: &mut Vec<u8>) {
    write_header(out, 0, kind::SETTINGS, flag::ACK, 0);
}

/// Appends a PING (or its ACK).
pub fn write_ping(out: &mut Vec<u8>, ack: bool, data: [u8; 8]) {
    write_header(out, 8, kind::PING, if ack { flag::ACK } else { 0 }, 0);
    out.extend_from_slice(&data);
}

/// Appends a GOAWAY.
pub fn write_goaway(out: &mut Vec<u8>, last_stream: u32, code: ErrorCode) {
    write_header(out, 8, kind::GOAWAY, 0, 0);
    out.extend_from_slice(&(last_stream & MAX_WINDOW).to_be_bytes());
    out.extend_from_slice(&code.0.to_be_bytes());
}

/// Appends a RST_STREAM.
pub fn write_rst(out: &mut Vec<u8>, stream: u32, code: ErrorCode) {
    write_header(out, 4, kind::RST_STREAM, 0, stream);
    out.extend_from_slice(&code.0.to_be_bytes());
}

/// Appends a WINDOW_UPDATE.
pub fn write_window_update(out: &mut Vec<u8>, stream: u32, increment: u32) {
    write_header(out, 4, kind::WINDOW_UPDATE, 0, stream);
    out.extend_from_slice(&(increment & MAX_WINDOW).to_be_bytes());
}

/// Appends one DATA frame (`data.len()` at most the peer's max frame size).
pub fn write_data(out: &mut Vec<u8>, stream: u32, data: &[u8], end_stream: bool) {
    let f = if end_stream { flag::END_STREAM } else { 0 };
    write_header(out, data.len(), kind::DATA, f, stream);
    out.extend_from_slice(data);
}

/// Appends HEADERS and as many CONTINUATION frames as `block` needs at
/// `max_frame` bytes each.
pub fn write_headers(
    out: &mut Vec<u8>,
    stream: u32,
    block: &[u8],
    end_stream: bool,
    max_frame: usize,
) {
    let max_frame = max_frame.max(1);
    let mut chunks = block.chunks(max_frame);
    let first = chunks.next().unwrap_or(&[]);
    let last = block.len() <= max_frame;
    let mut f = if end_stream { flag::END_STREAM } else { 0 };
    if last {
        f |= flag::END_HEADERS;
    }
    write_header(out, first.len(), kind::HEADERS, f, stream);
    out.extend_from_slice(first);
    let mut rest = chunks.peekable();
    while let Some(c) = rest.next() {
        let f = if rest.peek().is_none() {
            flag::END_HEADERS
        } else {
            0
        };
        write_header(out, c.len(), kind::CONTINUATION, f, stream);
        out.extend_from_slice(c);
    }
}
