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
