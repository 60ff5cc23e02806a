"""``doctrans serve`` (``doctrans/serve/``): one model behind an HTTP JSON API."""
from __future__ import annotations

import click

from doctrans.cli.options import NON_NEGATIVE, POSITIVE, CheckpointParam, ensemble_options, ensemble_settings


@click.command("serve", short_help="Serve one model over HTTP (JSON API: LibreTranslate / OpenNMT-py shapes).")
@click.option("-c", "--checkpoint", required=True, type=CheckpointParam(dir_okay=True),
              help="A checkpoint written by `doctrans train`, the name of a shipped model (`doctrans models`), or "
                   "with --engine ctranslate2 an exported directory.")
@ensemble_options
@click.option("--host", default="127.0.0.1", show_default=True, help="Address to listen on (0.0.0.0: every interface).")
@click.option("--port", type=click.IntRange(min=0, max=65535), default=5000, show_default=True, help="TCP port (0: a free one chosen by the system; uvicorn logs it).")
@click.option("--engine", type=click.Choice(["native", "ctranslate2"]), default="native", show_default=True,
              help="As doctrans translate --engine.")
@click.option("--compute-type", default="default", show_default=True, help="--engine ctranslate2: as doctrans translate.")
@click.option("--quantize", type=click.Choice(["none", "int8"]), default="none", show_default=True,
              help="--engine native on CPU: int8 dynamic quantization.")
@click.option("--device", type=click.Choice(["auto", "cpu", "cuda"]), default="auto", show_default=True)
@click.option("--threads", type=NON_NEGATIVE, default=0, show_default=True, help="torch threads (0 = all usable cores).")
@click.option("--beam", type=POSITIVE, default=5, show_default=True, help="Beam size (1 = greedy).")
@click.option("--lenpen", type=click.FloatRange(min=0), default=1.0, show_default=True, help="Length penalty: score = log p / length^lenpen (0 = none).")
@click.option("--batch-sentences", type=POSITIVE, default=64, show_default=True, help="Sentences per beam-search batch.")
@click.option("--input-format", type=click.Choice(["raw", "tok", "bpe"]), default="raw", show_default=True,
              help="What requests send: raw Chinese text, segmented text, or BPE.")
@click.option("--tokenized", is_flag=True, help="Answer with Moses-tokenized text instead of detokenized text.")
@click.option("--recase", type=click.Choice(["auto", "yes", "no"]), default="auto", show_default=True,
              help="Restore the case of a lowercasing model's output with its recaser (as doctrans translate).")
@click.option("--context-option", "context_options", multiple=True, metavar="KEY=VALUE",
              help="Change a context model's setting for this server (as doctrans translate).")
@click.option("--segment", type=click.Choice(["model", "punct", "off"]), default="model", show_default=True,
              help="A line of several sentences is translated sentence by sentence and joined (as doctrans "
                   "translate); off: each line whole.")
@click.option("--max-lines", type=POSITIVE, default=256, show_default=True,
              help="Lines (sentences) per request; more is a 413 error.")
@click.option("--max-chars", type=POSITIVE, default=20000, show_default=True,
              help="Characters per request, all lines together; more is a 413 error.")
@click.option("--max-body-bytes", type=POSITIVE, default=1_000_000, show_default=True,
              help="Request body bytes; more is a 413 error before the body is read.")
@click.option("--source-lang", default="zh", show_default=True, help="The model's source language (LibreTranslate code).")
@click.option("--target-lang", default="en", show_default=True, help="The model's target language.")
def serve_cmd(checkpoint, ensemble, ensemble_weights, ensemble_mode, host, port, engine, compute_type, quantize, device, threads, beam, lenpen, batch_sentences,
              input_format, tokenized, recase, context_options, segment, max_lines, max_chars, max_body_bytes,
              source_lang, target_lang) -> None:
    """Load CHECKPOINT once and serve it over HTTP until SIGTERM / Ctrl-C (needs the server extra:
    pip install 'doctrans[serve]').

    \b
    POST /translate            LibreTranslate: {"q": "…" | [...], "source": "zh", "target": "en"}
                               → {"translatedText": …}; a q of several lines is one document
    POST /translator/translate OpenNMT-py: [{"src": "…", "id": 100}, …] → [[{"src", "tgt", …}]]
    POST /translate/document   {"lines": [...]} → {"lines": [...]}, translated with context
    GET  /health               {"status": "ok", …}

    Requests are answered one at a time on the one model (they wait their turn); a request over
    the limits gets 413, a malformed one 422; every error is a JSON body {"error", "status"}.
    """
    from doctrans.serve import MissingServeExtra

    try:
        from doctrans.serve.app import Limits
        from doctrans.serve.run import serve
    except MissingServeExtra as e:
        raise click.ClickException(str(e)) from None
    except ImportError as e:
        raise click.ClickException(f"doctrans serve needs the server extra ({e}): pip install 'doctrans[serve]'") from None
    import torch

    from doctrans.dp.apply import dp_inputs
    from doctrans.inference.translate import TranslateConfig, build_translator

    if threads:
        torch.set_num_threads(threads)
    cfg = TranslateConfig(checkpoint=checkpoint, engine=engine, compute_type=compute_type, quantize=quantize,
                          device=device, threads=threads, beam=beam, lenpen=lenpen, batch_sentences=batch_sentences,
                          input_format=input_format, tokenized=tokenized, recase=recase, context_options=tuple(context_options),
                          segment=segment,
                          **ensemble_settings(ensemble, ensemble_weights, ensemble_mode))
    translator = build_translator(cfg, dp_inputs)
    try:
        serve(translator, host, port, Limits(max_lines, max_chars, max_body_bytes), source_lang, target_lang,
              name=checkpoint)
    except MissingServeExtra as e:
        raise click.ClickException(str(e)) from None
