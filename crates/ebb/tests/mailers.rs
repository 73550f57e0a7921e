//! Email alerts (`mailers` sections, `email-alert`) through the real
//! binary, beside HAProxy 2.6 on the same configuration: a small SMTP
//! sink in the test records each client's dialogue; a checked server
//! going DOWN, then UP, must bring the same dialogues from both (the
//! `Date:` line and check durations aside).

mod common;

use std::io::{BufRead, BufReader, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::path::Path;
use std::sync::{Arc, Mutex};

use common::*;

/// An SMTP sink: answers as a mail server and records what each client
/// said, one transcript per connection (complete once it said QUIT).
struct Sink {
    addr: SocketAddr,
    mails: Arc<Mutex<Vec<String>>>,
}

impl Sink {
    fn start() -> Sink {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = l.local_addr().unwrap();
        let mails = Arc::new(Mutex::new(Vec::new()));
        let m = Arc::clone(&mails);
        std::thread::spawn(move || {
            for c in l.incoming() {
                let Ok(c) = c else { continue };
                let m = Arc::clone(&m);
                std::thread::spawn(move || {
                    if let Some(t) = converse(c) {
                        m.lock().unwrap().push(t);
                    }
                });
            }
        });
        Sink { addr, mails }
    }

    fn mails(&self) -> Vec<String> {
        self.mails.lock().unwrap().clone()
    }
}

/// One SMTP session: the client's bytes, once it said QUIT.
fn converse(c: TcpStream) -> Option<String> {
    let mut w = c.try_clone().ok()?;
    let mut r = BufReader::new(c);
    let mut said = String::new();
    w.write_all(b"220 sink ESMTP\r\n").ok()?;
    let mut data = false;
    loop {
        let mut l = String::new();
        if r.read_line(&mut l).ok()? == 0 {
            return None;
        }
        said.push_str(&l);
        if data {
            if l == ".\r\n" {
                data = false;
                w.write_all(b"250 2.0.0 queued\r\n").ok()?;
            }
            continue;
        }
        let verb = l.get(..4).unwrap_or("").to_ascii_uppercase();
        let reply: &[u8] = match verb.as_str() {
            "HELO" | "EHLO" | "MAIL" | "RCPT" => b"250 ok\r\n",
            "DATA" => {
                data = true;
                b"354 go ahead\r\n"
            }
            "QUIT" => {
                let _ = w.write_all(b"221 bye\r\n");
                return Some(said);
            }
            _ => b"500 what\r\n",
        };
        w.write_all(reply).ok()?;
    }
}

/// A transcript without what differs from run to run: the `Date:` line
/// and check durations.
fn normalized(t: &str) -> String {
    t.lines()
        .map(|l| {
            if l.starts_with("Date: ") {
                return "Date: -".to_string();
            }
            let mut out = l.to_string();
            while let Some(i) = out.find("check duration: ") {
                let rest = &out[i + 16..];
                let digits = rest.bytes().take_while(u8::is_ascii_digit).count();
                out = format!("{}check_duration: N{}", &out[..i], &rest[digits..]);
            }
            out
        })
        .collect::<Vec<_>>()
        .join("\n")
}

#[test]
fn a_server_going_down_then_up_is_mailed_as_haproxy_mails_it() {
    let (se, sh) = (Sink::start(), Sink::start());
    // Closed until the test opens it (held meanwhile: nothing else takes it).
    let held = closed_port();
    let port = held.addr.port();
    let cfg = |sock: &Path, bind: &str, sink: SocketAddr| {
        format!(
            "global\n    stats socket {} level admin\n\
mailers m\n    mailer smtp1 {sink}\n    timeout mail 20s\n\
defaults\n    mode http\n    timeout client 10s\n    timeout server 10s\n    timeout connect 5s\n\
    email-alert mailers m\n    email-alert from ebb@example.org\n    email-alert to ops@example.org\n\
    email-alert myhostname lb1\n\
listen be\n    bind {bind}\n    email-alert level notice\n\
    server s1 127.0.0.1:{port} check inter 100 rise 1 fall 1\n",
            sock.display()
        )
    };
    let (_e, esock) = ebb_with_admin("mail-down-up", |s, b| cfg(s, b, se.addr));
    let hap = haproxy_beside("mail-down-up", |s, b| cfg(s, b, sh.addr));
    let mut runs = vec![(&se, esock)];
    if let Some((h, _)) = &hap {
        runs.push((&sh, h.sock.clone()));
    }
    // Nothing listens on the server's port: it goes DOWN (an alert).
    for (sink, sock) in &runs {
        wait_until("s1 DOWN", || {
            stat_row(sock, "be", "s1").get("status").map(String::as_str) == Some("DOWN")
        });
        wait_until("the DOWN mail", || !sink.mails().is_empty());
    }
    // It comes UP (a notice, mailed at level notice).
    let l = held.listen();
    std::thread::spawn(move || for _c in l.incoming() {});
    for (sink, _) in &runs {
        wait_until("the UP mail", || sink.mails().len() >= 2);
    }
    let mails = se.mails();
    let down = normalized(&mails[0]);
    assert!(down.starts_with("HELO lb1\r\nMAIL FROM:<ebb@example.org>\r\nRCPT TO:<ops@example.org>\r\nDATA\r\nFrom: ebb@example.org\r\nTo: ops@example.org\r\nDate: -\nSubject: [HAProxy Alert] Server be/s1 is DOWN, reason: Layer4 connection problem")
        || down.starts_with("HELO lb1\nMAIL FROM:<ebb@example.org>\nRCPT TO:<ops@example.org>\nDATA\nFrom: ebb@example.org\nTo: ops@example.org\nDate: -\nSubject: [HAProxy Alert] Server be/s1 is DOWN, reason: Layer4 connection problem"), "{down}");
    assert!(
        mails[0].ends_with("\r\n\r\n.\r\nQUIT\r\n"),
        "{:?}",
        mails[0]
    );
    assert!(
        normalized(&mails[1])
            .contains("Subject: [HAProxy Alert] Server be/s1 is UP, reason: Layer4 check passed"),
        "{}",
        mails[1]
    );
    let date = mails[0].lines().find(|l| l.starts_with("Date: ")).unwrap();
    // "Date: Sun, 29 Nov 2026 12:40:05 +0000 (UTC)"
    assert!(date.len() > 36 && date.ends_with(')'), "{date}");
    if hap.is_some() {
        let (e, h): (Vec<_>, Vec<_>) = (
            se.mails().iter().map(|m| normalized(m)).collect(),
            sh.mails().iter().map(|m| normalized(m)).collect(),
        );
        assert_eq!(e[..2], h[..2]);
        let hdate = sh.mails()[0]
            .lines()
            .find(|l| l.starts_with("Date: "))
            .map(|l| l.len())
            .unwrap();
        assert_eq!(date.len(), hdate, "{date}");
    }
}

#[test]
fn below_the_level_nothing_is_sent_and_bad_lines_are_refused() {
    // Level alert (the default): going DOWN is mailed (the first test
    // mails UP at level notice).
    let sink = Sink::start();
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = l.local_addr().unwrap().port();
    let cfg = format!(
        "mailers m\n    mailer a {}\nlisten be\n    bind BIND\n    mode http\n    timeout client 1s\n    timeout server 1s\n    timeout connect 1s\n\
    email-alert mailers m\n    email-alert from a@b\n    email-alert to c@d\n\
    server s1 127.0.0.1:{port} check inter 100 rise 1 fall 1\n",
        sink.addr
    );
    let e = Ebb::start(&cfg);
    drop(l);
    wait_until("the DOWN mail", || !sink.mails().is_empty());
    assert!(sink.mails()[0].contains("is DOWN"));
    drop(e);

    let d = scratch("mail-refused");
    let base = "listen be\n    bind 127.0.0.1:0\n    mode http\n    server s 127.0.0.1:1\n";
    for (text, what) in [
        (
            format!("{base}    email-alert mailers nope\n    email-alert from a@b\n    email-alert to c@d\n"),
            "unable to find mailers 'nope'",
        ),
        (
            format!("mailers m\n    mailer a 127.0.0.1\n{base}"),
            "missing port",
        ),
        (
            format!("{base}    email-alert level loud\n"),
            "unknown log level 'loud'",
        ),
        (
            format!("{base}    email-alert subject x\n"),
            "email-alert: unknown argument 'subject'",
        ),
        (
            format!("mailers m\n    timeout smtp 1s\n{base}"),
            "'timeout' expects 'mail'",
        ),
        (
            format!("mailers m\n    bogus\n{base}"),
            "unknown keyword 'bogus' in 'mailers' section",
        ),
        (
            format!("mailers m\nmailers m\n{base}"),
            "same name as another mailers section",
        ),
    ] {
        assert_refused(&d, "t.cfg", &text, what, true);
    }
}
