//! Converters (configuration.txt 7.3.1): transformations applied after a
//! fetch, each reading the current value and writing the next.

use std::io::Write;
use std::net::IpAddr;
use std::sync::Arc;

use regex::bytes::Regex;

use super::crypto;
use super::crypto::JwtAlg;
use super::hash;
use super::map::Map;
use super::{cast, Ctx, Scratch, Type, Val};

#[derive(Clone, Debug)]
pub(super) enum Conv {
    /// A stick-table converter (`in_table`, `table_*`).
    Stk(super::stk::StkConv),
    /// One of `conv_extra`'s.
    Extra(super::conv_extra::Extra),
    Lower,
    Upper,
    Base64,
    B64Dec,
    Hex,
    /// `hex2i`: hex digits read as an integer.
    Hex2i,
    /// `field(n,delims[,count])` / `word(...)`.
    Field {
        word: bool,
        n: i64,
        delims: Vec<u8>,
        count: i64,
    },
    Regsub {
        re: Regex,
        subst: Vec<u8>,
        global: bool,
    },
    /// `json([ascii|utf8|utf8s|utf8p|utf8ps])`.
    Json(JsonIn),
    /// `json_query(PATH[,int])`.
    JsonQuery(super::jsonq::Path, bool),
    Bytes {
        off: i64,
        len: Option<i64>,
    },
    Length,
    /// `add|sub|mul|div|mod(INT|VAR)`.
    Arith(Op, ArithArg),
    Neg,
    /// `cpl`: the bits inverted.
    Cpl,
    /// `bool`, `not`, `odd`, `even`: an integer's truth.
    IntTest(IntTest),
    /// `ipmask(MASK4[,MASK6])`: the masks' bits (no IPv6 mask: an IPv6
    /// address gives no value).
    IpMask {
        v4: u32,
        v6: Option<u128>,
    },
    /// `host_only`: up to the port's `:`, lowered.
    HostOnly,
    /// `port_only`: the port's leading digits (HAProxy's `strl2ui`), 0
    /// without one.
    PortOnly,
    UrlDec {
        plus: bool,
    },
    Hash {
        f: HashFn,
        avalanche: bool,
    },
    /// `xxh32`, `xxh64`, `xxh3` with their seed.
    Xxh(Xxh, u64),
    Map(Arc<Map>),
    /// `add_item(delim[,var][,suffix])`.
    AddItem {
        delim: Vec<u8>,
        var: Option<super::VarRef>,
        suffix: Vec<u8>,
    },
    /// `be2dec(sep,chunk[,truncate])` / `be2hex([sep][,chunk][,truncate])`.
    Be2 {
        hex: bool,
        sep: Vec<u8>,
        chunk: usize,
        truncate: bool,
    },
    /// `iif(true,false)`.
    Iif(Vec<u8>, Vec<u8>),
    /// `http_date([OFFSET[,UNIT]])`: an integer date since the epoch
    /// (plus OFFSET, in UNIT: 1 for seconds, 1000 ms, 1000000 us) as an
    /// HTTP date (IMF-fixdate), with the fraction of a second when the
    /// unit is ms or us.
    HttpDate {
        offset: i64,
        per_sec: i64,
        frac: bool,
    },
    /// `url_enc([query])`.
    UrlEnc,
    /// `ub64enc` / `ub64dec`: base64url without padding.
    Ub64Enc,
    Ub64Dec,
    /// `sha1`, `sha2([224|256|384|512])`.
    Digest(&'static ring::digest::Algorithm),
    /// `sha2(224)`: ring has no SHA-224 (the `sha2` crate's).
    Sha224,
    /// `digest(ALG)`: any digest [`crypto::Md`] knows.
    MsgDigest(crypto::Md),
    /// `hmac(ALG,KEY)`: the key, decoded from base64 at start, or a
    /// variable holding it in base64.
    Hmac(crypto::Md, StrArg),
    /// `secure_memcmp(VAR)`.
    SecureMemcmp(super::VarRef),
    /// `jwt_header_query([PATH[,int]])` (part 0) and `jwt_payload_query`
    /// (part 1): a `json_query` on the part decoded (no sample without
    /// PATH, as in HAProxy 2.6).
    JwtQuery(usize, Option<(super::jsonq::Path, bool)>),
    /// `jwt_verify(ALG,KEY)`.
    JwtVerify(StrArg, crypto::JwtKey),
    /// `concat([start],[var],[end])`.
    Concat {
        start: Vec<u8>,
        var: Option<super::VarRef>,
        end: Vec<u8>,
    },
    /// `strcmp(var)`.
    StrCmp(super::VarRef),
    /// `fix_is_valid`, `fix_tag_value(TAG)` (the tag's id).
    FixIsValid,
    FixTagValue(u32),
    /// `set-var(NAME[,COND...])`: stores the sample, which goes on
    /// unchanged.
    SetVar(super::VarRef),
    /// `mqtt_is_valid`, `mqtt_field_value(TYPE,FIELD)`.
    MqttIsValid,
    MqttFieldValue(u8, super::mqtt::Field),
}

/// A converter's string argument that may name a variable instead
/// (HAProxy's `vars_check_arg`: a valid variable name is one).
#[derive(Clone, Debug)]
pub(super) enum StrArg {
    Lit(Vec<u8>),
    Var(super::VarRef),
}

impl StrArg {
    fn parse(a: &str) -> StrArg {
        match super::VarRef::parse(a) {
            Ok(r) => StrArg::Var(r),
            Err(_) => StrArg::Lit(a.as_bytes().to_vec()),
        }
    }
}

/// The argument of an arithmetic converter: an integer, or a variable
/// read (and cast to an integer) at each evaluation (HAProxy's
/// `check_operator`: a valid variable name first).
#[derive(Clone, Debug)]
pub(super) enum ArithArg {
    Int(i64),
    Var(super::VarRef),
}

#[derive(Clone, Copy, Debug)]
pub(super) enum Op {
    Add,
    Sub,
    Mul,
    Div,
    Mod,
    And,
    Or,
    Xor,
}

/// What `bool`, `not`, `odd` and `even` ask of an integer.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum IntTest {
    NonZero,
    Zero,
    Odd,
    Even,
}

/// How `json` reads its input (HAProxy's `input_type`): bytes, or UTF-8
/// where a bad sequence fails the conversion (`utf8`), is skipped
/// (`utf8s`), or only a bad sequence or range is refused and an overlong
/// form let through (`utf8p`, `utf8ps`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum JsonIn {
    Ascii,
    Utf8,
    Utf8s,
    Utf8p,
    Utf8ps,
}

#[derive(Clone, Copy, Debug)]
pub(super) enum Xxh {
    H32,
    H64,
    H3,
}

#[derive(Clone, Copy, Debug)]
pub(super) enum HashFn {
    Sdbm,
    Djb2,
    Wt6,
    Crc32,
    Crc32c,
}

fn count(name: &str, args: &[String], min: usize, max: usize) -> Result<(), String> {
    if args.len() < min || args.len() > max {
        return Err(format!(
            "converter '{name}' expects {} argument(s), got {}",
            if min == max {
                format!("{min}")
            } else {
                format!("{min} to {max}")
            },
            args.len()
        ));
    }
    Ok(())
}

/// Optional argument `i` of a number or a mask when given. An empty last
/// one reads as 0: HAProxy's `make_arg_list` stops there without error
/// once the mandatory ones are read, its argument typed and zeroed
/// (`field(1,\,)` is `field(1,"\",0)`: `\,` ends the argument).
pub(super) fn opt_arg(args: &[String], i: usize) -> Option<&str> {
    let a = args.get(i)?;
    Some(if a.is_empty() && i + 1 == args.len() {
        "0"
    } else {
        a
    })
}

