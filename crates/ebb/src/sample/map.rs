//! Maps (configuration.txt 7.3.1, `map_<match>_<output>(file[,default])`):
//! a file of `key value` lines read at start, looked up by a converter.
//! The first matching line wins, in file order, as in HAProxy.

use std::net::IpAddr;

use regex::bytes::Regex;

use super::{Scratch, Type, Val};
use crate::net::IpNet;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Match {
    Str,
    Beg,
    End,
    Sub,
    Dir,
    Dom,
    Reg,
    /// `regm`: a regular expression whose value may name its groups
    /// (`\1`...), replaced by what they matched.
    Regm,
    Ip,
    Int,
}

#[derive(Debug)]
enum Key {
    Bytes(Vec<u8>),
    Re(Regex),
    Net(IpNet),
    Int(i64),
}

#[derive(Debug)]
pub(crate) struct Map {
    how: Match,
    out: Type,
    entries: Vec<(Key, Vec<u8>)>,
    /// Output value when no key matches.
    default: Option<Vec<u8>>,
}

impl Map {
    pub(super) fn compile(name: &str, args: &[String]) -> Result<Map, String> {
        let rest = name.strip_prefix("map").unwrap_or("");
        let mut parts = rest.split('_').filter(|s| !s.is_empty());
        let how = match parts.next() {
            None | Some("str") => Match::Str,
            Some("beg") => Match::Beg,
            Some("end") => Match::End,
            Some("sub") => Match::Sub,
            Some("dir") => Match::Dir,
            Some("dom") => Match::Dom,
            Some("reg") => Match::Reg,
            Some("regm") => Match::Regm,
            Some("ip") => Match::Ip,
            Some("int") => Match::Int,
            Some(o) => return Err(format!("unknown converter '{name}' (map match '{o}')")),
        };
        let out = match parts.next() {
            None | Some("str") => Type::Str,
            Some("int") => Type::Int,
            Some("ip") => Type::Ip,
            Some(o) => return Err(format!("unknown converter '{name}' (map output '{o}')")),
        };
        if parts.next().is_some() {
            return Err(format!("unknown converter '{name}'"));
        }
        if how == Match::Regm && out != Type::Str {
            return Err(format!(
                "converter '{name}': map_regm gives strings only (use map_regm or map_regm_str)"
            ));
        }
        if args.is_empty() || args.len() > 2 {
            return Err(format!(
                "converter '{name}' expects a file and an optional default value"
            ));
        }
        let text = std::fs::read_to_string(&args[0]).map_err(|e| {
            format!(
                "converter '{name}': cannot read map file '{}': {e}",
                args[0]
            )
        })?;
        let check_out = |v: &str, what: &str| -> Result<(), String> {
            let ok = match out {
                Type::Int => v.trim().parse::<i64>().is_ok(),
                Type::Ip => v.trim().parse::<IpAddr>().is_ok(),
                _ => true,
            };
            if ok {
                Ok(())
            } else {
                Err(format!(
                    "converter '{name}': {what} '{v}' is not a valid output value"
                ))
            }
        };
        let mut entries = Vec::new();
        for (i, line) in text.lines().enumerate() {
            let line = line.trim();
            if line.is_empty() || line.starts_with('#') {
                continue;
            }
            let (k, v) = match line.find([' ', '\t']) {
                Some(p) => (&line[..p], line[p..].trim()),
                None => (line, ""),
            };
            let bad = |e: String| format!("map file '{}' line {}: {e}", args[0], i + 1);
            check_out(v, "value").map_err(bad)?;
            let key = match how {
                Match::Reg | Match::Regm => Key::Re(
                    Regex::new(k)
                        .map_err(|e| bad(format!("invalid regular expression '{k}': {e}")))?,
                ),
                Match::Ip => Key::Net(crate::net::parse_ipnet(k).map_err(bad)?),
                Match::Int => Key::Int(
                    k.parse()
                        .map_err(|_| bad(format!("'{k}' is not an integer")))?,
                ),
                _ => Key::Bytes(k.as_bytes().to_vec()),
            };
            entries.push((key, v.as_bytes().to_vec()));
        }
        let default = match args.get(1) {
            Some(d) => {
                check_out(d, "default value")?;
                Some(d.as_bytes().to_vec())
            }
            None => None,
        };
        Ok(Map {
            how,
            out,
            entries,
            default,
        })
    }

