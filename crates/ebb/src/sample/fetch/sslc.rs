//! The certificate fetches of HAProxy 2.6: `ssl_c_*` and
//! `ssl_fc_has_crt`, what `bind ... ssl verify optional|required` got
//! from the client; `ssl_f_*`, the certificate the frontend served;
//! `ssl_s_*`, the one an `ssl` server presented. Kept apart from the other fetches (their own compile,
//! evaluate and type functions).

use crate::clientcert::{field, CertField, FieldVal};
use crate::sample::{Ctx, Scratch, Type, Val};

#[derive(Clone, Debug)]
pub(in crate::sample) enum SslC {
    /// `ssl_c_used`: the session has a client certificate (also resumed).
    Used,
    /// `ssl_fc_has_crt`: one was presented in this handshake.
    HasCrt,
    Verify,
    Err,
    CaErr,
    CaErrDepth,
    /// `ssl_c_*`: the client's certificate.
    Field(CertField),
    /// `ssl_f_*`: the certificate the frontend served on this connection.
    Own(CertField),
    /// `ssl_s_*`: the certificate the server presented on the exchange's
    /// server connection (none before the response, as in HAProxy, whose
    /// request rules run before that connection exists).
    Srv(CertField),
    /// `ssl_fc_protocol`, `ssl_fc_cipher`...: what the client connection's
    /// handshake settled.
    Fc(Settled),
    /// `ssl_bc`: the exchange's server connection is TLS.
    Bc,
    /// `fc_err`, `fc_err_str` and with `ssl` `ssl_fc_err`,
    /// `ssl_fc_err_str`: the client connection's error. Rules and log
    /// formats run only on a connection that was established (a failed
    /// handshake is logged with a line of its own): 0, no text.
    FcErr {
        ssl: bool,
        text: bool,
    },
    /// `ssl_bc_protocol`...: what its handshake settled.
    BcOf(Settled),
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(in crate::sample) enum Settled {
    Protocol,
    Cipher,
    Alpn,
    Resumed,
    /// `*_use_keysize` and `*_alg_keysize` (the same for AEAD suites).
    Keysize,
}

/// Set once a configuration reads `ssl_s_*` or `ssl_bc*`: the exchanges
/// then keep what their server connection's TLS gave (its chain and what
/// the handshake settled) for them.
pub static SRV_TLS: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

impl SslC {
    /// `None`: not one of these names.
    pub(in crate::sample) fn compile(name: &str, args: &[String]) -> Option<Result<SslC, String>> {
        let f = match name {
            "ssl_c_used" => SslC::Used,
            "ssl_fc_has_crt" => SslC::HasCrt,
            "ssl_c_verify" => SslC::Verify,
            "ssl_c_err" => SslC::Err,
            "ssl_c_ca_err" => SslC::CaErr,
            "ssl_c_ca_err_depth" => SslC::CaErrDepth,
            "fc_err" | "fc_err_str" | "ssl_fc_err" | "ssl_fc_err_str" => SslC::FcErr {
                ssl: name.starts_with("ssl_"),
                text: name.ends_with("_str"),
            },
            "ssl_bc" => {
                SRV_TLS.store(true, std::sync::atomic::Ordering::Relaxed);
                SslC::Bc
            }
            _ => match settled(name) {
                Some((true, what)) => {
                    SRV_TLS.store(true, std::sync::atomic::Ordering::Relaxed);
                    SslC::BcOf(what)
                }
                Some((false, what)) => SslC::Fc(what),
                None => return cert_field(name, args),
            },
        };
        if !args.is_empty() {
            return Some(Err(format!("fetch '{name}' takes no argument")));
        }
        Some(Ok(f))
    }

    /// `ssl_bc*`: reads the exchange's server connection (HAProxy's
    /// `SMP_USE_L5SRV`; its `ssl_s_*` are `SMP_USE_L5CLI`, found
    /// nowhere before the response but accepted anywhere).
    pub(in crate::sample) fn reads_server_conn(&self) -> bool {
        matches!(self, SslC::Bc | SslC::BcOf(_))
    }

