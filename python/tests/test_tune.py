"""In-process tuning from Python: progress events, results stored in the database and used by later plans,
several devices at once, a callback that raises, and the database's files (merge, damaged files)."""
import json
import os

import numpy as np
import pytest

import convtune

LAYER = "N=2,C=4,H=8,K=8,R=3,pad=1"


def test_tune_reports_progress_and_stores_the_best(tmp_path):
    db = convtune.TuningDatabase(str(tmp_path / "db.json"), shipped=False)
    events = []
    results = convtune.tune({"small": LAYER}, device="cpu", directions="all", database=db, budget=30,
                            max_candidates=2, repeats=1, warmup=0, progress=events.append)
    assert {r.operation for r in results} == {"fwd", "bwd-data", "bwd-filter"}
    assert all(r.name == "small" and r.device == "cpu" for r in results)
    assert all(r.best_ms and r.best_config and r.trials for r in results)
    # Each result stored, or (where timing it again beside today's plan found it no faster) not kept, the plan stored
    # in its place: which one, on a layer this small, is timing noise.
    assert all(r.stored == "added" or (r.stored is None and "not kept: timed again" in r.stop_reason)
               for r in results)
    kinds = [e.kind for e in events]
    assert kinds[0] == "task_started" and kinds[-1] == "task_done" and "trial" in kinds
    started = [e for e in events if e.kind == "task_started"]
    assert [e.index for e in started] == list(range(len(results))) and started[0].count == len(results)
    trial = next(e for e in events if e.kind == "trial")
    assert trial.trial["config"] and 0 <= trial.fraction <= 1
    assert isinstance(next(e for e in events if e.kind == "task_done").result, convtune.TuneResult)
    # Saved after every task, and read back by a fresh database object.
    stored = sum(r.stored is not None for r in results) + sum(r.plan_kept == "added" for r in results)
    assert len(convtune.TuningDatabase(str(tmp_path / "db.json"), shipped=False)) == stored
    entries = db.entries()
    assert {e["family"] for e in entries} <= {r.family for r in results}
    # A plan asked to use this database takes the exact entry.
    plan = convtune.Plan(problem=LAYER + ",dir=fwd", device="cpu", tuning=db)
    assert plan.tier == "exact"


def test_tune_on_a_list_of_one_device_and_merge_files(tmp_path):
    first = convtune.TuningDatabase(str(tmp_path / "a.json"), shipped=False)
    convtune.tune(LAYER, device=["cpu"], database=first, budget=10, max_candidates=1, repeats=1, warmup=0)
    second = convtune.TuningDatabase(str(tmp_path / "b.json"), shipped=False)
    counts = second.merge_file(str(tmp_path / "a.json"))
    assert counts["added"] == len(first) and counts["replaced"] == 0
    second.save()
    assert len(convtune.TuningDatabase(str(tmp_path / "b.json"), shipped=False)) == len(first)


def test_tune_refuses_a_device_listed_twice(tmp_path):
    db = convtune.TuningDatabase(str(tmp_path / "db.json"), shipped=False)
    with pytest.raises(ValueError, match="cpu is listed twice"):
        convtune.tune(LAYER, device=["cpu", "cpu"], database=db, budget=5)


def test_a_raising_callback_stops_the_run(tmp_path):
    db = convtune.TuningDatabase(str(tmp_path / "db.json"), shipped=False)

    def stop(event):
        if event.kind == "trial":
            raise KeyError("stop here")

    with pytest.raises(KeyError, match="stop here"):
        convtune.tune(LAYER, device="cpu", directions="all", database=db, budget=30, max_candidates=3,
                      progress=stop)


def test_bad_tuning_options(tmp_path):
    db = convtune.TuningDatabase(str(tmp_path / "db.json"), shipped=False)
    with pytest.raises(ValueError, match="tuning budget -1 s is invalid"):
        convtune.tune(LAYER, device="cpu", database=db, budget=-1)
    with pytest.raises(ValueError, match="greedy"):
        convtune.tune(LAYER, device="cpu", database=db, strategy="greedy")
    with pytest.raises(TypeError, match="problems: expected convtune.Problem"):
        convtune.tune([42], device="cpu", database=db)


def test_damaged_database_is_reported_and_never_overwritten(tmp_path):
    path = tmp_path / "damaged.json"
    path.write_text("{ not json")
    db = convtune.TuningDatabase(str(path), shipped=False)
    assert "damaged.json" in db.error
    with pytest.raises(convtune.TuningDatabaseError, match="damaged.json"):
        db.save()
    with pytest.raises(convtune.TuningDatabaseError):
        convtune.tune(LAYER, device="cpu", database=db, budget=5)
    assert path.read_text() == "{ not json"


def test_shipped_defaults_are_found_beside_the_installed_library():
    db = convtune.TuningDatabase(os.devnull + ".missing.json")
    assert db.shipped_count > 0  # share/convtune/tuning inside the package
