#include "server/server.h"

#include <arpa/inet.h>
#include <grpcpp/ext/proto_server_reflection_plugin.h>
#include <grpcpp/grpcpp.h>
#include <grpcpp/health_check_service_interface.h>
#include <grpcpp/resource_quota.h>
#include <grpcpp/security/server_credentials.h>
#include <netinet/in.h>
#include <unistd.h>

#include <chrono>
#include <fstream>
#include <sstream>
#include <thread>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "attn/attention.h"
#include "attn/bench.h"
#include "attn/registry.h"
#include "server/log.h"
#include "server/malformed_body.h"
#include "server/token_gate.h"

#ifndef ATTN_VERSION
#define ATTN_VERSION "0.1.0"
#endif

namespace attn::server {
namespace {

std::string Hostname() {
  char name[256] = {};
  if (gethostname(name, sizeof(name) - 1) != 0) return "unknown";
  return name;
}

// Runs each built-in backend once on a tiny problem so library handles, kernels and plans for
// the common dtypes exist before the first request.
void WarmUp(DeviceContext& context) {
  if (absl::Status s = context.MakeCurrent(); !s.ok()) {
    Log(spdlog::level::warn, "warm-up skipped",
        {{"device", context.info().ToString()}, {"error", std::string(s.message())}});
    return;
  }
  for (DType dtype : {DType::kFloat32, DType::kBFloat16}) {
    const auto p = AttentionProblem::SelfAttention(1, 16, 1, 64, dtype);
    for (const auto& v : BackendRegistry::Default().Verdicts(p, context.info())) {
      if (!v.support.ok()) continue;
      auto buffers = AllocatePacked(p, context);
      if (!buffers.ok()) return;
      absl::Status s = FillInputs(context, p, buffers->tensors, 0);
      if (s.ok()) s = RunAttention(*v.backend, p, buffers->tensors, context);
      if (s.ok()) s = context.Synchronize();
      if (!s.ok()) {
        Log(spdlog::level::warn, "warm-up failed",
            {{"backend", v.backend->name()},
             {"device", context.info().ToString()},
             {"error", std::string(s.message())}});
      }
    }
  }
}

// A PEM file's text, or InvalidArgument naming the flag.
absl::StatusOr<std::string> ReadPem(const std::string& path, const char* flag) {
  std::ifstream f(path, std::ios::binary);
  std::stringstream ss;
  ss << f.rdbuf();
  if (!f || ss.str().find("-----BEGIN") == std::string::npos) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "%s: cannot read a PEM file at '%s' (a certificate or key, '-----BEGIN ...')", flag, path));
  }
  return ss.str();
}

absl::StatusOr<std::shared_ptr<grpc::ServerCredentials>> TlsCredentials(const ServerOptions& o) {
  auto cert = ReadPem(o.tls_cert_file, "--tls_cert_file");
  if (!cert.ok()) return cert.status();
  auto key = ReadPem(o.tls_key_file, "--tls_key_file");
  if (!key.ok()) return key.status();
  grpc::SslServerCredentialsOptions ssl;
  ssl.pem_key_cert_pairs.push_back({*key, *cert});
  if (!o.tls_client_ca_file.empty()) {
    auto ca = ReadPem(o.tls_client_ca_file, "--tls_client_ca_file");
    if (!ca.ok()) return ca.status();
    ssl.pem_root_certs = *ca;
    ssl.client_certificate_request = GRPC_SSL_REQUEST_AND_REQUIRE_CLIENT_CERTIFICATE_AND_VERIFY;
  }
  return grpc::SslServerCredentials(ssl);
}

