"""One Plan, and the plans conv2d() caches, called from several threads at once: every output equal to a
single-threaded run's, on the CPU device and the first OpenCL device (PoCL); the reproducer run as it was reported;
a TuningDatabase that tune() is changing refused to other uses, not changed under them."""
import os
import subprocess
import sys
import threading

import numpy as np
import pytest

import convtune

from conftest import kernel_devices

REPRO = os.path.join(os.path.dirname(__file__), "..", "..", "tests", "data", "repro", "py-plan-thread-race.py")
THREADS, CALLS = 8, 25


def _inputs(seed, shape_x, shape_w):
    r = np.random.default_rng(seed)
    return r.standard_normal(shape_x).astype(np.float32), r.standard_normal(shape_w).astype(np.float32)


def _hammer(call, shape_x, shape_w):
    """THREADS threads x CALLS calls of call(x, w) at once; the number of outputs that differ from a
    single-threaded run on the same inputs."""
    inputs = [[_inputs(1000 * t + c, shape_x, shape_w) for c in range(CALLS)] for t in range(THREADS)]
    expected = [[call(x, w).copy() for x, w in row] for row in inputs]
    start = threading.Barrier(THREADS)
    wrong = []

    def worker(t):
        start.wait()
        for c, (x, w) in enumerate(inputs[t]):
            if not np.array_equal(call(x, w), expected[t][c]):
                wrong.append((t, c))

    threads = [threading.Thread(target=worker, args=(t,)) for t in range(THREADS)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return wrong


@pytest.mark.parametrize("device", ["cpu"] + kernel_devices())
def test_one_plan_from_many_threads(device):
    shape_x, shape_w = (2, 8, 12, 12), (8, 8, 3, 3)
    plan = convtune.Plan(shape_x, shape_w, padding=1, device=device, tuning=False)
    assert _hammer(plan, shape_x, shape_w) == []


def test_conv2d_cached_plans_from_many_threads():
    shape_x, shape_w = (2, 8, 12, 12), (8, 8, 3, 3)
    assert _hammer(lambda x, w: convtune.conv2d(x, w, padding=1), shape_x, shape_w) == []


def test_the_reproducer_as_reported():
    # 10 threads x 100 calls on one Plan against NumPy's float64 convolution: 1-5 of 1,000 were wrong.
    out = subprocess.run([sys.executable, REPRO, "10", "100", "shared"], capture_output=True, text=True, timeout=600)
    assert out.returncode == 0, out.stderr
    assert "wrong=0 " in out.stdout, out.stdout


def test_a_database_tune_is_changing_is_refused_to_other_uses(tmp_path):
    db = convtune.TuningDatabase(str(tmp_path / "tuning.json"), shipped=False)
    refusals = []

    def progress(event):
        # tune() holds the database while it runs: a use from inside (or from another thread) is refused, named.
        for use in (lambda: len(db), lambda: db.entries(), lambda: db.save()):
            try:
                use()
            except convtune.Error as e:
                refusals.append(str(e))

    convtune.tune("N=1,C=2,H=6,K=2,R=3", device="cpu", family="cpu_direct", budget=2, database=db,
                  progress=progress, save=False)
    assert refusals and all("while tune() is using it" in r for r in refusals), refusals
    assert len(db) >= 1  # and it is usable again once tune() is done


def _cuda():
    try:
        import torch as t
    except ImportError:
        return None
    return t if t.cuda.is_available() else None


@pytest.mark.skipif(_cuda() is None, reason="needs PyTorch with a CUDA GPU")
@pytest.mark.parametrize("layout", ["nchw", "nhwc"])
def test_one_cuda_plan_from_many_threads_on_their_own_streams(layout):
    # convtune.torch on CUDA: one cached plan per shape, THREADS threads each on a CUDA stream of its own (plus the
    # default stream for the single-threaded run), every output equal bit for bit to the single-threaded one.
    t = _cuda()
    import convtune.torch as ct
    fmt = t.channels_last if layout == "nhwc" else t.contiguous_format
    g = t.Generator(device="cpu").manual_seed(3)
    inputs = [[(t.randn(4, 64, 14, 14, generator=g).cuda().bfloat16().contiguous(memory_format=fmt),
                t.randn(64, 64, 3, 3, generator=g).cuda().bfloat16().contiguous(memory_format=fmt))
               for _ in range(CALLS)] for _ in range(THREADS)]
    expected = [[ct.conv2d(x, w, padding=1) for x, w in row] for row in inputs]
    t.cuda.synchronize()
    streams = [t.cuda.Stream() for _ in range(THREADS)]
    start = threading.Barrier(THREADS)
    outputs = [[None] * CALLS for _ in range(THREADS)]
    errors = []

    def worker(i):
        try:
            start.wait()
            with t.cuda.stream(streams[i]):
                for c, (x, w) in enumerate(inputs[i]):
                    outputs[i][c] = ct.conv2d(x, w, padding=1)
            streams[i].synchronize()
        except Exception as e:  # noqa: BLE001: reported below
            errors.append(f"thread {i}: {e}")

    threads = [threading.Thread(target=worker, args=(i,)) for i in range(THREADS)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == []
    wrong = [(i, c) for i in range(THREADS) for c in range(CALLS) if not t.equal(outputs[i][c], expected[i][c])]
    assert wrong == []
