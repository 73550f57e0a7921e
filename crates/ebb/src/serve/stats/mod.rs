//! The statistics every operator view shares: one row per frontend,
//! backend and server (HAProxy's `show stat` model), the CSV of `show stat`
//! and `;csv`, the HTML stats page, and the server actions the CLI and the
//! page's admin form both perform.
//!
//! Rows are read from the atomics of the configuration in force
//! ([`crate::registry::Live::compiled`]); nothing here locks the request
//! path. Rates (sessions and requests per second) are not counted on the
//! request path either: each read of a total is compared with the previous
//! sample of the same total, at least a second old, so a rate is "per
//! second over the last interval between two views".

use std::collections::HashMap;
use std::fmt::Write as _;
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Instant;

use crate::backend::extra::check_code;
use crate::backend::{server_status, Farm, ServerRt, ADMIN_DRAIN, ADMIN_MAINT, ADMIN_READY};
use crate::proxy::{BackendKind, BackendRt, Compiled, FrontendRt};
use crate::serve::{plain, Answer};

mod admin;
mod fields;
mod page;
mod rows;
#[cfg(test)]
mod tests;

pub use admin::*;
pub use fields::*;
pub use page::*;
pub use rows::*;
