//! `tcp-request connection|content accept|reject [if|unless COND]` and
//! `tcp-request inspect-delay TIME` (configuration.txt 4.2).
//!
//! Only the `accept` and `reject` actions are implemented; any other
//! action is refused at its line, never ignored.

use super::acl::parse_condition;
use super::values::parse_time;
use super::{Loc, Proxy, TcpRequestRule};

/// Parses the words after `tcp-request`.
pub(super) fn parse(px: &mut Proxy, w: &[String], loc: &Loc) -> Result<(), String> {
    let which = w
        .first()
        .map(String::as_str)
        .ok_or("'tcp-request' expects 'connection', 'content' or 'inspect-delay'")?;
    let content = match which {
        "inspect-delay" => {
            let [_, t] = w else {
                return Err("'tcp-request inspect-delay' expects one time value".to_string());
            };
            px.inspect_delay = Some(parse_time(t)?);
            return Ok(());
        }
        "connection" => false,
        "content" => true,
        "session" => return Err("'tcp-request session' rules are not supported by ebb".to_string()),
        o => {
            return Err(format!(
                "unknown 'tcp-request {o}' (expected connection, content or inspect-delay)"
            ))
        }
    };
    let action = w
        .get(1)
        .map(String::as_str)
        .ok_or_else(|| format!("'tcp-request {which}' expects an action (accept, reject)"))?;
    let accept = match action {
        "accept" => true,
        "reject" => false,
        o => {
            return Err(format!(
            "'tcp-request {which} {o}' is not supported by ebb (supported actions: accept, reject)"
        ))
        }
    };
    let cond = match w.get(2).map(String::as_str) {
        None => None,
        Some(k @ ("if" | "unless")) => {
            Some(parse_condition(k == "unless", &w[3..], &px.acls, loc)?)
        }
        Some(x) => {
            return Err(format!(
                "unexpected '{x}' after 'tcp-request {which} {action}' (expected 'if' or 'unless')"
            ))
        }
    };
    px.tcp_request.push(TcpRequestRule {
        content,
        accept,
        cond,
        loc: loc.clone(),
    });
    Ok(())
}
