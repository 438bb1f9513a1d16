"""czjax.bench.profiling: phases read from named scopes, time read from a real profiler trace."""

import jax
import jax.numpy as jnp

from czjax.bench import harness, profiling


def test_phase_of_an_op_name():
    assert profiling.phase("jit(run_chunk)/while/body/selfplay/while/body/network/dot_general") == "selfplay/network"
    assert (
        profiling.phase("jit(run_chunk)/update/gradient/transpose(jvp(network))/dot_general")
        == "update/gradient/network (backward)"
    )
    assert profiling.phase("jit(run_chunk)/update/gradient/jvp(network)/tanh") == "update/gradient/network"
    assert profiling.phase("jit(f)/add") == "other" and profiling.phase("") == "other"


def test_op_names_read_from_the_compiled_program():
    def f(w, x):
        with jax.named_scope("network"):
            y = jnp.tanh(x @ w)
        with jax.named_scope("optimizer"):
            return w - 0.1 * (y.T @ x)

    text = jax.jit(f).lower(jnp.ones((8, 8)), jnp.ones((4, 8))).compile().as_text()
    phases = {profiling.phase(name) for name in profiling.op_names(text).values()}
    assert {"network", "optimizer"} <= phases


def test_a_profiled_training_chunk_splits_into_its_phases(tmp_path):
    row = harness.bench_train("mlp", 8, runs=1, steps=1, profile=tmp_path)
    assert next(tmp_path.rglob("perfetto_trace.json.gz")).stat().st_size > 0
    phases = row["phases"]
    if jax.default_backend() == "cpu":  # every executed thunk names its instruction
        for name in (
            "selfplay/network",
            "selfplay/rules",
            "update/gradient/network",
            "update/gradient/network (backward)",
            "update/optimizer",
            "evaluation/network",
        ):
            assert phases.get(name, 0.0) > 0.0, (name, phases)
        assert profiling.device_busy(tmp_path) is None and "(device busy)" not in phases  # a GPU's figure
    else:  # a GPU replays runs of kernels as CUDA graphs named by their graph: only the time is certain
        # (profiling.op_times says how to profile with each kernel's own instruction)
        assert sum(t for name, t in phases.items() if not name.startswith("(")) > 0.0, phases
        busy, span = profiling.device_busy(tmp_path)
        assert 0 < busy <= span