    pub(in crate::sample) fn out_type(&self) -> Type {
        match self {
            SslC::Used | SslC::HasCrt | SslC::Bc => Type::Bool,
            SslC::FcErr { text: false, .. } => Type::Int,
            SslC::FcErr { text: true, .. } => Type::Str,
            SslC::Fc(w) | SslC::BcOf(w) => match w {
                Settled::Resumed => Type::Bool,
                Settled::Keysize => Type::Int,
                Settled::Protocol | Settled::Cipher | Settled::Alpn => Type::Str,
            },
            SslC::Verify
            | SslC::Err
            | SslC::CaErr
            | SslC::CaErrDepth
            | SslC::Field(CertField::Version)
            | SslC::Own(CertField::Version)
            | SslC::Srv(CertField::Version) => Type::Int,
            SslC::Field(f) | SslC::Own(f) | SslC::Srv(f) => match f {
                CertField::Serial | CertField::Sha1 | CertField::Der | CertField::ChainDer => {
                    Type::Bin
                }
                _ => Type::Str,
            },
        }
    }

    /// Nothing on a connection without TLS (as HAProxy: no SSL object).
    pub(in crate::sample) fn eval(&self, ctx: &Ctx<'_>, s: &mut Scratch) -> Option<Val> {
        match self {
            SslC::Bc => {
                let v = ctx.vars?.try_borrow().ok()?;
                return Some(Val::Bool(v.info.srv_tls.is_some()));
            }
            SslC::BcOf(w) => {
                let v = ctx.vars?.try_borrow().ok()?;
                return match v.info.srv_tls.as_ref() {
                    Some(t) => settled_val(*w, t.facts.view(), s),
                    // HAProxy: not resumed, whatever the transport.
                    None => (*w == Settled::Resumed).then_some(Val::Bool(false)),
                };
            }
            SslC::Fc(w) if ctx.tls => return settled_val(*w, ctx.client_cert?.facts, s),
            SslC::Fc(Settled::Resumed) => return Some(Val::Bool(false)),
            // OpenSSL's text of error 0 (`conn_err_code_str`'s).
            SslC::FcErr {
                ssl: false,
                text: true,
            } => {
                s.cur.clear();
                s.cur.extend_from_slice(b"Success");
                return Some(Val::Str);
            }
            SslC::FcErr { text: true, .. } => return None,
            SslC::FcErr { ssl, .. } if !ssl || ctx.tls => return Some(Val::Int(0)),
            _ => {}
        }
        if let SslC::Srv(f) = self {
            let v = ctx.vars?.try_borrow().ok()?;
            let chain = &v.info.srv_tls.as_ref()?.chain;
            // OpenSSL's peer chain on the client side starts with the
            // server's own certificate.
            if let CertField::ChainDer = f {
                if chain.is_empty() {
                    return None;
                }
                s.cur.clear();
                for c in chain {
                    s.cur.extend_from_slice(c);
                }
                return Some(Val::Bin);
            }
            let got = field(chain, f)?;
            drop(v);
            return self.put(got, s);
        }
        if !ctx.tls {
            return None;
        }
        let c = ctx.client_cert;
        let note = c.and_then(|c| c.note).unwrap_or_default();
        match self {
            SslC::Used => Some(Val::Bool(c.is_some_and(|c| !c.chain.is_empty()))),
            SslC::HasCrt => Some(Val::Bool(c.is_some_and(|c| c.note.is_some()))),
            SslC::Verify => Some(Val::Int(i64::from(c.map_or(0, |c| c.verify)))),
            SslC::Err => Some(Val::Int(i64::from(note.crt_err))),
            SslC::CaErr => Some(Val::Int(i64::from(note.ca_err))),
            SslC::CaErrDepth => Some(Val::Int(i64::from(note.ca_err_depth))),
            SslC::Field(f) => self.put(field(c?.chain, f)?, s),
            SslC::Own(f) => self.put(field(c?.own, f)?, s),
            SslC::Srv(_) | SslC::Fc(_) | SslC::Bc | SslC::BcOf(_) | SslC::FcErr { .. } => None,
        }
    }

