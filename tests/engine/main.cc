// attn_engine_tests' main: GoogleTest's flags, and --device_cap=NAME, which caps the dispatch
// at a smaller device (attn/device.h's SetDeviceCapOverride) before any test makes a context:
// every test then sees the capped device and holds it to that device's rules and paths.
// `--device_cap=sm_89` runs an sm_89 build on a Hopper GPU as an L4 would run it (bench/gpu.sh l4).
#include <cstdio>
#include <optional>
#include <string>
#include <string_view>

#include "attn/device.h"
#include "gtest/gtest.h"

int main(int argc, char** argv) {
  ::testing::InitGoogleTest(&argc, argv);  // takes its --gtest_* flags out of argv
  constexpr std::string_view kCapFlag = "--device_cap=";
  for (int i = 1; i < argc; ++i) {
    const std::string_view arg = argv[i];
    if (arg == "--help" || arg == "-h" || arg == "-?" || arg == "/?") {  // GoogleTest's, left here
      std::printf(
          "\nattn_engine_tests also takes:\n  --device_cap=sm_89\n      Cap every CUDA device at "
          "an L4's limits (compute capability 8.9, its shared\n      memory and SMs), so the "
          "backends take the L4's paths.\n");
      continue;
    }
    std::optional<attn::DeviceCap> cap;
    if (arg.substr(0, kCapFlag.size()) == kCapFlag) {
      cap = attn::DeviceCapNamed(arg.substr(kCapFlag.size()));
    }
    if (!cap) {
      std::fprintf(stderr,
                   "attn_engine_tests: unknown argument '%s'; takes GoogleTest's flags and "
                   "--device_cap=sm_89\n",
                   argv[i]);
      return 2;
    }
    attn::SetDeviceCapOverride(cap);
    std::fprintf(stderr, "attn_engine_tests: every CUDA device capped at %s\n",
                 std::string(attn::DeviceCapName(*cap)).c_str());
  }
  return RUN_ALL_TESTS();
}
