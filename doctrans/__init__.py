"""doctrans: document-level, discourse-aware neural machine translation.

The Python API (``doctrans/api.py``)::

    import doctrans
    tr = doctrans.Translator.load("runs/quickstart/best.pt")          # or an exported CTranslate2 dir
    tr.translate_sentences(["你好。", "", "谢谢。"])                     # → 3 strings, "" for the empty one
    tr.translate_documents([["他来了。", "他很累。"], ["..."]])          # → one list per document
"""

import importlib

from doctrans.version import __version__

__all__ = ["Translator", "__version__"]


def __getattr__(name: str):
    # Lazy (PEP 562): `import doctrans` stays light (no torch); modules inside the package read the
    # version from doctrans.version, never from here.
    if name == "Translator":
        return importlib.import_module("doctrans.api").Translator
    raise AttributeError(f"module 'doctrans' has no attribute {name!r}")
