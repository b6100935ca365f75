"""The platform side of models/: reward-model runs trained on a study's comparison labels
(reward) and LLM raters of Likert studies (llm_eval), both jobs on the models queue.
"""
