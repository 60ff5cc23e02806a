"""``python -m doctrans.cli …`` (and ``torchrun … -m doctrans.cli …``): the ``doctrans`` command."""
from doctrans.cli import main

main()
