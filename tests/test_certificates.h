// A test CA with a server certificate for localhost and 127.0.0.1 and a client certificate,
// made with the openssl CLI, for the TLS tests of the server and the client.
#pragma once

#include <sys/stat.h>

#include <cstdlib>
#include <string>

namespace attn::testing {

// Writes ca.crt/.key, server.crt/.key (SANs localhost, 127.0.0.1) and client.crt/.key into
// `dir` (made if missing). Returns why it could not (empty when done).
inline std::string MakeTestCertificates(const std::string& dir) {
  if (std::system("command -v openssl >/dev/null 2>&1") != 0) {
    return "openssl not installed (scripts/deps.sh --test installs it)";
  }
  mkdir(dir.c_str(), 0700);
  const std::string cmd =
      "cd '" + dir +
      "' && openssl req -x509 -newkey rsa:2048 -nodes -days 2 -subj /CN=attn-test-ca "
      "-keyout ca.key -out ca.crt 2>/dev/null && "
      "openssl req -newkey rsa:2048 -nodes -subj /CN=localhost -keyout server.key -out server.csr "
      "2>/dev/null && printf 'subjectAltName=DNS:localhost,IP:127.0.0.1' > san.ext && "
      "openssl x509 -req -in server.csr -CA ca.crt -CAkey ca.key -CAcreateserial -days 2 "
      "-extfile san.ext -out server.crt 2>/dev/null && "
      "openssl req -newkey rsa:2048 -nodes -subj /CN=client -keyout client.key -out client.csr "
      "2>/dev/null && openssl x509 -req -in client.csr -CA ca.crt -CAkey ca.key -CAcreateserial "
      "-days 2 -out client.crt 2>/dev/null";
  return std::system(cmd.c_str()) == 0 ? "" : "openssl could not make the test certificates";
}

}  // namespace attn::testing
