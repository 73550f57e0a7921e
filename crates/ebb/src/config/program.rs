//! `program NAME` sections (HAProxy 2.6 configuration.txt section 3.7):
//! commands the master starts, keeps across reloads as configured and
//! stops with its workers (run by the master-worker module).

use super::types::{ConfigError, Loc, Program};

/// Opens a `program NAME` section.
pub(super) fn open(programs: &[Program], words: &[String], loc: &Loc) -> Result<Program, String> {
    let name = match words {
        [_, n] => n,
        [_] => return Err("'program' expects an <id> argument".to_string()),
        _ => return Err("'program' takes one name".to_string()),
    };
    if programs.iter().any(|p| &p.name == name) {
        return Err(format!(
            "'{name}' program section already exists in the configuration"
        ));
    }
    Ok(Program {
        name: name.clone(),
        command: Vec::new(),
        uid: None,
        gid: None,
        start_on_reload: true,
        loc: loc.clone(),
    })
}

/// One keyword of a `program` section.
pub(super) fn program_kw(p: &mut Program, words: &[String]) -> Result<(), String> {
    let (no, w) = match words[0].as_str() {
        "no" => (true, &words[1..]),
        _ => (false, words),
    };
    let Some(kw) = w.first().map(String::as_str) else {
        return Err("'no' expects a keyword".to_string());
    };
    if no && kw != "option" {
        return Err(format!(
            "'no' is not supported for '{kw}' in a program section"
        ));
    }
    match kw {
        "command" => {
            if w.len() < 2 || w[1].is_empty() {
                return Err(
                    "'command' expects a command with optional arguments separated in words"
                        .to_string(),
                );
            }
            p.command = w[1..].to_vec();
        }
        "option" => match w.get(1).map(String::as_str) {
            Some("start-on-reload") if w.len() == 2 => p.start_on_reload = !no,
            Some("start-on-reload") => {
                return Err("'option start-on-reload' takes no argument".to_string())
            }
            Some(o) => {
                return Err(format!(
                    "unknown option '{o}' in a program section (supported: start-on-reload)"
                ))
            }
            None => return Err("'option' expects an option name".to_string()),
        },
        "user" => {
            let [_, name] = w else {
                return Err("'user' expects one user name".to_string());
            };
            if p.uid.is_some() {
                return Err("user already specified in this program section".to_string());
            }
            match crate::sys::user_by_name(name) {
                Ok(Some((uid, _))) => p.uid = Some(uid),
                Ok(None) => return Err(format!("cannot find user id for '{name}'")),
                Err(e) => return Err(format!("cannot find user id for '{name}': {e}")),
            }
        }
        "group" => {
            let [_, name] = w else {
                return Err("'group' expects one group name".to_string());
            };
            if p.gid.is_some() {
                return Err("group already specified in this program section".to_string());
            }
            match crate::sys::group_by_name(name) {
                Ok(Some(gid)) => p.gid = Some(gid),
                Ok(None) => return Err(format!("cannot find group id for '{name}'")),
                Err(e) => return Err(format!("cannot find group id for '{name}': {e}")),
            }
        }
        o => {
            return Err(format!(
                "unknown keyword '{o}' in 'program' section (supported: command, user, group, option start-on-reload)"
            ))
        }
    }
    Ok(())
}

/// Every program has a command (HAProxy: "lacks a command to launch").
pub(super) fn check(programs: &[Program]) -> Vec<ConfigError> {
    programs
        .iter()
        .filter(|p| p.command.is_empty())
        .map(|p| ConfigError {
            loc: p.loc.clone(),
            message: format!("the program section '{}' lacks a command to launch", p.name),
        })
        .collect()
}
