"""Thin Kafka adapters: one Faust app per role, the CLI, the producer/consumer client.

Start one role with ``faust -A rtaudit.workers.<role> worker`` (router, text, image, ocr,
fusion) or all of them with ``rtaudit up``.
"""
