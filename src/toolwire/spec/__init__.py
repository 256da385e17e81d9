"""Agent specs: the pydantic models (``model``), their sections and value bounds, the
YAML reader that keeps every key's file position (``yaml_index``), the paths a spec
names, settings (environment over spec) and the store's default location.

The names users load a spec with are re-exported here.
"""

from toolwire.spec.model import LoadedSpec, Spec, load_spec, load_spec_text, spec_hash

__all__ = ["LoadedSpec", "Spec", "load_spec", "load_spec_text", "spec_hash"]
