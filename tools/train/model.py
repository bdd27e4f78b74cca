"""qwen3moe in PyTorch, computing what bmoe computes for the architecture
(shared/spec/architectures.md section 2; src/models/arch_qwen3moe.c,
blocks.c, moe.c): pre-norm blocks, RMSNorm with the file's epsilon, per-head
q/k RMSNorm before NEOX RoPE, causal attention scaled by 1/sqrt(D), a softmax
router whose top-K weights are renormalized, SiLU-GLU experts, tied output.
The parameter layout is the GGUF one, so export is a renaming."""
import math
from dataclasses import dataclass, asdict

import torch
import torch.nn.functional as F


@dataclass
class Config:
    n_vocab: int = 4096
    n_layer: int = 6
    n_embd: int = 256
    n_head: int = 4
    n_head_kv: int = 2
    head_dim: int = 64
    n_expert: int = 32
    n_expert_used: int = 4
    n_ff_exp: int = 128
    n_ctx: int = 512
    rope_base: float = 10000.0
    eps: float = 1e-6

    def to_dict(self):
        return asdict(self)


def rms_norm(x, weight, eps):
    return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps) * weight


def rope_tables(n_pos, dims, base):
    """cos/sin [n_pos, dims/2] as bmoe builds them: the angle of pair i is
    p * base^(-2i/dims), the power taken by repeated float multiplication."""
    theta_scale = torch.tensor(base, dtype=torch.float32).pow(-2.0 / dims)
    t = torch.arange(n_pos, dtype=torch.float32)
    angles = []
    for _ in range(dims // 2):
        angles.append(t)
        t = t * theta_scale
    theta = torch.stack(angles, dim=-1)
    return torch.cos(theta), torch.sin(theta)


def rope_neox(x, cos, sin):
    """x [..., T, D]: pair i is (x[i], x[i + D/2])."""
    half = x.shape[-1] // 2
    a, b = x[..., :half], x[..., half:]
    return torch.cat([a * cos - b * sin, a * sin + b * cos], dim=-1)


class Layer(torch.nn.Module):
    def __init__(self, c: Config):
        super().__init__()
        self.c = c
        q, kv = c.n_head * c.head_dim, c.n_head_kv * c.head_dim
        P = torch.nn.Parameter
        self.attn_norm = P(torch.ones(c.n_embd))
        self.attn_q = P(torch.empty(q, c.n_embd))
        self.attn_k = P(torch.empty(kv, c.n_embd))
        self.attn_v = P(torch.empty(kv, c.n_embd))
        self.attn_q_norm = P(torch.ones(c.head_dim))
        self.attn_k_norm = P(torch.ones(c.head_dim))
        self.attn_output = P(torch.empty(c.n_embd, q))
        self.ffn_norm = P(torch.ones(c.n_embd))
        self.ffn_gate_inp = P(torch.empty(c.n_expert, c.n_embd))
        # GGUF {n_embd, Fe, E} and {Fe, n_embd, E}: expert index outermost
        self.ffn_gate_exps = P(torch.empty(c.n_expert, c.n_ff_exp, c.n_embd))
        self.ffn_up_exps = P(torch.empty(c.n_expert, c.n_ff_exp, c.n_embd))
        self.ffn_down_exps = P(torch.empty(c.n_expert, c.n_embd, c.n_ff_exp))

    def attention(self, x, cos, sin):
        c = self.c
        B, T, _ = x.shape
        q = (x @ self.attn_q.t()).view(B, T, c.n_head, c.head_dim)
        k = (x @ self.attn_k.t()).view(B, T, c.n_head_kv, c.head_dim)
        v = (x @ self.attn_v.t()).view(B, T, c.n_head_kv, c.head_dim)
        q = rms_norm(q, self.attn_q_norm, c.eps).transpose(1, 2)
        k = rms_norm(k, self.attn_k_norm, c.eps).transpose(1, 2)
        v = v.transpose(1, 2)
        q, k = rope_neox(q, cos, sin), rope_neox(k, cos, sin)
        # consecutive query heads share a KV head
        group = c.n_head // c.n_head_kv
        k = k.repeat_interleave(group, dim=1)
        v = v.repeat_interleave(group, dim=1)
        scores = (q @ k.transpose(-1, -2)) * (1.0 / math.sqrt(c.head_dim))
        mask = torch.ones(T, T, dtype=torch.bool).triu(1)
        scores = scores.masked_fill(mask, float("-inf"))
        out = torch.softmax(scores, dim=-1) @ v
        out = out.transpose(1, 2).reshape(B, T, c.n_head * c.head_dim)
        return out @ self.attn_output.t()

    def moe(self, x):
        """x [N, n_embd] -> (out [N, n_embd], router probs [N, E], chosen [N, K])."""
        c = self.c
        probs = torch.softmax(x @ self.ffn_gate_inp.t(), dim=-1)
        weights, chosen = probs.topk(c.n_expert_used, dim=-1)
        weights = weights / weights.sum(-1, keepdim=True).clamp(min=6.103515625e-5)
        flat = chosen.reshape(-1)
        order = torch.argsort(flat, stable=True)
        token = order // c.n_expert_used
        counts = torch.bincount(flat, minlength=c.n_expert).tolist()
        xs = x[token]
        # unbind, not [e]: indexing a parameter per expert costs a full-size
        # zero gradient per expert in backward, unbind one stack per tensor;
        gates, ups, downs = self.ffn_gate_exps.unbind(0), self.ffn_up_exps.unbind(0), self.ffn_down_exps.unbind(0)
        # split, not slices, for the same reason on the token side
        outs = []
        for e, seg in enumerate(torch.split(xs, counts)):
            if seg.shape[0] == 0:
                continue
            h = F.silu(seg @ gates[e].t()) * (seg @ ups[e].t())
            outs.append(h @ downs[e].t())
        ys = torch.cat(outs, dim=0) * weights.reshape(-1)[order].unsqueeze(-1)
        out = torch.zeros_like(x).index_add_(0, token, ys)
        return out, probs, chosen

    def forward(self, h, cos, sin):
        c = self.c
        h = h + self.attention(rms_norm(h, self.attn_norm, c.eps), cos, sin)
        B, T, C = h.shape
        out, probs, chosen = self.moe(rms_norm(h, self.ffn_norm, c.eps).reshape(B * T, C))
        return h + out.view(B, T, C), probs, chosen


class Model(torch.nn.Module):
    def __init__(self, c: Config):
        super().__init__()
        self.c = c
        self.token_embd = torch.nn.Parameter(torch.empty(c.n_vocab, c.n_embd))
        self.layers = torch.nn.ModuleList(Layer(c) for _ in range(c.n_layer))
        self.output_norm = torch.nn.Parameter(torch.ones(c.n_embd))
        cos, sin = rope_tables(c.n_ctx, c.head_dim, c.rope_base)
        self.register_buffer("rope_cos", cos, persistent=False)
        self.register_buffer("rope_sin", sin, persistent=False)

    def init_weights(self, generator):
        c = self.c
        std = 0.02
        # residual writers shrink with depth so the stream starts near unit scale
        out_std = std / math.sqrt(2 * c.n_layer)
        for name, p in self.named_parameters():
            if p.dim() == 1:
                continue
            s = out_std if name.endswith(("attn_output", "ffn_down_exps")) else std
            with torch.no_grad():
                p.normal_(0.0, s, generator=generator)

    def forward(self, tokens):
        """tokens [B, T] -> (logits [B, T, V], per-layer (probs, chosen))."""
        c = self.c
        T = tokens.shape[1]
        h = self.token_embd[tokens]
        cos, sin = self.rope_cos[:T], self.rope_sin[:T]
        routing = []
        for layer in self.layers:
            h, probs, chosen = layer(h, cos, sin)
            routing.append((probs, chosen))
        h = rms_norm(h, self.output_norm, c.eps)
        return h @ self.token_embd.t(), routing


def balance_loss(routing, n_expert, n_used):
    """Switch-style load balancing, averaged over layers: E * sum_e f_e * P_e
    with f_e the share of routings to e and P_e its mean router probability;
    1.0 when routing is uniform."""
    total = 0.0
    for probs, chosen in routing:
        share = torch.bincount(chosen.reshape(-1), minlength=n_expert).float() / chosen.numel()
        total = total + n_expert * (share * probs.mean(0)).sum()
    return total / len(routing)


def gguf_tensors(model: Model):
    """(name, tensor) in the GGUF naming, tied output (no output.weight)."""
    out = [("token_embd.weight", model.token_embd)]
    for i, l in enumerate(model.layers):
        for name in ("attn_norm", "attn_q", "attn_k", "attn_v", "attn_q_norm", "attn_k_norm",
                     "attn_output", "ffn_norm", "ffn_gate_inp", "ffn_gate_exps", "ffn_up_exps",
                     "ffn_down_exps"):
            out.append(("blk.%d.%s.weight" % (i, name), getattr(l, name)))
    out.append(("output_norm.weight", model.output_norm))
    return out
