"""Applying a plan safely and undoably: the write-ahead journal (``write_ahead``), its
files on disk (``disk``), notes reverted by hand (``reverted``), and ``--commit``.

Imports only ``librarian.notes`` of the librarian.
"""
