// `cudnn`: cuDNN's fused flash attention (forward SDPA, inference) through the cudnn-frontend
// graph API, the C++ counterpart of jax.nn.dot_product_attention(implementation="cudnn").
// This is the only translation unit that includes cudnn_frontend.h (it takes ~90 s to compile).
//
// Tensors are described to cuDNN by their BTNH strides as (B, heads, L, H) views: no transposes.
// Graphs are built once per full key (problem, strides, autotune) and kept in a bounded LRU
// cache on each DeviceContext, next to a cuDNN handle bound to the context's stream.
#include <cudnn.h>
#include <cudnn_frontend.h>

#include <chrono>
#include <list>
#include <mutex>
#include <unordered_map>

#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "backends.h"

namespace attn {
namespace {

namespace fe = cudnn_frontend;

constexpr int64_t kPlanCacheCapacity = 256;  // the codelab suite builds ~25 graphs
constexpr int64_t kQ = 1, kK = 2, kV = 3, kO = 4;  // tensor UIDs in the graph

// Everything a graph depends on.
struct PlanKey {
  AttentionProblem problem;
  std::array<int64_t, 4> q_strides, k_strides, v_strides, o_strides;
  bool autotune;

  bool operator==(const PlanKey& o) const {
    const AttentionProblem &a = problem, &b = o.problem;
    return a.batch == b.batch && a.q_len == b.q_len && a.kv_len == b.kv_len &&
           a.num_heads == b.num_heads && a.num_kv_heads == b.num_kv_heads &&
           a.head_dim == b.head_dim && a.dtype == b.dtype && a.causal == b.causal &&
           a.EffectiveScale() == b.EffectiveScale() && q_strides == o.q_strides &&
           k_strides == o.k_strides && v_strides == o.v_strides && o_strides == o.o_strides &&
           autotune == o.autotune;
  }
};

struct PlanKeyHash {
  size_t operator()(const PlanKey& k) const {
    const AttentionProblem& p = k.problem;
    size_t h = 0;
    auto mix = [&h](int64_t v) { h ^= std::hash<int64_t>()(v) + 0x9e3779b97f4a7c15ull + (h << 6) + (h >> 2); };
    for (int64_t v : {p.batch, p.q_len, p.kv_len, p.num_heads, p.num_kv_heads, p.head_dim,
                      static_cast<int64_t>(p.dtype), static_cast<int64_t>(p.causal),
                      static_cast<int64_t>(k.autotune)})
      mix(v);
    for (const auto* s : {&k.q_strides, &k.k_strides, &k.v_strides, &k.o_strides})
      for (int64_t v : *s) mix(v);
    return h;
  }
};

struct Plan {
  std::shared_ptr<fe::graph::Graph> graph;
  int64_t workspace_bytes = 0;
  bool tuned = false;  // autotune plans: the fastest has been chosen on real buffers
};

std::array<int64_t, 4> PackedStrides(int64_t l, int64_t heads, int64_t h) {
  return {l * heads * h, heads * h, h, 1};
}

absl::Status FeStatus(fe::error_t e, const char* what) {
  if (e.is_good()) return absl::OkStatus();
  return absl::FailedPreconditionError(absl::StrFormat("cudnn: %s failed: %s", what, e.get_message()));
}

#define ATTN_FE_RETURN_IF_ERROR(expr, what)                               \
  do {                                                                    \
    if (absl::Status _s = FeStatus((expr), what); !_s.ok()) return _s;    \
  } while (0)

// One device's cuDNN handle and plan cache.
class CudnnState final : public BackendState {
 public:
  static absl::StatusOr<std::unique_ptr<BackendState>> Create(DeviceContext& context) {
    auto state = std::make_unique<CudnnState>();
    if (cudnnStatus_t s = cudnnCreate(&state->handle_); s != CUDNN_STATUS_SUCCESS) {
      return absl::FailedPreconditionError(absl::StrFormat(
          "cudnn: cudnnCreate failed (%s); is libcudnn 9 on the library path?",
          cudnnGetErrorString(s)));
    }
    if (cudnnStatus_t s = cudnnSetStream(state->handle_, context.stream());
        s != CUDNN_STATUS_SUCCESS) {
      return absl::InternalError(
          absl::StrFormat("cudnn: cudnnSetStream failed (%s)", cudnnGetErrorString(s)));
    }
    return std::unique_ptr<BackendState>(std::move(state));
  }
  ~CudnnState() override {
    if (handle_ != nullptr) cudnnDestroy(handle_);
  }

