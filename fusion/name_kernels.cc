#include "fusion/name_kernels.h"

#include <set>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace fusebox::fusion {

Plan NameKernels(Plan plan) {
  for (size_t i = 0; i < plan.kernels.size(); ++i) {
    KernelGroup& k = plan.kernels[i];
    if (k.kind == KernelKind::kExtern) {  // the library that runs it: extern_cublaslt_gemm_3
      const bool cuda = plan.graph.device().is_cuda();
      if (plan.graph.node(k.outputs.at(0)).op == graph::Op::kAttention) {  // extern_flash_attention_3
        k.name = absl::StrCat("extern_", cuda ? "flash" : "cpu", "_attention_", i);
        continue;
      }
      k.name = absl::StrCat("extern_", cuda ? "cublaslt" : "openblas", "_gemm_", i);
      continue;
    }
    std::set<std::string> ops;
    for (graph::NodeId id : k.nodes) {
      const graph::OpInfo& info = graph::Info(plan.graph.node(id).op);
      if (info.kind == graph::OpKind::kPointwise || info.kind == graph::OpKind::kReduction ||
          info.kind == graph::OpKind::kMove) {
        ops.insert(info.name);
      }
    }
    if (ops.empty()) ops.insert("copy");  // a stored view: a strided copy
    k.name = absl::StrCat(KindPrefix(k.kind), ops.size() > 1 ? "_fused_" : "_",
                          absl::StrJoin(ops, "_"), "_", i);
  }
  return plan;
}

}  // namespace fusebox::fusion
