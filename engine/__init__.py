"""The inference core: no Kafka, no Faust.

Model stages (:mod:`engine.models`), media loading and decoding
(:mod:`engine.media`), request routing (:mod:`engine.routing`), micro-batch
processing (:mod:`engine.stage`), tenant policy (:mod:`engine.policy`) and
fusion of partial scores into verdicts (:mod:`engine.fusion`). Everything here is
unit-tested without a broker; ``workers/`` only moves records in and out.
"""
