// attn-server: serves attention and attention benchmark jobs on this node's GPUs over gRPC
// (attention.v1.AttentionService, with grpc.health.v1 and reflection), and Prometheus metrics
// over HTTP. SIGTERM or SIGINT drains: readiness (health service attention.v1.AttentionService)
// goes NOT_SERVING, new requests are refused, accepted ones finish within --shutdown_grace_s, and
// the process exits 0. Liveness (health service "") stays SERVING while the process runs, also
// when the GPU is unusable, so Kubernetes does not restart a pod that needs another node.
#include <google/protobuf/stubs/logging.h>
#include <malloc.h>
#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <string>
#include <thread>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/flags/usage.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "engine/tools/flags_help.h"
#include "server/log.h"
#include "server/server.h"

ABSL_FLAG(std::string, listen_address, "0.0.0.0:50051",
          "gRPC address, host:port (port 0: pick a free one)");
ABSL_FLAG(std::string, metrics_address, "0.0.0.0:9464",
          "Prometheus /metrics HTTP address, host:port; empty: off");
ABSL_FLAG(std::string, devices, "",
          "CUDA device ordinals to serve, e.g. 0,1; empty: all GPUs (the cpu backend when the "
          "machine has none); cpu: the cpu backend only");
ABSL_FLAG(int, workers_per_device, 1,
          "concurrent requests per device, each worker with its own stream, handles and share of "
          "the arena");
ABSL_FLAG(int64_t, arena_mib, 4096,
          "device memory held per device from start-up for request tensors and workspaces, MiB");
ABSL_FLAG(int64_t, max_request_mib, 64,
          "largest q + k + v (and returned output) of one Attend, MiB");
ABSL_FLAG(int, queue_depth, 64, "requests waiting per device before new ones get UNAVAILABLE");
ABSL_FLAG(double, default_deadline_s, 60,
          "deadline for calls that set none, seconds (benchmark jobs: the whole job)");
ABSL_FLAG(std::string, log_format, "text", "log lines as text or json (one object per line)");
ABSL_FLAG(std::string, log_level, "info", "trace, debug, info, warning, error, critical or off");
ABSL_FLAG(double, shutdown_grace_s, 25,
          "on SIGTERM/SIGINT, how long accepted requests may run; then queued ones are answered "
          "UNAVAILABLE and running ones stopped at their next piece, and the process exits within "
          "3 s more, seconds");
ABSL_FLAG(double, max_call_seconds, 30,
          "cost cap: estimated device time of one attention call (an Attend, one call of a "
          "benchmark case, or its numerics reference), seconds; over it: RESOURCE_EXHAUSTED before "
          "the request queues");
ABSL_FLAG(double, max_job_seconds, 600,
          "cost cap: estimated device time of a whole benchmark job (warm-up, timing and checks of "
          "every case), and the longest deadline any request may have, seconds");
ABSL_FLAG(int64_t, max_host_mib, 4096,
          "host memory requests may hold at once (Attend payloads and replies, numerics "
          "references), MiB");
ABSL_FLAG(int64_t, grpc_memory_mib, 1024,
          "gRPC's memory quota (receive buffers, messages being parsed), MiB; at least 2 x "
          "--max_request_mib + 16");
ABSL_FLAG(int, max_streams_per_connection, 32, "RPCs one client connection may have open at once");
ABSL_FLAG(double, max_connection_idle_s, 300,
          "a client connection without a call in flight this long is closed (the client "
          "reconnects when it calls again), seconds");
ABSL_FLAG(double, max_connection_age_s, 3600,
          "a client connection this old is told to go (new calls reconnect), seconds");
ABSL_FLAG(double, max_connection_age_grace_s, 900,
          "then closed this long after, calls in flight or not (a half-sent request cannot hold "
          "gRPC's memory for ever), seconds");
ABSL_FLAG(double, keepalive_min_ping_s, 20,
          "the least interval between a client's keepalive pings (more often: the connection is "
          "closed); the server pings idle connections every 3x this, seconds");
ABSL_FLAG(std::string, tls_cert_file, "",
          "TLS: the server's certificate chain (PEM); with --tls_key_file the gRPC port speaks TLS "
          "only; empty: plaintext");
ABSL_FLAG(std::string, tls_key_file, "", "TLS: the private key of --tls_cert_file (PEM)");
ABSL_FLAG(std::string, tls_client_ca_file, "",
          "TLS: require client certificates signed by this CA (PEM); empty: none asked");
