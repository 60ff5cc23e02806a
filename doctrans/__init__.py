"""doctrans: document-level, discourse-aware neural machine translation."""

__version__ = "0.1.0"
