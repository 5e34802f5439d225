"""schedx.inductor: unchanged programs compiled with the pass against the same programs run
eagerly (casts bit for bit with their strides; the int8 linear within schedx's tolerance of
an fp64 reference), unsupported spellings left to Inductor and still correct, the graph
cache key, chaining with a user's pass, the report. CPU tensors (and CUDA where present).
Where torch is not installed it exits 77 (skipped); torchao's patterns skip without torchao.
"""

import functools
import logging
import os
import sys
import tempfile
import unittest
import unittest.mock

os.environ["SCHEDX_TUNING_DB"] = os.path.join(tempfile.gettempdir(), f"schedx-test-{os.getpid()}", "none.jsonl")
# A cache of this run's own: the cache-key test needs to know what it holds.
os.environ["TORCHINDUCTOR_CACHE_DIR"] = tempfile.mkdtemp(prefix="schedx-inductor-")

try:
    import torch
    import torch.nn.functional as F
except ImportError:
    torch = None

if torch is not None:
    from torch._inductor.custom_graph_pass import CustomGraphPass
    from torch._inductor.utils import run_and_get_code

    import schedx.int4
    import schedx.inductor as si
    from schedx.inductor import Pattern

    try:
        import torchao  # noqa: F401
    except ImportError:
        torchao = None

    DEVICE = "cuda" if torch.cuda.is_available() else "cpu"
    # A graph served from the FX graph cache or AOTAutograd's runs no pass and adds no report,
    # which most tests read: the caches are on only in the test of the cache key.
    torch._inductor.config.fx_graph_cache = False
    torch._functorch.config.enable_autograd_cache = False
    E4M3, E5M2 = torch.float8_e4m3fn, torch.float8_e5m2


def cast_input(m, k, dtype):
    """Values across the fp8 range at scale 2: saturating, subnormal, negative zero, no NaN."""
    g = torch.Generator().manual_seed(m * 131 + k)
    x = torch.randn(m, k, generator=g) * torch.logspace(-9, 9, k, base=2.0)
    x[0, :4] = torch.tensor([1e5, -1e5, -0.0, 3e-6])
    return x.to(dtype).to(DEVICE)


def u8(t):
    return t.view(torch.uint8) if t.dtype in (E4M3, E5M2) else t


class PassCase(unittest.TestCase):
    def setUp(self):
        torch._dynamo.reset()
        si.enable()

    def tearDown(self):
        si.disable()

    def compiled(self, fn, *args, **compile_kwargs):
        """fn compiled with the pass (fullgraph), its outputs and the pass's report."""
        out = torch.compile(fn, fullgraph=True, **compile_kwargs)(*args)
        return out, si.last_report()

    def assert_same_as_eager(self, fn, args, out):
        ref = fn(*args)
        for a, b in zip(out, ref):
            self.assertEqual(a.dtype, b.dtype)
            self.assertEqual(a.shape, b.shape)
            if a.numel() > 1:  # strides of a one-element result mean nothing
                self.assertEqual(a.stride(), b.stride())
            self.assertTrue(torch.equal(u8(a).cpu(), u8(b).cpu()), f"{a.dtype} {tuple(a.shape)} differs from eager")


# ------------------------------------------------------------------ the fp8 cast

def issue_130015(x, s):  # the pattern of PyTorch issue 130015, as written there
    f = (x * s).clamp(-448.0, 448.0).to(torch.float8_e4m3fn)
    return f, f.t().contiguous().t()


def clamp_kwargs_e5m2(x, s):
    f = torch.clamp(x.float() * s, min=-57344.0, max=57344.0).to(torch.float8_e5m2)
    return f, f.t().contiguous()


def clamp_min_max_scale_first(x, s):
    f = (s * x).clamp_min(-448.0).clamp_max(448.0).to(torch.float8_e4m3fn)
    return f.float(), f.t().contiguous().t()  # rows read by another op


def delayed_amax(x, s):
    f = (x * s).clamp(-448.0, 448.0).to(torch.float8_e4m3fn)
    return f, f.t().contiguous().t(), x.abs().max()


def delayed_amax_float(x, s):
    f = (x.float() * s).clamp(-57344.0, 57344.0).to(torch.float8_e5m2)
    return f, f.t().contiguous().t(), torch.amax(torch.abs(x.float()))


def rows_only(x, s):  # Inductor's own cast is one pass too; schedx writes the same rows
    return ((x * s).clamp(-448.0, 448.0).to(torch.float8_e4m3fn),)


def cols_only(x, s):
    return ((x * s).clamp(-57344.0, 57344.0).to(torch.float8_e5m2).t().contiguous(),)


def cols_only_transposed_back(x, s):
    return ((x.float() * s).clamp(-448.0, 448.0).to(torch.float8_e4m3fn).t().contiguous().t(),)


def tensor_bounds(x, s):  # 0-dim tensors made in the program: their values are in the graph
    f = torch.clamp(x * s, torch.tensor(-448.0, device=x.device), torch.tensor(448.0, device=x.device)).to(torch.float8_e4m3fn)
    return f, f.t().contiguous().t()


