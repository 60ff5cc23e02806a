"""Training and translation speed of the context models vs the sentence model (issue 14).

Usage: python benchmarks/context_speed.py PREPARED_DIR [--updates 30] [--warmup 5]
       [--models concat,han_encoder,han_decoder,han_joint] [--modes runs,sorted] [--threads 2]
       [--max-tokens 4096] [--translate-lines 150] [--beam 5] [--max-len-ratio 1.5]
       [--max-len-extra 10] [--checkpoint NAME=CKPT ...] [--repeats 1] [--base YAML] [--usage P,Q]
       [--random-context P] [--autocast none|bf16|bf16-only] [--device cpu|cuda] [--cudnn-sdp]

Training: the sentence model (``--base``, default ``pipelines/quickstart.yaml``; the RNN context
models of issue 15 compare against ``pipelines/rnnsearch/small.yaml``) and every context model
(``pipelines/context/{model}.yaml``, ``train.init_from=""``: from scratch; its ``train.freeze``
patterns kept, so HGC trains only its document-level parameters, as in its stage 2) under every
``data.doc_batching`` mode of ``--modes``, built in one process and trained **interleaved by
update** (update k of every system, then update k + 1…), so load on a shared machine hits all
systems alike. Each system's update is the trainer's: the first batches of epoch 0 of its
task (``make_batches`` / ``make_doc_batches`` with train.seed, collated beforehand), the
shared ``forward_loss``, backward, clipping at 1.0, fused Adam. Target tok/s = target tokens of
target rows (``n_targets``, what ``metrics.jsonl``'s ``tok_per_s`` counts) / seconds of the
``--updates`` timed updates after ``--warmup`` untimed ones. Prints a Markdown table with the
ratio to the sentence model. ``--usage P,Q`` (issue 29) adds, for every context model and mode,
a system ``…+usage`` trained on the same batches after ``train.coword_dropout`` P and
``train.context_dropout`` Q (``data.context_usage.apply_context_usage``, seeded per batch as
the trainer does; its time is counted in the update): the cost of context-usage training.
``--random-context P`` adds, likewise, a system ``…+random`` trained on the same batches with
``train.random_context`` P (``data.context_usage.foreign_context``: the random-context control's
foreign context rows, appended per update as the trainer does): the cost of the control.
``--autocast bf16`` (issue 30) adds every system again as ``NAME+bf16``, the same batches under
bf16 autocast (what ``train.autocast: auto`` picks on a CPU with native bf16); the table also
gives target tokens per CPU second of the process (steadier than wall time on a shared machine);
``bf16-only``: the bf16 systems alone. ``--device cuda`` trains on the GPU (each timed update ends
with a synchronize); ``--cudnn-sdp`` adds every system again as ``NAME+cudnn-sdp``, its updates
with PyTorch's cuDNN attention backend on (``doctrans.runtime.device.configure_cuda`` turns it
off for every doctrans run on a GPU; the other systems run with it off): what that setting buys.

Translation (``--translate-lines 0``: skipped): the first ``--translate-lines`` lines of each
TVsub test document (``PREP/test.bpe.zh`` + ``PREP/test.docs``; ``--translate-split train
--translate-docs K``: of the last K training episodes instead, a collection of K documents —
the test set has 2, so a target-side model decodes 2 sentences at a time there) at ``--beam`` with the models
just trained (mode: the first of ``--modes``; batching does not change translation): the
sentence model through ``decode_corpus`` (no documents), each context model through
``translate_documents`` (what ``Translator.translate(lines, doc_ids=…)`` calls), interleaved,
the same ``max_len_ratio``/``max_len_extra`` caps for all: sentences/s (wall clock) and sentences
per CPU second of the process (``time.process_time``: with one thread, less sensitive to other
jobs on a shared machine), ratios, mean output length.
Models after a few updates emit short outputs, so the encoder dominates; ``--checkpoint
NAME=CKPT`` (repeatable, the first one is the reference, e.g. the context table's trained
runs; or a YAML: a freshly initialised model) translates with those models instead, ``--repeats R`` times each, interleaved, and
``--updates 0`` skips the training part. ``--uncached`` adds, per context model, a row with its
``inference_cache`` off (``translate_documents(context_cache=False)``; a warning if the
translations differ). ``--shortlist FILE``: every system translates with that lexical shortlist
(``doctrans shortlist``).
"""
from __future__ import annotations

