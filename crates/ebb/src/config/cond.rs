//! HAProxy's condition expressions, as `haproxy -cc EXPR` evaluates them
//! (test scripts and VTest's `feature cmd` ask the program what it is
//! before running a test).
//!
//! ```text
//! expr := and ( "||" expr )?        and := term ( "&&" and )?
//! term := "!" term | "(" expr ")" | NAME "(" args ")" | INTEGER
//! ```
//!
//! Predicates: `defined(VAR)`, `feature(NAME)`, `streq(a,b)`,
//! `strneq(a,b)`, `version_atleast(V)`, `version_before(V)`,
//! `ssllib_name_startswith(S)`, `openssl_version_atleast(V)`,
//! `openssl_version_before(V)`. An integer
//! is true when non-zero. Arguments may be quoted: `'...'` literally,
//! `"..."` with `$VAR` / `${VAR}` expanded from the environment.
//!
//! `version_*` compare with the HAProxy version whose behaviour ebb
//! follows ([`HAPROXY_COMPAT_VERSION`]); `feature()` is true for `OPENSSL`
//! only, HAProxy's name for a build with SSL/TLS support (ebb's is rustls),
//! and false for the others: ebb has no Lua, PCRE, zlib or HTTP splicing.
//! `ssllib_name_startswith()` compares with `rustls`; the `openssl_version_*`
//! terms are errors, as in a HAProxy without OpenSSL.

/// The HAProxy release whose configuration language and behaviour ebb is
/// measured against (its reg-tests tree).
pub const HAPROXY_COMPAT_VERSION: &str = "2.6.0";

/// The name of ebb's TLS library, as `ssllib_name_startswith()` sees it.
pub const TLS_LIBRARY: &str = "rustls";

/// Evaluates `expr`; `lookup` reads environment variables.
pub fn eval(expr: &str, lookup: &dyn Fn(&str) -> Option<String>) -> Result<bool, String> {
    let mut p = P {
        s: expr.as_bytes(),
        i: 0,
        lookup,
        skip: 0,
    };
    p.ws();
    if p.i == p.s.len() {
        return Err("empty condition".to_string());
    }
    let v = p.or()?;
    p.ws();
    if p.i != p.s.len() {
        return Err(format!("unexpected '{}' at position {}", &expr[p.i..], p.i));
    }
    Ok(v)
}

struct P<'a> {
    s: &'a [u8],
    i: usize,
    lookup: &'a dyn Fn(&str) -> Option<String>,
    /// Inside a term whose value is not needed (after a false `&&` or a
    /// true `||` operand): parsed, not evaluated, as HAProxy stops
    /// evaluating there (an error it would raise is not raised).
    skip: u32,
}

