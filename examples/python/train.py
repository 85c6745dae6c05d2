"""Trains the Fashion-MNIST CNN (--model lenet) or a ResNet-18-style network (--model resnet18, images padded to 32x32)
in PyTorch with convtune's convolutions, beside the same run with PyTorch's own (cuDNN on a GPU), and prints time per
epoch or step, throughput, loss and test accuracy for each. On the first step the gradients of both are compared.
Under torchrun (one process per GPU) it trains data-parallel with DistributedDataParallel over NCCL.

  python train.py --model resnet18 --conv both --steps 300                # one GPU: cuDNN, then convtune
  torchrun --nproc_per_node 2 train.py --model resnet18 --conv convtune --steps 300
  python train.py --model lenet --conv both --epochs 2 --tune 60          # tune the layers for 60 s first
  torchrun --nproc_per_node 2 train.py --model resnet50 --data synthetic --amp bf16 --channels-last --fuse \
      --conv both --steps 300 --batch 64                                   # ResNet-50 as people train it

The data are Fashion-MNIST's IDX files (--data, default $CONVTUNE_DATA or Debian's dataset-fashion-mnist), or with
--data synthetic (ResNet-50's) random RGB images of --image-size and random labels.
cuDNN computes in FP32 (TF32 off) unless --tf32, so both sides do the same arithmetic; convtune is FP32 either way.
"""
import argparse
import contextlib
import statistics
import sys
import time

import torch
import torch.nn.functional as F

import common


def parse_args(argv):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--model", choices=sorted(common.MODELS), default="resnet18")
    p.add_argument("--conv", choices=["convtune", "torch", "both"], default="both",
                   help="whose convolutions: convtune's, PyTorch's (cuDNN), or both runs one after the other")
    p.add_argument("--steps", type=int, default=0, help="train this many steps (default: --epochs epochs)")
    p.add_argument("--epochs", type=int, default=1)
    p.add_argument("--batch", type=int, default=128, help="images per step and GPU")
    p.add_argument("--lr", type=float, default=None, help="default: 0.05 (SGD, resnet18), 1e-3 (Adam, lenet)")
    p.add_argument("--width", type=int, default=None, help="channels of the first layer (default 64 / 32)")
    p.add_argument("--limit", type=int, default=None, help="use the first N training images")
    p.add_argument("--test-limit", type=int, default=None)
    p.add_argument("--data", default=common.DEFAULT_DATA)
    p.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    p.add_argument("--tune", type=float, default=0, metavar="SECONDS",
                   help="tune the model's convolutions (all directions) for this long before training")
    p.add_argument("--tune-family", default="all", help="tune only this kernel family (default: every one)")
    p.add_argument("--tf32", action="store_true", help="let cuDNN use TF32 tensor cores (PyTorch's default)")
    p.add_argument("--amp", choices=["off", "bf16", "fp16"], default="off",
                   help="autocast forward and loss to this 16-bit type (both runs)")
    p.add_argument("--channels-last", action="store_true", help="model and images in torch.channels_last")
    p.add_argument("--fuse", action="store_true",
                   help="convtune.torch.optimize() instead of patch(): Conv + BatchNorm (+ shortcut) + ReLU fused")
    p.add_argument("--image-size", type=int, default=None, help="synthetic images' size (default: the model's)")
    p.add_argument("--warmup", type=int, default=5, help="steps left out of the timing (compiles, allocations)")
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--log-every", type=int, default=50)
    return p.parse_args(argv)


AMP_TYPES = {"bf16": torch.bfloat16, "fp16": torch.float16}


def synchronize(device):
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def evaluate(model, images, labels, batch=500):
    model.eval()
    correct = 0
    with torch.no_grad():
        for i in range(0, len(images), batch):
            correct += (model(images[i:i + batch]).argmax(1) == labels[i:i + batch]).sum().item()
    model.train()
    return correct / len(images)


def train(args, conv, model, data, test, rank, world, device, say):
    """Trains `model`; returns a summary dict. Every rank takes its slice of each global batch."""
    images, labels = data
    if world > 1:
        model = torch.nn.parallel.DistributedDataParallel(
            model, device_ids=[device.index] if device.type == "cuda" else None)
    if args.model in ("resnet18", "resnet50"):
        optimizer = torch.optim.SGD(model.parameters(), lr=args.lr or 0.05, momentum=0.9, weight_decay=5e-4)
    else:
        optimizer = torch.optim.Adam(model.parameters(), lr=args.lr or 1e-3)
    per_epoch = len(images) // (args.batch * world)
    steps = args.steps or args.epochs * per_epoch
    generator = torch.Generator().manual_seed(args.seed)  # the same batches for both runs and on every rank
    order = torch.empty(0, dtype=torch.long)
    step_ms, losses, epoch_start = [], [], time.perf_counter()
    for step in range(steps):
        if step % per_epoch == 0:
            order = torch.randperm(len(images), generator=generator)
        start = (step % per_epoch) * args.batch * world + rank * args.batch
        index = order[start:start + args.batch].to(device)
        synchronize(device)
        t0 = time.perf_counter()
        optimizer.zero_grad(set_to_none=True)
        batch = images[index]
        if args.channels_last:
            batch = batch.contiguous(memory_format=torch.channels_last)
        with (torch.autocast(device.type, dtype=AMP_TYPES[args.amp]) if args.amp != "off" else
              contextlib.nullcontext()):
            loss = F.cross_entropy(model(batch), labels[index])
        loss.backward()
        optimizer.step()
        synchronize(device)
        if step >= args.warmup:
            step_ms.append((time.perf_counter() - t0) * 1e3)
        losses.append(loss.item())
        if args.log_every and (step + 1) % args.log_every == 0:
            say(f"  {conv:8} step {step + 1:5}/{steps}  loss {statistics.mean(losses[-args.log_every:]):.4f}")
        if not args.steps and (step + 1) % per_epoch == 0:
            epoch = (step + 1) // per_epoch
            say(f"  {conv:8} epoch {epoch}: {time.perf_counter() - epoch_start:.2f} s, loss "
                f"{statistics.mean(losses[-per_epoch:]):.4f}, test accuracy {evaluate(model, *test):.4f}")
            epoch_start = time.perf_counter()
    median = statistics.median(step_ms) if step_ms else float("nan")
    tail = losses[-min(len(losses), 50):]
    return {"conv": conv, "steps": steps, "ms_per_step": median, "images_per_s": args.batch * world * 1e3 / median,
            "final_loss": statistics.mean(tail), "test_accuracy": evaluate(model, *test)}


