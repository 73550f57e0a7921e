//! The log-format / sample-expression parser never panics on any text;
//! what parses also evaluates (against a fixed request and response)
//! without panicking, and an ACL criterion made of it never panics either.
#![no_main]

use ebb::http1::{parse_request, parse_response, Limits, Method, Status};
use ebb::sample::{Ctx, LogFormat, Req, Res, Scope};
use libfuzzer_sys::fuzz_target;

const REQ: &[u8] = b"GET /a/b?c=d HTTP/1.1\r\nHost: h.example:80\r\nX: 1, 2\r\nCookie: s=1\r\n\r\n";
const RES: &[u8] = b"HTTP/1.1 404 Not Found\r\nVary: a, b\r\n\r\n";

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let Ok(Status::Complete(req)) = parse_request(REQ, &Limits::default()) else {
        return;
    };
    let Ok(Status::Complete(res)) = parse_response(RES, &Limits::default(), Method::Get) else {
        return;
    };
    let vars = std::cell::RefCell::new(ebb::sample::VarStore::default());
    let dst = || Some(std::net::SocketAddr::from(([127, 0, 0, 1], 80)));
    for scope in [
        Scope::Request { backend: false },
        Scope::Request { backend: true },
        Scope::Response,
    ] {
        let Ok(f) = LogFormat::parse(text, scope) else {
            continue;
        };
        let ctx = Ctx {
            src: std::net::SocketAddr::from(([10, 0, 0, 1], 1234)),
            dst: &dst,
            fe: "fe",
            be: Some("be"),
            srv: Some("s1"),
            tls: false,
            sni: None,
            req: Some(Req {
                buf: REQ,
                head: &req,
                body: b"a=1&b=%20",
            }),
            res: Some(Res::H1 {
                buf: RES,
                head: &res,
            }),
            vars: Some(&vars),
            payload: None,
            stk: None,
            res_body: Some((b"{\"k\":1}", 7)),
            client_cert: None,
            fc: None,
            early: false,
        };
        let mut out = Vec::new();
        f.render(&ctx, &mut out);
    }
    let cfg = format!(
        "frontend f\n bind :80\n acl a {text}\n http-request set-header X %[{text}]\n http-request set-var(txn.v) {text}\n"
    );
    if let Ok(c) = ebb::config::parse_str("f.cfg", &cfg) {
        let _ = ebb::proxy::compile(&c);
    }
});
