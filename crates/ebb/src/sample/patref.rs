//! Pattern references shared by maps and ACLs (HAProxy's `pat_ref`): one
//! per file name, whoever reads it (`map_*(FILE)` converters, `-f FILE`
//! ACLs), and one per ACL line for the patterns written on it; changed at
//! run time by the CLI (`add map`, `set map`, `del map`, `clear map`, `add
//! acl`, `del acl`, `clear acl`), which names them by path or `#ID`.
//!
//! Each configuration makes its own (a reload reads its files again):
//! [`begin`] when its parse starts, [`end`] when it ends numbers them as
//! HAProxy does (an ACL line's `-u ID` kept, the others from 0 in the
//! order they were made, skipping those), and [`install`] makes them the
//! ones the CLI sees when that configuration goes live.
//!
//! Readers never take a lock in the steady state: a file's entries are an
//! immutable [`Snapshot`] behind an `Arc`; a change builds a new snapshot,
//! stores it under the file's mutex and bumps the file's version. Each
//! thread keeps the last snapshot it saw per file with its version, and
//! only takes the mutex (once) when the version moved: every thread sees
//! a change at its next lookup, and a lookup in progress finishes on the
//! snapshot it started with.
//!
//! Rules change them too: `add-acl(FILE)`, `del-acl(FILE)`,
//! `set-map(FILE)` and `del-map(FILE)` of `http-request` and
//! `http-response` ([`PatEdit`]) find the file by its name when they run,
//! as HAProxy's `pat_ref_lookup` (a file no ACL nor map reads: nothing
//! happens), and edit it as the CLI does.

use std::cell::RefCell;
use std::net::IpAddr;
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock};

use regex::bytes::Regex;

use crate::net::IpNet;

/// One line of a pattern file: a key, and for maps a value.
#[derive(Debug, Clone)]
pub struct RefEntry {
    /// The entry's identifier (`#0x...` in the CLI).
    pub id: u64,
    pub key: String,
    pub value: String,
}

/// The entries of a file at one moment, with the forms of the keys the
/// match methods need, computed at their first use.
#[derive(Debug, Default)]
pub struct Snapshot {
    pub entries: Vec<RefEntry>,
    re: OnceLock<Vec<Option<Regex>>>,
    re_icase: OnceLock<Vec<Option<Regex>>>,
    nets: OnceLock<Vec<Option<IpNet>>>,
    ints: OnceLock<Vec<Option<(i64, i64)>>>,
}

impl Snapshot {
    fn new(entries: Vec<RefEntry>) -> Snapshot {
        Snapshot {
            entries,
            ..Snapshot::default()
        }
    }

    /// The keys as regular expressions (`None`: the key does not compile).
    pub fn regexes(&self, icase: bool) -> &[Option<Regex>] {
        let cell = if icase { &self.re_icase } else { &self.re };
        cell.get_or_init(|| {
            self.entries
                .iter()
                .map(|e| compile_re(&e.key, icase).ok())
                .collect()
        })
    }

    /// The keys as networks.
    pub fn nets(&self) -> &[Option<IpNet>] {
        self.nets.get_or_init(|| {
            self.entries
                .iter()
                .map(|e| crate::net::parse_ipnet(&e.key).ok())
                .collect()
        })
    }

    /// The keys as integer ranges (`N`, `N:M`, `:M`, `N:`).
    pub fn ints(&self) -> &[Option<(i64, i64)>] {
        self.ints
            .get_or_init(|| self.entries.iter().map(|e| int_range(&e.key)).collect())
    }
}

fn compile_re(k: &str, icase: bool) -> Result<Regex, regex::Error> {
    if icase {
        Regex::new(&format!("(?i){k}"))
    } else {
        Regex::new(k)
    }
}

