//! The `json_query(PATH[,int])` converter (configuration.txt 7.3.1):
//! the value at a JSON path in a JSON text. The path subset is HAProxy
//! 2.6's (its bundled mjson): `$`, then `.KEY` steps (a `\` takes the
//! next character literally, so `\.` is a dot inside a key) and `[N]`
//! array indexes. Strings, numbers and booleans give a value; null,
//! arrays, objects and anything not found give none.

/// One step of a path.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) enum Step {
    Key(Vec<u8>),
    Index(usize),
}

/// A compiled path.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) struct Path(Vec<Step>);

impl Path {
    pub(super) fn parse(p: &str) -> Result<Path, String> {
        let b = p.as_bytes();
        if b.is_empty() {
            return Err("json_path must not be empty".to_string());
        }
        if b[0] != b'$' {
            return Err(format!("json_path '{p}' must start with '$'"));
        }
        let mut steps = Vec::new();
        let mut i = 1;
        while i < b.len() {
            match b[i] {
                b'.' => {
                    i += 1;
                    let mut key = Vec::new();
                    while i < b.len() && b[i] != b'.' && b[i] != b'[' {
                        if b[i] == b'\\' && i + 1 < b.len() {
                            i += 1;
                        }
                        key.push(b[i]);
                        i += 1;
                    }
                    steps.push(Step::Key(key));
                }
                b'[' => {
                    let end = b[i..]
                        .iter()
                        .position(|&c| c == b']')
                        .ok_or_else(|| format!("json_path '{p}': missing ']'"))?;
                    let n = std::str::from_utf8(&b[i + 1..i + end])
                        .ok()
                        .and_then(|s| s.trim().parse::<usize>().ok())
                        .ok_or_else(|| format!("json_path '{p}': bad array index"))?;
                    steps.push(Step::Index(n));
                    i += end + 1;
                }
                c => {
                    return Err(format!(
                        "json_path '{p}': unexpected '{}' (expected '.KEY' or '[N]')",
                        c as char
                    ))
                }
            }
        }
        Ok(Path(steps))
    }
}

/// What a query found.
#[derive(Debug, PartialEq)]
pub(super) enum Found {
    /// A string, unescaped.
    Str(Vec<u8>),
    /// A number as written.
    Num(Vec<u8>),
    Bool(bool),
}

/// A small JSON reader over bytes: it walks values without building
/// them, with a depth bound (outside input).
struct Rd<'a> {
    s: &'a [u8],
    i: usize,
    depth: usize,
}

const MAX_DEPTH: usize = 64;

