"""Bad inputs give one-line errors naming the file (and line), not tracebacks (issue 18):
non-UTF-8 text, files that are not (or no longer) checkpoints, malformed SGML."""
from __future__ import annotations

import logging
import os
import subprocess
import sys

import pytest
import torch

from doctrans.data.sgml import SGMLError, read_sgml
from doctrans.runtime.checkpoint import load_checkpoint, load_torch_file
from doctrans.utils.io import TextDecodeError, decode_lines, read_lines

from conftest import REPO


def test_non_utf8_error_names_file_line_and_offset(tmp_path):
    p = tmp_path / "in.zh"
    p.write_bytes("你好\n".encode() + b"ok \xff bad\n")
    with pytest.raises(TextDecodeError, match=r"in\.zh:2: not valid UTF-8 \(byte 0xff at byte 3 of the line, "
                                              r"offset 10 of the file\)"):
        read_lines(p)


def test_non_utf8_replace_keeps_lines_and_warns_with_count(tmp_path, caplog):
    p = tmp_path / "in.zh"
    p.write_bytes(b"\xff\xfe a\nb\n\xc3\n")
    with caplog.at_level(logging.WARNING):
        assert read_lines(p, errors="replace") == ["\ufffd\ufffd a", "b", "\ufffd"]
    assert "in.zh: 3 undecodable byte sequence(s)" in caplog.text and "line 1" in caplog.text


def test_decode_lines_keeps_wc_l_semantics():
    assert decode_lines(b"a\r\nb\xe2\x80\xa8c\n\nd", "x") == ["a", "b\u2028c", "", "d"]
    with pytest.raises(ValueError, match="encoding errors"):
        decode_lines(b"", "x", errors="ignore")


def test_random_bytes_are_not_a_checkpoint(tmp_path):
    p = tmp_path / "model.pt"
    p.write_bytes(os.urandom(4096))
    with pytest.raises(ValueError, match=rf"^{p} is not a doctrans checkpoint"):
        load_checkpoint(p)


def test_truncated_checkpoint_is_reported_as_truncated(tmp_path):
    good, bad = tmp_path / "good.pt", tmp_path / "bad.pt"
    torch.save({"model": {"w": torch.zeros(5000)}, "config": {}}, good)
    data = good.read_bytes()
    for cut in (len(data) // 2, len(data) - 10):
        bad.write_bytes(data[:cut])
        with pytest.raises(ValueError, match=rf"^{bad} is truncated or corrupt"):
            load_checkpoint(bad)
    assert set(load_checkpoint(good)) == {"model", "config"}


def test_torch_file_without_doctrans_keys_is_not_a_checkpoint(tmp_path):
    p = tmp_path / "other.pt"
    torch.save({"state_dict": {"w": torch.zeros(2)}}, p)
    with pytest.raises(ValueError, match="is not a doctrans checkpoint .no model, config"):
        load_checkpoint(p)
    torch.save([1, 2], p)
    with pytest.raises(ValueError, match="not a doctrans checkpoint"):
        load_torch_file(p, required=("kind",))


def test_dp_generator_loader_shares_the_checks(tmp_path):
    from doctrans.dp.generator import DPGenerator

    p = tmp_path / "gen.pt"
    p.write_bytes(b"\x00garbage" * 100)
    with pytest.raises(ValueError, match="is not a doctrans checkpoint"):
        DPGenerator.load(p)


def test_cli_prints_one_line_error_for_a_random_checkpoint(tmp_path):
    p = tmp_path / "random.pt"
    p.write_bytes(os.urandom(2048))
    r = subprocess.run([sys.executable, "-m", "doctrans.cli", "translate", "-c", str(p), "-i", "-"],
                       input="你好\n", capture_output=True, text=True, cwd=REPO)
    assert r.returncode == 1 and "Traceback" not in r.stderr
    assert f"error: {p} is not a doctrans checkpoint" in r.stderr


SGM_OK = """<refset setid="t" srclang="Chinese" trglang="English">
<DOC docid="D1" sysid="ref">
<seg id=1> hello .</seg>
<seg id=2> how are
you ?</seg>
</DOC>
</refset>
"""


@pytest.mark.parametrize("bad, line, problem", [
    (SGM_OK.replace("<seg id=2> how are\nyou ?</seg>", "<seg id=2> how are you ?"), 5,
     r"</doc> inside the <seg> opened at line 4 \(missing </seg>\)"),
    (SGM_OK[:SGM_OK.index("you ?")], 4, "<seg> never closed"),
    (SGM_OK.replace("<seg id=2> how are\nyou ?</seg>", "<seg id=2> how are you ?\n<seg id=3> x</seg>"), 5,
     "<seg> inside the <seg> opened at line 4"),
    (SGM_OK.replace("</DOC>\n", ""), 2, "<DOC> never closed"),
    (SGM_OK.replace("</DOC>\n", "") + '<DOC docid="D2" sysid="ref">\n</DOC>\n', 7,
     "<DOC> inside the <DOC> opened at line 2"),
    (SGM_OK.replace("<seg id=1> hello .</seg>", "hello .</seg>"), 3, "</seg> without an open <seg>"),
    (SGM_OK.replace('<DOC docid="D1" sysid="ref">', "<p>"), 3, "<seg> outside a <DOC>"),
])
def test_malformed_sgml_names_file_line_and_problem(tmp_path, bad, line, problem):
    p = tmp_path / "ref.sgm"
    p.write_text(bad, encoding="utf-8")
    with pytest.raises(SGMLError, match=rf"ref\.sgm:{line}: .*{problem}"):
        read_sgml(p)


def test_wellformed_sgml_with_a_multiline_segment(tmp_path):
    p = tmp_path / "ref.sgm"
    p.write_text(SGM_OK, encoding="utf-8")
    (s,) = read_sgml(p)
    assert s.segments == ["hello .", "how are you ?"] and s.docs == [("D1", 2)]


def test_cli_score_names_the_sgml_problem_and_line(tmp_path):
    """The issue's case: ``<seg id=2>`` unclosed used to give "reference(s) … have 0 lines"."""
    ref = tmp_path / "ref.sgm"
    ref.write_text(SGM_OK.replace("<seg id=2> how are\nyou ?</seg>", "<seg id=2> how are you ?"), encoding="utf-8")
    hyp = tmp_path / "hyp.en"
    hyp.write_text("hello .\nhow are you ?\n", encoding="utf-8")
    r = subprocess.run([sys.executable, "-m", "doctrans.cli", "score", str(hyp), "-r", str(ref)],
                       capture_output=True, text=True, cwd=REPO)
    assert r.returncode == 1 and "Traceback" not in r.stderr, r.stderr
    assert f"error: {ref}:5: </doc> inside the <seg> opened at line 4 (missing </seg>)" in r.stderr
