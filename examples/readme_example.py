import ml_dtypes
import numpy as np
import schedx

rng = np.random.default_rng(0)
x = rng.standard_normal((64, 256)).astype(ml_dtypes.bfloat16)
rows, cols, amax, scale_inv = schedx.cast_transpose_fp8(x, 2.0, amax=True)  # e4m3fn
expected = (x.astype(np.float32) * 2).astype(ml_dtypes.float8_e4m3fn)
assert np.array_equal(rows.view(np.uint8), expected.view(np.uint8)) and np.array_equal(rows, cols)
assert amax[0] == np.abs(x.astype(np.float32)).max() and scale_inv[0] == 0.5

w = rng.integers(-127, 128, (512, 256), dtype=np.int8)
scales = rng.uniform(0.001, 0.01, 512).astype(np.float32)
y = schedx.w8_linear(x[:4], w, scales)  # [4, 512] bf16: (x @ w.T) * scales, sums in fp32
expected = (x[:4].astype(np.float64) @ w.T.astype(np.float64)) * scales
assert np.allclose(y.astype(np.float64), expected, rtol=1e-2, atol=1e-2)
print(schedx.last_variant("cast_transpose"), schedx.last_variant("w8_linear"))
