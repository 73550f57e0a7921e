//! RFC 7541 Appendix C, every example, decoded and re-encoded; then the
//! error cases and the bomb.

use super::*;

fn hex(s: &str) -> Vec<u8> {
    let s: String = s.chars().filter(|c| c.is_ascii_hexdigit()).collect();
    (0..s.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap())
        .collect()
}

fn list(l: &HeaderList) -> Vec<(String, String)> {
    l.iter()
        .map(|(n, v)| {
            (
                String::from_utf8_lossy(n).into_owned(),
                String::from_utf8_lossy(v).into_owned(),
            )
        })
        .collect()
}

fn pairs(p: &[(&str, &str)]) -> Vec<(String, String)> {
    p.iter()
        .map(|(a, b)| (a.to_string(), b.to_string()))
        .collect()
}

fn table(t: &DynTable) -> Vec<(String, String)> {
    (0..t.len())
        .map(|i| {
            let (n, v) = t.get(i).unwrap();
            (
                String::from_utf8_lossy(n).into_owned(),
                String::from_utf8_lossy(v).into_owned(),
            )
        })
        .collect()
}

#[test]
fn c1_integers() {
    let mut out = Vec::new();
    encode_int(10, 5, 0, &mut out);
    assert_eq!(out, [0b01010]);
    out.clear();
    encode_int(1337, 5, 0, &mut out);
    assert_eq!(out, [0b11111, 0b1001_1010, 0b0000_1010]);
    out.clear();
    encode_int(42, 8, 0, &mut out);
    assert_eq!(out, [42]);
    let mut pos = 0;
    assert_eq!(decode_int(&[0x1f, 0x9a, 0x0a], &mut pos, 5), Ok(1337));
    assert_eq!(pos, 3);
}

fn one(block: &str, want: &[(&str, &str)], table_after: &[(&str, &str)], size: usize) {
    let mut d = Decoder::new(4096);
    let mut l = HeaderList::default();
    d.decode(&hex(block), 1 << 20, &mut l).unwrap();
    assert_eq!(list(&l), pairs(want));
    assert_eq!(table(d.table()), pairs(table_after));
    assert_eq!(d.table().size(), size);
}

#[test]
fn c2_field_representations() {
    one(
        "400a 6375 7374 6f6d 2d6b 6579 0d63 7573 746f 6d2d 6865 6164 6572",
        &[("custom-key", "custom-header")],
        &[("custom-key", "custom-header")],
        55,
    );
    one(
        "040c 2f73 616d 706c 652f 7061 7468",
        &[(":path", "/sample/path")],
        &[],
        0,
    );
    let mut d = Decoder::new(4096);
    let mut l = HeaderList::default();
    d.decode(
        &hex("1008 7061 7373 776f 7264 0673 6563 7265 74"),
        1 << 20,
        &mut l,
    )
    .unwrap();
    assert_eq!(list(&l), pairs(&[("password", "secret")]));
    assert!(l.never_indexed(0));
    assert!(d.table().is_empty());
    one("82", &[(":method", "GET")], &[], 0);
}

/// A sequence of blocks on one connection: (encoded, decoded list, table
/// after, table size after).
type Seq<'a> = [(
    &'a str,
    &'a [(&'a str, &'a str)],
    &'a [(&'a str, &'a str)],
    usize,
)];

fn sequence(seq: &Seq<'_>, table_max: usize, huffman: HuffmanMode) {
    let mut d = Decoder::new(4096);
    let mut e = Encoder::new(4096, huffman);
    if table_max != 4096 {
        // The examples of C.5/C.6 run with SETTINGS_HEADER_TABLE_SIZE 256:
        // the decoder side simply has a 256-byte table from the start.
        d = Decoder::new(table_max);
        e = Encoder::new(table_max, huffman);
    }
    let mut l = HeaderList::default();
    for (block, want, tbl, size) in seq {
        let bytes = hex(block);
        d.decode(&bytes, 1 << 20, &mut l).unwrap();
        assert_eq!(list(&l), pairs(want));
        assert_eq!(table(d.table()), pairs(tbl));
        assert_eq!(d.table().size(), *size);
        // The encoder, indexing everything as the examples do, produces
        // exactly the RFC's bytes.
        let mut out = Vec::new();
        e.begin_block(&mut out);
        for (n, v) in want.iter() {
            e.encode_with(n.as_bytes(), v.as_bytes(), Indexing::Incremental, &mut out);
        }
        assert_eq!(out, bytes, "encoding of {want:?}");
    }
}

