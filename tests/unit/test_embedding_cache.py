"""The embedding memo of the encoders (training and evaluation): each id list is encoded once, rows come back
in order, and the table survives a save and a reload."""

from __future__ import annotations

import numpy as np

from rtaudit.engine.text.encoder import EmbeddingCache


def fake_encoder(calls: list[list[list[int]]]):
    def run(ids: list[list[int]]) -> np.ndarray:
        calls.append(ids)
        return np.array([[float(sum(i)), float(len(i))] for i in ids], dtype=np.float32)
    return run


def test_each_id_list_is_encoded_once_and_rows_keep_their_order(tmp_path):
    memo, calls = EmbeddingCache(tmp_path / "memo.npz"), []
    run = fake_encoder(calls)
    first = memo.embed([[1, 2], [3], [1, 2]], run)
    assert calls == [[[1, 2], [3]]]  # the repeated list is encoded once
    np.testing.assert_array_equal(first, [[3, 2], [3, 1], [3, 2]])
    second = memo.embed([[3], [4, 4], [1, 2]], run)
    assert calls[1:] == [[[4, 4]]]  # only what the table lacked
    np.testing.assert_array_equal(second, [[3, 1], [8, 2], [3, 2]])


def test_the_table_survives_a_save_and_a_reload(tmp_path):
    path = tmp_path / "memo.npz"
    memo = EmbeddingCache(path)
    memo.embed([[5, 6], [7]], fake_encoder([]))
    memo.save()
    calls: list[list[list[int]]] = []
    again = EmbeddingCache(path).embed([[7], [5, 6]], fake_encoder(calls))
    assert calls == []
    np.testing.assert_array_equal(again, [[7, 1], [11, 2]])
