"""Labeled text datasets under ``shared/data/text`` and the project's deterministic splits.

Each loader returns a list of :class:`Example` (text, per-category 0/1 labels,
``None`` where the dataset does not annotate that category). Splits:

* **davidson** (Davidson et al. 2017, ``labeled_data.csv``, 24,783 tweets): no
  official split. ``dev`` = rows whose ``sha256(f"{SPLIT_SEED}:{row_id}")`` falls in
  the lowest 20 % (deterministic, order-independent), ``train`` = the rest.
  ``class`` 0 = hate speech, 1 = offensive, 2 = neither → ``hate`` = class 0,
  ``offensive`` = class 0 or 1.
* **olid** (Zampieri et al. 2019, ``olid-training-v1.0.tsv``, 13,240 tweets; the
  OffensEval test files are not here): same hashed 80/20 split by ``id``.
  ``offensive`` = subtask_a OFF; ``targeted_insult`` = subtask_b TIN (0 for NOT
  and for OFF/UNT).
* **hatexplain** (Mathew et al. 2021): the official ``post_id_divisions``
  ``train`` → train, ``val`` → dev (its test split is held back). Label = the
  majority of the three annotators; posts with no majority are dropped.
  ``hate`` = hatespeech; ``offensive`` = hatespeech or offensive. Rationales:
  token ``i`` is evidence if a majority of the annotators who gave rationales
  marked it (posts labelled normal have none).
* **cold** (Deng et al. 2022, Chinese): COLD's own ``train.csv`` / ``dev.csv``;
  ``offensive`` = label 1.
* **hatemoji_build** (HatemojiBuild, Kirk et al. 2022, "Hatemoji: A Test Suite and Adversarially-Generated
  Dataset for Benchmarking and Detecting Emoji-based Hate", NAACL; CC BY 4.0; repository
  ``HannahKirk/Hatemoji`` at commit ``a626f63``; 5,912 English posts in which emoji stand in for
  identities, threats or slurs, with hateful / non-hateful pairs that differ by one emoji): its
  official ``train.csv`` (4,728 rows) → train, ``validation.csv`` (591) → dev, ``test.csv`` (593)
  → test (reported only, never fitted or tuned on). ``hate`` = ``label_gold``. ``offensive`` =
  ``label_gold`` too (hate is offensive, as in Davidson and HateXplain), except on hateful rows
  of ``type`` ``animosity`` (implicit hate in neutral wording: "I won't allow my child to mix with
  them 👩‍❤️‍💋‍👩"), which carry no ``offensive`` label: as offensive positives they pushed neutral
  sentences of the benign list over the line. About a quarter of the non-hateful rows swear at
  no protected group ("fuck off 😡"): offensive, though not hate; training drops their
  ``offensive`` label (:func:`rtaudit.engine.text.train.unlabel_profane_contrasts`).
  ``targeted_insult`` is not annotated.
* **jigsaw_sample** (Jigsaw toxic comments, 101 rows): test only, never trained
  on. ``offensive`` = toxic, ``hate`` = identity_hate, ``targeted_insult`` = insult,
  ``threat`` = threat.
"""

from __future__ import annotations

import csv
import gzip
import hashlib
import json
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

#: seed of the hashed train/dev split (recorded in the artifact manifest).
SPLIT_SEED = 20261129
DEV_FRACTION = 0.2
#: categories the English head predicts, in output order.
CATEGORIES: tuple[str, ...] = ("offensive", "hate", "targeted_insult")
DATASETS = ("davidson", "olid", "hatexplain", "cold", "jigsaw_sample", "hatemoji_build")
#: HatemojiBuild file stem → this project's split name.
HATEMOJI_SPLITS = {"train": "train", "validation": "dev", "test": "test"}


@dataclass(frozen=True)
class Example:
    """One labeled text. ``labels[c]`` is 0/1, or absent when the dataset does not annotate ``c``."""

    text: str
    labels: dict[str, int]
    dataset: str
    split: str  # "train" | "dev" | "test"
    uid: str
    #: HateXplain: per-token rationale flags for ``tokens`` (text = " ".join(tokens)).
    tokens: tuple[str, ...] = ()
    rationale: tuple[int, ...] = field(default=())


def hashed_split(uid: str, seed: int = SPLIT_SEED, dev_fraction: float = DEV_FRACTION) -> str:
    """``"dev"`` for a deterministic ``dev_fraction`` of ids, else ``"train"`` (sha256 of ``seed:uid``)."""
    h = int.from_bytes(hashlib.sha256(f"{seed}:{uid}".encode()).digest()[:8], "big")
    return "dev" if h / 2**64 < dev_fraction else "train"


