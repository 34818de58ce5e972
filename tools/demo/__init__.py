"""The demo (``rtaudit demo``): its corpus and run (:mod:`~rtaudit.tools.demo.corpus`), its speech
and video clips (:mod:`~rtaudit.tools.demo.clips`), and their data (``texts.txt``, ``media/``)."""
