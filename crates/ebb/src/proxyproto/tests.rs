//! PROXY protocol tests: the spec's examples, every refusal, partial input
//! at every split point, and encode -> parse round trips.

use super::*;

fn done(b: &[u8]) -> (Header, usize) {
    match parse(b) {
        Parsed::Done(h, n) => (h, n),
        other => panic!("{:?} -> {other:?}", String::from_utf8_lossy(b)),
    }
}

fn err(b: &[u8]) -> Error {
    match parse(b) {
        Parsed::Error(e) => e,
        other => panic!("{:?} -> {other:?}", String::from_utf8_lossy(b)),
    }
}

/// Every strict prefix of a valid header is Partial.
fn prefixes_are_partial(b: &[u8], n: usize) {
    for i in 0..n {
        assert_eq!(parse(&b[..i]), Parsed::Partial, "prefix of {i} bytes");
    }
}

#[test]
fn v1_spec_examples() {
    let b = b"PROXY TCP4 192.168.0.1 192.168.0.11 56324 443\r\nGET / HTTP/1.1\r\n";
    let (h, n) = done(b);
    assert_eq!(&b[n..], b"GET / HTTP/1.1\r\n");
    assert_eq!(h.version, 1);
    assert_eq!(
        h.addrs.socket_addrs(),
        Some((
            "192.168.0.1:56324".parse().unwrap(),
            "192.168.0.11:443".parse().unwrap()
        ))
    );
    prefixes_are_partial(b, n);

    let tcp6 = b"PROXY TCP6 ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff 65535 65535\r\n";
    let (h, n) = done(tcp6);
    assert_eq!(n, 104);
    assert!(matches!(h.addrs, Addrs::V6 { .. }));

    assert_eq!(done(b"PROXY UNKNOWN\r\n").0.addrs, Addrs::Unknown);
    let unk = b"PROXY UNKNOWN ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff 65535 65535\r\n";
    // The spec's worst case: exactly 107 bytes.
    assert_eq!(unk.len(), V1_MAX);
    assert_eq!(done(unk), (done(b"PROXY UNKNOWN\r\n").0, 107));
}

#[test]
fn v1_refusals() {
    assert_eq!(err(b"GET / HTTP/1.1\r\n"), Error::NotProxy);
    assert_eq!(err(b"PROXY TCP4 1.2.3.4 5.6.7.8 1 2\n"), Error::V1Syntax);
    assert_eq!(err(b"PROXY TCP4 1.2.3.4  5.6.7.8 1 2\r\n"), Error::V1Syntax);
    assert_eq!(err(b"PROXY TCP4 1.2.3.4 5.6.7.8 1\r\n"), Error::V1Syntax);
    assert_eq!(
        err(b"PROXY UDP4 1.2.3.4 5.6.7.8 1 2\r\n"),
        Error::V1Protocol
    );
    assert_eq!(err(b"PROXY UNKNOWNX\r\n"), Error::V1Protocol);
    assert_eq!(
        err(b"PROXY TCP4 1.2.3.256 5.6.7.8 1 2\r\n"),
        Error::V1Address
    );
    assert_eq!(
        err(b"PROXY TCP4 01.2.3.4 5.6.7.8 1 2\r\n"),
        Error::V1Address
    );
    assert_eq!(err(b"PROXY TCP4 ::1 5.6.7.8 1 2\r\n"), Error::V1Address);
    assert_eq!(err(b"PROXY TCP6 1.2.3.4 ::1 1 2\r\n"), Error::V1Address);
    assert_eq!(
        err(b"PROXY TCP4 1.2.3.4 5.6.7.8 65536 2\r\n"),
        Error::V1Port
    );
    assert_eq!(err(b"PROXY TCP4 1.2.3.4 5.6.7.8 080 2\r\n"), Error::V1Port);
    assert_eq!(err(b"PROXY TCP4 1.2.3.4 5.6.7.8 +80 2\r\n"), Error::V1Port);
    assert_eq!(err(b"PROXY TCP4 1.2.3.4 5.6.7.8 -1 2\r\n"), Error::V1Port);
    // No CRLF within 107 bytes: refused, not Partial forever.
    let mut long = b"PROXY UNKNOWN ".to_vec();
    long.resize(V1_MAX, b'x');
    assert_eq!(err(&long), Error::V1TooLong);
    long.truncate(V1_MAX - 1);
    assert_eq!(parse(&long), Parsed::Partial);
    assert_eq!(err(b"PROXY TCP4 1.2.3.4 5.6.7.8 1 2\r\r\n"), Error::V1Port);
    assert_eq!(err(b"PROXX"), Error::NotProxy);
    assert_eq!(err(b"PROXY\r\n"), Error::NotProxy);
}

