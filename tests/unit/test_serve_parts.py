"""Parts of doctrans serve without a model: HTML text nodes (markup.py), the translated-file store
(files.py: bounded, never outside its directory), the keys file (access.py), language detection and
codes (models.py), loopback addresses (run.py's warning)."""
from __future__ import annotations

import os
import time

import pytest

pytest.importorskip("fastapi")
from doctrans.serve.access import Access, Refused, read_keys  # noqa: E402
from doctrans.serve.files import FileStore, safe_name, translate_upload  # noqa: E402
from doctrans.serve.markup import split_html  # noqa: E402
from doctrans.serve.models import Languages  # noqa: E402
from doctrans.serve.run import is_loopback  # noqa: E402


def test_html_units_and_render_keep_every_other_byte():
    src = '<!DOCTYPE html>\n<p title="标题">你好，\n  世界！ <b>他</b>&nbsp;</p><style>p{}</style>\n<p> 123 </p>'
    h = split_html(src)
    assert h.units == ["你好， 世界！", "他"]                       # whitespace runs one space; 123 / nbsp kept
    assert h.render(h.units) == src.replace("你好，\n  世界！", "你好， 世界！")
    assert h.render(["Hello, <world> & all", "He"]) == src.replace("你好，\n  世界！", "Hello, &lt;world&gt; &amp; all") \
        .replace("<b>他</b>", "<b>He</b>")
    with pytest.raises(ValueError, match="1 translations for 2 text nodes"):
        h.render(["x"])


def test_file_store_is_bounded_and_reads_only_its_own_names(tmp_path):
    store = FileStore(max_files=3, max_age_s=3600)
    names = [store.put(f"../../a{k}.srt", f"text {k}") for k in range(5)]
    assert all(n.endswith(f"a{k}.srt") and "/" not in n for k, n in enumerate(names))
    assert [store.path(n) is not None for n in names] == [False, False, True, True, True]
    assert store.path(names[-1]).read_text() == "text 4" and store.path(names[-1]).parent == store.root
    for bad in ("../x", names[-1].replace(".", "/", 1), "0" * 32 + ".x", "", "/etc/passwd"):
        assert store.path(bad) is None
    old = store.root / names[-1]
    os.utime(old, (time.time() - 7200, time.time() - 7200))
    assert store.path(names[-1]) is None and not old.exists()       # expired
    store.close()
    assert not store.root.exists()
    assert safe_name("C:\\x\\my ep 01.srt") == "my_ep_01.srt" and safe_name("..") == "file.txt"


def test_a_text_upload_is_read_as_the_cli_reads_it():
    seen = []

    def run(lines, doc_ids):
        seen.append((lines, doc_ids))
        return [x.upper() for x in lines]

    src = "這是我們的機會，頭髮還沒乾。\n\nok\n"
    done = translate_upload("a.txt", src.encode("big5"), run)
    assert seen == [(["这是我们的机会，头发还没干。", "", "ok"], ["0", "0", "0"])]   # Big5 read, Traditional converted
    assert done.text == "这是我们的机会，头发还没干。\n\nOK\n" and done.cues == 3
    assert done.pairs == [["這是我們的機會，頭髮還沒乾。", "这是我们的机会，头发还没干。"], ["", ""], ["ok", "OK"]]
    with pytest.raises(ValueError, match="a.pdf: file format not supported"):
        translate_upload("a.pdf", b"x", run)


def test_keys_file(tmp_path):
    f = tmp_path / "keys"
    f.write_text("# comment\nabc\n\nxyz 30  # per minute\n", encoding="utf-8")
    assert read_keys(f) == {"abc": 0, "xyz": 30}
    for text, message in (("abc 0\n", ":1: expected 'KEY' or 'KEY REQUESTS_PER_MINUTE'"),
                          ("a\nb x\n", ":2: expected"), ("a\na\n", ":2: the key a… is given twice"),
                          ("# none\n", "no key in the keys file")):
        f.write_text(text, encoding="utf-8")
        with pytest.raises(ValueError, match=message):
            read_keys(f)
    access = Access(None, req_limit=2)                               # no keys: per client address
    access.check(None, "10.0.0.1")
    access.check(None, "10.0.0.1")
    access.check(None, "10.0.0.2")
    with pytest.raises(Refused) as e:
        access.check(None, "10.0.0.1")
    assert e.value.status == 429 and 1 <= e.value.retry_after <= 60


def test_languages_codes_and_detection():
    langs = Languages("zh", "en")
    assert [langs.script(c) for c in ("zh", "auto", "zh-Hans", "zh-CN", "zh-Hant", "zt", "zh-TW", "ja")] == \
        ["auto", "auto", "simplified", "simplified", "traditional", "traditional", "traditional", None]
    assert langs.takes_target("en") and langs.takes_target("en-GB") and not langs.takes_target("de")
    assert langs.detect("123 !") == [{"confidence": 0.0, "language": "zh"}]
    assert langs.detect("こんにちは世界")[0] == {"confidence": 28.6, "language": "zh"}   # 2 Han of 7 letters


def test_loopback_addresses():
    assert all(is_loopback(h) for h in ("127.0.0.1", "127.1.2.3", "::1", "[::1]", "localhost"))
    assert not any(is_loopback(h) for h in ("0.0.0.0", "::", "192.168.1.5", "example.org"))
