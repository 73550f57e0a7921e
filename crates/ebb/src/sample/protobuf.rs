//! The `protobuf` and `ungrpc` converters: a field of a Protocol Buffers
//! message (or of the messages of a gRPC body), by its dotted field
//! number, as HAProxy 2.6's `protobuf.h` looks it up.
//!
//! HAProxy walks the message once: a field whose number is the next one
//! of the path is entered (a nested message's bytes are then read as
//! fields in turn; a scalar's bytes too, as HAProxy does), another is
//! skipped, and the path starts again from its first number when a
//! skipped length-delimited field leaves no nested length to count down.
//! The last number's field is stored as its raw bytes (no type given) or
//! decoded as the type names it. This is a port of that walk, its quirks
//! included, so that the same path finds the same bytes.

/// What the field is read as (`protobuf(PATH,TYPE)`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum PbType {
    Binary,
    Int32,
    Uint32,
    Int64,
    Uint64,
    Bool,
    Enum,
    Sint32,
    Sint64,
    Fixed32,
    Sfixed32,
    Float,
    Fixed64,
    Sfixed64,
    Double,
}

impl PbType {
    /// HAProxy's `protobuf_type`.
    pub(super) fn parse(s: &str) -> Option<PbType> {
        Some(match s {
            "int32" => PbType::Int32,
            "uint32" => PbType::Uint32,
            "sint32" => PbType::Sint32,
            "int64" => PbType::Int64,
            "uint64" => PbType::Uint64,
            "sint64" => PbType::Sint64,
            "bool" => PbType::Bool,
            "enum" => PbType::Enum,
            "fixed32" => PbType::Fixed32,
            "sfixed32" => PbType::Sfixed32,
            "float" => PbType::Float,
            "fixed64" => PbType::Fixed64,
            "sfixed64" => PbType::Sfixed64,
            "double" => PbType::Double,
            _ => return None,
        })
    }
}

/// A field found: raw bytes (a range of the input) or a number.
#[derive(Debug, PartialEq, Eq)]
pub(super) enum Found {
    Bytes(std::ops::Range<usize>),
    Int(i64),
}

/// HAProxy's `parse_dotted_uints`: numbers (each wrapping at 32 bits)
/// separated by single dots, no dot at the end.
pub(super) fn parse_path(s: &str) -> Option<Vec<u32>> {
    let b = s.as_bytes();
    let mut out = Vec::new();
    let mut i = 0;
    while i < b.len() {
        let mut r = 0u32;
        while i < b.len() && b[i].is_ascii_digit() {
            r = r.wrapping_mul(10).wrapping_add(u32::from(b[i] - b'0'));
            i += 1;
        }
        if i < b.len() {
            if b[i] != b'.' || i + 1 == b.len() {
                return None;
            }
            i += 1;
        }
        out.push(r);
    }
    Some(out)
}

/// A varint at `*pos` (within `*len` bytes), moved past; `None` when cut
/// or longer than ten bytes.
fn varint(b: &[u8], pos: &mut usize, len: &mut usize) -> Option<u64> {
    let (mut v, mut shift) = (0u64, 0u32);
    while *len > 0 {
        let c = *b.get(*pos)?;
        v |= u64::from(c & 0x7f).checked_shl(shift).unwrap_or(0);
        *pos += 1;
        *len -= 1;
        if c & 0x80 == 0 {
            break;
        }
        if *len == 0 {
            return None;
        }
        shift += 7;
        if shift > 63 {
            return None;
        }
    }
    Some(v)
}

