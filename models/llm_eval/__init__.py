"""LLM evaluation of Likert studies: a language model rates what human raters rate.

Chiang & Lee (2023), "Can Large Language Models Be an Alternative to Human Evaluations?":
the model gets the human raters' instructions, text and question (prompts), answers in free
text several times (evaluator, configured by config.LLMEvalConfig), and the first number of
each answer is its rating (parse). crowd/ml/llm_eval.py stores the ratings as one more rater
group of the study.

Import from the modules: this package imports nothing itself, so the CLI reads the config
without loading the analysis code or torch.
"""
