// What a hostile or bare client does to an attn-server on loopback, below the generated stubs:
// a unary call carrying whatever bytes, and a raw TCP connection. attn-abuse and the server's
// tests (tests/server) share these. Header-only; links with grpc++.
#pragma once

#include <arpa/inet.h>
#include <grpcpp/generic/generic_stub.h>
#include <grpcpp/grpcpp.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstdint>
#include <string>

namespace attn::loopback {

// Sends `bytes`, protobuf or not, as the message of a unary call of `method` (its full path,
// "/package.Service/Method") on `ctx`, and waits for the call's end; the response's bytes go to
// `response` where it is given. `cancel`: the call is cancelled as soon as it is sent, as a
// client that gives up would. The call's status.
inline grpc::Status RawUnaryCall(grpc::GenericStub& stub, grpc::ClientContext& ctx,
                                 const std::string& method, const std::string& bytes,
                                 grpc::ByteBuffer* response = nullptr, bool cancel = false) {
  grpc::Slice slice(bytes);
  grpc::ByteBuffer request(&slice, 1), ignored;
  grpc::CompletionQueue cq;
  auto call = stub.PrepareUnaryCall(&ctx, method, request, &cq);
  call->StartCall();
  grpc::Status status;
  call->Finish(response != nullptr ? response : &ignored, &status, reinterpret_cast<void*>(1));
  if (cancel) ctx.TryCancel();
  void* tag = nullptr;
  bool ok = false;
  cq.Next(&tag, &ok);
  return status;
}

// A TCP connection to 127.0.0.1:`port`: its file descriptor (the caller closes it), or -1 when
// nothing accepts there.
inline int ConnectTcp(int port) {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) return -1;
  sockaddr_in sa{};
  sa.sin_family = AF_INET;
  sa.sin_port = htons(static_cast<uint16_t>(port));
  inet_pton(AF_INET, "127.0.0.1", &sa.sin_addr);
  if (connect(fd, reinterpret_cast<sockaddr*>(&sa), sizeof(sa)) != 0) {
    close(fd);
    return -1;
  }
  return fd;
}

}  // namespace attn::loopback
