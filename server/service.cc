#include "server/service.h"

#include <algorithm>
#include <deque>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "attn/attention.h"
#include "attn/registry.h"
#include "attn/timing.h"
#include "proto/convert.h"
#include "proto/status.h"
#include "server/log.h"

namespace attn::server {
namespace v1 = attention::v1;
namespace {

double Seconds(Clock::duration d) { return std::chrono::duration<double>(d).count(); }

// The refusal reason (attn_refusals_total) of a device queue's Submit error: the queue is full
// (UNAVAILABLE) or the participant's queued-call quota is spent.
const char* SubmitRefusal(const absl::Status& s) {
  return absl::IsUnavailable(s) ? "queue_full" : "participant_queued";
}

// An Attend's reactor: finishes once; a cancel (the client's, or its deadline) stops the work.
class AttendReactor final : public grpc::ServerUnaryReactor {
 public:
  explicit AttendReactor(std::shared_ptr<AttentionService::Call> call) : call_(std::move(call)) {}
  void OnCancel() override { AttentionService::OnCallCancelled(*call_); }
  void OnDone() override { delete this; }

 private:
  const std::shared_ptr<AttentionService::Call> call_;
};

}  // namespace

// A RunBenchmark call: one task per case on its device, re-queued after each case so other
// clients' requests interleave; events are written one at a time in order.
class BenchmarkJob : public grpc::ServerWriteReactor<v1::RunBenchmarkEvent> {
 public:
  BenchmarkJob(AttentionService* service, grpc::CallbackServerContext* context,
               std::shared_ptr<AttentionService::Call> call)
      : service_(service), context_(context), call_(std::move(call)) {}

  // Validates the job, admits its cost and queues the first case; on any error the call ends
  // with it, before anything queued.
  void Start(const std::shared_ptr<BenchmarkJob>& self, const v1::RunBenchmarkRequest& request) {
    self_ = self;
    if (auto who = service_->Identify(context_, request.client_id(), *call_); !who.ok())
      return End(who);
    absl::Status s = service_->Admit();
    auto device = s.ok() ? service_->PickDevice(request.device()) : s;
    if (!device.ok()) return End(device.status());
    device_ = *device;
    auto options = BenchOptionsFromProto(request.options(), service_->config_.limits);
    if (!options.ok()) return End(options.status());
    options_ = *options;
    auto cases = BenchCasesFromRequest(request, device_->info(), service_->config_.limits);
    if (!cases.ok()) return End(cases.status());
    cases_ = std::move(cases->cases);
    job_indices_ = std::move(cases->indices);
    job_total_ = cases->job_total;
    call_->shape = request.job_case() == v1::RunBenchmarkRequest::kSuite
                       ? absl::StrCat("suite=", request.suite())
                       : absl::StrCat(cases_.size(), " cases");
    // The large suite (datacenter GPUs, minutes of device time) is for the workshop's admins.
    if (call_->role != Role::kAdmin && request.job_case() == v1::RunBenchmarkRequest::kSuite &&
        request.suite() == "large") {
      call_->refusal = "permission";
      return End(absl::PermissionDeniedError(absl::StrFormat(
          "%s: the large suite is for admins (role admin in the tokens file); participants run "
          "the codelab suite or their own cases",
          call_->client)));
    }
    if (auto admitted = AdmitCost(); !admitted.ok()) return End(admitted);
    if (auto quota = service_->BeginQuota(*call_, /*job=*/true); !quota.ok()) return End(quota);
    v1::RunBenchmarkEvent started;
    started.mutable_started()->set_total_cases(static_cast<int>(cases_.size()));
    started.mutable_started()->set_device(device_->index());
    started.mutable_started()->set_device_name(device_->info().name);
    started.mutable_started()->set_hostname(service_->config_.hostname);
    Send(std::move(started));
    if (auto q = Queue(0, false); !q.ok()) End(q);
  }

