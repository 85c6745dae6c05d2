"""Times torchvision models with PyTorch's own convolutions (stock) and with convtune's (convtune.torch.patch), side
by side in one process, and checks that both compute the same thing.

  python bench_models.py resnet50 mobilenet_v2                       # every mode, batch 64, on the GPU
  python bench_models.py resnet18 --modes bf16-cl --batch 32 --steps 10
  python bench_models.py resnet50 --first-step                        # also a fresh process per side: first step

Modes: fp32 (float32, TF32 off everywhere), tf32 (PyTorch's defaults: cuDNN may use TF32, and so does convtune),
bf16 (autocast to bfloat16, NCHW), bf16-cl (the same with model and inputs channels_last), and likewise fp32-cl,
tf32-cl. Per model and mode it prints, for stock and convtune: the median training step (SGD with momentum, cross
entropy, random images and labels at --image size), images/s, inference at --batch and at batch 1, and with
--first-step the first training step of a fresh process (convtune with an empty program cache, stock with cuDNN's
benchmark search), and with --new-batch the first step at another batch size after warm steps. --sides stock,
convtune,fused adds convtune.torch.optimize() (Conv + BatchNorm [+ shortcut] + ReLU blocks fused: in inference one
convolution, in training convtune's batch norm passes). The check runs one training-mode forward and backward of
every side on the same weights and images and compares logits and every parameter's gradient with a float64 run of
the model (all gradients as one vector): each side's error must be within 2x stock's (or the mode's floor); the fused
side's eval-mode logits are checked too. Every side uses cudnn.benchmark = True. Results as JSON with --out, as Markdown with --markdown.
"""
import argparse
import copy
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

import torch
import torch.nn.functional as F

MODES = {
    # name: (autocast dtype or None, channels_last, TF32 allowed)
    "fp32": (None, False, False), "fp32-cl": (None, True, False),
    "tf32": (None, False, True), "tf32-cl": (None, True, True),
    "bf16": (torch.bfloat16, False, True), "bf16-cl": (torch.bfloat16, True, True),
}
# Relative L2 error floors of the check, by mode: below these a difference is rounding whatever stock's error.
FLOORS = {"fp32": 1e-4, "tf32": 2e-2, "bf16": 1e-1}


def parse_args(argv):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("models", nargs="+", help="torchvision model names (resnet50, mobilenet_v2, ...)")
    p.add_argument("--modes", default="fp32,tf32,bf16,bf16-cl", help="comma-separated, of: " + ", ".join(MODES))
    p.add_argument("--batch", type=int, default=64)
    p.add_argument("--image", type=int, default=224)
    p.add_argument("--steps", type=int, default=20, help="timed training steps per side (in rounds of 5)")
    p.add_argument("--warmup", type=int, default=5)
    p.add_argument("--inference-batches", default="64,1", help="comma-separated; empty for none")
    p.add_argument("--no-check", action="store_true", help="skip the logits and gradients check")
    p.add_argument("--first-step", action="store_true", help="time each side's first step in a fresh process")
    p.add_argument("--new-batch", type=int, default=0, help="after warm steps, time one step at this batch size")
    p.add_argument("--sides", default="stock,convtune",
                   help="comma-separated, the first the baseline: stock (PyTorch), convtune (patch()), fused "
                        "(optimize(): Conv+BatchNorm+ReLU blocks fused in training and inference)")
    p.add_argument("--profile", type=int, default=0, metavar="N",
                   help="also profile 3 training steps of each side (torch.profiler) and print its N costliest GPU "
                        "kernels and the host time per step")
    p.add_argument("--device", default="cuda")
    p.add_argument("--out", help="write the results as JSON")
    p.add_argument("--markdown", help="write the tables as Markdown")
    p.add_argument("--_first-step-of", dest="first_step_of", help=argparse.SUPPRESS)  # internal: MODEL,MODE,SIDE
    return p.parse_args(argv)


def build(name, mode, side, device, seed=0):
    import torchvision
    torch.manual_seed(seed)
    model = torchvision.models.get_model(name, weights=None, num_classes=1000).to(device)
    if MODES[mode][1]:
        model = model.to(memory_format=torch.channels_last)
    if side == "convtune":
        import convtune.torch as ct
        ct.patch(model)
    elif side == "fused":
        import convtune.torch as ct
        model = ct.optimize(model)
    return model


