//! FastCGI 1.0 records, socket-free: the writer of what a client sends
//! (BEGIN_REQUEST, PARAMS, STDIN, ABORT_REQUEST, GET_VALUES), the
//! name-value pairs, and [`Demux`], the reader of what an application
//! sends back, which takes bytes as they come and yields one
//! [`Event`] at a time.
//!
//! A record (FastCGI 1.0 §3.3) is an 8-byte header (version, type,
//! request id, content length, padding length, a reserved byte), its
//! content (at most 65535 bytes) and its padding. The stream records
//! (PARAMS, STDIN, STDOUT, STDERR) carry a byte stream in any number of
//! records, an empty one ending it. Name-value pairs (§3.4) give each
//! length in one byte below 128, else in four with the high bit set.
//!
//! The reader hands STDOUT and STDERR content out as it arrives (a
//! record's content need not be whole), so a connection never holds more
//! than its read buffer of an answer. END_REQUEST and GET_VALUES_RESULT
//! are taken whole (the first has 8 bytes, the second is bounded by
//! [`VALUES_MAX`]). Records of other types, and the padding, are
//! skipped as HAProxy 2.6 skips them; a record that is not version 1 is
//! an error of the connection (HAProxy does not look at the version:
//! it reads on and waits, which for a server that does not speak
//! FastCGI ends in a timeout, where ebb answers at once).

/// FastCGI 1.0 §8: record types.
pub(crate) const BEGIN_REQUEST: u8 = 1;
pub(crate) const ABORT_REQUEST: u8 = 2;
pub(crate) const END_REQUEST: u8 = 3;
pub(crate) const PARAMS: u8 = 4;
pub(crate) const STDIN: u8 = 5;
pub(crate) const STDOUT: u8 = 6;
pub(crate) const STDERR: u8 = 7;
pub(crate) const GET_VALUES: u8 = 9;
pub(crate) const GET_VALUES_RESULT: u8 = 10;
/// The application's answer to a management record it does not know
/// (FCGI_UNKNOWN_TYPE, §4.2): its answer to GET_VALUES when it has none.
pub(crate) const UNKNOWN_TYPE: u8 = 11;

/// The role of every request ebb sends (FCGI_RESPONDER).
const RESPONDER: u16 = 1;
/// BEGIN_REQUEST's flag: the application keeps the connection open after
/// the request (FCGI_KEEP_CONN).
const KEEP_CONN: u8 = 1;

/// END_REQUEST protocol statuses (§5.5).
pub(crate) const REQUEST_COMPLETE: u8 = 0;
pub(crate) const CANT_MPX_CONN: u8 = 1;
pub(crate) const OVERLOADED: u8 = 2;
pub(crate) const UNKNOWN_ROLE: u8 = 3;

/// Most content one record carries.
pub(crate) const MAX_CONTENT: usize = 0xffff;

/// Largest GET_VALUES_RESULT taken (HAProxy's bound is its buffer).
pub(crate) const VALUES_MAX: usize = 16 * 1024;

/// Header size.
pub(crate) const HEADER: usize = 8;

/// Appends a record header.
pub(crate) fn put_header(out: &mut Vec<u8>, rtype: u8, id: u16, len: u16, padding: u8) {
    let [i0, i1] = id.to_be_bytes();
    let [l0, l1] = len.to_be_bytes();
    out.extend_from_slice(&[1, rtype, i0, i1, l0, l1, padding, 0]);
}

/// Appends a BEGIN_REQUEST record for the responder role.
pub(crate) fn put_begin_request(out: &mut Vec<u8>, id: u16, keep_conn: bool) {
    put_header(out, BEGIN_REQUEST, id, 8, 0);
    let [r0, r1] = RESPONDER.to_be_bytes();
    let flags = if keep_conn { KEEP_CONN } else { 0 };
    out.extend_from_slice(&[r0, r1, flags, 0, 0, 0, 0, 0]);
}

/// Appends an empty record (the end of a stream, ABORT_REQUEST).
pub(crate) fn put_empty(out: &mut Vec<u8>, rtype: u8, id: u16) {
    put_header(out, rtype, id, 0, 0);
}