const REQ1: &[(&str, &str)] = &[
    (":method", "GET"),
    (":scheme", "http"),
    (":path", "/"),
    (":authority", "www.example.com"),
];
const REQ2: &[(&str, &str)] = &[
    (":method", "GET"),
    (":scheme", "http"),
    (":path", "/"),
    (":authority", "www.example.com"),
    ("cache-control", "no-cache"),
];
const REQ3: &[(&str, &str)] = &[
    (":method", "GET"),
    (":scheme", "https"),
    (":path", "/index.html"),
    (":authority", "www.example.com"),
    ("custom-key", "custom-value"),
];
const T1: &[(&str, &str)] = &[(":authority", "www.example.com")];
const T2: &[(&str, &str)] = &[
    ("cache-control", "no-cache"),
    (":authority", "www.example.com"),
];
const T3: &[(&str, &str)] = &[
    ("custom-key", "custom-value"),
    ("cache-control", "no-cache"),
    (":authority", "www.example.com"),
];

#[test]
fn c3_requests_without_huffman() {
    sequence(
        &[
            (
                "8286 8441 0f77 7777 2e65 7861 6d70 6c65 2e63 6f6d",
                REQ1,
                T1,
                57,
            ),
            ("8286 84be 5808 6e6f 2d63 6163 6865", REQ2, T2, 110),
            (
                "8287 85bf 400a 6375 7374 6f6d 2d6b 6579 0c63 7573 746f 6d2d 7661 6c75 65",
                REQ3,
                T3,
                164,
            ),
        ],
        4096,
        HuffmanMode::Never,
    );
}

#[test]
fn c4_requests_with_huffman() {
    sequence(
        &[
            ("8286 8441 8cf1 e3c2 e5f2 3a6b a0ab 90f4 ff", REQ1, T1, 57),
            ("8286 84be 5886 a8eb 1064 9cbf", REQ2, T2, 110),
            (
                "8287 85bf 4088 25a8 49e9 5ba9 7d7f 8925 a849 e95b b8e8 b4bf",
                REQ3,
                T3,
                164,
            ),
        ],
        4096,
        HuffmanMode::Always,
    );
}

const DATE1: &str = "Mon, 21 Oct 2013 20:13:21 GMT";
const DATE2: &str = "Mon, 21 Oct 2013 20:13:22 GMT";
const LOC: &str = "https://www.example.com";
const COOKIE: &str = "foo=ASDJKHQKBZXOQWEOPIUAXQWEOIU; max-age=3600; version=1";

fn responses(b1: &str, b2: &str, b3: &str, mode: HuffmanMode) {
    let r1: &[(&str, &str)] = &[
        (":status", "302"),
        ("cache-control", "private"),
        ("date", DATE1),
        ("location", LOC),
    ];
    let r2: &[(&str, &str)] = &[
        (":status", "307"),
        ("cache-control", "private"),
        ("date", DATE1),
        ("location", LOC),
    ];
    let r3: &[(&str, &str)] = &[
        (":status", "200"),
        ("cache-control", "private"),
        ("date", DATE2),
        ("location", LOC),
        ("content-encoding", "gzip"),
        ("set-cookie", COOKIE),
    ];
    let t1: &[(&str, &str)] = &[
        ("location", LOC),
        ("date", DATE1),
        ("cache-control", "private"),
        (":status", "302"),
    ];
    let t2: &[(&str, &str)] = &[
        (":status", "307"),
        ("location", LOC),
        ("date", DATE1),
        ("cache-control", "private"),
    ];
    let t3: &[(&str, &str)] = &[
        ("set-cookie", COOKIE),
        ("content-encoding", "gzip"),
        ("date", DATE2),
    ];
    sequence(
        &[(b1, r1, t1, 222), (b2, r2, t2, 222), (b3, r3, t3, 215)],
        256,
        mode,
    );
}

