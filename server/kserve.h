// The Open Inference Protocol (KServe v2) models attn serves, and the conversions between their
// requests and attention.v1's: a ModelInfer is an Attend (server/kserve_service.h runs it on the
// same path), so validation, admission, fairness, deadlines and tokens are those of Attend.
//
// Models, version "1" each:
//   attention            inputs Q (B, T, N, H), K and V (B, S, K, H); output O (B, T, N, H); one
//                        datatype for all four: FP32, FP16 or BF16. Request parameters: causal
//                        (bool), scale (double; 0 or unset: 1/sqrt(H)), backend (string; unset:
//                        auto).
//   attention_<backend>  the same with the backend fixed, for tools that cannot send parameters
//                        (one per backend of the engine: attention_cpu, attention_cudnn, ...).
// Tensors travel as raw_input_contents (little-endian, row-major), or FP32 as fp32_contents; O
// comes back as raw_output_contents. Errors: INVALID_ARGUMENT naming the OIP field, NOT_FOUND for
// a model or version that does not exist; everything else as Attend's.
#pragma once

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "attention/v1/attention.pb.h"
#include "inference/grpc_service.pb.h"

namespace attn::server::kserve {

inline constexpr char kModelPrefix[] = "attention";  // the model, and its variants' prefix
inline constexpr char kModelVersion[] = "1";
inline constexpr char kPlatform[] = "attn";
// The datatype the models' metadata and configuration advertise (the codelab's default dtype, so
// perf_analyzer sends it); ModelInfer takes FP32 and FP16 as well.
inline constexpr char kAdvertisedDatatype[] = "BF16";

struct Model {
  std::string name;
  std::string backend;  // empty: chosen per request (parameter backend, default auto)
};

// Every model this engine serves: "attention", then "attention_<backend>" per registered backend.
std::vector<Model> Models();

// The model `name` at `version` ("" or kModelVersion); NotFound naming the models otherwise.
absl::StatusOr<Model> FindModel(const std::string& name, const std::string& version);

// The Attend a ModelInfer asks for. InvalidArgument names the OIP field and the rule
// ("inputs[1].shape (K): ...", "raw_input_contents[2] (V): ...", "parameters.scale: ...").
absl::StatusOr<attention::v1::AttendRequest> AttendFromInfer(
    const inference::ModelInferRequest& request, const Model& model);

// The ModelInfer reply for `request` from the Attend that ran it; `result`'s output is moved.
void InferFromAttend(const inference::ModelInferRequest& request,
                     const attention::v1::AttendRequest& attend,
                     attention::v1::AttendResponse& result,
                     inference::ModelInferResponse* response);

inference::ModelMetadataResponse Metadata(const Model& model);
inference::ModelConfig Config(const Model& model);

}  // namespace attn::server::kserve
