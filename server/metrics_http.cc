#include "server/metrics_http.h"

#include <arpa/inet.h>
#include <microhttpd.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"

namespace attn::server {
namespace {

MHD_Result Reply(MHD_Connection* connection, unsigned status, const std::string& body,
                 const char* content_type, const char* allow = nullptr) {
  MHD_Response* response = MHD_create_response_from_buffer(
      body.size(), const_cast<char*>(body.data()), MHD_RESPMEM_MUST_COPY);
  if (response == nullptr) return MHD_NO;
  MHD_add_response_header(response, MHD_HTTP_HEADER_CONTENT_TYPE, content_type);
  if (allow != nullptr) MHD_add_response_header(response, MHD_HTTP_HEADER_ALLOW, allow);
  const MHD_Result queued = MHD_queue_response(connection, status, response);
  MHD_destroy_response(response);
  return queued;
}

// libmicrohttpd's request callback; `cls` is the MetricsHttp's render function. A GET or HEAD is
// answered once the request is whole (its first call, headers read, only marks it), so the
// connection stays open for the next scrape; anything else is answered at once, its body unread,
// and libmicrohttpd then closes the connection.
MHD_Result Handle(void* cls, MHD_Connection* connection, const char* url, const char* method,
                  const char* /*version*/, const char* /*upload_data*/, size_t* upload_data_size,
                  void** request) {
  constexpr const char* kText = "text/plain; charset=utf-8";
  const bool get = std::strcmp(method, MHD_HTTP_METHOD_GET) == 0 ||
                   std::strcmp(method, MHD_HTTP_METHOD_HEAD) == 0;
  if (get && *request == nullptr) {
    static int headers_read;
    *request = &headers_read;
    return MHD_YES;
  }
  if (get && *upload_data_size != 0) {
    *upload_data_size = 0;  // a body on a GET means nothing here
    return MHD_YES;
  }
  if (std::strcmp(url, "/metrics") != 0) {
    return Reply(connection, MHD_HTTP_NOT_FOUND,
                 "attn-server serves Prometheus metrics at GET /metrics\n", kText);
  }
  if (!get) {
    return Reply(connection, MHD_HTTP_METHOD_NOT_ALLOWED, "/metrics answers GET and HEAD\n", kText,
                 "GET, HEAD");
  }
  // HEAD: libmicrohttpd sends the headers of this response (Content-Length included), no body.
  const auto& render = *static_cast<const std::function<std::string()>*>(cls);
  return Reply(connection, MHD_HTTP_OK, render(), "text/plain; version=0.0.4; charset=utf-8");
}

}  // namespace

absl::StatusOr<std::unique_ptr<MetricsHttp>> MetricsHttp::Start(
    const std::string& address, std::function<std::string()> render) {
  const size_t colon = address.rfind(':');
  int port = -1;
  if (colon == std::string::npos || !absl::SimpleAtoi(address.substr(colon + 1), &port) ||
      port < 0 || port > 65535) {
    return absl::InvalidArgumentError(
        absl::StrCat("metrics_address: expected IPv4 host:port, got '", address, "'"));
  }
  sockaddr_in sa{};
  sa.sin_family = AF_INET;
  sa.sin_port = htons(static_cast<uint16_t>(port));
  const std::string host = address.substr(0, colon);
  if (inet_pton(AF_INET, host.empty() ? "0.0.0.0" : host.c_str(), &sa.sin_addr) != 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("metrics_address: '", host, "' is not an IPv4 address"));
  }
  // The socket is made here rather than by libmicrohttpd, so that a failure names its reason.
  const int fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  const int one = 1;
  socklen_t len = sizeof(sa);
  if (fd < 0 || setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one)) != 0 ||
      bind(fd, reinterpret_cast<sockaddr*>(&sa), sizeof(sa)) != 0 || listen(fd, 64) != 0 ||
      getsockname(fd, reinterpret_cast<sockaddr*>(&sa), &len) != 0) {
    const std::string why = std::strerror(errno);
    if (fd >= 0) close(fd);
    return absl::UnavailableError(
        absl::StrCat("metrics_address: cannot listen on '", address, "': ", why));
  }
  std::unique_ptr<MetricsHttp> http(new MetricsHttp());
  http->render_ = std::move(render);
  http->port_ = ntohs(sa.sin_port);
  // No MHD_USE_ERROR_LOG: a flood of refused connections must not flood the log. The thread's
  // stack is the pthread default (MHD_OPTION_THREAD_STACK_SIZE unset), well above this process's
  // static TLS (cuBLASLt alone holds 94 KiB; prometheus-cpp's civetweb, with its fixed 100 KiB
  // stacks, failed to start threads for that reason).
  http->daemon_ =
      MHD_start_daemon(MHD_USE_EPOLL_INTERNAL_THREAD, 0, nullptr, nullptr, &Handle, &http->render_,
                       MHD_OPTION_LISTEN_SOCKET, fd, MHD_OPTION_CONNECTION_TIMEOUT,
                       kIdleTimeoutSeconds, MHD_OPTION_CONNECTION_LIMIT, kConnections,
                       MHD_OPTION_PER_IP_CONNECTION_LIMIT, kConnectionsPerAddress,
                       MHD_OPTION_CONNECTION_MEMORY_LIMIT, kConnectionMemoryBytes, MHD_OPTION_END);
  if (http->daemon_ == nullptr) {
    const std::string why = std::strerror(errno);
    close(fd);
    return absl::UnavailableError(
        absl::StrCat("metrics_address: cannot serve HTTP on '", address, "': ", why));
  }
  return http;
}

MetricsHttp::~MetricsHttp() {
  if (daemon_ != nullptr) MHD_stop_daemon(daemon_);  // joins its thread, closes every socket
}

}  // namespace attn::server
