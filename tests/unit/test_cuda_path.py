"""The CUDA path on a host without a GPU: only onnxruntime's provider list is mocked.

What runs for real: sessions on the CPU build (asked for CUDA, they must fall back with one warning
line and never raise), the fp16 encoder graph, the profile that proves node placement, and the
settings that place stages and size GPU batches.
"""

from __future__ import annotations

import logging

import numpy as np
import onnxruntime as ort
import pytest

from rtaudit.engine.models import onnx as O
from rtaudit.workers.gpu_settings import GpuSettings
from rtaudit.workers.settings import Settings

BOTH = ["CUDAExecutionProvider", "CPUExecutionProvider"]


@pytest.fixture
def cuda_build(monkeypatch: pytest.MonkeyPatch) -> None:
    """An onnxruntime-gpu build on a host whose CUDA runtime does not work: the build lists CUDA."""
    monkeypatch.setattr(ort, "get_available_providers", lambda: list(BOTH))
    monkeypatch.setattr(O, "_fallback_warned", False)


@pytest.fixture(scope="module")
def tiny_model(tmp_path_factory: pytest.TempPathFactory) -> str:
    """A real two-node ONNX graph (MatMul + Relu), ``float32[N, 4] -> float32[N, 3]``."""
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    w = numpy_helper.from_array(np.arange(12, dtype=np.float32).reshape(4, 3) / 10, name="w")
    graph = helper.make_graph(
        [helper.make_node("MatMul", ["x", "w"], ["h"]), helper.make_node("Relu", ["h"], ["y"])], "tiny",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 4])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["N", 3])], initializer=[w])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    path = tmp_path_factory.mktemp("onnx") / "tiny.onnx"
    onnx.save(model, str(path))
    return str(path)


def test_providers_follow_the_build_and_the_preference(cuda_build: None) -> None:
    assert O.providers(True) == BOTH
    assert O.providers(False) == ["CPUExecutionProvider"]
    listed = O.provider_list(True, O.CudaOptions(device_id=1, gpu_mem_limit_bytes=2 << 30, cudnn_conv_algo_search="EXHAUSTIVE"))
    name, opts = listed[0]
    assert name == "CUDAExecutionProvider" and listed[1] == "CPUExecutionProvider"
    assert opts == {"device_id": "1", "arena_extend_strategy": "kSameAsRequested", "cudnn_conv_algo_search": "EXHAUSTIVE",
                    "do_copy_in_default_stream": "1", "use_tf32": "0", "gpu_mem_limit": str(2 << 30)}


