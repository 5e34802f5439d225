// C++ kernels of torch.ops.schedx.w8_linear and w8_linear_out, registered through
// PyTorch's stable ABI (one build serves torch >= 2.10). These are the ops a decode step
// calls per layer, where host time is the whole cost in eager mode: here the call
// reaches libschedx with no ctypes conversion and allocates y with no Python.
// python/schedx/ops.py defines the schemas and the fake implementations, loads this
// library when it is built, and keeps Python kernels for builds without it.
#include <dlfcn.h>

#include <cstdint>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include <torch/csrc/stable/library.h>
#include <torch/csrc/stable/ops.h>
#include <torch/csrc/stable/tensor.h>

#include "schedx/schedx.h"

namespace {

using torch::headeronly::ScalarType;
using torch::stable::Tensor;

// The same text as the Python binding's SchedxError: "schedx ERR_BAD_SIZE: message".
[[noreturn]] void fail(schedx_status status, const std::string &message) {
    const std::string name = schedx_status_name(status);
    const std::string prefix = "SCHEDX_";
    throw std::runtime_error("schedx " + (name.rfind(prefix, 0) == 0 ? name.substr(prefix.size()) : name) + ": " +
                             message);
}

void check(schedx_status status) {
    if (status != SCHEDX_OK) fail(status, schedx_last_error());
}

std::string shape_text(const Tensor &t) {
    std::string s = "(";
    for (int64_t d = 0; d < t.dim(); d++) s += (d ? ", " : "") + std::to_string(t.size(d));
    return s + (t.dim() == 1 ? ",)" : ")");
}

std::optional<schedx_dtype> half_code(ScalarType t) {
    if (t == ScalarType::BFloat16) return SCHEDX_BF16;
    if (t == ScalarType::Half) return SCHEDX_FP16;
    return std::nullopt;
}

std::optional<schedx_dtype> scale_code(ScalarType t) {
    if (t == ScalarType::BFloat16) return SCHEDX_BF16;
    if (t == ScalarType::Float) return SCHEDX_FP32;
    return std::nullopt;
}

// The current CUDA stream of `device`, through libtorch_cuda's shim entry, looked up once:
// linking libtorch_cuda would stop the library loading under a CPU-only torch.
void *current_cuda_stream(int32_t device) {
    using GetStream = int32_t (*)(int32_t, void **);
    static const GetStream get = [] {
        void *lib = dlopen("libtorch_cuda.so", RTLD_LAZY | RTLD_NOLOAD);
        return lib ? reinterpret_cast<GetStream>(dlsym(lib, "aoti_torch_get_current_cuda_stream")) : nullptr;
    }();
    void *stream = nullptr;
    if (!get || get(device, &stream) != 0) fail(SCHEDX_ERR_NO_CUDA, "cannot read torch's current CUDA stream");
    return stream;
}

// A 2-D view of t's last dimension against the rest, copied to row-major when rows are not
// evenly strided with unit column stride (the C ABI takes any row stride, unit columns).
struct Matrix {
    Tensor t;
    int64_t rows, cols, ld;
};

Matrix as_matrix(const Tensor &t) {
    const int64_t cols = t.size(t.dim() - 1);
    Tensor m = t.dim() == 2 ? t : torch::stable::reshape(t, {-1, cols});
    const int64_t rows = m.size(0);
    if (rows == 0 || cols == 0) return {m, rows, cols, cols};
    int64_t s0 = m.stride(0);
    if ((m.stride(1) != 1 && cols > 1) || (rows > 1 && s0 < cols)) {
        m = torch::stable::contiguous(m);
        s0 = cols;
    }
    return {m, rows, cols, rows > 1 ? s0 : cols};
}

// y [..., N] = x [..., K] @ w.T * scales (+ bias): checks what the C ABI cannot see
// (tensor shapes and dtypes), then one C call on x's device and current stream.
void w8_into(const Tensor &x, const Tensor &w, const Tensor &scales, const std::optional<Tensor> &bias, Tensor &y) {
    const auto x_code = half_code(x.scalar_type());
    if (!x_code || x.dim() < 1) fail(SCHEDX_ERR_UNSUPPORTED_DTYPE, "x must be bf16 or fp16 [..., K]");
    const int64_t k = x.size(x.dim() - 1);
    if (w.scalar_type() != ScalarType::Char || w.dim() != 2 || w.size(1) != k) {
        fail(SCHEDX_ERR_BAD_SIZE, "w must be int8 [N, " + std::to_string(k) + "], got " + shape_text(w));
    }
    const int64_t n = w.size(0);
    const auto s_code = scale_code(scales.scalar_type());
    if (!s_code || scales.dim() != 1 || scales.size(0) != n) {
        fail(SCHEDX_ERR_UNSUPPORTED_DTYPE, "scales must be bf16 or fp32 [" + std::to_string(n) + "], got " +
                                               shape_text(scales));
    }
    if (bias && (bias->scalar_type() != scales.scalar_type() || bias->dim() != 1 || bias->size(0) != n)) {
        fail(SCHEDX_ERR_UNSUPPORTED_DTYPE, "bias must be [" + std::to_string(n) + "] of scales' dtype, got " +
                                               shape_text(*bias));
    }
    bool y_shape = y.scalar_type() == x.scalar_type() && y.dim() == x.dim() && y.size(y.dim() - 1) == n;
    for (int64_t d = 0; y_shape && d + 1 < x.dim(); d++) y_shape = y.size(d) == x.size(d);
    if (!y_shape) fail(SCHEDX_ERR_BAD_SIZE, "out must be x's dtype with shape [..., " + std::to_string(n) + "]");
    const Matrix xm = as_matrix(x), wm = as_matrix(w);
    if (xm.rows == 0 || n == 0) return;
    Tensor y2 = y.dim() == 2 ? y : torch::stable::view(y, {-1, n});
    if (n > 1 && y2.stride(1) != 1) fail(SCHEDX_ERR_BAD_LEADING_DIM, "out is not row-major");
    if (k == 0) {  // an empty sum: y is the bias, broadcast over the rows, or 0
        if (bias) {
            torch::stable::copy_(y2, *bias);
        } else {
            torch::stable::zero_(y2);
        }
        return;
    }
    const Tensor s = torch::stable::contiguous(scales);
    const std::optional<Tensor> b = bias ? std::optional<Tensor>(torch::stable::contiguous(*bias)) : std::nullopt;
    const bool cuda = x.is_cuda();
    void *stream = cuda ? current_cuda_stream(x.get_device_index()) : nullptr;
    check(schedx_w8_linear(xm.t.const_data_ptr(), xm.rows, k, xm.ld, *x_code,
                           static_cast<const int8_t *>(wm.t.const_data_ptr()), n, wm.ld, s.const_data_ptr(), *s_code,
                           b ? b->const_data_ptr() : nullptr, y2.mutable_data_ptr(), xm.rows > 1 ? y2.stride(0) : n,
                           cuda ? SCHEDX_DEVICE_CUDA : SCHEDX_DEVICE_CPU, stream));
}

Tensor w8_linear(Tensor x, Tensor w, Tensor scales, std::optional<Tensor> bias) {
    if (x.dim() < 1 || w.dim() != 2) fail(SCHEDX_ERR_BAD_SIZE, "x must be [..., K] and w int8 [N, K]");
    std::vector<int64_t> shape(x.sizes().begin(), x.sizes().end());
    shape.back() = w.size(0);
    std::vector<int64_t> strides(shape.size());
    int64_t stride = 1;
    for (size_t d = shape.size(); d-- > 0;) {
        strides[d] = stride;
        stride *= std::max<int64_t>(shape[d], 1);
    }
    // aoti_torch_empty_strided goes to the caching allocator with no dispatcher round trip.
    int32_t dtype = 0, device_type = 0;
    TORCH_ERROR_CODE_CHECK(aoti_torch_get_dtype(x.get(), &dtype));
    TORCH_ERROR_CODE_CHECK(aoti_torch_get_device_type(x.get(), &device_type));
    AtenTensorHandle handle = nullptr;
    TORCH_ERROR_CODE_CHECK(aoti_torch_empty_strided(int64_t(shape.size()), shape.data(), strides.data(), dtype,
                                                    device_type, x.get_device_index(), &handle));
    Tensor y(handle);
    w8_into(x, w, scales, bias, y);
    return y;
}

void w8_linear_out(Tensor x, Tensor w, Tensor scales, std::optional<Tensor> bias, Tensor out) {
    w8_into(x, w, scales, bias, out);
}

}  // namespace

STABLE_TORCH_LIBRARY_IMPL(schedx, CPU, m) {
    m.impl("w8_linear", TORCH_BOX(&w8_linear));
    m.impl("w8_linear_out", TORCH_BOX(&w8_linear_out));
}

STABLE_TORCH_LIBRARY_IMPL(schedx, CUDA, m) {
    m.impl("w8_linear", TORCH_BOX(&w8_linear));
    m.impl("w8_linear_out", TORCH_BOX(&w8_linear_out));
}
