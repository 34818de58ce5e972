"""The worker runtime every role runs on.

A role's process is a Faust app (``faust -A rtaudit.workers.<role> worker``). **Faust** is the
process shell only: it parses the command line, sets up logging, handles signals (SIGTERM →
graceful stop), runs the app's tasks (the metrics server, the role's runtime) and crashes the
process when the runtime reports a failure (``App.crash``); its own consumer joins a group
named ``<group>-runtime`` with no agents and reads nothing. **The runtime** does all the Kafka
work, on confluent-kafka:

* :mod:`~rtaudit.workers.runtime.intake` — the consumer, owned by one thread: fetch in batches,
  the offset-gap guard, the consume-error filter, pause/resume, commits;
* :mod:`~rtaudit.workers.runtime.emitter` — the producer: the one ``BufferError`` back-pressure
  loop, DLQ records, delivery tracking (whole process or per batch), the recovering producer;
* :mod:`~rtaudit.workers.runtime.handler` — what a role is: a :class:`Handler` takes a batch
  of records and returns what to produce, knows nothing of Kafka;
* :mod:`~rtaudit.workers.runtime.loop` — the batch loop (router, fusion, explain): one thread
  running intake → handler → emitter, checkpointing (flush, then commit);
* :mod:`~rtaudit.workers.runtime.lane_intake`, :mod:`~rtaudit.workers.runtime.lane_overflow`,
  :mod:`~rtaudit.workers.runtime.acks` — a modality worker's two-lane intake (lag, lane pauses,
  holds beside a full lane) and its in-order acks per assignment generation;
  :mod:`rtaudit.workers.modality` is the modality worker itself;
* :mod:`~rtaudit.workers.runtime.driver` — runs any handler over a list of records without a
  broker (unit tests, replays).
"""
