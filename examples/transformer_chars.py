"""Train a small character-level Transformer with ``await loss.backward()``.

Run:  python examples/transformer_chars.py [--steps N] [--backend asyncio|trio]

The text is made here: sentences drawn from a tiny grammar ("the quick cat sees a
red bird."), so the model has real structure to learn (words, agreement of
articles, the full stop) in well under a minute on a CPU. The model is an embedding
plus a learned position embedding, two ``nn.TransformerEncoderLayer``s
(``MultiheadAttention`` with a causal mask, pre-norm, GELU) and a linear head that
predicts the next character. Windows of the text come from a
``utils.data.DataLoader`` read with ``async for``: the next batch is sliced on
aiograd's CPU worker while the loop trains on the current one. This model's graph
(a few hundred nodes) is too big to run inline on the loop, as small graphs do, so
each ``await loss.backward()`` runs it on that worker while the event loop waits.
At the end the model continues a prompt, greedily.
"""

from __future__ import annotations

import argparse
import math
import time

import anyio
import numpy as np

import aiograd
from aiograd import nn, optim
from aiograd.utils.data import DataLoader, Dataset

SUBJECTS = ["the cat", "a dog", "the bird", "a fox", "the old man", "a child"]
ADJECTIVES = ["quick", "lazy", "red", "small", "happy", "brown"]
VERBS = ["sees", "likes", "chases", "finds", "hears"]
OBJECTS = ["fish", "ball", "tree", "house", "bird", "apple"]

CONTEXT = 32
D_MODEL = 64
HEADS = 4
LAYERS = 2
BATCH = 32


def make_text(n_sentences: int, rng: np.random.Generator) -> str:
    """Sentences "subject verb article adjective object." from the grammar above."""
    sentences = []
    for _ in range(n_sentences):
        adjective = ADJECTIVES[rng.integers(len(ADJECTIVES))]
        article = "an" if adjective[0] in "aeiou" else "a"
        sentences.append(f"{SUBJECTS[rng.integers(len(SUBJECTS))]} "
                         f"{VERBS[rng.integers(len(VERBS))]} {article} {adjective} "
                         f"{OBJECTS[rng.integers(len(OBJECTS))]}.")
    return " ".join(sentences)


class Windows(Dataset[tuple[np.ndarray, np.ndarray]]):
    """Sample ``i``: characters ``i .. i + CONTEXT`` and the same shifted by one."""

    def __init__(self, codes: np.ndarray) -> None:
        self.codes = codes

    def __len__(self) -> int:
        return len(self.codes) - CONTEXT - 1

    def __getitem__(self, i: int) -> tuple[np.ndarray, np.ndarray]:
        return self.codes[i:i + CONTEXT], self.codes[i + 1:i + CONTEXT + 1]


class CharTransformer(nn.Module):
    def __init__(self, vocab: int) -> None:
        super().__init__()
        self.embed = nn.Embedding(vocab, D_MODEL)
        self.position = nn.Embedding(CONTEXT, D_MODEL)
        layer = nn.TransformerEncoderLayer(D_MODEL, HEADS, dim_feedforward=4 * D_MODEL,
                                           dropout=0.0, activation="gelu", batch_first=True,
                                           norm_first=True)
        self.encoder = nn.TransformerEncoder(layer, LAYERS, norm=nn.LayerNorm(D_MODEL))
        self.head = nn.Linear(D_MODEL, vocab)

    def forward(self, codes: aiograd.Tensor) -> aiograd.Tensor:
        length = codes.shape[1]
        x = self.embed(codes) + self.position(aiograd.arange(length))
        # Query i may look at keys 0..i only: -inf above the diagonal.
        causal = aiograd.full((length, length), float("-inf")).triu(1)
        return self.head(self.encoder(x, mask=causal, is_causal=True))


def continue_text(model: CharTransformer, prompt: str, chars: list[str], n: int) -> str:
    index = {c: i for i, c in enumerate(chars)}
    codes = [index[c] for c in prompt]
    with aiograd.no_grad():
        for _ in range(n):
            window = aiograd.tensor([codes[-CONTEXT:]])
            logits = model(window)[0, -1]
            codes.append(int(logits.argmax()))
    return "".join(chars[c] for c in codes)


async def main(steps: int) -> None:
    rng = np.random.default_rng(0)
    aiograd.manual_seed(0)
    text = make_text(3000, rng)
    chars = sorted(set(text))
    codes = np.array([chars.index(c) for c in text], dtype=np.int64)
    loader = DataLoader(Windows(codes), batch_size=BATCH, shuffle=True,
                        generator=np.random.default_rng(0), drop_last=True)
    model = CharTransformer(len(chars))
    opt = optim.AdamW(model.parameters(), lr=3e-3, weight_decay=0.01)
    loss_fn = nn.CrossEntropyLoss()
    print(f"text: {len(text)} characters, vocabulary {len(chars)} "
          f"(uniform loss {math.log(len(chars)):.3f})")
    start = time.perf_counter()
    step = 0
    running = []
    while step < steps:
        async for x, y in loader:
            logits = model(x)
            loss = loss_fn(logits.reshape(-1, len(chars)), y.reshape(-1))
            opt.zero_grad()
            await loss.backward()
            nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            opt.step()
            running.append(loss.item())
            step += 1
            if step % 10 == 0 or step == steps:
                print(f"step {step:4d}  loss {np.mean(running):.4f}")
                running = []
            if step == steps:
                break
    elapsed = time.perf_counter() - start
    print(f"trained {steps} steps in {elapsed:.1f} s")
    print("sample:", continue_text(model, "the cat sees a ", chars, 40))


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=400)
    parser.add_argument("--backend", choices=["asyncio", "trio"], default="asyncio")
    args = parser.parse_args()
    anyio.run(main, args.steps, backend=args.backend)
