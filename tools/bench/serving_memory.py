"""Resident memory of a worker's serving path across model swaps (issue 9: after 20 swaps within 5 % of after 2).

``python -m rtaudit.tools.bench.serving_memory --swaps 20`` does what a text worker does when
``model:text`` changes ``swaps`` times: a :class:`rtaudit.workers.serving.ServingSet` with the production
loader (:func:`rtaudit.workers.serving.bundle_loader`: sha256 of every file, load, golden set, warm-up of
every batch-size bucket) is handed each new ``model:text`` record (applied to an
:class:`rtaudit.engine.control.ControlState` as the control thread would); between swaps it scores
batches of 64 texts, and after each swap waits until the old version is dropped and its memory
given back (:data:`rtaudit.workers.serving.RECLAIM_AFTER_S`). It prints resident memory after each swap
and the ratio after the last vs after swap 2. :mod:`rtaudit.tools.bench.bundle_memory` measures the
bare load/drop cycle; this one measures the worker's own code path. Not a test: it prints the series.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

from rtaudit.tools.bench.bundle_memory import LIMIT, make_bundles, rss_mib


def run(swaps: int, batches_per_swap: int = 3) -> list[tuple[int, str, float, float]]:
    """``[(swap, version, RSS MiB, RssAnon MiB)]``; swap 0 is the first bundle in force."""
    from rtaudit.engine.bundle_store import ModelStore
    from rtaudit.engine.clock import now_ms
    from rtaudit.engine.control import ControlState, encode
    from rtaudit.engine.models.null import NullStage
    from rtaudit.schemas.control import ControlMessage, ModelPayload
    from rtaudit.schemas.messages import ModalityTask
    from rtaudit.workers import serving
    from rtaudit.workers.settings import load_settings

    settings = load_settings()
    rows: list[tuple[int, str, float, float]] = []
    with tempfile.TemporaryDirectory(prefix="rtaudit-serving-memory-") as tmp:
        store = ModelStore(Path(tmp) / "store")
        refs = [store.put(p) for p in make_bundles("text", swaps + 1, Path(tmp) / "build", None, settings)]
        serving_set = serving.ServingSet("text", lambda: NullStage(), serving.bundle_loader(settings)).start()
        state = ControlState()
        t = now_ms()
        tasks = [ModalityTask(request_id=f"mem-{i}", tenant_id="bench", part="text:0", modality="text", lane="lo",
                              created_at_ms=t, deadline_ms=t + 3_600_000, routed_at_ms=t,
                              text=f"sentence number {i} of the memory benchmark") for i in range(64)]
        for i, ref in enumerate(refs):
            key, value = encode(ControlMessage(subject="model:text", version=i + 1, expects=i, author="bench",
                                               at_ms=now_ms(), payload=ModelPayload(bundle=ref)))
            serving_set.on_control(state, [state.apply(state.offset, key, value)])  # type: ignore[list-item]  # apply() returns the applied message here (a new version, never None)
            if not serving_set.wait_settled(600):
                raise TimeoutError(f"{ref.version} not ready within 600 s")
            for _ in range(batches_per_swap):
                result = serving_set.score(tasks)
                assert {p.model.version for p in result.partials} == {ref.version}, "the swap did not happen"
            time.sleep(serving.RECLAIM_AFTER_S + 1.5)  # the old version is dropped, its memory given back
            rows.append((i, ref.version, *rss_mib()))
            print(f"swap {i:>2} {ref.version:>4} RSS {rows[-1][2]:7.1f} MiB  RssAnon {rows[-1][3]:7.1f} MiB", flush=True)
    return rows


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--swaps", type=int, default=20)
    args = parser.parse_args(argv)
    rows = run(args.swaps)
    base = next(r for r in rows if r[0] == min(2, args.swaps))
    print(f"\n{'swap':>4} {'version':>7} {'RSS MiB':>8} {'vs swap 2':>10}")
    for swap, version, rss, _ in rows:
        print(f"{swap:>4} {version:>7} {rss:>8.1f} {rss / base[2] - 1:>+10.1%}")
    ratio = rows[-1][2] / base[2]
    verdict = "within" if ratio - 1 <= LIMIT else "OVER"
    print(f"after {rows[-1][0]} / after {base[0]}: RSS x{ratio:.3f} ({verdict} the {LIMIT:.0%} limit)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
