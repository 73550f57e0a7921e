//! MQTT (3.1, 3.1.1 and 5.0) for the `mqtt_is_valid` and
//! `mqtt_field_value` converters: the fixed header of any packet, and the
//! whole of CONNECT and CONNACK packets, checked and read as HAProxy 2.6
//! does (`src/mqtt.c`), quirks included, so the same bytes give the same
//! answers.

/// What a validation found.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Verdict {
    Valid,
    Invalid,
    NeedMore,
}

/// Packet types (the fixed header's high nibble).
const CONNECT: u8 = 1;
const CONNACK: u8 = 2;

/// The packet type names `mqtt_field_value` takes, from type 1.
const TYPES: [&str; 15] = [
    "CONNECT",
    "CONNACK",
    "PUBLISH",
    "PUBACK",
    "PUBREC",
    "PUBREL",
    "PUBCOMP",
    "SUBSCRIBE",
    "SUBACK",
    "UNSUBSCRIBE",
    "UNSUBACK",
    "PINGREQ",
    "PINGRESP",
    "DISCONNECT",
    "AUTH",
];

/// A field `mqtt_field_value` reads: a named one, or an MQTT 5.0
/// property by its identifier.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Field {
    Flags,
    ReasonCode,
    ProtocolName,
    ProtocolVersion,
    ClientId,
    WillTopic,
    WillPayload,
    Username,
    Password,
    Keepalive,
    Prop(u8),
}

const NAMED: [(&str, Field); 10] = [
    ("flags", Field::Flags),
    ("reason_code", Field::ReasonCode),
    ("protocol_name", Field::ProtocolName),
    ("protocol_version", Field::ProtocolVersion),
    ("client_identifier", Field::ClientId),
    ("will_topic", Field::WillTopic),
    ("will_payload", Field::WillPayload),
    ("username", Field::Username),
    ("password", Field::Password),
    ("keepalive", Field::Keepalive),
];

/// The property identifiers HAProxy names (written in decimal).
const PROPS: [u8; 27] = [
    1, 2, 3, 8, 9, 11, 17, 18, 19, 21, 22, 23, 24, 25, 26, 28, 31, 33, 34, 35, 36, 37, 38, 39, 40,
    41, 42,
];

/// The fields each packet type lets `mqtt_field_value` name (its named
/// fields, then its properties).
fn allowed(kind: u8) -> (&'static [Field], &'static [u8]) {
    use Field::*;
    match kind {
        CONNECT => (
            &[
                ProtocolName,
                ProtocolVersion,
                Flags,
                Keepalive,
                ClientId,
                WillTopic,
                WillPayload,
                Username,
                Password,
            ],
            &[1, 2, 3, 8, 9, 17, 21, 22, 23, 24, 25, 33, 34, 38, 39],
        ),
        CONNACK => (
            &[Flags, ProtocolVersion, ReasonCode],
            &[
                17, 18, 19, 21, 22, 26, 28, 31, 33, 34, 36, 37, 38, 39, 40, 41, 42,
            ],
        ),
        3 => (&[], &[1, 2, 3, 8, 9, 11, 35, 38]),
        4..=7 => (&[ReasonCode], &[31, 38]),
        8 => (&[], &[11, 38]),
        9 | 11 => (&[], &[31, 38]),
        10 => (&[], &[38]),
        14 => (&[ReasonCode], &[17, 28, 31, 38]),
        15 => (&[], &[21, 22, 31, 38]),
        _ => (&[], &[]),
    }
}

/// The packet type an argument names: a number from 1 to 15 (its leading
/// digits, as HAProxy's `strl2ui` reads them) or a name, any case.
pub(super) fn type_id(arg: &str) -> Option<u8> {
    let digits: String = arg.chars().take_while(char::is_ascii_digit).collect();
    if let Ok(n) = digits.parse::<u8>() {
        if (1..=15).contains(&n) {
            return Some(n);
        }
    }
    let i = TYPES.iter().position(|t| t.eq_ignore_ascii_case(arg))?;
    u8::try_from(i + 1).ok()
}

/// The field an argument names for packet type `kind`, if that type has it.
pub(super) fn field_id(kind: u8, arg: &str) -> Option<Field> {
    let f = match NAMED.iter().find(|(n, _)| n.eq_ignore_ascii_case(arg)) {
        Some((_, f)) => *f,
        None => Field::Prop(*PROPS.iter().find(|p| p.to_string() == arg)?),
    };
    let (named, props) = allowed(kind);
    let ok = match f {
        Field::Prop(p) => props.contains(&p),
        f => named.contains(&f),
    };
    ok.then_some(f)
}

