"""``rtaudit bench``: the benchmark of the model stages and of the fleet, kept apart from
the roles in ``workers/``.

Modules, from the bottom up:

* :mod:`~rtaudit.tools.bench.stats` — pure arithmetic: schedules, step statistics, the knee, ratios;
* :mod:`~rtaudit.tools.bench.inputs` — the corpus, record builders and the in-memory model limit;
* :mod:`~rtaudit.tools.bench.load` — open-loop sender, arrival reader, the naive consumer
  (``python -m rtaudit.tools.bench.load ROLE TOPIC``);
* :mod:`~rtaudit.tools.bench.rig` — a private embedded broker, the processes it starts, one step;
* :mod:`~rtaudit.tools.bench.runner` — the stepped series per target (:class:`Bench`);
* :mod:`~rtaudit.tools.bench.peers` and :mod:`~rtaudit.tools.bench.versus` — ``rtaudit bench --peers``: Faust's
  ``stream.take()`` batching and Ray Serve's ``@serve.batch`` around the same stage, stepped like the worker;
* :mod:`~rtaudit.tools.bench.feed` and :mod:`~rtaudit.tools.bench.overhead` — ``rtaudit bench --model``:
  the fleet's own cost per role and end to end, against the raw client (:class:`OverheadBench`);
* :mod:`~rtaudit.tools.bench.report` — tables, ``bench.json``, ``overhead.json`` and the plot.

The names below are re-exported lazily (PEP 562), so ``python -m rtaudit.tools.bench.load``
does not import the whole bench first.
"""

from __future__ import annotations

import importlib
from typing import Any

_EXPORTS = {
    "STAGES": "runner", "Bench": "runner", "BenchOptions": "runner", "BenchRun": "runner", "Budget": "runner",
    "StagePlan": "runner", "TargetResult": "runner", "available_profiles": "runner", "mixed_reference": "runner",
    "profile_summary": "runner", "run_series": "runner", "PeerSeries": "runner",
    "PEERS": "peers", "peer_missing": "peers",
    "OverheadBench": "overhead", "OverheadOptions": "overhead",
    "overhead_table": "report", "plot": "report", "tables": "report", "write_json": "report", "write_overhead_json": "report",
}
__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(f"{__name__}.{module}"), name)
