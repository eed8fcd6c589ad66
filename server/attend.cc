#include "server/attend.h"

#include "absl/strings/str_format.h"
#include "attn/attention.h"
#include "attn/inputs.h"
#include "attn/plan.h"
#include "attn/registry.h"
#include "attn/timing.h"

namespace attn::server {
namespace v1 = attention::v1;

void Attends::Start(grpc::CallbackServerContext* context, std::shared_ptr<Call> call,
                    const v1::AttendRequest& attend, const absl::Status& converted,
                    int64_t held_bytes, int output_copies, v1::AttendResponse* response,
                    std::function<void(const absl::Status&)> reply) {
  const v1::AttendRequest* request = &attend;
  Calls& calls = calls_;
  const auto finish = [&calls, call, response,
                       reply = std::move(reply)](const absl::Status& status) {
    calls.Reply(*call, [&calls, call, response, reply, status] {
      response->mutable_timings()->set_queue_seconds(call->queue_s);
      response->mutable_timings()->set_device_seconds(call->device_s);
      response->mutable_timings()->set_total_seconds(Seconds(Clock::now() - call->accepted));
      calls.Done(*call, status);
      reply(status);
    });
  };
  // Refused with `status` before running; `reason` labels attn_refusals_total.
  const auto refuse = [&](const char* reason, const absl::Status& status) {
    call->refusal = reason;
    finish(status);
  };
  if (auto s = calls.Identify(context, request->client_id(), *call); !s.ok()) return finish(s);
  if (auto s = calls.Admit(); !s.ok()) return finish(s);
  // The participant's quotas first: a flood over them is refused at the least cost.
  if (auto s = calls.BeginQuota(*call, /*job=*/false); !s.ok()) return finish(s);
  if (!converted.ok()) return finish(converted);
  // The request as held first: one too large for the participant's share is refused before
  // validation copies any of it.
  auto held =
      calls.ReserveHost(*call, held_bytes, absl::StrFormat("%s (the request as held)", call->rpc));
  if (!held.ok()) return finish(held.status());
  call->host = *std::move(held);
  const ServiceConfig& config = calls.config();
  auto problem = ValidateAttend(*request, config.limits);
  if (!problem.ok()) return finish(problem.status());
  call->shape = problem->ToString();
  DeviceWorkers* device = *PickDevice(devices_, -1);
  const std::string name =
      request->backend().empty() ? std::string(kAutoBackend) : request->backend();
  auto backend = BackendRegistry::Default().Resolve(name, *problem, device->info());
  if (!backend.ok()) return finish(backend.status());
  call->backend = (*backend)->name();
  // The engine's plan of the call, in pieces of ~kPieceSeconds at the backend's measured rate.
  const Throughputs& rates = device->throughputs();
  // One copy of it for the call's life, shared by the steps below (its kv_lens are charged).
  const auto shared_plan = std::make_shared<const CallPlan>(
      PlanCall(**backend, *problem, PieceFlops(**backend, problem->dtype, rates)));
  const CallPlan& plan = *shared_plan;
  // Cost admission before the request takes a queue slot: device time, device memory (the
  // tensors must fit one worker's arena; the workspace is added on the worker), host memory
  // (the request as held and the reply's copies of the output).
  const Cost cost = CallCost(plan, rates);
  if (auto s = AdmitCall(call->rpc, plan, cost, rates, config.admission); !s.ok()) {
    return refuse("call_cost", s);
  }
  call->estimated_s = cost.seconds;
  if (plan.tensor_bytes > device->arena_capacity()) {
    return refuse("device_memory",
                  absl::ResourceExhaustedError(absl::StrFormat(
                      "needs %d bytes for q, k, v and out alone, but a worker's arena on device %d "
                      "holds %d; use a smaller problem or a server with a larger --arena_mib",
                      plan.tensor_bytes, device->index(), device->arena_capacity())));
  }
  const int64_t reply_bytes = request->omit_output() ? 0 : output_copies * plan.output_bytes;
  const int64_t plan_bytes =
      static_cast<int64_t>(sizeof(CallPlan) + plan.problem.kv_lens.capacity() * sizeof(int32_t));
  auto host = calls.ReserveHost(*call, plan_bytes + reply_bytes,
                                absl::StrFormat("%s (its plan and its reply)", call->rpc));
  if (!host.ok()) return finish(host.status());
  call->host.Merge(*std::move(host));
  // The call on a worker: everything up to the reply, as one status.
  const auto run = [request, response, call, shared_plan, device,
                    host_threads = config.host_threads,
                    hostname = config.hostname](DeviceContext& dc) -> absl::Status {
    const CallPlan& planned = *shared_plan;
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
    const Backend& b = *planned.backend;
    const AttentionProblem& p = planned.problem;
    // The call in pieces of ~kPieceSeconds that check the stop token: a cancel, the deadline
    // or the shutdown ends it within about two pieces, the device idle and the arena freed.
    RunOptions run_options;
    run_options.stop = call->stop.get();
    run_options.max_piece_flops = planned.max_piece_flops;
    run_options.host_threads = host_threads;
    // Memory admission: the plan's tensors and the workspace the call takes (its pieces'),
    // before anything launches.
    auto workspace = CallWorkspaceBytes(b, p, dc, run_options);
    if (!workspace.ok()) return workspace.status();
    const int64_t need = planned.tensor_bytes + *workspace;
    const int64_t free = dc.arena().capacity() - dc.arena().bytes_in_use();
    if (need > free) {
      return absl::ResourceExhaustedError(absl::StrFormat(
          "needs %d bytes on device %d (q, k, v and out %d + %s workspace %d) but its arena has "
          "%d free; use a smaller problem, another backend, or a larger --arena_mib",
          need, device->index(), planned.tensor_bytes, b.name(), *workspace, free));
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
        dc, [&] { return RunAttention(b, p, t, dc, run_options); }, 0, 1);
    if (!ms.ok()) return ms.status();
    call->device_s = ms->front() / 1e3;
    if (!request->omit_output()) {
      response->mutable_output()->resize(static_cast<size_t>(planned.output_bytes));
      if (s = dc.CopyToHost(response->mutable_output()->data(), t.out.data, planned.output_bytes);
          !s.ok())
        return s;
    }
    response->set_backend(b.name());
    response->set_device(device->index());
    response->set_hostname(hostname);
    return absl::OkStatus();
  };
  Task task = calls.MakeTask(*call);
  task.run = [&calls, call, finish, run, device, shared_plan](DeviceContext& dc,
                                                              Clock::time_point queued) {
    const CallPlan& planned = *shared_plan;
    const auto start = Clock::now();
    call->queue_s = Seconds(start - queued);
    calls.metrics().QueueWait(device->index(), call->queue_s);
    const absl::Status status = run(dc);
    if (status.ok()) {
      calls.metrics().DeviceTime(planned.backend->name(),
                                 std::string(DTypeName(planned.problem.dtype)),
                                 planned.problem.causal, call->device_s);
    }
    calls.HeldDevice(*call, Seconds(Clock::now() - start));
    finish(status);
  };
  const char* reason = nullptr;
  if (auto s = device->Submit(std::move(task), /*continuation=*/false, &reason); !s.ok()) {
    return refuse(reason, s);
  }
}

}  // namespace attn::server
