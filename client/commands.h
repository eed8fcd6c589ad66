// attn-client's subcommands. Each takes the options every subcommand shares and its own parsed
// options, and returns the process exit code: 0 all ok, 1 a call or some case failed, 2 the
// command line was wrong (or the server rejected it as INVALID_ARGUMENT), 130 interrupted.
#pragma once

#include <string>
#include <vector>

#include "client/args.h"
#include "client/connection.h"

namespace attn::client {

inline constexpr int kExitOk = 0, kExitFailed = 1, kExitUsage = 2, kExitInterrupted = 130;

struct CommonOptions {
  std::string target_spec;  // --target as given
  Target target;
  double timeout_s = 0;   // --timeout; 0: none (bench) / 60 s (other calls)
  std::string format;     // --format: table, csv, json
  std::string client_id;  // --client_id: the server's fairness key
};

// The options shared by every subcommand (--target, --timeout, --format, --client_id).
std::vector<OptionSpec> CommonSpecs();

std::vector<OptionSpec> InfoSpecs();
std::vector<OptionSpec> HealthSpecs();
std::vector<OptionSpec> AttendSpecs();
std::vector<OptionSpec> BenchSpecs();

int RunInfo(const CommonOptions& common, const ParsedArgs& args);
int RunHealth(const CommonOptions& common, const ParsedArgs& args);
int RunAttend(const CommonOptions& common, const ParsedArgs& args);
int RunBench(const CommonOptions& common, const ParsedArgs& args, const std::string& command_line);

// "attn-client: <message>" on stderr; returns `code`.
int Fail(int code, const std::string& message);

}  // namespace attn::client
