// hostir runtime header, included by every generated kernel. Needs no CUDA
// headers: half and bfloat16 are stored as unsigned short and converted with
// PTX cvt instructions (round to nearest even), so NVRTC compiles kernels
// without a toolkit's include directory.
#pragma once

typedef unsigned short hir_half;
typedef unsigned short hir_bf16;

__device__ __forceinline__ float hir_h2f(hir_half h) {
  float f; asm("cvt.f32.f16 %0, %1;" : "=f"(f) : "h"(h)); return f;
}
__device__ __forceinline__ hir_half hir_f2h(float f) {
  hir_half h; asm("cvt.rn.f16.f32 %0, %1;" : "=h"(h) : "f"(f)); return h;
}
// (Tried, 2026-11-28: mov.b32 {0, b}, one PRMT for either half of a pair where the shift
// takes two for the high half: 11 % fewer instructions in a bf16 layernorm, 2 more
// registers with the GPU's NVRTC, and no change measured on an H100.)
__device__ __forceinline__ float hir_bf2f(hir_bf16 b) {
  return __uint_as_float(((unsigned int)b) << 16);
}
// Point u of a vector of bf16 points v (4-byte aligned, u a constant once unrolled), from
// its pair's 32-bit word: a shift for the low point, an and for the high one (codegen
// cuda.BF16_PAIRS), where converting the 16-bit point took two for the high one.
__device__ __forceinline__ float hir_bf2f_at(const hir_bf16* v, int u) {
  const unsigned w = reinterpret_cast<const unsigned*>(v)[u >> 1];
  return __uint_as_float((u & 1) ? (w & 0xffff0000u) : (w << 16));
}
__device__ __forceinline__ hir_bf16 hir_f2bf(float f) {
  hir_bf16 b; asm("cvt.rn.bf16.f32 %0, %1;" : "=h"(b) : "f"(f)); return b;
}

// Does m share a bit with b? (An `and` the compiler keeps, so a test of a constant bit
// takes one instruction with a predicate result, not a shift, an `and` and a compare.)
__device__ __forceinline__ bool hir_any_bit(unsigned m, unsigned b) {
  unsigned t; asm("and.b32 %0, %1, %2;" : "=r"(t) : "r"(m), "r"(b)); return t != 0u;
}

// Math with float and double overloads (torch semantics where C differs).
#define HIR_UNARY(name, ff, df) \
  __device__ __forceinline__ float name(float x) { return ff(x); } \
  __device__ __forceinline__ double name(double x) { return df(x); }
// HIR_NARROW_MATH (a kernel whose every output is a narrow float: spec.defines):
// exp as 2^(x log2 e) by ex2.approx without flushing subnormals (relative error under
// 1e-5 up to |x| = 88: the rounding of x log2 e).
__device__ __forceinline__ float hir_exp_narrow(float x) {
  float y; asm("ex2.approx.f32 %0, %1;" : "=f"(y) : "f"(x * 1.4426950408889634f)); return y;
}
#ifdef HIR_FAST_MATH  // HOSTIR_ENABLE=fast_math: the hardware approximations (as --use_fast_math)
HIR_UNARY(hir_exp, __expf, exp)
#elif defined(HIR_NARROW_MATH)
HIR_UNARY(hir_exp, hir_exp_narrow, exp)
#else
HIR_UNARY(hir_exp, expf, exp)
#endif
HIR_UNARY(hir_exp2, exp2f, exp2)
HIR_UNARY(hir_expm1, expm1f, expm1)
#ifdef HIR_FAST_MATH
HIR_UNARY(hir_log, __logf, log)
#else
HIR_UNARY(hir_log, logf, log)
#endif
HIR_UNARY(hir_log2, log2f, log2)
HIR_UNARY(hir_log10, log10f, log10)
HIR_UNARY(hir_log1p, log1pf, log1p)
HIR_UNARY(hir_sqrt, sqrtf, sqrt)
HIR_UNARY(hir_rsqrt, rsqrtf, rsqrt)
HIR_UNARY(hir_tanh, tanhf, tanh)
HIR_UNARY(hir_sin, sinf, sin)
HIR_UNARY(hir_cos, cosf, cos)
HIR_UNARY(hir_tan, tanf, tan)
HIR_UNARY(hir_asin, asinf, asin)
HIR_UNARY(hir_acos, acosf, acos)
HIR_UNARY(hir_atan, atanf, atan)
HIR_UNARY(hir_sinh, sinhf, sinh)
HIR_UNARY(hir_cosh, coshf, cosh)
HIR_UNARY(hir_erf, erff, erf)
HIR_UNARY(hir_erfc, erfcf, erfc)
HIR_UNARY(hir_acosh, acoshf, acosh)
HIR_UNARY(hir_asinh, asinhf, asinh)
HIR_UNARY(hir_atanh, atanhf, atanh)
HIR_UNARY(hir_erfinv, erfinvf, erfinv)
HIR_UNARY(hir_erfcinv, erfcinvf, erfcinv)
HIR_UNARY(hir_lgamma, lgammaf, lgamma)
HIR_UNARY(hir_ceil, ceilf, ceil)
HIR_UNARY(hir_floor, floorf, floor)
HIR_UNARY(hir_trunc, truncf, trunc)
HIR_UNARY(hir_round, rintf, rint)

template <typename T> __device__ __forceinline__ T hir_floor(T x) { return x; }
template <typename T> __device__ __forceinline__ T hir_ceil(T x) { return x; }
template <typename T> __device__ __forceinline__ T hir_trunc(T x) { return x; }
template <typename T> __device__ __forceinline__ T hir_round(T x) { return x; }

__device__ __forceinline__ float hir_reciprocal(float x) { return 1.0f / x; }
__device__ __forceinline__ double hir_reciprocal(double x) { return 1.0 / x; }
__device__ __forceinline__ float hir_sigmoid(float x) { return 1.0f / (1.0f + hir_exp(-x)); }
__device__ __forceinline__ double hir_sigmoid(double x) { return 1.0 / (1.0 + exp(-x)); }

template <typename T> __device__ __forceinline__ T hir_abs(T x) { return x < T(0) ? -x : x; }
__device__ __forceinline__ float hir_abs(float x) { return fabsf(x); }
__device__ __forceinline__ double hir_abs(double x) { return fabs(x); }
template <typename T> __device__ __forceinline__ T hir_relu(T x) { return x > T(0) ? x : T(0); }
__device__ __forceinline__ float hir_relu(float x) { return x != x ? x : (x > 0.0f ? x : 0.0f); }
__device__ __forceinline__ double hir_relu(double x) { return x != x ? x : (x > 0.0 ? x : 0.0); }
template <typename T> __device__ __forceinline__ T hir_sign(T x) { return T((T(0) < x) - (x < T(0))); }
__device__ __forceinline__ float hir_sign(float x) { return x != x ? x : float((0.0f < x) - (x < 0.0f)); }
__device__ __forceinline__ double hir_sign(double x) { return x != x ? x : double((0.0 < x) - (x < 0.0)); }
template <typename T> __device__ __forceinline__ bool hir_isnan(T x) { return x != x; }
template <typename T> __device__ __forceinline__ bool hir_isinf(T x) { return false; }
__device__ __forceinline__ bool hir_isinf(float x) { return isinf(x); }
__device__ __forceinline__ bool hir_isinf(double x) { return isinf(x); }
template <typename T> __device__ __forceinline__ bool hir_isfinite(T x) { return true; }
__device__ __forceinline__ bool hir_isfinite(float x) { return isfinite(x); }
__device__ __forceinline__ bool hir_isfinite(double x) { return isfinite(x); }

