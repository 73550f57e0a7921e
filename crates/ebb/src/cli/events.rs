//! `show events`: the event sinks, and a ring's messages.

use std::fmt::Write as _;

use super::need;
use crate::config::CliLevel;

/// `show events RING [-w] [-n]`: the messages (one a line), and with `-w`
/// the number of the next one, for the connection to wait for.
pub(super) fn show_events(
    level: CliLevel,
    name: &str,
    opts: &[&str],
) -> Result<(String, Option<u64>), String> {
    need(level, CliLevel::Operator)?;
    let ring = match crate::ring::find(name) {
        Some(r) => r,
        None if matches!(name, "stdout" | "stderr") => {
            return Ok(("Nothing to report for this sink".into(), None))
        }
        None => return Err("No such event sink".into()),
    };
    let (mut wait, mut new_only) = (false, false);
    for o in opts {
        match *o {
            "-n" => new_only = true,
            "-w" => wait = true,
            "-nw" | "-wn" => (wait, new_only) = (true, true),
            _ => return Err("unknown option".into()),
        }
    }
    let (msgs, next) = ring.events_from(None, new_only);
    let mut s = String::new();
    for m in msgs {
        s.push_str(&String::from_utf8_lossy(&m));
        s.push('\n');
    }
    Ok((s, wait.then_some(next)))
}

/// `show events`: HAProxy's list, its standard output and error sinks,
/// then the rings.
pub(super) fn list() -> String {
    let mut s = String::from(
        "Supported events sinks are listed below. Add -w(wait), -n(new). Any key to stop\n",
    );
    let _ = writeln!(
        s,
        "    {:<10} : type=fd, 0 dropped, standard output (fd#1)",
        "stdout"
    );
    let _ = writeln!(
        s,
        "    {:<10} : type=fd, 0 dropped, standard output (fd#2)",
        "stderr"
    );
    for r in crate::ring::all() {
        let _ = writeln!(
            s,
            "    {:<10} : type=buffer, {} dropped, {}",
            r.name,
            r.dropped(),
            r.description
        );
    }
    s
}
