// What the CUDA and C++ printers share: both targets are C-like, so the body
// (loads, constants, op expressions from the op table, stores) is printed here
// once and each target supplies its prelude, signature and loop. One printer
// per target, over one kernel IR.
#pragma once

#include <functional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "backend/code_writer.h"
#include "backend/kernel_ir.h"

namespace fusebox::backend {

class CPrinter {
 public:
  virtual ~CPrinter() = default;
  std::string Print(const Kernel& kernel) const;

 protected:
  // The hooks return text that Print splices in as it is (CodeWriter::Raw),
  // indented for where it goes: the signature at depth 0, the kernel's own
  // lines at 1, the element's or the row's at 2, a row loop's body at 3.
  // Target text before the kernel; must define the fb_* helpers named in the
  // op table and CommonPrelude()'s FB_INLINE.
  virtual std::string Prelude() const = 0;
  // From the signature to the line that opens the per-element scope (two
  // scopes left open: the kernel's and the element's).
  virtual std::string Open(const Kernel& kernel) const = 0;
  virtual std::string Close() const = 0;
  virtual const char* OpTemplate(graph::Op op) const = 0;
  // Kernels with index checks: defines fb_check_index (IndexCheckHelpers).
  virtual std::string IndexCheckPrelude() const { return ""; }

  // Reduction kernels: the per-row scope, the loop over a row, what follows a
  // pass (the CUDA printer combines the block's partial results there), and
  // the scope of the per-row stores.
  virtual std::string OpenRow(const Kernel& kernel) const = 0;
  virtual std::string CloseRow() const = 0;
  virtual std::string OpenRowLoop(const Kernel& kernel) const = 0;
  virtual std::string AfterPass(const Kernel& kernel, const Accumulator& acc,
                                const std::string& combine_lambda) const = 0;
  virtual std::string OpenRowStores(const Kernel& kernel) const = 0;
  virtual std::string CloseRowLoop(const Kernel& kernel) const { return Closing(3, 1); }
  // One pass over the row: its accumulators' declarations, the loop folding
  // the body's values into them, and AfterPass. The CPU printer overrides it
  // for long float sums (cpu/cascade_pass.h).
  virtual void PrintPass(CodeWriter& w, const Kernel& kernel, const Pass& pass) const;
  // Rows held in registers (the CUDA cluster printer): loads each cached
  // value of the row before the passes; "" where loads stay loads (the CPU's
  // rows sit in its caches).
  virtual std::string Preload(const Kernel& kernel) const { return ""; }
  virtual bool ReadsCachedLoads(const Kernel& kernel) const { return false; }

  // Text helpers, also used by printers that are not CPrinters (the CUDA row
  // printer, backend/cuda/row_printer.h); the statement helpers write at the
  // writer's depth. Statements' `load_element`, where it returns text, spells
  // a load's element instead of `buffer[index]` (the CUDA printers'
  // cache-hinted loads).
 public:
  // Hook text through a CodeWriter at `depth`: one line, a scope's
  // opening line (`<header> {`), or the `}` lines of `scopes` nested scopes
  // whose contents are at `depth`.
  template <typename... Pieces>
  static std::string LineAt(int depth, const Pieces&... pieces) {
    CodeWriter w(depth);
    w.Line(pieces...);
    return std::move(w).Release();
  }
  template <typename... Pieces>
  static std::string OpeningAt(int depth, const Pieces&... header) {
    CodeWriter w(depth);
    w.Open(header...);
    return std::move(w).Release();
  }
  static std::string Closing(int depth, int scopes);
  static void Statements(CodeWriter& w, const Kernel& kernel, const std::vector<Stmt>& block,
                         const std::function<const char*(graph::Op)>& op_template, bool cached_loads = false,
                         const std::function<std::string(const Stmt&)>& load_element = {});
  static std::string LoadExpression(const Kernel& kernel, int buffer, const IndexExpr& index);
  static std::string IdentityLiteral(const Accumulator& acc);
  // Accumulator text shared by every reduction layout: its declaration, one
  // fold of `value` (at row position `position`, for argmax/argmin), and the
  // fold as a lambda for warp/block combines.
  static void AccumulatorDecl(CodeWriter& w, const Accumulator& acc);
  static void AccumulateStep(CodeWriter& w, const Accumulator& acc, const char* op_template, const std::string& value,
                             const std::string& value_index);
  static std::string CombineLambda(const Accumulator& acc, const char* op_template);

  // Helpers both targets define the same way, written with FB_INLINE.
  static const char* CommonPrelude();
  static std::string ParamList(const Kernel& kernel, bool restrict_qualified);
  // fb_check_index over `record_first`, the target's expression that claims
  // err[0] (0 -> 1) atomically and is true for the one thread that did.
  static std::string IndexCheckHelpers(const char* record_first);

 private:
  // A loop over the row (OpenRowLoop .. CloseRowLoop) around `body`'s lines.
  void RowLoop(CodeWriter& w, const Kernel& kernel, const std::function<void()>& body) const;
};

// How generated code spells a dtype's compute type ("float").
const char* ComputeCType(DType dtype);
// How generated code spells a dtype's stored element ("unsigned short").
const char* StorageCType(DType dtype);

}  // namespace fusebox::backend
