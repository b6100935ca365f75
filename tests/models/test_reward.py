"""The reward model: K-way loss, packing, training, normalization, save and load."""

from __future__ import annotations

import json
import random
from dataclasses import fields
from pathlib import Path

import pytest
import torch
import torch.nn.functional as F

from crowd.exceptions import InvalidConfig, ValidationError
from models.backbones import build_tiny_causal_lm, build_tiny_encoder
from models.reward.config import RewardConfig, validate_study_settings
from models.reward.data import Comparison, base_samples, split_held_out
from models.reward.model import RewardModel
from models.reward.schedule import LabelSchedule
from models.reward.trainer import RewardTrainer

GOOD = ("wonderful", "happy", "great", "lovely", "bright")
BAD = ("terrible", "sad", "awful", "gloomy", "cold")


@pytest.fixture(scope="module")
def backbones(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("backbones")
    return {
        "causal": build_tiny_causal_lm(root / "lm"),
        "encoder": build_tiny_encoder(root / "enc"),
    }


def sentiment_labels(n: int, seed: int = 0, k: int = 4) -> list[Comparison]:
    """The best candidate is the one made of happy words; the rest are gloomy."""
    rng = random.Random(seed)
    labels = []
    for i in range(n):
        candidates = [" ".join(rng.choice(BAD) for _ in range(3)) for _ in range(k)]
        best = rng.randrange(k)
        candidates[best] = " ".join(rng.choice(GOOD) for _ in range(3))
        labels.append(
            Comparison(
                f"the day {i % 7} was",
                tuple(candidates),
                best,
                item=f"i{seed}-{i}",
                policies=("base",) * k,
            )  # fmt: skip
        )
    return labels


def test_the_defaults_are_the_papers_and_every_setting_has_help() -> None:
    config = RewardConfig()
    assert (config.epochs, config.learning_rate, config.batch_size, config.dropout) == (
        1, 1.77e-5, 8, 0.0,
    )  # fmt: skip
    assert all(f.metadata.get("help") for f in fields(RewardConfig))
    assert RewardConfig.from_json(config.to_json()) == config
    with pytest.raises(InvalidConfig, match="unknown reward model settings"):
        RewardConfig.from_json({"lr": 0.1})
    for bad in ({"batch_size": 0}, {"learning_rate": 3}, {"kind": "rnn"}, {"held_out": 1.0}):
        with pytest.raises(InvalidConfig):
            RewardConfig.from_json(bad)


def test_study_settings_are_checked() -> None:
    assert validate_study_settings(None) == {"retrain_every": None, "labels": "raw", "settings": {}}
    settings = {"retrain_every": 50, "labels": "majority_vote", "settings": {"epochs": 2}}
    assert validate_study_settings(settings) == settings
    for bad in ({"retrain_every": 0}, {"retrain_every": True}, {"labels": "mace"},
                {"settings": {"epochs": 0}}, {"every": 3}, []):  # fmt: skip
        with pytest.raises(InvalidConfig):
            validate_study_settings(bad)


def test_the_online_label_schedule() -> None:
    schedule = LabelSchedule(initial=1000, total=5000, policy_steps=100)
    assert schedule.labels_wanted(0) == 1000
    assert schedule.labels_wanted(50) == 1000 + 4000 * 0.75
    assert schedule.labels_wanted(100) == 5000 == schedule.labels_wanted(400)
    wanted = [schedule.labels_wanted(n) for n in range(101)]
    assert wanted == sorted(wanted)
    # Keep 1000 requests open even when labels are ahead of the schedule...
    assert schedule.requests_to_send(0, labelled=1000, outstanding=0) == 1000
    # ...cover l(n) when it is further ahead, and never ask for more than N in all.
    assert schedule.requests_to_send(50, labelled=1000, outstanding=200) == 2800
    assert schedule.requests_to_send(100, labelled=4500, outstanding=400) == 100
    with pytest.raises(InvalidConfig):
        LabelSchedule(initial=10, total=5, policy_steps=10)


def test_labels_are_checked_and_split_by_item() -> None:
    with pytest.raises(ValidationError, match="best is 4"):
        Comparison("q", ("a", "b", "c", "d"), 4)
    with pytest.raises(ValidationError, match="at least 2"):
        Comparison("q", ("a",), 0)
    labels = sentiment_labels(40)
    labels += [Comparison("q", ("x", "y"), 1, item=labels[0].item)]  # a second label, same item
    train, held = split_held_out(labels, 0.25, seed=3)
    assert len(held) >= 10 and len(train) + len(held) == 41
    assert not {c.item for c in train} & {c.item for c in held}
    assert len(base_samples(labels, policy="base")) == len({(c.query, t) for c in labels[:40]
                                                            for t in c.candidates})  # fmt: skip


def test_packed_rows_give_a_causal_lm_the_same_rewards(backbones: dict[str, Path]) -> None:
    labels = sentiment_labels(6)
    labels.append(Comparison("a much longer query " * 5, ("one", "two words"), 1, item="k2"))
    packed = RewardModel.from_backbone(RewardConfig(backbone=str(backbones["causal"])))
    flat = RewardModel.from_backbone(
        RewardConfig(backbone=str(backbones["causal"]), share_query=False)
    )
    flat.load_state_dict(packed.state_dict())
    encoded = [packed.tokenize(c.query, c.candidates) for c in labels]
    with torch.no_grad():
        a = packed(packed.collate(encoded))
        b = flat(flat.collate(encoded))
    assert a.shape == (7, 4)
    assert torch.isinf(a[6, 2:]).all() and torch.isinf(b[6, 2:]).all()
    assert torch.allclose(a[:, :2], b[:, :2], atol=1e-5)
    assert torch.allclose(a[:6], b[:6], atol=1e-5)


def test_the_loss_is_cross_entropy_over_k_rewards_in_one_forward_pass(
    backbones: dict[str, Path],
) -> None:
    trainer = RewardTrainer(RewardConfig(backbone=str(backbones["encoder"])))
    labels = sentiment_labels(8)
    calls = []
    hook = trainer.model.backbone.register_forward_hook(lambda *_: calls.append(1))
    batch = trainer.collate(trainer.tokenize(labels))
    loss, scores = trainer.compute_loss(batch)
    hook.remove()
    assert len(calls) == 1 and scores.shape == (8, 4)
    # The same rewards, one candidate at a time, give the same softmax cross-entropy.
    one_by_one = torch.tensor(
        [trainer.model.score([c.query] * 4, list(c.candidates)) for c in labels]
    )
    assert torch.allclose(scores.detach(), one_by_one, atol=1e-5)
    expected = F.cross_entropy(one_by_one, torch.tensor([c.best for c in labels]))
    assert float(loss.detach()) == pytest.approx(float(expected), abs=1e-5)


@pytest.mark.parametrize("kind", ["causal", "encoder"])
def test_training_learns_the_rule_and_normalizes(kind: str, backbones: dict[str, Path]) -> None:
    config = RewardConfig(backbone=str(backbones[kind]), learning_rate=2e-3, held_out=0.0)
    trainer = RewardTrainer(config)
    assert not any(
        isinstance(m, torch.nn.Dropout) and m.p > 0 for m in trainer.model.modules()
    )  # dropout off
    before = trainer.evaluate(sentiment_labels(100, seed=9))
    result = trainer.train(sentiment_labels(320), sentiment_labels(100, seed=9))
    assert result.labels == 320 and result.steps == 40
    assert result.held_out["chance"] == 0.25
    assert result.held_out["accuracy"] >= 0.9 > before["accuracy"] + 0.3
    # Rewards of the base-policy samples now have mean 0 and variance 1.
    samples = base_samples(sentiment_labels(320))
    rewards = torch.tensor(trainer.model.score([q for q, _ in samples], [t for _, t in samples]))
    assert float(rewards.mean()) == pytest.approx(0, abs=1e-3)
    assert float(rewards.std(unbiased=False)) == pytest.approx(1, abs=1e-3)


def test_progress_is_reported_to_the_end(backbones: dict[str, Path]) -> None:
    seen = []
    trainer = RewardTrainer(RewardConfig(backbone=str(backbones["encoder"]), batch_size=4),
                            progress=seen.append)  # fmt: skip
    trainer.train(sentiment_labels(10), sentiment_labels(4, seed=5))
    phases = [p.phase for p in seen]
    assert phases[0] == "tokenize" and phases[-1] == "done"
    steps = [p.step for p in seen if p.phase == "train"]
    assert steps == [1, 2, 3] and seen[-1].fraction == 1.0


def test_labels_with_two_and_four_candidates_train_together(backbones: dict[str, Path]) -> None:
    trainer = RewardTrainer(RewardConfig(backbone=str(backbones["causal"]), learning_rate=1e-3))
    labels = sentiment_labels(12) + sentiment_labels(12, seed=1, k=2)
    random.Random(0).shuffle(labels)
    result = trainer.train(labels, sentiment_labels(6, seed=4, k=2))
    assert result.final_loss is not None and result.final_loss == result.final_loss  # not NaN
    assert result.held_out["chance"] == 0.5


def test_save_and_load_keep_the_rewards_and_write_a_model_card(
    backbones: dict[str, Path], tmp_path: Path
) -> None:
    trainer = RewardTrainer(RewardConfig(backbone=str(backbones["encoder"]), learning_rate=1e-3))
    trainer.train(sentiment_labels(40), sentiment_labels(10, seed=2))
    trainer.model.data_card = {"study": 7, "labels": 40}
    out = trainer.model.save(tmp_path / "rm")
    assert (out / "head.safetensors").is_file() and (out / "backbone" / "config.json").is_file()
    assert list((out / "backbone").glob("*.safetensors"))
    saved = json.loads((out / "reward_config.json").read_text())
    assert saved["config"]["learning_rate"] == 1e-3 and saved["kind"] == "encoder"
    card = (out / "README.md").read_text()
    for needle in ("## Data", "- labels: 40", "held_out_accuracy", "learning_rate: 0.001"):
        assert needle in card
    loaded = RewardModel.load(out)
    queries, texts = ["the day was"] * 2, ["happy great lovely", "sad cold awful"]
    assert loaded.score(queries, texts) == pytest.approx(trainer.model.score(queries, texts),
                                                         abs=1e-5)  # fmt: skip
    assert float(loaded.gain) == pytest.approx(float(trainer.model.gain))
    with pytest.raises(InvalidConfig, match="no saved reward model"):
        RewardModel.load(tmp_path)


def test_bad_backbones_say_what_to_give(tmp_path: Path, backbones: dict[str, Path]) -> None:
    with pytest.raises(InvalidConfig, match="not a directory"):
        RewardModel.from_backbone(RewardConfig(backbone=str(tmp_path / "missing")))
    with pytest.raises(InvalidConfig, match="no config.json"):
        RewardModel.from_backbone(RewardConfig(backbone=str(tmp_path)))
    with pytest.raises(InvalidConfig, match="share_query false"):
        RewardModel.from_backbone(RewardConfig(backbone=str(backbones["encoder"]), pooling="cls"))
    with pytest.raises(ValidationError, match="no labels"):
        RewardTrainer(RewardConfig(backbone=str(backbones["encoder"]))).train([])


def test_empty_and_long_candidates_are_handled_like_separate_rows(
    backbones: dict[str, Path],
) -> None:
    packed = RewardModel.from_backbone(RewardConfig(backbone=str(backbones["causal"])))
    assert packed.backbone.config._attn_implementation == "sdpa"  # masks are applied
    flat = RewardModel.from_backbone(
        RewardConfig(backbone=str(backbones["causal"]), share_query=False)
    )
    flat.load_state_dict(packed.state_dict())
    labels = [Comparison("the day was", ("happy", "", "sad cold"), 0)]
    encoded = [packed.tokenize(c.query, c.candidates) for c in labels]
    with torch.no_grad():
        assert torch.allclose(packed(packed.collate(encoded)), flat(flat.collate(encoded)),
                              atol=1e-5)  # fmt: skip
    # A short query leaves a long candidate most of max_length (not just half of it).
    long = " ".join(["happy"] * 200)
    encoded_long = packed.tokenize("the day was", [long])
    assert len(encoded_long.candidates[0]) > 100
    assert len(encoded_long.query) + len(encoded_long.candidates[0]) <= 128
    # A long query keeps its end, the context right before the candidate.
    query = "start " + "filler " * 300 + "the very end"
    encoded_query = packed.tokenize(query, ["happy"])
    text = packed.tokenizer.decode(list(encoded_query.query))
    assert "the very end" in text and "start" not in text


def test_bf16_checkpoints_train_in_fp32(tmp_path: Path) -> None:
    from transformers import AutoModel

    path = build_tiny_causal_lm(tmp_path / "lm")
    AutoModel.from_pretrained(str(path)).to(torch.bfloat16).save_pretrained(str(path))
    model = RewardModel.from_backbone(RewardConfig(backbone=str(path)))
    assert {p.dtype for p in model.parameters()} == {torch.float32}


def test_settings_have_strict_types() -> None:
    for bad in ({"learning_rate": "abc"}, {"learning_rate": "0.1"}, {"seed": "x"},
                {"backbone": 5}, {"normalize": "false"}, {"share_query": "false"},
                {"epochs": True}, {"held_out": float("nan")}, {"bf16": "no"}):  # fmt: skip
        with pytest.raises(InvalidConfig):
            RewardConfig.from_json(bad)


def test_study_configs_name_backbones_and_never_give_paths() -> None:
    assert validate_study_settings({"settings": {"backbone": "gpt2-small"}})["settings"] == {
        "backbone": "gpt2-small"
    }
    for path in ("/etc", "../models", "a/b", "~/x"):
        with pytest.raises(InvalidConfig, match="no paths"):
            validate_study_settings({"settings": {"backbone": path}})


def test_a_base_policy_without_samples_fails_before_training(backbones: dict[str, Path]) -> None:
    trainer = RewardTrainer(RewardConfig(backbone=str(backbones["encoder"]), base_policy="nope"))
    seen: list[object] = []
    trainer.progress = seen.append
    with pytest.raises(ValidationError, match="base_policy 'nope'"):
        trainer.train(sentiment_labels(8))
    assert seen == []
