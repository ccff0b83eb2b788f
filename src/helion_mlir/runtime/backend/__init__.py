"""The Helion backend ``"mlir"`` (:mod:`.helion_backend`) and :func:`.tune.tune`, tuning a
kernel through it for the command line: the top of the runtime."""