def rows_amax(x, s):
    return (x * s).clamp(-448.0, 448.0).to(torch.float8_e4m3fn), x.abs().max()


def cols_amax(x, s):
    return (x * s).clamp(-448.0, 448.0).to(torch.float8_e4m3fn).t().contiguous(), torch.amax(torch.abs(x.float()))


def divided(x, s):  # issue 45's scale by divide: x / s, as eager divides (IEEE fp32)
    f = (x / s).clamp(-448.0, 448.0).to(E4M3)
    return f, f.t().contiguous().t()


def divided_float_clamp_kwargs(x, s):
    f = torch.clamp(x.float() / s, min=-57344.0, max=57344.0).to(E5M2)
    return f, f.t().contiguous()


def divided_rows_only(x, s):
    return ((x / s).clamp_min(-448.0).clamp_max(448.0).to(E4M3),)


def divided_cols_only(x, s):
    return ((x / s).clamp(-57344.0, 57344.0).to(E5M2).t().contiguous(),)


def divided_with_amax(x, s):  # the cast is schedx's, the amax Inductor's
    f = (x / s).clamp(-448.0, 448.0).to(E4M3)
    return f, f.t().contiguous().t(), x.abs().max()


def weight_t(w, s):  # torchao's Float8Linear casts its weight as W.t(): f is W's rows viewed transposed
    return ((w.t() * s).clamp(-448.0, 448.0).to(E4M3),)


def weight_t_copy(w, s):  # its backward: one contiguous copy of that cast, W's transposed output
    return ((w.t().float() * s).clamp(-57344.0, 57344.0).to(E5M2).contiguous(),)


def weight_t_both(w, s):
    f = (w.t() * s).clamp(-448.0, 448.0).to(E4M3)
    return f, f.contiguous()


def weight_t_amax(w, s):
    return (w.t() * s).clamp(-448.0, 448.0).to(E4M3), w.t().abs().max()


def every_pattern_but_nan(dtype):
    """Every bf16 (fp16) bit pattern as 256 x 256, NaNs as 0 (eager keeps a NaN's sign in the
    fp8 code, schedx encodes every NaN as 0x7F); fp32 x takes bf16's patterns."""
    half = torch.float16 if dtype == torch.float16 else torch.bfloat16
    x = torch.arange(1 << 16, dtype=torch.int32).to(torch.int16).view(half).reshape(256, 256)
    return x.nan_to_num(nan=0.0, posinf=float("inf"), neginf=float("-inf")).to(dtype).to(DEVICE)


def current_scaling(pow2):
    """torchao's tensorwise scale of x's own amax (fp64 quotient), then the cast."""
    def fn(x):
        amax = torch.max(torch.abs(x)).to(torch.float64)
        scale = (torch.finfo(torch.float8_e4m3fn).max / torch.clamp(amax, min=1e-12)).to(torch.float32)
        if pow2:
            scale = torch.exp2(torch.floor(torch.log2(scale)))
        f = (x.to(torch.float32) * scale).clamp(min=-448.0, max=448.0).to(torch.float8_e4m3fn)
        return f, f.t().contiguous().t(), scale
    return fn


def needs_torch(cls):
    return unittest.skipIf(torch is None, "torch is not installed")(cls)