/// An integer argument: digits with an optional sign, nothing around
/// (HAProxy's `read_int64` on the whole argument).
fn int(name: &str, a: &str) -> Result<i64, String> {
    a.parse::<i64>()
        .map_err(|_| format!("converter '{name}': '{a}' is not an integer"))
}

/// `ipmask`'s masks as bits (`bits` wide): a prefix length, or an
/// address of the family used as the mask, contiguous or not (HAProxy's
/// `str2mask` for IPv4, `str2mask6` for IPv6).
fn mask(name: &str, a: &str, bits: u32) -> Result<u128, String> {
    let all = if bits == 128 {
        u128::MAX
    } else {
        (1u128 << bits) - 1
    };
    if let Ok(n) = a.parse::<u32>() {
        if n <= bits {
            return Ok(if n == 0 { 0 } else { all & (all << (bits - n)) });
        }
    } else {
        match a.parse::<IpAddr>() {
            Ok(IpAddr::V4(m)) if bits == 32 => return Ok(u128::from(u32::from(m))),
            Ok(IpAddr::V6(m)) if bits == 128 => return Ok(u128::from(m)),
            _ => {}
        }
    }
    Err(format!("converter '{name}': invalid mask '{a}'"))
}

impl Conv {
    pub(super) fn compile(name: &str, args: &[String]) -> Result<Conv, String> {
        let none = |c: Conv| -> Result<Conv, String> {
            count(name, args, 0, 0)?;
            Ok(c)
        };
        if let Some(c) = super::stk::StkConv::compile(name, args) {
            return c.map(Conv::Stk);
        }
        if let Some(c) = super::conv_extra::Extra::compile(name, args) {
            return c.map(Conv::Extra);
        }
        match name {
            "lower" => none(Conv::Lower),
            "upper" => none(Conv::Upper),
            "base64" => none(Conv::Base64),
            "b64dec" => none(Conv::B64Dec),
            "hex" => none(Conv::Hex),
            "hex2i" => none(Conv::Hex2i),
            "length" => none(Conv::Length),
            "fix_is_valid" => none(Conv::FixIsValid),
            "mqtt_is_valid" => none(Conv::MqttIsValid),
            "set-var" => {
                // The variable, then its conditions.
                count(name, args, 1, 9)?;
                let mut r = super::VarRef::parse(&args[0])?;
                if args.len() > 1 {
                    r.conds = super::vars::cond::parse(&args[1..].join(","))?;
                }
                Ok(Conv::SetVar(r))
            }
            "mqtt_field_value" => {
                count(name, args, 2, 2)?;
                let Some(kind) = super::mqtt::type_id(&args[0]) else {
                    return Err(format!(
                        "converter '{name}': Unknown MQTT type '{}'",
                        args[0]
                    ));
                };
                match super::mqtt::field_id(kind, &args[1]) {
                    Some(f) => Ok(Conv::MqttFieldValue(kind, f)),
                    None => Err(format!(
                        "converter '{name}': Unknown MQTT field name '{}' for packet type '{}'",
                        args[1], args[0]
                    )),
                }
            }
            "fix_tag_value" => {
                count(name, args, 1, 1)?;
                match super::fix::tag_id(&args[0]) {
                    0 => Err(format!(
                        "converter '{name}': Unknown FIX tag name '{}'",
                        args[0]
                    )),
                    id => Ok(Conv::FixTagValue(id)),
                }
            }
            "neg" => none(Conv::Neg),
            "cpl" => none(Conv::Cpl),
            "bool" => none(Conv::IntTest(IntTest::NonZero)),
            "not" => none(Conv::IntTest(IntTest::Zero)),
            "odd" => none(Conv::IntTest(IntTest::Odd)),
            "even" => none(Conv::IntTest(IntTest::Even)),
            "host_only" => none(Conv::HostOnly),
            "port_only" => none(Conv::PortOnly),
            "json_query" => {
                count(name, args, 1, 2)?;
                let path = super::jsonq::Path::parse(&args[0])
                    .map_err(|e| format!("converter 'json_query': {e}"))?;
                let int =
                    match args.get(1).map(String::as_str) {
                        None | Some("") => false,
                        Some("int") => true,
                        Some(_) => return Err(
                            "converter 'json_query': output_type only supports \"int\" as argument"
                                .to_string(),
                        ),
                    };
                Ok(Conv::JsonQuery(path, int))
            }
            "field" | "word" => {
                count(name, args, 2, 3)?;
                let n = int(name, &args[0])?;
                if n == 0 {
                    return Err(format!("converter '{name}': the index must not be 0"));
                }
                let c = match opt_arg(args, 2) {
                    Some(c) => int(name, c)?,
                    None => 1,
                };
                if c < 0 {
                    return Err(format!(
                        "converter '{name}': the count must not be negative"
                    ));
                }
                if args[1].is_empty() {
                    return Err(format!("converter '{name}': empty delimiter list"));
                }
                Ok(Conv::Field {
                    word: name == "word",
                    n,
                    delims: args[1].as_bytes().to_vec(),
                    count: c,
                })
            }
            "regsub" => {
                count(name, args, 2, 3)?;
                let mut global = false;
                let mut icase = false;
                for f in args.get(2).map(|s| s.as_str()).unwrap_or("").chars() {
                    match f {
                        'g' => global = true,
                        'i' => icase = true,
                        o => return Err(format!("converter 'regsub': unknown flag '{o}'")),
                    }
                }
                let src = if icase {
                    format!("(?i){}", args[0])
                } else {
                    args[0].clone()
                };
                let re = Regex::new(&src).map_err(|e| {
                    format!(
                        "converter 'regsub': invalid regular expression '{}': {e}",
                        args[0]
                    )
                })?;
                // HAProxy's back-references are \1..\9; the regex crate's
                // are ${1}; `$` itself is literal in HAProxy.
                let mut subst = Vec::new();
                let b = args[1].as_bytes();
                let mut i = 0;
                while i < b.len() {
                    if b[i] == b'\\' && i + 1 < b.len() && b[i + 1].is_ascii_digit() {
                        subst.extend_from_slice(format!("${{{}}}", b[i + 1] - b'0').as_bytes());
                        i += 2;
                        continue;
                    }
                    if b[i] == b'$' {
                        subst.extend_from_slice(b"$$");
                    } else {
                        subst.push(b[i]);
                    }
                    i += 1;
                }
                Ok(Conv::Regsub { re, subst, global })
            }
            "json" => {
                count(name, args, 0, 1)?;
                Ok(Conv::Json(match args.first().map(|s| s.as_str()) {
                    None | Some("") | Some("ascii") => JsonIn::Ascii,
                    Some("utf8") => JsonIn::Utf8,
                    Some("utf8s") => JsonIn::Utf8s,
                    Some("utf8p") => JsonIn::Utf8p,
                    Some("utf8ps") => JsonIn::Utf8ps,
                    Some(m) => {
                        return Err(format!(
                        "converter 'json': unexpected input code type '{m}' (allowed: ascii, utf8, utf8s, utf8p, utf8ps)"
                    ))
                    }
                }))
            }
            "bytes" => {
                count(name, args, 1, 2)?;
                let off = int(name, &args[0])?;
                let len = opt_arg(args, 1).map(|a| int(name, a)).transpose()?;
                if off < 0 || len.is_some_and(|l| l < 0) {
                    return Err("converter 'bytes': offset and length must not be negative".into());
                }
                Ok(Conv::Bytes { off, len })
            }
            "add" | "sub" | "mul" | "div" | "mod" | "and" | "or" | "xor" => {
                count(name, args, 1, 1)?;
                let arg = match super::VarRef::parse(&args[0]) {
                    Ok(r) => ArithArg::Var(r),
                    Err(_) => ArithArg::Int(args[0].parse::<i64>().map_err(|_| {
                        format!(
                            "converter '{name}': expects an integer or a variable name, got '{}'",
                            args[0]
                        )
                    })?),
                };
                let op = match name {
                    "add" => Op::Add,
                    "sub" => Op::Sub,
                    "mul" => Op::Mul,
                    "div" => Op::Div,
                    "and" => Op::And,
                    "or" => Op::Or,
                    "xor" => Op::Xor,
                    _ => Op::Mod,
                };
                Ok(Conv::Arith(op, arg))
            }
            "ipmask" => {
                count(name, args, 1, 2)?;
                Ok(Conv::IpMask {
                    v4: mask(name, &args[0], 32)? as u32,
                    v6: opt_arg(args, 1).map(|a| mask(name, a, 128)).transpose()?,
                })
            }
            "url_dec" => {
                count(name, args, 0, 1)?;
                let plus = match args.first() {
                    Some(a) => int(name, a)? != 0,
                    None => false,
                };
                Ok(Conv::UrlDec { plus })
            }
            "sdbm" | "djb2" | "wt6" | "crc32" | "crc32c" => {
                count(name, args, 0, 1)?;
                let avalanche = match args.first() {
                    Some(a) => int(name, a)? != 0,
                    None => false,
                };
                let f = match name {
                    "sdbm" => HashFn::Sdbm,
                    "djb2" => HashFn::Djb2,
                    "wt6" => HashFn::Wt6,
                    "crc32c" => HashFn::Crc32c,
                    _ => HashFn::Crc32,
                };
                Ok(Conv::Hash { f, avalanche })
            }
            "xxh32" | "xxh64" | "xxh3" => {
                count(name, args, 0, 1)?;
                let seed = match args.first() {
                    Some(a) => int(name, a)? as u64,
                    None => 0,
                };
                let f = match name {
                    "xxh32" => Xxh::H32,
                    "xxh64" => Xxh::H64,
                    _ => Xxh::H3,
                };
                Ok(Conv::Xxh(f, seed))
            }
            n if n.starts_with("map") => Ok(Conv::Map(Arc::new(Map::compile(n, args)?))),
            "add_item" => {
                count(name, args, 2, 3)?;
                let var = match args[1].as_str() {
                    "" => None,
                    v => Some(super::VarRef::parse(v)?),
                };
                let suffix = args.get(2).cloned().unwrap_or_default();
                if var.is_none() && suffix.is_empty() {
                    return Err(
                        "converter 'add_item': a variable or a suffix is required".to_string()
                    );
                }
                Ok(Conv::AddItem {
                    delim: args[0].as_bytes().to_vec(),
                    var,
                    suffix: suffix.into_bytes(),
                })
            }
            "be2dec" | "be2hex" => {
                let hex = name == "be2hex";
                if hex {
                    count(name, args, 0, 3)?;
                } else {
                    count(name, args, 2, 3)?;
                }
                // HAProxy's checks: a missing chunk size is 0; be2dec
                // wants 1 to 8, be2hex a positive one unless it has
                // neither separator nor truncation (the whole input then).
                let sep = args.first().map_or("", String::as_str);
                let chunk = match opt_arg(args, 1) {
                    Some(a) => int(name, a)?,
                    None => 0,
                };
                let truncate = match opt_arg(args, 2).map(|a| int(name, a)).transpose()? {
                    None | Some(0) => false,
                    Some(1) => true,
                    Some(t) => {
                        return Err(format!(
                            "converter '{name}': unsupported truncate value ({t})"
                        ))
                    }
                };
                if !hex && !(1..=8).contains(&chunk) {
                    return Err(format!(
                        "converter '{name}': chunk_size out of [1..8] range ({chunk})"
                    ));
                }
                if hex && chunk <= 0 && (!sep.is_empty() || truncate) {
                    return Err(format!(
                        "converter '{name}': chunk_size needs to be positive ({chunk})"
                    ));
                }
                // Without separator nor truncation the chunk size does not
                // show.
                let chunk = chunk.max(1);
                Ok(Conv::Be2 {
                    hex,
                    sep: args.first().cloned().unwrap_or_default().into_bytes(),
                    chunk: chunk as usize,
                    truncate,
                })
            }
            "http_date" => {
                count(name, args, 0, 2)?;
                let offset = match args.first().filter(|a| !a.is_empty()) {
                    Some(a) => int(name, a)?,
                    None => 0,
                };
                let per_sec = match args.get(1).map(String::as_str) {
                    None | Some("") | Some("s") => 1,
                    Some("ms") => 1000,
                    Some("us") => 1_000_000,
                    Some(o) => {
                        return Err(format!(
                            "converter 'http_date': unknown unit '{o}' (supported: s, ms, us)"
                        ))
                    }
                };
                Ok(Conv::HttpDate {
                    offset,
                    per_sec,
                    frac: per_sec != 1,
                })
            }
            "iif" => {
                count(name, args, 2, 2)?;
                Ok(Conv::Iif(
                    args[0].as_bytes().to_vec(),
                    args[1].as_bytes().to_vec(),
                ))
            }
            "url_enc" => {
                count(name, args, 0, 1)?;
                match args.first().map(String::as_str) {
                    None | Some("") | Some("query") => Ok(Conv::UrlEnc),
                    Some(o) => Err(format!(
                        "converter 'url_enc': unknown encoding type '{o}' (supported: query)"
                    )),
                }
            }
            "concat" => {
                count(name, args, 0, 3)?;
                let var = match args.get(1).map(String::as_str) {
                    None | Some("") => None,
                    Some(v) => Some(super::VarRef::parse(v)?),
                };
                Ok(Conv::Concat {
                    start: args.first().cloned().unwrap_or_default().into_bytes(),
                    var,
                    end: args.get(2).cloned().unwrap_or_default().into_bytes(),
                })
            }
            "strcmp" => {
                count(name, args, 1, 1)?;
                Ok(Conv::StrCmp(super::VarRef::parse(&args[0])?))
            }
            "ub64enc" => none(Conv::Ub64Enc),
            "ub64dec" => none(Conv::Ub64Dec),
            "sha1" => none(Conv::Digest(&ring::digest::SHA1_FOR_LEGACY_USE_ONLY)),
            "sha2" => {
                count(name, args, 0, 1)?;
                let bits = match args.first().filter(|a| !a.is_empty()) {
                    Some(a) => int(name, a)?,
                    None => 256,
                };
                Ok(Conv::Digest(match bits {
                    224 => return Ok(Conv::Sha224),
                    256 => &ring::digest::SHA256,
                    384 => &ring::digest::SHA384,
                    512 => &ring::digest::SHA512,
                    o => {
                        return Err(format!(
                            "converter 'sha2': unsupported size '{o}' (224, 256, 384 or 512)"
                        ))
                    }
                }))
            }
            "digest" => {
                count(name, args, 1, 1)?;
                Ok(Conv::MsgDigest(md_arg(name, &args[0])?))
            }
            "hmac" => {
                count(name, args, 2, 2)?;
                let md = md_arg(name, &args[0])?;
                let key = match StrArg::parse(&args[1]) {
                    StrArg::Lit(k) => {
                        let mut d = Vec::new();
                        if base64_decode(&k, &mut d).is_none() {
                            return Err(format!(
                                "converter 'hmac': failed to parse key : argument needs to be base64 encoded, and can either be a string or a variable (got '{}')",
                                args[1]
                            ));
                        }
                        StrArg::Lit(d)
                    }
                    v => v,
                };
                Ok(Conv::Hmac(md, key))
            }
            "secure_memcmp" => {
                count(name, args, 1, 1)?;
                if args[0].is_empty() {
                    return Err("converter 'secure_memcmp': missing variable name".into());
                }
                let r = super::VarRef::parse(&args[0]).map_err(|e| {
                    format!(
                        "converter 'secure_memcmp': failed to register variable name '{}': {e}",
                        args[0]
                    )
                })?;
                Ok(Conv::SecureMemcmp(r))
            }
            "jwt_header_query" | "jwt_payload_query" => {
                count(name, args, 0, 2)?;
                let int = match args.get(1).map(String::as_str) {
                    None | Some("") => false,
                    Some("int") => true,
                    Some(_) => {
                        return Err(format!(
                            "converter '{name}': output_type only supports \"int\" as argument"
                        ))
                    }
                };
                let q = match args.first() {
                    None => None,
                    Some(p) => Some((
                        super::jsonq::Path::parse(p)
                            .map_err(|e| format!("converter '{name}': {e}"))?,
                        int,
                    )),
                };
                Ok(Conv::JwtQuery(usize::from(name == "jwt_payload_query"), q))
            }
            "jwt_verify" => {
                count(name, args, 2, 2)?;
                let alg = StrArg::parse(&args[0]);
                // A literal algorithm HAProxy 2.6 checks at start.
                let lit_alg =
                    match &alg {
                        StrArg::Lit(a) => match JwtAlg::parse(a) {
                            None => {
                                return Err(format!(
                                    "converter 'jwt_verify': unknown JWT algorithm: {}",
                                    args[0]
                                ))
                            }
                            Some(JwtAlg::Ps) => return Err(
                                "converter 'jwt_verify': RSASSA-PSS JWS signing not managed yet"
                                    .into(),
                            ),
                            a => a,
                        },
                        StrArg::Var(_) => None,
                    };
                let key = match StrArg::parse(&args[1]) {
                    StrArg::Var(r) => crypto::JwtKey::Var(r),
                    StrArg::Lit(k) => match lit_alg {
                        // A secret, not a file.
                        Some(JwtAlg::Hs(_) | JwtAlg::None) => crypto::JwtKey::Lit(k, None),
                        // A key file: refused when it cannot be read.
                        Some(_) => crypto::JwtKey::Lit(
                            k,
                            Some(
                                crypto::load_key(&args[1])
                                    .map_err(|e| format!("converter 'jwt_verify': {e}"))?,
                            ),
                        ),
                        // A key file or a secret, as the run-time
                        // algorithm says: a file not loaded is an unknown
                        // key then (-5), as in HAProxy.
                        None => {
                            let loaded = crypto::load_key(&args[1]).ok();
                            crypto::JwtKey::Lit(k, loaded)
                        }
                    },
                };
                Ok(Conv::JwtVerify(alg, key))
            }
            _ => Err(format!("unknown converter '{name}'")),
        }
    }

