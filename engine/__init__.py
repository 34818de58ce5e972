"""The inference core: no Kafka, no Faust.

Model stages (:mod:`rtaudit.engine.models`), media loading and decoding
(:mod:`rtaudit.engine.media`), request routing (:mod:`rtaudit.engine.routing`), micro-batch
processing (:mod:`rtaudit.engine.stage`), tenant policy (:mod:`rtaudit.engine.policy`) and
fusion of partial scores into verdicts (:mod:`rtaudit.engine.fusion`). Everything here is
unit-tested without a broker; ``workers/`` only moves records in and out.
"""
