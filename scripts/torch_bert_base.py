# PyTorch eager baseline for hap's bert-base (models/zoo.go), for docs/gpu-runtime.md's
# speed table: python3 scripts/torch_bert_base.py BATCH. The model: 12 layers,
# hidden 768, 12 heads, FFN 3072, seq 128, vocab 33278, dropout 0.1,
# float32 without TF32, Adam, one training step per iteration.
import sys, time, torch, torch.nn as nn, torch.nn.functional as F
torch.backends.cuda.matmul.allow_tf32 = False
torch.backends.cudnn.allow_tf32 = False
B = int(sys.argv[1]) if len(sys.argv) > 1 else 8
S, H, NH, FF, V, L = 128, 768, 12, 3072, 33278, 12
class Layer(nn.Module):
    def __init__(s):
        super().__init__()
        s.q, s.k, s.v, s.o = (nn.Linear(H, H) for _ in range(4))
        s.ln1, s.ln2 = nn.LayerNorm(H), nn.LayerNorm(H)
        s.f1, s.f2 = nn.Linear(H, FF), nn.Linear(FF, H)
        s.d = nn.Dropout(0.1)
    def forward(s, x):
        b = x.shape[0]
        sp = lambda t: t.view(b, S, NH, H // NH).transpose(1, 2)
        q, k, v = sp(s.q(x)), sp(s.k(x)), sp(s.v(x))
        a = torch.softmax(q @ k.transpose(-1, -2) / (H // NH) ** 0.5, -1) @ v
        x = s.ln1(x + s.d(s.o(a.transpose(1, 2).reshape(b, S, H))))
        return s.ln2(x + s.d(s.f2(F.gelu(s.f1(x)))))
class Bert(nn.Module):
    def __init__(s):
        super().__init__()
        s.tok, s.pos = nn.Embedding(V, H), nn.Embedding(S, H)
        s.ln = nn.LayerNorm(H)
        s.layers = nn.ModuleList(Layer() for _ in range(L))
        s.dec = nn.Linear(H, V)
    def forward(s, ids, lab):
        x = s.ln(s.tok(ids) + s.pos.weight[None])
        for l in s.layers:
            x = l(x)
        return F.cross_entropy(s.dec(x).view(-1, V), lab.view(-1), reduction='sum')
m = Bert().cuda()
opt = torch.optim.Adam(m.parameters(), 1e-3)
ids = torch.randint(0, V, (B, S), device='cuda'); lab = torch.randint(0, V, (B, S), device='cuda')
def step():
    opt.zero_grad(set_to_none=True)
    m(ids, lab).backward()
    opt.step()
for _ in range(5): step()
torch.cuda.synchronize()
times = []
for _ in range(20):
    e0, e1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    e0.record(); step(); e1.record(); torch.cuda.synchronize()
    times.append(e0.elapsed_time(e1))
times.sort()
print(f"pytorch eager bert-base batch {B} fp32: median {times[10]:.2f} ms, min {times[0]:.2f} ms")
