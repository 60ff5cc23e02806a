"""``doctrans train``: an NMT experiment as a ``Task`` of the shared training loop.

The run directory gets ``config.yaml`` (resolved config), ``metrics.jsonl``, ``train.log``,
``best.pt`` (best dev ``train.metric``), ``last.pt``, ``tensorboard/`` (event files) and
``learning_curves.png``. ``resume=True`` continues from ``last.pt`` with exactly the updates an
uninterrupted run would have made (same batches, same RNG state, same optimizer moments); it
refuses a changed config (see ``checkpoint.RESUME_MAY_CHANGE``).

Under ``torchrun --nproc_per_node=K`` this trains data-parallel (``runtime.distributed``): each
update takes K × ``train.accum`` batches, rank 0 writes the run directory's files.
"""
from __future__ import annotations

import logging
from collections.abc import Callable
from pathlib import Path
from typing import Any, Protocol

import numpy as np
import torch
import yaml

from doctrans.config import ExperimentConfig, to_dict
from doctrans.data.context_usage import (ReconstructionDrop, apply_context_usage, foreign_context, split_sentences,
                                         usage_generator)
from doctrans.data.batching import ParallelData, collate, epoch_batches, load_parallel, make_batches
from doctrans.data.documents import (DOC_BATCHING, DOC_BUDGETS, DocBatchSpec, DocData, collate_doc,
                                     filter_context_tuples, load_doc_split, make_doc_batches)
from doctrans.data.reconstruction import PLACEHOLDER, load_dp_labels, load_rec_lines, rec_target_path
from doctrans.data.text import TextProcessor
from doctrans.data.vocab import Vocab
from doctrans.models.build import build_model
from doctrans.models.interface import bind_vocabularies, reads_documents
from doctrans.runtime import distributed as dist, shipped
from doctrans.training.checkpoint import check_resume_compatible
from doctrans.runtime.checkpoint import load_checkpoint
from doctrans.runtime.model_card import write_model_card
from doctrans.training.run_dir import check_run_dir
from doctrans.training.loss import MARGIN_LEVELS, context_margin_loss, dev_xent, forward_loss
from doctrans.training.metrics import last_dev_scores
from doctrans.training.trainer import StepLoss, Trainer
from doctrans.runtime.device import resolve_device
from doctrans.utils.cpu import warn_if_slow_bf16
from doctrans.utils.io import atomic_write_text, read_lines

log = logging.getLogger(__name__)

DevScorer = Callable[[torch.nn.Module, Vocab, list, list[str], int, object], float]
"""Dev BLEU of a model: (model, target vocabulary, documents (per document, per line, source
ids ending in ``</s>``), tokenized references (one per line), beam, ``DecodeConfig``) → BLEU.
The caller supplies it (``doctrans.evaluation.dev.dev_bleu``; ``doctrans.stages.train`` and the
CLI do), so training never imports decoding or scoring."""

DevContextScorer = Callable[[torch.nn.Module, list, list, np.ndarray, int], dict]
"""Dev context usage of a context model: (model, source ids per dev line, target ids per dev
line, (L,) document number per line, K) → {metric name with its unit: value}, over the first K
lines (``doctrans.evaluation.dev.dev_cxmi``: CXMI against an empty and a random context). Given
by the caller, as ``DevScorer``."""


def _vocabs(cfg: ExperimentConfig) -> tuple[Vocab, Vocab]:
    prep = Path(cfg.data.prepared)
    src_lang, tgt_lang = cfg.data.src_suffix.split(".")[-1], cfg.data.tgt_suffix.split(".")[-1]
    src_counts = Path(cfg.data.src_vocab) if cfg.data.src_vocab else prep / f"vocab.{src_lang}.txt"
    src = Vocab.from_counts_file(src_counts, cfg.data.min_freq)
    extra = [t for t in dict.fromkeys(cfg.data.src_vocab_extra) if t not in src.index]
    return (Vocab(src.tokens + extra) if extra else src,
            Vocab.from_counts_file(prep / f"vocab.{tgt_lang}.txt", cfg.data.min_freq))


