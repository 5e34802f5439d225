// Binds raw caller pointers to a variant's Halide arguments by name and runs it.
// Buffer types come from the variant's metadata: a 32-bit word buffer standing for
// 8- or 16-bit elements (the full-width access variants) packs several per word.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "cuda_interop.h"
#include "registry.h"
#include "schedx/schedx.h"

namespace schedx {

class PipelineCall {
public:
    // `context`: the CUDA context of the caller's pointers when known (check_spans), else
    // nullptr and the first bound device pointer tells.
    PipelineCall(const Variant &variant, void *stream, void *context = nullptr);
    ~PipelineCall();
    PipelineCall(const PipelineCall &) = delete;
    PipelineCall &operator=(const PipelineCall &) = delete;

    // `ptr` holds `rows` rows of `cols` elements of `elem_bytes` each, rows `ld` elements
    // apart. Arguments the pipeline does not have are ignored.
    void bind_matrix(const char *name, const void *ptr, int64_t rows, int64_t cols, int64_t ld, int elem_bytes);
    void bind_vector(const char *name, const void *ptr, int64_t n, int elem_bytes);
    // One element: a 0-dimensional buffer.
    void bind_scalar_buffer(const char *name, const void *ptr);
    void bind_int(const char *name, int32_t value);
    // A device address handed to the pipeline as a uint64 (where a kernel writes through
    // atomics, outside Halide's buffers); run() fails if one is left unbound.
    void bind_address(const char *name, const void *ptr);

    schedx_status run();
    // Bytes of the bound buffers (extents times element size): what a CPU call's operands hold.
    uint64_t operand_bytes() const;

    // Whether the variant touches only the bound buffers, answered by a Halide bounds query
    // (no memory read or written; dispatch memoises the answer per call signature).
    // Autoscheduled schedules shift tiles inwards, so they refuse shapes below their split
    // factors, which are known only to the generated code.
    bool bounds_fit();

private:
    struct Arg {
        const char *name;  // the metadata's
        halide_buffer_t buf{};
        halide_dimension_t dims[2]{};
        const void *ptr = nullptr;
        union {
            int32_t i32;
            uint64_t u64;
        } scalar{};  // what argv points at for a scalar argument of either type
        bool is_buffer = false;
    };
    // The argument `name` of the pipeline, or nullptr if it has none.
    Arg *slot(const char *name);

    const Variant &variant_;
    CudaCallContext cuda_;
    std::vector<Arg> args_;
};

// CPU variants are built for several x86-64 targets (schedules/variants.json's targets.cpu)
// and Halide's wrapper picks, at each pipeline's first call, the first one the CPU has. With
// SCHEDX_CPU_BASELINE=1 in the environment (read before the first call) every target above
// the baseline is refused, so an AVX-512 machine runs the AVX2 code. How many feature sets
// were refused so, for tests.
int cpu_targets_refused();

// Vector registers of the CPU code Halide's wrapper runs here, asked of Halide as the wrapper
// asks: 32 where the AVX-512 build runs (the CPU has it and SCHEDX_CPU_BASELINE is not 1),
// else the AVX2 baseline's 16.
int cpu_vector_registers();

}  // namespace schedx