/// A reader over a packet's bytes; each read fails (`None`) when the bytes
/// run out.
#[derive(Clone, Copy)]
struct Rd<'a>(&'a [u8]);

impl<'a> Rd<'a> {
    fn u8(&mut self) -> Option<u8> {
        let (&b, rest) = self.0.split_first()?;
        self.0 = rest;
        Some(b)
    }
    fn u16(&mut self) -> Option<u16> {
        let b = self.0.get(..2)?;
        let v = u16::from_be_bytes([b[0], b[1]]);
        self.0 = &self.0[2..];
        Some(v)
    }
    fn u32(&mut self) -> Option<u32> {
        let b = self.0.get(..4)?;
        let v = u32::from_be_bytes([b[0], b[1], b[2], b[3]]);
        self.0 = &self.0[4..];
        Some(v)
    }
    /// A variable byte integer, as HAProxy reads it: at most four bytes
    /// (a fourth with its continuation bit fails); bytes that end early
    /// give what was read.
    fn varint(&mut self) -> Option<u32> {
        let mut v = 0u32;
        for i in 0..4 {
            let Some(b) = self.u8() else {
                return Some(v);
            };
            v += u32::from(b & 127) << (7 * i);
            if b <= 127 {
                return Some(v);
            }
        }
        None
    }
    /// A string: two bytes of length, then the bytes.
    fn string(&mut self) -> Option<&'a [u8]> {
        let n = usize::from(self.u16()?);
        let s = self.0.get(..n)?;
        self.0 = &self.0[n..];
        Some(s)
    }
    /// An MQTT 5.0 property list: its length, then `f` on each property
    /// id with the reader at its value, until the list's bytes are read;
    /// `f` says what a property found (`None` to go on). A property twice
    /// is invalid, as is a value that overruns the list.
    fn props(
        &mut self,
        mut f: impl FnMut(u8, &mut Rd<'a>) -> Result<(), Verdict>,
    ) -> Result<(), Verdict> {
        let n = self.varint().ok_or(Verdict::Invalid)? as usize;
        let list = self.0.get(..n).ok_or(Verdict::Invalid)?;
        self.0 = &self.0[n..];
        let mut r = Rd(list);
        let mut seen = 0u64;
        while let Some(id) = r.u8() {
            // User properties (38) may repeat.
            if id != 38 && id < 64 {
                if seen & (1 << id) != 0 {
                    return Err(Verdict::Invalid);
                }
                seen |= 1 << id;
            }
            f(id, &mut r)?;
        }
        Ok(())
    }
}

/// What a CONNECT or CONNACK packet holds; integer properties not sent
/// read as 0, strings not sent as empty (as HAProxy's zeroed structure).
#[derive(Default)]
struct Packet<'a> {
    kind: u8,
    version: u8,
    flags: u8,
    keepalive: u16,
    reason: u8,
    name: &'a [u8],
    client_id: &'a [u8],
    will_topic: &'a [u8],
    will_payload: &'a [u8],
    username: &'a [u8],
    password: &'a [u8],
    /// The MQTT 5.0 properties read: integers, and strings.
    ints: Vec<(u8, u32)>,
    strs: Vec<(u8, &'a [u8])>,
}

impl<'a> Packet<'a> {
    fn int(&self, id: u8) -> u32 {
        self.ints.iter().find(|(i, _)| *i == id).map_or(0, |x| x.1)
    }
    fn str(&self, id: u8) -> &'a [u8] {
        self.strs
            .iter()
            .find(|(i, _)| *i == id)
            .map_or(&[], |x| x.1)
    }
}

