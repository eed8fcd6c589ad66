// GetServerInfo: what this server runs on, which backends support what, its limits and suites.
#include "absl/strings/str_cat.h"
#include "attn/bench.h"
#include "attn/registry.h"
#include "proto/convert.h"
#include "proto/status.h"
#include "server/service.h"

namespace attn::server {
namespace v1 = attention::v1;

grpc::ServerUnaryReactor* AttentionService::GetServerInfo(grpc::CallbackServerContext* context,
                                                          const v1::GetServerInfoRequest*,
                                                          v1::ServerInfo* info) {
  auto call = calls_.Begin("GetServerInfo", context);
  auto* reactor = context->DefaultReactor();
  if (absl::Status who = calls_.Identify(context, "", *call); !who.ok()) {
    calls_.Done(*call, who);
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
  calls_.Done(*call, absl::OkStatus());
  reactor->Finish(grpc::Status::OK);
  return reactor;
}

}  // namespace attn::server
