"""The Python package's numpy (CPU) path against an independent reference.

Plain unittest rather than pytest: CI then needs nothing beyond requirements.txt's numpy
and ml-dtypes, and the file runs as a script. ctest sets SCHEDX_LIBRARY to the library
just built and PYTHONPATH to python/.
"""

import ctypes
import os
import sys
import tempfile
import unittest

import ml_dtypes
import numpy as np

# Dispatch must not depend on a tuning database the user happens to have: point it at
# a file that does not exist.
os.environ["SCHEDX_TUNING_DB"] = os.path.join(tempfile.gettempdir(), f"schedx-test-{os.getpid()}", "none.jsonl")

import schedx  # noqa: E402
from schedx import SchedxError, Status  # noqa: E402


class Fp8Table:
    """Non-negative finite values of an fp8 format by code, decoded from the format's
    definition, for an encoder by nearest-value search (not schedx's bit arithmetic)."""

    def __init__(self, mant_bits, bias, max_code):
        codes = np.arange(max_code + 1)
        e, f = codes >> mant_bits, codes & ((1 << mant_bits) - 1)
        self.values = np.where(e == 0, np.ldexp(f.astype(np.float64), 1 - bias - mant_bits),
                               np.ldexp(1.0 + f / (1 << mant_bits), e - bias))
        self.max = self.values[-1]


TABLES = {"e4m3fn": Fp8Table(3, 7, 0x7E), "e5m2": Fp8Table(2, 15, 0x7B)}


def reference_fp8(x, scale, fmt):
    """PyTorch's clamp(x * scale, -max, max).to(fp8) as codes: the product in float32,
    nearest value with ties to the even code, signed zero kept, NaN as 0x7F."""
    t = TABLES[fmt]
    with np.errstate(over="ignore", invalid="ignore"):  # inf * scale, NaN inputs: wanted
        v = x.astype(np.float32) * np.float32(scale)
    a = np.minimum(np.abs(v).astype(np.float64), t.max)
    hi = np.minimum(np.searchsorted(t.values, a), len(t.values) - 1)
    lo = np.maximum(hi - 1, 0)
    d_hi, d_lo = t.values[hi] - a, a - t.values[lo]
    take_lo = (hi > 0) & ((d_lo < d_hi) | ((d_lo == d_hi) & (lo % 2 == 0)))
    code = np.where(take_lo, lo, hi).astype(np.uint8) | np.where(np.signbit(v), 0x80, 0).astype(np.uint8)
    return np.where(np.isnan(v), np.uint8(0x7F), code)


def all_16bit_patterns():
    return np.arange(1 << 16, dtype=np.uint32).astype(np.uint16).reshape(256, 256)


def codes(a):
    return a.view(np.uint8)


SCALES = [1.0, 10.0, 2.0**-7, 448.0 / 3.7, 2.0**-12]


