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
    // Ids follow the order references are made: the ACL's file, the
    // ACL line's own patterns, then the map (haproxy's: 0, 1, 2).
    assert!(show.starts_with("# id (file) description\n2 ("), "{show}");
    assert!(show.contains("used by map at file '"), "{show}");
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
    assert_eq!(cli("set map #2 /a new"), "\n");
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

/// `show acl` of a configuration, its configuration file's path replaced
/// by `CFG`, without haproxy's own two references (its `httpclient`
/// proxy's ACLs, listed last).
fn acl_list(sock: &std::path::Path, cfg_path: &str) -> String {
    cli_cmd(sock, "show acl")
        .replace(cfg_path, "CFG")
        .lines()
        .filter(|l| !l.contains("file 'httpclient'"))
        .map(|l| format!("{l}\n"))
        .collect()
}

/// The keys `show acl #ID` lists (without the entries' addresses).
fn acl_keys(sock: &std::path::Path, id: &str) -> Vec<String> {
    cli_cmd(sock, &format!("show acl {id}"))
        .lines()
        .filter_map(|l| l.split_once(' ').map(|(_, k)| k.to_string()))
        .collect()
}

/// The patterns written on an ACL line are a reference of their own, as
/// in HAProxy 2.6: `show acl` lists them beside the files (`acl 'path'
/// file 'F' line N`), numbered in the order references are made, `-u ID`
/// keeping its id and the others skipping it, a predefined ACL
/// (`METH_POST`) once per proxy; `add acl #ID`, `del acl #ID` and `clear
/// acl #ID` change what the line matches. Side by side with haproxy: the
/// same list (but its configuration's path and its `httpclient` lines),
/// the same keys (`gt 2` kept as `3:`), the same answers after the same
/// changes. Before, ebb listed files only (their ids shifted) and refused
/// `-u`.
#[test]
fn acl_lines_patterns_are_listed_numbered_and_changed_as_haproxys() {
    let d = scratch("aclids");
    let pats = d.join("p.lst");
    std::fs::write(&pats, "/p1\n/p2\n").unwrap();
    let rest = |bind: &str| {
        format!(
            "defaults\n    mode http\n    timeout client 10s\n    timeout server 10s\n    timeout connect 5s\n\
             frontend fe\n    bind {bind}\n\
             \x20   acl t1 always_true\n\
             \x20   acl t3 src 10.0.0.0/8 192.0.2.1\n\
             \x20   acl t5 req.hdr_cnt(x) gt 2\n\
             \x20   acl t6 path -i -f {} /inline\n\
             \x20   acl t7 path_beg -u 3 /u\n\
             \x20   acl t8 req.hdr(z) -m bin 4142\n\
             \x20   http-request deny if {{ path_end .php }} || t3 || t5 || t6 || t7 || t8 || METH_POST\n\
             \x20   http-request deny deny_status 401 if METH_POST\n\
             \x20   http-request return status 200 content-type text/plain string ok if t1\n",
            pats.display()
        )
    };
    let sock = d.join("admin.sock");
    let ebb = Ebb::start(&format!(
        "global\n    stats socket {} level admin\n{}",
        sock.display(),
        rest("BIND")
    ));
    let ebb_cfg = ebb.dir.join("ebb.cfg").display().to_string();
    let mine = acl_list(&sock, &ebb_cfg);
    assert_eq!(
        mine,
        "# id (file) description\n\
         0 () acl 'always_true' file 'CFG' line 10. curr_ver=0 next_ver=0 entry_cnt=0\n\
         1 () acl 'src' file 'CFG' line 11. curr_ver=0 next_ver=0 entry_cnt=2\n\
         2 () acl 'req.hdr_cnt' file 'CFG' line 12. curr_ver=0 next_ver=0 entry_cnt=1\n\
         3 () acl 'path_beg' file 'CFG' line 14. curr_ver=0 next_ver=0 entry_cnt=1\n"
            .to_string()
            + &format!(
                "4 ({0}) pattern loaded from file '{0}' used by acl at file 'CFG' line 13. curr_ver=0 next_ver=0 entry_cnt=2\n",
                pats.display()
            )
            + "5 () acl 'path' file 'CFG' line 13. curr_ver=0 next_ver=0 entry_cnt=1\n\
               6 () acl 'req.hdr' file 'CFG' line 15. curr_ver=0 next_ver=0 entry_cnt=1\n\
               7 () acl 'path_end' file 'CFG' line 16. curr_ver=0 next_ver=0 entry_cnt=1\n\
               8 () acl 'method' file 'CFG' line 16. curr_ver=0 next_ver=0 entry_cnt=1\n\n"
    );
    assert_eq!(acl_keys(&sock, "#2"), ["3:"]);
    assert_eq!(acl_keys(&sock, "#1"), ["10.0.0.0/8", "192.0.2.1"]);
    let hap = common::haproxy_with("aclids-h", &{
        let port = common::free_port();
        rest(&format!("127.0.0.1:{port}"))
    });
    if let Some(h) = &hap {
        let hcfg = h.sock.with_file_name("h.cfg").display().to_string();
        assert_eq!(acl_list(&h.sock, &hcfg), mine, "haproxy's list");
        for id in ["#1", "#2", "#3", "#4", "#6"] {
            assert_eq!(acl_keys(&h.sock, id), acl_keys(&sock, id), "{id}");
        }
    }
    // Changes, each seen by the requests (and, side by side, haproxy's
    // answers to the same commands).
    let a = ebb.addr();
    let st = |p: &str, extra: &str| {
        raw(
            a,
            format!("GET {p} HTTP/1.1\r\nHost: h\r\n{extra}\r\n").as_bytes(),
        )
        .expect("an answer")
        .status
    };
    assert_eq!(st("/v", ""), 200);
    assert_eq!(st("/inline", ""), 403);
    for cmd in [
        "add acl #3 /v",
        "add acl #6 4344",
        "del acl #5 /inline",
        "add acl #2 zz",
        "add acl #99 /x",
    ] {
        let got = cli_cmd(&sock, cmd);
        if let Some(h) = &hap {
            assert_eq!(got, cli_cmd(&h.sock, cmd), "{cmd}");
        }
    }
    assert_eq!(st("/v", ""), 403, "add acl #3 /v");
    assert_eq!(st("/", "z: CD\r\n"), 403, "add acl #6 4344 (-m bin)");
    assert_eq!(st("/inline", ""), 200, "del acl #5 /inline");
    assert_eq!(st("/P1", ""), 403, "the file's entries still match (-i)");
    assert_eq!(cli_cmd(&sock, "clear acl #3"), "\n");
    assert_eq!(st("/u", ""), 200, "clear acl #3");
    assert_eq!(st("/v", ""), 200, "clear acl #3");
    // A reused id is refused at start, as by haproxy.
    common::assert_refused(
        &d,
        "dup.cfg",
        "defaults\n    mode http\nfrontend fe\n    bind 127.0.0.1:0\n    acl a path -u 4 /a\n    acl b path -u 4 /b\n",
        "dup.cfg:6: the id is already used",
        true,
    );
}

