"""Reference figures from PyTorch on the same GPU, in the same run: device-to-device copy bandwidth and SGEMM.

Prints one 'torch:' line per figure; scripts/gpu/run_on_gpu.sh puts them beside convtune's own.
"""
import statistics
import sys

try:
    import torch
except ImportError:
    print("torch: not installed; no reference figures")
    sys.exit(0)


def median_ms(fn, warmup=3, repeats=20):
    for _ in range(warmup):
        fn()
    torch.cuda.synchronize()
    times = []
    for _ in range(repeats):
        start, stop = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        fn()
        stop.record()
        stop.synchronize()
        times.append(start.elapsed_time(stop))
    return statistics.median(times)


def main():
    if not torch.cuda.is_available():
        print("torch: no CUDA device")
        return
    dev = torch.device("cuda")
    print(f"torch: {torch.__version__}, device {torch.cuda.get_device_name(0)}, cuDNN {torch.backends.cudnn.version()}")
    n = 1 << 28  # 1 GiB of float32, the size convtune peak uses
    a = torch.rand(n, device=dev)
    b = torch.empty_like(a)
    ms = median_ms(lambda: b.copy_(a))
    print(f"torch: device copy 1 GiB: {ms:.3f} ms, {2 * 4 * n / ms / 1e6:.1f} GB/s (read + write)")
    ms = median_ms(lambda: a.fill_(1.5))
    print(f"torch: fill 1 GiB: {ms:.3f} ms, {4 * n / ms / 1e6:.1f} GB/s")
    torch.backends.cuda.matmul.allow_tf32 = False
    m = 8192
    x = torch.rand(m, m, device=dev)
    y = torch.rand(m, m, device=dev)
    ms = median_ms(lambda: x @ y, repeats=10)
    print(f"torch: SGEMM {m}^3 FP32: {ms:.3f} ms, {2 * m**3 / ms / 1e9:.1f} TFLOP/s")


if __name__ == "__main__":
    main()
