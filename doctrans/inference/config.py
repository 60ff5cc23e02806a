"""The settings of one translation, by job, each declared once (``utils.settings.setting``: the
default and the help from which ``doctrans translate``'s and ``doctrans serve``'s options and
``api.Translator.load``'s keywords are made):

* ``ModelOptions`` — which model and how it is loaded: checkpoint, engine, device, threads,
  quantization, shortlist, ensemble, context options (``inference/loading.py``);
* ``SearchOptions`` — the search: beam, length penalty, maximum length, batch size, n-best, and
  for documents the history pieces and their warm-up beam; one object passed down as such to
  ``decode_corpus``, ``translate_documents``, ``beam_search`` and the CTranslate2 engine (as
  CTranslate2's ``TranslationOptions``). Its first five fields are the experiment config's
  ``decode:`` section (``decoding.DecodeConfig``, dev BLEU), which it extends;
* ``IOOptions`` — input and output: files, formats, encodings, documents, directories;
* ``DPOptions`` — dropped pronouns (a DP generator completing the input) and the reconstructor
  at test time (reranking, the DP-completed source).

``TranslateConfig`` holds one of each (``cfg.model``, ``cfg.search``, ``cfg.io``, ``cfg.dp``);
``TranslateConfig(checkpoint, beam=4, input_format="bpe", …)`` takes any field of any of them by
name (every name is in exactly one), and ``cfg.replace(**fields)`` changes them the same way.
The stage is ``inference/translate.py``, the model loading ``inference/loading.py``."""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

from doctrans.decoding import DecodeConfig
from doctrans.utils.settings import setting
from doctrans.inference.subtitle_layout import MAX_CPS, MAX_LINE_LENGTH

RECASE = ("auto", "yes", "no")     # IOOptions.recase
SEGMENT = ("punct", "model", "off")   # IOOptions.segment
GROUP_LINES = 512                  # IOOptions.group_lines: a directory's documents translated together up to N lines
ENGINES = ("native", "ctranslate2")
COMPUTE_TYPES = ("default", "auto", "float32", "int8", "int8_float32", "int8_float16", "int8_bfloat16",
                 "int16", "float16", "bfloat16")


@dataclass(frozen=True)
class ModelOptions:
    """Which model translates and how it is loaded (``loading.load_model``)."""

    checkpoint: str = setting(
        flags=("-c", "--checkpoint"), metavar="CKPT|NAME",
        help="A checkpoint written by `doctrans train` (best.pt or last.pt), the name of a shipped model "
             "(`doctrans models`), or with --engine ctranslate2 a directory written by `doctrans export "
             "--format ctranslate2`. [default: the shipped document model; with --sentence the shipped "
             "sentence model]")
    engine: str = setting(
        "native", choices=ENGINES,
        help="native: doctrans' own beam search (torch); ctranslate2: the CTranslate2 engine on an exported "
             "directory (sentence Transformer or concatenation model; pip install 'doctrans[ct2]').")
    compute_type: str = setting(
        "default", choices=COMPUTE_TYPES,
        help="--engine ctranslate2: weights/computation type (default: as exported, float32; int8 is int8 "
             "weights and activations). With --engine native, int8 / int8_float32 mean --quantize int8 "
             "(logged); types native lacks (float16, bfloat16, int16, …) are refused.")
    quantize: str = setting(
        "none", choices=("none", "int8"),
        help="--engine native on CPU: int8 dynamic quantization of the output layer and feed-forward layers.")
    shortlist: str = setting(
        "", type="file", metavar="FILE",
        help="A lexical shortlist (`doctrans shortlist`): each batch's output layer runs over the likely "
             "translations of its source tokens only (faster; scores normalised over them; with --engine "
             "ctranslate2 it is CTranslate2's vocabulary map).")
    device: str = setting("auto", choices=("auto", "cpu", "cuda"),
                          help="auto: the GPU when torch sees one, else the CPU.")
    threads: int = setting(
        0, min=0,
        help="torch threads (0 = all usable cores; idle OpenMP threads sleep: OMP_WAIT_POLICY=PASSIVE unless "
             "set); with --workers or torchrun, the machine's budget, split evenly: each process gets "
             "max(1, threads // processes).")
    prepared: str = setting(
        "", help="Prepared dataset dir holding the BPE codes (default: the codes inside the checkpoint; for "
                 "older checkpoints, the dataset it names).")
    context_options: tuple[str, ...] = setting(
        (), flags=("--context-option",), multiple=True, metavar="KEY=VALUE",
        help="Override a field of the checkpoint's context config (repeatable), e.g. a test-time "
             "ablation: --context-option test_ablation=null. An unknown key is an error.")
    ensemble: tuple[str, ...] = setting(
        (), type="checkpoint", multiple=True,
        help="With -c, this model too, as one ensemble (repeatable; models of one dataset; native engine; "
             "models/ensemble.py): e.g. the shipped document model with the shipped sentence model, "
             "`--ensemble tvsub-transformer-3x3 --ensemble-weights 0.3,0.7` (weights tuned on TVsub dev: the "
             "sentence model's BLEU, most of the document model's pronouns; docs/context.md).")
    ensemble_weights: tuple[float, ...] = setting(
        (), type="floats", metavar="W,W,…",
        help="With --ensemble: weights of -c and each --ensemble model, in that order (normalised) "
             "[default: uniform].")
    ensemble_mode: str = setting(
        "linear", choices=("linear", "loglinear"),
        help="With --ensemble: linear p = Σ w_i p_i (fairseq's ensembles), or loglinear p ∝ Π p_i^w_i.")


