#!/usr/bin/env bash
# Installs what compiling for a GPU and a TPU without one needs (`czjax bench kernels`,
# tests/test_kernels.py), each into its own folder beside .venv, never into it: a CUDA plugin in
# the suite's own environment would make jax try a GPU in every test.
#   .plugins/cuda  the CUDA plugin and its PJRT runtime for the installed jaxlib (jax-cuda12-plugin,
#                  jax-cuda12-pjrt: about 180 MB to download, 480 MB installed; no nvcc: XLA's
#                  deviceless compile needs no ptxas)
#   .plugins/tpu   libtpu, the version jax[tpu] asks for (about 210 MB to download, 680 MB installed)
# Once per jaxlib version: a stamp in each folder records it. CZJAX_PLUGINS=DIR uses DIR instead.
# Use: PYTHONPATH=.plugins/cuda .venv/bin/python -m czjax bench kernels rollout (the command sets
# JAX_PLATFORMS=cpu itself).
set -euo pipefail
cd "$(dirname "$0")/.."
python="${CZJAX_VENV:-.venv}/bin/python"
plugins="${CZJAX_PLUGINS:-.plugins}"
version=$("$python" -c 'import jaxlib; print(jaxlib.__version__)')
libtpu=$("$python" - <<'PY'
import importlib.metadata, re
for requirement in importlib.metadata.requires("jax") or []:
    if requirement.startswith("libtpu") and 'extra == "tpu"' in requirement:
        print(re.sub(r"\s*;.*", "", requirement).replace(" ", ""))
        break
PY
)
install() {  # folder, packages...
  local folder="$plugins/$1"; shift
  local want="$version $*"
  if [ -f "$folder/.stamp" ] && [ "$(cat "$folder/.stamp")" = "$want" ]; then
    return
  fi
  rm -rf "$folder"
  local started=$SECONDS
  "$python" -m pip install -q --no-deps --target "$folder" "$@"
  echo "$want" > "$folder/.stamp"
  echo "plugins: $* in $folder ($(du -sh "$folder" | cut -f1), $((SECONDS - started)) s)"
}
install cuda "jax-cuda12-plugin==$version" "jax-cuda12-pjrt==$version"
install tpu "${libtpu:-libtpu}"
