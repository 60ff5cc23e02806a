"""Shared fixtures: a hand-made prepared dataset (no BPE merges), the TVsub location, a small
slice of TVsub in its own layout (cut at test time from ``../shared/corpora/tvsub``: no corpus
text is ever part of the repository).

Tiers are directories, and each test gets its directory's marker here (``pytest -m unit``):

* ``tests/unit/``         fast tests of pure functions and small modules;
* ``tests/integration/``  several components together: small models trained a few steps,
                          eflomal/KenLM, CliRunner on hand-made prepared data;
* ``tests/system/``       end-to-end CLI runs (on ``tvsub_slice``), overfitting.

A test that needs the TVsub corpus (a ``skipif`` whose reason names TVsub, e.g. ``needs_tvsub()``,
or the ``tvsub_slice`` fixture) also gets the ``corpus`` marker wherever it lives: ``pytest -m "not corpus"`` is what CI without
``../shared`` runs in full. Test modules import these helpers with ``from conftest import …``
(``tests/`` is on ``pythonpath``, setup.cfg).
"""
from __future__ import annotations

import html
import json
import os
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pytest
import torch

REPO = Path(__file__).resolve().parents[1]
TVSUB = (REPO / ".." / "shared" / "corpora" / "tvsub").resolve()
TIERS = ("unit", "integration", "system")

if os.environ.get("PYTEST_XDIST_WORKER"):   # `make test` runs a worker per core (pytest-xdist): one thread each
    torch.set_num_threads(1)


def pytest_collection_modifyitems(config, items):
    """Mark every test with its tier (its directory under tests/) and ``corpus`` if it needs TVsub."""
    tests_dir = Path(__file__).resolve().parent
    for item in items:
        try:
            tier = Path(item.path).resolve().relative_to(tests_dir).parts[0]
        except ValueError:
            continue
        if tier in TIERS:
            item.add_marker(getattr(pytest.mark, tier))
        if any("TVsub" in str(m.kwargs.get("reason", "")) for m in item.iter_markers("skipif")) \
                or "tvsub_slice" in getattr(item, "fixturenames", ()):
            item.add_marker(pytest.mark.corpus)


def backbones() -> list[str]:
    """The names of the backbone table ``doctrans.models.build.BACKBONES``, sorted.

    Model-level tests are parametrized over these, each with its ``pipelines/<name>/tiny.yaml``
    (``tiny_backbone``), so a new backbone is tested by adding its row and a tiny YAML.
    """
    from doctrans.models.build import BACKBONES

    return sorted(BACKBONES)


