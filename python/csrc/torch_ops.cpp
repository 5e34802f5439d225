// C++ kernels of torch.ops.schedx's operators, registered through
// PyTorch's stable ABI (one build serves torch >= 2.10): the call reaches libschedx with
// no ctypes conversion and allocates its outputs with no Python, so an eager call costs
// what the dispatcher and the C ABI cost. python/schedx/ops.py defines the schemas and
// the fake implementations, loads this library when it is built, and keeps Python
// kernels for builds without it.
#include <dlfcn.h>

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <initializer_list>
#include <optional>
#include <tuple>
#include <utility>
#include <stdexcept>
#include <string>
#include <vector>

#include <torch/csrc/stable/library.h>
#include <torch/csrc/stable/ops.h>
#include <torch/csrc/stable/tensor.h>
#include <torch/headeronly/util/BFloat16.h>

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

// torch's Python name of a dtype, as the Python kernels' messages print it.
std::string dtype_name(ScalarType t) {
    switch (t) {
    case ScalarType::Float: return "torch.float32";
    case ScalarType::Double: return "torch.float64";
    case ScalarType::Half: return "torch.float16";
    case ScalarType::BFloat16: return "torch.bfloat16";
    case ScalarType::Char: return "torch.int8";
    case ScalarType::Byte: return "torch.uint8";
    case ScalarType::Int: return "torch.int32";
    case ScalarType::Long: return "torch.int64";
    case ScalarType::Float8_e4m3fn: return "torch.float8_e4m3fn";
    case ScalarType::Float8_e5m2: return "torch.float8_e5m2";
    default: return torch::headeronly::toString(t);
    }
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

std::vector<int64_t> contiguous_strides(const std::vector<int64_t> &shape) {
    std::vector<int64_t> strides(shape.size());
    int64_t stride = 1;
    for (size_t d = shape.size(); d-- > 0;) {
        strides[d] = stride;
        stride *= std::max<int64_t>(shape[d], 1);
    }
    return strides;
}

// A new tensor on `like`'s device. aoti_torch_empty_strided goes to the caching allocator
// with no dispatcher round trip.
Tensor new_output(const Tensor &like, const std::vector<int64_t> &shape, const std::vector<int64_t> &strides,
                  ScalarType dtype) {
    const int32_t dtype_code = torch::stable::detail::to<int32_t>(torch::stable::detail::from(dtype));
    int32_t device_type = 0;
    TORCH_ERROR_CODE_CHECK(aoti_torch_get_device_type(like.get(), &device_type));
    AtenTensorHandle handle = nullptr;
    TORCH_ERROR_CODE_CHECK(aoti_torch_empty_strided(int64_t(shape.size()), shape.data(), strides.data(), dtype_code,
                                                    device_type, like.get_device_index(), &handle));
    return Tensor(handle);
}

// torch's name of a device ("cpu", "cuda:0", "meta"), as the Python kernels print it.
std::string device_text(const torch::stable::Device &d) {
    using torch::headeronly::DeviceType;
    const std::string index = d.has_index() ? ":" + std::to_string(d.index()) : "";
    switch (d.type()) {
    case DeviceType::CPU: return "cpu" + index;
    case DeviceType::CUDA: return "cuda" + index;
    case DeviceType::Meta: return "meta" + index;
    default: return "device type " + std::to_string(int(d.type())) + index;
    }
}

// Each named tensor is on x's device, as torch's own ops require (their words): a kernel
// is chosen by the highest device of all its arguments, so one call may see several.
void check_same_device(const Tensor &x, std::initializer_list<std::pair<const Tensor *, const char *>> named) {
    const torch::stable::Device device = x.device();
    for (const auto &[t, name] : named) {
        if (t && t->device() != device) {
            fail(SCHEDX_ERR_POINTER_DEVICE, std::string(name) + ": Tensor on device " + device_text(t->device()) +
                                                " is not on the expected device " + device_text(device) + "!");
        }
    }
}

const Tensor *given(const std::optional<Tensor> &t) { return t ? &*t : nullptr; }

schedx_device device_of(const Tensor &t, void **stream) {
    *stream = t.is_cuda() ? current_cuda_stream(t.get_device_index()) : nullptr;
    return t.is_cuda() ? SCHEDX_DEVICE_CUDA : SCHEDX_DEVICE_CPU;
}

std::optional<schedx_dtype> cast_input_code(ScalarType t) {
    if (t == ScalarType::Float) return SCHEDX_FP32;
    return half_code(t);
}

// ---- cast_transpose_fp8 ----

std::optional<schedx_fp8_format> fp8_format(ScalarType t) {
    if (t == ScalarType::Float8_e4m3fn) return SCHEDX_E4M3FN;
    if (t == ScalarType::Float8_e5m2) return SCHEDX_E5M2;
    return std::nullopt;
}

void check_scalar_f32(const Tensor &t, const char *name) {
    if (t.scalar_type() != ScalarType::Float) {
        fail(SCHEDX_ERR_UNSUPPORTED_DTYPE,
             std::string(name) + " must be a one-element float32 tensor, got " + dtype_name(t.scalar_type()));
    }
    if (t.numel() != 1) {
        fail(SCHEDX_ERR_BAD_SIZE,
             std::string(name) + " must be a one-element float32 tensor, got shape " + shape_text(t));
    }
}

// Leading dimension of a caller's [rows, cols] row-major output (unit column stride).
int64_t output_ld(const Tensor &t, const char *name, int64_t rows, int64_t cols, ScalarType dtype) {
    if (t.scalar_type() != dtype) {
        fail(SCHEDX_ERR_UNSUPPORTED_DTYPE,
             std::string(name) + " must have dtype " + dtype_name(dtype) + ", got " + dtype_name(t.scalar_type()));
    }
    if (t.dim() != 2 || t.size(0) != rows || t.size(1) != cols) {
        fail(SCHEDX_ERR_BAD_SIZE, std::string(name) + " must have shape (" + std::to_string(rows) + ", " +
                                      std::to_string(cols) + "), got " + shape_text(t));
    }
    if (rows > 0 && cols > 1 && t.stride(1) != 1) {
        fail(SCHEDX_ERR_BAD_LEADING_DIM, std::string(name) + " is not row-major");
    }
    return rows > 1 ? t.stride(0) : cols;
}

// rows = fp8(x * scale) [M, K] row-major (divide: x / scale) and cols the same values with
// cols.t() row-major, each optional; amax = max|x| and scale_inv = 1 / scale, both or neither
// (neither when dividing).
void cast_into(const Tensor &x, const Tensor &scale, const std::optional<Tensor> &rows,
               const std::optional<Tensor> &cols, const std::optional<Tensor> &amax,
               const std::optional<Tensor> &scale_inv, bool divide) {
    check_same_device(x, {{&scale, "scale"},
                          {given(rows), "rows"},
                          {given(cols), "cols"},
                          {given(amax), "amax"},
                          {given(scale_inv), "scale_inv"}});
    const ScalarType fp8 = rows ? rows->scalar_type() : cols->scalar_type();
    const auto format = fp8_format(fp8);
    if (!format) {
        fail(SCHEDX_ERR_UNSUPPORTED_FORMAT, "outputs must be float8_e4m3fn or float8_e5m2, got " + dtype_name(fp8));
    }
    const auto x_code = cast_input_code(x.scalar_type());
    if (!x_code) fail(SCHEDX_ERR_UNSUPPORTED_DTYPE, "x must be bf16, fp16 or fp32, got " + dtype_name(x.scalar_type()));
    if (x.dim() != 2) fail(SCHEDX_ERR_BAD_SIZE, "x must be 2-D, got shape " + shape_text(x));
    check_scalar_f32(scale, "scale");
    if (amax.has_value() != scale_inv.has_value()) {
        fail(SCHEDX_ERR_NULL_POINTER, "amax and scale_inv must be both given or both None");
    }
    if (divide && amax) fail(SCHEDX_ERR_NO_VARIANT, "divide=True writes no amax or scale_inv");
    if (amax) {
        check_scalar_f32(*amax, "amax");
        check_scalar_f32(*scale_inv, "scale_inv");
    }
    const Matrix xm = as_matrix(x);
    const int64_t m = xm.rows, k = xm.cols;
    const int64_t ld_rows = rows ? output_ld(*rows, "rows", m, k, fp8) : k;
    const int64_t ld_cols = cols ? output_ld(torch::stable::transpose(*cols, 0, 1), "cols (transposed)", k, m, fp8) : m;
    void *stream = nullptr;
    const schedx_device device = device_of(x, &stream);
    const float *s = static_cast<const float *>(scale.const_data_ptr());
    uint8_t *rows_ptr = rows ? static_cast<uint8_t *>(rows->mutable_data_ptr()) : nullptr;
    uint8_t *cols_ptr = cols ? static_cast<uint8_t *>(cols->mutable_data_ptr()) : nullptr;
    if (divide) {
        check(schedx_cast_transpose_fp8_divide(xm.t.const_data_ptr(), m, k, xm.ld, *x_code, s, *format, rows_ptr,
                                               ld_rows, cols_ptr, ld_cols, device, stream));
        return;
    }
    check(schedx_cast_transpose_fp8(xm.t.const_data_ptr(), m, k, xm.ld, *x_code, s, *format, rows_ptr, ld_rows,
                                    cols_ptr, ld_cols, amax ? static_cast<float *>(amax->mutable_data_ptr()) : nullptr,
                                    scale_inv ? static_cast<float *>(scale_inv->mutable_data_ptr()) : nullptr, device,
                                    stream));
}

// New outputs of a cast of x: rows, and cols with the strides of f.t().contiguous().t():
// (1, M), except where f.t() already counts as contiguous (M = 1, K <= 1, no rows).
std::tuple<Tensor, Tensor> new_cast_outputs(const Tensor &x, ScalarType dtype) {
    if (x.dim() != 2) fail(SCHEDX_ERR_BAD_SIZE, "x must be 2-D, got shape " + shape_text(x));
    if (!fp8_format(dtype)) {
        fail(SCHEDX_ERR_UNSUPPORTED_FORMAT, "dtype must be float8_e4m3fn or float8_e5m2, got " + dtype_name(dtype));
    }
    const int64_t m = x.size(0), k = x.size(1);
    const std::vector<int64_t> shape{m, k};
    const std::vector<int64_t> cols_strides =
        m == 1 || k <= 1 || m == 0 ? std::vector<int64_t>{std::max<int64_t>(k, 1), 1} : std::vector<int64_t>{1, m};
    return {new_output(x, shape, contiguous_strides(shape), dtype), new_output(x, shape, cols_strides, dtype)};
}

Tensor new_f32_scalar(const Tensor &like) { return new_output(like, {1}, {1}, ScalarType::Float); }

std::tuple<Tensor, Tensor> cast_transpose_fp8(Tensor x, Tensor scale, ScalarType dtype, bool divide) {
    auto [rows, cols] = new_cast_outputs(x, dtype);
    cast_into(x, scale, rows, cols, std::nullopt, std::nullopt, divide);
    return {rows, cols};
}

std::tuple<Tensor, Tensor, Tensor, Tensor> cast_transpose_fp8_amax(Tensor x, Tensor scale, ScalarType dtype) {
    auto [rows, cols] = new_cast_outputs(x, dtype);
    Tensor amax = new_f32_scalar(x), scale_inv = new_f32_scalar(x);
    cast_into(x, scale, rows, cols, amax, scale_inv, false);
    return {rows, cols, amax, scale_inv};
}

void cast_transpose_fp8_out(Tensor x, Tensor scale, std::optional<Tensor> rows, std::optional<Tensor> cols,
                            std::optional<Tensor> amax, std::optional<Tensor> scale_inv, bool divide) {
    if (!rows && !cols) fail(SCHEDX_ERR_NULL_POINTER, "rows and cols are both None: nothing to write");
    cast_into(x, scale, rows, cols, amax, scale_inv, divide);
}

// torchao's tensorwise current scaling in one call: amax of x, scale from it, the cast.
std::tuple<Tensor, Tensor, Tensor, Tensor, Tensor> cast_transpose_fp8_current_scaling(Tensor x, ScalarType dtype,
                                                                                      bool pow2_scales) {
    auto [rows, cols] = new_cast_outputs(x, dtype);
    const auto x_code = cast_input_code(x.scalar_type());
    if (!x_code) fail(SCHEDX_ERR_UNSUPPORTED_DTYPE, "x must be bf16, fp16 or fp32, got " + dtype_name(x.scalar_type()));
    Tensor amax = new_f32_scalar(x), scale = new_f32_scalar(x), scale_inv = new_f32_scalar(x);
    const Matrix xm = as_matrix(x);
    void *stream = nullptr;
    const schedx_device device = device_of(x, &stream);
    // New outputs: rows [M, K] and cols' [K, M] buffer, both row-major and tight.
    check(schedx_cast_transpose_fp8_current_scaling(
        xm.t.const_data_ptr(), xm.rows, xm.cols, xm.ld, *x_code, *fp8_format(dtype), pow2_scales,
        static_cast<uint8_t *>(rows.mutable_data_ptr()), xm.cols, static_cast<uint8_t *>(cols.mutable_data_ptr()),
        xm.rows, static_cast<float *>(amax.mutable_data_ptr()), static_cast<float *>(scale.mutable_data_ptr()),
        static_cast<float *>(scale_inv.mutable_data_ptr()), device, stream));
    return {rows, cols, amax, scale, scale_inv};
}

// ---- abs_max ----

Tensor abs_max(Tensor x) {
    const auto x_code = cast_input_code(x.scalar_type());
    if (!x_code) fail(SCHEDX_ERR_UNSUPPORTED_DTYPE, "x must be bf16, fp16 or fp32, got " + dtype_name(x.scalar_type()));
    const Matrix xm = as_matrix(x.dim() == 0 ? torch::stable::reshape(x, {1, 1}) : x);  // a 0-d x: one element
    Tensor amax = new_f32_scalar(x);
    void *stream = nullptr;
    const schedx_device device = device_of(x, &stream);
    check(schedx_abs_max(xm.t.const_data_ptr(), xm.rows, xm.cols, xm.ld, *x_code,
                         static_cast<float *>(amax.mutable_data_ptr()), device, stream));
    return amax;
}

// ---- quantize_fp8 ----

// `name`'s value in `table`, else the status names the choices.
template <typename T, size_t N>
T choice(const std::pair<const char *, T> (&table)[N], const std::string &name, const char *what) {
    std::string names;
    for (const auto &[key, value] : table) {
        if (name == key) return value;
        names += std::string(names.empty() ? "" : ", ") + key;
    }
    fail(SCHEDX_ERR_UNSUPPORTED_FORMAT, std::string(what) + " must be one of " + names + ", got '" + name + "'");
}

const std::pair<const char *, schedx_fp8_recipe> kRecipes[] = {{"axiswise", SCHEDX_RECIPE_AXISWISE},
                                                               {"block128x128", SCHEDX_RECIPE_BLOCK_128X128},
                                                               {"block1x128", SCHEDX_RECIPE_BLOCK_1X128},
                                                               {"mxfp8", SCHEDX_RECIPE_MXFP8}};
const std::pair<const char *, schedx_mx_scale_mode> kMxModes[] = {{"floor", SCHEDX_MX_FLOOR},
                                                                  {"rceil", SCHEDX_MX_RCEIL}};

// rows [M, K] and cols [K, M] (x transposed), both row-major, each with its scale array
// (schedx_quantize_fp8_scale_shape; uint8 E8M0 bytes for mxfp8, else float32).
std::tuple<Tensor, Tensor, Tensor, Tensor> quantize_fp8(Tensor x, std::string recipe, ScalarType dtype,
                                                        bool pow2_scales, double epsilon, std::string mx_mode) {
    const auto format = fp8_format(dtype);
    if (!format) {
        fail(SCHEDX_ERR_UNSUPPORTED_FORMAT, "dtype must be float8_e4m3fn or float8_e5m2, got " + dtype_name(dtype));
    }
    const schedx_quantize_fp8_options o{choice(kRecipes, recipe, "recipe"), *format, pow2_scales ? 1 : 0,
                                        float(epsilon), choice(kMxModes, mx_mode, "mx_mode")};
    const auto x_code = cast_input_code(x.scalar_type());
    if (!x_code) fail(SCHEDX_ERR_UNSUPPORTED_DTYPE, "x must be bf16, fp16 or fp32, got " + dtype_name(x.scalar_type()));
    if (x.dim() != 2) fail(SCHEDX_ERR_BAD_SIZE, "x must be 2-D, got shape " + shape_text(x));
    const Matrix xm = as_matrix(x);
    const int64_t m = xm.rows, k = xm.cols;
    const ScalarType scale_dtype = o.recipe == SCHEDX_RECIPE_MXFP8 ? ScalarType::Byte : ScalarType::Float;
    auto scales = [&](int columnwise) {
        int64_t r = 0, c = 0;
        check(schedx_quantize_fp8_scale_shape(o.recipe, m, k, columnwise, &r, &c));
        const std::vector<int64_t> shape{r, c};
        return new_output(x, shape, contiguous_strides(shape), scale_dtype);
    };
    const std::vector<int64_t> rows_shape{m, k}, cols_shape{k, m};
    Tensor rows = new_output(x, rows_shape, contiguous_strides(rows_shape), dtype), rows_scale = scales(0);
    Tensor cols = new_output(x, cols_shape, contiguous_strides(cols_shape), dtype), cols_scale = scales(1);
    void *stream = nullptr;
    const schedx_device device = device_of(x, &stream);
    check(schedx_quantize_fp8(xm.t.const_data_ptr(), m, k, xm.ld, *x_code, &o,
                              static_cast<uint8_t *>(rows.mutable_data_ptr()), k, rows_scale.mutable_data_ptr(),
                              static_cast<uint8_t *>(cols.mutable_data_ptr()), m, cols_scale.mutable_data_ptr(), device,
                              stream));
    return {rows, rows_scale, cols, cols_scale};
}

// ---- w8_linear ----

// What the C ABI cannot see of a w8_linear call: devices, dtypes and shapes (a wrong dtype
// is SCHEDX_ERR_UNSUPPORTED_DTYPE, a wrong shape SCHEDX_ERR_BAD_SIZE, as in the Python kernels).
void check_w8_args(const Tensor &x, const Tensor &w, const Tensor &scales, const std::optional<Tensor> &bias) {
    check_same_device(x, {{&w, "w"}, {&scales, "scales"}, {given(bias), "bias"}});
    if (!half_code(x.scalar_type())) {
        fail(SCHEDX_ERR_UNSUPPORTED_DTYPE, "x must be bf16 or fp16, got " + dtype_name(x.scalar_type()));
    }
    if (x.dim() < 1) fail(SCHEDX_ERR_BAD_SIZE, "x must be [..., K], got a 0-d tensor");
    const std::string k = std::to_string(x.size(x.dim() - 1));
    if (w.scalar_type() != ScalarType::Char) {
        fail(SCHEDX_ERR_UNSUPPORTED_DTYPE, "w must be int8 [N, " + k + "], got " + dtype_name(w.scalar_type()));
    }
    if (w.dim() != 2 || w.size(1) != x.size(x.dim() - 1)) {
        fail(SCHEDX_ERR_BAD_SIZE, "w must be int8 [N, " + k + "], got shape " + shape_text(w));
    }
    const std::string n = std::to_string(w.size(0));
    if (!scale_code(scales.scalar_type())) {
        fail(SCHEDX_ERR_UNSUPPORTED_DTYPE,
             "scales must be bf16 or fp32 [" + n + "], got " + dtype_name(scales.scalar_type()));
    }
    if (scales.dim() != 1 || scales.size(0) != w.size(0)) {
        fail(SCHEDX_ERR_BAD_SIZE, "scales must be bf16 or fp32 [" + n + "], got shape " + shape_text(scales));
    }
    if (bias && bias->scalar_type() != scales.scalar_type()) {
        fail(SCHEDX_ERR_UNSUPPORTED_DTYPE, "bias must be [" + n + "] of scales' dtype " +
                                               dtype_name(scales.scalar_type()) + ", got " +
                                               dtype_name(bias->scalar_type()));
    }
    if (bias && (bias->dim() != 1 || bias->size(0) != w.size(0))) {
        fail(SCHEDX_ERR_BAD_SIZE, "bias must be [" + n + "] of scales' dtype, got shape " + shape_text(*bias));
    }
}

// From this many rows of x, a bf16 call on a CPU with AVX512-BF16 goes to torch's own GEMM
// (oneDNN's vdpbf16ps or AMX) on W converted to bf16, as CUDA calls of large M go to cuBLAS.
// Sapphire Rapids VM, 4096^2, against schedx's tiles, one thread (two): w8 0.99x (0.94x) at
// M = 24, 1.29x (1.21x) at 32, 9.6x (8.7x) at 256 (cpu_compare_..._spr_a85cc5c_w8); w4, whose
// tiles cost more per row, 0.92x (0.91x) at M = 8, 1.28x (1.23x) at 12, 15x (14x) at 256
// (cpu_compare_..._spr_2a5a69b_w4). SCHEDX_CPU_GEMM_MIN_ROWS overrides both (a row count, or "off").
constexpr int64_t kCpuBf16GemmMinRowsW8 = 32;
constexpr int64_t kCpuBf16GemmMinRowsW4 = 12;

// The rows rule first (most CPU calls are below it); then a forced variant (schedx.forcing)
// keeps the call on schedx's own kernels.
bool cpu_bf16_gemm_pays(const Tensor &x, int64_t rows, int64_t min_rows_here, const char *op) {
    if (x.scalar_type() != ScalarType::BFloat16 || x.device().type() != torch::headeronly::DeviceType::CPU) {
        return false;
    }
    int64_t min_rows = min_rows_here;
    if (const char *env = std::getenv("SCHEDX_CPU_GEMM_MIN_ROWS")) {
        if (std::string(env) == "off") return false;
        char *end = nullptr;
        min_rows = std::strtoll(env, &end, 10);
        if (end == env || *end != '\0' || min_rows < 1) {
            fail(SCHEDX_ERR_BAD_SIZE,
                 std::string("SCHEDX_CPU_GEMM_MIN_ROWS must be a row count >= 1 or \"off\", got \"") + env + "\"");
        }
    } else {
#if defined(__x86_64__)
        static const bool bf16_dot = __builtin_cpu_supports("avx512bf16");
#else
        static const bool bf16_dot = false;
#endif
        if (!bf16_dot) return false;
    }
    return rows >= min_rows && !schedx_forced_variant(op);
}

// Bytes of W converted to bf16 at a time by torch's GEMM path. A fresh N x K copy (32 MiB at
// 4096^2, one thread) took 20.4 ms a call against 2.6 into a reused tensor; 1024-2048 rows a
// chunk converted at the reused rate, 128-512 slower (cpu_gemm_chunks_..._spr_a85cc5c).
constexpr int64_t kCpuGemmChunkBytes = 8 << 20;

// y2 = (x2 @ Wb.T) * col_scale (+ col_bias), Wb being W in bf16, which convert(chunk, j0, nc)
// writes for rows j0 .. j0 + nc of W into the [nc, K] chunk. The GEMM's bf16 result is rounded,
// then scaled and biased in fp32 and rounded again, as gpt-fast's linear(x, W.to(x.dtype)) *
// scales rounds. Each chunk is converted and multiplied by torch on all its threads. The
// epilogue is a loop: the stable ABI passes no Scalar to addcmul's or add's alpha.
template <class Convert>
void by_torch_gemm(const char *op, const Tensor &x2, int64_t k, const float *col_scale, const float *col_bias, Tensor &y2,
                   const Convert &convert) {
    using torch::headeronly::detail::f32_from_bits;
    using torch::headeronly::detail::round_to_nearest_even;
    const int64_t m = y2.size(0), n = y2.size(1), ldy = y2.stride(0);
    const int64_t chunk = std::min(n, std::max<int64_t>(16, kCpuGemmChunkBytes / (2 * k) / 16 * 16));
    auto *y = static_cast<uint16_t *>(y2.mutable_data_ptr());
    Tensor w_bf16 = torch::stable::new_empty(x2, {chunk, k}, ScalarType::BFloat16);
    for (int64_t j0 = 0; j0 < n; j0 += chunk) {
        const int64_t nc = std::min(chunk, n - j0);
        Tensor wc = torch::stable::narrow(w_bf16, 0, 0, nc);
        convert(wc, j0, nc);
        const Tensor product = torch::stable::contiguous(torch::stable::matmul(x2, torch::stable::transpose(wc, 0, 1)));
        const auto *p = static_cast<const uint16_t *>(product.const_data_ptr());
        torch::stable::parallel_for(0, m, 1, [&](int64_t begin, int64_t end) {
            for (int64_t i = begin; i < end; i++) {
                for (int64_t j = 0; j < nc; j++) {
                    float v = f32_from_bits(p[i * nc + j]);
                    if (col_scale) v *= col_scale[j0 + j];
                    y[i * ldy + j0 + j] = round_to_nearest_even(col_bias ? v + col_bias[j0 + j] : v);
                }
            }
        });
    }
    // schedx.last_variant names this path, not the op's previous kernel.
    check(schedx_record_outside_call(op, (std::string(op) + "_torch_gemm").c_str(),
                                     "torch's bf16 GEMM: CPU with AVX512-BF16, rows past the tiles' crossover"));
}

// A [N] operand in fp32, contiguous, for by_torch_gemm's epilogue (nullopt stays nullopt).
std::optional<Tensor> as_fp32(const std::optional<Tensor> &t) {
    if (!t) return std::nullopt;
    return torch::stable::contiguous(torch::stable::to(*t, ScalarType::Float));
}

const float *fp32_data(const std::optional<Tensor> &t) {
    return t ? static_cast<const float *>(t->const_data_ptr()) : nullptr;
}

// w8: W's int8 rows copied into the chunk (exact in bf16), scaled in the epilogue.
void w8_by_torch_gemm(const Tensor &x2, const Tensor &w, const Tensor &scales, const std::optional<Tensor> &bias,
                      Tensor &y2) {
    const std::optional<Tensor> s = as_fp32(scales), b = as_fp32(bias);
    Tensor w_int8 = w;  // narrow takes a non-const handle
    by_torch_gemm("w8_linear", x2, w.size(1), fp32_data(s), fp32_data(b), y2, [&](Tensor &wc, int64_t j0, int64_t nc) {
        torch::stable::copy_(wc, torch::stable::narrow(w_int8, 0, j0, nc));
    });
}

// y [..., N] = x [..., K] @ w.T * scales (+ bias), the arguments but y already checked
// (check_w8_args, once per call), then one C call on x's device and current stream.
void w8_into(const Tensor &x, const Tensor &w, const Tensor &scales, const std::optional<Tensor> &bias, Tensor &y) {
    check_same_device(x, {{&y, "out"}});
    const schedx_dtype x_code = *half_code(x.scalar_type());
    const schedx_dtype s_code = *scale_code(scales.scalar_type());
    const int64_t k = x.size(x.dim() - 1), n = w.size(0);
    if (y.scalar_type() != x.scalar_type()) {
        fail(SCHEDX_ERR_UNSUPPORTED_DTYPE, "out must have x's dtype " + dtype_name(x.scalar_type()) + ", got " +
                                               dtype_name(y.scalar_type()));
    }
    bool y_shape = y.dim() == x.dim() && y.size(y.dim() - 1) == n;
    for (int64_t d = 0; y_shape && d + 1 < x.dim(); d++) y_shape = y.size(d) == x.size(d);
    if (!y_shape) {
        fail(SCHEDX_ERR_BAD_SIZE, "out must have x's shape with N = " + std::to_string(n) + " last, got shape " +
                                      shape_text(y));
    }
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
    if (cpu_bf16_gemm_pays(x, xm.rows, kCpuBf16GemmMinRowsW8, "w8_linear")) {
        w8_by_torch_gemm(xm.t, w, scales, bias, y2);
        return;
    }
    const Tensor s = torch::stable::contiguous(scales);
    const std::optional<Tensor> b = bias ? std::optional<Tensor>(torch::stable::contiguous(*bias)) : std::nullopt;
    void *stream = nullptr;
    const schedx_device device = device_of(x, &stream);
    check(schedx_w8_linear(xm.t.const_data_ptr(), xm.rows, k, xm.ld, x_code,
                           static_cast<const int8_t *>(wm.t.const_data_ptr()), n, wm.ld, s.const_data_ptr(), s_code,
                           b ? b->const_data_ptr() : nullptr, y2.mutable_data_ptr(), xm.rows > 1 ? y2.stride(0) : n,
                           device, stream));
}

Tensor w8_linear(Tensor x, Tensor w, Tensor scales, std::optional<Tensor> bias) {
    check_w8_args(x, w, scales, bias);
    std::vector<int64_t> shape(x.sizes().begin(), x.sizes().end());
    shape.back() = w.size(0);
    Tensor y = new_output(x, shape, contiguous_strides(shape), x.scalar_type());
    w8_into(x, w, scales, bias, y);
    return y;
}

void w8_linear_out(Tensor x, Tensor w, Tensor scales, std::optional<Tensor> bias, Tensor out) {
    check_w8_args(x, w, scales, bias);
    w8_into(x, w, scales, bias, out);
}

// ---- w4_linear ----

// What the C ABI cannot see of a w4_linear call: devices, dtypes and shapes (the Python
// kernel's checks and messages).
void check_w4_args(const Tensor &x, const Tensor &w, const Tensor &scales, const std::optional<Tensor> &zeros,
                   const std::optional<Tensor> &bias, int64_t group_size) {
    check_same_device(x, {{&w, "w"}, {&scales, "scales"}, {given(zeros), "zeros"}, {given(bias), "bias"}});
    if (!half_code(x.scalar_type())) {
        fail(SCHEDX_ERR_UNSUPPORTED_DTYPE, "x must be bf16 or fp16, got " + dtype_name(x.scalar_type()));
    }
    if (x.dim() < 1) fail(SCHEDX_ERR_BAD_SIZE, "x must be [..., K], got a 0-d tensor");
    if (group_size != 32 && group_size != 64 && group_size != 128) {
        fail(SCHEDX_ERR_BAD_SIZE, "group_size must be 32, 64 or 128, got " + std::to_string(group_size));
    }
    const int64_t k = x.size(x.dim() - 1);
    if (k % group_size != 0) {
        fail(SCHEDX_ERR_BAD_SIZE, "K (" + std::to_string(k) + ") must be a multiple of group_size (" +
                                      std::to_string(group_size) + ")");
    }
    const std::string w_text = "w must be int32 [N, " + std::to_string(k / 8) + "] (8 nibbles a word), got ";
    if (w.scalar_type() != ScalarType::Int) fail(SCHEDX_ERR_UNSUPPORTED_DTYPE, w_text + dtype_name(w.scalar_type()));
    if (w.dim() != 2 || w.size(1) != k / 8) fail(SCHEDX_ERR_BAD_SIZE, w_text + "shape " + shape_text(w));
    const int64_t n = w.size(0), groups = k / group_size;
    const std::string matrix = "(" + std::to_string(n) + ", " + std::to_string(groups) + ")";
    if (scales.scalar_type() != ScalarType::BFloat16 && scales.scalar_type() != ScalarType::Half) {
        fail(SCHEDX_ERR_UNSUPPORTED_DTYPE, "scales must be bf16 or fp16 [" + std::to_string(n) + ", " +
                                               std::to_string(groups) + "], got " + dtype_name(scales.scalar_type()));
    }
    const std::initializer_list<std::tuple<const Tensor *, const char *, std::string, int64_t>> operands{
        {&scales, "scales", matrix, 2}, {given(zeros), "zeros", matrix, 2}, {given(bias), "bias", "(" + std::to_string(n) + ",)", 1}};
    for (const auto &[t, name, shape, dims] : operands) {
        if (!t) continue;
        if (t->scalar_type() != scales.scalar_type()) {
            fail(SCHEDX_ERR_UNSUPPORTED_DTYPE, std::string(name) + " must have scales' dtype " +
                                                   dtype_name(scales.scalar_type()) + ", got " +
                                                   dtype_name(t->scalar_type()));
        }
        const bool fits = t->dim() == dims && t->size(0) == n && (dims == 1 || t->size(1) == groups);
        if (!fits) fail(SCHEDX_ERR_BAD_SIZE, std::string(name) + " must have shape " + shape + ", got " + shape_text(*t));
    }
}

Tensor w4_linear(Tensor x, Tensor w, Tensor scales, std::optional<Tensor> zeros, std::optional<Tensor> bias,
                 int64_t group_size) {
    check_w4_args(x, w, scales, zeros, bias, group_size);
    const int64_t k = x.size(x.dim() - 1), n = w.size(0);
    std::vector<int64_t> shape(x.sizes().begin(), x.sizes().end());
    shape.back() = n;
    Tensor y = new_output(x, shape, contiguous_strides(shape), x.scalar_type());
    const Matrix xm = as_matrix(x), wm = as_matrix(w);
    if (xm.rows == 0 || n == 0) return y;
    const Tensor s = torch::stable::contiguous(scales);
    const std::optional<Tensor> z = zeros ? std::optional<Tensor>(torch::stable::contiguous(*zeros)) : std::nullopt;
    if (k > 0 && cpu_bf16_gemm_pays(x, xm.rows, kCpuBf16GemmMinRowsW4, "w4_linear")) {
        // W dequantized by schedx (each weight rounded once to bf16, as w4_linear's CUDA
        // dequantize + cuBLAS path does), a chunk of rows at a time, then torch's GEMM.
        const int64_t groups = k / group_size;
        const auto *words = static_cast<const uint32_t *>(wm.t.const_data_ptr());
        const auto *sv = static_cast<const uint16_t *>(s.const_data_ptr());
        const auto *zv = z ? static_cast<const uint16_t *>(z->const_data_ptr()) : nullptr;
        const std::optional<Tensor> b32 = as_fp32(bias);
        Tensor y2 = torch::stable::view(y, {-1, n});
        by_torch_gemm("w4_linear", xm.t, k, nullptr, fp32_data(b32), y2, [&](Tensor &wc, int64_t j0, int64_t nc) {
            check(schedx_w4_dequantize(words + j0 * wm.ld, nc, k, wm.ld, group_size, sv + j0 * groups,
                                       zv ? zv + j0 * groups : nullptr, *half_code(scales.scalar_type()),
                                       SCHEDX_BF16, wc.mutable_data_ptr(), k, SCHEDX_DEVICE_CPU, nullptr));
        });
        return y;
    }
    const std::optional<Tensor> b = bias ? std::optional<Tensor>(torch::stable::contiguous(*bias)) : std::nullopt;
    void *stream = nullptr;
    const schedx_device device = device_of(x, &stream);
    // K = 0 leaves W, the scales and the zero points empty: the C ABI takes NULL for them.
    check(schedx_w4_linear(xm.t.const_data_ptr(), xm.rows, k, xm.ld, *half_code(x.scalar_type()),
                           k ? static_cast<const uint32_t *>(wm.t.const_data_ptr()) : nullptr, n, wm.ld, group_size,
                           k ? s.const_data_ptr() : nullptr, z && k ? z->const_data_ptr() : nullptr,
                           *half_code(scales.scalar_type()), b ? b->const_data_ptr() : nullptr, y.mutable_data_ptr(), n,
                           device, stream));
    return y;
}

}  // namespace

