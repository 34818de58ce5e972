"""Where the datasets of the English head that were added with their provenance recorded came from
(:data:`DATA_PROVENANCE`: source, repository, commit, licence, labels, and what is fitted, chosen on and only
reported), the manifest's ``data_provenance``. The older sets are cited in :mod:`rtaudit.modelbuild.text.data`
and docs/text-moderation.md. Data only: reads nothing.
"""

from __future__ import annotations

from rtaudit.modelbuild.text.training_data import CHITCHAT_TRAIN_ROWS


def _written(module: str, what: str, labels: str, reported_only: str) -> dict[str, str]:
    """A :data:`DATA_PROVENANCE` entry for rows written for this project in ``module`` (a path), holding ``what``."""
    return {"source": f"written for this project ({module}): {what}",
            "repository": "this repository", "commit": "-", "licence": "the project's", "labels": labels,
            "fitted": "all (train only)", "model_selection": "-", "reported_only": reported_only}


_SUITE_APART = "- (no text, lexicon word or frame of the functional suite; unit-tested)"


#: where the datasets added with their provenance recorded came from (the older sets are cited in
#: :mod:`rtaudit.modelbuild.text.data` and docs/text-moderation.md).
DATA_PROVENANCE = {
    "hatemoji_build": {"source": "HatemojiBuild (Kirk et al. 2022, NAACL)", "repository": "HannahKirk/Hatemoji",
                       "commit": "a626f63", "licence": "CC-BY-4.0",
                       "fitted": "train.csv", "model_selection": "validation.csv",
                       "reported_only": "test.csv (not read by training; its sha256 is not in training_data)"},
    "threatgram101": {"source": "ThreatGram 101: Extreme Telegram Replies Data with Threat Levels (Hugging Face "
                                "dataset singlelabelmulticlass/ThreatGram101)",
                      "repository": "CatGamer7/Telegram-threats", "commit": "52746d5", "path": "Labeled_15076.json",
                      "licence": "CC-BY-4.0 (as the repository's README states for the dataset)",
                      "rows": "15,076 labelled replies; 14,576 distinct texts after dropping duplicates",
                      "labels": "Label 2 (extreme threat) -> violence 1; 0 and 1 (non-violent) -> 0",
                      "fitted": "hashed train (65 %)", "model_selection": "hashed dev (15 %)",
                      "reported_only": "hashed test (20 %): the held-out split, never read by training"},
    "suicide_detection": {"source": "Suicide and Depression Detection (Kaggle, nikhileswarkomati/suicide-watch: "
                                    "r/SuicideWatch -> suicide, r/teenagers -> non-suicide), first 9,083 rows",
                          "repository": "rjarman/googletranslate", "commit": "5d3472b", "path": "Suicide_Detection.xlsx",
                          "licence": "repository MIT; the upstream Kaggle dataset's own licence is not stated in "
                                     "the repository (Reddit posts): kept out of this repository, used for training "
                                     "and evaluation only",
                          "rows": "9,083 posts (4,458 suicide), cut to their first 40 words",
                          "labels": "suicide -> self-harm 1, non-suicide -> 0",
                          "fitted": "hashed train (65 %)", "model_selection": "hashed dev (15 %)",
                          "reported_only": "hashed test (20 %): the held-out split, never read by training"},
    "epie": {"source": "EPIE: English Possible Idiomatic Expressions (Saxena & Paul 2020, arXiv:2006.09479); "
                       "sentences of the British National Corpus",
             "repository": "prateeksaxena2809/EPIE_Corpus", "commit": "cb6007e",
             "path": "Static_Idioms_Corpus/Static_Idioms_Words.txt, Formal_Idioms_Corpus/Formal_Idioms_Words.txt",
             "licence": "none stated in the repository (BNC sentences; the BNC's own licence allows research use): "
                        "kept out of this repository, used as training negatives only",
             "rows": "25,027 sentences; 24,437 distinct",
             "labels": "violence 0 (negatives only; not used for self-harm)",
             "fitted": "hashed train (65 %)", "model_selection": "hashed dev (15 %)",
             "reported_only": "hashed test (20 %): false-positive rate on ordinary prose"},
    "chitchat": {"source": "BYU PCC Chit-Chat Challenge corpus (2018): 7,168 open-domain conversations, 258,145 messages",
                 "repository": "BYU-PCCL/chitchat-dataset", "commit": "ff8b113",
                 "path": "chitchat_dataset/dataset.json (absent from the git tree: taken from the PyPI wheel "
                         "chitchat_dataset-0.9.0-py3-none-any.whl, sha256 7bf89f36645e2d5ec87d53370c8e851b5a688479c7beb7079cb4c87fc5acea3e)",
                 "licence": "MIT", "rows": "distinct messages with a letter",
                 "labels": "every category 0 (negatives)",
                 "fitted": f"a hashed {CHITCHAT_TRAIN_ROWS} of the hashed train (65 %) and every train message that says goodbye", "model_selection": "- (dev not read)",
                 "reported_only": "hashed test (20 %): false-positive rate on conversation"},
    "toxigen": {"source": "ToxiGen's human-written demonstrations (Hartvigsen et al. 2022, ACL): implicit-hate and neutral "
                           "statements about 16 identity groups, the prompts of the ToxiGen generator",
                "repository": "microsoft/TOXIGEN", "commit": "01517e8", "path": "prompts/{hate,neutral}_<group>_1k.txt (31 files)",
                "licence": "MIT", "rows": "668 distinct statements (372 hate, 296 neutral)",
                "labels": "hate_* -> offensive 1, hate 1; neutral_* -> offensive 0, hate 0",
                "fitted": "- (not fitted, EVALUATION_ONLY_SETS: fine-tuned on, the encoder read sentences naming a group as abuse)",
                "model_selection": "-",
                "reported_only": "hashed test (20 %): hate P/R and neutral statements read as hate, rtaudit eval"},
    "dynahate": {"source": "Dynamically Generated Hate Speech Dataset v0.2 (Vidgen, Thrush, Waseem & Kiela 2021, "
                            "'Learning from the Worst', ACL; bvidgen/Dynamically-Generated-Hate-Speech-Dataset): "
                            "annotator-written hateful statements and their contrasts over four adversarial rounds",
                 "repository": "ecanbazer/DynBERT", "commit": "494d0d3",
                 "path": "data/Train.csv, data/Train_label.csv, data/Test.csv, data/Test_label.csv (its official "
                         "train and test splits, text and binary label; the original repository's CSV files are "
                         "over the 4 MiB a snapshot here carries)",
                 "licence": "none stated by the original repository (free for use with citation of the ACL 2021 "
                            "paper); the copy's repository is MIT: kept out of this repository, used for training "
                            "and evaluation only",
                 "rows": "32,497 train and 4,062 test lines; 36,371 distinct texts after dropping repeats, texts "
                         "with both labels and train texts also in test",
                 "labels": "hate -> hate 1; nothate -> hate 0; no other category (its non-hateful rows hold "
                           "profanity at no protected group)",
                 "fitted": "- (not fitted, EVALUATION_ONLY_SETS: fine-tuned on its train split, the encoder read "
                           "positive and negated statements about groups as hate; docs/text-moderation.md, 'DynaHate')",
                 "model_selection": "-",
                 "reported_only": "official test: hate P/R and non-hateful statements read as hate, rtaudit eval"},
    "contrasts": _written("modelbuild/text/contrasts.py", "figurative uses of violent words (idioms of sport, "
                          "performance, food and games among them)", "violence 0",
                          "- (none is in the benign list, the functional suite, the probes or safety_benign)"),
    "context_contrasts": _written("modelbuild/text/context_contrasts.py", "insults, group derogation and threats negated, "
                                  "condemned or reported, each family with its direct form in the same words "
                                  "(counterfactually augmented data)",
                                  "contrasts 0; direct insults offensive + targeted_insult, direct derogation "
                                  "offensive + hate, direct threats offensive + violence", _SUITE_APART),
    "identity_statements": _written("modelbuild/text/context_contrasts.py", "everyday statements naming a group, the "
                                    "negatives balancing the direct derogation", "offensive, hate, targeted_insult 0",
                                    _SUITE_APART),
    "emoji_negatives": {"source": "Unicode's emoji list as shipped by the emoji package (PyPI emoji, BSD): every "
                                  "fully-qualified emoji no violence-positive row uses, alone and beside a Chit-Chat "
                                  "train message (safety_negatives.emoji_negatives)",
                        "repository": "PyPI emoji (the installed version)", "commit": "-", "licence": "BSD (emoji); "
                        "Unicode data licence (the list)", "labels": "violence 0", "fitted": "all (train only)",
                        "model_selection": "-",
                        "reported_only": "- (the benign emoji chat check's 11 gesture and person emoji are left out)"},
    "suicide_sentences": {"source": "Suicide Detection train posts (see suicide_detection): each sentence of 3-20 "
                                    "words that speaks of suicide or self-harm (training_data.SELF_HARM_CUES)",
                          "repository": "see suicide_detection", "commit": "-", "licence": "see suicide_detection",
                          "labels": "the post's: self-harm 1 (r/SuicideWatch) or 0 (r/teenagers)",
                          "fitted": "all (train only)", "model_selection": "-", "reported_only": "-"},
    "hatexplain_fragments": {"source": "HateXplain train posts (shared data): the longest 2-8 token run of annotator "
                                       "rationale of offensive posts, each paired with as many tokens of a normal post",
                             "repository": "see hatexplain", "commit": "-", "licence": "see hatexplain",
                             "labels": "the post's labels / every label 0", "fitted": "a hashed 4,000 pairs (train only)",
                             "model_selection": "-", "reported_only": "-"},
}
