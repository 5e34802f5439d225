#include "validate.h"

#include <string>

#include "cuda_interop.h"
#include "status.h"

namespace schedx {

schedx_status check_device(schedx_device device, Device *out) {
    if (device == SCHEDX_DEVICE_CPU) {
        *out = Device::cpu;
    } else if (device == SCHEDX_DEVICE_CUDA) {
        *out = Device::cuda;
        return cuda_init();
    } else {
        return fail(SCHEDX_ERR_BAD_DEVICE, "device " + std::to_string(static_cast<int>(device)) + " is not a schedx_device");
    }
    return SCHEDX_OK;
}

schedx_status check_not_negative(const char *name, int64_t value) {
    if (value >= 0) return SCHEDX_OK;
    return fail(SCHEDX_ERR_BAD_SIZE, std::string(name) + " must not be negative, got " + std::to_string(value));
}

schedx_status check_not_null(const char *name, const void *ptr) {
    return ptr ? SCHEDX_OK : fail(SCHEDX_ERR_NULL_POINTER, std::string(name) + " is NULL");
}

schedx_status check_half_dtype(const char *name, schedx_dtype t, const char **type_name) {
    *type_name = half_name(t);
    if (*type_name) return SCHEDX_OK;
    return fail(SCHEDX_ERR_UNSUPPORTED_DTYPE,
                std::string(name) + " " + std::to_string(static_cast<int>(t)) + " is not bf16 or fp16");
}

schedx_status check_leading_dim(const char *name, int64_t ld, const char *row_name, int64_t row) {
    if (ld >= row) return SCHEDX_OK;
    return fail(SCHEDX_ERR_BAD_LEADING_DIM, std::string(name) + " (" + std::to_string(ld) + ") is smaller than " +
                                                row_name + " (" + std::to_string(row) + ")");
}

schedx_status check_spans(std::vector<Span> &spans, Device device, void **cuda_context) {
    constexpr int64_t kHalideMax = INT32_MAX;
    for (Span &s : spans) {
        if (s.rows == 0 || s.cols == 0) continue;  // bytes stays 0
        uint64_t elems = 0, bytes = 0;
        // Elements touched: (rows - 1) * ld + cols.
        if (__builtin_mul_overflow(static_cast<uint64_t>(s.rows - 1), static_cast<uint64_t>(s.ld), &elems) ||
            __builtin_add_overflow(elems, static_cast<uint64_t>(s.cols), &elems) ||
            __builtin_mul_overflow(elems, static_cast<uint64_t>(s.elem_bytes), &bytes) ||
            bytes > UINT64_MAX - reinterpret_cast<uintptr_t>(s.ptr)) {
            return fail(SCHEDX_ERR_SIZE_OVERFLOW, std::string(s.name) + ": byte count overflows 64 bits");
        }
        if (s.rows > kHalideMax || s.cols > kHalideMax || s.ld > kHalideMax) {
            return fail(SCHEDX_ERR_SIZE_OVERFLOW,
                        std::string(s.name) + ": a dimension or leading dimension exceeds 2^31-1 elements");
        }
        // The generated pipelines also assert rows * ld <= 2^31-1 (Halide without
        // large_buffers); caught here so the caller gets this status, not a kernel error.
        if (s.rows * s.ld > kHalideMax) {
            return fail(SCHEDX_ERR_SIZE_OVERFLOW, std::string(s.name) + ": " + std::to_string(s.rows) +
                                                      " rows of leading dimension " + std::to_string(s.ld) +
                                                      " span more than 2^31-1 elements");
        }
        // A GPU load or atomic at a misaligned address is a sticky error: the context is lost.
        if (reinterpret_cast<uintptr_t>(s.ptr) % s.elem_bytes != 0) {
            return fail(SCHEDX_ERR_MISALIGNED, std::string(s.name) + " is not aligned to its " +
                                                   std::to_string(s.elem_bytes) + "-byte elements");
        }
        s.bytes = bytes;
    }
    for (size_t i = 0; i < spans.size(); i++) {
        for (size_t j = 0; j < spans.size(); j++) {
            if (i == j || !spans[i].is_output || (spans[j].is_output && j < i) || !spans[i].bytes || !spans[j].bytes) {
                continue;
            }
            auto a = reinterpret_cast<uintptr_t>(spans[i].ptr), b = reinterpret_cast<uintptr_t>(spans[j].ptr);
            if (a < b + spans[j].bytes && b < a + spans[i].bytes) {
                return fail(SCHEDX_ERR_OVERLAP, std::string("output ") + spans[i].name + " overlaps " + spans[j].name);
            }
        }
    }
    const Span *first_on_device = nullptr;
    void *first_ctx = nullptr;
    for (const Span &s : spans) {
        if (!s.ptr) continue;  // empty
        if (device == Device::cuda) {
            void *ctx = nullptr;
            schedx_status st = cuda_context_for(s.ptr, s.name, &ctx);
            if (st != SCHEDX_OK) return st;
            // One call runs in one context: memory of another GPU would be an illegal address.
            if (!first_on_device) {
                first_on_device = &s;
                first_ctx = ctx;
            } else if (ctx != first_ctx) {
                return fail(SCHEDX_ERR_POINTER_DEVICE,
                            std::string(s.name) + " is on another CUDA device than " + first_on_device->name);
            }
        } else if (is_known_device_pointer(s.ptr)) {
            return fail(SCHEDX_ERR_POINTER_DEVICE, std::string(s.name) + " is CUDA device memory but device is CPU");
        }
    }
    *cuda_context = first_ctx;
    return SCHEDX_OK;
}

}  // namespace schedx