def random_lines(vocab, n: int, length: int, seed: int = 0) -> list[np.ndarray]:
    """``n`` source id lines of ``length // 2`` … ``length − 1`` random non-special ids of ``vocab``,
    each ending in ``</s>``."""
    rng = np.random.default_rng(seed)
    return [np.append(rng.integers(4, len(vocab), int(rng.integers(length // 2, length))), vocab.eos_id)
            for _ in range(n)]


def tiny_transformer(vocab, *overrides: str):
    """The tiny Transformer (``overrides``: e.g. a context model) over ``vocab`` on both sides, seed 0, eval mode."""
    from doctrans.models.build import build_model

    cfg = tiny_backbone("transformer", *overrides)
    torch.manual_seed(0)
    return build_model(cfg.model, len(vocab), len(vocab), 0, cfg.context).eval()


def tiny_backbone(name: str, *overrides: str):
    """The ExperimentConfig of ``pipelines/<name>/tiny.yaml`` with ``key=value`` overrides."""
    from doctrans.config import load_experiment

    return load_experiment(REPO / "pipelines" / name / "tiny.yaml", list(overrides))


def added_named_parameters(model) -> list[tuple[str, torch.nn.Parameter]]:
    """The (name, parameter) pairs a context model adds to its backbone: those not under ``backbone.``."""
    return [(n, p) for n, p in model.named_parameters() if not n.startswith("backbone.")]


def added_parameters(model) -> int:
    """How many parameters a context model adds to its backbone (works on the meta device)."""
    return sum(p.numel() for _, p in added_named_parameters(model))


def needs_tvsub():
    return pytest.mark.skipif(not (TVSUB / "train").is_dir(), reason=f"TVsub corpus not at {TVSUB}")


def reversal_pairs(n: int, seed: int = 0, vocab: int = 30) -> tuple[list[str], list[str]]:
    """Source: random 'w<i>' words; target: the same words reversed and renamed 'v<i>'."""
    rng = np.random.default_rng(seed)
    src, tgt = [], []
    for _ in range(n):
        words = rng.integers(0, vocab, rng.integers(3, 8))
        src.append(" ".join(f"w{i}" for i in words))
        tgt.append(" ".join(f"v{i}" for i in reversed(words)))
    return src, tgt


def write_prepared(out: Path, train: tuple[list[str], list[str]], dev: tuple[list[str], list[str]]) -> Path:
    """A prepared dataset in `doctrans preprocess`'s layout whose BPE has no merges."""
    out.mkdir(parents=True, exist_ok=True)
    for split, (src, tgt) in (("train", train), ("dev", dev)):
        for lang, lines in (("zh", src), ("en", tgt)):
            for kind in ("tok", "bpe"):
                (out / f"{split}.{kind}.{lang}").write_text("".join(f"{x}\n" for x in lines), encoding="utf-8")
        (out / f"{split}.docs").write_text("".join(f"d0\t{i}\n" for i in range(len(src))), encoding="utf-8")
    for lang, lines in (("zh", train[0]), ("en", train[1])):
        counts = Counter(t for line in lines for t in line.split())
        (out / f"vocab.{lang}.txt").write_text("".join(f"{t}\t{c}\n" for t, c in counts.most_common()),
                                               encoding="utf-8")
        (out / f"bpe.codes.{lang}").write_text("#version: 0.2\n", encoding="utf-8")
    meta = {"version": 1, "src": "zh", "tgt": "en", "lowercase": True, "bpe": {"merges": 0, "joint": False},
            "splits": {"train": {"sentences": len(train[0])}, "dev": {"sentences": len(dev[0])}}}
    (out / "meta.json").write_text(json.dumps(meta), encoding="utf-8")
    return out


# A training run that only needs to produce a checkpoint: one thread, no dev BLEU, no pictures.
QUIET_TRAIN = ("train.threads=1", "train.eval_bleu=false", "train.metric=xent_nats", "train.metric_mode=min",
               "train.tensorboard=false", "train.plot=false")


def train_tiny(root: Path, n_pairs: int, *overrides: str) -> Path:
    """``last.pt`` of ``pipelines/transformer/tiny.yaml`` (+ ``QUIET_TRAIN`` and ``overrides``)
    trained on ``n_pairs`` reversal pairs prepared under ``root/prep`` (run dir ``root/run``)."""
    from doctrans.config import load_experiment
    from doctrans import stages

    pairs = reversal_pairs(n_pairs)
    prep = write_prepared(root / "prep", pairs, pairs)
    cfg = load_experiment(REPO / "pipelines" / "transformer" / "tiny.yaml",
                          [f"data.prepared={prep}", f"run_dir={root / 'run'}", *QUIET_TRAIN, *overrides])
    return stages.train(cfg) / "last.pt"


@pytest.fixture
def reversal_prepared(tmp_path: Path) -> Path:
    pairs = reversal_pairs(20)
    return write_prepared(tmp_path / "prep", pairs, pairs)


# Chinese pronouns (thesis Table 4.3), spelled out so black-box tests need no DP module.
CHINESE_PRONOUNS = {b + s for b in ("我", "你", "他", "她", "它", "我们", "你们", "他们", "她们", "它们")
                    for s in ("", "的", "自己")}


def oracle_insertions(base: str, oracle: str) -> list[int] | None:
    """Token positions in ``oracle`` of the pronouns a hand annotator inserted into ``base``, or
    None when ``oracle`` is not ``base`` plus pronoun tokens (or an inserted pronoun sits next to
    the same token, which makes its place ambiguous)."""
    b, o = base.split(), oracle.split()
    i, extra = 0, []
    for k, t in enumerate(o):
        if i < len(b) and t == b[i]:
            i += 1
        elif t in CHINESE_PRONOUNS:
            extra.append(k)
        else:
            return None
    if i != len(b) or any(o[k] in o[max(k - 1, 0):k] + o[k + 1:k + 2] for k in extra):
        return None
    return extra


def write_tvsub_slice(out: Path, train_docs: int = 10, train_lines: int = 15, eval_lines: int = 7) -> Path:
    """A small corpus in TVsub's layout at ``out``, cut from ``TVSUB``: the first ``train_lines``
    lines of the first ``train_docs`` training episodes; for dev and test, from each ``<DOC>`` of
    the reference SGML, the first ``eval_lines`` lines whose hand DP annotation is unambiguous
    (``oracle_insertions``), with every line-aligned file (raw, reference, segmented, oracle,
    the authors' auto-DP output) and every reference system cut alike."""
    from doctrans.data.sgml import read_sgml
    from doctrans.utils.io import atomic_write_lines as _write, read_lines as _lines_of

    for d in range(train_docs):
        for lang in ("zh", "en"):
            _write(out / "train" / f"{d}.{lang}", _lines_of(TVSUB / "train" / f"{d}.{lang}")[:train_lines])
    for split in ("dev", "test"):
        refs = read_sgml(TVSUB / split / f"{split}.ref.sgm")
        seg, ora = (_lines_of(TVSUB / split / f"{split}.{x}.zh") for x in ("seg", "oracle-dp.seg"))
        keep, start = [], 0
        for _, n in refs[0].docs:
            good = [i for i in range(start, start + n) if oracle_insertions(seg[i], ora[i]) is not None]
            keep.append(good[:eval_lines])
            start += n
        rows = [i for doc in keep for i in doc]
        for f in sorted((TVSUB / split).glob(f"{split}.*")):
            if f.suffix != ".sgm":
                lines = _lines_of(f)
                _write(out / split / f.name, [lines[i] for i in rows])
        body = ['<refset setid="tvsub-slice" srclang="zh" trglang="en">']
        for r in refs:
            for (docid, _), doc in zip(r.docs, keep):
                body.append(f'<DOC docid="{docid}" sysid="{r.sysid}">')
                body += [f"<seg id={k + 1}> {html.escape(r.segments[i], quote=False)} </seg>"
                         for k, i in enumerate(doc)]
                body.append("</DOC>")
        _write(out / split / f"{split}.ref.sgm", body + ["</refset>"])
    return out


@pytest.fixture(scope="session")
def tvsub_slice(tmp_path_factory) -> Path:
    """``write_tvsub_slice`` once per session (skips without the corpus)."""
    if not (TVSUB / "train").is_dir():
        pytest.skip(f"TVsub corpus not at {TVSUB}")
    return write_tvsub_slice(tmp_path_factory.mktemp("tvsub") / "tvsub")


@dataclass
class DocBatchStub:
    """A hand-made document batch for model-level tests: src (B, S), tgt_in (B, T), ctx (B, N)
    (batch rows of the previous sentences, −1 = none), is_target (B,), block (B,) or None
    (sub-document of each row)."""

    src: "torch.Tensor"
    tgt_in: "torch.Tensor"
    ctx: "torch.Tensor"
    is_target: "torch.Tensor"
    block: "torch.Tensor | None" = None


def stepwise_equals_teacher_forcing(model, batch, order=None, atol: float = 1e-6) -> bool:
    """Whether ``decode_step`` over ``batch.tgt_in`` (float32 log-probabilities) equals the
    log-softmax of ``decode_train``, for the rows ``order`` (B',) of the state — permuted and
    repeated as beam search reorders it (None: every row, no reordering)."""
    rows = torch.arange(batch.src.size(0)) if order is None else order
    with torch.no_grad():
        enc = model.encode(batch)
        full = torch.log_softmax(model.decode_train(enc, batch.tgt_in), -1)[rows]     # (B', T, V)
        state = model.init_state(enc)
        state = state if order is None else state.reorder(order)
        steps = []
        for t in range(batch.tgt_in.size(1)):
            lp, state = model.decode_step(state, batch.tgt_in[rows, t])
            steps.append(lp)
    return torch.allclose(full.float(), torch.stack(steps, 1), atol=atol)
