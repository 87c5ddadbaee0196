// fusebox: eager tensors and a graph-capturing fusion compiler for C++.
//   #include <fusebox/fusebox.h>
//   auto f = fusebox::compile([](const fusebox::Tensor& x) { return fusebox::tanh(x) * x; });
//   fusebox::Tensor y = f(fusebox::randn({4096, 4096}, fusebox::Device::default_device()));
//   for (auto& k : f.kernels()) std::cout << k.name << "\n" << k.source;
#pragma once

#include "backend/kernel_info.h"  // IWYU pragma: export
#include "frontend/attention.h"    // IWYU pragma: export
#include "frontend/compile.h"     // IWYU pragma: export
#include "frontend/data_movement.h"  // IWYU pragma: export
#include "frontend/loss.h"        // IWYU pragma: export
#include "frontend/matmul.h"      // IWYU pragma: export
#include "frontend/nn.h"          // IWYU pragma: export
#include "frontend/opaque_ops.h"  // IWYU pragma: export
#include "frontend/ops.h"         // IWYU pragma: export
#include "frontend/random.h"      // IWYU pragma: export
#include "frontend/reductions.h"  // IWYU pragma: export
#include "profiler/profiler.h"    // IWYU pragma: export
#include "tensor/creation.h"      // IWYU pragma: export
#include "tensor/device.h"        // IWYU pragma: export
#include "tensor/dtype.h"         // IWYU pragma: export
#include "tensor/error.h"         // IWYU pragma: export
#include "tensor/tensor.h"        // IWYU pragma: export
