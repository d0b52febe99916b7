//! One helper thread for the skinny kernel, kept between calls.
//!
//! A decode step makes a few hundred products of 0.05-10 ms each. Starting a thread per product
//! costs more than it saves; a parked helper woken through a condition variable costs a few
//! microseconds. The caller computes the first half of the output columns while the helper
//! computes the second, and returns only once the helper is done (it reads the caller's X and W
//! and writes the caller's C). One caller at a time uses the helper; a concurrent caller, or a
//! machine with one core, computes everything itself.

use crate::skinny::Product;
use std::ops::Range;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex, OnceLock};

/// Products smaller than this many multiply-adds are not split (waking the helper would cost
/// more than half of the product).
pub const SPLIT_MIN_WORK: usize = 1 << 19;

struct Shared {
    job: Mutex<Option<(Product, Range<usize>, u64)>>,
    posted: Condvar,
    done: AtomicU64,
}

struct Pool {
    shared: Arc<Shared>,
    /// Held by the caller that is using the helper.
    caller: Mutex<u64>,
}

fn pool() -> Option<&'static Pool> {
    static POOL: OnceLock<Option<Pool>> = OnceLock::new();
    POOL.get_or_init(|| {
        if std::thread::available_parallelism().map_or(1, |n| n.get()) < 2 {
            return None;
        }
        let shared = Arc::new(Shared {
            job: Mutex::new(None),
            posted: Condvar::new(),
            done: AtomicU64::new(0),
        });
        let worker = Arc::clone(&shared);
        std::thread::Builder::new()
            .name("smgpy-blas".into())
            .spawn(move || helper(&worker))
            .ok()?;
        Some(Pool {
            shared,
            caller: Mutex::new(0),
        })
    })
    .as_ref()
}

fn helper(shared: &Shared) {
    loop {
        let Ok(mut job) = shared.job.lock() else { return };
        let (product, cols, seq) = loop {
            if let Some(j) = job.take() {
                break j;
            }
            job = match shared.posted.wait(job) {
                Ok(j) => j,
                Err(_) => return,
            };
        };
        drop(job);
        // SAFETY: the caller posted a valid product and waits for `done` before returning.
        unsafe { product.run(cols) };
        shared.done.store(seq, Ordering::Release);
    }
}

/// Compute `p` over output columns `0..cols`, with the helper taking half when it is free and
/// the product is large enough.
///
/// # Safety
/// As [`Product::run`] for columns `0..cols`.
pub unsafe fn run(p: Product, cols: usize) {
    let split = p.rows * cols * p.k >= SPLIT_MIN_WORK && cols >= 8;
    let Some(pool) = pool().filter(|_| split) else {
        // SAFETY: the caller's contract.
        return unsafe { p.run(0..cols) };
    };
    let Ok(mut seq) = pool.caller.try_lock() else {
        // Another thread is using the helper.
        // SAFETY: the caller's contract.
        return unsafe { p.run(0..cols) };
    };
    *seq += 1;
    let mine = *seq;
    let half = (cols / 2).div_ceil(4) * 4;
    let posted = match pool.shared.job.lock() {
        Ok(mut job) => {
            *job = Some((p, half..cols, mine));
            true
        }
        Err(_) => false,
    };
    if !posted {
        // SAFETY: the caller's contract.
        return unsafe { p.run(0..cols) };
    }
    pool.shared.posted.notify_one();
    // SAFETY: disjoint columns from the helper's.
    unsafe { p.run(0..half) };
    let mut spins = 0u32;
    while pool.shared.done.load(Ordering::Acquire) != mine {
        if spins < 2000 {
            std::hint::spin_loop();
            spins += 1;
        } else {
            std::thread::yield_now();
        }
    }
}