/// HAProxy's integer patterns (`pat_parse_int`): `N`, `N:`, `:N`, `N:M`,
/// with `-` as good a separator as `:` (the first of either splits: `5-9`
/// is `5:9`, `-1` is `:1`: a pattern cannot be negative); each number as
/// `strl2llrc` reads it.
pub fn int_range(k: &str) -> Option<(i64, i64)> {
    let b = k.trim().as_bytes();
    let Some(sep) = b.iter().position(|&c| c == b':' || c == b'-') else {
        let n = strl2llrc(b)?;
        return Some((n, n));
    };
    let (lo, hi) = (&b[..sep], &b[sep + 1..]);
    match (lo.is_empty(), hi.is_empty()) {
        (true, false) => Some((i64::MIN, strl2llrc(hi)?)),
        (_, true) => Some((strl2llrc(lo)?, i64::MAX)),
        (false, false) => {
            let (lo, hi) = (strl2llrc(lo)?, strl2llrc(hi)?);
            (lo <= hi).then_some((lo, hi))
        }
    }
}

/// HAProxy's `strl2llrc`: an optional `-`, then digits; `None` when
/// empty, past the 64-bit range or with another byte (one above `9` is
/// refused as invalid; one below `0` reads as a negative digit, which its
/// overflow checks then refuse).
pub fn strl2llrc(s: &[u8]) -> Option<i64> {
    let (neg, d) = match s.split_first()? {
        (b'-', rest) => (true, rest),
        _ => (false, s),
    };
    let mut i: i64 = 0;
    for &c in d {
        let j = i64::from(c) - i64::from(b'0');
        if !(0..=9).contains(&j) {
            return None;
        }
        i = i.checked_mul(10)?;
        i = if neg {
            i.checked_sub(j)?
        } else {
            i.checked_add(j)?
        };
    }
    Some(i)
}

/// How one user (a converter or an ACL test) matches a file's keys.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum How {
    Str,
    Beg,
    End,
    Sub,
    Dir,
    Dom,
    Reg,
    Ip,
    Int,
}

impl How {
    pub fn name(self) -> &'static str {
        match self {
            How::Str => "str",
            How::Beg => "beg",
            How::End => "end",
            How::Sub => "sub",
            How::Dir => "dir",
            How::Dom => "dom",
            How::Reg => "reg",
            How::Ip => "ip",
            How::Int => "int",
        }
    }
}

/// A user of a file, for `get map|acl` and for checking new entries.
#[derive(Debug, Clone)]
pub struct User {
    pub how: How,
    pub icase: bool,
    /// Maps: the output type's name (`str`, `int`, `ip`); `None`: an ACL.
    pub out: Option<&'static str>,
    /// `map at file 'F' line N` / `acl at file 'F' line N`.
    pub at: String,
}

/// A pattern file, or the patterns of one ACL line.
#[derive(Debug)]
pub struct PatRef {
    /// HAProxy's unique id (`#N`): see the module's introduction.
    uid: AtomicU32,
    /// An ACL line's `-u ID`.
    fixed: Option<u32>,
    /// The file's path (empty for an ACL line's patterns).
    pub file: String,
    /// An ACL line's patterns: `acl 'KEYWORD' file 'F' line N`, as
    /// HAProxy's `show acl` describes them.
    inline: Option<String>,
    /// Read as `key value` lines (by a map converter, or an ACL after
    /// `-M`): HAProxy's `PAT_REF_SMP` and `PAT_REF_MAP`.
    two_col: bool,
    version: AtomicU64,
    cur: Mutex<Arc<Snapshot>>,
    users: Mutex<Vec<User>>,
}

/// A reference as a configuration item holds it (equal when it is the
/// same file, or the patterns of the same ACL line).
#[derive(Debug, Clone)]
pub struct PatFile(pub Arc<PatRef>);

impl PartialEq for PatFile {
    fn eq(&self, o: &PatFile) -> bool {
        Arc::ptr_eq(&self.0, &o.0) || (self.0.file == o.0.file && self.0.inline == o.0.inline)
    }
}
impl Eq for PatFile {}