    /// The type this converter expects (the previous step is cast to it).
    pub(super) fn in_type(&self) -> Type {
        match self {
            Conv::Base64
            | Conv::Hex
            | Conv::Bytes { .. }
            | Conv::Hash { .. }
            | Conv::Xxh(..)
            | Conv::Be2 { .. }
            | Conv::Ub64Enc
            | Conv::Digest(_)
            | Conv::Sha224
            | Conv::MsgDigest(_)
            | Conv::Hmac(..)
            | Conv::SecureMemcmp(_)
            | Conv::JwtQuery(..)
            | Conv::JwtVerify(..)
            | Conv::FixIsValid
            | Conv::FixTagValue(_)
            | Conv::MqttIsValid
            | Conv::MqttFieldValue(..) => Type::Bin,
            Conv::Iif(..) => Type::Bool,
            Conv::Arith(..) | Conv::Neg | Conv::Cpl | Conv::IntTest(_) | Conv::HttpDate { .. } => {
                Type::Int
            }
            Conv::IpMask { .. } => Type::Ip,
            Conv::Map(m) => m.in_type(),
            Conv::Extra(e) => e.in_type(),
            _ => Type::Str,
        }
    }

    /// Whether it gives out its input's type (`set-var`).
    pub(super) fn keeps_type(&self) -> bool {
        match self {
            Conv::Extra(e) => e.any_type(),
            c => matches!(c, Conv::SetVar(_)),
        }
    }

