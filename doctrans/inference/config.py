"""``TranslateConfig``: the settings of one translation (``doctrans translate``'s options; the
stage is ``inference/translate.py``, the model loading ``inference/loading.py``)."""
from __future__ import annotations

from dataclasses import dataclass

from doctrans.inference.collection import GROUP_LINES
from doctrans.inference.subtitle_layout import MAX_CPS, MAX_LINE_LENGTH


RECASE = ("auto", "yes", "no")     # TranslateConfig.recase
SEGMENT = ("punct", "model", "off")   # TranslateConfig.segment


@dataclass(frozen=True)
class TranslateConfig:
    checkpoint: str
    input: str = "-"                  # file, directory of document files, or "-" for stdin
    output: str = "-"                 # file, directory (when input is one), or "-" for stdout
    beam: int = 5
    lenpen: float = 1.0               # hypothesis score = log p / |y|^lenpen
    max_len_ratio: float = 1.5
    max_len_extra: int = 10
    batch_sentences: int = 64
    input_format: str = "raw"         # raw | tok (segmented, not BPE) | bpe
    tokenized: bool = False           # write tokenized (not detokenized) output
    recase: str = "auto"              # restore the case of a lowercasing model's output (data/casing.py): auto
                                      # (detokenized output, when the model has a recaser) | yes (also tokenized;
                                      # an error without a recaser) | no
    prepared: str = ""                # dataset dir with the BPE codes; default: the checkpoint's
    threads: int = 0
    device: str = "auto"              # auto (cuda when available) | cpu | cuda
    docs: str = ""                    # doc_id<TAB>position per input line: documents for a context model
    history_chunk: int | str = "auto"  # target-side context: documents as independent pieces of N lines (0 = whole;
                                       # auto: pieces that fill one batch, documents.history_chunk_for)
    warmup_beam: int = 1              # history pieces: the warm-up lines' beam (1: greedy; 0: --beam)
    # dropped pronouns (Wang 2019 thesis §4.3.3; docs/models.md §3.4): complete the input with a DP generator first
    dp_generator: str = ""            # DP generator checkpoint (doctrans train pipelines/dp/...)
    dp_input: str = "dp"              # dp: pronouns inserted; dpp: #DP# at detected positions
    dp_nbest: int = 1                 # N DP-completed variants per sentence (1 = 1-best)
    dp_combine: str = "mixture"       # mixture (one beam, log Σ w p) | max (best variant) | 1best
    dp_weights: str = "uniform"       # uniform 1/N (the thesis) | generator (normalised scores)
    dp_docs: str = ""                 # doc<TAB>position per input line, for the generator's context
    write_lattice: str = ""           # also write the DP input as Moses PLF confusion networks
    max_source_len: int = 0           # split lines over this many BPE units (0 = the model's limit)
    segment: str = "model"            # a line's sentences translated one by one as sentences of its document and
                                      # joined (inference/sentences.py): punct (at sentence-final punctuation) |
                                      # model (punct, then the shipped boundary model inside runs of 12+ words,
                                      # inference/boundaries.py) | off
    encoding_errors: str = "strict"   # strict: undecodable input is an error | replace: U+FFFD, warn
    encoding: str = ""                # "" (UTF-8; subtitle files: auto) | auto (detected, data/encoding.py) | a codec
    script: str = "auto"              # auto (Traditional input converted to Simplified) | simplified | traditional
    bilingual: bool = False           # subtitle files: the source lines above the translation in each cue
    max_line_length: int = MAX_LINE_LENGTH   # subtitle files: characters a line of the translation (subtitle_layout)
    max_cps: float = MAX_CPS          # subtitle files: cues over this many characters per second reported (0: none)
    # spans the model must not translate, lines it must not see (inference/spans.py)
    glossary: str = ""                # source<TAB>target terms enforced in the output (placeholders)
    protect: bool = True              # keep Latin-script text, numbers, URLs, e-mail addresses, tags through translation
    translate_all: bool = False       # send lines without Chinese to the model too (else: passed through unchanged)
    stream: bool = False              # stdin a line at a time, each translation flushed (inference/stream.py)
    resume: bool = False              # directory input: skip documents whose output is complete
    workers: int = 1                  # directory input: translating processes on this machine
    group_lines: int = GROUP_LINES    # directory input: documents translated together up to N lines
    explain_context: int = 0          # pictures of the context attention of N sampled sentences
    explain_dir: str = ""             # where they go [default: OUTPUT.explain/]
    context_options: tuple[str, ...] = ()   # KEY=VALUE overrides of the checkpoint's context config
    glob: str | None = None           # directory input: files taken (None: *SUFFIX, the most common top-level suffix)
    out_suffix: str | None = None     # directory input: outputs' suffix replacing the source's ("": keep the
                                      # names; None: the model's source-language suffix → the target's, a.zh → a.en)
    output_format: str = "text"       # text | sgml (SGML input only: the input's <DOC> blocks, translations as <seg>)
    nbest: int = 0                    # write the N best hypotheses with scores to nbest_out (0 = none; N ≤ beam)
    nbest_out: str = ""               # JSON lines: {"line": i, "hypotheses": [{"text", "score", "tokens"}]}
    scores: str = ""                  # JSON lines of each line's (subtitle cue's) log-probability (inference/scores.py)
    ensemble: tuple[str, ...] = ()    # more checkpoints (or shipped names) decoded with `checkpoint` as one model
    ensemble_weights: tuple[float, ...] = ()   # one per model, `checkpoint` first (default: uniform)
    ensemble_mode: str = "linear"     # linear: Σ w p | loglinear: Π p^w renormalised (models/ensemble.py)
    engine: str = "native"            # native (torch) | ctranslate2 (checkpoint: a `doctrans export` directory)
    compute_type: str = "default"     # ctranslate2: float32 | int8 | int8_float32 | … (default: as exported, float32)
    quantize: str = "none"            # native: none | int8 (dynamic int8 output layer + FFN, CPU)
    shortlist: str = ""               # lexical shortlist file (doctrans shortlist): the output layer over each
                                      # batch's candidate target tokens only (inference/shortlist.py; ctranslate2: vmap)
    # the reconstructor at test time (docs/models.md §2.8 "Decoding", §2.10–2.11; inference/reconstruction.py)
    rerank: str = ""                  # "reconstructor": rerank the k-best by s_beam + λ·log R(x̂|s(y))/|x̂|
    rerank_k: int = 0                 # candidates per sentence reranked (0 = beam)
    rerank_vocab: int = 0             # log R normalised over the N most frequent source words + the word itself
                                      # (0 = the whole source vocabulary, exact; an approximation for speed)
    dp_out: str = ""                  # write the DP-completed source a joint DP model predicts here
    dp_threshold: float | None = None  # dp_out: τ of the DP decision (pronoun where P(NONE) < τ; 0 = arg-max;
                                       # None = the model's model.reconstructor.dp_threshold)
