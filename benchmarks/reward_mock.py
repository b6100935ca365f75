"""The reward model on the mock labeling task: held-out top-1 accuracy against label count.

Like the mock sentiment task of Ziegler et al. (2019, section 3.1): queries of about 50
tokens, 4 continuations of about 20 tokens each, a hidden rule (positive minus negative
words) and a noisy simulated labeler (softmax over the rule at temperature 1.0) that picks
the best of 4 (models/reward/mock.py). For each training-set size the reward model is trained
from scratch on the real all-MiniLM-L6-v2 encoder with the paper's settings (1 epoch, Adam,
lr 1.77e-5, 8 labels a step, dropout off; RewardConfig's defaults) and scored on the same
held-out labels:

- top-1 vs label: how often the model's highest reward is the labeler's (noisy) choice;
- top-1 vs true best: how often the model's pick is a candidate with the top hidden-rule
  utility (ties count, as in true_best_accuracy);
- the references: chance (1/K), the hidden rule itself scored against the noisy labels (the
  best a perfect model can expect in the first column), and the labeler's ceiling
  (true_best_accuracy: how often the noisy label is a truly-best candidate).

The training sets are nested: the first n labels of one pool drawn with --seed; the held-out
labels are drawn with seed + 1000, so no query repeats. Seconds count the training loop only
(tokenization, model loading and the held-out evaluation are outside); torch runs 1
thread unless --threads says otherwise. The rewards are not
normalized afterwards (normalize=False): the gain and bias leave the accuracy as it is.

    .venv/bin/python benchmarks/reward_mock.py --sizes 250,1000,4000 --held-out 500 --write
"""

from __future__ import annotations

import argparse
import datetime as dt
import os
import platform
import random
import re
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

RESULTS = Path(__file__).resolve().parent / "RESULTS.md"
SECTION = "## Reward model: mock labeler"


# -- shared with reward_speed.py -------------------------------------------------------------


def cpu_name() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def machine_line() -> str:
    import torch

    threads = torch.get_num_threads()
    return (f"{os.cpu_count()} CPUs ({cpu_name()}), torch {torch.__version__} with "
            f"{threads} thread{'' if threads == 1 else 's'}, Python {platform.python_version()}, "
            f"{platform.system()}")  # fmt: skip


def load_text(load: tuple[float, float, float]) -> str:
    return " / ".join(f"{value:.2f}" for value in load)


def command_line() -> str:
    """The command as run, relative to the repository root."""
    script = Path(sys.argv[0]).resolve()
    try:
        shown = str(script.relative_to(ROOT))
    except ValueError:
        shown = str(script)
    return " ".join([".venv/bin/python", shown, *sys.argv[1:]])


def write_section(heading: str, body: str, path: Path = RESULTS) -> None:
    """Replace the section that starts at `heading` (up to the next heading of level 1 or 2)
    in RESULTS.md, or append it; the rest of the file is kept as it is."""
    text = path.read_text() if path.exists() else ""
    block = heading + "\n\n" + body.strip() + "\n"
    lines = text.splitlines(keepends=True)
    start = next((i for i, line in enumerate(lines) if line.rstrip() == heading), None)
    if start is None:
        new = text.rstrip("\n") + "\n\n" + block if text.strip() else block
    else:
        end = next((j for j in range(start + 1, len(lines))
                    if re.match(r"#{1,2} ", lines[j])), len(lines))  # fmt: skip
        tail = "".join(lines[end:])
        new = "".join(lines[:start]) + block + ("\n" + tail if tail else "")
    path.write_text(new)


def markdown_table(header: list[str], rows: list[list[Any]]) -> str:
    out = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    out += ["| " + " | ".join(str(cell) for cell in row) + " |" for row in rows]
    return "\n".join(out)


# -- the experiment --------------------------------------------------------------------------


def held_out_scores(trainer: Any, comparisons: list[Any]) -> list[list[float]]:
    """The trained model's rewards of every held-out candidate, (labels, K)."""
    import torch

    trainer.model.eval()
    labels = trainer.tokenize(comparisons)
    scores: list[list[float]] = []
    with torch.inference_mode():
        for batch in trainer.batches(labels, trainer.config.eval_batch_size, shuffle=False):
            scores.extend(trainer.rewards(trainer.collate(batch)).cpu().tolist())
    return scores


def pick(values: list[float]) -> int:
    return max(range(len(values)), key=lambda i: values[i])


def top1(picks: list[int], comparisons: list[Any]) -> tuple[float, float]:
    """(accuracy against the noisy label, accuracy against the true best, ties counting)."""
    from models.reward.mock import utility

    vs_label = vs_true = 0
    for chosen, comparison in zip(picks, comparisons, strict=True):
        truth = [utility(text) for text in comparison.candidates]
        vs_label += chosen == comparison.best
        vs_true += truth[chosen] == max(truth)
    n = len(comparisons)
    return vs_label / n, vs_true / n


