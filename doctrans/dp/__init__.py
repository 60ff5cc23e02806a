"""The dropped-pronoun (DP) system (thesis chapters 4 and 6), one package.

Dependencies point one way; no module imports one further down this list's right-hand side:

* ``pronouns`` (Table 4.2 lexicon) ← ``annotate`` (Algorithm 1) ← ``align``, ``ngram_lm``,
  ``explain`` ← ``corpus`` (the ``annotate-dp corpus -p`` stage); ``agreement`` (DP P/R/F vs an oracle);
* ``data`` (labelled sentences, features) ← ``models`` (``DP_MODELS``: one file per model) ←
  ``config`` (the sectioned ``task: dp_generator`` YAML) ← ``generator`` (a trained generator,
  its checkpoint, the τ decision) ← ``train`` (the epoch loop) and ``apply`` (``annotate-dp
  --generator``, N-best, PLF, the ``translate --dp-generator`` input transform);
* ``table`` (the DP translation table) uses ``doctrans.inference.translate``.
"""
