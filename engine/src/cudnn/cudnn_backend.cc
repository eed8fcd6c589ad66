// `cudnn`: cuDNN's fused flash attention (forward SDPA, inference) through the cudnn-frontend
// graph API, the C++ counterpart of jax.nn.dot_product_attention(implementation="cudnn").
//
// Tensors are described to cuDNN by their BTNH strides as (B, heads, L, H) views: no transposes.
// Graphs are built once per full key (problem, strides, autotune) and kept in the per-device
// plan cache of the cuDNN graph layer (cudnn/graph.h), next to a handle bound to the context's
// stream. kv_lens become cuDNN's padding mask: seq_len_q (T for every batch element) and
// seq_len_kv, (B, 1, 1, 1) int32 tensors written into the workspace by a small kernel (which
// clamps the lengths to S) before each call; the graph depends on having lengths, not on them.
#include <array>
#include <limits>
#include <mutex>
#include <unordered_map>

#include "absl/strings/str_format.h"
#include "backends.h"
#include "cuda/check.h"
#include "cudnn/graph.h"
#include "cudnn/seq_lens.h"

namespace attn {
namespace {

using cudnn::Plan;
using cudnn::PlanKey;
namespace fe = cudnn::fe;

constexpr int64_t kQ = 1, kK = 2, kV = 3, kO = 4;  // tensor UIDs in the graph
constexpr int64_t kSeqLenQ = 5, kSeqLenKv = 6;     // with kv_lens: the padding mask's lengths

std::array<int64_t, 4> PackedStrides(int64_t l, int64_t heads, int64_t h) {
  return {l * heads * h, heads * h, h, 1};
}

// With kv_lens, the workspace starts with seq_len_q and seq_len_kv (B int32 each); cuDNN's own
// workspace follows, 256-byte aligned.
int64_t SeqLenBytes(const AttentionProblem& p) {
  return p.kv_lens.empty() ? 0 : (2 * p.batch * 4 + 255) / 256 * 256;
}

// Everything a graph depends on: the problem, the four tensors' strides and autotune.
PlanKey KeyOf(const AttentionProblem& p, const std::array<int64_t, 4>& q,
              const std::array<int64_t, 4>& k, const std::array<int64_t, 4>& v,
              const std::array<int64_t, 4>& o, bool autotune) {
  PlanKey key = cudnn::KeyFields(p);
  for (const auto* strides : {&q, &k, &v, &o})
    key.insert(key.end(), strides->begin(), strides->end());
  key.push_back(autotune);
  return key;
}

// The SDPA graph of `p` with BTNH strides described to cuDNN as (B, heads, L, H) dims: no
// transposes.
absl::StatusOr<Plan> Build(const AttentionProblem& p, const std::array<int64_t, 4>& q_strides,
                           const std::array<int64_t, 4>& k_strides,
                           const std::array<int64_t, 4>& v_strides,
                           const std::array<int64_t, 4>& o_strides, bool autotune,
                           cudnnHandle_t handle) {
  auto graph = std::make_shared<fe::graph::Graph>();
  const fe::DataType_t io =
      p.dtype == DType::kBFloat16 ? fe::DataType_t::BFLOAT16 : fe::DataType_t::HALF;
  graph->set_io_data_type(io)
      .set_intermediate_data_type(fe::DataType_t::FLOAT)
      .set_compute_data_type(fe::DataType_t::FLOAT);
  // BTNH strides as cuDNN's (B, heads, L, H) dims: swap the L and heads strides.
  auto view = [&](const char* name, int64_t uid, int64_t l, int64_t heads,
                  const std::array<int64_t, 4>& s) {
    return graph->tensor(fe::graph::Tensor_attributes()
                             .set_name(name)
                             .set_uid(uid)
                             .set_dim({p.batch, heads, l, p.head_dim})
                             .set_stride({s[0], s[2], s[1], s[3]}));
  };
  auto q = view("Q", kQ, p.q_len, p.num_heads, q_strides);
  auto k = view("K", kK, p.kv_len, p.num_kv_heads, k_strides);
  auto v = view("V", kV, p.kv_len, p.num_kv_heads, v_strides);
  auto options =
      fe::graph::SDPA_attributes().set_name("sdpa").set_generate_stats(false).set_attn_scale(
          static_cast<float>(p.EffectiveScale()));
  if (p.causal)
    options.set_diagonal_alignment(fe::DiagonalAlignment_t::TOP_LEFT)
        .set_diagonal_band_right_bound(0);
  if (!p.kv_lens.empty()) {
    auto seq_len = [&](const char* name, int64_t uid) {
      return graph->tensor(fe::graph::Tensor_attributes()
                               .set_name(name)
                               .set_uid(uid)
                               .set_dim({p.batch, 1, 1, 1})
                               .set_stride({1, 1, 1, 1})
                               .set_data_type(fe::DataType_t::INT32));
    };
    options.set_padding_mask(true)
        .set_seq_len_q(seq_len("seq_len_q", kSeqLenQ))
        .set_seq_len_kv(seq_len("seq_len_kv", kSeqLenKv));
  }
  auto [o, stats] = graph->sdpa(q, k, v, options);
  (void)stats;
  const auto& os = o_strides;
  o->set_output(true)
      .set_uid(kO)
      .set_dim({p.batch, p.num_heads, p.q_len, p.head_dim})
      .set_stride({os[0], os[2], os[1], os[3]});
  return cudnn::BuildPlan(std::move(graph), handle, autotune, "cudnn", p);
}

class CudnnBackend final : public Backend {
 public:
  std::string name() const override { return "cudnn"; }
  std::string description() const override {
    return absl::StrFormat("cuDNN %d fused flash attention (SDPA forward) via cudnn-frontend %d.%d",
                           static_cast<int>(cudnnGetVersion()), CUDNN_FRONTEND_MAJOR_VERSION,
                           CUDNN_FRONTEND_MINOR_VERSION);
  }

