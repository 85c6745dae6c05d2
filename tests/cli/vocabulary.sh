#!/usr/bin/env bash
# The command line's shared vocabulary, for every subcommand: --help renders, the shared options have the same
# names and defaults, a usage error exits 2 with a message, --version prints, the completion script is valid bash.
# Usage: vocabulary.sh CONVTUNE
set -u
convtune=$1
failures=0
fail() { echo "vocabulary.sh: $*"; failures=$((failures + 1)); }

# Every subcommand, leaves and parents; the list is checked against --help below so a new one cannot be missed.
commands=("devices" "bench" "peak" "tune" "db" "db list" "db show" "db merge" "db prune" "report" "train"
          "train mlp" "train cnn" "eval" "completion")

# The top-level help lists exactly these first-level commands.
listed=$("$convtune" --help | sed -n '/^Subcommands:/,$p' | awk 'NR > 1 && NF {print $1}' | sort | tr '\n' ' ')
expected=$(printf '%s\n' "${commands[@]}" | awk '{print $1}' | sort -u | tr '\n' ' ')
[ "$listed" = "$expected" ] || fail "convtune --help lists '$listed', this test covers '$expected'"

help_of() { "$convtune" $1 --help 2>&1; }

for command in "${commands[@]}"; do
  help=$(help_of "$command")
  status=$?
  [ $status -eq 0 ] || fail "'$command --help' exits $status"
  grep -q "^Usage: " <<<"$help" || fail "'$command --help' has no Usage line"
  # CLI11's rendering of negated flags, "--no-verify{false}", means nothing to a reader.
  grep -q "{false}\|{true}" <<<"$help" && fail "'$command --help' shows a flag as {false}/{true}"
  # Jargon of the project's history documents has no place in help texts.
  grep -qi "seed 00" <<<"$help" && fail "'$command --help' mentions 'seed 00X'"

  # A usage error: exit status 2 and a message on stderr, never CLI11's own codes (104, 106, 109).
  error=$("$convtune" $command --no-such-option 2>&1 >/dev/null)
  status=$?
  [ $status -eq 2 ] || fail "'$command --no-such-option' exits $status, expected 2"
  # (A missing argument or subcommand may be what it names first.)
  grep -q "[a-z]" <<<"$error" || fail "'$command --no-such-option' exits without a message"
done

# Shared options: the same spelling, alias and default wherever they appear.
expect_option() {  # COMMAND REGEX WHAT
  grep -Eq -- "$2" <<<"$(help_of "$1")" || fail "'$1 --help': $3 (expected /$2/)"
}
for command in bench peak tune "train mlp" "train cnn" eval; do
  expect_option "$command" '^  --device,--backend TEXT=best' "--device (alias --backend) defaulting to best"
done
for command in bench tune; do
  expect_option "$command" '^  --warmup INT:INT>=0=1 ' "--warmup defaulting to 1, at least 0"
  expect_option "$command" '^  --repeats INT:INT>=1=5 ' "--repeats defaulting to 5, at least 1"
  expect_option "$command" '^  --direction TEXT:\{fwd,bwd-data,bwd-filter,all\}=all' "--direction defaulting to all"
  expect_option "$command" '^  --batch-scale FLOAT:POSITIVE=1' "--batch-scale defaulting to 1"
  expect_option "$command" '^  --math TEXT:\{fp32,tf32,3xtf32,fp32-fast,bf16,fp16\}' "--math fp32|tf32|3xtf32|fp32-fast|bf16|fp16"
  expect_option "$command" '^  --suite ' "--suite"
  expect_option "$command" '^  --layer ' "--layer"
  expect_option "$command" '^  --gemm ' "--gemm"
done
for command in bench "train cnn" eval; do
  expect_option "$command" '^  --family TEXT=auto ' "--family defaulting to auto"
done
for command in bench tune "train cnn" eval; do
  expect_option "$command" '^  --workspace-limit TEXT:SIZE=device( |$)' "--workspace-limit defaulting to device"
done
expect_option tune '^  --family TEXT=all ' "--family defaulting to all"
for command in tune db "db list" "db show" "db merge" "db prune"; do
  expect_option "$command" '^  --db TEXT ' "--db FILE"
done
for command in devices "db list" "db show" peak; do
  expect_option "$command" '^  --json ' "--json"
done
expect_option "" '^  --version ' "--version"
expect_option "" '^  --wide ' "--wide"
expect_option "" '^  --verbose ' "--verbose"

# Range checks name the option and what it expects.
for args in "bench --warmup -1" "tune --warmup -1" "bench --repeats 0" "tune --repeats 0" "peak --repeats 0" \
            "bench --batch-scale 0" "bench --direction sideways" "bench --math int8" "train cnn --epochs 0" \
            "train mlp --epochs 0" "eval model --batch 0" "bench --algorithm fastest" "bench --workspace-limit 12Q" \
            "tune --workspace-limit -1" "train cnn --workspace-limit 1.5G" "eval model --workspace-limit lots"; do
  error=$("$convtune" $args 2>&1 >/dev/null)
  status=$?
  option=$(grep -o -- '--[a-z-]*' <<<"$args" | tail -1)
  [ $status -eq 2 ] || fail "'$args' exits $status, expected 2"
  grep -q -- "$option" <<<"$error" || fail "'$args' does not name $option: $error"
