"""The page of `doctrans serve` driven in headless Chromium (Selenium; Debian's ``chromium`` and
``chromium-driver``, which ``make install`` installs): the models listed, text translated from the
keyboard (Ctrl+Enter) beside its source, an SRT chosen in the file input, the bilingual view and
the downloaded file (cue count and timings of the input), a 200-cue file's progress, no script
error in the console, and errors shown.
The server is a real process with the shipped sentence model (the document model offered, loaded
only if chosen). ``DOCTRANS_PAGE_SCREENSHOT=PATH`` also saves the page's screenshot there (the
README's: benchmarks/plots/serve_page.png)."""
from __future__ import annotations

import json
import os
import shutil
import signal
import time
import urllib.request
from pathlib import Path

import pytest

from test_serve_process import _start

CHROMIUM, DRIVER = shutil.which("chromium"), shutil.which("chromedriver")
pytestmark = pytest.mark.skipif(not (CHROMIUM and DRIVER),
                                reason="needs Debian's chromium and chromium-driver (make install installs them)")
webdriver = pytest.importorskip("selenium.webdriver")
pytest.importorskip("multipart")
from selenium.webdriver.chrome.service import Service  # noqa: E402
from selenium.webdriver.common.by import By  # noqa: E402
from selenium.webdriver.common.keys import Keys  # noqa: E402
from selenium.webdriver.support.ui import WebDriverWait  # noqa: E402

CUES = ["手续办得还顺利吗？", "没问题，都办好了", "罗斯，谢谢", "要不要去看电影", "<i>我去穿毛衣</i>"]
SRT = "".join(f"{k + 1}\n00:00:{2 * k:02d},250 --> 00:00:{2 * k + 1:02d},750\n{c}\n\n" for k, c in enumerate(CUES))


@pytest.fixture(scope="module")
def server():
    proc, base = _start("tvsub-transformer-3x3", toy=())
    yield base
    proc.send_signal(signal.SIGTERM)
    try:
        proc.wait(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


@pytest.fixture()
def browser(tmp_path):
    opts = webdriver.ChromeOptions()
    opts.binary_location = CHROMIUM
    for a in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
              "--disable-background-networking", "--disable-component-update", "--disable-sync", "--no-first-run",
              "--disable-default-apps", "--window-size=1280,1000", f"--user-data-dir={tmp_path / 'profile'}"):
        opts.add_argument(a)
    opts.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    (tmp_path / "downloads").mkdir()
    opts.add_experimental_option("prefs", {"download.default_directory": str(tmp_path / "downloads"),
                                           "download.prompt_for_download": False})
    driver = webdriver.Chrome(service=Service(DRIVER), options=opts)
    driver.set_page_load_timeout(30)
    yield driver, tmp_path / "downloads"
    driver.quit()


def _post(base, path, body):
    req = urllib.request.Request(base + path, json.dumps(body).encode(), {"content-type": "application/json"})
    with urllib.request.urlopen(req, timeout=60) as r:
        return json.loads(r.read())


def _rows(driver):
    return [[td.text for td in tr.find_elements(By.TAG_NAME, "td")]
            for tr in driver.find_elements(By.CSS_SELECTOR, "#rows tr")]


def test_the_page_translates_text_and_an_srt_file(server, browser, tmp_path):
    driver, downloads = browser
    wait = WebDriverWait(driver, 60)
    driver.get(server + "/")
    wait.until(lambda d: len(d.find_elements(By.CSS_SELECTOR, "#model option")) == 2)
    options = [o.text for o in driver.find_elements(By.CSS_SELECTOR, "#model option")]
    assert options == ["sentence — tvsub-transformer-3x3 (default)", "document — tvsub-tgt-concat-offset-3x3"]

    # text, from the keyboard
    box = driver.find_element(By.ID, "text")
    box.send_keys("他来了。", Keys.SHIFT, Keys.ENTER, "你昨天晚上去哪儿了？")
    box.send_keys(Keys.CONTROL, Keys.ENTER)
    wait.until(lambda d: len(_rows(d)) == 2 and all(r[2] for r in _rows(d)))
    expect = _post(server, "/translate", {"q": "他来了。\n你昨天晚上去哪儿了？", "source": "zh", "target": "en"})
    assert [r[2] for r in _rows(driver)] == expect["translatedText"].split("\n")
    assert [r[1] for r in _rows(driver)] == ["他来了。", "你昨天晚上去哪儿了？"]

    # an SRT file: progress, bilingual view, download
    src = tmp_path / "ep01.srt"
    src.write_text(SRT, encoding="utf-8")
    driver.find_element(By.ID, "file").send_keys(str(src))
    link = wait.until(lambda d: d.find_element(By.ID, "download") if
                      d.find_element(By.ID, "download").text.endswith("ep01.en.srt") else False)
    assert "Done in" in driver.find_element(By.ID, "status").text
    rows = _rows(driver)
    assert [r[1] for r in rows] == CUES and all(r[2] for r in rows)
    if os.environ.get("DOCTRANS_PAGE_SCREENSHOT"):
        driver.save_screenshot(os.environ["DOCTRANS_PAGE_SCREENSHOT"])
    assert driver.switch_to.active_element == link                 # focus moved to the download
    link.send_keys(Keys.ENTER)
    deadline = time.time() + 30
    while not (downloads / "ep01.en.srt").is_file() and time.time() < deadline:
        time.sleep(0.1)
    got = (downloads / "ep01.en.srt").read_text(encoding="utf-8")
    blocks = [b.splitlines() for b in got.strip().split("\n\n")]
    assert len(blocks) == len(CUES)
    assert [b[1] for b in blocks] == [b.splitlines()[1] for b in SRT.strip().split("\n\n")]
    assert ["\n".join(b[2:]) for b in blocks] == [r[2] for r in rows]
    assert blocks[4][2].startswith("<i>") and blocks[4][2].endswith("</i>")

    # a longer file: its progress is shown while the server translates it
    long = tmp_path / "ep02.srt"
    long.write_text("".join(f"{k + 1}\n00:{k // 60:02d}:{k % 60:02d},000 --> 00:{k // 60:02d}:{k % 60:02d},800\n"
                            f"{CUES[k % 4]}\n\n" for k in range(200)), encoding="utf-8")
    driver.find_element(By.ID, "file").send_keys(str(long))
    seen = set()
    deadline = time.time() + 120
    while not driver.find_element(By.ID, "status").text.startswith("Done") and time.time() < deadline:
        seen.add(driver.find_element(By.ID, "status").text.split(":")[0])
        time.sleep(0.05)
    assert "Translating 200 sentences" in seen, seen
    assert len(_rows(driver)) == 200 and driver.find_element(By.ID, "progress").get_attribute("value") == "1"
    assert not [e for e in driver.get_log("browser") if e["level"] == "SEVERE"]     # no script error so far

    # errors are shown, not swallowed: one the page sees, one the server answers
    bad = tmp_path / "notes.doc"
    bad.write_bytes(b"x")
    driver.find_element(By.ID, "file").send_keys(str(bad))
    error = driver.find_element(By.ID, "error")
    wait.until(lambda d: error.is_displayed())
    assert "notes.doc: not a file this page translates" in error.text
    broken = tmp_path / "broken.srt"
    broken.write_text("1\n00:00:01,000 --> nonsense\n他来了\n", encoding="utf-8")
    driver.find_element(By.ID, "file").send_keys(str(broken))
    wait.until(lambda d: "broken.srt: 400" in error.text)
    assert error.get_attribute("role") == "alert"
