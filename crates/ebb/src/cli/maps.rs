//! The CLI's map and ACL commands (management.txt 9.3): `show|get|add|set|
//! del|clear map` and `show|get|add|del|clear acl`, on the pattern files
//! of `crate::sample::patref`, named by path or `#ID`. A change is seen
//! by every thread at its next lookup.

use std::fmt::Write;
use std::sync::Arc;

use super::{need, CliLevel};
use crate::sample::patref::{self, find_str, How, PatRef, Snapshot, User};

/// Splits a command on blanks, `\` escaping the next character (HAProxy's
/// CLI: `Mon\ User\ Agent` is one word).
pub(super) fn words(cmd: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut cur = String::new();
    let mut any = false;
    let mut chars = cmd.chars();
    while let Some(c) = chars.next() {
        match c {
            '\\' => {
                if let Some(n) = chars.next() {
                    cur.push(n);
                }
                any = true;
            }
            ' ' | '\t' => {
                if any {
                    out.push(std::mem::take(&mut cur));
                    any = false;
                }
            }
            c => {
                cur.push(c);
                any = true;
            }
        }
    }
    if any {
        out.push(cur);
    }
    out
}

fn unknown(maps: bool) -> String {
    if maps {
        "Unknown map identifier. Please use #<id> or <file>.\n".to_string()
    } else {
        "Unknown ACL identifier. Please use #<id> or <file>.\n".to_string()
    }
}

fn find(name: &str, maps: bool) -> Result<Arc<PatRef>, String> {
    patref::find(name, maps).ok_or_else(|| unknown(maps))
}

/// Runs `cmd` when it is a map or ACL command (`None`: it is not).
pub fn execute(level: CliLevel, cmd: &str) -> Option<Result<String, String>> {
    let w = words(cmd);
    let verb = w.first()?.as_str();
    let kind = w.get(1)?.as_str();
    let maps = match kind {
        "map" => true,
        "acl" => false,
        _ => return None,
    };
    if !matches!(verb, "show" | "get" | "add" | "set" | "del" | "clear") {
        return None;
    }
    let args: Vec<&str> = w[2..].iter().map(String::as_str).collect();
    Some(run(level, verb, maps, &args))
}

fn run(level: CliLevel, verb: &str, maps: bool, a: &[&str]) -> Result<String, String> {
    let kind = if maps { "map" } else { "acl" };
    // HAProxy's messages name an ACL so.
    let id = if maps { "map" } else { "ACL" };
    if !matches!(verb, "show" | "get") {
        need(level, CliLevel::Operator)?;
    }
    match (verb, a) {
        ("show", []) => {
            let mut s = String::from("# id (file) description\n");
            for r in patref::all().iter().filter(|r| r.used_by(maps)) {
                let _ = writeln!(s, "{}", r.describe());
            }
            Ok(s)
        }
        ("show", [name]) => {
            let r = find(name, maps)?;
            let mut s = String::new();
            for e in &r.snapshot().entries {
                if maps {
                    let _ = writeln!(s, "0x{:x} {} {}", e.id, e.key, e.value);
                } else {
                    let _ = writeln!(s, "0x{:x} {}", e.id, e.key);
                }
            }
            Ok(s)
        }
        ("get", [name, value, ..]) => {
            let r = find(name, maps)?;
            Ok(get(&r, maps, value))
        }
        ("get", _) => Err(format!("Missing {id} identifier and/or key.\n")),
        ("add", [name, key, value]) if maps => {
            let r = find(name, maps)?;
            r.add(key, value).map_err(|e| format!("{e}\n"))?;
            Ok(String::new())
        }
        ("add", [name, key]) if !maps => {
            let r = find(name, maps)?;
            r.add(key, "").map_err(|e| format!("{e}\n"))?;
            Ok(String::new())
        }
        ("add", _) if maps => Err(ADD_MAP_ARGS.to_string()),
        ("add", _) => {
            Err("'add acl' expects two parameters: ACL identifier and pattern.\n".to_string())
        }
        ("set", [name, key, value]) if maps => {
            let r = find(name, maps)?;
            r.check(key, Some(value)).map_err(|e| format!("{e}\n"))?;
            r.update(|es| {
                let mut n = 0;
                for e in es.iter_mut().filter(|e| selects(e, key)) {
                    e.value = value.to_string();
                    n += 1;
                }
                if n == 0 {
                    Err("entry not found.\n".to_string())
                } else {
                    Ok(())
                }
            })?;
            Ok(String::new())
        }
        ("set", _) if maps => {
            Err("'set map' expects three parameters: map identifier, key and value.\n".to_string())
        }
        ("del", [name, key]) => {
            let r = find(name, maps)?;
            r.update(|es| {
                let before = es.len();
                es.retain(|e| !selects(e, key));
                if es.len() == before {
                    Err("Key not found.\n".to_string())
                } else {
                    Ok(())
                }
            })?;
            Ok(String::new())
        }
        ("del", _) => Err(format!(
            "This command expects two parameters: {id} identifier and key.\n"
        )),
        ("clear", [name]) => {
            let r = find(name, maps)?;
            r.update(|es| {
                es.clear();
                Ok(())
            })?;
            Ok(String::new())
        }
        ("clear", _) => Err(format!("Missing {id} identifier.\n")),
        _ => Err(format!("unknown command '{verb} {kind}'\n")),
    }
}

