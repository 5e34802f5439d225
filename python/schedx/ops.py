"""schedx's operators in PyTorch: torch.ops.schedx.*.

Declared with torch.library's define/impl, not torch.library.custom_op, whose wrapper
costs several microseconds more per call. Every op runs a C++ kernel
(python/csrc/torch_ops.cpp, libschedx_torch.so beside libschedx.so, registered through
PyTorch's stable ABI) where that library is built, else the Python kernel below, over
libschedx's C ABI through ctypes; either way on the tensor's current CUDA stream.
SCHEDX_TORCH_KERNELS=python skips the C++ kernels; SCHEDX_TORCH_KERNELS=c++ makes their
absence an error. Each op has a fake (meta)
implementation with the real outputs' shapes, dtypes and strides, so torch.compile
traces it with fullgraph=True and CUDA graphs capture it. A failure raises RuntimeError,
as torch's own ops do; from a Python kernel it is a SchedxError, which is one.

  cast_transpose_fp8(x, scale, dtype, *, divide=False) -> (rows, cols)
  cast_transpose_fp8_amax(x, scale, dtype) -> (rows, cols, amax, scale_inv)
  cast_transpose_fp8_out(x, scale, *, rows, cols, amax=None, scale_inv=None, divide=False)
  cast_transpose_fp8_current_scaling(x, dtype, pow2_scales=False)
      -> (rows, cols, amax, scale, scale_inv)   (torchao's tensorwise scale of x's own amax)
  abs_max(x) -> amax
  w8_linear(x, w, scales, bias=None) -> y
  w8_linear_out(x, w, scales, bias, *, out)
  w4_linear(x, w, scales, zeros, bias, group_size) -> y   (group-wise int4: schedx.int4)
  quantize_fp8(x, recipe, dtype, pow2_scales=True, epsilon=0.0, mx_mode="rceil")
      -> (rows, rows_scale, cols, cols_scale)   (block-scaled recipes: schedx.quantize)

rows is [M, K] row-major; cols is [M, K] with the strides of f.t().contiguous().t() (a
[K, M] row-major buffer, transposed); amax, scale and scale_inv are one-element float32.
divide=True casts x / scale (IEEE fp32 division, as eager `x / s`) instead of x * scale,
and takes no amax or scale_inv (schedx_cast_transpose_fp8_divide).
docs/pytorch.md's convention table says the same for every op.

Every tensor of a call must be on x's device (the fake implementations check it too, so
a meta tensor beside real ones raises instead of returning uninitialised outputs).
w8_linear is differentiable in x and bias (dgrad = (grad_y * scales) @ W, W and scales
frozen); the other ops have no derivative and raise when an input requires grad in a
grad-enabled region. Both are Python Autograd kernels: outside torch.inference_mode()
every call through the dispatcher (eager, or torch.compile's code) pays their host time
(docs/pytorch.md); CUDA graph replays do not.
"""

import itertools
import os

import torch

from . import _capi
from ._capi import SchedxError, Status
from .quantize import MxScaleMode, Recipe

_X_CODES = {torch.bfloat16: _capi.BF16, torch.float16: _capi.FP16, torch.float32: _capi.FP32}
_SCALE_CODES = {torch.bfloat16: _capi.BF16, torch.float32: _capi.FP32}
_FP8_CODES = {torch.float8_e4m3fn: _capi.FP8_FORMATS[_capi.Fp8Format.E4M3FN],
              torch.float8_e5m2: _capi.FP8_FORMATS[_capi.Fp8Format.E5M2]}
# The raw-pointer getter Inductor's generated code uses: no Stream object per call.
_current_stream = getattr(torch._C, "_cuda_getCurrentRawStream", None)

_lib = torch.library.Library("schedx", "DEF")
_lib.define("cast_transpose_fp8(Tensor x, Tensor scale, ScalarType dtype, *, bool divide=False) -> "
            "(Tensor rows, Tensor cols)")
_lib.define("cast_transpose_fp8_amax(Tensor x, Tensor scale, ScalarType dtype) -> "
            "(Tensor rows, Tensor cols, Tensor amax, Tensor scale_inv)")
_lib.define("cast_transpose_fp8_out(Tensor x, Tensor scale, *, Tensor(a!)? rows, Tensor(b!)? cols, "
            "Tensor(c!)? amax=None, Tensor(d!)? scale_inv=None, bool divide=False) -> ()")
