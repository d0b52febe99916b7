//! `X W^T` for a few rows of `X`: the shape of a decode step with a small batch.
//!
//! A general `sgemm` packs both operands into cache-friendly panels before multiplying. With
//! 1-8 rows of activations against a weight matrix of hundreds of thousands to tens of millions of
//! entries, packing the weights costs more than the product itself: the weights are read, written
//! and read again for a handful of multiply-adds per entry. This kernel reads each weight row
//! once, straight from where it lies, and multiplies it with every activation row while it is in
//! L1: a register tile of 4 weight rows x 2 activation rows (8 AVX accumulators, 6 loads per 8
//! FMAs). Measured through MLX against OpenBLAS 0.3.21 `sgemm` on a loaded 2-core x86 machine:
//! the 576 x 49152 output layer of SmolLM2-135M 1.9x faster for 1-2 rows and 1.1-1.7x for 4-8,
//! its 1536 x 576 and 576 x 1536 projections 1.6-5.6x; the smallest products (576 x 576 and
//! below with 1-2 rows) are on par, where OpenBLAS already skips packing.
//!
//! Only x86-64 with AVX2 and FMA (checked at run time); elsewhere [`supported`] is false and the
//! caller keeps the library's `sgemm`.

/// Most activation rows this kernel takes; beyond that `sgemm`'s packing pays for itself.
pub const MAX_ROWS: usize = 8;

/// Whether this CPU can run the kernel.
pub fn supported() -> bool {
    #[cfg(target_arch = "x86_64")]
    {
        std::arch::is_x86_feature_detected!("avx2") && std::arch::is_x86_feature_detected!("fma")
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        false
    }
}

/// One product: `C[m][n] = alpha * dot(X[m], W[n]) + beta * C[m][n]` for `m < rows`, `n` in
/// `cols`, all row-major with the given row strides (in elements). With `beta == 0`, `C` is not
/// read (it may hold NaN bits), as in BLAS.
#[derive(Debug, Clone, Copy)]
pub struct Product {
    pub rows: usize,
    pub k: usize,
    pub alpha: f32,
    pub x: *const f32,
    pub ldx: usize,
    pub w: *const f32,
    pub ldw: usize,
    pub beta: f32,
    pub c: *mut f32,
    pub ldc: usize,
}

// SAFETY: a `Product` is a description of caller-owned buffers; threads given disjoint column
// ranges write disjoint cells of C and only read X and W.
unsafe impl Send for Product {}
unsafe impl Sync for Product {}

impl Product {
    /// Compute output columns `cols.start..cols.end`.
    ///
    /// # Safety
    /// X must hold `rows` rows of `k` floats at stride `ldx`, W the rows in `cols` of `k` floats at
    /// stride `ldw`, C `rows` rows covering `cols` at stride `ldc`; [`supported`] must be true.
    pub unsafe fn run(&self, cols: std::ops::Range<usize>) {
        #[cfg(target_arch = "x86_64")]
        // SAFETY: the caller checked `supported()` and the buffer contract.
        unsafe {
            avx2::run(self, cols)
        }
        #[cfg(not(target_arch = "x86_64"))]
        let _ = cols;
    }

    fn store(&self, m: usize, n: usize, dot: f32) {
        // SAFETY: (m, n) is inside C by the contract of `run`.
        unsafe {
            let cell = self.c.add(m * self.ldc + n);
            *cell = if self.beta == 0.0 {
                self.alpha * dot
            } else {
                self.alpha * dot + self.beta * *cell
            };
        }
    }
}

#[cfg(target_arch = "x86_64")]
mod avx2 {
    use super::Product;
    use std::arch::x86_64::*;

    /// Sum of the 8 lanes.
    #[target_feature(enable = "avx2,fma")]
    fn hsum(v: __m256) -> f32 {
        let s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps::<1>(v));
        let s = _mm_add_ps(s, _mm_movehl_ps(s, s));
        let s = _mm_add_ss(s, _mm_shuffle_ps::<0b01>(s, s));
        _mm_cvtss_f32(s)
    }

    /// Scalar dot product of the `k % 8` trailing elements.
    #[inline]
    unsafe fn tail(a: *const f32, b: *const f32, from: usize, k: usize) -> f32 {
        let mut s = 0.0f32;
        for i in from..k {
            // SAFETY: i < k, inside both rows.
            s += unsafe { *a.add(i) * *b.add(i) };
        }
        s
    }

    #[target_feature(enable = "avx2,fma")]
    pub(super) unsafe fn run(p: &Product, cols: std::ops::Range<usize>) {
        let k8 = p.k - p.k % 8;
        let mut n = cols.start;
        while n + 4 <= cols.end {
            // SAFETY (whole block): rows n..n+4 of W and rows m..m+2 of X lie inside the buffers
            // by the caller's contract, and every load is at an offset below k8 <= k.
            unsafe {
                let w = [0, 1, 2, 3].map(|j| p.w.add((n + j) * p.ldw));
                let mut m = 0;
                while m + 2 <= p.rows {
                    let x0 = p.x.add(m * p.ldx);
                    let x1 = p.x.add((m + 1) * p.ldx);
                    let mut acc = [_mm256_setzero_ps(); 8];
                    let mut i = 0;
                    while i < k8 {
                        let a0 = _mm256_loadu_ps(x0.add(i));
                        let a1 = _mm256_loadu_ps(x1.add(i));
                        for j in 0..4 {
                            let wv = _mm256_loadu_ps(w[j].add(i));
                            acc[j] = _mm256_fmadd_ps(wv, a0, acc[j]);
                            acc[4 + j] = _mm256_fmadd_ps(wv, a1, acc[4 + j]);
                        }
                        i += 8;
                    }
                    for j in 0..4 {
                        p.store(m, n + j, hsum(acc[j]) + tail(x0, w[j], k8, p.k));
                        p.store(m + 1, n + j, hsum(acc[4 + j]) + tail(x1, w[j], k8, p.k));
                    }
                    m += 2;
                }
                if m < p.rows {
                    let x0 = p.x.add(m * p.ldx);
                    let mut acc = [_mm256_setzero_ps(); 4];
                    let mut i = 0;
                    while i < k8 {
                        let a0 = _mm256_loadu_ps(x0.add(i));
                        for j in 0..4 {
                            acc[j] = _mm256_fmadd_ps(_mm256_loadu_ps(w[j].add(i)), a0, acc[j]);
                        }
                        i += 8;
                    }
                    for j in 0..4 {
                        p.store(m, n + j, hsum(acc[j]) + tail(x0, w[j], k8, p.k));
                    }
                }
            }
            n += 4;
        }
        while n < cols.end {
            // SAFETY: as above, one weight row at a time.
            unsafe {
                let w = p.w.add(n * p.ldw);
                for m in 0..p.rows {
                    let x = p.x.add(m * p.ldx);
                    let mut acc = _mm256_setzero_ps();
                    let mut i = 0;
                    while i < k8 {
                        acc = _mm256_fmadd_ps(_mm256_loadu_ps(w.add(i)), _mm256_loadu_ps(x.add(i)), acc);
                        i += 8;
                    }
                    p.store(m, n, hsum(acc) + tail(x, w, k8, p.k));
                }
            }
            n += 1;
        }
    }
}