// A GPU context runs `suite` once (one call per case, numerics checked as a participant's
// notebook asks), so the cuDNN plans and kernels the cohort's first job needs exist before the
// first request: a shared server pays those builds at start-up, not in someone's first run.
// Nothing on the CPU: no plans to build there.
void Prewarm(DeviceContext& context, const std::string& suite) {
  if (context.info().kind != DeviceKind::kCuda) return;
  auto cases = ExpandSuite(suite, context.info());
  if (!cases.ok()) {
    Log(spdlog::level::warn, "prewarm skipped", {{"error", std::string(cases.status().message())}});
    return;
  }
  BenchOptions options;
  options.warmup = 0;
  options.repeats = 1;
  options.check_numerics = true;
  const auto start = std::chrono::steady_clock::now();
  auto results = RunBenchmark(*cases, options, context);
  Log(results.ok() ? spdlog::level::info : spdlog::level::warn, "prewarmed",
      {{"suite", suite},
       {"device", context.info().ToString()},
       {"cases", absl::StrCat(cases->size())},
       {"seconds",
        absl::StrFormat(
            "%.2f",
            std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count())}});
}

// Whether a host:port address listens on loopback only ("127.0.0.1:0", "[::1]:50051",
// "localhost:50051").
// "localhost", an IPv4 address in 127.0.0.0/8 or [::1], each with its port: addresses by number,
// so that a name such as "127.example.com" (any host's, once resolved) does not pass.
bool IsLoopback(const std::string& address) {
  std::string host = address.substr(0, address.rfind(':'));
  if (host == "localhost") return true;
  if (host.size() >= 2 && host.front() == '[' && host.back() == ']') {
    in6_addr v6;
    return inet_pton(AF_INET6, host.substr(1, host.size() - 2).c_str(), &v6) == 1 &&
           IN6_IS_ADDR_LOOPBACK(&v6);
  }
  in_addr v4;
  return inet_pton(AF_INET, host.c_str(), &v4) == 1 && (ntohl(v4.s_addr) >> 24) == 127;
}

}  // namespace

absl::Status ValidateServerOptions(const ServerOptions& o) {
  if (o.workers_per_device < 1 || o.workers_per_device > 64) {
    return absl::InvalidArgumentError(
        absl::StrFormat("--workers_per_device: must be in [1, 64], got %d", o.workers_per_device));
  }
  if (o.arena_bytes < (int64_t{16} << 20)) {
    return absl::InvalidArgumentError(
        absl::StrFormat("--arena_mib: must be >= 16, got %d", o.arena_bytes >> 20));
  }
  if (o.queue_depth < 1 || o.queue_depth > 100000) {
    return absl::InvalidArgumentError(
        absl::StrFormat("--queue_depth: must be in [1, 100000], got %d", o.queue_depth));
  }
  if (!(o.default_deadline_s > 0)) {
    return absl::InvalidArgumentError(
        absl::StrFormat("--default_deadline_s: must be > 0, got %g", o.default_deadline_s));
  }
  if (o.limits.max_request_bytes < 1024 || o.limits.max_request_bytes > (int64_t{2000} << 20)) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "--max_request_mib: must be in [1, 2000] (gRPC messages stay below 2 GiB), got %d MiB",
        o.limits.max_request_bytes >> 20));
  }
  if (!(o.admission.max_call_seconds > 0 && o.admission.max_call_seconds <= 86400)) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "--max_call_seconds: must be in (0, 86400], got %g", o.admission.max_call_seconds));
  }
  if (!(o.admission.max_job_seconds >= o.admission.max_call_seconds &&
        o.admission.max_job_seconds <= 7 * 86400)) {
    return absl::InvalidArgumentError(
        absl::StrFormat("--max_job_seconds: must be in [--max_call_seconds (%g), 604800], got %g",
                        o.admission.max_call_seconds, o.admission.max_job_seconds));
  }
  // One participant's share is at most half the budget; it must hold a largest request and its
  // reply.
  if (o.admission.max_host_bytes < 4 * o.limits.max_request_bytes) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "--max_host_mib: must be at least 4 x --max_request_mib (%d MiB): a participant's share, "
        "at most half of it, holds a largest request and its reply; got %d MiB",
        4 * o.limits.max_request_bytes >> 20, o.admission.max_host_bytes >> 20));
  }
  // gRPC needs room for a whole message of the largest size while it is received and parsed.
  if (o.grpc_memory_bytes < 2 * o.limits.max_request_bytes + (int64_t{16} << 20)) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "--grpc_memory_mib: must be at least 2 x --max_request_mib + 16 (%d MiB), got %d MiB",
        (2 * o.limits.max_request_bytes >> 20) + 16, o.grpc_memory_bytes >> 20));
  }
  if (o.tls_cert_file.empty() != o.tls_key_file.empty()) {
    return absl::InvalidArgumentError(
        "--tls_cert_file and --tls_key_file: give both (the certificate chain and its key) or "
        "neither");
  }
  if (!o.tls_client_ca_file.empty() && o.tls_cert_file.empty()) {
    return absl::InvalidArgumentError(
        "--tls_client_ca_file: client certificates need TLS; give --tls_cert_file and "
        "--tls_key_file too");
  }
  const ParticipantLimits& l = o.participant_limits;
  if (l.max_inflight < 1 || l.max_queued < 1 || l.max_jobs < 1 || l.max_running < 0 ||
      !(l.device_seconds > 0) || !(l.max_job_seconds > 0) || !(o.participant_window_s > 0)) {
    return absl::InvalidArgumentError(
        "--participant_*: max_inflight, max_queued and max_jobs must be >= 1, max_running >= 0, "
        "device_seconds, max_job_seconds and window_s > 0");
  }
  for (const auto& [flag, value] : {std::pair{"--max_connection_idle_s", o.max_connection_idle_s},
                                    {"--max_connection_age_s", o.max_connection_age_s},
                                    {"--max_connection_age_grace_s", o.max_connection_age_grace_s},
                                    {"--keepalive_min_ping_s", o.keepalive_min_ping_s}}) {
    if (!(value >= 1 && value <= 7 * 86400)) {
      return absl::InvalidArgumentError(
          absl::StrFormat("%s: must be in [1, 604800] seconds, got %g", flag, value));
    }
  }
  if (!o.tokens_file.empty() && o.tls_cert_file.empty() && !IsLoopback(o.listen_address)) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "--tokens_file: bearer tokens would cross the network in plaintext on '%s'; give "
        "--tls_cert_file and --tls_key_file, or listen on loopback (127.0.0.1) only",
        o.listen_address));
  }
  if (o.max_streams_per_connection < 1 || o.max_streams_per_connection > 10000) {
    return absl::InvalidArgumentError(
        absl::StrFormat("--max_streams_per_connection: must be in [1, 10000], got %d",
                        o.max_streams_per_connection));
  }
  return absl::OkStatus();
}

