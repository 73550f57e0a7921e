//! # sched: ebb's task scheduler
//!
//! HAProxy's scheduler, in safe Rust, as a crate that knows nothing of
//! HTTP. Each of `nbthread` threads runs one loop over its own run queue,
//! wait queue, tasklet lists and epoll instance; work moves between
//! threads only through lock-free inboxes (thread-bound work) or the
//! shared, scope-aware queues under a lock (work any thread of a mask may
//! take). shared/DESIGN.md, "The scheduler's rules", is the specification;
//! this page maps it to modules.
//!
//! | module       | what                                                     |
//! |--------------|----------------------------------------------------------|
//! | [`ticks`]    | wrapping ms dates, eternity, wrap-safe helpers, clocks   |
//! | [`task`]     | ids, reasons, status, callback traits, classes           |
//! | [`ctx`]      | one thread's scheduler: slab, lists, timers, turn, poll |
//! | [`runtime`]  | config, threads, the handle, stop                        |
//! | [`inbox`]    | lock-free inbox: a lane per sending worker + MPSC ring   |
//! | [`notify`]   | the sleeping/notified handshake                          |
//! | `shared`     | what other threads may touch; shared queues; isolation   |
//! | [`profile`]  | per-callback profiling and `show profiling`              |
//! | [`activity`] | per-thread counters and `show activity`                  |
//! | [`watchdog`] | stuck-callback detection                                 |
//! | `sys`        | the only `unsafe`: epoll (raw wait), eventfd, clocks     |
//!
//! ## A minimal program
//!
//! ```
//! use sched::{Config, Reasons, Runtime, Status, ticks};
//!
//! let rt = Runtime::new(Config::new(1))?;
//! rt.run(|ctx| {
//!     // A task firing three times, 1 ms apart, then ending.
//!     let mut left = 3;
//!     let t = ctx.new_task("tick", move |ctx: &mut sched::Ctx, me, why: Reasons| {
//!         assert!(why.contains(Reasons::TIMER) || why.contains(Reasons::INIT));
//!         left -= 1;
//!         if left == 0 {
//!             return Status::Done;
//!         }
//!         let next = ticks::add(ctx.now(), 1);
//!         ctx.schedule(me, next);
//!         Status::Continue
//!     });
//!     ctx.wakeup(t, Reasons::INIT);
//! })?;
//! # Ok::<(), std::io::Error>(())
//! ```
//!
//! The loop exits when its thread has no task left (or on stop).
//!
//! ## Threads and safety
//!
//! [`Ctx`] is not `Send`: tasks bound to one thread may hold anything.
//! Ids ([`TaskId`], [`TaskletId`]) are `Copy + Send` and generation-checked,
//! so they can be kept anywhere and woken from anywhere
//! ([`RuntimeHandle::wake_tasklet`]); a stale id is a detected no-op.

#![deny(unsafe_op_in_unsafe_fn, clippy::undocumented_unsafe_blocks)]
#![warn(missing_docs)]

pub mod activity;
pub mod ctx;
pub mod inbox;
pub mod notify;
pub mod profile;
pub mod runtime;
mod shared;
mod sync;
mod sys;
pub mod task;
pub mod ticks;
pub mod watchdog;

pub use activity::ActivitySnapshot;
pub use ctx::{Ctx, MAX_POLL_MS};
pub use profile::{ProfileRow, ProfilingMode, ReportOpts, SortBy};
pub use runtime::{default_runqueue_depth, Config, Runtime, RuntimeHandle};
pub use shared::worker_thread;
pub use sys::Events;
pub use task::{Class, Reasons, Status, TaskFn, TaskId, TaskletFn, TaskletId};
pub use ticks::{Clock, ManualClock, MonotonicClock, Tick, ETERNITY};
pub use watchdog::{WatchdogHook, WatchdogReport};
