//! HAProxy's `h1-case-adjust` map: the case some HTTP/1 peers need to see
//! field names in.
//!
//! The global `h1-case-adjust FROM TO` lines and the `h1-case-adjust-file`
//! fill one map (the file's lines after the configuration's, as HAProxy
//! reads the file once the configuration is parsed). `option
//! h1-case-adjust-bogus-client` (frontends) applies it to the heads written
//! to HTTP/1 clients, `option h1-case-adjust-bogus-server` (backends) to
//! the request heads written to HTTP/1 servers.
//!
//! HAProxy 2.6 sends every HTTP/1 field name lower case and looks the
//! lower-case name up in the map, exactly: an entry whose FROM is not
//! lower case never matches. ebb passes names in the case it received them
//! (and writes its own `Content-Length`, `Connection`... capitalised), so
//! it looks up the name lowered the same way: a field whose lowered name is
//! FROM goes out as TO, whatever case it had. TO differs from FROM by case
//! only, so a head is adjusted in place, without moving a byte.

use std::collections::HashMap;

/// The `h1-case-adjust` entries: lower-case name → name to write.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct CaseMap {
    map: HashMap<Box<[u8]>, Box<[u8]>>,
}

impl CaseMap {
    /// Whether no entry was given (then no option changes anything).
    pub fn is_empty(&self) -> bool {
        self.map.is_empty()
    }

    /// Adds `from` → `to` with HAProxy's checks (its messages): `to` not
    /// empty, the two equal but for case, `from` not already there.
    pub fn add(&mut self, from: &str, to: &str) -> Result<(), String> {
        if to.is_empty() {
            return Err("expect <to>".to_string());
        }
        if !from.eq_ignore_ascii_case(to) {
            return Err("<from> and <to> must not differ except the case".to_string());
        }
        if self.map.contains_key(from.as_bytes()) {
            return Err(format!("duplicate entry '{from}'"));
        }
        self.map
            .insert(from.as_bytes().into(), to.as_bytes().into());
        Ok(())
    }

    /// Adds the entries of an `h1-case-adjust-file`'s text, as HAProxy
    /// reads it: leading spaces and tabs skipped, empty lines and lines
    /// starting with `#` ignored, the first word the name to change, the
    /// rest of the line (trailing spaces and tabs cut) the name to write.
    /// A bad line stops the reading: its number (from 1) and why.
    pub fn add_file(&mut self, text: &str) -> Result<(), (u32, String)> {
        for (i, line) in text.split('\n').enumerate() {
            let n = u32::try_from(i + 1).unwrap_or(u32::MAX);
            // The line ends at its first CR (HAProxy: at CR or LF).
            let line = line.split('\r').next().unwrap_or("");
            let line = line.trim_start_matches([' ', '\t']);
            if line.is_empty() || line.starts_with('#') {
                continue;
            }
            let (from, rest) = line.split_at(line.find([' ', '\t']).unwrap_or(line.len()));
            let to = rest.trim_matches([' ', '\t']);
            self.add(from, to).map_err(|e| (n, e))?;
        }
        Ok(())
    }

    /// The name to write for `name`, if the map has one.
    pub fn get(&self, name: &[u8]) -> Option<&[u8]> {
        let mut low = [0u8; 64];
        let key = match low.get_mut(..name.len()) {
            Some(k) => {
                k.copy_from_slice(name);
                k.make_ascii_lowercase();
                k
            }
            // A name longer than any usual one: looked up after an
            // allocation (the option is a workaround, not a fast path).
            None => return self.map.get(&*name.to_ascii_lowercase()).map(|t| &**t),
        };
        self.map.get(&*key).map(|t| &**t)
    }

    /// Adjusts the field names of the HTTP/1 head in `head` (its start
    /// line, fields, maybe the empty line; what follows the empty line is
    /// left alone) in place.
    pub fn adjust_head(&self, head: &mut [u8]) {
        if self.map.is_empty() {
            return;
        }
        // The start line is skipped.
        if let Some(p) = head.iter().position(|&b| b == b'\n') {
            self.adjust_fields(&mut head[p + 1..]);
        }
    }

