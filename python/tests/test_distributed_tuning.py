"""tune_model(distributed=True) across the ranks of a torch.distributed job: two processes over Gloo on this machine
(as torchrun starts them; the GPU machine's ranks use NCCL and a GPU each), each with its own database file, split
the model's convolutions between them and end with every result in both files."""
import json
import os
import socket
import subprocess
import sys
import textwrap

import pytest

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.skipif(not torch.distributed.is_available() or not torch.distributed.is_gloo_available(),
                                reason="needs torch.distributed with Gloo")

RANK_SCRIPT = textwrap.dedent("""
    import json, os, sys
    import torch
    import convtune
    import convtune.torch as ct
    torch.distributed.init_process_group("gloo")
    rank = torch.distributed.get_rank()
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Conv2d(3, 8, 3, padding=1), torch.nn.ReLU(),
                                torch.nn.Conv2d(8, 8, 3, stride=2, padding=1), torch.nn.ReLU(),
                                torch.nn.Conv2d(8, 4, 1))
    ct.patch(model)
    database = convtune.TuningDatabase(sys.argv[1] + f"/rank{rank}.json", shipped=False)
    results = ct.tune_model(model, torch.randn(2, 3, 12, 12), budget=4, database=database, distributed=True,
                            max_candidates=2, family="cpu_blocked")
    stored = convtune.TuningDatabase(sys.argv[1] + f"/rank{rank}.json", shipped=False)
    print("RESULT " + json.dumps({"rank": rank, "tuned": sorted({r.problem for r in results}),
                                  "stored": sorted({e["problem"] for e in stored.entries()})}))
    torch.distributed.destroy_process_group()
""")


def test_two_ranks_share_the_convolutions_and_both_files_end_with_every_result(tmp_path):
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    env = dict(os.environ, MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port), WORLD_SIZE="2")
    ranks = [subprocess.Popen([sys.executable, "-c", RANK_SCRIPT, str(tmp_path)], stdout=subprocess.PIPE,
                              stderr=subprocess.STDOUT, text=True, env=dict(env, RANK=str(r), LOCAL_RANK=str(r)))
             for r in range(2)]
    outputs = [p.communicate(timeout=300)[0] for p in ranks]
    assert [p.returncode for p in ranks] == [0, 0], outputs
    reports = [json.loads(line.split("RESULT ", 1)[1]) for out in outputs for line in out.splitlines()
               if line.startswith("RESULT ")]
    assert sorted(r["rank"] for r in reports) == [0, 1], outputs
    tuned = [set(r["tuned"]) for r in sorted(reports, key=lambda r: r["rank"])]
    # Three convolutions in three directions: rank 0 takes the first and third, rank 1 the second.
    assert len(tuned[0]) == 6 and len(tuned[1]) == 3, tuned
    assert not tuned[0] & tuned[1]
    for report in reports:
        assert set(report["stored"]) == tuned[0] | tuned[1], report


def test_distributed_tuning_without_a_process_group_says_what_to_do():
    import convtune
    import convtune.torch as ct
    if torch.distributed.is_initialized():
        pytest.skip("a process group is already up in this process")
    model = torch.nn.Sequential(torch.nn.Conv2d(3, 4, 3))
    ct.patch(model)
    with pytest.raises(convtune.InvalidArgument, match="init_process_group"):
        ct.tune_model(model, torch.randn(1, 3, 8, 8), budget=1, distributed=True)
