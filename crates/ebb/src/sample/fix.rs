//! The FIX protocol (Financial Information eXchange) for the `fix_is_valid`
//! and `fix_tag_value` converters: a message is a list of `TAG=VALUE`
//! fields each ended by SOH (0x01); the first three are BeginString (8),
//! BodyLength (9) and MsgType (35), the last CheckSum (10). The checks are
//! HAProxy 2.6's (`src/fix.c`), so the same bytes give the same answers.

/// The field delimiter.
const SOH: u8 = 0x01;
/// Shorter than this is never a whole message.
const MIN_SIZE: usize = 26;

/// The tags whose place in a message is fixed: the first three and the
/// last.
const BEGIN_STRING: u32 = 8;
/// Second: the body's length (from MsgType up to CheckSum).
const BODY_LENGTH: u32 = 9;
/// Last: the sum of the bytes before it, modulo 256, as three digits.
const CHECK_SUM: u32 = 10;
/// Third.
const MSG_TYPE: u32 = 35;

/// What a validation found.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Verdict {
    Valid,
    Invalid,
    /// The bytes so far are a valid start: more are needed to decide.
    NeedMore,
}

/// What a tag lookup found.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) enum Found {
    /// Where the value is in the message.
    Value(std::ops::Range<usize>),
    /// Not in the message, or the message is broken before it.
    Absent,
    /// The bytes end before the tag was seen.
    NeedMore,
}

/// Leading decimal digits of `s` as HAProxy's `read_uint` reads them
/// (wrapping on overflow); returns the number and how many bytes it took.
fn read_uint(s: &[u8]) -> (u32, usize) {
    let n = s.iter().take_while(|c| c.is_ascii_digit()).count();
    let v = s[..n].iter().fold(0u32, |v, &c| {
        v.wrapping_mul(10).wrapping_add(u32::from(c - b'0'))
    });
    (v, n)
}

/// The highest tag id a FIX version defines (user tags 10000-19999 are
/// always allowed); `None` for a string that is no known version.
fn version_max(v: &[u8]) -> Option<u32> {
    Some(match v {
        b"FIX.4.0" => 140,
        b"FIX.4.1" => 211,
        b"FIX.4.2" => 446,
        b"FIX.4.3" => 659,
        b"FIX.4.4" => 956,
        // FIX 5.0 and its service packs share this string: the largest
        // range (5.0 SP2) applies.
        b"FIXT.1.1" => 1621,
        _ => return None,
    })
}

/// A tag id written as decimal digits only, not 0, and within the range of
/// `max` (the message's version) when given; 0 when it is not one.
fn check_id(tag: &[u8], max: Option<u32>) -> u32 {
    let (id, n) = read_uint(tag);
    if n != tag.len() || id == 0 {
        return 0;
    }
    match max {
        Some(m) if !(10000..=19999).contains(&id) && id > m => 0,
        _ => id,
    }
}

/// The tag a `fix_tag_value` argument names: a number, or one of the names
/// HAProxy knows (case-insensitive); 0 when neither.
pub(super) fn tag_id(arg: &str) -> u32 {
    let id = check_id(arg.as_bytes(), None);
    if id != 0 {
        return id;
    }
    const NAMES: [(&str, u32); 6] = [
        ("MsgType", MSG_TYPE),
        ("CheckSum", CHECK_SUM),
        ("BodyLength", BODY_LENGTH),
        ("TargetCompID", 56),
        ("BeginString", BEGIN_STRING),
        ("SenderCompID", 49),
    ];
    NAMES
        .iter()
        .find(|(n, _)| n.eq_ignore_ascii_case(arg))
        .map_or(0, |&(_, id)| id)
}

/// One `TAG=VALUE<SOH>` field at the start of `s`: the tag, the value and
/// the length of the whole field; `Err(true)` when the bytes end before
/// the field does, `Err(false)` when it is malformed (empty tag).
fn field(s: &[u8]) -> Result<(&[u8], &[u8], usize), bool> {
    let eq = s.iter().position(|&c| c == b'=').ok_or(true)?;
    let end = s[eq..]
        .iter()
        .position(|&c| c == SOH)
        .map(|p| eq + p)
        .ok_or(true)?;
    if eq == 0 {
        return Err(false);
    }
    Ok((&s[..eq], &s[eq + 1..end], end + 1))
}

/// Walks the fields from the start: `f` gets each field's offset, tag,
/// value and length, and ends the walk with `Some`. `Err(true)`: the bytes
/// ended first (a field not whole, or none left); `Err(false)`: a field
/// with an empty tag.
fn walk<R>(
    msg: &[u8],
    mut f: impl FnMut(usize, &[u8], &[u8], usize) -> Option<R>,
) -> Result<R, bool> {
    let mut p = 0;
    while p < msg.len() {
        let (tag, value, len) = field(&msg[p..])?;
        if let Some(r) = f(p, tag, value, len) {
            return Ok(r);
        }
        p += len;
    }
    Err(true)
}

