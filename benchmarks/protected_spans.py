"""Which placeholders the shipped models copy (inference/spans.py): the copy rates behind its choice.

    python benchmarks/protected_spans.py [--models NAME ...] [--threads 1]
    python benchmarks/protected_spans.py --kept SRC HYP [HYP ...]

For each shipped model (default: all three), on constructed lines (below; no corpus text):

1. **names**: 38 Chinese lines holding 42 Latin-script names. Unprotected (``protect=False``):
   how many names the output keeps verbatim. Then each candidate placeholder scheme: every Latin
   run replaced by the scheme's tokens (in turn, one per run of a line), translated with
   ``protect=False, translate_all=True`` (the placeholders reach the model as written, every line
   is translated), and counted as copied
   when the placeholder occurs exactly once in the output (case-insensitive, a whole word).
2. **one name**: each name placeholder alone in 44 slots (the 34 lines above with one name, and
   10 short lines: vocatives, exclamations), copied when it occurs once in the output.
3. **numbers**: 20 Chinese templates with a number slot; each candidate number in the slot,
   copied when it occurs once, whole, in the output.

``--kept SRC HYP…``: for the lines of SRC (raw Chinese, e.g. the TVsub test source) holding
Latin-script runs, how many of the runs each HYP (its translation, one line per line) has
verbatim (case-insensitive) — e.g. a translation made with and one without ``--no-protect``.
"""
from __future__ import annotations

import argparse
import re
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

NAMES = [("Dean和Jerry来了", "Dean|Jerry"), ("我们欢迎 Nancy Sinatra", "Nancy Sinatra"), ("Petruzzo的猫死了", "Petruzzo"),
         ("我跟Marco说过了", "Marco"), ("Hannah 你在哪里", "Hannah"), ("今天Oliver不来上班", "Oliver"),
         ("Sophia的生日是明天", "Sophia"), ("我同意 Gustavo", "Gustavo"), ("Brian和Janine结婚了", "Brian|Janine"),
         ("你见过Yackinelli先生吗", "Yackinelli"), ("Elena说她饿了", "Elena"), ("快点 Rodrigo 我们要迟到了", "Rodrigo"),
         ("这是Frank的车", "Frank"), ("Wilhelmina给我打电话了", "Wilhelmina"), ("我不认识Dmitri", "Dmitri"),
         ("Nadia和Ingrid去买东西了", "Nadia|Ingrid"), ("谢谢你 Beatrice", "Beatrice"), ("Kowalski在楼下等你", "Kowalski"),
         ("你告诉Priya了吗", "Priya"), ("我们明天去找Henrik", "Henrik"), ("Lucia 别哭了", "Lucia"),
         ("Theo是我的弟弟", "Theo"), ("这是Ramirez医生", "Ramirez"), ("Agnes把钥匙丢了", "Agnes"),
         ("我爱你 Matteo", "Matteo"), ("Fitzgerald先生来了", "Fitzgerald"), ("你和Svetlana吵架了吗", "Svetlana"),
         ("Pedro不喜欢吃鱼", "Pedro"), ("Chloe和Zoe是双胞胎", "Chloe|Zoe"), ("我在Bellweather酒店等你", "Bellweather"),
         ("Ignatius 你疯了吗", "Ignatius"), ("给Winston打个电话", "Winston"), ("Astrid已经走了", "Astrid"),
         ("那是Desmond的房子", "Desmond"), ("Mei Ling 你好", "Mei Ling"), ("我们去看Gordon吧", "Gordon"),
         ("Violetta很漂亮", "Violetta"), ("Quentin Blake在门外", "Quentin Blake")]
NAME_SCHEMES = ["phil john garcia reid tony", "tony phil john garcia reid", "garcia reid john tony phil", "tony",
                "x y z", "dna gps fbi", "#", "@", "*"]
SLOTS = ["我很好，{}。", "谢谢，{}。", "你好 {}", "{}！", "干!{}", "晚安 {}", "{}?", "对不起，{}", "{}，x", "我爱你，{}！"]
NUMBER_SLOTS = ["电话号码是{}", "会议在{}开始", "圆周率是{}", "这台车要{}美元", "价格是{}", "温度是{}度", "打{}找我",
                "他住在{}号", "我的生日是{}", "{}是我的号码", "给我{}", "比分是{}", "他欠我{}块钱", "我们需要{}个人",
                "还有{}分钟", "我有{}个苹果", "这是第{}次", "{}", "我的房间是{}", "请拨{}"]
