"""``bin/doctrans`` (run without installing) under a Python without torch: one line naming the
fix, exit code 1, no traceback (issue 31 item 9)."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

BIN = Path(__file__).resolve().parents[2] / "bin" / "doctrans"


def _check_one_line(proc: subprocess.CompletedProcess) -> None:
    assert proc.returncode == 1, proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1, proc.stderr
    assert "Traceback" not in proc.stderr
    assert "'torch'" in lines[0] and ("make install" in lines[0] or ".venv/bin/doctrans" in lines[0])


@pytest.mark.parametrize("blocked", ["torch", "click"])
def test_missing_dependency_is_one_line(blocked):
    # sys.modules[name] = None makes `import name` fail as for a missing package
    code = (f"import runpy, sys; sys.modules[{blocked!r}] = None; sys.argv = ['bin/doctrans', '--help']; "
            f"runpy.run_path({str(BIN)!r}, run_name='__main__')")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    if blocked == "torch":
        _check_one_line(proc)
    else:
        assert proc.returncode == 1 and "'click'" in proc.stderr and "Traceback" not in proc.stderr


def test_python_without_site_packages():
    # -S: no site-packages, so no torch (as the system python3 here)
    probe = subprocess.run([sys.executable, "-S", "-c", "import torch"], capture_output=True)
    if probe.returncode == 0:
        pytest.skip("torch importable without site-packages")
    _check_one_line(subprocess.run([sys.executable, "-S", str(BIN), "--help"], capture_output=True, text=True,
                                   timeout=120))


def test_runs_with_the_dependencies():
    proc = subprocess.run([sys.executable, str(BIN), "--help"], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0 and "preprocess" in proc.stdout
