"""``doctrans train``: build data, model and optimizer from an ExperimentConfig and fit.

The run directory gets ``config.yaml`` (resolved config), ``metrics.jsonl``, ``train.log``,
``best.pt`` (best dev ``train.metric``) and ``last.pt``. ``resume=True`` continues from
``last.pt`` with exactly the updates an uninterrupted run would have made (same batches,
same RNG state, same optimizer moments); it refuses a changed config (see
``checkpoint.RESUME_MAY_CHANGE``).
"""
from __future__ import annotations

import logging
from pathlib import Path

import torch
import yaml

from doctrans.config import ExperimentConfig, to_dict
from doctrans.data.batching import load_parallel, make_batches
from doctrans.data.vocab import Vocab
from doctrans.models.build import build_model
from doctrans.training.checkpoint import check_resume_compatible, load_checkpoint
from doctrans.training.optim import build_optimizer
from doctrans.training.state import TrainState
from doctrans.training.trainer import Trainer
from doctrans.utils.io import atomic_write_text, read_lines

log = logging.getLogger(__name__)


def _vocabs(cfg: ExperimentConfig) -> tuple[Vocab, Vocab]:
    prep = Path(cfg.data.prepared)
    src_lang, tgt_lang = cfg.data.src_suffix.split(".")[-1], cfg.data.tgt_suffix.split(".")[-1]
    src_counts = Path(cfg.data.src_vocab) if cfg.data.src_vocab else prep / f"vocab.{src_lang}.txt"
    return (Vocab.from_counts_file(src_counts, cfg.data.min_freq),
            Vocab.from_counts_file(prep / f"vocab.{tgt_lang}.txt", cfg.data.min_freq))


def _add_file_log(run_dir: Path) -> None:
    handler = logging.FileHandler(run_dir / "train.log", encoding="utf-8")
    handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    logging.getLogger("doctrans").addHandler(handler)


def run(cfg: ExperimentConfig, resume: bool = False) -> Path:
    """Train; returns the run directory. Raises FileNotFoundError if the prepared data is
    missing, ValueError on an incompatible resume."""
    prep, run_dir = Path(cfg.data.prepared), Path(cfg.run_dir)
    if not (prep / "meta.json").is_file():
        raise FileNotFoundError(f"no prepared dataset at {prep} (run `doctrans preprocess -o {prep}` first)")
    run_dir.mkdir(parents=True, exist_ok=True)
    _add_file_log(run_dir)
    t = cfg.train
    if t.metric == "bleu" and not t.eval_bleu:
        raise ValueError("train.metric is 'bleu' but train.eval_bleu is false: set train.metric=xent_nats "
                         "train.metric_mode=min, or train.eval_bleu=true")
    if t.autocast not in ("none", "bf16"):
        raise ValueError(f"train.autocast must be 'none' or 'bf16', got {t.autocast!r}")
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

    d = cfg.data
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
    batches = make_batches(train, t.max_tokens, t.seed)
    log.info("%d batches of ≤ %d tokens per epoch", len(batches), t.max_tokens)

    model = build_model(cfg.model, len(src_vocab), len(tgt_vocab), src_vocab.pad_id)
    optimizer = build_optimizer(model.parameters(), t.lr, t.adam_betas, t.adam_eps, t.weight_decay)
    state = TrainState()
    if ckpt is not None:
        model.load_state_dict(ckpt["model"])
        optimizer.load_state_dict(ckpt["optimizer"])
        state = TrainState.from_dict(ckpt["state"])
        state.stop_reason = ""
        torch.set_rng_state(ckpt["rng"])
        log.info("resumed from %s at update %d (epoch %d, batch %d)", run_dir / "last.pt",
                 state.step, state.epoch, state.batch_in_epoch)
    log.info("model: %s, %.2fM parameters", type(model).__name__,
             sum(p.numel() for p in model.parameters()) / 1e6)
    Trainer(cfg, model, optimizer, state, train, batches, dev, dev_refs,
            src_vocab, tgt_vocab, run_dir).fit()
    return run_dir