  void OnWriteDone(bool ok) override {
    std::unique_lock<std::mutex> lock(mu_);
    pending_.pop_front();
    if (!ok) {  // the client is gone: no further write can succeed
      call_->stop->RequestStop(absl::CancelledError("the client went away"));
      pending_.clear();
    }
    if (!pending_.empty()) {
      const v1::RunBenchmarkEvent* next = &pending_.front();
      lock.unlock();
      StartWrite(next);
      return;
    }
    writing_ = false;
    FinishIfEnded(lock);
  }

  void OnCancel() override { AttentionService::OnCallCancelled(*call_); }

  void OnDone() override {
    std::shared_ptr<BenchmarkJob> self;
    self.swap(self_);  // the tasks' references keep the object alive until they return
  }

 private:
  // Every case's cost on the backend it resolves to here (a case no backend can run costs
  // nothing: it comes back unsupported), each call against max_call_seconds and the whole
  // against max_job_seconds; then the host memory its largest numerics check holds, for the
  // job's life. Each case's pieces are sized to its backend's measured rate.
  absl::Status AdmitCost() {
    const Throughputs& t = device_->throughputs();
    const AdmissionLimits& limits = service_->config_.admission;
    Cost total;
    int64_t host_bytes = 0;
    piece_flops_.assign(cases_.size(), 0);
    for (size_t i = 0; i < cases_.size(); ++i) {
      const BenchCase& c = cases_[i];
      auto backend = BackendRegistry::Default().Resolve(c.backend, c.problem, device_->info());
      if (!backend.ok()) continue;
      const Cost cost = CaseCost(c.problem, **backend, options_, t);
      const std::string what = absl::StrFormat("cases[%d] (%s)", i, c.section);
      if (auto s = AdmitCall(what, c.problem, **backend, cost, t, limits); !s.ok()) {
        call_->refusal = "call_cost";
        return s;
      }
      total.flops += cost.flops;
      total.bytes += cost.bytes;
      total.seconds += cost.seconds;
      host_bytes = std::max(host_bytes, cost.host_bytes);
      piece_flops_[i] = PieceFlops(**backend, c.problem.dtype, t);
    }
    if (auto s = AdmitJob(total, static_cast<int>(cases_.size()), limits); !s.ok()) {
      call_->refusal = "job_cost";
      return s;
    }
    // A participant's jobs have a cap of their own (admins': the server's).
    if (call_->role != Role::kAdmin && total.seconds > call_->limits.max_job_seconds) {
      call_->refusal = "job_cost";
      return absl::ResourceExhaustedError(absl::StrFormat(
          "%s: the job's %d cases cost %s, over the participant limit max_job_seconds=%g "
          "(--participant_max_job_seconds, or the tokens file); run fewer cases or repeats",
          call_->client, cases_.size(), total.ToString(), call_->limits.max_job_seconds));
    }
    call_->estimated_s = total.seconds;
    auto host = service_->host_budget_.Reserve(host_bytes, "the job's numerics checks");
    if (!host.ok()) {
      call_->refusal = "host_memory";
      return host.status();
    }
    call_->host = *std::move(host);
    return absl::OkStatus();
  }

  absl::Status Queue(size_t index, bool continuation) {
    Task task = service_->MakeTask(*call_);
    task.run = [self = self_, index](DeviceContext& context, Clock::time_point queued) {
      const auto start = Clock::now();
      self->RunCase(context, queued, index);
      self->service_->HeldDevice(*self->call_, Seconds(Clock::now() - start));
    };
    absl::Status s = device_->Submit(std::move(task), continuation);
    if (!s.ok()) call_->refusal = SubmitRefusal(s);
    return s;
  }

