"""ctypes declarations of include/schedx/schedx.h and the library search.

The library is loaded on first use, not at import, so `import schedx` works (and can
report where it looked) on a machine where libschedx.so has not been built yet.
"""

import ctypes
import enum
import os
import threading

# Enum values of schedx.h.
DEVICE_CPU, DEVICE_CUDA = 0, 1
BF16, FP16, FP32, INT8 = 0, 1, 2, 3


class Fp8Format(str, enum.Enum):
    """The fp8 format names the numpy API takes (fmt=); equal to their strings."""
    E4M3FN = "e4m3fn"
    E5M2 = "e5m2"


FP8_FORMATS = {Fp8Format.E4M3FN: 0, Fp8Format.E5M2: 1}  # schedx_fp8_format


class Status(enum.IntEnum):
    OK = 0
    ERR_NULL_POINTER = 1
    ERR_BAD_SIZE = 2
    ERR_BAD_LEADING_DIM = 3
    ERR_OVERLAP = 4
    ERR_UNSUPPORTED_DTYPE = 5
    ERR_UNSUPPORTED_FORMAT = 6
    ERR_BAD_DEVICE = 7
    ERR_POINTER_DEVICE = 8
    ERR_SIZE_OVERFLOW = 9
    ERR_UNKNOWN_VARIANT = 10
    ERR_VARIANT_CANNOT_RUN = 11
    ERR_NO_CUDA = 12
    ERR_KERNEL = 13
    ERR_DATABASE = 14
    ERR_NO_VARIANT = 15
    ERR_MISALIGNED = 16


class SchedxError(ValueError, RuntimeError):
    """A rejected or failed call: `status` is a Status, `message` says why.

    Raised both for mistakes caught in Python (shape, dtype, device, layout) and for
    errors the C ABI returns, whose message is schedx_last_error(). A RuntimeError too,
    as failures of torch.ops.schedx's C++ kernels are (with the same text).
    """

    def __init__(self, status, message):
        try:
            status = Status(status)
        except ValueError:
            pass  # a code newer than this binding: keep the number
        self.status = status
        self.message = message
        name = status.name if isinstance(status, Status) else str(status)
        super().__init__(f"schedx {name}: {message}")


def choice(choices, value, what):
    """The member of the str enum `choices` that `value` (a member or its string) names;
    else SchedxError ERR_UNSUPPORTED_FORMAT naming the choices."""
    try:
        return choices(value)
    except ValueError:
        raise SchedxError(Status.ERR_UNSUPPORTED_FORMAT,
                          f"{what} must be one of {sorted(c.value for c in choices)}, got {value!r}") from None


class VariantInfo(ctypes.Structure):
    _fields_ = [
        ("name", ctypes.c_char_p),
        ("op", ctypes.c_char_p),
        ("device", ctypes.c_char_p),
        ("params", ctypes.c_char_p),
    ]


_i64, _int, _ptr = ctypes.c_int64, ctypes.c_int, ctypes.c_void_p

CAST_TRANSPOSE_ARGS = [_ptr, _i64, _i64, _i64, _int, _ptr, _int, _ptr, _i64, _ptr, _i64, _ptr, _ptr, _int, _ptr]
CAST_TRANSPOSE_DIVIDE_ARGS = [_ptr, _i64, _i64, _i64, _int, _ptr, _int, _ptr, _i64, _ptr, _i64, _int, _ptr]
CAST_TRANSPOSE_CURRENT_SCALING_ARGS = [_ptr, _i64, _i64, _i64, _int, _int, _int, _ptr, _i64, _ptr, _i64, _ptr, _ptr,
                                      _ptr, _int, _ptr]
ABS_MAX_ARGS = [_ptr, _i64, _i64, _i64, _int, _ptr, _int, _ptr]
# Bound only when the loaded library exports it.
W8_LINEAR_ARGS = [_ptr, _i64, _i64, _i64, _int, _ptr, _i64, _i64, _ptr, _int, _ptr, _ptr, _i64, _int, _ptr]
W4_LINEAR_ARGS = [_ptr, _i64, _i64, _i64, _int, _ptr, _i64, _i64, _i64, _ptr, _ptr, _int, _ptr, _ptr, _i64, _int, _ptr]

