"""Provider registry: `provider:name` in a spec -> a Provider instance.

A small dict from provider name to factory (no if/elif chain). The llamacpp
and openai factories import their provider module when called: `spec check`
imports this package (for the replay provider) and must not pay for a provider
it does not build (``openai`` alone imports in ~0.3 s; llama.cpp's module
imports ``llama_cpp`` itself only when a model loads).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from toolwire.errors import UsageError
from toolwire.providers.base import Provider
from toolwire.providers.replay import ReplayProvider
from toolwire.spec.model import ModelConfig

__all__ = ["Provider", "make_provider", "PROVIDER_FACTORIES"]


def _replay(cfg: ModelConfig, base_dir: Path) -> Provider:
    _, _, target = cfg.name.partition(":")
    path = Path(target)
    return ReplayProvider(path if path.is_absolute() else base_dir / path, name=cfg.name)


def _llamacpp(cfg: ModelConfig, base_dir: Path) -> Provider:
    from toolwire.providers.llamacpp import LlamaCppProvider  # llama.cpp: optional, heavy

    return LlamaCppProvider.from_config(cfg, base_dir=base_dir)


def _openai(cfg: ModelConfig, base_dir: Path) -> Provider:
    from toolwire.providers.openai_compat import OpenAIProvider  # imports openai: ~0.3 s

    return OpenAIProvider.from_config(cfg)


PROVIDER_FACTORIES: dict[str, Callable[[ModelConfig, Path], Provider]] = {
    "replay": _replay,
    "llamacpp": _llamacpp,
    "openai": _openai,
}


def make_provider(model_cfg: ModelConfig, *, base_dir: Path) -> Provider:
    """Build the provider a spec's ``model`` names (``model_cfg.name`` = ``provider:rest``)."""
    provider, sep, _ = str(model_cfg.name).partition(":")
    factory = PROVIDER_FACTORIES.get(provider) if sep else None
    if factory is None:
        known = ", ".join(sorted(PROVIDER_FACTORIES))
        raise UsageError(f"unknown model provider in {model_cfg.name!r}; known: {known}")
    return factory(model_cfg, Path(base_dir))
