//! `option tcp-check` and `tcp-check comment|connect|send|send-binary|
//! expect` (configuration.txt 4.2): a health check as a sequence of
//! steps. What ebb supports of each is listed in the errors; anything
//! else is refused at its line, never ignored.

use std::net::IpAddr;

use super::Loc;

/// The `tcp-check` rules of a backend and whether `option tcp-check` is
/// set (the last of `option httpchk` / `option tcp-check` wins, as in
/// HAProxy).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct TcpCheck {
    pub enabled: bool,
    pub rules: Vec<TcpCheckRule>,
}

/// One `tcp-check` line.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TcpCheckRule {
    pub step: TcpCheckStep,
    /// `comment <msg>`: appended to the report when the step fails.
    pub comment: Option<String>,
    pub loc: Loc,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum TcpCheckStep {
    /// `tcp-check comment <msg>`.
    Comment,
    /// `tcp-check connect [default] [port N] [addr IP] [send-proxy]`.
    Connect {
        /// `default`: the server's check settings (its PROXY header and
        /// TLS) unless overridden.
        default: bool,
        port: Option<u16>,
        addr: Option<IpAddr>,
        send_proxy: bool,
    },
    /// `send <string>` or `send-binary <hex>`.
    Send(Vec<u8>),
    /// `expect [min-recv N] [!] string|rstring|binary PATTERN`.
    Expect {
        kind: ExpectMatch,
        /// The bytes to find (`string`, `binary`), or the regex.
        pattern: Vec<u8>,
        negate: bool,
        /// `min-recv`: `None` (-1, the default) waits for more data on a
        /// mismatch; `Some(n)` waits for n bytes, then concludes.
        min_recv: Option<usize>,
    },
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ExpectMatch {
    String,
    Binary,
    RString,
}

/// A hex string (`send-binary`, `expect binary`).
fn unhex(s: &str) -> Result<Vec<u8>, String> {
    let b = s.as_bytes();
    if b.is_empty() || b.len() % 2 != 0 {
        return Err(format!("'{s}' is not an even-length hex string"));
    }
    b.chunks(2)
        .map(|p| {
            std::str::from_utf8(p)
                .ok()
                .and_then(|h| u8::from_str_radix(h, 16).ok())
                .ok_or_else(|| format!("'{s}' is not a hex string"))
        })
        .collect()
}

/// Takes `comment <msg>` out of the words, wherever it is.
fn take_comment(w: &mut Vec<String>) -> Result<Option<String>, String> {
    match w.iter().position(|x| x == "comment") {
        None => Ok(None),
        Some(i) if i + 1 < w.len() => {
            let c = w.remove(i + 1);
            w.remove(i);
            Ok(Some(c))
        }
        Some(_) => Err("'comment' expects a message".to_string()),
    }
}

/// `option tcp-check`.
pub(super) fn enable(tc: &mut TcpCheck, rest: &[String]) -> Result<(), String> {
    if let Some(x) = rest.first() {
        return Err(format!(
            "unexpected argument '{x}' after 'option tcp-check'"
        ));
    }
    tc.enabled = true;
    Ok(())
}

/// Parses the words after `tcp-check`.
pub(super) fn parse(tc: &mut TcpCheck, w: &[String], loc: &Loc) -> Result<(), String> {
    let Some(verb) = w.first().map(String::as_str) else {
        return Err("'tcp-check' expects comment, connect, send, send-binary or expect".into());
    };
    let mut args: Vec<String> = w[1..].to_vec();
    let (step, comment) = match verb {
        "comment" => {
            let [c] = args.as_slice() else {
                return Err("'tcp-check comment' expects one message".to_string());
            };
            (TcpCheckStep::Comment, Some(c.clone()))
        }
        "connect" => {
            let comment = take_comment(&mut args)?;
            let (mut default, mut port, mut addr, mut send_proxy) = (false, None, None, false);
            let mut it = args.iter();
            while let Some(a) = it.next() {
                match a.as_str() {
                    "default" => default = true,
                    "send-proxy" => send_proxy = true,
                    "port" => {
                        let v = it.next().ok_or("'tcp-check connect port' expects a port")?;
                        port = Some(
                            v.parse::<u16>()
                                .ok()
                                .filter(|p| *p > 0)
                                .ok_or_else(|| format!("'tcp-check connect port': invalid port '{v}' (ebb takes a number)"))?,
                        );
                    }
                    "addr" => {
                        let v = it.next().ok_or("'tcp-check connect addr' expects an address")?;
                        addr = Some(v.parse::<IpAddr>().map_err(|_| {
                            format!("'tcp-check connect addr': invalid address '{v}'")
                        })?);
                    }
                    o => {
                        return Err(format!(
                            "'tcp-check connect {o}' is not supported by ebb (supported: default, port, addr, send-proxy, comment)"
                        ))
                    }
                }
            }
            let step = TcpCheckStep::Connect {
                default,
                port,
                addr,
                send_proxy,
            };
            (step, comment)
        }
        "send" | "send-binary" => {
            let comment = take_comment(&mut args)?;
            let [d] = args.as_slice() else {
                return Err(format!("'tcp-check {verb}' expects one data argument"));
            };
            let data = if verb == "send" {
                d.as_bytes().to_vec()
            } else {
                unhex(d).map_err(|e| format!("'tcp-check send-binary': {e}"))?
            };
            (TcpCheckStep::Send(data), comment)
        }
        "expect" => {
            let (mut min_recv, mut comment, mut negate) = (None, None, false);
            let mut i = 0;
            let (kind, pat) = loop {
                let a = args.get(i).map(String::as_str).ok_or(
                    "'tcp-check expect' expects a match (string, rstring, binary) and a pattern",
                )?;
                match a {
                    "min-recv" => {
                        let v = args.get(i + 1).ok_or("'min-recv' expects a number")?;
                        let n: i64 = v
                            .parse()
                            .map_err(|_| format!("'min-recv': invalid number '{v}'"))?;
                        min_recv = usize::try_from(n).ok();
                        i += 2;
                    }
                    "comment" => {
                        comment = Some(args.get(i + 1).ok_or("'comment' expects a message")?.clone());
                        i += 2;
                    }
                    "!" => {
                        negate = true;
                        i += 1;
                    }
                    m => {
                        let (neg2, m) = match m.strip_prefix('!') {
                            Some(r) => (true, r),
                            None => (false, m),
                        };
                        negate |= neg2;
                        let kind = match m {
                            "string" => ExpectMatch::String,
                            "binary" => ExpectMatch::Binary,
                            "rstring" => ExpectMatch::RString,
                            o => {
                                return Err(format!(
                                    "'tcp-check expect {o}' is not supported by ebb (supported: min-recv, comment, !, string, rstring, binary)"
                                ))
                            }
                        };
                        let p = args
                            .get(i + 1)
                            .ok_or_else(|| format!("'tcp-check expect {m}' expects a pattern"))?
                            .clone();
                        // HAProxy takes the options after the pattern too.
                        let mut j = i + 2;
                        while let Some(x) = args.get(j) {
                            let v = args.get(j + 1).ok_or_else(|| format!("'{x}' expects a value"));
                            match x.as_str() {
                                "comment" => comment = Some(v?.clone()),
                                "min-recv" => {
                                    let v = v?;
                                    let n: i64 = v
                                        .parse()
                                        .map_err(|_| format!("'min-recv': invalid number '{v}'"))?;
                                    min_recv = usize::try_from(n).ok();
                                }
                                _ => {
                                    return Err(format!(
                                        "unexpected '{x}' after 'tcp-check expect {m} {p}' (ebb supports min-recv and comment)"
                                    ))
                                }
                            }
                            j += 2;
                        }
                        break (kind, p);
                    }
                }
            };
            let pattern = match kind {
                ExpectMatch::String => pat.into_bytes(),
                ExpectMatch::Binary => {
                    unhex(&pat).map_err(|e| format!("'tcp-check expect binary': {e}"))?
                }
                ExpectMatch::RString => {
                    regex::bytes::Regex::new(&pat)
                        .map_err(|e| format!("'tcp-check expect rstring': invalid regex: {e}"))?;
                    pat.into_bytes()
                }
            };
            let step = TcpCheckStep::Expect {
                kind,
                pattern,
                negate,
                min_recv,
            };
            (step, comment)
        }
        o => {
            return Err(format!(
                "'tcp-check {o}' is not supported by ebb (supported: comment, connect, send, send-binary, expect)"
            ))
        }
    };
    tc.rules.push(TcpCheckRule {
        step,
        comment,
        loc: loc.clone(),
    });
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn words(s: &str) -> Vec<String> {
        s.split(' ').map(String::from).collect()
    }

    #[test]
    fn steps_parse_as_haproxy_writes_them() {
        let loc = Loc {
            file: "t.cfg".into(),
            line: 1,
        };
        let mut tc = TcpCheck::default();
        for l in [
            "comment greeting",
            "connect port 6379 send-proxy comment redis",
            "send-binary 50494e470d0a",
            "send PING",
            "expect min-recv 4 ! string -ERR",
            "expect comment pong rstring ^\\+PONG",
            "expect binary 2b4f4b",
        ] {
            parse(&mut tc, &words(l), &loc).unwrap();
        }
        assert_eq!(tc.rules.len(), 7);
        assert_eq!(tc.rules[2].step, TcpCheckStep::Send(b"PING\r\n".to_vec()));
        assert_eq!(
            tc.rules[4].step,
            TcpCheckStep::Expect {
                kind: ExpectMatch::String,
                pattern: b"-ERR".to_vec(),
                negate: true,
                min_recv: Some(4)
            }
        );
        assert_eq!(tc.rules[5].comment.as_deref(), Some("pong"));
        assert_eq!(tc.rules[1].comment.as_deref(), Some("redis"));
        for (l, e) in [
            ("send-lf %[src]", "not supported"),
            ("expect string-lf x", "not supported"),
            ("expect rstring (", "invalid regex"),
            ("send-binary 0g", "hex"),
            ("connect ssl", "not supported"),
            ("expect string", "expects a pattern"),
        ] {
            let r = parse(&mut tc, &words(l), &loc).unwrap_err();
            assert!(r.contains(e), "{l}: {r}");
        }
    }
}
