"""The sentence-boundary model (issue 75, ``doctrans/inference/boundaries.py``): trained on TVsub
training episodes, whose lines are sentence boundaries, and measured on the dev set glued.

Usage: python benchmarks/sentence_boundaries.py [--episodes 200] [--bits 20] [--C 1.0]
       [--threshold 0.5] [--min-words 1] [--min-run 12 [2 …]] [--seed 0] [--out MODEL.npz]
       [--json RESULTS.json] [--save-weights W.npz | --load-weights W.npz]

The shipped model: ``--episodes 200 --min-run 12 2 --out doctrans/shipped/tvsub-boundaries.npz``.

Training data: ``--episodes`` episodes of ``$TVSUB/train`` (drawn with ``--seed``; never the 89
held out for tests, ``data/heldout.py``), cut into windows of 1–5 consecutive lines
(uniformly), each window's lines glued as they are (stripped,
nothing between them) and segmented as the translation models' source is (``TextProcessor``:
NFKC, jieba on each space-separated part, lowercase): every word boundary is a candidate, the
line ends are the positives, a boundary at a space inside a line (TVsub's separator of two
utterances of one line) is left out, the other boundaries are the negatives. A line end inside a
jieba word is no candidate (the model cannot cut there). scikit-learn's LogisticRegression
(liblinear, L2, ``--C``, ``random_state`` ``--seed``) on the hashed features.

Measured on ``$TVSUB/dev`` (never trained on): its lines glued within documents in groups of G = 1
(the lines themselves: no line end to find, every cut changes how a line is translated), 2, 3
and 5, as they are, and segmented by the
rules alone (``sentences.split_sentences``) and by the rules then the model inside each piece
(``--segment model``): boundary precision, recall and F1 against the line ends (recall over all
line ends, those inside a word included), at thresholds 0.3 … 0.9, and how many cuts fall at a
space inside a line (an utterance boundary the corpus does not count; precision with those
counted true besides); a sentence end inside a dev line counts as a false cut, so precision is
a lower bound. With ``--out`` the model is written with ``--threshold``, ``--min-words`` and the
first ``--min-run``.
"""
from __future__ import annotations

import argparse
import json
import random
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
TVSUB = ROOT.parent / "shared" / "corpora" / "tvsub"

from doctrans.data.text import TextProcessor, normalize_zh  # noqa: E402
from doctrans.inference.boundaries import BoundaryModel, features, hashed  # noqa: E402
from doctrans.inference.sentences import sentence_ends  # noqa: E402

PROC = TextProcessor("zh", lowercase=True)


def labelled(lines: list[str]) -> tuple[list[str], dict[int, int], int] | None:
    """Glued ``lines`` → (its words, {word index k: 1 for a line end before word k, 0 for
    another boundary, -1 for one at a space inside a line}, the number of line ends), or None
    when the words do not cover the text (normalisation changed it)."""
    norm = [normalize_zh(x) for x in lines]
    norm = [x for x in norm if x]
    if not norm:
        return None
    ws = PROC.tokenize(["".join(norm)])[0].split()
    ends, spaces, at = set(), set(), 0
    for x in norm:
        for part in x.split(" ")[:-1]:
            at += len(part)
            spaces.add(at)
        at += len(x.split(" ")[-1])
        ends.add(at)
    if sum(map(len, ws)) != at:
        return None
    labels, off = {}, 0
    for k, w in enumerate(ws[:-1], start=1):
        off += len(w)
        labels[k] = 1 if off in ends else -1 if off in spaces else 0
    return ws, labels, len(norm) - 1


def training_windows(episodes: list[Path], rng: random.Random):
    for ep in episodes:
        lines = [x for x in ep.read_text(encoding="utf-8").splitlines() if x.strip()]
        k = 0
        while k < len(lines):
            n = rng.randint(1, 5)
            yield lines[k:k + n]
            k += n


def matrix(samples: list[tuple[list[str], int]], bits: int):
    from scipy.sparse import csr_matrix

    cols, indptr = [], [0]
    for ws, k in samples:
        cols.append(hashed(features(ws, k), bits))
        indptr.append(indptr[-1] + len(cols[-1]))
    col = np.concatenate(cols)
    return csr_matrix((np.ones(len(col), dtype=np.float32), col, np.array(indptr)), shape=(len(samples), 1 << bits))


def segment_cuts(ws: list[str], model: BoundaryModel | None) -> set[int]:
    """Word indices before which the segmenter cuts: the rules, then the model inside each piece."""
    cuts = {k + 1 for k in sentence_ends(ws)}
    if model is None:
        return cuts
    bounds = sorted(cuts | {0, len(ws)})
    for a, b in zip(bounds, bounds[1:]):
        cuts |= {a + k for k in model.cuts(ws[a:b])}
    return cuts


def dev_groups(g: int) -> list[list[str]]:
    from doctrans.data.sgml import read_sgml

    ids = read_sgml(TVSUB / "dev" / "dev.ref.sgm")[0].doc_ids()
    lines = (TVSUB / "dev" / "dev.zh").read_text(encoding="utf-8").splitlines()
    out: list[list[str]] = []
    for k, d in enumerate(ids):
        if not out or ids[k - 1] != d or len(out[-1]) == g:
            out.append([])
        out[-1].append(lines[k])
    return out