def data_files(root: Path) -> dict[str, list[Path]]:
    """The files each dataset is read from (for the manifest's sha256 record)."""
    t = Path(root) / "text"
    return {
        "davidson": [t / "davidson/labeled_data.csv"],
        "olid": [t / "olid/olid-training-v1.0.tsv"],
        "hatexplain": [t / "hatexplain/hatexplain_train_val.ndjson.gz", t / "hatexplain/post_id_divisions_train_val.json"],
        "cold": [t / "cold/train.csv", t / "cold/dev.csv"],
        "jigsaw_sample": [t / "jigsaw_sample/examples.csv"],
        "hatemoji_build": [t / f"hatemoji_build/{stem}.csv" for stem in HATEMOJI_SPLITS],
    }


def load_davidson(root: Path) -> list[Example]:
    out = []
    with open(data_files(root)["davidson"][0], newline="", encoding="utf-8") as f:
        for row in csv.DictReader(f):
            cls = int(row["class"])
            uid = row[""]
            out.append(Example(row["tweet"], {"offensive": int(cls in (0, 1)), "hate": int(cls == 0)}, "davidson", hashed_split(uid), uid))
    return out


def load_olid(root: Path) -> list[Example]:
    out = []
    with open(data_files(root)["olid"][0], newline="", encoding="utf-8") as f:
        for row in csv.DictReader(f, delimiter="\t", quoting=csv.QUOTE_NONE):
            off = int(row["subtask_a"] == "OFF")
            tin = int(row["subtask_b"] == "TIN")
            out.append(Example(row["tweet"], {"offensive": off, "targeted_insult": tin}, "olid", hashed_split(row["id"]), row["id"]))
    return out


def _rationale(rows: list[list[int]], n: int) -> tuple[int, ...]:
    rows = [r for r in rows if len(r) == n]
    if not rows:
        return ()
    return tuple(int(sum(col) * 2 > len(rows)) for col in zip(*rows))


def load_hatexplain(root: Path) -> list[Example]:
    posts_f, div_f = data_files(root)["hatexplain"]
    divisions = json.loads(div_f.read_text())
    split_of = {pid: ("train" if k == "train" else "dev") for k, ids in divisions.items() for pid in ids}
    out = []
    with gzip.open(posts_f, "rt", encoding="utf-8") as f:
        for line in f:
            r = json.loads(line)
            split = split_of.get(r["post_id"])
            if split is None:
                continue
            label, votes = Counter(a["label"] for a in r["annotators"]).most_common(1)[0]
            if votes * 2 <= len(r["annotators"]):
                continue  # no majority label
            tokens = tuple(r["post_tokens"])
            labels = {"hate": int(label == "hatespeech"), "offensive": int(label in ("hatespeech", "offensive"))}
            out.append(Example(" ".join(tokens), labels, "hatexplain", split, r["post_id"], tokens, _rationale(r["rationales"], len(tokens))))
    return out


def load_cold(root: Path) -> list[Example]:
    out = []
    for path in data_files(root)["cold"]:
        with open(path, newline="", encoding="utf-8-sig") as f:
            for row in csv.DictReader(f):
                split = "train" if path.stem == "train" else "dev"
                out.append(Example(row["TEXT"], {"offensive": int(row["label"])}, "cold", split, f"{split}:{row['']}"))
    return out


def load_jigsaw(root: Path) -> list[Example]:
    out = []
    with open(data_files(root)["jigsaw_sample"][0], newline="", encoding="utf-8") as f:
        for i, row in enumerate(csv.DictReader(f)):
            labels = {"offensive": int(row["toxic"]), "hate": int(row["identity_hate"]),
                      "targeted_insult": int(row["insult"]), "threat": int(row["threat"])}
            out.append(Example(row["comment_text"], labels, "jigsaw_sample", "test", str(i)))
    return out


def load_hatemoji(root: Path) -> list[Example]:
    out = []
    for path in data_files(root)["hatemoji_build"]:
        split = HATEMOJI_SPLITS[path.stem]
        with open(path, newline="", encoding="utf-8") as f:
            for row in csv.DictReader(f):
                hate = int(row["label_gold"])
                labels = {"hate": hate} if hate and row["type"] == "animosity" else {"hate": hate, "offensive": hate}
                out.append(Example(row["text"], labels, "hatemoji_build", split, row["entry_id"]))
    return out


LOADERS = {"davidson": load_davidson, "olid": load_olid, "hatexplain": load_hatexplain, "cold": load_cold, "jigsaw_sample": load_jigsaw,
           "hatemoji_build": load_hatemoji}


def load(dataset: str, root: Path, split: str | None = None) -> list[Example]:
    """Examples of ``dataset`` (one of :data:`DATASETS`), optionally only one split.

    Raises:
        KeyError: unknown dataset. FileNotFoundError: its files are missing under ``root``.
    """
    rows = LOADERS[dataset](Path(root))
    return [r for r in rows if split is None or r.split == split]
