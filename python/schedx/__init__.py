"""schedx from Python.

torch tensors go through the registered operators torch.ops.schedx.* (schedx.ops, which
torch.compile traces and CUDA graphs capture): CUDA tensors run on their device's current
stream, CPU tensors on the CPU variants. numpy arrays run the CPU variants through the C
ABI and give numpy arrays back (bf16 as ml_dtypes.bfloat16 or raw uint16 bits, fp8 as
ml_dtypes.float8_*). Importing schedx registers the torch operators when torch is already
imported, and otherwise on first use, so the package imports with numpy alone.
Drop-in modules: schedx.nn.

The library is found through SCHEDX_LIBRARY, else libschedx.so inside this package (a
wheel from `pip install .`), else build/runtime/libschedx.so of this repository, else the
dynamic loader's path.
"""

import collections
import contextlib
import numbers
import sys

from . import _capi
from ._capi import Fp8Format, SchedxError, Status
from .quantize import MxScaleMode, Recipe

__all__ = [
    "SchedxError", "Status", "Fp8Format", "Recipe", "MxScaleMode", "Variant", "cast_transpose_fp8",
    "cast_transpose_fp8_current_scaling", "abs_max", "w8_linear", "has_w8_linear", "variants",
    "force_variant", "forcing", "last_variant", "last_reason",
]

Variant = collections.namedtuple("Variant", "name op device params")


def _error(status, message):
    return SchedxError(status, message)


def _torch_ops(obj):
    """torch.ops.schedx if `obj` is a torch.Tensor (registering the operators on first
    use), else None. torch is never imported here: a tensor means it already is."""
    torch = sys.modules.get("torch")
    if torch is None or not isinstance(obj, torch.Tensor):
        return None
    from . import ops  # noqa: F401  (registers the operators)
    return torch.ops.schedx


