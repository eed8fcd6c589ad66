#include "server/call.h"

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "proto/status.h"
#include "server/token_gate.h"

namespace attn::server {
std::string PeerHost(const std::string& peer) {
  absl::string_view p = peer;
  for (absl::string_view scheme : {"ipv4:", "ipv6:"}) {
    if (!absl::StartsWith(p, scheme)) continue;
    p.remove_prefix(scheme.size());
    if (absl::StartsWith(p, "[")) {  // ipv6:[::1]:5
      const size_t close = p.find(']');
      return std::string(close == absl::string_view::npos ? p : p.substr(1, close - 1));
    }
    const size_t colon = p.rfind(':');
    return std::string(colon == absl::string_view::npos ? p : p.substr(0, colon));
  }
  return peer;  // unix: and others: the whole peer, a fixed string per socket path
}

Calls::Calls(const ServiceConfig& config, Metrics& metrics)
    : config_(config),
      metrics_(metrics),
      host_budget_(config.admission.max_host_bytes),
      quotas_(config.participant_window_s),
      delay_thread_([this] { DelayedReplies(); }) {}

Calls::~Calls() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stopping_ = true;
  }
  delayed_cv_.notify_all();
  delay_thread_.join();
}

std::shared_ptr<Call> Calls::Begin(const char* rpc, grpc::CallbackServerContext* context) {
  auto call = std::make_shared<Call>();
  call->id = next_id_++;
  call->rpc = rpc;
  call->peer = context->peer();
  call->client = PeerHost(call->peer);
  call->accepted = Clock::now();
  call->stop = std::make_shared<StopToken>(Deadline(context, call->accepted));
  {
    std::lock_guard<std::mutex> lock(mu_);
    live_.insert(call->stop.get());
  }
  ++metrics_.inflight;
  context->AddTrailingMetadata(kRequestIdKey, absl::StrCat(call->id));
  return call;
}

absl::Status Calls::Identify(grpc::CallbackServerContext* context, const std::string& client_id,
                             Call& call) {
  call.limits = config_.participant_limits;
  if (absl::Status s = ValidateClientId(client_id, "client_id"); !s.ok()) return s;
  call.label = client_id;
  if (config_.tokens == nullptr) {
    call.role = Role::kAdmin;  // no tokens: no roles, as before tokens existed
    return absl::OkStatus();
  }
  auto participant = AuthenticateCall(*config_.tokens, context->client_metadata());
  if (!participant.ok()) {
    call.refusal = "unauthenticated";
    return participant.status();
  }
  call.client = (*participant)->name;
  call.identified = true;
  call.role = (*participant)->role;
  call.limits = (*participant)->limits;
  return absl::OkStatus();
}

absl::Status Calls::Admit() const {
  if (!config_.not_serving_reason.empty()) {
    return absl::UnavailableError(absl::StrCat("not serving: ", config_.not_serving_reason));
  }
  if (draining_) return absl::UnavailableError("server is shutting down; retry on another replica");
  return absl::OkStatus();
}

absl::Status Calls::BeginQuota(Call& call, bool job) {
  std::string reason;
  auto ticket = quotas_.Begin(call.client, call.limits, job, &reason);
  if (!ticket.ok()) {
    call.refusal = reason;
    return ticket.status();
  }
  call.quota = *std::move(ticket);
  return absl::OkStatus();
}

absl::StatusOr<HostBudget::Reservation> Calls::ReserveHost(Call& call, int64_t bytes,
                                                           const std::string& what) {
  auto r = host_budget_.Reserve(call.client, bytes, what);
  if (!r.ok()) call.refusal = "host_memory";
  return r;
}

void Calls::HeldDevice(const Call& call, double seconds) {
  quotas_.AddDeviceSeconds(call.client, seconds);
  if (call.identified) metrics_.ParticipantDeviceSeconds(call.client, seconds);
}

Task Calls::MakeTask(const Call& call) const {
  Task task;
  task.client = call.client;
  task.max_queued = call.limits.max_queued;
  task.max_running = call.limits.max_running;
  return task;
}

void Calls::OnCancelled(Call& call) {
  // gRPC cancels a call whose deadline passed too; say which it was. gRPC's timer and our
  // steady-clock copy of the deadline can differ by a few ms.
  if (Clock::now() + std::chrono::milliseconds(100) >= call.stop->deadline()) {
    call.stop->RequestStop(absl::DeadlineExceededError("the call's deadline passed"));
  } else {
    call.stop->RequestStop(absl::CancelledError("cancelled by the client"));
  }
}

void Calls::Reply(const Call& call, std::function<void()> reply) {
  if (!absl::StartsWith(call.refusal, "participant_") || !call.small_request ||
      config_.quota_refusal_delay_s <= 0) {
    return reply();
  }
  At(Clock::now() + std::chrono::duration_cast<Clock::duration>(
                        std::chrono::duration<double>(config_.quota_refusal_delay_s)),
     std::move(reply));
}

