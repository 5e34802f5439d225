// PTX instructions that Halide 21 cannot emit, reached through extern calls: a generator
// calls a function named schedx_ptx_* (generators/ptx_extern.h), LLVM leaves a call block
// for each in the kernel's PTX, and rewrite_ptx_calls replaces every such block by the
// instruction from its table, drops the extern declarations and raises .version/.target
// to what those instructions need. The runtime does so when Halide loads a module
// (cuda_interop.cpp wraps cuModuleLoadDataEx). A call it does not know, a call block it
// cannot read or a device below an instruction's capability is an error, never a module
// with the call left in it.
#pragma once

#include <string>
#include <string_view>

namespace schedx {

struct PtxRewrite {
    bool ok = false;
    std::string ptx;    // the rewritten module (ok)
    std::string error;  // why not (!ok)
    int calls = 0;      // call blocks replaced
    int min_sm = 0;     // the capability the rewritten module targets (10 * major + minor)
};

// Whether `ptx` calls any schedx_ptx_* function (a module without one loads unchanged).
bool ptx_has_schedx_calls(std::string_view ptx);

// Rewrites `ptx` for a device of capability `device_sm` (10 * major + minor, e.g. 90).
PtxRewrite rewrite_ptx_calls(std::string_view ptx, int device_sm);

// The capability that the function `name` needs (0: not in the table).
int ptx_function_min_sm(std::string_view name);

}  // namespace schedx
