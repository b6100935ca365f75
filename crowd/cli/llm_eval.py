"""crowd llm-eval: a local language model rates a Likert study as one more rater group."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import click

from crowd.cli.common import handle_errors, open_database, study_of_cli

# Defaults and help come from LLMEvalConfig, so the CLI and the job cannot drift apart; the
# config module imports no torch, so `crowd --help` stays fast.
from models.llm_eval.config import LLMEvalConfig

_DEFAULTS = LLMEvalConfig(model="-")


def _help(name: str) -> str:
    return LLMEvalConfig.help(name)


TEMPERATURE_HELP = (
    f"{LLMEvalConfig.help('temperature')} Repeat for a sweep: each temperature becomes its own "
    f"rater group, suffixed @t<temperature>.  [default: {_DEFAULTS.temperature:g}]"
)
GROUP_HELP = (
    "Rater group of the ratings (default: llm:<model directory name>). Running a group again "
    "replaces its earlier LLM ratings."
)
SANITY_HELP = (
    "First ask about two identical titles, which must get the top meaning-preservation "
    "score, and print the answers' ratings."
)
QUEUE_HELP = (
    "Queue the evaluation on the crowd-models queue for `crowd worker` and print the job "
    "id, instead of running it here."
)


@click.command("llm-eval")
@click.argument("study_id", metavar="STUDY", type=int)
@click.option("--model", required=True, metavar="PATH", help=_help("model"))
@click.option(
    "--samples", type=int, default=_DEFAULTS.samples, show_default=True, help=_help("samples")
)
@click.option(
    "--top-p", type=float, default=_DEFAULTS.top_p, show_default=True, help=_help("top_p")
)
@click.option("--temperature", "temperatures", type=float, multiple=True, help=TEMPERATURE_HELP)
@click.option("--persona", default=None, metavar="TEXT", help=_help("persona"))
@click.option("--explain", is_flag=True, help=_help("explain"))
@click.option("--group", "rater_group", default=None, metavar="NAME", help=GROUP_HELP)
@click.option(
    "--max-new-tokens",
    type=int,
    default=_DEFAULTS.max_new_tokens,
    show_default=True,
    help=_help("max_new_tokens"),
)
@click.option("--seed", type=int, default=_DEFAULTS.seed, show_default=True, help=_help("seed"))
@click.option(
    "--batch-size",
    type=int,
    default=_DEFAULTS.batch_size,
    show_default=True,
    help=_help("batch_size"),
)
@click.option("--device", default=_DEFAULTS.device, show_default=True, help=_help("device"))
@click.option("--sanity-check", is_flag=True, help=SANITY_HELP)
@click.option("--queue", "queued", is_flag=True, help=QUEUE_HELP)
@handle_errors
def llm_eval(
    study_id: int,
    model: str,
    samples: int,
    top_p: float,
    temperatures: tuple[float, ...],
    persona: str | None,
    explain: bool,
    rater_group: str | None,
    max_new_tokens: int,
    seed: int,
    batch_size: int,
    device: str,
    sanity_check: bool,
    queued: bool,
) -> None:
    """Let a local language model rate a Likert study, as Chiang & Lee (2023) did.

    The model (a local transformers directory; nothing is downloaded) gets what human raters
    see: the instructions, the text, the prompt or title 1 where the question shows them,
    the question and its scale. It answers SAMPLES times per text and question; the first
    number of an answer, after phrases such as "1-5" or "out of 5" are removed, is the
    rating, and an answer without one is a missing rating (never 0). Sample k of every
    answer is stored as worker "<group>/s<k>" of provider "llm" in the rater group, so the
    study's report compares the model with the people; the raw answers and prompts are kept
    in the responses' events.

    \b
    crowd llm-eval 3 --model ~/models/qwen2.5-7b-instruct
    crowd llm-eval 3 --model ./lm --temperature 0.3 --temperature 0.7 --temperature 1.0
    crowd llm-eval 3 --model ./lm --persona "You are an English teacher." --explain --queue
    """
    from crowd.ml.llm_eval import likert_study, split_options

    if queued and sanity_check:
        raise click.UsageError("--sanity-check runs here, before rating: drop it with --queue")
    options: dict[str, Any] = {
        "model": model,
        "samples": samples,
        "top_p": top_p,
        "temperature": temperatures[0] if temperatures else _DEFAULTS.temperature,
        "max_new_tokens": max_new_tokens,
        "persona": persona,
        "explain": explain,
        "seed": seed,
        "batch_size": batch_size,
        "device": device,
        "temperatures": list(temperatures) or None,
        "rater_group": rater_group,
    }
    config, sweep, group = split_options(options)
    settings, db = open_database()
    with db.read_session() as session:
        study_of_cli(session, settings, study_id)
        likert_study(session, study_id)  # a wrong study fails now, not in the worker
    if queued:
        # The worker runs elsewhere (another directory, maybe another machine): an absolute
        # path, not one relative to this shell.
        given = Path(model).expanduser()
        if given.is_dir():
            options["model"] = str(given.resolve())
        _enqueue(settings, study_id, options)
        return
    from dataclasses import replace

    from crowd.ml.llm_eval import model_path, run_llm_sweep

    if sanity_check:
        _sanity_check(replace(config, model=model_path(settings, config.model)))
    with click.progressbar(length=1000, label="rating", show_percent=True) as bar:
        shown = 0

        def progress(fraction: float) -> None:
            nonlocal shown
            target = int(fraction * 1000)
            if target > shown:
                bar.update(target - shown)
                shown = target

        summaries = run_llm_sweep(db, settings, study_id, config, sweep, group, progress)
    for summary in summaries:
        click.echo(
            f"{summary.rater_group}: {summary.items} items x {summary.attributes} questions x "
            f"{summary.samples} samples at temperature {summary.temperature:g} -> "
            f"{summary.responses} responses, {summary.ratings} ratings, {summary.missing} "
            f"missing (answers without a rating)"
            + (f"; replaced {summary.replaced} earlier responses" if summary.replaced else "")
        )
    click.echo(
        f"the report refreshes when `crowd worker` runs, or now: crowd study report {study_id}"
    )


def _sanity_check(config: LLMEvalConfig) -> None:
    from models.llm_eval.evaluator import LLMEvaluator, sanity_check

    check = sanity_check(LLMEvaluator(config))
    verdict = "passed" if check.passed else "FAILED"
    given = ", ".join("-" if a.rating is None else f"{a.rating:g}" for a in check.answers)
    click.echo(
        f"sanity check {verdict}: two identical titles got meaning preservation {given} "
        f"(top score {check.top})"
    )


def _enqueue(settings: Any, study_id: int, options: dict[str, Any]) -> None:
    import redis

    from crowd.exceptions import ConfigurationError
    from crowd.ml.llm_eval import LLM_EVAL_QUEUE, enqueue_llm_eval
    from crowd.queue import redis_connection
    from crowd.queue.runner import embedded_dir

    url = settings.redis_url
    if not url:
        embedded = embedded_dir(settings)
        url = embedded.url if embedded.socket.exists() else None
    if not url:
        raise ConfigurationError(
            "no Redis to queue on: set CROWD_REDIS_URL, or start `crowd worker` (it runs the "
            "embedded Redis), or run without --queue"
        )
    try:
        job = enqueue_llm_eval(redis_connection(url), study_id, options)
    except redis.RedisError as error:
        raise ConfigurationError(
            f"Redis at {url} did not take the job ({error}): start `crowd worker` or set "
            "CROWD_REDIS_URL, or run without --queue"
        ) from None
    click.echo(job.id)
    click.echo(
        f"queued on {LLM_EVAL_QUEUE}: `crowd worker` runs it; its progress is the job's "
        "meta['progress']"
    )
