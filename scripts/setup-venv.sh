#!/usr/bin/env bash
# Creates .venv (if missing) and installs czjax into it with the given extras, once: a stamp in
# .venv records what was installed for which pyproject.toml, so a second call returns at once.
#   scripts/setup-venv.sh            czjax and its runtime dependencies (jax for the CPU)
#   scripts/setup-venv.sh test       ... plus the test extras (pytest, hypothesis, torch CPU, onnx, playwright,
#                                    nbclient for the notebook, the checks' tools)
#   GPU=1 scripts/setup-venv.sh      ... plus jax with CUDA 12 (GPU=cuda13 for CUDA 13)
# Versions: the known-good ones in constraints/cpu.txt (those the suite passed with; refreshed by
# scripts/refresh-constraints.sh); CZJAX_CONSTRAINTS=none takes the newest pyproject.toml allows,
# CZJAX_CONSTRAINTS=FILE another set (constraints/gpu-h100.txt: the H100's).
# PyTorch (in the test and torch extras): on the CPU set-up its CPU build, from PyTorch's own index
# (https://download.pytorch.org/whl/cpu) before everything else, so that the plain package index's
# CUDA build (several GB of NVIDIA libraries) is never pulled in. CZJAX_TORCH_INDEX=URL names
# another index (a mirror of it), CZJAX_TORCH_INDEX=none takes torch from the ordinary index. pip's
# find-links and configured indexes still apply: a CPU wheel found there installs when that index
# cannot be reached.
# CZJAX_VENV=DIR sets up DIR instead of .venv. CZJAX_SETUP_DRY_RUN=1 prints the pip commands only.
set -euo pipefail
cd "$(dirname "$0")/.."
extras="${1:-}"
python="${PYTHON:-python3}"
venv="${CZJAX_VENV:-.venv}"
gpu="${GPU:-}"
case "$gpu" in
  "" | 0) gpu="" ;;
  1 | cuda12) gpu="cuda12" ;;
  cuda13) gpu="cuda13" ;;
  *) echo "setup: GPU must be 1, cuda12 or cuda13, got '$gpu'" >&2; exit 2 ;;
esac

if ! command -v "$python" >/dev/null 2>&1; then
  echo "setup: $python not found: czjax needs Python 3.10 or newer (set PYTHON=... to choose one)" >&2; exit 2
fi
if ! "$python" -c 'import sys; sys.exit(sys.version_info < (3, 10))'; then
  echo "setup: czjax needs Python 3.10 or newer; $python is $("$python" --version 2>&1)" >&2; exit 2
fi

constraints="${CZJAX_CONSTRAINTS:-constraints/cpu.txt}"
if [ "$constraints" = none ]; then
  pin=()
elif [ -f "$constraints" ]; then
  pin=(-c "$constraints")
else
  echo "setup: no constraints file $constraints (CZJAX_CONSTRAINTS=none installs the newest versions instead)" >&2; exit 2
fi

# The torch requirement of the extras being installed (none: nothing printed), from pyproject.toml.
torch_requirement=$("$python" - "$extras" <<'PY'
import re
import sys

extra = sys.argv[1]
try:
    import tomllib
except ImportError:  # Python 3.10
    tomllib = None
if extra:
    if tomllib is not None:
        with open("pyproject.toml", "rb") as f:
            requirements = tomllib.load(f)["project"]["optional-dependencies"].get(extra, [])
    else:  # the extra's list, read as text: its lines up to the next "name = [" or section
        text = open("pyproject.toml").read().split("[project.optional-dependencies]", 1)[-1]
        match = re.search(rf"^{re.escape(extra)}\s*=\s*\[(.*?)(?=^[A-Za-z0-9_-]+\s*=\s*\[|^\[)", text, re.M | re.S)
        requirements = re.findall(r'"([^"]+)"', match.group(1)) if match else []
    for requirement in requirements:
        if re.match(r"torch\s*(?:[<>=!~;\[]|$)", requirement):
            print(requirement.replace(" ", ""))
PY
)
torch_index="${CZJAX_TORCH_INDEX:-https://download.pytorch.org/whl/cpu}"
# the CPU set-up's torch: its CPU build, from PyTorch's index, alone (its dependencies come with czjax's)
torch_step=()
if [ -n "$torch_requirement" ] && [ -z "$gpu" ] && [ "$torch_index" != none ]; then
  torch_step=(install --quiet --no-deps --index-url "$torch_index" "$torch_requirement")
fi
czjax_step=(install --quiet -e ".${extras:+[$extras]}")
jax_step=(install --quiet --upgrade "jax[$gpu]")  # the set's jax version, with its CUDA plugin

if [ -n "${CZJAX_SETUP_DRY_RUN:-}" ]; then
  show() { local args=("$@"); echo "pip ${args[*]/--quiet/}" | tr -s ' '; }
  if [ ${#torch_step[@]} -gt 0 ]; then show "${torch_step[@]}" ${pin[@]+"${pin[@]}"}; fi
  show "${czjax_step[@]}" ${pin[@]+"${pin[@]}"}
  if [ -n "$gpu" ]; then show "${jax_step[@]}" ${pin[@]+"${pin[@]}"}; fi
  exit 0
fi

hash=$(cat pyproject.toml ${pin[1]:+"${pin[1]}"} | "$python" -c 'import hashlib, sys; print(hashlib.sha256(sys.stdin.buffer.read()).hexdigest()[:12])')
stamp() { echo "$venv/.czjax-installed-${1:-base}${gpu:+-$gpu}-$hash"; }
# Test extras include everything the runtime needs, so they satisfy a plain install too.
if [ -f "$(stamp "$extras")" ] || { [ -z "$extras" ] && [ -f "$(stamp test)" ]; }; then
  exit 0
fi

if [ ! -x "$venv/bin/python" ]; then
  echo "setup: creating $venv with $("$python" --version 2>&1)"
  "$python" -m venv "$venv" || { echo "setup: '$python -m venv' failed: install your system's venv package (Debian/Ubuntu: apt-get install python3-venv)" >&2; exit 2; }
fi
echo "setup: installing czjax${extras:+ with its $extras extras}${gpu:+ and jax[$gpu]} into $venv${pin[1]:+ at the versions in ${pin[1]}} (once; later calls skip this)"
"$venv/bin/python" -m pip install --quiet --upgrade pip
if [ ${#torch_step[@]} -gt 0 ]; then
  echo "setup: PyTorch's CPU build ($torch_requirement) from $torch_index"
  "$venv/bin/python" -m pip "${torch_step[@]}" ${pin[@]+"${pin[@]}"}
fi
# setuptools' build of an editable install prints a box warning about same-named folders in the
# working directory; the checkout is that folder on purpose, so the box says nothing to act on
PYTHONWARNINGS="ignore:Editable installation" "$venv/bin/python" -m pip "${czjax_step[@]}" ${pin[@]+"${pin[@]}"}
if [ -n "$gpu" ]; then
  "$venv/bin/python" -m pip "${jax_step[@]}" ${pin[@]+"${pin[@]}"}
fi
rm -f "$venv"/.czjax-installed-*
touch "$(stamp "$extras")"
