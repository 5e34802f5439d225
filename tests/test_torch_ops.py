"""torch.ops.schedx and schedx.nn against independent references, on the CPU and, where
one is present, on a CUDA device.

References are PyTorch's own expressions (the fp8 cast torchao and the issue's pattern use,
F.linear on fp64) and transcriptions, written here, of gpt-fast's int8 quantizer and
torchao's tensorwise float8 linear; never schedx's own code. Where torch is not installed
it exits 77, which ctest reports as skipped. ctest sets SCHEDX_LIBRARY and PYTHONPATH.
"""

import logging
import os
import re
import tempfile
import unittest
import unittest.mock
import warnings

os.environ["SCHEDX_TUNING_DB"] = os.path.join(tempfile.gettempdir(), f"schedx-test-{os.getpid()}", "none.jsonl")

try:
    import torch
except ImportError:  # the module's tests skip; the reason is printed once
    torch = None

if torch is not None:
    from torch.library import opcheck

    import schedx
    import schedx.nn as snn
    from schedx import SchedxError, Status

    DEVICES = ["cpu"] + (["cuda"] if torch.cuda.is_available() else [])
    FP8 = (torch.float8_e4m3fn, torch.float8_e5m2)
    ops = torch.ops.schedx


def needs_torch(cls):
    return unittest.skipIf(torch is None, "torch is not installed")(cls)


def ref_cast(x, scale, dtype, divide=False):
    """The pattern schedx replaces: f = clamp(x * scale, -max, max).to(fp8) (divide: x / scale)
    and f.t().contiguous().t(); a NaN product or quotient encodes as 0x7F (schedx.h)."""
    fmax = torch.finfo(dtype).max
    v = x.float() / scale if divide else x.float() * scale
    f = torch.clamp(v, -fmax, fmax).to(dtype)
    bits = torch.where(torch.isnan(v), torch.tensor(0x7F, dtype=torch.uint8, device=x.device), f.view(torch.uint8))
    return bits, f.t().contiguous().t()


def bits(t):
    return t.contiguous().view(torch.uint8) if t.dtype.itemsize == 1 else t


def bits_equal(a, b):
    """Float tensors equal bit for bit, any NaN equal to any NaN."""
    a, b = a.cpu(), b.cpu()
    both_nan = a.isnan() & b.isnan()
    return a.shape == b.shape and bool((both_nan | (a.view(torch.int32) == b.view(torch.int32))).all())


def assert_fails_with(test, cases):
    """Each (status, text, call): call raises a RuntimeError reading "schedx <status>: ..."
    with that text: a SchedxError from a Python kernel, which also carries the status, or a
    plain RuntimeError from a C++ kernel (torch's translation of its exception)."""
    for status, text, call in cases:
        with test.subTest(text):
            with test.assertRaises(RuntimeError) as cm:
                call()
            test.assertIn(f"schedx {status.name}: ", str(cm.exception))
            test.assertIn(text, str(cm.exception))
            if isinstance(cm.exception, SchedxError):
                test.assertEqual(cm.exception.status, status)


def poisoned(shape, dtype, device, ld=None):
    """An output buffer full of 0x5A bytes, with rows `ld` apart (padding stays poisoned)."""
    cols = shape[1] if ld is None else ld
    buf = torch.full((shape[0], cols), 0x5A, dtype=torch.uint8, device=device).view(dtype)
    return buf, buf[:, :shape[1]]


