#include "cudnn/graph.h"

#include <chrono>
#include <cstring>

#include "absl/strings/str_format.h"

namespace attn::cudnn {
namespace {

double SecondsSince(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

}  // namespace

absl::Status FrontendStatus(fe::error_t e, const char* expr, const char* file, int line) {
  if (e.is_good()) return absl::OkStatus();
  return absl::FailedPreconditionError(absl::StrFormat("cudnn-frontend error in %s at %s:%d: %s",
                                                       expr, file, line, e.get_message()));
}

absl::Status LibraryStatus(cudnnStatus_t s, const char* expr, const char* file, int line) {
  if (s == CUDNN_STATUS_SUCCESS) return absl::OkStatus();
  const absl::StatusCode code = s == CUDNN_STATUS_ALLOC_FAILED
                                    ? absl::StatusCode::kResourceExhausted
                                    : absl::StatusCode::kInternal;
  return absl::Status(code, absl::StrFormat("cuDNN error %s in %s at %s:%d", cudnnGetErrorString(s),
                                            expr, file, line));
}

PlanKey KeyFields(const AttentionProblem& p) {
  const double scale = p.EffectiveScale();
  int64_t scale_bits;
  std::memcpy(&scale_bits, &scale, sizeof(scale_bits));
  return {p.batch, p.q_len, p.kv_len, p.num_heads, p.num_kv_heads, p.head_dim,
          static_cast<int64_t>(p.dtype), static_cast<int64_t>(p.causal), scale_bits,
          // Lengths change the graph (a padding mask with its two inputs); their values do not.
          static_cast<int64_t>(!p.kv_lens.empty())};
}

size_t PlanKeyHash::operator()(const PlanKey& key) const {
  size_t h = key.size();
  for (int64_t v : key) h ^= std::hash<int64_t>()(v) + 0x9e3779b97f4a7c15ull + (h << 6) + (h >> 2);
  return h;
}

absl::StatusOr<Plan> BuildPlan(std::shared_ptr<fe::graph::Graph> graph, cudnnHandle_t handle,
                               bool autotune, const std::string& backend,
                               const AttentionProblem& problem) {
  ATTN_CUDNN_RETURN_IF_ERROR(graph->validate());
  ATTN_CUDNN_RETURN_IF_ERROR(graph->build_operation_graph(handle));
  ATTN_CUDNN_RETURN_IF_ERROR(graph->create_execution_plans({fe::HeurMode_t::A}));
  if (auto e = graph->check_support(handle); e.is_bad()) {
    return Unsupported(absl::StrFormat("%s: no cuDNN %d engine supports %s: %s", backend,
                                       static_cast<int>(cudnnGetVersion()), problem.ToString(),
                                       e.get_message()));
  }
  ATTN_CUDNN_RETURN_IF_ERROR(graph->build_plans(
      handle, autotune ? fe::BuildPlanPolicy_t::ALL : fe::BuildPlanPolicy_t::HEURISTICS_CHOICE));
  Plan plan;
  plan.graph = std::move(graph);
  if (autotune) {
    // Autotune may pick any built plan: reserve the largest of their workspaces.
    for (int64_t i = 0; i < plan.graph->get_execution_plan_count(); ++i) {
      int64_t bytes = 0;
      if (plan.graph->get_workspace_size_plan_at_index(i, bytes).is_good()) {
        plan.workspace_bytes = std::max(plan.workspace_bytes, bytes);
      }
    }
  } else {
    plan.workspace_bytes = plan.graph->get_workspace_size();
  }
  return plan;
}

CudnnState::~CudnnState() {
  if (handle_ != nullptr) cudnnDestroy(handle_);
}

absl::Status CudnnState::Init(DeviceContext& context, const std::string& backend) {
  if (cudnnStatus_t s = cudnnCreate(&handle_); s != CUDNN_STATUS_SUCCESS) {
    handle_ = nullptr;
    return absl::FailedPreconditionError(
        absl::StrFormat("%s: cudnnCreate failed (%s); is libcudnn 9 on the library path?", backend,
                        cudnnGetErrorString(s)));
  }
  ATTN_CUDNN_RETURN_IF_ERROR(cudnnSetStream(handle_, context.stream()));
  return absl::OkStatus();
}

absl::StatusOr<Plan*> CudnnState::GetLocked(const PlanKey& key,
                                            const std::function<absl::StatusOr<Plan>()>& build) {
  auto it = index_.find(key);
  if (it != index_.end()) {
    ++hits_;
    lru_.splice(lru_.begin(), lru_, it->second);
    return &it->second->second;
  }
  ++misses_;
  const auto start = std::chrono::steady_clock::now();
  auto plan = build();
  last_build_seconds_ = SecondsSince(start);
  build_seconds_ += last_build_seconds_;
  if (!plan.ok()) return plan.status();
  lru_.emplace_front(key, *std::move(plan));
  index_[key] = lru_.begin();
  if (static_cast<int64_t>(lru_.size()) > kCapacity) {
    index_.erase(lru_.back().first);
    lru_.pop_back();
  }
  return &lru_.front().second;
}

absl::Status CudnnState::AutotuneLocked(Plan& plan, std::unordered_map<int64_t, void*>& pack,
                                        void* workspace) {
  if (plan.tuned) return absl::OkStatus();
  const auto start = std::chrono::steady_clock::now();
  ATTN_CUDNN_RETURN_IF_ERROR(plan.graph->autotune(handle_, pack, workspace));
  build_seconds_ += SecondsSince(start);
  plan.tuned = true;
  return absl::OkStatus();
}

PlanCacheStats CudnnState::Stats() {
  std::lock_guard<std::mutex> lock(mu);
  return {hits_,     misses_,        static_cast<int64_t>(lru_.size()),
          kCapacity, build_seconds_, last_build_seconds_};
}

std::string LibraryVersion() {
  const size_t v = cudnnGetVersion();  // 91900 for 9.19.0
  return absl::StrFormat("%d.%d.%d", v / 10000, v % 10000 / 100, v % 100);
}

}  // namespace attn::cudnn