def check_inference(name, mode, args, device, sides):
    """Eval-mode logits of each side (the fused one runs its blocks fused) against a float64 run, with the batch
    norms' statistics and affine parameters set away from their initial values so that a wrong fold shows."""
    set_precision(mode)
    x, y = images(8, args.image, mode, device, seed=9)
    logits = {}
    for side in ["float64"] + sides:
        model = build(name, mode, "stock" if side == "float64" else side, device)
        torch.manual_seed(1)
        with torch.no_grad():
            for module in model.modules():  # statistics and affine parameters away from the identity
                if isinstance(module, torch.nn.BatchNorm2d):
                    module.running_mean.uniform_(-0.2, 0.2)
                    module.running_var.uniform_(0.5, 1.5)
                    module.weight.uniform_(0.5, 1.5)
                    module.bias.uniform_(-0.2, 0.2)
        model.eval()
        with torch.inference_mode():
            if side == "float64":
                logits[side] = model.double()(x.double())
            else:
                with autocast(mode, device):
                    logits[side] = model(x).double()
        del model
    errors = {side: relative_error(logits[side], logits["float64"]) for side in sides}
    floor = FLOORS[mode.split("-")[0]]
    return {"errors": errors, "passed": all(e <= max(2 * errors[sides[0]], floor) for e in errors.values())}


def set_precision(mode):
    tf32 = MODES[mode][2]
    torch.backends.cudnn.allow_tf32 = tf32
    torch.backends.cuda.matmul.allow_tf32 = False  # PyTorch's default: matmuls (the classifier) in FP32
    torch.backends.cudnn.benchmark = True


def images(batch, size, mode, device, seed=1):
    g = torch.Generator(device="cpu").manual_seed(seed)
    x = torch.randn(batch, 3, size, size, generator=g).to(device)
    y = torch.randint(0, 1000, (batch,), generator=g).to(device)
    if MODES[mode][1]:
        x = x.contiguous(memory_format=torch.channels_last)
    return x, y


def autocast(mode, device):
    dtype = MODES[mode][0]
    return torch.autocast(device.type, dtype=dtype) if dtype is not None else torch.autocast(device.type, enabled=False)


class Trainer:
    def __init__(self, model, mode, device):
        self.model, self.mode, self.device = model, mode, device
        self.optimizer = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)

    def step(self, x, y):
        self.optimizer.zero_grad(set_to_none=True)
        with autocast(self.mode, self.device):
            loss = F.cross_entropy(self.model(x), y)
        loss.backward()
        self.optimizer.step()
        return loss


def timed(fn, device):
    """Milliseconds of one call of fn, by CUDA events (or the host clock on the CPU)."""
    if device.type == "cuda":
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        fn()
        end.record()
        end.synchronize()
        return start.elapsed_time(end)
    t0 = time.perf_counter()
    fn()
    return (time.perf_counter() - t0) * 1e3


def synchronize(device):
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def first_step(name, mode, side, args, device):
    """Seconds of the first training step of a fresh model in this process (build and transfer left out)."""
    set_precision(mode)
    model = build(name, mode, side, device)
    trainer = Trainer(model, mode, device)
    x, y = images(args.batch, args.image, mode, device)
    synchronize(device)
    t0 = time.perf_counter()
    trainer.step(x, y)
    synchronize(device)
    return time.perf_counter() - t0


def first_step_fresh(name, mode, side, args):
    """The first step in a new process; convtune with an empty program cache (a fresh machine's)."""
    env = dict(os.environ)
    with tempfile.TemporaryDirectory() as cache:
        env["CONVTUNE_CACHE_DIR"] = cache
        command = [sys.executable, os.path.abspath(__file__), name, "--batch", str(args.batch), "--image",
                   str(args.image), "--device", args.device, "--_first-step-of", f"{name},{mode},{side}"]
        out = subprocess.run(command, env=env, capture_output=True, text=True, check=False)
    if out.returncode != 0:
        raise RuntimeError(f"first step of {name} {mode} {side} failed:\n{out.stderr[-4000:]}")
    return float(out.stdout.strip().splitlines()[-1])


def relative_error(got, want):
    got, want = got.double(), want.double()
    return ((got - want).norm() / want.norm().clamp_min(1e-30)).item()