/// Appends `data` as records of type `rtype`, each at most
/// [`MAX_CONTENT`] bytes, no padding (as HAProxy sends them). Nothing
/// for empty data: the empty record ends a stream ([`put_empty`]).
pub(crate) fn put_stream(out: &mut Vec<u8>, rtype: u8, id: u16, data: &[u8]) {
    for part in data.chunks(MAX_CONTENT) {
        put_header(out, rtype, id, part.len() as u16, 0);
        out.extend_from_slice(part);
    }
}

/// The encoded size of a name-value pair.
pub(crate) fn pair_len(name: &[u8], value: &[u8]) -> usize {
    let l = |n: usize| if n < 128 { 1 } else { 4 };
    l(name.len()) + l(value.len()) + name.len() + value.len()
}

fn put_len(out: &mut Vec<u8>, n: usize) {
    if n < 128 {
        out.push(n as u8);
    } else {
        let n = (n as u32).min(0x7fff_ffff) | 0x8000_0000;
        out.extend_from_slice(&n.to_be_bytes());
    }
}

/// Appends a name-value pair (§3.4). Lengths above 2^31 - 1 cannot be
/// said: callers keep far below (a pair is bounded by a buffer).
pub(crate) fn put_pair(out: &mut Vec<u8>, name: &[u8], value: &[u8]) {
    put_len(out, name.len());
    put_len(out, value.len());
    out.extend_from_slice(name);
    out.extend_from_slice(value);
}

/// Appends the name-value pairs `pairs` as one stream of PARAMS records
/// ending with the empty one. A pair never spans two records (HAProxy's
/// rule; applications such as php-fpm read pairs record by record), so
/// a pair larger than a record is refused (`Err`).
pub(crate) fn put_params<'a>(
    out: &mut Vec<u8>,
    id: u16,
    pairs: impl IntoIterator<Item = (&'a [u8], &'a [u8])>,
) -> Result<(), ()> {
    let mut rec = Vec::new();
    for (n, v) in pairs {
        let len = pair_len(n, v);
        if len > MAX_CONTENT {
            return Err(());
        }
        if rec.len() + len > MAX_CONTENT {
            put_stream(out, PARAMS, id, &rec);
            rec.clear();
        }
        put_pair(&mut rec, n, v);
    }
    put_stream(out, PARAMS, id, &rec);
    put_empty(out, PARAMS, id);
    Ok(())
}

/// Appends a GET_VALUES record asking for FCGI_MAX_REQS and
/// FCGI_MPXS_CONNS (HAProxy does not ask for FCGI_MAX_CONNS, which it
/// has no use for).
pub(crate) fn put_get_values(out: &mut Vec<u8>) {
    let mut c = Vec::new();
    put_pair(&mut c, b"FCGI_MAX_REQS", b"");
    put_pair(&mut c, b"FCGI_MPXS_CONNS", b"");
    put_header(out, GET_VALUES, 0, c.len() as u16, 0);
    out.extend_from_slice(&c);
}

/// Reads one name-value pair at the start of `buf`: the name, the value
/// and the bytes used; `None` when `buf` does not hold a whole one.
pub(crate) fn get_pair(buf: &[u8]) -> Option<(&[u8], &[u8], usize)> {
    fn len(buf: &[u8], at: &mut usize) -> Option<usize> {
        let b0 = *buf.get(*at)?;
        if b0 < 128 {
            *at += 1;
            return Some(b0 as usize);
        }
        let b = buf.get(*at..*at + 4)?;
        *at += 4;
        Some((u32::from_be_bytes([b0 & 0x7f, b[1], b[2], b[3]])) as usize)
    }
    let mut at = 0;
    let n = len(buf, &mut at)?;
    let v = len(buf, &mut at)?;
    let name = buf.get(at..at.checked_add(n)?)?;
    let value = buf.get(at + n..(at + n).checked_add(v)?)?;
    Some((name, value, at + n + v))
}

