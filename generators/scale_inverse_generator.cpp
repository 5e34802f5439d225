// scale_inv = 1 / scale, one float on the device of the call: the cast's scale_inv where its
// variant has no fused amax (the abs_max kernel that then runs writes amax alone).
#include "Halide.h"

namespace {

using namespace Halide;

class ScaleInverse : public Generator<ScaleInverse> {
public:
    GeneratorParam<std::string> sched{"schedule", "cpu"};  // cpu | cuda

    Input<Buffer<float, 0>> scale{"scale"};
    Output<Buffer<float, 0>> scale_inv{"scale_inv"};

    void generate() {
        // THE ALGORITHM
        scale_inv() = 1.0f / scale();

        // THE SCHEDULE: one value; on the GPU one thread (a launch of about 2 us).
        if (sched.value() == "cuda") scale_inv.gpu_single_thread();
    }
};

}  // namespace

HALIDE_REGISTER_GENERATOR(ScaleInverse, scale_inverse)
