//! One-row float32 matrix products through `gemv`, for MLX's CPU backend.
//!
//! MLX runs every float32 matrix product on the CPU as one `cblas_sgemm` call. Decoding
//! multiplies a single row (one token) by every weight matrix, and OpenBLAS before 0.3.27 (the
//! version Debian 12 and Ubuntu 22.04/24.04 ship) sends such a product through its general
//! `sgemm` path, which first copies ("packs") the whole weight matrix into a scratch buffer: the
//! weights are read twice and written once per token. Measured on a 2-core x86 machine with
//! OpenBLAS 0.3.21, a 1 x 576 row times the 576 x 49152 output layer takes 18 ms through `sgemm`
//! and 10 ms through `sgemv`, a 576 x 1536 MLP projection 0.32 ms against 0.08 ms. Newer
//! OpenBLAS forwards these calls to `gemv` itself; this crate does it for the older ones.
//!
//! How it gets in front of MLX: this crate exports a `cblas_sgemm` symbol. [`install`] opens the
//! real BLAS library privately and resolves its `cblas_sgemm` and `cblas_sgemv`; the Python side
//! then makes the extension module that contains this crate global (`RTLD_GLOBAL`) *before* the
//! BLAS library itself and before `mlx.core` is imported, so the dynamic linker binds MLX's
//! `cblas_sgemm` here. Products with one row (or, in column-major order, one column) go to
//! `sgemv`; every other call goes to the library's `sgemm` unchanged, arguments untouched.
//!
//! With up to 8 rows and a transposed weight operand (`X W^T`, how MLX multiplies activations by
//! a linear layer's weights), the product goes to this crate's own kernel instead ([`skinny`]),
//! which reads the weights once without packing them; large products share their columns, in
//! chunks each thread claims, with one parked helper thread (`pool.rs`). A decode step of SmolLM2-135M with 1-8 sequences took
//! 1.2-1.4x less time than through OpenBLAS 0.3.21 `sgemm`, on an idle 2-core machine and on a
//! loaded one. Its result for a row does not depend on how many other rows are in the batch.
//!
//! The argument mapping is pure ([`plan`] and the row-major restatement), and every mode is
//! tested against a naive product.

mod pool;
pub mod skinny;

use std::ffi::{c_int, c_void, CString};
use std::sync::atomic::{AtomicPtr, AtomicU64, AtomicU8, Ordering};
use std::sync::OnceLock;

/// What [`cblas_sgemm`] does with the calls it can take over (see [`set_mode`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    /// Every call goes to the library's `sgemm` unchanged.
    PassThrough = 0,
    /// One-row products go to the library's `sgemv`.
    Gemv = 1,
    /// `X W^T` with up to [`skinny::MAX_ROWS`] rows goes to [`skinny`] (when the CPU has AVX2
    /// and FMA), other one-row products to `sgemv`.
    Skinny = 2,
}

/// CBLAS `CBLAS_ORDER` and `CBLAS_TRANSPOSE` values (the C interface fixes them).
pub const ROW_MAJOR: c_int = 101;
pub const COL_MAJOR: c_int = 102;
pub const NO_TRANS: c_int = 111;
pub const TRANS: c_int = 112;
/// Conjugate transpose: the same as [`TRANS`] for real matrices.
pub const CONJ_TRANS: c_int = 113;

/// The C signature of `cblas_sgemm`.
pub type SgemmFn = unsafe extern "C" fn(
    c_int,
    c_int,
    c_int,
    c_int,
    c_int,
    c_int,
    f32,
    *const f32,
    c_int,
    *const f32,
    c_int,
    f32,
    *mut f32,
    c_int,
);

/// The C signature of `cblas_sgemv`.
pub type SgemvFn =
    unsafe extern "C" fn(c_int, c_int, c_int, c_int, f32, *const f32, c_int, *const f32, c_int, f32, *mut f32, c_int);