  // cuDNN's documented rules for fused flash attention (forward), as reasons.
  absl::Status CheckSupport(const AttentionProblem& p, const DeviceInfo& device) const override {
    const int version = static_cast<int>(cudnnGetVersion());
    const int64_t max_head_dim = device.cc_major == 9 ? 256 : 128;
    ATTN_UNSUPPORTED_IF(device.kind != DeviceKind::kCuda, "cudnn: needs a CUDA device");
    ATTN_UNSUPPORTED_IF(p.dtype != DType::kBFloat16 && p.dtype != DType::kFloat16,
                        "cudnn: cuDNN SDPA requires bfloat16 or float16 input; got %s",
                        DTypeName(p.dtype));
    ATTN_UNSUPPORTED_IF(device.cc_major < 8,
                        "cudnn: cuDNN flash attention needs compute capability >= 8.0; device "
                        "has %d.%d",
                        device.cc_major, device.cc_minor);
    ATTN_UNSUPPORTED_IF(version < 90000, "cudnn: needs cuDNN >= 9.0; the loaded library is %d",
                        version);
    ATTN_UNSUPPORTED_IF(p.head_dim % 8 != 0, "cudnn: head_dim must be a multiple of 8; got %d",
                        p.head_dim);
    ATTN_UNSUPPORTED_IF(p.head_dim > max_head_dim,
                        "cudnn: head_dim must be <= %d on compute capability %d.%d; got %d",
                        max_head_dim, device.cc_major, device.cc_minor, p.head_dim);
    ATTN_UNSUPPORTED_IF(
        !p.kv_lens.empty() && p.q_len > std::numeric_limits<int32_t>::max(),
        "cudnn: with kv_lens, q_len must fit cuDNN's int32 sequence lengths; got %d", p.q_len);
    return absl::OkStatus();
  }

  absl::StatusOr<int64_t> WorkspaceBytes(const AttentionProblem& p, DeviceContext& context,
                                         const RunOptions& options) const override {
    const auto qo = PackedStrides(p.q_len, p.num_heads, p.head_dim);
    const auto kv = PackedStrides(p.kv_len, p.num_kv_heads, p.head_dim);
    auto plan = GetPlan(p, qo, kv, kv, qo, options.autotune, context);
    if (!plan.ok()) return plan.status();
    return SeqLenBytes(p) + (*plan)->workspace_bytes;
  }

