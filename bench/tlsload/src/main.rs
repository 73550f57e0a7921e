//! tlsload: the load of HAProxy's TASK_HEAVY measurement.
//!
//! N *handshakers* connect to a TLS port in a loop and do a full handshake
//! each time (session resumption disabled, so every one costs the server a
//! key exchange and a signature), then drop the connection. Beside them, M
//! *cleartext clients* send keep-alive HTTP/1.1 requests to a plain port of
//! the same server, one at a time, and time each response. The question
//! is how much the handshakes hurt the cleartext clients' latency.
//!
//! Every loop is bounded by `--duration`; the first `--warmup` seconds are
//! run but not counted. Addresses must be on this machine (loopback).
//!
//! Output: the handshake rate (and handshake time seen by the client), the
//! cleartext request rate, and the cleartext latency avg/p50/p99/p99.9/max,
//! then one `RESULT key=value ...` line for scripts.
//!
//! Handshake sockets are closed with SO_LINGER 0 (a reset, no TIME_WAIT):
//! thousands of handshakes a second would otherwise exhaust the ephemeral
//! ports within a minute.

use std::io::{self, Read, Write};
use std::net::{SocketAddr, TcpStream, ToSocketAddrs};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use hdrhistogram::Histogram;
use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::client::Resumption;
use rustls::pki_types::{CertificateDer, ServerName, UnixTime};
use rustls::{ClientConfig, DigitallySignedStruct, SignatureScheme};

const USAGE: &str = "\
usage: tlsload [--tls ADDR] [--plain ADDR] [--handshakers N] [--clients M]
               [--duration S] [--warmup S] [--path P] [--host H] [--sni NAME]
               [--tls-version 1.2|1.3]

  --tls ADDR          TLS address for the handshake loops (e.g. 127.0.0.1:8443)
  --plain ADDR        cleartext HTTP address (e.g. 127.0.0.1:8080)
  --handshakers N     clients doing full TLS handshakes in a loop (default 0)
  --clients M         cleartext keep-alive clients (default 0)
  --duration S        seconds of load, warm-up included (default 10, max 3600)
  --warmup S          first seconds not counted (default 1)
  --path P            request path of the cleartext clients (default /)
  --host H            Host header (default: the --plain address)
  --sni NAME          server name sent in the handshakes (default localhost)
  --tls-version V     offer only TLS 1.2 or only 1.3 (default: both)";

struct Args {
    tls: Option<SocketAddr>,
    plain: Option<SocketAddr>,
    handshakers: usize,
    clients: usize,
    duration: Duration,
    warmup: Duration,
    path: String,
    host: Option<String>,
    sni: String,
    version: Option<String>,
}

fn parse_args() -> Result<Args, String> {
    let mut a = Args {
        tls: None,
        plain: None,
        handshakers: 0,
        clients: 0,
        duration: Duration::from_secs(10),
        warmup: Duration::from_secs(1),
        path: "/".into(),
        host: None,
        sni: "localhost".into(),
        version: None,
    };
    let mut it = std::env::args().skip(1);
    while let Some(k) = it.next() {
        if k == "-h" || k == "--help" {
            println!("{USAGE}");
            std::process::exit(0);
        }
        let v = it.next().ok_or_else(|| format!("{k} needs a value"))?;
        let addr = |v: &str| -> Result<SocketAddr, String> {
            v.to_socket_addrs()
                .map_err(|e| format!("{k} {v}: {e}"))?
                .next()
                .ok_or_else(|| format!("{k} {v}: no address"))
        };
        let num = |v: &str| -> Result<u64, String> {
            v.parse::<u64>()
                .map_err(|_| format!("{k}: not a number: {v}"))
        };
        match k.as_str() {
            "--tls" => a.tls = Some(addr(&v)?),
            "--plain" => a.plain = Some(addr(&v)?),
            "--handshakers" => a.handshakers = num(&v)? as usize,
            "--clients" => a.clients = num(&v)? as usize,
            "--duration" => a.duration = Duration::from_secs(num(&v)?.min(3600)),
            "--warmup" => a.warmup = Duration::from_secs(num(&v)?),
            "--path" => a.path = v,
            "--host" => a.host = Some(v),
            "--sni" => a.sni = v,
            "--tls-version" if v == "1.2" || v == "1.3" => a.version = Some(v),
            _ => return Err(format!("unknown option or value: {k} {v}\n{USAGE}")),
        }
    }
    if a.handshakers > 0 && a.tls.is_none() {
        return Err("--handshakers needs --tls".into());
    }
    if a.clients > 0 && a.plain.is_none() {
        return Err("--clients needs --plain".into());
    }
    if a.handshakers + a.clients == 0 {
        return Err(format!("nothing to run\n{USAGE}"));
    }
    if a.handshakers + a.clients > 10_000 {
        return Err("at most 10000 clients in all".into());
    }
    if a.warmup >= a.duration {
        a.warmup = Duration::ZERO;
    }
    Ok(a)
}

