"""A GGUF that, under greedy decoding, answers every chat with the same turn: (when
thinking) a short reasoning in <think> tags, then two Qwen3-Coder XML tool calls in one
turn, the first with its parameters in the opposite order to its schema.

A bigram model as in tests/support/script_model.py (llama architecture, one block, F32, the
feed-forward and attention writing nothing): each whole call is one USER_DEFINED token of
its own, so no token repeats in the script and the bigram decides the whole reply. The
template (Qwen3's shape, cut down) ends its generation prompt with `<think>` when thinking
and with an empty `<think></think>` when not, so the same bigram serves both modes; an
assistant turn that comes back with `reasoning_content` is rendered with it."""

from __future__ import annotations

from pathlib import Path

import gguf
import numpy as np

from tests.support.gguf_models import QTYPE, Shape, metadata, tensor_table, vocabulary

REASONING = "I need the readme and the source folder."
READ_CALL = "<tool_call>\n<function=read_file>\n<parameter=limit>\n10\n</parameter>\n<parameter=path>\nREADME.md\n</parameter>\n</function>\n</tool_call>"  # noqa: E501
LIST_CALL = "\n<tool_call>\n<function=list_files>\n<parameter=folder>\nsrc\n</parameter>\n</function>\n</tool_call>"
CALLS = (("read_file", {"path": "README.md", "limit": 10}), ("list_files", {"folder": "src"}))
TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "read_file",
            "description": "Read a file of the project",
            "parameters": {
                "type": "object",
                "properties": {"path": {"type": "string"}, "limit": {"type": "integer"}},
                "required": ["path"],
            },
        },
    },
    {
        "type": "function",
        "function": {
            "name": "list_files",
            "description": "List a folder of the project",
            "parameters": {"type": "object", "properties": {"folder": {"type": "string"}}, "required": ["folder"]},
        },
    },
]

CHAT_TEMPLATE = r"""{%- if tools %}
{{- '<|im_start|>system\n' }}
{%- if messages[0].role == 'system' %}{{- messages[0].content + '\n\n' }}{%- endif %}
{{- '# Tools\n\n<tools>' }}
{%- for tool in tools %}{{- '\n' + (tool | tojson) }}{%- endfor %}
{{- '\n</tools>\n\nTo call a function, reply with:\n<tool_call>\n<function=NAME>\n' }}
{{- '<parameter=NAME>\nVALUE\n</parameter>\n</function>\n</tool_call><|im_end|>\n' }}
{%- elif messages[0].role == 'system' %}
{{- '<|im_start|>system\n' + messages[0].content + '<|im_end|>\n' }}
{%- endif %}
{%- for message in messages %}
{%- if message.role == 'user' %}
{{- '<|im_start|>user\n' + (message.content or '') + '<|im_end|>\n' }}
{%- elif message.role == 'assistant' %}
{{- '<|im_start|>assistant\n' }}
{%- if message.reasoning_content %}{{- '<think>\n' + message.reasoning_content + '\n</think>\n\n' }}{%- endif %}
{{- message.content or '' }}
{%- if message.tool_calls %}
{%- for call in message.tool_calls %}
{%- set function = call.function if call.function is defined else call %}
{{- '<tool_call>\n<function=' + function.name + '>\n' }}
{%- if function.arguments is mapping %}
{%- for name, value in function.arguments.items() %}
{{- '<parameter=' + name + '>\n' + (value | string) + '\n</parameter>\n' }}
{%- endfor %}
{%- endif %}
{{- '</function>\n</tool_call>' }}
{%- endfor %}
{%- endif %}
{{- '<|im_end|>\n' }}
{%- elif message.role == 'tool' %}
{%- if loop.first or messages[loop.index0 - 1].role != 'tool' %}{{- '<|im_start|>user' }}{%- endif %}
{{- '\n<tool_response>\n' + (message.content or '') + '\n</tool_response>' }}
{%- if loop.last or messages[loop.index0 + 1].role != 'tool' %}{{- '<|im_end|>\n' }}{%- endif %}
{%- endif %}
{%- endfor %}
{%- if add_generation_prompt %}
{{- '<|im_start|>assistant\n' }}
{%- if enable_thinking is defined and enable_thinking is false %}{{- '<think>\n\n</think>' }}
{%- else %}{{- '<think>' }}{%- endif %}
{%- endif %}"""

N_EMBD = 32
ONE, FIRST_TOKEN_DIM = 0, 1
BIG = 10.0


def shape() -> Shape:
    return Shape(
        arch="llama",
        n_layer=1,
        n_embd=N_EMBD,
        n_head=2,
        n_head_kv=2,
        head_dim=16,
        n_ff=N_EMBD,
        n_vocab=300,
        weight_type=QTYPE.F32,
        chat_template=CHAT_TEMPLATE,
        user_tokens=(REASONING, READ_CALL, LIST_CALL),
    )


def _weights(tokens: list[str]) -> dict[str, np.ndarray]:
    ids = {text: i for i, text in enumerate(tokens)}
    script = [ids["<think>"], ids[REASONING], ids["</think>"], ids[READ_CALL], ids[LIST_CALL], ids["<|im_end|>"]]
    dims = {token: FIRST_TOKEN_DIM + i for i, token in enumerate(script[:-1])}
    embedding = np.zeros((len(tokens), N_EMBD), np.float32)
    embedding[:, ONE] = 1.0
    for token, dim in dims.items():
        embedding[token, dim] = 1.0
    output = np.zeros((len(tokens), N_EMBD), np.float32)
    for before, after in zip(script, script[1:], strict=False):
        output[after, dims[before]] = BIG
    return {"token_embd.weight": embedding, "output.weight": output}


def write_tool_matrix_model(path: Path) -> Path:
    model = shape()
    tokens, _, _ = vocabulary(model.n_vocab, model.user_tokens)
    weights = _weights(tokens)
    writer = gguf.GGUFWriter(str(path), model.arch)
    metadata(writer, model)
    for name, ne, _ in tensor_table(model):
        if name.endswith("norm.weight"):
            values = np.ones(tuple(reversed(ne)), np.float32)
        else:
            values = weights.get(name, np.zeros(tuple(reversed(ne)), np.float32))
        writer.add_tensor(name, values, raw_dtype=QTYPE.F32)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    return path
