#!/usr/bin/env bash
# The main job: set up .venv if needed, then train the default model (SimpleMLP, REINFORCE with
# an entropy bonus against RandomPunisher) and print where its outputs are.
#   ./run.sh                 train into runs/default-seed0 (a second call continues that run, or says it
#                            has finished and how to train it further)
#   ./run.sh --overwrite     train it again from scratch
#   ./run.sh --preset ex3-rwb --batches 2000    any `czjax train` flags
#   GPU=1 ./run.sh           the same with jax for CUDA 12 (GPU=cuda13 for CUDA 13)
set -euo pipefail
cd "$(dirname "$0")"
scripts/setup-venv.sh
next_steps() {  # what to try once a run ends, with its folder (--out, or czjax train's default)
  local out="" preset=default seed=0 previous=""
  for arg in "$@"; do
    case "$previous" in --out) out=$arg ;; --preset) preset=$arg ;; --seed) seed=$arg ;; esac
    previous=$arg
  done
  out=${out:-runs/$preset-seed$seed}  # czjax train's default folder
  cat <<NEXT

next, with the model in $out:
  .venv/bin/czjax play $out            play it in the terminal
  .venv/bin/czjax serve $out           play it in the browser
  .venv/bin/czjax eval pons $out       its move error on Pons' sets
  .venv/bin/czjax tournament random random-punisher $out
  ./run.sh --preset ex3-rwb --out runs/ex3    another preset (.venv/bin/czjax train --help lists them)
NEXT
}
status=0
if [ $# -eq 0 ] && [ -f runs/default-seed0/run.json ]; then
  # czjax says whether it continues that run or the run has finished (and how to train it further)
  echo "runs/default-seed0 holds the default run (./run.sh --overwrite starts it again)"
  .venv/bin/czjax train --resume --out runs/default-seed0 || status=$?
else
  .venv/bin/czjax train "$@" || status=$?
fi
# after a run that trained (or was stopped and saved), not after a refused command
case "$status" in 0 | 130 | 143) next_steps "$@" ;; esac
exit "$status"
