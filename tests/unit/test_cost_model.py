"""The batcher's cost model: per-batch duration ``a + b * n`` fitted from observed batches
(:mod:`rtaudit.engine.cost_model`)."""

from __future__ import annotations


import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rtaudit.engine.cost_model import CostModel


def test_cost_fit_recovers_a_and_b():
    m = CostModel(fit_points=64, min_fit_points=4)
    for n in (1, 2, 4, 8, 16, 32):
        m.observe(n, 0.003 * n + 0.020)
    a, b = m.coefficients
    assert a == pytest.approx(0.003) and b == pytest.approx(0.020)
    assert m.predict_s(10) == pytest.approx(0.050)


def test_cost_fit_guards():
    m = CostModel(min_fit_points=4, prior_a_s=0.001, prior_b_s=0.002)
    assert m.coefficients == (0.001, 0.002)  # prior before any point
    m.observe(4, 0.040)
    assert m.coefficients == (0.001, 0.002)  # prior until enough points
    m2 = CostModel(min_fit_points=2)
    m2.observe(4, 0.040)
    m2.observe(4, 0.040)
    assert m2.coefficients == (pytest.approx(0.010), 0.0)  # one size only: proportional
    m3 = CostModel(min_fit_points=2)
    for n, s in ((1, 0.001), (10, 0.050), (20, 0.101)):  # unconstrained b < 0
        m3.observe(n, s)
    a, b = m3.coefficients
    assert a > 0 and b == 0.0
    m4 = CostModel(min_fit_points=2)
    for n, s in ((1, 0.030), (10, 0.020), (20, 0.010)):  # unconstrained a < 0
        m4.observe(n, s)
    assert m4.coefficients == (0.0, pytest.approx(0.020))
    m4.observe(3, float("nan"))
    m4.observe(0, 1.0)
    m4.observe(3, -1.0)
    assert m4.points == 3


@given(
    a=st.floats(0.0, 0.05), b=st.floats(0.0, 0.1),
    ns=st.lists(st.integers(1, 64), min_size=4, max_size=40).filter(lambda ns: len(set(ns)) >= 2),
    seed=st.integers(0, 2**32 - 1),
)
@settings(max_examples=100, deadline=None)
def test_cost_fit_recovers_known_coefficients_under_small_noise(a, b, ns, seed):
    rng = np.random.default_rng(seed)
    m = CostModel(fit_points=64, min_fit_points=4)
    for n in ns:
        m.observe(n, max(0.0, a * n + b + rng.normal(0, 1e-6)))
    fa, fb = m.coefficients
    assert fa >= 0 and fb >= 0
    for n in (1, 8, 64):
        assert m.predict_s(n) == pytest.approx(a * n + b, abs=2e-4)


