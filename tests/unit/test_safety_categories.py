"""Threat and self-harm categories (issue 12 item 3): ``violence`` and ``self-harm`` in the English head,
the policy and the verdicts; the issue's sentences flagged, benign controls not; their data and splits."""

from __future__ import annotations

import tomllib
from pathlib import Path

import pytest

from rtaudit.engine.policy import DEFAULT_THRESHOLDS, PolicyBook, TenantPolicy
from rtaudit.modelbuild.text import data as D
from rtaudit.engine.text.encoder import resolve_precision
from rtaudit.engine.text.heads import EN_HEAD, EnglishHead, load_manifest
from tests.unit.builders import write_dynahate

REPO = Path(__file__).resolve().parents[2]
#: issue 12's sentences and the category that must flag each (the review threshold of the default policy). "kys" is
#: near the line: self-harm 0.60 in this batch with artifacts 2026-12-03-4b441c1b, 0.50 alone (the int8 graph's
#: activation scales were per batch); 0.53 with 2026-12-03-97926eb7 in any batch (one text per int8 run); 0.15 with
#: 2026-12-03-f8525f07, which read it as violence.
FLAGGED = [("I will kill you", "violence"), ("I'll shoot you tomorrow", "violence"), ("kys", "self-harm"),
           ("I want to end my life", "self-harm")]
#: the same words in their everyday senses: no safety category may flag them.
CONTROLS = ["I will kill it at the gym tomorrow", "this song kills", "I could die laughing", "shoot me an email"]


def test_the_head_the_manifest_and_the_policy_know_the_new_categories():
    head = EnglishHead.load()
    assert {"violence", "self-harm"} <= set(head.categories)
    assert tuple(head.categories) == D.CATEGORIES
    entry = load_manifest()["artifacts"][EN_HEAD]
    assert {"violence", "self-harm"} <= set(entry["categories"])
    for cat in D.SAFETY_CATEGORIES:
        assert entry["report"][cat]["train_rows"] > 1000 and entry["report"][cat]["dev_rows"] > 500
        assert DEFAULT_THRESHOLDS[cat].review == 0.5
    assert DEFAULT_THRESHOLDS["self-harm"].block > 1.0  # review, never block
    toml = tomllib.loads((REPO / "rtaudit.toml").read_text())["default"]["thresholds"]
    for cat in D.SAFETY_CATEGORIES:
        assert (toml[cat]["review"], toml[cat]["block"]) == (DEFAULT_THRESHOLDS[cat].review, DEFAULT_THRESHOLDS[cat].block)


def test_the_manifest_names_where_each_safety_set_comes_from():
    manifest = load_manifest()
    from rtaudit.modelbuild.text.provenance import DATA_PROVENANCE

    provenance = manifest["data_provenance"]
    for name in D.SAFETY_DATASETS:  # a fitted set in the manifest; an evaluation-only one at least in the code
        entry = DATA_PROVENANCE[name] if name in D.EVALUATION_ONLY_SETS else provenance[name]
        assert {"repository", "commit", "licence", "fitted", "reported_only"} <= set(entry), name
    assert provenance["contrasts"]["repository"] == "this repository"
    assert provenance["threatgram101"]["licence"].startswith("CC-BY-4.0")
    recorded = manifest["safety_training_data"]
    assert set(recorded) == {f"text/{p}" for p in ("threatgram101/Labeled_15076.json", "suicide_detection/Suicide_Detection.xlsx",
                                                   "epie/Static_Idioms_Words.txt", "epie/Formal_Idioms_Words.txt",
                                                   "chitchat/dataset.json")}  # toxigen: evaluation only