    pub(super) fn out_type(&self, _input: Type) -> Type {
        match self {
            Conv::SetVar(_) => _input,
            Conv::B64Dec
            | Conv::Bytes { .. }
            | Conv::Ub64Dec
            | Conv::Digest(_)
            | Conv::Sha224
            | Conv::MsgDigest(_)
            | Conv::Hmac(..)
            | Conv::FixTagValue(_) => Type::Bin,
            Conv::FixIsValid | Conv::MqttIsValid | Conv::IntTest(_) | Conv::SecureMemcmp(_) => {
                Type::Bool
            }
            Conv::Length
            | Conv::PortOnly
            | Conv::Hex2i
            | Conv::Arith(..)
            | Conv::Neg
            | Conv::Cpl
            | Conv::Hash { .. }
            | Conv::Xxh(..)
            | Conv::StrCmp(_)
            | Conv::JwtVerify(..)
            | Conv::JwtQuery(_, Some((_, true)))
            | Conv::JsonQuery(_, true) => Type::Int,
            Conv::IpMask { .. } => Type::Ip,
            Conv::Map(m) => m.out_type(),
            Conv::Stk(c) => c.out_type(),
            Conv::Extra(e) => e.out_type(_input),
            _ => Type::Str,
        }
    }

    pub(super) fn apply(&self, v: Val, ctx: &Ctx<'_>, s: &mut Scratch) -> Option<Val> {
        let _ = ctx;
        if let Conv::Stk(c) = self {
            // Any type: the table casts the sample to its key type.
            return c.apply(v, ctx, s);
        }
        if let Conv::Extra(e) = self {
            if e.any_type() {
                return e.apply(v, ctx, s);
            }
        }
        if let Conv::SetVar(r) = self {
            // Any type, passed on as it is.
            if let Some(Ok(mut st)) = ctx.vars.map(|v| v.try_borrow_mut()) {
                st.set(r, v, s);
            }
            return Some(v);
        }
        let v = cast(v, self.in_type(), s)?;
        match self {
            Conv::Stk(_) | Conv::SetVar(_) => None,
            Conv::Extra(e) => e.apply(v, ctx, s),
            Conv::Lower => {
                s.cur.make_ascii_lowercase();
                Some(Val::Str)
            }
            Conv::Upper => {
                s.cur.make_ascii_uppercase();
                Some(Val::Str)
            }
            Conv::Base64 => {
                s.tmp.clear();
                base64_encode(&s.cur, &mut s.tmp);
                swap(s, Val::Str)
            }
            Conv::B64Dec => {
                s.tmp.clear();
                base64_decode(&s.cur, &mut s.tmp)?;
                swap(s, Val::Bin)
            }
            Conv::Hex => {
                s.tmp.clear();
                for b in &s.cur {
                    let _ = write!(s.tmp, "{b:02X}");
                }
                swap(s, Val::Str)
            }
            Conv::Field {
                word,
                n,
                delims,
                count,
            } => {
                let (a, b) = if *word {
                    word_span(&s.cur, *n, delims, *count)?
                } else {
                    field(&s.cur, *n, delims, *count, false)?
                };
                s.cur.truncate(b);
                s.cur.drain(..a);
                Some(Val::Str)
            }
            Conv::Regsub { re, subst, global } => {
                // HAProxy's loop: after a match the search goes on from
                // its end, where an empty match counts again; an empty
                // match where the search starts copies one byte and moves
                // past it. A match at the end stops.
                s.tmp.clear();
                let mut start = 0;
                loop {
                    let m = re
                        .captures_at(&s.cur, start)
                        .and_then(|c| Some((c.get(0)?.range(), c)));
                    let Some((m, caps)) = m else {
                        s.tmp.extend_from_slice(&s.cur[start..]);
                        break;
                    };
                    s.tmp.extend_from_slice(&s.cur[start..m.start]);
                    caps.expand(subst, &mut s.tmp);
                    if start >= s.cur.len() {
                        break;
                    }
                    start = if m.end == start {
                        s.tmp.push(s.cur[start]);
                        start + 1
                    } else {
                        m.end
                    };
                    if !*global {
                        s.tmp.extend_from_slice(&s.cur[start..]);
                        break;
                    }
                }
                swap(s, Val::Str)
            }
            Conv::JsonQuery(path, int) => json_query(path, *int, s),
            Conv::Json(mode) => {
                s.tmp.clear();
                let mut p = 0;
                while p < s.cur.len() {
                    let c = if *mode == JsonIn::Ascii {
                        p += 1;
                        u32::from(s.cur[p - 1])
                    } else {
                        let (c, n, bad) = utf8_next(&s.cur[p..]);
                        p += n.max(1);
                        let strict = matches!(mode, JsonIn::Utf8 | JsonIn::Utf8p);
                        let refused = match mode {
                            JsonIn::Utf8 | JsonIn::Utf8s => bad != 0,
                            _ => bad & (UTF8_INVRANGE | UTF8_BADSEQ) != 0,
                        };
                        if refused || c > 0xffff {
                            if strict {
                                return None;
                            }
                            continue;
                        }
                        c
                    };
                    match c {
                        0x22 => s.tmp.extend_from_slice(b"\\\""),
                        0x5c => s.tmp.extend_from_slice(b"\\\\"),
                        0x2f => s.tmp.extend_from_slice(b"\\/"),
                        0x08 => s.tmp.extend_from_slice(b"\\b"),
                        0x0c => s.tmp.extend_from_slice(b"\\f"),
                        0x0d => s.tmp.extend_from_slice(b"\\r"),
                        0x0a => s.tmp.extend_from_slice(b"\\n"),
                        0x09 => s.tmp.extend_from_slice(b"\\t"),
                        32..=126 => s.tmp.push(c as u8),
                        c => {
                            let _ = write!(s.tmp, "\\u{:04x}", c);
                        }
                    }
                }
                swap(s, Val::Str)
            }
            Conv::Bytes { off, len } => {
                let l = s.cur.len();
                let a = (*off as usize).min(l);
                let b = match len {
                    Some(n) => a.saturating_add(*n as usize).min(l),
                    None => l,
                };
                s.cur.truncate(b);
                s.cur.drain(..a);
                Some(Val::Bin)
            }
            Conv::Length => Some(Val::Int(s.cur.len() as i64)),
            // HAProxy's: no sample at the first byte that is no hex digit;
            // digits past 16 shift the first ones out.
            Conv::Hex2i => s
                .cur
                .iter()
                .try_fold(0i64, |n, &b| {
                    let d = crate::http1::hex_value(b)?;
                    Some(n.wrapping_shl(4).wrapping_add(i64::from(d)))
                })
                .map(Val::Int),
            Conv::FixIsValid
            | Conv::FixTagValue(_)
            | Conv::MqttIsValid
            | Conv::MqttFieldValue(..) => {
                // The converter decides whether more bytes could change
                // its answer (HAProxy clears the fetch's SMP_F_MAY_CHANGE
                // and sets it only when the message needs more data).
                if let Some(p) = ctx.payload {
                    p.may_change.set(false);
                }
                let got = match self {
                    Conv::FixIsValid => match super::fix::validate(&s.cur) {
                        super::fix::Verdict::Valid => Ok(Val::Bool(true)),
                        super::fix::Verdict::Invalid => Ok(Val::Bool(false)),
                        super::fix::Verdict::NeedMore => Err(true),
                    },
                    Conv::FixTagValue(id) => match super::fix::tag_value(&s.cur, *id) {
                        // An empty value is no value (HAProxy's test on
                        // the length), and asks for more as it does.
                        super::fix::Found::Value(r) if !r.is_empty() => {
                            s.cur.truncate(r.end);
                            s.cur.drain(..r.start);
                            Ok(Val::Bin)
                        }
                        super::fix::Found::Absent => Err(false),
                        _ => Err(true),
                    },
                    Conv::MqttIsValid => match super::mqtt::validate(&s.cur) {
                        super::mqtt::Verdict::Valid => Ok(Val::Bool(true)),
                        super::mqtt::Verdict::Invalid => Ok(Val::Bool(false)),
                        super::mqtt::Verdict::NeedMore => Err(true),
                    },
                    Conv::MqttFieldValue(kind, f) => {
                        match super::mqtt::field_value(&s.cur, *kind, *f) {
                            super::mqtt::Found::Value(v) => {
                                s.cur.clear();
                                s.cur.extend_from_slice(&v);
                                Ok(Val::Str)
                            }
                            super::mqtt::Found::Absent => Err(false),
                            super::mqtt::Found::NeedMore => Err(true),
                        }
                    }
                    _ => Err(false),
                };
                match got {
                    Ok(v) => Some(v),
                    Err(more) => {
                        if let (true, Some(p)) = (more, ctx.payload) {
                            p.unsure();
                        }
                        None
                    }
                }
            }
            Conv::Arith(op, arg) => {
                let Val::Int(x) = v else { return None };
                let y = match arg {
                    ArithArg::Int(i) => *i,
                    // A variable not set (or not a number) fails the
                    // conversion, as HAProxy's sample_conv_var2smp_sint.
                    ArithArg::Var(r) => {
                        let got = ctx.vars?.try_borrow_mut().ok()?.get(r, s)?;
                        match cast(got, Type::Int, s)? {
                            Val::Int(i) => i,
                            _ => return None,
                        }
                    }
                };
                Some(Val::Int(arith(*op, x, y)))
            }
            Conv::Neg => {
                let Val::Int(x) = v else { return None };
                // HAProxy caps -LLONG_MIN at LLONG_MAX.
                Some(Val::Int(x.checked_neg().unwrap_or(i64::MAX)))
            }
            Conv::Cpl => {
                let Val::Int(x) = v else { return None };
                Some(Val::Int(!x))
            }
            Conv::IntTest(t) => {
                let Val::Int(x) = v else { return None };
                Some(Val::Bool(match t {
                    IntTest::NonZero => x != 0,
                    IntTest::Zero => x == 0,
                    IntTest::Odd => x & 1 == 1,
                    IntTest::Even => x & 1 == 0,
                }))
            }
            Conv::IpMask { v4, v6 } => {
                let Val::Ip(ip) = v else { return None };
                // HAProxy's sample_conv_ipmask: an IPv4-mapped address is
                // masked as the IPv4 address it maps.
                let ip = match ip {
                    IpAddr::V6(a) => a.to_ipv4_mapped().map_or(ip, IpAddr::V4),
                    v4 => v4,
                };
                Some(Val::Ip(match ip {
                    IpAddr::V4(a) => IpAddr::V4((u32::from(a) & v4).into()),
                    IpAddr::V6(a) => IpAddr::V6((u128::from(a) & (*v6)?).into()),
                }))
            }
            Conv::HostOnly => {
                if let Some(i) = port_colon(&s.cur) {
                    s.cur.truncate(i);
                }
                s.cur.make_ascii_lowercase();
                Some(Val::Str)
            }
            Conv::PortOnly => {
                // HAProxy's strl2ui over every byte after the colon,
                // digits or not ("c" gives 51, "-5" 4294967271).
                let port = port_colon(&s.cur).map_or(0, |i| {
                    s.cur[i + 1..].iter().fold(0u32, |n, &d| {
                        n.wrapping_mul(10)
                            .wrapping_sub(u32::from(b'0'))
                            .wrapping_add(u32::from(d))
                    })
                });
                Some(Val::Int(i64::from(port)))
            }
            Conv::UrlDec { plus } => {
                s.tmp.clear();
                url_decode(&s.cur, *plus, &mut s.tmp)?;
                swap(s, Val::Str)
            }
            Conv::Hash { f, avalanche } => {
                let h = match f {
                    HashFn::Sdbm => hash::sdbm(&s.cur),
                    HashFn::Djb2 => hash::djb2(&s.cur),
                    HashFn::Wt6 => hash::wt6(&s.cur),
                    HashFn::Crc32 => hash::crc32(&s.cur),
                    HashFn::Crc32c => hash::crc32c(&s.cur),
                };
                let h = if *avalanche { hash::full_hash(h) } else { h };
                Some(Val::Int(h as i64))
            }
            // HAProxy gives xxh32's value unsigned, the 64-bit ones as
            // signed integers.
            Conv::Xxh(f, seed) => Some(Val::Int(match f {
                Xxh::H32 => hash::xxh32(&s.cur, *seed as u32) as i64,
                Xxh::H64 => hash::xxh64(&s.cur, *seed) as i64,
                Xxh::H3 => hash::xxh3(&s.cur, *seed) as i64,
            })),
            Conv::Map(m) => m.apply(v, s),
            Conv::AddItem { delim, var, suffix } => {
                let mut tail = Scratch::default();
                if let Some(r) = var {
                    var_str(ctx, r, &mut tail);
                }
                tail.cur.extend_from_slice(suffix);
                // The delimiter only between two non-empty parts.
                if !s.cur.is_empty() && !tail.cur.is_empty() {
                    s.cur.extend_from_slice(delim);
                }
                s.cur.extend_from_slice(&tail.cur);
                Some(Val::Str)
            }
            Conv::Be2 {
                hex,
                sep,
                chunk,
                truncate,
            } => {
                s.tmp.clear();
                for (i, ch) in s.cur.chunks(*chunk).enumerate() {
                    if *truncate && ch.len() < *chunk {
                        break;
                    }
                    if i > 0 {
                        s.tmp.extend_from_slice(sep);
                    }
                    if *hex {
                        for b in ch {
                            let _ = write!(s.tmp, "{b:02X}");
                        }
                    } else {
                        let n = ch.iter().fold(0u64, |n, &b| n << 8 | u64::from(b));
                        let _ = write!(s.tmp, "{n}");
                    }
                }
                swap(s, Val::Str)
            }
            Conv::HttpDate {
                offset,
                per_sec,
                frac,
            } => {
                let Val::Int(n) = v else { return None };
                // As HAProxy 2.6: truncating division, the fraction as a
                // plain `%d` (".42", "-7") when a unit other than `s` is
                // named, and the seconds masked to 55 bits.
                let n = n.wrapping_add(*offset);
                let sec_frac = n % per_sec;
                let secs = (n / per_sec) & 0x007f_ffff_ffff_ffff;
                let (days, rem) = (secs / 86_400, secs % 86_400);
                let (y, m, d) = crate::calendar::civil_from_days(days);
                s.cur.clear();
                let _ = write!(
                    s.cur,
                    "{}, {d:02} {} {y:04} {:02}:{:02}:{:02}",
                    crate::calendar::weekday_abbr(days),
                    crate::calendar::month_abbr(m),
                    rem / 3600,
                    rem / 60 % 60,
                    rem % 60
                );
                if *frac {
                    let _ = write!(s.cur, ".{sec_frac}");
                }
                s.cur.extend_from_slice(b" GMT");
                Some(Val::Str)
            }
            Conv::Iif(t, f) => {
                let Val::Bool(b) = v else { return None };
                s.cur.clear();
                s.cur.extend_from_slice(if b { t } else { f });
                Some(Val::Str)
            }
            Conv::UrlEnc => {
                s.tmp.clear();
                for &c in &s.cur {
                    if c.is_ascii_alphanumeric() || matches!(c, b'-' | b'.' | b'_' | b'~') {
                        s.tmp.push(c);
                    } else {
                        let _ = write!(s.tmp, "%{c:02X}");
                    }
                }
                swap(s, Val::Str)
            }
            Conv::Ub64Enc => {
                s.tmp.clear();
                base64_encode(&s.cur, &mut s.tmp);
                while s.tmp.last() == Some(&b'=') {
                    s.tmp.pop();
                }
                for c in &mut s.tmp {
                    match *c {
                        b'+' => *c = b'-',
                        b'/' => *c = b'_',
                        _ => {}
                    }
                }
                swap(s, Val::Str)
            }
            Conv::Ub64Dec => {
                s.tmp.clear();
                ub64_decode(&s.cur, &mut s.tmp)?;
                swap(s, Val::Bin)
            }
            Conv::Digest(alg) => {
                let d = ring::digest::digest(alg, &s.cur);
                s.cur.clear();
                s.cur.extend_from_slice(d.as_ref());
                Some(Val::Bin)
            }
            Conv::Sha224 => {
                use sha2::Digest;
                let d = sha2::Sha224::digest(&s.cur);
                s.cur.clear();
                s.cur.extend_from_slice(&d);
                Some(Val::Bin)
            }
            Conv::MsgDigest(md) => {
                s.tmp.clear();
                md.digest(&[&s.cur], &mut s.tmp);
                swap(s, Val::Bin)
            }
            Conv::Hmac(md, key) => {
                let mut k = Vec::new();
                let key = match key {
                    StrArg::Lit(k) => k,
                    StrArg::Var(r) => {
                        let mut x = Scratch::default();
                        if !var_as(ctx, r, Type::Str, &mut x) {
                            return None;
                        }
                        base64_decode(&x.cur, &mut k)?;
                        &k
                    }
                };
                s.tmp.clear();
                md.hmac(key, &s.cur, &mut s.tmp);
                swap(s, Val::Bin)
            }
            Conv::SecureMemcmp(r) => {
                let mut x = Scratch::default();
                if !var_as(ctx, r, Type::Bin, &mut x) {
                    return None;
                }
                Some(Val::Bool(crypto::same_bytes(&s.cur, &x.cur)))
            }
            Conv::JwtQuery(part, q) => {
                // Without a path HAProxy 2.6 decodes the part and gives
                // no sample (its `sample_conv_jwt_member_query` returns
                // 0 there; 2.6.12 still does).
                let (path, int) = q.as_ref()?;
                s.tmp.clear();
                crypto::jwt_member(&s.cur, *part, &mut s.tmp)?;
                std::mem::swap(&mut s.cur, &mut s.tmp);
                json_query(path, *int, s)
            }
            Conv::JwtVerify(alg, key) => {
                let mut a = Scratch::default();
                let alg = match alg {
                    StrArg::Lit(a) => a,
                    StrArg::Var(r) => {
                        if !var_as(ctx, r, Type::Str, &mut a) {
                            return None;
                        }
                        &a.cur
                    }
                };
                let mut k = Scratch::default();
                let (key, loaded) = match key {
                    crypto::JwtKey::Lit(k, l) => (k, l.as_ref()),
                    crypto::JwtKey::Var(r) => {
                        if !var_as(ctx, r, Type::Str, &mut k) {
                            return None;
                        }
                        (&k.cur, None)
                    }
                };
                Some(Val::Int(crypto::jwt_verify(&s.cur, alg, key, loaded)))
            }
            Conv::Concat { start, var, end } => {
                s.cur.extend_from_slice(start);
                if let Some(r) = var {
                    let mut x = Scratch::default();
                    if var_str(ctx, r, &mut x) {
                        s.cur.extend_from_slice(&x.cur);
                    }
                }
                s.cur.extend_from_slice(end);
                Some(Val::Str)
            }
            Conv::StrCmp(r) => {
                let mut x = Scratch::default();
                if !var_str(ctx, r, &mut x) {
                    return None;
                }
                // HAProxy 2.6's: strncmp over the shorter length (the
                // difference of the first bytes that differ, up to a NUL
                // in both), then -1 or 1 for the shorter or longer one.
                let mut d = 0;
                for (a, b) in s.cur.iter().zip(&x.cur) {
                    if a != b {
                        d = i64::from(*a) - i64::from(*b);
                        break;
                    }
                    if *a == 0 {
                        break;
                    }
                }
                if d == 0 {
                    d = match s.cur.len().cmp(&x.cur.len()) {
                        std::cmp::Ordering::Less => -1,
                        std::cmp::Ordering::Equal => 0,
                        std::cmp::Ordering::Greater => 1,
                    };
                }
                Some(Val::Int(d))
            }
        }
    }
}