/// Reads one property value for a packet: `ints` are (id, width, highest
/// value allowed, 0 refused) and `strs` the string ids it takes.
fn prop<'a>(
    p: &mut Packet<'a>,
    id: u8,
    r: &mut Rd<'a>,
    ints: &[(u8, u8, u32, bool)],
    strs: &[u8],
    unknown: Verdict,
) -> Result<(), Verdict> {
    const BAD: Verdict = Verdict::Invalid;
    if id == 38 {
        r.string().ok_or(BAD)?;
        r.string().ok_or(BAD)?;
        return Ok(());
    }
    if strs.contains(&id) {
        let s = r.string().ok_or(BAD)?;
        p.strs.push((id, s));
        return Ok(());
    }
    let Some(&(_, width, max, nonzero)) = ints.iter().find(|x| x.0 == id) else {
        return Err(unknown);
    };
    let v = match width {
        1 => r.u8().map(u32::from),
        2 => r.u16().map(u32::from),
        _ => r.u32(),
    }
    .ok_or(BAD)?;
    if v > max || (nonzero && v == 0) {
        return Err(BAD);
    }
    p.ints.push((id, v));
    Ok(())
}

const WILL: u8 = 0x04;
const ANY: u32 = u32::MAX;

fn connect<'a>(r: &mut Rd<'a>, p: &mut Packet<'a>) -> Result<(), Verdict> {
    const BAD: Verdict = Verdict::Invalid;
    p.name = r.string().ok_or(BAD)?;
    if !p.name.eq_ignore_ascii_case(b"MQTT") && !p.name.eq_ignore_ascii_case(b"MQIsdp") {
        return Err(BAD);
    }
    p.version = r.u8().ok_or(BAD)?;
    if !(3..=5).contains(&p.version) {
        return Err(BAD);
    }
    p.flags = r.u8().ok_or(BAD)?;
    // The reserved bit, and a QoS without the will.
    if p.flags & 0x01 != 0 || p.flags & 0x3C == 0x18 {
        return Err(BAD);
    }
    p.keepalive = r.u16().ok_or(BAD)?;
    if p.version == 5 {
        let ints = [
            (17, 4, ANY, false),
            (33, 2, ANY, true),
            (39, 4, ANY, true),
            (34, 2, ANY, false),
            (25, 1, 1, false),
            (23, 1, 1, false),
        ];
        r.props(|id, pr| prop(p, id, pr, &ints, &[21, 22], BAD))?;
    }
    if p.str(21).is_empty() && !p.str(22).is_empty() {
        return Err(BAD);
    }
    p.client_id = r.string().ok_or(BAD)?;
    if p.version == 5 && p.flags & WILL != 0 {
        let ints = [(24, 4, ANY, false), (1, 1, 1, false), (2, 4, ANY, false)];
        r.props(|id, pr| prop(p, id, pr, &ints, &[3, 8, 9], BAD))?;
    }
    if p.flags & WILL != 0 {
        p.will_topic = r.string().ok_or(BAD)?;
        p.will_payload = r.string().ok_or(BAD)?;
    }
    if p.flags & 0x80 != 0 {
        p.username = r.string().ok_or(BAD)?;
    }
    if p.flags & 0x40 != 0 {
        p.password = r.string().ok_or(BAD)?;
    }
    Ok(())
}

fn connack<'a>(r: &mut Rd<'a>, p: &mut Packet<'a>) -> Result<(), Verdict> {
    const BAD: Verdict = Verdict::Invalid;
    // Two bytes: 3.1.1; more: 5.0 (HAProxy's guess).
    p.version = match r.0.len() {
        0 | 1 => return Err(BAD),
        2 => 4,
        _ => 5,
    };
    p.flags = r.u8().ok_or(BAD)?;
    if p.flags & 0xFE != 0 {
        return Err(BAD);
    }
    p.reason = r.u8().ok_or(BAD)?;
    if p.version == 5 {
        let ints = [
            (17, 4, ANY, false),
            (33, 2, ANY, true),
            (36, 1, 1, false),
            (37, 1, 1, false),
            (39, 4, ANY, true),
            (34, 2, ANY, false),
            (40, 1, 1, false),
            (41, 1, 1, false),
            (42, 1, 1, false),
            (19, 2, ANY, false),
        ];
        // An unknown property "needs more data" in HAProxy 2.6.
        r.props(|id, pr| {
            prop(
                p,
                id,
                pr,
                &ints,
                &[18, 31, 26, 28, 21, 22],
                Verdict::NeedMore,
            )?;
            if id == 18 && p.str(18).is_empty() {
                return Err(BAD);
            }
            Ok(())
        })?;
    }
    Ok(())
}

