"""The campaign's step of the test suite: ``suite-gpu``, the whole suite on a GPU machine
(``docs/results/test-suite/``). The versions it passed with become constraints/gpu-h100.txt
(``scripts/refresh-constraints.sh gpu FILE``)."""

from __future__ import annotations

import os

from steps import Context, command_step, python

# The suite is compile-bound: one xdist worker a core, two cores left to the driver and pytest.
SUITE_WORKERS = max(2, min(14, (os.cpu_count() or 4) - 2))


def suite_commands(ctx: Context) -> list[tuple[str, list[str]]]:
    return [
        ("versions", python("-m", "pip", "freeze", "--exclude-editable")),
        # -v: a run stopped at the call's limit still names the tests that failed so far
        ("pytest", python("-m", "pytest", "-v", "-n", str(SUITE_WORKERS), "tests")),
    ]


STEPS = {"suite-gpu": command_step("the test suite on the GPU", "test-suite", suite_commands)}
