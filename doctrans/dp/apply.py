"""Apply a trained DP generator to monolingual Chinese (``doctrans annotate-dp apply --generator``).

For each input line the generator gives, per position (each token and a final ``</s>``), a
distribution over ``N`` + pronouns. Outputs (``OUT`` = output prefix):

* ``OUT.dp.zh`` — 1-best: at every position with P(N) < τ (τ tuned on dev at training time),
  the most probable pronoun is inserted before the token;
* ``OUT.dpp.zh`` — the same with ``#DP#`` in place of the pronoun;
* ``OUT.nbest`` — up to N DP-completed sentences per input line, Moses n-best style:
  ``LINE ||| SENTENCE ||| SCORE`` (LINE 0-based). The *slots* are the 1-best DP positions; each
  slot's alternatives are the pronouns, renormalised over the pronouns at that slot; a
  completion's SCORE is the product of its slot probabilities (so the scores of all completions
  of a line sum to 1 over the full list), best first. This is the thesis' confusion network
  (§4.3.3: one column per detected position, no ε arc). A line with no slot has one entry, the
  line itself, score 1.0; an empty line has one empty entry.

Line counts are preserved everywhere (empty line in, empty line out). Document context comes
from ``--docs`` (``doc<TAB>position`` per line, e.g. PREPARED/test.docs), else each input file is
one document.
"""
from __future__ import annotations

import heapq
import logging
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from doctrans.dp.annotate import DPP_TOKEN
from doctrans.dp.data import DPSentence, read_docs
from doctrans.dp.generator import DPEnsemble, DPGenerator, load_generator, one_best
from doctrans.dp.pronouns import CHINESE_PRONOUNS
from doctrans.inference.transform import InputSetup
from doctrans.utils.io import atomic_write_lines, read_lines

logger = logging.getLogger(__name__)


@dataclass
class Completion:
    tokens: list[str]
    score: float            # product of slot probabilities


def n_best(tokens: Sequence[str], probs: np.ndarray, labels: Sequence[str], slots: Sequence[int],
           n: int) -> list[Completion]:
    """The ``n`` best joint completions over ``slots`` (see module doc), best first.

    Lazy k-best over independent slots: each slot's pronouns sorted by probability; start from
    all-best; a successor moves one slot to its next alternative (duplicates skipped)."""
    if not slots:
        return [Completion(list(tokens), 1.0)]
    alts = []
    for t in slots:
        p = probs[t, 1:].astype(np.float64)
        p = p / p.sum() if p.sum() > 0 else np.full_like(p, 1.0 / len(p))
        order = np.argsort(-p, kind="stable")
        alts.append([(labels[j + 1], float(p[j])) for j in order])
    start = (0,) * len(slots)

    def score(state):
        return float(np.prod([alts[s][i][1] for s, i in enumerate(state)]))

    heap, seen, out = [(-score(start), start)], {start}, []
    while heap and len(out) < n:
        neg, state = heapq.heappop(heap)
        chosen = {slots[s]: alts[s][i][0] for s, i in enumerate(state)}
        toks = []
        for t in range(len(tokens) + 1):
            if t in chosen:
                toks.append(chosen[t])
            if t < len(tokens):
                toks.append(tokens[t])
        out.append(Completion(toks, -neg))
        for s in range(len(slots)):
            if state[s] + 1 < len(alts[s]):
                nxt = state[:s] + (state[s] + 1,) + state[s + 1:]
                if nxt not in seen:
                    seen.add(nxt)
                    heapq.heappush(heap, (-score(nxt), nxt))
    return out


@dataclass
class LineDPs:
    """The generator's output for one line: 1-best DP and DPP tokens, the slot positions, the
    N-best completions and per slot its pronoun alternatives (renormalised, best first)."""

    dp: list[str]
    dpp: list[str]
    slots: list[int]
    completions: list[Completion]
    columns: list[list[tuple[str, float]]]


