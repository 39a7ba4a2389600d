"""A GGUF that, under greedy decoding, answers every chat with one fixed turn: (when
thinking) a short reasoning in <think> tags, then Qwen3-Coder XML tool calls, the first
with its two required arguments in the opposite order to its schema's; two calls in the
turn, or only the first when the user's message holds `ONE_CALL_MARKER`; when it holds
`UNCLOSED_THINK_MARKER`, the first call follows the reasoning with no `</think>` between
(as Qwen models do at times).

The calls are spelled over several tokens, as real tokenizers spell them (`<tool_call>`
one token of its own, the rest in pieces), because llama-server constrains a call with a
lazy grammar from its `<tool_call>` trigger on: a token holding a whole call would be fed
to the grammar at once, and any character it refuses ends the request with HTTP 500.
What the grammar allows (llama.cpp common/parsers/qwen3-coder.cpp): `<tool_call>\n`,
`<function=NAME>\n`, each argument as `<parameter=NAME>\nVALUE\n</parameter>\n` (required
ones in any order, optional ones only after them), `</function>\n</tool_call>`, a second
call only when the request allows parallel calls.

How it works, as tests/support/script_model.py: llama architecture, one block, F32; a token's
embedding is a constant dimension plus one of its own for each token of the script, the
feed-forward writes nothing and the output matrix maps each script token to the next (a
bigram; every piece occurs once in the script, so pieces that would repeat are cut
differently in the second call). An attention head per marker writes a dimension of its
own when its marker is anywhere in the context: one turns the end of the first call
towards `<|im_end|>` instead of the second call, the other turns the end of the reasoning
towards `<tool_call>` instead of `</think>`.

The template (Qwen3's shape, cut down) ends its generation prompt with `<think>` when
thinking and with an empty `<think>\n\n</think>` when not, so the same bigram serves both
modes; an assistant turn that comes back with `reasoning_content` is rendered with it."""

from __future__ import annotations

from pathlib import Path

import gguf
import numpy as np

from tests.support.gguf_models import QTYPE, Shape, metadata, tensor_table, vocabulary

REASONING = "I need the readme and the source folder."
ONE_CALL_MARKER = "just the readme"
UNCLOSED_THINK_MARKER = "straight away"
FIRST_CALL = (
    "<tool_call>",
    "\n<function=read_file>\n",
    "<parameter=limit>\n",
    "10",
    "\n</parameter>\n",
    "<parameter=path>\n",
    "README.md",
    "\n</parameter>",
    "\n</function>\n",
    "</tool_call>",
)
SECOND_CALL = (
    "\n<tool_call>\n",
    "<function=list_files>\n",
    "<parameter=folder>\n",
    "src",
    "\n</parameter>\n</function>\n",
    "</tool_call",
    ">",  # the byte token: "</tool_call>" is the first call's piece
)
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
                "required": ["path", "limit"],
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

N_EMBD, HEAD_DIM, N_HEAD = 64, 16, 4
ONE, ONE_CALL, UNCLOSED = 0, 1, 2  # residual dimensions: constant 1, "this marker was seen"
FIRST_TOKEN_DIM = 3
QK_DIM = HEAD_DIM - 2  # the slowest rotary pair: the marker is found however far back
BIG = 10.0
SCORE = 2.5


def shape() -> Shape:
    pieces = (REASONING, ONE_CALL_MARKER, UNCLOSED_THINK_MARKER, *FIRST_CALL, *SECOND_CALL[:-1])
    return Shape(
        arch="llama",
        n_layer=1,
        n_embd=N_EMBD,
        n_head=N_HEAD,
        n_head_kv=N_HEAD,
        head_dim=HEAD_DIM,
        n_ff=N_EMBD,
        n_vocab=300,
        weight_type=QTYPE.F32,
        chat_template=CHAT_TEMPLATE,
        user_tokens=pieces,
    )


def _weights(tokens: list[str]) -> dict[str, np.ndarray]:
    ids = {text: i for i, text in enumerate(tokens)}
    first = [ids[piece] for piece in FIRST_CALL]
    second = [ids[piece] for piece in SECOND_CALL[:-1]] + [ord(SECOND_CALL[-1])]
    end = ids["<|im_end|>"]
    markers = {ids[ONE_CALL_MARKER]: ONE_CALL, ids[UNCLOSED_THINK_MARKER]: UNCLOSED}
    script = [ids["<think>"], ids[REASONING], ids["</think>"], *first, *second]
    assert len(set(script)) == len(script), "a piece repeats: the bigram could not tell where it is"
    dims = {token: FIRST_TOKEN_DIM + i for i, token in enumerate([*script, *markers])}
    assert FIRST_TOKEN_DIM + len(dims) <= N_EMBD

    embedding = np.zeros((len(tokens), N_EMBD), np.float32)
    embedding[:, ONE] = 1.0
    for token, dim in dims.items():
        embedding[token, dim] = 1.0

    output = np.zeros((len(tokens), N_EMBD), np.float32)
    for before, after in zip(script, [*script[1:], end], strict=True):
        output[after, dims[before]] = BIG

    def turn(after: int, usual: int, instead: int, seen: int) -> None:
        # After `after`: `usual`, unless the marker behind `seen` was seen; then `instead`.
        output[instead, dims[after]] = 0.5 * BIG
        output[instead, seen] = 0.5 * BIG
        output[usual, seen] = -BIG

    turn(first[-1], second[0], end, ONE_CALL)
    turn(ids[REASONING], ids["</think>"], first[0], UNCLOSED)

    # Each marker alone has a key and a value in its own head: every query finds it, if it is there.
    norm = np.sqrt(N_EMBD / 2)
    wq = np.zeros((N_HEAD * HEAD_DIM, N_EMBD), np.float32)
    wk = np.zeros_like(wq)
    wv = np.zeros_like(wq)
    wo = np.zeros((N_EMBD, N_HEAD * HEAD_DIM), np.float32)
    for head, (marker, seen) in enumerate(markers.items()):
        row = head * HEAD_DIM
        wq[row + QK_DIM, ONE] = SCORE
        wk[row + QK_DIM, dims[marker]] = SCORE
        wv[row, dims[marker]] = 1.0 / norm
        wo[seen, row] = 1.0
    return {
        "token_embd.weight": embedding,
        "output.weight": output,
        "blk.0.attn_q.weight": wq,
        "blk.0.attn_k.weight": wk,
        "blk.0.attn_v.weight": wv,
        "blk.0.attn_output.weight": wo,
    }


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
        assert values.shape == tuple(reversed(ne)), name
        writer.add_tensor(name, values, raw_dtype=QTYPE.F32)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    return path