    fn put(&self, v: FieldVal, s: &mut Scratch) -> Option<Val> {
        match v {
            FieldVal::Int(n) => Some(Val::Int(n)),
            FieldVal::Bytes(b) => {
                s.cur.clear();
                s.cur.extend_from_slice(&b);
                Some(if self.out_type() == Type::Bin {
                    Val::Bin
                } else {
                    Val::Str
                })
            }
        }
    }
}

/// `ssl_c_*`, `ssl_f_*` and `ssl_s_*` certificate fields (`None`: not one).
fn cert_field(name: &str, args: &[String]) -> Option<Result<SslC, String>> {
    let (side, rest) = [("ssl_c_", 'c'), ("ssl_f_", 'f'), ("ssl_s_", 's')]
        .iter()
        .find_map(|(p, side)| Some((*side, name.strip_prefix(p)?)))?;
    let field = match rest {
        "serial" => CertField::Serial,
        "sha1" => CertField::Sha1,
        "der" => CertField::Der,
        // HAProxy 2.6 has no `ssl_f_chain_der`.
        "chain_der" if side != 'f' => CertField::ChainDer,
        "notbefore" => CertField::NotBefore,
        "notafter" => CertField::NotAfter,
        "version" => CertField::Version,
        "sig_alg" => CertField::SigAlg,
        "key_alg" => CertField::KeyAlg,
        // The DN fields take their own arguments.
        "s_dn" | "i_dn" => match dn(name, rest == "i_dn", args) {
            Ok(f) => f,
            Err(e) => return Some(Err(e)),
        },
        _ => return None,
    };
    if !matches!(field, CertField::Dn { .. }) && !args.is_empty() {
        return Some(Err(format!("fetch '{name}' takes no argument")));
    }
    if side == 's' {
        SRV_TLS.store(true, std::sync::atomic::Ordering::Relaxed);
    }
    Some(Ok(match side {
        'c' => SslC::Field(field),
        'f' => SslC::Own(field),
        _ => SslC::Srv(field),
    }))
}

/// `ssl_fc_*`/`ssl_bc_*` names of what a handshake settled: (server
/// side, what).
fn settled(name: &str) -> Option<(bool, Settled)> {
    let (bc, rest) = match name.strip_prefix("ssl_fc_") {
        Some(r) => (false, r),
        None => (true, name.strip_prefix("ssl_bc_")?),
    };
    let w = match rest {
        "protocol" => Settled::Protocol,
        "cipher" => Settled::Cipher,
        "alpn" => Settled::Alpn,
        "is_resumed" => Settled::Resumed,
        "use_keysize" | "alg_keysize" => Settled::Keysize,
        _ => return None,
    };
    Some((bc, w))
}

fn settled_val(w: Settled, f: crate::clientcert::TlsFacts<'_>, s: &mut Scratch) -> Option<Val> {
    let text = |t: &[u8], s: &mut Scratch| {
        s.cur.clear();
        s.cur.extend_from_slice(t);
        Some(Val::Str)
    };
    match w {
        Settled::Protocol => text(crate::tls_policy::version_name(f.version?)?.as_bytes(), s),
        Settled::Cipher => text(crate::tls_policy::suite_name(f.suite?)?.0.as_bytes(), s),
        Settled::Alpn => text(f.alpn?, s),
        Settled::Resumed => Some(Val::Bool(f.resumed)),
        Settled::Keysize => Some(Val::Int(i64::from(
            crate::tls_policy::suite_name(f.suite?)?.1,
        ))),
    }
}

/// `ssl_c_s_dn([ENTRY[,OCC[,FORMAT]]])`, `ssl_c_i_dn(...)` (and the
/// `ssl_f_`, `ssl_s_` ones): OCC defaults to 1 (0 finds nothing, as
/// HAProxy); FORMAT is empty or `rfc2253`.
fn dn(name: &str, issuer: bool, args: &[String]) -> Result<CertField, String> {
    if args.len() > 3 {
        return Err(format!(
            "fetch '{name}' expects 0 to 3 argument(s), got {}",
            args.len()
        ));
    }
    let entry = args.first().filter(|e| !e.is_empty()).cloned();
    let occ = match args.get(1) {
        Some(o) if !o.is_empty() => o
            .parse::<i64>()
            .map_err(|_| format!("fetch '{name}': '{o}' is not an integer"))?,
        _ => 1,
    };
    let rfc2253 = match args.get(2).map(String::as_str) {
        None | Some("") => false,
        Some("rfc2253") => true,
        Some(f) => {
            return Err(format!(
                "fetch '{name}': invalid DN format '{f}'. Format must be in ('rfc2253')"
            ))
        }
    };
    Ok(CertField::Dn {
        issuer,
        entry,
        occ,
        rfc2253,
    })
}
