#!/usr/bin/env python3
"""Exports the end-to-end test models to ONNX with PyTorch, with random
weights (torch.manual_seed(0); nothing is downloaded) and random inputs.

    python3 tests/models/export.py --out models [--models resnet50,mobilenetv2,bert]

For each model NAME it writes OUT/NAME.onnx and OUT/NAME.inputs.npz (inputs
keyed by graph input name) and prints what it wrote.

  resnet50     torchvision ResNet-50, input [1,3,224,224] f32 -> logits [1,1000]
  mobilenetv2  torchvision MobileNetV2, same input and output
  bert         BERT-base encoder (12 layers, hidden 768, 12 heads, FFN 3072),
               input_ids and attention_mask int64 [1,128] ->
               last_hidden_state [1,128,768], pooler_output [1,768].
               transformers' BertModel(BertConfig()) when transformers is
               importable, else an equivalent encoder built here from torch.nn
               (--bert-impl picks one explicitly).

The batch-norm affine parameters and running statistics are randomised too:
at their defaults (mean 0, var 1, weight 1, bias 0) batch norm is the
identity and a kiln bug in it would go unnoticed. ResNet's last batch norm
in each bottleneck gets small weights so the logits stay near 1. Eval-mode export folds
batch norm into the convolutions, so the folded weights carry them.

PyTorch comes from Debian (python3-torch, python3-torchvision), installed for
/usr/bin/python3 only; when the python3 running this lacks torch, the script
re-runs itself under /usr/bin/python3.
"""
import argparse
import os
import sys
import warnings

SYSTEM_PYTHON = "/usr/bin/python3"


def reexec_with_torch():
    try:
        import torch  # noqa: F401
        return
    except ImportError:
        pass
    if os.environ.get("KILN_EXPORT_REEXEC") or not os.path.exists(SYSTEM_PYTHON) or \
            os.path.realpath(sys.executable) == os.path.realpath(SYSTEM_PYTHON):
        sys.exit("export.py: PyTorch is not importable; install it with "
                 "scripts/setup-deps.sh --models (Debian python3-torch python3-torchvision)")
    os.environ["KILN_EXPORT_REEXEC"] = "1"
    os.execv(SYSTEM_PYTHON, [SYSTEM_PYTHON, os.path.abspath(__file__)] + sys.argv[1:])


reexec_with_torch()

import numpy as np  # noqa: E402
import torch  # noqa: E402
from torch import nn  # noqa: E402

SEED = 0
OPSET_WANTED = 17
BERT_SEQ = 128


def opset_version():
    try:
        from torch.onnx import _constants
        newest = _constants.ONNX_MAX_OPSET
    except (ImportError, AttributeError):
        newest = OPSET_WANTED
    return min(OPSET_WANTED, newest)


def randomize_batchnorm(model, gen):
    for m in model.modules():
        if isinstance(m, nn.BatchNorm2d):
            n = m.num_features
            with torch.no_grad():
                m.weight.copy_(torch.empty(n).uniform_(0.5, 1.5, generator=gen))
                m.bias.copy_(torch.randn(n, generator=gen) * 0.1)
                m.running_mean.copy_(torch.randn(n, generator=gen) * 0.1)
                m.running_var.copy_(torch.empty(n).uniform_(0.5, 1.5, generator=gen))
    # ResNet's residual stream grows with every block at these scales (logits
    # near 1e3); small weights on each bottleneck's last batch norm keep the
    # logits near 1, as a trained network's are, so fp32 error stays small.
    for m in model.modules():
        bn3 = getattr(m, "bn3", None)
        if isinstance(bn3, nn.BatchNorm2d):
            with torch.no_grad():
                bn3.weight.copy_(torch.empty(bn3.num_features).uniform_(0.2, 0.4, generator=gen))


