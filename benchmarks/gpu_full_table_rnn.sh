#!/usr/bin/env bash
# Issue 74's RNN rows (pipelines/full_table.yaml: rnnsearch, hrnn, multi_encoder_cache, isg) on one
# lent GPU (the `device` tool; nothing here needs one — on a CPU it runs, slowly: DEVICE=cpu and a
# tiny prepared slice make its smoke test). Every stage is bounded by TOTAL_S seconds from the start
# (`timeout`, SIGTERM: a training writes last.pt and stops), and what finished is always left in OUT.
#
#   bash benchmarks/gpu_full_table_rnn.sh CARRY OUT [STAGE1_MIN] [STEPS] [TOTAL_S] [TABLE_S] [SHAPE]
#   bash benchmarks/gpu_full_table_rnn.sh --unpack OUT DEST     # (here) the weights that came back
#
# Device call (the tree ≤ 64 MiB with CARRY: doctrans/shipped/*.pt, 78 MB, moved out of the tree and
# the index first, as journal 2026-11-28-whole-corpus-gpu-3 did; nothing here reads them):
#   run: bash benchmarks/gpu_full_table_rnn.sh .carry_rnn $OUT 2>&1 | tee $OUT/log.txt   (timeout_s 600,
#        carry [".carry_rnn"], the folder ignored in .git/info/exclude)
#
# 1. Stage 1: RNNSearch of pipelines/rnnsearch/SHAPE.yaml (default small: E = H = 256, Adam) on the
#    whole corpus for STAGE1_MIN minutes of training (default 3.5: ≈ 4 min of the call with data
#    loading and saving), MAX_TOKENS-token batches (default 16384), fp32 with TF32 matmuls
#    (TORCH_ALLOW_TF32_CUBLAS_OVERRIDE). Small, not the papers' base (E 620, H 1000; SHAPE=base),
#    because a row's weights must come back: base is ≈ 54M parameters with this corpus'
#    vocabularies, 108 MB in fp16 a row, more than one call returns (8 files, 64 MiB); small is
#    ≈ 12M, 24 MB. On an idle GPU the RNN step is launch-bound, so base would cost about the
#    same per update. CARRY/stage1.pt (fp16 is enough): stage 1 starts from those weights
#    (train.init_from; a previous call's stage1 that came back) or, with STAGE1_MIN 0, is them.
# 2. Stage 2, side by side, each from stage 1's last.pt for STEPS updates (default 200) or until
#    the time left for training runs out (train.warmup 50, eval only at the end, the rest of
#    small.yaml's recipe, SHAPE's model section): the Makefile's rnn-context-table rows that say most —
#      rnnsearch               RNNSearch continued (the control)
#      hrnn_init_both          +Init_enc+dec   (thesis Table 3.4: the summary D initialises encoder and decoder)
#      hrnn_gating             +Gating Auxi    (Table 3.4: D through the context gate into GRU_2)
#      hrnn_combination        Combination     (Table 3.4: both; the thesis' best)
#      multi_encoder           MULTI           (§3.6 / Table 3.9, baseline frozen)
#      cache                   CACHE           (§3.6 / Table 3.9, Tu et al. 2018's continuous cache, frozen)
#      hrnn_combination_frozen OURS            (§3.6 / Table 3.9, Combination with the baseline frozen)
#      isg                     NMT_ISG         (Kuang & Xiong 2018; +NULL, +z=0, +RV: its test-time ablations)
#    ROWS="…" trains a subset (rnnsearch first). Rows that do not all reach STEPS are tabulated at
#    the last update every row kept a checkpoint of (SAVE = 50 apart; the `updates` column).
# 3. The table: every row translates the TVsub test as documents (beam BEAM, default 10 as the
#    thesis) in its own process, side by side, then one `doctrans table context` over them (3
#    references, bootstrap against the control; the sections of `make rnn-context-table`: thesis
#    Table 3.4, Table 3.9 with BASE = stage 1, S3 Table 1), then, when USAGE_MIN_S seconds (90)
#    are left and USAGE is not 0, the context-usage table (`--usage`: CXMI, contrastive pronouns;
#    needs CARRY/jieba.tgz and CARRY/contrastive) appended. Rows share the GPU throughout: the
#    train tok/s and decode sent/s columns are not speed figures.
# Resumable: run it again on the same warm machine (same WORK, default /tmp/gpu_rnn) and every
# stage continues — stage 1 by STAGE1_MIN more minutes (0: as it is), the rows to STEPS (restarted
# when stage 1 moved on), translations reused; across machines, carry stage1.pt.
#
# CARRY (benchmarks/gpu_full_table_rnn_carry.sh PREP_FULL CARRY; never committed):
#   prep.tar.xz   the prepared whole corpus (train/dev/test .bpe.*, train.target, .docs, test.tok.{zh,en},
#                 dev.tok.en, vocab.*, bpe.codes.*, meta.json)
#   tvsub/test/   the TVsub test files (test.ref.sgm's 3 references, test.seg.zh and
#                 test.oracle-dp.seg.zh for DP recall and the contrastive set)
#   contrastive/  the contrastive pronoun set (doctrans contrastive build; for USAGE)
#   whl/*.whl, site/, jieba.tgz   packages the GPU image lacks (gpu_carry_env.sh)
#   stage1.pt     optional (above)
# OUT receives (at most 8 files, ≤ 16 MiB each, 64 MiB in all — the device's limits):
#   log.txt       from the caller's tee
#   table.md      the tables (or why they are missing), headed by what ran: shape, updates, rows
#   runs.tgz      stage1/ and rows/NAME/: metrics.jsonl, config.yaml, train.log, the process logs;
#                 table/: every row's hypothesis, rows.json, the logs
#   weights.tar.part-aa …  (≤ 15 MiB each; `--unpack OUT DEST` joins them) the rows' weights in fp16,
#                 in the order BACK (default stage1, the three frozen rows, Combination, NMT_ISG,
#                 the control, Gating, Init) while they fit in WEIGHTS_MIB (default 56); a row that
#                 shares tensors with stage 1 (the frozen rows) is kept as its other tensors only
#                 (NAME.delta.fp16.pt), made whole again by --unpack; weights.txt in it lists what
#                 was left out.
# Environment: DEVICE (auto), MAX_TOKENS (16384), BEAM (10), ROWS, USAGE (auto | 0 | 1), WORK,
#   SAVE (50: rows keep a checkpoint every SAVE updates), LOAD_S (30: the rows' train.max_time_min is
#   what is left for stage 2 less this, for loading the data; slower loading meets the guard, SIGTERM,
#   last.pt), S2_MIN_S (60: less time than this for stage 2 skips it), FINAL_S (45: of TABLE_S (150),
#   for the one-process table after the translations), PACK_S (30: the weights at the end), S1_SET /
#   S2_SET (more KEY=VALUE overrides), WEIGHTS_MIB, BACK.
# Budget at the defaults (TOTAL_S 540, untried on a GPU): ≈ 15 s unpacking, ≈ 4 min stage 1, ≈ 110 s
# stage 2, 150 s table (a CACHE row decodes sentence m of both test documents after sentence m − 1:
# 824 small beam-10 batches, the slowest translation), 30 s packing.
set -uo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)

