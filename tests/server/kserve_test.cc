// The Open Inference Protocol facade: ModelInferRequest <-> AttendRequest conversion and its
// errors (server/kserve.h), and ModelInfer against Attend on an in-process server: the same bytes
// out of the same path. Triton's own clients drive it in tests/kserve/.
#include "server/kserve.h"

#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>

#include <cstring>
#include <string>
#include <vector>

#include "inference/grpc_service.grpc.pb.h"
#include "server/server_helpers.h"

namespace attn::server::kserve {
namespace {

namespace v1 = attention::v1;

// Bytes 0, 1, 2, ... of `n` elements of `size` bytes.
std::string Bytes(int64_t n, int size, int seed = 0) {
  std::string s(static_cast<size_t>(n * size), '\0');
  for (size_t i = 0; i < s.size(); ++i) s[i] = static_cast<char>((i * 7 + seed) % 61);
  return s;
}

// A request for Q (b, t, n, h) and K, V (b, s, k, h) as raw bytes of `datatype`.
inference::ModelInferRequest Request(const std::string& model, const std::string& datatype,
                                     std::vector<int64_t> q, std::vector<int64_t> kv) {
  const int size = datatype == "FP32" ? 4 : 2;
  inference::ModelInferRequest r;
  r.set_model_name(model);
  r.set_id("req-1");
  int seed = 0;
  for (const auto& [name, shape] : {std::pair{"Q", q}, {"K", kv}, {"V", kv}}) {
    auto* in = r.add_inputs();
    in->set_name(name);
    in->set_datatype(datatype);
    int64_t n = 1;
    for (int64_t d : shape) {
      in->add_shape(d);
      n *= d;
    }
    r.add_raw_input_contents(Bytes(n, size, seed++));
  }
  return r;
}

std::string Message(const absl::StatusOr<v1::AttendRequest>& r) {
  return std::string(r.status().message());
}

TEST(KServeConvert, RawInputsBecomeAnAttend) {
  auto r = Request("attention", "BF16", {2, 5, 4, 8}, {2, 7, 2, 8});
  (*r.mutable_parameters())["causal"].set_bool_param(true);
  (*r.mutable_parameters())["scale"].set_double_param(0.5);
  (*r.mutable_parameters())["backend"].set_string_param("cpu");
  (*r.mutable_parameters())["triton_enable_empty_final_response"].set_bool_param(false);
  auto model = FindModel("attention", "");
  ASSERT_TRUE(model.ok());
  auto a = AttendFromInfer(r, *model);
  ASSERT_TRUE(a.ok()) << a.status();
  EXPECT_EQ(a->shape().batch(), 2);
  EXPECT_EQ(a->shape().q_len(), 5);
  EXPECT_EQ(a->shape().num_heads(), 4);
  EXPECT_EQ(a->shape().head_dim(), 8);
  EXPECT_EQ(a->shape().kv_len(), 7);
  EXPECT_EQ(a->shape().num_kv_heads(), 2);
  EXPECT_EQ(a->dtype(), v1::BFLOAT16);
  EXPECT_TRUE(a->causal());
  EXPECT_EQ(a->scale(), 0.5);
  EXPECT_EQ(a->backend(), "cpu");
  EXPECT_EQ(a->tensors().q(), r.raw_input_contents(0));
  EXPECT_EQ(a->tensors().k(), r.raw_input_contents(1));
  EXPECT_EQ(a->tensors().v(), r.raw_input_contents(2));
}

TEST(KServeConvert, InputsInAnyOrderAndFp32Contents) {
  inference::ModelInferRequest r;
  r.set_model_name("attention_cpu");
  std::vector<float> values[3];
  for (int i : {2, 0, 1}) {  // V, Q, K
    auto* in = r.add_inputs();
    in->set_name(std::string(1, "QKV"[i]));
    in->set_datatype("FP32");
    for (int64_t d : {1, 3, 2, 4}) in->add_shape(d);
    for (int e = 0; e < 24; ++e) {
      values[i].push_back(static_cast<float>(i * 100 + e) / 7.0f);
      in->mutable_contents()->add_fp32_contents(values[i].back());
    }
  }
  auto a = AttendFromInfer(r, *FindModel("attention_cpu", "1"));
  ASSERT_TRUE(a.ok()) << a.status();
  EXPECT_EQ(a->backend(), "cpu");  // the variant's
  const std::string* got[3] = {&a->tensors().q(), &a->tensors().k(), &a->tensors().v()};
  for (int i = 0; i < 3; ++i) {
    ASSERT_EQ(got[i]->size(), 24 * sizeof(float));
    EXPECT_EQ(std::memcmp(got[i]->data(), values[i].data(), got[i]->size()), 0) << "QKV"[i];
  }
}

TEST(KServeConvert, ErrorsNameTheOipField) {
  const Model model = *FindModel("attention", "");
  auto r = Request("attention", "FP16", {1, 3, 2, 4}, {1, 3, 2, 4});
  r.mutable_inputs(1)->set_datatype("FP32");
  EXPECT_EQ(Message(AttendFromInfer(r, model)),
            "inputs[1].datatype (K): FP32 differs from Q's FP16; Q, K and V share one datatype");

  r = Request("attention", "FP16", {1, 3, 2, 4}, {1, 3, 2, 4});
  r.mutable_raw_input_contents(2)->pop_back();
  EXPECT_EQ(Message(AttendFromInfer(r, model)),
            "raw_input_contents[2] (V): 47 bytes, expected 48 (shape [1,3,2,4] = 24 elements of "
            "FP16, 2 bytes each)");

  r = Request("attention", "FP16", {1, 3, 2, 4}, {1, 3, 2, 4});
  r.mutable_inputs(0)->set_shape(2, 0);
  EXPECT_EQ(Message(AttendFromInfer(r, model)),
            "inputs[0].shape (Q): dimension 2 must be >= 1, got [1,3,0,4]");

  r = Request("attention", "BF16", {1, 3, 2, 4}, {1, 3, 2, 4});
  r.mutable_raw_input_contents()->RemoveLast();
  EXPECT_EQ(
      Message(AttendFromInfer(r, model)),
      "raw_input_contents: 2 entries for 3 inputs; give one per input, in the order of inputs");

  r = Request("attention", "BF16", {1, 3, 2, 4}, {1, 3, 2, 4});
  r.mutable_raw_input_contents()->Clear();
  EXPECT_EQ(Message(AttendFromInfer(r, model)),
            "raw_input_contents: BF16 tensors travel as raw bytes (the protocol has no typed "
            "contents for them); input Q has none");

  r = Request("attention", "FP32", {1, 3, 2, 4}, {1, 3, 2, 4});
  r.add_outputs()->set_name("attn_weights");
  EXPECT_EQ(Message(AttendFromInfer(r, model)),
            "outputs[0].name: unknown output 'attn_weights'; model 'attention' has O");

  r = Request("attention", "FP32", {1, 3, 2, 4}, {1, 3, 2, 4});
  (*r.mutable_parameters())["causal"].set_double_param(1);
  EXPECT_EQ(Message(AttendFromInfer(r, model)),
            "parameters.causal: must be a bool (or the string \"true\" or \"false\")");

  r = Request("attention", "FP32", {1, 3, 4, 4}, {1, 3, 3, 4});
  const auto gqa = AttendFromInfer(r, model);
  EXPECT_EQ(gqa.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(Message(gqa).rfind("inputs (Q [1,3,4,4], K [1,3,3,4]): ", 0), 0u) << Message(gqa);
}

TEST(KServeConvert, ModelsAndVersions) {
  const auto models = Models();
  ASSERT_GE(models.size(), 2u);
  EXPECT_EQ(models[0].name, "attention");
  EXPECT_EQ(models[0].backend, "");
  bool cpu = false;
  for (const Model& m : models) cpu = cpu || (m.name == "attention_cpu" && m.backend == "cpu");
  EXPECT_TRUE(cpu);
  EXPECT_EQ(FindModel("attention", "2").status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(FindModel("attention_", "").status().code(), absl::StatusCode::kNotFound);
  const auto meta = Metadata(models[0]);
  ASSERT_EQ(meta.inputs_size(), 3);
  EXPECT_EQ(meta.inputs(1).name(), "K");
  EXPECT_EQ(meta.outputs(0).name(), "O");
  EXPECT_EQ(Config(models[0]).max_batch_size(), 0);
}

TEST(KServeConvert, ReplyCarriesTheOutputAndTimings) {
  const auto r = Request("attention", "FP16", {1, 3, 2, 4}, {1, 5, 1, 4});
  const auto a = *AttendFromInfer(r, *FindModel("attention", ""));
  v1::AttendResponse result;
  result.set_output(Bytes(24, 2, 9));
  const std::string expected = result.output();
  result.set_backend("cpu");
  result.mutable_timings()->set_device_seconds(0.25);
  inference::ModelInferResponse reply;
  InferFromAttend(r, a, result, &reply);
  EXPECT_EQ(reply.model_name(), "attention");
  EXPECT_EQ(reply.model_version(), "1");
  EXPECT_EQ(reply.id(), "req-1");
  ASSERT_EQ(reply.outputs_size(), 1);
  EXPECT_EQ(reply.outputs(0).name(), "O");
  EXPECT_EQ(reply.outputs(0).datatype(), "FP16");
  EXPECT_EQ(std::vector<int64_t>(reply.outputs(0).shape().begin(), reply.outputs(0).shape().end()),
            (std::vector<int64_t>{1, 3, 2, 4}));
  ASSERT_EQ(reply.raw_output_contents_size(), 1);
  EXPECT_EQ(reply.raw_output_contents(0), expected);
  EXPECT_EQ(reply.parameters().at("backend").string_param(), "cpu");
  EXPECT_EQ(reply.parameters().at("device_seconds").double_param(), 0.25);
}

// One path: ModelInfer and Attend on the same inputs give the same bytes, and a ModelInfer reply
// carries the request id of its log line.
TEST(KServeServer, ModelInferIsAttend) {
  auto server = Server::Start(attn::testing::CpuOptions());
  ASSERT_TRUE(server.ok()) << server.status();
  auto channel = grpc::CreateChannel("127.0.0.1:" + std::to_string((*server)->port()),
                                     grpc::InsecureChannelCredentials());
  auto oip = inference::GRPCInferenceService::NewStub(channel);
  auto attention = v1::AttentionService::NewStub(channel);
  for (const char* datatype : {"FP32", "BF16"}) {
    // Normal-ish finite values: bytes of small floats.
    auto r = Request("attention", datatype, {1, 6, 4, 16}, {1, 9, 2, 16});
    for (int i = 0; i < 3; ++i) {
      std::string& raw = *r.mutable_raw_input_contents(i);
      if (std::string(datatype) == "FP32") {
        for (size_t e = 0; e < raw.size() / 4; ++e) {
          const float f = static_cast<float>((e * 37 + i * 11) % 23) / 11.0f - 1.0f;
          std::memcpy(&raw[e * 4], &f, 4);
        }
      } else {
        for (size_t e = 0; e < raw.size() / 2; ++e) raw[e * 2 + 1] = static_cast<char>(0x3f);
      }
    }
    (*r.mutable_parameters())["causal"].set_bool_param(true);
    grpc::ClientContext oip_context;
    inference::ModelInferResponse reply;
    const grpc::Status s = oip->ModelInfer(&oip_context, r, &reply);
    ASSERT_TRUE(s.ok()) << s.error_message();
    EXPECT_EQ(oip_context.GetServerTrailingMetadata().count("x-request-id"), 1u);

    v1::AttendRequest attend = *AttendFromInfer(r, *FindModel("attention", ""));
    grpc::ClientContext context;
    v1::AttendResponse response;
    ASSERT_TRUE(attention->Attend(&context, attend, &response).ok());
    EXPECT_EQ(reply.raw_output_contents(0), response.output()) << datatype;
    EXPECT_EQ(reply.parameters().at("backend").string_param(), response.backend());
  }
  const std::string metrics = (*server)->metrics().Render();
  EXPECT_NE(metrics.find("attn_requests_total{code=\"OK\",rpc=\"ModelInfer\"} 2"),
            std::string::npos);
  EXPECT_NE(metrics.find("attn_requests_total{code=\"OK\",rpc=\"Attend\"} 2"), std::string::npos);
}

}  // namespace
}  // namespace attn::server::kserve