_lib.define("cast_transpose_fp8_current_scaling(Tensor x, ScalarType dtype, bool pow2_scales=False) -> "
            "(Tensor rows, Tensor cols, Tensor amax, Tensor scale, Tensor scale_inv)")
_lib.define("abs_max(Tensor x) -> Tensor")
_lib.define("w8_linear(Tensor x, Tensor w, Tensor scales, Tensor? bias=None) -> Tensor")
_lib.define("w8_linear_out(Tensor x, Tensor w, Tensor scales, Tensor? bias, *, Tensor(a!) out) -> ()")
_lib.define("w4_linear(Tensor x, Tensor w, Tensor scales, Tensor? zeros, Tensor? bias, int group_size) -> Tensor")
_lib.define("quantize_fp8(Tensor x, str recipe, ScalarType dtype, bool pow2_scales=True, float epsilon=0.0, "
            f"str mx_mode=\"{MxScaleMode.RCEIL.value}\") -> "
            "(Tensor rows, Tensor rows_scale, Tensor cols, Tensor cols_scale)")

# The same kernels again as the overload below_autograd, with no Autograd kernel: what graph
# passes emit (schedx.inductor), whose graphs are below autograd already and have no use for
# the Python Autograd kernel's host time on every call (docs/pytorch.md).
BELOW_AUTOGRAD = (
    "cast_transpose_fp8", "cast_transpose_fp8_amax", "cast_transpose_fp8_current_scaling", "w8_linear", "w4_linear")
for _name in BELOW_AUTOGRAD:
    _lib.define(str(getattr(torch.ops.schedx, _name).default._schema).removeprefix("schedx::")
                .replace("(", ".below_autograd(", 1))

_lib_handle = _capi.lib


def _fail(status, message):
    raise SchedxError(status, message)


def _device_args(t):
    """(schedx device, stream) of a call on tensor t; a CPU call runs on torch's thread count."""
    if t.is_cuda:
        return _capi.DEVICE_CUDA, _current_stream(t.get_device())
    if t.device.type != "cpu":
        _fail(Status.ERR_BAD_DEVICE, f"x is on device {t.device}; schedx runs on cpu and cuda tensors")
    _capi.set_num_threads(torch.get_num_threads())
    return _capi.DEVICE_CPU, None


def _same_device(x, *named):
    """Each (tensor or None, name) of `named` is on x's device, as torch's own ops require
    (their words). The fake implementations check it too: they are also the Meta kernels,
    which serve any call with a meta tensor among its arguments."""
    device = x.device
    for t, name in named:
        if t is not None and t.device != device:
            _fail(Status.ERR_POINTER_DEVICE, f"{name}: Tensor on device {t.device} is not on the expected device "
                  f"{device}!")


def _matrix(t, name):
    """(t, rows, cols, leading dimension) of a 2-D input, copied to row-major when its
    last dimension is not contiguous (the C ABI takes any row stride, unit column stride)."""
    if t.dim() != 2:
        _fail(Status.ERR_BAD_SIZE, f"{name} must be 2-D, got shape {tuple(t.shape)}")
    m, k = t.shape
    s0, s1 = t.stride()
    if m == 0 or k == 0:
        return t, m, k, k
    if (s1 != 1 and k > 1) or (m > 1 and s0 < k):
        t = t.contiguous()
        s0 = k
    return t, m, k, (s0 if m > 1 else k)


def _output_ld(t, name, m, k, dtype):
    """Leading dimension of a caller's [m, k] row-major output (unit column stride)."""
    if t.dtype != dtype:
        _fail(Status.ERR_UNSUPPORTED_DTYPE, f"{name} must have dtype {dtype}, got {t.dtype}")
    if tuple(t.shape) != (m, k):
        _fail(Status.ERR_BAD_SIZE, f"{name} must have shape ({m}, {k}), got {tuple(t.shape)}")
    s0, s1 = t.stride()
    if m > 0 and k > 1 and s1 != 1:
        _fail(Status.ERR_BAD_LEADING_DIM, f"{name} with strides {t.stride()} is not row-major")
    return s0 if m > 1 else k


