"""czjax.bench.profiling: phases read from named scopes, time read from a real profiler trace,
kinds of operation read from hand-made traces of a hand-made program."""

import gzip
import json

import jax
import jax.numpy as jnp
import pytest

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
    kinds = row["op_kinds"]  # one iteration: every launch of one kind, the idle time within the span
    assert sum(kinds["launches"].values()) == kinds["total_launches"] > 0
    assert 0 <= kinds["idle_s"] <= kinds["span_s"] and kinds["seconds"]["product"] > 0
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
        # the self-play loop's step is a pair of plies: a game lasts 7 to 42 plies
        assert row["op_kinds"]["step"] == "pair of plies" and 4 <= row["op_kinds"]["steps"] <= 21
    else:  # a GPU replays runs of kernels as CUDA graphs named by their graph: only the time is certain
        # (profiling.op_times says how to profile with each kernel's own instruction)
        assert sum(t for name, t in phases.items() if not name.startswith("(")) > 0.0, phases
        busy, span = profiling.device_busy(tmp_path)
        assert 0 < busy <= span


# A program's text as XLA prints it, cut to what the classifier reads: a product fused into a
# custom fusion, a scatter in a loop fusion inside a loop's body, a gather fused with a sum, a
# convolution, a cuBLAS call, a copy, and the loop itself.
HAND_MADE_PROGRAM = """HloModule jit_f, is_scheduled=true, entry_computation_layout={(f32[4,4]{1,0})->f32[4,4]{1,0}}

%fused_dot (p0: f32[4,4], p1: f32[4,4]) -> f32[4,4] {
  %p0 = f32[4,4]{1,0} parameter(0)
  %p1 = f32[4,4]{1,0} parameter(1)
  ROOT %dot.1 = f32[4,4]{1,0} dot(%p0, %p1), lhs_contracting_dims={1}, rhs_contracting_dims={0}, metadata={op_name="jit(f)/while/body/selfplay/network/dot_general"}
}

%fused_scatter (p2: f32[4,4], p3: s32[2,1], p4: f32[2,4]) -> f32[4,4] {
  %p2 = f32[4,4]{1,0} parameter(0)
  %p3 = s32[2,1]{1,0} parameter(1)
  %p4 = f32[2,4]{1,0} parameter(2)
  ROOT %scatter.1 = f32[4,4]{1,0} scatter(%p2, %p3, %p4), update_window_dims={1}, inserted_window_dims={0}, scatter_dims_to_operand_dims={0}, index_vector_dim=1, to_apply=%add_computation, metadata={op_name="jit(f)/while/body/selfplay/backup/scatter-add"}
}

%fused_gather_sum (p5: f32[4,4], p6: s32[2,1]) -> f32[] {
  %p5 = f32[4,4]{1,0} parameter(0)
  %p6 = s32[2,1]{1,0} parameter(1)
  %gather.1 = f32[2,4]{1,0} gather(%p5, %p6), offset_dims={1}, collapsed_slice_dims={0}, start_index_map={0}, index_vector_dim=1, slice_sizes={1,4}
  %zero = f32[] constant(0)
  ROOT %reduce.1 = f32[] reduce(%gather.1, %zero), dimensions={0,1}, to_apply=%add_computation
}

%add_computation (a: f32[], b: f32[]) -> f32[] {
  %a = f32[] parameter(0)
  %b = f32[] parameter(1)
  ROOT %add.1 = f32[] add(%a, %b)
}

%body (arg: (s32[], f32[4,4])) -> (s32[], f32[4,4]) {
  %arg = (s32[], f32[4,4]{1,0}) parameter(0)
  %x.1 = f32[4,4]{1,0} get-tuple-element(%arg), index=1
  %ynn_fusion = f32[4,4]{1,0} fusion(%x.1, %x.1), kind=kCustom, calls=%fused_dot, metadata={op_name="jit(f)/while/body/selfplay/network/dot_general"}
  %scatter_fusion = f32[4,4]{1,0} fusion(%ynn_fusion), kind=kLoop, calls=%fused_scatter, metadata={op_name="jit(f)/while/body/selfplay/backup/scatter-add"}
  ROOT %out = (s32[], f32[4,4]{1,0}) tuple(%i, %scatter_fusion)
}

%cond (arg.1: (s32[], f32[4,4])) -> pred[] {
  %arg.1 = (s32[], f32[4,4]{1,0}) parameter(0)
  ROOT %lt.1 = pred[] compare(%i.1, %n.1), direction=LT
}

ENTRY %main.1 (x: f32[4,4]) -> f32[4,4] {
  %x = f32[4,4]{1,0} parameter(0)
  %copy.1 = f32[4,4]{1,0} copy(%x), metadata={op_name="jit(f)/copy"}
  %convolution.1 = f32[1,4,4,1]{3,2,1,0} convolution(%y, %k), window={size=3x3 pad=1_1x1_1}, dim_labels=b01f_01io->b01f, metadata={op_name="jit(f)/update/conv_general_dilated"}
  %custom-call.1 = (f32[4,4]{1,0}, s8[0]{0}) custom-call(%x, %x), custom_call_target="__cublas$gemm", metadata={op_name="jit(f)/update/dot_general"}
  %gather_reduce_fusion = f32[] fusion(%x, %idx), kind=kInput, calls=%fused_gather_sum, metadata={op_name="jit(f)/selfplay/reduce_sum"}
  %while.1 = (s32[], f32[4,4]{1,0}) while(%tuple.1), condition=%cond, body=%body, metadata={op_name="jit(f)/while"}
  ROOT %result = f32[4,4]{1,0} get-tuple-element(%while.1), index=1
}
"""


