#!/usr/bin/env bash
# Issue 48 on a lent GPU in one call (the `device` tool; on a CPU it runs, slowly): the whole corpus,
# stage 1 and stage 2, and the two models worth shipping back in fp16.
#
#   bash benchmarks/gpu_full_ship.sh CARRY OUT [S1_MIN] [S2_MIN] [TOTAL_S]
#
# Stage 1 (S1_MIN minutes of training each, side by side on the one GPU, equal wall time under the
# same contention): the two shippable shapes pipelines/full/transformer_6x2_d256 and _3x3_d256 and
# the papers' base (transformer_base: its tok/s on the GPU; too large to ship). Dev cross-entropy
# every EVAL updates (the curve). The shippable shape with the lower last dev cross-entropy wins.
# Stage 2 from the winner's last.pt, side by side, the same settings, S2_MIN minutes each: the
# sentence model continued (pipelines/quickstart.yaml) and the target-side context model
# (pipelines/context/tgt_concat.yaml: previous source + previous English as a prefix), both with
# checkpoint{STEP}.pt kept every KEEP updates, so the two are compared at EQUAL UPDATES from the same
# start: M = the last multiple of KEEP both reached. Then the TVsub test (beam 5, 3 references):
# the three stage-1 models and the two stage-2 models at M (the context model with a rolling history
# of its own translations, --docs); the two stage-2 checkpoints at M come back in fp16 (the files to
# ship). TOTAL_S (default 560) is the whole script's deadline: the translations are cut short
# before it so that the weights always come back.
#
# CARRY: as benchmarks/gpu_full.sh (benchmarks/gpu_full_carry.sh builds it). Environment: TOK
# (max_tokens, 32768), LR_SMALL (2e-3), LR_BASE (1e-3), LR_S2 (1e-3), WARMUP (1000), EVAL (500), KEEP (100:
# stage 2's checkpoint interval),
# SHAPES (the stage-1 shapes; default "transformer_6x2_d256 transformer_3x3_d256 transformer_base";
# the first two are the shippable candidates).
# OUT: log.txt (the caller's tee), runs.tgz (every run's metrics.jsonl, config.yaml, train.log, the
# test translations, bleu.txt, choice.txt), sentence.fp16.pt.part-*, document.fp16.pt.part-*
# (`cat` the parts back together).
set -uo pipefail
C=$(realpath "${1:?CARRY}"); OUTD=$(realpath "${2:?OUT}"); S1=${3:-4}; S2=${4:-1.5}; TOTAL=${5:-560}
T0=$(date +%s)
TOK=${TOK:-32768}; LR_SMALL=${LR_SMALL:-2e-3}; LR_BASE=${LR_BASE:-1e-3}; LR_S2=${LR_S2:-1e-3}
WARMUP=${WARMUP:-1000}; EVAL=${EVAL:-500}; KEEP=${KEEP:-100}
SHAPES=${SHAPES:-"transformer_6x2_d256 transformer_3x3_d256 transformer_base"}
ROOT=$(cd "$(dirname "$0")/.." && pwd)
. "$ROOT/benchmarks/gpu_lib.sh"   # PY, DT, PYTHONPATH; gpu_unpack, gpu_banner, fp16_back, equal_update_point, collect_into
W=${WORK:-/tmp/gpu_ship}; PREP=$W/prep
rm -rf "$W"; gpu_unpack "$PREP" "$W/s1" "$W/s2" "$W/test"
gpu_banner
left() { echo $(( TOTAL - ($(date +%s) - T0) )); }
stamp() { echo "== $(( $(date +%s) - T0 )) s: $*"; }
declare -A FULL_MODEL=(
  [transformer_3x3_d256]=""
  [transformer_6x2_d256]="model.layers_enc=6 model.layers_dec=2"
  [transformer_base]="model.layers_enc=6 model.layers_dec=6 model.d_model=512 model.heads=8 model.d_ff=2048"
)
COMMON="data.prepared=$PREP train.device=auto train.max_tokens=$TOK train.tensorboard=false train.threads=4 \
train.eval_bleu=false train.metric=xent_nats train.metric_mode=min train.plot=false"

