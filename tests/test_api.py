"""The public API: the names a notebook uses, re-exported from ``czjax`` and resolved when first
used (``import czjax`` alone loads no JAX)."""

import subprocess
import sys

import jax
import numpy as np
import pytest

import czjax


def test_every_public_name_resolves():
    for name in czjax.__all__:
        assert getattr(czjax, name) is not None
    assert set(czjax.__all__) <= set(dir(czjax))
    with pytest.raises(AttributeError, match="no attribute 'nothing_here'"):
        czjax.nothing_here  # noqa: B018


def test_no_public_name_hides_a_module():
    """``from czjax import tournament`` gives the module whatever was used before (a public name
    equal to a module's would replace it once resolved)."""
    import pkgutil

    modules = {m.name for m in pkgutil.iter_modules(czjax.__path__)}
    assert not modules & set(czjax.__all__)
    czjax.play_tournament  # noqa: B018
    from czjax.evaluate import tournament

    assert tournament.__name__ == "czjax.evaluate.tournament"


def test_a_notebook_s_first_lines():
    board = czjax.apply_moves([3, 3, 4])  # columns 4, 4, 5 (0-based), then the side to move's view
    assert (board != 0).sum() == 3
    traj, results = czjax.play_games(
        jax.random.key(0), czjax.Side(czjax.random_punisher), czjax.Side(czjax.random_player), 8
    )
    assert np.asarray(results.outcome).shape == (8,) and set(np.unique(results.outcome)) <= {-1, 0, 1}
    assert czjax.load_agent("random").name == "random"


def test_import_czjax_loads_no_jax():
    code = "import sys, czjax; print('jax' in sys.modules)"
    assert (
        subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.strip()
        == "False"
    )
