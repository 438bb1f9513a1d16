"""The suite's comparisons with recorded results (tests/records.py) bite on the machine running
them: the nearest record is chosen by a stated rule, a record on this very machine is compared bit
for bit at the flags it was taken at (not the suite's faster compiling), every record can be
matched (none lacks a platform key), and a test that asks for a comparison and makes none fails."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests import records
from tests.conftest import RecordedComparisons

DATA = Path(__file__).parent / "data"
RECORD_FILES = [DATA / "unchanged.json", DATA / "old-run" / "expected.json"]  # every file of records

AMD = {"backend": "cpu", "jax": "0.10.2", "cpu": "AMD EPYC", "cpu_flags": "aaaa", "cores": 2, "xla_flags": ""}


def record(**platform) -> dict:
    return {"platform": {**AMD, **platform}}


def test_a_record_of_this_machine_is_compared_bit_for_bit_at_its_own_flags():
    here = {**AMD, "xla_flags": "--xla_backend_optimization_level=0"}  # the suite's flags
    stored = [record(cpu="Intel Xeon", cpu_flags="bbbb"), record()]
    choice = records.nearest(stored, here)
    assert choice is not None and choice.exact and choice.record is stored[1]
    assert choice.flags == ""  # the record's flags, not the suite's
    assert "bit for bit" in choice.describe() and "AMD EPYC" in choice.describe()


def test_elsewhere_the_nearest_record_within_float_noise():
    stored = [
        record(jax="0.9.0"),  # the same processor under another jax
        record(cpu="Intel Xeon", cpu_flags="bbbb"),  # the same jax, another processor
        record(cpu_flags="cccc", xla_flags="--xla_cpu_foo"),  # the same name and jax, other flags
    ]
    here = {**AMD, "cpu_flags": "dddd"}
    choice = records.nearest(stored, here)
    assert choice is not None and not choice.exact and choice.record is stored[2]
    assert choice.flags == "--xla_cpu_foo"
    assert f"rtol={records.RTOL:g}" in choice.describe()
    # other cores: the same processor, but XLA's CPU reductions split by threads
    assert not records.nearest([record()], {**AMD, "cores": 4}).exact


def test_no_record_of_another_backend():
    assert records.nearest([record()], {**AMD, "backend": "gpu"}) is None


def test_metrics_close_is_stated_and_bites():
    rows = [{"batches": 1, "loss": 0.5, "kl": 1e-7}]
    records.assert_metrics_close([{"batches": 1, "loss": 0.5 * (1 + 0.5e-4), "kl": 5e-7}], rows, "case")
    with pytest.raises(AssertionError, match="loss changed"):
        records.assert_metrics_close([{"batches": 1, "loss": 0.5 * (1 + 2e-4), "kl": 1e-7}], rows, "case")
    with pytest.raises(AssertionError, match="other metrics"):
        records.assert_metrics_close([{"batches": 1, "loss": 0.5}], rows, "case")


@pytest.mark.parametrize("path", RECORD_FILES, ids=lambda p: p.parent.name + "/" + p.name)
def test_every_record_can_be_matched_on_its_machine(path):
    """A record without one of the platform's keys (or with a key of another name) matches no
    machine, so its comparison would never run bit for bit anywhere."""
    stored = json.loads(path.read_text())["records"]
    assert stored
    for one in stored:
        assert sorted(one["platform"]) == sorted(records.PLATFORM_KEYS), one["platform"]
        assert records.nearest(stored, one["platform"]).exact


def test_this_machines_platform_is_complete():
    here = records.platform()
    assert sorted(here) == sorted(records.PLATFORM_KEYS)
    assert here["cpu"] and here["cores"] >= 1


def test_a_test_that_compares_with_nothing_fails():
    said = []
    comparisons = RecordedComparisons(lambda name, value: said.append((name, value)))
    with pytest.raises(pytest.fail.Exception, match="compared with none"):
        comparisons.check_said()
    comparisons.said("results unchanged", "bit for bit with the record of X")
    comparisons.check_said()
    assert said == [("recorded comparison", "results unchanged: bit for bit with the record of X")]