def _scalar_f32(t, name):
    if t.dtype != torch.float32:
        _fail(Status.ERR_UNSUPPORTED_DTYPE, f"{name} must be a one-element float32 tensor, got {t.dtype}")
    if t.numel() != 1:
        _fail(Status.ERR_BAD_SIZE, f"{name} must be a one-element float32 tensor, got shape {tuple(t.shape)}")


def _cast_into(x, scale, rows, cols, amax, scale_inv, divide=False):
    _same_device(x, (scale, "scale"), (rows, "rows"), (cols, "cols"), (amax, "amax"), (scale_inv, "scale_inv"))
    fp8 = rows.dtype if rows is not None else (cols.dtype if cols is not None else None)
    fmt = _FP8_CODES.get(fp8)
    if fmt is None:
        _fail(Status.ERR_UNSUPPORTED_FORMAT, f"outputs must be float8_e4m3fn or float8_e5m2, got {fp8}")
    x_code = _X_CODES.get(x.dtype)
    if x_code is None:
        _fail(Status.ERR_UNSUPPORTED_DTYPE, f"x must be bf16, fp16 or fp32, got {x.dtype}")
    _scalar_f32(scale, "scale")
    if (amax is None) != (scale_inv is None):
        _fail(Status.ERR_NULL_POINTER, "amax and scale_inv must be both given or both None")
    if divide and amax is not None:
        _fail(Status.ERR_NO_VARIANT, "divide=True writes no amax or scale_inv")
    for t, name in ((amax, "amax"), (scale_inv, "scale_inv")):
        if t is not None:
            _scalar_f32(t, name)
    x, m, k, ldx = _matrix(x, "x")
    ld_rows = _output_ld(rows, "rows", m, k, fp8) if rows is not None else k
    ld_cols = _output_ld(cols.t(), "cols (transposed)", k, m, fp8) if cols is not None else m
    if m == 0 or k == 0:  # nothing to cast; amax of no elements is 0
        if amax is not None:
            amax.zero_()
            torch.reciprocal(scale.reshape(scale_inv.shape), out=scale_inv)
        return
    device, stream = _device_args(x)
    rows_ptr, cols_ptr = (None if t is None else t.data_ptr() for t in (rows, cols))
    if divide:
        _capi.check(_capi.lib().schedx_cast_transpose_fp8_divide(
            x.data_ptr(), m, k, ldx, x_code, scale.data_ptr(), fmt, rows_ptr, ld_rows, cols_ptr, ld_cols, device,
            stream))
        return
    _capi.check(_capi.lib().schedx_cast_transpose_fp8(
        x.data_ptr(), m, k, ldx, x_code, scale.data_ptr(), fmt,
        rows_ptr, ld_rows, cols_ptr, ld_cols, None if amax is None else amax.data_ptr(), None if scale_inv is None else scale_inv.data_ptr(),
        device, stream))


def new_cols(x, m, k, dtype):
    """An [m, k] output with the strides of f.t().contiguous().t() for a contiguous f:
    (1, m), a transposed [k, m] buffer, except where f.t() already counts as contiguous
    (m = 1, k = 1 or no elements), which keeps f's own strides."""
    strides = (max(k, 1), 1) if m == 1 or k <= 1 or m == 0 else (1, m)
    return x.new_empty_strided((m, k), strides, dtype=dtype)


def _cast_outputs(x, dtype, with_amax):
    """New outputs of a cast of x: rows, cols and, with_amax, amax and scale_inv."""
    m, k = x.shape
    rows = x.new_empty((m, k), dtype=dtype)
    cols = new_cols(x, m, k, dtype)
    if not with_amax:
        return rows, cols
    return rows, cols, x.new_empty((1,), dtype=torch.float32), x.new_empty((1,), dtype=torch.float32)


def _check_cast_args(x, dtype):
    if x.dim() != 2:
        _fail(Status.ERR_BAD_SIZE, f"x must be 2-D, got shape {tuple(x.shape)}")
    if dtype not in _FP8_CODES:
        _fail(Status.ERR_UNSUPPORTED_FORMAT, f"dtype must be float8_e4m3fn or float8_e5m2, got {dtype}")


def cast_transpose_fp8(x, scale, dtype, *, divide=False):
    _check_cast_args(x, dtype)
    out = _cast_outputs(x, dtype, False)
    _cast_into(x, scale, out[0], out[1], None, None, divide)
    return out


