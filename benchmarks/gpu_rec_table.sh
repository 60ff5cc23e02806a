#!/usr/bin/env bash
# Issue 28's rec table at a budget this project's CPUs do not reach in a session: every row of
# `make rec-table` trained side by side on one lent GPU (the `device` tool; nothing here needs one —
# on a CPU it runs, slowly), each STEPS updates from the same stage-1 checkpoint, then `doctrans
# table rec --discourse` over all rows (TVsub test as documents, beam 5, 3 references), then the
# speed of reranked against plain beam-10 decoding with nothing else running.
#
#   bash benchmarks/gpu_rec_table.sh CARRY OUT [STEPS] [TRAIN_MINUTES] [TABLE_SECONDS] [PD] [SLOW_MINUTES]
#
# CARRY holds what the GPU machine lacks (built on this machine; never committed; ≤ 64 MiB with the
# repository, hence fp16 weights):
#   prep.tar.xz   the prepared quickstart slice (doctrans preprocess) with dp/ (annotate-dp corpus -p and
#                 --source-bpe: train/dev .dp/.dpp .bpe.zh/.srcbpe.zh, .dplabel, vocab.dp*.txt, meta.json)
#                 and dp_jk3/ (annotate-dp jackknife --folds 3: train/dev .dp.srcbpe.zh, meta.json, docs)
#   stage1.pt     the stage-1 sentence Transformer every row starts from (train.init_from; fp16 is
#                 enough: cast to fp32 here before anything reads it)
#   gen.pt        the external DP generator (annotate-dp's labeler; weights only, fp16 is enough)
#   tvsub/test/   test.ref.sgm, test.seg.zh, test.oracle-dp.seg.zh
#   contrastive/  the contrastive pronoun set (doctrans contrastive; its sources are raw text)
#   jieba.tgz     jieba without posseg/analyse/lac_small (2.6 MB): the contrastive set is segmented
#   whl/*.whl, site/   wheels / pure-Python packages missing there (sacremoses; site/subword_nmt)
# Rows (the Makefile's REC_MODELS, pronoun dropout PD for the _pd rows): baseline, nmt_dp_continued,
# nmt_dpp_continued, nmt_dp_predicted (trained here; its test input needs the jackknife's fold
# ensemble, which is not carried: translated elsewhere from the fp16 checkpoint that comes back),
# rec_enc, rec_dec, rec_both, rec_shared (enc2dec), rec_shared_independent, rec_shared_dec2enc,
# rec_joint_predictor, rec_joint_labeler, rec_joint_labeler_pd, and the two document models
# rec_joint_labeler_han_pd, rec_joint_context (SLOW). All train at once (one thread each, fp32, no
# dev evaluation but the last); the sentence rows are capped at TRAIN_MINUTES, the slow rows at
# SLOW_MINUTES (they go on while the sentence rows are tabulated). A row set that does not reach
# STEPS is tabulated at the largest multiple of 200 all its rows reached (the `updates` column).
# The table runs as parallel `doctrans table rec` groups, each headed by the baseline (bootstrap
# against it), merged into one table (OUT/table.md). Train tok/s and decode sent/s in it are
# measured with the runs / groups sharing the GPU: not speed figures (the speed step is).
# OUT receives log.txt (from the caller's tee), table.tgz (table.md, rows.json, each group's work
# dir), runs.tgz (metrics.jsonl, configs, logs), speed.txt, and the baseline's and nmt_dp_predicted's
# weights in fp16, split in 15 MiB parts (NAME.fp16.pt.part-aa …; `cat` them back).
set -uo pipefail
C=$(realpath "${1:?CARRY}"); OUTD=$(realpath "${2:?OUT}"); STEPS=${3:-800}; MIN=${4:-4.5}; TABLE_S=${5:-200}
PD=${6:-0.25}; SLOW_MIN=${7:-8}
ROOT=$(cd "$(dirname "$0")/.." && pwd)
. "$ROOT/benchmarks/gpu_lib.sh"   # PY, DT, PYTHONPATH (gpu_carry_env.sh); gpu_unpack, gpu_banner, fp16_back, collect_into
W=${WORK:-/tmp/gpu_rec}; PREP=$W/prep; R=$W/runs; TR=$R; E=$W/eval   # TR: the training runs (R becomes the tabulated links)
gpu_unpack "$PREP" "$R" "$E"
# stage1.pt / gen.pt may come in fp16 (the carry's size limit): fp32 again before anything reads them
$PY - "$C" "$W" <<'EOF' || exit 1
import sys, torch
from doctrans.runtime.checkpoint_digest import with_digest   # an edited checkpoint gets a new digest
C, W = sys.argv[1:]
for n in ("stage1", "gen"):
    ck = torch.load(f"{C}/{n}.pt", map_location="cpu", weights_only=False)
    ck["model"] = {k: (v.float() if v.is_floating_point() else v) for k, v in ck["model"].items()}
    torch.save(with_digest(ck), f"{W}/{n}.pt")