// A copy of N bytes (4, 8 or 16) from global to shared memory that no register holds
// (cp.async; 16 bytes past L1): a kept row's first read; hir_cp_async_wait before use.
template <int N> __device__ __forceinline__ void hir_cp_async(void* smem, const void* g) {
  const unsigned s = (unsigned)__cvta_generic_to_shared(smem);
  if (N == 16) asm volatile("cp.async.cg.shared.global [%0], [%1], 16;" :: "r"(s), "l"(g) : "memory");
  else asm volatile("cp.async.ca.shared.global [%0], [%1], %2;" :: "r"(s), "l"(g), "n"(N) : "memory");
}
__device__ __forceinline__ void hir_cp_async_wait() { asm volatile("cp.async.wait_all;" ::: "memory"); }
// The same copy issued only once `dep` (a word the thread read from the slot it
// overwrites) is in a register: the slot's last read is done before the copy may land.
template <int N> __device__ __forceinline__ void hir_cp_async_after(void* smem, const void* g, unsigned dep) {
  const unsigned s = (unsigned)__cvta_generic_to_shared(smem);
  if (N == 16) asm volatile("cp.async.cg.shared.global [%0], [%1], 16;" :: "r"(s), "l"(g), "r"(dep) : "memory");
  else asm volatile("cp.async.ca.shared.global [%0], [%1], %2;" :: "r"(s), "l"(g), "n"(N), "r"(dep) : "memory");
}
// Groups of copies: a chunk's copies committed as one group, and a wait until at most
// `n` of this thread's groups are pending (n a constant in each unrolled copy of a loop).
__device__ __forceinline__ void hir_cp_async_commit() { asm volatile("cp.async.commit_group;" ::: "memory"); }
__device__ __forceinline__ void hir_cp_async_wait_pending(int n) {
  switch (n) {
#define HIR_WAIT_GROUP(k) case k: asm volatile("cp.async.wait_group " #k ";" ::: "memory"); break;
    HIR_WAIT_GROUP(0) HIR_WAIT_GROUP(1) HIR_WAIT_GROUP(2) HIR_WAIT_GROUP(3) HIR_WAIT_GROUP(4)
    HIR_WAIT_GROUP(5) HIR_WAIT_GROUP(6) HIR_WAIT_GROUP(7) HIR_WAIT_GROUP(8) HIR_WAIT_GROUP(9)
    HIR_WAIT_GROUP(10) HIR_WAIT_GROUP(11) HIR_WAIT_GROUP(12) HIR_WAIT_GROUP(13) HIR_WAIT_GROUP(14)
    HIR_WAIT_GROUP(15)
#undef HIR_WAIT_GROUP
    default: asm volatile("cp.async.wait_all;" ::: "memory");
  }
}

// A warp's tile of rows (row_tiles.TILE_ROWS): rows row0 .. row0 + 31 of a tensor
// of `rows` dense rows of R points (16-byte aligned; a tile of 32 rows starts at a
// multiple of 16 bytes), copied into shared memory at `smem` by cp.async in 16-byte
// pieces, a lane every 16th (the last piece zero-filled past the rows), committed as
// one group (an empty one past the last row: every lane counts the same groups).
// N > 0: a whole tile's pieces (32 rows: 64 x R bytes, a multiple of 16) a lane
// N at most, unrolled (row_tiles.TILE_UNROLL); a part tile's in a loop.
template <int N, typename T>
__device__ __forceinline__ void hir_tile_in(void* smem, const T* g, long long row0, long long rows,
                                            int R, int lane) {
  if (row0 < rows) {
    const long long n = rows - row0 < 32 ? rows - row0 : 32;
    const int bytes = (int)(n * R * (long long)sizeof(T));
    const char* src = reinterpret_cast<const char*>(g + row0 * R);
    const unsigned dst = (unsigned)__cvta_generic_to_shared(smem);
    if (N && n == 32) {
      #pragma unroll
      for (int i = 0; i < (N ? N : 1); ++i) {
        const int off = lane * 16 + i * 512;
        if (off < bytes)
          asm volatile("cp.async.cg.shared.global [%0], [%1], 16;" :: "r"(dst + off), "l"(src + off) : "memory");
      }
    } else {
      for (int off = lane * 16; off < bytes; off += 512) {
        const int got = bytes - off < 16 ? bytes - off : 16;
        asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;" :: "r"(dst + off), "l"(src + off), "r"(got)
                     : "memory");
      }
    }
  }
  asm volatile("cp.async.commit_group;" ::: "memory");
}
// ... and a tile computed in place copied out: 16-byte pieces, the last one's points one at a time.
template <int N, typename T>
__device__ __forceinline__ void hir_tile_out(T* g, const void* smem, long long row0, long long rows,
                                             int R, int lane) {
  if (row0 >= rows) return;
  const long long n = rows - row0 < 32 ? rows - row0 : 32;
  const int bytes = (int)(n * R * (long long)sizeof(T));
  char* dst = reinterpret_cast<char*>(g + row0 * R);
  const char* src = reinterpret_cast<const char*>(smem);
  if (N && n == 32) {
    #pragma unroll
    for (int i = 0; i < (N ? N : 1); ++i) {
      const int off = lane * 16 + i * 512;
      if (off < bytes) *reinterpret_cast<uint4*>(dst + off) = *reinterpret_cast<const uint4*>(src + off);
    }
    return;
  }
  #pragma unroll 1
  for (int off = lane * 16; off < bytes; off += 512) {
    if (off + 16 <= bytes) {
      *reinterpret_cast<uint4*>(dst + off) = *reinterpret_cast<const uint4*>(src + off);
    } else {
      for (int u = off; u < bytes; u += (int)sizeof(T))
        *reinterpret_cast<T*>(dst + u) = *reinterpret_cast<const T*>(src + u);
    }
  }
}

// ---------------------------------------------------------------- thread-block clusters
// A row split over the CTAs of a cluster (sm_90): each CTA combines its part,
// publishes it in its shared memory, and after the cluster barrier every CTA
// reads all parts from its peers' shared memory (distributed shared memory),
// in rank order: the same combines in every CTA.
#if !defined(__CUDA_ARCH__) || __CUDA_ARCH__ >= 900
__device__ __forceinline__ unsigned hir_cluster_rank() {
  unsigned r;
  asm volatile("mov.u32 %0, %%cluster_ctarank;" : "=r"(r));
  return r;
}
// Every thread of every CTA of the cluster arrives (release) and waits (acquire):
// shared-memory writes before it are visible to the peers' reads after it.
__device__ __forceinline__ void hir_cluster_sync() {
  asm volatile("barrier.cluster.arrive.release.aligned;\n\tbarrier.cluster.wait.acquire.aligned;"
               ::: "memory");
}
// `x` (in this CTA's shared memory) as the CTA of cluster rank `rank` holds it.
template <typename V>
__device__ __forceinline__ V hir_cluster_read(const V& x, unsigned rank) {
  unsigned long long at;
  asm volatile("mapa.u64 %0, %1, %2;" : "=l"(at) : "l"(&x), "r"(rank));
  return *reinterpret_cast<const V*>(at);
}
#endif

