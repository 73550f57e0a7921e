use super::conn::*;
use super::http::*;
use super::observe::*;
use super::*;
use crate::config::{CheckConnect, HttpCheck};
use regex::bytes::Regex;
use std::io::{Read, Write};

#[test]
fn judging_http_answers() {
    let ok = b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok";
    let bad = b"HTTP/1.1 503 Service Unavailable\r\n\r\n";
    let v = judge(ok, &Expect::Default);
    assert_eq!((v.st, v.code), (CheckStatus::L7Ok, 200));
    let v = judge(bad, &Expect::Default);
    assert_eq!((v.st, v.code), (CheckStatus::L7Sts, 503));
    assert_eq!(
        v.reason(),
        "Layer7 wrong status, code: 503, info: \"Service Unavailable\""
    );
    assert!(judge(bad, &Expect::Status(vec![(500, 599)], false)).passed());
    assert!(!judge(ok, &Expect::Status(vec![(200, 200)], true)).passed());
    assert!(judge(ok, &Expect::RStatus(Regex::new("^2").unwrap(), false)).passed());
    assert!(judge(ok, &Expect::String(b"ok".to_vec(), false)).passed());
    let v = judge(ok, &Expect::String(b"nope".to_vec(), false));
    assert_eq!(v.st, CheckStatus::L7Rsp);
    assert_eq!(v.desc, "HTTP content check did not match");
    // No body: every body rule fails, a negated one too (HAProxy's).
    let empty = b"HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n";
    for e in [
        Expect::String(b"x".to_vec(), true),
        Expect::RString(Regex::new("x").unwrap(), true),
        Expect::RString(Regex::new("^$").unwrap(), false),
    ] {
        let v = judge(empty, &e);
        assert_eq!(v.st, CheckStatus::L7Rsp);
        assert_eq!(v.desc, "HTTP content check could not find a response body");
    }
    assert!(!judge(b"garbage", &Expect::Default).passed());
    assert!(!judge(b"SSH-2.0\r\n", &Expect::Default).passed());
}

/// `hdr` looks at each comma-separated value, `fhdr` at the whole
/// value; names match case-insensitively, values exactly (the
/// answer of HAProxy's http-check-expect reg-test).
#[test]
fn header_rules() {
    let r = b"HTTP/1.1 202 Accepted\r\nx-test1: true, next value\r\nx-test2: true, begin-value, value-end, value-sub-string, value-reg-123ABC\r\nx-begin-test: 1\r\n\r\n";
    let hdr = |full, n: NameMatch, v: Option<NameMatch>| Expect::Hdr {
        full,
        name: HdrPat::Fixed(n),
        value: v.map(HdrPat::Fixed),
        neg: false,
    };
    let s = |x: &str| x.as_bytes().to_vec();
    let re = |x: &str| NameMatch::Reg(Regex::new(x).unwrap());
    for e in [
        hdr(false, NameMatch::Str(s("X-Test2")), None),
        hdr(false, NameMatch::Beg(s("X-Begin-")), None),
        hdr(false, NameMatch::End(s("-TEST")), None),
        hdr(
            true,
            NameMatch::Str(s("x-test1")),
            Some(NameMatch::Str(s("true, next value"))),
        ),
        hdr(
            false,
            NameMatch::Str(s("x-test2")),
            Some(NameMatch::Str(s("true"))),
        ),
        hdr(
            false,
            NameMatch::Beg(s("x-test")),
            Some(NameMatch::End(s("-end"))),
        ),
        hdr(
            false,
            NameMatch::Beg(s("x-test")),
            Some(NameMatch::Sub(s("-sub-"))),
        ),
        hdr(
            false,
            NameMatch::Beg(s("x-test")),
            Some(re("^value-reg-[A-Z0-9]+$")),
        ),
        hdr(
            true,
            NameMatch::Beg(s("x-test")),
            Some(re("value-reg-[A-Z0-9]+")),
        ),
    ] {
        let v = judge(r, &e);
        assert_eq!((v.st, v.code), (CheckStatus::L7Ok, 202));
    }
    for e in [
        hdr(false, NameMatch::Str(s("x-none")), None),
        // fhdr: the whole value, not one of its items.
        hdr(
            true,
            NameMatch::Str(s("x-test1")),
            Some(NameMatch::Str(s("true"))),
        ),
        // Values are compared with their case.
        hdr(
            false,
            NameMatch::Str(s("x-test2")),
            Some(NameMatch::Str(s("TRUE"))),
        ),
    ] {
        let v = judge(r, &e);
        assert_eq!(v.st, CheckStatus::L7Sts);
        assert_eq!(v.desc, "Accepted");
    }
    let neg = Expect::Hdr {
        full: false,
        name: HdrPat::Fixed(NameMatch::Str(s("x-test1"))),
        value: None,
        neg: true,
    };
    assert!(!judge(r, &neg).passed());
}

/// HAProxy's table of what `observe` counts: a failed connect in both
/// modes, an established connection clears only in layer4, the HTTP
/// events only in layer7; 501 and 505 are good answers.
#[test]
fn observe_judges_as_haproxy() {
    use crate::config::Observe;
    let (l4, l7) = (Observe::Layer4, Observe::Layer7);
    assert_eq!(Seen::L4Err.judge(l4), Some(true));
    assert_eq!(Seen::L4Err.judge(l7), Some(true));
    assert_eq!(Seen::L4Ok.judge(l4), Some(false));
    assert_eq!(Seen::L4Ok.judge(l7), None);
    assert_eq!(Seen::HttpSts.judge(l4), None);
    assert_eq!(Seen::HttpSts.judge(l7), Some(true));
    assert_eq!(Seen::ReadTimeout.judge(l7), Some(true));
    assert_eq!(Seen::HttpOk.judge(l7), Some(false));
    assert_eq!(Seen::L4Err.judge(Observe::None), None);
    for code in [100, 200, 404, 499, 501, 505] {
        assert_eq!(Seen::status(code), Seen::HttpOk, "{code}");
    }
    for code in [99, 500, 502, 503, 504, 599] {
        assert_eq!(Seen::status(code), Seen::HttpSts, "{code}");
    }
}

