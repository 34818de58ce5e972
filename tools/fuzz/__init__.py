"""``rtaudit fuzz``: mutated requests through a real fleet, every one answered.

:mod:`rtaudit.tools.fuzz.mutations` generates the cases (pure, seeded, unit-tested);
:mod:`rtaudit.tools.fuzz.harness` runs them through a router + text + fusion fleet on a
private embedded broker and accounts for each: a verdict, a DLQ record with a reason,
or both — never neither — and a verdict whenever a request id is readable.
"""