// Debug timestamps (rows.STAMPS, read by benchmarks/timeline.py): the CTA of a
// row (a block or a cluster's CTA a row) writes the row's start, its first
// barrier and its end (%globaltimer, ns), and its SM and block, into the four
// words of slot `slot` modulo HIR_STAMPS.
#ifdef HIR_STAMPS
__device__ unsigned long long hir_stamps[HIR_STAMPS * 4];
__device__ __forceinline__ unsigned long long hir_now() {
  unsigned long long t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
}
__device__ __forceinline__ void hir_stamp_barrier(unsigned long long slot) {
  hir_stamps[(slot % HIR_STAMPS) * 4 + 1] = hir_now();
}
__device__ __forceinline__ void hir_stamp_row(unsigned long long slot, unsigned long long start) {
  unsigned sm;
  asm volatile("mov.u32 %0, %%smid;" : "=r"(sm));
  unsigned long long* w = hir_stamps + (slot % HIR_STAMPS) * 4;
  w[0] = start;
  w[2] = hir_now();
  w[3] = ((unsigned long long)sm << 32) | blockIdx.x;
}
#endif

// A cluster's (or a block's) next row (rows.CLUSTER_DRAWN, BLOCK_DRAWN), drawn
// by one thread from a 64-bit ticket counter (sem[0..1]) that is zeroed once,
// when allocated, and never reset. The launch's `clusters` take rows 0 ..
// clusters - 1 first; each then draws once a row it takes, until it draws a
// row past the last (`nrows` or more). A launch starting at a multiple of
// nrows draws remainders 0, 1, ... in order: all nrows - clusters rows, then
// the clusters' tickets past the end, one each: exactly nrows tickets, so the
// next launch starts at a multiple of nrows too (launches on one stream do not
// overlap).
__device__ __forceinline__ long long hir_next_row(unsigned* sem, long long nrows, long long clusters) {
  const unsigned long long t = atomicAdd(reinterpret_cast<unsigned long long*>(sem), 1ull);
  return (long long)(t % (unsigned long long)nrows) + clusters;
}

// A value another block wrote before a __threadfence: read from L2, never a stale L1 line.
template <typename T> __device__ __forceinline__ T hir_ld_l2(const T* p) { return *(const volatile T*)p; }
__device__ __forceinline__ float hir_ld_l2(const float* p) { return __ldcg(p); }
__device__ __forceinline__ double hir_ld_l2(const double* p) { return __ldcg(p); }
__device__ __forceinline__ int hir_ld_l2(const int* p) { return __ldcg(p); }
__device__ __forceinline__ long long hir_ld_l2(const long long* p) { return __ldcg(p); }

// max/min propagate NaN like torch.maximum/minimum.
template <typename T> __device__ __forceinline__ T hir_max(T a, T b) { return a > b ? a : b; }
template <typename T> __device__ __forceinline__ T hir_min(T a, T b) { return a < b ? a : b; }
#if __CUDA_ARCH__ >= 800  // one instruction (max.NaN: a NaN operand gives the canonical NaN)
__device__ __forceinline__ float hir_max(float a, float b) { float d; asm("max.NaN.f32 %0, %1, %2;" : "=f"(d) : "f"(a), "f"(b)); return d; }
__device__ __forceinline__ float hir_min(float a, float b) { float d; asm("min.NaN.f32 %0, %1, %2;" : "=f"(d) : "f"(a), "f"(b)); return d; }
#else
__device__ __forceinline__ float hir_max(float a, float b) { return (a != a || b != b) ? __int_as_float(0x7fc00000) : fmaxf(a, b); }
__device__ __forceinline__ float hir_min(float a, float b) { return (a != a || b != b) ? __int_as_float(0x7fc00000) : fminf(a, b); }
#endif
__device__ __forceinline__ double hir_max(double a, double b) { return (a != a || b != b) ? __longlong_as_double(0x7ff8000000000000LL) : fmax(a, b); }
__device__ __forceinline__ double hir_min(double a, double b) { return (a != a || b != b) ? __longlong_as_double(0x7ff8000000000000LL) : fmin(a, b); }

// Integer division floors (Python/torch floor division); floats divide.
template <typename T> __device__ __forceinline__ T hir_div(T a, T b) {
  T q = a / b; return (a % b != 0 && ((a < 0) != (b < 0))) ? q - 1 : q;
}
#ifdef HIR_FAST_MATH
__device__ __forceinline__ float hir_div(float a, float b) { return __fdividef(a, b); }
#elif defined(HIR_NARROW_MATH)  // full range, 2 ulp of float at most
__device__ __forceinline__ float hir_div(float a, float b) {
  float q; asm("div.full.f32 %0, %1, %2;" : "=f"(q) : "f"(a), "f"(b)); return q;
}
#else
__device__ __forceinline__ float hir_div(float a, float b) { return a / b; }
#endif
__device__ __forceinline__ double hir_div(double a, double b) { return a / b; }
template <typename T> __device__ __forceinline__ T hir_ceildiv(T a, T b) { return -hir_div<T>(-a, b); }
template <typename T> __device__ __forceinline__ T hir_remainder(T a, T b) {
  T r = a % b; return (r != 0 && ((r < 0) != (b < 0))) ? r + b : r;
}
__device__ __forceinline__ float hir_remainder(float a, float b) { float r = fmodf(a, b); return (r != 0.0f && ((r < 0.0f) != (b < 0.0f))) ? r + b : r; }
__device__ __forceinline__ double hir_remainder(double a, double b) { double r = fmod(a, b); return (r != 0.0 && ((r < 0.0) != (b < 0.0))) ? r + b : r; }
template <typename T> __device__ __forceinline__ T hir_fmod(T a, T b) { return a % b; }
__device__ __forceinline__ float hir_fmod(float a, float b) { return fmodf(a, b); }
__device__ __forceinline__ double hir_fmod(double a, double b) { return fmod(a, b); }
template <typename T> __device__ __forceinline__ T hir_pow(T a, T b) {
  if (b < 0) return a == 1 ? T(1) : (a == -1 ? ((b & 1) ? T(-1) : T(1)) : T(0));
  T r = 1; while (b) { if (b & 1) r *= a; a *= a; b >>= 1; } return r;
}
__device__ __forceinline__ float hir_pow(float a, float b) { return powf(a, b); }
__device__ __forceinline__ double hir_pow(double a, double b) { return pow(a, b); }
__device__ __forceinline__ float hir_atan2(float a, float b) { return atan2f(a, b); }
__device__ __forceinline__ double hir_atan2(double a, double b) { return atan2(a, b); }
template <typename T> __device__ __forceinline__ T hir_bitwise_not(T x) { return ~x; }
__device__ __forceinline__ bool hir_bitwise_not(bool x) { return !x; }

