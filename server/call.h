// One request's life on the server, whatever its RPC: who calls (identity), the participant's
// quotas, the host memory it holds, refusals held back, and the one log line and metrics it ends
// with. Every RPC handler (attend.h, benchmark_job.h, service.h's info, kserve_service.h) begins
// a Call here and ends it with Done.
#pragma once

#include <grpcpp/grpcpp.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/status.h"
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
  // With tokens: who may call (null: no tokens, every caller is keyed by its network address).
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

// One request's record: what the log line and metrics report when it finishes.
struct Call {
  uint64_t id = 0;
  // client: the participant (the token's name), or without tokens the caller's network address
  // (its host, without the port); label: the request's client_id, a label within it.
  std::string rpc, peer, client, label, backend, shape;
  bool identified = false;  // with tokens: authenticated (metrics get its name)
  Role role = Role::kParticipant;
  ParticipantLimits limits;
  ParticipantQuotas::Ticket quota;  // its place among the participant's calls in flight
  std::string refusal;              // why it was refused before running (metrics label)
  // A quota refusal's reply may be held back (Calls::Reply) only for a small request (at most
  // kSmallRequestBytes on the wire): a large one would hold its payload in memory meanwhile.
  static constexpr size_t kSmallRequestBytes = 64 * 1024;
  bool small_request = true;
  Clock::time_point accepted;
  double queue_s = 0, device_s = 0;
  double estimated_s = -1;  // admitted cost; -1 before admission
  // The call's deadline (the client's, cut to --max_job_seconds) and its stop reasons: the
  // client's cancel and the server's shutdown.
  std::shared_ptr<StopToken> stop;
  HostBudget::Reservation host;  // host memory held until the call is done
};

// The calls in flight and the state they share: quotas, the host budget, draining, the delayed
// replies of quota refusals.
class Calls {
 public:
  Calls(const ServiceConfig& config, Metrics& metrics);
  ~Calls();  // sends the replies still held back

  // A new call of `rpc`: an id, its peer, its deadline and stop token, counted in flight.
  std::shared_ptr<Call> Begin(const char* rpc, grpc::CallbackServerContext* context);

  // Who calls: with tokens, the participant of the authorization header (UNAUTHENTICATED
  // otherwise; the server's AuthMetadataProcessor already refused such calls before their body
  // was read); without, the peer's network address with the default limits. `client_id` (the
  // request's label) must pass ValidateClientId. Fills call.client, label, role and limits.
  absl::Status Identify(grpc::CallbackServerContext* context, const std::string& client_id,
                        Call& call);
  // UNAVAILABLE while draining or not serving; OK otherwise.
  absl::Status Admit() const;
  // A participant's call begins (quotas); sets call.quota or call.refusal.
  absl::Status BeginQuota(Call& call, bool job);
  // Reserves `bytes` of the host budget for `call` (what: the message's "needs ... for <what>"),
  // within its participant's share while others hold some; sets call.refusal on refusal.
  absl::StatusOr<HostBudget::Reservation> ReserveHost(Call& call, int64_t bytes,
                                                      const std::string& what);
  // Seconds a task of `call` held a device worker: quotas and metrics.
  void HeldDevice(const Call& call, double seconds);
  // A Task for `call` with its participant's queue limits.
  Task MakeTask(const Call& call) const;
  // Runs `reply` now, or config.quota_refusal_delay_s later when `call` was refused for its
  // participant's quotas.
  void Reply(const Call& call, std::function<void()> reply);
  // Runs `fn` on the calls' timer thread at `when` (at once when the server stops).
  void At(Clock::time_point when, std::function<void()> fn);
  // Logs the request line and records metrics with the status the client gets (a cancelled or
  // expired call's, whatever the work returned); the caller then finishes the RPC.
  void Done(Call& call, const absl::Status& status);

  // The gRPC callback for a cancelled call (by the client, or its deadline): stops its work.
  static void OnCancelled(Call& call);

  // From now on Admit() refuses; accepted calls run to the end.
  void StartDraining() { draining_ = true; }
  // Waits until no call is in flight or `timeout_s` passes; returns how many remain.
  int WaitIdle(double timeout_s);
  // Stops every call in flight with `why` (StopToken::RequestStop).
  void StopAll(const absl::Status& why);

  const ServiceConfig& config() const { return config_; }
  Metrics& metrics() { return metrics_; }

 private:
  void DelayedReplies();
  // Steady-clock deadline of a call: the client's, or default_deadline_s after acceptance; at
  // most max_job_seconds after acceptance.
  Clock::time_point Deadline(grpc::CallbackServerContext* context,
                             Clock::time_point accepted) const;

  const ServiceConfig& config_;
  Metrics& metrics_;
  std::atomic<bool> draining_{false};
  std::atomic<uint64_t> next_id_{1};
  std::mutex mu_;
  std::condition_variable idle_;
  std::set<StopToken*> live_;  // the stop tokens of calls in flight
  HostBudget host_budget_;
  ParticipantQuotas quotas_;
  LogRateLimit refusal_log_{20, 40};  // log lines of refused requests
  // Replies held back (Reply) and timers (At), in due order, run by delay_thread_.
  std::multimap<Clock::time_point, std::function<void()>> delayed_;
  std::condition_variable delayed_cv_;
  bool stopping_ = false;
  std::thread delay_thread_;
};

// The host part of a gRPC peer ("ipv4:10.0.0.7:51234" -> "10.0.0.7", "ipv6:[::1]:5" -> "::1"):
// the quota key of callers without tokens, which a client cannot change by reconnecting.
std::string PeerHost(const std::string& peer);

}  // namespace attn::server
