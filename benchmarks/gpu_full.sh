#!/usr/bin/env bash
# Issue 48's stage 1 on a lent GPU (the `device` tool; nothing here needs one — on a CPU it runs,
# slowly): the whole-corpus sentence Transformer of pipelines/full/SHAPE.yaml trained for MINUTES
# (bf16 autocast, MAX_TOKENS-token batches), starting from CARRY/stage1.pt when it is there (a
# resumed CPU or GPU run: its weights, fp16), then the TVsub test translated with it (beam 5, 3
# references), and its weights back in fp16 — the file `doctrans` can resume from (train.init_from)
# or ship (runtime/shipped.py). Target tok/s of the GPU is in OUT/metrics.jsonl (train records),
# to set against the CPU's (the same shape's metrics.jsonl here).
#
#   bash benchmarks/gpu_full.sh CARRY OUT [MINUTES] [SHAPE] [MAX_TOKENS] [LR] [WARMUP]
#
# CARRY (built here with benchmarks/gpu_full_carry.sh; never committed; ≤ 64 MiB with the repository):
#   prep.tar.xz   the prepared whole corpus (PREP_FULL: train/dev/test .bpe.*, test.tok.zh,
#                 train.target, {train,dev,test}.docs, vocab.*.txt, bpe.codes.*, meta.json; the other
#                 .tok files are left out)
#   tvsub/test/   test.ref.sgm (the 3 references)
#   stage1.pt     optional: weights to start from (fp16 is enough)
#   whl/*.whl, site/   packages missing there (gpu_carry_env.sh)
# OUT receives log.txt (from the caller's tee), run.tgz (metrics.jsonl, config.yaml, train.log),
# test.hyp, bleu.txt and SHAPE.fp16.pt (≤ 16 MiB per file back: split in 15 MiB parts,
# SHAPE.fp16.pt.part-aa …; `cat` them back together).
set -uo pipefail
C=$(realpath "${1:?CARRY}"); OUTD=$(realpath "${2:?OUT}"); MIN=${3:-7}; SHAPE=${4:-transformer_3x3_d256}
TOK=${5:-32768}; LR=${6:-2e-3}; WARMUP=${7:-1000}
ROOT=$(cd "$(dirname "$0")/.." && pwd)
. "$ROOT/benchmarks/gpu_lib.sh"   # PY, DT, PYTHONPATH (gpu_carry_env.sh); gpu_unpack, gpu_banner, fp16_back, collect_into
W=${WORK:-/tmp/gpu_full}; PREP=$W/prep; R=$W/run
gpu_unpack "$PREP" "$R"
gpu_banner
INIT=; [ -f "$C/stage1.pt" ] && INIT="train.init_from=$C/stage1.pt"
(cd "$ROOT" && $DT train "pipelines/full/$SHAPE.yaml" data.prepared="$PREP" run_dir="$R" train.device=auto \
   train.max_steps=10000000 train.max_time_min="$MIN" train.max_tokens="$TOK" train.lr="$LR" \
   train.warmup="$WARMUP" train.eval_every=2000 train.save_every=1000 train.keep_every=0 \
   train.tensorboard=false train.threads=4 $INIT) > "$R.log" 2>&1
echo "== train exit $?"; tail -5 "$R.log"
collect_into "$W" run.tgz 'run.log run/metrics.jsonl run/config.yaml run/train.log'
[ -f "$R/last.pt" ] || { echo "no last.pt"; exit 1; }
$DT translate -c "$R/last.pt" -i "$PREP/test.tok.zh" --input-format tok --tokenized -o "$OUTD/test.hyp" --beam 5 \
  2>&1 | tail -2
$DT score "$OUTD/test.hyp" -r "$C/tvsub/test/test.ref.sgm" --hyp-tokenized 2>&1 | tee "$OUTD/bleu.txt"
fp16_back "$R/last.pt" "$SHAPE" strip
ls -la "$OUTD"
