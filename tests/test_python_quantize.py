"""schedx.quantize (python/schedx/quantize.py) on numpy arrays against a reference written
here with numpy and ml_dtypes: TE's blockwise 1x128 rule and MXFP8 FLOOR on a small ragged
bf16 matrix, and the argument errors."""

import unittest

import ml_dtypes
import numpy as np

from schedx import SchedxError, Status
from schedx.quantize import quantize_fp8, scale_shape

E4M3 = ml_dtypes.float8_e4m3fn


def reference_block1d(x32):
    """rows codes and [KB][pad4(M)] scale_inv, TE's rule with power-of-two scales."""
    m, k = x32.shape
    kb = -(-k // 128)
    codes = np.zeros((m, k), dtype=E4M3)
    inv = np.zeros((kb, -(-m // 4) * 4), dtype=np.float32)
    for i in range(m):
        for b in range(kb):
            blk = x32[i, b * 128:(b + 1) * 128]
            amax = np.float32(np.max(np.abs(blk)))
            s = np.float32(1.0) if amax == 0 else np.float32(448.0) / amax
            s = np.array([s], dtype=np.float32).view(np.uint32) & np.uint32(0xFF800000)
            s = s.view(np.float32)[0]
            codes[i, b * 128:(b + 1) * 128] = (blk * s).astype(E4M3)
            inv[b, i] = np.float32(1.0) / s
    return codes, inv


def reference_mx_floor(x32):
    m, k = x32.shape
    codes = np.zeros((m, k), dtype=E4M3)
    scales = np.zeros((m, -(-k // 32)), dtype=np.uint8)
    for i in range(m):
        for b in range(-(-k // 32)):
            blk = x32[i, b * 32:(b + 1) * 32]
            amax = np.array([np.max(np.abs(blk))], dtype=np.float32)
            biased = int((amax.view(np.uint32)[0] >> 23) & 0xFF)
            byte = max(biased - 8, 0)
            scales[i, b] = byte
            # torchao's to_mx divides by 2^(byte - 127) clamped to the smallest normal float.
            mult = np.float32(2.0 ** (127 - max(byte, 1)))
            codes[i, b * 32:(b + 1) * 32] = np.clip(blk * mult, -448, 448).astype(E4M3)
    return codes, scales


class QuantizeTest(unittest.TestCase):
    def setUp(self):
        rng = np.random.default_rng(3)
        x = rng.standard_normal((67, 300)).astype(np.float32) * np.float32(2.0) ** rng.integers(-8, 8, (67, 1))
        self.x = x.astype(ml_dtypes.bfloat16)
        self.x32 = self.x.astype(np.float32)

    def test_block1x128_both_orientations(self):
        rows, rs, cols, cs = quantize_fp8(self.x, "block1x128")
        want, want_inv = reference_block1d(self.x32)
        np.testing.assert_array_equal(rows.view(np.uint8), want.view(np.uint8))
        np.testing.assert_array_equal(rs.view(np.uint32), want_inv.view(np.uint32))
        want_t, want_t_inv = reference_block1d(np.ascontiguousarray(self.x32.T))
        np.testing.assert_array_equal(cols.view(np.uint8), want_t.view(np.uint8))
        # The transpose's blocks run along M: its scale_inv is [ceil(M/128)][pad4(K)], [mb][k].
        self.assertEqual(cs.shape, scale_shape("block1x128", 67, 300, True))
        np.testing.assert_array_equal(cs.view(np.uint32), want_t_inv.view(np.uint32))

    def test_mxfp8_floor_rows_only(self):
        rows, rs, cols, cs = quantize_fp8(self.x, "mxfp8", mx_mode="floor", cols=False)
        self.assertIsNone(cols)
        self.assertIsNone(cs)
        want, want_s = reference_mx_floor(self.x32)
        np.testing.assert_array_equal(rs, want_s)
        np.testing.assert_array_equal(rows.view(np.uint8), want.view(np.uint8))

    def test_axiswise(self):
        """torchao's rowwise recipe: fp32(448 / max(fp64(amax), 1e-12)), power-of-two rounded."""
        rows, rs, cols, cs = quantize_fp8(self.x, "axiswise")
        amax_r = np.abs(self.x32).max(axis=1, keepdims=True).astype(np.float64)
        s_r = (448.0 / np.maximum(amax_r, 1e-12)).astype(np.float32)
        s_r = np.exp2(np.floor(np.log2(s_r))).astype(np.float32)
        np.testing.assert_array_equal(rs, s_r)
        np.testing.assert_array_equal(rows.view(np.uint8), (self.x32 * s_r).astype(E4M3).view(np.uint8))
        amax_c = np.abs(self.x32).max(axis=0, keepdims=True).astype(np.float64)
        s_c = np.exp2(np.floor(np.log2((448.0 / np.maximum(amax_c, 1e-12)).astype(np.float32)))).astype(np.float32)
        np.testing.assert_array_equal(cs, s_c)
        np.testing.assert_array_equal(cols.view(np.uint8), (self.x32 * s_c).T.astype(E4M3).view(np.uint8))

    def test_errors(self):
        for status, text, args, kw in [
            (Status.ERR_UNSUPPORTED_FORMAT, "recipe must be one of", ("block64",), {}),
            (Status.ERR_UNSUPPORTED_FORMAT, "options->epsilon must be finite and >= +0", (), {"epsilon": -1.0}),
            (Status.ERR_NULL_POINTER, "rows and cols are both False", (), {"rows": False, "cols": False}),
        ]:
            with self.subTest(text=text):
                with self.assertRaises(SchedxError) as cm:
                    quantize_fp8(self.x, *args, **kw)
                self.assertEqual(cm.exception.status, status)
                self.assertIn(text, str(cm.exception))


if __name__ == "__main__":
    unittest.main()