if [ "${1:-}" = --unpack ]; then     # here: OUT's weights.tar.part-* → DEST/NAME.fp16.pt (deltas made whole)
  B=$(realpath "${2:?OUT}"); D=${3:?DEST}; mkdir -p "$D"; D=$(realpath "$D")
  cat "$B"/weights.tar.part-* | tar xf - -C "$D" || exit 1
  PY=${PYTHON:-$ROOT/.venv/bin/python}
  PYTHONPATH=$ROOT${PYTHONPATH:+:$PYTHONPATH} $PY - "$D" <<'PYEOF' || exit 1
import sys, torch
from pathlib import Path
from doctrans.runtime.checkpoint_digest import with_digest
D = Path(sys.argv[1])
for f in sorted(D.glob("*.delta.fp16.pt")):
    ck = torch.load(f, map_location="cpu", weights_only=True)
    base = torch.load(D / f"{ck.pop('delta_of')}.fp16.pt", map_location="cpu", weights_only=True)["model"]
    keys, own = ck.pop("delta_keys"), ck["model"]      # key → stage 1's key ("" = its own tensor)
    ck["model"] = {k: base[b] if b else own[k] for k, b in keys.items()}
    out = D / f.name.replace(".delta.fp16.pt", ".fp16.pt")
    torch.save(with_digest(ck), out)
    f.unlink()
    print(f"{out.name}: {len(keys)} tensors, {len(own)} of them its own, the rest stage 1's")
