"""``doctrans serve`` (``doctrans/serve/``): one model behind an HTTP JSON API."""
from __future__ import annotations

import click

from doctrans.cli.options import CheckpointParam, SectionedCommand, config_options, ensemble_options, ensemble_settings, given, translate_options
from doctrans.serve import DRAIN_TIMEOUT_S
from doctrans.serve.limits import Limits


SERVED = ("engine", "compute_type", "quantize", "device", "threads", "beam", "lenpen", "batch_sentences",
          "input_format", "tokenized", "recase", "context_options", "glossary")   # the translate settings serve takes


# --help lists the options by section (options.SectionedCommand), in this order.
SECTIONS = (
    ("Model and engine", ("checkpoint", "sentence", "ensemble", "ensemble_weights", "ensemble_mode", "engine",
                          "compute_type", "quantize", "device", "threads")),
    ("Requests and answers", ("input_format", "tokenized", "recase", "glossary", "context_options")),
    ("Search", ("beam", "lenpen", "batch_sentences")),
    ("Server", ("host", "port", "max_lines", "max_chars", "max_body_bytes", "drain_timeout", "source_lang",
                "target_lang")),
)


@click.command("serve", cls=SectionedCommand, sections=SECTIONS,
               short_help="Serve one model over HTTP (JSON API: LibreTranslate / OpenNMT-py shapes).")
@translate_options("checkpoint", override={"checkpoint": {"type": CheckpointParam(dir_okay=True)}})
@click.option("--sentence", is_flag=True,
              help="Without -c: serve the shipped sentence-level model instead of the document model.")
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
                         "kept, as there."}})
@config_options(Limits, ("max_lines", "max_chars", "max_body_bytes"))
@click.option("--drain-timeout", type=click.FloatRange(min=0), default=DRAIN_TIMEOUT_S, show_default=True,
              help="Seconds SIGTERM / Ctrl-C leaves the requests in flight to finish; then those not answered "
                   "get a 503 (JSON, Retry-After) and the server exits (0: at once).")
@click.option("--source-lang", default="zh", show_default=True, help="The model's source language (LibreTranslate code).")
@click.option("--target-lang", default="en", show_default=True, help="The model's target language.")
def serve_cmd(checkpoint, sentence, ensemble, ensemble_weights, ensemble_mode, host, port, max_lines, max_chars,
              max_body_bytes, drain_timeout, source_lang, target_lang, **kw) -> None:
    """Load the model once and serve it over HTTP until SIGTERM / Ctrl-C (needs the server extra:
    pip install 'doctrans[serve]'). Without -c, the shipped document model (the sentence model
    with --sentence), as `doctrans translate`.

    \b
    POST /translate            LibreTranslate: {"q": "…" | [...], "source": "zh", "target": "en"}
                               → {"translatedText": …}; a q of several lines is one document
    POST /translator/translate OpenNMT-py: [{"src": "…", "id": 100}, …] → [[{"src", "tgt", …}]]
    POST /translate/document   {"lines": [...]} → {"lines": [...]}, translated with context
    GET  /health               {"status": "ok", …}

    Requests are answered one at a time on the one model (they wait their turn); a request over
    the limits gets 413, a malformed one 422, one refused while shutting down 503; every error is
    a JSON body {"error", "status"}.
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

    if sentence and checkpoint:
        raise click.UsageError("--sentence chooses a shipped model: give it without -c")
    checkpoint = resolve(checkpoint, "sentence" if sentence else "document")
    if kw["threads"]:
        torch.set_num_threads(kw["threads"])
    cfg = TranslateConfig(checkpoint, **given(kw), **ensemble_settings(ensemble, ensemble_weights, ensemble_mode))
    translator = build_translator(cfg, dp_inputs)
    try:
        serve(translator, host, port, Limits(max_lines, max_chars, max_body_bytes), source_lang, target_lang,
              name=checkpoint, drain_timeout=drain_timeout)
    except MissingServeExtra as e:
        raise click.ClickException(str(e)) from None