def attach_reconstruction(cfg: ExperimentConfig, model: torch.nn.Module, split: str, data, src_vocab: Vocab) -> None:
    """Give ``data`` (ParallelData or DocData of ``split``) the reconstruction target x̂ and DP
    labels the model's ``reconstruction`` spec asks for (``data/reconstruction.py``): ``data.rec``
    (and ``data.dp`` when it ``predicts_dps``), one per item, aligned through ``data.line``; with
    ``encoder_input: annotated`` the sources become x̂ too. Nothing for a model without a target.
    Raises FileNotFoundError / ValueError naming the file."""
    spec = model.reconstruction
    if not spec.target:
        return
    d, prep = cfg.data, Path(cfg.data.prepared)
    src_dir = Path(d.src_dir) if d.src_dir else prep
    rec_dir = Path(d.rec_dir) if d.rec_dir else prep / "dp"
    path = rec_target_path(spec.target, split, rec_dir, src_dir, d.src_suffix)
    if not path.is_file():
        raise FileNotFoundError(f"{path} missing: the reconstruction target ({spec.target}) of {split}; "
                                f"run `doctrans annotate-dp corpus -p {prep}` or set data.rec_dir")
    n_lines = len(read_lines(src_dir / f"{split}.{d.src_suffix}"))
    lines, ids = load_rec_lines(path, src_vocab, n_lines)
    data.rec = [ids[k] for k in data.line]
    if spec.encoder_input == "annotated":
        data.src = list(data.rec)
    if spec.predicts_dps:
        labels = load_dp_labels(rec_dir / f"{split}.dplabel", lines, model.dp_labels, spec.target)
        data.dp = [labels[k] for k in data.line]
    log.info("%s: reconstruction target %s from %s%s", split, spec.target, path,
             " (and DP labels)" if spec.predicts_dps else "")


