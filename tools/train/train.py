"""Step 3: train the qwen3moe model and write its F32 GGUF.

Reads OUT/vocab.json (prepare.py) and OUT/tiny.gguf (check_exact.py, the
vocabulary carrier for bmoe's tokenizer); writes OUT/ckpt.pt every
--ckpt-every steps (a rerun with the same OUT resumes from it), the loss curve
OUT/loss.csv and finally OUT/model-f32.gguf. Held-out loss is scored as
bmoe-cli --ppl scores it: chunks of n_ctx tokens, the second half of each."""
import argparse
import csv
import math
import os
import random
import time

import torch
import torch.nn.functional as F

import data
import export
from bmoe_tokenize import Tokenizer
from model import Config, Model, balance_loss


def tokenize(out, vocab):
    cache = os.path.join(out, "ids.pt")
    if os.path.exists(cache):
        return torch.load(cache)
    tok = Tokenizer(os.path.join(out, "tiny.gguf"))
    parts = data.splits()
    eot = vocab["tokens"].index("<|endoftext|>")
    train, held = [], []
    for name in data.FILES:
        train += tok.encode(parts[name][0]) + [eot]
    held = tok.encode(data.held_out_text())
    tok.close()
    ids = {"train": torch.tensor(train), "heldout": torch.tensor(held)}
    torch.save(ids, cache)
    return ids


@torch.no_grad()
def held_out_loss(model, ids, n_ctx, chunks):
    """Mean NLL of the second half of each chunk, as bmoe --ppl."""
    total, count = 0.0, 0
    first = n_ctx // 2
    for i in range(min(chunks, len(ids) // n_ctx)):
        chunk = ids[i * n_ctx:(i + 1) * n_ctx].unsqueeze(0)
        logits, _ = model(chunk)
        total += F.cross_entropy(logits[0, first:n_ctx - 1], chunk[0, first + 1:], reduction="sum").item()
        count += n_ctx - 1 - first
    return total / count


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True)
    ap.add_argument("--seed", type=int, default=37)
    ap.add_argument("--steps", type=int, default=150)
    ap.add_argument("--batch", type=int, default=8, help="sequences of n_ctx + 1 tokens per step")
    ap.add_argument("--lr", type=float, default=3e-3)
    ap.add_argument("--warmup", type=int, default=15)
    ap.add_argument("--balance", type=float, default=0.01, help="load-balancing loss weight")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--max-minutes", type=float, default=0, help="stop early (0: never); the csv says where")
    ap.add_argument("--stop-at", type=int, default=0, help="stop after this step (0: at --steps)")
    ap.add_argument("--eval-every", type=int, default=25)
    ap.add_argument("--eval-chunks", type=int, default=8)
    ap.add_argument("--ckpt-every", type=int, default=10)
    ap.add_argument("--layers", type=int, default=6)
    ap.add_argument("--embd", type=int, default=256)
    ap.add_argument("--experts", type=int, default=32)
    ap.add_argument("--experts-used", type=int, default=4)
    ap.add_argument("--expert-ff", type=int, default=64)
    ap.add_argument("--name", default="bmoe qwen3moe shakespeare-wikitext")
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    vocab = export.load_vocab(os.path.join(args.out, "vocab.json"))
    ids = tokenize(args.out, vocab)
    c = Config(n_vocab=len(vocab["tokens"]), n_layer=args.layers, n_embd=args.embd, n_head=4, n_head_kv=2,
               head_dim=64, n_expert=args.experts, n_expert_used=args.experts_used, n_ff_exp=args.expert_ff,
               n_ctx=512, rope_base=10000.0, eps=1e-6)
    torch.manual_seed(args.seed)
    model = Model(c)
    model.init_weights(torch.Generator().manual_seed(args.seed))
    opt = torch.optim.AdamW(model.parameters(), lr=args.lr, betas=(0.9, 0.95), weight_decay=0.1)
    sampler = random.Random(args.seed)
    step = 0
    elapsed = 0.0
    ckpt = os.path.join(args.out, "ckpt.pt")
    log_path = os.path.join(args.out, "loss.csv")
    if os.path.exists(ckpt):
        state = torch.load(ckpt)
        model.load_state_dict(state["model"])
        opt.load_state_dict(state["opt"])
        sampler.setstate(state["sampler"])
        step, elapsed = state["step"], state["elapsed"]
        print("resumed at step %d" % step, flush=True)
    else:
        with open(log_path, "w", newline="") as f:
            csv.writer(f).writerow(["step", "tokens", "seconds", "lr", "train_loss", "balance_loss",
                                    "heldout_loss"])
    train = ids["train"]
    print("config %s; %d train / %d held-out tokens; %d parameters"
          % (c.to_dict(), len(train), len(ids["heldout"]), sum(p.numel() for p in model.parameters())),
          flush=True)
    n = c.n_ctx + 1
    started = time.time() - elapsed
    while step < (args.stop_at or args.steps):
        if args.max_minutes and time.time() - started > args.max_minutes * 60:
            print("time limit reached at step %d" % step, flush=True)
            break
        lr = args.lr * min(1.0, (step + 1) / args.warmup)
        lr *= 0.1 + 0.9 * 0.5 * (1 + math.cos(math.pi * min(1.0, step / args.steps)))
        for group in opt.param_groups:
            group["lr"] = lr
        starts = [sampler.randrange(0, len(train) - n) for _ in range(args.batch)]
        batch = torch.stack([train[s:s + n] for s in starts])
        model.train()
        logits, routing = model(batch[:, :-1])
        ce = F.cross_entropy(logits.reshape(-1, c.n_vocab), batch[:, 1:].reshape(-1))
        bal = balance_loss(routing, c.n_expert, c.n_expert_used)
        opt.zero_grad(set_to_none=True)
        (ce + args.balance * bal).backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        step += 1
        held = ""
        if step % args.eval_every == 0 or step == (args.stop_at or args.steps):
            model.eval()
            held = "%.4f" % held_out_loss(model, ids["heldout"], c.n_ctx, args.eval_chunks)
        seconds = time.time() - started
        with open(log_path, "a", newline="") as f:
            csv.writer(f).writerow([step, step * args.batch * c.n_ctx, "%.0f" % seconds, "%.6f" % lr,
                                    "%.4f" % ce.item(), "%.4f" % bal.item(), held])
        print("step %d  %.0f s  lr %.2e  loss %.4f  balance %.4f  held-out %s"
              % (step, seconds, lr, ce.item(), bal.item(), held or "-"), flush=True)
        if step % args.ckpt_every == 0:
            torch.save({"model": model.state_dict(), "opt": opt.state_dict(), "sampler": sampler.getstate(),
                        "step": step, "elapsed": seconds}, ckpt + ".tmp")
            os.replace(ckpt + ".tmp", ckpt)
    model.eval()
    export.write_gguf(os.path.join(args.out, "model-f32.gguf"), model, vocab, args.name)
    print("wrote %s after %d steps, %.0f s" % (os.path.join(args.out, "model-f32.gguf"), step,
                                               time.time() - started), flush=True)


if __name__ == "__main__":
    main()
