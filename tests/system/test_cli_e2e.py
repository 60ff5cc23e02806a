"""The CLI's config errors (the stages on real TVsub lines: test_cli_stages.py)."""
from __future__ import annotations

from click.testing import CliRunner

from doctrans.cli import cli

from conftest import REPO


def test_unknown_override_is_a_clear_error(tmp_path):
    r = CliRunner().invoke(cli, ["train", str(REPO / "pipelines" / "transformer" / "tiny.yaml"), "train.lrr=1"])
    assert r.exit_code != 0
    assert "train.lrr" in str(r.exception)
