"""schedx from Python: ctypes over libschedx.so.

torch tensors run where they live (CUDA tensors on their device's current stream, CPU
tensors on the CPU variants) and give torch tensors back; numpy arrays run the CPU
variants and give numpy arrays back (bf16 as ml_dtypes.bfloat16 or raw uint16 bits, fp8
as ml_dtypes.float8_*). Neither torch nor numpy is imported here: each is touched only
when an argument is one of its arrays, so the package imports with either alone.

The library is found through SCHEDX_LIBRARY, else build/runtime/libschedx.so of this
repository, else the dynamic loader's path.
"""

import collections
import contextlib
import numbers
import sys

from . import _capi
from ._capi import SchedxError, Status

__all__ = [
    "SchedxError", "Status", "Variant", "cast_transpose_fp8", "w8_linear", "has_w8_linear", "variants",
    "force_variant", "forcing", "last_variant", "last_reason",
]

Variant = collections.namedtuple("Variant", "name op device params")

def _error(status, message):
    return SchedxError(status, message)


class _Array:
    """One argument seen through the C ABI: element pointer, shape, strides in
    elements, schedx dtype code and device, whichever library it comes from."""

    __slots__ = ("obj", "kind", "dtype", "shape", "strides", "ptr", "device", "torch_device")

    def __init__(self, obj, name, expect=None):
        """expect: the one dtype object `obj` must have (outputs), else any schedx input dtype."""
        self.obj = obj
        torch = sys.modules.get("torch")
        np = sys.modules.get("numpy")
        if torch is not None and isinstance(obj, torch.Tensor):
            self.kind = "torch"
            self.dtype = _torch_dtypes(torch).get(obj.dtype) if expect is None else obj.dtype
            self.shape = tuple(obj.shape)
            self.strides = obj.stride()
            self.ptr = obj.data_ptr()
            # The device as an int index ("cpu" for the host): Tensor.device builds a new
            # torch.device object on every access, and a call reads it for every argument.
            if obj.is_cuda:
                self.device, self.torch_device = _capi.DEVICE_CUDA, obj.get_device()
            elif obj.is_cpu:
                self.device, self.torch_device = _capi.DEVICE_CPU, "cpu"
            else:
                raise _error(Status.ERR_BAD_DEVICE, f"{name} is on {obj.device}; schedx runs on cuda and cpu")
        elif np is not None and isinstance(obj, np.ndarray):
            self.kind = "numpy"
            self.dtype = _numpy_dtypes(np).get(obj.dtype) if expect is None else obj.dtype
            self.shape = obj.shape
            item = obj.dtype.itemsize
            if any(s % item for s in obj.strides):
                raise _error(Status.ERR_BAD_LEADING_DIM, f"{name} has strides {obj.strides} that are not "
                             f"whole elements of {item} bytes")
            self.strides = tuple(s // item for s in obj.strides)
            self.ptr = obj.__array_interface__["data"][0]
            self.torch_device = None
            self.device = _capi.DEVICE_CPU
        else:
            raise _error(Status.ERR_UNSUPPORTED_DTYPE,
                         f"{name} is a {type(obj).__name__}; expected a torch.Tensor or numpy.ndarray")
        if expect is not None and obj.dtype != expect:
            raise _error(Status.ERR_UNSUPPORTED_DTYPE, f"{name} must have dtype {expect}, got {obj.dtype}")
        if self.dtype is None:
            raise _error(Status.ERR_UNSUPPORTED_DTYPE, f"{name} has dtype {obj.dtype}, which schedx does not take")

    def matrix(self, name):
        """(rows, cols, leading dimension) of a 2-D row-major argument."""
        if len(self.shape) != 2:
            raise _error(Status.ERR_BAD_SIZE, f"{name} must be 2-D, got shape {self.shape}")
        m, k = self.shape
        if m == 0 or k == 0:
            return m, k, k  # strides of empty arrays mean nothing; the C ABI rejects the size
        col_stride = 1 if k == 1 else self.strides[1]
        ld = k if m == 1 else self.strides[0]
        if col_stride != 1:
            raise _error(Status.ERR_BAD_LEADING_DIM, f"{name} with strides {self.strides} is not row-major with "
                         "unit stride along its last dimension; make it contiguous first")
        if ld < k:
            raise _error(Status.ERR_BAD_LEADING_DIM, f"{name} has row stride {ld} smaller than its {k} columns")
        return m, k, ld

    def vector(self, name, n):
        if self.shape != (n,):
            raise _error(Status.ERR_BAD_SIZE, f"{name} must have shape ({n},), got {self.shape}")
        if n > 1 and self.strides[0] != 1:
            raise _error(Status.ERR_BAD_LEADING_DIM, f"{name} must be contiguous, got stride {self.strides[0]}")

    def same_place(self, other, name, other_name):
        if self.kind != other.kind:
            raise _error(Status.ERR_POINTER_DEVICE, f"{name} is a {self.kind} array but {other_name} is a "
                         f"{other.kind} array")
        if self.kind == "torch" and self.torch_device != other.torch_device:
            raise _error(Status.ERR_POINTER_DEVICE, f"{name} is on {self.obj.device} but {other_name} is on "
                         f"{other.obj.device}")


_dtype_maps = {}


def _torch_dtypes(torch):
    if "torch" not in _dtype_maps:
        _dtype_maps["torch"] = {torch.bfloat16: _capi.BF16, torch.float16: _capi.FP16, torch.float32: _capi.FP32,
                                torch.int8: _capi.INT8}
    return _dtype_maps["torch"]


def _numpy_dtypes(np):
    if "numpy" not in _dtype_maps:
        import ml_dtypes
        _dtype_maps["numpy"] = {np.dtype(ml_dtypes.bfloat16): _capi.BF16, np.dtype(np.uint16): _capi.BF16,
                                np.dtype(np.float16): _capi.FP16, np.dtype(np.float32): _capi.FP32,
                                np.dtype(np.int8): _capi.INT8}
    return _dtype_maps["numpy"]


def _stream(a):
    """The stream a call on `a` runs on: its device's current torch stream, else none.
    The raw-pointer getter Inductor's generated code uses skips building a Stream object
    (part of the host cost of a call that issue 5 bounds); older torch falls back."""
    if a.device != _capi.DEVICE_CUDA:
        return None
    torch = sys.modules["torch"]
    raw = getattr(torch._C, "_cuda_getCurrentRawStream", None)
    if raw is None:
        return torch.cuda.current_stream(a.torch_device).cuda_stream
    return raw(a.torch_device)


def _named_dtype(like, name):
    """A dtype by name ("float32", "float8_e4m3fn") in the library of `like`."""
    if like.kind == "torch":
        import torch
        return getattr(torch, name)
    import ml_dtypes
    import numpy as np
    return np.dtype(getattr(np, name, None) or getattr(ml_dtypes, name))


def _empty(like, shape, dtype):
    """An uninitialised output next to `like`."""
    if like.kind == "torch":
        import torch
        return torch.empty(shape, dtype=dtype, device=like.torch_device)
    import numpy as np
    return np.empty(shape, dtype=dtype)


def _output_matrix(obj, name, like, dtype, rows, cols):
    """A caller's output: `rows` x `cols` of `dtype`, row-major with unit column stride,
    next to `like`; its leading dimension."""
    oa = _Array(obj, name, expect=dtype)
    oa.same_place(like, name, "x")
    if oa.shape != (rows, cols):
        raise _error(Status.ERR_BAD_SIZE, f"{name} must have shape ({rows}, {cols}), got {oa.shape}")
    return oa.matrix(name)[2]


def _output_scalar(obj, name, like, dtype):
    oa = _Array(obj, name, expect=dtype)
    oa.same_place(like, name, "x")
    if oa.shape != (1,):
        raise _error(Status.ERR_BAD_SIZE, f"{name} must have shape (1,), got {oa.shape}")


def _ptr(obj):
    if obj is None:
        return None
    return obj.data_ptr() if hasattr(obj, "data_ptr") else obj.__array_interface__["data"][0]


def _scale_argument(scale, xa):
    """scale as a one-element float32 array next to x (a Python number is placed there)."""
    if isinstance(scale, numbers.Real):  # Python and numpy scalars
        if xa.kind == "torch":
            import torch
            return torch.full((1,), float(scale), dtype=torch.float32, device=xa.torch_device)
        import numpy as np
        return np.full((1,), scale, dtype=np.float32)
    sa = _Array(scale, "scale")
    sa.same_place(xa, "scale", "x")
    if sa.dtype != _capi.FP32:
        raise _error(Status.ERR_UNSUPPORTED_DTYPE, f"scale must be float32, got {scale.dtype}")
    n = 1
    for d in sa.shape:
        n *= d
    if n != 1:
        raise _error(Status.ERR_BAD_SIZE, f"scale must hold one element, got shape {sa.shape}")
    return scale


# ---------------------------------------------------------------- torch CUDA fast path
# Issue 5 bounds the host time of an eager call. For torch CUDA tensors in the usual
# layout (2-D, unit column stride, more than one column) the calls below read each
# tensor with the fewest accessors and go straight to the C ABI, which checks sizes,
# leading dimensions and pointers itself. Anything else returns None from these helpers
# and takes the general path, which checks every argument and says what is wrong.

class _TorchFast:
    """What the fast path needs from torch and the library, looked up once."""

    __slots__ = ("tensor", "codes", "int8", "float32", "fp8", "stream", "empty", "lib")

    def __init__(self, torch, raw_stream):
        self.tensor, self.codes = torch.Tensor, _torch_dtypes(torch)
        self.int8, self.float32 = torch.int8, torch.float32
        self.fp8 = {fmt: getattr(torch, "float8_" + fmt) for fmt in _capi.FP8_FORMATS}
        self.stream, self.empty, self.lib = raw_stream, torch.empty, _capi.lib()


_fast = None


def _torch_fast():
    """The fast path's handles once torch is imported, else None (numpy-only callers)."""
    global _fast
    if _fast is None:
        torch = sys.modules.get("torch")
        raw = getattr(getattr(torch, "_C", None), "_cuda_getCurrentRawStream", None)
        if raw is None:
            return None
        _fast = _TorchFast(torch, raw)
    return _fast


def _cuda_matrix(t, device):
    """(rows, cols, leading dimension) of `t` if it is a non-empty row-major torch CUDA
    matrix on `device` with more than one column, else None."""
    st = t.stride()
    if len(st) != 2 or st[1] != 1 or t.get_device() != device:
        return None
    rows, cols = t.shape
    if rows < 1 or cols < 2 or (rows > 1 and st[0] < cols):
        return None
    return rows, cols, st[0] if rows > 1 else cols


def _cuda_vector(t, n, device):
    """Whether `t` is a contiguous torch CUDA vector of n elements on `device`."""
    return t.shape == (n,) and t.stride() == (1,) and t.get_device() == device


def cast_transpose_fp8(x, scale, fmt="e4m3fn", rows=True, cols=True, amax=False, out=None):
    """Fused fp8 cast + transpose of a 2-D x (bf16, fp16 or fp32, row-major, any row
    stride): fp8(clamp(x * scale, -FMAX, FMAX)) written row-major and column-major.

    scale: a one-element float32 tensor/array next to x, or a Python number.
    Returns (rows, cols), or (rows, cols, amax, scale_inv) with amax=True, where rows is
    [M, K] row-major, cols is an [M, K] view of a [K, M] row-major buffer (the strides of
    f.t().contiguous().t()), amax = max|x| (NaN if x holds one) and scale_inv = 1/scale,
    both one-element float32. An output not asked for is None.

    out: the outputs to write instead of new ones (no allocation per call, fixed addresses
    for CUDA graphs), shaped as the return value: (rows, cols) or (rows, cols, amax,
    scale_inv), None where an output is not asked for, in x's library and device. rows may
    have a row stride larger than K; cols must be the transpose of a [K, M] array with unit
    column stride (any row stride >= M). Returns `out`.
    """
    fast = _fast or _torch_fast()
    if fast is not None and out is None and isinstance(x, fast.tensor) and isinstance(scale, fast.tensor):
        result = _cast_transpose_cuda(fast, x, scale, fmt, rows, cols, amax)
        if result is not None:
            return result
    xa = _Array(x, "x")
    m, k, ldx = xa.matrix("x")
    if xa.dtype == _capi.INT8:
        raise _error(Status.ERR_UNSUPPORTED_DTYPE, "x must be bf16, fp16 or fp32, got int8")
    if fmt not in _capi.FP8_FORMATS:
        raise _error(Status.ERR_UNSUPPORTED_FORMAT, f"fmt must be one of {sorted(_capi.FP8_FORMATS)}, got {fmt!r}")
    scale = _scale_argument(scale, xa)
    fp8, f32 = _named_dtype(xa, "float8_" + fmt), _named_dtype(xa, "float32")
    wanted = (rows, cols) + ((True, True) if amax else ())
    if out is None:
        out = (_empty(xa, (m, k), fp8) if rows else None, _empty(xa, (k, m), fp8).T if cols else None)
        if amax:
            out += (_empty(xa, (1,), f32), _empty(xa, (1,), f32))
        ld_rows, ld_cols = k, m
    else:
        out = tuple(out)
        if len(out) != len(wanted) or any((o is not None) != w for o, w in zip(out, wanted)):
            raise _error(Status.ERR_BAD_SIZE, f"out must hold {len(wanted)} entries, None exactly where an output "
                         f"is not asked for (rows={rows}, cols={cols}, amax={amax})")
        ld_rows = _output_matrix(out[0], "out rows", xa, fp8, m, k) if rows else k
        # cols is the transpose of a row-major [K, M] array.
        ld_cols = _output_matrix(out[1].T, "out cols (transposed)", xa, fp8, k, m) if cols else m
        for o, name in zip(out[2:], ("out amax", "out scale_inv")):
            _output_scalar(o, name, xa, f32)
    out_rows, out_cols = out[0], out[1]
    out_amax, out_inv = (out[2], out[3]) if amax else (None, None)
    _capi.check(_capi.lib().schedx_cast_transpose_fp8(
        xa.ptr, m, k, ldx, xa.dtype, _ptr(scale), _capi.FP8_FORMATS[fmt], _ptr(out_rows), ld_rows, _ptr(out_cols),
        ld_cols, _ptr(out_amax), _ptr(out_inv), xa.device, _stream(xa)))
    return out


def _cast_transpose_cuda(fast, x, scale, fmt, rows, cols, amax):
    """cast_transpose_fp8 on the fast path, with new outputs; None if it does not apply."""
    device = x.get_device()
    shape = _cuda_matrix(x, device) if device >= 0 else None
    xt = fast.codes.get(x.dtype)
    fp8 = fast.fp8.get(fmt)
    if (shape is None or xt is None or xt == _capi.INT8 or fp8 is None or scale.dtype is not fast.float32 or
            scale.shape != (1,) or scale.get_device() != device or not (rows or cols)):
        return None
    m, k, ldx = shape
    empty = fast.empty
    out_rows = empty((m, k), dtype=fp8, device=device) if rows else None
    out_cols = empty((k, m), dtype=fp8, device=device).T if cols else None
    out_amax = empty((1,), dtype=fast.float32, device=device) if amax else None
    out_inv = empty((1,), dtype=fast.float32, device=device) if amax else None
    _capi.check(fast.lib.schedx_cast_transpose_fp8(
        x.data_ptr(), m, k, ldx, xt, scale.data_ptr(), _capi.FP8_FORMATS[fmt],
        out_rows.data_ptr() if rows else None, k, out_cols.data_ptr() if cols else None, m,
        out_amax.data_ptr() if amax else None, out_inv.data_ptr() if amax else None, _capi.DEVICE_CUDA,
        fast.stream(device)))
    return (out_rows, out_cols, out_amax, out_inv) if amax else (out_rows, out_cols)


def has_w8_linear():
    """Whether the loaded library has the weight-only int8 linear (issue 3)."""
    return _capi.has_w8_linear()


def w8_linear(x, w, scales, bias=None, out=None):
    """y = (x @ w.T) * scales (+ bias), with int8 w converted inside the kernel.

    x: [M, K] bf16 or fp16 (row-major, any row stride); w: [N, K] int8 (row-major, any
    row stride); scales: [N] bf16 or fp32, contiguous; bias: None or [N] in scales'
    dtype, contiguous. Returns y [M, N] contiguous, in x's dtype; or writes `out`
    ([M, N] in x's dtype next to x, row-major, any row stride >= N) and returns it.
    Sums are fp32, within 1e-2 relative of an fp64 reference. On CUDA, M = 7..128 may take
    the int8 planes path (tensor cores; see schedx_w8_linear in schedx.h): there a row of
    x holding inf or NaN gives NaN in all its outputs.
    """
    fast = _fast or _torch_fast()
    if fast is not None and isinstance(x, fast.tensor):
        y = _w8_linear_cuda(fast, x, w, scales, bias, out)
        if y is not None:
            return y
    if not has_w8_linear():
        raise NotImplementedError(f"{_capi.lib()._name} has no schedx_w8_linear (built before issue 3)")
    xa, wa, sa = _Array(x, "x"), _Array(w, "w"), _Array(scales, "scales")
    m, k, ldx = xa.matrix("x")
    n, wk, ldw = wa.matrix("w")
    wa.same_place(xa, "w", "x")
    sa.same_place(xa, "scales", "x")
    if wa.dtype != _capi.INT8:
        raise _error(Status.ERR_UNSUPPORTED_DTYPE, f"w must be int8, got {w.dtype}")
    if wk != k:
        raise _error(Status.ERR_BAD_SIZE, f"w is [{n}, {wk}] but x has K = {k} columns")
    sa.vector("scales", n)
    if bias is not None:
        ba = _Array(bias, "bias")
        ba.same_place(xa, "bias", "x")
        ba.vector("bias", n)
        # The C ABI reads bias in scales_dtype: it has no dtype argument of its own.
        if ba.dtype != sa.dtype:
            raise _error(Status.ERR_UNSUPPORTED_DTYPE, f"bias must have the dtype of scales ({scales.dtype}), "
                         f"got {bias.dtype}")
    if out is None:
        y, ldy = _empty(xa, (m, n), x.dtype), n
    else:
        y, ldy = out, _output_matrix(out, "out", xa, x.dtype, m, n)
    _capi.check(_capi.lib().schedx_w8_linear(
        xa.ptr, m, k, ldx, xa.dtype, wa.ptr, n, ldw, sa.ptr, sa.dtype, _ptr(bias), _ptr(y), ldy, xa.device,
        _stream(xa)))
    return y


def _w8_linear_cuda(fast, x, w, scales, bias, out):
    """w8_linear on the fast path; None if it does not apply."""
    T = fast.tensor
    if not (isinstance(w, T) and isinstance(scales, T) and (bias is None or isinstance(bias, T)) and
            (out is None or isinstance(out, T)) and hasattr(fast.lib, "schedx_w8_linear")):
        return None
    device = x.get_device()
    xs = _cuda_matrix(x, device) if device >= 0 else None
    ws = _cuda_matrix(w, device) if xs is not None else None
    if ws is None:
        return None
    (m, k, ldx), (n, wk, ldw) = xs, ws
    xt, st = fast.codes.get(x.dtype), fast.codes.get(scales.dtype)
    if (wk != k or w.dtype is not fast.int8 or xt is None or st is None or not _cuda_vector(scales, n, device) or
            (bias is not None and (bias.dtype is not scales.dtype or not _cuda_vector(bias, n, device)))):
        return None
    if out is None:
        y, ldy = fast.empty((m, n), dtype=x.dtype, device=device), n
    else:
        ys = _cuda_matrix(out, device)
        if ys is None or ys[:2] != (m, n) or out.dtype is not x.dtype:
            return None
        y, ldy = out, ys[2]
    _capi.check(fast.lib.schedx_w8_linear(
        x.data_ptr(), m, k, ldx, xt, w.data_ptr(), n, ldw, scales.data_ptr(), st,
        None if bias is None else bias.data_ptr(), y.data_ptr(), ldy, _capi.DEVICE_CUDA, fast.stream(device)))
    return y


def variants():
    """The registry, in variants.json order: [Variant(name, op, device, params dict)]."""
    lib = _capi.lib()
    out = []
    info = _capi.VariantInfo()
    for i in range(lib.schedx_variant_count()):
        _capi.check(lib.schedx_get_variant(i, info))
        params = dict(kv.split("=", 1) for kv in info.params.decode().split() if "=" in kv)
        out.append(Variant(info.name.decode(), info.op.decode(), info.device.decode(), params))
    return out


def force_variant(op, name=None):
    """Runs `op` with the named variant from now on in this process; None or "" returns
    to automatic dispatch."""
    _capi.check(_capi.lib().schedx_force_variant(op.encode(), (name or "").encode()))


@contextlib.contextmanager
def forcing(op, name):
    """force_variant for the duration of a with-block, then automatic dispatch again."""
    force_variant(op, name)
    try:
        yield
    finally:
        force_variant(op, None)


def last_variant(op):
    """The variant the last call of `op` on this thread ran (None before any)."""
    r = _capi.lib().schedx_last_variant(op.encode())
    return r.decode() if r is not None else None


def last_reason(op):
    """Why last_variant(op) was chosen ("forced", "tuned exact shape", ...)."""
    r = _capi.lib().schedx_last_reason(op.encode())
    return r.decode() if r is not None else None
