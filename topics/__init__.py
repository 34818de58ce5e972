"""The topic catalogue (:mod:`topics.catalog`) and the admin code that creates and verifies it."""