/// Validates a packet and reads it (CONNECT and CONNACK; any other type
/// is invalid).
fn parse(msg: &[u8]) -> Result<Packet<'_>, Verdict> {
    if msg.len() < 2 {
        return Err(Verdict::NeedMore);
    }
    let mut r = Rd(msg);
    let first = r.u8().ok_or(Verdict::NeedMore)?;
    let kind = first >> 4;
    // The flags each type must carry (PUBLISH: 0x0F, as HAProxy checks).
    let want = match kind {
        3 => 0x0F,
        6 | 8 | 10 => 0x02,
        _ => 0,
    };
    if kind == 0 || first & 0x0F != want {
        return Err(Verdict::Invalid);
    }
    let remaining = r.varint().ok_or(Verdict::Invalid)? as usize;
    if r.0.len() < remaining {
        return Err(Verdict::NeedMore);
    }
    let mut p = Packet {
        kind,
        ..Packet::default()
    };
    let before = r.0.len();
    match kind {
        CONNECT => connect(&mut r, &mut p)?,
        CONNACK => connack(&mut r, &mut p)?,
        _ => return Err(Verdict::Invalid),
    }
    if before - r.0.len() != remaining {
        return Err(Verdict::Invalid);
    }
    Ok(p)
}

pub(super) fn validate(msg: &[u8]) -> Verdict {
    match parse(msg) {
        Ok(_) => Verdict::Valid,
        Err(v) => v,
    }
}

/// What a field lookup found.
#[derive(Debug, PartialEq, Eq)]
pub(super) enum Found {
    Value(Vec<u8>),
    Absent,
    NeedMore,
}

