"""ML on collected labels: reward models, LLM evaluation, game judges.

torch and transformers are imported lazily inside this package only, so the platform runs
without them; install the `ml` extra (with `pip install torch==2.13.0` first) to use it.
"""
