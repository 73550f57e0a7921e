//! `userlist` sections: the users and groups `http_auth` and
//! `http_auth_group` check credentials against.
//!
//! Users and groups may name each other in either order, as HAProxy
//! allows, except that a group a `user` line names must be declared
//! before it. Passwords are SHA-crypt hashes or, said as such, plain text.

use super::arg;

/// A line of a `userlist` section: `group NAME [users U1,U2...]`, `user
/// NAME [password HASH|insecure-password PASS] [groups G1,G2...]`
/// (HAProxy 2.6; a group named by a user must be declared before it, a
/// user named by a group may come after). `password` takes a SHA-crypt
/// hash (`$5$`, `$6$`): crypt(3)'s other methods are refused.
pub(super) fn userlist_kw(
    u: &mut crate::sample::auth::Userlist,
    w: &[String],
) -> Result<(), String> {
    use crate::sample::auth::{is_sha_crypt, Pass, User};
    let list = |v: &str| -> Vec<String> {
        v.split(',')
            .filter(|x| !x.is_empty())
            .map(str::to_string)
            .collect()
    };
    match w[0].as_str() {
        "group" => {
            let name = arg(w, 1, "group")?;
            if u.groups.iter().any(|g| g == name) {
                return Err(format!(
                    "group '{name}' already declared in userlist '{}'",
                    u.name
                ));
            }
            u.groups.push(name.to_string());
            match &w[2..] {
                [] => {}
                [k, v] if k == "users" => {
                    for user in list(v) {
                        match u.users.iter_mut().find(|x| x.name == user) {
                            Some(x) => x.groups.push(name.to_string()),
                            None => u.users.push(User {
                                name: user,
                                pass: Pass::Insecure(String::new()),
                                groups: vec![name.to_string()],
                            }),
                        }
                    }
                }
                _ => return Err("'group' expects NAME [users USER,USER...]".to_string()),
            }
        }
        "user" => {
            let name = arg(w, 1, "user")?;
            let mut pass = None;
            let mut groups = Vec::new();
            let mut i = 2;
            while i < w.len() {
                let v = arg(w, i + 1, &w[i])?;
                match w[i].as_str() {
                    "password" => {
                        if !is_sha_crypt(v) {
                            return Err(format!(
                                "user '{name}': ebb checks only SHA-crypt password hashes ('$5$...', '$6$...', as 'mkpasswd -m sha-512' makes); use one, or 'insecure-password'"
                            ));
                        }
                        pass = Some(Pass::Crypt(v.to_string()));
                    }
                    "insecure-password" => pass = Some(Pass::Insecure(v.to_string())),
                    "groups" => {
                        for g in list(v) {
                            if !u.groups.contains(&g) {
                                return Err(format!(
                                    "user '{name}': no group '{g}' declared before in userlist '{}'",
                                    u.name
                                ));
                            }
                            groups.push(g);
                        }
                    }
                    o => {
                        return Err(format!(
                            "unknown 'user' option '{o}' (supported: password, insecure-password, groups)"
                        ))
                    }
                }
                i += 2;
            }
            let Some(pass) = pass else {
                return Err(format!(
                    "user '{name}' needs 'password' or 'insecure-password'"
                ));
            };
            match u.users.iter_mut().find(|x| x.name == name) {
                // Named by a group line before: its password now.
                Some(x) if x.pass == Pass::Insecure(String::new()) => {
                    x.pass = pass;
                    x.groups.extend(groups);
                }
                Some(_) => {
                    return Err(format!(
                        "user '{name}' already declared in userlist '{}'",
                        u.name
                    ))
                }
                None => u.users.push(User {
                    name: name.to_string(),
                    pass,
                    groups,
                }),
            }
        }
        o => {
            return Err(format!(
                "unknown keyword '{o}' in a userlist section (supported: group, user)"
            ))
        }
    }
    Ok(())
}
