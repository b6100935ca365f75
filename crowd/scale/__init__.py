"""The Scale-compatible API's domain: projects over studies, batches and tasks over items
(service), request checks and task responses (params), Scale's comparison and TextCollection
tasks as form items and their responses (forms), listings (listing), and completion with
signed callbacks (completion). The blueprint is crowd/web/scale.py, the tables
crowd/storage/scale.py.
"""
