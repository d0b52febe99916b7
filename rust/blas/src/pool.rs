//! One helper thread for the skinny kernel, kept between calls, sharing work by claiming chunks.
//!
//! A decode step makes a few hundred products of 0.05-10 ms each. Starting a thread per product
//! costs more than it saves; a parked helper woken through a condition variable costs a few
//! microseconds. A large product's output columns are cut into chunks (multiples of 4 columns),
//! and the caller and the helper each claim the next unclaimed chunk until none is left; the
//! caller returns once every chunk is done (the helper reads the caller's X and W and writes the
//! caller's C, so it must finish before the call returns).
//!
//! Why chunks rather than two halves: on a 2-core machine the MLX thread, the helper, the Python
//! thread that builds the next step's graph and the HTTP server all share two cores. With fixed
//! halves, a helper that is descheduled (or slow to wake) makes the caller wait for its whole
//! half; measured on a serving process, the caller spent about a tenth of its time waiting. With
//! claimed chunks, a caller that finds the helper absent computes the unclaimed chunks itself
//! and only ever waits for a chunk the helper is actually computing.
//!
//! One caller at a time uses the helper; a concurrent caller, or a machine with one core,
//! computes everything itself.

use crate::skinny::Product;
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex, OnceLock};

/// Products smaller than this many multiply-adds are not split (waking the helper would cost
/// more than half of the product).
pub const SPLIT_MIN_WORK: usize = 1 << 19;

/// Target multiply-adds per chunk: small enough that a caller left waiting on the helper's last
/// chunk waits little, large enough that claiming (one atomic operation) is noise.
const CHUNK_WORK: usize = 1 << 18;

/// Most chunks per product.
const MAX_CHUNKS: usize = 16;

/// One split product, as posted to the helper.
#[derive(Clone, Copy)]
struct Job {
    product: Product,
    cols: usize,
    /// Columns per chunk (a multiple of 4); the last chunk may be shorter.
    chunk: usize,
    chunks: u32,
    seq: u32,
}

impl Job {
    /// Compute chunk `i`.
    ///
    /// # Safety
    /// The job must be the one its caller is still waiting on (see [`claim`]).
    unsafe fn run_chunk(&self, i: u32) {
        let start = i as usize * self.chunk;
        let end = (start + self.chunk).min(self.cols);
        // SAFETY: the caller's contract for columns 0..cols; chunks are disjoint.
        unsafe { self.product.run(start..end) };
    }
}

struct Shared {
    job: Mutex<Option<Job>>,
    posted: Condvar,
    /// `seq << 32 | next unclaimed chunk` of the current job. The sequence number ties a claim to
    /// its job: a helper holding an older job (one the caller finished alone) cannot claim.
    next: AtomicU64,
    /// Chunks of the current job the helper has finished.
    helper_done: AtomicU32,
}

/// Claim the next chunk of job `seq`, if that job is current and has one left.
fn claim(next: &AtomicU64, seq: u32, chunks: u32) -> Option<u32> {
    let mut v = next.load(Ordering::Acquire);
    loop {
        let (s, i) = ((v >> 32) as u32, v as u32);
        if s != seq || i >= chunks {
            return None;
        }
        match next.compare_exchange_weak(v, v + 1, Ordering::AcqRel, Ordering::Acquire) {
            Ok(_) => return Some(i),
            Err(now) => v = now,
        }
    }
}

struct Pool {
    shared: Arc<Shared>,
    /// Held by the caller that is using the helper; holds the last job's sequence number.
    caller: Mutex<u32>,
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
            next: AtomicU64::new(0),
            helper_done: AtomicU32::new(0),
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
        let Ok(mut slot) = shared.job.lock() else { return };
        let job = loop {
            if let Some(j) = slot.take() {
                break j;
            }
            slot = match shared.posted.wait(slot) {
                Ok(j) => j,
                Err(_) => return,
            };
        };
        drop(slot);
        while let Some(i) = claim(&shared.next, job.seq, job.chunks) {
            // SAFETY: a successful claim means the job is current, and its caller does not return
            // before `helper_done` counts this chunk.
            unsafe { job.run_chunk(i) };
            shared.helper_done.fetch_add(1, Ordering::Release);
        }
    }
}

/// Chunk width and count for `cols` output columns of `work` multiply-adds in all.
fn chunking(cols: usize, work: usize) -> (usize, u32) {
    let want = (work / CHUNK_WORK).clamp(2, MAX_CHUNKS);
    let chunk = cols.div_ceil(want).div_ceil(4) * 4;
    (chunk, cols.div_ceil(chunk) as u32)
}