  absl::Status Run(const RunArgs& args) const override {
    const AttentionTensors& t = args.tensors;
    if (t.out.memory != MemoryKind::kDevice) {
      return absl::InvalidArgumentError("cudnn: tensors must be in device memory");
    }
    auto state = cudnn::StateOf<cudnn::CudnnState>(this, args.context);
    if (!state.ok()) return state.status();
    cudnn::CudnnState& s = **state;
    std::lock_guard<std::mutex> lock(s.mu);
    auto plan = PlanLocked(s, args.problem, t.q.strides, t.k.strides, t.v.strides, t.out.strides,
                           args.options.autotune);
    if (!plan.ok()) return plan.status();
    const AttentionProblem& p = args.problem;
    const int64_t seq_len_bytes = SeqLenBytes(p);
    if (seq_len_bytes + (*plan)->workspace_bytes > args.workspace_bytes) {
      return absl::InvalidArgumentError(absl::StrFormat(
          "cudnn: the plan for these strides needs %d workspace bytes, %d were given",
          seq_len_bytes + (*plan)->workspace_bytes, args.workspace_bytes));
    }
    std::unordered_map<int64_t, void*> pack{
        {kQ, t.q.data}, {kK, t.k.data}, {kV, t.v.data}, {kO, t.out.data}};
    if (!p.kv_lens.empty()) {
      auto* seq_len_q = static_cast<int32_t*>(args.workspace);
      int32_t* seq_len_kv = seq_len_q + p.batch;
      ATTN_CUDA_RETURN_IF_ERROR(LaunchSeqLens(t.kv_lens, p.batch, p.q_len, p.kv_len, seq_len_q,
                                              seq_len_kv, args.context.stream()));
      pack.emplace(kSeqLenQ, seq_len_q);
      pack.emplace(kSeqLenKv, seq_len_kv);
    }
    void* workspace = static_cast<char*>(args.workspace) + seq_len_bytes;
    if (args.options.autotune) {
      // Times every built plan on these buffers (overwriting out, which the run below rewrites)
      // and makes the fastest the graph's choice for every later call with this key.
      if (auto a = s.AutotuneLocked(**plan, pack, workspace); !a.ok()) return a;
    }
    ATTN_CUDNN_RETURN_IF_ERROR((*plan)->graph->execute(s.handle(), pack, workspace));
    return absl::OkStatus();
  }

  std::optional<PlanCacheStats> plan_cache_stats(DeviceContext& context) const override {
    auto state = cudnn::StateOf<cudnn::CudnnState>(this, context);
    if (!state.ok()) return std::nullopt;
    return (*state)->Stats();
  }

 private:
  // The cached plan for these strides, built on a miss. Requires s.mu held.
  static absl::StatusOr<Plan*> PlanLocked(cudnn::CudnnState& s, const AttentionProblem& p,
                                          const std::array<int64_t, 4>& q,
                                          const std::array<int64_t, 4>& k,
                                          const std::array<int64_t, 4>& v,
                                          const std::array<int64_t, 4>& o, bool autotune) {
    return s.GetLocked(KeyOf(p, q, k, v, o, autotune),
                       [&] { return Build(p, q, k, v, o, autotune, s.handle()); });
  }

  absl::StatusOr<Plan*> GetPlan(const AttentionProblem& p, const std::array<int64_t, 4>& q,
                                const std::array<int64_t, 4>& k, const std::array<int64_t, 4>& v,
                                const std::array<int64_t, 4>& o, bool autotune,
                                DeviceContext& context) const {
    auto state = cudnn::StateOf<cudnn::CudnnState>(this, context);
    if (!state.ok()) return state.status();
    std::lock_guard<std::mutex> lock((*state)->mu);
    return PlanLocked(**state, p, q, k, v, o, autotune);
  }
};

}  // namespace

std::unique_ptr<Backend> MakeCudnnBackend() { return std::make_unique<CudnnBackend>(); }

std::string CudnnLibraryVersion() { return cudnn::LibraryVersion(); }

}  // namespace attn