static REFS: Mutex<Vec<Arc<PatRef>>> = Mutex::new(Vec::new());
static NEXT_ID: AtomicU64 = AtomicU64::new(0x1000);

fn next_id() -> u64 {
    NEXT_ID.fetch_add(0x50, Ordering::Relaxed)
}

/// Parses a pattern file's text: one entry per line, `#` comments and
/// blank lines skipped; for maps the key ends at the first blank and the
/// value is the rest of the line.
fn parse_lines(text: &str, map: bool) -> Vec<RefEntry> {
    let mut out = Vec::new();
    for line in text.lines() {
        let line = line.trim();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        let (k, v) = if map {
            match line.find([' ', '\t']) {
                Some(p) => (&line[..p], line[p..].trim()),
                None => (line, ""),
            }
        } else {
            (line, "")
        };
        out.push(RefEntry {
            id: next_id(),
            key: k.to_string(),
            value: v.to_string(),
        });
    }
    out
}

thread_local! {
    /// The references made by the configuration being parsed on this
    /// thread, from [`begin`] to [`end`].
    static BUILDING: RefCell<Option<Vec<Arc<PatRef>>>> = const { RefCell::new(None) };
}

/// A predefined ACL's reference in one proxy (by index): (proxy, name,
/// reference).
type Predefined = (Option<usize>, String, Arc<PatRef>);

thread_local! {
    /// The configuration line being parsed on this thread: its file, its
    /// number, and the proxy section it is in (an index).
    static LINE: RefCell<(String, u32, Option<usize>)> = const { RefCell::new((String::new(), 0, None)) };
    /// HAProxy's predefined ACLs (`METH_GET`, `TRUE`...) a parse used, by
    /// proxy: one reference each per proxy, made where first used.
    static PREDEFINED: RefCell<Vec<Predefined>> = const { RefCell::new(Vec::new()) };
}

/// A configuration's parse starts on this thread: the references it makes
/// are its own (its files read again) until [`end`].
pub fn begin() {
    BUILDING.with(|b| *b.borrow_mut() = Some(Vec::new()));
    PREDEFINED.with(|p| p.borrow_mut().clear());
}

/// The parser reads line `line` of `file`, in proxy section `proxy`.
pub fn at_line(file: &str, line: u32, proxy: Option<usize>) {
    LINE.with(|l| {
        let mut l = l.borrow_mut();
        if l.0 != file {
            l.0 = file.to_string();
        }
        l.1 = line;
        l.2 = proxy;
    });
}

/// `at file 'F' line N` of the line being parsed, as HAProxy names a
/// reference's users (`None` outside a parse).
pub fn line_at() -> Option<String> {
    LINE.with(|l| {
        let l = l.borrow();
        (l.1 != 0).then(|| format!("at file '{}' line {}", l.0, l.1))
    })
}

/// The reference of predefined ACL `name` in the proxy being parsed: the
/// one made at its first use there, else `make`'s.
pub fn predefined(
    name: &str,
    make: impl FnOnce() -> Result<Arc<PatRef>, String>,
) -> Result<Arc<PatRef>, String> {
    let proxy = LINE.with(|l| l.borrow().2);
    if let Some(r) = PREDEFINED.with(|p| {
        p.borrow()
            .iter()
            .find(|e| e.0 == proxy && e.1 == name)
            .map(|e| Arc::clone(&e.2))
    }) {
        return Ok(r);
    }
    let r = make()?;
    PREDEFINED.with(|p| {
        p.borrow_mut()
            .push((proxy, name.to_string(), Arc::clone(&r)))
    });
    Ok(r)
}

