// attention.v1.AttentionService on the gRPC callback API: validation on the gRPC thread, work on
// the per-device workers, one log line and metrics per request.
#pragma once

#include <atomic>
#include <condition_variable>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "attention/v1/attention.grpc.pb.h"
#include "attn/stop.h"
#include "server/admission.h"
#include "server/auth.h"
#include "server/log.h"
#include "server/metrics.h"
#include "server/quota.h"
#include "server/scheduler.h"
#include "server/validation.h"

namespace attn::server {

struct ServiceConfig {
  RequestLimits limits;
  AdmissionLimits admission;
  double default_deadline_s = 60;  // for calls that set none
  std::string version;
  std::string hostname;
  bool cpu_fallback = false;
  std::string note;                // why cpu_fallback, or why not serving
  std::string not_serving_reason;  // non-empty: every work RPC is UNAVAILABLE with this reason
  // With tokens: who may call (null: no tokens, everyone is keyed by client_id or address).
  const TokenRegistry* tokens = nullptr;
  // Quotas of callers without a tokens-file override, and their device-time window.
  ParticipantLimits participant_limits;
  double participant_window_s = 600;
  // Threads one call of a host backend may use (RunOptions::host_threads); 0: all.
  int host_threads = 0;
  // How long a refusal for a participant's quota is held before it is sent: a client retrying
  // in a tight loop then waits instead of spinning the server's CPU.
  double quota_refusal_delay_s = 0.05;
};

// Trailing metadata of every reply: the id in the server's log line for this request, so a
// participant can report a failure precisely.
inline constexpr const char* kRequestIdKey = "x-request-id";

class BenchmarkJob;

class AttentionService final : public attention::v1::AttentionService::CallbackService {
 public:
  AttentionService(ServiceConfig config, std::vector<DeviceWorkers*> devices, Metrics& metrics);
  ~AttentionService() override;

  grpc::ServerUnaryReactor* GetServerInfo(grpc::CallbackServerContext* context,
                                          const attention::v1::GetServerInfoRequest* request,
                                          attention::v1::ServerInfo* response) override;
  grpc::ServerUnaryReactor* Attend(grpc::CallbackServerContext* context,
                                   const attention::v1::AttendRequest* request,
                                   attention::v1::AttendResponse* response) override;
  grpc::ServerWriteReactor<attention::v1::RunBenchmarkEvent>* RunBenchmark(
      grpc::CallbackServerContext* context,
      const attention::v1::RunBenchmarkRequest* request) override;

  // From now on new RPCs get UNAVAILABLE; accepted ones run to the end.
  void StartDraining();
  // Waits until no request is in flight or `timeout_s` passes; returns how many remain.
  int WaitIdle(double timeout_s);
  // Stops every request in flight with `why`: queued ones are answered with it when a worker
  // takes them (at once), running ones at their next piece, benchmark jobs at their current case.
  void StopAll(const absl::Status& why);

  // One request's record: what the log line and metrics report when it finishes.
  struct Call {
    uint64_t id = 0;
    // client: the participant (the token's name), or without tokens the client key (client_id,
    // else the peer's address); label: the request's client_id inside a participant.
    std::string rpc, peer, client, label, backend, shape;
    bool identified = false;  // with tokens: authenticated (metrics get its name)
    Role role = Role::kParticipant;
    ParticipantLimits limits;
    ParticipantQuotas::Ticket quota;  // its place among the participant's calls in flight
    std::string refusal;              // why it was refused before running (metrics label)
    // A quota refusal's reply may be held back (Reply) only for a small request: a large one
    // would hold its payload in memory meanwhile.
    bool small_request = true;
    Clock::time_point accepted;
    double queue_s = 0, device_s = 0;
    double estimated_s = -1;  // admitted cost; -1 before admission
    // The call's deadline (the client's, cut to --max_job_seconds) and its stop reasons: the
    // client's cancel and the server's shutdown.
    std::shared_ptr<StopToken> stop;
    HostBudget::Reservation host;  // host memory held until the call is done
  };

  // The gRPC callback for a cancelled call (by the client, or its deadline): stops its work.
  static void OnCallCancelled(Call& call);

 private:
  friend class BenchmarkJob;
  friend class InferenceService;  // the Open Inference Protocol facade (server/kserve_service.h)

  // One attention call on the path every protocol shares: identity, draining, the participant's
  // quotas, validation, the backend, cost admission, the queue and the run. `converted` is a
  // facade's own verdict on the request it converted into `request` (INVALID_ARGUMENT naming its
  // field, NOT_FOUND for its model), reported where ValidateAttend's would be. `reply` runs once
  // with the status the client gets, after the request's log line and metrics (Done) and the
  // quota refusals' delay; `request` and `response` must live until then.
  void StartAttend(grpc::CallbackServerContext* context, std::shared_ptr<Call> call,
                   const attention::v1::AttendRequest& request, const absl::Status& converted,
                   attention::v1::AttendResponse* response,
                   std::function<void(const absl::Status&)> reply);

  std::shared_ptr<Call> NewCall(const char* rpc, grpc::CallbackServerContext* context,
                                const std::string& client_id);
  // Who calls: with tokens, the participant of the authorization header (UNAUTHENTICATED
  // otherwise); without, the client key with the default limits. Fills call.client, label,
  // role and limits.
  absl::Status Identify(grpc::CallbackServerContext* context, const std::string& client_id,
                        Call& call);
  // A participant's call begins (quotas); sets call.quota or call.refusal.
  absl::Status BeginQuota(Call& call, bool job);
  // Seconds a task of `call` held a device worker: quotas and metrics.
  void HeldDevice(const Call& call, double seconds);
  // A Task for `call` with its participant's queue limits.
  Task MakeTask(const Call& call) const;
  // Runs `reply` now, or config_.quota_refusal_delay_s later when `call` was refused for its
  // participant's quotas.
  void Reply(const Call& call, std::function<void()> reply);
  void DelayedReplies();
  // Logs the request line and records metrics with the status the client gets (a cancelled
  // or expired call's, whatever the work returned); the caller then finishes the RPC.
  void Done(Call& call, const absl::Status& status);
  // Steady-clock deadline of a call: the client's, or default_deadline_s after acceptance; at
  // most max_job_seconds after acceptance.
  Clock::time_point Deadline(grpc::CallbackServerContext* context,
                             Clock::time_point accepted) const;

  // UNAVAILABLE while draining or not serving; OK otherwise.
  absl::Status Admit() const;
  // The device with the fewest waiting tasks, or the one named (-1: any).
  absl::StatusOr<DeviceWorkers*> PickDevice(int index) const;

  const ServiceConfig config_;
  const std::vector<DeviceWorkers*> devices_;
  Metrics& metrics_;
  std::atomic<bool> draining_{false};
  std::atomic<uint64_t> next_id_{1};
  std::mutex mu_;
  std::condition_variable idle_;
  std::set<StopToken*> live_;  // the stop tokens of calls in flight
  HostBudget host_budget_;
  ParticipantQuotas quotas_;
  LogRateLimit refusal_log_{20, 40};  // log lines of refused requests
  // Replies held back (Reply), in due order, sent by delay_thread_.
  std::multimap<Clock::time_point, std::function<void()>> delayed_;
  std::condition_variable delayed_cv_;
  bool stopping_ = false;
  std::thread delay_thread_;
};

}  // namespace attn::server