  // The cached plan for `key`, building it on a miss. Requires mu_ held.
  absl::StatusOr<Plan*> GetLocked(const PlanKey& key) {
    auto it = index_.find(key);
    if (it != index_.end()) {
      ++hits_;
      lru_.splice(lru_.begin(), lru_, it->second);
      return &it->second->second;
    }
    ++misses_;
    const auto start = std::chrono::steady_clock::now();
    auto plan = Build(key);
    last_build_seconds_ = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    build_seconds_ += last_build_seconds_;
    if (!plan.ok()) return plan.status();
    lru_.emplace_front(key, *std::move(plan));
    index_[key] = lru_.begin();
    if (static_cast<int64_t>(lru_.size()) > kPlanCacheCapacity) {
      index_.erase(lru_.back().first);
      lru_.pop_back();
    }
    return &lru_.front().second;
  }

  PlanCacheStats Stats() {
    std::lock_guard<std::mutex> lock(mu_);
    return {hits_, misses_, static_cast<int64_t>(lru_.size()), kPlanCacheCapacity, build_seconds_,
            last_build_seconds_};
  }

  void AddBuildSeconds(double s) { build_seconds_ += s; }

  std::mutex mu_;
  cudnnHandle_t handle_ = nullptr;

 private:
  absl::StatusOr<Plan> Build(const PlanKey& key) {
    const AttentionProblem& p = key.problem;
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
    auto q = view("Q", kQ, p.q_len, p.num_heads, key.q_strides);
    auto k = view("K", kK, p.kv_len, p.num_kv_heads, key.k_strides);
    auto v = view("V", kV, p.kv_len, p.num_kv_heads, key.v_strides);
    auto options = fe::graph::SDPA_attributes()
                       .set_name("sdpa")
                       .set_generate_stats(false)
                       .set_attn_scale(static_cast<float>(p.EffectiveScale()));
    if (p.causal) options.set_diagonal_alignment(fe::DiagonalAlignment_t::TOP_LEFT).set_diagonal_band_right_bound(0);
    auto [o, stats] = graph->sdpa(q, k, v, options);
    (void)stats;
    const auto& os = key.o_strides;
    o->set_output(true)
        .set_uid(kO)
        .set_dim({p.batch, p.num_heads, p.q_len, p.head_dim})
        .set_stride({os[0], os[2], os[1], os[3]});

    ATTN_FE_RETURN_IF_ERROR(graph->validate(), "graph validation");
    ATTN_FE_RETURN_IF_ERROR(graph->build_operation_graph(handle_), "operation graph");
    ATTN_FE_RETURN_IF_ERROR(graph->create_execution_plans({fe::HeurMode_t::A}), "heuristics");
    if (auto e = graph->check_support(handle_); e.is_bad()) {
      return absl::FailedPreconditionError(absl::StrFormat(
          "cudnn: no cuDNN %d engine supports %s: %s", static_cast<int>(cudnnGetVersion()),
          p.ToString(), e.get_message()));
    }
    ATTN_FE_RETURN_IF_ERROR(
        graph->build_plans(handle_, key.autotune ? fe::BuildPlanPolicy_t::ALL
                                                 : fe::BuildPlanPolicy_t::HEURISTICS_CHOICE),
        "plan build");
    Plan plan;
    plan.graph = graph;
    if (key.autotune) {
      // Autotune may pick any built plan: reserve the largest of their workspaces.
      for (int64_t i = 0; i < graph->get_execution_plan_count(); ++i) {
        int64_t bytes = 0;
        if (graph->get_workspace_size_plan_at_index(i, bytes).is_good()) {
          plan.workspace_bytes = std::max(plan.workspace_bytes, bytes);
        }
      }
    } else {
      plan.workspace_bytes = graph->get_workspace_size();
    }
    return plan;
  }

