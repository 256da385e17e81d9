"""Reorganization beyond tags (``reorganize:`` in the spec): operations toolwire plans
itself from the evidence it keeps, applied through the journal like the model's."""