/// Accepts any certificate and skips signature checks: the load is on the
/// server, and the client should spend as little CPU as it can on this
/// shared machine. Never use this outside a benchmark.
#[derive(Debug)]
struct NoVerify(Vec<SignatureScheme>);

impl ServerCertVerifier for NoVerify {
    fn verify_server_cert(
        &self,
        _: &CertificateDer<'_>,
        _: &[CertificateDer<'_>],
        _: &ServerName<'_>,
        _: &[u8],
        _: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        Ok(ServerCertVerified::assertion())
    }
    fn verify_tls12_signature(
        &self,
        _: &[u8],
        _: &CertificateDer<'_>,
        _: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        Ok(HandshakeSignatureValid::assertion())
    }
    fn verify_tls13_signature(
        &self,
        _: &[u8],
        _: &CertificateDer<'_>,
        _: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        Ok(HandshakeSignatureValid::assertion())
    }
    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.0.clone()
    }
}

fn client_config(version: Option<&str>) -> Result<Arc<ClientConfig>, String> {
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let versions: &[&'static rustls::SupportedProtocolVersion] = match version {
        Some("1.2") => &[&rustls::version::TLS12],
        Some(_) => &[&rustls::version::TLS13],
        None => &[&rustls::version::TLS13, &rustls::version::TLS12],
    };
    let schemes = provider
        .signature_verification_algorithms
        .supported_schemes();
    let mut c = ClientConfig::builder_with_provider(provider)
        .with_protocol_versions(versions)
        .map_err(|e| e.to_string())?
        .dangerous()
        .with_custom_certificate_verifier(Arc::new(NoVerify(schemes)))
        .with_no_client_auth();
    // Full handshakes only.
    c.resumption = Resumption::disabled();
    c.enable_sni = true;
    Ok(Arc::new(c))
}

fn new_hist() -> Histogram<u64> {
    // 1 µs .. 100 s, 3 significant digits.
    Histogram::new_with_bounds(1, 100_000_000, 3)
        .unwrap_or_else(|_| Histogram::new(3).unwrap_or_else(|e| panic!("histogram: {e}")))
}

#[derive(Default)]
struct Tally {
    hist: Option<Histogram<u64>>,
    ok: u64,
    errors: u64,
    last_error: Option<String>,
}

impl Tally {
    fn new() -> Self {
        Tally {
            hist: Some(new_hist()),
            ..Tally::default()
        }
    }
    fn record(&mut self, counting: bool, d: Duration) {
        if !counting {
            return;
        }
        self.ok += 1;
        if let Some(h) = &mut self.hist {
            let us = (d.as_micros() as u64).clamp(1, 100_000_000);
            let _ = h.record(us);
        }
    }
    fn error(&mut self, counting: bool, e: String) {
        if counting {
            self.errors += 1;
        }
        self.last_error = Some(e);
    }
    fn merge(&mut self, o: Tally) {
        self.ok += o.ok;
        self.errors += o.errors;
        if o.last_error.is_some() {
            self.last_error = o.last_error;
        }
        if let (Some(a), Some(b)) = (&mut self.hist, &o.hist) {
            let _ = a.add(b);
        }
    }
}

