//! Rules run in order on requests and responses, without sockets. The
//! expected requests are what HAProxy 2.6's reg-tests (http-rules/
//! path_and_pathq, map_regm_with_backref, del_header) check on the server
//! side.

use super::*;
use crate::config::parse_str;
use crate::http1::parse_request;

/// The frontend `f`'s http-request rules and its matcher, compiled.
fn frontend(rules: &str) -> crate::proxy::Compiled {
    let text = format!(
        "defaults\n mode http\nfrontend f\n bind :8080\n{rules}\n default_backend b\nbackend b\n serve-files /tmp\n"
    );
    let cfg = parse_str("t.cfg", &text).unwrap_or_else(|e| panic!("{e:?}"));
    crate::proxy::compile(&cfg).unwrap_or_else(|e| panic!("{e:?}"))
}

fn base<'a>(dst: &'a dyn Fn() -> Option<std::net::SocketAddr>) -> Ctx<'a> {
    Ctx {
        src: "10.1.2.3:1234".parse().unwrap(),
        fe: "f",
        ..Ctx::detached(dst, None)
    }
}

/// Runs the frontend's request rules on `raw`; the head as a server
/// would get it (request line and fields), or the failure.
fn run(rules: &str, raw: &str) -> Result<String, RewriteFailed> {
    let c = frontend(rules);
    let fe = &c.frontends[0];
    let buf = raw.as_bytes();
    let Ok(Status::Complete(head)) = parse_request(buf, &Limits::default()) else {
        panic!("bad request in test");
    };
    let dst = || None;
    let b = base(&dst);
    let mut st = ReqState::new(Req {
        buf,
        head: &head,
        body: b"",
    });
    run_request(
        &fe.http_request,
        &fe.matcher,
        &b,
        &mut st,
        &Limits::default(),
    )?;
    let r = st.req();
    Ok(String::from_utf8_lossy(&r.buf[..r.head.head_len]).into_owned())
}

#[test]
fn path_rules_run_in_order_on_what_the_previous_left() {
    let rules = " http-request add-header x-path %[path]\n http-request add-header x-pathq %[pathq]\n http-request add-header x-query %[query]\n http-request add-header x-url %[url]\n http-request set-path /fe%[path]\n http-request replace-path (.*) /foo\\1\n http-request replace-path (.*) \\1/bar\n http-request set-pathq %[path]?app=regtest&%[query]\n http-request replace-pathq /([^?]*)\\?app=([^&]*)&?(.*) /\\2/\\1?\\3";
    let got = run(
        rules,
        "GET /req1?param1=val1&param2=val2 HTTP/1.1\r\nHost: h\r\n\r\n",
    )
    .unwrap();
    assert_eq!(
        got,
        "GET /regtest/foo/fe/req1/bar?param1=val1&param2=val2 HTTP/1.1\r\nHost: h\r\nx-path: /req1\r\nx-pathq: /req1?param1=val1&param2=val2\r\nx-query: param1=val1&param2=val2\r\nx-url: /req1?param1=val1&param2=val2\r\n\r\n"
    );
    // Absolute form: scheme and authority stay.
    let got = run(
        rules,
        "GET http://127.0.0.1/req2?p=1 HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n",
    )
    .unwrap();
    assert!(
        got.starts_with("GET http://127.0.0.1/regtest/foo/fe/req2/bar?p=1 HTTP/1.1\r\n"),
        "{got}"
    );
    assert!(
        got.contains("x-url: http://127.0.0.1/req2?p=1\r\n"),
        "{got}"
    );
}

#[test]
fn set_query_uri_and_method() {
    let q = |rule: &str, target: &str| {
        let got = run(rule, &format!("GET {target} HTTP/1.1\r\nHost: h\r\n\r\n")).unwrap();
        got.lines().next().unwrap().to_string()
    };
    assert_eq!(
        q(" http-request set-query a=1", "/p"),
        "GET /p?a=1 HTTP/1.1"
    );
    assert_eq!(
        q(" http-request set-query a=1", "/p?b"),
        "GET /p?a=1 HTTP/1.1"
    );
    // An empty value adds no '?', and never removes one.
    assert_eq!(
        q(" http-request set-query %[str()]", "/p"),
        "GET /p HTTP/1.1"
    );
    assert_eq!(
        q(" http-request set-query %[str()]", "/p?b"),
        "GET /p? HTTP/1.1"
    );
    assert_eq!(q(" http-request set-pathq /x", "/p?b"), "GET /x HTTP/1.1");
    assert_eq!(
        q(" http-request set-uri /u%[path]", "/p?b"),
        "GET /u/p HTTP/1.1"
    );
    assert_eq!(
        q(" http-request replace-uri ^/(.*) /v/\\1", "/p?b"),
        "GET /v/p?b HTTP/1.1"
    );
    // No match: unchanged.
    assert_eq!(
        q(" http-request replace-path ^/z(.*) /\\1", "/p"),
        "GET /p HTTP/1.1"
    );
    assert_eq!(q(" http-request set-method POST", "/p"), "POST /p HTTP/1.1");
}