#[test]
fn c5_responses_without_huffman() {
    responses(
        "4803 3330 3258 0770 7269 7661 7465 611d 4d6f 6e2c 2032 3120 4f63 7420 3230 3133
         2032 303a 3133 3a32 3120 474d 546e 1768 7474 7073 3a2f 2f77 7777 2e65 7861 6d70
         6c65 2e63 6f6d",
        "4803 3330 37c1 c0bf",
        "88c1 611d 4d6f 6e2c 2032 3120 4f63 7420 3230 3133 2032 303a 3133 3a32 3220 474d
         54c0 5a04 677a 6970 7738 666f 6f3d 4153 444a 4b48 514b 425a 584f 5157 454f 5049
         5541 5851 5745 4f49 553b 206d 6178 2d61 6765 3d33 3630 303b 2076 6572 7369 6f6e
         3d31",
        HuffmanMode::Never,
    );
}

#[test]
fn c6_responses_with_huffman() {
    responses(
        "4882 6402 5885 aec3 771a 4b61 96d0 7abe 9410 54d4 44a8 2005 9504 0b81 66e0 82a6
         2d1b ff6e 919d 29ad 1718 63c7 8f0b 97c8 e9ae 82ae 43d3",
        "4883 640e ffc1 c0bf",
        "88c1 6196 d07a be94 1054 d444 a820 0595 040b 8166 e084 a62d 1bff c05a 839b d9ab
         77ad 94e7 821d d7f2 e6c7 b335 dfdf cd5b 3960 d5af 2708 7f36 72c1 ab27 0fb5 291f
         9587 3160 65c0 03ed 4ee5 b106 3d50 07",
        HuffmanMode::Always,
    );
}

#[test]
fn errors_are_compression_errors() {
    let mut d = Decoder::new(4096);
    let mut l = HeaderList::default();
    // Index 0, index past the tables.
    assert_eq!(
        d.decode(&[0x80], 1 << 20, &mut l),
        Err(HpackError::BadIndex)
    );
    assert_eq!(
        d.decode(&[0xbe], 1 << 20, &mut l),
        Err(HpackError::BadIndex)
    );
    // Truncated literal.
    assert_eq!(
        d.decode(&[0x40, 0x05, b'a'], 1 << 20, &mut l),
        Err(HpackError::Truncated)
    );
    // Integer overflow.
    assert_eq!(
        d.decode(&[0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x7f], 1 << 20, &mut l),
        Err(HpackError::IntegerOverflow)
    );
    // Size update above SETTINGS, and after a field.
    assert_eq!(
        d.decode(&hex("3fe2 1f"), 1 << 20, &mut l),
        Err(HpackError::SizeUpdateTooLarge)
    );
    assert_eq!(
        d.decode(&hex("8220"), 1 << 20, &mut l),
        Err(HpackError::SizeUpdateNotFirst)
    );
    // A size update at the start is fine and evicts.
    d.decode(
        &hex("400a 6375 7374 6f6d 2d6b 6579 0d63 7573 746f 6d2d 6865 6164 6572"),
        1 << 20,
        &mut l,
    )
    .unwrap();
    assert_eq!(d.table().len(), 1);
    d.decode(&hex("2082"), 1 << 20, &mut l).unwrap();
    assert_eq!(d.table().len(), 0);
}