/// What GET_VALUES_RESULT said: each `None` when the application did not
/// answer it.
#[derive(Debug, Default, PartialEq, Eq, Clone, Copy)]
pub(crate) struct Values {
    pub(crate) max_reqs: Option<u32>,
    pub(crate) mpxs_conns: Option<bool>,
}

/// Reads a GET_VALUES_RESULT's content as HAProxy 2.6 does: names
/// compared without case, FCGI_MPXS_CONNS "1" or anything else for no,
/// FCGI_MAX_REQS the number its leading digits make, others ignored.
/// `None` when the pairs do not fill the content exactly.
pub(crate) fn parse_values(content: &[u8]) -> Option<Values> {
    let mut v = Values::default();
    let mut rest = content;
    while !rest.is_empty() {
        let (n, val, used) = get_pair(rest)?;
        if n.eq_ignore_ascii_case(b"FCGI_MPXS_CONNS") {
            v.mpxs_conns = Some(val == b"1");
        } else if n.eq_ignore_ascii_case(b"FCGI_MAX_REQS") {
            v.max_reqs = Some(leading_u32(val));
        }
        rest = &rest[used..];
    }
    Some(v)
}

/// The number a value's leading digits make (0 without any), saturated:
/// HAProxy's `strl2ui`.
pub(crate) fn leading_u32(v: &[u8]) -> u32 {
    v.iter()
        .take_while(|b| b.is_ascii_digit())
        .fold(0u32, |n, &d| {
            n.saturating_mul(10).saturating_add(u32::from(d - b'0'))
        })
}

/// One thing the application said, as [`Demux::feed`] reads it.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Event<'a> {
    /// Answer bytes of request `id` (part of a STDOUT record).
    Stdout(u16, &'a [u8]),
    /// The empty STDOUT record: the answer of `id` is complete.
    StdoutEnd(u16),
    /// Bytes the application wrote to its error stream for `id` (a whole
    /// record's content, or the part of it that fits [`Demux`]'s bound).
    Stderr(u16, Vec<u8>),
    /// The request `id` ended: its application status and protocol status.
    End {
        id: u16,
        app_status: u32,
        protocol_status: u8,
    },
    /// An END_REQUEST whose content is shorter than 8 bytes: the request
    /// `id` fails (HAProxy's stream error).
    BadEnd(u16),
    /// The answer to GET_VALUES (`None`: malformed pairs, which close
    /// the connection, as HAProxy).
    Values(Option<Values>),
    /// FCGI_UNKNOWN_TYPE: the application did not know a management
    /// record (GET_VALUES), which HAProxy takes for an answer to it.
    UnknownType,
    /// A record that is not FastCGI 1.0: the connection cannot go on.
    Broken,
}

/// Where [`Demux`] is in the current record.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum At {
    Header,
    /// In the content: its type and id, the bytes left of it.
    Content {
        rtype: u8,
        id: u16,
        left: usize,
    },
    /// In the padding: bytes left.
    Padding(usize),
    /// After a broken record: everything is dropped.
    Dead,
}

/// The reader of an application's records.
#[derive(Debug)]
pub(crate) struct Demux {
    at: At,
    padding: usize,
    /// A record taken whole (END_REQUEST, GET_VALUES_RESULT) or a STDERR
    /// record gathered for one log line, as far as it came.
    whole: Vec<u8>,
    /// The whole record's length (bounded; the rest is skipped).
    whole_len: usize,
    /// Bytes of a STDERR record gathered at most (HAProxy logs a record's
    /// content in pieces of its trash buffer's size).
    stderr_max: usize,
}

impl Default for Demux {
    fn default() -> Demux {
        Demux::new(16 * 1024)
    }
}

impl Demux {
    /// A reader that gathers STDERR content in pieces of at most
    /// `stderr_max` bytes (one log line each).
    pub(crate) fn new(stderr_max: usize) -> Demux {
        Demux {
            at: At::Header,
            padding: 0,
            whole: Vec::new(),
            whole_len: 0,
            stderr_max: stderr_max.max(1),
        }
    }