#[test]
fn replace_value_then_a_variable_sees_the_new_value() {
    let rules = " http-request replace-value Host '(.*):.*' '\\1'\n http-request set-var(txn.host) req.hdr(Host)\n http-request set-header X-H %[var(txn.host)]\n http-request replace-header User-Agent curl foo\n http-request replace-value X-F ^192\\.168\\.(.*)$ 172.16.\\1";
    let got = run(
        rules,
        "GET / HTTP/1.1\r\nHost: example.org:8443\r\nUser-Agent: curl/7.47.0\r\nX-F: 192.168.10.1, 192.168.13.24,10.0.0.37\r\n\r\n",
    )
    .unwrap();
    assert!(got.contains("Host: example.org\r\n"), "{got}");
    assert!(got.contains("User-Agent: foo\r\n"), "{got}");
    // HAProxy 2.6.12: a replaced value loses the spaces around it.
    assert!(
        got.contains("X-F: 172.16.10.1,172.16.13.24,10.0.0.37\r\n"),
        "{got}"
    );
}

#[test]
fn del_header_matching_methods() {
    let rules = " http-request del-header x-str1\n http-request del-header x-str2 -m str\n http-request del-header x-beg -m beg\n http-request del-header end1 -m end\n http-request del-header sub -m sub\n http-request del-header ^x.reg.$ -m reg";
    let got = run(
        rules,
        "GET / HTTP/1.1\r\nHost: h\r\nx-always: a\r\nX-Str1: 1\r\nx-str2: 2\r\nx-beg1: 3\r\nx-end1: 4\r\nx-end2: 5\r\nx-sub1: 6\r\nX-Reg1: 7\r\n\r\n",
    )
    .unwrap();
    assert_eq!(
        got,
        "GET / HTTP/1.1\r\nHost: h\r\nx-always: a\r\nx-end2: 5\r\n\r\n"
    );
}

#[test]
fn failed_rewrites_are_reported() {
    // A method that is not a token, a path with a space.
    assert_eq!(
        run(
            " http-request set-method %[str(A\\ B)]",
            "GET / HTTP/1.1\r\nHost: h\r\n\r\n"
        ),
        Err(RewriteFailed)
    );
    assert_eq!(
        run(
            " http-request set-path %[str(/a\\ b)]",
            "GET / HTTP/1.1\r\nHost: h\r\n\r\n"
        ),
        Err(RewriteFailed)
    );
    // The body's framing cannot change under the server's feet.
    assert_eq!(
        run(
            " http-request del-header content-length",
            "POST / HTTP/1.1\r\nHost: h\r\nContent-Length: 3\r\n\r\n"
        ),
        Err(RewriteFailed)
    );
}

#[test]
fn conditions_see_earlier_rewrites() {
    let got = run(
        " http-request set-path /b\n http-request set-header x-b 1 if { path /b }",
        "GET /a HTTP/1.1\r\nHost: h\r\n\r\n",
    )
    .unwrap();
    assert!(got.contains("x-b: 1\r\n"), "{got}");
}

/// Runs the frontend's http-response rules on a response list.
fn respond(rules: &str, status: u16, fields: &[(&str, &str)]) -> ResHead {
    let c = frontend(rules);
    let fe = &c.frontends[0];
    let dst = || None;
    let b = base(&dst);
    let mut head = ResHead::new(
        status,
        b"OK".to_vec(),
        fields
            .iter()
            .map(|(n, v)| (n.as_bytes().to_vec(), v.as_bytes().to_vec()))
            .collect(),
    );
    run_response(&[(&fe.http_response[..], &fe.matcher)], &b, &mut head);
    head
}