def slot_alternatives(probs: np.ndarray, labels: Sequence[str], slots: Sequence[int], n: int
                      ) -> list[list[tuple[str, float]]]:
    """Per slot: its ``n`` most probable pronouns with probabilities renormalised over them."""
    out = []
    for t in slots:
        p = probs[t, 1:].astype(np.float64)
        top = np.argsort(-p, kind="stable")[:n]
        z = p[top].sum() or 1.0
        out.append([(labels[j + 1], float(p[j] / z)) for j in top])
    return out


def complete_lines(gen: DPGenerator | DPEnsemble, lines: Sequence[str], doc_ids: Sequence[str], nbest: int,
                   threshold: float | None = None) -> list[LineDPs]:
    """Run the generator ``gen`` on segmented ``lines`` (``doc_ids`` one per line); an empty
    line gives empty outputs and one empty completion."""
    tau = gen.threshold if threshold is None else threshold
    sents = [DPSentence(x.split(), None, d, k) for k, (x, d) in enumerate(zip(lines, doc_ids))]
    out = []
    for s, p in zip(sents, gen.distributions(sents)):
        if not s.tokens:
            out.append(LineDPs([], [], [], [Completion([], 1.0)], []))
            continue
        dp, dpp, slots = one_best(s.tokens, p, gen.labels, tau)
        out.append(LineDPs(dp, dpp, slots, n_best(s.tokens, p, gen.labels, slots, nbest),
                           slot_alternatives(p, gen.labels, slots, nbest)))
    return out


def plf_line(tokens: Sequence[str], slots: Sequence[int], columns: Sequence[Sequence[tuple[str, float]]],
             uniform: bool = True) -> str:
    """One sentence as a Moses PLF confusion network: one column per token (weight 1.0) and
    before each slot a column of its pronoun alternatives, weighted 1/n each (``uniform``, the
    thesis) or by their renormalised probabilities; every jump is 1."""
    at = dict(zip(slots, columns))
    cols = []
    for t in range(len(tokens) + 1):
        if t in at:
            alts = at[t]
            cols.append([(w, 1.0 / len(alts) if uniform else p) for w, p in alts])
        if t < len(tokens):
            cols.append([(tokens[t], 1.0)])
    return "(" + "".join("(" + "".join(f"({w!r},{p:.6g},1)," for w, p in col) + ")," for col in cols) + ")"


def parse_plf(line: str) -> list[list[tuple[str, float, int]]]:
    """Parse one PLF line into columns of (token, weight, jump). Raises ``ValueError``."""
    import ast

    try:
        value = ast.literal_eval(line.strip())
    except (ValueError, SyntaxError) as e:
        raise ValueError(f"not a PLF line: {line[:80]!r}: {e}") from None
    if not isinstance(value, tuple) or not all(
            isinstance(col, tuple) and all(isinstance(e, tuple) and len(e) == 3 for e in col) for col in value):
        raise ValueError(f"not a PLF line: {line[:80]!r}")
    return [[(str(w), float(p), int(j)) for w, p, j in col] for col in value]


