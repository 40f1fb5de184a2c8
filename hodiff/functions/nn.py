"""dropout and embed (being written)."""

__all__: list[str] = []
