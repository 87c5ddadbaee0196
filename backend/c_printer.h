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
  // The hooks write into Print's writer at its depth, opening and closing
  // scopes with CodeWriter::Open and Close (or a Block inside one hook), so
  // none knows where its lines land.

  // Target text before the kernel; must define the fb_* helpers named in the
  // op table and CommonPrelude()'s FB_INLINE.
  virtual std::string Prelude() const = 0;
  // Pointwise kernels: from the signature to the line that opens the
  // per-element scope, leaving two scopes open (the kernel's and the
  // element's) that Print closes. Printers of reductions only (the CUDA
  // ones, which print pointwise kernels their own way) keep the default, a
  // check that none reaches them.
  virtual void Open(CodeWriter& w, const Kernel& kernel) const;
  virtual const char* OpTemplate(graph::Op op) const = 0;
  // Kernels with index checks: defines fb_check_index (IndexCheckHelpers).
  virtual std::string IndexCheckPrelude() const { return ""; }

  // Reduction kernels: the per-row scope (OpenRow leaves two open, the
  // kernel's and the row's, that CloseRow closes: by default each on a line
  // of its own), the loop over a row around
  // `body`'s lines, what follows a pass (the CUDA printers combine the
  // block's partial results there; nothing on the CPU, whose rows are one
  // thread's), and the scope of the per-row stores (one, that Print closes).
  virtual void OpenRow(CodeWriter& w, const Kernel& kernel) const = 0;
  virtual void CloseRow(CodeWriter& w) const;
  virtual void RowLoop(CodeWriter& w, const Kernel& kernel, const std::function<void()>& body) const = 0;
  virtual void AfterPass(CodeWriter& w, const Kernel& kernel, const Accumulator& acc,
                         const std::string& combine_lambda) const {}
  virtual void OpenRowStores(CodeWriter& w, const Kernel& kernel) const = 0;
  // One pass over the row: its accumulators' declarations, the loop folding
  // the body's values into them, and AfterPass. The CPU printer overrides it
  // for long float sums (cpu/cascade_pass.h).
  virtual void PrintPass(CodeWriter& w, const Kernel& kernel, const Pass& pass) const;
  // Whether every thread in the row scope has a row to compute (`r` in
  // range), so a row loop's row-invariant statements (row_invariants.h) may
  // be printed once before it. The CPU's rows: yes; the CUDA layouts whose
  // threads past the last row reach the loop (column reductions test
  // fb_live inside it) keep them in the loop.
  virtual bool HoistsRowInvariants() const { return false; }
  // Rows held in registers (the CUDA cluster printer): loads each cached
  // value of the row before the passes; nothing where loads stay loads (the
  // CPU's rows sit in its caches).
  virtual void Preload(CodeWriter& w, const Kernel& kernel) const {}
  virtual bool ReadsCachedLoads(const Kernel& kernel) const { return false; }
  // One element of cached load `slot` into c<slot>[k] (in a Preload's loop),
  // after its index's statements where it gathers a row (their own scope).
  void PreloadSlot(CodeWriter& w, const Kernel& kernel, size_t slot) const;

  // Text helpers, also used by printers that are not CPrinters (the CUDA row
  // printer, backend/cuda/row_printer.h); the statement helpers write at the
  // writer's depth. Statements' `load_element`, where it returns text, spells
  // a load's element instead of `buffer[index]` (the CUDA printers'
  // cache-hinted loads).
 public:
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
  // CUDA kernels: the run-time sizes' parameters (Kernel::size_args) after
  // fb_n, ", int fb_s0, ..." (long long where index64), and the same names
  // as arguments.
  static std::string SizeParams(const Kernel& kernel);
  static std::string SizeArgs(const Kernel& kernel);
  // fb_check_index over `record_first`, the target's expression that claims
  // err[0] (0 -> 1) atomically and is true for the one thread that did.
  static std::string IndexCheckHelpers(const char* record_first);

};

// How generated code spells a dtype's compute type ("float").
const char* ComputeCType(DType dtype);
// How generated code spells a dtype's stored element ("unsigned short").
const char* StorageCType(DType dtype);

}  // namespace fusebox::backend
