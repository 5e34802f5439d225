"""Drop-in modules over torch.ops.schedx, and functions that swap them into a model.

Int8WeightOnlyLinear: weight-only int8 inference (symmetric per-output-channel scales,
quantized as gpt-fast's WeightOnlyInt8QuantHandler does), its int8-to-bf16 convert inside
schedx's GEMV and small-batch kernels.

Int4WeightOnlyLinear: group-wise int4 weights (schedx.int4: quantized from a linear, or
repacked from GPTQ and AWQ checkpoints), dequantized inside schedx_w4_linear's kernels.

Float8Linear: float8 training with tensorwise scales (torchao's tensorwise recipe). The
forward casts input and weight by the fused cast + transpose, which writes each tensor's
row-major and column-major fp8 copies in one pass, and multiplies with torch._scaled_mm;
the backward casts grad_output the same way and takes dgrad and wgrad from the copies the
forward made (nothing is cast twice).
"""

import dataclasses
import enum
import logging
import warnings
from typing import Callable, List, Optional

import torch

from . import int4
from . import ops  # noqa: F401  (registers torch.ops.schedx)

__all__ = ["Int8WeightOnlyLinear", "convert_to_int8_weight_only", "Int4WeightOnlyLinear", "convert_to_int4_weight_only", "Scaling", "Float8LinearConfig", "Float8Linear",
           "convert_to_float8_training", "amax_to_scale"]

log = logging.getLogger(__name__)


def _linears(module: torch.nn.Module, module_filter_fn: Optional[Callable], prefix: str = ""):
    """[(parent, name, fqn, linear)] of every torch.nn.Linear (exact type) under module for
    which module_filter_fn(linear, fqn) holds, in named_children order."""
    found = []
    for name, child in module.named_children():
        fqn = f"{prefix}.{name}" if prefix else name
        if type(child) is torch.nn.Linear:
            if module_filter_fn is None or module_filter_fn(child, fqn):
                found.append((module, name, fqn, child))
        else:
            found += _linears(child, module_filter_fn, fqn)
    return found


def _swap(module: torch.nn.Module, make: Callable, module_filter_fn: Optional[Callable],
          skip: Callable[[torch.nn.Linear], Optional[str]] = lambda linear: None) -> List[str]:
    """Replaces each selected linear by make(linear), all or nothing: every replacement is
    made before the first is set, so an exception leaves the model as it was. A linear for
    which skip() gives a reason stays, with a warning. Returns the fqns replaced (also
    logged at INFO level)."""
    chosen = []
    for parent, name, fqn, linear in _linears(module, module_filter_fn):
        reason = skip(linear)
        if reason is None:
            chosen.append((parent, name, fqn, make(linear)))
        else:
            warnings.warn(f"{fqn} stays torch.nn.Linear: {reason}", stacklevel=3)
    for parent, name, _, replacement in chosen:
        setattr(parent, name, replacement)
    converted = [fqn for _, _, fqn, _ in chosen]
    log.info("replaced %d linear(s) of %s: %s", len(converted), type(module).__name__, ", ".join(converted))
    return converted


# ------------------------------------------------------------------ int8 weight-only

# The scales' (and bias') dtype per activation dtype: the kernels take bf16 or fp32 scales,
# so an fp16 model keeps its fp16-rounded scales in fp32 (every fp16 value is one).
SCALES_DTYPE = {torch.bfloat16: torch.bfloat16, torch.float16: torch.float32}


def _overload(packet, *inputs: Optional[torch.Tensor]):
    """The op's default overload where autograd must see the call (grad mode on and an input
    that requires grad), else its below_autograd overload: the same kernels without the Python
    Autograd kernel, whose host time every eager call would pay (docs/pytorch.md)."""
    if torch.is_grad_enabled() and any(t is not None and t.requires_grad for t in inputs):
        return packet.default
    return packet.below_autograd