// argmax's accumulator: a value and its index. hir_argmax keeps the greater value
// (a NaN the greatest), of equal values (and of NaNs) the smaller index: a strict
// order on the pairs, so any order of combining picks the first greatest, as torch.
template <typename T> struct hir_vi { T v; long long i; };
template <typename T> __device__ __forceinline__ hir_vi<T> hir_argmax(hir_vi<T> a, hir_vi<T> b) {
  const bool a_nan = a.v != a.v, b_nan = b.v != b.v;
  const bool b_wins = b_nan ? (!a_nan || b.i < a.i)
                            : (!a_nan && (b.v > a.v || (b.v == a.v && b.i < a.i)));
  return b_wins ? b : a;
}
template <typename T> __device__ __forceinline__ hir_vi<T> hir_ld_l2(const hir_vi<T>* p) {
  return {hir_ld_l2(&p->v), hir_ld_l2(&p->i)};
}

// The online softmax's accumulator (codegen/online.py): a row's max so far m and the
// sum so far s of c * exp(a - m). Of two pairs, the smaller max's sum is scaled by
// exp(its max - the greater): one exp a combine. Equal maxima scale by 1, infinite
// ones too, so leading -inf points (a masked prefix) never make s NaN
// (exp(-inf - -inf)); a later finite max scales what they added by exp(-inf) = 0.
// A NaN max fails the comparison and makes the scale, so the sum, NaN.
// Exps of a value less its row's max (x <= 0; cuda_schedules.shifted_exps), under
// HIR_NARROW_MATH or HIR_FAST_MATH (HIR_EXACT_SCALE: hir_exp, for tuning):
// - hir_exp_scale: one that only scales or adds into a sum of 1 or more (an online
//   pair's scale exp(small - big), a softmax's summed terms): ex2.approx with
//   subnormals flushed, which moves the sum by less than 2^-100 of it;
// - hir_exp_shifted: an output's: ex2.approx.ftz of x log2 e + 32, times 2^-32, so
//   results under 2^-126 still come out subnormal (the product rounds them) without the
//   non-flushing ex2's range fix-up; relative error under 3e-6.
template <typename T> __device__ __forceinline__ T hir_exp_scale(T x) { return hir_exp(x); }
template <typename T> __device__ __forceinline__ T hir_exp_shifted(T x) { return hir_exp(x); }
#if (defined(HIR_NARROW_MATH) || defined(HIR_FAST_MATH)) && !defined(HIR_EXACT_SCALE)
__device__ __forceinline__ float hir_ex2_ftz(float t) {
  float y; asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(t)); return y;
}
template <> __device__ __forceinline__ float hir_exp_scale<float>(float x) {
  return hir_ex2_ftz(x * 1.4426950408889634f);
}
template <> __device__ __forceinline__ float hir_exp_shifted<float>(float x) {
  return hir_ex2_ftz(fmaf(x, 1.4426950408889634f, 32.0f)) * 2.3283064365386963e-10f;
}
#endif
template <typename T> struct hir_ms { T m, s; };
template <typename T> __device__ __forceinline__ hir_ms<T> hir_online(hir_ms<T> x, hir_ms<T> y) {
  const bool first = x.m >= y.m;
  const T big_m = first ? x.m : y.m, small_m = first ? y.m : x.m;
  const T big_s = first ? x.s : y.s, small_s = first ? y.s : x.s;
  const T e = small_m == big_m ? T(1) : hir_exp_scale(small_m - big_m);
  return {hir_max(x.m, y.m), big_s + small_s * e};
}
template <typename T> __device__ __forceinline__ T hir_online_max(hir_ms<T> a) { return a.m; }
// The sum pass by pass: NaN where the max is infinite (a row all -inf, or with a +inf,
// has a term exp(x - max) of inf - inf); m - m is that NaN.
template <typename T> __device__ __forceinline__ T hir_online_sum(hir_ms<T> a) {
  return hir_isinf(a.m) ? a.m - a.m : a.s;
}
template <typename T> __device__ __forceinline__ hir_ms<T> hir_ld_l2(const hir_ms<T>* p) {
  return {hir_ld_l2(&p->m), hir_ld_l2(&p->s)};
}

// A warp shuffle of a value or of a pair (field by field).
template <typename V> __device__ __forceinline__ V hir_shfl_xor(V v, int o, int w) {
  return __shfl_xor_sync(0xffffffffu, v, o, w);
}
template <typename T> __device__ __forceinline__ hir_vi<T> hir_shfl_xor(hir_vi<T> v, int o, int w) {
  return {__shfl_xor_sync(0xffffffffu, v.v, o, w), __shfl_xor_sync(0xffffffffu, v.i, o, w)};
}
template <typename T> __device__ __forceinline__ hir_ms<T> hir_shfl_xor(hir_ms<T> v, int o, int w) {
  return {__shfl_xor_sync(0xffffffffu, v.m, o, w), __shfl_xor_sync(0xffffffffu, v.s, o, w)};
}

// ---------------------------------------------------------------- complex numbers
// complex64 / complex128 as torch lays them out (real part first, aligned as one
// 8- or 16-byte word, so vector loads move whole elements). No <complex>: NVRTC
// compiles without standard headers. Results follow torch's (c10::complex):
// abs through hypot, division scaled as numpy's (Smith's method).
template <typename T> struct alignas(2 * sizeof(T)) hir_complex {
  T re, im;
  hir_complex() = default;  // trivial: complex arrays may live in shared memory
  __device__ __forceinline__ hir_complex(T r, T i = T(0)) : re(r), im(i) {}
  template <typename U>
  __device__ __forceinline__ explicit hir_complex(hir_complex<U> z) : re(T(z.re)), im(T(z.im)) {}
  __device__ __forceinline__ explicit operator bool() const { return re != T(0) || im != T(0); }
};
typedef hir_complex<float> hir_cfloat;
typedef hir_complex<double> hir_cdouble;

#define HIR_C template <typename T> __device__ __forceinline__
HIR_C hir_complex<T> operator-(hir_complex<T> a) { return hir_complex<T>(-a.re, -a.im); }
HIR_C hir_complex<T> operator+(hir_complex<T> a, hir_complex<T> b) { return hir_complex<T>(a.re + b.re, a.im + b.im); }
HIR_C hir_complex<T> operator-(hir_complex<T> a, hir_complex<T> b) { return hir_complex<T>(a.re - b.re, a.im - b.im); }
HIR_C hir_complex<T> operator*(hir_complex<T> a, hir_complex<T> b) {
  return hir_complex<T>(a.re * b.re - a.im * b.im, a.re * b.im + a.im * b.re);
}
HIR_C hir_complex<T> operator/(hir_complex<T> a, hir_complex<T> b) {
  // scaled by the larger part of b, so |b|^2 neither overflows nor underflows
  const T c = b.re, d = b.im;
  if (hir_abs(c) >= hir_abs(d)) {
    if (c == T(0) && d == T(0)) return hir_complex<T>(a.re / hir_abs(c), a.im / hir_abs(d));
    const T rat = d / c, scl = T(1) / (c + d * rat);
    return hir_complex<T>((a.re + a.im * rat) * scl, (a.im - a.re * rat) * scl);
  }
  const T rat = c / d, scl = T(1) / (d + c * rat);
  return hir_complex<T>((a.re * rat + a.im) * scl, (a.im * rat - a.re) * scl);
}
HIR_C bool operator==(hir_complex<T> a, hir_complex<T> b) { return a.re == b.re && a.im == b.im; }
HIR_C bool operator!=(hir_complex<T> a, hir_complex<T> b) { return !(a == b); }
HIR_C hir_complex<T> hir_div(hir_complex<T> a, hir_complex<T> b) { return a / b; }
HIR_C hir_complex<T> hir_reciprocal(hir_complex<T> z) { return hir_complex<T>(T(1)) / z; }

