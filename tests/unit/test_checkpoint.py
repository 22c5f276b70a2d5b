"""Checkpoints without Ray: a write is atomic (a failed one leaves the last whole), a config
has its own file, a resumed PageRank follows the same steps as one never stopped, and bad
settings are clear errors."""

import numpy as np
import pytest
import scipy.sparse as sp

from elastic_coded import pagerank as pr
from elastic_coded.checkpoint import Checkpoint, config_key
from elastic_coded.config import parse_config
from elastic_coded.errors import ElasticCodedError


def test_save_and_load_round_trip_and_clear(tmp_path):
    c = Checkpoint(tmp_path / "ck", "k1", every=3)
    assert c.load() is None
    assert [s for s in range(10) if c.due(s)] == [3, 6, 9]
    x = np.random.default_rng(0).standard_normal((5, 2))
    c.save(6, x, {"steps_done": 6, "max_step_error": 1e-16})
    got = c.load()
    assert got.step == 6 and np.array_equal(got.x, x) and got.counts["steps_done"] == 6
    c.clear()
    assert c.load() is None


def test_a_failed_write_leaves_the_last_checkpoint_whole(tmp_path, monkeypatch):
    c = Checkpoint(tmp_path, "k")
    c.save(10, np.arange(4.0), {"steps_done": 10})

    def boom(*a, **k):
        raise OSError("disk full")

    monkeypatch.setattr(np, "savez", boom)
    with pytest.raises(OSError):
        c.save(20, np.arange(4.0) + 1, {"steps_done": 20})
    got = c.load()
    assert got.step == 10 and np.array_equal(got.x, np.arange(4.0))
    assert [p.name for p in tmp_path.iterdir()] == ["k.npz"]  # no temporary file left


def test_each_config_has_its_own_key():
    def cfg(steps):
        return parse_config({"job": "power_iteration", "steps": steps,
                             "matrix": {"rows": 60, "cols": 60}})

    assert config_key(cfg(5)) == config_key(cfg(5))
    assert config_key(cfg(5)) != config_key(cfg(6))


def test_a_resumed_pagerank_takes_the_same_steps():
    M = sp.random(300, 300, density=0.02, random_state=4, format="csr")
    M = sp.csr_array(M / np.maximum(M.sum(axis=0), 1e-300))
    dangling = np.asarray(M.sum(axis=0)).ravel() == 0
    whole = pr.pagerank(lambda r: M @ r, 300, dangling, tol=1e-13, max_iter=80)
    seen = {}
    pr.pagerank(lambda r: M @ r, 300, dangling, tol=1e-13, max_iter=17,
                callback=lambda it, r, _: seen.__setitem__(it, r.copy()))
    rest = pr.pagerank(lambda r: M @ r, 300, dangling, tol=1e-13, max_iter=80, r0=seen[17],
                       start=17)
    assert rest.iterations == whole.iterations
    assert np.abs(rest.ranks - whole.ranks).max() <= 1e-15


def test_bad_settings_are_clear_errors(tmp_path):
    with pytest.raises(ElasticCodedError, match="checkpoint_every: 0 must be an int >= 1"):
        Checkpoint(tmp_path, "k", every=0)
    (tmp_path / "file").write_text("x")
    with pytest.raises(ElasticCodedError, match="checkpoint: cannot use folder"):
        Checkpoint(tmp_path / "file" / "sub", "k")
    (tmp_path / "bad.npz").write_text("not a checkpoint")
    with pytest.raises(ElasticCodedError, match="cannot be read"):
        Checkpoint(tmp_path, "bad").load()
    from elastic_coded.jobs import _checkpoint

    with pytest.raises(ElasticCodedError, match="keeps no iterate"):
        _checkpoint(parse_config({"job": "matmul", "steps": 3}), tmp_path, 5)
