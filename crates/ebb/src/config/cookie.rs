//! `cookie NAME [rewrite|insert|prefix] [indirect] [nocache] [postonly]
//! [preserve] [httponly] [secure] [domain D]* [maxidle T] [maxlife T]
//! [attr A]*` (configuration.txt 4.2, `cookie`): the persistence cookie of
//! a backend, as configured. What it does at run time is in
//! `backend::cookie`.

use std::time::Duration;

/// How the persistence cookie is handled.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CookieMode {
    /// No mode word: the server sets the cookie itself; ebb only reads it
    /// to choose the server.
    Passive,
    /// `rewrite`: the server's cookie value is replaced by the server's id.
    Rewrite,
    /// `insert`: ebb adds `Set-Cookie: NAME=ID` when needed.
    Insert,
    /// `prefix`: the server's cookie value gets `ID~` in front.
    Prefix,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CookieCfg {
    pub name: String,
    pub mode: CookieMode,
    pub indirect: bool,
    pub nocache: bool,
    pub postonly: bool,
    pub preserve: bool,
    pub httponly: bool,
    pub secure: bool,
    pub domains: Vec<String>,
    pub maxidle: Option<Duration>,
    pub maxlife: Option<Duration>,
    pub attrs: Vec<String>,
    /// The backend's `option persist` (set when the backend is built).
    pub persist: bool,
    /// `dynamic`: servers without a `cookie` value get one derived from
    /// the backend's `dynamic-cookie-key` and their address.
    pub dynamic: bool,
}

/// Parses the words after `cookie`.
pub fn parse(w: &[String]) -> Result<CookieCfg, String> {
    let Some(name) = w.first() else {
        return Err("'cookie' expects a cookie name".to_string());
    };
    if name.is_empty() || !crate::net::is_token(name) {
        return Err(format!("'cookie': invalid cookie name '{name}'"));
    }
    let mut c = CookieCfg {
        name: name.clone(),
        mode: CookieMode::Passive,
        indirect: false,
        nocache: false,
        postonly: false,
        preserve: false,
        httponly: false,
        secure: false,
        domains: Vec::new(),
        maxidle: None,
        maxlife: None,
        attrs: Vec::new(),
        persist: false,
        dynamic: false,
    };
    let mut i = 1;
    while i < w.len() {
        let k = w[i].as_str();
        i += 1;
        let mut value = |what: &str| -> Result<&String, String> {
            let v = w
                .get(i)
                .ok_or_else(|| format!("'cookie {what}' expects a value"))?;
            i += 1;
            Ok(v)
        };
        let mode = |c: &mut CookieCfg, m: CookieMode| -> Result<(), String> {
            if c.mode != CookieMode::Passive && c.mode != m {
                return Err(
                    "'cookie': 'rewrite', 'insert' and 'prefix' are mutually exclusive".to_string(),
                );
            }
            c.mode = m;
            Ok(())
        };
        match k {
            "rewrite" => mode(&mut c, CookieMode::Rewrite)?,
            "insert" => mode(&mut c, CookieMode::Insert)?,
            "prefix" => mode(&mut c, CookieMode::Prefix)?,
            "indirect" => c.indirect = true,
            "nocache" => c.nocache = true,
            "postonly" => c.postonly = true,
            "preserve" => c.preserve = true,
            "httponly" => c.httponly = true,
            "secure" => c.secure = true,
            "domain" => {
                let d = value(k)?;
                // HAProxy warns when the domain has no dot inside; a
                // domain with control bytes or ';' would break the header.
                if d.is_empty() || d.bytes().any(|b| b < 0x21 || b == b';' || b == 0x7f) {
                    return Err(format!("'cookie domain': invalid domain '{d}'"));
                }
                c.domains.push(d.clone());
            }
            "maxidle" | "maxlife" => {
                let v = value(k)?;
                let d = super::values::parse_time(v)?;
                if d.is_zero() {
                    return Err(format!("'cookie {k}' must be greater than zero"));
                }
                if k == "maxidle" {
                    c.maxidle = Some(d);
                } else {
                    c.maxlife = Some(d);
                }
            }
            "attr" => {
                let a = value(k)?;
                if a.bytes().any(|b| b < 0x20 || b == b';' || b == 0x7f) {
                    return Err(format!(
                        "'cookie attr': '{a}' holds a control character or ';'"
                    ));
                }
                c.attrs.push(a.clone());
            }
            "dynamic" => c.dynamic = true,
            o => {
                return Err(format!(
                    "'cookie': unknown option '{o}' (supported: rewrite, insert, prefix, indirect, nocache, postonly, preserve, httponly, secure, domain, maxidle, maxlife, attr, dynamic)"
                ))
            }
        }
    }
    // HAProxy's check (cfgparse-listen.c). `maxidle`, `maxlife`,
    // `nocache` and `postonly` are accepted in every mode, as HAProxy
    // does: they act when a cookie is inserted, so only in `insert` mode.
    if c.mode == CookieMode::Rewrite && c.indirect {
        return Err("cookie 'rewrite' and 'indirect' modes are incompatible".to_string());
    }
    if c.preserve && c.mode != CookieMode::Insert && !c.indirect {
        return Err("cookie 'preserve' requires at least 'insert' or 'indirect'".to_string());
    }
    Ok(c)
}

/// `capture cookie NAME len N`: the first request cookie and the first
/// response `Set-Cookie` whose name starts with NAME, as `NAME=VALUE`, cut
/// to N bytes (`%CC`, `%CS`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CaptureCookie {
    pub name: String,
    pub len: usize,
}

/// A frontend's per-exchange settings besides its rules: `capture
/// cookie`, `unique-id-format` and `unique-id-header`.
#[derive(Clone, Debug, Default)]
pub struct FrontTxn {
    pub capture_cookie: Option<CaptureCookie>,
    pub unique_id: Option<crate::sample::LogFormat>,
    pub unique_id_header: Option<String>,
}

impl FrontTxn {
    pub fn of(p: &super::Proxy) -> FrontTxn {
        FrontTxn {
            capture_cookie: p.capture_cookie.clone(),
            unique_id: p.unique_id_format.clone(),
            unique_id_header: p.unique_id_header.clone(),
        }
    }
}
