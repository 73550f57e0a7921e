//! A small pool of threads for work that may block on the disk (`open`,
//! `stat`, first reads of files not known to be in the page cache): nginx's
//! `aio threads` idea. The event loops never wait on the disk; they hand a
//! job here and the job, when done, wakes the stream's tasklet through the
//! scheduler's cross-thread wakeup (the job's closure carries that wakeup).
//!
//! Jobs run in FIFO order. The queue is bounded: a full queue refuses the
//! job and the caller answers 503 rather than piling up work without limit.

use std::collections::VecDeque;
use std::sync::{Arc, Condvar, Mutex};
use std::thread::JoinHandle;

type Job = Box<dyn FnOnce() + Send + 'static>;

struct Queue {
    jobs: VecDeque<Job>,
    stopping: bool,
}

struct Shared {
    q: Mutex<Queue>,
    cv: Condvar,
    cap: usize,
}

/// The pool. Dropping it finishes the queued jobs and joins the threads.
pub struct BlockingPool {
    shared: Arc<Shared>,
    threads: Vec<JoinHandle<()>>,
}

/// A job was refused because the queue is full (or the pool is stopping).
#[derive(Debug, PartialEq, Eq)]
pub struct Busy;

impl BlockingPool {
    /// A pool of `threads` workers (at least one) and a queue of `cap` jobs.
    pub fn new(threads: usize, cap: usize) -> std::io::Result<BlockingPool> {
        let shared = Arc::new(Shared {
            q: Mutex::new(Queue {
                jobs: VecDeque::with_capacity(cap),
                stopping: false,
            }),
            cv: Condvar::new(),
            cap,
        });
        let mut handles = Vec::new();
        for i in 0..threads.max(1) {
            let s = Arc::clone(&shared);
            let h = std::thread::Builder::new()
                .name(format!("ebb-blocking-{i}"))
                .spawn(move || worker(&s))?;
            handles.push(h);
        }
        Ok(BlockingPool {
            shared,
            threads: handles,
        })
    }

    /// A cheap handle to submit jobs from any thread.
    pub fn submitter(&self) -> Submitter {
        Submitter {
            shared: Arc::clone(&self.shared),
        }
    }
}

/// Submits jobs to a [`BlockingPool`]; `Clone + Send`.
#[derive(Clone)]
pub struct Submitter {
    shared: Arc<Shared>,
}

impl Submitter {
    /// Queues `job`; refuses it when the queue is full or stopping.
    pub fn submit(&self, job: impl FnOnce() + Send + 'static) -> Result<(), Busy> {
        let mut q = self.shared.q.lock().unwrap_or_else(|p| p.into_inner());
        if q.stopping || q.jobs.len() >= self.shared.cap {
            return Err(Busy);
        }
        q.jobs.push_back(Box::new(job));
        drop(q);
        self.shared.cv.notify_one();
        Ok(())
    }
}

fn worker(s: &Shared) {
    loop {
        let job = {
            let mut q = s.q.lock().unwrap_or_else(|p| p.into_inner());
            loop {
                if let Some(j) = q.jobs.pop_front() {
                    break j;
                }
                if q.stopping {
                    return;
                }
                q = s.cv.wait(q).unwrap_or_else(|p| p.into_inner());
            }
        };
        // A panicking job must not take the worker down with it.
        let _ = std::panic::catch_unwind(std::panic::AssertUnwindSafe(job));
    }
}

impl Drop for BlockingPool {
    fn drop(&mut self) {
        {
            let mut q = self.shared.q.lock().unwrap_or_else(|p| p.into_inner());
            q.stopping = true;
        }
        self.shared.cv.notify_all();
        for h in self.threads.drain(..) {
            let _ = h.join();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::sync::mpsc;

    #[test]
    fn runs_every_job_and_reports_back() {
        let pool = BlockingPool::new(2, 64).unwrap();
        let sub = pool.submitter();
        let (tx, rx) = mpsc::channel();
        for i in 0..50 {
            let tx = tx.clone();
            sub.submit(move || tx.send(i).unwrap()).unwrap();
        }
        let mut got: Vec<i32> = (0..50).map(|_| rx.recv().unwrap()).collect();
        got.sort();
        assert_eq!(got, (0..50).collect::<Vec<_>>());
    }

    #[test]
    fn full_queue_refuses() {
        let pool = BlockingPool::new(1, 2).unwrap();
        let sub = pool.submitter();
        let (block_tx, block_rx) = mpsc::channel::<()>();
        let (started_tx, started_rx) = mpsc::channel::<()>();
        sub.submit(move || {
            started_tx.send(()).unwrap();
            let _ = block_rx.recv();
        })
        .unwrap();
        started_rx.recv().unwrap(); // the worker is busy now
        sub.submit(|| {}).unwrap();
        sub.submit(|| {}).unwrap();
        assert_eq!(sub.submit(|| {}), Err(Busy));
        block_tx.send(()).unwrap();
    }

    #[test]
    fn drop_finishes_queued_jobs_and_survives_panics() {
        let n = Arc::new(AtomicUsize::new(0));
        {
            let pool = BlockingPool::new(1, 16).unwrap();
            let sub = pool.submitter();
            sub.submit(|| panic!("job panics")).unwrap();
            for _ in 0..5 {
                let n = Arc::clone(&n);
                sub.submit(move || {
                    n.fetch_add(1, Ordering::SeqCst);
                })
                .unwrap();
            }
        }
        assert_eq!(n.load(Ordering::SeqCst), 5);
    }
}