struct Clock {
    start: Instant,
    warmup: Duration,
    end: Instant,
}

impl Clock {
    fn counting(&self, now: Instant) -> bool {
        now >= self.start + self.warmup
    }
    fn done(&self, now: Instant) -> bool {
        now >= self.end
    }
}

/// One full handshake: connect, complete it, send close_notify, reset.
fn handshake(
    addr: SocketAddr,
    cfg: &Arc<ClientConfig>,
    name: &ServerName<'static>,
) -> io::Result<()> {
    let mut sock = TcpStream::connect_timeout(&addr, Duration::from_secs(5))?;
    sock.set_nodelay(true)?;
    sock.set_read_timeout(Some(Duration::from_secs(5)))?;
    sock.set_write_timeout(Some(Duration::from_secs(5)))?;
    let mut conn =
        rustls::ClientConnection::new(Arc::clone(cfg), name.clone()).map_err(io::Error::other)?;
    while conn.is_handshaking() {
        let (rd, wr) = conn.complete_io(&mut sock)?;
        if rd == 0 && wr == 0 && conn.is_handshaking() {
            return Err(io::Error::new(
                io::ErrorKind::UnexpectedEof,
                "closed in handshake",
            ));
        }
    }
    conn.send_close_notify();
    let _ = conn.write_tls(&mut sock);
    // Reset instead of FIN: no TIME_WAIT left behind.
    let s2 = socket2::Socket::from(sock);
    let _ = s2.set_linger(Some(Duration::ZERO));
    Ok(())
}

fn handshaker(
    addr: SocketAddr,
    cfg: Arc<ClientConfig>,
    sni: String,
    clock: Arc<Clock>,
    stop: Arc<AtomicBool>,
) -> Tally {
    let mut t = Tally::new();
    let name = match ServerName::try_from(sni) {
        Ok(n) => n,
        Err(e) => {
            t.error(true, format!("bad --sni: {e}"));
            return t;
        }
    };
    loop {
        let t0 = Instant::now();
        if clock.done(t0) || stop.load(Ordering::Relaxed) {
            return t;
        }
        match handshake(addr, &cfg, &name) {
            Ok(()) => t.record(clock.counting(t0), t0.elapsed()),
            Err(e) => {
                t.error(clock.counting(t0), e.to_string());
                // Do not spin on a refused port.
                std::thread::sleep(Duration::from_millis(10));
            }
        }
    }
}

fn find(h: &[u8], needle: &[u8]) -> Option<usize> {
    h.windows(needle.len()).position(|w| w == needle)
}

