// `naive`: the codelab's naive cell done right. Scores = Q K^T by one batched cuBLAS GEMM into a
// materialised (B, N, T, S) float32 matrix, a softmax kernel applying scale and the masks (kv_lens,
// causal) in place, then out = P V by a second batched GEMM (masked keys have weight 0; their
// scores are computed anyway, so kv_lens saves no time here). GQA/MQA by pointer: query head n
// reads K/V head n / (N / K), nothing is copied. fp32 inputs run true fp32 GEMMs (no TF32);
// bf16/fp16 inputs use the tensor cores with fp32 accumulation and P narrowed to the input dtype.
#include <cublas_v2.h>
#include <cuda_runtime.h>

#include <limits>

#include "absl/strings/str_format.h"
#include "backends.h"
#include "cuda/check.h"
#include "naive/naive_kernels.h"

namespace attn {
namespace {

constexpr int64_t kIntMax = std::numeric_limits<int>::max();
constexpr int64_t kPointerArrays = 5;  // q, k, v, scores/probabilities, out

int64_t RoundUp(int64_t x, int64_t to) { return (x + to - 1) / to * to; }

cudaDataType_t CudaType(DType dtype) {
  switch (dtype) {
    case DType::kFloat32:
      return CUDA_R_32F;
    case DType::kBFloat16:
      return CUDA_R_16BF;
    case DType::kFloat16:
      return CUDA_R_16F;
  }
  return CUDA_R_32F;
}

// cuBLAS takes dimensions, leading dimensions and batch counts as int.
absl::Status CheckFitsInt(int64_t value, const char* what) {
  ATTN_UNSUPPORTED_IF(value > kIntMax, "naive: %s = %d exceeds cuBLAS's int32 limit (%d)", what,
                      value, kIntMax);
  return absl::OkStatus();
}

class NaiveBackend final : public Backend {
 public:
  std::string name() const override { return "naive"; }
  std::string description() const override {
    return "cuBLAS GEMM + softmax kernel + GEMM, materialises the (B, N, T, S) float32 scores";
  }

  absl::Status CheckSupport(const AttentionProblem& p, const DeviceInfo& device) const override {
    ATTN_UNSUPPORTED_IF(device.kind != DeviceKind::kCuda, "naive: needs a CUDA device");
    ATTN_UNSUPPORTED_IF(p.dtype != DType::kFloat32 && device.cc_major < 8,
                        "naive: %s GEMMs need compute capability >= 8.0; device has %d.%d",
                        DTypeName(p.dtype), device.cc_major, device.cc_minor);
    const struct {
      int64_t value;
      const char* what;
    } limits[] = {
        {p.q_len, "q_len (GEMM n)"},
        {p.kv_len * (DTypeSize(p.dtype) == 4 ? 1 : 2), "kv_len leading dimension of P"},
        {p.head_dim, "head_dim (GEMM k/m)"},
        {p.num_heads * p.head_dim, "num_heads * head_dim (leading dimension of q/out)"},
        {p.num_kv_heads * p.head_dim, "num_kv_heads * head_dim (leading dimension of k/v)"},
        {p.batch * p.num_heads, "batch * num_heads (GEMM batch count)"},
    };
    for (const auto& l : limits) {
      if (auto s = CheckFitsInt(l.value, l.what); !s.ok()) return s;
    }
    return absl::OkStatus();
  }

  absl::StatusOr<int64_t> WorkspaceBytes(const AttentionProblem& p, DeviceContext&,
                                         const RunOptions& = {}) const override {
    return Bytes(p);
  }

  static absl::StatusOr<int64_t> Bytes(const AttentionProblem& p) {
    // The float32 score matrix, then one device pointer per (b, n) for each GEMM operand.
    // The float32 score matrix, then one device pointer per (b, n) for each GEMM operand.
    const int64_t scores = RoundUp(ScoreElements(p) * 4, 256);
    auto pointers = CheckedMul(p.batch * p.num_heads, kPointerArrays * 8, "naive pointer arrays");
    if (!pointers.ok()) return pointers.status();
    if (scores > std::numeric_limits<int64_t>::max() - *pointers) {
      return absl::InvalidArgumentError("naive: workspace bytes overflow int64");
    }
    return scores + *pointers;
  }

