"""``doctrans translate``: batched beam search over a file, stdin, or a directory of documents.

Input lines are normalised, segmented (jieba), BPE-encoded with the training data's codes,
translated with beam search (``beam_search.py``), BPE-merged and Moses-detokenized (unless
``tokenized``). The output always has exactly as many lines as the input; an empty input line
gives an empty output line without running the model. A directory input is mirrored file by
file under the output directory, so document files keep their boundaries.
"""
from __future__ import annotations

import logging
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch
from tqdm import tqdm

from doctrans.data.text import TextProcessor
from doctrans.data.vocab import Vocab
from doctrans.inference.beam_search import beam_search
from doctrans.models.build import build_model
from doctrans.training.checkpoint import config_of, load_checkpoint
from doctrans.utils.io import atomic_write_lines, read_lines

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


def decode_corpus(model, src: list[np.ndarray], tgt_vocab: Vocab, beam: int, lenpen: float,
                  max_len_ratio: float, max_len_extra: int, batch_sentences: int,
                  progress: bool = False) -> list[str]:
    """Translate id sequences (each ending in ``</s>``) → target token strings, in input order.

    Sentences are sorted by length and batched ``batch_sentences`` at a time to limit padding.
    """
    order = np.argsort([len(s) for s in src], kind="stable")
    out: list[str] = [""] * len(src)
    pad = tgt_vocab.pad_id
    bar = tqdm(total=len(src), unit="sent", disable=not progress, desc="translate")
    for start in range(0, len(order), batch_sentences):
        idx = order[start:start + batch_sentences]
        width = max(len(src[i]) for i in idx)
        batch = torch.full((len(idx), width), pad, dtype=torch.long)
        for r, i in enumerate(idx):
            batch[r, :len(src[i])] = torch.from_numpy(src[i])
        res = beam_search(model, batch, tgt_vocab, beam, lenpen, max_len_ratio, max_len_extra)
        for r, i in enumerate(idx):
            out[i] = tgt_vocab.decode(res.tokens[r])
        bar.update(len(idx))
    bar.close()
    return out


class Translator:
    """A loaded model plus the text processing of its training data.

    ``translate(lines) -> list[str]`` keeps line count and empty lines.
    """

    def __init__(self, cfg: TranslateConfig):
        ckpt = load_checkpoint(cfg.checkpoint)
        exp = config_of(ckpt)
        self.cfg = cfg
        self.src_vocab, self.tgt_vocab = Vocab(ckpt["vocab"]["src"]), Vocab(ckpt["vocab"]["tgt"])
        self.model = build_model(exp.model, len(self.src_vocab), len(self.tgt_vocab))
        self.model.load_state_dict(ckpt["model"])
        self.model.eval()
        prepared = cfg.prepared or ckpt["prepared"]
        src_lang, tgt_lang = exp.data.src_suffix.split(".")[-1], exp.data.tgt_suffix.split(".")[-1]
        self.src_proc = TextProcessor.from_prepared(prepared, src_lang)
        self.tgt_proc = TextProcessor.from_prepared(prepared, tgt_lang)

    def _to_bpe(self, lines: list[str]) -> list[str]:
        if self.cfg.input_format == "bpe":
            return lines
        if self.cfg.input_format == "tok":
            return self.src_proc.apply_bpe(lines)
        if self.cfg.input_format == "raw":
            return self.src_proc.encode(lines)
        raise ValueError(f"input_format must be raw, tok or bpe, got {self.cfg.input_format!r}")

    def translate(self, lines: list[str], progress: bool = False) -> list[str]:
        nonempty = [i for i, line in enumerate(lines) if line.strip()]
        bpe = self._to_bpe([lines[i] for i in nonempty])
        ids = [self.src_vocab.encode(s) for s in bpe]
        c = self.cfg
        hyps = decode_corpus(self.model, ids, self.tgt_vocab, c.beam, c.lenpen, c.max_len_ratio,
                             c.max_len_extra, c.batch_sentences, progress)
        merged = [self.tgt_proc.merge_bpe(h) for h in hyps]
        if not c.tokenized:
            merged = self.tgt_proc.detokenize(merged)
        out = [""] * len(lines)
        for i, h in zip(nonempty, merged):
            out[i] = h
        return out


def _read(path: str) -> list[str]:
    if path == "-":
        return [line.rstrip("\n").rstrip("\r") for line in sys.stdin]
    return read_lines(path)


def run(cfg: TranslateConfig) -> Path | None:
    """Translate ``cfg.input`` to ``cfg.output``; returns the output path (None for stdout)."""
    if cfg.threads:
        torch.set_num_threads(cfg.threads)
    translator = Translator(cfg)
    inp = Path(cfg.input)
    if cfg.input != "-" and inp.is_dir():
        if cfg.output == "-":
            raise ValueError(f"input {inp} is a directory: give --output DIR")
        files = sorted(p for p in inp.rglob("*") if p.is_file())
        for p in tqdm(files, unit="file", desc="documents"):
            dest = Path(cfg.output) / p.relative_to(inp)
            atomic_write_lines(dest, translator.translate(_read(str(p))))
        return Path(cfg.output)
    if cfg.input != "-" and not inp.is_file():
        raise FileNotFoundError(f"input not found: {inp}")
    lines = _read(cfg.input)
    t0 = time.time()
    out = translator.translate(lines, progress=cfg.output != "-")
    dt = time.time() - t0
    log.info("translated %d lines in %.1f s (%.1f sent/s, beam %d)", len(lines), dt,
             len(lines) / max(dt, 1e-9), cfg.beam)
    if cfg.output == "-":
        sys.stdout.write("".join(f"{line}\n" for line in out))
        return None
    atomic_write_lines(cfg.output, out)
    return Path(cfg.output)
