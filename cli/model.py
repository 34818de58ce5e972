"""``rtaudit model package|publish|list|verify``: model bundles (:mod:`rtaudit.engine.bundle`) and the model store.

The store is a directory: ``--store``, else ``<state_dir>/models`` of the settings. A bad input
(missing directory, corrupt bundle, bad settings) exits with status 2 and one line on stderr.
"""

from __future__ import annotations

import getpass
import json
import socket
import time
from datetime import datetime, timezone
from pathlib import Path
from typing import Annotated, Any, Optional

import typer
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from rtaudit.cli.common import fail, settings_or_exit

model_app = typer.Typer(help="Package, publish and list model bundles (versioned, content-addressed).",
                        no_args_is_help=True)
console = Console(width=max(140, Console().width))
ConfigOpt = Annotated[Optional[Path], typer.Option("--config", "-c", help="settings file (default: $RTAUDIT_CONFIG or ./rtaudit.toml)")]
StoreOpt = Annotated[Optional[Path], typer.Option("--store", help="model store directory (default: <state_dir>/models)")]


def _store(store: Path | None, config: Path | None):
    from rtaudit.engine.bundle_store import ModelStore

    return ModelStore(store if store is not None else Path(settings_or_exit(config).state_dir) / "models")


def _size(n: int) -> str:
    for unit in ("B", "KiB", "MiB", "GiB"):
        if n < 1024 or unit == "GiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024  # type: ignore[assignment]  # n becomes a float of KiB/MiB for printing
    return str(n)  # pragma: no cover


def _when(ms: int) -> str:
    return datetime.fromtimestamp(ms / 1000, tz=timezone.utc).strftime("%Y-%m-%d %H:%M:%SZ")


def _json_arg(value: str | None, what: str) -> Any:
    """``value`` as JSON, or the JSON in file ``@PATH``; ``None`` stays ``None``."""
    if value is None:
        return None
    try:
        text = Path(value[1:]).read_text() if value.startswith("@") else value
        return json.loads(text)
    except (OSError, ValueError) as exc:
        raise fail(f"{what}: not JSON or an unreadable @file: {exc}") from None


def _golden_file(path: Path) -> tuple[list[Any], list[Any]]:
    """``(inputs to record, given cases)`` from a JSON list whose items are ``{"text": ...}`` /
    ``{"image_b64": ...}`` (expected recorded by running the stage) or ``{"input": {...}, "expected": {...}}``."""
    from pydantic import ValidationError

    from rtaudit.engine.bundle import GoldenCase, GoldenInput

    try:
        items = json.loads(path.read_text())
        if not isinstance(items, list):
            raise ValueError("the golden file must hold a JSON list")
        inputs = [GoldenInput.model_validate(x) for x in items if "input" not in x]
        given = [GoldenCase.model_validate(x) for x in items if "input" in x]
    except (OSError, ValueError, ValidationError, TypeError) as exc:
        raise fail(f"golden file {path}: {str(exc).splitlines()[0]}") from None
    return inputs, given


@model_app.command("package")
def package(
    stage: Annotated[str, typer.Option("--stage", help="text | image | ocr")],
    version: Annotated[str, typer.Option("--version", help="version name, [A-Za-z0-9._+-], e.g. v2")],
    from_dir: Annotated[Optional[Path], typer.Option("--from", help="the files to package: text/ocr: a directory "
                                                     "with manifest.json, en_head.npz, zh_char_lr.npz (default: "
                                                     "engine/text/artifacts); image: one with 320n.onnx (default: nudenet's)")] = None,
    golden: Annotated[Optional[Path], typer.Option("--golden", help="JSON list of golden inputs ({\"text\": ...} or "
                                                   "{\"image_b64\": ...}, expected scores recorded by running the "
                                                   "stage) or cases ({\"input\": ..., \"expected\": ...})")] = None,
    out: Annotated[Optional[Path], typer.Option("--out", help="bundle directory to write (default: bundles/<stage>-<version>)")] = None,
    runtime: Annotated[Optional[str], typer.Option("--runtime", help="text | nudenet | rapidocr | null (default: the "
                                                   "stage's; null = fixed scores, for canary tests and benches)")] = None,
    params: Annotated[Optional[str], typer.Option("--params", help="runtime params as JSON or @FILE, e.g. "
                                                  "'{\"delay_ms\": 500}' or '{\"raise\": true}' for null")] = None,
    no_golden: Annotated[bool, typer.Option("--no-golden", help="record no golden set (the --golden cases only; "
                                            "nothing is loaded): e.g. a null canary that raises")] = False,
    tolerance: Annotated[float, typer.Option(help="largest accepted golden score difference")] = 0.02,
    config: ConfigOpt = None,
) -> None:
    """Build a bundle: the files, their sha256, the runtime, and a golden set whose expected scores come
    from running the stage on built-in inputs (benign and abusive sentences, synthetic and text images)."""
    from rtaudit.engine.bundle import BundleError, bundle_sha256, verify
    from rtaudit.engine.bundle_stage import package_stage

    if stage not in ("text", "image", "ocr"):
        raise fail(f"--stage must be text, image or ocr, not {stage!r}")
    if runtime is not None and runtime not in ("text", "nudenet", "rapidocr", "null"):
        raise fail(f"--runtime must be text, nudenet, rapidocr or null, not {runtime!r}")
    if from_dir is not None and not from_dir.is_dir():
        raise fail(f"--from {from_dir}: not a directory")
    s = settings_or_exit(config)
    inputs, given = _golden_file(golden) if golden is not None else (None, [])
    dest = out or Path("bundles") / f"{stage}-{version}"
    started = time.monotonic()
    try:
        path = package_stage(stage, version, dest, runtime=runtime, from_dir=from_dir, options=s.stage_options(),
                             params=_json_arg(params, "--params"), inputs=inputs, golden=given,
                             record=not no_golden, tolerance=tolerance)
        manifest = verify(path)
    except BundleError as exc:
        raise fail(str(exc)) from None
    console.print(f"packaged {stage} {version} ({manifest.runtime.kind}) in {path}: {len(manifest.files)} files, "
                  f"{len(manifest.golden)} golden cases, {time.monotonic() - started:.1f} s", highlight=False)
    console.print(f"sha256 {bundle_sha256(path)}", highlight=False)


