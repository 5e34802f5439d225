"""fp8 quantization with per-block or per-axis scales (schedx_quantize_fp8,
docs/quantize_fp8.md): TransformerEngine's blockwise 1x128 / 128x128 recipes, MXFP8 and
torchao's axiswise ("rowwise") recipe, both GEMM operands from one call. Plain ctypes
over the C ABI through _capi's loader.
"""

import ctypes
import enum
import sys

from . import _capi
from ._capi import SchedxError, Status


class Recipe(str, enum.Enum):
    """The recipe names quantize_fp8 and torch.ops.schedx.quantize_fp8 take; each member
    equals its string, so either may be passed."""
    BLOCK_1X128 = "block1x128"
    BLOCK_128X128 = "block128x128"
    MXFP8 = "mxfp8"
    AXISWISE = "axiswise"


class MxScaleMode(str, enum.Enum):
    """MXFP8's scale rounding (mx_mode): OCP's FLOOR, or RCEIL (round the scale up)."""
    FLOOR = "floor"
    RCEIL = "rceil"


# schedx.h's enum values.
RECIPES = {Recipe.BLOCK_1X128: 0, Recipe.BLOCK_128X128: 1, Recipe.MXFP8: 2, Recipe.AXISWISE: 3}
MX_MODES = {MxScaleMode.FLOOR: 0, MxScaleMode.RCEIL: 1}


class QuantizeOptions(ctypes.Structure):
    _fields_ = [
        ("recipe", ctypes.c_int),
        ("format", ctypes.c_int),
        ("pow2_scales", ctypes.c_int),
        ("epsilon", ctypes.c_float),
        ("mx_mode", ctypes.c_int),
    ]


_i64, _int, _ptr = ctypes.c_int64, ctypes.c_int, ctypes.c_void_p
QUANTIZE_ARGS = [_ptr, _i64, _i64, _i64, _int, ctypes.POINTER(QuantizeOptions), _ptr, _i64, _ptr, _ptr, _i64, _ptr,
                 _int, _ptr]
SCALE_SHAPE_ARGS = [_int, _i64, _i64, _int, ctypes.POINTER(_i64), ctypes.POINTER(_i64)]
_declared = []


def _lib():
    lib = _capi.lib()
    if not _declared:
        lib.schedx_quantize_fp8.restype = _int
        lib.schedx_quantize_fp8.argtypes = QUANTIZE_ARGS
        lib.schedx_quantize_fp8_scale_shape.restype = _int
        lib.schedx_quantize_fp8_scale_shape.argtypes = SCALE_SHAPE_ARGS
        _declared.append(True)
    return lib


def scale_shape(recipe, m, k, columnwise):
    """The shape of the scale array schedx_quantize_fp8 writes for rows (columnwise=False)
    or cols (columnwise=True) of an [m, k] input."""
    recipe = _capi.choice(Recipe, recipe, "recipe")
    r, c = _i64(), _i64()
    _capi.check(_lib().schedx_quantize_fp8_scale_shape(RECIPES[recipe], m, k, int(bool(columnwise)), ctypes.byref(r),
                                                       ctypes.byref(c)))
    return r.value, c.value


def quantize_fp8(x, recipe=Recipe.BLOCK_1X128, fmt=_capi.Fp8Format.E4M3FN, rows=True, cols=True, pow2_scales=True,
                 epsilon=0.0, mx_mode=MxScaleMode.RCEIL):
    """Quantizes a 2-D x (bf16, fp16 or fp32; torch tensor or numpy array, row-major with
    any row stride) to fp8 with per-block scales.

    recipe: "block1x128" (TE Float8BlockScaling activations/gradients), "block128x128"
    (weights), "mxfp8" or "axiswise" (torchao's rowwise recipe: a scale per row for rows,
    per column for cols). pow2_scales: power-of-two scales (TE's and torchao's defaults);
    epsilon: the block recipes' amax floor (TE's default 0); mx_mode: "floor" (OCP) or "rceil".

    Returns (rows, rows_scale, cols, cols_scale): rows is [M, K] fp8; cols is [K, M] fp8
    (x transposed, each of its rows quantized along M); the scale arrays are float32
    scale_inv (block recipes, TE's GEMM-ready layout, padding 0), uint8 E8M0 bytes (mxfp8)
    or float32 scales (axiswise: [M, 1] and [1, K], not inverted, as torchao keeps them),
    shaped by scale_shape(). An orientation not asked for is None in both places.
    """
    recipe = _capi.choice(Recipe, recipe, "recipe")
    fmt = _capi.choice(_capi.Fp8Format, fmt, "fmt")
    mx_mode = _capi.choice(MxScaleMode, mx_mode, "mx_mode")
    if not rows and not cols:
        raise SchedxError(Status.ERR_NULL_POINTER, "rows and cols are both False: nothing to compute")
    x, ptr, m, k, ldx, x_code, device, stream, empty = _placed(x)
    if x_code == _capi.INT8:
        raise SchedxError(Status.ERR_UNSUPPORTED_DTYPE, f"x must be bf16, fp16 or fp32, got {x.dtype}")
    fp8, scale_dtype = "float8_" + fmt.value, "uint8" if recipe == Recipe.MXFP8 else "float32"
    out_rows = empty((m, k), fp8) if rows else None
    out_cols = empty((k, m), fp8) if cols else None
    rs = empty(scale_shape(recipe, m, k, False), scale_dtype) if rows else None
    cs = empty(scale_shape(recipe, m, k, True), scale_dtype) if cols else None
    opts = QuantizeOptions(RECIPES[recipe], _capi.FP8_FORMATS[fmt], int(bool(pow2_scales)), float(epsilon),
                           MX_MODES[mx_mode])
    _capi.check(_lib().schedx_quantize_fp8(ptr, m, k, ldx, x_code, ctypes.byref(opts), _ptr(out_rows), k, _ptr(rs),
                                           _ptr(out_cols), m, _ptr(cs), device, stream))
    return out_rows, rs, out_cols, cs


def _ptr(a):
    if a is None:
        return None
    return a.data_ptr() if hasattr(a, "data_ptr") else a.__array_interface__["data"][0]


def _placed(x):
    """(x, pointer, M, K, leading dimension, dtype code, device, stream, empty(shape,
    dtype name) next to x) for a torch tensor (copied to row-major if its last dimension
    is strided) or a numpy array."""
    torch = sys.modules.get("torch")
    if torch is not None and isinstance(x, torch.Tensor):
        from . import ops
        code = ops._X_CODES.get(x.dtype, _capi.INT8 if x.dtype == torch.int8 else None)
        if code is None:
            raise SchedxError(Status.ERR_UNSUPPORTED_DTYPE, f"x has dtype {x.dtype}, which schedx does not take")
        x, m, k, ldx = ops._matrix(x, "x")
        device, stream = ops._device_args(x)
        return (x, x.data_ptr(), m, k, ldx, code, device, stream,
                lambda shape, name: x.new_empty(shape, dtype=getattr(torch, name)))
    from . import _Array
    import ml_dtypes
    import numpy as np
    xa = _Array(x, "x")
    m, k, ldx = xa.matrix("x")
    return (x, xa.ptr, m, k, ldx, xa.dtype, _capi.DEVICE_CPU, None,
            lambda shape, name: np.empty(shape, getattr(np, name, None) or getattr(ml_dtypes, name)))
