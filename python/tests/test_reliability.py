"""Issue 17's hostile inputs through the Python package: the same named errors as the command line, never a crash,
a silent fallback or an overwritten file."""
import os
import pathlib

import pytest

import convtune

REPRO = pathlib.Path(__file__).resolve().parents[2] / "tests" / "data" / "repro"


@pytest.mark.parametrize("name, expected", [
    ("tuningdb-deep-nesting-stack-overflow.json", "nested deeper than 64 levels"),
    ("tuningdb-1e400-uncaught-exit3.json", "line 39, column 18 (at entries[0].gflops): number 1e400 is out of range"),
])
def test_hostile_database_is_named_and_never_overwritten(tmp_path, name, expected):
    copy = tmp_path / name
    copy.write_bytes((REPRO / name).read_bytes())
    db = convtune.TuningDatabase(str(copy), shipped=False)
    assert str(copy) in db.error and expected in db.error
    with pytest.raises(convtune.TuningDatabaseError, match="refusing to save"):
        db.save()
    assert copy.read_bytes() == (REPRO / name).read_bytes()


def test_merging_a_hostile_database_names_it(tmp_path):
    db = convtune.TuningDatabase(str(tmp_path / "db.json"), shipped=False)
    with pytest.raises(convtune.TuningDatabaseError, match="number-overflow-uncaught.json is not valid JSON"):
        db.merge_file(str(REPRO / "tuningdb-number-overflow-uncaught.json"))


def test_special_files_are_refused_at_once(tmp_path):
    assert "character device, expected a regular file" in convtune.TuningDatabase("/dev/zero", shipped=False).error
    fifo = tmp_path / "db.fifo"
    os.mkfifo(fifo)
    assert "FIFO (named pipe), expected a regular file" in convtune.TuningDatabase(str(fifo), shipped=False).error


@pytest.mark.parametrize("text, expected", [
    ("N=9223372036854775807,C=1,H=1,K=1,R=1", "N=9223372036854775807 is too large: expected at most 2147483647"),
    ("N=1,C=1,H=4,K=1,R=3,pad=2147483647", "the padded height H+2*pad_h must be at most 2147483647"),
    ("gemm:M=99999999999,N=1,K=1", "GEMM M=99999999999 is too large: expected at most 2147483647"),
    ("gemm:M=65536,N=65536,K=1", "GEMM operand C spans more than the 2147483647 elements"),
    ("gemm:M=64,N=33,K=1777777777777777773", "GEMM K=1777777777777777773 is too large"),
])
def test_overflowing_problems_are_invalid_arguments(text, expected):
    with pytest.raises(convtune.InvalidArgument) as info:
        convtune.parse_problem(text)
    assert expected in str(info.value)
