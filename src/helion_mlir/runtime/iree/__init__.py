"""Running a module through IREE: ``iree-compile`` and the IREE runtime (:mod:`.engine`), on
the devices it offers (:mod:`.devices`)."""