absl::StatusOr<std::unique_ptr<Server>> Server::Start(const ServerOptions& options) {
  if (auto s = ValidateServerOptions(options); !s.ok()) return s;
  auto server = std::unique_ptr<Server>(new Server());
  ServiceConfig config;
  config.limits = options.limits;
  config.admission = options.admission;
  config.participant_limits = options.participant_limits;
  if (config.participant_limits.max_running == 0) {
    config.participant_limits.max_running = std::max(1, options.workers_per_device - 1);
  }
  config.participant_window_s = options.participant_window_s;
  // Several workers on the host share its cores: each call of the cpu backend gets its share.
  if (options.workers_per_device > 1) {
    config.host_threads = std::max(
        1, static_cast<int>(std::thread::hardware_concurrency()) / options.workers_per_device);
  }
  if (!options.tokens_file.empty()) {
    auto tokens = TokenRegistry::Open(options.tokens_file, config.participant_limits);
    if (!tokens.ok()) return tokens.status();
    server->tokens_ = *std::move(tokens);
    config.tokens = server->tokens_.get();
  } else if (!IsLoopback(options.listen_address)) {
    Log(spdlog::level::warn,
        "no --tokens_file: anyone who reaches this address may call, and quotas are kept per "
        "network address; give each participant a token outside a trusted network",
        {{"listen", options.listen_address}});
  }
  // With tokens the credentials carry the gate (token_gate.h), which needs a security handshake:
  // TLS, or on loopback gRPC's local credentials (plaintext, for loopback peers only).
  std::shared_ptr<grpc::ServerCredentials> credentials = grpc::InsecureServerCredentials();
  if (!options.tls_cert_file.empty()) {
    auto tls = TlsCredentials(options);
    if (!tls.ok()) return tls.status();
    credentials = *tls;
  } else if (server->tokens_ != nullptr) {
    credentials = grpc::experimental::LocalServerCredentials(LOCAL_TCP);
  }
  config.default_deadline_s = options.default_deadline_s;
  config.version = ATTN_VERSION;
  config.hostname = Hostname();

  // Which devices: the CPU when asked or when this machine has no CUDA at all; the listed or all
  // GPUs otherwise. A GPU that is there but unusable is a not-serving state, not a CPU fallback:
  // a GPU node quietly serving on its CPU would look healthy and be 100x slower.
  std::vector<int> ordinals;
  bool use_cpu = options.devices == "cpu";
  if (!use_cpu) {
    const absl::Status cuda = options.gpu_check ? options.gpu_check() : CudaAvailability();
    if (absl::IsNotFound(cuda) && options.devices.empty()) {
      use_cpu = true;
      config.cpu_fallback = true;
      config.note = absl::StrCat(cuda.message(), ": serving on the cpu backend");
      Log(spdlog::level::warn, config.note);
    } else if (!cuda.ok()) {
      config.not_serving_reason = std::string(cuda.message());
      Log(spdlog::level::err, "GPU unusable: NOT_SERVING", {{"reason", config.not_serving_reason}});
    } else if (options.devices.empty()) {
      for (int i = 0; i < CudaDeviceCount(); ++i) ordinals.push_back(i);
    } else {
      for (absl::string_view part : absl::StrSplit(options.devices, ',')) {
        int ordinal = -1;
        if (!absl::SimpleAtoi(part, &ordinal) || ordinal < 0 || ordinal >= CudaDeviceCount()) {
          return absl::InvalidArgumentError(absl::StrFormat(
              "--devices: '%s' is not a CUDA device of this machine (it has %d); use ordinals, "
              "'cpu', or leave it empty for all",
              part, CudaDeviceCount()));
        }
        ordinals.push_back(ordinal);
      }
    }
  }
  DeviceContextOptions context_options;
  context_options.arena_bytes = options.arena_bytes / options.workers_per_device;
  const int count = use_cpu ? 1 : static_cast<int>(ordinals.size());
  for (int d = 0; d < count; ++d) {
    std::vector<std::unique_ptr<DeviceContext>> contexts;
    Throughputs throughputs;
    for (int w = 0; w < options.workers_per_device; ++w) {
      auto c = use_cpu ? DeviceContext::CreateCpu(context_options)
                       : DeviceContext::CreateCuda(ordinals[d], context_options);
      if (!c.ok()) {
        return absl::Status(c.status().code(),
                            absl::StrFormat("device %d, worker %d: %s (check --arena_mib and "
                                            "--workers_per_device against the device's memory)",
                                            d, w, c.status().message()));
      }
      WarmUp(**c);
      if (!options.prewarm_suite.empty()) Prewarm(**c, options.prewarm_suite);
      if (w == 0) {
        throughputs = Throughputs::Measure(**c);
        Log(spdlog::level::info, "measured for cost admission",
            {{"device", (*c)->info().ToString()}, {"rates", throughputs.ToString()}});
      }
      contexts.push_back(*std::move(c));
    }
    server->devices_.push_back(
        std::make_unique<DeviceWorkers>(d, std::move(contexts), options.queue_depth, throughputs));
  }

  std::vector<DeviceWorkers*> devices;
  for (auto& d : server->devices_) devices.push_back(d.get());
  const int runtime = devices.empty() ? 0 : devices.front()->info().cuda_runtime_version;
  server->metrics_ = std::make_unique<Metrics>(
      devices, config.version,
      runtime == 0 ? "none" : absl::StrFormat("%d.%d", runtime / 1000, runtime % 1000 / 10),
      CudnnVersion().empty() ? "none" : CudnnVersion());
  if (server->tokens_ != nullptr) server->metrics_->ObserveTokensFile(server->tokens_.get());
  if (!options.metrics_address.empty()) {
    auto port = server->metrics_->Expose(options.metrics_address);
    if (!port.ok()) return port.status();
    server->metrics_port_ = *port;
  }
  const bool serving = config.not_serving_reason.empty();
  if (server->tokens_ != nullptr) {
    server->token_gate_ = std::make_shared<TokenGate>(*server->tokens_, *server->metrics_);
    credentials->SetAuthMetadataProcessor(server->token_gate_);
  }
  server->service_ =
      std::make_unique<AttentionService>(std::move(config), devices, *server->metrics_);
  server->inference_ = std::make_unique<InferenceService>(*server->service_);

  grpc::EnableDefaultHealthCheckService(true);
  // The health-only port, built before reflection's plugin is registered (it joins every
  // builder made after it) so that port serves grpc.health.v1 alone.
  if (!options.health_address.empty()) {
    grpc::ServerBuilder health;
    health.AddListeningPort(options.health_address, grpc::InsecureServerCredentials(),
                            &server->health_port_);
    server->health_grpc_ = health.BuildAndStart();
    if (server->health_grpc_ == nullptr || server->health_port_ == 0) {
      return absl::UnavailableError(
          absl::StrFormat("--health_address: cannot listen on '%s' (in use, or not host:port)",
                          options.health_address));
    }
  }
  grpc::reflection::InitProtoReflectionServerBuilderPlugin();
  grpc::ServerBuilder builder;
  builder.AddListeningPort(options.listen_address, credentials, &server->port_);
  builder.RegisterService(server->service_.get());
  builder.RegisterService(server->inference_.get());
  // Room for a request at max_request_bytes plus its protobuf framing. gRPC itself refuses a
  // larger body (RESOURCE_EXHAUSTED "Received message larger than max (N vs. M)"), after reading
  // it whole or until the memory quota below sends the stream away, and no code of ours sees
  // that call: gRPC 1.51 has no hook there, so it is neither logged nor counted. Our clients
  // check the limit (GetServerInfo's) before sending.
  const int64_t max_message = options.limits.max_request_bytes + (int64_t{1} << 20);
  builder.SetMaxReceiveMessageSize(static_cast<int>(max_message));
  builder.SetMaxSendMessageSize(static_cast<int>(max_message));
  // A body that does not parse is answered by us (malformed_body.h), not with gRPC's bare
  // UNIMPLEMENTED.
  std::vector<std::unique_ptr<grpc::experimental::ServerInterceptorFactoryInterface>> interceptors;
  interceptors.push_back(
      std::make_unique<MalformedBodies>(*server->metrics_, server->tokens_.get()));
  builder.experimental().SetInterceptorCreators(std::move(interceptors));
  grpc::ResourceQuota quota("attn-server");
  quota.Resize(static_cast<size_t>(options.grpc_memory_bytes));
  builder.SetResourceQuota(quota);
  builder.AddChannelArgument(GRPC_ARG_MAX_CONCURRENT_STREAMS, options.max_streams_per_connection);
  const auto ms = [](double seconds) { return static_cast<int>(seconds * 1e3); };
  builder.AddChannelArgument(GRPC_ARG_MAX_CONNECTION_IDLE_MS, ms(options.max_connection_idle_s));
  builder.AddChannelArgument(GRPC_ARG_MAX_CONNECTION_AGE_MS, ms(options.max_connection_age_s));
  builder.AddChannelArgument(GRPC_ARG_MAX_CONNECTION_AGE_GRACE_MS,
                             ms(options.max_connection_age_grace_s));
  // Pings: the server's own keepalive finds dead peers; a client pinging more often than the
  // minimum (twice over) is sent away.
  builder.AddChannelArgument(GRPC_ARG_KEEPALIVE_TIME_MS, ms(options.keepalive_min_ping_s) * 3);
  builder.AddChannelArgument(GRPC_ARG_KEEPALIVE_TIMEOUT_MS, ms(options.keepalive_min_ping_s));
  builder.AddChannelArgument(GRPC_ARG_HTTP2_MIN_RECV_PING_INTERVAL_WITHOUT_DATA_MS,
                             ms(options.keepalive_min_ping_s));
  builder.AddChannelArgument(GRPC_ARG_HTTP2_MAX_PING_STRIKES, 2);
  server->grpc_ = builder.BuildAndStart();
  if (server->grpc_ == nullptr || server->port_ == 0) {
    return absl::UnavailableError(
        absl::StrFormat("--listen_address: cannot listen on '%s' (in use, or not host:port)",
                        options.listen_address));
  }
  server->SetServing(serving);
  std::vector<std::string> names;
  for (auto* d : devices)
    names.push_back(absl::StrFormat("%d=%s x%d", d->index(), d->info().ToString(), d->workers()));
  Log(serving ? spdlog::level::info : spdlog::level::err, serving ? "SERVING" : "NOT_SERVING",
      {{"listen", absl::StrFormat("%s (port %d)", options.listen_address, server->port_)},
       {"metrics",
        options.metrics_address.empty()
            ? "off"
            : absl::StrFormat("%s (port %d)", options.metrics_address, server->metrics_port_)},
       {"devices", absl::StrJoin(names, "; ")},
       {"queue_depth", absl::StrCat(options.queue_depth)},
       {"max_request_bytes", absl::StrCat(options.limits.max_request_bytes)},
       {"max_call_seconds", absl::StrFormat("%g", options.admission.max_call_seconds)},
       {"max_job_seconds", absl::StrFormat("%g", options.admission.max_job_seconds)},
       {"max_host_bytes", absl::StrCat(options.admission.max_host_bytes)},
       {"tls", options.tls_cert_file.empty()        ? "off"
               : options.tls_client_ca_file.empty() ? "on"
                                                    : "on, client certificates required"},
       {"tokens", options.tokens_file.empty() ? "off"
                  : options.tls_cert_file.empty()
                      ? absl::StrCat(options.tokens_file, " (loopback only, plaintext)")
                      : options.tokens_file},
       {"health", options.health_address.empty()
                      ? "on the gRPC port"
                      : absl::StrFormat("%s (port %d, plaintext)", options.health_address,
                                        server->health_port_)}});
  return server;
}

