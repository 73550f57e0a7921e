//! `ring` sections, `log ring@NAME` and `log tcp@HOST:PORT` targets, and
//! `show events`, as HAProxy 2.6 has them: a ring keeps the messages in its
//! format for `show events`, and its `server` lines get them over TCP
//! (`log-proto octet-count`: `LEN MSG`; `legacy`: `MSG\n`); a `tcp@`
//! target is a ring of its own (`ring#1`), whose server gets the messages
//! logged before it could connect; `show events NAME -w` follows the
//! ring. Checked beside Debian's haproxy when it
//! is installed, on the same configuration.

mod common;

use std::io::Read;
use std::net::TcpListener;
use std::path::Path;
use std::sync::{Arc, Mutex};

use common::{cli_cmd, closed_port, ebb_with_admin, get, haproxy_beside, wait_until};

/// Collects what every connection accepted on `l` sends.
fn collect(l: TcpListener) -> Arc<Mutex<Vec<u8>>> {
    let got = Arc::new(Mutex::new(Vec::new()));
    let g = got.clone();
    std::thread::spawn(move || {
        for mut c in l.incoming().map_while(Result::ok) {
            let g = g.clone();
            std::thread::spawn(move || {
                let mut b = [0u8; 4096];
                while let Ok(n) = c.read(&mut b) {
                    if n == 0 {
                        break;
                    }
                    g.lock().unwrap().extend_from_slice(&b[..n]);
                }
            });
        }
    });
    got
}

fn text(v: &Arc<Mutex<Vec<u8>>>) -> String {
    String::from_utf8_lossy(&v.lock().unwrap()).into_owned()
}

fn cfg(sock: &Path, bind: &str, oc: u16, legacy: u16) -> String {
    format!(
        "global\n    stats socket {} level admin\n    log ring@r local0\n    log tcp@127.0.0.1:{legacy} format raw local1\n\
         ring r\n    description \"test ring\"\n    format short\n    maxlen 200\n    size 20000\n\
         \x20   timeout connect 5s\n    timeout server 10s\n    server s 127.0.0.1:{oc} log-proto octet-count\n\
         defaults\n    mode http\n    log global\n    timeout client 10s\n    timeout connect 5s\n    timeout server 10s\n\
         frontend fe\n    bind {bind}\n    log-format \"hello %HU\"\n    http-request return status 200\n",
        sock.display()
    )
}

/// Runs the exchanges on one server (`ebb` or `haproxy`) and checks what
/// its rings hold and send.
fn check(
    who: &str,
    sock: &Path,
    addr: std::net::SocketAddr,
    oc: TcpListener,
    legacy: common::ClosedPort,
) {
    let oc = collect(oc);
    // Logged while the `tcp@` server does not listen yet: kept for it.
    assert_eq!(get(addr, "/a").status, 200, "{who}");
    wait_until("the ring's first message", || {
        cli_cmd(sock, "show events r").contains("hello /a")
    });
    let legacy = collect(legacy.listen());
    assert_eq!(get(addr, "/b").status, 200, "{who}");
    wait_until("both messages in the ring", || {
        cli_cmd(sock, "show events r").contains("hello /b")
    });
    // `format short`: `<LEVEL>` then the message, one per line.
    assert_eq!(
        cli_cmd(sock, "show events r"),
        "<6>hello /a\n<6>hello /b\n\n",
        "{who}"
    );
    assert_eq!(cli_cmd(sock, "show events r -n"), "\n", "{who}");
    let list = cli_cmd(sock, "show events");
    assert!(
        list.starts_with(
            "Supported events sinks are listed below. Add -w(wait), -n(new). Any key to stop\n"
        ),
        "{who}: {list}"
    );
    for l in [
        "    buf0       : type=buffer, 0 dropped, in-memory ring buffer\n",
        "    r          : type=buffer, 0 dropped, test ring\n",
        "    ring#1     : type=buffer, 0 dropped, created from logserver declared into '",
    ] {
        assert!(list.contains(l), "{who}: {list}");
    }
    assert!(
        cli_cmd(sock, "show events nope").starts_with("No such event sink"),
        "{who}"
    );
    assert!(
        cli_cmd(sock, "show events r -x").starts_with("unknown option"),
        "{who}"
    );
    // Octet counting to the ring's server; the tcp@ target's (`legacy`)
    // gets the message logged before it listened, then the next.
    wait_until("the octet-counted messages", || {
        text(&oc) == "11 <6>hello /a11 <6>hello /b"
    });
    wait_until("the tcp@ target's messages", || {
        text(&legacy) == "hello /a\nhello /b\n"
    });
}

