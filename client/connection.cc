#include "client/connection.h"

#include <arpa/inet.h>
#include <grpcpp/support/client_interceptor.h>
#include <netdb.h>
#include <sys/socket.h>

#include <cstdlib>
#include <fstream>
#include <set>
#include <sstream>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "proto/status.h"

namespace attn::client {
namespace {

absl::Status BadTarget(const std::string& spec, const std::string& rule) {
  return absl::InvalidArgumentError(absl::StrCat("--target '", spec, "': ", rule));
}

// host and port of "host:port" or "[v6]:port".
absl::Status SplitHostPort(const std::string& spec, const std::string& item, std::string& host,
                           std::string& port) {
  const size_t colon = item.rfind(':');
  if (colon == std::string::npos || colon + 1 == item.size() || colon == 0) {
    return BadTarget(spec, absl::StrCat("'", item, "' is not host:port"));
  }
  host = item.substr(0, colon);
  port = item.substr(colon + 1);
  if (host.size() > 2 && host.front() == '[' && host.back() == ']')
    host = host.substr(1, host.size() - 2);
  return absl::OkStatus();
}

// The numeric addresses `host` resolves to, v4 and v6 as getaddrinfo orders them.
std::vector<std::pair<int, std::string>> Resolve(const std::string& host, const std::string& port) {
  addrinfo hints{};
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* res = nullptr;
  std::vector<std::pair<int, std::string>> out;
  if (getaddrinfo(host.c_str(), port.c_str(), &hints, &res) != 0) return out;
  std::set<std::string> seen;
  for (addrinfo* a = res; a != nullptr; a = a->ai_next) {
    char buf[NI_MAXHOST];
    if (getnameinfo(a->ai_addr, a->ai_addrlen, buf, sizeof(buf), nullptr, 0, NI_NUMERICHOST) == 0 &&
        seen.insert(buf).second) {
      out.emplace_back(a->ai_family, buf);
    }
  }
  freeaddrinfo(res);
  return out;
}

}  // namespace

absl::StatusOr<Target> ParseTarget(const std::string& spec) {
  if (spec.empty())
    return BadTarget(spec, "empty; expected host:port, a comma list, or dns:///name:port");
  Target t;
  if (absl::StartsWith(spec, "dns:")) {
    t.uri = spec;
    std::string name = spec.substr(4);
    while (!name.empty() && name.front() == '/') name.erase(0, 1);
    std::string host, port;
    if (auto s = SplitHostPort(spec, name, host, port); !s.ok()) return s;
    const auto addresses = Resolve(host, port);
    if (addresses.empty()) return BadTarget(spec, absl::StrCat("'", host, "' does not resolve"));
    t.replicas = static_cast<int>(addresses.size());
    return t;
  }
  if (!absl::StrContains(spec, ',')) {
    std::string host, port;
    if (auto s = SplitHostPort(spec, spec, host, port); !s.ok()) return s;
    t.uri = spec;
    return t;
  }
  std::vector<std::string> v4, v6;
  for (absl::string_view item : absl::StrSplit(spec, ',')) {
    std::string host, port;
    if (item.empty()) return BadTarget(spec, "empty item in the comma list");
    if (auto s = SplitHostPort(spec, std::string(item), host, port); !s.ok()) return s;
    const auto addresses = Resolve(host, port);
    if (addresses.empty()) return BadTarget(spec, absl::StrCat("'", host, "' does not resolve"));
    // The first address of each host: one replica per listed item.
    const auto& [family, address] = addresses.front();
    if (family == AF_INET6)
      v6.push_back(absl::StrCat("[", address, "]:", port));
    else
      v4.push_back(absl::StrCat(address, ":", port));
  }
  if (!v4.empty() && !v6.empty()) {
    return BadTarget(spec, "mixes IPv4 and IPv6 hosts; gRPC's static lists take one family");
  }
  t.uri = v4.empty() ? "ipv6:" + absl::StrJoin(v6, ",") : "ipv4:" + absl::StrJoin(v4, ",");
  t.replicas = static_cast<int>(v4.size() + v6.size());
  return t;
}

namespace {

// Adds "authorization: Bearer TOKEN" to every call. An interceptor rather than call credentials,
// which gRPC sends only over TLS: a local plaintext server with tokens works too.
class BearerToken final : public grpc::experimental::Interceptor {
 public:
  explicit BearerToken(const std::string& token) : header_("Bearer " + token) {}
  void Intercept(grpc::experimental::InterceptorBatchMethods* methods) override {
    if (methods->QueryInterceptionHookPoint(
            grpc::experimental::InterceptionHookPoints::PRE_SEND_INITIAL_METADATA)) {
      methods->GetSendInitialMetadata()->insert({"authorization", header_});
    }
    methods->Proceed();
  }