/// HAProxy's `protobuf_field_lookup` over `b[*pos..*pos + *len]`.
pub(super) fn lookup(
    b: &[u8],
    path: &[u32],
    ty: PbType,
    pos: &mut usize,
    len: &mut usize,
) -> Option<Found> {
    let mut elen: u64 = 0;
    let mut field = 0usize;
    while field < path.len() {
        if *len == 0 {
            return None;
        }
        let mut sleft = *len as u64;
        let key = varint(b, pos, len)?;
        let wire = key & 7;
        let found = (key >> 3) as u32 == path[field];
        match wire {
            // Varint, 64-bit, 32-bit: skipped unless found.
            0 => {
                if !found {
                    let mut v = 0;
                    skip_varint(b, pos, len, &mut v)?;
                }
            }
            1 | 5 => {
                let n = if wire == 1 { 8 } else { 4 };
                if !found {
                    if *len < n {
                        return None;
                    }
                    *pos += n;
                    *len -= n;
                }
            }
            2 => {
                elen = varint(b, pos, len)?;
                if elen > *len as u64 {
                    return None;
                }
                sleft = *len as u64;
                if !found {
                    *pos += elen as usize;
                    *len -= elen as usize;
                }
            }
            _ => return None,
        }
        if found && field == path.len() - 1 {
            return store(b, wire, ty, *pos, *len, elen);
        }
        if (elen as i64) > 0 {
            elen = elen.wrapping_sub(sleft - *len as u64);
        }
        if found {
            field += 1;
        } else if (elen as i64) <= 0 {
            field = 0;
        }
    }
    None
}

/// HAProxy's `protobuf_skip_varint` (the same bounds as a decoding).
fn skip_varint(b: &[u8], pos: &mut usize, len: &mut usize, v: &mut u64) -> Option<()> {
    *v = varint(b, pos, len)?;
    Some(())
}

/// HAProxy's `smp_store` of the field's wire type, at `pos` with `len`
/// bytes left.
fn store(b: &[u8], wire: u64, ty: PbType, pos: usize, len: usize, elen: u64) -> Option<Found> {
    let avail = &b[pos..pos + len.min(b.len() - pos)];
    match wire {
        0 => {
            let mut p = 0;
            let mut l = avail.len();
            if ty == PbType::Binary {
                varint(avail, &mut p, &mut l)?;
                return Some(Found::Bytes(pos..pos + p));
            }
            let v = varint(avail, &mut p, &mut l)?;
            Some(Found::Int(match ty {
                PbType::Int32
                | PbType::Uint32
                | PbType::Int64
                | PbType::Uint64
                | PbType::Bool
                | PbType::Enum => v as i64,
                // Zigzag.
                PbType::Sint32 | PbType::Sint64 => ((v >> 1) ^ (v & 1).wrapping_neg()) as i64,
                _ => return None,
            }))
        }
        1 => {
            let w: [u8; 8] = avail.get(..8)?.try_into().ok()?;
            Some(match ty {
                PbType::Binary => Found::Bytes(pos..pos + 8),
                PbType::Fixed64 | PbType::Sfixed64 => Found::Int(i64::from_le_bytes(w)),
                PbType::Double => Found::Int(double_to_u64(f64::from_le_bytes(w)) as i64),
                _ => return None,
            })
        }
        5 => {
            let w: [u8; 4] = avail.get(..4)?.try_into().ok()?;
            Some(match ty {
                PbType::Binary => Found::Bytes(pos..pos + 4),
                PbType::Fixed32 => Found::Int(i64::from(u32::from_le_bytes(w))),
                PbType::Sfixed32 => Found::Int(i64::from(i32::from_le_bytes(w))),
                PbType::Float => Found::Int(i64::from(float_to_u32(f32::from_le_bytes(w)))),
                _ => return None,
            })
        }
        _ => {
            if (len as u64) < elen || ty != PbType::Binary {
                return None;
            }
            Some(Found::Bytes(pos..pos + elen as usize))
        }
    }
}

