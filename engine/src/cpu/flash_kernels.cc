// The cpu backend's kernel (cpu/flash.h), once per SIMD target through Highway's foreach_target:
// this file is compiled again for each target (AVX-512, AVX2, SSE4, ...) and FlashTask calls the
// best one the CPU has, so one x86-64 binary uses AVX-512 where it exists and still runs on any.
//
// One task, for its block of query rows (Q^T packed once, scaled, float32), over the keys in
// blocks of keys_per_block:
//   S^T = K_blk Q^T          (keys x rows: each query row is a run of SIMD lanes)
//   mask                     (causal / kv_lens, only in blocks a row's last visible key cuts)
//   online softmax           (per lane: running max m and sum l, P^T = exp(S^T - m) in place,
//                             O^T scaled by exp(m_old - m) when the max moved)
//   O^T += V_blk^T P^T       (head_dim x rows)
// and out = O^T / l, rounded once to the output's dtype. Both products are one GEMM shape,
// C (+)= A B with A's elements broadcast (read from K or V rows as they lie in memory) and B, C
// rows of SIMD vectors across the query rows, so no head dim needs padding and float32 K/V are
// never copied. Each row's arithmetic is the same whichever block or tile it falls in, so pieces
// of a call give the whole call's bits.
#include <algorithm>
#include <cstring>
#include <limits>

#include "attn/dtype.h"
#include "cpu/flash.h"
#include "visible_keys.h"

#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "cpu/flash_kernels.cc"
#include "hwy/foreach_target.h"  // IWYU pragma: keep
#include "hwy/highway.h"
// After highway.h: per-target code.
#include "hwy/contrib/math/math-inl.h"

