"""``doctrans translate``: batched beam search over a file, stdin, or a directory of documents.

Input lines are normalised, segmented (jieba), BPE-encoded with the training data's codes,
translated with beam search (``beam_search.py``), BPE-merged and Moses-detokenized (unless
``tokenized``). The output always has exactly as many lines as the input; an empty input line
gives an empty output line without running the model; a line longer than the model can read is
split, translated in pieces and joined back (``long_lines.py``). A directory input is mirrored
file by file under the output directory, so document files keep their boundaries; bad files are
reported and skipped (``collection.py``). The checkpoint carries the BPE codes and text settings,
so it translates without its prepared dataset.
"""
from __future__ import annotations

import logging
import os
import sys
import time
from dataclasses import dataclass
from functools import partial
from pathlib import Path

import numpy as np
import torch
from tqdm import tqdm

from doctrans.config import override_context
from doctrans.data.text import TextProcessor
from doctrans.data.vocab import Vocab
from doctrans.inference.beam_search import beam_search
from doctrans.inference.collection import GROUP_LINES, CollectionSummary, translate_collection
from doctrans.inference.documents import translate_documents
from doctrans.inference.long_lines import split_long_lines
from doctrans.models.build import build_model
from doctrans.models.interface import reads_documents
from doctrans.training import distributed
from doctrans.training.checkpoint import config_of, load_checkpoint
from doctrans.training.trainer import resolve_device
from doctrans.utils import bars_off
from doctrans.utils.io import atomic_write_lines, decode_lines, read_lines

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class TranslateConfig:
    checkpoint: str
    input: str = "-"                  # file, directory of document files, or "-" for stdin
    output: str = "-"                 # file, directory (when input is one), or "-" for stdout
    beam: int = 5
    lenpen: float = 1.0               # hypothesis score = log p / |y|^lenpen
    max_len_ratio: float = 1.5
    max_len_extra: int = 10
    batch_sentences: int = 64
    input_format: str = "raw"         # raw | tok (segmented, not BPE) | bpe
    tokenized: bool = False           # write tokenized (not detokenized) output
    prepared: str = ""                # dataset dir with the BPE codes; default: the checkpoint's
    threads: int = 0
    device: str = "auto"              # auto (cuda when available) | cpu | cuda
    docs: str = ""                    # doc_id<TAB>position per input line: documents for a context model
    # dropped pronouns (models.md §3.4): complete the input with a DP generator first
    dp_generator: str = ""            # DP generator checkpoint (doctrans train pipelines/dp/...)
    dp_input: str = "dp"              # dp: pronouns inserted; dpp: #DP# at detected positions
    dp_nbest: int = 1                 # N DP-completed variants per sentence (1 = 1-best)
    dp_combine: str = "mixture"       # mixture (one beam, log Σ w p) | max (best variant) | 1best
    dp_weights: str = "uniform"       # uniform 1/N (the thesis) | generator (normalised scores)
    dp_docs: str = ""                 # doc<TAB>position per input line, for the generator's context
    write_lattice: str = ""           # also write the DP input as Moses PLF confusion networks
    max_source_len: int = 0           # split lines over this many BPE units (0 = the model's limit)
    encoding_errors: str = "strict"   # strict: undecodable input is an error | replace: U+FFFD, warn
    resume: bool = False              # directory input: skip documents whose output is complete
    workers: int = 1                  # directory input: translating processes on this machine
    group_lines: int = GROUP_LINES    # directory input: documents translated together up to N lines
    explain_context: int = 0          # pictures of the context attention of N sampled sentences
    explain_dir: str = ""             # where they go [default: OUTPUT.explain/]
    context_options: tuple[str, ...] = ()   # KEY=VALUE overrides of the checkpoint's context config


