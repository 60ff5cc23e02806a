"""``doctrans train``: an NMT experiment as a ``Task`` of the shared training loop.

The run directory gets ``config.yaml`` (resolved config), ``metrics.jsonl``, ``train.log``,
``best.pt`` (best dev ``train.metric``), ``last.pt``, ``tensorboard/`` (event files) and
``learning_curves.png``. ``resume=True`` continues from ``last.pt`` with exactly the updates an
uninterrupted run would have made (same batches, same RNG state, same optimizer moments); it
refuses a changed config (see ``checkpoint.RESUME_MAY_CHANGE``).
"""
from __future__ import annotations

import logging
from pathlib import Path

import numpy as np
import torch
import yaml

from doctrans.config import ExperimentConfig, to_dict
from doctrans.data.batching import ParallelData, collate, epoch_batches, load_parallel, make_batches
from doctrans.data.text import TextProcessor
from doctrans.data.vocab import Vocab
from doctrans.evaluation.score import bleu_tok_lc
from doctrans.inference.translate import decode_corpus
from doctrans.models.build import build_model
from doctrans.training.checkpoint import check_resume_compatible, load_checkpoint
from doctrans.training.loss import dev_xent, forward_loss
from doctrans.training.trainer import StepLoss, Trainer, resolve_device
from doctrans.utils.cpu import warn_if_slow_bf16
from doctrans.utils.io import atomic_write_text, read_lines

log = logging.getLogger(__name__)


def _vocabs(cfg: ExperimentConfig) -> tuple[Vocab, Vocab]:
    prep = Path(cfg.data.prepared)
    src_lang, tgt_lang = cfg.data.src_suffix.split(".")[-1], cfg.data.tgt_suffix.split(".")[-1]
    src_counts = Path(cfg.data.src_vocab) if cfg.data.src_vocab else prep / f"vocab.{src_lang}.txt"
    return (Vocab.from_counts_file(src_counts, cfg.data.min_freq),
            Vocab.from_counts_file(prep / f"vocab.{tgt_lang}.txt", cfg.data.min_freq))


def add_file_log(run_dir: Path) -> None:
    """Also log the ``doctrans`` loggers to ``run_dir/train.log``."""
    handler = logging.FileHandler(run_dir / "train.log", encoding="utf-8")
    handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    logging.getLogger("doctrans").addHandler(handler)


class NMTTask:
    """Sentence pairs → label-smoothed cross-entropy through the model contract
    (``training.loss.forward_loss``); dev cross-entropy and dev BLEU (thesis setting, 1 ref)."""

    kind = "nmt"

    def __init__(self, cfg: ExperimentConfig, model: torch.nn.Module, train: ParallelData,
                 dev: ParallelData | None, dev_refs: list[str] | None, src_vocab: Vocab, tgt_vocab: Vocab,
                 device: torch.device):
        self.config, self.t, self.model, self.device = cfg, cfg.train, model, device
        self.train, self.dev, self.dev_refs = train, dev, dev_refs
        self.src_vocab, self.tgt_vocab = src_vocab, tgt_vocab
        self.batches = make_batches(train, self.t.max_tokens, self.t.seed)
        self.dev_batches = make_batches(dev, self.t.max_tokens, 0) if dev is not None else []
        log.info("%d batches of ≤ %d tokens per epoch", len(self.batches), self.t.max_tokens)

    def epoch_batches(self, epoch: int) -> list[np.ndarray]:
        return epoch_batches(self.batches, self.t.seed, epoch)

    def _to_device(self, batch):
        if self.device.type != "cpu":
            for name in ("src", "tgt_in", "tgt_out"):
                setattr(batch, name, getattr(batch, name).to(self.device, non_blocking=True))
        return batch

    def collate(self, key: np.ndarray, epoch: int, index: int):
        return self._to_device(collate(self.train, key, self.tgt_vocab))

    def loss(self, batch) -> StepLoss:
        out = forward_loss(self.model, batch, self.tgt_vocab.pad_id, self.t.label_smoothing)
        return StepLoss(out.total, out.terms, out.n_tokens)

    def evaluate(self) -> dict[str, float]:
        if self.dev is None:
            return {}
        batches = (self._to_device(collate(self.dev, idx, self.tgt_vocab)) for idx in self.dev_batches)
        xent, _ = dev_xent(self.model, batches, self.tgt_vocab.pad_id)
        rec = {"xent_nats": xent, "ppl": float(np.exp(min(xent, 50)))}
        if self.t.eval_bleu and self.dev_refs is not None:
            rec["bleu"] = self._dev_bleu()
        return rec

    def _dev_bleu(self) -> float:
        d = self.config.decode
        n = self.t.eval_max_sentences or len(self.dev)
        hyps = decode_corpus(self.model, self.dev.src[:n], self.tgt_vocab, self.t.eval_beam,
                             d.lenpen, d.max_len_ratio, d.max_len_extra, d.batch_sentences)
        hyps = [h.replace("@@ ", "").removesuffix("@@") for h in hyps]
        refs = [self.dev_refs[int(i)] for i in self.dev.line[:n]]
        return bleu_tok_lc(hyps, [refs])

    def checkpoint_extra(self) -> dict:
        """Vocabularies, the dataset path, and ``text``: each side's ``TextProcessor.settings()``
        (lowercasing, the BPE codes' text), so the checkpoint translates without the dataset."""
        if getattr(self, "_text", None) is None:
            d = self.config.data
            self._text = {side: TextProcessor.from_prepared(d.prepared, suffix.split(".")[-1]).settings()
                          for side, suffix in (("src", d.src_suffix), ("tgt", d.tgt_suffix))}
        return {"vocab": {"src": list(self.src_vocab.tokens), "tgt": list(self.tgt_vocab.tokens)},
                "prepared": str(self.config.data.prepared), "text": self._text}