/// `json_query`'s answer for the JSON in `s.cur`.
fn json_query(path: &super::jsonq::Path, int: bool, s: &mut Scratch) -> Option<Val> {
    use super::jsonq::{num_g, num_int, query, Found};
    match query(&s.cur, path)? {
        Found::Bool(b) => Some(Val::Bool(b)),
        Found::Num(n) if int => Some(Val::Int(num_int(&n)?)),
        Found::Num(n) => {
            let g = num_g(&n)?;
            s.cur.clear();
            s.cur.extend_from_slice(g.as_bytes());
            Some(Val::Str)
        }
        Found::Str(v) => {
            s.cur.clear();
            s.cur.extend_from_slice(&v);
            Some(Val::Str)
        }
    }
}

/// The digest a converter's argument names (OpenSSL's names).
fn md_arg(name: &str, a: &str) -> Result<crypto::Md, String> {
    crypto::Md::by_name(a).ok_or_else(|| {
        format!(
            "converter '{name}': algorithm must be a valid OpenSSL message digest name ('{a}': ebb computes md5, sha1, sha224, sha256, sha384, sha512, sha512-224 and sha512-256, under OpenSSL's names)"
        )
    })
}

/// The value of variable `r` as a string in `out.cur`; false when it is
/// not set (or cannot be a string).
fn var_str(ctx: &Ctx<'_>, r: &super::VarRef, out: &mut Scratch) -> bool {
    var_as(ctx, r, Type::Str, out)
}

