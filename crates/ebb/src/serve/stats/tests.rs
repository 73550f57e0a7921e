use super::*;

#[test]
fn words_are_found_anywhere_after_the_uri() {
    let r = parse_page(b"", true);
    assert_eq!(r, PageReq::default());
    let r = parse_page(b";csv;norefresh", true);
    assert!(r.o.csv && r.o.norefresh);
    // `;norefresh` only counts when the page refreshes.
    assert!(!parse_page(b";norefresh", false).o.norefresh);
    let r = parse_page(b"/x;upx?y;no-maint", true);
    assert!(r.o.up_only && r.o.no_maint);
    let r = parse_page(b"?;csv;scope=b1", true);
    assert!(r.o.csv);
    assert_eq!(r.scope.as_deref(), Some("b1"));
    // Cut at `&`, `;` or a space; dropped with a bad character; at
    // least two characters must follow `scope=`.
    assert_eq!(
        parse_page(b"?scope=be&x=1", true).scope.as_deref(),
        Some("be")
    );
    assert_eq!(parse_page(b"?scope=b<1;", true).scope, None);
    assert_eq!(parse_page(b"?scope=b", true).scope, None);
    let long = parse_page(b"?scope=abcdefghijklmnopqrstuvwxyz", true);
    assert_eq!(long.scope.as_deref(), Some("abcdefghijklmnopqrst"));
    assert_eq!(parse_page(b";st=DONE", true).st, Some("DONE"));
    assert_eq!(parse_page(b";st=WHAT", true).st, Some("UNKN"));
    assert_eq!(parse_page(b";st=DON", true).st, None);
    let r = parse_page(b";json-schema", true);
    assert!(r.o.json && r.o.schema);
    assert!(in_scope(Some("B1"), "b1x"));
    assert!(!in_scope(Some("b2"), "b1"));
    assert!(in_scope(None, "any"));
}

#[test]
fn which_requests_are_the_page() {
    let st = |uri: &str| crate::proxy::StatsRt {
        uri: uri.into(),
        refresh: None,
        auth: Vec::new(),
        realm: String::new(),
        hide_version: false,
        admin: Vec::new(),
        show_node: None,
        show_desc: None,
        show_legends: false,
    };
    let s = st("/stats");
    for p in ["/stats", "/stats;csv", "/statsx", "/stats/x", "/stats?b=x"] {
        assert!(is_page(&s, p.as_bytes(), true), "{p}");
    }
    assert!(!is_page(&s, b"/stats", false));
    for p in ["/other", "/stat"] {
        assert!(!is_page(&s, p.as_bytes(), true), "{p}");
    }
    let d = st("/haproxy?stats");
    assert!(is_page(&d, b"/haproxy?stats;csv", true));
    assert!(!is_page(&d, b"/haproxy?other", true));
}

#[test]
fn basic_auth() {
    // "admin:s3cret"
    let users = vec![("admin".to_string(), "s3cret".to_string())];
    assert!(auth_ok(&users, Some(b"Basic YWRtaW46czNjcmV0")));
    assert!(!auth_ok(&users, Some(b"Basic YWRtaW46d3Jvbmc=")));
    assert!(!auth_ok(&users, None));
    assert!(!auth_ok(&users, Some(b"Bearer x")));
    assert!(auth_ok(&[], None));
    assert_eq!(base64_decode("aGk=").unwrap(), b"hi");
    assert!(base64_decode("a*b").is_none());
}

#[test]
fn check_codes_are_haproxys() {
    use crate::backend::check::Verdict;
    use crate::config::CheckStatus;
    assert_eq!(check_code(&Verdict::default()).0, "INI");
    let c = check_code(&Verdict::new(CheckStatus::L4Con, "Connection refused"));
    assert_eq!(
        c,
        (
            "L4CON",
            None,
            "Layer4 connection problem",
            "Connection refused".into()
        )
    );
    let mut v = Verdict::new(CheckStatus::L7Sts, "Service Unavailable");
    v.code = 503;
    assert_eq!(check_code(&v).1, Some(503));
    assert_eq!(check_code(&Verdict::new(CheckStatus::L7Ok, "")).1, Some(0));
}

#[test]
fn columns_filters_and_typed() {
    let cols = csv_columns();
    assert_eq!(cols.len(), 128);
    assert_eq!(cols[103], "-");
    assert_eq!(cols[36], "check_status");
    let mut r = Row::new("be", "s1", Kind::Server, 3, 2);
    r.status = "UP".into();
    r.check_status = "L7OK".into();
    let out = csv(std::slice::from_ref(&r));
    let line = out.lines().nth(1).unwrap();
    assert_eq!(line.matches(',').count(), 128);
    let f = Filter {
        proxy: Some("3".into()),
        types: Some(4),
        sid: Some(2),
    };
    assert!(f.keep(&r));
    assert!(!Filter {
        sid: Some(1),
        ..f.clone()
    }
    .keep(&r));
    assert!(!Filter {
        types: Some(3),
        ..f.clone()
    }
    .keep(&r));
    assert!(Filter {
        proxy: Some("be".into()),
        ..f
    }
    .keep(&r));
    let t = typed(&[r]);
    assert!(t.contains("S.3.2.36.check_status.1:MOP:str:L7OK\n"), "{t}");
    assert!(t.contains("S.3.2.26.pid.1:KGP:u32:1\n"), "{t}");
}

#[test]
fn escapes_and_decodes() {
    assert_eq!(esc("<a&\"'>"), "&lt;a&amp;&quot;&#39;&gt;");
    assert_eq!(unpct("a%2Fb+c").unwrap(), "a/b c");
    assert!(unpct("%G1").is_none());
}