/// HPACK bomb: one 4 KB entry named 10 000 times costs a bounded list.
#[test]
fn hpack_bomb_is_bounded() {
    let mut d = Decoder::new(4096);
    let mut l = HeaderList::default();
    let mut block = Vec::new();
    block.push(0x40);
    encode_int(1, 7, 0, &mut block);
    block.push(b'x');
    encode_int(4000, 7, 0, &mut block);
    block.extend(std::iter::repeat_n(b'a', 4000));
    block.extend(std::iter::repeat_n(0xbe, 10_000)); // index 62, 10 000 times
    d.decode(&block, 16 * 1024, &mut l).unwrap();
    assert!(l.too_large);
    assert!(l.buf.len() <= 16 * 1024, "copied {} bytes", l.buf.len());
    assert_eq!(l.list_size, 10_001 * (4001 + 32));
    // The table is still in sync: the next block can use the entry.
    d.decode(&[0xbe], 16 * 1024, &mut l).unwrap();
    assert!(!l.too_large);
    assert_eq!(l.get(0).0, b"x");
}

#[test]
fn table_store_stays_bounded() {
    let mut t = DynTable::new(256);
    for i in 0..10_000u32 {
        let v = format!("value-{i}");
        t.insert(b"name", v.as_bytes());
        assert!(t.size() <= 256);
        assert!(t.store_len() <= 2 * 256 + 64);
    }
    assert_eq!(t.get(0).unwrap().1, b"value-9999");
}

#[test]
fn encoder_signals_table_size_changes() {
    let mut e = Encoder::default();
    e.set_max_table_size(0);
    e.set_max_table_size(1024);
    let mut out = Vec::new();
    e.begin_block(&mut out);
    // Two updates: the smallest (0) then the final one (1024).
    let mut d = Decoder::new(4096);
    let mut l = HeaderList::default();
    e.encode(b"content-type", b"text/html", &mut out);
    d.decode(&out, 1 << 20, &mut l).unwrap();
    assert_eq!(out[0], 0x20);
    assert_eq!(d.table().max_size(), 1024);
    assert_eq!(list(&l), pairs(&[("content-type", "text/html")]));
}

/// The encoder's static lookup by name length finds exactly the entries a
/// walk of the whole table finds, in table order, for every static name
/// and for names the table lacks (empty, too long, same length as one).
#[test]
fn static_lookup_by_length_matches_a_full_walk() {
    let mut names: Vec<&[u8]> = STATIC.iter().map(|&(n, _)| n).collect();
    names.extend_from_slice(&[
        b"",
        b"x-custom",
        b":statu5",
        b"content-typf",
        b"access-control-allow-origin-and-more",
    ]);
    for name in names {
        let walk: Vec<usize> = (0..STATIC.len()).filter(|&i| STATIC[i].0 == name).collect();
        let found: Vec<usize> = table::static_named(name).collect();
        assert_eq!(found, walk, "{}", String::from_utf8_lossy(name));
    }
    // Fully indexed, name indexed, and literal fields encode as before.
    let mut e = Encoder::new(4096, HuffmanMode::Never);
    let mut out = Vec::new();
    e.encode(b":status", b"404", &mut out);
    assert_eq!(out, [0x80 | 13]);
    out.clear();
    e.encode_with(b":status", b"299", Indexing::No, &mut out);
    assert_eq!(out[0], 8, "name from entry 8 (the first :status)");
    out.clear();
    e.encode_with(b"cookie", b"a=b", Indexing::Never, &mut out);
    assert_eq!(
        out[0],
        0x10 | 0x0f,
        "never indexed, name index 32 (15 + 17)"
    );
    assert_eq!(out[1], 17);
}

/// A file's `etag` and `last-modified` repeat on every answer of the
/// file: the first answer adds them to the table, the next send one byte
/// each (a `content-length` stays a literal).
#[test]
fn a_files_validators_and_length_are_indexed_after_the_first_answer() {
    let mut e = Encoder::default();
    let mut d = Decoder::new(DEFAULT_TABLE_SIZE);
    let mut got = HeaderList::default();
    let fields = [
        (":status", "200"),
        ("last-modified", "Mon, 30 Nov 2026 04:51:02 GMT"),
        ("etag", "\"6b0d00b6-64\""),
        ("content-length", "100"),
    ];
    let mut sizes = Vec::new();
    for _ in 0..2 {
        let mut b = Vec::new();
        e.begin_block(&mut b);
        for (n, v) in fields {
            e.encode(n.as_bytes(), v.as_bytes(), &mut b);
        }
        d.decode(&b, usize::MAX, &mut got).unwrap();
        assert_eq!(list(&got), pairs(&fields));
        sizes.push(b.len());
    }
    // :status, the two validators and content-length one byte each.
    assert_eq!(sizes[1], 4, "{sizes:?}");
    assert!(sizes[0] > 30, "{sizes:?}");
    assert_eq!(e.table().len(), 3);
}

