#include "server/served_methods.h"

#include <map>

#include "absl/strings/str_cat.h"
#include "attention/v1/attention.grpc.pb.h"
#include "inference/grpc_service.grpc.pb.h"

namespace attn::server {

const google::protobuf::MethodDescriptor* FindServedMethod(absl::string_view path) {
  using Methods = std::map<std::string, const google::protobuf::MethodDescriptor*, std::less<>>;
  static const Methods* const by_path = [] {
    auto* methods = new Methods();
    // Reflection's descriptors come with grpc++_reflection, which the server links.
    for (const char* name : {attention::v1::AttentionService::service_full_name(),
                             inference::GRPCInferenceService::service_full_name(),
                             "grpc.reflection.v1alpha.ServerReflection"}) {
      const google::protobuf::ServiceDescriptor* service =
          google::protobuf::DescriptorPool::generated_pool()->FindServiceByName(name);
      for (int i = 0; service != nullptr && i < service->method_count(); ++i) {
        methods->emplace(absl::StrCat("/", service->full_name(), "/", service->method(i)->name()),
                         service->method(i));
      }
    }
    return methods;
  }();
  const auto it = by_path->find(path);
  return it == by_path->end() ? nullptr : it->second;
}

std::string RpcLabel(absl::string_view path) {
  const google::protobuf::MethodDescriptor* method = FindServedMethod(path);
  return method == nullptr ? "unknown" : method->name();
}

}  // namespace attn::server
