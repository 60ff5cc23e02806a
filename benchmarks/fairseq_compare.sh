#!/usr/bin/env bash
# fairseq_compare.sh: train and decode fairseq on a doctrans-prepared dataset, as a REFERENCE
# point for doctrans' speed and quality. fairseq is never a dependency of doctrans: it lives in
# its own venv outside the repository (see benchmarks/fairseq_README.md for how to install it).
# Defaults are paths inside or beside the repository (REPO = this script's ../), whatever the
# current directory.
#
# Usage:
#   [PREP=dir] [BUDGET_MIN=45] [WORK=dir] [LR=1e-3] [WARMUP=300] [MAX_TOKENS=4096] [CLIP=1.0] \
#     benchmarks/fairseq_compare.sh
#
# Environment (defaults in brackets):
#   PREP           doctrans prepared dataset: {train,dev,test}.bpe.{zh,en} (+ vocab.{zh,en}.txt)
#                  [$REPO/data/quickstart]
#   FAIRSEQ_VENV   venv holding fairseq-fixed 0.12.3.1          [$REPO/../venvs/fairseq]
#   WORK           output dir (data-bin/, checkpoints/ are wiped at start) [$REPO/runs/fairseq]
#   BUDGET_MIN     wall-clock training budget, minutes (--stop-time-hours)  [45]
#   LR WARMUP MAX_TOKENS CLIP   lr, inverse_sqrt warm-up updates, tokens per batch, clip-norm
#                  [1e-3 300 4096 1.0]  -- set these to doctrans' values for a fair comparison
#   ADAM_EPS WEIGHT_DECAY DROPOUT LABEL_SMOOTHING  [1e-8 0.0 0.1 0.1]
#   MAX_UPDATE     stop after this many updates as well (0 = budget only)   [0]
#   SEED           fairseq's --seed (run-to-run noise: compare two seeds)    [1]
#   VALID_INTERVAL_UPDATES  extra validation every N updates (also each epoch end) [500]
#   LOG_INTERVAL   updates per train log line (speed is averaged from these)  [20]
#   DICT_FROM      vocab: fairseq dicts from PREP/vocab.{zh,en}.txt (same vocabulary as doctrans);
#                  train: fairseq builds them from the train data.  [vocab if the files exist]
#   CHECKPOINT     checkpoint to decode (checkpoint_best.pt | checkpoint_last.pt) [checkpoint_best.pt]
#   BEAM GEN_BATCH beam size, sentences per decoding batch            [5 64]
#   GEN_EXTRA      extra fairseq-generate options (e.g. "--max-len-a 1.5 --max-len-b 10") []
#   DOCTRANS       doctrans executable used for scoring        [$REPO/.venv/bin/doctrans]
#   TVSUB          TVsub corpus root                           [$REPO/../shared/corpora/tvsub]
#   REF_SGM        test references (SGML)   [$TVSUB/test/test.ref.sgm]
#
# Outputs in $WORK: preprocess.log, train.log, generate.out, test.hyp.tok (tokenized, BPE removed,
# one line per test.bpe.zh line, original order), score.out, summary.json.
set -euo pipefail

REPO=$(cd "$(dirname "$0")/.." && pwd)
PREP=${PREP:-$REPO/data/quickstart}
FAIRSEQ_VENV=${FAIRSEQ_VENV:-$REPO/../venvs/fairseq}
WORK=${WORK:-$REPO/runs/fairseq}
BUDGET_MIN=${BUDGET_MIN:-45}
LR=${LR:-1e-3}
WARMUP=${WARMUP:-300}
MAX_TOKENS=${MAX_TOKENS:-4096}
CLIP=${CLIP:-1.0}
ADAM_EPS=${ADAM_EPS:-1e-8}
WEIGHT_DECAY=${WEIGHT_DECAY:-0.0}
DROPOUT=${DROPOUT:-0.1}
LABEL_SMOOTHING=${LABEL_SMOOTHING:-0.1}
MAX_UPDATE=${MAX_UPDATE:-0}
SEED=${SEED:-1}
VALID_INTERVAL_UPDATES=${VALID_INTERVAL_UPDATES:-500}
LOG_INTERVAL=${LOG_INTERVAL:-20}
CHECKPOINT=${CHECKPOINT:-checkpoint_best.pt}
BEAM=${BEAM:-5}
GEN_BATCH=${GEN_BATCH:-64}
GEN_EXTRA=${GEN_EXTRA:-}
DOCTRANS=${DOCTRANS:-$REPO/.venv/bin/doctrans}
TVSUB=${TVSUB:-$REPO/../shared/corpora/tvsub}
REF_SGM=${REF_SGM:-$TVSUB/test/test.ref.sgm}
if [[ -z ${DICT_FROM:-} ]]; then
    if [[ -f $PREP/vocab.zh.txt && -f $PREP/vocab.en.txt ]]; then DICT_FROM=vocab; else DICT_FROM=train; fi
