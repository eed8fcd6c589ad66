// attn-server's life cycle: devices and their worker contexts, the gRPC server with health and
// reflection, the metrics endpoint, and the drain on shutdown.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "attn/device.h"
#include "server/kserve_service.h"
#include "server/metrics.h"
#include "server/scheduler.h"
#include "server/service.h"

namespace grpc {
class AuthMetadataProcessor;
class Server;
}  // namespace grpc

namespace attn::server {

struct ServerOptions {
  std::string listen_address = "0.0.0.0:50051";  // port 0 picks a free one (see port())
  std::string metrics_address = "0.0.0.0:9464";  // empty: no metrics endpoint
  std::string devices;         // "": every GPU (the CPU when there is none); "0,2"; "cpu"
  int workers_per_device = 1;  // each with its own context (stream, handles, arena)
  int64_t arena_bytes = int64_t{4} << 30;  // per device, split evenly between its workers
  int queue_depth = 64;                    // waiting requests per device
  double default_deadline_s = 60;
  RequestLimits limits;
  AdmissionLimits admission;
  // gRPC's own memory (receive buffers, messages being parsed) and the streams one connection
  // may have open at once: a flood of requests or connections is refused by gRPC before it
  // reaches the service, and the process's memory stays bounded.
  int64_t grpc_memory_bytes = int64_t{1} << 30;
  int max_streams_per_connection = 32;
  // Connections: closed after this long without a call in flight; told to go after this age and
  // closed this long after (calls in flight finish meanwhile: a benchmark job may take
  // --max_job_seconds), so a half-sent body cannot hold gRPC's memory for ever. Clients may ping
  // a connection without calls at most every keepalive_min_ping_s (more often: the connection
  // is closed).
  double max_connection_idle_s = 300;
  double max_connection_age_s = 3600;
  double max_connection_age_grace_s = 900;
  double keepalive_min_ping_s = 20;
  // Identity. tokens_file: participants and their token hashes (auth.h), checked on each call's
  // metadata before its body is read (token_gate.h); it needs TLS unless the server listens on
  // loopback only; empty: no tokens, every caller keyed by its network address. TLS: the
  // server's certificate chain and key (PEM files); with tls_client_ca_file, clients must
  // present a certificate it signed.
  std::string tokens_file;
  std::string tls_cert_file, tls_key_file, tls_client_ca_file;
  // A suite run once per GPU worker at start-up (Prewarm), so the plans a cohort's first job
  // needs exist before it asks; empty: none.
  std::string prewarm_suite = "codelab";
  // A plaintext port serving only grpc.health.v1 (Kubernetes' gRPC probes do not speak TLS);
  // empty: none.
  std::string health_address;
  // Quotas per participant (per client key without tokens); max_running 0 means
  // workers_per_device - 1, at least 1, so one participant cannot hold every worker.
  ParticipantLimits participant_limits{.max_running = 0};
  double participant_window_s = 600;
  // The start-up GPU check (driver present and new enough for the CUDA runtime, devices
  // visible). NotFound: no GPU at all, so the cpu backend serves; any other error: NOT_SERVING
  // with that reason. Tests replace it to play an unusable GPU.
  std::function<absl::Status()> gpu_check = CudaAvailability;
};

// The grpc.health.v1 service names. kLiveness ("") is SERVING from start-up until the process
// stops, even when the GPU is unusable, so that Kubernetes' start-up and liveness probes do not
// restart a pod that only needs a different node; kReadiness follows serving(): NOT_SERVING
// while the GPU is unusable and from the start of a drain, so the pod leaves the Services.
inline constexpr const char* kLivenessService = "";
// How long Drain waits after the grace for stopped requests to be answered, and for gRPC to
// shut down.
inline constexpr double kDrainAfterGraceSeconds = 3;
inline constexpr const char* kReadinessService = "attention.v1.AttentionService";

// InvalidArgument naming the flag for values out of range.
absl::Status ValidateServerOptions(const ServerOptions& options);

class Server {
 public:
  // Builds the devices' contexts (arenas allocated once), warms them up, starts serving and
  // only then reports SERVING. A machine without CUDA serves on the cpu backend; a GPU that
  // cannot be used (e.g. a driver older than the CUDA runtime) keeps kReadinessService
  // NOT_SERVING (kLivenessService stays SERVING) with the reason in the log, ServerInfo and
  // every UNAVAILABLE reply.
  static absl::StatusOr<std::unique_ptr<Server>> Start(const ServerOptions& options);
  ~Server();

  int port() const { return port_; }
  int metrics_port() const { return metrics_port_; }
  int health_port() const { return health_port_; }
  bool serving() const { return metrics_->serving; }
  Metrics& metrics() { return *metrics_; }

  // Readiness NOT_SERVING at once and new requests refused; accepted ones get up to `grace_s`
  // to finish. Then every request still queued or running is stopped with UNAVAILABLE ("server
  // is shutting down"): queued ones are answered at once, running calls end at their next piece
  // and benchmark jobs at their current case. Returns within grace_s + kDrainAfterGraceSeconds
  // unless a call is stuck in work that cannot stop (main's watchdog ends the process then).
  void Drain(double grace_s);

 private:
  Server() = default;
  void SetServing(bool serving);

  std::vector<std::unique_ptr<DeviceWorkers>> devices_;
  std::unique_ptr<Metrics> metrics_;
  std::unique_ptr<AttentionService> service_;
  std::unique_ptr<InferenceService> inference_;  // the Open Inference Protocol facade on service_
  std::unique_ptr<TokenRegistry> tokens_;
  std::shared_ptr<grpc::AuthMetadataProcessor> token_gate_;
  std::unique_ptr<grpc::Server> grpc_;
  std::unique_ptr<grpc::Server> health_grpc_;  // --health_address
  int port_ = 0;
  int health_port_ = 0;
  int metrics_port_ = 0;
  bool drained_ = false;
};

}  // namespace attn::server
