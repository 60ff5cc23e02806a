"""Context models; the CONTEXT_MODELS table is in doctrans/models/build.py."""