def apply_generator(generator: str | Path | Sequence[str | Path], input_path: str | Path, out_prefix: str | Path,
        docs: str | Path | None = None, nbest: int = 6, input_format: str = "tok",
        threshold: float | None = None) -> dict[str, Path]:
    """Apply ``generator`` (a checkpoint of ``doctrans train pipelines/dp/…``; several, as a
    sequence or joined by ``:``, are ensembled: ``doctrans.dp.generator.load_generator``) to ``input_path``;
    write ``OUT.dp.zh``, ``OUT.dpp.zh``, ``OUT.nbest`` (see module doc).

    ``input_format``: ``tok`` (segmented, as PREPARED/*.tok.zh) or ``raw`` (segmented here with
    the preprocess text pipeline). ``threshold`` overrides the tuned τ. Raises ``ValueError``
    for a non-generator checkpoint or a docs file of a different length, ``FileNotFoundError``
    for a missing checkpoint.
    """
    gen = load_generator(generator)
    tau = gen.threshold if threshold is None else threshold
    lines = read_lines(input_path)
    if input_format == "raw":
        from doctrans.data.text import normalize_zh, segment_zh
        lines = [" ".join(segment_zh(normalize_zh(x))) if x.strip() else "" for x in lines]
    elif input_format != "tok":
        raise ValueError(f"input_format must be tok or raw, got {input_format!r}")
    doc_ids = read_docs(Path(docs) if docs else None, len(lines))
    dp_lines, dpp_lines, nb_lines = [], [], []
    for k, res in enumerate(complete_lines(gen, lines, doc_ids, nbest, tau)):
        dp_lines.append(" ".join(res.dp))
        dpp_lines.append(" ".join(res.dpp))
        for c in res.completions:
            nb_lines.append(f"{k} ||| {' '.join(c.tokens)} ||| {c.score:.6f}")
    out_prefix = Path(out_prefix)
    out_prefix.parent.mkdir(parents=True, exist_ok=True)
    paths = {"dp": Path(f"{out_prefix}.dp.zh"), "dpp": Path(f"{out_prefix}.dpp.zh"),
             "nbest": Path(f"{out_prefix}.nbest")}
    atomic_write_lines(paths["dp"], dp_lines)
    atomic_write_lines(paths["dpp"], dpp_lines)
    atomic_write_lines(paths["nbest"], nb_lines)
    n_dp = sum(x.count(DPP_TOKEN) for x in dpp_lines)
    logger.info("%d lines, %d DPs inserted (τ = %.2f); n-best: %d entries", len(lines), n_dp, tau, len(nb_lines))
    return paths


def read_nbest(path: str | Path, n_lines: int) -> list[list[tuple[str, float]]]:
    """Read ``OUT.nbest`` back: per input line, its (sentence, score) list. Raises ``ValueError``
    naming the line for a malformed entry or a line index out of order/range."""
    out: list[list[tuple[str, float]]] = [[] for _ in range(n_lines)]
    for no, line in enumerate(read_lines(path), 1):
        parts = line.split(" ||| ")
        if len(parts) != 3 or not parts[0].isdigit():
            raise ValueError(f"{path}:{no}: expected 'LINE ||| SENTENCE ||| SCORE', got {line!r}")
        k = int(parts[0])
        if not 0 <= k < n_lines:
            raise ValueError(f"{path}:{no}: line index {k} outside 0..{n_lines - 1}")
        out[k].append((parts[1].strip(), float(parts[2])))
    return out


# --- translate --dp-generator: the input transform --------------------------------------------


def mixture_weights(scores: list[float], mode: str = "uniform") -> list[float]:
    """Weights of the N-best variants of one sentence, summing to 1: ``uniform`` 1/N (the
    thesis' confusion networks) or ``generator`` (completion scores renormalised; uniform if
    they are all 0). Raises ``ValueError`` for an unknown mode or no scores."""
    if not scores:
        raise ValueError("no completions")
    if mode == "uniform":
        return [1.0 / len(scores)] * len(scores)
    if mode != "generator":
        raise ValueError(f"unknown weight mode {mode!r}")
    z = sum(scores)
    return [x / z for x in scores] if z > 0 else [1.0 / len(scores)] * len(scores)


