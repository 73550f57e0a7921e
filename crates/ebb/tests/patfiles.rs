//! Map and ACL files changed at run time through the CLI (`add map`,
//! `set map`, `del map`, `clear map`, `add acl`, `del acl`, `show ...`,
//! `get ...`), seen by the `map_*` converters and `-f` ACLs of every
//! thread; log-format targets of `redirect`; the log's idle and total
//! timers and server fields; `srv_id`, `return ... lf-file`. Through the
//! real binary.

mod common;

use common::origin::{Mode, Origin};
use common::{cli_cmd, raw, scratch, wait_until, Ebb};

fn get(addr: std::net::SocketAddr, path: &str, ua: &str) -> common::Resp {
    let req = format!("GET {path} HTTP/1.1\r\nHost: h\r\nUser-Agent: {ua}\r\n\r\n");
    raw(addr, req.as_bytes()).expect("an answer")
}

#[test]
fn cli_changes_to_maps_and_acls_reach_every_thread() {
    let o = Origin::start("o", Mode::Ok);
    let d = scratch("patfiles");
    let map = d.join("m.map");
    let acl = d.join("a.acl");
    let sock = d.join("admin.sock");
    std::fs::write(&map, "/a va\n# comment\n/b vb\n").unwrap();
    std::fs::write(&acl, "Bad Bot\n").unwrap();
    let ebb = Ebb::start(&format!(
        "global\n nbthread 2\n stats socket {} level admin\ndefaults\n mode http\n timeout client 10s\n timeout server 10s\n timeout connect 5s\nfrontend fe\n bind BIND\n http-request deny if {{ req.hdr(user-agent) -i -f {} }}\n http-request return status 200 content-type text/plain lf-string \"v=%[path,map({},none)] beg=%[path,map_beg({},none)]\"\n default_backend be\nbackend be\n server o {}\n",
        sock.display(),
        acl.display(),
        map.display(),
        map.display(),
        o.addr
    ));
    let a = ebb.addr();
    // Several connections: they land on both threads.
    let body = |p: &str| {
        (0..6)
            .map(|_| get(a, p, "x").text())
            .collect::<std::collections::BTreeSet<_>>()
    };
    assert_eq!(body("/a"), ["v=va beg=va".to_string()].into());
    assert_eq!(get(a, "/", "bad bot").status, 403);
    assert_eq!(get(a, "/", "Mon User Agent;").status, 200);

    let cli = |l: &str| cli_cmd(&sock, l);
    // HAProxy's formats (checked against haproxy 2.6).
    let show = cli("show map");
    // Ids follow the order files are first named: the ACL's, then the map's.
    assert!(show.starts_with("# id (file) description\n1 ("), "{show}");
    assert!(show.contains("entry_cnt=4"), "{show}");
    let entries = cli(&format!("show map {}", map.display()));
    let lines: Vec<&str> = entries.lines().filter(|l| !l.is_empty()).collect();
    assert_eq!(lines.len(), 2, "{entries}");
    assert!(
        lines[0].starts_with("0x") && lines[0].ends_with(" /a va"),
        "{entries}"
    );
    assert_eq!(
        cli(&format!("get map {} /a", map.display())),
        "type=str, case=sensitive, found=yes, idx=tree, key=\"/a\", value=\"va\", type=\"str\"\ntype=beg, case=sensitive, found=yes, idx=tree, key=\"/a\", value=\"va\", type=\"str\"\n\n"
    );
    assert_eq!(
        cli(&format!("get acl {} BAD\\ bot", acl.display())),
        "type=str, case=insensitive, match=yes, idx=list, pattern=\"Bad Bot\"\n\n"
    );
    assert_eq!(
        cli(&format!("get acl {} nope", acl.display())),
        "type=str, case=insensitive, match=no\n\n"
    );
    assert_eq!(
        cli("show map /nope"),
        "Unknown map identifier. Please use #<id> or <file>.\n\n"
    );

    // Changes.
    assert_eq!(cli(&format!("add map {} /c vc", map.display())), "\n");
    assert_eq!(cli("set map #1 /a new"), "\n");
    assert_eq!(cli(&format!("del map {} /b", map.display())), "\n");
    assert_eq!(
        cli(&format!("del map {} /b", map.display())),
        "Key not found.\n\n"
    );
    assert_eq!(body("/a"), ["v=new beg=new".to_string()].into());
    assert_eq!(body("/b"), ["v=none beg=none".to_string()].into());
    assert_eq!(body("/cc"), ["v=none beg=vc".to_string()].into());
    // An escaped space is part of the pattern (HAProxy's CLI).
    assert_eq!(
        cli(&format!("add acl {} Mon\\ User\\ Agent\\;", acl.display())),
        "\n"
    );
    assert!(cli(&format!("show acl {}", acl.display())).contains(" Mon User Agent;\n"));
    for _ in 0..6 {
        assert_eq!(get(a, "/", "Mon User Agent;").status, 403);
    }
    assert_eq!(cli(&format!("del acl {} Bad\\ Bot", acl.display())), "\n");
    assert_eq!(get(a, "/", "bad bot").status, 200);
    assert_eq!(cli(&format!("clear map {}", map.display())), "\n");
    assert_eq!(body("/a"), ["v=none beg=none".to_string()].into());
    // A map's entries must suit its users: none here take integers, but
    // every change still needs the operator level.
    let user_sock = d.join("user.sock");
    let imap = d.join("i.map");
    std::fs::write(&imap, "/x 1\n").unwrap();
    drop(ebb);
    let ebb = Ebb::start(&format!(
        "global\n stats socket {} level user\ndefaults\n mode http\nfrontend fe\n bind BIND\n http-request return status 200 content-type text/plain lf-string \"%[path,map_str_int({},0)]\"\n",
        user_sock.display(),
        imap.display()
    ));
    let r = cli_cmd(&user_sock, &format!("add map {} /y 2", imap.display()));
    assert!(r.starts_with("Permission denied"), "{r}");
    let _ = ebb;
}