PYEOF
  cat "$D/weights.txt" 2>/dev/null; ls -la "$D"; exit 0
fi

T0=$(date +%s)
C=$(realpath "${1:?CARRY}"); OUTD=$(realpath "${2:?OUT}"); S1_MIN=${3:-3.5}; STEPS=${4:-200}; TOTAL_S=${5:-540}
TABLE_S=${6:-150}; SHAPE=${7:-small}
T_END=$((T0 + TOTAL_S))
DEVICE=${DEVICE:-auto}; TOK=${MAX_TOKENS:-16384}; BEAM=${BEAM:-10}; SAVE=${SAVE:-50}
LOAD_S=${LOAD_S:-30}; S2_MIN_S=${S2_MIN_S:-60}; FINAL_S=${FINAL_S:-45}; PACK_S=${PACK_S:-30}
USAGE=${USAGE:-auto}; USAGE_MIN_S=${USAGE_MIN_S:-90}; WEIGHTS_MIB=${WEIGHTS_MIB:-56}
export TORCH_ALLOW_TF32_CUBLAS_OVERRIDE=1       # the decoder's GRU cells and linears in TF32 (cuDNN's GRU is already)
GPU_IMPORTS="subword_nmt sacremoses click sacrebleu opencc"
[ -f "$C/jieba.tgz" ] && GPU_IMPORTS="$GPU_IMPORTS jieba"
. "$ROOT/benchmarks/gpu_lib.sh"   # PY, DT, PYTHONPATH (gpu_carry_env.sh); gpu_banner, collect_into
W=${WORK:-/tmp/gpu_rnn}; PREP=$W/prep; S1=$W/stage1; TR=$W/rows; E=$W/table
mkdir -p "$W" "$TR" "$E/runs" "$E/one"
left() { echo $((T_END - $(date +%s))); }
note() { echo "$*" | tee -a "$W/notes.md"; }
: > "$W/notes.md"
declare -A STEP WALL
read_states() {    # CKPT…: STEP[CKPT], WALL[CKPT] (TrainState step, wall_time_s; 0 0 without it), one torch import
  local f s w
  while read -r f s w; do STEP[$f]=$s; WALL[$f]=$w; done < <($PY - "$@" <<'PYEOF'
import sys, torch
for f in sys.argv[1:]:
    try:
        st = torch.load(f, map_location="cpu", weights_only=False, mmap=True)["state"]
        print(f, st["step"], st["wall_time_s"])
    except Exception:
        print(f, 0, 0)
PYEOF
)
}
minutes() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.3f", (a + b) / 60 }'; }    # SECONDS SECONDS → minutes

