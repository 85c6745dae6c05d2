#!/usr/bin/env python3
"""Seed 002's MLP in PyTorch, trained exactly like `convtune train mlp`, for side-by-side epoch times.

784-150-10, sigmoid on both layers, loss 0.5 * sum over outputs of (o - t)^2 averaged over the batch, torch SGD
with momentum (v = m v + g; w -= lr v, which is convtune's dW = lr * (-g) + m dW; W += dW). The first --limit
training images and all test images sit on the GPU before timing; each epoch is timed with
torch.cuda.synchronize around it, the first epoch is warm-up, the rest give best and median ms.
No network access: the data folder (four gzip or raw IDX files) is given.
  mlp_torch.py DATA_DIR [--limit 4000] [--batches 1,32,128] [--epochs 4] [--lr 0.001] [--momentum 0.9]
"""
import argparse
import gzip
import os
import statistics
import struct
import time

import torch


def idx_tensor(path):
    """An IDX file (magic 0x000008NN: unsigned bytes, NN dimensions) as a uint8 tensor of its shape."""
    with open(path, "rb") as probe:
        is_gzip = probe.read(2) == b"\x1f\x8b"
    with (gzip.open(path, "rb") if is_gzip else open(path, "rb")) as f:
        raw = f.read()
    magic, = struct.unpack(">I", raw[:4])
    if magic >> 8 != 0x08:
        raise SystemExit(f"{path}: magic 0x{magic:08x} is not an unsigned-byte IDX file")
    ndim = magic & 0xFF
    shape = struct.unpack(">" + "I" * ndim, raw[4:4 + 4 * ndim])
    return torch.frombuffer(bytearray(raw[4 + 4 * ndim:]), dtype=torch.uint8).reshape(shape)


def find(data_dir, name):
    for candidate in (name, name + ".gz"):
        path = os.path.join(data_dir, candidate)
        if os.path.isfile(path):
            return path
    raise SystemExit(f"{data_dir} has no {name} (nor {name}.gz)")


def dataset(data_dir, prefix, limit, device):
    images = idx_tensor(find(data_dir, f"{prefix}-images-idx3-ubyte"))
    labels = idx_tensor(find(data_dir, f"{prefix}-labels-idx1-ubyte"))
    if limit > 0:
        images, labels = images[:limit], labels[:limit]
    x = (images.reshape(images.shape[0], -1).float() / 255.0).to(device)
    y = labels.long().to(device)
    return x, y, torch.nn.functional.one_hot(y, 10).float()


def seed002_net(device):
    torch.manual_seed(1)
    net = torch.nn.Sequential(torch.nn.Linear(784, 150), torch.nn.Sigmoid(), torch.nn.Linear(150, 10),
                              torch.nn.Sigmoid()).to(device)
    # Seed 002's initialisation ranges: +-1/sqrt(fan_in), biases included.
    with torch.no_grad():
        for layer in (net[0], net[2]):
            bound = layer.in_features ** -0.5
            layer.weight.uniform_(-bound, bound)
            layer.bias.uniform_(-bound, bound)
    return net


def run(batch, args, train, test, device):
    x, y, t = train
    net = seed002_net(device)
    opt = torch.optim.SGD(net.parameters(), lr=args.lr, momentum=args.momentum)
    count = x.shape[0]
    times = []
    for _ in range(args.epochs):
        torch.cuda.synchronize()
        start = time.perf_counter()
        for first in range(0, count, batch):
            out = net(x[first:first + batch])
            loss = 0.5 * ((out - t[first:first + batch]) ** 2).sum(dim=1).mean()
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
        torch.cuda.synchronize()
        times.append(1000.0 * (time.perf_counter() - start))
    with torch.no_grad():
        tx, ty, tt = test
        out = net(tx)
        accuracy = (out.argmax(dim=1) == ty).float().mean().item()
        mse = ((out - tt) ** 2).mean().item()
    timed = times[1:] if len(times) > 1 else times
    print(f"torch batch {batch}: epoch ms best {min(timed):.3f} median {statistics.median(timed):.3f} "
          f"(warm-up {times[0]:.1f}) over {len(timed)} epochs of {count} images; "
          f"test loss {mse:.5f} test acc {accuracy:.4f}", flush=True)


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("data_dir")
    parser.add_argument("--limit", type=int, default=4000)
    parser.add_argument("--batches", default="1,32,128")
    parser.add_argument("--epochs", type=int, default=4)
    parser.add_argument("--lr", type=float, default=0.001)
    parser.add_argument("--momentum", type=float, default=0.9)
    args = parser.parse_args()
    device = torch.device("cuda")
    print(f"torch {torch.__version__} on {torch.cuda.get_device_name(0)}", flush=True)
    train = dataset(args.data_dir, "train", args.limit, device)
    test = dataset(args.data_dir, "t10k", -1, device)
    for batch in (int(b) for b in args.batches.split(",")):
        run(batch, args, train, test, device)


if __name__ == "__main__":
    main()
