"""The DP translation table (issue: DP-aware translation; thesis Tables 4.10, 5.4, 6.2, 6.8).

``doctrans table dp --baseline B.pt --dp D.pt --dpp P.pt --generator G.pt --prepared PREP
--data TVSUB --out results/dp_table.md`` translates the TVsub test set with:

* Baseline (original input) — model B;
* +DPs with the generator's 1-best completion, and N-best mixture decoding, N ∈ {2, 4, 6, 8}
  (one shared beam over the N DP-completed inputs, weights 1/N) — model D;
* +DPPs (``#DP#`` at the generator's positions) — model P;
* Manual oracle — the hand-annotated ``test.oracle-dp.seg.zh`` DPs, moved onto our jieba
  segmentation by character offset (``oracle_onto_tokens``) — model D;
* Auto oracle — ``annotate-dp`` with the reference (``PREP/dp/test.dp.zh``) — model D;

and scores each in the thesis setting (tokenized, lowercased BLEU, 3 references) with paired
bootstrap and sign test against the baseline, counts English pronouns in each output (Table
6.8), and times 1-best vs N-best decoding of the same model and beam. The settings, the scoring
(the metric table's columns), the model metrics (the rows shown in the ``dp_discourse`` view:
contrastive accuracy), the metrics' markdown columns and the provenance line at the end of the
file (commit, date, machine, command) are the table base's (``experiments/base.py``).
"""
from __future__ import annotations

import logging
import time
from dataclasses import dataclass
from pathlib import Path

from doctrans.dp.agreement import base_chars, extract_dps, project_offsets
from doctrans.dp.pronouns import CHINESE_PRONOUNS
from doctrans.experiments.base import (TableConfig, column_table, model_columns, score, view_columns, write_rows,
                                       write_table)
from doctrans.utils.io import atomic_write_lines, read_lines

logger = logging.getLogger(__name__)

VIEWS = ("dp_discourse",)     # the metric table's view this table shows: its model metrics (contrastive accuracy)


def oracle_onto_tokens(tokens: list[str], oracle_base: str, oracle_line: str) -> list[str]:
    """Insert the oracle's DPs (found by ``extract_dps`` against its own base) into ``tokens``
    (our segmentation of the same sentence) at the same character offsets; a DP inside one of
    our tokens splits it there. Pronouns stay single tokens."""
    dps = extract_dps(oracle_base, oracle_line, CHINESE_PRONOUNS)
    ours = base_chars(" ".join(tokens))
    theirs = base_chars(oracle_base)
    proj = project_offsets(theirs, ours) if ours != theirs else list(range(len(theirs) + 1))
    inserts: dict[int, list[str]] = {}
    for off, pron in dps:
        inserts.setdefault(proj[off], []).append(pron)
    out, pos = [], 0
    for tok in tokens:
        n = len(base_chars(tok))
        cut = [o for o in sorted(inserts) if pos <= o < pos + n]
        start = 0
        for o in cut:
            if o - pos > start:
                out.append(tok[start:o - pos])
                start = o - pos
            out.extend(inserts.pop(o))
        out.append(tok[start:])
        pos += n
    for o in sorted(inserts):                      # at the end of the sentence
        out.extend(inserts[o])
    return out


@dataclass(frozen=True, kw_only=True)
class DPTableConfig(TableConfig):
    """The settings of ``doctrans table dp`` (its options, same names; the shared ones are
    ``TableConfig``'s; ``discourse``: contrastive, APT, cohesion and coherence columns)."""

    baseline: str                       # the sentence-level Transformer (original input)
    dp: str                             # the +DPs Transformer
    generator: str                      # the DP generator (doctrans train pipelines/dp/...)
    dpp: str = ""                       # the +DPPs Transformer (row left out when empty)
    out: str = "results/dp_table.md"
    work: str = "results/dp_table"
    nbest: tuple[int, ...] = (2, 4, 6, 8)


def translate_row(loaded: dict, cfg, lines: list[str]) -> list[str]:
    """One row's translation of ``lines`` with ``cfg`` (a ``TranslateConfig``): a Translator
    built for this row's config and DP input (``dp.apply.dp_inputs``: generator, N-best,
    lattice…), around the model of ``cfg.model.checkpoint`` loaded once per table (``loaded``:
    checkpoint → ``LoadedModel``, filled here). Rows never share a Translator, so no row
    decodes with another row's input transform."""
    from doctrans.dp.apply import dp_inputs
    from doctrans.inference.translate import LoadedModel, Translator

    if cfg.model.checkpoint not in loaded:
        loaded[cfg.model.checkpoint] = LoadedModel.load(cfg.model)
    return Translator(cfg, dp_inputs(cfg), loaded[cfg.model.checkpoint]).translate(lines)


