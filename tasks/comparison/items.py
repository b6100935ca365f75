"""Comparison items and study config: validation, instruction templates, overlap planning.

Everything here is pure. An item's content holds the query and the candidate texts only; the
policy that produced each candidate (its provenance) and the experimenter's label stay on the
server, so the page can neither be biased by provenance nor read the answer.
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Any, cast

from crowd.exceptions import InvalidConfig, InvalidItem
from models.reward.config import validate_study_settings
from tasks.base import LIVE_RATER_GROUP, ItemSpec, StudyOptions

MIN_K = 2
MAX_K = 8
MAX_QUERY_CHARS = 20_000
MAX_CANDIDATE_CHARS = 10_000
ITEM_KEYS = frozenset({"id", "kind", "query", "candidates", "policies", "best", "meta", "category"})
CANDIDATE_KEYS = frozenset({"text", "policy"})
LABELLED_KINDS = ("gold", "attention", "training")

# The instruction texts of "Fine-tuning LMs from human preferences" (Ziegler et al., 2019).
TEMPLATES: dict[str, str] = {
    "sentiment": (
        "Read the beginning of the story, then pick the continuation that is the most "
        "positive and happy. Sexual or offensive content counts as strongly negative."
    ),
    "descriptiveness": (
        "Read the beginning of the story, then pick the continuation that is the most "
        "vividly descriptive. Count physical details only: what things look, sound, smell, "
        "feel or taste like."
    ),
    "summarization": (
        "Read the text, then pick the best summary: one that is useful, accurate about the "
        "important points and makes sense on its own. A summary is bad if it adds information "
        "that is not in the text or quotes words that are not verbatim."
    ),
}
GENERIC_INSTRUCTIONS = "Read the text, then pick the candidate you think is best."
MAX_INSTRUCTIONS_CHARS = 5_000
DEFAULT_OVERLAP_SHARE = 0.05
DEFAULT_OVERLAP_WORKERS = 5
DEFAULT_EXPERT_GROUPS = ("expert",)
CONFIG_KEYS = (
    "annotations_per_item", "attention_rate", "template", "instructions", "overlap_share",
    "overlap_workers", "expert_groups", "reward_model",
)  # fmt: skip


def _require(condition: bool, message: str, where: str) -> None:
    if not condition:
        raise InvalidItem(message, where)


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _candidates(raw: Mapping[str, Any], where: str) -> tuple[list[str], list[str | None]]:
    """Candidate texts and policies, from {"text", "policy"} objects or strings + `policies`."""
    entries = raw.get("candidates")
    _require(
        isinstance(entries, list) and MIN_K <= len(entries) <= MAX_K,
        f"'candidates' must be a list of {MIN_K} to {MAX_K} entries, each "
        '{"text": ..., "policy": ...} or a string',
        where,
    )
    entries = cast(list[Any], entries)
    policies_field = raw.get("policies")
    if policies_field is not None:
        _require(
            isinstance(policies_field, list)
            and len(policies_field) == len(entries)
            and all(isinstance(p, str) and p.strip() for p in policies_field),
            f"'policies' must list one policy name per candidate ({len(entries)} names)",
            where,
        )
    texts: list[str] = []
    policies: list[str | None] = []
    for index, entry in enumerate(entries):
        if isinstance(entry, Mapping):
            unknown = set(entry) - CANDIDATE_KEYS
            _require(
                not unknown,
                f"candidate {index} has unknown keys {sorted(unknown)} (allowed: text, policy)",
                where,
            )
            text, policy = entry.get("text"), entry.get("policy")
            _require(
                policies_field is None or policy is None,
                f"candidate {index} names its policy and 'policies' does too: use one of them",
                where,
            )
        else:
            text, policy = entry, None
        if policy is None and policies_field is not None:
            policy = policies_field[index]
        _require(
            isinstance(text, str) and 0 < len(text.strip()) <= MAX_CANDIDATE_CHARS,
            f"candidate {index} needs a non-empty 'text' of at most {MAX_CANDIDATE_CHARS} "
            "characters",
            where,
        )
        _require(
            policy is None or (isinstance(policy, str) and policy.strip() != ""),
            f"candidate {index}: 'policy' must be a non-empty name (which model wrote it)",
            where,
        )
        texts.append(cast(str, text).strip())
        policies.append(cast(str, policy).strip() if policy is not None else None)
    # Workers click a text and simulators and imports find candidates by their text, so two
    # equal texts would make the stored answer ambiguous.
    _require(
        len(set(texts)) == len(texts),
        "candidate texts must all differ (drop or merge the duplicates)",
        where,
    )
    return texts, policies


def validate_item(raw: Mapping[str, Any], where: str = "item") -> ItemSpec:
    """One uploaded comparison item as an ItemSpec; InvalidItem names `where` and the field."""
    _require(isinstance(raw, Mapping), "must be a JSON object", where)
    unknown = set(raw) - ITEM_KEYS
    _require(not unknown, f"unknown keys {sorted(unknown)} (allowed: {sorted(ITEM_KEYS)})", where)
    external_id = raw.get("id")
    _require(
        (isinstance(external_id, str) or _is_int(external_id)) and str(external_id).strip() != "",
        "needs an 'id' (string)",
        where,
    )
    where = f"{where} {external_id}"
    kind = raw.get("kind", "real")
    _require(
        kind in ("real", *LABELLED_KINDS),
        "'kind' must be real, gold, attention or training",
        where,
    )
    query = raw.get("query")
    _require(
        isinstance(query, str) and 0 < len(query.strip()) <= MAX_QUERY_CHARS,
        f"'query' (the context the candidates continue) must be a non-empty string of at most "
        f"{MAX_QUERY_CHARS} characters",
        where,
    )
    texts, policies = _candidates(raw, where)
    k = len(texts)
    best = raw.get("best")
    if kind == "real":
        _require(
            best is None,
            "a real item carries no 'best': make it kind 'gold' to score workers against it",
            where,
        )
    else:
        _require(
            _is_int(best) and 0 <= cast(int, best) < k,
            f"a {kind} item needs 'best': the 0-based index of the right candidate, 0 to {k - 1}",
            where,
        )
    category = raw.get("category")
    _require(category is None or isinstance(category, str), "'category' must be text", where)
    meta_raw = raw.get("meta")
    _require(meta_raw is None or isinstance(meta_raw, Mapping), "'meta' must be an object", where)
    meta = dict(cast(Mapping[str, Any], meta_raw or {}))
    utility = meta.get("utility")
    if utility is not None:
        _require(
            isinstance(utility, list)
            and len(utility) == k
            and all(
                isinstance(u, int | float) and not isinstance(u, bool) and math.isfinite(u)
                for u in utility
            ),
            f"'meta.utility' must list {k} numbers, one per candidate in the given order",
            where,
        )
    meta["policies"] = policies
    return ItemSpec(
        external_id=str(external_id),
        content={"query": cast(str, query).strip(), "candidates": texts},
        expected={} if best is None else {"best": best},
        meta=meta,
        kind=kind,
        category=category,
    )


def _unit_share(value: Any, key: str) -> float:
    if not isinstance(value, int | float) or isinstance(value, bool) or not 0 <= value <= 1:
        raise InvalidConfig("must be a number from 0 (no overlap) to 1 (every item)", key)
    return float(value)


def validate_extra_config(config: dict[str, Any]) -> dict[str, Any]:
    """The comparison study's own config keys, with their defaults filled in."""
    template = config.pop("template", None)
    if template is not None and template not in TEMPLATES:
        raise InvalidConfig(f"must be one of {sorted(TEMPLATES)} or null", "template")
    instructions = config.pop("instructions", None)
    if instructions is not None and (
        not isinstance(instructions, str)
        or not 0 < len(instructions.strip()) <= MAX_INSTRUCTIONS_CHARS
    ):
        raise InvalidConfig(
            f"must be non-empty text of at most {MAX_INSTRUCTIONS_CHARS} characters, or null "
            "to use the template's",
            "instructions",
        )
    share = _unit_share(config.pop("overlap_share", DEFAULT_OVERLAP_SHARE), "overlap_share")
    workers = config.pop("overlap_workers", DEFAULT_OVERLAP_WORKERS)
    if not _is_int(workers) or not 2 <= workers <= 1000:
        raise InvalidConfig(
            "must be an integer from 2 to 1000 (distinct workers per overlap item)",
            "overlap_workers",
        )
    groups = config.pop("expert_groups", list(DEFAULT_EXPERT_GROUPS))
    if (
        not isinstance(groups, list)
        or not all(isinstance(g, str) and g.strip() for g in groups)
        or LIVE_RATER_GROUP in groups
    ):
        raise InvalidConfig(
            f'must be a list of rater group names such as ["expert"] ("{LIVE_RATER_GROUP}" is '
            "the live workers and cannot be an expert group)",
            "expert_groups",
        )
    reward_model = validate_study_settings(config.pop("reward_model", None))
    if config:
        raise InvalidConfig(
            f"unknown config keys {sorted(config)}: comparison studies take "
            f"{', '.join(CONFIG_KEYS)}"
        )
    return {
        "template": template,
        "instructions": instructions.strip() if isinstance(instructions, str) else None,
        "overlap_share": share,
        "overlap_workers": workers,
        "expert_groups": [g.strip() for g in groups],
        "reward_model": reward_model,
    }


