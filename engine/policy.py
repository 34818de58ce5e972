"""Tenant policy: the categories each stage scores, the checks of a policy against them, and the book of
every tenant's policy.

The policy contracts themselves (:class:`Threshold`, :class:`QuotaPolicy`, :class:`TenantPolicy` and how a
policy decides) are message contracts, carried by ``policy:<tenant>`` control records: they live in
:mod:`rtaudit.schemas.policy` and are used through this module.
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field

from rtaudit.schemas.policy import (  # the contracts, used through this module by the engine and workers
    DEFAULT_THRESHOLDS as DEFAULT_THRESHOLDS, Breaker as Breaker, BreakerAction as BreakerAction,
    QuotaPolicy as QuotaPolicy, TenantPolicy as TenantPolicy,
    Threshold as Threshold, stricter as stricter,
)

#: every category a policy may name: the default thresholds' keys (``profanity`` included: the
#: first text model's category, kept so older policies load; no stage scores it now).
KNOWN_CATEGORIES: tuple[str, ...] = tuple(DEFAULT_THRESHOLDS)

#: the categories each stage scores, by stage: the MiniLM text stage and the OCR stage score
#: :data:`rtaudit.modelbuild.text.data.CATEGORIES`, the lexical text model (``text_model = "lexical"``)
#: ``offensive`` alone (:data:`rtaudit.engine.models.lexical.REPORTED_AS`), the image stage
#: :data:`rtaudit.engine.models.nudity.CATEGORIES` (``tests/unit/test_settings_policy.py`` checks
#: they agree: those modules load onnxruntime and the training data, too much for settings).
TEXT_CATEGORIES: tuple[str, ...] = ("offensive", "hate", "targeted_insult", "violence", "self-harm")
LEXICAL_CATEGORIES: tuple[str, ...] = ("offensive",)
IMAGE_CATEGORIES: tuple[str, ...] = ("sexual", "suggestive")


def unknown_category_message(where: str, unknown: list[str], escape: str) -> str:
    """The one-line refusal of thresholds for categories no stage scores (``policy set`` and the
    settings file say the same): ``where`` names the file or table, ``escape`` how to force it."""
    return (f"{where}: no stage scores {', '.join(unknown)} (known: {', '.join(KNOWN_CATEGORIES)}); "
            f"a misspelt category never flags. Fix the name, or {escape}")


def uncovered_stages(policy: "TenantPolicy", stage_categories: dict[str, tuple[str, ...]]) -> list[str]:
    """The stages none of whose categories ``policy`` has a threshold for: under that policy
    nothing those stages score can flag (every text, or every image, is allowed). Sorted."""
    return sorted(stage for stage, cats in stage_categories.items() if not set(cats) & set(policy.thresholds))


def uncovered_stage_message(where: str, uncovered: list[str], stage_categories: dict[str, tuple[str, ...]],
                            escape: str) -> str:
    """The one-line refusal of a policy whose thresholds cover none of a stage's categories."""
    by_categories: dict[tuple[str, ...], list[str]] = {}
    for stage in uncovered:
        by_categories.setdefault(stage_categories[stage], []).append(stage)
    parts = "; ".join(f"{' and '.join(stages)} score{'s' if len(stages) == 1 else ''} {', '.join(cats)}"
                      for cats, stages in by_categories.items())
    return (f"{where}: no threshold for any category of the {' and '.join(uncovered)} "
            f"stage{'s' if len(uncovered) > 1 else ''} ({parts}): all their inputs would be allowed. "
            f"Add thresholds, or {escape}")


class PolicyBook(BaseModel):
    """All tenants' policies: ``default`` applies to tenants without their own; ``breakers`` holds
    the tenants' circuit breakers set on the control topic (:class:`Breaker`)."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    default: TenantPolicy = Field(default_factory=TenantPolicy)
    tenants: dict[str, TenantPolicy] = Field(default_factory=dict)
    breakers: dict[str, Breaker] = Field(default_factory=dict)

    def for_tenant(self, tenant_id: str) -> TenantPolicy:
        return self.tenants.get(tenant_id, self.default)
