"""Prompt packs: a manifest and its stage files (``pack``: loading, rendering, hashes)
and the checks a pack's stages must pass (``checks``)."""
