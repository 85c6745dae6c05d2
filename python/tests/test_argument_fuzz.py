"""Property tests (Hypothesis) of the Python layer's argument handling: whatever a caller passes for shapes,
strides, paddings, groups, directions, devices, families, configurations, problem texts and tune() options, the
call either works or raises convtune.Error or TypeError naming the argument; never another exception, a crash, a
float truncated to an int, or a string cut at a NUL."""
import math

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import convtune

# Anything a caller might pass where an int or a sequence of them is expected.
scalars = st.one_of(
    st.integers(min_value=-3, max_value=40), st.integers(min_value=-2**70, max_value=2**70),
    st.floats(allow_nan=True, allow_infinity=True), st.booleans(), st.none(), st.text(max_size=6),
    st.binary(max_size=4), st.sampled_from([np.int64(3), np.int32(2), np.float32(2.0), np.float64(3.5)]))
shapes = st.one_of(st.lists(scalars, max_size=6).map(tuple), scalars, st.text(max_size=5))
texts = st.one_of(st.text(max_size=12), st.sampled_from(["cpu", "cpu\0", "best", "opencl:0\0x", "fwd", "bwd-data\0",
                                                          "cpu_blocked", "cpu_blocked\0evil", "N=1,C=1\0,H=4,K=1,R=3"]))
# database=None: no .hypothesis folder in the work tree; every run draws afresh from its seed.
FUZZ = settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow], database=None)


def refused_or_fine(call):
    """Runs call(); returns 'ok' or the exception; any exception besides convtune.Error and TypeError fails."""
    try:
        call()
        return "ok"
    except (convtune.Error, TypeError) as e:
        assert str(e), "an empty message"
        return e


def is_integer(value):
    return not isinstance(value, (bool, np.bool_, float, np.floating, str, bytes)) and hasattr(value, "__index__")


@FUZZ
@given(x_shape=shapes, w_shape=shapes, stride=st.one_of(scalars, shapes), padding=st.one_of(scalars, shapes),
       dilation=st.one_of(scalars, shapes), groups=scalars)
def test_conv_problem(x_shape, w_shape, stride, padding, dilation, groups):
    result = refused_or_fine(lambda: convtune.conv_problem(x_shape, w_shape, stride=stride, padding=padding,
                                                           dilation=dilation, groups=groups))
    if result == "ok":
        # Accepted only where every extent really was an integer: a float is never truncated into one.
        for shape in (x_shape, w_shape):
            assert isinstance(shape, tuple) and all(is_integer(v) for v in shape), shape
        for pair in (stride, padding, dilation):
            assert is_integer(pair) or all(is_integer(v) for v in pair), pair
        assert is_integer(groups)


@FUZZ
@given(text=texts)
def test_problem_texts_devices_and_families(text):
    result = refused_or_fine(lambda: convtune.parse_problem(text))
    if "\0" in text:
        assert result != "ok"
    for call in (lambda: convtune.Plan((1, 1, 4, 4), (1, 1, 3, 3), device=text),
                 lambda: convtune.Plan((1, 1, 4, 4), (1, 1, 3, 3), device="cpu", family=text),
                 lambda: convtune.Plan((1, 1, 4, 4), (1, 1, 3, 3), device="cpu", direction=text),
                 lambda: convtune.Plan(problem=text, device="cpu"),
                 lambda: convtune.TuningDatabase(text + "\0" if text else "\0", shipped=False)):
        result = refused_or_fine(call)
        if "\0" in text:
            assert result != "ok", text


@FUZZ
@given(config=st.dictionaries(texts, scalars, max_size=3), limit=scalars)
def test_plan_configs_and_workspace_limits(config, limit):
    result = refused_or_fine(lambda: convtune.Plan((1, 2, 6, 6), (2, 2, 3, 3), device="cpu", family="cpu_direct",
                                                   config=config, workspace_limit=limit))
    if result == "ok":
        assert all(is_integer(v) for v in config.values()) and (limit is None or is_integer(limit))


@settings(max_examples=60, deadline=None, database=None)
@given(budget=scalars, repeats=scalars, seed=scalars, only=st.dictionaries(texts, st.lists(scalars, max_size=2),
                                                                          max_size=2))
def test_tune_options(tmp_path_factory, budget, repeats, seed, only):
    db = convtune.TuningDatabase(str(tmp_path_factory.mktemp("db") / "t.json"), shipped=False)
    # budget a hair above zero where the draw gave a usable one, so accepted calls end at once
    budget = min(budget, 0.05) if isinstance(budget, (int, float)) and not isinstance(budget, bool) and \
        math.isfinite(budget) and budget > 0 else budget
    result = refused_or_fine(lambda: convtune.tune("N=1,C=1,H=4,K=1,R=3", device="cpu", family="cpu_reference",
                                                   budget=budget, repeats=repeats, seed=seed, only=only,
                                                   database=db, save=False))
    if result == "ok":
        assert is_integer(repeats) and is_integer(seed)


@FUZZ
@given(data=st.data())
def test_conv2d_arrays(data):
    """conv2d on arrays of random shapes and dtypes: results match NumPy where accepted, refusals are named."""
    n, c, h, k, r = (data.draw(st.integers(1, 3)) for _ in range(5))
    dtype = data.draw(st.sampled_from([np.float32, np.float64, np.int32, np.float16]))
    x = np.ones((n, c, h + r, h + r), dtype=dtype)
    w = np.ones((k, c, r, r), dtype=np.float32)
    stride = data.draw(st.one_of(st.integers(1, 3), st.floats(0.5, 3), st.booleans()))
    result = refused_or_fine(lambda: convtune.conv2d(x, w, stride=stride))
    if result == "ok":
        assert dtype in (np.float32, np.float16) or dtype is np.float32
        assert is_integer(stride)
