//! The open-file cache and the disk lookup it fronts.
//!
//! [`lookup_blocking`] does everything a request for a file needs from the
//! disk: resolve the path safely, open the file, stat it, and read it whole
//! when it is small. It runs on the blocking pool. Its answer is kept in a
//! per-thread [`FileCache`] for [`FRESH_MS`], so a hot file costs no system
//! call but the `write` (or `sendfile`) of its bytes: this is the "known to
//! be cached" case in which the event loop serves without the pool.
//!
//! Each thread has its own cache (no lock on the request path); a file hot
//! on two threads is opened twice, which costs one descriptor per thread.

use std::cell::Cell;
use std::collections::HashMap;
use std::fs::File;
use std::rc::Rc;
use std::sync::Arc;

use super::files::{
    content_type, read_dir_listing, resolve, FilesConfig, Refusal, Resolved, Validators,
};
use sched::{ticks, Tick};

/// How long a lookup stays valid, in ms. nginx's `open_file_cache_valid`
/// defaults to 60 s; ebb revalidates every second so an edited file shows
/// within a second, at the cost of one pool job per hot file per second per
/// thread.
pub const FRESH_MS: u32 = 1000;

/// Files up to this size are read into memory and served from there with
/// the head in one `writev`; larger ones are sent with `sendfile`. 32 KiB
/// covers typical HTML, CSS and small images.
pub const SMALL_FILE: u64 = 32 * 1024;

/// Entries per thread before the cache starts evicting. With small files
/// held in memory this bounds a thread's cache near 16 MiB.
pub const CACHE_ENTRIES: usize = 512;

/// An open file ready to serve.
#[derive(Debug)]
pub struct OpenFile {
    pub file: File,
    pub validators: Validators,
    pub content_type: String,
    /// The whole content when the file is small.
    pub small: Option<Vec<u8>>,
    /// `precompressed`: the siblings found beside it (`F.gz`, `F.br`,
    /// `F.zst`), in the configured order.
    pub siblings: Vec<(crate::compress::Coding, Arc<OpenFile>)>,
    /// The answer fields that are the file's own, built once.
    pub fields: FileFields,
}

/// The fields of a file's answer that depend on the file alone (and its
/// backend's `max-age`), built when its cache entry is filled rather than
/// for every answer: `Content-Type`, `Last-Modified`, `ETag`,
/// `Accept-Ranges: bytes` and `Cache-Control: max-age=N` when configured,
/// in that order, as a field list and in both muxes' forms
/// ([`crate::stream::msg::Prepared`]). A field that is not valid (a name
/// that is not a token, a value with a control byte) is left out of all
/// three, as the HTTP/1 writer would leave it out.
#[derive(Debug, Default)]
pub struct FileFields {
    pub list: crate::proxy::PreparedFields,
    /// The `max-age` the fields were built with.
    pub max_age: Option<u32>,
}

impl FileFields {
    /// The fields of a file of type `content_type` with validators `v`.
    pub fn new(content_type: &str, v: &Validators, max_age: Option<u32>) -> FileFields {
        let mut f = FileFields {
            max_age,
            ..FileFields::default()
        };
        f.push(b"Content-Type", content_type.as_bytes());
        f.push(b"Last-Modified", v.last_modified.as_bytes());
        f.push(b"ETag", v.etag.as_bytes());
        f.push(b"Accept-Ranges", b"bytes");
        if let Some(a) = max_age {
            f.push(b"Cache-Control", format!("max-age={a}").as_bytes());
        }
        f
    }

    fn push(&mut self, name: &[u8], value: &[u8]) {
        self.list.push(name, value);
    }

    /// The fields as a head carries them, prepared.
    pub fn prepared(&self) -> crate::stream::msg::Prepared<'_> {
        self.list.prepared()
    }
}

/// What a path maps to, as the connection needs it.
#[derive(Debug, Clone)]
pub enum Found {
    File(Arc<OpenFile>),
    /// A directory asked for without its slash: 301 there.
    AddSlash(String),
    /// A generated directory listing (never cached).
    Listing(Arc<String>),
    Refused(Refusal),
}