#[test]
fn response_rules_read_the_response_as_it_is_now() {
    let h = respond(
        " http-response set-status 503 reason \"Slow Down\" if { status 200 }\n http-response set-header x-st %[status] if { status 503 }\n http-response replace-header x-a (.*) <\\1>\n http-response set-status 299",
        200,
        &[("x-a", "v")],
    );
    assert_eq!(h.status, 299);
    assert_eq!(h.reason, b"Success");
    assert_eq!(
        h.fields,
        vec![
            (b"x-a".to_vec(), b"<v>".to_vec()),
            (b"x-st".to_vec(), b"503".to_vec())
        ]
    );
    let h = respond(" http-response set-status 431", 200, &[]);
    assert_eq!(h.reason, b"Request Header Fields Too Large");
    // HAProxy's own table and classes, not RFC 9110's phrases.
    for (code, reason) in [
        (302, &b"Moved Temporarily"[..]),
        (504, b"Gateway Time-out"),
        (103, b"Informational"),
        (599, b"Server Error"),
        (600, b"Other"),
    ] {
        let h = respond(&format!(" http-response set-status {code}"), 200, &[]);
        assert_eq!(h.reason, reason, "{code}");
    }
    let h = respond(
        " http-response del-header x -m beg if { res.hdr(x1) -m found }",
        200,
        &[("x1", "1"), ("y", "2")],
    );
    assert_eq!(h.fields, vec![(b"y".to_vec(), b"2".to_vec())]);
}

#[test]
fn after_response_rewrites_an_answer_in_place() {
    let c = frontend(
        " http-after-response set-header x-a %[status]\n http-after-response set-status 202",
    );
    let fe = &c.frontends[0];
    let dst = || None;
    let b = base(&dst);
    let mut out = b"prev".to_vec();
    out.extend_from_slice(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\nServer: ebb\r\n\r\nhi");
    let st = after_local(fe, None, &b, &mut out, 4);
    assert_eq!(st, Some(202));
    assert_eq!(
        String::from_utf8(out).unwrap(),
        // The framing stays in its place, as HAProxy's does.
        "prevHTTP/1.1 202 Accepted\r\nContent-Length: 2\r\nServer: ebb\r\nx-a: 200\r\n\r\nhi"
    );
}

#[test]
fn response_rules_cannot_touch_framing_fields() {
    for r in [
        "http-response set-header Content-Length 1",
        "http-after-response del-header transfer-encoding",
        "http-response replace-header Connection a b",
    ] {
        let text = format!("defaults\n mode http\nfrontend f\n bind :8080\n {r}\n default_backend b\nbackend b\n serve-files /tmp\n");
        let e = parse_str("t.cfg", &text).unwrap_err();
        assert!(
            format!("{e:?}").contains("writes this field itself"),
            "{r}: {e:?}"
        );
    }
}

#[test]
fn response_allow_skips_the_rest_of_the_list() {
    // HAProxy 2.6: `http-response allow` stops this proxy's list; a
    // condition that does not hold lets the rules go on.
    let h = respond(
        " http-response set-header x-a 1\n http-response allow if { status 201 }\n http-response set-header x-b 2\n http-response allow\n http-response set-header x-c 3",
        200,
        &[],
    );
    assert_eq!(
        h.fields,
        vec![
            (b"x-a".to_vec(), b"1".to_vec()),
            (b"x-b".to_vec(), b"2".to_vec())
        ]
    );
    let h = respond(
        " http-response allow if { status 201 }\n http-response set-header x-b 2",
        201,
        &[],
    );
    assert!(h.fields.is_empty());
}

/// `replace-value` splits a value as `hdr()` does: a comma inside a quoted
/// string does not separate (HAProxy 2.6.12 sends `<"q,x">,<y>` for
/// `"q,x", y`); the values it leaves keep their spaces.
#[test]
fn replace_value_keeps_quoted_commas_together() {
    let re = Re::new("^(.*)$").unwrap();
    assert_eq!(
        replace_values(&re, br#""q,x", y"#, br"<\1>"),
        br#"<"q,x">,<y>"#.to_vec()
    );
    let re = Re::new("^y$").unwrap();
    assert_eq!(
        replace_values(&re, br#""a\",b" , y"#, b"z"),
        br#""a\",b" ,z"#.to_vec()
    );
}
