"""An engine that yields tokens as fast as it can (no model): isolates the serving cost."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

CHATML = (
    "{% for m in messages %}<|im_start|>{{ m['role'] }}\n{{ m['content'] }}<|im_end|>\n{% endfor %}"
    "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)


class FastEngine:
    model_name = "fast"
    chat_template = CHATML

    def __init__(self, tokens: int = 2500) -> None:
        self.tokens = tokens

    async def generate_request(self, obj: Any) -> AsyncIterator[dict[str, Any]]:
        n = obj.sampling_params.get("max_new_tokens") or self.tokens
        for i in range(n):
            yield {
                "delta": " tok",
                "output_ids": [i],
                "meta_info": {
                    "prompt_tokens": 10,
                    "completion_tokens": i + 1,
                    "cached_tokens": 0,
                    "finish_reason": {"type": "length"} if i == n - 1 else None,
                },
            }

    def abort_request(self, rid: str) -> None:
        pass
