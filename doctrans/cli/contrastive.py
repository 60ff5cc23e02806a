"""``doctrans contrastive build`` (``doctrans/evaluation/contrastive.py``) and ``contrastive build-heldout``
(``doctrans/evaluation/context_needed.py``)."""
from __future__ import annotations

import click

from doctrans.cli.options import POSITIVE


@click.group("contrastive", short_help="The contrastive pronoun test set (build it; score with `score contrastive`).")
def contrastive_grp() -> None:
    """The ContraPro-style contrastive pronoun set built from TVsub (docs/discourse.md). Build it
    here; score a model on it with `doctrans score contrastive SET_DIR -c CKPT`."""


@contrastive_grp.command("build", short_help="Build the contrastive pronoun set of a TVsub split (deterministic).")
@click.option("--data", default="../shared/corpora/tvsub", show_default=True,
              help="TVsub root (with dev/ and test/: SPLIT.zh, .seg.zh, .oracle-dp.seg.zh, .ref.sgm).")
@click.option("--split", type=click.Choice(["dev", "test"]), default="test", show_default=True)
@click.option("-o", "--out", required=True, help="Output directory (the set).")
@click.option("--max-distance", type=POSITIVE, default=3, show_default=True,
              help="Context-needed items: the farthest antecedent (lines back) counted (the HAN models read 3).")
def contrastive_build_cmd(data: str, split: str, out: str, max_distance: int) -> None:
    """Build the contrastive pronoun set of a TVsub split (deterministic).

    Every English central pronoun of the first reference becomes an item when the hand DP
    annotation says unambiguously whether the Chinese source drops it (kind dp or overt); its
    contrasts are the reference with that pronoun replaced by every other pronoun of the same
    grammatical case. DP items whose pronoun only the preceding lines decide (a 3rd-person
    antecedent within --max-distance lines, or a reply flipping 1st/2nd person) are marked
    context-needed, with their antecedent distance. Writes OUT/src.zh, ref.en, docs,
    items.jsonl and summary.json, and prints the summary.
    """
    import json
    from pathlib import Path

    from doctrans.evaluation.contrastive import build_set

    s = build_set(Path(data), split, Path(out), max_distance)
    click.echo(json.dumps({k: v for k, v in s.items() if k != "by_pronoun"}, ensure_ascii=False))


@contrastive_grp.command("build-heldout",
                         short_help="Build the held-out context-needed set (automatic DP annotation, ≈2,000 items).")
@click.option("--data", default="../shared/corpora/tvsub", show_default=True,
              help="TVsub root (train/ID.{zh,en} of the held-out episodes; test/ for --check).")
@click.option("-o", "--out", required=True, help="Output directory (the set; its alignment is kept there and reused).")
@click.option("--max-distance", type=POSITIVE, default=3, show_default=True,
              help="The farthest deciding line (lines back) counted; a model reading N < d lines cannot see it.")
@click.option("--check/--no-check", default=True, show_default=True,
              help="Also run the procedure on the TVsub test set and report the share of its 39 hand-annotated "
                   "context-needed items it reproduces.")
@click.option("--samplers", type=POSITIVE, default=2, show_default=True, help="eflomal samplers (threads).")
def contrastive_build_heldout_cmd(data: str, out: str, max_distance: int, check: bool, samplers: int) -> None:
    """Build a context-needed pronoun set from the 89 held-out TVsub training episodes
    (data/heldout.py: never trained on), with the automatic DP annotation.

    English pronouns the eflomal alignment (intersection) leaves without a Chinese pronoun are
    dropped (annotate-dp's Algorithm 1); one becomes an item when the previous lines decide its
    form: a 他/她/它/他们 antecedent in the source, a he/she/they in the previous English, or a
    reply flipping I/you — with the deciding line's distance. Same format as `contrastive build`:
    score it with `doctrans score contrastive OUT -c CKPT`. A couple of minutes on 2 cores.
    """
    import json
    from pathlib import Path

    from doctrans.evaluation.context_needed import build_heldout_set

    s = build_heldout_set(Path(data), Path(out), max_distance=max_distance, check_test=check, samplers=samplers)
    click.echo(json.dumps({k: v for k, v in s.items() if k != "by_pronoun"}, ensure_ascii=False))
