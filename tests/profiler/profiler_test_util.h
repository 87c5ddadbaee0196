// What the profiler tests share: picking events out of a profile and reading
// an exported Chrome trace back with nlohmann::json.
#pragma once

#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "frontend/fusebox.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"

namespace fusebox::profiler_testing {

inline std::vector<ProfilerEvent> Named(const std::vector<ProfilerEvent>& events, const std::string& name) {
  std::vector<ProfilerEvent> out;
  for (const ProfilerEvent& e : events) {
    if (e.name == name) out.push_back(e);
  }
  return out;
}

inline const ProfilerEvent* FindId(const std::vector<ProfilerEvent>& events, int64_t id) {
  for (const ProfilerEvent& e : events) {
    if (e.id == id) return &e;
  }
  return nullptr;
}

// A fresh path in the temp directory, unique per process and test.
inline std::string TracePath() {
  const auto* test = ::testing::UnitTest::GetInstance()->current_test_info();
  return (std::filesystem::temp_directory_path() /
          absl::StrCat("fusebox-trace-", getpid(), "-", test->name(), ".json"))
      .string();
}

// Exports `prof`'s trace and parses it back; fails the test if it is no JSON.
inline nlohmann::json ExportAndParse(const Profiler& prof) {
  const std::string path = TracePath();
  prof.export_chrome_trace(path);
  std::ifstream in(path);
  nlohmann::json trace = nlohmann::json::parse(in, nullptr, /*allow_exceptions=*/false);
  std::filesystem::remove(path);
  EXPECT_FALSE(trace.is_discarded()) << "the Chrome trace is not valid JSON";
  return trace;
}

// The trace's events with phase `ph` ("X", "M", "s", "f").
inline std::vector<nlohmann::json> Phase(const nlohmann::json& trace, const std::string& ph) {
  std::vector<nlohmann::json> out;
  for (const nlohmann::json& e : trace.at("traceEvents")) {
    if (e.at("ph") == ph) out.push_back(e);
  }
  return out;
}

}  // namespace fusebox::profiler_testing