def cast_transpose_fp8_amax(x, scale, dtype):
    _check_cast_args(x, dtype)
    out = _cast_outputs(x, dtype, True)
    _cast_into(x, scale, *out)
    return out


def cast_transpose_fp8_out(x, scale, *, rows, cols, amax=None, scale_inv=None, divide=False):
    if rows is None and cols is None:
        _fail(Status.ERR_NULL_POINTER, "rows and cols are both None: nothing to write")
    _cast_into(x, scale, rows, cols, amax, scale_inv, divide)


def cast_transpose_fp8_current_scaling(x, dtype, pow2_scales=False):
    _check_cast_args(x, dtype)
    x_code = _X_CODES.get(x.dtype)
    if x_code is None:
        _fail(Status.ERR_UNSUPPORTED_DTYPE, f"x must be bf16, fp16 or fp32, got {x.dtype}")
    rows, cols, amax, scale_inv = _cast_outputs(x, dtype, True)
    scale = x.new_empty((1,), dtype=torch.float32)
    x2, m, k, ldx = _matrix(x, "x")
    device, stream = _device_args(x)
    # cols' buffer is [K, M] row-major (its strides are (1, M) or, where f.t() counts as
    # contiguous, no element has a second index to step).
    _capi.check(_capi.lib().schedx_cast_transpose_fp8_current_scaling(
        x2.data_ptr(), m, k, ldx, x_code, _FP8_CODES[dtype], int(pow2_scales), rows.data_ptr(), k,
        cols.data_ptr(), m, amax.data_ptr(), scale.data_ptr(), scale_inv.data_ptr(), device, stream))
    return rows, cols, amax, scale, scale_inv


def abs_max(x):
    x_code = _X_CODES.get(x.dtype)
    if x_code is None:
        _fail(Status.ERR_UNSUPPORTED_DTYPE, f"x must be bf16, fp16 or fp32, got {x.dtype}")
    x2 = x if x.dim() == 2 else x.reshape(-1, x.shape[-1] if x.dim() else 1)  # a 0-d x: one element
    x2, m, k, ldx = _matrix(x2, "x")
    amax = x.new_empty((1,), dtype=torch.float32)
    device, stream = _device_args(x)
    _capi.check(_capi.lib().schedx_abs_max(x2.data_ptr(), m, k, ldx, x_code, amax.data_ptr(), device, stream))
    return amax


def _check_w8_args(x, w, scales, bias):
    """What the C ABI cannot see of a w8_linear call: devices, dtypes and shapes (a wrong
    dtype is ERR_UNSUPPORTED_DTYPE, a wrong shape ERR_BAD_SIZE, as in the C++ kernels)."""
    _same_device(x, (w, "w"), (scales, "scales"), (bias, "bias"))
    if x.dtype not in (torch.bfloat16, torch.float16):
        _fail(Status.ERR_UNSUPPORTED_DTYPE, f"x must be bf16 or fp16, got {x.dtype}")
    if x.dim() < 1:
        _fail(Status.ERR_BAD_SIZE, "x must be [..., K], got a 0-d tensor")
    k = x.shape[-1]
    if w.dtype != torch.int8:
        _fail(Status.ERR_UNSUPPORTED_DTYPE, f"w must be int8 [N, {k}], got {w.dtype}")
    if w.dim() != 2 or w.shape[1] != k:
        _fail(Status.ERR_BAD_SIZE, f"w must be int8 [N, {k}], got shape {tuple(w.shape)}")
    n = w.shape[0]
    if scales.dtype not in _SCALE_CODES:
        _fail(Status.ERR_UNSUPPORTED_DTYPE, f"scales must be bf16 or fp32 [{n}], got {scales.dtype}")
    if tuple(scales.shape) != (n,):
        _fail(Status.ERR_BAD_SIZE, f"scales must be bf16 or fp32 [{n}], got shape {tuple(scales.shape)}")
    if bias is not None and bias.dtype != scales.dtype:
        _fail(Status.ERR_UNSUPPORTED_DTYPE, f"bias must be [{n}] of scales' dtype {scales.dtype}, got {bias.dtype}")
    if bias is not None and tuple(bias.shape) != (n,):
        _fail(Status.ERR_BAD_SIZE, f"bias must be [{n}] of scales' dtype, got shape {tuple(bias.shape)}")