finish_out() {     # runs.tgz and table.md's head; always the last thing (also after a failure)
  collect_into "$W" runs.tgz 'notes.md stage1.log stage1/metrics.jsonl stage1/config.yaml stage1/train.log
    rows/*.log rows/*/metrics.jsonl rows/*/config.yaml rows/*/train.log table/*.log table/*.hyp table/*.json
    table/one table/uone table/*.md'
  { echo "# RNN rows of issue 74's table on one GPU (benchmarks/gpu_full_table_rnn.sh)"; echo
    sed 's/^/- /' "$W/notes.md"; echo
    if [ -f "$E/table.md" ]; then cat "$E/table.md"; else echo "(no table: see the notes above and log.txt)"; fi
    if [ -f "$E/usage.md" ]; then echo; echo "## Context usage (doctrans table context --usage)"; echo; cat "$E/usage.md"; fi
  } > "$OUTD/table.md"
  date -u; ls -la "$OUTD"
}

# -- unpack (a warm rerun keeps the prepared data) -------------------------------------------------
if [ ! -f "$PREP/meta.json" ]; then
  mkdir -p "$PREP"; tar xJf "$C/prep.tar.xz" -C "$PREP" || { note "prep.tar.xz did not unpack"; finish_out; exit 1; }
fi
gpu_banner
gpu=$(nvidia-smi -L 2>/dev/null | head -1); commit=$(git -C "$ROOT" rev-parse --short HEAD 2>/dev/null)
note "${gpu:-no GPU (DEVICE $DEVICE)}; commit ${commit:-unknown}; $(date -u '+%F %T') UTC; SHAPE $SHAPE, MAX_TOKENS $TOK, beam $BEAM, STAGE1_MIN $S1_MIN, STEPS $STEPS, TOTAL_S $TOTAL_S, TABLE_S $TABLE_S"
# the shape's model section as overrides (stage-2 YAMLs extend small.yaml: SHAPE's sizes given again)
SHAPE_SET=$($PY - "$ROOT/pipelines/rnnsearch/$SHAPE.yaml" <<'PYEOF'
import sys
from doctrans.config import load_yaml_tree
from pathlib import Path
m = load_yaml_tree(Path(sys.argv[1])).get("model", {})
print(" ".join(f"model.{k}={str(v).lower() if isinstance(v, bool) else v}" for k, v in m.items() if not isinstance(v, dict)))
PYEOF
) || { note "pipelines/rnnsearch/$SHAPE.yaml: not readable"; finish_out; exit 1; }

# -- stage 1 ----------------------------------------------------------------------------------------
if [ -f "$C/stage1.pt" ] && [ ! -f "$W/stage1_init.pt" ]; then     # fp16 → fp32 before anything reads it
  $PY - "$C/stage1.pt" "$W/stage1_init.pt" <<'PYEOF' || { note "CARRY/stage1.pt unreadable"; finish_out; exit 1; }
import sys, torch
from doctrans.runtime.checkpoint_digest import with_digest
ck = torch.load(sys.argv[1], map_location="cpu", weights_only=False)
ck["model"] = {k: (v.float() if v.is_floating_point() else v) for k, v in ck["model"].items()}
ck.pop("digest", None)
torch.save(with_digest(ck), sys.argv[2])
PYEOF
fi
if [ "$S1_MIN" = 0 ] && [ ! -f "$S1/last.pt" ] && [ -f "$W/stage1_init.pt" ]; then
  mkdir -p "$S1"; cp "$W/stage1_init.pt" "$S1/last.pt"; touch "$S1/metrics.jsonl"
  read_states "$S1/last.pt"; note "stage 1: CARRY/stage1.pt as it is (update ${STEP[$S1/last.pt]})"
elif [ "$S1_MIN" != 0 ]; then
  g1=$(( $(left) - TABLE_S - PACK_S - S2_MIN_S ))
  cap=$(awk -v m="$S1_MIN" -v l="$LOAD_S" -v g="$g1" 'BEGIN { c = m * 60 + l; printf "%d", c < g ? c : g }')
  if [ "$g1" -lt 30 ]; then note "stage 1: skipped, ${g1} s left for it"; else
    RES=(); INIT=()
    if [ -f "$S1/last.pt" ]; then RES=(--resume)
    elif [ -f "$W/stage1_init.pt" ]; then INIT=(train.init_from="$W/stage1_init.pt"); read_states "$W/stage1_init.pt"
      note "stage 1 starts from CARRY/stage1.pt (its update ${STEP[$W/stage1_init.pt]}; BASE's updates count from there)"; fi
    read_states "$S1/last.pt"; mt=$(minutes "${WALL[$S1/last.pt]}" "$(awk -v m="$S1_MIN" 'BEGIN { print m * 60 }')")
    echo "== stage 1: $SHAPE, train.max_time_min=$mt, guard ${cap} s"; date -u
    (cd "$ROOT" && exec timeout -s TERM -k 30 "$cap" $DT train "pipelines/rnnsearch/$SHAPE.yaml" data.prepared="$PREP" \
       run_dir="$S1" train.device="$DEVICE" train.max_time_min="$mt" train.max_tokens="$TOK" train.max_steps=0 \
       train.max_epochs=0 train.eval_every=500 train.eval_bleu=false train.metric=xent_nats train.metric_mode=min \
       train.save_every=250 train.keep_last=0 train.threads=4 train.tensorboard=false train.plot=false \
       "${INIT[@]}" ${S1_SET:-} "${RES[@]}") >> "$W/stage1.log" 2>&1
    rc=$?; echo "== stage 1 exit $rc"; tail -4 "$W/stage1.log"
  fi
fi
read_states "$S1/last.pt"; s1_step=${STEP[$S1/last.pt]}
if [ "$s1_step" = 0 ]; then note "stage 1: no last.pt (see stage1.log in runs.tgz): nothing to tabulate"; finish_out; exit 1; fi
note "stage 1 (BASE): RNNSearch $SHAPE, $s1_step updates in $(minutes "${WALL[$S1/last.pt]}" 0) min of training, $(grep '"kind": "dev"' "$S1/metrics.jsonl" 2>/dev/null | tail -1 | grep -o '"step": [0-9]*\|"xent_nats": [0-9.]*' | cut -d' ' -f2 | xargs printf '%s %s' | awk 'NF == 2 {printf "last dev xent %.3f nats (update %s)", $2, $1} NF < 2 {printf "no dev evaluation"}')"

# -- stage 2: the rows, side by side ----------------------------------------------------------------
declare -A CFG=([rnnsearch]=pipelines/rnnsearch/small.yaml)
for n in hrnn_init_both hrnn_gating hrnn_combination multi_encoder cache hrnn_combination_frozen isg; do
  CFG[$n]=pipelines/context/$n.yaml; done
declare -A NAME=([rnnsearch]=RNNSearch [hrnn_init_both]=+Init_enc+dec [hrnn_gating]="+Gating Auxi"
  [hrnn_combination]=Combination [multi_encoder]=MULTI [cache]=CACHE [hrnn_combination_frozen]=OURS [isg]=NMT_ISG)
ORDER=$(echo ${ROWS:-rnnsearch hrnn_init_both hrnn_gating hrnn_combination multi_encoder cache hrnn_combination_frozen isg})
if [ "$(cat "$TR/.stage1_step" 2>/dev/null)" != "$s1_step" ]; then   # rows of an older stage 1 start again
  rm -rf "${TR:?}"/*; echo "$s1_step" > "$TR/.stage1_step"; fi
declare -A PID
trans_row() {   # NAME RUN [--context-option …]: one row's test translation into E (reused by the table)
  local n=$1 run=$2; shift 2
  (cd "$ROOT" && exec timeout -s TERM -k 10 "$TG" $DT table context --prepared "$PREP" --data "$C/tvsub" \
     --beam "$BEAM" --threads 1 --bootstrap 1 --work "$E" --out "$E/one/${n//[^A-Za-z0-9._-]/_}.md" \
     --system "$n=$run" "$@") > "$E/one/${n//[^A-Za-z0-9._-]/_}.log" 2>&1
}
mkdir -p "$E/runs/BASE"; for f in last.pt config.yaml metrics.jsonl; do ln -sf "$S1/$f" "$E/runs/BASE/$f"; done
g2=$(( $(left) - TABLE_S - PACK_S ))
if [ "$g2" -lt "$S2_MIN_S" ]; then note "stage 2: skipped, ${g2} s left for it (S2_MIN_S $S2_MIN_S)"; ORDER=""; fi
TG=$(( $(left) - PACK_S - FINAL_S )); [ "$TG" -lt 1 ] && TG=1
trans_row BASE "$E/runs/BASE" & BASE_PID=$!     # BASE translates meanwhile
COMMON=(data.prepared="$PREP" train.init_from="$S1/last.pt" train.max_steps="$STEPS" train.warmup=50
  train.max_tokens="$TOK" train.save_every="$SAVE" train.keep_every="$SAVE" train.keep_last=1 train.eval_every=0 train.eval_bleu=false
  train.metric=xent_nats train.metric_mode=min train.log_every=25 train.threads=1 train.tensorboard=false
  train.plot=false train.device="$DEVICE")
read_states $(for n in $ORDER; do echo "$TR/$n/last.pt"; done)
for n in $ORDER; do
  [ -n "${CFG[$n]:-}" ] || { note "ROWS: unknown row $n"; continue; }
  RES=(); [ -f "$TR/$n/last.pt" ] && RES=(--resume)
  mt=$(minutes "${WALL[$TR/$n/last.pt]}" "$(( g2 - LOAD_S > 12 ? g2 - LOAD_S : 12 ))")
  (cd "$ROOT" && exec timeout -s TERM -k 20 "$g2" $DT train "${CFG[$n]}" "${COMMON[@]}" $SHAPE_SET \
     train.max_time_min="$mt" run_dir="$TR/$n" ${S2_SET:-} "${RES[@]}") >> "$TR/$n.log" 2>&1 &
  PID[$n]=$!
done
[ -n "$ORDER" ] && echo "== stage 2: $ORDER; guard ${g2} s" && date -u
for n in $ORDER; do [ -n "${PID[$n]:-}" ] && { wait "${PID[$n]}"; echo "== $n exit $?"; }; done
read_states $(for n in $ORDER; do echo "$TR/$n/last.pt"; done)
TRAINED=""; for n in $ORDER; do [ -f "$TR/$n/last.pt" ] && TRAINED="$TRAINED $n"; done
for n in $ORDER; do [[ " $TRAINED " == *" $n "* ]] || note "row $n: did not train (rows/$n.log in runs.tgz)"; done
S=0
if [ -n "$TRAINED" ]; then
  S=$(equal_update_point $(for n in $TRAINED; do echo "$TR/$n"; done))
  [ "$S" -ge "$STEPS" ] && S=$STEPS
fi
if [ -n "$TRAINED" ] && [ "$S" = 0 ]; then note "stage 2: no update kept by every row (SAVE $SAVE)"; TRAINED=""; fi
ROWS_OK=""
for n in $TRAINED; do
  mkdir -p "$E/runs/$n"; ln -sf "$TR/$n/config.yaml" "$E/runs/$n/config.yaml"; ln -sf "$TR/$n/metrics.jsonl" "$E/runs/$n/metrics.jsonl"
  ln -sf "$TR/$n/checkpoint$S.pt" "$E/runs/$n/last.pt"; ROWS_OK="$ROWS_OK $n"
done
[ -n "$ROWS_OK" ] && note "stage 2: $(echo $ROWS_OK | wc -w) rows, each $S updates from stage 1 (STEPS $STEPS; reached: $(for n in $ROWS_OK; do printf '%s %s, ' "$n" "${STEP[$TR/$n/last.pt]}"; done | sed 's/, $//'))"

# -- the table ---------------------------------------------------------------------------------------
rm -f "$E/table.md" "$E/usage.md" "$E"/one/*.md    # (a rerun's: this call's tables only)
TG=$(( $(left) - PACK_S - FINAL_S )); [ "$TG" -lt 1 ] && TG=1
echo "== translating:$ROWS_OK (+NULL +z=0 +RV with isg), guard ${TG} s"; date -u
TP=()
for n in $ROWS_OK; do trans_row "${NAME[$n]}" "$E/runs/$n" & TP+=($!); done
if [[ " $ROWS_OK " == *" isg "* ]]; then
  for a in "+NULL:null" "+z=0:zero" "+RV:random"; do
    trans_row "${a%%:*}" "$E/runs/isg" --context-option "${a%%:*}:test_ablation=${a#*:}" & TP+=($!); done
fi
wait "$BASE_PID"; for p in "${TP[@]}"; do wait "$p"; done
done_row() { [ -f "$E/test.${1//[^A-Za-z0-9._-]/_}.json" ]; }   # its translation finished (the table reuses it)
SYS=(); OPTS=(); HAVE=""
add() { done_row "$1" || { note "row $1: translation unfinished (table/one/*.log)"; return; }
        SYS+=(--system "$1=$2"); HAVE="$HAVE|$1|"; }
for n in $ROWS_OK; do [ "$n" = rnnsearch ] && add RNNSearch "$E/runs/rnnsearch"; done    # the control first
add BASE "$E/runs/BASE"
for n in $ROWS_OK; do [ "$n" != rnnsearch ] && add "${NAME[$n]}" "$E/runs/$n"; done
if [[ "$HAVE" == *"|NMT_ISG|"* ]]; then
  for a in "+NULL:null" "+z=0:zero" "+RV:random"; do
    done_row "${a%%:*}" && { add "${a%%:*}" "$E/runs/isg"; OPTS+=(--context-option "${a%%:*}:test_ablation=${a#*:}"); }
  done
fi
section() {     # MIN TITLE NAME…: a --table of the rows present, when MIN of them are (its first is its reference)
  local k=$1 t=$2 m=""; shift 2
  for r in "$@"; do [[ "$HAVE" == *"|$r|"* ]] && m="$m,$r"; done
  [ "$(echo "${m#,}" | tr ',' '\n' | grep -c .)" -ge "$k" ] && TABLES+=(--table "$t=${m#,}") && SHOWN="$SHOWN${m},"
}
TABLES=(); SHOWN=","
section 2 "Thesis Table 3.4 (HRNN strategies, nothing frozen)" RNNSearch +Init_enc+dec "+Gating Auxi" Combination
section 2 "Thesis Table 3.9 (§3.6: baseline frozen; BASE is stage 1)" BASE MULTI CACHE OURS
section 2 "S3 Table 1 (NMT_ISG and its test-time ablations)" RNNSearch NMT_ISG +NULL +z=0 +RV
REST=(); for r in $(echo "$HAVE" | tr '|' '\n' | grep . | tr ' ' '~'); do   # rows no section shows (a ROWS subset)
  [[ "$SHOWN" == *",${r//\~/ },"* ]] || REST+=("${r//\~/ }"); done
[ ${#TABLES[@]} -gt 0 ] && [ ${#REST[@]} -gt 0 ] && section 1 "The other rows" "${REST[@]}"
TF=$(( $(left) - PACK_S )); [ "$TF" -lt 1 ] && TF=1
echo "== table of ${#SYS[@]} / 2 rows, guard ${TF} s"; date -u
(cd "$ROOT" && exec timeout -s TERM -k 10 "$TF" $DT table context --prepared "$PREP" --data "$C/tvsub" --beam "$BEAM" \
   --threads 2 --work "$E" --out "$E/table.md" "${SYS[@]}" "${OPTS[@]}" "${TABLES[@]}") > "$E/table.log" 2>&1
echo "== table exit $?"; tail -3 "$E/table.log"
[ -f "$E/table.md" ] && cp "$E/rows.json" "$E/rows.main.json"
if [ ! -f "$E/table.md" ]; then     # the one-row tables the translations wrote, as they are
  note "the table did not finish within its ${TF} s: table.md holds each row's own one-row table"
  for f in "$E"/one/*.md; do [ -f "$f" ] && { cat "$f"; echo; }; done > "$E/table.rows.md"
  [ -s "$E/table.rows.md" ] && mv "$E/table.rows.md" "$E/table.md"
fi
# context usage: the rows as trained (no test-time ablations); each row's contrastive scores side by side first
# (kept in the set's scores/ for the table), then one table (its CXMI again, McNemar against the control)
TU=$(( $(left) - PACK_S ))
if [ "$USAGE" != 0 ] && [ -d "$C/contrastive" ] && [ -f "$C/jieba.tgz" ] && { [ "$USAGE" = 1 ] || [ "$TU" -ge "$USAGE_MIN_S" ]; }; then
  [ -d "$W/contrastive" ] || cp -r "$C/contrastive" "$W/contrastive"
  mkdir -p "$E/uone"; rm -f "$E"/uone/*.md
  U=(); TP=()
  for i in $(seq 0 2 $((${#SYS[@]} - 1))); do
    v=${SYS[$((i + 1))]}; n=${v%=*}
    case $n in +NULL|+z=0|+RV) continue;; esac
    U+=(--system "$v")
    (cd "$ROOT" && exec timeout -s TERM -k 10 $(( TU - FINAL_S > 1 ? TU - FINAL_S : 1 )) $DT table context --prepared "$PREP" \
       --data "$C/tvsub" --beam "$BEAM" --threads 1 --bootstrap 1 --usage --contrastive "$W/contrastive" --work "$E" \
       --out "$E/uone/${n//[^A-Za-z0-9._-]/_}.md" --system "$v") > "$E/uone/${n//[^A-Za-z0-9._-]/_}.log" 2>&1 & TP+=($!)
  done
  echo "== usage of $(( ${#U[@]} / 2 )) rows, guard ${TU} s"; date -u
  for p in "${TP[@]}"; do wait "$p"; done
  TU=$(( $(left) - PACK_S )); [ "$TU" -lt 1 ] && TU=1
  (cd "$ROOT" && exec timeout -s TERM -k 10 "$TU" $DT table context --prepared "$PREP" --data "$C/tvsub" --beam "$BEAM" \
     --threads 2 --usage --contrastive "$W/contrastive" --work "$E" --out "$E/usage.md" "${U[@]}") > "$E/usage.log" 2>&1
  echo "== usage table exit $?"; tail -2 "$E/usage.log"
  if [ ! -f "$E/usage.md" ]; then
    note "the usage table did not finish within its ${TU} s: its section holds each row's own one-row table"
    for f in "$E"/uone/*.md; do [ -f "$f" ] && { cat "$f"; echo; }; done > "$E/usage.rows.md"
    [ -s "$E/usage.rows.md" ] && mv "$E/usage.rows.md" "$E/usage.md"
  fi
  [ -f "$E/rows.json" ] && cp "$E/rows.json" "$E/rows.usage.json"; [ -f "$E/rows.main.json" ] && cp "$E/rows.main.json" "$E/rows.json"
else
  note "no usage table (USAGE $USAGE, $TU s left, contrastive set and jieba carried: $([ -d "$C/contrastive" ] && [ -f "$C/jieba.tgz" ] && echo yes || echo no))"
fi

# -- the weights back: fp16, in BACK's order while they fit, then split -------------------------------
BACK=${BACK:-"stage1 multi_encoder cache hrnn_combination_frozen hrnn_combination isg rnnsearch hrnn_gating hrnn_init_both"}
LIST=(); for n in $BACK; do
  if [ "$n" = stage1 ]; then LIST+=("stage1=$S1/last.pt"); elif [[ " $ROWS_OK " == *" $n "* ]]; then LIST+=("$n=$E/runs/$n/last.pt"); fi
done
mkdir -p "$W/back"; rm -f "$W"/back/*
$PY - "$W/back" "$WEIGHTS_MIB" "${LIST[@]}" <<'PYEOF' || note "the weights were not packed (log.txt)"
import sys, io, torch
from pathlib import Path
from doctrans.runtime.shipping import half_weights
from doctrans.runtime.checkpoint_digest import with_digest
out, budget = Path(sys.argv[1]), float(sys.argv[2]) * 2**20
used, kept, left_out, base = 0, [], [], None
for item in sys.argv[3:]:
    name, path = item.split("=", 1)
    ck = torch.load(path, map_location="cpu", weights_only=False)
    for k in ("optimizer", "rng", "rng_ranks", "digest"):
        ck.pop(k, None)
    ck["model"] = half_weights(ck["model"], path)
    fname = f"{name}.fp16.pt"
    if base is not None:      # tensors equal to stage 1's (a frozen backbone: backbone.K = K) are left to --unpack
        from_base = {}
        for k, v in ck["model"].items():
            b = k if k in base else k.removeprefix("backbone.")
            if b in base and base[b].shape == v.shape and base[b].dtype == v.dtype and torch.equal(base[b], v):
                from_base[k] = b
        if from_base:
            ck = {**ck, "model": {k: v for k, v in ck["model"].items() if k not in from_base},
                  "delta_of": "stage1", "delta_keys": {k: from_base.get(k, "") for k in ck["model"]}}
            fname = f"{name}.delta.fp16.pt"
    buf = io.BytesIO(); torch.save(ck if "delta_of" in ck else with_digest(ck), buf)
    size = buf.tell()
    if used + size > budget:
        left_out.append(f"{name} ({size / 2**20:.1f} MiB)"); continue
    (out / fname).write_bytes(buf.getvalue()); used += size; kept.append(f"{fname} {size / 2**20:.1f} MiB")
    if name == "stage1":
        base = ck["model"]
    print(f"packed {fname}: {size / 2**20:.1f} MiB")
(out / "weights.txt").write_text("in this tar: " + ", ".join(kept) + "\nleft out (WEIGHTS_MIB): "
                                 + (", ".join(left_out) or "none") + "\n")
print((out / "weights.txt").read_text(), end="")
PYEOF
if ls "$W"/back/*.pt >/dev/null 2>&1; then
  (cd "$W/back" && tar cf - * | split -b 15M - "$OUTD/weights.tar.part-")
  note "weights: $(head -1 "$W/back/weights.txt"); $(tail -1 "$W/back/weights.txt")"
fi
echo "== done in $(( $(date +%s) - T0 )) s of $TOTAL_S"
finish_out