// real, imag, isreal of any value (a real value is its own real part)
template <typename T> __device__ __forceinline__ T hir_real(T x) { return x; }
template <typename T> __device__ __forceinline__ T hir_imag(T x) { return T(0); }
template <typename T> __device__ __forceinline__ bool hir_isreal(T x) { return true; }
HIR_C T hir_real(hir_complex<T> z) { return z.re; }
HIR_C T hir_imag(hir_complex<T> z) { return z.im; }
HIR_C bool hir_isreal(hir_complex<T> z) { return z.im == T(0); }
HIR_C bool hir_isinf(hir_complex<T> z) { return hir_isinf(z.re) || hir_isinf(z.im); }
HIR_C bool hir_isfinite(hir_complex<T> z) { return hir_isfinite(z.re) && hir_isfinite(z.im); }

__device__ __forceinline__ float hir_hypot(float a, float b) { return hypotf(a, b); }
__device__ __forceinline__ double hir_hypot(double a, double b) { return hypot(a, b); }
__device__ __forceinline__ float hir_copysign(float a, float b) { return copysignf(a, b); }
__device__ __forceinline__ double hir_copysign(double a, double b) { return copysign(a, b); }
HIR_C T hir_abs(hir_complex<T> z) { return hir_hypot(z.re, z.im); }
HIR_C hir_complex<T> hir_exp(hir_complex<T> z) {
  const T e = hir_exp(z.re);
  return hir_complex<T>(e * hir_cos(z.im), e * hir_sin(z.im));
}
HIR_C hir_complex<T> hir_log(hir_complex<T> z) {
  return hir_complex<T>(hir_log(hir_hypot(z.re, z.im)), hir_atan2(z.im, z.re));
}
HIR_C hir_complex<T> hir_sqrt(hir_complex<T> z) {
  // the principal root from the part that does not cancel: t = sqrt((|x| + |z|) / 2)
  if (z.re == T(0) && z.im == T(0)) return hir_complex<T>(T(0), z.im);
  const T t = hir_sqrt((hir_abs(z.re) + hir_hypot(z.re, z.im)) * T(0.5));
  if (z.re >= T(0)) return hir_complex<T>(t, z.im / (T(2) * t));
  return hir_complex<T>(hir_abs(z.im) / (T(2) * t), hir_copysign(t, z.im));
}
HIR_C hir_complex<T> hir_rsqrt(hir_complex<T> z) { return hir_reciprocal(hir_sqrt(z)); }
HIR_C hir_complex<T> hir_sin(hir_complex<T> z) {
  return hir_complex<T>(hir_sin(z.re) * hir_cosh(z.im), hir_cos(z.re) * hir_sinh(z.im));
}
HIR_C hir_complex<T> hir_cos(hir_complex<T> z) {
  return hir_complex<T>(hir_cos(z.re) * hir_cosh(z.im), -(hir_sin(z.re) * hir_sinh(z.im)));
}
HIR_C hir_complex<T> hir_tanh(hir_complex<T> z) {
  // Kahan's form (no cancellation, no overflow of cosh(2x) for large |x|)
  const T x = z.re, y = z.im;
  if (hir_abs(x) >= T(sizeof(T) == 4 ? 9 : 22)) {
    const T e = hir_exp(-hir_abs(x));
    return hir_complex<T>(hir_copysign(T(1), x), T(4) * hir_sin(y) * hir_cos(y) * e * e);
  }
  const T t = hir_tan(y), beta = T(1) + t * t, s = hir_sinh(x), rho = hir_sqrt(T(1) + s * s);
  const T den = T(1) + beta * s * s;
  return hir_complex<T>(beta * rho * s / den, t / den);
}

// warp shuffles move a complex value part by part (the scans' __shfl_up_sync and
// __shfl_sync take it through these overloads)
HIR_C hir_complex<T> hir_shfl_xor(hir_complex<T> v, int o, int w) {
  return hir_complex<T>(__shfl_xor_sync(0xffffffffu, v.re, o, w), __shfl_xor_sync(0xffffffffu, v.im, o, w));
}
HIR_C hir_complex<T> __shfl_up_sync(unsigned m, hir_complex<T> v, unsigned o, int w = 32) {
  return hir_complex<T>(__shfl_up_sync(m, v.re, o, w), __shfl_up_sync(m, v.im, o, w));
}
HIR_C hir_complex<T> __shfl_sync(unsigned m, hir_complex<T> v, int l, int w = 32) {
  return hir_complex<T>(__shfl_sync(m, v.re, l, w), __shfl_sync(m, v.im, l, w));
}
__device__ __forceinline__ hir_cfloat hir_ld_l2(const hir_cfloat* p) {
  const float2 v = __ldcg(reinterpret_cast<const float2*>(p)); return hir_cfloat(v.x, v.y);
}
__device__ __forceinline__ hir_cdouble hir_ld_l2(const hir_cdouble* p) {
  const double2 v = __ldcg(reinterpret_cast<const double2*>(p)); return hir_cdouble(v.x, v.y);
}
#undef HIR_C

// Reduction of v over each group of min(T, 32) consecutive lanes of a warp (T a
// power of two); every lane of the group gets the result.
template <int T, typename V, typename F>
__device__ __forceinline__ V hir_warp_reduce(V v, F f) {
  constexpr int W = T < 32 ? T : 32;
#pragma unroll
  for (int o = W / 2; o > 0; o /= 2) v = f(v, hir_shfl_xor(v, o, W));
  return v;
}

// The combine of a group's T / 32 warp results (T a power of two past 32),
// slots[0 .. T / 32), in every lane: lane l takes slot l % (T / 32), then
// reduces over its T / 32 consecutive lanes (a tree: log2(T / 32) combines a
// thread, not T / 32 - 1 in a row). Each lane combines the same pairs (the
// combines commute), so every thread gets the same result.
template <int T, typename V, typename F>
__device__ __forceinline__ V hir_warps_combine(const V* slots, F f) {
  return hir_warp_reduce<T / 32>(slots[(threadIdx.x & 31) % (T / 32)], f);
}