import argparse
import fnmatch
import logging
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch
from _common import prepared_vocabs, set_threads

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from doctrans.config import load_experiment  # noqa: E402
from doctrans.data.batching import collate, epoch_batches, load_parallel, make_batches  # noqa: E402
from doctrans.data.context_usage import apply_context_usage, foreign_context, usage_generator  # noqa: E402
from doctrans.data.documents import collate_doc, load_doc_split, make_doc_batches  # noqa: E402
from doctrans.data.vocab import Vocab  # noqa: E402
from doctrans.inference.documents import translate_documents  # noqa: E402
from doctrans.inference.shortlist import Shortlist  # noqa: E402
from doctrans.inference.translate import decode_corpus  # noqa: E402
from doctrans.models.build import build_model  # noqa: E402
from doctrans.training.loss import forward_loss  # noqa: E402
from doctrans.utils.io import read_lines  # noqa: E402
from doctrans.inference.config import SearchOptions

log = logging.getLogger("context_speed")


@dataclass
class System:
    """One model being trained: its batches (collated), optimizer and timing."""

    name: str
    model: torch.nn.Module
    opt: torch.optim.Optimizer
    batches: list
    tokens: int = 0
    seconds: float = 0.0
    usage: tuple[float, float] | None = None      # (coword_dropout, context_dropout) applied per update
    bf16: bool = False                            # the update under bf16 autocast (``--autocast``)
    cpu_seconds: float = 0.0                      # process CPU time of the timed updates
    device: torch.device = torch.device("cpu")
    cudnn_sdp: bool = False                       # this system's updates with cuDNN's SDPA backend on
    random_context: float = 0.0                   # train.random_context applied per update (``--random-context``)
    docs: object = None                           # the DocData the control draws its foreign lines from

    def update(self, k: int, timed: bool) -> None:
        """Update ``k``: [context-usage transform,] forward_loss, backward, clip 1.0, Adam step."""
        b = self.batches[k]
        cuda = self.device.type == "cuda"
        if cuda:
            torch.backends.cuda.enable_cudnn_sdp(self.cudnn_sdp)
            torch.cuda.synchronize()
        t0, c0 = time.perf_counter(), time.process_time()
        if self.usage is not None:
            b = apply_context_usage(b, *self.usage, generator=usage_generator(1, 0, k))
        if self.random_context:
            b = _to(foreign_context(b, self.docs, self.random_context, usage_generator(1, 0, k)), self.device)
        with torch.autocast(self.device.type, dtype=torch.bfloat16, enabled=self.bf16):
            out = forward_loss(self.model, b, 0, 0.1)
        (out.total / out.n_tokens).backward()
        torch.nn.utils.clip_grad_norm_(self.model.parameters(), 1.0)
        self.opt.step()
        self.opt.zero_grad(set_to_none=True)
        if cuda:
            torch.cuda.synchronize()
        if timed:
            self.seconds += time.perf_counter() - t0
            self.cpu_seconds += time.process_time() - c0
            self.tokens += b.n_targets