ABSL_FLAG(std::string, health_address, "",
          "a plaintext port serving only grpc.health.v1, for Kubernetes' gRPC probes when the gRPC "
          "port speaks TLS, host:port; empty: none");
ABSL_FLAG(std::string, prewarm_suite, "codelab",
          "on a GPU, run this suite once per worker at start-up (one call per case) so its cuDNN "
          "plans and kernels exist before the first request; empty: none");
ABSL_FLAG(std::string, tokens_file, "",
          "participants and their token hashes, one per line: NAME SHA256_HEX [participant|admin] "
          "[key=value ...] (max_inflight, max_queued, max_jobs, max_running >= 1; "
          "device_seconds, max_job_seconds > 0); mode at most 0640 (chmod 600); a bad line stops "
          "the start; re-read when it changes, where a bad line grants nothing and the others "
          "apply; every RPC but health then needs 'authorization: Bearer TOKEN'; empty: no tokens");
ABSL_FLAG(int, participant_max_inflight, 16,
          "quota: Attends and benchmark jobs one participant (without tokens: one client key) may "
          "have in flight");
ABSL_FLAG(
    int, participant_max_queued, 32,
    "quota: tasks one participant may have waiting on a device, a job's later cases included");
ABSL_FLAG(int, participant_max_jobs, 4, "quota: benchmark jobs one participant may have running");
ABSL_FLAG(int, participant_max_running, 0,
          "quota: tasks one participant may have on a device's workers at once; 0: "
          "--workers_per_device - 1, at least 1");
ABSL_FLAG(
    double, participant_device_seconds, 300,
    "quota: seconds one participant's tasks may hold device workers per --participant_window_s");
ABSL_FLAG(double, participant_window_s, 600,
          "quota: the rolling window of --participant_device_seconds, seconds");
ABSL_FLAG(double, participant_max_job_seconds, 180,
          "quota: estimated device time of one benchmark job of a participant (admins: "
          "--max_job_seconds); with tokens");

