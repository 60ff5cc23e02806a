# Sourced by the benchmarks/gpu_*.sh scripts after they set C (the carry directory), OUTD (what
# comes back) and ROOT (the repository): the skeleton they share.
#   gpu_carry_env.sh   PY, DT, PYTHONPATH: the packages the GPU image lacks (sourced from here)
#   gpu_unpack PREP [DIR …]   make PREP and the DIRs, unpack CARRY/prep.tar.xz into PREP (exit 1 if it fails)
#   gpu_banner         the log's head: the GPU (nvidia-smi -L), torch and CUDA, the commit, the UTC time
#   fp16_back SRC NAME [strip]   SRC's weights in fp16 as OUT/NAME.fp16.pt, split in 15 MiB parts
#                      (NAME.fp16.pt.part-aa …; `cat` them back); strip: without optimizer/rng state
#   equal_update_point RUN …   the last STEP with checkpoint{STEP}.pt in every run dir (0: none):
#                      runs from one start compared at equal updates
#   averaged RUN STEP K OUT   the weights of RUN's checkpoints STEP, STEP−KEEP, … (K of them, those kept)
#                      averaged (`doctrans average`) into OUT; K = 1 (or one kept): a copy; prints how many
#                      were averaged; exit status 1, OUT unwritten, when none of them was kept
#   test_translation DIR PREP SECONDS NAME CKPT [ARGS…]   the TVsub test (PREP/test.tok.zh, beam 5, ARGS e.g.
#                      --docs FILE) by CKPT within SECONDS → DIR/NAME.hyp and its score DIR/NAME.bleu
#                      (CARRY/tvsub/test/test.ref.sgm); nothing when CKPT is missing
#   collect_into DIR TGZ PATTERNS   the files under DIR matching PATTERNS (one quoted, space-separated
#                      string, expanded in DIR; unmatched ones skipped silently) → OUT/TGZ
. "$ROOT/benchmarks/gpu_carry_env.sh"

gpu_unpack() {
  local prep=$1; shift
  mkdir -p "$prep" "$@"
  tar xJf "$C/prep.tar.xz" -C "$prep" || exit 1
}

gpu_banner() {
  nvidia-smi -L 2>/dev/null; $PY -c "import torch; print('torch', torch.__version__, 'cuda', torch.cuda.is_available())"
  git -C "$ROOT" rev-parse --short HEAD 2>/dev/null; date -u
}

fp16_back() {
  $PY - "$1" "$OUTD/$2.fp16.pt" "${3:-}" <<'PYEOF'
import sys, torch
from doctrans.runtime.shipping import half_weights     # tied weights stay one tensor (written once)
from doctrans.runtime.checkpoint_digest import with_digest   # an edited checkpoint gets a new digest
src, dst, strip = sys.argv[1:]
ck = torch.load(src, map_location="cpu", weights_only=False)
ck["model"] = half_weights(ck["model"], src)
if strip:
    for k in ("optimizer", "rng", "rng_ranks"):
        ck.pop(k, None)
torch.save(with_digest(ck), dst)
PYEOF
  (cd "$OUTD" && split -b 15M "$2.fp16.pt" "$2.fp16.pt.part-" && rm "$2.fp16.pt")
}

equal_update_point() {
  local d n=$#
  for d in "$@"; do ls "$d" | sed -n 's/^checkpoint\([0-9]*\)\.pt$/\1/p' | sort -u; done \
    | sort -n | uniq -c | awk -v n="$n" '$1 == n { s = $2 } END { print s + 0 }'
}

averaged() {
  local run=$1 step=$2 k=$3 out=$4 i s cks=()
  for ((i = 0; i < k; i++)); do
    s=$(( step - i * ${KEEP:-100} )); [ -f "$run/checkpoint$s.pt" ] && cks+=("$run/checkpoint$s.pt")
  done
  [ ${#cks[@]} -gt 0 ] || return 1
  if [ ${#cks[@]} -eq 1 ]; then cp "${cks[0]}" "$out"; else $DT -q average "${cks[@]}" -o "$out" >/dev/null; fi
  echo "${#cks[@]}"
}

test_translation() {
  local dir=$1 prep=$2 tt=$3 n=$4 ck=$5; shift 5
  [ -f "$ck" ] || return 0
  timeout -s TERM "$tt" $DT -q translate -c "$ck" -i "$prep/test.tok.zh" --input-format tok --tokenized --beam 5 \
    -o "$dir/$n.hyp" "$@" > "$dir/$n.log" 2>&1 \
  && $DT score "$dir/$n.hyp" -r "$C/tvsub/test/test.ref.sgm" --hyp-tokenized > "$dir/$n.bleu" 2>&1
}

collect_into() {
  local dir=$1 tgz=$2; shift 2
  (cd "$dir" && tar czf "$OUTD/$tgz" $* 2>/dev/null)      # $* unquoted: the patterns expand in DIR
}
