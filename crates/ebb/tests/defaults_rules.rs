//! `http-request`, `http-response` and `http-after-response` rules in
//! named defaults sections (HAProxy 2.5+): they run before the rules of
//! each proxy using the section, and the section's limits are enforced at
//! start. The configurations are those of HAProxy's
//! reg-tests/http-rules/default_rules.vtc and startup/default_rules.vtc
//! (the parts ebb implements), whose outcomes HAProxy 2.6 gives.

mod common;

use common::origin::{Mode, Origin};
use common::{raw, run_ebb, scratch, Ebb};

#[test]
fn defaults_rules_run_before_the_proxys_own() {
    let o = Origin::start("o", Mode::Ok);
    let ebb = Ebb::start(&format!(
        "defaults common\n mode http\n timeout client 10s\n timeout server 10s\n timeout connect 5s\n\
defaults def_front from common\n http-request set-header x-frontend \"%[fe_name]\"\n http-request set-var(txn.test1) \"str(def_front)\"\n http-response set-header x-frontend \"%[fe_name]\"\n http-response set-var(txn.test2) \"str(def_front)\"\n http-after-response set-var(txn.test3) \"str(def_front)\"\n\
defaults def_back from common\n http-request set-header x-backend \"%[be_name]\"\n http-request set-var(txn.test1) \"str(def_back)\"\n http-response set-header x-backend \"%[be_name]\"\n http-response set-var(txn.test2) \"str(def_back)\"\n http-after-response set-var(txn.test3) \"str(def_back)\"\n\
frontend fe from def_front\n bind BIND\n http-request set-header x-test1-frt \"%[var(txn.test1)]\"\n http-response set-header x-test2-frt \"%[var(txn.test2)]\"\n http-after-response set-header x-test3-frt \"%[var(txn.test3)]\"\n default_backend be\n\
backend be from def_back\n http-request set-header x-test1-bck \"%[var(txn.test1)]\"\n http-response set-header x-test2-bck \"%[var(txn.test2)]\"\n http-after-response set-header x-test3-bck \"%[var(txn.test3)]\"\n server s1 {}\n",
        o.addr
    ));
    let r = raw(ebb.addr(), b"GET / HTTP/1.1\r\nHost: h\r\n\r\n").expect("an answer");
    assert_eq!(r.status, 200);
    let head = o.heads.lock().unwrap()[0].clone().to_ascii_lowercase();
    assert!(head.contains("x-frontend: fe\r\n"), "{head}");
    assert!(head.contains("x-backend: be\r\n"), "{head}");
    assert!(head.contains("x-test1-frt: def_front\r\n"), "{head}");
    assert!(head.contains("x-test1-bck: def_back\r\n"), "{head}");
    assert_eq!(r.header("x-frontend"), Some("fe"));
    assert_eq!(r.header("x-backend"), Some("be"));
    assert_eq!(r.header("x-test2-bck"), Some("def_back"));
    assert_eq!(r.header("x-test2-frt"), Some("def_front"));
    assert_eq!(r.header("x-test3-bck"), Some("def_back"));
    assert_eq!(r.header("x-test3-frt"), Some("def_front"));
}

#[test]
fn allow_in_defaults_stops_the_proxys_rules_too() {
    let ebb = Ebb::start(
        "defaults common\n mode http\ndefaults def_front from common\n http-request allow if { path /a }\nfrontend fe from def_front\n bind BIND\n http-request deny deny_status 403\n",
    );
    // HAProxy: `allow` ends the evaluation of the whole list (the
    // defaults' then the proxy's), so the deny does not run: no backend,
    // 503. Without the allow, the proxy's deny answers.
    let r = raw(ebb.addr(), b"GET /a HTTP/1.1\r\nHost: h\r\n\r\n").expect("an answer");
    assert_eq!(r.status, 503);
    let r = raw(ebb.addr(), b"GET /b HTTP/1.1\r\nHost: h\r\n\r\n").expect("an answer");
    assert_eq!(r.status, 403);
}

#[test]
fn defaults_rules_are_refused_where_haproxy_refuses_them() {
    let dir = scratch("defrules");
    let cases = [
        (
            "defaults\n mode http\n http-request set-header X-Hdr 1\n",
            "ebb.cfg:3: ",
            "only allowed in a named defaults section",
        ),
        (
            "defaults\n mode http\n http-response set-header X-Hdr 1\n",
            "ebb.cfg:3: ",
            "only allowed in a named defaults section",
        ),
        (
            "defaults invalid\n mode http\n http-request set-header X 1\ndefaults from invalid\n mode http\n",
            "ebb.cfg:4: ",
            "cannot inherit from a defaults section defining rules",
        ),
        (
            "defaults invalid\n mode http\n http-request set-header X 1\nlisten li from invalid\n bind 127.0.0.1:0\n server www 127.0.0.1:80\n",
            "ebb.cfg:4: ",
            "a listen section cannot inherit from a defaults section defining rules",
        ),
        (
            "defaults invalid\n mode http\n http-request set-header X 1\nfrontend fe from invalid\n bind 127.0.0.1:0\n default_backend be\nbackend be from invalid\n server www 127.0.0.1:80\n",
            "ebb.cfg:7: ",
            "frontends and backends cannot inherit from the same defaults section",
        ),
    ];
    for (cfg, at, what) in cases {
        let p = dir.join("ebb.cfg");
        std::fs::write(&p, cfg).unwrap();
        let (code, _, err) = run_ebb(&["-c", "-f", p.to_str().unwrap()], &dir);
        assert_ne!(code, 0, "{cfg}");
        assert!(err.contains(at) && err.contains(what), "{cfg}\n{err}");
    }
}
