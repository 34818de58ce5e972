"""The model store: bundles (:mod:`rtaudit.engine.bundle`) under ``root/<stage>/<version>-<sha12>/``, written once.

A directory on a local disk or a mounted volume; a remote store (object storage) would offer the
same methods. Re-exported by :mod:`rtaudit.engine.bundle` (``ModelStore``, ``dir_name``, ``uri_path``).
"""

from __future__ import annotations

import builtins
import errno
import fcntl
import logging
import shutil
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from urllib.parse import unquote, urlparse

from rtaudit.engine.bundle import (
    MANIFEST_NAME,
    RUNTIMES_OF_STAGE,
    BundleConflict,
    BundleCorrupt,
    BundleError,
    BundleManifest,
    BundleNotFound,
    bundle_sha256,
    read_manifest,
    verify,
)
from rtaudit.schemas.control import BundleRef

log = logging.getLogger(__name__)


def dir_name(version: str, sha256: str) -> str:
    """A store entry's directory name: ``<version>-<sha12>``."""
    return f"{version}-{sha256[:12]}"


def uri_path(uri: str) -> Path:
    """The path of a ``file://`` URI. Raises :class:`BundleNotFound` for any other scheme or a host."""
    parsed = urlparse(uri)
    if parsed.scheme != "file" or parsed.netloc not in ("", "localhost"):
        raise BundleNotFound(f"not a local file:// URI: {uri!r} (only file:// stores exist so far)")
    return Path(unquote(parsed.path))


class ModelStore:
    """Bundles under ``root/<stage>/<version>-<sha12>/``, written once (a directory on a local disk or a
    mounted volume; a remote store would offer the same methods). Writers serialise on a lock file per stage."""

    def __init__(self, root: Path | str) -> None:
        self.root = Path(root).expanduser().absolute()

    def _ref(self, path: Path, manifest: BundleManifest, sha: str) -> BundleRef:
        return BundleRef(stage=manifest.stage, version=manifest.version, sha256=sha, uri=path.as_uri())

    @contextmanager
    def _locked(self, stage: str) -> Iterator[Path]:
        d = self.root / stage
        d.mkdir(parents=True, exist_ok=True)
        with open(d / ".lock", "a") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            try:
                yield d
            finally:
                fcntl.flock(lock, fcntl.LOCK_UN)

    def put(self, bundle_dir: Path | str) -> BundleRef:
        """Verify ``bundle_dir`` and copy it into the store; its :class:`BundleRef`.

        Idempotent: putting the same bundle again returns the same ref.
        Raises:
            BundleCorrupt / BundleNotFound: as :func:`verify`.
            BundleConflict: the store holds another bundle with this stage and version.
        """
        src = Path(bundle_dir)
        manifest = verify(src)
        sha = bundle_sha256(src)
        with self._locked(manifest.stage) as stage_dir:
            dest = stage_dir / dir_name(manifest.version, sha)
            for ref in self.list(manifest.stage):
                if ref.version == manifest.version and ref.sha256 != sha:
                    raise BundleConflict(f"the store already holds {manifest.stage} {manifest.version} with sha256 "
                                         f"{ref.sha256[:12]} ({uri_path(ref.uri)}); this bundle is {sha[:12]}: "
                                         "give it another version")
            if dest.exists():
                verify(dest, sha)
                return self._ref(dest, manifest, sha)
            tmp = Path(tempfile.mkdtemp(prefix=f".{dest.name}.", dir=stage_dir))
            try:
                for name in [MANIFEST_NAME, *manifest.files]:
                    (tmp / name).parent.mkdir(parents=True, exist_ok=True)
                    shutil.copyfile(src / name, tmp / name)
                verify(tmp, sha)
                try:
                    tmp.rename(dest)
                except OSError as exc:  # written meanwhile by a writer without the lock (another host)
                    if exc.errno not in (errno.ENOTEMPTY, errno.EEXIST):
                        raise
                    verify(dest, sha)
            finally:
                shutil.rmtree(tmp, ignore_errors=True)
            return self._ref(dest, manifest, sha)

    def resolve(self, uri: str) -> Path:
        """The directory of a ``file://`` URI (:class:`BundleNotFound` if it has no ``bundle.json``)."""
        path = uri_path(uri)
        if not (path / MANIFEST_NAME).is_file():
            raise BundleNotFound(f"no bundle at {uri}")
        return path

    def get(self, ref: BundleRef) -> Path:
        """The directory of ``ref``: its URI, else this store's ``<stage>/<version>-<sha12>`` (a volume mounted
        elsewhere). Checks the ``bundle.json`` sha256 only; :func:`verify` (or ``load_stage``) checks the files.

        Raises:
            BundleNotFound: neither place has it. BundleCorrupt: its ``bundle.json`` has another sha256.
        """
        candidates = []
        try:
            candidates.append(uri_path(ref.uri))
        except BundleNotFound:
            pass
        candidates.append(self.root / ref.stage / dir_name(ref.version, ref.sha256))
        for path in candidates:
            if (path / MANIFEST_NAME).is_file():
                got = bundle_sha256(path)
                if got != ref.sha256:
                    raise BundleCorrupt(f"bundle {path}: sha256 of {MANIFEST_NAME} is {got}, expected {ref.sha256}")
                return path
        raise BundleNotFound(f"bundle {ref.stage} {ref.version} ({ref.sha256[:12]}) is not at {ref.uri} "
                             f"nor in the store {self.root}")

    def list(self, stage: str | None = None) -> builtins.list[BundleRef]:
        """Refs of the bundles in the store (of ``stage``, or all), by stage then creation time.
        An entry whose ``bundle.json`` cannot be read is skipped with a warning."""
        found: list[tuple[str, int, BundleRef]] = []
        stages = [stage] if stage else sorted(RUNTIMES_OF_STAGE)
        for s in stages:
            d = self.root / s
            if not d.is_dir():
                continue
            for entry in sorted(d.iterdir()):
                if entry.name.startswith(".") or not entry.is_dir():
                    continue
                try:
                    manifest = read_manifest(entry)
                    found.append((s, manifest.created_at_ms, self._ref(entry, manifest, bundle_sha256(entry))))
                except BundleError as exc:
                    log.warning("skipping %s in the model store: %s", entry, exc)
        return [ref for _, _, ref in sorted(found, key=lambda t: (t[0], t[1], t[2].version))]
