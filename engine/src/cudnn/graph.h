// The one cuDNN graph layer both cuDNN backends (cudnn, cudnn_fp8) call: the status macro, the
// per-device handle and plan cache (LRU, with hit/miss/build-time counts), and graph checking and
// building. Only graph.cc and the two backends include this (cudnn_frontend.h is slow to compile).
#pragma once

#include <cudnn.h>
#include <cudnn_frontend.h>

#include <cstdint>
#include <functional>
#include <list>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "attn/backend.h"
#include "attn/device.h"
#include "attn/problem.h"

namespace attn::cudnn {

namespace fe = cudnn_frontend;

// A failed cuDNN or cudnn-frontend call as a status naming the expression and file:line. A
// frontend error (graph validation, heuristics, plan build, execution) is FailedPrecondition:
// this cuDNN cannot run the graph here; a cuDNN library error is ResourceExhausted for memory,
// else Internal.
absl::Status FrontendStatus(fe::error_t e, const char* expr, const char* file, int line);
absl::Status LibraryStatus(cudnnStatus_t s, const char* expr, const char* file, int line);
inline absl::Status ToStatus(fe::error_t e, const char* expr, const char* file, int line) {
  return FrontendStatus(e, expr, file, line);
}
inline absl::Status ToStatus(cudnnStatus_t s, const char* expr, const char* file, int line) {
  return LibraryStatus(s, expr, file, line);
}

}  // namespace attn::cudnn

#define ATTN_CUDNN_RETURN_IF_ERROR(expr)                                                        \
  do {                                                                                          \
    if (absl::Status _s = ::attn::cudnn::ToStatus((expr), #expr, __FILE__, __LINE__); !_s.ok()) \
      return _s;                                                                                \
  } while (0)

namespace attn::cudnn {

// Everything a graph depends on, as one list of numbers: the problem's every field
// (KeyFields), then what the backend adds (strides, layout, autotune). Equality and the hash run
// over the whole list, so no field can be left out of either.
using PlanKey = std::vector<int64_t>;
// The problem's fields, in one place: B, T, S, N, K, H, dtype, causal, the scale's bits, and
// whether it has kv_lens (not their values: one graph serves every set of lengths).
PlanKey KeyFields(const AttentionProblem& p);

struct PlanKeyHash {
  size_t operator()(const PlanKey& key) const;
};

struct Plan {
  std::shared_ptr<fe::graph::Graph> graph;
  int64_t workspace_bytes = 0;
  bool tuned = false;  // autotune plans: the fastest has been chosen on real buffers
};

// Validates `graph` (its tensors and operations already defined), checks that this cuDNN has an
// engine for it (FailedPrecondition "<backend>: no cuDNN <version> engine supports <problem>"
// when not), builds its plans (every candidate with autotune, else the heuristic's first) and
// sizes the workspace (the largest candidate's with autotune).
absl::StatusOr<Plan> BuildPlan(std::shared_ptr<fe::graph::Graph> graph, cudnnHandle_t handle,
                               bool autotune, const std::string& backend,
                               const AttentionProblem& problem);

// One device's cuDNN handle, bound to its context's stream, and its plan cache. Backends derive
// to keep more per device (cudnn_fp8: a second stream). Calls on it hold mu.
class CudnnState : public BackendState {
 public:
  static constexpr int64_t kCapacity = 256;  // the codelab suite builds ~25 graphs

  ~CudnnState() override;

  // Creates the handle on `context`'s stream: FailedPrecondition naming `backend` when cuDNN
  // cannot start (no libcudnn 9).
  absl::Status Init(DeviceContext& context, const std::string& backend);

  // The cached plan for `key`, built by `build` on a miss (the least recently used plan goes
  // when the cache is full). Requires mu held.
  absl::StatusOr<Plan*> GetLocked(const PlanKey& key,
                                  const std::function<absl::StatusOr<Plan>()>& build);

  // Times every built plan of `plan` on these buffers once and makes the fastest its choice
  // (counted as build time). Requires mu held.
  absl::Status AutotuneLocked(Plan& plan, std::unordered_map<int64_t, void*>& pack,
                              void* workspace);

  PlanCacheStats Stats();

  cudnnHandle_t handle() const { return handle_; }

  std::mutex mu;

 private:
  cudnnHandle_t handle_ = nullptr;
  std::list<std::pair<PlanKey, Plan>> lru_;
  std::unordered_map<PlanKey, std::list<std::pair<PlanKey, Plan>>::iterator, PlanKeyHash> index_;
  int64_t hits_ = 0, misses_ = 0;
  double build_seconds_ = 0, last_build_seconds_ = 0;
};

// The state of type State (a CudnnState) that `owner` keeps on `context`, made and initialised
// on first use.
template <typename State>
absl::StatusOr<State*> StateOf(const Backend* owner, DeviceContext& context) {
  auto state =
      context.GetBackendState(owner, [&]() -> absl::StatusOr<std::unique_ptr<BackendState>> {
        auto s = std::make_unique<State>();
        if (absl::Status init = s->Init(context, owner->name()); !init.ok()) return init;
        return std::unique_ptr<BackendState>(std::move(s));
      });
  if (!state.ok()) return state.status();
  return static_cast<State*>(*state);
}

// "9.19.0", from cudnnGetVersion().
std::string LibraryVersion();

}  // namespace attn::cudnn
