"""Where beam-search decoding spends its time (issue 30, item 3): cProfile of ``decode_corpus``
(sentence model) or ``translate_documents`` (context model) on the first lines of a split.

    python benchmarks/decode_profile.py -c CKPT [--prepared PREP] [--split test] [--lines 300]
        [--beam 5] [--threads 1] [--top 25] [--sort tottime] [--random-model YAML]
        [--history-chunk auto] [--warmup-beam 1]

The sentence model translates the first ``--lines`` lines of PREP/{split}.bpe.zh as one list
(batches of 64, length-sorted, as ``doctrans translate``); a context model translates them as
documents (PREP/{split}.docs). ``--random-model YAML`` profiles a freshly initialised model of
that config (seed 0) instead of a checkpoint. Prints the wall time, sentences/s and the ``--top``
functions by ``--sort`` (pstats keys: tottime, cumtime).
"""
from __future__ import annotations

import argparse
import cProfile
import pstats
import sys
import time
from pathlib import Path

import torch
from _common import prepared_vocabs, set_threads

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from doctrans.config import load_experiment  # noqa: E402
from doctrans.data.vocab import Vocab  # noqa: E402
from doctrans.inference.documents import translate_documents  # noqa: E402
from doctrans.inference.translate import decode_corpus  # noqa: E402
from doctrans.models.build import build_model  # noqa: E402
from doctrans.utils.io import read_lines  # noqa: E402
from doctrans.inference.config import SearchOptions


def load_model(a, sv: Vocab, tv: Vocab):
    """The checkpoint's model (eval mode) or a fresh one of ``--random-model``."""
    if a.random_model:
        cfg = load_experiment(a.random_model, [f"data.prepared={a.prepared}"])
        torch.manual_seed(0)
        return build_model(cfg.model, len(sv), len(tv), sv.pad_id, cfg.context).eval()
    from doctrans.runtime.checkpoint import config_of, load_checkpoint
    ck = load_checkpoint(a.checkpoint)
    exp = config_of(ck)
    m = build_model(exp.model, len(sv), len(tv), sv.pad_id, exp.context)
    m.load_state_dict(ck["model"])
    return m.eval()


def documents(prep: Path, split: str, lines: int, sv: Vocab):
    """The first ``lines`` non-empty lines of the split, by document: {doc: [ids]}."""
    src, docs = read_lines(prep / f"{split}.bpe.zh"), [x.split("\t")[0] for x in read_lines(prep / f"{split}.docs")]
    by_doc: dict[str, list] = {}
    for line, d in list(zip(src, docs)):
        if line.strip() and sum(map(len, by_doc.values())) < lines:
            by_doc.setdefault(d, []).append(sv.encode(line))
    return by_doc


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("-c", "--checkpoint", default="")
    ap.add_argument("--random-model", default="")
    ap.add_argument("--prepared", type=Path, default=Path("/work/wt-qs/data/quickstart"))
    ap.add_argument("--split", default="test")
    ap.add_argument("--lines", type=int, default=300)
    ap.add_argument("--beam", type=int, default=5)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--top", type=int, default=25)
    ap.add_argument("--sort", default="tottime")
    ap.add_argument("--history-chunk", default="auto", help="a target-side context model's pieces (auto | N; 0: whole "
                                                            "documents), as `doctrans translate --history-chunk`")
    ap.add_argument("--warmup-beam", type=int, default=1, help="as `doctrans translate --warmup-beam`")
    a = ap.parse_args()
    set_threads(a.threads)
    prep = a.prepared
    sv, tv = prepared_vocabs(prep)
    model = load_model(a, sv, tv)
    by_doc = documents(prep, a.split, a.lines, sv)
    flat = [x for d in by_doc.values() for x in d]

    def run():
        with torch.inference_mode():
            if model.document.reads_documents:
                chunk = a.history_chunk if a.history_chunk == "auto" else int(a.history_chunk)
                return translate_documents(model, list(by_doc.values()), tv, SearchOptions(beam=a.beam, lenpen=1.0, max_len_ratio=1.5, max_len_extra=10, batch_sentences=64, history_chunk=chunk, warmup_beam=a.warmup_beam))
            return decode_corpus(model, flat, tv, SearchOptions(beam=a.beam, lenpen=1.0, max_len_ratio=1.5, max_len_extra=10, batch_sentences=64))

    run()                                                         # warm-up (allocator, caches)
    prof = cProfile.Profile()
    t0 = time.perf_counter()
    prof.enable()
    run()
    prof.disable()
    dt = time.perf_counter() - t0
    print(f"{len(flat)} sentences in {dt:.2f} s (profiled) = {len(flat) / dt:.1f} sent/s, beam {a.beam}, "
          f"threads {torch.get_num_threads()}")
    pstats.Stats(prof).sort_stats(a.sort).print_stats(a.top)


if __name__ == "__main__":
    main()