/// The value of variable `r` cast to `ty` in `out.cur`; false when it is
/// not set (or cannot be cast).
fn var_as(ctx: &Ctx<'_>, r: &super::VarRef, ty: Type, out: &mut Scratch) -> bool {
    let Some(store) = ctx.vars else {
        return false;
    };
    let got = store
        .try_borrow_mut()
        .ok()
        .and_then(|mut st| st.get(r, out));
    match got.and_then(|x| cast(x, ty, out)) {
        Some(_) => true,
        None => {
            out.cur.clear();
            false
        }
    }
}

fn swap(s: &mut Scratch, v: Val) -> Option<Val> {
    std::mem::swap(&mut s.cur, &mut s.tmp);
    Some(v)
}

/// HAProxy's integer arithmetic: saturating; division or modulo by zero
/// gives the largest integer (div) or 0 (mod), as its converters do.
pub(super) fn arith(op: Op, x: i64, y: i64) -> i64 {
    match op {
        Op::Add => x.saturating_add(y),
        Op::Sub => x.saturating_sub(y),
        Op::Mul => x.saturating_mul(y),
        Op::And => x & y,
        Op::Or => x | y,
        Op::Xor => x ^ y,
        Op::Div => {
            if y == 0 {
                i64::MAX
            } else {
                x.checked_div(y).unwrap_or(i64::MAX)
            }
        }
        Op::Mod => {
            if y == 0 {
                0
            } else {
                x.checked_rem(y).unwrap_or(0)
            }
        }
    }
}

