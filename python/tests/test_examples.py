"""The PyTorch examples (examples/python/train.py) end to end on the CPU with tiny settings: both models, convtune
beside PyTorch's convolutions, the first-step gradient check, tuning before training, and the summary lines."""
import os
import sys

import pytest

torch = pytest.importorskip("torch")
EXAMPLES = os.path.join(os.path.dirname(__file__), "..", "..", "examples", "python")
sys.path.insert(0, EXAMPLES)
import common  # noqa: E402
import train  # noqa: E402

pytestmark = pytest.mark.skipif(not os.path.exists(os.path.join(common.DEFAULT_DATA, "t10k-labels-idx1-ubyte.gz")),
                                reason="needs Fashion-MNIST (Debian's dataset-fashion-mnist)")


@pytest.mark.parametrize("model,extra", [("lenet", []), ("resnet18", ["--tune", "3"]), ("resnet18", ["--fuse"])])
def test_train_example_runs_both_and_gradients_agree(capsys, model, extra):
    train.main(["--model", model, "--conv", "both", "--device", "cpu", "--limit", "128", "--test-limit", "64",
                "--steps", "2", "--batch", "8", "--warmup", "0", "--log-every", "1", "--width", "4"] + extra)
    out = capsys.readouterr().out
    check = [line for line in out.splitlines() if line.startswith("first-step gradients")]
    assert check and check[0].endswith(" ok"), out  # lenet against PyTorch; resnet18 (batch norms) against float64
    assert "summary: conv=torch" in out and "summary: conv=convtune" in out
    losses = [line.split("final_loss=")[1].split()[0] for line in out.splitlines() if line.startswith("summary")]
    assert abs(float(losses[0]) - float(losses[1])) < 1e-3  # two steps from the same weights and batches


def test_train_example_data_parallel_on_two_cpu_processes():
    """DistributedDataParallel with convtune's convolutions, as torchrun would start it (two ranks over Gloo on the
    loopback interface here; NCCL and a GPU each on the GPU machine)."""
    import socket
    import subprocess
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    script = os.path.join(EXAMPLES, "train.py")
    args = ["--model", "lenet", "--conv", "convtune", "--device", "cpu", "--limit", "64", "--test-limit", "32",
            "--steps", "2", "--batch", "8", "--warmup", "0", "--log-every", "0", "--width", "4"]
    ranks = [subprocess.Popen([sys.executable, script] + args, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                              text=True, env=dict(os.environ, MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port),
                                                  RANK=str(r), LOCAL_RANK=str(r), WORLD_SIZE="2"))
             for r in range(2)]
    outputs = [p.communicate(timeout=120)[0] for p in ranks]
    assert [p.returncode for p in ranks] == [0, 0], outputs
    assert "summary: conv=convtune model=lenet processes=2" in outputs[0]
    assert "summary:" not in outputs[1]  # rank 0 reports


def test_train_example_resnet50_as_people_train_it(capsys):
    """torchvision's ResNet-50 on synthetic images, BF16 autocast, channels-last, optimize()'s fused blocks: both runs
    train, and their first-step gradients are as close to float64 as each other."""
    pytest.importorskip("torchvision")
    train.main(["--model", "resnet50", "--data", "synthetic", "--image-size", "64", "--limit", "8", "--test-limit",
                "4", "--width", "8", "--amp", "bf16", "--channels-last", "--fuse", "--conv", "both", "--device", "cpu",
                "--steps", "1", "--batch", "8", "--warmup", "0", "--log-every", "0"])
    out = capsys.readouterr().out
    check = [line for line in out.splitlines() if line.startswith("first-step gradients against float64")]
    assert check and check[0].endswith(" ok"), out
    assert "summary: conv=convtune model=resnet50" in out and "amp=bf16 channels_last=1 fuse=1" in out
