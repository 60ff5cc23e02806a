"""Legacy encodings at real size (data/encoding.py): TVsub episodes written in GBK, GB18030 and Big5,
read without an encoding, timed, and the plausibility measure of each reading.

    python benchmarks/encodings_tvsub.py [--data ../shared/corpora/tvsub] [--episodes 100] [--repeat 5]

The first ``--episodes`` training episodes (``train/N.zh``, UTF-8) are written to a scratch
directory as UTF-8, GBK, GB18030 (each with a line ``♪ 𠮷 ♪`` added: a 4-byte sequence) and Big5
(Traditional, character by character with OpenCC ``s2tw``); characters an encoding lacks become
``?``. Each set is read ``--repeat`` times by the text default (``TextReading().read``, what a
directory of ``.zh`` files gets) and by ``read_text`` (``auto``, what a subtitle file gets): the
median and fastest wall time of the whole set, and which encodings were chosen. Then each set's
bytes are decoded by UTF-8, GB18030 and Big5 where they decode, with the share of rare or
private-use characters (``implausible_share``) of each reading: its range over the episodes.
Last, the short case: the 12-line excerpts of the first 30 GBK episodes (non-empty lines) that
Big5 decodes too, with the range of their Big5 readings' share; and the warning that
``--encoding gb18030`` on the last Big5 episode logs.
"""
from __future__ import annotations

import argparse
import logging
import statistics
import tempfile
import time
from collections import Counter
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--data", default=str(REPO.parent / "shared" / "corpora" / "tvsub"))
    ap.add_argument("--episodes", type=int, default=100)
    ap.add_argument("--repeat", type=int, default=5)
    args = ap.parse_args()

    import doctrans.utils.io  # noqa: F401  (imports torch: not part of the timing)
    from doctrans.data.encoding import IMPLAUSIBLE, decode_text, implausible_share, opencc, read_text
    from doctrans.inference.collection import TextReading

    episodes = [(Path(args.data) / "train" / f"{i}.zh").read_text(encoding="utf-8") for i in range(args.episodes)]
    chars = sorted(set("".join(episodes)) - {"\n"})
    trad = opencc("s2tw").convert("\n".join(chars)).split("\n")
    s2tw = str.maketrans({c: t for c, t in zip(chars, trad) if len(t) == 1})
    sets = {"utf-8": [e.encode("utf-8") for e in episodes],
            "gbk": [e.encode("gbk", errors="replace") for e in episodes],
            "gb18030": [e.replace("\n", "\n♪ 𠮷 ♪\n", 1).encode("gb18030") for e in episodes],
            "big5": [e.translate(s2tw).encode("big5", errors="replace") for e in episodes]}
    with tempfile.TemporaryDirectory() as tmp:
        for name, datas in sets.items():
            files = []
            for i, data in enumerate(datas):
                files.append(Path(tmp) / f"{name}-{i}.zh")
                files[-1].write_bytes(data)
            mb = sum(map(len, datas)) / 1e6
            for label, read in (("text default", lambda f: TextReading().read(f)),
                                ("auto (read_text)", lambda f: read_text(f)[1])):
                walls, chosen = [], Counter()
                for _ in range(args.repeat):
                    t0 = time.perf_counter()
                    got = [read(f) for f in files]
                    walls.append(time.perf_counter() - t0)
                if label.startswith("auto"):
                    chosen.update(got)
                print(f"{name:8s} {len(files)} files {mb:.2f} MB  {label:17s} median {statistics.median(walls):.3f} s "
                      f"(fastest {min(walls):.3f} s){'  chose ' + dict(chosen).__repr__() if chosen else ''}")
    for name, datas in sets.items():
        for enc in ("utf-8", "gb18030", "big5"):
            shares = []
            for data in datas:
                try:
                    rare, total = implausible_share(data.decode(enc))
                except UnicodeDecodeError:
                    continue
                shares.append(rare / total)
            rng = f"rare or private-use {100 * min(shares):.1f}-{100 * max(shares):.1f}%" if shares else ""
            print(f"{name:8s} read as {enc:8s} decodes {len(shares):3d}/{len(datas)}  {rng}")
    shares = []
    for e in episodes[:30]:
        lines = [x for x in e.splitlines() if x.strip()]
        for k in range(0, len(lines) - 12, 12):
            try:
                rare, total = implausible_share("\n".join(lines[k:k + 12]).encode("gbk", errors="replace").decode("big5"))
            except UnicodeDecodeError:
                continue
            shares.append(rare / total)
    print(f"12-line GBK excerpts that Big5 decodes: {len(shares)}, read as Big5 {100 * min(shares):.0f}-"
          f"{100 * max(shares):.0f}% rare or private-use, {sum(x <= IMPLAUSIBLE for x in shares)} at or below "
          f"{100 * IMPLAUSIBLE:.0f}%")
    logging.basicConfig(format="%(levelname)s %(message)s", level=logging.WARNING)
    decode_text(sets["big5"][-1], f"big5-{len(episodes) - 1}.zh", "gb18030")


if __name__ == "__main__":
    main()