def test_policy_and_fusion_decide_on_the_new_categories():
    policy = TenantPolicy()
    assert policy.decide({"violence": 0.95}, complete=True) == "block"
    assert policy.decide({"violence": 0.6}, complete=True) == "review"
    assert policy.decide({"self-harm": 0.99}, complete=True) == "review"
    assert policy.flagged({"self-harm": 0.7, "violence": 0.2, "offensive": 0.9}) == ["offensive", "self-harm"]

    from rtaudit.engine.fusion import Fusion

    from .builders import CREATED_MS, manifest, partial

    f = Fusion(policies=PolicyBook(default=policy), grace_ms=250, retention_ms=60_000)
    state, _ = f.apply(None, manifest("text/text:0"), CREATED_MS + 1)
    _, verdict = f.apply(state, partial("text/text:0", scores={"offensive": 0.2, "violence": 0.93, "self-harm": 0.1}),
                         CREATED_MS + 2)
    assert verdict is not None and verdict.decision == "block" and verdict.flagged == ["violence"]
    assert verdict.categories["violence"] == 0.93 and any(r.startswith("violence 0.93 >= block") for r in verdict.reasons)


@pytest.fixture(scope="module")
def probe_scores(text_scorer):
    texts = [t for t, _ in FLAGGED] + CONTROLS
    return dict(zip(texts, (r.scores for r in text_scorer.score(texts, evidence=False))))


@pytest.mark.parametrize("text,category", FLAGGED)
def test_the_issues_threats_and_self_harm_are_flagged(probe_scores, text, category):
    assert set(D.SAFETY_CATEGORIES) <= set(probe_scores[text])
    assert probe_scores[text][category] >= DEFAULT_THRESHOLDS[category].review, probe_scores[text]


#: the graph the probes are scored with on this machine (CPU: ``auto`` is the int8 graph).
PRECISION = resolve_precision(None, on_gpu=False)


@pytest.mark.parametrize("text", [pytest.param(t, marks=pytest.mark.xfail(
    PRECISION == "fp32", strict=True,
    reason="frozen MiniLM + a linear head: on the fp32 graph 'shoot me an email' and \"I'll shoot you tomorrow\" "
           "get nearly the same violence score (0.50, 0.55); on the int8 graph under 0.3 and 0.53"))
    if t == "shoot me an email" else t for t in CONTROLS])
def test_benign_controls_are_not_flagged_as_threats_or_self_harm(probe_scores, text):
    for cat in D.SAFETY_CATEGORIES:
        assert probe_scores[text][cat] < DEFAULT_THRESHOLDS[cat].review, (cat, probe_scores[text])


def test_the_written_contrasts_are_in_no_evaluation_set():
    from rtaudit.modelbuild.text.benign import BENIGN_TEXTS
    from rtaudit.modelbuild.text.contrasts import CONTRASTS
    from rtaudit.modelbuild.text.evaluation import PROBES
    from rtaudit.modelbuild.text.functional import CASES
    from rtaudit.modelbuild.text.safety_benign import FRESH_USER, SAFETY_BENIGN_TEXTS

    held = {D.text_key(t) for t in (*BENIGN_TEXTS, *(c.text for c in CASES), *(t for t, _ in PROBES), *CONTROLS,
                                    *SAFETY_BENIGN_TEXTS, *FRESH_USER)}
    written = CONTRASTS
    assert not held & {D.text_key(t) for t in written}
    assert len(set(written)) == len(written)
    assert len(set(SAFETY_BENIGN_TEXTS)) == len(SAFETY_BENIGN_TEXTS)


def test_the_written_contrasts_are_violence_negatives_only():
    from rtaudit.modelbuild.text.contrasts import CONTRASTS, IDIOMS
    from rtaudit.modelbuild.text.safety_negatives import contrast_examples

    rows = contrast_examples()
    assert [r.text for r in rows] == list(CONTRASTS) and set(IDIOMS) <= set(CONTRASTS)
    assert all(r.labels == {"violence": 0} and r.dataset == "contrasts" and r.split == "train" for r in rows)


#: issue 39 item 4: a new user's idioms, sent to review before the refit of `violence` on 2026-12-06 (0.54, 0.55, 0.66;
#: after it 0.18, 0.15, 0.40)
FRESH_USER_ALLOWED = ["kill it at the gym", "let's shoot some hoops after school", "I'm going to murder this burrito"]
#: the text that points to help stays at review: `self-harm` was not refit with the written support texts, which
#: brought it to 0.42 but the suicidal goodbye note of test_conversation.py under the line with it (0.67 -> 0.32)
HELP_TEXT = "If you are thinking about suicide please call a helpline"