/// A block of the fields of the one before, the table unchanged since,
/// is copied from the memo: the same bytes as a fresh encoding, which the
/// peer's decoder reads to the same fields; any change of the fields or
/// of the table encodes again.
#[test]
fn repeated_blocks_are_the_same_bytes() {
    let fields = |date: &str| {
        let mut l = Vec::new();
        for (n, v) in [
            (":status", "200"),
            ("server", "ebb"),
            ("date", date),
            ("content-length", "5"),
            ("etag", "\"abc\""),
        ] {
            Encoder::push_field(&mut l, n.as_bytes(), v.as_bytes());
        }
        l
    };
    let want = |date: &str| {
        pairs(&[
            (":status", "200"),
            ("server", "ebb"),
            ("date", date),
            ("content-length", "5"),
            ("etag", "\"abc\""),
        ])
    };
    let d1 = "Sat, 28 Nov 2026 11:00:00 GMT";
    let d2 = "Sat, 28 Nov 2026 11:00:01 GMT";
    let mut enc = Encoder::default();
    let mut fresh = Encoder::default();
    let mut dec = Decoder::new(DEFAULT_TABLE_SIZE);
    let mut out = HeaderList::default();
    let mut blocks = Vec::new();
    for (i, date) in [d1, d1, d1, d2, d2, d1].into_iter().enumerate() {
        let mut b = Vec::new();
        enc.encode_fields(&fields(date), &mut b);
        // The same sequence through the field-at-a-time encoder.
        let mut f = Vec::new();
        fresh.begin_block(&mut f);
        for (n, v) in want(date) {
            fresh.encode(n.as_bytes(), v.as_bytes(), &mut f);
        }
        assert_eq!(b, f, "block {i}");
        dec.decode(&b, usize::MAX, &mut out).unwrap();
        assert_eq!(list(&out), want(date), "block {i}");
        blocks.push(b);
    }
    // The first inserts (literals), the next two are all indexed and equal.
    assert_ne!(blocks[0], blocks[1]);
    assert_eq!(blocks[1], blocks[2]);
    // A new date is a literal once, then indexed again.
    assert_ne!(blocks[3], blocks[2]);
    assert_ne!(blocks[4], blocks[3]);
    // A size change is signalled even when the fields repeat.
    enc.set_max_table_size(0);
    let mut b = Vec::new();
    enc.encode_fields(&fields(d1), &mut b);
    assert_eq!(b[0], 0x20);
    dec.decode(&b, usize::MAX, &mut out).unwrap();
    assert_eq!(list(&out), want(d1));
}

