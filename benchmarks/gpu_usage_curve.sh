#!/usr/bin/env bash
# Issue 29, item 3's usage curve past what this project's CPUs reach: stage-2 training side by side
# on one lent GPU (the `device` tool; nothing here needs one — on a CPU it runs, slowly), then the
# context table at equal updates.
#
#   bash benchmarks/gpu_usage_curve.sh CARRY OUT [MINUTES] [EVAL_EVERY] [TABLE_SECONDS]
#
# CARRY holds what the GPU machine lacks (built on this machine; never committed):
#   prep.tar.xz   a prepared dataset (doctrans preprocess; train/dev/test .bpe, .docs, train.target,
#                 test.tok, vocab, BPE codes, meta.json) — the quickstart slice
#   stage1.pt     the stage-1 sentence Transformer every run starts from (train.init_from)
#   tvsub/test/   test.ref.sgm, test.seg.zh, test.oracle-dp.seg.zh (for 3-ref BLEU and DP recall)
#   contrastive/  the contrastive pronoun set (doctrans contrastive)
#   whl/*.whl, site/, jieba.tgz   the packages missing there (benchmarks/gpu_carry_env.sh: sacremoses,
#                 subword_nmt, a trimmed jieba)
# Runs (each MINUTES of wall time, `train.max_time_min`; updates differ by model speed):
#   transformer   the continued sentence Transformer (pipelines/quickstart.yaml)
#   qcn_usage     QCN + CoWord 0.3 + context dropout 0.2 (the recipe of docs/discourse.md's 3,000-update curve)
#   han_usage     HAN encoder + CoWord 0.3 + context dropout 0.2
# every one from stage1.pt, dev cross-entropy and (context models) dev CXMI vs empty/random on the
# trainer's first 200 dev lines every EVAL_EVERY updates, a weights-only checkpoint at each of them.
# Then the largest update count S all three reached is translated and scored
# (`doctrans table context --usage`, TVsub test as documents, beam 5, 3 references; at most
# TABLE_SECONDS). OUT receives runs.tgz (metrics.jsonl, logs, configs), table.tgz (table.md,
# rows.json, hypotheses) and the S-update Transformer and QCN checkpoints in fp16, split in 15 MiB
# parts (NAME.fp16.pt.part-aa …; `cat` them back) for scoring elsewhere.
set -uo pipefail
C=$(realpath "${1:?CARRY}"); OUTD=$(realpath "${2:?OUT}"); MIN=${3:-5.3}; EVAL=${4:-500}; TABLE_S=${5:-170}
ROOT=$(cd "$(dirname "$0")/.." && pwd)
. "$ROOT/benchmarks/gpu_lib.sh"   # PY, DT, PYTHONPATH (gpu_carry_env.sh); gpu_unpack, gpu_banner, fp16_back, collect_into
W=${WORK:-/tmp/gpu_usage}; PREP=$W/prep; R=$W/runs; E=$W/eval
gpu_unpack "$PREP" "$R" "$E"
gpu_banner

COMMON="data.prepared=$PREP train.init_from=$C/stage1.pt train.max_steps=1000000 train.max_time_min=$MIN \
  train.eval_every=$EVAL train.save_every=$EVAL train.keep_last=200 train.eval_bleu=false train.metric=xent_nats \
  train.metric_mode=min train.threads=2 train.tensorboard=false"
USAGE="train.coword_dropout=0.3 train.context_dropout=0.2"
declare -A CFG=([transformer]="pipelines/quickstart.yaml" [qcn_usage]="pipelines/context/qcn.yaml $USAGE"
                [han_usage]="pipelines/context/han_encoder.yaml $USAGE")
declare -A PID
for n in transformer qcn_usage han_usage; do
  (cd "$ROOT" && exec $DT train ${CFG[$n]} $COMMON run_dir=$R/$n) >"$R/$n.log" 2>&1 &
  PID[$n]=$!
done
collect() {                  # the runs' small files → OUT/runs.tgz (again after every phase)
  collect_into "$W" runs.tgz 'runs/*.log runs/*/metrics.jsonl runs/*/config.yaml runs/*/train.log runs/*/learning_curves.png'
}
sleep 75                     # fail fast: a run that dies at start (a device bug) stops everything
for n in "${!PID[@]}"; do
  if ! kill -0 "${PID[$n]}" 2>/dev/null && ! wait "${PID[$n]}"; then
    echo "== $n died at start:"; tail -30 "$R/$n.log"; kill "${PID[@]}" 2>/dev/null; collect; exit 1
  fi
done
echo "== all three training after 75 s"; grep -h "update" "$R"/*/train.log 2>/dev/null | tail -3
for n in "${!PID[@]}"; do wait "${PID[$n]}"; echo "== $n exit $?"; tail -3 "$R/$n.log"; done
collect

# the largest update count with a checkpoint in every run (save points are multiples of EVAL; a
# run stopped by the clock also saves where it stopped, which the others need not have)
S=$(for n in transformer qcn_usage han_usage; do ls "$R/$n" | sed -n 's/^checkpoint\([0-9]*\)\.pt$/\1/p' | sort -u; done \
    | sort -n | uniq -c | awk '$1 == 3 {print $2}' | tail -1)
echo "== equal updates: S=${S:-none}"; [ -n "$S" ] || { echo "no update count has a checkpoint in all three runs"; exit 1; }
for n in transformer qcn_usage han_usage; do
  mkdir -p "$E/$n"; ln -sf "$R/$n/checkpoint$S.pt" "$E/$n/last.pt"
  ln -sf "$R/$n/config.yaml" "$E/$n/config.yaml"; ln -sf "$R/$n/metrics.jsonl" "$E/$n/metrics.jsonl"
done
for n in transformer qcn_usage; do fp16_back "$R/$n/checkpoint$S.pt" "$n"; done
timeout "$TABLE_S" $DT table context --prepared "$PREP" --data "$C/tvsub" --usage --contrastive "$C/contrastive" \
  --work "$E/work" --out "$E/work/table.md" --system "Transformer=$E/transformer" \
  --system "QCN + CoWord 0.3 + context dropout 0.2=$E/qcn_usage" \
  --system "HAN encoder + CoWord 0.3 + context dropout 0.2=$E/han_usage"
echo "== table exit $?"; cat "$E/work/table.md" 2>/dev/null
collect_into "$E" table.tgz work
collect; ls -la "$OUTD"