class _Array:
    """One numpy argument seen through the C ABI: element pointer, shape, strides in
    elements and schedx dtype code."""

    __slots__ = ("obj", "dtype", "shape", "strides", "ptr")

    def __init__(self, obj, name, expect=None):
        """expect: the one dtype `obj` must have (outputs), else any schedx input dtype."""
        np = sys.modules.get("numpy")
        if np is None or not isinstance(obj, np.ndarray):
            raise _error(Status.ERR_UNSUPPORTED_DTYPE,
                         f"{name} is a {type(obj).__name__}; expected a torch.Tensor or numpy.ndarray")
        self.obj = obj
        self.dtype = _numpy_dtypes(np).get(obj.dtype) if expect is None else obj.dtype
        self.shape = obj.shape
        item = obj.dtype.itemsize
        if any(s % item for s in obj.strides):
            raise _error(Status.ERR_BAD_LEADING_DIM, f"{name} has strides {obj.strides} that are not "
                         f"whole elements of {item} bytes")
        self.strides = tuple(s // item for s in obj.strides)
        self.ptr = obj.__array_interface__["data"][0]
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
            return m, k, k  # strides of empty arrays mean nothing
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


_dtype_maps = {}


def _numpy_dtypes(np):
    if "numpy" not in _dtype_maps:
        import ml_dtypes
        _dtype_maps["numpy"] = {np.dtype(ml_dtypes.bfloat16): _capi.BF16, np.dtype(np.uint16): _capi.BF16,
                                np.dtype(np.float16): _capi.FP16, np.dtype(np.float32): _capi.FP32,
                                np.dtype(np.int8): _capi.INT8}
    return _dtype_maps["numpy"]


def _output_matrix(obj, name, dtype, rows, cols):
    """A caller's numpy output: `rows` x `cols` of `dtype`, row-major with unit column
    stride; its leading dimension."""
    oa = _Array(obj, name, expect=dtype)
    if oa.shape != (rows, cols):
        raise _error(Status.ERR_BAD_SIZE, f"{name} must have shape ({rows}, {cols}), got {oa.shape}")
    return oa.matrix(name)[2]


def _output_scalar(obj, name, dtype):
    oa = _Array(obj, name, expect=dtype)
    if oa.shape != (1,):
        raise _error(Status.ERR_BAD_SIZE, f"{name} must have shape (1,), got {oa.shape}")


def _ptr(obj):
    return None if obj is None else obj.__array_interface__["data"][0]


def _numpy_scale(scale):
    """scale as a one-element float32 numpy array (a Python number is placed in one)."""
    import numpy as np
    if isinstance(scale, numbers.Real):  # Python and numpy scalars
        return np.full((1,), scale, dtype=np.float32)
    sa = _Array(scale, "scale")
    if sa.dtype != _capi.FP32:
        raise _error(Status.ERR_UNSUPPORTED_DTYPE, f"scale must be float32, got {scale.dtype}")
    if int(np.prod(sa.shape)) != 1:
        raise _error(Status.ERR_BAD_SIZE, f"scale must hold one element, got shape {sa.shape}")
    return scale


def _check_out(out, wanted, rows, cols, amax):
    out = tuple(out)
    if len(out) != len(wanted) or any((o is not None) != w for o, w in zip(out, wanted)):
        raise _error(Status.ERR_BAD_SIZE, f"out must hold {len(wanted)} entries, None exactly where an output "
                     f"is not asked for (rows={rows}, cols={cols}, amax={amax})")
    return out


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
    fmt = _capi.choice(_capi.Fp8Format, fmt, "fmt")
    wanted = (rows, cols) + ((True, True) if amax else ())
    torch_ops = _torch_ops(x)
    if torch_ops is not None:
        return _cast_transpose_torch(torch_ops, x, scale, fmt, rows, cols, amax, out, wanted)
    xa = _Array(x, "x")
    m, k, ldx = xa.matrix("x")
    if xa.dtype == _capi.INT8:
        raise _error(Status.ERR_UNSUPPORTED_DTYPE, "x must be bf16, fp16 or fp32, got int8")
    scale = _numpy_scale(scale)
    import ml_dtypes
    import numpy as np
    fp8 = np.dtype(getattr(ml_dtypes, "float8_" + fmt.value))
    if out is None:
        out = (np.empty((m, k), fp8) if rows else None, np.empty((k, m), fp8).T if cols else None)
        if amax:
            out += (np.empty((1,), np.float32), np.empty((1,), np.float32))
        ld_rows, ld_cols = k, m
    else:
        out = _check_out(out, wanted, rows, cols, amax)
        ld_rows = _output_matrix(out[0], "out rows", fp8, m, k) if rows else k
        # cols is the transpose of a row-major [K, M] array.
        ld_cols = _output_matrix(out[1].T, "out cols (transposed)", fp8, k, m) if cols else m
        for o, name in zip(out[2:], ("out amax", "out scale_inv")):
            _output_scalar(o, name, np.float32)
    out_amax, out_inv = (out[2], out[3]) if amax else (None, None)
    _capi.check(_capi.lib().schedx_cast_transpose_fp8(
        xa.ptr, m, k, ldx, xa.dtype, _ptr(scale), _capi.FP8_FORMATS[fmt], _ptr(out[0]), ld_rows, _ptr(out[1]),
        ld_cols, _ptr(out_amax), _ptr(out_inv), _capi.DEVICE_CPU, None))
    return out


def _cast_transpose_torch(torch_ops, x, scale, fmt, rows, cols, amax, out, wanted):
    torch = sys.modules["torch"]
    from . import ops as ops_module
    fp8 = getattr(torch, "float8_" + fmt.value)
    if isinstance(scale, numbers.Real):
        scale = torch.full((1,), float(scale), dtype=torch.float32, device=x.device)
    if out is None and rows and cols:
        return (torch_ops.cast_transpose_fp8_amax(x, scale, fp8) if amax else
                torch_ops.cast_transpose_fp8(x, scale, fp8))
    if out is None:
        if x.dim() != 2:
            raise _error(Status.ERR_BAD_SIZE, f"x must be 2-D, got shape {tuple(x.shape)}")
        m, k = x.shape
        out = (x.new_empty((m, k), dtype=fp8) if rows else None, ops_module.new_cols(x, m, k, fp8) if cols else None)
        if amax:
            out += (x.new_empty((1,), dtype=torch.float32), x.new_empty((1,), dtype=torch.float32))
    else:
        out = _check_out(out, wanted, rows, cols, amax)
        for o in out[:2]:
            if o is not None and o.dtype != fp8:
                raise _error(Status.ERR_UNSUPPORTED_DTYPE, f"outputs must have dtype {fp8}, got {o.dtype}")
    torch_ops.cast_transpose_fp8_out(x, scale, rows=out[0], cols=out[1], amax=out[2] if amax else None,
                               scale_inv=out[3] if amax else None)
    return out


def cast_transpose_fp8_current_scaling(x, fmt="e4m3fn", pow2_scales=False):
    """cast_transpose_fp8 with x's own tensorwise scale, as torchao's Float8Linear computes
    it (current scaling): amax = max|x|, scale = fp32(FMAX / max(amax, 1e-12)) in fp64
    (rounded down to a power of two with pow2_scales), then the cast with that scale, in
    one call (torch tensors: torch.ops.schedx.cast_transpose_fp8_current_scaling, on the
    device with no host sync). Returns (rows, cols, amax, scale, scale_inv) as
    cast_transpose_fp8 returns its outputs; amax, scale and scale_inv one-element float32."""
    fmt = _capi.choice(_capi.Fp8Format, fmt, "fmt")
    torch_ops = _torch_ops(x)
    if torch_ops is not None:
        return torch_ops.cast_transpose_fp8_current_scaling(x, getattr(sys.modules["torch"], "float8_" + fmt.value),
                                                            bool(pow2_scales))
    xa = _Array(x, "x")
    m, k, ldx = xa.matrix("x")
    if xa.dtype == _capi.INT8:
        raise _error(Status.ERR_UNSUPPORTED_DTYPE, "x must be bf16, fp16 or fp32, got int8")
    import ml_dtypes
    import numpy as np
    fp8 = np.dtype(getattr(ml_dtypes, "float8_" + fmt.value))
    rows, cols = np.empty((m, k), fp8), np.empty((k, m), fp8).T
    amax, scale, scale_inv = (np.empty((1,), np.float32) for _ in range(3))
    _capi.check(_capi.lib().schedx_cast_transpose_fp8_current_scaling(
        xa.ptr, m, k, ldx, xa.dtype, _capi.FP8_FORMATS[fmt], int(bool(pow2_scales)), _ptr(rows), k, _ptr(cols.T), m,
        _ptr(amax), _ptr(scale), _ptr(scale_inv), _capi.DEVICE_CPU, None))
    return rows, cols, amax, scale, scale_inv


def abs_max(x):
    """max |x| of a bf16, fp16 or fp32 tensor/array as a one-element float32 of its kind
    (NaN if x holds one, 0 for an empty x): the amax of current fp8 scaling."""
    torch_ops = _torch_ops(x)
    if torch_ops is not None:
        return torch_ops.abs_max(x)
    import numpy as np
    xa = _Array(x, "x")
    m, k, ldx = xa.matrix("x")
    if xa.dtype == _capi.INT8:
        raise _error(Status.ERR_UNSUPPORTED_DTYPE, "x must be bf16, fp16 or fp32, got int8")
    amax = np.empty((1,), np.float32)
    _capi.check(_capi.lib().schedx_abs_max(xa.ptr, m, k, ldx, xa.dtype, _ptr(amax), _capi.DEVICE_CPU, None))
    return amax


def has_w8_linear():
    """Whether the loaded library has the weight-only int8 linear (issue 3)."""
    return _capi.has_w8_linear()


def w8_linear(x, w, scales, bias=None, out=None):
    """y = (x @ w.T) * scales (+ bias), with int8 w converted inside the kernel.

    x: [..., K] bf16 or fp16 (torch; numpy: [M, K] row-major, any row stride); w: [N, K]
    int8 (row-major, any row stride); scales: [N] bf16 or fp32; bias: None or [N] in
    scales' dtype. Returns y [..., N] contiguous, in x's dtype; or writes `out` (y's shape
    and dtype next to x, row-major, any row stride >= N) and returns it.
    Sums are fp32, within 1e-2 relative of an fp64 reference. On CUDA, M = 7..128 may take
    the int8 planes path (tensor cores; see schedx_w8_linear in schedx.h): there a row of
    x holding inf or NaN gives NaN in all its outputs.
    """
    torch_ops = _torch_ops(x)
    if torch_ops is not None:
        if out is None:
            return torch_ops.w8_linear(x, w, scales, bias)
        torch_ops.w8_linear_out(x, w, scales, bias, out=out)
        return out
    if not has_w8_linear():
        raise NotImplementedError(f"{_capi.lib()._name} has no schedx_w8_linear (built before issue 3)")
    xa, wa, sa = _Array(x, "x"), _Array(w, "w"), _Array(scales, "scales")
    m, k, ldx = xa.matrix("x")
    n, wk, ldw = wa.matrix("w")
    if wa.dtype != _capi.INT8:
        raise _error(Status.ERR_UNSUPPORTED_DTYPE, f"w must be int8, got {w.dtype}")
    if wk != k:
        raise _error(Status.ERR_BAD_SIZE, f"w is [{n}, {wk}] but x has K = {k} columns")
    sa.vector("scales", n)
    if bias is not None:
        ba = _Array(bias, "bias")
        ba.vector("bias", n)
        # The C ABI reads bias in scales_dtype: it has no dtype argument of its own.
        if ba.dtype != sa.dtype:
            raise _error(Status.ERR_UNSUPPORTED_DTYPE, f"bias must have the dtype of scales ({scales.dtype}), "
                         f"got {bias.dtype}")
    import numpy as np
    if out is None:
        y, ldy = np.empty((m, n), x.dtype), n
    else:
        y, ldy = out, _output_matrix(out, "out", x.dtype, m, n)
    _capi.check(_capi.lib().schedx_w8_linear(
        xa.ptr, m, k, ldx, xa.dtype, wa.ptr, n, ldw, sa.ptr, sa.dtype, _ptr(bias), _ptr(y), ldy, _capi.DEVICE_CPU,
        None))
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


if "torch" in sys.modules:  # torch imported first: torch.ops.schedx.* exist from here on
    from . import ops  # noqa: E402,F401