/// Reads one response; returns whether the server keeps the connection.
fn read_response(sock: &mut TcpStream, buf: &mut Vec<u8>) -> io::Result<bool> {
    buf.clear();
    let mut chunk = [0u8; 16 * 1024];
    let head_end = loop {
        if let Some(p) = find(buf, b"\r\n\r\n") {
            break p + 4;
        }
        if buf.len() > 64 * 1024 {
            return Err(io::Error::new(
                io::ErrorKind::InvalidData,
                "response head too large",
            ));
        }
        let n = sock.read(&mut chunk)?;
        if n == 0 {
            return Err(io::Error::new(
                io::ErrorKind::UnexpectedEof,
                "closed before the response",
            ));
        }
        buf.extend_from_slice(&chunk[..n]);
    };
    let head = String::from_utf8_lossy(&buf[..head_end]).to_ascii_lowercase();
    if !head.starts_with("http/1.") {
        return Err(io::Error::new(
            io::ErrorKind::InvalidData,
            "not an HTTP response",
        ));
    }
    let mut len: Option<usize> = None;
    let mut close = head.starts_with("http/1.0");
    for line in head.split("\r\n").skip(1) {
        if let Some(v) = line.strip_prefix("content-length:") {
            len = v.trim().parse().ok();
        } else if let Some(v) = line.strip_prefix("connection:") {
            let v = v.trim();
            close = v.contains("close") || (close && !v.contains("keep-alive"));
        } else if line.starts_with("transfer-encoding:") {
            return Err(io::Error::new(
                io::ErrorKind::InvalidData,
                "chunked responses are not handled: serve a file with a length",
            ));
        }
    }
    let len = len.ok_or_else(|| io::Error::new(io::ErrorKind::InvalidData, "no content-length"))?;
    let mut have = buf.len() - head_end;
    while have < len {
        let n = sock.read(&mut chunk)?;
        if n == 0 {
            return Err(io::Error::new(
                io::ErrorKind::UnexpectedEof,
                "closed in the body",
            ));
        }
        have += n;
    }
    Ok(!close)
}

fn plain_connect(addr: SocketAddr) -> io::Result<TcpStream> {
    let s = TcpStream::connect_timeout(&addr, Duration::from_secs(5))?;
    s.set_nodelay(true)?;
    s.set_read_timeout(Some(Duration::from_secs(10)))?;
    s.set_write_timeout(Some(Duration::from_secs(10)))?;
    Ok(s)
}

fn cleartext(
    addr: SocketAddr,
    req: Arc<Vec<u8>>,
    clock: Arc<Clock>,
    stop: Arc<AtomicBool>,
) -> Tally {
    let mut t = Tally::new();
    let mut buf = Vec::with_capacity(32 * 1024);
    let mut sock: Option<TcpStream> = None;
    loop {
        let t0 = Instant::now();
        if clock.done(t0) || stop.load(Ordering::Relaxed) {
            return t;
        }
        let s = match sock.as_mut() {
            Some(s) => s,
            None => match plain_connect(addr) {
                Ok(s) => sock.insert(s),
                Err(e) => {
                    t.error(clock.counting(t0), format!("connect: {e}"));
                    std::thread::sleep(Duration::from_millis(10));
                    continue;
                }
            },
        };
        // The clock starts before the connect when there was none, as a
        // client would see it.
        let r = s.write_all(&req).and_then(|()| read_response(s, &mut buf));
        match r {
            Ok(keep) => {
                t.record(clock.counting(t0), t0.elapsed());
                if !keep {
                    sock = None;
                }
            }
            Err(e) => {
                t.error(clock.counting(t0), e.to_string());
                sock = None;
            }
        }
    }
}

fn ms(us: u64) -> String {
    format!("{:.3} ms", us as f64 / 1000.0)
}

