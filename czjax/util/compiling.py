"""How czjax's training programs are compiled, per backend: :func:`jit` and :func:`compile_lowered` are
``jax.jit`` and ``Lowered.compile`` with the compiler options :func:`compiler_options` chooses.

On the CPU, jaxlib (0.10 on) hands matrix products to YNNPACK, and reductions with the work
feeding them: a convolution followed by a sum (GroupNorm's statistics) becomes one YNNPACK
fusion, which runs on one thread where XLA's own convolution uses every core. On the 2-core
CPU the blog's CNN (Mk4) trains at 61 games/s with the default and 100 with YNNPACK kept for
matrix products only (docs/benchmarks.md, "Mk4 on the CPU"). Programs without convolutions
(the MLPs; the ResNet, whose CPU convolutions are im2col products) keep the default: their
speed is the same either way, and their results stay bit for bit those recorded
(tests/test_unchanged.py), which reductions outside YNNPACK would change in the last bits.

The options are passed per program, not through ``XLA_FLAGS``: an ``XLA_FLAGS`` entry a jaxlib
does not know aborts the process, while an unknown per-program option is an error czjax can
catch (a jaxlib without it compiles with its defaults). A user's own ``XLA_FLAGS`` choice of
YNNPACK fusions wins over czjax's.
"""

from __future__ import annotations

import functools
import os
from collections.abc import Callable
from typing import Any

import jax

YNN_FUSIONS = "xla_cpu_experimental_ynn_fusion_type"
# per backend: the options for programs with convolutions (backends not listed: none)
CONVOLUTION_OPTIONS: dict[str, dict[str, str | bool]] = {"cpu": {YNN_FUSIONS: "LIBRARY_FUSION_TYPE_DOT"}}


@functools.cache
def compiler_options(convolutions: bool) -> dict[str, str | bool] | None:
    """The compiler options for a program on JAX's default backend (``convolutions``: whether it
    holds convolution ops), or None where there are none, the jaxlib does not know them, or
    ``XLA_FLAGS`` sets them."""
    options = CONVOLUTION_OPTIONS.get(jax.default_backend()) if convolutions else None
    if not options or any(name in os.environ.get("XLA_FLAGS", "") for name in options):
        return None
    try:
        jax.jit(lambda x: x + 1).lower(0.0).compile(compiler_options=options)
    except Exception:  # noqa: BLE001 - any refusal means: this jaxlib's defaults
        return None
    return dict(options)


def jit(fn: Callable, *, convolutions: bool, **kwargs: Any) -> Callable:
    """``jax.jit(fn, **kwargs)`` with :func:`compiler_options`. JAX takes compiler options on a
    top-level program only: called inside another trace (a scan's ``jit``, a ``vmap``), the
    function is traced without them, as part of the caller's program and under its options."""
    options = compiler_options(convolutions)
    if options is None:
        return jax.jit(fn, **kwargs)
    return _TopLevelOptions(jax.jit(fn, compiler_options=options, **kwargs), jax.jit(fn, **kwargs))


class _TopLevelOptions:
    """A jitted function with compiler options at the top level, without them when traced."""

    def __init__(self, top: Any, nested: Any):
        self._top, self._nested = top, nested

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        traced = any(isinstance(leaf, jax.core.Tracer) for leaf in jax.tree.leaves((args, kwargs)))
        return (self._nested if traced else self._top)(*args, **kwargs)

    def lower(self, *args: Any, **kwargs: Any) -> Any:
        return self._top.lower(*args, **kwargs)


def compile_lowered(lowered: jax.stages.Lowered, extra: dict[str, str | bool] | None = None) -> jax.stages.Compiled:
    """``lowered.compile`` with :func:`compiler_options` for what the program holds, and ``extra``
    (a caller's own, such as a profile's: they win)."""
    options = {**(compiler_options("stablehlo.convolution" in lowered.as_text()) or {}), **(extra or {})}
    return lowered.compile(compiler_options=options or None)
