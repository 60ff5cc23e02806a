#!/usr/bin/env bash
# DP-annotate the FULL prepared TVsub corpus (alignment + LM + search) and report wall time and
# peak memory (sum of RSS over the whole process tree: python, eflomal, lmplz, search workers).
# Usage: benchmarks/annotate_full.sh [PREPARED_DIR] [extra `doctrans annotate-dp` options]
#   PREPARED_DIR defaults to data/prep_full (make it with benchmarks/preprocess_full.sh).
# Writes PREPARED_DIR/dp (or -o). Run from a clean checkout (e.g. a git worktree) and keep the
# machine otherwise idle.
set -euo pipefail
cd "$(dirname "$0")/.."
PREP=${1:-data/prep_full}
shift || true
PY=${PY:-.venv/bin/python}
[ -f "$PREP/meta.json" ] || { echo "no prepared dataset at $PREP: run benchmarks/preprocess_full.sh first" >&2; exit 1; }
CMD=("$PY" -m doctrans.cli annotate-dp corpus -p "$PREP" "$@")
MEMLOG=$(mktemp "${TMPDIR:-/tmp}/annotate_full_mem.XXXXXX")
echo "machine: $(nproc) CPUs, $(free -g | awk '/^Mem:/{print $2}') GiB RAM, $(lscpu | grep 'Model name' | sed 's/Model name: *//')"
echo "date:    $(date -u +%Y-%m-%dT%H:%M:%SZ)"
echo "command: ${CMD[*]}"
start=$(date +%s.%N)
setsid "${CMD[@]}" &
pid=$!
peak=0
while kill -0 "$pid" 2>/dev/null; do
  kb=$(ps -o rss= -g "$pid" 2>/dev/null | awk '{s+=$1} END {print s+0}')
  [ "$kb" -gt "$peak" ] && peak=$kb && echo "$peak" > "$MEMLOG"
  sleep 1
done
wait "$pid"
end=$(date +%s.%N)
echo "wall: $(echo "$end - $start" | bc) s; peak RSS of the process tree: $((peak / 1024)) MiB (sampled every 1 s)"
"$PY" - "$PREP/dp/meta.json" <<'PYEOF'
import json, sys
m = json.load(open(sys.argv[1], encoding="utf-8"))
print("stage timings:", m["timings"])
PYEOF
