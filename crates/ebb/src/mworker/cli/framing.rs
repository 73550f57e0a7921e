//! How the master CLI cuts what a client sends into commands, payload
//! lines and words.

/// Takes the next command out of `inp`: up to a `;` or a newline that no
/// backslash escapes (the escapes stay, for the worker's CLI to read).
/// `None`: no whole command yet.
pub(super) fn next_command(inp: &mut Vec<u8>) -> Option<String> {
    let mut i = 0;
    while i < inp.len() {
        match inp[i] {
            b'\\' => i += 2,
            b';' | b'\n' => {
                let cmd: Vec<u8> = inp.drain(..=i).collect();
                let cmd = String::from_utf8_lossy(&cmd[..i]);
                return Some(cmd.trim_end_matches('\r').to_string());
            }
            _ => i += 1,
        }
    }
    None
}

/// Takes the next line out of `inp` (a payload's), without its newline.
pub(super) fn next_line(inp: &mut Vec<u8>) -> Option<String> {
    let nl = inp.iter().position(|&c| c == b'\n')?;
    let line: Vec<u8> = inp.drain(..=nl).collect();
    Some(
        String::from_utf8_lossy(&line[..nl])
            .trim_end_matches('\r')
            .to_string(),
    )
}

/// A command's words, split on spaces and tabs; a backslash keeps the
/// character after it in the word (and stays, for the worker).
pub(super) fn split_words(cmd: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut cur = String::new();
    let mut esc = false;
    for c in cmd.chars() {
        if esc {
            esc = false;
            cur.push(c);
        } else if c == '\\' {
            esc = true;
            cur.push(c);
        } else if c == ' ' || c == '\t' {
            if !cur.is_empty() {
                out.push(std::mem::take(&mut cur));
            }
        } else {
            cur.push(c);
        }
    }
    if !cur.is_empty() {
        out.push(cur);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn commands_end_at_unescaped_semicolons_and_newlines() {
        let mut inp = b"@1 add acl f Mon\\ Agent\\;;@1 show acl f\nshow".to_vec();
        assert_eq!(
            next_command(&mut inp).as_deref(),
            Some("@1 add acl f Mon\\ Agent\\;")
        );
        assert_eq!(next_command(&mut inp).as_deref(), Some("@1 show acl f"));
        assert_eq!(next_command(&mut inp), None);
        assert_eq!(inp, b"show");
        assert_eq!(split_words(" @1  a\\ b\tc"), vec!["@1", "a\\ b", "c"]);
    }
}