@dataclass(frozen=True)
class SearchOptions(DecodeConfig):
    """The search (``DecodeConfig``'s beam, lenpen, max_len_ratio, max_len_extra, batch_sentences,
    and these): what ``decode_corpus``, ``translate_documents``, ``beam_search`` and
    ``CT2Model`` read."""

    history_chunk: int | str = setting(
        "auto", type="auto|N",
        help="Target-side context models (the rolling history: each line reads the model's own translation "
             "of the previous ones, so a document's lines wait for each other): translate each document as "
             "independent pieces of N lines, each preceded by the model's context lines as warm-up, so all "
             "pieces decode side by side (0 = whole documents; auto = the shortest pieces, at least 8 lines, "
             "that fill one batch of --batch-sentences). Faster on few long documents; a piece's first "
             "line reads a warm-up translation made with less context. Both engines.")
    warmup_beam: int = setting(
        1, min=0, metavar="W",
        help="With history pieces (--history-chunk): the beam of the warm-up lines, whose translations "
             "are only the next lines' context (1 = greedy, the fastest: on the TVsub test 1 line of "
             "1,154 differs from 0 = --beam's, 3% less time). Both engines.")
    no_repeat_ngram_size: int = setting(        # 8: the smallest that changes no TVsub test line but a degenerate one
        8, min=0, metavar="N",
        help="A guard against degenerate output: no n-gram of N target tokens (BPE units, as the model writes "
             "them, not merged words) occurs twice in an output — a token that would repeat one is not chosen "
             "(fairseq's --no-repeat-ngram-size; 0 = off). Both engines (CTranslate2: not with a target-context "
             "model, whose previous lines it would count).")
    nbest: int = setting(
        0, min=0, metavar="N",
        help="Also write the N best hypotheses of each line with their scores (length-normalised log-prob, "
             "as the beam ranks them) to --nbest-out; N ≤ --beam; sentence-level models only (a context "
             "model is refused). The 1-best output is unchanged (0 = no n-best list).")


