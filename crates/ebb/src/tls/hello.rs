//! A look at the client's first flight before rustls handles it: the
//! versions the client offers and the name it asks for.
//!
//! Sans-IO. rustls checks a ClientHello's extensions before its version,
//! so a TLS 1.0 client (which sends no signature_algorithms extension)
//! would get `handshake_failure` and a log saying so. Reading the hello
//! first lets the server answer as RFC 8446 §4.2.1 / RFC 5246 §E.1 say
//! (`protocol_version`), refuse an unknown name with `unrecognized_name`
//! (RFC 6066 §3) for `strict-sni`, and name the SNI in every failed
//! handshake's log line, even when rustls never got as far as reading it.

/// What the bytes received so far hold.
#[derive(Debug, PartialEq, Eq)]
pub enum Sniff {
    /// The ClientHello is not complete yet.
    Need,
    /// Not a TLS handshake record holding a ClientHello (plaintext HTTP,
    /// an SSLv2 hello, garbage): rustls deals with it.
    NotHello,
    Hello(HelloInfo),
}

#[derive(Debug, PartialEq, Eq, Clone)]
pub struct HelloInfo {
    /// The record layer version of the first record (for an alert's own
    /// record header).
    pub record_version: u16,
    /// `legacy_version` of the hello.
    pub legacy_version: u16,
    /// The supported_versions extension (RFC 8446 §4.2.1), GREASE values
    /// removed; `None` when absent.
    pub supported_versions: Option<Vec<u16>>,
    /// The host_name of the server_name extension.
    pub sni: Option<String>,
    /// The client's preferred cipher suite (first non-GREASE one).
    pub first_suite: Option<u16>,
}

/// TLS protocol version numbers.
pub const TLS10: u16 = 0x0301;
pub const TLS12: u16 = 0x0303;
pub const TLS13: u16 = 0x0304;

impl HelloInfo {
    /// Whether the client offers `v`. Without supported_versions, a client
    /// offers every version up to `legacy_version` (RFC 5246 §E.1).
    pub fn offers(&self, v: u16) -> bool {
        match &self.supported_versions {
            Some(list) => list.contains(&v),
            None => v <= self.legacy_version && v >= TLS10,
        }
    }

    /// The highest version offered, for messages.
    pub fn max_version(&self) -> u16 {
        match &self.supported_versions {
            Some(list) => list.iter().copied().max().unwrap_or(0),
            None => self.legacy_version,
        }
    }
}

/// A version number as people write it.
pub fn version_name(v: u16) -> String {
    match v {
        0x0300 => "SSLv3".into(),
        0x0301 => "TLSv1.0".into(),
        0x0302 => "TLSv1.1".into(),
        0x0303 => "TLSv1.2".into(),
        0x0304 => "TLSv1.3".into(),
        v => format!("0x{v:04x}"),
    }
}

/// Largest hello handled here (bytes of handshake message); a bigger one is
/// left to rustls.
const MAX_HELLO: usize = 64 * 1024;

/// Reads the ClientHello from the start of a connection's bytes.
pub fn sniff(buf: &[u8]) -> Sniff {
    // Gather the handshake records' payload until the message is complete.
    let mut msg: Vec<u8> = Vec::new();
    let mut pos = 0;
    let mut record_version = 0;
    loop {
        let Some(hdr) = buf.get(pos..pos + 5) else {
            return if buf.first().is_some_and(|&b| b != 0x16) {
                Sniff::NotHello
            } else {
                Sniff::Need
            };
        };
        if hdr[0] != 0x16 || hdr[1] != 3 {
            return Sniff::NotHello;
        }
        if pos == 0 {
            record_version = u16::from_be_bytes([hdr[1], hdr[2]]);
        }
        let len = u16::from_be_bytes([hdr[3], hdr[4]]) as usize;
        if len == 0 || len > 16384 + 2048 {
            return Sniff::NotHello;
        }
        let Some(frag) = buf.get(pos + 5..pos + 5 + len) else {
            return Sniff::Need;
        };
        msg.extend_from_slice(frag);
        pos += 5 + len;
        if msg.len() >= 4 {
            if msg[0] != 1 {
                return Sniff::NotHello;
            }
            let mlen = (msg[1] as usize) << 16 | (msg[2] as usize) << 8 | msg[3] as usize;
            if mlen > MAX_HELLO {
                return Sniff::NotHello;
            }
            if msg.len() >= 4 + mlen {
                return match parse_hello(&msg[4..4 + mlen], record_version) {
                    Some(h) => Sniff::Hello(h),
                    None => Sniff::NotHello,
                };
            }
        }
    }
}