#if !defined(__CUDA_ARCH__) || __CUDA_ARCH__ >= 900
// The combine of a cluster's Q x W warp results (W slots a CTA at `slots`, the
// same place in each CTA's shared memory; result i is CTA i / W's slot i % W),
// in every thread of every CTA: lane l combines results l, l + 32, ... in that
// order, then the warp's lanes combine in a tree (fewer than 32 results: lane l
// takes result l % N, groups of N lanes combine). Every thread combines the
// same values the same way, so all get the same result.
template <int W, int Q, typename V, typename F>
__device__ __forceinline__ V hir_cluster_warps(const V* slots, F f) {
  constexpr int N = W * Q;
  const int l = threadIdx.x & 31;
  if constexpr (N <= 32) {
    const int i = l % N;
    return hir_warp_reduce<N>(hir_cluster_read(slots[i % W], (unsigned)(i / W)), f);
  } else {
    V v = hir_cluster_read(slots[l % W], (unsigned)(l / W));
#pragma unroll
    for (int i = l + 32; i < N; i += 32) v = f(v, hir_cluster_read(slots[i % W], (unsigned)(i / W)));
    return hir_warp_reduce<32>(v, f);
  }
}
#endif

// The 16 bytes of the 32-byte concatenation (lo, hi) that start at byte b
// (0 to 16): a vector read off its boundary from the two aligned vectors
// around it, the offset known at run time: the word offset b / 4 a branch
// (uniform where a warp's rows start alike), then 4 funnel shifts, no local
// memory. (Word selects for every word took about 22 instructions a call,
// against about 9: H200 % of copy, same run, selects / branch: layernorm bf16
// 13104x5121 73.1 / 83.8, fp16 16380x4097 74.6 / 83.8, bf16 4096x4097 61.9 /
// 65.1, 259x258961 49.3 / 54.7, rmsnorm bf16 92820x723 86.9 / 90.3; but
// rmsnorm bf16 5230x12831, unbounded, 82.3 / 76.0: 40 registers / 50.)
__device__ __forceinline__ uint4 hir_funnel16(uint4 lo, uint4 hi, int b) {
  const unsigned r = (unsigned)(b & 3) * 8u;
#define HIR_FS4(a, c, d, e, f) make_uint4(__funnelshift_r(a, c, r), __funnelshift_r(c, d, r), \
                                          __funnelshift_r(d, e, r), __funnelshift_r(e, f, r))
  switch (b >> 2) {
    case 0: return HIR_FS4(lo.x, lo.y, lo.z, lo.w, hi.x);
    case 1: return HIR_FS4(lo.y, lo.z, lo.w, hi.x, hi.y);
    case 2: return HIR_FS4(lo.z, lo.w, hi.x, hi.y, hi.z);
    case 3: return HIR_FS4(lo.w, hi.x, hi.y, hi.z, hi.w);
    default: return HIR_FS4(hi.x, hi.y, hi.z, hi.w, hi.w);
  }
#undef HIR_FS4
}

// Lane + 1's 4, 8 or 16 bytes (a warp's lanes all taking part; the last lane gets
// its own): an outer tile's shifted lane takes its vector from its aligned one and
// this (codegen cuda_outer_shift).
__device__ __forceinline__ unsigned hir_shfl_down(unsigned v) { return __shfl_down_sync(0xffffffffu, v, 1); }
__device__ __forceinline__ uint2 hir_shfl_down(uint2 v) {
  return make_uint2(hir_shfl_down(v.x), hir_shfl_down(v.y));
}
__device__ __forceinline__ uint4 hir_shfl_down(uint4 v) {
  return make_uint4(hir_shfl_down(v.x), hir_shfl_down(v.y), hir_shfl_down(v.z), hir_shfl_down(v.w));
}

// The 8 bytes of the 16-byte concatenation (lo, hi) that start at byte b (0 to 8):
// hir_funnel16's for 8-byte vectors (2-byte rows in shifted vectors of 4: codegen
// row_widths.HALF_SHIFT_POINTS).
__device__ __forceinline__ uint2 hir_funnel8(uint2 lo, uint2 hi, int b) {
  const unsigned r = (unsigned)(b & 3) * 8u;
  switch (b >> 2) {
    case 0: return make_uint2(__funnelshift_r(lo.x, lo.y, r), __funnelshift_r(lo.y, hi.x, r));
    case 1: return make_uint2(__funnelshift_r(lo.y, hi.x, r), __funnelshift_r(hi.x, hi.y, r));
    default: return hi;
  }
}

// ... and for 4-byte vectors (b 0 to 3).
__device__ __forceinline__ unsigned hir_funnel4(unsigned lo, unsigned hi, int b) {
  return __funnelshift_r(lo, hi, (unsigned)b * 8u);
}

// Inclusive scan of v over each group of T consecutive lanes of a warp (T a power
// of two, at most 32): lane i gets f(...f(f(v_0, v_1), v_2)..., v_i) in a fixed
// order of combines (earlier lanes' part first), so results are deterministic.
template <int T, typename V, typename F>
__device__ __forceinline__ V hir_warp_scan(V v, F f) {
#pragma unroll
  for (int o = 1; o < T; o *= 2) {
    const V y = __shfl_up_sync(0xffffffffu, v, o, T);
    if ((threadIdx.x % T) >= o) v = f(y, v);
  }
  return v;
}

// The N values at p, made values the compiler cannot see through (an empty asm
// that may change them, a 32-bit word at a time where they fill whole words):
// a recomputation from them is not folded into an earlier one, whose results
// would then stay live in registers. (Odd-sized runs of bytes pass as they are:
// results stay right, the registers may not.)
template <int N, typename T>
__device__ __forceinline__ void hir_opaque(T* p) {
  if constexpr (N * sizeof(T) % 4 == 0) {
    unsigned* w = reinterpret_cast<unsigned*>(p);
#pragma unroll
    for (int i = 0; i < N * (int)sizeof(T) / 4; ++i) asm volatile("" : "+r"(w[i]));
  } else if constexpr (sizeof(T) == 2) {
#pragma unroll
    for (int i = 0; i < N; ++i) {
      unsigned short b; memcpy(&b, p + i, 2); asm volatile("" : "+h"(b)); memcpy(p + i, &b, 2);
    }
  }
}

// The whole 16-byte lines inside [p, p + bytes) into L2, by one thread: a bulk
// prefetch (a hint; no data comes back) on sm_90 and later, nothing before.
__device__ __forceinline__ void hir_prefetch_l2(const void* p, long long bytes) {
#if __CUDA_ARCH__ >= 900
  const unsigned long long a = (unsigned long long)p, lo = (a + 15) & ~15ull, hi = (a + bytes) & ~15ull;
  for (unsigned long long at = lo; at < hi; at += 1u << 20) {
    const unsigned n = (unsigned)(hi - at < (1u << 20) ? hi - at : (1u << 20));
    asm volatile("cp.async.bulk.prefetch.L2.global [%0], %1;" :: "l"(at), "r"(n) : "memory");
  }
#endif
}

