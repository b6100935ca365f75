"""A study and its data: its lifecycle (create, import items, progress), answers collected
elsewhere imported as responses (annotations), and its rows, filtered set, reports and
exports (reports, with the report refresh job).
"""
