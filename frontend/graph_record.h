// What explain() reports about one captured graph.
#pragma once

#include <string>
#include <vector>

namespace fusebox::frontend {

// What explain() reports about one captured graph.
struct GraphRecord {
  std::string graph_text;                // the graph as captured (after dead-node removal)
  std::vector<std::string> ops;          // op names in the graph, in order
  std::vector<std::string> kernel_names;
  std::vector<std::string> fusion_notes;  // why values were not fused together
  std::string end_reason;                // "end of compiled function", "item() called"
  std::string location;                  // "file.cc:42" of the call that ended it
  bool from_cache = false;               // the plan was already compiled
  // Each graph input as "float32[1024, 4096] strides [4096, 1] on cpu": what a
  // recompile reason compares.
  std::vector<std::string> inputs;
};

}  // namespace fusebox::frontend