  void RunCase(DeviceContext& context, Clock::time_point queued, size_t index) {
    const double wait = Seconds(Clock::now() - queued);
    call_->queue_s += wait;
    service_->metrics_.QueueWait(device_->index(), wait);
    const int total = static_cast<int>(cases_.size());
    if (absl::Status s = call_->stop->Check(); !s.ok()) return End(Stopped(s, index, total));
    const BenchCase& c = cases_[index];
    const int job_index = job_indices_[index];
    v1::RunBenchmarkEvent started;
    started.mutable_case_started()->set_index(job_index);
    started.mutable_case_started()->set_total(job_total_);
    *started.mutable_case_started()->mutable_case_() = CaseToProto(c);
    Send(std::move(started));

    BenchOptions options = options_;
    options.seed = CaseSeed(options_.seed, job_index);  // the case's seed in the whole job
    options.run.max_piece_flops = piece_flops_[index];
    options.run.host_threads = service_->config_.host_threads;
    auto results = attn::RunBenchmark({c}, options, context, nullptr, call_->stop.get());
    if (!results.ok()) return End(results.status());
    const BenchResult& r = results->front();
    service_->metrics_.BenchmarkCase(r.backend, CodeName(r.status.code()));
    call_->device_s += r.stats.mean * r.stats.count / 1e3;
    if (r.status.ok()) {
      ++ok_;
    } else if (IsUnsupported(r.status)) {
      ++unsupported_;
    } else if (r.status.code() != absl::StatusCode::kCancelled) {
      ++failed_;
    }
    Send(ResultEvent(r, job_index, job_total_));
    if (absl::Status s = call_->stop->Check(); !s.ok()) return End(Stopped(s, index + 1, total));
    if (index + 1 < cases_.size()) {
      if (auto s = Queue(index + 1, true); !s.ok()) End(s);
      return;
    }
    v1::RunBenchmarkEvent summary;
    auto* sm = summary.mutable_summary();
    sm->set_total_cases(total);
    sm->set_ok(ok_);
    sm->set_unsupported(unsupported_);
    sm->set_failed(failed_);
    sm->set_wall_seconds(Seconds(Clock::now() - call_->accepted));
    Send(std::move(summary));
    End(absl::OkStatus());
  }

  v1::RunBenchmarkEvent ResultEvent(const BenchResult& r, int index, int total) const {
    v1::RunBenchmarkEvent event;
    v1::CaseResult* out = event.mutable_result();
    out->set_index(index);
    out->set_total(total);
    *out->mutable_case_() = CaseToProto(r.bench_case);
    out->set_backend(r.backend);
    out->set_status(CodeNumber(r.status.code()));
    out->set_message(std::string(r.status.message()));
    out->set_seed(r.seed);
    v1::LatencyStats* st = out->mutable_stats();
    st->set_count(r.stats.count);
    st->set_min_ms(r.stats.min);
    st->set_median_ms(r.stats.median);
    st->set_mean_ms(r.stats.mean);
    st->set_p10_ms(r.stats.p10);
    st->set_p90_ms(r.stats.p90);
    st->set_p99_ms(r.stats.p99);
    st->set_stddev_ms(r.stats.stddev);
    out->set_budget_cut(r.budget_cut);
    out->set_tflops(r.tflops);
    out->set_gbps(r.gbps);
    out->set_kv_gbps(r.kv_gbps);
    out->set_workspace_bytes(r.workspace_bytes);
    out->set_peak_arena_bytes(r.peak_arena_bytes);
    out->set_timing(r.timing);
    out->set_input_sets(r.input_sets);
    out->set_max_abs_error(r.max_abs_error);
    out->set_rel_l2_error(r.rel_l2_error);
    out->set_numerics(r.numerics_note);
    out->set_causal_first_diff(r.causal_first_diff);
    out->set_causal_last_diff(r.causal_last_diff);
    out->set_device(device_->index());
    out->set_device_name(device_->info().name);
    out->set_hostname(service_->config_.hostname);
    if (!r.fp8_recipe.empty()) {
      v1::Fp8Report* fp8 = out->mutable_fp8();
      fp8->set_recipe(r.fp8_recipe);
      const auto values = [](const Fp8Values& from, v1::Fp8Values* to) {
        to->set_q(from[kFp8Q]);
        to->set_k(from[kFp8K]);
        to->set_v(from[kFp8V]);
        to->set_s(from[kFp8S]);
        to->set_o(from[kFp8O]);
      };
      values(r.fp8_state.used_scale, fp8->mutable_scales_used());
      values(r.fp8_state.seen_amax, fp8->mutable_amaxes_seen());
      values(r.fp8_state.next_scale, fp8->mutable_next_scales());
      fp8->set_calls_recorded(r.fp8_state.updates);
      fp8->set_quantize_ms(r.fp8_quantize_ms);
      fp8->set_max_diff_vs_cudnn(r.fp8_vs_cudnn_max_diff);
    }
    return event;
  }