/// A cursor over a message: every read is bounds-checked.
struct Rd<'a>(&'a [u8]);

impl<'a> Rd<'a> {
    fn take(&mut self, n: usize) -> Option<&'a [u8]> {
        if self.0.len() < n {
            return None;
        }
        let (a, b) = self.0.split_at(n);
        self.0 = b;
        Some(a)
    }
    fn u8(&mut self) -> Option<u8> {
        self.take(1).map(|b| b[0])
    }
    fn u16(&mut self) -> Option<u16> {
        self.take(2).map(|b| u16::from_be_bytes([b[0], b[1]]))
    }
    fn vec8(&mut self) -> Option<&'a [u8]> {
        let n = self.u8()? as usize;
        self.take(n)
    }
    fn vec16(&mut self) -> Option<&'a [u8]> {
        let n = self.u16()? as usize;
        self.take(n)
    }
}

fn is_grease(v: u16) -> bool {
    v & 0x0f0f == 0x0a0a && (v >> 8) == (v & 0xff)
}

fn parse_hello(body: &[u8], record_version: u16) -> Option<HelloInfo> {
    let mut r = Rd(body);
    let legacy_version = r.u16()?;
    r.take(32)?; // random
    r.vec8()?; // session id
    let mut suites = Rd(r.vec16()?);
    let mut first_suite = None;
    while let Some(c) = suites.u16() {
        if !is_grease(c) {
            first_suite = Some(c);
            break;
        }
    }
    r.vec8()?; // compression methods
    let mut info = HelloInfo {
        record_version,
        legacy_version,
        supported_versions: None,
        sni: None,
        first_suite,
    };
    if r.0.is_empty() {
        return Some(info); // no extensions (old clients)
    }
    let mut exts = Rd(r.vec16()?);
    while !exts.0.is_empty() {
        let ty = exts.u16()?;
        let mut data = Rd(exts.vec16()?);
        match ty {
            0 => {
                let mut list = Rd(data.vec16()?);
                while !list.0.is_empty() {
                    let kind = list.u8()?;
                    let name = list.vec16()?;
                    if kind == 0 && info.sni.is_none() {
                        // Shown in logs: keep printable ASCII only.
                        let s: String = name
                            .iter()
                            .map(|&b| if b.is_ascii_graphic() { b as char } else { '?' })
                            .collect();
                        info.sni = Some(s);
                    }
                }
            }
            43 => {
                let mut list = Rd(data.vec8()?);
                let mut vs = Vec::new();
                while !list.0.is_empty() {
                    let v = list.u16()?;
                    if !is_grease(v) {
                        vs.push(v);
                    }
                }
                info.supported_versions = Some(vs);
            }
            _ => {}
        }
    }
    Some(info)
}

/// A fatal alert record (RFC 8446 §6; level 2 = fatal).
pub fn alert_record(record_version: u16, description: u8) -> [u8; 7] {
    let v = if (0x0300..=TLS12).contains(&record_version) {
        record_version
    } else {
        TLS12
    };
    let [a, b] = v.to_be_bytes();
    [0x15, a, b, 0, 2, 2, description]
}

/// A server's look at the client's hello before rustls handles it (see
/// this module): `Err((alert, why))` refuses the handshake with
/// that alert; `Ok(Some(config))` runs it with another configuration
/// (same certificates and sessions, e.g. another suite order).
pub trait HelloGate: Send + Sync {
    fn check(
        &self,
        hello: &HelloInfo,
    ) -> Result<Option<std::sync::Arc<rustls::ServerConfig>>, (u8, String)>;

    /// The client-certificate verifier of the configuration this hello
    /// gets (`bind ... verify`, or its `crt-list` line's), to give a
    /// resumed session its verify result back.
    fn client_auth(
        &self,
        _hello: &HelloInfo,
    ) -> Option<std::sync::Arc<crate::tls::clientauth::ClientAuth>> {
        None
    }