def decode_corpus(model, src: list[np.ndarray] | list[list[np.ndarray]], tgt_vocab: Vocab, beam: int,
                  lenpen: float, max_len_ratio: float, max_len_extra: int, batch_sentences: int,
                  progress: bool = False, weights: list[list[float]] | None = None,
                  return_scores: bool = False):
    """Translate id sequences (each ending in ``</s>``) → target token strings, in input order.

    Sentences are sorted by length and batched ``batch_sentences`` at a time to limit padding.
    With ``weights``, each item of ``src`` is a list of variants decoded as one mixture
    (``beam_search(variants=R)``), ``weights[i]`` their mixture weights. Variants of weight 0
    are dropped first and sentences are grouped by their number of remaining variants, so a
    sentence with one completion costs one decoder row per hypothesis, not R (the result is the
    same: a zero-weight variant adds exactly nothing to the mixture). A batch then holds about
    ``batch_sentences`` variant rows. With ``return_scores`` also the normalised scores.
    """
    mixture = weights is not None
    if mixture:
        rows = [[x for x, w in zip(v, ws) if w > 0] for v, ws in zip(src, weights)]
        wts = [[w for w in ws if w > 0] for ws in weights]
    else:
        rows, wts = [[v] for v in src], [[1.0] for _ in src]
    out: list[str] = [""] * len(src)
    scores: list[float] = [0.0] * len(src)
    pad = tgt_vocab.pad_id
    device = next(model.parameters()).device
    bar = tqdm(total=len(src), unit="sent", disable=not progress or bars_off(), desc="translate")
    groups: dict[int, list[int]] = {}
    for i, v in enumerate(rows):
        groups.setdefault(len(v), []).append(i)
    for r_var, members in sorted(groups.items()):
        order = sorted(members, key=lambda i: max(len(x) for x in rows[i]))
        per_batch = max(1, batch_sentences // r_var) if mixture else batch_sentences
        for start in range(0, len(order), per_batch):
            idx = order[start:start + per_batch]
            width = max(len(x) for i in idx for x in rows[i])
            batch = torch.full((len(idx) * r_var, width), pad, dtype=torch.long)
            for n, i in enumerate(idx):
                for v, x in enumerate(rows[i]):
                    batch[n * r_var + v, :len(x)] = torch.from_numpy(x)
            w = torch.tensor([wts[i] for i in idx]) if r_var > 1 else None
            res = beam_search(model, batch.to(device), tgt_vocab, beam, lenpen, max_len_ratio, max_len_extra,
                              variants=r_var, weights=w)
            for n, i in enumerate(idx):
                out[i] = tgt_vocab.decode(res.tokens[n])
                scores[i] = res.scores[n]
            bar.update(len(idx))
    bar.close()
    return (out, scores) if return_scores else out


def text_processors(ckpt: dict, path: str, prepared: str = "") -> tuple[TextProcessor, TextProcessor]:
    """Source and target ``TextProcessor`` of a checkpoint: from the settings it carries
    (``text``, doctrans ≥ issue 18), or from a prepared dataset — ``prepared`` when given (it
    overrides the checkpoint's), else the dataset path stored by an older checkpoint. Raises
    FileNotFoundError naming what is missing and how to supply it."""
    exp = config_of(ckpt)
    langs = [exp.data.src_suffix.split(".")[-1], exp.data.tgt_suffix.split(".")[-1]]
    text = ckpt.get("text")
    if not prepared and isinstance(text, dict) and {"src", "tgt"} <= set(text):
        return TextProcessor.from_settings(text["src"]), TextProcessor.from_settings(text["tgt"])
    where = prepared or ckpt.get("prepared", "")
    try:
        return TextProcessor.from_prepared(where, langs[0]), TextProcessor.from_prepared(where, langs[1])
    except FileNotFoundError as e:
        if prepared:
            raise
        raise FileNotFoundError(
            f"{path} carries no BPE codes or text settings (saved by an older doctrans) and the dataset it "
            f"names, {where!r}, is not usable here ({e}): pass --prepared DIR, the prepared dataset it was "
            f"trained on") from None


class Translator:
    """A loaded model plus the text processing of its training data.

    ``translate(lines) -> list[str]`` keeps line count and empty lines.
    """

    def __init__(self, cfg: TranslateConfig):
        ckpt = load_checkpoint(cfg.checkpoint)
        exp = config_of(ckpt)
        self.cfg = cfg
        self.src_vocab, self.tgt_vocab = Vocab(ckpt["vocab"]["src"]), Vocab(ckpt["vocab"]["tgt"])
        context = override_context(exp.context, cfg.context_options)       # e.g. a test-time ablation
        if context is not exp.context:
            log.info("context model %s with %s", context.type, ", ".join(cfg.context_options))
        self.model = build_model(exp.model, len(self.src_vocab), len(self.tgt_vocab), context=context)
        self.model.load_state_dict(ckpt["model"])
        self.model.to(resolve_device(cfg.device))
        self.model.eval()
        self.src_proc, self.tgt_proc = text_processors(ckpt, cfg.checkpoint, cfg.prepared)
        self.chunk_len = exp.data.max_len          # chunks of an over-long sentence: the training length
        self.protect: frozenset[str] = frozenset()
        if exp.data.bpe_protect_dp:
            from doctrans.dp.apply import DPInputVariants
            self.protect = DPInputVariants.PROTECTED

    def _to_bpe(self, lines: list[str]) -> list[str]:
        if self.cfg.input_format == "bpe":
            return lines
        if self.cfg.input_format == "tok":
            return self.src_proc.apply_bpe(lines, protect=self.protect)
        if self.cfg.input_format == "raw":
            return self.src_proc.encode(lines)
        raise ValueError(f"input_format must be raw, tok or bpe, got {self.cfg.input_format!r}")

    def max_source_units(self) -> int:
        """Source BPE units a line may have (``</s>`` not counted): the model's source positions
        (``max_source_len``, else ``max_target_len``) minus one, or ``--max-source-len`` if lower."""
        model_limit = getattr(self.model, "max_source_len", None) or self.model.max_target_len
        limit = model_limit - 1
        return min(limit, self.cfg.max_source_len) if self.cfg.max_source_len > 0 else limit

    def translate(self, lines: list[str], progress: bool = False, name: str = "<input>",
                  doc_ids: list[str] | None = None, where: list[str] | None = None) -> list[str]:
        """Translations of ``lines``, one per line, empty for an empty line. A line over
        ``max_source_units`` is split, translated piece by piece and joined (``long_lines``),
        with a warning naming ``name`` and the line; with a DP generator such a line (or one
        that DP insertions could push over: 2 × units + 1 > limit) is translated without DP.
        ``doc_ids``: the document of each line (contiguous runs); a context model translates
        each document in order with its own context (``inference/documents.py``; default: all
        lines one document; the pieces of a split line are consecutive sentences there), a
        sentence model ignores them. ``where``: each line's location for warnings (``file:line``;
        default ``name:line``), for lines of several files translated together."""
        at = where if where is not None else [f"{name}:{i + 1}" for i in range(len(lines))]
        nonempty = [i for i, line in enumerate(lines) if line.strip()]
        c = self.cfg
        limit = self.max_source_units()
        bpe = dict(zip(nonempty, self._to_bpe([lines[i] for i in nonempty])))
        hyps: dict[int, str] = {}
        plain = nonempty
        if reads_documents(self.model):
            if c.dp_generator:
                raise ValueError("--dp-generator is for sentence-level +DP models, not context models")
            hyps.update(self._translate_documents(bpe, nonempty, doc_ids, limit, at, progress))
            plain = []
        elif c.dp_generator:
            plain = [i for i in nonempty if 2 * len(bpe[i].split()) + 1 > limit]
            short = [i for i in nonempty if 2 * len(bpe[i].split()) + 1 <= limit]
            for i in plain:
                log.warning("%s: too long for DP completion within the model's %d positions: translated "
                            "without it", at[i], limit + 1)
            if short:
                hyps.update(zip(short, self._translate_dp(lines, short, progress)))
        if plain:
            split = split_long_lines([bpe[i] for i in plain], limit, chunk_len=self.chunk_len,
                                     locations=[at[i] for i in plain])
            ids = [self.src_vocab.encode(s) for s in split.pieces]
            res = decode_corpus(self.model, ids, self.tgt_vocab, c.beam, c.lenpen, c.max_len_ratio,
                                c.max_len_extra, c.batch_sentences, progress)
            hyps.update(zip(plain, split.join(res, len(plain))))
        self.last_bpe = (bpe, hyps)                   # BPE source and 1-best per line (--explain-context)
        merged = [self.tgt_proc.merge_bpe(hyps[i]) for i in nonempty]
        if not c.tokenized:
            merged = self.tgt_proc.detokenize(merged)
        out = [""] * len(lines)
        for i, h in zip(nonempty, merged):
            out[i] = h
        return out

    def _translate_documents(self, bpe: dict[int, str], nonempty: list[int], doc_ids: list[str] | None,
                             limit: int, at: list[str], progress: bool) -> dict[int, str]:
        """Line index → translation of the non-empty lines, each document with its context."""
        split = split_long_lines([bpe[i] for i in nonempty], limit, chunk_len=self.chunk_len,
                                 locations=[at[i] for i in nonempty])
        doc_of = doc_ids if doc_ids is not None else [""] * (max(nonempty, default=0) + 1)
        docs: list[list] = []
        last = None
        for piece, k in zip(split.pieces, split.owner):
            d = doc_of[nonempty[k]]
            if not docs or d != last:
                docs.append([])
            docs[-1].append(self.src_vocab.encode(piece))
            last = d
        c = self.cfg
        out = translate_documents(self.model, docs, self.tgt_vocab, c.beam, c.lenpen, c.max_len_ratio,
                                  c.max_len_extra, c.batch_sentences, progress)
        return dict(zip(nonempty, split.join([h for doc in out for h in doc], len(nonempty))))

    def _translate_dp(self, lines: list[str], nonempty: list[int], progress: bool) -> list[str]:
        """Translation of input variants (see TranslateConfig dp_*): an input transform turns
        each tokenized line into weighted source variants; they are BPE-encoded (its protected
        tokens kept whole) and decoded by its combine mode: ``1best`` the first variant,
        ``mixture`` all in one beam (log Σ w p), ``max`` each alone, the best-scoring kept."""
        from doctrans.dp.apply import DPInputVariants

        c = self.cfg
        transform = getattr(self, "_variants", None) or DPInputVariants(
            c.dp_generator, c.dp_input, c.dp_nbest, c.dp_combine, c.dp_weights, c.dp_docs, c.write_lattice)
        if c.input_format == "bpe":
            raise ValueError("--dp-generator needs raw or tok input (the generator reads words, not BPE)")
        self._variants = transform
        sub = [lines[i] for i in nonempty]
        tok: list[str | None] = [None] * len(lines)
        for i, t in zip(nonempty, sub if c.input_format == "tok" else self.src_proc.tokenize(sub)):
            tok[i] = t
        per_line = transform(tok)
        variants = [per_line[i] for i in nonempty]
        bpe = iter(self.src_proc.apply_bpe([x for vs in variants for x, _ in vs], protect=transform.protect))
        src = [[self.src_vocab.encode(next(bpe)) for _ in vs] for vs in variants]
        weights = [[w for _, w in vs] for vs in variants]
        args = (self.tgt_vocab, c.beam, c.lenpen, c.max_len_ratio, c.max_len_extra, c.batch_sentences, progress)
        if transform.combine == "1best":
            return decode_corpus(self.model, [s[0] for s in src], *args)
        if transform.combine == "mixture":
            return decode_corpus(self.model, src, *args, weights=weights)
        real = [(k, v) for k, w in enumerate(weights) for v, wv in enumerate(w) if wv > 0]
        hyps, scores = decode_corpus(self.model, [src[k][v] for k, v in real], *args, return_scores=True)
        best: dict[int, tuple[float, str]] = {}
        for (k, _), h, s in zip(real, hyps, scores):
            if k not in best or s > best[k][0]:
                best[k] = (s, h)
        return [best[k][1] for k in range(len(src))]


def read_input(path: str, errors: str = "strict") -> list[str]:
    """Lines of a file, or of stdin for ``-`` (named ``<stdin>`` in errors); see
    ``utils.io.decode_lines`` for ``errors``. Raises TextDecodeError naming the file and line."""
    if path == "-":
        buf = getattr(sys.stdin, "buffer", None)
        data = buf.read() if buf is not None else sys.stdin.read().encode("utf-8")
        return decode_lines(data, "<stdin>", errors)
    return read_lines(path, errors=errors)


def read_documents(cfg: TranslateConfig) -> tuple[list[str], list[str] | None]:
    """The input lines and their document ids: from ``cfg.docs`` (``doc_id<TAB>position`` per
    input line, as ``PREP/{split}.docs``), or the ``<DOC>`` blocks of an SGML input (``.sgm`` /
    ``.xml``: its first system's segments are the lines), else None (one document). Raises
    ValueError naming the file and line for a docs file whose line count differs from the
    input, positions that do not go up by one, a document that is not contiguous, or an SGML
    file without ``<DOC>`` blocks."""
    from doctrans.data.documents import read_doc_positions
    from doctrans.data.sgml import read_sgml

    if cfg.input != "-" and Path(cfg.input).suffix.lower() in (".sgm", ".sgml", ".xml"):
        if cfg.docs:
            raise ValueError(f"--docs given for an SGML input {cfg.input}: its <DOC> blocks are the documents")
        first = read_sgml(cfg.input)[0]
        return list(first.segments), first.doc_ids()
    lines = read_input(cfg.input, cfg.encoding_errors)
    if not cfg.docs:
        return lines, None
    names, doc, _ = read_doc_positions(Path(cfg.docs), len(lines))
    return lines, [names[d] for d in doc]


def process_threads(threads: int, processes: int) -> int:
    """torch threads of each of ``processes`` translating processes on this machine when
    ``threads`` (0 = the usable cores) is the machine's budget: max(1, budget // processes)."""
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
    return max(1, (threads or cores) // max(1, processes))


def _gather_summaries(s: CollectionSummary) -> CollectionSummary | None:
    """All ranks' summaries added up on rank 0 (seconds: the slowest rank's), None elsewhere."""
    parts = distributed.all_gather(s)
    if distributed.rank() != 0:
        return None
    total = CollectionSummary(seconds=max(p.seconds for p in parts))
    for p in parts:
        total.add(p)
    return total


def translate_directory(cfg: TranslateConfig) -> Path:
    """Translate the directory ``cfg.input`` into ``cfg.output`` as a collection, with
    ``cfg.workers`` processes, and sharded by rank under torchrun (WORLD_SIZE > 1: a gloo/nccl
    process group only to gather the summary). Raises like ``translate_collection``."""
    world = distributed.env_world()
    local = int(os.environ.get("LOCAL_WORLD_SIZE", "1") or 1) if world > 1 else 1
    threads = process_threads(cfg.threads, local * max(1, cfg.workers))
    if world > 1 or cfg.workers > 1 or cfg.threads:
        torch.set_num_threads(threads)
    try:
        if world > 1:
            distributed.setup(resolve_device(cfg.device))
        translate_collection(partial(Translator, cfg), Path(cfg.input), Path(cfg.output), cfg.resume,
                             cfg.encoding_errors, progress=distributed.env_rank() == 0, workers=cfg.workers,
                             threads=threads, shard=(distributed.rank(), distributed.world()),
                             gather=_gather_summaries if world > 1 else None, group_lines=cfg.group_lines)
    finally:
        distributed.shutdown()
    return Path(cfg.output)


def run(cfg: TranslateConfig) -> Path | None:
    """Translate ``cfg.input`` to ``cfg.output``; returns the output path (None for stdout).

    A directory is translated as a collection (``translate_directory``: bad files skipped,
    ``resume``, ``workers``, torchrun ranks, summary). Raises FileNotFoundError for a missing
    input, ValueError (TextDecodeError) for undecodable input under ``encoding_errors="strict"``
    and for a file or stdin under torchrun (only a directory is sharded), CollectionError when
    documents of a collection failed (the others are written)."""
    inp = Path(cfg.input)
    if cfg.input != "-" and not inp.exists():
        raise FileNotFoundError(f"input not found: {inp}")
    if cfg.input != "-" and inp.is_dir():
        if cfg.output == "-":
            raise ValueError(f"input {inp} is a directory: give --output DIR")
        return translate_directory(cfg)
    if distributed.env_world() > 1:
        raise ValueError("torchrun (WORLD_SIZE > 1) shards a directory of documents: translate a single file "
                         "or stdin without torchrun")
    if cfg.threads:
        torch.set_num_threads(cfg.threads)
    translator = Translator(cfg)
    lines, doc_ids = read_documents(cfg)
    t0 = time.time()
    out = translator.translate(lines, progress=cfg.output != "-", name="<stdin>" if cfg.input == "-" else cfg.input,
                               doc_ids=doc_ids)
    dt = time.time() - t0
    log.info("translated %d lines in %.1f s (%.1f sent/s, beam %d)", len(lines), dt,
             len(lines) / max(dt, 1e-9), cfg.beam)
    if cfg.explain_context > 0:
        explain_translation(translator, doc_ids, cfg)
    if cfg.output == "-":
        sys.stdout.write("".join(f"{line}\n" for line in out))
        return None
    atomic_write_lines(cfg.output, out)
    return Path(cfg.output)


def explain_translation(translator: Translator, doc_ids: list[str] | None, cfg: TranslateConfig) -> list[Path]:
    """``--explain-context N``: pictures of the context attention of N sampled translated lines
    (``evaluation/explain_context.py``) into ``cfg.explain_dir`` (default ``OUTPUT.explain``, or
    ``explain/`` for stdout). Lines split for length are left out (their pieces have no line)."""
    from doctrans.evaluation.forced import document_numbers
    from doctrans.evaluation.explain_context import explain_lines

    bpe, hyps = translator.last_bpe
    keep = [i for i in sorted(hyps) if len(bpe[i].split()) <= translator.max_source_units()]
    doc = document_numbers([doc_ids[i] for i in keep] if doc_ids is not None else ["doc"] * len(keep))
    src = [translator.src_vocab.encode(bpe[i]) for i in keep]
    hyp = [translator.tgt_vocab.encode(hyps[i]) for i in keep]
    out = Path(cfg.explain_dir or (f"{cfg.output}.explain" if cfg.output != "-" else "explain"))
    paths = explain_lines(translator.model, src, hyp, doc, translator.src_vocab, translator.tgt_vocab,
                          cfg.explain_context, out)
    log.info("--explain-context: %d pictures in %s", len(paths), out)
    return paths
