#!/usr/bin/env bash
# Train both DP generators on an annotated prepared dataset, apply them to dev/test, score them
# against TVsub's hand oracle (and the authors' released generator output), with timings.
# Usage: benchmarks/dp_generator.sh [PREPARED_DIR] [RUNS_PREFIX]   (defaults data/quickstart runs/dp)
#   PREPARED_DIR/dp must exist (doctrans annotate-dp corpus -p PREPARED_DIR). DATA=TVsub root.
#   EXTRA: overrides for both trainings; THESIS_EXTRA / LABELER_EXTRA: for one (e.g. train.max_epochs=2).
set -euo pipefail
cd "$(dirname "$0")/.."
PREP=${1:-data/quickstart}
RUNS=${2:-runs/dp}
DATA=${DATA:-../shared/corpora/tvsub}
DT=${DT:-.venv/bin/python -m doctrans.cli}
echo "machine: $(nproc) CPUs, $(free -g | awk '/^Mem:/{print $2}') GiB RAM; date $(date -u +%FT%TZ); commit $(git rev-parse --short HEAD)"
for model in thesis labeler; do
  t0=$(date +%s)
  /usr/bin/time -f "== $model: peak RSS %M KB" $DT train pipelines/dp/$model.yaml data.prepared=$PREP run_dir=${RUNS}_$model ${EXTRA:-} $( [ $model = thesis ] && echo ${THESIS_EXTRA:-} || echo ${LABELER_EXTRA:-} ) $( [ -f ${RUNS}_$model/last.pt ] && echo --resume )
  echo "== $model: training took $(( $(date +%s) - t0 )) s"
  for split in dev test; do
    t0=$(date +%s.%N)
    $DT annotate-dp apply --generator ${RUNS}_$model/best.pt $PREP/$split.tok.zh --docs $PREP/$split.docs -o ${RUNS}_$model/$split --nbest 8
    echo "== $model $split: apply took $(echo "$(date +%s.%N) - $t0" | bc) s"
    $DT score dp ${RUNS}_$model/$split.dp.zh --base $PREP/$split.tok.zh --oracle $DATA/$split/$split.oracle-dp.seg.zh \
      --oracle-base $DATA/$split/$split.seg.zh --json --out ${RUNS}_$model/$split.dp_scores.json > /dev/null
    # test: paired bootstrap against the authors' released generator output
    $DT score dp ${RUNS}_$model/$split.dp.zh --base $PREP/$split.tok.zh --oracle $DATA/$split/$split.oracle-dp.seg.zh \
      --oracle-base $DATA/$split/$split.seg.zh \
      $( [ $split = test ] && echo --baseline $DATA/test/test.auto-dp.seg.zh --baseline-base $DATA/test/test.seg.zh )
  done
done
echo "== authors' released generator output (test.auto-dp.seg.zh)"
$DT score dp $DATA/test/test.auto-dp.seg.zh --base $DATA/test/test.seg.zh --oracle $DATA/test/test.oracle-dp.seg.zh
