"""Does a muP parametrisation make one learning rate transfer across the tiny widths?

    python bench/bench_mup.py                     # d32/64/128 x 6+ rates x {standard, muP}, 250K tokens (~13 min)
    python bench/bench_mup.py --tokens 200000 --lrs 0.0025 0.004 0.0063 0.01 0.016   # a smaller grid
    python bench/bench_mup.py --no-seed-check     # without the second-seed runs (~1.5 min less)
    python bench/bench_mup.py --out /tmp/mup.json # also write every loss as JSON

Trains the project's GPT (scaling.train.model) at widths d_model 32, 64 and 128, fixed depth (3
layers) and head dim (16), on the builtin corpus with configs/tiny.yaml's recipe (1,024-token
BPE, context 128, 1,024-token batches, AdamW wd 0.1 and betas 0.9/0.95, cosine schedule with 5%
warmup down to 0.1 x lr, grad clip 1.0), over a log grid of learning rates, under two
parametrisations:

* standard: the model exactly as `scaling` builds it (init std 0.02, residual projections
  0.02/sqrt(2L)) with `make_optimizer`'s one global rate;
* muP (Yang et al. 2022, Tensor Programs V, in the formulation of the `mup` package, with base
  width 32): see `MuGPT` and `mup_optimizer` below.

At the base width muP is the standard model, bit for bit (checked before training, so the d32 runs
serve both). Every run has the same seed, so the same initial draws (muP rescales them) and the
same batches (scaling.train.batches.get_batch), trained by the project's own
scaling.train.loop.train_step at scaling.train.schedule.lr_at's rates (the standard d64 runs
reproduce runs/tiny-tune's d64/L3 losses to the 4 decimals printed). The score is the final
validation loss (the first 32K validation tokens, scaling.train.batches.evaluate). Per
parametrisation and width: the optimum rate, by scaling.tuning.shapes.choose (a parabola in ln lr
through the best rate and its neighbours), and its loss; then the d32 optimum is applied to d64
and d128 (one more run each) to measure what a single transferred rate costs: loss at the
transferred rate minus loss at the width's own optimum (the parabola's value). The rate ratio
lr_opt(d128) / lr_opt(d32) says how far the optimum moves: 1 is perfect transfer. A best rate at
the grid's edge adds the next rate out (--widen). Last, each cell's best grid rate is trained
again with seed 1 (other init, other batches): how much a single run's loss scatters. A small
coordinate check first prints how far 10 steps move the logits at each width: under muP it should
not grow with width.

Measured (2026-12-03, 2 cores shared with other work, one torch thread): 42 runs, 13.2 min.
muP at d32 is the standard model bit for bit; the coordinate check behaves (RMS logit change after
10 steps at 1e-2: standard 1.69 / 2.23 / 2.27 at d32 / d64 / d128, muP 1.69 / 1.70 / 1.72).
Final validation loss (nats/token), 250K tokens, seed 0; N non-embedding; 0.025 is a widened rate:

    param.    width    N   0.0016  0.0025   0.004  0.0063    0.01   0.016   0.025   lr_opt   L_opt
    both        d32   37K  5.4352  5.3517  5.2736  5.3462  5.2624  5.1880  5.2449   0.0163  5.1879
    standard    d64  148K  5.1028  5.0598  4.9728  5.0665  5.1232  5.1167          0.00393  4.9727
    muP         d64  148K  5.4010  5.2615  5.3511  5.3206  5.6062  5.1307  5.2741   0.0179  5.1123
    standard   d128  592K  4.6906  4.6540  4.9704  4.9272  5.1312  5.2909           0.0021  4.6292
    muP        d128  592K  5.4040  5.1984  5.2009  5.3196  5.1971  5.1959  5.2142    0.013  5.1938

    d32's optimum (0.0163) trained at     d64 (penalty vs own optimum)   d128 (penalty)
    standard                              5.2212 (+0.249)                5.3126 (+0.683)
    muP                                   5.2231 (+0.111)                5.1330 (-0.061)

    seed 1 minus seed 0 at the best grid rate: d32 +0.522; standard d64 +0.241, d128 +0.420;
    muP d64 +0.010, d128 +0.020

* Transfer, as asked: under muP the optimum moves by a factor 0.80 from d32 to d128 (0.0163 ->
  0.013) and the d32 rate costs nothing at d128 (-0.06, i.e. within noise); under the standard
  parametrisation it moves by 0.13 (0.0163 -> 0.0021) and the d32 rate costs +0.68 nats at d128.
  muP's loss is also flat in the rate: 5.196-5.214 from 2.5e-3 to 2.5e-2 at d128, bar 5.32 at
  6.3e-3 and 5.40 at 1.6e-3.
* But muP's wide models are much worse: at its own optimum muP d128 (5.19) is no better than d32
  (5.19) and 0.56 nats worse than the standard d128 (4.63; 5.07 with seed 1, still 0.12-0.14
  better than muP's either seed). Width buys nothing under muP here, so the rate "transfers" in
  part because every muP width trains like the d32 model. A plausible cause, not tested here: the
  readout multiplier base/width makes the logits of the wider models grow only as fast as d32's,
  which a 245-step run cannot afford; muP's base multipliers (output, embedding) are the standard
  model's, never tuned for muP.
* The standard figures are noisy: single 250K-token runs of the standard model (d32 included)
  scatter by 0.24-0.52 nats between seeds at their best rate (a seed-0 winner, so biased
  upwards, but far above the differences between neighbouring rates), and the d32 curve is
  bumpy (5.27, 5.35, 5.26, 5.19 from 4e-3 to 1.6e-2). The ratio 0.13 rests on a d32 optimum
  at 1.6e-2 that one seed decides; runs/tiny-tune's law lr_opt = 0.0512 N^-0.230 predicts 0.53
  over this factor 16 in N. muP's runs scatter much less (0.01-0.02).

Conclusion: not as a model option yet. muP does make one rate transfer across d32-d128 on this
corpus (ratio 0.80 vs 0.13, no penalty vs +0.68 nats), but the wider models lose at their best
(0.14 nats at d64, 0.56 at d128), which would flatten the loss-vs-N curve a scaling fit reads.
Worth revisiting with the base multipliers tuned for muP (output multiplier, embedding scale),
several seeds per point and a longer horizon than 250K tokens.
"""

