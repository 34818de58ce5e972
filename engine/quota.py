"""Per-tenant request quotas: one token bucket per tenant. Pure: time is passed in (ms).

A bucket holds at most ``burst`` tokens and refills at ``rate_per_s`` tokens per second;
admitting one request takes one token. So a tenant may send ``burst`` requests at once,
then ``rate_per_s`` per second for as long as it likes; beyond that the router applies the
tenant's ``over_quota`` policy (:class:`rtaudit.schemas.policy.QuotaPolicy`: move the request to the
low lane, answer it at once with a ``throttled`` verdict, or delay it).

Reservations (``over_quota = "delay"``)
    :meth:`TokenBucket.reserve` takes the token *now* even when the bucket does not hold it:
    the bucket goes into debt (``tokens`` below 0) and the reservation says when the debt is
    paid back, ``ready_at_ms`` = the time the bucket reaches 0 tokens again. Reservations are
    taken in arrival order, each one 1000 / ``rate_per_s`` ms after the previous one, so
    requests held until their ``ready_at_ms`` go out at the quota rate, in order
    (:mod:`rtaudit.engine.delay` holds them). A reservation whose wait would exceed ``max_wait_ms``,
    or whose ``ready_at_ms`` would fall after ``not_after_ms`` (the request's deadline), is
    refused and takes nothing. So the debt never exceeds ``rate_per_s`` x ``max_wait_ms`` /
    1000 tokens. While in debt the bucket admits nothing else (:meth:`TokenBucket.try_take`
    refuses), whatever the tenant's policy becomes; :meth:`TenantQuotas.refund` gives back
    the tokens of reservations that were never used (a held request dropped on a revoke).

Time
    Callers pass the time a request *arrived* (the router uses the record's broker timestamp,
    capped at its own clock, so a router replaying a backlog after a restart meters the
    producer's rate, not its own catch-up rate). Time never moves a bucket backwards: an
    earlier time than the last one seen refills nothing.

Run-time changes
    :meth:`TokenBucket.reconfigure` replaces a bucket's rate and burst in place (tokens
    earned so far are kept, capped at the new burst); :meth:`TenantQuotas.admit` calls it
    whenever the limit it is given differs from the bucket's, so a policy replaced at run
    time (a later ``policy:<tenant>`` control record) takes effect on the tenant's next request.

Memory
    A bucket that has refilled to ``burst`` is indistinguishable from a new one, so
    :meth:`TenantQuotas.prune` drops those; :meth:`TenantQuotas.admit` prunes every
    ``prune_every`` calls. Buckets held are bounded by the tenants active within ``burst / rate``
    (a bucket in debt is not full: it stays until its debt is paid and it has refilled).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from rtaudit.schemas.policy import QuotaLimit as QuotaLimit  # the contract this module meters; imported from here too

#: Tolerance on token counts (float refills of 1/rate steps).
_EPS = 1e-9


@dataclass(frozen=True)
class Reservation:
    """The answer to :meth:`TokenBucket.reserve`, times in ms.

    Attributes:
        granted: whether the token was taken (``False``: refused, nothing taken).
        ready_at_ms: when the request may go (the bucket's debt, this request included, is
            paid back then); for a refusal, when it would have.
        wait_ms: ``ready_at_ms`` minus the time of the request (0: within the quota now).
        refusal: why it was refused: ``"max_wait"`` or ``"deadline"`` (``None`` when granted).
    """

    granted: bool
    ready_at_ms: float
    wait_ms: float
    refusal: str | None = None


@dataclass
class TokenBucket:
    """One tenant's bucket. ``tokens`` in requests, ``updated_ms`` the latest time seen (ms)."""

    limit: QuotaLimit
    tokens: float
    updated_ms: float

    @classmethod
    def full(cls, limit: QuotaLimit, now_ms: float) -> TokenBucket:
        """A bucket holding ``limit.burst`` tokens at ``now_ms``."""
        return cls(limit, float(limit.burst), float(now_ms))

    def refill(self, now_ms: float) -> None:
        """Add the tokens earned since the latest time seen (none if ``now_ms`` is earlier)."""
        if now_ms > self.updated_ms:
            earned = (now_ms - self.updated_ms) * self.limit.rate_per_s / 1000.0
            self.tokens = min(float(self.limit.burst), self.tokens + earned)
            self.updated_ms = float(now_ms)

    def try_take(self, now_ms: float, n: float = 1.0) -> bool:
        """Take ``n`` tokens if the bucket holds them at ``now_ms``; whether it did.
        An unlimited bucket always admits."""
        if self.limit.unlimited:
            return True
        self.refill(now_ms)
        if self.tokens + _EPS >= n:
            self.tokens = max(0.0, self.tokens - n)
            return True
        return False

    def wait_ms(self, now_ms: float, n: float = 1.0) -> float:
        """How long from ``now_ms`` until ``n`` tokens are held (0 when they are now); ``inf``
        when ``n`` exceeds the burst. Does not take anything."""
        if self.limit.unlimited:
            return 0.0
        if n > self.limit.burst + _EPS:
            return float("inf")
        self.refill(now_ms)
        missing = n - self.tokens
        return 0.0 if missing <= _EPS else missing * 1000.0 / self.limit.rate_per_s

    def reserve(
        self, now_ms: float, *, max_wait_ms: float = float("inf"), not_after_ms: float = float("inf"), n: float = 1.0,
    ) -> Reservation:
        """Take ``n`` tokens at ``now_ms`` for a request that may wait: within the quota it is
        ready at once; beyond it the bucket goes into debt and the request is ready when the
        debt is paid (see the module doc). Refused, taking nothing, when the wait would exceed
        ``max_wait_ms`` or end after ``not_after_ms``; ``n`` above the burst is never granted.
        An unlimited bucket is always ready at once."""
        if self.limit.unlimited:
            return Reservation(True, float(now_ms), 0.0)
        if n > self.limit.burst + _EPS:
            return Reservation(False, float("inf"), float("inf"), "max_wait")
        self.refill(now_ms)
        missing = n - self.tokens
        # the bucket's clock is the latest time seen (>= now_ms): the debt is paid from there
        ready = float(now_ms) if missing <= _EPS else self.updated_ms + missing * 1000.0 / self.limit.rate_per_s
        wait = max(0.0, ready - now_ms)
        if wait > max_wait_ms + _EPS:
            return Reservation(False, ready, wait, "max_wait")
        if ready > not_after_ms:
            return Reservation(False, ready, wait, "deadline")
        self.tokens = max(0.0, self.tokens - n) if missing <= _EPS else self.tokens - n
        return Reservation(True, ready, wait)

    def full_at_ms(self) -> float:
        """When the bucket will hold ``burst`` tokens again if nothing is taken (ms)."""
        if self.limit.unlimited:
            return self.updated_ms
        return self.updated_ms + (self.limit.burst - self.tokens) * 1000.0 / self.limit.rate_per_s

    def reconfigure(self, limit: QuotaLimit, now_ms: float) -> None:
        """Replace rate and burst at ``now_ms``: tokens earned at the old rate until then are
        kept, capped at the new burst (a lowered limit applies at once, a raised one does not
        hand out a fresh burst)."""
        if self.limit.unlimited:
            self.tokens, self.updated_ms = float(limit.burst), max(self.updated_ms, float(now_ms))
        else:
            self.refill(now_ms)
        self.limit = limit
        self.tokens = min(self.tokens, float(limit.burst))


