"""Reward-model training speed: crowd's RewardTrainer against TRL's RewardTrainer (pinned).

Same backbone (the bundled all-MiniLM-L6-v2 encoder), same labels (mock best-of-4 labels from
models/reward/mock.py), same hardware and settings: 1 epoch, lr 1.77e-5, Adam (TRL: AdamW
with weight_decay 0, the same update), a constant learning rate, no gradient clipping, fp32 on
the CPU, dropout off, no evaluation during training, no saving, no logging, dataloader
workers 0, max length 128.

- crowd (packed): RewardTrainer with share_query=True (the default): each label is one row,
  the query once and its 4 candidates behind a block attention mask; K-way softmax loss;
  8 labels a step.
- crowd (share_query=False): the same trainer with one row per (query, candidate): 4
  sequences per label; shows what the packing contributes.
- TRL: trl.RewardTrainer on AutoModelForSequenceClassification(num_labels=1) with dropout 0
  in its config. Each best-of-4 label becomes 3 (prompt, chosen, rejected) pairs, chosen =
  the labelled best, 2 sequences each: 6 sequences per label; 24 pairs a step is the same 8
  labels a step as ours (and, with --arms, 8 pairs a step). Its Bradley-Terry pair loss.

Both sides get the same token ids: [CLS] query [SEP] candidate [SEP], cut to 128 tokens by
crowd's tokenizer (RewardModel.tokenize); TRL takes them as a processed dataset (chosen_ids,
rejected_ids), so its max_length (128) filter drops nothing. Seconds count the training loop
only, excluding model loading and tokenization on both sides: crowd's TrainResult.seconds
(from the first batch to the last optimizer step, collation included) and, for TRL, the time
from the Trainer's on_train_begin to on_train_end callbacks (its collation included).
labels/s = training labels / seconds. Accuracy: held-out top-1 (the highest reward among a
label's 4 candidates is the labelled best); for TRL each of the 4 candidates is scored by the
trained model and the argmax taken. As the CPU may be shared, the arms are interleaved
(crowd, TRL, crowd flat; then again) for --repeats rounds, the median is reported and the
load average before each run is recorded, with each run's process CPU time over the same
interval. torch runs 1 thread by default (--threads): on a 2-core machine shared with other
processes a 2-thread run stalls whenever another process holds a core.
`--arms ours,trl24,flat,trl8` adds TRL at 8 pairs a step (three times the steps; not in the
default run, to keep it short).

    .venv/bin/python benchmarks/reward_speed.py --labels 1000 --held-out 500 --repeats 2 --write
"""

from __future__ import annotations