def test_the_fresh_users_idioms_are_allowed(text_scorer):
    from rtaudit.modelbuild.text.safety_benign import FRESH_USER

    assert set(FRESH_USER_ALLOWED) <= set(FRESH_USER)
    policy = TenantPolicy()
    for text, result in zip(FRESH_USER_ALLOWED, text_scorer.score(FRESH_USER_ALLOWED, evidence=False)):
        assert policy.decide(dict(result.scores), complete=True) == "allow", (text, result.scores)


@pytest.mark.xfail(strict=True, reason="self-harm 0.97: the support texts were not fitted, they cost the suicidal goodbye "
                   "note (docs/text-moderation.md, 'Idioms and help texts')")
def test_the_fresh_users_help_text_is_allowed(text_scorer):
    from rtaudit.modelbuild.text.safety_benign import FRESH_USER

    assert HELP_TEXT in FRESH_USER
    result = text_scorer.score([HELP_TEXT], evidence=False)[0]
    assert TenantPolicy().decide(dict(result.scores), complete=True) == "allow", result.scores


def _skeleton(text: str, words: set[str]) -> str:
    """``text`` lower-cased with every word of ``words`` (and an article before one) replaced by ``_``."""
    import re

    out = " ".join("_" if w in words else w for w in re.findall(r"[a-z']+", text.lower()))
    return re.sub(r"\b(?:an?|the) _", "_", re.sub(r"_( _)+", "_", out))


def test_the_context_contrasts_share_no_text_word_list_or_frame_with_the_evaluation_sets():
    import re

    from rtaudit.modelbuild.text import context_contrasts as X
    from rtaudit.modelbuild.text import functional as F
    from rtaudit.modelbuild.text.benign import BENIGN_TEXTS
    from rtaudit.modelbuild.text.evaluation import PROBES

    written = (*X.CONTEXT_CONTRASTS, *X.DIRECT_FORMS, *X.IDENTITY_STATEMENTS)
    held = {D.text_key(t) for t in (*BENIGN_TEXTS, *(c.text for c in F.CASES), *(t for t, _ in PROBES), *CONTROLS)}
    assert not held & {D.text_key(t) for t in written}
    assert len(set(written)) == len(written) > 400
    suite_words = {w.lower() for a, bare, plural in F.INSULTS for w in (bare, plural)} | {
        w.lower() for plural, _ in F.GROUPS for w in plural.split() if w != "people"} | {
        d.split()[-1] for d in F.DEHUMANISING} | set(F.VERBS)
    ours = {w.lower() for w in re.findall(r"[A-Za-z]+", " ".join(written))}
    assert not suite_words & ours, suite_words & ours
    # no sentence frame of the suite is ours with other words in it
    our_words = {w.lower() for a, p in X.INSULTS for w in (a.split()[-1], p)} | {
        w.lower() for g in X.GROUPS for w in g.split() if w != "people"} | {
        d.split()[-1] for d in X.DEHUMANISING} | set(X.VERBS)
    suite_frames = {_skeleton(c.text, suite_words) for c in F.CASES}
    shared = {t for t in written if _skeleton(t, our_words) in suite_frames}
    assert not shared, shared
    rows = X.context_examples()
    assert all(r.split == "train" and "self-harm" not in r.labels for r in rows)
    direct = {t: family for family, texts in X.direct_forms().items() for t in texts}
    assert {r.text for r in rows if r.dataset == "identity_statements"} == set(X.IDENTITY_STATEMENTS)
    for r in rows:
        want = {"insult": "targeted_insult", "group": "hate", "threat": "violence"}.get(direct.get(r.text, ""))
        assert {c for c, v in r.labels.items() if v} == ({want, "offensive"} if want else set()), r


def test_hashed_three_way_split_is_deterministic_and_about_its_shares():
    keys = [f"text {i}" for i in range(20_000)]
    splits = [D.hashed_split3(k) for k in keys]
    assert splits == [D.hashed_split3(k) for k in keys]
    for name, share in (("test", D.SAFETY_TEST), ("dev", D.SAFETY_DEV)):
        assert abs(splits.count(name) / len(keys) - share) < 0.015
    assert D.text_key("  Lock  HER up!\n") == D.text_key("lock her up!")


