// Current (just-in-time) tensorwise scaling from a tensor's amax, torchao's Float8Linear
// rule: scale = fp32(fp8_max / max(amax, 1e-12)) computed in fp64 (optionally rounded down
// to a power of two) and scale_inv = 1 / scale, one value each on the device of the call.
// schedx_cast_transpose_fp8_current_scaling runs it between the abs_max pass and the cast.
#include "Halide.h"
#include "numerics.h"

namespace {

using namespace Halide;

class CurrentScale : public Generator<CurrentScale> {
public:
    GeneratorParam<std::string> sched{"schedule", "cpu"};  // cpu | cuda

    Input<Buffer<float, 0>> amax{"amax"};
    Input<int> fp8_format{"fp8_format"};    // 0: e4m3fn, 1: e5m2
    Input<int> pow2_scales{"pow2_scales"};  // nonzero: 2^floor(log2(scale))
    // One Tuple, so that both values come from one loop (on the GPU one launch): its
    // buffers are the arguments scales.0 (scale) and scales.1 (scale_inv).
    Output<Func> scales{"scales", {Float(32), Float(32)}, 0};

    void generate() {
        // THE ALGORITHM: the rule on amax's bits with the sign cleared (abs_max writes none).
        Expr amax_bits = reinterpret<uint32_t>(amax()) & schedx::u32(0x7FFFFFFF);
        Expr scale = reinterpret<float>(schedx::torchao_scale_bits(amax_bits, fp8_format != 0, pow2_scales != 0));
        scales() = {scale, 1.0f / scale};

        // THE SCHEDULE: two values; on the GPU one thread (a launch of about 2 us).
        if (sched.value() == "cuda") scales.gpu_single_thread();
    }
};

}  // namespace

HALIDE_REGISTER_GENERATOR(CurrentScale, current_scale)
