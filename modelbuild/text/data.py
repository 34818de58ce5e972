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
  ``offensive`` label (:func:`rtaudit.modelbuild.text.training_data.unlabel_profane_contrasts`).
  ``targeted_insult`` is not annotated.
  ``violence`` = ``label_gold`` 1 and ``type`` ``threateninglanguage`` (threats against a group
  written with emoji); ``self-harm`` = 0.
* **jigsaw_sample** (Jigsaw toxic comments, 101 rows): test only, never trained
  on. ``offensive`` = toxic, ``hate`` = identity_hate, ``targeted_insult`` = insult,
  ``violence`` = threat.

The threat and self-harm sets are not in ``shared/data``: they are read from the *safety data*
directory (:func:`safety_data_dir`: ``$RTAUDIT_SAFETY_DATA``, default ``~/.cache/rtaudit/data``),
which holds byte-for-byte copies of files of public repositories (docs/text-moderation.md says
which, at which commit, under which licence):

* **threatgram101** (ThreatGram 101, Telegram replies to political channels with a threat level,
  CC BY 4.0; ``threatgram101/Labeled_15076.json`` from ``CatGamer7/Telegram-threats`` at
  ``52746d5``): ``Label`` 2 (extreme: calls for or wishes of killing, hanging, execution, violent
  attack) → ``violence`` 1; 0 (no threat) and 1 (non-violent: arrest, impeach, prosecute) → 0.
  ``self-harm`` = 0.
* **suicide_detection** (the first 9,083 rows of the Kaggle "Suicide and Depression Detection"
  posts, r/SuicideWatch → ``suicide``, r/teenagers → ``non-suicide``; ``suicide_detection/
  Suicide_Detection.xlsx`` from ``rjarman/googletranslate`` at ``5d3472b``): ``self-harm`` =
  ``suicide``; ``violence`` = 0. Posts are cut to their first :data:`SAFETY_WORDS` words (about
  one encoder window: the title and the opening, where the post says what it is about).

* **epie** (EPIE, Saxena & Soma 2020: 25,027 sentences of the British National Corpus holding one of
  717 English idioms, literal or figurative: "dead to the world", "kill two birds with one stone",
  "shoot the breeze"; ``epie/Static_Idioms_Words.txt`` and ``epie/Formal_Idioms_Words.txt`` from
  ``prateeksaxena2809/EPIE_Corpus`` at ``cb6007e``): ordinary prose, and violent words in their
  everyday senses; ``violence`` = ``self-harm`` = 0 (negatives only; unannotated for either).

* **chitchat** (the BYU PCC Chit-Chat Challenge corpus, 2018: 7,168 open-domain conversations between
  people, 258,145 messages; MIT; ``chitchat/dataset.json`` from the PyPI wheel ``chitchat_dataset`` 0.9.0,
  repository ``BYU-PCCL/chitchat-dataset`` at ``ff8b113``, whose git tree lacks the file): ordinary
  conversational messages ("haha yes, are you?", "lol that's hilarious", "Thank you, I appreciate that");
  every category 0 (negatives only, unannotated: 176 of the distinct messages use a swear word or an
  insult, nearly all "stupid" about a thing). One example per distinct message with at least one letter.