class CastTransposeTest(unittest.TestCase):
    def check(self, x, scale, fmt, **kw):
        out = schedx.cast_transpose_fp8(x, np.float32([scale]), fmt, **kw)
        want = reference_fp8(x, scale, fmt)
        rows, cols = out[0], out[1]
        if rows is not None:
            self.assertEqual(rows.dtype, np.dtype(getattr(ml_dtypes, "float8_" + fmt)))
            self.assertEqual(rows.shape, x.shape)
            np.testing.assert_array_equal(codes(rows), want)
        if cols is not None:
            self.assertEqual(cols.dtype, np.dtype(getattr(ml_dtypes, "float8_" + fmt)))
            self.assertEqual(cols.shape, x.shape)
            # f.t().contiguous().t(): [M, K] view of a row-major [K, M] buffer.
            self.assertEqual(cols.strides, (1, x.shape[0]))
            self.assertTrue(cols.T.flags.c_contiguous)
            np.testing.assert_array_equal(codes(cols.T).T, want)
        return out

    def test_every_bf16_and_fp16_pattern(self):
        bits = all_16bit_patterns()
        # 256 x 256, below one 64 x 512 tile: untuned dispatch takes the untiled variant
        inputs = {"cast_transpose_bf16_cpu": bits.view(ml_dtypes.bfloat16),
                  "cast_transpose_fp16_cpu": bits.view(np.float16)}
        for variant, x in inputs.items():
            for fmt in ("e4m3fn", "e5m2"):
                for scale in SCALES:
                    with self.subTest(dtype=x.dtype, fmt=fmt, scale=scale):
                        self.check(x, scale, fmt)
                        self.assertEqual(schedx.last_variant("cast_transpose"), variant)

    def test_agrees_with_ml_dtypes_cast(self):
        # A second, unrelated encoder: ml_dtypes' own float32 -> fp8 conversion, away
        # from NaN (ml_dtypes keeps its sign, schedx writes 0x7F).
        x = all_16bit_patterns().view(ml_dtypes.bfloat16)
        for fmt in ("e4m3fn", "e5m2"):
            rows, _ = schedx.cast_transpose_fp8(x, 3.0, fmt, cols=False)
            fmax = TABLES[fmt].max
            with np.errstate(over="ignore", invalid="ignore"):
                v = np.clip(x.astype(np.float32) * np.float32(3.0), -fmax, fmax)
            theirs = v.astype(getattr(ml_dtypes, "float8_" + fmt))
            finite = ~np.isnan(v)
            np.testing.assert_array_equal(codes(rows)[finite], codes(theirs)[finite])

    def test_uint16_bits_are_bf16(self):
        bits = all_16bit_patterns()
        a = schedx.cast_transpose_fp8(bits, 10.0)
        b = schedx.cast_transpose_fp8(bits.view(ml_dtypes.bfloat16), 10.0)
        np.testing.assert_array_equal(codes(a[0]), codes(b[0]))
        np.testing.assert_array_equal(codes(a[1].T), codes(b[1].T))

    def test_fp32_specials_and_random_bits(self):
        rng = np.random.default_rng(7)
        special = np.array([0, 0x80000000, 0x7F800000, 0xFF800000, 0x7FC00000, 0xFFC00000, 0x00000001,
                            0x43E00000, 0x43E80000, 0x47600000, 0x7F7FFFFF], dtype=np.uint32)
        bits = np.concatenate([special, rng.integers(0, 1 << 32, 300 * 301 - len(special), dtype=np.uint32)])
        x = bits.view(np.float32).reshape(300, 301)
        for fmt in ("e4m3fn", "e5m2"):
            for scale in SCALES:
                with self.subTest(fmt=fmt, scale=scale):
                    self.check(x, scale, fmt)

    def test_output_subsets_and_odd_shapes(self):
        rng = np.random.default_rng(1)
        for m, k in [(1, 1), (1, 70), (70, 1), (3, 5), (65, 129)]:
            x = rng.standard_normal((m, k)).astype(ml_dtypes.bfloat16)
            with self.subTest(m=m, k=k):
                r, c = self.check(x, 2.0, "e4m3fn", cols=False)
                self.assertIsNone(c)
                self.assertEqual(schedx.last_variant("cast_transpose"), "cast_transpose_bf16_rows_cpu")
                r, c = self.check(x, 2.0, "e5m2", rows=False)
                self.assertIsNone(r)
                self.assertEqual(schedx.last_variant("cast_transpose"), "cast_transpose_bf16_cols_cpu")

    def test_row_stride_larger_than_row(self):
        rng = np.random.default_rng(2)
        wide = rng.standard_normal((40, 100)).astype(np.float32)
        wide[:, 77:] = np.inf  # would show in the outputs if the padding were read
        x = wide.astype(ml_dtypes.bfloat16)[:, :77]
        self.assertFalse(x.flags.c_contiguous)
        self.check(x, 5.0, "e4m3fn")

    def test_amax_and_scale_inv(self):
        rng = np.random.default_rng(3)
        x = (rng.standard_normal((33, 48)) * 100).astype(ml_dtypes.bfloat16)
        rows, cols, amax, scale_inv = self.check(x, 0.3, "e4m3fn", amax=True)
        self.assertEqual(amax.dtype, np.float32)
        self.assertEqual(amax.shape, (1,))
        self.assertEqual(amax[0], np.abs(x.astype(np.float32)).max())
        self.assertEqual(scale_inv[0], np.float32(1) / np.float32(0.3))
        x[5, 7] = np.nan
        _, _, amax, _ = schedx.cast_transpose_fp8(x, 0.3, amax=True)
        self.assertTrue(np.isnan(amax[0]))

    def test_current_scaling(self):
        rng = np.random.default_rng(11)
        base = (rng.standard_normal((37, 50)) * 30).astype(np.float32)
        for name, x32 in (("random", base), ("zeros", base * 0), ("tiny", base * 1e-20)):
            for fmt, fmax in (("e4m3fn", 448.0), ("e5m2", 57344.0)):
                for pow2 in (False, True):
                    x = x32.astype(ml_dtypes.bfloat16)
                    with self.subTest(data=name, fmt=fmt, pow2=pow2):
                        rows, cols, amax, scale, scale_inv = schedx.cast_transpose_fp8_current_scaling(x, fmt, pow2)
                        want_amax = np.abs(x.astype(np.float32)).max()
                        # torchao's amax_to_scale, in float64 then float32.
                        want_scale = np.float32(fmax / max(float(want_amax), 1e-12))
                        if pow2:
                            want_scale = np.float32(2.0 ** np.floor(np.log2(want_scale)))
                        self.assertEqual(amax[0], want_amax)
                        self.assertEqual(scale[0], want_scale)
                        self.assertEqual(scale_inv[0], np.float32(1) / want_scale)
                        want = reference_fp8(x, want_scale, fmt)
                        np.testing.assert_array_equal(codes(rows), want)
                        self.assertEqual(cols.strides, (1, x.shape[0]))
                        np.testing.assert_array_equal(codes(cols.T).T, want)

    def test_into_callers_outputs(self):
        rng = np.random.default_rng(7)
        x = (rng.standard_normal((24, 40)) * 50).astype(ml_dtypes.bfloat16)
        want = schedx.cast_transpose_fp8(x, 0.5, amax=True)
        fp8 = ml_dtypes.float8_e4m3fn
        # Padded rows in both layouts; the padding is poisoned and must stay so.
        rows_buf = np.full((24, 48), 0x55, np.uint8).view(fp8)
        cols_buf = np.full((40, 32), 0x55, np.uint8).view(fp8)
        out = (rows_buf[:, :40], cols_buf[:, :24].T, np.full(1, np.nan, np.float32), np.full(1, np.nan, np.float32))
        got = schedx.cast_transpose_fp8(x, 0.5, amax=True, out=out)
        for g, o, w in zip(got, out, want):
            self.assertIs(g, o)
            np.testing.assert_array_equal(codes(np.ascontiguousarray(g)), codes(np.ascontiguousarray(w)))
        self.assertTrue((codes(rows_buf)[:, 40:] == 0x55).all())
        self.assertTrue((codes(cols_buf)[:, 24:] == 0x55).all())
        rows_only = np.empty((24, 40), fp8)
        r, c = schedx.cast_transpose_fp8(x, 0.5, cols=False, out=(rows_only, None))
        self.assertIs(r, rows_only)
        self.assertIsNone(c)
        np.testing.assert_array_equal(codes(rows_only), codes(want[0]))

    def test_numpy_scalar_scale(self):
        x = np.ones((4, 4), np.float32)
        for scale in (np.float32(2.0), np.array(2.0, np.float32), 2):
            r, _ = schedx.cast_transpose_fp8(x, scale)
            np.testing.assert_array_equal(r.astype(np.float32), 2 * x)

    def test_torch_not_imported(self):
        schedx.cast_transpose_fp8(np.ones((2, 2), np.float32), 1.0)
        self.assertNotIn("torch", sys.modules)


