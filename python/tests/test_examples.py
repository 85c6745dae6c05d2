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


@pytest.mark.parametrize("model,extra", [("lenet", []), ("resnet18", ["--tune", "3"])])
def test_train_example_runs_both_and_gradients_agree(capsys, model, extra):
    train.main(["--model", model, "--conv", "both", "--device", "cpu", "--limit", "128", "--test-limit", "64",
                "--steps", "2", "--batch", "8", "--warmup", "0", "--log-every", "1", "--width", "4"] + extra)
    out = capsys.readouterr().out
    assert "first-step gradients, convtune vs PyTorch" in out and "ok" in out.split("first-step")[1].split("\n")[0]
    assert "summary: conv=torch" in out and "summary: conv=convtune" in out
    losses = [line.split("final_loss=")[1].split()[0] for line in out.splitlines() if line.startswith("summary")]
    assert abs(float(losses[0]) - float(losses[1])) < 1e-3  # two steps from the same weights and batches