EOF
gpu_banner

COMMON="data.prepared=$PREP train.init_from=$W/stage1.pt train.max_steps=$STEPS \
  train.save_every=200 train.keep_last=20 train.eval_every=0 train.eval_bleu=false train.metric=xent_nats \
  train.metric_mode=min train.threads=1 train.tensorboard=false train.plot=false"
D=pipelines/dp
declare -A CFG=(
  [baseline]="pipelines/quickstart.yaml"
  [nmt_dp_continued]="$D/nmt_dp_continued.yaml data.src_dir=$PREP/dp"
  [nmt_dpp_continued]="$D/nmt_dpp_continued.yaml data.src_dir=$PREP/dp"
  [nmt_dp_predicted]="$D/nmt_dp_predicted.yaml data.src_dir=$PREP/dp_jk3"
  [rec_enc]="$D/rec_enc.yaml" [rec_dec]="$D/rec_dec.yaml" [rec_both]="$D/rec_both.yaml"
  [rec_shared]="$D/rec_shared.yaml"
  [rec_shared_independent]="$D/rec_shared.yaml model.reconstructor.attention=independent"
  [rec_shared_dec2enc]="$D/rec_shared.yaml model.reconstructor.attention=dec2enc"
  [rec_joint_predictor]="$D/rec_joint_predictor.yaml" [rec_joint_labeler]="$D/rec_joint_labeler.yaml"
  [rec_joint_context]="$D/rec_joint_context.yaml"
  [rec_joint_labeler_pd]="$D/rec_joint_labeler.yaml train.pronoun_dropout=$PD"
  [rec_joint_labeler_han_pd]="$D/rec_joint_labeler_han.yaml train.pronoun_dropout=$PD")
ALL="rec_joint_labeler_han_pd rec_joint_context rec_both rec_shared rec_shared_independent rec_shared_dec2enc
  rec_joint_predictor rec_joint_labeler rec_joint_labeler_pd rec_enc rec_dec nmt_dp_continued nmt_dpp_continued
  nmt_dp_predicted baseline"
ORDER=$(echo ${ROWS:-$ALL})      # ROWS: a subset (a smoke test on a CPU); baseline must be in it
has() { [[ " $ORDER " == *" $1 "* ]]; }
SLOW=""; FAST=""
for n in $ORDER; do case $n in rec_joint_labeler_han_pd|rec_joint_context) SLOW="$SLOW $n";; *) FAST="$FAST $n";; esac; done
declare -A PID
for n in $SLOW $FAST; do   # the slowest first
  cap=$MIN; [[ " $SLOW " == *" $n "* ]] && cap=$SLOW_MIN
  (cd "$ROOT" && exec $DT train ${CFG[$n]} $COMMON train.max_time_min=$cap run_dir=$R/$n) >"$R/$n.log" 2>&1 &
  PID[$n]=$!