/// The byte range `field` / `word` select. Fields are split on every
/// delimiter (empty fields count); words skip empty runs. A negative
/// index counts from the end; `count` fields are taken (0: to the end).
pub(super) fn field(
    b: &[u8],
    n: i64,
    delims: &[u8],
    count: i64,
    word: bool,
) -> Option<(usize, usize)> {
    let is_d = |c: u8| delims.contains(&c);
    // Spans of every field (or word) in order.
    let mut spans: Vec<(usize, usize)> = Vec::new();
    let mut start = 0;
    for i in 0..=b.len() {
        if i == b.len() || is_d(b[i]) {
            if !word || i > start {
                spans.push((start, i));
            }
            start = i + 1;
        }
    }
    let len = spans.len() as i64;
    let (first, last) = if n > 0 {
        let f = n - 1;
        let l = if count == 0 { len - 1 } else { f + count - 1 };
        (f, l.min(len - 1))
    } else {
        let l = len + n;
        let f = if count == 0 { 0 } else { l - count + 1 };
        (f.max(0), l)
    };
    // A field that does not exist gives no value (HAProxy's field fails
    // then: `-m found` sees nothing; `word` is `word_span`'s).
    if first < 0 || first >= len || last < first {
        return None;
    }
    Some((spans[first as usize].0, spans[last as usize].1))
}

/// The byte range `word(n,delims,count)` selects, walked as HAProxy 2.6
/// walks it (`sample_conv_word`): from the start (from the end for a
/// negative `n`), a word starts at a byte that is no delimiter; the
/// range runs from the `n`th word's start to the delimiter that ends its
/// `count`th word, or to the far end of the value when the value ends
/// first, delimiters included (`word(1,/,2)` of `a/` is `a/`,
/// `word(-1,/,2)` of `/a` is `/a`). A word that is not there is the
/// empty string (the word is found: `-m found` holds); `n` 0 is no value.
fn word_span(b: &[u8], n: i64, delims: &[u8], count: i64) -> Option<(usize, usize)> {
    if n == 0 {
        return None;
    }
    let fwd = n > 0;
    let step = if fwd { 1 } else { -1 };
    // `at` walks (the end of the range going forward, its start going
    // back); `mark` is the range's other side.
    let mut at = if fwd { 0 } else { b.len() };
    let mut mark = at;
    let span = |mark: usize, at: usize| if fwd { (mark, at) } else { (at, mark) };
    let (mut word, mut inword, mut left) = (0i64, false, count);
    while if fwd { at < b.len() } else { at > 0 } {
        let issep = delims.contains(&b[if fwd { at } else { at - 1 }]);
        if !inword {
            if !issep {
                if word != n {
                    word += step;
                    mark = at;
                }
                inword = true;
            }
        } else if issep {
            if word == n {
                if left == 1 {
                    return Some(span(mark, at));
                }
                left -= i64::from(left > 1);
            }
            inword = false;
        }
        at = if fwd { at + 1 } else { at - 1 };
    }
    Some(if word == n { span(mark, at) } else { (0, 0) })
}