/// The value of `field` in a valid packet of type `kind`: strings as they
/// are (an empty one is no value), integers in decimal; MQTT 5.0 fields
/// only in a 5.0 packet, the will's only with the will flag.
pub(super) fn field_value(msg: &[u8], kind: u8, field: Field) -> Found {
    let p = match parse(msg) {
        Ok(p) if p.kind == kind => p,
        Err(Verdict::NeedMore) => return Found::NeedMore,
        _ => return Found::Absent,
    };
    let v5 = p.version == 5;
    let will = p.flags & WILL != 0;
    let int = |v: u32| Found::Value(v.to_string().into_bytes());
    let s = |v: &[u8]| {
        if v.is_empty() {
            Found::Absent
        } else {
            Found::Value(v.to_vec())
        }
    };
    match (kind, field) {
        (_, Field::Flags) => int(u32::from(p.flags)),
        (_, Field::ProtocolVersion) => int(u32::from(p.version)),
        (CONNACK, Field::ReasonCode) => int(u32::from(p.reason)),
        (CONNECT, Field::ProtocolName) => s(p.name),
        (CONNECT, Field::ClientId) => s(p.client_id),
        (CONNECT, Field::WillTopic) => s(p.will_topic),
        (CONNECT, Field::WillPayload) => s(p.will_payload),
        (CONNECT, Field::Username) => s(p.username),
        (CONNECT, Field::Password) => s(p.password),
        (CONNECT, Field::Keepalive) => int(u32::from(p.keepalive)),
        (CONNECT, Field::Prop(id @ (1 | 2 | 24))) if v5 && will => int(p.int(id)),
        (CONNECT, Field::Prop(id @ (3 | 8 | 9))) if v5 && will => s(p.str(id)),
        (CONNECT, Field::Prop(id @ (17 | 23 | 25 | 33 | 34 | 39))) if v5 => int(p.int(id)),
        (CONNECT, Field::Prop(id @ (21 | 22))) if v5 => s(p.str(id)),
        (CONNACK, Field::Prop(id @ (17 | 19 | 33 | 34 | 36 | 37 | 39 | 40 | 41 | 42))) if v5 => {
            int(p.int(id))
        }
        (CONNACK, Field::Prop(id @ (18 | 21 | 22 | 26 | 28 | 31))) if v5 => s(p.str(id)),
        _ => Found::Absent,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hex(s: &str) -> Vec<u8> {
        (0..s.len())
            .step_by(2)
            .map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap())
            .collect()
    }

    /// A 5.0 CONNECT with a will, user and password, and properties (the
    /// fields HAProxy's reg-test converter/mqtt reads).
    fn connect5() -> Vec<u8> {
        let mut body = Vec::new();
        body.extend_from_slice(b"\x00\x04MQTT\x05\xee\x00\x0a");
        // Properties: request problem information 1, maximum packet size 20.
        let props = [0x17, 1, 0x27, 0, 0, 0, 20];
        body.push(props.len() as u8);
        body.extend_from_slice(&props);
        body.extend_from_slice(b"\x00\x08test_sub");
        // Will properties: content type, response topic.
        let mut wp = vec![0x03, 0, 10];
        wp.extend_from_slice(b"text/plain");
        wp.extend_from_slice(&[0x08, 0, 12]);
        wp.extend_from_slice(b"willrsptopic");
        body.push(wp.len() as u8);
        body.extend_from_slice(&wp);
        body.extend_from_slice(b"\x00\x09willtopic\x00\x0bwillpayload");
        body.extend_from_slice(b"\x00\x04test\x00\x06passwd");
        let mut m = vec![0x10, body.len() as u8];
        m.extend_from_slice(&body);
        m
    }

    #[test]
    fn connect_fields() {
        let m = connect5();
        assert_eq!(validate(&m), Verdict::Valid);
        let f = |name: &str| {
            let id = field_id(CONNECT, name).unwrap();
            match field_value(&m, CONNECT, id) {
                Found::Value(v) => String::from_utf8(v).unwrap(),
                o => format!("{o:?}"),
            }
        };
        assert_eq!(f("protocol_name"), "MQTT");
        assert_eq!(f("protocol_version"), "5");
        assert_eq!(f("flags"), "238");
        assert_eq!(f("client_identifier"), "test_sub");
        assert_eq!(f("will_topic"), "willtopic");
        assert_eq!(f("will_payload"), "willpayload");
        assert_eq!(f("username"), "test");
        assert_eq!(f("password"), "passwd");
        assert_eq!(f("keepalive"), "10");
        assert_eq!(f("39"), "20");
        assert_eq!(f("23"), "1");
        assert_eq!(f("3"), "text/plain");
        assert_eq!(f("8"), "willrsptopic");
        // Not sent: integers read 0, strings are no value.
        assert_eq!(f("17"), "0");
        assert_eq!(f("21"), "Absent");
        // Every strict prefix asks for more.
        for n in 0..m.len() {
            assert_eq!(validate(&m[..n]), Verdict::NeedMore, "{n}");
        }
        // A wrong length, a reserved flag, a property twice.
        let mut bad = m.clone();
        bad[1] -= 1;
        assert_eq!(validate(&bad), Verdict::Invalid);
        let mut bad = m.clone();
        bad[9] |= 1;
        assert_eq!(validate(&bad), Verdict::Invalid);
        let mut bad = m.clone();
        bad[15] = 0x17;
        assert_eq!(validate(&bad), Verdict::Invalid);
        assert_eq!(field_value(&m, CONNACK, Field::Flags), Found::Absent);
    }

    #[test]
    fn connack_and_names() {
        // 3.1.1 CONNACK, then a 5.0 one with a few properties.
        assert_eq!(validate(&hex("20020000")), Verdict::Valid);
        assert_eq!(validate(&hex("20020200")), Verdict::Invalid);
        // Maximum QoS 2 is out of range.
        assert_eq!(
            validate(&hex("200d00000a110000007821000a2402")),
            Verdict::Invalid
        );
        let m = hex("200d00000a110000007821000a2401");
        assert_eq!(validate(&m), Verdict::Valid);
        let v = |id: u8| field_value(&m, CONNACK, Field::Prop(id));
        assert_eq!(v(17), Found::Value(b"120".to_vec()));
        assert_eq!(v(33), Found::Value(b"10".to_vec()));
        assert_eq!(v(36), Found::Value(b"1".to_vec()));
        // An unknown CONNACK property: "need more data", as HAProxy.
        assert_eq!(validate(&hex("20050000020700")), Verdict::NeedMore);
        // Other types are never valid; PUBLISH's flags must be 0x0F.
        assert_eq!(validate(&hex("c000")), Verdict::Invalid);
        assert_eq!(type_id("connack"), Some(CONNACK));
        assert_eq!(type_id("2"), Some(CONNACK));
        assert_eq!(type_id("16"), None);
        assert_eq!(type_id("nope"), None);
        assert_eq!(field_id(CONNECT, "USERNAME"), Some(Field::Username));
        assert_eq!(field_id(CONNACK, "username"), None);
        assert_eq!(field_id(CONNACK, "36"), Some(Field::Prop(36)));
        assert_eq!(field_id(CONNECT, "36"), None);
        assert_eq!(field_id(CONNECT, "036"), None);
    }
}
