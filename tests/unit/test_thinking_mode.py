"""Issue 37: a model without a thinking mode (SmolLM2's ChatML) does not start the chat
with thinking on; the mode is read from the GGUF's own chat template."""

from __future__ import annotations

from dataclasses import replace

from backends.chat_template import has_thinking_mode, model_thinks
from tests.support.gguf_models import chat_model, write_model

CHATML = (
    "{% for message in messages %}{{'<|im_start|>' + message['role'] + '\\n' + message['content'] + "
    "'<|im_end|>\\n'}}{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}"
)


def test_templates_with_and_without_a_thinking_mode():
    assert has_thinking_mode("{% if enable_thinking is false %}<think>\n\n</think>{% endif %}")
    assert not has_thinking_mode(CHATML)
    assert not has_thinking_mode(None)


def test_read_from_the_model_file(tmp_path):
    shape = chat_model(n_layer=1, n_embd=64)
    assert model_thinks(str(write_model(tmp_path / "qwen-like.gguf", shape)))
    assert not model_thinks(str(write_model(tmp_path / "chatml.gguf", replace(shape, chat_template=CHATML))))
    assert not model_thinks(str(write_model(tmp_path / "none.gguf", replace(shape, chat_template=None))))
