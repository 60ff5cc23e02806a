"""The one training loop of doctrans: updates, logging, dev evaluation, checkpoints, stop
conditions, TensorBoard events and the learning-curve picture — for every trainable thing.

What is trained is a ``Task`` (NMT models: ``training/train.py: NMTTask``; DP generators:
``dp/train.py``): it owns the model, the data and the dev scoring; the loop owns the
optimizer, the learning-rate schedule, gradient accumulation and clipping, ``TrainState``,
``EarlyStopping``, ``MetricsWriter`` and the checkpoints. The loop never names a task or a
model variant.

Resuming (``Trainer.restore``) continues with exactly the updates an uninterrupted run would
have made: the batch order of an epoch is a function of (seed, epoch), the position inside it
is in ``TrainState``, and the optimizer moments and torch RNG state are in the checkpoint.

Under ``torchrun`` (``runtime.distributed``) every rank runs this loop in lockstep: an update
takes ``world × accum`` consecutive batches of the epoch order, rank r the ones at offsets r,
r + world, …; the gradients are summed over ranks before clipping, so the update is the
single-process one with ``accum = world × accum``. ``TrainState`` advances by the whole group on
every rank. Rank 0 alone evaluates, logs (metrics.jsonl, TensorBoard, console), writes
checkpoints (``last.pt`` also holds every rank's RNG state) and the curves; the stop reason is
decided there and broadcast.

Faults. SIGTERM / SIGINT (``runtime.signals``) end the loop after the current update: ``last.pt``
is written (atomically, resuming exactly), the resume command logged, and ``fit`` raises
``Interrupted`` (the CLI exits 128 + the signal number). An update whose loss or gradient norm
is not finite (NaN/inf) is skipped — no optimizer step, the batches consumed — with a warning;
``train.max_nonfinite`` of them in a row stop the run with ``NonFiniteLoss`` (fairseq skips
overflowing fp16 updates and stops when its loss scale reaches the minimum). A checkpoint is
never written with non-finite weights (``runtime.checkpoint_write``).
"""
from __future__ import annotations

import logging
import math
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

import torch
from torch import Tensor, nn
from tqdm import tqdm

from doctrans.version import __version__
from doctrans.config import TrainConfig, to_dict
from doctrans.runtime import distributed as dist
from doctrans.runtime.checkpoint_write import save_checkpoint
from doctrans.runtime.signals import Interrupted, StopSignals, resume_command
from doctrans.training.checkpoint import step_checkpoints
from doctrans.training.curves import plot_learning_curves
from doctrans.training.early_stopping import EarlyStopping
from doctrans.training.metrics import MetricsWriter, TensorBoardWriter
from doctrans.training.optim import MixedAdam, learning_rate
from doctrans.training.progress import pace_note
from doctrans.training.state import TrainState
from doctrans.utils import bars_off
from doctrans.utils.cpu import resolve_autocast
from doctrans.utils.io import remove_stale_temps

log = logging.getLogger(__name__)


class NonFiniteLoss(FloatingPointError):
    """``train.max_nonfinite`` consecutive updates with a NaN/inf loss or gradient: the run diverged."""


@dataclass
class StepLoss:
    """What ``Task.loss`` returns for one batch."""

    total: Tensor                 # scalar: the summed training loss in nats (the loop divides by n_targets)
    terms: dict[str, float]       # summed loss terms in nats, e.g. {"nll_nats": …}; logged per target
    n_targets: int                # targets (tokens, labelled positions) the sum runs over


class Task(Protocol):
    """A trainable thing as the loop sees it.

    ``kind`` names the checkpoint type ("nmt", "dp_generator"); ``model`` holds every trained
    parameter (those with ``requires_grad`` False are frozen); ``config`` is the resolved
    experiment config (a dataclass) saved in checkpoints. Optional ``lr_scale``: id(parameter)
    → LR factor.
    """

    kind: str
    model: nn.Module
    config: Any

    def epoch_batches(self, epoch: int) -> list[Any]:
        """Batch keys of ``epoch`` in training order, deterministic in (seed, epoch)."""
        ...

    def collate(self, key: Any, epoch: int, index: int) -> Any:
        """The batch for ``key`` (the ``index``-th of ``epoch``), on the model's device; it has
        ``n_targets``: an int known before the forward pass, or None when only the forward pass
        knows it (``StepLoss.n_targets``; then ``train.accum`` must be 1)."""
        ...

    def loss(self, batch: Any) -> StepLoss:
        """Forward pass of one batch (training mode is set by the loop)."""
        ...

    def evaluate(self) -> dict[str, float]:
        """Dev metrics with units in their keys (``xent_nats``, ``bleu``, ``prediction_f1``…)."""
        ...

    def checkpoint_extra(self) -> dict:
        """Tensors and primitive types the checkpoint needs besides model/optimizer/state/config
        (vocabularies, the dataset dir, a tuned threshold…)."""
        ...


