//! Agent checks through the real binary: a python agent on loopback
//! changes its answer, and the server follows (drain, down, weight 50 %,
//! back up), with `show stat`'s fields compared with HAProxy 2.6's own
//! (Debian's haproxy, run beside ebb against the same agent) when it is
//! installed; the CLI's `enable|disable agent` and `set server ... agent*`
//! commands; the configuration errors.

mod common;

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};

use common::origin::{Mode, Origin};
use common::*;

/// The agent: answers every connection with the file's content, once the
/// `agent-send` line arrived; the last line it got goes to `got`.
const AGENT_PY: &str = r#"
import os, socket, sys, threading
port_file, answer, got = sys.argv[1:4]
s = socket.socket()
s.bind(("127.0.0.1", 0))
s.listen(128)
with open(port_file + ".tmp", "w") as f:
    f.write(str(s.getsockname()[1]))
os.rename(port_file + ".tmp", port_file)
def serve(c):
    try:
        c.settimeout(10)
        # What the checker sends comes in one write: one read.
        data = c.recv(256)
        # One temporary file per thread: ebb's and haproxy's checks may
        # come at once, and a shared name lets one thread's rename fail
        # (the other moved the file), which left a checker without answer.
        tmp = "%s.%d.tmp" % (got, threading.get_ident())
        with open(tmp, "wb") as f:
            f.write(data)
        os.rename(tmp, got)
        with open(answer, "rb") as f:
            c.sendall(f.read())
    except Exception:
        pass
    c.close()
while True:
    c, _ = s.accept()
    threading.Thread(target=serve, args=(c,), daemon=True).start()
"#;

struct Agent {
    child: Child,
    port: u16,
    answer: PathBuf,
    got: PathBuf,
}

impl Drop for Agent {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Agent {
    fn start(first: &str) -> Agent {
        let d = scratch("agent-py");
        let script = d.join("agent.py");
        std::fs::write(&script, AGENT_PY).unwrap();
        let (port_file, answer, got) = (d.join("port"), d.join("answer"), d.join("got"));
        let mut a = Agent {
            child: Command::new("python3")
                .arg(&script)
                .args([&port_file, &answer, &got])
                .stdout(Stdio::null())
                .spawn()
                .expect("python3"),
            port: 0,
            answer,
            got,
        };
        a.say(first);
        wait_until("the agent's port", || port_file.exists());
        a.port = std::fs::read_to_string(&port_file)
            .unwrap()
            .parse()
            .unwrap();
        a
    }

