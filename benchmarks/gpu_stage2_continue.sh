#!/usr/bin/env bash
# Stage 2 continued on a lent GPU from ONE start (issue 48; the second call of 2026-11-28): the
# sentence model and the target-side context model side by side from the same weights — CARRY/start.pt,
# a tgt_concat checkpoint (the sentence model's start is the same weights without the "backbone."
# prefix) — each for MIN minutes, checkpoints every 50 updates, both back in fp16 at the last update
# both reached (equal updates from the same start). Ran as `bash .gpu2/run.sh 3.0` with this file as
# CARRY/run.sh; CARRY holds prep.tar.xz, whl/, site/ (benchmarks/gpu_full_carry.sh, without jieba:
# the carry must stay ≤ 64 MiB with start.pt) and start.pt (the document.fp16.pt that
# benchmarks/gpu_full_ship.sh brought back). EXTRA: more key=value overrides (a CPU smoke test).
#   bash benchmarks/gpu_stage2_continue.sh [MIN]        (run from the repository root; OUT set)
C=$(realpath "${CARRY:-.gpu2}"); OUTD=${OUT:-/tmp/out2}; MIN=${1:-3.3}; ROOT=$PWD; PY=${PYTHON:-python3}
export PYTHONUNBUFFERED=1
$PY -m pip install -q --no-index --no-deps --no-compile --target /tmp/site2 $C/whl/*.whl
export PYTHONPATH=$ROOT:$C/site:/tmp/site2
W=/tmp/g2; rm -rf $W; mkdir -p $W/prep; tar xJf $C/prep.tar.xz -C $W/prep || exit 1
nvidia-smi -L; date -u
# the sentence model's start: the same weights without the context model's "backbone." prefix
$PY -c "import sys,torch; ck=torch.load(sys.argv[1],map_location='cpu',weights_only=False); ck['model']={k.removeprefix('backbone.'): v for k,v in ck['model'].items()}; ck['config']['context']=None; torch.save(ck,sys.argv[2])" $C/start.pt $W/start_sent.pt
A="data.prepared=$W/prep train.device=auto train.max_tokens=32768 train.tensorboard=false train.threads=4 train.eval_bleu=false
 train.metric=xent_nats train.metric_mode=min train.plot=false train.init_from=$C/start.pt train.max_steps=10000000
 train.max_time_min=$MIN train.lr=1e-3 train.warmup=100 train.eval_every=100 train.save_every=50 train.keep_every=50 train.keep_last=0 ${EXTRA:-}"
$PY bin/doctrans train pipelines/quickstart.yaml $A train.init_from=$W/start_sent.pt run_dir=$W/transformer > $W/transformer.log 2>&1 &
$PY bin/doctrans train pipelines/context/tgt_concat.yaml $A run_dir=$W/tgt_concat > $W/tgt_concat.log 2>&1 &
wait; date -u; tail -n 3 $W/*.log
M=$(comm -12 <(ls $W/transformer | grep -o 'checkpoint[0-9]*' | sort) <(ls $W/tgt_concat | grep -o 'checkpoint[0-9]*' | sort) | sed 's/checkpoint//' | sort -n | tail -1)
echo "M=$M"
for r in transformer tgt_concat; do
  $PY -c "import sys,torch; from doctrans.runtime.shipped import half_weights; ck=torch.load(sys.argv[1],map_location='cpu',weights_only=False); ck['model']=half_weights(ck['model']); [ck.pop(k,None) for k in ('optimizer','rng','rng_ranks')]; torch.save(ck,sys.argv[2])" $W/$r/checkpoint$M.pt $OUTD/$r.pt
  (cd $OUTD && split -b 15M $r.pt $r.pt.part- && rm $r.pt)
done
(cd $W && tar czf $OUTD/runs2.tgz */metrics.jsonl */config.yaml */train.log *.log)
ls -la $OUTD