/// The parse begun by [`begin`] ended: its references, numbered (see the
/// module's introduction), in id order.
pub fn end() -> Vec<PatFile> {
    let mut refs = BUILDING.with(|b| b.borrow_mut().take()).unwrap_or_default();
    // Outside a parse no line is being read (a map converter parsed later
    // names no configuration line).
    LINE.with(|l| *l.borrow_mut() = (String::new(), 0, None));
    number(&refs);
    refs.sort_by_key(|r| r.uid());
    refs.into_iter().map(PatFile).collect()
}

/// HAProxy's numbering: ids given with `-u` are kept; the others take the
/// free ones from 0, in the order of creation.
fn number(refs: &[Arc<PatRef>]) {
    let taken: std::collections::HashSet<u32> = refs.iter().filter_map(|r| r.fixed).collect();
    let mut next = 0u32;
    for r in refs {
        let id = match r.fixed {
            Some(id) => id,
            None => {
                while taken.contains(&next) {
                    next += 1;
                }
                next += 1;
                next - 1
            }
        };
        r.uid.store(id, Ordering::Relaxed);
    }
}

/// Makes `refs` (a configuration's, from [`end`]) those the CLI names:
/// that configuration is going live.
pub fn install(refs: &[PatFile]) {
    *REFS.lock().unwrap_or_else(|p| p.into_inner()) =
        refs.iter().map(|f| Arc::clone(&f.0)).collect();
}

/// Runs `f` on the references being made: the parse's on this thread, or
/// (outside a parse) the live ones, where a new one is numbered at once.
fn with_refs<T>(f: impl FnOnce(&mut Vec<Arc<PatRef>>, bool) -> T) -> T {
    BUILDING.with(|b| match b.borrow_mut().as_mut() {
        Some(v) => f(v, false),
        None => f(&mut REFS.lock().unwrap_or_else(|p| p.into_inner()), true),
    })
}

fn new_ref(
    file: &str,
    inline: Option<String>,
    fixed: Option<u32>,
    two_col: bool,
    entries: Vec<RefEntry>,
    users: Vec<User>,
    uid: u32,
) -> Arc<PatRef> {
    Arc::new(PatRef {
        uid: AtomicU32::new(fixed.unwrap_or(uid)),
        fixed,
        file: file.to_string(),
        inline,
        two_col,
        version: AtomicU64::new(0),
        cur: Mutex::new(Arc::new(Snapshot::new(entries))),
        users: Mutex::new(users),
    })
}

/// The patterns written on an ACL line (HAProxy makes a reference of
/// them, listed by `show acl` and changed by `add acl #ID`...): `desc`
/// its description (`acl 'path' file 'F' line N`), `keys` the patterns
/// as HAProxy keeps their text, `user` how the line matches them (`None`:
/// a method that takes none), `fixed` its `-u ID`.
pub fn inline(
    desc: String,
    keys: &[String],
    user: Option<User>,
    fixed: Option<u32>,
) -> Result<Arc<PatRef>, String> {
    with_refs(|refs, live| {
        if fixed.is_some() && refs.iter().any(|r| r.fixed == fixed) {
            return Err("the id is already used".to_string());
        }
        let entries = keys
            .iter()
            .map(|k| RefEntry {
                id: next_id(),
                key: k.clone(),
                value: String::new(),
            })
            .collect();
        let uid = if live { refs.len() as u32 } else { 0 };
        let r = new_ref(
            "",
            Some(desc),
            fixed,
            false,
            entries,
            user.into_iter().collect(),
            uid,
        );
        refs.push(Arc::clone(&r));
        Ok(r)
    })
}

/// The file `path`, read at its first use by the configuration (later
/// users share it). `map`: lines are `key value`.
pub fn load(path: &str, map: bool, user: User) -> Result<Arc<PatRef>, String> {
    with_refs(|refs, live| load_in(refs, live, path, map, user))
}