def _load_data(cfg: ExperimentConfig, src_vocab: Vocab, tgt_vocab: Vocab):
    d, prep = cfg.data, Path(cfg.data.prepared)
    src_dir = Path(d.src_dir) if d.src_dir else prep
    train, skipped = load_parallel(src_dir / f"{d.train_split}.{d.src_suffix}", prep / f"{d.train_split}.{d.tgt_suffix}",
                                   src_vocab, tgt_vocab, max_len=d.max_len)
    log.info("train: %d pairs (%d skipped by max_len %d/empty); vocab src %d tgt %d",
             len(train), skipped, d.max_len, len(src_vocab), len(tgt_vocab))
    dev, dev_refs = None, None
    if (src_dir / f"{d.dev_split}.{d.src_suffix}").is_file():
        dev, _ = load_parallel(src_dir / f"{d.dev_split}.{d.src_suffix}", prep / f"{d.dev_split}.{d.tgt_suffix}",
                               src_vocab, tgt_vocab, max_len=0)
        dev_refs = read_lines(prep / f"{d.dev_split}.tok.{d.tgt_suffix.split('.')[-1]}")
    return train, dev, dev_refs


def run(cfg: ExperimentConfig, resume: bool = False) -> Path:
    """Train; returns the run directory. Raises FileNotFoundError if the prepared data is
    missing, ValueError on an incompatible resume or an invalid train section."""
    prep, run_dir = Path(cfg.data.prepared), Path(cfg.run_dir)
    if not (prep / "meta.json").is_file():
        raise FileNotFoundError(f"no prepared dataset at {prep} (run `doctrans preprocess -o {prep}` first)")
    t = cfg.train
    if t.metric == "bleu" and not t.eval_bleu:
        raise ValueError("train.metric is 'bleu' but train.eval_bleu is false: set train.metric=xent_nats "
                         "train.metric_mode=min, or train.eval_bleu=true")
    device = resolve_device(t.device)
    run_dir.mkdir(parents=True, exist_ok=True)
    add_file_log(run_dir)
    warn_if_slow_bf16(t.autocast, device)
    if t.threads:
        torch.set_num_threads(t.threads)
    torch.manual_seed(t.seed)
    ckpt = None
    if resume:
        ckpt = load_checkpoint(run_dir / "last.pt")
        check_resume_compatible(ckpt["config"], cfg)
        src_vocab, tgt_vocab = Vocab(ckpt["vocab"]["src"]), Vocab(ckpt["vocab"]["tgt"])
    else:
        src_vocab, tgt_vocab = _vocabs(cfg)
    atomic_write_text(run_dir / "config.yaml", yaml.safe_dump(to_dict(cfg), sort_keys=False))
    train, dev, dev_refs = _load_data(cfg, src_vocab, tgt_vocab)
    model = build_model(cfg.model, len(src_vocab), len(tgt_vocab), src_vocab.pad_id).to(device)
    task = NMTTask(cfg, model, train, dev, dev_refs, src_vocab, tgt_vocab, device)
    trainer = Trainer(task, t, run_dir, device)
    if ckpt is not None:
        trainer.restore(ckpt)
    log.info("model: %s (%s), %.2fM parameters, device %s", type(model).__name__, cfg.model.backbone,
             sum(p.numel() for p in model.parameters()) / 1e6, device)
    trainer.fit()
    return run_dir
