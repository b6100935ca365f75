"""Forms: any study a researcher designs, as fields over one or more attachments.

A study (or each item) declares fields -- ratings on a labelled scale, single or multiple
choice categories, free text with a length limit, rankings -- with per-field help and
conditions; the worker's page is generated from the declaration. Scale's TextCollection
tasks are items of a form study (crowd/scale).
"""

from __future__ import annotations

from tasks import HIT_TYPES
from tasks.form.hit import FormHit

HIT_TYPES.register(FormHit.name, FormHit())
