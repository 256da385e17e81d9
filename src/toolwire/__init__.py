"""toolwire: LLM agents from declarative YAML specs, with every attempt in DuckDB."""

__version__ = "0.1.0"
__all__ = ["__version__"]