    /// Whether the reader stopped on a broken record.
    pub(crate) fn is_dead(&self) -> bool {
        self.at == At::Dead
    }

    /// Reads from `input`: the bytes used and at most one event. Call
    /// again on the rest while it uses bytes or yields events; it uses
    /// none when it needs more input.
    pub(crate) fn feed<'a>(&mut self, input: &'a [u8]) -> (usize, Option<Event<'a>>) {
        let mut used = 0;
        loop {
            let rest = &input[used..];
            match self.at {
                At::Dead => return (input.len(), None),
                At::Header => {
                    if rest.len() < HEADER {
                        return (used, None);
                    }
                    let h = &rest[..HEADER];
                    used += HEADER;
                    if h[0] != 1 {
                        self.at = At::Dead;
                        return (input.len(), Some(Event::Broken));
                    }
                    let rtype = h[1];
                    let id = u16::from_be_bytes([h[2], h[3]]);
                    let len = u16::from_be_bytes([h[4], h[5]]) as usize;
                    self.padding = h[6] as usize;
                    self.whole.clear();
                    self.whole_len = len;
                    if len == 0 {
                        self.at = At::Padding(self.padding);
                        match rtype {
                            STDOUT => return (used, Some(Event::StdoutEnd(id))),
                            END_REQUEST => return (used, Some(Event::BadEnd(id))),
                            GET_VALUES_RESULT => {
                                return (used, Some(Event::Values(Some(Values::default()))))
                            }
                            UNKNOWN_TYPE => return (used, Some(Event::UnknownType)),
                            _ => continue,
                        }
                    }
                    self.at = At::Content {
                        rtype,
                        id,
                        left: len,
                    };
                }
                At::Content { rtype, id, left } => {
                    if rest.is_empty() {
                        return (used, None);
                    }
                    let n = left.min(rest.len());
                    let part = &rest[..n];
                    used += n;
                    let left = left - n;
                    self.at = if left == 0 {
                        At::Padding(self.padding)
                    } else {
                        At::Content { rtype, id, left }
                    };
                    match rtype {
                        STDOUT => return (used, Some(Event::Stdout(id, part))),
                        STDERR => {
                            // Gathered up to a line's bound, then given
                            // out (the rest of the record in further
                            // lines).
                            let room = self.stderr_max - self.whole.len();
                            let take = n.min(room);
                            self.whole.extend_from_slice(&part[..take]);
                            if take < n {
                                // What did not fit goes back to the input.
                                used -= n - take;
                                self.at = At::Content {
                                    rtype,
                                    id,
                                    left: left + (n - take),
                                };
                            }
                            if self.whole.len() == self.stderr_max || left == 0 && take == n {
                                let line = std::mem::take(&mut self.whole);
                                return (used, Some(Event::Stderr(id, line)));
                            }
                            continue;
                        }
                        END_REQUEST | GET_VALUES_RESULT | UNKNOWN_TYPE => {
                            let keep = (VALUES_MAX - self.whole.len()).min(n);
                            self.whole.extend_from_slice(&part[..keep]);
                            if left > 0 {
                                continue;
                            }
                            return (used, Some(self.whole_record(rtype, id)));
                        }
                        _ => continue,
                    }
                }
                At::Padding(p) => {
                    let n = p.min(rest.len());
                    used += n;
                    if n < p {
                        self.at = At::Padding(p - n);
                        return (used, None);
                    }
                    self.at = At::Header;
                    if rest.len() == n {
                        return (used, None);
                    }
                }
            }
        }
    }

    fn whole_record(&mut self, rtype: u8, id: u16) -> Event<'static> {
        let c = &self.whole;
        if rtype == UNKNOWN_TYPE {
            return Event::UnknownType;
        }
        if rtype == END_REQUEST {
            if c.len() < 8 {
                return Event::BadEnd(id);
            }
            return Event::End {
                id,
                app_status: u32::from_be_bytes([c[0] & 0x7f, c[1], c[2], c[3]]),
                protocol_status: c[4],
            };
        }
        if self.whole_len > VALUES_MAX {
            return Event::Values(None);
        }
        Event::Values(parse_values(c))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every event of `input` fed in pieces of `step` bytes, STDOUT and
    /// STDERR bytes joined per record kind.
    fn events(input: &[u8], step: usize) -> Vec<String> {
        let mut d = Demux::new(10);
        let mut out: Vec<String> = Vec::new();
        let mut have = Vec::new();
        for piece in input.chunks(step) {
            have.extend_from_slice(piece);
            let mut at = 0;
            loop {
                let (n, ev) = d.feed(&have[at..]);
                at += n;
                let Some(ev) = ev else {
                    if n == 0 {
                        break;
                    }
                    continue;
                };
                let s = match ev {
                    Event::Stdout(id, b) => format!("out{id}:{}", String::from_utf8_lossy(b)),
                    Event::Stderr(id, b) => format!("err{id}:{}", String::from_utf8_lossy(&b)),
                    e => format!("{e:?}"),
                };
                // Consecutive STDOUT pieces join: the split depends on
                // the reads.
                match (out.last_mut(), s.split_once(':')) {
                    (Some(last), Some((k, v)))
                        if k.starts_with("out") && last.starts_with(&format!("{k}:")) =>
                    {
                        last.push_str(v)
                    }
                    _ => out.push(s),
                }
            }
            have.drain(..at);
        }
        out
    }

    fn rec(rtype: u8, id: u16, content: &[u8], padding: u8) -> Vec<u8> {
        let mut v = Vec::new();
        put_header(&mut v, rtype, id, content.len() as u16, padding);
        v.extend_from_slice(content);
        v.extend(std::iter::repeat_n(0xAA, padding as usize));
        v
    }

    #[test]
    fn begin_request_and_empty_records_are_the_spec_bytes() {
        let mut v = Vec::new();
        put_begin_request(&mut v, 1, true);
        put_empty(&mut v, STDIN, 0x0102);
        put_empty(&mut v, ABORT_REQUEST, 3);
        assert_eq!(
            v,
            [
                1, 1, 0, 1, 0, 8, 0, 0, 0, 1, 1, 0, 0, 0, 0, 0, // BEGIN_REQUEST, keep-conn
                1, 5, 1, 2, 0, 0, 0, 0, // empty STDIN
                1, 2, 0, 3, 0, 0, 0, 0, // ABORT_REQUEST
            ]
        );
        let mut v = Vec::new();
        put_begin_request(&mut v, 0x7fff, false);
        assert_eq!(&v[8..11], &[0, 1, 0]);
        assert_eq!(&v[2..4], &[0x7f, 0xff]);
    }

    #[test]
    fn pairs_use_one_or_four_length_bytes() {
        let mut v = Vec::new();
        put_pair(&mut v, b"A", b"bc");
        assert_eq!(v, b"\x01\x02Abc");
        let long = vec![b'x'; 200];
        let mut v = Vec::new();
        put_pair(&mut v, b"N", &long);
        assert_eq!(&v[..6], &[1, 0x80, 0, 0, 200, b'N']);
        assert_eq!(v.len(), pair_len(b"N", &long));
        let (n, val, used) = get_pair(&v).unwrap();
        assert_eq!((n, val.len(), used), (&b"N"[..], 200, v.len()));
        let mut v = Vec::new();
        put_pair(&mut v, &[b'n'; 127], b"");
        assert_eq!(v[0], 127, "127 still fits one byte");
        // Cut anywhere: not whole.
        for i in 0..v.len() {
            assert!(get_pair(&v[..i]).is_none());
        }
        // A huge length announced: not whole, no overflow.
        assert!(get_pair(&[0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 1]).is_none());
    }

    #[test]
    fn params_split_between_pairs_and_end_with_an_empty_record() {
        let big = vec![b'v'; 40_000];
        let pairs: Vec<(&[u8], &[u8])> = vec![(b"A", &big), (b"B", &big), (b"C", b"c")];
        let mut v = Vec::new();
        put_params(&mut v, 7, pairs).unwrap();
        // Records: [A], [B, C], empty.
        let mut recs = Vec::new();
        let mut at = 0;
        while at < v.len() {
            assert_eq!(&v[at..at + 4], &[1, PARAMS, 0, 7]);
            let len = u16::from_be_bytes([v[at + 4], v[at + 5]]) as usize;
            recs.push(v[at + 8..at + 8 + len].to_vec());
            at += 8 + len;
        }
        assert_eq!(recs.len(), 3);
        assert_eq!(get_pair(&recs[0]).unwrap().0, b"A");
        assert_eq!(get_pair(&recs[0]).unwrap().2, recs[0].len());
        let (n, _, used) = get_pair(&recs[1]).unwrap();
        assert_eq!(n, b"B");
        assert_eq!(get_pair(&recs[1][used..]).unwrap().0, b"C");
        assert!(recs[2].is_empty());
        // A pair larger than a record cannot go.
        let huge = vec![b'v'; 70_000];
        assert!(put_params(&mut Vec::new(), 1, [(&b"H"[..], &huge[..])]).is_err());
        // No pair: only the empty record.
        let mut v = Vec::new();
        put_params(&mut v, 1, std::iter::empty()).unwrap();
        assert_eq!(v, [1, PARAMS, 0, 1, 0, 0, 0, 0]);
    }

    #[test]
    fn stdin_goes_in_records_of_at_most_65535_bytes() {
        let data = vec![7u8; 70_000];
        let mut v = Vec::new();
        put_stream(&mut v, STDIN, 1, &data);
        assert_eq!(&v[..8], &[1, STDIN, 0, 1, 0xff, 0xff, 0, 0]);
        let second = 8 + 0xffff;
        assert_eq!(
            &v[second..second + 8],
            &[1, STDIN, 0, 1, 0x11, 0x71, 0, 0],
            "70000 - 65535 = 4465"
        );
        assert_eq!(v.len(), 70_000 + 16);
        let mut v = Vec::new();
        put_stream(&mut v, STDIN, 1, b"");
        assert!(v.is_empty());
    }

    #[test]
    fn get_values_asks_for_two_variables() {
        let mut v = Vec::new();
        put_get_values(&mut v);
        assert_eq!(&v[..4], &[1, GET_VALUES, 0, 0]);
        assert_eq!(&v[8..], b"\x0d\x00FCGI_MAX_REQS\x0f\x00FCGI_MPXS_CONNS");
        assert_eq!(v[5] as usize, v.len() - 8);
    }

    #[test]
    fn values_read_as_haproxy() {
        let mut c = Vec::new();
        put_pair(&mut c, b"fcgi_max_reqs", b"50x");
        put_pair(&mut c, b"FCGI_MPXS_CONNS", b"1");
        put_pair(&mut c, b"FCGI_MAX_CONNS", b"9");
        assert_eq!(
            parse_values(&c),
            Some(Values {
                max_reqs: Some(50),
                mpxs_conns: Some(true)
            })
        );
        let mut c = Vec::new();
        put_pair(&mut c, b"FCGI_MPXS_CONNS", b"yes");
        assert_eq!(parse_values(&c).unwrap().mpxs_conns, Some(false));
        c.push(3);
        assert_eq!(parse_values(&c), None, "a stray byte");
        assert_eq!(leading_u32(b"99999999999"), u32::MAX);
        assert_eq!(leading_u32(b""), 0);
    }

    #[test]
    fn demux_reads_a_whole_answer_in_any_pieces() {
        let mut input = Vec::new();
        input.extend(rec(STDOUT, 1, b"Status: 200\r\n\r\nhello", 3));
        input.extend(rec(STDERR, 1, b"oops", 0));
        input.extend(rec(99, 1, b"unknown type", 4));
        input.extend(rec(STDOUT, 1, b" world", 0));
        input.extend(rec(STDOUT, 1, b"", 5));
        input.extend(rec(END_REQUEST, 1, &[0x80, 0, 1, 2, 0, 9, 9, 9], 0));
        let want = vec![
            "out1:Status: 200\r\n\r\nhello".to_string(),
            "err1:oops".into(),
            "out1: world".into(),
            "StdoutEnd(1)".into(),
            "End { id: 1, app_status: 258, protocol_status: 0 }".into(),
        ];
        for step in [1, 2, 3, 7, 8, 9, 64, input.len()] {
            assert_eq!(events(&input, step), want, "pieces of {step}");
        }
    }

    #[test]
    fn demux_multiplexed_ids_and_statuses() {
        let mut input = Vec::new();
        input.extend(rec(STDOUT, 3, b"a", 0));
        input.extend(rec(STDOUT, 1, b"b", 0));
        input.extend(rec(END_REQUEST, 3, &[0, 0, 0, 0, OVERLOADED, 0, 0, 0], 0));
        input.extend(rec(END_REQUEST, 1, &[0, 0, 0, 0], 0));
        input.extend(rec(END_REQUEST, 5, &[], 0));
        assert_eq!(
            events(&input, 5),
            [
                "out3:a",
                "out1:b",
                "End { id: 3, app_status: 0, protocol_status: 2 }",
                "BadEnd(1)",
                "BadEnd(5)"
            ]
        );
    }

    #[test]
    fn stderr_is_cut_in_lines_of_the_bound() {
        let input = rec(STDERR, 2, b"0123456789abcdefghijXYZ", 1);
        for step in [1, 4, 100] {
            assert_eq!(
                events(&input, step),
                ["err2:0123456789", "err2:abcdefghij", "err2:XYZ"],
                "pieces of {step}"
            );
        }
    }

    #[test]
    fn values_result_and_broken_records() {
        let mut c = Vec::new();
        put_pair(&mut c, b"FCGI_MAX_REQS", b"4");
        let mut input = rec(GET_VALUES_RESULT, 0, &c, 0);
        input.extend(rec(GET_VALUES_RESULT, 0, b"\x05", 0));
        input.extend(rec(UNKNOWN_TYPE, 0, &[GET_VALUES, 0, 0, 0, 0, 0, 0, 0], 0));
        input.extend([2, STDOUT, 0, 1, 0, 1, 0, 0, b'x']);
        input.extend(rec(STDOUT, 1, b"never", 0));
        assert_eq!(
            events(&input, 3),
            [
                "Values(Some(Values { max_reqs: Some(4), mpxs_conns: None }))",
                "Values(None)",
                "UnknownType",
                "Broken"
            ]
        );
    }
}