    /// [`CaseMap::adjust_head`] over heads that follow each other (the
    /// `103 Early Hints` answers of a request's rules).
    pub fn adjust_heads(&self, heads: &mut [u8]) {
        let mut at = 0;
        while at < heads.len() {
            self.adjust_head(&mut heads[at..]);
            match heads[at..].windows(4).position(|w| w == b"\r\n\r\n") {
                Some(p) => at += p + 4,
                None => return,
            }
        }
    }

    /// Adjusts the names of the field lines in `lines` in place, up to
    /// an empty line.
    pub fn adjust_fields(&self, lines: &mut [u8]) {
        let mut at = 0;
        while at < lines.len() {
            let line_end = lines[at..]
                .iter()
                .position(|&b| b == b'\n')
                .map_or(lines.len(), |p| at + p);
            let line = &lines[at..line_end];
            if line.is_empty() || line == b"\r" {
                // The empty line: the head ends.
                return;
            }
            if let Some(colon) = line.iter().position(|&b| b == b':') {
                if let Some(to) = self.get(&line[..colon]) {
                    if to.len() == colon {
                        lines[at..at + colon].copy_from_slice(to);
                    }
                }
            }
            at = line_end + 1;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::CaseMap;

    #[test]
    fn add_checks_as_haproxy() {
        let mut m = CaseMap::default();
        assert_eq!(m.add("x-a", ""), Err("expect <to>".to_string()));
        assert_eq!(
            m.add("x-a", "X-B"),
            Err("<from> and <to> must not differ except the case".to_string())
        );
        m.add("x-a", "X-A").unwrap();
        assert_eq!(
            m.add("x-a", "x-A"),
            Err("duplicate entry 'x-a'".to_string())
        );
        // Not lower case: accepted, never matches (HAProxy looks up
        // lower-case names).
        m.add("X-B", "x-b").unwrap();
        assert_eq!(m.get(b"x-b"), None);
        assert_eq!(m.get(b"X-b"), None);
        assert_eq!(m.get(b"X-a"), Some(&b"X-A"[..]));
        let long = "x".repeat(100);
        m.add(&long, &long.to_uppercase()).unwrap();
        assert_eq!(m.get(long.as_bytes()), Some(long.to_uppercase().as_bytes()));
    }

    #[test]
    fn file_lines() {
        let mut m = CaseMap::default();
        let text = "# comment\n\n  \t\n\tcontent-length   Content-Length \t\r\nx-foo X-FOO\n";
        m.add_file(text).unwrap();
        assert_eq!(m.get(b"CONTENT-LENGTH"), Some(&b"Content-Length"[..]));
        assert_eq!(m.get(b"x-foo"), Some(&b"X-FOO"[..]));
        let mut m = CaseMap::default();
        assert_eq!(
            m.add_file("x-a X-A\nx-b\n"),
            Err((2, "expect <to>".to_string()))
        );
        let mut m = CaseMap::default();
        assert_eq!(
            m.add_file("x-a X-A extra\n"),
            Err((
                1,
                "<from> and <to> must not differ except the case".to_string()
            ))
        );
    }

    #[test]
    fn head_in_place() {
        let mut m = CaseMap::default();
        m.add("host", "HOST").unwrap();
        m.add("x-foo", "X-Foo").unwrap();
        let mut head =
            b"GET /host: HTTP/1.1\r\nhost: a\r\nX-FOO: host: b\r\nx-bar: c\r\n\r\nhost: body"
                .to_vec();
        m.adjust_head(&mut head);
        assert_eq!(
            &head[..],
            b"GET /host: HTTP/1.1\r\nHOST: a\r\nX-Foo: host: b\r\nx-bar: c\r\n\r\nhost: body"
        );
    }

    #[test]
    fn heads_one_after_another() {
        let mut m = CaseMap::default();
        m.add("link", "Link").unwrap();
        let mut heads =
            b"HTTP/1.1 103 Early Hints\r\nlink: a\r\n\r\nHTTP/1.1 103 Early Hints\r\nLINK: b\r\n\r\n"
                .to_vec();
        m.adjust_heads(&mut heads);
        assert_eq!(
            &heads[..],
            b"HTTP/1.1 103 Early Hints\r\nLink: a\r\n\r\nHTTP/1.1 103 Early Hints\r\nLink: b\r\n\r\n"
        );
    }
}