@dataclass
class TenantQuotas:
    """Token buckets by tenant id, created full on a tenant's first request.

    Attributes:
        prune_every: :meth:`admit` calls between two :meth:`prune` passes.
    """

    prune_every: int = 4096
    buckets: dict[str, TokenBucket] = field(default_factory=dict)
    _calls: int = 0

    def admit(self, tenant_id: str, limit: QuotaLimit, now_ms: float) -> bool:
        """Whether one request of ``tenant_id`` arriving at ``now_ms`` is within ``limit``
        (taking its token when it is). A limit that differs from the bucket's replaces it
        (:meth:`TokenBucket.reconfigure`)."""
        bucket = self._bucket(tenant_id, limit, now_ms)
        return True if bucket is None else bucket.try_take(now_ms)

    def reserve(
        self, tenant_id: str, limit: QuotaLimit, now_ms: float, *,
        max_wait_ms: float = float("inf"), not_after_ms: float = float("inf"),
    ) -> Reservation:
        """:meth:`TokenBucket.reserve` one request of ``tenant_id`` at ``now_ms`` (the bucket is
        created or reconfigured as in :meth:`admit`)."""
        bucket = self._bucket(tenant_id, limit, now_ms)
        if bucket is None:
            return Reservation(True, float(now_ms), 0.0)
        return bucket.reserve(now_ms, max_wait_ms=max_wait_ms, not_after_ms=not_after_ms)

    def _bucket(self, tenant_id: str, limit: QuotaLimit, now_ms: float) -> TokenBucket | None:
        """The tenant's bucket with ``limit`` in force (``None`` when unlimited); prunes every
        ``prune_every`` calls."""
        self._calls += 1
        if self._calls % self.prune_every == 0:
            self.prune(now_ms)
        if limit.unlimited:
            self.buckets.pop(tenant_id, None)
            return None
        bucket = self.buckets.get(tenant_id)
        if bucket is None:
            bucket = self.buckets[tenant_id] = TokenBucket.full(limit, now_ms)
        elif bucket.limit != limit:
            bucket.reconfigure(limit, now_ms)
        return bucket

    def refund(self, tenant_id: str, n: float = 1.0) -> None:
        """Give back ``n`` reserved tokens that were never used (capped at the burst)."""
        bucket = self.buckets.get(tenant_id)
        if bucket is not None:
            bucket.tokens = min(float(bucket.limit.burst), bucket.tokens + n)

    def reconfigure(self, tenant_id: str, limit: QuotaLimit, now_ms: float) -> None:
        """Replace one tenant's limit now (the bucket, if any, keeps its tokens up to the new burst)."""
        bucket = self.buckets.get(tenant_id)
        if bucket is not None:
            bucket.reconfigure(limit, now_ms)

    def prune(self, now_ms: float) -> int:
        """Drop buckets that are full again at ``now_ms`` (a new one would be the same); how many."""
        idle = [t for t, b in self.buckets.items() if b.full_at_ms() <= now_ms]
        for t in idle:
            del self.buckets[t]
        return len(idle)
