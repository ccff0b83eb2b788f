"""A compiled Helion kernel: :class:`.compiled_kernel.CompiledKernel` (a compiled function
on one of the runtimes below, run by Helion's host code with a launcher), its host code
(:mod:`.host_code`) and the checks of its arguments (:mod:`.argument_checks`,
:mod:`.launch_checks`)."""
