//! `userlist` sections and HTTP Basic authentication against them
//! (configuration.txt 3.4): the `http_auth(L)` and `http_auth_group(L)`
//! fetches. A user's password is given in clear (`insecure-password`) or
//! as a SHA-crypt hash (`password $5$...` or `$6$...`, crypt(3)'s
//! SHA-256 and SHA-512 methods, computed here over ring's digests).

use std::cell::RefCell;
use std::sync::{Arc, RwLock};

/// A user's password.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Pass {
    Insecure(String),
    /// A SHA-crypt string: `$5$[rounds=N$]SALT$HASH` or `$6$...`.
    Crypt(String),
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct User {
    pub name: String,
    pub pass: Pass,
    /// The groups it belongs to (its own `groups` and the groups' `users`).
    pub groups: Vec<String>,
}

/// One `userlist NAME` section.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Userlist {
    pub name: String,
    pub groups: Vec<String>,
    pub users: Vec<User>,
}

static LISTS: RwLock<Vec<Arc<Userlist>>> = RwLock::new(Vec::new());

/// Installs the configuration's userlists (each load replaces them).
pub fn install(lists: &[Userlist]) {
    let v = lists.iter().cloned().map(Arc::new).collect();
    *LISTS.write().unwrap_or_else(|p| p.into_inner()) = v;
}

fn find(name: &str) -> Option<Arc<Userlist>> {
    let l = LISTS.read().unwrap_or_else(|p| p.into_inner());
    l.iter().find(|u| u.name == name).cloned()
}

thread_local! {
    static REFS: RefCell<Vec<String>> = const { RefCell::new(Vec::new()) };
}

/// The userlists the fetches compiled on this thread since the last call
/// name, for the parser's check.
pub fn take_userlist_refs() -> Vec<String> {
    REFS.with(|r| std::mem::take(&mut *r.borrow_mut()))
}

pub(super) fn note_ref(name: &str) {
    REFS.with(|r| r.borrow_mut().push(name.to_string()));
}

/// Credentials of an `Authorization` value.
#[derive(Debug, PartialEq, Eq)]
pub(super) enum Creds {
    Basic { user: Vec<u8>, pass: Vec<u8> },
    Bearer,
}

/// The credentials of an `Authorization` value (its first comma-separated
/// value, trimmed), as HAProxy 2.6's `get_http_auth` reads them: the
/// scheme is the text before the first space (none, or a value starting
/// with one: nothing) and names `Basic` or `Bearer` when it is the start
/// of that word in any case (`strncasecmp` on the scheme's length: `Bas`
/// is Basic); the spaces after it are skipped; Basic credentials are
/// strict base64 of `user:password`, read as a C string (up to a NUL; no
/// colon before it: nothing).
pub(super) fn credentials(v: &[u8]) -> Option<Creds> {
    let p = v.iter().position(|&b| b == b' ').filter(|&p| p > 0)?;
    let scheme = &v[..p];
    let rest = &v[p..];
    let rest = &rest[rest.iter().take_while(|&&c| c == b' ').count()..];
    let names = |word: &[u8]| {
        scheme.len() <= word.len() && word[..scheme.len()].eq_ignore_ascii_case(scheme)
    };
    if names(b"Basic") {
        let mut raw = Vec::new();
        super::conv::base64_decode(rest, &mut raw)?;
        let end = raw.iter().position(|&b| b == 0).unwrap_or(raw.len());
        raw.truncate(end);
        let colon = raw.iter().position(|&b| b == b':')?;
        let pass = raw[colon + 1..].to_vec();
        raw.truncate(colon);
        return Some(Creds::Basic { user: raw, pass });
    }
    names(b"Bearer").then_some(Creds::Bearer)
}

/// The scheme of an `Authorization` value, as HAProxy 2.6's
/// `get_http_auth` reads it for `http_auth_type` and `http_auth_user`.
pub(crate) enum Method {
    /// Basic credentials: the user (up to the colon, which must come
    /// before any NUL byte: HAProxy's C string ends there).
    Basic(Vec<u8>),
    Bearer,
}