/// HAProxy 2.6's first dates: check i of n at i/n of the larger of its
/// interval and the smallest one of at least a second, bounded by
/// `max-spread-checks`.
#[test]
fn first_checks_spread_as_haproxy() {
    let ms = Duration::from_millis;
    let got = |inters: &[u64], cap| -> Vec<u128> {
        let d: Vec<_> = inters.iter().map(|m| ms(*m)).collect();
        first_dates_within(&d, cap)
            .iter()
            .map(|d| d.as_millis())
            .collect()
    };
    // Four servers at 2 s: 0, 500, 1000, 1500 ms (haproxy's own, by strace).
    assert_eq!(got(&[2000; 4], 0), [0, 500, 1000, 1500]);
    // A short interval does not set the spread; a longer one keeps its own.
    assert_eq!(got(&[100, 2000, 5000, 3000], 0), [0, 500, 2500, 2250]);
    // None of a second or more: each by its own interval.
    assert_eq!(got(&[100, 200], 0), [0, 100]);
    // `max-spread-checks` bounds the spread.
    assert_eq!(got(&[10_000; 4], 2000), [0, 500, 1000, 1500]);
    assert!(got(&[], 0).is_empty());
    // A check added at run time: one interval (bounded).
    assert_eq!(first_date(0, 3000, 0, 1, 1), ms(3000));
    assert_eq!(first_date(0, 3000, 1000, 1, 1), ms(1000));
}

/// `spread-checks N` keeps each date within N % of the interval,
/// both ways, and does move it.
#[test]
fn spread_stays_within_its_share() {
    let mut rng = spread_seed(7);
    let sec = Duration::from_millis(1000);
    let d: Vec<u128> = (0..200)
        .map(|_| spread_by(sec, 50, &mut rng).as_millis())
        .collect();
    assert!(d.iter().all(|x| (500..=1500).contains(x)), "{d:?}");
    assert!(
        d.iter().any(|x| *x < 800) && d.iter().any(|x| *x > 1200),
        "{d:?}"
    );
    assert!((0..100).all(|_| (950..=1050).contains(&spread_by(sec, 5, &mut rng).as_millis())));
    assert_eq!(spread_by(sec, 0, &mut rng), sec);
}

/// HAProxy's `info` text escapes what is not printable.
#[test]
fn reasons_are_haproxys() {
    let v = Verdict::new(CheckStatus::L4Con, "Connection refused");
    assert_eq!(
        v.reason(),
        "Layer4 connection problem, info: \"Connection refused\""
    );
    let v = Verdict::new(CheckStatus::L7Ok, "a\"b<\x01");
    assert_eq!(
        v.reason(),
        "Layer7 check passed, code: 0, info: \"a<22>b<3C><01>\""
    );
    assert_eq!(
        Verdict::new(CheckStatus::L4Ok, "").reason(),
        "Layer4 check passed"
    );
}

#[test]
fn probe_request() {
    let c = HttpCheck {
        enabled: true,
        method: "GET".into(),
        uri: "/health".into(),
        version: "HTTP/1.1".into(),
        headers: vec![],
        body: None,
        explicit_send: false,
        own: true,
        rules: vec![],
        send_state: false,
        disable_404: false,
        uri_lf: false,
        body_lf: false,
    };
    let p = HttpProbe::new(&c, "10.0.0.1:80").unwrap();
    let HttpStep::Send(req) = &p.steps[1] else {
        panic!("connect, send, expect");
    };
    assert!(matches!(p.steps[2], HttpStep::Expect(_)));
    assert_eq!(
        String::from_utf8(req.clone()).unwrap(),
        "GET /health HTTP/1.1\r\nHost: 10.0.0.1:80\r\nConnection: close\r\n\r\n"
    );
}

#[test]
fn tcp_and_http_checks_against_real_sockets() {
    let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = l.local_addr().unwrap();
    std::thread::spawn(move || {
        for mut s in l.incoming().flatten().take(2) {
            let mut b = [0u8; 512];
            let _ = s.read(&mut b);
            let _ = s.write_all(b"HTTP/1.0 200 OK\r\n\r\nalive");
        }
    });
    assert!(run_check(
        addr,
        Duration::from_secs(2),
        None,
        None,
        &[],
        ("b", "s", None),
        CheckHow::default(),
    )
    .passed());
    let probe = Probe::Http(HttpProbe {
        steps: vec![
            HttpStep::Connect(CheckConnect {
                default: true,
                ..CheckConnect::default()
            }),
            HttpStep::Send(b"GET / HTTP/1.0\r\n\r\n".to_vec()),
            HttpStep::Expect(HttpRule::plain(Expect::String(b"alive".to_vec(), false))),
        ],
        send_state: false,
        disable_404: false,
        fcgi: None,
    });
    assert!(run_check(
        addr,
        Duration::from_secs(2),
        Some(&probe),
        None,
        &[],
        ("b", "s", None),
        CheckHow::default(),
    )
    .passed());
    // Nothing listens on a port we just released.
    let dead = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        l.local_addr().unwrap()
    };
    let e = run_check(
        dead,
        Duration::from_millis(500),
        None,
        None,
        &[],
        ("b", "s", None),
        CheckHow::default(),
    );
    assert_eq!(e.st, CheckStatus::L4Con, "{e:?}");
    assert_eq!(e.desc, "Connection refused");
}
