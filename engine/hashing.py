"""Content hashes of files (model artifacts, bundles)."""

from __future__ import annotations

import hashlib
from pathlib import Path

#: bytes read at a time.
CHUNK_BYTES = 1 << 22


def sha256_file(path: Path | str) -> str:
    """Hex sha256 of a file's bytes, read in 4 MiB chunks. Raises ``OSError`` when it cannot be read."""
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(CHUNK_BYTES), b""):
            h.update(chunk)
    return h.hexdigest()
