#!/usr/bin/env bash
# The main job: set up .venv if needed, then train the default model (SimpleMLP, REINFORCE with
# an entropy bonus against RandomPunisher) and print where its outputs are.
#   ./run.sh                 train into runs/default-seed0 (a second call continues or reports that run)
#   ./run.sh --overwrite     train it again from scratch
#   ./run.sh --preset ex3-rwb --batches 2000    any `czjax train` flags
#   GPU=1 ./run.sh           the same with jax for CUDA 12 (GPU=cuda13 for CUDA 13)
set -euo pipefail
cd "$(dirname "$0")"
scripts/setup-venv.sh
if [ $# -eq 0 ] && [ -f runs/default-seed0/run.json ]; then
  echo "runs/default-seed0 holds the default run: continuing it (./run.sh --overwrite starts it again)"
  exec .venv/bin/czjax train --resume --out runs/default-seed0
fi
exec .venv/bin/czjax train "$@"
