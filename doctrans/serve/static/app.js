// The page of `doctrans serve`: text or a file → the server's LibreTranslate endpoints → the
// translation beside the source, and the translated file to download. No framework, no build
// step, nothing fetched but this server's own endpoints.
"use strict";

const $ = (id) => document.getElementById(id);
const SUFFIXES = [".txt", ".srt", ".vtt", ".ass", ".ssa"];
let settings = null;
let busy = false;

function showError(message) {
  const box = $("error");
  box.textContent = message;
  box.hidden = !message;
}

function setStatus(text) { $("status").textContent = text; }

async function call(url, options) {
  // fetch + JSON; an answer that is not 2xx throws its {"error"} message.
  let r;
  try {
    r = await fetch(url, options);
  } catch (e) {
    throw new Error(`the server did not answer (${e.message})`);
  }
  let body = null;
  try {
    body = await r.json();
  } catch (e) {
    throw new Error(`${r.status} ${r.statusText}: the answer is not JSON`);
  }
  if (!r.ok) throw new Error(`${r.status}: ${body && body.error ? body.error : r.statusText}`);
  return body;
}

function commonFields() {
  const f = { source: settings.language.source.code, target: settings.language.target.code,
              model: $("model").value };
  const key = $("api-key").value.trim();
  if (key) f.api_key = key;
  return f;
}

function showPairs(pairs, title) {
  const rows = $("rows");
  rows.textContent = "";
  pairs.forEach(([src, tgt], k) => {
    const tr = document.createElement("tr");
    for (const text of [String(k + 1), src, tgt]) {
      const td = document.createElement("td");
      td.textContent = text;
      tr.appendChild(td);
    }
    rows.appendChild(tr);
  });
  $("results-title").textContent = title;
}

function setBusy(on) {
  busy = on;
  $("translate-text").disabled = on;
  $("file").disabled = on;
}

function offerDownload(href, name) {
  const a = $("download");
  a.href = href;
  a.download = name;
  a.textContent = `Download ${name}`;
  a.hidden = false;
}

async function translateText() {
  const text = $("text").value;
  if (!text.trim() || busy) return;
  showError("");
  setBusy(true);
  setStatus("Translating…");
  const t0 = performance.now();
  try {
    const body = await call("/translate", { method: "POST", headers: { "Content-Type": "application/json" },
                                             body: JSON.stringify({ ...commonFields(), q: text, format: "text" }) });
    const src = text.split("\n");
    const out = body.translatedText.split("\n");
    showPairs(src.map((s, k) => [s, out[k] || ""]), `Translation (${src.length} lines, ${$("model").value})`);
    const blob = new Blob([body.translatedText + "\n"], { type: "text/plain;charset=utf-8" });
    offerDownload(URL.createObjectURL(blob), "translation.txt");
    setStatus(`Done in ${((performance.now() - t0) / 1000).toFixed(1)} s.`);
  } catch (e) {
    showError(e.message);
    setStatus("");
  } finally {
    setBusy(false);
  }
}

function token() {
  const a = new Uint8Array(12);
  crypto.getRandomValues(a);
  return Array.from(a, (b) => b.toString(16).padStart(2, "0")).join("");
}

function showProgress(p) {
  const bar = $("progress");
  bar.hidden = false;
  if (p.state === "queued") {
    bar.removeAttribute("value");
    setStatus(p.lines_ahead ? `Queued behind ${p.lines_ahead} lines of other requests…` : "Queued…");
  } else if (p.state === "translating") {
    const lines = p.lines || 0;
    if (p.rate > 0 && lines > 0) {
      const expected = lines / p.rate;
      bar.value = Math.min(0.95, p.elapsed_s / expected);
      const left = Math.max(0, expected - p.elapsed_s);
      setStatus(`Translating ${lines} sentences: ${p.elapsed_s.toFixed(0)} s, about ${left.toFixed(0)} s left ` +
                `(estimate at this server's recent ${p.rate.toFixed(0)} sentences/s)`);
    } else {
      bar.removeAttribute("value");
      setStatus(`Translating ${lines} sentences: ${p.elapsed_s.toFixed(0)} s`);
    }
  }
}

async function translateFile(file) {
  if (!file || busy) return;
  showError("");
  const dot = file.name.lastIndexOf(".");
  const suffix = dot >= 0 ? file.name.slice(dot).toLowerCase() : "";
  if (!SUFFIXES.includes(suffix)) {
    showError(`${file.name}: not a file this page translates (${SUFFIXES.join(", ")})`);
    return;
  }
  if (settings && file.size > settings.maxBodyBytes) {
    showError(`${file.name}: ${file.size} bytes, over this server's request limit of ${settings.maxBodyBytes} bytes`);
    return;
  }
  setBusy(true);
  const progressToken = token();
  const form = new FormData();
  for (const [k, v] of Object.entries(commonFields())) form.append(k, v);
  form.append("progress", progressToken);
  form.append("bilingual", "1");
  form.append("file", file, file.name);
  setStatus(`Sending ${file.name}…`);
  let polling = true;
  const poll = async () => {
    while (polling) {
      try {
        const p = await call(`/progress/${progressToken}`);
        if (polling && p.state !== "unknown") showProgress(p);
      } catch (e) { /* the upload's own answer reports errors */ }
      await new Promise((r) => setTimeout(r, 400));
    }
  };
  poll();
  const t0 = performance.now();
  try {
    const body = await call("/translate_file", { method: "POST", body: form });
    polling = false;
    const bar = $("progress");
    bar.value = 1;
    const url = new URL(body.translatedFileUrl, location.href);
    const name = decodeURIComponent(url.pathname.split("/").pop()).replace(/^[0-9a-f]{32}\./, "");
    showPairs(body.bilingual || [], `${file.name} (${(body.bilingual || []).length} cues, ${$("model").value})`);
    offerDownload(url.pathname, name);
    setStatus(`Done in ${((performance.now() - t0) / 1000).toFixed(1)} s: ${name} is ready.`);
    $("download").focus();
  } catch (e) {
    polling = false;
    $("progress").hidden = true;
    showError(`${file.name}: ${e.message}`);
    setStatus("");
  } finally {
    setBusy(false);
    $("file").value = "";
  }
}

async function init() {
  try {
    settings = await call("/frontend/settings");
  } catch (e) {
    showError(`Cannot read the server's settings: ${e.message}`);
    return;
  }
  const select = $("model");
  for (const m of settings.models) {
    const label = `${m.kind || "model"} — ${m.name}${m.default ? " (default)" : ""}`;
    const opt = new Option(label, m.name, m.default, m.default);
    select.appendChild(opt);
  }
  $("key-row").hidden = !settings.apiKeys;
  $("limits").textContent = `Limits: ${settings.maxLines} lines and ${settings.charLimit} characters of text per request; ` +
    `files up to ${settings.maxFileLines} sentences and ${settings.maxBodyBytes} bytes.`;
}

$("translate-text").addEventListener("click", translateText);
$("text").addEventListener("keydown", (e) => {
  if (e.key === "Enter" && (e.ctrlKey || e.metaKey)) { e.preventDefault(); translateText(); }
});
$("file").addEventListener("change", (e) => translateFile(e.target.files[0]));
const drop = $("drop");
drop.addEventListener("dragover", (e) => { e.preventDefault(); drop.classList.add("over"); });
drop.addEventListener("dragleave", () => drop.classList.remove("over"));
drop.addEventListener("drop", (e) => {
  e.preventDefault();
  drop.classList.remove("over");
  translateFile(e.dataTransfer.files[0]);
});
init();
