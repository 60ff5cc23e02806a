"""What inference and training both run on: the device (``device.py``), checkpoint I/O
(``checkpoint.py``) and torchrun process groups (``distributed.py``). Below ``training`` and
``inference`` in the package layers (``tests/unit/test_architecture.py``)."""