/// Why [`install`] could not put the forwarding in place.
#[derive(Debug, thiserror::Error)]
pub enum BlasError {
    #[error("cannot load the BLAS library {library:?}: {reason}")]
    Load { library: String, reason: String },
    #[error("the library {library:?} has no {symbol}: give a CBLAS library such as OpenBLAS, BLIS or MKL")]
    Missing { library: String, symbol: &'static str },
    #[error("the BLAS library name {0:?} contains a NUL byte")]
    Name(String),
    #[error("one-row forwarding needs a system with dlopen (Linux); MLX on macOS uses Accelerate instead")]
    Unsupported,
}

/// A `gemv` call equivalent to one `gemm` call: `y = alpha * op(matrix) * x + beta * y`.
///
/// Pointers are named by which `gemm` operand they come from, so [`plan`] stays pure.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct GemvPlan {
    /// Whether the matrix operand is `gemm`'s `A` (else `B`).
    pub matrix_is_a: bool,
    /// `NO_TRANS` or `TRANS`, for the matrix in row-major order.
    pub trans: c_int,
    /// Rows and columns of the matrix as stored (row-major).
    pub rows: c_int,
    pub cols: c_int,
    /// Leading dimension of the matrix.
    pub ld: c_int,
    /// Stride between the vector operand's elements.
    pub incx: c_int,
    /// Length of the output vector (contiguous in `C`).
    pub len: c_int,
}

/// A `gemm` call restated in row-major order: column-major `C = op(A) op(B)` is the same memory
/// as row-major `C^T = op(B)^T op(A)^T`, i.e. the operands (and `M`, `N`) swap and the transpose
/// flags stay with their operands.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct RowMajor {
    /// Whether the row-major left operand is `gemm`'s `A` (else `B`).
    left_is_a: bool,
    trans_left: bool,
    trans_right: bool,
    m: c_int,
    n: c_int,
    ld_left: c_int,
    ld_right: c_int,
}

#[allow(clippy::too_many_arguments)]
fn row_major(
    order: c_int,
    trans_a: c_int,
    trans_b: c_int,
    m: c_int,
    n: c_int,
    lda: c_int,
    ldb: c_int,
) -> Option<RowMajor> {
    let is_trans = |t: c_int| match t {
        NO_TRANS => Some(false),
        TRANS | CONJ_TRANS => Some(true),
        _ => None,
    };
    let (ta, tb) = (is_trans(trans_a)?, is_trans(trans_b)?);
    Some(match order {
        ROW_MAJOR => RowMajor {
            left_is_a: true,
            trans_left: ta,
            trans_right: tb,
            m,
            n,
            ld_left: lda,
            ld_right: ldb,
        },
        COL_MAJOR => RowMajor {
            left_is_a: false,
            trans_left: tb,
            trans_right: ta,
            m: n,
            n: m,
            ld_left: ldb,
            ld_right: lda,
        },
        _ => return None,
    })
}

/// The `gemv` call that computes this `gemm`, when the product has a single output row
/// (row-major) or column (column-major); `None` sends the call elsewhere.
#[allow(clippy::too_many_arguments)]
pub fn plan(
    order: c_int,
    trans_a: c_int,
    trans_b: c_int,
    m: c_int,
    n: c_int,
    k: c_int,
    lda: c_int,
    ldb: c_int,
) -> Option<GemvPlan> {
    let r = row_major(order, trans_a, trans_b, m, n, lda, ldb)?;
    if r.m != 1 || r.n < 1 || k < 1 {
        return None;
    }
    // One output row: y (1 x N) = x (1 x K) op(B) (K x N), i.e. y = op(B)^T x.
    // x is the left operand: stored 1 x K (stride 1), or K x 1 (stride ld) when transposed.
    // The right operand is stored K x N (then y = B^T x), or N x K (then y = B x).
    let (trans, rows, cols) = if r.trans_right {
        (NO_TRANS, r.n, k)
    } else {
        (TRANS, k, r.n)
    };
    Some(GemvPlan {
        matrix_is_a: !r.left_is_a,
        trans,
        rows,
        cols,
        ld: r.ld_right,
        incx: if r.trans_left { r.ld_left } else { 1 },
        len: r.n,
    })
}

/// The skinny-kernel form of this `gemm` when it is `X W^T` (row-major after [`row_major`]) with
/// at most [`skinny::MAX_ROWS`] rows of `X`: `(rows, cols, x_is_a, ldx, ldw)`.
#[allow(clippy::too_many_arguments)]
fn skinny_plan(
    order: c_int,
    trans_a: c_int,
    trans_b: c_int,
    m: c_int,
    n: c_int,
    k: c_int,
    lda: c_int,
    ldb: c_int,
) -> Option<(usize, usize, bool, usize, usize)> {
    let r = row_major(order, trans_a, trans_b, m, n, lda, ldb)?;
    let rows = usize::try_from(r.m).ok()?;
    let cols = usize::try_from(r.n).ok()?;
    let k = usize::try_from(k).ok()?;
    if r.trans_left || !r.trans_right || rows == 0 || rows > skinny::MAX_ROWS || cols < 4 || k < 8 {
        return None;
    }
    Some((
        rows,
        cols,
        r.left_is_a,
        usize::try_from(r.ld_left).ok()?,
        usize::try_from(r.ld_right).ok()?,
    ))
}

