//! Interactive mode (`prompt`): the prompt after each answer, and no
//! client timeout.

use std::time::Instant;

use super::conn::{CliConn, MCLI_TIMEOUT};

/// When a client waiting to send its next command is closed: never in
/// interactive mode (HAProxy's master CLI has no client timeout).
pub(super) fn idle_deadline(prompt: bool, now: Instant) -> Option<Instant> {
    (!prompt).then(|| now + MCLI_TIMEOUT)
}

impl CliConn {
    /// HAProxy's master prompt, in interactive mode: `+ ` inside a
    /// payload, otherwise the target (`master`, with `[ReloadFailed]`
    /// after a failed reload, or the worker's pid), the modes in brackets
    /// (`x` experimental, `e` expert, `d` mcli-debug), then `> `.
    pub(super) fn prompt_out(&mut self, failed: bool) {
        if !self.prompt {
            return;
        }
        if self.payload || self.master_payload.is_some() {
            self.out.extend_from_slice(b"+ ");
            return;
        }
        let mut p = match self.target {
            None if failed => "master[ReloadFailed]".to_string(),
            None => "master".to_string(),
            Some(pid) => pid.to_string(),
        };
        let modes: String = [
            (self.experimental, 'x'),
            (self.expert, 'e'),
            (self.debug, 'd'),
        ]
        .iter()
        .filter_map(|&(on, c)| on.then_some(c))
        .collect();
        if !modes.is_empty() {
            p.push('(');
            p.push_str(&modes);
            p.push(')');
        }
        p.push_str("> ");
        self.out.extend_from_slice(p.as_bytes());
    }
}