    /// The agent's next answers.
    fn say(&self, text: &str) {
        let tmp = self.answer.with_extension("tmp");
        std::fs::write(&tmp, text).unwrap();
        std::fs::rename(&tmp, &self.answer).unwrap();
    }
}

/// ebb with an admin socket (its path) and `backend` (the lines of `be`).
fn ebb(backend: &str, name: &str) -> (Ebb, PathBuf) {
    let sock = scratch(name).join("admin.sock");
    let e = Ebb::start(&format!(
        "global\n    stats socket {} level admin\ndefaults\n    mode http\n    timeout client 10s\n    timeout server 5s\n    timeout connect 1s\n\
         frontend fe\n    bind BIND\n    default_backend be\nbackend be\n{backend}",
        sock.display()
    ));
    (e, sock)
}

/// haproxy 2.6 with an admin socket and the same backend.
fn haproxy(backend: &str) -> Option<Hap> {
    haproxy_with(
        "agent-hap",
        &format!(
            "defaults\n    mode http\n    timeout client 10s\n    timeout server 5s\n    timeout connect 1s\n\
             frontend fe\n    bind 127.0.0.1:{}\n    default_backend be\nbackend be\n{backend}",
            free_port()
        ),
    )
}

/// The row of `be/NAME` in `show stat`, by column name.
fn row(sock: &Path, name: &str) -> HashMap<String, String> {
    stat_row(sock, "be", name)
}

/// The fields an agent check sets (the duration aside); a `* ` (check
/// under way) is not compared.
const FIELDS: &[&str] = &[
    "status",
    "weight",
    "uweight",
    "slim",
    "agent_status",
    "agent_code",
    "agent_desc",
    "last_agt",
    "agent_rise",
    "agent_fall",
    "agent_health",
    "check_status",
];

fn fields_of(r: &HashMap<String, String>) -> Vec<(String, String)> {
    FIELDS
        .iter()
        .map(|f| {
            let v = r.get(*f).cloned().unwrap_or_default();
            (f.to_string(), v.trim_start_matches("* ").to_string())
        })
        .collect()
}

/// Waits until `be/a` shows `want` (status and last agent report) on
/// ebb and on haproxy, then requires the same fields on both: those of
/// the row that showed `want` with no agent check under way (`* `): while
/// one runs, haproxy's `last_agt` is empty, and a row read then differed.
fn settle(e: &Path, h: Option<&Path>, want: &[(&str, &str)]) -> Vec<(String, String)> {
    // haproxy's answers are read lossily (see cli_cmd_lossy), ebb's must
    // be UTF-8.
    let settled = |sock: &Path, who: &str, lossy: bool| {
        let mut got = Vec::new();
        wait_until(&format!("{who} shows {want:?}"), || {
            let r = if lossy {
                stat_row_of(&cli_cmd_lossy(sock, "show stat"), "be", "a")
            } else {
                row(sock, "a")
            };
            got = fields_of(&r);
            !r.get("agent_status").is_some_and(|s| s.starts_with("* "))
                && want
                    .iter()
                    .all(|(k, v)| got.iter().any(|(rk, rv)| rk == k && rv == v))
        });
        got
    };
    let ours = settled(e, "ebb", false);
    if let Some(h) = h {
        let theirs = settled(h, "haproxy", true);
        assert_eq!(ours, theirs, "ebb (left) and haproxy (right) differ");
    }
    ours
}

/// Which server answers `n` requests.
fn answers(e: &Ebb, n: usize) -> HashMap<String, usize> {
    let mut m = HashMap::new();
    for i in 0..n {
        let r = get(e.addr(), &format!("/r{i}"));
        assert_eq!(r.status, 200);
        let who = r.text().split(' ').next().unwrap_or("").to_string();
        *m.entry(who).or_default() += 1;
    }
    m
}

#[test]
fn a_python_agent_drives_drain_down_weight_and_up() {
    let (oa, ob) = (Origin::start("a", Mode::Ok), Origin::start("b", Mode::Ok));
    let agent = Agent::start("up\n");
    // `timeout check`: without it an agent check is bounded by its
    // `agent-inter` (100 ms), and on a loaded machine one answer slower
    // than that was an L7TOUT on one side only (the rows then differed).
    let backend = format!(
        "    balance roundrobin\n    timeout check 10s\n    server a {} check inter 200 weight 10 agent-check agent-port {} agent-inter 100ms agent-send \"hello be/a\\n\"\n    server b {} weight 10\n",
        oa.addr, agent.port, ob.addr
    );
    let (e, sock) = ebb(&backend, "agent-ebb");
    let hap = haproxy(&backend);
    let h = hap.as_ref().map(|h| h.sock.as_path());

    let up = settle(
        &sock,
        h,
        &[("status", "UP"), ("last_agt", "via agent : up")],
    );
    assert!(
        up.contains(&("agent_status".into(), "L7OK".into())),
        "{up:?}"
    );
    assert!(up.contains(&("agent_health".into(), "1".into())), "{up:?}");
    // `agent-send` arrives verbatim (the escape made a newline).
    assert_eq!(std::fs::read(&agent.got).unwrap(), b"hello be/a\n");
    let m = answers(&e, 10);
    assert!(m.contains_key("a") && m.contains_key("b"), "{m:?}");

    // Drain: no new request goes to a; no health word, so CHECKED.
    agent.say("drain\n");
    let r = settle(&sock, h, &[("status", "DRAIN (agent)")]);
    assert!(
        r.contains(&("agent_status".into(), "CHECKED".into())),
        "{r:?}"
    );
    assert_eq!(answers(&e, 6).get("a"), None);

    // Ready again, at half its configured weight, with a maxconn.
    agent.say("ready 50% maxconn:30\n");
    let r = settle(&sock, h, &[("status", "UP"), ("weight", "5")]);
    assert!(r.contains(&("slim".into(), "30".into())), "{r:?}");
    // Half the weight: fewer requests than b (10), but some.
    let m = answers(&e, 30);
    let (a, b) = (
        m.get("a").copied().unwrap_or(0),
        m.get("b").copied().unwrap_or(0),
    );
    assert!(a > 0 && b > a, "{m:?}");

    // Down, with a reason after '#'.
    agent.say("down # maintenance window\n");
    let r = settle(
        &sock,
        h,
        &[
            ("status", "DOWN (agent)"),
            ("last_agt", "via agent : down (maintenance window)"),
        ],
    );
    assert!(
        r.contains(&("agent_status".into(), "L7STS".into())),
        "{r:?}"
    );
    assert!(r.contains(&("agent_health".into(), "0".into())), "{r:?}");
    assert_eq!(answers(&e, 4).get("a"), None);

    // An unknown word is reported; an incomplete line is ignored.
    agent.say("up 100% bogus\n");
    settle(
        &sock,
        h,
        &[
            ("status", "UP"),
            ("last_agt", "via agent : up (bogus)"),
            ("weight", "10"),
        ],
    );
    agent.say("up");
    // The incomplete line keeps the previous check's status: `L7OK`, as
    // every check of the unchanged `up` answer before it reported
    // (haproxy 2.6 too: `CHECKED` follows only an answer without a
    // health word).
    let r = settle(
        &sock,
        h,
        &[("last_agt", "Ignoring incomplete line from agent")],
    );
    assert!(r.contains(&("agent_status".into(), "L7OK".into())), "{r:?}");
    agent.say("up\n");
    settle(
        &sock,
        h,
        &[("status", "UP"), ("last_agt", "via agent : up")],
    );

    // The CLI: `set server ... agent down` forces it until the agent's
    // next answer; with the agent disabled it is refused.
    let socks: Vec<&Path> = std::iter::once(sock.as_path()).chain(h).collect();
    for s in &socks {
        assert_eq!(cli_cmd(s, "disable agent be/a").trim(), "");
    }
    for s in &socks {
        assert_eq!(
            cli_cmd(s, "set server be/a agent down").trim(),
            "agent checks are not enabled on this server."
        );
        assert_eq!(
            cli_cmd(s, "set server be/a agent-port 1").trim(),
            "agent checks are not enabled on this server"
        );
    }
    // Disabled: no agent field is shown.
    let r = row(&sock, "a");
    assert_eq!(r.get("agent_status").map(String::as_str), Some(""), "{r:?}");
    agent.say("down\n");
    for s in &socks {
        assert_eq!(cli_cmd(s, "enable agent be/a").trim(), "");
        assert_eq!(cli_cmd(s, "set server be/a agent up").trim(), "");
    }
    settle(&sock, h, &[("status", "DOWN (agent)")]);
    agent.say("up\n");
    settle(&sock, h, &[("status", "UP")]);

    // A new agent address and port: a refused connect is reported and
    // changes nothing else (connectivity is the health check's part).
    let dead = free_port();
    for s in &socks {
        assert_eq!(
            cli_cmd(
                s,
                &format!("set server be/a agent-addr 127.0.0.1 port {dead}")
            )
            .trim(),
            ""
        );
    }
    let r = settle(&sock, h, &[("agent_status", "L4CON")]);
    assert!(r.contains(&("status".into(), "UP".into())), "{r:?}");
    assert!(
        r.contains(&("last_agt".into(), "Connection refused".into())),
        "{r:?}"
    );
    for s in &socks {
        assert_eq!(
            cli_cmd(s, "set server be/a agent-port notaport").trim(),
            "provided port is not an integer"
        );
        assert_eq!(
            cli_cmd(s, &format!("set server be/a agent-port {}", agent.port)).trim(),
            ""
        );
        assert_eq!(cli_cmd(s, "set server be/a agent-send bye").trim(), "");
    }
    settle(&sock, h, &[("agent_status", "L7OK")]);
    wait_until("the new agent-send", || {
        std::fs::read(&agent.got).is_ok_and(|g| g == b"bye")
    });
    // `enable agent` on a server without one: HAProxy's refusal.
    for s in &socks {
        assert_eq!(
            cli_cmd(s, "enable agent be/b").trim(),
            "Agent was not configured on this server, cannot enable."
        );
    }
    // `show servers state`: srv_agent_state is configured, enabled,
    // agent (0x16), and 1 while a check runs; the agent's address and
    // port end the line. The same on haproxy.
    for s in &socks {
        let st = cli_cmd(s, "show servers state be");
        let f: Vec<&str> = st
            .lines()
            .map(|l| l.split(' ').collect::<Vec<_>>())
            .find(|f| f.len() > 14 && f[1] == "be" && f[3] == "a")
            .unwrap_or_else(|| panic!("{st}"));
        assert_eq!(f[14].parse::<u32>().unwrap() & !1, 0x16, "{f:?}");
        assert_eq!(
            f[f.len() - 2..],
            ["127.0.0.1", &agent.port.to_string()],
            "{f:?}"
        );
    }
    drop(e);
}

#[test]
fn agent_configuration_errors_are_haproxys() {
    let d = scratch("agent-cfg");
    let bad = d.join("bad.cfg");
    std::fs::write(
        &bad,
        "defaults\n    mode http\n    timeout client 1s\n    timeout server 1s\n    timeout connect 1s\n\
         frontend fe\n    bind 127.0.0.1:0\n    default_backend be\nbackend be\n    server a 127.0.0.1:80 agent-check\n",
    )
    .unwrap();
    let (code, _, err) = run_ebb(&["-c", "-f", bad.to_str().unwrap()], &d);
    assert_ne!(code, 0);
    assert!(
        err.contains("bad.cfg:10") && err.contains("does not have agent port"),
        "{err}"
    );
    if have("haproxy") {
        let o = Command::new("haproxy")
            .args(["-c", "-f", bad.to_str().unwrap()])
            .output()
            .unwrap();
        assert!(!o.status.success());
        assert!(String::from_utf8_lossy(&o.stderr).contains("does not have agent port"));
    }
    // `no-agent-check` clears a default-server's.
    let good = d.join("good.cfg");
    std::fs::write(
        &good,
        "defaults\n    mode http\n    timeout client 1s\n    timeout server 1s\n    timeout connect 1s\n\
         frontend fe\n    bind 127.0.0.1:0\n    default_backend be\nbackend be\n    default-server agent-check agent-port 5555 agent-inter 3s\n    server a 127.0.0.1:80 no-agent-check\n    server b 127.0.0.1:81 agent-addr 127.0.0.2 agent-send \"x\\n\"\n",
    )
    .unwrap();
    let (code, _, err) = run_ebb(&["-c", "-f", good.to_str().unwrap()], &d);
    assert_eq!(code, 0, "{err}");
}

/// A listener whose accept queue is full (backlog 0, one connection
/// queued, never accepted): the kernel drops the SYN of any further
/// connect, which then neither succeeds nor fails. The listener and the
/// queued connection must live as long as the port is used.
fn unanswering_port() -> (socket2::Socket, Vec<std::net::TcpStream>, u16) {
    use socket2::{Domain, Socket, Type};
    let l = Socket::new(Domain::IPV4, Type::STREAM, None).unwrap();
    l.bind(
        &"127.0.0.1:0"
            .parse::<std::net::SocketAddr>()
            .unwrap()
            .into(),
    )
    .unwrap();
    l.listen(0).unwrap();
    let addr = l.local_addr().unwrap().as_socket().unwrap();
    let mut held = Vec::new();
    // Connects until one is left unanswered (the queue is full).
    for _ in 0..16 {
        match std::net::TcpStream::connect_timeout(&addr, std::time::Duration::from_millis(300)) {
            Ok(c) => held.push(c),
            Err(_) => return (l, held, addr.port()),
        }
    }
    panic!("the accept queue of {addr} never filled");
}

/// Under `timeout check`, an agent's connect is bounded as a health
/// check's (HAProxy 2.6's tcpcheck_eval_connect): by `agent-inter`, or
/// `timeout connect` when sooner, and only what follows by `timeout
/// check`. An agent whose SYN is never answered is reported `L4TOUT`
/// after `timeout connect` (500 ms), not after `timeout check` (60 s, as
/// ebb did: this wait gave up first).
#[test]
fn an_agent_that_never_answers_the_syn_times_out_at_timeout_connect() {
    let o = Origin::start("a", Mode::Ok);
    let (_l, _held, port) = unanswering_port();
    let backend = format!(
        "    timeout connect 500ms\n    timeout check 60s\n    server a {} agent-check agent-port {port} agent-inter 2s\n",
        o.addr
    );
    let (_e, sock) = ebb(&backend, "agent-syn");
    let hap = haproxy(&backend);
    let h = hap.as_ref().map(|h| h.sock.as_path());
    let r = settle(&sock, h, &[("agent_status", "L4TOUT")]);
    assert!(
        r.contains(&("agent_desc".into(), "Layer4 timeout".into())),
        "{r:?}"
    );
    let took: u64 = row(&sock, "a")
        .get("agent_duration")
        .and_then(|v| v.parse().ok())
        .unwrap_or(u64::MAX);
    assert!((500..30_000).contains(&took), "agent_duration {took}");
}