/// Where the port of `host[:port]` starts, as HAProxy 2.6's `host_only`
/// and `port_only` find it: the last `:` after any `]` (`a:80:90` is
/// host `a:80`, `[::1]` has none), whatever follows it.
fn port_colon(b: &[u8]) -> Option<usize> {
    let i = b.iter().rposition(|&c| c == b':' || c == b']')?;
    (b[i] == b':').then_some(i)
}

const B64: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

pub(crate) fn base64_encode(inp: &[u8], out: &mut Vec<u8>) {
    for ch in inp.chunks(3) {
        let n = (ch[0] as u32) << 16
            | (*ch.get(1).unwrap_or(&0) as u32) << 8
            | *ch.get(2).unwrap_or(&0) as u32;
        out.push(B64[(n >> 18) as usize & 63]);
        out.push(B64[(n >> 12) as usize & 63]);
        out.push(if ch.len() > 1 {
            B64[(n >> 6) as usize & 63]
        } else {
            b'='
        });
        out.push(if ch.len() > 2 {
            B64[n as usize & 63]
        } else {
            b'='
        });
    }
}

/// RFC 6455 §4.2.2: the `Sec-WebSocket-Accept` answering `key` (the
/// base64 SHA-1 of the key and the protocol's GUID: what `concat(GUID),
/// sha1,base64` computes).
pub(crate) fn websocket_accept(key: &[u8]) -> Vec<u8> {
    let mut ctx = ring::digest::Context::new(&ring::digest::SHA1_FOR_LEGACY_USE_ONLY);
    ctx.update(key);
    ctx.update(b"258EAFA5-E914-47DA-95CA-C5AB0DC85B11");
    let mut out = Vec::with_capacity(28);
    base64_encode(ctx.finish().as_ref(), &mut out);
    out
}

/// A new `Sec-WebSocket-Key`: 16 random bytes in base64 (RFC 6455 §4.1).
pub(crate) fn websocket_key() -> [u8; 24] {
    use ring::rand::SecureRandom;
    let mut raw = [0u8; 16];
    if ring::rand::SystemRandom::new().fill(&mut raw).is_err() {
        // No system randomness: any nonce serves the handshake's check.
        let t = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos());
        raw = t.to_le_bytes();
    }
    let mut v = Vec::with_capacity(24);
    base64_encode(&raw, &mut v);
    let mut key = [0u8; 24];
    key.copy_from_slice(&v[..24]);
    key
}

/// base64url without padding (HAProxy 2.6's `base64urldec`, what
/// `ub64dec` and the JWT converters read), appended to `out`; `None` on
/// bad input.
pub(super) fn ub64_decode(inp: &[u8], out: &mut Vec<u8>) -> Option<()> {
    // Back to standard base64 with its padding.
    let mut std64 = Vec::with_capacity(inp.len() + 2);
    for &c in inp {
        std64.push(match c {
            b'-' => b'+',
            // HAProxy 2.6's table reads `=` as 63, as `_`.
            b'_' | b'=' => b'/',
            b'+' | b'/' => return None,
            c => c,
        });
    }
    match std64.len() % 4 {
        0 => {}
        1 => return None,
        n => std64.extend(std::iter::repeat_n(b'=', 4 - n)),
    }
    base64_decode(&std64, out)
}

/// Strict base64 (padding required, as HAProxy's b64dec); `None` on bad
/// input.
pub(super) fn base64_decode(inp: &[u8], out: &mut Vec<u8>) -> Option<()> {
    if inp.len() % 4 != 0 {
        return None;
    }
    let val = |c: u8| -> Option<u32> {
        Some(match c {
            b'A'..=b'Z' => c - b'A',
            b'a'..=b'z' => c - b'a' + 26,
            b'0'..=b'9' => c - b'0' + 52,
            b'+' => 62,
            b'/' => 63,
            _ => return None,
        } as u32)
    };
    let chunks = inp.len() / 4;
    for (i, ch) in inp.chunks(4).enumerate() {
        let pad = if i + 1 == chunks {
            ch.iter().rev().take_while(|&&c| c == b'=').count()
        } else {
            0
        };
        if pad > 2 {
            return None;
        }
        let mut n = 0u32;
        for &c in &ch[..4 - pad] {
            n = n << 6 | val(c)?;
        }
        n <<= 6 * pad as u32;
        out.push((n >> 16) as u8);
        if pad < 2 {
            out.push((n >> 8) as u8);
        }
        if pad < 1 {
            out.push(n as u8);
        }
    }
    Some(())
}

/// `%XX` decoding (and `+` as space when `plus`); `None` on a bad escape,
/// as HAProxy's url_dec fails.
pub(super) fn url_decode(inp: &[u8], mut plus: bool, out: &mut Vec<u8>) -> Option<()> {
    let mut i = 0;
    while i < inp.len() {
        match inp[i] {
            b'%' => {
                let h = inp.get(i + 1..i + 3)?;
                let s = std::str::from_utf8(h).ok()?;
                out.push(u8::from_str_radix(s, 16).ok()?);
                i += 3;
            }
            b'+' if plus => {
                out.push(b' ');
                i += 1;
            }
            // HAProxy: without the flag, '+' is a space in the query only.
            b'?' => {
                out.push(b'?');
                plus = true;
                i += 1;
            }
            c => {
                out.push(c);
                i += 1;
            }
        }
    }
    Some(())
}

const UTF8_OVERLONG: u8 = 0x10;
const UTF8_INVRANGE: u8 = 0x20;
const UTF8_BADSEQ: u8 = 0x40;

/// HAProxy's `utf8_next`: the code point at the start of `b`, the bytes
/// it takes, and what is wrong with it (`UTF8_*` bits). A lead byte
/// without room for its sequence, or a stray continuation byte, is one
/// bad byte; a sequence cut by a byte that is no continuation ends
/// before that byte.
fn utf8_next(b: &[u8]) -> (u32, usize, u8) {
    let Some(&first) = b.first() else {
        return (0, 0, 0);
    };
    let (mut c, more) = match first {
        0x00..=0x7f => return (u32::from(first), 1, 0),
        0xc0..=0xdf => (u32::from(first & 0x1f), 1),
        0xe0..=0xef => (u32::from(first & 0x0f), 2),
        0xf0..=0xf7 => (u32::from(first & 0x07), 3),
        0xf8..=0xfb => (u32::from(first & 0x03), 4),
        0xfc..=0xfd => (u32::from(first & 0x01), 5),
        _ => return (u32::from(first), 1, UTF8_BADSEQ),
    };
    if b.len() < more + 1 {
        return (u32::from(first), 1, UTF8_BADSEQ);
    }
    for (i, &x) in b.iter().enumerate().take(more + 1).skip(1) {
        if x & 0xc0 != 0x80 {
            return (c, i, UTF8_BADSEQ);
        }
        c = (c << 6) | u32::from(x & 0x3f);
    }
    let n = more + 1;
    let mut code = 0;
    if (c <= 0x7f && n > 1)
        || ((0x80..=0x7ff).contains(&c) && n > 2)
        || ((0x800..=0xffff).contains(&c) && n > 3)
        || ((0x10000..=0x1f_ffff).contains(&c) && n > 4)
    {
        code |= UTF8_OVERLONG;
    }
    if (0xd800..=0xdfff).contains(&c) || (0xfffe..=0xffff).contains(&c) {
        code |= UTF8_INVRANGE;
    }
    (c, n, code)
}