def test_cpu_build_never_asks_for_cuda(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(ort, "get_available_providers", lambda: ["CPUExecutionProvider"])
    assert O.provider_list(True) == ["CPUExecutionProvider"]


def test_unusable_cuda_falls_back_to_cpu_with_one_warning(cuda_build: None, tiny_model: str,
                                                          caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.WARNING, logger=O.__name__)
    first = O.session(tiny_model, prefer_gpu=True)
    second = O.session(tiny_model, prefer_gpu=True)
    for sess in (first, second):
        assert not O.on_cuda(sess)
        out = sess.run(None, {"x": np.ones((2, 4), np.float32)})[0]
        np.testing.assert_allclose(out, np.ones((2, 4), np.float32) @ (np.arange(12, dtype=np.float32).reshape(4, 3) / 10), rtol=1e-6)
    warnings = [r for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) == 1 and "CUDA asked for but not usable" in warnings[0].getMessage()


def test_a_session_that_raises_with_cuda_is_made_on_cpu(cuda_build: None, tiny_model: str,
                                                        monkeypatch: pytest.MonkeyPatch,
                                                        caplog: pytest.LogCaptureFixture) -> None:
    real = ort.InferenceSession

    def broken_cuda(path: str, sess_options: ort.SessionOptions | None = None, providers: list | None = None) -> ort.InferenceSession:
        if any(isinstance(p, tuple) and p[0] == "CUDAExecutionProvider" for p in providers or []):
            raise RuntimeError("libcudnn.so.9: cannot open shared object file")
        return real(path, sess_options=sess_options, providers=providers)

    monkeypatch.setattr(ort, "InferenceSession", broken_cuda)
    caplog.set_level(logging.WARNING, logger=O.__name__)
    sess = O.session(tiny_model, prefer_gpu=True)
    assert sess.get_providers() == ["CPUExecutionProvider"]
    assert "libcudnn.so.9" in caplog.text


def test_a_missing_model_file_still_raises(cuda_build: None, tmp_path) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(Exception, match="no_such"):
        O.session(str(tmp_path / "no_such.onnx"), prefer_gpu=False)


def test_node_placement_reads_a_real_profile(tiny_model: str, tmp_path) -> None:  # type: ignore[no-untyped-def]
    sess = O.session(tiny_model, prefer_gpu=False, profile_prefix=str(tmp_path / "prof"))
    sess.run(None, {"x": np.ones((3, 4), np.float32)})
    placement = O.node_placement(sess.end_profiling())
    assert set(placement) == {"CPUExecutionProvider"} and placement["CPUExecutionProvider"] >= 2


def test_stage_placement_and_gpu_batch_limits(cuda_build: None) -> None:
    s = Settings(gpu=GpuSettings(stage_devices={"text": "cuda", "image": "cuda", "ocr": "cpu"},
                                 max_batch={"text": 128, "image": 32}))
    assert s.gpu_for("text") and s.gpu_for("image") and not s.gpu_for("ocr") and not s.gpu_for("audio")
    assert s.batcher_config("text").max_size == 128
    assert s.batcher_config("image").max_size == 32
    assert s.batcher_config("ocr").max_size == s.batch.config("ocr").max_size
    # lag thresholds scale with the GPU batch size like the profile's
    assert s.batcher_config("text").lag_high > s.batch.config("text").lag_high
    off = Settings(prefer_gpu=False, gpu=GpuSettings(stage_devices={"text": "cuda"}))
    assert not off.gpu_for("text") and off.batcher_config("text") == off.batch.config("text")


def test_cpu_build_keeps_cpu_batches(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(ort, "get_available_providers", lambda: ["CPUExecutionProvider"])
    s = Settings()
    assert s.gpu_for("image")  # asked for by the default placement ...
    assert s.batcher_config("image") == s.batch.config("image")  # ... but the build has no CUDA


def test_gpu_settings_refuse_bad_values() -> None:
    with pytest.raises(ValueError, match="max_batch"):
        GpuSettings(max_batch={"text": 0})
    with pytest.raises(ValueError):
        GpuSettings(stage_devices={"text": "tpu"})  # type: ignore[dict-item]
    assert GpuSettings(mem_limit_mib=512).cuda_options().gpu_mem_limit_bytes == 512 << 20


def test_auto_precision_follows_the_session_not_the_build(cuda_build: None) -> None:
    """A CUDA build on a host without CUDA: ``auto`` would pick the GPU graph, the session lands on CPU,
    and the encoder serves the CPU's graph (int8) rather than the GPU's on CPU."""
    from rtaudit.engine.text import encoder as E

    enc = E.MiniLMEncoder(prefer_gpu=True, precision="auto", intra_op_threads=1)
    assert not O.on_cuda(enc.session)
    assert enc.precision == E.CPU_DEFAULT and f"-{E.CPU_DEFAULT}-" in enc.version


def test_fp16_encoder_is_close_to_fp32() -> None:
    from rtaudit.engine.text import encoder as E

    texts = ["you are a wonderful person", "I will find you and hurt you", "go back to where you came from",
             "the weather in Lisbon is mild in winter", "what a stupid idiot, honestly"]
    fp32 = E.MiniLMEncoder(prefer_gpu=False, precision="fp32", intra_op_threads=1).encode(texts)
    enc16 = E.MiniLMEncoder(prefer_gpu=False, precision="fp16", intra_op_threads=1)
    fp16 = enc16.encode(texts)
    assert fp16.dtype == np.float32 and fp16.shape == (5, E.DIM)
    assert float((fp32 * fp16).sum(1).min()) > 0.999
    assert "-fp16-" in enc16.version and enc16.rows_per_run == enc16.batch_size