impl P<'_> {
    fn ws(&mut self) {
        while self.s.get(self.i).is_some_and(u8::is_ascii_whitespace) {
            self.i += 1;
        }
    }
    fn eat(&mut self, t: &str) -> bool {
        self.ws();
        if self.s[self.i..].starts_with(t.as_bytes()) {
            self.i += t.len();
            true
        } else {
            false
        }
    }
    fn or(&mut self) -> Result<bool, String> {
        let a = self.and()?;
        if self.eat("||") {
            self.skip += u32::from(a);
            let b = self.or();
            self.skip -= u32::from(a);
            return Ok(a || b?);
        }
        Ok(a)
    }
    fn and(&mut self) -> Result<bool, String> {
        let a = self.term()?;
        if self.eat("&&") {
            self.skip += u32::from(!a);
            let b = self.and();
            self.skip -= u32::from(!a);
            return Ok(a && b?);
        }
        Ok(a)
    }
    fn term(&mut self) -> Result<bool, String> {
        self.ws();
        if self.eat("!") {
            return Ok(!self.term()?);
        }
        if self.eat("(") {
            let v = self.or()?;
            if !self.eat(")") {
                return Err(format!("missing ')' at position {}", self.i));
            }
            return Ok(v);
        }
        let start = self.i;
        while self
            .s
            .get(self.i)
            .is_some_and(|c| c.is_ascii_alphanumeric() || *c == b'_' || *c == b'-')
        {
            self.i += 1;
        }
        let word = std::str::from_utf8(&self.s[start..self.i]).unwrap_or("");
        if word.is_empty() {
            return Err(format!("expected a term at position {start}"));
        }
        if self.s.get(self.i) == Some(&b'(') {
            self.i += 1;
            let args = self.args()?;
            return self.predicate(word, &args);
        }
        match word.parse::<i64>() {
            Ok(n) => Ok(n != 0),
            Err(_) => Err(format!("unknown term '{word}'")),
        }
    }
    /// Arguments up to the closing parenthesis (consumed).
    fn args(&mut self) -> Result<Vec<String>, String> {
        let mut out = Vec::new();
        let mut cur = Vec::new();
        loop {
            let Some(&c) = self.s.get(self.i) else {
                return Err("missing ')' after the arguments".to_string());
            };
            self.i += 1;
            match c {
                b')' => {
                    if !(out.is_empty() && cur.is_empty()) {
                        out.push(String::from_utf8_lossy(&cur).trim().to_string());
                    }
                    return Ok(out);
                }
                b',' => out.push(
                    String::from_utf8_lossy(&std::mem::take(&mut cur))
                        .trim()
                        .to_string(),
                ),
                b'\\' => match self.s.get(self.i) {
                    Some(&n) => {
                        cur.push(n);
                        self.i += 1;
                    }
                    None => return Err("'\\' at the end".to_string()),
                },
                b'\'' => loop {
                    match self.s.get(self.i) {
                        Some(b'\'') => {
                            self.i += 1;
                            break;
                        }
                        Some(&n) => {
                            cur.push(n);
                            self.i += 1;
                        }
                        None => return Err("unterminated quote".to_string()),
                    }
                },
                b'"' => loop {
                    match self.s.get(self.i) {
                        Some(b'"') => {
                            self.i += 1;
                            break;
                        }
                        Some(b'$') => {
                            self.i += 1;
                            let name = self.var_name()?;
                            if let Some(v) = (self.lookup)(&name) {
                                cur.extend_from_slice(v.as_bytes());
                            }
                        }
                        Some(b'\\') if self.s.get(self.i + 1).is_some() => {
                            cur.push(self.s[self.i + 1]);
                            self.i += 2;
                        }
                        Some(&n) => {
                            cur.push(n);
                            self.i += 1;
                        }
                        None => return Err("unterminated quote".to_string()),
                    }
                },
                _ => cur.push(c),
            }
        }
    }
    fn var_name(&mut self) -> Result<String, String> {
        let braced = self.s.get(self.i) == Some(&b'{');
        if braced {
            self.i += 1;
        }
        let start = self.i;
        while self
            .s
            .get(self.i)
            .is_some_and(|c| c.is_ascii_alphanumeric() || *c == b'_')
        {
            self.i += 1;
        }
        let name = String::from_utf8_lossy(&self.s[start..self.i]).to_string();
        if braced {
            if self.s.get(self.i) != Some(&b'}') {
                return Err("missing '}' after a variable name".to_string());
            }
            self.i += 1;
        }
        Ok(name)
    }
    fn predicate(&self, name: &str, a: &[String]) -> Result<bool, String> {
        let n = |k: usize| -> Result<(), String> {
            if a.len() == k {
                Ok(())
            } else {
                Err(format!("'{name}' expects {k} argument(s), got {}", a.len()))
            }
        };
        match name {
            "defined" => {
                n(1)?;
                Ok((self.lookup)(&a[0]).is_some())
            }
            "feature" => {
                n(1)?;
                // HAProxy's `OPENSSL` names a build with SSL/TLS support
                // (configs switch their `ssl` lines on with it): ebb has
                // TLS (rustls). Every other feature name is false.
                Ok(a[0] == "OPENSSL")
            }
            "ssllib_name_startswith" => {
                n(1)?;
                // The TLS library's name: rustls, never an OpenSSL one.
                Ok(TLS_LIBRARY.starts_with(a[0].as_str()))
            }
            "openssl_version_atleast" | "openssl_version_before" => {
                n(1)?;
                if self.skip > 0 {
                    return Ok(false);
                }
                // HAProxy without OpenSSL: the term is an error.
                Err(format!(
                    "'{name}': ebb has no OpenSSL library version (its TLS library is {TLS_LIBRARY})"
                ))
            }
            "streq" => {
                n(2)?;
                Ok(a[0] == a[1])
            }
            "strneq" => {
                n(2)?;
                Ok(a[0] != a[1])
            }
            "version_atleast" | "version_before" => {
                n(1)?;
                let want = version(&a[0]).ok_or_else(|| format!("invalid version '{}'", a[0]))?;
                let have = version(HAPROXY_COMPAT_VERSION).unwrap_or_default();
                Ok(if name == "version_atleast" {
                    have >= want
                } else {
                    have < want
                })
            }
            o => Err(format!("unknown predicate '{o}'")),
        }
    }
}