/// Compute `p` over output columns `0..cols`, sharing the chunks of a large product with the
/// helper when it is free.
///
/// # Safety
/// As [`Product::run`] for columns `0..cols`.
pub unsafe fn run(p: Product, cols: usize) {
    let work = p.rows * cols * p.k;
    let split = work >= SPLIT_MIN_WORK && cols >= 8;
    let Some(pool) = pool().filter(|_| split) else {
        // SAFETY: the caller's contract.
        return unsafe { p.run(0..cols) };
    };
    let Ok(mut seq) = pool.caller.try_lock() else {
        // Another thread is using the helper.
        // SAFETY: the caller's contract.
        return unsafe { p.run(0..cols) };
    };
    *seq = seq.wrapping_add(1);
    let (chunk, chunks) = chunking(cols, work);
    let job = Job {
        product: p,
        cols,
        chunk,
        chunks,
        seq: *seq,
    };
    let shared = &pool.shared;
    // The previous job's chunks are all done (its caller waited), so nobody touches these now.
    shared.helper_done.store(0, Ordering::Relaxed);
    shared.next.store(u64::from(job.seq) << 32, Ordering::Release);
    match shared.job.lock() {
        Ok(mut slot) => *slot = Some(job),
        Err(_) => {
            // No helper to post to: claim every chunk here.
        }
    }
    shared.posted.notify_one();
    let mut mine = 0u32;
    while let Some(i) = claim(&shared.next, job.seq, chunks) {
        // SAFETY: the caller's contract; the claim makes this chunk ours alone.
        unsafe { job.run_chunk(i) };
        mine += 1;
    }
    let mut spins = 0u32;
    while mine + shared.helper_done.load(Ordering::Acquire) < chunks {
        if spins < 2000 {
            std::hint::spin_loop();
            spins += 1;
        } else {
            std::thread::yield_now();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn chunks_cover_the_columns_in_multiples_of_four() {
        for cols in [8usize, 9, 64, 576, 1536, 49152, 49157] {
            for work in [SPLIT_MIN_WORK, 1 << 22, 1 << 30] {
                let (chunk, chunks) = chunking(cols, work);
                assert_eq!(chunk % 4, 0);
                assert!(chunks >= 1 && chunks as usize <= MAX_CHUNKS);
                assert!(chunk * chunks as usize >= cols);
                assert!(chunk * (chunks as usize - 1) < cols, "no empty chunk");
            }
        }
    }

    /// Many back-to-back split products from two callers at once (one of them gets the helper),
    /// each equal bit for bit to the same product computed in one piece.
    #[test]
    fn split_products_match_one_piece_under_concurrency() {
        if !crate::skinny::supported() {
            return;
        }
        let k = 96usize;
        let check = |salt: usize| {
            for round in 0..60usize {
                let (rows, cols) = (1 + (round + salt) % 3, 2048 + 4 * round + salt);
                let x: Vec<f32> = (0..rows * k).map(|i| ((i * 7 + round) % 13) as f32 - 6.0).collect();
                let w: Vec<f32> = (0..cols * k).map(|i| ((i * 3 + salt) % 17) as f32 * 0.25).collect();
                let (mut want, mut got) = (vec![0.0f32; rows * cols], vec![f32::NAN; rows * cols]);
                let product = |c: *mut f32| Product {
                    rows,
                    k,
                    alpha: 1.0,
                    x: x.as_ptr(),
                    ldx: k,
                    w: w.as_ptr(),
                    ldw: k,
                    beta: 0.0,
                    c,
                    ldc: cols,
                };
                unsafe {
                    product(want.as_mut_ptr()).run(0..cols);
                    run(product(got.as_mut_ptr()), cols);
                }
                assert_eq!(got, want, "rows {rows} cols {cols}");
            }
        };
        std::thread::scope(|s| {
            s.spawn(|| check(1));
            check(2);
        });
    }

    #[test]
    fn a_stale_job_cannot_claim() {
        let next = AtomicU64::new(7u64 << 32);
        assert_eq!(claim(&next, 6, 4), None);
        assert_eq!(claim(&next, 7, 2), Some(0));
        assert_eq!(claim(&next, 7, 2), Some(1));
        assert_eq!(claim(&next, 7, 2), None);
    }
}
