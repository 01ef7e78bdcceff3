#!/usr/bin/python3
"""Held-out TinyStories prompts for measuring a stories260K draft on text it never trained on.

  tools/heldout_prompts.py ../shared/data/tinystories OUT_DIR

writes OUT_DIR/first_sentences.txt (the first sentence of validation paragraphs 400 onwards that
appear neither in examples/stories260k/val_prompts.txt, the tuning set, nor in the training text;
200 of them) and OUT_DIR/openings80.txt (the first 80 characters, cut at a word, of validation
paragraphs 1200 onwards; 100) and OUT_DIR/traffic.txt (every distinct validation sentence of 5 or
more words that is neither in the training text nor a tuning prompt, in a seeded shuffled order:
~7,000 prompts, the served traffic of the online-training experiment, docs/online-training.md),
and that traffic split in two, each prompt cut to its first 60 characters (at a word):
OUT_DIR/online_eval.txt (traffic prompts 0-2999, the slice the online-training figures are
measured on and no choice was tuned on) and OUT_DIR/online_tune.txt (prompts 3500 onwards, the
slice options were tuned on).
The training recipe reads only tinystories_train_head_subset.txt.
"""
import random
import os
import re
import sys


def main():
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    data, out = sys.argv[1], sys.argv[2]
    val = open(os.path.join(data, "tinystories_val_part1.txt"), encoding="utf-8").read()
    train = open(os.path.join(data, "tinystories_train_head_subset.txt"), encoding="utf-8").read()
    here = os.path.dirname(os.path.abspath(__file__))
    tuning = set(l.strip() for l in open(os.path.join(here, "..", "examples", "stories260k", "val_prompts.txt"),
                                         encoding="utf-8"))
    paras = [p.strip().replace("\n", " ") for p in re.split(r"\n\s*\n", val) if p.strip()]

    def first_sentence(p):
        m = re.match(r"(.+?[.!?])(\s|$)", p)
        return m.group(1) if m else p[:80]

    firsts = [s for s in map(first_sentence, paras[400:]) if s not in tuning and len(s) > 20 and s not in train][:200]
    openings = [p[:80].rsplit(" ", 1)[0] for p in paras[1200:] if len(p) > 100][:100]
    seen, traffic = set(), []
    for p in paras:
        for m in re.finditer(r"[^.!?]+[.!?]", p):
            t = m.group(0).strip()
            if len(t.split()) >= 5 and t not in seen and t not in tuning and t not in train:
                seen.add(t)
                traffic.append(t)
    random.Random(0).shuffle(traffic)
    cut60 = [t if len(t) <= 60 else t[:60].rsplit(" ", 1)[0] for t in traffic]
    os.makedirs(out, exist_ok=True)
    for name, rows in (("first_sentences.txt", firsts), ("openings80.txt", openings), ("traffic.txt", traffic),
                       ("online_eval.txt", cut60[:3000]), ("online_tune.txt", cut60[3500:])):
        with open(os.path.join(out, name), "w", encoding="utf-8") as f:
            f.write("\n".join(rows) + "\n")
        print(f"{len(rows)} prompts -> {os.path.join(out, name)}")


if __name__ == "__main__":
    main()
