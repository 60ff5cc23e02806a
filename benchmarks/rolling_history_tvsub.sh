#!/usr/bin/env bash
# The rolling history's cost on the real test (issue 52's speed goal: ≤ 1.3× the sentence model):
# the default shipped document model and the shipped sentence model translate the
# TVsub test as documents, alternated REPEATS times in one sitting, one torch thread each, beam 5;
# prints each run's translation time (the "translated N lines in X s" log line: model loading and
# process start excluded) and the ratio of the means.
#
# Usage: bash benchmarks/rolling_history_tvsub.sh PREP [REPEATS] [-- extra options for the document model]
#   PREP: a prepared whole-corpus dataset (`doctrans preprocess --train-docs all`; its
#   test.tok.zh and test.docs are read). Example, two history-chunk settings against each other:
#   bash benchmarks/rolling_history_tvsub.sh $PREP_FULL 3 -- --history-chunk 32 --batch-sentences 64
set -euo pipefail
PREP=${1:?usage: rolling_history_tvsub.sh PREP [REPEATS] [-- options]}
shift
REPEATS=3
if [ $# -gt 0 ] && [ "$1" != "--" ]; then REPEATS=$1; shift; fi
if [ "${1:-}" = "--" ]; then shift; fi
EXTRA=("$@")
ROOT=$(cd "$(dirname "$0")/.." && pwd)
BIN=${DOCTRANS:-$ROOT/.venv/bin/doctrans}
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
run() {   # run NAME [options] → the translation seconds
  "$BIN" translate -i "$PREP/test.tok.zh" --input-format tok --tokenized --docs "$PREP/test.docs" \
    --threads 1 --beam 5 -o "$TMP/$1.hyp" "${@:2}" > "$TMP/$1.log" 2>&1
  grep -o 'lines in [0-9.]* s' "$TMP/$1.log" | awk '{print $3}'
}
sent=() doc=()
for r in $(seq "$REPEATS"); do
  s=$(run "sent$r" --sentence); d=$(run "doc$r" "${EXTRA[@]}")
  echo "repeat $r: sentence model ${s} s, document model ${d} s"
  sent+=("$s"); doc+=("$d")
done
python3 - "${sent[*]}" "${doc[*]}" <<'EOF'
import statistics as st, sys
s, d = ([float(x) for x in a.split()] for a in sys.argv[1:3])
print(f"sentence model mean {st.mean(s):.2f} s (min {min(s):.2f}), document model mean {st.mean(d):.2f} s "
      f"(min {min(d):.2f}): ratio of means {st.mean(d) / st.mean(s):.2f}×, of minima {min(d) / min(s):.2f}×")
EOF
