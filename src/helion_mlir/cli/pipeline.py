"""``helion-mlir pipeline``: the steps a CPU pipeline runs, one a line."""

from __future__ import annotations

import argparse

from ..runtime.pipelines import DUMP_ENVIRONMENT_VARIABLE, Pipeline, PipelineOptions, describe_pipeline
from .common import EXIT_OK

PIPELINE_EPILOG = f"""\
examples:
  helion-mlir pipeline
  helion-mlir pipeline --plain -t tosa
  helion-mlir pipeline --threads 1

Without options: the fast pipeline as 'helion-mlir run' and compile_kernel use it (results
in place, torch's thread count). {DUMP_ENVIRONMENT_VARIABLE}=DIR writes the IR after every
step of each lowering into DIR/<function>.<pipeline>/.
"""


def pipeline_command(options: argparse.Namespace) -> int:
    pipeline = Pipeline.PLAIN if options.plain else Pipeline.FAST
    in_place = pipeline is Pipeline.FAST
    print(describe_pipeline(pipeline, PipelineOptions.of(pipeline, options.output_type, options.threads, in_place)))
    return EXIT_OK