  // The job's end status for a stop after `done` of `total` cases.
  static absl::Status Stopped(const absl::Status& why, size_t done, int total) {
    if (absl::IsDeadlineExceeded(why)) {
      return absl::DeadlineExceededError(
          absl::StrFormat("deadline passed after %d of %d cases; set a longer deadline (at most "
                          "--max_job_seconds) or run fewer cases",
                          done, total));
    }
    return absl::Status(why.code(), absl::StrFormat("%s; stopped after %d of %d cases",
                                                    why.message(), done, total));
  }

  void Send(v1::RunBenchmarkEvent event) {
    std::unique_lock<std::mutex> lock(mu_);
    if (end_requested_ || !call_->stop->Check().ok()) return;
    pending_.push_back(std::move(event));
    if (writing_) return;
    writing_ = true;
    const v1::RunBenchmarkEvent* next = &pending_.front();
    lock.unlock();
    StartWrite(next);
  }

  // Ends the call with `status` once the queued events are written.
  void End(const absl::Status& status) {
    std::unique_lock<std::mutex> lock(mu_);
    if (end_requested_) return;
    end_requested_ = true;
    final_ = status;
    FinishIfEnded(lock);
  }

  void FinishIfEnded(std::unique_lock<std::mutex>& lock) {
    if (!end_requested_ || writing_ || finished_) return;
    finished_ = true;
    const absl::Status status = final_;
    lock.unlock();
    context_->AddTrailingMetadata(kRequestIdKey, absl::StrCat(call_->id));
    service_->Reply(*call_, [this, status] {
      service_->Done(*call_, status);
      Finish(ToGrpcStatus(status));
    });
  }

  AttentionService* const service_;
  grpc::CallbackServerContext* const context_;
  const std::shared_ptr<AttentionService::Call> call_;
  std::shared_ptr<BenchmarkJob> self_;
  DeviceWorkers* device_ = nullptr;
  BenchOptions options_;
  std::vector<BenchCase> cases_;               // those this call runs, in order
  std::vector<int> job_indices_;               // cases_[i] is the job's case job_indices_[i]
  int job_total_ = 0;                          // cases in the whole job
  std::vector<double> piece_flops_;            // per case
  int ok_ = 0, unsupported_ = 0, failed_ = 0;  // touched by one case task at a time

  std::mutex mu_;
  std::deque<v1::RunBenchmarkEvent> pending_;  // front() is being written while writing_
  bool writing_ = false;
  bool end_requested_ = false;
  bool finished_ = false;
  absl::Status final_;
};

AttentionService::AttentionService(ServiceConfig config, std::vector<DeviceWorkers*> devices,
                                   Metrics& metrics)
    : config_(std::move(config)),
      devices_(std::move(devices)),
      metrics_(metrics),
      host_budget_(config_.admission.max_host_bytes),
      quotas_(config_.participant_window_s),
      delay_thread_([this] { DelayedReplies(); }) {}

AttentionService::~AttentionService() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stopping_ = true;
  }
  delayed_cv_.notify_all();
  delay_thread_.join();
}

void AttentionService::Reply(const Call& call, std::function<void()> reply) {
  if (!absl::StartsWith(call.refusal, "participant_") || !call.small_request ||
      config_.quota_refusal_delay_s <= 0) {
    return reply();
  }
  std::lock_guard<std::mutex> lock(mu_);
  delayed_.emplace(Clock::now() + std::chrono::duration_cast<Clock::duration>(
                                      std::chrono::duration<double>(config_.quota_refusal_delay_s)),
                   std::move(reply));
  delayed_cv_.notify_all();
}