/// Resolves, opens and (for small files) reads. Blocking: pool only.
pub fn lookup_blocking(cfg: &FilesConfig, clean: &str) -> Found {
    match resolve(cfg, clean) {
        Err(r) => Found::Refused(r),
        Ok(Resolved::AddSlash { location }) => Found::AddSlash(location),
        Ok(Resolved::Listing { path }) => match read_dir_listing(&path, clean) {
            Ok(html) => Found::Listing(Arc::new(html)),
            Err(_) => Found::Refused(Refusal::Forbidden),
        },
        Ok(Resolved::File { path, .. }) => {
            let ct = content_type(&path);
            let mut f = match open_file(path.clone(), ct.clone(), cfg.max_age) {
                Ok(f) => f,
                Err(r) => return Found::Refused(r),
            };
            for &c in &cfg.precompressed {
                let mut p = path.clone().into_os_string();
                p.push(super::comp::sibling_ext(c));
                let p = std::path::PathBuf::from(p);
                // A symlinked sibling could lead out of the root: only
                // with `follow-symlinks on`.
                let link = std::fs::symlink_metadata(&p).is_ok_and(|m| m.file_type().is_symlink());
                if link && !cfg.follow_symlinks {
                    continue;
                }
                // A sibling that cannot be opened is simply not there.
                if let Ok(s) = open_file(p, ct.clone(), cfg.max_age) {
                    f.siblings.push((c, Arc::new(s)));
                }
            }
            Found::File(Arc::new(f))
        }
    }
}

/// Opens, stats and (when small) reads one file.
fn open_file(
    path: std::path::PathBuf,
    content_type: String,
    max_age: Option<u32>,
) -> Result<OpenFile, Refusal> {
    let file = match File::open(&path) {
        Ok(f) => f,
        Err(e) if e.kind() == std::io::ErrorKind::PermissionDenied => {
            return Err(Refusal::Forbidden)
        }
        Err(_) => return Err(Refusal::NotFound),
    };
    // Stat the opened file, not the path: the two may differ if the file
    // was replaced in between.
    let meta = match file.metadata() {
        Ok(m) if m.is_file() => m,
        _ => return Err(Refusal::NotFound),
    };
    let validators = Validators::of(&meta);
    let small = if meta.len() <= SMALL_FILE {
        let mut v = Vec::with_capacity(meta.len() as usize);
        use std::io::Read;
        match (&file).take(SMALL_FILE + 1).read_to_end(&mut v) {
            // A file that changed size under us: serve what the
            // validators say, or refuse.
            Ok(n) if n as u64 == meta.len() => Some(v),
            _ => return Err(Refusal::NotFound),
        }
    } else {
        None
    };
    Ok(OpenFile {
        fields: FileFields::new(&content_type, &validators, max_age),
        content_type,
        file,
        validators,
        small,
        siblings: Vec::new(),
    })
}

/// A per-thread map from (backend, clean path) to a recent lookup.
///
/// A lookup hashes once, the path: the backends are few (those with
/// `serve-files` a thread has served), so their maps sit in a list
/// searched by id rather than in a map of their own. The paths are
/// client input, so their map keeps std's keyed hash (SipHash with a
/// per-process random key): no chosen set of paths collides on purpose.
/// The entry found last is kept beside the maps with its key, so a run
/// of requests for the same file (a hot page, a benchmark) compares the
/// path once instead of hashing it (a few instructions against a few
/// hundred); any [`FileCache::put`] forgets it.
pub struct FileCache {
    /// One map per backend (by backend id), keyed by clean path.
    maps: Vec<(u64, PathMap)>,
    len: usize,
    /// The entry [`FileCache::get`] found last, and its backend; its
    /// path is `last_path` (a buffer reused from one to the next).
    last: Option<(u64, Rc<Entry>)>,
    last_path: Vec<u8>,
}

/// One backend's lookups, by clean path.
type PathMap = HashMap<Vec<u8>, Rc<Entry>>;

/// A lookup kept: its answer, when it was made, and since when a new
/// lookup of the same path is on the pool (`None`: none is).
struct Entry {
    found: Found,
    at: Tick,
    checking: Cell<Option<Tick>>,
}

impl Default for FileCache {
    fn default() -> Self {
        FileCache::new()
    }
}

impl FileCache {
    pub fn new() -> FileCache {
        FileCache {
            maps: Vec::new(),
            len: 0,
            last: None,
            last_path: Vec::new(),
        }
    }

