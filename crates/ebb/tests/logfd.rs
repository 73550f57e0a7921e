//! `log fd@N`: messages written to a descriptor the process inherited, as
//! HAProxy 2.6 writes them (the target's header, one message a line),
//! never blocking: a descriptor nobody reads drops messages, the traffic
//! goes on. Real binary, started by `sh` with its descriptors redirected.

mod common;

use std::process::{Child, Command, Stdio};

use common::{get, scratch, wait_until, EBB};

/// ebb run by `sh -c 'exec ebb -f CFG REDIRECTS'`, stopped when dropped.
struct Sh(Child);

impl Drop for Sh {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

#[test]
fn log_fd_writes_each_message_and_never_blocks() {
    let d = scratch("logfd");
    let port = common::free_port();
    let out = d.join("fd3.log");
    let fifo = d.join("full");
    assert!(Command::new("mkfifo")
        .arg(&fifo)
        .status()
        .unwrap()
        .success());
    let long = "x".repeat(900);
    std::fs::write(
        d.join("ebb.cfg"),
        format!(
            "global\n    log fd@3 local0\n    log fd@3 format raw local0\n\
             defaults\n    mode http\n    log global\n    timeout client 5s\n\
             frontend f\n    bind 127.0.0.1:{port}\n    log fd@4 len 1024 format raw local1\n\
             \x20   log-format \"hit %HP {long}\"\n    http-request return status 200\n\
             listen stats\n    bind 127.0.0.1:{}\n    http-request return status 200\n",
            common::free_port()
        ),
    )
    .unwrap();
    // fd 4: a pipe opened both ways and never read; it fills at 64 KiB.
    let sh = Command::new("sh")
        .arg("-c")
        .arg(format!(
            "exec {EBB} -f ebb.cfg 3>{} 4<>{} >ebb.out 2>&1",
            out.display(),
            fifo.display()
        ))
        .current_dir(&d)
        .stdin(Stdio::null())
        .spawn()
        .unwrap();
    let _sh = Sh(sh);
    wait_until("ebb ready", || {
        std::fs::read_to_string(d.join("ebb.out")).is_ok_and(|s| s.contains("ebb: ready"))
    });
    let a = format!("127.0.0.1:{port}").parse().unwrap();
    assert_eq!(get(a, "/one").status, 200);
    wait_until("the messages on fd 3", || {
        std::fs::read_to_string(&out).is_ok_and(|s| s.lines().count() >= 2)
    });
    let text = std::fs::read_to_string(&out).unwrap();
    let lines: Vec<&str> = text.lines().collect();
    // The default header (HAProxy's: `<PRI>Mmm dd hh:mm:ss TAG[PID]: `),
    // then the raw one.
    let msg = format!("hit /one {long}");
    assert!(
        lines[0].starts_with("<134>") && lines[0].ends_with(&format!("]: {msg}")),
        "{text}"
    );
    assert_eq!(lines[1], msg);
    // Some 200 messages of 1 KiB into the full pipe: each request is still
    // answered (a blocking write would hold the worker thread).
    for i in 0..200 {
        assert_eq!(get(a, &format!("/r{i}")).status, 200);
    }
    wait_until("every message on fd 3", || {
        std::fs::read_to_string(&out).is_ok_and(|s| s.lines().count() == 2 * 201)
    });
}