class ContextData(Protocol):
    """What ``train.context_dense`` and ``train.context_attention_supervision`` read of a prepared
    corpus's DP annotation (``dp.context_dense.TrainingContextData``; passed in by
    ``doctrans.stages.train``, as dev BLEU is: training sits below ``dp``)."""

    def dense(self, prepared: Path, dp_dir: Path | None, max_distance: int, rules: tuple[str, ...] = ()
              ) -> tuple[np.ndarray, Any]:
        """(n,) bool: the context-dense train lines (selected by ``rules``, empty = all); and a count
        of the deciding rules."""
        ...

    def marks(self, prepared: Path, dp_dir: Path | None, max_distance: int) -> dict:
        """line → [(query BPE index, distance d, key BPE index in line − d)]."""
        ...


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
                 device: torch.device, dev_scorer: DevScorer | None = None):
        self.config, self.t, self.model, self.device = cfg, cfg.train, model, device
        self.train, self.dev, self.dev_refs, self.dev_scorer = train, dev, dev_refs, dev_scorer
        self.src_vocab, self.tgt_vocab = src_vocab, tgt_vocab
        if cfg.train.context_margin < 0 or cfg.train.context_margin_weight < 0:
            raise ValueError("train.context_margin and train.context_margin_weight must be ≥ 0")
        if cfg.train.context_margin_level not in MARGIN_LEVELS:
            raise ValueError(f"train.context_margin_level must be one of {MARGIN_LEVELS}, "
                             f"got {cfg.train.context_margin_level!r}")
        if cfg.train.context_margin and type(self) is NMTTask:
            raise ValueError("train.context_margin needs a context model (document batches); "
                             f"experiment {cfg.name!r} has a sentence-level model")
        if not 0.0 <= cfg.train.random_context <= 1.0:
            raise ValueError(f"train.random_context must be in [0, 1], got {cfg.train.random_context}")
        if cfg.train.random_context and type(self) is NMTTask:
            raise ValueError("train.random_context needs a context model (document batches); "
                             f"experiment {cfg.name!r} has a sentence-level model")
        for key, on in (("context_dense", cfg.train.context_dense is not None),
                        ("context_attention_supervision", bool(cfg.train.context_attention_supervision))):
            if on and type(self) is NMTTask:
                raise ValueError(f"train.{key} needs a context model (document batches); "
                                 f"experiment {cfg.name!r} has a sentence-level model")
        # (src, tgt) (V,) bool: BPE units that continue a word ("@@"), where split_sentences never cuts
        self._joins = tuple(np.array([t.endswith("@@") for t in v.tokens]) for v in (src_vocab, tgt_vocab))
        self._pronoun_ids = self._pronoun_dropout_ids(cfg.train, src_vocab)
        self._rec_drop = self._reconstruction_drop(cfg.train, model, src_vocab)
        self._plan_batches()

    @staticmethod
    def _pronoun_dropout_ids(t, src_vocab: Vocab) -> torch.Tensor | None:
        """(K,) source ids of ``train.pronoun_dropout_words`` (None when pronoun dropout is off).
        Raises ValueError when none of the words is a source vocabulary token."""
        if not t.pronoun_dropout:
            return None
        ids = [src_vocab.index[w] for w in t.pronoun_dropout_words if w in src_vocab.index]
        if not ids:
            raise ValueError(f"train.pronoun_dropout: none of train.pronoun_dropout_words "
                             f"{list(t.pronoun_dropout_words)} is a source vocabulary token")
        log.info("pronoun dropout p=%g over %d source pronouns", t.pronoun_dropout, len(ids))
        return torch.tensor(ids, dtype=torch.long)

    @staticmethod
    def _reconstruction_drop(t, model, src_vocab: Vocab) -> ReconstructionDrop | None:
        """How pronoun dropout rewrites the model's reconstruction targets (``data.context_usage``:
        ``ReconstructionDrop``; None without pronoun dropout or without a reconstructor). Raises
        ValueError when a DP-labelling model's ``dp_labels`` lack one of the dropped words."""
        spec = model.reconstruction
        if not t.pronoun_dropout or not spec.target:
            return None
        labels = None
        if spec.predicts_dps:
            index = {w: k for k, w in enumerate(model.dp_labels) if k}
            missing = [w for w in t.pronoun_dropout_words if w in src_vocab.index and w not in index]
            if missing:
                raise ValueError(f"train.pronoun_dropout: {missing} are not DP labels of the model "
                                 f"(model.reconstructor.dp_vocab); a deleted pronoun must be a label it can predict")
            labels = np.zeros(len(src_vocab), dtype=np.int64)
            for w in t.pronoun_dropout_words:
                if w in src_vocab.index:
                    labels[src_vocab.index[w]] = index[w]
        return ReconstructionDrop(spec.target, labels, src_vocab.index.get(PLACEHOLDER, -1))

    def _plan_batches(self) -> None:
        self.batches = make_batches(self.train, self.t.max_tokens, self.t.seed)
        self.dev_batches = make_batches(self.dev, self.t.max_tokens, 0) if self.dev is not None else []
        log.info("%d batches of ≤ %d tokens per epoch", len(self.batches), self.t.max_tokens)

    def epoch_batches(self, epoch: int) -> list[np.ndarray]:
        return epoch_batches(self.batches, self.t.seed, epoch)

    def _to_device(self, batch):
        if self.device.type != "cpu":
            for name in ("src", "tgt_in", "tgt_out", "rec_tgt", "dp_tgt"):
                if getattr(batch, name) is not None:
                    setattr(batch, name, getattr(batch, name).to(self.device, non_blocking=True))
        return batch

    def collate(self, key: np.ndarray, epoch: int, index: int):
        return self._to_device(self._usage(collate(self.train, key, self.tgt_vocab), epoch, index))

    def _usage(self, batch, epoch: int, index: int):
        """``train.split_sentences``, then ``train.coword_dropout`` / ``train.context_dropout`` /
        ``train.pronoun_dropout``, then ``train.random_context`` on a training batch
        (``data.context_usage``), draws from (seed, epoch, index): resume stays exact."""
        t = self.t
        if not (t.coword_dropout or t.context_dropout or t.split_sentences or t.pronoun_dropout
                or t.random_context):
            return batch
        gen = usage_generator(t.seed, epoch, index)
        if t.split_sentences:
            batch = split_sentences(batch, t.split_sentences, gen, *self._joins)
        batch = apply_context_usage(batch, t.coword_dropout, t.context_dropout, gen, t.pronoun_dropout,
                                    self._pronoun_ids, self._joins[0], self._rec_drop)
        return foreign_context(batch, self.train, t.random_context, gen) if t.random_context else batch

    def loss(self, batch) -> StepLoss:
        out = forward_loss(self.model, batch, self.tgt_vocab.pad_id, self.t.label_smoothing)
        return StepLoss(out.total, out.terms, out.n_tokens)

    def evaluate(self) -> dict[str, float]:
        if self.dev is None:
            return {}
        xent, _ = dev_xent(self.model, self._dev_batch_iter(), self.tgt_vocab.pad_id)
        rec = {"xent_nats": xent, "ppl": float(np.exp(min(xent, 50)))}
        if self.t.eval_bleu and self.dev_refs is not None and self.dev_scorer is not None:
            rec["bleu"] = self._dev_bleu()
        return rec

    def _dev_batch_iter(self):
        return (self._to_device(collate(self.dev, idx, self.tgt_vocab)) for idx in self.dev_batches)

    def _dev_bleu(self) -> float:
        """Dev BLEU of the first ``eval_max_sentences`` pairs (0 = all), each line alone."""
        n = self.t.eval_max_sentences or len(self.dev)
        refs = [self.dev_refs[int(i)] for i in self.dev.line[:n]]
        return self.dev_scorer(self.model, self.tgt_vocab, [list(self.dev.src[:n])], refs, self.t.eval_beam,
                               self.config.decode)

    def checkpoint_extra(self) -> dict:
        """Vocabularies, the dataset path, and ``text``: each side's ``TextProcessor.settings()``
        (lowercasing, the BPE codes' text), so the checkpoint translates without the dataset."""
        if getattr(self, "_text", None) is None:
            d = self.config.data
            self._text = {side: TextProcessor.from_prepared(d.prepared, suffix.split(".")[-1]).settings()
                          for side, suffix in (("src", d.src_suffix), ("tgt", d.tgt_suffix))}
        return {"vocab": {"src": list(self.src_vocab.tokens), "tgt": list(self.tgt_vocab.tokens)},
                "prepared": str(self.config.data.prepared), "text": self._text}