 private:
  const std::string header_;
};

class BearerTokenFactory final : public grpc::experimental::ClientInterceptorFactoryInterface {
 public:
  explicit BearerTokenFactory(std::string token) : token_(std::move(token)) {}
  grpc::experimental::Interceptor* CreateClientInterceptor(
      grpc::experimental::ClientRpcInfo*) override {
    return new BearerToken(token_);
  }

 private:
  const std::string token_;
};

}  // namespace

std::shared_ptr<grpc::Channel> MakeChannel(const Target& target, int connection) {
  grpc::ChannelArguments args;
  if (connection > 0) args.SetInt("attn.connection", connection);
  args.SetServiceConfigJSON(R"({"loadBalancingConfig": [{"round_robin": {}}]})");
  args.SetMaxReceiveMessageSize(-1);  // the server enforces its own limit on outputs
  args.SetMaxSendMessageSize(-1);
  std::shared_ptr<grpc::ChannelCredentials> credentials = grpc::InsecureChannelCredentials();
  if (target.tls) {
    grpc::SslCredentialsOptions ssl;
    ssl.pem_root_certs = target.tls_ca_pem;  // empty: the system's roots
    credentials = grpc::SslCredentials(ssl);
  }
  std::vector<std::unique_ptr<grpc::experimental::ClientInterceptorFactoryInterface>> interceptors;
  if (!target.token.empty())
    interceptors.push_back(std::make_unique<BearerTokenFactory>(target.token));
  return grpc::experimental::CreateCustomChannelWithInterceptors(target.uri, credentials, args,
                                                                 std::move(interceptors));
}

std::string TokenProblem(const std::string& token, const std::string& source) {
  if (token.empty()) return source + ": empty; give the token you were handed, or none at all";
  for (size_t i = 0; i < token.size(); ++i) {
    const auto c = static_cast<unsigned char>(token[i]);
    if (c >= 0x21 && c <= 0x7e) continue;
    std::string what;
    if (c == '\n') {
      what = "a newline";
    } else if (c == '\r') {
      what = "a carriage return";
    } else if (c == '\t') {
      what = "a tab";
    } else if (c == ' ') {
      what = "a space";
    } else if (c < 0x20 || c == 0x7f) {
      what = absl::StrFormat("the control character U+%04X", c);
    } else {
      // A UTF-8 sequence: its code point, as a text editor shows it.
      uint32_t cp = 0;
      const int len = c >= 0xf0 ? 4 : c >= 0xe0 ? 3 : c >= 0xc0 ? 2 : 1;
      cp = len == 1 ? c : c & (0xff >> (len + 1));
      for (int k = 1; k < len && i + k < token.size(); ++k)
        cp = (cp << 6) | (static_cast<unsigned char>(token[i + k]) & 0x3f);
      what = len == 1 ? absl::StrFormat("the byte 0x%02X (not UTF-8)", c)
                      : absl::StrFormat("the non-ASCII character U+%04X", cp);
    }
    const std::string where = i == token.size() - 1 || (c == '\r' && i == token.size() - 2)
                                  ? "at the end"
                              : i == 0 ? "at the start"
                                       : absl::StrCat("at position ", i + 1);
    return absl::StrCat(source, ": has ", what, " ", where, " (byte ", i + 1, " of ", token.size(),
                        "); a token is visible ASCII only: copy it again without the surrounding "
                        "whitespace");
  }
  return "";
}

bool IsLoopbackTarget(const std::string& spec) {
  std::string rest = spec;
  if (absl::StartsWith(rest, "dns:")) {
    rest = rest.substr(4);
    while (!rest.empty() && rest.front() == '/') rest.erase(0, 1);
  }
  for (absl::string_view item : absl::StrSplit(rest, ',')) {
    std::string host, port;
    if (!SplitHostPort(spec, std::string(item), host, port).ok()) return false;
    if (host == "localhost" || host == "::1") continue;
    in_addr v4{};
    if (inet_pton(AF_INET, host.c_str(), &v4) == 1 && (ntohl(v4.s_addr) >> 24) == 127) continue;
    return false;
  }
  return true;
}

absl::Status SetSecurity(bool tls, const std::string& ca_file, const std::string& token,
                         bool insecure_token, const std::string& spec, Target& target) {
  target.tls = tls || !ca_file.empty();
  if (!ca_file.empty()) {
    std::ifstream f(ca_file, std::ios::binary);
    std::stringstream pem;
    pem << f.rdbuf();
    if (!f || pem.str().find("-----BEGIN CERTIFICATE") == std::string::npos) {
      return absl::InvalidArgumentError(
          absl::StrCat("--tls_ca_file: '", ca_file, "' is not a readable PEM certificate"));
    }
    target.tls_ca_pem = pem.str();
  }
  const char* env = std::getenv("ATTN_TOKEN");
  const bool from_flag = !token.empty() || env == nullptr;
  target.token = !token.empty() ? token : env != nullptr ? env : "";
  if (target.token.empty() && from_flag) return absl::OkStatus();
  if (auto why = TokenProblem(target.token, from_flag ? "--token" : "$ATTN_TOKEN"); !why.empty()) {
    return absl::InvalidArgumentError(why);
  }
  if (!target.tls && !insecure_token && !IsLoopbackTarget(spec)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "refusing to send the token in plaintext to ", spec,
        ": it is not loopback, so anyone on the network path could read the token and act as "
        "you; use TLS (--tls_ca_file=CA.pem, $ATTN_TLS_CA_FILE, or --tls), or add "
        "--insecure_token if this network is private"));
  }
  return absl::OkStatus();
}