def _w8_into(x, w, scales, bias, y):
    """y [..., N] = x [..., K] @ w.T * scales (+ bias), y and x of one leading shape; the
    arguments but y already checked (_check_w8_args)."""
    _same_device(x, (y, "out"))
    k, n, x_code = x.shape[-1], w.shape[0], _X_CODES[x.dtype]
    if y.dtype != x.dtype:
        _fail(Status.ERR_UNSUPPORTED_DTYPE, f"out must have x's dtype {x.dtype}, got {y.dtype}")
    if tuple(y.shape) != tuple(x.shape[:-1]) + (n,):
        _fail(Status.ERR_BAD_SIZE, f"out must have shape {tuple(x.shape[:-1]) + (n,)}, got {tuple(y.shape)}")
    s_code = _SCALE_CODES[scales.dtype]
    x2, m, _, ldx = _matrix(x if x.dim() == 2 else x.reshape(-1, k), "x")
    w, _, _, ldw = _matrix(w, "w")
    if m == 0 or n == 0:
        return
    y2 = y if y.dim() == 2 else y.view(-1, n)
    ldy = _output_ld(y2, "out", m, n, y.dtype)
    if k == 0:  # an empty sum: y is the bias, or 0
        y2.copy_(bias.expand(m, n) if bias is not None else y2.new_zeros(()).expand(m, n))
        return
    scales = scales.contiguous()
    bias = None if bias is None else bias.contiguous()
    device, stream = _device_args(x)
    _capi.check(_capi.lib().schedx_w8_linear(
        x2.data_ptr(), m, k, ldx, x_code, w.data_ptr(), n, ldw, scales.data_ptr(), s_code,
        None if bias is None else bias.data_ptr(), y2.data_ptr(), ldy, device, stream))


def w8_linear(x, w, scales, bias=None):
    # The common case checks only what the C ABI cannot see (devices, K of w, the vectors'
    # length and dtypes): each Python step here is host time on every decode step.
    xs, ws = x.stride(), w.stride()
    n = w.shape[0] if w.dim() == 2 else -1
    if (x.dim() == 2 and n > 0 and xs[1] == 1 and ws[1] == 1 and w.dtype == torch.int8 and w.shape[1] == x.shape[1]
            and scales.shape == (n,) and scales.stride() == (1,) and bias is None and x.shape[0] > 0 and
            x.device == w.device == scales.device):
        x_code, s_code = _X_CODES.get(x.dtype), _SCALE_CODES.get(scales.dtype)
        if x_code is not None and x_code != _capi.FP32 and s_code is not None:
            m, k = x.shape
            y = x.new_empty((m, n))
            cuda = x.is_cuda
            _capi.check(_lib_handle().schedx_w8_linear(
                x.data_ptr(), m, k, xs[0] if m > 1 else k, x_code, w.data_ptr(), n, ws[0] if n > 1 else k,
                scales.data_ptr(), s_code, None, y.data_ptr(), n, int(cuda),
                _current_stream(x.get_device()) if cuda else None))
            return y
    _check_w8_args(x, w, scales, bias)
    y = x.new_empty(x.shape[:-1] + (w.shape[0],))
    _w8_into(x, w, scales, bias, y)
    return y


def w8_linear_out(x, w, scales, bias, *, out):
    _check_w8_args(x, w, scales, bias)
    _w8_into(x, w, scales, bias, out)


_W4_SCALE_CODES = {torch.bfloat16: _capi.BF16, torch.float16: _capi.FP16}


