"""A study and its data: its lifecycle (create, import items, progress), item files in JSON
lines or CSV read, checked line by line and stored (item_files, uploads), answers collected
elsewhere imported as responses (annotations), and its rows, filtered set, reports and
exports (reports, with the report refresh job).
"""
