"""Quality control wired to storage: the QC facts of each response and each worker's standing,
gold serving, the qualification gate and the rules that act (standing), the gold items' tally
that easy gold first serves by (tally), the worker statistics refreshed after every answer
(stats), and aggregated labels and promoted gold (labels). The algorithms themselves are pure
code in qc/.
"""