def _check_w4_args(x, w, scales, zeros, bias, group_size):
    """What the C ABI cannot see of a w4_linear call: devices, dtypes and shapes."""
    _same_device(x, (w, "w"), (scales, "scales"), (zeros, "zeros"), (bias, "bias"))
    if x.dtype not in (torch.bfloat16, torch.float16):
        _fail(Status.ERR_UNSUPPORTED_DTYPE, f"x must be bf16 or fp16, got {x.dtype}")
    if x.dim() < 1:
        _fail(Status.ERR_BAD_SIZE, "x must be [..., K], got a 0-d tensor")
    if group_size not in (32, 64, 128):
        _fail(Status.ERR_BAD_SIZE, f"group_size must be 32, 64 or 128, got {group_size}")
    k = x.shape[-1]
    if k % group_size != 0:
        _fail(Status.ERR_BAD_SIZE, f"K ({k}) must be a multiple of group_size ({group_size})")
    if w.dtype != torch.int32:
        _fail(Status.ERR_UNSUPPORTED_DTYPE, f"w must be int32 [N, {k // 8}] (8 nibbles a word), got {w.dtype}")
    if w.dim() != 2 or w.shape[1] != k // 8:
        _fail(Status.ERR_BAD_SIZE, f"w must be int32 [N, {k // 8}] (8 nibbles a word), got shape {tuple(w.shape)}")
    n, groups = w.shape[0], k // group_size
    if scales.dtype not in _W4_SCALE_CODES:
        _fail(Status.ERR_UNSUPPORTED_DTYPE, f"scales must be bf16 or fp16 [{n}, {groups}], got {scales.dtype}")
    for t, name, shape in ((scales, "scales", (n, groups)), (zeros, "zeros", (n, groups)), (bias, "bias", (n,))):
        if t is None:
            continue
        if t.dtype != scales.dtype:
            _fail(Status.ERR_UNSUPPORTED_DTYPE, f"{name} must have scales' dtype {scales.dtype}, got {t.dtype}")
        if tuple(t.shape) != shape:
            _fail(Status.ERR_BAD_SIZE, f"{name} must have shape {shape}, got {tuple(t.shape)}")


def w4_linear(x, w, scales, zeros, bias, group_size):
    _check_w4_args(x, w, scales, zeros, bias, group_size)
    k, n = x.shape[-1], w.shape[0]
    y = x.new_empty(x.shape[:-1] + (n,))
    x2, m, _, ldx = _matrix(x if x.dim() == 2 else x.reshape(-1, k), "x")
    w, _, _, ldw = _matrix(w, "w")
    if m == 0 or n == 0:
        return y
    scales, zeros, bias = (None if t is None else t.contiguous() for t in (scales, zeros, bias))
    device, stream = _device_args(x)
    _capi.check(_capi.lib().schedx_w4_linear(
        x2.data_ptr(), m, k, ldx, _X_CODES[x.dtype], w.data_ptr() if k else None, n, ldw, group_size,
        scales.data_ptr() if k else None, None if zeros is None or not k else zeros.data_ptr(),
        _W4_SCALE_CODES[scales.dtype], None if bias is None else bias.data_ptr(), y.data_ptr(), n, device, stream))
    return y



@torch.library.register_fake("schedx::w4_linear.below_autograd")
@torch.library.register_fake("schedx::w4_linear")
def _(x, w, scales, zeros, bias, group_size):
    _check_w4_args(x, w, scales, zeros, bias, group_size)
    return x.new_empty(x.shape[:-1] + (w.shape[0],))


def _fp8_name(dtype):
    if dtype not in _FP8_CODES:
        _fail(Status.ERR_UNSUPPORTED_FORMAT, f"dtype must be float8_e4m3fn or float8_e5m2, got {dtype}")
    return _capi.Fp8Format.E4M3FN if dtype == torch.float8_e4m3fn else _capi.Fp8Format.E5M2


def quantize_fp8(x, recipe, dtype, pow2_scales=True, epsilon=0.0, mx_mode=MxScaleMode.RCEIL):
    from . import quantize
    return quantize.quantize_fp8(x, recipe, _fp8_name(dtype), True, True, pow2_scales, epsilon, mx_mode)


def quantize_scale_shape(recipe, m, k, columnwise):
    """The scale array's shape (schedx.h, schedx_quantize_fp8), in Python so that it holds
    for symbolic sizes; tests check it against schedx_quantize_fp8_scale_shape."""
    def ceil(a, b):
        return (a + b - 1) // b

    def pad4(n):
        return ceil(n, 4) * 4

    if columnwise:
        m, k = k, m  # cols quantizes x transposed: its rows run along the original M
    if recipe == Recipe.BLOCK_1X128:
        return ceil(k, 128), pad4(m)
    if recipe == Recipe.BLOCK_128X128:
        return ceil(m, 128), pad4(ceil(k, 128))
    if recipe == Recipe.MXFP8:
        return m, ceil(k, 32)
    if recipe == Recipe.AXISWISE:
        return (1, m) if columnwise else (m, 1)
    _fail(Status.ERR_UNSUPPORTED_FORMAT, f"unknown recipe {recipe!r}")