def test_xlsx_reader_reads_shared_and_inline_strings(tmp_path):
    import zipfile

    ns = 'xmlns="http://schemas.openxmlformats.org/spreadsheetml/2006/main"'
    path = tmp_path / "t.xlsx"
    with zipfile.ZipFile(path, "w") as z:
        z.writestr("xl/sharedStrings.xml", f'<sst {ns}><si><t>Text</t></si><si><t>Class</t></si><si><t>hi</t></si></sst>')
        z.writestr("xl/worksheets/sheet1.xml", f'<worksheet {ns}><sheetData>'
                   '<row r="1"><c r="B1" t="s"><v>0</v></c><c r="C1" t="s"><v>1</v></c></row>'
                   '<row r="2"><c r="A2"><v>2.0</v></c><c r="B2" t="s"><v>2</v></c><c r="C2" t="inlineStr"><is><t>suicide</t></is></c></row>'
                   '</sheetData></worksheet>')
    assert D.xlsx_rows(path) == [{"B": "Text", "C": "Class"}, {"A": "2.0", "B": "hi", "C": "suicide"}]


def test_epie_sentences_are_read_back_as_prose():
    assert D.detokenize("‘ You are dead to the world , ’ she said .") == "‘You are dead to the world,’ she said."
    assert D.detokenize("it 's over , is n't it ?") == "it's over, isn't it?"


def test_safety_sets_load_with_disjoint_splits(safety_data_dir):
    for name, category in (("threatgram101", "violence"), ("suicide_detection", "self-harm"), ("epie", "violence"),
                           ("dynahate", "hate")):
        if not all(p.is_file() for p in D.safety_files(safety_data_dir)[name]):
            continue  # an evaluation-only set not fetched
        rows = D.load(name, safety_data_dir)
        assert {r.split for r in rows} == {"train", "dev", "test"}
        keys = {s: {D.text_key(r.text) for r in rows if r.split == s} for s in ("train", "dev", "test")}
        assert not (keys["train"] & keys["test"]) and not (keys["dev"] & keys["test"]) and not (keys["train"] & keys["dev"])
        assert all(r.labels[category] in (0, 1) for r in rows)
    positives = sum(r.labels["violence"] for r in D.load("threatgram101", safety_data_dir))
    assert 4000 < positives < 6000
    assert all(len(r.text.split()) <= D.SAFETY_WORDS for r in D.load("suicide_detection", safety_data_dir))


def test_training_never_reads_a_safety_test_split(data_dir, safety_data_dir):
    from rtaudit.modelbuild.text.training_data import english_examples

    rows = english_examples(data_dir, safety_data_dir)
    assert {r.split for r in rows} == {"train", "dev"}
    fitted = set(D.SAFETY_DATASETS) - D.EVALUATION_ONLY_SETS
    assert {r.dataset for r in rows} >= fitted | {"contrasts"}
    assert not {r.dataset for r in rows} & D.EVALUATION_ONLY_SETS
    test_keys = {D.text_key(r.text) for name in fitted for r in D.load(name, safety_data_dir, "test")}
    assert not test_keys & {D.text_key(r.text) for r in rows if r.dataset in D.SAFETY_DATASETS}
    for name in D.EVALUATION_ONLY_SETS:  # where fetched: none of the texts it reports is a training row
        if all(p.is_file() for p in D.safety_files(safety_data_dir)[name]):
            assert not {D.text_key(r.text) for r in D.load(name, safety_data_dir, "test")} & {D.text_key(r.text) for r in rows}
    recorded = load_manifest()["safety_training_data"]
    from rtaudit.engine.hashing import sha256_file

    for rel, sha in recorded.items():
        assert sha256_file(safety_data_dir / rel) == sha, rel


