"""The OpenAPI description of the experimenter and worker APIs, served at /openapi.json."""

from __future__ import annotations

from typing import Any

from flask import Blueprint

from crowd import __version__

bp = Blueprint("openapi", __name__)

STUDY_ID = {"name": "study_id", "in": "path", "required": True, "schema": {"type": "integer"}}
ASSIGNMENT_ID = {
    "name": "assignment_id", "in": "path", "required": True, "schema": {"type": "integer"},
}  # fmt: skip
WORKER_ID = {"name": "worker_id", "in": "path", "required": True, "schema": {"type": "integer"}}
WEBHOOK_ID = {"name": "webhook_id", "in": "path", "required": True, "schema": {"type": "integer"}}
ERROR = {
    "description": "error",
    "content": {"application/json": {"schema": {"$ref": "#/components/schemas/Error"}}},
}  # noqa: E501


def _op(summary: str, *, params: list[dict[str, Any]] | None = None, body: str | None = None,
        ok: str = "200", security: str | None = "apiKey") -> dict[str, Any]:  # fmt: skip
    operation: dict[str, Any] = {
        "summary": summary,
        "parameters": params or [],
        "responses": {ok: {"description": "ok"}, "4XX": ERROR},
    }
    if body:
        operation["requestBody"] = {
            "required": True,
            "content": {"application/json": {"schema": {"$ref": f"#/components/schemas/{body}"}}},
        }
    operation["security"] = [{security: []}] if security else []
    return operation


def _id(name: str) -> dict[str, Any]:
    return {"name": name, "in": "path", "required": True, "schema": {"type": "integer"}}


def taboo_paths() -> dict[str, Any]:
    """Adversarial Taboo: the waiting room and games (players), records (experimenters)."""
    seat, game = [_id("seat_id")], [_id("game_id")]
    tournament = {"name": "tournament", "in": "query", "required": False,
                  "schema": {"type": "string"}}  # fmt: skip
    return {
        "/api/taboo/studies/{study_id}/lobby": {"post": _op(
            "Ask for a game ({opponent: human | agent | either}): a seat in the waiting room, "
            "paired at once with a waiting person or an agent, else when polled",
            params=[STUDY_ID], security="workerToken")},
        "/api/taboo/seats/{seat_id}": {"get": _op(
            "Poll a seat (a heartbeat): waiting, paired (with its game_id), timed_out or left",
            params=seat, security="workerToken")},
        "/api/taboo/seats/{seat_id}/leave": {"post": _op(
            "Stop waiting", params=seat, security="workerToken")},
        "/api/taboo/games/{game_id}": {"get": _op(
            "Poll a game (a heartbeat): your side's view; the defender's never holds the word "
            "before the game is over", params=game, security="workerToken")},
        "/api/taboo/games/{game_id}/move": {"post": _op(
            "Say something ({say, version}) or, as the defender, guess ({guess, version}); "
            "version is the game version the page shows", params=game,
            security="workerToken")},
        "/api/taboo/games/{game_id}/leave": {"post": _op(
            "Leave the game: it ends, abandoned by you", params=game, security="workerToken")},
        "/api/studies/{study_id}/taboo/games": {"get": _op(
            "Every game with its full state and judge scores (?tournament=name)",
            params=[STUDY_ID, tournament])},
        "/api/studies/{study_id}/taboo/tournaments": {"post": _op(
            "Queue an agent-vs-agent tournament over the study's words ({name, attackers, "
            "defenders, games_per_pair?, seed?, judge?}); its games appear under "
            "?tournament=name", params=[STUDY_ID], ok="202")},
        "/api/studies/{study_id}/taboo/summary": {"get": _op(
            "Attacker / defender / tie rates and mean turns (full and filtered sets; per word, "
            "pairing and matchup; concreteness correlation) and the leaderboard",
            params=[STUDY_ID])},
        "/api/studies/{study_id}/taboo/transcripts": {"get": _op(
            "Transcripts with judge scores: jsonl (a game a line) or csv (an utterance a row)",
            params=[STUDY_ID, {"name": "format", "in": "query", "required": False,
                               "schema": {"type": "string", "enum": ["jsonl", "csv"]}},
                    tournament])},
    }  # fmt: skip


