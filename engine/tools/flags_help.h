// --help for attn's binaries. absl's own --help lists only the flags defined in a file named
// after the program (for attn-server: none, so it printed "No flags matched" and exited 1);
// this lists every flag the program defines outside abseil, with its default, and exits 0.
#pragma once

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "absl/flags/commandlineflag.h"
#include "absl/flags/reflection.h"
#include "absl/flags/usage.h"
#include "absl/strings/match.h"
#include "absl/strings/string_view.h"

namespace attn {

// Sets `usage` as the program's usage message; when argv asks for help (--help, -help, -h,
// --helpfull), prints it and every flag, then exits 0. Call before absl::ParseCommandLine.
inline void HandleHelpFlag(int argc, char** argv, const char* usage) {
  absl::SetProgramUsageMessage(usage);
  bool help = false;
  for (int i = 1; i < argc && !help; ++i) {
    const absl::string_view a = argv[i];
    if (a == "--") break;
    help = a == "--help" || a == "-help" || a == "-h" || a == "--helpfull" || a == "-helpfull";
  }
  if (!help) return;
  std::vector<const absl::CommandLineFlag*> flags;
  for (const auto& [name, flag] : absl::GetAllFlags()) {
    if (!absl::StrContains(flag->Filename(), "absl/")) flags.push_back(flag);
  }
  std::sort(flags.begin(), flags.end(),
            [](const auto* a, const auto* b) { return a->Name() < b->Name(); });
  std::printf("%s\n\nFlags (--name=value):\n", usage);
  for (const absl::CommandLineFlag* f : flags) {
    std::printf("  --%s (default: \"%s\")\n      %s\n", std::string(f->Name()).c_str(),
                f->DefaultValue().c_str(), f->Help().c_str());
  }
  std::printf("  --flagfile=FILE\n      read more flags from FILE, one --name=value per line\n");
  std::exit(0);
}

}  // namespace attn
