"""examples/python/license_qa.py - cloze questions on the license texts every Debian ships.

An extractive question-answering task made by a fixed rule from
/usr/share/common-licenses (base-files), for fine-tuning
examples/python/seed001_bert_qa.py:

1. Each file's paragraphs are reflowed and cut into segments after
   `.`, `!`, `?`, `;` and `:`. A segment of 6 to 40 words can be asked
   about.
2. The answer is a phrase of that segment: one to three consecutive words,
   each alphabetic, at least three letters and not a function word ("the",
   "which", "shall", ...), that occurs exactly once in the context (so its
   span is unambiguous). A segment gives up to `per_segment` questions with
   different answers.
3. The question is the segment with the answer replaced by "what"
   ("... the terms of the GNU what ..." for "General Public License").
4. The context is the asked segment and its neighbours in the file, added
   on a random side one at a time while `[CLS] question [SEP] context
   [SEP]` fits the sequence length, so the segment sits anywhere in it.

Finding the answer means finding which part of the context the question
paraphrases and where its gap falls: nothing about the position or the
look of a word gives it away. The texts are split by file, not by
question: training text is the GNU licenses (GPL 1-3, LGPL 2-3, GFDL
1.2-1.3), held-out text is Apache 2.0, the Artistic license, BSD, CC0 and
MPL 2.0 (MPL 1.1 is in neither: it shares clauses with MPL 2.0), and a
held-out segment half of whose five-word runs occur in the training text
(boilerplate every license repeats) is dropped.

Scoring is SQuAD's: a predicted span is the best start and end (end not
before start, at most 30 tokens) within the context, its text is cut from
the context by the tokenizer's character offsets, and exact match and F1
compare normalised words (lower case, no punctuation, no articles).
"""
import collections
import os
import random
import re
import string

import torch

LICENSES = "/usr/share/common-licenses"
TRAIN_FILES = ("GPL-1", "GPL-2", "GPL-3", "LGPL-2", "LGPL-2.1", "LGPL-3", "GFDL-1.2", "GFDL-1.3")
TEST_FILES = ("Apache-2.0", "Artistic", "BSD", "CC0-1.0", "MPL-2.0")

# Function words (and the legal ones every clause has) are never answers.
STOPWORDS = frozenset("""
a about above after again against all also am an and any are as at be because been before being below
between both but by can could did do does doing done down during each either etc few for from further had
has have having he her here hers him his how however i if in into is it its itself may me might more most
must my neither no nor not now of off on once only or other otherwise our out over own per same shall she
should so some such than that the their them then there these they this those through thus to too under
unless until up upon us very was we were what when where whether which while who whom whose why will with
within without would yes yet you your yours
""".split())

_WORD = re.compile(r"[A-Za-z][A-Za-z'-]*|[0-9]+|[^\sA-Za-z0-9]")
_SEGMENT_END = re.compile(r"(?<=[.!?;:])\s+")


def segments(path):
    """The file's text as segments (sentences and clauses), in order."""
    with open(path, encoding="utf-8", errors="replace") as f:
        text = f.read()
    out = []
    for para in re.split(r"\n\s*\n", text):
        para = " ".join(para.split())
        out += [s for s in _SEGMENT_END.split(para) if s]
    return out


def _content(word):
    return word.isalpha() and len(word) >= 3 and word.lower() not in STOPWORDS


def _answers(segment, rng, per_segment):
    """Up to per_segment (start, end) character spans of 1-3 content words."""
    words = [(m.start(), m.end(), m.group()) for m in _WORD.finditer(segment)]
    starts = [i for i, w in enumerate(words) if _content(w[2])]
    rng.shuffle(starts)
    spans = []
    for i in starts[:per_segment * 3]:
        n = 1
        while n < 3 and i + n < len(words) and _content(words[i + n][2]) and rng.random() < 0.5:
            n += 1
        span = (words[i][0], words[i + n - 1][1])
        if not any(a < span[1] and span[0] < b for a, b in spans):
            spans.append(span)
        if len(spans) == per_segment:
            break
    return spans


def _count(phrase, text):
    return len(re.findall(r"(?<![A-Za-z])" + re.escape(phrase.lower()) + r"(?![A-Za-z])", text.lower()))


def _ngrams(text, n=5):
    w = normalize(text).split()
    return {tuple(w[i:i + n]) for i in range(len(w) - n + 1)}


