// attn-client info and health, and the options every subcommand shares.
#include <google/protobuf/util/json_util.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "attention/v1/attention.grpc.pb.h"
#include "client/commands.h"
#include "client/report.h"
#include "client/text_table.h"
#include "grpc/health/v1/health.grpc.pb.h"

namespace attn::client {

namespace v1 = ::attention::v1;

int Fail(int code, const std::string& message) {
  std::fprintf(stderr, "attn-client: %s\n", message.c_str());
  return code;
}

std::vector<OptionSpec> CommonSpecs() {
  const char* env = std::getenv("ATTN_TARGET");
  const char* ca = std::getenv("ATTN_TLS_CA_FILE");
  return {
      {"target", "ADDR", env != nullptr && *env ? env : "localhost:50051",
       "host:port, a comma list host:port,host:port, or dns:///name:port (round_robin over the "
       "addresses; $ATTN_TARGET sets the default)"},
      {"timeout", "SECONDS", "0",
       "deadline of the whole command; 0: 60 s per call for info/health/attend, none for bench"},
      {"format", "FORMAT", "table", "table, csv or json (csv: bench only)"},
      {"client_id", "ID", "",
       "a label for your calls (with tokens the server queues by your token's participant; "
       "without, by this or the connection's address)"},
      {"tls", "", "false", "speak TLS, trusting the system's root certificates"},
      {"tls_ca_file", "FILE", ca != nullptr ? ca : "",
       "speak TLS, trusting the CA certificate (PEM) in FILE, e.g. the workshop's cohort-ca.crt "
       "($ATTN_TLS_CA_FILE sets the default)"},
      {"token", "TOKEN", "",
       "bearer token sent with every call (default: $ATTN_TOKEN); never written to --out's files"},
      {"insecure_token", "", "false",
       "send the token even over plaintext to a target that is not loopback (a private network)"},
  };
}

std::vector<OptionSpec> InfoSpecs() { return {}; }

std::vector<OptionSpec> HealthSpecs() {
  return {{"service", "NAME", "",
           "one service to check; default: the server (\"\") and attention.v1.AttentionService"}};
}

namespace {

std::chrono::system_clock::time_point Deadline(const CommonOptions& common) {
  return std::chrono::system_clock::now() +
         std::chrono::milliseconds(
             static_cast<int64_t>((common.timeout_s > 0 ? common.timeout_s : 60) * 1e3));
}

}  // namespace

int RunInfo(const CommonOptions& common, const ParsedArgs&) {
  auto stub = v1::AttentionService::NewStub(MakeChannel(common.target));
  grpc::ClientContext ctx;
  ctx.set_deadline(Deadline(common));
  v1::ServerInfo info;
  const grpc::Status status = stub->GetServerInfo(&ctx, v1::GetServerInfoRequest(), &info);
  if (!status.ok()) return Fail(kExitFailed, DescribeRpcError(status, ctx, common.target.tls));
  if (common.format == "json") {
    google::protobuf::util::JsonPrintOptions options;
    options.add_whitespace = true;
    options.preserve_proto_field_names = true;
    options.always_print_primitive_fields = true;
    std::string json;
    (void)google::protobuf::util::MessageToJsonString(info, &json, options);
    std::printf("%s", json.c_str());
    return kExitOk;
  }
  if (common.format == "csv") return Fail(kExitUsage, "--format=csv: info prints table or json");
  std::printf("server:   attn-server %s on %s (%s)\n", info.version().c_str(),
              info.hostname().c_str(), ctx.peer().c_str());
  std::printf("CUDA:     runtime %s, driver supports %s; cuDNN %s\n",
              info.cuda_runtime_version() ? absl::StrCat(info.cuda_runtime_version()).c_str() : "-",
              info.cuda_driver_version() ? absl::StrCat(info.cuda_driver_version()).c_str() : "-",
              info.cudnn_version().empty() ? "-" : info.cudnn_version().c_str());
  if (info.cpu_fallback() || !info.note().empty())
    std::printf("note:     %s\n", info.note().c_str());
  std::printf("suites:   %s\n\n", absl::StrJoin(info.suites(), ", ").c_str());
  TextTable devices;
  devices.title = "Devices";
  devices.headers = {"Index",        "Kind",        "Name",    "CC",
                     "Memory (GiB)", "Arena (GiB)", "Workers", "SMs/threads"};
  devices.right_aligned = {true, false, false, true, true, true, true, true};
  for (const auto& d : info.devices()) {
    devices.rows.push_back(
        {absl::StrCat(d.index()), d.kind(), d.name(),
         d.compute_capability() ? absl::StrFormat("%.1f", d.compute_capability() / 10.0) : "-",
         d.total_memory_bytes() > 0 ? absl::StrFormat("%.1f", d.total_memory_bytes() / 1073741824.0)
                                    : "-",
         absl::StrFormat("%.2f", d.arena_bytes() / 1073741824.0), absl::StrCat(d.workers()),
         absl::StrCat(d.multiprocessors())});
  }
  std::printf("%s\n", devices.Render().c_str());
  TextTable backends;
  backends.title = "Backends (verdicts for the codelab's default shape per dtype)";
  backends.headers = {"Backend", "Device", "Dtype", "Verdict"};
  for (const auto& b : info.backends()) {
    backends.rows.push_back({b.backend(), absl::StrCat(b.device()),
                             absl::AsciiStrToLower(v1::DType_Name(b.dtype())),
                             b.supported() ? "ok: " + b.description() : "no: " + b.reason()});
  }
  std::printf("%s\n", backends.Render().c_str());
  const v1::Limits& l = info.limits();
  std::printf(
      "limits:   request %.0f MiB (q+k+v, and the output), queue %d per device, %d cases "
      "per job, warmup <= %d, repeats <= %d, case budget <= %.0f s, default deadline %.0f s\n",
      l.max_request_bytes() / 1048576.0, l.queue_depth(), l.max_cases(), l.max_warmup(),
      l.max_repeats(), l.max_case_budget_seconds(), l.default_deadline_seconds());
  return kExitOk;
}

int RunHealth(const CommonOptions& common, const ParsedArgs& args) {
  auto stub = grpc::health::v1::Health::NewStub(MakeChannel(common.target));
  std::vector<std::string> services = {"", "attention.v1.AttentionService"};
  if (args.Has("service")) services = {args.Get("service")};
  bool all_serving = true;
  for (const auto& service : services) {
    grpc::ClientContext ctx;
    ctx.set_deadline(Deadline(common));
    grpc::health::v1::HealthCheckRequest req;
    req.set_service(service);
    grpc::health::v1::HealthCheckResponse resp;
    const grpc::Status status = stub->Check(&ctx, req, &resp);
    const std::string label = service.empty() ? "server" : service;
    if (!status.ok()) {
      std::printf("%s: %s\n", label.c_str(),
                  DescribeRpcError(status, ctx, common.target.tls).c_str());
      all_serving = false;
      continue;
    }
    const std::string state =
        grpc::health::v1::HealthCheckResponse::ServingStatus_Name(resp.status());
    std::printf("%s: %s (%s)\n", label.c_str(), state.c_str(), ctx.peer().c_str());
    all_serving = all_serving && resp.status() == grpc::health::v1::HealthCheckResponse::SERVING;
  }
  return all_serving ? kExitOk : kExitFailed;
}

}  // namespace attn::client