def test_held_out_recall_of_the_new_categories(text_scorer, data_dir, safety_data_dir):
    from rtaudit.modelbuild.text.evaluation import safety

    rows, benign = safety(text_scorer, data_dir, safety_data_dir, quick=True)
    by = {(r.dataset, r.category): r for r in rows}
    # floors a little under the full held-out numbers (docs/text-moderation.md) on the quick samples
    assert by[("suicide_detection", "self-harm")].model.recall >= 0.75
    assert by[("threatgram101", "violence")].model.recall >= 0.55
    assert sum(len(benign[c]) for c in D.SAFETY_CATEGORIES) <= 3


def test_toxigen_loader_reads_every_statement_once_with_its_label(tmp_path):
    """ToxiGen's prompt files (``- statement\\n`` runs, one prompt a line) on files the test writes: each distinct
    statement is one row, a hate file's statements are hate and offensive, a neutral file's are 0 on the abuse
    categories, a statement found in both kinds is dropped, and the split is the hashed three-way one."""
    folder = tmp_path / "text" / "toxigen"
    folder.mkdir(parents=True)
    for name in D.TOXIGEN_FILES:
        group = name.split("_", 1)[1].removesuffix("_1k.txt")
        if name.startswith("hate_"):
            lines = [f"- {group} people are all the same\\n- {group} people ruin everything\\n-",
                     f"- {group} people ruin everything\\n- we meet on tuesdays\\n-"]
        else:
            lines = [f"- {group} people live in many countries\\n- we meet on tuesdays\\n-"]
        (folder / name).write_text("\n".join(lines) + "\n", encoding="utf-8")
    rows = D.load("toxigen", tmp_path)
    by_text = {r.text: r for r in rows}
    assert len(by_text) == len(rows)
    assert "we meet on tuesdays" not in by_text  # in a hate and a neutral file: dropped
    hate = by_text["muslim people ruin everything"]
    assert hate.labels == {"offensive": 1, "hate": 1} and hate.dataset == "toxigen"
    neutral = by_text["muslim people live in many countries"]
    assert neutral.labels == {"offensive": 0, "hate": 0}
    assert not any(r.text.startswith("-") or r.text.endswith("\\n") for r in rows)
    assert len(rows) == 16 * 2 + 15  # two hate statements per group, one neutral (no neutral_trans file)
    assert all(r.split == D.hashed_split3(D.text_key(r.text)) for r in rows)


def test_dynahate_loader_keeps_the_official_test_apart_and_drops_repeats_and_contradictions(tmp_path):
    """On files the test writes: the official test file is ``test``; a train text also in test, a repeat and a text
    with both labels are dropped; a quoted text reads back whole; rows label ``hate`` alone (1 hateful, 0 not);
    the train file is split by hash of the text, the same on every load."""
    train = [(f"group {i} are a burden", 1) for i in range(200)] + [(f"group {i} are welcome here", 0) for i in range(200)]
    train += [("they said \"go home\" to my neighbour, it was awful", 0), ("this text is also in test", 1),
              ("Repeat me", 1), ("repeat  me", 1), ("both labels", 1), ("both labels", 0), ("", 0), ("123", 1)]
    test = [("this text is also in test", 1), ("group x are vermin", 1), ("I love group x", 0)]
    write_dynahate(tmp_path, train, test)
    rows = D.load("dynahate", tmp_path)
    by_text = {r.text: r for r in rows}
    assert {r.text for r in rows if r.split == "test"} == {t for t, _ in test}
    train_rows = [r for r in rows if r.split != "test"]
    assert "this text is also in test" not in {r.text for r in train_rows}
    assert "both labels" not in by_text and "123" not in by_text and "" not in by_text
    assert sum(D.text_key(r.text) == "repeat me" for r in rows) == 1
    assert by_text['they said "go home" to my neighbour, it was awful'].labels == {"hate": 0}
    assert by_text["group x are vermin"].labels == {"hate": 1}
    dev = sum(r.split == "dev" for r in train_rows)
    assert 0.08 < dev / len(train_rows) < 0.22 and {r.split for r in train_rows} == {"train", "dev"}
    assert [(r.text, r.split) for r in D.load("dynahate", tmp_path)] == [(r.text, r.split) for r in rows]


