//! Compression of file answers: the precompressed sibling a client gets,
//! and the on-the-fly compression of a file a slice at a time.

use std::io;
use std::os::unix::fs::FileExt;
use std::sync::Arc;

use super::cache::OpenFile;
use crate::compress::{BodyCompressor, Coding, Policy};

/// Input bytes compressed per slice: one default buffer.
pub const SLICE: usize = 16 * 1024;

/// The file name suffix of a coding's precompressed sibling.
pub fn sibling_ext(c: Coding) -> &'static str {
    match c {
        Coding::Br => ".br",
        Coding::Zstd => ".zst",
        _ => ".gz",
    }
}

/// The precompressed sibling this request gets, if any: chosen from the
/// siblings present by the request's `Accept-Encoding` (HAProxy's rules,
/// see [`Policy::choose`], with the configured order for `*`). A request
/// with `Range` gets the file itself (its ranges count in its bytes).
pub fn pick_sibling(
    f: &OpenFile,
    buf: &[u8],
    head: &crate::http1::RequestHead,
) -> Option<(Coding, Arc<OpenFile>)> {
    if f.siblings.is_empty() || head.header(buf, "range").is_some() {
        return None;
    }
    let p = Policy {
        algos: f.siblings.iter().map(|(c, _)| *c).collect(),
        ..Policy::default()
    };
    let c = crate::compress::choose_any_h1(&p, buf, head)?;
    f.siblings.iter().find(|(s, _)| *s == c).cloned()
}

/// How a file answer is coded.
pub struct FilePlan {
    /// The file to send: the one asked for, or its precompressed sibling.
    pub file: Arc<OpenFile>,
    /// `Content-Encoding` of the sibling sent.
    pub sibling: Option<Coding>,
    /// Compress the file on the fly (a full 200 answer only).
    pub compress: Option<Coding>,
    /// Add `Vary: Accept-Encoding`: the file has siblings (whichever is
    /// sent), or it is compressed on the fly (as HAProxy, not otherwise).
    pub vary: bool,
}

/// Decides how the answer for `f` is coded: its precompressed sibling
/// when the client accepts one, else on-the-fly compression under the
/// proxies' `compression` policy (the same rules as for a server's
/// answer, with the file's type, length and ETag), else as it is.
#[inline]
pub fn plan_file(
    f: Arc<OpenFile>,
    policy: Option<&Policy>,
    buf: &[u8],
    head: &crate::http1::RequestHead,
) -> FilePlan {
    // The common file: no sibling, no compression policy.
    if f.siblings.is_empty() && policy.is_none() {
        return FilePlan {
            file: f,
            sibling: None,
            compress: None,
            vary: false,
        };
    }
    plan_coded(f, policy, buf, head)
}

/// [`plan_file`] for a file with siblings or under a policy.
#[inline(never)]
fn plan_coded(
    f: Arc<OpenFile>,
    policy: Option<&Policy>,
    buf: &[u8],
    head: &crate::http1::RequestHead,
) -> FilePlan {
    if let Some((c, s)) = pick_sibling(&f, buf, head) {
        return FilePlan {
            file: s,
            sibling: Some(c),
            compress: None,
            vary: true,
        };
    }
    let mut vary = !f.siblings.is_empty();
    let mut compress = None;
    if let Some(p) = policy {
        let coding = crate::compress::choose_h1(p, buf, head);
        let etag = f.validators.etag.as_bytes();
        let facts = crate::compress::ResponseFacts {
            http11: true,
            status: 200,
            length_known: f.validators.len > 0 && f.validators.len >= p.min_size,
            content_encoding: false,
            content_type: Some(f.content_type.as_bytes()),
            cache_control: &[],
            etags: &[etag],
        };
        match crate::compress::decide(p, coding, &facts) {
            crate::compress::Verdict::Compress(c) => {
                compress = Some(c);
                vary = true;
            }
            crate::compress::Verdict::AsIs => {}
        }
    }
    FilePlan {
        file: f,
        sibling: None,
        compress,
        vary,
    }
}

/// A generated body (a directory listing) compressed whole, when the
/// policy and the request call for it: (`Content-Encoding` value, bytes).
pub fn whole_body(
    policy: Option<&Policy>,
    buf: &[u8],
    head: &crate::http1::RequestHead,
    content_type: &[u8],
    body: &[u8],
) -> Option<(&'static str, Vec<u8>)> {
    let p = policy?;
    let coding = crate::compress::choose_h1(p, buf, head);
    let facts = crate::compress::ResponseFacts {
        http11: true,
        status: 200,
        length_known: !body.is_empty() && body.len() as u64 >= p.min_size,
        content_type: Some(content_type),
        ..crate::compress::ResponseFacts::default()
    };
    match crate::compress::decide(p, coding, &facts) {
        crate::compress::Verdict::Compress(c) => {
            let coded = crate::compress::compress_all(c, p.level, body).ok()?;
            Some((c.content_encoding()?, coded))
        }
        crate::compress::Verdict::AsIs => None,
    }
}

/// Compresses the next slice of `file[*pos..end]` into `out` (chunked),
/// and finishes the body at its end. Returns the input bytes read.
pub fn compress_slice(
    file: &OpenFile,
    pos: &mut u64,
    end: u64,
    comp: &mut BodyCompressor,
    out: &mut Vec<u8>,
) -> io::Result<usize> {
    let want = (end.saturating_sub(*pos)).min(SLICE as u64) as usize;
    let last = |n: usize| {
        if *pos + n as u64 >= end {
            crate::compress::Then::End
        } else {
            crate::compress::Then::More
        }
    };
    let mut n = 0;
    if want > 0 {
        match &file.small {
            Some(data) => {
                let s = (*pos as usize).min(data.len());
                let e = (s + want).min(data.len());
                n = e - s;
                if n > 0 {
                    comp.write(&data[s..e], last(n), out)?;
                }
            }
            None => {
                let mut buf = vec![0u8; want];
                n = file.file.read_at(&mut buf, *pos)?;
                if n > 0 {
                    comp.write(&buf[..n], last(n), out)?;
                }
            }
        }
        if n == 0 {
            // The file shrank under us: the body cannot be completed.
            return Err(io::Error::new(io::ErrorKind::UnexpectedEof, "file shrank"));
        }
        *pos += n as u64;
    }
    if *pos >= end {
        // (Already done when the last slice ended it; an empty body here.)
        comp.finish(out)?;
    }
    Ok(n)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_file_compresses_in_slices_to_its_content() {
        let d = std::env::temp_dir().join(format!("ebb-comp-{}", std::process::id()));
        let _ = std::fs::create_dir_all(&d);
        let content: Vec<u8> = (0..100_000u32)
            .map(|i| b"abcdefgh "[i as usize % 9])
            .collect();
        std::fs::write(d.join("big.txt"), &content).unwrap();
        let cfg = super::super::files::FilesConfig::new(&d);
        let super::super::cache::Found::File(f) =
            super::super::cache::lookup_blocking(&cfg, "/big.txt")
        else {
            panic!("not found");
        };
        let mut comp = BodyCompressor::new(Coding::Gzip, 1).unwrap();
        let (mut pos, mut out, mut slices) = (0, Vec::new(), 0);
        while !comp.is_finished() {
            let n =
                compress_slice(&f, &mut pos, content.len() as u64, &mut comp, &mut out).unwrap();
            assert!(n <= SLICE);
            slices += 1;
        }
        assert!(slices >= content.len() / SLICE);
        assert_eq!(crate::compress::gunzip_chunked(&out), content);
        let _ = std::fs::remove_dir_all(&d);
    }
}