done
collect() {                  # the runs' small files → OUT/runs.tgz (again after every phase)
  collect_into "$W" runs.tgz 'runs/*.log runs/*/metrics.jsonl runs/*/config.yaml runs/*/train.log'
}
sleep 60                     # fail fast: a run that dies at start stops everything
dead=0
for n in $ORDER; do
  if ! kill -0 "${PID[$n]}" 2>/dev/null && ! wait "${PID[$n]}"; then echo "== $n died at start:"; tail -20 "$R/$n.log"; dead=1; fi
done
[ $dead = 0 ] || { kill "${PID[@]}" 2>/dev/null; collect; exit 1; }
echo "== all training after 60 s"; nvidia-smi --query-gpu=utilization.gpu,memory.used --format=csv 2>/dev/null
# equal updates within a row set: STEPS when every run reached it, else the largest multiple of 200
# all reached (train.save_every); each row is read from E/runs/NAME (last.pt -> that checkpoint)
finish() {   # rows… : wait for them, pick their common update count, link E/runs/NAME
  local n S
  for n in "$@"; do wait "${PID[$n]}"; echo "== $n exit $? $(tail -n 1 "$TR/$n/metrics.jsonl" 2>/dev/null | cut -c1-100)"; done
  S=$(for n in "$@"; do
        $PY -c "import torch,sys; print(torch.load(sys.argv[1],map_location='cpu',weights_only=False)['state']['step'])" \
          "$TR/$n/last.pt" 2>/dev/null || echo 0; done | sort -n | head -n 1)
  [ "$S" -ge "$STEPS" ] && S=$STEPS || S=$(( S / 200 * 200 ))
  echo "== equal updates of $*: S=$S"; date -u
  for n in "$@"; do
    mkdir -p "$E/runs/$n"; ln -sf "$TR/$n/config.yaml" "$E/runs/$n/config.yaml"; ln -sf "$TR/$n/metrics.jsonl" "$E/runs/$n/metrics.jsonl"
    if [ "$S" = "$STEPS" ]; then ln -sf "$TR/$n/last.pt" "$E/runs/$n/last.pt"
    elif [ "$S" -gt 0 ]; then ln -sf "$TR/$n/checkpoint$S.pt" "$E/runs/$n/last.pt"; fi
  done
}
finish $FAST; collect
for n in baseline nmt_dp_predicted; do has $n && fp16_back "$E/runs/$n/last.pt" "$n" strip; done
R=$E/runs
G="dp_generator=$W/gen.pt"
declare -A NAME=([nmt_dp_continued]="+DPs" [nmt_dpp_continued]="Baseline (+DPPs)" [rec_enc]="enc-rec"
  [rec_dec]="dec-rec" [rec_both]="enc+dec-rec" [rec_shared]="shared enc→dec" [rec_shared_independent]="shared independent"
  [rec_shared_dec2enc]="shared dec→enc" [rec_joint_predictor]="+ joint DP predictor" [rec_joint_labeler]="+ joint DP labeler"
  [rec_joint_context]="+ cross-sentence context" [rec_joint_labeler_pd]="+ joint DP labeler + PD $PD"
  [rec_joint_labeler_han_pd]="+ joint DP labeler over the HAN encoder + PD $PD")
declare -A OPT=([nmt_dp_continued]="$G" [nmt_dpp_continued]="$G dp_input=dpp" [rec_enc]="$G" [rec_dec]="$G"
  [rec_both]="$G" [rec_shared]="$G dp_input=dpp" [rec_shared_independent]="$G dp_input=dpp"
  [rec_shared_dec2enc]="$G dp_input=dpp" [rec_joint_predictor]="$G dp_input=dpp")
GROUPS_=("nmt_dp_continued nmt_dpp_continued" "rec_both" "rec_enc rec_dec" "rec_shared rec_shared_independent"
  "rec_shared_dec2enc rec_joint_predictor" "rec_joint_labeler rec_joint_labeler_pd" "rec_joint_labeler_han_pd rec_joint_context")
