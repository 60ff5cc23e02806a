"""``doctrans export`` (``doctrans/inference/export.py``) and ``doctrans shortlist``
(``doctrans/inference/shortlist.py``): what other engines and faster decoding read."""
from __future__ import annotations

import click

from doctrans.cli.options import NON_NEGATIVE


@click.command("export", short_help="Export a checkpoint for another inference engine (CTranslate2).")
@click.option("--format", "format_", type=click.Choice(["ctranslate2"]), default="ctranslate2", show_default=True,
              help="ctranslate2: a CTranslate2 model directory (pip install 'doctrans[ct2]').")
@click.option("-c", "--checkpoint", required=True,
              help="A checkpoint written by `doctrans train`, or the name of a shipped model (`doctrans models`).")
@click.option("-o", "--output", required=True, type=click.Path(), help="The model directory to write.")
@click.option("--prepared", default="", help="Prepared dataset dir holding the BPE codes (older checkpoints only).")
def export_cmd(format_, checkpoint, output, prepared) -> None:
    """Write CHECKPOINT's model as a CTranslate2 model directory, with its BPE codes and text
    settings, for `doctrans translate --engine ctranslate2 -c DIR [--compute-type int8]` (files,
    directories and documents, as native translation). Models CTranslate2 can express: the
    sentence-level Transformer and the concatenation context model; others are refused with the
    list. An earlier export at OUTPUT is replaced; the directory is written atomically, with a
    MODEL_CARD.md."""
    from pathlib import Path

    from doctrans.inference.export import export_ctranslate2
    from doctrans.runtime.shipped import resolve

    checkpoint = resolve(checkpoint)
    if not Path(checkpoint).is_file():
        raise click.BadParameter(f"{checkpoint}: no such checkpoint file, nor a shipped model's name "
                                 "(`doctrans models` lists them)", param_hint="-c/--checkpoint")
    out = export_ctranslate2(checkpoint, output, prepared)
    click.echo(f"exported {checkpoint} → {out} (translate: doctrans translate --engine ctranslate2 -c {out} …)")


# --- shortlist (doctrans/inference/shortlist.py) ---------------------------------------------------


@click.command("shortlist", short_help="Build a lexical shortlist (vocabulary map) for faster decoding.")
@click.option("-p", "--prepared", required=True, type=click.Path(exists=True, file_okay=False),
              help="Prepared dataset dir (`doctrans preprocess`): its train.bpe.* pairs and vocabularies.")
@click.option("-o", "--output", default="", metavar="FILE",
              help="The shortlist file to write [default: PREPARED/shortlist.vmap].")
@click.option("--top-k", type=NON_NEGATIVE, default=20, show_default=True,
              help="Candidates kept per source token (best p(t|s) first; 0 = none, only the --frequent ones).")
@click.option("--frequent", type=NON_NEGATIVE, default=100, show_default=True,
              help="Most frequent target tokens, candidates in every batch (0 = none).")
@click.option("--align", "align_path", default="", metavar="FILE", type=click.Path(dir_okay=False),
              help="Symmetrised Pharaoh alignments of the train.bpe pairs, one line per pair [default: align them "
                   "with eflomal and symmetrise with grow-diag-final-and].")
@click.option("--threads", type=NON_NEGATIVE, default=0, show_default=True,
              help="eflomal samplers (0 = all usable cores, as translate --threads).")
def shortlist_cmd(prepared, output, top_k, frequent, align_path, threads) -> None:
    """Build a lexical shortlist from PREPARED's training pairs for `doctrans translate --shortlist
    FILE`: word alignment (eflomal) → p(t|s) → per source BPE token its TOP-K likeliest target
    tokens, plus the FREQUENT most frequent target tokens. The file is CTranslate2's
    vocabulary-mapping format (`source<TAB>targets`). Decoding over the shortlist is faster
    and can change translations; the measured BLEU cost is in benchmarks/RESULTS.md."""
    from doctrans.stages import shortlist

    out = shortlist(prepared, output, top_k, frequent, align_path, threads)
    click.echo(f"wrote {out} (translate with: doctrans translate --shortlist {out} …)")
