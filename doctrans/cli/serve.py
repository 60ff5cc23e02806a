"""``doctrans serve`` (``doctrans/serve/``): models behind an HTTP JSON API and a page."""
from __future__ import annotations

import click

from doctrans.cli.options import (NON_NEGATIVE, CheckpointParam, SectionedCommand, config_options, ensemble_options,
                                  ensemble_settings, given, translate_options)
from doctrans.serve import DRAIN_TIMEOUT_S
from doctrans.serve.limits import Limits

SERVED = ("engine", "compute_type", "quantize", "device", "threads", "beam", "lenpen", "batch_sentences",
          "input_format", "tokenized", "recase", "context_options", "glossary", "segment")   # translate's settings
LIMITS = ("max_lines", "max_chars", "max_file_lines", "max_body_bytes")

# --help lists the options by section (options.SectionedCommand), in this order.
SECTIONS = (
    ("Model", ("checkpoint", "sentence", "extra_models", "ensemble", "ensemble_weights", "ensemble_mode", "engine",
               "compute_type", "quantize", "device", "threads")),
    ("Search", ("beam", "lenpen", "batch_sentences", "input_format", "tokenized", "recase", "context_options",
                "glossary", "segment")),
    ("Server", ("host", "port", "api_keys", "req_limit", *LIMITS, "drain_timeout", "source_lang", "target_lang")),
)


@click.command("serve", cls=SectionedCommand, sections=SECTIONS,
               short_help="Serve models over HTTP: a page, LibreTranslate's and OpenNMT-py's APIs.")
@translate_options("checkpoint", override={"checkpoint": {"type": CheckpointParam(dir_okay=True)}})
@click.option("--sentence", is_flag=True,
              help="Without -c: serve the shipped sentence-level model instead of the document model.")
@click.option("--extra-model", "extra_models", multiple=True, metavar="NAME|CKPT",
              help="Also serve this model (a shipped model's name or a checkpoint; repeat for more), loaded when a request "
                   "first names it. Default: with a shipped -c, the shipped model of the other kind (document / "
                   "sentence); 'none': only -c.")
@ensemble_options
@click.option("--host", default="127.0.0.1", show_default=True, help="Address to listen on (0.0.0.0: every interface).")
@click.option("--port", type=click.IntRange(min=0, max=65535), default=5000, show_default=True, help="TCP port (0: a free one chosen by the system; uvicorn logs it).")
@translate_options(*SERVED, override={
    "threads": {"help": "torch threads (0 = all usable cores)."},
    "input_format": {"help": "What requests send: raw Chinese text, segmented text, or BPE."},
    "tokenized": {"help": "Answer with Moses-tokenized text instead of detokenized text."},
    "recase": {"help": "Restore the case of a lowercasing model's output with its recaser (as doctrans translate)."},
    "context_options": {"help": "Change a context model's setting for this server (as doctrans translate)."},
    "glossary": {"help": "Terms every request's translation enforces (source<TAB>target lines; as doctrans "
                         "translate). Lines without Chinese are answered unchanged, Latin-script text and numbers "
                         "kept, as there."},
    "segment": {"help": "A line of several sentences is translated sentence by sentence and joined (as doctrans "
                        "translate); off: each line whole."}})
@config_options(Limits, LIMITS)
@click.option("--api-keys", type=click.Path(dir_okay=False, exists=True), default=None,
              help="Keys file: one API key a line, optionally with its requests per minute (KEY 120); translating "
                   "requests without one of them get 403.")
@click.option("--req-limit", type=NON_NEGATIVE, default=0, show_default=True,
              help="Requests per minute per key (or per client address without keys); more get 429 (0 = no limit).")
@click.option("--drain-timeout", type=click.FloatRange(min=0), default=DRAIN_TIMEOUT_S, show_default=True,
              help="Seconds SIGTERM / Ctrl-C leaves the requests in flight to finish; then those not answered "
                   "get a 503 (JSON, Retry-After) and the server exits (0: at once).")
@click.option("--source-lang", default="zh", show_default=True, help="The model's source language (LibreTranslate code).")
@click.option("--target-lang", default="en", show_default=True, help="The model's target language.")
def serve_cmd(checkpoint, sentence, extra_models, ensemble, ensemble_weights, ensemble_mode, host, port, max_lines,
              max_chars, max_file_lines, max_body_bytes, api_keys, req_limit, drain_timeout, source_lang, target_lang,
              **kw) -> None:
    """Load the model once and serve it over HTTP until SIGTERM / Ctrl-C (needs the server extra:
    pip install 'doctrans[serve]'). Without -c, the shipped document model (the sentence model
    with --sentence), as `doctrans translate`. Open http://127.0.0.1:5000/ for the page.

    \b
    GET  /                     the page: paste text or drop a .txt/.srt/.vtt/.ass file
    POST /translate            LibreTranslate: {"q": "…" | [...], "source": "zh", "target": "en"}
                               (JSON or form) → {"translatedText": …}; a q of several lines is one document
    POST /translate_file       LibreTranslate: a file upload → {"translatedFileUrl": …}
    GET  /languages, POST /detect, GET /frontend/settings   LibreTranslate
    POST /translator/translate OpenNMT-py: [{"src": "…", "id": 100}, …] → [[{"src", "tgt", …}]]
    GET  /translator/models    the models served (id, name, kind)
    POST /translate/document   {"lines": [...]} → {"lines": [...]}, translated with context
    GET  /health               {"status": "ok", …}

    Requests are translated by one worker, concurrent requests of one model together; a request
    without a valid key (--api-keys) gets 403, one over the rate 429, over the limits 413, a
    malformed one 400 / 422, one refused while shutting down 503; every error is a JSON body
    {"error", "status"}. Details: docs/usage.md.
    """
    from doctrans.serve import MissingServeExtra

    try:
        from doctrans.serve.run import serve
    except MissingServeExtra as e:
        raise click.ClickException(str(e)) from None
    except ImportError as e:
        raise click.ClickException(f"doctrans serve needs the server extra ({e}): pip install 'doctrans[serve]'") from None
    import torch

    from doctrans.dp.apply import dp_inputs
    from doctrans.inference.translate import TranslateConfig, build_translator
    from doctrans.runtime.shipped import resolve
    from doctrans.serve.access import Access, read_keys
    from doctrans.serve.models import served_models

    if sentence and checkpoint:
        raise click.UsageError("--sentence chooses a shipped model: give it without -c")
    checkpoint = resolve(checkpoint, "sentence" if sentence else "document")
    if kw["threads"]:
        torch.set_num_threads(kw["threads"])
    cfg = TranslateConfig(checkpoint, **given(kw), **ensemble_settings(ensemble, ensemble_weights, ensemble_mode))
    try:
        access = Access(read_keys(api_keys) if api_keys else None, req_limit)
    except (OSError, ValueError) as e:
        raise click.BadParameter(str(e), param_hint="--api-keys") from None
    translator = build_translator(cfg, dp_inputs)
    try:
        models = served_models(translator, tuple(extra_models), lambda c: build_translator(c, dp_inputs))
    except ValueError as e:
        raise click.BadParameter(str(e), param_hint="--extra-model") from None
    try:
        serve(models, host, port, Limits(max_lines, max_chars, max_body_bytes, max_file_lines=max_file_lines),
              source_lang, target_lang, name=checkpoint, drain_timeout=drain_timeout, access=access)
    except MissingServeExtra as e:
        raise click.ClickException(str(e)) from None
