"""``doctrans preprocess`` (``doctrans/data/preprocess.py``)."""
from __future__ import annotations

import click

from doctrans.cli.options import NON_NEGATIVE, POSITIVE


@click.command("preprocess", short_help="Tokenize, filter and BPE-encode a zh-en corpus (TVsub by default).")
@click.option("--data-dir", default="../shared/corpora/tvsub", show_default=True,
              help="TVsub root: the shared copy or a clone of github.com/longyuewangdcu/tvsub.")
@click.option("--train-dir", default=None, help="Instead of --data-dir: directory of N.zh/N.en documents.")
@click.option("--dev-prefix", default=None, help="Dev text PREFIX.zh/PREFIX.en (raw); needs --dev-sgm.")
@click.option("--dev-sgm", default=None, help="SGML file with the dev <DOC> boundaries.")
@click.option("--test-prefix", default=None, help="Test text PREFIX.zh/PREFIX.en (raw); needs --test-sgm.")
@click.option("--test-sgm", default=None, help="SGML file with the test <DOC> boundaries.")
@click.option("--train-docs", default="0:300", show_default=True,
              help="Train documents (numerically sorted): 'all', a count N, or a slice 'A:B'.")
@click.option("-o", "--out", required=True, help="Prepared dataset directory to write.")
@click.option("--bpe-merges", type=POSITIVE, default=8000, show_default=True, help="BPE merge operations per language.")
@click.option("--joint-bpe", is_flag=True, help="Learn one set of BPE codes on both languages.")
@click.option("--bpe-sample-lines", type=NON_NEGATIVE, default=500_000, show_default=True,
              help="Learn BPE on at most this many evenly spaced train lines (0 = all).")
@click.option("--keep-case", is_flag=True, help="Do not lowercase (default: lowercase both sides).")
@click.option("--recaser-min-count", type=NON_NEGATIVE, default=2, show_default=True,
              help="Lowercased English target: learn OUT/recaser.en.json (restores case in translations) from "
                   "the cased train targets, keeping words seen at least N times (0 = no recaser).")
@click.option("--max-len", type=POSITIVE, default=80, show_default=True,
              help="Train only: drop pairs with a side over N tokens.")
@click.option("--max-len-ratio", type=click.FloatRange(min=1.0), default=3.0, show_default=True,
              help="Train only: drop pairs whose token counts differ by more than this factor (≥ 1).")
@click.option("--workers", type=NON_NEGATIVE, default=0, show_default=True, help="Processes (0 = all usable CPUs).")
def preprocess_cmd(data_dir, train_dir, dev_prefix, dev_sgm, test_prefix, test_sgm, train_docs, out,
                   bpe_merges, joint_bpe, bpe_sample_lines, keep_case, recaser_min_count, max_len, max_len_ratio,
                   workers) -> None:
    """Tokenize, filter and BPE-encode a document-level zh-en corpus (TVsub by default).

    \b
    Writes OUT/:
      meta.json              settings and counts; written last (absent = unfinished)
      bpe.codes.{zh,en}      BPE codes (bpe.codes.joint with --joint-bpe)
      vocab.{zh,en}.txt      train BPE tokens, "token<TAB>count", most frequent first
      {split}.tok.{zh,en}    tokenized text, one sentence per line
      {split}.bpe.{zh,en}    the same after BPE ("@@ " joins units)
      {split}.docs           "doc_id<TAB>position" per line, position 0-based in the document
      train.target           1 = training target, 0 = filtered (kept as document context only)
      recaser.en.json        the recaser a model trained on it carries (lowercased data only)
    Splits: train, dev, test. Every sentence of every document is kept (no gaps); only train
    is length-filtered, by marking lines 0 in train.target. Without --train-dir, paths come
    from --data-dir.
    """
    from doctrans.data import preprocess

    settings = dict(train_docs=train_docs, bpe_merges=bpe_merges, joint_bpe=joint_bpe,
                    bpe_sample_lines=bpe_sample_lines, lowercase=not keep_case,
                    recaser_min_count=recaser_min_count, max_len=max_len,
                    max_len_ratio=max_len_ratio)
    if workers:
        settings["workers"] = workers
    paths = dict(dev_prefix=dev_prefix, dev_sgm=dev_sgm, test_prefix=test_prefix, test_sgm=test_sgm)
    if train_dir:
        cfg = preprocess.PreprocessConfig(out=out, train_dir=train_dir, **paths, **settings)
    else:
        given = {k: v for k, v in paths.items() if v is not None}
        cfg = preprocess.tvsub_config(data_dir, out, **given, **settings)
    click.echo(f"prepared dataset: {preprocess.prepare_dataset(cfg)}")