fn v2(cmd: u8, fam: u8, body: &[u8]) -> Vec<u8> {
    let mut b = V2_SIG.to_vec();
    b.push(cmd);
    b.push(fam);
    b.extend_from_slice(&(body.len() as u16).to_be_bytes());
    b.extend_from_slice(body);
    b
}

#[test]
fn v2_tcp4_tcp6_unix_unspec_local() {
    let body = [127, 0, 0, 1, 10, 0, 0, 2, 0x1f, 0x90, 0x01, 0xbb];
    let mut b = v2(0x21, 0x11, &body);
    b.extend_from_slice(b"payload");
    let (h, n) = done(&b);
    assert_eq!(n, 28);
    assert_eq!(h.command, Command::Proxy);
    assert_eq!(
        h.addrs.socket_addrs(),
        Some((
            "127.0.0.1:8080".parse().unwrap(),
            "10.0.0.2:443".parse().unwrap()
        ))
    );
    prefixes_are_partial(&b, n);

    let mut body6 = vec![0u8; 36];
    body6[15] = 1; // ::1
    body6[16] = 0x20;
    body6[17] = 0x01; // 2001::
    body6[32..34].copy_from_slice(&1234u16.to_be_bytes());
    body6[34..36].copy_from_slice(&80u16.to_be_bytes());
    let (h, _) = done(&v2(0x21, 0x21, &body6));
    assert_eq!(
        h.addrs.socket_addrs(),
        Some((
            "[::1]:1234".parse().unwrap(),
            "[2001::]:80".parse().unwrap()
        ))
    );

    let mut bu = vec![0u8; 216];
    bu[..5].copy_from_slice(b"/a.sk");
    bu[108..110].copy_from_slice(b"/b");
    let (h, _) = done(&v2(0x21, 0x31, &bu));
    assert_eq!(
        h.addrs,
        Addrs::Unix {
            src: b"/a.sk".to_vec(),
            dst: b"/b".to_vec(),
            transport: Transport::Stream
        }
    );

    // UNSPEC with PROXY, and LOCAL with an address block: addresses unknown.
    assert_eq!(done(&v2(0x21, 0x00, &[])).0.addrs, Addrs::Unknown);
    let (h, n) = done(&v2(0x20, 0x11, &body));
    assert_eq!(
        (h.command, h.addrs, n),
        (Command::Local, Addrs::Unknown, 28)
    );
    // DGRAM is kept as such.
    assert!(matches!(
        done(&v2(0x21, 0x12, &body)).0.addrs,
        Addrs::V4 {
            transport: Transport::Dgram,
            ..
        }
    ));
}