class LicenseQA(torch.utils.data.Dataset):
    """Cloze questions on `files`, tokenized to `seq_len` by `tokenizer` (a
    Hugging Face fast tokenizer); item i is a dict of the model's keyword
    arguments: input_ids, attention_mask, token_type_ids, start_positions,
    end_positions. `exclude` is a set of five-word runs (see _ngrams) whose
    segments are dropped when half of theirs are in it."""

    def __init__(self, tokenizer, files, seq_len=128, per_segment=2, seed=0, exclude=None,
                 directory=LICENSES):
        self.seq_len = seq_len
        self.examples = []  # (question, context, answer text, answer char start)
        self.dropped = 0
        rng = random.Random(seed)
        for name in files:
            path = os.path.join(directory, name)
            if not os.path.isfile(path):
                raise FileNotFoundError(f"license_qa: {path} is missing (Debian's base-files ships "
                                        f"{directory}); pass directory= where the license texts are")
            segs = segments(path)
            for k, seg in enumerate(segs):
                if not 6 <= len(seg.split()) <= 40:
                    continue
                if exclude is not None:
                    grams = _ngrams(seg)
                    if grams and len(grams & exclude) * 2 >= len(grams):
                        self.dropped += 1
                        continue
                for a, b in _answers(seg, rng, per_segment):
                    ex = self._example(tokenizer, segs, k, a, b, rng)
                    if ex is not None:
                        self.examples.append(ex)
        self.features = self._encode(tokenizer)

    def _example(self, tokenizer, segs, k, a, b, rng):
        seg = segs[k]
        answer = seg[a:b]
        question = seg[:a] + "what" + seg[b:]
        budget = self.seq_len - 3 - len(tokenizer(question, add_special_tokens=False)["input_ids"])
        lo = hi = k
        size = len(tokenizer(seg, add_special_tokens=False)["input_ids"])
        if size > budget:
            return None
        sides = [-1, 1]
        while sides:
            side = rng.choice(sides)
            j = lo - 1 if side < 0 else hi + 1
            if not 0 <= j < len(segs):
                sides.remove(side)
                continue
            n = len(tokenizer(segs[j], add_special_tokens=False)["input_ids"])
            if size + n > budget:
                sides.remove(side)
                continue
            size += n
            lo, hi = (j, hi) if side < 0 else (lo, j)
        before = " ".join(segs[lo:k])
        context = " ".join(segs[lo:hi + 1])
        start = (len(before) + 1 if before else 0) + a
        if _count(answer, context) != 1:
            return None
        return question, context, answer, start

    def _encode(self, tokenizer):
        qs = [e[0] for e in self.examples]
        cs = [e[1] for e in self.examples]
        enc = tokenizer(qs, cs, max_length=self.seq_len, truncation="only_second", padding="max_length",
                        return_offsets_mapping=True, return_tensors="pt")
        starts, ends, keep = [], [], []
        for i, (_, _, answer, a) in enumerate(self.examples):
            seq = enc.sequence_ids(i)
            offs = enc["offset_mapping"][i].tolist()
            s = next((t for t, (o, q) in enumerate(offs) if seq[t] == 1 and o == a), None)
            e = next((t for t, (o, q) in enumerate(offs) if seq[t] == 1 and q == a + len(answer)), None)
            if s is None or e is None or e < s:
                continue
            keep.append(i)
            starts.append(s)
            ends.append(e)
        self.examples = [self.examples[i] for i in keep]
        idx = torch.tensor(keep, dtype=torch.int64)
        self.context_mask = torch.tensor([[x == 1 for x in enc.sequence_ids(i)] for i in keep])
        self.offsets = enc["offset_mapping"][idx]
        return {"input_ids": enc["input_ids"][idx], "attention_mask": enc["attention_mask"][idx],
                "token_type_ids": enc["token_type_ids"][idx],
                "start_positions": torch.tensor(starts), "end_positions": torch.tensor(ends)}

    def __len__(self):
        return len(self.examples)

    def __getitem__(self, i):
        return {k: v[i] for k, v in self.features.items()}

    def predict(self, i, start_logits, end_logits, max_answer=30):
        """The text of the best span within example i's context."""
        ok = self.context_mask[i]
        s = start_logits.masked_fill(~ok, float("-inf"))
        e = end_logits.masked_fill(~ok, float("-inf"))
        score = s[:, None] + e[None, :]
        n = score.shape[0]
        band = torch.ones(n, n, dtype=torch.bool).triu().tril(max_answer - 1)
        score = score.masked_fill(~band, float("-inf"))
        best = int(score.flatten().argmax())
        a, b = divmod(best, n)
        return self.examples[i][1][int(self.offsets[i, a, 0]):int(self.offsets[i, b, 1])]

    def score(self, start_logits, end_logits):
        """SQuAD exact match and F1 (%) of the first examples, one per row of the logits."""
        n = start_logits.shape[0]
        em = f1 = 0.0
        for i in range(n):
            pred = self.predict(i, start_logits[i], end_logits[i])
            gold = self.examples[i][2]
            em += float(normalize(pred) == normalize(gold))
            f1 += f1_score(pred, gold)
        return 100.0 * em / n, 100.0 * f1 / n


def training_ngrams(files=TRAIN_FILES, directory=LICENSES):
    grams = set()
    for name in files:
        for seg in segments(os.path.join(directory, name)):
            grams |= _ngrams(seg)
    return grams


def normalize(text):
    """SQuAD's answer normalisation: lower case, no punctuation, no articles, single spaces."""
    text = "".join(c for c in text.lower() if c not in string.punctuation)
    return " ".join(w for w in text.split() if w not in ("a", "an", "the"))


def f1_score(pred, gold):
    p, g = normalize(pred).split(), normalize(gold).split()
    common = sum((collections.Counter(p) & collections.Counter(g)).values())
    if common == 0:
        return 0.0
    precision, recall = common / len(p), common / len(g)
    return 2 * precision * recall / (precision + recall)


def build(tokenizer, seq_len=128, seed=0):
    """(training set, held-out set) as the module's docstring describes."""
    train = LicenseQA(tokenizer, TRAIN_FILES, seq_len, per_segment=2, seed=seed)
    test = LicenseQA(tokenizer, TEST_FILES, seq_len, per_segment=2, seed=seed + 1,
                     exclude=training_ngrams())
    return train, test
