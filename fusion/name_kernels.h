// Names each kernel the Inductor way: <kind>_fused_<op names, unique, sorted>_<n>
// where n is the kernel's position in the plan, so names are deterministic
// across runs (the seed's manual_gelu -> poi_fused_add_mul_pow_tanh_0). A
// kernel with a single op is named after it alone: poi_exp_0. Views, casts to
// the same precision and constants are not ops the user wrote; views are left
// out of names.
#pragma once

#include "fusion/plan.h"

namespace fusebox::fusion {

Plan NameKernels(Plan plan);

}  // namespace fusebox::fusion