// A chained scan's published value (a tile's total or inclusive prefix): the
// value's bytes in W parts of 32 bits, each in a 64-bit word whose upper half is
// the launch's epoch once written (hir_chain_epoch; words of earlier launches carry
// earlier epochs, so the words are never zeroed again). A 64-bit store is seen
// whole or not at all, so a reader needs no fence between a value and its flag:
// one round trip to L2 reads both. hir_chain_get returns whether every part was
// written in this launch.
template <int W, typename V>
__device__ __forceinline__ void hir_chain_put(volatile unsigned long long* w, V v, unsigned epoch) {
  static_assert(sizeof(V) <= 4 * W, "a chained value's parts");
  unsigned p[W] = {};
  memcpy(p, &v, sizeof(V));
#pragma unroll
  for (int i = 0; i < W; ++i) w[i] = ((unsigned long long)epoch << 32) | p[i];
}

template <int W, typename V>
__device__ __forceinline__ bool hir_chain_get(const volatile unsigned long long* w, V& v, unsigned epoch) {
  unsigned p[W];
  bool ok = true;
#pragma unroll
  for (int i = 0; i < W; ++i) {
    const unsigned long long x = w[i];
    ok = ok && (unsigned)(x >> 32) == epoch;
    p[i] = (unsigned)x;
  }
  memcpy(&v, p, sizeof(V));
  return ok;
}

// A chained launch's tile (drawn in the order blocks start) and epoch, by thread 0,
// from one 64-bit ticket counter (sem[0..1]) that is never reset: every launch
// draws exactly ntiles tickets, so ticket / ntiles numbers the launch and ticket %
// ntiles is the tile. The epoch (never 0: the words start at zero) is the launch's
// number plus one, modulo 2^32 - 1; a word could only match a stale epoch 2^32 - 1
// launches later, and every launch rewrites all its tiles' words. So the counters
// are zeroed once, when allocated, and a tile waits for one atomic only (a separate
// read of an epoch word before it cost 2-3 % of copy on an H100's 1-D cumsum).
__device__ __forceinline__ unsigned hir_chain_epoch(unsigned* sem, unsigned long long ntiles,
                                                    unsigned long long& tile) {
  const unsigned long long ticket = atomicAdd(reinterpret_cast<unsigned long long*>(sem), 1ull);
  const unsigned long long launch = ticket / ntiles;
  tile = ticket - launch * ntiles;
  return (unsigned)(launch % 0xffffffffull) + 1u;
}

// Reduction of v over each group of T consecutive threads of the block (T a power
// of two, at most the block size; every thread of the block calls it, each group
// gets its result in every thread). smem: one slot per warp of the block.
template <int T, typename V, typename F>
__device__ __forceinline__ V hir_group_reduce(V v, F f, V* smem) {
  v = hir_warp_reduce<T>(v, f);
  if constexpr (T > 32) {
    __syncthreads();  // the slots' previous readers are done
    if ((threadIdx.x & 31) == 0) smem[threadIdx.x / 32] = v;
    __syncthreads();
    const int first = (threadIdx.x / T) * (T / 32);
    v = smem[first];
#pragma unroll
    for (int w = 1; w < T / 32; ++w) v = f(v, smem[first + w]);
  }
  return v;
}

// ---------------------------------------------------------------- random numbers
// Philox-4x32-10, the same bits as hostir/ir/philox.py: a value depends on (seed,
// offset, stream, linear element index) only.
struct hir_u4 { unsigned int x, y, z, w; };
__device__ __forceinline__ hir_u4 hir_philox(unsigned long long seed, unsigned long long offset,
                                             unsigned int stream, unsigned long long index) {
  unsigned int c0 = (unsigned int)index, c1 = (unsigned int)(index >> 32);
  unsigned int c2 = (unsigned int)offset, c3 = (unsigned int)(offset >> 32) + stream;
  unsigned int k0 = (unsigned int)seed, k1 = (unsigned int)(seed >> 32);
  #pragma unroll
  for (int r = 0; r < 10; ++r) {
    if (r) { k0 += 0x9E3779B9u; k1 += 0xBB67AE85u; }
    const unsigned int hi0 = __umulhi(0xD2511F53u, c0), lo0 = 0xD2511F53u * c0;
    const unsigned int hi1 = __umulhi(0xCD9E8D57u, c2), lo1 = 0xCD9E8D57u * c2;
    const unsigned int n0 = hi1 ^ c1 ^ k0, n2 = hi0 ^ c3 ^ k1;
    c0 = n0; c1 = lo1; c2 = n2; c3 = lo0;
  }
  return {c0, c1, c2, c3};
}
// A thread's consecutive elements share one draw (4 floats, 2 doubles or 4 float
// normals a counter): `st` keeps the last draw of a node in the thread (and, for
// float normals, the four normals made from it).
struct hir_rng_state { unsigned long long ctr; hir_u4 val; bool ok; float n[4]; };
// Counter ctr's draw into st unless st holds it already; whether it drew.
__device__ __forceinline__ bool hir_rng_draw(long long seed, long long offset, int stream,
                                             unsigned long long ctr, hir_rng_state& st) {
  if (st.ok && st.ctr == ctr) return false;
  st.val = hir_philox(seed, offset, stream, ctr);
  st.ctr = ctr;
  st.ok = true;
  return true;
}
__device__ __forceinline__ unsigned int hir_rng_word(long long seed, long long offset, int stream,
                                                     unsigned long long ctr, int k, hir_rng_state& st) {
  hir_rng_draw(seed, offset, stream, ctr, st);
  return k == 0 ? st.val.x : k == 1 ? st.val.y : k == 2 ? st.val.z : st.val.w;
}
__device__ __forceinline__ float hir_rng_uniform_f(long long seed, long long offset, int stream, long long i,
                                                   hir_rng_state& st) {
  return (float)(hir_rng_word(seed, offset, stream, i >> 2, (int)(i & 3), st) >> 8) * 5.9604644775390625e-08f;
}
__device__ __forceinline__ double hir_rng_uniform_d(long long seed, long long offset, int stream, long long i,
                                                    hir_rng_state& st) {
  const int k = (int)(i & 1) * 2;
  const unsigned int a = hir_rng_word(seed, offset, stream, i >> 1, k, st);
  const unsigned int b = hir_rng_word(seed, offset, stream, i >> 1, k + 1, st);
  return (double)((unsigned long long)(a >> 5) * 67108864ull + (b >> 6)) * 1.1102230246251565e-16;
}
// Box-Muller: two standard normals (r cos t, r sin t) from two words, u1 in (0, 1]
// and u2 in [0, 1) of 24 bits each. The sine and cosine of t in [0, 2 pi) are the
// hardware's (__sincosf: absolute error under 2^-21, as curand's Box-Muller; the
// full-range sincosf: H100 randn_like bf16 2^26 171 against 155 us); the log
// stays exact (near u1 = 1 an approximate log could turn positive).
__device__ __forceinline__ void hir_box_muller(unsigned int a, unsigned int b, float& c, float& s) {
  const float u1 = (float)((a >> 8) + 1u) * 5.9604644775390625e-08f;
  const float u2 = (float)(b >> 8) * 5.9604644775390625e-08f;
  const float r = sqrtf(-2.0f * logf(u1));
  __sincosf(6.2831853071795864769f * u2, &s, &c);
  c *= r;
  s *= r;
}
// Element i: normal i % 4 of counter i / 4's draw (words x, y: the first two,
// z, w: the last two), each log, square root and sine-cosine made once a draw.
__device__ __forceinline__ float hir_rng_normal_f(long long seed, long long offset, int stream, long long i,
                                                  hir_rng_state& st) {
  if (hir_rng_draw(seed, offset, stream, (unsigned long long)i >> 2, st)) {
    hir_box_muller(st.val.x, st.val.y, st.n[0], st.n[1]);
    hir_box_muller(st.val.z, st.val.w, st.n[2], st.n[3]);
  }
  const int k = (int)(i & 3);
  return k == 0 ? st.n[0] : k == 1 ? st.n[1] : k == 2 ? st.n[2] : st.n[3];
}
__device__ __forceinline__ double hir_rng_normal_d(long long seed, long long offset, int stream, long long i,
                                                   hir_rng_state& st) {
  const hir_u4 x = hir_philox(seed, offset, stream, i);
  const double u1 = (double)((unsigned long long)(x.x >> 5) * 67108864ull + (x.y >> 6) + 1ull) * 1.1102230246251565e-16;
  const double u2 = (double)((unsigned long long)(x.z >> 5) * 67108864ull + (x.w >> 6)) * 1.1102230246251565e-16;
  return sqrt(-2.0 * log(u1)) * cos(6.283185307179586476925 * u2);
}

