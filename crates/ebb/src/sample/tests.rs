//! Unit tests of fetches, converters and log-format strings, without
//! sockets. Expected values marked "HAProxy 2.6" were printed by
//! `haproxy` 2.6.12 from `http-request return lf-string "..."` with the
//! same expression and request.

use super::*;
use crate::http1::{parse_request, parse_response, Limits, Status};

const REQ: &str = "GET /p/q?x=1&y HTTP/1.1\r\nHost: www.Example.com:8080\r\nx: a, b\r\nx: c\r\nCookie: d=1; c=2\r\n\r\n";

fn with_ctx<R>(raw: &str, res: Option<&str>, f: impl FnOnce(&Ctx<'_>) -> R) -> R {
    let buf = raw.as_bytes();
    let Ok(Status::Complete(head)) = parse_request(buf, &Limits::default()) else {
        panic!("bad request in test");
    };
    let rhead;
    let rbuf;
    let resp = match res {
        Some(r) => {
            rbuf = r.as_bytes();
            let Ok(Status::Complete(h)) =
                parse_response(rbuf, &Limits::default(), crate::http1::Method::Get)
            else {
                panic!("bad response in test");
            };
            rhead = h;
            Some(Res::H1 {
                buf: rbuf,
                head: &rhead,
            })
        }
        None => None,
    };
    let dst = || Some("127.0.0.1:18481".parse().unwrap());
    let ctx = Ctx {
        src: "127.0.0.1:40000".parse().unwrap(),
        dst: &dst,
        fe: "f",
        be: Some("b"),
        srv: Some("s1"),
        tls: false,
        sni: None,
        client_cert: None,
        fc: None,
        early: false,
        req: Some(Req {
            buf,
            head: &head,
            body: b"",
        }),
        res: resp,
        vars: None,
        stk: None,
        payload: None,
        res_body: None,
    };
    f(&ctx)
}

const RQ: Scope = Scope::Request { backend: true };

fn lf(fmt: &str) -> String {
    lf_scope(fmt, RQ, None)
}

fn lf_scope(fmt: &str, scope: Scope, res: Option<&str>) -> String {
    let l = LogFormat::parse(fmt, scope).unwrap_or_else(|e| panic!("{fmt}: {e}"));
    with_ctx(REQ, res, |c| {
        let mut out = Vec::new();
        l.render(c, &mut out);
        String::from_utf8_lossy(&out).into_owned()
    })
}

/// `a.b.c.d:port` or `a.b.c.d` as `X` writes it.
fn hexed(w: &str) -> String {
    let (ip, port) = w.split_once(':').unwrap_or((w, ""));
    let mut s: String = ip
        .split('.')
        .map(|b| format!("{:02X}", b.parse::<u8>().unwrap()))
        .collect();
    if !port.is_empty() {
        s += &format!(":{:04X}", port.parse::<u16>().unwrap());
    }
    s
}

fn err(fmt: &str, scope: Scope) -> String {
    LogFormat::parse(fmt, scope)
        .err()
        .unwrap_or_else(|| panic!("{fmt} parsed"))
}

#[test]
fn hashes_match_haproxy() {
    // HAProxy 2.6.
    let long = "abcdefghijklmnopqrstuvwxyz0123456789ABCDEF";
    assert_eq!(lf("%[str(abc),djb2]"), "193485963");
    assert_eq!(lf("%[str(abc),sdbm]"), "807794786");
    assert_eq!(lf("%[str(abc),wt6]"), "2483038440");
    assert_eq!(lf("%[str(abc),crc32]"), "891568578");
    // http_date: HAProxy's IMF-fixdate, with an offset and a unit.
    assert_eq!(
        lf("%[int(1603385472),http_date]"),
        "Thu, 22 Oct 2020 16:51:12 GMT"
    );
    assert_eq!(
        lf("%[int(1603385472000),http_date(-1000,ms)]"),
        "Thu, 22 Oct 2020 16:51:11.0 GMT"
    );
    assert_eq!(lf("%[str(abc),xxh64]"), "4952883123889572249");
    assert_eq!(lf("%[str(abc),xxh64(5)]"), "-1753195980308443340");
    assert_eq!(lf("%[str(abc),djb2(1)]"), "2235766107");
    assert_eq!(lf("%[str(abc),sdbm(1)]"), "659243622");
    assert_eq!(lf("%[str(abc),wt6(1)]"), "266135527");
    assert_eq!(lf("%[str(abc),crc32(1)]"), "930845320");
    assert_eq!(lf("%[str(abc),crc32c]"), "910901175");
    assert_eq!(lf("%[str(abc),crc32c(1)]"), "1285784220");
    assert_eq!(lf("%[str(),djb2]"), "5381");
    assert_eq!(lf("%[str(),xxh64]"), "-1205034819632174695");
    assert_eq!(lf(&format!("%[str({long}),xxh64]")), "1539807644204849525");
    assert_eq!(lf(&format!("%[str({long}),crc32]")), "1033159553");
    assert_eq!(lf(&format!("%[str({long}),wt6]")), "3764726354");
    assert_eq!(lf(&format!("%[str({long}),sdbm]")), "2854104213");
    assert_eq!(lf(&format!("%[str({long}),djb2]")), "3899098310");
    // An integer hashes as its 8 bytes in network order.
    assert_eq!(lf("%[int(12345),wt6]"), "2887825986");
    // An address hashes as its 4 bytes.
    assert_eq!(lf("%[src,wt6]"), "2242437889");
}

#[test]
fn converters_match_haproxy() {
    // HAProxy 2.6.
    assert_eq!(lf("%[str(hello),base64]"), "aGVsbG8=");
    assert_eq!(lf("%[str(hi),hex]"), "6869");
    // `hex2i`: no sample at a byte that is no hex digit.
    assert_eq!(lf("%[str(7F000001),hex2i]"), "2130706433");
    assert_eq!(lf("%[str(ff),hex2i]"), "255");
    assert_eq!(lf("%[str(fg),hex2i]"), "");
    assert_eq!(lf("%[int(5),add(3),mul(2),sub(1),div(4)]"), "3");
    assert_eq!(lf("%[src,ipmask(24)]"), "127.0.0.0");
    assert_eq!(lf("%[str(10.1.2.3),ipmask(255.255.0.0)]"), "10.1.0.0");
    assert_eq!(lf("%[str(2001:db8::1),ipmask(24,64)]"), "2001:db8::");
    assert_eq!(lf("%[str(AbC),lower]"), "abc");
    assert_eq!(lf("%[str(x),upper]"), "X");
    assert_eq!(lf("%[str(a.b.c),field(2,.)]"), "b");
    assert_eq!(lf("%[str(a..b.c),word(2,.)]"), "b");
    assert_eq!(lf("%[str(a..b.c),word(2,.,2)]"), "b.c");
    assert_eq!(lf("%[str(a.b.c.d),field(2,.,2)]"), "b.c");
    assert_eq!(lf("%[str(a.b.c.d),field(-2,.,2)]"), "b.c");
    assert_eq!(lf("%[str(a.b.c),field(-1,.)]"), "c");
    assert_eq!(lf("%[str(a.b.c),word(-1,.)]"), "c");
    // HAProxy 2.6's walk (tests/diff seed 5): a count past the last word
    // runs to the value's end, delimiters included; a missing word is
    // the empty string.
    assert_eq!(lf("%[str(/a?x),word(-1,/,2)]"), "/a?x");
    assert_eq!(lf("%[str(a/),word(1,/,2)]"), "a/");
    assert_eq!(lf("%[str(a/b/),word(1,/,0)]"), "a/b/");
    assert_eq!(lf("<%[str(a/b),word(3,/)]>"), "<>");
    assert_eq!(lf("%[str(//a//b//c),word(2,/,2)]"), "b//c");
    assert_eq!(lf("%[str(a//b//c//),word(-2,/,2)]"), "a//b");
    assert_eq!(lf("%[str(a.b),field(9,.)]"), "");
    assert_eq!(lf("%[str(abcd),length]"), "4");
    assert_eq!(lf("%[str(),length]"), "0");
    assert_eq!(lf("%[str(abcdef),bytes(1,3)]"), "bcd");
    assert_eq!(lf("%[str(abcdef),bytes(4)]"), "ef");
    assert_eq!(lf("%[str(abc),bytes(5)]"), "");
    assert_eq!(lf("%[str(a%2Fb+c),url_dec]"), "a/b+c");
    assert_eq!(lf("%[str(a+b%41),url_dec(1)]"), "a bA");
    assert_eq!(lf("%[str(aGVsbG8=),b64dec]"), "hello");
    assert_eq!(lf("%[str(aXbXc),regsub(X,-,g)]"), "a-b-c");
    assert_eq!(lf("%[str(aXbXc),regsub(X,-)]"), "a-bXc");
    assert_eq!(lf("%[str(www.ex.com:80),host_only]"), "www.ex.com");
    assert_eq!(lf("%[str([::1]:80),host_only]"), "[::1]");
    // As HAProxy 2.6.12 (tests/diff seed 4): lowered, cut at the last
    // `:` after any `]`, whatever follows it.
    assert_eq!(lf("%[str(Foo.COM:8080),host_only]"), "foo.com");
    assert_eq!(lf("%[str(A:80:90),host_only]"), "a:80");
    assert_eq!(lf("%[str([AB::1]),host_only]"), "[ab::1]");
    assert_eq!(lf("%[str(a.B:x),host_only]"), "a.b");
    assert_eq!(
        lf("%[str(a:8080),port_only]|%[str(a:80x),port_only]|%[str([::1]),port_only]|%[str(a:),port_only]"),
        // HAProxy 2.6.12: every byte after the colon is a digit to
        // strl2ui (`x` is 72).
        "8080|872|0|0"
    );
    assert_eq!(lf("%[int(5),div(0)]"), "9223372036854775807");
    assert_eq!(lf("%[int(-7),div(2)]"), "-3");
    assert_eq!(lf("%[int(7),mod(3)]"), "1");
    assert_eq!(lf("%[int(-7),neg]"), "7");
    assert_eq!(lf("%[int(12),and(10)]"), "8");
    assert_eq!(lf("%[int(12),or(3)]"), "15");
    assert_eq!(lf("%[int(12),xor(10)]"), "6");
    assert_eq!(lf("%[int(0),cpl]"), "-1");
    assert_eq!(
        lf("%[int(5),bool] %[int(0),bool] %[int(0),not] %[int(3),not]"),
        "1 0 1 0"
    );
    assert_eq!(lf("%[int(-3),odd] %[int(-3),even] %[int(4),even]"), "1 0 1");
    assert_eq!(lf("%[str(41),add(1),odd]"), "0");
    assert_eq!(lf("%[bool(1)]"), "1");
    assert_eq!(lf("%[int(-3),add(5)]"), "2");
    assert_eq!(lf("%[str(12abc),add(1)]"), "13");
    assert_eq!(lf("%[str(ab),base64,b64dec,hex]"), "6162");
    assert_eq!(lf("%[str(é),hex]"), "C3A9");
}

#[test]
fn json_matches_haproxy() {
    // HAProxy 2.6 on the header value `a"b\\c/d<01>é`.
    let mut s = Scratch::default();
    s.cur.extend_from_slice("a\"b\\\\c/d\x01\u{e9}".as_bytes());
    let c = conv::Conv::compile("json", &[]).unwrap();
    let dst = || None;
    let ctx_head = crate::http1::RequestHead::default();
    let ctx = Ctx {
        src: "127.0.0.1:1".parse().unwrap(),
        dst: &dst,
        fe: "f",
        be: None,
        srv: None,
        tls: false,
        sni: None,
        client_cert: None,
        fc: None,
        early: false,
        req: Some(Req {
            buf: b"",
            head: &ctx_head,
            body: b"",
        }),
        res: None,
        vars: None,
        stk: None,
        payload: None,
        res_body: None,
    };
    let v = c.apply(Val::Str, &ctx, &mut s).unwrap();
    assert_eq!(v, Val::Str);
    assert_eq!(
        String::from_utf8_lossy(&s.cur),
        "a\\\"b\\\\\\\\c\\/d\\u0001\\u00c3\\u00a9"
    );
}

#[test]
fn request_fetches_match_haproxy() {
    // HAProxy 2.6, request `GET /p/q?x=1&y` with `x: a, b`, `x: c`,
    // `Cookie: d=1; c=2`.
    assert_eq!(lf("%[req.hdr_cnt(x)]"), "3");
    assert_eq!(lf("%[req.fhdr(x)]"), "c");
    assert_eq!(lf("%[req.hdr(x)]"), "c");
    assert_eq!(lf("%[hdr(x,1)]"), "a");
    assert_eq!(lf("%[hdr(x,2)]"), "b");
    assert_eq!(lf("%[hdr(x,-2)]"), "b");
    assert_eq!(lf("%[req.fhdr(x,1)]"), "a, b");
    assert_eq!(lf("%[req.fhdr_cnt(x)]"), "2");
    assert_eq!(lf("%[req.cook(c)]"), "2");
    assert_eq!(lf("%[cook(d)]"), "1");
    assert_eq!(lf("%[base]"), "www.Example.com:8080/p/q");
    assert_eq!(lf("%[url]"), "/p/q?x=1&y");
    assert_eq!(lf("%[path]"), "/p/q");
    assert_eq!(lf("%[query]"), "x=1&y");
    assert_eq!(lf("%[method]"), "GET");
    assert_eq!(lf("%[req.ver]"), "1.1");
    assert_eq!(lf("%[ssl_fc]"), "0");
    assert_eq!(lf("%[ssl_fc_sni]"), "");
    assert_eq!(lf("%[dst_port]"), "18481");
    assert_eq!(lf("%[dst]"), "127.0.0.1");
    assert_eq!(lf("%[src]:%[src_port]"), "127.0.0.1:40000");
    assert_eq!(lf("%[fe_name]/%[be_name]"), "f/b");
    assert_eq!(
        lf("a=%[req.hdr(nonexist)] b=%[req.hdr(nonexist),lower]"),
        "a= b="
    );
    assert_eq!(lf("%[req.hdr(HOST),lower,field(1,:)]"), "www.example.com");
}

#[test]
fn aliases_match_haproxy() {
    // HAProxy 2.6.
    assert_eq!(lf("q=%{+Q}ci r=%{+Q}[src]"), "q=\"127.0.0.1\" r=127.0.0.1");
    assert_eq!(
        lf("%ci:%cp %fi:%fp %f"),
        "127.0.0.1:40000 127.0.0.1:18481 f"
    );
    assert_eq!(
        lf("m=%HM u=%HU p=%HP q=%HQ v=%HV"),
        "m=GET u=/p/q?x=1&y p=/p/q q=?x=1&y v=HTTP/1.1"
    );
    assert_eq!(lf("%r"), "GET /p/q?x=1&y HTTP/1.1");
    assert_eq!(lf("100%% %{+Q}HM"), "100% \"GET\"");
    assert_eq!(lf("%pid"), std::process::id().to_string());
}

/// The request-line aliases escape as HAProxy's log.c (url_encode_map)
/// where rules use them too: `"` and `#` become `#22` and `#23`.
#[test]
fn request_line_aliases_escape_as_haproxy() {
    let mut out = Vec::new();
    super::logfmt::request_line_part_for_test(b"GET /a\"b#c?q=\"1 HTTP/1.2", &mut out);
    assert_eq!(
        String::from_utf8_lossy(&out),
        "GET /a#22b#23c?q=#221 HTTP/1.2|/a#22b#23c?q=#221|/a#22b#23c|?q=#221|GET|HTTP/1.2"
    );
}

#[test]
fn response_fetches() {
    let res = "HTTP/1.1 404 Not Found\r\nServer: x\r\nSet-Cookie: a=1\r\nVary: a, b\r\n\r\n";
    let r = Scope::Response;
    assert_eq!(lf_scope("%[status] %ST", r, Some(res)), "404 404");
    assert_eq!(lf_scope("%[res.hdr(vary)]", r, Some(res)), "b");
    assert_eq!(lf_scope("%[res.hdr_cnt(vary)]", r, Some(res)), "2");
    assert_eq!(lf_scope("%[res.fhdr(vary)]", r, Some(res)), "a, b");
    assert_eq!(lf_scope("%s %b %[srv_name]", r, Some(res)), "s1 b s1");
    // res.ver: the version of the status line, without `HTTP/`.
    assert_eq!(lf_scope("%[res.ver]", r, Some(res)), "1.1");
    let old = "HTTP/1.0 200 OK\r\nContent-Length: 0\r\n\r\n";
    assert_eq!(lf_scope("%[resp_ver]", r, Some(old)), "1.0");
    assert_eq!(lf_scope("[%[res.ver]]", r, None), "[]");
    assert!(err("%[res.ver]", RQ).contains("reads the response"));
}

#[test]
fn random_values_have_their_shape() {
    let u = lf("%[uuid]");
    assert_eq!(u.len(), 36, "{u}");
    assert_eq!(&u[14..15], "4");
    assert!(matches!(&u[19..20], "8" | "9" | "a" | "b"), "{u}");
    assert_ne!(lf("%[uuid]"), u);
    for _ in 0..50 {
        let r: i64 = lf("%[rand(10)]").parse().unwrap();
        assert!((0..10).contains(&r));
    }
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs() as i64;
    let d: i64 = lf("%[date(3600)]").parse().unwrap();
    assert!((now + 3600..now + 3700).contains(&d));
    std::env::set_var("EBB_SAMPLE_TEST", "v1");
    assert_eq!(lf("%[env(EBB_SAMPLE_TEST)]"), "v1");
    assert_eq!(lf("%[env(EBB_SAMPLE_UNSET_X)]"), "");
}

#[test]
fn maps() {
    let dir = std::env::temp_dir().join(format!("ebb-map-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let f = dir.join("hosts.map");
    std::fs::write(
        &f,
        "# comment\nwww.example.com:8080 be_www\n\napi.example.com be_api\n",
    )
    .unwrap();
    let n = dir.join("nets.map");
    std::fs::write(&n, "10.0.0.0/8 ten\n127.0.0.0/8 local\n").unwrap();
    let b = dir.join("beg.map");
    std::fs::write(&b, "/static st\n/p pp\n").unwrap();
    let f = f.display();
    assert_eq!(lf(&format!("%[req.hdr(host),lower,map({f})]")), "be_www");
    assert_eq!(lf(&format!("%[req.hdr(host),map_str({f},none)]")), "none");
    assert_eq!(lf(&format!("%[req.hdr(host),map({f})]")), "");
    assert_eq!(lf(&format!("%[src,map_ip({})]", n.display())), "local");
    assert_eq!(lf(&format!("%[path,map_beg({})]", b.display())), "pp");
    assert_eq!(lf(&format!("%[path,map_end({},x)]", b.display())), "x");
    assert!(err("%[path,map(/nonexistent/x.map)]", RQ).contains("cannot read file"));
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn errors_at_compile_time() {
    assert!(err("%[nope]", RQ).contains("unknown sample fetch 'nope'"));
    assert!(err("%[src,nope]", RQ).contains("unknown converter 'nope'"));
    assert!(err("%[src", RQ).contains("missing ']'"));
    assert!(err("%[str(a),add(x)]", RQ).contains("expects an integer or a variable name"));
    assert!(err("%[req.hdr(a,1,2)]", RQ).contains("expects 0 to 2"));
    assert!(err("%[src(1)]", RQ).contains("expects 0 argument"));
    assert!(err("%[str(a),ipmask(40)]", RQ).contains("invalid mask"));
    assert!(err("%[method,ipmask(24)]", RQ).contains("cannot be applied to a method"));
    assert!(err("%[status]", RQ).contains("reads the response"));
    assert!(err("%[path]", Scope::Response).contains("reads the request"));
    assert!(err("%[be_name]", Scope::Request { backend: false }).contains("needs a backend"));
    // HAProxy 2.6 takes `%b` there: the frontend's name.
    assert!(err("%bp", RQ).contains("not supported"));
    assert!(err("%{+Z}ci", RQ).contains("flag '+Z'"));
    // `+E`: a `\` before `"`, `\` and `]` (HAProxy's LOG_OPT_ESC).
    assert_eq!(lf("%{+E}[str(a\\\"b\\\\c)]"), "a\\\"b\\\\c");
    // bool() takes HAProxy's four words only.
    assert_eq!(lf("%[bool(TRUE)] %[bool(0)] %[bool(false)]"), "1 0 0");
    assert!(err("%[bool(5)]", RQ).contains("expects 'true', 'false', '0' or '1'"));
    assert!(err("%[str(a),set-var(txn.x,ifnope)]", RQ).contains("unknown set-var condition"));
    // Constant addresses.
    assert_eq!(
        lf("%[ipv4(10.0.0.1)] %[ipv6(2001:db8::1)] %[ipv4(10.1.2.3),ipmask(16)]"),
        "10.0.0.1 2001:db8::1 10.1.0.0"
    );
    assert!(err("%[ipv4(10.0.0)]", RQ).contains("not an ipv4 address"));
    assert!(err("%[ipv6(10.0.0.1)]", RQ).contains("not an ipv6 address"));
    // `X`: addresses, ports and the pid in hexadecimal; `%o` sets the
    // flags of what follows; samples are not changed.
    assert_eq!(
        lf("%{+X}ci:%{+X}cp %{+X}o%ci %{-X}cp %[str(10)]"),
        lf("%ci:%cp %ci %cp %[str(10)]")
            .split(' ')
            .enumerate()
            .map(|(i, w)| match i {
                0 | 1 => hexed(w),
                _ => w.to_string(),
            })
            .collect::<Vec<_>>()
            .join(" ")
    );
    assert!(err("50%", RQ).contains("'%%'"));
    assert!(err("%[str(a),regsub(\"(\",x)]", RQ).contains("regular expression"));
    // HAProxy 2.6's make_arg_list: an unquoted `,` or `)` ends an argument,
    // parentheses do not nest, and `\` is kept before a byte it does not
    // escape (`\(` is the regex of a literal parenthesis).
    assert_eq!(lf("<%[str(a(b)]>"), "<a(b>");
    assert_eq!(lf("<%[str(\"a)b\")]>"), "<a)b>");
    assert_eq!(lf("<%[str('a,b')]>"), "<a,b>");
    assert_eq!(lf("<%[str(a\\\\b)]>"), "<a\\b>");
    assert_eq!(lf("<%[str(a\\qb)]>"), "<a\\qb>");
    assert_eq!(lf("<%[str(a(),regsub(\\(,x)]>"), "<ax>");
    assert!(err("%[str(a(b),concat(x(y))]", RQ).contains("']'"));
    assert!(err("%[str(a\\,b)]", RQ).contains("str"));
    assert!(err("%[str(a,'b)]", RQ).contains("')'"));
    assert!(err("%[str(a),regsub((a),b)]", RQ).contains("regsub"));
    assert!(err("%[var(x)]", RQ).contains("needs a scope"));
    assert!(err("%[var(foo.x)]", RQ).contains("unknown variable scope"));
    assert!(err("%[str(a),json(utf16)]", RQ).contains("input code type"));
    assert!(LogFormat::parse("plain text", RQ).unwrap().as_literal() == Some(&b"plain text"[..]));
}

#[test]
fn no_allocation_once_warm() {
    // The scratch buffers keep their capacity: a second evaluation of the
    // same expression does not grow them.
    let e = Expr::parse("req.hdr(host),lower,base64,b64dec,upper", RQ).unwrap();
    with_ctx(REQ, None, |c| {
        let mut out = Vec::with_capacity(256);
        e.render(c, &mut out);
        let caps = with_scratch(|s| (s.cur.capacity(), s.tmp.capacity()));
        out.clear();
        e.render(c, &mut out);
        assert_eq!(with_scratch(|s| (s.cur.capacity(), s.tmp.capacity())), caps);
        assert_eq!(out, b"WWW.EXAMPLE.COM:8080");
    });
}

#[test]
fn xxh64_reference_vectors() {
    // xxHash's own reference values.
    assert_eq!(hash::xxh64(b"", 0), 0xEF46_DB37_51D8_E999);
    assert_eq!(hash::crc32(b"123456789"), 0xCBF4_3926);
    assert_eq!(hash::crc32c(b"123456789"), 0xE306_9283);
    // HAProxy's reg-test sample_fetches/hashes: bytes 0 to 255.
    let all: Vec<u8> = (0..=255).collect();
    assert_eq!(hash::crc32c(&all), 2_621_708_363);
}

#[test]
fn json_input_modes_as_haproxy() {
    // HAProxy 2.6, `<%[str(B64),b64dec,json(MODE)]>` for bytes: `-\xE0-`
    // (a cut sequence), U+2713, an overlong `/`, a surrogate, U+1F600.
    for (b64, mode, want) in [
        ("LeAt", "utf8s", "<-->"),
        ("LeAt", "utf8", "<>"),
        ("LeAt", "ascii", "<-\\u00e0->"),
        ("4pyT", "utf8", "<\\u2713>"),
        ("wK8=", "utf8", "<>"),
        ("wK8=", "utf8p", "<\\/>"),
        ("7aCA", "utf8p", "<>"),
        ("7aCA", "utf8ps", "<>"),
        ("8J+YgA==", "utf8", "<>"),
        ("8J+YgA==", "utf8s", "<>"),
        ("4pyTLQ==", "ascii", "<\\u00e2\\u009c\\u0093->"),
    ] {
        assert_eq!(
            lf(&format!("<%[str({b64}),b64dec,json({mode})]>")),
            want,
            "{b64} {mode}"
        );
    }
}

#[test]
fn xxh3_and_xxh32_vectors() {
    // Printed by Debian's libxxhash 0.8.1 (XXH3_64bits_withSeed, XXH32)
    // for the bytes (7 * i + 3) mod 256: every length class of XXH3
    // (0, 1-3, 4-8, 9-16, 17-128, 129-240, longer: one block and more).
    let data = |n: usize| -> Vec<u8> { (0..n).map(|i| (i * 7 + 3) as u8).collect() };
    for (n, seed, want) in [
        (0, 0x0, 0x2d06800538d394c2),
        (1, 0x1, 0x49787df7898ccbb7),
        (3, 0x9e3779b97f4a7c15, 0xa8bacd847619199e),
        (4, 0x0, 0x6d9253b16c8b1ed3),
        (8, 0x1, 0x19148e536d069082),
        (9, 0x9e3779b97f4a7c15, 0xd4fb426f424e6e62),
        (16, 0x0, 0xb8c859b0f030b585),
        (17, 0x1, 0x92506c214b19ed1b),
        (33, 0x9e3779b97f4a7c15, 0x3ffc244bc1e2a4dc),
        (65, 0x0, 0x829218de4d798646),
        (97, 0x1, 0x63bb4dfd5e995cc5),
        (128, 0x9e3779b97f4a7c15, 0xe9e239440dac1b3c),
        (129, 0x0, 0xc664bf3311c6abc4),
        (200, 0x1, 0xb226d4c34d8738d2),
        (240, 0x9e3779b97f4a7c15, 0x6ea73b2be19b57c5),
        (241, 0x0, 0x8beadd3a8874fe17),
        (1024, 0x1, 0x3c840c38eb48549),
        (1025, 0x9e3779b97f4a7c15, 0xcbdb289911b2614b),
        (2500, 0x0, 0x3911477e37ac3c0f),
    ] {
        assert_eq!(hash::xxh3(&data(n), seed), want, "xxh3 len {n} seed {seed}");
    }
    for (n, seed, want) in [
        (0, 0x1, 0xb2cb792),
        (1, 0x9e3779b1, 0x99bafee8),
        (4, 0x0, 0x725479f2),
        (5, 0x1, 0xd376b09d),
        (15, 0x9e3779b1, 0x321e160f),
        (16, 0x0, 0x8845547d),
        (17, 0x1, 0xea6e085),
        (33, 0x9e3779b1, 0x9527373f),
        (200, 0x0, 0x2870dbaa),
    ] {
        assert_eq!(
            hash::xxh32(&data(n), seed),
            want,
            "xxh32 len {n} seed {seed}"
        );
    }
    // HAProxy's reg-test sample_fetches/hashes: bytes 0 to 255.
    let all: Vec<u8> = (0..=255).collect();
    assert_eq!(hash::xxh3(&all, 0) as i64, -7_779_787_747_613_135_503);
    assert_eq!(hash::xxh3(&all, 1) as i64, 5_930_632_130_106_562_027);
    assert_eq!(hash::xxh32(&all, 0), 1_497_633_363);
    assert_eq!(hash::xxh32(&all, 1), 1_070_421_674);
}

#[test]
fn variables_keep_their_type_and_scope() {
    let store = std::cell::RefCell::new(VarStore::default());
    let set = |v: &str, e: &str| {
        VarAction::Set(
            VarRef::parse(v).unwrap(),
            Box::new(Expr::parse(e, RQ).unwrap()),
        )
    };
    with_ctx(REQ, None, |c| {
        let c = Ctx {
            vars: Some(&store),
            stk: None,
            ..*c
        };
        set("txn.host", "req.hdr(host),lower").run(&c);
        set("sess.n", "int(41),add(1)").run(&c);
        set("req.r", "str(r)").run(&c);
        VarAction::SetFmt(
            VarRef::parse("txn.f").unwrap(),
            LogFormat::parse("%[var(txn.host)]/%ci", RQ).unwrap(),
        )
        .run(&c);
        // A fetch that finds nothing leaves the variable alone.
        set("txn.host", "req.hdr(nope)").run(&c);
        let get = |fmt: &str| {
            let mut o = Vec::new();
            LogFormat::parse(fmt, RQ).unwrap().render(&c, &mut o);
            String::from_utf8(o).unwrap()
        };
        assert_eq!(get("%[var(txn.host)]"), "www.example.com:8080");
        assert_eq!(get("%[var(sess.n),add(1)]"), "43");
        assert_eq!(get("%[var(txn.f)]"), "www.example.com:8080/127.0.0.1");
        assert_eq!(get("%[var(req.r)]"), "r");
        store.borrow_mut().begin_response();
        assert_eq!(get("%[var(req.r)]"), "");
        assert_eq!(get("%[var(txn.host)]"), "www.example.com:8080");
        VarAction::Unset(VarRef::parse("txn.host").unwrap()).run(&c);
        assert_eq!(get("%[var(txn.host)]"), "");
        store.borrow_mut().begin_request();
        assert_eq!(get("%[var(txn.f)]"), "");
        // Session variables outlive the exchange.
        assert_eq!(get("%[var(sess.n)]"), "42");
        set("proc.p", "int(7)").run(&c);
        assert_eq!(get("%[var(proc.p)]"), "7");
    });
    assert!(VarRef::parse("x").is_err());
    assert!(VarRef::parse("foo.x").is_err());
}

/// `concat` and `strcmp` give what HAProxy 2.6 gave for the same
/// expressions (run side by side, `http-request return ... lf-string`).
#[test]
fn concat_and_strcmp_as_haproxy() {
    let store = std::cell::RefCell::new(VarStore::default());
    with_ctx(REQ, None, |c| {
        let c = Ctx {
            vars: Some(&store),
            stk: None,
            ..*c
        };
        for (v, e) in [("txn.a", "str(abd)"), ("txn.n", "int(42)")] {
            VarAction::Set(
                VarRef::parse(v).unwrap(),
                Box::new(Expr::parse(e, RQ).unwrap()),
            )
            .run(&c);
        }
        let get = |fmt: &str| {
            let mut o = Vec::new();
            LogFormat::parse(fmt, RQ)
                .unwrap_or_else(|e| panic!("{fmt}: {e}"))
                .render(&c, &mut o);
            String::from_utf8(o).unwrap()
        };
        for (fmt, want) in [
            ("%[str(x),concat(<,txn.a,>)]", "x<abd>"),
            ("%[str(x),concat(<,txn.none,>)]", "x<>"),
            ("%[str(x),concat(,txn.n)]", "x42"),
            ("%[str(x),concat()]", "x"),
            ("%[str(abc),strcmp(txn.a)]", "-1"),
            ("%[str(abd),strcmp(txn.a)]", "0"),
            ("%[str(abdz),strcmp(txn.a)]", "1"),
            ("%[str(abdxyz),strcmp(txn.a)]", "1"),
            ("%[str(ab),strcmp(txn.a)]", "-1"),
            ("%[str(abc),strcmp(txn.none)]", ""),
            ("%[str(z),strcmp(txn.a)]", "25"),
            ("%[str(A),strcmp(txn.a)]", "-32"),
        ] {
            assert_eq!(get(fmt), want, "{fmt}");
        }
    });
    assert!(LogFormat::parse("%[str(x),strcmp()]", RQ).is_err());
    assert!(LogFormat::parse("%[str(x),concat(a,b,c,d)]", RQ).is_err());
}

#[test]
fn tcp_payload_fetches() {
    // A TLS 1.2 record holding the first bytes of a ClientHello.
    let hello = [0x16u8, 0x03, 0x01, 0x00, 0x40, 0x01, 0x00, 0x00, 0x3c];
    let unsure = std::cell::Cell::new(false);
    let render = |fmt: &str, bytes: &[u8], sni: Option<&str>| {
        let l = LogFormat::parse(fmt, RQ).unwrap_or_else(|e| panic!("{fmt}: {e}"));
        with_ctx(REQ, None, |c| {
            let c = Ctx {
                payload: Some(Payload {
                    bytes,
                    sni,
                    hello_partial: false,
                    partial: false,
                    may_change: &unsure,
                    response: false,
                }),
                ..*c
            };
            let mut out = Vec::new();
            l.render(&c, &mut out);
            String::from_utf8_lossy(&out).into_owned()
        })
    };
    assert_eq!(render("%[req.len]", &hello, None), "9");
    assert_eq!(render("%[req.ssl_hello_type]", &hello, None), "1");
    assert_eq!(render("%[req.ssl_hello_type]", b"GET /", None), "");
    assert_eq!(
        render("%[req.ssl_sni]", &hello, Some("a.example")),
        "a.example"
    );
    // The ALPN names of a whole ClientHello: the first one.
    let alpn_hello = [
        &b"\x16\x03\x01\x00\x3e\x01\x00\x00\x3a\x03\x03"[..],
        &[0; 32],
        b"\x00\x00\x02\x13\x01\x01\x00\x00\x0f\x00\x10\x00\x0b\x00\x09\x02h2\x03h2c\x01x",
    ]
    .concat();
    assert_eq!(render("%[req.ssl_alpn]", &alpn_hello, None), "h2");
    assert_eq!(render("%[req.ssl_alpn]", &hello, None), "");
    assert_eq!(render("%[req.payload(1,2),hex]", &hello, None), "0301");
    assert_eq!(render("%[req.payload(7,0),hex]", &hello, None), "003C");
    assert_eq!(
        render("%[req.payload(8,5),hex]", &hello, None),
        "",
        "not arrived yet"
    );
    // HTTP mode: HAProxy's HTX size for req.len, nothing for req.payload.
    assert_eq!(lf("%[req.len]"), "87");
    assert_eq!(lf("%[req.payload(0,1)]"), "");
    assert!(err("%[req.len]", Scope::Response).contains("not available in a response rule"));
}

#[test]
fn tcp_payload_fetches_say_when_more_bytes_could_change_them() {
    let unsure = std::cell::Cell::new(false);
    let check = |fmt: &str, bytes: &[u8], hello_partial: bool| {
        let l = LogFormat::parse(fmt, RQ).unwrap_or_else(|e| panic!("{fmt}: {e}"));
        unsure.set(false);
        with_ctx(REQ, None, |c| {
            let c = Ctx {
                payload: Some(Payload {
                    bytes,
                    sni: None,
                    hello_partial,
                    partial: true,
                    may_change: &unsure,
                    response: false,
                }),
                ..*c
            };
            l.render(&c, &mut Vec::new());
        });
        unsure.get()
    };
    assert!(check("%[req.len]", b"PI", false));
    assert!(check("%[req.ssl_hello_type]", b"\x16\x03", false));
    assert!(
        !check("%[req.ssl_hello_type]", b"PING", false),
        "not TLS: final"
    );
    assert!(check("%[req.ssl_sni]", b"\x16\x03\x01", true));
    assert!(!check("%[req.ssl_sni]", b"PING", false));
    assert!(check("%[req.payload(2,4)]", b"PIN", false));
    assert!(!check("%[req.payload(0,2)]", b"PIN", false));
}

#[test]
fn url_param_and_pathq() {
    // REQ's target is /p/q?x=1&y.
    assert_eq!(lf("%[pathq]"), "/p/q?x=1&y");
    assert_eq!(lf("%[url_param(x)]"), "1");
    assert_eq!(lf("%[urlp(x)]"), "1");
    // No name: the first parameter; a name without '=' has no value.
    assert_eq!(lf("%[url_param()]"), "1");
    assert_eq!(lf("<%[url_param(y)]>"), "<>");
    assert_eq!(lf("<%[url_param(z)]>"), "<>");
    assert!(err("%[url_param(x,ab)]", RQ).contains("one character"));
    assert!(err("%[pathq]", Scope::Response).contains("reads the request"));
    // urlp_val: the value as an integer (HAProxy's strl2ic); a name
    // without a value has none.
    assert_eq!(lf("%[urlp_val(x)]"), "1");
    assert_eq!(lf("%[urlp_val(x),add(2)]"), "3");
    assert_eq!(lf("<%[urlp_val(y)]>"), "<>");
    assert!(err("%[urlp_val(x)]", Scope::Response).contains("reads the request"));
}

#[test]
fn converters_of_haproxy_s_reg_tests() {
    // converter/be2dec, be2hex, iif, url_enc, url_dec, field,
    // sample_fetches/ubase64 and hashes: the values HAProxy 2.6 gives.
    assert_eq!(
        lf("%[str(0123456789),be2dec(-,3)]"),
        "3158322-3355701-3553080-57"
    );
    assert_eq!(
        lf("%[str(0123456789),be2dec(::,3,1)]"),
        "3158322::3355701::3553080"
    );
    assert_eq!(
        lf("%[str(0123456789),be2hex(--,3),lower]"),
        "303132--333435--363738--39"
    );
    assert_eq!(
        lf("%[str(0123456789),be2hex(.,3,1)]"),
        "303132.333435.363738"
    );
    assert_eq!(lf("%[str(ab),be2hex]"), "6162");
    assert_eq!(lf("%[int(0),iif(ok,ko)]|%[int(2),iif(ok,ko)]"), "ko|ok");
    assert_eq!(
        lf("%[str(foo=bar+42 42 ),url_enc]"),
        "foo%3Dbar%2B42%2042%20"
    );
    assert_eq!(lf("%[str(/a+%20?b+c),url_dec]"), "/a+ ?b c");
    assert_eq!(lf("%[str(/a+%20?b+c),url_dec(1)]"), "/a  ?b c");
    assert_eq!(lf("%[str(/foo),field(3,/)]"), "");
    assert_eq!(lf("%[str(foob),ub64enc]"), "Zm9vYg");
    assert_eq!(lf("%[str(Zm9vYg),ub64dec]"), "foob");
    assert_eq!(lf("%[bin(14fb9c03d97f12d97e),ub64enc]"), "FPucA9l_Etl-");
    assert_eq!(
        lf("%[str(abc),sha1,hex,lower]"),
        "a9993e364706816aba3e25717850c26c9cd0d89d"
    );
    assert_eq!(
        lf("%[str(abc),sha2,hex,lower]"),
        "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
    );
    // Quoted arguments (HAProxy's make_arg_list).
    assert_eq!(lf("%[str(a),add_item(',',,'s,x')]"), "a,s,x");
    assert_eq!(lf("%[str(),add_item(',',,_suff_)]"), "_suff_");
    assert!(err("%[str(a),add_item(-)]", RQ).contains("expects 2 to 3"));
    assert!(err("%[str(a),be2dec(:,9)]", RQ).contains("out of [1..8] range"));
    assert_eq!(
        lf("%[str(a),sha2(224),hex,lower]"),
        "abd37534c7d9a2efb9465de931cd7055ffdb8879563ae98078d6d6d5"
    );
    assert!(err("%[str(a),sha2(100)]", RQ).contains("224, 256, 384 or 512"));
    assert!(err("%[bin(abc)]", RQ).contains("hex digits"));
}

/// `fmt` rendered on request `raw` in a request rule.
fn lf_on(raw: &str, fmt: &str) -> String {
    let l = LogFormat::parse(fmt, RQ).unwrap();
    with_ctx(raw, None, |c| {
        let mut out = Vec::new();
        l.render(c, &mut out);
        String::from_utf8(out).unwrap()
    })
}

#[test]
fn cookie_fetches_without_a_name() {
    let raw = "GET / HTTP/1.1\r\nHost: h\r\nCookie: cook1=0; cook2=123; cook3=22\r\n\r\n";
    let f = |x: &str| lf_on(raw, x);
    // sample_fetches/cook.
    assert_eq!(f("%[req.cook_cnt()]"), "3");
    assert_eq!(f("%[req.cook_val()]"), "0");
    assert_eq!(f("%[req.cook_val(cook2)]"), "123");
    assert_eq!(f("%[req.cook_cnt(cook3)]"), "1");
    assert_eq!(f("%[req.cook()]"), "0");
}

/// The response's cookies: one per Set-Cookie value, in its first
/// `name=value` past `$` attributes and words without `=`; each comma
/// starts a value (HAProxy 2.6's http_find_header and
/// http_extract_cookie_value in the response direction).
#[test]
fn set_cookie_fetches_as_haproxy() {
    let res = "HTTP/1.1 200 OK\r\nSet-Cookie: sc=1; Path=/\r\nSet-Cookie: n=42; sc=7\r\n\
               Set-Cookie: $v=1; sc=-5x, q=\"a;b\"; Max-Age=3\r\nContent-Length: 0\r\n\r\n";
    let f = |x: &str| lf_scope(x, Scope::Response, Some(res));
    assert_eq!(f("%[res.cook(sc)]"), "-5x");
    assert_eq!(f("%[scook(n)]"), "42");
    assert_eq!(f("%[res.cook(q)]"), "\"a;b\"");
    assert_eq!(f("%[res.cook]"), "1");
    assert_eq!(f("%[res.cook(Max-Age)]"), "");
    assert_eq!(f("%[res.cook_cnt(sc)]"), "2");
    assert_eq!(f("%[scook_cnt]"), "7");
    assert_eq!(f("%[res.cook_val(sc)]"), "-5");
    assert_eq!(f("%[scook_val(n)]"), "42");
    assert_eq!(f("%[res.cook_cnt(absent)]"), "0");
    // A cookie is looked for only where the name, `=` and a byte more
    // fit: an empty value at the end is not found.
    let short = "HTTP/1.1 200 OK\r\nSet-Cookie: abc\r\nSet-Cookie: a=\r\nSet-Cookie: a=1\r\n\r\n";
    assert_eq!(
        lf_scope("%[res.cook_cnt(a)]", Scope::Response, Some(short)),
        "1"
    );
    // Read in a response, refused in a request rule and the reverse.
    assert!(err("%[res.cook(sc)]", RQ).contains("reads the response"));
    assert!(err("%[req.cook(sc)]", Scope::Response).contains("reads the request"));
    // A request's Cookie value holds a list: `,` separates cookies too,
    // quotes keep `;`, `$` attributes are passed over.
    let raw = "GET / HTTP/1.1\r\nHost: h\r\nCookie: $Version=1; a=\"x;y\", b = 2 ;c\r\n\r\n";
    let g = |x: &str| lf_on(raw, x);
    assert_eq!(g("%[req.cook(a)]"), "\"x;y\"");
    assert_eq!(g("%[req.cook(b)]"), "2");
    assert_eq!(g("%[req.cook_cnt]"), "2");
    assert_eq!(g("%[req.cook]"), "\"x;y\"");
}

/// `hdr_val`: a header value as HAProxy's strl2ic reads it, with the
/// occurrence rules of `hdr` (the last by default, -10 the furthest back).
#[test]
fn header_values_as_integers_as_haproxy() {
    let raw = "GET / HTTP/1.1\r\nHost: h\r\nX-N: 12abc, -7\r\nX-N: 4294967297\r\nX-E:\r\n\r\n";
    let f = |x: &str| lf_on(raw, x);
    assert_eq!(f("%[req.hdr_val(x-n)]"), "1");
    assert_eq!(f("%[hdr_val(x-n,1)]"), "12");
    assert_eq!(f("%[hdr_val(X-N,2)]"), "-7");
    assert_eq!(f("%[hdr_val(x-n,-2)]"), "-7");
    assert_eq!(f("%[hdr_val(x-n,4)]"), "");
    assert_eq!(f("%[hdr_val(x-e)]"), "0");
    assert_eq!(f("%[hdr_val(absent)]"), "");
    assert_eq!(f("%[hdr_val(x-n,1),add(1)]"), "13");
    let res = "HTTP/1.1 200 OK\r\nX-N: 5, 08\r\nContent-Length: 0\r\n\r\n";
    let r = |x: &str| lf_scope(x, Scope::Response, Some(res));
    assert_eq!(r("%[res.hdr_val(x-n)]"), "8");
    assert_eq!(r("%[shdr_val(x-n,1)]"), "5");
    assert!(err("%[res.hdr_val(x-n)]", RQ).contains("reads the response"));
    assert!(err("%[hdr_val(x-n)]", Scope::Response).contains("reads the request"));
    assert!(err("%[hdr_val(x-n,-11)]", RQ).contains("must be >= -10"));
    assert!(err("%[hdr(x-n,-11)]", RQ).contains("must be >= -10"));
    assert_eq!(f("%[hdr(x-n,-10)]"), "");
}

/// A connection's variables go to the thread's pool between two
/// exchanges only when nothing in them lasts, and come back cleared, with
/// the request count, the last log's date and the addresses kept.
#[test]
fn connection_variables_are_pooled_only_when_nothing_lasts() {
    use crate::sample::vars::ConnVars;
    use std::cell::RefCell;
    let peer: std::net::SocketAddr = "10.0.0.1:1234".parse().unwrap();
    let set = |cv: &ConnVars, var: &str, e: &str| {
        with_ctx(REQ, None, |c| {
            let c = Ctx {
                vars: cv.cell(),
                stk: None,
                ..*c
            };
            VarAction::Set(
                VarRef::parse(var).unwrap(),
                Box::new(Expr::parse(e, RQ).unwrap()),
            )
            .run(&c);
        });
    };
    let get = |cv: &ConnVars, fmt: &str| {
        with_ctx(REQ, None, |c| {
            let c = Ctx {
                vars: cv.cell(),
                stk: None,
                ..*c
            };
            let mut o = Vec::new();
            LogFormat::parse(fmt, RQ).unwrap().render(&c, &mut o);
            String::from_utf8(o).unwrap()
        })
    };
    let mut pool: Vec<Box<RefCell<VarStore>>> = Vec::new();
    let mut cv = ConnVars::new(Box::default());
    {
        let v = cv.get_mut();
        v.fc_addrs = Some((peer, None));
        v.begin_request();
        v.info.unique_id = Some(b"id-1".to_vec());
        v.req_caps.push(Some(b"cap".to_vec()));
        v.last_log = Some(std::time::UNIX_EPOCH);
    }
    set(&cv, "txn.t", "str(one)");
    assert_eq!(get(&cv, "%[var(txn.t)]"), "one");
    cv.park(peer, None, |b, keep| {
        assert!(keep);
        pool.push(b);
    });
    assert!(cv.parked() && cv.cell().is_none());
    assert_eq!(pool.len(), 1);
    // Another connection takes the pooled store: nothing of the first.
    let mut other = ConnVars::default();
    let peer2: std::net::SocketAddr = "10.0.0.2:99".parse().unwrap();
    other.unpark(peer2, None, || pool.pop().unwrap());
    {
        let v = other.try_borrow().unwrap();
        assert_eq!(v.requests, 0);
        assert_eq!(v.last_log, None);
        assert_eq!(v.fc_addrs, None);
        assert!(v.info.unique_id.is_none() && v.req_caps.is_empty());
    }
    assert_eq!(get(&other, "%[var(txn.t)]"), "");
    other.get_mut().begin_request();
    assert_eq!(get(&other, "%[var(txn.t)]"), "");
    // The first connection comes back with what lasts.
    cv.unpark(peer, None, Box::default);
    {
        let v = cv.try_borrow().unwrap();
        assert_eq!(v.requests, 1);
        assert_eq!(v.last_log, Some(std::time::UNIX_EPOCH));
        assert_eq!(v.fc_addrs, Some((peer, None)));
    }
    // A session variable lasts: the store stays with its connection.
    set(&cv, "sess.s", "str(kept)");
    cv.park(peer, None, |b, _| pool.push(b));
    assert!(!cv.parked() && pool.is_empty());
    assert_eq!(get(&cv, "%[var(sess.s)]"), "kept");
    // So does what the connection's start left (a bind name).
    let mut named = ConnVars::new(Box::default());
    named.get_mut().so_name = Some("b1".into());
    named.park(peer, None, |b, _| pool.push(b));
    assert!(!named.parked() && pool.is_empty());
}

/// tests/samples/run.py's findings, HAProxy 2.6.12's outputs on the same
/// expressions.
#[test]
fn converters_as_haproxy_26() {
    // http_date: the fraction as `%d` after a named ms/us unit, negative
    // and huge dates masked to 55 bits.
    assert_eq!(
        lf("%[int(42),http_date(0,ms)]"),
        "Thu, 01 Jan 1970 00:00:00.42 GMT"
    );
    assert_eq!(
        lf("%[int(7),http_date(0,us)]"),
        "Thu, 01 Jan 1970 00:00:00.7 GMT"
    );
    assert_eq!(
        lf("%[int(-7),http_date]"),
        "Sun, 13 Jun 1141709097 06:26:01 GMT"
    );
    assert_eq!(
        lf("%[int(3),http_date(0,s)]"),
        "Thu, 01 Jan 1970 00:00:03 GMT"
    );
    // neg caps LLONG_MIN.
    assert_eq!(
        lf("%[str(-9223372036854775808),neg]"),
        "9223372036854775807"
    );
    // regsub: an empty match right after a match counts.
    assert_eq!(
        lf("%[str(Hello World),regsub(o*,-,g)]"),
        "-H-e-l-l-- -W--r-l-d-"
    );
    assert_eq!(lf("%[str(Hello),regsub(o*,-)]"), "-Hello");
    assert_eq!(lf("%[str(abc),regsub(x*,-,g)]"), "-a-b-c-");
    assert_eq!(lf("%[str(),regsub(x*,-,g)]"), "-");
    assert_eq!(lf("%[str(aaa),regsub(a,b,g)]"), "bbb");
    assert_eq!(lf("%[str(/a/b),regsub(^/,X,g)]"), "Xa/b");
    // port_only: strl2ui over the bytes after the colon.
    assert_eq!(lf("%[str(ab:c),port_only]"), "51");
    assert_eq!(lf("%[str(x:12abc),port_only]"), "17451");
    assert_eq!(lf("%[str(a:-5),port_only]"), "4294967271");
    assert_eq!(lf("%[str(a),port_only]"), "0");
    // ub64dec: `=` is 63 in HAProxy 2.6's table.
    assert_eq!(lf("%[str(n=9),ub64dec,hex]"), "9FFF");
    // be2hex: the whole input as one chunk without separator.
    assert_eq!(lf("%[str(abc),be2hex]"), "616263");
    assert_eq!(lf("%[str(abc),be2hex(,0)]"), "616263");
}

#[test]
fn arguments_refused_as_haproxy_26() {
    for (e, msg) in [
        ("%[int( 3)]", "is not an integer"),
        ("%[str(a),add( 3)]", "expects an integer"),
        ("%[str(abc),be2hex(:)]", "chunk_size needs to be positive"),
        ("%[str(abc),be2hex(:,0)]", "chunk_size needs to be positive"),
        ("%[str(abc),be2hex(,1,2)]", "unsupported truncate value"),
        ("%[str(abc),be2dec(:,0)]", "out of [1..8] range"),
        ("%[str(abc),be2dec(:,9)]", "out of [1..8] range"),
        ("%[str(a),map_str_str(/x)]", "unknown converter"),
        ("%[str(a),map__str(/x)]", "unknown converter"),
        ("%[str(a),map_beg_str(/x)]", "unknown converter"),
        ("%[str(a),map_(/x)]", "unknown converter"),
        ("%[src,table_get_gpc0(t)]", "unknown converter"),
        ("%[src,table_inc_gpc0(t)]", "unknown converter"),
    ] {
        let m = err(e, RQ);
        assert!(m.contains(msg), "{e}: {m}");
    }
    let fe = Scope::Request { backend: false };
    for e in [
        "%[cur_server_timeout]",
        "%[cur_tunnel_timeout]",
        "%[be_conn]",
    ] {
        assert!(err(e, fe).contains("needs a backend"), "{e}");
    }
    assert_eq!(LogFormat::parse("%[be_conn(b)]", fe).map(|_| ()), Ok(()));
}

#[test]
fn fetches_as_haproxy_26() {
    // An empty delimiter is HAProxy's NUL: never found.
    assert_eq!(lf("%[urlp(x,)]"), "");
    assert_eq!(lf("%[urlp(x)]"), "1");
    // http_auth: no sample without Basic credentials.
    assert_eq!(lf("%[http_auth(nolist)]"), "");
}

#[test]
fn maps_longest_match() {
    let dir = std::env::temp_dir().join(format!("ebb-map-long-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let b = dir.join("beg.map");
    std::fs::write(&b, "/p beg1\n/ root\n/p/q beg2\n").unwrap();
    let n = dir.join("nets.map");
    std::fs::write(
        &n,
        "::ffff:127.0.0.0/104 mapped\n0.0.0.0/0 all\n127.0.0.0/8 loop\n",
    )
    .unwrap();
    // HAProxy's prefix trees: the longest key, the address's own family
    // first.
    assert_eq!(lf(&format!("%[path,map_beg({})]", b.display())), "beg2");
    assert_eq!(lf(&format!("%[src,map_ip({})]", n.display())), "loop");
    assert_eq!(
        lf(&format!(
            "%[ipv6(::ffff:127.0.0.1),map_ip({})]",
            n.display()
        )),
        "mapped"
    );
    assert_eq!(
        lf(&format!(
            "%[ipv6(2001:db8::1),map_ip({},none)]",
            n.display()
        )),
        "none"
    );
    std::fs::remove_dir_all(&dir).unwrap();
}

/// `base` reads the Host field as sent, its first value, not an absolute
/// target's authority (HAProxy 2.6's smp_fetch_base; found by tests/diff
/// seed 7).
#[test]
fn base_reads_the_host_field() {
    let on = |raw: &str| {
        let l = LogFormat::parse("<%[base]>", RQ).unwrap();
        with_ctx(raw, None, |c| {
            let mut out = Vec::new();
            l.render(c, &mut out);
            String::from_utf8_lossy(&out).into_owned()
        })
    };
    assert_eq!(
        on("GET http://example.com HTTP/1.1\r\nHost: Example.COM:80\r\n\r\n"),
        "<Example.COM:80>"
    );
    assert_eq!(
        on("GET http://a.b/x?y HTTP/1.1\r\nHost: A.B\r\n\r\n"),
        "<A.B/x>"
    );
    assert_eq!(on("GET /p HTTP/1.0\r\n\r\n"), "</p>");
}

/// A string cast to an address as HAProxy 2.6's `c_str2addr`: a dotted
/// IPv4 address at the start, whatever follows (`buf2ip`), else the whole
/// string as IPv6, else none (the CI's tests/diff seed 1 found ebb
/// parsing the whole string: `127.0.0.1:80` matched no `-m ip` list).
#[test]
fn strings_cast_to_addresses_as_haproxy() {
    use std::net::IpAddr;
    let ip = |s: &str| s.parse::<IpAddr>().ok();
    for (text, want) in [
        ("127.0.0.1:80", ip("127.0.0.1")),
        ("10.1.2.3", ip("10.1.2.3")),
        ("010.001.002.003", ip("10.1.2.3")),
        ("1.2.3.4 x", ip("1.2.3.4")),
        ("1.2.3.4.5", None),
        ("1.2.3.4.", None),
        ("1.2.3", None),
        ("1..2.3", None),
        ("256.1.1.1", None),
        (" 1.2.3.4", None),
        ("::1", ip("::1")),
        ("::ffff:1.2.3.4", ip("::ffff:1.2.3.4")),
        ("[::1]", None),
        ("bad", None),
        ("", None),
    ] {
        assert_eq!(super::str_to_addr(text.as_bytes()), want, "{text:?}");
    }
}

/// `target_path`'s fast path for `http://` and `https://` finds what its
/// general scan finds for another scheme of the same letters' shape
/// (`hzzp://`, which only the scan reads): the path after the authority.
#[test]
fn target_path_agrees_with_the_scan() {
    let hosts = [
        "",
        "h",
        "127.0.0.1:19910",
        "u@h",
        "a.b.c.d.e.f.g.h.example",
        "h?q",
    ];
    let tails = ["", "/", "/p", "/100b?v=0", "?x", "/a/b?c=/d", "*"];
    for (fast, scanned) in [("http://", "hzzp://"), ("https://", "hzzps://")] {
        for h in hosts {
            for t in tails {
                let a = format!("{fast}{h}{t}");
                let b = format!("{scanned}{h}{t}");
                assert_eq!(target_path(a.as_bytes()), target_path(b.as_bytes()), "{a}");
            }
        }
    }
    // Not the fast path's: as the scan reads them.
    assert_eq!(target_path(b"http:/h/p"), b"");
    assert_eq!(target_path(b"HTTP://h/p"), b"/p");
    assert_eq!(target_path(b"httpx://h/p"), b"/p");
    assert_eq!(target_path(b"http"), b"");
    assert_eq!(target_path(b"http://"), b"");
    assert_eq!(target_path(b"http://h"), b"");
    assert_eq!(target_path(b"http://h/"), b"/");
}

#[test]
fn find_byte_finds_the_first() {
    // Every length up to three words, the byte at every place (and absent),
    // among bytes that differ from it by one bit (the word trick's edge).
    for len in 0..24usize {
        for at in 0..=len {
            for fill in [0u8, b'.', b'/' ^ 1, b'/' ^ 0x80, 0xff] {
                let mut v = vec![fill; len];
                if at < len {
                    v[at] = b'/';
                    // Another one after it must not be found first.
                    if at + 1 < len {
                        v[at + 1] = b'/';
                    }
                }
                let want = v.iter().position(|&c| c == b'/').unwrap_or(len);
                assert_eq!(find_byte(&v, b'/'), want, "{v:?}");
            }
        }
    }
}

#[test]
fn http_auth_type_and_user_as_haproxy() {
    // Checked beside HAProxy 2.6.12 (`lf-string "<%[http_auth_type]|%[http_auth_user]>"`).
    let got = |authz: &str| {
        let req = format!("GET / HTTP/1.1\r\nHost: a\r\nAuthorization: {authz}\r\n\r\n");
        let l = LogFormat::parse("<%[http_auth_type]|%[http_auth_user]>", RQ).unwrap();
        with_ctx(&req, None, |c| {
            let mut o = Vec::new();
            l.render(c, &mut o);
            String::from_utf8_lossy(&o).into_owned()
        })
    };
    for (a, want) in [
        ("Basic dXNlcjpwYXNz", "<Basic|user>"),
        ("basic dXNlcjpwYXNz", "<Basic|user>"),
        ("B dXNlcjpwYXNz", "<Basic|user>"),
        ("Basic   dXNlcjpwYXNz", "<Basic|user>"),
        ("Basic dXNlcg==", "<|>"),
        ("Bearer tok", "<Bearer|>"),
        ("Bea x", "<Bearer|>"),
        ("Digest x", "<|>"),
        ("Basic dQB4OnA=", "<|>"),
        ("Basic !!!", "<|>"),
        ("Basicx dXNlcjpwYXNz", "<|>"),
        ("Basic dXNlcjpwYXNz, Bearer x", "<Basic|user>"),
    ] {
        assert_eq!(got(a), want, "{a}");
    }
    assert!(err("%[http_auth_user]", Scope::Response).contains("not available"));
}

#[test]
fn http_auth_bearer_reads_the_token() {
    let got = |hdrs: &str, fmt: &str| {
        let req = format!("GET / HTTP/1.1\r\nHost: a\r\n{hdrs}\r\n");
        let l = LogFormat::parse(fmt, RQ).unwrap_or_else(|e| panic!("{fmt}: {e}"));
        with_ctx(&req, None, |c| {
            let mut o = Vec::new();
            l.render(c, &mut o);
            String::from_utf8_lossy(&o).into_owned()
        })
    };
    let dflt = "<%[http_auth_bearer]>";
    assert_eq!(got("Authorization: Bearer  tok\r\n", dflt), "<tok>");
    assert_eq!(got("Authorization: bearer a.b.c\r\n", dflt), "<a.b.c>");
    // HAProxy 2.6 compares the scheme on its own length.
    assert_eq!(got("Authorization: Bea tok\r\n", dflt), "<tok>");
    // No sample (an empty string's length would be 0).
    let len = "<%[http_auth_bearer,length]>";
    assert_eq!(got("Authorization: Bearer \r\n", len), "<>");
    assert_eq!(got("Authorization: Basic dTpw\r\n", len), "<>");
    assert_eq!(got("Authorization: Bearerx tok\r\n", len), "<>");
    assert_eq!(got("Authorization:  tok\r\n", len), "<>");
    assert_eq!(got("", len), "<>");
    let named = "<%[http_auth_bearer(x-tok)]>";
    assert_eq!(got("X-Tok: BEARER abc\r\n", named), "<abc>");
    // An empty string otherwise, even without the header.
    let named = "<%[http_auth_bearer(x-tok),length]>";
    assert_eq!(got("X-Tok: Bea abc\r\n", named), "<0>");
    assert_eq!(got("X-Tok: Bearer\r\n", named), "<0>");
    assert_eq!(got("", named), "<0>");
    assert!(err("%[http_auth_bearer]", Scope::Response).contains("not available"));
}
