"""Step 1: learn the BPE merges on the training split and write the
vocabulary (vocab.json) and the held-out text (heldout.txt) to OUT."""
import argparse
import os
import time

import bpe
import data
import export


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True)
    ap.add_argument("--vocab", type=int, default=4096, help="vocabulary size, special tokens included")
    args = ap.parse_args()
    os.makedirs(args.out, exist_ok=True)
    parts = data.splits()
    train_text = "".join(parts[name][0] for name in data.FILES)
    start = time.time()
    tokens, merges = bpe.train(train_text, args.vocab - len(export.QWEN3_SPECIALS))
    vocab = export.make_vocab(tokens, merges)
    export.save_vocab(vocab, os.path.join(args.out, "vocab.json"))
    with open(os.path.join(args.out, "heldout.txt"), "w", encoding="utf-8", newline="") as f:
        f.write(data.held_out_text())
    print("vocab: %d tokens, %d merges (%.0f s)" % (len(vocab["tokens"]), len(merges), time.time() - start))


if __name__ == "__main__":
    main()