std::string DescribeRpcError(const grpc::Status& status, const std::string& peer,
                             const std::string& request_id, bool tls) {
  // gRPC's own messages for transport failures can span lines; keep the first.
  std::string message = status.error_message();
  if (auto nl = message.find('\n'); nl != std::string::npos) message.resize(nl);
  std::string hint;
  const bool handshake = absl::StrContains(message, "Handshake") ||
                         absl::StrContains(message, "SSL") || absl::StrContains(message, "ssl") ||
                         absl::StrContains(message, "certificate");
  if (status.error_code() == grpc::UNAVAILABLE && tls && handshake) {
    hint =
        "; the TLS handshake failed: give the CA that signed the server's certificate with "
        "--tls_ca_file and a --target host the certificate names (or drop --tls for a "
        "plaintext server)";
  } else if (status.error_code() == grpc::UNAVAILABLE && !tls &&
             (absl::StrContains(message, "Socket closed") || absl::StrContains(message, "reset") ||
              absl::StrContains(message, "failed to connect"))) {
    hint =
        "; is attn-server running there, and does it speak TLS? (check --target; for a TLS "
        "server add --tls or --tls_ca_file=CA.pem)";
  } else if (status.error_code() == grpc::UNAVAILABLE &&
             !absl::StrContains(message, "shutting down") && !absl::StrContains(message, "queue")) {
    hint = "; is attn-server running there? (check --target)";
  } else if (status.error_code() == grpc::DEADLINE_EXCEEDED) {
    hint = "; raise --timeout for long jobs";
  }
  std::string where;
  if (!peer.empty() || !request_id.empty()) {
    where = absl::StrCat(" (", peer.empty() ? "" : absl::StrCat("from ", peer),
                         !peer.empty() && !request_id.empty() ? ", " : "",
                         request_id.empty() ? "" : absl::StrCat("request ", request_id), ")");
  }
  return absl::StrCat(CodeName(status.error_code()), ": ", message, hint, where);
}

std::string DescribeRpcError(const grpc::Status& status, const grpc::ClientContext& context,
                             bool tls) {
  std::string id;
  if (status.error_code() != grpc::UNAVAILABLE || !context.peer().empty()) {
    const auto& trailing = context.GetServerTrailingMetadata();
    if (const auto it = trailing.find("x-request-id"); it != trailing.end()) {
      id.assign(it->second.data(), it->second.size());
    }
  }
  return DescribeRpcError(status, context.peer(), id, tls);
}

}  // namespace attn::client
