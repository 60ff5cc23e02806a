"""The training loop: updates, logging, dev evaluation, checkpoints and stop conditions."""
from __future__ import annotations

import logging
import math
import time
from pathlib import Path

import torch
from tqdm import tqdm

from doctrans.config import ExperimentConfig
from doctrans.data.batching import ParallelData, collate, epoch_batches, make_batches
from doctrans.data.vocab import Vocab
from doctrans.evaluation.score import bleu_tok_lc
from doctrans.inference.translate import decode_corpus
from doctrans.training.checkpoint import save_checkpoint
from doctrans.training.early_stopping import EarlyStopping
from doctrans.training.loss import dev_xent, label_smoothed_xent
from doctrans.training.metrics import MetricsWriter
from doctrans.training.optim import inverse_sqrt_lr
from doctrans.training.state import TrainState

log = logging.getLogger(__name__)


class Trainer:
    """Owns model, optimizer, data and state; ``fit()`` trains until a stop condition."""

    def __init__(self, cfg: ExperimentConfig, model, optimizer, state: TrainState,
                 train: ParallelData, train_batches, dev: ParallelData | None,
                 dev_refs: list[str] | None, src_vocab: Vocab, tgt_vocab: Vocab, run_dir: Path):
        self.cfg, self.t = cfg, cfg.train
        self.model, self.opt, self.state = model, optimizer, state
        self.train, self.batches, self.dev, self.dev_refs = train, train_batches, dev, dev_refs
        self.src_vocab, self.tgt_vocab, self.run_dir = src_vocab, tgt_vocab, run_dir
        self.metrics = MetricsWriter(run_dir / "metrics.jsonl")
        self.stopper = EarlyStopping(self.t.metric, self.t.metric_mode, self.t.patience)
        self._order, self._order_epoch = [], -1
        self.dev_batches = make_batches(dev, self.t.max_tokens, 0) if dev is not None else []

    # -- stop conditions ------------------------------------------------------------------
    def _stop_reason(self) -> str:
        s, t = self.state, self.t
        if t.max_steps and s.step >= t.max_steps:
            return f"max_steps {t.max_steps}"
        if t.max_epochs and s.epoch >= t.max_epochs:
            return f"max_epochs {t.max_epochs}"
        if t.max_time_min and s.wall_time_s >= t.max_time_min * 60:
            return f"max_time_min {t.max_time_min}"
        if self.stopper.should_stop(s):
            return f"no {t.metric} improvement in {t.patience} evaluations"
        return ""

    def _tick(self) -> None:
        now = time.perf_counter()
        self.state.wall_time_s += now - self._clock
        self._clock = now

    def fit(self) -> TrainState:
        """Train; evaluate every ``eval_every`` updates and at the end; save best/last.

        ``train.max_time_min`` bounds wall-clock time including evaluations and checkpoints
        (summed over resumed runs); the final evaluation runs after the budget is spent.
        """
        self._clock = time.perf_counter()
        bar = tqdm(initial=self.state.step, total=self.t.max_steps or None, unit="upd", desc="train", disable=None)
        window = {"loss": 0.0, "nll": 0.0, "tok": 0, "time": 0.0}
        while not (reason := self._stop_reason()):
            stats = self._update()
            self._tick()
            for k in window:
                window[k] += stats[k]
            bar.update(1)
            bar.set_postfix(loss=f"{stats['loss'] / max(stats['tok'], 1):.3f}", epoch=self.state.epoch)
            if self.state.step % self.t.log_every == 0:
                self._log_train(window)
                window = dict.fromkeys(window, 0.0)
            if self.t.eval_every and self.state.step % self.t.eval_every == 0:
                self._evaluate()
            if self.t.save_every and self.state.step % self.t.save_every == 0:
                self._save("last.pt")
            self._tick()
        bar.close()
        self.state.stop_reason = reason
        log.info("stopping after %d updates: %s", self.state.step, reason)
        if not self.t.eval_every or self.state.step % self.t.eval_every:
            self._evaluate()
        self._save("last.pt")
        return self.state

    # -- one update -----------------------------------------------------------------------
    def _next_batch_index(self):
        if self.state.batch_in_epoch >= len(self.batches):
            self.state.epoch += 1
            self.state.batch_in_epoch = 0
        if self._order_epoch != self.state.epoch:          # shuffle once per epoch, not per update
            self._order = epoch_batches(self.batches, self.t.seed, self.state.epoch)
            self._order_epoch = self.state.epoch
        index = self._order[self.state.batch_in_epoch]
        self.state.batch_in_epoch += 1
        return index

    def _update(self) -> dict:
        """accum batches → one optimizer step. Loss is the mean over all their target tokens."""
        t0 = time.perf_counter()
        self.model.train()
        batches = [collate(self.train, self._next_batch_index(), self.tgt_vocab) for _ in range(self.t.accum)]
        n_tok = sum(b.n_tgt_tokens for b in batches)
        total, nll = 0.0, 0.0
        for batch in batches:
            with torch.autocast("cpu", dtype=torch.bfloat16, enabled=self.t.autocast == "bf16"):
                memory, keep = self.model.encode(batch.src)
                hidden = self.model.decode_train(memory, keep, batch.tgt_in)
                out = label_smoothed_xent(self.model, hidden, batch.tgt_out, self.tgt_vocab.pad_id,
                                          self.t.label_smoothing)
            (out.total / n_tok).backward()
            total += float(out.total.detach())
            nll += out.terms["nll_nats"]
        if self.t.clip_norm > 0:
            torch.nn.utils.clip_grad_norm_(self.model.parameters(), self.t.clip_norm)
        self.state.step += 1
        lr = inverse_sqrt_lr(self.state.step, self.t.lr, self.t.warmup)
        for group in self.opt.param_groups:
            group["lr"] = lr
        self.opt.step()
        self.opt.zero_grad(set_to_none=True)
        dt = time.perf_counter() - t0
        self.state.train_time_s += dt
        self.state.tgt_tokens += n_tok
        return {"loss": total, "nll": nll, "tok": n_tok, "time": dt}

    def _log_train(self, w: dict) -> None:
        tok = max(int(w["tok"]), 1)
        rec = {"step": self.state.step, "epoch": self.state.epoch,
               "loss_nats": w["loss"] / tok, "xent_nats": w["nll"] / tok,
               "ppl": math.exp(min(w["nll"] / tok, 50)), "tok_per_s": w["tok"] / max(w["time"], 1e-9),
               "lr": inverse_sqrt_lr(self.state.step, self.t.lr, self.t.warmup),
               "train_time_s": round(self.state.train_time_s, 1)}
        self.metrics.write("train", **rec)
        log.info("step %(step)d ep %(epoch)d | loss %(loss_nats).3f ppl %(ppl).1f | "
                 "%(tok_per_s).0f tgt tok/s | lr %(lr).2e | %(train_time_s).0f s", rec)

    # -- evaluation and checkpoints ------------------------------------------------------
    def _evaluate(self) -> None:
        if self.dev is None:
            return
        t0 = time.perf_counter()
        batches = (collate(self.dev, idx, self.tgt_vocab) for idx in self.dev_batches)
        xent, _ = dev_xent(self.model, batches, self.tgt_vocab.pad_id)
        rec = {"step": self.state.step, "xent_nats": xent, "ppl": math.exp(min(xent, 50))}
        if self.t.eval_bleu and self.dev_refs is not None:
            rec["bleu"] = self._dev_bleu()
        rec["eval_s"] = round(time.perf_counter() - t0, 1)
        value = rec.get(self.t.metric)
        if value is None:
            raise ValueError(f"train.metric {self.t.metric!r} is not computed (have: {sorted(rec)})")
        is_best = self.stopper.update(self.state, value)
        rec["best"] = is_best
        self.metrics.write("dev", **rec)
        log.info("dev step %d | xent %.3f ppl %.1f | bleu %s | %s", self.state.step, xent, rec["ppl"],
                 f"{rec['bleu']:.2f}" if "bleu" in rec else "-", "new best" if is_best else
                 f"best {self.state.best_metric:.3f} @ {self.state.best_step}")
        if is_best:
            self._save("best.pt")

    def _dev_bleu(self) -> float:
        n = self.t.eval_max_sentences or len(self.dev)
        hyps = decode_corpus(self.model, self.dev.src[:n], self.tgt_vocab, self.t.eval_beam,
                             self.cfg.decode.lenpen, self.cfg.decode.max_len_ratio,
                             self.cfg.decode.max_len_extra, self.cfg.decode.batch_sentences)
        hyps = [h.replace("@@ ", "").removesuffix("@@") for h in hyps]
        refs = [self.dev_refs[int(i)] for i in self.dev.line[:n]]
        return bleu_tok_lc(hyps, [refs])

    def _save(self, name: str) -> None:
        save_checkpoint(self.run_dir / name, self.model, self.opt, self.state, self.cfg,
                        self.src_vocab.tokens, self.tgt_vocab.tokens)
