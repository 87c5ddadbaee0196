// Shared test main: every kernel compiled for the CPU is also compiled for
// sm_90 by NVRTC (no GPU needed), and the compile cache lives in a fresh
// directory per run unless FUSEBOX_CACHE_DIR is set.
#include <cstdlib>
#include <filesystem>

#include "backend/executable.h"
#include "gtest/gtest.h"

int main(int argc, char** argv) {
  if (std::getenv("FUSEBOX_CACHE_DIR") == nullptr) {
    const auto dir = std::filesystem::temp_directory_path() / "fusebox-test-cache";
    ::setenv("FUSEBOX_CACHE_DIR", dir.c_str(), 0);
  }
  fusebox::backend::SetAlsoCompileCudaForCpu(true);
  ::testing::InitGoogleTest(&argc, argv);
  return RUN_ALL_TESTS();
}