@needs_torch
class CastTest(PassCase):
    def test_spellings_bit_exact(self):
        s = torch.tensor([2.0], device=DEVICE)
        cases = [(issue_130015, torch.bfloat16, Pattern.CAST_TRANSPOSE),
                 (clamp_kwargs_e5m2, torch.float16, Pattern.CAST_TRANSPOSE),
                 (clamp_min_max_scale_first, torch.float32, Pattern.CAST_TRANSPOSE),
                 (delayed_amax, torch.bfloat16, Pattern.CAST_TRANSPOSE_AMAX),
                 (delayed_amax_float, torch.float16, Pattern.CAST_TRANSPOSE_AMAX),
                 (rows_only, torch.bfloat16, Pattern.CAST_TRANSPOSE),
                 (cols_only, torch.float16, Pattern.CAST_TRANSPOSE),
                 (cols_only_transposed_back, torch.bfloat16, Pattern.CAST_TRANSPOSE),
                 (tensor_bounds, torch.float32, Pattern.CAST_TRANSPOSE),
                 (rows_amax, torch.bfloat16, Pattern.CAST_TRANSPOSE_AMAX),
                 (cols_amax, torch.float16, Pattern.CAST_TRANSPOSE_AMAX),
                 (weight_t, torch.bfloat16, Pattern.CAST_TRANSPOSE),
                 (weight_t_copy, torch.float16, Pattern.CAST_TRANSPOSE),
                 (weight_t_both, torch.float32, Pattern.CAST_TRANSPOSE),
                 (weight_t_amax, torch.bfloat16, Pattern.CAST_TRANSPOSE_AMAX)]
        for fn, dtype, pattern in cases:
            with self.subTest(fn=fn.__name__, dtype=dtype):
                torch._dynamo.reset()
                x = cast_input(96, 160, dtype)
                out, report = self.compiled(fn, x, s)
                self.assertEqual(report.count(pattern), 1, report)
                self.assert_same_as_eager(fn, (x, s), out)

    def test_divide_spellings_bit_exact(self):
        """x / s with a divisor where x * (1 / s) gives other fp8 codes for some x (asserted), every
        bf16 and fp16 pattern, strided (a column slice of a wider x): schedx's result and strides
        equal the unchanged eager program's."""
        s = torch.tensor([7.0], device=DEVICE)
        cases = [(divided, torch.bfloat16, 1), (divided, torch.float32, 1),
                 (divided_float_clamp_kwargs, torch.float16, 1), (divided_rows_only, torch.bfloat16, 1),
                 (divided_cols_only, torch.float16, 1), (divided_with_amax, torch.bfloat16, 1)]
        for fn, dtype, rewrites in cases:
            with self.subTest(fn=fn.__name__, dtype=dtype):
                torch._dynamo.reset()
                wide = torch.cat([every_pattern_but_nan(dtype), every_pattern_but_nan(dtype)[:, :40]], 1)
                x = wide[:, 20:276]  # row stride 296
                by_reciprocal = (x.float() * (1 / s)).clamp(-448.0, 448.0).to(E4M3)
                self.assertFalse(torch.equal(u8(by_reciprocal), u8((x.float() / s).clamp(-448.0, 448.0).to(E4M3))))
                out, report = self.compiled(fn, x, s)
                self.assertEqual(report.count(Pattern.CAST_TRANSPOSE), rewrites, report)
                self.assertTrue(all(" / s " in r.detail for r in report.rewrites), report)
                self.assert_same_as_eager(fn, (x, s), out)
                if fn is divided_with_amax:
                    self.assertTrue(any("no fused amax" in skip.reason for skip in report.skips), report)

    def test_current_scaling(self):
        for pow2 in (False, True):
            with self.subTest(pow2=pow2):
                torch._dynamo.reset()
                fn = current_scaling(pow2)
                x = cast_input(64, 96, torch.bfloat16)
                out, report = self.compiled(fn, x)
                self.assertEqual(report.count(Pattern.CURRENT_SCALING), 1, report)
                self.assert_same_as_eager(fn, (x,), out)

    def test_current_scaling_one_orientation(self):
        """Current scaling writes both orientations: with only the rows read, the cast alone."""
        def fn(x):
            f, _, scale = current_scaling(False)(x)
            return f, scale
        x = cast_input(64, 96, torch.bfloat16)
        out, report = self.compiled(fn, x)
        self.assertEqual(report.count(Pattern.CAST_TRANSPOSE), 1, report)
        self.assertTrue(any("only one is used" in skip.reason for skip in report.skips), report)
        self.assert_same_as_eager(fn, (x,), out)

    def test_dynamic_m(self):
        s = torch.tensor([0.5], device=DEVICE)
        for user_fn, pattern in ((issue_130015, Pattern.CAST_TRANSPOSE), (cols_amax, Pattern.CAST_TRANSPOSE_AMAX)):
            with self.subTest(fn=user_fn.__name__):
                torch._dynamo.reset()
                fn = torch.compile(user_fn, fullgraph=True, dynamic=True)
                for m in (5, 33, 17):  # M = 1 has no transpose to fuse: f.t().contiguous() is f
                    x = cast_input(m, 48, torch.bfloat16)
                    self.assert_same_as_eager(user_fn, (x, s), fn(x, s))
                self.assertEqual(si.last_report().count(pattern), 1)

    def test_unsupported_left_alone(self):
        """Each is left to Inductor with its reason in the report, and still equals eager."""
        s = torch.tensor([2.0], device=DEVICE)
        x = cast_input(32, 48, torch.bfloat16)

        def divisor_over_x(x, s):  # s / x: schedx divides x by the scale, not the reverse
            f = (s / x.float()).clamp(-448.0, 448.0).to(E4M3)
            return f, f.t().contiguous()

        def zero_dim_scale(x, s):  # bf16 * 0-dim fp32 stays bf16: a rounding schedx does not do
            f = (x * s.reshape(())).clamp(-448.0, 448.0).to(E4M3)
            return f, f.t().contiguous()

        def per_row_scale(x, s):
            f = (x * s.expand(x.shape[0]).unsqueeze(1)).clamp(-448.0, 448.0).to(E4M3)
            return f, f.t().contiguous()

        def strided_x(x, s):  # every other column: neither row-major nor a transpose of a row-major W
            f = (x[:, ::2] * s).clamp(-448.0, 448.0).to(E4M3)
            return f, f.t().contiguous()

        def float64_x(x, s):  # (on CUDA, Inductor itself cannot compile fp64 to fp8)
            f = (x.double() * s).clamp(-448.0, 448.0).to(E4M3)
            return f, f.t().contiguous()

        def narrower_clamp(x, s):
            f = (x * s).clamp(-240.0, 240.0).to(E4M3)
            return f, f.t().contiguous()

        def computed_bounds(x, s):  # tensor bounds computed at run time: values unknown when compiling
            f = torch.clamp(x * s, -224.0 * s, 224.0 * s).to(E4M3)
            return f, f.t().contiguous()

        cases = [(divisor_over_x, "not a 2-D x / a one-element float32 scale"),
                 (zero_dim_scale, "rounded to torch.bfloat16"),
                 (per_row_scale, "one-element float32 scale"), (strided_x, "strides"),
                 (narrower_clamp, "not to +-448"), (computed_bounds, "unknown at compile time")]
        if DEVICE == "cpu":
            cases.append((float64_x, "in torch.float64"))
        for fn, reason in cases:
            with self.subTest(fn=fn.__name__):
                torch._dynamo.reset()
                out, report = self.compiled(fn, x, s)
                self.assertEqual(report.rewrites, [], report)
                self.assertTrue(any(reason in skip.reason for skip in report.skips), report)
                self.assert_same_as_eager(fn, (x, s), out)

    def test_transposed_copy_also_used_elsewhere(self):
        """f.t() is also an output: it stays a view of schedx's rows."""
        def fn(x, s):
            f = (x * s).clamp(-448.0, 448.0).to(E4M3)
            return f.t(), f.t().contiguous()
        s = torch.tensor([4.0], device=DEVICE)
        x = cast_input(40, 24, torch.bfloat16)
        out, report = self.compiled(fn, x, s)
        self.assertEqual(report.count(Pattern.CAST_TRANSPOSE), 1, report)
        self.assert_same_as_eager(fn, (x, s), out)


