#include "profiler/profiler.h"

#include <algorithm>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "profiler/recorder.h"
#include "tensor/error.h"

namespace fusebox {
namespace {

// sort_by keys, torch.profiler's spellings; `value` null: by name, ascending.
struct SortKey {
  const char* name;
  double (*value)(const ProfilerRow&);
};
constexpr SortKey kSortKeys[] = {
    {"cuda_time_total", [](const ProfilerRow& r) { return r.cuda_time_total_us; }},
    {"cpu_time_total", [](const ProfilerRow& r) { return r.cpu_time_total_us; }},
    {"cuda_time", [](const ProfilerRow& r) { return r.cuda_time_avg_us(); }},
    {"cpu_time", [](const ProfilerRow& r) { return r.cpu_time_avg_us(); }},
    {"count", [](const ProfilerRow& r) { return static_cast<double>(r.calls); }},
    {"name", nullptr},
};

const SortKey& FindSortKey(const std::string& sort_by) {
  for (const SortKey& key : kSortKeys) {
    if (sort_by == key.name) return key;
  }
  std::vector<std::string> valid;
  for (const SortKey& key : kSortKeys) valid.push_back(key.name);
  throw Error(absl::StrCat("Profiler: unknown sort_by '", sort_by, "'; valid keys: ", absl::StrJoin(valid, ", ")));
}

// torch.profiler's units: 12.345us, 1.234ms, 2.000s.
std::string FormatTime(double us) {
  if (us >= 1e6) return absl::StrFormat("%.3fs", us / 1e6);
  if (us >= 1e3) return absl::StrFormat("%.3fms", us / 1e3);
  return absl::StrFormat("%.3fus", us);
}

// Host time of the events no graph run contains (the runs themselves), and
// device time of all kernels: the denominators of the percent columns.
struct Totals {
  double cpu_us = 0, cuda_us = 0;
};

Totals TotalsOf(const std::vector<ProfilerEvent>& events) {
  Totals totals;
  for (const ProfilerEvent& e : events) {
    if (e.parent < 0) totals.cpu_us += e.cpu_time_us;
    if (e.kind == ProfilerEvent::Kind::kKernel) totals.cuda_us += e.cuda_time_us;
  }
  return totals;
}

// Each device's roofline, looked up once per device named by the events.
class RooflineOf {
 public:
  explicit RooflineOf(const Profiler& prof) : prof_(prof) {}
  const Roofline& operator()(const std::string& device) {
    auto [it, added] = cache_.try_emplace(device);
    if (added) it->second = prof_.roofline(profiler::ParseDevice(device));
    return it->second;
  }
  const absl::flat_hash_map<std::string, Roofline>& seen() const { return cache_; }

