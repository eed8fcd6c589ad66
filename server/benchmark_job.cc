#include "server/benchmark_job.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "attn/registry.h"
#include "proto/convert.h"
#include "proto/status.h"

namespace attn::server {
namespace v1 = attention::v1;
namespace {

// How often a paused job looks at its stop token (a deadline, a cancel, the shutdown).
constexpr auto kPausedPoll = std::chrono::milliseconds(100);

// Host memory one event can hold: a CaseResult with its case, strings bounded by the text rules.
constexpr int64_t kEventBytes = 4096;

}  // namespace

BenchmarkJob* BenchmarkJob::Start(Calls& calls, const std::vector<DeviceWorkers*>& devices,
                                  grpc::CallbackServerContext* context,
                                  const v1::RunBenchmarkRequest& request) {
  auto job = std::shared_ptr<BenchmarkJob>(
      new BenchmarkJob(calls, context, calls.Begin("RunBenchmark", context)));
  job->self_ = job;
  job->Begin(devices, request);
  return job.get();
}

void BenchmarkJob::Begin(const std::vector<DeviceWorkers*>& devices,
                         const v1::RunBenchmarkRequest& request) {
  if (auto who = calls_.Identify(context_, request.client_id(), *call_); !who.ok()) return End(who);
  absl::Status s = calls_.Admit();
  auto device = s.ok() ? PickDevice(devices, request.device()) : s;
  if (!device.ok()) return End(device.status());
  device_ = *device;
  const ServiceConfig& config = calls_.config();
  auto options = BenchOptionsFromProto(request.options(), config.limits);
  if (!options.ok()) return End(options.status());
  options_ = *options;
  options_.run.host_threads = config.host_threads;
  auto cases = BenchCasesFromRequest(request, device_->info(), config.limits);
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
  if (auto quota = calls_.BeginQuota(*call_, /*job=*/true); !quota.ok()) return End(quota);
  if (auto admitted = AdmitCost(static_cast<int64_t>(request.SpaceUsedLong())); !admitted.ok())
    return End(admitted);
  v1::RunBenchmarkEvent started;
  started.mutable_started()->set_total_cases(static_cast<int>(cases_.size()));
  started.mutable_started()->set_device(device_->index());
  started.mutable_started()->set_device_name(device_->info().name);
  started.mutable_started()->set_hostname(config.hostname);
  Send(std::move(started));
  if (auto q = Queue(0, false); !q.ok()) End(q);
}

absl::Status BenchmarkJob::AdmitCost(int64_t request_bytes) {
  const Throughputs& t = device_->throughputs();
  const AdmissionLimits& limits = calls_.config().admission;
  Cost total;
  int64_t check_bytes = 0, cases_bytes = 0;
  plans_.reserve(cases_.size());
  for (size_t i = 0; i < cases_.size(); ++i) {
    const BenchCase& c = cases_[i];
    cases_bytes +=
        static_cast<int64_t>(sizeof(BenchCase) + c.section.capacity() + c.backend.capacity() +
                             c.problem.kv_lens.capacity() * sizeof(int32_t));
    // Each case's pieces are sized to its backend's measured rate. A case no backend can run
    // costs nothing: its plan's error is its result.
    BenchOptions options = options_;
    auto backend = BackendRegistry::Default().Resolve(c.backend, c.problem, device_->info());
    if (backend.ok()) options.run.max_piece_flops = PieceFlops(**backend, c.problem.dtype, t);
    plans_.push_back(PlanCase(c, options, device_->info()));
    if (!plans_.back().ok()) continue;
    const CasePlan& plan = *plans_.back();
    // The plan's calls each hold the case's problem, its kv_lens included.
    for (const auto* call : {&plan.unmasked, &plan.full_precision_peer, &plan.reference}) {
      cases_bytes += static_cast<int64_t>(sizeof(CallPlan)) +
                     (call->has_value() ? 1 : 0) *
                         static_cast<int64_t>(c.problem.kv_lens.size() * sizeof(int32_t));
    }
    cases_bytes += static_cast<int64_t>(c.problem.kv_lens.size() * sizeof(int32_t));
    const Cost cost = CaseCost(plan, t);
    const std::string what = absl::StrFormat("cases[%d] (%s)", i, c.section);
    if (auto s = AdmitCall(what, plan.call, cost, t, limits); !s.ok()) {
      call_->refusal = "call_cost";
      return s;
    }
    total.flops += cost.flops;
    total.bytes += cost.bytes;
    total.seconds += cost.seconds;
    check_bytes = std::max(check_bytes, cost.host_bytes);  // one case runs at a time
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
  const int64_t held = request_bytes + cases_bytes + check_bytes +
                       static_cast<int64_t>(plans_.capacity() * sizeof(plans_[0])) +
                       (kMaxUnreadEvents + 2) * kEventBytes;
  auto host = calls_.ReserveHost(*call_, held,
                                 "the job (its request, cases, numerics checks and unread events)");
  if (!host.ok()) return host.status();
  call_->host = *std::move(host);
  return absl::OkStatus();
}

absl::Status BenchmarkJob::Queue(size_t index, bool continuation) {
  Task task = calls_.MakeTask(*call_);
  task.run = [self = self_, index](DeviceContext& context, Clock::time_point queued) {
    const auto start = Clock::now();
    self->RunCase(context, queued, index);
    self->calls_.HeldDevice(*self->call_, Seconds(Clock::now() - start));
  };
  const char* reason = nullptr;
  absl::Status s = device_->Submit(std::move(task), continuation, &reason);
  if (!s.ok()) call_->refusal = reason;
  return s;
}

void BenchmarkJob::RunCase(DeviceContext& context, Clock::time_point queued, size_t index) {
  const double wait = Seconds(Clock::now() - queued);
  call_->queue_s += wait;
  calls_.metrics().QueueWait(device_->index(), wait);
  const int total = static_cast<int>(cases_.size());
  if (absl::Status s = call_->stop->Check(); !s.ok()) return End(Stopped(s, index, total));
  const BenchCase& c = cases_[index];
  const int job_index = job_indices_[index];
  v1::RunBenchmarkEvent started;
  started.mutable_case_started()->set_index(job_index);
  started.mutable_case_started()->set_total(job_total_);
  *started.mutable_case_started()->mutable_case_() = CaseToProto(c);
  Send(std::move(started));

  // The case's seed in the whole job; the plan admitted for it.
  const BenchResult r = RunPlannedCase(
      c, plans_[index], options_, CaseSeed(options_.seed, job_index), context, call_->stop.get());
  calls_.metrics().BenchmarkCase(r.backend, CodeName(r.status.code()));
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
  Next(index + 1);
}

void BenchmarkJob::Next(size_t index) {
  if (index == cases_.size()) {
    v1::RunBenchmarkEvent summary;
    auto* sm = summary.mutable_summary();
    sm->set_total_cases(static_cast<int>(cases_.size()));
    sm->set_ok(ok_);
    sm->set_unsupported(unsupported_);
    sm->set_failed(failed_);
    sm->set_wall_seconds(Seconds(Clock::now() - call_->accepted));
    Send(std::move(summary));
    return End(absl::OkStatus());
  }
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (static_cast<int>(pending_.size()) >= kMaxUnreadEvents && !end_requested_) {
      paused_at_ = index + 1;
      calls_.At(Clock::now() + kPausedPoll, [weak = std::weak_ptr<BenchmarkJob>(self_)] {
        if (auto job = weak.lock()) job->PausedPastDeadline();
      });
      return;
    }
  }
  if (auto s = Queue(index, true); !s.ok()) End(s);
}

void BenchmarkJob::PausedPastDeadline() {
  std::lock_guard<std::mutex> lock(mu_);
  if (paused_at_ == 0 || done_ || end_requested_) return;
  if (call_->stop->Check().ok()) {
    calls_.At(Clock::now() + kPausedPoll, [weak = std::weak_ptr<BenchmarkJob>(self_)] {
      if (auto job = weak.lock()) job->PausedPastDeadline();
    });
    return;
  }
  // Stopped while the reader is behind: its write may never complete, so the call is
  // cancelled; OnWriteDone(false) then ends the job.
  context_->TryCancel();
}

void BenchmarkJob::OnWriteDone(bool ok) {
  std::unique_lock<std::mutex> lock(mu_);
  // Finishing the call below may run OnDone, which lets go of self_.
  const std::shared_ptr<BenchmarkJob> keep = self_;
  pending_.pop_front();
  if (!ok) {  // the client is gone: no further write can succeed
    call_->stop->RequestStop(absl::CancelledError("the client went away"));
    pending_.clear();
  }
  // A paused job goes on once the reader has taken half of what waited.
  size_t resume = 0;
  if (paused_at_ > 0 && (!ok || static_cast<int>(pending_.size()) < kMaxUnreadEvents / 2)) {
    resume = paused_at_;
    paused_at_ = 0;
  }
  if (!pending_.empty()) {
    const v1::RunBenchmarkEvent* next = &pending_.front();
    lock.unlock();
    StartWrite(next);
  } else {
    writing_ = false;
    FinishIfEnded(lock);
  }
  if (lock.owns_lock()) lock.unlock();
  if (resume == 0) return;
  const size_t index = resume - 1;
  if (absl::Status s = call_->stop->Check(); !s.ok()) {
    End(Stopped(s, index, static_cast<int>(cases_.size())));
  } else if (s = Queue(index, true); !s.ok()) {
    End(s);
  }
}

void BenchmarkJob::OnDone() {
  std::shared_ptr<BenchmarkJob> self;
  {
    std::lock_guard<std::mutex> lock(mu_);
    done_ = true;
    self.swap(self_);  // the tasks' references keep the object alive until they return
  }
}

v1::RunBenchmarkEvent BenchmarkJob::ResultEvent(const BenchResult& r, int index, int total) const {
  v1::RunBenchmarkEvent event;
  v1::CaseResult* out = event.mutable_result();
  out->set_index(index);
  out->set_total(total);
  *out->mutable_case_() = CaseToProto(r.bench_case);
  out->set_backend(r.backend);
  out->set_status(CodeNumber(r.status.code()));
  out->set_message(BoundedMessage(r.status.message()));
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
  out->set_hostname(calls_.config().hostname);
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

absl::Status BenchmarkJob::Stopped(const absl::Status& why, size_t done, int total) {
  if (absl::IsDeadlineExceeded(why)) {
    return absl::DeadlineExceededError(
        absl::StrFormat("deadline passed after %d of %d cases; set a longer deadline (at most "
                        "--max_job_seconds) or run fewer cases",
                        done, total));
  }
  return absl::Status(
      why.code(), absl::StrFormat("%s; stopped after %d of %d cases", why.message(), done, total));
}

void BenchmarkJob::Send(v1::RunBenchmarkEvent event) {
  std::unique_lock<std::mutex> lock(mu_);
  if (end_requested_ || !call_->stop->Check().ok()) return;
  pending_.push_back(std::move(event));
  if (writing_) return;
  writing_ = true;
  const v1::RunBenchmarkEvent* next = &pending_.front();
  lock.unlock();
  StartWrite(next);
}

void BenchmarkJob::End(const absl::Status& status) {
  std::unique_lock<std::mutex> lock(mu_);
  if (end_requested_) return;
  end_requested_ = true;
  paused_at_ = 0;
  final_ = status;
  FinishIfEnded(lock);
}

// Leaves `lock` released when it finishes the call.
void BenchmarkJob::FinishIfEnded(std::unique_lock<std::mutex>& lock) {
  if (!end_requested_ || writing_ || finished_) return;
  finished_ = true;
  const absl::Status status = final_;
  lock.unlock();
  calls_.Reply(*call_, [this, status] {
    calls_.Done(*call_, status);
    Finish(ToGrpcStatus(status));
  });
}

}  // namespace attn::server