def initialise_from(model: torch.nn.Module, path: str, freeze: tuple[str, ...] = (),
                    load_weights: bool = True) -> set[int]:
    """Two-stage training (HAN recipe, Miculicich et al. 2018 §3.2; docs/models.md §2.5): copy the weights of checkpoint ``path``
    into ``model``; parameters it lacks (a context model's new ones) keep their fresh
    initialisation. A sentence-level checkpoint fits a context model's ``backbone.``. Then
    parameters matching a ``freeze`` pattern (fnmatch over names) stop training. Returns the ids
    of the loaded parameters. ``load_weights`` False (``--resume``: the run's own checkpoint
    restores the weights): only which parameters ``path`` covers, and the freeze, so the
    optimizer gets the parameter groups it was saved with. Raises ValueError naming checkpoint
    keys the model does not have, or a pattern that matches nothing."""
    import fnmatch

    state = load_checkpoint(path)["model"]
    own = model.state_dict()
    prefix = model.sentence_weights_prefix                   # "backbone." for a context model
    if not set(state) & set(own) and prefix:
        state = {f"{prefix}{k}": v for k, v in state.items()}
    unexpected = sorted(set(state) - set(own))
    if unexpected:
        raise ValueError(f"init_from {path}: keys the model does not have: {', '.join(unexpected[:8])}"
                         + (f" … ({len(unexpected)} in all)" if len(unexpected) > 8 else ""))
    missing = sorted(set(own) - set(state))
    for k, v in list(state.items()):           # a source vocabulary extended by data.src_vocab_extra:
        o = own[k]                             # the checkpoint's rows, the new ones fresh
        if o.shape != v.shape and o.dim() == v.dim() and o.shape[1:] == v.shape[1:] and o.shape[0] > v.shape[0]:
            grown = o.detach().clone()
            grown[:v.shape[0]] = v
            state[k] = grown
    if load_weights:
        model.load_state_dict(state, strict=False)
        log.info("init_from %s: %d tensors loaded, %d new (%s)", path, len(state), len(missing),
                 ", ".join(sorted({k.split(".")[0] for k in missing})) or "-")
    for pattern in freeze:
        hits = [p for n, p in model.named_parameters() if fnmatch.fnmatch(n, pattern)]
        if not hits:
            raise ValueError(f"train.freeze pattern {pattern!r} matches no parameter")
        for p in hits:
            p.requires_grad_(False)
    if freeze:
        frozen = sum(p.numel() for p in model.parameters() if not p.requires_grad)
        log.info("train.freeze %s: %.2fM of %.2fM parameters frozen", list(freeze), frozen / 1e6,
                 sum(p.numel() for p in model.parameters()) / 1e6)
    names = set(state)
    return {id(p) for n, p in model.named_parameters() if n in names}