impl Rd<'_> {
    fn ws(&mut self) {
        while self.i < self.s.len() && matches!(self.s[self.i], b' ' | b'\t' | b'\n' | b'\r') {
            self.i += 1;
        }
    }

    fn peek(&self) -> Option<u8> {
        self.s.get(self.i).copied()
    }

    fn eat(&mut self, c: u8) -> Option<()> {
        self.ws();
        (self.peek()? == c).then(|| self.i += 1)
    }

    /// A string's raw bytes (between the quotes, escapes as written).
    fn raw_string(&mut self) -> Option<&[u8]> {
        self.ws();
        if self.peek()? != b'"' {
            return None;
        }
        let start = self.i + 1;
        let mut i = start;
        loop {
            match *self.s.get(i)? {
                b'"' => break,
                b'\\' => i += 2,
                c if c < 0x20 => return None,
                _ => i += 1,
            }
        }
        self.i = i + 1;
        self.s.get(start..i)
    }

    fn literal(&mut self, w: &[u8]) -> Option<()> {
        self.s
            .get(self.i..)?
            .starts_with(w)
            .then(|| self.i += w.len())
    }

    fn number(&mut self) -> Option<&[u8]> {
        let start = self.i;
        if self.peek() == Some(b'-') {
            self.i += 1;
        }
        let digits = |r: &mut Self| {
            let st = r.i;
            while r.peek().is_some_and(|c| c.is_ascii_digit()) {
                r.i += 1;
            }
            r.i > st
        };
        if !digits(self) {
            return None;
        }
        if self.peek() == Some(b'.') {
            self.i += 1;
            if !digits(self) {
                return None;
            }
        }
        if matches!(self.peek(), Some(b'e' | b'E')) {
            self.i += 1;
            if matches!(self.peek(), Some(b'+' | b'-')) {
                self.i += 1;
            }
            if !digits(self) {
                return None;
            }
        }
        self.s.get(start..self.i)
    }

    /// Skips one value.
    fn skip(&mut self) -> Option<()> {
        self.value(&[]).map(drop)
    }

    /// Reads an object (`close` is `}`) or an array (`]`) from its
    /// opening byte, following `path` into the member or element its
    /// first step names (the first such member, as mjson).
    fn container(&mut self, close: u8, path: &[Step]) -> Option<Option<Found>> {
        self.depth += 1;
        if self.depth > MAX_DEPTH {
            return None;
        }
        self.i += 1;
        let mut found = None;
        self.ws();
        if self.peek()? == close {
            self.i += 1;
        } else {
            let mut n = 0;
            loop {
                let hit = if close == b'}' {
                    let key = self.raw_string()?.to_vec();
                    self.eat(b':')?;
                    found.is_none() && matches!(path.first(), Some(Step::Key(k)) if *k == key)
                } else {
                    matches!(path.first(), Some(Step::Index(k)) if *k == n)
                };
                if hit {
                    found = Some(self.value(&path[1..])?);
                } else {
                    self.skip()?;
                }
                n += 1;
                self.ws();
                match self.peek()? {
                    b',' => self.i += 1,
                    c if c == close => {
                        self.i += 1;
                        break;
                    }
                    _ => return None,
                }
            }
        }
        self.depth -= 1;
        Some(found.flatten())
    }

    /// Reads one value, following `path` into it; returns what the path
    /// ends on (`None` inside: a scalar at the end, or a container).
    fn value(&mut self, path: &[Step]) -> Option<Option<Found>> {
        self.ws();
        match self.peek()? {
            b'{' => self.container(b'}', path),
            b'[' => self.container(b']', path),
            b'"' => {
                let raw = self.raw_string()?;
                Some(if path.is_empty() {
                    Some(Found::Str(unescape(raw)?))
                } else {
                    None
                })
            }
            b't' => {
                self.literal(b"true")?;
                Some(path.is_empty().then_some(Found::Bool(true)))
            }
            b'f' => {
                self.literal(b"false")?;
                Some(path.is_empty().then_some(Found::Bool(false)))
            }
            b'n' => {
                self.literal(b"null")?;
                Some(None)
            }
            _ => {
                let n = self.number()?.to_vec();
                Some(path.is_empty().then_some(Found::Num(n)))
            }
        }
    }
}

/// A JSON string's content with its escapes resolved (`\uXXXX`, with
/// surrogate pairs, to UTF-8).
fn unescape(raw: &[u8]) -> Option<Vec<u8>> {
    let mut out = Vec::with_capacity(raw.len());
    let mut i = 0;
    let hex4 = |i: usize| -> Option<u32> {
        let h = std::str::from_utf8(raw.get(i..i + 4)?).ok()?;
        u32::from_str_radix(h, 16).ok()
    };
    while i < raw.len() {
        if raw[i] != b'\\' {
            out.push(raw[i]);
            i += 1;
            continue;
        }
        let e = *raw.get(i + 1)?;
        i += 2;
        let c = match e {
            b'"' => b'"',
            b'\\' => b'\\',
            b'/' => b'/',
            b'b' => 8,
            b'f' => 12,
            b'n' => b'\n',
            b'r' => b'\r',
            b't' => b'\t',
            b'u' => {
                let mut cp = hex4(i)?;
                i += 4;
                if (0xd800..0xdc00).contains(&cp) && raw.get(i..i + 2) == Some(b"\\u") {
                    let lo = hex4(i + 2)?;
                    if (0xdc00..0xe000).contains(&lo) {
                        cp = 0x10000 + ((cp - 0xd800) << 10) + (lo - 0xdc00);
                        i += 6;
                    }
                }
                let ch = char::from_u32(cp)?;
                let mut b = [0; 4];
                out.extend_from_slice(ch.encode_utf8(&mut b).as_bytes());
                continue;
            }
            _ => return None,
        };
        out.push(c);
    }
    Some(out)
}

/// The value at `path` in the JSON text `s`.
pub(super) fn query(s: &[u8], path: &Path) -> Option<Found> {
    let mut r = Rd { s, i: 0, depth: 0 };
    r.value(&path.0)?
}

/// HAProxy's JSON_INT_MAX: the largest integer a double holds exactly.
const JSON_INT_MAX: i64 = (1 << 53) - 1;

