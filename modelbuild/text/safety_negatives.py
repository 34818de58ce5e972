"""Negatives the ``violence`` and ``self-harm`` heads are fitted with beside the safety sets
(:func:`rtaudit.modelbuild.text.training_data.english_examples`): ordinary prose passages and the written contrast
sentences. Pure: :class:`rtaudit.modelbuild.text.data.Example` rows in, rows out."""

from __future__ import annotations

import hashlib
import re

from rtaudit.modelbuild.text import data as D

#: EPIE sentences are negatives of ``violence`` only (``training_data.VIOLENCE_ONLY_NEGATIVES``), but joined into passages as long as a window of a long document, the same sentences are
#: negatives of both (:func:`prose_passages`): without them ordinary prose of 40+ words read as
#: self-harm (a 5,000-word benign text 0.73, its violence 0.48), since every long training text
#: of the head was a Reddit post. Passages per split; at least this many words each, in turn (a
#: window of a long document holds up to 64 word pieces, about 45 words).
PROSE_PASSAGES = {"train": 6000, "dev": 1000}
PASSAGE_WORDS = (25, 40, 55)


def prose_passages(sentences: list[D.Example]) -> list[D.Example]:
    """Up to :data:`PROSE_PASSAGES` passages per split of consecutive ``sentences`` (EPIE prose, in an
    order hashed from their ids, never across splits; a sentence is in at most one passage) of at
    least :data:`PASSAGE_WORDS` words each (the lengths in turn), negative for ``violence`` and
    ``self-harm`` (dataset ``epie_passages``)."""
    out: list[D.Example] = []
    for split, n in PROSE_PASSAGES.items():
        rows = sorted((s for s in sentences if s.split == split),
                      key=lambda s: hashlib.sha256(s.uid.encode()).hexdigest())
        passage: list[D.Example] = []
        for s in rows:
            passage.append(s)
            if sum(len(p.text.split()) for p in passage) >= PASSAGE_WORDS[len(out) % len(PASSAGE_WORDS)]:
                out.append(D.Example(" ".join(p.text for p in passage), {c: 0 for c in D.SAFETY_CATEGORIES},
                                     "epie_passages", split, "passage:" + passage[0].uid))
                passage = []
                if sum(e.split == split for e in out) >= n:
                    break
    return out


def contrast_examples() -> list[D.Example]:
    """:data:`rtaudit.modelbuild.text.contrasts.CONTRASTS` (the idioms of sport, performance, food and games among them)
    as ``train`` rows, negative for ``violence`` only (as ``self-harm`` negatives, their self-directed hyperbole
    pulled "I want to die" from 0.55 to 0.20)."""
    from rtaudit.modelbuild.text.contrasts import CONTRASTS

    return [D.Example(t, {"violence": 0}, "contrasts", "train", f"contrast:{i}") for i, t in enumerate(CONTRASTS)]


#: Fitzpatrick skin-tone modifiers: an emoji carrying one is the same emoji to the model (its name drops the tone)
_SKIN_TONES = frozenset("\U0001F3FB\U0001F3FC\U0001F3FD\U0001F3FE\U0001F3FF")


def emoji_negatives(examples: list[D.Example]) -> list[D.Example]:
    """Everyday emoji as ``violence`` negatives (dataset ``emoji_negatives``, train only): each fully-qualified
    emoji of the ``emoji`` package (Unicode's emoji list, BSD; no skin-tone variant, no component) that no
    ``violence``-positive row of ``examples`` uses and whose name holds no violent word
    (:data:`rtaudit.modelbuild.text.training_data.VIOLENT_WORDS`, weapons), twice: alone, and before or after a Chit-Chat
    train message of ``examples`` (both chosen by sha256 of the emoji; none when ``examples`` has no Chit-Chat row).

    Why: the fine-tuned encoder's ``violence`` head read short gesture phrases as threats ("✌️ see you tomorrow"
    0.87, "👋 let's go team" 0.82, "peace sign" 0.82): the only emoji it saw were HatemojiBuild's and ThreatGram's,
    and no benign row was a bare name or a short noun phrase. The gesture and person emoji of the benign emoji chat
    check (:data:`rtaudit.modelbuild.text.benign.EMOJI_CHAT_EMOJI`) are left out, so that check stays a held-out measure
    of whether the rule carries over to emoji the head never saw as negatives.

    Returns ``list[Example]``, labels ``{"violence": 0}``, in the package's order of emoji."""
    import emoji

    from rtaudit.modelbuild.text.benign import EMOJI_CHAT_EMOJI
    from rtaudit.modelbuild.text.training_data import VIOLENT_WORDS

    def base(e: str) -> str:
        return "".join(c for c in e if c not in _SKIN_TONES and c != "\uFE0F")

    held_out = {base(e) for e in EMOJI_CHAT_EMOJI}
    threatening = {base(m["emoji"]) for e in examples if e.labels.get("violence") == 1 for m in emoji.emoji_list(e.text)}
    weapon = re.compile(r"\b(?:gun|pistol|knife|dagger|sword|axe|bomb|firecracker|explosion|collision|skull|coffin|"
                        r"headstone|urn|syringe|drop of blood|hammer|chains|bow and arrow|boomerang|shield|crossed swords)\b")
    chat = sorted((e for e in examples if e.dataset == "chitchat" and e.split == "train"), key=lambda e: e.uid)
    out: list[D.Example] = []
    for e, info in emoji.EMOJI_DATA.items():
        name = info["en"].strip(":").replace("_", " ").lower()
        if (info["status"] != emoji.STATUS["fully_qualified"] or any(c in _SKIN_TONES for c in e)
                or "skin tone" in name or base(e) in held_out
                or base(e) in threatening or VIOLENT_WORDS.search(name) or weapon.search(name)):
            continue
        out.append(D.Example(e, {"violence": 0}, "emoji_negatives", "train", f"emoji:{name}"))
        if chat:
            h = int.from_bytes(hashlib.sha256(f"{D.SPLIT_SEED}:{name}".encode()).digest()[:8], "big")
            message = chat[h % len(chat)].text
            text = f"{e} {message}" if h >> 63 else f"{message} {e}"
            out.append(D.Example(text, {"violence": 0}, "emoji_negatives", "train", f"emoji:{name}:chat"))
    return out