class DocNMTTask(NMTTask):
    """``NMTTask`` on document-aware batches (``data.documents``), for context models.

    Each batch is a ``DocBatch`` (``data.doc_batching``: ``runs`` of consecutive sentences
    with their ``context_sents`` (N) preceding sentences as context-only rows, or ``sorted``:
    length-bucketed targets plus their missing context rows), ``ctx`` (B, N) pointing at the
    context rows; the loss
    skips context-only rows (``forward_loss``). The epoch's batches are built per epoch with
    documents shuffled by (train.seed, epoch), so resume stays exact. Dev: every dev line is a
    target, documents in file order. With ``context_block`` K > 0 (a sub-document model) batches
    hold whole sub-documents of K sentences instead (``block`` (B,)). ``train_model`` uses it for every
    model that ``reads_documents``.
    """

    def __init__(self, cfg: ExperimentConfig, model: torch.nn.Module, train: DocData, dev: DocData | None,
                 dev_refs: list[str] | None, src_vocab: Vocab, tgt_vocab: Vocab, device: torch.device,
                 context_sents: int, context_block: int = 0, dev_scorer: DevScorer | None = None,
                 dev_context_scorer: DevContextScorer | None = None, context_data: ContextData | None = None):
        self.context_sents, self.context_block = context_sents, context_block
        self.dev_context_scorer = dev_context_scorer
        if cfg.train.context_margin and context_block:
            raise ValueError("train.context_margin: sub-document models (model.context_block, e.g. HGC) have no "
                             "per-sentence context to swap for a random one")
        if cfg.train.random_context and context_block:
            raise ValueError("train.random_context: sub-document models (model.context_block, e.g. HGC) have no "
                             "per-sentence context to swap for a random one")
        self.dense = None
        dense_cfg = cfg.train.context_dense
        dp_dir = Path(dense_cfg.dp_dir) if dense_cfg is not None and dense_cfg.dp_dir else None
        if (dense_cfg is not None or cfg.train.context_attention_supervision) and context_data is None:
            raise ValueError("train.context_dense / train.context_attention_supervision need the DP annotation "
                             "reader (context_data; doctrans.stages.train passes dp.context_dense.TrainingContextData)")
        if dense_cfg is not None:                       # data/context_dense.py (Mąka et al. 2025)
            from doctrans.data.context_dense import extra_dense_rows

            if context_block:
                raise ValueError("train.context_dense: sub-document models (model.context_block, e.g. HGC) "
                                 "read no previous sentences to decide a pronoun")
            self.dense, rules = context_data.dense(Path(cfg.data.prepared), dp_dir, dense_cfg.max_distance,
                                                   tuple(dense_cfg.rules))
            self.dense &= train.is_target
            n_t, n_d = int(train.is_target.sum()), int(self.dense.sum())
            log.info("train.context_dense: %d of %d target pairs context-dense (%.2f%%; %s); %d extra dense rows "
                     "per epoch for a share of %.2f", n_d, n_t, 100.0 * n_d / max(n_t, 1), dict(rules),
                     extra_dense_rows(n_t, n_d, dense_cfg.share), dense_cfg.share)
        self.attn_marks = None
        if cfg.train.context_attention_supervision:     # training/attention_supervision.py (Yin et al. 2021)
            if cfg.train.context_attention_supervision < 0:
                raise ValueError("train.context_attention_supervision must be ≥ 0")
            self.attn_marks = context_data.marks(Path(cfg.data.prepared), dp_dir, max(context_sents, 1))
            log.info("train.context_attention_supervision: %d training lines with a marked deciding pronoun",
                     len(self.attn_marks))
        super().__init__(cfg, model, train, dev, dev_refs, src_vocab, tgt_vocab, device, dev_scorer)

    def _plan_batches(self) -> None:
        mode = self.config.data.doc_batching
        if mode not in DOC_BATCHING:
            raise ValueError(f"data.doc_batching must be one of {DOC_BATCHING}, got {mode!r}")
        if self.config.data.doc_budget not in DOC_BUDGETS:
            raise ValueError(f"data.doc_budget must be one of {DOC_BUDGETS}, got {self.config.data.doc_budget!r}")
        self.dev_batches = (make_doc_batches(self.dev, self.t.max_tokens, self.context_sents, 0, mode=mode,
                                             budget=self.config.data.doc_budget, block=self.context_block)
                            if self.dev is not None else [])
        unit = (f"sub-documents of ≤ {self.context_block} sentences" if self.context_block
                else f"N = {self.context_sents} context sentences")
        log.info("document batches (%s): %d documents, %d target sentences, %s",
                 "blocks" if self.context_block else mode, self.train.n_docs, int(self.train.is_target.sum()), unit)

    def epoch_batches(self, epoch: int) -> list[DocBatchSpec]:
        """The epoch's document batches; with ``train.context_dense`` also its extra batches of
        context-dense lines (``data.context_dense.dense_batches``), shuffled in among them with
        (seed, epoch)."""
        batches = make_doc_batches(self.train, self.t.max_tokens, self.context_sents, self.t.seed, epoch,
                                   mode=self.config.data.doc_batching, budget=self.config.data.doc_budget,
                                   block=self.context_block)
        if self.dense is None:
            return batches
        from doctrans.data.context_dense import dense_batches

        extra = dense_batches(self.train, self.dense, self.t.context_dense.share, self.t.max_tokens,
                              self.context_sents, self.t.seed, epoch)
        if not extra:
            return batches
        both = batches + extra
        order = np.random.default_rng(self.t.seed * 1000003 + epoch + 104729).permutation(len(both))
        return [both[i] for i in order]

    def collate(self, key: DocBatchSpec, epoch: int, index: int):
        return self._usage(collate_doc(self.train, key, self.tgt_vocab), epoch, index).to(self.device)

    def evaluate(self) -> dict[str, float]:
        """``NMTTask.evaluate`` and, with ``train.eval_cxmi_sentences`` K > 0 and a context
        scorer, the context usage on the first K dev lines (``DevContextScorer``: e.g.
        ``cxmi_empty_nats``, ``cxmi_random_nats``) and the seconds it took (``cxmi_s``)."""
        import time

        rec = super().evaluate()
        k = self.t.eval_cxmi_sentences
        if rec and k > 0 and self.dev_context_scorer is not None:
            t0 = time.perf_counter()
            rec.update(self.dev_context_scorer(self.model, self.dev.src, self.dev.tgt, self.dev.doc, k))
            rec["cxmi_s"] = round(time.perf_counter() - t0, 2)
        return rec

    def loss(self, batch) -> StepLoss:
        """``NMTTask.loss`` and, with ``train.context_margin`` δ > 0, Jean & Cho 2019's context
        ranking term (``training.loss.context_margin_loss``) × ``context_margin_weight``, reported
        as ``ctx_margin`` in the logged terms."""
        if not self.t.context_margin:
            return self._attention_supervision(batch, super().loss(batch))
        out = forward_loss(self.model, batch, self.tgt_vocab.pad_id, self.t.label_smoothing, token_logprobs=True)
        hinge, _ = context_margin_loss(self.model, batch, out, self.tgt_vocab.pad_id, self.t.context_margin,
                                       self.t.context_margin_level, self.t.context_margin_detach)
        term = self.t.context_margin_weight * hinge
        return self._attention_supervision(
            batch, StepLoss(out.total + term, {**out.terms, "ctx_margin": float(term.detach())}, out.n_tokens))

    def _attention_supervision(self, batch, step: StepLoss) -> StepLoss:
        """``step`` plus, with ``train.context_attention_supervision`` λ > 0, λ × the mean
        attention-supervision loss of the batch's marks (``training/attention_supervision.py``)
        per target token's share, as the auxiliary terms (× n_tokens), logged as ``attn_sup``."""
        if self.attn_marks is None or not self.model.training or not torch.is_grad_enabled():
            return step
        from doctrans.training.attention_supervision import attention_supervision_loss, batch_targets

        targets = batch_targets(batch, self.attn_marks, self.context_sents)
        if targets.numel() == 0:
            return step
        att = self.model.context_attention(batch)
        if att is None:
            raise ValueError("train.context_attention_supervision: this model exposes no context attention "
                             "(Seq2SeqModel.context_attention; the target-side concatenation model does)")
        rows = batch.is_target.nonzero().squeeze(1)
        term = self.t.context_attention_supervision * attention_supervision_loss(att, targets, rows) * step.n_targets
        return StepLoss(step.total + term, {**step.terms, "attn_sup": float(term.detach())}, step.n_targets)

    def _dev_batch_iter(self):
        return (collate_doc(self.dev, spec, self.tgt_vocab).to(self.device) for spec in self.dev_batches)

    def _dev_bleu(self) -> float:
        """Dev BLEU with the documents as context (the scorer translates a context model's
        documents in order), the first ``eval_max_sentences`` lines (0 = all)."""
        n = self.t.eval_max_sentences or len(self.dev)
        docs: list[list] = []
        for i in range(n):
            if i == 0 or self.dev.doc[i] != self.dev.doc[i - 1]:
                docs.append([])
            docs[-1].append(self.dev.src[i])
        return self.dev_scorer(self.model, self.tgt_vocab, docs, self.dev_refs[:n], self.t.eval_beam,
                               self.config.decode)