    /// The entry for this path while it is fresh. Once it is not, the
    /// first caller gets `None` and looks the path up again (its
    /// [`FileCache::put`] replaces the entry); the callers that come
    /// while that lookup is on the pool are served the entry it replaces,
    /// for at most another [`FRESH_MS`] (after which the next caller looks
    /// it up again). So a hot file costs one lookup per [`FRESH_MS`], not
    /// one per request arriving while the lookup runs.
    #[inline]
    pub fn get(&mut self, backend: u64, clean: &[u8], now: Tick) -> Option<Found> {
        let e = match &self.last {
            Some((b, e)) if *b == backend && self.last_path == clean => e,
            _ => {
                let e = Rc::clone(self.map_of(backend)?.get(clean)?);
                self.last_path.clear();
                self.last_path.extend_from_slice(clean);
                &self.last.insert((backend, e)).1
            }
        };
        let fresh = |since: Tick| !ticks::is_expired(ticks::add(since, FRESH_MS), now);
        if fresh(e.at) || e.checking.get().is_some_and(fresh) {
            return Some(e.found.clone());
        }
        e.checking.set(Some(now));
        None
    }

    /// The map of one backend's paths, if it has one.
    fn map_of(&mut self, backend: u64) -> Option<&mut PathMap> {
        self.maps
            .iter_mut()
            .find(|(id, _)| *id == backend)
            .map(|(_, m)| m)
    }

