"""Step 2: exactness of the PyTorch forward against bmoe. A small untrained
model with every weight random (norm weights too) is written as F32 GGUF;
bmoe-cli --prompt-ids --logits-out computes the logits of a prompt and they
must match the PyTorch forward to REL_TOL relative (max |diff| / max |logit|).
The file doubles as the vocabulary carrier for tokenizing the corpus."""
import argparse
import array
import os
import subprocess
import sys

import torch

import export
from model import Config, Model

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
REL_TOL = 1e-4


def tiny_model(n_vocab, seed):
    c = Config(n_vocab=n_vocab, n_layer=2, n_embd=64, n_head=4, n_head_kv=2, head_dim=16,
               n_expert=8, n_expert_used=2, n_ff_exp=32, n_ctx=64, rope_base=10000.0, eps=1e-6)
    m = Model(c)
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, p in m.named_parameters():
            if p.dim() == 1:
                p.uniform_(0.8, 1.2, generator=g)
            elif name.endswith("ffn_gate_inp"):
                # a wide router spread: top-k near-ties would flip on rounding
                p.normal_(0.0, 4.0 / c.n_embd ** 0.5, generator=g)
            else:
                p.normal_(0.0, 1.0 / c.n_embd ** 0.5, generator=g)
    return m


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True, help="folder with vocab.json; tiny.gguf is written there")
    ap.add_argument("--seed", type=int, default=7)
    ap.add_argument("--cli", default=os.path.join(ROOT, "build", "bin", "bmoe-cli"))
    args = ap.parse_args()
    vocab = export.load_vocab(os.path.join(args.out, "vocab.json"))
    model = tiny_model(len(vocab["tokens"]), args.seed)
    path = os.path.join(args.out, "tiny.gguf")
    export.write_gguf(path, model, vocab, "bmoe-train exactness check")
    g = torch.Generator().manual_seed(args.seed + 1)
    ids = torch.randint(0, model.c.n_vocab, (40,), generator=g).tolist()
    logits_path = os.path.join(args.out, "tiny.logits")
    cmd = [args.cli, "-m", path, "--prompt-ids", ",".join(map(str, ids)), "--logits-out", logits_path,
           "--kv-type", "f32", "-t", "1"]
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL)
    got = array.array("f")
    with open(logits_path, "rb") as f:
        got.frombytes(f.read())
    got = torch.tensor(got.tolist()).view(-1, model.c.n_vocab)
    with torch.no_grad():
        want = model(torch.tensor([ids]))[0][0].double()
    want = want[-got.shape[0]:]
    rel = ((got.double() - want).abs().max() / want.abs().max()).item()
    print("exactness: %d rows of %d logits, max relative difference %.3g (tolerance %g)"
          % (got.shape[0], model.c.n_vocab, rel, REL_TOL))
    sys.exit(0 if rel <= REL_TOL else 1)


if __name__ == "__main__":
    main()