fn load_in(
    refs: &mut Vec<Arc<PatRef>>,
    live: bool,
    path: &str,
    map: bool,
    user: User,
) -> Result<Arc<PatRef>, String> {
    if let Some(r) = refs.iter().find(|r| r.inline.is_none() && r.file == path) {
        // HAProxy's `pattern_read_from_file`: one way of reading a file.
        if r.two_col != map {
            let (was, now) = if map { ("one", "two") } else { ("two", "one") };
            return Err(format!(
                "The file \"{path}\" is already used as {was} column file and cannot be used by as {now} column file."
            ));
        }
        r.users.lock().unwrap_or_else(|p| p.into_inner()).push(user);
        return Ok(Arc::clone(r));
    }
    let text =
        std::fs::read_to_string(path).map_err(|e| format!("cannot read file '{path}': {e}"))?;
    let uid = if live { refs.len() as u32 } else { 0 };
    let r = new_ref(
        path,
        None,
        None,
        map,
        parse_lines(&text, map),
        vec![user],
        uid,
    );
    refs.push(Arc::clone(&r));
    Ok(r)
}

/// Every file, in id order.
pub fn all() -> Vec<Arc<PatRef>> {
    REFS.lock().unwrap_or_else(|p| p.into_inner()).clone()
}

/// The live file whose path is `name` (HAProxy's `pat_ref_lookup`: an
/// ACL line's own patterns have no name).
pub fn lookup(name: &str) -> Option<Arc<PatRef>> {
    let refs = REFS.lock().unwrap_or_else(|p| p.into_inner());
    refs.iter()
        .find(|r| r.inline.is_none() && r.file == name)
        .cloned()
}

/// What a [`PatEdit`] rule does to its file.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PatOp {
    /// `add-acl`: the key, unless an entry has it already.
    AddAcl,
    /// `del-acl`, `del-map`: every entry with the key goes.
    Del,
    /// `set-map`: the value of every entry with the key, or a new entry.
    SetMap,
}

/// `add-acl(FILE) KEYFMT`, `del-acl(FILE) KEYFMT`, `set-map(FILE) KEYFMT
/// VALUEFMT`, `del-map(FILE) KEYFMT` of `http-request` and
/// `http-response` rules (HAProxy's `http_action_set_map`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PatEdit {
    pub op: PatOp,
    /// The file's name as the ACLs and maps that read it write it.
    pub file: String,
    pub key: super::LogFormat,
    /// `set-map`'s value.
    pub value: Option<super::LogFormat>,
}

impl PatEdit {
    /// Runs the rule for `ctx`: the key (and value) rendered, then the
    /// file changed. An entry its users cannot read (a bad address for an
    /// `ip` ACL, a value that is not an integer for `map_str_int`) is not
    /// added nor set, as in HAProxy, where the change fails silently.
    pub fn run(&self, ctx: &super::Ctx<'_>) {
        let Some(r) = lookup(&self.file) else {
            return;
        };
        let text = |f: &super::LogFormat| {
            let mut out = Vec::new();
            f.render(ctx, &mut out);
            // HAProxy's key is a C string.
            if let Some(n) = out.iter().position(|&c| c == 0) {
                out.truncate(n);
            }
            String::from_utf8_lossy(&out).into_owned()
        };
        let key = text(&self.key);
        let _ = match self.op {
            PatOp::AddAcl => r.add_absent(&key),
            PatOp::Del => r.delete(&key),
            PatOp::SetMap => {
                let value = self.value.as_ref().map(text).unwrap_or_default();
                r.set_or_add(&key, &value)
            }
        };
    }
}

/// The file named by `#ID` or by its path, among those `maps` (or ACLs)
/// use.
pub fn find(name: &str, maps: bool) -> Option<Arc<PatRef>> {
    let refs = REFS.lock().unwrap_or_else(|p| p.into_inner());
    let by_id = name.strip_prefix('#').and_then(|n| n.parse::<u32>().ok());
    refs.iter()
        .find(|r| {
            (by_id == Some(r.uid()) || (by_id.is_none() && r.inline.is_none() && r.file == name))
                && r.used_by(maps)
        })
        .cloned()
}