/// Validates a message: numeric tags, BeginString with a known version,
/// then BodyLength matching the body, then MsgType, and a CheckSum field
/// (three digits) matching the sum of the bytes before it.
pub(super) fn validate(msg: &[u8]) -> Verdict {
    if msg.len() < MIN_SIZE {
        return Verdict::NeedMore;
    }
    let mut max = None;
    let mut count = 0u32;
    let mut sum = 0u8;
    let mut body_len = 0usize;
    let mut body_at = 0usize;
    let r = walk(msg, |p, tag, value, len| {
        let id = check_id(tag, max);
        if id == 0 {
            return Some(Verdict::Invalid);
        }
        count += 1;
        match count {
            1 if id != BEGIN_STRING => return Some(Verdict::Invalid),
            1 => match version_max(value) {
                Some(m) => max = Some(m),
                None => return Some(Verdict::Invalid),
            },
            2 => {
                let (n, used) = read_uint(value);
                if id != BODY_LENGTH || used != value.len() || n == 0 {
                    return Some(Verdict::Invalid);
                }
                body_len = n as usize;
                body_at = p + len;
            }
            3 if id != MSG_TYPE => return Some(Verdict::Invalid),
            _ if count > 3 && id == CHECK_SUM => {
                // HAProxy's strl2ui: the leading digits of the three.
                let (want, _) = read_uint(value);
                let ok = p - body_at == body_len && value.len() == 3 && want == u32::from(sum);
                return Some(if ok { Verdict::Valid } else { Verdict::Invalid });
            }
            _ => {}
        }
        sum = msg[p..p + len].iter().fold(sum, |s, &c| s.wrapping_add(c));
        None
    });
    match r {
        Ok(v) => v,
        // A message of MIN_SIZE bytes has its BodyLength by the time
        // its bytes run out: the body is still coming.
        Err(true) => Verdict::NeedMore,
        Err(false) => Verdict::Invalid,
    }
}

/// The value of the first field with tag `id` (fields are only checked to
/// have a numeric tag; the search stops at CheckSum).
pub(super) fn tag_value(msg: &[u8], id: u32) -> Found {
    let r = walk(msg, |p, tag, value, _| match check_id(tag, None) {
        0 => Some(Found::Absent),
        t if t == id => {
            let at = p + tag.len() + 1;
            Some(Found::Value(at..at + value.len()))
        }
        CHECK_SUM => Some(Found::Absent),
        _ => None,
    });
    match r {
        Ok(f) => f,
        Err(true) => Found::NeedMore,
        Err(false) => Found::Absent,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A message with `|` for SOH.
    fn m(s: &str) -> Vec<u8> {
        s.bytes().map(|c| if c == b'|' { SOH } else { c }).collect()
    }

    /// A FIX 4.4 logon and the FIXT.1.1 one of HAProxy's reg-test
    /// converter/fix, with their checksums.
    const LOGON44: &str = "8=FIX.4.4|9=79|35=A|34=1|49=EXECUTOR|52=20201029-13:02:44.535360|56=CLIENT1|98=0|108=30|141=Y|10=038|";
    const LOGON50: &str = "8=FIXT.1.1|9=86|35=A|34=1|49=EXECUTOR|52=20201029-13:13:22.626384|56=CLIENT1|98=0|108=30|141=Y|1137=7|10=184|";

    #[test]
    fn validates_as_haproxy() {
        assert_eq!(validate(&m(LOGON44)), Verdict::Valid);
        assert_eq!(validate(&m(LOGON50)), Verdict::Valid);
        // Every strict prefix asks for more (the short ones by size).
        let full = m(LOGON44);
        for n in 0..full.len() {
            assert_eq!(validate(&full[..n]), Verdict::NeedMore, "{n}");
        }
        // Bytes after the checksum do not matter.
        let mut more = full.clone();
        more.extend_from_slice(b"8=FIX");
        assert_eq!(validate(&more), Verdict::Valid);
        for bad in [
            // Wrong checksum, body length, version, order, tag range.
            LOGON44.replace("10=038", "10=039"),
            LOGON44.replace("9=79", "9=78"),
            LOGON44.replace("FIX.4.4", "FIX.4.9"),
            LOGON44.replace("8=FIX.4.4|9=79|", "9=79|8=FIX.4.4|"),
            LOGON44.replace("35=A|", "34=1|"),
            LOGON44.replace("141=Y", "999=Y"),
            LOGON44.replace("|34=1|", "|3a=1|"),
            LOGON44.replace("|34=1|", "|=1|"),
            LOGON44.replace("10=038", "10=38"),
        ] {
            assert_eq!(validate(&m(&bad)), Verdict::Invalid, "{bad}");
        }
        // A user-defined tag is allowed in any version, others in range.
        assert_eq!(check_id(b"12345", Some(140)), 12345);
        assert_eq!(check_id(b"141", Some(140)), 0);
        assert_eq!(check_id(b"141", None), 141);
    }

    #[test]
    fn finds_tag_values() {
        let msg = m(LOGON44);
        let v = |id| match tag_value(&msg, id) {
            Found::Value(r) => msg[r].to_vec(),
            o => panic!("{o:?}"),
        };
        assert_eq!(v(8), b"FIX.4.4");
        assert_eq!(v(56), b"CLIENT1");
        assert_eq!(v(10), b"038");
        assert_eq!(tag_value(&msg, 999), Found::Absent);
        assert_eq!(tag_value(&msg[..20], 56), Found::NeedMore);
        assert_eq!(tag_value(&m("8=FIX|x=1|56=A|"), 56), Found::Absent);
        assert_eq!(tag_id("SenderCompID"), 49);
        assert_eq!(tag_id("bodylength"), 9);
        assert_eq!(tag_id("56"), 56);
        assert_eq!(tag_id("Nope"), 0);
        assert_eq!(tag_id("0"), 0);
    }
}
