//! Line tokenizer with HAProxy's quoting rules (configuration.txt, 2.2 and 2.3;
//! `parse_line()` in HAProxy's `src/tools.c`).
//!
//! - Words are separated by unquoted, unescaped spaces or tabs.
//! - `#` outside quotes starts a comment that runs to the end of the line.
//! - `"..."` (weak quotes) keep spaces, `'` and `#`; backslash escapes and
//!   environment variables are still interpreted inside them.
//! - `'...'` (strong quotes) keep everything literally; a backslash inside is
//!   a plain character.
//! - Quoted and unquoted pieces glued together form one word: `a"b c"'d'` is
//!   the single word `ab cd`.
//! - Outside single quotes, a backslash escapes: `\ ` (space), `\\`, `\#`,
//!   `\'`, `\"`, `\t`, `\n`, `\r`, `\xHH`, and `\$` inside double quotes. Any
//!   other backslash is kept as is (so regexes such as `\d` or `\1` survive).
//! - Environment variables are expanded only inside double quotes: `$NAME`,
//!   `${NAME}`, `${NAME-default}`, and `${NAME[*]}` which splits the value into
//!   several words on spaces. An unset variable expands to nothing. `.FILE`
//!   and `.LINE` are HAProxy's pseudo-variables for the current position.
//! - An unmatched quote or brace is an error for the whole line.
//!
//! An empty quoted word (`""`) is kept as an empty word, so `string ""` gives
//! an empty body instead of a missing argument.

use crate::rawword::{carry, is_raw};

/// Looks up an environment variable; a parameter so tests stay hermetic.
pub(crate) type EnvLookup<'a> = &'a dyn Fn(&str) -> Option<String>;

/// Where the line is, for `${.FILE}` and `${.LINE}`.
pub(crate) struct LinePos<'a> {
    pub file: &'a str,
    pub line: u32,
}

/// Splits one configuration line into words, or says what is wrong with it.
pub(crate) fn tokenize(
    line: &str,
    env: EnvLookup<'_>,
    pos: &LinePos<'_>,
) -> Result<Vec<String>, String> {
    if let Some(c) = line.chars().find(|&c| is_raw(c)) {
        return Err(format!(
            "character U+{:X} is reserved (write bytes that are not UTF-8 as \\xHH)",
            u32::from(c)
        ));
    }
    let b = line.as_bytes();
    let mut words: Vec<String> = Vec::new();
    // The word being built, as bytes because `\xHH` may emit any byte.
    let mut cur: Vec<u8> = Vec::new();
    // A word exists once any part of it (even an empty quote) was seen.
    let mut in_word = false;
    let mut squote: Option<usize> = None;
    let mut dquote: Option<usize> = None;
    let mut i = 0;

    fn finish(words: &mut Vec<String>, cur: &mut Vec<u8>) -> Result<(), String> {
        words.push(carry(std::mem::take(cur)));
        Ok(())
    }

    while i < b.len() {
        let c = b[i];
        if c == b'\r' || c == b'\n' {
            break;
        }
        if squote.is_some() {
            if c == b'\'' {
                squote = None;
            } else {
                cur.push(c);
            }
            i += 1;
            continue;
        }
        match c {
            b'#' if dquote.is_none() => break,
            b'"' => {
                dquote = if dquote.is_some() { None } else { Some(i) };
                in_word = true;
                i += 1;
            }
            b'\'' if dquote.is_none() => {
                squote = Some(i);
                in_word = true;
                i += 1;
            }
            b'\\' => {
                in_word = true;
                let next = b.get(i + 1).copied();
                match next {
                    Some(b' ') | Some(b'\\') | Some(b'#') | Some(b'\'') | Some(b'"') => {
                        cur.push(b[i + 1]);
                        i += 2;
                    }
                    Some(b't') => {
                        cur.push(b'\t');
                        i += 2;
                    }
                    Some(b'n') => {
                        cur.push(b'\n');
                        i += 2;
                    }
                    Some(b'r') => {
                        cur.push(b'\r');
                        i += 2;
                    }
                    Some(b'$') if dquote.is_some() => {
                        cur.push(b'$');
                        i += 2;
                    }
                    Some(b'x') => {
                        let h1 = b.get(i + 2).and_then(|&h| hex(h));
                        let h2 = b.get(i + 3).and_then(|&h| hex(h));
                        match (h1, h2) {
                            (Some(a), Some(bb)) => {
                                cur.push(a << 4 | bb);
                                i += 4;
                            }
                            _ => {
                                return Err(format!(
                                    "truncated or invalid hexadecimal sequence at position {}",
                                    i + 1
                                ))
                            }
                        }
                    }
                    _ => {
                        cur.push(b'\\');
                        i += 1;
                    }
                }
            }
            b' ' | b'\t' if dquote.is_none() => {
                if in_word {
                    finish(&mut words, &mut cur)?;
                    in_word = false;
                }
                i += 1;
            }
            b'$' if dquote.is_some() => {
                in_word = true;
                i = expand_var(b, i, env, pos, &mut cur, &mut words)?;
            }
            _ => {
                in_word = true;
                cur.push(c);
                i += 1;
            }
        }
    }
    if let Some(p) = squote.or(dquote) {
        return Err(format!("unmatched quote at position {}", p + 1));
    }
    if in_word {
        finish(&mut words, &mut cur)?;
    }
    Ok(words)
}