    pub(super) fn in_type(&self) -> Type {
        match self.how {
            Match::Ip => Type::Ip,
            Match::Int => Type::Int,
            _ => Type::Str,
        }
    }

    pub(super) fn out_type(&self) -> Type {
        self.out
    }

    fn find(&self, v: Val, s: &[u8]) -> Option<&[u8]> {
        let hit = self.entries.iter().find(|(k, _)| match (k, v) {
            (Key::Net(n), Val::Ip(ip)) => n.contains(ip),
            (Key::Int(i), Val::Int(x)) => *i == x,
            (Key::Re(re), _) => re.is_match(s),
            (Key::Bytes(p), _) => match self.how {
                Match::Str => s == p.as_slice(),
                Match::Beg => s.starts_with(p),
                Match::End => s.ends_with(p),
                Match::Sub => p.is_empty() || s.windows(p.len()).any(|w| w == p.as_slice()),
                Match::Dir => word(s, p, b"/", false),
                Match::Dom => word(s, p, b"/.", false),
                _ => false,
            },
            _ => false,
        });
        hit.map(|(_, v)| v.as_slice()).or(self.default.as_deref())
    }

    pub(super) fn apply(&self, v: Val, s: &mut Scratch) -> Option<Val> {
        if self.how == Match::Regm {
            let hit = self.entries.iter().find_map(|(k, val)| match k {
                Key::Re(re) => re.captures(&s.cur).map(|c| (c, val)),
                _ => None,
            });
            let mut out = Vec::new();
            match hit {
                Some((caps, val)) => expand(val, &caps, &mut out),
                None => out.extend_from_slice(self.default.as_deref()?),
            }
            s.tmp.clear();
            s.tmp.extend_from_slice(&out);
            std::mem::swap(&mut s.cur, &mut s.tmp);
            return Some(Val::Str);
        }
        let out = self.find(v, &s.cur)?;
        match self.out {
            Type::Int => Some(Val::Int(
                std::str::from_utf8(out).ok()?.trim().parse().ok()?,
            )),
            Type::Ip => Some(Val::Ip(std::str::from_utf8(out).ok()?.trim().parse().ok()?)),
            _ => {
                s.tmp.clear();
                s.tmp.extend_from_slice(out);
                std::mem::swap(&mut s.cur, &mut s.tmp);
                Some(Val::Str)
            }
        }
    }
}

/// HAProxy's `dir` / `dom` matching: the pattern, stripped of delimiters at
/// both ends, must appear in the sample bounded by delimiters (or the ends).
pub(crate) fn word(s: &[u8], p: &[u8], delims: &[u8], icase: bool) -> bool {
    let is_d = |c: u8| delims.contains(&c);
    let p = {
        let a = p.iter().position(|&c| !is_d(c)).unwrap_or(p.len());
        let b = p.iter().rposition(|&c| !is_d(c)).map_or(a, |i| i + 1);
        &p[a..b]
    };
    if p.is_empty() {
        return false;
    }
    let n = p.len();
    if s.len() < n {
        return false;
    }
    (0..=s.len() - n).any(|i| {
        (i == 0 || is_d(s[i - 1]))
            && (i + n == s.len() || is_d(s[i + n]))
            && if icase {
                s[i..i + n].eq_ignore_ascii_case(p)
            } else {
                &s[i..i + n] == p
            }
    })
}

/// HAProxy's `exp_replace`: `\N` is the Nth group (empty if it did not
/// take part), `\xHH` a byte, `\` before anything else that character.
pub(crate) fn expand(tpl: &[u8], caps: &regex::bytes::Captures<'_>, out: &mut Vec<u8>) {
    let mut i = 0;
    while i < tpl.len() {
        let c = tpl[i];
        if c != b'\\' || i + 1 >= tpl.len() {
            out.push(c);
            i += 1;
            continue;
        }
        let n = tpl[i + 1];
        if n.is_ascii_digit() {
            if let Some(m) = caps.get((n - b'0') as usize) {
                out.extend_from_slice(m.as_bytes());
            }
            i += 2;
        } else if n == b'x'
            && i + 3 < tpl.len() + 1
            && tpl
                .get(i + 2..i + 4)
                .is_some_and(|h| h.iter().all(u8::is_ascii_hexdigit))
        {
            let h = std::str::from_utf8(&tpl[i + 2..i + 4]).unwrap_or("00");
            out.push(u8::from_str_radix(h, 16).unwrap_or(0));
            i += 4;
        } else {
            out.push(n);
            i += 2;
        }
    }
}
