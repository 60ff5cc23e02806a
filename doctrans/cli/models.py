"""``doctrans models``: the models shipped with doctrans (``doctrans/runtime/shipped.py``)."""
from __future__ import annotations

import click


@click.group("models", invoke_without_command=True,
             short_help="List the models shipped with doctrans (show one's model card).")
@click.pass_context
def models_grp(ctx: click.Context) -> None:
    """List the models shipped with doctrans: name, kind (document: the default of
    `doctrans translate` without -c; sentence: with --sentence), size and what it scores.
    `doctrans models show NAME` prints a model's card (data, recipe, updates, CPU-hours, test
    BLEU, DP recall, pronouns, CXMI, known limits). $DOCTRANS_SHIPPED_DIR points to another
    directory of shipped models (an index.json beside the files)."""
    if ctx.invoked_subcommand is not None:
        return
    from doctrans.runtime.shipped import shipped_dir, shipped_models

    models = shipped_models()
    if not models:
        click.echo(f"no models are shipped in {shipped_dir()} (train one: make quickstart / make full)")
        return
    defaults = {}
    for m in models:
        defaults.setdefault(m.kind, m.name)
    width = max(len(m.name) for m in models)
    for m in models:
        mark = " (default)" if defaults[m.kind] == m.name else ""
        click.echo(f"{m.name:<{width}}  {m.kind + mark:<18}  {m.bytes / 2**20:5.1f} MiB  {m.summary}")


@models_grp.command("show", short_help="Print a shipped model's card.")
@click.argument("name")
def models_show_cmd(name: str) -> None:
    """Print the model card of the shipped model NAME (after checking its file's SHA-256)."""
    from doctrans.runtime.shipped import find

    model = find(name)
    model.verify()
    click.echo(model.card_path.read_text(encoding="utf-8").rstrip())
    click.echo(f"\nfile: {model.path} ({model.bytes:,} bytes, SHA-256 {model.sha256})")


@models_grp.command("add", short_help="Ship a checkpoint (fp16, with its model card).")
@click.argument("checkpoint", type=click.Path(exists=True, dir_okay=False))
@click.option("--name", required=True, help="The model's name (file stem: letters, digits, -, _, .).")
@click.option("--kind", type=click.Choice(["document", "sentence"]), required=True,
              help="document: a context model (the default of translate without -c if first); "
                   "sentence: a sentence-level model (translate --sentence).")
@click.option("--card", "card_file", type=click.Path(exists=True, dir_okay=False), required=True,
              help="The model card (markdown): data, recipe, updates, GPU/CPU time, scores, limits.")
@click.option("--summary", required=True, help="One line for `doctrans models`: what it is, what it scores.")
@click.option("--dir", "root", default=None,
              help="The shipped-models directory [default: $DOCTRANS_SHIPPED_DIR or doctrans/shipped].")
@click.option("--replace", is_flag=True, help="Replace a model already shipped under NAME.")
@click.option("--recaser", type=click.Path(exists=True, dir_okay=False), default=None,
              help="A recaser table (recaser.en.json of a prepared dataset) put inside the shipped file, for a "
                   "checkpoint trained before doctrans learnt one (translate restores case with it).")
def models_add_cmd(checkpoint: str, name: str, kind: str, card_file: str, summary: str, root: str | None,
                   replace: bool, recaser: str | None) -> None:
    """Ship CHECKPOINT as NAME: its weights in fp16 without optimizer state (BPE codes and text
    settings stay inside) as NAME.pt, the card as NAME.md with the file's SHA-256 appended, and
    its entry in index.json. A name already shipped is refused unless --replace; a file over 30 MB
    is refused (a shipped model must stay small)."""
    from pathlib import Path

    from doctrans.runtime.shipping import ship

    try:
        model = ship(checkpoint, name, kind, Path(card_file).read_text(encoding="utf-8"), summary, root, replace,
                     recaser=recaser)
    except ValueError as e:
        raise click.ClickException(str(e)) from None
    click.echo(f"shipped {model.name} ({model.kind}): {model.path} ({model.bytes / 2**20:.1f} MiB, "
               f"SHA-256 {model.sha256})")