fi

die() { echo "fairseq_compare: error: $*" >&2; exit 1; }
now() { date +%s.%N; }
elapsed() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.1f", b - a }'; }

# --- checks -------------------------------------------------------------------------------------
FS_BIN=$FAIRSEQ_VENV/bin
PY=$FS_BIN/python
for exe in python fairseq-preprocess fairseq-train fairseq-generate; do
    [[ -x $FS_BIN/$exe ]] || die "$FS_BIN/$exe not found: install fairseq in FAIRSEQ_VENV (benchmarks/fairseq_README.md)"
done
for f in train dev test; do
    for l in zh en; do [[ -s $PREP/$f.bpe.$l ]] || die "missing $PREP/$f.bpe.$l"; done
done
N_TEST=$(wc -l < "$PREP/test.bpe.zh")
[[ $N_TEST -eq $(wc -l < "$PREP/test.bpe.en") ]] || die "test.bpe.zh and test.bpe.en differ in length"
case $DICT_FROM in vocab|train) ;; *) die "DICT_FROM must be vocab or train" ;; esac
STOP_HOURS=$(awk -v m="$BUDGET_MIN" 'BEGIN { printf "%.6f", m / 60 }')

mkdir -p "$WORK"
rm -rf "$WORK/data-bin" "$WORK/checkpoints"   # never resume a previous run by accident
FS_VERSION=$("$PY" -c 'import fairseq; print(fairseq.__version__)' 2>/dev/null)
TORCH_INFO=$("$PY" -c 'import torch; print(torch.__version__, torch.get_num_threads())')
echo "== fairseq $FS_VERSION, torch ${TORCH_INFO% *} (${TORCH_INFO#* } threads), PREP=$PREP, WORK=$WORK"
echo "== budget ${BUDGET_MIN} min, lr $LR, warmup $WARMUP, max-tokens $MAX_TOKENS, clip $CLIP, dicts from $DICT_FROM"

# --- 1. preprocess ------------------------------------------------------------------------------
DICT_ARGS=()
if [[ $DICT_FROM == vocab ]]; then
    # doctrans "token<TAB>count" -> fairseq "token count"; drop the specials fairseq adds itself.
    for l in zh en; do
        awk -F'\t' 'NF >= 2 && $1 !~ /^(<pad>|<s>|<\/s>|<unk>|<bos>|<eos>)$/ && $1 !~ / / { print $1 " " $2 }' \
            "$PREP/vocab.$l.txt" > "$WORK/dict.$l.in"
        [[ -s $WORK/dict.$l.in ]] || die "could not convert $PREP/vocab.$l.txt"
    done
    DICT_ARGS=(--srcdict "$WORK/dict.zh.in" --tgtdict "$WORK/dict.en.in")
fi
TRAINPREF="$PREP/train.bpe"
if [[ -f $PREP/train.target ]]; then    # lines marked 0 are context only, not training pairs
    for l in zh en; do
        awk 'NR == FNR { keep[FNR] = ($0 == "1"); next } keep[FNR]' "$PREP/train.target" "$PREP/train.bpe.$l" \
            > "$WORK/train.bpe.$l"
    done
    TRAINPREF="$WORK/train.bpe"
fi
t0=$(now)
"$FS_BIN/fairseq-preprocess" --source-lang zh --target-lang en \
    --trainpref "$TRAINPREF" --validpref "$PREP/dev.bpe" --testpref "$PREP/test.bpe" \
    --destdir "$WORK/data-bin" --workers 2 "${DICT_ARGS[@]}" > "$WORK/preprocess.log" 2>&1 \
    || { tail -20 "$WORK/preprocess.log" >&2; die "fairseq-preprocess failed (see $WORK/preprocess.log)"; }
