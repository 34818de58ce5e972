"""The demo (``rtaudit demo``): its corpus and run (:mod:`~rtaudit.tools.demo.corpus`), its speech
and video clips (:mod:`~rtaudit.tools.demo.clips`), and the demo texts (``texts.txt``); the speech clips are the runtime's
(``workers/media/``, the audio warm-up reads one)."""
