// A small command-line parser for attn-client's subcommands: each subcommand declares its options
// (name, value name, default, help), so parsing, defaults and --help come from one table.
// Options are written --name=value or --name value; dashes and underscores in names are the same
// (--seq-lens and --seq_lens), so the documented snake_case flags and the dashed spelling both
// work.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace attn::client {

struct OptionSpec {
  std::string name;        // snake_case, without the leading dashes
  std::string value_name;  // "N", "LIST"; empty for a boolean switch
  std::string default_value;
  std::string help;
};

// The parsed options of one subcommand: every declared option has a value (its default unless
// given). Getters return InvalidArgument naming the flag when a value does not parse.
class ParsedArgs {
 public:
  bool Has(const std::string& name) const;  // given on the command line
  std::string Get(const std::string& name) const;
  bool GetBool(const std::string& name) const;  // "true", "1", "yes" (or a bare switch)
  absl::StatusOr<int64_t> GetInt(const std::string& name) const;
  absl::StatusOr<double> GetDouble(const std::string& name) const;
  // A comma list of integers, each > 0 ("128,256"); empty items are an error.
  absl::StatusOr<std::vector<int64_t>> GetIntList(const std::string& name) const;
  std::vector<std::string> GetList(const std::string& name) const;  // comma list of words
  const std::vector<std::string>& positional() const { return positional_; }

 private:
  friend absl::StatusOr<ParsedArgs> ParseArgs(const std::vector<OptionSpec>&,
                                              const std::vector<std::string>&);
  std::map<std::string, std::string> values_;
  std::map<std::string, bool> given_;
  std::vector<std::string> positional_;
};

// Parses `args` against `specs`. InvalidArgument for unknown options ("--seq-len: unknown option
// for bench; see attn-client bench --help") or a missing value. "--help" is reported as the
// value "help" = "true" and is always accepted.
absl::StatusOr<ParsedArgs> ParseArgs(const std::vector<OptionSpec>& specs,
                                     const std::vector<std::string>& args);

// The options part of a subcommand's --help: one line per option with its default.
std::string OptionsHelp(const std::vector<OptionSpec>& specs);

// `words` (argv) as one line for reports that others read (results.json, report.html): the value
// of every option whose name says it is a secret (token, secret, key, password) replaced by
// <redacted>, in the --name=value and the --name value forms.
std::string RecordedCommandLine(const std::vector<std::string>& words,
                                const std::vector<OptionSpec>& specs);

}  // namespace attn::client