i=0; TP=()
for g in "${GROUPS_[@]}"; do
  args=(--system "Baseline (continued)=$R/baseline"); any=0
  if [ "$g" = "rec_joint_labeler_han_pd rec_joint_context" ]; then
    [ -n "$SLOW" ] && finish $SLOW; collect
  fi
  for n in $g; do
    has "$n" || continue; any=1
    args+=(--system "${NAME[$n]}=$R/$n"); for o in ${OPT[$n]:-}; do args+=(--row-option "${NAME[$n]}:$o"); done
    if [ "$n" = rec_both ]; then
      args+=(--system "enc+dec-rec (reranked)=$R/$n" --row-option "enc+dec-rec (reranked):rerank=reconstructor")
      for o in ${OPT[$n]}; do args+=(--row-option "enc+dec-rec (reranked):$o"); done
    fi
  done
  [ $any = 1 ] || continue
  (cd "$ROOT" && exec timeout "$TABLE_S" $DT table rec --prepared "$PREP" --data "$C/tvsub" --discourse \
     --contrastive "$C/contrastive" --generator "$W/gen.pt" --skip-missing --work "$E/g$i" --out "$E/g$i/table.md" \
     "${args[@]}") >"$E/g$i.log" 2>&1 &
  TP+=($!); i=$((i + 1))
done
for p in "${TP[@]}"; do wait "$p"; done
for j in $(seq 0 $((i - 1))); do echo "== group $j: $(tail -1 "$E/g$j.log" | cut -c1-200)"; done
# one table: the baseline row once (every group's; they must agree), the groups' rows in order
$PY - "$E" "$i" <<'EOF' || true
import json, sys
from pathlib import Path
from doctrans.experiments.rec_table import render
E, n = Path(sys.argv[1]), int(sys.argv[2])
rows, ext, base = [], None, []
for j in range(n):
    f = E / f"g{j}" / "rows.json"
    if not f.is_file():
        print(f"group {j}: no rows.json"); continue
    d = json.loads(f.read_text())
    base.append(d["rows"][0]["bleu"]); ext = ext or d["external"]
    rows += d["rows"][1:] if rows else d["rows"]
print("baseline BLEU per group:", base)
if not rows:
    sys.exit("no group wrote a table")
(E / "rows.json").write_text(json.dumps({"rows": rows, "external": ext}, indent=1) + "\n")
(E / "table.md").write_text(render(rows, ext) + "\n")
print((E / "table.md").read_text())
EOF
collect_into "$W" table.tgz '--exclude=eval/runs eval'
collect; date -u

# speed, the machine otherwise idle: reranked vs plain beam-10 decoding of the whole test set (wall
# seconds of the command, model loading included), the labeler over HAN as documents first, then
# enc+dec-rec (x̂ from the external generator); plain and reranked alternate (SPEED_REPEATS each)
speed() {   # NAME RUN [translate options]
  local n=$1 run=$2; shift 2
  for r in $(seq "${SPEED_REPEATS:-2}"); do
    for mode in plain reranked; do
      extra=(); [ $mode = reranked ] && extra=(--rerank reconstructor)
      t0=$(date +%s%N)
      $DT -q translate -c "$run/last.pt" -i "$PREP/test.tok.zh" --input-format tok --beam 10 --threads 2 \
        -o "$E/speed.$n.$mode.hyp" "$@" "${extra[@]}" || echo "$n $mode failed"
      echo "$n $mode $(( ($(date +%s%N) - t0) / 1000000 )) ms" | tee -a "$OUTD/speed.txt"
    done
  done
}
if has rec_joint_labeler_han_pd; then
  speed labeler_han "$R/rec_joint_labeler_han_pd" --docs "$PREP/test.docs"; fi
if has rec_both; then
  speed rec_both "$R/rec_both" --dp-generator "$W/gen.pt" --docs "$PREP/test.docs"; fi
date -u; ls -la "$OUTD"
