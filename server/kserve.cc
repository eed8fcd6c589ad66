#include "server/kserve.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "attn/registry.h"
#include "server/validation.h"

namespace attn::server::kserve {
namespace v1 = attention::v1;
namespace {

// The tensors, in the order of AttendRequest's fields.
constexpr const char* kInputs[3] = {"Q", "K", "V"};
constexpr const char* kOutput = "O";
// Request parameters Triton's clients send on their own: scheduling hints (attn schedules by its
// fair queue and the call's deadline) and perf_analyzer's flag for decoupled models (attn's are
// not). Accepted and not used.
constexpr const char* kIgnoredParameters[] = {"priority", "timeout",
                                              "triton_enable_empty_final_response"};

struct Datatype {
  const char* name;
  v1::DType dtype;
  inference::DataType config;
  int64_t size;
};
constexpr Datatype kDatatypes[] = {{"FP32", v1::FLOAT32, inference::TYPE_FP32, 4},
                                   {"FP16", v1::FLOAT16, inference::TYPE_FP16, 2},
                                   {"BF16", v1::BFLOAT16, inference::TYPE_BF16, 2}};

const Datatype* FindDatatype(const std::string& name) {
  for (const Datatype& d : kDatatypes) {
    if (name == d.name) return &d;
  }
  return nullptr;
}

const Datatype& DatatypeOf(v1::DType dtype) {
  for (const Datatype& d : kDatatypes) {
    if (d.dtype == dtype) return d;
  }
  return kDatatypes[0];
}

std::string ShapeString(const google::protobuf::RepeatedField<int64_t>& shape) {
  return absl::StrCat("[", absl::StrJoin(shape, ","), "]");
}

// Elements of a shape whose dimensions are >= 1; false when the count overflows.
bool Elements(const google::protobuf::RepeatedField<int64_t>& shape, int64_t* out) {
  int64_t n = 1;
  for (int64_t d : shape) {
    if (__builtin_mul_overflow(n, d, &n)) return false;
  }
  *out = n;
  return true;
}

template <typename... Args>
absl::Status Invalid(const absl::FormatSpec<Args...>& format, const Args&... args) {
  return absl::InvalidArgumentError(absl::StrFormat(format, args...));
}

// causal, scale and backend from the request's parameters.
absl::Status ReadParameters(const inference::ModelInferRequest& request, const Model& model,
                            v1::AttendRequest* attend) {
  attend->set_backend(model.backend);
  for (const auto& [key, value] : request.parameters()) {
    const std::string field = absl::StrCat("parameters.", key);
    if (key == "causal") {
      if (value.parameter_choice_case() == inference::InferParameter::kBoolParam) {
        attend->set_causal(value.bool_param());
      } else if (value.parameter_choice_case() == inference::InferParameter::kStringParam &&
                 (value.string_param() == "true" || value.string_param() == "false")) {
        attend->set_causal(value.string_param() == "true");
      } else {
        return Invalid("%s: must be a bool (or the string \"true\" or \"false\")", field);
      }
    } else if (key == "scale") {
      double scale = 0;
      if (value.parameter_choice_case() == inference::InferParameter::kDoubleParam) {
        scale = value.double_param();
      } else if (value.parameter_choice_case() == inference::InferParameter::kInt64Param) {
        scale = static_cast<double>(value.int64_param());
      } else {
        return Invalid("%s: must be a double (0: 1/sqrt(head dim))", field);
      }
      if (!std::isfinite(scale) || scale < 0) {
        return Invalid("%s: must be finite and > 0, or 0 for 1/sqrt(head dim); got %g", field,
                       scale);
      }
      attend->set_scale(scale);
    } else if (key == "backend") {
      if (value.parameter_choice_case() != inference::InferParameter::kStringParam) {
        return Invalid("%s: must be a string (a backend name, or \"auto\")", field);
      }
      if (!model.backend.empty() && value.string_param() != model.backend) {
        return Invalid(
            "%s: model '%s' runs backend %s, got '%s'; use model '%s' to choose per request", field,
            model.name, model.backend, value.string_param(), kModelPrefix);
      }
      if (auto s = ValidateBackendName(value.string_param(), field); !s.ok()) return s;
      attend->set_backend(value.string_param());
    } else if (std::find(std::begin(kIgnoredParameters), std::end(kIgnoredParameters), key) ==
               std::end(kIgnoredParameters)) {
      return Invalid("%s: unknown parameter; model '%s' takes causal, scale and backend", field,
                     model.name);
    }
  }
  return absl::OkStatus();
}

}  // namespace

std::vector<Model> Models() {
  std::vector<Model> models = {{kModelPrefix, ""}};
  for (const auto& b : BackendRegistry::Default().backends()) {
    models.push_back({absl::StrCat(kModelPrefix, "_", b->name()), b->name()});
  }
  return models;
}

absl::StatusOr<Model> FindModel(const std::string& name, const std::string& version) {
  std::vector<std::string> names;
  for (Model& m : Models()) {
    if (m.name != name) {
      names.push_back(m.name);
      continue;
    }
    if (!version.empty() && version != kModelVersion) {
      return absl::NotFoundError(absl::StrFormat(
          "model_version: model '%s' has version %s only, got '%s'", name, kModelVersion, version));
    }
    return m;
  }
  return absl::NotFoundError(absl::StrFormat("model_name: unknown model '%s'; this server has %s",
                                             name, absl::StrJoin(names, ", ")));
}

absl::StatusOr<v1::AttendRequest> AttendFromInfer(const inference::ModelInferRequest& request,
                                                  const Model& model) {
  v1::AttendRequest attend;
  if (auto s = ReadParameters(request, model, &attend); !s.ok()) return s;
  // inputs: Q, K and V once each, one datatype, rank 4 with every dimension >= 1.
  if (request.inputs_size() != 3) {
    return Invalid("inputs: model '%s' takes 3 inputs (Q, K, V), got %d", model.name,
                   request.inputs_size());
  }
  const inference::ModelInferRequest::InferInputTensor* tensors[3] = {};
  int index[3] = {};
  for (int i = 0; i < 3; ++i) {
    const auto& input = request.inputs(i);
    const auto* known = std::find_if(std::begin(kInputs), std::end(kInputs),
                                     [&](const char* n) { return input.name() == n; });
    if (known == std::end(kInputs)) {
      return Invalid("inputs[%d].name: unknown input '%s'; model '%s' takes Q, K and V", i,
                     input.name(), model.name);
    }
    const int slot = static_cast<int>(known - std::begin(kInputs));
    if (tensors[slot] != nullptr) {
      return Invalid("inputs[%d].name: input %s is given twice (also inputs[%d])", i, input.name(),
                     index[slot]);
    }
    tensors[slot] = &input;
    index[slot] = i;
    if (!input.parameters().empty()) {
      return Invalid(
          "inputs[%d].parameters (%s): attn takes no tensor parameters (no shared "
          "memory); got '%s'",
          i, input.name(), input.parameters().begin()->first);
    }
    if (FindDatatype(input.datatype()) == nullptr) {
      return Invalid("inputs[%d].datatype (%s): must be FP32, FP16 or BF16, got '%s'", i,
                     input.name(), input.datatype());
    }
    if (input.shape_size() != 4) {
      return Invalid("inputs[%d].shape (%s): must have 4 dimensions %s, got %s", i, input.name(),
                     slot == 0 ? "[B, T, N, H]" : "[B, S, K, H]", ShapeString(input.shape()));
    }
    for (int d = 0; d < 4; ++d) {
      if (input.shape(d) < 1) {
        return Invalid("inputs[%d].shape (%s): dimension %d must be >= 1, got %s", i, input.name(),
                       d, ShapeString(input.shape()));
      }
    }
  }
  const auto& q = *tensors[0];
  const auto& k = *tensors[1];
  const auto& v = *tensors[2];
  for (int slot : {1, 2}) {
    if (tensors[slot]->datatype() != q.datatype()) {
      return Invalid(
          "inputs[%d].datatype (%s): %s differs from Q's %s; Q, K and V share one datatype",
          index[slot], kInputs[slot], tensors[slot]->datatype(), q.datatype());
    }
  }
  if (k.shape(0) != q.shape(0) || k.shape(3) != q.shape(3)) {
    return Invalid(
        "inputs[%d].shape (K): %s must have Q's batch (%d) and head dim (%d): [B, S, K, H] "
        "beside Q's [B, T, N, H] %s",
        index[1], ShapeString(k.shape()), q.shape(0), q.shape(3), ShapeString(q.shape()));
  }
  if (!std::equal(v.shape().begin(), v.shape().end(), k.shape().begin())) {
    return Invalid("inputs[%d].shape (V): %s must equal K's %s", index[2], ShapeString(v.shape()),
                   ShapeString(k.shape()));
  }
  const Datatype& type = *FindDatatype(q.datatype());
  v1::Shape* shape = attend.mutable_shape();
  shape->set_batch(q.shape(0));
  shape->set_q_len(q.shape(1));
  shape->set_num_heads(q.shape(2));
  shape->set_head_dim(q.shape(3));
  shape->set_kv_len(k.shape(1));
  shape->set_num_kv_heads(k.shape(2));
  attend.set_dtype(type.dtype);
  // The engine's own rules on the problem (GQA's head ratio, sizes), under the inputs' names.
  if (auto p =
          ProblemFromProto(attend.shape(), attend.dtype(), attend.causal(), attend.scale(), "");
      !p.ok()) {
    return Invalid("inputs (Q %s, K %s): %s", ShapeString(q.shape()), ShapeString(k.shape()),
                   p.status().message());
  }
  // The data: raw_input_contents for every input, or each input's typed contents (FP32 only).
  const bool raw = request.raw_input_contents_size() > 0;
  if (raw && request.raw_input_contents_size() != 3) {
    return Invalid(
        "raw_input_contents: %d entries for 3 inputs; give one per input, in the order of inputs",
        request.raw_input_contents_size());
  }
  std::string* dst[3] = {attend.mutable_tensors()->mutable_q(),
                         attend.mutable_tensors()->mutable_k(),
                         attend.mutable_tensors()->mutable_v()};
  for (int slot = 0; slot < 3; ++slot) {
    const auto& input = *tensors[slot];
    const int i = index[slot];
    int64_t elements = 0;
    if (!Elements(input.shape(), &elements) || elements > (int64_t{1} << 40)) {
      return Invalid("inputs[%d].shape (%s): %s is too large", i, input.name(),
                     ShapeString(input.shape()));
    }
    if (raw) {
      if (input.has_contents()) {
        return Invalid(
            "inputs[%d].contents (%s): set with raw_input_contents; use one or the other "
            "for all inputs",
            i, input.name());
      }
      const std::string& bytes = request.raw_input_contents(i);
      if (static_cast<int64_t>(bytes.size()) != elements * type.size) {
        return Invalid(
            "raw_input_contents[%d] (%s): %d bytes, expected %d (shape %s = %d elements "
            "of %s, %d bytes each)",
            i, input.name(), bytes.size(), elements * type.size, ShapeString(input.shape()),
            elements, type.name, type.size);
      }
      *dst[slot] = bytes;
      continue;
    }
    if (type.dtype != v1::FLOAT32) {
      return Invalid(
          "raw_input_contents: %s tensors travel as raw bytes (the protocol has no typed "
          "contents for them); input %s has none",
          type.name, input.name());
    }
    const auto& values = input.contents().fp32_contents();
    if (values.size() != elements) {
      return Invalid("inputs[%d].contents.fp32_contents (%s): %d values, expected %d (shape %s)", i,
                     input.name(), values.size(), elements, ShapeString(input.shape()));
    }
    dst[slot]->resize(static_cast<size_t>(elements) * sizeof(float));
    std::memcpy(dst[slot]->data(), values.data(), dst[slot]->size());  // little-endian hosts
  }
  for (int i = 0; i < request.outputs_size(); ++i) {
    const auto& output = request.outputs(i);
    if (output.name() != kOutput) {
      return Invalid("outputs[%d].name: unknown output '%s'; model '%s' has O", i, output.name(),
                     model.name);
    }
    if (!output.parameters().empty()) {
      return Invalid("outputs[%d].parameters (O): attn takes no output parameters; got '%s'", i,
                     output.parameters().begin()->first);
    }
  }
  return attend;
}

void InferFromAttend(const inference::ModelInferRequest& request, const v1::AttendRequest& attend,
                     v1::AttendResponse& result, inference::ModelInferResponse* response) {
  response->set_model_name(request.model_name());
  response->set_model_version(kModelVersion);
  response->set_id(request.id());
  auto* out = response->add_outputs();
  out->set_name(kOutput);
  out->set_datatype(DatatypeOf(attend.dtype()).name);
  const v1::Shape& s = attend.shape();
  for (int64_t d : {s.batch(), s.q_len(), s.num_heads(), s.head_dim()}) out->add_shape(d);
  *response->add_raw_output_contents() = std::move(*result.mutable_output());
  // What ran and how long it took, as attention.v1 reports it.
  auto& p = *response->mutable_parameters();
  p["backend"].set_string_param(result.backend());
  p["device"].set_int64_param(result.device());
  p["hostname"].set_string_param(result.hostname());
  p["queue_seconds"].set_double_param(result.timings().queue_seconds());
  p["device_seconds"].set_double_param(result.timings().device_seconds());
  p["total_seconds"].set_double_param(result.timings().total_seconds());
}

inference::ModelMetadataResponse Metadata(const Model& model) {
  inference::ModelMetadataResponse m;
  m.set_name(model.name);
  m.mutable_versions()->Add(std::string(kModelVersion));
  m.set_platform(kPlatform);
  for (const char* name : kInputs) {
    auto* t = m.add_inputs();
    t->set_name(name);
    t->set_datatype(kAdvertisedDatatype);
    for (int d = 0; d < 4; ++d) t->add_shape(-1);
  }
  auto* o = m.add_outputs();
  o->set_name(kOutput);
  o->set_datatype(kAdvertisedDatatype);
  for (int d = 0; d < 4; ++d) o->add_shape(-1);
  return m;
}

inference::ModelConfig Config(const Model& model) {
  const inference::DataType type = FindDatatype(kAdvertisedDatatype)->config;
  inference::ModelConfig c;
  c.set_name(model.name);
  c.set_platform(kPlatform);
  c.set_backend(model.backend.empty() ? std::string(kAutoBackend) : model.backend);
  c.set_max_batch_size(0);  // B is each tensor's first dimension, not a batching dimension
  for (const char* name : kInputs) {
    auto* in = c.add_input();
    in->set_name(name);
    in->set_data_type(type);
    for (int d = 0; d < 4; ++d) in->add_dims(-1);
  }
  auto* out = c.add_output();
  out->set_name(kOutput);
  out->set_data_type(type);
  for (int d = 0; d < 4; ++d) out->add_dims(-1);
  return c;
}

}  // namespace attn::server::kserve
