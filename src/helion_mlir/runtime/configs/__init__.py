"""Which configs a CPU honours and which were chosen: the CPU search space, the seeds of a
search, tuned configs on disk, Triton's loop-hint fields and the hint that tuning exists.
Below the compiled kernel, which reads tuned configs, and the tuning that writes them."""
