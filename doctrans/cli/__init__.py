"""The ``doctrans`` command line: the root group ``cli`` and ``main``; each command group is a
module of this package (``preprocess``, ``train``, ``translate``, ``serve``, ``export``, ``annotate``,
``score``, ``tables``, ``contrastive``, ``configs``, ``models``; shared option types: ``options``).

Each command only parses options (made from the settings' fields where a stage declares them,
``options.setting_option``), builds the stage's config and calls the stage; the
stages are imported inside the commands, so ``doctrans --help`` does not load torch. Only this
module calls ``sys.exit``.
"""
from __future__ import annotations

import logging
import os
import sys

# OpenMP threads sleep, not spin, while they wait for work: with other jobs on the cores, spinning
# threads made translation about 4x slower (benchmarks/busy_machine.py, RESULTS.md). Set before
# torch loads OpenMP; a value the user set wins.
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

import click  # noqa: E402

from doctrans.version import __version__  # noqa: E402
from doctrans.cli.annotate import annotate_dp_grp  # noqa: E402
from doctrans.cli.configs import configs_cmd  # noqa: E402
from doctrans.cli.contrastive import contrastive_grp  # noqa: E402
from doctrans.cli.export import export_cmd, shortlist_cmd  # noqa: E402
from doctrans.cli.models import models_grp  # noqa: E402
from doctrans.cli.preprocess import preprocess_cmd  # noqa: E402
from doctrans.cli.score import score_grp  # noqa: E402
from doctrans.cli.tables import table_grp  # noqa: E402
from doctrans.cli.train import average_cmd, train_cmd  # noqa: E402
from doctrans.cli.serve import serve_cmd  # noqa: E402
from doctrans.cli.translate import translate_cmd  # noqa: E402


def _setup_logging(verbose: bool, quiet: bool = False) -> None:
    quiet = quiet or os.environ.get("RANK", "0") not in ("", "0")     # torchrun: only rank 0 logs INFO
    logging.basicConfig(
        level=logging.WARNING if quiet else logging.DEBUG if verbose else logging.INFO,
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
        datefmt="%H:%M:%S",
    )


@click.group(context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100})
@click.version_option(__version__, prog_name="doctrans")
@click.option("-v", "--verbose", is_flag=True, help="Debug logging.")
@click.option("-q", "--quiet", is_flag=True, help="Warnings and errors only; no progress bars.")
def cli(verbose: bool, quiet: bool) -> None:
    """doctrans: document-level neural machine translation (Chinese→English first).

    Stages: preprocess → [annotate-dp] → train → translate → score. Run `doctrans COMMAND --help`;
    `doctrans configs` lists the shipped YAML configs and their keys.
    """
    from doctrans.utils import set_quiet

    if verbose and quiet:
        raise click.UsageError("-v/--verbose and -q/--quiet exclude each other")
    set_quiet(quiet)
    _setup_logging(verbose, quiet)


# one module per command group (their stages are imported inside the commands)
for _command in (preprocess_cmd, annotate_dp_grp, train_cmd, average_cmd, translate_cmd, serve_cmd, export_cmd,
                 shortlist_cmd, score_grp, table_grp, contrastive_grp, configs_cmd, models_grp):
    cli.add_command(_command)


def main() -> None:
    """Console-script entry point: turn known errors into a one-line message (at most
    ``utils.errors.MAX_MESSAGE`` characters) and exit code 1; a job stopped by a signal after
    saving (``runtime.signals.Interrupted``) exits 128 + the signal number."""
    from doctrans.runtime.signals import Interrupted
    from doctrans.utils.errors import one_line

    try:
        cli(standalone_mode=False)
    except click.exceptions.Abort:
        click.echo("Aborted.", err=True)
        sys.exit(130)
    except click.ClickException as e:
        e.show()
        sys.exit(e.exit_code)
    except Interrupted as e:
        click.echo(f"interrupted: {one_line(e)}", err=True)
        sys.exit(e.exit_code)
    except (ValueError, OSError, RuntimeError, ArithmeticError) as e:
        click.echo(f"error: {one_line(e)}", err=True)
        sys.exit(1)

