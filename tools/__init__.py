"""Harnesses around the fleet, apart from its runtime: no role imports them (the one lazy import from
``rtaudit.workers`` is :func:`rtaudit.workers.kafka.start_hint` reading the fleet records).

- :mod:`rtaudit.tools.bench`: throughput, latency and memory benchmarks (``rtaudit bench``).
- :mod:`rtaudit.tools.chaos`: process kills under load, every request accounted for (``rtaudit chaos``).
- :mod:`rtaudit.tools.fuzz`: mutated requests against a live fleet (``rtaudit fuzz``).
- :mod:`rtaudit.tools.fleet`: the local fleet (``rtaudit up``): embedded broker, supervised workers, fleet records.
- :mod:`rtaudit.tools.demo`: the demo corpus and run (``rtaudit demo``).
"""
