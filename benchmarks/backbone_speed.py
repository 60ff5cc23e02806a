"""Training and beam-search speed of two backbones on the same data, measured interleaved.

Usage: python benchmarks/backbone_speed.py PREPARED_DIR [--configs pipelines/rnnsearch/small.yaml,
       pipelines/transformer/small.yaml] [--beams 10,5] [--updates 20] [--warmup-updates 3]
       [--sentences 200] [--chunks 4] [--threads 2] [--shortlist FILE]

Training: every config's model takes one Adam update on batch i, then the next model does, for
the same ``--warmup-updates`` + ``--updates`` batches (the first config's ``train.max_tokens``),
so machine load shared with other work hits all models alike; figures are target tokens/s.
Decoding: the first ``--sentences`` dev sentences in ``--chunks`` slices, each slice translated
by every model in turn (its beam from ``--beams``, no length penalty). The models are randomly
initialised (seed 0) and ``</s>`` is penalised by 10^4 nats (``LongOutputs``), so every
hypothesis runs to the search's length limit (1.5 × source + 10): both models do the same
number of decoder steps per sentence, and the timings measure the cost of beam search at a
fixed output length, not translation quality.

``--shortlist FILE`` (``doctrans shortlist`` of PREPARED_DIR): every model decodes with that
lexical shortlist (``beam_search(shortlist=…)``), the output layer over each batch's candidates.

Trained models (``--checkpoints CKPT,CKPT,… --beams B,B,…``; a checkpoint may repeat with another
beam): only decoding, of the TVsub test set as the table translates it (``PREP/test.tok.zh``
through ``Translator``, BPE included, no documents: the backbones alone), in ``--chunks`` slices
interleaved across the systems, each at its beam with the checkpoint's own length penalty and
length limits; sentences/s, output tokens/s and the ratio to the first system.
"""
from __future__ import annotations

import argparse
import time
from pathlib import Path

import torch
from _common import prepared_vocabs, set_threads

from doctrans.config import load_experiment
from doctrans.data.batching import collate, epoch_batches, load_parallel, make_batches
from doctrans.inference.shortlist import Shortlist
from doctrans.inference.translate import decode_corpus
from doctrans.models.build import build_model
from doctrans.training.loss import forward_loss
from doctrans.inference.config import SearchOptions


class LongOutputs(torch.nn.Module):
    """``model`` whose ``decode_step`` log-probabilities of ``</s>`` are lowered by 10^4 (the
    search still forces ``</s>`` at its length limit)."""

    def __init__(self, model, eos_id: int):
        super().__init__()
        self.model, self.eos_id, self.pad_id = model, eos_id, model.pad_id

    @property
    def max_target_len(self) -> int:
        return self.model.max_target_len

    def encode(self, batch):
        return self.model.encode(batch)

    def init_state(self, enc):
        return self.model.init_state(enc)

    def decode_step(self, state, prev_tokens, vocab=None):
        lprobs, state = self.model.decode_step(state, prev_tokens, vocab)
        col = self.eos_id if vocab is None else int(torch.searchsorted(vocab, self.eos_id))   # shortlist column
        lprobs[:, col] -= 1e4
        return lprobs, state