NUMBERS = ["301", "302", "303", "304", "305", "306", "307", "308", "309", "310", "2046", "4711", "1987", "911",
           "8472", "7337", "4242"]
LATIN = re.compile(r"[A-Za-z][A-Za-z0-9'’.\-]*(?:[ ,]+[A-Za-z][A-Za-z0-9'’.\-]*)*")


def once(token: str, text: str) -> bool:
    """Whether ``token`` occurs exactly once in ``text`` as a whole word (case-insensitive)."""
    return len(re.findall(rf"(?<![A-Za-z0-9]){re.escape(token)}(?![A-Za-z0-9])", text, re.I)) == 1


def translate(tr, lines: list[str]) -> list[str]:
    """Each line alone (a context model without context)."""
    return [d[0] for d in tr.translate_documents([[x] for x in lines])]


def names_table(tr) -> None:
    lines = [x for x, _ in NAMES]
    names = [n.split("|") for _, n in NAMES]
    total = sum(map(len, names))
    plain = translate(tr, lines)
    print(f"  unprotected: {sum(1 for ns, o in zip(names, plain) for n in ns if n in o)}/{total} names kept")
    for scheme in NAME_SCHEMES:
        phs = scheme.split()
        masked, used = [], []
        for x in lines:
            k = iter(range(100))
            mine = []

            def sub(m, mine=mine, k=k):
                mine.append(phs[next(k) % len(phs)])
                return mine[-1]

            masked.append(LATIN.sub(sub, x))
            used.append(mine)
        out = translate(tr, masked)
        copied = sum(1 for ps, o in zip(used, out) for p in ps if once(p, o))
        print(f"  placeholders {scheme!r}: {copied}/{total} copied")


def slots_table(tr) -> None:
    slots = [LATIN.sub("{}", x, count=1) for x, n in NAMES if "|" not in n] + SLOTS
    for name in ("phil", "john", "garcia", "reid", "tony"):
        out = translate(tr, [t.format(name) for t in slots])
        lost = [o for o in out if not once(name, o)]
        print(f"  one name {name}: {len(slots) - len(lost)}/{len(slots)} copied{'  ' + repr(lost[:2]) if lost else ''}")


def numbers_table(tr) -> None:
    for n in NUMBERS:
        out = translate(tr, [t.format(n) for t in NUMBER_SLOTS])
        print(f"  number {n}: {sum(1 for o in out if once(n, o))}/{len(NUMBER_SLOTS)} copied")


def kept(src: Path, hyps: list[Path]) -> None:
    source = src.read_text(encoding="utf-8").splitlines()
    runs = [(k, r) for k, x in enumerate(source) for r in LATIN.findall(x)]
    print(f"{src}: {len(runs)} Latin-script runs in {len({k for k, _ in runs})} lines")
    for h in hyps:
        out = h.read_text(encoding="utf-8").splitlines()
        if len(out) != len(source):
            raise SystemExit(f"{h}: {len(out)} lines, {src} has {len(source)}")
        n = sum(1 for k, r in runs if r.strip().lower() in out[k].lower())
        print(f"  {h}: {n}/{len(runs)} kept verbatim")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--models", nargs="*", default=None, help="shipped model names [default: all]")
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--kept", nargs="+", metavar="FILE", help="SRC HYP [HYP ...]")
    args = ap.parse_args()
    if args.kept:
        kept(Path(args.kept[0]), [Path(h) for h in args.kept[1:]])
        return
    from _common import set_threads

    import doctrans
    from doctrans.runtime import shipped

    set_threads(args.threads)
    for name in args.models or [m.name for m in shipped.shipped_models(shipped.SHIPPED_DIR)]:
        print(name)
        tr = doctrans.Translator.from_pretrained(name, protect=False, translate_all=True)
        names_table(tr)
        slots_table(tr)
        numbers_table(tr)


if __name__ == "__main__":
    main()
