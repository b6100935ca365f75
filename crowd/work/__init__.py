"""The worker's side: workers, the assignment of items, steps, stored answers and the
reveal (assignments), and the open-web game's categories, profiles and leaderboards (game).
"""