from __future__ import annotations

import argparse
import json
import math
import time
from contextlib import nullcontext

import torch
import torch.nn.functional as F

from scaling.config import TrainConfig, load_config
from scaling.data.tokens import prepare_tokens
from scaling.sweeps.job import token_data
from scaling.train.batches import TokenData, evaluate, get_batch, val_windows
from scaling.train.loop import keep_freed_memory, make_optimizer, train_step
from scaling.train.model import GPT, CausalSelfAttention
from scaling.train.schedule import lr_at
from scaling.train.shape import GPTConfig, param_counts
from scaling.tuning.shapes import choose

CONFIG = "configs/tiny.yaml"
WIDTHS = (32, 64, 128)
BASE_WIDTH = 32
N_LAYERS = 3
HEAD_DIM = 16
# runs/tiny-tune's rates (10^0.2 apart) less its lowest, 1e-3 (the worst at every shape there and
# here), plus 1.6e-2 above: a best rate at an edge adds the next rate out (--widen).
LRS = (1.6e-3, 2.5e-3, 4e-3, 6.3e-3, 1e-2, 1.6e-2)
TOKENS = 250_000
SEED = 0
CPU = torch.device("cpu")
PARAMETRISATIONS = ("standard", "muP")


# --- muP ------------------------------------------------------------------------------------
#
# Tensor Programs V sorts the weights by which of their dimensions grow with the width:
# - hidden (matrix-like: both grow): qkv, attn.proj, mlp.fc, mlp.proj. With Adam, each update
#   moves every entry by about lr, and a fan_in-wide sum of such correlated moves grows like the
#   width, so their rate is scaled by base/width; their init std by sqrt(base/width) (variance
#   1/fan_in, the standard model's 0.02 at the base width).
# - vector-like (one grows): the token and position embeddings (fan_in is the vocabulary or
#   context), the LayerNorm gains and biases, and the readout (fan_out is the vocabulary): base
#   rate and base init. The readout's sum over the width is instead tamed by a fixed output
#   multiplier base/width on the logits (the `mup` package's MuReadout: constant-variance init,
#   constant Adam rate, 1/width multiplier).
# Tied embeddings: the readout here is the token embedding matrix itself. That is consistent
# with the formulation above: both roles want constant init and a constant Adam rate, and the
# multiplier acts on the readout's input (the `mup` package's MuSharedReadout), so the tied
# matrix stays in the base-rate group and only the logits are scaled.
# Attention: muP scores q.k / head_dim (the entries of q and k become correlated during
# training, so the dot product grows like head_dim, not its square root). Written relative to
# the base head dim, sqrt(base_head_dim) / head_dim, it equals the standard 1/sqrt(head_dim) at
# the base; here the head dim is fixed at 16 at every width (the width grows by adding heads),
# so the scale is the constant 1/4 throughout and this adjustment changes nothing. It is kept
# so that the model would stay muP if the head dim grew too.