def run(sizes: list[int], held_n: int, seed: int) -> dict[str, Any]:
    from models.reward.config import RewardConfig
    from models.reward.mock import mock_comparisons, true_best_accuracy, utility
    from models.reward.trainer import RewardTrainer

    pool = mock_comparisons(max(sizes), seed=seed)
    held = mock_comparisons(held_n, seed=seed + 1000)
    rows = []
    for n in sizes:
        load = os.getloadavg()
        config = RewardConfig(backbone="minilm", seed=seed, normalize=False)
        trainer = RewardTrainer(config)
        result = trainer.train(pool[:n], held)
        scores = held_out_scores(trainer, held)
        vs_label, vs_true = top1([pick(s) for s in scores], held)
        if abs(vs_label - float(result.held_out["accuracy"])) > 1e-3:
            raise SystemExit(f"our scoring ({vs_label}) disagrees with evaluate() "
                             f"({result.held_out['accuracy']})")  # fmt: skip
        rows.append({"labels": n, "seconds": result.seconds, "vs_label": vs_label,
                     "labels_per_second": result.labels_per_second, "vs_true": vs_true,
                     "loss": result.held_out["loss"], "load": load})  # fmt: skip
        print(f"[{n} labels] train {result.seconds:.1f} s ({result.labels_per_second:.2f} "
              f"labels/s), top-1 vs label {vs_label:.3f}, vs true best {vs_true:.3f}, "
              f"held-out loss {result.held_out['loss']}, load before {load_text(load)}",
              flush=True)  # fmt: skip
        del trainer
    # The hidden rule as a "model" (ties broken at random): the best the label column allows.
    rng = random.Random(seed)
    rule_picks, chance_true = [], 0.0
    for comparison in held:
        truth = [utility(text) for text in comparison.candidates]
        tops = [i for i, u in enumerate(truth) if u == max(truth)]
        rule_picks.append(rng.choice(tops))
        chance_true += len(tops) / len(truth) / len(held)
    rule_vs_label, _ = top1(rule_picks, held)
    return {
        "rows": rows,
        "held_out": held_n,
        "chance": sum(1 / c.k for c in held) / len(held),
        "chance_true": chance_true,
        "rule_vs_label": rule_vs_label,
        "ceiling": true_best_accuracy(held),
        "seed": seed,
    }


def table(report: dict[str, Any]) -> str:
    header = ["train labels", "train s (loop)", "labels/s", "held-out top-1 vs label",
              "top-1 vs true best", "held-out loss", "load 1/5/15 min before"]  # fmt: skip
    rows: list[list[Any]] = [
        [r["labels"], f"{r['seconds']:.1f}", f"{r['labels_per_second']:.2f}",
         f"{r['vs_label']:.3f}", f"{r['vs_true']:.3f}", f"{r['loss']:.3f}", load_text(r["load"])]
        for r in report["rows"]
    ]  # fmt: skip
    rows.append(["chance (a random pick)", "-", "-", f"{report['chance']:.3f}",
                 f"{report['chance_true']:.3f}", "-", "-"])  # fmt: skip
    rows.append(["hidden rule (a perfect model)", "-", "-", f"{report['rule_vs_label']:.3f}",
                 "1.000", "-", "-"])  # fmt: skip
    rows.append(["labeler's ceiling (true_best_accuracy)", "-", "-", "-",
                 f"{report['ceiling']:.3f}", "-", "-"])  # fmt: skip
    return markdown_table(header, rows)


def section(report: dict[str, Any], when: str) -> str:
    import transformers

    n = report["held_out"]
    best = report["rows"][-1]
    return "\n".join([
        f"`benchmarks/reward_mock.py` (`make bench-reward`): see its docstring. Measured {when} "
        f"with `{command_line()}`.",
        "",
        f"- Machine: {machine_line()}, transformers {transformers.__version__}; the CPU may "
        "be shared with other processes (load averages in the table).",
        "- Model: crowd's RewardTrainer on the bundled all-MiniLM-L6-v2 encoder (mean pooling, "
        "packed rows with share_query=True), trained from scratch for each size: 1 epoch, Adam, "
        "lr 1.77e-5, 8 labels a step, dropout off, max length 128, fp32.",
        f"- Data: mock best-of-4 labels (models/reward/mock.py, labeler temperature 1.0, seed "
        f"{report['seed']}); the training sets are nested; the same {n} held-out labels (seed "
        f"{report['seed'] + 1000}) for every row.",
        "",
        table(report),
        "",
        f"At {best['labels']} labels the model picks the labeler's choice on "
        f"{best['vs_label']:.1%} of held-out labels (chance {report['chance']:.0%}; the hidden "
        f"rule itself scores {report['rule_vs_label']:.1%} against these noisy labels) and a "
        f"truly-best candidate on {best['vs_true']:.1%} (the noisy labels themselves: "
        f"{report['ceiling']:.1%}). Seconds count the training loop only.",
    ])  # fmt: skip


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", default="250,1000,4000",
                        help="training-set sizes in labels, comma-separated")  # fmt: skip
    parser.add_argument("--held-out", type=int, default=500, help="held-out labels")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--threads", type=int, default=1,
                        help="torch threads (0: torch's default); 1, as on a shared 2-core "
                        "machine 2 threads stall when another process holds a core")  # fmt: skip
    parser.add_argument("--write", action="store_true",
                        help=f"write the '{SECTION[3:]}' section of RESULTS.md")  # fmt: skip
    args = parser.parse_args(argv)
    sizes = sorted({int(s) for s in args.sizes.split(",") if s.strip()})
    if not sizes or min(sizes) < 1 or args.held_out < 1:
        parser.error("give positive --sizes and --held-out")
    if args.threads > 0:
        import torch

        torch.set_num_threads(args.threads)
    when = dt.datetime.now(dt.UTC).strftime("%Y-%m-%d %H:%M UTC")
    print(f"{when}: {machine_line()}; load before {load_text(os.getloadavg())}", flush=True)
    report = run(sizes, args.held_out, args.seed)
    print()
    print(table(report))
    if args.write:
        write_section(SECTION, section(report, when))
        print(f"\nwrote '{SECTION}' in {RESULTS}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