t1=$(now)
PREP_WALL=$(elapsed "$t0" "$t1")
grep -E '\[(zh|en)\] .*(Dictionary|sents)' "$WORK/preprocess.log" | sed -E 's/^.*preprocess[:|] *//; s/^/   /' | uniq || true

# --- 2. train -----------------------------------------------------------------------------------
TRAIN_ARGS=(
    "$WORK/data-bin" --source-lang zh --target-lang en --task translation
    --arch transformer --encoder-layers 3 --decoder-layers 3
    --encoder-embed-dim 256 --decoder-embed-dim 256
    --encoder-ffn-embed-dim 1024 --decoder-ffn-embed-dim 1024
    --encoder-attention-heads 4 --decoder-attention-heads 4
    --share-decoder-input-output-embed --encoder-normalize-before --decoder-normalize-before
    --dropout "$DROPOUT"
    --criterion label_smoothed_cross_entropy --label-smoothing "$LABEL_SMOOTHING"
    --optimizer adam --adam-betas '(0.9, 0.98)' --adam-eps "$ADAM_EPS" --weight-decay "$WEIGHT_DECAY"
    --lr "$LR" --lr-scheduler inverse_sqrt --warmup-updates "$WARMUP" --clip-norm "$CLIP"
    --max-tokens "$MAX_TOKENS" --stop-time-hours "$STOP_HOURS"
    --validate-interval-updates "$VALID_INTERVAL_UPDATES" --skip-invalid-size-inputs-valid-test
    --save-dir "$WORK/checkpoints" --no-epoch-checkpoints
    --log-format simple --log-interval "$LOG_INTERVAL" --num-workers 0 --cpu --seed "$SEED"
)
[[ $MAX_UPDATE -gt 0 ]] && TRAIN_ARGS+=(--max-update "$MAX_UPDATE")
echo "== training (stop-time-hours $STOP_HOURS) ..."
t0=$(now)
"$FS_BIN/fairseq-train" "${TRAIN_ARGS[@]}" > "$WORK/train.log" 2>&1 \
    || { tail -20 "$WORK/train.log" >&2; die "fairseq-train failed (see $WORK/train.log)"; }
t1=$(now)
TRAIN_WALL=$(elapsed "$t0" "$t1")
[[ -f $WORK/checkpoints/$CHECKPOINT ]] || die "no $WORK/checkpoints/$CHECKPOINT after training"

# --- 3. decode the test split -------------------------------------------------------------------
echo "== decoding test ($N_TEST lines, beam $BEAM, $CHECKPOINT) ..."
t0=$(now)
# shellcheck disable=SC2086  # GEN_EXTRA is a list of options
TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD=1 "$FS_BIN/fairseq-generate" "$WORK/data-bin" \
    --source-lang zh --target-lang en --gen-subset test \
    --path "$WORK/checkpoints/$CHECKPOINT" --beam "$BEAM" --remove-bpe \
    --batch-size "$GEN_BATCH" --required-batch-size-multiple 1 --num-workers 0 --cpu $GEN_EXTRA \
    > "$WORK/generate.out" 2> "$WORK/generate.log" \
    || { tail -20 "$WORK/generate.log" >&2; die "fairseq-generate failed (see $WORK/generate.log)"; }
t1=$(now)
GEN_WALL=$(elapsed "$t0" "$t1")

# Hypotheses in original order (H-<id> lines, ids 0..N-1); fail loudly on any lost line.
"$PY" - "$WORK/generate.out" "$WORK/test.hyp.tok" "$N_TEST" <<'EOF'
import sys
gen, out, n = sys.argv[1], sys.argv[2], int(sys.argv[3])
hyps = {}
with open(gen, encoding="utf-8") as f:
    for line in f:
        if line.startswith("H-"):
            parts = line.rstrip("\n").split("\t")
            idx = int(parts[0][2:])
            if idx in hyps:
                sys.exit(f"duplicate hypothesis id {idx}")
            hyps[idx] = parts[2] if len(parts) > 2 else ""
missing = [i for i in range(n) if i not in hyps]
extra = [i for i in hyps if not 0 <= i < n]
if missing or extra or len(hyps) != n:
    sys.exit(f"fairseq-generate returned {len(hyps)} hypotheses for {n} test lines "
             f"(missing ids: {missing[:10]}{'...' if len(missing) > 10 else ''}, extra: {extra[:10]})")
