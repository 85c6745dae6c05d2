"""Shared pieces of the Python package's tests: a private tuning database, the devices to test (the CPU device,
the first OpenCL device such as PoCL, CUDA when present) and float64 NumPy references of the three directions."""
import os
import tempfile

# Before convtune loads its default database: tests never read or write the user's.
os.environ["CONVTUNE_TUNING_DB"] = os.path.join(tempfile.mkdtemp(prefix="convtune-pytest-"), "tuning.json")

import numpy as np  # noqa: E402
import pytest  # noqa: E402

import convtune  # noqa: E402


def kernel_devices():
    """The OpenCL and CUDA devices that compile kernels (PoCL on CI), first of each backend."""
    found = {}
    for d in convtune.devices():
        if d.backend != "cpu" and d.can_run_kernels and d.backend not in found:
            found[d.backend] = d.id
    return list(found.values())


@pytest.fixture
def rng():
    return np.random.default_rng(1234)


def _windows(x, r, s, stride, pad, dil, p, q):
    """Slices of the zero-padded x that filter tap (i, j) meets, one per output position."""
    for i in range(r):
        for j in range(s):
            yield i, j, (slice(None), slice(None),
                         slice(i * dil[0], i * dil[0] + stride[0] * (p - 1) + 1, stride[0]),
                         slice(j * dil[1], j * dil[1] + stride[1] * (q - 1) + 1, stride[1]))


def out_size(h, r, stride, pad, dil):
    return (h + 2 * pad - dil * (r - 1) - 1) // stride + 1


def conv_ref(x, w, stride=(1, 1), pad=(0, 0), dil=(1, 1), groups=1):
    """Forward in float64."""
    n, c, h, wd = x.shape
    k, cg, r, s = w.shape
    p, q = out_size(h, r, stride[0], pad[0], dil[0]), out_size(wd, s, stride[1], pad[1], dil[1])
    xp = np.pad(x.astype(np.float64), ((0, 0), (0, 0), (pad[0], pad[0]), (pad[1], pad[1])))
    y = np.zeros((n, k, p, q))
    kg = k // groups
    for g in range(groups):
        for i, j, window in _windows(xp, r, s, stride, pad, dil, p, q):
            patch = xp[window][:, g * cg:(g + 1) * cg]
            y[:, g * kg:(g + 1) * kg] += np.einsum("ncpq,kc->nkpq", patch, w[g * kg:(g + 1) * kg, :, i, j])
    return y


def bwd_data_ref(dy, w, x_shape, stride=(1, 1), pad=(0, 0), dil=(1, 1), groups=1):
    """dx in float64: the adjoint of the forward in x."""
    n, c, h, wd = x_shape
    k, cg, r, s = w.shape
    p, q = dy.shape[2:]
    dxp = np.zeros((n, c, h + 2 * pad[0], wd + 2 * pad[1]))
    kg = k // groups
    for g in range(groups):
        for i, j, window in _windows(dxp, r, s, stride, pad, dil, p, q):
            view = dxp[window]
            view[:, g * cg:(g + 1) * cg] += np.einsum("nkpq,kc->ncpq", dy[:, g * kg:(g + 1) * kg],
                                                      w[g * kg:(g + 1) * kg, :, i, j])
    return dxp[:, :, pad[0]:pad[0] + h, pad[1]:pad[1] + wd]


def bwd_filter_ref(x, dy, w_shape, stride=(1, 1), pad=(0, 0), dil=(1, 1), groups=1):
    """dw in float64: the adjoint of the forward in w."""
    k, cg, r, s = w_shape
    p, q = dy.shape[2:]
    xp = np.pad(x.astype(np.float64), ((0, 0), (0, 0), (pad[0], pad[0]), (pad[1], pad[1])))
    dw = np.zeros(w_shape)
    kg = k // groups
    for g in range(groups):
        for i, j, window in _windows(xp, r, s, stride, pad, dil, p, q):
            patch = xp[window][:, g * cg:(g + 1) * cg]
            dw[g * kg:(g + 1) * kg, :, i, j] = np.einsum("ncpq,nkpq->kc", patch, dy[:, g * kg:(g + 1) * kg])
    return dw


def assert_close(got, want, name=""):
    """FP32 against float64: relative L2 error within what FP32 rounding of these short sums allows."""
    got = np.asarray(got, dtype=np.float64)
    error = np.linalg.norm(got - want) / max(np.linalg.norm(want), 1e-30)
    assert error < 1e-5, f"{name}: relative L2 error {error:.3g}"