/// A reload (SIGHUP, without the master) reads the pattern files again,
/// as HAProxy's reload (a new process) does: before, the file's first
/// reading stayed (and `show acl` named its user twice).
#[test]
fn a_reload_reads_pattern_files_again() {
    let d = scratch("patreload");
    let pats = d.join("p.lst");
    std::fs::write(&pats, "/p1\n").unwrap();
    let sock = d.join("admin.sock");
    let ebb = Ebb::start(&format!(
        "global\n    stats socket {} level admin\ndefaults\n    mode http\n    timeout client 10s\n    timeout server 10s\n    timeout connect 5s\n\
         frontend fe\n    bind BIND\n    http-request deny if {{ path -f {} }}\n    http-request return status 200 content-type text/plain string ok\n",
        sock.display(),
        pats.display()
    ));
    let st = |p: &str| {
        raw(
            ebb.addr(),
            format!("GET {p} HTTP/1.1\r\nHost: h\r\n\r\n").as_bytes(),
        )
        .expect("an answer")
        .status
    };
    assert_eq!((st("/p1"), st("/p2")), (403, 200));
    std::fs::write(&pats, "/p2\n").unwrap();
    ebb.signal("HUP");
    wait_until("the reload", || st("/p2") == 403);
    assert_eq!(st("/p1"), 200);
    let show = cli_cmd(&sock, "show acl");
    assert_eq!(show.matches("used by acl at").count(), 1, "{show}");
}