    /// The certificate this hello gets, as far as the hello says (a
    /// resumed session's: no certificate is chosen in its handshake).
    fn own_cert(&self, _hello: &HelloInfo) -> Option<std::sync::Arc<rustls::sign::CertifiedKey>> {
        None
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// A ClientHello record with the given versions and SNI, split into
    /// records of at most `frag` bytes.
    pub(crate) fn hello(
        legacy: u16,
        versions: Option<&[u16]>,
        sni: Option<&str>,
        frag: usize,
    ) -> Vec<u8> {
        let mut body = Vec::new();
        body.extend_from_slice(&legacy.to_be_bytes());
        body.extend_from_slice(&[7; 32]);
        body.push(0);
        body.extend_from_slice(&[0, 2, 0xc0, 0x2f]);
        body.extend_from_slice(&[1, 0]);
        let mut exts = Vec::new();
        if let Some(n) = sni {
            let n = n.as_bytes();
            let l = n.len() as u16;
            exts.extend_from_slice(&[0, 0]);
            exts.extend_from_slice(&(l + 5).to_be_bytes());
            exts.extend_from_slice(&(l + 3).to_be_bytes());
            exts.push(0);
            exts.extend_from_slice(&l.to_be_bytes());
            exts.extend_from_slice(n);
        }
        if let Some(vs) = versions {
            exts.extend_from_slice(&[0, 43]);
            exts.extend_from_slice(&(vs.len() as u16 * 2 + 1).to_be_bytes());
            exts.push(vs.len() as u8 * 2);
            for v in vs {
                exts.extend_from_slice(&v.to_be_bytes());
            }
        }
        body.extend_from_slice(&(exts.len() as u16).to_be_bytes());
        body.extend_from_slice(&exts);
        let mut msg = vec![1, 0];
        msg.extend_from_slice(&(body.len() as u16).to_be_bytes());
        msg.extend_from_slice(&body);
        let mut out = Vec::new();
        for c in msg.chunks(frag) {
            out.extend_from_slice(&[0x16, 3, 1]);
            out.extend_from_slice(&(c.len() as u16).to_be_bytes());
            out.extend_from_slice(c);
        }
        out
    }

    #[test]
    fn reads_versions_and_sni_from_whole_and_split_hellos() {
        for frag in [1000, 7, 1] {
            let h = hello(TLS12, Some(&[0x1a1a, TLS13, TLS12]), Some("a.test"), frag);
            for cut in 0..h.len() {
                assert_eq!(sniff(&h[..cut]), Sniff::Need, "cut {cut} frag {frag}");
            }
            let Sniff::Hello(i) = sniff(&h) else {
                panic!("no hello")
            };
            assert_eq!(i.sni.as_deref(), Some("a.test"));
            assert_eq!(i.supported_versions, Some(vec![TLS13, TLS12]));
            assert!(i.offers(TLS13) && i.offers(TLS12) && !i.offers(TLS10));
            assert_eq!(i.record_version, 0x0301);
            assert_eq!(i.first_suite, Some(0xc02f));
        }
        let Sniff::Hello(i) = sniff(&hello(0x0301, None, None, 1000)) else {
            panic!("no hello")
        };
        assert!(i.offers(TLS10) && !i.offers(TLS12));
        assert_eq!(i.max_version(), TLS10);
        assert_eq!(i.sni, None);
    }

    #[test]
    fn other_bytes_are_not_hellos() {
        assert_eq!(sniff(b"GET / HTTP/1.1\r\n"), Sniff::NotHello);
        assert_eq!(sniff(&[0x80, 0x2e, 1, 0, 2]), Sniff::NotHello);
        assert_eq!(sniff(&[0x16, 3, 1, 0, 0]), Sniff::NotHello);
        assert_eq!(sniff(&[0x16, 3, 1, 0, 4, 2, 0, 0, 0]), Sniff::NotHello);
        // A hello whose lengths lie: not read past the end.
        let mut h = hello(TLS12, Some(&[TLS13]), Some("x"), 1000);
        let n = h.len();
        h[n - 3] = 0xff;
        assert_eq!(sniff(&h), Sniff::NotHello);
        // Every truncation and byte flip is handled without panic.
        let h = hello(TLS12, Some(&[TLS13, TLS12]), Some("b.test"), 1000);
        for i in 0..h.len() {
            let mut m = h.clone();
            m[i] ^= 0xff;
            let _ = sniff(&m);
        }
        assert_eq!(alert_record(0x0301, 70), [0x15, 3, 1, 0, 2, 2, 70]);
        assert_eq!(alert_record(0x0304, 112), [0x15, 3, 3, 0, 2, 2, 112]);
    }
}