stamp "stage 1: $SHAPES, $S1 min each"
for s in $SHAPES; do
  lr=$LR_SMALL; [ "$s" = transformer_base ] && lr=$LR_BASE
  (cd "$ROOT" && timeout -s TERM $(( ${S1%.*} * 60 + 150 )) $DT train "pipelines/full/$s.yaml" $COMMON \
     run_dir="$W/s1/$s" train.max_steps=10000000 train.max_time_min="$S1" train.lr="$lr" train.warmup="$WARMUP" \
     train.eval_every="$EVAL" train.save_every="$EVAL" train.keep_every=0 train.keep_last=0) > "$W/s1/$s.log" 2>&1 &
done
wait
stamp "stage 1 done"; for s in $SHAPES; do echo "-- $s"; tail -3 "$W/s1/$s.log"; done

# the shippable winner: the lower dev cross-entropy at its last evaluation (equal wall time)
set -- $SHAPES
WIN=$($PY - "$W/s1" "$1" "$2" <<'PYEOF' | tee "$W/choice.txt" | tail -1
import json, sys
from pathlib import Path
root, shapes = Path(sys.argv[1]), sys.argv[2:]
best = None
for s in shapes:
    f = root / s / "metrics.jsonl"
    lines = f.read_text().splitlines() if f.exists() else []
    recs = [json.loads(l) for l in lines if '"kind": "dev"' in l]
    steps = [json.loads(l)["step"] for l in lines if '"kind": "train"' in l]
    x = recs[-1]["xent_nats"] if recs else float("inf")
    print(f"{s}: last dev step {recs[-1]['step'] if recs else '-'} xent_nats {x:.4f}; trained to update {max(steps or [0])}")
    if (root / s / "last.pt").exists() and (best is None or x < best[1]):    # no evaluation: the first shape
        best = (s, x)
print(best[0] if best else "")
PYEOF
)
[ -n "$WIN" ] || { echo "no stage-1 model"; collect_into "$W" runs.tgz 's1/*.log s1/*/metrics.jsonl s1/*/config.yaml s1/*/train.log'; exit 1; }
stamp "stage 2 from $WIN, $S2 min each"
S2COMMON="$COMMON ${FULL_MODEL[$WIN]} train.init_from=$W/s1/$WIN/last.pt train.max_steps=10000000 \
train.max_time_min=$S2 train.lr=$LR_S2 train.warmup=200 train.eval_every=$((2 * KEEP)) train.save_every=$KEEP \
train.keep_every=$KEEP train.keep_last=0"
for m in transformer:pipelines/quickstart.yaml tgt_concat:pipelines/context/tgt_concat.yaml; do
  (cd "$ROOT" && timeout -s TERM $(( ${S2%.*} * 60 + 150 )) $DT train "${m#*:}" $S2COMMON run_dir="$W/s2/${m%%:*}") \
    > "$W/s2/${m%%:*}.log" 2>&1 &
done
wait
stamp "stage 2 done"; for m in transformer tgt_concat; do echo "-- $m"; tail -3 "$W/s2/$m.log"; done
M=$(equal_update_point "$W/s2/transformer" "$W/s2/tgt_concat")
echo "equal-update point M = $M" | tee -a "$W/choice.txt"
pick() { if [ "$M" -gt 0 ]; then echo "$W/s2/$1/checkpoint$M.pt"; else echo "$W/s2/$1/last.pt"; fi; }

stamp "test translations ($(left) s left)"
TT=$(( $(left) - 45 )); [ "$TT" -gt 240 ] && TT=240
xl() { test_translation "$W/test" "$PREP" "$TT" "$@"; }   # NAME CKPT [--docs FILE]
if [ "$TT" -gt 20 ]; then
  for s in $SHAPES; do xl "s1_$s" "$W/s1/$s/last.pt" & done
  xl s2_transformer "$(pick transformer)" &
  xl s2_tgt_concat "$(pick tgt_concat)" --docs "$PREP/test.docs" &
  wait
fi
for f in "$W"/test/*.bleu; do [ -f "$f" ] && echo "$(basename "$f" .bleu): $(grep -E '^(bleu_tok_lc|English pronouns)' "$f" | tr -s ' ' | paste -sd ';')"; done | tee "$W/bleu.txt"
stamp "weights back"
fp16_back "$(pick transformer)" sentence strip
fp16_back "$(pick tgt_concat)" document strip
collect_into "$W" runs.tgz 'choice.txt bleu.txt s1/*.log s2/*.log s1/*/metrics.jsonl s1/*/config.yaml s1/*/train.log
  s2/*/metrics.jsonl s2/*/config.yaml s2/*/train.log test/*'
stamp "done"; ls -la "$OUTD"