def instructions_for(config: Mapping[str, Any]) -> str:
    """The text shown above every item: custom instructions, else the template's, else generic."""
    custom = config.get("instructions")
    if custom:
        return str(custom)
    template = config.get("template")
    return TEMPLATES.get(str(template), GENERIC_INSTRUCTIONS) if template else GENERIC_INSTRUCTIONS


def overlap_count(share: float, n_real: int) -> int:
    """How many real items of an import go to several workers: share x n, rounded half up.

    At least one when the share is positive and there is a real item, so a small import still
    yields some worker-worker agreement to measure.
    """
    if share <= 0 or n_real == 0:
        return 0
    # The tiny epsilon keeps 0.05 x 50 = 2.5000000000000004 and 2.4999999999999996 alike.
    return min(n_real, max(1, math.floor(share * n_real + 0.5 + 1e-9)))


def _overlap_rank(external_id: str) -> str:
    # A hash of the id spreads the overlap items over the import (not just its first lines)
    # while the choice stays reproducible for the same ids.
    return hashlib.sha256(external_id.encode("utf-8")).hexdigest()


def plan_overlap(specs: list[ItemSpec], options: StudyOptions) -> list[ItemSpec]:
    """Give a share of the real items of an import to `overlap_workers` distinct workers.

    Every other item keeps target None (the study's annotations_per_item, 1 by default). An
    overlap item's target is never below annotations_per_item, so overlap only ever adds labels.
    Each import is planned on its own: the share applies to the items of that import.
    """
    extra = options.extra
    share = float(extra.get("overlap_share", DEFAULT_OVERLAP_SHARE))
    workers = int(extra.get("overlap_workers", DEFAULT_OVERLAP_WORKERS))
    real = [spec.external_id for spec in specs if spec.kind == "real"]
    chosen = set(sorted(real, key=_overlap_rank)[: overlap_count(share, len(real))])
    target = max(workers, options.annotations_per_item)
    return [replace(spec, target=target) if spec.external_id in chosen else spec for spec in specs]


def canonical_index(order: Sequence[int], shown: int) -> int:
    """The canonical index of the candidate shown at position `shown` (order[p] = canonical)."""
    k = len(order)
    if sorted(order) != list(range(k)):
        raise ValueError(f"order {list(order)} is not a permutation of 0..{k - 1}")
    if not _is_int(shown) or not 0 <= shown < k:
        raise ValueError(f"shown position must be an integer from 0 to {k - 1}, got {shown!r}")
    return int(order[shown])


def shown_position(order: Sequence[int], canonical: int) -> int:
    """Where the candidate with canonical index `canonical` was shown (the inverse mapping)."""
    return list(order).index(canonical)
