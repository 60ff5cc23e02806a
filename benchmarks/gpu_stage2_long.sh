#!/usr/bin/env bash
# Issue 48, the third GPU call (2026-11-28 evening): the shipped models trained on, from ONE start.
# CARRY/start.pt is a tgt_concat checkpoint (the shipped tvsub-tgt-concat-3x3: the sentence model
# starts from the same weights without the "backbone." prefix) or a sentence model (e.g. the shipped
# tvsub-transformer-3x3: both start from it, tgt_concat through train.init_from as in stage 2). Side by side on the one GPU for MIN
# minutes, the same settings (lr LR, warm-up WARMUP, inverse sqrt, 32,768-token batches, bf16 autocast),
# checkpoints kept every KEEP updates: the sentence model (pipelines/quickstart.yaml) reaches about
# five times the updates of tgt_concat (each target row also carries the previous line on both sides).
#   bash benchmarks/gpu_stage2_long.sh CARRY OUT [MIN] [TOTAL_S]
# Back (at most two models fit the device's 64 MiB): the sentence model at its LAST update (the
# candidate to ship) and tgt_concat at M, the last update both reached (equal updates from the same
# start); the sentence model at M is translated on the GPU (its test hypotheses come back in runs3.tgz,
# the equal-update control), as are the two models that come back. TOTAL_S (default 540): the weights
# are written first, the translations are cut short before the deadline.
# CARRY: prep.tar.xz, whl/ (sacremoses, opencc-python-reimplemented), site/ (subword_nmt),
# tvsub/test/test.ref.sgm, start.pt (benchmarks/gpu_full_carry.sh builds all but start.pt).
# EXTRA: more key=value overrides (a CPU smoke test).
# DENSE=SHARE (issue 52 item 2 on the whole corpus): a third run side by side, tgt_concat with
# train.context_dense={share: SHARE, max_distance: 1} (needs dp/train.dplabel in prep.tar.xz:
# `DENSE_DP=1 JIEBA=0 bash benchmarks/gpu_full_carry.sh PREP_FULL CARRY`, then CARRY/start.pt: 65.2 MB with
# the repository less its two shipped .pt files, under the device's 64 MiB; the tokenized text it reads is the BPE text with the
# "@@ " joins undone, byte-identical to preprocess' train.tok.*). M is then the last update all three
# reached; what comes back is the two document models at M (document.*, dense.*), the sentence model's
# test hypotheses at M and at its last update (its weights do not fit beside them).
# DENSE_RULES="agreement, agreement_en" (default: all rules): train.context_dense.rules of that run.
# ATTN=W (with DENSE): that run also supervises one decoder head's attention toward the deciding
# pronoun, train.context_attention_supervision=W (the shipped document model's recipe: DENSE=0.1
# ATTN=1.0, all rules; docs/journal/2026-11-29-lone-sentence-and-soups.md).
# CTX_OFFSET=K: both tgt_concat runs with context.context_position_offset=K (the current sentence at
# the sentence model's positions, the context at K…: for a start from a sentence model; no CTranslate2
# export; docs/journal/2026-11-29-context-position-offset.md).
# AVG=K (default 1): each model brought back or translated is the average of its checkpoints at the
# update named and the K−1 kept before it (KEEP apart; `doctrans average`), the same for every run.
# OUT: sentence.fp16.pt.part-*, document.fp16.pt.part-* (`cat` them back), runs3.tgz (metrics.jsonl,
# config.yaml, train.log of both runs, the test hypotheses and their scores, M).
set -uo pipefail
C=$(realpath "${1:?CARRY}"); OUTD=$(realpath "${2:?OUT}"); MIN=${3:-7.0}; TOTAL=${4:-540}
T0=$(date +%s)
DENSE=${DENSE:-}; DENSE_RULES=${DENSE_RULES:-}; AVG=${AVG:-1}; ATTN=${ATTN:-}
LR=${LR:-1.5e-3}; WARMUP=${WARMUP:-200}; KEEP=${KEEP:-100}; EVAL=${EVAL:-500}
ROOT=$(cd "$(dirname "$0")/.." && pwd)
GPU_IMPORTS="sacremoses click yaml sacrebleu opencc subword_nmt"
. "$ROOT/benchmarks/gpu_lib.sh"   # PY, DT, PYTHONPATH; gpu_unpack, gpu_banner, fp16_back, equal_update_point, collect_into
W=${WORK:-/tmp/g3}; rm -rf "$W"; gpu_unpack "$W/prep" "$W/test"
left() { echo $(( TOTAL - ($(date +%s) - T0) )); }
stamp() { echo "== $(( $(date +%s) - T0 )) s: $*"; }
gpu_banner
if [ -n "$DENSE" ]; then
  [ -f "$W/prep/dp/train.dplabel" ] || { echo "DENSE needs dp/train.dplabel in $C/prep.tar.xz (DENSE_DP=1 gpu_full_carry.sh)"; exit 1; }
  for l in zh en; do sed -r 's/(@@ )|(@@ ?$)//g' "$W/prep/train.bpe.$l" > "$W/prep/train.tok.$l"; done
