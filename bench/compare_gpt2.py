"""compare_torch.py's gpt2_forward rows: nanoGPT's GPT-2 in PyTorch, the twin
of examples/gpt2 (fusebox) as fusebox_bench's row describes it ("config":
sizes, bias, "manual" or "sdpa" attention, batch, seq). Built in float32
with nanoGPT's init, then cast to the row's dtype (bf16 by casting the model,
as nanoGPT's users do); idx and targets random token ids. Timed as the other
rows (compare_torch.run_variant): eager and torch.compile of model(idx,
targets) -> (logits, loss); checked against the same model in float64 (its
weights as cast, so bf16's rounding of the weights is not counted as error).
MLP's gelu is the tanh form, as examples/gpt2's (nanoGPT's nn.GELU() is the
exact one); keep the two models in step."""

import copy
import math


def gpt2_model(torch, cfg, seed):
    nn, F = torch.nn, torch.nn.functional
    C, nh, bs, bias = cfg["n_embd"], cfg["n_head"], cfg["block_size"], cfg["bias"]

    class CausalSelfAttention(nn.Module):
        def __init__(self):
            super().__init__()
            self.c_attn = nn.Linear(C, 3 * C, bias=bias)
            self.c_proj = nn.Linear(C, C, bias=bias)
            self.manual = cfg["attention"] == "manual"
            if self.manual:  # nanoGPT's slow path and its mask buffer
                self.register_buffer("bias", torch.tril(torch.ones(bs, bs)).view(1, 1, bs, bs))

        def forward(self, x):
            B, T, _ = x.size()
            q, k, v = (t.view(B, T, nh, C // nh).transpose(1, 2) for t in self.c_attn(x).split(C, dim=2))
            if self.manual:
                att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(k.size(-1)))
                att = att.masked_fill(self.bias[:, :, :T, :T] == 0, float("-inf"))
                y = F.softmax(att, dim=-1) @ v
            else:
                y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
            return self.c_proj(y.transpose(1, 2).contiguous().view(B, T, C))

    class MLP(nn.Module):
        def __init__(self):
            super().__init__()
            self.c_fc, self.c_proj = nn.Linear(C, 4 * C, bias=bias), nn.Linear(4 * C, C, bias=bias)

        def forward(self, x):
            return self.c_proj(F.gelu(self.c_fc(x), approximate="tanh"))

    class Block(nn.Module):
        def __init__(self):
            super().__init__()
            self.ln_1, self.ln_2 = nn.LayerNorm(C, bias=bias), nn.LayerNorm(C, bias=bias)
            self.attn, self.mlp = CausalSelfAttention(), MLP()

        def forward(self, x):
            x = x + self.attn(self.ln_1(x))
            return x + self.mlp(self.ln_2(x))

    class GPT(nn.Module):
        def __init__(self):
            super().__init__()
            self.wte, self.wpe = nn.Embedding(cfg["vocab_size"], C), nn.Embedding(bs, C)
            self.h = nn.ModuleList(Block() for _ in range(cfg["n_layer"]))
            self.ln_f = nn.LayerNorm(C, bias=bias)
            self.lm_head = nn.Linear(C, cfg["vocab_size"], bias=False)
            self.lm_head.weight = self.wte.weight  # tied
            for name, p in self.named_parameters():  # nanoGPT's init
                if name.endswith("c_proj.weight"):
                    nn.init.normal_(p, 0.0, 0.02 / math.sqrt(2 * cfg["n_layer"]))
                elif p.dim() == 2:
                    nn.init.normal_(p, 0.0, 0.02)
                elif name.endswith("bias"):
                    nn.init.zeros_(p)

        def forward(self, idx, targets):
            pos = torch.arange(0, idx.size(1), dtype=torch.long, device=idx.device)
            x = self.wte(idx) + self.wpe(pos)
            for block in self.h:
                x = block(x)
            logits = self.lm_head(self.ln_f(x))
            loss = F.cross_entropy(logits.view(-1, logits.size(-1)), targets.view(-1), ignore_index=-1)
            return logits, loss

    torch.manual_seed(seed)
    return GPT().cuda()


def run_gpt2_case(torch, r, run_variant, profile):
    """PyTorch's sides of one gpt2_forward row: eager and torch.compile."""
    cfg = r["config"]
    dtype = getattr(torch, r["dtype"])
    model = gpt2_model(torch, cfg, seed=1337).to(dtype).eval()
    reference = copy.deepcopy(model).double()
    gen = torch.Generator(device="cuda").manual_seed(r["numel"])
    shape = (cfg["batch"], cfg["seq"])
    idx, targets = (torch.randint(0, cfg["vocab_size"], shape, device="cuda", generator=gen) for _ in range(2))
    with torch.no_grad():
        ref = reference(idx, targets)[0]
        del reference
        result = {"builtin": None}
        for side, compile_first in (("eager", False), ("compiled", True)):
            try:
                # The row's tolerance: fusebox_bench's for this model and dtype.
                result[side] = run_variant(torch, model, [[idx, targets]], r, ref, profile, compile_first,
                                           output=lambda out: out[0], tol=r["rel_err_tol"])
            except Exception as e:  # an Inductor error ends one side, not the run
                result[side] = {"error": f"{type(e).__name__}: {e}", "ok": False}
    del ref, model
    torch.cuda.empty_cache()
    return result