/// The facts the request checks read from a field's props: kept with a
/// table entry, built into the static table, they are those of the
/// field's bytes (`request::field_props`), whichever way it came.
#[test]
fn props_are_those_of_the_bytes_whichever_representation_brought_them() {
    use crate::h2::request::{field_props, props as P};
    for (i, &(n, v)) in STATIC.iter().enumerate() {
        assert_eq!(table::STATIC_PROPS[i], field_props(n, v), "static {i}");
    }
    let fields: [(&[u8], &[u8]); 14] = [
        (b":method", b"GET"),
        (b":method", b"G\x01T"),
        (b":scheme", b"HTTPS"),
        (b":scheme", b"1ttp"),
        (b":authority", b"example.com:8080"),
        (b":authority", b":80"),
        (b":authority", b"a@b"),
        (b":status", b"200"),
        (b"te", b"trailers"),
        (b"te", b"gzip"),
        (b"expect", b"100-Continue"),
        (b"x-ctl", b"a\x01b"),
        (b"x-sp", b" a"),
        (b"X-Upper", b"v"),
    ];
    // Each field a literal with indexing, then the same again: indexes.
    let mut enc = Encoder::new(DEFAULT_TABLE_SIZE, HuffmanMode::Never);
    let mut dec = Decoder::new(DEFAULT_TABLE_SIZE);
    let mut l = HeaderList::default();
    for round in 0..2 {
        let mut block = Vec::new();
        for (n, v) in fields {
            enc.encode_with(n, v, Indexing::Incremental, &mut block);
        }
        dec.decode(&block, 1 << 20, &mut l).unwrap();
        assert_eq!(l.len(), fields.len());
        for (i, (n, v)) in fields.into_iter().enumerate() {
            // (A regular field's surrounding whitespace is trimmed.)
            let v: &[u8] = if n == b"x-sp" { b"a" } else { v };
            assert_eq!(l.get(i), (n, v));
            let want = field_props(n, if n == b"x-sp" { b" a" } else { v });
            assert_eq!(l.props()[i], want, "round {round} field {i}");
        }
    }
    let p = |n: &[u8], v: &[u8]| field_props(n, v);
    assert_eq!(p(b":method", b"G\x01T") & P::BAD_METHOD, P::BAD_METHOD);
    assert_eq!(
        p(b":scheme", b"HTTPS") & (P::WEB_SCHEME | P::BAD_SCHEME),
        P::WEB_SCHEME
    );
    assert_eq!(p(b":scheme", b"1ttp") & P::BAD_SCHEME, P::BAD_SCHEME);
    assert_ne!(p(b":authority", b"example.com:8080") & P::ABS_AUTHORITY, 0);
    assert_eq!(p(b":authority", b":80") & P::ABS_AUTHORITY, 0);
    assert_eq!(p(b":authority", b"a@b") & P::ABS_AUTHORITY, 0);
    assert_eq!(p(b":status", b"200") & P::KIND, P::PSEUDO);
    assert_eq!(p(b"te", b"trailers") & P::CONN_SPECIFIC, 0);
    assert_ne!(p(b"te", b"gzip") & P::CONN_SPECIFIC, 0);
    assert_ne!(p(b"expect", b"100-Continue") & P::CONTINUE, 0);
    assert_eq!(p(b"x-ctl", b"a\x01b") & (P::BAD_H1 | P::BAD_H2), P::BAD_H1);
    assert_eq!(p(b"x-sp", b" a") & (P::BAD_H2 | P::EDGE_WS), P::EDGE_WS);
    assert_eq!(p(b"x-sp", b"a\t") & (P::BAD_H2 | P::EDGE_WS), P::EDGE_WS);
    assert_eq!(p(b":path", b"/a ") & (P::BAD_H2 | P::EDGE_WS), P::BAD_H2);
    assert_eq!(p(b":method", b" GET") & (P::BAD_H2 | P::EDGE_WS), P::BAD_H2);
    assert_eq!(p(b":status", b"200 ") & (P::BAD_H2 | P::EDGE_WS), P::BAD_H2);
    assert_eq!(p(b"X-Upper", b"v") & P::BAD_NAME, P::BAD_NAME);
    assert_eq!(p(b"", b"v") & P::BAD_NAME, P::BAD_NAME);
    assert_ne!(p(b":path", b"/a%2fb?c") & P::TARGET_OK, 0);
    assert_eq!(p(b":path", b"/a b") & P::TARGET_OK, 0);
    // A bad escape is a target HTTP/1 takes (as HAProxy 2.6).
    assert_ne!(p(b":path", b"/a%2") & P::TARGET_OK, 0);
    assert_eq!(p(b":path", b"/a#2") & P::TARGET_OK, 0);
    assert_eq!(p(b":authority", b"h#x") & P::TARGET_OK, 0);
    // Never indexed: a flag of that one field, not of its bytes.
    let mut block = Vec::new();
    enc.encode_with(b"x-secret", b"s", Indexing::Never, &mut block);
    dec.decode(&block, 1 << 20, &mut l).unwrap();
    assert_eq!(l.props()[0], field_props(b"x-secret", b"s") | P::NEVER);
    assert!(l.never_indexed(0));
}