void Calls::At(Clock::time_point when, std::function<void()> fn) {
  std::lock_guard<std::mutex> lock(mu_);
  delayed_.emplace(when, std::move(fn));
  delayed_cv_.notify_all();
}

void Calls::DelayedReplies() {
  std::unique_lock<std::mutex> lock(mu_);
  for (;;) {
    if (delayed_.empty()) {
      if (stopping_) return;
      delayed_cv_.wait(lock);
      continue;
    }
    // At shutdown everything left goes at once.
    if (!stopping_ && delayed_.begin()->first > Clock::now()) {
      delayed_cv_.wait_until(lock, delayed_.begin()->first);
      continue;
    }
    std::function<void()> reply = std::move(delayed_.begin()->second);
    delayed_.erase(delayed_.begin());
    lock.unlock();
    reply();
    lock.lock();
  }
}

void Calls::Done(Call& call, const absl::Status& work_status) {
  // The client of a call stopped by its cancel or deadline gets that, whatever the work returned.
  absl::Status status = work_status;
  if (absl::Status stopped = call.stop->Check();
      !stopped.ok() && (absl::IsCancelled(stopped) || absl::IsDeadlineExceeded(stopped)) &&
      (status.ok() || status.code() != stopped.code())) {
    status = stopped;
  }
  call.host.Release();
  call.quota.Release();
  {
    std::lock_guard<std::mutex> lock(mu_);
    live_.erase(call.stop.get());
  }
  const double total = Seconds(Clock::now() - call.accepted);
  const std::string code = CodeName(status.code());
  metrics_.Request(call.rpc, code, total);
  if (!call.refusal.empty()) metrics_.Refusal(call.refusal);
  if (call.identified) metrics_.ParticipantRequest(call.client, call.rpc, code);
  LogFields fields = {{"id", absl::StrCat(call.id)},
                      {"peer", call.peer},
                      {"rpc", call.rpc},
                      {"code", code},
                      {"total_ms", absl::StrFormat("%.3f", total * 1e3)}};
  if (!call.backend.empty()) fields.emplace_back("backend", call.backend);
  if (!call.shape.empty()) fields.emplace_back("shape", call.shape);
  if (call.rpc != "GetServerInfo") {
    fields.emplace_back("queue_ms", absl::StrFormat("%.3f", call.queue_s * 1e3));
    fields.emplace_back("device_ms", absl::StrFormat("%.3f", call.device_s * 1e3));
  }
  if (call.estimated_s >= 0)
    fields.emplace_back("estimated_ms", absl::StrFormat("%.3f", call.estimated_s * 1e3));
  if (call.identified) fields.emplace_back("participant", call.client);
  if (!call.label.empty()) fields.emplace_back("client", call.label);
  // Messages can quote what a client sent: the line keeps their start (LogFields are bounded).
  if (!status.ok()) fields.emplace_back("error", BoundedMessage(status.message()));
  int64_t suppressed = 0;
  const bool log = call.refusal.empty() || refusal_log_.Allow(&suppressed);
  if (suppressed > 0) fields.emplace_back("refusals_not_logged", absl::StrCat(suppressed));
  if (log) {
    Log(status.ok() || status.code() == absl::StatusCode::kInvalidArgument ||
                status.code() == absl::StatusCode::kCancelled
            ? spdlog::level::info
            : spdlog::level::warn,
        "request", fields);
  }
  std::lock_guard<std::mutex> lock(mu_);
  if (--metrics_.inflight == 0) idle_.notify_all();
}

Clock::time_point Calls::Deadline(grpc::CallbackServerContext* context,
                                  Clock::time_point accepted) const {
  const auto by_default = accepted + std::chrono::duration_cast<Clock::duration>(
                                         std::chrono::duration<double>(config_.default_deadline_s));
  const auto longest =
      accepted + std::chrono::duration_cast<Clock::duration>(
                     std::chrono::duration<double>(config_.admission.max_job_seconds));
  const auto client = context->deadline();
  if (client == std::chrono::system_clock::time_point::max()) return std::min(by_default, longest);
  const auto left = client - std::chrono::system_clock::now();
  return std::min(Clock::now() + std::chrono::duration_cast<Clock::duration>(left), longest);
}

int Calls::WaitIdle(double timeout_s) {
  std::unique_lock<std::mutex> lock(mu_);
  idle_.wait_for(lock, std::chrono::duration<double>(timeout_s),
                 [&] { return metrics_.inflight.load() == 0; });
  return metrics_.inflight.load();
}

void Calls::StopAll(const absl::Status& why) {
  std::lock_guard<std::mutex> lock(mu_);
  for (StopToken* stop : live_) stop->RequestStop(why);
}

}  // namespace attn::server