void Server::SetServing(bool serving) {
  metrics_->serving = serving;
  // The process is alive and answering: liveness stays SERVING (gRPC's Shutdown sets it
  // NOT_SERVING at the very end). Only readiness says whether this replica takes work.
  for (grpc::Server* s : {grpc_.get(), health_grpc_.get()}) {
    if (s == nullptr) continue;
    s->GetHealthCheckService()->SetServingStatus(kLivenessService, true);
    s->GetHealthCheckService()->SetServingStatus(kReadinessService, serving);
  }
}

void Server::Drain(double grace_s) {
  if (drained_) return;
  drained_ = true;
  SetServing(false);
  service_->StartDraining();
  for (auto& d : devices_) d->Close();
  const int inflight = metrics_->inflight.load();
  Log(spdlog::level::info, "draining",
      {{"in_flight", absl::StrCat(inflight)}, {"grace_s", absl::StrFormat("%g", grace_s)}});
  if (int left = service_->WaitIdle(grace_s); left > 0) {
    Log(spdlog::level::warn, "grace period over; stopping the requests still queued or running",
        {{"in_flight", absl::StrCat(left)}});
    service_->StopAll(absl::UnavailableError(absl::StrFormat(
        "server is shutting down (its %gs grace period is over); retry on another replica",
        grace_s)));
    left = service_->WaitIdle(kDrainAfterGraceSeconds - 1);
    if (left > 0)
      Log(spdlog::level::err, "requests still running at exit",
          {{"in_flight", absl::StrCat(left)}});
  }
  grpc_->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(1));
  if (health_grpc_ != nullptr) health_grpc_->Shutdown(std::chrono::system_clock::now());
  for (auto& d : devices_) d->Stop();
  Log(spdlog::level::info, "stopped");
}

Server::~Server() {
  if (grpc_ != nullptr) Drain(0);  // joins the workers
  // The gRPC server first (no more calls), then what calls used, then the devices the metrics
  // endpoint samples.
  grpc_.reset();
  health_grpc_.reset();
  inference_.reset();
  service_.reset();
  metrics_.reset();
  devices_.clear();
}

}  // namespace attn::server
