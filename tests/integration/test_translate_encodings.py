"""translate reads a GBK text file without ``--encoding`` (issue 75): the shipped sentence model,
end to end through the CLI, translates it as it translates the same text in UTF-8."""
from __future__ import annotations

from click.testing import CliRunner

from doctrans.cli import cli

LINES = ("十一", "你知道他在哪儿吗？", "谢谢", "我不知道")   # 十一 and 谢谢 in GBK are valid UTF-8 too


def _translate(src, out) -> list[str]:
    res = CliRunner().invoke(cli, ["translate", "--sentence", "-i", str(src), "-o", str(out), "--threads", "1"])
    assert res.exit_code == 0, res.output
    return out.read_text(encoding="utf-8").splitlines()


def test_a_gbk_text_file_translates_like_its_utf8_twin(tmp_path):
    text = "\n".join(LINES) + "\n"
    (tmp_path / "gbk.zh").write_bytes(text.encode("gbk"))
    (tmp_path / "utf8.zh").write_text(text, encoding="utf-8")
    got = _translate(tmp_path / "gbk.zh", tmp_path / "gbk.en")
    assert len(got) == len(LINES) and got == _translate(tmp_path / "utf8.zh", tmp_path / "utf8.en")
