//! Maps (configuration.txt 7.3.1, `map_<match>_<output>(file[,default])`):
//! a file of `key value` lines read at start (shared with its other users
//! and changed by the CLI, `super::patref`), looked up by a converter. The
//! first matching line wins, in file order, as in HAProxy.

use std::net::IpAddr;
use std::sync::Arc;

use super::patref::{find_str, How, PatRef, Snapshot, User};
use super::{Scratch, Type, Val};

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

impl Match {
    /// How the file's keys are read (`regm` reads them as `reg`).
    fn file_how(self) -> How {
        match self {
            Match::Str => How::Str,
            Match::Beg => How::Beg,
            Match::End => How::End,
            Match::Sub => How::Sub,
            Match::Dir => How::Dir,
            Match::Dom => How::Dom,
            Match::Reg | Match::Regm => How::Reg,
            Match::Ip => How::Ip,
            Match::Int => How::Int,
        }
    }
}

#[derive(Debug)]
pub(crate) struct Map {
    how: Match,
    out: Type,
    /// The file's entries, shared with its other users and the CLI.
    file: Arc<PatRef>,
    /// Output value when no key matches.
    default: Option<Vec<u8>>,
}

impl Map {
    pub(super) fn compile(name: &str, args: &[String]) -> Result<Map, String> {
        let rest = name.strip_prefix("map").unwrap_or("");
        // HAProxy's names: `map`, `map_<match>` and `map_<match>_<out>`
        // with an output of int or ip (no `_str` output suffix).
        let mut parts = rest.strip_prefix('_').unwrap_or(rest).split('_');
        if rest == "_" || rest.starts_with("__") || (!rest.is_empty() && !rest.starts_with('_')) {
            return Err(format!("unknown converter '{name}'"));
        }
        let how = match parts.next().filter(|p| !p.is_empty()) {
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
            None => Type::Str,
            Some("int") => Type::Int,
            Some("ip") => Type::Ip,
            Some(o) => return Err(format!("unknown converter '{name}' (map output '{o}')")),
        };
        if parts.next().is_some() {
            return Err(format!("unknown converter '{name}'"));
        }
        if how == Match::Regm && out != Type::Str {
            return Err(format!(
                "converter '{name}': map_regm gives strings only (use map_regm)"
            ));
        }
        if args.is_empty() || args.len() > 2 {
            return Err(format!(
                "converter '{name}' expects a file and an optional default value"
            ));
        }
        let out_name = match out {
            Type::Int => "int",
            Type::Ip => "ip",
            _ => "str",
        };
        let user = User {
            how: how.file_how(),
            icase: false,
            out: Some(out_name),
            at: match super::patref::line_at() {
                Some(at) => format!("map {at}"),
                None => format!("map ({name})"),
            },
        };
        let file = super::patref::load(&args[0], true, user)
            .map_err(|e| format!("converter '{name}': {e}"))?;
        // Every line must suit this map (HAProxy refuses the file).
        for (i, e) in file.snapshot().entries.iter().enumerate() {
            file.check(&e.key, Some(&e.value))
                .map_err(|x| format!("map file '{}' entry {}: {x}", args[0], i + 1))?;
        }
        let default = match args.get(1) {
            Some(d) => {
                let ok = match out {
                    Type::Int => d.trim().parse::<i64>().is_ok(),
                    Type::Ip => d.trim().parse::<IpAddr>().is_ok(),
                    _ => true,
                };
                if !ok {
                    return Err(format!(
                        "converter '{name}': default value '{d}' is not a valid output value"
                    ));
                }
                Some(d.as_bytes().to_vec())
            }
            None => None,
        };
        Ok(Map {
            how,
            out,
            file,
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

    /// The index of the entry `v` (bytes in `s`) matches: the first one
    /// in file order, but for IP addresses the longest network of the
    /// address's family, then of the other (HAProxy's two prefix trees),
    /// and for `beg` the longest prefix.
    fn find(&self, snap: &Snapshot, v: Val, s: &[u8]) -> Option<usize> {
        match (self.how, v) {
            (Match::Ip, Val::Ip(ip)) => {
                let mut best: Option<(usize, (bool, u8))> = None;
                for (i, n) in snap.nets().iter().enumerate() {
                    let Some(n) = n.as_ref().filter(|n| n.contains(ip)) else {
                        continue;
                    };
                    let rank = (n.addr.is_ipv4() == ip.is_ipv4(), n.prefix);
                    if best.is_none_or(|(_, r)| rank > r) {
                        best = Some((i, rank));
                    }
                }
                best.map(|(i, _)| i)
            }
            (Match::Int, Val::Int(x)) => snap
                .ints()
                .iter()
                .position(|r| r.is_some_and(|(lo, hi)| lo <= x && x <= hi)),
            (Match::Ip | Match::Int, _) => None,
            (m, _) => {
                let how = m.file_how();
                find_str(snap, how, false, s)
            }
        }
    }

    pub(super) fn apply(&self, v: Val, s: &mut Scratch) -> Option<Val> {
        let snap = self.file.snapshot();
        if self.how == Match::Regm {
            let hit = snap
                .regexes(false)
                .iter()
                .zip(&snap.entries)
                .find_map(|(re, e)| {
                    re.as_ref()
                        .and_then(|re| re.captures(&s.cur))
                        .map(|c| (c, e.value.as_bytes()))
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
        let out = match self.find(&snap, v, &s.cur) {
            Some(i) => snap.entries[i].value.as_bytes(),
            None => self.default.as_deref()?,
        };
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

/// HAProxy's `dir` / `dom` matching (`match_word`): the pattern, stripped
/// of delimiters at both ends, must appear in the sample bounded by
/// delimiters (or the ends). The delimiters: `/` and `?` for `dir`, also
/// `.` and `:` for `dom`.
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
