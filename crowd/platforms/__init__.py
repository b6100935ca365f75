"""Crowds and the platforms they come from: publishing studies (publishing), platform workers
on our page and the hand-over of their work (sessions), syncing with the platforms (sync), the
platform calls we owe (actions), what a study has on them (overview), and the providers that
speak to each platform (providers/: local, sim, mturk, prolific).
"""