def peak_rss_gib() -> float | None:
    """Peak resident memory of this process so far in GiB (``getrusage``), None where the
    platform has no ``resource`` module (Windows)."""
    try:
        import resource
    except ImportError:
        return None
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss          # KiB on Linux, bytes on macOS
    return peak / (2**30 if sys.platform == "darwin" else 2**20)


class Trainer:
    """Owns optimizer, state and run directory; ``fit()`` trains ``task`` until a stop condition."""

    def __init__(self, task: Task, cfg: TrainConfig, run_dir: Path, device: torch.device):
        self.task, self.t, self.run_dir, self.device = task, cfg, Path(run_dir), device
        if cfg.keep_every and (not cfg.save_every or cfg.keep_every % cfg.save_every):
            raise ValueError(f"train.keep_every {cfg.keep_every} must be a multiple of train.save_every "
                             f"({cfg.save_every}): step checkpoints are written at save points")
        self.autocast = resolve_autocast(cfg.autocast, device)       # none | bf16 (auto resolved, logged)
        self.main = dist.is_main()
        self.opt = MixedAdam.from_config(task.model, cfg, getattr(task, "lr_scale", None))
        self.state = TrainState()
        self.metrics = MetricsWriter(self.run_dir / "metrics.jsonl") if self.main else _NoMetrics()
        self.board = TensorBoardWriter(self.run_dir / "tensorboard") if cfg.tensorboard and self.main else None
        self.stopper = EarlyStopping(cfg.metric, cfg.metric_mode, cfg.patience)
        self._order: list = []
        self._order_epoch = -1
        self._restored = False
        self._nonfinite = 0                              # consecutive skipped (non-finite) updates
        self._signals = StopSignals()
        if self.main:
            remove_stale_temps(self.run_dir)             # checkpoints a killed run was writing

    # -- checkpoints ----------------------------------------------------------------------
    def restore(self, ckpt: dict) -> None:
        """Continue from a checkpoint written by ``save`` (model, optimizer, state, RNG)."""
        self.task.model.load_state_dict(ckpt["model"])
        self.opt.load_state_dict(ckpt["optimizer"])
        self.state = TrainState.from_dict(ckpt["state"])
        self.state.stop_reason = ""
        ranks = ckpt.get("rng_ranks")
        if dist.world() > 1 and ranks is not None and len(ranks) == dist.world():
            torch.set_rng_state(ranks[dist.rank()])
        else:
            if ckpt.get("world", 1) != dist.world() and self.main:
                log.warning("resuming a run of %d process(es) with %d: updates now take %d batches, "
                            "not %d", ckpt.get("world", 1), dist.world(), dist.world() * self.t.accum,
                            ckpt.get("world", 1) * self.t.accum)
            torch.set_rng_state(ckpt["rng"])
            if dist.world() > 1:                         # no state per rank saved: own streams anew
                torch.manual_seed(self.t.seed + dist.rank() + 1000 * self.state.step)
        self._restored = True
        log.info("resumed at update %d (epoch %d, batch %d)", self.state.step, self.state.epoch,
                 self.state.batch_in_epoch)

    def save(self, name: str, extra: dict | None = None, optimizer: bool = True) -> None:
        """Write ``run_dir/name`` (rank 0 only; other ranks return); ``optimizer=False`` leaves
        the optimizer state out (a checkpoint to translate or average, not to resume)."""
        if not self.main:
            return
        save_checkpoint({
            "version": __version__, "kind": self.task.kind,
            "model": self.task.model.state_dict(), **({"optimizer": self.opt.state_dict()} if optimizer else {}),
            "state": self.state.to_dict(), "config": to_dict(self.task.config),
            "rng": torch.get_rng_state(), "world": dist.world(), **(extra or {}),
            **self.task.checkpoint_extra(),
        }, self.run_dir / name)

    def _save_last(self, step_checkpoint: bool = True) -> None:
        """``last.pt`` (and with ``train.keep_last`` and ``step_checkpoint``, ``checkpoint{STEP}.pt``);
        called on every rank at the same points, as it gathers each rank's RNG state (dropout
        masks differ per rank) for an exact ``--resume``."""
        rngs = dist.all_gather(torch.get_rng_state()) if dist.world() > 1 else None
        self.save("last.pt", {"rng_ranks": rngs} if rngs else None)
        every = self.t.keep_every and self.state.step % self.t.keep_every == 0
        if (self.t.keep_last or every) and self.main and step_checkpoint:
            self._keep_step_checkpoint()

    def _keep_step_checkpoint(self) -> None:
        """``checkpoint{STEP}.pt`` (weights only) at this save point; older ones beyond
        ``train.keep_last`` are deleted, except those at multiples of ``train.keep_every``."""
        self.save(f"checkpoint{self.state.step}.pt", optimizer=False)
        every, found = self.t.keep_every, step_checkpoints(self.run_dir)
        for old in found[:-self.t.keep_last] if self.t.keep_last else found:
            if not (every and int(old.stem[len("checkpoint"):]) % every == 0):
                old.unlink(missing_ok=True)

    # -- the loop -------------------------------------------------------------------------
    def _stop_reason(self) -> str:
        s, t = self.state, self.t
        if self._signals.received is not None:
            return f"signal {self._signals.name}"
        if t.max_steps and s.step >= t.max_steps:
            return f"max_steps {t.max_steps}"
        if t.max_epochs and s.epoch >= t.max_epochs:
            return f"max_epochs {t.max_epochs}"
        if t.max_time_min and s.wall_time_s >= t.max_time_min * 60:
            return f"max_time_min {t.max_time_min}"
        if t.max_cpu_min and s.cpu_time_s >= t.max_cpu_min * 60:
            return f"max_cpu_min {t.max_cpu_min}"
        if self.stopper.should_stop(s):
            return f"no {t.metric} improvement in {t.patience} evaluations"
        return ""

    def _tick(self) -> None:
        now, cpu = time.perf_counter(), time.process_time()
        self.state.wall_time_s += now - self._clock
        self.state.cpu_time_s += cpu - self._cpu_clock
        self._clock, self._cpu_clock = now, cpu

    def fit(self) -> TrainState:
        """Train; evaluate every ``eval_every`` updates / ``eval_every_epochs`` epochs and at the
        end; save best/last; write the learning curves.

        ``train.max_time_min`` bounds wall-clock time including evaluations and checkpoints
        (summed over resumed runs): ``last.pt`` is written as soon as the loop stops, before the
        final evaluation, and an evaluation (periodic or final) is skipped, with a warning, when
        the budget is spent or the time left is shorter than the previous evaluation took. A run
        that never evaluated then gets ``best.pt`` = its last weights (``state.best_metric`` None).

        Raises Interrupted after SIGTERM/SIGINT (``last.pt`` written first), NonFiniteLoss after
        ``train.max_nonfinite`` non-finite updates in a row, OSError naming a checkpoint that could
        not be written (``runtime.checkpoint_write``).
        """
        self._clock, self._cpu_clock = time.perf_counter(), time.process_time()
        if dist.world() > 1:
            dist.broadcast_module(self.task.model)       # identical start on every rank
            if not self._restored:                       # own dropout masks per rank
                torch.manual_seed(self.t.seed + dist.rank())
        bar = tqdm(initial=self.state.step, total=self.t.max_steps or None, unit="upd", desc="train",
                   disable=True if bars_off() or not self.main else None)
        with self._signals:
            return self._fit(bar)

    def _fit(self, bar) -> TrainState:
        window = {"loss": 0.0, "nll": 0.0, "tok": 0, "time": 0.0, "terms": {}}
        evaluated = False
        self._session = (self.state.step, time.perf_counter())          # this session's pace (progress.py)
        while not (reason := dist.broadcast(self._stop_reason() if self.main else "")):
            stats, epoch_done = self._update()
            self._tick()
            if stats is None:                            # a non-finite update, skipped
                continue
            if self.state.step == self._session[0] + 1 and self.main:
                self._log_first_update(stats)
            for k in window:
                if k == "terms":
                    for name, v in stats["terms"].items():
                        window["terms"][name] = window["terms"].get(name, 0.0) + v
                else:
                    window[k] += stats[k]
            bar.update(1)
            bar.set_postfix(loss=f"{stats['loss'] / max(stats['tok'], 1):.3f}", epoch=self.state.epoch)
            if self.state.step % self.t.log_every == 0:
                self._log_train(window)
                window = {**dict.fromkeys(window, 0.0), "terms": {}}
            evaluated = self._periodic(epoch_done)
            self._tick()
        bar.close()
        self.state.stop_reason = reason
        log.info("stopping after %d updates: %s", self.state.step, reason)
        self._tick()
        self._save_last()                                # before the final evaluation: a kill there loses nothing
        if reason.startswith("signal "):
            self._interrupted(reason)
        if not evaluated and dist.broadcast(self._evaluation_fits("final") if self.main else False):
            self._evaluate()
            self._tick()
            self._save_last(step_checkpoint=False)       # again, with the evaluation's best metric (--resume)
        elif not evaluated and self.state.best_metric is None and not (self.run_dir / "best.pt").exists():
            self.save("best.pt")                         # what to translate with (pipelines expect it); not evaluated
        self._finish_outputs()
        dist.barrier()                                   # checkpoints written before any rank returns
        return self.state

    def _interrupted(self, reason: str) -> None:
        """After a stop signal: last.pt is written; log how to resume, raise Interrupted."""
        self._finish_outputs()
        dist.barrier()
        signum = self._signals.received if self._signals.received is not None else 15
        where = self.run_dir / "last.pt"
        msg = (f"training stopped by {reason.split()[1]} after update {self.state.step}; {where} holds it: "
               f"resume with `{resume_command(self.run_dir)}`")
        if self.main:
            log.info("%s", msg)                          # (train.log; the CLI prints it as its last line)
        raise Interrupted(signum, msg)

    def _periodic(self, epoch_done: bool) -> bool:
        """Evaluate / save when an interval ends; True if this update was evaluated."""
        s, t = self.state, self.t
        by_epoch = epoch_done and t.eval_every_epochs and s.epoch % t.eval_every_epochs == 0
        evaluate = bool(t.eval_every and s.step % t.eval_every == 0) or bool(by_epoch)
        if evaluate and self.main:
            self._tick()
            evaluate = self._evaluation_fits("periodic")
        if evaluate:
            self._evaluate()
        if (t.save_every and s.step % t.save_every == 0) or \
                (epoch_done and t.save_every_epochs and s.epoch % t.save_every_epochs == 0):
            self._save_last()
        return evaluate

    def _next_key(self) -> tuple[Any, int, int, bool]:
        """The next batch key of the current epoch → (key, epoch, index, last): last is True
        if it is the epoch's last (the state then moves to the next epoch)."""
        s = self.state
        if self._order_epoch != s.epoch:                 # batch order once per epoch, not per update
            self._order = self.task.epoch_batches(s.epoch)
            self._order_epoch = s.epoch
            if not self._order:
                raise ValueError("no training batches (empty training data?)")
        key = (self._order[s.batch_in_epoch], s.epoch, s.batch_in_epoch)
        s.batch_in_epoch += 1
        if s.batch_in_epoch >= len(self._order):
            s.epoch, s.batch_in_epoch = s.epoch + 1, 0
            return (*key, True)
        return (*key, False)

    def _update(self) -> tuple[dict | None, bool]:
        """accum batches (per rank; world × accum in all) → one optimizer step; the loss is the
        mean over all their targets. Stats None: the loss or gradient was not finite and the
        update was skipped (``_skip``)."""
        t0 = time.perf_counter()
        self.task.model.train()
        lr = learning_rate(self.t, self.state.step + 1, self.state.epoch)    # this update's epoch
        n_world, me = dist.world(), dist.rank()
        keys = [self._next_key() for _ in range(n_world * self.t.accum)]  # the whole group, every rank
        epoch_done = any(k[3] for k in keys)
        batches = [self.task.collate(key, ep, i) for key, ep, i, _ in keys[me::n_world]]
        known = all(b.n_targets is not None for b in batches)
        if not known and len(batches) > 1:
            raise ValueError("train.accum > 1 needs batches that know their n_targets before the forward pass")
        n_tok = sum(b.n_targets for b in batches) if known else 0
        if known and n_world > 1:
            n_tok = int(dist.all_reduce_sum([n_tok], self.device)[0])
        total, nll, terms = 0.0, 0.0, {}
        for batch in batches:
            with torch.autocast(self.device.type, dtype=torch.bfloat16, enabled=self.autocast == "bf16"):
                out = self.task.loss(batch)
            if not known:
                n_tok = int(dist.all_reduce_sum([out.n_targets], self.device)[0])
            (out.total / max(n_tok, 1)).backward()
            total += float(out.total.detach())
            nll += out.terms.get("nll_nats", float(out.total.detach()))
            for name, v in out.terms.items():            # auxiliary terms (models.interface.AuxiliaryLosses)
                if name != "nll_nats":
                    terms[name] = terms.get(name, 0.0) + v
        if n_world > 1:
            names = sorted(terms)
            total, nll, *summed = dist.all_reduce_grads(self.opt.dense, self.opt.sparse,
                                                        [total, nll, *(terms[k] for k in names)])
            terms = dict(zip(names, summed))
        self.opt.set_lr(lr)
        if not (math.isfinite(total) and self.opt.step(self.t.clip_norm)):     # no step on NaN/inf
            self.opt.zero_grad()
            self._skip(total)
            return None, epoch_done
        self._nonfinite = 0
        self.state.step += 1
        self.opt.zero_grad()
        dt = time.perf_counter() - t0
        self.state.train_time_s += dt
        self.state.tgt_tokens += n_tok
        self._lr = lr
        return {"loss": total, "nll": nll, "tok": n_tok, "time": dt, "terms": terms}, epoch_done

    def _skip(self, total: float) -> None:
        """Count a skipped non-finite update; raise NonFiniteLoss at ``train.max_nonfinite`` in a row."""
        self._nonfinite += 1
        what = f"loss {total}" if not math.isfinite(total) else "gradient norm non-finite"
        if self.main:
            log.warning("update %d skipped: %s (%d in a row; train.max_nonfinite %d)", self.state.step + 1, what,
                        self._nonfinite, self.t.max_nonfinite)
        if self._nonfinite >= max(1, self.t.max_nonfinite):
            last = self.run_dir / "last.pt"
            saved = (f"{last} holds the last save point (finite weights)" if last.exists()
                     else "no checkpoint was written")
            raise NonFiniteLoss(
                f"training diverged: {self._nonfinite} consecutive updates with a non-finite loss or gradient "
                f"({what} at update {self.state.step + 1}; train.max_nonfinite {self.t.max_nonfinite}); {saved}. "
                f"Lower train.lr (now {self.t.lr:g}) or raise train.warmup (now {self.t.warmup})")

    def _log_train(self, w: dict) -> None:
        if not self.main:
            return
        tok = max(int(w["tok"]), 1)
        rec = {"step": self.state.step, "epoch": self.state.epoch,
               "loss_nats": w["loss"] / tok, "xent_nats": w["nll"] / tok,
               "ppl": math.exp(min(w["nll"] / tok, 50)), "tok_per_s": w["tok"] / max(w["time"], 1e-9),
               "lr": self._lr, "train_time_s": round(self.state.train_time_s, 1),
               "cpu_time_s": round(self.state.cpu_time_s, 1),
               **{name: v / tok for name, v in w["terms"].items()}}    # per target, as loss_nats
        rss = peak_rss_gib()
        if rss is not None:
            rec["peak_rss_gib"] = round(rss, 3)
        self.metrics.write("train", **rec)
        if self.board:
            self.board.write("train", rec)
        log.info("step %(step)d ep %(epoch)d | loss %(loss_nats).3f ppl %(ppl).1f | "
                 "%(tok_per_s).0f tgt tok/s | lr %(lr).2e | %(train_time_s).0f s", rec)
        note = self._pace()
        if note:
            log.info("%s", note)

    def _pace(self) -> str:
        start, t0 = getattr(self, "_session", (self.state.step, time.perf_counter()))
        return pace_note(self.state.step, start, time.perf_counter() - t0, self.t.max_steps, self.t.max_time_min,
                         self.state.wall_time_s)

    def _log_first_update(self, stats: dict) -> None:
        """The first update of a session, at once (the periodic lines come every ``log_every``)."""
        note = self._pace()
        log.info("update %d done in %.1f s (loss %.3f over %d target tokens)%s; the next log line at update %d",
                 self.state.step, stats["time"], stats["loss"] / max(stats["tok"], 1), int(stats["tok"]),
                 f"; {note}" if note else "", (self.state.step // self.t.log_every + 1) * self.t.log_every)

    # -- evaluation ------------------------------------------------------------------------
    def _evaluation_fits(self, which: str) -> bool:
        """Whether a dev evaluation fits in what is left of ``train.max_time_min`` (always
        without one): not when the budget is spent, nor when the previous evaluation took longer
        than the time left. A skipped evaluation is logged as a warning, with what it means."""
        if not self.t.max_time_min:
            return True
        left = self.t.max_time_min * 60 - self.state.wall_time_s
        last = getattr(self, "_last_eval_s", None)
        if left > 0 and (last is None or last <= left):
            return True
        why = (f"the budget is spent ({self.state.wall_time_s:.0f} s)" if left <= 0 else
               f"{left:.0f} s are left and the previous evaluation took {last:.0f} s")
        best = (f"best.pt is from update {self.state.best_step}" if self.state.best_metric is not None
                else "no dev evaluation ran, so best.pt is a copy of last.pt, not evaluated")
        if which == "final":
            log.warning("train.max_time_min %g: final dev evaluation skipped, as %s; last.pt holds update %d; %s",
                        self.t.max_time_min, why, self.state.step, best)
        else:
            log.info("train.max_time_min %g: dev evaluation at update %d skipped, as %s",
                     self.t.max_time_min, self.state.step, why)
        return False

    def _evaluate(self) -> None:
        """Dev evaluation, on rank 0 only (the others go on to the next update and wait there)."""
        if not self.main:
            return
        t0 = time.perf_counter()
        rec = self.task.evaluate()
        self._last_eval_s = time.perf_counter() - t0
        if not rec:
            return
        rec = {"step": self.state.step, "epoch": self.state.epoch, **rec,
               "lr": getattr(self, "_lr", None), "eval_s": round(time.perf_counter() - t0, 1),
               "wall_time_s": round(self.state.wall_time_s, 1), "cpu_time_s": round(self.state.cpu_time_s, 1)}
        value = rec.get(self.t.metric)
        if value is None:
            raise ValueError(f"train.metric {self.t.metric!r} is not computed (have: {sorted(rec)})")
        is_best = self.stopper.update(self.state, value)
        rec["best"] = is_best
        self.metrics.write("dev", **rec)
        if self.board:
            self.board.write("dev", rec)
        shown = " | ".join(f"{k} {v:.4g}" for k, v in rec.items()
                           if isinstance(v, float) and k not in ("eval_s", "lr", "wall_time_s", "cpu_time_s"))
        log.info("dev step %d | %s | %s", self.state.step, shown, "new best" if is_best else
                 f"best {self.state.best_metric:.4g} @ {self.state.best_step}")
        if is_best:
            self.save("best.pt")

    def _finish_outputs(self) -> None:
        if not self.main:
            return
        if self.board:
            self.board.close()
        if self.t.plot:
            try:
                plot_learning_curves(self.run_dir / "metrics.jsonl", self.run_dir / "learning_curves.png",
                                     self.t.metric)
            except (OSError, ValueError) as e:          # a picture must never fail a finished run
                log.warning("learning-curve plot not written: %s", e)


class _NoMetrics:
    """``MetricsWriter`` of ranks other than 0: writes nothing."""

    def write(self, kind: str, **values) -> None:
        pass
