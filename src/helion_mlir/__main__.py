"""``python -m helion_mlir``: the ``helion-mlir`` command."""

import sys

from .cli import main

sys.exit(main())
