"""``rtaudit control breaker ...``: a tenant's circuit breaker on ``audit.control`` (``breaker:<tenant>``).

The joint alert matrix's page cell (P99 > 2 s with semantic drift >= 0.4,
``deploy/prometheus/drift-alerts.yml``) says *trip the breaker*: its receiver (or the operator on
call) runs ``rtaudit control breaker trip <tenant>``; fusion then decides that tenant's verdicts by
the breaker's action (:class:`rtaudit.engine.policy.Breaker`) until ``reset``. Published by
compare-and-swap like every control subject.
"""

from __future__ import annotations

from typing import Annotated, Optional

import typer

from rtaudit.cli.control import (
    AuthorOpt, ConfigOpt, ExpectOpt, ReasonOpt, TenantArg, _connect, _publish, _state, _subject, _tombstone,
)

breaker_app = typer.Typer(help="A tenant's circuit breaker: its action (fail open / fail closed / hold for review), "
                          "trip and reset.", no_args_is_help=True)
ActionOpt = Annotated[Optional[str], typer.Option(
    "--action", help="fail_open | fail_closed | hold_for_review (default: the action in force, else hold_for_review)")]


def _set(tenant: str, action: str | None, tripped: bool | None, expect_version: int | None, author: str | None,
         reason: str | None, config) -> None:
    from pydantic import ValidationError

    from rtaudit.schemas.control import BreakerPayload
    from rtaudit.cli import control_view as view
    from rtaudit.cli.common import fail

    subject = _subject("breaker", tenant)
    s = _connect(config)
    msg = _state(s).messages.get(subject)
    current = msg.payload if msg is not None and isinstance(msg.payload, BreakerPayload) else BreakerPayload()
    try:
        payload = BreakerPayload(action=action or current.action, tripped=current.tripped if tripped is None else tripped)
    except ValidationError as exc:
        raise fail(f"bad breaker: {view.one_line(exc)}") from None
    _publish(s, subject, payload, expects=expect_version, author=author, reason=reason)


@breaker_app.command("set")
def breaker_set(tenant: TenantArg, action: ActionOpt = None, expect_version: ExpectOpt = None, author: AuthorOpt = None,
                reason: ReasonOpt = None, config: ConfigOpt = None) -> None:
    """Set what TENANT's verdicts do when its breaker trips (tripped or not stays as it is)."""
    _set(tenant, action, None, expect_version, author, reason, config)


@breaker_app.command("trip")
def breaker_trip(tenant: TenantArg, action: ActionOpt = None, expect_version: ExpectOpt = None, author: AuthorOpt = None,
                 reason: ReasonOpt = None, config: ConfigOpt = None) -> None:
    """Trip TENANT's breaker: fusion decides its verdicts by the breaker's action until `reset`."""
    _set(tenant, action, True, expect_version, author, reason, config)


@breaker_app.command("reset")
def breaker_reset(tenant: TenantArg, expect_version: ExpectOpt = None, author: AuthorOpt = None,
                  reason: ReasonOpt = None, config: ConfigOpt = None) -> None:
    """Reset TENANT's breaker (the action stays recorded for the next trip)."""
    _set(tenant, None, False, expect_version, author, reason, config)


@breaker_app.command("clear")
def breaker_clear(tenant: TenantArg, expect_version: ExpectOpt = None, config: ConfigOpt = None) -> None:
    """Tombstone breaker:TENANT: no breaker at all."""
    _tombstone(_connect(config), _subject("breaker", tenant), expect_version)