class DPInputVariants:
    """The input transform of ``doctrans translate --dp-generator`` (docs/models.md §3.4; Wang 2019 thesis
    §4.3.3, Tables 5.4/6.2): every tokenized source line becomes its DP-completed variants.

    Options (``TranslateConfig.dp_*``): ``generator`` checkpoint(s) (``load_generator``, loaded
    on the first call); ``dp_input`` ``dp`` (pronouns inserted) | ``dpp`` (``#DP#`` at detected
    positions); ``nbest`` N completions per line; ``combine`` ``mixture`` | ``max`` | ``1best``;
    ``weights`` ``uniform`` | ``generator`` (``mixture_weights``); ``docs`` a ``.docs`` file
    (``doc<TAB>position`` per line) for the generator's document context; ``write_lattice`` a
    path for the lines as Moses PLF confusion networks (``plf_line``; ``()`` for skipped lines).

    ``combine`` is the effective decoding mode for the caller: ``1best`` whenever one variant
    per line is produced (``dpp`` input or N = 1). ``protect`` is the token set BPE must keep
    whole (``PROTECTED``: the pronouns and ``#DP#``). Raises ``ValueError`` for a bad option.
    """

    PROTECTED = frozenset(CHINESE_PRONOUNS) | {DPP_TOKEN}

    def __init__(self, generator: str, dp_input: str = "dp", nbest: int = 1, combine: str = "mixture",
                 weights: str = "uniform", docs: str = "", write_lattice: str = ""):
        if combine not in ("mixture", "max", "1best") or weights not in ("uniform", "generator") \
                or dp_input not in ("dp", "dpp") or nbest < 1:
            raise ValueError(f"bad DP options: combine={combine!r} weights={weights!r} "
                             f"input={dp_input!r} nbest={nbest}")
        self.generator, self.dp_input, self.nbest, self.weights = generator, dp_input, nbest, weights
        self.docs, self.write_lattice, self.protect = docs, write_lattice, self.PROTECTED
        self.combine = "1best" if dp_input == "dpp" or nbest == 1 else combine
        self._gen: DPGenerator | DPEnsemble | None = None

    def __call__(self, tok_lines: Sequence[str | None], doc_ids: Sequence[str] | None = None
                 ) -> list[list[tuple[str, float]]]:
        """Per line of ``tok_lines`` (segmented Chinese; ``None`` = a line not translated, e.g.
        empty input, which gets no variants): its variants as (tokenized string, weight), the
        weights summing to 1; the 1-best first. ``doc_ids`` default: from ``docs``. Raises
        ``ValueError`` for a docs file of a different length."""
        if self._gen is None:
            self._gen = load_generator(self.generator)
        if doc_ids is None:
            doc_ids = read_docs(Path(self.docs) if self.docs else None, len(tok_lines))
        keep = [i for i, t in enumerate(tok_lines) if t is not None]
        res = complete_lines(self._gen, [tok_lines[i] for i in keep], [doc_ids[i] for i in keep], self.nbest)
        if self.write_lattice:
            plf = ["()"] * len(tok_lines)
            for i, r in zip(keep, res):
                plf[i] = plf_line(tok_lines[i].split(), r.slots, r.columns, uniform=self.weights == "uniform")
            atomic_write_lines(self.write_lattice, plf)
        out: list[list[tuple[str, float]]] = [[] for _ in tok_lines]
        for i, r in zip(keep, res):
            if self.combine == "1best":
                out[i] = [(" ".join(r.dpp if self.dp_input == "dpp" else r.dp), 1.0)]
            else:
                comps = r.completions[:self.nbest]                # 1..N completions per line
                ws = mixture_weights([c.score for c in comps], self.weights)
                out[i] = [(" ".join(c.tokens), w) for c, w in zip(comps, ws)]
        return out


def dp_inputs(cfg) -> InputSetup:
    """The ``InputSetup`` of a ``TranslateConfig`` (``inference/transform.py``): a
    ``DPInputVariants`` built from its ``dp_*`` options when ``cfg.dp.dp_generator`` is set (else
    none), and the DP tokens BPE keeps whole for a checkpoint trained with
    ``data.bpe_protect_dp``. Module-level, so ``partial(build_translator, cfg, dp_inputs)`` is
    picklable for ``--workers``. Raises ValueError for a bad DP option."""
    transform = None
    if cfg.dp.dp_generator:
        d = cfg.dp
        transform = DPInputVariants(d.dp_generator, d.dp_input, d.dp_nbest, d.dp_combine, d.dp_weights, d.dp_docs,
                                    d.write_lattice)
    return InputSetup(transform, DPInputVariants.PROTECTED)
