"""The tokenizer (Qwen3 special tokens and chat template) and the F32 GGUF
file of a model: the keys bmoe reads for qwen3moe (gguf.md, tokenizers.md)."""
import json
import os

import gguf_out as g
from model import gguf_tensors

CONTROL, USER_DEFINED = 3, 4
NORMAL = 1

# Qwen3's added tokens in their real order: "special" ones are CONTROL,
# the others USER_DEFINED, as the GGUF converters mark them.
QWEN3_SPECIALS = [
    ("<|endoftext|>", CONTROL), ("<|im_start|>", CONTROL), ("<|im_end|>", CONTROL),
    ("<|object_ref_start|>", CONTROL), ("<|object_ref_end|>", CONTROL), ("<|box_start|>", CONTROL),
    ("<|box_end|>", CONTROL), ("<|quad_start|>", CONTROL), ("<|quad_end|>", CONTROL),
    ("<|vision_start|>", CONTROL), ("<|vision_end|>", CONTROL), ("<|vision_pad|>", CONTROL),
    ("<|image_pad|>", CONTROL), ("<|video_pad|>", CONTROL), ("<tool_call>", USER_DEFINED),
    ("</tool_call>", USER_DEFINED), ("<|fim_prefix|>", USER_DEFINED), ("<|fim_middle|>", USER_DEFINED),
    ("<|fim_suffix|>", USER_DEFINED), ("<|fim_pad|>", USER_DEFINED), ("<|repo_name|>", USER_DEFINED),
    ("<|file_sep|>", USER_DEFINED), ("<tool_response>", USER_DEFINED), ("</tool_response>", USER_DEFINED),
    ("<think>", USER_DEFINED), ("</think>", USER_DEFINED),
]

TEMPLATE_PATH = os.path.join(os.path.dirname(__file__), "..", "..", "..", "shared", "data",
                             "chat-templates", "Qwen-Qwen3-0.6B.jinja")


def make_vocab(tokens, merges, template_path=TEMPLATE_PATH):
    """BPE tokens then the specials after them (a small vocabulary cannot
    hold them at Qwen3's real ids)."""
    all_tokens = list(tokens) + [t for t, _ in QWEN3_SPECIALS]
    types = [NORMAL] * len(tokens) + [k for _, k in QWEN3_SPECIALS]
    with open(template_path, encoding="utf-8") as f:
        template = f.read()
    ids = {t: i for i, t in enumerate(all_tokens)}
    return {
        "tokens": all_tokens, "types": types, "merges": list(merges),
        "bos": ids["<|endoftext|>"], "eos": ids["<|im_end|>"], "pad": ids["<|endoftext|>"],
        "chat_template": template,
    }


def save_vocab(vocab, path):
    with open(path, "w", encoding="utf-8") as f:
        json.dump(vocab, f, ensure_ascii=False)


def load_vocab(path):
    with open(path, encoding="utf-8") as f:
        return json.load(f)


def write_gguf(path, model, vocab, name):
    c = model.c
    assert len(vocab["tokens"]) == c.n_vocab
    a = "qwen3moe"
    kvs = [
        ("general.architecture", g.STRING, a),
        ("general.name", g.STRING, name),
        ("general.file_type", g.UINT32, 0),
        ("general.quantization_version", g.UINT32, 2),
        (a + ".block_count", g.UINT32, c.n_layer),
        (a + ".context_length", g.UINT32, c.n_ctx),
        (a + ".embedding_length", g.UINT32, c.n_embd),
        (a + ".feed_forward_length", g.UINT32, c.n_ff_exp),
        (a + ".expert_feed_forward_length", g.UINT32, c.n_ff_exp),
        (a + ".expert_count", g.UINT32, c.n_expert),
        (a + ".expert_used_count", g.UINT32, c.n_expert_used),
        (a + ".attention.head_count", g.UINT32, c.n_head),
        (a + ".attention.head_count_kv", g.UINT32, c.n_head_kv),
        (a + ".attention.key_length", g.UINT32, c.head_dim),
        (a + ".attention.value_length", g.UINT32, c.head_dim),
        (a + ".attention.layer_norm_rms_epsilon", g.FLOAT32, c.eps),
        (a + ".rope.freq_base", g.FLOAT32, c.rope_base),
        (a + ".rope.dimension_count", g.UINT32, c.head_dim),
        ("tokenizer.ggml.model", g.STRING, "gpt2"),
        ("tokenizer.ggml.pre", g.STRING, "qwen2"),
        ("tokenizer.ggml.tokens", g.ARRAY, vocab["tokens"], g.STRING),
        ("tokenizer.ggml.token_type", g.ARRAY, vocab["types"], g.INT32),
        ("tokenizer.ggml.merges", g.ARRAY, vocab["merges"], g.STRING),
        ("tokenizer.ggml.bos_token_id", g.UINT32, vocab["bos"]),
        ("tokenizer.ggml.eos_token_id", g.UINT32, vocab["eos"]),
        ("tokenizer.ggml.padding_token_id", g.UINT32, vocab["pad"]),
        ("tokenizer.ggml.add_bos_token", g.BOOL, False),
        ("tokenizer.ggml.add_eos_token", g.BOOL, False),
        ("tokenizer.chat_template", g.STRING, vocab["chat_template"]),
    ]
    g.write(path, kvs, gguf_tensors(model))
