"""The corpus split: the last tenth of each file (cut at a line start) is
held out for evaluation, the rest is training text. Wikitext's CRLF line
ends become LF so both texts share one kind of newline token."""
import os

CORPUS = os.path.join(os.path.dirname(__file__), "..", "..", "..", "shared", "data", "corpus")
FILES = ["tinyshakespeare.txt", "wikitext-2-raw-v1-test.hf-joined.crlf.txt"]
HELD_OUT_SHARE = 0.1


def splits(corpus=CORPUS):
    """{file: (train text, held-out text)}."""
    out = {}
    for name in FILES:
        with open(os.path.join(corpus, name), encoding="utf-8", newline="") as f:
            text = f.read().replace("\r\n", "\n")
        cut = text.index("\n", int(len(text) * (1 - HELD_OUT_SHARE))) + 1
        out[name] = (text[:cut], text[cut:])
    return out


def held_out_text(corpus=CORPUS):
    """The evaluation file bmoe-cli --ppl reads: both held-out parts."""
    parts = splits(corpus)
    return "".join(parts[name][1] for name in FILES)