def build_dp_table(args: DPTableConfig) -> Path:
    """Translate and score every row, write ``args.out`` (and WORK/rows.json); returns ``args.out``."""
    from doctrans.evaluation.metrics import metric_columns
    from doctrans.inference.translate import TranslateConfig

    prep, data, work = Path(args.prepared), Path(args.data), Path(args.work)
    work.mkdir(parents=True, exist_ok=True)
    tok = read_lines(prep / "test.tok.zh")
    docs = str(prep / "test.docs")
    oracle = [" ".join(oracle_onto_tokens(t.split(), b, o)) for t, b, o in zip(
        tok, read_lines(data / "test" / "test.seg.zh"), read_lines(data / "test" / "test.oracle-dp.seg.zh"))]
    atomic_write_lines(work / "test.manual-oracle.tok.zh", oracle)
    common = dict(beam=args.beam, tokenized=True)
    systems: list[tuple[str, str, dict, str]] = [
        ("Baseline", args.baseline, dict(input=str(prep / "test.tok.zh"), input_format="tok"), "baseline"),
        ("+DPs, generator 1-best", args.dp, dict(input=str(prep / "test.tok.zh"), input_format="tok",
                                                 dp_generator=args.generator, dp_docs=docs), "dp_1best")]
    for n in args.nbest:
        systems.append((f"+DPs, {n}-best mixture", args.dp, dict(
            input=str(prep / "test.tok.zh"), input_format="tok", dp_generator=args.generator, dp_docs=docs,
            dp_nbest=n, write_lattice=str(work / f"test.{n}best.plf")), f"dp_{n}best"))
    if args.dpp:
        systems.append(("+DPPs, generator positions", args.dpp, dict(
            input=str(prep / "test.tok.zh"), input_format="tok", dp_generator=args.generator, dp_docs=docs,
            dp_input="dpp"), "dpp"))
    systems += [("+DPs, manual oracle input", args.dp, dict(input=str(work / "test.manual-oracle.tok.zh"),
                                                            input_format="tok"), "oracle_manual"),
                ("+DPs, auto oracle input (annotate-dp with the reference)", args.dp,
                 dict(input=str(prep / "dp" / "test.dp.zh"), input_format="tok"), "oracle_auto")]
    rows, base_hyp, loaded = [], None, {}
    for name, ckpt, opts, key in systems:
        hyp = work / f"test.{key}.hyp"
        cfg = TranslateConfig(checkpoint=ckpt, output=str(hyp), **common, **opts)
        t0 = time.time()
        atomic_write_lines(hyp, translate_row(loaded, cfg, read_lines(cfg.io.input)))
        dt = time.time() - t0
        res = score(args, hyp, baseline=base_hyp, text=args.discourse)
        if base_hyp is None:
            base_hyp = hyp
        row = {"system": name, "key": key, "decode_s": round(dt, 1), **metric_columns(res)}
        if args.discourse and (not key.startswith("dp_") or key == "dp_1best"):
            row.update(_model_columns(ckpt, cfg, tok, docs, args))
        rows.append(row)
        logger.info("%s: BLEU %.2f (%.1f s)", name, row["bleu"], dt)
    write_rows(args, rows)
    src_pron = sum(1 for line in tok for t in line.split() if t in CHINESE_PRONOUNS)
    return write_table(args, render(rows, src_pron))


def _model_columns(ckpt: str, cfg, tok: list[str], docs: str, args) -> dict:
    """The model metrics' columns of ``ckpt`` (contrastive pronoun accuracy) scored on the input
    this row translates: the test source itself, the generator's 1-best DP (or DPP) completion of
    it, or an oracle input file (N-best mixtures have no single input and get none)."""
    from doctrans.dp.apply import DPInputVariants

    if cfg.dp.dp_generator:
        variants = DPInputVariants(cfg.dp.dp_generator, cfg.dp.dp_input, nbest=1, combine="1best", docs=docs)(tok)
        source = [v[0][0] if v else "" for v in variants]
    else:
        source = read_lines(cfg.io.input)
    return model_columns(ckpt, args, VIEWS, source=source, test_source=tok)


def render(rows: list[dict], src_pronouns: int) -> str:
    base = rows[0]["bleu"]
    t1 = next((r["decode_s"] for r in rows if r["key"] == "dp_1best"), None)
    lines = ["| system | test BLEU | Δ | bootstrap p | sign-test p | EN pronouns | DP recall | decode s (× 1-best) |",
             "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |"]
    for r in rows:
        mark = "" if "bootstrap_p" not in r else ("*" if r["bootstrap_p"] < 0.05 and r["sign_p"] < 0.05 else "")
        ratio = f" ({r['decode_s'] / t1:.2f}×)" if t1 and r["key"].startswith("dp_") else ""
        bp = f"{r['bootstrap_p']:.3f}" if "bootstrap_p" in r else "—"
        sp = f"{r['sign_p']:.3f}" if "sign_p" in r else "—"
        rec = f"{100 * r['dp_recall']:.1f}%" if "dp_recall" in r else "—"
        lines.append(f"| {r['system']} | {r['bleu']:.2f}{mark} | {r['bleu'] - base:+.2f} | {bp} | {sp} | "
                     f"{r['pronouns']} | {rec} | {r['decode_s']}{ratio} |")
    refs = rows[0]["ref_pronouns"]
    columns = view_columns("dp_discourse")
    if any(k in r for r in rows for c in columns for k in c.keys):
        lines += ["", *column_table(rows, columns, reference=True)]
        lines += ["", "Contrastive: each model scored on the input it translates (the test source, the generator's "
                      "1-best completion, or the oracle input; N-best mixtures: —). docs/discourse.md."]
    lines += ["", f"English pronouns in the 3 references: {refs} (thesis Table 6.8: human 972); "
                  f"overt Chinese pronouns in the test source (jieba): {src_pronouns}.",
              "BLEU: case-insensitive, tokenized, 3 references (the thesis' setting). `*`: p < 0.05 in both "
              "the paired bootstrap (1,000 samples) and the sign test against the baseline. DP recall: share of "
              "the hand-annotated dropped pronouns the first reference realises that the output realises too "
              "(docs/discourse.md)."]
    return "\n".join(lines) + "\n"