#[test]
fn redirect_targets_and_log_timers() {
    let o = Origin::start("o", Mode::Ok);
    let ebb = Ebb::start(&format!(
        "global\n log stdout format raw local0\ndefaults\n mode http\n log global\n timeout client 10s\n timeout server 10s\n timeout connect 5s\nfrontend fe\n bind BIND\n log-format \"%Th %Ti %TR %Tq %Ta %Tt %Tu %bc/%sc/%rc %si:%sp %{{+Q}}r\"\n http-request redirect location /to/%[req.hdr(x-to)]%[path] code 301 if {{ path_beg /r }}\n http-request redirect prefix /v2/ if {{ path_beg /p }}\n default_backend be\nbackend be\n server o {}\n",
        o.addr
    ));
    let r = raw(
        ebb.addr(),
        b"GET /r/x?q HTTP/1.1\r\nHost: h\r\nX-To: there\r\n\r\n",
    )
    .unwrap();
    assert_eq!(r.status, 301);
    assert_eq!(r.header("location"), Some("/to/there/r/x"));
    // HAProxy keeps the prefix as written (compared side by side).
    let r = raw(ebb.addr(), b"GET /pa HTTP/1.1\r\nHost: h\r\n\r\n").unwrap();
    assert_eq!(r.header("location"), Some("/v2//pa"));
    let r = raw(ebb.addr(), b"GET /s HTTP/1.1\r\nHost: h\r\n\r\n").unwrap();
    assert_eq!(r.status, 200);
    wait_until("the log line of /s", || {
        ebb.stdout
            .lock()
            .unwrap()
            .iter()
            .any(|l| l.contains("/s HTTP"))
    });
    let l = ebb.stdout.lock().unwrap().clone();
    let line = l.iter().find(|l| l.contains("/s HTTP")).unwrap();
    let w: Vec<&str> = line.split(' ').collect();
    let n = |i: usize| w[i].parse::<i64>().unwrap_or(-99);
    // Th is 0; Tq = Th + Ti + TR; Tt = Th + Ti + Ta; Tu = Tt - Ti.
    assert_eq!(n(0), 0, "{line}");
    assert!(n(1) >= 0, "{line}");
    assert_eq!(n(3), n(0) + n(1) + n(2), "{line}");
    assert_eq!(n(5), n(0) + n(1) + n(4), "{line}");
    assert_eq!(n(6), n(5) - n(1), "{line}");
    // The slot is given back before the line, as HAProxy logs it.
    assert_eq!(w[7], "0/0/0", "{line}");
    assert_eq!(w[8], o.addr.to_string(), "{line}");
}

