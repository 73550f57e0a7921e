//! More converters (configuration.txt 7.3.1), kept apart from `conv` for
//! its size: those that read the running proxies (`nbsrv`, `srv_queue`)
//! and the text, time and message converters added with them.
//!
//! Each is a variant of [`Extra`], which `conv::Conv` holds as one of its
//! own: compiled from its name and arguments, typed (what it takes, what
//! it gives) and applied to the scratch buffers like the others.

use super::{Count, Ctx, Scratch, Type, Val};

#[derive(Clone, Debug)]
pub(super) enum Extra {
    /// `nbsrv`: the usable servers of the backend the string names.
    Nbsrv,
    /// `srv_queue`: the queue length of the server the string names
    /// (`BACKEND/SERVER`, or `SERVER` in the stream's backend).
    SrvQueue,
}

impl Extra {
    /// The converter named `name`, when it is one of these; `Err` for bad
    /// arguments.
    pub(super) fn compile(name: &str, args: &[String]) -> Option<Result<Extra, String>> {
        let none = |c: Extra| -> Result<Extra, String> {
            if !args.is_empty() {
                return Err(format!("converter '{name}' takes no argument"));
            }
            Ok(c)
        };
        Some(match name {
            "nbsrv" => none(Extra::Nbsrv),
            "srv_queue" => none(Extra::SrvQueue),
            _ => return None,
        })
    }

    pub(super) fn in_type(&self) -> Type {
        match self {
            Extra::Nbsrv | Extra::SrvQueue => Type::Str,
        }
    }

    pub(super) fn out_type(&self) -> Type {
        match self {
            Extra::Nbsrv | Extra::SrvQueue => Type::Int,
        }
    }

    /// Applies it to `v`, already cast to [`Extra::in_type`].
    pub(super) fn apply(&self, v: Val, ctx: &Ctx<'_>, s: &mut Scratch) -> Option<Val> {
        let _ = v;
        match self {
            // HAProxy's sample_conv_nbsrv, sample_conv_srv_queue: the
            // names looked up at each call (no such proxy or server: no
            // sample).
            Extra::Nbsrv => {
                let name = std::str::from_utf8(&s.cur).ok()?;
                super::count(Count::Nbsrv, name, None).map(Val::Int)
            }
            Extra::SrvQueue => {
                let text = std::str::from_utf8(&s.cur).ok()?;
                let (be, srv) = match text.split_once('/') {
                    Some((b, srv)) => (b, srv),
                    None => (ctx.be?, text),
                };
                super::count(Count::SrvQueue, be, Some(srv)).map(Val::Int)
            }
        }
    }
}
