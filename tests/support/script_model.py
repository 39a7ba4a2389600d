"""A GGUF that replays a script under greedy decoding: one tool call in the
Qwen3-Coder XML form, then, once the tool's result is in its context, a short answer.

How it works (llama architecture, one block, F32 weights):
- every token's embedding is a constant `ONE` dimension plus, for the tokens the
  script needs, a dimension of its own; the block's feed-forward writes nothing, so
  the residual stream is the embedding, and the output matrix maps a script token's
  dimension to the next script token: a bigram model. Every script token occurs once
  in the script (the tags are USER_DEFINED tokens of their own), so the bigram
  decides the whole reply.
- both replies begin after the same generation prompt (`<|im_start|>assistant\\n`),
  so one attention head tells them apart: every query looks for the `MARKER` token
  (a word of the file the tool reads), which alone has a key and a value; once the
  marker is anywhere in the context, the head writes a `SEEN` dimension that turns
  the first reply's opening down and the second's up. The second reply therefore
  comes only when the tool's result reached the model.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import gguf
import numpy as np

from tests.support.gguf_models import QTYPE, Shape, metadata, tensor_table, vocabulary

MARKER = "xyzzy"  # put it in the file the model reads; the answer says it back
TOOL_CALL_TOKENS = (
    "<tool_call>",
    "\n<function=read_file>\n",
    "<parameter=path>\n",
    "README.md",
    "\n</parameter>\n",
    "</function>\n",
    "</tool_call>",
)
ANSWER_TOKENS = ("The README says the word is ", MARKER, ".")
TOOL_CALL_TEXT = "".join(TOOL_CALL_TOKENS)
ANSWER_TEXT = "".join(ANSWER_TOKENS)
TOOL_RESPONSE = "<tool_response>"


@dataclass(frozen=True)
class Script:
    """What the model says: one call (its tokens), then, once `marker` is in its context,
    the answer (its tokens; the last one a single ASCII character)."""

    call: tuple[str, ...] = TOOL_CALL_TOKENS
    answer: tuple[str, ...] = ANSWER_TOKENS
    marker: str = MARKER
    n_ctx_train: int = 8192  # engines cap their context at it

    @property
    def answer_text(self) -> str:
        return "".join(self.answer)


README_SCRIPT = Script()

# Qwen3-Coder's shape, cut down: tools listed in the system turn, calls as
# <tool_call><function=...><parameter=...>, results in a user turn as <tool_response>.
# llama-server picks its Qwen3-Coder parser from these tags in the template's text.
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
{{- '<|im_start|>assistant\n' + (message.content or '') }}
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
{%- if add_generation_prompt %}{{- '<|im_start|>assistant\n' }}{%- endif %}"""

N_EMBD, HEAD_DIM, N_HEAD = 64, 16, 4
ONE, SEEN = 0, 1  # residual dimensions: constant 1, "the marker was seen"
FIRST_TOKEN_DIM = 2
# The head's query/key meet in its last rotary pair, which turns slowest with position
# (about 0.0003 rad per token): the score stays high however far back the marker is.
QK_DIM = HEAD_DIM - 2
BIG = 10.0  # logit weight of a bigram step (the hidden state is about 5 per dimension)
SCORE = 2.5  # query and key size: a score of about 50 on the marker, 0 elsewhere


def shape(chat_template: str = CHAT_TEMPLATE, script: Script = README_SCRIPT) -> Shape:
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
        chat_template=chat_template,
        user_tokens=tuple(dict.fromkeys((*script.call, *script.answer[:-1], script.marker, TOOL_RESPONSE))),
        n_ctx_train=script.n_ctx_train,
    )


def _weights(tokens: list[str], script: Script) -> dict[str, np.ndarray]:
    ids = {text: i for i, text in enumerate(tokens)}
    start = ids["\u010a"]  # "\n", the last token of the generation prompt (byte-level BPE)
    end = ids["<|im_end|>"]
    call = [ids[t] for t in script.call]
    assert len(script.answer[-1]) == 1 and script.answer[-1].isascii()
    answer = [ids[t] for t in script.answer[:-1]] + [ord(script.answer[-1])]
    marker = ids[script.marker]
    steps = list(zip([start, *call], [*call, end], strict=True)) + list(zip(answer, [*answer[1:], end], strict=True))
    dims = {token: FIRST_TOKEN_DIM + i for i, token in enumerate(dict.fromkeys([start, *call, *answer, marker]))}
    assert FIRST_TOKEN_DIM + len(dims) <= N_EMBD

    embedding = np.zeros((len(tokens), N_EMBD), np.float32)
    embedding[:, ONE] = 1.0
    for token, dim in dims.items():
        embedding[token, dim] = 1.0

    output = np.zeros((len(tokens), N_EMBD), np.float32)
    for before, after in steps:
        output[after, dims[before]] = BIG
    # After the generation prompt: the call, unless the marker was seen; then the answer.
    # (0.5 keeps the answer's opening below every other step's BIG even with SEEN set.)
    output[answer[0], dims[start]] = 0.5 * BIG
    output[answer[0], SEEN] = 0.5 * BIG
    output[call[0], SEEN] = -BIG

    # Attention (the RMS-normed input is about sqrt(N_EMBD / 2) = 5.7 per set dimension).
    norm = np.sqrt(N_EMBD / 2)
    wq = np.zeros((N_HEAD * HEAD_DIM, N_EMBD), np.float32)
    wq[QK_DIM, ONE] = SCORE
    wk = np.zeros_like(wq)
    wk[QK_DIM, dims[marker]] = SCORE
    wv = np.zeros_like(wq)
    wv[0, dims[marker]] = 1.0 / norm
    wo = np.zeros((N_EMBD, N_HEAD * HEAD_DIM), np.float32)
    wo[SEEN, 0] = 1.0
    return {
        "token_embd.weight": embedding,
        "output.weight": output,
        "blk.0.attn_q.weight": wq,
        "blk.0.attn_k.weight": wk,
        "blk.0.attn_v.weight": wv,
        "blk.0.attn_output.weight": wo,
    }


def write_script_model(path: Path, chat_template: str = CHAT_TEMPLATE, script: Script = README_SCRIPT) -> Path:
    """`chat_template`: another template whose generation prompt also ends in a newline;
    `script`: another call and answer (an MCP tool's, say)."""
    model = shape(chat_template, script)
    tokens, _, _ = vocabulary(model.n_vocab, model.user_tokens)
    weights = _weights(tokens, script)
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