@dataclass(frozen=True)
class IOOptions:
    """What is read and what is written (``translate.translate_file``, ``collection``,
    ``subtitles``, ``stream``)."""

    input: str = setting("-", flags=("-i", "--input"),
                         help="Input file, a directory of document files (mirrored under --output), or - for stdin.")
    output: str = setting("-", flags=("-o", "--output"), help="Output file or directory, or - for stdout.")
    input_format: str = setting("raw", choices=("raw", "tok", "bpe"),
                                help="raw: untokenized Chinese; tok: already segmented; bpe: already BPE-encoded.")
    tokenized: bool = setting(False, help="Write Moses-tokenized output (BPE merged) instead of detokenized text.")
    recase: str = setting(
        "auto", choices=RECASE,
        help="Restore the case of a lowercasing model's output (I, Ross, the first word of each sentence) "
             "with the recaser it carries (learnt by `doctrans preprocess` from the cased training "
             "targets, data/casing.py). auto: detokenized output only; yes: tokenized output too (an "
             "error for a model without one); no: lowercase, as the model writes it.")
    docs: str = setting(
        "", help="doc_id<TAB>position per input line (like PREP/test.docs): the documents a context model "
                 "translates in order with their context. An SGML input (.sgm) takes its <DOC> blocks; a "
                 "directory, one document per file. Sentence-level models ignore documents.")
    segment: str = setting(
        "model", choices=("model", "punct", "off"),
        help="A line of several sentences (a paragraph) is translated sentence by sentence, each a sentence "
             "of its document (a context model reads the one before, in the line too), and the translations "
             "joined onto one output line; line and cue counts never change. punct: sentences end at "
             "sentence-final punctuation (。！？；… and closing quotes after them; inference/sentences.py); "
             "model: punct, and a run of 12 or more words without punctuation is cut where the shipped "
             "boundary model (trained on TVsub's line ends, inference/boundaries.py) sees a sentence end; "
             "off: each line whole, as the models were trained. Off where each line's own result is asked "
             "for: --nbest, --rerank, --dp-out, --dp-generator (logged).")
    max_source_len: int = setting(
        0, min=0,
        help="Split lines of more than N BPE tokens at sentence punctuation (or into chunks), translate "
             "the pieces and join them (0 = the model's limit, e.g. max_positions - 1).")
    # spans the model must not translate, lines it must not see (inference/spans.py)
    glossary: str = setting(
        "", type="file", metavar="FILE",
        help="Terms to enforce: one source<TAB>target per line (UTF-8; blank and #-lines skipped). Where a "
             "source term occurs (longest match first), the output has its target (the model reads a "
             "placeholder it copies; inference/spans.py). A malformed line is an error naming it.")
    protect: bool = setting(
        True, flags=("--protect/--no-protect",),
        help="Keep Latin-script words and names, numbers of 2+ digits, URLs, e-mail addresses and markup "
             "tags of a Chinese line as they are (placeholders the model copies, put back after it).")
    translate_all: bool = setting(
        False, help="Translate lines without Chinese too (no Han character, or kana: Japanese; Hangul: Korean). "
                    "Without it they are written unchanged, not sent to the model, and counted in the log.")
    encoding_errors: str = setting(
        "strict", choices=("strict", "replace"),
        help="Input that is not UTF-8 (nor, for a file, wholly GB18030 / Big5): strict: an error naming file, "
             "line and byte; replace: U+FFFD for each undecodable byte sequence, with a warning giving their count.")
    encoding: str = setting(
        "", metavar="ENC",
        help="Input encoding: auto (detected: a byte-order mark, UTF-8, else the whole file as GB18030 / Big5, "
             "the more plausible when both decode, else UTF-16 by charset-normalizer; logged) or a codec (utf-8, "
             "gb18030, big5, utf-16; a text that reads implausibly in it is warned about). Default: auto for "
             "subtitle files; for text, UTF-8, or GB18030 / Big5 when the whole file decodes as that (see "
             "--encoding-errors). Binary, mixed-encoding and undecidable files are refused naming the file.")
    script: str = setting(
        "auto", choices=("auto", "simplified", "traditional"),
        help="Chinese script of the input: auto converts Traditional input to Simplified (OpenCC t2s) for the "
             "model when detected (logged); simplified: never convert; traditional: always convert.")
    bilingual: bool = setting(False, help="Subtitle files: write each cue's source lines above its translation "
                                          "(for review).")
    max_line_length: int = setting(
        MAX_LINE_LENGTH, min=1, metavar="N",
        help="Subtitle files: lay each cue's translation out in lines of at most N characters: one line when "
             "it fits, else two balanced lines broken at a natural point (after punctuation, not after an "
             "article), more only when it does not fit in two (reported as a warning; no text is dropped); "
             "dialogue keeps one line per speaker.")
    max_cps: float = setting(
        MAX_CPS, min=0, metavar="CPS",
        help="Subtitle files: report (a warning naming the fastest) the cues whose translation reads faster "
             "than CPS characters per second (characters without line breaks and markup / the cue's "
             "duration, as subtitle editors count them); 0 = no report.")
    stream: bool = setting(
        False, help="Read stdin a line at a time and write each line's translation as soon as it is ready "
                    "(flushed); a blank line ends a document (a context model's rolling context starts again).")
    resume: bool = setting(False, help="Directory input: skip documents whose output already exists with as many "
                                       "lines as the input (outputs are written atomically).")
    workers: int = setting(
        1, min=1,
        help="Directory input: translate with N processes on this machine (each loads the model once). "
             "Under torchrun, each rank translates its share of the documents (by rank).")
    group_lines: int = setting(
        GROUP_LINES, min=1,
        help="Directory input: consecutive documents are translated together (batched jointly) up to N "
             "lines; the groups are what --workers and torchrun ranks share out.")
    glob: str | None = setting(
        None, metavar="PATTERN",
        help="Directory input: translate the files matching PATTERN (fnmatch on the path relative to the "
             "directory, where * also crosses /, or on the name), e.g. '*.zh'; '*' takes every file. "
             "[default: *SUFFIX, the most common suffix among the directory's top-level files]")
    out_suffix: str | None = setting(
        None, metavar="SUFFIX",
        help="Directory input: name each output after its source with the last suffix replaced, e.g. "
             "--out-suffix .txt writes a.zh's translation to OUT/a.txt; '' keeps the source's name "
             "[default: the model's source-language suffix becomes its target's: ep1.zh's translation is "
             "OUT/ep1.en; other names are kept. Subtitle files: SUFFIX goes before the extension, and by "
             "default the target language does, replacing a source-language tag: ep1.srt and ep1.zh.srt → "
             "OUT/ep1.en.srt].")
    output_format: str = setting(
        "text", choices=("text", "sgml"),
        help="text: one line per input line; sgml (SGML input only): the input's <DOC> blocks with the "
             "translations as <seg> lines, in the references' layout (a <tstset>).")
    nbest_out: str = setting(
        "", metavar="FILE",
        help='Where --nbest goes (- for stdout): one JSON object per input line, {"line": K (from 1), '
             '"hypotheses": [{"rank": 1, "text": ..., "score": ...}, ...]}, [] for an empty line; a line '
             "split into pieces has one hypothesis, its joined 1-best, with score null.")
    scores: str = setting(
        "", metavar="FILE",
        help='Also write how sure the model is of each translation (- for stdout): JSON lines, per input '
             'line {"line": K, "score": log-probability in nats, "tokens": N, "length_normalized": score/N}, '
             'per subtitle cue the same with its start, end, characters per second and lines; null for an '
             'empty line or one translated in pieces. The lowest are logged: check those first. Native '
             'engine only (not --engine ctranslate2, --dp-generator, --stream or a directory of text files).')
    explain_context: int = setting(
        0, min=0, metavar="N",
        help="Context models (e.g. HAN): write pictures of the sentence- and word-level context attention "
             "for each word of N sampled translated sentences (HAN paper Table 5) to --explain-dir (0 = none).")
    explain_dir: str = setting("", help="Where --explain-context writes [default: OUTPUT.explain/].")