# ------------------------------------------------------------------ the int8 linear

class GptFastInt8Linear(torch.nn.Module if torch is not None else object):
    """gpt-fast's weight-only int8 linear as its users write it (int8 weight, per-row scales)."""

    def __init__(self, n, k, scales_dtype, bias_dtype=None):
        super().__init__()
        g = torch.Generator().manual_seed(n + k)
        self.register_buffer("weight", torch.randint(-128, 128, (n, k), dtype=torch.int8, generator=g))
        self.register_buffer("scales", (torch.rand(n, generator=g) / 64 + 1e-3).to(scales_dtype))
        self.bias = None if bias_dtype is None else torch.nn.Parameter(
            torch.randn(n, generator=g).to(bias_dtype), requires_grad=False)

    def forward(self, x):
        y = F.linear(x, self.weight.to(dtype=x.dtype)) * self.scales
        return y if self.bias is None else y + self.bias


def w8_reference(mod, x):
    y = (x.double() @ mod.weight.double().t()) * mod.scales.double()
    return y if mod.bias is None else y + mod.bias.double()


@needs_torch
class W8Test(PassCase):
    def check(self, mod, x, compile_kwargs=None):
        with torch.no_grad():
            y, report = self.compiled(mod, x, **(compile_kwargs or {}))
            ref = w8_reference(mod, x)
        self.assertEqual(report.count(Pattern.W8_LINEAR), 1, report)
        self.assertEqual((y.dtype, y.shape), (mod(x).dtype, ref.shape))
        torch.testing.assert_close(y.double(), ref, rtol=1e-2, atol=1e-5 * ref.abs().max().item())

    def test_gpt_fast_formulation(self):
        cases = [((1, 256), torch.bfloat16, torch.bfloat16, None), ((5, 256), torch.bfloat16, torch.bfloat16, None),
                 ((2, 256), torch.bfloat16, torch.float32, torch.float32),
                 ((2, 3, 256), torch.bfloat16, torch.bfloat16, None),
                 ((4, 256), torch.bfloat16, torch.bfloat16, torch.bfloat16),
                 ((3, 256), torch.bfloat16, torch.float32, None),
                 ((3, 256), torch.float16, torch.float32, None)]
        for shape, x_dtype, s_dtype, b_dtype in cases:
            with self.subTest(shape=shape, x=x_dtype, scales=s_dtype, bias=b_dtype):
                torch._dynamo.reset()
                mod = GptFastInt8Linear(72, shape[-1], s_dtype, b_dtype).to(DEVICE)
                self.check(mod, torch.randn(shape, dtype=x_dtype, device=DEVICE))

    def test_decomposed_gemv(self):
        """M = 1 as Inductor's mm decomposition writes it on CUDA under coordinate-descent tuning
        (gpt-fast's setting), written out here so that the CPU graph has the same nodes."""
        mod = GptFastInt8Linear(48, 96, torch.bfloat16).to(DEVICE)

        def product(x):
            wt = mod.weight.to(x.dtype).t()
            return (x.float().unsqueeze(2) * wt.float().unsqueeze(0)).sum(1).to(x.dtype)

        def fn(x):
            return product(x) * mod.scales

        def fn3(x):  # a decode step's [batch 1, 1 token, K] x: F.linear views it to [1, K] and back
            return product(x.view(1, -1)).view(1, 1, -1) * mod.scales

        def folded(x):  # torchao's W.t().to(bf16), its .float() folded by Inductor into one convert
            wt = mod.weight.t()
            return mod.scales * (x.float().unsqueeze(2) * wt.float().unsqueeze(0)).sum(1).to(x.dtype)

        for f, shape in ((fn, (1, 96)), (fn3, (1, 1, 96)), (folded, (1, 96))):
            torch._dynamo.reset()
            x = torch.randn(shape, dtype=torch.bfloat16, device=DEVICE)
            with torch.no_grad():
                y, report = self.compiled(f, x)
            self.assertEqual(report.count(Pattern.W8_LINEAR), 1, report)
            ref = w8_reference(mod, x)
            torch.testing.assert_close(y.double(), ref, rtol=1e-2, atol=1e-5 * ref.abs().max().item())

    def test_padded_m(self):
        """M padded to an alignment as Inductor's pad_mm writes it on CUDA when its benchmark says
        so (seen on an H100 at M = 3, fp32 scales), written out so that the CPU graph has the
        same nodes; padding K, or keeping fewer rows than x has, is another product."""
        for s_dtype, bias in ((torch.float32, None), (torch.bfloat16, torch.bfloat16)):
            mod = GptFastInt8Linear(72, 256, s_dtype, bias).to(DEVICE)

            def padded(x, pad_k=0, keep=None):
                p = F.pad(x, (0, pad_k, 0, 5))
                wt = mod.weight.to(x.dtype).t()
                y = torch.mm(p, F.pad(wt, (0, 0, 0, pad_k)) if pad_k else wt)[:x.shape[0] if keep is None else keep]
                y = y * mod.scales
                return y if mod.bias is None else y + mod.bias

            x = torch.randn(3, 256, dtype=torch.bfloat16, device=DEVICE)
            for kwargs, rewritten in (({}, 1), ({"pad_k": 8}, 0), ({"keep": 2}, 0)):
                with self.subTest(scales=s_dtype, **kwargs):
                    torch._dynamo.reset()
                    with torch.no_grad():
                        y, report = self.compiled(functools.partial(padded, **kwargs), x)
                        want = padded(x, **kwargs)
                    self.assertEqual(report.count(Pattern.W8_LINEAR), rewritten, report)
                    self.assertEqual((y.dtype, y.shape), (want.dtype, want.shape))
                    if rewritten:
                        ref = w8_reference(mod, x)
                        torch.testing.assert_close(y.double(), ref, rtol=1e-2, atol=1e-5 * ref.abs().max().item())
                    else:  # Inductor's own code, which may round once where eager rounds twice
                        torch.testing.assert_close(y, want, rtol=2**-7, atol=2**-7 * want.abs().max().item())

    def test_dynamic_m(self):
        mod = GptFastInt8Linear(40, 64, torch.bfloat16).to(DEVICE)
        fn = torch.compile(mod, fullgraph=True)
        with torch.no_grad():
            for m in (3, 7, 12):
                x = torch.randn(m, 64, dtype=torch.bfloat16, device=DEVICE)
                torch._dynamo.mark_dynamic(x, 0)
                ref = w8_reference(mod, x)
                torch.testing.assert_close(fn(x).double(), ref, rtol=1e-2, atol=1e-5 * ref.abs().max().item())
        self.assertEqual(si.last_report().count(Pattern.W8_LINEAR), 1)

    def test_unscaled_product_used_elsewhere(self):
        mod = GptFastInt8Linear(24, 32, torch.bfloat16).to(DEVICE)

        def fn(x):
            p = F.linear(x, mod.weight.to(x.dtype))
            return p * mod.scales, p
        x = torch.randn(4, 32, dtype=torch.bfloat16, device=DEVICE)
        out, report = self.compiled(fn, x)
        self.assertEqual(report.rewrites, [])
        self.assertTrue(any("used elsewhere" in s.reason for s in report.skips), report)
        for a, b in zip(out, fn(x)):
            torch.testing.assert_close(a, b)

    @unittest.skipIf(torch is None or torchao is None, "torchao is not installed")
    def test_torchao_int8_weight_only(self):
        from torchao.quantization import Int8WeightOnlyConfig, quantize_
        # quantize_ sets Inductor options process-wide (coordinate-descent tuning among them, which
        # on CUDA turns an M = 1 mm into a reduction): kept for this test as torchao's users get them
        saved = torch._inductor.config.save_config()
        self.addCleanup(torch._inductor.config.load_config, saved)
        for shape in ((1, 128), (6, 128), (2, 3, 128)):
            with self.subTest(shape=shape):
                torch._dynamo.reset()
                lin = torch.nn.Linear(128, 80, bias=False).to(torch.bfloat16).to(DEVICE)
                model = torch.nn.Sequential(lin)
                quantize_(model, Int8WeightOnlyConfig())
                x = torch.randn(shape, dtype=torch.bfloat16, device=DEVICE)
                with torch.no_grad():
                    eager = model(x)
                    y, report = self.compiled(model, x)
                self.assertEqual(report.count(Pattern.W8_LINEAR), 1, report)
                # torchao stores fp32 scales and converts them per call: schedx reads them as stored
                self.assertIn("scales float32", report.rewrites[0].detail)
                torch.testing.assert_close(y.float(), eager.float(), rtol=2e-2, atol=2e-2 * eager.abs().max().item())