def attention_scale(head_dim: int, base_head_dim: int = HEAD_DIM) -> float:
    return math.sqrt(base_head_dim) / head_dim


class MuAttention(CausalSelfAttention):
    """The project's attention with muP's 1/head_dim score scale (same parameters)."""

    scale: float

    def forward(self, x):
        B, T, C = x.shape
        q, k, v = self.qkv(x).split(C, dim=2)
        q, k, v = (t.view(B, T, self.n_heads, C // self.n_heads).transpose(1, 2) for t in (q, k, v))
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True, scale=self.scale)
        return self.proj(y.transpose(1, 2).contiguous().view(B, T, C))


class MuGPT(GPT):
    """The project's GPT, muP-parametrised about `base_width`; identical to GPT at the base width."""

    def __init__(self, cfg: GPTConfig, base_width: int = BASE_WIDTH):
        super().__init__(cfg)  # the standard init, drawn from the same random stream as GPT's
        self.width_mult = cfg.d_model / base_width
        # Rescaling the standard draws (rather than drawing afresh) keeps the same random stream:
        # a normal of std s times c is a normal of std c s, and at the base width nothing changes.
        with torch.no_grad():
            for weight in self.hidden_weights():
                weight.mul_(1 / math.sqrt(self.width_mult))
        for block in self.blocks:
            block.attn.__class__ = MuAttention  # only the forward differs; its parameters stay
            block.attn.scale = attention_scale(cfg.d_model // cfg.n_heads)

    def hidden_weights(self) -> list[torch.nn.Parameter]:
        """The matrix-like weights: both dimensions grow with the width."""
        return [w for b in self.blocks for w in (b.attn.qkv.weight, b.attn.proj.weight,
                                                 b.mlp.fc.weight, b.mlp.proj.weight)]

    def forward(self, idx, targets=None):
        """GPT.forward, with the readout's input multiplied by base/width (1/width_mult)."""
        T = idx.shape[1]
        x = self.tok_emb(idx) + self.pos_emb(torch.arange(T, device=idx.device))
        for block in self.blocks:
            x = block(x)
        logits = self.head(self.ln_f(x) * (1 / self.width_mult))
        if targets is None:
            return logits, None
        return logits, F.cross_entropy(logits.view(-1, logits.size(-1)), targets.view(-1))


class GroupScaledAdamW(torch.optim.AdamW):
    """AdamW whose groups carry an `lr_scale`: each step uses lr * lr_scale. train_step sets one
    lr on every group (the schedule's); the scale is applied here, so that the project's step
    trains the muP model unchanged."""

    def step(self, closure=None):
        rates = [group["lr"] for group in self.param_groups]
        for group in self.param_groups:
            group["lr"] = group["lr"] * group["lr_scale"]
        try:
            return super().step(closure)
        finally:
            for group, lr in zip(self.param_groups, rates):
                group["lr"] = lr


def mup_optimizer(model: MuGPT, train: TrainConfig, lr: float) -> GroupScaledAdamW:
    """muP's Adam: hidden matrices at lr * base/width; embeddings (the tied readout too) and
    LayerNorms at lr. The hidden weight decay is scaled by width/base, keeping AdamW's per-step
    shrink lr * wd the same at every width (the `mup` package's MuAdamW does the same unless
    decoupled_wd). Decay as make_optimizer: every matrix, never the LayerNorm parameters."""
    hidden = {id(w) for w in model.hidden_weights()}
    params = list(model.parameters())  # the tied readout appears once, as tok_emb.weight
    m = model.width_mult
    groups = [
        {"params": [p for p in params if id(p) in hidden], "lr_scale": 1 / m, "weight_decay": train.weight_decay * m},
        {"params": [p for p in params if p.dim() >= 2 and id(p) not in hidden], "lr_scale": 1.0,
         "weight_decay": train.weight_decay},
        {"params": [p for p in params if p.dim() < 2], "lr_scale": 1.0, "weight_decay": 0.0},
    ]
    return GroupScaledAdamW(groups, lr=lr, betas=(train.beta1, train.beta2), fused=True)


# --- training ---------------------------------------------------------------------------------


def gpt_config(width: int, vocab_size: int, context: int) -> GPTConfig:
    return GPTConfig(vocab_size=vocab_size, context_length=context, d_model=width, n_layers=N_LAYERS,
                     n_heads=width // HEAD_DIM)


def build(parametrisation: str, cfg: GPTConfig, train: TrainConfig, lr: float, seed: int):
    torch.manual_seed(seed)
    if parametrisation == "standard":
        model = GPT(cfg)
        return model, make_optimizer(model, train, lr)
    model = MuGPT(cfg)
    return model, mup_optimizer(model, train, lr)


def train(parametrisation: str, cfg: GPTConfig, train_cfg: TrainConfig, data: TokenData, lr: float,
          tokens: int, seed: int = SEED) -> float | None:
    """Final validation loss of one run (None if it diverged): the loop of scaling.train.loop
    without its logging and checkpoints."""
    model, optimizer = build(parametrisation, cfg, train_cfg, lr, seed)
    steps = math.ceil(tokens / train_cfg.batch_tokens)
    n_seqs = train_cfg.batch_tokens // cfg.context_length
    for step in range(1, steps + 1):
        x, y = get_batch(data.train, seed, step, n_seqs, cfg.context_length, CPU)
        loss = train_step(model, optimizer, x, y, lr_at(step, steps, lr, train_cfg), nullcontext(),
                          train_cfg.grad_clip)
        if step % 50 == 0 and not math.isfinite(loss.item()):
            return None
    val_loss = evaluate(model, val_windows(data, train_cfg.eval_tokens, cfg.context_length, CPU), n_seqs,
                        nullcontext()).loss
    return val_loss if math.isfinite(val_loss) else None


def check_base_identity(cfg: GPTConfig, train_cfg: TrainConfig, data: TokenData, steps: int = 5) -> bool:
    """At the base width the muP model and optimizer are the standard ones: same weights after a few steps."""
    models = []
    for parametrisation in PARAMETRISATIONS:
        model, optimizer = build(parametrisation, cfg, train_cfg, 1e-2, SEED)
        for step in range(1, steps + 1):
            x, y = get_batch(data.train, SEED, step, train_cfg.batch_tokens // cfg.context_length,
                             cfg.context_length, CPU)
            train_step(model, optimizer, x, y, 1e-2, nullcontext(), train_cfg.grad_clip)
        models.append(model)
    return all(torch.equal(a, b) for a, b in zip(models[0].parameters(), models[1].parameters()))


def coord_check(vocab_size: int, train_cfg: TrainConfig, data: TokenData, context: int, lr: float = 1e-2,
                steps: int = 10) -> None:
    """RMS change of the logits after `steps` updates at `lr`, per width: muP keeps it O(1) in width."""
    print(f"coordinate check: RMS change of the logits after {steps} steps at lr {lr:g}")
    n_seqs = train_cfg.batch_tokens // context
    probe, _ = get_batch(data.val, SEED, 0, n_seqs, context, CPU)
    for parametrisation in PARAMETRISATIONS:
        row = []
        for width in WIDTHS:
            model, optimizer = build(parametrisation, gpt_config(width, vocab_size, context), train_cfg, lr, SEED)
            with torch.no_grad():
                before = model(probe)[0]
            for step in range(1, steps + 1):
                x, y = get_batch(data.train, SEED, step, n_seqs, context, CPU)
                train_step(model, optimizer, x, y, lr, nullcontext(), train_cfg.grad_clip)
            with torch.no_grad():
                row.append(f"d{width} {(model(probe)[0] - before).pow(2).mean().sqrt().item():.3f}")
        print(f"  {parametrisation:<9} " + "   ".join(row))


def fmt(value, spec=".4f", none="-") -> str:
    return none if value is None else format(value, spec)


def next_rate(lr: float, up: bool) -> float:
    """The neighbour of lr on the grid's ladder of 10^(1/5) steps (1, 1.6, 2.5, 4, 6.3 per decade)."""
    k = round(5 * math.log10(lr)) + (1 if up else -1)
    return float(f"{10 ** (k / 5):.2g}")


class Sweep:
    """The runs of the bench: final validation loss per (parametrisation, width, lr, seed), and a log line each."""

    def __init__(self, vocab: int, context: int, train_cfg: TrainConfig, data: TokenData, tokens: int):
        self.vocab, self.context, self.train_cfg, self.data, self.tokens = vocab, context, train_cfg, data, tokens
        self.losses: dict[tuple[str, int, float, int], float | None] = {}
        self.start = time.perf_counter()
        self.identical = False  # muP at the base width is the standard model: its runs are shared

    def key(self, parametrisation: str, width: int, lr: float, seed: int):
        shared = self.identical and width == BASE_WIDTH
        return "standard" if shared else parametrisation, width, lr, seed

    def loss(self, parametrisation: str, width: int, lr: float, seed: int = SEED, note: str = "") -> float | None:
        key = self.key(parametrisation, width, lr, seed)
        if key not in self.losses:
            cfg = gpt_config(width, self.vocab, self.context)
            self.losses[key] = train(key[0], cfg, self.train_cfg, self.data, lr, self.tokens, seed)
            print(f"  {key[0]:<9} d{width:<4} lr {lr:<8g} seed {seed}  val loss {fmt(self.losses[key])}  {note}"
                  f"[{time.perf_counter() - self.start:.0f} s]", flush=True)
        return self.losses[key]

    def rates(self, parametrisation: str, width: int) -> list[float]:
        """The rates trained so far for this cell (seed SEED), ascending."""
        stored = self.key(parametrisation, width, 0.0, SEED)[0]
        return sorted(lr for p, w, lr, seed in self.losses if (p, w, seed) == (stored, width, SEED))

    def choice(self, parametrisation: str, width: int):
        lrs = self.rates(parametrisation, width)
        return lrs, choose(lrs, [self.loss(parametrisation, width, lr) for lr in lrs])


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--tokens", type=int, default=TOKENS, help=f"training tokens per run (default {TOKENS:,})")
    p.add_argument("--lrs", type=float, nargs="+", default=LRS, help="the learning-rate grid (nominal, base width)")
    p.add_argument("--widen", type=int, default=2, help="rates added, one at a time, while the best is at the "
                   "grid's edge (default 2)")
    p.add_argument("--no-seed-check", action="store_true", help="skip retraining each best rate with another seed")
    p.add_argument("--threads", type=int, default=1, help="torch threads (default 1)")
    p.add_argument("--out", help="write every loss to this JSON file")
    args = p.parse_args(argv)

    torch.set_num_threads(args.threads)
    keep_freed_memory()
    config = load_config(CONFIG)
    cache = prepare_tokens(config)
    sweep = Sweep(cache.vocab_size, config.model.context_length, config.train, token_data(cache), args.tokens)
    vocab, context, train_cfg, data = sweep.vocab, sweep.context, sweep.train_cfg, sweep.data

    sweep.identical = check_base_identity(gpt_config(BASE_WIDTH, vocab, context), train_cfg, data)
    print(f"muP at the base width d{BASE_WIDTH} is the standard model bit for bit: {sweep.identical}")
    coord_check(vocab, train_cfg, data, context)

    cells = [(p, w) for w in WIDTHS for p in PARAMETRISATIONS]
    for parametrisation, width in cells:
        for lr in sorted(args.lrs):
            sweep.loss(parametrisation, width, lr)
        # A best rate at the grid's edge says the optimum lies outside: add the next rate out.
        for _ in range(args.widen):
            lrs, c = sweep.choice(parametrisation, width)
            if c.edge is None:
                break
            sweep.loss(parametrisation, width, next_rate(lrs[-1] if c.edge == "highest" else lrs[0],
                                                         c.edge == "highest"), note="(widened) ")

    # Each cell's grid (with its widened rates) and optimum, before the runs below add rates of their own.
    grid = {cell: sweep.choice(*cell) for cell in cells}

    # The d32 optimum applied to the wider models: one more run per width and parametrisation.
    transfer = {}
    for parametrisation in PARAMETRISATIONS:
        base_lr = grid[parametrisation, BASE_WIDTH][1].lr
        for width in WIDTHS[1:]:
            transfer[parametrisation, width] = sweep.loss(parametrisation, width, base_lr,
                                                          note=f"(d{BASE_WIDTH}'s optimum) ")
    # Single runs scatter: the best grid rate of each cell again, with another seed (init and batches).
    scatter = {}
    if not args.no_seed_check:
        for parametrisation, width in cells:
            lrs = grid[parametrisation, width][0]
            best = min(lrs, key=lambda lr: math.inf if sweep.loss(parametrisation, width, lr) is None
                       else sweep.loss(parametrisation, width, lr))
            other = sweep.loss(parametrisation, width, best, seed=SEED + 1, note="(seed check) ")
            first = sweep.loss(parametrisation, width, best)
            scatter[parametrisation, width] = None if other is None or first is None else other - first
    wall = time.perf_counter() - sweep.start

    all_lrs = sorted({lr for lrs, _ in grid.values() for lr in lrs})
    print(f"\n{args.tokens:,} tokens per run, seed {SEED}; final validation loss per rate, the optimum (parabola in "
          f"ln lr, scaling.tuning.shapes.choose) and its loss; L(d{BASE_WIDTH} opt): trained at d{BASE_WIDTH}'s "
          f"optimum; seed+1: the best rate's loss with seed {SEED + 1} minus seed {SEED}")
    print(f"{'param.':<9} {'width':>5} {'N':>5}  " + " ".join(f"{lr:>7g}" for lr in all_lrs)
          + f"  {'lr_opt':>7} {'L_opt':>7} {'L(d32 opt)':>10} {'penalty':>8} {'seed+1':>7}")
    for parametrisation, width in cells:
        lrs, c = grid[parametrisation, width]
        n = param_counts(gpt_config(width, vocab, context))[1]
        moved = transfer.get((parametrisation, width))
        penalty = None if moved is None or c.loss is None else moved - c.loss
        row = [fmt(sweep.loss(parametrisation, width, lr)) if lr in lrs else "" for lr in all_lrs]
        print(f"{parametrisation:<9} {'d' + str(width):>5} {n / 1e3:>4.0f}K  " + " ".join(f"{v:>7}" for v in row)
              + f"  {fmt(c.lr, '.3g'):>7} {fmt(c.loss):>7} {fmt(moved):>10} {fmt(penalty, '+.4f'):>8} "
              f"{fmt(scatter.get((parametrisation, width)), '+.3f'):>7}" + (f" ({c.edge} edge)" if c.edge else ""))
    print()
    for parametrisation in PARAMETRISATIONS:
        lo, hi = grid[parametrisation, WIDTHS[0]][1], grid[parametrisation, WIDTHS[-1]][1]
        ratio = hi.lr / lo.lr if lo.lr and hi.lr else None
        moved = transfer.get((parametrisation, WIDTHS[-1]))
        penalty = None if moved is None or hi.loss is None else moved - hi.loss
        print(f"{parametrisation:<9} lr_opt d{WIDTHS[-1]} / d{WIDTHS[0]} = {fmt(ratio, '.2f')}; "
              f"d{WIDTHS[0]}'s rate at d{WIDTHS[-1]} costs {fmt(penalty, '+.4f')} nats")
    print(f"\n{len(sweep.losses)} runs, wall time {wall / 60:.1f} min")

    if args.out:
        with open(args.out, "w") as f:
            json.dump({"tokens": args.tokens, "wall_s": wall, "base_identical": sweep.identical,
                       "runs": [{"parametrisation": p, "width": w, "lr": lr, "seed": s, "val_loss": v}
                                for (p, w, lr, s), v in sweep.losses.items()]}, f, indent=1)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
