"""The package version, in a module of its own so that what reads it (the trainer's checkpoints,
``doctrans --version``, setup.cfg) imports nothing else of doctrans."""

__version__ = "0.1.0"
