#include "backend/ptx_summary.h"

#include <algorithm>
#include <optional>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"

namespace fusebox {
namespace {

// Bytes of one element of a PTX type suffix ("f32" -> 4); 0 when `t` is none.
int TypeBytes(absl::string_view t) {
  if (t == "b8" || t == "u8" || t == "s8") return 1;
  if (t == "b16" || t == "u16" || t == "s16" || t == "f16" || t == "bf16") return 2;
  if (t == "b32" || t == "u32" || t == "s32" || t == "f32" || t == "f16x2" || t == "bf16x2") return 4;
  if (t == "b64" || t == "u64" || t == "s64" || t == "f64") return 8;
  if (t == "b128") return 16;
  return 0;
}

// "4 x 4B + 2 x 16B", or "0".
std::string Widths(const std::map<int, int64_t>& by_width) {
  if (by_width.empty()) return "0";
  return absl::StrJoin(by_width, " + ", [](std::string* out, const auto& entry) {
    absl::StrAppend(out, entry.second, " x ", entry.first, "B");
  });
}

// The number right before `suffix` in `line` ("128 bytes smem" -> 128).
std::optional<int64_t> NumberBefore(absl::string_view line, absl::string_view suffix) {
  const size_t at = line.find(suffix);
  if (at == absl::string_view::npos) return std::nullopt;
  size_t begin = at;
  while (begin > 0 && absl::ascii_isdigit(static_cast<unsigned char>(line[begin - 1]))) --begin;
  int64_t value = 0;
  if (!absl::SimpleAtoi(line.substr(begin, at - begin), &value)) return std::nullopt;
  return value;
}

// A cp.async instruction's operands after its mnemonic ("[%r1], [%rd2], 16;",
// optionally followed by a source size and a cache policy): the copy's size,
// its third operand.
int AsyncCopyBytes(absl::string_view operands) {
  const std::vector<absl::string_view> parts = absl::StrSplit(operands, ',');
  int bytes = 0;
  if (parts.size() < 3) return 0;
  return absl::SimpleAtoi(absl::StripAsciiWhitespace(absl::StripSuffix(absl::StripAsciiWhitespace(parts[2]), ";")), &bytes)
             ? bytes
             : 0;
}

// One memory instruction's mnemonic ("ld.global.nc.v4.f32"): counted into
// `summary` when it touches global or shared memory.
void CountMemory(absl::string_view mnemonic, PtxSummary* summary) {
  const std::vector<absl::string_view> parts = absl::StrSplit(mnemonic, '.');
  const bool load = parts[0] == "ld" || parts[0] == "ldu";
  if (!load && parts[0] != "st") return;
  bool global = false, shared = false;
  int vector = 1;
  for (absl::string_view p : parts) {
    global = global || p == "global";
    shared = shared || absl::StartsWith(p, "shared");  // also shared::cta
    if (p == "v2" || p == "v4" || p == "v8") vector = p[1] - '0';
  }
  if (!global && !shared) return;  // param, local (spills: see the ptxas log), generic
  const int width = vector * TypeBytes(parts.back());
  std::map<int, int64_t>& counts = global ? (load ? summary->global_loads : summary->global_stores)
                                          : (load ? summary->shared_loads : summary->shared_stores);
  ++counts[width];
}

}  // namespace

std::string PtxSummary::ToString() const {
  std::string out = absl::StrCat("loads: ", Widths(global_loads), ", stores: ", Widths(global_stores),
                                 ", shfl.sync: ", shfl_sync, ", registers: ", registers, ", spills: ");
  if (spill_store_bytes == 0 && spill_load_bytes == 0) {
    absl::StrAppend(&out, "0 B");
  } else {
    absl::StrAppend(&out, spill_store_bytes, " B stored, ", spill_load_bytes, " B loaded");
  }
  absl::StrAppend(&out, ", smem: ", shared_memory_bytes, " B");
  if (!shared_loads.empty() || !shared_stores.empty()) {
    absl::StrAppend(&out, ", shared loads: ", Widths(shared_loads), ", shared stores: ", Widths(shared_stores));
  }
  if (stack_frame_bytes > 0) absl::StrAppend(&out, ", stack: ", stack_frame_bytes, " B");
  if (!async_copies.empty()) absl::StrAppend(&out, ", cp.async: ", Widths(async_copies));
  return out;
}

namespace backend {

PtxSummary SummarizePtx(absl::string_view ptx, absl::string_view ptxas_log) {
  PtxSummary s;
  for (absl::string_view line : absl::StrSplit(ptx, '\n')) {
    line = absl::StripLeadingAsciiWhitespace(line);
    if (absl::ConsumePrefix(&line, "@")) {  // a guard predicate: "@%p1 ld.global.f32 ..."
      const size_t space = line.find_first_of(" \t");
      line = space == absl::string_view::npos ? "" : absl::StripLeadingAsciiWhitespace(line.substr(space));
    }
    const absl::string_view mnemonic = line.substr(0, line.find_first_of(" \t;"));
    if (absl::StartsWith(mnemonic, "shfl.sync")) ++s.shfl_sync;
    if (absl::StartsWith(mnemonic, "cp.async.") && absl::StrContains(mnemonic, ".shared") &&
        absl::StrContains(mnemonic, ".global")) {
      ++s.async_copies[AsyncCopyBytes(line.substr(mnemonic.size()))];
    }
    CountMemory(mnemonic, &s);
  }
  for (absl::string_view line : absl::StrSplit(ptxas_log, '\n')) {
    if (const size_t used = line.find("Used "); used != absl::string_view::npos) {
      if (auto regs = NumberBefore(line.substr(used), " registers")) s.registers = std::max<int>(s.registers, *regs);
    }
    if (auto smem = NumberBefore(line, " bytes smem")) s.shared_memory_bytes = std::max(s.shared_memory_bytes, *smem);
    if (auto stack = NumberBefore(line, " bytes stack frame")) s.stack_frame_bytes = std::max(s.stack_frame_bytes, *stack);
    if (auto st = NumberBefore(line, " bytes spill stores")) s.spill_store_bytes += *st;
    if (auto ld = NumberBefore(line, " bytes spill loads")) s.spill_load_bytes += *ld;
  }
  return s;
}

}  // namespace backend
}  // namespace fusebox
