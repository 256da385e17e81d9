"""The topic scorer: the evidence read of a note (``text``), the arithmetic that fuses
it (``fit``), the optional words view (``lexical``) and the decision (``scorer``).

Imports only ``librarian.notes`` of the librarian.
"""