def write_trace(folder, process: str, events, derived=()) -> None:
    """A Perfetto trace as jax.profiler writes it: ``(event name, start us, duration us, hlo_op,
    hlo_module)`` per operation, on one thread of ``process``; ``derived``: the same on a line
    that restates them (a GPU's "XLA Ops")."""
    folder.mkdir(parents=True)
    trace = [
        {"ph": "M", "pid": 1, "name": "process_name", "args": {"name": process}},
        {"ph": "M", "pid": 1, "tid": 7, "name": "thread_name", "args": {"name": "Stream #7(Compute)"}},
        {"ph": "M", "pid": 1, "tid": 8, "name": "thread_name", "args": {"name": "XLA Ops"}},
    ]
    for tid, lines in ((7, events), (8, derived)):
        for name, start, duration, op, module in lines:
            args = {key: value for key, value in (("hlo_op", op), ("hlo_module", module)) if value}
            trace.append({"ph": "X", "pid": 1, "tid": tid, "name": name, "ts": start, "dur": duration, "args": args})
    with gzip.open(folder / "perfetto_trace.json.gz", "wt") as f:
        json.dump({"traceEvents": trace}, f)


def test_instructions_say_what_they_hold_and_the_loop_they_run_in():
    program = profiling.instructions(HAND_MADE_PROGRAM)
    kinds = {name: profiling.op_kind(program[name]) for name in program if program[name].opcode not in ("parameter",)}
    assert kinds["ynn_fusion"] == "product" and kinds["custom-call.1"] == "product"  # a fused dot; cuBLAS
    assert kinds["convolution.1"] == "convolution" and kinds["copy.1"] == "copy"
    assert kinds["scatter_fusion"] == "gather/scatter"
    assert kinds["gather_reduce_fusion"] == "gather/scatter"  # the gather comes before the sum
    assert kinds["while.1"] == "host" and kinds["lt.1"] == "elementwise"
    assert program["scatter_fusion"].loop == "while.1" and program["ynn_fusion"].loop == "while.1"
    assert program["lt.1"].loop == "while.1" and program["copy.1"].loop is None and program["while.1"].loop is None
    assert program["ynn_fusion"].ops >= {"fusion", "dot"}