static GEMM: AtomicPtr<c_void> = AtomicPtr::new(std::ptr::null_mut());
static GEMV: AtomicPtr<c_void> = AtomicPtr::new(std::ptr::null_mut());
static FORWARDED: AtomicU64 = AtomicU64::new(0);
static MODE: AtomicU8 = AtomicU8::new(Mode::Skinny as u8);

/// Choose what the exported `cblas_sgemm` takes over (for comparisons; [`Mode::Skinny`] by
/// default, which falls back to [`Mode::Gemv`] on CPUs without AVX2 and FMA).
pub fn set_mode(mode: Mode) {
    MODE.store(mode as u8, Ordering::Relaxed);
}

/// The mode in effect.
pub fn mode() -> Mode {
    match MODE.load(Ordering::Relaxed) {
        0 => Mode::PassThrough,
        1 => Mode::Gemv,
        _ if skinny_supported() => Mode::Skinny,
        _ => Mode::Gemv,
    }
}

fn skinny_supported() -> bool {
    static SUPPORTED: OnceLock<bool> = OnceLock::new();
    *SUPPORTED.get_or_init(skinny::supported)
}

/// Open `library` (a soname such as `libopenblas.so.0`, or a path) privately and route
/// `cblas_sgemm` calls that reach this crate to it, one-row products through its `cblas_sgemv`.
/// Calling it again switches to the new library.
pub fn install(library: &str) -> Result<(), BlasError> {
    if !cfg!(target_os = "linux") {
        return Err(BlasError::Unsupported);
    }
    let name = CString::new(library).map_err(|_| BlasError::Name(library.to_owned()))?;
    // SAFETY: dlopen with a valid NUL-terminated name; the handle is never closed, so the
    // resolved function pointers stay valid for the life of the process.
    let handle = unsafe { libc::dlopen(name.as_ptr(), libc::RTLD_NOW | libc::RTLD_LOCAL) };
    if handle.is_null() {
        return Err(BlasError::Load {
            library: library.to_owned(),
            reason: last_dl_error(),
        });
    }
    let gemm = symbol(handle, c"cblas_sgemm", library)?;
    let gemv = symbol(handle, c"cblas_sgemv", library)?;
    GEMV.store(gemv, Ordering::Release);
    GEMM.store(gemm, Ordering::Release);
    Ok(())
}

/// How many products went through `gemv` or the skinny kernel so far (to check that MLX's calls arrive here).
pub fn forwarded() -> u64 {
    FORWARDED.load(Ordering::Relaxed)
}

fn symbol(handle: *mut c_void, name: &'static std::ffi::CStr, library: &str) -> Result<*mut c_void, BlasError> {
    // SAFETY: `handle` is a live dlopen handle and `name` is NUL-terminated.
    let ptr = unsafe { libc::dlsym(handle, name.as_ptr()) };
    if ptr.is_null() {
        return Err(BlasError::Missing {
            library: library.to_owned(),
            symbol: name.to_str().unwrap_or("symbol"),
        });
    }
    Ok(ptr)
}

fn last_dl_error() -> String {
    // SAFETY: dlerror returns NULL or a NUL-terminated string owned by libc.
    let msg = unsafe { libc::dlerror() };
    if msg.is_null() {
        return "unknown error".to_owned();
    }
    // SAFETY: non-null result of dlerror, valid until the next dl* call on this thread.
    unsafe { std::ffi::CStr::from_ptr(msg) }.to_string_lossy().into_owned()
}

/// The `gemm` to use: the installed one, else the next `cblas_sgemm` in the symbol search
/// order after this module (only reachable if the module was made global without [`install`]).
fn real_gemm() -> Option<SgemmFn> {
    let mut ptr = GEMM.load(Ordering::Acquire);
    if ptr.is_null() {
        // SAFETY: RTLD_NEXT lookup of a NUL-terminated name.
        ptr = unsafe { libc::dlsym(libc::RTLD_NEXT, c"cblas_sgemm".as_ptr()) };
    }
    if ptr.is_null() {
        return None;
    }
    // SAFETY: the symbol is the C function `cblas_sgemm`, whose signature is `SgemmFn`.
    Some(unsafe { std::mem::transmute::<*mut c_void, SgemmFn>(ptr) })
}