void AttentionService::DelayedReplies() {
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

std::shared_ptr<AttentionService::Call> AttentionService::NewCall(
    const char* rpc, grpc::CallbackServerContext* context, const std::string& client_id) {
  auto call = std::make_shared<Call>();
  call->id = next_id_++;
  call->rpc = rpc;
  call->peer = context->peer();
  call->client = client_id.empty() ? call->peer : client_id;
  call->accepted = Clock::now();
  call->stop = std::make_shared<StopToken>(Deadline(context, call->accepted));
  {
    std::lock_guard<std::mutex> lock(mu_);
    live_.insert(call->stop.get());
  }
  ++metrics_.inflight;
  return call;
}

absl::Status AttentionService::Identify(grpc::CallbackServerContext* context,
                                        const std::string& client_id, Call& call) {
  call.label = client_id;
  call.limits = config_.participant_limits;
  if (config_.tokens == nullptr) {
    call.role = Role::kAdmin;  // no tokens: no roles, as before tokens existed
    return absl::OkStatus();
  }
  const auto& metadata = context->client_metadata();
  const auto header = metadata.find("authorization");
  const absl::string_view authorization =
      header == metadata.end() ? absl::string_view()
                               : absl::string_view(header->second.data(), header->second.size());
  auto participant = config_.tokens->Authenticate(authorization);
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

absl::Status AttentionService::BeginQuota(Call& call, bool job) {
  std::string reason;
  auto ticket = quotas_.Begin(call.client, call.limits, job, &reason);
  if (!ticket.ok()) {
    call.refusal = reason;
    return ticket.status();
  }
  call.quota = *std::move(ticket);
  return absl::OkStatus();
}

void AttentionService::HeldDevice(const Call& call, double seconds) {
  quotas_.AddDeviceSeconds(call.client, seconds);
  if (call.identified) metrics_.ParticipantDeviceSeconds(call.client, seconds);
}

Task AttentionService::MakeTask(const Call& call) const {
  Task task;
  task.client = call.client;
  task.max_queued = call.limits.max_queued;
  task.max_running = call.limits.max_running;
  return task;
}

void AttentionService::OnCallCancelled(Call& call) {
  // gRPC cancels a call whose deadline passed too; say which it was. gRPC's timer and our
  // steady-clock copy of the deadline can differ by a few ms.
  if (Clock::now() + std::chrono::milliseconds(100) >= call.stop->deadline()) {
    call.stop->RequestStop(absl::DeadlineExceededError("the call's deadline passed"));
  } else {
    call.stop->RequestStop(absl::CancelledError("cancelled by the client"));
  }
}

void AttentionService::Done(Call& call, const absl::Status& work_status) {
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
  if (call.identified) {
    fields.emplace_back("participant", call.client);
    if (!call.label.empty()) fields.emplace_back("client", call.label);
  } else if (call.client != call.peer) {
    fields.emplace_back("client", call.client);
  }
  if (!status.ok()) fields.emplace_back("error", std::string(status.message()));
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

Clock::time_point AttentionService::Deadline(grpc::CallbackServerContext* context,
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

absl::Status AttentionService::Admit() const {
  if (!config_.not_serving_reason.empty()) {
    return absl::UnavailableError(absl::StrCat("not serving: ", config_.not_serving_reason));
  }
  if (draining_) return absl::UnavailableError("server is shutting down; retry on another replica");
  return absl::OkStatus();
}

absl::StatusOr<DeviceWorkers*> AttentionService::PickDevice(int index) const {
  if (index >= 0) {
    for (DeviceWorkers* d : devices_) {
      if (d->index() == index) return d;
    }
    return absl::InvalidArgumentError(
        absl::StrFormat("device: this server has devices 0..%d, got %d",
                        static_cast<int>(devices_.size()) - 1, index));
  }
  if (index < -1) {
    return absl::InvalidArgumentError(
        absl::StrFormat("device: must be a device index or -1 (least busy), got %d", index));
  }
  return *std::min_element(devices_.begin(), devices_.end(),
                           [](auto* a, auto* b) { return a->waiting() < b->waiting(); });
}

void AttentionService::StartDraining() { draining_ = true; }

int AttentionService::WaitIdle(double timeout_s) {
  std::unique_lock<std::mutex> lock(mu_);
  idle_.wait_for(lock, std::chrono::duration<double>(timeout_s),
                 [&] { return metrics_.inflight.load() == 0; });
  return metrics_.inflight.load();
}

void AttentionService::StopAll(const absl::Status& why) {
  std::lock_guard<std::mutex> lock(mu_);
  for (StopToken* stop : live_) stop->RequestStop(why);
}

grpc::ServerUnaryReactor* AttentionService::GetServerInfo(grpc::CallbackServerContext* context,
                                                          const v1::GetServerInfoRequest*,
                                                          v1::ServerInfo* info) {
  auto call = NewCall("GetServerInfo", context, "");
  auto* reactor = context->DefaultReactor();
  context->AddTrailingMetadata(kRequestIdKey, absl::StrCat(call->id));
  if (absl::Status who = Identify(context, "", *call); !who.ok()) {
    Done(*call, who);
    reactor->Finish(ToGrpcStatus(who));
    return reactor;
  }
  info->set_version(config_.version);
  info->set_hostname(config_.hostname);
  info->set_cudnn_version(CudnnVersion());
  info->set_cpu_fallback(config_.cpu_fallback);
  info->set_note(config_.not_serving_reason.empty() ? config_.note : config_.not_serving_reason);
  const auto reference = AttentionProblem::SelfAttention(4, 128, 8, 64, DType::kBFloat16);
  for (const DeviceWorkers* d : devices_) {
    const DeviceInfo& di = d->info();
    info->set_cuda_runtime_version(std::max(info->cuda_runtime_version(), di.cuda_runtime_version));
    info->set_cuda_driver_version(std::max(info->cuda_driver_version(), di.cuda_driver_version));
    v1::DeviceInfo* out = info->add_devices();
    out->set_index(d->index());
    out->set_kind(di.kind == DeviceKind::kCuda ? "cuda" : "cpu");
    out->set_name(di.name);
    out->set_compute_capability(di.ComputeCapability());
    out->set_total_memory_bytes(di.total_memory_bytes);
    out->set_arena_bytes(d->arena_capacity() * d->workers());
    out->set_workers(d->workers());
    out->set_multiprocessors(di.multiprocessors);
    for (DType dtype : {DType::kFloat32, DType::kBFloat16, DType::kFloat16}) {
      AttentionProblem p = reference;
      p.dtype = dtype;
      for (const auto& v : BackendRegistry::Default().Verdicts(p, di)) {
        v1::BackendVerdict* b = info->add_backends();
        b->set_backend(v.backend->name());
        b->set_description(v.backend->description());
        b->set_device(d->index());
        b->set_dtype(DTypeToProto(dtype));
        b->set_supported(v.support.ok());
        b->set_reason(std::string(v.support.message()));
        b->set_takes_fp8_recipe(v.backend->takes_fp8_recipe());
        b->set_full_precision_peer(v.backend->full_precision_peer());
      }
    }
  }
  v1::Limits* limits = info->mutable_limits();
  limits->set_max_request_bytes(config_.limits.max_request_bytes);
  limits->set_queue_depth(devices_.empty() ? 0 : devices_.front()->depth_limit());
  limits->set_max_cases(config_.limits.max_cases);
  limits->set_max_warmup(config_.limits.max_warmup);
  limits->set_max_repeats(config_.limits.max_repeats);
  limits->set_max_case_budget_seconds(config_.limits.max_case_budget_s);
  limits->set_default_deadline_seconds(config_.default_deadline_s);
  limits->set_max_call_seconds(config_.admission.max_call_seconds);
  limits->set_max_job_seconds(config_.admission.max_job_seconds);
  limits->set_max_host_bytes(config_.admission.max_host_bytes);
  for (const std::string& name : SuiteNames()) {
    info->add_suites(name);
    v1::Suite* suite = info->add_suite_cases();
    suite->set_name(name);
    // Every device of a server is of one kind (the GPUs, or the CPU fallback).
    auto cases = ExpandSuite(name, devices_.empty() ? CpuDeviceInfo() : devices_.front()->info());
    for (const BenchCase& c : cases.value_or(std::vector<BenchCase>{})) {
      *suite->add_cases() = CaseToProto(c);
    }
  }
  Done(*call, absl::OkStatus());
  reactor->Finish(grpc::Status::OK);
  return reactor;
}

grpc::ServerUnaryReactor* AttentionService::Attend(grpc::CallbackServerContext* context,
                                                   const v1::AttendRequest* request,
                                                   v1::AttendResponse* response) {
  auto call = NewCall("Attend", context, request->client_id());
  call->small_request = request->ByteSizeLong() <= 64 * 1024;
  auto* reactor = new AttendReactor(call);
  StartAttend(context, call, *request, absl::OkStatus(), response,
              [reactor](const absl::Status& status) { reactor->Finish(ToGrpcStatus(status)); });
  return reactor;
}

void AttentionService::StartAttend(grpc::CallbackServerContext* context, std::shared_ptr<Call> call,
                                   const v1::AttendRequest& attend, const absl::Status& converted,
                                   v1::AttendResponse* response,
                                   std::function<void(const absl::Status&)> reply) {
  const v1::AttendRequest* request = &attend;
  context->AddTrailingMetadata(kRequestIdKey, absl::StrCat(call->id));
  const auto finish = [this, call, response, reply = std::move(reply)](const absl::Status& status) {
    Reply(*call, [this, call, response, reply, status] {
      response->mutable_timings()->set_queue_seconds(call->queue_s);
      response->mutable_timings()->set_device_seconds(call->device_s);
      response->mutable_timings()->set_total_seconds(Seconds(Clock::now() - call->accepted));
      Done(*call, status);
      reply(status);
    });
  };
  // Refused with `status` before running; `reason` labels attn_refusals_total.
  const auto refuse = [&](const char* reason, const absl::Status& status) {
    call->refusal = reason;
    finish(status);
  };
  if (auto s = Identify(context, request->client_id(), *call); !s.ok()) return finish(s);
  if (auto s = Admit(); !s.ok()) return finish(s);
  // The participant's quotas first: a flood over them is refused at the least cost.
  if (auto s = BeginQuota(*call, /*job=*/false); !s.ok()) return finish(s);
  if (!converted.ok()) return finish(converted);
  auto problem = ValidateAttend(*request, config_.limits);
  if (!problem.ok()) return finish(problem.status());
  call->shape = problem->ToString();
  DeviceWorkers* device = *PickDevice(-1);
  const std::string name =
      request->backend().empty() ? std::string(kAutoBackend) : request->backend();
  auto backend = BackendRegistry::Default().Resolve(name, *problem, device->info());
  if (!backend.ok()) return finish(backend.status());
  call->backend = (*backend)->name();
  const AttentionProblem p = *problem;
  const int64_t e = DTypeSize(p.dtype);
  const int64_t qb = QueryElements(p) * e, kvb = KeyValueElements(p) * e;
  // Cost admission before the request takes a queue slot: device time, device memory (inputs
  // and output must fit one worker's arena; the workspace is added on the worker), the
  // participant's quotas, host memory (the request as received and the reply).
  const Throughputs& rates = device->throughputs();
  const Cost cost = CallCost(p, **backend, rates);
  if (auto s = AdmitCall(call->rpc, p, **backend, cost, rates, config_.admission); !s.ok()) {
    return refuse("call_cost", s);
  }
  call->estimated_s = cost.seconds;
  if (2 * qb + 2 * kvb > device->arena_capacity()) {
    return refuse(
        "device_memory",
        absl::ResourceExhaustedError(absl::StrFormat(
            "needs %d bytes for q, k, v and out alone, but a worker's arena on device %d holds %d; "
            "use a smaller problem or a server with a larger --arena_mib",
            2 * qb + 2 * kvb, device->index(), device->arena_capacity())));
  }
  auto host = host_budget_.Reserve(
      static_cast<int64_t>(request->ByteSizeLong()) + (request->omit_output() ? 0 : qb), call->rpc);
  if (!host.ok()) return refuse("host_memory", host.status());
  call->host = *std::move(host);
  // The call on a worker: everything up to the reply, as one status.
  const auto run = [this, request, response, call, p, qb, kvb, device,
                    piece_flops = PieceFlops(**backend, p.dtype, rates),
                    b = *backend](DeviceContext& dc) -> absl::Status {
    // Cancelled, expired or shut down while queued: answered without touching the device.
    if (absl::Status s = call->stop->Check(); !s.ok()) {
      if (absl::IsDeadlineExceeded(s)) {
        return absl::DeadlineExceededError(absl::StrFormat(
            "deadline passed after %.3f s in the queue; retry with a longer deadline",
            call->queue_s));
      }
      return absl::IsCancelled(s) ? absl::CancelledError("cancelled by the client while queued")
                                  : s;
    }
    // The call in pieces of ~kPieceSeconds that check the stop token: a cancel, the deadline
    // or the shutdown ends it within about two pieces, the device idle and the arena freed.
    RunOptions run_options;
    run_options.stop = call->stop.get();
    run_options.max_piece_flops = piece_flops;
    run_options.host_threads = config_.host_threads;
    // Memory admission: inputs, output and the workspace the call takes (its pieces'), before
    // anything launches.
    auto workspace = CallWorkspaceBytes(*b, p, dc, run_options);
    if (!workspace.ok()) return workspace.status();
    const int64_t need = 2 * qb + 2 * kvb + *workspace;
    const int64_t free = dc.arena().capacity() - dc.arena().bytes_in_use();
    if (need > free) {
      return absl::ResourceExhaustedError(absl::StrFormat(
          "needs %d bytes on device %d (q, k, v and out %d + %s workspace %d) but its arena has "
          "%d free; use a smaller problem, another backend, or a larger --arena_mib",
          need, device->index(), 2 * qb + 2 * kvb, b->name(), *workspace, free));
    }
    auto buffers = AllocatePacked(p, dc);
    if (!buffers.ok()) return buffers.status();
    const AttentionTensors& t = buffers->tensors;
    absl::Status s;
    if (request->inputs_case() == v1::AttendRequest::kTensors) {
      const std::string* src[3] = {&request->tensors().q(), &request->tensors().k(),
                                   &request->tensors().v()};
      void* dst[3] = {t.q.data, t.k.data, t.v.data};
      for (int i = 0; i < 3 && s.ok(); ++i)
        s = dc.CopyToDevice(dst[i], src[i]->data(), src[i]->size());
    } else {
      s = FillInputs(dc, p, t, request->generated().seed(), call->stop.get());
    }
    if (!s.ok()) return s;
    auto ms = TimeOnDevice(
        dc, [&] { return RunAttention(*b, p, t, dc, run_options); }, 0, 1);
    if (!ms.ok()) return ms.status();
    call->device_s = ms->front() / 1e3;
    metrics_.DeviceTime(b->name(), std::string(DTypeName(p.dtype)), p.causal, call->device_s);
    if (!request->omit_output()) {
      response->mutable_output()->resize(static_cast<size_t>(qb));
      if (s = dc.CopyToHost(response->mutable_output()->data(), t.out.data, qb); !s.ok()) return s;
    }
    response->set_backend(b->name());
    response->set_device(device->index());
    response->set_hostname(config_.hostname);
    return absl::OkStatus();
  };
  Task task = MakeTask(*call);
  task.run = [this, call, finish, run, device](DeviceContext& dc, Clock::time_point queued) {
    const auto start = Clock::now();
    call->queue_s = Seconds(start - queued);
    metrics_.QueueWait(device->index(), call->queue_s);
    const absl::Status status = run(dc);
    HeldDevice(*call, Seconds(Clock::now() - start));
    finish(status);
  };
  if (auto s = device->Submit(std::move(task)); !s.ok()) {
    return refuse(SubmitRefusal(s), s);
  }
}

grpc::ServerWriteReactor<v1::RunBenchmarkEvent>* AttentionService::RunBenchmark(
    grpc::CallbackServerContext* context, const v1::RunBenchmarkRequest* request) {
  auto job = std::make_shared<BenchmarkJob>(this, context,
                                            NewCall("RunBenchmark", context, request->client_id()));
  job->Start(job, *request);
  return job.get();
}

}  // namespace attn::server