/// A field taken from the dynamic table (copied in one piece, name and
/// value side by side there) is the field and props its literal gave.
#[test]
fn a_dynamic_entry_decodes_as_its_literal_did() {
    let mut d = Decoder::new(4096);
    let mut lit = HeaderList::default();
    let block =
        hex("400a 6375 7374 6f6d 2d6b 6579 0d63 7573 746f 6d2d 6865 6164 6572 4104 6869 6e74");
    d.decode(&block, 1 << 20, &mut lit).unwrap();
    let mut idx = HeaderList::default();
    // 0xbe: the newest entry (`:authority: hint`), 0xbf the one before.
    d.decode(&[0xbe, 0xbf, 0x82], 1 << 20, &mut idx).unwrap();
    let want = [("custom-key", "custom-header"), (":authority", "hint")];
    assert_eq!(list(&lit), pairs(&want));
    assert_eq!(list(&idx), pairs(&[want[1], want[0], (":method", "GET")]));
    assert_eq!(idx.props()[..2], [lit.props()[1], lit.props()[0]]);
    assert_eq!(idx.list_size, lit.list_size + 32 + 10);
}

/// A literal with a static name sent again (a client's `:path`, not
/// indexed) is the field and props it was the first time, whatever came
/// between; other bytes, another name or a bad string are read afresh.
#[test]
fn a_literal_sent_again_decodes_as_it_did() {
    use crate::h2::request::field_props;
    let mut d = Decoder::new(4096);
    let mut l = HeaderList::default();
    let blocks: [(&[u8], &[u8], Indexing, HuffmanMode); 7] = [
        (b":path", b"/100b", Indexing::No, HuffmanMode::Always),
        (b":path", b"/100b", Indexing::No, HuffmanMode::Always),
        (b":path", b"/100b", Indexing::Never, HuffmanMode::Always),
        (b":path", b"/100b", Indexing::No, HuffmanMode::Never),
        (b":path", b"/a b", Indexing::No, HuffmanMode::Never),
        (b":authority", b"/a b", Indexing::No, HuffmanMode::Never),
        (b":path", b"/a b", Indexing::Incremental, HuffmanMode::Never),
    ];
    for (round, (n, v, ix, hm)) in blocks.into_iter().enumerate() {
        let mut enc = Encoder::new(DEFAULT_TABLE_SIZE, hm);
        let mut block = Vec::new();
        enc.encode_with(n, v, ix, &mut block);
        d.decode(&block, 1 << 20, &mut l).unwrap();
        assert_eq!(l.len(), 1, "{round}");
        assert_eq!(l.get(0), (n, v), "{round}");
        let never = if ix == Indexing::Never {
            crate::h2::request::props::NEVER
        } else {
            0
        };
        assert_eq!(l.props()[0], field_props(n, v) | never, "{round}");
        let indexed = ix == Indexing::Incremental;
        assert_eq!(table(d.table()).len(), usize::from(indexed), "{round}");
    }
    // The same bytes cut short: an error as the first time, not the value
    // kept.
    let mut enc = Encoder::new(DEFAULT_TABLE_SIZE, HuffmanMode::Never);
    let mut block = Vec::new();
    enc.encode_with(b":path", b"/xyz", Indexing::No, &mut block);
    d.decode(&block, 1 << 20, &mut l).unwrap();
    assert_eq!(
        d.decode(&block[..block.len() - 1], 1 << 20, &mut l),
        Err(HpackError::Truncated)
    );
    d.decode(&block, 1 << 20, &mut l).unwrap();
    assert_eq!(l.get(0), (&b":path"[..], &b"/xyz"[..]));
}

