"""aiograd.save/load: state dicts without pickle, pickle only when asked; aiograd.cuda."""

from __future__ import annotations

import io
import zipfile
from collections import OrderedDict

import numpy as np
import pytest

import aiograd as ag
from aiograd import nn, optim


def _trained() -> tuple[nn.Module, optim.Optimizer]:
    ag.manual_seed(0)
    model = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.BatchNorm1d(8), nn.Linear(8, 2))
    opt = optim.Adam(model.parameters(), lr=1e-2)
    x = ag.randn(16, 4)
    for _ in range(3):
        opt.zero_grad()
        model(x).pow(2).mean().backward()
        opt.step()
    return model, opt


def test_module_and_optimizer_state_round_trip(tmp_path):
    model, opt = _trained()
    path = tmp_path / "ckpt.npz"
    ag.save({"model": model.state_dict(), "opt": opt.state_dict(), "epoch": 3}, path)
    loaded = ag.load(path)
    assert loaded["epoch"] == 3
    fresh, fresh_opt = _trained()
    for p in fresh.parameters():
        p.data[...] = 0
    fresh.load_state_dict(loaded["model"])
    fresh_opt.load_state_dict(loaded["opt"])
    model.eval(), fresh.eval()
    x = ag.randn(5, 4)
    np.testing.assert_array_equal(fresh(x).detach().numpy(), model(x).detach().numpy())
    assert list(loaded["model"]) == list(model.state_dict())
    saved_state = opt.state_dict()["state"]
    assert set(loaded["opt"]["state"]) == set(saved_state)  # int keys kept
    for key, state in saved_state.items():
        for name, value in state.items():
            np.testing.assert_array_equal(np.asarray(loaded["opt"]["state"][key][name]),
                                          np.asarray(value))


def test_file_objects_structure_and_tensor_attributes():
    t = ag.tensor([1.0, 2.0], requires_grad=True)
    obj = OrderedDict(a=t, b=[1, 2.5, None, "s", (True, np.float32(1.5))],
                      c={0: np.arange(3), None: ag.tensor([1], dtype=ag.int8)})
    buffer = io.BytesIO()
    ag.save(obj, buffer)
    buffer.seek(0)
    back = ag.load(buffer)
    assert type(back) is OrderedDict and list(back) == ["a", "b", "c"]
    assert back["a"].requires_grad and back["a"].is_leaf and back["a"].tolist() == [1.0, 2.0]
    assert back["b"] == [1, 2.5, None, "s", (True, np.float32(1.5))]
    assert type(back["b"][4][1]) is np.float32
    assert back["c"][0].tolist() == [0, 1, 2] and str(back["c"][None].dtype) == "int8"


def test_the_default_format_is_a_plain_npz_archive(tmp_path):
    path = tmp_path / "w.npz"
    ag.save({"w": ag.ones(2, 2)}, path)
    assert zipfile.is_zipfile(path)
    with np.load(path, allow_pickle=False) as archive:  # readable with NumPy alone
        arrays = [archive[k].tolist() for k in archive.files if k.endswith(".npy") or
                  not k.endswith(".json")]
        assert arrays == [[[1.0, 1.0], [1.0, 1.0]]]
        assert "__structure__.json" in archive.files


def test_pickle_only_when_asked(tmp_path):
    model, _ = _trained()
    with pytest.raises(TypeError, match=r"cannot store a Sequential .*pickle=True"):
        ag.save(model, tmp_path / "m")
    ag.save(model, tmp_path / "m", pickle=True)
    with pytest.raises(RuntimeError, match="weights_only=False"):
        ag.load(tmp_path / "m")
    again = ag.load(tmp_path / "m", weights_only=False)
    assert type(again) is type(model)
    with pytest.raises(TypeError, match=r"key .* at obj"):
        ag.save({("a", 1): 1}, tmp_path / "k")


def test_garbage_is_refused(tmp_path):
    (tmp_path / "bad").write_bytes(b"not an archive")
    with pytest.raises(RuntimeError, match="not a file written by aiograd.save"):
        ag.load(tmp_path / "bad")


def test_map_location_moves_tensors(fake_backend, tmp_path):
    path = tmp_path / "d"
    ag.save({"t": ag.tensor([1.0, 2.0], device="fake:1")}, path)
    assert str(ag.load(path)["t"].device) == "fake:1"
    assert str(ag.load(path, map_location="cpu")["t"].device) == "cpu"


def test_cuda_queries_answer_without_cuda():
    cupy_present = True
    try:
        import cupy  # noqa: F401
    except ImportError:
        cupy_present = False
    if not cupy_present:
        assert ag.cuda.is_available() is False
        assert ag.cuda.device_count() == 0
    assert ag.cuda.is_available() == (ag.cuda.device_count() > 0)
