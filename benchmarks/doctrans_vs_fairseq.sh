#!/usr/bin/env bash
# doctrans vs fairseq 0.12 on the same BPE'd TVsub slice, same model and optimisation settings,
# same wall-clock budget, run one after the other in one sitting on this machine.
#
# Usage: [BUDGET=45] [DATA=../shared/corpora/tvsub] benchmarks/doctrans_vs_fairseq.sh
# Run it from a checkout nobody edits meanwhile (e.g. `git worktree add`): a long run that
# imports edited sources halfway through is not a measurement of anything.
# Needs fairseq in its own venv (benchmarks/fairseq_README.md); writes runs/quickstart (doctrans)
# and $WORK (fairseq, default runs/fairseq), then prints both results. FAIRSEQ_VENV: see
# benchmarks/fairseq_compare.sh.
set -euo pipefail
cd "$(dirname "$0")/.."
BUDGET=${BUDGET:-45}
DATA=${DATA:-../shared/corpora/tvsub}
PREP=${PREP:-data/quickstart}
RUN=${RUN:-runs/quickstart}
CFG=pipelines/quickstart.yaml
WORK=${WORK:-runs/fairseq}

mkdir -p "$(dirname "$RUN")"
start=$(date +%s)
make quickstart BUDGET="$BUDGET" DATA="$DATA" PREP="$PREP" RUN="$RUN" 2>&1 | tee "$RUN.make.log"
echo "doctrans quickstart wall: $(( $(date +%s) - start )) s"

# Same optimisation settings as the doctrans config (read from the resolved config).
eval "$(.venv/bin/python - "$RUN/config.yaml" <<'PY'
import sys, yaml
c = yaml.safe_load(open(sys.argv[1]))
t, m = c["train"], c["model"]
print(f"LR={t['lr']} WARMUP={t['warmup']} MAX_TOKENS={t['max_tokens']} CLIP={t['clip_norm']}")
print(f"DROPOUT={m['dropout']} LABEL_SMOOTHING={t['label_smoothing']} ADAM_EPS={t['adam_eps']}")
d = c["decode"]
print(f"GEN_EXTRA='--max-len-a {d['max_len_ratio']} --max-len-b {d['max_len_extra']} --lenpen {d['lenpen']}'")
PY
)"
export LR WARMUP MAX_TOKENS CLIP DROPOUT LABEL_SMOOTHING ADAM_EPS GEN_EXTRA
PREP="$(realpath "$PREP")" WORK="$(realpath -m "$WORK")" TVSUB="$(realpath "$DATA")" BUDGET_MIN="$BUDGET" \
  bash benchmarks/fairseq_compare.sh

.venv/bin/python - "$RUN" "$WORK/summary.json" <<'PY'
import json, sys
run, fsq = sys.argv[1], json.load(open(sys.argv[2]))
recs = [json.loads(l) for l in open(f"{run}/metrics.jsonl")]
train = [r for r in recs if r["kind"] == "train"]
scores = json.load(open(f"{run}/scores.json"))
tok = sum(r["tok_per_s"] for r in train[len(train) // 2:]) / max(len(train[len(train) // 2:]), 1)
print("\n| toolkit | updates | train tgt tok/s (2nd half mean) | test BLEU (3 refs, tok, lc) |")
print("| --- | --- | --- | --- |")
print(f"| doctrans | {train[-1]['step']} | {tok:.0f} | {scores['bleu_tok_lc']['score']:.2f} |")
print(f"| fairseq | {fsq['num_updates']} | {fsq['train_tgt_tok_per_s_mean_last_half']} | {fsq['bleu']} |")
print(f"fairseq decode: {fsq['decode_wall_s']:.1f} s wall, {fsq['decode_sent_per_s_wall']} sent/s (incl. load)")
PY
