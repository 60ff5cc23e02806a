"""Which checkpoint of a run to translate with (issue 18): the candidates of one training run at
the same update budget, each scored on TVsub dev (1 reference, greedy and beam) and test
(3 references, beam, the thesis setting), so the selection rule is chosen by measurement.

    python benchmarks/checkpoint_selection.py --run RUN [--prepared PREP] [--data TVSUB]
        [--beam 5] [--threads 2] [--append docs/journal/DATE-topic.md]

Candidates: ``last.pt``; ``best.pt`` (the trainer's choice under the run's ``train.metric``,
dev BLEU greedy by default); the dev evaluation with the lowest cross-entropy (metrics.jsonl),
if its ``checkpoint{STEP}.pt`` (``train.keep_last``) or ``last.pt`` holds it; the average of the
last 3 and of the last 5 ``checkpoint{STEP}.pt`` (fairseq's ``average_checkpoints``; Vaswani et
al. 2017 average the last 5). Inputs are PREP/{dev,test}.tok.zh (``input_format=tok``);
references DATA/{dev/dev,test/test}.ref.sgm; BLEU ``bleu_tok_lc`` (case-insensitive, tokenized),
sacreBLEU detokenized on test, paired bootstrap of each candidate's test output against
``last.pt``'s.
"""
from __future__ import annotations

import argparse
import datetime
import os
import platform
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

import torch  # noqa: E402
from _common import set_threads  # noqa: E402

from doctrans.evaluation.score import ScoreConfig, score_files  # noqa: E402
from doctrans.inference.translate import TranslateConfig, Translator  # noqa: E402
from doctrans.training.checkpoint import average_checkpoints, step_checkpoints
from doctrans.runtime.checkpoint import load_checkpoint  # noqa: E402
from doctrans.runtime.checkpoint_write import save_checkpoint  # noqa: E402
from doctrans.training.metrics import read_metrics  # noqa: E402
from doctrans.utils.io import atomic_write_lines, read_lines  # noqa: E402


def candidates(run: Path, work: Path) -> list[tuple[str, Path]]:
    out = [("last", run / "last.pt"), ("best (train.metric)", run / "best.pt")]
    dev = [r for r in read_metrics(run / "metrics.jsonl") if r.get("kind") == "dev" and "xent_nats" in r]
    kept = {int(p.stem[len("checkpoint"):]): p for p in step_checkpoints(run)}
    last_step = load_checkpoint(run / "last.pt")["state"]["step"]
    if dev:
        best = min(dev, key=lambda r: r["xent_nats"])
        path = kept.get(best["step"]) or (run / "last.pt" if best["step"] == last_step else None)
        if path is not None:
            out.append((f"lowest dev xent (step {best['step']})", path))
    for k in (3, 5):
        if len(kept) >= k:
            paths = [kept[s] for s in sorted(kept)[-k:]]
            dst = work / f"avg{k}.pt"
            save_checkpoint(average_checkpoints(paths), dst)
            out.append((f"average of last {k} ({', '.join(str(s) for s in sorted(kept)[-k:])})", dst))
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--run", required=True)
    ap.add_argument("--prepared", default="data/quickstart")
    ap.add_argument("--data", default="../shared/corpora/tvsub")
    ap.add_argument("--work", default="")
    ap.add_argument("--beam", type=int, default=5)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--append", default="")
    a = ap.parse_args()
    set_threads(a.threads)
    run, prep, data = Path(a.run), Path(a.prepared), Path(a.data)
    work = Path(a.work or run / "selection")
    work.mkdir(parents=True, exist_ok=True)
    t_start, load0 = time.perf_counter(), os.getloadavg()[0]
    rows, base_hyp = [], None
    for name, ckpt in candidates(run, work):
        step = load_checkpoint(ckpt)["state"]["step"]
        row = {"name": name, "step": step}
        for split, beam in (("dev", 1), ("dev", a.beam), ("test", a.beam)):
            tr = Translator(TranslateConfig(checkpoint=str(ckpt), input_format="tok", tokenized=True, beam=beam,
                                            threads=a.threads))
            hyp = work / f"{split}.{ckpt.stem}.b{beam}.hyp"
            atomic_write_lines(hyp, tr.translate(read_lines(prep / f"{split}.tok.zh")))
            ref = str(data / split / f"{split}.ref.sgm")
            is_test = split == "test"
            res = score_files(ScoreConfig(hyp=str(hyp), refs=(ref,), hyp_tokenized=True,
                                          metrics=("bleu_tok_lc", "sacrebleu") if is_test else ("bleu_tok_lc",),
                                          baseline=str(base_hyp) if is_test and base_hyp else None))
            row[f"{split}_b{beam}"] = res["bleu_tok_lc"]["score"]
            if is_test:
                row["sacrebleu"] = res["sacrebleu"]["score"]
                row["p"] = res.get("significance", {}).get("paired_bootstrap", {}).get("p_value")
                base_hyp = base_hyp or hyp
        rows.append(row)
        print(row, flush=True)
    lines = [f"| candidate | update | dev BLEU greedy | dev BLEU beam {a.beam} | test BLEU beam {a.beam} (3 refs) "
             "| bootstrap p vs last | test sacreBLEU |", "| --- | ---: | ---: | ---: | ---: | ---: | ---: |"]
    for r in rows:
        p = "—" if r["p"] is None else f"{r['p']:.3f}"
        lines.append(f"| {r['name']} | {r['step']} | {r['dev_b1']:.2f} | {r[f'dev_b{a.beam}']:.2f} "
                     f"| {r[f'test_b{a.beam}']:.2f} | {p} | {r['sacrebleu']:.2f} |")
    table = "\n".join(lines) + "\n"
    print(table)
    if a.append:
        head = (f"\n## Checkpoint selection on the quickstart (issue 18) — {datetime.date.today()}\n\n"
                f"- **Machine:** {os.cpu_count()} CPU cores ({platform.processor() or platform.machine()}), Python "
                f"{platform.python_version()}; load average {load0:.1f} at the start, {os.getloadavg()[0]:.1f} at the end; "
                f"{time.perf_counter() - t_start:.0f} s wall.\n"
                f"- **Command:** `python benchmarks/checkpoint_selection.py --run {a.run} --prepared {a.prepared} "
                f"--beam {a.beam} --threads {a.threads}`\n\n")
        with open(a.append, "a", encoding="utf-8") as f:
            f.write(head + table)


if __name__ == "__main__":
    main()