@dataclass(frozen=True)
class DPOptions:
    """Dropped pronouns (Wang 2019 thesis §4.3.3; docs/models.md §3.4: complete the input with a DP
    generator first, ``dp.apply.dp_inputs``) and the reconstructor at test time (docs/models.md
    §2.8 "Decoding", §2.10–2.11; ``inference/reconstructing.py``)."""

    dp_generator: str = setting(
        "", help="Complete dropped pronouns in the input with this DP generator (for models trained on "
                 "+DP/+DPP sources, pipelines/dp/nmt_*.yaml); A.pt:B.pt ensembles several.")
    dp_input: str = setting("dp", choices=("dp", "dpp"),
                            help="dp: insert the predicted pronouns; dpp: insert #DP# at the predicted positions.")
    dp_nbest: int = setting(1, min=1,
                            help="Decode the N best DP completions of each sentence together (1 = the 1-best only).")
    dp_combine: str = setting(
        "mixture", choices=("mixture", "max", "1best"),
        help="mixture: one shared beam scoring log Σ_r w_r p(y|x_r) (confusion-network analogue); "
             "max: decode each variant, keep the best length-normalised hypothesis; 1best.")
    dp_weights: str = setting(
        "uniform", choices=("uniform", "generator"),
        help="Mixture weights: 1/N (the thesis) or the generator's normalised completion scores.")
    dp_docs: str = setting("", help="doc<TAB>position per input line (document context of the generator).")
    write_lattice: str = setting("", help="Also write the DP input as Moses PLF confusion networks, one per line.")
    rerank: str = setting(
        "", choices=("reconstructor",),
        help="Rerank the k best hypotheses of each line by the beam's score + λ·log R(x̂|s(y))/|x̂|, the "
             "model's reconstructor rebuilding the source x̂ from each candidate's decoder states (docs/"
             "models.md §2.8 Decoding; λ: the model's weight). x̂: the source itself (joint labeler) or the "
             "--dp-generator's completion (--dp-input as the model reconstructs). Models trained with a "
             "decoder-side reconstructor only (pipelines/dp/rec_*.yaml); one over a context model (e.g. "
             "rec_joint_labeler_han.yaml) reranks each document batch on its context-aware states.")
    rerank_k: int = setting(0, min=0, metavar="K", help="--rerank: candidates per line (≤ --beam; 0 = --beam).")
    rerank_vocab: int = setting(
        0, min=0, metavar="N",
        help="--rerank: normalise log R over the N most frequent source words and the reconstructed word "
             "itself instead of the whole source vocabulary — an approximation for speed (TVsub test, beam "
             "10: N=4000 reranks at 1.45x plain decoding instead of 1.85x, keeping 91% of the exact choices; "
             "docs/dp.md). 0 = exact.")
    dp_out: str = setting(
        "", metavar="FILE",
        help="Also write the DP-completed source the model predicts (joint DP predictor/labeler, "
             "pipelines/dp/rec_joint_*.yaml): segmented words with the pronouns inserted, one line per input "
             "line (empty for empty), as annotate-dp apply --generator writes; score it with `doctrans score dp "
             "FILE --base SRC.tok.zh --oracle …`. A cross-sentence labeler (rec_joint_context.yaml) labels "
             "each line with its own document's previous lines (give --docs or an .sgm input).")
    dp_threshold: float | None = setting(
        None, type=float, min=0, max=1, metavar="TAU",
        help="--dp-out: insert the most likely pronoun wherever the model's P(NONE) < TAU (0 = the arg-max "
             "label; in [0, 1]). Tune it on dev with `doctrans score dp` as the external generator's "
             "threshold [default: the model's model.reconstructor.dp_threshold].")


