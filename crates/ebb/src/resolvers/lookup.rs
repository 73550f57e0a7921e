//! Names a stream asks a `resolvers` section for: HAProxy 2.6's
//! `do-resolve(VAR,RESOLVERS[,ipv4|ipv6]) EXPR` (`http-request`,
//! `tcp-request content`).
//!
//! A stream's rule hands the name to the section ([`ask`]) and either has
//! its answer at once, or waits: the section's tasklet takes the name at
//! its next run and joins it to the resolution of that name and family
//! (one a server resolving the same name already runs, as HAProxy shares
//! a resolution between its requesters, or a new one), which starts now
//! unless it is under way. When that resolution ends, valid or not, every
//! stream waiting for it gets the address of the preferred family (the
//! other when the answer has none), or nothing ([`Lookup::finish`]), and
//! its tasklet is woken, on whatever thread it runs.
//!
//! At once: while a resolution of the name holds a valid answer younger
//! than `hold valid` (HAProxy's cache of a resolution that has other
//! requesters), the stream takes it without a query; the sections publish
//! those answers for that ([`Fresh`]).

use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::{Arc, Mutex};
use std::time::Instant;

use sched::{RuntimeHandle, TaskletId};

/// A name asked for, and who waits for the answer.
pub struct Lookup {
    /// The name as a resolution knows it: lower case, no trailing dot.
    pub(super) name: String,
    pub(super) prefer_v4: bool,
    state: Mutex<State>,
}

#[derive(Default)]
struct State {
    /// `None` while the resolution runs; then the address, if any.
    done: Option<Option<IpAddr>>,
    waker: Option<(RuntimeHandle, TaskletId)>,
}

impl Lookup {
    /// The answer: `None` while the resolution runs, then the address
    /// (`Some(None)`: the resolution failed or gave none).
    pub fn result(&self) -> Option<Option<IpAddr>> {
        self.state.lock().unwrap_or_else(|p| p.into_inner()).done
    }

    /// Asks for tasklet `id` (on the runtime of `h`) to be woken once the
    /// answer is there; false when it is there already (no wakeup comes).
    pub fn wake_when_done(&self, h: RuntimeHandle, id: TaskletId) -> bool {
        let mut st = self.state.lock().unwrap_or_else(|p| p.into_inner());
        if st.done.is_some() {
            return false;
        }
        st.waker = Some((h, id));
        true
    }

    /// The resolution ended: the answer, and the waiting stream woken.
    pub(super) fn finish(&self, addr: Option<IpAddr>) {
        let waker = {
            let mut st = self.state.lock().unwrap_or_else(|p| p.into_inner());
            st.done = Some(addr);
            st.waker.take()
        };
        if let Some((h, id)) = waker {
            h.wake_tasklet(id);
        }
    }
}

/// What [`ask`] gives.
pub enum Asked {
    /// The answer, from a fresh valid one.
    Now(Option<IpAddr>),
    /// The resolution runs: wait for this.
    Wait(Arc<Lookup>),
}

/// The valid answers of a section's resolutions, by (name, whether IPv4
/// is preferred): when each came, and its addresses.
pub(super) type Fresh = HashMap<(String, bool), (Instant, Vec<(IpAddr, u32)>)>;

/// HAProxy's `resolv_str_to_dn_label` on a name to resolve: lower case,
/// one trailing dot dropped; `None` for an empty label (a leading dot, two
/// dots in a row), which HAProxy cannot encode (the action is then
/// ignored).
pub fn dn_name(name: &[u8]) -> Option<String> {
    let name = std::str::from_utf8(name).ok()?;
    let name = name.strip_suffix('.').unwrap_or(name);
    if name.is_empty() || name.split('.').any(str::is_empty) {
        return None;
    }
    Some(name.to_ascii_lowercase())
}

/// Asks section `section` for `name` (as [`dn_name`] made it), IPv4 or
/// IPv6 (`prefer_v4`) first; `None` when no such section runs.
pub fn ask(section: &str, name: String, prefer_v4: bool) -> Option<Asked> {
    let sec = super::sections()
        .into_iter()
        .find(|s| s.cfg.name == section)?;
    let hold = sec.cfg.holds.valid;
    let key = (name, prefer_v4);
    let fresh = sec
        .fresh
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .get(&key)
        .filter(|(t, _)| t.elapsed() <= hold)
        .map(|(_, addrs)| crate::dns::preferred(addrs, !prefer_v4));
    if let Some(a) = fresh {
        return Some(Asked::Now(a));
    }
    let l = Arc::new(Lookup {
        name: key.0,
        prefer_v4,
        state: Mutex::new(State::default()),
    });
    sec.asks
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .push(Arc::clone(&l));
    if let Some((h, id)) = sec.wake.get() {
        h.wake_tasklet(*id);
    }
    Some(Asked::Wait(l))
}

/// A `do-resolve` rule runs for the exchange of `ctx`: the name its
/// expression gives (as a string) asked for. A fresh answer sets the
/// variable at once; otherwise the lookup to wait for, or `None` when
/// there is nothing to wait for (no name, one HAProxy cannot encode:
/// the rule does nothing, as there).
pub fn start(d: &crate::config::DoResolve, ctx: &crate::sample::Ctx<'_>) -> Option<Arc<Lookup>> {
    use crate::sample::{cast, with_scratch, Type};
    let name = with_scratch(|s| {
        let v = d.expr.eval(ctx, s)?;
        cast(v, Type::Str, s)?;
        dn_name(&s.cur)
    })?;
    match ask(&d.resolvers, name, d.prefer_v4)? {
        Asked::Now(ip) => {
            set_var(d, ip, ctx);
            None
        }
        Asked::Wait(l) => Some(l),
    }
}

/// The lookup a `do-resolve` rule waited for ended: its variable takes
/// the address found (none found: the variable is left as it was).
pub fn end(d: &crate::config::DoResolve, l: &Lookup, ctx: &crate::sample::Ctx<'_>) {
    set_var(d, l.result().flatten(), ctx);
}

fn set_var(d: &crate::config::DoResolve, ip: Option<IpAddr>, ctx: &crate::sample::Ctx<'_>) {
    let (Some(ip), Some(store)) = (ip, ctx.vars) else {
        return;
    };
    if let Ok(mut st) = store.try_borrow_mut() {
        let s = crate::sample::Scratch::default();
        st.set(&d.var, crate::sample::Val::Ip(ip), &s);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_made_as_haproxy_encodes_them() {
        assert_eq!(
            dn_name(b"WWW.Example.com.").as_deref(),
            Some("www.example.com")
        );
        assert_eq!(dn_name(b"a.b").as_deref(), Some("a.b"));
        assert_eq!(dn_name(b".a"), None);
        assert_eq!(dn_name(b"a..b"), None);
        assert_eq!(dn_name(b""), None);
        assert_eq!(dn_name(b"."), None);
    }
}