def _load_cpp_kernels():
    """Loads libschedx_torch.so from beside the loaded libschedx.so; "c++" if it did, else
    "python"."""
    choice = os.environ.get("SCHEDX_TORCH_KERNELS", "")
    if choice not in ("", "python", "c++"):
        raise ValueError(f"SCHEDX_TORCH_KERNELS must be python or c++, got {choice!r}")
    if choice == "python":
        return "python"
    path = os.path.join(os.path.dirname(os.path.abspath(_capi.lib()._name)), "libschedx_torch.so")
    if os.path.exists(path):
        torch.ops.load_library(path)
        return "c++"
    if choice == "c++":
        raise OSError(f"SCHEDX_TORCH_KERNELS=c++ but {path} does not exist (built where the build's Python has torch)")
    return "python"


# Which kernels the ops run: "c++" or "python".
kernels = _load_cpp_kernels()

if kernels == "python":
    for _name, _fn in (("cast_transpose_fp8", cast_transpose_fp8),
                       ("cast_transpose_fp8_amax", cast_transpose_fp8_amax),
                       ("cast_transpose_fp8_out", cast_transpose_fp8_out),
                       ("cast_transpose_fp8_current_scaling", cast_transpose_fp8_current_scaling), ("abs_max", abs_max),
                       ("w8_linear", w8_linear), ("w8_linear_out", w8_linear_out), ("w4_linear", w4_linear),
                       ("quantize_fp8", quantize_fp8)):
        for _overload in ((_name, f"{_name}.below_autograd") if _name in BELOW_AUTOGRAD else (_name,)):
            _lib.impl(_overload, _fn, "CPU")
            _lib.impl(_overload, _fn, "CUDA")


@torch.library.register_fake("schedx::cast_transpose_fp8.below_autograd")
@torch.library.register_fake("schedx::cast_transpose_fp8")
def _(x, scale, dtype, *, divide=False):
    _same_device(x, (scale, "scale"))
    _check_cast_args(x, dtype)
    return _cast_outputs(x, dtype, False)


@torch.library.register_fake("schedx::cast_transpose_fp8_amax.below_autograd")
@torch.library.register_fake("schedx::cast_transpose_fp8_amax")
def _(x, scale, dtype):
    _same_device(x, (scale, "scale"))
    _check_cast_args(x, dtype)
    return _cast_outputs(x, dtype, True)


@torch.library.register_fake("schedx::cast_transpose_fp8_out")
def _(x, scale, *, rows, cols, amax=None, scale_inv=None, divide=False):
    _same_device(x, (scale, "scale"), (rows, "rows"), (cols, "cols"), (amax, "amax"), (scale_inv, "scale_inv"))
    if divide and amax is not None:
        _fail(Status.ERR_NO_VARIANT, "divide=True writes no amax or scale_inv")
    return None


@torch.library.register_fake("schedx::cast_transpose_fp8_current_scaling.below_autograd")
@torch.library.register_fake("schedx::cast_transpose_fp8_current_scaling")
def _(x, dtype, pow2_scales=False):
    _check_cast_args(x, dtype)
    rows, cols, amax, scale_inv = _cast_outputs(x, dtype, True)
    return rows, cols, amax, x.new_empty((1,), dtype=torch.float32), scale_inv


@torch.library.register_fake("schedx::abs_max")
def _(x):
    return x.new_empty((1,), dtype=torch.float32)


@torch.library.register_fake("schedx::w8_linear.below_autograd")
@torch.library.register_fake("schedx::w8_linear")
def _(x, w, scales, bias=None):
    _same_device(x, (w, "w"), (scales, "scales"), (bias, "bias"))
    return x.new_empty(x.shape[:-1] + (w.shape[0],))


@torch.library.register_fake("schedx::w8_linear_out")
def _(x, w, scales, bias, *, out):
    _same_device(x, (w, "w"), (scales, "scales"), (bias, "bias"), (out, "out"))
    return None