fn real_gemv() -> Option<SgemvFn> {
    let ptr = GEMV.load(Ordering::Acquire);
    if ptr.is_null() {
        return None;
    }
    // SAFETY: resolved by `install` as `cblas_sgemv`, whose signature is `SgemvFn`.
    Some(unsafe { std::mem::transmute::<*mut c_void, SgemvFn>(ptr) })
}

/// The arguments of one `cblas_sgemm` call, in its order.
#[derive(Debug, Clone, Copy)]
pub struct Gemm {
    pub order: c_int,
    pub trans_a: c_int,
    pub trans_b: c_int,
    pub m: c_int,
    pub n: c_int,
    pub k: c_int,
    pub alpha: f32,
    pub a: *const f32,
    pub lda: c_int,
    pub b: *const f32,
    pub ldb: c_int,
    pub beta: f32,
    pub c: *mut f32,
    pub ldc: c_int,
}

impl Gemm {
    /// Make this call with `gemm`, arguments unchanged.
    ///
    /// # Safety
    /// The pointers and dimensions must describe valid matrices, as for `cblas_sgemm`.
    pub unsafe fn call(&self, gemm: SgemmFn) {
        let g = self;
        // SAFETY: the caller's CBLAS contract.
        unsafe {
            gemm(
                g.order, g.trans_a, g.trans_b, g.m, g.n, g.k, g.alpha, g.a, g.lda, g.b, g.ldb, g.beta, g.c, g.ldc,
            )
        }
    }
}

/// Run one `gemm` call with the given implementations: through the skinny kernel or `gemv`
/// when `mode` allows and a plan fits, else through `gemm` unchanged.
///
/// # Safety
/// The pointers and dimensions must describe valid matrices, as for `cblas_sgemm`.
pub unsafe fn dispatch(gemm: SgemmFn, gemv: Option<SgemvFn>, mode: Mode, g: &Gemm) {
    if mode == Mode::Skinny && skinny_supported() {
        if let Some((rows, cols, x_is_a, ldx, ldw)) =
            skinny_plan(g.order, g.trans_a, g.trans_b, g.m, g.n, g.k, g.lda, g.ldb)
        {
            let (x, w) = if x_is_a { (g.a, g.b) } else { (g.b, g.a) };
            let p = skinny::Product {
                rows,
                k: g.k as usize,
                alpha: g.alpha,
                x,
                ldx,
                w,
                ldw,
                beta: g.beta,
                c: g.c,
                ldc: g.ldc.max(0) as usize,
            };
            // SAFETY: the plan restates the caller's CBLAS operands as X (rows x k) and W
            // (cols x k) row-major, C (rows x cols) row-major at stride ldc.
            unsafe { pool::run(p, cols) };
            FORWARDED.fetch_add(1, Ordering::Relaxed);
            return;
        }
    }
    let gemv = if mode == Mode::PassThrough { None } else { gemv };
    if let (Some(gemv), Some(p)) = (gemv, plan(g.order, g.trans_a, g.trans_b, g.m, g.n, g.k, g.lda, g.ldb)) {
        let (matrix, x) = if p.matrix_is_a { (g.a, g.b) } else { (g.b, g.a) };
        if g.beta == 0.0 {
            // gemm never reads C when beta is 0 (it may hold NaN bits); make gemv's
            // `beta * y` see zeros as well.
            // SAFETY: C has `len` contiguous elements (one row, or one column).
            unsafe { std::ptr::write_bytes(g.c, 0, p.len as usize) };
        }
        // SAFETY: the plan maps gemm's operands onto gemv's as the caller's contract describes.
        unsafe {
            gemv(
                ROW_MAJOR, p.trans, p.rows, p.cols, g.alpha, matrix, p.ld, x, p.incx, g.beta, g.c, 1,
            )
        };
        FORWARDED.fetch_add(1, Ordering::Relaxed);
        return;
    }
    // SAFETY: arguments passed through unchanged.
    unsafe { g.call(gemm) };
}