 private:
  const Profiler& prof_;
  absl::flat_hash_map<std::string, Roofline> cache_;
};

// A kernel's time: on the device for CUDA kernels, its execution on the CPU.
double KernelTimeUs(const ProfilerEvent& e) { return e.cuda_start_us >= 0 ? e.cuda_time_us : e.cpu_time_us; }

std::vector<ProfilerRow> Rows(const std::vector<ProfilerEvent>& events, const SortKey& key, RooflineOf& roofline) {
  std::vector<ProfilerRow> rows;
  absl::flat_hash_map<std::string, size_t> index;
  for (const ProfilerEvent& e : events) {
    auto [it, added] = index.emplace(e.name, rows.size());
    if (added) rows.push_back({.name = e.name});
    ProfilerRow& row = rows[it->second];
    ++row.calls;
    row.launches += e.launches;
    row.cpu_time_total_us += e.cpu_time_us;
    row.cuda_time_total_us += e.cuda_time_us;
    if (e.kind != ProfilerEvent::Kind::kKernel) continue;
    const Roofline& r = roofline(e.device);
    // A name whose calls all ran where there is a roofline has one.
    if (!row.kernel) row.roofline_time_total_us = r.known() ? 0 : -1;
    row.kernel = true;
    row.bytes_total += static_cast<double>(e.bytes);
    row.flops_total += static_cast<double>(e.flops);
    row.kernel_time_total_us += KernelTimeUs(e);
    if (!r.known()) row.roofline_time_total_us = -1;
    if (row.has_roofline()) {
      row.roofline_time_total_us += 1e6 * r.seconds({.bytes = e.bytes, .flops = e.flops, .math = e.math});
    }
  }
  const Totals totals = TotalsOf(events);
  for (ProfilerRow& row : rows) {
    row.cpu_percent = totals.cpu_us > 0 ? 100.0 * row.cpu_time_total_us / totals.cpu_us : 0;
    row.cuda_percent = totals.cuda_us > 0 ? 100.0 * row.cuda_time_total_us / totals.cuda_us : 0;
  }
  std::stable_sort(rows.begin(), rows.end(), [&](const ProfilerRow& a, const ProfilerRow& b) {
    if (key.value != nullptr) {
      if (key.value(a) != key.value(b)) return key.value(a) > key.value(b);
      if (a.cpu_time_total_us != b.cpu_time_total_us) return a.cpu_time_total_us > b.cpu_time_total_us;
    }
    return a.name < b.name;
  });
  return rows;
}

// 12.3 G, 1.23 T: achieved rates in the table.
std::string Scaled(double v) {
  if (v >= 1e12) return absl::StrFormat("%.2fT", v / 1e12);
  if (v >= 1e9) return absl::StrFormat("%.2fG", v / 1e9);
  if (v >= 1e6) return absl::StrFormat("%.2fM", v / 1e6);
  return absl::StrFormat("%.0f", v);
}

}  // namespace

Profiler::Profiler() : session_(std::make_shared<profiler::Session>()) {
  ThrowIfError(profiler::Activate(session_));
  recording_ = true;
}

Profiler::~Profiler() { stop(); }

void Profiler::stop() {
  if (recording_) profiler::Deactivate(session_.get());
  recording_ = false;
}

std::vector<ProfilerEvent> Profiler::events() const { return ValueOrThrow(session_->Events()); }

std::vector<ProfilerRow> Profiler::summary(const std::string& sort_by) const {
  const SortKey& key = FindSortKey(sort_by);
  RooflineOf roofline(*this);
  return Rows(events(), key, roofline);
}

std::vector<ProfilerRow> Profiler::worst(int n) const {
  std::vector<ProfilerRow> rows;
  for (ProfilerRow& row : summary("name")) {
    if (row.kernel && row.has_roofline()) rows.push_back(std::move(row));
  }
  std::stable_sort(rows.begin(), rows.end(),
                   [](const ProfilerRow& a, const ProfilerRow& b) { return a.time_lost_us() > b.time_lost_us(); });
  if (n >= 0 && static_cast<size_t>(n) < rows.size()) rows.resize(n);
  return rows;
}

void Profiler::set_roofline(Device device, const Roofline& roofline) {
  for (auto& [d, r] : rooflines_) {
    if (d == device) {
      r = roofline;
      return;
    }
  }
  rooflines_.emplace_back(device, roofline);
}

Roofline Profiler::roofline(Device device) const {
  for (const auto& [d, r] : rooflines_) {
    if (d == device) return r;
  }
  return DeviceRoofline(device);
}

std::string Profiler::table(const std::string& sort_by, int row_limit) const {
  const SortKey& key = FindSortKey(sort_by);
  const std::vector<ProfilerEvent> all = events();
  RooflineOf roofline(*this);
  std::vector<ProfilerRow> rows = Rows(all, key, roofline);
  if (row_limit >= 0 && static_cast<size_t>(row_limit) < rows.size()) rows.resize(row_limit);

  // One line of cells per row, the name first; every column as wide as its
  // widest cell (names cut at torch's 55 characters), numbers right-aligned.
  constexpr size_t kMaxName = 55;
  std::vector<std::vector<std::string>> lines = {{"Name", "# of Calls", "CPU total", "CPU time avg", "CPU total %",
                                                  "CUDA total", "CUDA time avg", "CUDA total %", "Launches", "GB/s",
                                                  "FLOP/s", "% Roofline"}};
  for (const ProfilerRow& row : rows) {
    lines.push_back({row.name.size() <= kMaxName ? row.name : absl::StrCat(row.name.substr(0, kMaxName - 3), "..."),
                     absl::StrCat(row.calls), FormatTime(row.cpu_time_total_us), FormatTime(row.cpu_time_avg_us()),
                     absl::StrFormat("%.2f%%", row.cpu_percent), FormatTime(row.cuda_time_total_us),
                     FormatTime(row.cuda_time_avg_us()), absl::StrFormat("%.2f%%", row.cuda_percent),
                     absl::StrCat(row.launches), row.kernel ? absl::StrFormat("%.1f", row.bytes_per_s() / 1e9) : "",
                     row.kernel ? Scaled(row.flops_per_s()) : "",
                     row.has_roofline() ? absl::StrFormat("%.1f%%", row.roofline_percent()) : ""});
  }
  std::vector<size_t> widths(lines[0].size(), 0);
  for (const auto& cells : lines) {
    for (size_t c = 0; c < cells.size(); ++c) widths[c] = std::max(widths[c], cells[c].size());
  }
  std::string rule;
  for (size_t c = 0; c < widths.size(); ++c) absl::StrAppend(&rule, c ? "  " : "", std::string(widths[c], '-'));
  absl::StrAppend(&rule, "\n");
  std::string out = rule;
  for (size_t l = 0; l < lines.size(); ++l) {
    absl::StrAppend(&out, absl::StrFormat("%-*s", widths[0], lines[l][0]));
    for (size_t c = 1; c < widths.size(); ++c) absl::StrAppend(&out, absl::StrFormat("  %*s", widths[c], lines[l][c]));
    absl::StrAppend(&out, "\n", l == 0 ? rule : "");
  }
  const Totals totals = TotalsOf(all);
  absl::StrAppend(&out, rule, "CPU time total: ", FormatTime(totals.cpu_us), "\nCUDA time total: ",
                  FormatTime(totals.cuda_us), "\n");
  // The rooflines the % column was taken against, in device order.
  std::vector<std::pair<std::string, Roofline>> seen(roofline.seen().begin(), roofline.seen().end());
  std::sort(seen.begin(), seen.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
  for (const auto& [device, r] : seen) absl::StrAppend(&out, "Roofline ", device, ": ", r.ToString(), "\n");
  return out;
}

}  // namespace fusebox