@needs_torch
class CastTransposeOpTest(unittest.TestCase):
    def check(self, x, scale, dtype):
        s = torch.tensor([scale], device=x.device)
        rows, cols = ops.cast_transpose_fp8(x, s, dtype)
        want, ref_t = ref_cast(x, s, dtype)
        self.assertEqual((rows.shape, rows.stride(), rows.dtype), (x.shape, torch.empty(x.shape).stride(), dtype))
        self.assertEqual((cols.shape, cols.stride(), cols.dtype), (ref_t.shape, ref_t.stride(), dtype))
        self.assertTrue(torch.equal(bits(rows), want))
        self.assertTrue(torch.equal(bits(cols.t()), want.t().contiguous()))

    def test_every_16bit_pattern(self):
        pattern = torch.arange(1 << 16, dtype=torch.int32).to(torch.int16).reshape(256, 256)
        for device in DEVICES:
            for xdt in (torch.bfloat16, torch.float16):
                x = pattern.to(device).view(xdt)
                for dtype in FP8:
                    for scale in (1.0, 2.0**-7, 448.0 / 3.7):
                        with self.subTest(device=device, x=xdt, fp8=dtype, scale=scale):
                            self.check(x, scale, dtype)

    def test_divide_every_16bit_pattern(self):
        """divide=True is x / s as eager divides (IEEE fp32), which for these divisors gives other
        codes than x * (1 / s) somewhere; both outputs, and each alone through the out variant."""
        pattern = torch.arange(1 << 16, dtype=torch.int32).to(torch.int16).reshape(256, 256)
        for device in DEVICES:
            for xdt in (torch.bfloat16, torch.float16, torch.float32):
                x = pattern.to(device).view(xdt) if xdt != torch.float32 else \
                    pattern.to(device).view(torch.bfloat16).float()
                for dtype in FP8:
                    differs = False
                    for divisor in (7.0, 1.7, 0.3, 0.0):
                        with self.subTest(device=device, x=xdt, fp8=dtype, divisor=divisor):
                            s = torch.tensor([divisor], device=device)
                            want = ref_cast(x, s, dtype, divide=True)[0]
                            rows, cols = ops.cast_transpose_fp8(x, s, dtype, divide=True)
                            self.assertTrue(torch.equal(bits(rows), want))
                            self.assertTrue(torch.equal(bits(cols.t()), want.t().contiguous()))
                            only_rows, only_cols = torch.empty_like(rows), torch.empty_like(cols.t())
                            ops.cast_transpose_fp8_out(x, s, rows=only_rows, cols=None, divide=True)
                            ops.cast_transpose_fp8_out(x, s, rows=None, cols=only_cols.t(), divide=True)
                            self.assertTrue(torch.equal(bits(only_rows), want))
                            self.assertTrue(torch.equal(bits(only_cols), want.t().contiguous()))
                            differs |= not torch.equal(ref_cast(x, torch.reciprocal(s), dtype)[0], want)
                    self.assertTrue(differs, "no divisor tells x / s from x * (1 / s) apart")

    def test_shapes_and_strides(self):
        g = torch.Generator().manual_seed(1)
        shapes = [(1, 1), (1, 7), (7, 1), (1, 64), (64, 1), (33, 48), (64, 96), (3, 130), (0, 5), (5, 0)]
        for device in DEVICES:
            for m, k in shapes:
                base = (torch.randn(m, k + 3, generator=g) * 40).to(torch.bfloat16).to(device)
                for name, x in (("contiguous", base[:, :k].contiguous()), ("row stride k + 3", base[:, :k]),
                                ("transposed", base[:, :k].t().contiguous().t()), ("fp32", base[:, :k].float())):
                    with self.subTest(device=device, shape=(m, k), layout=name):
                        self.check(x, 3.0, torch.float8_e4m3fn)

    def test_amax_and_scale_inv(self):
        for device in DEVICES:
            x = (torch.randn(40, 72) * 30).to(torch.bfloat16).to(device)
            s = torch.tensor([0.375], device=device)
            rows, cols, amax, inv = ops.cast_transpose_fp8_amax(x, s, torch.float8_e5m2)
            self.assertTrue(torch.equal(bits(rows), ref_cast(x, s, torch.float8_e5m2)[0]))
            self.assertEqual(amax.item(), x.float().abs().max().item())
            self.assertEqual(inv.item(), torch.reciprocal(s).item())
            x[5, 7] = float("nan")
            self.assertTrue(ops.cast_transpose_fp8_amax(x, s, torch.float8_e5m2)[2].isnan().item())
            empty = ops.cast_transpose_fp8_amax(x[:0], s, torch.float8_e5m2)
            self.assertEqual([t.shape for t in empty[:2]], [torch.Size([0, 72])] * 2)
            self.assertEqual((empty[2].item(), empty[3].item()), (0.0, torch.reciprocal(s).item()))

    def test_current_scaling(self):
        g = torch.Generator().manual_seed(5)
        base = torch.randn(40, 75, generator=g) * 30
        nan, inf = base.clone(), base.clone()
        nan[3, 9], inf[7, 2] = float("nan"), float("-inf")
        for device in DEVICES:
            for name, x32 in (("random", base), ("NaN", nan), ("-inf", inf), ("zeros", base * 0), ("tiny", base * 1e-20)):
                for xdt in (torch.bfloat16, torch.float16, torch.float32):
                    for layout, x in (("contiguous", x32[:, :72].to(xdt)), ("row stride 75", x32.to(xdt)[:, :72]),
                                      ("transposed", x32[:, :72].to(xdt).t().contiguous().t()),
                                      ("1 x K", x32[:1, :72].to(xdt)), ("M x 1", x32[:, :1].to(xdt))):
                        x = x.to(device)
                        for dtype in FP8:
                            for pow2 in (False, True):
                                with self.subTest(device=device, data=name, x=xdt, layout=layout, fp8=dtype, pow2=pow2):
                                    rows, cols, amax, scale, inv = ops.cast_transpose_fp8_current_scaling(x, dtype, pow2)
                                    want_scale = torchao_scale(x, dtype, pow2)
                                    want, ref_t = ref_cast(x, want_scale, dtype)
                                    self.assertTrue(bits_equal(amax, x.float().abs().max().reshape(1)))
                                    self.assertTrue(bits_equal(scale, want_scale))
                                    self.assertTrue(bits_equal(inv, want_scale.reciprocal()))
                                    self.assertEqual((cols.shape, cols.stride()), (ref_t.shape, ref_t.stride()))
                                    self.assertTrue(torch.equal(bits(rows), want))
                                    self.assertTrue(torch.equal(bits(cols.t()), want.t().contiguous()))
            for shape in ((0, 72), (5, 0)):
                with self.subTest(device=device, shape=shape):
                    rows, cols, amax, scale, inv = ops.cast_transpose_fp8_current_scaling(
                        torch.empty(shape, dtype=torch.bfloat16, device=device), torch.float8_e4m3fn)
                    self.assertEqual((rows.shape, cols.shape), (shape, shape))
                    self.assertEqual(amax.item(), 0.0)
                    self.assertTrue(bits_equal(scale, torch.tensor([448.0 / 1e-12], dtype=torch.float32)))
                    self.assertTrue(bits_equal(inv, scale.reciprocal()))

    def test_out_variant_writes_only_its_outputs(self):
        for device in DEVICES:
            x = (torch.randn(24, 40) * 10).to(torch.float16).to(device)
            s = torch.tensor([4.0], device=device)
            want = ref_cast(x, s, torch.float8_e4m3fn)[0]
            rows_buf, rows = poisoned((24, 40), torch.float8_e4m3fn, device, ld=48)
            cols_buf, cols_t = poisoned((40, 24), torch.float8_e4m3fn, device, ld=32)
            amax, inv = torch.full((1,), 7e7, device=device), torch.full((1,), 7e7, device=device)
            ops.cast_transpose_fp8_out(x, s, rows=rows, cols=cols_t.t(), amax=amax, scale_inv=inv)
            self.assertTrue(torch.equal(bits(rows), want))
            self.assertTrue(torch.equal(bits(cols_t), want.t().contiguous()))
            self.assertTrue(bool((rows_buf.view(torch.uint8)[:, 40:] == 0x5A).all()))
            self.assertTrue(bool((cols_buf.view(torch.uint8)[:, 24:] == 0x5A).all()))
            self.assertEqual(amax.item(), x.float().abs().max().item())
            # One orientation only: the other is not touched.
            rows_buf, rows = poisoned((24, 40), torch.float8_e4m3fn, device)
            ops.cast_transpose_fp8_out(x, s, rows=rows, cols=None)
            self.assertTrue(torch.equal(bits(rows), want))

    def test_python_api_is_the_op(self):
        for device in DEVICES:
            x = (torch.randn(16, 32) * 10).to(torch.bfloat16).to(device)
            for kw in ({}, {"amax": True}, {"cols": False}, {"rows": False, "fmt": "e5m2"}):
                with self.subTest(device=device, **kw):
                    out = schedx.cast_transpose_fp8(x, 2.0, **kw)
                    dtype = torch.float8_e5m2 if kw.get("fmt") == "e5m2" else torch.float8_e4m3fn
                    want, ref_t = ref_cast(x, torch.tensor([2.0], device=device), dtype)
                    if out[0] is not None:
                        self.assertTrue(torch.equal(bits(out[0]), want))
                    if out[1] is not None:
                        self.assertEqual(out[1].stride(), ref_t.stride())
                        self.assertTrue(torch.equal(bits(out[1].t()), want.t().contiguous()))
                    self.assertEqual(len(out), 4 if kw.get("amax") else 2)
            with self.subTest(device=device, api="current scaling"):
                got = schedx.cast_transpose_fp8_current_scaling(x, "e5m2", pow2_scales=True)
                want = ops.cast_transpose_fp8_current_scaling(x, torch.float8_e5m2, True)
                for g_, w_ in zip(got, want):
                    self.assertTrue(torch.equal(bits(g_), bits(w_)))

    def test_errors(self):
        x = torch.ones(8, 16, dtype=torch.bfloat16)
        s = torch.ones(1)
        cases = [
            (Status.ERR_BAD_SIZE, "2-D", lambda: ops.cast_transpose_fp8(torch.ones(2, 3, 4), s, FP8[0])),
            (Status.ERR_UNSUPPORTED_DTYPE, "int8", lambda: ops.cast_transpose_fp8(x.to(torch.int8), s, FP8[0])),
            (Status.ERR_UNSUPPORTED_FORMAT, "float8_e4m3fn or float8_e5m2",
             lambda: ops.cast_transpose_fp8(x, s, torch.float16)),
            (Status.ERR_BAD_SIZE, "one-element float32", lambda: ops.cast_transpose_fp8(x, torch.ones(2), FP8[0])),
            (Status.ERR_UNSUPPORTED_DTYPE, "one-element float32",
             lambda: ops.cast_transpose_fp8(x, torch.ones(1, dtype=torch.float64), FP8[0])),
            (Status.ERR_UNSUPPORTED_DTYPE, "one-element float32", lambda: ops.cast_transpose_fp8_out(
                x, s, rows=torch.empty(8, 16, dtype=FP8[0]), cols=None, amax=torch.ones(1, dtype=torch.float16),
                scale_inv=torch.ones(1))),
            (Status.ERR_BAD_SIZE, "shape (8, 16)", lambda: ops.cast_transpose_fp8_out(
                x, s, rows=torch.empty(4, 16, dtype=FP8[0]), cols=None)),
            (Status.ERR_BAD_LEADING_DIM, "row-major", lambda: ops.cast_transpose_fp8_out(
                x, s, rows=None, cols=torch.empty(8, 16, dtype=FP8[0]))),
            (Status.ERR_NULL_POINTER, "both None", lambda: ops.cast_transpose_fp8_out(x, s, rows=None, cols=None)),
            (Status.ERR_NO_VARIANT, "divide=True writes no amax", lambda: ops.cast_transpose_fp8_out(
                x, s, rows=torch.empty(8, 16, dtype=FP8[0]), cols=None, amax=torch.ones(1), scale_inv=torch.ones(1),
                divide=True)),
            (Status.ERR_OVERLAP, "overlap", lambda: ops.cast_transpose_fp8_out(
                x, s, rows=(buf := torch.empty(8, 16, dtype=FP8[0])), cols=buf.view(16, 8).t())),
        ]
        assert_fails_with(self, cases)


@needs_torch
class AbsMaxOpTest(unittest.TestCase):
    def test_against_torch(self):
        for device in DEVICES:
            for dtype in (torch.bfloat16, torch.float16, torch.float32):
                x = (torch.randn(37, 53) * 100).to(dtype).to(device)
                with self.subTest(device=device, dtype=dtype):
                    self.assertEqual(ops.abs_max(x).item(), x.float().abs().max().item())
                    self.assertEqual(ops.abs_max(x.reshape(37, 1, 53)).item(), x.float().abs().max().item())
                    self.assertEqual(ops.abs_max(x[:, 3:40]).item(), x[:, 3:40].float().abs().max().item())
                    self.assertEqual(ops.abs_max(x[:0]).item(), 0.0)
                    self.assertEqual(ops.abs_max(x[2, 5]).item(), x[2, 5].float().abs().item())  # 0-d, as torch.amax takes
                    x[3, 4] = float("-nan")
                    self.assertTrue(ops.abs_max(x).isnan().item())