def build_systems(a, prep: Path, sv: Vocab, tv: Vocab) -> list[System]:
    """The sentence model first, then every context model × mode (same seed for every model)."""
    over = [f"data.prepared={prep}", 'train.init_from=""', f"train.max_tokens={a.max_tokens}"]
    n = a.warmup + a.updates
    cfg = load_experiment(REPO / a.base, over)
    pairs, _ = load_parallel(prep / "train.bpe.zh", prep / "train.bpe.en", sv, tv, cfg.data.max_len,
                             prep / "train.target")
    keys = epoch_batches(make_batches(pairs, cfg.train.max_tokens, cfg.train.seed), cfg.train.seed, 0)[:n]
    specs = [("sentence", cfg, [collate(pairs, k, tv) for k in keys])]
    docs = load_doc_split(prep, "train", sv, tv, cfg.data.max_len)
    for model in a.models.split(","):
        for mode in a.modes.split(","):
            c = load_experiment(REPO / "pipelines" / "context" / f"{model}.yaml", [*over, f"data.doc_batching={mode}"])
            plan = make_doc_batches(docs, c.train.max_tokens, getattr(c.context, "context_sents", 0), c.train.seed, 0,
                                    mode=mode, block=getattr(c.context, "block", 0))
            specs.append((f"{model}/{mode}", c, [collate_doc(docs, k, tv) for k in plan[:n]]))
            batches = specs[-1][2]
            if a.usage:
                specs.append((f"{model}/{mode}+usage", c, batches))
            if a.random_context:
                specs.append((f"{model}/{mode}+random", c, batches))
    usage = tuple(float(x) for x in a.usage.split(",")) if a.usage else None
    if a.autocast == "bf16":                  # every system again, on the same batches, under bf16 autocast
        specs = [x for spec in specs for x in (spec, (spec[0] + "+bf16", spec[1], spec[2]))]
    elif a.autocast == "bf16-only":
        specs = [(spec[0] + "+bf16", spec[1], spec[2]) for spec in specs]
    if a.cudnn_sdp:
        specs = [x for spec in specs for x in (spec, (spec[0] + "+cudnn-sdp", spec[1], spec[2]))]
    device = torch.device(a.device)
    out = []
    for name, c, batches in specs:
        torch.manual_seed(c.train.seed)
        m = build_model(c.model, len(sv), len(tv), sv.pad_id, c.context).train().to(device)
        batches = [_to(b, device) for b in batches]
        for pname, p in m.named_parameters():                  # train.freeze (HGC's stage 2: backbone.*)
            if any(fnmatch.fnmatchcase(pname, pat) for pat in c.train.freeze):
                p.requires_grad_(False)
        params = [p for p in m.parameters() if p.requires_grad]
        out.append(System(name, m, torch.optim.Adam(params, lr=1e-4, fused=True), batches,
                          usage=usage if "+usage" in name else None, bf16="+bf16" in name, device=device,
                          cudnn_sdp=name.endswith("+cudnn-sdp"),
                          random_context=a.random_context if "+random" in name else 0.0, docs=docs))
        log.info("%s: %.2fM parameters, %d batches", name, sum(p.numel() for p in m.parameters()) / 1e6, len(batches))
    return out


def _to(batch, device: torch.device):
    """A collated batch (``batching.Batch`` or ``documents.DocBatch``) on ``device``."""
    if device.type == "cpu":
        return batch
    if hasattr(batch, "to"):
        return batch.to(device)
    for name in ("src", "tgt_in", "tgt_out"):
        setattr(batch, name, getattr(batch, name).to(device))
    return batch


def load_systems(specs: list[str], sv: Vocab, tv: Vocab) -> list[System]:
    """``NAME=CKPT`` → trained models in eval mode (their vocabularies must be the slice's);
    ``NAME=CONFIG.yaml`` → a freshly initialised model of that config (seed 0, the slice's
    vocabularies; a context YAML's backbone from its ``model`` section)."""
    from doctrans.runtime.checkpoint import config_of, load_checkpoint
    out = []
    for spec in specs:
        name, _, path = spec.partition("=")
        if path.endswith(".yaml"):
            exp = load_experiment(REPO / path if not Path(path).is_absolute() else path)
            torch.manual_seed(0)
            m = build_model(exp.model, len(sv), len(tv), sv.pad_id, exp.context)
            out.append(System(name, m.eval(), None, []))
            continue
        ck = load_checkpoint(path)
        if list(ck["vocab"]["src"]) != sv.tokens or list(ck["vocab"]["tgt"]) != tv.tokens:
            raise SystemExit(f"{path}: vocabularies differ from PREPARED_DIR's")
        exp = config_of(ck)
        m = build_model(exp.model, len(sv), len(tv), sv.pad_id, exp.context)
        m.load_state_dict(ck["model"])
        out.append(System(name, m.eval(), None, []))
    return out