    /// Remembers a lookup made at `now` (listings are not kept).
    pub fn put(&mut self, backend: u64, clean: String, found: &Found, now: Tick) {
        if matches!(found, Found::Listing(_)) {
            return;
        }
        // The entry found last may be the one replaced or evicted.
        self.last = None;
        if self.len >= CACHE_ENTRIES {
            // Drop stale entries first; if all are fresh, drop everything:
            // a working set larger than the cache gains little from it.
            for (_, m) in &mut self.maps {
                m.retain(|_, e| !ticks::is_expired(ticks::add(e.at, FRESH_MS), now));
            }
            self.maps.retain(|(_, m)| !m.is_empty());
            self.len = self.maps.iter().map(|(_, m)| m.len()).sum();
            if self.len >= CACHE_ENTRIES {
                self.maps.clear();
                self.len = 0;
            }
        }
        if self.map_of(backend).is_none() {
            self.maps.push((backend, HashMap::new()));
        }
        let Some(m) = self.map_of(backend) else {
            return;
        };
        let e = Rc::new(Entry {
            found: found.clone(),
            at: now,
            checking: Cell::new(None),
        });
        if m.insert(clean.into_bytes(), e).is_none() {
            self.len += 1;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_stale_entry_is_looked_up_once_and_served_meanwhile() {
        let mut c = FileCache::new();
        let f = Found::Refused(Refusal::NotFound);
        c.put(0, "/a".into(), &f, 100);
        let stale = 100 + FRESH_MS + 1;
        // The first caller past freshness looks it up again; the others
        // are served the old entry while that lookup runs.
        assert!(c.get(0, b"/a", stale).is_none());
        assert!(c.get(0, b"/a", stale).is_some());
        assert!(c.get(0, b"/a", stale + FRESH_MS - 1).is_some());
        // A lookup that never came back is made again.
        assert!(c.get(0, b"/a", stale + FRESH_MS + 1).is_none());
        // The new lookup's answer is fresh for a second.
        c.put(0, "/a".into(), &f, stale + FRESH_MS + 2);
        assert!(c.get(0, b"/a", stale + FRESH_MS + 3).is_some());
        assert!(c.get(0, b"/a", stale + 2 * FRESH_MS + 3).is_none());
    }

    #[test]
    fn the_entry_found_last_is_the_maps_until_a_put() {
        let mut c = FileCache::new();
        let nf = Found::Refused(Refusal::NotFound);
        let fb = Found::Refused(Refusal::Forbidden);
        c.put(0, "/a".into(), &nf, 100);
        c.put(0, "/b".into(), &fb, 100);
        let refusal = |f: Option<Found>| match f {
            Some(Found::Refused(r)) => Some(r),
            _ => None,
        };
        assert_eq!(refusal(c.get(0, b"/a", 101)), Some(Refusal::NotFound));
        // Same path, other backend or other path: not the one kept.
        assert!(c.get(1, b"/a", 101).is_none());
        assert_eq!(refusal(c.get(0, b"/b", 101)), Some(Refusal::Forbidden));
        assert_eq!(refusal(c.get(0, b"/b", 102)), Some(Refusal::Forbidden));
        // A new lookup of the path kept replaces it.
        c.put(0, "/b".into(), &nf, 103);
        assert_eq!(refusal(c.get(0, b"/b", 104)), Some(Refusal::NotFound));
        // Staleness is the entry's, whichever way it is reached.
        let stale = 103 + FRESH_MS + 1;
        assert!(c.get(0, b"/b", stale).is_none());
        assert!(c.get(0, b"/b", stale).is_some());
        assert!(c.get(0, b"/a", stale).is_none());
        assert!(c.get(0, b"/b", stale).is_some());
    }

    #[test]
    fn lookups_are_fresh_for_a_second_and_bounded() {
        let mut c = FileCache::new();
        let f = Found::Refused(Refusal::NotFound);
        c.put(0, "/a".into(), &f, 100);
        assert!(c.get(0, b"/a", 100 + FRESH_MS - 1).is_some());
        assert!(c.get(0, b"/a", 100 + FRESH_MS + 1).is_none());
        assert!(c.get(1, b"/a", 100).is_none());
        for i in 0..(CACHE_ENTRIES * 3) {
            c.put(0, format!("/{i}"), &f, 5000);
        }
        assert!(c.len <= CACHE_ENTRIES);
    }

    #[test]
    fn a_files_own_fields_are_built_once_in_each_form() {
        let d = std::env::temp_dir().join(format!("ebb-cache-f-{}", std::process::id()));
        let _ = std::fs::create_dir_all(&d);
        std::fs::write(d.join("a.html"), "<p>hi</p>").unwrap();
        let mut cfg = FilesConfig::new(&d);
        cfg.max_age = Some(60);
        let Found::File(f) = lookup_blocking(&cfg, "/a.html") else {
            panic!("not a file");
        };
        let v = &f.validators;
        let want: Vec<(&[u8], &[u8])> = vec![
            (b"Content-Type", b"text/html; charset=utf-8"),
            (b"Last-Modified", v.last_modified.as_bytes()),
            (b"ETag", v.etag.as_bytes()),
            (b"Accept-Ranges", b"bytes"),
            (b"Cache-Control", b"max-age=60"),
        ];
        assert_eq!(f.fields.list.fields().iter().collect::<Vec<_>>(), want);
        assert_eq!(f.fields.max_age, Some(60));
        // The HTTP/1 lines are those the writer makes of the list; the
        // HTTP/2 list has the same fields, names in lower case.
        let p = f.fields.prepared();
        let mut h1 = Vec::new();
        for (n, val) in &want {
            h1.extend_from_slice(&[*n, b": ", val, b"\r\n"].concat());
        }
        assert_eq!(p.h1, &h1[..]);
        let h2: Vec<_> = crate::h2::hpack::Encoder::list_fields(p.h2)
            .map(|(n, val)| (n.to_vec(), val.to_vec()))
            .collect();
        let lower: Vec<_> = want
            .iter()
            .map(|(n, val)| (n.to_ascii_lowercase(), val.to_vec()))
            .collect();
        assert_eq!(h2, lower);
        // No max-age: no Cache-Control; a value with a control byte is
        // left out of every form.
        let bad = FileFields::new("text/plain\r\nX: y", v, None);
        assert_eq!(bad.list.fields().len(), 3);
        assert!(!bad.prepared().h1.windows(2).any(|w| w == b"X:"));
        assert_eq!(
            crate::h2::hpack::Encoder::list_fields(bad.prepared().h2).count(),
            3
        );
        let _ = std::fs::remove_dir_all(&d);
    }

    #[test]
    fn small_files_are_read_whole_and_large_ones_left_open() {
        let d = std::env::temp_dir().join(format!("ebb-cache-{}", std::process::id()));
        let _ = std::fs::create_dir_all(&d);
        std::fs::write(d.join("s.css"), "body{}").unwrap();
        std::fs::write(d.join("l.bin"), vec![7u8; (SMALL_FILE + 1) as usize]).unwrap();
        let cfg = FilesConfig::new(&d);
        match lookup_blocking(&cfg, "/s.css") {
            Found::File(f) => {
                assert_eq!(f.small.as_deref(), Some(&b"body{}"[..]));
                assert_eq!(f.content_type, "text/css; charset=utf-8");
            }
            other => panic!("{other:?}"),
        }
        match lookup_blocking(&cfg, "/l.bin") {
            Found::File(f) => {
                assert!(f.small.is_none());
                assert_eq!(f.validators.len, SMALL_FILE + 1);
            }
            other => panic!("{other:?}"),
        }
        assert!(matches!(
            lookup_blocking(&cfg, "/nope"),
            Found::Refused(Refusal::NotFound)
        ));
        let _ = std::fs::remove_dir_all(&d);
    }
}
