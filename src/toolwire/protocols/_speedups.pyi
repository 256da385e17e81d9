# The compiled helpers of _speedups.c (see its header comment).
from typing import Any

def read_slot_tags(
    text: str, nonce: str, /
) -> tuple[list[str], list[str], list[str], tuple[str, str, str] | None, int] | None: ...

class Maker:
    def __init__(self, cls: type, members: tuple[Any, ...], /) -> None: ...
    def __call__(self, *values: Any) -> Any: ...

__all__ = ["Maker", "read_slot_tags"]
