"""Files doctrans writes get the mode a plain ``open()`` gives under the umask (issue 31 item 2):
the atomic writers' temporary file (tempfile.mkstemp, mode 0600) must not keep its mode."""
from __future__ import annotations

import os
import stat

import pytest
import torch

from doctrans.utils import io


@pytest.fixture(params=[0o022, 0o077, 0o002])
def mask(request):
    old = os.umask(request.param)
    yield request.param
    os.umask(old)


def _mode(path) -> int:
    return stat.S_IMODE(os.stat(path).st_mode)


def test_umask_is_read_without_changing_it(mask):
    assert io.umask() == mask
    assert os.umask(mask) == mask                      # still the same afterwards


def test_text_and_bytes_writes_follow_the_umask(tmp_path, mask):
    io.atomic_write_text(tmp_path / "a.txt", "x\n")
    io.atomic_write_lines(tmp_path / "b.txt", ["x"])
    io.atomic_write_bytes(tmp_path / "c.bin", b"x")
    with open(tmp_path / "plain.txt", "w") as f:      # what the user expects
        f.write("x")
    for name in ("a.txt", "b.txt", "c.bin"):
        assert _mode(tmp_path / name) == 0o666 & ~mask == _mode(tmp_path / "plain.txt"), name
    assert not [p for p in tmp_path.iterdir() if p.name.endswith(".tmp")]


def test_checkpoint_writes_follow_the_umask(tmp_path, mask):
    io.atomic_torch_save({"w": torch.zeros(2)}, tmp_path / "last.pt")
    assert _mode(tmp_path / "last.pt") == 0o666 & ~mask
    assert torch.load(tmp_path / "last.pt", weights_only=True)["w"].shape == (2,)


def test_overwrite_gets_the_umask_mode_too(tmp_path):
    old = os.umask(0o022)
    try:
        io.atomic_write_text(tmp_path / "a.txt", "1\n")
        io.atomic_write_text(tmp_path / "a.txt", "2\n")
        assert _mode(tmp_path / "a.txt") == 0o644
        assert (tmp_path / "a.txt").read_text() == "2\n"
    finally:
        os.umask(old)


def test_align_temp_files_follow_the_umask(tmp_path, mask):
    from doctrans.dp.align import _tmp_next_to

    name = _tmp_next_to(tmp_path / "fwd.links")
    assert _mode(name) == 0o666 & ~mask


def test_an_output_past_the_file_size_limit_names_the_file_and_the_limit(tmp_path):
    """A text output written past RLIMIT_FSIZE (ulimit -f) failed with a bare '[Errno 27] File
    too large' naming no file (issue 73's probes); the previous file stays, no temporary is left."""
    import errno
    import resource

    path = tmp_path / "out.en"
    io.atomic_write_text(path, "old\n")
    soft, hard = resource.getrlimit(resource.RLIMIT_FSIZE)
    if hard != resource.RLIM_INFINITY and hard < 1 << 16:
        pytest.skip("the hard file size limit is below the test's")
    resource.setrlimit(resource.RLIMIT_FSIZE, (1 << 16, hard))
    try:
        with pytest.raises(OSError, match=rf"cannot write {path}: file too large: the file size limit \(ulimit -f\) "
                                          r"is 65,536 bytes and the output is 100,000 bytes") as e:
            io.atomic_write_text(path, "x" * 100_000)
    finally:
        resource.setrlimit(resource.RLIMIT_FSIZE, (soft, hard))
    assert e.value.errno == errno.EFBIG and e.value.filename == str(path)
    assert path.read_text() == "old\n" and [p.name for p in tmp_path.iterdir()] == ["out.en"]
