// attn-client: the thin CLI of attn-server. It asks, shows and saves; all measuring happens on
// the server. `attn-client --help` and `attn-client <subcommand> --help` list every option.
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "client/commands.h"

namespace {

using attn::client::OptionSpec;

struct Subcommand {
  const char* name;
  const char* summary;
  std::vector<OptionSpec> (*specs)();
};

const Subcommand kSubcommands[] = {
    {"info", "the server: version, CUDA and cuDNN, devices, backends with their verdicts, limits",
     attn::client::InfoSpecs},
    {"health", "grpc.health.v1 status of the server and of attention.v1.AttentionService",
     attn::client::HealthSpecs},
    {"attend",
     "one attention call: inputs from a seed or .npy files, output to .npy, --check "
     "against the float64 reference computed locally",
     attn::client::AttendSpecs},
    {"bench",
     "a benchmark job (a named suite or axes), as the codelab's tables, CSV/JSON, and "
     "--out DIR for results.csv, results.json and report.html",
     attn::client::BenchSpecs},
};

std::string Usage() {
  std::string out =
      "usage: attn-client [--target=HOST:PORT] <subcommand> [options]\n\n"
      "The thin client of attn-server (the attention service). Subcommands:\n";
  for (const auto& s : kSubcommands)
    out += absl::StrCat("  ", s.name, std::string(9 - std::string(s.name).size(), ' '), s.summary,
                        "\n");
  out += "\nOptions every subcommand takes:\n" +
         attn::client::OptionsHelp(attn::client::CommonSpecs());
  out +=
      "\nExit codes: 0 all ok; 1 a call or a case failed; 2 the command line was wrong; 130 "
      "interrupted.\n"
      "`attn-client <subcommand> --help` lists its options.\n";
  return out;
}

}  // namespace

int main(int argc, char** argv) {
  using namespace attn::client;
  // gRPC's own log lines (a failed TLS handshake, say) would come before the one-line error this
  // client prints with what to fix; $GRPC_VERBOSITY set by the user still wins.
  setenv("GRPC_VERBOSITY", "NONE", /*overwrite=*/0);
  std::vector<std::string> args(argv + 1, argv + argc);
  // The subcommand is the first word that is not an option or the value of a common option.
  const std::vector<OptionSpec> common_specs = CommonSpecs();
  int sub_index = -1;
  for (size_t i = 0; i < args.size(); ++i) {
    if (args[i].rfind("--", 0) == 0) {
      std::string name = args[i].substr(2);
      for (char& c : name) c = c == '-' ? '_' : c;
      if (name.find('=') != std::string::npos) continue;
      for (const auto& s : common_specs) {
        if (s.name == name && !s.value_name.empty()) ++i;  // skip its value
      }
      continue;
    }
    sub_index = static_cast<int>(i);
    break;
  }
  if (sub_index < 0) {
    const bool help = !args.empty() && (args[0] == "--help" || args[0] == "-h");
    std::fputs(Usage().c_str(), help ? stdout : stderr);
    return help ? kExitOk : kExitUsage;
  }
  const std::string name = args[static_cast<size_t>(sub_index)];
  const Subcommand* sub = nullptr;
  for (const auto& s : kSubcommands) {
    if (name == s.name) sub = &s;
  }
  if (sub == nullptr) {
    return Fail(kExitUsage, absl::StrCat("unknown subcommand '", name,
                                         "'; expected info, health, attend or bench (see --help)"));
  }
  args.erase(args.begin() + sub_index);
  std::vector<OptionSpec> specs = common_specs;
  for (auto& s : sub->specs()) specs.push_back(s);
  auto parsed = ParseArgs(specs, args);
  if (!parsed.ok()) {
    return Fail(kExitUsage,
                absl::StrCat(parsed.status().message(), "; see attn-client ", name, " --help"));
  }
  if (parsed->GetBool("help")) {
    std::printf("usage: attn-client %s [options]\n\n%s.\n\nOptions:\n%s", sub->name, sub->summary,
                OptionsHelp(specs).c_str());
    return kExitOk;
  }
  if (!parsed->positional().empty()) {
    return Fail(kExitUsage,
                absl::StrCat("unexpected argument '", parsed->positional().front(),
                             "'; options are --name=value (see attn-client ", name, " --help)"));
  }
  CommonOptions common;
  common.target_spec = parsed->Get("target");
  auto target = ParseTarget(common.target_spec);
  if (!target.ok()) return Fail(kExitUsage, std::string(target.status().message()));
  common.target = *target;
  auto timeout = parsed->GetDouble("timeout");
  if (!timeout.ok() || *timeout < 0) {
    return Fail(kExitUsage, "--timeout: expected seconds >= 0 (0: the default)");
  }
  common.timeout_s = *timeout;
  common.format = parsed->Get("format");
  if (common.format != "table" && common.format != "csv" && common.format != "json") {
    return Fail(kExitUsage,
                absl::StrCat("--format: expected table, csv or json; got '", common.format, "'"));
  }
  common.client_id = parsed->Get("client_id");
  if (auto s = SetSecurity(parsed->GetBool("tls"), parsed->Get("tls_ca_file"), parsed->Get("token"),
                           parsed->GetBool("insecure_token"), common.target_spec, common.target);
      !s.ok()) {
    return Fail(kExitUsage, std::string(s.message()));
  }
  if (name == "info") return RunInfo(common, *parsed);
  if (name == "health") return RunHealth(common, *parsed);
  if (name == "attend") return RunAttend(common, *parsed);
  std::vector<std::string> words = {"attn-client"};
  for (int i = 1; i < argc; ++i) words.emplace_back(argv[i]);
  return RunBench(common, *parsed, RecordedCommandLine(words, specs));
}