/// `cblas_sgemm` as MLX calls it: see the crate docs.
///
/// # Safety
/// Same contract as the CBLAS function.
#[cfg(target_os = "linux")]
#[no_mangle]
#[allow(clippy::too_many_arguments)]
pub unsafe extern "C" fn cblas_sgemm(
    order: c_int,
    trans_a: c_int,
    trans_b: c_int,
    m: c_int,
    n: c_int,
    k: c_int,
    alpha: f32,
    a: *const f32,
    lda: c_int,
    b: *const f32,
    ldb: c_int,
    beta: f32,
    c: *mut f32,
    ldc: c_int,
) {
    let Some(gemm) = real_gemm() else {
        // No BLAS at all behind this symbol: computing nothing would hand back garbage.
        std::process::abort();
    };
    #[rustfmt::skip]
    let call = Gemm { order, trans_a, trans_b, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc };
    // SAFETY: forwarded under the caller's CBLAS contract.
    unsafe { dispatch(gemm, real_gemv(), mode(), &call) }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// Element (r, c) of a stored matrix in the given order.
    fn at(order: c_int, ld: c_int, r: c_int, c: c_int) -> usize {
        (if order == ROW_MAJOR { r * ld + c } else { r + c * ld }) as usize
    }

    /// CBLAS `sgemm` semantics, written out (C is not read when beta is 0).
    unsafe extern "C" fn naive_gemm(
        order: c_int,
        ta: c_int,
        tb: c_int,
        m: c_int,
        n: c_int,
        k: c_int,
        alpha: f32,
        a: *const f32,
        lda: c_int,
        b: *const f32,
        ldb: c_int,
        beta: f32,
        c: *mut f32,
        ldc: c_int,
    ) {
        for i in 0..m {
            for j in 0..n {
                let mut sum = 0.0f32;
                for p in 0..k {
                    let av = unsafe {
                        *a.add(if ta == NO_TRANS {
                            at(order, lda, i, p)
                        } else {
                            at(order, lda, p, i)
                        })
                    };
                    let bv = unsafe {
                        *b.add(if tb == NO_TRANS {
                            at(order, ldb, p, j)
                        } else {
                            at(order, ldb, j, p)
                        })
                    };
                    sum += av * bv;
                }
                let out = unsafe { &mut *c.add(at(order, ldc, i, j)) };
                *out = alpha * sum + if beta == 0.0 { 0.0 } else { beta * *out };
            }
        }
    }

    /// Row-major `sgemv` that always computes `beta * y` (a NaN in y survives beta = 0), the
    /// least forgiving behaviour a BLAS may have.
    unsafe extern "C" fn naive_gemv(
        order: c_int,
        trans: c_int,
        rows: c_int,
        cols: c_int,
        alpha: f32,
        mat: *const f32,
        ld: c_int,
        x: *const f32,
        incx: c_int,
        beta: f32,
        y: *mut f32,
        incy: c_int,
    ) {
        assert_eq!(order, ROW_MAJOR);
        let (out_len, in_len) = if trans == NO_TRANS { (rows, cols) } else { (cols, rows) };
        for o in 0..out_len {
            let mut sum = 0.0f32;
            for i in 0..in_len {
                let mv = unsafe { *mat.add(if trans == NO_TRANS { o * ld + i } else { i * ld + o } as usize) };
                sum += mv * unsafe { *x.add((i * incx) as usize) };
            }
            let out = unsafe { &mut *y.add((o * incy) as usize) };
            *out = alpha * sum + beta * *out;
        }
    }

    fn trans() -> impl Strategy<Value = c_int> {
        prop_oneof![Just(NO_TRANS), Just(TRANS), Just(CONJ_TRANS)]
    }

    proptest! {
        #[test]
        fn forwarded_products_equal_gemm(
            order in prop_oneof![Just(ROW_MAJOR), Just(COL_MAJOR)],
            mode in prop_oneof![Just(Mode::PassThrough), Just(Mode::Gemv), Just(Mode::Skinny)],
            ta in trans(),
            tb in trans(),
            m in 1..11i32,
            n in 1..15i32,
            k in 1..40i32,
            pad_a in 0..3i32,
            pad_b in 0..3i32,
            pad_c in 0..3i32,
            beta in prop_oneof![Just(0.0f32), Just(1.0f32), Just(-0.5f32)],
            seed in any::<u32>(),
        ) {
            let dims = |trans: c_int, r: c_int, c: c_int| if trans == NO_TRANS { (r, c) } else { (c, r) };
            let ld_of = |(r, c): (c_int, c_int), pad: c_int| if order == ROW_MAJOR { c + pad } else { r + pad };
            let len_of = |(r, c): (c_int, c_int), ld: c_int| (if order == ROW_MAJOR { r * ld } else { c * ld }) as usize;
            let (a_dims, b_dims) = (dims(ta, m, k), dims(tb, k, n));
            let (lda, ldb, ldc) = (ld_of(a_dims, pad_a), ld_of(b_dims, pad_b), ld_of((m, n), pad_c));
            // Small integers: every product and sum is exact in f32, so any summation order
            // (SIMD lanes, gemv) must give the very same bits.
            let fill = |len: usize, salt: u32| -> Vec<f32> {
                (0..len).map(|i| (((i as u32).wrapping_mul(2_654_435_761) ^ seed ^ salt) % 17) as f32 - 8.0).collect()
            };
            let a = fill(len_of(a_dims, lda), 1);
            let b = fill(len_of(b_dims, ldb), 2);
            let c0: Vec<f32> = if beta == 0.0 { vec![f32::NAN; len_of((m, n), ldc)] } else { fill(len_of((m, n), ldc), 3) };
            let (mut want, mut got) = (c0.clone(), c0);
            unsafe {
                let call = |c: *mut f32| Gemm {
                    order, trans_a: ta, trans_b: tb, m, n, k, alpha: 1.5,
                    a: a.as_ptr(), lda, b: b.as_ptr(), ldb, beta, c, ldc,
                };
                call(want.as_mut_ptr()).call(naive_gemm);
                dispatch(naive_gemm, Some(naive_gemv), mode, &call(got.as_mut_ptr()));
            }
            // Padding between rows/columns of C keeps its NaN: compare only the product's cells.
            for i in 0..m {
                for j in 0..n {
                    let idx = at(order, ldc, i, j);
                    prop_assert_eq!(got[idx], want[idx], "cell ({}, {})", i, j);
                }
            }
            let single = if order == ROW_MAJOR { m == 1 } else { n == 1 };
            prop_assert_eq!(plan(order, ta, tb, m, n, k, lda, ldb).is_some(), single);
        }
    }

    #[test]
    fn a_large_product_gives_the_same_result() {
        let (m, n, k) = (2usize, 16_384usize, 160usize);
        let x: Vec<f32> = (0..m * k).map(|i| (i % 7) as f32 - 3.0).collect();
        let w: Vec<f32> = (0..n * k).map(|i| (i % 11) as f32 - 5.0).collect();
        let (mut want, mut got) = (vec![0.0f32; m * n], vec![f32::NAN; m * n]);
        let (mi, ni, ki) = (m as c_int, n as c_int, k as c_int);
        let call = |c: *mut f32| Gemm {
            order: ROW_MAJOR,
            trans_a: NO_TRANS,
            trans_b: TRANS,
            m: mi,
            n: ni,
            k: ki,
            alpha: 1.0,
            a: x.as_ptr(),
            lda: ki,
            b: w.as_ptr(),
            ldb: ki,
            beta: 0.0,
            c,
            ldc: ni,
        };
        unsafe {
            call(want.as_mut_ptr()).call(naive_gemm);
            dispatch(naive_gemm, None, Mode::Skinny, &call(got.as_mut_ptr()));
        }
        assert_eq!(got, want);
    }

    #[test]
    fn only_single_row_products_are_planned() {
        assert!(plan(ROW_MAJOR, NO_TRANS, TRANS, 1, 49152, 576, 576, 576).is_some());
        assert!(plan(ROW_MAJOR, NO_TRANS, TRANS, 2, 49152, 576, 576, 576).is_none());
        assert!(plan(COL_MAJOR, NO_TRANS, NO_TRANS, 64, 1, 576, 64, 576).is_some());
        assert!(plan(99, NO_TRANS, TRANS, 1, 8, 8, 8, 8).is_none());
        assert!(plan(ROW_MAJOR, 7, TRANS, 1, 8, 8, 8, 8).is_none());
        assert!(plan(ROW_MAJOR, NO_TRANS, TRANS, 1, 8, 0, 8, 8).is_none());
    }

    #[test]
    fn install_reports_missing_libraries() {
        let err = install("libsmgpy-no-such-blas.so")
            .err()
            .map(|e| e.to_string())
            .unwrap_or_default();
        assert!(err.contains("libsmgpy-no-such-blas.so"), "{err}");
        let err = install("bad\0name").err().map(|e| e.to_string()).unwrap_or_default();
        assert!(err.contains("NUL"), "{err}");
    }
}