def evaluate(model: BoundaryModel | None, groups: list[list[str]]) -> dict:
    tp = fp = gold = space = 0
    for g in groups:
        got = labelled(g)
        if got is None:
            gold += len([x for x in g if x.strip()]) - 1
            continue
        ws, labels, n_ends = got
        pred = segment_cuts(ws, model)
        true = {k for k, y in labels.items() if y == 1}
        tp += len(pred & true)
        fp += len(pred - true)
        space += len({k for k in pred if labels.get(k) == -1})
        gold += n_ends
    p = tp / max(1, tp + fp)
    r = tp / max(1, gold)
    return {"precision": round(p, 4), "recall": round(r, 4), "f1": round(2 * p * r / max(1e-9, p + r), 4),
            "cuts": tp + fp, "line_ends": gold, "at_spaces": space,
            "precision_spaces_true": round((tp + space) / max(1, tp + fp), 4)}


def train(args, rng: random.Random, res: dict) -> tuple[np.ndarray, float]:
    """Train on ``args.episodes`` episodes (module doc) → (weights, bias); figures into ``res``."""
    from sklearn.linear_model import LogisticRegression

    from doctrans.data.heldout import TVSUB_HELD_OUT

    held_out = set(TVSUB_HELD_OUT)
    files = [p for p in sorted((TVSUB / "train").glob("*.zh"), key=lambda p: int(p.stem)) if p.stem not in held_out]
    episodes = rng.sample(files, min(args.episodes, len(files)))
    t0 = time.perf_counter()
    samples, y, skipped = [], [], 0
    for window in training_windows(episodes, rng):
        got = labelled(window)
        if got is None:
            skipped += 1
            continue
        ws, labels, _ = got
        for k, lab in labels.items():
            if lab >= 0:                        # a space inside a line: left out
                samples.append((ws, k))
                y.append(lab)
    X = matrix(samples, args.bits)
    t1 = time.perf_counter()
    clf = LogisticRegression(solver="liblinear", C=args.C, max_iter=200, random_state=args.seed)
    clf.fit(X, np.array(y))
    t2 = time.perf_counter()
    print(f"{len(episodes)} episodes, {len(samples):,} candidates ({sum(y):,} line ends), {skipped} windows "
          f"skipped; features {t1 - t0:.0f} s, training {t2 - t1:.0f} s", flush=True)
    res.update(episodes=len(episodes), candidates=len(samples), positives=int(sum(y)),
               feature_seconds=round(t1 - t0), train_seconds=round(t2 - t1))
    return clf.coef_[0].astype(np.float32), float(clf.intercept_[0])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--episodes", type=int, default=200)
    ap.add_argument("--bits", type=int, default=20)
    ap.add_argument("--C", type=float, default=1.0)
    ap.add_argument("--threshold", type=float, default=0.5)
    ap.add_argument("--min-words", type=int, default=1)
    ap.add_argument("--min-run", type=int, nargs="+", default=[12],
                    help="runs shorter than this are not cut (several: each measured on dev; the first is written)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--out", type=Path, default=None)
    ap.add_argument("--json", type=Path, default=None)
    ap.add_argument("--save-weights", type=Path, default=None, help="also keep the raw weights and bias (.npz)")
    ap.add_argument("--load-weights", type=Path, default=None, help="skip training: weights of --save-weights")
    args = ap.parse_args()

    rng = random.Random(args.seed)
    res = {"bits": args.bits, "C": args.C, "seed": args.seed, "dev": {}}
    if args.load_weights:
        with np.load(args.load_weights) as z:
            weights, bias = z["weights"].astype(np.float32), float(z["meta"][0])
        res["weights"] = str(args.load_weights)
    else:
        weights, bias = train(args, rng, res)
        if args.save_weights:
            np.savez_compressed(args.save_weights, weights=weights, meta=np.array([bias]))
    groups = {g: dev_groups(g) for g in (1, 2, 3, 5)}
    for g, gr in groups.items():
        row = {"rules": evaluate(None, gr)}
        for run in args.min_run:
            for th in (0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9):
                m = BoundaryModel(weights, bias, th, args.min_words, run)
                row[f"model@{th}" + (f",run{run}" if run != 2 else "")] = evaluate(m, gr)
        res["dev"][f"G={g}"] = row
        for name, v in row.items():
            print(f"dev G={g} {name:>10}: P {v['precision']:.3f} R {v['recall']:.3f} F1 {v['f1']:.3f} "
                  f"({v['cuts']} cuts, {v['at_spaces']} of them at a space inside a line: P "
                  f"{v['precision_spaces_true']:.3f} with those true; {v['line_ends']} line ends)", flush=True)
    if args.out:
        BoundaryModel(weights, bias, args.threshold, args.min_words, args.min_run[0]).save(args.out)
        res["model"] = {"path": str(args.out), "bytes": args.out.stat().st_size, "threshold": args.threshold,
                        "min_words": args.min_words, "min_run": args.min_run[0]}
        print(f"wrote {args.out} ({args.out.stat().st_size:,} bytes)")
    if args.json:
        args.json.write_text(json.dumps(res, indent=1) + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