def check(name, mode, args, device, sides):
    """Training-mode logits and gradients of each side (the fused one through its fused training blocks) against a
    float64 run of the same model and images; each side within twice stock's error (or the mode's floor)."""
    set_precision(mode)
    x, y = images(args.batch, args.image, mode, device, seed=7)
    results = {}
    for side in ["float64"] + sides:
        model = build(name, mode, "stock" if side == "float64" else side, device)
        model.train()
        if side == "float64":
            model = model.double()
            logits = model(x.double())
        else:
            with autocast(mode, device):
                logits = model(x)
        F.cross_entropy(logits.double(), y).backward()
        results[side] = (logits.detach().double(), {n: p.grad.double() for n, p in model.named_parameters()
                                                    if p.grad is not None})
        del model
    ref_logits, ref_grads = results["float64"]
    names = sorted(ref_grads)
    reference = torch.cat([ref_grads[n].flatten() for n in names])
    out = {}
    for side in sides:
        logits, grads = results[side]
        # All gradients as one vector: a parameter whose float64 gradient is (nearly) zero, as a bias before a
        # BatchNorm's, has no meaningful error of its own. The worst single parameter is reported beside it.
        worst = max(names, key=lambda n: relative_error(grads[n], ref_grads[n]))
        out[side] = {"logits": relative_error(logits, ref_logits),
                     "gradient": relative_error(torch.cat([grads[n].flatten() for n in names]), reference),
                     "worst_parameter": worst,
                     "worst_parameter_error": relative_error(grads[worst], ref_grads[worst])}
    floor = FLOORS[mode.split("-")[0]]
    out["passed"] = all(out[side][k] <= max(2 * out[sides[0]][k], floor) for side in sides[1:]
                        for k in ("logits", "gradient"))
    return out