#[test]
fn v2_refusals() {
    let body = [127, 0, 0, 1, 10, 0, 0, 2, 0, 1, 0, 2];
    assert_eq!(err(&v2(0x11, 0x11, &body)), Error::V2Version);
    assert_eq!(err(&v2(0x22, 0x11, &body)), Error::V2Command);
    assert_eq!(err(&v2(0x21, 0x41, &body)), Error::V2Family);
    assert_eq!(err(&v2(0x21, 0x13, &body)), Error::V2Family);
    assert_eq!(err(&v2(0x21, 0x10, &body)), Error::V2Family);
    assert_eq!(err(&v2(0x21, 0x11, &body[..11])), Error::V2Length);
    assert_eq!(err(&v2(0x21, 0x21, &body)), Error::V2Length);
    // A TLV that overruns, and a trailing byte that is not a TLV.
    let mut b = body.to_vec();
    b.extend_from_slice(&[tlv::NOOP, 0, 5, 1, 2]);
    assert_eq!(err(&v2(0x21, 0x11, &b)), Error::V2Tlv);
    let mut b = body.to_vec();
    b.push(0);
    assert_eq!(err(&v2(0x21, 0x11, &b)), Error::V2Tlv);
    // HAProxy's limits: an authority of 255 bytes, a unique id of 128.
    for (kind, max) in [(tlv::AUTHORITY, 255u16), (tlv::UNIQUE_ID, 128)] {
        for len in [max, max + 1] {
            let mut b = body.to_vec();
            b.push(kind);
            b.extend_from_slice(&len.to_be_bytes());
            b.extend(std::iter::repeat_n(b'a', len as usize));
            let h = v2(0x21, 0x11, &b);
            if len == max {
                assert_eq!(done(&h).0.tlv(kind).map(<[u8]>::len), Some(len as usize));
            } else {
                assert_eq!(err(&h), Error::V2Tlv);
            }
        }
    }
    // A signature that goes wrong midway is not a header.
    let mut s = V2_SIG.to_vec();
    s[7] = b'X';
    assert_eq!(err(&s), Error::NotProxy);
}

#[test]
fn v2_tlvs_kept_and_crc_checked() {
    let h = Header {
        version: 2,
        command: Command::Proxy,
        addrs: Addrs::V4 {
            src: "192.0.2.1:40000".parse().unwrap(),
            dst: "192.0.2.2:443".parse().unwrap(),
            transport: Transport::Stream,
        },
        tlvs: vec![
            Tlv {
                kind: tlv::ALPN,
                value: b"h2".to_vec(),
            },
            Tlv {
                kind: tlv::AUTHORITY,
                value: b"a.example".to_vec(),
            },
        ],
    };
    let b = encode_v2(&h, true).unwrap();
    let (got, n) = done(&b);
    assert_eq!(n, b.len());
    assert_eq!(got.tlv(tlv::ALPN), Some(&b"h2"[..]));
    assert_eq!(got.tlv(tlv::AUTHORITY), Some(&b"a.example"[..]));
    assert_eq!(got.tlvs.len(), 3);
    assert_eq!(got.tlvs[2].kind, tlv::CRC32C);
    // Flip one payload bit: the checksum catches it.
    let mut bad = b.clone();
    bad[20] ^= 1;
    assert_eq!(err(&bad), Error::V2Checksum);
    // The check value of CRC32C (RFC 3720 appendix B.4 / the usual "123456789").
    assert_eq!(crc32c_with_hole(b"123456789", 100), 0xE306_9283);
}

#[test]
fn encode_parse_round_trips() {
    let cases = [
        Addrs::V4 {
            src: "1.2.3.4:5".parse().unwrap(),
            dst: "6.7.8.9:65535".parse().unwrap(),
            transport: Transport::Stream,
        },
        Addrs::V6 {
            src: "[2001:db8::1]:0".parse().unwrap(),
            dst: "[::ffff:1.2.3.4]:80".parse().unwrap(),
            transport: Transport::Stream,
        },
        Addrs::Unknown,
    ];
    for a in cases {
        let h = Header {
            version: 1,
            command: Command::Proxy,
            addrs: a.clone(),
            tlvs: vec![],
        };
        let b1 = encode_v1(&h);
        assert_eq!(done(&b1), (h.clone(), b1.len()));
        let h2 = Header { version: 2, ..h };
        let b2 = encode_v2(&h2, false).unwrap();
        assert_eq!(done(&b2), (h2, b2.len()));
    }
    let local = Header {
        version: 2,
        command: Command::Local,
        addrs: Addrs::Unknown,
        tlvs: vec![],
    };
    assert_eq!(encode_v2(&local, false).unwrap().len(), 16);
    // Too long a TLV does not fit the length field.
    let big = Header {
        tlvs: vec![Tlv {
            kind: tlv::NOOP,
            value: vec![0; 70_000],
        }],
        ..local
    };
    assert_eq!(encode_v2(&big, false), None);
}