with open(out, "w", encoding="utf-8") as f:
    for i in range(n):
        f.write(hyps[i] + "\n")
EOF
N_HYP=$(wc -l < "$WORK/test.hyp.tok")
[[ $N_HYP -eq $N_TEST ]] || die "test.hyp.tok has $N_HYP lines, test.bpe.zh has $N_TEST"

# --- 4. score -----------------------------------------------------------------------------------
SCORER=none
: > "$WORK/score.out"
if [[ -x $DOCTRANS ]] && "$DOCTRANS" score --help > /dev/null 2>&1; then
    SCORER="doctrans score"
    "$DOCTRANS" score "$WORK/test.hyp.tok" -r "$REF_SGM" --hyp-tokenized --json > "$WORK/score.out" \
        || die "doctrans score failed"
elif [[ -f $REF_SGM ]]; then
    SCORER="sacrebleu -tok none -lc (fallback: doctrans score not available)"
    mapfile -t REFS < <("$PY" - "$REF_SGM" "$WORK" "$N_TEST" <<'EOF'
import re, sys
from collections import OrderedDict
sgm, work, n = sys.argv[1], sys.argv[2], int(sys.argv[3])
refs = OrderedDict()  # sysid -> segments, documents in file order
sysid = None
seg_re = re.compile(r"<seg[^>]*>(.*?)</seg>", re.I)
with open(sgm, encoding="utf-8") as f:
    for line in f:
        m = re.search(r'<doc[^>]*sysid="([^"]+)"', line, re.I)
        if m:
            sysid = m.group(1)
            refs.setdefault(sysid, [])
        for m in seg_re.finditer(line):
            refs[sysid].append(m.group(1).strip())
for k, (sid, segs) in enumerate(refs.items()):
    if len(segs) != n:
        sys.exit(f"reference {sid} has {len(segs)} segments, expected {n}")
    path = f"{work}/test.ref{k}"
    open(path, "w", encoding="utf-8").write("\n".join(segs) + "\n")
    print(path)
EOF
)
    [[ ${#REFS[@]} -ge 1 ]] || die "no references extracted from $REF_SGM"
    "$FS_BIN/sacrebleu" "${REFS[@]}" -i "$WORK/test.hyp.tok" -tok none -lc -b -w 2 -q > "$WORK/score.out" \
        || die "sacrebleu failed"
    echo "   (${#REFS[@]} references)" >&2
fi
echo "== scorer: $SCORER"
cat "$WORK/score.out"

# --- 5. summary ---------------------------------------------------------------------------------
"$PY" - <<EOF
import json, re, statistics
work = "$WORK"
inner, epochs, valids = [], [], []
kv = re.compile(r"(\w+)=([-+0-9.eE]+|inf|nan)")
with open(f"{work}/train.log", encoding="utf-8") as f:
    for line in f:
        if "| train_inner |" in line:
            inner.append({k: float(v) for k, v in kv.findall(line)})
        elif "| train |" in line:
            epochs.append({k: float(v) for k, v in re.findall(r"\| (\w+) ([-+0-9.eE]+)", line)})
        elif "| valid |" in line:
            valids.append({k: float(v) for k, v in re.findall(r"\| (\w+) ([-+0-9.eE]+)", line)})
num_updates = int(epochs[-1]["num_updates"]) if epochs else (int(inner[-1]["num_updates"]) if inner else 0)
tail = inner[len(inner) // 2:] if inner else []
wps_tail = statistics.mean(r["wps"] for r in tail) if tail else None
wps_source = f"mean of the last {len(tail)} of {len(inner)} train_inner intervals"
if wps_tail is None and epochs:  # fewer updates than one log interval: epoch average
    wps_tail, wps_source = epochs[-1].get("wps"), "epoch average (no train_inner interval logged)"
# Tokens-weighted rate over all logged intervals: sum of target tokens / sum of interval times
# (interval time = its tokens / its wps; train_wall in train_inner lines is per interval).
tokens, secs, prev_upd = 0.0, 0.0, 0
for r in inner:
    t = r["wpb"] * (r["num_updates"] - prev_upd)
    tokens += t
    secs += t / r["wps"] if r.get("wps") else 0.0
    prev_upd = r["num_updates"]
train_wall_fs = sum(e.get("train_wall", 0.0) for e in epochs) if epochs else None
gen_line = ""
with open(f"{work}/generate.log", encoding="utf-8") as f:
    for line in f:
        if "Translated" in line:
            gen_line = line
m = re.search(r"in ([0-9.]+)s \(([0-9.]+) sentences/s, ([0-9.]+) tokens/s\)", gen_line)
score_text = open(f"{work}/score.out").read()
try:  # doctrans score --json: {"bleu_tok_lc": {"score": ...}, "sacrebleu": ..., "chrf": ...}
    score_out = json.loads(score_text)
    bleu = score_out["bleu_tok_lc"]["score"]
except (ValueError, KeyError, TypeError):  # sacrebleu -b: a bare number
    score_out = score_text.strip()
    m_b = re.search(r"^\s*([0-9.]+)\s*$", score_text, re.M)
    bleu = float(m_b.group(1)) if m_b else None
s = {
    "toolkit": "fairseq-fixed $FS_VERSION", "torch": "${TORCH_INFO% *}", "torch_threads": int("${TORCH_INFO#* }"),
    "prep": "$PREP", "dict_from": "$DICT_FROM",
    "settings": {"budget_min": float("$BUDGET_MIN"), "lr": float("$LR"), "warmup": int("$WARMUP"),
                 "max_tokens": int("$MAX_TOKENS"), "clip": float("$CLIP"), "dropout": float("$DROPOUT"),
                 "label_smoothing": float("$LABEL_SMOOTHING"), "max_update": int("$MAX_UPDATE"), "seed": int("$SEED"),
                 "log_interval": int("$LOG_INTERVAL"), "beam": int("$BEAM"), "gen_batch": int("$GEN_BATCH"), "checkpoint": "$CHECKPOINT",
                 "gen_extra": "$GEN_EXTRA"},
    "preprocess_wall_s": float("$PREP_WALL"),
    "train_wall_s": float("$TRAIN_WALL"),
    "train_wall_fairseq_s": train_wall_fs,
    "num_updates": num_updates,
    "epochs_completed_or_stopped": len(epochs),
    "train_tgt_tok_per_s_mean_last_half": round(wps_tail, 1) if wps_tail else None,
    "train_tgt_tok_per_s_source": wps_source,
    "train_tgt_tok_per_s_logged_total": round(tokens / secs, 1) if secs else None,
    "train_tgt_tokens_logged": int(tokens),
    "train_log_intervals": len(inner),
    "last_train_loss": inner[-1].get("loss") if inner else None,
    "valid": [{"num_updates": v.get("num_updates"), "loss": v.get("loss"), "ppl": v.get("ppl")} for v in valids],
    "test_lines": int("$N_TEST"), "hyp_lines": int("$N_HYP"),
    "decode_wall_s": float("$GEN_WALL"),
    "decode_sent_per_s_wall": round(int("$N_TEST") / float("$GEN_WALL"), 2),
    "decode_sent_per_s_fairseq": float(m.group(2)) if m else None,
    "decode_tok_per_s_fairseq": float(m.group(3)) if m else None,
    "decode_s_fairseq": float(m.group(1)) if m else None,
    "scorer": "$SCORER",
    "bleu": round(bleu, 2) if bleu is not None else None,  # 3 refs, lowercased, tokenized
    "score_output": score_out,
    "hyp": f"{work}/test.hyp.tok",
}
json.dump(s, open(f"{work}/summary.json", "w"), indent=2)
print("== summary ($WORK/summary.json)")
print(f"   updates {s['num_updates']}, train wall {s['train_wall_s']:.0f}s (fairseq train_wall {train_wall_fs})")
print(f"   train target tok/s (fairseq wps): {s['train_tgt_tok_per_s_mean_last_half']} ({wps_source}); "
      f"all logged intervals {s['train_tgt_tok_per_s_logged_total']}")
if valids:
    print(f"   last valid: loss {valids[-1].get('loss')}, ppl {valids[-1].get('ppl')}")
print(f"   decode: {s['test_lines']} lines -> {s['hyp_lines']} hyps, {s['decode_wall_s']:.1f}s wall "
      f"({s['decode_sent_per_s_wall']} sent/s incl. model load; fairseq: {s['decode_sent_per_s_fairseq']} sent/s)")
print(f"   BLEU {s['bleu']} ({s['scorer']})")
EOF