fn hex(c: u8) -> Option<u8> {
    match c {
        b'0'..=b'9' => Some(c - b'0'),
        b'a'..=b'f' => Some(c - b'a' + 10),
        b'A'..=b'F' => Some(c - b'A' + 10),
        _ => None,
    }
}

/// Expands the variable whose `$` is at `b[start]`; returns the index after it.
fn expand_var(
    b: &[u8],
    start: usize,
    env: EnvLookup<'_>,
    pos: &LinePos<'_>,
    cur: &mut Vec<u8>,
    words: &mut Vec<String>,
) -> Result<usize, String> {
    let mut i = start + 1;
    let brace = b.get(i) == Some(&b'{');
    if brace {
        i += 1;
    }
    let name_start = i;
    match b.get(i) {
        Some(c) if c.is_ascii_alphabetic() || *c == b'_' || *c == b'.' => {}
        _ => {
            return Err(format!(
                "invalid character in environment variable name at position {}",
                i + 1
            ))
        }
    }
    if b[i] == b'.' {
        i += 1;
    }
    while i < b.len() && (b[i].is_ascii_alphanumeric() || b[i] == b'_') {
        i += 1;
    }
    // Only ASCII bytes were consumed, so this slice is valid UTF-8.
    let name = String::from_utf8_lossy(&b[name_start..i]).into_owned();
    let mut value = if let Some(pseudo) = name.strip_prefix('.') {
        match pseudo {
            "FILE" => Some(pos.file.to_string()),
            "LINE" => Some(pos.line.to_string()),
            _ => return Err(format!("unsupported pseudo-variable '{name}'")),
        }
    } else {
        env(&name)
    };
    let mut word_expand = false;
    if brace {
        if b.get(i) == Some(&b'[') {
            if b.get(i + 1) == Some(&b'*') && b.get(i + 2) == Some(&b']') {
                word_expand = true;
                i += 3;
            } else {
                return Err(format!("invalid word expansion at position {}", i + 1));
            }
        }
        if b.get(i) == Some(&b'-') {
            let def_start = i + 1;
            let mut j = def_start;
            while j < b.len() && b[j] != b'}' {
                j += 1;
            }
            if j >= b.len() {
                return Err(format!(
                    "unmatched brace in environment variable name at position {}",
                    name_start
                ));
            }
            if value.is_none() {
                value = Some(String::from_utf8_lossy(&b[def_start..j]).into_owned());
            }
            i = j;
        }
        if b.get(i) != Some(&b'}') {
            return Err(format!(
                "unmatched brace in environment variable name at position {}",
                name_start
            ));
        }
        i += 1;
    }
    if let Some(v) = value {
        if word_expand {
            let mut first = true;
            for part in v.split([' ', '\t']).filter(|p| !p.is_empty()) {
                if !first {
                    words.push(carry(std::mem::take(cur)));
                }
                first = false;
                cur.extend_from_slice(part.as_bytes());
            }
        } else {
            cur.extend_from_slice(v.as_bytes());
        }
    }
    Ok(i)
}
