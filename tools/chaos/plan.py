"""The fault plan of ``rtaudit chaos`` (pure, seeded): which worker is killed when, and the rolling restart."""

from __future__ import annotations

import random
from collections.abc import Iterable
from dataclasses import dataclass


#: worker roles the harness kills (the fleet's roles).
ROLES = ("router", "text", "image", "ocr", "fusion")
#: request kinds of the load: text only; a caption + a drawn picture (image and OCR stages
#: run on it); an image of rendered words alone (OCR finds text in it).
KINDS = ("text", "image", "ocr")
#: part statuses that show a stage answered (``missing``: it did not, before the deadline).
ANSWERED = ("ok", "expired", "error")
#: tenant of every chaos request (the default policy; the SLO rides on each request).
TENANT = "chaos"
#: seconds the plan reserves for each step of the rolling restart (the run waits longer if needed).
ROLLING_STEP_S = 12.0
#: longest wait for a role to serve again during the rolling restart, s.
ROLLING_WAIT_S = 90.0
#: extra wait past the last deadline + grace before the verdicts are read, s.
SETTLE_MARGIN_S = 5.0
#: after that, the wait goes on while verdicts keep arriving (none for this long ends it), s ...
LATE_IDLE_S = 5.0
#: ... up to this much longer, s.
LATE_CAP_S = 120.0


@dataclass(frozen=True)
class Fault:
    """One planned fault: at ``at_s`` seconds after the load started, send ``signal``
    (``SIGKILL`` or ``SIGTERM``) to the process group of the ``role`` worker. A rolling
    step (``rolling``) waits until the previous rolling step's role serves again."""

    at_s: float
    role: str
    signal: str = "SIGKILL"
    rolling: bool = False


def plan_faults(
    seed: int, kills: int, start_s: float, end_s: float, roles: Iterable[str] = ROLES,
    rolling: Iterable[str] = ROLES, rolling_step_s: float = ROLLING_STEP_S,
) -> list[Fault]:
    """``kills`` SIGKILLs spread over ``[start_s, end_s]`` (evenly spaced, each jittered by at
    most 30 % of the spacing), roles drawn as successive shuffles of ``roles`` (every role is
    killed as often as the others, give or take one, never twice in a row), and a rolling
    SIGTERM restart of ``rolling`` (shuffled) half way through, for which the plan reserves
    ``rolling_step_s`` per role. Deterministic for a ``seed``; sorted by time.

    Raises:
        ValueError: a negative count, an empty or unknown role list, or a window too short
            for the rolling restart.
    """
    roles, rolling = list(roles), list(rolling)
    if kills < 0:
        raise ValueError(f"kills must be >= 0, got {kills}")
    if kills and not roles:
        raise ValueError("no role to kill")
    unknown = sorted(set(roles + rolling) - set(ROLES))
    if unknown:
        raise ValueError(f"unknown roles {unknown}: roles are {', '.join(ROLES)}")
    reserved = rolling_step_s * len(rolling)
    span = end_s - start_s - reserved
    if (kills or rolling) and span <= 0:
        raise ValueError(f"a fault window of {end_s - start_s:.0f} s is too short for a rolling restart of "
                         f"{len(rolling)} roles ({reserved:.0f} s reserved)")
    rng = random.Random(seed)
    order: list[str] = []
    while len(order) < kills:
        perm = rng.sample(roles, len(roles))
        if order and len(perm) > 1 and perm[0] == order[-1]:
            perm[0], perm[1] = perm[1], perm[0]
        order += perm
    gap = span / kills if kills else 0.0
    times = [start_s + (i + 0.5) * gap + rng.uniform(-0.3, 0.3) * gap for i in range(kills)]
    split = kills // 2  # kills before the rolling restart
    rolling_at = start_s + split * gap
    faults = [Fault(round(t + (reserved if i >= split else 0.0), 3), order[i]) for i, t in enumerate(times)]
    rolling_order = rng.sample(rolling, len(rolling))
    faults += [Fault(round(rolling_at + k * rolling_step_s, 3), role, "SIGTERM", rolling=True)
               for k, role in enumerate(rolling_order)]
    return sorted(faults, key=lambda f: f.at_s)