thread_local! {
    /// The last snapshot this thread saw of each file: (file address,
    /// version, snapshot).
    static SEEN: RefCell<Vec<(usize, u64, Arc<Snapshot>)>> = const { RefCell::new(Vec::new()) };
}

impl PatRef {
    /// HAProxy's unique id (`#N`).
    pub fn uid(&self) -> u32 {
        self.uid.load(Ordering::Relaxed)
    }

    /// Whether the CLI changed the entries since they were read.
    #[inline]
    pub fn changed(&self) -> bool {
        self.version.load(Ordering::Relaxed) != 0
    }

    /// Whether `show map` (`maps`) or `show acl` lists the reference: a
    /// map is any two-column file (an ACL's after `-M` too), an ACL's
    /// file one an ACL uses, and an ACL line's own patterns.
    pub fn used_by(&self, maps: bool) -> bool {
        if maps {
            return self.two_col;
        }
        self.inline.is_some()
            || self
                .users
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .iter()
                .any(|u| u.out.is_none())
    }

    pub fn users(&self) -> Vec<User> {
        self.users.lock().unwrap_or_else(|p| p.into_inner()).clone()
    }

    /// The entries as they are now (see the module's introduction).
    pub fn snapshot(&self) -> Arc<Snapshot> {
        let v = self.version.load(Ordering::Acquire);
        let me = self as *const PatRef as usize;
        SEEN.with(|s| {
            let mut s = s.borrow_mut();
            if let Some(e) = s.iter_mut().find(|e| e.0 == me) {
                if e.1 != v {
                    let cur = self.load();
                    *e = (me, v, cur);
                }
                return Arc::clone(&e.2);
            }
            let cur = self.load();
            s.push((me, v, Arc::clone(&cur)));
            cur
        })
    }

    fn load(&self) -> Arc<Snapshot> {
        Arc::clone(&self.cur.lock().unwrap_or_else(|p| p.into_inner()))
    }

    /// Applies `f` to a copy of the entries and publishes the result; `f`
    /// returns an error to leave the file as it was.
    pub fn update<T>(
        &self,
        f: impl FnOnce(&mut Vec<RefEntry>) -> Result<T, String>,
    ) -> Result<T, String> {
        let mut cur = self.cur.lock().unwrap_or_else(|p| p.into_inner());
        let mut entries = cur.entries.clone();
        let r = f(&mut entries)?;
        *cur = Arc::new(Snapshot::new(entries));
        // Under the mutex: a reader seeing the new version loads the new
        // snapshot.
        self.version.fetch_add(1, Ordering::Release);
        Ok(r)
    }

    /// Whether `key` (and for maps `value`) suit every user of the file:
    /// a regular expression that compiles, an address, an integer, an
    /// output value of the map's type.
    pub fn check(&self, key: &str, value: Option<&str>) -> Result<(), String> {
        for u in self.users() {
            match u.how {
                How::Reg => {
                    compile_re(key, u.icase).map_err(|e| format!("'{key}': {e}"))?;
                }
                How::Ip => {
                    crate::net::parse_ipnet(key)?;
                }
                How::Int => {
                    int_range(key).ok_or_else(|| format!("'{key}' is not a number."))?;
                }
                _ => {}
            }
            if let Some(v) = value {
                let ok = match u.out {
                    Some("int") => v.trim().parse::<i64>().is_ok(),
                    Some("ip") => v.trim().parse::<IpAddr>().is_ok(),
                    _ => true,
                };
                if !ok {
                    return Err(format!(
                        "'{v}' is not a valid {} value",
                        u.out.unwrap_or("")
                    ));
                }
            }
        }
        Ok(())
    }

