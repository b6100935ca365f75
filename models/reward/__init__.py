"""Reward models trained on best-of-K comparisons (Ziegler et al. 2019; SPEC 1.3).

`config` and `schedule` are plain Python; `model` and `trainer` import torch and
transformers, so the platform imports them inside functions only.
"""