@model_app.command("publish")
def publish(
    bundle: Annotated[Path, typer.Argument(help="the bundle directory (from `rtaudit model package`)")],
    store: StoreOpt = None,
    announce: Annotated[bool, typer.Option("--announce/--no-announce", help="also announce it on audit.control "
                                           "as model:<stage> (needs rtaudit.workers.control.announce_model)")] = False,
    author: Annotated[Optional[str], typer.Option(help="author of the announcement (default: user@host)")] = None,
    config: ConfigOpt = None,
) -> None:
    """Verify the bundle, put it in the store (idempotent) and print its ref."""
    from rtaudit.engine.bundle import BundleError

    if not bundle.is_dir():
        raise fail(f"{bundle}: not a directory")
    st = _store(store, config)
    try:
        ref = st.put(bundle)
    except BundleError as exc:
        raise fail(str(exc)) from None
    console.print_json(ref.model_dump_json())
    if not announce:
        return
    from rtaudit.workers import control

    announce_model = getattr(control, "announce_model", None)
    if announce_model is None:
        raise fail("the bundle is in the store, but announcing is not available yet "
                    "(rtaudit.workers.control.announce_model); publish it with --no-announce")
    try:
        msg = announce_model(settings_or_exit(config), ref, author or f"{getpass.getuser()}@{socket.gethostname()}")
    except (RuntimeError, TimeoutError) as exc:  # ControlConflict is a RuntimeError
        raise fail(f"announcing {ref.stage} {ref.version} failed: {exc}", 1) from None
    console.print(f"announced as {getattr(msg, 'subject', 'model:' + ref.stage)} version {getattr(msg, 'version', '?')}",
                  highlight=False)


@model_app.command("list")
def list_(
    store: StoreOpt = None,
    stage: Annotated[Optional[str], typer.Option("--stage", help="only this stage")] = None,
    config: ConfigOpt = None,
) -> None:
    """The bundles in the store: stage, version, sha256 (12 digits), files, size, created."""
    from rtaudit.engine.bundle import BundleError, read_manifest
    from rtaudit.engine.bundle_store import uri_path

    st = _store(store, config)
    if store is not None and not st.root.is_dir():
        raise fail(f"--store {store}: not a directory")
    table = Table("stage", "version", "sha12", "runtime", "files", "size", "golden", "created (UTC)", title=f"model store {st.root}")
    for ref in st.list(stage):
        try:
            m = read_manifest(uri_path(ref.uri))
        except BundleError as exc:  # changed since it was listed
            table.add_row(ref.stage, ref.version, ref.sha256[:12], "?", "?", "?", "?", escape(str(exc)))
            continue
        table.add_row(ref.stage, ref.version, ref.sha256[:12], m.runtime.kind, str(len(m.files)),
                      _size(sum(f.bytes for f in m.files.values())), str(len(m.golden)), _when(m.created_at_ms))
    console.print(table)


@model_app.command("verify")
def verify_(
    bundle: Annotated[Path, typer.Argument(help="a bundle directory")],
    load: Annotated[bool, typer.Option("--load", help="also load it, check the golden set and warm it up")] = False,
    config: ConfigOpt = None,
) -> None:
    """Check every sha256 of a bundle (exit 2 when one fails); with --load, what a worker does before serving it."""
    from rtaudit.engine.bundle import BundleError, bundle_sha256, check_runtime, verify
    from rtaudit.engine.bundle_stage import ready_stage

    try:
        m = verify(bundle)
        check_runtime(m)
        console.print(f"{m.stage} {m.version} ({m.runtime.kind}): {len(m.files)} files verified, "
                      f"sha256 {bundle_sha256(bundle)}", highlight=False)
        if load:
            r = ready_stage(bundle, settings_or_exit(config).stage_options())
            warm = ", ".join(f"{n}: {ms:.0f} ms" for n, ms in r.warm_ms.items())
            console.print(f"loaded in {r.load_ms:.0f} ms; golden {r.golden} cases ok in {r.golden_ms:.0f} ms; "
                          f"warm-up per batch size {warm}", highlight=False)
    except BundleError as exc:
        raise fail(str(exc)) from None