def image_model(name):
    import torchvision

    ctor = {"resnet50": torchvision.models.resnet50,
            "mobilenetv2": torchvision.models.mobilenet_v2}[name]
    torch.manual_seed(SEED)
    try:
        model = ctor(weights=None)
    except TypeError:  # torchvision < 0.13
        model = ctor(pretrained=False)
    randomize_batchnorm(model, torch.Generator().manual_seed(SEED))
    rng = np.random.default_rng(SEED)
    x = rng.standard_normal((1, 3, 224, 224), dtype=np.float32)
    return model, {"input": x}, ["logits"]


# ---- BERT-base without transformers -------------------------------------------------
# Mirrors transformers' BertModel (post-LayerNorm layers, exact erf GELU,
# LayerNorm eps 1e-12, the tanh pooler over the first token, weights
# normal(0, 0.02)) so both implementations export the same graph shape.

class BertConfigLite:
    vocab_size = 30522
    hidden = 768
    layers = 12
    heads = 12
    ffn = 3072
    max_positions = 512
    type_vocab = 2
    eps = 1e-12


class BertLayerLite(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.heads, self.head_dim = c.heads, c.hidden // c.heads
        self.query = nn.Linear(c.hidden, c.hidden)
        self.key = nn.Linear(c.hidden, c.hidden)
        self.value = nn.Linear(c.hidden, c.hidden)
        self.attn_out = nn.Linear(c.hidden, c.hidden)
        self.attn_norm = nn.LayerNorm(c.hidden, eps=c.eps)
        self.ffn_in = nn.Linear(c.hidden, c.ffn)
        self.gelu = nn.GELU()  # approximate='none': 0.5 x (1 + erf(x / sqrt 2))
        self.ffn_out = nn.Linear(c.ffn, c.hidden)
        self.ffn_norm = nn.LayerNorm(c.hidden, eps=c.eps)

    def split(self, x):
        b, s, _ = x.shape
        return x.view(b, s, self.heads, self.head_dim).permute(0, 2, 1, 3)

    def forward(self, x, mask_bias):
        q, k, v = self.split(self.query(x)), self.split(self.key(x)), self.split(self.value(x))
        scores = torch.matmul(q, k.transpose(-1, -2)) / (self.head_dim ** 0.5) + mask_bias
        ctx = torch.matmul(torch.softmax(scores, dim=-1), v)
        b, _, s, _ = ctx.shape
        ctx = ctx.permute(0, 2, 1, 3).reshape(b, s, self.heads * self.head_dim)
        x = self.attn_norm(x + self.attn_out(ctx))
        return self.ffn_norm(x + self.ffn_out(self.gelu(self.ffn_in(x))))


class BertLite(nn.Module):
    def __init__(self, c=BertConfigLite()):
        super().__init__()
        self.word = nn.Embedding(c.vocab_size, c.hidden)
        self.position = nn.Embedding(c.max_positions, c.hidden)
        self.token_type = nn.Embedding(c.type_vocab, c.hidden)
        self.emb_norm = nn.LayerNorm(c.hidden, eps=c.eps)
        self.layers = nn.ModuleList(BertLayerLite(c) for _ in range(c.layers))
        self.pooler = nn.Linear(c.hidden, c.hidden)
        for m in self.modules():
            if isinstance(m, (nn.Linear, nn.Embedding)):
                nn.init.normal_(m.weight, std=0.02)
            if isinstance(m, nn.Linear):
                nn.init.zeros_(m.bias)

    def forward(self, input_ids, attention_mask):
        s = input_ids.shape[1]
        pos = torch.arange(s, dtype=torch.long).unsqueeze(0)
        x = self.word(input_ids) + self.position(pos) + self.token_type(torch.zeros_like(input_ids))
        x = self.emb_norm(x)
        mask_bias = (1.0 - attention_mask[:, None, None, :].to(torch.float32)) * \
            torch.finfo(torch.float32).min
        for layer in self.layers:
            x = layer(x, mask_bias)
        return x, torch.tanh(self.pooler(x[:, 0]))


class HFBert(nn.Module):
    """transformers' BertModel with positional (input_ids, attention_mask)
    and a plain tuple output."""

    def __init__(self):
        super().__init__()
        from transformers import BertConfig, BertModel

        self.bert = BertModel(BertConfig())

    def forward(self, input_ids, attention_mask):
        out = self.bert(input_ids=input_ids, attention_mask=attention_mask, return_dict=True)
        return out.last_hidden_state, out.pooler_output


def transformers_available():
    try:
        import transformers  # noqa: F401
        return True
    except ImportError:
        return False


def bert_model(impl):
    if impl == "auto":
        impl = "transformers" if transformers_available() else "torch"
    torch.manual_seed(SEED)
    model = HFBert() if impl == "transformers" else BertLite()
    rng = np.random.default_rng(SEED)
    ids = rng.integers(1000, BertConfigLite.vocab_size, size=(1, BERT_SEQ), dtype=np.int64)
    mask = np.ones((1, BERT_SEQ), dtype=np.int64)
    return model, {"input_ids": ids, "attention_mask": mask}, \
        ["last_hidden_state", "pooler_output"], impl


def op_summary(path):
    """"N nodes: Conv 53, Relu 49, ..." when the onnx package is importable."""
    try:
        import onnx
        model = onnx.load(path, load_external_data=False)
    except Exception:
        return ""
    counts = {}
    for n in model.graph.node:
        counts[n.op_type] = counts.get(n.op_type, 0) + 1
    ops = ", ".join("%s %d" % kv for kv in sorted(counts.items(), key=lambda kv: -kv[1]))
    return "%d nodes: %s" % (len(model.graph.node), ops)


def export(name, out_dir, bert_impl):
    note = ""
    if name == "bert":
        model, inputs, output_names, impl = bert_model(bert_impl)
        note = ", %s" % ("transformers BertModel" if impl == "transformers" else "torch.nn encoder")
    else:
        model, inputs, output_names = image_model(name)
    model.eval()
    onnx_path = os.path.join(out_dir, name + ".onnx")
    npz_path = os.path.join(out_dir, name + ".inputs.npz")
    args = tuple(torch.from_numpy(v) for v in inputs.values())
    opset = opset_version()
    # Written under temporary names and renamed, so an interrupted export
    # never leaves files that run_models.sh would take as a finished cache.
    tmp_onnx, tmp_npz = onnx_path + ".part", npz_path + ".part.npz"
    with torch.no_grad(), warnings.catch_warnings():
        warnings.simplefilter("ignore")  # tracer warnings about Python control flow
        torch.onnx.export(model, args, tmp_onnx, input_names=list(inputs),
                          output_names=output_names, opset_version=opset,
                          do_constant_folding=True)
    np.savez(tmp_npz, **inputs)
    os.replace(tmp_npz, npz_path)
    os.replace(tmp_onnx, onnx_path)
    print("wrote %s (opset %d%s)" % (onnx_path, opset, note))
    summary = op_summary(onnx_path)
    if summary:
        print("    " + summary)
    print("wrote %s (%s)" % (npz_path, ", ".join(
        "%s %s%s" % (k, v.dtype, list(v.shape)) for k, v in inputs.items())))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", required=True, help="output directory")
    ap.add_argument("--models", default="resnet50,mobilenetv2,bert",
                    help="comma-separated subset of resnet50,mobilenetv2,bert")
    ap.add_argument("--bert-impl", choices=["auto", "transformers", "torch"], default="auto",
                    help="BertModel from transformers, or the torch.nn encoder here "
                         "(auto: transformers when importable)")
    a = ap.parse_args()
    names = [m.strip() for m in a.models.split(",") if m.strip()]
    known = ("resnet50", "mobilenetv2", "bert")
    bad = [m for m in names if m not in known]
    if bad or not names:
        ap.error("unknown model(s) %s; choose from %s" % (", ".join(bad) or "(none)", ",".join(known)))
    os.makedirs(a.out, exist_ok=True)
    torch.set_num_threads(max(1, min(2, os.cpu_count() or 1)))
    for name in names:
        export(name, a.out, a.bert_impl)


if __name__ == "__main__":
    main()