GROUPS = {"model": ModelOptions, "search": SearchOptions, "io": IOOptions, "dp": DPOptions}
FIELD_GROUP = {f.name: group for group, cls in GROUPS.items() for f in dataclasses.fields(cls)}
"""Field name → the group (``TranslateConfig`` attribute) it belongs to; each name is in one group."""


@dataclass(frozen=True, init=False)
class TranslateConfig:
    """The settings of one translation: ``model`` (``ModelOptions``), ``search``
    (``SearchOptions``), ``io`` (``IOOptions``), ``dp`` (``DPOptions``).

    ``TranslateConfig(checkpoint, **fields)``: ``fields`` any field of the four by name (or whole
    groups: ``search=SearchOptions(beam=4)``, fields given by name then change it). Raises
    TypeError naming an unknown field."""

    model: ModelOptions
    search: SearchOptions
    io: IOOptions
    dp: DPOptions

    def __init__(self, checkpoint: str | None = None, *, model: ModelOptions | None = None,
                 search: SearchOptions | None = None, io: IOOptions | None = None, dp: DPOptions | None = None,
                 **fields: Any):
        given = {"model": model, "search": search, "io": io, "dp": dp}
        if checkpoint is not None:
            fields["checkpoint"] = checkpoint
        unknown = sorted(set(fields) - set(FIELD_GROUP))
        if unknown:
            raise TypeError(f"TranslateConfig: unknown setting(s) {', '.join(unknown)}")
        for group, cls in GROUPS.items():
            mine = {k: v for k, v in fields.items() if FIELD_GROUP[k] == group}
            if given[group] is None:
                if group == "model" and "checkpoint" not in mine:
                    raise TypeError("TranslateConfig: checkpoint is required")
                value = cls(**mine)
            else:
                value = dataclasses.replace(given[group], **mine) if mine else given[group]
            object.__setattr__(self, group, value)

    def replace(self, **fields: Any) -> "TranslateConfig":
        """A copy with ``fields`` (any field of the four groups, by name) changed. Raises
        TypeError naming an unknown field."""
        return TranslateConfig(model=self.model, search=self.search, io=self.io, dp=self.dp, **fields)


def field_names() -> tuple[str, ...]:
    """Every setting of a ``TranslateConfig``, by name (group by group, in declaration order)."""
    return tuple(FIELD_GROUP)
