//! Property tests of the decoders that read network input outside the
//! HTTP/1 parser: the static-file path normaliser, the `Range` parser and
//! the stats page's query and `Authorization` decoding. Each must accept
//! any bytes without panicking, and what it returns must keep the
//! invariants the callers rely on (a clean path never climbs out of the
//! root; a range lies inside the file; decoding inverts encoding).

use proptest::prelude::*;

use crate::serve::files::{normalize_path, parse_range, Decision};
use crate::serve::stats::{auth_ok, base64_decode, parse_page, post_form_words, unpct};

fn b64(data: &[u8]) -> String {
    const A: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut out = String::new();
    for ch in data.chunks(3) {
        let n = ch.len();
        let v = (u32::from(ch[0]) << 16)
            | (u32::from(*ch.get(1).unwrap_or(&0)) << 8)
            | u32::from(*ch.get(2).unwrap_or(&0));
        for k in 0..4 {
            if k <= n {
                out.push(A[(v >> (18 - 6 * k) & 63) as usize] as char);
            } else {
                out.push('=');
            }
        }
    }
    out
}

/// Path-like bytes: mostly the characters that matter to the normaliser.
fn pathish() -> impl Strategy<Value = Vec<u8>> {
    prop::collection::vec(
        prop_oneof![
            Just(b'/'),
            Just(b'.'),
            Just(b'%'),
            Just(b'?'),
            Just(b'a'),
            Just(b'2'),
            Just(b'F'),
            Just(b'e'),
            any::<u8>(),
        ],
        0..40,
    )
}

proptest! {
    #[test]
    fn normalize_path_clean_and_contained(p in pathish()) {
        if let Ok(clean) = normalize_path(&p) {
            prop_assert!(clean.starts_with('/'), "{clean:?}");
            prop_assert!(!clean.contains('\0'));
            prop_assert!(!clean.contains("//"), "{clean:?}");
            for seg in clean.split('/') {
                prop_assert!(seg != ".." && seg != ".", "{clean:?}");
            }
            // Clean output is a fixed point (when decoding cannot apply).
            if !clean.contains(['%', '?', '#']) {
                prop_assert_eq!(normalize_path(clean.as_bytes()), Ok(clean.clone()));
            }
        }
    }

    #[test]
    fn normalize_path_keeps_plain_paths(segs in prop::collection::vec("[a-z0-9_-]{1,8}", 1..6), trailing in any::<bool>()) {
        let mut p = format!("/{}", segs.join("/"));
        if trailing {
            p.push('/');
        }
        prop_assert_eq!(normalize_path(p.as_bytes()), Ok(p.clone()));
        // A dot segment and its parent step cancel out.
        let q = format!("/x/../{}", &p[1..]);
        prop_assert_eq!(normalize_path(q.as_bytes()), Ok(p));
    }

    #[test]
    fn parse_range_stays_inside(h in "\\PC{0,24}", len in 0u64..1_000_000) {
        for hv in [h.clone(), format!("bytes={h}")] {
            if let Decision::Partial { start, end } = parse_range(&hv, len) {
                prop_assert!(start <= end && end < len, "{hv:?} {len}: {start}-{end}");
            }
        }
    }

    #[test]
    fn parse_range_honours_valid_ranges(len in 1u64..1_000_000, a in 0u64..1_000_000, n in 1u64..2_000_000) {
        let a = a % len;
        let b = a + (n % (len - a));
        prop_assert_eq!(parse_range(&format!("bytes={a}-{b}"), len), Decision::Partial { start: a, end: b });
        prop_assert_eq!(parse_range(&format!("bytes={a}-"), len), Decision::Partial { start: a, end: len - 1 });
        prop_assert_eq!(
            parse_range(&format!("bytes=-{n}"), len),
            Decision::Partial { start: len - n.min(len), end: len - 1 }
        );
        prop_assert_eq!(parse_range(&format!("bytes={len}-"), len), Decision::Unsatisfiable);
    }

    #[test]
    fn base64_inverts_encoding(data in prop::collection::vec(any::<u8>(), 0..64)) {
        prop_assert_eq!(base64_decode(&b64(&data)), Some(data));
    }

    #[test]
    fn auth_accepts_exactly_the_user(
        user in "[a-zA-Z0-9]{1,12}",
        pass in "\\PC{0,16}",
        other in "\\PC{0,16}",
        junk in prop::collection::vec(any::<u8>(), 0..40),
    ) {
        let users = vec![(user.clone(), pass.clone())];
        let good = format!("Basic {}", b64(format!("{user}:{pass}").as_bytes()));
        prop_assert!(auth_ok(&users, Some(good.as_bytes())));
        let bad = format!("basic {}", b64(format!("{user}:{other}").as_bytes()));
        prop_assert_eq!(auth_ok(&users, Some(bad.as_bytes())), other == pass);
        prop_assert!(!auth_ok(&users, None));
        // Anything else: no panic; accepted only if it decodes to the pair.
        let _ = auth_ok(&users, Some(&junk));
    }

    #[test]
    fn unpct_inverts_encoding(s in "\\PC{0,24}") {
        let enc: String = s.bytes().map(|b| format!("%{b:02X}")).collect();
        prop_assert_eq!(unpct(&enc), Some(s.clone()));
        let plus = s.replace(' ', "+");
        if !s.contains(['%', '+']) {
            prop_assert_eq!(unpct(&plus), Some(s));
        }
    }

    #[test]
    fn stats_query_decoders_take_any_input(q in "\\PC{0,32}", raw in prop::collection::vec(any::<u8>(), 0..32)) {
        let _ = unpct(&q);
        let _ = parse_page(q.as_bytes(), true);
        let _ = parse_page(&raw, true);
        let _ = post_form_words(&raw);
        let _ = base64_decode(&String::from_utf8_lossy(&raw));
    }
}

#[test]
fn unpct_wants_two_hex_digits() {
    assert_eq!(unpct("%+1"), None);
    assert_eq!(unpct("%-1"), None);
    assert_eq!(unpct("%4"), None);
    assert_eq!(unpct("%41%42"), Some("AB".into()));
}