  absl::Status Run(const RunArgs& args) const override {
    const AttentionProblem& p = args.problem;
    const AttentionTensors& t = args.tensors;
    if (t.out.memory != MemoryKind::kDevice) {
      return absl::InvalidArgumentError("naive: tensors must be in device memory");
    }
    auto need = Bytes(p);
    if (!need.ok()) return need.status();
    if (args.workspace_bytes < *need) {
      return absl::InvalidArgumentError(
          absl::StrFormat("naive: workspace of %d bytes is smaller than the %d needed",
                          args.workspace_bytes, *need));
    }
    // Row strides of the views become cuBLAS leading dimensions.
    if (auto s = CheckFitsInt(t.q.strides[1], "q row stride"); !s.ok()) return s;
    if (auto s = CheckFitsInt(t.k.strides[1], "k row stride"); !s.ok()) return s;
    if (auto s = CheckFitsInt(t.v.strides[1], "v row stride"); !s.ok()) return s;
    if (auto s = CheckFitsInt(t.out.strides[1], "out row stride"); !s.ok()) return s;

    const int64_t count = p.batch * p.num_heads;
    float* scores = static_cast<float*>(args.workspace);
    auto** pointers = reinterpret_cast<void**>(static_cast<char*>(args.workspace) +
                                               RoundUp(ScoreElements(p) * 4, 256));
    NaivePointerParams pp{};
    pp.q = static_cast<const char*>(t.q.data);
    pp.k = static_cast<const char*>(t.k.data);
    pp.v = static_cast<const char*>(t.v.data);
    pp.out = static_cast<char*>(t.out.data);
    pp.scores = scores;
    pp.q_batch_stride = t.q.strides[0];
    pp.q_head_stride = t.q.strides[2];
    pp.k_batch_stride = t.k.strides[0];
    pp.k_head_stride = t.k.strides[2];
    pp.v_batch_stride = t.v.strides[0];
    pp.v_head_stride = t.v.strides[2];
    pp.out_batch_stride = t.out.strides[0];
    pp.out_head_stride = t.out.strides[2];
    pp.element_bytes = DTypeSize(p.dtype);
    pp.batch = p.batch;
    pp.heads = p.num_heads;
    pp.group = p.GroupSize();
    pp.q_len = p.q_len;
    pp.kv_len = p.kv_len;
    pp.q_ptrs = const_cast<const void**>(pointers);
    pp.k_ptrs = const_cast<const void**>(pointers + count);
    pp.v_ptrs = const_cast<const void**>(pointers + 2 * count);
    pp.score_ptrs = pointers + 3 * count;
    pp.out_ptrs = pointers + 4 * count;

    cudaStream_t stream = args.context.stream();
    cublasHandle_t handle = args.context.cublas();
    ATTN_CUDA_RETURN_IF_ERROR(LaunchNaivePointers(pp, stream));

    // Row-major X (r x c, row stride ld) is column-major X^T with the same ld, so
    //   scores^T (S x T) = K_bn (S x H) * Q_bn^T (H x T):  gemm(T, N, m=S, n=T, k=H)
    //   out^T    (H x T) = V_bn^T (H x S) * P^T (S x T):    gemm(N, N, m=H, n=T, k=S)
    const cudaDataType_t io = CudaType(p.dtype);
    const int S = static_cast<int>(p.kv_len), T = static_cast<int>(p.q_len),
              H = static_cast<int>(p.head_dim), batch = static_cast<int>(count);
    const float one = 1.f, zero = 0.f;
    ATTN_CUBLAS_RETURN_IF_ERROR(cublasGemmBatchedEx(
        handle, CUBLAS_OP_T, CUBLAS_OP_N, S, T, H, &one, pp.k_ptrs, io,
        static_cast<int>(t.k.strides[1]), pp.q_ptrs, io, static_cast<int>(t.q.strides[1]), &zero,
        pp.score_ptrs, CUDA_R_32F, S, batch, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));

    const SoftmaxOut softmax_out = p.dtype == DType::kFloat32    ? SoftmaxOut::kFloat32
                                   : p.dtype == DType::kBFloat16 ? SoftmaxOut::kBFloat16
                                                                 : SoftmaxOut::kFloat16;
    SoftmaxParams sp{};
    sp.scores = scores;
    sp.rows = count * p.q_len;
    sp.q_len = p.q_len;
    sp.kv_len = p.kv_len;
    sp.rows_per_batch = p.num_heads * p.q_len;
    sp.kv_lens = p.kv_lens.empty() ? nullptr : t.kv_lens;
    sp.scale = static_cast<float>(p.EffectiveScale());
    sp.causal = p.causal;
    ATTN_CUDA_RETURN_IF_ERROR(LaunchMaskedSoftmax(sp, softmax_out, stream));

    // Half-precision P sits in the first half of each float row: its row stride is 2 * S.
    const int ldp = p.dtype == DType::kFloat32 ? S : 2 * S;
    ATTN_CUBLAS_RETURN_IF_ERROR(cublasGemmBatchedEx(
        handle, CUBLAS_OP_N, CUBLAS_OP_N, H, T, S, &one, pp.v_ptrs, io,
        static_cast<int>(t.v.strides[1]), const_cast<const void**>(pp.score_ptrs), io, ldp, &zero,
        pp.out_ptrs, io, static_cast<int>(t.out.strides[1]), batch, CUBLAS_COMPUTE_32F,
        CUBLAS_GEMM_DEFAULT));
    return absl::OkStatus();
  }
};

}  // namespace

std::unique_ptr<Backend> MakeNaiveBackend() { return std::make_unique<NaiveBackend>(); }

}  // namespace attn
