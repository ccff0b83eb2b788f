"""``helion-mlir emit``: print a kernel's verified module."""

from __future__ import annotations

import argparse
import sys

from ..generate import generate_mlir
from ..output_type import OutputType
from .common import EXIT_OK, CommandError, StageError, bind, stage
from .targets import load_target, stage_failure


def emit_command(options: argparse.Namespace) -> int:
    target = load_target(options)
    output_type = OutputType.parse(options.output_type)
    try:
        bound = bind(target.kernel, target.args)
        with stage("lower"):
            text = generate_mlir(bound, output_type=output_type, config=target.config, debug_info=options.debug_info)
    except StageError as err:
        raise stage_failure(err, target, output_type) from err.error
    if options.output is None:
        sys.stdout.write(text if text.endswith("\n") else text + "\n")
        return EXIT_OK
    try:
        options.output.write_text(text)
    except OSError as err:
        raise CommandError(f"cannot write {options.output}: {err.strerror}", next_step="choose another -o path") from None
    print(f"wrote {options.output} (kernel {target.name}, {output_type})", file=sys.stderr)
    return EXIT_OK