/// A block of more fields than `set_max_fields` allows fails (HAProxy's
/// HPACK list overflow), counted even past `max_list` (where the fields
/// are no longer kept); up to it, it decodes.
#[test]
fn more_fields_than_the_list_holds_fail() {
    let mut d = Decoder::new(DEFAULT_TABLE_SIZE);
    d.set_max_fields(3);
    let mut l = HeaderList::default();
    // :method GET, :scheme http, :path / (indexed 2, 6, 4).
    d.decode(&[0x82, 0x86, 0x84], 1 << 20, &mut l).unwrap();
    assert_eq!(l.len(), 3);
    assert_eq!(
        d.decode(&[0x82, 0x86, 0x84, 0x84], 1 << 20, &mut l),
        Err(HpackError::TooManyFields)
    );
    // Past `max_list` the fields are only counted: still refused.
    assert_eq!(
        d.decode(&[0x82, 0x86, 0x84, 0x84], 40, &mut l),
        Err(HpackError::TooManyFields)
    );
}

#[test]
fn static_lines_are_the_static_table() {
    for (i, (n, v)) in STATIC.iter().enumerate() {
        let line = [*n, b": ", *v, b"\r\n"].concat();
        assert_eq!(
            table::static_line(i),
            Some((&line[..], n.len())),
            "entry {i}"
        );
    }
    assert_eq!(table::static_line(61), None);
}

#[test]
fn decoded_fields_lie_side_by_side_as_lines() {
    // Static indexed, dynamic indexed, literal with a static name, literal
    // with a new name (RFC 7541 C.3.2's second block, plus a literal).
    let mut d = Decoder::new(4096);
    let mut l = HeaderList::default();
    d.decode(
        &[0x82, 0x86, 0x84, 0x41, 0x03, b'a', b'.', b'b'],
        1 << 16,
        &mut l,
    )
    .unwrap();
    d.decode(
        &[
            0x82, 0xbe, 0x04, 0x02, b'/', b'x', 0x00, 0x01, b'k', 0x01, b'v',
        ],
        1 << 16,
        &mut l,
    )
    .unwrap();
    let lines: Vec<u8> = l
        .iter()
        .flat_map(|(n, v)| [n, b": ", v, b"\r\n"].concat())
        .collect();
    assert_eq!(l.bytes(), &lines[..]);
    assert_eq!(l.get(1), (&b":authority"[..], &b"a.b"[..]));
    assert_eq!(l.get(2), (&b":path"[..], &b"/x"[..]));
    assert_eq!(l.get(3), (&b"k"[..], &b"v"[..]));
}

/// A regular field's value with surrounding SP/HTAB is kept trimmed, its
/// line rewritten (HAProxy 2.6 trims them since February 2025), however
/// it came: a literal, a table entry, a never-indexed literal; the fields
/// around it keep their bytes.
#[test]
fn surrounding_whitespace_of_a_regular_value_is_trimmed() {
    let fields: [(&[u8], &[u8], &[u8]); 6] = [
        (b"a", b"1", b"1"),
        (b"hdr2", b" val2a", b"val2a"),
        (b"hdr3", b"\t val3a, val3b \t", b"val3a, val3b"),
        (b"hdr4", b"   ", b""),
        (b"hdr5", b"in side", b"in side"),
        (b"b", b"", b""),
    ];
    let mut enc = Encoder::new(DEFAULT_TABLE_SIZE, HuffmanMode::Never);
    let mut dec = Decoder::new(DEFAULT_TABLE_SIZE);
    let mut l = HeaderList::default();
    for (round, ix) in [
        Indexing::Incremental,
        Indexing::Incremental,
        Indexing::Never,
    ]
    .into_iter()
    .enumerate()
    {
        let mut block = Vec::new();
        for (n, v, _) in fields {
            enc.encode_with(n, v, ix, &mut block);
        }
        l.clear();
        dec.decode(&block, 1 << 20, &mut l).unwrap();
        let mut lines = Vec::new();
        for (i, (n, _, want)) in fields.into_iter().enumerate() {
            assert_eq!(l.get(i), (n, want), "round {round} field {i}");
            lines.extend_from_slice(n);
            lines.extend_from_slice(b": ");
            lines.extend_from_slice(want);
            lines.extend_from_slice(b"\r\n");
        }
        assert_eq!(l.bytes(), &lines[..], "round {round}");
    }
}
