#!/usr/bin/env bash
# The runs agentfloor.py reads: for each seed given, the study's F1 run (ppo_continuous_poi_ensemble.py --int-coef 0
# on PendulumMotorChange-v1, 300,000 steps) with --save-model and --checkpoint-every 73, whose checkpoint after
# iteration 73 (the last before the change; the next is written at the end) is copied aside as at-change.pt as soon as
# it is there. Two runs at a time, in OUT/runs; each run's console in OUT/F1-SEED.log.
#     bash docs/results/continuous-interest/agentfloor_runs.sh OUT SEED...
set -euo pipefail
out=$(realpath -m "$1"); shift
file=$(dirname "$(realpath "$0")")/../../../algos/ppo_continuous_poi_ensemble.py
mkdir -p "$out/runs"
one() {
  python "$file" --env PendulumMotorChange-v1 --int-coef 0 --total-timesteps 300000 --save-model \
    --checkpoint-every 73 --exp-name F1 --seed "$1" --runs-dir "$out/runs" > "$out/F1-$1.log" 2>&1 &
  local pid=$! checkpoint folder
  while kill -0 "$pid" 2>/dev/null; do
    for checkpoint in "$out"/runs/*__F1__"$1"__*/checkpoint.pt; do
      folder=${checkpoint%/*}
      if [ -f "$checkpoint" ] && [ ! -f "$folder/at-change.pt" ]; then
        cp "$checkpoint" "$folder/at-change.tmp" && mv "$folder/at-change.tmp" "$folder/at-change.pt"
      fi
    done
    sleep 2
  done
  wait "$pid"
}
seeds=("$@")
for ((i = 0; i < ${#seeds[@]}; i += 2)); do
  one "${seeds[i]}" &
  if ((i + 1 < ${#seeds[@]})); then one "${seeds[i + 1]}" & fi
  wait
done
failed=0
for seed in "${seeds[@]}"; do  # each run finished, with the checkpoint at the change beside it
  ok=0
  for folder in "$out"/runs/*__F1__"$seed"__*; do
    if [ -f "$folder/finished.json" ] && [ -f "$folder/at-change.pt" ]; then ok=1; fi
  done
  if ((!ok)); then echo "seed $seed: no finished run with at-change.pt (see $out/F1-$seed.log)" >&2; failed=1; fi
done
exit $failed