import argparse
import datetime as dt
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("HF_HUB_DISABLE_TELEMETRY", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

sys.path.insert(0, str(Path(__file__).resolve().parent))
from reward_mock import (  # noqa: E402
    ROOT,
    command_line,
    load_text,
    machine_line,
    markdown_table,
    write_section,
)

if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

SECTION = "## Reward model: speed against TRL"
LR = 1.77e-5
MAX_LENGTH = 128
LABELS_PER_STEP = 8
DEFAULT_ARMS = "ours,trl24,flat"
ARMS = {
    "ours": "crowd RewardTrainer (packed, share_query=True)",
    "trl24": "TRL RewardTrainer, 24 pairs a step",
    "flat": "crowd RewardTrainer (share_query=False)",
    "trl8": "TRL RewardTrainer, 8 pairs a step",
}


def encode(comparisons: list[Any]) -> list[Any]:
    """Token ids of every label, by crowd's tokenizer (the same ids feed both trainers)."""
    from models.reward.config import RewardConfig
    from models.reward.model import RewardModel

    model = RewardModel.from_backbone(RewardConfig(backbone="minilm", max_length=MAX_LENGTH))
    return [model.tokenize(c.query, c.candidates) for c in comparisons]


def tokens_per_label(comparisons: list[Any], encoded: list[Any], arm: str) -> float:
    """Tokens (no padding) that go through the backbone per label in training."""
    total = 0
    for comparison, e in zip(comparisons, encoded, strict=True):
        q, cands = len(e.query), [len(c) for c in e.candidates]
        k = len(cands)
        if arm == "ours":
            total += q + sum(cands)
        elif arm == "flat":
            total += k * q + sum(cands)
        else:  # K-1 pairs, chosen and rejected each with the query
            total += 2 * (k - 1) * q + (k - 1) * cands[comparison.best] + sum(cands)
            total -= cands[comparison.best]
    return total / len(encoded)


def run_ours(train: list[Any], held: list[Any], seed: int, share_query: bool) -> dict[str, Any]:
    from models.reward.config import RewardConfig
    from models.reward.trainer import Progress, RewardTrainer

    class Timed(RewardTrainer):
        """Notes the process CPU time from the end of tokenization to the end of the loop."""

        cpu_start: float | None = None
        cpu_end: float | None = None

        def tokenize(self, comparisons: Any) -> Any:
            labels = super().tokenize(comparisons)
            if self.cpu_start is None:
                self.cpu_start = time.process_time()
            return labels

        def on_step(self, progress: Progress) -> None:
            if progress.phase in ("evaluate", "normalize", "done") and self.cpu_end is None:
                self.cpu_end = time.process_time()
            super().on_step(progress)

    config = RewardConfig(backbone="minilm", seed=seed, share_query=share_query, normalize=False,
                          epochs=1, learning_rate=LR, batch_size=LABELS_PER_STEP, dropout=0.0,
                          max_length=MAX_LENGTH, device="cpu", bf16=False)  # fmt: skip
    trainer = Timed(config)  # model loading: not timed
    result = trainer.train(train, held)  # tokenizes, then times the loop only
    assert trainer.cpu_start is not None and trainer.cpu_end is not None
    return {"seconds": result.seconds, "labels": result.labels, "steps": result.steps,
            "accuracy": float(result.held_out["accuracy"]), "loss": result.final_loss,
            "cpu": trainer.cpu_end - trainer.cpu_start}  # fmt: skip


def trl_pairs(comparisons: list[Any], encoded: list[Any]) -> list[dict[str, list[int]]]:
    rows = []
    for comparison, e in zip(comparisons, encoded, strict=True):
        chosen = list(e.query) + list(e.candidates[comparison.best])
        for index, candidate in enumerate(e.candidates):
            if index != comparison.best:
                rows.append({"chosen_ids": chosen, "rejected_ids": list(e.query) + list(candidate)})
    return rows


def trl_accuracy(model: Any, held: list[Any], encoded: list[Any], pad_id: int) -> float:
    """Top-1: each held-out candidate scored by the trained model, the argmax against the label."""
    import torch

    model.eval()
    hits = 0
    size = 32
    with torch.inference_mode():
        for start in range(0, len(held), size):
            labels = held[start : start + size]
            seqs = [list(e.query) + list(c) for e in encoded[start : start + size]
                    for c in e.candidates]  # fmt: skip
            width = max(len(s) for s in seqs)
            ids = torch.full((len(seqs), width), pad_id, dtype=torch.long)
            mask = torch.zeros((len(seqs), width), dtype=torch.long)
            for r, s in enumerate(seqs):
                ids[r, : len(s)] = torch.tensor(s)
                mask[r, : len(s)] = 1
            scores = model(input_ids=ids, attention_mask=mask).logits[:, 0].view(len(labels), -1)
            best = torch.tensor([c.best for c in labels])
            hits += int((scores.argmax(dim=1) == best).sum())
    return hits / len(held)


def run_trl(train: list[Any], held: list[Any], enc_train: list[Any], enc_held: list[Any],
            seed: int, pairs_per_step: int) -> dict[str, Any]:  # fmt: skip
    import datasets
    import torch
    from datasets import Dataset
    from transformers import (
        AutoConfig,
        AutoModelForSequenceClassification,
        AutoTokenizer,
        TrainerCallback,
    )
    from transformers.trainer_callback import PrinterCallback
    from trl import RewardConfig as TRLRewardConfig
    from trl import RewardTrainer as TRLRewardTrainer

    from models.backbones import minilm_path

    path = str(minilm_path())
    config = AutoConfig.from_pretrained(path, num_labels=1)
    config.hidden_dropout_prob = 0.0
    config.attention_probs_dropout_prob = 0.0
    config.classifier_dropout = 0.0
    torch.manual_seed(seed)
    model = AutoModelForSequenceClassification.from_pretrained(path, config=config)
    tokenizer = AutoTokenizer.from_pretrained(path)
    datasets.disable_progress_bars()
    dataset = Dataset.from_list(trl_pairs(train, enc_train))

    class Clock(TrainerCallback):
        began = ended = cpu_began = cpu_ended = 0.0

        def on_train_begin(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
            Clock.began, Clock.cpu_began = time.perf_counter(), time.process_time()

        def on_train_end(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
            Clock.ended, Clock.cpu_ended = time.perf_counter(), time.process_time()

    with tempfile.TemporaryDirectory(prefix="trl-bench-") as out:
        args = TRLRewardConfig(
            output_dir=out, num_train_epochs=1, per_device_train_batch_size=pairs_per_step,
            learning_rate=LR, optim="adamw_torch", weight_decay=0.0, adam_beta1=0.9,
            adam_beta2=0.999, adam_epsilon=1e-8, lr_scheduler_type="constant", warmup_steps=0,
            max_grad_norm=0.0, gradient_accumulation_steps=1, use_cpu=True, bf16=False,
            fp16=False, gradient_checkpointing=False, disable_dropout=True,
            max_length=MAX_LENGTH, center_rewards_coefficient=None, eval_strategy="no",
            save_strategy="no", logging_strategy="no", report_to="none", disable_tqdm=True,
            dataloader_num_workers=0, dataloader_pin_memory=False, seed=seed, data_seed=seed,
        )  # fmt: skip
        trainer = TRLRewardTrainer(model=model, args=args, train_dataset=dataset,
                                   processing_class=tokenizer, callbacks=[Clock()])  # fmt: skip
        trainer.remove_callback(PrinterCallback)  # its end-of-training print, not a log
        kept = len(trainer.train_dataset)
        if kept != len(dataset):
            raise SystemExit(f"TRL's max_length filter dropped {len(dataset) - kept} pairs")
        output = trainer.train()
        seconds = Clock.ended - Clock.began
        accuracy = trl_accuracy(trainer.model, held, enc_held, tokenizer.pad_token_id or 0)
    return {"seconds": round(seconds, 3), "labels": len(train), "steps": output.global_step,
            "accuracy": accuracy, "loss": output.training_loss, "pairs": kept,
            "cpu": Clock.cpu_ended - Clock.cpu_began}  # fmt: skip


def run(n_train: int, n_held: int, seed: int, repeats: int, arms: list[str]) -> dict[str, Any]:
    from models.reward.mock import mock_comparisons

    train = mock_comparisons(n_train, seed=seed)
    held = mock_comparisons(n_held, seed=seed + 1000)
    enc_train, enc_held = encode(train), encode(held)
    runs: dict[str, list[dict[str, Any]]] = {arm: [] for arm in arms}
    for round_ in range(1, repeats + 1):
        for arm in arms:
            load = os.getloadavg()
            if arm in ("ours", "flat"):
                out = run_ours(train, held, seed, share_query=arm == "ours")
            else:
                out = run_trl(train, held, enc_train, enc_held, seed, int(arm[3:]))
            out["load"] = load
            runs[arm].append(out)
            print(f"[round {round_}] {ARMS[arm]}: {out['seconds']:.1f} s ({out['cpu']:.1f} "
                  f"CPU s), "
                  f"{out['labels'] / out['seconds']:.2f} labels/s, {out['steps']} steps, "
                  f"held-out top-1 {out['accuracy']:.3f}, final train loss {out['loss']:.4f}; "
                  f"load before {load_text(load)}", flush=True)  # fmt: skip
    rows = []
    for arm in arms:
        seconds = statistics.median(r["seconds"] for r in runs[arm])
        rows.append({
            "arm": arm, "seconds": seconds, "labels_per_second": n_train / seconds,
            "accuracy": statistics.median(r["accuracy"] for r in runs[arm]),
            "accuracies": [r["accuracy"] for r in runs[arm]],
            "cpu": statistics.median(r["cpu"] for r in runs[arm]),
            "all_seconds": [r["seconds"] for r in runs[arm]],
            "loads": [r["load"] for r in runs[arm]], "steps": runs[arm][0]["steps"],
            "tokens": tokens_per_label(train, enc_train, arm if arm in ("ours", "flat") else "trl"),
        })  # fmt: skip
    import torch

    return {"rows": rows, "train": n_train, "held_out": n_held, "seed": seed,
            "repeats": repeats, "threads": torch.get_num_threads()}  # fmt: skip


def table(report: dict[str, Any]) -> str:
    base = next((r for r in report["rows"] if r["arm"] == "trl24"), None)
    header = ["trainer", "sequences/label", "tokens/label", "steps", "train s (median)",
              "labels/s", "vs TRL 24 pairs", "CPU s (median)", "held-out top-1",
              "runs: s (load 1-min before)"]  # fmt: skip
    rows = []
    for r in report["rows"]:
        seqs = {"ours": "4 (1 packed row)", "flat": "4"}.get(r["arm"], "6 (3 pairs)")
        speedup = f"{base['seconds'] / r['seconds']:.2f}x" if base else "-"
        accuracy = f"{r['accuracy']:.3f}"
        if len(set(r["accuracies"])) > 1:
            accuracy += " (" + ", ".join(f"{a:.3f}" for a in r["accuracies"]) + ")"
        each = ", ".join(f"{s:.1f} ({load[0]:.2f})"
                         for s, load in zip(r["all_seconds"], r["loads"], strict=True))  # fmt: skip
        rows.append([ARMS[r["arm"]], seqs, f"{r['tokens']:.0f}", r["steps"], f"{r['seconds']:.1f}",
                     f"{r['labels_per_second']:.2f}", speedup, f"{r['cpu']:.1f}", accuracy,
                     each])  # fmt: skip
    return markdown_table(header, rows)


def section(report: dict[str, Any], when: str) -> str:
    import transformers
    import trl

    rows = {r["arm"]: r for r in report["rows"]}
    lines = [
        f"`benchmarks/reward_speed.py` (`make bench-reward`): see its docstring. Measured {when} "
        f"with `{command_line()}`.",
        "",
        f"- Machine: {machine_line()}; transformers {transformers.__version__}, trl "
        f"{trl.__version__}. The CPU may be shared with other processes: the arms are "
        f"interleaved for {report['repeats']} round(s), the median is shown, with each run's "
        "seconds and the 1-minute load average just before it.",
        f"- Data: {report['train']} mock best-of-4 training labels (seed {report['seed']}), "
        f"{report['held_out']} held-out labels (seed {report['seed'] + 1000}); the same token "
        "ids on both sides ([CLS] query [SEP] candidate [SEP], max length 128, none cut).",
        "- Settings on every arm: 1 epoch, lr 1.77e-5 constant, Adam (TRL: AdamW, weight decay "
        "0), no gradient clipping, fp32 on the CPU, dropout 0, no evaluation during training, "
        "no saving, logging off, report_to none, dataloader workers 0, 8 labels a step (TRL "
        "24 pairs; the 8-pair row is 8/3 labels a step). Seconds: the training loop only, "
        "model loading and tokenization excluded on both sides, batch collation included.",
        f"- Threads: torch ran {report['threads']} thread(s) in every arm (`--threads`; on a "
        "2-core machine shared with other processes, 2 threads stall at every parallel op "
        "whenever another process holds a core). CPU s: the process's CPU time over the same "
        "interval as the wall seconds, less sensitive to the other processes.",
        "- TRL 1.16's RewardTrainer always computes its per-step metrics (min/mean/max reward, "
        "pair accuracy, margin, token count); they are not optional there, so they are in its "
        "time (a few small reductions and `.item()` calls a step). transformers' Trainer "
        "also computes the gradient norm every step even with clipping off.",
        "",
        table(report),
        "",
    ]
    if "ours" in rows and "trl24" in rows:
        ours, theirs = rows["ours"], rows["trl24"]
        lines.append(
            f"crowd's trainer ran {theirs['seconds'] / ours['seconds']:.2f}x as many labels a "
            f"second as TRL's at the same 8 labels a step ({ours['labels_per_second']:.2f} vs "
            f"{theirs['labels_per_second']:.2f}; {theirs['cpu'] / ours['cpu']:.2f}x less CPU "
            f"time), with held-out top-1 {ours['accuracy']:.3f} vs "
            f"{theirs['accuracy']:.3f}. Why: a best-of-4 label is one K-way softmax over 4 "
            "rewards, so it costs 4 sequences, where TRL's pairwise loss needs 3 pairs, 6 "
            "sequences, the query in each; and in a packed row the query's tokens go through "
            "the backbone once per label instead of once per sequence "
            f"({ours['tokens']:.0f} tokens per label vs {theirs['tokens']:.0f})."
        )
        if "flat" in rows:
            flat = rows["flat"]
            lines.append(
                f"Without the packing (share_query=False: 4 rows, {flat['tokens']:.0f} tokens "
                f"per label) crowd's trainer ran {flat['labels_per_second']:.2f} labels/s, "
                f"{theirs['seconds'] / flat['seconds']:.2f}x TRL's: the K-way loss alone gives "
                "the first part of the gain, the packing the rest."
            )
            if flat["accuracy"] > ours["accuracy"]:
                lines.append(
                    f"Unpacked rows scored a higher held-out top-1 here ({flat['accuracy']:.3f} "
                    f"vs {ours['accuracy']:.3f}, one seed): with an encoder, a packed row keeps "
                    "the query's tokens from attending to the candidates (exact only for causal "
                    "LMs), so on encoders the packing trades some accuracy for its speed."
                )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--labels", type=int, default=1000, help="training labels")
    parser.add_argument("--held-out", type=int, default=500, help="held-out labels")
    parser.add_argument("--repeats", type=int, default=2, help="interleaved rounds")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--threads", type=int, default=1,
                        help="torch threads for every arm (0: torch's default); 1 by default, "
                        "as a 2-thread run on a shared 2-core machine stalls at every "
                        "parallel op when another process holds a core")  # fmt: skip
    parser.add_argument("--arms", default=DEFAULT_ARMS,
                        help=f"comma-separated, in the order run: {', '.join(ARMS)}")  # fmt: skip
    parser.add_argument("--write", action="store_true",
                        help=f"write the '{SECTION[3:]}' section of RESULTS.md")  # fmt: skip
    args = parser.parse_args(argv)
    arms = [a.strip() for a in args.arms.split(",") if a.strip()]
    unknown = [a for a in arms if a not in ARMS]
    if unknown or not arms:
        parser.error(f"unknown arms {unknown}; known: {', '.join(ARMS)}")
    if min(args.labels, args.held_out, args.repeats) < 1:
        parser.error("--labels, --held-out and --repeats must be positive")
    import torch
    import trl

    if args.threads > 0:
        torch.set_num_threads(args.threads)
    if not torch.__version__.startswith("2.13.0") or trl.__version__ != "1.16.0":
        print(f"warning: expected torch 2.13.0 and trl 1.16.0, have {torch.__version__} and "
              f"{trl.__version__}", file=sys.stderr)  # fmt: skip
    when = dt.datetime.now(dt.UTC).strftime("%Y-%m-%d %H:%M UTC")
    print(f"{when}: {machine_line()}; trl {trl.__version__}; load before "
          f"{load_text(os.getloadavg())}", flush=True)  # fmt: skip
    report = run(args.labels, args.held_out, args.seed, args.repeats, arms)
    print()
    print(table(report))
    if args.write:
        write_section(SECTION, section(report, when))
        print(f"\nwrote '{SECTION}' in {Path(__file__).resolve().parent / 'RESULTS.md'}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