def translate_speed(prep: Path, systems: list[System], sv: Vocab, tv: Vocab, a) -> list[tuple[str, float, float]]:
    """(name, sentences/s, mean output tokens) per system on the first lines of each test
    document; the sentence model gets no documents. With ``--repeats R`` every system
    translates R times, interleaved; sentences/s over all R."""
    split = a.translate_split
    lines, docs = read_lines(prep / f"{split}.bpe.zh"), [x.split("\t") for x in read_lines(prep / f"{split}.docs")]
    keep = list(dict.fromkeys(d for d, _ in docs))[-a.translate_docs:] if a.translate_docs else None
    by_doc: dict[str, list[np.ndarray]] = {}
    for line, (d, pos) in zip(lines, docs):
        if int(pos) < a.translate_lines and (keep is None or d in keep) and line.strip():
            by_doc.setdefault(d, []).append(sv.encode(line))
    flat = [x for doc in by_doc.values() for x in doc]
    shortlist = Shortlist.load(a.shortlist, sv, tv) if a.shortlist else None
    runs = [(s, True) for s in systems]                      # (system, inference cache on)
    if a.uncached:
        runs += [(s, False) for s in systems if s.model.document.reads_documents]
    seconds, cpu, lengths, outputs = [0.0] * len(runs), [0.0] * len(runs), [0.0] * len(runs), [None] * len(runs)
    for rep in range(a.repeats):
        for i, (s, cache) in enumerate(runs):
            s.model.eval()
            t0, c0 = time.perf_counter(), time.process_time()
            with torch.inference_mode():
                if s.model.document.reads_documents:          # HGC: context_block, no context_sents
                    hyps = [h for doc in translate_documents(s.model, list(by_doc.values()), tv, SearchOptions(beam=a.beam, lenpen=1.0, max_len_ratio=a.max_len_ratio, max_len_extra=a.max_len_extra, batch_sentences=64, history_chunk=0, warmup_beam=0), context_cache=cache, shortlist=shortlist) for h in doc]
                else:
                    hyps = decode_corpus(s.model, flat, tv, SearchOptions(beam=a.beam, lenpen=1.0, max_len_ratio=a.max_len_ratio, max_len_extra=a.max_len_extra, batch_sentences=64), shortlist=shortlist)
            dt = time.perf_counter() - t0
            seconds[i] += dt
            cpu[i] += time.process_time() - c0
            lengths[i] = sum(len(h.split()) for h in hyps) / len(hyps)
            outputs[i] = hyps
            log.info("translate %s%s (%d/%d): %d sentences in %.1f s", s.name, "" if cache else " (no cache)",
                     rep + 1, a.repeats, len(flat), dt)
    same = {s.name: outputs[i] for i, (s, cache) in enumerate(runs) if cache}
    for i, (s, cache) in enumerate(runs):
        if not cache and outputs[i] != same[s.name]:
            log.warning("%s: translations with and without the inference cache differ", s.name)
    return [(s.name.split("/")[0] + ("" if cache else " (no cache)"), a.repeats * len(flat) / sec, n,
             a.repeats * len(flat) / c) for (s, cache), sec, n, c in zip(runs, seconds, lengths, cpu)]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("prepared", type=Path)
    ap.add_argument("--updates", type=int, default=30)
    ap.add_argument("--warmup", type=int, default=5)
    ap.add_argument("--models", default="concat,han_encoder,han_decoder,han_joint")
    ap.add_argument("--modes", default="runs,sorted")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--shortlist", default="", help="translate (--translate-docs) with this lexical shortlist")
    ap.add_argument("--max-tokens", type=int, default=4096)
    ap.add_argument("--translate-lines", type=int, default=150, help="per test document; 0: no translation")
    ap.add_argument("--translate-split", default="test", choices=["test", "train"],
                    help="documents to translate: the TVsub test (2 documents) or the slice's train episodes "
                         "(a collection: target-side models batch sentence m of every document)")
    ap.add_argument("--translate-docs", type=int, default=0, help="the last K documents of the split (0: all)")
    ap.add_argument("--beam", type=int, default=5)
    ap.add_argument("--max-len-ratio", type=float, default=1.5)
    ap.add_argument("--max-len-extra", type=int, default=10)
    ap.add_argument("--checkpoint", action="append", default=[], metavar="NAME=CKPT",
                    help="translate with trained checkpoints (repeatable; the first is the reference)")
    ap.add_argument("--repeats", type=int, default=1, help="translations per system, interleaved")
    ap.add_argument("--uncached", action="store_true",
                    help="also translate with every context model's inference cache off (rows '(no cache)')")
    ap.add_argument("--random-context", type=float, default=0.0, metavar="P",
                    help="also train every context model with train.random_context P (the control's cost)")
    ap.add_argument("--usage", default="", metavar="P,Q",
                    help="also train every context model with coword_dropout P and context_dropout Q")
    ap.add_argument("--autocast", default="none", choices=["none", "bf16", "bf16-only"],
                    help="bf16: add every system again as NAME+bf16, trained on the same batches under bf16 "
                         "autocast; bf16-only: the bf16 systems alone")
    ap.add_argument("--device", default="cpu", choices=["cpu", "cuda"], help="train on this device")
    ap.add_argument("--cudnn-sdp", action="store_true",
                    help="--device cuda: add every system again as NAME+cudnn-sdp, with cuDNN's attention backend on")
    ap.add_argument("--base", default="pipelines/quickstart.yaml",
                    help="the sentence model's YAML, relative to the repository (the reference row)")
    a = ap.parse_args()
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(message)s", datefmt="%H:%M:%S")
    set_threads(a.threads)
    prep = a.prepared.resolve()
    sv, tv = prepared_vocabs(prep)
    if a.cudnn_sdp and a.device != "cuda":
        ap.error("--cudnn-sdp needs --device cuda")
    if a.device == "cuda" and a.translate_lines:
        ap.error("--device cuda: training speed only (add --translate-lines 0)")
    gpu = f", {torch.cuda.get_device_name()}" if a.device == "cuda" else ""
    print(f"\ntorch {torch.__version__}, threads {torch.get_num_threads()}, max_tokens {a.max_tokens}{gpu}")
    if a.updates:
        systems = train_speed(a, prep, sv, tv)
    if a.translate_lines:
        if a.checkpoint:
            chosen, models = load_systems(a.checkpoint, sv, tv), "trained checkpoints " + ", ".join(a.checkpoint)
        else:
            mode = a.modes.split(",")[0]
            chosen = [s for s in systems if s.name == "sentence" or s.name.endswith(f"/{mode}")]
            models = "models after the updates above"
        rows = translate_speed(prep, chosen, sv, tv, a)
        print(f"\nbeam {a.beam}, lenpen 1.0, max_len_ratio {a.max_len_ratio}, max_len_extra {a.max_len_extra}, "
              f"first {a.translate_lines} lines of each {a.translate_split} document"
              f"{f' (last {a.translate_docs} documents)' if a.translate_docs else ''}, {models}, "
              f"{a.repeats} interleaved repeat(s)\n")
        print("| system | sentences/s | ratio to first | sentences per CPU s | ratio to first | mean output tokens |")
        print("| --- | ---: | ---: | ---: | ---: | ---: |")
        for name, sps, length, cps in rows:
            print(f"| {name} | {sps:.2f} | {sps / rows[0][1]:.2f} | {cps:.2f} | {cps / rows[0][3]:.2f} | {length:.1f} |")


def train_speed(a, prep: Path, sv: Vocab, tv: Vocab) -> list[System]:
    """Train every system interleaved by update and print the tok/s table; returns them."""
    systems = build_systems(a, prep, sv, tv)
    t0 = time.perf_counter()
    for k in range(a.warmup + a.updates):
        for s in systems:
            s.update(k, timed=k >= a.warmup)
        log.info("update %d done (%.0f s)", k + 1, time.perf_counter() - t0)
    base = systems[0].tokens / systems[0].seconds
    print(f"\n{a.updates} timed updates after {a.warmup}, interleaved by update\n")
    cbase = systems[0].tokens / systems[0].cpu_seconds
    print("| system / doc_batching | target tokens | s | target tok/s | ratio to sentence | tok per CPU s | ratio |")
    print("| --- | ---: | ---: | ---: | ---: | ---: | ---: |")
    for s in systems:
        tps, cps = s.tokens / s.seconds, s.tokens / s.cpu_seconds
        print(f"| {s.name} | {s.tokens:,} | {s.seconds:.1f} | {tps:,.0f} | {tps / base:.2f} | {cps:,.0f} | "
              f"{cps / cbase:.2f} |", flush=True)
    return systems


if __name__ == "__main__":
    main()
