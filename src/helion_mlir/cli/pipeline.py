"""``helion-mlir pipeline``: the steps a CPU pipeline runs, one a line."""

from __future__ import annotations

import argparse

from ..runtime.cpu.pipelines import Pipeline, PipelineOptions, describe_pipeline
from .common import EXIT_OK


def pipeline_command(options: argparse.Namespace) -> int:
    pipeline = Pipeline.PLAIN if options.plain or options.checked else Pipeline.FAST
    in_place = pipeline is Pipeline.FAST
    print(describe_pipeline(pipeline, PipelineOptions.of(pipeline, options.output_type, options.threads, in_place,
                                                         options.checked)))
    return EXIT_OK
