"""bf16 CUDA tensors through convtune.torch where the plan is a widened family (an FP32 family on FP32 copies whose
staging buffers are ranges of the per-call workspace from PyTorch's allocator): Fashion-MNIST's first convolution
(C=1, whose backward-data the native 16-bit families declare a poor fit) under autograd, against float64, the
same convolution on two streams at once, and the plan each direction took. Run on the GPU machine with the package
from scripts/gpu/pack_python.sh on PYTHONPATH."""
import torch
import convtune
import convtune.torch as ct


def rel(got, want):
    return ((got.double() - want).norm() / want.norm()).item()


def main():
    torch.manual_seed(3)
    dev = "cuda"
    x = torch.randn(64, 1, 28, 28, device=dev).bfloat16().requires_grad_()
    w = torch.randn(32, 1, 5, 5, device=dev).bfloat16().requires_grad_()
    y = ct.conv2d(x, w, None, 1, 2)
    dy = torch.randn_like(y)
    gx, gw = torch.autograd.grad(y, (x, w), dy)
    x64, w64, dy64 = x.detach().double(), w.detach().double(), dy.double()
    y64 = torch.nn.functional.conv2d(x64, w64, padding=2)
    gx64, gw64 = torch.autograd.grad(torch.nn.functional.conv2d(x64.requires_grad_(), w64.requires_grad_(), padding=2),
                                     (x64, w64), dy64)
    errors = {"fwd": rel(y, y64), "bwd-data": rel(gx, gx64), "bwd-filter": rel(gw, gw64)}
    print("relative L2 vs float64:", {k: f"{v:.2e}" for k, v in errors.items()})
    for direction in ("fwd", "bwd-data", "bwd-filter"):
        plan = convtune.Plan((64, 1, 28, 28), (32, 1, 5, 5), padding=2, direction=direction, device="cuda:0",
                             math="bf16")
        print(f"{direction}: {plan.family} workspace {plan.workspace_bytes} memory {plan.memory_bytes}")
    # The same layer on two streams at once, each call with its own workspace: results must match the serial ones.
    s1, s2 = torch.cuda.Stream(), torch.cuda.Stream()
    xs = [torch.randn(64, 1, 28, 28, device=dev).bfloat16() for _ in range(2)]
    serial = [ct.conv2d(v.detach(), w.detach(), None, 1, 2) for v in xs]
    torch.cuda.synchronize()
    dys = [torch.randn(64, 32, 28, 28, device=dev).bfloat16() for _ in range(2)]
    want = [torch.nn.grad.conv2d_input(v.shape, w.detach().double(), d.double(), padding=2) for v, d in zip(xs, dys)]
    outs = [None, None]
    for _ in range(20):
        for i, s in enumerate((s1, s2)):
            with torch.cuda.stream(s):
                outs[i] = torch.ops.convtune.conv2d_backward_data(w.detach(), dys[i], list(xs[i].shape), [1, 1], [2, 2],
                                                                   [1, 1], 1) if hasattr(torch.ops, "convtune") else None
    torch.cuda.synchronize()
    concurrent = [rel(o, wnt) for o, wnt in zip(outs, want) if o is not None]
    print("two streams, backward-data relative L2:", [f"{e:.2e}" for e in concurrent])
    ok = all(e < 8e-3 for e in errors.values()) and all(e < 8e-3 for e in concurrent)
    print("widened torch check:", "PASSED" if ok else "FAILED")


if __name__ == "__main__":
    main()