class Int8WeightOnlyLinear(torch.nn.Module):
    """y = (x @ weight.T) * scales (+ bias), weight int8 [out, in], scales [out].

    The math of gpt-fast's WeightOnlyInt8Linear, F.linear(x, weight.to(x.dtype)) * scales,
    but summed in fp32 and rounded once (see schedx_w8_linear in schedx.h). dtype is the
    activations' (bf16 or fp16); scales and bias are held in SCALES_DTYPE[dtype]. x gets a
    gradient (dgrad through the frozen int8 weight), and so does bias if it requires one."""

    def __init__(self, in_features: int, out_features: int, bias: bool = True, device=None,
                 dtype: torch.dtype = torch.bfloat16):
        super().__init__()
        if dtype not in SCALES_DTYPE:
            raise ValueError(f"Int8WeightOnlyLinear takes bf16 or fp16 activations, got {dtype}")
        self.in_features, self.out_features = in_features, out_features
        scales_dtype = SCALES_DTYPE[dtype]
        self.register_buffer("weight", torch.zeros((out_features, in_features), dtype=torch.int8, device=device))
        self.register_buffer("scales", torch.ones(out_features, dtype=scales_dtype, device=device))
        self.register_buffer("bias", torch.zeros(out_features, dtype=scales_dtype, device=device) if bias else None)

    @staticmethod
    def quantize(weight: torch.Tensor):
        """(int8 weight, scales rounded to weight's dtype): per output row, scale = max|w| /
        127.5 clamped to fp32 epsilon, q = clamp(round(w / scale), -128, 127), in fp32 as
        gpt-fast."""
        w = weight.detach().float()
        amax = torch.maximum(-w.amin(dim=1).clamp(max=0), w.amax(dim=1).clamp(min=0))
        scales = (amax / 127.5).clamp(min=torch.finfo(torch.float32).eps)
        q = torch.clamp(torch.round(w / scales.unsqueeze(-1)), -128, 127).to(torch.int8)
        return q, scales.to(weight.dtype)

    @staticmethod
    def unsupported(linear: torch.nn.Linear) -> Optional[str]:
        """Why `linear` cannot be converted (its dtype), or None."""
        dtype = linear.weight.dtype
        if dtype not in SCALES_DTYPE:
            return f"Int8WeightOnlyLinear quantizes bf16 or fp16 linears (the kernels take bf16 or fp16 x), got {dtype}"
        return None

    @classmethod
    def from_linear(cls, linear: torch.nn.Linear) -> "Int8WeightOnlyLinear":
        reason = cls.unsupported(linear)
        if reason is not None:
            raise ValueError(reason)
        m = cls(linear.in_features, linear.out_features, linear.bias is not None, linear.weight.device,
                linear.weight.dtype)
        q, scales = cls.quantize(linear.weight)
        m.weight.copy_(q)
        m.scales.copy_(scales)
        if linear.bias is not None:
            m.bias.copy_(linear.bias.detach())
        return m

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return _overload(torch.ops.schedx.w8_linear, x, self.bias)(x, self.weight, self.scales, self.bias)

    def extra_repr(self):
        return f"in_features={self.in_features}, out_features={self.out_features}, bias={self.bias is not None}"


def convert_to_int8_weight_only(model: torch.nn.Module,
                                module_filter_fn: Optional[Callable[[torch.nn.Module, str], bool]] = None):
    """Replaces every bf16 or fp16 torch.nn.Linear of `model` (for which
    module_filter_fn(module, fqn) holds, when given) by an Int8WeightOnlyLinear, in place
    and all or nothing; linears of other dtypes (fp32) stay, each with a warning. Returns
    the model; the fqns replaced are logged at INFO level (logger schedx.nn)."""
    _swap(model, Int8WeightOnlyLinear.from_linear, module_filter_fn, Int8WeightOnlyLinear.unsupported)
    return model


# ------------------------------------------------------------------ int4 weight-only