const ADD_MAP_ARGS: &str = "'add map' expects three parameters (map identifier, key and value) or one parameter (map identifier) and a payload\n";

/// Runs `cmd` when it takes a payload: `add map MAP` with one `KEY VALUE`
/// per payload line (the key up to the first blank, the value the rest
/// of the line after the blanks, as HAProxy 2.6 reads them); the entries
/// before a bad line stay added, as there (`None`: no such command).
pub fn execute_payload(
    level: CliLevel,
    cmd: &str,
    payload: &str,
) -> Option<Result<String, String>> {
    let w = words(cmd);
    let w: Vec<&str> = w.iter().map(String::as_str).collect();
    let name = match w.as_slice() {
        ["add", "map", name] => *name,
        ["add", "map", ..] => return Some(Err(ADD_MAP_ARGS.to_string())),
        _ => return None,
    };
    Some((|| {
        need(level, CliLevel::Operator)?;
        let r = find(name, true)?;
        for line in payload.lines() {
            let Some((key, value)) = line.split_once([' ', '\t']) else {
                return Err(format!("Missing value for key '{line}'.\n"));
            };
            r.add(key, value.trim_start_matches([' ', '\t']))
                .map_err(|e| format!("{e}\n"))?;
        }
        Ok(String::new())
    })())
}

/// `#0x...` names an entry by its id; else every entry with that key.
fn selects(e: &patref::RefEntry, key: &str) -> bool {
    match key
        .strip_prefix('#')
        .map(|k| k.trim_start_matches("0x"))
        .and_then(|k| u64::from_str_radix(k, 16).ok())
    {
        Some(id) => e.id == id,
        None => e.key == key,
    }
}

/// `get map|acl`: one line per way the file is used (HAProxy's pattern
/// expressions: match method, case, output type).
fn get(r: &PatRef, maps: bool, value: &str) -> String {
    let snap = r.snapshot();
    let mut seen: Vec<(How, bool, Option<&'static str>)> = Vec::new();
    let mut s = String::new();
    for u in r.users() {
        if u.out.is_some() != maps || seen.contains(&(u.how, u.icase, u.out)) {
            continue;
        }
        seen.push((u.how, u.icase, u.out));
        let hit = lookup(&snap, &u, value);
        // HAProxy indexes exact and prefix strings and addresses in trees.
        let tree = matches!(u.how, How::Ip) || (matches!(u.how, How::Str | How::Beg) && !u.icase);
        let _ = write!(
            s,
            "type={}, case={}, {}=",
            u.how.name(),
            if u.icase { "insensitive" } else { "sensitive" },
            if maps { "found" } else { "match" }
        );
        match hit {
            None => {
                let _ = writeln!(s, "no");
            }
            Some(i) => {
                let e = &snap.entries[i];
                let idx = if tree { "tree" } else { "list" };
                if maps {
                    let _ = writeln!(
                        s,
                        "yes, idx={idx}, key=\"{}\", value=\"{}\", type=\"{}\"",
                        e.key,
                        e.value,
                        u.out.unwrap_or("str")
                    );
                } else {
                    let _ = writeln!(s, "yes, idx={idx}, pattern=\"{}\"", e.key);
                }
            }
        }
    }
    s
}

fn lookup(snap: &Snapshot, u: &User, value: &str) -> Option<usize> {
    match u.how {
        How::Ip => {
            let ip: std::net::IpAddr = value.trim().parse().ok()?;
            snap.nets()
                .iter()
                .position(|n| n.as_ref().is_some_and(|n| n.contains(ip)))
        }
        How::Int => {
            let x: i64 = value.trim().parse().ok()?;
            snap.ints()
                .iter()
                .position(|r| r.is_some_and(|(lo, hi)| lo <= x && x <= hi))
        }
        how => find_str(snap, how, u.icase, value.as_bytes()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn words_take_backslash_escapes() {
        assert_eq!(
            words("add acl /f Mon\\ User\\ Agent;"),
            vec!["add", "acl", "/f", "Mon User Agent;"]
        );
        assert_eq!(words("  show   map "), vec!["show", "map"]);
    }
}
