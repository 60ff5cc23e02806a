"""``doctrans contrastive build`` (``doctrans/evaluation/contrastive.py``)."""
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