class AbsMaxTest(unittest.TestCase):
    def test_every_16bit_pattern_and_empty(self):
        x = all_16bit_patterns()
        for name, arr in (("bf16", x.view(ml_dtypes.bfloat16)), ("fp16", x.view(np.float16))):
            with self.subTest(name):
                finite = arr.astype(np.float32)
                self.assertTrue(np.isnan(schedx.abs_max(arr)[0]))  # NaN patterns are among them
                finite = np.where(np.isnan(finite), 0, finite)
                want = np.abs(finite).max()
                self.assertEqual(schedx.abs_max(finite.astype(arr.dtype))[0], want)
        rng = np.random.default_rng(5)
        y = (rng.standard_normal((37, 80)) * 9).astype(np.float32)
        self.assertEqual(schedx.abs_max(y[:, 5:61])[0], np.abs(y[:, 5:61]).max())
        self.assertEqual(schedx.abs_max(np.ones((0, 3), np.float32))[0], 0.0)


class ErrorTest(unittest.TestCase):
    x = np.ones((8, 16), dtype=ml_dtypes.bfloat16)

    def assertRaisesStatus(self, status, text, fn, *args, **kw):
        with self.assertRaises(SchedxError) as cm:
            fn(*args, **kw)
        e = cm.exception
        self.assertIsInstance(e, ValueError)
        self.assertEqual(e.status, status)
        self.assertIn(text, e.message)
        self.assertIn(text, str(e))
        return e

    def test_checked_in_python(self):
        ct = schedx.cast_transpose_fp8
        self.assertRaisesStatus(Status.ERR_BAD_SIZE, "must be 2-D", ct, np.ones(16, np.float32), 1.0)
        self.assertRaisesStatus(Status.ERR_UNSUPPORTED_DTYPE, "float64", ct, np.ones((4, 4)), 1.0)
        self.assertRaisesStatus(Status.ERR_UNSUPPORTED_DTYPE, "int8", ct, np.ones((4, 4), np.int8), 1.0)
        self.assertRaisesStatus(Status.ERR_UNSUPPORTED_DTYPE, "list", ct, [[1.0]], 1.0)
        self.assertRaisesStatus(Status.ERR_BAD_LEADING_DIM, "row-major", ct, self.x.T, 1.0)
        self.assertRaisesStatus(Status.ERR_BAD_LEADING_DIM, "row-major", ct, self.x[:, ::2], 1.0)
        self.assertRaisesStatus(Status.ERR_UNSUPPORTED_FORMAT, "e4m3", ct, self.x, 1.0, "e4m3fnuz")
        self.assertRaisesStatus(Status.ERR_UNSUPPORTED_DTYPE, "scale has dtype float64", ct, self.x,
                                np.ones(1, np.float64))
        self.assertRaisesStatus(Status.ERR_BAD_SIZE, "one element", ct, self.x, np.ones(2, np.float32))

    def test_bad_outputs(self):
        ct = schedx.cast_transpose_fp8
        fp8 = ml_dtypes.float8_e4m3fn
        rows, cols = np.empty((8, 16), fp8), np.empty((16, 8), fp8).T
        self.assertRaisesStatus(Status.ERR_BAD_SIZE, "2 entries", ct, self.x, 1.0, out=(rows,))
        self.assertRaisesStatus(Status.ERR_BAD_SIZE, "None exactly where", ct, self.x, 1.0, cols=False,
                                out=(rows, cols))
        self.assertRaisesStatus(Status.ERR_UNSUPPORTED_DTYPE, "must have dtype float8_e4m3fn", ct, self.x, 1.0,
                                out=(rows.view(np.uint8), cols))
        self.assertRaisesStatus(Status.ERR_UNSUPPORTED_DTYPE, "float8_e5m2", ct, self.x, 1.0, "e5m2",
                                out=(rows, cols))
        self.assertRaisesStatus(Status.ERR_BAD_SIZE, "shape (8, 16)", ct, self.x, 1.0, out=(rows[:4], cols))
        self.assertRaisesStatus(Status.ERR_BAD_LEADING_DIM, "row-major", ct, self.x, 1.0,
                                out=(rows, np.empty((8, 16), fp8)))
        self.assertRaisesStatus(Status.ERR_BAD_SIZE, "shape (1,)", ct, self.x, 1.0, amax=True,
                                out=(rows, cols, np.empty(2, np.float32), np.empty(1, np.float32)))
        self.assertRaisesStatus(Status.ERR_OVERLAP, "overlap", ct, self.x, 1.0,
                                out=(rows, rows.view(np.uint8).reshape(16, 8).view(fp8).T))

    def test_status_names_match_the_header(self):
        """schedx_status_name (the C++ torch kernels' error text) agrees with Status."""
        name = schedx._capi.lib().schedx_status_name
        name.restype, name.argtypes = ctypes.c_char_p, [ctypes.c_int]
        for status in Status:
            self.assertEqual(name(status).decode(), "SCHEDX_" + status.name)
        self.assertEqual(name(len(Status)).decode(), "SCHEDX_UNKNOWN_STATUS")
        self.assertIsInstance(SchedxError(Status.ERR_BAD_SIZE, "m"), RuntimeError)

    def test_returned_by_the_c_abi(self):
        ct = schedx.cast_transpose_fp8
        self.assertRaisesStatus(Status.ERR_NULL_POINTER, "rows and cols are both NULL", ct, self.x, 1.0,
                                rows=False, cols=False)
        # An empty x is valid (amax 0, scale_inv 1 / scale).
        self.assertEqual([a.tolist() for a in ct(np.ones((0, 4), np.float32), 2.0, amax=True)[2:]], [[0.0], [0.5]])
        self.assertRaisesStatus(Status.ERR_UNKNOWN_VARIANT, "no variant named nope", schedx.force_variant,
                                "cast_transpose", "nope")
        self.assertRaisesStatus(Status.ERR_UNKNOWN_VARIANT, "unknown operator", schedx.force_variant, "nope", None)
        cuda = next(v.name for v in schedx.variants() if v.op == "cast_transpose" and v.device == "cuda")
        with schedx.forcing("cast_transpose", cuda):
            self.assertRaisesStatus(Status.ERR_VARIANT_CANNOT_RUN, "does not implement this device", ct, self.x, 1.0)
        # Back to automatic dispatch.
        ct(self.x, 1.0)
        self.assertEqual(schedx.last_reason("cast_transpose").split()[0], "heuristic")