/// [`Method`] of `value`: the scheme up to the first space (none, or a
/// value starting with one: nothing), compared on its own length as
/// HAProxy's `strncasecmp` does (`Bas` is Basic, `Bea` Bearer), Basic
/// first; Basic credentials must decode (base64) to `user:password`.
pub(crate) fn method(value: &[u8]) -> Option<Method> {
    let starts =
        |word: &[u8], s: &[u8]| s.len() <= word.len() && word[..s.len()].eq_ignore_ascii_case(s);
    let p = value.iter().position(|&c| c == b' ').filter(|&p| p > 0)?;
    let scheme = &value[..p];
    let rest = &value[p..];
    let rest = &rest[rest.iter().take_while(|&&c| c == b' ').count()..];
    if starts(b"Basic", scheme) {
        let mut raw = Vec::new();
        super::conv::base64_decode(rest, &mut raw)?;
        // (HAProxy's `strchr` on the decoded C string: a NUL ends it.)
        let end = raw.iter().position(|&b| b == 0).unwrap_or(raw.len());
        let colon = raw[..end].iter().position(|&b| b == b':')?;
        raw.truncate(colon);
        return Some(Method::Basic(raw));
    }
    starts(b"Bearer", scheme).then_some(Method::Bearer)
}

/// The token of Bearer credentials, from `value` (the first value of
/// the header read), as HAProxy 2.6's `http_auth_bearer` finds it.
/// In `Authorization` (`named` false): the scheme up to the first space
/// (none, or a value starting with one: no sample), the spaces after it
/// skipped; a scheme that starts `Basic` (case-insensitive, as its
/// `strncasecmp` on the scheme's length compares) is not Bearer, one that
/// starts `Bearer` is, even with an empty token. In a header the
/// configuration names: the scheme is `Bearer` exactly (any case) and
/// the token not empty, else (and without the header) the empty string.
pub(super) fn bearer(value: Option<&[u8]>, named: bool) -> Option<&[u8]> {
    let starts =
        |word: &[u8], s: &[u8]| s.len() <= word.len() && word[..s.len()].eq_ignore_ascii_case(s);
    let skip = |v: &[u8], from: usize| -> usize {
        from + v[from..].iter().take_while(|&&c| c == b' ').count()
    };
    if named {
        let Some(v) = value else { return Some(b"") };
        let (typ, rest) = match v.iter().position(|&c| c == b' ') {
            Some(p) => (&v[..p], &v[skip(v, p)..]),
            None => (v, &v[v.len()..]),
        };
        return Some(if typ.eq_ignore_ascii_case(b"Bearer") && !rest.is_empty() {
            rest
        } else {
            b""
        });
    }
    let v = value?;
    let p = v.iter().position(|&c| c == b' ').filter(|&p| p > 0)?;
    let scheme = &v[..p];
    if starts(b"Basic", scheme) || !starts(b"Bearer", scheme) {
        return None;
    }
    Some(&v[skip(v, p)..])
}

/// The user of list `list` whose Basic credentials `authz` (an
/// `Authorization` value) are valid.
pub(super) fn check(list: &str, authz: &[u8]) -> Option<(Arc<Userlist>, usize)> {
    let l = find(list)?;
    let Creds::Basic { user, pass } = credentials(authz)? else {
        return None;
    };
    let (user, pass) = (&user[..], &pass[..]);
    let i = l.users.iter().position(|u| u.name.as_bytes() == user)?;
    let ok = match &l.users[i].pass {
        Pass::Insecure(p) => p.as_bytes() == pass,
        Pass::Crypt(h) => sha_crypt(pass, h).is_some_and(|c| c == *h),
    };
    ok.then_some((l, i))
}

const ITOA64: &[u8; 64] = b"./0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz";

/// Whether `h` is a SHA-crypt string ebb can check.
pub fn is_sha_crypt(h: &str) -> bool {
    (h.starts_with("$5$") || h.starts_with("$6$")) && h[3..].contains('$')
}