/// `MAJOR[.MINOR[.PATCH]][-devN|-preN|-rcN]` as a comparable tuple: a
/// development version sorts before a pre-release, before a release
/// candidate, before the release.
fn version(v: &str) -> Option<(u32, u32, u32, u32, u32)> {
    let (nums, tag) = match v.split_once('-') {
        Some((a, b)) => (a, Some(b)),
        None => (v, None),
    };
    let mut it = nums.split('.');
    let mut next = || -> Option<u32> {
        match it.next() {
            Some(x) => x.parse().ok(),
            None => Some(0),
        }
    };
    let (a, b, c) = (next()?, next()?, next()?);
    let (stage, n) = match tag {
        None => (3, 0),
        Some(t) => {
            let (stage, rest) = if let Some(r) = t.strip_prefix("dev") {
                (0, r)
            } else if let Some(r) = t.strip_prefix("pre") {
                (1, r)
            } else if let Some(r) = t.strip_prefix("rc") {
                (2, r)
            } else {
                return None;
            };
            (
                stage,
                if rest.is_empty() {
                    0
                } else {
                    rest.parse().ok()?
                },
            )
        }
    };
    Some((a, b, c, stage, n))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ev(s: &str) -> Result<bool, String> {
        eval(s, &|k| (k == "TESTVAR").then(|| "1".to_string()))
    }

    #[test]
    fn haproxy_check_condition_cases() {
        // The expressions of HAProxy's reg-test startup/check_condition.
        assert_eq!(ev("version_atleast(2.4)"), Ok(true));
        assert_eq!(ev("version_atleast(2.5-dev0)"), Ok(true));
        assert_eq!(ev("version_atleast(1024)"), Ok(false));
        assert_eq!(ev("version_before(2.6)"), Ok(false));
        assert_eq!(ev("version_before(2.7-dev0)"), Ok(true));
        assert_eq!(ev("streq(foo,'foo')"), Ok(true));
        assert_eq!(ev("streq(\"foo bar\",'foo bar')"), Ok(true));
        assert_eq!(ev("streq(foo,bar)"), Ok(false));
        assert_eq!(ev("feature(OPENSSL) || !feature(OPENSSL)"), Ok(true));
        // ebb has TLS (HAProxy's OPENSSL feature), through rustls.
        assert_eq!(ev("feature(OPENSSL)"), Ok(true));
        assert_eq!(ev("feature(LUA) || feature(OPENSSL_X)"), Ok(false));
        assert_eq!(ev("ssllib_name_startswith(OpenSSL)"), Ok(false));
        assert_eq!(ev("ssllib_name_startswith(rustls)"), Ok(true));
        assert!(ev("openssl_version_atleast(1.1.1)").is_err());
        assert_eq!(
            ev("feature(OPENSSL) && ssllib_name_startswith(OpenSSL) && openssl_version_atleast(1.1.1)"),
            Ok(false)
        );
        assert_eq!(
            ev("defined(TESTVAR) && streq(\"$TESTVAR\",\"1\")"),
            Ok(true)
        );
        assert_eq!(ev("defined(NOPE)"), Ok(false));
        assert_eq!(
            ev("1&&!0&&!((streq(a,b)||!streq(a,a)&&1)||strneq(a,a))"),
            Ok(true)
        );
        assert_eq!(
            ev("1   &&!   0&&    !((streq(a,b)||!streq(a,a)&&1)||strneq(a,a))"),
            Ok(true)
        );
        assert_eq!(
            ev("1 && !0 && !((streq(a,b) || !streq(a,a) && 1) || strneq(a,b))"),
            Ok(false)
        );
        assert_eq!(ev("-1000 && 200"), Ok(true));
        for bad in ["", "streq(a,\"a)", "200rrr", "!(0))", "nope(1)", "(1"] {
            assert!(ev(bad).is_err(), "{bad:?} should be an error");
        }
    }
}