#[test]
fn srv_id_and_lf_file_answers() {
    let a = Origin::start("a", Mode::Ok);
    let b = Origin::start("b", Mode::Ok);
    let d = scratch("lffile");
    let f = d.join("body.txt");
    std::fs::write(&f, "path is %[path]\n").unwrap();
    let ebb = Ebb::start(&format!(
        "defaults\n mode http\nfrontend fe\n bind BIND\n http-request return content-type text/plain lf-file {} if {{ path_beg /lf }}\n http-request return content-type text/plain if {{ path /ct }}\n default_backend be\nbackend be\n http-response set-header X-Srv-Id %[srv_id]\n server a {}\n server b {}\n",
        f.display(),
        a.addr,
        b.addr
    ));
    let r = raw(ebb.addr(), b"GET /lf/x HTTP/1.1\r\nHost: h\r\n\r\n").unwrap();
    assert_eq!(r.text(), "path is /lf/x\n");
    // HAProxy ignores 'content-type' on an answer without payload.
    let r = raw(ebb.addr(), b"GET /ct HTTP/1.1\r\nHost: h\r\n\r\n").unwrap();
    assert_eq!(r.status, 200);
    let ids: std::collections::BTreeSet<String> = (0..4)
        .map(|_| {
            let r = raw(ebb.addr(), b"GET / HTTP/1.1\r\nHost: h\r\n\r\n").unwrap();
            r.header("x-srv-id").unwrap_or("-").to_string()
        })
        .collect();
    assert_eq!(ids, ["1".to_string(), "2".to_string()].into());
}

/// `add map MAP <<` with its entries as a payload (a `KEY VALUE` per
/// line, the value the rest of the line, up to an empty line): HAProxy
/// 2.6's CLI framing, used by the reg-test `http-rules/map_redirect`.
/// ebb answered that it took no payload. The same answers and entries
/// as haproxy's (the entries' ids aside), beside it.
#[test]
fn add_map_takes_a_payload_as_haproxy() {
    let run = |who: &str| {
        let d = scratch(&format!("mappayload-{who}"));
        let map = d.join("m.map");
        std::fs::write(&map, "/a va\n").unwrap();
        let rest = format!(
            "defaults\n mode http\n timeout client 10s\nfrontend fe\n bind 127.0.0.1:{}\n http-request return status 200 content-type text/plain lf-string \"%[path,map({},none)]\"\n",
            common::free_port(),
            map.display()
        );
        let (_keep, sock): (Box<dyn std::any::Any>, std::path::PathBuf) = if who == "ebb" {
            let sock = d.join("admin.sock");
            let e = Ebb::start(&format!(
                "global\n stats socket {} level admin\n{rest}",
                sock.display()
            ));
            (Box::new(e), sock)
        } else {
            let h = common::haproxy_with("mappayload", &rest)?;
            let sock = h.sock.clone();
            (Box::new(h), sock)
        };
        let m = map.display();
        // (cli_cmd ends the last line: the `\n` here is the empty line.)
        let mut answers = vec![
            cli_cmd(
                &sock,
                &format!("add map {m} <<\n/b vb\n/c two  words\t x\n"),
            ),
            cli_cmd(&sock, &format!("add map {m} <<\n/d vd\n/e\n")),
            cli_cmd(&sock, "add map <<\n/f vf\n"),
        ];
        // The entries, without their ids.
        answers.push(
            cli_cmd(&sock, &format!("show map {m}"))
                .lines()
                .map(|l| l.split_once(' ').map_or(l, |x| x.1).to_string() + "\n")
                .collect(),
        );
        Some(answers)
    };
    let ebb = run("ebb").unwrap();
    assert_eq!(
        ebb,
        [
            "\n",
            "Missing value for key '/e'.\n\n",
            "'add map' expects three parameters (map identifier, key and value) or one parameter (map identifier) and a payload\n\n",
            "/a va\n/b vb\n/c two  words\t x\n/d vd\n\n",
        ]
    );
    if let Some(hap) = run("haproxy") {
        assert_eq!(hap, ebb, "haproxy");
    }
}