/// crypt(3) with a SHA-crypt `setting` (`$5$` or `$6$`, optional
/// `rounds=N$`, the salt): the whole hash string.
pub fn sha_crypt(pass: &[u8], setting: &str) -> Option<String> {
    let (alg, len, id): (&'static ring::digest::Algorithm, usize, &str) =
        if let Some(r) = setting.strip_prefix("$5$") {
            let _ = r;
            (&ring::digest::SHA256, 32, "5")
        } else if setting.starts_with("$6$") {
            (&ring::digest::SHA512, 64, "6")
        } else {
            return None;
        };
    let mut rest = &setting[3..];
    let mut rounds = 5000usize;
    let mut custom = false;
    if let Some(r) = rest.strip_prefix("rounds=") {
        let end = r.find('$')?;
        rounds = r[..end].parse::<usize>().ok()?.clamp(1000, 999_999_999);
        custom = true;
        rest = &r[end + 1..];
    }
    let salt_end = rest.find('$').unwrap_or(rest.len());
    let salt = &rest.as_bytes()[..salt_end.min(16)];
    let h = |parts: &[&[u8]]| {
        let mut c = ring::digest::Context::new(alg);
        for p in parts {
            c.update(p);
        }
        c.finish()
    };
    let b = h(&[pass, salt, pass]);
    let b = b.as_ref();
    let mut a = ring::digest::Context::new(alg);
    a.update(pass);
    a.update(salt);
    let mut n = pass.len();
    while n > len {
        a.update(b);
        n -= len;
    }
    a.update(&b[..n]);
    let mut n = pass.len();
    while n > 0 {
        if n & 1 == 1 {
            a.update(b);
        } else {
            a.update(pass);
        }
        n >>= 1;
    }
    let a = a.finish();
    // The sequences P and S.
    let dp = h(&vec![pass; pass.len()]);
    let p: Vec<u8> = dp
        .as_ref()
        .iter()
        .copied()
        .cycle()
        .take(pass.len())
        .collect();
    let ds = h(&vec![salt; 16 + usize::from(a.as_ref()[0])]);
    let s: Vec<u8> = ds
        .as_ref()
        .iter()
        .copied()
        .cycle()
        .take(salt.len())
        .collect();
    let mut c = a.as_ref().to_vec();
    for i in 0..rounds {
        let mut x = ring::digest::Context::new(alg);
        if i & 1 == 1 {
            x.update(&p);
        } else {
            x.update(&c);
        }
        if i % 3 != 0 {
            x.update(&s);
        }
        if i % 7 != 0 {
            x.update(&p);
        }
        if i & 1 == 1 {
            x.update(&c);
        } else {
            x.update(&p);
        }
        c = x.finish().as_ref().to_vec();
    }
    let mut out = format!("${id}$");
    if custom {
        out.push_str(&format!("rounds={rounds}$"));
    }
    out.push_str(std::str::from_utf8(salt).ok()?);
    out.push('$');
    let mut put = |b2: u8, b1: u8, b0: u8, n: usize| {
        let mut w = (u32::from(b2) << 16) | (u32::from(b1) << 8) | u32::from(b0);
        for _ in 0..n {
            out.push(ITOA64[(w & 0x3f) as usize] as char);
            w >>= 6;
        }
    };
    if len == 32 {
        for i in 0..10 {
            let (x, y, z) = ((i * 21) % 30, (i * 21 + 10) % 30, (i * 21 + 20) % 30);
            put(c[x], c[y], c[z], 4);
        }
        put(0, c[31], c[30], 3);
    } else {
        for i in 0..21 {
            let (x, y, z) = ((i * 22) % 63, (i * 22 + 21) % 63, (i * 22 + 42) % 63);
            put(c[x], c[y], c[z], 4);
        }
        put(0, 0, c[63], 2);
    }
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sha_crypt_gives_crypt3s_strings() {
        // The strings `openssl passwd -5|-6` and crypt(3) give.
        assert_eq!(
            sha_crypt(b"Hello world!", "$5$saltstring").as_deref(),
            Some("$5$saltstring$5B8vYYiY.CVt1RlTTf8KbXBH3hsxY/GNooZaBBGWEc5")
        );
        assert_eq!(
            sha_crypt(b"Hello world!", "$6$saltstring").as_deref(),
            Some("$6$saltstring$svn8UoSVapNtMuq1ukKS4tPQd8iKwSMHWjl/O817G3uBnIFNjnQJuesI68u4OTLiBFdcbYEdFCoEOfaS35inz1")
        );
        assert_eq!(
            sha_crypt(b"Hello world!", "$5$rounds=10000$saltstringsaltstring").as_deref(),
            Some("$5$rounds=10000$saltstringsaltst$3xv.VbSHBb41AL9AvLeujZkZRBAwqFMz2.opqey6IcA")
        );
    }
}