  std::list<std::pair<PlanKey, Plan>> lru_;
  std::unordered_map<PlanKey, std::list<std::pair<PlanKey, Plan>>::iterator, PlanKeyHash> index_;
  int64_t hits_ = 0, misses_ = 0;
  double build_seconds_ = 0, last_build_seconds_ = 0;
};

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
    if (device.kind != DeviceKind::kCuda) {
      return absl::FailedPreconditionError("cudnn: needs a CUDA device");
    }
    if (p.dtype != DType::kBFloat16 && p.dtype != DType::kFloat16) {
      return absl::FailedPreconditionError(absl::StrFormat(
          "cudnn: cuDNN SDPA requires bfloat16 or float16 input; got %s", DTypeName(p.dtype)));
    }
    if (device.cc_major < 8) {
      return absl::FailedPreconditionError(absl::StrFormat(
          "cudnn: cuDNN flash attention needs compute capability >= 8.0; device has %d.%d",
          device.cc_major, device.cc_minor));
    }
    const size_t version = cudnnGetVersion();
    if (version < 90000) {
      return absl::FailedPreconditionError(absl::StrFormat(
          "cudnn: needs cuDNN >= 9.0; the loaded library is %d", static_cast<int>(version)));
    }
    if (p.head_dim % 8 != 0) {
      return absl::InvalidArgumentError(absl::StrFormat(
          "cudnn: head_dim must be a multiple of 8; got %d", p.head_dim));
    }
    const int64_t max_head_dim = device.cc_major == 9 ? 256 : 128;
    if (p.head_dim > max_head_dim) {
      return absl::InvalidArgumentError(absl::StrFormat(
          "cudnn: head_dim must be <= %d on compute capability %d.%d; got %d", max_head_dim,
          device.cc_major, device.cc_minor, p.head_dim));
    }
    return absl::OkStatus();
  }

  absl::StatusOr<int64_t> WorkspaceBytes(const AttentionProblem& p, DeviceContext& context,
                                         const RunOptions& options) const override {
    const PlanKey key{p,
                      PackedStrides(p.q_len, p.num_heads, p.head_dim),
                      PackedStrides(p.kv_len, p.num_kv_heads, p.head_dim),
                      PackedStrides(p.kv_len, p.num_kv_heads, p.head_dim),
                      PackedStrides(p.q_len, p.num_heads, p.head_dim),
                      options.autotune};
    auto state = State(context);
    if (!state.ok()) return state.status();
    std::lock_guard<std::mutex> lock((*state)->mu_);
    auto plan = (*state)->GetLocked(key);
    if (!plan.ok()) return plan.status();
    return (*plan)->workspace_bytes;
  }

  absl::Status Run(const RunArgs& args) const override {
    const AttentionTensors& t = args.tensors;
    if (t.out.memory != MemoryKind::kDevice) {
      return absl::InvalidArgumentError("cudnn: tensors must be in device memory");
    }
    const PlanKey key{args.problem, t.q.strides, t.k.strides, t.v.strides, t.out.strides,
                      args.options.autotune};
    auto state = State(args.context);
    if (!state.ok()) return state.status();
    CudnnState& s = **state;
    std::lock_guard<std::mutex> lock(s.mu_);
    auto plan = s.GetLocked(key);
    if (!plan.ok()) return plan.status();
    if ((*plan)->workspace_bytes > args.workspace_bytes) {
      return absl::InvalidArgumentError(absl::StrFormat(
          "cudnn: the plan for these strides needs %d workspace bytes, %d were given",
          (*plan)->workspace_bytes, args.workspace_bytes));
    }
    std::unordered_map<int64_t, void*> pack{
        {kQ, t.q.data}, {kK, t.k.data}, {kV, t.v.data}, {kO, t.out.data}};
    if (args.options.autotune && !(*plan)->tuned) {
      // Times every built plan on these buffers (overwriting out, which the run below rewrites)
      // and makes the fastest the graph's choice for every later call with this key.
      const auto start = std::chrono::steady_clock::now();
      ATTN_FE_RETURN_IF_ERROR((*plan)->graph->autotune(s.handle_, pack, args.workspace),
                              "autotune");
      s.AddBuildSeconds(std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
      (*plan)->tuned = true;
    }
    ATTN_FE_RETURN_IF_ERROR((*plan)->graph->execute(s.handle_, pack, args.workspace), "execute");
    return absl::OkStatus();
  }

  std::optional<PlanCacheStats> plan_cache_stats(DeviceContext& context) const override {
    auto state = State(context);
    if (!state.ok()) return std::nullopt;
    return (*state)->Stats();
  }

 private:
  absl::StatusOr<CudnnState*> State(DeviceContext& context) const {
    auto state = context.GetBackendState(this, [&] { return CudnnState::Create(context); });
    if (!state.ok()) return state.status();
    return static_cast<CudnnState*>(*state);
  }
};

}  // namespace

std::unique_ptr<Backend> MakeCudnnBackend() { return std::make_unique<CudnnBackend>(); }

std::string CudnnLibraryVersion() {
  const size_t v = cudnnGetVersion();  // 91900 for 9.19.0
  return absl::StrFormat("%d.%d.%d", v / 10000, v % 10000 / 100, v % 100);
}

}  // namespace attn