def train_step(model, opt, batch) -> float:
    """One update; returns its wall time in seconds."""
    t0 = time.perf_counter()
    out = forward_loss(model, batch, 0, 0.1)
    (out.total / out.n_tokens).backward()
    torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
    opt.step()
    opt.zero_grad(set_to_none=True)
    return time.perf_counter() - t0


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("prepared")
    ap.add_argument("--configs", default="pipelines/rnnsearch/small.yaml,pipelines/transformer/small.yaml")
    ap.add_argument("--beams", default="10,5")
    ap.add_argument("--updates", type=int, default=20)
    ap.add_argument("--warmup-updates", type=int, default=3)
    ap.add_argument("--sentences", type=int, default=200)
    ap.add_argument("--chunks", type=int, default=4)
    ap.add_argument("--threads", type=int, default=0)
    ap.add_argument("--checkpoints", default="", help="trained checkpoints (comma-separated): decode the test set only")
    ap.add_argument("--shortlist", default="", help="decode with this lexical shortlist (doctrans shortlist)")
    args = ap.parse_args()
    set_threads(args.threads)
    if args.checkpoints:
        return decode_trained(args)
    paths, beams = args.configs.split(","), [int(b) for b in args.beams.split(",")]
    cfgs = [load_experiment(p, [f"data.prepared={args.prepared}"]) for p in paths]
    prep = Path(args.prepared)
    src_v, tgt_v = prepared_vocabs(prep)
    data, _ = load_parallel(prep / "train.bpe.zh", prep / "train.bpe.en", src_v, tgt_v, 128)
    batches = epoch_batches(make_batches(data, cfgs[0].train.max_tokens, 1), 1, 0)
    models = []
    for cfg in cfgs:
        torch.manual_seed(0)
        models.append(build_model(cfg.model, len(src_v), len(tgt_v)))
    print(f"torch {torch.__version__}, threads {torch.get_num_threads()}, max_tokens {cfgs[0].train.max_tokens}, "
          f"{args.updates} timed updates")
    for p, m in zip(paths, models):
        print(f"{p}: {sum(x.numel() for x in m.parameters()) / 1e6:.2f}M parameters")

    opts = [torch.optim.Adam(m.parameters(), lr=1e-4, fused=True) for m in models]
    secs, tokens = [0.0] * len(models), 0
    for i, idx in enumerate(batches[: args.warmup_updates + args.updates]):
        b = collate(data, idx, tgt_v)
        for k, (m, o) in enumerate(zip(models, opts)):
            dt = train_step(m.train(), o, b)
            secs[k] += dt if i >= args.warmup_updates else 0.0
        tokens += b.n_targets if i >= args.warmup_updates else 0
    if args.updates:                                         # --updates 0: decoding only
        for p, s in zip(paths, secs):
            print(f"train {p}: {tokens / s:8.0f} target tok/s ({s:.1f} s)")
        print(f"train ratio {paths[0]} / {paths[1]}: {secs[1] / secs[0]:.2f}")

    shortlist = Shortlist.load(args.shortlist, src_v, tgt_v) if args.shortlist else None
    dev, _ = load_parallel(prep / "dev.bpe.zh", prep / "dev.bpe.en", src_v, tgt_v, 10_000)
    src = dev.src[: args.sentences]
    dsecs, dcpu, steps = [0.0] * len(models), [0.0] * len(models), [0] * len(models)
    step = -(-len(src) // args.chunks)
    with torch.inference_mode():
        for c in range(0, len(src), step):
            for k, (m, beam) in enumerate(zip(models, beams)):
                t0, c0 = time.perf_counter(), time.process_time()
                hyps = decode_corpus(LongOutputs(m.eval(), tgt_v.eos_id), src[c:c + step], tgt_v, SearchOptions(beam=beam, lenpen=0.0, max_len_ratio=1.5, max_len_extra=10, batch_sentences=64), shortlist=shortlist)
                dsecs[k] += time.perf_counter() - t0
                dcpu[k] += time.process_time() - c0
                steps[k] += sum(len(h.split()) + 1 for h in hyps)
    for p, beam, s, n in zip(paths, beams, dsecs, steps):
        print(f"decode {p} beam {beam}: {len(src) / s:6.1f} sent/s, {n / s:7.0f} steps/s "
              f"({n / len(src):.1f} steps/sentence, {s:.1f} s)")
    print(f"decode ratio (sent/s) {paths[0]} / {paths[1]}: {dsecs[1] / dsecs[0]:.2f} (wall clock), "
          f"{dcpu[1] / dcpu[0]:.2f} (process CPU time: {dcpu[0]:.1f} vs {dcpu[1]:.1f} s)")


def decode_trained(args) -> None:
    """``--checkpoints``: interleaved decoding of PREP/test.tok.zh by trained models (module doc)."""
    from doctrans.inference.translate import TranslateConfig, Translator
    from doctrans.utils.io import read_lines
    ckpts, beams = args.checkpoints.split(","), [int(b) for b in args.beams.split(",")]
    if len(beams) != len(ckpts):
        raise SystemExit(f"--beams gives {len(beams)} beams for {len(ckpts)} checkpoints")
    lines = read_lines(Path(args.prepared) / "test.tok.zh")
    systems = [Translator(TranslateConfig(checkpoint=c, input_format="tok", tokenized=True, beam=b,
                                          shortlist=args.shortlist))
               for c, b in zip(ckpts, beams)]
    print(f"torch {torch.__version__}, threads {torch.get_num_threads()}, {len(lines)} test sentences "
          f"in {args.chunks} interleaved slices")
    secs, words = [0.0] * len(systems), [0] * len(systems)
    step = -(-len(lines) // args.chunks)
    for c in range(0, len(lines), step):
        for k, tr in enumerate(systems):
            t0 = time.perf_counter()
            hyps = tr.translate(lines[c:c + step])
            secs[k] += time.perf_counter() - t0
            words[k] += sum(len(h.split()) for h in hyps)
    for c, b, s, w in zip(ckpts, beams, secs, words):
        print(f"decode {c} beam {b}: {len(lines) / s:6.1f} sent/s, {w / s:6.0f} words/s ({w / len(lines):.1f} "
              f"words/sentence, {s:.1f} s), ratio to the first {secs[0] / s:.2f}")


if __name__ == "__main__":
    main()