def load_doc_splits(cfg: ExperimentConfig, src_vocab: Vocab, tgt_vocab: Vocab
                    ) -> tuple[DocData, DocData | None, list[str] | None]:
    """(train, dev, dev references) as DocData: the files ``_load_data`` reads, every line kept;
    train targets are exactly ``_load_data``'s pairs (``train.target`` and ``data.max_len``)."""
    d, prep = cfg.data, Path(cfg.data.prepared)
    src_dir = Path(d.src_dir) if d.src_dir else prep
    train = load_doc_split(prep, d.train_split, src_vocab, tgt_vocab, d.max_len, d.src_suffix, d.tgt_suffix, src_dir)
    log.info("train: %d lines in %d documents, %d targets", len(train), train.n_docs, int(train.is_target.sum()))
    dev, dev_refs = None, None
    if (src_dir / f"{d.dev_split}.{d.src_suffix}").is_file():
        dev = load_doc_split(prep, d.dev_split, src_vocab, tgt_vocab, 0, d.src_suffix, d.tgt_suffix, src_dir)
        dev_refs = read_lines(prep / f"{d.dev_split}.tok.{d.tgt_suffix.split('.')[-1]}")
    return train, dev, dev_refs


def _load_data(cfg: ExperimentConfig, src_vocab: Vocab, tgt_vocab: Vocab):
    d, prep = cfg.data, Path(cfg.data.prepared)
    src_dir = Path(d.src_dir) if d.src_dir else prep
    targets = prep / f"{d.train_split}.target"     # absent in datasets of format 1: all lines
    train, skipped = load_parallel(src_dir / f"{d.train_split}.{d.src_suffix}", prep / f"{d.train_split}.{d.tgt_suffix}",
                                   src_vocab, tgt_vocab, max_len=d.max_len,
                                   target_path=targets if targets.is_file() else None)
    log.info("train: %d pairs (%d skipped by max_len %d/empty); vocab src %d tgt %d",
             len(train), skipped, d.max_len, len(src_vocab), len(tgt_vocab))
    dev, dev_refs = None, None
    if (src_dir / f"{d.dev_split}.{d.src_suffix}").is_file():
        dev, _ = load_parallel(src_dir / f"{d.dev_split}.{d.src_suffix}", prep / f"{d.dev_split}.{d.tgt_suffix}",
                               src_vocab, tgt_vocab, max_len=0)
        dev_refs = read_lines(prep / f"{d.dev_split}.tok.{d.tgt_suffix.split('.')[-1]}")
    return train, dev, dev_refs