class Int4WeightOnlyLinear(torch.nn.Module):
    """y = x @ dequantize().T (+ bias), the weight 4-bit in groups of group_size along K
    (schedx.int4's layout: weight int32 [out, in/8], scales [out, in/group_size], zeros of the
    scales' shape in the asymmetric form, else None). Inference only: x, the weights and bias
    get no gradient. x bf16 or fp16; scales, zeros and bias bf16 or fp16 (GPTQ and AWQ
    checkpoints bring fp16 scales, which a bf16 model keeps as they are)."""

    def __init__(self, in_features: int, out_features: int, bias: bool = True, group_size: int = 128,
                 form: int4.Int4Form = int4.Int4Form.SYMMETRIC, device=None, scales_dtype: torch.dtype = torch.bfloat16):
        super().__init__()
        int4._check_group_size(group_size, in_features)
        if scales_dtype not in (torch.bfloat16, torch.float16):
            raise ValueError(f"Int4WeightOnlyLinear keeps bf16 or fp16 scales, got {scales_dtype}")
        self.in_features, self.out_features, self.group_size = in_features, out_features, group_size
        groups = in_features // group_size
        self.register_buffer("weight", torch.zeros((out_features, in_features // 8), dtype=torch.int32, device=device))
        self.register_buffer("scales", torch.ones((out_features, groups), dtype=scales_dtype, device=device))
        self.register_buffer("zeros", None if int4.Int4Form(form) == int4.Int4Form.SYMMETRIC else
                             torch.full((out_features, groups), 8.0, dtype=scales_dtype, device=device))
        self.register_buffer("bias", torch.zeros(out_features, dtype=scales_dtype, device=device) if bias else None)

    @property
    def packed(self) -> int4.PackedInt4:
        return int4.PackedInt4(self.weight, self.scales, self.zeros, self.group_size)

    @classmethod
    def from_packed(cls, p: int4.PackedInt4, bias: Optional[torch.Tensor] = None) -> "Int4WeightOnlyLinear":
        m = cls(p.w.shape[1] * 8, p.w.shape[0], bias is not None, p.group_size, p.form, p.w.device, p.scales.dtype)
        m.weight.copy_(p.w)
        m.scales.copy_(p.scales)
        if p.zeros is not None:
            m.zeros.copy_(p.zeros)
        if bias is not None:
            m.bias.copy_(bias.detach())
        return m

    @staticmethod
    def unsupported(linear: torch.nn.Linear, group_size: int) -> Optional[str]:
        """Why `linear` cannot be converted (its dtype or in_features), or None."""
        if linear.weight.dtype not in (torch.bfloat16, torch.float16):
            return f"Int4WeightOnlyLinear quantizes bf16 or fp16 linears, got {linear.weight.dtype}"
        if linear.in_features % group_size != 0:
            return f"in_features {linear.in_features} is not a multiple of group_size {group_size}"
        return None

    @classmethod
    def from_linear(cls, linear: torch.nn.Linear, group_size: int = 128,
                    symmetric: bool = True) -> "Int4WeightOnlyLinear":
        """Quantized by schedx.int4.quantize's rule: symmetric absmax / 7, or asymmetric min-max
        with an integer zero point; scales (and bias) in the linear's dtype."""
        if group_size not in int4.GROUP_SIZES:
            raise ValueError(f"group_size must be 32, 64 or 128, got {group_size}")
        reason = cls.unsupported(linear, group_size)
        if reason is not None:
            raise ValueError(reason)
        form = int4.Int4Form.SYMMETRIC if symmetric else int4.Int4Form.ASYMMETRIC
        return cls.from_packed(int4.quantize(linear.weight, group_size, form), linear.bias)

    @classmethod
    def from_gptq(cls, qweight, qzeros, scales, g_idx=None, bias=None, *, group_size: int,
                  checkpoint_format: int4.GptqFormat = int4.GptqFormat.V1, sym: Optional[bool] = None):
        """A GPTQ layer's tensors (schedx.int4.repack_gptq), exactly; act-order g_idx is refused."""
        return cls.from_packed(int4.repack_gptq(qweight, qzeros, scales, g_idx, group_size=group_size,
                                                checkpoint_format=checkpoint_format, sym=sym), bias)

    @classmethod
    def from_awq(cls, qweight, qzeros, scales, bias=None, *, group_size: int):
        """An AWQ (GEMM layout) layer's tensors (schedx.int4.repack_awq), exactly."""
        return cls.from_packed(int4.repack_awq(qweight, qzeros, scales, group_size=group_size), bias)

    @classmethod
    def from_int4pack(cls, weight, scales_and_zeros, bias=None, *, group_size: int, in_features: int):
        """A layer of torch's int4pack format (gpt-fast's int4, torchao's tinygemm int4) through
        schedx.int4.repack_int4pack: nibbles and scales exact, zero points rounded as it says."""
        return cls.from_packed(int4.repack_int4pack(weight, scales_and_zeros, group_size=group_size,
                                                    in_features=in_features), bias)

    def dequantize(self, dtype: torch.dtype = torch.float32) -> torch.Tensor:
        """[out, in]: the weights the kernel multiplies by, (u - z) * s, exact in float32."""
        return int4.dequantize(self.packed, dtype)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return _overload(torch.ops.schedx.w4_linear, x, self.bias)(x, self.weight, self.scales, self.zeros, self.bias,
                                                                   self.group_size)

    def extra_repr(self):
        form = "symmetric" if self.zeros is None else "asymmetric"
        return (f"in_features={self.in_features}, out_features={self.out_features}, bias={self.bias is not None}, "
                f"group_size={self.group_size}, {form}")


def convert_to_int4_weight_only(model: torch.nn.Module, group_size: int = 128, symmetric: bool = True,
                                module_filter_fn: Optional[Callable[[torch.nn.Module, str], bool]] = None):
    """Replaces every bf16 or fp16 torch.nn.Linear of `model` (for which module_filter_fn(module,
    fqn) holds, when given) by an Int4WeightOnlyLinear.from_linear, in place and all or nothing;
    linears of other dtypes or with in_features off the group stay, each with a warning.
    Returns the model; the fqns replaced are logged at INFO level (logger schedx.nn)."""
    if group_size not in int4.GROUP_SIZES:
        raise ValueError(f"group_size must be 32, 64 or 128, got {group_size}")
    _swap(model, lambda lin: Int4WeightOnlyLinear.from_linear(lin, group_size, symmetric), module_filter_fn,
          lambda lin: Int4WeightOnlyLinear.unsupported(lin, group_size))
    return model


# ------------------------------------------------------------------ float8 training

class Scaling(str, enum.Enum):
    """Float8LinearConfig.scaling; each member equals its string."""
    CURRENT = "current"
    DELAYED = "delayed"


@dataclasses.dataclass(frozen=True)
class Float8LinearConfig:
    """scaling: Scaling.CURRENT (each cast's scale from the tensor's own max|x|, computed on
    the device by the current-scaling cast) or Scaling.DELAYED (the scale from the largest
    amax of the last amax_history_len calls; this call's amax is fused into the cast).
    grad_dtype: the fp8 format of grad_output (e5m2 as torchao's default, or e4m3fn).
    round_scales_to_power_of_2: scale = 2^floor(log2(scale)), as torchao's option."""
    scaling: Scaling = Scaling.CURRENT
    forward_dtype: torch.dtype = torch.float8_e4m3fn
    grad_dtype: torch.dtype = torch.float8_e5m2
    round_scales_to_power_of_2: bool = False
    amax_history_len: int = 16

    def __post_init__(self):
        try:
            object.__setattr__(self, "scaling", Scaling(self.scaling))
        except ValueError:
            raise ValueError(f"scaling must be 'current' or 'delayed', got {self.scaling!r}") from None
        for d in (self.forward_dtype, self.grad_dtype):
            if d not in (torch.float8_e4m3fn, torch.float8_e5m2):
                raise ValueError(f"fp8 dtypes must be float8_e4m3fn or float8_e5m2, got {d}")
        if self.forward_dtype == torch.float8_e5m2:
            raise ValueError("forward_dtype e5m2 would multiply e5m2 by e5m2, which torch._scaled_mm rejects")


def amax_to_scale(amax: torch.Tensor, fp8_dtype: torch.dtype, round_to_power_of_2: bool = False) -> torch.Tensor:
    """torchao's tensorwise rule: fp32(fp8_max / max(amax, 1e-12)) computed in fp64."""
    scale = (torch.finfo(fp8_dtype).max / torch.clamp(amax.to(torch.float64), min=1e-12)).to(torch.float32)
    if round_to_power_of_2:
        scale = torch.exp2(torch.floor(torch.log2(scale)))
    return scale


def _cast_current(t, fp8_dtype, pow2):
    """(rows, cols, scale_inv) of t with its own tensorwise scale: amax, scale and cast in
    one op, amax_to_scale's rule computed on the device."""
    rows, cols, _, _, scale_inv = torch.ops.schedx.cast_transpose_fp8_current_scaling(t, fp8_dtype, pow2)
    return rows, cols, scale_inv


def _cast_delayed(t, fp8_dtype, pow2, scale, history):
    """(rows, cols, scale_inv) of t with the scale its history gave; this call's amax joins
    the history and the scale for the next call is taken from it (all on the device)."""
    rows, cols, amax, _ = torch.ops.schedx.cast_transpose_fp8_amax(t, scale, fp8_dtype)
    scale_inv = scale.reciprocal()
    history.copy_(torch.cat([amax, history[:-1]]))
    scale.copy_(amax_to_scale(history.amax().reshape(1), fp8_dtype, pow2))
    return rows, cols, scale_inv


class _Float8Matmul(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x2, weight, config, state):
        fwd, pow2 = config.forward_dtype, config.round_scales_to_power_of_2
        if state is None:
            x_rows, x_cols, x_inv = _cast_current(x2, fwd, pow2)
            w_rows, w_cols, w_inv = _cast_current(weight, fwd, pow2)
        else:
            x_rows, x_cols, x_inv = _cast_delayed(x2, fwd, pow2, state.scale_input, state.history_input)
            w_rows, w_cols, w_inv = _cast_delayed(weight, fwd, pow2, state.scale_weight, state.history_weight)
        # _scaled_mm: the first operand row-major, the second column-major.
        y = torch._scaled_mm(x_rows, w_rows.t(), scale_a=x_inv, scale_b=w_inv, out_dtype=x2.dtype,
                             use_fast_accum=True)
        ctx.save_for_backward(x_cols, w_cols, x_inv, w_inv)
        ctx.config, ctx.state = config, state
        return y

    @staticmethod
    def backward(ctx, grad):
        x_cols, w_cols, x_inv, w_inv = ctx.saved_tensors
        config, state = ctx.config, ctx.state
        grad = grad.contiguous()
        if state is None:
            g_rows, g_cols, g_inv = _cast_current(grad, config.grad_dtype, config.round_scales_to_power_of_2)
        else:
            g_rows, g_cols, g_inv = _cast_delayed(grad, config.grad_dtype, config.round_scales_to_power_of_2,
                                                  state.scale_grad_output, state.history_grad_output)
        # dgrad [M, K] = grad [M, N] @ W [N, K]; wgrad [N, K] = grad.T [N, M] @ x [M, K].
        grad_x = torch._scaled_mm(g_rows, w_cols, scale_a=g_inv, scale_b=w_inv, out_dtype=grad.dtype)
        grad_w = torch._scaled_mm(g_cols.t(), x_cols, scale_a=g_inv, scale_b=x_inv, out_dtype=grad.dtype)
        return grad_x, grad_w, None, None


class _DelayedState(torch.nn.Module):
    """Delayed scaling's scales and amax histories (buffers, so they follow .to() and
    state_dict)."""

    def __init__(self, length, device):
        super().__init__()
        for name in ("input", "weight", "grad_output"):
            self.register_buffer(f"scale_{name}", torch.ones(1, device=device))
            self.register_buffer(f"history_{name}", torch.zeros(length, device=device))


class Float8Linear(torch.nn.Linear):
    """torch.nn.Linear whose matmuls run in float8 with tensorwise scales (see module doc).
    Shapes: in_features and out_features multiples of 16, as torch._scaled_mm requires, and
    the rows of the input (all but its last dimension) a multiple of 16 in training."""

    def __init__(self, *args, config: Float8LinearConfig = Float8LinearConfig(), **kwargs):
        super().__init__(*args, **kwargs)
        self.config = config
        self.delayed = (_DelayedState(config.amax_history_len, self.weight.device)
                        if config.scaling == Scaling.DELAYED else None)

    @classmethod
    def from_float(cls, linear: torch.nn.Linear, config: Float8LinearConfig = Float8LinearConfig()):
        with torch.device("meta"):
            m = cls(linear.in_features, linear.out_features, bias=False, config=config)
        m.weight, m.bias = linear.weight, linear.bias
        if m.delayed is not None:
            m.delayed = _DelayedState(config.amax_history_len, linear.weight.device)
        return m

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x2 = x.reshape(-1, x.shape[-1])
        y = _Float8Matmul.apply(x2, self.weight.to(x.dtype), self.config, self.delayed)
        y = y.reshape(*x.shape[:-1], y.shape[-1])
        return y if self.bias is None else y + self.bias.to(y.dtype)

    def extra_repr(self):
        return f"{super().extra_repr()}, scaling={self.config.scaling.value}"


def convert_to_float8_training(model: torch.nn.Module, config: Float8LinearConfig = Float8LinearConfig(),
                               module_filter_fn: Optional[Callable[[torch.nn.Module, str], bool]] = None):
    """Replaces every torch.nn.Linear of `model` (for which module_filter_fn(module, fqn)
    holds, when given) by a Float8Linear sharing its parameters, in place; returns the
    model (all or nothing; the fqns replaced are logged at INFO level). torchao's
    convert_to_float8_training does the same for its Float8Linear."""
    _swap(model, lambda lin: Float8Linear.from_float(lin, config), module_filter_fn)
    return model
