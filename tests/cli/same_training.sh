#!/usr/bin/env bash
# A network trained with one kernel family reaches the accuracy it reaches with another: runs
# `convtune train cnn ... --family A` and `... --family B` with the same seed and data, and checks that the final
# test accuracies differ by at most TOLERANCE.
# Usage: same_training.sh TOLERANCE FAMILY_A FAMILY_B convtune train cnn args...   (the script adds --family, --out)
set -u
tolerance=$1 family_a=$2 family_b=$3
shift 3
accuracy() {  # FAMILY: the run's "saved ... (test accuracy X)" value, its output on stderr
  local out
  out=$("$@" 2>&1) || { echo "$out" >&2; return 1; }
  echo "$out" >&2
  echo "$out" | sed -n 's/.*saved .* (test accuracy \([0-9.]*\)).*/\1/p' | tail -1
}
a=$(accuracy "$@" --family "$family_a" --out "same_training_$family_a.model") || { echo "same_training.sh: $family_a failed"; exit 1; }
b=$(accuracy "$@" --family "$family_b" --out "same_training_$family_b.model") || { echo "same_training.sh: $family_b failed"; exit 1; }
echo "same_training.sh: test accuracy $a with $family_a, $b with $family_b (tolerance $tolerance)"
[ -n "$a" ] && [ -n "$b" ] || { echo "same_training.sh: no accuracy printed"; exit 1; }
awk -v a="$a" -v b="$b" -v t="$tolerance" 'BEGIN { d = a - b; if (d < 0) d = -d; exit !(d <= t) }' ||
  { echo "same_training.sh: accuracies differ by more than $tolerance"; exit 1; }