def measure(name, mode, args, device, sides):
    set_precision(mode)
    row = {"model": name, "mode": mode, "batch": args.batch}
    trainers, firsts = {}, {}
    for side in sides:
        model = build(name, mode, side, device)
        trainers[side] = Trainer(model, mode, device)
    x, y = images(args.batch, args.image, mode, device)
    for side in sides:
        synchronize(device)
        t0 = time.perf_counter()
        trainers[side].step(x, y)  # the first step in this process (compiles, benchmark search)
        synchronize(device)
        firsts[side] = time.perf_counter() - t0
        for _ in range(args.warmup - 1):
            trainers[side].step(x, y)
    times = {side: [] for side in sides}
    rounds = max(1, args.steps // 5)
    for _ in range(rounds):  # alternate the sides in rounds, so drift hits both alike
        for side in sides:
            for _ in range(5):
                times[side].append(timed(lambda: trainers[side].step(x, y), device))
    for side in sides:
        median = statistics.median(times[side])
        row[side] = {"train_ms": median, "train_img_s": args.batch * 1e3 / median,
                     "first_step_in_process_s": firsts[side]}
    if args.new_batch:
        xn, yn = images(args.new_batch, args.image, mode, device, seed=3)
        for side in sides:
            row[side]["new_batch_step_s"] = timed(lambda: trainers[side].step(xn, yn), device) / 1e3
            row[side]["new_batch_warm_ms"] = statistics.median(
                timed(lambda: trainers[side].step(xn, yn), device) for _ in range(3))
    for batch in [int(b) for b in args.inference_batches.split(",") if b]:
        xi, _ = images(batch, args.image, mode, device, seed=5)
        for side in sides:
            model = trainers[side].model
            model.eval()
            with torch.inference_mode(), autocast(mode, device):
                for _ in range(3):
                    model(xi)
                samples = []
                for _ in range(max(5, args.steps // 2)):
                    samples.append(timed(lambda: model(xi), device))
            model.train()
            row[side][f"inference_ms_b{batch}"] = statistics.median(samples)
    if args.profile:
        for side in sides:
            row[side]["profile"] = profile(trainers[side].step, (x, y), args.profile, device)
            print(f"profile {name} {mode} {side} training step:\n" + row[side]["profile"]["text"], flush=True)
        batches = [int(b) for b in args.inference_batches.split(",") if b]
        if batches:
            xi, _ = images(min(batches), args.image, mode, device, seed=5)
            for side in sides:
                model = trainers[side].model
                model.eval()

                def infer():
                    with torch.inference_mode(), autocast(mode, device):
                        model(xi)
                row[side]["profile_inference"] = profile(infer, (), args.profile, device)
                model.train()
                print(f"profile {name} {mode} {side} inference at batch {min(batches)}:\n" +
                      row[side]["profile_inference"]["text"], flush=True)
    del trainers
    torch.cuda.empty_cache() if device.type == "cuda" else None
    return row


def profile(fn, args, top, device, steps=3):
    """GPU time per call of fn(*args) by kernel (the `top` costliest), the GPU total and the host (CPU) time."""
    from torch.profiler import ProfilerActivity
    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if device.type == "cuda" else [])
    synchronize(device)
    t0 = time.perf_counter()
    with torch.profiler.profile(activities=activities) as prof:
        for _ in range(steps):
            fn(*args)
        synchronize(device)
    wall = (time.perf_counter() - t0) * 1e3 / steps
    kernels = []
    for event in prof.key_averages():
        device_type = str(getattr(event, "device_type", ""))
        gpu_us = getattr(event, "self_device_time_total", None)
        if gpu_us is None:
            gpu_us = getattr(event, "self_cuda_time_total", 0)
        if "CUDA" in device_type and gpu_us > 0:
            kernels.append((gpu_us / steps, event.count // steps, event.key))
    kernels.sort(reverse=True)
    gpu_ms = sum(k[0] for k in kernels) / 1e3
    lines = [f"  GPU {gpu_ms:.2f} ms/step in {sum(k[1] for k in kernels)} kernels; wall {wall:.2f} ms/step (profiled)"]
    for us, count, key in kernels[:top]:
        lines.append(f"  {us / 1e3:8.3f} ms {count:4d}x  {key[:110]}")
    return {"gpu_ms": gpu_ms, "wall_ms": wall, "text": "\n".join(lines),
            "top": [{"ms": us / 1e3, "count": c, "kernel": k} for us, c, k in kernels[:top]]}


def table(rows, sides):
    """One Markdown row per model and mode: each metric as the sides' values, then each other side's ratio to the
    first."""
    if len(sides) < 2:
        return "\n".join(json.dumps(r) for r in rows)
    names, base = " / ".join(sides), sides[0]
    others = sides[1:]
    ratio_head = "".join(f" {o} / {base} |" for o in others)
    metrics = ["train_ms", "train_img_s"]
    metrics += sorted({k for r in rows for k in r[base] if k.startswith("inference")} |
                      {k for r in rows for k in r[base] if k.startswith(("first", "new_batch"))})
    head = "| model | mode | batch |" + "".join(f" {m} {names} |{ratio_head}" for m in metrics) + " check |"
    lines = [head, "|" + "---|" * (head.count("|") - 1)]
    for r in rows:
        line = f"| {r['model']} | {r['mode']} | {r['batch']} |"
        for m in metrics:
            values = [r[s].get(m) for s in sides]
            if any(v is None for v in values):
                line += " - |" + " - |" * len(others)
                continue
            line += " " + " / ".join(f"{v:.3g}" for v in values) + " |"
            line += "".join(f" {v / values[0]:.2f} |" for v in values[1:])
        checks = []
        if "check" in r:
            c = r["check"]
            checks.append(f"train {'ok' if c['passed'] else 'FAILED'}: logits " +
                          " / ".join(f"{c[s]['logits']:.1e}" for s in sides) + ", grads " +
                          " / ".join(f"{c[s]['gradient']:.1e}" for s in sides))
        if "check_inference" in r:
            c = r["check_inference"]
            checks.append(f"eval {'ok' if c['passed'] else 'FAILED'}: logits " +
                          " / ".join(f"{c['errors'][s]:.1e}" for s in sides))
        lines.append(line + " " + "; ".join(checks) + " |")
    return "\n".join(lines)


def main(argv):
    args = parse_args(argv)
    device = torch.device(args.device if torch.cuda.is_available() or args.device == "cpu" else "cpu")
    if args.first_step_of:
        name, mode, side = args.first_step_of.split(",")
        print(first_step(name, mode, side, args, device))
        return 0
    modes = [m for m in args.modes.split(",") if m]
    for m in modes:
        if m not in MODES:
            print(f"bench_models: unknown mode {m!r}: expected one of {', '.join(MODES)}", file=sys.stderr)
            return 2
    sides = [s for s in args.sides.split(",") if s]
    rows = []
    for name in args.models:
        for mode in modes:
            print(f"bench_models: {name} {mode} ...", file=sys.stderr, flush=True)
            row = measure(name, mode, args, device, sides)
            if not args.no_check:
                if len(sides) > 1:
                    row["check"] = check(name, mode, args, device, sides)
                if "fused" in sides:
                    row["check_inference"] = check_inference(name, mode, args, device, sides)
            if args.first_step:
                for side in sides:
                    row[side]["first_step_fresh_s"] = first_step_fresh(name, mode, side, args)
            rows.append(row)
            print(table([row], sides).splitlines()[-1], flush=True)
    text = table(rows, sides)
    print(text)
    info = {"device": torch.cuda.get_device_name(device) if device.type == "cuda" else "cpu",
            "torch": torch.__version__, "cudnn": torch.backends.cudnn.version(), "command": " ".join(sys.argv)}
    if args.out:
        with open(args.out, "w") as f:
            json.dump({"info": info, "rows": rows}, f, indent=1)
    if args.markdown:
        with open(args.markdown, "w") as f:
            f.write(f"{info['device']}, PyTorch {info['torch']}, cuDNN {info['cudnn']}\n\n`{info['command']}`\n\n{text}\n")
    failed = [r for r in rows if any(not r[k]["passed"] for k in ("check", "check_inference") if k in r)]
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