def test_dynahate_loader_refuses_labels_that_do_not_match_the_texts(tmp_path):
    write_dynahate(tmp_path, [("a", 1), ("b", 0)], [("c", 1)])
    (tmp_path / "text" / "dynahate" / "Train_label.csv").write_text("1\n", encoding="utf-8")
    with pytest.raises(ValueError, match="2 texts but 1 labels"):
        D.load("dynahate", tmp_path)


def test_short_fragments_pair_by_shared_word_and_never_repeat_an_abusive_fragment():
    """The benign partner of an abusive rationale span is a run of a normal post holding a word of the span; a
    partner with the text of any abusive fragment would be a contradictory row, and is dropped."""
    from rtaudit.modelbuild.text.training_data import short_fragments

    def post(uid: str, words: str, offensive: int, rationale: tuple[int, ...] = ()) -> D.Example:
        tokens = tuple(words.split())
        return D.Example(words, {"offensive": offensive, "hate": 0}, "hatexplain", "train", uid, tokens,
                         rationale or (0,) * len(tokens))

    abusive = [post("a1", "those neighbours are filthy vermin honestly", 1, (0, 0, 0, 1, 1, 0)),
               post("a2", "my neighbours said the garden gnomes again", 1, (0, 1, 1, 0, 0, 0, 0)),
               post("a3", "they are garden gnomes and nothing more", 1, (0, 0, 1, 1, 0, 0, 0, 0))]
    # the only normal post that holds "garden" starts with it: a3's partner is "garden gnomes", its own text
    normal = [post("n1", "garden gnomes " * 4, 0),
              post("n2", "the weather was lovely for a long walk by the river", 0)]
    rows = short_fragments(abusive + normal, n=10)
    positives = [r for r in rows if r.labels["offensive"]]
    partners = [r for r in rows if not r.labels["offensive"]]
    assert sorted(p.text for p in positives) == ["filthy vermin", "garden gnomes", "neighbours said"]
    assert all(r.dataset == "hatexplain_fragments" and r.split == "train" for r in rows)
    texts = {p.text.lower() for p in positives}
    assert partners and not any(r.text.lower() in texts for r in partners)
    assert len(partners) < len(positives)  # a3's partner was dropped
    assert all(len(r.text.split()) == 2 for r in partners)


def test_emoji_negatives_leave_out_threat_emoji_weapons_and_the_held_out_chat_emoji():
    import emoji

    from rtaudit.modelbuild.text.benign import EMOJI_CHAT_EMOJI
    from rtaudit.modelbuild.text.safety_negatives import emoji_negatives

    rows = [D.Example("I will find you 💀🐍", {"violence": 1}, "threatgram101", "train", "t1"),
            D.Example("you 🐍 lol", {"violence": 0}, "threatgram101", "train", "t2"),
            D.Example("see you at lunch", {c: 0 for c in D.CATEGORIES}, "chitchat", "train", "c1"),
            D.Example("not read: a dev message", {c: 0 for c in D.CATEGORIES}, "chitchat", "dev", "c2")]
    out = emoji_negatives(rows)
    alone = {r.text for r in out if not r.uid.endswith(":chat")}
    assert "🌻" in alone and "🎂" in alone  # everyday emoji are negatives
    assert not {"💀", "🐍"} & alone  # used in a violence-positive row
    assert not {"🔫", "🔪", "💣", "🗡️"} & alone  # weapons by name
    assert not {e.replace("\uFE0F", "") for e in EMOJI_CHAT_EMOJI} & {a.replace("\uFE0F", "") for a in alone}
    assert not any(c in "\U0001F3FB\U0001F3FC\U0001F3FD\U0001F3FE\U0001F3FF" for a in alone for c in a)
    assert all(r.labels == {"violence": 0} and r.split == "train" and r.dataset == "emoji_negatives" for r in out)
    chat = [r for r in out if r.uid.endswith(":chat")]
    assert len(chat) == len(alone) and all("see you at lunch" in r.text for r in chat)
    assert all(emoji.emoji_count(r.text) == 1 for r in chat)
    assert emoji_negatives(rows) == out  # deterministic
    assert not [r for r in emoji_negatives(rows[:2]) if r.uid.endswith(":chat")]  # no Chit-Chat row: bare emoji only