fn main() {
    let args = match parse_args() {
        Ok(a) => a,
        Err(e) => {
            eprintln!("tlsload: {e}");
            std::process::exit(2);
        }
    };
    let cfg = match client_config(args.version.as_deref()) {
        Ok(c) => c,
        Err(e) => {
            eprintln!("tlsload: {e}");
            std::process::exit(2);
        }
    };
    let start = Instant::now();
    let clock = Arc::new(Clock {
        start,
        warmup: args.warmup,
        end: start + args.duration,
    });
    let stop = Arc::new(AtomicBool::new(false));
    let mut hs_threads = Vec::new();
    let mut cl_threads = Vec::new();
    if let Some(addr) = args.tls {
        for _ in 0..args.handshakers {
            let (cfg, sni, clock, stop2) = (
                Arc::clone(&cfg),
                args.sni.clone(),
                Arc::clone(&clock),
                Arc::clone(&stop),
            );
            let h = std::thread::Builder::new()
                .stack_size(256 * 1024)
                .spawn(move || handshaker(addr, cfg, sni, clock, stop2));
            match h {
                Ok(h) => hs_threads.push(h),
                Err(e) => {
                    eprintln!("tlsload: cannot start a thread: {e}");
                    stop.store(true, Ordering::Relaxed);
                    break;
                }
            }
        }
    }
    if let Some(addr) = args.plain {
        let host = args.host.clone().unwrap_or_else(|| addr.to_string());
        let req = Arc::new(
            format!(
                "GET {} HTTP/1.1\r\nHost: {host}\r\nUser-Agent: tlsload\r\n\r\n",
                args.path
            )
            .into_bytes(),
        );
        for _ in 0..args.clients {
            let (req, clock, stop2) = (Arc::clone(&req), Arc::clone(&clock), Arc::clone(&stop));
            let h = std::thread::Builder::new()
                .stack_size(256 * 1024)
                .spawn(move || cleartext(addr, req, clock, stop2));
            match h {
                Ok(h) => cl_threads.push(h),
                Err(e) => {
                    eprintln!("tlsload: cannot start a thread: {e}");
                    stop.store(true, Ordering::Relaxed);
                    break;
                }
            }
        }
    }
    let mut hs = Tally::new();
    for h in hs_threads {
        match h.join() {
            Ok(t) => hs.merge(t),
            Err(_) => hs.error(true, "a handshaker thread panicked".into()),
        }
    }
    let mut cl = Tally::new();
    for h in cl_threads {
        match h.join() {
            Ok(t) => cl.merge(t),
            Err(_) => cl.error(true, "a client thread panicked".into()),
        }
    }
    let secs = args
        .duration
        .saturating_sub(args.warmup)
        .as_secs_f64()
        .max(1e-9);
    println!(
        "tlsload: {:.0} s counted ({} s warm-up), {} handshakers -> {}, {} cleartext clients -> {}",
        secs,
        args.warmup.as_secs(),
        args.handshakers,
        args.tls
            .map(|a| a.to_string())
            .unwrap_or_else(|| "-".into()),
        args.clients,
        args.plain
            .map(|a| a.to_string())
            .unwrap_or_else(|| "-".into()),
    );
    let hh = hs.hist.take().unwrap_or_else(new_hist);
    let ch = cl.hist.take().unwrap_or_else(new_hist);
    let hs_rate = hs.ok as f64 / secs;
    let req_rate = cl.ok as f64 / secs;
    if args.handshakers > 0 {
        println!(
            "handshakes: {} ({:.1}/s), errors {}; handshake time avg {}, p50 {}, p99 {}",
            hs.ok,
            hs_rate,
            hs.errors,
            ms(hh.mean() as u64),
            ms(hh.value_at_quantile(0.50)),
            ms(hh.value_at_quantile(0.99)),
        );
        if let Some(e) = &hs.last_error {
            println!("  last handshake error: {e}");
        }
    }
    if args.clients > 0 {
        println!(
            "cleartext: {} requests ({:.1}/s), errors {}",
            cl.ok, req_rate, cl.errors
        );
        println!(
            "cleartext latency: avg {}, p50 {}, p99 {}, p99.9 {}, max {}",
            ms(ch.mean() as u64),
            ms(ch.value_at_quantile(0.50)),
            ms(ch.value_at_quantile(0.99)),
            ms(ch.value_at_quantile(0.999)),
            ms(ch.max()),
        );
        if let Some(e) = &cl.last_error {
            println!("  last cleartext error: {e}");
        }
    }
    println!(
        "RESULT hs_rate={:.1} hs_errors={} req_rate={:.1} req_errors={} avg_us={:.0} p50_us={} p99_us={} p999_us={} max_us={}",
        hs_rate,
        hs.errors,
        req_rate,
        cl.errors,
        ch.mean(),
        ch.value_at_quantile(0.50),
        ch.value_at_quantile(0.99),
        ch.value_at_quantile(0.999),
        ch.max(),
    );
}
