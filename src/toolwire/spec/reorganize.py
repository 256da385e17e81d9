"""The ``reorganize:`` section: what the librarian does beyond tags and titles, each
part opt-in (README, "Reorganization beyond tags").
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field, field_validator

from toolwire.spec.sections import StrictModel
from toolwire.spec.values import is_one_line

__all__ = ["IndexNotes", "RelatedNotes", "Reorganize"]


class RelatedNotes(StrictModel):
    """Up to ``k`` related notes per note, written into a block toolwire owns."""

    k: int = Field(default=5, ge=1, le=20, description="related notes listed per note")
    link_style: Literal["auto", "wikilink", "markdown"] = Field(
        default="auto",
        description="auto: the style most of the vault's links already use",
    )
    min_score: float = Field(
        default=0.80,
        ge=0.0,
        le=2.0,
        description="a note below this score is not listed (cosine of the embeddings, "
        "plus the link and topic evidence)",
    )


class IndexNotes(StrictModel):
    """One note per topic, ``<folder>/<topic>.md``, listing the topic's notes."""

    folder: str = Field(default="Topics", min_length=1, description="where index notes live")

    @field_validator("folder")
    @classmethod
    def _check_folder(cls, value: str) -> str:
        parts = value.strip("/").split("/")
        if not is_one_line(value) or "\\" in value or any(p in ("", ".", "..") for p in parts):
            raise ValueError("a folder inside the workspace: one line, no '..', '.' or '\\'")
        return value.strip("/")


class Reorganize(StrictModel):
    """Each part is off unless given (``related: {}`` turns it on with its defaults)."""

    related: RelatedNotes | None = None
    index: IndexNotes | None = None
