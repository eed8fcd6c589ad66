// The HTTP endpoint of /metrics: libmicrohttpd on one thread of its own that polls every
// connection with epoll, so an idle, slow or stalled client holds only its own connection, never
// the scrape beside it nor the gRPC side.
//
//   GET|HEAD /metrics  200, the Prometheus text `render` returns (HEAD: its headers only)
//   other methods      405, Allow: GET, HEAD
//   other paths        404
//
// Bounds: a connection idle (nothing sent or received) for kIdleTimeoutSeconds is closed; at
// most kConnectionsPerAddress connections from one client address and kConnections in all (more
// are closed as they arrive); a request's headers are held in kConnectionMemoryBytes at most
// (larger ones get 431).
#pragma once

#include <functional>
#include <memory>
#include <string>

#include "absl/status/statusor.h"

struct MHD_Daemon;

namespace attn::server {

class MetricsHttp {
 public:
  static constexpr unsigned kIdleTimeoutSeconds = 2;
  static constexpr unsigned kConnectionsPerAddress = 16;
  static constexpr unsigned kConnections = 64;
  static constexpr size_t kConnectionMemoryBytes = 32 << 10;

  // Listens on `address` ("host:port", IPv4; port 0 picks one) and serves until destroyed.
  // `render` is called on the endpoint's thread for each GET or HEAD of /metrics.
  static absl::StatusOr<std::unique_ptr<MetricsHttp>> Start(const std::string& address,
                                                            std::function<std::string()> render);
  ~MetricsHttp();

  int port() const { return port_; }

 private:
  MetricsHttp() = default;

  std::function<std::string()> render_;
  MHD_Daemon* daemon_ = nullptr;
  int port_ = 0;
};

}  // namespace attn::server
