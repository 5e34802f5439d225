// Argument checks shared by the operators at the C ABI. Each returns SCHEDX_OK or fails
// with the status and a message naming the argument.
#pragma once

#include <cstdint>
#include <vector>

#include "registry.h"
#include "schedx/schedx.h"

namespace schedx {

schedx_status check_device(schedx_device device, Device *out);
schedx_status check_not_negative(const char *name, int64_t value);
schedx_status check_not_null(const char *name, const void *ptr);
schedx_status check_leading_dim(const char *name, int64_t ld, const char *row_name, int64_t row);
// bf16 or fp16, its variants' name ("bf16" / "fp16") into *type_name; else "<name> <value> is
// not bf16 or fp16".
schedx_status check_half_dtype(const char *name, schedx_dtype t, const char **type_name);

// A matrix argument as memory: `rows` rows of `cols` elements, `ld` apart. An empty one
// (no rows or no columns) spans no bytes: its pointer may be NULL and overlaps nothing.
struct Span {
    const char *name;
    const void *ptr;
    int64_t rows, cols, ld;
    int elem_bytes;
    bool is_output;
    uint64_t bytes = 0;  // filled by check_spans
};

// Byte counts must fit in 64 bits and each matrix in Halide's 32-bit indexing (every
// dimension, and rows * ld, at most 2^31-1 elements); outputs must not overlap each other
// or any input; pointers must live on `device`, on CUDA all on the same GPU, whose primary
// context goes to `cuda_context` (the call runs there; nothing asks the driver again).
schedx_status check_spans(std::vector<Span> &spans, Device device, void **cuda_context);

// "bf16" or "fp16" (the variants' x_type / scale_type values), nullptr for another dtype.
inline const char *half_name(schedx_dtype t) {
    return t == SCHEDX_BF16 ? "bf16" : t == SCHEDX_FP16 ? "fp16" : nullptr;
}

inline bool aligned16(const void *p) { return (reinterpret_cast<uintptr_t>(p) & 15) == 0; }
inline bool aligned_to(const void *p, int64_t bytes) { return reinterpret_cast<uintptr_t>(p) % uintptr_t(bytes) == 0; }
// A pointer's offset from the 16-byte boundary below it: what alignment rules read of it.
inline int64_t misalignment(const void *p) { return int64_t(reinterpret_cast<uintptr_t>(p) & 15); }

}  // namespace schedx