#[cfg(test)]
mod mutations {
    /// The fuzz target's check (`fuzzing::fcgi_answer`) over the seeds
    /// and many mutations of them (a cheap stand-in for a fuzzer run in
    /// the unit tests): nothing panics, a complete answer parses.
    #[test]
    fn seeds_and_mutations_never_panic() {
        let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/../../fuzz/seeds/fcgi_answer");
        let mut seeds: Vec<Vec<u8>> = std::fs::read_dir(dir)
            .map(|d| {
                d.filter_map(|e| std::fs::read(e.ok()?.path()).ok())
                    .collect()
            })
            .unwrap_or_default();
        seeds.push(vec![0]);
        let mut x: u64 = 0x9e37_79b9_7f4a_7c15;
        let mut rnd = move || {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x
        };
        for s in &seeds {
            assert!(crate::fuzzing::fcgi_answer(s).is_some_and(|o| !o.is_empty()) || s.len() < 2);
            for _ in 0..2000 {
                let mut m = s.clone();
                for _ in 0..=(rnd() % 4) {
                    if m.is_empty() {
                        break;
                    }
                    let at = (rnd() as usize) % m.len();
                    match rnd() % 3 {
                        0 => m[at] = rnd() as u8,
                        1 => {
                            m.insert(at, rnd() as u8);
                        }
                        _ => {
                            m.remove(at);
                        }
                    }
                }
                let _ = crate::fuzzing::fcgi_answer(&m);
            }
        }
    }
}