HWY_BEFORE_NAMESPACE();
namespace attn {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

// The register tile of both GEMMs: kTileM rows of A broadcast against kTileVecs vectors of B,
// kTileM x kTileVecs accumulators plus kTileVecs B vectors and a broadcast in registers (AVX-512
// has 32 vector registers, the other x86 targets 16).
#if HWY_ARCH_X86 && HWY_TARGET <= HWY_AVX3
constexpr int kTileM = 6, kTileVecs = 4;
#else
constexpr int kTileM = 6, kTileVecs = 2;
#endif

// C[m] (kM rows of kVecs vectors) = (accumulate ? C[m] : 0) + sum over k < depth of
// A(m, k) B[k], where A(m, k) = a[m * a_m + k * a_k] and B's and C's rows lie ldb and ldc floats
// apart.
template <int kM, int kVecs, class D>
HWY_INLINE void Tile(D d, const float* HWY_RESTRICT a, int64_t a_m, int64_t a_k, int64_t depth,
                     const float* HWY_RESTRICT b, int64_t ldb, float* HWY_RESTRICT c, int64_t ldc,
                     bool accumulate) {
  using V = hn::Vec<D>;
  const int64_t lanes = static_cast<int64_t>(hn::Lanes(d));
  V acc[kM][kVecs];
  HWY_UNROLL(8)
  for (int m = 0; m < kM; ++m) {
    HWY_UNROLL(8)
    for (int v = 0; v < kVecs; ++v) {
      acc[m][v] = accumulate ? hn::LoadU(d, c + m * ldc + v * lanes) : hn::Zero(d);
    }
  }
  for (int64_t k = 0; k < depth; ++k) {
    V bk[kVecs];
    HWY_UNROLL(8)
    for (int v = 0; v < kVecs; ++v) bk[v] = hn::LoadU(d, b + k * ldb + v * lanes);
    const float* ak = a + k * a_k;
    HWY_UNROLL(8)
    for (int m = 0; m < kM; ++m) {
      const V am = hn::Set(d, ak[m * a_m]);
      HWY_UNROLL(8)
      for (int v = 0; v < kVecs; ++v) acc[m][v] = hn::MulAdd(am, bk[v], acc[m][v]);
    }
  }
  HWY_UNROLL(8)
  for (int m = 0; m < kM; ++m) {
    HWY_UNROLL(8)
    for (int v = 0; v < kVecs; ++v) hn::StoreU(acc[m][v], d, c + m * ldc + v * lanes);
  }
}

// Tile<kM, vecs> for a run-time vecs in 1..kTileVecs.
template <int kM, int kVecs = kTileVecs, class D>
HWY_INLINE void TileOfVecs(int64_t vecs, D d, const float* a, int64_t a_m, int64_t a_k,
                           int64_t depth, const float* b, int64_t ldb, float* c, int64_t ldc,
                           bool accumulate) {
  if constexpr (kVecs > 1) {
    if (vecs < kVecs) {
      TileOfVecs<kM, kVecs - 1>(vecs, d, a, a_m, a_k, depth, b, ldb, c, ldc, accumulate);
      return;
    }
  }
  Tile<kM, kVecs>(d, a, a_m, a_k, depth, b, ldb, c, ldc, accumulate);
}

// TileOfVecs<rows> for a run-time rows in 1..kTileM.
template <int kM = kTileM, class D>
HWY_INLINE void TileOfRows(int64_t rows, int64_t vecs, D d, const float* a, int64_t a_m,
                           int64_t a_k, int64_t depth, const float* b, int64_t ldb, float* c,
                           int64_t ldc, bool accumulate) {
  if constexpr (kM > 1) {
    if (rows < kM) {
      TileOfRows<kM - 1>(rows, vecs, d, a, a_m, a_k, depth, b, ldb, c, ldc, accumulate);
      return;
    }
  }
  TileOfVecs<kM>(vecs, d, a, a_m, a_k, depth, b, ldb, c, ldc, accumulate);
}

// C (M rows of `vecs` vectors, ldc floats apart) (+)= A (M x depth, elements as in Tile) B
// (depth rows of `vecs` vectors, ldb floats apart).
template <class D>
void Gemm(D d, int64_t M, int64_t vecs, int64_t depth, const float* a, int64_t a_m, int64_t a_k,
          const float* b, int64_t ldb, float* c, int64_t ldc, bool accumulate) {
  const int64_t lanes = static_cast<int64_t>(hn::Lanes(d));
  for (int64_t v0 = 0; v0 < vecs; v0 += kTileVecs) {
    const int64_t nv = std::min<int64_t>(kTileVecs, vecs - v0);
    for (int64_t m0 = 0; m0 < M; m0 += kTileM) {
      TileOfRows(M - m0, nv, d, a + m0 * a_m, a_m, a_k, depth, b + v0 * lanes, ldb,
                 c + m0 * ldc + v0 * lanes, ldc, accumulate);
    }
  }
}

// dst[0, n) = the n 16-bit floats (hwy::bfloat16_t or hwy::float16_t) at `src`, widened exactly:
// whole vectors through PromoteTo, the tail through `widen` (the dtype's scalar conversion).
template <typename T16, class D>
void PromoteRow(D d, const void* src, float* HWY_RESTRICT dst, int64_t n,
                float (*widen)(uint16_t)) {
  const hn::Rebind<T16, D> d16;
  const auto* in = static_cast<const T16*>(src);
  const int64_t lanes = static_cast<int64_t>(hn::Lanes(d));
  int64_t i = 0;
  for (; i + lanes <= n; i += lanes)
    hn::StoreU(hn::PromoteTo(d, hn::LoadU(d16, in + i)), d, dst + i);
  for (; i < n; ++i) dst[i] = widen(static_cast<const uint16_t*>(src)[i]);
}

// dst[0, n) = the n elements of `dtype` at `src`, widened to float32 (exactly).
template <class D>
void WidenRow(D d, DType dtype, const void* src, float* HWY_RESTRICT dst, int64_t n) {
  switch (dtype) {
    case DType::kFloat32:
      std::memcpy(dst, src, static_cast<size_t>(n) * sizeof(float));
      return;
    case DType::kBFloat16:
      return PromoteRow<hwy::bfloat16_t>(d, src, dst, n, BFloat16BitsToFloat);
    case DType::kFloat16:
      return PromoteRow<hwy::float16_t>(d, src, dst, n, Float16BitsToFloat);
  }
}

// Rows [0, rows) of a (keys, kv head) block as float32: a pointer to element [0, 0] and the
// floats between rows. float32 tensors are read where they lie; others are widened into `buffer`.
const float* KeyValueRows(const TensorView& view, int64_t b, int64_t s0, int64_t kh, int64_t rows,
                          int64_t head_dim, float* buffer, int64_t* row_stride) {
  if (view.dtype == DType::kFloat32) {
    *row_stride = view.strides[1];
    return static_cast<const float*>(view.data) + view.Offset(b, s0, kh);
  }
  const hn::ScalableTag<float> d;
  const int64_t size = DTypeSize(view.dtype);
  for (int64_t s = 0; s < rows; ++s) {
    const auto* row = static_cast<const char*>(view.data) + view.Offset(b, s0 + s, kh) * size;
    WidenRow(d, view.dtype, row, buffer + s * head_dim, head_dim);
  }
  *row_stride = head_dim;
  return buffer;
}

void FlashTaskImpl(FlashCall& call, int64_t task, float* HWY_RESTRICT scratch) {
  const hn::ScalableTag<float> d;
  using V = hn::Vec<decltype(d)>;
  const int64_t lanes = static_cast<int64_t>(hn::Lanes(d));
  const AttentionTensors& t = call.tensors;
  const int64_t H = call.head_dim, G = call.group, rows_per_block = call.rows_per_block;
  const int64_t keys_per_block = call.keys_per_block, vecs = rows_per_block / lanes;
  // Tasks go longest first: the last row blocks of every (b, kv head), then the ones before.
  const int64_t heads = call.batch * call.num_kv_heads;
  const int64_t block = call.blocks - 1 - task / heads;
  const int64_t b = (task % heads) / call.num_kv_heads, kh = (task % heads) % call.num_kv_heads;
  const int64_t r0 = block * rows_per_block;
  const int64_t count = std::min(rows_per_block, call.rows - r0);  // real rows; the rest pad

  // Scratch: Q^T and O^T (H x rows), S^T / P^T (keys x rows), K and V blocks widened (keys x H).
  float* qt = scratch;
  float* ot = qt + H * kFlashMaxRows;
  float* st = ot + H * kFlashMaxRows;
  float* kbuf = st + keys_per_block * kFlashMaxRows;
  float* vbuf = kbuf + keys_per_block * H;

  // Keys each row sees; padding rows copy the last real row, so they never widen the walk.
  const int64_t len = ClampedKvLen(t.kv_lens, b, call.kv_len);
  int64_t visible[kFlashMaxRows] = {};
  for (int64_t i = 0; i < rows_per_block; ++i) {
    const int64_t row = r0 + std::min(i, count - 1);
    visible[i] = VisibleKeys(len, row / G, call.causal);
  }
  const int64_t min_visible = visible[0], max_visible = visible[count - 1];  // t-major rows

  // Q^T, scaled.
  const int64_t q_size = DTypeSize(t.q.dtype);
  for (int64_t i = 0; i < rows_per_block; ++i) {
    if (i >= count) {
      for (int64_t h = 0; h < H; ++h) qt[h * rows_per_block + i] = 0.f;
      continue;
    }
    const int64_t row = r0 + i, tq = row / G, n = kh * G + row % G;
    WidenRow(d, t.q.dtype, static_cast<const char*>(t.q.data) + t.q.Offset(b, tq, n) * q_size, kbuf,
             H);
    for (int64_t h = 0; h < H; ++h) qt[h * rows_per_block + i] = kbuf[h] * call.scale;
  }
  std::fill(ot, ot + H * rows_per_block, 0.f);
  alignas(64) float max_score[kFlashMaxRows], sum[kFlashMaxRows], limit[kFlashMaxRows];
  std::fill(max_score, max_score + rows_per_block, -std::numeric_limits<float>::infinity());
  std::fill(sum, sum + rows_per_block, 0.f);

  const V neg_inf = hn::Set(d, -std::numeric_limits<float>::infinity());
  for (int64_t s0 = 0; s0 < max_visible; s0 += keys_per_block) {
    if (call.ShouldStop()) return;
    const int64_t keys = std::min(keys_per_block, max_visible - s0);
    int64_t ldk = 0, ldv = 0;
    const float* k = KeyValueRows(t.k, b, s0, kh, keys, H, kbuf, &ldk);
    const float* v = KeyValueRows(t.v, b, s0, kh, keys, H, vbuf, &ldv);

    // S^T = K Q^T: A(j, h) = k[j * ldk + h].
    Gemm(d, keys, vecs, H, k, ldk, 1, qt, rows_per_block, st, rows_per_block, false);

    // Rows whose last visible key falls in this block: scores past it become -inf.
    const bool masked = s0 + keys > min_visible;
    if (masked) {
      for (int64_t i = 0; i < rows_per_block; ++i) {
        limit[i] = static_cast<float>(std::clamp<int64_t>(visible[i] - s0, 0, keys));
      }
    }
    for (int64_t c = 0; c < rows_per_block; c += lanes) {
      if (masked) {
        const V lim = hn::LoadU(d, limit + c);
        for (int64_t j = 0; j < keys; ++j) {
          float* s = st + j * rows_per_block + c;
          const auto keep = hn::Lt(hn::Set(d, static_cast<float>(j)), lim);
          hn::StoreU(hn::IfThenElse(keep, hn::LoadU(d, s), neg_inf), d, s);
        }
      }
      // Online softmax, lane by lane (one query row per lane).
      V block_max = neg_inf;
      for (int64_t j = 0; j < keys; ++j) {
        block_max = hn::Max(block_max, hn::LoadU(d, st + j * rows_per_block + c));
      }
      const V old_max = hn::LoadU(d, max_score + c);
      const V new_max = hn::Max(old_max, block_max);
      // A row with no visible key yet keeps max -inf; subtracting 0 then gives exp(-inf) = 0.
      const V shift = hn::IfThenZeroElse(hn::Eq(new_max, neg_inf), new_max);
      const V rescale = hn::Exp(d, hn::Sub(old_max, shift));
      V block_sum = hn::Zero(d);
      for (int64_t j = 0; j < keys; ++j) {
        float* s = st + j * rows_per_block + c;
        const V p = hn::Exp(d, hn::Sub(hn::LoadU(d, s), shift));
        hn::StoreU(p, d, s);
        block_sum = hn::Add(block_sum, p);
      }
      hn::StoreU(new_max, d, max_score + c);
      hn::StoreU(hn::MulAdd(hn::LoadU(d, sum + c), rescale, block_sum), d, sum + c);
      for (int64_t h = 0; h < H; ++h) {
        float* o = ot + h * rows_per_block + c;
        hn::StoreU(hn::Mul(hn::LoadU(d, o), rescale), d, o);
      }
    }

    // O^T += V^T P^T: A(h, j) = v[j * ldv + h].
    Gemm(d, H, vecs, keys, v, 1, ldv, st, rows_per_block, ot, rows_per_block, true);
  }

  // out = O / l, rounded once; a row with no visible key (a length of 0) is zeros.
  for (int64_t i = 0; i < count; ++i) {
    const int64_t row = r0 + i, out0 = t.out.Offset(b, row / G, kh * G + row % G);
    for (int64_t h = 0; h < H; ++h) {
      const float o = sum[i] > 0.f ? ot[h * rows_per_block + i] / sum[i] : 0.f;
      StoreFromDouble(t.out.data, t.out.dtype, out0 + h, o);  // exact for a float
    }
  }
}

const char* FlashTargetImpl() { return hwy::TargetName(HWY_TARGET); }

}  // namespace HWY_NAMESPACE
}  // namespace attn
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace attn {

HWY_EXPORT(FlashTaskImpl);
HWY_EXPORT(FlashTargetImpl);

int64_t FlashKeysPerBlock(int64_t head_dim) { return 64; }

int64_t FlashScratchFloats(int64_t head_dim) {
  return 2 * head_dim * kFlashMaxRows + FlashKeysPerBlock(head_dim) * kFlashMaxRows +
         2 * FlashKeysPerBlock(head_dim) * head_dim;
}

FlashCall::FlashCall(const AttentionProblem& p, const AttentionTensors& t,
                     const StopToken* stop_token)
    : tensors(t),
      dtype(p.dtype),
      batch(p.batch),
      q_len(p.q_len),
      kv_len(p.kv_len),
      num_heads(p.num_heads),
      num_kv_heads(p.num_kv_heads),
      head_dim(p.head_dim),
      causal(p.causal),
      scale(static_cast<float>(p.EffectiveScale())),
      group(p.GroupSize()),
      rows(p.q_len * p.GroupSize()),
      rows_per_block(
          std::min(kFlashMaxRows, (rows + kFlashRowAlign - 1) / kFlashRowAlign * kFlashRowAlign)),
      blocks((rows + rows_per_block - 1) / rows_per_block),
      keys_per_block(FlashKeysPerBlock(p.head_dim)),
      tasks(p.batch * p.num_kv_heads * blocks),
      stop(stop_token) {}

bool FlashCall::ShouldStop() {
  if (stop == nullptr) return false;
  if (stopped.load(std::memory_order_relaxed)) return true;
  if (stop->Check().ok()) return false;
  stopped.store(true, std::memory_order_relaxed);
  return true;
}

void FlashTask(FlashCall& call, int64_t task, float* scratch) {
  HWY_DYNAMIC_DISPATCH(FlashTaskImpl)(call, task, scratch);
}

const char* FlashTarget() { return HWY_DYNAMIC_DISPATCH(FlashTargetImpl)(); }

}  // namespace attn
#endif  // HWY_ONCE