def ref_w8(x, w, scales, bias):
    y = (x.double() @ w.double().t()) * scales.double()
    return y if bias is None else y + bias.double()


@needs_torch
class W8LinearOpTest(unittest.TestCase):
    def test_against_fp64(self):
        g = torch.Generator().manual_seed(2)
        for device in DEVICES:
            for m, n, k in ((1, 96, 256), (5, 64, 512), (3, 17, 40), (2, 8, 1)):
                for xdt, sdt, with_bias in ((torch.bfloat16, torch.bfloat16, False), (torch.float16, torch.float32, True)):
                    x = torch.randn(m, k, generator=g).to(xdt).to(device)
                    w = torch.randint(-128, 128, (n, k), generator=g, dtype=torch.int8).to(device)
                    s = (torch.rand(n, generator=g) / 64).to(sdt).to(device)
                    b = torch.randn(n, generator=g).to(sdt).to(device) if with_bias else None
                    with self.subTest(device=device, shape=(m, n, k), x=xdt, scales=sdt, bias=with_bias):
                        y = ops.w8_linear(x, w, s, b)
                        ref = ref_w8(x, w, s, b)
                        self.assertEqual((y.shape, y.dtype), ((m, n), xdt))
                        torch.testing.assert_close(y.double(), ref, rtol=1e-2, atol=1e-5 * ref.abs().max().item())

    def test_leading_dims_strides_and_out(self):
        for device in DEVICES:
            x = torch.randn(2, 3, 64).to(torch.bfloat16).to(device)
            w = torch.randint(-128, 128, (48, 80), dtype=torch.int8).to(device)[:, :64]
            s = (torch.rand(48) / 32).to(torch.bfloat16).to(device)
            y = ops.w8_linear(x, w, s)
            ref = ref_w8(x.reshape(6, 64), w, s, None).reshape(2, 3, 48)
            self.assertEqual(y.shape, (2, 3, 48))
            torch.testing.assert_close(y.double(), ref, rtol=1e-2, atol=1e-5 * ref.abs().max().item())
            buf = torch.full((6, 56), float("nan"), dtype=torch.bfloat16, device=device)
            ops.w8_linear_out(x.reshape(6, 64), w, s, None, out=buf[:, :48])
            self.assertTrue(torch.equal(buf[:, :48], y.reshape(6, 48)))
            self.assertTrue(bool(buf[:, 48:].isnan().all()))

    def test_cpu_torch_gemm(self):
        """From SCHEDX_CPU_GEMM_MIN_ROWS rows (by default 32 where the CPU has AVX512-BF16),
        a bf16 CPU call is torch's GEMM on W in bf16, rounded as gpt-fast's formulation rounds."""
        if schedx.ops.kernels != "c++":
            self.skipTest("the C++ kernels make this choice; these are the Python kernels")
        g = torch.Generator().manual_seed(5)
        w = torch.randint(-128, 128, (40, 72), generator=g, dtype=torch.int8)
        wb = w.to(torch.bfloat16)
        with unittest.mock.patch.dict(os.environ, {"SCHEDX_CPU_GEMM_MIN_ROWS": "4"}):
            for sdt in (torch.bfloat16, torch.float32):
                s = (torch.rand(40, generator=g) / 64).to(sdt)
                b = torch.randn(40, generator=g).to(sdt)
                for lead in ((4,), (2, 3), (33,)):
                    x = torch.randn(*lead, 72, generator=g).to(torch.bfloat16)
                    product = torch.nn.functional.linear(x, wb).float()
                    with self.subTest(scales=sdt, x=lead):
                        self.assertTrue(torch.equal(ops.w8_linear(x, w, s), (product * s.float()).to(torch.bfloat16)))
                        self.assertEqual(schedx.last_variant("w8_linear"), "w8_linear_torch_gemm")
                        self.assertTrue(torch.equal(ops.w8_linear(x, w, s, b),
                                                    (product * s.float() + b.float()).to(torch.bfloat16)))
                        buf = torch.full((x.numel() // 72, 48), float("nan"), dtype=torch.bfloat16)
                        ops.w8_linear_out(x.reshape(-1, 72), w, s, b, out=buf[:, :40])
                        self.assertTrue(torch.equal(buf[:, :40], ops.w8_linear(x, w, s, b).reshape(-1, 40)))
                        self.assertTrue(bool(buf[:, 40:].isnan().all()))
            # W's bf16 copy past one chunk (8 MiB; here 256 + 256 + 88 rows): each chunk's GEMM is
            # oneDNN's own, so the sums agree with the unchunked GEMM only within the tolerance.
            wide = torch.randint(-128, 128, (600, 16384), generator=g, dtype=torch.int8)
            s = (torch.rand(600, generator=g) / 64).to(torch.bfloat16)
            b = torch.randn(600, generator=g).to(torch.bfloat16)
            for m in (4, 33):
                x = torch.randn(m, 16384, generator=g).to(torch.bfloat16)
                ref = ref_w8(x, wide, s, b)
                buf = torch.full((m, 608), float("nan"), dtype=torch.bfloat16)
                ops.w8_linear_out(x, wide, s, b, out=buf[:, :600])
                # Two bf16 roundings, of x @ W and of the scaled sum: bounded by the sum of |terms|.
                terms = (x.double().abs() @ wide.double().abs().t()) * s.double() + b.double().abs()
                with self.subTest(chunks=3, m=m):
                    self.assertLessEqual(((buf[:, :600].double() - ref).abs() / terms).max().item(), 2 ** -7)
                    self.assertTrue(bool(buf[:, 600:].isnan().all()))
            # A forced variant keeps the call on schedx's kernels, as schedx.forcing promises.
            x = torch.randn(8, 72, generator=g).to(torch.bfloat16)
            s = (torch.rand(40, generator=g) / 64).to(torch.bfloat16)
            with schedx.forcing("w8_linear", "w8_linear_bf16_sbf16_cpu_b4_r2"):
                y = ops.w8_linear(x, w, s)
                self.assertEqual(schedx.last_variant("w8_linear"), "w8_linear_bf16_sbf16_cpu_b4_r2")
            ref = ref_w8(x, w, s, None)
            torch.testing.assert_close(y.double(), ref, rtol=1e-2, atol=1e-5 * ref.abs().max().item())
            # Below the rows, and for fp16 x, schedx's own kernel: within its tolerance of fp64.
            s = (torch.rand(40, generator=g) / 64).to(torch.bfloat16)
            for x in (torch.randn(3, 72, generator=g).to(torch.bfloat16), torch.randn(8, 72, generator=g).half()):
                ref = ref_w8(x, w, s, None)
                torch.testing.assert_close(ops.w8_linear(x, w, s).double(), ref, rtol=1e-2,
                                           atol=1e-5 * ref.abs().max().item())
        x = torch.randn(8, 72, generator=g).to(torch.bfloat16)
        for value in ("0", "many", ""):
            with unittest.mock.patch.dict(os.environ, {"SCHEDX_CPU_GEMM_MIN_ROWS": value}):
                assert_fails_with(self, [(Status.ERR_BAD_SIZE, "SCHEDX_CPU_GEMM_MIN_ROWS",
                                          lambda: ops.w8_linear(x, w, s))])
        with unittest.mock.patch.dict(os.environ, {"SCHEDX_CPU_GEMM_MIN_ROWS": "off"}):
            ref = ref_w8(x, w, s, None)
            torch.testing.assert_close(ops.w8_linear(x, w, s).double(), ref, rtol=1e-2,
                                       atol=1e-5 * ref.abs().max().item())

    def test_empty(self):
        for device in DEVICES:
            w = torch.ones(4, 8, dtype=torch.int8, device=device)
            s = torch.ones(4, dtype=torch.bfloat16, device=device)
            self.assertEqual(ops.w8_linear(torch.ones(0, 8, dtype=torch.bfloat16, device=device), w, s).shape, (0, 4))
            self.assertEqual(ops.w8_linear(torch.ones(3, 8, dtype=torch.bfloat16, device=device), w[:0], s[:0]).shape,
                             (3, 0))
            b = torch.arange(4, dtype=torch.bfloat16, device=device)
            y = ops.w8_linear(torch.ones(3, 0, dtype=torch.bfloat16, device=device), w[:, :0], s, b)
            self.assertTrue(torch.equal(y, b.expand(3, 4)))

    def test_errors(self):
        x, w, s = torch.ones(2, 8, dtype=torch.bfloat16), torch.ones(3, 8, dtype=torch.int8), torch.ones(3)
        cases = [
            # A wrong dtype is ERR_UNSUPPORTED_DTYPE, a wrong shape ERR_BAD_SIZE, for every tensor.
            (Status.ERR_UNSUPPORTED_DTYPE, "bf16 or fp16", lambda: ops.w8_linear(x.float(), w, s)),
            (Status.ERR_UNSUPPORTED_DTYPE, "int8 [N, 8]", lambda: ops.w8_linear(x, w.float(), s)),
            (Status.ERR_BAD_SIZE, "int8 [N, 8]", lambda: ops.w8_linear(x, torch.ones(3, 9, dtype=torch.int8), s)),
            (Status.ERR_BAD_SIZE, "scales", lambda: ops.w8_linear(x, w, torch.ones(4))),
            (Status.ERR_UNSUPPORTED_DTYPE, "scales", lambda: ops.w8_linear(x, w, torch.ones(3, dtype=torch.float16))),
            (Status.ERR_UNSUPPORTED_DTYPE, "bias", lambda: ops.w8_linear(x, w, s, torch.ones(3, dtype=torch.float16))),
            (Status.ERR_BAD_SIZE, "bias", lambda: ops.w8_linear(x, w, s, torch.ones(4))),
            (Status.ERR_UNSUPPORTED_DTYPE, "out must have", lambda: ops.w8_linear_out(x, w, s, None,
                                                                                      out=torch.empty(2, 3))),
            (Status.ERR_BAD_SIZE, "out must have", lambda: ops.w8_linear_out(x, w, s, None,
                                                                             out=torch.empty(2, 4, dtype=x.dtype))),
        ]
        assert_fails_with(self, cases)


def op_calls(device):
    """(op, its tensor arguments by name, its other arguments) of every op, all on device."""
    fp8 = torch.float8_e4m3fn
    x = torch.ones(8, 16, dtype=torch.bfloat16, device=device)
    w = torch.ones(4, 16, dtype=torch.int8, device=device)
    sc = torch.ones(4, dtype=torch.bfloat16, device=device)

    def f32():
        return torch.ones(1, device=device)

    rows, cols = torch.empty(8, 16, dtype=fp8, device=device), torch.empty(16, 8, dtype=fp8, device=device).t()
    return [
        (ops.cast_transpose_fp8, {"x": x, "scale": f32()}, {"dtype": fp8}),
        (ops.cast_transpose_fp8_amax, {"x": x, "scale": f32()}, {"dtype": fp8}),
        (ops.cast_transpose_fp8_out, {"x": x, "scale": f32(), "rows": rows, "cols": cols, "amax": f32(),
                                      "scale_inv": f32()}, {}),
        (ops.cast_transpose_fp8_current_scaling, {"x": x}, {"dtype": fp8}),
        (ops.abs_max, {"x": x}, {}),
        (ops.quantize_fp8, {"x": x}, {"recipe": schedx.Recipe.BLOCK_1X128, "dtype": fp8}),
        (ops.w8_linear, {"x": x, "w": w, "scales": sc, "bias": sc.clone()}, {}),
        (ops.w8_linear_out, {"x": x, "w": w, "scales": sc, "bias": sc.clone(),
                             "out": torch.empty(8, 4, dtype=torch.bfloat16, device=device)}, {}),
    ]


@needs_torch
class DeviceTest(unittest.TestCase):
    """Every tensor of a call is on x's device; a meta tensor beside real ones (a buffer
    missed by load_state_dict(assign=True)) raises as torch's ops do, never returns
    uninitialised outputs, and an all-meta call gives meta outputs (its fake)."""

    def check_moved(self, device, other):
        for op, tensors, rest in op_calls(device):
            for name in tensors if len(tensors) > 1 else ():  # one tensor is on one device
                moved = dict(tensors, **{name: tensors[name].to(other)})
                expected, got = (other, device) if name == "x" else (device, other)
                with self.subTest(op=op.__name__, moved=name, to=other):
                    with self.assertRaises(RuntimeError) as cm:
                        op(**moved, **rest)
                    msg = str(cm.exception)
                    self.assertIn("schedx ERR_POINTER_DEVICE: ", msg)
                    self.assertIn(f"Tensor on device {torch.device(got)} is not on the expected device "
                                  f"{torch.device(expected)}!", msg)
                    if name != "x":
                        self.assertIn(f"{name}: Tensor on device", msg)

    def test_a_meta_tensor_among_cpu_ones_raises(self):
        self.check_moved("cpu", "meta")

    @unittest.skipUnless(torch is not None and torch.cuda.is_available(), "needs a CUDA device")
    def test_a_cpu_tensor_among_cuda_ones_raises(self):
        self.check_moved("cuda:0", "cpu")

    def test_refused_out_call_writes_nothing(self):
        x = torch.ones(8, 16, dtype=torch.bfloat16)
        rows_buf, rows = poisoned((8, 16), torch.float8_e4m3fn, "cpu")
        with self.assertRaises(RuntimeError):
            ops.cast_transpose_fp8_out(x, torch.ones(1, device="meta"), rows=rows, cols=None)
        self.assertTrue(bool((rows_buf.view(torch.uint8) == 0x5A).all()))

    def test_all_meta_gives_meta_outputs(self):
        cpu_calls = op_calls("cpu")
        for (op, tensors, rest), (_, cpu_tensors, _) in zip(op_calls("meta"), cpu_calls):
            with self.subTest(op=op.__name__):
                got = op(**tensors, **rest)
                want = op(**cpu_tensors, **rest)
                for g, w_ in zip(got if isinstance(got, tuple) else (got,), want if isinstance(want, tuple) else (want,)):
                    if g is None:
                        continue
                    self.assertEqual((g.device.type, g.shape, g.stride(), g.dtype), ("meta", w_.shape, w_.stride(),
                                                                                     w_.dtype))

    def test_python_api_refuses_other_devices(self):
        import schedx.quantize as q
        assert_fails_with(self, [(Status.ERR_BAD_DEVICE, "device meta", lambda: q.quantize_fp8(
            torch.ones(8, 16, device="meta")))])


def w8_reference(x, w, scales, bias):
    """gpt-fast's formulation, autograd's own derivative: F.linear(x, w.to(x.dtype)) * scales + bias."""
    y = torch.nn.functional.linear(x, w.to(x.dtype)) * scales
    return y if bias is None else y + bias


@needs_torch
class AutogradTest(unittest.TestCase):
    """w8_linear's dgrad (and bias grad) against autograd through gpt-fast's formulation;
    the ops with no derivative raise when an input requires grad where grad is enabled."""

    def dgrad_cases(self, device):
        g = torch.Generator().manual_seed(7)
        for xdt, sdt, shape in ((torch.bfloat16, torch.bfloat16, (5, 48)), (torch.float16, torch.float32, (2, 3, 48)),
                                (torch.bfloat16, torch.float32, (1, 48))):
            x = torch.randn(shape, generator=g).to(xdt).to(device)
            w = torch.randint(-128, 128, (24, 48), generator=g, dtype=torch.int8).to(device)
            s = (torch.rand(24, generator=g) / 64).to(sdt).to(device)
            b = torch.randn(24, generator=g).to(sdt).to(device)
            grad = torch.randn(shape[:-1] + (24,), generator=g).to(xdt).to(device)
            yield x, w, s, b, grad

    def grads(self, fn, x, w, s, b, grad, with_bias):
        x = x.clone().requires_grad_()
        b = b.clone().requires_grad_() if with_bias else None
        y = fn(x, w, s, b)
        y.backward(grad.to(y.dtype))
        return x.grad, None if b is None else b.grad

    def check(self, fn, exact):
        for device in DEVICES:
            for x, w, s, b, grad in self.dgrad_cases(device):
                for with_bias in (False, True):
                    with self.subTest(device=device, x=x.dtype, scales=s.dtype, shape=tuple(x.shape), bias=with_bias):
                        gx, gb = self.grads(fn, x, w, s, b, grad, with_bias)
                        want_x, want_b = self.grads(w8_reference, x, w, s, b, grad, with_bias)
                        self.assertEqual((gx.dtype, gx.shape), (x.dtype, x.shape))
                        if exact:
                            self.assertTrue(torch.equal(gx, want_x))
                        else:
                            torch.testing.assert_close(gx, want_x)
                        if with_bias:
                            self.assertEqual(gb.dtype, b.dtype)
                            torch.testing.assert_close(gb, want_b, rtol=1e-2, atol=1e-2)

    def test_dgrad_eager(self):
        self.check(lambda x, w, s, b: ops.w8_linear(x, w, s, b), exact=True)

    def test_dgrad_compiled(self):
        torch._dynamo.reset()
        self.check(torch.compile(lambda x, w, s, b: ops.w8_linear(x, w, s, b), fullgraph=True), exact=False)

    def test_module_passes_grad_to_x(self):
        # A LoRA on an int8 base model: the frozen int8 linear passes dgrad through.
        lin = torch.nn.Linear(32, 16, dtype=torch.bfloat16)
        q = snn.Int8WeightOnlyLinear.from_linear(lin)
        x = torch.randn(4, 32, dtype=torch.bfloat16, requires_grad=True)
        q(x).sum().backward()
        want = (torch.ones(4, 16, dtype=torch.bfloat16) * q.scales) @ q.weight.to(torch.bfloat16)
        self.assertTrue(torch.equal(x.grad, want))

    def test_modules_skip_the_autograd_kernel_without_grad(self):
        """schedx.nn's modules call below_autograd unless autograd must see the call: the same
        results, without the Python Autograd kernel's host time."""
        from torch.utils._python_dispatch import TorchDispatchMode

        class Overloads(TorchDispatchMode):
            def __init__(self):
                super().__init__()
                self.seen = []

            def __torch_dispatch__(self, func, types, args=(), kwargs=None):
                if func.namespace == "schedx":
                    self.seen.append(func._overloadname)
                return func(*args, **(kwargs or {}))

        lin = torch.nn.Linear(64, 16, dtype=torch.bfloat16)
        for module in (snn.Int8WeightOnlyLinear.from_linear(lin), snn.Int4WeightOnlyLinear.from_linear(lin, 32)):
            x = torch.randn(3, 64, dtype=torch.bfloat16)
            want = module(x.requires_grad_()) if isinstance(module, snn.Int8WeightOnlyLinear) else None
            for grad, needs, overload in ((True, False, "below_autograd"), (False, True, "below_autograd"),
                                          (True, True, "default")):
                if overload == "default" and want is None:
                    continue  # w4_linear has no derivative: its default overload refuses the call
                with self.subTest(module=type(module).__name__, grad_enabled=grad, x_requires_grad=needs):
                    with torch.set_grad_enabled(grad), Overloads() as mode:
                        y = module(x.detach().requires_grad_(needs))
                    self.assertEqual(mode.seen, [overload])
                    if want is not None:
                        self.assertTrue(torch.equal(y, want))
                        self.assertEqual(y.requires_grad, grad and needs)

    def test_scales_and_no_derivative_ops_refuse_grad(self):
        x = torch.ones(8, 16, dtype=torch.bfloat16)
        w = torch.ones(4, 16, dtype=torch.int8)
        with self.assertRaisesRegex(RuntimeError, "no derivative for scales"):
            ops.w8_linear(x, w, torch.ones(4, requires_grad=True))
        for op, tensors, rest in op_calls("cpu"):
            if op is ops.w8_linear:
                continue
            for name, t in tensors.items():
                if not t.is_floating_point() or t.dtype.itemsize == 1:
                    continue  # only floating-point dtypes other than fp8 can require grad here
                needing = dict(tensors, **{name: t.clone().requires_grad_()})
                with self.subTest(op=op.__name__, requires_grad=name):
                    with self.assertRaisesRegex(RuntimeError, f"schedx::{op.__name__} has no derivative, and "
                                                              f"{name} requires grad"):
                        op(**needing, **rest)
                    with torch.no_grad():
                        op(**needing, **rest)  # no grad is asked for: it runs

    def test_opcheck_with_grad(self):
        for device in DEVICES:
            x = torch.randn(6, 32, dtype=torch.bfloat16, device=device, requires_grad=True)
            w = torch.randint(-128, 128, (16, 32), dtype=torch.int8, device=device)
            s = (torch.rand(16, device=device) / 32).to(torch.bfloat16)
            opcheck(ops.w8_linear.default, (x, w, s, s.clone().requires_grad_()))


@needs_torch
class RegistrationTest(unittest.TestCase):
    """opcheck: schema, fake (meta) implementation, autograd registration, dynamic shapes."""

    def test_kernels_are_the_ones_asked_for(self):
        want = os.environ.get("SCHEDX_TORCH_KERNELS")
        if not want:
            self.skipTest("SCHEDX_TORCH_KERNELS is not set: either kernel may serve")
        self.assertEqual(schedx.ops.kernels, want)

    def test_opcheck(self):
        for device in DEVICES:
            base = (torch.randn(48, 72) * 10).to(torch.bfloat16).to(device)
            s = torch.tensor([2.0], device=device)
            w = torch.randint(-128, 128, (40, 64), dtype=torch.int8).to(device)
            sc = (torch.rand(40) / 32).to(torch.bfloat16).to(device)
            for layout, x in (("contiguous", base[:, :64].contiguous()), ("strided", base[:, :64]),
                              ("transposed", base[:, :64].t().contiguous().t())):
                with self.subTest(device=device, layout=layout):
                    opcheck(ops.cast_transpose_fp8.default, (x, s, torch.float8_e4m3fn))
                    opcheck(ops.cast_transpose_fp8.default, (x, s, torch.float8_e5m2), {"divide": True})
                    opcheck(ops.cast_transpose_fp8_amax.default, (x, s, torch.float8_e5m2))
                    opcheck(ops.abs_max.default, (x,))
                    opcheck(ops.cast_transpose_fp8_current_scaling.default, (x, torch.float8_e5m2, True))
                    opcheck(ops.w8_linear.default, (x, w, sc))
                    opcheck(ops.w8_linear.default, (x.reshape(2, 24, 64), w, sc, sc))
                    opcheck(ops.w8_linear_out.default, (x, w, sc, None), {"out": torch.empty(48, 40, dtype=x.dtype,
                                                                                             device=device)})
                    # test_schema compares mutated fp8 tensors with allclose, which torch lacks for fp8.
                    opcheck(ops.cast_transpose_fp8_out.default, (x, s),
                            {"rows": torch.empty(48, 64, dtype=torch.float8_e4m3fn, device=device),
                             "cols": torch.empty(64, 48, dtype=torch.float8_e4m3fn, device=device).t()},
                            test_utils=("test_faketensor", "test_autograd_registration", "test_aot_dispatch_dynamic"))
                    opcheck(ops.cast_transpose_fp8_out.default, (x, s),
                            {"rows": torch.empty(48, 64, dtype=torch.float8_e5m2, device=device), "cols": None,
                             "divide": True},
                            test_utils=("test_faketensor", "test_autograd_registration", "test_aot_dispatch_dynamic"))

    def test_convention_table_is_the_code(self):
        doc_path = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "docs", "pytorch.md")
        with open(doc_path, encoding="utf-8") as f:
            rows = {r.split("|")[1].strip(): r for r in f.read().splitlines() if r.startswith("| ")}
        documented = re.findall(r"`([a-z0-9_]+\(.*?\) -> .*?)`(?:;|\s*\|)", rows["schemas"])
        registered = [str(getattr(ops, n).default._schema).removeprefix("schedx::")
                      for n in ("cast_transpose_fp8", "cast_transpose_fp8_amax", "cast_transpose_fp8_out",
                                "cast_transpose_fp8_current_scaling", "abs_max", "w8_linear", "w8_linear_out",
                                "quantize_fp8")]
        self.assertEqual(documented, registered)
        for enum_cls in (schedx.Recipe, schedx.MxScaleMode, snn.Scaling):
            listed = re.search(rf"`schedx\.(?:nn\.)?{enum_cls.__name__}`: ((?:`\w+`(?:, )?)+)", rows["recipe names"])
            self.assertEqual(re.findall(r"`(\w+)`", listed.group(1)), [m.value for m in enum_cls])
        self.assertEqual(re.findall(r"`(\w+)`", rows["fp8 format"].split("schedx.Fp8Format")[1]),
                         [m.value for m in schedx.Fp8Format])

    def test_compile_fullgraph_equals_eager(self):
        def f(x, s, w, sc):
            rows, cols, amax, inv = ops.cast_transpose_fp8_amax(x * 2, s, torch.float8_e4m3fn)
            y = ops.w8_linear(torch.relu(x), w, sc)
            current = ops.cast_transpose_fp8_current_scaling(y, torch.float8_e5m2)
            return rows, cols, amax * inv, y + 1, ops.abs_max(y), *current

        compiled = torch.compile(f, fullgraph=True)
        for device in DEVICES:
            x = (torch.randn(32, 64) * 10).to(torch.bfloat16).to(device)
            args = (x, torch.tensor([3.0], device=device), torch.randint(-128, 128, (24, 64), dtype=torch.int8,
                                                                         device=device),
                    (torch.rand(24) / 32).to(torch.bfloat16).to(device))
            for got, want in zip(compiled(*args), f(*args)):
                self.assertEqual((got.shape, got.stride(), got.dtype), (want.shape, want.stride(), want.dtype))
                self.assertTrue(torch.equal(bits(got), bits(want)))

    @unittest.skipUnless(torch is not None and torch.cuda.is_available(), "needs a CUDA device")
    def test_reduce_overhead_equals_eager(self):
        def f(x, s, w, sc):
            rows, cols = ops.cast_transpose_fp8(x, s, torch.float8_e5m2)
            return rows, cols, ops.w8_linear(x[:4] * 2, w, sc)

        compiled = torch.compile(f, mode="reduce-overhead", fullgraph=True)
        w = torch.randint(-128, 128, (64, 128), dtype=torch.int8, device="cuda")
        sc = (torch.rand(64, device="cuda") / 32).to(torch.bfloat16)
        s = torch.tensor([3.0], device="cuda")
        for i in range(4):  # warm-up, recording, replays on new values
            x = (torch.randn(32, 128, device="cuda") * (i + 1)).to(torch.bfloat16)
            got, want = compiled(x, s, w, sc), f(x, s, w, sc)
            for g_, w_ in zip(got, want):
                self.assertEqual((g_.shape, g_.stride()), (w_.shape, w_.stride()))
                self.assertTrue(torch.equal(bits(g_), bits(w_)))

    @unittest.skipUnless(torch is not None and torch.cuda.is_available(), "needs a CUDA device")
    def test_cuda_graph_capture(self):
        x = (torch.randn(64, 128, device="cuda") * 10).to(torch.bfloat16)
        s = torch.tensor([2.0], device="cuda")
        w = torch.randint(-128, 128, (96, 128), dtype=torch.int8, device="cuda")
        sc = (torch.rand(96, device="cuda") / 32).to(torch.bfloat16)
        # Ragged: 1040 x 272 runs whole tiles and its shifted tiles on a side stream, which
        # the capture must take in; K = 1001 runs w8_linear's element-I/O kernel.
        ragged = (torch.randn(1040, 272, device="cuda") * 10).to(torch.bfloat16)
        x_odd = torch.randn(1, 1001, device="cuda").to(torch.bfloat16)
        w_odd = torch.randint(-128, 128, (96, 1001), dtype=torch.int8, device="cuda")

        def step():
            return (ops.cast_transpose_fp8_amax(x, s, torch.float8_e4m3fn)
                    + ops.cast_transpose_fp8_current_scaling(x, torch.float8_e4m3fn)
                    + ops.cast_transpose_fp8_amax(ragged, s, torch.float8_e4m3fn)
                    + (ops.w8_linear(x[:1], w, sc), ops.w8_linear(x_odd, w_odd, sc)))

        step()  # warm: modules loaded, scratch and side stream made
        torch.cuda.synchronize()
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            out = step()
        for t, scale in ((x, 5), (ragged, 3), (x_odd, 2)):
            t.copy_((torch.randn(t.shape, device="cuda") * scale).to(torch.bfloat16))
        graph.replay()
        torch.cuda.synchronize()
        for got, ref in zip(out, step()):
            self.assertTrue(torch.equal(bits(got), bits(ref)))


def gpt_fast_quantize(w):
    """gpt-fast's dynamically_quantize_per_channel(w.float(), -128, 127, torch.int8),
    scales then cast to the weight's dtype, as WeightOnlyInt8QuantHandler does."""
    x = w.float()
    min_val, max_val = torch.aminmax(x, dim=1)
    min_neg = torch.min(min_val, torch.zeros_like(min_val))
    max_pos = torch.max(max_val, torch.zeros_like(max_val))
    scales = torch.max(-min_neg, max_pos) / (float(127 - (-128)) / 2)
    scales = torch.clamp(scales, min=torch.finfo(torch.float32).eps)
    q = torch.clamp(torch.round(x / scales.unsqueeze(-1)), -128, 127).to(torch.int8)
    return q, scales.to(w.dtype)


@needs_torch
class Int8WeightOnlyLinearTest(unittest.TestCase):
    def test_quantizes_as_gpt_fast(self):
        lin = torch.nn.Linear(96, 40, dtype=torch.bfloat16)
        with torch.no_grad():
            lin.weight[3] = 0  # an all-zero row: the epsilon clamp
        q = snn.Int8WeightOnlyLinear.from_linear(lin)
        want_q, want_s = gpt_fast_quantize(lin.weight)
        self.assertTrue(torch.equal(q.weight, want_q))
        self.assertTrue(torch.equal(q.scales, want_s))
        self.assertTrue(torch.equal(q.bias, lin.bias))
        for device in DEVICES:
            q = q.to(device)
            x = torch.randn(2, 5, 96, dtype=torch.bfloat16, device=device)
            ref = (x.double() @ want_q.to(device).double().t()) * want_s.to(device).double() + lin.bias.to(device).double()
            torch.testing.assert_close(q(x).double(), ref, rtol=1e-2, atol=1e-5 * ref.abs().max().item())

    def test_convert_with_filter(self):
        model = torch.nn.Sequential(torch.nn.Linear(32, 64, dtype=torch.bfloat16), torch.nn.GELU(),
                                    torch.nn.Sequential(torch.nn.Linear(64, 16, dtype=torch.bfloat16)))
        seen = []
        snn.convert_to_int8_weight_only(model, lambda mod, fqn: seen.append(fqn) or fqn != "0")
        self.assertEqual(seen, ["0", "2.0"])
        self.assertIs(type(model[0]), torch.nn.Linear)
        self.assertIs(type(model[2][0]), snn.Int8WeightOnlyLinear)

    def test_fp16_model_converts(self):
        lin = torch.nn.Linear(64, 40, dtype=torch.float16)
        with torch.no_grad():
            lin.weight[5] = 0
        model = torch.nn.Sequential(lin)
        snn.convert_to_int8_weight_only(model)
        q = model[0]
        want_q, want_s = gpt_fast_quantize(lin.weight)
        # The fp16-rounded scales are kept exactly in fp32, the dtype the kernels take.
        self.assertEqual((q.scales.dtype, q.bias.dtype), (torch.float32, torch.float32))
        self.assertTrue(torch.equal(q.weight, want_q))
        self.assertTrue(torch.equal(q.scales, want_s.float()))
        self.assertTrue(torch.equal(q.bias, lin.bias.float()))
        for device in DEVICES:
            q = q.to(device)
            x = torch.randn(3, 64, dtype=torch.float16, device=device)
            y = q(x)
            ref = ((x.double() @ want_q.to(device).double().t()) * want_s.to(device).double() +
                   lin.bias.to(device).double())
            self.assertEqual(y.dtype, torch.float16)
            torch.testing.assert_close(y.double(), ref, rtol=1e-2, atol=1e-5 * ref.abs().max().item())

    def test_fp32_linears_stay_with_a_warning_and_the_rest_is_logged(self):
        model = torch.nn.Sequential(torch.nn.Linear(16, 16, dtype=torch.bfloat16), torch.nn.Linear(16, 16),
                                    torch.nn.Sequential(torch.nn.Linear(16, 8, dtype=torch.float16)))
        with warnings.catch_warnings(record=True) as caught, self.assertLogs("schedx.nn", logging.INFO) as logs:
            warnings.simplefilter("always")
            self.assertIs(snn.convert_to_int8_weight_only(model), model)
        self.assertEqual([str(w.message).split(":")[0] for w in caught], ["1 stays torch.nn.Linear"])
        self.assertIn("torch.float32", str(caught[0].message))
        self.assertEqual(caught[0].filename, __file__)  # the warning points at the caller
        self.assertIn("replaced 2 linear(s) of Sequential: 0, 2.0", logs.output[0])
        self.assertEqual([type(m) for m in (model[0], model[1], model[2][0])],
                         [snn.Int8WeightOnlyLinear, torch.nn.Linear, snn.Int8WeightOnlyLinear])
        with self.assertRaisesRegex(ValueError, "bf16 or fp16"):
            snn.Int8WeightOnlyLinear.from_linear(torch.nn.Linear(4, 4))

    def test_convert_is_all_or_nothing(self):
        model = torch.nn.Sequential(torch.nn.Linear(16, 16, dtype=torch.bfloat16),
                                    torch.nn.Linear(16, 16, dtype=torch.bfloat16))

        def filter_fn(mod, fqn):
            if fqn == "1":
                raise KeyError("the second linear's filter fails")
            return True

        with self.assertRaises(KeyError):
            snn.convert_to_int8_weight_only(model, filter_fn)
        self.assertEqual([type(m) for m in model], [torch.nn.Linear, torch.nn.Linear])


def torchao_scale(t, dtype, pow2):
    """torchao's tensorwise scale of t: fp32(max / max(amax, 1e-12)) in fp64, optionally
    2^floor(log2); shape (1,)."""
    amax = t.abs().max().to(torch.float64)
    s = (torch.finfo(dtype).max / torch.clamp(amax, min=1e-12)).to(torch.float32).reshape(1)
    return torch.exp2(torch.floor(torch.log2(s))) if pow2 else s


def torchao_tensorwise_reference(x, w, grad, fwd_dtype, grad_dtype, pow2):
    """torchao's tensorwise float8 linear, transcribed: scale = fp32(max / max(amax, 1e-12))
    in fp64 (optionally 2^floor(log2)), casts by clamp + .to(), torch._scaled_mm with
    the reciprocal scales; fast accumulation for the output only."""
    def cast(t, dtype):
        s = torchao_scale(t, dtype, pow2)
        fmax = torch.finfo(dtype).max
        return torch.clamp(t.float() * s, -fmax, fmax).to(dtype), s.reciprocal().reshape(1)

    xq, xi = cast(x, fwd_dtype)
    wq, wi = cast(w, fwd_dtype)
    gq, gi = cast(grad, grad_dtype)
    y = torch._scaled_mm(xq, wq.t(), scale_a=xi, scale_b=wi, out_dtype=x.dtype, use_fast_accum=True)
    gx = torch._scaled_mm(gq, wq.t().contiguous().t(), scale_a=gi, scale_b=wi, out_dtype=x.dtype)
    gw = torch._scaled_mm(gq.t().contiguous(), xq.t().contiguous().t(), scale_a=gi, scale_b=xi, out_dtype=x.dtype)
    return y, gx, gw


@needs_torch
class ExportTest(unittest.TestCase):
    """A model converted to schedx.nn, exported (dynamic M) and packaged by AOTInductor, then
    loaded in a fresh process that imports schedx.ops first, as a deployment does: the packaged
    graph calls torch.ops.schedx through the dispatcher and gives eager's results bit for bit."""

    def test_aoti_package_in_a_fresh_process(self):
        import subprocess
        import sys

        torch.manual_seed(3)
        model = torch.nn.Sequential(torch.nn.Linear(64, 64), torch.nn.ReLU(), torch.nn.Linear(64, 32, bias=False),
                                    torch.nn.ReLU(), torch.nn.Linear(32, 16)).to(torch.bfloat16)
        snn.convert_to_int8_weight_only(model, module_filter_fn=lambda m, name: name != "2")
        model[2] = snn.Int4WeightOnlyLinear.from_linear(model[2], 32, symmetric=False)
        xs = [torch.randn(m, 64, dtype=torch.bfloat16) for m in (4, 1, 7)]
        with torch.no_grad():
            want = [model(x) for x in xs]
            program = torch.export.export(model, (xs[0],),
                                          dynamic_shapes=({0: torch.export.Dim("m", min=1, max=1024)},))
        self.assertEqual(sorted({str(n.target) for n in program.graph.nodes if "schedx" in str(n.target)}),
                         ["schedx.w4_linear.below_autograd", "schedx.w8_linear.below_autograd"])
        with tempfile.TemporaryDirectory() as tmp:
            path = torch._inductor.aoti_compile_and_package(program, package_path=os.path.join(tmp, "m.pt2"))
            torch.save({"xs": xs, "want": want}, os.path.join(tmp, "io.pt"))
            script = ("import sys, torch, schedx.ops\n"
                      "io = torch.load(sys.argv[2])\n"
                      "model = torch._inductor.aoti_load_package(sys.argv[1])\n"
                      "ok = [torch.equal(model(x), y) for x, y in zip(io['xs'], io['want'])]\n"
                      "print(ok)\n"
                      "sys.exit(0 if all(ok) else 1)\n")
            run = subprocess.run([sys.executable, "-c", script, path, os.path.join(tmp, "io.pt")],
                                 capture_output=True, text=True, env=dict(os.environ), timeout=300)
            self.assertEqual(run.returncode, 0, run.stdout + run.stderr[-2000:])


@needs_torch
class Float8LinearTest(unittest.TestCase):
    def run_step(self, module, x, grad, weight=None):
        x = x.clone().requires_grad_()
        y = module(x)
        y.backward(grad)
        return y.detach(), x.grad, (module.weight if weight is None else weight).grad

    def test_current_scaling_matches_torchao_math(self):
        for device in DEVICES:
            for grad_dtype in FP8:
                for pow2 in (False, True):
                    torch.manual_seed(3)
                    lin = torch.nn.Linear(64, 48, bias=False, dtype=torch.bfloat16, device=device)
                    x = (torch.randn(32, 64, device=device) * 3).to(torch.bfloat16)
                    grad = (torch.randn(32, 48, device=device) / 100).to(torch.bfloat16)
                    cfg = snn.Float8LinearConfig(grad_dtype=grad_dtype, round_scales_to_power_of_2=pow2)
                    m = snn.Float8Linear.from_float(lin, cfg)
                    with self.subTest(device=device, grad=grad_dtype, pow2=pow2):
                        got = self.run_step(m, x, grad)
                        want = torchao_tensorwise_reference(x, lin.weight.detach(), grad, torch.float8_e4m3fn,
                                                            grad_dtype, pow2)
                        for g_, w_ in zip(got, want):
                            self.assertTrue(torch.equal(g_, w_))

    def test_delayed_scaling_uses_history(self):
        for device in DEVICES:
            torch.manual_seed(4)
            lin = torch.nn.Linear(64, 32, bias=True, dtype=torch.bfloat16, device=device)
            m = snn.Float8Linear.from_float(lin, snn.Float8LinearConfig(scaling="delayed", amax_history_len=4))
            amaxes = []
            for step in range(3):
                x = (torch.randn(16, 64, device=device) * (step + 1)).to(torch.bfloat16)
                y = m(x)
                y.sum().backward()
                amaxes.append(x.float().abs().max())
                with self.subTest(device=device, step=step):
                    hist = m.delayed.history_input
                    self.assertEqual(hist[:step + 1].tolist(), [a.item() for a in reversed(amaxes)])
                    want = snn.amax_to_scale(torch.stack(amaxes).max().reshape(1), torch.float8_e4m3fn)
                    self.assertTrue(torch.equal(m.delayed.scale_input, want))
                    self.assertGreater(m.delayed.history_grad_output[0].item(), 0)
            # The step's output came from the scale of the history before it.
            self.assertEqual(y.shape, (16, 32))

    @unittest.skipUnless(torch is not None and torch.cuda.is_available(), "needs a CUDA device")
    def test_step_makes_no_host_sync(self):
        # torch's sync debug mode raises on a synchronizing call torch makes (a copy to the
        # host, .item(), a blocking allocation), here inside forward and backward of both scalings.
        for scaling in ("current", "delayed"):
            lin = torch.nn.Linear(64, 48, bias=True, dtype=torch.bfloat16, device="cuda")
            m = snn.Float8Linear.from_float(lin, snn.Float8LinearConfig(scaling=scaling))
            x = (torch.randn(32, 64, device="cuda") * 3).to(torch.bfloat16)
            self.run_step(m, x, torch.ones(32, 48, dtype=torch.bfloat16, device="cuda"))  # warm: modules loaded
            torch.cuda.synchronize()
            with self.subTest(scaling=scaling):
                torch.cuda.set_sync_debug_mode("error")
                try:
                    self.run_step(m, x, torch.ones(32, 48, dtype=torch.bfloat16, device="cuda"))
                finally:
                    torch.cuda.set_sync_debug_mode("default")

    def test_compiled_equals_eager(self):
        device = DEVICES[-1]
        lin = torch.nn.Linear(64, 48, dtype=torch.bfloat16, device=device)
        eager = snn.convert_to_float8_training(torch.nn.Sequential(lin))
        compiled = torch.compile(eager, fullgraph=True)
        x = (torch.randn(32, 64, device=device) * 3).to(torch.bfloat16)
        grad = (torch.randn(32, 48, device=device) / 100).to(torch.bfloat16)
        want = self.run_step(eager, x, grad, lin.weight)
        lin.weight.grad = None
        got = self.run_step(compiled, x, grad, lin.weight)
        for g_, w_ in zip(got, want):
            self.assertTrue(torch.equal(g_, w_))

    def test_config_errors(self):
        with self.assertRaises(ValueError):
            snn.Float8LinearConfig(scaling="dynamic")
        with self.assertRaises(ValueError):
            snn.Float8LinearConfig(forward_dtype=torch.float8_e5m2)


def ref_block1x128_rows(x, dtype):
    """TransformerEngine's 1 x 128 rule for rows, transcribed for finite data: per block
    s = fp8_max / amax (1 where amax = 0) rounded down to a power of two by masking the
    mantissa, q = fp8(x * s), scale_inv = 1 / s in [ceil(K/128), pad4(M)]."""
    m, k = x.shape
    fmax = torch.finfo(dtype).max
    xf = x.float()
    kb = (k + 127) // 128
    padded = torch.zeros(m, kb * 128)
    padded[:, :k] = xf.abs()
    amax = padded.view(m, kb, 128).amax(-1)
    s = torch.where(amax > 0, fmax / amax, torch.ones_like(amax))
    s = (s.view(torch.int32) & 0x7F800000).view(torch.float32)
    q = torch.clamp(xf * s.repeat_interleave(128, dim=1)[:, :k], -fmax, fmax).to(dtype)
    inv = torch.zeros(kb, (m + 3) // 4 * 4)
    inv[:, :m] = (1 / s).t()
    return q, inv


@needs_torch
class QuantizeOpTest(unittest.TestCase):
    def test_block1x128_against_te_rule(self):
        # cols [K, M] is x.t() quantized in 1 x 128 blocks along M: the rows rule on x.t().
        for device in DEVICES:
            x = (torch.randn(70, 300) * 5).to(torch.bfloat16).to(device)
            for dtype in FP8:
                with self.subTest(device=device, fp8=dtype):
                    rows, rows_scale, cols, cols_scale = ops.quantize_fp8(x, "block1x128", dtype)
                    q, inv = ref_block1x128_rows(x.cpu(), dtype)
                    self.assertTrue(torch.equal(bits(rows.cpu()), bits(q)))
                    self.assertTrue(torch.equal(rows_scale.cpu(), inv))
                    self.assertEqual((cols.shape, cols.stride()), ((300, 70), (70, 1)))
                    qc, invc = ref_block1x128_rows(x.cpu().t().contiguous(), dtype)
                    self.assertTrue(torch.equal(bits(cols.cpu()), bits(qc)))
                    self.assertTrue(torch.equal(cols_scale.cpu(), invc))

    def test_every_recipe_marshals_as_the_numpy_path(self):
        # Shapes, strides and bytes of the op's four outputs against the ctypes path's (the
        # numbers themselves: test_python_quantize.py and the C++ tests).
        import ml_dtypes
        import numpy as np
        import schedx.quantize as q
        x = (torch.randn(33, 130) * 3).to(torch.bfloat16)
        xn = x.view(torch.int16).numpy().view(ml_dtypes.bfloat16)
        for recipe in q.RECIPES:
            for dtype, fmt in zip(FP8, ("e4m3fn", "e5m2")):
                with self.subTest(recipe=recipe, fmt=fmt):
                    got = ops.quantize_fp8(x, recipe, dtype, False, 0.0, "floor")
                    want = q.quantize_fp8(xn, recipe, fmt, pow2_scales=False, mx_mode="floor")
                    for g, w in zip(got, want):
                        self.assertEqual(tuple(g.shape), w.shape)
                        self.assertTrue(np.array_equal(g.contiguous().view(torch.uint8).numpy().view(np.uint8),
                                                       w.view(np.uint8)))

    def test_errors(self):
        x = torch.ones(8, 64, dtype=torch.bfloat16)
        fp8 = torch.float8_e4m3fn
        assert_fails_with(self, [
            (Status.ERR_UNSUPPORTED_FORMAT, "block1x128", lambda: ops.quantize_fp8(x, "block1x64", fp8)),
            (Status.ERR_UNSUPPORTED_FORMAT, "rceil", lambda: ops.quantize_fp8(x, "mxfp8", fp8, True, 0.0, "even")),
            (Status.ERR_UNSUPPORTED_FORMAT, "float8_e4m3fn or float8_e5m2",
             lambda: ops.quantize_fp8(x, "mxfp8", torch.float16)),
            (Status.ERR_UNSUPPORTED_DTYPE, "torch.int8", lambda: ops.quantize_fp8(x.to(torch.int8), "mxfp8", fp8)),
            (Status.ERR_BAD_SIZE, "2-D", lambda: ops.quantize_fp8(x.reshape(2, 4, 64), "mxfp8", fp8)),
        ])
        # Empty x: empty outputs, scale arrays of the shape the recipe gives an empty input;
        # axiswise's column scales exist and hold torchao's scale of amax 0 (clamped to 1e-12).
        for device in DEVICES:
            out = ops.quantize_fp8(x[:0].to(device), "block1x128", fp8)
            self.assertEqual([tuple(t.shape) for t in out], [(0, 64), (1, 0), (64, 0), (0, 64)])
            out = ops.quantize_fp8(x[:0].to(device), "axiswise", fp8)
            self.assertEqual([tuple(t.shape) for t in out], [(0, 64), (0, 1), (64, 0), (1, 64)])
            want = torch.exp2(torch.floor(torch.log2(torch.tensor(448.0 / 1e-12, dtype=torch.float32))))
            self.assertTrue(bool((out[3].cpu() == want).all()))

    def test_opcheck_and_fake_shapes(self):
        import schedx.quantize as q
        for device in DEVICES:
            base = (torch.randn(40, 200) * 3).to(torch.bfloat16).to(device)
            for recipe in q.RECIPES:
                with self.subTest(device=device, recipe=recipe):
                    opcheck(ops.quantize_fp8.default, (base[:, :130], recipe, torch.float8_e4m3fn))
        for recipe in q.RECIPES:
            for m, k in ((1, 1), (33, 130), (129, 257), (500, 64)):
                for columnwise in (False, True):
                    self.assertEqual(tuple(schedx.ops.quantize_scale_shape(recipe, m, k, columnwise)),
                                     q.scale_shape(recipe, m, k, columnwise))


if __name__ == "__main__":
    if torch is None:
        print("torch is not installed: skipping the torch operator tests")
        raise SystemExit(77)
    unittest.main()
