"""benchmarks/gpu_lib.sh's equal_update_point: the last update whose checkpoint every run kept (the
GPU scripts compare runs from one start there)."""
import shutil
import subprocess
from pathlib import Path

import pytest

LIB = Path(__file__).resolve().parents[2] / "benchmarks" / "gpu_lib.sh"


def equal_update_point(*dirs: Path) -> int:
    """Run the shell function alone (sourcing the whole library would install the GPU carry)."""
    script = ("eval \"$(sed -n '/^equal_update_point()/,/^}/p' \"$1\")\"; shift; equal_update_point \"$@\"")
    out = subprocess.run(["bash", "-c", script, "_", str(LIB), *map(str, dirs)], check=True,
                         capture_output=True, text=True)
    return int(out.stdout.strip())


@pytest.mark.skipif(shutil.which("bash") is None, reason="needs bash")
def test_equal_update_point_over_runs(tmp_path):
    steps = {"a": [100, 200, 300], "b": [100, 200, 300, 1000], "c": [100, 200, 1000], "empty": []}
    for run, kept in steps.items():
        (tmp_path / run).mkdir()
        for s in kept:
            (tmp_path / run / f"checkpoint{s}.pt").touch()
        (tmp_path / run / "last.pt").touch()
    a, b, c, empty = (tmp_path / r for r in steps)
    assert equal_update_point(a, b, c) == 200          # 300 and 1000 are not in every run
    assert equal_update_point(a, b) == 300
    assert equal_update_point(b, c) == 1000
    assert equal_update_point(b) == 1000
    assert equal_update_point(a, empty) == 0