class RegistryTest(unittest.TestCase):
    def test_variants(self):
        vs = schedx.variants()
        by_name = {v.name: v for v in vs}
        self.assertEqual(len(by_name), len(vs))
        v = by_name["cast_transpose_bf16_cpu"]
        self.assertEqual((v.op, v.device), ("cast_transpose", "cpu"))
        self.assertEqual(v.params["in_type"], "bf16")
        self.assertEqual(v.params["schedule"], "cpu")
        self.assertTrue({v.device for v in vs} <= {"cpu", "cuda"})

    def test_force_variant(self):
        x = np.ones((8, 16), np.float32)
        schedx.force_variant("cast_transpose", "cast_transpose_fp32_cpu")
        try:
            schedx.cast_transpose_fp8(x, 1.0)
            self.assertEqual(schedx.last_variant("cast_transpose"), "cast_transpose_fp32_cpu")
            self.assertEqual(schedx.last_reason("cast_transpose"), "forced")
        finally:
            schedx.force_variant("cast_transpose", None)


def reference_w8(x, w, scales, bias):
    y = (x.astype(np.float64) @ w.astype(np.float64).T) * scales.astype(np.float64)
    return y if bias is None else y + bias.astype(np.float64)


class W8LinearTest(unittest.TestCase):
    def test_against_fp64_reference(self):
        rng = np.random.default_rng(4)
        for m, n, k in [(1, 1, 7), (2, 33, 40), (5, 64, 300), (17, 20, 129)]:
            for xdt in (ml_dtypes.bfloat16, np.float16):
                for sdt in (ml_dtypes.bfloat16, np.float32):
                    for with_bias in (False, True):
                        x = rng.standard_normal((m, k)).astype(xdt)
                        w = rng.integers(-128, 128, (n, k), dtype=np.int8)
                        scales = (rng.random(n) * 0.02 + 0.001).astype(sdt)
                        bias = rng.standard_normal(n).astype(sdt) if with_bias else None
                        with self.subTest(m=m, n=n, k=k, x=np.dtype(xdt).name, scales=np.dtype(sdt).name,
                                          bias=with_bias):
                            y = schedx.w8_linear(x, w, scales, bias)
                            self.assertEqual(y.dtype, x.dtype)
                            self.assertEqual(y.shape, (m, n))
                            ref = reference_w8(x, w, scales, bias)
                            # Per element, relative, floored at 1e-3 of the output's range (the C++ tests' rule).
                            floor = 1e-3 * max(np.abs(ref).max(), 1e-30)
                            err = (np.abs(y.astype(np.float64) - ref) / np.maximum(np.abs(ref), floor)).max()
                            self.assertLessEqual(err, 1e-2)

    def test_integer_values_exact(self):
        rng = np.random.default_rng(5)
        x = rng.integers(-3, 4, (3, 50)).astype(ml_dtypes.bfloat16)
        w = rng.integers(-4, 5, (9, 50), dtype=np.int8)
        scales = np.ones(9, np.float32)
        y = schedx.w8_linear(x, w, scales)
        np.testing.assert_array_equal(y.astype(np.float64), reference_w8(x, w, scales, None))

    def test_strided_x_and_w(self):
        rng = np.random.default_rng(6)
        x = rng.integers(-3, 4, (4, 64)).astype(ml_dtypes.bfloat16)[:, :40]
        w = rng.integers(-4, 5, (6, 48), dtype=np.int8)[:, :40]
        scales = np.ones(6, np.float32)
        y = schedx.w8_linear(x, w, scales)
        np.testing.assert_array_equal(y.astype(np.float64), reference_w8(x, w, scales, None))

    def test_into_callers_output(self):
        rng = np.random.default_rng(8)
        x = rng.integers(-3, 4, (3, 64)).astype(ml_dtypes.bfloat16)
        w = rng.integers(-4, 5, (10, 64), dtype=np.int8)
        scales = np.ones(10, np.float32)
        buf = np.full((3, 16), np.nan, ml_dtypes.bfloat16)
        y = schedx.w8_linear(x, w, scales, out=buf[:, :10])
        self.assertIs(y.base, buf)
        np.testing.assert_array_equal(y.astype(np.float64), reference_w8(x, w, scales, None))
        self.assertTrue(np.isnan(buf[:, 10:].astype(np.float32)).all())
        for bad, status, text in [(np.empty((3, 10), np.float16), Status.ERR_UNSUPPORTED_DTYPE, "must have dtype"),
                                  (np.empty((3, 9), ml_dtypes.bfloat16), Status.ERR_BAD_SIZE, "shape (3, 10)"),
                                  (np.empty((10, 3), ml_dtypes.bfloat16).T, Status.ERR_BAD_LEADING_DIM, "row-major")]:
            with self.subTest(text=text):
                with self.assertRaises(SchedxError) as cm:
                    schedx.w8_linear(x, w, scales, out=bad)
                self.assertEqual(cm.exception.status, status)
                self.assertIn(text, cm.exception.message)

    def test_errors(self):
        x = np.ones((2, 8), ml_dtypes.bfloat16)
        w = np.ones((3, 8), np.int8)
        s = np.ones(3, np.float32)
        cases = [
            (Status.ERR_BAD_SIZE, "K = 8", (x, np.ones((3, 9), np.int8), s)),
            (Status.ERR_UNSUPPORTED_DTYPE, "w must be int8", (x, w.astype(np.float32), s)),
            (Status.ERR_BAD_SIZE, "scales must have shape (3,)", (x, w, np.ones(4, np.float32))),
            (Status.ERR_BAD_LEADING_DIM, "row-major", (x, np.ones((8, 3), np.int8).T, s)),
            (Status.ERR_UNSUPPORTED_DTYPE, "bias must have the dtype of scales", (x, w, s, np.ones(3, np.float16))),
        ]
        for status, text, args in cases:
            with self.subTest(text=text):
                with self.assertRaises(SchedxError) as cm:
                    schedx.w8_linear(*args)
                self.assertEqual(cm.exception.status, status)
                self.assertIn(text, cm.exception.message)


if __name__ == "__main__":
    unittest.main()
