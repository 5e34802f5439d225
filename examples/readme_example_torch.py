import torch
import torch.nn.functional as F
import schedx.inductor

schedx.inductor.enable()  # every later torch.compile rewrites these patterns into schedx's kernels


def cast_fp8(x, s):  # PyTorch issue 130015's pattern, as its users write it
    f = (x * s).clamp(-448.0, 448.0).to(torch.float8_e4m3fn)
    return f, f.t().contiguous().t()


def int8_linear(x, weight, scales):  # gpt-fast's weight-only int8 linear, as its users write it
    return F.linear(x, weight.to(x.dtype)) * scales


x, s = torch.randn(16, 256, dtype=torch.bfloat16), torch.tensor([2.0])  # CUDA tensors run CUDA kernels
f, f_t = torch.compile(cast_fp8)(x, s)
assert torch.equal(f_t.view(torch.uint8), cast_fp8(x, s)[1].view(torch.uint8))  # bit for bit
w, scales = torch.randint(-128, 128, (512, 256), dtype=torch.int8), torch.rand(512, dtype=torch.bfloat16)
y = torch.compile(int8_linear)(x, w, scales)
print(schedx.last_variant("w8_linear"))  # the schedx kernel that ran; schedx.inductor.last_report() says why
