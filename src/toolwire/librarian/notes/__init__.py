"""A workspace of notes as the librarian reads and writes it: the files that are notes,
their front matter (read and edited in place), tags, links, and the changes a plan makes.

Imports no other librarian module: the judge and the journal build on it.
"""
