"""The topic catalogue (:mod:`rtaudit.topics.catalog`) and the admin code that creates and verifies it."""
