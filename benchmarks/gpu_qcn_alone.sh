#!/usr/bin/env bash
# QCN + CoWord 0.3 + context dropout 0.2 alone on a lent GPU: how many stage-2 updates it reaches,
# its dev CXMI every EVAL_EVERY updates, then `doctrans table context --usage` on its last
# checkpoint (TVsub test as documents, beam 5, 3 references; TABLE_SECONDS 0: none), whose weights
# come back in fp16 (OUT/qcn_usage.fp16.pt.part-*: `cat` them) to be scored elsewhere. The follow-up of
# benchmarks/gpu_usage_curve.sh, whose three runs side by side left the context models at
# ≈ 0.6 updates/s (the sentence Transformer beside them: ≈ 28/s).
#
#   bash benchmarks/gpu_qcn_alone.sh CARRY OUT [MINUTES] [EVAL_EVERY] [TABLE_SECONDS] [MIN_UPDATES_AT_60S]
#
# CARRY as benchmarks/gpu_usage_curve.sh. If the run has fewer than MIN_UPDATES_AT_60S updates
# after 60 s it is stopped and 10 updates are profiled instead (cProfile, by own time:
# OUT/profile.txt) — where a context model's GPU step goes.
set -uo pipefail
C=$(realpath "${1:?CARRY}"); OUTD=$(realpath "${2:?OUT}"); MIN=${3:-4.5}; EVAL=${4:-500}; TABLE_S=${5:-100}
SLOW=${6:-100}
ROOT=$(cd "$(dirname "$0")/.." && pwd)
. "$ROOT/benchmarks/gpu_lib.sh"   # PY, DT, PYTHONPATH (gpu_carry_env.sh); gpu_unpack, gpu_banner, fp16_back, collect_into
W=${WORK:-/tmp/gpu_qcn}; PREP=$W/prep; R=$W/runs
gpu_unpack "$PREP" "$R"
gpu_banner
ARGS="pipelines/context/qcn.yaml data.prepared=$PREP train.init_from=$C/stage1.pt train.eval_bleu=false \
  train.metric=xent_nats train.metric_mode=min train.threads=2 train.tensorboard=false \
  train.coword_dropout=0.3 train.context_dropout=0.2"
collect() { collect_into "$W" runs.tgz 'runs/*.log runs/*/metrics.jsonl runs/*/config.yaml runs/*/train.log'; }
(cd "$ROOT" && exec $DT train $ARGS train.max_steps=1000000 train.max_time_min=$MIN train.eval_every=$EVAL \
   train.save_every=$EVAL train.keep_last=200 run_dir=$R/qcn_usage) >"$R/qcn_usage.log" 2>&1 &
PID=$!
sleep 60
N=$(grep -ho "step [0-9]* ep" "$R/qcn_usage/train.log" 2>/dev/null | tail -1 | grep -o "[0-9]*" | head -1)
echo "== updates after 60 s: ${N:-0}"
if [ "${N:-0}" -lt "$SLOW" ]; then
  kill "$PID"; wait "$PID" 2>/dev/null
  echo "== slow: profiling 10 updates"
  (cd "$ROOT" && $PY -m cProfile -o "$W/qcn.prof" bin/doctrans -q train $ARGS train.max_steps=10 train.eval_every=0 \
     train.save_every=0 train.eval_cxmi_sentences=0 train.plot=false run_dir=$R/profile) >"$R/profile.log" 2>&1
  $PY -c "import pstats,sys; pstats.Stats(sys.argv[1]).sort_stats('tottime').print_stats(45)" "$W/qcn.prof" > "$OUTD/profile.txt"
  $PY -c "import pstats,sys; pstats.Stats(sys.argv[1]).sort_stats('cumulative').print_stats(80)" "$W/qcn.prof" >> "$OUTD/profile.txt"
  collect; exit 0
fi
wait "$PID"; echo "== qcn exit $?"; tail -3 "$R/qcn_usage.log"; collect
S=$(ls "$R/qcn_usage" | sed -n 's/^checkpoint\([0-9]*\)\.pt$/\1/p' | sort -n | tail -1)
echo "== last checkpoint: $S"
mkdir -p "$W/eval/qcn_usage"
for f in config.yaml metrics.jsonl; do ln -sf "$R/qcn_usage/$f" "$W/eval/qcn_usage/$f"; done
ln -sf "$R/qcn_usage/checkpoint$S.pt" "$W/eval/qcn_usage/last.pt"
fp16_back "$R/qcn_usage/checkpoint$S.pt" qcn_usage
[ "$TABLE_S" -gt 0 ] || { collect; ls -la "$OUTD"; exit 0; }
timeout "$TABLE_S" $DT table context --prepared "$PREP" --data "$C/tvsub" --usage --contrastive "$C/contrastive" \
  --work "$W/eval/work" --out "$W/eval/work/table.md" --system "QCN + CoWord 0.3 + context dropout 0.2=$W/eval/qcn_usage"
echo "== table exit $?"; cat "$W/eval/work/table.md" 2>/dev/null
collect_into "$W/eval" table.tgz work; collect; ls -la "$OUTD"
