//! The client-certificate fetches of HAProxy 2.6 (`ssl_c_*`,
//! `ssl_fc_has_crt`): what `bind ... ssl verify optional|required` got
//! from the client. Kept apart from the other fetches (their own compile,
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
    Field(CertField),
}

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
            "ssl_c_serial" => SslC::Field(CertField::Serial),
            "ssl_c_sha1" => SslC::Field(CertField::Sha1),
            "ssl_c_der" => SslC::Field(CertField::Der),
            "ssl_c_chain_der" => SslC::Field(CertField::ChainDer),
            "ssl_c_notbefore" => SslC::Field(CertField::NotBefore),
            "ssl_c_notafter" => SslC::Field(CertField::NotAfter),
            "ssl_c_version" => SslC::Field(CertField::Version),
            "ssl_c_sig_alg" => SslC::Field(CertField::SigAlg),
            "ssl_c_key_alg" => SslC::Field(CertField::KeyAlg),
            "ssl_c_s_dn" | "ssl_c_i_dn" => return Some(dn(name, args)),
            _ => return None,
        };
        if !args.is_empty() {
            return Some(Err(format!("fetch '{name}' takes no argument")));
        }
        Some(Ok(f))
    }

    pub(in crate::sample) fn out_type(&self) -> Type {
        match self {
            SslC::Used | SslC::HasCrt => Type::Bool,
            SslC::Verify
            | SslC::Err
            | SslC::CaErr
            | SslC::CaErrDepth
            | SslC::Field(CertField::Version) => Type::Int,
            SslC::Field(
                CertField::Serial | CertField::Sha1 | CertField::Der | CertField::ChainDer,
            ) => Type::Bin,
            SslC::Field(_) => Type::Str,
        }
    }

    /// Nothing on a connection without TLS (as HAProxy: no SSL object).
    pub(in crate::sample) fn eval(&self, ctx: &Ctx<'_>, s: &mut Scratch) -> Option<Val> {
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
            SslC::Field(f) => match field(c?.chain, f)? {
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
            },
        }
    }
}

/// `ssl_c_s_dn([ENTRY[,OCC[,FORMAT]]])`, `ssl_c_i_dn(...)`: OCC defaults
/// to 1 (0 finds nothing, as HAProxy); FORMAT is empty or `rfc2253`.
fn dn(name: &str, args: &[String]) -> Result<SslC, String> {
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
    Ok(SslC::Field(CertField::Dn {
        issuer: name == "ssl_c_i_dn",
        entry,
        occ,
        rfc2253,
    }))
}
