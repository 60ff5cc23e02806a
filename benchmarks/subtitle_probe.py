"""Subtitles as people hold them (issue 75 item 6): a 200-cue SRT built from the TVsub test source,
translated by the shipped default model, and what its output looks like on screen.

    python benchmarks/subtitle_probe.py [--data ../shared/corpora/tvsub] [--out DIR] [--threads 1]

The first 200 lines of ``test/test.zh`` become 200 cues of 2.5 s, 0.5 s apart; a line of more than
12 characters is wrapped into two lines at its middle (at a space or comma within a quarter of
it, else the middle), as a Chinese subtitle wraps a long sentence; every 25th cue gets an SDH line
``[笑声]`` above its text, and cues 50 and 150 are lyrics ``♪ … ♪``. The same cues are written as
``probe.srt``, as ``probe.vtt`` with a ``Language: zh`` header, and as ``dir/S01E01.srt``; each is
translated with ``doctrans translate --threads N`` (the ``doctrans`` of ``PYTHONPATH``, default
this checkout: ``PYTHONPATH=OTHER_CHECKOUT python benchmarks/subtitle_probe.py`` measures
another commit), and the outputs are measured with a reader of
their own (no doctrans code): lines over 42 characters (markup not counted), cues over 20
characters per second (characters without line breaks and markup / duration), short
translations split over lines (a cue of two or more lines, not dialogue nor an SDH label, that
would fit one line of 42), SDH lines kept, the WebVTT header, the directory's output name.
"""
from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
MARKUP = re.compile(r"\{[^}]*\}|<[^>]*>")


def _stamp(t: float, sep: str = ",") -> str:
    ms = round(t * 1000)
    return f"{ms // 3600000:02d}:{ms // 60000 % 60:02d}:{ms // 1000 % 60:02d}{sep}{ms % 1000:03d}"


def _wrap(x: str) -> list[str]:
    if len(x) <= 12:
        return [x]
    cuts = [i + 1 for i, ch in enumerate(x[:-1]) if ch in " ，,、"]
    near = [i for i in cuts if abs(i - len(x) / 2) <= len(x) / 4]
    cut = min(near, key=lambda i: abs(i - len(x) / 2)) if near else len(x) // 2
    return [x[:cut].strip(), x[cut:].strip()]


def build(test_zh: Path, out: Path) -> None:
    lines = [x.strip() for x in test_zh.read_text(encoding="utf-8").splitlines()[:200]]
    cues = []
    for k, x in enumerate(lines, 1):
        cues.append([f"♪ {x} ♪"] if k in (50, 150) else ["[笑声]", x] if k % 25 == 0 else _wrap(x))
    srt, vtt = [], ["WEBVTT\nKind: captions\nLanguage: zh"]
    for k, text in enumerate(cues):
        a, b = k * 3.0, k * 3.0 + 2.5
        srt.append(f"{k + 1}\n{_stamp(a)} --> {_stamp(b)}\n" + "\n".join(text))
        vtt.append(f"{_stamp(a, '.')} --> {_stamp(b, '.')}\n" + "\n".join(text))
    (out / "dir").mkdir(parents=True, exist_ok=True)
    for path in (out / "probe.srt", out / "dir" / "S01E01.srt"):
        path.write_text("\n\n".join(srt) + "\n", encoding="utf-8")
    (out / "probe.vtt").write_text("\n\n".join(vtt) + "\n", encoding="utf-8")


def read_srt(path: Path) -> list[tuple[float, list[str]]]:
    """(duration in seconds, text lines) of each cue."""
    out = []
    for block in re.split(r"\n\s*\n", path.read_text(encoding="utf-8").strip()):
        rows = block.split("\n")
        t = re.findall(r"(\d+):(\d+):(\d+)[,.](\d+)", rows[1])
        sec = [int(h) * 3600 + int(m) * 60 + int(s) + int(ms) / 1000 for h, m, s, ms in t]
        out.append((sec[1] - sec[0], rows[2:]))
    return out


def measure(src: Path, hyp: Path) -> str:
    cues = read_srt(hyp)
    lines = [MARKUP.sub("", x) for _, text in cues for x in text]
    cps = [sum(len(MARKUP.sub("", x)) for x in text) / d for d, text in cues]
    split = [text for _, text in cues if len(text) > 1
             and not all(x.lstrip().startswith(("-", "–")) for x in text)
             and not re.match(r"\s*[\[(（【]", text[0])
             and len(" ".join(MARKUP.sub("", x).strip() for x in text)) <= 42]
    sdh_in = sum(1 for _, text in read_srt(src) for x in text if re.search(r"\[[^]]*\]|♪", x))
    sdh_out = sum(1 for x in lines if re.search(r"\[[^]]*\]|♪", x))
    return (f"{len(cues)} cues, {len(lines)} lines: {sum(len(x) > 42 for x in lines)} over 42 characters (longest "
            f"{max(map(len, lines))}); {sum(c > 20 for c in cps)} cues over 20 characters/s (fastest {max(cps):.1f}); "
            f"{len(split)} short translations split over lines; SDH lines: {sdh_in} in the source, {sdh_out} in the "
            f"output; more than 2 lines: {sum(len(t) > 2 for _, t in cues)} cues\n"
            + "".join(f"  split: {' / '.join(t)}\n" for t in split[:5]))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--data", default=str(REPO.parent / "shared" / "corpora" / "tvsub"))
    ap.add_argument("--out", default="", help="where the files go (default: a temporary directory)")
    ap.add_argument("--threads", default="1")
    args = ap.parse_args()
    out = Path(args.out or tempfile.mkdtemp(prefix="subtitle_probe_")).resolve()
    build(Path(args.data) / "test" / "test.zh", out)
    run = [sys.executable, "-m", "doctrans.cli", "-q", "translate", "--threads", args.threads]
    env = dict(os.environ, PYTHONPATH=os.environ.get("PYTHONPATH", str(REPO)))
    for name in ("probe.srt", "probe.vtt"):
        subprocess.run([*run, "-i", name, "-o", name.replace(".", ".out.", 1)], check=True, env=env, cwd=out)
    subprocess.run([*run, "-i", "dir", "-o", "dir.out"], check=True, env=env, cwd=out)     # (cwd: not on sys.path)
    print(f"probe.srt -> probe.out.srt: {measure(out / 'probe.srt', out / 'probe.out.srt')}", end="")
    header = (out / "probe.out.vtt").read_text(encoding="utf-8").split("\n\n")[0].replace("\n", " | ")
    print(f"probe.vtt header: {header}")
    print(f"dir/S01E01.srt -> {', '.join(sorted(p.relative_to(out).as_posix() for p in (out / 'dir.out').rglob('*')))}")


if __name__ == "__main__":
    main()