_lock = threading.Lock()
_lib = None


def candidates():
    """Where the library is looked for, in order."""
    env = os.environ.get("SCHEDX_LIBRARY")
    here = os.path.dirname(os.path.abspath(__file__))
    # An installed wheel carries the library inside the package (pip install .).
    packaged = os.path.join(here, "libschedx.so")
    # python/schedx/ -> the repository's default build directory.
    in_tree = os.path.normpath(os.path.join(here, "..", "..", "build", "runtime", "libschedx.so"))
    return ([env] if env else []) + [packaged, in_tree, "libschedx.so"]


def _declare(lib):
    lib.schedx_last_error.restype = ctypes.c_char_p
    lib.schedx_last_error.argtypes = []
    lib.schedx_variant_count.restype = _int
    lib.schedx_variant_count.argtypes = []
    lib.schedx_get_variant.restype = _int
    lib.schedx_get_variant.argtypes = [_int, ctypes.POINTER(VariantInfo)]
    lib.schedx_force_variant.restype = _int
    lib.schedx_force_variant.argtypes = [ctypes.c_char_p, ctypes.c_char_p]
    for fn in (lib.schedx_last_variant, lib.schedx_last_reason):
        fn.restype = ctypes.c_char_p
        fn.argtypes = [ctypes.c_char_p]
    lib.schedx_cast_transpose_fp8.restype = _int
    lib.schedx_cast_transpose_fp8.argtypes = CAST_TRANSPOSE_ARGS
    lib.schedx_cast_transpose_fp8_divide.restype = _int
    lib.schedx_cast_transpose_fp8_divide.argtypes = CAST_TRANSPOSE_DIVIDE_ARGS
    lib.schedx_cast_transpose_fp8_current_scaling.restype = _int
    lib.schedx_cast_transpose_fp8_current_scaling.argtypes = CAST_TRANSPOSE_CURRENT_SCALING_ARGS
    lib.schedx_abs_max.restype = _int
    lib.schedx_abs_max.argtypes = ABS_MAX_ARGS
    if hasattr(lib, "schedx_w8_linear"):
        lib.schedx_w8_linear.restype = _int
        lib.schedx_w8_linear.argtypes = W8_LINEAR_ARGS
    if hasattr(lib, "schedx_w4_linear"):
        lib.schedx_w4_linear.restype = _int
        lib.schedx_w4_linear.argtypes = W4_LINEAR_ARGS
    if hasattr(lib, "schedx_set_num_threads"):
        lib.schedx_set_num_threads.restype = _int
        lib.schedx_set_num_threads.argtypes = [_int]


def lib():
    """The loaded library (loaded and declared once per process)."""
    global _lib
    if _lib is not None:
        return _lib
    with _lock:
        if _lib is None:
            errors = []
            # An explicit SCHEDX_LIBRARY that fails to load is an error, not a reason to
            # silently fall back to some other build.
            explicit = os.environ.get("SCHEDX_LIBRARY")
            for path in candidates():
                if path != "libschedx.so" and path != explicit and not os.path.exists(path):
                    errors.append(f"{path}: not found")
                    continue
                try:
                    loaded = ctypes.CDLL(path)
                except OSError as e:
                    errors.append(f"{path}: {e}")
                    if path == explicit:
                        break
                    continue
                _declare(loaded)
                _lib = loaded
                break
            if _lib is None:
                raise OSError("cannot load libschedx.so; tried " + "; ".join(errors) +
                              ". Build it, or set SCHEDX_LIBRARY to its path.")
    return _lib


def has_w8_linear():
    return hasattr(lib(), "schedx_w8_linear")


_num_threads = None  # the count last set: the Python kernels call this on every CPU call


def set_num_threads(n: int) -> None:
    """The CPU variants' thread count (a library built before it has none to set)."""
    global _num_threads
    if n != _num_threads and hasattr(lib(), "schedx_set_num_threads"):
        check(lib().schedx_set_num_threads(n))
        _num_threads = n


def last_error():
    return (lib().schedx_last_error() or b"").decode()


def check(status):
    """Raises SchedxError for a failed C call, with the library's message."""
    if status != 0:
        raise SchedxError(status, last_error())