// frac, silu, isneginf, isposinf (fd.ops names of nvFuser)
template <typename T> __device__ __forceinline__ T hir_frac(T x) { return x - hir_trunc(x); }
__device__ __forceinline__ float hir_silu(float x) { return x / (1.0f + hir_exp(-x)); }
__device__ __forceinline__ double hir_silu(double x) { return x / (1.0 + exp(-x)); }
template <typename T> __device__ __forceinline__ bool hir_isneginf(T x) { return hir_isinf(x) && x < T(0); }
template <typename T> __device__ __forceinline__ bool hir_isposinf(T x) { return hir_isinf(x) && x > T(0); }

// ---------------------------------------------------------------- float8
// Float8_e4m3fn and Float8_e5m2 travel as bytes and convert as torch's CPU kernels
// do, in integer code (no cuda_fp8.h: pip's NVRTC lacks it). From float: round to
// nearest even; e4m3fn has no inf and saturates to +-448 (inf too) as torch from
// 2.12 does, or, with HIR_FP8_E4M3_OVERFLOW_NAN (torch before it; the runtime
// defines it from the torch it runs with), turns |f| past 464 (what rounds past
// 448) and inf into NaN; e5m2 overflows
// to inf; a NaN becomes 0x7f with its sign. To float: exact, a NaN with torch's
// bits. Other types go through float (double rounds to float first, as in torch).
// The block between the markers also compiles as host C++: tests/test_float8.py
// checks its bits against torch's.
// HIR_FP8_BEGIN
typedef unsigned char hir_e4m3;
typedef unsigned char hir_e5m2;
#ifdef __CUDACC__
#define HIR_FP8_FN __device__ __forceinline__
HIR_FP8_FN unsigned int hir_fp8_bits(float f) { return __float_as_uint(f); }
HIR_FP8_FN float hir_fp8_float(unsigned int u) { return __uint_as_float(u); }
#else
#define HIR_FP8_FN static inline
HIR_FP8_FN unsigned int hir_fp8_bits(float f) { unsigned int u; __builtin_memcpy(&u, &f, 4); return u; }
HIR_FP8_FN float hir_fp8_float(unsigned int u) { float f; __builtin_memcpy(&f, &u, 4); return f; }
#endif
// m >> s, rounded to nearest, ties to even (0 < s < 32)
HIR_FP8_FN unsigned int hir_fp8_rne(unsigned int m, int s) {
  const unsigned int q = m >> s, rest = m & ((1u << s) - 1u), half = 1u << (s - 1);
  return q + ((rest > half || (rest == half && (q & 1u))) ? 1u : 0u);
}
HIR_FP8_FN hir_e4m3 hir_f_to_e4m3(float f) {
  const unsigned int u = hir_fp8_bits(f), a = u & 0x7fffffffu, sign = (u >> 24) & 0x80u;
  if (a > 0x7f800000u) return (hir_e4m3)(sign | 0x7fu);  // NaN
#ifdef HIR_FP8_E4M3_OVERFLOW_NAN
  if (a >= 0x43f00000u) return (hir_e4m3)(sign | 0x7fu);  // |f| >= 480, inf too: NaN (past 464 rounds to it)
#else
  if (a >= 0x43e00000u) return (hir_e4m3)(sign | 0x7eu);  // |f| >= 448, inf too: 448
#endif
  if (a >= 0x3c800000u) return (hir_e4m3)(sign | hir_fp8_rne(a - (120u << 23), 20));  // normal
  const int e = (int)(a >> 23);  // below 2^-6: a multiple of 2^-9; below 2^-10, zero
  if (e < 117) return (hir_e4m3)sign;
  return (hir_e4m3)(sign | hir_fp8_rne((a & 0x7fffffu) | 0x800000u, 141 - e));
}
HIR_FP8_FN hir_e5m2 hir_f_to_e5m2(float f) {
  const unsigned int u = hir_fp8_bits(f), a = u & 0x7fffffffu, sign = (u >> 24) & 0x80u;
  if (a > 0x7f800000u) return (hir_e5m2)(sign | 0x7fu);  // NaN
  if (a >= 0x47800000u) return (hir_e5m2)(sign | 0x7cu);  // |f| >= 65536, inf too: inf
  if (a >= 0x38800000u) return (hir_e5m2)(sign | hir_fp8_rne(a - (112u << 23), 21));  // normal
  const int e = (int)(a >> 23);  // below 2^-14: a multiple of 2^-16; below 2^-17, zero
  if (e < 110) return (hir_e5m2)sign;
  return (hir_e5m2)(sign | hir_fp8_rne((a & 0x7fffffu) | 0x800000u, 134 - e));
}
HIR_FP8_FN float hir_e4m3_to_f(hir_e4m3 b) {
  const unsigned int sign = (unsigned int)(b & 0x80u) << 24, e = (b >> 3) & 15u, m = b & 7u;
  if (e == 15u && m == 7u) return hir_fp8_float(sign | 0x7ff00000u);  // NaN
  if (e == 0u) return hir_fp8_float(sign | hir_fp8_bits((float)m * 0.001953125f));  // m * 2^-9
  return hir_fp8_float(sign | ((e + 120u) << 23) | (m << 20));
}
HIR_FP8_FN float hir_e5m2_to_f(hir_e5m2 b) {
  const unsigned int sign = (unsigned int)(b & 0x80u) << 24, e = (b >> 2) & 31u, m = b & 3u;
  if (e == 31u) return hir_fp8_float(sign | (m ? 0x7fc00000u | (m << 21) : 0x7f800000u));  // NaN, inf
  if (e == 0u) return hir_fp8_float(sign | hir_fp8_bits((float)m * 1.52587890625e-05f));  // m * 2^-16
  return hir_fp8_float(sign | ((e + 112u) << 23) | (m << 21));
}
// HIR_FP8_END
