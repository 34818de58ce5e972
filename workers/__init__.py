"""The roles and their Kafka runtime: one Faust app per role (:data:`rtaudit.workers.roles.ROLES`),
the intake, batching loop, acks, producer and offsets under them, their settings, metrics and
control plane, and the producer/consumer client.

Start one role with ``faust -A rtaudit.workers.<role> worker`` (router, text, image, ocr, audio,
video, fusion, explain) or all of them with ``rtaudit up`` (:mod:`rtaudit.tools.fleet`). The
``rtaudit`` command is :mod:`rtaudit.cli`; nothing here imports it. One lazy import reaches the
harnesses: :func:`rtaudit.workers.kafka.start_hint` reads the local fleet's records
(:mod:`rtaudit.tools.fleet.record`) to say where a broker already listens.
"""