int main(int argc, char** argv) {
  attn::HandleHelpFlag(
      argc, argv,
      "attn-server: serves attention and benchmark jobs over gRPC "
      "(attention.v1.AttentionService).\n"
      "  attn-server [--listen_address=0.0.0.0:50051] [--metrics_address=0.0.0.0:9464] ...");
  absl::ParseCommandLine(argc, argv);
  // Blocks of 1 MiB and more (request payloads, replies, numerics copies) are mapped for their
  // own and returned to the system when freed: glibc's default raises this threshold as large
  // blocks come and go, after which they stay in its heaps and the resident memory only grows.
  mallopt(M_MMAP_THRESHOLD, 1 << 20);
  if (auto s = attn::server::InitLogging(absl::GetFlag(FLAGS_log_format),
                                         absl::GetFlag(FLAGS_log_level));
      !s.ok()) {
    std::fprintf(stderr, "attn-server: %s\n", std::string(s.message()).c_str());
    return 2;
  }
  // protobuf reports each malformed string field of a request on stderr; a client sending such
  // requests in a loop would fill the log. The client gets its error from gRPC; keep a trace.
  google::protobuf::SetLogHandler(
      [](google::protobuf::LogLevel, const char* file, int line, const std::string& message) {
        attn::server::Log(spdlog::level::debug, "protobuf",
                          {{"at", absl::StrCat(file, ":", line)}, {"message", message}});
      });
  // Signals are taken by sigwait below, so every thread started from here on blocks them.
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGTERM);
  sigaddset(&signals, SIGINT);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);

  attn::server::ServerOptions options;
  options.listen_address = absl::GetFlag(FLAGS_listen_address);
  options.metrics_address = absl::GetFlag(FLAGS_metrics_address);
  options.devices = absl::GetFlag(FLAGS_devices);
  options.workers_per_device = absl::GetFlag(FLAGS_workers_per_device);
  const int64_t arena_mib = absl::GetFlag(FLAGS_arena_mib);
  const int64_t request_mib = absl::GetFlag(FLAGS_max_request_mib);
  if (arena_mib < 16 || arena_mib > (int64_t{1} << 30)) {
    std::fprintf(stderr, "attn-server: --arena_mib: must be in [16, 2^30], got %lld\n",
                 static_cast<long long>(arena_mib));
    return 2;
  }
  if (request_mib < 1 || request_mib > 2000) {
    std::fprintf(stderr, "attn-server: --max_request_mib: must be in [1, 2000], got %lld\n",
                 static_cast<long long>(request_mib));
    return 2;
  }
  options.arena_bytes = arena_mib << 20;
  options.limits.max_request_bytes = request_mib << 20;
  options.queue_depth = absl::GetFlag(FLAGS_queue_depth);
  options.default_deadline_s = absl::GetFlag(FLAGS_default_deadline_s);
  options.admission.max_call_seconds = absl::GetFlag(FLAGS_max_call_seconds);
  options.admission.max_job_seconds = absl::GetFlag(FLAGS_max_job_seconds);
  const int64_t host_mib = absl::GetFlag(FLAGS_max_host_mib);
  const int64_t grpc_mib = absl::GetFlag(FLAGS_grpc_memory_mib);
  for (const auto& [flag, mib] :
       {std::pair{"max_host_mib", host_mib}, {"grpc_memory_mib", grpc_mib}}) {
    if (mib < 1 || mib > (int64_t{1} << 30)) {
      std::fprintf(stderr, "attn-server: --%s: must be in [1, 2^30], got %lld\n", flag,
                   static_cast<long long>(mib));
      return 2;
    }
  }
  options.admission.max_host_bytes = host_mib << 20;
  options.grpc_memory_bytes = grpc_mib << 20;
  options.max_streams_per_connection = absl::GetFlag(FLAGS_max_streams_per_connection);
  options.max_connection_idle_s = absl::GetFlag(FLAGS_max_connection_idle_s);
  options.max_connection_age_s = absl::GetFlag(FLAGS_max_connection_age_s);
  options.max_connection_age_grace_s = absl::GetFlag(FLAGS_max_connection_age_grace_s);
  options.keepalive_min_ping_s = absl::GetFlag(FLAGS_keepalive_min_ping_s);
  options.tls_cert_file = absl::GetFlag(FLAGS_tls_cert_file);
  options.tls_key_file = absl::GetFlag(FLAGS_tls_key_file);
  options.tls_client_ca_file = absl::GetFlag(FLAGS_tls_client_ca_file);
  options.health_address = absl::GetFlag(FLAGS_health_address);
  options.tokens_file = absl::GetFlag(FLAGS_tokens_file);
  options.prewarm_suite = absl::GetFlag(FLAGS_prewarm_suite);
  options.participant_limits.max_inflight = absl::GetFlag(FLAGS_participant_max_inflight);
  options.participant_limits.max_queued = absl::GetFlag(FLAGS_participant_max_queued);
  options.participant_limits.max_jobs = absl::GetFlag(FLAGS_participant_max_jobs);
  options.participant_limits.max_running = absl::GetFlag(FLAGS_participant_max_running);
  options.participant_limits.device_seconds = absl::GetFlag(FLAGS_participant_device_seconds);
  options.participant_limits.max_job_seconds = absl::GetFlag(FLAGS_participant_max_job_seconds);
  options.participant_window_s = absl::GetFlag(FLAGS_participant_window_s);
  const double grace = absl::GetFlag(FLAGS_shutdown_grace_s);
  if (!(grace >= 0)) {
    std::fprintf(stderr, "attn-server: --shutdown_grace_s: must be >= 0, got %g\n", grace);
    return 2;
  }

  auto server = attn::server::Server::Start(options);
  if (!server.ok()) {
    attn::server::Log(spdlog::level::critical, "cannot start",
                      {{"error", std::string(server.status().message())}});
    return absl::IsInvalidArgument(server.status()) ? 2 : 1;
  }
  int sig = 0;
  sigwait(&signals, &sig);
  attn::server::Log(spdlog::level::info, "signal received; draining",
                    {{"signal", sig == SIGTERM ? "SIGTERM" : "SIGINT"}});
  // The drain answers everything within the grace and kDrainAfterGraceSeconds; should work that
  // cannot stop (a driver call that hangs) hold it longer, the process ends anyway.
  std::thread([grace] {
    std::this_thread::sleep_for(
        std::chrono::duration<double>(grace + attn::server::kDrainAfterGraceSeconds + 1));
    attn::server::Log(spdlog::level::critical, "drain overran its grace; exiting now",
                      {{"grace_s", absl::StrFormat("%g", grace)}});
    _exit(1);
  }).detach();
  (*server)->Drain(grace);
  server->reset();
  return 0;
}
