"""Host time per convolution call on CUDA, where a tiny layer makes the GPU wait for the host: stock PyTorch
(cuDNN), convtune.torch.conv2d, its parts (the cached plan's Python run, the C++ launch alone), in microseconds."""
import time

import torch
import torch.nn.functional as F

import convtune.torch as ct


def per_call(fn, n=3000):
    for _ in range(200):
        fn()
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    for _ in range(n):
        fn()
    torch.cuda.synchronize()
    return (time.perf_counter() - t0) / n * 1e6


torch.backends.cudnn.benchmark = True
for layout in ("nchw", "nhwc"):
    fmt = torch.channels_last if layout == "nhwc" else torch.contiguous_format
    x = torch.randn(1, 64, 7, 7, device="cuda", dtype=torch.bfloat16).contiguous(memory_format=fmt)
    w = torch.randn(64, 64, 3, 3, device="cuda", dtype=torch.bfloat16).contiguous(memory_format=fmt)
    y = ct.conv2d(x, w, padding=1)
    conv = ct._conv(x.shape, w.shape, (1, 1), (1, 1), (1, 1), 1, x.device, x.dtype, ct._layout(x, w))
    plan = conv.plan("fwd")
    out = torch.empty_like(y)
    pointers = (x.data_ptr(), w.data_ptr(), out.data_ptr())
    ws = torch.empty(max(1, plan._plan.memory_bytes), dtype=torch.uint8, device="cuda")
    stream = torch.cuda.current_stream().cuda_stream
    rows = {
        "stock F.conv2d": lambda: F.conv2d(x, w, padding=1),
        "convtune.torch.conv2d": lambda: ct.conv2d(x, w, padding=1),
        "_Conv.run (cached plan, Python)": lambda: conv.run("fwd", x, w, conv.y_shape),
        "run_pointers (C++ alone)": lambda: plan._plan.run_pointers(pointers, ws.data_ptr(), stream),
        "torch.empty of the output": lambda: torch.empty(conv.y_shape, dtype=x.dtype, device=x.device),
    }
    with torch.no_grad():
        for name, fn in rows.items():
            print(f"{layout} {name:36s} {per_call(fn):7.1f} us/call   ({plan.family} {plan.describe()[:60]})")