class GptFastInt4Linear(torch.nn.Module if torch is not None else object):
    """gpt-fast's weight-only int4 linear as its users write it: torch's int4pack weight (each
    device packs its own way), scales_and_zeros [K/g, N, 2], weight (u - 8) * s + zero."""

    def __init__(self, n, k, group_size, device, zero_scale=1.0):
        super().__init__()
        g = torch.Generator().manual_seed(n + k + group_size)
        self.u = torch.randint(0, 16, (n, k), dtype=torch.int32, generator=g)
        if device == "cuda":
            packed = torch.ops.aten._convert_weight_to_int4pack(
                (self.u[:, ::2] << 4 | self.u[:, 1::2]).to(torch.uint8).to(device), 8)
        else:
            packed = torch.ops.aten._convert_weight_to_int4pack_for_cpu(self.u, 2)
        s = torch.rand(k // group_size, n, generator=g) / 64 + 1e-3
        # gpt-fast's min-max rule puts zero at min + 8 s: z = 8 - zero / s lies in 0..15, off the integers
        zero = (8 - torch.rand(k // group_size, n, generator=g) * 15) * s * zero_scale
        self.register_buffer("weight", packed)
        self.register_buffer("scales_and_zeros", torch.stack([s, zero], -1).to(torch.bfloat16).to(device))
        self.group_size, self.out_features = group_size, n

    def forward(self, x):
        mm = torch.ops.aten._weight_int4pack_mm if x.is_cuda else torch.ops.aten._weight_int4pack_mm_for_cpu
        y = mm(x.reshape(-1, x.shape[-1]), self.weight, self.group_size, self.scales_and_zeros)
        return y.reshape(x.shape[:-1] + (self.out_features,))

    def reference_weight(self):
        """[N, K] float64: (u - 8) * s + zero, the format's own dequantization."""
        s, zero = (self.scales_and_zeros[..., i].double().cpu().repeat_interleave(self.group_size, 0).t()
                   for i in (0, 1))
        return (self.u.double() - 8) * s + zero


@needs_torch
class W4Test(PassCase):
    """gpt-fast's int4 module, unchanged, compiled with freezing: its int4pack constants are
    repacked at compile time and the product runs as w4_linear. The pass rewrites it on CUDA
    only by default; these tests let it on the CPU too (schedx.inductor.INT4PACK_DEVICES)."""

    def setUp(self):
        super().setUp()
        patch = unittest.mock.patch.object(si, "INT4PACK_DEVICES", ("cpu", "cuda"))
        patch.start()
        self.addCleanup(patch.stop)

    def frozen(self, fn, x, freezing=True):
        torch._dynamo.reset()
        with torch.no_grad(), torch._inductor.config.patch(freezing=freezing):
            return self.compiled(fn, x)

    def test_gpt_fast_int4_frozen(self):
        for shape, n, group_size in (((1, 256), 64, 128), ((5, 256), 48, 64), ((2, 3, 128), 32, 32)):
            with self.subTest(shape=shape, n=n, group_size=group_size):
                mod = GptFastInt4Linear(n, shape[-1], group_size, DEVICE)
                x = torch.randn(shape, dtype=torch.bfloat16, device=DEVICE)
                y, report = self.frozen(mod, x)
                self.assertEqual(report.count(Pattern.W4_LINEAR), 1, report)
                self.assertIn(f"group {group_size}, asymmetric", report.rewrites[0].detail)
                w = mod.reference_weight()
                ref = x.double().cpu() @ w.t()
                # schedx's own bound (bf16 y, fp32 sums) plus its rounded zero points: each weight
                # within 2^-8 |z| s of the format's (schedx.int4.repack_int4pack)
                s = mod.scales_and_zeros[..., 0].double().cpu().repeat_interleave(group_size, 0).t()
                moved = 2 ** -8 * ((8 * s - (w - (mod.u.double() - 8) * s)).abs())
                bound = 2 ** -8 * ref.abs() + x.double().abs().cpu() @ (moved + 1e-5 * w.abs()).t()
                self.assertEqual((y.dtype, y.shape), (torch.bfloat16, ref.shape))
                err = (y.double().cpu() - ref).abs()
                self.assertTrue(bool((err <= bound).all()), f"largest error {float(err.max())}")

    def test_symmetric_when_every_zero_is_zero(self):
        mod = GptFastInt4Linear(32, 128, 64, DEVICE, zero_scale=0.0)
        x = torch.randn(3, 128, dtype=torch.bfloat16, device=DEVICE)
        y, report = self.frozen(mod, x)
        self.assertIn("symmetric", report.rewrites[0].detail)
        self.assertNotIn("asymmetric", report.rewrites[0].detail)
        ref = x.double().cpu() @ mod.reference_weight().t()
        torch.testing.assert_close(y.double().cpu(), ref, rtol=2 ** -8, atol=1e-5 * ref.abs().max().item())

    def test_weights_as_inputs_left_alone(self):
        """Without freezing the weights are graph inputs, which the pass cannot repack once: it
        says so, and the program runs as Inductor compiles it."""
        mod = GptFastInt4Linear(32, 128, 64, DEVICE)
        x = torch.randn(2, 128, dtype=torch.bfloat16, device=DEVICE)
        y, report = self.frozen(mod, x, freezing=False)
        self.assertEqual(report.rewrites, [])
        self.assertTrue(any("freezing" in s.reason for s in report.skips), report)
        with torch.no_grad():
            self.assertTrue(torch.equal(y, mod(x)))

    @unittest.skipIf(torch is None or torchao is None or DEVICE != "cuda",
                     "torchao's tinygemm int4 (tile_packed_to_4d) packs on CUDA only")
    def test_torchao_int4_frozen(self):
        from torchao.quantization import Int4WeightOnlyConfig, quantize_
        saved = torch._inductor.config.save_config()
        self.addCleanup(torch._inductor.config.load_config, saved)
        for shape in ((1, 256), (6, 256), (2, 3, 256)):
            with self.subTest(shape=shape):
                model = torch.nn.Sequential(torch.nn.Linear(256, 64, bias=False)).to(torch.bfloat16).to(DEVICE)
                quantize_(model, Int4WeightOnlyConfig(group_size=128, int4_packing_format="tile_packed_to_4d"))
                x = torch.randn(shape, dtype=torch.bfloat16, device=DEVICE)
                with torch.no_grad():
                    eager = model(x)
                y, report = self.frozen(model, x)
                self.assertEqual(report.count(Pattern.W4_LINEAR), 1, report)
                torch.testing.assert_close(y.float(), eager.float(), rtol=2e-2, atol=2e-2 * eager.abs().max().item())

    @unittest.skipIf(torch is None or DEVICE != "cpu", "the CPU's default")
    def test_cpu_left_to_aten_by_default(self):
        mod = GptFastInt4Linear(32, 128, 64, "cpu")
        x = torch.randn(2, 128, dtype=torch.bfloat16)
        with unittest.mock.patch.object(si, "INT4PACK_DEVICES", ("cuda",)):
            y, report = self.frozen(mod, x)
        self.assertEqual(report.rewrites, [])
        self.assertTrue(any("INT4PACK_DEVICES" in s.reason for s in report.skips), report)
        with torch.no_grad():
            self.assertTrue(torch.equal(y, mod(x)))

    def test_shared_weight_repacked_once(self):
        mod = GptFastInt4Linear(32, 128, 32, DEVICE)

        def twice(x):
            return mod(x) + mod(x * 2)
        x = torch.randn(4, 128, dtype=torch.bfloat16, device=DEVICE)
        with unittest.mock.patch.object(schedx.int4, "repack_int4pack", wraps=schedx.int4.repack_int4pack) as repack:
            y, report = self.frozen(twice, x)
        self.assertEqual(report.count(Pattern.W4_LINEAR), 2, report)
        self.assertEqual(repack.call_count, 1)
        ref = x.double().cpu() @ mod.reference_weight().t() * 3
        torch.testing.assert_close(y.double().cpu(), ref, rtol=2 ** -6, atol=2 ** -6 * ref.abs().max().item())


@needs_torch
class TorchaoFloat8Test(PassCase):
    @unittest.skipIf(torch is None or torchao is None, "torchao is not installed")
    def test_float8_linear_step(self):
        """torchao's tensorwise Float8Linear, unchanged and compiled: the input's cast (forward) and
        grad_output's (backward), each with its transposed copy, run as schedx's current-scaling
        op; the weight's casts of W.t() as schedx's cast of W (forward: its rows, backward: its
        transposed output), the weight's amax and scale Inductor's. Output and both gradients
        equal torchao's eager step bit for bit."""
        from torchao.float8 import convert_to_float8_training

        def step(compiled):
            g = torch.Generator().manual_seed(7)
            model = torch.nn.Sequential(torch.nn.Linear(64, 48, bias=False))
            with torch.no_grad():
                model[0].weight.copy_(torch.randn(48, 64, generator=g))
            model = model.to(torch.bfloat16).to(DEVICE)
            convert_to_float8_training(model)
            x = torch.randn(32, 64, generator=g).to(torch.bfloat16).to(DEVICE).requires_grad_()
            run = torch.compile(model) if compiled else model
            y = run(x)
            y.backward(torch.randn(y.shape, generator=g).to(y))
            return y.detach(), x.grad, model[0].weight.grad

        first = len(si.reports())
        out = step(compiled=True)
        graphs = si.reports()[first:]
        self.assertEqual([r.count(Pattern.CURRENT_SCALING) for r in graphs], [1, 1], graphs)
        self.assertEqual([r.count(Pattern.CAST_TRANSPOSE) for r in graphs], [1, 1], graphs)
        self.assertTrue(all(any("as W.t()" in w.detail for w in r.rewrites) for r in graphs), graphs)
        for a, b in zip(out, step(compiled=False)):
            self.assertTrue(torch.equal(a, b))


# ------------------------------------------------------------------ installing the pass

class CountingPass(CustomGraphPass if torch is not None else object):
    def __init__(self):
        self.calls = 0

    def __call__(self, graph):
        self.calls += 1

    def uuid(self):
        return "counting-pass-v1"


@needs_torch
class InstallTest(unittest.TestCase):
    def tearDown(self):
        si.disable()
        torch._inductor.config.post_grad_custom_pre_pass = None

    def test_chains_and_restores_user_pass(self):
        user = CountingPass()
        torch._inductor.config.post_grad_custom_pre_pass = user
        with si.enabled():
            self.assertIs(torch._inductor.config.post_grad_custom_pre_pass.chained, user)
            torch._dynamo.reset()
            s = torch.tensor([2.0], device=DEVICE)
            torch.compile(issue_130015, fullgraph=True)(cast_input(16, 16, torch.bfloat16), s)
            self.assertEqual(user.calls, 1)
            self.assertEqual(si.last_report().count(Pattern.CAST_TRANSPOSE), 1)
        self.assertIs(torch._inductor.config.post_grad_custom_pre_pass, user)

    def test_uuid(self):
        own = si.SchedxGraphPass().uuid()
        self.assertIsNotNone(own)
        self.assertEqual(own, si.SchedxGraphPass().uuid())
        chained = si.SchedxGraphPass(CountingPass()).uuid()
        self.assertEqual(chained, (own[0], own[1], "counting-pass-v1"))
        # the devices the int4pack rewrite runs on change the code it makes
        with unittest.mock.patch.object(si, "INT4PACK_DEVICES", ("cpu", "cuda")):
            self.assertNotEqual(si.SchedxGraphPass().uuid(), own)
        # a plain function has no identity Inductor can key on: no caching, as Inductor does itself
        self.assertIsNone(si.SchedxGraphPass(lambda g: None).uuid())

    def test_graph_cache_keeps_with_and_without_apart(self):
        """The same program compiled with, without, then with the pass, the FX graph cache on:
        each compile's code calls schedx exactly when the pass is on."""
        s = torch.tensor([2.0], device=DEVICE)
        x = cast_input(24, 40, torch.bfloat16)
        with torch._inductor.config.patch(fx_graph_cache=True), \
                torch._functorch.config.patch(enable_autograd_cache=True):
            for on in (True, False, True):
                torch._dynamo.reset()
                (si.enable if on else si.disable)()
                _, code = run_and_get_code(torch.compile(issue_130015, fullgraph=True), x, s)
                self.assertEqual("schedx.cast_transpose_fp8.below_autograd" in "\n".join(code), on)

    def test_emitted_ops_have_no_autograd_kernel(self):
        """The pass emits each op's below_autograd overload: the same results and fake, and no
        (Python) Autograd kernel on every call of a graph that is below autograd already."""
        from torch.library import opcheck
        x = cast_input(24, 40, torch.bfloat16)
        s = torch.tensor([2.0], device=DEVICE)
        w = torch.randint(-128, 128, (16, 40), dtype=torch.int8, device=DEVICE)
        scales = torch.rand(16, dtype=torch.bfloat16, device=DEVICE)
        w4 = schedx.int4.pack_nibbles(torch.randint(0, 16, (16, 64), dtype=torch.int32)).to(DEVICE)
        w4_scales, w4_zeros = (torch.rand(16, 2, dtype=torch.bfloat16, device=DEVICE) for _ in range(2))
        calls = {"cast_transpose_fp8": (x, s, E4M3), "cast_transpose_fp8_amax": (x, s, E5M2),
                 "cast_transpose_fp8_current_scaling": (x, E4M3, True), "w8_linear": (x, w, scales),
                 "w4_linear": (x[:, :32].contiguous().repeat(1, 2), w4, w4_scales, w4_zeros, None, 32)}
        self.assertEqual(set(calls), set(si._ops.BELOW_AUTOGRAD))
        for name, args in calls.items():
            with self.subTest(op=name):
                packet = getattr(torch.ops.schedx, name)
                self.assertTrue(torch._C._dispatch_has_kernel_for_dispatch_key(packet.default.name(), "Autograd"))
                self.assertFalse(torch._C._dispatch_has_kernel_for_dispatch_key(
                    packet.below_autograd.name(), "Autograd"))
                for a, b in zip(*((r,) if isinstance(r, torch.Tensor) else r
                                  for r in (packet.below_autograd(*args), packet.default(*args)))):
                    self.assertTrue(torch.equal(u8(a), u8(b)) and a.stride() == b.stride())
                opcheck(packet.below_autograd, args, test_utils=("test_schema", "test_faketensor",
                                                                  "test_aot_dispatch_dynamic"))

    def test_report_logged(self):
        si.enable()
        torch._dynamo.reset()
        s = torch.tensor([2.0], device=DEVICE)
        with self.assertLogs("schedx.inductor", logging.INFO) as logs:
            torch.compile(issue_130015, fullgraph=True)(cast_input(16, 16, torch.bfloat16), s)
        self.assertTrue(any("cast_transpose at" in line for line in logs.output), logs.output)


if __name__ == "__main__":
    if torch is None:
        print("torch is not installed: skipped")
        sys.exit(77)
    unittest.main()
