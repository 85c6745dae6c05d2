"""Where a training step's host time goes on CUDA: ResNet-50 (or argv[1]), BF16 autocast, channels-last, batch 64,
stock against convtune.torch.optimize: wall time per step with the GPU's own time beside it (CUDA events), then the
Python functions that take the host's time in 10 optimize() steps (cProfile, by own time)."""
import cProfile
import copy
import pstats
import sys
import time

import torch
import torchvision

import convtune.torch as ct


def main():
    name = sys.argv[1] if len(sys.argv) > 1 else "resnet50"
    torch.manual_seed(0)
    device = torch.device("cuda")
    base = getattr(torchvision.models, name)(num_classes=1000).to(device).to(memory_format=torch.channels_last)
    x = torch.randn(64, 3, 224, 224, device=device).contiguous(memory_format=torch.channels_last)
    y = torch.randint(0, 1000, (64,), device=device)
    sides = {"stock": copy.deepcopy(base), "optimize": ct.optimize(copy.deepcopy(base))}
    steps = {}
    for side, model in sides.items():
        opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)

        def step(model=model, opt=opt):
            opt.zero_grad(set_to_none=True)
            with torch.autocast("cuda", dtype=torch.bfloat16):
                loss = torch.nn.functional.cross_entropy(model(x), y)
            loss.backward()
            opt.step()
        steps[side] = step
        for _ in range(5):
            step()
    torch.cuda.synchronize()
    for side, step in steps.items():
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        t0 = time.perf_counter()
        start.record()
        for _ in range(10):
            step()
        end.record()
        host = (time.perf_counter() - t0) / 10 * 1e3  # the host's time to issue a step (the queue may run behind)
        torch.cuda.synchronize()
        wall = (time.perf_counter() - t0) / 10 * 1e3
        print(f"{name} {side}: wall {wall:.2f} ms/step, host issue {host:.2f} ms/step, "
              f"GPU span {start.elapsed_time(end) / 10:.2f} ms/step", flush=True)
    profile = cProfile.Profile()
    profile.enable()
    for _ in range(10):
        steps["optimize"]()
    torch.cuda.synchronize()
    profile.disable()
    pstats.Stats(profile).sort_stats("tottime").print_stats(30)


if __name__ == "__main__":
    main()
