"""The CLI's OpenMP default (issue 31 item 4): idle OpenMP threads sleep (OMP_WAIT_POLICY=PASSIVE)
unless the user set the variable; set before torch initialises OpenMP."""
from __future__ import annotations

import json
import os
import subprocess
import sys

CODE = ("import json, os, sys; import doctrans.cli; "
        "print(json.dumps([os.environ.get('OMP_WAIT_POLICY'), 'torch' in sys.modules]))")


def _run(env_value: str | None):
    env = {k: v for k, v in os.environ.items() if k != "OMP_WAIT_POLICY"}
    if env_value is not None:
        env["OMP_WAIT_POLICY"] = env_value
    out = subprocess.run([sys.executable, "-c", CODE], env=env, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout)


def test_cli_sets_passive_before_torch_loads():
    policy, torch_loaded = _run(None)
    assert policy == "PASSIVE"
    assert not torch_loaded              # so OpenMP reads it when torch loads later


def test_user_value_wins():
    assert _run("ACTIVE")[0] == "ACTIVE"


def test_threads_help_shows_the_default():
    from click.testing import CliRunner

    from doctrans.cli import cli

    res = CliRunner().invoke(cli, ["translate", "--help"], terminal_width=200)
    assert res.exit_code == 0
    assert "OMP_WAIT_POLICY=PASSIVE" in res.output and "[default: 0" in res.output      # "; x>=0]" with a range