None has an official split: :func:`hashed_split3` puts each distinct text (lower-cased,
whitespace-collapsed: duplicates land together) in ``train`` (65 %), ``dev`` (15 %: thresholds)
or ``test`` (20 %: the held-out split, reported only). A text that occurs with both labels is dropped.
"""

from __future__ import annotations

import csv
import gzip
import hashlib
import io
import json
import re
import xml.etree.ElementTree as ET
import zipfile
from collections import Counter
from dataclasses import dataclass, field, replace
from pathlib import Path

#: seed of the hashed train/dev split (recorded in the artifact manifest).
SPLIT_SEED = 20261129
DEV_FRACTION = 0.2
#: categories the English head predicts, in output order.
CATEGORIES: tuple[str, ...] = ("offensive", "hate", "targeted_insult", "violence", "self-harm")
#: the categories added for threats and self-harm (issue 12 item 3), trained on the safety data.
SAFETY_CATEGORIES: tuple[str, ...] = ("violence", "self-harm")
DATASETS = ("davidson", "olid", "hatexplain", "cold", "jigsaw_sample", "hatemoji_build")
#: datasets read from :func:`safety_data_dir` instead of ``shared/data``.
SAFETY_DATASETS = ("threatgram101", "suicide_detection", "epie", "chitchat", "dynahate", "toxigen")
#: ToxiGen's demonstration files (``prompts/<kind>_<group>_1k.txt``): 16 target groups with implicit-hate
#: statements, 15 with neutral ones (the repository has no ``neutral_trans``).
TOXIGEN_GROUPS = ("asian", "bisexual", "black", "chinese", "immigrant", "jewish", "latino", "lgbtq", "mental_disability",
                  "mexican", "middle_east", "muslim", "native_american", "physical_disability", "trans", "women")
TOXIGEN_FILES = tuple(f"{kind}_{g}_1k.txt" for kind in ("hate", "neutral") for g in TOXIGEN_GROUPS
                      if (kind, g) != ("neutral", "trans"))
#: DynaHate's files (official train and test, texts and labels): :func:`load_dynahate`.
DYNAHATE_FILES = ("Train.csv", "Train_label.csv", "Test.csv", "Test_label.csv")
#: share of DynaHate's official train file kept as ``dev`` (checkpoint, C and thresholds), by hash of the text.
DYNAHATE_DEV = 0.15
#: a suicide_detection post is cut to its first this many words.
SAFETY_WORDS = 40
#: shares of the three-way hashed split of the safety sets (the rest is train).
SAFETY_DEV, SAFETY_TEST = 0.15, 0.20
#: the environment variable of the ``safety_data`` setting (read by :mod:`rtaudit.workers.settings`, named in messages).
SAFETY_ENV = "RTAUDIT_SAFETY_DATA"
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
    #: the ``uid`` of this row's contrast twin in the same dataset: the same statement minimally edited to flip its
    #: label, as the dataset's authors wrote it (HatemojiBuild's ``matched_id``; DynaHate's neighbouring row), ``""``
    #: for none. The twin may sit in another split or have been dropped by the loader;
    #: :func:`rtaudit.modelbuild.text.training_data.contrast_pairs` pairs only twins that are both train rows.
    twin: str = ""


def hashed_split(uid: str, seed: int = SPLIT_SEED, dev_fraction: float = DEV_FRACTION) -> str:
    """``"dev"`` for a deterministic ``dev_fraction`` of ids, else ``"train"`` (sha256 of ``seed:uid``)."""
    h = int.from_bytes(hashlib.sha256(f"{seed}:{uid}".encode()).digest()[:8], "big")
    return "dev" if h / 2**64 < dev_fraction else "train"


def safety_data_dir(root: Path | None = None) -> Path:
    """Root of the threat and self-harm sets: ``root`` (the ``safety_data`` setting, ``$RTAUDIT_SAFETY_DATA``,
    which the CLI passes), else ``~/.cache/rtaudit/data``."""
    return Path(root).expanduser() if root is not None else Path.home() / ".cache" / "rtaudit" / "data"


def text_key(text: str) -> str:
    """What duplicates share: the text lower-cased with runs of whitespace collapsed."""
    return " ".join(text.lower().split())


def hashed_split3(key: str, seed: int = SPLIT_SEED) -> str:
    """``"test"`` for :data:`SAFETY_TEST` of keys, ``"dev"`` for :data:`SAFETY_DEV`, else ``"train"``."""
    h = int.from_bytes(hashlib.sha256(f"{seed}:{key}".encode()).digest()[:8], "big") / 2**64
    return "test" if h < SAFETY_TEST else "dev" if h < SAFETY_TEST + SAFETY_DEV else "train"


def safety_files(root: Path) -> dict[str, list[Path]]:
    """The files each safety set is read from, under the safety data directory ``root``."""
    t = Path(root) / "text"
    return {"threatgram101": [t / "threatgram101/Labeled_15076.json"],
            "suicide_detection": [t / "suicide_detection/Suicide_Detection.xlsx"],
            "epie": [t / "epie/Static_Idioms_Words.txt", t / "epie/Formal_Idioms_Words.txt"],
            "chitchat": [t / "chitchat/dataset.json"],
            "dynahate": [t / "dynahate" / name for name in DYNAHATE_FILES],
            "toxigen": [t / "toxigen" / name for name in TOXIGEN_FILES]}


#: safety-data sets that ``rtaudit eval`` reads and training never fits: training, the held-out tables and the tests
#: run without their files, and only their own evaluation rows are skipped. ToxiGen's statements: three fine-tunes
#: with its train split (2026-12-03) learned implicit hate (functional implicit_derogation 0.21 -> 0.67-0.92, ToxiGen
#: test hate recall 0.10 -> 0.61-0.83) but read sentences naming a group as abuse (identity_positive 0.33-0.42,
#: implicit_contrast 0.33-0.46, benign list up to 3 of 168; docs/text-moderation.md, "Counterfactual pairs").
#: DynaHate: fine-tuned with its train split (2026-12-03, runs D1-D4) the encoder learnt implicit and emoji hate
#: (HatemojiBuild test ``hate`` macro-F1 0.507 -> 0.61, ToxiGen recall 0.19 -> 0.43, its own test F1 0.35 -> 0.65)
#: but read positive and negated statements about groups as hate (identity_positive 0.88 -> 0.50,
#: implicit_contrast 0.88 -> 0.58; docs/text-moderation.md, "DynaHate"): read for evaluation until a run keeps them.
EVALUATION_ONLY_SETS = frozenset({"toxigen", "dynahate"})


def required_safety_files(root: Path) -> list[Path]:
    """The safety files training and the threat/self-harm evaluation need: :func:`safety_files` of every set
    but :data:`EVALUATION_ONLY_SETS`, under ``root``."""
    return [p for name, ps in safety_files(root).items() if name not in EVALUATION_ONLY_SETS for p in ps]


def _dedup_split(rows: list[tuple[str, int, str]], dataset: str, category: str) -> list[Example]:
    """``(text, label, uid)`` rows → one :class:`Example` per distinct text (first uid), split by
    :func:`hashed_split3` of its key; texts seen with both labels are dropped."""
    first: dict[str, tuple[str, int, str]] = {}
    labels: dict[str, set[int]] = {}
    for text, y, uid in rows:
        k = text_key(text)
        if not k:
            continue
        first.setdefault(k, (text, y, uid))
        labels.setdefault(k, set()).add(y)
    other = [c for c in SAFETY_CATEGORIES if c != category]
    return [Example(text, {category: y, **{c: 0 for c in other}}, dataset, hashed_split3(k), uid)
            for k, (text, y, uid) in first.items() if len(labels[k]) == 1]


def load_threatgram(root: Path) -> list[Example]:
    rows = json.loads(safety_files(root)["threatgram101"][0].read_text(encoding="utf-8"))
    return _dedup_split([(r["reply"], int(r["Label"] == 2), str(i)) for i, r in enumerate(rows)], "threatgram101", "violence")


_DETOK = re.compile(r" ([,.;:!?%)\]}’”]|'s|n't|'re|'ll|'ve|'d|'m)|([(\[{‘“]) ")


def detokenize(line: str) -> str:
    """A space-tokenized sentence (``it 's dead , he said .``) read back as prose (``it's dead, he said.``)."""
    return _DETOK.sub(lambda m: m.group(1) or m.group(2), " ".join(line.split()))


def load_epie(root: Path) -> list[Example]:
    rows = [(detokenize(line), 0, f"{path.stem}:{i}") for path in safety_files(root)["epie"]
            for i, line in enumerate(path.read_text(encoding="utf-8").splitlines()) if line.strip()]
    return _dedup_split(rows, "epie", "violence")


_LETTER = re.compile(r"[^\W\d_]")


def load_chitchat(root: Path) -> list[Example]:
    """Every distinct message (with a letter) of the Chit-Chat corpus, labelled 0 for every category, split
    by hash of the text (train 65 % / dev 15 % / test 20 %, like the other safety sets: one text, one split).

    Source: BYU PCC Chit-Chat corpus (MIT; ``provenance.DATA_PROVENANCE["chitchat"]``), ``dataset.json``
    ``{conversation id: {"messages": [[{"text": str, ...}, ...] per turn]}}`` under ``root``.

    Raises:
        FileNotFoundError: the Chit-Chat file is not under ``root``."""
    convos = json.loads(safety_files(root)["chitchat"][0].read_text(encoding="utf-8"))
    rows = [(m["text"], 0, f"{cid}:{t}:{j}") for cid, c in convos.items()
            for t, turn in enumerate(c["messages"]) for j, m in enumerate(turn)
            if isinstance(m.get("text"), str) and _LETTER.search(m["text"])]
    return [replace(e, labels={c: 0 for c in CATEGORIES}) for e in _dedup_split(rows, "chitchat", "violence")]


def load_toxigen(root: Path) -> list[Example]:
    """ToxiGen's human-written demonstration statements about 16 identity groups (Hartvigsen et al. 2022,
    "ToxiGen: A Large-Scale Machine-Generated Dataset for Adversarial and Implicit Hate Speech Detection", ACL;
    ``microsoft/TOXIGEN`` @ ``01517e8``, ``prompts/*_1k.txt``, MIT): each file is 1,000 prompts of six
    ``- statement\\n`` lines drawn from a few dozen statements; every distinct statement is one row, split by
    hash of the text (train 65 % / dev 15 % / test 20 %; a statement in both a hate and a neutral file is dropped).

    Labels: a ``hate_*`` statement (implicit hate: stereotypes, exclusion, no slur) → ``offensive`` 1, ``hate`` 1;
    a ``neutral_*`` statement (facts, history, lived experience of the group) → ``offensive`` 0, ``hate`` 0. The
    other categories are absent (a group, not a person, is the target; a set with one class of
    ``targeted_insult`` would pull its mean-F1-over-datasets threshold). Returns ``list[Example]`` (dataset ``toxigen``).

    Raises:
        FileNotFoundError: a ToxiGen file is not under ``root``."""
    rows = []
    for path in safety_files(root)["toxigen"]:
        hateful = int(path.name.startswith("hate_"))
        for n, line in enumerate(path.read_text(encoding="utf-8").splitlines()):
            for j, part in enumerate(line.split("\\n")):
                text = part.strip().lstrip("-").strip()
                if _LETTER.search(text):
                    rows.append((text, hateful, f"{path.stem}:{n}:{j}"))
    out = []
    for e in _dedup_split(rows, "toxigen", "violence"):
        y = e.labels["violence"]
        out.append(replace(e, labels={"offensive": y, "hate": y}))
    return out


def load_dynahate(root: Path) -> list[Example]:
    """The Dynamically Generated Hate Speech Dataset (DynaHate; Vidgen, Thrush, Waseem & Kiela 2021, "Learning from
    the Worst", ACL): short English statements written by trained annotators to fool a hate classifier over four
    rounds, half of them hateful (derogation, dehumanisation, animosity, threats, support for hateful groups) and the
    rest their contrasts: counter-speech, negation, quoting, identities in neutral or positive statements, profanity
    at no protected group. Read from the copy of its official train and test splits (text and binary label, one
    row a line, tab-separated CSV) in ``ecanbazer/DynBERT`` @ ``494d0d3``, ``data/{Train,Test}{,_label}.csv``
    (:data:`DYNAHATE_FILES`; ``provenance.DATA_PROVENANCE["dynahate"]``).

    Splits: the official test file is ``test`` (reported only); the official train file is split by hash of the
    text (:func:`hashed_split`, :data:`DYNAHATE_DEV` of it ``dev``), after dropping every text also in the test
    file, every repeat and every text seen with both labels.

    Labels: ``hate`` only, 1 for hateful and 0 for not. The other categories are absent: its non-hateful rows hold
    profanity and insults at no protected group ("boris johnson is a cunt"), which is ``offensive`` in this
    taxonomy; labelled ``offensive`` (hateful 1, not hateful 0), a fine-tuned encoder read positive statements
    about groups as ``offensive`` ("We should celebrate Jews." 0.83; docs/text-moderation.md, "DynaHate"); its
    threats are not marked in this copy ("i'm going to kill Amy" is "not hate").
    Twins (``Example.twin``): a row's twin is the row before it in the same file when their labels differ. Rounds 2-4
    pair each original with a perturbation that flips its label, and the files mostly keep the two next to each other:
    of 32,496 neighbouring pairs in the train file, 9,390 have opposite labels and a ``difflib`` ratio ≥ 0.6
    (:func:`rtaudit.modelbuild.text.training_data.contrast_pairs` keeps only the similar ones).
    Returns ``list[Example]`` (dataset ``dynahate``).

    Raises:
        FileNotFoundError: a DynaHate file is not under ``root``.
        ValueError: a text file and its label file differ in length, or a label is not 0/1."""
    texts_train, labels_train, texts_test, labels_test = safety_files(root)["dynahate"]

    def read(texts: Path, labels: Path) -> list[tuple[str, int]]:
        rows = [r[0] if r else "" for r in csv.reader(io.StringIO(texts.read_text(encoding="utf-8"), newline=""), delimiter="\t")]
        ys = labels.read_text(encoding="utf-8").split()
        if len(rows) != len(ys) or not set(ys) <= {"0", "1"}:
            raise ValueError(f"{texts.name}: {len(rows)} texts but {len(ys)} labels (or a label not 0/1) in {labels.name}")
        return [(t, int(y)) for t, y in zip(rows, ys)]

    out: list[Example] = []
    split_rows = {"test": read(texts_test, labels_test), "train": read(texts_train, labels_train)}
    labels: dict[tuple[str, str], set[int]] = {}  # (split, text key) -> the labels it was given
    for split, rows in split_rows.items():
        for text, y in rows:
            labels.setdefault((split, text_key(text)), set()).add(y)
    for split, rows in split_rows.items():
        taken: set[str] = set()
        for i, (text, y) in enumerate(rows):
            key = text_key(text)
            if (not _LETTER.search(text) or key in taken or len(labels[split, key]) > 1
                    or (split == "train" and ("test", key) in labels)):
                continue
            taken.add(key)
            s = split if split == "test" else hashed_split(key, dev_fraction=DYNAHATE_DEV)
            twin = f"{split}:{i - 1}" if i and rows[i - 1][1] != y else ""
            out.append(Example(text, {"hate": y}, "dynahate", s, f"{split}:{i}", twin=twin))
    return out


def xlsx_rows(path: Path) -> list[dict[str, str]]:
    """The first sheet of an ``.xlsx`` as ``{column letter: cell text}`` per row (shared and inline
    strings, numbers as written), read with the standard library (no spreadsheet package)."""
    ns = "{http://schemas.openxmlformats.org/spreadsheetml/2006/main}"
    with zipfile.ZipFile(path) as z:
        shared = [''.join(t.text or "" for t in si.iter(f"{ns}t"))
                  for si in ET.fromstring(z.read("xl/sharedStrings.xml")).findall(f"{ns}si")]
        sheet = ET.fromstring(z.read("xl/worksheets/sheet1.xml"))
    out = []
    for row in sheet.iter(f"{ns}row"):
        cells: dict[str, str] = {}
        for c in row.findall(f"{ns}c"):
            col = re.match(r"[A-Z]+", c.get("r", "")).group()  # type: ignore[union-attr]  # an XLSX cell reference (r attribute) always starts with its column letters
            v, inline = c.find(f"{ns}v"), c.find(f"{ns}is")
            if v is not None and v.text is not None:
                cells[col] = shared[int(v.text)] if c.get("t") == "s" else v.text
            elif inline is not None:
                cells[col] = "".join(t.text or "" for t in inline.iter(f"{ns}t"))
        out.append(cells)
    return out


def load_suicide_detection(root: Path) -> list[Example]:
    rows = xlsx_rows(safety_files(root)["suicide_detection"][0])
    header, body = rows[0], rows[1:]
    text_col = next(k for k, v in header.items() if v == "Text")
    class_col = next(k for k, v in header.items() if v == "Class")
    data = [(" ".join(r[text_col].split()[:SAFETY_WORDS]), int(r[class_col] == "suicide"), r.get("A", str(i)))
            for i, r in enumerate(body) if r.get(text_col) and r.get(class_col) in ("suicide", "non-suicide")]
    return _dedup_split(data, "suicide_detection", "self-harm")


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
                      "targeted_insult": int(row["insult"]), "violence": int(row["threat"])}
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
                labels |= {"violence": int(hate and row["type"] == "threateninglanguage"), "self-harm": 0}
                out.append(Example(row["text"], labels, "hatemoji_build", split, row["entry_id"], twin=row["matched_id"]))
    return out


LOADERS = {"davidson": load_davidson, "olid": load_olid, "hatexplain": load_hatexplain, "cold": load_cold, "jigsaw_sample": load_jigsaw,
           "hatemoji_build": load_hatemoji, "threatgram101": load_threatgram, "suicide_detection": load_suicide_detection,
           "epie": load_epie, "chitchat": load_chitchat, "dynahate": load_dynahate, "toxigen": load_toxigen}


def load(dataset: str, root: Path, split: str | None = None) -> list[Example]:
    """Examples of ``dataset`` (one of :data:`DATASETS`, or of :data:`SAFETY_DATASETS` with ``root`` the
    safety data directory), optionally only one split.

    Raises:
        KeyError: unknown dataset. FileNotFoundError: its files are missing under ``root``.
    """
    rows = LOADERS[dataset](Path(root))
    return [r for r in rows if split is None or r.split == split]
