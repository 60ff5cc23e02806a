"""``doctrans configs`` (``doctrans/config_catalog.py``)."""
from __future__ import annotations

import click


_KEY_SECTIONS = ("top", "data", "model", "context", "train", "decode", "dp")


@click.command("configs", short_help="List the shipped YAML configs, or (--keys) the config keys and defaults.")
@click.option("--keys", "keys", is_flag=True,
              help="List the config keys with their defaults and comments instead (of SECTION, or all).")
@click.argument("section", required=False, type=click.Choice(_KEY_SECTIONS), metavar="[SECTION]")
def configs_cmd(keys: bool, section: str | None) -> None:
    """List the YAML configs shipped in pipelines/ (to pass to `doctrans train`), each with the
    first sentence of its comment; with --keys, the keys a config may set, their defaults and what
    they mean.

    \b
    SECTION (with --keys): top (name, run_dir), data, model (per model.backbone), context (per
    context.type), train, decode, dp (the DP generator's YAML: task: dp_generator). Override any
    key on the command line: `doctrans train CONFIG.yaml train.lr=5e-4 context.context_sents=2`.

    \b
    Examples:
      doctrans configs
      doctrans configs --keys context
    """
    from doctrans import config_catalog

    if section and not keys:
        raise click.UsageError(f"SECTION needs --keys: doctrans configs --keys {section}")
    if keys:
        click.echo(config_catalog.render_keys(section), nl=False)
        return
    root = config_catalog.find_pipelines()
    rows = config_catalog.shipped_configs(root)
    click.echo(f"{len(rows)} configs in {root} (doctrans train PATH [KEY=VALUE]...; keys: doctrans configs --keys):")
    click.echo(config_catalog.render_configs(rows), nl=False)
