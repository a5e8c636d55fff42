#!/usr/bin/env bash
# The GPU measurements of issues #26 and #40 as ONE call of under ten minutes on a lent GPU
# machine, which has no internet and no package index (/work/shared/GPU.md). A lease is about
# 15 minutes of device time, a machine start one or two of them, so there is one call and no
# rerun: the parts run in an order that gets the most numbers back from a call cut short
# (the one part no CPU can run first, then the shortest measurement, then the longest), each
# under what is left of BUDGET seconds, and each writes its numbers as they come, so a
# machine taken back part way still returns what was done. In order:
#
#   1. the tests marked `cuda` (issue #26; the FSDP and the other tests no CPU runs), capped
#      at 100 s                                                          ~45 s on the H100
#   2. GPT-2 small's shape (12 x 768, block 1024, vocabulary 50,304, batch 8): the training
#      step of attnlab and nanoGPT, eager and compiled, and the MFU of each
#      (benchmarks/gpu_lm.py part 1; not the recompilations, which the H100 counted at width
#      384 and which would compile three more graphs at this size)        ~2.5 min
#   3. nanoGPT's shakespeare-char shape (6 x 384, block 256, batch 64, dropout 0.2, bf16,
#      compiled), from ONE nanoGPT run of its 5,000 iterations, evaluated every 500
#      (benchmarks/time_to_loss.py), in what is left:
#      - time-to-loss (issue #40 item 6): `attnlab train lm --recipe fast` for 1,500 steps:
#        steps to nanoGPT's final loss, the ratio of training times (each run's own clock,
#        with and without compile), a loss-vs-time PNG and CSV, printed and written as soon
#        as this run ends;
#      - the loss at equal iterations (item 5, at the issue's 5,000) and at width 384 after
#        the initialisation change (the re-measure): attnlab with nanoGPT's own flags for
#        its 5,000 iterations (--same-flags), last: the part most likely to be cut ~5.5 min
#
# Not in the default call (each a call of its own, when a second lease comes):
#   ONLY=lm      the whole runs of 1,000 iterations against nanoGPT's train.py, with wall and
#                loop time (benchmarks/gpu_lm.py; its step at width 384 with STEP=1)
#   ONLY=llama   issue #39 item 6's GPU half (benchmarks/llama_real.py --parts gpu)
#
# Prepare, here, once, in the root of the checkout the device tool sends:
#
#   python3 -m pip install --no-compile --target .gpu-site num2words babel docopt
#   # nanoGPT, outside the project's history: the `fetch` tool's `github:karpathy/nanoGPT`
#   # gives /work/.mirror/karpathy+nanoGPT/repo, a git directory without a work tree
#   mkdir -p .nanogpt
#   git --git-dir=/work/.mirror/karpathy+nanoGPT/repo archive HEAD | tar -x -C .nanogpt
#   printf '.gpu-site/\n.nanogpt/\n' >> .git/info/exclude      # never committed
#
# (.gpu-site is ~36 MB and .nanogpt 0.6 MB; with the ~9.5 MB tree that is under the 64 MiB a
# call carries. The GPU machine's image already has torch, lightning, transformers, peft,
# pytest, hypothesis, requests (nanoGPT's prepare.py) and the rest: do not put those in
# .gpu-site, which comes first on the path and would shadow the machine's own, its pytest
# plugins included; the first lines of the log say what is missing.) Then:
#
#   status()      # budget_left_s: the device time this session has left
#   run(command="BUDGET=<min(570, budget_left_s - 60)> bash benchmarks/gpu_check.sh",
#       carry=[".gpu-site", ".nanogpt"], timeout_s=600)
#
# (BUDGET from what is left, not the default: the call ends at the lease's end whatever
# timeout_s says, and the 60 s cover the machine's start and the files coming back; the parts
# themselves stop at BUDGET, so what they wrote comes back.)
#
# What comes back under $OUT (default /tmp/gpu-check; the tool returns at most 8 files):
#   gpu_check.log          everything printed: the device, each part's output, its exit line
#   gpu_lm_gpt2.json       part 2's numbers         gpu_lm.json     ONLY=lm's (after each run)
#   time_to_loss_gpu.png   part 3's loss against training seconds, and its .csv
#
# Knobs (environment): BUDGET (570 s: the whole call; each part gets at most what is left),
# ONLY (a space-separated subset of: tests gpt2 ttl lm llama), GPT2_BATCH (8), TTL_STEPS
# (1500), TTL_EVERY (nanoGPT's iterations between evaluations, 500), SKIP_TESTS (leave out
# part 1); for lm: ITERS (1000), RUNS ("compiled"; "eager compiled" for both), STEP (1: the
# step at width 384 too). Knobs of earlier versions are refused (exit 2), with the one to
# use instead.
set -u
# knobs of earlier versions (benchmarks/RESULTS.md's older commands): refused, not ignored, so a
# call does not run something other than what its caller asked for
for retired in \
        "SKIP_STEP=ONLY=lm ITERS=5000 (nanoGPT's runs alone; its step only with STEP=1)" \
        "LLAMA_REAL=ONLY=llama" "SKIP_GPU_LM=ONLY (the lm runs come only when ONLY names lm)" \
        "TTL=ONLY=ttl (or nothing: the default call runs it)" \
        "GPT2_STEP=ONLY=gpt2 (or nothing: the default call runs it)" \
        "TEST_TIMEOUT=BUDGET (the whole call's seconds)" \
        "BENCH_TIMEOUT=BUDGET (the whole call's seconds)"; do
    name=${retired%%=*}
    if [ -n "${!name+set}" ]; then
        echo "gpu_check.sh: $name is no longer read: use ${retired#*=}" >&2
        exit 2
    fi