/// A number's integer value as C's `strtoll(s, NULL, 0)` reads it (the
/// leading integer part), within ±JSON_INT_MAX.
pub(super) fn num_int(n: &[u8]) -> Option<i64> {
    let (neg, digits) = match n.strip_prefix(b"-") {
        Some(d) => (true, d),
        None => (false, n),
    };
    let end = digits
        .iter()
        .position(|c| !c.is_ascii_digit())
        .unwrap_or(digits.len());
    let mut v: i64 = 0;
    for &c in &digits[..end] {
        v = v.checked_mul(10)?.checked_add(i64::from(c - b'0'))?;
    }
    let v = if neg { -v } else { v };
    (-JSON_INT_MAX..=JSON_INT_MAX).contains(&v).then_some(v)
}

/// A number as C's `printf("%g")` writes its double: 6 significant
/// digits, trailing zeros dropped, an exponent below 1e-4 or from 1e6.
pub(super) fn num_g(n: &[u8]) -> Option<String> {
    let v: f64 = std::str::from_utf8(n).ok()?.parse().ok()?;
    Some(format_g(v))
}

fn format_g(v: f64) -> String {
    if v == 0.0 {
        return if v.is_sign_negative() { "-0" } else { "0" }.to_string();
    }
    if !v.is_finite() {
        return if v.is_nan() {
            "nan".to_string()
        } else if v > 0.0 {
            "inf".to_string()
        } else {
            "-inf".to_string()
        };
    }
    // The exponent of the value rounded to 6 significant digits.
    let e = format!("{v:.5e}");
    let (mant, exp) = e.split_once('e').unwrap_or((&e, "0"));
    let exp: i32 = exp.parse().unwrap_or(0);
    let strip = |s: String| -> String {
        if s.contains('.') {
            s.trim_end_matches('0').trim_end_matches('.').to_string()
        } else {
            s
        }
    };
    if !(-4..6).contains(&exp) {
        let m = strip(mant.to_string());
        let sign = if exp < 0 { '-' } else { '+' };
        format!("{m}e{sign}{:02}", exp.abs())
    } else {
        let prec = (5 - exp).max(0) as usize;
        strip(format!("{v:.prec$}"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn q(json: &str, p: &str) -> Option<Found> {
        query(json.as_bytes(), &Path::parse(p).unwrap())
    }

    #[test]
    fn paths_find_what_haproxy_finds() {
        assert_eq!(
            q(r#"{"iss":"kubernetes.io/serviceaccount"}"#, "$.iss"),
            Some(Found::Str(b"kubernetes.io/serviceaccount".to_vec()))
        );
        assert_eq!(
            q(r#"{"a":{"b":[1,{"c":true}]}}"#, "$.a.b[1].c"),
            Some(Found::Bool(true))
        );
        assert_eq!(
            q(r#"{"my.key":"v"}"#, r"$.my\.key"),
            Some(Found::Str(b"v".to_vec()))
        );
        assert_eq!(q(r#"{"a":null}"#, "$.a"), None);
        assert_eq!(q(r#"{"a":[1]}"#, "$.a"), None);
        assert_eq!(q(r#"{"a":1}"#, "$.b"), None);
        assert_eq!(
            q(r#"{"a":"\u00e9\n"}"#, "$.a"),
            Some(Found::Str("é\n".as_bytes().to_vec()))
        );
        // Broken JSON gives nothing, deep nesting too.
        assert_eq!(q(r#"{"a":1"#, "$.a"), None);
        let deep = "[".repeat(10_000);
        assert_eq!(q(&deep, "$[0]"), None);
        assert!(Path::parse("a.b").is_err());
        assert!(Path::parse("").is_err());
    }

    #[test]
    fn numbers_read_as_c_does() {
        assert_eq!(num_int(b"4"), Some(4));
        assert_eq!(num_int(b"-4"), Some(-4));
        assert_eq!(num_int(b"4.5"), Some(4));
        assert_eq!(num_int(b"9007199254740992"), None);
        assert_eq!(num_g(b"4.5").as_deref(), Some("4.5"));
        assert_eq!(num_g(b"4").as_deref(), Some("4"));
        assert_eq!(num_g(b"1234567").as_deref(), Some("1.23457e+06"));
        assert_eq!(num_g(b"0.0001").as_deref(), Some("0.0001"));
        assert_eq!(num_g(b"0.00001").as_deref(), Some("1e-05"));
        assert_eq!(num_g(b"100000").as_deref(), Some("100000"));
    }
}
