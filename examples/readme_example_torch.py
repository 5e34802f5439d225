import torch
import schedx.nn  # registers torch.ops.schedx

x = torch.randn(32, 256, dtype=torch.bfloat16)  # CUDA tensors run the CUDA kernels
scale = torch.tensor([2.0])
rows, cols = torch.ops.schedx.cast_transpose_fp8(x, scale, torch.float8_e4m3fn)
f = (x.float() * 2).to(torch.float8_e4m3fn)
assert torch.equal(rows.view(torch.uint8), f.view(torch.uint8))
assert cols.stride() == f.t().contiguous().t().stride()

model = torch.nn.Sequential(torch.nn.Linear(256, 512, dtype=torch.bfloat16), torch.nn.SiLU())
schedx.nn.convert_to_int8_weight_only(model)  # every nn.Linear -> Int8WeightOnlyLinear
y = torch.compile(model, fullgraph=True)(x)  # the op traces with no graph break
assert y.shape == (32, 512)
