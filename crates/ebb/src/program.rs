//! The master's programs (`program NAME` sections, HAProxy 2.6
//! configuration.txt section 3.7): commands started beside the workers.
//!
//! As HAProxy's master does: each program is started (forked, then the
//! command executed, looked up in `PATH`, as `user`/`group` when given)
//! when the master starts. At a reload every running program gets SIGUSR1;
//! one with `option start-on-reload` (the default) is then an old program
//! and a new instance starts; one without it stays the current instance
//! and no new one starts. A stop (SIGTERM, SIGINT, SIGUSR1 to the master)
//! is passed to the programs too, and the master leaves once they and the
//! workers are gone. A current program that exits with a status other
//! than 0, 130 (SIGINT) or 143 (SIGTERM) stops everything, as a failing
//! worker does. `show proc` lists them under `# programs` (and `# old
//! programs`).

use std::io;
use std::time::SystemTime;

use crate::config::Program;

/// A program the master started (or a former master did).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Prog {
    pub name: String,
    pub pid: u32,
    /// Reloads since it started.
    pub reloads: u32,
    pub started: SystemTime,
    /// Told to stop at a reload that started a new instance.
    pub leaving: bool,
}

/// Starts `p`: the child drops the master's descriptors (they close on
/// exec) and privileges, then executes the command. Call it only while
/// the process has a single thread (the master).
pub fn launch(p: &Program) -> io::Result<u32> {
    let Some((cmd, args)) = p.command.split_first() else {
        return Err(io::Error::other("no command"));
    };
    match crate::sys::fork()? {
        Some(pid) => Ok(pid),
        None => {
            // The master's sockets, signalfd and pipes stay with it.
            if let Ok(dir) = std::fs::read_dir("/proc/self/fd") {
                for fd in dir
                    .filter_map(Result::ok)
                    .filter_map(|e| e.file_name().to_str()?.parse::<i32>().ok())
                    .filter(|&fd| fd > 2)
                {
                    let _ = crate::sys::set_cloexec(fd, true);
                }
            }
            if let Err(e) = crate::sys::drop_privileges(p.uid, p.gid) {
                eprintln!("ebb: program '{}': cannot set user/group: {e}", p.name);
                std::process::exit(1);
            }
            // The signals the master reads on its signalfd are blocked.
            let _ = crate::sys::unblock_signals(&crate::sys::MASTER_SIGNALS);
            use std::os::unix::process::CommandExt;
            let e = std::process::Command::new(cmd).args(args).exec();
            eprintln!("ebb: program '{}': cannot execute {cmd}: {e}", p.name);
            std::process::exit(1);
        }
    }
}

fn hex(s: &str) -> String {
    s.bytes().map(|b| format!("{b:02x}")).collect()
}

fn unhex(s: &str) -> Option<String> {
    let b = s.as_bytes();
    if b.len() % 2 != 0 {
        return None;
    }
    let bytes: Option<Vec<u8>> = b
        .chunks(2)
        .map(|c| {
            std::str::from_utf8(c)
                .ok()
                .and_then(|h| u8::from_str_radix(h, 16).ok())
        })
        .collect();
    String::from_utf8(bytes?).ok()
}

/// The programs as one word for the master's state over a re-exec.
pub fn encode(progs: &[Prog]) -> String {
    let items: Vec<String> = progs
        .iter()
        .map(|p| {
            let start = p
                .started
                .duration_since(SystemTime::UNIX_EPOCH)
                .map_or(0, |d| d.as_secs());
            format!(
                "{}:{}:{}:{}:{}",
                p.pid,
                p.reloads,
                start,
                u8::from(p.leaving),
                hex(&p.name)
            )
        })
        .collect();
    items.join(",")
}

/// Reads [`encode`]'s word back; each program has one more reload.
pub fn decode(s: &str) -> Vec<Prog> {
    s.split(',')
        .filter_map(|item| {
            let f: Vec<&str> = item.split(':').collect();
            let [pid, reloads, start, leaving, name] = f[..] else {
                return None;
            };
            Some(Prog {
                name: unhex(name)?,
                pid: pid.parse().ok()?,
                reloads: reloads.parse::<u32>().ok()?.saturating_add(1),
                started: SystemTime::UNIX_EPOCH
                    + std::time::Duration::from_secs(start.parse().ok()?),
                leaving: leaving == "1",
            })
        })
        .collect()
}

/// One line of `show proc`: its columns padded as HAProxy's, the last
/// one too.
pub fn show_proc_row(
    pid: &dyn std::fmt::Display,
    kind: &str,
    reloads: &dyn std::fmt::Display,
    uptime: &str,
    version: &str,
) -> String {
    format!(
        "{:<15} {kind:<15} {:<15} {uptime:<15} {version:<15}\n",
        pid.to_string(),
        reloads.to_string()
    )
}

/// `show proc`'s part for programs: `# programs`, then `# old programs`
/// when there are some (HAProxy's columns: pid, name, reloads, uptime,
/// `-` for the version).
pub fn show(progs: &[Prog], uptime: &dyn Fn(SystemTime) -> String) -> String {
    let line = |p: &Prog| show_proc_row(&p.pid, &p.name, &p.reloads, &uptime(p.started), "-");
    let mut o = String::from("# programs\n");
    progs
        .iter()
        .filter(|p| !p.leaving)
        .for_each(|p| o.push_str(&line(p)));
    if progs.iter().any(|p| p.leaving) {
        o.push_str("# old programs\n");
        progs
            .iter()
            .filter(|p| p.leaving)
            .for_each(|p| o.push_str(&line(p)));
    }
    o
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn state_round_trips_with_one_more_reload() {
        let p = Prog {
            name: "a:b,c".into(),
            pid: 42,
            reloads: 1,
            started: SystemTime::UNIX_EPOCH + std::time::Duration::from_secs(7),
            leaving: true,
        };
        let back = decode(&encode(std::slice::from_ref(&p)));
        assert_eq!(back, vec![Prog { reloads: 2, ..p }]);
        assert!(decode("").is_empty());
        assert!(decode("x:1:2:0:zz").is_empty());
    }
}