/// Reads from `c` until what came ends with `want`; all of it.
fn read_until(c: &mut std::os::unix::net::UnixStream, want: &str) -> String {
    let mut got = Vec::new();
    let mut b = [0u8; 4096];
    while !String::from_utf8_lossy(&got).ends_with(want) {
        match c.read(&mut b) {
            Ok(0) => break,
            Ok(n) => got.extend_from_slice(&b[..n]),
            Err(e) => panic!("after {:?}: {e}", String::from_utf8_lossy(&got)),
        }
    }
    String::from_utf8_lossy(&got).into_owned()
}

/// `show events r -w`: the messages held, then each new one as it comes;
/// what the client sends ends the command at the next message (HAProxy
/// 2.6 looks at its input only then), with the empty line that ends an
/// answer, and the connection closes.
fn watch(who: &str, sock: &Path, addr: std::net::SocketAddr) {
    use std::io::Write;
    let mut c = std::os::unix::net::UnixStream::connect(sock).unwrap();
    c.set_read_timeout(Some(std::time::Duration::from_secs(30)))
        .unwrap();
    c.write_all(b"show events r -w\n").unwrap();
    assert_eq!(
        read_until(&mut c, "hello /b\n"),
        "<6>hello /a\n<6>hello /b\n",
        "{who}"
    );
    assert_eq!(get(addr, "/c").status, 200, "{who}");
    assert_eq!(read_until(&mut c, "\n"), "<6>hello /c\n", "{who}");
    c.write_all(b"show info\n").unwrap();
    assert_eq!(get(addr, "/d").status, 200, "{who}");
    if who == "haproxy" {
        // HAProxy reads its input when a message wakes it: on a loaded
        // machine the line may come in after /d's wake-up, and then the
        // next message ends the watch.
        let got = read_until(&mut c, "hello /d\n");
        if got.ends_with("\n\n") {
            assert_eq!(got, "<6>hello /d\n\n", "{who}");
            return;
        }
        assert_eq!(got, "<6>hello /d\n", "{who}");
        assert_eq!(get(addr, "/e").status, 200, "{who}");
        let mut rest = String::new();
        if let Err(e) = c.read_to_string(&mut rest) {
            panic!("{who}: {e} after {rest:?}");
        }
        assert!(rest == "\n" || rest == "<6>hello /e\n\n", "{who}: {rest:?}");
        return;
    }
    let mut rest = String::new();
    if let Err(e) = c.read_to_string(&mut rest) {
        panic!("{who}: {e} after {rest:?}");
    }
    assert_eq!(rest, "<6>hello /d\n\n", "{who}");
}

#[test]
fn rings_keep_and_forward_messages_as_haproxy() {
    let (oc, legacy) = (TcpListener::bind("127.0.0.1:0").unwrap(), closed_port());
    let (oc_port, legacy_port) = (oc.local_addr().unwrap().port(), legacy.addr.port());
    let (e, sock) = ebb_with_admin("rings", |s, b| cfg(s, b, oc_port, legacy_port));
    check("ebb", &sock, e.addrs[0], oc, legacy);
    watch("ebb", &sock, e.addrs[0]);
    drop(e);
    let (oc, legacy) = (TcpListener::bind("127.0.0.1:0").unwrap(), closed_port());
    let (oc_port, legacy_port) = (oc.local_addr().unwrap().port(), legacy.addr.port());
    if let Some((h, addr)) = haproxy_beside("rings", |s, b| cfg(s, b, oc_port, legacy_port)) {
        check("haproxy", &h.sock, addr, oc, legacy);
        watch("haproxy", &h.sock, addr);
    }
}

#[test]
fn unknown_rings_and_ring_server_options_are_refused() {
    let d = common::scratch("rings-bad");
    for (text, what) in [
        (
            "global\n    log ring@nope local0\n",
            "t.cfg:2: log server uses unknown ring named 'nope'",
        ),
        (
            "ring r\n    server s 127.0.0.1:6514 ssl\n",
            "t.cfg:2: server 's': 'ssl' is not supported on a ring's server",
        ),
    ] {
        common::assert_refused(&d, "t.cfg", text, what, false);
    }
    // HAProxy refuses the unknown ring too.
    common::assert_refused(
        &d,
        "t.cfg",
        "global\n    log ring@nope local0\n",
        "unknown ring",
        true,
    );
}