def main(argv=None):
    args = parse_args(sys.argv[1:] if argv is None else argv)
    rank, world, device = common.distributed(torch.device(args.device).type)
    device = device or torch.device(args.device)
    say = print if rank == 0 else (lambda *a, **k: None)
    if device.type == "cuda":
        # cuDNN in FP32 unless asked: the comparison is then FP32 against FP32 (convtune has no TF32 mode yet).
        torch.backends.cudnn.allow_tf32 = args.tf32
        torch.backends.cuda.matmul.allow_tf32 = args.tf32
        torch.backends.cudnn.benchmark = True
    _, size = common.MODELS[args.model]
    width = args.width or (32 if args.model == "lenet" else 64)
    if args.data == "synthetic":
        size = args.image_size or size
        data = common.synthetic(args.limit or 2048, size, device, args.seed)
        test = common.synthetic(args.test_limit or 256, size, device, args.seed + 1)
    elif args.model == "resnet50":
        raise SystemExit("train.py: --model resnet50 takes RGB images: add --data synthetic")
    else:
        data = common.load(args.data, "train", args.limit, size, device)
        test = common.load(args.data, "t10k", args.test_limit, size, device)
    say(f"{args.model} (width {width}) on {world} x {device.type}"
        f"{' ' + torch.cuda.get_device_name(device) if device.type == 'cuda' else ''}, {len(data[0])} training "
        f"images, batch {args.batch} per process, PyTorch {torch.__version__}, cuDNN TF32 "
        f"{'on' if args.tf32 else 'off'}")
    convs = ["torch", "convtune"] if args.conv == "both" else [args.conv]
    models = {conv: common.build(args.model, width, conv, device, args.seed, args.fuse, args.channels_last)
              for conv in convs}
    if "convtune" in models and args.tune > 0:
        import convtune.torch
        example = data[0][:args.batch]
        start = time.perf_counter()
        results = convtune.torch.tune_model(models["convtune"], example, budget=args.tune, family=args.tune_family)
        faster = sum(1 for r in results if r.speedup and r.speedup > 1.01)
        say(f"tuned {len(results)} tasks in {time.perf_counter() - start:.1f} s ({faster} beat the built-in default)")
    if len(models) == 2 and world == 1 and args.model != "lenet":
        # Batch norms amplify rounding (a bias's gradient sums values that nearly cancel): two FP32 runs differ by
        # more than either's error, so each is measured against float64.
        ours, theirs, where = common.gradient_check_f64(models["torch"], models["convtune"], data[0][:args.batch],
                                                        data[1][:args.batch])
        say(f"first-step gradients against float64: convtune's worst relative L2 error {ours:.2e} ({where}), "
            f"PyTorch's {theirs:.2e} {'ok' if ours <= 2 * theirs + 1e-5 else 'MISMATCH'}")
    elif len(models) == 2 and world == 1:
        worst, where = common.gradient_check(models["torch"], models["convtune"], data[0][:args.batch],
                                             data[1][:args.batch])
        say(f"first-step gradients, convtune vs {'cuDNN' if device.type == 'cuda' else 'PyTorch'}: worst relative "
            f"L2 difference {worst:.2e} ({where}) {'ok' if worst < 1e-3 else 'MISMATCH'}")
    summaries = [train(args, conv, models[conv], data, test, rank, world, device, say) for conv in convs]
    for s in summaries:
        say(f"summary: conv={s['conv']} model={args.model} processes={world} batch={args.batch} steps={s['steps']} "
            f"amp={args.amp} channels_last={int(args.channels_last)} fuse={int(args.fuse)} "
            f"ms_per_step={s['ms_per_step']:.3f} images_per_s={s['images_per_s']:.1f} "
            f"final_loss={s['final_loss']:.4f} test_accuracy={s['test_accuracy']:.4f}")
    if world > 1:
        torch.distributed.destroy_process_group()


if __name__ == "__main__":
    main()