def spec() -> dict[str, Any]:
    from crowd.web.scale import openapi_paths as scale_paths

    return {
        "openapi": "3.1.0",
        "info": {
            "title": "crowd",
            "version": __version__,
            "description": "Experimenter API (Bearer API key) and worker API (signed worker "
            "token in the X-Crowd-Worker header or the crowd_worker cookie).",
        },
        "paths": {
            "/api/studies": {
                "get": _op("List your studies"),
                "post": _op("Create a study", body="NewStudy", ok="201"),
            },
            "/api/studies/{study_id}": {"get": _op("A study and its progress", params=[STUDY_ID])},
            "/api/studies/{study_id}/items": {
                "post": {
                    **_op(
                        "Import items (JSON lines, or {items: [...]})", params=[STUDY_ID], ok="201"
                    ),
                    "requestBody": {
                        "required": True,
                        "content": {
                            "application/x-ndjson": {"schema": {"type": "string"}},
                            "application/json": {"schema": {"$ref": "#/components/schemas/Items"}},
                        },
                    },
                },
            },  # fmt: skip
            "/api/studies/{study_id}/annotations": {
                "post": {
                    **_op(
                        "Import answers collected elsewhere as imported responses (all or none)",
                        params=[
                            STUDY_ID,
                            {
                                "name": "format",
                                "in": "query",
                                "schema": {"enum": ["jsonl", "csv", "roft"], "default": "jsonl"},
                            },
                            {
                                "name": "rater_group",
                                "in": "query",
                                "schema": {"type": "string", "default": "crowd"},
                            },
                            {
                                "name": "skip_duplicates",
                                "in": "query",
                                "schema": {"type": "boolean", "default": False},
                            },
                            {
                                "name": "max_sentences",
                                "in": "query",
                                "schema": {"type": "integer", "minimum": 1},
                            },
                        ],
                        ok="201",
                    ),
                    "requestBody": {
                        "required": True,
                        "description": "The file: JSON lines {worker, item, answer, rater_group?, "
                        "created_at?, explanation?, reasons?}; CSV with worker, item and answer "
                        "columns (guess | one per attribute or attribute+rating | best); or the "
                        "public RoFT CSV (boundary studies; new passages become items).",
                        "content": {
                            "application/x-ndjson": {"schema": {"type": "string"}},
                            "text/csv": {"schema": {"type": "string"}},
                        },
                    },
                },
            },
            "/api/studies/{study_id}/publish": {
                "post": _op("Publish to providers", params=[STUDY_ID], body="Publish")
            },
            "/api/studies/{study_id}/publications": {
                "get": _op(
                    "What the study was published as on crowd platforms (HITs, Prolific "
                    "studies) and the platform calls made or pending",
                    params=[STUDY_ID],
                )
            },
            "/api/studies/{study_id}/sync": {
                "post": _op(
                    "Sync with the crowd platforms now: submitted, returned and abandoned "
                    "sessions, answers recovered (crowd worker does it periodically)",
                    params=[STUDY_ID],
                )
            },
            "/api/studies/{study_id}/export": {
                "get": _op(
                    "Export responses",
                    params=[
                        STUDY_ID,
                        {
                            "name": "format",
                            "in": "query",
                            "schema": {
                                "enum": ["jsonl", "csv", "roft", "pairwise", "kway"],
                                "default": "jsonl",
                            },
                            "description": "roft: boundary only; pairwise (prompt/chosen/"
                            "rejected) and kway: comparison only",
                        },
                        {
                            "name": "set",
                            "in": "query",
                            "schema": {"enum": ["full", "filtered"], "default": "full"},
                        },
                    ],  # fmt: skip
                )
            },
            "/api/studies/{study_id}/report": {
                "get": _op("The latest report (JSON)", params=[STUDY_ID]),
                "post": _op("Refresh the report", params=[STUDY_ID], ok="202"),
            },
            "/api/studies/{study_id}/report.html": {
                "get": _op("The latest report (HTML)", params=[STUDY_ID])
            },
            "/api/studies/{study_id}/workers": {
                "get": {
                    **_op(
                        "Workers with their QC evidence, rules firing and standing",
                        params=[STUDY_ID],
                    ),
                    "parameters": [
                        STUDY_ID,
                        {
                            "name": "sort",
                            "in": "query",
                            "schema": {
                                "type": "string",
                                "description": "column, '-' prefix for descending: "
                                "worker, responses, gold_accuracy, gold_mean, attention_failed, "
                                "too_fast_share, constant_share, longest_run, flags, status",
                            },
                        },
                    ],
                }
            },
            "/api/studies/{study_id}/workers/{worker_id}": {
                "get": _op(
                    "A worker's answers in order, evidence and audit trail",
                    params=[STUDY_ID, WORKER_ID],
                )
            },
            "/api/studies/{study_id}/workers/{worker_id}/actions": {
                "post": _op(
                    "Approve, reject, soft-reject, block, unblock, bonus or note",
                    params=[STUDY_ID, WORKER_ID],
                    body="WorkerAction",
                )
            },
            "/api/studies/{study_id}/workers/bulk": {
                "post": _op(
                    "One action on every worker a rule fires on",
                    params=[STUDY_ID],
                    body="BulkAction",
                )
            },
            "/api/studies/{study_id}/audit": {
                "get": {
                    **_op("The audit log, newest first", params=[STUDY_ID]),
                    "parameters": [
                        STUDY_ID,
                        {"name": "worker", "in": "query", "schema": {"type": "integer"}},
                        {"name": "limit", "in": "query", "schema": {"type": "integer"}},
                    ],
                }
            },
            "/api/studies/{study_id}/aggregations": {
                "get": _op(
                    "Stored aggregated labels and worker skills by method", params=[STUDY_ID]
                ),
                "post": _op(
                    "Aggregate the filtered set now ({methods: [majority_vote, dawid_skene, "
                    "mace, ordinal_mean, first_change, bradley_terry]})",
                    params=[STUDY_ID],
                    ok="201",
                ),
            },
            "/api/studies/{study_id}/reward-models": {
                "get": _op(
                    "Reward-model runs, newest first: status, labels used, held-out top-1 "
                    "accuracy against chance, where the model is saved, and the job's progress",
                    params=[STUDY_ID],
                ),
                "post": _op(
                    "Queue a reward-model run on the crowd-models queue, trained from scratch "
                    "on the filtered set ({labels?: raw | majority_vote | dawid_skene | "
                    "bradley_terry, settings?: {backbone, epochs, learning_rate, batch_size, "
                    "...}})",
                    params=[STUDY_ID],
                    ok="202",
                ),
            },
            "/api/studies/{study_id}/webhooks": {
                "get": _op(
                    "The study's active webhooks (without their secrets)", params=[STUDY_ID]
                ),
                "post": _op(
                    "Subscribe a URL to events; the answer shows the signing secret, once",
                    params=[STUDY_ID],
                    body="NewWebhook",
                    ok="201",
                ),
            },
            "/api/studies/{study_id}/webhooks/{webhook_id}": {
                "delete": _op(
                    "Remove a webhook (deliveries waiting for a retry are dropped)",
                    params=[STUDY_ID, WEBHOOK_ID],
                )
            },
            "/api/studies/{study_id}/webhooks/{webhook_id}/deliveries": {
                "get": {
                    **_op(
                        "Recent deliveries with status, attempts and last error, newest first",
                        params=[STUDY_ID, WEBHOOK_ID],
                    ),
                    "parameters": [
                        STUDY_ID,
                        WEBHOOK_ID,
                        {
                            "name": "limit",
                            "in": "query",
                            "schema": {"type": "integer", "minimum": 1, "maximum": 500},
                        },
                    ],
                }
            },
            "/api/work/join": {
                "post": _op(
                    "Join as a worker (open-web players need no key)",
                    body="Join",
                    ok="201",
                    security=None,
                )  # fmt: skip
            },
            "/api/work/me": {"get": _op("Who am I", security="workerToken")},
            "/api/work/studies/{study_id}/next": {
                "post": _op(
                    "Your open assignment or a new one ({done: true} when none is left)",
                    params=[STUDY_ID],
                    body="Next",
                    security="workerToken",
                )  # fmt: skip
            },
            "/api/work/assignments/{assignment_id}": {
                "get": _op("Assignment view", params=[ASSIGNMENT_ID], security="workerToken")
            },
            "/api/work/assignments/{assignment_id}/step": {
                "post": _op(
                    "One step: {step, choice} (boundary, comparison) or {step, rating} (likert)",
                    params=[ASSIGNMENT_ID],
                    body="Step",
                    security="workerToken",
                )  # fmt: skip
            },
            "/api/work/assignments/{assignment_id}/explanation": {
                "post": _op(
                    "Explain a machine guess; the reveal follows",
                    params=[ASSIGNMENT_ID],
                    body="Explanation",
                    security="workerToken",
                )  # fmt: skip
            },
            "/api/work/assignments/{assignment_id}/return": {
                "post": _op(
                    "Give an open assignment back", params=[ASSIGNMENT_ID], security="workerToken"
                )  # fmt: skip
            },
            **taboo_paths(),
            "/api/play/leaderboard": {"get": _op("Game leaderboard", security=None)},
            "/api/play/profile": {"get": _op("Your game profile", security="workerToken")},
            **scale_paths(),
        },
        "components": {
            "securitySchemes": {
                "apiKey": {"type": "http", "scheme": "bearer"},
                "workerToken": {"type": "apiKey", "in": "header", "name": "X-Crowd-Worker"},
                # The Scale-compatible /v1 API: the API key as Basic auth's user name.
                "scaleBasic": {"type": "http", "scheme": "basic"},
            },
            "schemas": {
                "Error": {
                    "type": "object",
                    "properties": {"error": {"type": "string"}, "type": {"type": "string"}},
                },
                "NewStudy": {
                    "type": "object",
                    "required": ["name", "hit_type"],
                    "properties": {
                        "name": {"type": "string"},
                        "hit_type": {"enum": ["boundary", "likert", "comparison"]},
                        "config": {
                            "type": "object",
                            "description": "Unknown keys are refused. boundary: "
                            "require_explanation. likert: template (story | attack), "
                            "instructions, attributes [{name, question, scale, labels, "
                            "show_prompt, show_reference}], group_order (mixed | sequential), "
                            "groups. comparison: template (sentiment | descriptiveness | "
                            "summarization), instructions, overlap_share, overlap_workers, "
                            "expert_groups. Every type: qc {gold {threshold, credibility, "
                            "min_gold, trusted, min_rate, max_rate, prior}, qualification "
                            "{min_accuracy}, anomalies {...}, rules [{name, metric, op, "
                            "threshold, action, min_evidence}]}.",
                            "properties": {
                                "annotations_per_item": {"type": "integer", "minimum": 1},
                                "attention_rate": {
                                    "type": "number",
                                    "minimum": 0,
                                    "exclusiveMaximum": 1,
                                },
                                "require_explanation": {"type": "boolean"},
                            },
                        },
                    },
                },
                "Items": {
                    "type": "object",
                    "properties": {
                        "items": {
                            "type": "array",
                            "items": {
                                "oneOf": [
                                    {"$ref": "#/components/schemas/BoundaryItem"},
                                    {"$ref": "#/components/schemas/LikertItem"},
                                    {"$ref": "#/components/schemas/ComparisonItem"},
                                ]
                            },
                        }
                    },
                },
                "BoundaryItem": {
                    "type": "object",
                    "required": ["id", "sentences"],
                    "properties": {
                        "id": {"type": "string"},
                        "kind": {"enum": ["real", "gold", "attention"]},
                        "sentences": {"type": "array", "items": {"type": "string"}},
                        "boundary": {"type": "integer", "minimum": 1},
                        "category": {"type": "string"},
                        "generator": {"type": "string"},
                        "decoding": {"type": "object"},
                        "prompt_source": {"type": "string"},
                    },
                },
                "LikertItem": {
                    "type": "object",
                    "required": ["id", "text"],
                    "properties": {
                        "id": {"type": "string"},
                        "kind": {"enum": ["real", "gold", "attention"]},
                        "text": {"type": "string"},
                        "prompt": {"type": "string"},
                        "reference": {"type": "string"},
                        "group": {"type": "string"},
                        "expected_rating": {"type": "integer"},
                        "expected_ratings": {"type": "object"},
                        "meta": {"type": "object"},
                    },
                },
                "ComparisonItem": {
                    "type": "object",
                    "required": ["id", "query", "candidates"],
                    "properties": {
                        "id": {"type": "string"},
                        "kind": {"enum": ["real", "gold", "attention", "training"]},
                        "query": {"type": "string"},
                        "candidates": {
                            "type": "array",
                            "minItems": 2,
                            "items": {
                                "type": "object",
                                "properties": {
                                    "text": {"type": "string"},
                                    "policy": {"type": "string"},
                                },
                            },
                        },
                        "best": {"type": "integer", "minimum": 0},
                        "category": {"type": "string"},
                        "meta": {"type": "object"},
                    },
                },
                "Publish": {
                    "type": "object",
                    "properties": {
                        "providers": {
                            "type": "array",
                            "items": {"enum": ["local", "sim", "mturk", "prolific"]},
                        },
                        "options": {
                            "type": "object",
                            "description": 'Options per platform provider, e.g. {"mturk": '
                            '{"reward": "0.50", "sandbox": true, "items_per_session": '
                            "10}}; `crowd mturk options` / `crowd prolific options` list them",
                            "additionalProperties": {"type": "object"},
                        },
                    },
                },
                "Join": {
                    "type": "object",
                    "properties": {
                        "provider": {"enum": ["local", "sim"]},
                        "name": {"type": "string"},
                        "external_id": {"type": "string"},
                    },
                },
                "Next": {"type": "object", "properties": {"category": {"type": "string"}}},
                "Step": {
                    "type": "object",
                    "required": ["step"],
                    "properties": {
                        "step": {"type": "integer", "description": "task.step of the view"},
                        "choice": {
                            "description": "boundary: human | machine; comparison: the "
                            "position of the picked candidate as shown",
                            "oneOf": [{"enum": ["human", "machine"]}, {"type": "integer"}],
                        },
                        "rating": {"type": "number", "description": "likert: the rating"},
                        "sim_seconds": {
                            "type": "number",
                            "description": "simulated workers "
                            "only: the simulated time the step took",
                        },
                    },
                },
                "WorkerAction": {
                    "type": "object",
                    "required": ["action"],
                    "properties": {
                        "action": {
                            "enum": [
                                "approve",
                                "reject",
                                "soft_reject",
                                "block",
                                "unblock",
                                "bonus",
                                "note",
                                "notify",
                                "qualify",
                            ]
                        },
                        "reason": {
                            "type": "string",
                            "description": "feedback for reject, "
                            "the note's text, why for soft_reject, block and bonus, the "
                            "message for notify",
                        },
                        "subject": {"type": "string", "description": "notify: subject line"},
                        "qualification": {
                            "type": "string",
                            "description": "qualify: the platform's qualification type id",
                        },
                        "value": {"type": "integer", "description": "qualify: its value"},
                        "amount": {"type": "string", "description": "bonus in dollars, e.g. 0.50"},
                        "token": {"type": "string", "description": "bonus idempotency token"},
                    },
                },
                "BulkAction": {
                    "type": "object",
                    "required": ["rule", "action"],
                    "properties": {
                        "rule": {"type": "string"},
                        "action": {"enum": ["approve", "reject", "soft_reject", "block", "note"]},
                        "reason": {"type": "string"},
                    },
                },
                "NewWebhook": {
                    "type": "object",
                    "required": ["url", "events"],
                    "description": "Each event is POSTed as JSON {event, study_id, created_at, "
                    "data} with the headers X-Crowd-Event, X-Crowd-Delivery and "
                    "X-Crowd-Signature: t=<unix time>,v1=<hex HMAC-SHA256(secret, "
                    "'<t>.<body>')>; non-2xx answers are retried with backoff for 24 h.",
                    "properties": {
                        "url": {"type": "string", "format": "uri", "maxLength": 2000},
                        "events": {
                            "type": "array",
                            "minItems": 1,
                            "items": {
                                "enum": [
                                    "response.stored",
                                    "item.complete",
                                    "study.complete",
                                    "worker.blocked",
                                ]
                            },
                        },
                    },
                },
                "Explanation": {
                    "type": "object",
                    "properties": {
                        "explanation": {"type": "string"},
                        "reasons": {"type": "array", "items": {"type": "string"}},
                        "typing": {
                            "type": "object",
                            "description": "how the text was entered, as the page saw it",
                            "properties": {
                                name: {"type": "integer", "minimum": 0}
                                for name in ("keys", "pastes", "pasted_chars", "typing_ms")
                            },
                        },
                    },
                },
            },  # fmt: skip
        },
    }


@bp.get("/openapi.json")
def openapi_json() -> dict[str, Any]:
    return spec()