done
# An option that cannot apply is refused, naming both sides.
error=$("$convtune" bench --layer N=1,C=1,H=4,K=1,R=3 --config TILE_M=64 2>&1 >/dev/null)
[ $? -eq 2 ] && grep -q -- "--config needs --family" <<<"$error" || fail "--config without --family: $error"
error=$("$convtune" tune --layer N=1,C=1,H=4,K=1,R=3 --family auto 2>&1 >/dev/null)
[ $? -eq 2 ] && grep -q -- "tune --family auto" <<<"$error" || fail "tune --family auto: $error"
refused() {  # MESSAGE ARGS...: an option that would be ignored exits 2 with MESSAGE
  local message=$1 error
  shift
  error=$("$convtune" "$@" 2>&1 >/dev/null)
  [ $? -eq 2 ] && grep -q -- "$message" <<<"$error" || fail "'$*' is not refused with '$message': $error"
}
refused "--momentum: applies to --optimizer sgd, not adam" train cnn --momentum 0.5
refused "--fused-family: chooses the fused kernel, but --no-fuse" eval x.model --no-fuse --fused-family direct_tiled
refused "--size: sizes the fill experiment, which --skip-fill leaves out" peak --skip-fill --size 100
refused "--samples: .* give --out FILE.json" bench --layer N=1,C=1,H=4,K=1,R=3 --samples
refused "--seed: .*--strategy exhaustive draws nothing" tune --layer N=1,C=1,H=4,K=1,R=3 --strategy exhaustive --seed 3
refused "--groups sets the work-groups of the GPU per-sample kernel, but cpu" train mlp --device cpu --groups 2
refused "--family implicit_gemm runs compiled kernels on an OpenCL or CUDA device, but the device is cpu" \
  bench --layer N=1,C=1,H=4,K=1,R=3 --device cpu --family implicit_gemm --config TILE_M=64
if "$convtune" devices 2>/dev/null | grep -q "^opencl: [1-9]"; then  # an OpenCL device to refuse it on
  refused "--algorithm selects a CPU backend path, but the device is opencl" bench --layer N=1,C=1,H=4,K=1,R=3 \
    --device opencl --algorithm sequential
fi

# fp32-fast admits Winograd's alpha 8 (a 7x7 filter has no smaller tile), which fp32 refuses by name.
if "$convtune" devices 2>/dev/null | grep -q "^opencl: [1-9]"; then
  seven=(bench --layer N=1,C=2,H=8,K=2,R=7,pad=3 --device opencl --direction fwd --family winograd --repeats 1 --warmup 0)
  error=$("$convtune" "${seven[@]}" 2>&1 >/dev/null)
  grep -q "alpha 8.*fp32-fast admits it" <<<"$error" || fail "winograd 7x7 in fp32 is not refused for alpha 8: $error"
  output=$("$convtune" "${seven[@]}" --math fp32-fast --workspace-limit 1G 2>&1)
  [ $? -eq 0 ] && grep -q "winograd\[.*M_TILE=2" <<<"$output" || fail "winograd 7x7 does not run in fp32-fast: $output"
  # No workspace at all: winograd is left out, naming the limit (nothing is compiled).
  error=$("$convtune" "${seven[@]}" --math fp32-fast --workspace-limit 0 2>&1 >/dev/null)
  grep -q "exceed the workspace limit of 0 bytes" <<<"$error" || fail "--workspace-limit 0 does not refuse winograd: $error"
fi

error=$("$convtune" bench --workspace-limit 64X 2>&1 >/dev/null)
grep -q -- "--workspace-limit: '64X' is invalid: expected a size in bytes, optionally with K, M, G or T" <<<"$error" ||
  fail "--workspace-limit 64X does not say what was expected: $error"

# --version: the version, the git revision and the backends.
version=$("$convtune" --version)
[ $? -eq 0 ] && grep -Eq '^convtune [0-9]+\.[0-9]+\.[0-9]+, git [^ ]+; backends compiled in: cpu' <<<"$version" ||
  fail "--version prints '$version'"

# The completion script: valid bash that knows every subcommand and the shared options.
script=$("$convtune" completion bash)
bash -n <<<"$script" || fail "completion bash is not valid bash"
for word in devices bench peak tune db report train eval mlp cnn --device --backend --db --json --warmup; do
  grep -q -- "$word" <<<"$script" || fail "completion bash does not know $word"
done

# --json: standard output is one JSON document, numbers as numbers.
json_check() {  # PYTHON_ASSERTIONS ARGS...: runs convtune ARGS and checks its stdout as JSON `doc`
  local check=$1 output
  shift
  output=$("$convtune" "$@" 2>/dev/null) || { fail "'$*' failed"; return; }
  python3 -c "import json, sys; doc = json.loads(sys.stdin.read()); $check" <<<"$output" || fail "'$*': $check"
}
json_check 'assert doc["best"]["id"] and doc["backends"][0]["backend"] == "cpu"
assert isinstance(doc["backends"][0]["devices"][0]["global_memory_bytes"], int)' devices --json
json_check 'assert doc["entries"] == [] and doc["user_entries"] == 0' db list --json --user-only --db /nonexistent/db.json
json_check 'assert doc["fill_experiment"]["size"] == 300 and isinstance(doc["fill_experiment"]["rows"][0]["ms"], float)
assert doc["convtune"].startswith("convtune ")' peak --device cpu --skip-ceilings --size 300 --repeats 1 --json

# The old spelling of db's --db still works beside the new one.
"$convtune" db --db /nonexistent/db.json list --user-only >/dev/null 2>&1 || fail "db --db FILE list is refused"
"$convtune" db list --db /nonexistent/db.json --user-only >/dev/null 2>&1 || fail "db list --db FILE is refused"

if [ $failures -ne 0 ]; then
  echo "vocabulary.sh: $failures failure(s)"
  exit 1
fi
echo "vocabulary.sh: every subcommand's help, shared options, usage errors, --version and completion are as expected"
