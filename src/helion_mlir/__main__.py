"""``python -m helion_mlir``: the ``helion-mlir`` command (parsed by :mod:`helion_mlir_cli`)."""

import sys

from helion_mlir_cli import main

sys.exit(main())
