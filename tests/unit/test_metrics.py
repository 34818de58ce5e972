"""Metric label helpers keep cardinality bounded."""

from rtaudit.workers.metrics import SLO_MISSES, tenant_label


def test_unknown_tenants_collapse_into_other():
    known = {"acme", "itest"}
    assert tenant_label("acme", known) == "acme"
    assert tenant_label("someone-new-123", known) == "other"


def test_slo_miss_counter_counts_per_tenant_and_lane():
    child = SLO_MISSES.labels("text", "acme", "hi", "expired")
    before = child._value.get()
    child.inc()
    assert child._value.get() == before + 1