fi
$PY - "$C/start.pt" "$W/start_sent.pt" <<'PYEOF'
import sys, torch
from doctrans.runtime.checkpoint_digest import with_digest   # an edited checkpoint gets a new digest
ck = torch.load(sys.argv[1], map_location="cpu", weights_only=False)
ck["model"] = {k.removeprefix("backbone."): v for k, v in ck["model"].items()}   # a sentence model: unchanged
ck["config"]["context"] = None
torch.save(with_digest(ck), sys.argv[2])
PYEOF
A="data.prepared=$W/prep train.device=auto train.max_tokens=32768 train.tensorboard=false train.threads=4 train.eval_bleu=false
 train.metric=xent_nats train.metric_mode=min train.plot=false train.max_steps=10000000 train.max_time_min=$MIN
 train.lr=$LR train.warmup=$WARMUP train.eval_every=$EVAL train.save_every=$KEEP train.keep_every=$KEEP train.keep_last=0 ${EXTRA:-}"
stamp "training side by side, $MIN min each"
TO=$(python3 -c "print(int($MIN * 60 + 120))")
(cd "$ROOT" && timeout -s TERM "$TO" $DT train pipelines/quickstart.yaml $A train.init_from="$W/start_sent.pt" \
   run_dir="$W/transformer") > "$W/transformer.log" 2>&1 &
OFF=${CTX_OFFSET:+context.context_position_offset=$CTX_OFFSET}
(cd "$ROOT" && timeout -s TERM "$TO" $DT train pipelines/context/tgt_concat.yaml $A train.init_from="$C/start.pt" $OFF \
   run_dir="$W/tgt_concat") > "$W/tgt_concat.log" 2>&1 &
RUNS="$W/transformer $W/tgt_concat"
if [ -n "$DENSE" ]; then
  (cd "$ROOT" && timeout -s TERM "$TO" $DT train pipelines/context/tgt_concat.yaml $A train.init_from="$C/start.pt" $OFF \
     "train.context_dense={share: $DENSE, max_distance: 1, rules: [$DENSE_RULES]}" \
     ${ATTN:+train.context_attention_supervision=$ATTN} run_dir="$W/tgt_concat_dense") > "$W/tgt_concat_dense.log" 2>&1 &
  RUNS="$RUNS $W/tgt_concat_dense"
fi
wait; stamp "trained"; tail -n 3 "$W"/*.log
M=$(equal_update_point $RUNS); echo "$M" > "$W/M.txt"; echo "equal-update point M = $M"
LASTS=$(ls "$W/transformer" | sed -n 's/^checkpoint\([0-9]*\)\.pt$/\1/p' | sort -n | tail -1); echo "sentence model's last kept update: ${LASTS:-none}"
mkdir -p "$W/avg"
pick() { averaged "$W/$1" "$2" "$AVG" "$W/avg/$1_$2.pt" >/dev/null && echo "$W/avg/$1_$2.pt"; }   # RUN STEP → a checkpoint
SL=$([ -n "$LASTS" ] && pick transformer "$LASTS"); SM=$([ "$M" -gt 0 ] && pick transformer "$M")
DM=$([ "$M" -gt 0 ] && pick tgt_concat "$M"); XM=$([ -n "$DENSE" ] && [ "$M" -gt 0 ] && pick tgt_concat_dense "$M")
echo "averaged over AVG=$AVG kept checkpoints: ${SL:-} ${SM:-} ${DM:-} ${XM:-}"
[ -z "$DENSE" ] && [ -n "$SL" ] && fp16_back "$SL" sentence strip
[ -n "$DM" ] && fp16_back "$DM" document strip
[ -n "$XM" ] && fp16_back "$XM" dense strip
collect_into "$W" runs3.tgz 'M.txt *.log */metrics.jsonl */config.yaml */train.log'
stamp "weights back ($(left) s left)"; ls -la "$OUTD"
TT=$(( $(left) - 20 ))
xl() { test_translation "$W/test" "$W/prep" "$TT" "$@"; }   # NAME CKPT [--docs FILE]
if [ "$TT" -gt 15 ]; then
  xl "sentence_M$M" "${SM:-none}" &
  xl "sentence_last$LASTS" "${SL:-none}" &
  xl "tgt_concat_M$M" "${DM:-none}" --docs "$W/prep/test.docs" &
  [ -n "$DENSE" ] && xl "tgt_concat_dense_M$M" "${XM:-none}" --docs "$W/prep/test.docs" &
  wait
fi
for f in "$W"/test/*.bleu; do [ -f "$f" ] && echo "$(basename "$f" .bleu): $(grep -E '^(bleu_tok_lc|English pronouns)' "$f" | tr -s ' ' | paste -sd ';')"; done | tee "$W/bleu.txt"
collect_into "$W" runs3.tgz 'M.txt bleu.txt *.log */metrics.jsonl */config.yaml */train.log test/*'
stamp "done"; ls -la "$OUTD"
