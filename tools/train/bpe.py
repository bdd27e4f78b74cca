"""Byte-level BPE training for the model's tokenizer (GGUF "gpt2" model,
"qwen2" pre-tokenizer). Only the merges are learned here: the text is cut
with an approximation of the qwen2 split regex (Python's re has no \\p{L};
letters are [^\\W\\d_]), so a merge can never join what bmoe's tokenizer
keeps apart. Encoding the corpus is left to bmoe itself (tokenize.py), so
training sees exactly the ids inference will see."""
import collections
import re

# tokenizers.md, QWEN2: contractions | optional non-letter + letters |
# one digit | optional space + punctuation run + newlines | newline runs |
# whitespace not before a non-space | other whitespace.
_SPLIT = re.compile(
    r"(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])"
    r"|(?:[^\r\n\w]|_)?[^\W\d_]+"
    r"|\d"
    r"| ?(?:[^\s\w]|_)+[\r\n]*"
    r"|\s*[\r\n]+"
    r"|\s+(?!\S)"
    r"|\s+"
)


def byte_to_unicode():
    """GPT-2's byte-to-code-point table (tokenizers.md 5.2): printable bytes
    stand for themselves, the others move to U+0100 and up."""
    keep = list(range(0x21, 0x7F)) + list(range(0xA1, 0xAD)) + list(range(0xAE, 0x100))
    table = {}
    extra = 0
    for b in range(256):
        if b in keep:
            table[b] = chr(b)
        else:
            table[b] = chr(0x100 + extra)
            extra += 1
    return table


def train(text, n_tokens):
    """Returns (tokens, merges): the 256 byte tokens in byte order, then one
    token per new merge, n_tokens in all; merges as "left right" strings.
    The most frequent adjacent pair wins; ties go to the smallest pair."""
    b2u = byte_to_unicode()
    words = collections.Counter(_SPLIT.findall(text))
    # each distinct piece as a list of symbols with its count
    pieces = [[b2u[b] for b in w.encode("utf-8")] for w in words]
    counts = list(words.values())
    pairs = collections.Counter()
    where = collections.defaultdict(set)
    for i, symbols in enumerate(pieces):
        for a, b in zip(symbols, symbols[1:]):
            pairs[(a, b)] += counts[i]
            where[(a, b)].add(i)
    tokens = [b2u[b] for b in range(256)]
    known = set(tokens)
    merges = []
    while len(tokens) < n_tokens and pairs:
        best = max(pairs.items(), key=lambda kv: (kv[1], _neg(kv[0])))[0]
        if pairs[best] < 2:
            break
        a, b = best
        merged = a + b
        merges.append(a + " " + b)
        if merged not in known:
            known.add(merged)
            tokens.append(merged)
        for i in list(where[best]):
            symbols = pieces[i]
            c = counts[i]
            for x, y in zip(symbols, symbols[1:]):
                pairs[(x, y)] -= c
                if pairs[(x, y)] <= 0:
                    del pairs[(x, y)]
            out = []
            j = 0
            while j < len(symbols):
                if j + 1 < len(symbols) and symbols[j] == a and symbols[j + 1] == b:
                    out.append(merged)
                    j += 2
                else:
                    out.append(symbols[j])
                    j += 1
            pieces[i] = out
            for x, y in zip(out, out[1:]):
                pairs[(x, y)] += c
                where[(x, y)].add(i)
        del where[best]
    return tokens, merges


def _neg(pair):
    # max() with ties resolved to the lexicographically smallest pair
    return tuple(tuple(-ord(ch) for ch in s) for s in pair)