def test_a_cpu_trace_splits_into_kinds_with_the_loops_own_time_as_host(tmp_path):
    us = 1e-6
    write_trace(
        tmp_path / "cpu",
        "/host:CPU",
        [
            ("copy.1", 0, 10, "copy.1", "jit_f"),
            ("convolution.1", 10, 20, "convolution.1", "jit_f"),
            ("custom-call.1", 30, 10, "custom-call.1", "jit_f"),
            # 40-50: nothing runs
            ("while.1", 50, 100, "while.1", "jit_f"),  # two steps of the loop inside it
            ("ynn_fusion", 55, 20, "ynn_fusion", "jit_f"),
            ("scatter_fusion", 75, 10, "scatter_fusion", "jit_f"),
            ("end: scatter_fusion", 85, 1, None, None),  # the executor's own marks name no operation
            ("ynn_fusion", 100, 20, "ynn_fusion", "jit_f"),
            ("scatter_fusion", 120, 10, "scatter_fusion", "jit_f"),
            ("copy.1", 200, 10, "copy.1", "jit_other"),  # another program's
        ],
    )
    table = profiling.op_kind_table(tmp_path / "cpu", HAND_MADE_PROGRAM, profiling.SIMULATION)
    seconds = {kind: s / us for kind, s in table["seconds"].items() if s}
    assert seconds == pytest.approx(
        # the loop spans 100 us of which its operations ran 60: 40 are its own
        {"copy": 10, "convolution": 20, "product": 10 + 20 + 20, "gather/scatter": 10 + 10, "host": 40}
    )
    assert table["span_s"] / us == pytest.approx(150) and table["idle_s"] / us == pytest.approx(10)
    assert table["total_launches"] == 7 and table["launches"]["product"] == 3 and table["unnamed_launches"] == 0
    # two simulations (the backup ran twice in its loop), self-play's 4 launches over them
    assert table["step"] == "simulation" and table["steps"] == 2 and table["launches_per_step"] == 2


def test_a_gpu_trace_knows_host_copies_and_library_kernels_by_their_names(tmp_path):
    us = 1e-6
    write_trace(
        tmp_path / "gpu",
        "/device:GPU:0 (stream 7)",
        [
            ("MemcpyHtoD", 0, 5, None, None),
            ("loop_convolution_kernel", 5, 10, "convolution.1", "jit_f(42)"),  # the module with its run's id
            ("sm90_xmma_gemm_f32f32_tf32f32", 20, 10, "command_buffer.3", "jit_f(42)"),  # an instruction not in it
            ("ynn_fusion", 30, 5, "ynn_fusion", "jit_f(42)"),
            ("scatter_fusion", 35, 5, "scatter_fusion", "jit_f(42)"),
            ("Memcpy DtoH (Device -> Pinned)", 40, 2, "while.1", "jit_f(42)"),  # the loop's predicate
            ("MemcpyDtoD", 42, 3, None, None),
            ("add_fusion", 50, 5, "not.an.instruction", "jit_f(42)"),
            ("copy", 70, 5, "copy.1", "jit_random_bits(43)"),  # another program's
        ],
        derived=[("ynn_fusion", 30, 5, "ynn_fusion", "jit_f(42)")],
    )
    table = profiling.op_kind_table(tmp_path / "gpu", HAND_MADE_PROGRAM, profiling.SIMULATION)
    seconds = {kind: s / us for kind, s in table["seconds"].items() if s}
    assert seconds == pytest.approx(
        {"host": 5 + 2, "convolution": 10, "product": 10 + 5, "gather/scatter": 5, "copy": 3, "elementwise": 5}
    )
    assert table["total_launches"] == 8 and table["idle_s"] / us == pytest.approx(5 + 5)  # 15-20 and 45-50
    assert table["unnamed_launches"] == 4  # the copy in, the device copy, the library's gemm, the unknown fusion
    assert table["steps"] == 1 and table["launches_per_step"] == 2