done
cd "$(dirname "$0")/.."
OUT=${OUT:-/tmp/gpu-check}
mkdir -p "$OUT"
LOG="$OUT/gpu_check.log"
: > "$LOG"
export PYTHONPATH="$PWD:$PWD/.gpu-site${PYTHONPATH:+:$PYTHONPATH}"
export PYTHONUTF8=1 PYTHONUNBUFFERED=1  # output reaches the log as it is printed
BUDGET=${BUDGET:-570}
START=$SECONDS
status=0

say() { echo "$@" | tee -a "$LOG"; }

wanted() {  # wanted NAME: whether the part runs in this call
    if [ -n "${ONLY:-}" ]; then
        case " $ONLY " in *" $1 "*) return 0 ;; *) return 1 ;; esac
    fi
    case $1 in
        tests) [ -z "${SKIP_TESTS:-}" ] ;;
        lm) false ;;
        llama) false ;;
        *) true ;;
    esac
}

part() {  # part NAME MOST_S LEAST_S COMMAND...: run COMMAND for at most MOST_S seconds, or
    # what is left of BUDGET if less; skip it if less than LEAST_S is left
    local name=$1 most=$2 least=$3 left limit code
    shift 3
    left=$((BUDGET - (SECONDS - START)))
    if [ "$left" -lt "$least" ]; then
        say "== $name: skipped: $left s of the $BUDGET s budget left, it needs about $least s"
        status=1
        return
    fi
    limit=$((most < left ? most : left))
    say "== $name: at most $limit s ($(date -u +%H:%M:%S) UTC, $((SECONDS - START)) s in)"
    timeout -k 10 "$limit" "$@" 2>&1 | tee -a "$LOG"
    code=${PIPESTATUS[0]}
    say "== $name: exit $code$([ "$code" = 124 ] && echo " (timed out after $limit s)")"
    [ "$code" = 0 ] || status=1
}

{
    date -u
    nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader
    python3 -c 'import sys, torch; print(sys.version.split()[0], "torch", torch.__version__,
"cuda", torch.version.cuda, torch.cuda.get_device_name() if torch.cuda.is_available() else "NO CUDA")'
    uptime
    # what attnlab, the tests and nanoGPT import, and where each comes from
    python3 - <<'EOF'
import importlib.util
for name in ("num2words", "babel", "lightning", "transformers", "peft", "pytest", "hypothesis",
             "requests"):
    spec = importlib.util.find_spec(name)
    print(f"{name}: {spec.origin if spec else 'MISSING'}")
EOF
} 2>&1 | tee -a "$LOG"
for need in .gpu-site/num2words .nanogpt/train.py; do
    [ -e "$need" ] || { say "missing $need: carry it (see the top of $0)"; status=1; }
done

if wanted tests; then
    # Only the files that mark tests `cuda`: collecting all of tests/ would import what the GPU
    # machine lacks (selenium, the jets extra) and take minutes.
    files=$(grep -rl "mark\.cuda" tests --include="*.py" || true)
    if [ -z "$files" ]; then
        say "pytest -m cuda: no test file marks tests cuda yet"
    else
        # -v: each test's result as it ends, so a part cut short still names what passed
        # shellcheck disable=SC2086  # one word per file
        part "pytest -m cuda" 100 30 python3 -m pytest -m cuda -v --tb=short -p no:cacheprovider \
            --continue-on-collection-errors $files
    fi
fi

if wanted gpt2; then
    part "GPT-2 small's step" 200 90 python3 -m benchmarks.gpu_lm --nanogpt .nanogpt \
        --layers 12 --heads 12 --width 768 --block 1024 --vocab 50304 \
        --batch "${GPT2_BATCH:-8}" --dropout 0 --skip-runs --skip-recompiles \
        --json "$OUT/gpu_lm_gpt2.json"
fi

if wanted ttl; then
    part "time to loss" 380 150 python3 -m benchmarks.time_to_loss --nanogpt .nanogpt \
        --shape gpu --corpus stdlib --threads "$(nproc)" --attnlab-steps "${TTL_STEPS:-1500}" \
        --every 100 --nanogpt-every "${TTL_EVERY:-500}" --same-flags \
        --plot "$OUT/time_to_loss_gpu.png"
fi

if wanted lm; then
    # shellcheck disable=SC2086  # RUNS is a list of words
    part "shakespeare-char whole runs" 300 150 python3 -m benchmarks.gpu_lm \
        --nanogpt .nanogpt --iters "${ITERS:-1000}" --runs ${RUNS:-compiled} \
        $([ -n "${STEP:-}" ] || echo --skip-step) --json "$OUT/gpu_lm.json"
fi

if wanted llama; then
    if python3 -c "import transformers" 2>/dev/null; then
        part "llama_real --parts gpu" 500 120 \
            env ATTNLAB_BENCH_CACHE="${ATTNLAB_BENCH_CACHE:-/tmp/attnlab-bench}" \
            python3 -m benchmarks.llama_real --parts gpu --device cuda
    else
        say "benchmarks.llama_real: not measured: transformers is not importable on this" \
            "machine (carry it in .gpu-site)"
    fi
fi
say "== done in $((SECONDS - START)) s, exit $status"
exit $status