/// C's `(uint64_t)` of a double as x86-64 compilers convert it (what
/// HAProxy's `pbuf_le64toh(*(double *)pos)` gives): truncation; below
/// 2^63 through the signed conversion (the "indefinite" integer, the
/// lowest, for NaN and out of range), from 2^63 by subtracting it first.
fn double_to_u64(d: f64) -> u64 {
    const TWO63: f64 = 9_223_372_036_854_775_808.0;
    if d.is_nan() {
        return i64::MIN as u64;
    }
    if d < TWO63 {
        return if d < -TWO63 {
            i64::MIN as u64
        } else {
            d as i64 as u64
        };
    }
    let r = d - TWO63;
    let i = if r < TWO63 { r as i64 } else { i64::MIN };
    (i as u64) ^ (1 << 63)
}

/// C's `(uint32_t)` of a float as x86-64 compilers convert it: the 64-bit
/// signed truncation (the lowest integer for NaN and out of range), its
/// low 32 bits.
fn float_to_u32(f: f32) -> u32 {
    const TWO63: f32 = 9_223_372_036_854_775_808.0;
    if f.is_nan() || !(-TWO63..TWO63).contains(&f) {
        return 0;
    }
    f as i64 as u32
}

/// `ungrpc`: the field in the gRPC messages of a body (each a flag byte,
/// a big-endian length and a message), as HAProxy's loop reads them.
pub(super) fn ungrpc(b: &[u8], path: &[u32], ty: PbType) -> Option<Found> {
    let mut pos = 0usize;
    let mut left = b.len();
    while left > 5 {
        let l = u32::from_be_bytes(b.get(pos + 1..pos + 5)?.try_into().ok()?) as usize;
        pos += 5;
        left -= 5;
        if left < l {
            return None;
        }
        let mut len = l;
        if let Some(f) = lookup(b, path, ty, &mut pos, &mut len) {
            return Some(f);
        }
        left -= l;
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_are_dotted_numbers() {
        assert_eq!(parse_path("1.2.3"), Some(vec![1, 2, 3]));
        assert_eq!(parse_path(".1"), Some(vec![0, 1]));
        assert_eq!(parse_path(""), Some(vec![]));
        assert_eq!(parse_path("1."), None);
        assert_eq!(parse_path("1..2"), Some(vec![1, 0, 2]));
        assert_eq!(parse_path("a"), None);
    }

    #[test]
    fn nested_fields_and_types() {
        // message { 1: { 2: 150 (varint), 3: "hi" }, 4: fixed32 7 }
        let inner = [0x10, 0x96, 0x01, 0x1a, 0x02, b'h', b'i'];
        let mut m = vec![0x0a, inner.len() as u8];
        m.extend_from_slice(&inner);
        m.extend_from_slice(&[0x25, 7, 0, 0, 0]);
        let get = |p: &str, t: PbType| {
            let (mut pos, mut len) = (0, m.len());
            lookup(&m, &parse_path(p).unwrap(), t, &mut pos, &mut len)
        };
        assert_eq!(get("1.2", PbType::Int32), Some(Found::Int(150)));
        assert_eq!(get("1.2", PbType::Binary), Some(Found::Bytes(3..5)));
        assert_eq!(get("1.3", PbType::Binary), Some(Found::Bytes(7..9)));
        assert_eq!(get("4", PbType::Fixed32), Some(Found::Int(7)));
        assert_eq!(get("4", PbType::Int32), None);
        assert_eq!(get("5", PbType::Binary), None);
        // gRPC: the same message behind its 5-byte header.
        let mut g = vec![0, 0, 0, 0, m.len() as u8];
        g.extend_from_slice(&m);
        assert_eq!(ungrpc(&g, &[1, 2], PbType::Sint32), Some(Found::Int(75)));
    }

    #[test]
    fn casts_as_x86_64_c() {
        assert_eq!(double_to_u64(-1.5), u64::MAX);
        assert_eq!(double_to_u64(1e19), 10_000_000_000_000_000_000);
        assert_eq!(double_to_u64(1e20), 0);
        assert_eq!(float_to_u32(-1.0), u32::MAX);
        assert_eq!(float_to_u32(3.9), 3);
    }
}
