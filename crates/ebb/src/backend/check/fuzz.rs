//! For the `check_reply` fuzz target (see `fuzz/`): a check's
//! probe run against a script of the server's answer instead of a socket,
//! read in pieces of a given size, as a server may send it.

use std::io::{Read, Write};
use std::sync::Arc;
use std::time::{Duration, Instant};

use super::{Probe, Verdict, Wire};

/// A server's answer, read in pieces of `step` bytes; what is written to
/// it is dropped.
struct Script {
    data: Arc<[u8]>,
    pos: usize,
    step: usize,
}

impl Read for Script {
    fn read(&mut self, out: &mut [u8]) -> std::io::Result<usize> {
        let rest = self.data.get(self.pos..).unwrap_or_default();
        let n = rest.len().min(out.len()).min(self.step);
        out[..n].copy_from_slice(&rest[..n]);
        self.pos += n;
        Ok(n)
    }
}

impl Write for Script {
    fn write(&mut self, b: &[u8]) -> std::io::Result<usize> {
        Ok(b.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

impl Wire for Script {}

/// Runs `probe` (of backend `be`) against the answer `answer`, read in
/// pieces of `step` bytes; `h2`: the server speaks HTTP/2. None for a
/// probe that reads no answer (external checks).
pub fn run_probe(probe: &Probe, be: &str, h2: bool, answer: &[u8], step: usize) -> Option<Verdict> {
    let answer: Arc<[u8]> = answer.into();
    let script = || Script {
        data: Arc::clone(&answer),
        pos: 0,
        step: step.max(1),
    };
    let timeout = Duration::from_secs(60);
    Some(match probe {
        Probe::Http(p) => super::http::run_steps(
            p,
            &std::cell::Cell::new(Instant::now()),
            timeout,
            false,
            (be, "s", Some("UP 1/2")),
            true,
            &mut |_| -> Result<Box<dyn Wire>, Verdict> {
                Ok(if h2 {
                    Box::new(crate::backend::h2check::H2Wire::new(
                        Box::new(script()),
                        false,
                    ))
                } else {
                    Box::new(script())
                })
            },
        ),
        Probe::Tcp(t) => {
            let start = std::cell::Cell::new(Instant::now());
            crate::backend::tcpcheck::run_steps(t, &start, timeout, false, ("", ""), &mut |_| {
                Ok(Box::new(script()))
            })
        }
        Probe::Ext(_) => return None,
    })
}
