"""`/v1/models`, pure: the served names with one slot's window in the fields clients
read, since each client family looks in its own place: Anthropic's model object
(`max_input_tokens`, `max_tokens`), llama-server's own (`meta.n_ctx_train`, `meta.n_ctx`),
vLLM's (`max_model_len`), OpenRouter's and LM Studio's (`context_length`,
`max_context_length`)."""

from __future__ import annotations

from typing import Any

from .window import budget


def model_entry(model_id: str, window: int, think: bool) -> dict[str, Any]:
    w = budget(window)
    return {
        "id": model_id,
        "object": "model",
        "type": "model",
        "created": 0,
        "owned_by": "dspine",
        "display_name": model_id,
        "context_length": window,
        "max_context_length": window,
        "max_model_len": window,
        "max_input_tokens": window - w.reply,
        "max_tokens": w.reply,
        "meta": {"n_ctx": window, "n_ctx_train": window, "compact_at": w.compact_at, "think": think},
    }


def model_list(name: str, window: int, think: bool, thinks: bool = True) -> dict[str, Any]:
    """`thinks`: the model has a thinking mode; without one its `:think` and `:no-think` names
    are not listed (a request naming them is still answered, in the one mode it has)."""
    ids = [name, f"{name}:think", f"{name}:no-think"] if thinks else [name]
    data = [model_entry(i, window, think) for i in ids]
    # OpenAI's list shape, plus Anthropic's paging fields (its SDK reads them).
    return {"object": "list", "data": data, "has_more": False, "first_id": ids[0], "last_id": ids[-1]}
