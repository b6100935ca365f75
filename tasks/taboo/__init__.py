"""Adversarial Taboo (Yao et al., AAAI 2021): a two-player word game with a model judge.

engine.py holds the rules, words.py the target matching (lemminflect), agents.py the agent
plugins, simulate.py agent-vs-agent games and tournaments, analysis.py the rates and the
leaderboard. Samples: samples/words.jsonl (target words with estimated concreteness) and
samples/corpus.jsonl (utterance/reply pairs the agents draw on).
"""