def _attach_all(cfg: ExperimentConfig, model, train, dev, src_vocab: Vocab) -> None:
    attach_reconstruction(cfg, model, cfg.data.train_split, train, src_vocab)
    if dev is not None:
        attach_reconstruction(cfg, model, cfg.data.dev_split, dev, src_vocab)


def _check_init_vocab(path: str, src_vocab: Vocab, tgt_vocab: Vocab) -> None:
    """Raises ValueError unless the checkpoint's vocabularies are this run's, or its source
    vocabulary is a prefix of this run's (``data.src_vocab_extra`` appended tokens)."""
    ck = load_checkpoint(path)
    if "vocab" not in ck:
        return
    src = ck["vocab"]["src"]
    if src_vocab.tokens[:len(src)] != src or ck["vocab"]["tgt"] != tgt_vocab.tokens:
        raise ValueError(f"init_from {path}: its vocabularies differ from this run's (another prepared dataset?)")


def train_model(cfg: ExperimentConfig, resume: bool = False, dev_scorer: DevScorer | None = None,
        dev_context_scorer: DevContextScorer | None = None, context_data: ContextData | None = None,
        overwrite: bool = False) -> Path:
    """Train; returns the run directory. ``dev_scorer``: dev BLEU (``DevScorer``), needed when
    ``train.eval_bleu`` is on (``doctrans.stages.train`` passes ``evaluation.dev.dev_bleu``);
    ``dev_context_scorer``: a context model's dev context usage (``DevContextScorer``, logged
    when ``train.eval_cxmi_sentences`` > 0; ``stages.train`` passes ``evaluation.dev.dev_cxmi``).
    ``overwrite``: replace a run directory that holds a model (``run_dir.check_run_dir``).
    Raises FileNotFoundError if the prepared data is missing, ValueError on an incompatible
    resume, an invalid train section or dev BLEU asked for without a scorer, RunDirExists (a
    ValueError) for a run directory holding ``best.pt``/``last.pt`` without ``resume`` or
    ``overwrite``."""
    prep, run_dir = Path(cfg.data.prepared), Path(cfg.run_dir)
    if not (prep / "meta.json").is_file():
        raise FileNotFoundError(f"no prepared dataset at {prep} (run `doctrans preprocess -o {prep}` first)")
    t = cfg.train
    if t.metric == "bleu" and not t.eval_bleu:
        raise ValueError("train.metric is 'bleu' but train.eval_bleu is false: set train.metric=xent_nats "
                         "train.metric_mode=min, or train.eval_bleu=true")
    if t.eval_bleu and dev_scorer is None:
        raise ValueError("train.eval_bleu is on but no dev scorer was given: call doctrans.stages.train(cfg) "
                         "(or training.train.train_model(cfg, dev_scorer=doctrans.evaluation.dev.dev_bleu)), or set "
                         "train.eval_bleu=false")
    if dist.is_main():
        check_run_dir(run_dir, resume, overwrite)
    device = dist.setup(resolve_device(t.device))
    run_dir.mkdir(parents=True, exist_ok=True)
    if dist.is_main():
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
    if dist.is_main():
        atomic_write_text(run_dir / "config.yaml", yaml.safe_dump(to_dict(cfg), sort_keys=False))
    model = build_model(cfg.model, len(src_vocab), len(tgt_vocab), src_vocab.pad_id, cfg.context).to(device)
    bind_vocabularies(model, src_vocab, tgt_vocab)            # modules reading token strings (resume restores them)
    if reads_documents(model):                                # a context model reads documents
        train, dev, dev_refs = load_doc_splits(cfg, src_vocab, tgt_vocab)
        doc = model.document
        filter_context_tuples(train, model.context_filter, doc.context_sents)   # the model's training-tuple filter
        _attach_all(cfg, model, train, dev, src_vocab)
        task = DocNMTTask(cfg, model, train, dev, dev_refs, src_vocab, tgt_vocab, device,
                          doc.context_sents, doc.context_block, dev_scorer, dev_context_scorer, context_data)
    else:
        train, dev, dev_refs = _load_data(cfg, src_vocab, tgt_vocab)
        _attach_all(cfg, model, train, dev, src_vocab)
        task = NMTTask(cfg, model, train, dev, dev_refs, src_vocab, tgt_vocab, device, dev_scorer)
    if t.init_from and (ckpt is None or t.freeze or t.init_lr_scale != 1.0):
        init = shipped.resolve(t.init_from)              # a shipped model's name → its file (checksum verified)
        if ckpt is None:
            _check_init_vocab(init, src_vocab, tgt_vocab)
        elif not Path(init).is_file():
            raise FileNotFoundError(f"cannot resume: the run's train.freeze / train.init_lr_scale apply to the "
                                    f"parameters of its init_from checkpoint {t.init_from}, which is gone")
        # on --resume only the freeze and the loaded parameters' LR factor: the weights come from last.pt
        loaded = initialise_from(model, init, t.freeze, load_weights=ckpt is None)
        if t.init_lr_scale != 1.0:
            task.lr_scale = dict.fromkeys(loaded, t.init_lr_scale)
    elif t.freeze and not t.init_from:
        raise ValueError("train.freeze needs train.init_from")
    trainer = Trainer(task, t, run_dir, device)
    if ckpt is not None:
        trainer.restore(ckpt)
    log.info("model: %s (%s), %.2fM parameters, device %s", type(model).__name__, cfg.model.backbone,
             sum(p.numel() for p in model.parameters()) / 1e6, device)
    trainer.fit()
    if dist.is_main() and (run_dir / "last.pt").is_file():
        card = write_model_card(run_dir, run_dir / "last.pt", last_dev_scores(run_dir / "metrics.jsonl"))
        log.info("wrote %s", card)
    return run_dir