// The same kernels for CPU and CUDA tensors: libschedx takes the device as an argument.
#define SCHEDX_TORCH_KERNELS(m)                                                                   \
    m.impl("cast_transpose_fp8", TORCH_BOX(&cast_transpose_fp8));                                 \
    m.impl("cast_transpose_fp8_amax", TORCH_BOX(&cast_transpose_fp8_amax));                       \
    m.impl("cast_transpose_fp8_out", TORCH_BOX(&cast_transpose_fp8_out));                         \
    m.impl("cast_transpose_fp8_current_scaling", TORCH_BOX(&cast_transpose_fp8_current_scaling)); \
    m.impl("abs_max", TORCH_BOX(&abs_max));                                                       \
    m.impl("quantize_fp8", TORCH_BOX(&quantize_fp8));                                             \
    m.impl("w8_linear", TORCH_BOX(&w8_linear));                                                   \
    m.impl("w8_linear_out", TORCH_BOX(&w8_linear_out));                                           \
    m.impl("w4_linear", TORCH_BOX(&w4_linear));                                                   \
    m.impl("cast_transpose_fp8.below_autograd", TORCH_BOX(&cast_transpose_fp8));                  \
    m.impl("cast_transpose_fp8_amax.below_autograd", TORCH_BOX(&cast_transpose_fp8_amax));        \
    m.impl("cast_transpose_fp8_current_scaling.below_autograd",                                   \
           TORCH_BOX(&cast_transpose_fp8_current_scaling));                                       \
    m.impl("w8_linear.below_autograd", TORCH_BOX(&w8_linear));                                    \
    m.impl("w4_linear.below_autograd", TORCH_BOX(&w4_linear))

// CPU variants run their parallel loops on torch's thread pool: one pool in the process, so
// torch's ops and schedx's never oversubscribe the cores (two pools, each spinning after its
// loops, cost 10-50x on the 2-core build machine), at torch.get_num_threads() threads.
STABLE_TORCH_LIBRARY_IMPL(schedx, CPU, m) {
    schedx_set_parallel_for(torch_parallel_for);
    SCHEDX_TORCH_KERNELS(m);
}

STABLE_TORCH_LIBRARY_IMPL(schedx, CUDA, m) { SCHEDX_TORCH_KERNELS(m); }