    /// `show map|acl`'s description of the reference.
    pub fn describe(&self) -> String {
        if let Some(d) = &self.inline {
            let n = self.snapshot().entries.len();
            return format!("{} () {d}. curr_ver=0 next_ver=0 entry_cnt={n}", self.uid());
        }
        let users = self.users();
        let by: Vec<String> = users.iter().map(|u| format!("by {}", u.at)).collect();
        let n = self.snapshot().entries.len() * users.len().max(1);
        format!(
            "{} ({}) pattern loaded from file '{}' used {}. curr_ver=0 next_ver=0 entry_cnt={n}",
            self.uid(),
            self.file,
            self.file,
            by.join(", ")
        )
    }

    /// `add-acl`: adds `key` (with no value) unless an entry has it.
    pub fn add_absent(&self, key: &str) -> Result<(), String> {
        self.check(key, None)?;
        self.update(|e| {
            if e.iter().any(|x| x.key == key) {
                return Err(String::new());
            }
            e.push(RefEntry {
                id: next_id(),
                key: key.to_string(),
                value: String::new(),
            });
            Ok(())
        })
    }

    /// `set-map`: the value of every entry with `key`, or a new entry
    /// when none has it.
    pub fn set_or_add(&self, key: &str, value: &str) -> Result<(), String> {
        self.check(key, Some(value))?;
        self.update(|e| {
            let mut found = false;
            for x in e.iter_mut().filter(|x| x.key == key) {
                x.value = value.to_string();
                found = true;
            }
            if !found {
                e.push(RefEntry {
                    id: next_id(),
                    key: key.to_string(),
                    value: value.to_string(),
                });
            }
            Ok(())
        })
    }

    /// Deletes every entry whose key is `key` (no entry: no change).
    pub fn delete(&self, key: &str) -> Result<(), String> {
        self.update(|e| {
            let before = e.len();
            e.retain(|x| x.key != key);
            if e.len() == before {
                Err(String::new())
            } else {
                Ok(())
            }
        })
    }

    /// Adds an entry at the end.
    pub fn add(&self, key: &str, value: &str) -> Result<(), String> {
        self.check(key, Some(value))?;
        self.update(|e| {
            e.push(RefEntry {
                id: next_id(),
                key: key.to_string(),
                value: value.to_string(),
            });
            Ok(())
        })
    }
}

/// Matches `s` against the keys of `snap` with method `how`: the index of
/// the first matching entry, in file order; for `beg` without `-i`, the
/// longest matching key (the first of equal ones), as HAProxy's prefix
/// tree does.
pub fn find_str(snap: &Snapshot, how: How, icase: bool, s: &[u8]) -> Option<usize> {
    use crate::sample::map::word;
    let eq = |a: &[u8], b: &[u8]| {
        if icase {
            a.eq_ignore_ascii_case(b)
        } else {
            a == b
        }
    };
    if how == How::Beg && !icase {
        let mut best: Option<(usize, usize)> = None;
        for (i, e) in snap.entries.iter().enumerate() {
            let p = e.key.as_bytes();
            if s.starts_with(p) && best.is_none_or(|(_, l)| p.len() > l) {
                best = Some((i, p.len()));
            }
        }
        return best.map(|(i, _)| i);
    }
    if how == How::Reg {
        return snap
            .regexes(icase)
            .iter()
            .position(|r| r.as_ref().is_some_and(|r| r.is_match(s)));
    }
    snap.entries.iter().position(|e| {
        let p = e.key.as_bytes();
        match how {
            How::Str => eq(s, p),
            How::Beg => s.len() >= p.len() && eq(&s[..p.len()], p),
            How::End => s.len() >= p.len() && eq(&s[s.len() - p.len()..], p),
            How::Sub => {
                p.is_empty() || (s.len() >= p.len() && s.windows(p.len()).any(|w| eq(w, p)))
            }
            How::Dir => word(s, p, b"/?", icase),
            How::Dom => word(s, p, b"/?.:", icase),
            _ => false,
        }
    })
}
