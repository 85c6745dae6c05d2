#!/usr/bin/env python3
"""The same LeNet-style CNN as `convtune train cnn --arch lenet` in PyTorch (cuDNN), for side-by-side figures.

Trains with the same batch size, optimiser (Adam, lr 1e-3) and epochs on the Fashion-MNIST gzip IDX files, then
evaluates the 10,000 test images in batches of 100 with torch.cuda.Event around every layer's forward (the same
op times `convtune eval` prints) and prints accuracy. No network access: the data folder is given.
  cnn_torch.py DATA_DIR [--epochs 8] [--batch 64] [--eval-batch 100] [--limit N] [--math fp32|tf32|bf16]
--math: fp32 turns TF32 off in cuDNN and cuBLAS, tf32 turns it on in both, bf16 trains under torch.autocast with
bfloat16 (FP32 master weights), the comparison for `convtune train cnn --math`.
"""
import argparse
import gzip
import struct
import time

import torch
import torch.nn as nn
import torch.nn.functional as F


def read_idx(path):
    opener = gzip.open if path.endswith(".gz") else open
    with opener(path, "rb") as f:
        data = f.read()
    magic = struct.unpack(">I", data[:4])[0]
    dims = magic & 0xFF
    shape = struct.unpack(">" + "I" * dims, data[4:4 + 4 * dims])
    return torch.frombuffer(bytearray(data[4 + 4 * dims:]), dtype=torch.uint8).reshape(shape)


def load(data_dir, prefix):
    images = read_idx(f"{data_dir}/{prefix}-images-idx3-ubyte.gz").float() / 255.0
    labels = read_idx(f"{data_dir}/{prefix}-labels-idx1-ubyte.gz").long()
    return images.unsqueeze(1), labels


class LeNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2d(1, 32, 5, padding=2)
        self.conv2 = nn.Conv2d(32, 64, 5, padding=2)
        self.fc1 = nn.Linear(64 * 7 * 7, 256)
        self.fc2 = nn.Linear(256, 10)
        # The same order of steps as convtune's unfused network; eval also groups them like its fused steps.
        self.steps = [("conv1", self.conv1), ("relu1", F.relu), ("pool1", lambda x: F.max_pool2d(x, 2)),
                      ("conv2", self.conv2), ("relu2", F.relu), ("pool2", lambda x: F.max_pool2d(x, 2)),
                      ("flatten", lambda x: x.flatten(1)), ("fc1", self.fc1), ("relu3", F.relu), ("fc2", self.fc2)]

    def forward(self, x):
        for _, step in self.steps:
            x = step(x)
        return x


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("data")
    ap.add_argument("--epochs", type=int, default=8)
    ap.add_argument("--batch", type=int, default=64)
    ap.add_argument("--eval-batch", type=int, default=100)
    ap.add_argument("--limit", type=int, default=-1)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--math", choices=["fp32", "tf32", "bf16"], default="fp32")
    args = ap.parse_args()
    torch.manual_seed(args.seed)
    torch.backends.cudnn.allow_tf32 = torch.backends.cuda.matmul.allow_tf32 = args.math == "tf32"
    autocast = torch.autocast("cuda", dtype=torch.bfloat16, enabled=args.math == "bf16")
    torch.backends.cudnn.benchmark = True
    dev = torch.device("cuda")
    print(f"torch {torch.__version__}, cuDNN {torch.backends.cudnn.version()}, {torch.cuda.get_device_name(0)}, "
          f"math {args.math}")
    train_x, train_y = load(args.data, "train")
    test_x, test_y = load(args.data, "t10k")
    if args.limit > 0:
        train_x, train_y = train_x[:args.limit], train_y[:args.limit]
    train_x, train_y, test_x, test_y = (t.to(dev) for t in (train_x, train_y, test_x, test_y))
    model = LeNet().to(dev)
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    steps = len(train_x) // args.batch  # a final partial batch is dropped, as convtune does
    for epoch in range(1, args.epochs + 1):
        model.train()
        order = torch.randperm(len(train_x), device=dev)
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        total = 0.0
        for s in range(steps):
            idx = order[s * args.batch:(s + 1) * args.batch]
            with autocast:
                loss = F.cross_entropy(model(train_x[idx]), train_y[idx])
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
            total += loss.item()  # one sync per step, as convtune reads its loss back per step
        torch.cuda.synchronize()
        ms = (time.perf_counter() - t0) * 1000
        with torch.no_grad(), autocast:
            acc = (model(test_x).argmax(1) == test_y).float().mean().item()
        print(f"epoch {epoch}: {ms:.1f} ms, loss {total / steps:.4f}, test accuracy {acc:.4f}")

    model.eval()
    for limit in (len(test_x), 100, 10):
        names = [n for n, _ in model.steps]
        times = {n: 0.0 for n in names}
        correct = 0
        batch = min(args.eval_batch, limit)
        with torch.no_grad():
            model(test_x[:batch])  # warm-up: cuDNN picks its algorithms outside the timed pass
            for first in range(0, limit, batch):
                x = test_x[first:first + batch]
                for name, step in model.steps:
                    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
                    start.record()
                    x = step(x)
                    end.record()
                    end.synchronize()
                    times[name] += start.elapsed_time(end)
                correct += (x.argmax(1) == test_y[first:first + batch]).sum().item()
        print(f"\neval --limit {limit} (batch {batch}): per-layer forward op time (torch.cuda.Event)")
        print(f"{'layer':<20}{'op ms':>10}{'us/image':>12}")
        for name in names:
            print(f"{name:<20}{times[name]:>10.3f}{times[name] * 1000 / limit:>12.3f}")
        groups = {"conv1+relu1+pool1": ["conv1", "relu1", "pool1"], "conv2+relu2+pool2": ["conv2", "relu2", "pool2"]}
        for group, members in groups.items():
            ms = sum(times[m] for m in members)
            print(f"{group:<20}{ms:>10.3f}{ms * 1000 / limit:>12.3f}")
        total = sum(times.values())
        print(f"{'total':<20}{total:>10.3f}{total * 1000 / limit:>12.3f}")
        print(f"accuracy {correct / limit:.4f} ({limit} images)")


if __name__ == "__main__":
    main()