@torch.library.register_fake("schedx::quantize_fp8")
def _(x, recipe, dtype, pow2_scales=True, epsilon=0.0, mx_mode=MxScaleMode.RCEIL):
    _fp8_name(dtype)
    if x.dim() != 2:
        _fail(Status.ERR_BAD_SIZE, f"x must be 2-D, got shape {tuple(x.shape)}")
    m, k = x.shape
    scale_dtype = torch.uint8 if recipe == Recipe.MXFP8 else torch.float32
    return (x.new_empty((m, k), dtype=dtype), x.new_empty(quantize_scale_shape(recipe, m, k, False), dtype=scale_dtype),
            x.new_empty((k, m), dtype=dtype), x.new_empty(quantize_scale_shape(recipe, m, k, True), dtype=scale_dtype))


# ------------------------------------------------------------------ autograd
# Python Autograd kernels (the stable ABI has no redispatch below autograd): every call
# outside torch.inference_mode() runs one; docs/pytorch.md gives its host time.
_after_autograd = torch._C._after_autograd_keyset


def _redispatch(op, keyset, args, kwargs):
    with torch._C._AutoDispatchBelowAutograd():
        return op.redispatch(keyset & _after_autograd, *args, **kwargs)


def _requires_grad(args, kwargs):
    return torch.is_grad_enabled() and (torch._C._any_requires_grad(*args) or
                                        bool(kwargs) and torch._C._any_requires_grad(*kwargs.values()))


def _refuse_grad(name):
    """The Autograd kernel of an op with no derivative: an input that requires grad in a
    grad-enabled region raises here, instead of torch's fallback warning at backward and
    leaving its .grad None."""
    op = getattr(torch.ops.schedx, name).default
    arg_names = [a.name for a in op._schema.arguments]

    def kernel(keyset, *args, **kwargs):
        if _requires_grad(args, kwargs):
            arg = next(n for n, v in itertools.chain(zip(arg_names, args), kwargs.items())
                       if isinstance(v, torch.Tensor) and v.requires_grad)
            raise RuntimeError(f"schedx::{name} has no derivative, and {arg} requires grad: call it under "
                               f"torch.no_grad() or pass {arg}.detach()")
        return _redispatch(op, keyset, args, kwargs)

    _lib.impl(name, kernel, "Autograd", with_keyset=True)


for _name in ("cast_transpose_fp8", "cast_transpose_fp8_amax", "cast_transpose_fp8_out",
              "cast_transpose_fp8_current_scaling", "abs_max", "quantize_fp8", "w8_linear_out", "w4_linear"):
    _refuse_grad(_name)


class _W8LinearFunction(torch.autograd.Function):
    """y = w8_linear(x, w, scales, bias) with gradients for x and bias: the derivative of
    F.linear(x, w.to(x.dtype)) * scales + bias, composed of torch ops (w and scales are
    frozen: int8 has no gradient, and the scales are quantization constants)."""

    @staticmethod
    def forward(ctx, keyset, x, w, scales, bias):
        ctx.save_for_backward(w, scales)
        ctx.x_dtype = x.dtype
        return _redispatch(torch.ops.schedx.w8_linear.default, keyset, (x, w, scales, bias), {})

    @staticmethod
    def backward(ctx, grad_y):
        w, scales = ctx.saved_tensors
        _, needs_x, _, _, needs_bias = ctx.needs_input_grad
        # In the reference's order and dtypes: (grad_y * scales) rounded to x's dtype, then
        # the matmul in that dtype.
        grad_x = (grad_y * scales).to(ctx.x_dtype) @ w.to(ctx.x_dtype) if needs_x else None
        grad_bias = (grad_y.reshape(-1, grad_y.shape[-1]).sum(0, dtype=torch.float32).to(scales.dtype)
                     if needs_bias else None)
        return None, grad_x, None, None, grad_bias


def _w8_linear_autograd(keyset, x, w, scales, bias=None):
    if _requires_grad((x, w, scales, bias), {}):
        if scales.requires_grad:
            raise RuntimeError("schedx::w8_linear has no derivative for scales (frozen quantization constants), "
                               "and scales requires grad: pass scales.detach()")
        return _W8LinearFunction.apply(keyset, x, w, scales, bias)
    return _redispatch(torch.ops.schedx.w8_linear.default, keyset, (x, w, scales, bias), {})


_lib.impl("w8_linear", _w8_linear_autograd, "Autograd", with_keyset=True)
