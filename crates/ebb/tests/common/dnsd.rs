//! The scripted DNS server of the resolver tests (`tests/dnsd.py`,
//! Python's standard library only): started on a zone the test rewrites
//! while it runs, with the queries it logged.

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use super::wait_until;

/// The scripted DNS server.
pub struct Dnsd {
    child: Child,
    pub port: u16,
    zone: PathBuf,
    lines: Arc<Mutex<Vec<String>>>,
}

impl Dnsd {
    pub fn start(dir: &Path, zone: &str) -> Dnsd {
        let path = dir.join("zone.json");
        std::fs::write(&path, zone).unwrap();
        let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/dnsd.py");
        let mut child = Command::new("python3")
            .arg(&script)
            .arg(&path)
            .arg("0")
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("python3 for the DNS server");
        let out = child.stdout.take().unwrap();
        let lines = Arc::new(Mutex::new(Vec::new()));
        let l2 = Arc::clone(&lines);
        std::thread::spawn(move || {
            for l in BufReader::new(out).lines().map_while(Result::ok) {
                l2.lock().unwrap().push(l);
            }
        });
        let mut port = 0;
        wait_until("dnsd listening", || {
            port = lines
                .lock()
                .unwrap()
                .iter()
                .find_map(|l| l.strip_prefix("dnsd: listening ")?.parse().ok())
                .unwrap_or(0);
            port != 0
        });
        Dnsd {
            child,
            port,
            zone: path,
            lines,
        }
    }

    /// Replaces the zone atomically (the server reads it at its next query).
    pub fn set(&self, zone: &str) {
        let tmp = self.zone.with_extension("tmp");
        std::fs::write(&tmp, zone).unwrap();
        std::fs::rename(&tmp, &self.zone).unwrap();
    }

    /// Returns once every line the server printed before now has been
    /// read: it asks the server a query of its own (a fresh name) and waits
    /// for that query's line, which comes after them. The server prints a
    /// query's line before it answers, but this process reads the lines
    /// on another thread: ebb may act on an answer whose line is not read
    /// yet (a count taken then missed it).
    pub fn sync(&self) {
        static N: AtomicUsize = AtomicUsize::new(0);
        let name = format!("sync-{}.test", N.fetch_add(1, Ordering::SeqCst));
        // Header (id 0x5e5e, RD, one question), the name, type A, class IN.
        let mut q = vec![0x5e, 0x5e, 1, 0, 0, 1, 0, 0, 0, 0, 0, 0];
        for label in name.split('.') {
            q.push(label.len() as u8);
            q.extend_from_slice(label.as_bytes());
        }
        q.extend_from_slice(&[0, 0, 1, 0, 1]);
        let u = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
        u.send_to(&q, ("127.0.0.1", self.port)).unwrap();
        wait_until(&format!("dnsd logged {name}"), || {
            self.lines
                .lock()
                .unwrap()
                .iter()
                .any(|l| l.contains(&format!("query {name} ")))
        });
    }

    /// Queries logged so far that contain `what` (call [`Dnsd::sync`]
    /// first to count those ebb may have been answered for).
    pub fn count(&self, what: &str) -> usize {
        self.lines
            .lock()
            .unwrap()
            .iter()
            .filter(|l| l.starts_with("dnsd: query") && l.contains(what))
            .count()
    }
}

impl Drop for Dnsd {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
